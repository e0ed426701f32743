/* Writes the seed corpora of the fuzz targets into <dir>/checkpoint, config, tokenfile
 * and text: small valid inputs made by the library itself and a few hand-made corrupt
 * ones. Run from the source tree after a build:
 *   build/tests/fuzz_gen_seeds tests/fuzz
 * The files are committed; regenerating them is only needed when a format changes. */
#include <induct/induct.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dir;

static void die(const char *what) {
    fprintf(stderr, "gen_seeds: %s: %s\n", what, induct_last_error_message());
    exit(1);
}

static char *path(const char *sub, const char *name) {
    static char p[4096];
    snprintf(p, sizeof p, "%s/%s/%s", dir, sub, name);
    return p;
}

static void write_bytes(const char *sub, const char *name, const void *b, size_t n) {
    FILE *f = fopen(path(sub, name), "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) die(name);
}

static unsigned char *read_all(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    if (!f) die(p);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    if (fread(b, 1, *n, f) != *n) die(p);
    fclose(f);
    return b;
}

/* A safetensors file from a header text and a data section. */
static void write_st(const char *name, const char *header, const void *data, size_t n) {
    size_t h = strlen(header), padded = (h + 7) & ~(size_t)7;
    unsigned char *b = calloc(1, 8 + padded + n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(b + 8, header, h);
    memset(b + 8 + h, ' ', padded - h);
    if (n) memcpy(b + 8 + padded, data, n);
    write_bytes("checkpoint", name, b, 8 + padded + n);
    free(b);
}

static induct_model *model(uint32_t layers, uint32_t d_mlp, uint32_t ln, uint32_t smear,
                           uint32_t pos) {
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = layers;
    c.d_model = 4;
    c.n_heads = 2;
    c.n_ctx = 4;
    c.d_vocab = 5;
    c.d_mlp = d_mlp;
    c.layer_norm = ln;
    c.smeared_keys = smear;
    c.positional = pos;
    induct_model *m;
    if (induct_model_new(&m, &c)) die("model");
    return m;
}

static void checkpoints(void) {
    induct_model *m = model(1, 0, 0, 0, INDUCT_POS_STANDARD);
    if (induct_model_save(m, path("checkpoint", "attn-only.safetensors"))) die("save");
    induct_model_free(m);
    m = model(2, 8, 1, 1, INDUCT_POS_SHORTFORMER);
    if (induct_model_save(m, path("checkpoint", "mlp-ln-smear.safetensors"))) die("save");
    induct_model_free(m);
    m = model(1, 4, 0, 0, INDUCT_POS_NONE);
    induct_optimizer *o;
    if (induct_optimizer_new(&o, m, INDUCT_OPTIM_SGD)) die("sgd");
    if (induct_optimizer_save(o, path("checkpoint", "sgd-state.safetensors"))) die("save");
    induct_optimizer_free(o);
    induct_model_free(m);
    /* AdamW state for the fuzz target's fixed model (1 layer, d_model 8, 2 heads, n_ctx 8,
     * d_vocab 11), with a step taken so the moments are non-zero */
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = 1;
    c.d_model = 8;
    c.n_heads = 2;
    c.n_ctx = 8;
    c.d_vocab = 11;
    if (induct_model_new(&m, &c) || induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW)) die("adamw");
    int32_t tok[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    if (induct_train_step_tokens(o, tok, 1, 8, NULL)) die("step");
    if (induct_optimizer_save(o, path("checkpoint", "adamw-state.safetensors"))) die("save");
    induct_optimizer_free(o);
    induct_model_free(m);

    /* corrupt variants of a valid file */
    size_t n;
    unsigned char *b = read_all(path("checkpoint", "attn-only.safetensors"), &n);
    write_bytes("checkpoint", "bad-truncated.safetensors", b, n / 2);
    unsigned char nan[4] = {0x00, 0x00, 0xc0, 0x7f};
    unsigned char *c2 = malloc(n);
    memcpy(c2, b, n);
    memcpy(c2 + n - 4, nan, 4);
    write_bytes("checkpoint", "bad-nan.safetensors", c2, n);
    memcpy(c2, b, n);
    c2[7] = 0x7f; /* header length beyond the file */
    write_bytes("checkpoint", "bad-header-length.safetensors", c2, n);
    free(c2);
    free(b);

    /* hand-made headers */
    float d[8] = {0};
    write_st("bad-empty-object.safetensors", "{}", NULL, 0);
    write_st("bad-not-object.safetensors", "[1,2]", NULL, 0);
    write_st("bad-json.safetensors", "{\"a\":", NULL, 0);
    write_st("bad-overlap.safetensors",
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
             d, 12);
    write_st("bad-hole.safetensors",
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
             d, 12);
    write_st("bad-duplicate.safetensors",
             "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
             d, 8);
    write_st("bad-dtype-f16.safetensors",
             "{\"__metadata__\":{\"n_layers\":\"1\",\"n_ctx\":\"2\",\"d_model\":\"2\","
             "\"n_heads\":\"1\",\"d_vocab\":\"2\"},"
             "\"embed.W_E\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}",
             d, 8);
    write_st("bad-metadata.safetensors",
             "{\"__metadata__\":{\"n_layers\":\"99999999999\",\"format_version\":\"3\","
             "\"n_heads\":7},\"x\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}",
             NULL, 0);
    write_st("bad-dims.safetensors",
             "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}",
             d, 1);
}

static void config_seed(const char *name, uint8_t sel, const void *s, size_t n,
                        const uint8_t *extra, size_t n_extra) {
    unsigned char b[4200];
    b[0] = sel;
    memcpy(b + 1, s, n);
    if (n_extra) memcpy(b + 1 + n, extra, n_extra);
    write_bytes("config", name, b, 1 + n + n_extra);
}

/* Settings bytes + the bytes of a file the library wrote. */
static void tokenfile_seed(const char *name, const uint8_t settings[8], uint32_t format,
                           const int32_t *tok, size_t n, size_t cut) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/tokenfile/.tmp", dir);
    if (induct_token_file_write(tmp, format, tok, n)) die("token file");
    size_t len;
    unsigned char *b = read_all(tmp, &len);
    remove(tmp);
    if (cut && cut < len) len = cut; /* truncated variant */
    unsigned char *o = malloc(8 + len);
    memcpy(o, settings, 8);
    memcpy(o + 8, b, len);
    write_bytes("tokenfile", name, o, 8 + len);
    free(o);
    free(b);
}

static void tokenfiles(void) {
    int32_t tok[300];
    for (int i = 0; i < 300; i++) tok[i] = (i * 7) % 50;
    /* settings: format | flags, d_vocab byte (1 + 257 b), n_eval_windows, val_fraction,
     * block_tokens, resident pages, seq_len - 2, batch index (fuzz_tokenfile.c) */
    const uint8_t u16[8] = {0, 1, 8, 26, 64, 0, 14, 0}, u32val[8] = {1 | 4, 1, 8, 26, 64, 1, 6, 3},
                  llmc[8] = {2, 1, 4, 26, 32, 0, 10, 1}, inferred[8] = {2 | 8, 0, 4, 26, 32, 1, 10, 1};
    tokenfile_seed("u16", u16, INDUCT_TOKFILE_U16, tok, 300, 0);
    tokenfile_seed("u32-separate-val", u32val, INDUCT_TOKFILE_U32, tok, 300, 0);
    tokenfile_seed("llmc", llmc, INDUCT_TOKFILE_LLMC, tok, 300, 0);
    tokenfile_seed("llmc-vocab-inferred", inferred, INDUCT_TOKFILE_LLMC, tok, 300, 0);
    tokenfile_seed("bad-llmc-truncated", llmc, INDUCT_TOKFILE_LLMC, tok, 300, 1024 + 101);
    tokenfile_seed("bad-llmc-header-only", llmc, INDUCT_TOKFILE_LLMC, tok, 300, 1000);
    tokenfile_seed("bad-u16-odd-size", u16, INDUCT_TOKFILE_U16, tok, 30, 59);
    const uint8_t small_vocab[8] = {0, 0, 8, 26, 64, 0, 14, 0}; /* d_vocab 1: ids too large */
    tokenfile_seed("bad-u16-id-range", small_vocab, INDUCT_TOKFILE_U16, tok, 30, 0);
    const uint8_t tables[8] = {0 | 16, 1, 2, 128, 1, 0, 6, 0}; /* 1-token blocks, 129-byte cap */
    tokenfile_seed("capped-tiny-blocks", tables, INDUCT_TOKFILE_U16, tok, 300, 0);
}

static void text_seed(const char *name, const uint8_t settings[8], const char *text) {
    size_t n = strlen(text);
    unsigned char *o = malloc(8 + n);
    memcpy(o, settings, 8);
    memcpy(o + 8, text, n);
    write_bytes("text", name, o, 8 + n);
    free(o);
}

static void texts(void) {
    static const char para[] =
        "In the beginning the model sees tokens it cannot predict; later it copies what "
        "followed an earlier occurrence of the current token. That is an induction head. "
        "The loss of late tokens falls below the loss of early ones. ";
    char doc3[sizeof para * 3 + 4];
    snprintf(doc3, sizeof doc3, "%s\xff%s\xff%s", para, para + 20, para + 40);
    /* settings: flags (bos, document split, directory, suffix), separator, n_eval_windows,
     * val_fraction, block_tokens, seed | cap bit, seq_len - 2, batch index (fuzz_text.c) */
    const uint8_t mem[8] = {1, 10, 8, 26, 32, 3, 20, 0}, docs[8] = {2 | 4, 255, 4, 80, 0, 1, 10, 2},
                  suffix[8] = {4 | 8, 10, 4, 26, 64, 1, 10, 0}, capped[8] = {0, 10, 4, 26, 64, 0x82, 10, 0};
    text_seed("memory-bos", mem, para);
    text_seed("directory-by-document", docs, doc3);
    text_seed("directory-suffix", suffix, doc3);
    text_seed("capped", capped, para);
}

static void configs(void) {
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    config_seed("model-default", 0x80, &mc, sizeof mc, NULL, 0);
    mc.n_layers = 1;
    mc.d_model = 8;
    mc.n_heads = 2;
    mc.n_ctx = 8;
    mc.d_vocab = 11;
    mc.d_mlp = 16;
    mc.layer_norm = 1;
    mc.smeared_keys = 1;
    mc.positional = INDUCT_POS_SHORTFORMER;
    config_seed("model-tiny-mlp", 0x80, &mc, sizeof mc, NULL, 0);
    mc.n_ctx = 1u << 30; /* n_ctx far beyond the cap: refused (W_pos) */
    config_seed("model-big-ctx", 0x80, &mc, sizeof mc, NULL, 0);
    mc.positional = INDUCT_POS_NONE; /* ...unless there is no W_pos */
    config_seed("model-big-ctx-nopos", 0x80, &mc, sizeof mc, NULL, 0);
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    uint8_t shape[2] = {3, 30};
    config_seed("rrt-default", 0x81, &rc, sizeof rc, shape, 2);
    rc.bos = 63;
    rc.token_hi = 63;
    rc.distinct_block = 1;
    rc.n_repeats = 3;
    rc.max_block = 10;
    config_seed("rrt-bos-distinct", 0x81, &rc, sizeof rc, shape, 2);
    induct_train_config tc;
    induct_train_config_init(&tc, sizeof tc);
    tc.steps = 4;
    tc.batch = 2;
    tc.seq_len = 8;
    tc.eval_every = 1;
    tc.eval_batch = 2;
    tc.metrics = INDUCT_TRAIN_METRIC_LOSS | INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN |
                 INDUCT_TRAIN_METRIC_INDUCTION_SCORE;
    config_seed("train-eval", 0x82, &tc, sizeof tc, NULL, 0);
    tc.batch = 1u << 20; /* a batch beyond the model's cap: ELIMIT before any step */
    config_seed("train-big-batch", 0x82, &tc, sizeof tc, NULL, 0);
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec);
    ec.n_seq = 4;
    ec.chunk = 2;
    ec.early = 3;
    ec.late = 20;
    config_seed("eval-small", 0x83, &ec, sizeof ec, NULL, 0);
    ec.n_seq = 1u << 24; /* an evaluation set beyond the model's cap */
    config_seed("eval-huge", 0x83, &ec, sizeof ec, NULL, 0);
    induct_probe_config pc;
    induct_probe_config_init(&pc, sizeof pc);
    pc.n_seq = 2;
    pc.block_len = 5;
    pc.n_repeats = 3;
    pc.token_hi = 10;
    pc.bos = 10;
    config_seed("probe-small", 0x84, &pc, sizeof pc, NULL, 0);
    pc.n_seq = 1u << 30;
    config_seed("probe-huge", 0x84, &pc, sizeof pc, NULL, 0);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <tests/fuzz directory>\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    checkpoints();
    configs();
    tokenfiles();
    texts();
    return 0;
}
