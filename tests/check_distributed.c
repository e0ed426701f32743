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
    for (int s = 0; s < j->steps && j->rc == INDUCT_OK; s++)
        j->rc = induct_train_step(o, j->d, j->B, T_, &j->loss[s]);
    j->w = all(m, INDUCT_BUF_PARAM, &j->n);
    induct_optimizer_get(o, INDUCT_OPT_STEP, &j->step_after);
    induct_optimizer_free(o);
    induct_model_free(m);
    return NULL;
}

/* P ranks as threads, each training its own copy; returns the jobs (caller frees w). */
static void run_ranks(induct_comm_threads *g, const induct_comm *const *comms, uint32_t P,
                      uint32_t S, uint32_t B, int steps, const induct_dataset *d, rank_job *jobs) {
    (void)g;
    pthread_t th[8];
    for (uint32_t r = 0; r < P; r++) {
        jobs[r] = (rank_job){comms[r], d, S, B, steps, 0, NULL, 0, {0}, 0};
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
    for (uint32_t P = 1; P <= 8 && P <= S; P *= 2) {
        if (S % P) continue;
        induct_comm_threads *g;
        ck_ok(induct_comm_threads_new(&g, P));
        const induct_comm *comms[8];
        for (uint32_t r = 0; r < P; r++) comms[r] = induct_comm_threads_rank(g, r);
        rank_job jobs[8];
        run_ranks(g, comms, P, S, B, STEPS, d, jobs);
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
    free(want);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
}

START_TEST(test_ranks_bit_identical) { check_ranks(8, B_); }
END_TEST

/* S not a power of two (6 = 3 + 3 at the top: each of 2 ranks sums 3 shards as 2 + 1) */
START_TEST(test_ranks_bit_identical_uneven_tree) { check_ranks(6, 12); }
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
    c.n_ranks = 3;
    ck_assert_status(induct_optimizer_set_comm(o, &c), INDUCT_EINVAL);
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
    ck_assert_status(induct_comm_threads_new(&g, 3), INDUCT_EINVAL);
    ck_assert(g == NULL);
    ck_assert_status(induct_comm_threads_new(&g, 128), INDUCT_EINVAL);
    ck_assert_status(induct_comm_threads_new(&g, 0), INDUCT_EINVAL);
    ck_assert_status(induct_comm_threads_new(NULL, 2), INDUCT_EINVAL);
    ck_ok(induct_comm_threads_new(&g, 2));
    ck_assert_ptr_null(induct_comm_threads_rank(g, 2));
    ck_assert_int_eq(induct_last_error_code(), INDUCT_ERANGE);
    ck_assert_ptr_null(induct_comm_threads_rank(NULL, 0));
    ck_assert_ptr_nonnull(induct_comm_threads_rank(g, 1));
    induct_comm_threads_free(g);
    induct_comm_threads_free(NULL);

    free(w0);
    induct_dataset_free(d);
    induct_optimizer_free(o);
    induct_model_free(m);
}
END_TEST

/* Caller hooks with shards: refused (ENOTSUP), nothing changed. */
static int noop_hook(void *u, const char *name, float *x, const uint32_t *shape, uint32_t nd) {
    (void)u, (void)name, (void)x, (void)shape, (void)nd;
    return 0;
}

START_TEST(test_hooks_refused_with_shards) {
    induct_model *m = tiny();
    induct_optimizer *o = adamw(m, 2);
    induct_dataset *d = rrt();
    induct_hook h = {"blocks.0.hook_resid_pre", noop_hook, NULL};
    ck_assert_status(induct_train_step_with_hooks(o, d, 8, T_, &h, 1, NULL), INDUCT_ENOTSUP);
    double v;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &v));
    ck_assert(v == 0.0);
    induct_dataset_free(d);
    induct_optimizer_free(o);
    induct_model_free(m);
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
    run_ranks(g, comms, P, 8, B_, 2, d, jobs);
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
        induct_optimizer_set(o, INDUCT_OPT_GRAD_SHARDS, 8);
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

int main(void) {
    Suite *s = suite_create("distributed");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_tree_is_the_shards_sum);
    tcase_add_test(tc, test_one_shard_is_the_one_pass_step);
    tcase_add_test(tc, test_ranks_bit_identical);
    tcase_add_test(tc, test_ranks_bit_identical_uneven_tree);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_hooks_refused_with_shards);
    tcase_add_test(tc, test_failing_sendrecv_releases_the_others);
    tcase_add_test(tc, test_thread_comm_exchange);
    tcase_add_test(tc, test_shards_in_checkpoint);
    tcase_add_test(tc, test_train_driver_ranks_and_resume);
    tcase_add_test(tc, test_train_driver_stop_on_one_rank);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
