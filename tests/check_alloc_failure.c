/* Allocation-failure sweep (hardening): every public call that allocates is
 * run once per allocation it makes, with exactly that allocation failing (the library's
 * objects are linked with -Wl,--wrap=malloc,calloc,realloc,aligned_alloc; allocations
 * inside libc, cJSON and OpenBLAS are not injected). Each injected failure must give
 * INDUCT_ENOMEM with the thread's last error set, leave the objects usable (the same
 * call then succeeds and gives the same result as on an untouched twin), leave no
 * temporary file behind, and leak nothing (ASan and valgrind runs of this suite).
 * This is how ENOMEM, documented by most constructors, is tested. */
#include <check.h>
#include <dirent.h>
#include <induct/induct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- injection --------------------------------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t s);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);

static long n_allocs;   /* allocations seen since arm() */
static long fail_at = -1;
static int injected;

static int should_fail(void) {
    if (fail_at < 0) return 0;
    if (n_allocs++ == fail_at) {
        injected = 1;
        return 1;
    }
    return 0;
}
void *__wrap_malloc(size_t n) { return should_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t s) { return should_fail() ? NULL : __real_calloc(n, s); }
void *__wrap_realloc(void *p, size_t n) { return should_fail() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t a, size_t n) {
    return should_fail() ? NULL : __real_aligned_alloc(a, n);
}

static void arm(long k) {
    n_allocs = 0;
    injected = 0;
    fail_at = k;
}
static void disarm(void) { fail_at = -1; }

#define ck_ok(call)                                                                        \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        ck_assert_msg(rc_ == INDUCT_OK, "%s: %s (%s)", #call, induct_status_name(rc_),     \
                      induct_last_error_message());                                        \
    } while (0)

/* Run `call` with allocation k failing, for k = 0, 1, ... until it makes fewer than
 * k + 1 allocations and succeeds. `setup` builds fresh objects (not injected),
 * `check` verifies them after a failure, `teardown` frees them. Returns the number of
 * injected failures. */
typedef struct scenario {
    const char *name;
    void (*setup)(void);
    int (*call)(void);
    void (*check_after_failure)(void);
    void (*check_after_success)(void);
    void (*teardown)(void);
} scenario;

static long sweep(const scenario *s) {
    for (long k = 0;; k++) {
        if (s->setup) s->setup();
        induct_error_clear();
        arm(k);
        int rc = s->call();
        disarm();
        if (!injected) {
            ck_assert_msg(rc == INDUCT_OK, "%s without injection: %s (%s)", s->name,
                          induct_status_name(rc), induct_last_error_message());
            if (s->check_after_success) s->check_after_success();
            if (s->teardown) s->teardown();
            ck_assert_msg(k > 0, "%s makes no allocation the sweep can fail", s->name);
            return k;
        }
        ck_assert_msg(rc == INDUCT_ENOMEM, "%s, allocation %ld failing: %s (%s)", s->name, k,
                      induct_status_name(rc), induct_last_error_message());
        ck_assert_int_eq(induct_last_error_code(), INDUCT_ENOMEM);
        ck_assert_msg(induct_last_error_message()[0] != '\0', "%s: empty message", s->name);
        if (s->check_after_failure) s->check_after_failure();
        if (s->teardown) s->teardown();
    }
}

/* ---- fixtures ------------------------------------------------------------------ */

static induct_model_config cfg;
static induct_model *m, *twin, *out_m;
static induct_optimizer *o, *out_o;
static induct_dataset *d, *out_d;
static int32_t tok[2 * 8];
static char dir[64], path[128];

static void config(void) {
    induct_model_config_init(&cfg, sizeof cfg);
    cfg.n_layers = 2;
    cfg.d_model = 8;
    cfg.n_heads = 2;
    cfg.n_ctx = 8;
    cfg.d_vocab = 11;
    cfg.d_mlp = 16;
    cfg.layer_norm = 1;
    cfg.smeared_keys = 1;
    cfg.seed = 5;
    for (int i = 0; i < 16; i++) tok[i] = (i * 7 + 3) % 11;
}

