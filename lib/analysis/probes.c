/* analysis: the head activation evaluators on synthetic probes (ICL
 * paper, Appendix): prefix matching, duplicate token, empirical copying; and the
 * head classification. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "kernels/kernels.h"


INDUCT_API int induct_probe_config_init(induct_probe_config *cfg, size_t size) {
    INDUCT__CONFIG_INIT_CHECK(cfg, size, sizeof(induct_probe_config));
    memset(cfg, 0, size);
    cfg->size = size;
    cfg->n_seq = 10;
    cfg->block_len = 25;
    cfg->n_repeats = 4;
    cfg->bos = 0;
    cfg->token_lo = 1;
    cfg->token_hi = 0;
    cfg->copying_bos = 0;
    cfg->seed = 0;
    return INDUCT_OK;
}

INDUCT_API int induct_probe_config_for_dataset(induct_probe_config *cfg, size_t size,
                                               const induct_dataset *d) {
    INDUCT_FAIL_IF(!d, INDUCT_EINVAL, "induct_probe_config_for_dataset: dataset is NULL");
    induct_probe_config c;
    INDUCT_TRY(induct_probe_config_init(&c, sizeof c));
    INDUCT_TRY(induct_dataset_bos(d, &c.bos));
    if (d->kind == INDUCT__DS_RRT) { /* its ordinary tokens; the BOS lies outside them */
        c.token_lo = d->rrt.token_lo;
        c.token_hi = d->rrt.token_hi;
    } else { /* [0, d_vocab) without the BOS, which is then its first or last id */
        c.token_lo = c.bos == 0 ? 1u : 0u;
        c.token_hi = c.bos >= 0 && (uint32_t)c.bos + 1 == d->d_vocab ? (uint32_t)c.bos
                                                                      : d->d_vocab;
    }
    INDUCT_TRY(induct_probe_config_init(cfg, size)); /* checks cfg and size */
    memcpy((char *)cfg + sizeof(size_t), (const char *)&c + sizeof(size_t),
           sizeof c - sizeof(size_t));
    return INDUCT_OK;
}

typedef struct probe {
    int32_t *tok;                 /* [n_seq][T] */
    uint32_t n_seq, T, P, R, off; /* off: 1 with BOS, else 0; R: repeats (1 for copying) */
} probe;

static int probe_config(induct_probe_config *c, const induct_model *m,
                        const induct_probe_config *cfg, uint32_t copying, const char *fn) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    INDUCT_FAIL_IF(copying > 1, INDUCT_EINVAL, "%s: copying must be 0 or 1", fn);
    induct_probe_config_init(c, sizeof *c);
    if (cfg) INDUCT_TRY(induct__struct_in(c, sizeof *c, sizeof *c, cfg, "induct_probe_config"));
    uint32_t V = m->cfg.d_vocab;
    if (c->token_hi == 0) c->token_hi = V;
    INDUCT_FAIL_IF(c->n_seq == 0 || c->block_len == 0, INDUCT_EINVAL,
                   "%s: n_seq and block_len must be >= 1", fn);
    INDUCT_FAIL_IF(c->n_repeats < 2, INDUCT_EINVAL, "%s: n_repeats must be >= 2 (got %u)", fn,
                   c->n_repeats);
    INDUCT_FAIL_IF(c->token_lo >= c->token_hi || c->token_hi > V, INDUCT_EINVAL,
                   "%s: token range [%u, %u) is empty or outside [0, d_vocab = %u)", fn,
                   c->token_lo, c->token_hi, V);
    INDUCT_FAIL_IF(c->token_hi - c->token_lo < c->block_len, INDUCT_EINVAL,
                   "%s: %u distinct tokens need a range that large; [%u, %u) has %u", fn,
                   c->block_len, c->token_lo, c->token_hi, c->token_hi - c->token_lo);
    INDUCT_FAIL_IF(c->bos < -1, INDUCT_EINVAL, "%s: bos must be -1 or a token id", fn);
    INDUCT_FAIL_IF(c->bos >= 0 && ((uint32_t)c->bos >= V || ((uint32_t)c->bos >= c->token_lo &&
                                                             (uint32_t)c->bos < c->token_hi)),
                   INDUCT_EINVAL, "%s: bos %d must be < d_vocab and outside [%u, %u)", fn, c->bos,
                   c->token_lo, c->token_hi);
    INDUCT_FAIL_IF(c->copying_bos > 1, INDUCT_EINVAL, "%s: copying_bos must be 0 or 1", fn);
    INDUCT_FAIL_IF(c->reserved0 != 0, INDUCT_EINVAL, "%s: reserved0 must be 0", fn);
    uint64_t off = c->bos >= 0 && (!copying || c->copying_bos) ? 1 : 0;
    uint64_t T = off + (uint64_t)c->block_len * (copying ? 1 : c->n_repeats);
    INDUCT_FAIL_IF(T > m->cfg.n_ctx, INDUCT_ERANGE,
                   "%s: probe sequences of %llu tokens exceed n_ctx %u", fn, (unsigned long long)T,
                   m->cfg.n_ctx);
    INDUCT_FAIL_IF(T < 2, INDUCT_ERANGE, "%s: probe sequences of %llu token are too short", fn,
                   (unsigned long long)T);
    return INDUCT_OK;
}

