/* Gradient shards and communicators: the shard tree against the tree summed here from
 * induct_model_backward() of each shard; weights bit-identical after several steps for
 * 1, 2, 4 and 8 thread ranks against one process with the same shard count; the
 * refusals; a failing send-and-receive that releases the other ranks. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define B_ 16u
#define T_ 8u
#define STEPS 5

static induct_model *tiny(void) { /* 2 layers, LayerNorm, an MLP, standard positions */
    return tu_variant_model(16, 1, INDUCT_POS_STANDARD, 0, 3);
}

static induct_dataset *rrt(void) { return tu_rrt(11, 2, 5); }

/* Every parameter (or gradient), in tensor order, into a new array of *n floats. */
static float *all(induct_model *m, int which, size_t *n) {
    size_t total = induct_model_n_params(m), at = 0, nt = induct_model_n_tensors(m);
    float *out = malloc(total * sizeof *out);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        size_t k, len;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &k));
        ck_ok(induct_model_get_tensor(m, name, which, out + at, k, &len));
        at += k;
    }
    ck_assert_uint_eq(at, total);
    *n = total;
    return out;
}

static induct_optimizer *adamw(induct_model *m, uint32_t shards) {
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_LR, 3e-2));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_GRAD_CLIP, 1.0));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_GRAD_SHARDS, shards));
    return o;
}

/* The test's own tree: tree(lo, k) = tree(lo, ceil(k/2)) + tree(lo + ceil(k/2), k/2). */
static void tree_sum(float *dst, float *const *g, uint32_t lo, uint32_t k, size_t n) {
    if (k == 1) {
        memcpy(dst, g[lo], n * sizeof *dst);
        return;
    }
    uint32_t kl = k - k / 2;
    float *l = malloc(n * sizeof *l), *r = malloc(n * sizeof *r);
    tree_sum(l, g, lo, kl, n);
    tree_sum(r, g, lo + kl, k / 2, n);
    for (size_t i = 0; i < n; i++) dst[i] = l[i] + r[i];
    free(l);
    free(r);
}

/* The gradient a sharded step used (the gradient buffer after the step) is, bit for
 * bit, the tree of the shards' gradients: induct_model_backward() of each shard's rows
 * (its own mean) times 1/S, exact for S a power of two. The loss is the batch mean. */
static void check_tree(uint32_t S, uint32_t B, int n_threads) {
    induct_model *m = tiny(), *ref;
    ck_ok(induct_model_set_threads(m, n_threads));
    ck_ok(induct_model_clone(&ref, m));
    int32_t *tok = malloc((size_t)B * T_ * sizeof *tok);
    tu_tokens(tok, (size_t)B * T_, 11, 9);
    induct_optimizer *o = adamw(m, S);
    double loss;
    ck_ok(induct_train_step_tokens(o, tok, B, T_, &loss));
    size_t n;
    float *got = all(m, INDUCT_BUF_GRAD, &n);

    float **g = malloc(S * sizeof *g);
    uint32_t rows = B / S;
    double want_loss = 0.0;
    for (uint32_t s = 0; s < S; s++) {
        double l;
        ck_ok(induct_model_backward(ref, tok + (size_t)s * rows * T_, rows, T_, &l));
        g[s] = all(ref, INDUCT_BUF_GRAD, &n);
        for (size_t i = 0; i < n; i++) g[s][i] *= 1.0f / (float)S;
        want_loss += l / S;
    }
    float *want = malloc(n * sizeof *want);
    tree_sum(want, g, 0, S, n);
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp(&got[i], &want[i], sizeof(float)) != 0;
    ck_assert_msg(diff == 0, "S=%u: %zu of %zu gradient entries differ from the tree", S, diff,
                  n);
    ck_assert_msg(fabs(loss - want_loss) <= 1e-12 * want_loss, "loss %.17g vs %.17g", loss,
                  want_loss);
    /* shards 1 and 2 exchanged, ((0 + 2) + (1 + 3)) + ...: another float sum of the
     * same terms, which the comparison above must be able to tell apart */
    if (S >= 4) {
        float *swapped = malloc(n * sizeof *swapped);
        float **h = malloc(S * sizeof *h);
        for (uint32_t s = 0; s < S; s++) h[s] = g[s];
        h[1] = g[2];
        h[2] = g[1];
        tree_sum(swapped, h, 0, S, n);
        size_t d2 = 0;
        for (size_t i = 0; i < n; i++) d2 += memcmp(&swapped[i], &want[i], sizeof(float)) != 0;
        ck_assert_msg(d2 > 0, "S=%u: a reordered tree gave the same bits (weak test)", S);
        free(h);
        free(swapped);
    }
    for (uint32_t s = 0; s < S; s++) free(g[s]);
    free(g);
    free(want);
    free(got);
    free(tok);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_model_free(ref);
}

START_TEST(test_tree_is_the_shards_sum) {
    check_tree(8, B_, 1);
    check_tree(4, B_, 2);
    check_tree(2, 4, 3);
}
END_TEST

/* S = 1 set explicitly, and S = 1 through a one-rank communicator (the shard path), give
 * the bits of the default one-pass step; S = 8 is a different float sum but the same
 * gradient up to rounding. */
START_TEST(test_one_shard_is_the_one_pass_step) {
    induct_dataset *d = rrt();
    induct_comm_threads *g;
    ck_ok(induct_comm_threads_new(&g, 1));
    float *w[4];
    size_t n = 0;
    for (int v = 0; v < 4; v++) {
        induct_model *m = tiny();
        induct_optimizer *o = adamw(m, v == 3 ? 8 : 1);
        if (v == 2) ck_ok(induct_optimizer_set_comm(o, induct_comm_threads_rank(g, 0)));
        for (int s = 0; s < STEPS; s++) ck_ok(induct_train_step(o, d, B_, T_, NULL));
        w[v] = all(m, INDUCT_BUF_PARAM, &n);
        induct_optimizer_free(o);
        induct_model_free(m);
    }
    ck_assert(memcmp(w[0], w[1], n * sizeof(float)) == 0);
    ck_assert(memcmp(w[0], w[2], n * sizeof(float)) == 0);
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)w[0][i] - w[3][i]));
    ck_assert_msg(worst < 1e-4, "S=8 vs S=1 after %d steps: max |dw| = %g", STEPS, worst);
    for (int v = 0; v < 4; v++) free(w[v]);
    induct_comm_threads_free(g);
    induct_dataset_free(d);
}
END_TEST

/* ---- caller hooks in sharded steps ------------------------------------------------- */

