/* Resource limits: the per-model memory cap (max_bytes) and what it covers,
 * memory that does not grow with n_ctx, size arithmetic that used to wrap around,
 * the checkpoint header limits, and the bugs the fuzz targets found (each also has a
 * regression input under tests/fuzz/), and the documented errors that no other suite
 * provoked. Links only the shared library. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define ck_fails(call, expected)                                                           \
    do {                                                                                   \
        induct_error_clear();                                                              \
        ck_assert_status(call, expected);                                                  \
        ck_assert_int_eq(induct_last_error_code(), (expected));                            \
        ck_assert_msg(induct_last_error_message()[0] != '\0', "%s: empty message", #call); \
    } while (0)

static induct_model *new_model(induct_model_config *c) {
    induct_model *m = NULL;
    ck_ok(induct_model_new(&m, c));
    return m;
}

static induct_dataset *rrt(uint32_t d_vocab) { return tu_rrt(d_vocab, 1, 0); }

/* Resident set size of this process in bytes (Linux). */
static uint64_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    unsigned long size, resident;
    ck_assert_int_eq(fscanf(f, "%lu %lu", &size, &resident), 2);
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t cap_of(const induct_model *m) {
    induct_model_config c;
    c.size = sizeof c;
    ck_ok(induct_model_get_config(m, &c));
    return c.max_bytes;
}

/* ---- the cap at creation ------------------------------------------------------ */

START_TEST(test_cap_model_new) {
    induct_model_config c;
    tu_tiny_config(&c);
    ck_assert_uint_eq(c.max_bytes, 0); /* default: no cap */
    induct_model *m = new_model(&c);
    uint64_t used = induct_model_memory_used(m);
    size_t n = induct_model_n_params(m);
    /* parameters and gradients, plus tables of a few hundred bytes per tensor */
    ck_assert_uint_ge(used, 8u * n);
    ck_assert_uint_le(used, 8u * n + 512u * induct_model_n_tensors(m) + 1024u);
    induct_model_free(m);

    /* exactly the model's need is accepted, one byte less is refused */
    c.max_bytes = used;
    m = new_model(&c);
    ck_assert_uint_eq(induct_model_memory_used(m), used);
    ck_assert_uint_eq(cap_of(m), used);
    induct_model *cl = NULL;
    ck_ok(induct_model_clone(&cl, m)); /* the clone inherits the cap and fits it */
    ck_assert_uint_eq(cap_of(cl), used);
    induct_model_free(cl);
    induct_model_free(m);
    tu_tiny_config(&c);
    induct_model *sentinel = new_model(&c);
    m = sentinel; /* induct_model_new must reset it to NULL */
    c.max_bytes = used - 1;
    ck_fails(induct_model_new(&m, &c), INDUCT_ELIMIT);
    ck_assert_ptr_null(m);
    induct_model_free(sentinel);

    /* a cap far below what n_ctx asks for: refused before anything is allocated */
    tu_tiny_config(&c);
    c.n_ctx = 1u << 30; /* W_pos alone would be 2^33 floats */
    c.max_bytes = 1u << 20;
    uint64_t before = rss_bytes();
    ck_fails(induct_model_new(&m, &c), INDUCT_ELIMIT);
    ck_assert_uint_lt(rss_bytes() - before, 1u << 20);
}
END_TEST

START_TEST(test_table_limit) {
    /* 2^24 layers of width 1: 2^27 parameters are within the parameter limit, but the
     * tensor tables (eight entries per layer) would take gigabytes */
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = 1u << 24;
    c.d_model = 1;
    c.n_heads = 1;
    c.n_ctx = 1;
    c.d_vocab = 1;
    c.positional = INDUCT_POS_NONE;
    induct_model *m = NULL;
    uint64_t before = rss_bytes();
    ck_fails(induct_model_new(&m, &c), INDUCT_ELIMIT);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "tables"));
    ck_assert_uint_lt(rss_bytes() - before, 1u << 20);
}
END_TEST

/* ---- the cap on later allocations -------------------------------------------------- */

START_TEST(test_cap_workspace) {
    induct_model_config c;
    tu_tiny_config(&c);
    induct_model *m = new_model(&c);
    uint64_t base = induct_model_memory_used(m);
    ck_ok(induct_model_set_max_bytes(m, base + 64)); /* room for no workspace */
    int32_t tok[2 * 8];
    tu_tokens(tok, 16, 11, 1);
    double loss;
    ck_fails(induct_model_forward(m, tok, 2, 8, NULL, 0, NULL, 0, &loss), INDUCT_ELIMIT);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "max_bytes"));
    ck_assert_uint_eq(induct_model_memory_used(m), base); /* nothing was allocated */
    /* lifting the cap lets it run; the workspace is then held */
    ck_ok(induct_model_set_max_bytes(m, 0));
    ck_ok(induct_model_forward(m, tok, 2, 8, NULL, 0, NULL, 0, &loss));
    uint64_t with_ws = induct_model_memory_used(m);
    ck_assert_uint_gt(with_ws, base);
    /* a cap below what is held is refused and the old cap stays */
    ck_fails(induct_model_set_max_bytes(m, with_ws - 1), INDUCT_ELIMIT);
    ck_assert_uint_eq(cap_of(m), 0);
    ck_ok(induct_model_set_max_bytes(m, with_ws));
    ck_assert_uint_eq(cap_of(m), with_ws);
    /* the same shape and smaller ones reuse the workspace within the cap */
    ck_ok(induct_model_forward(m, tok, 2, 8, NULL, 0, NULL, 0, &loss));
    ck_ok(induct_model_forward(m, tok, 1, 8, NULL, 0, NULL, 0, &loss));
    ck_ok(induct_model_backward(m, tok, 2, 4, &loss));
    ck_assert_uint_eq(induct_model_memory_used(m), with_ws);
    ck_fails(induct_model_set_max_bytes(NULL, 1), INDUCT_EINVAL);
    ck_assert_uint_eq(induct_model_memory_used(NULL), 0);
    induct_model_free(m);
}
END_TEST

