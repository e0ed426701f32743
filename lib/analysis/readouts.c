/* Attention read-outs on a dataset: the induction score (the prefix-matching score of
 * probes.c read on repeated random tokens) and the ICL paper's previous-token
 * score, per head. */
#include <stdlib.h>

#include "analysis.h"

/* Batch 0 of the eval split: tokens and metadata (caller frees *tok and *meta). */
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
    int rc = induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, n_seq, T, t, n, mt, n_seq);
    if (rc == INDUCT_OK) rc = induct__model_validate_tokens(m, t, n_seq, T);
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

/* Per-head sums over the sequences, filled chunk by chunk (induct__forward_chunks keeps
 * the activations in cache); the order of the additions is that of one pass. */
typedef struct head_sums {
    const int32_t *meta;
    uint32_t T;
    double *s;   /* [n_layers][n_heads] */
    size_t *cnt; /* [n_layers][n_heads] or NULL */
} head_sums;

static int induction_chunk(void *user, induct_model *m, uint32_t b0, uint32_t nb) {
    head_sums *hs = user;
    uint32_t H = m->cfg.n_heads, T = hs->T;
    for (uint32_t l = 0; l < m->cfg.n_layers; l++)
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t b = 0; b < nb; b++) {
                const float *A = induct__ws(m, m->A[l].att) + ((size_t)b * H + h) * T * T;
                /* the second copy from its second token on: queries L+1 … 2L−1 */
                size_t L = (size_t)hs->meta[b0 + b];
                hs->cnt[l * H + h] +=
                    induct__repeat_attention(A, T, 0, L, 2, 1, 1, &hs->s[l * H + h]);
            }
    return INDUCT_OK;
}

void induct__previous_token_sums(induct_model *m, uint32_t T, uint32_t nb, double *s) {
    uint32_t H = m->cfg.n_heads;
    for (uint32_t l = 0; l < m->cfg.n_layers; l++)
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t b = 0; b < nb; b++) {
                const float *A = induct__ws(m, m->A[l].att) + ((size_t)b * H + h) * T * T;
                double r = 0.0;
                for (uint32_t i = 1; i < T; i++) r += A[(size_t)i * T + i - 1];
                s[l * H + h] += r / (double)(T - 1);
            }
}

static int previous_chunk(void *user, induct_model *m, uint32_t b0, uint32_t nb) {
    head_sums *hs = user;
    (void)b0;
    induct__previous_token_sums(m, hs->T, nb, hs->s);
    return INDUCT_OK;
}

/* Run fn over the eval batch; s and cnt are allocated here ([n_layers][n_heads]). */
static int head_pass(induct_model *m, const induct_dataset *d, uint32_t n_seq, uint32_t T,
                     induct__chunk_fn fn, head_sums *hs) {
    int32_t *tok, *meta;
    INDUCT_TRY(eval_batch(m, d, n_seq, T, &tok, &meta));
    size_t nh = (size_t)m->cfg.n_layers * m->cfg.n_heads;
    hs->meta = meta;
    hs->T = T;
    hs->s = calloc(nh, sizeof *hs->s);
    hs->cnt = calloc(nh, sizeof *hs->cnt);
    int rc = (!hs->s || !hs->cnt) ? induct__fail(INDUCT_ENOMEM, "analysis: out of memory")
                                  : induct__forward_chunks(m, tok, n_seq, T, fn, hs, NULL);
    /* induct_model_interrupt() from another thread during the pass (the flag was
     * cleared when the call started) */
    if (rc == INDUCT_OK && atomic_load(&m->interrupt))
        rc = induct__fail(INDUCT_EINTERRUPTED, "analysis: interrupted (induct_model_interrupt)");
    free(tok);
    free(meta);
    hs->meta = NULL;
    if (rc != INDUCT_OK) {
        free(hs->s);
        free(hs->cnt);
    }
    return rc;
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
    head_sums hs;
    INDUCT_TRY(head_pass(m, d, n_seq, T, induction_chunk, &hs));
    size_t nh = (size_t)m->cfg.n_layers * m->cfg.n_heads;
    for (size_t i = 0; i < nh; i++) out[i] = hs.cnt[i] ? (float)(hs.s[i] / (double)hs.cnt[i]) : 0.0f;
    free(hs.s);
    free(hs.cnt);
    return INDUCT_OK;
}

INDUCT_API int induct_analysis_previous_token_score(induct_model *m, const induct_dataset *d,
                                                    uint32_t n_seq, uint32_t T, float *out,
                                                    size_t out_cap, size_t *out_len) {
    INDUCT_FAIL_IF(!m || !d, INDUCT_EINVAL, "induct_analysis_previous_token_score: NULL argument");
    INDUCT_TRY(check_out(m, out, out_cap, out_len));
    atomic_store(&m->interrupt, 0);
    head_sums hs;
    INDUCT_TRY(head_pass(m, d, n_seq, T, previous_chunk, &hs));
    size_t nh = (size_t)m->cfg.n_layers * m->cfg.n_heads;
    for (size_t i = 0; i < nh; i++) out[i] = (float)(hs.s[i] / n_seq);
    free(hs.s);
    free(hs.cnt);
    return INDUCT_OK;
}
