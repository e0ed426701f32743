/* Key-value retrieval generator (the blog post's task) and its exact Bayes-optimal ceiling.
 * Row layout, draw order and the ceiling derivation: include/induct/induct.h
 * (induct_kv_config) and docs/datasets.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"


INDUCT_API int induct_kv_config_init(induct_kv_config *cfg, size_t size) {
    INDUCT__CONFIG_INIT_CHECK(cfg, size, sizeof(induct_kv_config));
    memset(cfg, 0, size);
    cfg->size = size;
    cfg->d_vocab = 64;
    cfg->token_lo = 0;
    cfg->token_hi = 0;
    cfg->pair_min = 0;
    cfg->pair_max = -1;
    cfg->unique_key = 0;
    cfg->all_positions = 0;
    cfg->seed = 0;
    return INDUCT_OK;
}

INDUCT_API int induct_dataset_new_kv(induct_dataset **out, const induct_kv_config *cfg) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_dataset_new_kv: out is NULL");
    *out = NULL;
    induct_kv_config c;
    induct_kv_config_init(&c, sizeof c);
    INDUCT_TRY(induct__struct_in(&c, sizeof c, sizeof c, cfg, "induct_kv_config"));
    INDUCT_FAIL_IF(c.d_vocab == 0, INDUCT_EINVAL, "kv config: d_vocab must be >= 1");
    if (c.token_hi == 0) c.token_hi = c.d_vocab;
    INDUCT_FAIL_IF(c.token_lo >= c.token_hi || c.token_hi > c.d_vocab, INDUCT_EINVAL,
                   "kv config: token range [%u, %u) is empty or outside [0, %u)", c.token_lo,
                   c.token_hi, c.d_vocab);
    INDUCT_FAIL_IF(c.unique_key > 1, INDUCT_EINVAL, "kv config: unique_key must be 0 or 1");
    INDUCT_FAIL_IF(c.all_positions > 1, INDUCT_EINVAL, "kv config: all_positions must be 0 or 1");
    INDUCT_FAIL_IF(c.unique_key && c.token_hi - c.token_lo < 2, INDUCT_EINVAL,
                   "kv config: unique_key needs a token range of at least 2 ids");
    INDUCT_FAIL_IF(c.pair_max < -1, INDUCT_EINVAL, "kv config: pair_max must be -1 or >= 0");
    INDUCT_FAIL_IF(c.pair_max >= 0 && (uint32_t)c.pair_max < c.pair_min, INDUCT_EINVAL,
                   "kv config: pair_max %d < pair_min %u", c.pair_max, c.pair_min);
    induct_dataset *d = calloc(1, sizeof *d);
    INDUCT_FAIL_IF(!d, INDUCT_ENOMEM, "out of memory allocating a dataset");
    d->kind = INDUCT__DS_KV;
    d->kv = c;
    d->d_vocab = c.d_vocab;
    d->seed = c.seed;
    *out = d;
    return INDUCT_OK;
}

/* Allowed key positions [*lo, *hi] for rows of length T (context T - 1). */
static int kv_pairs(const induct_kv_config *c, uint32_t T, uint32_t *lo, uint32_t *hi) {
    INDUCT_FAIL_IF(T < 4, INDUCT_ERANGE,
                   "kv: seq_len %u is too short: a row is [key][value] ... [key] + the answer, "
                   "so seq_len >= 4",
                   T);
    uint32_t last = T - 4; /* key at p, value at p+1 <= C-2 = T-3 */
    uint32_t mx = c->pair_max < 0 ? last : (uint32_t)c->pair_max;
    INDUCT_FAIL_IF(mx > last || c->pair_min > mx, INDUCT_ERANGE,
                   "kv: with seq_len %u the key position can be at most %u; the config asks for "
                   "%u..%u",
                   T, last, c->pair_min, mx);
    *lo = c->pair_min;
    *hi = mx;
    return INDUCT_OK;
}

