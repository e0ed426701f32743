/* analysis (issue 4): head ablation (ICL paper, Appendix "Analyses") — zero, mean
 * and pattern-preserving — as state that stays in force for every later forward
 * pass, and the per-head ablation attribution of the ICL score.
 *
 * The forward pass (lib/forward.c) touches this file at two points only: when heads
 * are ablated, induct__forward hands the whole pass to induct__ablation_forward()
 * (which runs the clean pass first if patterns are to be frozen), and right after a
 * layer's attention has produced z it calls induct__ablation_hook(). With no head
 * ablated neither runs, so outputs are bit-identical to a never-ablated model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis_internal.h"

_Static_assert(INDUCT__ABL_NONE == INDUCT_ABLATE_NONE && INDUCT__ABL_ZERO == INDUCT_ABLATE_ZERO &&
                   INDUCT__ABL_MEAN == INDUCT_ABLATE_MEAN,
               "internal ablation modes are stored as the public INDUCT_ABLATE_* values");

#define P(off) (m->params + (off))
#define WS(off) (m->ws + (off))

/* ---- state ------------------------------------------------------------------------ */

static size_t n_heads_total(const induct_model *m) {
    return (size_t)m->cfg.n_layers * m->cfg.n_heads;
}

static int ensure_modes(induct_model *m) {
    if (m->abl.mode) return INDUCT_OK;
    INDUCT_TRY(induct__model_reserve(m, n_heads_total(m), 0, "ablation modes"));
    m->abl.mode = calloc(n_heads_total(m), 1);
    INDUCT_FAIL_IF(!m->abl.mode, INDUCT_ENOMEM, "ablation: out of memory");
    induct__model_held(m, n_heads_total(m), 0); /* hardening (issue 7) */
    return INDUCT_OK;
}

static void recount(induct_model *m) {
    induct__ablation *a = &m->abl;
    uint32_t H = m->cfg.n_heads, n = 0, first = m->cfg.n_layers;
    if (a->mode)
        for (size_t i = 0; i < n_heads_total(m); i++)
            if (a->mode[i] != INDUCT__ABL_NONE) {
                n++;
                if (i / H < first) first = (uint32_t)(i / H);
            }
    a->active = n;
    a->first_layer = n ? first : 0;
}

static int any_mean(const induct_model *m) {
    if (!m->abl.mode) return 0;
    for (size_t i = 0; i < n_heads_total(m); i++)
        if (m->abl.mode[i] == INDUCT__ABL_MEAN) return 1;
    return 0;
}

void induct__ablation_free(induct_model *m) {
    free(m->abl.mode);
    free(m->abl.mean);
    free(m->abl.frozen);
    memset(&m->abl, 0, sizeof m->abl);
}

INDUCT_API int induct_model_ablate_head(induct_model *m, uint32_t layer, uint32_t head,
                                        uint32_t mode) {
    const char *fn = "induct_model_ablate_head";
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    INDUCT_FAIL_IF(mode > INDUCT_ABLATE_MEAN, INDUCT_EINVAL,
                   "%s: mode %u is not an INDUCT_ABLATE_* mode", fn, mode);
    INDUCT_FAIL_IF(layer >= m->cfg.n_layers || head >= m->cfg.n_heads, INDUCT_ERANGE,
                   "%s: head (%u, %u) does not exist (the model has %u layers of %u heads)", fn,
                   layer, head, m->cfg.n_layers, m->cfg.n_heads);
    INDUCT_FAIL_IF(mode == INDUCT_ABLATE_MEAN && !m->abl.mean, INDUCT_ESTATE,
                   "%s: mean ablation needs a reference: call induct_model_set_ablation_mean "
                   "first",
                   fn);
    if (mode == INDUCT_ABLATE_NONE && !m->abl.mode) return INDUCT_OK;
    INDUCT_TRY(ensure_modes(m));
    m->abl.mode[(size_t)layer * m->cfg.n_heads + head] = (uint8_t)mode;
    recount(m);
    return INDUCT_OK;
}

INDUCT_API int induct_model_set_preserve_patterns(induct_model *m, uint32_t on) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_set_preserve_patterns: model is NULL");
    INDUCT_FAIL_IF(on > 1, INDUCT_EINVAL, "induct_model_set_preserve_patterns: on must be 0 or 1");
    m->abl.preserve = on;
    return INDUCT_OK;
}

INDUCT_API int induct_model_clear_ablations(induct_model *m) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_clear_ablations: model is NULL");
    if (m->abl.mode) memset(m->abl.mode, 0, n_heads_total(m));
    m->abl.preserve = 0;
    m->abl.phase = INDUCT__ABL_PHASE_IDLE;
    free(m->abl.frozen);
    induct__model_held(m, 0, (uint64_t)m->abl.frozen_cap * sizeof(float));
    m->abl.frozen = NULL;
    m->abl.frozen_cap = 0;
    recount(m);
    return INDUCT_OK;
}

