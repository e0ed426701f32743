/* Ablation attribution of the ICL score (ICL paper, Appendix "Analyses"). With no
 * ablation in force, one clean pass per chunk, then for each head (l0, h) the real
 * forward pass resumed after layer l0's attention from the clean residual stream plus
 * (z'_h − z_h) W_O[h], scoring only the two rows the ICL score reads. Otherwise (or as
 * the reference in tests) each head is added to the ablations in force (ablation.c)
 * and the whole evaluation set is run again. */
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "kernels/kernels.h"

/* ---- attribution: general path ---------------------------------------------------- */

/* Each head: add it to the ablations in force, one pass over the evaluation set. */
static int attribution_general(induct_model *m, const induct__eval *ev, uint32_t mode,
                               uint32_t preserve, float *out, double *icl_out) {
    double base;
    INDUCT_TRY(induct__eval_icl(m, ev, &base));
    induct__ablation *a;
    INDUCT_TRY(induct__ablation_state(m, &a));
    uint32_t p0 = a->preserve;
    for (size_t i = 0; i < (size_t)m->cfg.n_layers * m->cfg.n_heads; i++) {
        uint8_t old = a->mode[i];
        a->mode[i] = (uint8_t)mode;
        a->preserve = p0 | preserve;
        induct__ablation_recount(m, a);
        double v = 0.0;
        int rc = induct__eval_icl(m, ev, &v);
        a->mode[i] = old;
        a->preserve = p0;
        induct__ablation_recount(m, a);
        if (rc != INDUCT_OK) return rc;
        out[i] = (float)(v - base);
    }
    *icl_out = base;
    return INDUCT_OK;
}

/* ---- attribution: the clean pass reused ----------------------------------------------- */

typedef struct fast_ctx {
    const float *frozen; /* clean patterns of layers 1 .. L-1, [L-1][B][H][T][T], or NULL */
    size_t per;          /* floats per layer in frozen */
} fast_ctx;

/* hook_pattern of a layer after the ablated one: the clean patterns (preserve). */
static int frozen_pattern(void *user, induct_model *m, const induct__pass *p, uint32_t point,
                          uint32_t l, float *att) {
    const fast_ctx *fx = user;
    (void)m, (void)point;
    memcpy(att, fx->frozen + (size_t)(l - 1) * fx->per,
           (size_t)p->B * m->cfg.n_heads * p->T * p->T * sizeof *att);
    return INDUCT_OK;
}

