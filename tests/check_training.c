/* Training driver: resume bit-identity through checkpoint files, the metrics log
 * (every line parsed with cJSON, values checked against independent calls), the
 * schedules, snapshots, the progress callback, stopping (callback, cross-thread
 * interrupt) with the weights of the last completed step, the stop condition and
 * argument checks. Links the shared library (public API). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

/* Frozen layouts of the issue-5 structs on LP64 (fields are only ever appended). */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(induct_train_config) == 96, "induct_train_config layout");
_Static_assert(offsetof(induct_train_config, steps) == 8, "steps");
_Static_assert(offsetof(induct_train_config, eval_every) == 24, "eval_every");
_Static_assert(offsetof(induct_train_config, metrics_path) == 48, "metrics_path");
_Static_assert(offsetof(induct_train_config, snapshot_path) == 72, "snapshot_path");
_Static_assert(offsetof(induct_train_config, target_loss) == 80, "target_loss");
_Static_assert(offsetof(induct_train_config, probe) == 88, "probe");
_Static_assert(sizeof(induct_progress) == 88, "induct_progress layout");
_Static_assert(offsetof(induct_progress, step) == 16, "step");
_Static_assert(offsetof(induct_progress, loss) == 32, "loss");
_Static_assert(offsetof(induct_progress, snapshot_path) == 80, "snapshot_path");
#endif

enum { BATCH = 4, SEQ = 8, EVAL_N = 6 };

/* Bit-identity (resume, reference runs) and integers stored as doubles: exact. */
#define ck_exact(a, b)                                                                     \
    ck_assert_msg((double)(a) == (double)(b), "%s = %.17g, expected %s = %.17g", #a,       \
                  (double)(a), #b, (double)(b))

static char dir[64];

static void setup_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/induct-train-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
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

static induct_dataset *rrt(void) { return tu_rrt(11, 2, 5); }

/* A tensor list copy of the model's weights. */
typedef struct snap {
    float *w;
    size_t n;
} snap;

static snap weights(induct_model *m) {
    snap s = {0};
    size_t nt = induct_model_n_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        size_t n, len;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &n));
        s.w = realloc(s.w, (s.n + n) * sizeof *s.w);
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, s.w + s.n, n, &len));
        s.n += n;
    }
    return s;
}

/* Model + AdamW with warmup, cosine schedule and clipping, so that the lr and the
 * update depend on the step counter. `rich` adds MLP, LayerNorm, shortformer and
 * smeared keys. The model is left in g_model_of_last (the caller frees both). */
static induct_model *g_model_of_last; /* set by new_run() */

static induct_optimizer *new_run(int rich) {
    induct_model_config c;
    tu_tiny_config(&c);
    if (rich) {
        c.d_mlp = 12;
        c.layer_norm = 1;
        c.positional = INDUCT_POS_SHORTFORMER;
        c.smeared_keys = 1;
    }
    c.init = INDUCT_INIT_TORCH;
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_LR, 0.01));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_WARMUP_STEPS, 3));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_SCHEDULE, 1));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_TOTAL_STEPS, 40));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_GRAD_CLIP, 1.0));
    g_model_of_last = m;
    return o;
}

/* Reference: k plain induct_train_step() calls from a fresh model/optimizer. */
static snap straight(int rich, uint64_t k, induct_dataset *d, double *losses) {
    induct_optimizer *o = new_run(rich);
    induct_model *m = g_model_of_last;
    for (uint64_t s = 0; s < k; s++) {
        double l;
        ck_ok(induct_train_step(o, d, BATCH, SEQ, &l));
        if (losses) losses[s] = l;
    }
    snap w = weights(m);
    induct_optimizer_free(o);
    induct_model_free(m);
    return w;
}

static void assert_same(snap a, snap b) {
    ck_assert_uint_eq(a.n, b.n);
    ck_assert_msg(memcmp(a.w, b.w, a.n * sizeof *a.w) == 0, "weights differ");
}

/* assert_same, then release both copies */
static void assert_same_free(snap a, snap b) {
    assert_same(a, b);
    free(a.w);
    free(b.w);
}

static void base_config(induct_train_config *c, uint64_t steps) {
    ck_ok(induct_train_config_init(c, sizeof *c));
    c->steps = steps;
    c->batch = BATCH;
    c->seq_len = SEQ;
    c->eval_batch = EVAL_N;
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
    b.p[b.n] = 0;
    fclose(f);
    return b;
}

/* Parse a JSON Lines file: every line must be a JSON object. Returns the count. */
static int read_records(const char *path, cJSON **recs, int cap) {
    blob b = slurp(path);
    int n = 0;
    char *line = (char *)b.p;
    ck_assert_msg(b.n > 0 && b.p[b.n - 1] == '\n', "the log does not end with a newline");
    while (*line) {
        char *nl = strchr(line, '\n');
        ck_assert_ptr_nonnull(nl);
        *nl = 0;
        cJSON *r = cJSON_Parse(line);
        ck_assert_msg(r && cJSON_IsObject(r), "line %d is not a JSON object: %s", n + 1, line);
        ck_assert_int_lt(n, cap);
        recs[n++] = r;
        line = nl + 1;
    }
    free(b.p);
    return n;
}

static double num(const cJSON *rec, const char *key) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(rec, key);
    ck_assert_msg(x != NULL, "key %s missing", key);
    ck_assert_msg(cJSON_IsNumber(x), "key %s is not a number", key);
    return x->valuedouble;
}

/* ---- resume -------------------------------------------------------------------------- */

