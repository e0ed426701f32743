/* Reference run for the bindings' bit-identity test: trains a small model on the RRT
 * dataset and prints every loss and the final weights as exact hex floats. */
#include <induct/induct.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    unsigned steps = argc > 1 ? (unsigned)atoi(argv[1]) : 10;
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    mc.n_layers = 2; mc.d_model = 32; mc.n_heads = 2; mc.n_ctx = 32; mc.d_vocab = 16;
    mc.layer_norm = 1; mc.d_mlp = 32; mc.smeared_keys = 1; mc.positional = INDUCT_POS_SHORTFORMER;
    mc.seed = 11;
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 16; rc.min_block = 4; rc.seed = 5;
    induct_model *m; induct_dataset *d; induct_optimizer *o;
    if (induct_model_new(&m, &mc) || induct_dataset_new_rrt(&d, &rc) ||
        induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW) ||
        induct_optimizer_set(o, INDUCT_OPT_LR, 3e-3) ||
        induct_optimizer_set(o, INDUCT_OPT_WARMUP_STEPS, 3)) {
        fprintf(stderr, "%s\n", induct_last_error_message());
        return 1;
    }
    for (unsigned s = 0; s < steps; s++) {
        double loss;
        if (induct_train_step(o, d, 8, 32, &loss)) return 1;
        printf("loss %a\n", loss);
    }
    size_t nt = induct_model_n_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        const char *name; size_t n, len;
        induct_model_tensor_info(m, i, &name, NULL, NULL, &n);
        float *buf = malloc(n * sizeof *buf);
        induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, buf, n, &len);
        printf("tensor %s", name);
        for (size_t j = 0; j < n; j++) printf(" %a", (double)buf[j]);
        printf("\n");
        free(buf);
    }
    induct_optimizer_free(o); induct_model_free(m); induct_dataset_free(d);
    return 0;
}
