/* Public API contract: versions, the status table, per-thread errors, size-prefixed
 * configs, invalid configs, NULL arguments, ranges, buffer sizes, "nothing is
 * modified on failure", and the two dataset generators. Links only the shared
 * library. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "check_api_config.h" /* INDUCT_TEST_PROJECT_VERSION, _SOVERSION, _HAVE_OPENMP */
#include "testutil.h"

/* The call failed with `expected`, recorded it as the thread's last error, and
 * left a non-empty message. */
#define ck_fails(call, expected)                                                           \
    do {                                                                                   \
        induct_error_clear();                                                              \
        ck_assert_status(call, expected);                                                  \
        ck_assert_int_eq(induct_last_error_code(), (expected));                            \
        ck_assert_msg(induct_last_error_message()[0] != '\0', "%s: empty message", #call); \
    } while (0)

/* ---- helpers ---------------------------------------------------------------- */

static induct_model *tiny_model(uint32_t d_mlp, uint32_t layer_norm, uint32_t smeared) {
    induct_model_config c;
    tu_tiny_config(&c);
    c.d_mlp = d_mlp;
    c.layer_norm = layer_norm;
    c.smeared_keys = smeared;
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, 0.3, 11);
    return m;
}

/* All weights, concatenated in storage order. */
static float *snapshot(const induct_model *m, size_t *n_out) {
    size_t total = induct_model_n_params(m), off = 0;
    float *all = malloc(total * sizeof *all);
    for (size_t i = 0; i < induct_model_n_tensors(m); i++) {
        const char *name;
        size_t n, len;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &n));
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, all + off, n, &len));
        off += n;
    }
    ck_assert_uint_eq(off, total);
    *n_out = total;
    return all;
}

static void assert_unchanged(const induct_model *m, const float *before, size_t n) {
    size_t n2;
    float *now = snapshot(m, &n2);
    ck_assert_uint_eq(n, n2);
    ck_assert_msg(memcmp(before, now, n * sizeof *now) == 0, "weights changed on failure");
    free(now);
}

static induct_dataset *tiny_rrt(uint32_t d_vocab) {
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = d_vocab;
    rc.min_block = 2;
    rc.seed = 3;
    induct_dataset *d;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    return d;
}

/* ---- versions ------------------------------------------------------------------ */

START_TEST(test_version) {
    /* header macros == loaded library == meson's project(version:) */
    ck_assert_uint_eq(induct_version_number(), INDUCT_VERSION_NUMBER);
    ck_assert_str_eq(induct_version_string(), INDUCT_VERSION_STRING);
    ck_assert_str_eq(INDUCT_VERSION_STRING, INDUCT_TEST_PROJECT_VERSION);
    unsigned M, m, p;
    ck_assert_int_eq(sscanf(INDUCT_TEST_PROJECT_VERSION, "%u.%u.%u", &M, &m, &p), 3);
    ck_assert_uint_eq(INDUCT_VERSION_MAJOR, M);
    ck_assert_uint_eq(INDUCT_VERSION_MINOR, m);
    ck_assert_uint_eq(INDUCT_VERSION_PATCH, p);
    ck_assert_uint_eq(induct_version_number(), M * 10000 + m * 100 + p);
    char buf[64];
    snprintf(buf, sizeof buf, "%d.%d.%d", INDUCT_VERSION_MAJOR, INDUCT_VERSION_MINOR,
             INDUCT_VERSION_PATCH);
    ck_assert_str_eq(buf, induct_version_string());
    /* ABI version == the soname's N */
    ck_assert_uint_eq(induct_abi_version(), INDUCT_ABI_VERSION);
    ck_assert_uint_eq(induct_abi_version(), INDUCT_TEST_SOVERSION);
    /* feature bits: exactly what the build found */
    unsigned f = induct_build_features();
    ck_assert_uint_eq((f & INDUCT_FEATURE_OPENMP) != 0, INDUCT_TEST_HAVE_OPENMP);
    ck_assert_uint_eq(f & ~INDUCT_FEATURE_OPENMP, 0);
}
END_TEST

/* ---- status table ---------------------------------------------------------------- */

typedef struct status_row {
    int value;
    const char *name, *msg;
} status_row;
#define ROW_(name, value, msg) {value, "INDUCT_" #name, msg},
static const status_row STATUSES[] = {INDUCT_STATUS_MAP(ROW_)};
#undef ROW_
#define N_STATUSES (sizeof STATUSES / sizeof STATUSES[0])

START_TEST(test_status_table) {
    int lo = 0;
    for (size_t i = 0; i < N_STATUSES; i++) {
        const status_row *r = &STATUSES[i];
        ck_assert_str_eq(induct_status_name(r->value), r->name);
        ck_assert_str_eq(induct_status_str(r->value), r->msg);
        ck_assert(r->msg[0] != '\0');
        ck_assert(i == 0 ? r->value == INDUCT_OK : r->value < 0);
        if (r->value < lo) lo = r->value;
        for (size_t j = 0; j < i; j++) {
            ck_assert_int_ne(STATUSES[j].value, r->value);
            ck_assert_str_ne(STATUSES[j].name, r->name);
            ck_assert_str_ne(STATUSES[j].msg, r->msg);
        }
    }
    /* contiguous 0 .. INDUCT_STATUS_MIN_, and the sentinel is the smallest */
    ck_assert_int_eq(lo, INDUCT_STATUS_MIN_);
    ck_assert_uint_eq(N_STATUSES, (size_t)(1 - INDUCT_STATUS_MIN_));
    const int unknown[] = {1, 2, 100, INDUCT_STATUS_MIN_ - 1, -100, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        ck_assert_str_eq(induct_status_name(unknown[i]), "INDUCT_UNKNOWN");
        const char *s = induct_status_str(unknown[i]);
        ck_assert_ptr_nonnull(s);
        ck_assert(s[0] != '\0');
        for (size_t j = 0; j < N_STATUSES; j++) ck_assert_str_ne(s, STATUSES[j].msg);
    }
}
END_TEST

/* ---- per-thread errors ----------------------------------------------------------- */

enum { ERR_ITERS = 20000 };

typedef struct err_thread {
    pthread_barrier_t *start;
    const induct_dataset *shared; /* datasets may be shared between threads */
    int which;
    long bad;
    char first_bad[600];
} err_thread;

/* True if `msg` contains `num` as a whole decimal number. */
static int has_number(const char *msg, unsigned long num) {
    char want[32];
    snprintf(want, sizeof want, "%lu", num);
    size_t n = strlen(want);
    for (const char *p = strstr(msg, want); p; p = strstr(p + 1, want)) {
        int left = p == msg || p[-1] < '0' || p[-1] > '9';
        int right = p[n] < '0' || p[n] > '9';
        if (left && right) return 1;
    }
    return 0;
}

static void *err_worker(void *arg) {
    err_thread *t = arg;
    /* a new thread starts with no error, whatever other threads did */
    if (induct_last_error_code() != INDUCT_OK || induct_last_error_message()[0] != '\0') t->bad++;
    pthread_barrier_wait(t->start);
    int32_t tok[16];
    double lo, hi;
    for (unsigned long i = 0; i < ERR_ITERS; i++) {
        int rc, want;
        unsigned long num;
        if (t->which == 0) { /* EINVAL naming an unknown split */
            num = 100000 + i;
            want = INDUCT_EINVAL;
            rc = induct_dataset_batch(t->shared, (uint32_t)num, 0, 2, 8, tok, 16, NULL, 0);
        } else { /* ENOTSUP naming an unknown optimizer parameter */
            num = 900000 + i;
            want = INDUCT_ENOTSUP;
            rc = induct_opt_param_bounds((induct_opt_param)num, &lo, &hi);
        }
        const char *msg = induct_last_error_message();
        unsigned long other = t->which == 0 ? 900000 + i : 100000 + i;
        int ok = rc == want && induct_last_error_code() == want && has_number(msg, num) &&
                 !has_number(msg, other);
        if (!ok && t->bad++ == 0)
            snprintf(t->first_bad, sizeof t->first_bad, "iteration %lu: rc %d code %d msg '%s'",
                     i, rc, induct_last_error_code(), msg);
        if (i % 1000 == 999) { /* clearing is per thread too */
            induct_error_clear();
            if (induct_last_error_code() != INDUCT_OK || induct_last_error_message()[0]) t->bad++;
        }
    }
    return NULL;
}

