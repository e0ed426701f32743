/* Checkpoints: bit-exact round trips for every variant, the documented layout,
 * optimizer state, every corrupt-file case with its code, and atomic saves under a
 * killed writer. Links the shared library (public API) and cJSON (to craft files). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

enum { B = 2, T = 7 };

typedef tu_variant variant;
#define VARIANTS TU_VARIANTS
#define N_VARIANTS TU_N_VARIANTS

/* ---- helpers ------------------------------------------------------------------ */

static char dir[64];
static char path_a[128], path_b[128];

static void setup_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/induct-ckpt-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path_a, sizeof path_a, "%s/a.safetensors", dir);
    snprintf(path_b, sizeof path_b, "%s/b.safetensors", dir);
}

static void teardown_dir(void) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

static induct_model *make(const variant *v, uint64_t seed) {
    induct_model_config c;
    tu_tiny_config(&c);
    tu_variant_apply(&c, v);
    c.smear_alpha_init = 0.3;
    c.init = INDUCT_INIT_TORCH;
    c.seed = seed;
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, 0.5, seed);
    return m;
}

static induct_model *make_default(void) { return make(&VARIANTS[TU_EVERYTHING], 3); }

/* Every parameter tensor of a and b is bitwise equal. */
static void assert_same_weights(induct_model *a, induct_model *b) {
    ck_assert_uint_eq(induct_model_n_tensors(a), induct_model_n_tensors(b));
    for (size_t i = 0; i < induct_model_n_tensors(a); i++) {
        const char *na, *nb;
        size_t n, len;
        ck_ok(induct_model_tensor_info(a, i, &na, NULL, NULL, &n));
        ck_ok(induct_model_tensor_info(b, i, &nb, NULL, NULL, NULL));
        ck_assert_str_eq(na, nb);
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        ck_ok(induct_model_get_tensor(a, na, INDUCT_BUF_PARAM, x, n, &len));
        ck_ok(induct_model_get_tensor(b, na, INDUCT_BUF_PARAM, y, n, &len));
        ck_assert_msg(memcmp(x, y, n * sizeof *x) == 0, "tensor %s differs", na);
        free(x);
        free(y);
    }
}

typedef struct blob {
    unsigned char *p;
    size_t n;
} blob;

static blob slurp(const char *path) {
    blob b = {0};
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    b.n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    b.p = malloc(b.n + 1);
    ck_assert_uint_eq(fread(b.p, 1, b.n, f), b.n);
    fclose(f);
    return b;
}

static void spit(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    fclose(f);
}

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Parse the header of a saved file. */
static cJSON *header_of(const blob *b) {
    uint64_t n = le64(b->p);
    cJSON *root = cJSON_ParseWithLength((const char *)b->p + 8, (size_t)n);
    ck_assert_ptr_nonnull(root);
    return root;
}

/* Write `root` + data to `dst`. repack = 1: tensors are laid out contiguously in the
 * header's order, each copying the bytes its (old) data_offsets named in `data`. */
static void write_with(const char *dst, cJSON *root, const unsigned char *data, int repack) {
    size_t total = 0;
    unsigned char *out = NULL;
    if (repack) {
        for (cJSON *e = root->child; e; e = e->next) {
            if (!strcmp(e->string, "__metadata__")) continue;
            cJSON *of = cJSON_GetObjectItem(e, "data_offsets");
            size_t b = (size_t)of->child->valuedouble, en = (size_t)of->child->next->valuedouble;
            out = realloc(out, total + (en - b) + 1);
            memcpy(out + total, data + b, en - b);
            cJSON_SetNumberValue(of->child, (double)total);
            cJSON_SetNumberValue(of->child->next, (double)(total + en - b));
            total += en - b;
        }
    }
    char *h = cJSON_PrintUnformatted(root);
    size_t hl = strlen(h);
    FILE *f = fopen(dst, "wb");
    ck_assert_ptr_nonnull(f);
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    fwrite(lb, 1, 8, f);
    fwrite(h, 1, hl, f);
    if (repack) fwrite(out, 1, total, f);
    fclose(f);
    free(h);
    free(out);
}

/* Load `src`, let `mut` change the header, write `dst` keeping the original data
 * section (repack 0) or re-laying it out (repack 1). */
