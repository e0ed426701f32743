#define _XOPEN_SOURCE 700 /* pread */
/* Token streams behind text and token-file datasets: the position split, random
 * train windows, the fixed evaluation windows, and reads from files with pread(2).
 * Rules: include/induct/induct.h (induct_text_config) and docs/datasets.md. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stream.h"

__extension__ typedef unsigned __int128 u128;

int induct__store_read(const induct__store *st, uint64_t first, uint64_t count, int32_t *out) {
    if (st->data) {
        for (uint64_t j = 0; j < count; j++) out[j] = induct__store_get(st, first + j);
        return INDUCT_OK;
    }
    unsigned char buf[8192];
    const uint64_t per = sizeof buf / st->width;
    while (count > 0) {
        uint64_t k = count < per ? count : per;
        size_t want = (size_t)(k * st->width), got = 0;
        uint64_t pos = st->offset + first * st->width;
        while (got < want) {
            ssize_t r = pread(st->fd, buf + got, want - got, (off_t)(pos + got));
            if (r < 0 && errno == EINTR) continue;
            INDUCT_FAIL_IF(r < 0, INDUCT_EIO, "%s: read failed at byte %llu: %s", st->path,
                           (unsigned long long)(pos + got), strerror(errno));
            INDUCT_FAIL_IF(r == 0, INDUCT_EIO,
                           "%s: the file ends at byte %llu, before its token %llu: it was "
                           "truncated or changed while in use",
                           st->path, (unsigned long long)(pos + got),
                           (unsigned long long)(first + got / st->width));
            got += (size_t)r;
        }
        const unsigned char *p = buf;
        if (st->width == 2)
            for (uint64_t j = 0; j < k; j++, p += 2)
                out[j] = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8);
        else
            for (uint64_t j = 0; j < k; j++, p += 4)
                out[j] = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 |
                                   (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        out += k;
        first += k;
        count -= k;
    }
    return INDUCT_OK;
}

int induct__stream_new(struct induct__stream **out) {
    struct induct__stream *s = calloc(1, sizeof *s);
    INDUCT_FAIL_IF(!s, INDUCT_ENOMEM, "out of memory allocating a token stream");
    for (int i = 0; i < 2; i++) s->store[i].fd = -1;
    s->bos = -1;
    *out = s;
    return INDUCT_OK;
}

void induct__stream_free(struct induct__stream *s) {
    if (!s) return;
    for (uint32_t i = 0; i < 2; i++) {
        if (s->store[i].fd >= 0) close(s->store[i].fd);
        free(s->store[i].path);
        free(s->store[i].owned);
    }
    free(s->split[0].seg);
    free(s->split[1].seg);
    free(s);
}

int induct__split_append(induct__split *sp, uint32_t store, uint64_t off, uint64_t len) {
    if (len == 0) return INDUCT_OK;
    if (sp->n_seg > 0) {
        induct__seg *last = &sp->seg[sp->n_seg - 1];
        if (last->store == store && last->off + last->len == off) {
            last->len += len;
            sp->n += len;
            return INDUCT_OK;
        }
    }
    if (sp->n_seg == sp->cap) {
        size_t nc = sp->cap ? sp->cap * 2 : 16;
        INDUCT_FAIL_IF(nc > SIZE_MAX / sizeof(induct__seg), INDUCT_ELIMIT,
                       "token stream: too many segments");
        induct__seg *g = realloc(sp->seg, nc * sizeof *g);
        INDUCT_FAIL_IF(!g, INDUCT_ENOMEM, "out of memory splitting a token stream");
        sp->seg = g;
        sp->cap = nc;
    }
    sp->seg[sp->n_seg++] = (induct__seg){.store = store, .off = off, .len = len, .cum = sp->n};
    sp->n += len;
    return INDUCT_OK;
}

uint64_t induct__ppm(double f) { return (uint64_t)llround(f * 1e6); }

int induct__unit_held_out(uint64_t i, uint64_t F) {
    return (u128)(i + 1) * F / 1000000u > (u128)i * F / 1000000u;
}

int induct__check_split_cfg(double f, const char *what) {
    INDUCT_FAIL_IF(!(f >= 0.0 && f < 1.0), INDUCT_EINVAL,
                   "%s: val_fraction %g must be in [0, 1)", what, f);
    return INDUCT_OK;
}

uint64_t induct__split_tables_bound(uint64_t units, uint64_t held) {
    /* held-out units are runs of their own (at most `held`); the train runs lie between
     * them (at most held + 1); and no split has more runs than units */
    uint64_t runs = held < units ? 2 * held + 1 : units;
    if (runs > units) runs = units;
    return (runs + 2) * 2 * sizeof(induct__seg); /* + doubling slack */
}

