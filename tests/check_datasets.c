/* Datasets: the key-value retrieval generator and its ceiling, the KV
 * read-outs, byte-level text corpora and splits, window edges, token files (every
 * error, round trips, atomic writes) and bounded residency of mapped files.
 * Links only the shared library (public API). Reference values are computed here,
 * independently of the library (enumeration, Monte Carlo, hand-made files). */
#define _DEFAULT_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

/* The evaluation order of docs/datasets.md, computed here from its definition: window
 * j = i·k mod E, k the integer coprime to E nearest to ⌊E·(√5−1)/2⌋ (the upper one on a tie). */
static uint64_t eval_order(uint64_t i, uint64_t E) {
    uint64_t k = 1;
    if (E > 2) {
        double target = (double)E * (sqrt(5.0) - 1.0) / 2.0;
        double best = 1e300;
        for (uint64_t c = 1; c < E; c++) {
            uint64_t a = c, b = E;
            while (b) { uint64_t t = a % b; a = b; b = t; }
            if (a != 1) continue;
            double dist = fabs((double)c - floor(target));
            if (dist <= best) best = dist, k = c;
        }
    }
    return i * k % E;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}


/* ---- helpers ------------------------------------------------------------------ */

static char tmpdir[256];

static void make_tmpdir(void) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/induct-ds-XXXXXX", base && *base ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void rm_rf(const char *path) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *tpath(const char *name) {
    static _Thread_local char buf[8][512];
    static _Thread_local int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    if (n) ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static void le32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* An llm.c file written by hand: header (magic, version, count) + `n` uint16 tokens,
 * optionally with `extra` trailing bytes or only `keep` bytes of the whole. */
static void write_llmc(const char *path, int32_t magic, int32_t version, int32_t count,
                       const uint16_t *tok, size_t n, size_t extra, long keep) {
    size_t size = 1024 + 2 * n + extra;
    unsigned char *b = calloc(size, 1);
    le32(b, (uint32_t)magic);
    le32(b + 4, (uint32_t)version);
    le32(b + 8, (uint32_t)count);
    for (size_t i = 0; i < n; i++) {
        b[1024 + 2 * i] = (unsigned char)(tok[i] & 0xff);
        b[1024 + 2 * i + 1] = (unsigned char)(tok[i] >> 8);
    }
    write_bytes(path, b, keep >= 0 ? (size_t)keep : size);
    free(b);
}

static int32_t *batch_of(const induct_dataset *d, uint32_t split, uint64_t index, uint32_t B,
                         uint32_t T, int32_t *meta) {
    int32_t *t = malloc((size_t)B * T * sizeof *t);
    ck_ok(induct_dataset_batch(d, split, index, B, T, t, (size_t)B * T, meta, meta ? B : 0));
    return t;
}

/* ---- key-value retrieval ----------------------------------------------------- */

static induct_dataset *kv_new(uint32_t V, uint32_t lo, uint32_t hi, uint32_t pmin, int32_t pmax,
                              uint32_t unique, uint64_t seed) {
    induct_kv_config c;
    ck_ok(induct_kv_config_init(&c, sizeof c));
    c.d_vocab = V;
    c.token_lo = lo;
    c.token_hi = hi;
    c.pair_min = pmin;
    c.pair_max = pmax;
    c.unique_key = unique;
    c.seed = seed;
    induct_dataset *d;
    ck_ok(induct_dataset_new_kv(&d, &c));
    return d;
}

START_TEST(test_kv_invariants) {
    enum { B = 500, T = 25 };
    const uint32_t C = T - 1, LO = 3, HI = 40, PMIN = 4, PMAX = 19;
    for (uint32_t unique = 0; unique <= 1; unique++) {
        induct_dataset *d = kv_new(64, LO, HI, PMIN, (int32_t)PMAX, unique, 11);
        ck_assert_uint_eq(induct_dataset_d_vocab(d), 64);
        int32_t meta[B], info[B * 4];
        size_t len = 0;
        int seen[T] = {0};
        int key_in_filler = 0;
        for (uint64_t index = 0; index < 4; index++) {
            int32_t *t = batch_of(d, INDUCT_SPLIT_TRAIN, index, B, T, meta);
            ck_ok(induct_dataset_kv_info(d, INDUCT_SPLIT_TRAIN, index, B, T, info, B * 4, &len));
            ck_assert_uint_eq(len, B * 4);
            for (int b = 0; b < B; b++) {
                const int32_t *x = t + b * T, *o = info + b * 4;
                int32_t p = o[INDUCT_KV_KEY_POS];
                ck_assert_int_ge(p, (int)PMIN);
                ck_assert_int_le(p, (int)PMAX);
                seen[p]++;
                ck_assert_int_eq(o[INDUCT_KV_VALUE_POS], p + 1);
                ck_assert_int_eq(meta[b], p + 1);
                ck_assert_int_eq(o[INDUCT_KV_ANSWER_POS], (int)C - 1);
                ck_assert_int_eq(x[p], x[C - 1]);                       /* key where stated */
                ck_assert_int_eq(x[p + 1], x[C]);                       /* value = answer */
                ck_assert_int_eq(o[INDUCT_KV_ANSWER_TOKEN], x[C]);
                for (uint32_t i = 0; i < T; i++) {
                    ck_assert_int_ge(x[i], (int)LO);
                    ck_assert_int_lt(x[i], (int)HI);
                }
                for (uint32_t i = 0; i + 1 < C; i++)
                    if (i != (uint32_t)p && x[i] == x[p]) key_in_filler++;
                if (unique) ck_assert_int_ne(x[p + 1], x[p]);
            }
            free(t);
        }
        for (uint32_t p = 0; p < T; p++) {
            if (p >= PMIN && p <= PMAX) ck_assert_int_gt(seen[p], 50); /* ~125 expected */
            else ck_assert_int_eq(seen[p], 0);
        }
        if (unique) ck_assert_int_eq(key_in_filler, 0);
        else ck_assert_int_gt(key_in_filler, 500); /* ~ 2000 * 21 / 37 expected */
        induct_dataset_free(d);
    }
}
END_TEST

START_TEST(test_kv_determinism) {
    enum { B = 16, T = 12 };
    induct_dataset *a = kv_new(20, 0, 0, 0, -1, 0, 5), *b = kv_new(20, 0, 0, 0, -1, 0, 5),
                   *c = kv_new(20, 0, 0, 0, -1, 0, 6);
    int32_t *x = batch_of(a, INDUCT_SPLIT_EVAL, 3, B, T, NULL);
    int32_t *y = batch_of(b, INDUCT_SPLIT_EVAL, 3, B, T, NULL);
    int32_t *z = batch_of(c, INDUCT_SPLIT_EVAL, 3, B, T, NULL);
    int32_t *w = batch_of(a, INDUCT_SPLIT_TRAIN, 3, B, T, NULL);
    int32_t *u = batch_of(a, INDUCT_SPLIT_EVAL, 4, B, T, NULL);
    ck_assert_mem_eq(x, y, sizeof(int32_t) * B * T);
    ck_assert(memcmp(x, z, sizeof(int32_t) * B * T) != 0);
    ck_assert(memcmp(x, w, sizeof(int32_t) * B * T) != 0);
    ck_assert(memcmp(x, u, sizeof(int32_t) * B * T) != 0);
    /* a batch is independent of the calls before it */
    int32_t *x2 = batch_of(a, INDUCT_SPLIT_EVAL, 3, B, T, NULL);
    ck_assert_mem_eq(x, x2, sizeof(int32_t) * B * T);
    free(x), free(y), free(z), free(w), free(u), free(x2);
    induct_dataset_free(a), induct_dataset_free(b), induct_dataset_free(c);
}
END_TEST