INDUCT_API int induct_model_get_ablations(const induct_model *m, uint32_t *modes_out,
                                          size_t modes_cap, size_t *out_len,
                                          uint32_t *preserve_out) {
    const char *fn = "induct_model_get_ablations";
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    if (preserve_out) *preserve_out = m->abl.preserve;
    INDUCT_TRY(induct__an_heads_out(m, fn, modes_out, modes_cap, out_len));
    for (size_t i = 0; i < n_heads_total(m); i++)
        modes_out[i] = m->abl.mode ? m->abl.mode[i] : INDUCT_ABLATE_NONE;
    return INDUCT_OK;
}

INDUCT_API int induct_model_set_ablation_mean(induct_model *m, const int32_t *tokens, uint32_t B,
                                              uint32_t T, uint32_t how) {
    const char *fn = "induct_model_set_ablation_mean";
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    INDUCT_FAIL_IF(how > INDUCT_MEAN_PER_POSITION, INDUCT_EINVAL,
                   "%s: how must be INDUCT_MEAN_POOLED or INDUCT_MEAN_PER_POSITION", fn);
    INDUCT_TRY(induct__model_validate_tokens(m, tokens, B, T));
    const induct_model_config *c = &m->cfg;
    size_t L = c->n_layers, H = c->n_heads, dh = c->d_head, HD = H * dh;
    size_t MT = how ? T : 1, n;
    INDUCT_FAIL_IF(!induct__mul(L * H, MT, &n) || !induct__mul(n, dh, &n), INDUCT_ELIMIT,
                   "%s: reference too large", fn);
    /* hardening (issue 7): the reference (held with the model, replacing the old one),
     * its accumulator and the reference pass must fit the model's limits */
    induct__bytes tmp = {0, 0};
    induct__bytes_add(&tmp, n, sizeof(float));
    uint64_t mean_bytes = tmp.n, old_bytes = m->abl.mean ? (uint64_t)L * H * m->abl.mean_T * dh *
                                                               sizeof(float)
                                                         : 0;
    induct__bytes_add(&tmp, (uint64_t)MT * dh, sizeof(double));
    INDUCT_FAIL_IF(tmp.overflow, INDUCT_ELIMIT, "%s: reference too large", fn);
    INDUCT_TRY(induct__model_check_workspace(m, B, T, tmp.n));
    float *mean = malloc(n * sizeof *mean);
    double *acc = malloc(MT * dh * sizeof *acc);
    if (!mean || !acc) {
        free(mean);
        free(acc);
        return induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    }
    /* the clean model: no ablation during the reference pass */
    uint32_t saved = m->abl.active;
    m->abl.active = 0;
    int rc = induct__forward(m, tokens, B, T, NULL);
    m->abl.active = saved;
    if (rc != INDUCT_OK) {
        free(mean);
        free(acc);
        return rc;
    }
    double cnt = how ? (double)B : (double)B * T;
    for (size_t l = 0; l < L; l++) {
        const float *z = WS(m->A[l].z);
        for (size_t h = 0; h < H; h++) {
            memset(acc, 0, MT * dh * sizeof *acc);
            for (size_t b = 0; b < B; b++)
                for (size_t p = 0; p < T; p++) {
                    const float *zp = z + ((b * T + p) * HD + h * dh);
                    double *ap = acc + (how ? p : 0) * dh;
                    for (size_t j = 0; j < dh; j++)
                        ap[j] += zp[j];
                }
            float *dst = mean + (l * H + h) * MT * dh;
            for (size_t i = 0; i < MT * dh; i++)
                dst[i] = (float)(acc[i] / cnt);
        }
    }
    free(acc);
    free(m->abl.mean);
    induct__model_held(m, mean_bytes, old_bytes);
    m->abl.mean = mean;
    m->abl.mean_T = (uint32_t)MT;
    m->abl.mean_per_pos = how;
    return INDUCT_OK;
}

/* ---- the forward-pass hooks -------------------------------------------------------- */

static const float *mean_of(const induct_model *m, size_t l, size_t h, size_t p) {
    const induct__ablation *a = &m->abl;
    size_t dh = m->cfg.d_head;
    return a->mean + ((l * m->cfg.n_heads + h) * a->mean_T + (a->mean_per_pos ? p : 0)) * dh;
}

