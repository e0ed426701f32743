/* Gradient shards and communicators: the fixed shard tree of a training step, its sum
 * across ranks (recursive halving and doubling over induct_comm's send-and-receive),
 * and the in-process communicator whose ranks are threads. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

#define COMM_RANKS_MAX 65536u
#define THREAD_RANKS_MAX 64u

static int pow2(uint32_t n) { return n && !(n & (n - 1)); }

int induct__comm_status(int rc, const char *what) {
    if (rc == 0) return INDUCT_OK;
    int st = rc < 0 && rc >= INDUCT_STATUS_MIN_ ? rc : INDUCT_EIO;
    return induct__fail(st, "communicator: %s failed (%d: %s)", what, rc, induct_status_str(st));
}

INDUCT_API int induct_optimizer_set_comm(induct_optimizer *o, const induct_comm *c) {
    const char *fn = "induct_optimizer_set_comm";
    INDUCT_FAIL_IF(!o, INDUCT_EINVAL, "%s: optimizer is NULL", fn);
    if (!c) {
        o->has_comm = 0;
        memset(&o->comm, 0, sizeof o->comm);
        return INDUCT_OK;
    }
    INDUCT_FAIL_IF(c->size < sizeof(induct_comm) || c->size > INDUCT__STRUCT_SIZE_CAP, INDUCT_EABI,
                   "%s: comm->size %zu is not a 0.1 induct_comm (%zu bytes) or is above %d",
                   fn, c->size, sizeof(induct_comm), INDUCT__STRUCT_SIZE_CAP);
    INDUCT_FAIL_IF(!c->sendrecv || !c->barrier, INDUCT_EINVAL,
                   "%s: the sendrecv and barrier callbacks are required", fn);
    INDUCT_FAIL_IF(c->n_ranks < 1 || c->n_ranks > COMM_RANKS_MAX, INDUCT_EINVAL,
                   "%s: n_ranks %u is not in 1 ... %u", fn, c->n_ranks, COMM_RANKS_MAX);
    INDUCT_FAIL_IF(c->rank >= c->n_ranks, INDUCT_EINVAL, "%s: rank %u is not below n_ranks %u",
                   fn, c->rank, c->n_ranks);
    o->comm = *c;
    o->comm.size = sizeof(induct_comm);
    o->has_comm = 1;
    return INDUCT_OK;
}

/* Round t of a round-robin schedule over P ranks (the circle method): the rank that r
 * exchanges with, or UINT32_MAX when r sits the round out (P odd). Rounds 0 ...
 * rr_rounds(P) - 1 pair every two ranks exactly once, and both ranks of a pair compute
 * each other. */
static uint32_t rr_rounds(uint32_t P) { return P % 2 ? P : P - 1; }
static uint32_t rr_partner(uint32_t P, uint32_t t, uint32_t r) {
    uint32_t N = P + P % 2, M = N - 1, p; /* N even; rank M is the bye when P is odd */
    if (r == M) {
        p = (uint32_t)((uint64_t)t * (N / 2) % M); /* the r' with 2 r' = t (mod M) */
    } else {
        p = (uint32_t)(((uint64_t)t + M - r) % M);
        if (p == r) p = M;
    }
    return p >= P ? UINT32_MAX : p;
}

int induct__comm_any(induct_optimizer *o, int *flag) {
    if (!o->has_comm) return INDUCT_OK;
    const induct_comm *c = &o->comm;
    uint8_t mine = *flag != 0, any = mine;
    if (pow2(c->n_ranks)) { /* recursive doubling */
        for (uint32_t j = 0; (1u << j) < c->n_ranks; j++) {
            uint8_t theirs = 0;
            int rc = c->sendrecv(c->user, c->rank ^ (1u << j), &any, 1, &theirs, 1);
            INDUCT_TRY(induct__comm_status(rc, "sendrecv (stop flag)"));
            any |= theirs;
        }
    } else { /* every pair once */
        for (uint32_t t = 0; t < rr_rounds(c->n_ranks); t++) {
            uint32_t peer = rr_partner(c->n_ranks, t, c->rank);
            if (peer == UINT32_MAX) continue;
            uint8_t theirs = 0;
            int rc = c->sendrecv(c->user, peer, &mine, 1, &theirs, 1);
            INDUCT_TRY(induct__comm_status(rc, "sendrecv (stop flag)"));
            any |= theirs;
        }
    }
    *flag = any;
    return INDUCT_OK;
}

