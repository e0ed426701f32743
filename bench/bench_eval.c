/* Time the main job's evaluation over groups of windows (induct_analysis_icl_groups, as
 * study-analyse runs it) on its model shape: 2 layers, 2 heads, d_model 64, attention
 * only, LayerNorm, shortformer positions, d_vocab 2049, n_ctx 512; groups of windows of
 * an RRT dataset, chunk 8.
 * Each group runs induct_analysis_loss_vectors() over all 511 positions ("full"), then
 * with induct_eval_config.positions set to the ±5-token bands around tokens 50 and 500
 * ("band", 22 positions), and compares the two at the band's positions bit for bit.
 * Prints the median wall and process CPU time of `runs` repetitions of each.
 * Usage: bench_eval [windows [groups [runs [n_threads]]]] (defaults 1024 8 3 1).
 * Registered with meson's benchmark(): `meson test -C build --benchmark`. */
#include <induct/induct.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_of(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void ok(int rc, const char *what) {
    if (rc != INDUCT_OK) {
        fprintf(stderr, "%s: %s (%s)\n", what, induct_status_name(rc), induct_last_error_message());
        exit(1);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

enum { T = 512, W = 5, EARLY = 50, LATE = 500, NPOS = 2 * (2 * W + 1) };

/* One eval_groups-like evaluation: every group's context-index average into avg
 * [groups][T - 1]. */
static void evaluate(induct_model *m, const induct_dataset *d, uint32_t groups, uint32_t per,
                     const uint32_t *pos, uint32_t npos, float *avg) {
    for (uint32_t g = 0; g < groups; g++) {
        induct_eval_config ec;
        induct_eval_config_init(&ec, sizeof ec);
        ec.n_seq = per;
        ec.chunk = per < 8 ? per : 8;
        ec.seq_len = T;
        ec.early = EARLY;
        ec.late = LATE;
        ec.batch_index = g;
        ec.positions = pos;
        ec.n_positions = npos;
        ok(induct_analysis_loss_vectors(m, d, &ec, NULL, 0, avg + (size_t)g * (T - 1), T - 1),
           "loss_vectors");
    }
}

int main(int argc, char **argv) {
    uint32_t windows = argc > 1 ? (uint32_t)atoi(argv[1]) : 1024;
    uint32_t groups = argc > 2 ? (uint32_t)atoi(argv[2]) : 8;
    int runs = argc > 3 ? atoi(argv[3]) : 3;
    uint32_t nt = argc > 4 ? (uint32_t)atoi(argv[4]) : 1;
    if (groups == 0 || windows < groups || runs < 1 || runs > 64) {
        fprintf(stderr, "usage: bench_eval [windows [groups [runs [n_threads]]]]\n");
        return 2;
    }
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = 2;
    c.d_model = 64;
    c.n_heads = 2;
    c.d_head = 32;
    c.d_mlp = 0;
    c.n_ctx = T;
    c.d_vocab = 2049;
    c.layer_norm = 1;
    c.positional = INDUCT_POS_SHORTFORMER;
    c.n_threads = nt;
    c.seed = 1;
    induct_model *m;
    ok(induct_model_new(&m, &c), "model");
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = c.d_vocab;
    rc.seed = 2;
    induct_dataset *d;
    ok(induct_dataset_new_rrt(&d, &rc), "dataset");
    uint32_t per = windows / groups, pos[NPOS];
    for (uint32_t k = 0; k <= 2 * W; k++) {
        pos[k] = EARLY - 1 - W + k;
        pos[2 * W + 1 + k] = LATE - 1 - W + k;
    }
    size_t n = (size_t)groups * (T - 1);
    float *full = malloc(n * sizeof *full), *band = malloc(n * sizeof *band);
    if (!full || !band) return 1;
    double wall[2][64], cpu[2][64];
    for (int r = 0; r < runs; r++)
        for (int v = 0; v < 2; v++) {
            double w0 = clock_of(CLOCK_MONOTONIC), c0 = clock_of(CLOCK_PROCESS_CPUTIME_ID);
            evaluate(m, d, groups, per, v ? pos : NULL, v ? NPOS : 0, v ? band : full);
            wall[v][r] = clock_of(CLOCK_MONOTONIC) - w0;
            cpu[v][r] = clock_of(CLOCK_PROCESS_CPUTIME_ID) - c0;
        }
    size_t differ = 0, nan_ok = 1;
    double maxdiff = 0;
    for (uint32_t g = 0; g < groups; g++) {
        const float *a = full + (size_t)g * (T - 1), *b = band + (size_t)g * (T - 1);
        uint32_t j = 0;
        for (uint32_t p = 0; p < T - 1; p++) {
            if (j < NPOS && pos[j] == p) {
                if (memcmp(a + p, b + p, sizeof *a)) differ++;
                double dd = fabs((double)a[p] - b[p]);
                if (dd > maxdiff) maxdiff = dd;
                j++;
            } else if (!isnan(b[p])) {
                nan_ok = 0;
            }
        }
    }
    double wf = median(wall[0], runs), wb = median(wall[1], runs);
    double cf = median(cpu[0], runs), cb = median(cpu[1], runs);
    printf("eval: %u windows x %u tokens in %u groups, d_model 64, d_vocab 2049, %u thread(s), "
           "median of %d\n",
           per * groups, T, groups, nt, runs);
    printf("  full (511 positions): wall %.3f s  cpu %.3f s\n", wf, cf);
    printf("  band (%d positions):   wall %.3f s  cpu %.3f s\n", NPOS, wb, cb);
    printf("  speed-up: wall %.2fx  cpu %.2fx\n", wf / wb, cf / cb);
    printf("  band positions that differ in bits: %zu of %zu (max |diff| %.3g nats); "
           "NaN elsewhere: %s\n",
           differ, (size_t)groups * NPOS, maxdiff, nan_ok ? "yes" : "NO");
    free(full);
    free(band);
    induct_dataset_free(d);
    induct_model_free(m);
    return nan_ok ? 0 : 1;
}
