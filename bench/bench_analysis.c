/* Time one analysis pass at the paper's default settings on a 2-layer attention-only
 * model with d_model 256 and 8 heads (n_ctx 512): loss curve (hence the ICL score,
 * tokens 50 and 500) and per-token loss vector over the default evaluation set (8
 * sequences x 512), prefix-matching / duplicate / copying on the default probe (BOS +
 * 25 tokens x 4, 10 sequences), previous-token score (4 x 512 tokens), OV eigenvalue
 * copying, Q/K/V composition and its baseline, ablation attribution of all 16 heads
 * (with the ICL score), head classification. Usage: bench_analysis [d_vocab [n_threads [chunk]]].
 * Registered with meson's benchmark(): `meson test -C build --benchmark`. */
#include <induct/induct.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void ok(int rc, const char *what) {
    if (rc != INDUCT_OK) {
        fprintf(stderr, "%s: %s (%s)\n", what, induct_status_name(rc), induct_last_error_message());
        exit(1);
    }
}

int main(int argc, char **argv) {
    uint32_t V = argc > 1 ? (uint32_t)atoi(argv[1]) : 1024;
    uint32_t nt = argc > 2 ? (uint32_t)atoi(argv[2]) : 1;
    uint32_t chunk = argc > 3 ? (uint32_t)atoi(argv[3]) : 0;
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = 2;
    c.d_model = 256;
    c.n_heads = 8;
    c.n_ctx = 512;
    c.d_vocab = V;
    c.n_threads = nt;
    c.init = INDUCT_INIT_TORCH;
    induct_model *m;
    ok(induct_model_new(&m, &c), "model");
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = V;
    rc.min_block = 8;
    induct_dataset *d;
    ok(induct_dataset_new_rrt(&d, &rc), "dataset");
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec); /* 8 sequences of n_ctx = 512, tokens 50 and 500 */
    if (chunk) ec.chunk = chunk;
    static float curve[511], vec[8], pm[16], dup[16], prev[16], copy[16], eig[16], attr[16];
    static float comp[3][256];
    uint32_t labels[16];
    size_t len;
    double icl, base;
    double t0 = now(), c0 = cpu(), t = t0, tt[12];
    int k = 0;
    /* one pass over the evaluation set gives the loss curve (so the ICL score) and the
     * loss vector; the attribution's clean pass gives the ICL score again */
    ok(induct_analysis_loss_vectors(m, d, &ec, vec, 8, curve, 511), "loss vectors");
    tt[k++] = now() - t, t = now();
    ok(induct_analysis_prefix_matching(m, NULL, pm, 16, &len), "prefix");
    tt[k++] = now() - t, t = now();
    ok(induct_analysis_duplicate_token(m, NULL, dup, 16, &len), "duplicate");
    tt[k++] = now() - t, t = now();
    ok(induct_analysis_previous_token_score(m, d, 4, 512, prev, 16, &len), "previous");
    tt[k++] = now() - t, t = now();
    ok(induct_analysis_copying(m, NULL, copy, 16, &len), "copying");
    tt[k++] = now() - t, t = now();
    ok(induct_analysis_copying_eigen(m, eig, 16, &len), "eigen");
    tt[k++] = now() - t, t = now();
    for (uint32_t q = 0; q < 3; q++)
        ok(induct_analysis_composition(m, q, comp[q], 256, &len), "comp");
    tt[k++] = now() - t, t = now();
    ok(induct_analysis_composition_baseline(m, 20, 0, &base), "baseline");
    tt[k++] = now() - t, t = now();
    ok(induct_analysis_ablation_attribution(m, d, &ec, INDUCT_ABLATE_ZERO, attr, 16, &len, &icl),
       "attribution");
    tt[k++] = now() - t, t = now();
    ok(induct_analysis_classify_heads(prev, pm, dup, copy, 16, NULL, labels, 16, &len), "classify");
    tt[k++] = now() - t, t = now();
    double total = now() - t0, total_cpu = cpu() - c0;
    const char *names[] = {
        "loss vectors+curve",   "prefix matching", "duplicate token",   "previous token (4x512)",
        "copying (empirical)",  "copying (eigen)", "composition Q/K/V", "baseline (20 draws)",
        "ablation attribution", "classify"};
    printf("d_model 256, 8 heads, 2 layers, n_ctx 512, d_vocab %u, threads %u, chunk %u\n", V, nt,
           ec.chunk);
    for (int i = 0; i < k; i++)
        printf("  %-24s %8.3f s\n", names[i], tt[i]);
    printf("  %-24s %8.3f s  (process CPU time %.3f s; icl %.4f = curve %.4f)\n", "total", total,
           total_cpu, icl, (double)curve[499] - curve[49]);
    /* reference: one forward pass over the evaluation set */
    t = now();
    ok(induct_analysis_icl_score(m, d, &ec, &icl), "icl");
    printf("  %-24s %8.3f s\n", "(one icl_score pass)", now() - t);
    induct_dataset_free(d);
    induct_model_free(m);
    return total < 1.0 ? 0 : 1;
}
