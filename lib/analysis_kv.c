/* Key-value retrieval read-outs (seed 002): accuracy at the answer position and the
 * attention from the query to the value position, per head. Batch 0 of the eval
 * split, run through the model in chunks so the workspace stays small. */
#include <stdlib.h>

#include "induct_internal.h"

/* Rows per forward: at most ~8192 tokens, at least one row. */
static uint32_t chunk_rows(uint32_t n_seq, uint32_t T) {
    uint32_t c = 8192u / T;
    if (c < 1) c = 1;
    return c < n_seq ? c : n_seq;
}

typedef struct kv_eval {
    int32_t *tok;  /* [n_seq][T] */
    int32_t *info; /* [n_seq][INDUCT_KV_INFO_COLS] */
} kv_eval;

static void kv_eval_free(kv_eval *e) {
    free(e->tok);
    free(e->info);
}

static int kv_eval_make(induct_model *m, const induct_dataset *d, uint32_t n_seq, uint32_t T,
                        kv_eval *e, const char *fn) {
    e->tok = NULL;
    e->info = NULL;
    INDUCT_FAIL_IF(!m || !d, INDUCT_EINVAL, "%s: NULL argument", fn);
    INDUCT_FAIL_IF(d->kind != INDUCT__DS_KV, INDUCT_EINVAL,
                   "%s: needs a key-value retrieval dataset", fn);
    INDUCT_FAIL_IF(n_seq == 0, INDUCT_EINVAL, "%s: n_seq must be >= 1", fn);
    INDUCT_FAIL_IF(d->d_vocab > m->cfg.d_vocab, INDUCT_EINVAL,
                   "%s: dataset vocabulary %u exceeds the model's d_vocab %u", fn, d->d_vocab,
                   m->cfg.d_vocab);
    INDUCT_FAIL_IF(T < 4 || T > m->cfg.n_ctx, INDUCT_ERANGE,
                   "%s: seq_len %u must be in [4, n_ctx = %u]", fn, T, m->cfg.n_ctx);
    size_t n, ni;
    INDUCT_FAIL_IF(!induct__mul(n_seq, T, &n) || !induct__mul(n_seq, INDUCT_KV_INFO_COLS, &ni) ||
                       n > SIZE_MAX / sizeof(int32_t),
                   INDUCT_ELIMIT, "%s: size overflow", fn);
    /* hardening (issue 7): the rows, their targets and a chunk's workspace must fit the
     * model's limits before anything is allocated */
    induct__bytes tmp = {0, 0};
    induct__bytes_add(&tmp, n, sizeof(int32_t));
    induct__bytes_add(&tmp, ni, sizeof(int32_t));
    INDUCT_FAIL_IF(tmp.overflow, INDUCT_ELIMIT, "%s: size overflow", fn);
    INDUCT_TRY(induct__model_check_workspace(m, chunk_rows(n_seq, T), T, tmp.n));
    e->tok = malloc(n * sizeof *e->tok);
    e->info = malloc(ni * sizeof *e->info);
    if (!e->tok || !e->info) {
        kv_eval_free(e);
        return induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    }
    int rc = induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, n_seq, T, e->tok, n, NULL, 0);
    if (rc == INDUCT_OK)
        rc = induct_dataset_kv_info(d, INDUCT_SPLIT_EVAL, 0, n_seq, T, e->info, ni, NULL);
    if (rc != INDUCT_OK) kv_eval_free(e);
    return rc;
}