static void mutate(const char *src, const char *dst, void (*mut)(cJSON *), int repack) {
    blob b = slurp(src);
    cJSON *root = header_of(&b);
    mut(root);
    if (repack) {
        write_with(dst, root, b.p + 8 + le64(b.p), 1);
    } else {
        write_with(dst, root, NULL, 0);
        FILE *f = fopen(dst, "ab");
        size_t off = 8 + (size_t)le64(b.p);
        fwrite(b.p + off, 1, b.n - off, f);
        fclose(f);
    }
    cJSON_Delete(root);
    free(b.p);
}

/* Load must fail with `code` and a message containing `needle`. */
static void expect_load_fails(const char *path, int code, const char *needle) {
    induct_model *m = (induct_model *)(intptr_t)1;
    int rc = induct_model_load(&m, path);
    ck_assert_msg(rc == code, "load returned %s (%s), expected %s", induct_status_name(rc),
                  induct_last_error_message(), induct_status_name(code));
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(induct_last_error_message(), needle) != NULL,
                  "message '%s' does not mention '%s'", induct_last_error_message(), needle);
}

static cJSON *entry(cJSON *root, const char *name) {
    cJSON *e = cJSON_GetObjectItemCaseSensitive(root, name);
    ck_assert_ptr_nonnull(e);
    return e;
}

/* ---- round trips -------------------------------------------------------------- */

START_TEST(test_roundtrip_variant) {
    setup_dir();
    const variant *v = &VARIANTS[_i];
    induct_model *m = make(v, 11 + (uint64_t)_i), *l;
    ck_ok(induct_model_save(m, path_a));
    ck_ok(induct_model_load(&l, path_a));
    induct_model_config a, b;
    a.size = b.size = sizeof a;
    ck_ok(induct_model_get_config(m, &a));
    ck_ok(induct_model_get_config(l, &b));
    ck_assert_int_eq(memcmp(&a, &b, sizeof a), 0);
    assert_same_weights(m, l);
    int32_t tok[B * T];
    tu_tokens(tok, B * T, 11, 9);
    float la[B * T * 11], lb[B * T * 11];
    ck_ok(induct_model_forward(m, tok, B, T, la, B * T * 11, NULL, 0, NULL));
    ck_ok(induct_model_forward(l, tok, B, T, lb, B * T * 11, NULL, 0, NULL));
    ck_assert_int_eq(memcmp(la, lb, sizeof la), 0);
    /* saving the loaded model again gives the same bytes */
    ck_ok(induct_model_save(l, path_b));
    blob x = slurp(path_a), y = slurp(path_b);
    ck_assert_uint_eq(x.n, y.n);
    ck_assert_int_eq(memcmp(x.p, y.p, x.n), 0);
    free(x.p);
    free(y.p);
    induct_model_free(m);
    induct_model_free(l);
    teardown_dir();
}
END_TEST

START_TEST(test_layout) {
    setup_dir();
    induct_model *m = make_default();
    ck_ok(induct_model_save(m, path_a));
    blob b = slurp(path_a);
    uint64_t n = le64(b.p);
    ck_assert_uint_eq((8 + n) % 8, 0);
    ck_assert_uint_eq(b.n, 8 + n + 4 * induct_model_n_params(m));
    cJSON *root = header_of(&b);
    cJSON *meta = entry(root, "__metadata__");
    ck_assert_str_eq(cJSON_GetObjectItem(meta, "format_version")->valuestring, "1");
    ck_assert_str_eq(cJSON_GetObjectItem(meta, "library_version")->valuestring,
                     induct_version_string());
    ck_assert_str_eq(cJSON_GetObjectItem(meta, "positional_embedding_type")->valuestring,
                     "shortformer");
    ck_assert_str_eq(cJSON_GetObjectItem(meta, "d_mlp")->valuestring, "12");
    /* every tensor: TL name and shape from the model, F32, data = the weights */
    size_t nt = induct_model_n_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        uint32_t shape[4], nd;
        size_t numel, len;
        ck_ok(induct_model_tensor_info(m, i, &name, shape, &nd, &numel));
        cJSON *e = entry(root, name);
        ck_assert_str_eq(cJSON_GetObjectItem(e, "dtype")->valuestring, "F32");
        cJSON *sh = cJSON_GetObjectItem(e, "shape");
        ck_assert_int_eq(cJSON_GetArraySize(sh), (int)nd);
        for (uint32_t d = 0; d < nd; d++)
            ck_assert_uint_eq((uint32_t)cJSON_GetArrayItem(sh, (int)d)->valuedouble, shape[d]);
        cJSON *of = cJSON_GetObjectItem(e, "data_offsets");
        size_t off = (size_t)of->child->valuedouble;
        float *w = malloc(numel * sizeof *w), *f = malloc(numel * sizeof *f);
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, w, numel, &len));
        for (size_t j = 0; j < numel; j++) { /* little-endian bytes, decoded by hand */
            const unsigned char *q = b.p + 8 + n + off + 4 * j;
            uint32_t u = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
                         (uint32_t)q[3] << 24;
            memcpy(&f[j], &u, 4);
        }
        ck_assert_int_eq(memcmp(w, f, numel * sizeof *w), 0);
        free(w);
        free(f);
    }
    ck_assert_ptr_nonnull(cJSON_GetObjectItem(root, "blocks.1.attn.smear_alpha"));
    cJSON_Delete(root);
    free(b.p);
    induct_model_free(m);
    teardown_dir();
}
END_TEST