/* Three writes that treat every sequence alone: layer 1 head 0's hook_z set, at every
 * position of the batch's sequence g, to the constant 0.05 (g + 1) (g from
 * induct_model_hook_batch_index(), so a wrong index changes the loss); layer 0 head 1's
 * pattern clamped to the previous-token pattern; and layer 0's ln1.hook_normalized
 * clamped to [-1, 1] (which elements that changes depends on the sequence: each
 * shard's record differs). The z hook records each call; its call number fail_at (1,
 * 2, ...; 0: never) returns 5 instead. */
typedef struct shard_hooks {
    induct_model *m;
    uint32_t fail_at, calls;
    uint32_t rows[16], first[16], batch[16]; /* per call: shape[0] and the batch index */
} shard_hooks;

static int set_z(void *u, const char *name, float *z, const uint32_t *shape, uint32_t nd) {
    shard_hooks *h = u;
    (void)name;
    ck_assert_uint_eq(nd, 4);
    uint32_t c = h->calls++, first, batch;
    ck_ok(induct_model_hook_batch_index(h->m, &first, &batch));
    if (c < 16) h->rows[c] = shape[0], h->first[c] = first, h->batch[c] = batch;
    if (h->fail_at == c + 1) return 5;
    size_t T = shape[1], H = shape[2], E = shape[3];
    for (size_t b = 0; b < shape[0]; b++)
        for (size_t p = 0; p < T; p++)
            for (size_t e = 0; e < E; e++) z[((b * T + p) * H + 0) * E + e] = 0.05f * (first + b + 1);
    return 0;
}

static int clamp_ln(void *u, const char *name, float *x, const uint32_t *shape, uint32_t nd) {
    (void)u, (void)name;
    size_t n = (size_t)shape[0] * shape[1] * shape[2];
    ck_assert_uint_eq(nd, 3);
    for (size_t i = 0; i < n; i++) x[i] = fminf(fmaxf(x[i], -1.0f), 1.0f);
    return 0;
}

static uint32_t HEAD1 = 1;

/* The hooks above for model m (the two constant overwrites first), the calls counted
 * in *h (zeroed, fail_at kept). */
static void shard_hook_list(induct_hook out[3], shard_hooks *h, induct_model *m) {
    uint32_t fail_at = h->fail_at;
    memset(h, 0, sizeof *h);
    h->m = m;
    h->fail_at = fail_at;
    out[0] = (induct_hook){"blocks.1.attn.hook_z", set_z, h};
    out[1] = (induct_hook){"blocks.0.attn.hook_pattern", tu_clamp_previous_token, &HEAD1};
    out[2] = (induct_hook){"blocks.0.ln1.hook_normalized", clamp_ln, NULL};
}

/* ---- thread ranks ------------------------------------------------------------------ */

typedef struct rank_job {
    const induct_comm *comm;
    const induct_dataset *d;
    uint32_t shards, B;
    int steps;
    int rc;
    float *w;
    size_t n;
    double loss[STEPS];
    double step_after;
    shard_hooks *hk; /* NULL: induct_train_step, else with these hooks */
    char err[256];   /* the library's message when rc is not INDUCT_OK */
} rank_job;

static void *rank_main(void *arg) {
    rank_job *j = arg;
    induct_model *m = tiny();
    induct_model_set_threads(m, 1);
    induct_optimizer *o;
    induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW);
    induct_optimizer_set(o, INDUCT_OPT_LR, 3e-2);
    induct_optimizer_set(o, INDUCT_OPT_GRAD_CLIP, 1.0);
    induct_optimizer_set(o, INDUCT_OPT_GRAD_SHARDS, j->shards);
    j->rc = induct_optimizer_set_comm(o, j->comm);
    induct_hook h[3];
    for (int s = 0; s < j->steps && j->rc == INDUCT_OK; s++) {
        if (!j->hk) {
            j->rc = induct_train_step(o, j->d, j->B, T_, &j->loss[s]);
            continue;
        }
        shard_hook_list(h, j->hk, m);
        j->rc = induct_train_step_with_hooks(o, j->d, j->B, T_, h, 3, &j->loss[s]);
    }
    if (j->rc != INDUCT_OK) snprintf(j->err, sizeof j->err, "%s", induct_last_error_message());
    j->w = all(m, INDUCT_BUF_PARAM, &j->n);
    induct_optimizer_get(o, INDUCT_OPT_STEP, &j->step_after);
    induct_optimizer_free(o);
    induct_model_free(m);
    return NULL;
}

/* P ranks as threads, each training its own copy (with the hooks hk[r] if hk is not
 * NULL); returns the jobs (caller frees w). */