START_TEST(test_cap_optimizer) {
    induct_model_config c;
    tu_tiny_config(&c);
    induct_model *m = new_model(&c);
    uint64_t base = induct_model_memory_used(m), n = induct_model_n_params(m);
    /* SGD keeps one moment (4 bytes a parameter), AdamW two */
    ck_ok(induct_model_set_max_bytes(m, base + 4 * n));
    induct_optimizer *o = (induct_optimizer *)m;
    ck_fails(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW), INDUCT_ELIMIT);
    ck_assert_ptr_null(o);
    ck_assert_uint_eq(induct_model_memory_used(m), base);
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_SGD));
    ck_assert_uint_eq(induct_model_memory_used(m), base + 4 * n);
    induct_optimizer_free(o);
    ck_assert_uint_eq(induct_model_memory_used(m), base);
    ck_ok(induct_model_set_max_bytes(m, base + 8 * n));
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    ck_assert_uint_eq(induct_model_memory_used(m), base + 8 * n);
    /* induct_optimizer_load counts the moments the same way */
    char path[] = "/tmp/induct-cap-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_ok(induct_optimizer_save(o, path));
    induct_optimizer_free(o);
    ck_ok(induct_model_set_max_bytes(m, base + 8 * n - 1));
    o = (induct_optimizer *)m;
    ck_fails(induct_optimizer_load(&o, m, path), INDUCT_ELIMIT);
    ck_assert_ptr_null(o);
    ck_assert_uint_eq(induct_model_memory_used(m), base);
    ck_ok(induct_model_set_max_bytes(m, base + 8 * n));
    ck_ok(induct_optimizer_load(&o, m, path));
    ck_assert_uint_eq(induct_model_memory_used(m), base + 8 * n);
    unlink(path);
    /* the model may go first: the optimizer's reference keeps the accounting alive */
    induct_model_free(m);
    induct_optimizer_free(o);
}
END_TEST

static int count_calls(const induct_progress *p, void *ud) {
    (void)p;
    ++*(int *)ud;
    return 0;
}

START_TEST(test_cap_train_and_analysis) {
    induct_model_config c;
    tu_tiny_config(&c);
    induct_model *m = new_model(&c);
    induct_optimizer *o = NULL;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_SGD));
    induct_dataset *d = rrt(11);
    double loss;
    /* measure one step of batch 4: workspace + staging */
    ck_ok(induct_train_step(o, d, 4, 8, &loss));
    uint64_t after_step = induct_model_memory_used(m);
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_STEP, 0));
    ck_ok(induct_model_set_max_bytes(m, after_step + 1024)); /* + evaluation tokens */
    /* a run whose batch does not fit is refused before its first step and before
     * the metrics log is created */
    char dir[] = "/tmp/induct-hardening-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char log[256];
    snprintf(log, sizeof log, "%s/metrics.jsonl", dir);
    induct_train_config tc;
    induct_train_config_init(&tc, sizeof tc);
    tc.steps = 3;
    tc.batch = 4096;
    tc.seq_len = 8;
    tc.metrics_path = log;
    int calls = 0;
    ck_fails(induct_train(o, d, &tc, count_calls, &calls), INDUCT_ELIMIT);
    ck_assert_int_eq(calls, 0);
    ck_assert_int_ne(access(log, F_OK), 0);
    double step;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step));
    ck_assert(step == 0.0);
    ck_assert_uint_eq(induct_model_memory_used(m), after_step);
    /* an evaluation set that does not fit: also refused up front */
    tc.batch = 4;
    tc.eval_every = 1;
    tc.eval_batch = 4096;
    ck_fails(induct_train(o, d, &tc, count_calls, &calls), INDUCT_ELIMIT);
    ck_assert_int_eq(calls, 0);
    /* within the cap it trains, and holds nothing more afterwards */
    tc.eval_batch = 2;
    ck_ok(induct_train(o, d, &tc, count_calls, &calls));
    ck_assert_int_gt(calls, 0);
    ck_assert_uint_eq(induct_model_memory_used(m), after_step);
    /* analyses: the evaluation batch counts too */
    float out[4];
    size_t len;
    ck_fails(induct_analysis_previous_token_score(m, d, 4096, 8, out, 4, &len), INDUCT_ELIMIT);
    ck_assert_uint_eq(induct_model_memory_used(m), after_step);
    ck_ok(induct_analysis_previous_token_score(m, d, 2, 8, out, 4, &len));
    for (int i = 0; i < 4; i++) ck_assert(out[i] >= 0.0f && out[i] <= 1.0f);
    rmdir(dir);
    induct_dataset_free(d);
    induct_optimizer_free(o);
    induct_model_free(m);
}
END_TEST

START_TEST(test_loaded_model_uncapped) {
    induct_model_config c;
    tu_tiny_config(&c);
    c.max_bytes = 1u << 20;
    induct_model *m = new_model(&c);
    char path[] = "/tmp/induct-hardening-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_ok(induct_model_save(m, path));
    induct_model *l = NULL;
    ck_ok(induct_model_load(&l, path));
    /* the cap is the host's policy, not part of the file */
    ck_assert_uint_eq(cap_of(l), 0);
    ck_assert_uint_eq(induct_model_memory_used(l), induct_model_memory_used(m));
    ck_ok(induct_model_set_max_bytes(l, induct_model_memory_used(l)));
    int32_t tok[8];
    tu_tokens(tok, 8, 11, 3);
    ck_fails(induct_model_forward(l, tok, 1, 8, NULL, 0, NULL, 0, NULL), INDUCT_ELIMIT);
    unlink(path);
    induct_model_free(l);
    induct_model_free(m);
}
END_TEST


/* ---- the analysis suite under the cap ------------------------------------------------ */