static void probe_fill(const induct_probe_config *c, uint32_t copying, int32_t *out, uint32_t T) {
    uint32_t off = c->bos >= 0 && (!copying || c->copying_bos) ? 1 : 0, P = c->block_len;
    uint32_t reps = copying ? 1 : c->n_repeats;
    uint64_t range = (uint64_t)c->token_hi - c->token_lo;
    for (uint32_t b = 0; b < c->n_seq; b++) {
        int32_t *x = out + (size_t)b * T;
        induct__rng r;
        induct__rng_seed3(&r, c->seed, 0x50524f4245ULL /* "PROBE" */, b);
        if (off) x[0] = c->bos;
        for (uint32_t i = 0; i < P; i++) {
            int32_t v;
            int dup;
            do {
                v = (int32_t)(c->token_lo + induct__rng_below(&r, range));
                dup = 0;
                for (uint32_t j = 0; j < i; j++)
                    if (x[off + j] == v) {
                        dup = 1;
                        break;
                    }
            } while (dup);
            x[off + i] = v;
        }
        for (uint32_t k = 1; k < reps; k++)
            memcpy(x + off + k * P, x + off, P * sizeof *x);
    }
}

INDUCT_API int induct_analysis_probe_tokens(const induct_model *m, const induct_probe_config *cfg,
                                            uint32_t copying, int32_t *out, size_t out_cap,
                                            size_t *out_len) {
    const char *fn = "induct_analysis_probe_tokens";
    induct_probe_config c;
    INDUCT_TRY(probe_config(&c, m, cfg, copying, fn));
    uint32_t off = c.bos >= 0 && (!copying || c.copying_bos) ? 1 : 0;
    uint32_t T = off + c.block_len * (copying ? 1 : c.n_repeats);
    INDUCT_TRY(induct__an_out(fn, "[n_seq][T]", (size_t)c.n_seq * T, out, out_cap, out_len));
    probe_fill(&c, copying, out, T);
    return INDUCT_OK;
}

/* Build the probe and run it through the model (ablations in force apply). */
static int probe_run(induct_model *m, const induct_probe_config *cfg, uint32_t copying, probe *pr,
                     uint64_t extra_per_position, const char *fn) {
    memset(pr, 0, sizeof *pr);
    induct_probe_config c;
    INDUCT_TRY(probe_config(&c, m, cfg, copying, fn));
    pr->off = c.bos >= 0 && (!copying || c.copying_bos) ? 1 : 0;
    pr->P = c.block_len;
    pr->R = copying ? 1 : c.n_repeats;
    pr->T = pr->off + pr->P * pr->R;
    pr->n_seq = c.n_seq;
    size_t n;
    INDUCT_FAIL_IF(!induct__mul(c.n_seq, pr->T, &n), INDUCT_ELIMIT, "%s: size overflow", fn);
    /* resource limits: tokens, the caller's per-position scratch and the workspace
     * must fit the model's limits before anything is allocated */
    induct__bytes tmp = {0, 0};
    induct__bytes_add(&tmp, n, sizeof(int32_t) + extra_per_position);
    INDUCT_FAIL_IF(tmp.overflow, INDUCT_ELIMIT, "%s: size overflow", fn);
    INDUCT_TRY(induct__model_check_workspace(m, pr->n_seq, pr->T, tmp.n));
    pr->tok = malloc(n * sizeof *pr->tok);
    INDUCT_FAIL_IF(!pr->tok, INDUCT_ENOMEM, "%s: out of memory", fn);
    probe_fill(&c, copying, pr->tok, pr->T);
    induct__pass p = induct__pass_of(pr->tok, pr->n_seq, pr->T);
    int rc = induct__forward(m, &p, NULL);
    if (rc != INDUCT_OK) {
        free(pr->tok);
        pr->tok = NULL;
    }
    return rc;
}

