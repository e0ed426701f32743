/* lib/data: datasets (repeated random tokens, token arrays, key-value retrieval, byte-level
 * text and token files over one stream layer), the byte-level tokenizer. Private: never
 * installed. Includes core/ only: a dataset yields token ids and knows nothing of models.
 * (The stream layer's own structures are data/stream.h, inside this wing.) */
#ifndef INDUCT_DATA_H
#define INDUCT_DATA_H

#include "core/core.h"

/* ---- datasets --------------------------------------------------------------- */
#define INDUCT__DS_RRT 1
#define INDUCT__DS_TOKENS 2
#define INDUCT__DS_KV 3     /* datasets: key-value retrieval generator */
#define INDUCT__DS_STREAM 4 /* datasets: text and token files (stream.c) */
struct induct__stream;
struct induct_dataset {
    int kind;
    uint32_t d_vocab;
    uint64_t seed;
    induct_rrt_config rrt;
    int32_t *tokens;
    size_t n_tokens;
    /* datasets */
    induct_kv_config kv;           /* INDUCT__DS_KV, normalised (token_hi resolved) */
    struct induct__stream *stream; /* INDUCT__DS_STREAM */
};
/* datasets: the batch of a KV dataset (kv.c); `info` is
 * [B][INDUCT_KV_INFO_COLS] or NULL, `meta` [B] or NULL. */
int induct__kv_batch(const induct_dataset *d, induct__rng *r, uint32_t B, uint32_t T,
                     int32_t *tokens, int32_t *meta, int32_t *info);
/* datasets: windows of a text / token-file dataset (stream.c). */
int induct__stream_batch(const induct_dataset *d, uint32_t split, uint64_t index, uint32_t B,
                         uint32_t T, int32_t *tokens, int32_t *meta);
void induct__stream_free(struct induct__stream *s);
/* The score_pos of a training pass (see induct__pass) on rows of length T of this
 * dataset (0 = every position). */
uint32_t induct__dataset_score_pos(const induct_dataset *d, uint32_t T);

#endif