/* Resume through a file: k steps, save, load both, one more step on each: identical. */
static void optimizer_roundtrip(uint32_t kind) {
    setup_dir();
    induct_model *m = make_default();
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, kind));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_LR, 0.01));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_WARMUP_STEPS, 3));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_SCHEDULE, 1));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_TOTAL_STEPS, 20));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_GRAD_CLIP, 0.7));
    if (kind == INDUCT_OPTIM_SGD) ck_ok(induct_optimizer_set(o, INDUCT_OPT_MOMENTUM, 0.9));
    int32_t tok[B * T];
    for (int s = 0; s < 3; s++) {
        tu_tokens(tok, B * T, 11, 100 + (uint64_t)s);
        ck_ok(induct_train_step_tokens(o, tok, B, T, NULL));
    }
    ck_ok(induct_optimizer_save(o, path_a));
    induct_model *m2;
    induct_optimizer *o2;
    ck_ok(induct_model_load(&m2, path_a));
    ck_ok(induct_optimizer_load(&o2, m2, path_a));
    for (int p = INDUCT_OPT_LR; p <= INDUCT_OPT_STEP; p++) {
        double a, b;
        ck_ok(induct_optimizer_get(o, (induct_opt_param)p, &a));
        ck_ok(induct_optimizer_get(o2, (induct_opt_param)p, &b));
        ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "parameter %d: %.17g vs %.17g", p, a, b);
    }
    for (int s = 3; s < 5; s++) {
        tu_tokens(tok, B * T, 11, 100 + (uint64_t)s);
        ck_ok(induct_train_step_tokens(o, tok, B, T, NULL));
        ck_ok(induct_train_step_tokens(o2, tok, B, T, NULL));
    }
    assert_same_weights(m, m2);
    /* and the state files after those steps are byte-identical (moments included) */
    ck_ok(induct_optimizer_save(o, path_a));
    ck_ok(induct_optimizer_save(o2, path_b));
    blob x = slurp(path_a), y = slurp(path_b);
    ck_assert_uint_eq(x.n, y.n);
    ck_assert_int_eq(memcmp(x.p, y.p, x.n), 0);
    size_t per = kind == INDUCT_OPTIM_ADAMW ? 3 : 2;
    ck_assert_uint_eq(x.n, 8 + le64(x.p) + 4 * per * induct_model_n_params(m));
    free(x.p);
    free(y.p);
    induct_optimizer_free(o);
    induct_optimizer_free(o2);
    induct_model_free(m);
    induct_model_free(m2);
    teardown_dir();
}

START_TEST(test_optimizer_adamw) { optimizer_roundtrip(INDUCT_OPTIM_ADAMW); }
END_TEST
START_TEST(test_optimizer_sgd) { optimizer_roundtrip(INDUCT_OPTIM_SGD); }
END_TEST

START_TEST(test_optimizer_file_errors) {
    setup_dir();
    induct_model *m = make_default();
    ck_ok(induct_model_save(m, path_a));
    induct_optimizer *o = (induct_optimizer *)(intptr_t)1;
    ck_assert_status(induct_optimizer_load(&o, m, path_a), INDUCT_EFORMAT); /* no state */
    ck_assert_ptr_null(o);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "optimizer"));
    /* state for another architecture */
    induct_optimizer *o1;
    ck_ok(induct_optimizer_new(&o1, m, INDUCT_OPTIM_ADAMW));
    ck_ok(induct_optimizer_save(o1, path_b));
    induct_model *other = make(&VARIANTS[0], 3);
    ck_assert_status(induct_optimizer_load(&o, other, path_b), INDUCT_EFORMAT);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "optimizer."));
    /* the model loader reads an optimizer file (ignoring optimizer.*) */
    induct_model *l;
    ck_ok(induct_model_load(&l, path_b));
    assert_same_weights(m, l);
    induct_model_free(l);
    induct_optimizer_free(o1);
    induct_model_free(other);
    induct_model_free(m);
    teardown_dir();
}
END_TEST

