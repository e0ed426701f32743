#define _XOPEN_SOURCE 700 /* pread */
/* Token files: raw little-endian uint16/uint32 (nanoGPT) and llm.c's headered
 * format. Read with pread(2) through small buffers, never mapped, so that the file
 * does not become part of the process's resident memory; validated in one pass when
 * opened; written atomically (induct__write_atomic: a temporary file in the same
 * directory, fsync, rename). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stream.h"

#define LLMC_HEADER_INTS 256
#define LLMC_HEADER_BYTES (LLMC_HEADER_INTS * 4)

INDUCT_API int induct_token_file_config_init(induct_token_file_config *cfg, size_t size) {
    INDUCT__CONFIG_INIT_CHECK(cfg, size, sizeof(induct_token_file_config));
    memset(cfg, 0, size);
    cfg->size = size;
    cfg->format = INDUCT_TOKFILE_U16;
    cfg->d_vocab = 0;
    cfg->n_eval_windows = 1024;
    cfg->val_fraction = 0.1;
    cfg->block_tokens = 65536;
    cfg->resident_limit = (uint64_t)64 << 20;
    cfg->seed = 0;
    cfg->max_bytes = 0;
    return INDUCT_OK;
}

/* Open, check and scan one token file into `st` (which keeps the descriptor). On
 * success *max_id is the largest id. d_vocab 0 = no bound other than INT32_MAX. */
