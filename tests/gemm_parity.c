/* gemm_parity: one program, linked twice by tests/meson.build (against the BLAS build of
 * the library and against a copy compiled with -DINDUCT_PORTABLE_GEMM), whose JSON output
 * test_gemm_parity.py compares. Public API only. The model is the repeated-random-tokens
 * experiment's (examples/induction_rrt.c: attention-only, d_model 64, 4 heads, T 64,
 * PyTorch initialisation), 2 layers, smeared keys on (one more product path), plus a
 * 1-layer model with an MLP and LayerNorm (the remaining products).
 *
 * Output: {"models": [{"losses": [...], "grads": {name: [...]}, "train": [...],
 *          "induction": [...]}, ...]} */
#include <induct/induct.h>

#include <stdio.h>
#include <stdlib.h>

#define T 64
#define B 8

static void check(int rc, const char *what) {
    if (rc != INDUCT_OK) {
        fprintf(stderr, "gemm_parity: %s: %s (%s)\n", what, induct_status_name(rc),
                induct_last_error_message());
        exit(1);
    }
}

static void list(const float *x, size_t n) {
    printf("[");
    for (size_t i = 0; i < n; i++) printf("%s%.9g", i ? "," : "", x[i]);
    printf("]");
}

static void run(uint32_t layers, uint32_t d_mlp, uint32_t ln, uint32_t smeared, int last) {
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    mc.n_layers = layers;
    mc.d_mlp = d_mlp;
    mc.layer_norm = ln;
    mc.smeared_keys = smeared;
    mc.n_ctx = T;
    mc.init = INDUCT_INIT_TORCH;
    mc.seed = 3;
    induct_model *m;
    check(induct_model_new(&m, &mc), "model");
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.seed = 4;
    induct_dataset *d;
    check(induct_dataset_new_rrt(&d, &rc), "dataset");
    static int32_t tok[B * T];
    check(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, B, T, tok, B * T, NULL, 0), "batch");

    static float losses[B * (T - 1)];
    check(induct_model_forward(m, tok, B, T, NULL, 0, losses, B * (T - 1), NULL), "forward");
    printf("{\"layers\":%u,\"d_mlp\":%u,\"losses\":", layers, d_mlp);
    list(losses, B * (T - 1));
    check(induct_model_backward(m, tok, B, T, NULL), "backward");
    printf(",\"grads\":{");
    for (size_t i = 0; i < induct_model_n_tensors(m); i++) {
        const char *name;
        size_t n;
        check(induct_model_tensor_info(m, i, &name, NULL, NULL, &n), "tensor_info");
        float *g = malloc(n * sizeof *g);
        if (!g) exit(1);
        check(induct_model_get_tensor(m, name, INDUCT_BUF_GRAD, g, n, NULL), "get_tensor");
        printf("%s\"%s\":", i ? "," : "", name);
        list(g, n);
        free(g);
    }
    printf("},\"train\":[");
    induct_optimizer *o;
    check(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW), "optimizer");
    for (int s = 0; s < 20; s++) {
        double loss;
        check(induct_train_step(o, d, 16, T, &loss), "train step");
        printf("%s%.9g", s ? "," : "", loss);
    }
    float sc[16];
    check(induct_analysis_induction_score(m, d, 16, T, sc, 16, NULL), "induction score");
    printf("],\"induction\":");
    list(sc, (size_t)layers * mc.n_heads);
    printf("}%s", last ? "" : ",");
    induct_optimizer_free(o);
    induct_dataset_free(d);
    induct_model_free(m);
}

int main(void) {
    printf("{\"models\":[");
    run(2, 0, 0, 1, 0);
    run(1, 256, 1, 0, 1);
    printf("]}\n");
    return 0;
}