static void run_ranks(induct_comm_threads *g, const induct_comm *const *comms, uint32_t P,
                      uint32_t S, uint32_t B, int steps, const induct_dataset *d, rank_job *jobs,
                      shard_hooks *hk) {
    (void)g;
    pthread_t th[8];
    for (uint32_t r = 0; r < P; r++) {
        jobs[r] = (rank_job){comms[r], d, S, B, steps, 0, NULL, 0, {0}, 0, hk ? &hk[r] : NULL,
                             ""};
        ck_assert_int_eq(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
    }
    for (uint32_t r = 0; r < P; r++) pthread_join(th[r], NULL);
}

/* One process with S shards (2 threads in the model) against P thread ranks with one
 * thread each: weights and losses bit-identical after STEPS AdamW steps. */
static void check_ranks(uint32_t S, uint32_t B) {
    induct_dataset *d = rrt();
    induct_model *m = tiny();
    ck_ok(induct_model_set_threads(m, 2));
    induct_optimizer *o = adamw(m, S);
    double loss[STEPS];
    for (int s = 0; s < STEPS; s++) ck_ok(induct_train_step(o, d, B, T_, &loss[s]));
    size_t n;
    float *want = all(m, INDUCT_BUF_PARAM, &n);
    static const uint32_t RANKS[] = {1, 2, 3, 4, 5, 6, 8};
    int tried = 0;
    for (size_t ip = 0; ip < sizeof RANKS / sizeof RANKS[0]; ip++) {
        uint32_t P = RANKS[ip];
        if (S % P) continue;
        tried++;
        induct_comm_threads *g;
        ck_ok(induct_comm_threads_new(&g, P));
        const induct_comm *comms[8];
        for (uint32_t r = 0; r < P; r++) comms[r] = induct_comm_threads_rank(g, r);
        rank_job jobs[8];
        run_ranks(g, comms, P, S, B, STEPS, d, jobs, NULL);
        for (uint32_t r = 0; r < P; r++) {
            ck_assert_msg(jobs[r].rc == INDUCT_OK, "S=%u P=%u rank %u: %s", S, P, r,
                          induct_status_name(jobs[r].rc));
            size_t diff = 0;
            for (size_t i = 0; i < n; i++)
                diff += memcmp(&jobs[r].w[i], &want[i], sizeof(float)) != 0;
            ck_assert_msg(diff == 0, "S=%u P=%u rank %u: %zu of %zu weights differ", S, P, r,
                          diff, n);
            for (int s = 0; s < STEPS; s++)
                ck_assert_msg(memcmp(&jobs[r].loss[s], &loss[s], sizeof(double)) == 0,
                              "S=%u P=%u rank %u step %d: loss %.17g vs %.17g", S, P, r, s,
                              jobs[r].loss[s], loss[s]);
            free(jobs[r].w);
        }
        induct_comm_threads_free(g);
    }
    ck_assert_int_ge(tried, 2);
    free(want);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
}

START_TEST(test_ranks_bit_identical) { check_ranks(8, B_); }
END_TEST

/* S not a power of two (6 = 3 + 3 at the top: each of 2 ranks sums 3 shards as 2 + 1;
 * 3 ranks of 2 shards: rank 1's shards 2 and 3 lie on both sides of the top split;
 * 6 ranks: every node above the leaves spans ranks) */
START_TEST(test_ranks_bit_identical_uneven_tree) { check_ranks(6, 12); }
END_TEST

/* Rank counts that are not powers of two: 12 shards over 1, 2, 3, 4 and 6 ranks (3 ranks
 * of 4 shards: rank 0 holds the subtree of shards 0-2 and shard 3 alone, rank 1 the
 * shards 4 and 5 alone and the subtree of 6-7), and 10 shards over 5 ranks (an odd
 * count: one rank sits out each round of the exchange). */
START_TEST(test_ranks_bit_identical_any_count) {
    check_ranks(12, 12);
    check_ranks(10, 10);
}
END_TEST

/* ---- refusals and failures ------------------------------------------------------- */

static int ok_sendrecv(void *u, uint32_t p, const void *s, size_t sb, void *r, size_t rb) {
    (void)u, (void)p, (void)s, (void)sb, (void)r, (void)rb;
    return 0;
}
static int ok_barrier(void *u) {
    (void)u;
    return 0;
}

START_TEST(test_refusals) {
    induct_model *m = tiny();
    induct_optimizer *o = adamw(m, 1);
    double v;
    /* the shard count: an integer in [1, 65536] */
    ck_assert_status(induct_optimizer_set(o, INDUCT_OPT_GRAD_SHARDS, 0), INDUCT_ERANGE);
    ck_assert_status(induct_optimizer_set(o, INDUCT_OPT_GRAD_SHARDS, 1.5), INDUCT_ERANGE);
    ck_assert_status(induct_optimizer_set(o, INDUCT_OPT_GRAD_SHARDS, 65537), INDUCT_ERANGE);
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_GRAD_SHARDS, &v));
    ck_assert(v == 1.0);
    double lo, hi;
    ck_ok(induct_opt_param_bounds(INDUCT_OPT_GRAD_SHARDS, &lo, &hi));
    ck_assert(lo == 1.0 && hi == 65536.0);

    /* a batch the shards do not divide: refused, nothing changed */
    size_t n;
    float *w0 = all(m, INDUCT_BUF_PARAM, &n);
    int32_t tok[6 * T_];
    tu_tokens(tok, 6 * T_, 11, 1);
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_GRAD_SHARDS, 4));
    ck_assert_status(induct_train_step_tokens(o, tok, 6, T_, NULL), INDUCT_EINVAL);
    ck_assert_msg(strstr(induct_last_error_message(), "not a multiple of INDUCT_OPT_GRAD_SHARDS"),
                  "%s", induct_last_error_message());
    float *w1 = all(m, INDUCT_BUF_PARAM, &n);
    ck_assert(memcmp(w0, w1, n * sizeof(float)) == 0);
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &v));
    ck_assert(v == 0.0);
    free(w1);

    induct_dataset *d = rrt();

    /* communicator tables */
    induct_comm c = {sizeof c, 0, 2, NULL, ok_sendrecv, ok_barrier, NULL};
    ck_assert_status(induct_optimizer_set_comm(NULL, &c), INDUCT_EINVAL);
    c.sendrecv = NULL;
    ck_assert_status(induct_optimizer_set_comm(o, &c), INDUCT_EINVAL);
    c.sendrecv = ok_sendrecv;
    c.barrier = NULL;
    ck_assert_status(induct_optimizer_set_comm(o, &c), INDUCT_EINVAL);
    c.barrier = ok_barrier;
    c.n_ranks = 65537;
    ck_assert_status(induct_optimizer_set_comm(o, &c), INDUCT_EINVAL);
    c.n_ranks = 3; /* any count in 1 ... 65536 */
    ck_ok(induct_optimizer_set_comm(o, &c));
    c.n_ranks = 0;
    ck_assert_status(induct_optimizer_set_comm(o, &c), INDUCT_EINVAL);
    c.n_ranks = 2;
    c.rank = 2;
    ck_assert_status(induct_optimizer_set_comm(o, &c), INDUCT_EINVAL);
    c.rank = 1;
    c.size = sizeof c - 1;
    ck_assert_status(induct_optimizer_set_comm(o, &c), INDUCT_EABI);
    c.size = 8192;
    ck_assert_status(induct_optimizer_set_comm(o, &c), INDUCT_EABI);
    c.size = sizeof c;
    /* 4 shards over 8 ranks: refused at the step, nothing changed */
    c.n_ranks = 8;
    ck_ok(induct_optimizer_set_comm(o, &c));
    ck_assert_status(induct_train_step(o, d, 8, T_, NULL), INDUCT_EINVAL);
    ck_assert_msg(strstr(induct_last_error_message(), "not a multiple of the communicator"),
                  "%s", induct_last_error_message());
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &v));
    ck_assert(v == 0.0);
    ck_ok(induct_optimizer_set_comm(o, NULL)); /* detached: a one-process step again */

    /* the threaded group */
    induct_comm_threads *g = (induct_comm_threads *)1;
    ck_assert_status(induct_comm_threads_new(&g, 65), INDUCT_EINVAL);
    ck_assert(g == NULL);
    ck_ok(induct_comm_threads_new(&g, 3));
    induct_comm_threads_free(g);
    ck_assert_status(induct_comm_threads_new(&g, 128), INDUCT_EINVAL);
    ck_assert_status(induct_comm_threads_new(&g, 0), INDUCT_EINVAL);
    ck_assert_status(induct_comm_threads_new(NULL, 2), INDUCT_EINVAL);
    ck_ok(induct_comm_threads_new(&g, 2));
    ck_assert_ptr_null(induct_comm_threads_rank(g, 2));
    ck_assert_int_eq(induct_last_error_code(), INDUCT_ERANGE);
    ck_assert_ptr_null(induct_comm_threads_rank(NULL, 0));
    ck_assert_int_eq(induct_last_error_code(), INDUCT_EINVAL);
    ck_assert_ptr_nonnull(induct_comm_threads_rank(g, 1));
    induct_comm_threads_free(g);
    induct_comm_threads_free(NULL);

    free(w0);
    induct_dataset_free(d);
    induct_optimizer_free(o);
    induct_model_free(m);
}
END_TEST