/* ---- corrupt files ------------------------------------------------------------- */

static induct_model *saved_default(void) {
    setup_dir();
    induct_model *m = make_default();
    ck_ok(induct_model_save(m, path_a));
    return m;
}

START_TEST(test_truncated) {
    induct_model *m = saved_default();
    blob b = slurp(path_a);
    uint64_t n = le64(b.p);
    spit(path_b, b.p, 5); /* shorter than the length field */
    expect_load_fails(path_b, INDUCT_EFORMAT, "truncated");
    spit(path_b, b.p, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "truncated");
    spit(path_b, b.p, 8 + (size_t)n / 2); /* inside the header */
    expect_load_fails(path_b, INDUCT_EFORMAT, "beyond the end of the file");
    spit(path_b, b.p, b.n - 3); /* inside the last tensor */
    expect_load_fails(path_b, INDUCT_EFORMAT, "unembed.b_U");
    free(b.p);
    induct_model_free(m);
    teardown_dir();
}
END_TEST

START_TEST(test_header_length_beyond_file) {
    induct_model *m = saved_default();
    blob b = slurp(path_a);
    for (int i = 0; i < 8; i++) b.p[i] = 0xff;
    spit(path_b, b.p, b.n);
    expect_load_fails(path_b, INDUCT_EFORMAT, "beyond the end of the file");
    uint64_t big = b.n; /* just one byte too long */
    for (int i = 0; i < 8; i++) b.p[i] = (unsigned char)((big - 7) >> (8 * i));
    spit(path_b, b.p, b.n);
    expect_load_fails(path_b, INDUCT_EFORMAT, "beyond the end of the file");
    free(b.p);
    induct_model_free(m);
    teardown_dir();
}
END_TEST

static void mut_overlap(cJSON *root) {
    /* W_K starts 4 bytes into W_Q (same span) */
    cJSON *q = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "blocks.0.attn.W_Q"), "data_offsets");
    cJSON *k = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "blocks.0.attn.W_K"), "data_offsets");
    double span = k->child->next->valuedouble - k->child->valuedouble;
    cJSON_SetNumberValue(k->child, q->child->valuedouble + 4);
    cJSON_SetNumberValue(k->child->next, q->child->valuedouble + 4 + span);
}
static void mut_out_of_range(cJSON *root) {
    cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "unembed.b_U"), "data_offsets");
    cJSON_SetNumberValue(o->child, o->child->valuedouble + 4096);
    cJSON_SetNumberValue(o->child->next, o->child->next->valuedouble + 4096);
}
static void mut_negative_offset(cJSON *root) {
    cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "embed.W_E"), "data_offsets");
    cJSON_SetNumberValue(o->child, -4);
}
static void mut_reversed_offsets(cJSON *root) {
    cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "embed.W_E"), "data_offsets");
    double b = o->child->valuedouble, e = o->child->next->valuedouble;
    cJSON_SetNumberValue(o->child, e);
    cJSON_SetNumberValue(o->child->next, b);
}

START_TEST(test_offsets) {
    induct_model *m = saved_default();
    mutate(path_a, path_b, mut_overlap, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "overlap");
    mutate(path_a, path_b, mut_out_of_range, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "unembed.b_U");
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "beyond the data section"));
    mutate(path_a, path_b, mut_negative_offset, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "embed.W_E");
    mutate(path_a, path_b, mut_reversed_offsets, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "embed.W_E");
    /* trailing bytes after the last tensor */
    blob b = slurp(path_a);
    b.p = realloc(b.p, b.n + 4);
    memset(b.p + b.n, 0, 4);
    spit(path_b, b.p, b.n + 4);
    expect_load_fails(path_b, INDUCT_EFORMAT, "trailing");
    free(b.p);
    induct_model_free(m);
    teardown_dir();
}
END_TEST

