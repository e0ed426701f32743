/* The safetensors format (docs/checkpoint-format.md): u64 LE header length N | N bytes of
 * JSON (cJSON) | raw LE data. The writer builds the header for a list of F32 tensors with
 * the caller's __metadata__ and writes the file atomically; the reader validates the whole
 * header (dtypes, shapes, offsets, coverage of the data section, the format version) before
 * any tensor is read. What the tensors and the metadata mean for a model or an optimizer is
 * checkpoint.c's. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/numtext.h"
#include "safetensors.h"

/* The safetensors reference reader allows 100 MB; cJSON's parse tree can take 40 times
 * the header's size (a header of "[0,0,…]"), so libinduct stops at 16 MiB (about
 * 180 000 tensor entries): a hostile header costs at most ~640 MiB while parsed. */
#define ST_HEADER_MAX ((uint64_t)16 << 20)

/* ---- small helpers ------------------------------------------------------------ */

static int host_is_le(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static void bswap32(void *p, size_t n) {
    unsigned char *b = p;
    for (size_t i = 0; i < n; i++, b += 4) {
        unsigned char t = b[0];
        b[0] = b[3];
        b[3] = t;
        t = b[1];
        b[1] = b[2];
        b[2] = t;
    }
}

int induct__st_put_str(cJSON *meta, const char *key, const char *val) {
    INDUCT_FAIL_IF(!cJSON_AddStringToObject(meta, key, val), INDUCT_ENOMEM,
                   "checkpoint: out of memory building the header");
    return INDUCT_OK;
}
int induct__st_put_u64(cJSON *meta, const char *key, uint64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    return induct__st_put_str(meta, key, b);
}
int induct__st_put_f64(cJSON *meta, const char *key, double v) {
    char b[40];
    induct__fmt_double(b, sizeof b, v, 0); /* reads back bit-identically */
    return induct__st_put_str(meta, key, b);
}

/* Build the header text for `n` tensors: JSON padded with spaces so that 8 + N is a
 * multiple of 8. Returns a malloc'ed string and its padded length. */
static int build_header(cJSON *root, const induct__st_out *ts, size_t n, char **out,
                        size_t *len_out) {
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const induct__tensor *t = ts[i].t;
        uint64_t end = off + (uint64_t)t->numel * 4u;
        /* each item is attached to `root` as soon as it exists, so the caller's
         * cJSON_Delete(root) frees everything on failure */
        cJSON *e = cJSON_CreateObject();
        int ok = e && cJSON_AddItemToObject(root, ts[i].name, e);
        if (!ok) cJSON_Delete(e);
        ok = ok && cJSON_AddStringToObject(e, "dtype", "F32");
        cJSON *shape = ok ? cJSON_AddArrayToObject(e, "shape") : NULL;
        for (uint32_t d = 0; shape && d < t->ndim; d++) {
            cJSON *x = cJSON_CreateNumber((double)t->shape[d]);
            if (!x || !cJSON_AddItemToArray(shape, x)) {
                cJSON_Delete(x);
                shape = NULL;
            }
        }
        cJSON *offs = shape ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
        for (int j = 0; offs && j < 2; j++) {
            cJSON *x = cJSON_CreateNumber((double)(j ? end : off));
            if (!x || !cJSON_AddItemToArray(offs, x)) {
                cJSON_Delete(x);
                offs = NULL;
            }
        }
        INDUCT_FAIL_IF(!offs, INDUCT_ENOMEM, "checkpoint: out of memory building the header");
        off = end;
    }
    char *txt = cJSON_PrintUnformatted(root);
    INDUCT_FAIL_IF(!txt, INDUCT_ENOMEM, "checkpoint: out of memory printing the header");
    size_t len = strlen(txt), padded = (len + 7u) & ~(size_t)7u; /* 8 + padded ≡ 0 (mod 8) */
    char *buf = realloc(txt, padded + 1);
    if (!buf) {
        free(txt);
        return induct__fail(INDUCT_ENOMEM, "checkpoint: out of memory printing the header");
    }
    memset(buf + len, ' ', padded - len);
    buf[padded] = '\0';
    *out = buf;
    *len_out = padded;
    return INDUCT_OK;
}

/* What induct__st_write writes: the length-prefixed header and the tensors' data. */
typedef struct st_content {
    const char *header;
    size_t hlen;
    const induct__st_out *ts;
    size_t n;
} st_content;

