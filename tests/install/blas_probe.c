/* A short training run against an installed libinduct, built with the installed
 * induct.pc (tests/test_install.py). Prints which OpenBLAS build the process actually
 * loaded, every step's loss as exact bits, and a hash of every weight after training,
 * so that two runs can be compared bit for bit.
 *
 * Usage: blas_probe N_THREADS
 */
#define _GNU_SOURCE
#include <induct/induct.h>

#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(int rc, const char *what) {
    fprintf(stderr, "blas_probe: %s: %s (%s)\n", what, induct_status_name(rc),
            induct_last_error_message());
    exit(1);
}

int main(int argc, char **argv) {
    unsigned threads = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 2;
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    mc.n_layers = 2;
    mc.d_model = 64;
    mc.n_heads = 4;
    mc.n_ctx = 64;
    mc.d_vocab = 64;
    mc.d_mlp = 128; /* an MLP too: more and larger products */
    mc.init = INDUCT_INIT_TORCH;
    mc.n_threads = threads;
    induct_model *m;
    int rc;
    if ((rc = induct_model_new(&m, &mc))) fail(rc, "model");
    induct_rrt_config dc;
    induct_rrt_config_init(&dc, sizeof dc);
    dc.d_vocab = 64;
    induct_dataset *d;
    if ((rc = induct_dataset_new_rrt(&d, &dc))) fail(rc, "dataset");
    induct_optimizer *o;
    if ((rc = induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW))) fail(rc, "optimizer");
    if ((rc = induct_optimizer_set(o, INDUCT_OPT_LR, 1e-3))) fail(rc, "lr");

    /* the OpenBLAS this process resolved: 0 sequential, 1 pthreads, 2 OpenMP */
    int (*get_parallel)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_parallel");
    char *(*get_config)(void) = (char *(*)(void))dlsym(RTLD_DEFAULT, "openblas_get_config");
    printf("openblas_parallel %d\n", get_parallel ? get_parallel() : -1);
    printf("openblas_config %s\n", get_config ? get_config() : "?");

    for (int s = 0; s < 8; s++) {
        double loss;
        if ((rc = induct_train_step(o, d, 16, 64, &loss))) fail(rc, "train step");
        uint64_t bits;
        memcpy(&bits, &loss, sizeof bits);
        printf("step %d loss %016" PRIx64 "\n", s, bits);
    }
    uint64_t h = 1469598103934665603ull; /* FNV-1a over every weight's bytes */
    for (size_t i = 0; i < induct_model_n_tensors(m); i++) {
        const char *name;
        size_t n;
        if ((rc = induct_model_tensor_info(m, i, &name, NULL, NULL, &n))) fail(rc, "tensor");
        float *w = malloc(n * sizeof *w);
        if (!w) fail(INDUCT_ENOMEM, "malloc");
        if ((rc = induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, w, n, NULL)))
            fail(rc, name);
        const unsigned char *b = (const unsigned char *)w;
        for (size_t k = 0; k < n * sizeof *w; k++) h = (h ^ b[k]) * 1099511628211ull;
        free(w);
    }
    printf("weights %016" PRIx64 "\n", h);

    /* an evaluation-sized forward pass with a row count that is no multiple of any
     * OpenBLAS tile, and the ablation attribution (larger products than training) */
    enum { B = 40, T = 61 };
    static int32_t tok[B * T];
    static float losses[B * (T - 1)];
    if ((rc = induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, B, T, tok, B * T, NULL, 0)))
        fail(rc, "batch");
    if ((rc = induct_model_forward(m, tok, B, T, NULL, 0, losses, B * (T - 1), NULL)))
        fail(rc, "forward");
    h = 1469598103934665603ull;
    const unsigned char *lb = (const unsigned char *)losses;
    for (size_t k = 0; k < sizeof losses; k++) h = (h ^ lb[k]) * 1099511628211ull;
    printf("forward %016" PRIx64 "\n", h);
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec);
    ec.n_seq = 16;
    ec.seq_len = 64;
    ec.early = 5;
    ec.late = 50;
    float att[2 * 4];
    double icl;
    if ((rc = induct_analysis_ablation_attribution(m, d, &ec, INDUCT_ABLATE_ZERO, att, 8, NULL,
                                                    &icl)))
        fail(rc, "ablation attribution");
    uint64_t ib;
    memcpy(&ib, &icl, sizeof ib);
    printf("icl %016" PRIx64 " attribution", ib);
    for (int k = 0; k < 8; k++) {
        uint32_t ab;
        memcpy(&ab, &att[k], sizeof ab);
        printf(" %08" PRIx32, ab);
    }
    printf("\n");
    /* the pthread build's own pool size after libinduct used it (1: ours alone) */
    int (*get_threads)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
    printf("openblas_threads_after %d\n", get_threads ? get_threads() : -1);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
    return 0;
}
