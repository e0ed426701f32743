/* safetensors checkpoints: model weights (TransformerLens names) and optimizer state.
 *
 * File = u64 LE header length N | N bytes of JSON (cJSON) | raw LE data.
 * Writing goes through a temporary file in the destination's directory, flushed,
 * fsync'ed and renamed. Reading validates the whole header (dtypes, shapes, offsets,
 * coverage of the data section) before any tensor is read, then checks every tensor
 * the model needs against the config. docs/checkpoint-format.md is the specification.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "train.h"
#include "core/numtext.h"

/* The safetensors reference reader allows 100 MB; cJSON's parse tree can take 40 times
 * the header's size (a header of "[0,0,…]"), so libinduct stops at 16 MiB (about
 * 180 000 tensor entries): a hostile header costs at most ~640 MiB while parsed. */
#define ST_HEADER_MAX ((uint64_t)16 << 20)
#define ST_NDIM_MAX 8
#define OPT_PREFIX "optimizer."

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

/* ---- writer ------------------------------------------------------------------- */

typedef struct st_out {
    char name[INDUCT_NAME_MAX + 16];
    const float *data;
    const induct__tensor *t; /* shape source */
} st_out;

static int meta_str(cJSON *meta, const char *key, const char *val) {
    INDUCT_FAIL_IF(!cJSON_AddStringToObject(meta, key, val), INDUCT_ENOMEM,
                   "checkpoint: out of memory building the header");
    return INDUCT_OK;
}
static int meta_u64(cJSON *meta, const char *key, uint64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    return meta_str(meta, key, b);
}
static int meta_f64(cJSON *meta, const char *key, double v) {
    char b[40];
    induct__fmt_double(b, sizeof b, v, 0); /* reads back bit-identically */
    return meta_str(meta, key, b);
}

static const char *POS_NAMES[] = {"standard", "shortformer", "none"};
static const char *INIT_NAMES[] = {"gpt2", "torch"};

static int model_meta(cJSON *meta, const induct_model_config *c) {
    INDUCT_TRY(meta_str(meta, "format", "libinduct"));
    /* version 1 unless the model needs what only version 2 states, so that older
     * libraries keep reading every file they can honour and refuse the others */
    INDUCT_TRY(meta_u64(meta, "format_version", c->shortformer_layers ? 2 : 1));
    INDUCT_TRY(meta_str(meta, "library_version", INDUCT_VERSION_STRING));
    INDUCT_TRY(meta_u64(meta, "n_layers", c->n_layers));
    INDUCT_TRY(meta_u64(meta, "d_model", c->d_model));
    INDUCT_TRY(meta_u64(meta, "n_heads", c->n_heads));
    INDUCT_TRY(meta_u64(meta, "d_head", c->d_head));
    INDUCT_TRY(meta_u64(meta, "d_mlp", c->d_mlp));
    INDUCT_TRY(meta_u64(meta, "n_ctx", c->n_ctx));
    INDUCT_TRY(meta_u64(meta, "d_vocab", c->d_vocab));
    INDUCT_TRY(meta_str(meta, "positional_embedding_type", POS_NAMES[c->positional]));
    INDUCT_TRY(meta_str(meta, "normalization_type", c->layer_norm ? "LN" : "none"));
    INDUCT_TRY(meta_str(meta, "attn_only", c->d_mlp ? "false" : "true"));
    INDUCT_TRY(meta_str(meta, "act_fn", "gelu_new"));
    INDUCT_TRY(meta_u64(meta, "smeared_keys", c->smeared_keys));
    if (c->shortformer_layers)
        INDUCT_TRY(meta_u64(meta, "shortformer_layers", c->shortformer_layers));
    INDUCT_TRY(meta_f64(meta, "smear_alpha_init", c->smear_alpha_init));
    INDUCT_TRY(meta_str(meta, "init", INIT_NAMES[c->init]));
    INDUCT_TRY(meta_f64(meta, "init_std", c->init_std));
    INDUCT_TRY(meta_u64(meta, "seed", c->seed));
    INDUCT_TRY(meta_u64(meta, "n_threads", c->n_threads));
    return INDUCT_OK;
}