START_TEST(test_resume_bit_identical) {
    setup_dir();
    induct_dataset *d = rrt();
    const uint64_t N = 12;
    char log_a[128], log_b[128], mid[128], fa[128], fb[128];
    snprintf(log_a, sizeof log_a, "%s/a.jsonl", dir);
    snprintf(log_b, sizeof log_b, "%s/b.jsonl", dir);
    snprintf(mid, sizeof mid, "%s/mid.safetensors", dir);
    snprintf(fa, sizeof fa, "%s/a.safetensors", dir);
    snprintf(fb, sizeof fb, "%s/b.safetensors", dir);
    induct_train_config c;
    base_config(&c, N);
    c.eval_every = 3;
    c.metrics = INDUCT_TRAIN_METRIC_LOSS | INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN |
                INDUCT_TRAIN_METRIC_INDUCTION_SCORE;
    /* N steps straight */
    induct_optimizer *o = new_run(1);
    induct_model *m = g_model_of_last;
    c.metrics_path = log_a;
    ck_ok(induct_train(o, d, &c, NULL, NULL));
    ck_ok(induct_optimizer_save(o, fa));
    /* N/2, save, load into fresh handles, N/2 more */
    induct_optimizer *o1 = new_run(1);
    induct_model *m1 = g_model_of_last;
    c.steps = N / 2;
    c.metrics_path = log_b;
    ck_ok(induct_train(o1, d, &c, NULL, NULL));
    ck_ok(induct_optimizer_save(o1, mid));
    induct_optimizer_free(o1);
    induct_model_free(m1);
    induct_model *m2;
    induct_optimizer *o2;
    ck_ok(induct_model_load(&m2, mid));
    ck_ok(induct_optimizer_load(&o2, m2, mid));
    c.steps = N;
    c.metrics_append = 1;
    ck_ok(induct_train(o2, d, &c, NULL, NULL));
    ck_ok(induct_optimizer_save(o2, fb));
    /* weights, both moments, step counter and every optimizer setting: the files are
     * byte-identical */
    blob x = slurp(fa), y = slurp(fb);
    ck_assert_uint_eq(x.n, y.n);
    ck_assert_int_eq(memcmp(x.p, y.p, x.n), 0);
    assert_same_free(weights(m), weights(m2));
    double step;
    ck_ok(induct_optimizer_get(o2, INDUCT_OPT_STEP, &step));
    ck_exact(step, (double)N);
    /* the two logs hold the same series (apart from wall time) */
    cJSON *ra[16], *rb[16];
    int na = read_records(log_a, ra, 16), nb = read_records(log_b, rb, 16);
    ck_assert_int_eq(na, 5); /* steps 0, 3, 6, 9, 12 */
    ck_assert_int_eq(nb, 5);
    for (int i = 0; i < na; i++) {
        cJSON_DeleteItemFromObject(ra[i], "elapsed_seconds");
        cJSON_DeleteItemFromObject(rb[i], "elapsed_seconds");
        ck_assert_msg(cJSON_Compare(ra[i], rb[i], 1), "record %d differs", i);
        cJSON_Delete(ra[i]);
        cJSON_Delete(rb[i]);
    }
    free(x.p);
    free(y.p);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_optimizer_free(o2);
    induct_model_free(m2);
    induct_dataset_free(d);
    teardown_dir();
}
END_TEST

/* ---- metrics log, schedule, snapshots ------------------------------------------------- */

typedef struct trace {
    int n;
    uint64_t step[64];
    uint32_t events[64];
    double loss[64], lr[64], eval_loss[64];
    char snap[64][160];
} trace;

static int record_cb(const induct_progress *p, void *ud) {
    trace *t = ud;
    ck_assert_uint_eq(p->size, sizeof *p);
    ck_assert_int_lt(t->n, 64);
    t->step[t->n] = p->step;
    t->events[t->n] = p->events;
    t->loss[t->n] = p->loss;
    t->lr[t->n] = p->lr;
    t->eval_loss[t->n] = p->eval_loss;
    snprintf(t->snap[t->n], sizeof t->snap[0], "%s", p->snapshot_path ? p->snapshot_path : "");
    if (p->events & INDUCT_TRAIN_EVENT_STEP) {
        ck_assert_double_ge(p->tokens_per_second, 0.0);
        ck_assert_double_ge(p->eta_seconds, 0.0);
    }
    t->n++;
    return 0;
}

