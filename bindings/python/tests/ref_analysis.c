/* Reference run for the bindings' analysis tests: builds two small models from seeds
 * (an attention-only one, trained a few steps, and an MLP + LayerNorm + smeared-key
 * one), runs every analysis of the suite on them through the C API, and prints each
 * result as "<name> <values...>" with floats and doubles as exact hex floats (%a) and
 * integers in decimal. test_analysis.py repeats the same calls through the bindings and
 * compares bit for bit. Public API only. */
#include <induct/induct.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != INDUCT_OK) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,                     \
                    induct_status_name(rc_), induct_last_error_message());                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void put_f(const char *prefix, const char *name, const float *v, size_t n) {
    printf("%s.%s", prefix, name);
    for (size_t i = 0; i < n; i++) printf(" %a", (double)v[i]);
    printf("\n");
}
static void put_d(const char *prefix, const char *name, const double *v, size_t n) {
    printf("%s.%s", prefix, name);
    for (size_t i = 0; i < n; i++) printf(" %a", v[i]);
    printf("\n");
}
static void put_u(const char *prefix, const char *name, const uint32_t *v, size_t n) {
    printf("%s.%s", prefix, name);
    for (size_t i = 0; i < n; i++) printf(" %u", v[i]);
    printf("\n");
}
static void put_i(const char *prefix, const char *name, const int32_t *v, size_t n) {
    printf("%s.%s", prefix, name);
    for (size_t i = 0; i < n; i++) printf(" %d", v[i]);
    printf("\n");
}

/* The configs the Python test uses too (keep in sync with test_analysis.py). */
static void eval_cfg(induct_eval_config *e) {
    induct_eval_config_init(e, sizeof *e);
    e->n_seq = 6; e->seq_len = 40; e->chunk = 4; e->early = 5; e->late = 30; e->pos_seed = 3;
}
static void probe_cfg(induct_probe_config *p) {
    induct_probe_config_init(p, sizeof *p);
    p->n_seq = 4; p->block_len = 6; p->n_repeats = 3; p->seed = 9;
}

enum { MAXN = 1 << 16 };
static float fbuf[MAXN];
static int32_t ibuf[MAXN];
static uint32_t ubuf[MAXN];