START_TEST(test_kv_errors) {
    induct_kv_config c;
    induct_dataset *d = (induct_dataset *)&c;
    ck_assert_status(induct_kv_config_init(&c, 8), INDUCT_EABI);
    ck_ok(induct_kv_config_init(&c, sizeof c));
    c.token_lo = 64;
    ck_assert_status(induct_dataset_new_kv(&d, &c), INDUCT_EINVAL);
    ck_assert_ptr_null(d);
    ck_ok(induct_kv_config_init(&c, sizeof c));
    c.pair_min = 5;
    c.pair_max = 4;
    ck_assert_status(induct_dataset_new_kv(&d, &c), INDUCT_EINVAL);
    ck_ok(induct_kv_config_init(&c, sizeof c));
    c.unique_key = 1;
    c.token_lo = 5;
    c.token_hi = 6;
    ck_assert_status(induct_dataset_new_kv(&d, &c), INDUCT_EINVAL);
    d = kv_new(64, 0, 0, 2, 10, 0, 0);
    int32_t t[4 * 16], info[16];
    size_t len = 0;
    ck_assert_status(induct_dataset_batch(d, 0, 0, 1, 3, t, 64, NULL, 0), INDUCT_ERANGE);
    ck_assert_status(induct_dataset_batch(d, 0, 0, 1, 13, t, 64, NULL, 0), INDUCT_ERANGE);
    ck_ok(induct_dataset_batch(d, 0, 0, 1, 14, t, 64, NULL, 0)); /* pair_max 10 = 14 - 4 */
    ck_assert_status(induct_dataset_kv_info(d, 0, 0, 5, 14, info, 16, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 20);
    double v;
    ck_assert_status(induct_dataset_kv_ceiling(d, 13, &v), INDUCT_ERANGE);
    induct_dataset_free(d);
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    ck_assert_status(induct_dataset_kv_ceiling(d, 25, &v), INDUCT_EINVAL);
    ck_assert_status(induct_dataset_kv_info(d, 0, 0, 1, 25, info, 16, &len), INDUCT_EINVAL);
    induct_dataset_free(d);
}
END_TEST

/* The Bayes-optimal accuracy by brute force: enumerate every draw of the generator
 * (p, k, v, filler) with its probability, accumulate P(context, answer) and sum the
 * best answer's mass per context. Independent of the library's derivation. */
static double brute_ceiling(uint32_t R, uint32_t C, uint32_t pmin, uint32_t pmax) {
    size_t nx = 1;
    for (uint32_t i = 0; i < C; i++) nx *= R;
    double *mass = calloc(nx * R, sizeof *mass);
    uint32_t m = pmax - pmin + 1, nf = C - 3;
    size_t nfill = 1;
    for (uint32_t i = 0; i < nf; i++) nfill *= R;
    double pr = 1.0 / ((double)m * (double)R * (double)R * (double)nfill);
    uint32_t x[16];
    for (uint32_t p = pmin; p <= pmax; p++)
        for (uint32_t k = 0; k < R; k++)
            for (uint32_t v = 0; v < R; v++)
                for (size_t f = 0; f < nfill; f++) {
                    size_t ff = f;
                    for (uint32_t t = 0; t + 1 < C; t++) {
                        if (t == p) x[t] = k;
                        else if (t == p + 1) x[t] = v;
                        else {
                            x[t] = (uint32_t)(ff % R);
                            ff /= R;
                        }
                    }
                    x[C - 1] = k;
                    size_t id = 0;
                    for (uint32_t t = 0; t < C; t++) id = id * R + x[t];
                    mass[id * R + v] += pr;
                }
    double acc = 0.0;
    for (size_t i = 0; i < nx; i++) {
        double best = 0.0;
        for (uint32_t v = 0; v < R; v++)
            if (mass[i * R + v] > best) best = mass[i * R + v];
        acc += best;
    }
    free(mass);
    return acc;
}

START_TEST(test_kv_ceiling_exact) {
    static const uint32_t cases[][4] = {/* R, C, pmin, pmax */
                                        {2, 5, 0, 2}, {3, 6, 0, 3}, {3, 7, 1, 3},
                                        {4, 7, 0, 4}, {2, 9, 0, 6}, {5, 6, 1, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint32_t R = cases[i][0], C = cases[i][1], pmin = cases[i][2], pmax = cases[i][3];
        induct_dataset *d = kv_new(R + 2, 2, 2 + R, pmin, (int32_t)pmax, 0, 0);
        double v;
        ck_ok(induct_dataset_kv_ceiling(d, C + 1, &v));
        double ref = brute_ceiling(R, C, pmin, pmax);
        ck_assert_msg(fabs(v - ref) < 1e-12, "R=%u C=%u [%u,%u]: library %.15f, brute force %.15f",
                      R, C, pmin, pmax, v, ref);
        induct_dataset_free(d);
    }
    induct_dataset *u = kv_new(3, 0, 0, 0, -1, 1, 0);
    double v;
    ck_ok(induct_dataset_kv_ceiling(u, 9, &v));
    ck_assert(v == 1.0);
    induct_dataset_free(u);
}
END_TEST

/* Monte Carlo on the generator's own rows at the blog post's size: guess the token that
 * most often follows an allowed earlier occurrence of the query key (ties: lowest id).
 * This guess is Bayes-optimal, so its hit rate estimates the ceiling. */
START_TEST(test_kv_ceiling_monte_carlo) {
    enum { B = 1000, NB = 40, T = 25, V = 64 };
    const uint32_t PMIN = 4, PMAX = 19, C = T - 1;
    for (uint32_t unique = 0; unique <= 1; unique++) {
        induct_dataset *d = kv_new(V, 0, 0, PMIN, (int32_t)PMAX, unique, 3);
        double ceiling;
        ck_ok(induct_dataset_kv_ceiling(d, T, &ceiling));
        long hits = 0, n = 0;
        for (uint64_t index = 0; index < NB; index++) {
            int32_t *t = batch_of(d, INDUCT_SPLIT_TRAIN, index, B, T, NULL);
            for (int b = 0; b < B; b++, n++) {
                const int32_t *x = t + b * T;
                int cnt[V] = {0};
                for (uint32_t j = PMIN; j <= PMAX; j++)
                    if (x[j] == x[C - 1]) cnt[x[j + 1]]++;
                int best = 0;
                for (int v = 1; v < V; v++)
                    if (cnt[v] > cnt[best]) best = v;
                hits += best == x[C];
            }
            free(t);
        }
        double est = (double)hits / n, se = sqrt(est * (1 - est) / n);
        if (unique) ck_assert(est == 1.0 && ceiling == 1.0);
        else
            ck_assert_msg(fabs(est - ceiling) < 4 * se + 1e-9,
                          "ceiling %.5f vs Monte Carlo %.5f +- %.5f (n=%ld)", ceiling, est, se, n);
        induct_dataset_free(d);
    }
}
END_TEST

/* KV read-outs against the model's own forward and attention, row by row. */
START_TEST(test_kv_analysis_matches_forward) {
    enum { T = 8, N = 1100 }; /* > 8192/T rows: the analysis runs in two chunks */
    induct_model_config mc;
    tu_tiny_config(&mc); /* d_vocab 11, n_ctx 8 */
    induct_model *m;
    ck_ok(induct_model_new(&m, &mc));
    tu_randomize(m, 1.0, 9);
    induct_dataset *d = kv_new(11, 1, 11, 0, -1, 0, 4);
    int32_t *tok = batch_of(d, INDUCT_SPLIT_EVAL, 0, N, T, NULL);
    int32_t *info = malloc(N * 4 * sizeof *info);
    ck_ok(induct_dataset_kv_info(d, INDUCT_SPLIT_EVAL, 0, N, T, info, N * 4, NULL));
    float *logits = malloc((size_t)T * 11 * sizeof *logits);
    float att[2 * 2 * T * T];
    size_t len;
    long correct = 0;
    double ref_att[4] = {0};
    for (int b = 0; b < N; b++) {
        const int32_t *x = tok + b * T;
        ck_ok(induct_model_forward(m, x, 1, T, logits, T * 11, NULL, 0, NULL));
        int q = info[b * 4 + INDUCT_KV_ANSWER_POS], vp = info[b * 4 + INDUCT_KV_VALUE_POS];
        ck_assert_int_eq(q, T - 2);
        const float *l = logits + q * 11;
        int best = 0;
        for (int v = 1; v < 11; v++)
            if (l[v] > l[best]) best = v;
        correct += best == x[T - 1];
        ck_ok(induct_model_attention(m, x, T, att, sizeof att / sizeof *att, &len));
        for (int lh = 0; lh < 4; lh++) ref_att[lh] += att[(size_t)lh * T * T + q * T + vp];
    }
    double acc;
    ck_ok(induct_analysis_kv_accuracy(m, d, N, T, &acc));
    ck_assert_msg(fabs(acc - (double)correct / N) <= 1.0 / N + 1e-12, "accuracy %.6f vs %.6f", acc,
                  (double)correct / N);
    float out[4];
    ck_ok(induct_analysis_kv_attention(m, d, N, T, out, 4, &len));
    ck_assert_uint_eq(len, 4);
    for (int i = 0; i < 4; i++) ck_assert_double_eq_tol(out[i], ref_att[i] / N, 1e-5);
    ck_assert_status(induct_analysis_kv_attention(m, d, N, T, out, 3, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 4);
    /* other datasets and bad lengths */
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 11;
    rc.min_block = 2;
    induct_dataset *r;
    ck_ok(induct_dataset_new_rrt(&r, &rc));
    ck_assert_status(induct_analysis_kv_accuracy(m, r, 4, T, &acc), INDUCT_EINVAL);
    ck_assert_status(induct_analysis_kv_accuracy(m, d, 4, 9, &acc), INDUCT_ERANGE);
    ck_assert_status(induct_analysis_kv_accuracy(m, d, 0, T, &acc), INDUCT_EINVAL);
    induct_dataset_free(r);
    free(tok), free(info), free(logits);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* Closed form: all-zero weights give uniform attention (1/(T-1) on the value from the
 * query) and all-equal logits (argmax = id 0), so accuracy = share of answers equal 0. */
START_TEST(test_kv_analysis_closed_form) {
    enum { T = 8, N = 300 };
    induct_model_config mc;
    tu_tiny_config(&mc);
    induct_model *m;
    ck_ok(induct_model_new(&m, &mc));
    tu_randomize(m, 0.0, 1);
    /* tu_randomize with std 0 leaves LayerNorm gains at 1 and every other parameter 0 */
    induct_dataset *d = kv_new(11, 0, 3, 0, -1, 0, 8);
    int32_t *info = malloc(N * 4 * sizeof *info);
    ck_ok(induct_dataset_kv_info(d, INDUCT_SPLIT_EVAL, 0, N, T, info, N * 4, NULL));
    long zeros = 0;
    for (int b = 0; b < N; b++) zeros += info[b * 4 + INDUCT_KV_ANSWER_TOKEN] == 0;
    double acc;
    ck_ok(induct_analysis_kv_accuracy(m, d, N, T, &acc));
    ck_assert_double_eq_tol(acc, (double)zeros / N, 1e-12);
    ck_assert(zeros > 50 && zeros < 150); /* token range [0,3): about a third */
    float out[4];
    size_t len;
    ck_ok(induct_analysis_kv_attention(m, d, N, T, out, 4, &len));
    for (int i = 0; i < 4; i++) ck_assert_double_eq_tol(out[i], 1.0 / (T - 1), 1e-6);
    free(info);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* induct_train_step on a KV dataset minimises the answer position's loss only (unless
 * all_positions): the reported loss is the mean of the forward's per-token losses there,
 * and one SGD step with lr 1 moves the weights by minus the finite-difference gradient
 * of that loss. */
static double answer_loss(induct_model *m, const int32_t *tok, int B, int T, int all) {
    float losses[4 * 7];
    ck_ok(induct_model_forward(m, tok, B, T, NULL, 0, losses, B * (T - 1), NULL));
    double s = 0;
    for (int b = 0; b < B; b++)
        for (int p = 0; p < T - 1; p++)
            if (all || p == T - 2) s += losses[b * (T - 1) + p];
    return s / (all ? B * (T - 1) : B);
}

START_TEST(test_kv_training_objective) {
    enum { B = 4, T = 8 };
    for (int all = 0; all <= 1; all++) {
        induct_model_config mc;
        tu_tiny_config(&mc);
        mc.layer_norm = 1;
        induct_model *m;
        ck_ok(induct_model_new(&m, &mc));
        tu_randomize(m, 0.5, 21);
        induct_kv_config kc;
        ck_ok(induct_kv_config_init(&kc, sizeof kc));
        kc.d_vocab = 11;
        kc.all_positions = (uint32_t)all;
        kc.seed = 9;
        induct_dataset *d;
        ck_ok(induct_dataset_new_kv(&d, &kc));
        int32_t tok[B * T];
        ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, B, T, tok, B * T, NULL, 0));
        double l0 = answer_loss(m, tok, B, T, all);
        /* finite differences of the objective for a few weights */
        static const char *names[] = {"unembed.W_U", "blocks.0.attn.W_Q", "blocks.1.attn.W_K",
                                      "embed.W_E"};
        float fd[4][3], before[4][3];
        for (int k = 0; k < 4; k++) {
            size_t n;
            float *p = malloc(4096 * sizeof *p);
            ck_ok(induct_model_get_tensor(m, names[k], INDUCT_BUF_PARAM, p, 4096, &n));
            for (int j = 0; j < 3; j++) {
                size_t at = (size_t)(j * 7 + 3) % n;
                float orig = p[at];
                before[k][j] = orig;
                p[at] = orig + 1e-2f;
                ck_ok(induct_model_set_tensor(m, names[k], p, n));
                double lp = answer_loss(m, tok, B, T, all);
                p[at] = orig - 1e-2f;
                ck_ok(induct_model_set_tensor(m, names[k], p, n));
                double lm = answer_loss(m, tok, B, T, all);
                p[at] = orig;
                ck_ok(induct_model_set_tensor(m, names[k], p, n));
                fd[k][j] = (float)((lp - lm) / 2e-2);
            }
            free(p);
        }
        induct_optimizer *o;
        ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_SGD));
        ck_ok(induct_optimizer_set(o, INDUCT_OPT_LR, 1.0));
        ck_ok(induct_optimizer_set(o, INDUCT_OPT_WEIGHT_DECAY, 0.0));
        double loss;
        ck_ok(induct_train_step(o, d, B, T, &loss));
        ck_assert_double_eq_tol(loss, l0, 1e-5);
        for (int k = 0; k < 4; k++) {
            size_t n;
            float *p = malloc(4096 * sizeof *p);
            ck_ok(induct_model_get_tensor(m, names[k], INDUCT_BUF_PARAM, p, 4096, &n));
            for (int j = 0; j < 3; j++) {
                size_t at = (size_t)(j * 7 + 3) % n;
                double step = (double)before[k][j] - p[at];
                ck_assert_msg(fabs(step - fd[k][j]) < 2e-3 + 2e-2 * fabs(fd[k][j]),
                              "%s[%zu] (all=%d): update %.6f, -gradient by FD %.6f", names[k], at,
                              all, step, fd[k][j]);
            }
            free(p);
        }
        /* forward after training reports every position again */
        double mean;
        float losses[B * (T - 1)];
        ck_ok(induct_model_forward(m, tok, B, T, NULL, 0, losses, B * (T - 1), &mean));
        double s = 0;
        for (int i = 0; i < B * (T - 1); i++) s += losses[i];
        ck_assert_double_eq_tol(mean, s / (B * (T - 1)), 1e-6);
        induct_optimizer_free(o);
        induct_dataset_free(d);
        induct_model_free(m);
    }
}
END_TEST