START_TEST(test_metrics_log) {
    setup_dir();
    induct_dataset *d = rrt();
    char log[128], tpl[128];
    snprintf(log, sizeof log, "%s/metrics.jsonl", dir);
    snprintf(tpl, sizeof tpl, "%s/snap-{step}.safetensors", dir);
    induct_train_config c;
    base_config(&c, 10);
    c.eval_every = 4;
    c.eval_log2 = 1;
    c.metrics = INDUCT_TRAIN_METRIC_LOSS | INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN |
                INDUCT_TRAIN_METRIC_INDUCTION_SCORE;
    c.metrics_path = log;
    c.snapshot_every = 5;
    c.snapshot_path = tpl;
    induct_optimizer *o = new_run(0);
    induct_model *m = g_model_of_last;
    static trace t;
    memset(&t, 0, sizeof t);
    ck_ok(induct_train(o, d, &c, record_cb, &t));

    /* callbacks: step 0 (eval + snapshot, no step), then one per step */
    ck_assert_int_eq(t.n, 11);
    ck_assert_uint_eq(t.events[0], INDUCT_TRAIN_EVENT_EVAL | INDUCT_TRAIN_EVENT_SNAPSHOT);
    ck_assert(isnan(t.loss[0]));
    for (int i = 1; i <= 10; i++) {
        ck_assert_uint_eq(t.step[i], (uint64_t)i);
        ck_assert(t.events[i] & INDUCT_TRAIN_EVENT_STEP);
        int ev = (i == 1 || i == 2 || i == 4 || i == 8 || i == 10);
        ck_assert_int_eq(!!(t.events[i] & INDUCT_TRAIN_EVENT_EVAL), ev);
        ck_assert_int_eq(!!(t.events[i] & INDUCT_TRAIN_EVENT_SNAPSHOT), i % 5 == 0);
        ck_assert_int_eq(!!(t.events[i] & INDUCT_TRAIN_EVENT_DONE), i == 10);
        ck_assert_int_eq(isnan(t.eval_loss[i]), !ev);
    }
    /* per-step loss and lr are those of plain steps (warmup 3: lr 0.01 (s+1)/3) */
    double ref_loss[10];
    snap ref = straight(0, 10, d, ref_loss);
    for (int i = 1; i <= 10; i++) ck_exact(t.loss[i], ref_loss[i - 1]);
    for (int i = 1; i <= 3; i++) ck_assert_double_eq_tol(t.lr[i], 0.01 * i / 3.0, 1e-15);
    snap now = weights(m);
    assert_same(now, ref);
    free(now.w);

    /* the log: one JSON object per line, at steps 0 1 2 4 8 10 */
    cJSON *r[16];
    int n = read_records(log, r, 16);
    static const int steps[] = {0, 1, 2, 4, 8, 10};
    ck_assert_int_eq(n, 6);
    uint32_t L = 2, H = 2;
    int prev_step = 0;
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq((int)num(r[i], "step"), steps[i]);
        ck_exact(num(r[i], "tokens"), (double)steps[i] * BATCH * SEQ);
        ck_assert_double_ge(num(r[i], "elapsed_seconds"), 0.0);
        double el = num(r[i], "eval_loss");
        ck_assert(el > 0.0 && el < 10.0);
        if (i == 0) {
            ck_assert(cJSON_IsNull(cJSON_GetObjectItem(r[i], "train_loss")));
            ck_assert(cJSON_IsNull(cJSON_GetObjectItem(r[i], "lr")));
            ck_exact(num(r[i], "train_loss_steps"), 0);
        } else { /* mean of the step losses since the previous record */
            double s = 0;
            for (int k = prev_step; k < steps[i]; k++) s += ref_loss[k];
            ck_exact(num(r[i], "train_loss"), s / (steps[i] - prev_step));
            ck_exact(num(r[i], "train_loss_steps"), steps[i] - prev_step);
            ck_exact(num(r[i], "lr"), t.lr[steps[i]]);
        }
        ck_exact(el, t.eval_loss[steps[i]]);
        prev_step = steps[i];
        for (int k = 0; k < 2; k++) {
            const cJSON *a =
                cJSON_GetObjectItem(r[i], k ? "induction_score" : "previous_token_score");
            ck_assert(cJSON_IsArray(a));
            ck_assert_int_eq(cJSON_GetArraySize(a), (int)L);
            for (const cJSON *row = a->child; row; row = row->next) {
                ck_assert(cJSON_IsArray(row));
                ck_assert_int_eq(cJSON_GetArraySize(row), (int)H);
                for (const cJSON *x = row->child; x; x = x->next)
                    ck_assert(cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble <= 1);
            }
        }
    }
    /* the last record matches independent calls on the final model */
    int32_t tok[EVAL_N * SEQ];
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, EVAL_N, SEQ, tok, EVAL_N * SEQ, NULL, 0));
    double loss;
    ck_ok(induct_model_forward(m, tok, EVAL_N, SEQ, NULL, 0, NULL, 0, &loss));
    ck_exact(num(r[5], "eval_loss"), loss);
    float sc[4];
    size_t len;
    ck_ok(induct_analysis_induction_score(m, d, EVAL_N, SEQ, sc, 4, &len));
    const cJSON *ind = cJSON_GetObjectItem(r[5], "induction_score");
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t h = 0; h < H; h++)
            ck_exact(
                (float)cJSON_GetArrayItem(cJSON_GetArrayItem(ind, (int)l), (int)h)->valuedouble,
                sc[l * H + h]);
    ck_ok(induct_analysis_previous_token_score(m, d, EVAL_N, SEQ, sc, 4, &len));
    const cJSON *pt = cJSON_GetObjectItem(r[5], "previous_token_score");
    for (uint32_t k = 0; k < L * H; k++)
        ck_exact((float)cJSON_GetArrayItem(cJSON_GetArrayItem(pt, (int)(k / H)), (int)(k % H))
                     ->valuedouble,
                 sc[k]);
    for (int i = 0; i < n; i++) cJSON_Delete(r[i]);

    /* snapshots at 0, 5, 10, each a resumable file with that step's weights */
    char p[160];
    for (int s = 0; s <= 10; s += 5) {
        snprintf(p, sizeof p, "%s/snap-%d.safetensors", dir, s);
        ck_assert_str_eq(t.snap[s], p);
        induct_model *sm;
        induct_optimizer *so;
        ck_ok(induct_model_load(&sm, p));
        ck_ok(induct_optimizer_load(&so, sm, p));
        double st;
        ck_ok(induct_optimizer_get(so, INDUCT_OPT_STEP, &st));
        ck_exact(st, s);
        snap sw = weights(sm), rw = straight(0, (uint64_t)s, d, NULL);
        assert_same(sw, rw);
        free(sw.w);
        free(rw.w);
        induct_optimizer_free(so);
        induct_model_free(sm);
    }
    snprintf(p, sizeof p, "%s/snap-4.safetensors", dir);
    ck_assert_int_ne(access(p, F_OK), 0);
    free(ref.w);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
    teardown_dir();
}
END_TEST

/* A 2-layer shortformer model (d_model 16, 2 heads, n_ctx 512, d_vocab 40) and an RRT
 * dataset over its vocabulary: the setting of the ICL-metric tests (seq_len >= 501). */
static void icl_setting(uint64_t seed, uint64_t data_seed, induct_model **m, induct_dataset **d) {
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    mc.n_layers = 2;
    mc.d_model = 16;
    mc.n_heads = 2;
    mc.n_ctx = 512;
    mc.d_vocab = 40;
    mc.positional = INDUCT_POS_SHORTFORMER;
    mc.seed = seed;
    ck_ok(induct_model_new(m, &mc));
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 40;
    rc.seed = data_seed;
    ck_ok(induct_dataset_new_rrt(d, &rc));
}

