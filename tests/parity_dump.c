/* parity_dump: build a tiny model of a named variant with non-trivial random
 * weights, run induct_model_backward on random tokens, and write everything an
 * independent implementation needs to one safetensors file:
 *
 *   <param name>       F32, its TransformerLens shape       (every parameter)
 *   tokens             I32 [B, T]
 *   logits             F32 [B, T, d_vocab]
 *   losses             F32 [B, T-1]                         (nats)
 *   grad.<param name>  F32                                  (d mean loss / d param)
 *   __metadata__       the config and the mean loss, as strings
 *
 * Uses only the public API. Usage: parity_dump VARIANT OUT.safetensors
 * Variants: attention-only mlp layernorm shortformer none smeared-keys everything
 * shortformer-layer0 shortformer-layer0-no-ln.
 * Exit status 0 on success, 1 on a library or I/O error, 2 on bad usage. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <induct/induct.h>

enum { BATCH = 3, SEQ = 8, VOCAB = 13 };
#define WEIGHT_GAIN 1.0

typedef struct variant {
    const char *name;
    uint32_t d_mlp, layer_norm, positional, smeared, shortformer_layers;
} variant;

static const variant VARIANTS[] = {
    {"attention-only", 0, 0, INDUCT_POS_STANDARD, 0, 0},
    {"mlp", 16, 0, INDUCT_POS_STANDARD, 0, 0},
    {"layernorm", 0, 1, INDUCT_POS_STANDARD, 0, 0},
    {"shortformer", 0, 0, INDUCT_POS_SHORTFORMER, 0, 0},
    {"none", 0, 0, INDUCT_POS_NONE, 0, 0},
    {"smeared-keys", 0, 0, INDUCT_POS_STANDARD, 1, 0},
    {"everything", 16, 1, INDUCT_POS_SHORTFORMER, 1, 0},
    /* W_pos in layer 0's query/key input only */
    {"shortformer-layer0", 0, 1, INDUCT_POS_SHORTFORMER, 0, 1},
    {"shortformer-layer0-no-ln", 0, 0, INDUCT_POS_SHORTFORMER, 0, 1},
};

