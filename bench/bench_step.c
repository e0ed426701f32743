/* bench_step: the libinduct side of bench/bench.py (not a test).
 *
 *   bench_step step [--vocab V] [--seq T] [--d-model D] [--heads H] [--layers L]
 *                   [--mlp M] [--layernorm 0|1] [--batch B] [--threads N]
 *                   [--positional standard|shortformer] [--smeared 0|1] [--d-head E]
 *                   [--shortformer-layers N]
 *                   [--grad-shards S]
 *       Builds the model (PyTorch-default initialisation, AdamW lr 1e-3, wd 0.01; S
 *       gradient shards, INDUCT_OPT_GRAD_SHARDS, default 1) and
 *       serves commands on stdin, one per line, answering one JSON line each:
 *         warm N   N untimed training steps
 *         run N    N timed training steps: {"ms": [...], "cpu_ms": [...]} (wall and
 *                  process CPU time per step)
 *         eval N   N timed forward-only passes (induct_model_forward, no logits copy):
 *                  {"ms": [...]}
 *         evalb B N  N timed forward-only passes at batch B (the first one may grow the
 *                  workspace): {"ms": [...]}
 *         scores S N N timed calls of the induction score and the previous-token score
 *                  on S sequences of a repeated-random-token dataset: {"ms": [...]}
 *         cache N  N rounds of three passes on the training batch, in turn: a plain forward
 *                  (induct_model_forward, losses only), a cache of every hook point but
 *                  attn.hook_result (TransformerLens's run_with_cache default), and a cache
 *                  of every point with it (induct_model_run_with_cache, buffers reused):
 *                  {"plain": [...], "cache": [...], "cache_result": [...]} (ms)
 *         gradcache N  N rounds of two passes on the training batch, in turn: a plain
 *                  forward and backward (induct_model_backward) and one whose gradient
 *                  hooks copy the gradient at every hook point but attn.hook_result
 *                  (induct_model_backward_with_grad_hooks, what TransformerLens's
 *                  run_with_cache(incl_bwd=True) keeps; buffers reused):
 *                  {"backward": [...], "grad_cache": [...]} (ms)
 *         rss      {"peak_rss_kib": ..., "base_rss_kib": ..., "n_params": ...}
 *         quit
 *   bench_step roof [--threads N] [--size S] [--reps R]
 *       Times cblas_sgemm (OpenBLAS, OpenMP build, N threads) on S x S x S from warm
 *       buffers: {"gflops": best, "median_gflops": ...}.
 *
 * Tokens: 4 fixed batches of uniform random ids, used in turn (the data path is
 * not timed). One process per model so that peak RSS is the model's.
 */
#define _POSIX_C_SOURCE 200809L
#include <induct/induct.h>

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static long rss_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n)) v = strtol(line + n, NULL, 10);
    fclose(f);
    return v;
}

static void die(int rc, const char *what) {
    if (rc == INDUCT_OK) return;
    fprintf(stderr, "bench_step: %s: %s (%s)\n", what, induct_status_name(rc),
            induct_last_error_message());
    exit(1);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int roof(int argc, char **argv) {
    int threads = 1, size = 1024, reps = 10;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--size")) size = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
#ifdef _OPENMP
    omp_set_num_threads(threads); /* our own process: OpenBLAS-OpenMP sizes its team from it */
#endif
    size_t n = (size_t)size * size;
    float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    if (!a || !b || !c) return 1;
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
        b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
        c[i] = 0.0f;
    }
    /* small products run many times per sample so one sample lasts >= ~20 ms */
    double flop = 2.0 * size * (double)size * size;
    int inner = (int)(4e9 / flop);
    if (inner < 1) inner = 1;
    double best = 0, *g = malloc(sizeof(double) * (size_t)reps);
    for (int r = -1; r < reps; r++) {
        double t0 = now_ms();
        for (int k = 0; k < inner; k++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, size, size, size, 1.0f, a, size,
                        b, size, 0.0f, c, size);
        double ms = now_ms() - t0;
        if (r < 0) continue; /* warm-up */
        g[r] = flop * inner / (ms * 1e6);
        if (g[r] > best) best = g[r];
    }
    qsort(g, (size_t)reps, sizeof *g, cmp_double);
    printf("{\"size\": %d, \"threads\": %d, \"gflops\": %.2f, \"median_gflops\": %.2f}\n", size,
           threads, best, g[reps / 2]);
    free(a);
    free(b);
    free(c);
    free(g);
    return 0;
}