static int write_content(FILE *f, void *user) {
    const st_content *c = user;
    int le = host_is_le();
    unsigned char lenb[8];
    for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)c->hlen >> (8 * i));
    if (fwrite(lenb, 1, 8, f) != 8 || fwrite(c->header, 1, c->hlen, f) != c->hlen) return -1;
    float chunk[1024];
    for (size_t i = 0; i < c->n; i++) {
        const float *p = c->ts[i].data;
        size_t cnt = c->ts[i].t->numel;
        if (le) {
            if (fwrite(p, sizeof(float), cnt, f) != cnt) return -1;
            continue;
        }
        for (size_t j = 0; j < cnt; j += 1024) {
            size_t k = cnt - j < 1024 ? cnt - j : 1024;
            memcpy(chunk, p + j, k * sizeof(float));
            bswap32(chunk, k);
            if (fwrite(chunk, sizeof(float), k, f) != k) return -1;
        }
    }
    return 0;
}

int induct__st_write(const char *path, cJSON *root, const induct__st_out *ts, size_t n) {
    char *header = NULL;
    size_t hlen = 0;
    int rc = build_header(root, ts, n, &header, &hlen);
    if (rc == INDUCT_OK) {
        st_content c = {header, hlen, ts, n};
        rc = induct__write_atomic(path, "checkpoint", write_content, &c);
    }
    free(header);
    return rc;
}

void induct__st_close(induct__st_file *sf) {
    if (sf->f) fclose(sf->f);
    cJSON_Delete(sf->root);
    free(sf->e);
    free(sf->by_name);
    memset(sf, 0, sizeof *sf);
}

static size_t dtype_size(const char *d) {
    static const struct {
        const char *name;
        size_t size;
    } T[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},     {"I32", 4},
             {"I16", 2}, {"I8", 1},  {"U64", 8}, {"U32", 4},  {"U16", 2},     {"U8", 1},
             {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (!strcmp(T[i].name, d)) return T[i].size;
    return 0;
}

/* A JSON number that is a non-negative integer no larger than 2^53. */
static int json_u64(const cJSON *x, uint64_t *out) {
    if (!cJSON_IsNumber(x)) return 0;
    double v = x->valuedouble;
    if (!(v >= 0.0) || v > 9007199254740992.0 || v != floor(v)) return 0;
    *out = (uint64_t)v;
    return 1;
}

static int cmp_begin(const void *a, const void *b) {
    const induct__st_entry *x = *(const induct__st_entry *const *)a;
    const induct__st_entry *y = *(const induct__st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

#define FMT_FAIL(...) induct__fail(INDUCT_EFORMAT, __VA_ARGS__)

/* Parse and validate one header entry. */
static int parse_entry(const induct__st_file *sf, const cJSON *item, induct__st_entry *e) {
    const char *nm = item->string;
    e->name = nm;
    INDUCT_FAIL_IF(!cJSON_IsObject(item), INDUCT_EFORMAT,
                   "checkpoint '%s': tensor '%s': header entry is not a JSON object", sf->path,
                   nm);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    INDUCT_FAIL_IF(!cJSON_IsString(dt), INDUCT_EFORMAT,
                   "checkpoint '%s': tensor '%s': missing or non-string \"dtype\"", sf->path, nm);
    e->dtype = dt->valuestring;
    size_t esz = dtype_size(e->dtype);
    INDUCT_FAIL_IF(esz == 0, INDUCT_EFORMAT, "checkpoint '%s': tensor '%s': unknown dtype \"%s\"",
                   sf->path, nm, e->dtype);
    INDUCT_FAIL_IF(!cJSON_IsArray(sh), INDUCT_EFORMAT,
                   "checkpoint '%s': tensor '%s': missing or non-array \"shape\"", sf->path, nm);
    int nd = cJSON_GetArraySize(sh);
    INDUCT_FAIL_IF(nd > INDUCT__ST_NDIM_MAX, INDUCT_EFORMAT,
                   "checkpoint '%s': tensor '%s': %d dimensions (at most %d supported)", sf->path,
                   nm, nd, INDUCT__ST_NDIM_MAX);
    e->ndim = (uint32_t)nd;
    uint64_t bytes = esz;
    int i = 0;
    for (const cJSON *d = sh->child; d; d = d->next, i++) {
        INDUCT_FAIL_IF(!json_u64(d, &e->shape[i]), INDUCT_EFORMAT,
                       "checkpoint '%s': tensor '%s': shape[%d] is not a non-negative integer",
                       sf->path, nm, i);
        INDUCT_FAIL_IF(e->shape[i] != 0 && bytes > UINT64_MAX / e->shape[i], INDUCT_EFORMAT,
                       "checkpoint '%s': tensor '%s': shape overflows", sf->path, nm);
        bytes *= e->shape[i];
    }
    INDUCT_FAIL_IF(!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 ||
                       !json_u64(of->child, &e->begin) || !json_u64(of->child->next, &e->end),
                   INDUCT_EFORMAT,
                   "checkpoint '%s': tensor '%s': \"data_offsets\" must be two non-negative "
                   "integers",
                   sf->path, nm);
    INDUCT_FAIL_IF(e->end < e->begin, INDUCT_EFORMAT,
                   "checkpoint '%s': tensor '%s': data_offsets [%llu, %llu] end before they begin",
                   sf->path, nm, (unsigned long long)e->begin, (unsigned long long)e->end);
    INDUCT_FAIL_IF(e->end > sf->data_size, INDUCT_EFORMAT,
                   "checkpoint '%s': tensor '%s': data_offsets [%llu, %llu] lie beyond the data "
                   "section of %llu bytes (file too short or offsets out of range)",
                   sf->path, nm, (unsigned long long)e->begin, (unsigned long long)e->end,
                   (unsigned long long)sf->data_size);
    INDUCT_FAIL_IF(e->end - e->begin != bytes, INDUCT_EFORMAT,
                   "checkpoint '%s': tensor '%s': data_offsets span %llu bytes but dtype %s and "
                   "its shape need %llu",
                   sf->path, nm, (unsigned long long)(e->end - e->begin), e->dtype,
                   (unsigned long long)bytes);
    return INDUCT_OK;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const induct__st_entry *const *)a)->name,
                  (*(const induct__st_entry *const *)b)->name);
}