static induct_dataset *new_rrt(void) {
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 11;
    rc.min_block = 2;
    induct_dataset *x;
    ck_ok(induct_dataset_new_rrt(&x, &rc));
    return x;
}

static void setup_models(void) {
    config();
    ck_ok(induct_model_new(&m, &cfg));
    ck_ok(induct_model_new(&twin, &cfg));
    d = new_rrt();
    out_m = NULL;
    out_o = NULL;
    out_d = NULL;
}
static void setup_with_optimizers(void) {
    setup_models();
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
}
static void teardown_all(void) {
    induct_optimizer_free(out_o);
    induct_optimizer_free(o);
    induct_model_free(out_m);
    induct_model_free(m);
    induct_model_free(twin);
    induct_dataset_free(out_d);
    induct_dataset_free(d);
    m = twin = out_m = NULL;
    o = out_o = NULL;
    d = out_d = NULL;
}

/* After a failure the model works and matches its untouched twin. */
static void same_as_twin(void) {
    double a, b;
    ck_ok(induct_model_backward(m, tok, 2, 8, &a));
    ck_ok(induct_model_backward(twin, tok, 2, 8, &b));
    ck_assert(a == b);
    float ga[8 * 11], gb[8 * 11];
    size_t len;
    ck_ok(induct_model_get_tensor(m, "unembed.W_U", INDUCT_BUF_GRAD, ga, 88, &len));
    ck_ok(induct_model_get_tensor(twin, "unembed.W_U", INDUCT_BUF_GRAD, gb, 88, &len));
    ck_assert(memcmp(ga, gb, sizeof ga) == 0);
}
static void out_null(void) {
    ck_assert_ptr_null(out_m);
    ck_assert_ptr_null(out_o);
    ck_assert_ptr_null(out_d);
}
static void out_null_and_twin(void) {
    out_null();
    same_as_twin();
}

/* The temporary directory holds only `keep` (or nothing). */
static void dir_holds_only(const char *keep) {
    DIR *dd = opendir(dir);
    ck_assert_ptr_nonnull(dd);
    struct dirent *e;
    while ((e = readdir(dd)))
        if (e->d_name[0] != '.')
            ck_assert_msg(keep && !strcmp(e->d_name, keep), "left behind: %s", e->d_name);
    closedir(dd);
}