/* One JSON line {"key": [ms per round, ...], ...}: series k is t[k * rounds ...]. */
static void print_rounds(const char *const *key, int n_keys, const double *t, size_t rounds) {
    printf("{");
    for (int k = 0; k < n_keys; k++) {
        printf("%s\"%s\": [", k ? ", " : "", key[k]);
        for (size_t r = 0; r < rounds; r++) printf("%s%.4f", r ? ", " : "", t[k * rounds + r]);
        printf("]");
    }
    printf("}\n");
    fflush(stdout);
}

/* The cache command (see the top): every hook point of the model, with and without the
 * per-head results, against a plain forward pass, alternated round by round. */
static void cache_rounds(induct_model *m, const int32_t *tok, uint32_t B, uint32_t T,
                         size_t rounds) {
    enum { MAXP = 256 };
    char names[MAXP][96];
    const char *all[MAXP], *dflt[MAXP]; /* every point; all but the per-head results */
    float *bufs[MAXP], *dbufs[MAXP];
    size_t caps[MAXP], dcaps[MAXP], np = 0, nr = 0, len;
    while (np < MAXP && induct_model_hook_point(m, np, names[np], sizeof names[np], &len) ==
                            INDUCT_OK) {
        die(induct_model_hook_shape(m, names[np], B, T, NULL, NULL, &caps[np]), "hook shape");
        bufs[np] = malloc(caps[np] * sizeof(float));
        if (!bufs[np]) die(INDUCT_ENOMEM, "cache buffers");
        all[np] = names[np];
        if (!strstr(names[np], "hook_result")) {
            dflt[nr] = names[np], dbufs[nr] = bufs[np], dcaps[nr] = caps[np];
            nr++;
        }
        np++;
    }
    double *t = malloc(3 * rounds * sizeof *t);
    for (size_t r = 0; r < rounds; r++) {
        double t0 = now_ms();
        die(induct_model_forward(m, tok, B, T, NULL, 0, NULL, 0, NULL), "forward");
        double t1 = now_ms();
        die(induct_model_run_with_cache(m, tok, B, T, dflt, dbufs, dcaps, nr, NULL, 0, NULL),
            "cache");
        double t2 = now_ms();
        die(induct_model_run_with_cache(m, tok, B, T, all, bufs, caps, np, NULL, 0, NULL),
            "cache with hook_result");
        double t3 = now_ms();
        t[r] = t1 - t0, t[rounds + r] = t2 - t1, t[2 * rounds + r] = t3 - t2;
    }
    const char *key[3] = {"plain", "cache", "cache_result"};
    print_rounds(key, 3, t, rounds);
    for (size_t i = 0; i < np; i++) free(bufs[i]);
    free(t);
}

/* A gradient hook that copies the gradient into the buffer in user (sized by the caller). */
static int copy_grad(void *user, const char *name, float *g, const uint32_t *shape,
                     uint32_t ndim) {
    size_t n = 1;
    (void)name;
    for (uint32_t i = 0; i < ndim; i++) n *= shape[i];
    memcpy(user, g, n * sizeof *g);
    return 0;
}