int induct__ablation_forward(induct_model *m, const int32_t *tokens, uint32_t B, uint32_t T,
                             double *mean_loss) {
    induct__ablation *a = &m->abl;
    const induct_model_config *c = &m->cfg;
    INDUCT_FAIL_IF(any_mean(m) && a->mean_per_pos && T > a->mean_T, INDUCT_ERANGE,
                   "mean ablation: the per-position reference covers %u positions, the input "
                   "has %u",
                   a->mean_T, T);
    int rc;
    if (a->preserve && a->first_layer + 1 < c->n_layers) {
        size_t need, TT;
        if (!induct__mul(T, T, &TT) || !induct__mul(TT, (size_t)B * c->n_heads, &need) ||
            !induct__mul(need, c->n_layers - a->first_layer - 1, &need))
            return induct__fail(INDUCT_ELIMIT, "pattern-preserving ablation: size overflow");
        if (need > a->frozen_cap) {
            /* hardening (issue 7): the passes' workspace first (it bounds B, T), then the
             * frozen patterns, held with the model, within its limits */
            uint64_t old = (uint64_t)a->frozen_cap * sizeof(float);
            INDUCT_TRY(induct__model_check_workspace(m, B, T, 0));
            INDUCT_FAIL_IF(need > SIZE_MAX / sizeof(float), INDUCT_ELIMIT,
                           "pattern-preserving ablation: size overflow");
            INDUCT_TRY(induct__model_reserve(m, (uint64_t)need * sizeof(float), old,
                                             "pattern-preserving ablation"));
            float *f = malloc(need * sizeof *f);
            INDUCT_FAIL_IF(!f, INDUCT_ENOMEM,
                           "pattern-preserving ablation: out of memory for %zu floats", need);
            free(a->frozen);
            a->frozen = f;
            a->frozen_cap = need;
            induct__model_held(m, (uint64_t)need * sizeof(float), old);
        }
        a->phase = INDUCT__ABL_PHASE_RECORD;
        rc = induct__forward(m, tokens, B, T, NULL);
        if (rc != INDUCT_OK) {
            a->phase = INDUCT__ABL_PHASE_IDLE;
            return rc;
        }
    }
    a->phase = INDUCT__ABL_PHASE_APPLY;
    rc = induct__forward(m, tokens, B, T, mean_loss);
    a->phase = INDUCT__ABL_PHASE_IDLE;
    return rc;
}

void induct__ablation_hook(induct_model *m, uint32_t l, uint32_t B, uint32_t T) {
    induct__ablation *a = &m->abl;
    const induct_model_config *c = &m->cfg;
    size_t H = c->n_heads, dh = c->d_head, HD = H * dh, TT = (size_t)T * T;
    const uint8_t *mode = a->mode + (size_t)l * H;
    float *att = WS(m->A[l].att), *z = WS(m->A[l].z);
    const float *v = WS(m->A[l].v);
    if (a->preserve && l > a->first_layer && a->frozen) {
        float *fr = a->frozen + (size_t)(l - a->first_layer - 1) * B * H * TT;
        if (a->phase == INDUCT__ABL_PHASE_RECORD) {
            memcpy(fr, att, (size_t)B * H * TT * sizeof *att);
            return;
        }
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < H; h++) {
                if (mode[h] != INDUCT__ABL_NONE) continue;
                float *A = att + (b * H + h) * TT;
                memcpy(A, fr + (b * H + h) * TT, TT * sizeof *A);
                induct__an_sgemm(0, 0, T, dh, T, 1.0f, A, T, v + b * T * HD + h * dh, HD, 0.0f,
                                 z + b * T * HD + h * dh, HD);
            }
    }
    if (a->phase == INDUCT__ABL_PHASE_RECORD) return;
    for (size_t h = 0; h < H; h++) {
        if (mode[h] == INDUCT__ABL_NONE) continue;
        for (size_t b = 0; b < B; b++)
            for (size_t p = 0; p < T; p++) {
                float *zp = z + (b * T + p) * HD + h * dh;
                if (mode[h] == INDUCT__ABL_ZERO)
                    memset(zp, 0, dh * sizeof *zp);
                else
                    memcpy(zp, mean_of(m, l, h, p), dh * sizeof *zp);
            }
    }
}

/* ---- attribution: general path ---------------------------------------------------- */

/* Each head: add it to the ablations in force, one pass over the evaluation set. */
static int attribution_general(induct_model *m, const induct__eval *ev, uint32_t mode,
                               uint32_t preserve, float *out, double *icl_out) {
    double base;
    INDUCT_TRY(induct__eval_icl(m, ev, &base));
    INDUCT_TRY(ensure_modes(m));
    induct__ablation *a = &m->abl;
    uint32_t p0 = a->preserve;
    for (size_t i = 0; i < n_heads_total(m); i++) {
        uint8_t old = a->mode[i];
        a->mode[i] = (uint8_t)mode;
        a->preserve = p0 | preserve;
        recount(m);
        double v = 0.0;
        int rc = induct__eval_icl(m, ev, &v);
        a->mode[i] = old;
        a->preserve = p0;
        recount(m);
        if (rc != INDUCT_OK) return rc;
        out[i] = (float)(v - base);
    }
    *icl_out = base;
    return INDUCT_OK;
}

/* ---- attribution: attention-only fast path ------------------------------------------
 * The clean pass of a chunk stays in the workspace. Ablating head (l0, h) changes
 * the residual stream after layer l0 by (z'_h − z_h) W_O[h]; only layers after l0
 * see it. The ICL score reads two positions per sequence (e and t), so the last
 * layer is evaluated only for those query rows (keys and values for all rows), and
 * the unembedding only for those rows. The per-start-layer baseline (no head
 * ablated) goes through the same code, so a head without effect scores exactly 0. */

typedef struct fast_ctx {
    induct_model *m;
    const induct__eval *ev;
    uint32_t B;   /* sequences in this chunk */
    uint32_t s0;  /* first sequence of the chunk */
    uint32_t R;   /* query rows: 2 per sequence */
    size_t *row;  /* [R] row index b*T + p into the chunk */
    int32_t *tgt; /* [R] target token of each row */
    uint32_t mode, preserve;
    /* packed weights [n_layers][D][HD] */
    float *wq, *wk, *wv;
    /* scratch */
    float *r, *x, *qk, *q, *kr, *k, *v, *z, *att, *zd, *fin, *y, *logits, *qrow, *zrow;
    float *mq; /* [3][d_head][HD]: W_O[h] W_Q, W_O[h] W_K, W_O[h] W_V of the next layer */
} fast_ctx;

