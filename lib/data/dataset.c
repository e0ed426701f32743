/* Datasets: the repeated-random-token generator and windows over a token array.
 * Batch `index` of a split is a pure function of the dataset and its arguments. */
#include <stdlib.h>
#include <string.h>

#include "stream.h"

static int ds_alloc(induct_dataset **out, int kind) {
    induct_dataset *d = calloc(1, sizeof *d);
    INDUCT_FAIL_IF(!d, INDUCT_ENOMEM, "out of memory allocating a dataset");
    d->kind = kind;
    *out = d;
    return INDUCT_OK;
}

INDUCT_API void induct_dataset_free(induct_dataset *d) {
    if (!d) return;
    induct__stream_free(d->stream);
    free(d->tokens);
    free(d);
}

INDUCT_API uint32_t induct_dataset_d_vocab(const induct_dataset *d) { return d ? d->d_vocab : 0; }

INDUCT_API int induct_dataset_bos(const induct_dataset *d, int32_t *bos_out) {
    INDUCT_FAIL_IF(!d || !bos_out, INDUCT_EINVAL, "induct_dataset_bos: NULL argument");
    *bos_out = d->kind == INDUCT__DS_RRT      ? d->rrt.bos
               : d->kind == INDUCT__DS_STREAM ? d->stream->bos
                                              : -1; /* token arrays, key-value tasks */
    return INDUCT_OK;
}

INDUCT_API int induct_rrt_config_init(induct_rrt_config *cfg, size_t size) {
    INDUCT__CONFIG_INIT_CHECK(cfg, size, sizeof(induct_rrt_config));
    memset(cfg, 0, size);
    cfg->size = size;
    cfg->d_vocab = 64;
    cfg->n_repeats = 2;
    cfg->min_block = 8;
    cfg->max_block = 0;
    cfg->token_lo = 0;
    cfg->token_hi = 0;
    cfg->bos = -1;
    cfg->distinct_block = 0;
    cfg->seed = 0;
    return INDUCT_OK;
}

INDUCT_API int induct_dataset_new_rrt(induct_dataset **out, const induct_rrt_config *cfg) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_dataset_new_rrt: out is NULL");
    *out = NULL;
    induct_rrt_config c;
    induct_rrt_config_init(&c, sizeof c);
    INDUCT_TRY(induct__struct_in(&c, sizeof c, sizeof c, cfg, "induct_rrt_config"));
    INDUCT_FAIL_IF(c.d_vocab == 0, INDUCT_EINVAL, "rrt config: d_vocab must be >= 1");
    /* ids are int32: the largest, d_vocab - 1, must fit */
    INDUCT_FAIL_IF(c.d_vocab > (uint32_t)INT32_MAX + 1u, INDUCT_EINVAL,
                   "rrt config: d_vocab %u exceeds 2^31 (token ids are int32)", c.d_vocab);
    if (c.token_hi == 0) c.token_hi = c.d_vocab;
    INDUCT_FAIL_IF(c.n_repeats < 2, INDUCT_EINVAL, "rrt config: n_repeats must be >= 2 (got %u)",
                   c.n_repeats);
    INDUCT_FAIL_IF(c.min_block == 0, INDUCT_EINVAL, "rrt config: min_block must be >= 1");
    INDUCT_FAIL_IF(c.max_block != 0 && c.max_block < c.min_block, INDUCT_EINVAL,
                   "rrt config: max_block %u < min_block %u", c.max_block, c.min_block);
    INDUCT_FAIL_IF(c.token_lo >= c.token_hi || c.token_hi > c.d_vocab, INDUCT_EINVAL,
                   "rrt config: token range [%u, %u) is empty or outside [0, %u)", c.token_lo,
                   c.token_hi, c.d_vocab);
    INDUCT_FAIL_IF(c.bos >= 0 && ((uint32_t)c.bos >= c.d_vocab ||
                                  ((uint32_t)c.bos >= c.token_lo && (uint32_t)c.bos < c.token_hi)),
                   INDUCT_EINVAL, "rrt config: bos %d must be < d_vocab and outside [%u, %u)",
                   c.bos, c.token_lo, c.token_hi);
    INDUCT_FAIL_IF(c.bos < -1, INDUCT_EINVAL, "rrt config: bos must be -1 or a token id");
    INDUCT_FAIL_IF(c.distinct_block > 1, INDUCT_EINVAL, "rrt config: distinct_block must be 0 or 1");
    INDUCT_FAIL_IF(c.distinct_block && c.max_block > c.token_hi - c.token_lo, INDUCT_EINVAL,
                   "rrt config: a distinct block of %u tokens needs a range that large",
                   c.max_block);
    induct_dataset *d = NULL;
    INDUCT_TRY(ds_alloc(&d, INDUCT__DS_RRT));
    d->rrt = c;
    d->d_vocab = c.d_vocab;
    d->seed = c.seed;
    *out = d;
    return INDUCT_OK;
}

