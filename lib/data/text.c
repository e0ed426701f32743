/* Byte-level text corpora: one buffer, one file, or a directory tree filtered by
 * suffix (sorted path order), split by position or by document. Tokens are kept
 * as little-endian uint16 in one owned store (ids 0..255, BOS 256). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stream.h"


INDUCT_API int induct_text_config_init(induct_text_config *cfg, size_t size) {
    INDUCT__CONFIG_INIT_CHECK(cfg, size, sizeof(induct_text_config));
    memset(cfg, 0, size);
    cfg->size = size;
    cfg->bos = 0;
    cfg->separator = -1;
    cfg->split = INDUCT_SPLIT_BY_POSITION;
    cfg->n_eval_windows = 1024;
    cfg->val_fraction = 0.1;
    cfg->block_tokens = 65536;
    cfg->seed = 0;
    cfg->max_bytes = 0;
    return INDUCT_OK;
}

static int text_cfg(induct_text_config *c, const induct_text_config *in) {
    induct_text_config_init(c, sizeof *c);
    INDUCT_TRY(induct__struct_in(c, sizeof *c, sizeof *c, in, "induct_text_config"));
    INDUCT_FAIL_IF(c->bos > 1, INDUCT_EINVAL, "text config: bos must be 0 or 1");
    INDUCT_FAIL_IF(c->separator < -1 || c->separator > 255, INDUCT_EINVAL,
                   "text config: separator %d must be a byte 0..255 or -1", c->separator);
    INDUCT_FAIL_IF(c->split > INDUCT_SPLIT_BY_DOCUMENT, INDUCT_EINVAL,
                   "text config: unknown split rule %u", c->split);
    return induct__check_split_cfg(c->val_fraction, "text config");
}

/* The corpus being built: tokens (LE uint16) and document boundaries. */
typedef struct corpus {
    unsigned char *buf; /* 2 bytes a token */
    uint64_t n, cap;
    uint64_t max; /* resource limits: cap on the buffer in bytes (0 = none) */
    uint64_t *doc_off; /* start token of each document; doc_off[n_docs] = n */
    size_t n_docs, doc_cap;
} corpus;

static void corpus_free(corpus *c) {
    free(c->buf);
    free(c->doc_off);
}

static int corpus_reserve(corpus *c, uint64_t more) {
    uint64_t need = c->n + more;
    INDUCT_FAIL_IF(need < c->n || need > (uint64_t)(SIZE_MAX / 4), INDUCT_ELIMIT,
                   "text corpus: %llu tokens overflow size_t", (unsigned long long)need);
    INDUCT_FAIL_IF(c->max && need > c->max / 2, INDUCT_ELIMIT,
                   "text corpus: %llu tokens (2 bytes each) exceed max_bytes %llu",
                   (unsigned long long)need, (unsigned long long)c->max);
    if (need <= c->cap) return INDUCT_OK;
    uint64_t nc = c->cap ? c->cap : 4096;
    while (nc < need) nc = nc > (uint64_t)(SIZE_MAX / 8) ? need : nc * 2;
    /* under a cap, grow into at most half of the room left (the tables need some) */
    if (c->max && nc > need + (c->max / 2 - need) / 2) nc = need + (c->max / 2 - need) / 2;
    unsigned char *b = realloc(c->buf, (size_t)nc * 2);
    INDUCT_FAIL_IF(!b, INDUCT_ENOMEM, "out of memory: text corpus of %llu tokens",
                   (unsigned long long)nc);
    c->buf = b;
    c->cap = nc;
    return INDUCT_OK;
}

static void put(corpus *c, unsigned id) {
    c->buf[2 * c->n] = (unsigned char)(id & 0xff);
    c->buf[2 * c->n + 1] = (unsigned char)(id >> 8);
    c->n++;
}