/* The largest |a - b| of any tensor over that tensor's largest |b| (a whole-model
 * gradient or weight array in tensor order, as all() gives). */
static double worst_rel_diff(induct_model *m, const float *a, const float *b) {
    size_t nt = induct_model_n_tensors(m), at = 0;
    double worst = 0.0;
    for (size_t i = 0; i < nt; i++) {
        size_t k;
        ck_ok(induct_model_tensor_info(m, i, NULL, NULL, NULL, &k));
        double d = 0.0, scale = 0.0;
        for (size_t j = at; j < at + k; j++) {
            d = fmax(d, fabs((double)a[j] - b[j]));
            scale = fmax(scale, fabs((double)b[j]));
        }
        worst = fmax(worst, scale > 0.0 ? d / scale : d > 0.0 ? INFINITY : 0.0);
        at += k;
    }
    return worst;
}

/* The hooks cut these gradients: layer 1 head 0's W_Q, W_K and W_V (its z was
 * overwritten) and layer 0 head 1's W_Q and W_K (its pattern was). All exactly 0 in
 * the gradient buffer? */
static int cut_grads_zero(induct_model *m) {
    const char *names[] = {"blocks.1.attn.W_Q", "blocks.1.attn.W_K", "blocks.1.attn.W_V",
                           "blocks.0.attn.W_Q", "blocks.0.attn.W_K"};
    int zero = 1;
    for (int i = 0; i < 5; i++) {
        float g[2 * 8 * 4]; /* [n_heads, d_model, d_head] */
        size_t len;
        ck_ok(induct_model_get_tensor(m, names[i], INDUCT_BUF_GRAD, g, 64, &len));
        ck_assert_uint_eq(len, 64);
        for (size_t j = i < 3 ? 0 : 32; j < (i < 3 ? 32u : 64u); j++) zero &= g[j] == 0.0f;
    }
    return zero;
}

/* An SGD optimizer with lr 0 and S shards: a step leaves the weights and puts the
 * gradient it used in the model's gradient buffer. */
static induct_optimizer *sgd0(induct_model *m, uint32_t S) {
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_SGD));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_LR, 0.0));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_GRAD_SHARDS, S));
    return o;
}

/* With S = 4 shards the hooks run once per shard, in shard order, on B/S sequences
 * (the batch index says which), and the step's gradient is the one-pass gradient with
 * the same hooks (induct_model_backward_with_hooks on the whole batch) up to the float
 * rounding of another summation order: each entry is a sum over 128 tokens, taken in
 * 4 partial sums added in a tree instead of in one GEMM, so the two differ by a few
 * float32 ulps (2^-24 relative) of the partial sums. The tolerance, 1e-5 of the
 * tensor's largest gradient, leaves room for cancellation between the tokens' terms
 * while the hooks' effect (a gradient that differs at 1e-2 or more) stays far above it. */
START_TEST(test_hooks_in_shards_are_the_one_pass_gradient) {
    enum { S = 4 };
    induct_model *m = tiny(), *ref;
    ck_ok(induct_model_clone(&ref, m));
    int32_t tok[B_ * T_];
    tu_tokens(tok, B_ * T_, 11, 9);
    shard_hooks h1 = {0}, hs = {0};
    induct_hook one[3], hooks[3];
    shard_hook_list(one, &h1, ref);
    double l1, ls;
    ck_ok(induct_model_backward_with_hooks(ref, tok, B_, T_, one, 3, &l1));
    ck_assert_uint_eq(h1.calls, 1);
    ck_assert(h1.rows[0] == B_ && h1.first[0] == 0 && h1.batch[0] == B_);
    size_t n;
    float *g1 = all(ref, INDUCT_BUF_GRAD, &n);
    ck_ok(induct_model_backward(ref, tok, B_, T_, NULL));
    float *g0 = all(ref, INDUCT_BUF_GRAD, &n); /* without the hooks */

    float *w0 = all(m, INDUCT_BUF_PARAM, &n);
    induct_optimizer *o = sgd0(m, S);
    shard_hook_list(hooks, &hs, m);
    ck_ok(induct_train_step_tokens_with_hooks(o, tok, B_, T_, hooks, 3, &ls));
    ck_assert_uint_eq(hs.calls, S);
    for (uint32_t s = 0; s < S; s++)
        ck_assert_msg(hs.rows[s] == B_ / S && hs.first[s] == s * (B_ / S) && hs.batch[s] == B_,
                      "call %u: shape[0] %u, first %u, batch %u", s, hs.rows[s], hs.first[s],
                      hs.batch[s]);
    float *gs = all(m, INDUCT_BUF_GRAD, &n), *w1 = all(m, INDUCT_BUF_PARAM, &n);
    ck_assert(memcmp(w0, w1, n * sizeof *w0) == 0); /* lr 0 */
    double d_hooked = worst_rel_diff(m, gs, g1), d_plain = worst_rel_diff(m, gs, g0);
    printf("hooks in 4 shards vs one pass: worst gradient difference %.3g of the tensor's "
           "largest (%.3g without the hooks)\n", d_hooked, d_plain);
    ck_assert_msg(d_hooked <= 1e-5, "sharded vs one-pass gradient with hooks: %g", d_hooked);
    ck_assert_msg(d_plain >= 1e-2, "the hooks hardly changed the gradient (%g)", d_plain);
    ck_assert(cut_grads_zero(m));
    ck_assert(cut_grads_zero(ref) == 0); /* ref holds the gradient without the hooks */
    ck_assert_msg(fabs(ls - l1) <= 1e-6 * l1, "loss %.17g vs %.17g", ls, l1);
    /* the batch index exists only inside a callback */
    ck_assert_status(induct_model_hook_batch_index(m, NULL, NULL), INDUCT_ESTATE);
    ck_assert_status(induct_model_hook_batch_index(NULL, NULL, NULL), INDUCT_EINVAL);
    free(g1);
    free(g0);
    free(gs);
    free(w0);
    free(w1);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_model_free(ref);
}
END_TEST