START_TEST(test_errors_per_thread) {
    induct_dataset *d = tiny_rrt(11);
    /* the main thread's own error must survive the workers' failures */
    ck_fails(induct_model_config_init(NULL, sizeof(induct_model_config)), INDUCT_EINVAL);
    char mine[600];
    snprintf(mine, sizeof mine, "%s", induct_last_error_message());
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    err_thread t[2] = {{&start, d, 0, 0, ""}, {&start, d, 1, 0, ""}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, err_worker, &t[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    ck_assert_msg(t[0].bad == 0, "thread 0: %ld bad, first: %s", t[0].bad, t[0].first_bad);
    ck_assert_msg(t[1].bad == 0, "thread 1: %ld bad, first: %s", t[1].bad, t[1].first_bad);
    ck_assert_str_eq(induct_last_error_message(), mine);
    ck_assert_int_eq(induct_last_error_code(), INDUCT_EINVAL);
    induct_error_clear();
    ck_assert_str_eq(induct_last_error_message(), "");
    ck_assert_int_eq(induct_last_error_code(), INDUCT_OK);
    induct_dataset_free(d);
}
END_TEST

/* ---- size-prefixed configs ------------------------------------------------------- */

/* sizeof(induct_model_config) in 0.1.0, before shortformer_layers was appended */
#define MODEL_CONFIG_0_1 88

START_TEST(test_config_init_sizes) {
    static union {
        induct_model_config mc;
        induct_rrt_config rc;
        unsigned char b[8192];
    } u;
    const size_t bad_m[] = {0, 1, sizeof(size_t), MODEL_CONFIG_0_1 - 1, 4097, 8192, SIZE_MAX};
    for (size_t i = 0; i < sizeof bad_m / sizeof bad_m[0]; i++) {
        memset(u.b, 0xab, sizeof u.b);
        ck_fails(induct_model_config_init(&u.mc, bad_m[i]), INDUCT_EABI);
        for (size_t k = 0; k < sizeof u.b; k++) ck_assert_uint_eq(u.b[k], 0xab);
    }
    const size_t bad_r[] = {0, 1, sizeof(induct_rrt_config) - 1, 4097, SIZE_MAX};
    for (size_t i = 0; i < sizeof bad_r / sizeof bad_r[0]; i++) {
        memset(u.b, 0xab, sizeof u.b);
        ck_fails(induct_rrt_config_init(&u.rc, bad_r[i]), INDUCT_EABI);
        for (size_t k = 0; k < sizeof u.b; k++) ck_assert_uint_eq(u.b[k], 0xab);
    }
    /* the documented defaults */
    memset(u.b, 0xab, sizeof u.b);
    ck_ok(induct_model_config_init(&u.mc, sizeof u.mc));
    const induct_model_config *c = &u.mc;
    ck_assert_uint_eq(c->size, sizeof *c);
    ck_assert_uint_eq(c->n_layers, 2);
    ck_assert_uint_eq(c->d_model, 64);
    ck_assert_uint_eq(c->n_heads, 4);
    ck_assert_uint_eq(c->d_head, 0);
    ck_assert_uint_eq(c->d_mlp, 0);
    ck_assert_uint_eq(c->n_ctx, 64);
    ck_assert_uint_eq(c->d_vocab, 64);
    ck_assert_uint_eq(c->positional, INDUCT_POS_STANDARD);
    ck_assert_uint_eq(c->layer_norm, 0);
    ck_assert_uint_eq(c->smeared_keys, 0);
    ck_assert_uint_eq(c->n_threads, 1);
    ck_assert_uint_eq(c->init, INDUCT_INIT_GPT2);
    ck_assert(c->smear_alpha_init == 0.0);
    ck_assert(c->init_std == 0.02);
    ck_assert(c->seed == 0);
    ck_assert_uint_eq(c->shortformer_layers, 0);
    ck_assert_uint_eq(u.b[sizeof *c], 0xab); /* nothing written past `size` */
    /* the 0.1.0 struct (before shortformer_layers): filled up to its size only */
    memset(u.b, 0xab, sizeof u.b);
    ck_ok(induct_model_config_init(&u.mc, MODEL_CONFIG_0_1));
    ck_assert_uint_eq(u.mc.size, MODEL_CONFIG_0_1);
    ck_assert_uint_eq(u.mc.d_model, 64);
    ck_assert_uint_eq(u.b[MODEL_CONFIG_0_1], 0xab);
    /* such a caller creates a model (shortformer_layers is then 0) and reads its config
     * back into the same 88 bytes */
    u.mc.d_model = 8;
    u.mc.n_heads = 2;
    u.mc.n_ctx = 8;
    u.mc.d_vocab = 11;
    induct_model *m88 = NULL;
    ck_ok(induct_model_new(&m88, &u.mc));
    induct_model_config full;
    full.size = sizeof full;
    ck_ok(induct_model_get_config(m88, &full));
    ck_assert_uint_eq(full.shortformer_layers, 0);
    ck_assert_uint_eq(full.d_model, 8);
    memset(u.b, 0xab, sizeof u.b);
    u.mc.size = MODEL_CONFIG_0_1;
    ck_ok(induct_model_get_config(m88, &u.mc));
    ck_assert_uint_eq(u.mc.d_head, 4);
    ck_assert_uint_eq(u.b[MODEL_CONFIG_0_1], 0xab);
    induct_model_free(m88);
    /* shortformer_layers = n_layers is every layer: stored as 0 */
    tu_tiny_config(&full);
    full.positional = INDUCT_POS_SHORTFORMER;
    full.shortformer_layers = full.n_layers;
    ck_ok(induct_model_new(&m88, &full));
    ck_ok(induct_model_get_config(m88, &full));
    ck_assert_uint_eq(full.shortformer_layers, 0);
    induct_model_free(m88);
    ck_ok(induct_rrt_config_init(&u.rc, sizeof u.rc));
    const induct_rrt_config *r = &u.rc;
    ck_assert_uint_eq(r->size, sizeof *r);
    ck_assert_uint_eq(r->d_vocab, 64);
    ck_assert_uint_eq(r->n_repeats, 2);
    ck_assert_uint_eq(r->min_block, 8);
    ck_assert_uint_eq(r->max_block, 0);
    ck_assert_uint_eq(r->token_lo, 0);
    ck_assert_uint_eq(r->token_hi, 0);
    ck_assert_int_eq(r->bos, -1);
    ck_assert_uint_eq(r->distinct_block, 0);
    ck_assert(r->seed == 0);
    /* a larger (newer) struct: defaults plus a zeroed tail, size is the caller's */
    memset(u.b, 0xab, sizeof u.b);
    ck_ok(induct_model_config_init(&u.mc, 4096));
    ck_assert_uint_eq(u.mc.size, 4096);
    ck_assert_uint_eq(u.mc.d_model, 64);
    for (size_t k = sizeof u.mc; k < 4096; k++) ck_assert_uint_eq(u.b[k], 0);
    ck_assert_uint_eq(u.b[4096], 0xab);
    memset(u.b, 0xab, sizeof u.b);
    ck_ok(induct_rrt_config_init(&u.rc, 1000));
    ck_assert_uint_eq(u.rc.size, 1000);
    for (size_t k = sizeof u.rc; k < 1000; k++) ck_assert_uint_eq(u.b[k], 0);
}
END_TEST

enum { TAIL = 64 };

START_TEST(test_config_tail) {
    union {
        induct_model_config c;
        unsigned char b[sizeof(induct_model_config) + TAIL];
    } u;
    ck_ok(induct_model_config_init(&u.c, sizeof u));
    tu_tiny_config(&u.c); /* writes sizeof(induct_model_config) into size ... */
    u.c.size = sizeof u;  /* ... a caller compiled against a newer header says more */
    induct_model *m = NULL;
    ck_ok(induct_model_new(&m, &u.c));
    /* get_config into the larger struct: known fields copied, tail zeroed */
    union {
        induct_model_config c;
        unsigned char b[sizeof(induct_model_config) + TAIL];
    } out;
    memset(out.b, 0xcd, sizeof out.b);
    out.c.size = sizeof out;
    ck_ok(induct_model_get_config(m, &out.c));
    ck_assert_uint_eq(out.c.size, sizeof out);
    ck_assert_uint_eq(out.c.d_model, 8);
    ck_assert_uint_eq(out.c.d_head, 4); /* resolved from d_head = 0 */
    for (size_t k = sizeof(induct_model_config); k < sizeof out; k++)
        ck_assert_uint_eq(out.b[k], 0);
    /* one smaller than the 0.1.0 struct is refused and untouched */
    memset(out.b, 0xcd, sizeof out.b);
    out.c.size = MODEL_CONFIG_0_1 - 8;
    ck_fails(induct_model_get_config(m, &out.c), INDUCT_EABI);
    for (size_t k = sizeof(size_t); k < sizeof out; k++) ck_assert_uint_eq(out.b[k], 0xcd);
    induct_model_free(m);
    /* any non-zero byte in the unknown tail is a field this library cannot honour */
    for (size_t k = sizeof(induct_model_config); k < sizeof u; k++) {
        u.b[k] = (unsigned char)(1u << (k % 8));
        m = (induct_model *)&u; /* must be reset to NULL */
        ck_fails(induct_model_new(&m, &u.c), INDUCT_EABI);
        ck_assert_ptr_null(m);
        u.b[k] = 0;
    }
    /* sizes out of range */
    const size_t bad[] = {0, sizeof(size_t), MODEL_CONFIG_0_1 - 1, 4097};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        u.c.size = bad[i];
        ck_fails(induct_model_new(&m, &u.c), INDUCT_EABI);
        ck_assert_ptr_null(m);
    }

    /* the same for the RRT config */
    union {
        induct_rrt_config c;
        unsigned char b[sizeof(induct_rrt_config) + TAIL];
    } r;
    ck_ok(induct_rrt_config_init(&r.c, sizeof r));
    r.c.min_block = 2;
    induct_dataset *d = NULL;
    ck_ok(induct_dataset_new_rrt(&d, &r.c));
    induct_dataset_free(d);
    for (size_t k = sizeof(induct_rrt_config); k < sizeof r; k++) {
        r.b[k] = 0x80;
        d = (induct_dataset *)&r;
        ck_fails(induct_dataset_new_rrt(&d, &r.c), INDUCT_EABI);
        ck_assert_ptr_null(d);
        r.b[k] = 0;
    }
    r.c.size = sizeof(induct_rrt_config) - 1;
    ck_fails(induct_dataset_new_rrt(&d, &r.c), INDUCT_EABI);
    r.c.size = 5000;
    ck_fails(induct_dataset_new_rrt(&d, &r.c), INDUCT_EABI);
}
END_TEST

/* ---- invalid model configs ----------------------------------------------------------- */

typedef struct bad_cfg {
    const char *what;
    int expected;
} bad_cfg;

/* Apply mutation `i` to a valid tiny config; returns the expected status, or 1
 * past the last mutation. */
static int mutate(int i, induct_model_config *c, const char **what) {
#define CASE(n, desc, stmt, code)                                                          \
    case n:                                                                                \
        *what = desc;                                                                      \
        stmt;                                                                              \
        return code;
    switch (i) {
        CASE(0, "n_layers 0", c->n_layers = 0, INDUCT_EINVAL)
        CASE(1, "d_model 0", c->d_model = 0, INDUCT_EINVAL)
        CASE(2, "n_heads 0", c->n_heads = 0, INDUCT_EINVAL)
        CASE(3, "n_ctx 0", c->n_ctx = 0, INDUCT_EINVAL)
        CASE(4, "d_vocab 0", c->d_vocab = 0, INDUCT_EINVAL)
        CASE(5, "n_heads 3 does not divide d_model 8, d_head 0", c->n_heads = 3, INDUCT_EINVAL)
        CASE(6, "d_model 10, n_heads 4, d_head 0", (c->d_model = 10, c->n_heads = 4),
             INDUCT_EINVAL)
        CASE(7, "positional 3", c->positional = 3, INDUCT_EINVAL)
        CASE(8, "positional UINT32_MAX", c->positional = UINT32_MAX, INDUCT_EINVAL)
        CASE(9, "init 2", c->init = 2, INDUCT_EINVAL)
        CASE(10, "layer_norm 2", c->layer_norm = 2, INDUCT_EINVAL)
        CASE(11, "smeared_keys 2", c->smeared_keys = 2, INDUCT_EINVAL)
        CASE(12, "init_std NaN", c->init_std = NAN, INDUCT_EINVAL)
        CASE(13, "init_std +inf", c->init_std = INFINITY, INDUCT_EINVAL)
        CASE(14, "init_std -inf", c->init_std = -INFINITY, INDUCT_EINVAL)
        CASE(15, "init_std -1", c->init_std = -1.0, INDUCT_EINVAL)
        CASE(16, "smear_alpha_init NaN", c->smear_alpha_init = NAN, INDUCT_EINVAL)
        CASE(17, "n_threads 1025", c->n_threads = 1025, INDUCT_EINVAL)
        CASE(18, "d_vocab and d_model near UINT32_MAX",
             (c->d_vocab = UINT32_MAX - 1, c->d_model = UINT32_MAX - 1, c->n_heads = 2),
             INDUCT_ELIMIT)
        CASE(19, "d_vocab and d_model UINT32_MAX, d_head 1",
             (c->d_vocab = UINT32_MAX, c->d_model = UINT32_MAX, c->n_heads = 1, c->d_head = 1),
             INDUCT_ELIMIT)
        CASE(20, "d_vocab UINT32_MAX", c->d_vocab = UINT32_MAX, INDUCT_ELIMIT)
        CASE(21, "n_ctx UINT32_MAX with W_pos", c->n_ctx = UINT32_MAX, INDUCT_ELIMIT)
        CASE(22, "n_ctx UINT32_MAX shortformer",
             (c->n_ctx = UINT32_MAX, c->positional = INDUCT_POS_SHORTFORMER), INDUCT_ELIMIT)
        CASE(23, "d_mlp UINT32_MAX", c->d_mlp = UINT32_MAX, INDUCT_ELIMIT)
        CASE(24, "n_heads UINT32_MAX, d_head 1", (c->n_heads = UINT32_MAX, c->d_head = 1),
             INDUCT_ELIMIT)
        CASE(25, "d_head UINT32_MAX", c->d_head = UINT32_MAX, INDUCT_ELIMIT)
        CASE(26, "n_layers UINT32_MAX", c->n_layers = UINT32_MAX, INDUCT_ELIMIT)
        CASE(27, "n_layers 2^20 (2^31 parameters)", (c->n_layers = 1u << 20, c->d_model = 64,
                                                     c->n_heads = 4), INDUCT_ELIMIT)
        CASE(28, "all sizes UINT32_MAX",
             (c->n_layers = c->d_model = c->n_heads = c->d_head = c->d_mlp = c->n_ctx =
                  c->d_vocab = UINT32_MAX),
             INDUCT_ELIMIT)
        CASE(29, "size 0", c->size = 0, INDUCT_EABI)
        CASE(30, "size 4097", c->size = 4097, INDUCT_EABI)
        CASE(31, "shortformer_layers 1 with standard positions", c->shortformer_layers = 1,
             INDUCT_EINVAL)
        CASE(32, "shortformer_layers 3 > n_layers 2",
             (c->positional = INDUCT_POS_SHORTFORMER, c->shortformer_layers = 3), INDUCT_EINVAL)
        CASE(33, "reserved0 1", c->reserved0 = 1, INDUCT_EINVAL)
        /* positive controls: edges that are valid */
        CASE(34, "d_head 4 with n_heads 3 not dividing d_model 8",
             (c->n_heads = 3, c->d_head = 4), INDUCT_OK)
        CASE(35, "n_ctx UINT32_MAX without positions",
             (c->n_ctx = UINT32_MAX, c->positional = INDUCT_POS_NONE), INDUCT_OK)
        CASE(36, "init_std 0", c->init_std = 0.0, INDUCT_OK)
        CASE(37, "n_threads 1024", c->n_threads = 1024, INDUCT_OK)
        CASE(38, "n_threads 0 means 1", c->n_threads = 0, INDUCT_OK)
        CASE(39, "shortformer_layers 1 of 2 with shortformer positions",
             (c->positional = INDUCT_POS_SHORTFORMER, c->shortformer_layers = 1), INDUCT_OK)
        CASE(40, "shortformer_layers = n_layers",
             (c->positional = INDUCT_POS_SHORTFORMER, c->shortformer_layers = 2), INDUCT_OK)
    default:
        return 1;
    }
#undef CASE
}

START_TEST(test_invalid_model_configs) {
    const char *what;
    induct_model_config c;
    for (int i = 0;; i++) {
        tu_tiny_config(&c);
        int want = mutate(i, &c, &what);
        if (want == 1) break;
        induct_model *m = (induct_model *)&c;
        induct_error_clear();
        int rc = induct_model_new(&m, &c);
        ck_assert_msg(rc == want, "%s: got %s (%s), expected %s", what, induct_status_name(rc),
                      induct_last_error_message(), induct_status_name(want));
        if (want == INDUCT_OK) {
            ck_assert_ptr_nonnull(m);
            induct_model_config got;
            got.size = sizeof got;
            ck_ok(induct_model_get_config(m, &got));
            ck_assert_uint_ge(got.n_threads, 1);
            if (i == 35) { /* a tiny forward works: n_ctx only bounds seq_len */
                int32_t tok[6] = {1, 2, 3, 4, 5, 6};
                double l;
                ck_ok(induct_model_forward(m, tok, 1, 6, NULL, 0, NULL, 0, &l));
                ck_assert(isfinite(l));
            }
            induct_model_free(m);
            continue;
        }
        ck_assert_msg(m == NULL, "%s: *out not reset to NULL", what);
        ck_assert_int_eq(induct_last_error_code(), want);
        ck_assert_msg(strlen(induct_last_error_message()) > 10, "%s: message '%s'", what,
                      induct_last_error_message());
    }
    /* NULL arguments */
    induct_model *m = (induct_model *)&c;
    ck_fails(induct_model_new(&m, NULL), INDUCT_EINVAL);
    ck_assert_ptr_null(m);
    tu_tiny_config(&c);
    ck_fails(induct_model_new(NULL, &c), INDUCT_EINVAL);
}
END_TEST

/* ---- NULL handles and free(NULL) ------------------------------------------------------ */

START_TEST(test_free_null) {
    induct_model_free(NULL);
    induct_optimizer_free(NULL);
    induct_dataset_free(NULL);
    induct_model_interrupt(NULL);
    ck_assert_uint_eq(induct_model_n_params(NULL), 0);
    ck_assert_uint_eq(induct_model_n_tensors(NULL), 0);
    ck_assert_uint_eq(induct_dataset_d_vocab(NULL), 0);
}
END_TEST

START_TEST(test_null_arguments) {
    induct_model *m = tiny_model(0, 0, 0);
    induct_dataset *d = tiny_rrt(11);
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    size_t n_before;
    float *before = snapshot(m, &n_before);
    int32_t tok[2 * 8];
    tu_tokens(tok, 16, 11, 1);
    float buf[4096];
    size_t len;
    double x, y;
    induct_model_config cfg;
    cfg.size = sizeof cfg;
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    const char *name;
    uint32_t shape[4], ndim;

    ck_fails(induct_model_config_init(NULL, sizeof cfg), INDUCT_EINVAL);
    ck_fails(induct_rrt_config_init(NULL, sizeof rc), INDUCT_EINVAL);

    induct_model *m2 = m;
    ck_fails(induct_model_clone(NULL, m), INDUCT_EINVAL);
    ck_fails(induct_model_clone(&m2, NULL), INDUCT_EINVAL);
    ck_assert_ptr_null(m2);
    ck_fails(induct_model_get_config(NULL, &cfg), INDUCT_EINVAL);
    ck_fails(induct_model_get_config(m, NULL), INDUCT_EINVAL);
    ck_fails(induct_model_set_threads(NULL, 1), INDUCT_EINVAL);
    ck_fails(induct_model_set_threads(m, 1025), INDUCT_EINVAL);
    ck_fails(induct_model_tensor_info(NULL, 0, &name, shape, &ndim, &len), INDUCT_EINVAL);
    ck_ok(induct_model_tensor_info(m, 0, NULL, NULL, NULL, NULL)); /* outputs optional */
    ck_fails(induct_model_get_tensor(NULL, "embed.W_E", INDUCT_BUF_PARAM, buf, 4096, &len),
             INDUCT_EINVAL);
    ck_fails(induct_model_get_tensor(m, NULL, INDUCT_BUF_PARAM, buf, 4096, &len), INDUCT_EINVAL);
    ck_fails(induct_model_get_tensor(m, "embed.W_E", 2, buf, 4096, &len), INDUCT_EINVAL);
    ck_ok(induct_model_get_tensor(m, "embed.W_E", INDUCT_BUF_PARAM, buf, 4096, NULL));
    ck_fails(induct_model_set_tensor(NULL, "embed.W_E", buf, 88), INDUCT_EINVAL);
    ck_fails(induct_model_set_tensor(m, NULL, buf, 88), INDUCT_EINVAL);
    ck_fails(induct_model_set_tensor(m, "embed.W_E", NULL, 88), INDUCT_EINVAL);
    ck_fails(induct_model_forward(NULL, tok, 2, 8, NULL, 0, NULL, 0, &x), INDUCT_EINVAL);
    ck_fails(induct_model_forward(m, NULL, 2, 8, NULL, 0, NULL, 0, &x), INDUCT_EINVAL);
    ck_fails(induct_model_forward(m, tok, 0, 8, NULL, 0, NULL, 0, &x), INDUCT_EINVAL);
    ck_fails(induct_model_forward(m, tok, 2, 1, NULL, 0, NULL, 0, &x), INDUCT_EINVAL);
    ck_fails(induct_model_forward(m, tok, 2, 0, NULL, 0, NULL, 0, &x), INDUCT_EINVAL);
    ck_ok(induct_model_forward(m, tok, 2, 8, NULL, 0, NULL, 0, NULL)); /* outputs optional */
    ck_fails(induct_model_backward(NULL, tok, 2, 8, &x), INDUCT_EINVAL);
    ck_fails(induct_model_backward(m, NULL, 2, 8, &x), INDUCT_EINVAL);
    ck_fails(induct_model_backward(m, tok, 0, 8, &x), INDUCT_EINVAL);
    ck_fails(induct_model_backward(m, tok, 2, 1, &x), INDUCT_EINVAL);
    ck_fails(induct_model_attention(NULL, tok, 8, buf, 4096, &len), INDUCT_EINVAL);
    ck_fails(induct_model_attention(m, NULL, 8, buf, 4096, &len), INDUCT_EINVAL);
    ck_fails(induct_model_attention(m, tok, 1, buf, 4096, &len), INDUCT_EINVAL);

    induct_dataset *d2 = d;
    ck_fails(induct_dataset_new_rrt(NULL, &rc), INDUCT_EINVAL);
    ck_fails(induct_dataset_new_rrt(&d2, NULL), INDUCT_EINVAL);
    ck_assert_ptr_null(d2);
    d2 = d;
    ck_fails(induct_dataset_new_tokens(NULL, tok, 16, 11, 0), INDUCT_EINVAL);
    ck_fails(induct_dataset_new_tokens(&d2, NULL, 16, 11, 0), INDUCT_EINVAL);
    ck_assert_ptr_null(d2);
    ck_fails(induct_dataset_new_tokens(&d2, tok, 0, 11, 0), INDUCT_EINVAL);
    ck_fails(induct_dataset_new_tokens(&d2, tok, 16, 0, 0), INDUCT_EINVAL);
    int32_t out[64], meta[8];
    ck_fails(induct_dataset_batch(NULL, INDUCT_SPLIT_TRAIN, 0, 2, 8, out, 64, meta, 8),
             INDUCT_EINVAL);
    ck_fails(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 2, 8, NULL, 64, meta, 8),
             INDUCT_EINVAL);
    ck_fails(induct_dataset_batch(d, 2, 0, 2, 8, out, 64, meta, 8), INDUCT_EINVAL);
    ck_fails(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 0, 8, out, 64, meta, 8),
             INDUCT_EINVAL);
    ck_fails(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 2, 1, out, 64, meta, 8),
             INDUCT_EINVAL);
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 2, 8, out, 64, NULL, 0));

    induct_optimizer *o2 = o;
    ck_fails(induct_optimizer_new(NULL, m, INDUCT_OPTIM_SGD), INDUCT_EINVAL);
    ck_fails(induct_optimizer_new(&o2, NULL, INDUCT_OPTIM_SGD), INDUCT_EINVAL);
    ck_assert_ptr_null(o2);
    o2 = o;
    ck_fails(induct_optimizer_new(&o2, m, 2), INDUCT_EINVAL);
    ck_assert_ptr_null(o2);
    ck_fails(induct_optimizer_set(NULL, INDUCT_OPT_LR, 0.1), INDUCT_EINVAL);
    ck_fails(induct_optimizer_get(NULL, INDUCT_OPT_LR, &x), INDUCT_EINVAL);
    ck_fails(induct_optimizer_get(o, INDUCT_OPT_LR, NULL), INDUCT_EINVAL);
    ck_fails(induct_opt_param_bounds(INDUCT_OPT_LR, NULL, &y), INDUCT_EINVAL);
    ck_fails(induct_opt_param_bounds(INDUCT_OPT_LR, &x, NULL), INDUCT_EINVAL);
    ck_fails(induct_optimizer_current_lr(NULL, &x), INDUCT_EINVAL);
    ck_fails(induct_optimizer_current_lr(o, NULL), INDUCT_EINVAL);
    ck_fails(induct_optimizer_step(NULL, &x), INDUCT_EINVAL);
    ck_fails(induct_train_step(NULL, d, 2, 8, &x), INDUCT_EINVAL);
    ck_fails(induct_train_step(o, NULL, 2, 8, &x), INDUCT_EINVAL);
    ck_fails(induct_train_step(o, d, 0, 8, &x), INDUCT_EINVAL);
    ck_fails(induct_train_step(o, d, 2, 1, &x), INDUCT_EINVAL);
    ck_fails(induct_train_step_tokens(NULL, tok, 2, 8, &x), INDUCT_EINVAL);
    ck_fails(induct_train_step_tokens(o, NULL, 2, 8, &x), INDUCT_EINVAL);
    ck_fails(induct_train_step_tokens(o, tok, 0, 8, &x), INDUCT_EINVAL);

    ck_fails(induct_analysis_induction_score(NULL, d, 2, 8, buf, 4096, &len), INDUCT_EINVAL);
    ck_fails(induct_analysis_induction_score(m, NULL, 2, 8, buf, 4096, &len), INDUCT_EINVAL);
    ck_fails(induct_analysis_induction_score(m, d, 0, 8, buf, 4096, &len), INDUCT_EINVAL);
    ck_fails(induct_analysis_previous_token_score(NULL, d, 2, 8, buf, 4096, &len), INDUCT_EINVAL);
    ck_fails(induct_analysis_previous_token_score(m, NULL, 2, 8, buf, 4096, &len), INDUCT_EINVAL);
    ck_fails(induct_analysis_previous_token_score(m, d, 0, 8, buf, 4096, &len), INDUCT_EINVAL);

    /* none of it touched the weights or the optimizer */
    assert_unchanged(m, before, n_before);
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &x));
    ck_assert(x == 0.0);
    free(before);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
}
END_TEST