int induct__stream_split_position(struct induct__stream *s, uint64_t block, uint64_t F,
                                  uint64_t max_bytes) {
    uint64_t n = s->store[0].n;
    if (block != 0 && max_bytes) {
        uint64_t units = n / block + (n % block != 0);
        uint64_t held = (uint64_t)((u128)units * F / 1000000u);
        uint64_t need = induct__split_tables_bound(units, held);
        INDUCT_FAIL_IF(need > max_bytes, INDUCT_ELIMIT,
                       "split: %llu blocks of %llu tokens (%llu held out) need up to %llu "
                       "bytes of segment tables, more than max_bytes allows (%llu)",
                       (unsigned long long)units, (unsigned long long)block,
                       (unsigned long long)held, (unsigned long long)need,
                       (unsigned long long)max_bytes);
    }
    if (block == 0) {
        uint64_t nval = (uint64_t)((u128)n * F / 1000000u);
        INDUCT_TRY(induct__split_append(&s->split[INDUCT_SPLIT_TRAIN], 0, 0, n - nval));
        return induct__split_append(&s->split[INDUCT_SPLIT_EVAL], 0, n - nval, nval);
    }
    uint64_t units = n / block + (n % block != 0);
    for (uint64_t i = 0; i < units; i++) {
        uint64_t off = i * block, len = n - off < block ? n - off : block;
        uint32_t which = induct__unit_held_out(i, F) ? INDUCT_SPLIT_EVAL : INDUCT_SPLIT_TRAIN;
        INDUCT_TRY(induct__split_append(&s->split[which], 0, off, len));
    }
    return INDUCT_OK;
}

/* Tokens [start, start+T) of a split's logical stream into out. */
static int read_window(struct induct__stream *s, const induct__split *sp, uint64_t start,
                       uint32_t T, int32_t *out) {
    size_t lo = 0, hi = sp->n_seg - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo + 1) / 2;
        if (sp->seg[mid].cum <= start) lo = mid;
        else hi = mid - 1;
    }
    uint64_t pos = start;
    uint32_t done = 0;
    for (size_t i = lo; done < T; i++) {
        const induct__seg *g = &sp->seg[i];
        uint64_t o = pos - g->cum, take = g->len - o;
        if (take > T - done) take = T - done;
        INDUCT_TRY(induct__store_read(&s->store[g->store], g->off + o, take, out + done));
        done += (uint32_t)take;
        pos += take;
    }
    return INDUCT_OK;
}

/* Size of the fixed evaluation set of a held-out stream of n tokens. */
static uint64_t eval_count(uint64_t n, uint32_t T, uint32_t N) {
    if (n < (uint64_t)T + 1) return 0;
    if (N == 0) return (n - 1) / T;
    uint64_t S = n - T;
    return N < S ? N : S;
}