static void mut_dtype_i32(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "blocks.1.attn.W_V"), "dtype",
                              cJSON_CreateString("I32"));
}
static void mut_dtype_f16(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "blocks.1.attn.W_V"), "dtype",
                              cJSON_CreateString("F16"));
}
static void mut_dtype_unknown(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "blocks.1.attn.W_V"), "dtype",
                              cJSON_CreateString("Q4"));
}

START_TEST(test_wrong_dtype) {
    induct_model *m = saved_default();
    mutate(path_a, path_b, mut_dtype_i32, 0); /* same byte size: refused as a dtype */
    expect_load_fails(path_b, INDUCT_EFORMAT, "blocks.1.attn.W_V");
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "dtype I32"));
    mutate(path_a, path_b, mut_dtype_f16, 0); /* half the bytes: the span is wrong */
    expect_load_fails(path_b, INDUCT_EFORMAT, "blocks.1.attn.W_V");
    mutate(path_a, path_b, mut_dtype_unknown, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "unknown dtype");
    induct_model_free(m);
    teardown_dir();
}
END_TEST

static void mut_shape_permuted(cJSON *root) {
    /* W_O [2, 4, 8] -> [2, 8, 4]: same size, wrong shape */
    cJSON *sh = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "blocks.0.attn.W_O"), "shape");
    cJSON_SetNumberValue(cJSON_GetArrayItem(sh, 1), 8);
    cJSON_SetNumberValue(cJSON_GetArrayItem(sh, 2), 4);
}
static void mut_shape_flat(cJSON *root) {
    cJSON *e = cJSON_GetObjectItem(root, "blocks.0.attn.b_Q"); /* [2, 4] -> [8] */
    cJSON *sh = cJSON_CreateArray();
    cJSON_AddItemToArray(sh, cJSON_CreateNumber(8));
    cJSON_ReplaceItemInObject(e, "shape", sh);
}
static void mut_shape_size(cJSON *root) {
    cJSON *sh = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "unembed.b_U"), "shape");
    cJSON_SetNumberValue(cJSON_GetArrayItem(sh, 0), 12); /* 11 -> 12, data still 44 bytes */
}

START_TEST(test_wrong_shape) {
    induct_model *m = saved_default();
    mutate(path_a, path_b, mut_shape_permuted, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "blocks.0.attn.W_O");
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "[2, 8, 4]"));
    mutate(path_a, path_b, mut_shape_flat, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "blocks.0.attn.b_Q");
    mutate(path_a, path_b, mut_shape_size, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "unembed.b_U");
    induct_model_free(m);
    teardown_dir();
}
END_TEST

static void mut_missing(cJSON *root) { cJSON_DeleteItemFromObject(root, "blocks.1.mlp.b_in"); }
static void mut_missing_alpha(cJSON *root) {
    cJSON_DeleteItemFromObject(root, "blocks.0.attn.smear_alpha");
}
static void mut_extra(cJSON *root) {
    /* a well-formed extra tensor holding a copy of b_U's bytes */
    cJSON *src = cJSON_GetObjectItem(root, "unembed.b_U");
    cJSON_AddItemToObject(root, "blocks.0.attn.IGNORE", cJSON_Duplicate(src, 1));
}
static void mut_extra_opt(cJSON *root) {
    cJSON *src = cJSON_GetObjectItem(root, "unembed.b_U");
    cJSON_AddItemToObject(root, "optimizer.m.unembed.b_U", cJSON_Duplicate(src, 1));
}

START_TEST(test_missing_and_extra) {
    induct_model *m = saved_default();
    mutate(path_a, path_b, mut_missing, 1);
    expect_load_fails(path_b, INDUCT_EFORMAT, "tensor 'blocks.1.mlp.b_in' is missing");
    mutate(path_a, path_b, mut_missing_alpha, 1);
    expect_load_fails(path_b, INDUCT_EFORMAT, "blocks.0.attn.smear_alpha");
    mutate(path_a, path_b, mut_extra, 1);
    expect_load_fails(path_b, INDUCT_EFORMAT, "unknown tensor 'blocks.0.attn.IGNORE'");
    /* tensors under optimizer. are left to induct_optimizer_load() */
    mutate(path_a, path_b, mut_extra_opt, 1);
    induct_model *l;
    ck_ok(induct_model_load(&l, path_b));
    assert_same_weights(m, l);
    induct_model_free(l);
    /* ... which refuses a partial state (no optimizer metadata) */
    induct_optimizer *o;
    ck_assert_status(induct_optimizer_load(&o, m, path_b), INDUCT_EFORMAT);
    induct_model_free(m);
    teardown_dir();
}
END_TEST