/* The analysis-suite metrics in the log equal independent calls on the final model
 * with the same evaluation set (batch 0 of the eval split, eval_batch sequences). */
START_TEST(test_analysis_metrics) {
    setup_dir();
    induct_model *m;
    induct_dataset *d;
    icl_setting(3, 8, &m, &d);
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    char log[128];
    snprintf(log, sizeof log, "%s/analysis.jsonl", dir);
    induct_train_config c;
    induct_train_config_init(&c, sizeof c);
    c.steps = 2;
    c.batch = 2;
    c.seq_len = 512;
    c.eval_every = 2;
    c.eval_batch = 3;
    c.metrics = INDUCT_TRAIN_METRIC_ICL_SCORE | INDUCT_TRAIN_METRIC_LOSS_BY_POSITION |
                INDUCT_TRAIN_METRIC_PREFIX_MATCHING | INDUCT_TRAIN_METRIC_COPYING;
    c.metrics_path = log;
    ck_ok(induct_train(o, d, &c, NULL, NULL));
    cJSON *r[4];
    ck_assert_int_eq(read_records(log, r, 4), 2);
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec);
    ec.n_seq = 3;
    ec.seq_len = 512;
    ec.chunk = 3;
    double icl;
    ck_ok(induct_analysis_icl_score(m, d, &ec, &icl));
    ck_exact(num(r[1], "icl_score"), icl);
    static float lbp[511];
    size_t len;
    ck_ok(induct_analysis_loss_by_position(m, d, &ec, lbp, 511, &len));
    const cJSON *a = cJSON_GetObjectItem(r[1], "loss_by_position");
    ck_assert_int_eq(cJSON_GetArraySize(a), 511);
    int p = 0;
    for (const cJSON *x = a->child; x; x = x->next, p++) ck_exact((float)x->valuedouble, lbp[p]);
    ck_assert_double_eq_tol(lbp[499] - lbp[49], icl, 1e-5);
    float sc[4];
    static const char *keys[] = {"prefix_matching_score", "copying_score"};
    induct_probe_config pc; /* the default: the dataset's probe */
    ck_ok(induct_probe_config_for_dataset(&pc, sizeof pc, d));
    for (int k = 0; k < 2; k++) {
        if (k == 0) ck_ok(induct_analysis_prefix_matching(m, &pc, sc, 4, &len));
        else ck_ok(induct_analysis_copying(m, &pc, sc, 4, &len));
        const cJSON *h = cJSON_GetObjectItem(r[1], keys[k]);
        for (int i = 0; i < 4; i++)
            ck_exact((float)cJSON_GetArrayItem(cJSON_GetArrayItem(h, i / 2), i % 2)->valuedouble,
                     sc[i]);
    }
    /* ICL needs a context holding the 500th token: refused before any step */
    c.steps = 4;
    c.seq_len = 64;
    ck_assert_status(induct_train(o, d, &c, NULL, NULL), INDUCT_ERANGE);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "icl_score"));
    double st;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &st));
    ck_exact(st, 2);
    for (int i = 0; i < 2; i++) cJSON_Delete(r[i]);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
    teardown_dir();
}
END_TEST

/* The BOS rule: the driver's probe metrics take the dataset's BOS by default (a byte-level
 * text with BOS: id 256, not id 0, which is the NUL byte), take an explicit probe when
 * given one, and refuse an invalid one before any step. */
START_TEST(test_probe_metrics_follow_the_dataset_bos) {
    setup_dir();
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    mc.n_layers = 1;
    mc.d_model = 16;
    mc.n_heads = 2;
    mc.n_ctx = 128;
    mc.d_vocab = 257;
    mc.seed = 5;
    induct_model *m;
    ck_ok(induct_model_new(&m, &mc));
    static char text[4000];
    for (size_t i = 0; i < sizeof text; i++) text[i] = "the cat sat on the mat. "[i % 24];
    induct_text_config tc;
    ck_ok(induct_text_config_init(&tc, sizeof tc));
    tc.bos = 1;
    tc.block_tokens = 256;
    induct_dataset *d;
    ck_ok(induct_dataset_new_text(&d, text, sizeof text, &tc));
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    char log[128];
    snprintf(log, sizeof log, "%s/bos.jsonl", dir);
    induct_train_config c;
    induct_train_config_init(&c, sizeof c);
    ck_assert_ptr_null(c.probe);
    c.steps = 1;
    c.batch = 2;
    c.seq_len = 64;
    c.eval_every = 1;
    c.eval_batch = 2;
    c.metrics = INDUCT_TRAIN_METRIC_PREFIX_MATCHING | INDUCT_TRAIN_METRIC_COPYING;
    c.metrics_path = log;
    static const char *keys[] = {"prefix_matching_score", "copying_score"};
    float sc[2], nul[2];
    size_t len;
    cJSON *r[4];
    /* default: the dataset's probe (BOS 256, bytes [0, 256)), not id 0 (the NUL byte) */
    ck_ok(induct_train(o, d, &c, NULL, NULL));
    ck_assert_int_eq(read_records(log, r, 4), 2); /* steps 0 and 1 */
    induct_probe_config ds;
    ck_ok(induct_probe_config_for_dataset(&ds, sizeof ds, d));
    ck_assert_int_eq(ds.bos, 256);
    for (int k = 0; k < 2; k++) {
        ck_ok(k ? induct_analysis_copying(m, &ds, sc, 2, &len)
                : induct_analysis_prefix_matching(m, &ds, sc, 2, &len));
        ck_ok(k ? induct_analysis_copying(m, NULL, nul, 2, &len)
                : induct_analysis_prefix_matching(m, NULL, nul, 2, &len));
        const cJSON *h = cJSON_GetObjectItem(r[1], keys[k]);
        int same_as_nul = 1;
        for (int i = 0; i < 2; i++) {
            float v = (float)cJSON_GetArrayItem(cJSON_GetArrayItem(h, 0), i)->valuedouble;
            ck_exact(v, sc[i]);
            same_as_nul &= v == nul[i];
        }
        ck_assert_msg(!same_as_nul, "%s: the log shows the NUL-byte BOS probe", keys[k]);
    }
    for (int i = 0; i < 2; i++) cJSON_Delete(r[i]);
    /* an explicit probe */
    induct_probe_config mine;
    ck_ok(induct_probe_config_init(&mine, sizeof mine));
    mine.bos = 256;
    mine.token_lo = 97; /* 'a' .. 'z' */
    mine.token_hi = 123;
    mine.block_len = 10;
    mine.seed = 4;
    c.steps = 2;
    c.probe = &mine;
    ck_ok(induct_train(o, d, &c, NULL, NULL));
    ck_assert_int_eq(read_records(log, r, 4), 1); /* step 2 */
    for (int k = 0; k < 2; k++) {
        ck_ok(k ? induct_analysis_copying(m, &mine, sc, 2, &len)
                : induct_analysis_prefix_matching(m, &mine, sc, 2, &len));
        const cJSON *h = cJSON_GetObjectItem(r[0], keys[k]);
        for (int i = 0; i < 2; i++)
            ck_exact((float)cJSON_GetArrayItem(cJSON_GetArrayItem(h, 0), i)->valuedouble,
                     sc[i]);
    }
    cJSON_Delete(r[0]);
    /* an invalid probe (BOS inside its token range) is refused before any step */
    mine.bos = 100;
    c.steps = 3;
    ck_assert_status(induct_train(o, d, &c, NULL, NULL), INDUCT_EINVAL);
    double st;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &st));
    ck_exact(st, 2);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
    teardown_dir();
}
END_TEST