/* The optimizer parameters stored in the file (all but INDUCT_OPT_STEP), by key. */
typedef struct opt_key {
    const char *key;
    induct_opt_param p;
    double absent; /* value for a file without the key (written later), or NAN: required */
} opt_key;
static const opt_key OPT_KEYS[] = {
    {"optimizer.lr", INDUCT_OPT_LR, NAN},
    {"optimizer.beta1", INDUCT_OPT_BETA1, NAN},
    {"optimizer.beta2", INDUCT_OPT_BETA2, NAN},
    {"optimizer.eps", INDUCT_OPT_EPS, NAN},
    {"optimizer.weight_decay", INDUCT_OPT_WEIGHT_DECAY, NAN},
    {"optimizer.grad_clip", INDUCT_OPT_GRAD_CLIP, NAN},
    {"optimizer.warmup_steps", INDUCT_OPT_WARMUP_STEPS, NAN},
    {"optimizer.schedule", INDUCT_OPT_SCHEDULE, NAN},
    {"optimizer.total_steps", INDUCT_OPT_TOTAL_STEPS, NAN},
    {"optimizer.min_lr_ratio", INDUCT_OPT_MIN_LR_RATIO, NAN},
    {"optimizer.momentum", INDUCT_OPT_MOMENTUM, NAN},
    {"optimizer.grad_shards", INDUCT_OPT_GRAD_SHARDS, 1.0},
};
#define N_OPT_KEYS (sizeof OPT_KEYS / sizeof OPT_KEYS[0])

static int optimizer_meta(cJSON *meta, const induct_optimizer *o) {
    INDUCT_TRY(meta_str(meta, "optimizer", o->kind == INDUCT_OPTIM_ADAMW ? "adamw" : "sgd"));
    INDUCT_TRY(meta_u64(meta, "optimizer.step", o->step));
    for (size_t i = 0; i < N_OPT_KEYS; i++) {
        double v;
        INDUCT_TRY(induct_optimizer_get(o, OPT_KEYS[i].p, &v));
        INDUCT_TRY(meta_f64(meta, OPT_KEYS[i].key, v));
    }
    return INDUCT_OK;
}

/* Build the header text for `n` tensors: JSON padded with spaces so that 8 + N is a
 * multiple of 8. Returns a malloc'ed string and its padded length. */