/* ---- text ------------------------------------------------------------------------ */

static induct_text_config text_cfg(uint32_t bos, int32_t sep, uint32_t split, double f,
                                   uint64_t block, uint32_t n_eval) {
    induct_text_config c;
    ck_ok(induct_text_config_init(&c, sizeof c));
    c.bos = bos;
    c.separator = sep;
    c.split = split;
    c.val_fraction = f;
    c.block_tokens = block;
    c.n_eval_windows = n_eval;
    return c;
}

START_TEST(test_text_files) {
    make_tmpdir();
    induct_text_config c = text_cfg(0, -1, INDUCT_SPLIT_BY_POSITION, 0.0, 65536, 1024);
    induct_dataset *d = (induct_dataset *)&c;
    /* empty input */
    write_bytes(tpath("empty.txt"), "", 0);
    ck_assert_status(induct_dataset_new_text_path(&d, tpath("empty.txt"), NULL, &c),
                     INDUCT_EFORMAT);
    ck_assert_ptr_null(d);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "empty.txt"));
    ck_assert_status(induct_dataset_new_text(&d, "x", 0, &c), INDUCT_EINVAL);
    ck_assert_status(induct_dataset_new_text_path(&d, tpath("missing.txt"), NULL, &c),
                     INDUCT_EIO);
    /* one byte: a valid corpus of one token that holds no window */
    write_bytes(tpath("one.txt"), "Q", 1);
    ck_ok(induct_dataset_new_text_path(&d, tpath("one.txt"), NULL, &c));
    ck_assert_uint_eq(induct_dataset_d_vocab(d), 256);
    uint64_t n;
    ck_ok(induct_dataset_split_tokens(d, INDUCT_SPLIT_TRAIN, &n));
    ck_assert_uint_eq(n, 1);
    int32_t t[16];
    ck_assert_status(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 1, 2, t, 16, NULL, 0),
                     INDUCT_ERANGE);
    induct_dataset_free(d);
    /* with BOS and a separator: [BOS, 'Q', '\n'] */
    c = text_cfg(1, '\n', INDUCT_SPLIT_BY_POSITION, 0.0, 65536, 1024);
    ck_ok(induct_dataset_new_text_path(&d, tpath("one.txt"), NULL, &c));
    ck_assert_uint_eq(induct_dataset_d_vocab(d), 257);
    ck_ok(induct_dataset_split_tokens(d, INDUCT_SPLIT_TRAIN, &n));
    ck_assert_uint_eq(n, 3);
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 7, 1, 2, t, 16, NULL, 0));
    ck_assert_int_eq(t[0], INDUCT_TEXT_BOS);
    ck_assert_int_eq(t[1], 'Q');
    induct_dataset_free(d);
    /* invalid UTF-8 is still bytes */
    static const unsigned char bad[] = {0xff, 0xfe, 0xc3, 0x28, 0x80, 0x00, 0xed, 0xa0, 0x80, 'z'};
    write_bytes(tpath("bad.bin"), bad, sizeof bad);
    c = text_cfg(0, -1, INDUCT_SPLIT_BY_POSITION, 0.0, 65536, 1024);
    ck_ok(induct_dataset_new_text_path(&d, tpath("bad.bin"), NULL, &c));
    int32_t meta[1];
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 1, 9, t, 9, meta, 1)); /* n = T+1 */
    ck_assert_int_eq(meta[0], 0);
    for (int i = 0; i < 9; i++) ck_assert_int_eq(t[i], bad[i]);
    induct_dataset_free(d);
    rm_rf(tmpdir);
}
END_TEST

START_TEST(test_text_directory) {
    make_tmpdir();
    char sub[600];
    snprintf(sub, sizeof sub, "%s/sub", tmpdir);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    write_bytes(tpath("b.py"), "bb", 2);
    write_bytes(tpath("a.py"), "a", 1);
    write_bytes(tpath("sub/c.py"), "ccc", 3);
    write_bytes(tpath("sub2.py"), "s2", 2);
    write_bytes(tpath("x.txt"), "not python", 10);
    write_bytes(tpath("empty.py"), "", 0);
    ck_assert_int_eq(symlink(tpath("a.py"), tpath("link.py")), 0);
    /* sorted order: a.py < b.py < empty.py (skipped) < sub/c.py < sub2.py; link skipped */
    const int32_t want[] = {256, 'a', '\n', 256, 'b', 'b', '\n', 256, 'c', 'c', 'c', '\n',
                            256, 's', '2', '\n'};
    enum { NW = sizeof want / sizeof *want };
    induct_text_config c = text_cfg(1, '\n', INDUCT_SPLIT_BY_POSITION, 0.0, 65536, 0);
    induct_dataset *d;
    ck_ok(induct_dataset_new_text_path(&d, tmpdir, ".py", &c));
    uint64_t n;
    ck_ok(induct_dataset_split_tokens(d, INDUCT_SPLIT_TRAIN, &n));
    ck_assert_uint_eq(n, NW);
    ck_ok(induct_dataset_split_tokens(d, INDUCT_SPLIT_EVAL, &n));
    ck_assert_uint_eq(n, 0);
    int32_t *t = batch_of(d, INDUCT_SPLIT_TRAIN, 0, 1, NW - 1, NULL);
    ck_assert_mem_eq(t, want, sizeof(int32_t) * (NW - 1));
    free(t);
    int32_t tb[NW];
    ck_assert_status(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, 1, 2, tb, NW, NULL, 0),
                     INDUCT_ERANGE);
    induct_dataset_free(d);
    /* by document, f = 0.5: documents 1 and 3 (b.py, sub2.py) are held out */
    c = text_cfg(1, '\n', INDUCT_SPLIT_BY_DOCUMENT, 0.5, 65536, 0);
    ck_ok(induct_dataset_new_text_path(&d, tmpdir, ".py", &c));
    ck_ok(induct_dataset_split_tokens(d, INDUCT_SPLIT_TRAIN, &n));
    ck_assert_uint_eq(n, 8);
    ck_ok(induct_dataset_split_tokens(d, INDUCT_SPLIT_EVAL, &n));
    ck_assert_uint_eq(n, 8);
    const int32_t tr[] = {256, 'a', '\n', 256, 'c', 'c', 'c'}, va[] = {256, 'b', 'b', '\n', 256, 's', '2'};
    t = batch_of(d, INDUCT_SPLIT_TRAIN, 3, 1, 7, NULL);
    ck_assert_mem_eq(t, tr, sizeof tr);
    free(t);
    t = batch_of(d, INDUCT_SPLIT_EVAL, 0, 1, 7, NULL);
    ck_assert_mem_eq(t, va, sizeof va);
    free(t);
    induct_dataset_free(d);
    /* every file, no filter: x.txt joins (after sub2.py) */
    c = text_cfg(0, -1, INDUCT_SPLIT_BY_POSITION, 0.0, 65536, 0);
    ck_ok(induct_dataset_new_text_path(&d, tmpdir, NULL, &c));
    ck_ok(induct_dataset_split_tokens(d, INDUCT_SPLIT_TRAIN, &n));
    ck_assert_uint_eq(n, 1 + 2 + 3 + 2 + 10);
    induct_dataset_free(d);
    /* no matching file; a document split of one document */
    ck_assert_status(induct_dataset_new_text_path(&d, tmpdir, ".rs", &c), INDUCT_EFORMAT);
    c = text_cfg(0, -1, INDUCT_SPLIT_BY_DOCUMENT, 0.5, 65536, 0);
    ck_assert_status(induct_dataset_new_text_path(&d, tpath("a.py"), NULL, &c), INDUCT_EINVAL);
    ck_assert_status(induct_dataset_new_text(&d, "abc", 3, &c), INDUCT_EINVAL);
    rm_rf(tmpdir);
}
END_TEST