START_TEST(test_bad_json) {
    induct_model *m = saved_default();
    blob b = slurp(path_a);
    uint64_t n = le64(b.p);
    unsigned char *colon = memchr(b.p + 8, ':', (size_t)n);
    ck_assert_ptr_nonnull(colon);
    *colon = ';';
    spit(path_b, b.p, b.n);
    expect_load_fails(path_b, INDUCT_EFORMAT, "not valid JSON");
    *colon = ':';
    b.p[8] = '['; /* an array, not an object: also unparsable here */
    spit(path_b, b.p, b.n);
    expect_load_fails(path_b, INDUCT_EFORMAT, "JSON");
    b.p[8] = '{';
    b.p[8 + n - 1] = 'x'; /* garbage in the padding */
    spit(path_b, b.p, b.n);
    expect_load_fails(path_b, INDUCT_EFORMAT, "not valid JSON");
    free(b.p);
    /* a header that is a JSON array */
    const char *arr = "[1, 2]  ";
    unsigned char buf[16] = {8, 0, 0, 0, 0, 0, 0, 0};
    memcpy(buf + 8, arr, 8);
    spit(path_b, buf, 16);
    expect_load_fails(path_b, INDUCT_EFORMAT, "not a JSON object");
    induct_model_free(m);
    teardown_dir();
}
END_TEST

static void mut_version3(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "__metadata__"), "format_version",
                              cJSON_CreateString("3"));
}
static void mut_version_bad(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "__metadata__"), "format_version",
                              cJSON_CreateString("one"));
}
static void mut_meta_bad_number(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "__metadata__"), "n_heads",
                              cJSON_CreateString("-2"));
}
static void mut_meta_non_string(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "__metadata__"), "n_heads",
                              cJSON_CreateNumber(2));
}
static void mut_meta_config_mismatch(cJSON *root) {
    /* metadata says 4 heads of 2: W_Q [2, 8, 4] no longer fits the config */
    cJSON *meta = cJSON_GetObjectItem(root, "__metadata__");
    cJSON_ReplaceItemInObject(meta, "n_heads", cJSON_CreateString("4"));
    cJSON_ReplaceItemInObject(meta, "d_head", cJSON_CreateString("2"));
}
static void mut_meta_act(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "__metadata__"), "act_fn",
                              cJSON_CreateString("relu"));
}
static void mut_meta_huge(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "__metadata__"), "n_layers",
                              cJSON_CreateString("1000000"));
}
static void mut_duplicate(cJSON *root) {
    cJSON_AddItemToObject(root, "embed.W_E",
                          cJSON_Duplicate(cJSON_GetObjectItem(root, "embed.W_E"), 1));
}

START_TEST(test_metadata) {
    induct_model *m = saved_default();
    mutate(path_a, path_b, mut_version3, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "format version 3 is newer");
    mutate(path_a, path_b, mut_version_bad, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "format_version");
    mutate(path_a, path_b, mut_meta_bad_number, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "n_heads");
    mutate(path_a, path_b, mut_meta_non_string, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "n_heads");
    mutate(path_a, path_b, mut_meta_config_mismatch, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "blocks.0.attn.W_Q");
    mutate(path_a, path_b, mut_meta_act, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "act_fn");
    mutate(path_a, path_b, mut_meta_huge, 0); /* refused before allocating 10^6 layers */
    expect_load_fails(path_b, INDUCT_EFORMAT, "tensor 'blocks.2.attn.W_Q' is missing");
    mutate(path_a, path_b, mut_duplicate, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "appears twice");
    induct_model_free(m);
    teardown_dir();
}
END_TEST

static void mut_shortformer_layers_3(cJSON *root) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "__metadata__"), "shortformer_layers",
                              cJSON_CreateString("3"));
}