static int build_header(cJSON *root, const st_out *ts, size_t n, char **out, size_t *len_out) {
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

/* What write_file writes: the length-prefixed header and the tensors' data. */
typedef struct st_content {
    const char *header;
    size_t hlen;
    const st_out *ts;
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

/* Write header + tensors to `path` atomically. */
static int write_file(const char *path, const char *header, size_t hlen, const st_out *ts,
                      size_t n) {
    st_content c = {header, hlen, ts, n};
    return induct__write_atomic(path, "checkpoint", write_content, &c);
}

/* Collect the model's tensors (and optionally the optimizer's) and write them. */
static int save(const induct_model *m, const induct_optimizer *o, const char *path) {
    INDUCT_FAIL_IF(!path || !*path, INDUCT_EINVAL, "checkpoint: path is NULL or empty");
    size_t per = 1 + (o ? (o->kind == INDUCT_OPTIM_ADAMW ? 2 : 1) : 0);
    size_t n = m->n_tensors * per;
    st_out *ts = calloc(n ? n : 1, sizeof *ts);
    INDUCT_FAIL_IF(!ts, INDUCT_ENOMEM, "checkpoint: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < m->n_tensors; i++, k++) {
        snprintf(ts[k].name, sizeof ts[k].name, "%s", m->tensors[i].name);
        ts[k].data = m->params + m->tensors[i].offset;
        ts[k].t = &m->tensors[i];
    }
    for (size_t pass = 1; o && pass < per; pass++)
        for (size_t i = 0; i < m->n_tensors; i++, k++) {
            snprintf(ts[k].name, sizeof ts[k].name, OPT_PREFIX "%s.%s", pass == 1 ? "m" : "v",
                     m->tensors[i].name);
            ts[k].data = (pass == 1 ? o->m1 : o->m2) + m->tensors[i].offset;
            ts[k].t = &m->tensors[i];
        }
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_CreateObject();
    int rc = (root && meta) ? INDUCT_OK
                            : induct__fail(INDUCT_ENOMEM, "checkpoint: out of memory");
    if (rc == INDUCT_OK) rc = model_meta(meta, &m->cfg);
    if (rc == INDUCT_OK && o) rc = optimizer_meta(meta, o);
    if (rc == INDUCT_OK) {
        if (cJSON_AddItemToObject(root, "__metadata__", meta)) meta = NULL;
        else rc = induct__fail(INDUCT_ENOMEM, "checkpoint: out of memory");
    }
    char *header = NULL;
    size_t hlen = 0;
    if (rc == INDUCT_OK) rc = build_header(root, ts, n, &header, &hlen);
    if (rc == INDUCT_OK) rc = write_file(path, header, hlen, ts, n);
    free(header);
    cJSON_Delete(meta);
    cJSON_Delete(root);
    free(ts);
    return rc;
}

INDUCT_API int induct_model_save(const induct_model *m, const char *path) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_save: model is NULL");
    return save(m, NULL, path);
}

INDUCT_API int induct_optimizer_save(const induct_optimizer *o, const char *path) {
    INDUCT_FAIL_IF(!o, INDUCT_EINVAL, "induct_optimizer_save: optimizer is NULL");
    return save(o->model, o, path);
}

/* ---- reader ------------------------------------------------------------------- */

typedef struct st_entry {
    const char *name; /* borrowed from the cJSON tree */
    const char *dtype;
    uint32_t ndim;
    uint64_t shape[ST_NDIM_MAX];
    uint64_t begin, end; /* relative to the data section */
} st_entry;

typedef struct st_file {
    const char *path;
    FILE *f;
    uint64_t data_start, data_size;
    cJSON *root;
    cJSON *meta; /* may be NULL */
    st_entry *e;
    size_t n;
    st_entry **by_name; /* the entries sorted by name (binary search; duplicates adjacent) */
} st_file;

static void st_close(st_file *sf) {
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
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

#define FMT_FAIL(...) induct__fail(INDUCT_EFORMAT, __VA_ARGS__)

/* Parse and validate one header entry. */
static int parse_entry(const st_file *sf, const cJSON *item, st_entry *e) {
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
    INDUCT_FAIL_IF(nd > ST_NDIM_MAX, INDUCT_EFORMAT,
                   "checkpoint '%s': tensor '%s': %d dimensions (at most %d supported)", sf->path,
                   nm, nd, ST_NDIM_MAX);
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
    return strcmp((*(const st_entry *const *)a)->name, (*(const st_entry *const *)b)->name);
}

/* Validate the structure (not yet the meaning) of the safetensors stream sf->f of
 * `fsize` bytes, positioned at its start. Closes sf on failure. */
static int st_parse(st_file *sf, uint64_t fsize) {
    const char *path = sf->path;
    unsigned char lenb[8];
    if (fsize < 8 || fread(lenb, 1, 8, sf->f) != 8) {
        st_close(sf);
        return induct__fail(INDUCT_EFORMAT,
                            "checkpoint '%s': truncated: %llu bytes cannot hold the 8-byte header "
                            "length",
                            path, (unsigned long long)fsize);
    }
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)lenb[i] << (8 * i);
    if (hlen > fsize - 8) {
        st_close(sf);
        return induct__fail(INDUCT_EFORMAT,
                            "checkpoint '%s': header length %llu goes beyond the end of the file "
                            "(%llu bytes after the length field)",
                            path, (unsigned long long)hlen, (unsigned long long)(fsize - 8));
    }
    if (hlen < 2 || hlen > ST_HEADER_MAX) {
        st_close(sf);
        return induct__fail(INDUCT_EFORMAT,
                            "checkpoint '%s': header length %llu is outside [2, %llu]", path,
                            (unsigned long long)hlen, (unsigned long long)ST_HEADER_MAX);
    }
    sf->data_start = 8 + hlen;
    sf->data_size = fsize - sf->data_start;
    char *h = malloc((size_t)hlen + 1);
    if (!h) {
        st_close(sf);
        return induct__fail(INDUCT_ENOMEM, "checkpoint '%s': out of memory for the header", path);
    }
    if (fread(h, 1, (size_t)hlen, sf->f) != hlen) {
        free(h);
        st_close(sf);
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
        st_close(sf);
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
    st_entry **order = calloc(n ? n : 1, sizeof *order);
    if (!sf->e || !order) {
        free(order);
        st_close(sf);
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
            const st_entry *e = order[i];
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
    if (rc != INDUCT_OK) st_close(sf);
    return rc;
}

/* Open a safetensors file and validate its structure (not yet its meaning). */
static int st_open(st_file *sf, const char *path) {
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
        st_close(sf);
        return induct__fail(INDUCT_EIO, "checkpoint '%s': not a regular file", path);
    }
    return st_parse(sf, (uint64_t)st.st_size);
}

/* The same over `len` bytes in memory (fuzzing, tests): a read-only stream, so that
 * every check and every read is the file path's. */
static int st_open_mem(st_file *sf, const void *data, size_t len) {
    memset(sf, 0, sizeof *sf);
    sf->path = "<memory>";
    INDUCT_FAIL_IF(!data && len, INDUCT_EINVAL, "checkpoint: NULL buffer");
    if (len) { /* st_parse refuses fewer than 8 bytes before reading */
        sf->f = fmemopen((void *)(uintptr_t)data, len, "rb");
        INDUCT_FAIL_IF(!sf->f, INDUCT_ENOMEM, "checkpoint: cannot open a memory stream");
    }
    return st_parse(sf, (uint64_t)len);
}

static const st_entry *st_find(const st_file *sf, const char *name) {
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

static const char *st_meta(const st_file *sf, const char *key) {
    if (!sf->meta) return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(sf->meta, key);
    return v ? v->valuestring : NULL;
}

/* A tensor the reader needs: present, F32, exactly the shape of `t`. */
static int st_expect(const st_file *sf, const char *name, const induct__tensor *t,
                     const st_entry **out) {
    const st_entry *e = st_find(sf, name);
    INDUCT_FAIL_IF(!e, INDUCT_EFORMAT, "checkpoint '%s': tensor '%s' is missing", sf->path, name);
    INDUCT_FAIL_IF(strcmp(e->dtype, "F32") != 0, INDUCT_EFORMAT,
                   "checkpoint '%s': tensor '%s' has dtype %s; libinduct reads F32 only", sf->path,
                   name, e->dtype);
    int same = e->ndim == t->ndim;
    for (uint32_t d = 0; same && d < t->ndim; d++) same = e->shape[d] == t->shape[d];
    if (!same) {
        char want[96] = "", got[160] = "";
        for (uint32_t d = 0; d < t->ndim; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%u", d ? ", " : "",
                     t->shape[d]);
        for (uint32_t d = 0; d < e->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%llu", d ? ", " : "",
                     (unsigned long long)e->shape[d]);
        return induct__fail(INDUCT_EFORMAT,
                            "checkpoint '%s': tensor '%s' has shape [%s] but the config needs [%s]",
                            sf->path, name, got, want);
    }
    *out = e;
    return INDUCT_OK;
}

/* Read an F32 tensor (validated by st_expect) into dst; values must be finite. */
static int st_read(st_file *sf, const st_entry *e, float *dst, size_t numel) {
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

/* ---- config from metadata and shapes -------------------------------------------- */

static int parse_meta_u64(const st_file *sf, const char *key, uint64_t max, uint64_t *out,
                          int *present) {
    const char *s = st_meta(sf, key);
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

static int meta_dim(const st_file *sf, const char *key, uint32_t *dst) {
    uint64_t v = 0;
    int present;
    INDUCT_TRY(parse_meta_u64(sf, key, UINT32_MAX, &v, &present));
    if (present) *dst = (uint32_t)v;
    return present;
}

static int parse_meta_f64(const st_file *sf, const char *key, double *out, int *present) {
    const char *s = st_meta(sf, key);
    *present = s != NULL;
    if (!s) return INDUCT_OK;
    double v = 0.0;
    INDUCT_FAIL_IF(!induct__parse_double(s, &v), INDUCT_EFORMAT,
                   "checkpoint '%s': __metadata__ \"%s\" = \"%s\" is not a finite number",
                   sf->path, key, s);
    *out = v;
    return INDUCT_OK;
}

static int meta_choice(const st_file *sf, const char *key, const char *const *names, uint32_t n,
                       uint32_t *dst) {
    const char *s = st_meta(sf, key);
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

/* Shape dimension `d` of a tensor if it exists with `ndim` dims. */
static int shape_of(const st_file *sf, const char *name, uint32_t ndim, uint32_t d,
                    uint32_t *dst) {
    const st_entry *e = st_find(sf, name);
    if (!e || e->ndim != ndim || e->shape[d] > UINT32_MAX) return 0;
    *dst = (uint32_t)e->shape[d];
    return 1;
}

/* Before a model of config `c` is allocated: the tensors that carry each dimension
 * (embed.W_E, pos_embed.W_pos, every layer's W_Q and W_in) must be in the file with
 * exactly the shape the config implies. Each one's bytes lie inside the data section
 * without overlap, so the model about to be allocated is at most a small multiple of
 * the file's size, whatever the metadata claims. */
static int precheck(const st_file *sf, const induct_model_config *c) {
    uint32_t dh = c->d_head ? c->d_head : (c->n_heads ? c->d_model / c->n_heads : 0);
    induct__tensor t;
    const st_entry *e;
    char name[INDUCT_NAME_MAX];
    memset(&t, 0, sizeof t);
    t.ndim = 2;
    t.shape[0] = c->d_vocab;
    t.shape[1] = c->d_model;
    INDUCT_TRY(st_expect(sf, "embed.W_E", &t, &e));
    if (c->positional != INDUCT_POS_NONE) {
        t.shape[0] = c->n_ctx;
        INDUCT_TRY(st_expect(sf, "pos_embed.W_pos", &t, &e));
    }
    for (uint32_t l = 0; l < c->n_layers; l++) {
        t.ndim = 3;
        t.shape[0] = c->n_heads;
        t.shape[1] = c->d_model;
        t.shape[2] = dh;
        snprintf(name, sizeof name, "blocks.%u.attn.W_Q", l);
        INDUCT_TRY(st_expect(sf, name, &t, &e));
        if (c->d_mlp) {
            t.ndim = 2;
            t.shape[0] = c->d_model;
            t.shape[1] = c->d_mlp;
            t.shape[2] = 0;
            snprintf(name, sizeof name, "blocks.%u.mlp.W_in", l);
            INDUCT_TRY(st_expect(sf, name, &t, &e));
        }
    }
    return INDUCT_OK;
}

/* The config of a file: its __metadata__, else its tensor shapes where they tell; or,
 * with `given`, the caller's config, which the metadata present must agree with. A
 * choice the tensors cannot tell (positions, LayerNorm when there are no LN tensors, the
 * MLP's activation) needs the metadata or `given`: else EFORMAT, naming each one. */
static int config_from_file(const st_file *sf, induct_model_config *c,
                            const induct_model_config *given) {
    induct_model_config_init(c, sizeof *c);
    int rc;
    /* explicit metadata first */
    int has_layers, has_d_model, has_heads, has_d_head, has_mlp, has_ctx, has_vocab, has_pos,
        has_ln;
    if ((rc = has_layers = meta_dim(sf, "n_layers", &c->n_layers)) < 0) return rc;
    if ((rc = has_d_model = meta_dim(sf, "d_model", &c->d_model)) < 0) return rc;
    if ((rc = has_heads = meta_dim(sf, "n_heads", &c->n_heads)) < 0) return rc;
    if ((rc = has_d_head = meta_dim(sf, "d_head", &c->d_head)) < 0) return rc;
    if ((rc = has_mlp = meta_dim(sf, "d_mlp", &c->d_mlp)) < 0) return rc;
    if ((rc = has_ctx = meta_dim(sf, "n_ctx", &c->n_ctx)) < 0) return rc;
    if ((rc = has_vocab = meta_dim(sf, "d_vocab", &c->d_vocab)) < 0) return rc;
    if ((rc = has_pos = meta_choice(sf, "positional_embedding_type", POS_NAMES, 3,
                                    &c->positional)) < 0)
        return rc;
    static const char *const NORM[] = {"none", "LN"};
    if ((rc = has_ln = meta_choice(sf, "normalization_type", NORM, 2, &c->layer_norm)) < 0)
        return rc;
    static const char *const ACT[] = {"gelu_new"};
    uint32_t dummy;
    int has_act;
    if ((rc = has_act = meta_choice(sf, "act_fn", ACT, 1, &dummy)) < 0) return rc;
    if ((rc = meta_choice(sf, "init", INIT_NAMES, 2, &c->init)) < 0) return rc;
    int has_smear, present;
    uint64_t u;
    INDUCT_TRY(parse_meta_u64(sf, "smeared_keys", 1, &u, &has_smear));
    if (has_smear) c->smeared_keys = (uint32_t)u;
    int has_sfl;
    INDUCT_TRY(parse_meta_u64(sf, "shortformer_layers", UINT32_MAX, &u, &has_sfl));
    if (has_sfl) c->shortformer_layers = (uint32_t)u;
    INDUCT_TRY(parse_meta_u64(sf, "n_threads", 1024, &u, &present));
    if (present) c->n_threads = (uint32_t)u;
    INDUCT_TRY(parse_meta_u64(sf, "seed", UINT64_MAX, &u, &present));
    if (present) c->seed = u;
    INDUCT_TRY(parse_meta_f64(sf, "smear_alpha_init", &c->smear_alpha_init, &present));
    INDUCT_TRY(parse_meta_f64(sf, "init_std", &c->init_std, &present));

    if (given) {
        /* the caller's config; the metadata present must agree with it */
        uint32_t dh = given->d_head ? given->d_head
                      : given->n_heads    ? given->d_model / given->n_heads
                                          : 0;
        const struct {
            int has;
            uint32_t file, want;
            const char *key;
        } agree[] = {{has_layers, c->n_layers, given->n_layers, "n_layers"},
                     {has_d_model, c->d_model, given->d_model, "d_model"},
                     {has_heads, c->n_heads, given->n_heads, "n_heads"},
                     {has_d_head, c->d_head, dh, "d_head"},
                     {has_mlp, c->d_mlp, given->d_mlp, "d_mlp"},
                     {has_ctx, c->n_ctx, given->n_ctx, "n_ctx"},
                     {has_vocab, c->d_vocab, given->d_vocab, "d_vocab"},
                     {has_pos, c->positional, given->positional, "positional_embedding_type"},
                     {has_ln, c->layer_norm, given->layer_norm, "normalization_type"},
                     {has_smear, c->smeared_keys, given->smeared_keys, "smeared_keys"},
                     {has_sfl, c->shortformer_layers, given->shortformer_layers,
                      "shortformer_layers"}};
        for (size_t i = 0; i < sizeof agree / sizeof *agree; i++)
            INDUCT_FAIL_IF(agree[i].has && agree[i].file != agree[i].want, INDUCT_EFORMAT,
                           "checkpoint '%s': __metadata__ %s (%u) contradicts the given "
                           "config (%u)",
                           sf->path, agree[i].key, agree[i].file, agree[i].want);
        *c = *given;
        return INDUCT_OK;
    }
    /* what the tensors cannot tell needs the metadata or a config given explicitly */
    {
        char why[768] = "";
        size_t k = 0;
        int has_w_pos = st_find(sf, "pos_embed.W_pos") != NULL;
        if (!has_pos)
            k += (size_t)snprintf(why + k, sizeof why - k, "%s",
                                  has_w_pos ? "; positional_embedding_type (W_pos serves "
                                              "standard and shortformer alike)"
                                            : "; positional_embedding_type (no W_pos: none, "
                                              "or rotary)");
        if (!has_ln && !st_find(sf, "ln_final.w") && k < sizeof why)
            k += (size_t)snprintf(why + k, sizeof why - k,
                                  "; normalization_type (no LN tensors: none, or LN folded "
                                  "in, TransformerLens's fold_ln=True)");
        uint32_t mlp = 0;
        if (!has_act && (has_mlp ? c->d_mlp != 0 : shape_of(sf, "blocks.0.mlp.W_in", 2, 1, &mlp) != 0) &&
            k < sizeof why)
            k += (size_t)snprintf(why + k, sizeof why - k,
                                  "; act_fn (the MLP's activation)");
        INDUCT_FAIL_IF(k > 0, INDUCT_EFORMAT,
                       "checkpoint '%s': its architecture cannot be told from its tensors; "
                       "missing: %s. Give these __metadata__ keys or the whole configuration "
                       "(induct_model_load_config)",
                       sf->path, why + 2);
    }
    /* inferred from shapes where the metadata is silent (documented) */
    if (!has_vocab) shape_of(sf, "embed.W_E", 2, 0, &c->d_vocab);
    if (!has_d_model) shape_of(sf, "embed.W_E", 2, 1, &c->d_model);
    if (!has_ctx && !shape_of(sf, "pos_embed.W_pos", 2, 0, &c->n_ctx))
        return induct__fail(INDUCT_EFORMAT,
                            "checkpoint '%s': n_ctx is not in __metadata__ and there is no "
                            "pos_embed.W_pos to infer it from",
                            sf->path);
    if (!has_layers) {
        uint32_t L = 0;
        for (size_t i = 0; i < sf->n; i++) {
            unsigned long l;
            char *end;
            if (strncmp(sf->e[i].name, "blocks.", 7) != 0) continue;
            errno = 0;
            l = strtoul(sf->e[i].name + 7, &end, 10);
            if (end != sf->e[i].name + 7 && *end == '.' && !errno && l < sf->n && l + 1 > L)
                L = (uint32_t)(l + 1);
        }
        c->n_layers = L;
    }
    if (!has_heads) shape_of(sf, "blocks.0.attn.W_Q", 3, 0, &c->n_heads);
    if (!has_d_head) shape_of(sf, "blocks.0.attn.W_Q", 3, 2, &c->d_head);
    if (!has_mlp && !shape_of(sf, "blocks.0.mlp.W_in", 2, 1, &c->d_mlp)) c->d_mlp = 0;
    if (!has_ln) c->layer_norm = 1; /* ln_final.w exists (checked above) */
    if (!has_smear) c->smeared_keys = st_find(sf, "blocks.0.attn.smear_alpha") != NULL;
    const char *ao = st_meta(sf, "attn_only");
    INDUCT_FAIL_IF(ao && strcmp(ao, c->d_mlp ? "false" : "true") != 0, INDUCT_EFORMAT,
                   "checkpoint '%s': __metadata__ attn_only = \"%s\" contradicts d_mlp = %u",
                   sf->path, ao, c->d_mlp);
    return INDUCT_OK;
}

/* ---- public loaders ------------------------------------------------------------ */

/* The model's tensor names, sorted: membership tests in O(log n) for every entry of a
 * header (a linear search per entry would be quadratic in a hostile header). */
static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const induct__tensor *const *)a)[0]->name,
                  ((const induct__tensor *const *)b)[0]->name);
}
static const induct__tensor **sorted_tensors(const induct_model *m) {
    const induct__tensor **v = calloc(m->n_tensors ? m->n_tensors : 1, sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < m->n_tensors; i++) v[i] = &m->tensors[i];
    qsort(v, m->n_tensors, sizeof *v, cmp_tensor_name);
    return v;
}
static int has_tensor(const induct__tensor **v, size_t n, const char *name) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(v[mid]->name, name);
        if (c == 0) return 1;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

/* induct_model_load() on an opened file (with `given`: induct_model_load_config());
 * closes it. */
static int model_load(induct_model **out, st_file *sf_, const induct_model_config *given) {
    st_file sf = *sf_;
    const char *path = sf.path;
    induct_model_config c;
    int rc = config_from_file(&sf, &c, given);
    induct_model *m = NULL;
    if (rc == INDUCT_OK && c.n_layers == 0)
        rc = induct__fail(INDUCT_EFORMAT, "checkpoint '%s': no blocks.{l}. tensors and no n_layers "
                                          "in __metadata__", path);
    if (rc == INDUCT_OK) rc = precheck(&sf, &c);
    if (rc == INDUCT_OK) {
        rc = induct_model_new(&m, &c);
        if (rc == INDUCT_EINVAL || rc == INDUCT_ELIMIT || rc == INDUCT_EABI) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", induct_last_error_message());
            rc = induct__fail(INDUCT_EFORMAT, "checkpoint '%s': its config is invalid: %s", path,
                              msg);
        }
    }
    /* every model tensor, exactly */
    for (size_t i = 0; rc == INDUCT_OK && i < m->n_tensors; i++) {
        const st_entry *e;
        rc = st_expect(&sf, m->tensors[i].name, &m->tensors[i], &e);
        if (rc == INDUCT_OK)
            rc = st_read(&sf, e, m->params + m->tensors[i].offset, m->tensors[i].numel);
    }
    /* nothing else, except optimizer state */
    const induct__tensor **names = NULL;
    if (rc == INDUCT_OK && !(names = sorted_tensors(m)))
        rc = induct__fail(INDUCT_ENOMEM, "checkpoint '%s': out of memory", path);
    for (size_t i = 0; rc == INDUCT_OK && i < sf.n; i++) {
        const char *nm = sf.e[i].name;
        if (strncmp(nm, OPT_PREFIX, strlen(OPT_PREFIX)) == 0) continue;
        if (!has_tensor(names, m->n_tensors, nm))
            rc = induct__fail(INDUCT_EFORMAT,
                              "checkpoint '%s': unknown tensor '%s' (not a parameter of the "
                              "model the metadata describes)",
                              path, nm);
    }
    free(names);
    st_close(&sf);
    if (rc != INDUCT_OK) {
        induct_model_free(m);
        return rc;
    }
    *out = m;
    return INDUCT_OK;
}

INDUCT_API int induct_model_load(induct_model **out, const char *path) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_model_load: out is NULL");
    *out = NULL;
    INDUCT_FAIL_IF(!path, INDUCT_EINVAL, "induct_model_load: path is NULL");
    st_file sf;
    INDUCT_TRY(st_open(&sf, path));
    return model_load(out, &sf, NULL);
}