/* Windows at the edges: n = T+1 and T+2 tokens, train and eval. */
START_TEST(test_window_edges) {
    enum { T = 8 };
    unsigned char bytes[200];
    for (int i = 0; i < 200; i++) bytes[i] = (unsigned char)(i * 7 + 3);
    for (uint32_t extra = 0; extra <= 2; extra++) {
        uint32_t n = T + extra; /* T, T+1, T+2 */
        induct_text_config c = text_cfg(0, -1, INDUCT_SPLIT_BY_POSITION, 0.0, 65536, 1024);
        induct_dataset *d;
        ck_ok(induct_dataset_new_text(&d, bytes, n, &c));
        uint64_t cnt;
        ck_ok(induct_dataset_window_count(d, INDUCT_SPLIT_TRAIN, T, &cnt));
        ck_assert_uint_eq(cnt, extra); /* starts 0 .. n-T-1 */
        int32_t tok[16 * T], meta[16];
        if (extra == 0) {
            ck_assert_status(
                induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 16, T, tok, 16 * T, meta, 16),
                INDUCT_ERANGE);
        } else {
            int seen[2] = {0};
            for (uint64_t idx = 0; idx < 8; idx++) {
                ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, idx, 16, T, tok, 16 * T, meta,
                                           16));
                for (int b = 0; b < 16; b++) {
                    ck_assert_int_ge(meta[b], 0);
                    ck_assert_int_lt(meta[b], (int)extra);
                    seen[meta[b]]++;
                    for (int i = 0; i < T; i++) ck_assert_int_eq(tok[b * T + i], bytes[meta[b] + i]);
                }
            }
            ck_assert_int_gt(seen[0], 0);
            if (extra == 2) ck_assert_int_gt(seen[1], 0);
        }
        induct_dataset_free(d);
    }
    /* the held-out part: one cut, val = the last floor(100 f) of 100 tokens */
    for (uint32_t nval = T; nval <= T + 2; nval++) {
        for (uint32_t N = 0; N <= 1024; N += 1024) {
            induct_text_config c =
                text_cfg(0, -1, INDUCT_SPLIT_BY_POSITION, nval / 100.0, 0, N);
            induct_dataset *d;
            ck_ok(induct_dataset_new_text(&d, bytes, 100, &c));
            uint64_t n, cnt;
            ck_ok(induct_dataset_split_tokens(d, INDUCT_SPLIT_EVAL, &n));
            ck_assert_uint_eq(n, nval);
            ck_ok(induct_dataset_window_count(d, INDUCT_SPLIT_EVAL, T, &cnt));
            uint64_t want = nval <= T ? 0 : N == 0 ? (nval - 1) / T : nval - T;
            ck_assert_uint_eq(cnt, want);
            int32_t tok[4 * T], meta[4];
            int rc = induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, 4, T, tok, 4 * T, meta, 4);
            if (want == 0) {
                ck_assert_status(rc, INDUCT_ERANGE);
            } else {
                ck_ok(rc);
                for (int b = 0; b < 4; b++) {
                    uint64_t w = (uint64_t)b % want;
                    uint64_t start = N == 0 ? w * T : eval_order(w, want) * (nval - T) / want;
                    ck_assert_int_eq(meta[b], (int)start);
                    for (int i = 0; i < T; i++)
                        ck_assert_int_eq(tok[b * T + i], bytes[100 - nval + start + i]);
                }
            }
            induct_dataset_free(d);
        }
    }
}
END_TEST

/* Position split in blocks spread over the stream, windows across a seam, and the
 * fixed evaluation set: evenly spread, identical across seeds and calls. */
START_TEST(test_text_split_blocks) {
    enum { N = 1000 };
    unsigned char bytes[N];
    for (int i = 0; i < N; i++) bytes[i] = (unsigned char)((i * 31) ^ (i >> 3));
    induct_text_config c = text_cfg(0, -1, INDUCT_SPLIT_BY_POSITION, 0.25, 100, 0);
    induct_dataset *d;
    ck_ok(induct_dataset_new_text(&d, bytes, N, &c));
    uint64_t n;
    ck_ok(induct_dataset_split_tokens(d, INDUCT_SPLIT_EVAL, &n));
    ck_assert_uint_eq(n, 200); /* blocks 3 and 7 */
    ck_ok(induct_dataset_split_tokens(d, INDUCT_SPLIT_TRAIN, &n));
    ck_assert_uint_eq(n, 800);
    int32_t *t = batch_of(d, INDUCT_SPLIT_EVAL, 0, 1, 150, NULL);
    for (int i = 0; i < 150; i++)
        ck_assert_int_eq(t[i], bytes[i < 100 ? 300 + i : 700 + (i - 100)]);
    free(t);
    /* train windows never contain held-out bytes: train starts map to blocks 0-2,4-6,8-9 */
    int32_t meta[64];
    t = batch_of(d, INDUCT_SPLIT_TRAIN, 1, 64, 20, meta);
    for (int b = 0; b < 64; b++)
        for (int i = 0; i < 20; i++) {
            int s = meta[b] + i; /* logical -> physical */
            int phys = s < 300 ? s : s < 600 ? s + 100 : s + 200;
            ck_assert_int_eq(t[b * 20 + i], bytes[phys]);
        }
    free(t);
    induct_dataset_free(d);
    /* fixed eval windows: 1024 requested, S = n_val - T starts, E = min(1024, S) */
    unsigned char *big = malloc(100000);
    for (int i = 0; i < 100000; i++) big[i] = (unsigned char)(i * 13 + (i >> 8));
    induct_dataset *e1, *e2;
    c = text_cfg(0, -1, INDUCT_SPLIT_BY_POSITION, 0.1, 0, 1024);
    c.seed = 1;
    ck_ok(induct_dataset_new_text(&e1, big, 100000, &c));
    c.seed = 2;
    ck_ok(induct_dataset_new_text(&e2, big, 100000, &c));
    uint64_t E;
    ck_ok(induct_dataset_window_count(e1, INDUCT_SPLIT_EVAL, 64, &E));
    ck_assert_uint_eq(E, 1024);
    int32_t m1[100], m2[100];
    for (uint64_t idx = 0; idx < 11; idx++) {
        int32_t *a = batch_of(e1, INDUCT_SPLIT_EVAL, idx, 100, 64, m1);
        int32_t *b = batch_of(e2, INDUCT_SPLIT_EVAL, idx, 100, 64, m2);
        ck_assert_mem_eq(a, b, sizeof(int32_t) * 100 * 64);
        for (int r = 0; r < 100; r++) {
            uint64_t w = (idx * 100 + r) % 1024, S = 10000 - 64;
            ck_assert_int_eq(m1[r], (int)(eval_order(w, 1024) * S / 1024));
        }
        free(a), free(b);
    }
    /* the set reaches the end of the held-out part, and every prefix of the evaluation
     * order is spread over all of it: the first 64 windows leave no gap between
     * consecutive starts (or before the first / after the last) above 3 S / 64 */
    int32_t all[1024];
    int32_t *every = batch_of(e1, INDUCT_SPLIT_EVAL, 0, 1024, 64, all);
    int32_t mx = 0;
    for (int r = 0; r < 1024; r++) mx = all[r] > mx ? all[r] : mx;
    ck_assert_int_gt(mx, 10000 - 64 - 20);
    free(every);
    int32_t first[64];
    memcpy(first, all, sizeof first);
    qsort(first, 64, sizeof first[0], cmp_i32);
    int32_t S64 = 10000 - 64;
    ck_assert_int_le(first[0], 3 * S64 / 64);
    ck_assert_int_ge(first[63], S64 - 3 * S64 / 64);
    for (int r = 1; r < 64; r++) ck_assert_int_le(first[r] - first[r - 1], 3 * S64 / 64);
    induct_dataset_free(e1), induct_dataset_free(e2);
    free(big);
}
END_TEST

/* ---- token files ------------------------------------------------------------------ */

static int open_tf(const char *path, uint32_t format, uint32_t d_vocab, induct_dataset **d) {
    induct_token_file_config c;
    ck_ok(induct_token_file_config_init(&c, sizeof c));
    c.format = format;
    c.d_vocab = d_vocab;
    return induct_dataset_new_token_file(d, path, NULL, &c);
}

#define ck_tf_error(path, format, vocab, code, what)                                        \
    do {                                                                                   \
        induct_dataset *d_ = (induct_dataset *)1;                                          \
        ck_assert_status(open_tf(path, format, vocab, &d_), code);                         \
        ck_assert_ptr_null(d_);                                                            \
        ck_assert_msg(strstr(induct_last_error_message(), what) &&                         \
                          strstr(induct_last_error_message(), path),                       \
                      "message '%s' should name %s and '%s'", induct_last_error_message(), \
                      path, what);                                                         \
    } while (0)