/* ---- the shard tree ------------------------------------------------------------ */

typedef struct tree {
    induct_optimizer *o;
    const induct__pass *whole; /* the batch */
    uint32_t rows;             /* sequences per shard */
    size_t n;                  /* floats per gradient */
    float *buf;                /* one gradient per level: level l at buf + l * n */
} tree;

/* Shard s's gradient into m->grads, its loss sum into *loss. The caller's hooks run in
 * its forward pass on its rows only, and its backward follows the record of what they
 * wrote in this pass (freed before the next shard). */
static int shard(const tree *t, uint32_t s, double *loss) {
    induct_model *m = t->o->model;
    induct__pass p = *t->whole;
    p.tokens += (size_t)s * t->rows * p.T;
    p.B = t->rows;
    p.scale_rows = t->whole->B;
    p.loss_sum = loss;
    p.row0 = s * t->rows;
    induct__masks masks = {0, 0, NULL};
    p.masks = &masks;
    int rc = induct__forward(m, &p, NULL);
    if (rc == INDUCT_OK) rc = induct__backward(m, &p);
    induct__masks_free(&masks);
    return rc;
}

/* dst = a + b elementwise (dst may be a or b). */
static void add(float *dst, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = a[i] + b[i];
}

/* tree(lo, k) = tree(lo, ceil(k/2)) + tree(lo + ceil(k/2), floor(k/2)) into dst (m->grads
 * or a level buffer); the backward of every leaf writes m->grads, so a right subtree is
 * computed there and a left one in this level's buffer. */
static int node(const tree *t, uint32_t lo, uint32_t k, uint32_t level, float *dst,
                double *loss) {
    float *g = t->o->model->grads;
    if (k == 1) {
        INDUCT_TRY(shard(t, lo, loss));
        if (dst != g) memcpy(dst, g, t->n * sizeof(float));
        return INDUCT_OK;
    }
    uint32_t kl = k - k / 2;
    float *left = t->buf + (size_t)level * t->n;
    double ll, lr;
    INDUCT_TRY(node(t, lo, kl, level + 1, left, &ll));
    INDUCT_TRY(node(t, lo + kl, k / 2, level + 1, g, &lr));
    add(dst, left, g, t->n);
    *loss = ll + lr;
    return INDUCT_OK;
}

static uint32_t levels(uint32_t k) { /* depth of tree(., k): ceil(log2 k) */
    uint32_t d = 0;
    while ((1u << d) < k) d++;
    return d;
}

int induct__comm_tree_sum(const induct_comm *c, float *g, size_t n, float *recv,
                          double *loss) {
    uint32_t P = c->n_ranks, r = c->rank, k = levels(P);
    size_t lo[17], hi[17]; /* the segment held before each round (k <= 16) */
    size_t a = 0, b = n;
    for (uint32_t j = 0; j < k; j++) { /* reduce-scatter: halve the segment each round */
        uint32_t peer = r ^ (1u << j);
        int upper = (r >> j) & 1u;
        size_t mid = a + (b - a + 1) / 2;
        lo[j] = a;
        hi[j] = b;
        size_t ka = upper ? mid : a, kb = upper ? b : mid; /* kept */
        size_t sa = upper ? a : mid, sb = upper ? mid : b; /* sent */
        int rc = c->sendrecv(c->user, peer, g + sa, (sb - sa) * sizeof(float), recv,
                             (kb - ka) * sizeof(float));
        INDUCT_TRY(induct__comm_status(rc, "sendrecv (reduce-scatter)"));
        if (upper) add(g + ka, recv, g + ka, kb - ka); /* the peer's group is the left */
        else add(g + ka, g + ka, recv, kb - ka);
        a = ka;
        b = kb;
    }
    for (uint32_t j = k; j-- > 0;) { /* all-gather: the sibling segment of each round */
        uint32_t peer = r ^ (1u << j);
        size_t oa = a == lo[j] ? b : lo[j], ob = a == lo[j] ? hi[j] : a; /* sibling */
        int rc = c->sendrecv(c->user, peer, g + a, (b - a) * sizeof(float), g + oa,
                             (ob - oa) * sizeof(float));
        INDUCT_TRY(induct__comm_status(rc, "sendrecv (all-gather)"));
        a = lo[j];
        b = hi[j];
    }
    for (uint32_t j = 0; j < k; j++) { /* the loss sums: recursive doubling */
        uint32_t peer = r ^ (1u << j);
        double theirs = 0.0;
        int rc = c->sendrecv(c->user, peer, loss, sizeof *loss, &theirs, sizeof theirs);
        INDUCT_TRY(induct__comm_status(rc, "sendrecv (loss)"));
        *loss = (r >> j) & 1u ? theirs + *loss : *loss + theirs;
    }
    return INDUCT_OK;
}