START_TEST(test_cap_analysis_suite) {
    induct_model_config c;
    tu_tiny_config(&c);
    c.n_ctx = 16;
    induct_model *m = new_model(&c);
    induct_dataset *d = rrt(11);
    int32_t tok[4 * 16];
    tu_tokens(tok, 64, 11, 4);
    /* warm up: a workspace for (4, 16), then cap just above what is held */
    ck_ok(induct_model_forward(m, tok, 4, 16, NULL, 0, NULL, 0, NULL));
    uint64_t held = induct_model_memory_used(m);
    ck_ok(induct_model_set_max_bytes(m, held + 4096));

    /* an evaluation set far beyond the cap: refused before the tokens are generated */
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec);
    ec.n_seq = 1u << 20;
    ec.seq_len = 16;
    ec.early = 2;
    ec.late = 10;
    double icl;
    ck_fails(induct_analysis_icl_score(m, d, &ec, &icl), INDUCT_ELIMIT);
    ck_assert_uint_eq(induct_model_memory_used(m), held);
    ec.n_seq = 8; /* 8 x 16 tokens (512 bytes) held while it runs, then released */
    ck_ok(induct_analysis_icl_score(m, d, &ec, &icl));
    ck_assert(isfinite(icl));
    ck_assert_uint_eq(induct_model_memory_used(m), held);

    /* weight-based scores: their double copies are checked against the cap */
    float comp[4 * 4];
    size_t len;
    ck_ok(induct_model_set_max_bytes(m, held + 64));
    ck_fails(induct_analysis_composition(m, INDUCT_COMPOSITION_Q, comp, 16, &len), INDUCT_ELIMIT);
    float eig[4];
    ck_fails(induct_analysis_copying_eigen(m, eig, 4, &len), INDUCT_ELIMIT);
    ck_ok(induct_model_set_max_bytes(m, 0));
    ck_ok(induct_analysis_composition(m, INDUCT_COMPOSITION_Q, comp, 16, &len));
    ck_ok(induct_analysis_copying_eigen(m, eig, 4, &len));

    /* a mean-ablation reference is held with the model; replacing it keeps one */
    ck_ok(induct_model_set_ablation_mean(m, tok, 4, 16, INDUCT_MEAN_PER_POSITION));
    uint64_t with_mean = induct_model_memory_used(m);
    /* [n_layers][n_heads][16][d_head] floats, and the mode table of the ablation state
     * that now holds the reference */
    ck_assert_uint_eq(with_mean - held, 2u * 2u * 16u * 4u * sizeof(float) + 2u * 2u);
    ck_ok(induct_model_set_ablation_mean(m, tok, 4, 16, INDUCT_MEAN_POOLED));
    ck_assert_uint_eq(induct_model_memory_used(m) - held,
                      2u * 2u * 1u * 4u * sizeof(float) + 2u * 2u);
    ck_ok(induct_model_set_max_bytes(m, induct_model_memory_used(m)));
    ck_fails(induct_model_set_ablation_mean(m, tok, 4, 16, INDUCT_MEAN_PER_POSITION),
             INDUCT_ELIMIT);
    /* pattern-preserving ablation keeps clean patterns: counted, and released by clear */
    ck_ok(induct_model_set_max_bytes(m, 0));
    uint64_t before = induct_model_memory_used(m);
    ck_ok(induct_model_ablate_head(m, 0, 1, INDUCT_ABLATE_ZERO));
    ck_ok(induct_model_set_preserve_patterns(m, 1));
    ck_ok(induct_model_forward(m, tok, 4, 16, NULL, 0, NULL, 0, NULL));
    uint64_t frozen = induct_model_memory_used(m) - before;
    /* the layer after the ablated one: [batch 4][heads 2][16][16] */
    ck_assert_uint_eq(frozen, 4u * 2u * 16u * 16u * sizeof(float));
    ck_ok(induct_model_clear_ablations(m));
    ck_assert_uint_eq(induct_model_memory_used(m), before);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* ---- n_ctx costs nothing until used --------------------------------------------------- */

START_TEST(test_memory_independent_of_n_ctx) {
    induct_model_config c;
    tu_tiny_config(&c);
    c.positional = INDUCT_POS_NONE;
    induct_model *small = new_model(&c);
    uint64_t r0 = rss_bytes();
    c.n_ctx = UINT32_MAX; /* no W_pos: nothing in the model depends on n_ctx */
    induct_model *big = new_model(&c);
    ck_assert_uint_lt(rss_bytes() - r0, 1u << 20);
    ck_assert_uint_eq(induct_model_memory_used(big), induct_model_memory_used(small));
    /* the workspace follows the (batch, seq_len) used, not n_ctx */
    int32_t tok[2 * 8];
    tu_tokens(tok, 16, 11, 5);
    double a, b;
    ck_ok(induct_model_forward(small, tok, 2, 8, NULL, 0, NULL, 0, &a));
    ck_ok(induct_model_forward(big, tok, 2, 8, NULL, 0, NULL, 0, &b));
    ck_assert(a == b); /* same seed, same weights */
    ck_assert_uint_eq(induct_model_memory_used(big), induct_model_memory_used(small));
    induct_model_free(big);
    induct_model_free(small);

    /* with learned positions, W_pos [n_ctx, d_model] (and its gradient) is the only
     * part that grows with n_ctx */
    tu_tiny_config(&c);
    induct_model *s8 = new_model(&c);
    c.n_ctx = 1u << 18;
    r0 = rss_bytes();
    induct_model *s18 = new_model(&c);
    uint64_t w_pos = (uint64_t)((1u << 18) - 8) * c.d_model * 4; /* extra W_pos bytes */
    ck_assert_uint_eq(induct_model_memory_used(s18) - induct_model_memory_used(s8), 2 * w_pos);
    ck_assert_uint_lt(rss_bytes() - r0, 2 * w_pos + (1u << 20));
    uint64_t r1 = rss_bytes(), u18 = induct_model_memory_used(s18),
             u8 = induct_model_memory_used(s8);
    ck_ok(induct_model_backward(s18, tok, 2, 8, &a));
    ck_ok(induct_model_backward(s8, tok, 2, 8, &b));
    ck_assert_uint_eq(induct_model_memory_used(s18) - u18, induct_model_memory_used(s8) - u8);
    /* the backward pass writes W_pos's gradient (zeroing it touches 2^21 floats), but
     * no activation memory grows with n_ctx */
    ck_assert_uint_lt(rss_bytes() - r1, w_pos + (1u << 20));
    induct_model_free(s18);
    induct_model_free(s8);
}
END_TEST