/* eval_loss, icl_score, loss_by_position, previous_token_score and loss_vectors come
 * from one pass over the evaluation set; with an evaluation set of several chunks they
 * still equal the separate calls (eval_loss and the previous-token score bit for bit;
 * the ICL score, the curve and the loss vectors bit for bit with the same chunks, to
 * float rounding with one chunk),
 * and each is the same whether it is requested alone or with the others. */
static void one_pass_run(uint32_t metrics, const char *log, induct_model **mo,
                         induct_dataset **dout) {
    icl_setting(11, 4, mo, dout);
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, *mo, INDUCT_OPTIM_ADAMW));
    induct_train_config c;
    induct_train_config_init(&c, sizeof c);
    c.steps = 2;
    c.batch = 2;
    c.seq_len = 512;
    c.eval_every = 2;
    c.eval_batch = 13; /* chunks of 6, 6 and 1 sequences at seq_len 512 */
    c.metrics = metrics;
    c.metrics_path = log;
    ck_ok(induct_train(o, *dout, &c, NULL, NULL));
    induct_optimizer_free(o);
}

START_TEST(test_one_eval_pass) {
    setup_dir();
    const uint32_t all = INDUCT_TRAIN_METRIC_LOSS | INDUCT_TRAIN_METRIC_ICL_SCORE |
                         INDUCT_TRAIN_METRIC_LOSS_BY_POSITION | INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN |
                         INDUCT_TRAIN_METRIC_LOSS_VECTORS;
    char log[128];
    snprintf(log, sizeof log, "%s/all.jsonl", dir);
    induct_model *m;
    induct_dataset *d;
    one_pass_run(all, log, &m, &d);
    cJSON *r[4];
    ck_assert_int_eq(read_records(log, r, 4), 2);
    /* eval_loss: induct_model_forward's mean loss on the evaluation set */
    static int32_t tok[13 * 512];
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, 13, 512, tok, 13 * 512, NULL, 0));
    double loss;
    ck_ok(induct_model_forward(m, tok, 13, 512, NULL, 0, NULL, 0, &loss));
    ck_exact(num(r[1], "eval_loss"), loss);
    /* previous_token_score: the separate call */
    float pt[4];
    size_t len;
    ck_ok(induct_analysis_previous_token_score(m, d, 13, 512, pt, 4, &len));
    const cJSON *h = cJSON_GetObjectItem(r[1], "previous_token_score");
    for (int i = 0; i < 4; i++)
        ck_exact((float)cJSON_GetArrayItem(cJSON_GetArrayItem(h, i / 2), i % 2)->valuedouble,
                 pt[i]);
    /* icl_score and loss_by_position: the analysis suite, whose evaluation set runs in
     * the chunks of the same one rule (g = 3 sequences at seq_len 512): every chunk bound
     * >= 3 gives the training pass's bits; chunk 1 (below g) float rounding only */
    induct_eval_config ec;
    induct_eval_config_init(&ec, sizeof ec);
    ec.n_seq = 13;
    ec.seq_len = 512;
    static float lbp[511], lbp1[511], vec[13], vec1[13];
    static const uint32_t bounds[] = {6, 13, 3, 4, 100, 1};
    for (int k = 0; k < 6; k++) {
        int exact = bounds[k] >= 3;
        ec.chunk = bounds[k];
        double icl;
        ck_ok(induct_analysis_icl_score(m, d, &ec, &icl));
        ck_ok(induct_analysis_loss_by_position(m, d, &ec, k ? lbp1 : lbp, 511, &len));
        ck_ok(induct_analysis_loss_vectors(m, d, &ec, k ? vec1 : vec, 13, NULL, 0));
        if (exact) ck_exact(num(r[1], "icl_score"), icl);
        else ck_assert_double_eq_tol(num(r[1], "icl_score"), icl, 1e-5);
        for (int p = 0; k && p < 511; p++)
            if (exact) ck_exact(lbp1[p], lbp[p]);
            else ck_assert_float_eq_tol(lbp1[p], lbp[p], 1e-5f);
        for (int i = 0; k && i < 13; i++)
            if (exact) ck_exact(vec1[i], vec[i]);
            else ck_assert_float_eq_tol(vec1[i], vec[i], 1e-5f);
    }
    /* loss_vectors: induct_analysis_loss_vectors (pos_seed 0) */
    const cJSON *lv = cJSON_GetObjectItem(r[1], "loss_vectors");
    ck_assert_int_eq(cJSON_GetArraySize(lv), 13);
    for (int i = 0; i < 13; i++) {
        float x = (float)cJSON_GetArrayItem(lv, i)->valuedouble;
        ck_exact(x, vec[i]);
        ck_assert_float_eq_tol(x, vec1[i], 1e-5f);
    }
    const cJSON *a = cJSON_GetObjectItem(r[1], "loss_by_position");
    ck_assert_int_eq(cJSON_GetArraySize(a), 511);
    int p = 0;
    for (const cJSON *x = a->child; x; x = x->next, p++) {
        ck_exact((float)x->valuedouble, lbp[p]);
        ck_assert_float_eq_tol((float)x->valuedouble, lbp1[p], 1e-5f);
    }
    induct_model_free(m);
    induct_dataset_free(d);
    /* each metric alone: the same bits as in the combined pass */
    static const uint32_t alone[] = {INDUCT_TRAIN_METRIC_LOSS, INDUCT_TRAIN_METRIC_ICL_SCORE,
                                     INDUCT_TRAIN_METRIC_LOSS_BY_POSITION,
                                     INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN,
                                     INDUCT_TRAIN_METRIC_LOSS_VECTORS};
    static const char *key[] = {"eval_loss", "icl_score", "loss_by_position",
                                "previous_token_score", "loss_vectors"};
    for (int k = 0; k < 5; k++) {
        snprintf(log, sizeof log, "%s/alone-%d.jsonl", dir, k);
        one_pass_run(alone[k], log, &m, &d);
        cJSON *q[4];
        ck_assert_int_eq(read_records(log, q, 4), 2);
        for (int i = 0; i < 2; i++) {
            char *x = cJSON_PrintUnformatted(cJSON_GetObjectItem(r[i], key[k]));
            char *y = cJSON_PrintUnformatted(cJSON_GetObjectItem(q[i], key[k]));
            ck_assert_str_eq(x, y);
            free(x);
            free(y);
            for (int j = 0; j < 5; j++)
                if (j != k) ck_assert_ptr_null(cJSON_GetObjectItem(q[i], key[j]));
        }
        for (int i = 0; i < 2; i++) cJSON_Delete(q[i]);
        induct_model_free(m);
        induct_dataset_free(d);
    }
    for (int i = 0; i < 2; i++) cJSON_Delete(r[i]);
    teardown_dir();
}
END_TEST