/* ---- the shard tree across any number of ranks --------------------------------------
 * With P ranks that are not a power of two, the rank boundaries (every S/P shards) do
 * not fall on the tree's splits. Each rank computes the *maximal* nodes of the tree whose
 * shards are all its own (its "roots", at most about 2 log2 S of them), with node() as in
 * one process. The nodes above the roots span ranks: the gradient is cut into P segments,
 * rank j receives every root's values on segment j (one exchange with every other rank,
 * round-robin), evaluates the top of the tree on that segment with the same additions as
 * one process, and the segments are then exchanged back (all-gather). The roots' loss
 * sums go to every rank, which evaluates the top of the loss tree itself. Every element
 * is thus the tree's sum, in the tree's order: the same bits as one process. */

/* The number of maximal nodes of tree(lo, k) inside [a, b) (a rank's shards). */
static uint32_t roots_in(uint32_t lo, uint32_t k, uint32_t a, uint32_t b) {
    if (lo >= b || lo + k <= a) return 0;
    if (lo >= a && lo + k <= b) return 1;
    return roots_in(lo, k - k / 2, a, b) + roots_in(lo + k - k / 2, k / 2, a, b);
}

typedef struct top {
    uint32_t per, rank;
    const uint32_t *first; /* [P + 1]: global index of each rank's first root */
    const float *own;      /* this rank's roots, [m_r][n] */
    const float *recv;     /* every root on this rank's segment, [M][seg] */
    size_t n, off, seg;    /* the segment [off, off + seg) */
    float *lv;             /* level buffers, [depth][seg] */
    const double *loss;    /* every root's loss sum, [M] */
    uint32_t next;         /* roots visited so far (tree order = global index) */
} top;

static void top_node(top *t, uint32_t lo, uint32_t k, uint32_t level, float *dst, double *loss) {
    uint32_t owner = lo / t->per;
    if ((lo + k - 1) / t->per == owner) { /* a root: one rank's shards */
        uint32_t g = t->next++;
        const float *src = owner == t->rank ? t->own + (size_t)(g - t->first[owner]) * t->n + t->off
                                            : t->recv + (size_t)g * t->seg;
        memcpy(dst, src, t->seg * sizeof(float));
        *loss = t->loss[g];
        return;
    }
    uint32_t kl = k - k / 2;
    float *left = t->lv + (size_t)level * t->seg;
    double ll, lr;
    top_node(t, lo, kl, level + 1, left, &ll);
    top_node(t, lo + kl, k / 2, level + 1, dst, &lr);
    add(dst, left, dst, t->seg);
    *loss = ll + lr;
}

static size_t seg_at(size_t n, uint32_t P, uint32_t j) { return (size_t)((uint64_t)n * j / P); }

/* Floats of shard_buf the general path needs for S shards over P ranks (SIZE_MAX on
 * overflow); *m_max = the most roots of one rank, *total = all roots. */
static size_t any_ranks_floats(uint32_t S, uint32_t P, size_t n, uint32_t *m_max,
                               uint32_t *total) {
    uint32_t per = S / P, mm = 0, tot = 0;
    for (uint32_t j = 0; j < P; j++) {
        uint32_t m = roots_in(0, S, j * per, (j + 1) * per);
        if (m > mm) mm = m;
        tot += m;
    }
    *m_max = mm;
    *total = tot;
    /* first[] (P + 1 entries, an even count of floats), the losses (doubles), node()'s
     * levels, the own roots, every root's segment, the top's levels, a packed segment;
     * P <= 2^16 and a root count of about 2 log2 S per rank keep this far below 2^64 */
    uint64_t seg = n / P + 1, f = ((uint64_t)P + 2) / 2 * 2 + 2 * (uint64_t)tot;
    f += (uint64_t)levels(per) * n + (uint64_t)mm * n;
    f += (uint64_t)tot * seg + (uint64_t)levels(S) * seg + (uint64_t)mm * seg;
    return f > SIZE_MAX / sizeof(float) ? SIZE_MAX : (size_t)f;
}