/* The gradcache command (see the top). */
static void grad_cache_rounds(induct_model *m, const int32_t *tok, uint32_t B, uint32_t T,
                              size_t rounds) {
    enum { MAXP = 256 };
    char names[MAXP][96];
    induct_hook gh[MAXP];
    float *bufs[MAXP];
    size_t np = 0, len, cap;
    for (size_t k = 0; k < MAXP && induct_model_hook_point(m, k, names[np], sizeof names[np],
                                                           &len) == INDUCT_OK;
         k++) {
        if (strstr(names[np], "hook_result")) continue;
        die(induct_model_hook_shape(m, names[np], B, T, NULL, NULL, &cap), "hook shape");
        bufs[np] = malloc(cap * sizeof(float));
        if (!bufs[np]) die(INDUCT_ENOMEM, "gradient buffers");
        gh[np] = (induct_hook){names[np], copy_grad, bufs[np]};
        np++;
    }
    double *t = malloc(2 * rounds * sizeof *t);
    if (!t) die(INDUCT_ENOMEM, "times");
    for (size_t r = 0; r < rounds; r++) {
        double t0 = now_ms();
        die(induct_model_backward(m, tok, B, T, NULL), "backward");
        double t1 = now_ms();
        die(induct_model_backward_with_grad_hooks(m, tok, B, T, NULL, 0, gh, np, NULL),
            "backward with gradient hooks");
        double t2 = now_ms();
        t[r] = t1 - t0, t[rounds + r] = t2 - t1;
    }
    const char *key[2] = {"backward", "grad_cache"};
    print_rounds(key, 2, t, rounds);
    for (size_t i = 0; i < np; i++) free(bufs[i]);
    free(t);
}