static void setup_files(void) {
    setup_with_optimizers();
    snprintf(dir, sizeof dir, "/tmp/induct-oom-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
}
static void teardown_files(void) {
    DIR *dd = opendir(dir);
    struct dirent *e;
    char p[sizeof dir + 260];
    while (dd && (e = readdir(dd)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (dd) closedir(dd);
    rmdir(dir);
    teardown_all();
}
static void setup_saved(void) {
    setup_files();
    ck_ok(induct_optimizer_save(o, path));
}

/* ---- calls ---------------------------------------------------------------------- */

static int call_model_new(void) { return induct_model_new(&out_m, &cfg); }
static int call_clone(void) { return induct_model_clone(&out_m, m); }
static int call_forward(void) {
    float logits[2 * 8 * 11], losses[2 * 7];
    double loss;
    return induct_model_forward(m, tok, 2, 8, logits, sizeof logits / 4, losses, 14, &loss);
}
static int call_backward(void) { return induct_model_backward(m, tok, 2, 8, NULL); }
static int call_attention(void) {
    static float att[2 * 2 * 8 * 8];
    size_t len;
    return induct_model_attention(m, tok, 8, att, sizeof att / 4, &len);
}
static int call_optimizer_new(void) { return induct_optimizer_new(&out_o, m, INDUCT_OPTIM_ADAMW); }
static int call_train_step(void) { return induct_train_step(o, d, 2, 8, NULL); }
static int call_rrt(void) {
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 11;
    return induct_dataset_new_rrt(&out_d, &rc);
}
static int call_tokens(void) { return induct_dataset_new_tokens(&out_d, tok, 16, 11, 1); }
static int call_prev_token(void) {
    float out[4];
    size_t len;
    return induct_analysis_previous_token_score(m, d, 3, 8, out, 4, &len);
}
static int call_induction(void) {
    float out[4];
    size_t len;
    return induct_analysis_induction_score(m, d, 3, 8, out, 4, &len);
}
static int call_save(void) { return induct_optimizer_save(o, path); }
static int call_model_load(void) { return induct_model_load(&out_m, path); }
static int call_optimizer_load(void) { return induct_optimizer_load(&out_o, m, path); }
static int call_train(void) {
    induct_train_config tc;
    induct_train_config_init(&tc, sizeof tc);
    tc.steps = 3;
    tc.batch = 2;
    tc.seq_len = 8;
    tc.eval_every = 1;
    tc.eval_batch = 2;
    tc.metrics = INDUCT_TRAIN_METRIC_LOSS | INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN |
                 INDUCT_TRAIN_METRIC_INDUCTION_SCORE | INDUCT_TRAIN_METRIC_LOSS_BY_POSITION |
                 INDUCT_TRAIN_METRIC_LOSS_VECTORS;
    char log[160], snap[160];
    snprintf(log, sizeof log, "%s/metrics.jsonl", dir);
    snprintf(snap, sizeof snap, "%s/snap-{step}.safetensors", dir);
    tc.metrics_path = log;
    tc.snapshot_every = 2;
    tc.snapshot_path = snap;
    return induct_train(o, d, &tc, NULL, NULL);
}

static int call_icl(void) {
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec);
    ec.n_seq = 3;
    ec.chunk = 2;
    ec.early = 2;
    ec.late = 6;
    double icl;
    return induct_analysis_icl_score(m, d, &ec, &icl);
}
static int call_loss_vectors(void) {
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec);
    ec.n_seq = 3;
    float per[3], avg[7];
    return induct_analysis_loss_vectors(m, d, &ec, per, 3, avg, 7);
}
static int call_prefix(void) {
    induct_probe_config pc;
    induct_probe_config_init(&pc, sizeof pc);
    pc.n_seq = 2;
    pc.block_len = 3;
    pc.n_repeats = 2;
    float out[4];
    size_t len;
    return induct_analysis_prefix_matching(m, &pc, out, 4, &len);
}
static int call_copying(void) {
    induct_probe_config pc;
    induct_probe_config_init(&pc, sizeof pc);
    pc.n_seq = 2;
    pc.block_len = 6;
    float out[4];
    size_t len;
    return induct_analysis_copying(m, &pc, out, 4, &len);
}
static int call_eigen(void) {
    float out[4];
    size_t len;
    return induct_analysis_copying_eigen(m, out, 4, &len);
}
static int call_composition(void) {
    static float out[16];
    size_t len;
    return induct_analysis_composition(m, INDUCT_COMPOSITION_K, out, 16, &len);
}
static int call_mean(void) {
    return induct_model_set_ablation_mean(m, tok, 2, 8, INDUCT_MEAN_PER_POSITION);
}
static int call_attribution(void) {
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec);
    ec.n_seq = 2;
    ec.early = 2;
    ec.late = 6;
    float out[4];
    size_t len;
    double icl;
    return induct_analysis_ablation_attribution(m, d, &ec, INDUCT_ABLATE_ZERO, out, 4, &len,
                                                &icl);
}
static int call_preserving_forward(void) {
    double loss;
    return induct_model_forward(m, tok, 2, 8, NULL, 0, NULL, 0, &loss);
}
static void setup_preserving(void) {
    setup_models();
    ck_ok(induct_model_ablate_head(m, 0, 1, INDUCT_ABLATE_ZERO));
    ck_ok(induct_model_set_preserve_patterns(m, 1));
}
static void ablated_usable(void) {
    double loss;
    ck_ok(induct_model_forward(m, tok, 2, 8, NULL, 0, NULL, 0, &loss));
    ck_ok(induct_model_clear_ablations(m));
    same_as_twin();
}
static void setup_attn_only(void) {
    setup_models();
    induct_model_free(m);
    induct_model_free(twin);
    cfg.d_mlp = 0; /* the attention-only fast path of the attribution */
    cfg.layer_norm = 0;
    ck_ok(induct_model_new(&m, &cfg));
    ck_ok(induct_model_new(&twin, &cfg));
}
static int call_pca(void) {
    float x[6 * 5], scores[6 * 2], comp[2 * 5];
    double var[2], tv;
    for (int i = 0; i < 30; i++) x[i] = (float)((i * 37) % 11) - 5.0f;
    return induct_analysis_pca(x, 6, 5, 2, scores, 12, comp, 10, var, 2, &tv);
}