/* ---- ranges -------------------------------------------------------------------------- */

START_TEST(test_token_and_length_ranges) {
    induct_model *m = tiny_model(4, 1, 1); /* d_vocab 11, n_ctx 8 */
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    size_t n_before;
    float *before = snapshot(m, &n_before);
    enum { B = 2, T = 8 };
    int32_t tok[B * T];
    float buf[2 * 2 * 9 * 9];
    size_t len;
    double x;
    const int32_t bad_ids[] = {-1, 11, 12, INT32_MIN, INT32_MAX};
    const size_t where[] = {0, 5, B * T - 1};
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++)
        for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
            tu_tokens(tok, B * T, 11, 2);
            tok[where[w]] = bad_ids[i];
            ck_fails(induct_model_forward(m, tok, B, T, NULL, 0, NULL, 0, &x), INDUCT_ERANGE);
            ck_fails(induct_model_backward(m, tok, B, T, &x), INDUCT_ERANGE);
            ck_fails(induct_train_step_tokens(o, tok, B, T, &x), INDUCT_ERANGE);
            if (where[w] < T)
                ck_fails(induct_model_attention(m, tok, T, buf, sizeof buf / sizeof *buf, &len),
                         INDUCT_ERANGE);
            induct_dataset *d = (induct_dataset *)m;
            ck_fails(induct_dataset_new_tokens(&d, tok, B * T, 11, 0), INDUCT_ERANGE);
            ck_assert_ptr_null(d);
        }
    /* the edges of the range are valid */
    tu_tokens(tok, B * T, 11, 2);
    tok[0] = 0;
    tok[B * T - 1] = 10;
    ck_ok(induct_model_forward(m, tok, B, T, NULL, 0, NULL, 0, &x));
    /* seq_len > n_ctx: tokens for 9 positions, model n_ctx 8 */
    int32_t tok9[B * 9];
    tu_tokens(tok9, B * 9, 11, 3);
    ck_fails(induct_model_forward(m, tok9, B, 9, NULL, 0, NULL, 0, &x), INDUCT_ERANGE);
    ck_fails(induct_model_backward(m, tok9, B, 9, &x), INDUCT_ERANGE);
    ck_fails(induct_model_attention(m, tok9, 9, buf, sizeof buf / sizeof *buf, &len),
             INDUCT_ERANGE);
    ck_fails(induct_train_step_tokens(o, tok9, B, 9, &x), INDUCT_ERANGE);
    induct_dataset *d = tiny_rrt(11);
    ck_fails(induct_train_step(o, d, B, 9, &x), INDUCT_ERANGE);
    ck_fails(induct_analysis_induction_score(m, d, B, 9, buf, 64, &len), INDUCT_ERANGE);
    ck_fails(induct_analysis_previous_token_score(m, d, B, 9, buf, 64, &len), INDUCT_ERANGE);
    ck_fails(induct_model_forward(m, tok9, B, UINT32_MAX, NULL, 0, NULL, 0, &x), INDUCT_ERANGE);
    /* a dataset whose vocabulary exceeds the model's */
    induct_dataset *big = tiny_rrt(12);
    ck_fails(induct_train_step(o, big, B, T, &x), INDUCT_EINVAL);
    ck_fails(induct_analysis_previous_token_score(m, big, B, T, buf, 64, &len), INDUCT_EINVAL);
    /* tensor index and names */
    ck_fails(induct_model_tensor_info(m, induct_model_n_tensors(m), NULL, NULL, NULL, NULL),
             INDUCT_ERANGE);
    ck_fails(induct_model_tensor_info(m, SIZE_MAX, NULL, NULL, NULL, NULL), INDUCT_ERANGE);
    ck_fails(induct_model_get_tensor(m, "embed.W_X", INDUCT_BUF_PARAM, buf, 64, &len),
             INDUCT_ERANGE);
    ck_fails(induct_model_get_tensor(m, "", INDUCT_BUF_PARAM, buf, 64, &len), INDUCT_ERANGE);
    ck_fails(induct_model_set_tensor(m, "blocks.2.attn.W_Q", buf, 64), INDUCT_ERANGE);

    assert_unchanged(m, before, n_before);
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &x));
    ck_assert(x == 0.0);
    free(before);
    induct_dataset_free(big);
    induct_dataset_free(d);
    induct_optimizer_free(o);
    induct_model_free(m);
}
END_TEST