/* A token of the range, or of the range without `k` when `excl`. */
static int32_t draw(induct__rng *r, const induct_kv_config *c, int excl, int32_t k) {
    uint64_t R = (uint64_t)c->token_hi - c->token_lo;
    if (!excl) return (int32_t)(c->token_lo + induct__rng_below(r, R));
    int32_t id = (int32_t)(c->token_lo + induct__rng_below(r, R - 1));
    return id >= k ? id + 1 : id;
}

int induct__kv_batch(const induct_dataset *d, induct__rng *r, uint32_t B, uint32_t T,
                     int32_t *tokens, int32_t *meta, int32_t *info) {
    const induct_kv_config *c = &d->kv;
    uint32_t lo = 0, hi = 0;
    INDUCT_TRY(kv_pairs(c, T, &lo, &hi));
    uint32_t C = T - 1;
    int ex = (int)c->unique_key;
    for (uint32_t b = 0; b < B; b++) {
        int32_t *x = tokens + (size_t)b * T;
        uint32_t p = lo + (uint32_t)induct__rng_below(r, (uint64_t)(hi - lo) + 1);
        int32_t k = draw(r, c, 0, 0);
        int32_t v = draw(r, c, ex, k);
        for (uint32_t t = 0; t + 1 < C; t++)
            x[t] = t == p ? k : t == p + 1 ? v : draw(r, c, ex, k);
        x[C - 1] = k;
        x[C] = v;
        if (meta) meta[b] = (int32_t)(p + 1);
        if (info) {
            int32_t *o = info + (size_t)b * INDUCT_KV_INFO_COLS;
            o[INDUCT_KV_ANSWER_POS] = (int32_t)(C - 1);
            o[INDUCT_KV_ANSWER_TOKEN] = v;
            o[INDUCT_KV_KEY_POS] = (int32_t)p;
            o[INDUCT_KV_VALUE_POS] = (int32_t)(p + 1);
        }
    }
    return INDUCT_OK;
}

uint32_t induct__dataset_score_pos(const induct_dataset *d, uint32_t T) {
    return d->kind == INDUCT__DS_KV && !d->kv.all_positions && T >= 2 ? T - 1 : 0;
}

INDUCT_API int induct_dataset_kv_info(const induct_dataset *d, uint32_t split, uint64_t index,
                                      uint32_t B, uint32_t T, int32_t *out, size_t out_cap,
                                      size_t *out_len) {
    INDUCT_FAIL_IF(!d, INDUCT_EINVAL, "induct_dataset_kv_info: dataset is NULL");
    INDUCT_FAIL_IF(d->kind != INDUCT__DS_KV, INDUCT_EINVAL,
                   "induct_dataset_kv_info: not a key-value retrieval dataset");
    INDUCT_FAIL_IF(B == 0, INDUCT_EINVAL, "induct_dataset_kv_info: batch must be >= 1");
    INDUCT_FAIL_IF(split > INDUCT_SPLIT_EVAL, INDUCT_EINVAL,
                   "induct_dataset_kv_info: unknown split %u", split);
    uint32_t lo = 0, hi = 0;
    INDUCT_TRY(kv_pairs(&d->kv, T, &lo, &hi));
    size_t need;
    INDUCT_FAIL_IF(!induct__mul(B, INDUCT_KV_INFO_COLS, &need), INDUCT_ELIMIT,
                   "induct_dataset_kv_info: size overflow");
    if (out_len) *out_len = need;
    INDUCT_FAIL_IF(!out || out_cap < need, INDUCT_EBUFSIZE,
                   "induct_dataset_kv_info: needs %zu int32 ([batch][4]), buffer holds %zu", need,
                   out ? out_cap : 0);
    /* Regenerate the rows one at a time with the batch's stream: same draws, same rows. */
    int32_t *row = malloc((size_t)T * sizeof *row);
    INDUCT_FAIL_IF(!row, INDUCT_ENOMEM, "induct_dataset_kv_info: out of memory");
    induct__rng r;
    induct__rng_seed3(&r, d->seed, split + 1, index);
    int rc = INDUCT_OK;
    for (uint32_t b = 0; b < B && rc == INDUCT_OK; b++)
        rc = induct__kv_batch(d, &r, 1, T, row, NULL, out + (size_t)b * INDUCT_KV_INFO_COLS);
    free(row);
    return rc;
}