/* Training with the hooks and S = 4 shards: the same weights and losses, bit for bit,
 * with 1 and 2 threads in the model and over 1 and 2 thread ranks (each rank calls the
 * hooks for its own shards only); other weights than without the hooks. */
START_TEST(test_hooks_in_shards_bit_identical) {
    enum { S = 4 };
    induct_dataset *d = rrt();
    float *w[3];
    double loss[2][STEPS];
    size_t n;
    for (int v = 0; v < 3; v++) { /* 1 thread, 2 threads, 1 thread without the hooks */
        induct_model *m = tiny();
        ck_ok(induct_model_set_threads(m, v == 1 ? 2 : 1));
        induct_optimizer *o = adamw(m, S);
        shard_hooks hs = {0};
        induct_hook h[3];
        for (int s = 0; s < STEPS; s++) {
            if (v == 2) {
                ck_ok(induct_train_step(o, d, B_, T_, NULL));
                continue;
            }
            shard_hook_list(h, &hs, m);
            ck_ok(induct_train_step_with_hooks(o, d, B_, T_, h, 3, &loss[v][s]));
            ck_assert_uint_eq(hs.calls, S);
        }
        w[v] = all(m, INDUCT_BUF_PARAM, &n);
        induct_optimizer_free(o);
        induct_model_free(m);
    }
    ck_assert(memcmp(w[0], w[1], n * sizeof(float)) == 0);
    ck_assert(memcmp(loss[0], loss[1], sizeof loss[0]) == 0);
    ck_assert(memcmp(w[0], w[2], n * sizeof(float)) != 0);
    for (uint32_t P = 1; P <= 2; P *= 2) {
        induct_comm_threads *g;
        ck_ok(induct_comm_threads_new(&g, P));
        const induct_comm *comms[2];
        for (uint32_t r = 0; r < P; r++) comms[r] = induct_comm_threads_rank(g, r);
        rank_job jobs[2];
        shard_hooks hk[2] = {{0}, {0}};
        run_ranks(g, comms, P, S, B_, STEPS, d, jobs, hk);
        for (uint32_t r = 0; r < P; r++) {
            ck_assert_msg(jobs[r].rc == INDUCT_OK, "P=%u rank %u: %s", P, r, jobs[r].err);
            ck_assert_msg(memcmp(jobs[r].w, w[0], n * sizeof(float)) == 0,
                          "P=%u rank %u: other weights", P, r);
            ck_assert(memcmp(jobs[r].loss, loss[0], sizeof loss[0]) == 0);
            /* the last step: this rank's shards r S/P ... (r+1) S/P - 1, in order */
            ck_assert_uint_eq(hk[r].calls, S / P);
            for (uint32_t k = 0; k < S / P; k++)
                ck_assert(hk[r].rows[k] == B_ / S && hk[r].batch[k] == B_ &&
                          hk[r].first[k] == (r * (S / P) + k) * (B_ / S));
            free(jobs[r].w);
        }
        induct_comm_threads_free(g);
    }
    for (int v = 0; v < 3; v++) free(w[v]);
    induct_dataset_free(d);
}
END_TEST

/* The finite-difference reference: the whole batch's mean loss with the hook_z and
 * pattern writes (one pass, so the z hook sees every sequence with its batch index). */
typedef struct fd_input {
    const int32_t *tok;
    uint32_t B;
} fd_input;

static double written_loss(void *user, induct_model *m) {
    const fd_input *in = user;
    shard_hooks hs = {0};
    induct_hook h[3];
    shard_hook_list(h, &hs, m);
    double l;
    ck_ok(induct_model_run_with_hooks(m, in->tok, in->B, T_, h, 2, NULL, 0, NULL, 0, &l));
    return l;
}

/* Every parameter's gradient of a 4-shard step (one sequence per shard) through the
 * hook_z and pattern writes against central finite differences of the whole batch's
 * hooked loss. The z values depend on the sequence's index in the batch, so a shard
 * that misplaced its sequences would fail here too. */
START_TEST(test_gradcheck_hooks_in_shards) {
    enum { S = 4, FB = 4 };
    induct_model *m = tiny();
    int32_t tok[FB * T_];
    tu_tokens(tok, FB * T_, 11, 13);
    induct_optimizer *o = sgd0(m, S);
    shard_hooks hs = {0};
    induct_hook h[3];
    shard_hook_list(h, &hs, m);
    double l;
    ck_ok(induct_train_step_tokens_with_hooks(o, tok, FB, T_, h, 2, &l));
    ck_assert_uint_eq(hs.calls, S);
    fd_input in = {tok, FB};
    ck_assert_msg(fabs(l - written_loss(&in, m)) <= 1e-6 * l, "loss %.17g", l);
    ck_assert(cut_grads_zero(m));
    ck_assert_uint_eq(tu_gradcheck(m, written_loss, &in, "4 shards, z and pattern written"),
                      induct_model_n_params(m));
    induct_optimizer_free(o);
    induct_model_free(m);
}
END_TEST

/* A hook that fails in shard 2 stops the step with its error, as a failing hook stops
 * a one-pass step (S = 1): the weights, the moments and the step counter are
 * unchanged, so the next step is a fresh optimizer's first, bit for bit. Over 2 thread
 * ranks (shards 2 and 3 on rank 1) both ranks fail and neither changes. */