static void layernorm_rows(float *out, const float *in, const float *w, const float *b, size_t N,
                           size_t D) {
    for (size_t n = 0; n < N; n++) {
        const float *x = in + n * D;
        double mu = 0.0, var = 0.0;
        for (size_t i = 0; i < D; i++)
            mu += x[i];
        mu /= (double)D;
        for (size_t i = 0; i < D; i++)
            var += ((double)x[i] - mu) * ((double)x[i] - mu);
        var /= (double)D;
        float rstd = (float)(1.0 / sqrt(var + 1e-5));
        for (size_t i = 0; i < D; i++)
            out[n * D + i] = ((float)(x[i] - mu) * rstd) * w[i] + b[i];
    }
}

static void softmax_causal(float *row, size_t n) {
    float mx = row[0];
    for (size_t i = 1; i < n; i++)
        if (row[i] > mx) mx = row[i];
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        row[i] = expf(row[i] - mx);
        s += row[i];
    }
    float inv = (float)(1.0 / s);
    for (size_t i = 0; i < n; i++)
        row[i] *= inv;
}

/* Keys (smeared), values and queries of layer l from the residual ctx->r on all rows;
 * queries only at the query rows when `rows` (then cx->fin gets the residual rows). */
static void inputs_from_resid(fast_ctx *cx, uint32_t l, int rows) {
    induct_model *m = cx->m;
    const induct_model_config *c = &m->cfg;
    const induct__layer_off *o = &m->L[l];
    size_t T = cx->ev->T, N = (size_t)cx->B * T, D = c->d_model, H = c->n_heads, dh = c->d_head,
           HD = H * dh, R = cx->R;
    float *x = cx->r;
    if (c->layer_norm) {
        layernorm_rows(cx->x, cx->r, P(o->ln1_w), P(o->ln1_b), N, D);
        x = cx->x;
    }
    float *qk = x;
    if (c->positional == INDUCT_POS_SHORTFORMER) {
        const float *Wp = P(m->W_pos);
        for (size_t n = 0; n < N; n++)
            for (size_t i = 0; i < D; i++)
                cx->qk[n * D + i] = x[n * D + i] + Wp[(n % T) * D + i];
        qk = cx->qk;
    }
    const float *wq = cx->wq + (size_t)l * D * HD, *wk = cx->wk + (size_t)l * D * HD,
                *wv = cx->wv + (size_t)l * D * HD;
    induct__an_sgemm(0, 0, N, HD, D, 1.0f, qk, D, wk, HD, 0.0f, cx->kr, HD);
    induct__an_sgemm(0, 0, N, HD, D, 1.0f, x, D, wv, HD, 0.0f, cx->v, HD);
    const float *bQ = P(o->b_Q), *bK = P(o->b_K), *bV = P(o->b_V);
    for (size_t n = 0; n < N; n++)
        for (size_t j = 0; j < HD; j++) {
            cx->kr[n * HD + j] += bK[j];
            cx->v[n * HD + j] += bV[j];
        }
    size_t nq = rows ? R : N;
    const float *qin = qk;
    if (rows) {
        for (size_t i = 0; i < R; i++) {
            memcpy(cx->qrow + i * D, qk + cx->row[i] * D, D * sizeof(float));
            memcpy(cx->fin + i * D, cx->r + cx->row[i] * D, D * sizeof(float));
        }
        qin = cx->qrow;
    }
    induct__an_sgemm(0, 0, nq, HD, D, 1.0f, qin, D, wq, HD, 0.0f, cx->q, HD);
    for (size_t n = 0; n < nq; n++)
        for (size_t j = 0; j < HD; j++)
            cx->q[n * HD + j] += bQ[j];
}

/* Without LayerNorm, the inputs of layer l = l0 + 1 are linear in the residual
 * stream: clean workspace values plus zd (W_O[h] W_X) for X = Q, K, V (d_head x HD
 * products: the d_model-wide projections are not redone). ctx->r (all rows, or
 * ctx->fin at the query rows) gets the clean residual plus zd W_O[h]. */