/* shortformer_layers: stated (and format version 2) only when set, checked on load */
START_TEST(test_shortformer_layers_meta) {
    setup_dir();
    induct_model *o2;
    induct_model *m = make(&VARIANTS[TU_N_VARIANTS - 2], 5);
    ck_assert_str_eq(VARIANTS[TU_N_VARIANTS - 2].name, "shortformer-layer0");
    ck_ok(induct_model_save(m, path_a));
    blob b = slurp(path_a);
    cJSON *root = header_of(&b), *meta = cJSON_GetObjectItem(root, "__metadata__");
    ck_assert_str_eq(cJSON_GetObjectItem(meta, "format_version")->valuestring, "2");
    ck_assert_str_eq(cJSON_GetObjectItem(meta, "shortformer_layers")->valuestring, "1");
    cJSON_Delete(root);
    free(b.p);
    /* a file of an ordinary model does not carry the key and stays version 1 */
    induct_model *o = make(&VARIANTS[3], 5);
    ck_assert_uint_eq(VARIANTS[3].shortformer_layers, 0);
    ck_ok(induct_model_save(o, path_b));
    b = slurp(path_b);
    root = header_of(&b);
    meta = cJSON_GetObjectItem(root, "__metadata__");
    ck_assert_str_eq(cJSON_GetObjectItem(meta, "format_version")->valuestring, "1");
    ck_assert_ptr_null(cJSON_GetObjectItem(meta, "shortformer_layers"));
    cJSON_Delete(root);
    free(b.p);
    induct_model_free(o);
    /* more layers than the model has: the config is invalid */
    mutate(path_a, path_b, mut_shortformer_layers_3, 0);
    expect_load_fails(path_b, INDUCT_EFORMAT, "shortformer_layers");
    /* a given config must agree with the file */
    induct_model_config c;
    c.size = sizeof c;
    ck_ok(induct_model_get_config(m, &c));
    c.shortformer_layers = 0;
    induct_model *l = (induct_model *)(intptr_t)1;
    ck_assert_int_eq(induct_model_load_config(&l, path_a, &c), INDUCT_EFORMAT);
    ck_assert_ptr_null(l);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "shortformer_layers"));
    c.shortformer_layers = 1;
    ck_ok(induct_model_load_config(&l, path_a, &c));
    induct_model_free(l);
    /* a caller compiled against the 0.1.0 header (an 88-byte config) cannot hold the
     * field: get_config refuses rather than hand back a config of another model */
    induct_model_config old;
    memset(&old, 0xcd, sizeof old);
    old.size = 88;
    ck_assert_int_eq(induct_model_get_config(m, &old), INDUCT_EABI);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "shortformer_layers"));
    /* the same caller loads an ordinary file with its own config */
    ck_ok(induct_model_get_config(o2 = make(&VARIANTS[3], 5), &c));
    ck_ok(induct_model_save(o2, path_b));
    memcpy(&old, &c, 88);
    old.size = 88;
    memset((char *)&old + 88, 0xcd, sizeof old - 88); /* not the caller's: never read */
    ck_ok(induct_model_load_config(&l, path_b, &old));
    ck_ok(induct_model_get_config(l, &old));
    ck_assert_uint_eq(((unsigned char *)&old)[88], 0xcd); /* nothing past its size */
    induct_model_free(l);
    induct_model_free(o2);
    induct_model_free(m);
    teardown_dir();
}
END_TEST

START_TEST(test_non_finite) {
    induct_model *m = saved_default();
    blob b = slurp(path_a);
    uint32_t nan_bits = 0x7fc00000u;
    unsigned char *last = b.p + b.n - 4; /* last element of unembed.b_U */
    for (int i = 0; i < 4; i++) last[i] = (unsigned char)(nan_bits >> (8 * i));
    spit(path_b, b.p, b.n);
    expect_load_fails(path_b, INDUCT_EFORMAT, "unembed.b_U");
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "not finite"));
    free(b.p);
    induct_model_free(m);
    teardown_dir();
}
END_TEST

START_TEST(test_io_errors) {
    setup_dir();
    induct_model *m = make_default(), *l;
    char p[160];
    snprintf(p, sizeof p, "%s/missing.safetensors", dir);
    ck_assert_status(induct_model_load(&l, p), INDUCT_EIO);
    snprintf(p, sizeof p, "%s/no/such/dir.safetensors", dir);
    ck_assert_status(induct_model_save(m, p), INDUCT_EIO);
    ck_assert_status(induct_model_save(m, ""), INDUCT_EINVAL);
    ck_assert_status(induct_model_save(NULL, path_a), INDUCT_EINVAL);
    ck_assert_status(induct_model_load(NULL, path_a), INDUCT_EINVAL);
    ck_assert_status(induct_model_load(&l, dir), INDUCT_EIO); /* a directory */
    induct_model_free(m);
    teardown_dir();
}
END_TEST