/* ---- the ceiling ----------------------------------------------------------------
 * acc = (R/m) E[M] with M = max_v #{j in window : W[j] = k, W[j+1] = v}, W the m+1
 * i.i.d. uniform tokens x[pair_min .. pair_max+1] and k fixed (docs/datasets.md).
 * Occurrences followed by k count for v = k (b of them); the a others are followed by
 * i.i.d. uniform non-k tokens, so their largest count is the maximum occupancy Y_a
 * of a balls in R-1 bins. M = max(b, Y_a). */

/* P(Y_r <= t) for r = 0..cap (balls in n bins), written to F[0..cap]. */
static void max_occupancy_cdf(uint64_t n, uint32_t cap, uint32_t t, double *F, double *h,
                              double *h2, double *pmf) {
    for (uint32_t r = 0; r <= cap; r++) h[r] = r <= t ? 1.0 : 0.0; /* one bin */
    for (uint64_t j = 2; j <= n; j++) {
        double p = 1.0 / (double)j, ratio = p / (1.0 - p);
        for (uint32_t r = 0; r <= cap; r++) {
            /* the first of j bins takes c ~ Binomial(r, 1/j) balls */
            uint32_t cmax = r < t ? r : t;
            pmf[0] = pow(1.0 - p, (double)r);
            double s = pmf[0] * h[r];
            for (uint32_t c = 0; c < cmax; c++) {
                pmf[c + 1] = pmf[c] * (double)(r - c) / (double)(c + 1) * ratio;
                s += pmf[c + 1] * h[r - c - 1];
            }
            h2[r] = s;
        }
        memcpy(h, h2, (cap + 1) * sizeof *h);
    }
    memcpy(F, h, (cap + 1) * sizeof *F);
}

static int kv_ceiling(uint64_t R, uint64_t m, double *out) {
    if (R == 1) { /* every token is the key and every value is the key */
        *out = 1.0;
        return INDUCT_OK;
    }
    const double q = 1.0 / (double)R;
    /* cap: R * P(N > cap) < 1e-13 for N ~ Binomial(m, q), the number of occurrences.
     * The pmf is evaluated where it is needed, from the top down (resource limits:
     * a table of m + 1 doubles was 32 GiB for a seq_len near 2^32). */
#define PMF_N(i)                                                                           \
    exp(lgamma((double)m + 1) - lgamma((double)(i) + 1) - lgamma((double)(m - (i)) + 1) + \
        (double)(i) * log(q) + (double)(m - (i)) * log1p(-q))
    uint64_t cap = m;
    double tail = 0.0;
    /* Terms above the mode that underflow to exactly 0 add nothing to the tail: skip
     * them by bisection (the pmf decreases above the mode), so a huge m costs O(log m)
     * evaluations here instead of O(m); the loop below then resumes exactly where the
     * term-by-term walk would be, with the same tail (0.0), so the cap is the same. */
    uint64_t mode = (uint64_t)floor(((double)m + 1.0) * q);
    if (mode < m && PMF_N(m) == 0.0) {
        uint64_t lo = mode, hi = m; /* PMF_N(lo) > 0 (the mode), PMF_N(hi) == 0 */
        while (hi - lo > 1) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (PMF_N(mid) == 0.0) hi = mid;
            else lo = mid;
        }
        cap = hi;
    }
    while (cap > 0 && (tail + PMF_N(cap)) * (double)R < 1e-13) {
        tail += PMF_N(cap);
        cap--;
    }