static int call_text(void) {
    static const char text[] = "an induction head copies what followed an earlier occurrence";
    induct_text_config tc;
    induct_text_config_init(&tc, sizeof tc);
    tc.separator = '\n';
    tc.block_tokens = 8;
    return induct_dataset_new_text(&out_d, text, sizeof text - 1, &tc);
}
static void setup_text_dir(void) {
    setup_files();
    for (int i = 0; i < 3; i++) {
        char p[160];
        snprintf(p, sizeof p, "%s/doc%d.txt", dir, i);
        FILE *f = fopen(p, "wb");
        fprintf(f, "document %d: tokens that repeat, tokens that repeat.", i);
        fclose(f);
    }
}
static int call_text_dir(void) {
    induct_text_config tc;
    induct_text_config_init(&tc, sizeof tc);
    tc.split = INDUCT_SPLIT_BY_DOCUMENT;
    tc.val_fraction = 0.4;
    return induct_dataset_new_text_path(&out_d, dir, ".txt", &tc);
}
static void setup_token_file(void) {
    setup_files();
    int32_t t[200];
    for (int i = 0; i < 200; i++) t[i] = (i * 7) % 11;
    ck_ok(induct_token_file_write(path, INDUCT_TOKFILE_LLMC, t, 200));
}
static int call_token_file(void) {
    induct_token_file_config fc;
    induct_token_file_config_init(&fc, sizeof fc);
    fc.format = INDUCT_TOKFILE_LLMC;
    fc.block_tokens = 16;
    return induct_dataset_new_token_file(&out_d, path, NULL, &fc);
}
static int call_token_file_write(void) {
    int32_t t[50];
    for (int i = 0; i < 50; i++) t[i] = i % 11;
    return induct_token_file_write(path, INDUCT_TOKFILE_U16, t, 50);
}
static void token_write_failed(void) { dir_holds_only(NULL); }
static void setup_kv(void) {
    setup_models();
    induct_kv_config kc;
    induct_kv_config_init(&kc, sizeof kc);
    kc.d_vocab = 11;
    induct_dataset_free(d);
    ck_ok(induct_dataset_new_kv(&d, &kc));
}
static int call_kv_ceiling(void) {
    double c;
    return induct_dataset_kv_ceiling(d, 12, &c);
}
static int call_kv_accuracy(void) {
    double acc;
    return induct_analysis_kv_accuracy(m, d, 3, 8, &acc);
}

static int call_model_save(void) { return induct_model_save(m, path); }
static int call_loss_by_position(void) {
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec);
    ec.n_seq = 3;
    float out[7];
    size_t len;
    return induct_analysis_loss_by_position(m, d, &ec, out, 7, &len);
}
static int call_composition_baseline(void) {
    double b;
    return induct_analysis_composition_baseline(m, 3, 1, &b);
}
static int call_ablate_head(void) { return induct_model_ablate_head(m, 1, 0, INDUCT_ABLATE_ZERO); }
static int call_new_kv(void) {
    induct_kv_config kc;
    induct_kv_config_init(&kc, sizeof kc);
    kc.d_vocab = 11;
    return induct_dataset_new_kv(&out_d, &kc);
}

