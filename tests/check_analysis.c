/* Analysis suite: closed-form answers on hand-wired models, the exact
 * effect of ablations, side-effect freedom and bad input. Links only the shared
 * library (public API). Reference values are computed independently here (in
 * double) or follow from the construction; nothing is frozen from a run. */
#include <math.h>
#include <string.h>

#include "testutil.h"

/* ---- helpers ----------------------------------------------------------------------- */

static float *zeros(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

/* Set every parameter tensor to zero. */
static void zero_all(induct_model *m) {
    size_t nt = induct_model_n_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        size_t n;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &n));
        float *z = zeros(n);
        ck_ok(induct_model_set_tensor(m, name, z, n));
        free(z);
    }
}

static float *get(induct_model *m, const char *name, size_t *n_out) {
    size_t n;
    ck_assert_status(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, NULL, 0, &n),
                     INDUCT_EBUFSIZE);
    float *buf = malloc(n * sizeof *buf);
    ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, buf, n, &n));
    if (n_out) *n_out = n;
    return buf;
}

static void set(induct_model *m, const char *name, const float *buf) {
    size_t n;
    ck_assert_status(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, NULL, 0, &n),
                     INDUCT_EBUFSIZE);
    ck_ok(induct_model_set_tensor(m, name, buf, n));
}

/* All parameters, concatenated. */
__attribute__((unused)) static float *snapshot(induct_model *m) {
    size_t total = induct_model_n_params(m), off = 0, nt = induct_model_n_tensors(m);
    float *p = malloc(total * sizeof *p);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        size_t n, len;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &n));
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, p + off, n, &len));
        off += n;
    }
    return p;
}

static induct_model *model(uint32_t L, uint32_t D, uint32_t H, uint32_t dh, uint32_t V,
                           uint32_t n_ctx) {
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = L;
    c.d_model = D;
    c.n_heads = H;
    c.d_head = dh;
    c.d_vocab = V;
    c.n_ctx = n_ctx;
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    return m;
}

/* ---- the hand-wired 2-layer induction circuit ------------------------------------------
 * Residual stream [tok (V) | pos (n_ctx) | prev (V) | out (V)], one head per layer,
 * d_head = n_ctx. Layer 0 (previous-token head): query position p, key position
 * j + 1, so position p attends to p − 1; it copies the token into `prev`. Layer 1
 * (induction head): query = current token, key = `prev`, so p attends to every j
 * with t[j−1] = t[p]; it copies t[j] into `out`, which W_U reads (×15). */
enum { CV = 32, CCTX = 101, CD = 3 * CV + CCTX, CDH = CCTX };
#define TOK(t) (t)
#define POS(p) (CV + (p))
#define PREV(t) (CV + CCTX + (t))
#define OUT(t) (2 * CV + CCTX + (t))

static induct_model *induction_circuit(void) {
    induct_model *m = model(2, CD, 1, CDH, CV, CCTX);
    zero_all(m);
    float *WE = zeros(CV * CD), *Wpos = zeros(CCTX * CD), *WU = zeros(CD * CV);
    for (int t = 0; t < CV; t++)
        WE[t * CD + TOK(t)] = 1.0f;
    for (int p = 0; p < CCTX; p++)
        Wpos[p * CD + POS(p)] = 1.0f;
    for (int t = 0; t < CV; t++)
        WU[OUT(t) * CV + t] = 15.0f;
    set(m, "embed.W_E", WE);
    set(m, "pos_embed.W_pos", Wpos);
    set(m, "unembed.W_U", WU);
    float c = (float)sqrt(30.0 * sqrt((double)CDH)); /* score 30 after 1/sqrt(d_head) */
    float *WQ = zeros(CD * CDH), *WK = zeros(CD * CDH), *WV = zeros(CD * CDH),
          *WO = zeros(CDH * CD);
    for (int p = 0; p < CCTX; p++)
        WQ[POS(p) * CDH + p] = c;
    for (int j = 0; j + 1 < CDH; j++)
        WK[POS(j) * CDH + j + 1] = c;
    for (int t = 0; t < CV; t++)
        WV[TOK(t) * CDH + t] = 1.0f;
    for (int t = 0; t < CV; t++)
        WO[t * CD + PREV(t)] = 1.0f;
    set(m, "blocks.0.attn.W_Q", WQ);
    set(m, "blocks.0.attn.W_K", WK);
    set(m, "blocks.0.attn.W_V", WV);
    set(m, "blocks.0.attn.W_O", WO);
    memset(WQ, 0, CD * CDH * sizeof *WQ);
    memset(WK, 0, CD * CDH * sizeof *WK);
    memset(WO, 0, CDH * CD * sizeof *WO);
    for (int t = 0; t < CV; t++)
        WQ[TOK(t) * CDH + t] = c;
    for (int t = 0; t < CV; t++)
        WK[PREV(t) * CDH + t] = c;
    for (int t = 0; t < CV; t++)
        WO[t * CD + OUT(t)] = 1.0f;
    set(m, "blocks.1.attn.W_Q", WQ);
    set(m, "blocks.1.attn.W_K", WK);
    set(m, "blocks.1.attn.W_V", WV);
    set(m, "blocks.1.attn.W_O", WO);
    free(WE);
    free(Wpos);
    free(WU);
    free(WQ);
    free(WK);
    free(WV);
    free(WO);
    return m;
}