/* ---- buffer sizes ---------------------------------------------------------------------- */

#define SENTINEL 12345.0f

static int all_sentinel(const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (b[i] != SENTINEL) return 0;
    return 1;
}
static void fill_sentinel(float *b, size_t n) {
    for (size_t i = 0; i < n; i++) b[i] = SENTINEL;
}

START_TEST(test_buffer_sizes) {
    induct_model *m = tiny_model(0, 0, 0); /* 2 layers x 2 heads, d_model 8, d_vocab 11 */
    enum { B = 2, T = 6, CAP = 2048 };
    int32_t tok[B * T];
    tu_tokens(tok, B * T, 11, 4);
    static float buf[CAP];
    size_t len;

    /* get_tensor: W_E is [11, 8] */
    len = 0;
    fill_sentinel(buf, CAP);
    ck_fails(induct_model_get_tensor(m, "embed.W_E", INDUCT_BUF_PARAM, buf, 87, &len),
             INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 88);
    ck_assert(all_sentinel(buf, CAP));
    len = 0;
    ck_fails(induct_model_get_tensor(m, "embed.W_E", INDUCT_BUF_GRAD, NULL, 0, &len),
             INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 88);
    ck_ok(induct_model_get_tensor(m, "embed.W_E", INDUCT_BUF_PARAM, buf, 88, &len));
    ck_assert_uint_eq(len, 88);
    ck_assert(buf[88] == SENTINEL);

    /* attention: [2][2][T][T] */
    size_t need = 2 * 2 * T * T;
    fill_sentinel(buf, CAP);
    len = 0;
    ck_fails(induct_model_attention(m, tok, T, buf, need - 1, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, need);
    ck_assert(all_sentinel(buf, CAP));
    len = 0;
    ck_fails(induct_model_attention(m, tok, T, NULL, 0, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, need);
    ck_ok(induct_model_attention(m, tok, T, buf, need, &len));
    ck_assert(buf[need] == SENTINEL && buf[need - 1] != SENTINEL);

    /* forward: logits [B][T][11], losses [B][T-1] */
    size_t n_logits = B * T * 11, n_losses = B * (T - 1);
    static float losses[64];
    fill_sentinel(buf, CAP);
    fill_sentinel(losses, 64);
    double mean = -1.0;
    ck_fails(induct_model_forward(m, tok, B, T, buf, n_logits - 1, losses, n_losses, &mean),
             INDUCT_EBUFSIZE);
    ck_fails(induct_model_forward(m, tok, B, T, buf, n_logits, losses, n_losses - 1, &mean),
             INDUCT_EBUFSIZE);
    ck_assert(all_sentinel(buf, CAP) && all_sentinel(losses, 64));
    ck_assert(mean == -1.0);
    ck_ok(induct_model_forward(m, tok, B, T, buf, n_logits, losses, n_losses, &mean));
    ck_assert(buf[n_logits] == SENTINEL && losses[n_losses] == SENTINEL);
    double s = 0;
    for (size_t i = 0; i < n_losses; i++) s += losses[i];
    ck_assert_double_eq_tol(s / n_losses, mean, 1e-6);

    /* analysis scores: [n_layers][n_heads] = 4 */
    induct_dataset *d = tiny_rrt(11);
    fill_sentinel(buf, CAP);
    len = 0;
    ck_fails(induct_analysis_previous_token_score(m, d, 2, T, buf, 3, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 4);
    len = 0;
    ck_fails(induct_analysis_induction_score(m, d, 2, T, buf, 3, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 4);
    len = 0;
    ck_fails(induct_analysis_induction_score(m, d, 2, T, NULL, 0, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 4);
    ck_assert(all_sentinel(buf, CAP));
    ck_ok(induct_analysis_previous_token_score(m, d, 2, T, buf, 4, &len));
    ck_assert(buf[4] == SENTINEL);
    for (int i = 0; i < 4; i++) ck_assert(buf[i] >= 0.0f && buf[i] <= 1.0f);

    /* dataset batch: tokens [B][T], meta [B] */
    int32_t out[B * T + 1], meta[B + 1];
    for (int i = 0; i < B * T + 1; i++) out[i] = -7;
    for (int i = 0; i < B + 1; i++) meta[i] = -7;
    ck_fails(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, B, T, out, B * T - 1, meta, B),
             INDUCT_EBUFSIZE);
    ck_fails(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, B, T, out, B * T, meta, B - 1),
             INDUCT_EBUFSIZE);
    for (int i = 0; i < B * T + 1; i++) ck_assert_int_eq(out[i], -7);
    for (int i = 0; i < B + 1; i++) ck_assert_int_eq(meta[i], -7);
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, B, T, out, B * T, meta, B));
    ck_assert_int_eq(out[B * T], -7);
    ck_assert_int_eq(meta[B], -7);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* ---- nothing is modified on failure ------------------------------------------------------ */

START_TEST(test_failure_modifies_nothing) {
    induct_model *m = tiny_model(6, 1, 1);
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    enum { B = 2, T = 8 };
    int32_t tok[B * T];
    tu_tokens(tok, B * T, 11, 9);
    /* one real step so that moments and the step counter are non-trivial */
    double loss;
    ck_ok(induct_train_step_tokens(o, tok, B, T, &loss));
    static float clean_losses[B * (T - 1)], losses[B * (T - 1)];
    ck_ok(induct_model_forward(m, tok, B, T, NULL, 0, clean_losses, B * (T - 1), NULL));
    size_t n_before;
    float *before = snapshot(m, &n_before);
    double lr0, step0;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_LR, &lr0));
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step0));

    /* set_tensor: a non-finite value anywhere (also the last element), a wrong length */
    size_t n;
    ck_fails(induct_model_get_tensor(m, "unembed.W_U", INDUCT_BUF_PARAM, NULL, 0, &n),
             INDUCT_EBUFSIZE);
    float *w = malloc((n + 1) * sizeof *w);
    ck_ok(induct_model_get_tensor(m, "unembed.W_U", INDUCT_BUF_PARAM, w, n, &n));
    for (size_t i = 0; i < n; i++) w[i] += 1.0f;
    float nonfinite[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        float keep = w[n - 1];
        w[n - 1] = nonfinite[k];
        ck_fails(induct_model_set_tensor(m, "unembed.W_U", w, n), INDUCT_EINVAL);
        w[n - 1] = keep;
        keep = w[0];
        w[0] = nonfinite[k];
        ck_fails(induct_model_set_tensor(m, "unembed.W_U", w, n), INDUCT_EINVAL);
        w[0] = keep;
    }
    ck_fails(induct_model_set_tensor(m, "unembed.W_U", w, n - 1), INDUCT_ERANGE);
    ck_fails(induct_model_set_tensor(m, "unembed.W_U", w, n + 1), INDUCT_ERANGE);
    ck_fails(induct_model_set_tensor(m, "unembed.W_U", w, 0), INDUCT_ERANGE);
    free(w);

    /* optimizer: out-of-range, non-finite and unknown settings keep the old value */
    ck_fails(induct_optimizer_set(o, INDUCT_OPT_LR, -1.0), INDUCT_ERANGE);
    ck_fails(induct_optimizer_set(o, INDUCT_OPT_LR, NAN), INDUCT_EINVAL);
    ck_fails(induct_optimizer_set(o, INDUCT_OPT_STEP, 1.5), INDUCT_ERANGE);
    ck_fails(induct_optimizer_set(o, (induct_opt_param)99, 1.0), INDUCT_ENOTSUP);
    double v;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_LR, &v));
    ck_assert(v == lr0);
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &v));
    ck_assert(v == step0);

    /* training steps that fail on input */
    int32_t bad[B * T];
    memcpy(bad, tok, sizeof bad);
    bad[B * T - 1] = 11;
    ck_fails(induct_train_step_tokens(o, bad, B, T, &loss), INDUCT_ERANGE);
    induct_dataset *big = tiny_rrt(12);
    ck_fails(induct_train_step(o, big, B, T, &loss), INDUCT_EINVAL);
    induct_dataset_free(big);

    /* a workspace request over the library's limit (n_ctx allows it, the arena does
     * not): refused, and the next forward of the earlier shape is unaffected */
    induct_model_config c;
    tu_tiny_config(&c);
    c.n_layers = 1;
    c.d_model = 64;
    c.n_heads = 64; /* d_head 1: 64 heads x T^2 attention floats */
    c.positional = INDUCT_POS_NONE;
    c.n_ctx = 1u << 16;
    induct_model *big_m;
    ck_ok(induct_model_new(&big_m, &c));
    float l_small[B * (T - 1)], l_again[B * (T - 1)];
    ck_ok(induct_model_forward(big_m, tok, B, T, NULL, 0, l_small, B * (T - 1), NULL));
    size_t nb;
    float *big_before = snapshot(big_m, &nb);
    size_t T_big = 1u << 15;
    int32_t *long_tok = malloc(T_big * sizeof *long_tok);
    tu_tokens(long_tok, T_big, 11, 5);
    ck_fails(induct_model_forward(big_m, long_tok, 1, (uint32_t)T_big, NULL, 0, NULL, 0, NULL),
             INDUCT_ELIMIT);
    ck_fails(induct_model_backward(big_m, long_tok, 1, (uint32_t)T_big, NULL), INDUCT_ELIMIT);
    free(long_tok);
    ck_ok(induct_model_forward(big_m, tok, B, T, NULL, 0, l_again, B * (T - 1), NULL));
    ck_assert(memcmp(l_small, l_again, sizeof l_small) == 0);
    assert_unchanged(big_m, big_before, nb);
    free(big_before);
    induct_model_free(big_m);

    /* the model is exactly as before: weights bitwise, same losses */
    assert_unchanged(m, before, n_before);
    ck_ok(induct_model_forward(m, tok, B, T, NULL, 0, losses, B * (T - 1), NULL));
    ck_assert(memcmp(clean_losses, losses, sizeof losses) == 0);
    free(before);
    induct_optimizer_free(o);
    induct_model_free(m);
}
END_TEST