static uint64_t gcd64(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Stride of the evaluation order: the integer coprime to E nearest to E·(√5−1)/2, so
 * that w -> w·k mod E is a permutation whose every prefix is spread over the whole
 * held-out part (three-gap theorem). */
static uint64_t eval_stride(uint64_t E) {
    if (E <= 2) return 1;
    uint64_t k0 = (uint64_t)((long double)E * 0.6180339887498948482L);
    for (uint64_t d = 0;; d++) {
        if (k0 + d < E && gcd64(k0 + d, E) == 1) return k0 + d;
        if (d <= k0 && k0 - d > 0 && gcd64(k0 - d, E) == 1) return k0 - d;
    }
}

/* Start of the i-th window of the evaluation order. With N = 0 the disjoint windows
 * are read in stream order; with N > 0 the E fixed windows at ⌊j·(n−T)/E⌋ are read in
 * the order j = i·k mod E (k = eval_stride(E)), so that any eval batch (the training driver's batch 0
 * included) samples the whole held-out part, not its first few percent. */
static uint64_t eval_start(uint64_t n, uint32_t T, uint32_t N, uint64_t E, uint64_t k,
                           uint64_t i) {
    if (N == 0) return i * T;
    uint64_t j = (uint64_t)((u128)i * k % E);
    return (uint64_t)((u128)j * (n - T) / E);
}

/* Stream id of the repeated-span draws, distinct from the splits' 1 and 2. */
#define REPEAT_STREAM 0x5245504541545331ULL /* "REPEATS1" */

/* The repeated-span curriculum on one train row x[0..T) (T/2 >= rep_min checked):
 * with probability rep_fraction, L uniform in [rep_min, min(rep_max, T/2)] and the pair
 * (a, b) uniform over {0 <= a, a + L <= b, b + L <= T}; then x[b..b+L) = x[a..a+L).
 * Draws per row: the coin, then (if heads) L, then two distinct values for (a, b). */
static void repeat_span(const struct induct__stream *s, induct__rng *r, uint32_t T,
                        int32_t *x) {
    if (!(induct__rng_uniform(r) < s->rep_fraction)) return;
    uint32_t hi = s->rep_max < T / 2 ? s->rep_max : T / 2;
    uint32_t L = s->rep_min + (uint32_t)induct__rng_below(r, (uint64_t)(hi - s->rep_min) + 1);
    /* a <= c = b - L <= M = T - 2L: a uniform pair with a <= c is a uniform pair of
     * distinct values u < v of {0 .. M + 1}, with a = u and c = v - 1 */
    uint64_t M = (uint64_t)T - 2u * L;
    uint64_t u = induct__rng_below(r, M + 2), v = induct__rng_below(r, M + 1);
    if (v >= u) v++;
    else {
        uint64_t t = u;
        u = v;
        v = t;
    }
    uint32_t a = (uint32_t)u, bpos = (uint32_t)(v - 1) + L;
    memcpy(x + bpos, x + a, (size_t)L * sizeof *x); /* bpos >= a + L: no overlap */
}

int induct__stream_batch(const induct_dataset *d, uint32_t split, uint64_t index, uint32_t B,
                         uint32_t T, int32_t *tokens, int32_t *meta) {
    struct induct__stream *s = d->stream;
    const induct__split *sp = &s->split[split];
    if (split == INDUCT_SPLIT_TRAIN) {
        INDUCT_FAIL_IF(sp->n < (uint64_t)T + 1, INDUCT_ERANGE,
                       "induct_dataset_batch: the train split has %llu tokens; a window of %u "
                       "plus one needs %llu",
                       (unsigned long long)sp->n, T, (unsigned long long)T + 1);
        const int rep = s->rep_fraction > 0.0;
        INDUCT_FAIL_IF(rep && T / 2 < s->rep_min, INDUCT_ERANGE,
                       "induct_dataset_batch: seq_len %u cannot hold two copies of the "
                       "shortest repeated span (min_len %u, induct_dataset_set_repeats)",
                       T, s->rep_min);
        induct__rng r, rr;
        induct__rng_seed3(&r, d->seed, split + 1, index);
        /* the curriculum's own stream: the window starts above are the same with it on */
        if (rep) induct__rng_seed3(&rr, d->seed, REPEAT_STREAM, index);
        uint64_t n_starts = sp->n - T; /* starts 0 .. n-T-1 */
        for (uint32_t b = 0; b < B; b++) {
            uint64_t st = induct__rng_below(&r, n_starts);
            INDUCT_TRY(read_window(s, sp, st, T, tokens + (size_t)b * T));
            if (rep) repeat_span(s, &rr, T, tokens + (size_t)b * T);
            if (meta) meta[b] = (int32_t)(st > INT32_MAX ? INT32_MAX : st);
        }
        return INDUCT_OK;
    }
    uint64_t E = eval_count(sp->n, T, s->n_eval_windows);
    INDUCT_FAIL_IF(E == 0, INDUCT_ERANGE,
                   "induct_dataset_batch: the held-out split has %llu tokens; a window of %u "
                   "plus one needs %llu",
                   (unsigned long long)sp->n, T, (unsigned long long)T + 1);
    uint64_t first = (uint64_t)((u128)index * B % E);
    const uint64_t k = eval_stride(E); /* once per batch, not per row */
    for (uint32_t b = 0; b < B; b++) {
        uint64_t w = (first + b) % E;
        uint64_t st = eval_start(sp->n, T, s->n_eval_windows, E, k, w);
        INDUCT_TRY(read_window(s, sp, st, T, tokens + (size_t)b * T));
        if (meta) meta[b] = (int32_t)(st > INT32_MAX ? INT32_MAX : st);
    }
    return INDUCT_OK;
}

INDUCT_API int induct_dataset_split_tokens(const induct_dataset *d, uint32_t split,
                                           uint64_t *n_out) {
    INDUCT_FAIL_IF(!d || !n_out, INDUCT_EINVAL, "induct_dataset_split_tokens: NULL argument");
    INDUCT_FAIL_IF(split > INDUCT_SPLIT_EVAL, INDUCT_EINVAL,
                   "induct_dataset_split_tokens: unknown split %u", split);
    if (d->kind == INDUCT__DS_TOKENS) {
        *n_out = d->n_tokens;
        return INDUCT_OK;
    }
    INDUCT_FAIL_IF(d->kind != INDUCT__DS_STREAM, INDUCT_EINVAL,
                   "induct_dataset_split_tokens: a generator dataset has no token count");
    *n_out = d->stream->split[split].n;
    return INDUCT_OK;
}

INDUCT_API int induct_dataset_window_count(const induct_dataset *d, uint32_t split, uint32_t T,
                                           uint64_t *n_out) {
    INDUCT_FAIL_IF(!d || !n_out, INDUCT_EINVAL, "induct_dataset_window_count: NULL argument");
    INDUCT_FAIL_IF(split > INDUCT_SPLIT_EVAL, INDUCT_EINVAL,
                   "induct_dataset_window_count: unknown split %u", split);
    INDUCT_FAIL_IF(T < 2, INDUCT_EINVAL, "induct_dataset_window_count: seq_len must be >= 2");
    INDUCT_FAIL_IF(d->kind != INDUCT__DS_STREAM, INDUCT_EINVAL,
                   "induct_dataset_window_count: only text and token-file datasets");
    uint64_t n = d->stream->split[split].n;
    if (split == INDUCT_SPLIT_TRAIN) *n_out = n > T ? n - T : 0;
    else *n_out = eval_count(n, T, d->stream->n_eval_windows);
    return INDUCT_OK;
}

INDUCT_API int induct_dataset_set_repeats(induct_dataset *d, double fraction, uint32_t min_len,
                                          uint32_t max_len) {
    INDUCT_FAIL_IF(!d, INDUCT_EINVAL, "induct_dataset_set_repeats: dataset is NULL");
    INDUCT_FAIL_IF(d->kind != INDUCT__DS_STREAM, INDUCT_ENOTSUP,
                   "induct_dataset_set_repeats: only text and token-file datasets have a "
                   "repeated-span curriculum (this dataset is a %s)",
                   d->kind == INDUCT__DS_RRT      ? "repeated-random-token generator"
                   : d->kind == INDUCT__DS_KV     ? "key-value generator"
                                                  : "token array");
    INDUCT_FAIL_IF(!(fraction >= 0.0 && fraction <= 1.0), INDUCT_EINVAL,
                   "induct_dataset_set_repeats: fraction %g must be finite and in [0, 1]",
                   fraction);
    INDUCT_FAIL_IF(min_len < 1 || min_len > max_len, INDUCT_EINVAL,
                   "induct_dataset_set_repeats: need 1 <= min_len <= max_len (got %u, %u)",
                   min_len, max_len);
    d->stream->rep_fraction = fraction;
    d->stream->rep_min = min_len;
    d->stream->rep_max = max_len;
    return INDUCT_OK;
}
