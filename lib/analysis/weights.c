/* analysis: weight-based scores — the Framework's OV-circuit eigenvalue
 * copying score and the Q/K/V composition scores with their random baseline. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "kernels/kernels.h"

/* Copy a float matrix block into doubles. */
static void to_double(double *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

INDUCT_API int induct_analysis_copying_eigen(const induct_model *m, float *out, size_t out_cap,
                                             size_t *out_len) {
    const char *fn = "induct_analysis_copying_eigen";
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    INDUCT_TRY(induct__an_heads_out(m, fn, out, out_cap, out_len));
    INDUCT_TRY(induct__lapack_check(fn));
    const induct_model_config *c = &m->cfg;
    size_t D = c->d_model, V = c->d_vocab, H = c->n_heads, dh = c->d_head;
    /* UE = W_U W_E [D][D], computed once; then per head W_O[h] UE W_V[h] [dh][dh] */
    size_t nDV, nDD;
    INDUCT_FAIL_IF(!induct__mul(D, V, &nDV) || !induct__mul(D, D, &nDD), INDUCT_ELIMIT,
                   "%s: size overflow", fn);
    /* resource limits: these double copies are checked against the model's limits */
    induct__bytes tmp = {0, 0};
    induct__bytes_add(&tmp, nDV, 2 * sizeof(double));
    induct__bytes_add(&tmp, nDD, sizeof(double));
    induct__bytes_add(&tmp, (uint64_t)dh * D, 3 * sizeof(double));
    induct__bytes_add(&tmp, (uint64_t)dh * dh, sizeof(double));
    induct__bytes_add(&tmp, dh, 2 * sizeof(double));
    induct__bytes_add(&tmp, (uint64_t)c->n_layers * H, sizeof(float));
    INDUCT_FAIL_IF(tmp.overflow, INDUCT_ELIMIT, "%s: size overflow", fn);
    INDUCT_TRY(induct__model_reserve(m, tmp.n, 0, fn));
    double *WU = malloc(nDV * sizeof *WU), *WE = malloc(nDV * sizeof *WE),
           *UE = malloc(nDD * sizeof *UE), *Wo = malloc(dh * D * sizeof *Wo),
           *Wv = malloc(D * dh * sizeof *Wv), *t1 = malloc(dh * D * sizeof *t1),
           *M = malloc(dh * dh * sizeof *M), *wr = malloc(dh * sizeof *wr),
           *wi = malloc(dh * sizeof *wi);
    float *res = malloc((size_t)c->n_layers * H * sizeof *res); /* out untouched on failure */
    int rc = INDUCT_OK;
    if (!WU || !WE || !UE || !Wo || !Wv || !t1 || !M || !wr || !wi || !res)
        rc = induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    if (rc == INDUCT_OK) {
        to_double(WU, m->params + m->W_U, nDV);
        to_double(WE, m->params + m->W_E, nDV);
        induct__dgemm_serial(0, 0, D, D, V, 1.0, WU, V, WE, D, 0.0, UE, D);
    }
    for (size_t l = 0; rc == INDUCT_OK && l < c->n_layers; l++)
        for (size_t h = 0; rc == INDUCT_OK && h < H; h++) {
            to_double(Wo, m->params + m->L[l].W_O + h * dh * D, dh * D);
            to_double(Wv, m->params + m->L[l].W_V + h * D * dh, D * dh);
            induct__dgemm_serial(0, 0, dh, D, D, 1.0, Wo, D, UE, D, 0.0, t1, D);
            induct__dgemm_serial(0, 0, dh, dh, D, 1.0, t1, D, Wv, dh, 0.0, M, dh);
            int info = induct__dgeev(dh, M, wr, wi);
            if (info != 0) {
                rc = induct__fail(INDUCT_ERROR,
                                  "%s: LAPACKE_dgeev failed (info %d) for head (%zu, %zu)", fn,
                                  info, l, h);
                break;
            }
            double re = 0.0, ab = 0.0;
            for (size_t i = 0; i < dh; i++) {
                re += wr[i];
                ab += hypot(wr[i], wi[i]);
            }
            res[l * H + h] = ab > 0.0 ? (float)(re / ab) : 0.0f;
        }
    if (rc == INDUCT_OK) memcpy(out, res, (size_t)c->n_layers * H * sizeof *res);
    free(res);
    free(WU);
    free(WE);
    free(UE);
    free(Wo);
    free(Wv);
    free(t1);
    free(M);
    free(wr);
    free(wi);
    return rc;
}

/* ‖A B Cᵀ‖_F² = tr(Bᵀ G_A B G_C) with G_A = AᵀA, G_C = CᵀC (dh × dh): computed as the
 * elementwise sum of (G_A B) ⊙ (B G_C). tmp: 2 dh² doubles. */
static double frob2_abct(const double *GA, const double *Bm, const double *GC, size_t dh,
                         double *tmp) {
    double *X = tmp, *Y = tmp + dh * dh;
    induct__dgemm_serial(0, 0, dh, dh, dh, 1.0, GA, dh, Bm, dh, 0.0, X, dh);
    induct__dgemm_serial(0, 0, dh, dh, dh, 1.0, Bm, dh, GC, dh, 0.0, Y, dh);
    double s = 0.0;
    for (size_t i = 0; i < dh * dh; i++)
        s += X[i] * Y[i];
    return s > 0.0 ? s : 0.0;
}

/* Per-head factors in double: the Grams the scores need. For head i (layer-major):
 *   GV = W_Vᵀ W_V, GOt = W_O W_Oᵀ, GQ = W_Qᵀ W_Q, GK = W_Kᵀ W_K (all dh × dh),
 * plus W_O [dh][D] and W_Q, W_K, W_V [D][dh]. */
typedef struct heads_f {
    size_t n, D, dh;
    double *WQ, *WK, *WV, *WO;  /* [n][D][dh], [n][dh][D] */
    double *GQ, *GK, *GV, *GOt; /* [n][dh][dh] */
} heads_f;

static void heads_free(heads_f *f) {
    free(f->WQ);
    free(f->WK);
    free(f->WV);
    free(f->WO);
    free(f->GQ);
    free(f->GK);
    free(f->GV);
    free(f->GOt);
}

static int heads_alloc(const induct_model *m, heads_f *f, size_t n, size_t D, size_t dh) {
    memset(f, 0, sizeof *f);
    f->n = n;
    f->D = D;
    f->dh = dh;
    size_t big, small;
    INDUCT_FAIL_IF(!induct__mul(n, D * dh, &big) || !induct__mul(n, dh * dh, &small), INDUCT_ELIMIT,
                   "composition: size overflow");
    /* resource limits: the double copies and Gram matrices (plus the caller's 3 dh^2
     * scratch) are checked against the model's limits */
    induct__bytes tmp = {0, 0};
    induct__bytes_add(&tmp, big, 4 * sizeof(double));
    induct__bytes_add(&tmp, small, 4 * sizeof(double));
    induct__bytes_add(&tmp, (uint64_t)dh * dh, 3 * sizeof(double));
    INDUCT_FAIL_IF(tmp.overflow, INDUCT_ELIMIT, "composition: size overflow");
    INDUCT_TRY(induct__model_reserve(m, tmp.n, 0, "composition"));
    f->WQ = malloc(big * sizeof(double));
    f->WK = malloc(big * sizeof(double));
    f->WV = malloc(big * sizeof(double));
    f->WO = malloc(big * sizeof(double));
    f->GQ = malloc(small * sizeof(double));
    f->GK = malloc(small * sizeof(double));
    f->GV = malloc(small * sizeof(double));
    f->GOt = malloc(small * sizeof(double));
    if (!f->WQ || !f->WK || !f->WV || !f->WO || !f->GQ || !f->GK || !f->GV || !f->GOt) {
        heads_free(f);
        return induct__fail(INDUCT_ENOMEM, "composition: out of memory");
    }
    return INDUCT_OK;
}

static void heads_grams(heads_f *f) {
    size_t D = f->D, dh = f->dh;
    for (size_t i = 0; i < f->n; i++) {
        size_t o = i * D * dh, g = i * dh * dh;
        induct__dgemm_serial(1, 0, dh, dh, D, 1.0, f->WQ + o, dh, f->WQ + o, dh, 0.0, f->GQ + g,
                             dh);
        induct__dgemm_serial(1, 0, dh, dh, D, 1.0, f->WK + o, dh, f->WK + o, dh, 0.0, f->GK + g,
                             dh);
        induct__dgemm_serial(1, 0, dh, dh, D, 1.0, f->WV + o, dh, f->WV + o, dh, 0.0, f->GV + g,
                             dh);
        induct__dgemm_serial(0, 1, dh, dh, D, 1.0, f->WO + o, D, f->WO + o, D, 0.0, f->GOt + g, dh);
    }
}

/* Score of kind for earlier head i and later head j. tmp: 3 dh² doubles. */
static double comp_score(const heads_f *f, size_t i, size_t j, uint32_t kind, double *tmp) {
    size_t D = f->D, dh = f->dh, gi = i * dh * dh, gj = j * dh * dh;
    double *Bm = tmp + 2 * dh * dh;
    /* ‖OV_i‖² = ‖W_V W_O‖² = tr(GV GOt) ; ‖QK_j‖² = tr(GQ GK) ; ‖OV_j‖² likewise */
    double ov_i = 0.0, second = 0.0;
    for (size_t a = 0; a < dh * dh; a++)
        ov_i += f->GV[gi + a] * f->GOt[gi + a];
    const double *Bright, *GC;
    if (kind == INDUCT_COMPOSITION_V) {
        for (size_t a = 0; a < dh * dh; a++)
            second += f->GV[gj + a] * f->GOt[gj + a];
        Bright = f->WV + j * D * dh; /* OV_i OV_j = W_V,i (W_O,i W_V,j) W_O,j ; C = W_O,jᵀ */
        GC = f->GOt + gj;
    } else {
        for (size_t a = 0; a < dh * dh; a++)
            second += f->GQ[gj + a] * f->GK[gj + a];
        /* Q: W_V,i (W_O,i W_Q,j) W_K,jᵀ ; K: W_V,i (W_O,i W_K,j) W_Q,jᵀ */
        Bright = kind == INDUCT_COMPOSITION_Q ? f->WQ + j * D * dh : f->WK + j * D * dh;
        GC = kind == INDUCT_COMPOSITION_Q ? f->GK + gj : f->GQ + gj;
    }
    if (ov_i <= 0.0 || second <= 0.0) return 0.0;
    induct__dgemm_serial(0, 0, dh, dh, D, 1.0, f->WO + i * dh * D, D, Bright, dh, 0.0, Bm, dh);
    double num = frob2_abct(f->GV + gi, Bm, GC, dh, tmp);
    return sqrt(num) / (sqrt(ov_i) * sqrt(second));
}

INDUCT_API int induct_analysis_composition(const induct_model *m, uint32_t kind, float *out,
                                           size_t out_cap, size_t *out_len) {
    const char *fn = "induct_analysis_composition";
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    INDUCT_FAIL_IF(kind > INDUCT_COMPOSITION_V, INDUCT_EINVAL,
                   "%s: kind %u is not an INDUCT_COMPOSITION_* value", fn, kind);
    const induct_model_config *c = &m->cfg;
    size_t n = (size_t)c->n_layers * c->n_heads, D = c->d_model, dh = c->d_head, H = c->n_heads;
    INDUCT_TRY(
        induct__an_out(fn, "[n_layers][n_heads][n_layers][n_heads]", n * n, out, out_cap, out_len));
    heads_f f;
    INDUCT_TRY(heads_alloc(m, &f, n, D, dh));
    double *tmp = malloc(3 * dh * dh * sizeof *tmp);
    if (!tmp) {
        heads_free(&f);
        return induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    }
    for (size_t l = 0; l < c->n_layers; l++)
        for (size_t h = 0; h < H; h++) {
            size_t i = l * H + h;
            to_double(f.WQ + i * D * dh, m->params + m->L[l].W_Q + h * D * dh, D * dh);
            to_double(f.WK + i * D * dh, m->params + m->L[l].W_K + h * D * dh, D * dh);
            to_double(f.WV + i * D * dh, m->params + m->L[l].W_V + h * D * dh, D * dh);
            to_double(f.WO + i * dh * D, m->params + m->L[l].W_O + h * dh * D, dh * D);
        }
    heads_grams(&f);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            size_t l1 = i / H, l2 = j / H;
            out[i * n + j] = l1 < l2 ? (float)comp_score(&f, i, j, kind, tmp) : 0.0f;
        }
    free(tmp);
    heads_free(&f);
    return INDUCT_OK;
}