/* KV metrics in the log equal independent calls on the final model. */
START_TEST(test_kv_metrics) {
    setup_dir();
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    mc.n_layers = 2;
    mc.d_model = 16;
    mc.n_heads = 2;
    mc.n_ctx = 25;
    mc.d_vocab = 64;
    mc.seed = 5;
    induct_model *m;
    ck_ok(induct_model_new(&m, &mc));
    induct_kv_config kc;
    induct_kv_config_init(&kc, sizeof kc);
    kc.seed = 2;
    induct_dataset *d;
    ck_ok(induct_dataset_new_kv(&d, &kc));
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    char log[128];
    snprintf(log, sizeof log, "%s/kv.jsonl", dir);
    induct_train_config c;
    induct_train_config_init(&c, sizeof c);
    c.steps = 3;
    c.batch = 8;
    c.seq_len = 25;
    c.eval_every = 3;
    c.eval_batch = 16;
    c.metrics = INDUCT_TRAIN_METRIC_KV_ACCURACY | INDUCT_TRAIN_METRIC_KV_ATTENTION;
    c.metrics_path = log;
    ck_ok(induct_train(o, d, &c, NULL, NULL));
    cJSON *r[4];
    ck_assert_int_eq(read_records(log, r, 4), 2);
    double acc;
    ck_ok(induct_analysis_kv_accuracy(m, d, 16, 25, &acc));
    ck_exact(num(r[1], "kv_accuracy"), acc);
    float sc[4];
    size_t len;
    ck_ok(induct_analysis_kv_attention(m, d, 16, 25, sc, 4, &len));
    const cJSON *h = cJSON_GetObjectItem(r[1], "kv_attention_on_answer");
    for (int i = 0; i < 4; i++)
        ck_exact((float)cJSON_GetArrayItem(cJSON_GetArrayItem(h, i / 2), i % 2)->valuedouble,
                 sc[i]);
    for (int i = 0; i < 2; i++) cJSON_Delete(r[i]);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
    teardown_dir();
}
END_TEST