static int any_ranks_grad(induct_optimizer *o, tree *t, uint32_t S, double *sum) {
    const induct_comm *c = &o->comm;
    uint32_t P = c->n_ranks, r = c->rank, per = S / P, m_max, total;
    size_t n = t->n;
    (void)any_ranks_floats(S, P, n, &m_max, &total);
    float *b = o->shard_buf;
    uint32_t *first = (uint32_t *)b;
    b += ((size_t)P + 2) / 2 * 2; /* an even count: the doubles below stay 8-byte aligned */
    double *loss = (double *)b;
    b += 2 * (size_t)total;
    first[0] = 0;
    for (uint32_t j = 0; j < P; j++) first[j + 1] = first[j] + roots_in(0, S, j * per, (j + 1) * per);
    uint32_t m_r = first[r + 1] - first[r];
    tree lt = *t;
    lt.buf = b; /* node()'s levels */
    b += (size_t)levels(per) * n;
    float *own = b;
    b += (size_t)m_max * n;
    size_t off = seg_at(n, P, r), seg = seg_at(n, P, r + 1) - off, smax = n / P + 1;
    float *recv = b;
    b += (size_t)total * seg;
    float *lv = b;
    b += (size_t)levels(S) * smax;
    float *pack = b;
    /* this rank's roots, in tree order: node() over each maximal node in its shards */
    uint32_t i = 0;
    for (uint32_t lo = r * per; lo < (r + 1) * per; i++) {
        uint32_t k = 1; /* the root starting at lo: the largest node inside the rank */
        for (uint32_t a = 0, len = S;;) { /* descend from the top to the node at lo */
            if (a == lo && (a + len - 1) / per == r) {
                k = len;
                break;
            }
            uint32_t kl = len - len / 2;
            if (lo < a + kl) len = kl;
            else a += kl, len /= 2;
        }
        INDUCT_TRY(node(&lt, lo, k, 0, own + (size_t)i * n, &loss[first[r] + i]));
        lo += k;
    }
    /* every root's loss to every rank; every root's segment j to rank j */
    for (uint32_t round = 0; round < rr_rounds(P); round++) {
        uint32_t q = rr_partner(P, round, r);
        if (q == UINT32_MAX) continue;
        uint32_t m_q = first[q + 1] - first[q];
        size_t qoff = seg_at(n, P, q), qseg = seg_at(n, P, q + 1) - qoff;
        int rc = c->sendrecv(c->user, q, loss + first[r], m_r * sizeof(double), loss + first[q],
                             m_q * sizeof(double));
        INDUCT_TRY(induct__comm_status(rc, "sendrecv (loss)"));
        for (uint32_t k = 0; k < m_r; k++)
            memcpy(pack + (size_t)k * qseg, own + (size_t)k * n + qoff, qseg * sizeof(float));
        rc = c->sendrecv(c->user, q, pack, (size_t)m_r * qseg * sizeof(float),
                         recv + (size_t)first[q] * seg, (size_t)m_q * seg * sizeof(float));
        INDUCT_TRY(induct__comm_status(rc, "sendrecv (reduce-scatter)"));
    }
    /* the top of the tree on this rank's segment, into the gradient */
    float *g = o->model->grads;
    top tp = {per, r, first, own, recv, n, off, seg, lv, loss, 0};
    top_node(&tp, 0, S, 0, g + off, sum);
    for (uint32_t round = 0; round < rr_rounds(P); round++) { /* all-gather */
        uint32_t q = rr_partner(P, round, r);
        if (q == UINT32_MAX) continue;
        size_t qoff = seg_at(n, P, q), qseg = seg_at(n, P, q + 1) - qoff;
        int rc = c->sendrecv(c->user, q, g + off, seg * sizeof(float), g + qoff,
                             qseg * sizeof(float));
        INDUCT_TRY(induct__comm_status(rc, "sendrecv (all-gather)"));
    }
    return INDUCT_OK;
}