/* Random corruption of header bytes and length: the loader never crashes or reads
 * out of bounds (run under ASan/valgrind to see the latter) and answers OK or EFORMAT. */
START_TEST(test_random_corruption) {
    induct_model *m = saved_default();
    blob b = slurp(path_a);
    uint64_t n = le64(b.p);
    uint64_t s = 99;
    int ok = 0, bad = 0;
    unsigned char *c = malloc(b.n);
    for (int it = 0; it < 400; it++) {
        memcpy(c, b.p, b.n);
        int flips = 1 + (int)((s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 62);
        for (int k = 0; k < flips; k++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t pos = (size_t)((s >> 20) % (8 + n)); /* length field or header */
            c[pos] = (unsigned char)(s >> 8);
        }
        size_t len = b.n;
        if (it % 7 == 0) len = (size_t)((s >> 24) % b.n); /* and some truncations */
        spit(path_b, c, len);
        induct_model *l = NULL;
        int rc = induct_model_load(&l, path_b);
        ck_assert_msg(rc == INDUCT_OK || rc == INDUCT_EFORMAT, "iteration %d: %s (%s)", it,
                      induct_status_name(rc), induct_last_error_message());
        if (rc == INDUCT_OK) {
            ok++;
            induct_model_free(l);
        } else {
            bad++;
            ck_assert_ptr_null(l);
        }
    }
    ck_assert_int_gt(bad, 300); /* most corruptions are caught */
    free(c);
    free(b.p);
    induct_model_free(m);
    teardown_dir();
}
END_TEST

/* ---- atomic save ------------------------------------------------------------------ */

START_TEST(test_atomic_save_killed_writer) {
    setup_dir();
    induct_model *old = make_default();
    ck_ok(induct_model_save(old, path_a));
    blob before = slurp(path_a);
    /* a bigger model with other weights; its save is killed half-way by the kernel
     * (RLIMIT_FSIZE -> SIGXFSZ, default action: terminate) */
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.d_model = 64;
    c.n_ctx = 64;
    c.d_vocab = 512;
    induct_model *big;
    ck_ok(induct_model_new(&big, &c));
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct rlimit core = {0, 0}, fs = {(rlim_t)(before.n + 4096), (rlim_t)(before.n + 4096)};
        setrlimit(RLIMIT_CORE, &core);
        signal(SIGXFSZ, SIG_DFL);
        setrlimit(RLIMIT_FSIZE, &fs);
        induct_model_save(big, path_a);
        _exit(0); /* not reached when the save is killed */
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ,
                  "the writer was not killed mid-save (status 0x%x)", status);
    /* the old checkpoint is intact and loads; a partial temporary file is left */
    blob after = slurp(path_a);
    ck_assert_uint_eq(after.n, before.n);
    ck_assert_int_eq(memcmp(after.p, before.p, before.n), 0);
    induct_model *l;
    ck_ok(induct_model_load(&l, path_a));
    assert_same_weights(old, l);
    int tmp_files = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, "a.safetensors.tmp.")) tmp_files++;
    closedir(d);
    ck_assert_int_eq(tmp_files, 1);
    /* a complete save then replaces it */
    ck_ok(induct_model_save(big, path_a));
    induct_model *l2;
    ck_ok(induct_model_load(&l2, path_a));
    assert_same_weights(big, l2);
    induct_model_free(l2);
    induct_model_free(l);
    induct_model_free(big);
    induct_model_free(old);
    free(before.p);
    free(after.p);
    teardown_dir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("roundtrip");
    tcase_add_loop_test(tc, test_roundtrip_variant, 0, N_VARIANTS);
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_optimizer_adamw);
    tcase_add_test(tc, test_optimizer_sgd);
    tcase_add_test(tc, test_optimizer_file_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("corrupt");
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_header_length_beyond_file);
    tcase_add_test(tc, test_offsets);
    tcase_add_test(tc, test_wrong_dtype);
    tcase_add_test(tc, test_wrong_shape);
    tcase_add_test(tc, test_missing_and_extra);
    tcase_add_test(tc, test_bad_json);
    tcase_add_test(tc, test_metadata);
    tcase_add_test(tc, test_shortformer_layers_meta);
    tcase_add_test(tc, test_non_finite);
    tcase_add_test(tc, test_io_errors);
    tcase_add_test(tc, test_random_corruption);
    suite_add_tcase(s, tc);
    tc = tcase_create("atomic");
    tcase_add_test(tc, test_atomic_save_killed_writer);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