static void inputs_from_delta(fast_ctx *cx, uint32_t l, uint32_t l0, int h, int rows) {
    induct_model *m = cx->m;
    const induct_model_config *c = &m->cfg;
    size_t T = cx->ev->T, N = (size_t)cx->B * T, D = c->d_model, H = c->n_heads, dh = c->d_head,
           HD = H * dh, R = cx->R;
    const induct__layer_act *a = &m->A[l];
    memcpy(cx->kr, WS(a->k_raw), N * HD * sizeof(float));
    memcpy(cx->v, WS(a->v), N * HD * sizeof(float));
    const float *q = WS(a->q), *res = WS(a->resid_pre);
    size_t nq = rows ? R : N;
    for (size_t i = 0; i < nq; i++) {
        size_t rw = rows ? cx->row[i] : i;
        memcpy(cx->q + i * HD, q + rw * HD, HD * sizeof(float));
        memcpy((rows ? cx->fin : cx->r) + i * D, res + rw * D, D * sizeof(float));
    }
    if (h < 0) return;
    const float *WO = P(m->L[l0].W_O) + (size_t)h * dh * D;
    float *MQ = cx->mq, *MK = cx->mq + dh * HD, *MV = cx->mq + 2 * dh * HD;
    induct__an_sgemm(0, 0, dh, HD, D, 1.0f, WO, D, cx->wq + (size_t)l * D * HD, HD, 0.0f, MQ, HD);
    induct__an_sgemm(0, 0, dh, HD, D, 1.0f, WO, D, cx->wk + (size_t)l * D * HD, HD, 0.0f, MK, HD);
    induct__an_sgemm(0, 0, dh, HD, D, 1.0f, WO, D, cx->wv + (size_t)l * D * HD, HD, 0.0f, MV, HD);
    induct__an_sgemm(0, 0, N, HD, dh, 1.0f, cx->zd, dh, MK, HD, 1.0f, cx->kr, HD);
    induct__an_sgemm(0, 0, N, HD, dh, 1.0f, cx->zd, dh, MV, HD, 1.0f, cx->v, HD);
    if (rows) {
        for (size_t i = 0; i < R; i++)
            memcpy(cx->qrow + i * dh, cx->zd + cx->row[i] * dh, dh * sizeof(float));
        induct__an_sgemm(0, 0, R, HD, dh, 1.0f, cx->qrow, dh, MQ, HD, 1.0f, cx->q, HD);
        induct__an_sgemm(0, 0, R, D, dh, 1.0f, cx->qrow, dh, WO, D, 1.0f, cx->fin, D);
    } else {
        induct__an_sgemm(0, 0, N, HD, dh, 1.0f, cx->zd, dh, MQ, HD, 1.0f, cx->q, HD);
        induct__an_sgemm(0, 0, N, D, dh, 1.0f, cx->zd, dh, WO, D, 1.0f, cx->r, D);
    }
}

/* Smear the raw keys of layer l (ctx->kr -> ctx->k) when the model has smeared keys. */
static const float *smear(fast_ctx *cx, uint32_t l) {
    induct_model *m = cx->m;
    const induct_model_config *c = &m->cfg;
    if (!c->smeared_keys) return cx->kr;
    size_t T = cx->ev->T, H = c->n_heads, dh = c->d_head, HD = H * dh;
    const float *al = P(m->L[l].alpha);
    for (size_t h = 0; h < H; h++) {
        float s = (float)(1.0 / (1.0 + exp(-(double)al[h])));
        for (size_t b = 0; b < cx->B; b++)
            for (size_t p = 0; p < T; p++) {
                float *kp = cx->k + ((b * T + p) * HD + h * dh);
                const float *k0 = cx->kr + ((b * T + p) * HD + h * dh);
                for (size_t j = 0; j < dh; j++)
                    kp[j] = p ? s * k0[j] + (1.0f - s) * k0[j - HD] : k0[j];
            }
    }
    return cx->k;
}

/* Attention of layer l on all rows: ctx->r += z W_O + b_O. */
static void attend_full(fast_ctx *cx, uint32_t l, int frozen) {
    induct_model *m = cx->m;
    const induct_model_config *c = &m->cfg;
    const induct__layer_off *o = &m->L[l];
    size_t T = cx->ev->T, N = (size_t)cx->B * T, D = c->d_model, H = c->n_heads, dh = c->d_head,
           HD = H * dh, TT = T * T;
    const float *K = smear(cx, l);
    float scale = 1.0f / sqrtf((float)dh);
    for (size_t b = 0; b < cx->B; b++)
        for (size_t h = 0; h < H; h++) {
            const float *A;
            if (frozen) {
                A = WS(m->A[l].att) + (b * H + h) * TT;
            } else {
                induct__an_sgemm(0, 1, T, T, dh, scale, cx->q + b * T * HD + h * dh, HD,
                                 K + b * T * HD + h * dh, HD, 0.0f, cx->att, T);
                for (size_t p = 0; p < T; p++) {
                    softmax_causal(cx->att + p * T, p + 1);
                    memset(cx->att + p * T + p + 1, 0, (T - p - 1) * sizeof(float));
                }
                A = cx->att;
            }
            induct__an_sgemm(0, 0, T, dh, T, 1.0f, A, T, cx->v + b * T * HD + h * dh, HD, 0.0f,
                             cx->z + b * T * HD + h * dh, HD);
        }
    const float *bO = P(o->b_O);
    for (size_t n = 0; n < N; n++)
        for (size_t i = 0; i < D; i++)
            cx->r[n * D + i] += bO[i];
    induct__an_sgemm(0, 0, N, D, HD, 1.0f, cx->z, HD, P(o->W_O), D, 1.0f, cx->r, D);
}

/* Attention of layer l at the query rows only: ctx->fin (the residual rows) +=
 * z W_O + b_O. ctx->q holds the queries of those rows. */