/* The optimizer holds a reference: the model may be freed first. */
START_TEST(test_free_order) {
    induct_model *m = tiny_model(0, 0, 0);
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_SGD));
    induct_model_free(m);
    int32_t tok[16];
    tu_tokens(tok, 16, 11, 8);
    double l;
    ck_ok(induct_train_step_tokens(o, tok, 2, 8, &l));
    ck_assert(isfinite(l));
    induct_optimizer_free(o);
}
END_TEST

/* ---- repeated-random-token dataset ---------------------------------------------------------- */

static int rrt_new(const induct_rrt_config *rc) {
    induct_dataset *d = (induct_dataset *)rc;
    int rc_ = induct_dataset_new_rrt(&d, rc);
    if (rc_ == INDUCT_OK) induct_dataset_free(d);
    else ck_assert_ptr_null(d);
    return rc_;
}

START_TEST(test_rrt_validation) {
    induct_rrt_config rc;
#define BAD(stmt, code)                                                                    \
    do {                                                                                   \
        induct_rrt_config_init(&rc, sizeof rc);                                            \
        rc.d_vocab = 20;                                                                   \
        rc.min_block = 2;                                                                  \
        stmt;                                                                              \
        induct_error_clear();                                                              \
        int got_ = rrt_new(&rc);                                                           \
        ck_assert_msg(got_ == (code), "%s: got %s (%s)", #stmt, induct_status_name(got_),  \
                      induct_last_error_message());                                        \
        if ((code) != INDUCT_OK) ck_assert(induct_last_error_message()[0] != '\0');        \
    } while (0)
    BAD((void)0, INDUCT_OK);
    BAD(rc.d_vocab = 0, INDUCT_EINVAL);
    BAD(rc.n_repeats = 0, INDUCT_EINVAL);
    BAD(rc.n_repeats = 1, INDUCT_EINVAL);
    BAD(rc.min_block = 0, INDUCT_EINVAL);
    BAD((rc.min_block = 5, rc.max_block = 4), INDUCT_EINVAL);
    BAD((rc.token_lo = 5, rc.token_hi = 5), INDUCT_EINVAL);
    BAD((rc.token_lo = 6, rc.token_hi = 5), INDUCT_EINVAL);
    BAD(rc.token_hi = 21, INDUCT_EINVAL);
    BAD(rc.token_lo = 20, INDUCT_EINVAL); /* token_hi 0 = d_vocab: empty range */
    BAD(rc.bos = 0, INDUCT_EINVAL);       /* inside [0, 20) */
    BAD((rc.token_lo = 1, rc.bos = 0), INDUCT_OK);
    BAD((rc.token_hi = 19, rc.bos = 19), INDUCT_OK);
    BAD((rc.token_hi = 19, rc.bos = 20), INDUCT_EINVAL); /* >= d_vocab */
    BAD((rc.token_hi = 19, rc.bos = 18), INDUCT_EINVAL);
    BAD((rc.token_lo = 1, rc.bos = -2), INDUCT_EINVAL);
    BAD((rc.token_lo = 1, rc.bos = INT32_MIN), INDUCT_EINVAL);
    BAD(rc.distinct_block = 2, INDUCT_EINVAL);
    BAD((rc.distinct_block = 1, rc.token_hi = 5, rc.max_block = 6), INDUCT_EINVAL);
    BAD((rc.distinct_block = 1, rc.token_hi = 5, rc.max_block = 5), INDUCT_OK);
#undef BAD
}
END_TEST