/* Repeated text: BOS 0, a distinct block of 20 tokens from [1, 32) three times, filler. */
static induct_dataset *repeated_text(void) {
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = CV;
    rc.n_repeats = 3;
    rc.min_block = rc.max_block = 20;
    rc.token_lo = 1;
    rc.bos = 0;
    rc.distinct_block = 1;
    rc.seed = 5;
    induct_dataset *d;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    return d;
}

static void circuit_eval(induct_eval_config *ec) {
    induct_eval_config_init(ec, sizeof *ec);
    ec->n_seq = 8;
    ec->seq_len = 64;
    ec->chunk = 3; /* not a divisor of n_seq: exercises the last short chunk */
    ec->early = 5; /* predicts position 5, inside the first block */
    ec->late = 50; /* predicts position 50, inside the third copy */
}

START_TEST(test_induction_circuit) {
    induct_model *m = induction_circuit();
    float pm[2], prev[2], dup[2], eig[2];
    size_t len;
    /* the paper's default probe: BOS + 25 distinct tokens x 4, 10 sequences */
    ck_ok(induct_analysis_prefix_matching(m, NULL, pm, 2, &len));
    ck_assert_uint_eq(len, 2);
    ck_assert_msg(pm[1] > 0.99f, "induction head prefix-matching %g", pm[1]);
    ck_assert_msg(pm[0] < 0.05f, "previous-token head prefix-matching %g", pm[0]);
    ck_ok(induct_analysis_duplicate_token(m, NULL, dup, 2, &len));
    ck_assert_msg(dup[0] < 0.05f && dup[1] < 0.05f, "duplicate %g %g", dup[0], dup[1]);
    induct_dataset *d = repeated_text();
    ck_ok(induct_analysis_previous_token_score(m, d, 8, 64, prev, 2, &len));
    ck_assert_msg(prev[0] > 0.99f, "previous-token head scores %g", prev[0]);
    ck_assert_msg(prev[1] < 0.2f, "induction head previous-token score %g", prev[1]);
    /* weights: the induction head's OV circuit is 15 x identity, layer 0 writes nothing W_U reads
     */
    ck_ok(induct_analysis_copying_eigen(m, eig, 2, &len));
    ck_assert_double_eq_tol(eig[1], 1.0, 1e-6);
    ck_assert_float_eq(eig[0], 0.0f);
    uint32_t labels[2];
    ck_ok(induct_analysis_classify_heads(prev, pm, dup, eig, 2, NULL, labels, 2, &len));
    ck_assert_uint_eq(labels[0], INDUCT_HEAD_PREVIOUS_TOKEN);
    ck_assert_uint_eq(labels[1], INDUCT_HEAD_INDUCTION);

    induct_eval_config ec;
    circuit_eval(&ec);
    double icl;
    ck_ok(induct_analysis_icl_score(m, d, &ec, &icl));
    ck_assert_msg(icl < -3.0, "ICL score on repeated text %g", icl);
    /* zero-ablating the induction head: W_U reads only its output -> logits 0 -> ICL 0 */
    ck_ok(induct_model_ablate_head(m, 1, 0, INDUCT_ABLATE_ZERO));
    double icl_abl;
    ck_ok(induct_analysis_icl_score(m, d, &ec, &icl_abl));
    ck_assert_double_eq(icl_abl, 0.0);
    ck_ok(induct_model_clear_ablations(m));
    /* attribution (attention-only fast path) against explicit ablations */
    float attr[2];
    double icl_clean;
    ck_ok(induct_analysis_ablation_attribution(m, d, &ec, INDUCT_ABLATE_ZERO, attr, 2, &len,
                                               &icl_clean));
    ck_assert_double_eq_tol(icl_clean, icl, 1e-9);
    ck_assert_double_eq_tol(attr[1], -icl, 1e-4);
    ck_ok(induct_model_ablate_head(m, 0, 0, INDUCT_ABLATE_ZERO));
    ck_ok(induct_analysis_icl_score(m, d, &ec, &icl_abl));
    ck_ok(induct_model_clear_ablations(m));
    ck_assert_double_eq_tol(attr[0], icl_abl - icl, 1e-4);
    ck_assert_msg(attr[0] > 1.0, "ablating the previous-token head costs %g nats", attr[0]);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* ---- uniform attention -------------------------------------------------------------- */

START_TEST(test_uniform_attention) {
    induct_model *m = model(2, 16, 2, 0, 20, 40);
    tu_randomize(m, 0.3, 11);
    float *z = zeros(2 * 16 * 8);
    set(m, "blocks.0.attn.W_Q", z);
    set(m, "blocks.1.attn.W_Q", z);
    set(m, "blocks.0.attn.b_Q", z);
    set(m, "blocks.1.attn.b_Q", z);
    free(z);
    induct_probe_config pc;
    induct_probe_config_init(&pc, sizeof pc);
    pc.block_len = 6;
    pc.n_repeats = 3;
    pc.n_seq = 4;
    const uint32_t P = 6, R = 3, off = 1;
    double expect = 0.0;
    for (uint32_t r = 2; r <= R; r++)
        for (uint32_t i = 0; i < P; i++)
            expect += (double)(r - 1) / (off + (r - 1) * P + i + 1);
    expect /= (double)((R - 1) * P);
    float pm[4], dup[4];
    size_t len;
    ck_ok(induct_analysis_prefix_matching(m, &pc, pm, 4, &len));
    ck_ok(induct_analysis_duplicate_token(m, &pc, dup, 4, &len));
    for (int i = 0; i < 4; i++) {
        ck_assert_double_eq_tol(pm[i], expect, 1e-6);
        ck_assert_double_eq_tol(dup[i], expect, 1e-6);
    }
    /* previous-token score of uniform attention: mean over i = 1..T-1 of 1/(i+1) */
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 20;
    rc.min_block = 4;
    induct_dataset *d;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    float prev[4];
    ck_ok(induct_analysis_previous_token_score(m, d, 3, 30, prev, 4, &len));
    double pe = 0.0;
    for (int i = 1; i < 30; i++)
        pe += 1.0 / (i + 1);
    pe /= 29.0;
    for (int i = 0; i < 4; i++)
        ck_assert_double_eq_tol(prev[i], pe, 1e-6);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* ---- OV = +-identity ------------------------------------------------------------------ */

/* 1 layer, 1 head, d_vocab = d_model = d_head = 32, W_E = W_U = I, no positions;
 * Q = K = c I: every token attends to itself. OV = sign x identity. */
static induct_model *ov_model(float sign) {
    enum { N = 32 };
    induct_model *m = model(1, N, 1, N, N, 40);
    zero_all(m);
    float *I = zeros(N * N), *S = zeros(N * N), *Q = zeros(N * N);
    float c = (float)sqrt(20.0 * sqrt((double)N));
    for (int i = 0; i < N; i++) {
        I[i * N + i] = 1.0f;
        S[i * N + i] = sign;
        Q[i * N + i] = c;
    }
    set(m, "embed.W_E", I);
    set(m, "unembed.W_U", I);
    set(m, "blocks.0.attn.W_Q", Q);
    set(m, "blocks.0.attn.W_K", Q);
    set(m, "blocks.0.attn.W_V", I);
    set(m, "blocks.0.attn.W_O", S);
    free(I);
    free(S);
    free(Q);
    return m;
}

START_TEST(test_ov_identity) {
    for (int s = 0; s < 2; s++) {
        float sign = s ? -1.0f : 1.0f;
        induct_model *m = ov_model(sign);
        float eig, emp;
        size_t len;
        ck_ok(induct_analysis_copying_eigen(m, &eig, 1, &len));
        ck_assert_double_eq_tol(eig, sign, 1e-6);
        ck_ok(induct_analysis_copying(m, NULL, &emp, 1, &len));
        if (sign > 0)
            ck_assert_msg(emp > 0.99f, "+identity empirical copying %g", emp);
        else
            ck_assert_msg(emp < -0.99f, "-identity empirical copying %g", emp);
        /* with BOS in the copying probe too */
        induct_probe_config pc;
        induct_probe_config_init(&pc, sizeof pc);
        pc.copying_bos = 1;
        ck_ok(induct_analysis_copying(m, &pc, &emp, 1, &len));
        ck_assert(sign > 0 ? emp > 0.99f : emp < -0.99f);
        induct_model_free(m);
    }
}
END_TEST

/* ---- zero ablation is exactly -z_h W_O[h] -------------------------------------------- */

/* 1 layer, W_U = I (d_model = d_vocab), b_U = 0, no LayerNorm: logits = resid_post. */
START_TEST(test_zero_ablation_exact) {
    enum { D = 12, H = 3, DH = 4, V = 12, T = 9 };
    induct_model *m = model(1, D, H, DH, V, 16);
    tu_randomize(m, 0.5, 21);
    float *I = zeros(D * V), *bU = zeros(V);
    for (int i = 0; i < D; i++)
        I[i * V + i] = 1.0f;
    set(m, "unembed.W_U", I);
    set(m, "unembed.b_U", bU);
    int32_t tok[T];
    tu_tokens(tok, T, V, 4);
    float clean[T * V], abl[T * V], A0[H * T * T], A1[H * T * T];
    size_t len;
    ck_ok(induct_model_forward(m, tok, 1, T, clean, T * V, NULL, 0, NULL));
    ck_ok(induct_model_attention(m, tok, T, A0, H * T * T, &len));
    float *WE = get(m, "embed.W_E", NULL), *Wp = get(m, "pos_embed.W_pos", NULL),
          *WV = get(m, "blocks.0.attn.W_V", NULL), *bV = get(m, "blocks.0.attn.b_V", NULL),
          *WO = get(m, "blocks.0.attn.W_O", NULL);
    for (int h = 0; h < H; h++) {
        ck_ok(induct_model_ablate_head(m, 0, h, INDUCT_ABLATE_ZERO));
        ck_ok(induct_model_forward(m, tok, 1, T, abl, T * V, NULL, 0, NULL));
        ck_ok(induct_model_attention(m, tok, T, A1, H * T * T, &len));
        ck_ok(induct_model_clear_ablations(m));
        /* patterns of every head are untouched (bit for bit) */
        ck_assert(memcmp(A0, A1, sizeof A0) == 0);
        /* independent z_h W_O[h] in double */
        for (int p = 0; p < T; p++) {
            double zp[DH] = {0};
            for (int k = 0; k <= p; k++) {
                double a = A0[(h * T + p) * T + k];
                for (int j = 0; j < DH; j++) {
                    double v = bV[h * DH + j];
                    for (int i = 0; i < D; i++)
                        v +=
                            ((double)WE[tok[k] * D + i] + Wp[k * D + i]) * WV[(h * D + i) * DH + j];
                    zp[j] += a * v;
                }
            }
            for (int i = 0; i < D; i++) {
                double contrib = 0.0;
                for (int j = 0; j < DH; j++)
                    contrib += zp[j] * WO[(h * DH + j) * D + i];
                ck_assert_double_eq_tol((double)abl[p * V + i] - clean[p * V + i], -contrib, 2e-5);
            }
        }
    }
    free(WE);
    free(Wp);
    free(WV);
    free(bV);
    free(WO);
    free(I);
    free(bU);
    induct_model_free(m);
}
END_TEST

/* In a 2-layer model, zero-ablating a layer-1 head leaves every layer-0 pattern and
 * every other layer-1 pattern bit-identical, and changes the logits by exactly
 * -z_h W_O[h] W_U (no later layer). */
START_TEST(test_zero_ablation_two_layers) {
    enum { D = 10, H = 2, DH = 5, V = 10, T = 7 };
    induct_model *m = model(2, D, H, DH, V, 8);
    tu_randomize(m, 0.5, 8);
    float *I = zeros(D * V), *bU = zeros(V);
    for (int i = 0; i < D; i++)
        I[i * V + i] = 1.0f;
    set(m, "unembed.W_U", I);
    set(m, "unembed.b_U", bU);
    int32_t tok[T];
    tu_tokens(tok, T, V, 6);
    float clean[T * V], abl[T * V], A0[2 * H * T * T], A1[2 * H * T * T];
    size_t len;
    ck_ok(induct_model_forward(m, tok, 1, T, clean, T * V, NULL, 0, NULL));
    ck_ok(induct_model_attention(m, tok, T, A0, 2 * H * T * T, &len));
    ck_ok(induct_model_ablate_head(m, 1, 1, INDUCT_ABLATE_ZERO));
    ck_ok(induct_model_forward(m, tok, 1, T, abl, T * V, NULL, 0, NULL));
    ck_ok(induct_model_attention(m, tok, T, A1, 2 * H * T * T, &len));
    ck_ok(induct_model_clear_ablations(m));
    ck_assert(memcmp(A0, A1, sizeof A0) == 0);
    /* z of head (1,1) from the layer-1 input, reconstructed from the clean logits of a
     * model with layer 1's heads removed: resid_pre[1] = logits(all of layer 1 ablated) - b_O[1] */
    float pre[T * V];
    ck_ok(induct_model_ablate_head(m, 1, 0, INDUCT_ABLATE_ZERO));
    ck_ok(induct_model_ablate_head(m, 1, 1, INDUCT_ABLATE_ZERO));
    ck_ok(induct_model_forward(m, tok, 1, T, pre, T * V, NULL, 0, NULL));
    ck_ok(induct_model_clear_ablations(m));
    float *bO = get(m, "blocks.1.attn.b_O", NULL), *WV = get(m, "blocks.1.attn.W_V", NULL),
          *bV = get(m, "blocks.1.attn.b_V", NULL), *WO = get(m, "blocks.1.attn.W_O", NULL);
    const int h = 1;
    for (int p = 0; p < T; p++) {
        double zp[DH] = {0};
        for (int k = 0; k <= p; k++) {
            double a = A0[((H + h) * T + p) * T + k];
            for (int j = 0; j < DH; j++) {
                double v = bV[h * DH + j];
                for (int i = 0; i < D; i++)
                    v += ((double)pre[k * V + i] - bO[i]) * WV[(h * D + i) * DH + j];
                zp[j] += a * v;
            }
        }
        for (int i = 0; i < D; i++) {
            double contrib = 0.0;
            for (int j = 0; j < DH; j++)
                contrib += zp[j] * WO[(h * DH + j) * D + i];
            ck_assert_double_eq_tol((double)abl[p * V + i] - clean[p * V + i], -contrib, 2e-5);
        }
    }
    free(bO);
    free(WV);
    free(bV);
    free(WO);
    free(I);
    free(bU);
    induct_model_free(m);
}
END_TEST

/* Ablating every head of a 1-layer attention-only model leaves the direct path:
 * logits = (W_E[t] + W_pos[p] + b_O) W_U + b_U. */
START_TEST(test_ablate_all_direct_path) {
    enum { D = 8, H = 2, V = 11, T = 8 };
    induct_model *m = model(1, D, H, 0, V, 8);
    tu_randomize(m, 0.7, 30);
    int32_t tok[2 * T];
    tu_tokens(tok, 2 * T, V, 12);
    for (int h = 0; h < H; h++)
        ck_ok(induct_model_ablate_head(m, 0, h, INDUCT_ABLATE_ZERO));
    float lg[2 * T * V];
    ck_ok(induct_model_forward(m, tok, 2, T, lg, 2 * T * V, NULL, 0, NULL));
    float *WE = get(m, "embed.W_E", NULL), *Wp = get(m, "pos_embed.W_pos", NULL),
          *bO = get(m, "blocks.0.attn.b_O", NULL), *WU = get(m, "unembed.W_U", NULL),
          *bU = get(m, "unembed.b_U", NULL);
    for (int n = 0; n < 2 * T; n++)
        for (int v = 0; v < V; v++) {
            double s = bU[v];
            for (int i = 0; i < D; i++)
                s += ((double)WE[tok[n] * D + i] + Wp[(n % T) * D + i] + bO[i]) * WU[i * V + v];
            ck_assert_double_eq_tol(lg[n * V + v], s, 1e-5);
        }
    free(WE);
    free(Wp);
    free(bO);
    free(WU);
    free(bU);
    induct_model_free(m);
}
END_TEST

/* ---- all-zero logits ------------------------------------------------------------------ */

START_TEST(test_zero_logits) {
    enum { V = 13 };
    induct_model *m = model(2, 8, 2, 0, V, 24);
    tu_randomize(m, 0.5, 2);
    float *z = zeros(8 * V);
    set(m, "unembed.W_U", z);
    set(m, "unembed.b_U", z);
    free(z);
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = V;
    rc.min_block = 3;
    induct_dataset *d;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec);
    ec.n_seq = 5;
    ec.seq_len = 24;
    ec.early = 3;
    ec.late = 20;
    double icl = 1.0;
    ck_ok(induct_analysis_icl_score(m, d, &ec, &icl));
    ck_assert(icl == 0.0);
    float curve[23];
    size_t len;
    ck_ok(induct_analysis_loss_by_position(m, d, &ec, curve, 23, &len));
    ck_assert_uint_eq(len, 23);
    for (int p = 0; p < 23; p++)
        ck_assert_float_eq(curve[p], (float)log((double)V));
    float attr[4];
    ck_ok(induct_analysis_ablation_attribution(m, d, &ec, INDUCT_ABLATE_ZERO, attr, 4, &len, &icl));
    for (int i = 0; i < 4; i++)
        ck_assert(attr[i] == 0.0f);
    ck_assert(icl == 0.0);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* ---- mean ablation ---------------------------------------------------------------------- */

START_TEST(test_mean_ablation) {
    enum { D = 12, H = 2, DH = 6, V = 12, T = 8, B = 3 };
    induct_model *m = model(1, D, H, DH, V, 8);
    tu_randomize(m, 0.5, 40);
    float *I = zeros(D * V), *bU = zeros(V);
    for (int i = 0; i < D; i++)
        I[i * V + i] = 1.0f;
    set(m, "unembed.W_U", I);
    set(m, "unembed.b_U", bU);
    int32_t tok[T], ref[B * T];
    tu_tokens(tok, T, V, 1);
    tu_tokens(ref, B * T, V, 2);
    ck_assert_status(induct_model_ablate_head(m, 0, 0, INDUCT_ABLATE_MEAN), INDUCT_ESTATE);
    /* per-position mean over a single sequence is that sequence's z: nothing changes */
    float clean[T * V], abl[T * V];
    ck_ok(induct_model_forward(m, tok, 1, T, clean, T * V, NULL, 0, NULL));
    ck_ok(induct_model_set_ablation_mean(m, tok, 1, T, INDUCT_MEAN_PER_POSITION));
    ck_ok(induct_model_ablate_head(m, 0, 1, INDUCT_ABLATE_MEAN));
    ck_ok(induct_model_forward(m, tok, 1, T, abl, T * V, NULL, 0, NULL));
    ck_assert(memcmp(clean, abl, sizeof clean) == 0);
    /* longer inputs than the per-position reference are refused */
    ck_ok(induct_model_set_ablation_mean(m, tok, 1, 4, INDUCT_MEAN_PER_POSITION));
    ck_assert_status(induct_model_forward(m, tok, 1, T, abl, T * V, NULL, 0, NULL), INDUCT_ERANGE);
    ck_ok(induct_model_clear_ablations(m));
    /* pooled mean over a reference batch: logits change by (mean - z_h) W_O[h] */
    float A[H * T * T], Aref[H * T * T];
    size_t len;
    ck_ok(induct_model_attention(m, tok, T, A, H * T * T, &len));
    float *WE = get(m, "embed.W_E", NULL), *Wp = get(m, "pos_embed.W_pos", NULL),
          *WV = get(m, "blocks.0.attn.W_V", NULL), *bV = get(m, "blocks.0.attn.b_V", NULL),
          *WO = get(m, "blocks.0.attn.W_O", NULL);
    const int h = 1;
    /* z_h[p] of a sequence, in double */
    double zs[T][DH], mean[DH] = {0};
#define ZH(seq, pattern, out)                                                                      \
    for (int p = 0; p < T; p++)                                                                    \
        for (int j = 0; j < DH; j++) {                                                             \
            out[p][j] = 0.0;                                                                       \
            for (int k = 0; k <= p; k++) {                                                         \
                double v = bV[h * DH + j];                                                         \
                for (int i = 0; i < D; i++)                                                        \
                    v +=                                                                           \
                        ((double)WE[(seq)[k] * D + i] + Wp[k * D + i]) * WV[(h * D + i) * DH + j]; \
                out[p][j] += (double)(pattern)[(h * T + p) * T + k] * v;                           \
            }                                                                                      \
        }
    for (int b = 0; b < B; b++) {
        ck_ok(induct_model_attention(m, ref + b * T, T, Aref, H * T * T, &len));
        double zr[T][DH];
        ZH(ref + b * T, Aref, zr);
        for (int p = 0; p < T; p++)
            for (int j = 0; j < DH; j++)
                mean[j] += zr[p][j] / (B * T);
    }
    ZH(tok, A, zs);
#undef ZH
    ck_ok(induct_model_set_ablation_mean(m, ref, B, T, INDUCT_MEAN_POOLED));
    ck_ok(induct_model_ablate_head(m, 0, h, INDUCT_ABLATE_MEAN));
    ck_ok(induct_model_forward(m, tok, 1, T, abl, T * V, NULL, 0, NULL));
    ck_ok(induct_model_clear_ablations(m));
    for (int p = 0; p < T; p++)
        for (int i = 0; i < D; i++) {
            double c = 0.0;
            for (int j = 0; j < DH; j++)
                c += (mean[j] - zs[p][j]) * WO[(h * DH + j) * D + i];
            ck_assert_double_eq_tol((double)abl[p * V + i] - clean[p * V + i], c, 2e-5);
        }
    free(WE);
    free(Wp);
    free(WV);
    free(bV);
    free(WO);
    free(I);
    free(bU);
    induct_model_free(m);
}
END_TEST

/* ---- pattern-preserving ablation ------------------------------------------------------ */

START_TEST(test_pattern_preserving) {
    enum { H = 2, T = 8 };
    induct_model *m = model(3, 8, H, 0, 11, 8);
    tu_randomize(m, 0.8, 13);
    int32_t tok[T];
    tu_tokens(tok, T, 11, 3);
    float A0[3 * H * T * T], A1[3 * H * T * T];
    size_t len;
    ck_ok(induct_model_attention(m, tok, T, A0, sizeof A0 / 4, &len));
    /* without preservation the downstream patterns move */
    ck_ok(induct_model_ablate_head(m, 0, 1, INDUCT_ABLATE_ZERO));
    ck_ok(induct_model_attention(m, tok, T, A1, sizeof A1 / 4, &len));
    ck_assert(memcmp(A0 + H * T * T, A1 + H * T * T, 2 * H * T * T * 4) != 0);
    /* with it, every pattern of layers 1 and 2 is the clean one, bit for bit */
    ck_ok(induct_model_set_preserve_patterns(m, 1));
    ck_ok(induct_model_attention(m, tok, T, A1, sizeof A1 / 4, &len));
    ck_assert(memcmp(A0, A1, sizeof A0) == 0);
    uint32_t modes[3 * H], pres = 9;
    ck_ok(induct_model_get_ablations(m, modes, 3 * H, &len, &pres));
    ck_assert_uint_eq(len, 3 * H);
    ck_assert_uint_eq(pres, 1);
    for (int i = 0; i < 3 * H; i++)
        ck_assert_uint_eq(modes[i], i == 1 ? INDUCT_ABLATE_ZERO : 0);
    /* and the logits differ from the clean ones but not from a second run */
    float l1[T * 11], l2[T * 11], l0[T * 11];
    ck_ok(induct_model_forward(m, tok, 1, T, l1, T * 11, NULL, 0, NULL));
    ck_ok(induct_model_forward(m, tok, 1, T, l2, T * 11, NULL, 0, NULL));
    ck_assert(memcmp(l1, l2, sizeof l1) == 0);
    ck_ok(induct_model_clear_ablations(m));
    ck_ok(induct_model_get_ablations(m, modes, 3 * H, &len, &pres));
    ck_assert_uint_eq(pres, 0);
    ck_ok(induct_model_forward(m, tok, 1, T, l0, T * 11, NULL, 0, NULL));
    ck_assert(memcmp(l0, l1, sizeof l0) != 0);
    induct_model_free(m);
}
END_TEST

/* ---- attribution: fast path against explicit ablations -------------------------------- */

typedef struct attr_variant {
    const char *name;
    uint32_t layers, d_mlp, layer_norm, positional, smeared;
    uint32_t mode; /* INDUCT_ABLATE_* | flags */
    uint32_t mean_how;
} attr_variant;

static const attr_variant ATTR[] = {
    {"plain zero", 2, 0, 0, INDUCT_POS_STANDARD, 0, INDUCT_ABLATE_ZERO, 0},
    {"layernorm zero", 2, 0, 1, INDUCT_POS_STANDARD, 0, INDUCT_ABLATE_ZERO, 0},
    {"shortformer smeared zero", 2, 0, 0, INDUCT_POS_SHORTFORMER, 1, INDUCT_ABLATE_ZERO, 0},
    {"3 layers ln zero", 3, 0, 1, INDUCT_POS_SHORTFORMER, 1, INDUCT_ABLATE_ZERO, 0},
    {"mean pooled", 2, 0, 1, INDUCT_POS_STANDARD, 0, INDUCT_ABLATE_MEAN, INDUCT_MEAN_POOLED},
    {"mean per position", 3, 0, 0, INDUCT_POS_NONE, 0, INDUCT_ABLATE_MEAN,
     INDUCT_MEAN_PER_POSITION},
    {"preserve", 3, 0, 1, INDUCT_POS_STANDARD, 1,
     INDUCT_ABLATE_ZERO | INDUCT_ABLATE_PRESERVE_PATTERNS, 0},
    {"preserve no ln", 3, 0, 0, INDUCT_POS_SHORTFORMER, 1,
     INDUCT_ABLATE_ZERO | INDUCT_ABLATE_PRESERVE_PATTERNS, 0},
    {"mlp (general path)", 2, 16, 1, INDUCT_POS_STANDARD, 0, INDUCT_ABLATE_ZERO, 0},
};

START_TEST(test_attribution_paths) {
    const attr_variant *v = &ATTR[_i];
    enum { H = 2, V = 13, T = 20 };
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = v->layers;
    c.d_model = 12;
    c.n_heads = H;
    c.d_mlp = v->d_mlp;
    c.layer_norm = v->layer_norm;
    c.positional = v->positional;
    c.smeared_keys = v->smeared;
    c.d_vocab = V;
    c.n_ctx = T;
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, 0.6, 50 + _i);
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = V;
    rc.min_block = 3;
    rc.seed = 3;
    induct_dataset *d;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec);
    ec.n_seq = 5;
    ec.chunk = 2;
    ec.seq_len = T;
    ec.early = 2;
    ec.late = 17;
    if ((v->mode & 0xff) == INDUCT_ABLATE_MEAN) {
        int32_t ref[4 * T];
        tu_tokens(ref, 4 * T, V, 77);
        ck_ok(induct_model_set_ablation_mean(m, ref, 4, T, v->mean_how));
    }
    size_t n = (size_t)v->layers * H, len;
    float attr[3 * H];
    double icl_clean, icl_ref;
    ck_ok(induct_analysis_ablation_attribution(m, d, &ec, v->mode, attr, n, &len, &icl_clean));
    ck_assert_uint_eq(len, n);
    ck_ok(induct_analysis_icl_score(m, d, &ec, &icl_ref));
    ck_assert_double_eq_tol(icl_clean, icl_ref, 1e-12);
    double worst = 0.0, largest = 0.0;
    for (uint32_t l = 0; l < v->layers; l++)
        for (uint32_t h = 0; h < H; h++) {
            ck_ok(induct_model_ablate_head(m, l, h, v->mode & 0xff));
            ck_ok(induct_model_set_preserve_patterns(
                m, (v->mode & INDUCT_ABLATE_PRESERVE_PATTERNS) ? 1 : 0));
            double icl;
            ck_ok(induct_analysis_icl_score(m, d, &ec, &icl));
            ck_ok(induct_model_clear_ablations(m));
            double ref = icl - icl_ref, err = fabs(attr[l * H + h] - ref);
            if (err > worst) worst = err;
            if (fabs(ref) > largest) largest = fabs(ref);
            ck_assert_msg(err < 2e-5 + 1e-4 * fabs(ref), "%s: head (%u,%u) attribution %g vs %g",
                          v->name, l, h, attr[l * H + h], ref);
        }
    ck_assert_msg(largest > 1e-3, "%s: no head matters (largest %g): weak test", v->name, largest);
    /* the ablations in force are unchanged by the attribution */
    uint32_t modes[3 * H], pres;
    ck_ok(induct_model_get_ablations(m, modes, n, &len, &pres));
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(modes[i], 0);
    ck_assert_uint_eq(pres, 0);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* With a head already ablated, attribution adds each head on top (general path). */
START_TEST(test_attribution_on_top) {
    enum { H = 2, V = 11, T = 16 };
    induct_model *m = model(2, 8, H, 0, V, T);
    tu_randomize(m, 0.7, 9);
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = V;
    rc.min_block = 3;
    induct_dataset *d;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec);
    ec.n_seq = 3;
    ec.seq_len = T;
    ec.early = 2;
    ec.late = 14;
    ck_ok(induct_model_ablate_head(m, 0, 0, INDUCT_ABLATE_ZERO));
    float attr[4];
    size_t len;
    double base, icl;
    ck_ok(
        induct_analysis_ablation_attribution(m, d, &ec, INDUCT_ABLATE_ZERO, attr, 4, &len, &base));
    ck_assert_float_eq(attr[0], 0.0f); /* already ablated */
    ck_ok(induct_model_ablate_head(m, 1, 1, INDUCT_ABLATE_ZERO));
    ck_ok(induct_analysis_icl_score(m, d, &ec, &icl));
    ck_assert_double_eq_tol(attr[3], icl - base, 1e-6);
    uint32_t modes[4];
    ck_ok(induct_model_get_ablations(m, modes, 4, &len, NULL));
    ck_assert_uint_eq(modes[0], INDUCT_ABLATE_ZERO);
    ck_assert_uint_eq(modes[3], INDUCT_ABLATE_ZERO);
    ck_assert_uint_eq(modes[1] + modes[2], 0);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

Suite *analysis_suite(void) {
    Suite *s = suite_create("analysis");
    TCase *tc = tcase_create("closed form");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_induction_circuit);
    tcase_add_test(tc, test_uniform_attention);
    tcase_add_test(tc, test_ov_identity);
    tcase_add_test(tc, test_zero_logits);
    suite_add_tcase(s, tc);
    tc = tcase_create("ablation");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_zero_ablation_exact);
    tcase_add_test(tc, test_zero_ablation_two_layers);
    tcase_add_test(tc, test_ablate_all_direct_path);
    tcase_add_test(tc, test_mean_ablation);
    tcase_add_test(tc, test_pattern_preserving);
    tcase_add_loop_test(tc, test_attribution_paths, 0, (int)(sizeof ATTR / sizeof ATTR[0]));
    tcase_add_test(tc, test_attribution_on_top);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(analysis_suite()); }
