/* Token streams shared by text and token-file datasets: backing stores (owned memory,
 * or a file read with pread(2) and never mapped; little-endian uint16/uint32), the
 * train/validation split into segments, and window reads. */
#ifndef INDUCT_DATASET_STREAM_H
#define INDUCT_DATASET_STREAM_H

#include "data.h"

typedef struct induct__store {
    const unsigned char *data; /* first token of an in-memory store, or NULL for a file */
    uint64_t n;                /* tokens */
    unsigned width;            /* bytes per token: 2 or 4, little-endian */
    int fd;                    /* file store: read with pread(2); -1 for none */
    uint64_t offset;           /* file store: byte offset of the first token */
    char *path;                /* file store: its path, for messages (owned) */
    unsigned char *owned;      /* free target, or NULL */
} induct__store;

typedef struct induct__seg {
    uint32_t store;
    uint64_t off, len; /* in tokens, into the store */
    uint64_t cum;      /* logical start within the split */
} induct__seg;

typedef struct induct__split {
    induct__seg *seg;
    size_t n_seg, cap;
    uint64_t n; /* tokens */
} induct__split;

struct induct__stream {
    induct__store store[2];
    uint32_t n_store;
    induct__split split[2]; /* INDUCT_SPLIT_TRAIN, INDUCT_SPLIT_EVAL */
    uint32_t n_eval_windows;
    int32_t bos; /* the BOS id every document starts with, or -1 (induct_dataset_bos) */
    /* repeated-span curriculum of the train split (induct_dataset_set_repeats): off
     * when rep_fraction is 0 */
    double rep_fraction;
    uint32_t rep_min, rep_max;
};

/* Token i of an in-memory store (validated ids fit int32). */
static inline int32_t induct__store_get(const induct__store *st, uint64_t i) {
    const unsigned char *p = st->data + i * st->width;
    if (st->width == 2) return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8);
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

/* Tokens [first, first + count) of a store into out (int32, ids not checked). A file
 * store is read with pread(2) through a small stack buffer: thread-safe, and nothing of
 * the file becomes resident in the process. INDUCT_EIO if the file cannot be read or is
 * shorter than when it was opened. */
int induct__store_read(const induct__store *st, uint64_t first, uint64_t count, int32_t *out);

int induct__stream_new(struct induct__stream **out);
/* Append [off, off+len) of `store` to a split (merged with the previous segment when
 * contiguous). */
int induct__split_append(induct__split *sp, uint32_t store, uint64_t off, uint64_t len);
/* val_fraction in parts per million (rounded). */
uint64_t induct__ppm(double f);
/* Is unit i (of any count) held out with fraction F ppm? floor((i+1)F/1e6) > floor(iF/1e6). */
int induct__unit_held_out(uint64_t i, uint64_t F);
/* Split store 0 by position: blocks of `block` tokens (0 = one cut at the end).
 * resource limits: `max_bytes` (0 = none) caps the segment tables, whose size is
 * bounded before they are built (ELIMIT). */
int induct__stream_split_position(struct induct__stream *s, uint64_t block, uint64_t F,
                                  uint64_t max_bytes);
/* resource limits: the most bytes the segment tables of `units` units split into
 * contiguous runs take, `held` of them held out (each table grows by doubling). */
uint64_t induct__split_tables_bound(uint64_t units, uint64_t held);
/* Check a split config shared by text and token files. */
int induct__check_split_cfg(double val_fraction, const char *what);

#endif