static int attribution_fast(induct_model *m, const induct__eval *ev, uint32_t mode,
                            uint32_t preserve, float *out, double *icl_out) {
    const char *fn = "induct_analysis_ablation_attribution";
    const induct_model_config *c = &m->cfg;
    const induct__ablation *a = induct__ablation_of(m);
    size_t L = c->n_layers, H = c->n_heads, D = c->d_model, dh = c->d_head, HD = H * dh;
    size_t T = ev->T, T1 = T - 1, Bm = ev->chunk, N = Bm * T, R = 2 * Bm;
    size_t per = Bm * H * T * T, nfr = preserve ? (L - 1) * per : 0;
    induct__bytes tmp = {0, 0};
    induct__bytes_add(&tmp, N * D + N * dh + nfr + R * D, sizeof(float));
    induct__bytes_add(&tmp, 2 * R + L * H, sizeof(double));
    induct__bytes_add(&tmp, R, sizeof(size_t));
    INDUCT_FAIL_IF(tmp.overflow, INDUCT_ELIMIT, "%s: size overflow", fn);
    INDUCT_TRY(induct__model_check_workspace(m, (uint32_t)Bm, (uint32_t)T, tmp.n));
    float *clean = malloc(N * D * sizeof *clean), *zd = malloc(N * dh * sizeof *zd);
    float *cr = malloc(R * D * sizeof *cr); /* the last layer's rows of the stream */
    float *frozen = nfr ? malloc(nfr * sizeof *frozen) : NULL;
    double *base = malloc(R * sizeof *base), *abl = malloc(R * sizeof *abl);
    double *dsum = calloc(L * H, sizeof *dsum);
    size_t *rows = malloc(R * sizeof *rows);
    induct__hook *hk = malloc(L * sizeof *hk);
    int rc = clean && zd && cr && (frozen || !nfr) && base && abl && dsum && rows && hk
                 ? INDUCT_OK
                 : induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    fast_ctx fx = {frozen, 0};
    double se = 0.0, st = 0.0;
    for (uint32_t s0 = 0; rc == INDUCT_OK && s0 < ev->n_seq; s0 += ev->chunk) {
        uint32_t B = ev->n_seq - s0 < ev->chunk ? ev->n_seq - s0 : ev->chunk;
        size_t Nb = (size_t)B * T;
        for (uint32_t b = 0; b < B; b++) {
            rows[2 * b] = (size_t)b * T + ev->e;
            rows[2 * b + 1] = (size_t)b * T + ev->t;
        }
        rc = induct__an_interrupted(m, fn);
        if (rc != INDUCT_OK) break;
        if (preserve) { /* the whole clean pass: the later layers' patterns are kept */
            rc = induct__eval_chunk(m, ev, s0, B);
            const float *Ls = induct__ws(m, m->a_losses);
            for (uint32_t b = 0; rc == INDUCT_OK && b < B; b++) {
                base[2 * b] = Ls[(size_t)b * T1 + ev->e];
                base[2 * b + 1] = Ls[(size_t)b * T1 + ev->t];
            }
        } else { /* the clean pass at the scored rows: every earlier layer whole, the last
                  * layer and the unembedding at the rows (the same bits there) */
            induct__pass p = induct__pass_of(ev->tok + (size_t)s0 * T, B, (uint32_t)T);
            p.rows = rows;
            p.n_rows = 2 * (size_t)B;
            p.row_loss = base;
            rc = induct__forward(m, &p, NULL);
        }
        if (rc != INDUCT_OK) break;
        for (uint32_t b = 0; b < B; b++) {
            se += base[2 * b];
            st += base[2 * b + 1];
        }
        fx.per = (size_t)B * H * T * T;
        for (size_t l = 1; preserve && l < L; l++)
            memcpy(frozen + (l - 1) * fx.per, induct__ws(m, m->A[l].att),
                   fx.per * sizeof *frozen);
        /* from the last layer down: a resumed pass writes only layers after l0 */
        for (size_t l0 = L; rc == INDUCT_OK && l0-- > 0;) {
            const induct__layer_act *act = &m->A[l0];
            float *resid = c->d_mlp ? induct__ws(m, act->resid_mid)
                           : l0 + 1 < L ? induct__ws(m, m->A[l0 + 1].resid_pre)
                                        : induct__ws(m, m->a_resid_final);
            memcpy(clean, resid, Nb * D * sizeof *clean);
            size_t nh = 0;
            for (size_t l = l0 + 1; preserve && l < L; l++)
                hk[nh++] = (induct__hook){INDUCT__HP_PATTERN, (uint32_t)l, 1, frozen_pattern,
                                          &fx, NULL};
            induct__pass p = induct__pass_of(ev->tok + (size_t)s0 * T, B, (uint32_t)T);
            p.bare = 1;
            p.resume = (uint32_t)l0 + 1;
            p.rows = rows;
            p.n_rows = 2 * (size_t)B;
            p.hooks[0] = hk;
            p.n_hooks[0] = nh;
            /* the baseline through the same code: a head without effect scores 0 */
            p.row_loss = base;
            rc = induct__forward(m, &p, NULL);
            p.row_loss = abl;
            const float *z = induct__ws(m, act->z), *W_O = m->params + m->L[l0].W_O;
            /* the last layer's change matters (and its z was computed) only at the rows */
            int last = l0 + 1 == L;
            size_t nd = last ? 2 * (size_t)B : Nb;
            for (size_t h = 0; rc == INDUCT_OK && h < H; h++) {
                for (size_t i = 0; i < nd; i++) {
                    size_t n = last ? rows[i] : i;
                    const float *zp = z + n * HD + h * dh;
                    const float *mp = mode == INDUCT__ABL_MEAN
                                          ? induct__ablation_mean_of(m, a, l0, h, n % T)
                                          : NULL;
                    for (size_t j = 0; j < dh; j++) zd[i * dh + j] = (mp ? mp[j] : 0.0f) - zp[j];
                }
                if (last) {
                    for (size_t i = 0; i < nd; i++)
                        memcpy(cr + i * D, clean + rows[i] * D, D * sizeof *cr);
                    induct__gemm_serial(0, 0, nd, D, dh, 1.0f, zd, dh, W_O + h * dh * D, D, 1.0f,
                                        cr, D);
                    for (size_t i = 0; i < nd; i++)
                        memcpy(resid + rows[i] * D, cr + i * D, D * sizeof *cr);
                } else {
                    memcpy(resid, clean, Nb * D * sizeof *clean);
                    induct__gemm_serial(0, 0, Nb, D, dh, 1.0f, zd, dh, W_O + h * dh * D, D, 1.0f,
                                        resid, D);
                }
                rc = induct__forward(m, &p, NULL);
                double acc = 0.0;
                for (uint32_t b = 0; b < B; b++)
                    acc += (abl[2 * b + 1] - abl[2 * b]) - (base[2 * b + 1] - base[2 * b]);
                dsum[l0 * H + h] += acc;
            }
            if (rc == INDUCT_OK) rc = induct__an_interrupted(m, fn);
        }
    }
    if (rc == INDUCT_OK) {
        for (size_t i = 0; i < L * H; i++) out[i] = (float)(dsum[i] / ev->n_seq);
        *icl_out = induct__icl(st, se, ev->n_seq);
    }
    free(clean), free(zd), free(cr), free(frozen), free(base), free(abl), free(dsum), free(rows);
    free(hk);
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
    const induct__ablation *a = induct__ablation_of(m);
    INDUCT_FAIL_IF(base_mode == INDUCT_ABLATE_MEAN && (!a || !a->mean), INDUCT_ESTATE,
                   "%s: mean ablation needs a reference: call induct_model_set_ablation_mean first",
                   fn);
    INDUCT_TRY(induct__an_heads_out(m, fn, out, out_cap, out_len));
    induct__eval ev;
    INDUCT_TRY(induct__eval_open(&ev, m, d, cfg, 1, fn));
    int rc = INDUCT_OK;
    if (base_mode == INDUCT_ABLATE_MEAN && a->mean_per_pos && ev.T > a->mean_T)
        rc = induct__fail(INDUCT_ERANGE,
                          "%s: the per-position mean reference covers %u positions, the "
                          "evaluation set has %u",
                          fn, a->mean_T, ev.T);
    double icl = 0.0;
    if (rc == INDUCT_OK) {
        uint32_t preserve = (flags & INDUCT_ABLATE_PRESERVE_PATTERNS) ? 1u : 0u;
        if (!a || !a->active)
            rc = attribution_fast(m, &ev, base_mode, preserve, out, &icl);
        else
            rc = attribution_general(m, &ev, base_mode, preserve, out, &icl);
    }
    induct__eval_close(&ev);
    if (rc == INDUCT_OK && icl_out) *icl_out = icl;
    return rc;
}