/* ---- sizes that used to wrap around (audit) ------------------------------------------ */

/* A model without positions accepts any seq_len up to n_ctx = 2^32 - 1, so batch x
 * seq_len can be made to overflow size_t once multiplied by sizeof(int32_t). Before the
 * fix these calls allocated a wrapped (tiny) buffer and wrote past it. */
START_TEST(test_token_buffer_overflow) {
    induct_model_config c;
    tu_tiny_config(&c);
    c.positional = INDUCT_POS_NONE;
    c.n_ctx = UINT32_MAX;
    induct_model *m = new_model(&c);
    induct_optimizer *o = NULL;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_SGD));
    induct_dataset *d = rrt(11);
    const uint32_t big = 1u << 31; /* 2^31 x 2^31 x 4 = 2^64 */
    uint64_t used = induct_model_memory_used(m);
    ck_fails(induct_train_step(o, d, big, big, NULL), INDUCT_ELIMIT);
    float out[4];
    size_t len;
    ck_fails(induct_analysis_previous_token_score(m, d, big, big, out, 4, &len), INDUCT_ELIMIT);
    ck_fails(induct_analysis_induction_score(m, d, big, big, out, 4, &len), INDUCT_ELIMIT);
    /* the analysis suite's probes: 2^31 sequences of 2 x 2^30 tokens (segfault before) */
    induct_probe_config pc;
    induct_probe_config_init(&pc, sizeof pc);
    pc.n_seq = big;
    pc.block_len = 2;
    pc.n_repeats = 1u << 30;
    pc.bos = -1;
    ck_fails(induct_analysis_prefix_matching(m, &pc, out, 4, &len), INDUCT_ELIMIT);
    ck_fails(induct_analysis_duplicate_token(m, &pc, out, 4, &len), INDUCT_ELIMIT);
    induct_train_config tc;
    induct_train_config_init(&tc, sizeof tc);
    tc.batch = big;
    tc.seq_len = big;
    ck_fails(induct_train(o, d, &tc, NULL, NULL), INDUCT_ELIMIT);
    tc.batch = 1;
    tc.eval_every = 1;
    tc.eval_batch = UINT32_MAX;
    tc.seq_len = UINT32_MAX;
    ck_fails(induct_train(o, d, &tc, NULL, NULL), INDUCT_ELIMIT);
    /* large but representable shapes hit the fixed workspace limit (2^36 floats)
     * before any token is generated */
    ck_fails(induct_train_step(o, d, 1u << 20, 1u << 16, NULL), INDUCT_ELIMIT);
    ck_assert_uint_eq(induct_model_memory_used(m), used);
    /* CBLAS sizes are int: 2^31 positions are refused even by a model so narrow that
     * its workspace would stay under the fixed limit */
    induct_model_config n;
    induct_model_config_init(&n, sizeof n);
    n.n_layers = 1;
    n.d_model = 1;
    n.n_heads = 1;
    n.d_vocab = 11;
    n.positional = INDUCT_POS_NONE;
    induct_model *narrow = new_model(&n);
    induct_optimizer *on = NULL;
    ck_ok(induct_optimizer_new(&on, narrow, INDUCT_OPTIM_SGD));
    ck_fails(induct_train_step(on, d, 1u << 30, 2, NULL), INDUCT_ELIMIT);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "2^31 - 1 positions"));
    ck_ok(induct_train_step(on, d, 4, 2, NULL));
    induct_optimizer_free(on);
    induct_model_free(narrow);
    double step;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step));
    ck_assert(step == 0.0);
    induct_dataset_free(d);
    induct_optimizer_free(o);
    induct_model_free(m);
}
END_TEST

/* ---- checkpoint headers ---------------------------------------------------------------- */

static void write_header(const char *path, const char *json, uint64_t declared_len,
                         uint64_t file_len) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(declared_len >> (8 * i));
    ck_assert_uint_eq(fwrite(b, 1, 8, f), 8);
    if (json) ck_assert_uint_eq(fwrite(json, 1, strlen(json), f), strlen(json));
    ck_assert_int_eq(fflush(f), 0);
    if (file_len) ck_assert_int_eq(ftruncate(fileno(f), (off_t)file_len), 0); /* sparse */
    fclose(f);
}

START_TEST(test_header_limits) {
    char path[] = "/tmp/induct-hardening-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    induct_model *m = NULL;
    /* a header above 16 MiB is refused before it is read (the file is sparse) */
    uint64_t over = (16u << 20) + 8;
    write_header(path, NULL, over, 8 + over);
    ck_fails(induct_model_load(&m, path), INDUCT_EFORMAT);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "outside [2, 16777216]"));
    ck_assert_ptr_null(m);
    /* many entries: a duplicate far apart is still found (entries are sorted by name) */
    enum { N = 3000 };
    size_t cap = (size_t)N * 64 + 64, len = 0;
    char *json = malloc(cap);
    len += (size_t)snprintf(json + len, cap - len, "{");
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(json + len, cap - len,
                                "\"t%d\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},",
                                i == N - 1 ? 17 : i);
    json[len - 1] = '}';
    write_header(path, json, len, 0);
    free(json);
    ck_fails(induct_model_load(&m, path), INDUCT_EFORMAT);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "'t17' appears twice"));
    unlink(path);
}
END_TEST


/* ---- text corpora under a cap; files that are not files ------------------------------ */

