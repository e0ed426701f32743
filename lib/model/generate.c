/* Generation: greedy or temperature sampling, one forward pass per new token over the
 * last n_ctx tokens (no key-value cache), through the public forward API. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define FN "induct_model_generate"
#define MAX_TEMPERATURE 1e6
/* Stream constant of the sampling RNG (token i's uniform comes from (seed, i, this)). */
#define GENERATE_STREAM 0x67656e6572617465ULL /* "generate" */

INDUCT_API int induct_generate_config_init(induct_generate_config *cfg, size_t size) {
    INDUCT__CONFIG_INIT_CHECK(cfg, size, sizeof(induct_generate_config));
    memset(cfg, 0, size);
    cfg->size = size;
    cfg->max_new_tokens = 16;
    cfg->temperature = 0.0;
    cfg->seed = 0;
    return INDUCT_OK;
}

/* The next token from one row of logits: arg max (lowest id on a tie) when greedy,
 * else the inverse CDF of softmax(logits / temperature) at u in [0, 1). */
static int32_t pick(const float *logits, uint32_t V, double temperature, double u) {
    uint32_t best = 0;
    for (uint32_t v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    if (temperature == 0.0) return (int32_t)best;
    double mx = logits[best], sum = 0.0;
    for (uint32_t v = 0; v < V; v++) sum += exp(((double)logits[v] - mx) / temperature);
    double target = u * sum, cum = 0.0;
    uint32_t last = best; /* the last id with non-zero mass: rounding never picks a zero */
    for (uint32_t v = 0; v < V; v++) {
        double p = exp(((double)logits[v] - mx) / temperature);
        if (p <= 0.0) continue;
        last = v;
        cum += p;
        if (cum > target) return (int32_t)v;
    }
    return (int32_t)last;
}

INDUCT_API int induct_model_generate(induct_model *m, const int32_t *prompt, uint32_t prompt_len,
                                     const induct_generate_config *cfg, int32_t *out,
                                     size_t out_cap, size_t *out_len) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, FN ": model is NULL");
    INDUCT_FAIL_IF(!prompt, INDUCT_EINVAL, FN ": prompt is NULL");
    induct_generate_config c;
    induct_generate_config_init(&c, sizeof c);
    INDUCT_TRY(induct__struct_in(&c, sizeof c, sizeof c, cfg, "induct_generate_config"));
    INDUCT_FAIL_IF(prompt_len == 0, INDUCT_EINVAL, FN ": prompt_len must be >= 1");
    INDUCT_FAIL_IF(c.max_new_tokens == 0, INDUCT_EINVAL, FN ": max_new_tokens must be >= 1");
    INDUCT_FAIL_IF(c.reserved0 != 0, INDUCT_EINVAL, FN ": reserved0 must be 0");
    INDUCT_FAIL_IF(!(c.temperature >= 0.0 && c.temperature <= MAX_TEMPERATURE), INDUCT_EINVAL,
                   FN ": temperature %g must be finite, in 0 to %g (0 = greedy)", c.temperature,
                   MAX_TEMPERATURE);
    const uint32_t V = m->cfg.d_vocab, n_ctx = m->cfg.n_ctx;
    for (uint32_t i = 0; i < prompt_len; i++)
        INDUCT_FAIL_IF(prompt[i] < 0 || (uint32_t)prompt[i] >= V, INDUCT_ERANGE,
                       FN ": prompt id %d at index %u is outside [0, %u)", prompt[i], i, V);
    INDUCT_FAIL_IF((uint64_t)prompt_len + c.max_new_tokens > (uint64_t)INT32_MAX, INDUCT_ELIMIT,
                   FN ": prompt of %u plus %u new tokens exceed %d", prompt_len,
                   c.max_new_tokens, INT32_MAX);
    size_t need = c.max_new_tokens;
    if (out_len) *out_len = need;
    INDUCT_FAIL_IF(!out || out_cap < need, INDUCT_EBUFSIZE,
                   FN ": needs %zu ids, buffer holds %zu", need, out ? out_cap : 0);

    /* seq: the last min(prompt_len, n_ctx) prompt tokens, then the new ones (staged, so
     * that `out` is untouched on failure); logits of one pass [T][V]. T >= 2 always (a
     * one-token context runs with its token twice). */
    uint32_t keep = prompt_len < n_ctx ? prompt_len : n_ctx;
    uint32_t T_max = n_ctx < 2 ? 2 : n_ctx;
    size_t n_seq = (size_t)keep + c.max_new_tokens + 1, n_logits;
    INDUCT_FAIL_IF(!induct__mul(T_max, V, &n_logits), INDUCT_ELIMIT, FN ": logits overflow");
    induct__bytes tmp = {0, 0};
    induct__bytes_add(&tmp, n_seq, sizeof(int32_t));
    induct__bytes_add(&tmp, n_logits, sizeof(float));
    INDUCT_FAIL_IF(tmp.overflow, INDUCT_ELIMIT, FN ": size overflow");
    INDUCT_TRY(induct__model_reserve(m, tmp.n, 0, FN));
    int32_t *seq = malloc(n_seq * sizeof *seq);
    float *logits = malloc(n_logits * sizeof *logits);
    if (!seq || !logits) {
        free(seq);
        free(logits);
        return induct__fail(INDUCT_ENOMEM, FN ": out of memory for %zu tokens and %zu logits",
                            n_seq, n_logits);
    }
    induct__model_held(m, tmp.n, 0);
    memcpy(seq, prompt + (prompt_len - keep), (size_t)keep * sizeof *seq);
    atomic_store(&m->interrupt, 0);

    int rc = INDUCT_OK;
    size_t len = keep; /* tokens in seq */
    for (uint32_t i = 0; i < c.max_new_tokens && rc == INDUCT_OK; i++) {
        if (atomic_load(&m->interrupt)) {
            rc = induct__fail(INDUCT_EINTERRUPTED, FN ": interrupted after %u tokens", i);
            break;
        }
        uint32_t T = len < n_ctx ? (uint32_t)len : n_ctx;
        int32_t *ctx = seq + (len - T);
        uint32_t last = T - 1, run = T;
        if (T == 1) { /* position 0's logits do not depend on position 1 (causal) */
            ctx[1] = ctx[0];
            run = 2;
        }
        rc = induct_model_forward(m, ctx, 1, run, logits, n_logits, NULL, 0, NULL);
        if (rc != INDUCT_OK) break;
        const float *row = logits + (size_t)last * V;
        for (uint32_t v = 0; v < V; v++)
            if (!isfinite(row[v])) {
                rc = induct__fail(INDUCT_ENUMERIC, FN ": logit %u of new token %u is not finite",
                                  v, i);
                break;
            }
        if (rc != INDUCT_OK) break;
        double u = 0.0;
        if (c.temperature > 0.0) {
            induct__rng r;
            induct__rng_seed3(&r, c.seed, i, GENERATE_STREAM);
            u = induct__rng_uniform(&r);
        }
        seq[len++] = pick(row, V, c.temperature, u);
    }
    if (rc == INDUCT_OK) memcpy(out, seq + keep, need * sizeof *out);
    free(seq);
    free(logits);
    induct__model_held(m, 0, tmp.n);
    return rc;
}