/* Add one document (skipped when empty). */
static int corpus_add(corpus *c, const induct_text_config *cfg, const unsigned char *bytes,
                      size_t n) {
    if (n == 0) return INDUCT_OK;
    INDUCT_TRY(corpus_reserve(c, (uint64_t)n + cfg->bos + (cfg->separator >= 0)));
    if (c->n_docs + 1 >= c->doc_cap) {
        size_t nc = c->doc_cap ? c->doc_cap * 2 : 64;
        /* resource limits: the document table counts against max_bytes too */
        INDUCT_FAIL_IF(c->max && (nc > (c->max - 2 * c->cap) / sizeof *c->doc_off),
                       INDUCT_ELIMIT, "text corpus: %zu documents exceed max_bytes %llu",
                       c->n_docs + 1, (unsigned long long)c->max);
        uint64_t *o = realloc(c->doc_off, nc * sizeof *o);
        INDUCT_FAIL_IF(!o, INDUCT_ENOMEM, "out of memory: document table");
        c->doc_off = o;
        c->doc_cap = nc;
    }
    c->doc_off[c->n_docs++] = c->n;
    if (cfg->bos) put(c, INDUCT_TEXT_BOS);
    for (size_t i = 0; i < n; i++) put(c, bytes[i]);
    if (cfg->separator >= 0) put(c, (unsigned)cfg->separator);
    c->doc_off[c->n_docs] = c->n;
    return INDUCT_OK;
}

/* Turn a finished corpus into a dataset (takes ownership of the token buffer). */
static int corpus_finish(induct_dataset **out, corpus *c, const induct_text_config *cfg) {
    struct induct__stream *s = NULL;
    INDUCT_TRY(induct__stream_new(&s));
    induct__store *st = &s->store[0];
    st->owned = c->buf;
    st->data = c->buf;
    st->n = c->n;
    st->width = 2;
    c->buf = NULL;
    s->n_store = 1;
    s->n_eval_windows = cfg->n_eval_windows;
    uint64_t F = induct__ppm(cfg->val_fraction);
    int rc = INDUCT_OK;
    /* resource limits: what max_bytes leaves after the corpus and its document
     * table, for the segment tables (1 = nothing left: any table is refused) */
    uint64_t used = 2 * c->cap + (uint64_t)c->doc_cap * sizeof *c->doc_off;
    uint64_t room = !cfg->max_bytes ? 0 : cfg->max_bytes > used ? cfg->max_bytes - used : 1;
    if (cfg->split == INDUCT_SPLIT_BY_POSITION) {
        rc = induct__stream_split_position(s, cfg->block_tokens, F, room);
    } else {
        if (room && induct__split_tables_bound(c->n_docs, c->n_docs) > room)
            rc = induct__fail(INDUCT_ELIMIT,
                              "text corpus: the split tables of %zu documents need more than "
                              "max_bytes allows",
                              c->n_docs);
        for (size_t i = 0; i < c->n_docs && rc == INDUCT_OK; i++) {
            uint32_t which = induct__unit_held_out(i, F) ? INDUCT_SPLIT_EVAL : INDUCT_SPLIT_TRAIN;
            rc = induct__split_append(&s->split[which], 0, c->doc_off[i],
                                      c->doc_off[i + 1] - c->doc_off[i]);
        }
    }
    induct_dataset *d = rc == INDUCT_OK ? calloc(1, sizeof *d) : NULL;
    if (rc == INDUCT_OK && !d) rc = induct__fail(INDUCT_ENOMEM, "out of memory allocating a dataset");
    if (rc != INDUCT_OK) {
        induct__stream_free(s);
        return rc;
    }
    d->kind = INDUCT__DS_STREAM;
    d->d_vocab = cfg->bos ? 257u : 256u;
    s->bos = cfg->bos ? INDUCT_TEXT_BOS : -1;
    d->seed = cfg->seed;
    d->stream = s;
    *out = d;
    return INDUCT_OK;
}

INDUCT_API int induct_dataset_new_text(induct_dataset **out, const void *bytes, size_t n,
                                       const induct_text_config *cfg) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_dataset_new_text: out is NULL");
    *out = NULL;
    induct_text_config c;
    INDUCT_TRY(text_cfg(&c, cfg));
    INDUCT_FAIL_IF(!bytes || n == 0, INDUCT_EINVAL,
                   "induct_dataset_new_text: the text is NULL or empty");
    INDUCT_FAIL_IF(c.split == INDUCT_SPLIT_BY_DOCUMENT, INDUCT_EINVAL,
                   "induct_dataset_new_text: a buffer is one document; a split by document "
                   "needs at least 2 (use induct_dataset_new_text_path on a directory)");
    corpus k = {0};
    k.max = c.max_bytes;
    int rc = corpus_add(&k, &c, bytes, n);
    if (rc == INDUCT_OK) rc = corpus_finish(out, &k, &c);
    corpus_free(&k);
    return rc;
}

