/* lib/train, the checkpoints' file format: safetensors (safetensors.c,
 * docs/checkpoint-format.md). Used by checkpoint.c, which maps model and optimizer state
 * onto it; no other wing includes this header. Every failure is INDUCT_EFORMAT (the file),
 * INDUCT_EIO or INDUCT_ENOMEM with a message naming the file ("checkpoint '<path>': ..."). */
#ifndef INDUCT_TRAIN_SAFETENSORS_H
#define INDUCT_TRAIN_SAFETENSORS_H

#include <cjson/cJSON.h>

#include "train.h"

#define INDUCT__ST_NDIM_MAX 8

/* ---- writer --------------------------------------------------------------------- */
/* One F32 tensor to write: its name, its data, and the tensor whose shape and size it has. */
typedef struct induct__st_out {
    char name[INDUCT_NAME_MAX + 16];
    const float *data;
    const induct__tensor *t; /* shape source */
} induct__st_out;
/* Metadata values (strings, as safetensors requires): a string, an unsigned integer, a
 * double as the shortest text that reads back as exactly it. ENOMEM. */
int induct__st_put_str(cJSON *meta, const char *key, const char *val);
int induct__st_put_u64(cJSON *meta, const char *key, uint64_t v);
int induct__st_put_f64(cJSON *meta, const char *key, double v);
/* Write `path` atomically (core/atomic_file.c): the header, `root` (its "__metadata__"
 * already attached) with an entry per tensor in order, padded with spaces so that 8 + N
 * is a multiple of 8, then the tensors' data, little-endian. The entries are attached to
 * `root`, which the caller still frees. */
int induct__st_write(const char *path, cJSON *root, const induct__st_out *ts, size_t n);

/* ---- reader --------------------------------------------------------------------- */
typedef struct induct__st_entry {
    const char *name; /* borrowed from the cJSON tree */
    const char *dtype;
    uint32_t ndim;
    uint64_t shape[INDUCT__ST_NDIM_MAX];
    uint64_t begin, end; /* relative to the data section */
} induct__st_entry;

typedef struct induct__st_file {
    const char *path;
    FILE *f;
    uint64_t data_start, data_size;
    cJSON *root;
    cJSON *meta; /* may be NULL */
    induct__st_entry *e;
    size_t n;
    induct__st_entry **by_name; /* the entries by name (binary search; duplicates adjacent) */
} induct__st_file;
/* Open a safetensors file, or `len` bytes in memory (fuzzing, tests: a read-only stream, so
 * that every check and every read is the file's), and validate its structure, not yet its
 * meaning. On failure nothing stays open. */
int induct__st_open(induct__st_file *sf, const char *path);
int induct__st_open_mem(induct__st_file *sf, const void *data, size_t len);
void induct__st_close(induct__st_file *sf);
/* The entry of a tensor (NULL: none), a metadata value (NULL: none). */
const induct__st_entry *induct__st_find(const induct__st_file *sf, const char *name);
const char *induct__st_meta(const induct__st_file *sf, const char *key);
/* Read an F32 tensor of numel elements into dst (host order); every value must be finite. */
int induct__st_read(induct__st_file *sf, const induct__st_entry *e, float *dst, size_t numel);
/* A metadata value as an integer in [0, max] or a finite number (locale-free); *present
 * says whether the key is there (its absence is no error). EFORMAT for another value. */
int induct__st_get_u64(const induct__st_file *sf, const char *key, uint64_t max, uint64_t *out,
                       int *present);
int induct__st_get_f64(const induct__st_file *sf, const char *key, double *out, int *present);
/* A metadata value that must be one of names[0 .. n): 1 and its index in *dst, 0 when the
 * key is absent, EFORMAT for another value. */
int induct__st_get_choice(const induct__st_file *sf, const char *key, const char *const *names,
                          uint32_t n, uint32_t *dst);

#endif