START_TEST(test_token_file_errors) {
    make_tmpdir();
    uint16_t tok[10];
    for (int i = 0; i < 10; i++) tok[i] = (uint16_t)(100 + i);
    const char *p;
    /* truncated: shorter than the header; shorter than the header's count; odd raw size */
    p = tpath("short_header.bin");
    write_llmc(p, INDUCT_LLMC_MAGIC, 1, 10, tok, 10, 0, 500);
    ck_tf_error(p, INDUCT_TOKFILE_LLMC, 0, INDUCT_EFORMAT, "truncated");
    p = tpath("short_tokens.bin");
    write_llmc(p, INDUCT_LLMC_MAGIC, 1, 10, tok, 10, 0, 1024 + 2 * 5);
    ck_tf_error(p, INDUCT_TOKFILE_LLMC, 0, INDUCT_EFORMAT, "truncated");
    p = tpath("odd.bin");
    write_bytes(p, "abc", 3);
    ck_tf_error(p, INDUCT_TOKFILE_U16, 0, INDUCT_EFORMAT, "truncated");
    p = tpath("six.bin");
    write_bytes(p, "abcdef", 6);
    ck_tf_error(p, INDUCT_TOKFILE_U32, 0, INDUCT_EFORMAT, "truncated");
    /* wrong magic, wrong version */
    p = tpath("magic.bin");
    write_llmc(p, 20240521, 1, 10, tok, 10, 0, -1);
    ck_tf_error(p, INDUCT_TOKFILE_LLMC, 0, INDUCT_EFORMAT, "magic");
    p = tpath("version.bin");
    write_llmc(p, INDUCT_LLMC_MAGIC, 2, 10, tok, 10, 0, -1);
    ck_tf_error(p, INDUCT_TOKFILE_LLMC, 0, INDUCT_EFORMAT, "version");
    /* size mismatch: bytes beyond the header's count */
    p = tpath("long.bin");
    write_llmc(p, INDUCT_LLMC_MAGIC, 1, 8, tok, 10, 0, -1);
    ck_tf_error(p, INDUCT_TOKFILE_LLMC, 0, INDUCT_EFORMAT, "size mismatch");
    p = tpath("long2.bin");
    write_llmc(p, INDUCT_LLMC_MAGIC, 1, 10, tok, 10, 1, -1);
    ck_tf_error(p, INDUCT_TOKFILE_LLMC, 0, INDUCT_EFORMAT, "size mismatch");
    /* zero tokens */
    p = tpath("zero.bin");
    write_llmc(p, INDUCT_LLMC_MAGIC, 1, 0, tok, 0, 0, -1);
    ck_tf_error(p, INDUCT_TOKFILE_LLMC, 0, INDUCT_EFORMAT, "zero tokens");
    p = tpath("empty.bin");
    write_bytes(p, "", 0);
    ck_tf_error(p, INDUCT_TOKFILE_U16, 0, INDUCT_EFORMAT, "zero tokens");
    ck_tf_error(p, INDUCT_TOKFILE_U32, 0, INDUCT_EFORMAT, "zero tokens");
    /* token >= d_vocab (the largest id is 109) */
    p = tpath("good.bin");
    write_llmc(p, INDUCT_LLMC_MAGIC, 1, 10, tok, 10, 0, -1);
    ck_tf_error(p, INDUCT_TOKFILE_LLMC, 109, INDUCT_ERANGE, "d_vocab");
    induct_dataset *d;
    ck_ok(open_tf(p, INDUCT_TOKFILE_LLMC, 110, &d));
    induct_dataset_free(d);
    ck_ok(open_tf(p, INDUCT_TOKFILE_LLMC, 0, &d));
    ck_assert_uint_eq(induct_dataset_d_vocab(d), 110);
    induct_dataset_free(d);
    /* a uint32 id above INT32_MAX */
    p = tpath("huge.bin");
    unsigned char h[8];
    le32(h, 5);
    le32(h + 4, 0x80000000u);
    write_bytes(p, h, 8);
    ck_tf_error(p, INDUCT_TOKFILE_U32, 0, INDUCT_ERANGE, "INT32_MAX");
    /* missing file, unknown format */
    ck_tf_error(tpath("missing.bin"), INDUCT_TOKFILE_U16, 0, INDUCT_EIO, "missing.bin");
    ck_assert_status(open_tf(p, 7, 0, &d), INDUCT_EINVAL);
    size_t len;
    ck_assert_status(induct_token_file_read(tpath("magic.bin"), INDUCT_TOKFILE_LLMC, 0, NULL, 0,
                                            &len),
                     INDUCT_EFORMAT);
    rm_rf(tmpdir);
}
END_TEST

START_TEST(test_token_file_round_trip) {
    make_tmpdir();
    enum { N = 5000 };
    int32_t *tok = malloc(N * sizeof *tok), *back = malloc(N * sizeof *back);
    static const uint32_t formats[] = {INDUCT_TOKFILE_U16, INDUCT_TOKFILE_U32, INDUCT_TOKFILE_LLMC};
    for (int f = 0; f < 3; f++) {
        uint32_t fmt = formats[f];
        uint32_t V = fmt == INDUCT_TOKFILE_U32 ? 100000 : 65536;
        tu_tokens(tok, N, V, 77 + f);
        tok[0] = (int32_t)(V - 1);
        const char *p = tpath("rt.bin");
        ck_ok(induct_token_file_write(p, fmt, tok, N));
        /* the bytes on disk, decoded here */
        FILE *fh = fopen(p, "rb");
        ck_assert_ptr_nonnull(fh);
        unsigned char *raw = malloc(1024 + 4 * N);
        size_t got = fread(raw, 1, 1024 + 4 * N, fh);
        fclose(fh);
        size_t hdr = fmt == INDUCT_TOKFILE_LLMC ? 1024 : 0, w = fmt == INDUCT_TOKFILE_U32 ? 4 : 2;
        ck_assert_uint_eq(got, hdr + w * N);
        if (hdr) {
            ck_assert_uint_eq(raw[0] | raw[1] << 8 | raw[2] << 16 | (uint32_t)raw[3] << 24,
                              20240520u);
            ck_assert_uint_eq(raw[4], 1);
            ck_assert_uint_eq(raw[8] | raw[9] << 8, N);
            for (int i = 12; i < 1024; i++) ck_assert_uint_eq(raw[i], 0);
        }
        for (int i = 0; i < N; i++) {
            uint32_t v = 0;
            for (size_t b = 0; b < w; b++) v |= (uint32_t)raw[hdr + w * i + b] << (8 * b);
            ck_assert_uint_eq(v, (uint32_t)tok[i]);
        }
        free(raw);
        size_t len = 0;
        ck_assert_status(induct_token_file_read(p, fmt, 0, NULL, 0, &len), INDUCT_EBUFSIZE);
        ck_assert_uint_eq(len, N);
        ck_ok(induct_token_file_read(p, fmt, V, back, N, &len));
        ck_assert_mem_eq(back, tok, sizeof(int32_t) * N);
        induct_dataset *d;
        ck_ok(open_tf(p, fmt, 0, &d));
        ck_assert_uint_eq(induct_dataset_d_vocab(d), V);
        int32_t meta[8];
        int32_t *t = batch_of(d, INDUCT_SPLIT_TRAIN, 2, 8, 33, meta);
        for (int b = 0; b < 8; b++)
            for (int i = 0; i < 33; i++) ck_assert_int_eq(t[b * 33 + i], tok[meta[b] + i]);
        free(t);
        induct_dataset_free(d);
    }
    /* a separate validation file */
    induct_token_file_config c;
    ck_ok(induct_token_file_config_init(&c, sizeof c));
    int32_t small[40];
    for (int i = 0; i < 40; i++) small[i] = 1000 + i;
    ck_ok(induct_token_file_write(tpath("train.bin"), INDUCT_TOKFILE_U16, tok, 300));
    ck_ok(induct_token_file_write(tpath("val.bin"), INDUCT_TOKFILE_U16, small, 40));
    c.n_eval_windows = 0;
    induct_dataset *d;
    ck_ok(induct_dataset_new_token_file(&d, tpath("train.bin"), tpath("val.bin"), &c));
    uint64_t n;
    ck_ok(induct_dataset_split_tokens(d, INDUCT_SPLIT_TRAIN, &n));
    ck_assert_uint_eq(n, 300);
    ck_ok(induct_dataset_split_tokens(d, INDUCT_SPLIT_EVAL, &n));
    ck_assert_uint_eq(n, 40);
    int32_t *t = batch_of(d, INDUCT_SPLIT_EVAL, 0, 3, 13, NULL); /* (40-1)/13 = 3 windows */
    for (int i = 0; i < 39; i++) ck_assert_int_eq(t[i], 1000 + i);
    free(t);
    induct_dataset_free(d);
    /* refusals: ids that do not fit, nothing written, the old file intact */
    const char *p = tpath("keep.bin");
    ck_ok(induct_token_file_write(p, INDUCT_TOKFILE_U16, small, 40));
    int32_t bad[3] = {1, 65536, 2};
    ck_assert_status(induct_token_file_write(p, INDUCT_TOKFILE_U16, bad, 3), INDUCT_ERANGE);
    ck_assert_status(induct_token_file_write(p, INDUCT_TOKFILE_LLMC, bad, 3), INDUCT_ERANGE);
    bad[1] = -1;
    ck_assert_status(induct_token_file_write(p, INDUCT_TOKFILE_U32, bad, 3), INDUCT_ERANGE);
    ck_assert_status(induct_token_file_write(p, INDUCT_TOKFILE_U16, bad, 0), INDUCT_EINVAL);
    size_t len;
    ck_ok(induct_token_file_read(p, INDUCT_TOKFILE_U16, 0, back, N, &len));
    ck_assert_uint_eq(len, 40);
    ck_assert_mem_eq(back, small, sizeof small);
    ck_assert_status(induct_token_file_write(tpath("nodir/x.bin"), INDUCT_TOKFILE_U16, small, 40),
                     INDUCT_EIO);
    /* no temporary file is left behind */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", tmpdir);
    ck_assert_int_ne(system(cmd), 0);
    free(tok), free(back);
    rm_rf(tmpdir);
}
END_TEST

/* ---- bounded residency -------------------------------------------------------------- */

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%ld %ld", &size, &res), 2);
    fclose(f);
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static long peak_kib(void) { /* VmHWM since the last reset */
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld", &v) == 1) break;
    fclose(f);
    return v;
}

static void reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_gt(fputs("5", f), -1);
    ck_assert_int_eq(fclose(f), 0);
}

/* Stream every window of a 64 MiB file twice (128 MiB read) through the eval split with
 * the given resident limit; return the growth of peak RSS in KiB. */