/* ---- reading files ------------------------------------------------------------ */

/* Read a regular file whole. `limit` (0 = none): the most bytes it may have, checked
 * from its size before reading and again while reading (resource limits). */
static int read_file(const char *path, unsigned char **data, size_t *n, uint64_t limit) {
    *data = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    INDUCT_FAIL_IF(fd < 0, INDUCT_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return induct__fail(INDUCT_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    /* a device, FIFO or socket could be endless (/dev/zero) or block forever */
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return induct__fail(INDUCT_EIO, "%s: not a regular file or a directory", path);
    }
    if (limit && (uint64_t)sb.st_size > limit) {
        close(fd);
        return induct__fail(INDUCT_ELIMIT, "%s: %llu bytes exceed what max_bytes leaves (%llu)",
                            path, (unsigned long long)sb.st_size, (unsigned long long)limit);
    }
    size_t cap = sb.st_size > 0 ? (size_t)sb.st_size + 1 : 4096, len = 0;
    unsigned char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return induct__fail(INDUCT_ENOMEM, "%s: out of memory reading %zu bytes", path, cap);
    }
    for (;;) {
        if (len == cap) {
            size_t nc = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
            unsigned char *b = nc > cap ? realloc(buf, nc) : NULL;
            if (!b) {
                free(buf);
                close(fd);
                return induct__fail(INDUCT_ENOMEM, "%s: out of memory reading", path);
            }
            buf = b;
            cap = nc;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return induct__fail(INDUCT_EIO, "%s: read error: %s", path, strerror(e));
        }
        if (r == 0) break;
        len += (size_t)r;
        if (limit && len > limit) { /* the file grew while being read */
            free(buf);
            close(fd);
            return induct__fail(INDUCT_ELIMIT, "%s: more than %llu bytes (max_bytes)", path,
                                (unsigned long long)limit);
        }
    }
    close(fd);
    *data = buf;
    *n = len;
    return INDUCT_OK;
}

/* The most bytes a file may have so that its tokens (plus BOS and separator) still fit
 * the corpus cap; 0 = no cap. At least 1 when capped (a full corpus is refused by
 * corpus_reserve with the exact numbers). */
static uint64_t file_budget(const corpus *k) {
    if (!k->max) return 0;
    uint64_t room = k->max / 2 > k->n + 2 ? k->max / 2 - k->n - 2 : 0;
    return room ? room : 1;
}

typedef struct pathlist {
    char **p; /* relative paths */
    size_t n, cap;
} pathlist;

static void pathlist_free(pathlist *l) {
    for (size_t i = 0; i < l->n; i++) free(l->p[i]);
    free(l->p);
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && memcmp(s + a - b, suf, b) == 0;
}

static char *join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *r = malloc(la + lb + 2);
    if (!r) return NULL;
    memcpy(r, a, la);
    size_t o = la;
    if (la > 0 && a[la - 1] != '/') r[o++] = '/';
    memcpy(r + o, b, lb + 1);
    return r;
}