/* Checks every documented invariant of an RRT batch; returns the block lengths seen. */
static void check_rrt_batch(const induct_rrt_config *rc, const int32_t *tok, const int32_t *meta,
                            uint32_t B, uint32_t T, uint32_t lo, uint32_t hi, int *seen) {
    uint32_t tlo = rc->token_lo, thi = rc->token_hi ? rc->token_hi : rc->d_vocab;
    uint32_t off = rc->bos >= 0 ? 1 : 0;
    for (uint32_t b = 0; b < B; b++) {
        const int32_t *x = tok + (size_t)b * T;
        uint32_t L = (uint32_t)meta[b];
        ck_assert_msg(L >= lo && L <= hi, "block %u outside [%u, %u]", L, lo, hi);
        ck_assert_uint_le(off + rc->n_repeats * L, T);
        seen[L] = 1;
        if (rc->bos >= 0) ck_assert_int_eq(x[0], rc->bos);
        for (uint32_t t = off; t < T; t++)
            ck_assert_msg(x[t] >= (int32_t)tlo && x[t] < (int32_t)thi, "token %d at %u", x[t], t);
        for (uint32_t r = 1; r < rc->n_repeats; r++)
            for (uint32_t i = 0; i < L; i++) ck_assert_int_eq(x[off + r * L + i], x[off + i]);
        if (rc->distinct_block)
            for (uint32_t i = 0; i < L; i++)
                for (uint32_t j = 0; j < i; j++) ck_assert_int_ne(x[off + i], x[off + j]);
    }
}