static long stream_growth(const char *path, uint64_t limit) {
    enum { T = 4096, B = 64 };
    int32_t *buf = malloc((size_t)B * T * sizeof *buf);
    memset(buf, 0, (size_t)B * T * sizeof *buf);
    induct_token_file_config c;
    ck_ok(induct_token_file_config_init(&c, sizeof c));
    c.n_eval_windows = 0;
    c.resident_limit = limit;
    long base = rss_kib();
    reset_peak();
    induct_dataset *d;
    ck_ok(induct_dataset_new_token_file(&d, tpath("small.bin"), path, &c));
    uint64_t E;
    ck_ok(induct_dataset_window_count(d, INDUCT_SPLIT_EVAL, T, &E));
    ck_assert_uint_eq(E, ((32u << 20) - 1) / T);
    uint64_t batches = 2 * (E + B - 1) / B;
    for (uint64_t i = 0; i < batches; i++) {
        ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, i, B, T, buf, (size_t)B * T, NULL, 0));
        uint64_t w = (i * B) % E; /* window w starts at token w*T: id (w*T) & 0xffff */
        ck_assert_int_eq(buf[0], (int32_t)((w * T) & 0xffff));
    }
    long growth = peak_kib() - base;
    induct_dataset_free(d);
    free(buf);
    return growth;
}

/* A 64 MiB token file whose token i is i & 0xffff (32 Mi uint16 tokens). */
static const char *write_big_file(void) {
    const char *p = tpath("big.bin");
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    static uint16_t chunk[1 << 16];
    for (int i = 0; i < (1 << 16); i++) chunk[i] = (uint16_t)i; /* little-endian host */
    for (int k = 0; k < 512; k++) ck_assert_uint_eq(fwrite(chunk, 2, 1 << 16, f), 1 << 16);
    ck_assert_int_eq(fclose(f), 0);
    int32_t small[100] = {0};
    ck_ok(induct_token_file_write(tpath("small.bin"), INDUCT_TOKFILE_U16, small, 100));
    return p;
}

START_TEST(test_token_file_resident_memory) {
    make_tmpdir();
    const char *p = write_big_file();
    long bounded = stream_growth(p, (uint64_t)8 << 20);
    ck_assert_msg(bounded < 16 * 1024, "peak RSS grew by %ld KiB with an 8 MiB limit", bounded);
    rm_rf(tmpdir);
}
END_TEST

static long rss_file_kib(void) { /* file-backed resident memory of this process */
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssFile: %ld", &v) == 1) break;
    fclose(f);
    ck_assert_int_ge(v, 0);
    return v;
}

/* Random training windows over a file 16 times larger than resident_limit: the
 * file-backed resident memory stays below the limit. A page cache granule can be large
 * (fault-around, 2 MiB folios), so a reader that counted only the bytes it copied out
 * of a mapping would leave most of the file resident; the control below shows that this
 * measurement sees exactly that. */
START_TEST(test_token_file_resident_random_windows) {
    enum { T = 256, B = 8, BATCHES = 2000 };
    const long limit_kib = 4096;
    make_tmpdir();
    const char *p = write_big_file();
    induct_token_file_config c;
    ck_ok(induct_token_file_config_init(&c, sizeof c));
    c.resident_limit = (uint64_t)limit_kib << 10;
    int32_t buf[B * T], meta[B];
    long base = rss_file_kib(), peak = base;
    induct_dataset *d;
    ck_ok(induct_dataset_new_token_file(&d, p, tpath("small.bin"), &c));
    if (rss_file_kib() > peak) peak = rss_file_kib();
    for (int i = 0; i < BATCHES; i++) {
        ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, (uint64_t)i, B, T, buf, B * T, meta, B));
        for (int b = 0; b < B; b++) /* the window that starts at token meta[b] */
            ck_assert_int_eq(buf[b * T + T - 1], (meta[b] + T - 1) & 0xffff);
        long r = rss_file_kib();
        if (r > peak) peak = r;
    }
    induct_dataset_free(d);
    ck_assert_msg(peak - base < limit_kib,
                  "file-backed RSS grew by %ld KiB over %d random windows with a %ld KiB "
                  "resident_limit",
                  peak - base, BATCHES * B, limit_kib);
    /* control: the same number of random windows read through a mapping of the file */
    int fd = open(p, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    size_t len = (size_t)64 << 20;
    const volatile unsigned char *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    ck_assert(map != MAP_FAILED);
    close(fd);
    base = rss_file_kib();
    uint64_t st = 12345, sum = 0;
    for (int i = 0; i < BATCHES * B; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t off = (size_t)(st >> 20) % (len - 2 * T);
        for (size_t j = 0; j < 2 * T; j += 64) sum += map[off + j];
    }
    long mapped = rss_file_kib() - base;
    munmap((void *)map, len);
    ck_assert_msg(mapped > 16 * 1024,
                  "control: random windows through a mapping should make much of the file "
                  "resident (grew %ld KiB, checksum %llu)",
                  mapped, (unsigned long long)sum);
    rm_rf(tmpdir);
}
END_TEST

/* Concurrent readers of one dataset (with page releases going on) see the same batches
 * as a single reader. */
typedef struct reader {
    const induct_dataset *d;
    int32_t *out;
} reader;

static void *read_batches(void *arg) {
    reader *r = arg;
    for (uint64_t i = 0; i < 50; i++)
        if (induct_dataset_batch(r->d, INDUCT_SPLIT_TRAIN, i, 4, 256, r->out + i * 1024, 1024,
                                 NULL, 0) != INDUCT_OK)
            return (void *)1;
    return NULL;
}

/* A token file truncated while the dataset lives: INDUCT_EIO naming the file, no crash
 * (a mapping would have raised SIGBUS). */
START_TEST(test_token_file_truncated_while_open) {
    make_tmpdir();
    enum { N = 1 << 16 };
    int32_t *tok = malloc(N * sizeof *tok), buf[4 * 64];
    tu_tokens(tok, N, 1000, 6);
    ck_ok(induct_token_file_write(tpath("t.bin"), INDUCT_TOKFILE_U16, tok, N));
    induct_token_file_config c;
    ck_ok(induct_token_file_config_init(&c, sizeof c));
    induct_dataset *d;
    ck_ok(induct_dataset_new_token_file(&d, tpath("t.bin"), NULL, &c));
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 4, 64, buf, 4 * 64, NULL, 0));
    ck_assert_int_eq(truncate(tpath("t.bin"), 1000), 0);
    int rc = INDUCT_OK;
    for (uint64_t i = 0; i < 20 && rc == INDUCT_OK; i++)
        rc = induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, i, 4, 64, buf, 4 * 64, NULL, 0);
    ck_assert_status(rc, INDUCT_EIO);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "t.bin"));
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "truncated"));
    induct_dataset_free(d);
    free(tok);
    rm_rf(tmpdir);
}
END_TEST

START_TEST(test_token_file_threads) {
    make_tmpdir();
    enum { N = 1 << 20 };
    int32_t *tok = malloc(N * sizeof *tok);
    tu_tokens(tok, N, 65536, 5);
    ck_ok(induct_token_file_write(tpath("t.bin"), INDUCT_TOKFILE_U16, tok, N));
    induct_token_file_config c;
    ck_ok(induct_token_file_config_init(&c, sizeof c));
    c.resident_limit = 4096; /* release after every window */
    induct_dataset *d;
    ck_ok(induct_dataset_new_token_file(&d, tpath("t.bin"), NULL, &c));
    reader r[3];
    pthread_t th[2];
    for (int i = 0; i < 3; i++) r[i] = (reader){d, malloc(50 * 1024 * sizeof(int32_t))};
    read_batches(&r[0]);
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, read_batches, &r[i + 1]), 0);
    for (int i = 0; i < 2; i++) {
        void *res;
        ck_assert_int_eq(pthread_join(th[i], &res), 0);
        ck_assert_ptr_null(res);
        ck_assert_mem_eq(r[i + 1].out, r[0].out, 50 * 1024 * sizeof(int32_t));
    }
    for (int i = 0; i < 3; i++) free(r[i].out);
    induct_dataset_free(d);
    free(tok);
    rm_rf(tmpdir);
}
END_TEST

START_TEST(test_configs) {
    induct_text_config t;
    ck_ok(induct_text_config_init(&t, sizeof t));
    ck_assert_uint_eq(t.size, sizeof t);
    ck_assert_int_eq(t.separator, -1);
    ck_assert_uint_eq(t.n_eval_windows, 1024);
    ck_assert_uint_eq(t.block_tokens, 65536);
    ck_assert_double_eq(t.val_fraction, 0.1);
    induct_dataset *d;
    t.val_fraction = 1.0;
    ck_assert_status(induct_dataset_new_text(&d, "ab", 2, &t), INDUCT_EINVAL);
    t.val_fraction = NAN;
    ck_assert_status(induct_dataset_new_text(&d, "ab", 2, &t), INDUCT_EINVAL);
    ck_ok(induct_text_config_init(&t, sizeof t));
    t.separator = 256;
    ck_assert_status(induct_dataset_new_text(&d, "ab", 2, &t), INDUCT_EINVAL);
    ck_ok(induct_text_config_init(&t, sizeof t));
    t.size = sizeof t - 8;
    ck_assert_status(induct_dataset_new_text(&d, "ab", 2, &t), INDUCT_EABI);
    induct_token_file_config f;
    ck_ok(induct_token_file_config_init(&f, sizeof f));
    ck_assert_uint_eq(f.resident_limit, 64u << 20);
    ck_assert_uint_eq(f.format, INDUCT_TOKFILE_U16);
    /* a longer struct with a zero tail is accepted, a non-zero tail refused */
    struct {
        induct_kv_config c;
        uint64_t extra;
    } big;
    ck_ok(induct_kv_config_init(&big.c, sizeof big));
    ck_assert_uint_eq(big.extra, 0);
    ck_ok(induct_dataset_new_kv(&d, &big.c));
    induct_dataset_free(d);
    big.extra = 1;
    ck_assert_status(induct_dataset_new_kv(&d, &big.c), INDUCT_EABI);
    uint64_t n;
    d = kv_new(8, 0, 0, 0, -1, 0, 0);
    ck_assert_status(induct_dataset_split_tokens(d, 0, &n), INDUCT_EINVAL);
    ck_assert_status(induct_dataset_window_count(d, 0, 8, &n), INDUCT_EINVAL);
    induct_dataset_free(d);
}
END_TEST

/* The BOS rule: every kind of dataset reports its BOS, and the probe built for it has
 * that BOS and a token range that excludes it. */