static int shards_grad(induct_optimizer *o, const induct__pass *p, double *loss) {
    induct_model *m = o->model;
    uint32_t S = (uint32_t)o->grad_shards, P = o->has_comm ? o->comm.n_ranks : 1;
    INDUCT_FAIL_IF(p->B % S, INDUCT_EINVAL,
                   "training step: batch %u is not a multiple of INDUCT_OPT_GRAD_SHARDS %u",
                   p->B, S);
    INDUCT_FAIL_IF(S % P, INDUCT_EINVAL,
                   "training step: INDUCT_OPT_GRAD_SHARDS %u is not a multiple of the "
                   "communicator's %u ranks",
                   S, P);
    uint32_t per = S / P, lv = levels(per), m_max, total;
    size_t n = m->n_params, need = (size_t)lv * n + (P > 1 ? n - n / 2 : 0);
    if (P > 1 && !pow2(P)) need = any_ranks_floats(S, P, n, &m_max, &total);
    INDUCT_FAIL_IF(need == SIZE_MAX, INDUCT_ELIMIT,
                   "training step: the shard tree's buffers for %u shards over %u ranks "
                   "overflow", S, P);
    if (need > o->shard_buf_n) {
        uint64_t old = (uint64_t)o->shard_buf_n * sizeof(float), want = (uint64_t)need * 4u;
        INDUCT_TRY(induct__model_reserve(m, want, old, "the gradient shards' partial sums"));
        float *nb = malloc(need * sizeof(float));
        INDUCT_FAIL_IF(!nb, INDUCT_ENOMEM, "out of memory: %zu floats of shard partial sums",
                       need);
        free(o->shard_buf);
        induct__model_held(m, want, old);
        o->shard_buf = nb;
        o->shard_buf_n = need;
    }
    tree t = {o, p, p->B / S, n, o->shard_buf};
    double sum = 0.0;
    if (P > 1 && !pow2(P)) {
        INDUCT_TRY(any_ranks_grad(o, &t, S, &sum));
    } else {
        INDUCT_TRY(node(&t, (P > 1 ? o->comm.rank : 0) * per, per, 0, m->grads, &sum));
    }
    if (P > 1 && pow2(P))
        INDUCT_TRY(induct__comm_tree_sum(&o->comm, m->grads, n, o->shard_buf + (size_t)lv * n,
                                         &sum));
    double count = (double)p->B * (p->score_pos ? 1 : p->T - 1);
    *loss = sum / count;
    return INDUCT_OK;
}

int induct__shards_grad(induct_optimizer *o, const induct__pass *p, double *loss) {
    int rc = shards_grad(o, p, loss);
    /* a failing rank may leave its peers waiting in a sendrecv: release them */
    if (rc != INDUCT_OK && o->has_comm && o->comm.n_ranks > 1 && o->comm.abort)
        o->comm.abort(o->comm.user, rc);
    return rc;
}

/* ---- ranks that are threads ------------------------------------------------------ */

typedef struct box { /* messages from one rank to another */
    const void *buf;
    size_t bytes;
    uint64_t posted, taken; /* sequence numbers: posted by the sender, taken by the receiver */
    int reading;            /* the receiver is copying from buf */
    int bad;                /* the receiver expected another size */
} box;

typedef struct thread_rank {
    induct_comm comm;
    struct induct_comm_threads *g;
    uint32_t rank;
} thread_rank;

struct induct_comm_threads {
    uint32_t P;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int aborted;
    uint64_t barrier_gen;
    uint32_t barrier_in;
    box *boxes;     /* [P][P]: boxes[from * P + to] */
    uint64_t *sent; /* [P][P]: messages from -> to so far */
    thread_rank *ranks;
};

static int tr_sendrecv(void *user, uint32_t peer, const void *sendbuf, size_t send_bytes,
                       void *recvbuf, size_t recv_bytes) {
    thread_rank *tr = user;
    struct induct_comm_threads *g = tr->g;
    uint32_t r = tr->rank, P = g->P;
    if (peer >= P || peer == r) return INDUCT_EINVAL;
    box *out = &g->boxes[(size_t)r * P + peer], *in = &g->boxes[(size_t)peer * P + r];
    int rc = INDUCT_OK;
    pthread_mutex_lock(&g->mu);
    uint64_t seq = ++g->sent[(size_t)r * P + peer];
    out->buf = sendbuf;
    out->bytes = send_bytes;
    out->bad = 0;
    out->posted = seq;
    pthread_cond_broadcast(&g->cv);
    while (!g->aborted && in->posted < seq) pthread_cond_wait(&g->cv, &g->mu);
    if (g->aborted) { /* the peer may have returned: its buffer is not read any more */
        rc = INDUCT_EINTERRUPTED;
    } else if (in->bytes != recv_bytes) {
        in->bad = 1; /* the sender fails too */
        in->taken = seq;
        rc = INDUCT_EINVAL;
    } else {
        const void *src = in->buf;
        in->reading = 1; /* the sender waits for this copy even after an abort */
        pthread_mutex_unlock(&g->mu);
        if (recv_bytes) memcpy(recvbuf, src, recv_bytes);
        pthread_mutex_lock(&g->mu);
        in->reading = 0;
        in->taken = seq;
    }
    pthread_cond_broadcast(&g->cv);
    /* sendbuf must stay valid until the peer has copied it (or never will) */
    while (out->reading || (!g->aborted && out->taken < seq)) pthread_cond_wait(&g->cv, &g->mu);
    if (rc == INDUCT_OK && out->taken < seq) rc = INDUCT_EINTERRUPTED;
    if (rc == INDUCT_OK && out->bad) rc = INDUCT_EINVAL;
    pthread_mutex_unlock(&g->mu);
    return rc;
}