START_TEST(test_rrt_generator) {
    enum { B = 32, T = 40 };
    static int32_t tok[B * T], tok2[B * T], meta[B], meta2[B];
    int seen[T + 1];

    /* BOS, 3 repeats, distinct blocks of 3..9 from [2, 30) */
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 31;
    rc.n_repeats = 3;
    rc.min_block = 3;
    rc.max_block = 9;
    rc.token_lo = 2;
    rc.token_hi = 30;
    rc.bos = 30;
    rc.distinct_block = 1;
    rc.seed = 77;
    induct_dataset *d;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    ck_assert_uint_eq(induct_dataset_d_vocab(d), 31);
    memset(seen, 0, sizeof seen);
    for (uint64_t idx = 0; idx < 8; idx++) {
        ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, idx, B, T, tok, B * T, meta, B));
        check_rrt_batch(&rc, tok, meta, B, T, 3, 9, seen);
    }
    for (uint32_t L = 3; L <= 9; L++) ck_assert_msg(seen[L], "block length %u never drawn", L);
    /* deterministic: same (split, index) twice, and from a second handle with the seed */
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 5, B, T, tok, B * T, meta, B));
    induct_dataset *d_same;
    ck_ok(induct_dataset_new_rrt(&d_same, &rc));
    ck_ok(induct_dataset_batch(d_same, INDUCT_SPLIT_TRAIN, 5, B, T, tok2, B * T, meta2, B));
    ck_assert(memcmp(tok, tok2, sizeof tok) == 0 && memcmp(meta, meta2, sizeof meta) == 0);
    /* different index, split or seed: different batches */
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 6, B, T, tok2, B * T, NULL, 0));
    ck_assert(memcmp(tok, tok2, sizeof tok) != 0);
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 5, B, T, tok2, B * T, NULL, 0));
    ck_assert(memcmp(tok, tok2, sizeof tok) != 0);
    induct_dataset_free(d_same);
    rc.seed = 78;
    ck_ok(induct_dataset_new_rrt(&d_same, &rc));
    ck_ok(induct_dataset_batch(d_same, INDUCT_SPLIT_TRAIN, 5, B, T, tok2, B * T, NULL, 0));
    ck_assert(memcmp(tok, tok2, sizeof tok) != 0);
    induct_dataset_free(d_same);
    /* a batch's first rows do not depend on the batch size */
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 5, 4, T, tok2, 4 * T, NULL, 0));
    ck_assert(memcmp(tok, tok2, 4 * T * sizeof *tok) == 0);
    /* seq_len too short for 3 repeats of 9 after BOS: 1 + 27 > 27 */
    ck_fails(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, B, 27, tok, B * T, NULL, 0),
             INDUCT_ERANGE);
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, B, 28, tok, B * T, meta, B));
    induct_dataset_free(d);

    /* the usual induction-head data: no BOS, 2 repeats, max_block 0 = floor(T / 2) */
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 64;
    rc.seed = 1;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    memset(seen, 0, sizeof seen);
    for (uint64_t idx = 0; idx < 8; idx++) {
        ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, idx, B, T, tok, B * T, meta, B));
        check_rrt_batch(&rc, tok, meta, B, T, 8, T / 2, seen);
    }
    ck_assert(seen[8] && seen[T / 2]); /* both ends of [min_block, T/2] occur */
    /* with a BOS the block fits in T - 1 */
    induct_dataset_free(d);
    rc.token_lo = 1;
    rc.bos = 0;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    memset(seen, 0, sizeof seen);
    for (uint64_t idx = 0; idx < 8; idx++) {
        ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, idx, B, T - 1, tok, B * T, meta, B));
        check_rrt_batch(&rc, tok, meta, B, T - 1, 8, (T - 2) / 2, seen);
    }
    ck_assert(seen[(T - 2) / 2]);
    induct_dataset_free(d);
}
END_TEST