static void check_bos(const induct_dataset *d, int32_t bos, uint32_t lo, uint32_t hi) {
    int32_t b = 7;
    ck_ok(induct_dataset_bos(d, &b));
    ck_assert_int_eq(b, bos);
    induct_probe_config pc;
    ck_ok(induct_probe_config_for_dataset(&pc, sizeof pc, d));
    ck_assert_int_eq(pc.bos, bos);
    ck_assert_uint_eq(pc.token_lo, lo);
    ck_assert_uint_eq(pc.token_hi, hi);
    induct_probe_config def;
    ck_ok(induct_probe_config_init(&def, sizeof def));
    ck_assert_uint_eq(pc.n_seq, def.n_seq); /* the rest are the defaults */
    ck_assert_uint_eq(pc.block_len, def.block_len);
    ck_assert_uint_eq(pc.n_repeats, def.n_repeats);
    ck_assert_uint_eq(pc.copying_bos, def.copying_bos);
    ck_assert_uint_eq(pc.seed, def.seed);
}

START_TEST(test_bos_rule) {
    induct_dataset *d;
    induct_rrt_config rc;
    ck_ok(induct_rrt_config_init(&rc, sizeof rc));
    ck_ok(induct_dataset_new_rrt(&d, &rc)); /* default: no BOS, tokens [0, 64) */
    check_bos(d, -1, 0, 64);
    induct_dataset_free(d);
    rc.bos = 0;
    rc.token_lo = 1;
    rc.token_hi = 60;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    check_bos(d, 0, 1, 60);
    induct_dataset_free(d);
    induct_text_config tc;
    ck_ok(induct_text_config_init(&tc, sizeof tc));
    static const char text[] = "abcabcabcabcabcabcabcabcabcabcabcabcabcabc";
    ck_ok(induct_dataset_new_text(&d, text, sizeof text - 1, &tc)); /* default: none */
    check_bos(d, -1, 0, 256);
    induct_dataset_free(d);
    tc.bos = 1;
    ck_ok(induct_dataset_new_text(&d, text, sizeof text - 1, &tc));
    check_bos(d, INDUCT_TEXT_BOS, 0, 256);
    int32_t row[8];
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 1, 8, row, 8, NULL, 0));
    induct_dataset_free(d);
    int32_t toks[100];
    tu_tokens(toks, 100, 50, 1);
    ck_ok(induct_dataset_new_tokens(&d, toks, 100, 50, 0));
    check_bos(d, -1, 0, 50);
    induct_dataset_free(d);
    induct_kv_config kc;
    ck_ok(induct_kv_config_init(&kc, sizeof kc));
    ck_ok(induct_dataset_new_kv(&d, &kc));
    check_bos(d, -1, 0, induct_dataset_d_vocab(d));
    int32_t b;
    ck_assert_status(induct_dataset_bos(NULL, &b), INDUCT_EINVAL);
    ck_assert_status(induct_dataset_bos(d, NULL), INDUCT_EINVAL);
    induct_probe_config pc;
    ck_assert_status(induct_probe_config_for_dataset(&pc, sizeof pc, NULL), INDUCT_EINVAL);
    ck_assert_status(induct_probe_config_for_dataset(NULL, sizeof pc, d), INDUCT_EINVAL);
    ck_assert_status(induct_probe_config_for_dataset(&pc, 8, d), INDUCT_EABI);
    induct_dataset_free(d);
    /* a probe built for the text-with-BOS dataset starts with 256 and holds bytes only */
    induct_model_config mc;
    tu_tiny_config(&mc);
    mc.d_vocab = 257;
    mc.n_ctx = 128;
    induct_model *m;
    ck_ok(induct_model_new(&m, &mc));
    ck_ok(induct_dataset_new_text(&d, text, sizeof text - 1, &tc));
    ck_ok(induct_probe_config_for_dataset(&pc, sizeof pc, d));
    static int32_t pt[10 * 101];
    size_t len;
    ck_ok(induct_analysis_probe_tokens(m, &pc, 0, pt, 10 * 101, &len));
    ck_assert_uint_eq(len, 10 * 101);
    for (size_t i = 0; i < len; i++)
        ck_assert_int_eq(pt[i] == INDUCT_TEXT_BOS, i % 101 == 0);
    induct_model_free(m);
    induct_dataset_free(d);
}
END_TEST

/* ---- repeated-span curriculum (induct_dataset_set_repeats) -------------------- */

/* A token file of N distinct ids (0 … N−1), split by position in blocks of 1000 (so
 * the train split has several segments and the eval split is not empty). */
static induct_dataset *distinct_tf(uint32_t N, uint64_t seed) {
    int32_t *tok = malloc((size_t)N * sizeof *tok);
    for (uint32_t i = 0; i < N; i++) tok[i] = (int32_t)i;
    ck_ok(induct_token_file_write(tpath("distinct.bin"), INDUCT_TOKFILE_U32, tok, N));
    free(tok);
    induct_token_file_config c;
    ck_ok(induct_token_file_config_init(&c, sizeof c));
    c.format = INDUCT_TOKFILE_U32;
    c.block_tokens = 1000;
    c.seed = seed;
    induct_dataset *d;
    ck_ok(induct_dataset_new_token_file(&d, tpath("distinct.bin"), NULL, &c));
    return d;
}

/* The repeat of `row` against the plain window `base` (all ids distinct, so every
 * copied token differs from the one it replaces): 0 if the rows are equal; else checks
 * that they differ on exactly one run [b, b+L) with row[b+i] = base[a+i], a + L <= b,
 * b + L <= T, and returns 1 with a, b, L. */
static int find_repeat(const int32_t *row, const int32_t *base, uint32_t T, uint32_t *a,
                       uint32_t *b, uint32_t *L) {
    uint32_t t = 0;
    while (t < T && row[t] == base[t]) t++;
    if (t == T) return 0;
    uint32_t e = t;
    while (e < T && row[e] != base[e]) e++;
    for (uint32_t u = e; u < T; u++) ck_assert_int_eq(row[u], base[u]); /* one run only */
    *b = t;
    *L = e - t;
    uint32_t src = T;
    for (uint32_t u = 0; u < T; u++)
        if (base[u] == row[t]) src = u;
    ck_assert_uint_lt(src, T); /* the copy comes from the same window */
    *a = src;
    ck_assert_uint_le(src + *L, t);
    ck_assert_uint_le(t + *L, T);
    for (uint32_t i = 0; i < *L; i++) ck_assert_int_eq(row[t + i], base[src + i]);
    return 1;
}

/* Draws rows [0, rows) of train batches of `per` rows from d (with repeats) and from
 * plain (the same data and seed without), checks the window starts and the shape of
 * every repeat, and counts rows with a repeat and, if hist_L is given, their lengths. */
static uint32_t count_repeats(const induct_dataset *d, const induct_dataset *plain, uint32_t T,
                              uint32_t rows, uint32_t min_len, uint32_t max_len,
                              uint32_t *hist_L, uint32_t *hist_ab) {
    enum { PER = 200 };
    int32_t m1[PER], m2[PER];
    uint32_t n_rep = 0;
    for (uint32_t k = 0; k * PER < rows; k++) {
        int32_t *x = batch_of(d, INDUCT_SPLIT_TRAIN, 1000 + k, PER, T, m1);
        int32_t *y = batch_of(plain, INDUCT_SPLIT_TRAIN, 1000 + k, PER, T, m2);
        ck_assert_mem_eq(m1, m2, sizeof m1); /* the window starts are unchanged */
        for (uint32_t r = 0; r < PER && k * PER + r < rows; r++) {
            uint32_t a, b, L;
            if (!find_repeat(x + (size_t)r * T, y + (size_t)r * T, T, &a, &b, &L)) continue;
            n_rep++;
            ck_assert_uint_ge(L, min_len);
            ck_assert_uint_le(L, max_len);
            ck_assert_uint_le(L, T / 2);
            if (hist_L) hist_L[L]++;
            if (hist_ab) hist_ab[a * T + b]++;
        }
        free(x);
        free(y);
    }
    return n_rep;
}

START_TEST(test_repeats_off_is_today) {
    make_tmpdir();
    induct_dataset *d = distinct_tf(20000, 5), *plain = distinct_tf(20000, 5);
    /* set, then turned off again: every batch is the plain one, bit for bit */
    ck_ok(induct_dataset_set_repeats(d, 1.0, 4, 16));
    ck_ok(induct_dataset_set_repeats(d, 0.0, 4, 16));
    for (uint32_t split = 0; split < 2; split++)
        for (uint64_t i = 0; i < 5; i++) {
            int32_t m1[16], m2[16];
            int32_t *x = batch_of(d, split, i, 16, 40, m1), *y = batch_of(plain, split, i, 16, 40, m2);
            ck_assert_mem_eq(x, y, 16 * 40 * sizeof *x);
            ck_assert_mem_eq(m1, m2, sizeof m1);
            free(x);
            free(y);
        }
    /* off, a window too short for min_len is no error */
    ck_ok(induct_dataset_set_repeats(d, 0.0, 100, 100));
    free(batch_of(d, INDUCT_SPLIT_TRAIN, 0, 2, 10, NULL));
    induct_dataset_free(d);
    induct_dataset_free(plain);
    rm_rf(tmpdir);
}
END_TEST