/* ---- checks after a failure -------------------------------------------------------- */

static void save_failed(void) {
    dir_holds_only(NULL); /* no file at path, no temporary file */
    ck_ok(induct_optimizer_save(o, path));
}
static void load_failed(void) {
    out_null();
    ck_ok(induct_model_load(&out_m, path));
}
/* The loaded model is the saved one: same loss and gradients. */
static void loaded_equals(void) {
    double a, b;
    ck_ok(induct_model_backward(m, tok, 2, 8, &a));
    ck_ok(induct_model_backward(out_m, tok, 2, 8, &b));
    ck_assert(a == b);
}
static void train_failed(void) {
    /* the optimizer and model remain usable: the run completes when retried */
    ck_ok(call_train());
    double step;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step));
    ck_assert(step == 3.0);
}
static void snapshots_written(void) {
    char p[256];
    snprintf(p, sizeof p, "%s/snap-2.safetensors", dir);
    ck_assert_int_eq(access(p, F_OK), 0);
}

/* ---- tests ------------------------------------------------------------------------ */

#define SWEEP(test, ...)                                                                   \
    START_TEST(test) {                                                                     \
        const scenario s = {#test, __VA_ARGS__};                                           \
        long n = sweep(&s);                                                                \
        printf("%-28s %ld allocation points, each failed once\n", #test, n);              \
    }                                                                                      \
    END_TEST

SWEEP(oom_model_new, setup_models, call_model_new, out_null_and_twin, NULL, teardown_all)
SWEEP(oom_model_clone, setup_models, call_clone, out_null_and_twin, NULL, teardown_all)
SWEEP(oom_forward, setup_models, call_forward, same_as_twin, same_as_twin, teardown_all)
SWEEP(oom_backward, setup_models, call_backward, same_as_twin, same_as_twin, teardown_all)
SWEEP(oom_attention, setup_models, call_attention, same_as_twin, same_as_twin, teardown_all)
SWEEP(oom_optimizer_new, setup_models, call_optimizer_new, out_null_and_twin, NULL,
      teardown_all)
SWEEP(oom_train_step, setup_with_optimizers, call_train_step, NULL, NULL, teardown_all)
SWEEP(oom_dataset_rrt, setup_models, call_rrt, out_null, NULL, teardown_all)
SWEEP(oom_dataset_tokens, setup_models, call_tokens, out_null, NULL, teardown_all)
SWEEP(oom_previous_token, setup_models, call_prev_token, same_as_twin, same_as_twin,
      teardown_all)
SWEEP(oom_induction_score, setup_models, call_induction, same_as_twin, same_as_twin,
      teardown_all)
SWEEP(oom_optimizer_save, setup_files, call_save, save_failed, NULL, teardown_files)
SWEEP(oom_model_load, setup_saved, call_model_load, load_failed, loaded_equals, teardown_files)
SWEEP(oom_optimizer_load, setup_saved, call_optimizer_load, out_null, NULL, teardown_files)
SWEEP(oom_train, setup_files, call_train, train_failed, snapshots_written, teardown_files)

SWEEP(oom_icl_score, setup_models, call_icl, same_as_twin, same_as_twin, teardown_all)
SWEEP(oom_loss_vectors, setup_models, call_loss_vectors, same_as_twin, NULL, teardown_all)
SWEEP(oom_prefix_matching, setup_models, call_prefix, same_as_twin, NULL, teardown_all)
SWEEP(oom_copying, setup_models, call_copying, same_as_twin, NULL, teardown_all)
SWEEP(oom_copying_eigen, setup_models, call_eigen, same_as_twin, NULL, teardown_all)
SWEEP(oom_composition, setup_models, call_composition, same_as_twin, NULL, teardown_all)
SWEEP(oom_ablation_mean, setup_models, call_mean, same_as_twin, NULL, teardown_all)
SWEEP(oom_preserving_forward, setup_preserving, call_preserving_forward, ablated_usable, NULL,
      teardown_all)
SWEEP(oom_attribution_general, setup_models, call_attribution, same_as_twin, NULL, teardown_all)
SWEEP(oom_attribution_fast, setup_attn_only, call_attribution, same_as_twin, NULL, teardown_all)
SWEEP(oom_pca, NULL, call_pca, NULL, NULL, NULL)

SWEEP(oom_text, setup_models, call_text, out_null, NULL, teardown_all)
SWEEP(oom_text_directory, setup_text_dir, call_text_dir, out_null, NULL, teardown_files)
SWEEP(oom_token_file, setup_token_file, call_token_file, out_null, NULL, teardown_files)
SWEEP(oom_token_file_write, setup_files, call_token_file_write, token_write_failed, NULL,
      teardown_files)
SWEEP(oom_kv_ceiling, setup_kv, call_kv_ceiling, NULL, NULL, teardown_all)
SWEEP(oom_kv_accuracy, setup_kv, call_kv_accuracy, same_as_twin, NULL, teardown_all)

SWEEP(oom_model_save, setup_files, call_model_save, save_failed, NULL, teardown_files)
SWEEP(oom_loss_by_position, setup_models, call_loss_by_position, same_as_twin, NULL, teardown_all)
SWEEP(oom_composition_baseline, setup_models, call_composition_baseline, same_as_twin, NULL,
      teardown_all)
SWEEP(oom_ablate_head, setup_models, call_ablate_head, same_as_twin, NULL, teardown_all)
SWEEP(oom_dataset_kv, setup_models, call_new_kv, out_null, NULL, teardown_all)

int main(void) {
    Suite *s = suite_create("alloc_failure");
    TCase *tc = tcase_create("sweep");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, oom_model_new);
    tcase_add_test(tc, oom_model_clone);
    tcase_add_test(tc, oom_forward);
    tcase_add_test(tc, oom_backward);
    tcase_add_test(tc, oom_attention);
    tcase_add_test(tc, oom_optimizer_new);
    tcase_add_test(tc, oom_train_step);
    tcase_add_test(tc, oom_dataset_rrt);
    tcase_add_test(tc, oom_dataset_tokens);
    tcase_add_test(tc, oom_previous_token);
    tcase_add_test(tc, oom_induction_score);
    tcase_add_test(tc, oom_optimizer_save);
    tcase_add_test(tc, oom_model_load);
    tcase_add_test(tc, oom_optimizer_load);
    tcase_add_test(tc, oom_train);
    tcase_add_test(tc, oom_icl_score);
    tcase_add_test(tc, oom_loss_vectors);
    tcase_add_test(tc, oom_prefix_matching);
    tcase_add_test(tc, oom_copying);
    tcase_add_test(tc, oom_copying_eigen);
    tcase_add_test(tc, oom_composition);
    tcase_add_test(tc, oom_ablation_mean);
    tcase_add_test(tc, oom_preserving_forward);
    tcase_add_test(tc, oom_attribution_general);
    tcase_add_test(tc, oom_attribution_fast);
    tcase_add_test(tc, oom_pca);
    tcase_add_test(tc, oom_text);
    tcase_add_test(tc, oom_text_directory);
    tcase_add_test(tc, oom_token_file);
    tcase_add_test(tc, oom_token_file_write);
    tcase_add_test(tc, oom_kv_ceiling);
    tcase_add_test(tc, oom_kv_accuracy);
    tcase_add_test(tc, oom_model_save);
    tcase_add_test(tc, oom_loss_by_position);
    tcase_add_test(tc, oom_composition_baseline);
    tcase_add_test(tc, oom_ablate_head);
    tcase_add_test(tc, oom_dataset_kv);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