/* Weights-only snapshots on the log schedule; a resumed call takes no step-0 point. */
START_TEST(test_snapshot_log2_and_resume_points) {
    setup_dir();
    induct_dataset *d = rrt();
    char tpl[128], p[160];
    snprintf(tpl, sizeof tpl, "%s/w{step}.st", dir);
    induct_train_config c;
    base_config(&c, 9);
    c.snapshot_log2 = 1;
    c.snapshot_optimizer = 0;
    c.snapshot_path = tpl;
    induct_optimizer *o = new_run(0);
    induct_model *m = g_model_of_last;
    static trace t;
    memset(&t, 0, sizeof t);
    c.steps = 3;
    ck_ok(induct_train(o, d, &c, record_cb, &t));
    c.steps = 9;
    ck_ok(induct_train(o, d, &c, record_cb, &t));
    ck_assert_int_eq(t.n, 10); /* step-0 point once, then 9 steps */
    int files = 0;
    for (int s = 0; s <= 9; s++) {
        snprintf(p, sizeof p, "%s/w%d.st", dir, s);
        int want = s == 0 || s == 1 || s == 2 || s == 4 || s == 8;
        ck_assert_int_eq(access(p, F_OK) == 0, want);
        if (!want) continue;
        files++;
        induct_model *sm;
        ck_ok(induct_model_load(&sm, p));
        induct_optimizer *so;
        ck_assert_status(induct_optimizer_load(&so, sm, p), INDUCT_EFORMAT); /* weights only */
        snap a = weights(sm), b = straight(0, (uint64_t)s, d, NULL);
        assert_same(a, b);
        free(a.w);
        free(b.w);
        induct_model_free(sm);
    }
    ck_assert_int_eq(files, 5);
    /* already at the target: nothing happens */
    int before = t.n;
    ck_ok(induct_train(o, d, &c, record_cb, &t));
    ck_assert_int_eq(t.n, before);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
    teardown_dir();
}
END_TEST

/* ---- stopping ---------------------------------------------------------------------------- */

typedef struct stopper {
    uint64_t at;
    int mode; /* 0: return 1; 1: interrupt from another thread, return 0 */
    induct_model *m;
    int calls;
} stopper;

static void *interrupter(void *arg) {
    induct_model_interrupt(arg);
    return NULL;
}

static int stop_cb(const induct_progress *p, void *ud) {
    stopper *s = ud;
    s->calls++;
    if (p->step != s->at) return 0;
    if (s->mode == 0) return 1;
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, interrupter, s->m), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    return 0;
}

static void stop_test(int mode) {
    induct_dataset *d = rrt();
    induct_train_config c;
    base_config(&c, 20);
    induct_optimizer *o = new_run(1);
    induct_model *m = g_model_of_last;
    stopper s = {.at = 5, .mode = mode, .m = m};
    ck_assert_status(induct_train(o, d, &c, stop_cb, &s), INDUCT_EINTERRUPTED);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(),
                                 mode ? "induct_model_interrupt" : "progress callback"));
    ck_assert_int_eq(s.calls, 5);
    double step;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step));
    ck_exact(step, 5.0);
    snap a = weights(m), b = straight(1, 5, d, NULL);
    assert_same(a, b);
    free(a.w);
    free(b.w);
    /* the run continues from there as if never stopped */
    ck_ok(induct_train(o, d, &c, NULL, NULL));
    a = weights(m);
    b = straight(1, 20, d, NULL);
    assert_same(a, b);
    free(a.w);
    free(b.w);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
}

START_TEST(test_callback_stop) { stop_test(0); }
END_TEST
START_TEST(test_cross_thread_interrupt_between_steps) { stop_test(1); }
END_TEST

/* An interrupt at an arbitrary moment of a step: once the first step is done (the
 * progress callback releases the other thread, a handshake), the other thread sets the
 * flag without pause until the run has returned. Wherever in a step the flag lands, the
 * run stops at the next step boundary, so the outcome does not depend on timing. */
typedef struct async_arg {
    induct_model *m;
    atomic_int go, stop;
} async_arg;

static void *late_interrupter(void *arg) {
    async_arg *a = arg;
    while (!atomic_load(&a->go) && !atomic_load(&a->stop)) sched_yield();
    while (!atomic_load(&a->stop)) induct_model_interrupt(a->m);
    return NULL;
}

static int release_after_first_step(const induct_progress *p, void *ud) {
    async_arg *a = ud;
    if (p->step >= 1) atomic_store(&a->go, 1);
    return 0;
}

/* An interrupt at an arbitrary moment: the weights are those after the last step. */
START_TEST(test_async_interrupt) {
    induct_dataset *d = rrt();
    induct_train_config c;
    base_config(&c, 1000000);
    induct_optimizer *o = new_run(0);
    induct_model *m = g_model_of_last;
    async_arg a = {.m = m};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, late_interrupter, &a), 0);
    ck_assert_status(induct_train(o, d, &c, release_after_first_step, &a), INDUCT_EINTERRUPTED);
    atomic_store(&a.stop, 1);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    double step;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step));
    ck_assert_double_gt(step, 0.0);
    ck_assert_double_lt(step, 1000000.0);
    snap x = weights(m), y = straight(0, (uint64_t)step, d, NULL);
    assert_same(x, y);
    free(x.w);
    free(y.w);
    /* an interrupt before the call is forgotten when it starts */
    induct_model_interrupt(m);
    c.steps = (uint64_t)step + 3;
    ck_ok(induct_train(o, d, &c, NULL, NULL));
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step));
    ck_exact(step, (double)c.steps);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
}
END_TEST

static int stop_at_end_cb(const induct_progress *p, void *ud) {
    (void)ud;
    return (p->events & INDUCT_TRAIN_EVENT_DONE) ? 1 : 0;
}

START_TEST(test_stop_request_after_last_step) {
    induct_dataset *d = rrt();
    induct_train_config c;
    base_config(&c, 3);
    induct_optimizer *o = new_run(0);
    induct_model *m = g_model_of_last;
    ck_ok(induct_train(o, d, &c, stop_at_end_cb, NULL));
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
}
END_TEST

/* ---- stop condition -------------------------------------------------------------------------- */

