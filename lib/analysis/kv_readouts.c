/* Key-value retrieval read-outs (the blog post's task): accuracy at the answer position
 * and the attention from the query to the value position, per head. Batch 0 of the eval
 * split, run through the model in the chunks of induct__forward_chunks (the bits of one
 * pass, a workspace that stays small). */
#include <stdlib.h>

#include "analysis.h"

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
    /* resource limits: the rows, their targets and a chunk's workspace must fit the
     * model's limits before anything is allocated */
    induct__bytes tmp = {0, 0};
    induct__bytes_add(&tmp, n, sizeof(int32_t));
    induct__bytes_add(&tmp, ni, sizeof(int32_t));
    INDUCT_FAIL_IF(tmp.overflow, INDUCT_ELIMIT, "%s: size overflow", fn);
    INDUCT_TRY(induct__model_check_workspace(m, induct__forward_chunk_rows(m, n_seq, T, 0), T,
                                             tmp.n));
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

/* One pass over the set in induct__forward_chunks' chunks; fn reads each chunk. */
typedef struct kv_pass {
    kv_eval e;
    const char *fn;
    uint32_t T;
    size_t correct; /* accuracy */
    double *acc;    /* attention: [n_layers][n_heads] sums */
} kv_pass;

static int kv_run(induct_model *m, const induct_dataset *d, uint32_t n_seq, uint32_t T,
                  kv_pass *kp, induct__chunk_fn fn) {
    INDUCT_TRY(kv_eval_make(m, d, n_seq, T, &kp->e, kp->fn));
    kp->T = T;
    atomic_store(&m->interrupt, 0);
    int rc = induct__model_validate_tokens(m, kp->e.tok, n_seq, T);
    if (rc == INDUCT_OK) rc = induct__forward_chunks(m, kp->e.tok, n_seq, T, fn, kp, NULL);
    kv_eval_free(&kp->e);
    return rc;
}

static int kv_interrupted(induct_model *m, const kv_pass *kp) {
    INDUCT_FAIL_IF(atomic_load(&m->interrupt), INDUCT_EINTERRUPTED, "%s: interrupted", kp->fn);
    return INDUCT_OK;
}

/* Is the argmax of the logits at the answer position the answer token? */
static int accuracy_chunk(void *user, induct_model *m, uint32_t s, uint32_t nb) {
    kv_pass *kp = user;
    uint32_t V = m->cfg.d_vocab, T = kp->T;
    const float *logits = induct__ws(m, m->a_logits);
    for (uint32_t b = 0; b < nb; b++) {
        const int32_t *info = kp->e.info + (size_t)(s + b) * INDUCT_KV_INFO_COLS;
        const float *l = logits + ((size_t)b * T + (size_t)info[INDUCT_KV_ANSWER_POS]) * V;
        uint32_t best = 0;
        for (uint32_t v = 1; v < V; v++)
            if (l[v] > l[best]) best = v;
        kp->correct += best == (uint32_t)info[INDUCT_KV_ANSWER_TOKEN];
    }
    return kv_interrupted(m, kp);
}

INDUCT_API int induct_analysis_kv_accuracy(induct_model *m, const induct_dataset *d,
                                           uint32_t n_seq, uint32_t T, double *acc_out) {
    INDUCT_FAIL_IF(!acc_out, INDUCT_EINVAL, "induct_analysis_kv_accuracy: accuracy_out is NULL");
    kv_pass kp = {.fn = "induct_analysis_kv_accuracy"};
    INDUCT_TRY(kv_run(m, d, n_seq, T, &kp, accuracy_chunk));
    *acc_out = (double)kp.correct / (double)n_seq;
    return INDUCT_OK;
}

/* Attention from the answer position to the value position, summed per head. */
static int attention_chunk(void *user, induct_model *m, uint32_t s, uint32_t nb) {
    kv_pass *kp = user;
    uint32_t H = m->cfg.n_heads, T = kp->T;
    for (uint32_t l = 0; l < m->cfg.n_layers; l++)
        for (uint32_t h = 0; h < H; h++)
            for (uint32_t b = 0; b < nb; b++) {
                const int32_t *info = kp->e.info + (size_t)(s + b) * INDUCT_KV_INFO_COLS;
                const float *A = induct__ws(m, m->A[l].att) + ((size_t)b * H + h) * T * T;
                kp->acc[(size_t)l * H + h] += A[(size_t)info[INDUCT_KV_ANSWER_POS] * T +
                                                (size_t)info[INDUCT_KV_VALUE_POS]];
            }
    return kv_interrupted(m, kp);
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
    kv_pass kp = {.fn = "induct_analysis_kv_attention"};
    kp.acc = calloc(need, sizeof *kp.acc);
    INDUCT_FAIL_IF(!kp.acc, INDUCT_ENOMEM, "induct_analysis_kv_attention: out of memory");
    int rc = kv_run(m, d, n_seq, T, &kp, attention_chunk);
    if (rc == INDUCT_OK)
        for (size_t i = 0; i < need; i++) out[i] = (float)(kp.acc[i] / (double)n_seq);
    free(kp.acc);
    return rc;
}