/* Validate the structure (not yet the meaning) of the safetensors stream sf->f of
 * `fsize` bytes, positioned at its start. Closes sf on failure. */
static int st_parse(induct__st_file *sf, uint64_t fsize) {
    const char *path = sf->path;
    unsigned char lenb[8];
    if (fsize < 8 || fread(lenb, 1, 8, sf->f) != 8) {
        induct__st_close(sf);
        return induct__fail(INDUCT_EFORMAT,
                            "checkpoint '%s': truncated: %llu bytes cannot hold the 8-byte header "
                            "length",
                            path, (unsigned long long)fsize);
    }
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)lenb[i] << (8 * i);
    if (hlen > fsize - 8) {
        induct__st_close(sf);
        return induct__fail(INDUCT_EFORMAT,
                            "checkpoint '%s': header length %llu goes beyond the end of the file "
                            "(%llu bytes after the length field)",
                            path, (unsigned long long)hlen, (unsigned long long)(fsize - 8));
    }
    if (hlen < 2 || hlen > ST_HEADER_MAX) {
        induct__st_close(sf);
        return induct__fail(INDUCT_EFORMAT,
                            "checkpoint '%s': header length %llu is outside [2, %llu]", path,
                            (unsigned long long)hlen, (unsigned long long)ST_HEADER_MAX);
    }
    sf->data_start = 8 + hlen;
    sf->data_size = fsize - sf->data_start;
    char *h = malloc((size_t)hlen + 1);
    if (!h) {
        induct__st_close(sf);
        return induct__fail(INDUCT_ENOMEM, "checkpoint '%s': out of memory for the header", path);
    }
    if (fread(h, 1, (size_t)hlen, sf->f) != hlen) {
        free(h);
        induct__st_close(sf);
        return induct__fail(INDUCT_EIO, "checkpoint '%s': cannot read the header", path);
    }
    h[hlen] = '\0';
    const char *end = NULL; /* cJSON sets it to the error position on failure */
    sf->root = cJSON_ParseWithLengthOpts(h, (size_t)hlen, &end, 0);
    int bad_json = !sf->root;
    size_t err_at = (end && end >= h) ? (size_t)(end - h) : 0;
    if (!bad_json) /* only whitespace may follow the object */
        for (const char *p = end; p < h + hlen; p++)
            if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
                bad_json = 1;
                err_at = (size_t)(p - h);
                break;
            }
    free(h);
    if (bad_json || !cJSON_IsObject(sf->root)) {
        induct__st_close(sf);
        if (bad_json)
            return induct__fail(INDUCT_EFORMAT,
                                "checkpoint '%s': the header is not valid JSON (near byte %zu)",
                                path, err_at);
        return induct__fail(INDUCT_EFORMAT, "checkpoint '%s': the header is not a JSON object",
                            path);
    }
    size_t n = 0;
    for (cJSON *it = sf->root->child; it; it = it->next) n++;
    sf->e = calloc(n ? n : 1, sizeof *sf->e);
    induct__st_entry **order = calloc(n ? n : 1, sizeof *order);
    if (!sf->e || !order) {
        free(order);
        induct__st_close(sf);
        return induct__fail(INDUCT_ENOMEM, "checkpoint '%s': out of memory", path);
    }
    int rc = INDUCT_OK;
    for (cJSON *it = sf->root->child; it && rc == INDUCT_OK; it = it->next) {
        if (!it->string) {
            rc = FMT_FAIL("checkpoint '%s': a header entry has no name", path);
        } else if (!strcmp(it->string, "__metadata__")) {
            if (sf->meta) rc = FMT_FAIL("checkpoint '%s': two \"__metadata__\" entries", path);
            else if (!cJSON_IsObject(it))
                rc = FMT_FAIL("checkpoint '%s': \"__metadata__\" is not an object", path);
            sf->meta = it;
            for (cJSON *kv = it->child; kv && rc == INDUCT_OK; kv = kv->next)
                if (!cJSON_IsString(kv))
                    rc = FMT_FAIL("checkpoint '%s': __metadata__ value of \"%s\" is not a "
                                      "string",
                                  path, kv->string ? kv->string : "");
        } else {
            rc = parse_entry(sf, it, &sf->e[sf->n]);
            if (rc == INDUCT_OK) sf->n++;
        }
    }
    /* names: sorted once (O(n log n), also for hostile headers of many entries);
     * a duplicate is then a neighbour */
    if (rc == INDUCT_OK) {
        sf->by_name = calloc(sf->n ? sf->n : 1, sizeof *sf->by_name);
        if (!sf->by_name) rc = induct__fail(INDUCT_ENOMEM, "checkpoint '%s': out of memory", path);
    }
    if (rc == INDUCT_OK) {
        for (size_t i = 0; i < sf->n; i++) sf->by_name[i] = &sf->e[i];
        qsort(sf->by_name, sf->n, sizeof *sf->by_name, cmp_name);
        for (size_t i = 1; i < sf->n && rc == INDUCT_OK; i++)
            if (!strcmp(sf->by_name[i - 1]->name, sf->by_name[i]->name))
                rc = FMT_FAIL("checkpoint '%s': tensor '%s' appears twice", path,
                              sf->by_name[i]->name);
    }
    /* coverage: sorted by offset, the entries tile [0, data_size) exactly */
    if (rc == INDUCT_OK) {
        for (size_t i = 0; i < sf->n; i++) order[i] = &sf->e[i];
        qsort(order, sf->n, sizeof *order, cmp_begin);
        uint64_t pos = 0;
        const char *prev = NULL;
        for (size_t i = 0; i < sf->n && rc == INDUCT_OK; i++) {
            const induct__st_entry *e = order[i];
            if (e->begin < pos)
                rc = FMT_FAIL("checkpoint '%s': tensors '%s' and '%s' overlap (bytes %llu.. of "
                                  "the data section)",
                              path, prev, e->name, (unsigned long long)e->begin);
            else if (e->begin > pos)
                rc = FMT_FAIL("checkpoint '%s': bytes %llu..%llu of the data section belong "
                                  "to no tensor (hole before '%s')",
                              path, (unsigned long long)pos, (unsigned long long)e->begin,
                              e->name);
            pos = e->end;
            prev = e->name;
        }
        if (rc == INDUCT_OK && pos != sf->data_size)
            rc = FMT_FAIL("checkpoint '%s': the data section has %llu bytes but the tensors "
                              "cover %llu (trailing bytes)",
                          path, (unsigned long long)sf->data_size, (unsigned long long)pos);
    }
    free(order);
    if (rc == INDUCT_OK && sf->meta) {
        const cJSON *fv = cJSON_GetObjectItemCaseSensitive(sf->meta, "format_version");
        if (fv) {
            char *endp = NULL;
            errno = 0;
            long v = strtol(fv->valuestring, &endp, 10);
            if (endp == fv->valuestring || *endp || errno || v < 1)
                rc = FMT_FAIL("checkpoint '%s': __metadata__ format_version \"%s\" is not a "
                                  "positive integer",
                              path, fv->valuestring);
            else if (v > INDUCT_CHECKPOINT_FORMAT_VERSION)
                rc = FMT_FAIL("checkpoint '%s': format version %ld is newer than this library "
                                  "reads (%d, libinduct %s); upgrade libinduct",
                              path, v, INDUCT_CHECKPOINT_FORMAT_VERSION, INDUCT_VERSION_STRING);
        }
    }
    if (rc != INDUCT_OK) induct__st_close(sf);
    return rc;
}