INDUCT_API int induct_analysis_composition_baseline(const induct_model *m, uint32_t n_samples,
                                                    uint64_t seed, double *baseline_out) {
    const char *fn = "induct_analysis_composition_baseline";
    INDUCT_FAIL_IF(!m || !baseline_out, INDUCT_EINVAL, "%s: NULL argument", fn);
    INDUCT_FAIL_IF(n_samples == 0 || n_samples > 100000, INDUCT_EINVAL,
                   "%s: n_samples must be in [1, 100000] (got %u)", fn, n_samples);
    size_t D = m->cfg.d_model, dh = m->cfg.d_head;
    heads_f f;
    INDUCT_TRY(heads_alloc(m, &f, 2, D, dh));
    double *tmp = malloc(3 * dh * dh * sizeof *tmp);
    if (!tmp) {
        heads_free(&f);
        return induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    }
    induct__rng r;
    induct__rng_seed3(&r, seed, 0x434f4d50ULL /* "COMP" */, ((uint64_t)D << 32) | dh);
    double acc = 0.0;
    for (uint32_t s = 0; s < n_samples; s++) {
        /* head 0 gives W_V, W_O; head 1 gives W_Q, W_K (Q-composition; K and V have the
         * same distribution for independent Gaussian factors) */
        for (size_t i = 0; i < D * dh; i++)
            f.WV[i] = induct__rng_normal(&r);
        for (size_t i = 0; i < dh * D; i++)
            f.WO[i] = induct__rng_normal(&r);
        for (size_t i = 0; i < D * dh; i++)
            f.WQ[D * dh + i] = induct__rng_normal(&r);
        for (size_t i = 0; i < D * dh; i++)
            f.WK[D * dh + i] = induct__rng_normal(&r);
        memset(f.WQ, 0, D * dh * sizeof(double));
        memset(f.WK, 0, D * dh * sizeof(double));
        memset(f.WV + D * dh, 0, D * dh * sizeof(double));
        memset(f.WO + dh * D, 0, dh * D * sizeof(double));
        heads_grams(&f);
        acc += comp_score(&f, 0, 1, INDUCT_COMPOSITION_Q, tmp);
    }
    free(tmp);
    heads_free(&f);
    *baseline_out = acc / n_samples;
    return INDUCT_OK;
}