static int step(int argc, char **argv) {
    unsigned V = 64, T = 24, D = 64, H = 4, L = 2, M = 0, LN = 0, B = 64, threads = 1;
    unsigned pos = INDUCT_POS_STANDARD, smeared = 0, shards = 1, E = 0, SL = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        unsigned v = (unsigned)strtoul(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--positional")) {
            if (!strcmp(argv[i + 1], "shortformer")) pos = INDUCT_POS_SHORTFORMER;
            else if (strcmp(argv[i + 1], "standard")) {
                fprintf(stderr, "bench_step: --positional standard|shortformer\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--smeared")) smeared = v;
        else if (!strcmp(argv[i], "--d-head")) E = v;
        else if (!strcmp(argv[i], "--shortformer-layers")) SL = v;
        else if (!strcmp(argv[i], "--grad-shards")) shards = v;
        else if (!strcmp(argv[i], "--vocab")) V = v;
        else if (!strcmp(argv[i], "--seq")) T = v;
        else if (!strcmp(argv[i], "--d-model")) D = v;
        else if (!strcmp(argv[i], "--heads")) H = v;
        else if (!strcmp(argv[i], "--layers")) L = v;
        else if (!strcmp(argv[i], "--mlp")) M = v;
        else if (!strcmp(argv[i], "--layernorm")) LN = v;
        else if (!strcmp(argv[i], "--batch")) B = v;
        else if (!strcmp(argv[i], "--threads")) threads = v;
        else {
            fprintf(stderr, "bench_step: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    long base_rss = rss_kib("VmRSS:");
    induct_model_config c;
    die(induct_model_config_init(&c, sizeof c), "config");
    c.n_layers = L;
    c.d_model = D;
    c.n_heads = H;
    c.d_head = E; /* 0: D / H */
    c.d_mlp = M;
    c.n_ctx = T;
    c.d_vocab = V;
    c.layer_norm = LN;
    c.positional = pos;
    c.smeared_keys = smeared;
    c.shortformer_layers = SL; /* 0: every layer */
    c.init = INDUCT_INIT_TORCH;
    c.n_threads = threads;
    c.seed = 1;
    induct_model *m;
    die(induct_model_new(&m, &c), "model");
    induct_optimizer *o;
    die(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW), "optimizer");
    die(induct_optimizer_set(o, INDUCT_OPT_LR, 1e-3), "lr");
    die(induct_optimizer_set(o, INDUCT_OPT_WEIGHT_DECAY, 0.01), "wd");
    die(induct_optimizer_set(o, INDUCT_OPT_GRAD_SHARDS, shards), "grad shards");
    enum { NB = 4 };
    size_t n = (size_t)B * T;
    int32_t *tok = malloc(NB * n * sizeof *tok);
    if (!tok) return 1;
    uint64_t s = 12345;
    for (size_t i = 0; i < NB * n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        tok[i] = (int32_t)((s >> 33) % V);
    }
    size_t it = 0;
    char line[128];
    double *ms = NULL, *cpu = NULL;
    size_t ms_cap = 0;
    while (fgets(line, sizeof line, stdin)) {
        char cmd[16] = {0};
        long k = 0, k2 = 0;
        int nf = sscanf(line, "%15s %ld %ld", cmd, &k, &k2);
        if (nf < 1) continue;
        if (!strcmp(cmd, "quit")) break;
        if (!strcmp(cmd, "evalb") || !strcmp(cmd, "scores")) {
            if (nf < 3 || k < 1 || k2 < 1) continue;
            int sc = !strcmp(cmd, "scores");
            size_t nb = (size_t)k * T;
            int32_t *tb = malloc(nb * sizeof *tb);
            induct_dataset *d = NULL;
            induct_rrt_config rc;
            die(induct_rrt_config_init(&rc, sizeof rc), "rrt config");
            rc.d_vocab = V;
            rc.seed = 7;
            die(induct_dataset_new_rrt(&d, &rc), "rrt");
            die(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, (uint32_t)k, T, tb, nb, NULL, 0),
                "batch");
            float out[4096];
            size_t len;
            printf("{\"ms\": [");
            for (long j = 0; j < k2; j++) {
                double t0 = now_ms();
                if (sc) {
                    die(induct_analysis_induction_score(m, d, (uint32_t)k, T, out, 4096, &len),
                        "induction score");
                    die(induct_analysis_previous_token_score(m, d, (uint32_t)k, T, out, 4096,
                                                             &len),
                        "previous-token score");
                } else {
                    die(induct_model_forward(m, tb, (uint32_t)k, T, NULL, 0, NULL, 0, NULL),
                        "forward");
                }
                printf("%s%.4f", j ? ", " : "", now_ms() - t0);
            }
            printf("]}\n");
            fflush(stdout);
            induct_dataset_free(d);
            free(tb);
            continue;
        }
        if (!strcmp(cmd, "cache")) {
            if (nf < 2 || k < 1) continue;
            cache_rounds(m, tok, B, T, (size_t)k);
            continue;
        }
        if (!strcmp(cmd, "gradcache")) {
            if (nf < 2 || k < 1) continue;
            grad_cache_rounds(m, tok, B, T, (size_t)k);
            continue;
        }
        if (!strcmp(cmd, "rss")) {
            printf("{\"peak_rss_kib\": %ld, \"base_rss_kib\": %ld, \"n_params\": %zu}\n",
                   rss_kib("VmHWM:"), base_rss, induct_model_n_params(m));
            fflush(stdout);
            continue;
        }
        if (k < 0) k = 0;
        if ((size_t)k > ms_cap) {
            ms = realloc(ms, (size_t)k * sizeof *ms);
            cpu = realloc(cpu, (size_t)k * sizeof *cpu);
            ms_cap = (size_t)k;
        }
        int timed = strcmp(cmd, "warm") != 0, eval = !strcmp(cmd, "eval");
        for (long j = 0; j < k; j++) {
            const int32_t *tb = tok + (it++ % NB) * n;
            double t0 = now_ms(), c0 = cpu_ms(), loss;
            if (eval)
                die(induct_model_forward(m, tb, B, T, NULL, 0, NULL, 0, &loss), "forward");
            else
                die(induct_train_step_tokens(o, tb, B, T, &loss), "train step");
            if (timed) {
                ms[j] = now_ms() - t0;
                cpu[j] = cpu_ms() - c0;
            }
        }
        if (timed) {
            printf("{\"ms\": [");
            for (long j = 0; j < k; j++) printf("%s%.4f", j ? ", " : "", ms[j]);
            printf("], \"cpu_ms\": [");
            for (long j = 0; j < k; j++) printf("%s%.4f", j ? ", " : "", cpu[j]);
            printf("]}\n");
        } else {
            printf("{}\n");
        }
        fflush(stdout);
    }
    free(ms);
    free(cpu);
    free(tok);
    induct_optimizer_free(o);
    induct_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "roof")) return roof(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "step")) return step(argc, argv);
    fprintf(stderr, "usage: bench_step step|roof [options] (see bench/README.md)\n");
    return 2;
}