static void attend_rows(fast_ctx *cx, uint32_t l, int frozen) {
    induct_model *m = cx->m;
    const induct_model_config *c = &m->cfg;
    const induct__layer_off *o = &m->L[l];
    size_t T = cx->ev->T, D = c->d_model, H = c->n_heads, dh = c->d_head, HD = H * dh, TT = T * T,
           R = cx->R;
    const float *K = smear(cx, l);
    float scale = 1.0f / sqrtf((float)dh);
    const float *bO = P(o->b_O);
    for (size_t i = 0; i < R; i++) {
        size_t b = cx->row[i] / T, p = cx->row[i] % T;
        for (size_t h = 0; h < H; h++) {
            float *A = cx->att;
            if (frozen) {
                memcpy(A, WS(m->A[l].att) + (b * H + h) * TT + p * T, (p + 1) * sizeof(float));
            } else {
                induct__an_sgemm(0, 1, 1, p + 1, dh, scale, cx->q + i * HD + h * dh, dh,
                                 K + b * T * HD + h * dh, HD, 0.0f, A, p + 1);
                softmax_causal(A, p + 1);
            }
            induct__an_sgemm(0, 0, 1, dh, p + 1, 1.0f, A, p + 1, cx->v + b * T * HD + h * dh, HD,
                             0.0f, cx->zrow + i * HD + h * dh, dh);
        }
        for (size_t d = 0; d < D; d++)
            cx->fin[i * D + d] += bO[d];
    }
    induct__an_sgemm(0, 0, R, D, HD, 1.0f, cx->zrow, HD, P(o->W_O), D, 1.0f, cx->fin, D);
}

/* z'_h − z_h of head (l0, h) at `rows` (NULL: every row of the chunk) into zd [n][dh]. */
static void head_delta(fast_ctx *cx, uint32_t l0, uint32_t h, const size_t *rows, size_t n) {
    induct_model *m = cx->m;
    size_t T = cx->ev->T, dh = m->cfg.d_head, HD = (size_t)m->cfg.n_heads * dh;
    const float *z = WS(m->A[l0].z);
    for (size_t i = 0; i < n; i++) {
        size_t rw = rows ? rows[i] : i;
        const float *zp = z + rw * HD + (size_t)h * dh;
        const float *mp = cx->mode == INDUCT__ABL_MEAN ? mean_of(m, l0, h, rw % T) : NULL;
        for (size_t j = 0; j < dh; j++)
            cx->zd[i * dh + j] = (mp ? mp[j] : 0.0f) - zp[j];
    }
}

/* Losses at the query rows with head (l0, h) ablated (h < 0: none), into loss [R]. */
static void tail(fast_ctx *cx, uint32_t l0, int h, double *loss) {
    induct_model *m = cx->m;
    const induct_model_config *c = &m->cfg;
    size_t T = cx->ev->T, N = (size_t)cx->B * T, D = c->d_model, dh = c->d_head, V = c->d_vocab,
           R = cx->R, L = c->n_layers;
    int frozen = cx->preserve != 0;
    const float *WO = h >= 0 ? P(m->L[l0].W_O) + (size_t)h * dh * D : NULL;
    if (l0 == L - 1) {
        const float *rf = WS(m->a_resid_final);
        for (size_t i = 0; i < R; i++)
            memcpy(cx->fin + i * D, rf + cx->row[i] * D, D * sizeof(float));
        if (h >= 0) {
            head_delta(cx, l0, (uint32_t)h, cx->row, R);
            induct__an_sgemm(0, 0, R, D, dh, 1.0f, cx->zd, dh, WO, D, 1.0f, cx->fin, D);
        }
    } else {
        uint32_t l1 = l0 + 1;
        int last = l1 == L - 1;
        if (h >= 0) head_delta(cx, l0, (uint32_t)h, NULL, N);
        if (!c->layer_norm) {
            inputs_from_delta(cx, l1, l0, h, last);
        } else {
            memcpy(cx->r, WS(m->A[l1].resid_pre), N * D * sizeof(float));
            if (h >= 0) induct__an_sgemm(0, 0, N, D, dh, 1.0f, cx->zd, dh, WO, D, 1.0f, cx->r, D);
            inputs_from_resid(cx, l1, last);
        }
        if (last) {
            attend_rows(cx, l1, frozen);
        } else {
            attend_full(cx, l1, frozen);
            for (uint32_t l = l1 + 1; l + 1 < L; l++) {
                inputs_from_resid(cx, l, 0);
                attend_full(cx, l, frozen);
            }
            inputs_from_resid(cx, (uint32_t)(L - 1), 1);
            attend_rows(cx, (uint32_t)(L - 1), frozen);
        }
    }
    const float *y = cx->fin;
    if (c->layer_norm) {
        layernorm_rows(cx->y, cx->fin, P(m->lnf_w), P(m->lnf_b), R, D);
        y = cx->y;
    }
    induct__an_sgemm(0, 0, R, V, D, 1.0f, y, D, P(m->W_U), V, 0.0f, cx->logits, V);
    const float *bU = P(m->b_U);
    for (size_t i = 0; i < R; i++) {
        float *lg = cx->logits + i * V;
        float mx = -INFINITY;
        for (size_t u = 0; u < V; u++) {
            lg[u] += bU[u];
            if (lg[u] > mx) mx = lg[u];
        }
        double s = 0.0;
        for (size_t u = 0; u < V; u++)
            s += expf(lg[u] - mx);
        loss[i] = log(s) + ((double)mx - (double)lg[cx->tgt[i]]); /* max cancels first */
    }
}