static void analyse(const char *px, induct_model *m, const induct_dataset *d) {
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    CHECK(induct_model_get_config(m, &mc));
    size_t LH = (size_t)mc.n_layers * mc.n_heads, n;
    induct_eval_config e;
    eval_cfg(&e);
    induct_probe_config p;
    probe_cfg(&p);
    double icl, base;

    CHECK(induct_analysis_icl_score(m, d, &e, &icl));
    put_d(px, "icl", &icl, 1);
    CHECK(induct_analysis_loss_by_position(m, d, &e, fbuf, MAXN, &n));
    put_f(px, "loss_by_position", fbuf, n);
    CHECK(induct_analysis_loss_vectors(m, d, &e, fbuf, e.n_seq, fbuf + 64, e.seq_len - 1));
    put_f(px, "per_seq", fbuf, e.n_seq);
    put_f(px, "average", fbuf + 64, e.seq_len - 1);
    CHECK(induct_analysis_loss_positions(m, &e, ubuf, MAXN, &n));
    put_u(px, "positions", ubuf, n);

    CHECK(induct_analysis_probe_tokens(m, &p, 0, ibuf, MAXN, &n));
    put_i(px, "probe", ibuf, n);
    CHECK(induct_analysis_probe_tokens(m, &p, 1, ibuf, MAXN, &n));
    put_i(px, "probe_copying", ibuf, n);
    CHECK(induct_analysis_prefix_matching(m, &p, fbuf, MAXN, &n));
    put_f(px, "prefix_matching", fbuf, n);
    float prefix[64], dup[64], copying[64], prev[64];
    for (size_t i = 0; i < LH; i++) prefix[i] = fbuf[i];
    CHECK(induct_analysis_duplicate_token(m, &p, fbuf, MAXN, &n));
    put_f(px, "duplicate_token", fbuf, n);
    for (size_t i = 0; i < LH; i++) dup[i] = fbuf[i];
    CHECK(induct_analysis_copying(m, &p, fbuf, MAXN, &n));
    put_f(px, "copying", fbuf, n);
    for (size_t i = 0; i < LH; i++) copying[i] = fbuf[i];
    CHECK(induct_analysis_copying_eigen(m, fbuf, MAXN, &n));
    put_f(px, "copying_eigen", fbuf, n);
    static const char *kinds[] = {"composition_q", "composition_k", "composition_v"};
    for (uint32_t k = 0; k < 3; k++) {
        CHECK(induct_analysis_composition(m, k, fbuf, MAXN, &n));
        put_f(px, kinds[k], fbuf, n);
    }
    CHECK(induct_analysis_composition_baseline(m, 20, 5, &base));
    put_d(px, "composition_baseline", &base, 1);

    /* attribution: zero, zero + preserve, mean (pooled and per position) */
    CHECK(induct_analysis_ablation_attribution(m, d, &e, INDUCT_ABLATE_ZERO, fbuf, MAXN, &n,
                                               &icl));
    put_f(px, "attribution_zero", fbuf, n);
    put_d(px, "attribution_zero_icl", &icl, 1);
    CHECK(induct_analysis_ablation_attribution(
        m, d, &e, INDUCT_ABLATE_ZERO | INDUCT_ABLATE_PRESERVE_PATTERNS, fbuf, MAXN, &n, &icl));
    put_f(px, "attribution_zero_preserve", fbuf, n);
    int32_t ref[4 * 40];
    CHECK(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 3, 4, 40, ref, 4 * 40, NULL, 0));
    CHECK(induct_model_set_ablation_mean(m, ref, 4, 40, INDUCT_MEAN_POOLED));
    CHECK(induct_analysis_ablation_attribution(m, d, &e, INDUCT_ABLATE_MEAN, fbuf, MAXN, &n,
                                               &icl));
    put_f(px, "attribution_mean_pooled", fbuf, n);
    /* explicit ablations: zero (1,0) + mean (0,1) with patterns preserved */
    int32_t toks[6 * 40];
    CHECK(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, 6, 40, toks, 6 * 40, NULL, 0));
    CHECK(induct_model_ablate_head(m, 1, 0, INDUCT_ABLATE_ZERO));
    CHECK(induct_model_ablate_head(m, 0, 1, INDUCT_ABLATE_MEAN));
    CHECK(induct_model_set_preserve_patterns(m, 1));
    uint32_t preserve;
    CHECK(induct_model_get_ablations(m, ubuf, MAXN, &n, &preserve));
    put_u(px, "ablation_modes", ubuf, n);
    put_u(px, "ablation_preserve", &preserve, 1);
    double mean;
    CHECK(induct_model_forward(m, toks, 6, 40, NULL, 0, fbuf, MAXN, &mean));
    put_f(px, "ablated_losses", fbuf, 6 * 39);
    CHECK(induct_analysis_icl_score(m, d, &e, &icl));
    put_d(px, "ablated_icl", &icl, 1);
    CHECK(induct_model_clear_ablations(m));
    CHECK(induct_model_set_ablation_mean(m, ref, 4, 40, INDUCT_MEAN_PER_POSITION));
    CHECK(induct_analysis_ablation_attribution(m, d, &e, INDUCT_ABLATE_MEAN, fbuf, MAXN, &n,
                                               &icl));
    put_f(px, "attribution_mean_per_position", fbuf, n);

    /* classification from the scores above and the previous-token score */
    CHECK(induct_analysis_previous_token_score(m, d, 6, 40, prev, LH, &n));
    put_f(px, "previous_token", prev, n);
    CHECK(induct_analysis_classify_heads(prev, prefix, dup, copying, LH, NULL, ubuf, MAXN, &n));
    put_u(px, "labels", ubuf, n);
    induct_classify_config cc;
    induct_classify_config_init(&cc, sizeof cc);
    cc.previous_token = 0.09; cc.induction = 0.1; cc.duplicate = 0.11; cc.copying = -0.5;
    CHECK(induct_analysis_classify_heads(prev, prefix, dup, copying, LH, &cc, ubuf, MAXN, &n));
    put_u(px, "labels_custom", ubuf, n);
    CHECK(induct_analysis_classify_heads(prev, prefix, dup, NULL, LH, &cc, ubuf, MAXN, &n));
    put_u(px, "labels_custom_nocopy", ubuf, n);
}