START_TEST(test_text_limits) {
    induct_text_config c;
    induct_text_config_init(&c, sizeof c);
    ck_assert_uint_eq(c.max_bytes, 0);
    enum { N = 1000 };
    unsigned char text[N];
    for (int i = 0; i < N; i++) text[i] = (unsigned char)('a' + i % 26);
    induct_dataset *d = NULL;
    /* N tokens of 2 bytes (plus small tables): a cap below 2N is refused... */
    c.max_bytes = 2 * N - 1;
    d = (induct_dataset *)text;
    ck_fails(induct_dataset_new_text(&d, text, N, &c), INDUCT_ELIMIT);
    ck_assert_ptr_null(d);
    /* ... one with room for the tables is not */
    c.max_bytes = 2 * N + 4096;
    ck_ok(induct_dataset_new_text(&d, text, N, &c));
    induct_dataset_free(d);
    /* one-token blocks with half held out: ~1000 segments of 32 bytes, refused before
     * the tables are built (the same text with the default 65536-token blocks fits) */
    c.block_tokens = 1;
    c.val_fraction = 0.5;
    ck_fails(induct_dataset_new_text(&d, text, N, &c), INDUCT_ELIMIT);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "segment tables"));
    c.max_bytes = 0;
    ck_ok(induct_dataset_new_text(&d, text, N, &c));
    induct_dataset_free(d);
    induct_text_config_init(&c, sizeof c);
    c.separator = '\n';

    /* a sparse 1 GiB file next to a small one: refused from the sizes, before reading */
    char dir[] = "/tmp/induct-hardening-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char big[256], small[256];
    snprintf(big, sizeof big, "%s/big.txt", dir);
    snprintf(small, sizeof small, "%s/small.txt", dir);
    FILE *f = fopen(small, "wb");
    ck_assert_uint_eq(fwrite(text, 1, N, f), N);
    fclose(f);
    f = fopen(big, "wb");
    ck_assert_int_eq(ftruncate(fileno(f), (off_t)1 << 30), 0);
    fclose(f);
    c.max_bytes = 1u << 20;
    uint64_t r0 = rss_bytes();
    ck_fails(induct_dataset_new_text_path(&d, dir, NULL, &c), INDUCT_ELIMIT);
    ck_fails(induct_dataset_new_text_path(&d, big, NULL, &c), INDUCT_ELIMIT);
    ck_assert_uint_lt(rss_bytes() - r0, 8u << 20);
    /* the small one alone fits */
    ck_ok(induct_dataset_new_text_path(&d, dir, "small.txt", &c));
    uint64_t n;
    ck_ok(induct_dataset_split_tokens(d, INDUCT_SPLIT_TRAIN, &n));
    uint64_t m;
    ck_ok(induct_dataset_split_tokens(d, INDUCT_SPLIT_EVAL, &m));
    ck_assert_uint_eq(n + m, N + 1); /* the separator */
    induct_dataset_free(d);
    unlink(big);
    unlink(small);
    rmdir(dir);

    /* token files are mapped, not copied; their split tables are capped alike */
    char tf[] = "/tmp/induct-hardening-tok-XXXXXX";
    int tfd = mkstemp(tf);
    close(tfd);
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = i % 50;
    ck_ok(induct_token_file_write(tf, INDUCT_TOKFILE_U16, ids, N));
    induct_token_file_config fc;
    induct_token_file_config_init(&fc, sizeof fc);
    ck_assert_uint_eq(fc.max_bytes, 0);
    fc.block_tokens = 1;
    fc.val_fraction = 0.5;
    fc.max_bytes = 4096;
    ck_fails(induct_dataset_new_token_file(&d, tf, NULL, &fc), INDUCT_ELIMIT);
    fc.block_tokens = 100;
    ck_ok(induct_dataset_new_token_file(&d, tf, NULL, &fc));
    induct_dataset_free(d);
    unlink(tf);

    /* a device or a FIFO is not a text file: EIO, without reading /dev/zero forever
     * or blocking on a FIFO without a writer */
    c.max_bytes = 0;
    ck_fails(induct_dataset_new_text_path(&d, "/dev/zero", NULL, &c), INDUCT_EIO);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "not a regular file"));
    char fifo[] = "/tmp/induct-hardening-fifo-XXXXXX";
    int fd = mkstemp(fifo);
    close(fd);
    unlink(fifo);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_fails(induct_dataset_new_text_path(&d, fifo, NULL, &c), INDUCT_EIO);
    unlink(fifo);
}
END_TEST


/* ---- key-value tasks: memory that followed a caller's seq_len or n_seq ---------------- */

START_TEST(test_kv_limits) {
    induct_kv_config kc;
    induct_kv_config_init(&kc, sizeof kc);
    kc.d_vocab = 11;
    induct_dataset *d = NULL;
    ck_ok(induct_dataset_new_kv(&d, &kc));
    /* the exact ceiling for a context near 2^32 is far beyond its work limit: refused at
     * once, without a table of m + 1 doubles (32 GiB) or 4e9 evaluations */
    double ceil_;
    uint64_t r0 = rss_bytes();
    ck_fails(induct_dataset_kv_ceiling(d, UINT32_MAX, &ceil_), INDUCT_ELIMIT);
    ck_assert_uint_lt(rss_bytes() - r0, 8u << 20);
    /* ... and the blog post's case is unchanged: 24 context tokens, 11 ids */
    ck_ok(induct_dataset_kv_ceiling(d, 25, &ceil_));
    ck_assert(ceil_ > 0.0 && ceil_ <= 1.0);
    /* KV read-outs hold every row's tokens: checked against the model's cap */
    induct_model_config c;
    tu_tiny_config(&c);
    c.n_ctx = 25;
    induct_model *m = new_model(&c);
    ck_ok(induct_model_set_max_bytes(m, induct_model_memory_used(m) + (1u << 20)));
    double acc;
    ck_fails(induct_analysis_kv_accuracy(m, d, 1u << 20, 25, &acc), INDUCT_ELIMIT);
    ck_ok(induct_analysis_kv_accuracy(m, d, 16, 25, &acc));
    ck_assert(acc >= 0.0 && acc <= 1.0);
    induct_model_free(m);
    induct_dataset_free(d);
}
END_TEST