#undef PMF_N
    /* limits on the work: (cap+1)^2 states over m positions; R-1 bins x cap^3 */
    double work1 = (double)m * (double)(cap + 1) * (double)(cap + 1);
    double work2 = (double)(R - 1) * (double)(cap + 1) * (double)(cap + 1) * (double)(cap + 1);
    INDUCT_FAIL_IF(cap > 4096 || work1 > 4e10 || work2 > 4e10, INDUCT_ELIMIT,
                   "kv ceiling: %llu allowed key positions with %llu ids is too large to evaluate "
                   "exactly (up to %llu key repeats)",
                   (unsigned long long)m, (unsigned long long)R, (unsigned long long)cap);
    size_t S = (size_t)(cap + 1), SS = S * S;
    double *P0 = calloc(SS, sizeof *P0), *P1 = calloc(SS, sizeof *P1);
    double *N0 = calloc(SS, sizeof *N0), *N1 = calloc(SS, sizeof *N1);
    double *F = malloc(SS * sizeof *F), *h = malloc(S * sizeof *h), *h2 = malloc(S * sizeof *h2),
           *pm = malloc(S * sizeof *pm);
    int rc = INDUCT_OK;
    if (!P0 || !P1 || !N0 || !N1 || !F || !h || !h2 || !pm) {
        rc = induct__fail(INDUCT_ENOMEM, "kv ceiling: out of memory");
        goto done;
    }
    /* DP over window positions 0..m: state (W[i] == k, a, b). */
    P1[0] = q;
    P0[0] = 1.0 - q;
    for (uint64_t i = 1; i <= m; i++) {
        memset(N0, 0, SS * sizeof *N0);
        memset(N1, 0, SS * sizeof *N1);
        for (size_t a = 0; a < S; a++)
            for (size_t b = 0; a + b < S; b++) {
                double p0 = P0[a * S + b], p1 = P1[a * S + b];
                if (p0 != 0.0) {
                    N1[a * S + b] += p0 * q;
                    N0[a * S + b] += p0 * (1.0 - q);
                }
                if (p1 != 0.0) { /* occurrence at i-1: followed by k (b) or not (a) */
                    if (a + b + 1 < S) {
                        N1[a * S + b + 1] += p1 * q;
                        N0[(a + 1) * S + b] += p1 * (1.0 - q);
                    }
                }
            }
        double *t0 = P0, *t1 = P1;
        P0 = N0;
        P1 = N1;
        N0 = t0;
        N1 = t1;
    }
    /* F[t][a] = P(Y_a <= t) */
    for (uint32_t t = 0; t < S; t++)
        max_occupancy_cdf(R - 1, (uint32_t)cap, t, F + (size_t)t * S, h, h2, pm);
    double EM = 0.0;
    for (size_t a = 0; a < S; a++)
        for (size_t b = 0; a + b < S; b++) {
            double pr = P0[a * S + b] + P1[a * S + b];
            if (pr == 0.0) continue;
            double e = (double)b; /* E[max(b, Y_a)] = b + sum_{t >= b} P(Y_a > t) */
            for (size_t t = b; t < a; t++) e += 1.0 - F[t * S + a];
            EM += pr * e;
        }
    double acc = (double)R / (double)m * EM;
    *out = acc > 1.0 ? 1.0 : acc;
done:
    free(P0);
    free(P1);
    free(N0);
    free(N1);
    free(F);
    free(h);
    free(h2);
    free(pm);
    return rc;
}

INDUCT_API int induct_dataset_kv_ceiling(const induct_dataset *d, uint32_t T, double *out) {
    INDUCT_FAIL_IF(!d || !out, INDUCT_EINVAL, "induct_dataset_kv_ceiling: NULL argument");
    INDUCT_FAIL_IF(d->kind != INDUCT__DS_KV, INDUCT_EINVAL,
                   "induct_dataset_kv_ceiling: not a key-value retrieval dataset");
    uint32_t lo = 0, hi = 0;
    INDUCT_TRY(kv_pairs(&d->kv, T, &lo, &hi));
    if (d->kv.unique_key) {
        *out = 1.0;
        return INDUCT_OK;
    }
    double v = 0.0;
    INDUCT_TRY(kv_ceiling((uint64_t)d->kv.token_hi - d->kv.token_lo, (uint64_t)(hi - lo) + 1, &v));
    *out = v;
    return INDUCT_OK;
}
