/* Attention read-outs: seed 003's induction score and the ICL paper's
 * previous-token score, per head. */
#include <stdlib.h>

#include "induct_internal.h"

/* Run batch 0 of the eval split through the model; returns tokens and metadata
 * (caller frees *tok and *meta). */
static int eval_batch(induct_model *m, const induct_dataset *d, uint32_t n_seq, uint32_t T,
                      int32_t **tok, int32_t **meta) {
    *tok = NULL;
    *meta = NULL;
    INDUCT_FAIL_IF(n_seq == 0, INDUCT_EINVAL, "analysis: n_seq must be >= 1");
    INDUCT_FAIL_IF(d->d_vocab > m->cfg.d_vocab, INDUCT_EINVAL,
                   "analysis: dataset vocabulary %u exceeds the model's d_vocab %u", d->d_vocab,
                   m->cfg.d_vocab);
    INDUCT_FAIL_IF(T < 2, INDUCT_EINVAL, "analysis: seq_len must be >= 2 (got %u)", T);
    INDUCT_FAIL_IF(T > m->cfg.n_ctx, INDUCT_ERANGE, "analysis: seq_len %u exceeds the model's "
                   "n_ctx %u", T, m->cfg.n_ctx);
    size_t n, bytes;
    INDUCT_FAIL_IF(!induct__mul(n_seq, T, &n) || !induct__mul(n + n_seq, sizeof(int32_t), &bytes),
                   INDUCT_ELIMIT, "analysis: %u sequences of %u tokens overflow size_t", n_seq, T);
    /* the forward pass must fit before the tokens are generated */
    INDUCT_TRY(induct__model_check_workspace(m, n_seq, T, bytes));
    int32_t *t = malloc(n * sizeof *t), *mt = malloc((size_t)n_seq * sizeof *mt);
    if (!t || !mt) {
        free(t);
        free(mt);
        return induct__fail(INDUCT_ENOMEM, "analysis: out of memory");
    }
    induct__model_held(m, bytes, 0); /* the tokens count while the forward pass runs */
    int rc = induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, n_seq, T, t, n, mt, n_seq);
    if (rc == INDUCT_OK) rc = induct__model_validate_tokens(m, t, n_seq, T);
    if (rc == INDUCT_OK) rc = induct__forward(m, t, n_seq, T, NULL);
    /* induct_model_interrupt() from another thread during the pass (the flag was
     * cleared when the call started) */
    if (rc == INDUCT_OK && atomic_load(&m->interrupt))
        rc = induct__fail(INDUCT_EINTERRUPTED, "analysis: interrupted (induct_model_interrupt)");
    induct__model_held(m, 0, bytes);
    if (rc != INDUCT_OK) {
        free(t);
        free(mt);
        return rc;
    }
    *tok = t;
    *meta = mt;
    return INDUCT_OK;
}

static int check_out(const induct_model *m, float *out, size_t cap, size_t *len) {
    size_t need = (size_t)m->cfg.n_layers * m->cfg.n_heads;
    if (len) *len = need;
    INDUCT_FAIL_IF(!out || cap < need, INDUCT_EBUFSIZE,
                   "analysis: needs %zu floats ([n_layers][n_heads]), buffer holds %zu", need,
                   out ? cap : 0);
    return INDUCT_OK;
}

INDUCT_API int induct_analysis_induction_score(induct_model *m, const induct_dataset *d,
                                               uint32_t n_seq, uint32_t T, float *out,
                                               size_t out_cap, size_t *out_len) {
    INDUCT_FAIL_IF(!m || !d, INDUCT_EINVAL, "induct_analysis_induction_score: NULL argument");
    INDUCT_FAIL_IF(d->kind != INDUCT__DS_RRT || d->rrt.bos >= 0, INDUCT_EINVAL,
                   "induct_analysis_induction_score: needs a repeated-random-token dataset "
                   "without BOS");
    INDUCT_TRY(check_out(m, out, out_cap, out_len));
    atomic_store(&m->interrupt, 0);
    int32_t *tok, *meta;
    INDUCT_TRY(eval_batch(m, d, n_seq, T, &tok, &meta));
    uint32_t H = m->cfg.n_heads;
    for (uint32_t l = 0; l < m->cfg.n_layers; l++)
        for (uint32_t h = 0; h < H; h++) {
            double s = 0.0;
            size_t cnt = 0;
            for (uint32_t b = 0; b < n_seq; b++) {
                const float *A = induct__ws(m, m->A[l].att) + ((size_t)b * H + h) * T * T;
                uint32_t L = (uint32_t)meta[b];
                for (uint32_t t = L + 1; t < 2 * L; t++) {
                    s += A[(size_t)t * T + (t - L + 1)];
                    cnt++;
                }
            }
            out[l * H + h] = cnt ? (float)(s / (double)cnt) : 0.0f;
        }
    free(tok);
    free(meta);
    return INDUCT_OK;
}

INDUCT_API int induct_analysis_previous_token_score(induct_model *m, const induct_dataset *d,
                                                    uint32_t n_seq, uint32_t T, float *out,
                                                    size_t out_cap, size_t *out_len) {
    INDUCT_FAIL_IF(!m || !d, INDUCT_EINVAL, "induct_analysis_previous_token_score: NULL argument");
    INDUCT_TRY(check_out(m, out, out_cap, out_len));
    atomic_store(&m->interrupt, 0);
    int32_t *tok, *meta;
    INDUCT_TRY(eval_batch(m, d, n_seq, T, &tok, &meta));
    uint32_t H = m->cfg.n_heads;
    for (uint32_t l = 0; l < m->cfg.n_layers; l++)
        for (uint32_t h = 0; h < H; h++) {
            double s = 0.0;
            for (uint32_t b = 0; b < n_seq; b++) {
                const float *A = induct__ws(m, m->A[l].att) + ((size_t)b * H + h) * T * T;
                double r = 0.0;
                for (uint32_t i = 1; i < T; i++) r += A[(size_t)i * T + i - 1];
                s += r / (double)(T - 1);
            }
            out[l * H + h] = (float)(s / n_seq);
        }
    free(tok);
    free(meta);
    return INDUCT_OK;
}