/* ---- bugs found by fuzzing (regression inputs in tests/fuzz/) --------------------------- */

/* tests/fuzz/config/regress-rrt-dvocab-above-int32: token ids are int32, so an RRT
 * vocabulary above 2^31 produced negative ids. */
START_TEST(test_rrt_vocab_fits_int32) {
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = (1u << 31) + 1;
    induct_dataset *d = NULL;
    ck_fails(induct_dataset_new_rrt(&d, &rc), INDUCT_EINVAL);
    ck_assert_ptr_null(d);
    /* 2^31 itself is fine: the largest id is INT32_MAX */
    rc.d_vocab = 1u << 31;
    rc.token_lo = (1u << 31) - 16;
    rc.min_block = 2;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    int32_t tok[4 * 16];
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 4, 16, tok, 64, NULL, 0));
    for (int i = 0; i < 64; i++) ck_assert_int_ge(tok[i], (int32_t)rc.token_lo);
    induct_dataset_free(d);
}
END_TEST


/* ---- documented errors not provoked elsewhere ------------------------------------------- */

static char *tmp_path(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "/tmp/induct-hardening-%ld-%s", (long)getpid(), name);
    return buf;
}

/* Finite weights whose sum overflows: W_E + W_pos = +inf, so the loss is NaN. */
static void fill(induct_model *m, const char *name, float v) {
    size_t n;
    ck_assert_status(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, NULL, 0, &n),
                     INDUCT_EBUFSIZE);
    float *w = malloc(n * sizeof *w);
    for (size_t i = 0; i < n; i++) w[i] = v;
    ck_ok(induct_model_set_tensor(m, name, w, n));
    free(w);
}
static void blow_up(induct_model *m) {
    fill(m, "embed.W_E", 3e38f);
    fill(m, "pos_embed.W_pos", 3e38f);
}

START_TEST(test_errors_numeric) {
    induct_model_config c;
    tu_tiny_config(&c);
    induct_model *m = new_model(&c);
    induct_optimizer *o = NULL;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    blow_up(m);
    int32_t tok[16];
    tu_tokens(tok, 16, 11, 9);
    double loss = 123.0;
    ck_fails(induct_model_backward(m, tok, 2, 8, &loss), INDUCT_ENUMERIC);
    ck_assert(loss == 123.0);
    /* induct_train: the failed first step leaves weights, moments and counter alone */
    float before[8 * 11], after[8 * 11];
    size_t len;
    ck_ok(induct_model_get_tensor(m, "embed.W_E", INDUCT_BUF_PARAM, before, 88, &len));
    induct_dataset *d = rrt(11);
    induct_train_config tc;
    induct_train_config_init(&tc, sizeof tc);
    tc.steps = 5;
    tc.batch = 2;
    tc.seq_len = 8;
    ck_fails(induct_train(o, d, &tc, NULL, NULL), INDUCT_ENUMERIC);
    ck_ok(induct_model_get_tensor(m, "embed.W_E", INDUCT_BUF_PARAM, after, 88, &len));
    ck_assert(memcmp(before, after, sizeof before) == 0);
    double step;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step));
    ck_assert(step == 0.0);
    induct_dataset_free(d);
    induct_optimizer_free(o);
    induct_model_free(m);
}
END_TEST

START_TEST(test_errors_optimizer_files) {
    induct_model_config c;
    tu_tiny_config(&c);
    induct_model *m = new_model(&c);
    induct_optimizer *o = NULL, *l = NULL;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_SGD));
    char p[256];
    tmp_path(p, sizeof p, "opt.safetensors");
    /* save: NULL or empty arguments, a directory that does not exist */
    ck_fails(induct_optimizer_save(NULL, p), INDUCT_EINVAL);
    ck_fails(induct_optimizer_save(o, NULL), INDUCT_EINVAL);
    ck_fails(induct_optimizer_save(o, ""), INDUCT_EINVAL);
    ck_fails(induct_optimizer_save(o, "/nonexistent-induct-dir/opt.safetensors"), INDUCT_EIO);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "/nonexistent-induct-dir"));
    ck_ok(induct_optimizer_save(o, p));
    /* load: NULL arguments (out reset to NULL), a missing file, a directory */
    l = o;
    ck_fails(induct_optimizer_load(&l, NULL, p), INDUCT_EINVAL);
    ck_assert_ptr_null(l);
    ck_fails(induct_optimizer_load(&l, m, NULL), INDUCT_EINVAL);
    ck_fails(induct_optimizer_load(NULL, m, p), INDUCT_EINVAL);
    ck_fails(induct_optimizer_load(&l, m, "/nonexistent-induct-dir/x"), INDUCT_EIO);
    ck_fails(induct_optimizer_load(&l, m, "/tmp"), INDUCT_EIO);
    ck_assert_ptr_null(l);
    ck_ok(induct_optimizer_load(&l, m, p));
    induct_optimizer_free(l);
    unlink(p);
    induct_optimizer_free(o);
    induct_model_free(m);
}
END_TEST

START_TEST(test_errors_misc) {
    ck_fails(induct_train_config_init(NULL, sizeof(induct_train_config)), INDUCT_EINVAL);
    /* an element count whose byte size overflows is refused before the array is read */
    int32_t one = 0;
    induct_dataset *d = (induct_dataset *)&one;
    ck_fails(induct_dataset_new_tokens(&d, &one, SIZE_MAX / 2, 11, 0), INDUCT_ELIMIT);
    ck_assert_ptr_null(d);
}
END_TEST

typedef struct interrupter {
    induct_model *m;
    atomic_int stop, running;
} interrupter;