static void fast_free(fast_ctx *cx) {
    float **bufs[] = {&cx->wq, &cx->wk,     &cx->wv,   &cx->r,    &cx->x,   &cx->qk, &cx->q,
                      &cx->kr, &cx->k,      &cx->v,    &cx->z,    &cx->att, &cx->zd, &cx->fin,
                      &cx->y,  &cx->logits, &cx->qrow, &cx->zrow, &cx->mq};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
    free(cx->row);
    free(cx->tgt);
}

static int fast_alloc(fast_ctx *cx) {
    induct_model *m = cx->m;
    const induct_model_config *c = &m->cfg;
    size_t Bm = cx->ev->chunk, T = cx->ev->T, D = c->d_model, HD = (size_t)c->n_heads * c->d_head,
           V = c->d_vocab, L = c->n_layers, R = 2 * Bm, N, ND, NHD, W, RV, TT;
    int ok = induct__mul(Bm, T, &N) && induct__mul(N, D, &ND) && induct__mul(N, HD, &NHD) &&
             induct__mul(L * D, HD, &W) && induct__mul(R, V, &RV) && induct__mul(T, T, &TT) &&
             ND < ((size_t)1 << 34) && NHD < ((size_t)1 << 34);
    INDUCT_FAIL_IF(!ok, INDUCT_ELIMIT, "ablation attribution: size overflow");
    size_t zdn = NHD > ND ? NHD : ND; /* zd holds [N][d_head] <= [N][HD] */
    struct {
        float **p;
        size_t n;
    } plan[] = {{&cx->wq, W},
                {&cx->wk, W},
                {&cx->wv, W},
                {&cx->r, ND},
                {&cx->x, ND},
                {&cx->qk, ND},
                {&cx->q, NHD},
                {&cx->kr, NHD},
                {&cx->k, NHD},
                {&cx->v, NHD},
                {&cx->z, NHD},
                {&cx->att, TT},
                {&cx->zd, zdn},
                {&cx->fin, R * D},
                {&cx->y, R * D},
                {&cx->logits, RV},
                {&cx->qrow, R * (D > c->d_head ? D : c->d_head)},
                {&cx->zrow, R * HD},
                {&cx->mq, 3 * c->d_head * HD}};
    /* hardening (issue 7): these buffers and the clean pass's workspace must fit */
    induct__bytes tmp = {0, 0};
    for (size_t i = 0; i < sizeof plan / sizeof *plan; i++)
        induct__bytes_add(&tmp, plan[i].n ? plan[i].n : 1, sizeof(float));
    induct__bytes_add(&tmp, R, sizeof *cx->row + sizeof *cx->tgt);
    INDUCT_FAIL_IF(tmp.overflow, INDUCT_ELIMIT, "ablation attribution: size overflow");
    INDUCT_TRY(induct__model_check_workspace(m, (uint32_t)Bm, (uint32_t)T, tmp.n));
    for (size_t i = 0; i < sizeof plan / sizeof *plan; i++) {
        *plan[i].p = malloc((plan[i].n ? plan[i].n : 1) * sizeof(float));
        if (!*plan[i].p) {
            fast_free(cx);
            return induct__fail(INDUCT_ENOMEM, "ablation attribution: out of memory");
        }
    }
    cx->row = malloc(R * sizeof *cx->row);
    cx->tgt = malloc(R * sizeof *cx->tgt);
    if (!cx->row || !cx->tgt) {
        fast_free(cx);
        return induct__fail(INDUCT_ENOMEM, "ablation attribution: out of memory");
    }
    /* W_Q [H, D, dh] -> [D, H*dh] per layer */
    size_t H = c->n_heads, dh = c->d_head;
    for (size_t l = 0; l < L; l++) {
        const size_t src[3] = {m->L[l].W_Q, m->L[l].W_K, m->L[l].W_V};
        float *dst[3] = {cx->wq + l * D * HD, cx->wk + l * D * HD, cx->wv + l * D * HD};
        for (int s = 0; s < 3; s++)
            for (size_t h = 0; h < H; h++)
                for (size_t d = 0; d < D; d++)
                    memcpy(dst[s] + d * HD + h * dh, P(src[s]) + (h * D + d) * dh,
                           dh * sizeof(float));
    }
    return INDUCT_OK;
}