/* distinct blocks whose automatic maximum exceeds the token range: an error, not a hang */
START_TEST(test_rrt_distinct_auto_max) {
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 6;
    rc.min_block = 2;
    rc.distinct_block = 1; /* max_block 0: floor(T / 2) = 16 > 6 tokens */
    induct_dataset *d;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    int32_t tok[4 * 32];
    ck_fails(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 4, 32, tok, 4 * 32, NULL, 0),
             INDUCT_ERANGE);
    /* short sequences whose blocks fit in the range still work */
    int32_t meta[4];
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 4, 12, tok, 4 * 12, meta, 4));
    for (int b = 0; b < 4; b++) ck_assert(meta[b] >= 2 && meta[b] <= 6);
    induct_dataset_free(d);
}
END_TEST

/* ---- token-array dataset ---------------------------------------------------------------------- */

START_TEST(test_token_windows) {
    enum { T = 8, N = 40, B = 64 };
    int32_t src[N], tok[B * T], meta[B];
    for (int i = 0; i < N; i++) src[i] = (i * 7) % 13;
    induct_dataset *d;
    /* n = T + 1: exactly one window, starting at 0 */
    ck_ok(induct_dataset_new_tokens(&d, src, T + 1, 13, 5));
    ck_assert_uint_eq(induct_dataset_d_vocab(d), 13);
    for (uint32_t split = 0; split < 2; split++) {
        ck_ok(induct_dataset_batch(d, split, 3, B, T, tok, B * T, meta, B));
        for (int b = 0; b < B; b++) {
            ck_assert_int_eq(meta[b], 0);
            ck_assert(memcmp(tok + b * T, src, T * sizeof *src) == 0);
        }
    }
    /* ... and nothing longer */
    ck_fails(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, B, T + 1, tok, B * T + B, NULL, 0),
             INDUCT_ERANGE);
    induct_dataset_free(d);
    /* n = T: no window with a next-token target */
    ck_ok(induct_dataset_new_tokens(&d, src, T, 13, 5));
    ck_fails(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, B, T, tok, B * T, meta, B),
             INDUCT_ERANGE);
    induct_dataset_free(d);
    /* n = N: starts cover exactly {0 .. N - T - 1}; windows are the source slices */
    ck_ok(induct_dataset_new_tokens(&d, src, N, 13, 5));
    int seen[N] = {0};
    for (uint64_t idx = 0; idx < 8; idx++) {
        ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, idx, B, T, tok, B * T, meta, B));
        for (int b = 0; b < B; b++) {
            ck_assert(meta[b] >= 0 && meta[b] <= N - T - 1);
            seen[meta[b]]++;
            ck_assert(memcmp(tok + b * T, src + meta[b], T * sizeof *src) == 0);
        }
    }
    for (int s = 0; s <= N - T - 1; s++) ck_assert_msg(seen[s] > 0, "start %d never drawn", s);
    /* the copy is the library's: changing the caller's array changes nothing */
    int32_t again[B * T];
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 7, B, T, tok, B * T, NULL, 0));
    for (int i = 0; i < N; i++) src[i] = 12 - src[i];
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 7, B, T, again, B * T, NULL, 0));
    ck_assert(memcmp(tok, again, sizeof tok) == 0);
    /* the eval split is a different stream */
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 7, B, T, again, B * T, NULL, 0));
    ck_assert(memcmp(tok, again, sizeof tok) != 0);
    induct_dataset_free(d);
}
END_TEST

int main(void) {
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("version-and-errors");
    tcase_add_test(tc, test_version);
    tcase_add_test(tc, test_status_table);
    tcase_add_test(tc, test_errors_per_thread);
    suite_add_tcase(s, tc);
    tc = tcase_create("configs");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_config_init_sizes);
    tcase_add_test(tc, test_config_tail);
    tcase_add_test(tc, test_invalid_model_configs);
    suite_add_tcase(s, tc);
    tc = tcase_create("arguments");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_free_null);
    tcase_add_test(tc, test_null_arguments);
    tcase_add_test(tc, test_token_and_length_ranges);
    tcase_add_test(tc, test_buffer_sizes);
    tcase_add_test(tc, test_failure_modifies_nothing);
    tcase_add_test(tc, test_free_order);
    suite_add_tcase(s, tc);
    tc = tcase_create("datasets");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_rrt_validation);
    tcase_add_test(tc, test_rrt_generator);
    tcase_add_test(tc, test_rrt_distinct_auto_max);
    tcase_add_test(tc, test_token_windows);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