/* The interrupting thread must land inside a call, which on a loaded machine (tests run
 * in parallel) may take many calls: the loops below call until each call has been
 * interrupted once. Every call either completes or is interrupted, so the outcome does
 * not depend on when the other thread runs, only the number of calls does (no time
 * limit). The loops start once the other thread is interrupting (a handshake). */
static void *interrupt_loop(void *arg) {
    interrupter *it = arg;
    while (!atomic_load(&it->stop)) {
        induct_model_interrupt(it->m);
        atomic_store(&it->running, 1);
    }
    return NULL;
}

static void start_interrupter(interrupter *it, pthread_t *th) {
    ck_assert_int_eq(pthread_create(th, NULL, interrupt_loop, it), 0);
    while (!atomic_load(&it->running)) sched_yield();
}

/* induct_model_interrupt() from another thread stops an analysis with EINTERRUPTED
 * (the flag is cleared when the call starts, so a thread interrupting without pause
 * is needed to land inside a call; every call returns OK or EINTERRUPTED). */
START_TEST(test_errors_analysis_interrupted) {
    induct_model_config c;
    tu_tiny_config(&c);
    c.n_ctx = 64;
    induct_model *m = new_model(&c);
    induct_dataset *d = rrt(11);
    interrupter it = {m, 0, 0};
    pthread_t th;
    start_interrupter(&it, &th);
    float out[4];
    size_t len;
    int interrupted[2] = {0, 0};
    while (!(interrupted[0] && interrupted[1]))
        for (int k = 0; k < 2; k++) {
            induct_error_clear();
            int rc = k ? induct_analysis_induction_score(m, d, 32, 64, out, 4, &len)
                       : induct_analysis_previous_token_score(m, d, 32, 64, out, 4, &len);
            ck_assert_msg(rc == INDUCT_OK || rc == INDUCT_EINTERRUPTED, "%s: %s",
                          induct_status_name(rc), induct_last_error_message());
            if (rc == INDUCT_EINTERRUPTED) {
                ck_assert_int_eq(induct_last_error_code(), INDUCT_EINTERRUPTED);
                interrupted[k] = 1;
            }
        }
    atomic_store(&it.stop, 1);
    pthread_join(th, NULL);
    ck_assert(interrupted[0] && interrupted[1]);
    /* without an interrupt it completes */
    ck_ok(induct_analysis_previous_token_score(m, d, 4, 64, out, 4, &len));
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* Every *_config_init: NULL is EINVAL, a size below the struct or above 4096 is EABI
 * (the struct untouched), its own size and a larger zero-tailed size work. */
typedef int (*init_fn)(void *, size_t);
START_TEST(test_errors_config_inits) {
    /* min: the smallest size accepted, that of the 0.1.0 header for the structs that
     * have grown since (a caller compiled against it passes that size) */
    static const struct {
        const char *name;
        init_fn fn;
        size_t size, min;
    } T[] = {
        {"model", (init_fn)induct_model_config_init, sizeof(induct_model_config), 88},
        {"rrt", (init_fn)induct_rrt_config_init, sizeof(induct_rrt_config), 0},
        {"train", (init_fn)induct_train_config_init, sizeof(induct_train_config), 0},
        {"kv", (init_fn)induct_kv_config_init, sizeof(induct_kv_config), 0},
        {"text", (init_fn)induct_text_config_init, sizeof(induct_text_config), 0},
        {"token_file", (init_fn)induct_token_file_config_init, sizeof(induct_token_file_config), 0},
        {"eval", (init_fn)induct_eval_config_init, sizeof(induct_eval_config), 48},
        {"probe", (init_fn)induct_probe_config_init, sizeof(induct_probe_config), 0},
        {"phase", (init_fn)induct_phase_config_init, sizeof(induct_phase_config), 0},
        {"classify", (init_fn)induct_classify_config_init, sizeof(induct_classify_config), 0},
    };
    unsigned char buf[4200];
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        ck_fails(T[i].fn(NULL, T[i].size), INDUCT_EINVAL);
        size_t min = T[i].min ? T[i].min : T[i].size;
        size_t bad[] = {0, sizeof(size_t), min - 1, 4097};
        for (size_t k = 0; k < 4; k++) {
            memset(buf, 0xAB, sizeof buf);
            induct_error_clear();
            ck_assert_msg(T[i].fn(buf, bad[k]) == INDUCT_EABI, "%s size %zu", T[i].name, bad[k]);
            ck_assert_int_eq(induct_last_error_code(), INDUCT_EABI);
            ck_assert_msg(buf[0] == 0xAB && buf[T[i].size - 1] == 0xAB, "%s written on failure",
                          T[i].name);
        }
        if (min < T[i].size) { /* the older size: filled up to it, nothing past it */
            memset(buf, 0xAB, sizeof buf);
            ck_ok(T[i].fn(buf, min));
            for (size_t b = min; b < T[i].size; b++)
                ck_assert_msg(buf[b] == 0xAB, "%s size %zu wrote byte %zu", T[i].name, min, b);
        }
        memset(buf, 0xAB, sizeof buf);
        ck_ok(T[i].fn(buf, T[i].size + 24));
        size_t got;
        memcpy(&got, buf, sizeof got);
        ck_assert_uint_eq(got, T[i].size + 24);
        for (size_t b = T[i].size; b < T[i].size + 24; b++)
            ck_assert_msg(buf[b] == 0, "%s: tail byte %zu not zeroed", T[i].name, b);
        ck_assert_msg(buf[T[i].size + 24] == 0xAB, "%s wrote past its size", T[i].name);
    }
}
END_TEST

