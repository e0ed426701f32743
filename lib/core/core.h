/* lib/core: what every other wing of the library stands on. Errors with a message per
 * thread, the size-prefixed struct rules of the ABI (one size cap, one guard for every
 * *_config_init), checked size arithmetic, atomic file replacement and the explicit-state
 * random number generator. Private: never installed; includes only the public header.
 * (Locale-free number text is core/numtext.h, kept apart for its <locale.h>.) */
#ifndef INDUCT_CORE_H
#define INDUCT_CORE_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "induct/induct.h"

/* ---- errors (error.c) ---------------------------------------------------- */
#if defined(__GNUC__)
#define INDUCT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define INDUCT_PRINTF(a, b)
#endif
/* Record `status` with a formatted message for the calling thread; returns status. */
int induct__fail(int status, const char *fmt, ...) INDUCT_PRINTF(2, 3);

/* Early-return helpers (zstd style). */
#define INDUCT_FAIL_IF(cond, status, ...)                                                  \
    do {                                                                                   \
        if (cond) return induct__fail((status), __VA_ARGS__);                              \
    } while (0)
#define INDUCT_TRY(expr)                                                                   \
    do {                                                                                   \
        int induct_try_rc_ = (expr);                                                       \
        if (induct_try_rc_ < 0) return induct_try_rc_;                                     \
    } while (0)

/* The system's message for errno value `e` in buf (cap bytes; thread-safe strerror_r),
 * "error <e>" if it has none; returns buf. */
const char *induct__errstr(int e, char *buf, size_t cap);

/* ---- atomic file replacement (atomic_file.c) ----------------------------- */
/* Writes the content of a file to `f`: 0 on success, non-zero on a write failure with
 * errno set by the failing call. */
typedef int (*induct__write_fn)(FILE *f, void *user);
/* Replace `path` atomically with what `write_fn` writes: a temporary file
 * `<path>.tmp.<pid>.<n>` in the same directory (mode 0666 less the umask), flushed,
 * fsync'ed and renamed over `path`, then the directory fsync'ed (best effort). On
 * failure the temporary file is removed, `path` is untouched and the status is
 * ::INDUCT_EIO (the message starts with `what` and the path and names the system error)
 * or ::INDUCT_ENOMEM. The one implementation of atomic writes in the library. */
int induct__write_atomic(const char *path, const char *what, induct__write_fn write_fn,
                         void *user);

/* ---- size-prefixed structs (abi.c) ------------------------------------------
 * Every public config struct starts with its size in bytes and only grows at the end
 * (docs/abi-policy.md). INDUCT__STRUCT_SIZE_CAP is the largest size any function
 * accepts: a larger one is not a struct of this library (EABI). */
#define INDUCT__STRUCT_SIZE_CAP 4096
/* The check every public *_config_init(cfg, size) starts with: cfg not NULL (EINVAL),
 * min_size <= size <= INDUCT__STRUCT_SIZE_CAP (EABI); the messages name `fn`. */
int induct__config_init_check(const void *cfg, size_t size, size_t min_size, const char *fn);
#define INDUCT__CONFIG_INIT_CHECK(cfg, size, min_size)                                     \
    INDUCT_TRY(induct__config_init_check((cfg), (size), (min_size), __func__))
/* Copy a caller's size-prefixed struct over `dst` (which holds defaults, `known`
 * bytes). Checks the size (>= min_size, <= INDUCT__STRUCT_SIZE_CAP) and that any bytes
 * beyond `known` are zero. */
int induct__struct_in(void *dst, size_t known, size_t min_size, const void *src,
                      const char *what);
/* Copy `known` bytes of `src` out to a caller struct whose size field says how much
 * it can take. */
int induct__struct_out(void *dst, const void *src, size_t known, size_t min_size,
                       const char *what);

/* ---- size arithmetic ------------------------------------------------------ */
/* a*b into *out; false on size_t overflow. */
static inline bool induct__mul(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return false;
    *out = a * b;
    return true;
}
static inline bool induct__add(size_t a, size_t b, size_t *out) {
    if (b > SIZE_MAX - a) return false;
    *out = a + b;
    return true;
}
/* A byte total of several buffers, checked: add `count` elements of `elem` bytes. */
typedef struct induct__bytes {
    uint64_t n;
    int overflow;
} induct__bytes;
static inline void induct__bytes_add(induct__bytes *b, uint64_t count, uint64_t elem) {
    if (elem && count > UINT64_MAX / elem) {
        b->overflow = 1;
        return;
    }
    if (b->n > UINT64_MAX - count * elem) b->overflow = 1;
    else b->n += count * elem;
}

/* ---- RNG (rng.c): xoshiro256**, explicit state ---------------------------- */
typedef struct induct__rng {
    uint64_t s[4];
} induct__rng;
void induct__rng_seed(induct__rng *r, uint64_t seed);
/* Seed from a tuple: a counter-based stream id. */
void induct__rng_seed3(induct__rng *r, uint64_t a, uint64_t b, uint64_t c);
uint64_t induct__rng_u64(induct__rng *r);
/* Uniform in [0, n), unbiased (n >= 1). */
uint64_t induct__rng_below(induct__rng *r, uint64_t n);
/* Uniform double in [0, 1). */
double induct__rng_uniform(induct__rng *r);
/* Standard normal (Box–Muller, both values used in order). */
double induct__rng_normal(induct__rng *r);
/* Two independent standard normals from one Box–Muller transform (the cosine and the
 * sine of the same two uniforms; *z0 is what induct__rng_normal() would return). */
void induct__rng_normal_pair(induct__rng *r, double *z0, double *z1);

#endif