START_TEST(test_hook_failing_in_a_shard) {
    induct_dataset *d = rrt();
    for (uint32_t S = 1; S <= 4; S *= 4) {
        induct_model *m = tiny(), *twin;
        ck_ok(induct_model_clone(&twin, m));
        induct_optimizer *o = adamw(m, S), *ot = adamw(twin, S);
        size_t n;
        float *w0 = all(m, INDUCT_BUF_PARAM, &n);
        shard_hooks hs = {.fail_at = S == 1 ? 1 : 3}, ht = {0};
        induct_hook h[3], h2[3];
        shard_hook_list(h, &hs, m);
        ck_assert_status(induct_train_step_with_hooks(o, d, B_, T_, h, 3, NULL),
                         INDUCT_EINTERRUPTED);
        ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "returned 5"));
        ck_assert_uint_eq(hs.calls, hs.fail_at); /* no shard after the failing one ran */
        double v;
        ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &v));
        ck_assert(v == 0.0);
        float *w1 = all(m, INDUCT_BUF_PARAM, &n);
        ck_assert(memcmp(w0, w1, n * sizeof *w0) == 0);
        hs.fail_at = 0;
        shard_hook_list(h, &hs, m);
        shard_hook_list(h2, &ht, twin);
        ck_ok(induct_train_step_with_hooks(o, d, B_, T_, h, 3, NULL));
        ck_ok(induct_train_step_with_hooks(ot, d, B_, T_, h2, 3, NULL));
        float *wa = all(m, INDUCT_BUF_PARAM, &n), *wb = all(twin, INDUCT_BUF_PARAM, &n);
        ck_assert_msg(memcmp(wa, wb, n * sizeof *wa) == 0, "S=%u: the failed step left a trace",
                      S);
        ck_assert(memcmp(wa, w0, n * sizeof *wa) != 0);
        free(w0);
        free(w1);
        free(wa);
        free(wb);
        induct_optimizer_free(o);
        induct_optimizer_free(ot);
        induct_model_free(m);
        induct_model_free(twin);
    }
    induct_model *m = tiny();
    size_t n;
    float *w0 = all(m, INDUCT_BUF_PARAM, &n);
    induct_model_free(m);
    induct_comm_threads *g;
    ck_ok(induct_comm_threads_new(&g, 2));
    const induct_comm *comms[2] = {induct_comm_threads_rank(g, 0), induct_comm_threads_rank(g, 1)};
    rank_job jobs[2];
    shard_hooks hk[2] = {{0}, {.fail_at = 1}}; /* rank 1's first call: shard 2 */
    run_ranks(g, comms, 2, 4, B_, 1, d, jobs, hk);
    for (uint32_t r = 0; r < 2; r++) {
        ck_assert_msg(jobs[r].rc == INDUCT_EINTERRUPTED, "rank %u: %s", r,
                      induct_status_name(jobs[r].rc));
        ck_assert(jobs[r].step_after == 0.0);
        ck_assert(memcmp(jobs[r].w, w0, n * sizeof(float)) == 0);
        free(jobs[r].w);
    }
    ck_assert_msg(strstr(jobs[1].err, "returned 5"), "rank 1: %s", jobs[1].err);
    ck_assert_uint_eq(hk[0].calls, 2);
    ck_assert_uint_eq(hk[1].calls, 1);
    induct_comm_threads_free(g);
    free(w0);
    induct_dataset_free(d);
}
END_TEST

/* A send-and-receive that fails on rank 1: rank 1 reports the error, the library calls
 * abort, and the other ranks return instead of waiting; no weights change anywhere. */
typedef struct failing {
    induct_comm inner;
    int fail;
} failing;
static int failing_sendrecv(void *u, uint32_t p, const void *s, size_t sb, void *r, size_t rb) {
    failing *f = u;
    if (f->fail) return INDUCT_EIO;
    return f->inner.sendrecv(f->inner.user, p, s, sb, r, rb);
}
static int failing_barrier(void *u) {
    failing *f = u;
    return f->inner.barrier(f->inner.user);
}
static void failing_abort(void *u, int st) {
    failing *f = u;
    f->inner.abort(f->inner.user, st);
}

START_TEST(test_failing_sendrecv_releases_the_others) {
    induct_dataset *d = rrt();
    induct_model *m = tiny();
    size_t n;
    float *w0 = all(m, INDUCT_BUF_PARAM, &n);
    induct_model_free(m);
    enum { P = 4 };
    induct_comm_threads *g;
    ck_ok(induct_comm_threads_new(&g, P));
    failing f[P];
    induct_comm tab[P];
    const induct_comm *comms[P];
    for (uint32_t r = 0; r < P; r++) {
        f[r].inner = *induct_comm_threads_rank(g, r);
        f[r].fail = r == 1;
        tab[r] = f[r].inner;
        tab[r].user = &f[r];
        tab[r].sendrecv = failing_sendrecv;
        tab[r].barrier = failing_barrier;
        tab[r].abort = failing_abort;
        comms[r] = &tab[r];
    }
    rank_job jobs[P];
    run_ranks(g, comms, P, 8, B_, 2, d, jobs, NULL);
    for (uint32_t r = 0; r < P; r++) {
        int want = r == 1 ? INDUCT_EIO : INDUCT_EINTERRUPTED;
        ck_assert_msg(jobs[r].rc == want, "rank %u: %s, expected %s", r,
                      induct_status_name(jobs[r].rc), induct_status_name(want));
        ck_assert(jobs[r].step_after == 0.0);
        ck_assert(memcmp(jobs[r].w, w0, n * sizeof(float)) == 0);
        free(jobs[r].w);
    }
    /* the group stays aborted */
    int x = 0;
    const induct_comm *c0 = induct_comm_threads_rank(g, 0);
    ck_assert_int_eq(c0->barrier(c0->user), INDUCT_EINTERRUPTED);
    ck_assert_int_eq(c0->sendrecv(c0->user, 1, &x, sizeof x, &x, sizeof x), INDUCT_EINTERRUPTED);
    induct_comm_threads_free(g);
    free(w0);
    induct_dataset_free(d);
}
END_TEST

/* The threaded communicator on its own: exchanges, unequal sizes, mismatches, barrier. */
typedef struct ex_job {
    const induct_comm *c;
    int rc[3];
    int got[2];
} ex_job;
static void *ex_main(void *arg) {
    ex_job *j = arg;
    const induct_comm *c = j->c;
    uint32_t peer = c->rank ^ 1u;
    int mine[2] = {(int)c->rank * 10 + 1, (int)c->rank * 10 + 2};
    /* rank 0 sends 2 ints and receives 1; rank 1 the other way round */
    size_t sn = c->rank == 0 ? 2 : 1, rn = c->rank == 0 ? 1 : 2;
    j->rc[0] = c->sendrecv(c->user, peer, mine, sn * sizeof(int), j->got, rn * sizeof(int));
    j->rc[1] = c->barrier(c->user);
    /* both expect 2 ints but rank 1 sends 1: both sides fail */
    size_t bad = c->rank == 1 ? 1 : 2;
    int tmp[2];
    j->rc[2] = c->sendrecv(c->user, peer, mine, bad * sizeof(int), tmp, 2 * sizeof(int));
    return NULL;
}