/* splitmix64 + Box-Muller: deterministic, independent of the library's RNG */
static uint64_t rng_state = 0x5EED;
static uint64_t rng_u64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static double rng_normal(void) {
    double u1 = ((double)(rng_u64() >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(rng_u64() >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static int lib_fail(const char *what, int rc) {
    fprintf(stderr, "parity_dump: %s: %s (%s)\n", what, induct_status_name(rc),
            induct_last_error_message());
    return 1;
}

/* ---- safetensors ---------------------------------------------------------- */
typedef struct entry {
    char name[96];
    const char *dtype; /* "F32" or "I32" */
    uint32_t shape[4], ndim;
    const void *data; /* 4-byte elements in host order */
    size_t numel;
} entry;

static int put_le32(FILE *f, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, p + 4 * i, 4);
        uint8_t b[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
        if (fwrite(b, 1, 4, f) != 4) return -1;
    }
    return 0;
}

static char *build_header(const entry *e, size_t n, cJSON *meta) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddItemToObject(root, "__metadata__", meta);
    double off = 0;
    for (size_t i = 0; i < n; i++) {
        cJSON *t = cJSON_AddObjectToObject(root, e[i].name);
        cJSON_AddStringToObject(t, "dtype", e[i].dtype);
        cJSON *shape = cJSON_AddArrayToObject(t, "shape");
        for (uint32_t d = 0; d < e[i].ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber(e[i].shape[d]));
        cJSON *offs = cJSON_AddArrayToObject(t, "data_offsets");
        double end = off + 4.0 * (double)e[i].numel;
        cJSON_AddItemToArray(offs, cJSON_CreateNumber(off));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber(end));
        off = end;
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* Written to a temporary file in the same directory, fsync'd, then renamed. */
static int write_safetensors(const char *path, const entry *e, size_t n, cJSON *meta) {
    char *hdr = build_header(e, n, meta);
    if (!hdr) {
        fprintf(stderr, "parity_dump: out of memory building the header\n");
        return 1;
    }
    size_t hlen = strlen(hdr), padded = (hlen + 7) / 8 * 8; /* data starts 8-aligned */
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) {
        free(hdr);
        return 1;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", 12);
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    int bad = !f;
    if (!bad) {
        uint8_t len8[8];
        for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
        bad |= fwrite(len8, 1, 8, f) != 8;
        bad |= fwrite(hdr, 1, hlen, f) != hlen;
        for (size_t i = hlen; i < padded; i++) bad |= fputc(' ', f) == EOF;
        for (size_t i = 0; i < n && !bad; i++) bad |= put_le32(f, e[i].data, e[i].numel) != 0;
        bad |= fflush(f) != 0;
        bad |= fsync(fileno(f)) != 0;
        bad |= fclose(f) != 0;
        if (!bad) bad |= rename(tmp, path) != 0;
    } else if (fd >= 0) {
        close(fd);
    }
    if (bad) {
        fprintf(stderr, "parity_dump: writing %s: %s\n", path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    free(hdr);
    return bad;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s VARIANT OUT.safetensors\n", argv[0]);
        return 2;
    }
    const variant *v = NULL;
    for (size_t i = 0; i < sizeof VARIANTS / sizeof VARIANTS[0]; i++)
        if (strcmp(argv[1], VARIANTS[i].name) == 0) v = &VARIANTS[i];
    if (!v) {
        fprintf(stderr, "parity_dump: unknown variant '%s'\n", argv[1]);
        return 2;
    }

    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = 2;
    c.d_model = 12;
    c.n_heads = 3;
    c.d_head = 4;
    c.d_mlp = v->d_mlp;
    c.n_ctx = 10; /* > SEQ: W_pos rows past the sequence must get zero gradient */
    c.d_vocab = VOCAB;
    c.positional = v->positional;
    c.layer_norm = v->layer_norm;
    c.smeared_keys = v->smeared;
    c.shortformer_layers = v->shortformer_layers;
    c.n_threads = 1;
    induct_model *m;
    int rc = induct_model_new(&m, &c);
    if (rc) return lib_fail("induct_model_new", rc);

    /* Non-trivial weights for every tensor: embeddings ~N(0,1), matrices
     * ~N(0, WEIGHT_GAIN²/fan_in) (attention patterns neither uniform nor
     * one-hot, loss of a few nats),
     * biases ~N(0, 0.3), LayerNorm gains 1 + N(0, 0.3), smear_alpha ~N(0, 1). */
    size_t nt = induct_model_n_tensors(m), n_entries = 0;
    entry *e = calloc(2 * nt + 3, sizeof *e);
    float **bufs = calloc(2 * nt, sizeof *bufs);
    if (!e || !bufs) return 1;
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        uint32_t shape[4], ndim;
        size_t numel;
        rc = induct_model_tensor_info(m, i, &name, shape, &ndim, &numel);
        if (rc) return lib_fail("induct_model_tensor_info", rc);
        float *p = malloc(numel * sizeof *p);
        if (!p) return 1;
        const char *leaf = strrchr(name, '.') + 1;
        int is_ln = strstr(name, "ln") != NULL;
        for (size_t j = 0; j < numel; j++) {
            double z = rng_normal();
            if (strcmp(leaf, "W_E") == 0 || strcmp(leaf, "W_pos") == 0) p[j] = (float)z;
            else if (is_ln && strcmp(leaf, "w") == 0) p[j] = (float)(1.0 + 0.3 * z);
            else if (strcmp(leaf, "smear_alpha") == 0) p[j] = (float)z;
            else if (ndim >= 2) {
                /* fan-in: the contracted dimension; W_O [H, dh, D] contracts H*dh */
                double fan_in = strcmp(leaf, "W_O") == 0 ? (double)shape[0] * shape[1]
                                                         : (double)shape[ndim - 2];
                p[j] = (float)(WEIGHT_GAIN * z / sqrt(fan_in));
            } else p[j] = (float)(0.3 * z);
        }
        rc = induct_model_set_tensor(m, name, p, numel);
        if (rc) return lib_fail("induct_model_set_tensor", rc);
        bufs[i] = p;
        entry *x = &e[n_entries++];
        snprintf(x->name, sizeof x->name, "%s", name);
        x->dtype = "F32";
        memcpy(x->shape, shape, sizeof shape);
        x->ndim = ndim;
        x->data = p;
        x->numel = numel;
    }

    int32_t tokens[BATCH * SEQ];
    for (size_t i = 0; i < BATCH * SEQ; i++) tokens[i] = (int32_t)(rng_u64() % c.d_vocab);
    static float logits[BATCH * SEQ * VOCAB], losses[BATCH * (SEQ - 1)];
    double mean;
    rc = induct_model_forward(m, tokens, BATCH, SEQ, logits, sizeof logits / sizeof *logits,
                              losses, sizeof losses / sizeof *losses, &mean);
    if (rc) return lib_fail("induct_model_forward", rc);
    rc = induct_model_backward(m, tokens, BATCH, SEQ, NULL);
    if (rc) return lib_fail("induct_model_backward", rc);

    e[n_entries++] = (entry){"tokens", "I32", {BATCH, SEQ}, 2, tokens, BATCH * SEQ};
    e[n_entries++] = (entry){"logits", "F32", {BATCH, SEQ, VOCAB}, 3, logits, BATCH * SEQ * VOCAB};
    e[n_entries++] = (entry){"losses", "F32", {BATCH, SEQ - 1}, 2, losses, BATCH * (SEQ - 1)};
    for (size_t i = 0; i < nt; i++) {
        const entry *p = &e[i];
        float *g = malloc(p->numel * sizeof *g);
        size_t len;
        if (!g) return 1;
        rc = induct_model_get_tensor(m, p->name, INDUCT_BUF_GRAD, g, p->numel, &len);
        if (rc) return lib_fail("induct_model_get_tensor", rc);
        bufs[nt + i] = g;
        entry *x = &e[n_entries++];
        *x = *p;
        snprintf(x->name, sizeof x->name, "grad.%s", p->name);
        x->data = g;
    }

    static const char *pos_names[] = {"standard", "shortformer", "none"};
    char num[64];
    cJSON *meta = cJSON_CreateObject();
    cJSON_AddStringToObject(meta, "variant", v->name);
#define META_U(field)                                                                      \
    snprintf(num, sizeof num, "%u", (unsigned)c.field);                                    \
    cJSON_AddStringToObject(meta, #field, num)
    META_U(n_layers);
    META_U(d_model);
    META_U(n_heads);
    META_U(d_head);
    META_U(d_mlp);
    META_U(n_ctx);
    META_U(d_vocab);
    META_U(layer_norm);
    META_U(smeared_keys);
    META_U(shortformer_layers);
#undef META_U
    cJSON_AddStringToObject(meta, "positional", pos_names[c.positional]);
    snprintf(num, sizeof num, "%.17g", mean);
    cJSON_AddStringToObject(meta, "mean_loss", num);
    cJSON_AddStringToObject(meta, "library_version", induct_version_string());

    rc = write_safetensors(argv[2], e, n_entries, meta);
    for (size_t i = 0; i < 2 * nt; i++) free(bufs[i]);
    free(bufs);
    free(e);
    induct_model_free(m);
    return rc;
}