START_TEST(test_errors_analysis_misc) {
    induct_model_config c;
    tu_tiny_config(&c);
    induct_model *m = new_model(&c);
    uint32_t modes[4];
    size_t len;
    float out[4];
    ck_fails(induct_model_clear_ablations(NULL), INDUCT_EINVAL);
    ck_fails(induct_model_get_ablations(NULL, modes, 4, &len, NULL), INDUCT_EINVAL);
    ck_fails(induct_analysis_copying_eigen(NULL, out, 4, &len), INDUCT_EINVAL);
    /* loss positions: a config of a foreign size, a context longer than n_ctx */
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec);
    uint32_t pos[8];
    ck_fails(induct_analysis_loss_positions(NULL, &ec, pos, 8, &len), INDUCT_EINVAL);
    ec.size = 7;
    ck_fails(induct_analysis_loss_positions(m, &ec, pos, 8, &len), INDUCT_EABI);
    induct_eval_config_init(&ec, sizeof ec);
    ec.seq_len = 9; /* n_ctx 8 */
    ck_fails(induct_analysis_loss_positions(m, &ec, pos, 8, &len), INDUCT_ERANGE);
    /* probe tokens: a foreign size, probes longer than n_ctx */
    induct_probe_config pc;
    induct_probe_config_init(&pc, sizeof pc);
    int32_t tok[64];
    pc.size = 8; /* below the 0.1 struct (a larger size would make the library read a
                  * caller struct of that size) */
    ck_fails(induct_analysis_probe_tokens(m, &pc, 0, tok, 64, &len), INDUCT_EABI);
    induct_probe_config_init(&pc, sizeof pc);
    pc.block_len = 5; /* BOS + 5 x 4 repeats = 21 tokens > n_ctx 8 */
    ck_fails(induct_analysis_probe_tokens(m, &pc, 0, tok, 64, &len), INDUCT_ERANGE);
    /* classify: a foreign config size */
    induct_classify_config cc;
    induct_classify_config_init(&cc, sizeof cc);
    cc.size = 3;
    float sc[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    uint32_t labels[4];
    ck_fails(induct_analysis_classify_heads(sc, sc, sc, sc, 4, &cc, labels, 4, &len), INDUCT_EABI);
    /* PCA: a matrix above 2^31 entries is refused before x is read */
    float x[4] = {0};
    float scores[8];
    double tv;
    ck_fails(induct_analysis_pca(x, (1u << 16) + 1, 1u << 15, 1, scores, 8, NULL, 0, NULL, 0, &tv),
             INDUCT_ELIMIT);
    /* llm.c token files count tokens in an int32: refused before the ids are read */
    ck_fails(induct_token_file_write("/tmp/induct-never-written", INDUCT_TOKFILE_LLMC, tok,
                                     (size_t)INT32_MAX + 1),
             INDUCT_ELIMIT);
    ck_assert_int_ne(access("/tmp/induct-never-written", F_OK), 0);
    /* ICL score of a model whose loss overflows */
    blow_up(m);
    induct_dataset *d = rrt(11);
    induct_eval_config_init(&ec, sizeof ec);
    ec.early = 2;
    ec.late = 6;
    double icl = 7.0;
    ck_fails(induct_analysis_icl_score(m, d, &ec, &icl), INDUCT_ENUMERIC);
    ck_assert(icl == 7.0);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* The chunked read-outs (ICL score, KV accuracy) stop with EINTERRUPTED between chunks
 * when another thread interrupts the model. */
START_TEST(test_errors_chunked_interrupted) {
    induct_model_config c;
    tu_tiny_config(&c);
    c.n_ctx = 32;
    induct_model *m = new_model(&c);
    induct_dataset *d = rrt(11);
    induct_kv_config kc;
    induct_kv_config_init(&kc, sizeof kc);
    kc.d_vocab = 11;
    induct_dataset *kv = NULL;
    ck_ok(induct_dataset_new_kv(&kv, &kc));
    interrupter it = {m, 0, 0};
    pthread_t th;
    start_interrupter(&it, &th);
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec);
    ec.n_seq = 64;
    ec.chunk = 2;
    ec.early = 2;
    ec.late = 20;
    int interrupted[2] = {0, 0};
    while (!(interrupted[0] && interrupted[1])) {
        double v;
        int rc = induct_analysis_icl_score(m, d, &ec, &v);
        ck_assert_msg(rc == INDUCT_OK || rc == INDUCT_EINTERRUPTED, "%s", induct_status_name(rc));
        if (rc == INDUCT_EINTERRUPTED) interrupted[0] = 1;
        rc = induct_analysis_kv_accuracy(m, kv, 2048, 32, &v);
        ck_assert_msg(rc == INDUCT_OK || rc == INDUCT_EINTERRUPTED, "%s", induct_status_name(rc));
        if (rc == INDUCT_EINTERRUPTED) interrupted[1] = 1;
    }
    atomic_store(&it.stop, 1);
    pthread_join(th, NULL);
    ck_assert(interrupted[0] && interrupted[1]);
    induct_dataset_free(kv);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("hardening");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_cap_model_new);
    tcase_add_test(tc, test_table_limit);
    tcase_add_test(tc, test_cap_workspace);
    tcase_add_test(tc, test_cap_optimizer);
    tcase_add_test(tc, test_cap_train_and_analysis);
    tcase_add_test(tc, test_loaded_model_uncapped);
    tcase_add_test(tc, test_cap_analysis_suite);
    tcase_add_test(tc, test_memory_independent_of_n_ctx);
    tcase_add_test(tc, test_token_buffer_overflow);
    tcase_add_test(tc, test_header_limits);
    tcase_add_test(tc, test_text_limits);
    tcase_add_test(tc, test_kv_limits);
    tcase_add_test(tc, test_rrt_vocab_fits_int32);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("errors");
    tcase_add_test(te, test_errors_numeric);
    tcase_add_test(te, test_errors_optimizer_files);
    tcase_add_test(te, test_errors_misc);
    tcase_add_test(te, test_errors_analysis_interrupted);
    tcase_add_test(te, test_errors_config_inits);
    tcase_add_test(te, test_errors_analysis_misc);
    tcase_add_test(te, test_errors_chunked_interrupted);
    suite_add_tcase(s, te);
    return tu_run(s);
}