START_TEST(test_thread_comm_exchange) {
    induct_comm_threads *g;
    ck_ok(induct_comm_threads_new(&g, 2));
    ex_job j[2];
    pthread_t th[2];
    for (uint32_t r = 0; r < 2; r++) {
        memset(&j[r], 0, sizeof j[r]);
        j[r].c = induct_comm_threads_rank(g, r);
        ck_assert_uint_eq(j[r].c->rank, r);
        ck_assert_uint_eq(j[r].c->n_ranks, 2);
        ck_assert_uint_eq(j[r].c->size, sizeof(induct_comm));
        pthread_create(&th[r], NULL, ex_main, &j[r]);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    ck_assert_int_eq(j[0].rc[0], 0);
    ck_assert_int_eq(j[1].rc[0], 0);
    ck_assert_int_eq(j[0].got[0], 11);
    ck_assert_int_eq(j[1].got[0], 1);
    ck_assert_int_eq(j[1].got[1], 2);
    ck_assert_int_eq(j[0].rc[1], 0);
    ck_assert_int_eq(j[1].rc[1], 0);
    ck_assert_int_eq(j[0].rc[2], INDUCT_EINVAL);
    ck_assert_int_eq(j[1].rc[2], INDUCT_EINVAL);
    induct_comm_threads_free(g);
}
END_TEST

/* The shard count is saved with the optimizer and restored on load. */
START_TEST(test_shards_in_checkpoint) {
    char path[] = "/tmp/induct-shards-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    induct_model *m = tiny();
    induct_optimizer *o = adamw(m, 4);
    ck_ok(induct_optimizer_save(o, path));
    induct_model *m2;
    induct_optimizer *o2;
    ck_ok(induct_model_load(&m2, path));
    ck_ok(induct_optimizer_load(&o2, m2, path));
    double v;
    ck_ok(induct_optimizer_get(o2, INDUCT_OPT_GRAD_SHARDS, &v));
    ck_assert(v == 4.0);
    induct_optimizer_free(o2);
    /* a file without the key (written before it existed) loads as 1: blank the key out
     * of the JSON header, keeping its length */
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    uint64_t hl = 0;
    ck_assert_int_eq(fread(&hl, 8, 1, f), 1);
    char *h = malloc(hl + 1);
    ck_assert_int_eq(fread(h, 1, hl, f), hl);
    h[hl] = '\0';
    char *k = strstr(h, ",\"optimizer.grad_shards\":\"");
    ck_assert_ptr_nonnull(k);
    char *end = strchr(k + strlen(",\"optimizer.grad_shards\":\""), '"');
    ck_assert_ptr_nonnull(end);
    memset(k, ' ', (size_t)(end + 1 - k));
    fseek(f, 8, SEEK_SET);
    ck_assert_int_eq(fwrite(h, 1, hl, f), hl);
    fclose(f);
    free(h);
    ck_ok(induct_optimizer_load(&o2, m2, path));
    ck_ok(induct_optimizer_get(o2, INDUCT_OPT_GRAD_SHARDS, &v));
    ck_assert(v == 1.0);
    unlink(path);
    induct_optimizer_free(o2);
    induct_model_free(m2);
    induct_optimizer_free(o);
    induct_model_free(m);
}
END_TEST


/* ---- induct_train over thread ranks ------------------------------------------------ */

typedef struct train_job {
    const induct_comm *comm;
    const induct_dataset *d;
    const char *resume; /* optimizer snapshot to start from, or NULL */
    induct_train_config cfg;
    int stop_at;        /* the callback asks to stop at this step (0: never) */
    int rc;
    double step_after;
    float *w;
    size_t n;
} train_job;

static uint32_t g_train_shards = 8; /* INDUCT_OPT_GRAD_SHARDS of a new run */

static int stop_cb(const induct_progress *p, void *u) {
    const train_job *j = u;
    return j->stop_at && p->step == (uint64_t)j->stop_at;
}

static void *train_main(void *arg) {
    train_job *j = arg;
    induct_model *m;
    induct_optimizer *o;
    if (j->resume) {
        induct_model_load(&m, j->resume);
        induct_optimizer_load(&o, m, j->resume);
    } else {
        m = tiny();
        induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW);
        induct_optimizer_set(o, INDUCT_OPT_LR, 3e-2);
        induct_optimizer_set(o, INDUCT_OPT_GRAD_CLIP, 1.0);
        induct_optimizer_set(o, INDUCT_OPT_GRAD_SHARDS, g_train_shards);
    }
    induct_model_set_threads(m, 1);
    j->rc = j->comm ? induct_optimizer_set_comm(o, j->comm) : INDUCT_OK;
    if (j->rc == INDUCT_OK) j->rc = induct_train(o, j->d, &j->cfg, stop_cb, j);
    j->w = all(m, INDUCT_BUF_PARAM, &j->n);
    induct_optimizer_get(o, INDUCT_OPT_STEP, &j->step_after);
    induct_optimizer_free(o);
    induct_model_free(m);
    return NULL;
}

/* P ranks run induct_train with the same config; returns rank 0's job results in jobs. */
static void train_ranks(uint32_t P, const induct_train_config *cfg, const char *resume,
                        int stop_rank, int stop_at, const induct_dataset *d, train_job *jobs) {
    induct_comm_threads *g = NULL;
    if (P > 0) ck_ok(induct_comm_threads_new(&g, P));
    uint32_t n = P ? P : 1;
    pthread_t th[8];
    for (uint32_t r = 0; r < n; r++) {
        jobs[r] = (train_job){P ? induct_comm_threads_rank(g, r) : NULL, d, resume, *cfg,
                              (int)r == stop_rank ? stop_at : 0, 0, 0, NULL, 0};
        ck_assert_int_eq(pthread_create(&th[r], NULL, train_main, &jobs[r]), 0);
    }
    for (uint32_t r = 0; r < n; r++) pthread_join(th[r], NULL);
    induct_comm_threads_free(g);
}

static int lines_of(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, ch;
    while ((ch = fgetc(f)) != EOF) n += ch == '\n';
    fclose(f);
    return n;
}

/* induct_train on 4 ranks: rank 0 alone writes the metrics log and the snapshots, the
 * weights equal one process's; a run resumed from a 4-rank snapshot on 2 ranks ends
 * with the weights of an uninterrupted one-process run. */