/* Open a safetensors file and validate its structure (not yet its meaning). */
int induct__st_open(induct__st_file *sf, const char *path) {
    char eb[128];
    memset(sf, 0, sizeof *sf);
    sf->path = path;
    sf->f = fopen(path, "rb");
    if (!sf->f) {
        int e = errno;
        return induct__fail(INDUCT_EIO, "checkpoint '%s': cannot open: %s", path,
                            induct__errstr(e, eb, sizeof eb));
    }
    struct stat st;
    if (fstat(fileno(sf->f), &st) != 0 || !S_ISREG(st.st_mode)) {
        induct__st_close(sf);
        return induct__fail(INDUCT_EIO, "checkpoint '%s': not a regular file", path);
    }
    return st_parse(sf, (uint64_t)st.st_size);
}

/* The same over `len` bytes in memory (fuzzing, tests): a read-only stream, so that
 * every check and every read is the file path's. */
int induct__st_open_mem(induct__st_file *sf, const void *data, size_t len) {
    memset(sf, 0, sizeof *sf);
    sf->path = "<memory>";
    INDUCT_FAIL_IF(!data && len, INDUCT_EINVAL, "checkpoint: NULL buffer");
    if (len) { /* st_parse refuses fewer than 8 bytes before reading */
        sf->f = fmemopen((void *)(uintptr_t)data, len, "rb");
        INDUCT_FAIL_IF(!sf->f, INDUCT_ENOMEM, "checkpoint: cannot open a memory stream");
    }
    return st_parse(sf, (uint64_t)len);
}