size_t induct__repeat_attention(const float *A, size_t T, size_t off, size_t P, size_t R,
                                size_t i_from, size_t shift, double *s) {
    for (size_t r = 2; r <= R; r++)
        for (size_t i = i_from; i < P; i++) {
            size_t p = off + (r - 1) * P + i;
            for (size_t mm = 1; mm < r; mm++) *s += A[p * T + p - mm * P + shift];
        }
    return R >= 2 && P > i_from ? (R - 1) * (P - i_from) : 0;
}

/* Summed attention of every query in repeats 2..R on the targets p - mP + shift. */
static int repeat_score(induct_model *m, const induct_probe_config *cfg, uint32_t shift, float *out,
                        size_t out_cap, size_t *out_len, const char *fn) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    INDUCT_TRY(induct__an_heads_out(m, fn, out, out_cap, out_len));
    probe pr;
    INDUCT_TRY(probe_run(m, cfg, 0, &pr, 0, fn));
    size_t H = m->cfg.n_heads, T = pr.T, P = pr.P;
    size_t nq = (size_t)(pr.R - 1) * P;
    for (size_t l = 0; l < m->cfg.n_layers; l++)
        for (size_t h = 0; h < H; h++) {
            double tot = 0.0;
            for (size_t b = 0; b < pr.n_seq; b++) {
                const float *A = induct__ws(m, m->A[l].att) + (b * H + h) * T * T;
                double s = 0.0;
                induct__repeat_attention(A, T, pr.off, P, pr.R, 0, shift, &s);
                tot += s / (double)nq;
            }
            out[l * H + h] = (float)(tot / pr.n_seq);
        }
    free(pr.tok);
    return INDUCT_OK;
}

INDUCT_API int induct_analysis_prefix_matching(induct_model *m, const induct_probe_config *cfg,
                                               float *out, size_t out_cap, size_t *out_len) {
    return repeat_score(m, cfg, 1, out, out_cap, out_len, "induct_analysis_prefix_matching");
}

INDUCT_API int induct_analysis_duplicate_token(induct_model *m, const induct_probe_config *cfg,
                                               float *out, size_t out_cap, size_t *out_len) {
    return repeat_score(m, cfg, 0, out, out_cap, out_len, "induct_analysis_duplicate_token");
}

INDUCT_API int induct_analysis_copying(induct_model *m, const induct_probe_config *cfg, float *out,
                                       size_t out_cap, size_t *out_len) {
    const char *fn = "induct_analysis_copying";
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    INDUCT_TRY(induct__an_heads_out(m, fn, out, out_cap, out_len));
    probe pr;
    INDUCT_TRY(probe_run(m, cfg, 1, &pr,
                         (uint64_t)m->cfg.d_model * (sizeof(double) + sizeof(float)), fn));
    const induct_model_config *c = &m->cfg;
    size_t H = c->n_heads, dh = c->d_head, HD = H * dh, D = c->d_model, V = c->d_vocab, T = pr.T;
    size_t N = (size_t)pr.n_seq * T;
    /* ubar[d] = mean_v W_U[d][v], so mean_v l_p[v] = c'_p . ubar; Ws[b][k] = column
     * t_k of W_U (the probe's tokens are distinct: one column per position) */
    double *ubar = calloc(D, sizeof *ubar), *Ws = malloc(N * D * sizeof *Ws),
           *cd = malloc(D * sizeof *cd), *lv = malloc(T * sizeof *lv);
    float *cbuf = malloc(N * D * sizeof *cbuf);
    if (!ubar || !Ws || !cd || !lv || !cbuf) {
        free(ubar);
        free(Ws);
        free(cd);
        free(lv);
        free(cbuf);
        free(pr.tok);
        return induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    }
    const float *WU = m->params + m->W_U;
    for (size_t d = 0; d < D; d++) {
        double s = 0.0;
        for (size_t v = 0; v < V; v++)
            s += WU[d * V + v];
        ubar[d] = s / (double)V;
    }
    for (size_t n = 0; n < N; n++)
        for (size_t d = 0; d < D; d++)
            Ws[n * D + d] = WU[d * V + (size_t)pr.tok[n]];
    const float *lw = c->layer_norm ? m->params + m->lnf_w : NULL;
    for (size_t l = 0; l < c->n_layers; l++) {
        const float *z = induct__ws(m, m->A[l].z), *att = induct__ws(m, m->A[l].att);
        for (size_t h = 0; h < H; h++) {
            /* c_p = z_{p,h} W_O[h], all rows at once */
            induct__gemm_serial(0, 0, N, D, dh, 1.0f, z + h * dh, HD,
                                m->params + m->L[l].W_O + h * dh * D, D, 0.0f, cbuf, D);
            double num = 0.0, den = 0.0;
            for (size_t b = 0; b < pr.n_seq; b++) {
                const float *A = att + (b * H + h) * T * T;
                for (size_t p = 0; p < T; p++) {
                    const float *cp = cbuf + (b * T + p) * D;
                    /* linear part of the final LayerNorm at the clean run's scale */
                    double mu = 0.0, rstd = 1.0;
                    if (lw) {
                        for (size_t d = 0; d < D; d++)
                            mu += cp[d];
                        mu /= (double)D;
                        rstd = induct__ws(m, m->a_lnf_rstd)[b * T + p];
                    }
                    double mean_l = 0.0;
                    for (size_t d = 0; d < D; d++) {
                        cd[d] = ((double)cp[d] - mu) * rstd * (lw ? lw[d] : 1.0);
                        mean_l += cd[d] * ubar[d];
                    }
                    for (size_t k = 0; k < T; k++) {
                        const double *w = Ws + (b * T + k) * D;
                        double s = 0.0;
                        for (size_t d = 0; d < D; d++)
                            s += cd[d] * w[d];
                        lv[k] = s - mean_l > 0.0 ? s - mean_l : 0.0; /* l'_p[t_k] */
                    }
                    for (size_t k = 0; k < T; k++) {
                        den += lv[k];
                        if (k <= p) num += (double)A[p * T + k] * lv[k];
                    }
                }
            }
            out[l * H + h] = den > 0.0 ? (float)(2.0 * num / den - 1.0) : 0.0f;
        }
    }
    free(ubar);
    free(Ws);
    free(cd);
    free(lv);
    free(cbuf);
    free(pr.tok);
    return INDUCT_OK;
}