START_TEST(test_train_driver_ranks_and_resume) {
    char dir[] = "/tmp/induct-dist-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char log1[256], log4[256], snap1[256], snap4[256], at3[256];
    snprintf(log1, sizeof log1, "%s/one.jsonl", dir);
    snprintf(log4, sizeof log4, "%s/four.jsonl", dir);
    snprintf(snap1, sizeof snap1, "%s/one-{step}.safetensors", dir);
    snprintf(snap4, sizeof snap4, "%s/four-{step}.safetensors", dir);
    snprintf(at3, sizeof at3, "%s/four-3.safetensors", dir);
    induct_dataset *d = rrt();
    induct_train_config c;
    ck_ok(induct_train_config_init(&c, sizeof c));
    c.steps = 6;
    c.batch = B_;
    c.seq_len = T_;
    c.eval_every = 3;
    c.eval_batch = 8;
    c.snapshot_every = 3;
    train_job one[1], four[4], two[2];
    c.metrics_path = log1;
    c.snapshot_path = snap1;
    train_ranks(0, &c, NULL, -1, 0, d, one);
    ck_assert_int_eq(one[0].rc, INDUCT_OK);
    c.metrics_path = log4;
    c.snapshot_path = snap4;
    train_ranks(4, &c, NULL, -1, 0, d, four);
    for (int r = 0; r < 4; r++) {
        ck_assert_msg(four[r].rc == INDUCT_OK, "rank %d: %s", r, induct_status_name(four[r].rc));
        ck_assert(four[r].step_after == 6.0);
        ck_assert(memcmp(four[r].w, one[0].w, one[0].n * sizeof(float)) == 0);
        free(four[r].w);
    }
    /* one writer: 3 records (steps 0, 3, 6), not 4 ranks' worth */
    ck_assert_int_eq(lines_of(log1), 3);
    ck_assert_int_eq(lines_of(log4), 3);
    /* resume the 4-rank snapshot of step 3 on 2 ranks, no files this time */
    c.metrics_path = NULL;
    c.snapshot_path = NULL;
    train_ranks(2, &c, at3, -1, 0, d, two);
    for (int r = 0; r < 2; r++) {
        ck_assert_msg(two[r].rc == INDUCT_OK, "rank %d: %s", r, induct_status_name(two[r].rc));
        ck_assert(two[r].step_after == 6.0);
        ck_assert(memcmp(two[r].w, one[0].w, one[0].n * sizeof(float)) == 0);
        free(two[r].w);
    }
    free(one[0].w);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    induct_dataset_free(d);
}
END_TEST

/* A callback stop on rank 2 at step 2 stops all 4 ranks before step 3, with the weights
 * of step 2 everywhere, and the group stays usable (no abort). */
START_TEST(test_train_driver_stop_on_one_rank) {
    induct_dataset *d = rrt();
    induct_train_config c;
    ck_ok(induct_train_config_init(&c, sizeof c));
    c.steps = 5;
    c.batch = B_;
    c.seq_len = T_;
    train_job four[4], ref[1];
    train_ranks(4, &c, NULL, 2, 2, d, four);
    c.steps = 2;
    train_ranks(0, &c, NULL, -1, 0, d, ref);
    for (int r = 0; r < 4; r++) {
        ck_assert_msg(four[r].rc == INDUCT_EINTERRUPTED, "rank %d: %s", r,
                      induct_status_name(four[r].rc));
        ck_assert(four[r].step_after == 2.0);
        ck_assert(memcmp(four[r].w, ref[0].w, ref[0].n * sizeof(float)) == 0);
        free(four[r].w);
    }
    free(ref[0].w);
    induct_dataset_free(d);
}
END_TEST

/* The same on 3 ranks (6 shards; a batch of 12): the stop flag is exchanged between
 * every pair of ranks, and a run resumed from the 3-rank snapshot of step 3 on 6 ranks
 * ends with one process's weights. */
START_TEST(test_train_driver_three_ranks) {
    char dir[] = "/tmp/induct-dist-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char snap3[256], at3[256];
    snprintf(snap3, sizeof snap3, "%s/three-{step}.safetensors", dir);
    snprintf(at3, sizeof at3, "%s/three-3.safetensors", dir);
    g_train_shards = 6;
    induct_dataset *d = rrt();
    induct_train_config c;
    ck_ok(induct_train_config_init(&c, sizeof c));
    c.steps = 5;
    c.batch = 12;
    c.seq_len = T_;
    train_job three[3], six[6], ref[1];
    train_ranks(3, &c, NULL, 1, 2, d, three); /* rank 1 stops the run at step 2 */
    c.steps = 2;
    train_ranks(0, &c, NULL, -1, 0, d, ref);
    for (int r = 0; r < 3; r++) {
        ck_assert_msg(three[r].rc == INDUCT_EINTERRUPTED, "rank %d: %s", r,
                      induct_status_name(three[r].rc));
        ck_assert(three[r].step_after == 2.0);
        ck_assert(memcmp(three[r].w, ref[0].w, ref[0].n * sizeof(float)) == 0);
        free(three[r].w);
    }
    free(ref[0].w);
    c.steps = 6;
    c.snapshot_every = 3;
    c.snapshot_path = snap3;
    train_ranks(3, &c, NULL, -1, 0, d, three);
    c.snapshot_path = NULL;
    train_ranks(0, &c, NULL, -1, 0, d, ref);
    train_ranks(6, &c, at3, -1, 0, d, six);
    for (int r = 0; r < 3; r++) {
        ck_assert_msg(three[r].rc == INDUCT_OK, "rank %d: %s", r, induct_status_name(three[r].rc));
        ck_assert(memcmp(three[r].w, ref[0].w, ref[0].n * sizeof(float)) == 0);
        free(three[r].w);
    }
    for (int r = 0; r < 6; r++) {
        ck_assert_msg(six[r].rc == INDUCT_OK, "rank %d: %s", r, induct_status_name(six[r].rc));
        ck_assert(six[r].step_after == 6.0);
        ck_assert(memcmp(six[r].w, ref[0].w, ref[0].n * sizeof(float)) == 0);
        free(six[r].w);
    }
    free(ref[0].w);
    g_train_shards = 8;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    induct_dataset_free(d);
}
END_TEST

int main(void) {
    Suite *s = suite_create("distributed");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_tree_is_the_shards_sum);
    tcase_add_test(tc, test_one_shard_is_the_one_pass_step);
    tcase_add_test(tc, test_ranks_bit_identical);
    tcase_add_test(tc, test_ranks_bit_identical_uneven_tree);
    tcase_add_test(tc, test_ranks_bit_identical_any_count);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_hooks_in_shards_are_the_one_pass_gradient);
    tcase_add_test(tc, test_hooks_in_shards_bit_identical);
    tcase_add_test(tc, test_gradcheck_hooks_in_shards);
    tcase_add_test(tc, test_hook_failing_in_a_shard);
    tcase_add_test(tc, test_failing_sendrecv_releases_the_others);
    tcase_add_test(tc, test_thread_comm_exchange);
    tcase_add_test(tc, test_shards_in_checkpoint);
    tcase_add_test(tc, test_train_driver_ranks_and_resume);
    tcase_add_test(tc, test_train_driver_stop_on_one_rank);
    tcase_add_test(tc, test_train_driver_three_ranks);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