int main(void) {
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 16; rc.min_block = 3; rc.seed = 7;
    induct_dataset *d;
    CHECK(induct_dataset_new_rrt(&d, &rc));

    /* model A: attention-only, shortformer, trained 30 steps; its loss vectors at
     * steps 0, 10, 20, 30 are PCA rows */
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    mc.n_layers = 2; mc.d_model = 32; mc.n_heads = 2; mc.n_ctx = 40; mc.d_vocab = 16;
    mc.positional = INDUCT_POS_SHORTFORMER; mc.seed = 21;
    induct_model *a;
    CHECK(induct_model_new(&a, &mc));
    induct_optimizer *o;
    CHECK(induct_optimizer_new(&o, a, INDUCT_OPTIM_ADAMW));
    CHECK(induct_optimizer_set(o, INDUCT_OPT_LR, 1e-2));
    induct_eval_config e;
    eval_cfg(&e);
    float rows[5][6];
    for (int s = 0; s <= 30; s++) {
        if (s % 10 == 0) CHECK(induct_analysis_loss_vectors(a, d, &e, rows[s / 10], 6, NULL, 0));
        if (s < 30) CHECK(induct_train_step(o, d, 8, 40, NULL));
    }
    analyse("A", a, d);

    /* model B: LayerNorm, MLP, smeared keys, standard positions, untrained */
    induct_model_config_init(&mc, sizeof mc);
    mc.n_layers = 2; mc.d_model = 32; mc.n_heads = 4; mc.d_mlp = 64; mc.n_ctx = 40;
    mc.d_vocab = 16; mc.layer_norm = 1; mc.smeared_keys = 1; mc.smear_alpha_init = 0.5;
    mc.seed = 22;
    induct_model *b;
    CHECK(induct_model_new(&b, &mc));
    CHECK(induct_analysis_loss_vectors(b, d, &e, rows[4], 6, NULL, 0));
    analyse("B", b, d);

    /* PCA of the five loss vectors (4 snapshots of A, then B) */
    float scores[5 * 3], comps[3 * 6];
    double var[3], total;
    CHECK(induct_analysis_pca(&rows[0][0], 5, 6, 3, scores, 15, comps, 18, var, 3, &total));
    put_f("pca", "rows", &rows[0][0], 30);
    put_f("pca", "scores", scores, 15);
    put_f("pca", "components", comps, 18);
    put_d("pca", "variance", var, 3);
    put_d("pca", "total", &total, 1);

    /* phase window of a logistic ICL curve (inputs printed too, so that Python uses
     * exactly these doubles) */
    double steps[21], curve[21], start, end;
    uint32_t found;
    for (int i = 0; i < 21; i++) {
        steps[i] = 50.0 * i;
        curve[i] = -0.05 - 0.4 / (1.0 + exp(-(steps[i] - 420.0) / 60.0));
    }
    put_d("phase", "steps", steps, 21);
    put_d("phase", "icl", curve, 21);
    CHECK(induct_analysis_phase_window(steps, curve, 21, NULL, &start, &end, &found));
    put_d("phase", "default", (double[]){start, end}, 2);
    put_u("phase", "default_found", &found, 1);
    induct_phase_config pc;
    induct_phase_config_init(&pc, sizeof pc);
    pc.lo_frac = 0.2; pc.hi_frac = 0.8; pc.smooth = 3;
    CHECK(induct_analysis_phase_window(steps, curve, 21, &pc, &start, &end, &found));
    put_d("phase", "custom", (double[]){start, end}, 2);
    pc.min_change = 1.0;
    CHECK(induct_analysis_phase_window(steps, curve, 21, &pc, &start, &end, &found));
    put_u("phase", "none_found", &found, 1);

    induct_optimizer_free(o);
    induct_model_free(a);
    induct_model_free(b);
    induct_dataset_free(d);
    return 0;
}