INDUCT_API int induct_dataset_new_tokens(induct_dataset **out, const int32_t *tokens, size_t n,
                                         uint32_t d_vocab, uint64_t seed) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_dataset_new_tokens: out is NULL");
    *out = NULL;
    INDUCT_FAIL_IF(!tokens || n == 0, INDUCT_EINVAL,
                   "induct_dataset_new_tokens: tokens is NULL or empty");
    INDUCT_FAIL_IF(d_vocab == 0, INDUCT_EINVAL, "induct_dataset_new_tokens: d_vocab is 0");
    size_t bytes; /* before reading: no array of n int32 can be larger than SIZE_MAX */
    INDUCT_FAIL_IF(!induct__mul(n, sizeof(int32_t), &bytes), INDUCT_ELIMIT,
                   "induct_dataset_new_tokens: %zu tokens overflow size_t", n);
    for (size_t i = 0; i < n; i++)
        INDUCT_FAIL_IF(tokens[i] < 0 || (uint32_t)tokens[i] >= d_vocab, INDUCT_ERANGE,
                       "induct_dataset_new_tokens: token %zu is %d, outside [0, %u)", i,
                       tokens[i], d_vocab);
    induct_dataset *d = NULL;
    INDUCT_TRY(ds_alloc(&d, INDUCT__DS_TOKENS));
    d->tokens = malloc(bytes);
    if (!d->tokens) {
        free(d);
        return induct__fail(INDUCT_ENOMEM, "out of memory copying %zu tokens", n);
    }
    memcpy(d->tokens, tokens, bytes);
    d->n_tokens = n;
    d->d_vocab = d_vocab;
    d->seed = seed;
    *out = d;
    return INDUCT_OK;
}

/* Block length bounds of an RRT dataset for sequences of length T. */
static int rrt_bounds(const induct_rrt_config *c, uint32_t T, uint32_t *lo, uint32_t *hi) {
    uint32_t body = T - (c->bos >= 0 ? 1u : 0u);
    uint32_t fit = body / c->n_repeats;
    uint32_t mx = c->max_block ? c->max_block : fit;
    INDUCT_FAIL_IF(mx > fit || c->min_block > mx, INDUCT_ERANGE,
                   "rrt: seq_len %u holds blocks of at most %u tokens x %u repeats; the config "
                   "asks for %u..%u",
                   T, fit, c->n_repeats, c->min_block, mx);
    /* max_block = 0 is only bounded by T here, which creation could not check */
    INDUCT_FAIL_IF(c->distinct_block && mx > c->token_hi - c->token_lo, INDUCT_ERANGE,
                   "rrt: seq_len %u allows blocks of up to %u tokens, but a distinct block "
                   "cannot be longer than the %u ids of [%u, %u); set max_block",
                   T, mx, c->token_hi - c->token_lo, c->token_lo, c->token_hi);
    *lo = c->min_block;
    *hi = mx;
    return INDUCT_OK;
}