const induct__st_entry *induct__st_find(const induct__st_file *sf, const char *name) {
    size_t lo = 0, hi = sf->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(sf->by_name[mid]->name, name);
        if (c == 0) return sf->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

const char *induct__st_meta(const induct__st_file *sf, const char *key) {
    if (!sf->meta) return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(sf->meta, key);
    return v ? v->valuestring : NULL;
}

/* An F32 tensor (the caller checked its dtype and shape) into dst; values must be finite. */
int induct__st_read(induct__st_file *sf, const induct__st_entry *e, float *dst, size_t numel) {
    uint64_t pos = sf->data_start + e->begin;
    INDUCT_FAIL_IF(pos > (uint64_t)INT64_MAX || fseeko(sf->f, (off_t)pos, SEEK_SET) != 0,
                   INDUCT_EIO, "checkpoint '%s': cannot seek to tensor '%s'", sf->path, e->name);
    INDUCT_FAIL_IF(fread(dst, sizeof(float), numel, sf->f) != numel, INDUCT_EIO,
                   "checkpoint '%s': cannot read tensor '%s' (file changed or truncated while "
                   "reading?)",
                   sf->path, e->name);
    if (!host_is_le()) bswap32(dst, numel);
    for (size_t i = 0; i < numel; i++)
        INDUCT_FAIL_IF(!isfinite(dst[i]), INDUCT_EFORMAT,
                       "checkpoint '%s': tensor '%s' element %zu is not finite", sf->path, e->name,
                       i);
    return INDUCT_OK;
}

int induct__st_get_u64(const induct__st_file *sf, const char *key, uint64_t max, uint64_t *out,
                       int *present) {
    const char *s = induct__st_meta(sf, key);
    *present = s != NULL;
    if (!s) return INDUCT_OK;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    INDUCT_FAIL_IF(s[0] < '0' || s[0] > '9' || *end || errno || v > max, INDUCT_EFORMAT,
                   "checkpoint '%s': __metadata__ \"%s\" = \"%s\" is not an integer in [0, %llu]",
                   sf->path, key, s, (unsigned long long)max);
    *out = v;
    return INDUCT_OK;
}

int induct__st_get_f64(const induct__st_file *sf, const char *key, double *out, int *present) {
    const char *s = induct__st_meta(sf, key);
    *present = s != NULL;
    if (!s) return INDUCT_OK;
    double v = 0.0;
    INDUCT_FAIL_IF(!induct__parse_double(s, &v), INDUCT_EFORMAT,
                   "checkpoint '%s': __metadata__ \"%s\" = \"%s\" is not a finite number",
                   sf->path, key, s);
    *out = v;
    return INDUCT_OK;
}

int induct__st_get_choice(const induct__st_file *sf, const char *key, const char *const *names,
                          uint32_t n, uint32_t *dst) {
    const char *s = induct__st_meta(sf, key);
    if (!s) return 0;
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(s, names[i])) {
            *dst = i;
            return 1;
        }
    return induct__fail(INDUCT_EFORMAT, "checkpoint '%s': __metadata__ \"%s\" = \"%s\" is not "
                                        "supported",
                        sf->path, key, s);
}