START_TEST(test_repeats_every_row) {
    make_tmpdir();
    induct_dataset *d = distinct_tf(20000, 6), *plain = distinct_tf(20000, 6);
    ck_ok(induct_dataset_set_repeats(d, 1.0, 3, 20));
    /* fraction 1: all 4000 rows carry one repeat of 3 … 20 tokens, the rest of the row
     * is the plain window (checked in find_repeat), the starts are the same */
    uint32_t hist[64] = {0};
    ck_assert_uint_eq(count_repeats(d, plain, 64, 4000, 3, 20, hist, NULL), 4000);
    /* T = 30 caps the span at 15, and 15 occurs */
    uint32_t hist30[64] = {0};
    ck_assert_uint_eq(count_repeats(d, plain, 30, 2000, 3, 15, hist30, NULL), 2000);
    ck_assert_uint_gt(hist30[15], 0);
    /* the eval split is never changed */
    for (uint64_t i = 0; i < 3; i++) {
        int32_t *x = batch_of(d, INDUCT_SPLIT_EVAL, i, 32, 64, NULL);
        int32_t *y = batch_of(plain, INDUCT_SPLIT_EVAL, i, 32, 64, NULL);
        ck_assert_mem_eq(x, y, 32 * 64 * sizeof *x);
        free(x);
        free(y);
    }
    /* row b does not depend on the batch size; same seed, same rows; another seed differs */
    int32_t *big = batch_of(d, INDUCT_SPLIT_TRAIN, 7, 50, 64, NULL);
    int32_t *small = batch_of(d, INDUCT_SPLIT_TRAIN, 7, 5, 64, NULL);
    ck_assert_mem_eq(big, small, 5 * 64 * sizeof *big);
    induct_dataset *d2 = distinct_tf(20000, 6), *d3 = distinct_tf(20000, 7);
    ck_ok(induct_dataset_set_repeats(d2, 1.0, 3, 20));
    ck_ok(induct_dataset_set_repeats(d3, 1.0, 3, 20));
    int32_t *again = batch_of(d2, INDUCT_SPLIT_TRAIN, 7, 50, 64, NULL);
    int32_t *other = batch_of(d3, INDUCT_SPLIT_TRAIN, 7, 50, 64, NULL);
    ck_assert_mem_eq(big, again, 50 * 64 * sizeof *big);
    ck_assert(memcmp(big, other, 50 * 64 * sizeof *big) != 0);
    free(big);
    free(small);
    free(again);
    free(other);
    induct_dataset_free(d2);
    induct_dataset_free(d3);
    /* a text dataset takes the curriculum too; its eval split stays as it was */
    induct_text_config tc;
    ck_ok(induct_text_config_init(&tc, sizeof tc));
    tc.block_tokens = 500;
    char text[6000];
    for (int i = 0; i < 6000; i++) text[i] = (char)('a' + (i * 7 + i / 26) % 26);
    induct_dataset *t1, *t2;
    ck_ok(induct_dataset_new_text(&t1, text, sizeof text, &tc));
    ck_ok(induct_dataset_new_text(&t2, text, sizeof text, &tc));
    ck_ok(induct_dataset_set_repeats(t1, 1.0, 8, 8));
    int32_t *x = batch_of(t1, INDUCT_SPLIT_TRAIN, 0, 8, 64, NULL);
    int32_t *y = batch_of(t2, INDUCT_SPLIT_TRAIN, 0, 8, 64, NULL);
    ck_assert(memcmp(x, y, 8 * 64 * sizeof *x) != 0);
    free(x);
    free(y);
    x = batch_of(t1, INDUCT_SPLIT_EVAL, 0, 8, 64, NULL);
    y = batch_of(t2, INDUCT_SPLIT_EVAL, 0, 8, 64, NULL);
    ck_assert_mem_eq(x, y, 8 * 64 * sizeof *x);
    free(x);
    free(y);
    induct_dataset_free(t1);
    induct_dataset_free(t2);
    induct_dataset_free(d);
    induct_dataset_free(plain);
    rm_rf(tmpdir);
}
END_TEST

START_TEST(test_repeats_distribution) {
    make_tmpdir();
    induct_dataset *d = distinct_tf(20000, 8), *plain = distinct_tf(20000, 8);
    /* fraction 0.25 over n = 4000 rows: the count is Binomial(4000, 1/4), mean 1000,
     * sd √(4000·¼·¾) = 27.39; bound: 4 sd = 109.5 (fixed before running) */
    ck_ok(induct_dataset_set_repeats(d, 0.25, 2, 5));
    uint32_t hist[64] = {0};
    uint32_t n = count_repeats(d, plain, 48, 4000, 2, 5, hist, NULL);
    ck_assert_msg(fabs((double)n - 1000.0) <= 4.0 * sqrt(4000 * 0.25 * 0.75),
                  "%u of 4000 rows carry a repeat", n);
    /* L uniform on {2 … 5}: each count is Binomial(n, 1/4) */
    for (uint32_t L = 2; L <= 5; L++)
        ck_assert_msg(fabs(hist[L] - n / 4.0) <= 4.0 * sqrt(n * 0.25 * 0.75),
                      "L = %u: %u of %u", L, hist[L], n);
    /* (a, b) uniform over the pairs: T = 16, L = 4 gives M = T − 2L = 8 and
     * (M+1)(M+2)/2 = 45 pairs; over 9000 rows each count is Binomial(9000, 1/45),
     * mean 200, sd √(9000·(1/45)·(44/45)) = 13.98; bound 4 sd */
    ck_ok(induct_dataset_set_repeats(d, 1.0, 4, 4));
    uint32_t *ab = calloc(16 * 16, sizeof *ab);
    ck_assert_uint_eq(count_repeats(d, plain, 16, 9000, 4, 4, NULL, ab), 9000);
    uint32_t cells = 0;
    for (uint32_t a = 0; a < 16; a++)
        for (uint32_t b = 0; b < 16; b++) {
            if (a + 4 <= b && b + 4 <= 16) {
                cells++;
                ck_assert_msg(fabs(ab[a * 16 + b] - 200.0) <= 4.0 * sqrt(9000.0 / 45 * 44 / 45),
                              "pair (%u, %u): %u of 9000", a, b, ab[a * 16 + b]);
            } else {
                ck_assert_uint_eq(ab[a * 16 + b], 0);
            }
        }
    ck_assert_uint_eq(cells, 45);
    free(ab);
    induct_dataset_free(d);
    induct_dataset_free(plain);
    rm_rf(tmpdir);
}
END_TEST

START_TEST(test_repeats_errors) {
    make_tmpdir();
    induct_dataset *d = distinct_tf(20000, 9), *plain = distinct_tf(20000, 9);
    ck_assert_status(induct_dataset_set_repeats(NULL, 0.5, 1, 2), INDUCT_EINVAL);
    const double bad_f[] = {-0.01, 1.01, NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 5; i++) {
        ck_assert_status(induct_dataset_set_repeats(d, bad_f[i], 4, 8), INDUCT_EINVAL);
        ck_assert(strstr(induct_last_error_message(), "fraction"));
    }
    ck_assert_status(induct_dataset_set_repeats(d, 0.5, 0, 8), INDUCT_EINVAL);
    ck_assert(strstr(induct_last_error_message(), "min_len"));
    ck_assert_status(induct_dataset_set_repeats(d, 0.5, 9, 8), INDUCT_EINVAL);
    ck_assert(strstr(induct_last_error_message(), "max_len"));
    /* a refused call changes nothing: still the plain batches */
    int32_t *x = batch_of(d, INDUCT_SPLIT_TRAIN, 3, 16, 40, NULL);
    int32_t *y = batch_of(plain, INDUCT_SPLIT_TRAIN, 3, 16, 40, NULL);
    ck_assert_mem_eq(x, y, 16 * 40 * sizeof *x);
    free(x);
    free(y);
    /* edges: fraction 0 and 1, min = max = 1 */
    ck_ok(induct_dataset_set_repeats(d, 1.0, 1, 1));
    ck_assert_uint_eq(count_repeats(d, plain, 2, 400, 1, 1, NULL, NULL), 400);
    /* with repeats on, seq_len < 2·min_len is refused for the train split only */
    ck_ok(induct_dataset_set_repeats(d, 0.5, 10, 12));
    int32_t buf[19 * 2];
    ck_assert_status(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 2, 19, buf, 38, NULL, 0),
                     INDUCT_ERANGE);
    ck_assert(strstr(induct_last_error_message(), "min_len 10"));
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 1, 20, buf, 38, NULL, 0));
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, 2, 19, buf, 38, NULL, 0));
    /* other kinds are refused */
    induct_rrt_config rc;
    ck_ok(induct_rrt_config_init(&rc, sizeof rc));
    induct_dataset *r;
    ck_ok(induct_dataset_new_rrt(&r, &rc));
    ck_assert_status(induct_dataset_set_repeats(r, 0.5, 4, 8), INDUCT_ENOTSUP);
    ck_assert(strstr(induct_last_error_message(), "text and token-file"));
    induct_dataset_free(r);
    induct_dataset *kv = kv_new(64, 0, 64, 4, 19, 0, 1);
    ck_assert_status(induct_dataset_set_repeats(kv, 0.5, 4, 8), INDUCT_ENOTSUP);
    induct_dataset_free(kv);
    int32_t arr[100];
    for (int i = 0; i < 100; i++) arr[i] = i;
    induct_dataset *ta;
    ck_ok(induct_dataset_new_tokens(&ta, arr, 100, 100, 1));
    ck_assert_status(induct_dataset_set_repeats(ta, 0.5, 4, 8), INDUCT_ENOTSUP);
    induct_dataset_free(ta);
    induct_dataset_free(d);
    induct_dataset_free(plain);
    rm_rf(tmpdir);
}
END_TEST

int main(void) {
    Suite *s = suite_create("datasets");
    TCase *kv = tcase_create("kv");
    tcase_add_test(kv, test_kv_invariants);
    tcase_add_test(kv, test_kv_determinism);
    tcase_add_test(kv, test_kv_errors);
    tcase_add_test(kv, test_kv_ceiling_exact);
    tcase_add_test(kv, test_kv_ceiling_monte_carlo);
    tcase_add_test(kv, test_kv_analysis_matches_forward);
    tcase_add_test(kv, test_kv_analysis_closed_form);
    tcase_add_test(kv, test_kv_training_objective);
    suite_add_tcase(s, kv);
    TCase *tx = tcase_create("text");
    tcase_add_test(tx, test_text_files);
    tcase_add_test(tx, test_text_directory);
    tcase_add_test(tx, test_window_edges);
    tcase_add_test(tx, test_text_split_blocks);
    tcase_add_test(tx, test_configs);
    tcase_add_test(tx, test_bos_rule);
    suite_add_tcase(s, tx);
    TCase *tf = tcase_create("token files");
    tcase_add_test(tf, test_token_file_errors);
    tcase_add_test(tf, test_token_file_round_trip);
    tcase_add_test(tf, test_token_file_resident_memory);
    tcase_add_test(tf, test_token_file_resident_random_windows);
    tcase_add_test(tf, test_token_file_truncated_while_open);
    tcase_add_test(tf, test_token_file_threads);
    suite_add_tcase(s, tf);
    TCase *rp = tcase_create("repeats");
    tcase_add_test(rp, test_repeats_off_is_today);
    tcase_add_test(rp, test_repeats_every_row);
    tcase_add_test(rp, test_repeats_distribution);
    tcase_add_test(rp, test_repeats_errors);
    suite_add_tcase(s, rp);
    return tu_run(s);
}