/* Collect regular files under root/rel (rel "" = root), not following links. */
static int walk(const char *root, const char *rel, const char *suffix, pathlist *l, int depth) {
    INDUCT_FAIL_IF(depth > 256, INDUCT_ELIMIT, "%s/%s: directory tree deeper than 256", root, rel);
    char *dir = rel[0] ? join(root, rel) : strdup(root);
    INDUCT_FAIL_IF(!dir, INDUCT_ENOMEM, "out of memory walking %s", root);
    DIR *dh = opendir(dir);
    if (!dh) {
        int e = errno;
        int rc = induct__fail(INDUCT_EIO, "%s: cannot open directory: %s", dir, strerror(e));
        free(dir);
        return rc;
    }
    int rc = INDUCT_OK;
    struct dirent *de;
    while (rc == INDUCT_OK && (errno = 0, de = readdir(dh)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char *r = rel[0] ? join(rel, de->d_name) : strdup(de->d_name);
        char *full = r ? join(root, r) : NULL;
        struct stat sb;
        if (!r || !full) {
            rc = induct__fail(INDUCT_ENOMEM, "out of memory walking %s", root);
        } else if (lstat(full, &sb) != 0) {
            rc = induct__fail(INDUCT_EIO, "%s: cannot stat: %s", full, strerror(errno));
        } else if (S_ISDIR(sb.st_mode)) {
            rc = walk(root, r, suffix, l, depth + 1);
        } else if (S_ISREG(sb.st_mode) && (!suffix || ends_with(de->d_name, suffix))) {
            if (l->n == l->cap) {
                size_t nc = l->cap ? l->cap * 2 : 256;
                char **p = realloc(l->p, nc * sizeof *p);
                if (!p) rc = induct__fail(INDUCT_ENOMEM, "out of memory walking %s", root);
                else {
                    l->p = p;
                    l->cap = nc;
                }
            }
            if (rc == INDUCT_OK) {
                l->p[l->n++] = r;
                r = NULL;
            }
        }
        free(r);
        free(full);
    }
    if (rc == INDUCT_OK && errno != 0 && de == NULL)
        rc = induct__fail(INDUCT_EIO, "%s: cannot read directory: %s", dir, strerror(errno));
    closedir(dh);
    free(dir);
    return rc;
}

static int cmp_path(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

INDUCT_API int induct_dataset_new_text_path(induct_dataset **out, const char *path,
                                            const char *suffix, const induct_text_config *cfg) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_dataset_new_text_path: out is NULL");
    *out = NULL;
    INDUCT_FAIL_IF(!path, INDUCT_EINVAL, "induct_dataset_new_text_path: path is NULL");
    induct_text_config c;
    INDUCT_TRY(text_cfg(&c, cfg));
    if (suffix && !suffix[0]) suffix = NULL;
    struct stat sb;
    INDUCT_FAIL_IF(stat(path, &sb) != 0, INDUCT_EIO, "%s: cannot stat: %s", path,
                   strerror(errno));
    corpus k = {0};
    k.max = c.max_bytes;
    int rc = INDUCT_OK;
    if (S_ISDIR(sb.st_mode)) {
        pathlist l = {0};
        rc = walk(path, "", suffix, &l, 0);
        /* resource limits: refuse a tree whose files cannot fit before reading any */
        uint64_t total = 0;
        for (size_t i = 0; rc == INDUCT_OK && k.max && i < l.n; i++) {
            char *full = join(path, l.p[i]);
            struct stat fb;
            if (full && stat(full, &fb) == 0 && S_ISREG(fb.st_mode))
                total += (uint64_t)fb.st_size + 2u;
            free(full);
            if (total > k.max / 2)
                rc = induct__fail(INDUCT_ELIMIT,
                                  "%s: the files under the directory need more than max_bytes "
                                  "%llu (2 bytes a token)",
                                  path, (unsigned long long)k.max);
        }
        if (rc == INDUCT_OK && l.n > 1) qsort(l.p, l.n, sizeof *l.p, cmp_path);
        for (size_t i = 0; i < l.n && rc == INDUCT_OK; i++) {
            char *full = join(path, l.p[i]);
            unsigned char *data = NULL;
            size_t n = 0;
            rc = full ? read_file(full, &data, &n, file_budget(&k))
                      : induct__fail(INDUCT_ENOMEM, "out of memory reading %s", path);
            if (rc == INDUCT_OK) rc = corpus_add(&k, &c, data, n);
            free(data);
            free(full);
        }
        if (rc == INDUCT_OK && k.n == 0)
            rc = induct__fail(INDUCT_EFORMAT,
                              "%s: empty input: no non-empty file%s%s under the directory "
                              "(%zu matching)",
                              path, suffix ? " ending in " : "", suffix ? suffix : "", l.n);
        pathlist_free(&l);
    } else {
        unsigned char *data = NULL;
        size_t n = 0;
        rc = read_file(path, &data, &n, file_budget(&k));
        if (rc == INDUCT_OK && n == 0)
            rc = induct__fail(INDUCT_EFORMAT, "%s: empty input: the file has no bytes", path);
        if (rc == INDUCT_OK) rc = corpus_add(&k, &c, data, n);
        free(data);
    }
    if (rc == INDUCT_OK && c.split == INDUCT_SPLIT_BY_DOCUMENT && k.n_docs < 2)
        rc = induct__fail(INDUCT_EINVAL,
                          "%s: a split by document needs at least 2 non-empty documents, found %zu",
                          path, k.n_docs);
    if (rc == INDUCT_OK) rc = corpus_finish(out, &k, &c);
    corpus_free(&k);
    return rc;
}