INDUCT_API int induct_analysis_kv_accuracy(induct_model *m, const induct_dataset *d,
                                           uint32_t n_seq, uint32_t T, double *acc_out) {
    INDUCT_FAIL_IF(!acc_out, INDUCT_EINVAL, "induct_analysis_kv_accuracy: accuracy_out is NULL");
    kv_eval e;
    INDUCT_TRY(kv_eval_make(m, d, n_seq, T, &e, "induct_analysis_kv_accuracy"));
    atomic_store(&m->interrupt, 0);
    uint32_t V = m->cfg.d_vocab, ch = chunk_rows(n_seq, T);
    size_t correct = 0;
    int rc = INDUCT_OK;
    for (uint32_t s = 0; s < n_seq && rc == INDUCT_OK; s += ch) {
        uint32_t nb = n_seq - s < ch ? n_seq - s : ch;
        const int32_t *tok = e.tok + (size_t)s * T;
        rc = induct__model_validate_tokens(m, tok, nb, T);
        induct__pass p = induct__pass_of(tok, nb, T);
        if (rc == INDUCT_OK) rc = induct__forward(m, &p, NULL);
        if (rc != INDUCT_OK) break;
        const float *logits = induct__ws(m, m->a_logits);
        for (uint32_t b = 0; b < nb; b++) {
            const int32_t *info = e.info + (size_t)(s + b) * INDUCT_KV_INFO_COLS;
            const float *l = logits + ((size_t)b * T + (size_t)info[INDUCT_KV_ANSWER_POS]) * V;
            uint32_t best = 0;
            for (uint32_t v = 1; v < V; v++)
                if (l[v] > l[best]) best = v;
            correct += best == (uint32_t)info[INDUCT_KV_ANSWER_TOKEN];
        }
        if (atomic_load(&m->interrupt))
            rc = induct__fail(INDUCT_EINTERRUPTED, "induct_analysis_kv_accuracy: interrupted");
    }
    if (rc == INDUCT_OK) *acc_out = (double)correct / (double)n_seq;
    kv_eval_free(&e);
    return rc;
}

INDUCT_API int induct_analysis_kv_attention(induct_model *m, const induct_dataset *d,
                                            uint32_t n_seq, uint32_t T, float *out,
                                            size_t out_cap, size_t *out_len) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_analysis_kv_attention: model is NULL");
    size_t need = (size_t)m->cfg.n_layers * m->cfg.n_heads;
    if (out_len) *out_len = need;
    INDUCT_FAIL_IF(!out || out_cap < need, INDUCT_EBUFSIZE,
                   "induct_analysis_kv_attention: needs %zu floats ([n_layers][n_heads]), buffer "
                   "holds %zu",
                   need, out ? out_cap : 0);
    kv_eval e;
    INDUCT_TRY(kv_eval_make(m, d, n_seq, T, &e, "induct_analysis_kv_attention"));
    atomic_store(&m->interrupt, 0);
    uint32_t H = m->cfg.n_heads, ch = chunk_rows(n_seq, T);
    double *acc = calloc(need, sizeof *acc);
    int rc = acc ? INDUCT_OK
                 : induct__fail(INDUCT_ENOMEM, "induct_analysis_kv_attention: out of memory");
    for (uint32_t s = 0; s < n_seq && rc == INDUCT_OK; s += ch) {
        uint32_t nb = n_seq - s < ch ? n_seq - s : ch;
        const int32_t *tok = e.tok + (size_t)s * T;
        rc = induct__model_validate_tokens(m, tok, nb, T);
        induct__pass p = induct__pass_of(tok, nb, T);
        if (rc == INDUCT_OK) rc = induct__forward(m, &p, NULL);
        if (rc != INDUCT_OK) break;
        for (uint32_t l = 0; l < m->cfg.n_layers; l++)
            for (uint32_t h = 0; h < H; h++)
                for (uint32_t b = 0; b < nb; b++) {
                    const int32_t *info = e.info + (size_t)(s + b) * INDUCT_KV_INFO_COLS;
                    const float *A = induct__ws(m, m->A[l].att) + ((size_t)b * H + h) * T * T;
                    acc[(size_t)l * H + h] += A[(size_t)info[INDUCT_KV_ANSWER_POS] * T +
                                                (size_t)info[INDUCT_KV_VALUE_POS]];
                }
        if (atomic_load(&m->interrupt))
            rc = induct__fail(INDUCT_EINTERRUPTED, "induct_analysis_kv_attention: interrupted");
    }
    if (rc == INDUCT_OK)
        for (size_t i = 0; i < need; i++) out[i] = (float)(acc[i] / (double)n_seq);
    free(acc);
    kv_eval_free(&e);
    return rc;
}