INDUCT_API int induct_model_load_config(induct_model **out, const char *path,
                                        const induct_model_config *cfg) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_model_load_config: out is NULL");
    *out = NULL;
    INDUCT_FAIL_IF(!path, INDUCT_EINVAL, "induct_model_load_config: path is NULL");
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    INDUCT_TRY(induct__struct_in(&c, sizeof c, INDUCT__MODEL_CONFIG_MIN, cfg, "induct_model_config"));
    st_file sf;
    INDUCT_TRY(st_open(&sf, path));
    return model_load(out, &sf, &c);
}

int induct__model_load_mem(induct_model **out, const void *data, size_t len) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct__model_load_mem: out is NULL");
    *out = NULL;
    st_file sf;
    INDUCT_TRY(st_open_mem(&sf, data, len));
    return model_load(out, &sf, NULL);
}

/* induct_optimizer_load() on an opened file; closes it. */
static int optimizer_load(induct_optimizer **out, induct_model *m, st_file *sf_) {
    st_file sf = *sf_;
    const char *path = sf.path;
    int rc = INDUCT_OK;
    const char *kind = st_meta(&sf, "optimizer");
    uint32_t k = 0;
    if (!kind)
        rc = induct__fail(INDUCT_EFORMAT,
                          "checkpoint '%s': no optimizer state (__metadata__ \"optimizer\" is "
                          "missing)",
                          path);
    else if (!strcmp(kind, "adamw")) k = INDUCT_OPTIM_ADAMW;
    else if (!strcmp(kind, "sgd")) k = INDUCT_OPTIM_SGD;
    else
        rc = induct__fail(INDUCT_EFORMAT,
                          "checkpoint '%s': __metadata__ optimizer = \"%s\" is not adamw or sgd",
                          path, kind);
    induct_optimizer *o = NULL;
    if (rc == INDUCT_OK) rc = induct_optimizer_new(&o, m, k);
    for (size_t i = 0; rc == INDUCT_OK && i < N_OPT_KEYS; i++) {
        double v = 0;
        int present;
        rc = parse_meta_f64(&sf, OPT_KEYS[i].key, &v, &present);
        if (rc == INDUCT_OK && !present && !isnan(OPT_KEYS[i].absent)) v = OPT_KEYS[i].absent;
        else if (rc == INDUCT_OK && !present)
            rc = induct__fail(INDUCT_EFORMAT, "checkpoint '%s': __metadata__ \"%s\" is missing",
                              path, OPT_KEYS[i].key);
        if (rc == INDUCT_OK && induct_optimizer_set(o, OPT_KEYS[i].p, v) != INDUCT_OK)
            rc = induct__fail(INDUCT_EFORMAT,
                              "checkpoint '%s': __metadata__ \"%s\" = %.17g is out of range",
                              path, OPT_KEYS[i].key, v);
    }
    if (rc == INDUCT_OK) {
        uint64_t step = 0;
        int present;
        rc = parse_meta_u64(&sf, "optimizer.step", (uint64_t)1 << 53, &step, &present);
        if (rc == INDUCT_OK && !present)
            rc = induct__fail(INDUCT_EFORMAT,
                              "checkpoint '%s': __metadata__ \"optimizer.step\" is missing", path);
        if (rc == INDUCT_OK) o->step = step;
    }
    size_t npass = k == INDUCT_OPTIM_ADAMW ? 2 : 1;
    char name[INDUCT_NAME_MAX + 16];
    for (size_t pass = 0; rc == INDUCT_OK && pass < npass; pass++)
        for (size_t i = 0; rc == INDUCT_OK && i < m->n_tensors; i++) {
            const induct__tensor *t = &m->tensors[i];
            const st_entry *e;
            snprintf(name, sizeof name, OPT_PREFIX "%s.%s", pass ? "v" : "m", t->name);
            rc = st_expect(&sf, name, t, &e);
            if (rc == INDUCT_OK) rc = st_read(&sf, e, (pass ? o->m2 : o->m1) + t->offset, t->numel);
        }
    /* no optimizer tensor that this model and kind do not explain */
    const induct__tensor **names = NULL;
    if (rc == INDUCT_OK && !(names = sorted_tensors(m)))
        rc = induct__fail(INDUCT_ENOMEM, "checkpoint '%s': out of memory", path);
    for (size_t i = 0; rc == INDUCT_OK && i < sf.n; i++) {
        const char *nm = sf.e[i].name;
        size_t pl = strlen(OPT_PREFIX);
        if (strncmp(nm, OPT_PREFIX, pl) != 0) continue;
        int known = (nm[pl] == 'm' || (nm[pl] == 'v' && npass == 2)) && nm[pl + 1] == '.' &&
                    has_tensor(names, m->n_tensors, nm + pl + 2);
        if (!known)
            rc = induct__fail(INDUCT_EFORMAT,
                              "checkpoint '%s': unknown tensor '%s' (no such optimizer state for "
                              "this model and optimizer kind)",
                              path, nm);
    }
    free(names);
    st_close(&sf);
    if (rc != INDUCT_OK) {
        induct_optimizer_free(o);
        return rc;
    }
    *out = o;
    return INDUCT_OK;
}

INDUCT_API int induct_optimizer_load(induct_optimizer **out, induct_model *m, const char *path) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_optimizer_load: out is NULL");
    *out = NULL;
    INDUCT_FAIL_IF(!m || !path, INDUCT_EINVAL, "induct_optimizer_load: NULL argument");
    st_file sf;
    INDUCT_TRY(st_open(&sf, path));
    return optimizer_load(out, m, &sf);
}

int induct__optimizer_load_mem(induct_optimizer **out, induct_model *m, const void *data,
                               size_t len) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct__optimizer_load_mem: out is NULL");
    *out = NULL;
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct__optimizer_load_mem: model is NULL");
    st_file sf;
    INDUCT_TRY(st_open_mem(&sf, data, len));
    return optimizer_load(out, m, &sf);
}