START_TEST(test_target_loss) {
    induct_dataset *d = rrt();
    induct_train_config c;
    base_config(&c, 40);
    c.eval_every = 2;
    static trace t;
    memset(&t, 0, sizeof t);
    induct_optimizer *o = new_run(0);
    induct_model *m = g_model_of_last;
    ck_ok(induct_train(o, d, &c, record_cb, &t));
    /* the first evaluation (after step 0) that beats every earlier one */
    double best = t.eval_loss[0];
    uint64_t at = 0;
    for (int i = 1; i < t.n; i++)
        if ((t.events[i] & INDUCT_TRAIN_EVENT_EVAL) && t.step[i] >= 4 && t.eval_loss[i] < best) {
            at = t.step[i];
            best = t.eval_loss[i];
            break;
        } else if (t.events[i] & INDUCT_TRAIN_EVENT_EVAL && t.eval_loss[i] < best) {
            best = t.eval_loss[i];
        }
    ck_assert_msg(at > 0, "the eval loss never improved after step 4");
    induct_optimizer_free(o);
    induct_model_free(m);
    /* the same run with that target stops exactly there, returning OK */
    memset(&t, 0, sizeof t);
    c.target_loss = best;
    o = new_run(0);
    m = g_model_of_last;
    ck_ok(induct_train(o, d, &c, record_cb, &t));
    double step;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step));
    ck_exact(step, (double)at);
    ck_assert_uint_eq(t.events[t.n - 1], INDUCT_TRAIN_EVENT_STEP | INDUCT_TRAIN_EVENT_EVAL |
                                             INDUCT_TRAIN_EVENT_DONE | INDUCT_TRAIN_EVENT_TARGET);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
}
END_TEST

/* ---- refused arguments -------------------------------------------------------------------------
 */

START_TEST(test_refusals) {
    setup_dir();
    induct_dataset *d = rrt();
    int32_t toks[200];
    tu_tokens(toks, 200, 11, 1);
    induct_dataset *text;
    ck_ok(induct_dataset_new_tokens(&text, toks, 200, 11, 3));
    induct_optimizer *o = new_run(0);
    induct_model *m = g_model_of_last;
    snap w0 = weights(m);
    char log[128];
    snprintf(log, sizeof log, "%s/never.jsonl", dir);
    induct_train_config c;
    static const uint32_t kv_only[] = {INDUCT_TRAIN_METRIC_KV_ACCURACY,
                                       INDUCT_TRAIN_METRIC_KV_ATTENTION};
    static const char *keys[] = {"kv_accuracy", "kv_attention_on_answer"};
    for (int i = 0; i < 2; i++) { /* not a key-value dataset */
        base_config(&c, 5);
        c.eval_every = 1;
        c.metrics_path = log;
        c.metrics = INDUCT_TRAIN_METRIC_LOSS | kv_only[i];
        ck_assert_status(induct_train(o, d, &c, NULL, NULL), INDUCT_EINVAL);
        ck_assert_ptr_nonnull(strstr(induct_last_error_message(), keys[i]));
    }
    base_config(&c, 5);
    c.eval_every = 1;
    c.metrics = 0x8000;
    ck_assert_status(induct_train(o, d, &c, NULL, NULL), INDUCT_EINVAL);
    c.metrics = INDUCT_TRAIN_METRIC_INDUCTION_SCORE; /* not an RRT dataset */
    ck_assert_status(induct_train(o, text, &c, NULL, NULL), INDUCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "induction_score"));
    base_config(&c, 5);
    c.target_loss = 1.0; /* no evaluation schedule */
    ck_assert_status(induct_train(o, d, &c, NULL, NULL), INDUCT_EINVAL);
    c.eval_every = 1;
    c.target_loss = NAN;
    ck_assert_status(induct_train(o, d, &c, NULL, NULL), INDUCT_EINVAL);
    base_config(&c, 5);
    c.batch = 0;
    ck_assert_status(induct_train(o, d, &c, NULL, NULL), INDUCT_EINVAL);
    base_config(&c, 5);
    c.seq_len = 9; /* n_ctx 8 */
    ck_assert_status(induct_train(o, d, &c, NULL, NULL), INDUCT_ERANGE);
    base_config(&c, 5);
    c.seq_len = 3; /* RRT needs 2 blocks of >= 2 */
    ck_assert_status(induct_train(o, d, &c, NULL, NULL), INDUCT_ERANGE);
    base_config(&c, 5);
    c.eval_every = 1;
    c.eval_batch = 0;
    ck_assert_status(induct_train(o, d, &c, NULL, NULL), INDUCT_EINVAL);
    base_config(&c, 5);
    c.size = 8;
    ck_assert_status(induct_train(o, d, &c, NULL, NULL), INDUCT_EABI);
    ck_assert_status(induct_train(NULL, d, &c, NULL, NULL), INDUCT_EINVAL);
    ck_assert_status(induct_train_config_init(&c, 3), INDUCT_EABI);
    /* nothing was trained, no log was created */
    ck_assert_int_ne(access(log, F_OK), 0);
    snap w1 = weights(m);
    assert_same(w0, w1);
    /* an unwritable snapshot path fails at the first snapshot, after that step */
    base_config(&c, 5);
    c.snapshot_every = 2;
    char bad[160];
    snprintf(bad, sizeof bad, "%s/missing-dir/s{step}", dir);
    c.snapshot_path = bad;
    ck_assert_status(induct_train(o, d, &c, NULL, NULL), INDUCT_EIO);
    double step;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step));
    ck_exact(step, 0.0); /* the step-0 snapshot failed first */
    free(w0.w);
    free(w1.w);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(text);
    induct_dataset_free(d);
    teardown_dir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("training");
    TCase *tc = tcase_create("driver");
    tcase_add_test(tc, test_resume_bit_identical);
    tcase_add_test(tc, test_metrics_log);
    tcase_add_test(tc, test_analysis_metrics);
    tcase_add_test(tc, test_probe_metrics_follow_the_dataset_bos);
    tcase_add_test(tc, test_one_eval_pass);
    tcase_add_test(tc, test_kv_metrics);
    tcase_add_test(tc, test_snapshot_log2_and_resume_points);
    tcase_add_test(tc, test_callback_stop);
    tcase_add_test(tc, test_cross_thread_interrupt_between_steps);
    tcase_add_test(tc, test_async_interrupt);
    tcase_add_test(tc, test_stop_request_after_last_step);
    tcase_add_test(tc, test_target_loss);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