static int attribution_fast(induct_model *m, const induct__eval *ev, uint32_t mode,
                            uint32_t preserve, float *out, double *icl_out) {
    const char *fn = "induct_analysis_ablation_attribution";
    const induct_model_config *c = &m->cfg;
    size_t L = c->n_layers, H = c->n_heads, T = ev->T, T1 = T - 1;
    fast_ctx cx = {.m = m, .ev = ev, .mode = mode, .preserve = preserve};
    INDUCT_TRY(fast_alloc(&cx));
    double *dsum = calloc(L * H, sizeof *dsum), *base = malloc(2 * ev->chunk * sizeof *base),
           *abl = malloc(2 * ev->chunk * sizeof *abl);
    int rc = INDUCT_OK;
    if (!dsum || !base || !abl) rc = induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    double se = 0.0, st = 0.0;
    for (uint32_t s0 = 0; rc == INDUCT_OK && s0 < ev->n_seq; s0 += ev->chunk) {
        uint32_t B = ev->n_seq - s0 < ev->chunk ? ev->n_seq - s0 : ev->chunk;
        rc = induct__an_interrupted(m, fn);
        if (rc == INDUCT_OK) rc = induct__eval_chunk(m, ev, s0, B);
        if (rc != INDUCT_OK) break;
        const float *Ls = WS(m->a_losses);
        cx.B = B;
        cx.s0 = s0;
        cx.R = 2 * B;
        for (uint32_t b = 0; b < B; b++) {
            se += Ls[(size_t)b * T1 + ev->e];
            st += Ls[(size_t)b * T1 + ev->t];
            const int32_t *tk = ev->tok + (size_t)(s0 + b) * T;
            cx.row[2 * b] = (size_t)b * T + ev->e;
            cx.row[2 * b + 1] = (size_t)b * T + ev->t;
            cx.tgt[2 * b] = tk[ev->e + 1];
            cx.tgt[2 * b + 1] = tk[ev->t + 1];
        }
        for (size_t l0 = L; rc == INDUCT_OK && l0-- > 0;) {
            tail(&cx, (uint32_t)l0, -1, base);
            for (size_t h = 0; h < H; h++) {
                tail(&cx, (uint32_t)l0, (int)h, abl);
                double acc = 0.0;
                for (uint32_t b = 0; b < B; b++)
                    acc += (abl[2 * b + 1] - abl[2 * b]) - (base[2 * b + 1] - base[2 * b]);
                dsum[l0 * H + h] += acc;
            }
            rc = induct__an_interrupted(m, fn);
        }
    }
    if (rc == INDUCT_OK) {
        for (size_t i = 0; i < L * H; i++)
            out[i] = (float)(dsum[i] / ev->n_seq);
        *icl_out = st / ev->n_seq - se / ev->n_seq;
    }
    free(dsum);
    free(base);
    free(abl);
    fast_free(&cx);
    return rc;
}

INDUCT_API int induct_analysis_ablation_attribution(induct_model *m, const induct_dataset *d,
                                                    const induct_eval_config *cfg, uint32_t mode,
                                                    float *out, size_t out_cap, size_t *out_len,
                                                    double *icl_out) {
    if (m) atomic_store(&m->interrupt, 0);
    return induct__analysis_ablation_attribution(m, d, cfg, mode, out, out_cap, out_len, icl_out);
}

int induct__analysis_ablation_attribution(induct_model *m, const induct_dataset *d,
                                          const induct_eval_config *cfg, uint32_t mode, float *out,
                                          size_t out_cap, size_t *out_len, double *icl_out) {
    const char *fn = "induct_analysis_ablation_attribution";
    INDUCT_FAIL_IF(!m || !d, INDUCT_EINVAL, "%s: NULL model or dataset", fn);
    uint32_t base_mode = mode & 0xffu, flags = mode & ~0xffu;
    INDUCT_FAIL_IF((base_mode != INDUCT_ABLATE_ZERO && base_mode != INDUCT_ABLATE_MEAN) ||
                       (flags & ~INDUCT_ABLATE_PRESERVE_PATTERNS),
                   INDUCT_EINVAL,
                   "%s: mode 0x%x must be INDUCT_ABLATE_ZERO or INDUCT_ABLATE_MEAN, optionally "
                   "| INDUCT_ABLATE_PRESERVE_PATTERNS",
                   fn, mode);
    INDUCT_FAIL_IF(base_mode == INDUCT_ABLATE_MEAN && !m->abl.mean, INDUCT_ESTATE,
                   "%s: mean ablation needs a reference: call induct_model_set_ablation_mean first",
                   fn);
    INDUCT_TRY(induct__an_heads_out(m, fn, out, out_cap, out_len));
    induct__eval ev;
    INDUCT_TRY(induct__eval_open(&ev, m, d, cfg, 1, fn));
    int rc = INDUCT_OK;
    if (base_mode == INDUCT_ABLATE_MEAN && m->abl.mean_per_pos && ev.T > m->abl.mean_T)
        rc = induct__fail(INDUCT_ERANGE,
                          "%s: the per-position mean reference covers %u positions, the "
                          "evaluation set has %u",
                          fn, m->abl.mean_T, ev.T);
    double icl = 0.0;
    if (rc == INDUCT_OK) {
        uint32_t preserve = (flags & INDUCT_ABLATE_PRESERVE_PATTERNS) ? 1u : 0u;
        if (m->cfg.d_mlp == 0 && m->abl.active == 0)
            rc = attribution_fast(m, &ev, base_mode, preserve, out, &icl);
        else
            rc = attribution_general(m, &ev, base_mode, preserve, out, &icl);
    }
    induct__eval_close(&ev);
    if (rc == INDUCT_OK && icl_out) *icl_out = icl;
    return rc;
}