/* ---- classification -------------------------------------------------------------- */

INDUCT_API int induct_classify_config_init(induct_classify_config *cfg, size_t size) {
    INDUCT__CONFIG_INIT_CHECK(cfg, size, sizeof(induct_classify_config));
    memset(cfg, 0, size);
    cfg->size = size;
    cfg->previous_token = 0.4;
    cfg->induction = 0.4;
    cfg->duplicate = 0.4;
    cfg->copying = 0.0;
    return INDUCT_OK;
}

INDUCT_API int induct_analysis_classify_heads(const float *prev, const float *prefix,
                                              const float *dup, const float *copying, size_t n,
                                              const induct_classify_config *cfg,
                                              uint32_t *labels_out, size_t labels_cap,
                                              size_t *out_len) {
    const char *fn = "induct_analysis_classify_heads";
    INDUCT_FAIL_IF(!prev || !prefix || !dup, INDUCT_EINVAL, "%s: NULL score array", fn);
    induct_classify_config c;
    induct_classify_config_init(&c, sizeof c);
    if (cfg) INDUCT_TRY(induct__struct_in(&c, sizeof c, sizeof c, cfg, "induct_classify_config"));
    INDUCT_FAIL_IF(!(c.previous_token > 0 && c.previous_token <= 1 && c.induction > 0 &&
                     c.induction <= 1 && c.duplicate > 0 && c.duplicate <= 1 && c.copying >= -1 &&
                     c.copying <= 1),
                   INDUCT_EINVAL, "%s: thresholds must lie in (0, 1] (copying in [-1, 1])", fn);
    INDUCT_TRY(induct__an_out(fn, "[n]", n, labels_out, labels_cap, out_len));
    for (size_t i = 0; i < n; i++)
        INDUCT_FAIL_IF(!isfinite(prev[i]) || !isfinite(prefix[i]) || !isfinite(dup[i]) ||
                           (copying && !isfinite(copying[i])),
                       INDUCT_EINVAL, "%s: score %zu is not finite", fn, i);
    for (size_t i = 0; i < n; i++) {
        /* candidates in tie-break order: induction, previous-token, duplicate */
        const uint32_t label[3] = {INDUCT_HEAD_INDUCTION, INDUCT_HEAD_PREVIOUS_TOKEN,
                                   INDUCT_HEAD_DUPLICATE};
        double margin[3] = {(double)prefix[i] - c.induction, (double)prev[i] - c.previous_token,
                            (double)dup[i] - c.duplicate};
        int ok[3] = {margin[0] >= 0 && (!copying || (double)copying[i] >= c.copying),
                     margin[1] >= 0, margin[2] >= 0};
        uint32_t best = INDUCT_HEAD_OTHER;
        double bm = -1.0;
        for (int k = 0; k < 3; k++)
            if (ok[k] && margin[k] > bm) {
                bm = margin[k];
                best = label[k];
            }
        labels_out[i] = best;
    }
    return INDUCT_OK;
}