static void rrt_sequence(const induct_rrt_config *c, uint32_t lo, uint32_t hi, uint32_t T,
                         induct__rng *r, int32_t *x, int32_t *meta) {
    uint32_t off = 0;
    uint64_t range = (uint64_t)c->token_hi - c->token_lo;
    if (c->bos >= 0) x[off++] = c->bos;
    /* filler over the whole body first (the usual construction: the copies overwrite it) */
    for (uint32_t t = off; t < T; t++) x[t] = (int32_t)(c->token_lo + induct__rng_below(r, range));
    uint32_t L = lo + (uint32_t)induct__rng_below(r, (uint64_t)(hi - lo) + 1);
    if (c->distinct_block) {
        for (uint32_t i = 0; i < L; i++) {
            int32_t v;
            int dup;
            do {
                v = (int32_t)(c->token_lo + induct__rng_below(r, range));
                dup = 0;
                for (uint32_t j = 0; j < i; j++)
                    if (x[off + j] == v) { dup = 1; break; }
            } while (dup);
            x[off + i] = v;
        }
    }
    for (uint32_t rep = 1; rep < c->n_repeats; rep++)
        memcpy(x + off + rep * L, x + off, L * sizeof *x);
    *meta = (int32_t)L;
}

INDUCT_API int induct_dataset_batch(const induct_dataset *d, uint32_t split, uint64_t index,
                                    uint32_t B, uint32_t T, int32_t *tokens_out,
                                    size_t tokens_cap, int32_t *meta_out, size_t meta_cap) {
    INDUCT_FAIL_IF(!d || !tokens_out, INDUCT_EINVAL, "induct_dataset_batch: NULL argument");
    INDUCT_FAIL_IF(B == 0 || T < 2, INDUCT_EINVAL,
                   "induct_dataset_batch: batch must be >= 1 and seq_len >= 2");
    INDUCT_FAIL_IF(split > INDUCT_SPLIT_EVAL, INDUCT_EINVAL,
                   "induct_dataset_batch: unknown split %u", split);
    size_t need = (size_t)B * T;
    INDUCT_FAIL_IF(tokens_cap < need, INDUCT_EBUFSIZE,
                   "induct_dataset_batch: tokens need %zu, buffer holds %zu", need, tokens_cap);
    INDUCT_FAIL_IF(meta_out && meta_cap < B, INDUCT_EBUFSIZE,
                   "induct_dataset_batch: meta needs %u, buffer holds %zu", B, meta_cap);
    induct__rng r;
    induct__rng_seed3(&r, d->seed, split + 1, index);
    if (d->kind == INDUCT__DS_KV) return induct__kv_batch(d, &r, B, T, tokens_out, meta_out, NULL);
    if (d->kind == INDUCT__DS_STREAM)
        return induct__stream_batch(d, split, index, B, T, tokens_out, meta_out);
    if (d->kind == INDUCT__DS_RRT) {
        uint32_t lo = 0, hi = 0;
        INDUCT_TRY(rrt_bounds(&d->rrt, T, &lo, &hi));
        for (uint32_t b = 0; b < B; b++) {
            int32_t L;
            rrt_sequence(&d->rrt, lo, hi, T, &r, tokens_out + (size_t)b * T, &L);
            if (meta_out) meta_out[b] = L;
        }
        return INDUCT_OK;
    }
    INDUCT_FAIL_IF(d->n_tokens < (size_t)T + 1, INDUCT_ERANGE,
                   "induct_dataset_batch: %zu tokens cannot hold a window of %u plus one",
                   d->n_tokens, T);
    uint64_t n_starts = d->n_tokens - T; /* starts 0 .. n-T-1 */
    for (uint32_t b = 0; b < B; b++) {
        uint64_t s = induct__rng_below(&r, n_starts);
        memcpy(tokens_out + (size_t)b * T, d->tokens + s, (size_t)T * sizeof(int32_t));
        if (meta_out) meta_out[b] = (int32_t)(s > INT32_MAX ? INT32_MAX : s);
    }
    return INDUCT_OK;
}