static int tr_barrier(void *user) {
    thread_rank *tr = user;
    struct induct_comm_threads *g = tr->g;
    int rc = INDUCT_OK;
    pthread_mutex_lock(&g->mu);
    uint64_t gen = g->barrier_gen;
    if (++g->barrier_in == g->P) {
        g->barrier_in = 0;
        g->barrier_gen++;
        pthread_cond_broadcast(&g->cv);
    }
    while (!g->aborted && g->barrier_gen == gen) pthread_cond_wait(&g->cv, &g->mu);
    if (g->barrier_gen == gen) rc = INDUCT_EINTERRUPTED;
    pthread_mutex_unlock(&g->mu);
    return rc;
}

static void tr_abort(void *user, int status) {
    (void)status;
    thread_rank *tr = user;
    pthread_mutex_lock(&tr->g->mu);
    tr->g->aborted = 1;
    pthread_cond_broadcast(&tr->g->cv);
    pthread_mutex_unlock(&tr->g->mu);
}

INDUCT_API int induct_comm_threads_new(induct_comm_threads **out, uint32_t n) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_comm_threads_new: out is NULL");
    *out = NULL;
    INDUCT_FAIL_IF(n < 1 || n > THREAD_RANKS_MAX, INDUCT_EINVAL,
                   "induct_comm_threads_new: n_ranks %u is not in 1 ... %u", n,
                   THREAD_RANKS_MAX);
    struct induct_comm_threads *g = calloc(1, sizeof *g);
    if (g) {
        g->boxes = calloc((size_t)n * n, sizeof *g->boxes);
        g->sent = calloc((size_t)n * n, sizeof *g->sent);
        g->ranks = calloc(n, sizeof *g->ranks);
    }
    if (!g || !g->boxes || !g->sent || !g->ranks) {
        if (g) {
            free(g->boxes);
            free(g->sent);
            free(g->ranks);
        }
        free(g);
        return induct__fail(INDUCT_ENOMEM, "out of memory for %u thread ranks", n);
    }
    if (pthread_mutex_init(&g->mu, NULL)) {
        free(g->boxes);
        free(g->sent);
        free(g->ranks);
        free(g);
        return induct__fail(INDUCT_ENOMEM, "induct_comm_threads_new: no mutex");
    }
    if (pthread_cond_init(&g->cv, NULL)) {
        pthread_mutex_destroy(&g->mu);
        free(g->boxes);
        free(g->sent);
        free(g->ranks);
        free(g);
        return induct__fail(INDUCT_ENOMEM, "induct_comm_threads_new: no condition variable");
    }
    g->P = n;
    for (uint32_t r = 0; r < n; r++) {
        thread_rank *tr = &g->ranks[r];
        tr->g = g;
        tr->rank = r;
        tr->comm.size = sizeof(induct_comm);
        tr->comm.rank = r;
        tr->comm.n_ranks = n;
        tr->comm.user = tr;
        tr->comm.sendrecv = tr_sendrecv;
        tr->comm.barrier = tr_barrier;
        tr->comm.abort = tr_abort;
    }
    *out = g;
    return INDUCT_OK;
}

INDUCT_API const induct_comm *induct_comm_threads_rank(const induct_comm_threads *g,
                                                       uint32_t rank) {
    if (!g) {
        induct__fail(INDUCT_EINVAL, "induct_comm_threads_rank: group is NULL");
        return NULL;
    }
    if (rank >= g->P) {
        induct__fail(INDUCT_ERANGE, "induct_comm_threads_rank: rank %u is not below %u", rank,
                     g->P);
        return NULL;
    }
    return &g->ranks[rank].comm;
}

INDUCT_API void induct_comm_threads_free(induct_comm_threads *g) {
    if (!g) return;
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g->boxes);
    free(g->sent);
    free(g->ranks);
    free(g);
}