static int store_open(induct__store *st, const char *path, uint32_t format, uint32_t d_vocab,
                      uint32_t *max_id) {
    memset(st, 0, sizeof *st);
    st->fd = -1;
    INDUCT_FAIL_IF(format > INDUCT_TOKFILE_LLMC, INDUCT_EINVAL,
                   "%s: unknown token-file format %u", path, format);
    st->path = strdup(path);
    INDUCT_FAIL_IF(!st->path, INDUCT_ENOMEM, "%s: out of memory", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        free(st->path);
        st->path = NULL;
        return induct__fail(INDUCT_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    st->fd = fd;
    int rc = INDUCT_OK;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int e = errno;
        rc = induct__fail(INDUCT_EIO, "%s: %s", path, e ? strerror(e) : "not a regular file");
        goto fail;
    }
    uint64_t size = (uint64_t)sb.st_size;
    unsigned width = format == INDUCT_TOKFILE_U32 ? 4 : 2;
    uint64_t n = 0;
    st->width = width;
    if (format == INDUCT_TOKFILE_LLMC) {
        if (size < LLMC_HEADER_BYTES) {
            rc = induct__fail(INDUCT_EFORMAT,
                              "%s: truncated: %llu bytes cannot hold the 1024-byte llm.c header",
                              path, (unsigned long long)size);
            goto fail;
        }
        /* the first three ints of the header, read as 2 x uint16 tokens each */
        int32_t h16[6];
        st->n = 6;
        if ((rc = induct__store_read(st, 0, 6, h16)) != INDUCT_OK) goto fail;
        uint32_t u[3];
        for (int k = 0; k < 3; k++) u[k] = (uint32_t)h16[2 * k] | (uint32_t)h16[2 * k + 1] << 16;
        int32_t magic = (int32_t)u[0], version = (int32_t)u[1], count = (int32_t)u[2];
        if (magic != INDUCT_LLMC_MAGIC)
            rc = induct__fail(INDUCT_EFORMAT,
                              "%s: bad magic %d (llm.c token files start with %d)", path, magic,
                              INDUCT_LLMC_MAGIC);
        else if (version != INDUCT_LLMC_VERSION)
            rc = induct__fail(INDUCT_EFORMAT,
                              "%s: unsupported llm.c token-file version %d (this library reads "
                              "version %d: uint16 tokens)",
                              path, version, INDUCT_LLMC_VERSION);
        else if (count < 0)
            rc = induct__fail(INDUCT_EFORMAT, "%s: negative token count %d in the header", path,
                              count);
        else if (count == 0)
            rc = induct__fail(INDUCT_EFORMAT, "%s: zero tokens: the header's token count is 0",
                              path);
        else {
            uint64_t want = LLMC_HEADER_BYTES + 2 * (uint64_t)count;
            if (size < want)
                rc = induct__fail(INDUCT_EFORMAT,
                                  "%s: truncated: the header says %d tokens (%llu bytes) but the "
                                  "file has %llu bytes",
                                  path, count, (unsigned long long)want, (unsigned long long)size);
            else if (size > want)
                rc = induct__fail(INDUCT_EFORMAT,
                                  "%s: size mismatch: the header says %d tokens (%llu bytes) but "
                                  "the file has %llu bytes",
                                  path, count, (unsigned long long)want, (unsigned long long)size);
            n = (uint64_t)count;
        }
    } else if (size == 0) {
        rc = induct__fail(INDUCT_EFORMAT, "%s: zero tokens: the file is empty", path);
    } else if (size % width != 0) {
        rc = induct__fail(INDUCT_EFORMAT,
                          "%s: truncated: %llu bytes is not a whole number of %u-byte tokens",
                          path, (unsigned long long)size, width);
    } else {
        n = size / width;
    }
    if (rc != INDUCT_OK) goto fail;
    st->offset = format == INDUCT_TOKFILE_LLMC ? LLMC_HEADER_BYTES : 0;
    st->n = n;
    /* One pass over every id, in chunks of 64 Ki tokens. */
    enum { CHUNK = 1 << 16 };
    int32_t *buf = malloc(CHUNK * sizeof *buf);
    if (!buf) {
        rc = induct__fail(INDUCT_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    uint32_t mx = 0;
    for (uint64_t i = 0; i < n && rc == INDUCT_OK; i += CHUNK) {
        uint64_t k = n - i < CHUNK ? n - i : CHUNK;
        if ((rc = induct__store_read(st, i, k, buf)) != INDUCT_OK) break;
        for (uint64_t j = 0; j < k; j++) {
            uint32_t id = (uint32_t)buf[j];
            if (width == 4 && id > INT32_MAX) {
                rc = induct__fail(INDUCT_ERANGE, "%s: token %llu is %u, above INT32_MAX", path,
                                  (unsigned long long)(i + j), id);
                break;
            }
            if (d_vocab && id >= d_vocab) {
                rc = induct__fail(INDUCT_ERANGE, "%s: token %llu is %u, not below d_vocab %u",
                                  path, (unsigned long long)(i + j), id, d_vocab);
                break;
            }
            if (id > mx) mx = id;
        }
    }
    free(buf);
    if (rc != INDUCT_OK) goto fail;
    *max_id = mx;
    return INDUCT_OK;
fail:
    close(fd);
    free(st->path);
    memset(st, 0, sizeof *st);
    st->fd = -1;
    return rc;
}

INDUCT_API int induct_dataset_new_token_file(induct_dataset **out, const char *path,
                                             const char *val_path,
                                             const induct_token_file_config *cfg) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_dataset_new_token_file: out is NULL");
    *out = NULL;
    INDUCT_FAIL_IF(!path, INDUCT_EINVAL, "induct_dataset_new_token_file: path is NULL");
    induct_token_file_config c;
    induct_token_file_config_init(&c, sizeof c);
    INDUCT_TRY(induct__struct_in(&c, sizeof c, sizeof c, cfg, "induct_token_file_config"));
    INDUCT_FAIL_IF(c.format > INDUCT_TOKFILE_LLMC, INDUCT_EINVAL,
                   "token-file config: unknown format %u", c.format);
    if (!val_path) INDUCT_TRY(induct__check_split_cfg(c.val_fraction, "token-file config"));
    struct induct__stream *s = NULL;
    INDUCT_TRY(induct__stream_new(&s));
    uint32_t mx = 0, mx2 = 0;
    int rc = store_open(&s->store[0], path, c.format, c.d_vocab, &mx);
    if (rc == INDUCT_OK) s->n_store = 1;
    if (rc == INDUCT_OK && val_path) {
        rc = store_open(&s->store[1], val_path, c.format, c.d_vocab, &mx2);
        if (rc == INDUCT_OK) s->n_store = 2;
    }
    s->n_eval_windows = c.n_eval_windows;
    if (rc == INDUCT_OK) {
        if (val_path) {
            rc = induct__split_append(&s->split[INDUCT_SPLIT_TRAIN], 0, 0, s->store[0].n);
            if (rc == INDUCT_OK)
                rc = induct__split_append(&s->split[INDUCT_SPLIT_EVAL], 1, 0, s->store[1].n);
        } else {
            rc = induct__stream_split_position(s, c.block_tokens, induct__ppm(c.val_fraction),
                                               c.max_bytes);
        }
    }
    induct_dataset *d = rc == INDUCT_OK ? calloc(1, sizeof *d) : NULL;
    if (rc == INDUCT_OK && !d) rc = induct__fail(INDUCT_ENOMEM, "out of memory allocating a dataset");
    if (rc != INDUCT_OK) {
        induct__stream_free(s);
        return rc;
    }
    d->kind = INDUCT__DS_STREAM;
    d->d_vocab = c.d_vocab ? c.d_vocab : (mx > mx2 ? mx : mx2) + 1;
    d->seed = c.seed;
    d->stream = s;
    *out = d;
    return INDUCT_OK;
}

INDUCT_API int induct_token_file_read(const char *path, uint32_t format, uint32_t d_vocab,
                                      int32_t *out, size_t out_cap, size_t *out_len) {
    INDUCT_FAIL_IF(!path, INDUCT_EINVAL, "induct_token_file_read: path is NULL");
    induct__store st;
    uint32_t mx;
    INDUCT_TRY(store_open(&st, path, format, d_vocab, &mx));
    int rc = INDUCT_OK;
    if (st.n > SIZE_MAX) rc = induct__fail(INDUCT_ELIMIT, "%s: too many tokens", path);
    if (rc == INDUCT_OK && out_len) *out_len = (size_t)st.n;
    if (rc == INDUCT_OK && (!out || out_cap < st.n))
        rc = induct__fail(INDUCT_EBUFSIZE, "%s: %llu tokens, buffer holds %zu", path,
                          (unsigned long long)st.n, out ? out_cap : 0);
    if (rc == INDUCT_OK) rc = induct__store_read(&st, 0, st.n, out);
    close(st.fd);
    free(st.path);
    return rc;
}

/* ---- writing ----------------------------------------------------------------------- */

/* What induct_token_file_write writes: the llm.c header if any, then the ids in
 * little-endian order, `width` bytes each. */
typedef struct tok_content {
    uint32_t format;
    unsigned width;
    const int32_t *tokens;
    size_t n;
} tok_content;

static int write_tokens(FILE *f, void *user) {
    const tok_content *c = user;
    if (c->format == INDUCT_TOKFILE_LLMC) {
        unsigned char h[LLMC_HEADER_BYTES] = {0};
        int32_t vals[3] = {INDUCT_LLMC_MAGIC, INDUCT_LLMC_VERSION, (int32_t)c->n};
        for (int k = 0; k < 3; k++)
            for (int b = 0; b < 4; b++) h[4 * k + b] = (unsigned char)((uint32_t)vals[k] >> (8 * b));
        if (fwrite(h, 1, sizeof h, f) != sizeof h) return -1;
    }
    unsigned char buf[1 << 16];
    size_t per = sizeof buf / c->width;
    for (size_t i = 0; i < c->n; i += per) {
        size_t e = c->n - i < per ? c->n : i + per, o = 0;
        for (size_t j = i; j < e; j++)
            for (unsigned b = 0; b < c->width; b++)
                buf[o++] = (unsigned char)((uint32_t)c->tokens[j] >> (8 * b));
        if (fwrite(buf, 1, o, f) != o) return -1;
    }
    return 0;
}

INDUCT_API int induct_token_file_write(const char *path, uint32_t format, const int32_t *tokens,
                                       size_t n) {
    INDUCT_FAIL_IF(!path || !tokens, INDUCT_EINVAL, "induct_token_file_write: NULL argument");
    INDUCT_FAIL_IF(n == 0, INDUCT_EINVAL,
                   "induct_token_file_write: %s: zero tokens (a token file holds at least one)",
                   path);
    INDUCT_FAIL_IF(format > INDUCT_TOKFILE_LLMC, INDUCT_EINVAL,
                   "induct_token_file_write: unknown format %u", format);
    INDUCT_FAIL_IF(format == INDUCT_TOKFILE_LLMC && n > INT32_MAX, INDUCT_ELIMIT,
                   "induct_token_file_write: %s: %zu tokens exceed llm.c's int32 count", path, n);
    int64_t hi = format == INDUCT_TOKFILE_U32 ? INT32_MAX : 65535;
    for (size_t i = 0; i < n; i++)
        INDUCT_FAIL_IF(tokens[i] < 0 || tokens[i] > hi, INDUCT_ERANGE,
                       "induct_token_file_write: %s: token %zu is %d, which does not fit %s", path,
                       i, tokens[i], format == INDUCT_TOKFILE_U32 ? "uint32 ids 0..INT32_MAX"
                                                                  : "uint16 (0..65535)");
    tok_content c = {format, format == INDUCT_TOKFILE_U32 ? 4u : 2u, tokens, n};
    return induct__write_atomic(path, "induct_token_file_write", write_tokens, &c);
}
