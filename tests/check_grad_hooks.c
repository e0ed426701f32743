/* Gradient hooks (induct_model_backward_with_grad_hooks): the gradient each hook point
 * gets is the derivative of the mean loss with respect to an additive perturbation of
 * that activation (central finite differences through a forward hook that adds ±eps to
 * one element), on every architecture variant and every point, with and without writing
 * forward hooks; what a gradient hook writes is what flows on (linearly, zeros stop it,
 * a hand-computed W_Q gradient); the order of the calls; reading hooks change no bit;
 * errors. The same gradients against PyTorch autograd are in
 * bindings/python/tests/test_lens.py. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

enum { GB = 2, GT = 7, FB = 6, FT = 8 }; /* FB x FT: layer 0 folded without LayerNorm */
enum { MAX_POINTS = 64 };

static float *floats(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    return p;
}

static induct_model *make_std(const tu_variant *v, uint64_t seed, double std) {
    induct_model_config c;
    tu_tiny_config(&c);
    tu_variant_apply(&c, v);
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, std, seed);
    return m;
}

static induct_model *make(const tu_variant *v, uint64_t seed) { return make_std(v, seed, 0.5); }

/* The model's hook point names in pass order; returns their number. */
static size_t points(induct_model *m, char names[][64]) {
    size_t n = 0;
    for (;; n++) {
        ck_assert_uint_lt(n, MAX_POINTS);
        int rc = induct_model_hook_point(m, n, names[n], 64, NULL);
        if (rc == INDUCT_ERANGE) return n;
        ck_ok(rc);
    }
}

static size_t numel(const uint32_t *shape, uint32_t ndim) {
    size_t n = 1;
    for (uint32_t k = 0; k < ndim; k++) n *= shape[k];
    return n;
}

/* A gradient hook that keeps a copy of what it is given (and checks the shape). */
typedef struct keep_arg {
    float *g;
    size_t n;
    int calls;
} keep_arg;

static int keep(void *user, const char *name, float *g, const uint32_t *shape, uint32_t ndim) {
    keep_arg *a = user;
    (void)name;
    ck_assert_uint_eq(numel(shape, ndim), a->n);
    memcpy(a->g, g, a->n * sizeof *g);
    a->calls++;
    return 0;
}

/* A forward hook that adds `delta` to element `at`. */
typedef struct nudge_arg {
    size_t at;
    float delta;
} nudge_arg;

static int nudge(void *user, const char *name, float *x, const uint32_t *shape, uint32_t ndim) {
    const nudge_arg *a = user;
    (void)name;
    ck_assert_uint_lt(a->at, numel(shape, ndim));
    x[a->at] += a->delta;
    return 0;
}

/* Writing forward hooks for the "with writes" runs: head 1 of layer 1's pattern clamped
 * to the previous token (constants), and head 0 of layer 0's z zeroed. */
static uint32_t HEAD1 = 1;

static int zero_head0_z(void *user, const char *name, float *z, const uint32_t *shape,
                        uint32_t ndim) {
    (void)user, (void)name, (void)ndim;
    size_t rows = (size_t)shape[0] * shape[1], E = shape[3];
    for (size_t r = 0; r < rows; r++) memset(z + r * shape[2] * E, 0, E * sizeof *z);
    return 0;
}

static const induct_hook WRITES[2] = {
    {"blocks.1.attn.hook_pattern", tu_clamp_previous_token, &HEAD1},
    {"blocks.0.attn.hook_z", zero_head0_z, NULL},
};

/* The derivative by central differences with one Richardson step, R = (4 D(eps) -
 * D(2 eps)) / 3 with D(e) = (L(+e) - L(-e)) / (2 e), whose truncation error is
 * O(eps^4). The models' weights are N(0, FD_STD^2 = 0.3^2): their losses lie near the
 * uniform ln 11 = 2.4 nats and curve mildly (at N(0, 0.5^2) losses reach 15 nats, and
 * D(1e-2) of a pattern entry is off by its own size: eps would have to be under 1e-3,
 * where float32 rounding takes over). The forward pass is float32: the mean loss of a
 * pass carries about 1e-7 nats of rounding, so R carries up to (4 + 1) * 2e-7 / (6 eps),
 * about 2e-5 at eps = 1e-2; hence |analytic - R| <= 5e-5 + 1e-3 |R|. A wrong factor, a
 * missed path or the gradient of another element is off by the gradient's own size
 * (1e-3 .. 1e-1 here). */
#define FD_EPS 1e-2f
#define FD_ATOL 5e-5
#define FD_RTOL 1e-3
#define FD_STD 0.3

/* D(e) at element `at` (the nudge hook is last in fwd[0 .. n)). */
static double central(induct_model *m, const int32_t *tok, uint32_t b, uint32_t t,
                      const induct_hook *fwd, size_t n, nudge_arg *na, size_t at, float e,
                      int *same) {
    double lp, lm;
    *na = (nudge_arg){at, e};
    ck_ok(induct_model_run_with_hooks(m, tok, b, t, fwd, n, NULL, 0, NULL, 0, &lp));
    na->delta = -e;
    ck_ok(induct_model_run_with_hooks(m, tok, b, t, fwd, n, NULL, 0, NULL, 0, &lm));
    if (same) *same = lp == lm;
    return (lp - lm) / (2.0 * e);
}

/* Runs of the finite-difference test: every variant, with and without WRITES; the
 * variants without LayerNorm (layer 0 folded at FB x FT) also at that shape. */
#define N_FD_RUNS (2 * TU_N_VARIANTS + TU_N_VARIANTS)

START_TEST(test_gradients_match_finite_differences) {
    int vi = _i % TU_N_VARIANTS, mode = _i / TU_N_VARIANTS; /* 0 plain, 1 writes, 2 folded */
    const tu_variant *v = &TU_VARIANTS[vi];
    if (mode == 2 && v->layer_norm) return; /* LayerNorm models never fold layer 0 */
    induct_model *m = make_std(v, 3 + (uint64_t)vi, FD_STD);
    uint32_t b = mode == 2 ? FB : GB, t = mode == 2 ? FT : GT;
    int32_t tok[FB * FT];
    tu_tokens(tok, (size_t)b * t, 11, 17);
    size_t n_fwd = mode == 1 ? 2 : 0;
    char names[MAX_POINTS][64];
    size_t np = points(m, names), checked = 0;
    for (size_t k = 0; k < np; k++) {
        uint32_t shape[4], nd;
        size_t n;
        ck_ok(induct_model_hook_shape(m, names[k], b, t, shape, &nd, &n));
        keep_arg ka = {floats(n), n, 0};
        induct_hook gh = {names[k], keep, &ka};
        double l0;
        ck_ok(induct_model_backward_with_grad_hooks(m, tok, b, t, WRITES, n_fwd, &gh, 1, &l0));
        ck_assert_int_eq(ka.calls, 1);
        induct_hook fwd[3] = {WRITES[0], WRITES[1], {names[k], nudge, NULL}};
        nudge_arg na = {0, 0.0f};
        fwd[n_fwd] = (induct_hook){names[k], nudge, &na};
        int attn = strstr(names[k], "hook_attn_scores") || strstr(names[k], "hook_pattern");
        double norm = 0.0;
        for (size_t i = 0; i < n; i++) {
            double g = ka.g[i];
            size_t q = i / t % t, key = i % t;
            int same;
            if (attn && key > q) { /* above the diagonal: ignored by the pass, exactly 0 */
                central(m, tok, b, t, fwd, n_fwd + 1, &na, i, FD_EPS, &same);
                ck_assert_msg(g == 0.0 && same, "%s %s[%zu]: %g above the diagonal", v->name,
                              names[k], i, g);
                continue;
            }
            double d1 = central(m, tok, b, t, fwd, n_fwd + 1, &na, i, FD_EPS, NULL);
            double d2 = central(m, tok, b, t, fwd, n_fwd + 1, &na, i, 2 * FD_EPS, NULL);
            double fd = (4.0 * d1 - d2) / 3.0;
            ck_assert_msg(fabs(g - fd) <= FD_ATOL + FD_RTOL * fabs(fd),
                          "%s%s%s: %s[%zu] gradient %.6g vs finite difference %.6g", v->name,
                          mode == 1 ? " with writes" : "", mode == 2 ? " folded" : "", names[k],
                          i, g, fd);
            norm += g * g;
            checked++;
        }
        /* not a vacuous match: every point carries a gradient of the gradient's size */
        ck_assert_msg(sqrt(norm) > 10 * FD_ATOL, "%s: %s has no gradient (%g)", v->name, names[k],
                      sqrt(norm));
        free(ka.g);
    }
    ck_assert_uint_gt(checked, 1000);
    induct_model_free(m);
}
END_TEST

/* A gradient hook that scales what it is given by `c`. */
static int scale_grad(void *user, const char *name, float *g, const uint32_t *shape,
                      uint32_t ndim) {
    float c = *(const float *)user;
    (void)name;
    for (size_t i = 0, n = numel(shape, ndim); i < n; i++) g[i] *= c;
    return 0;
}

/* What a gradient hook writes is what flows on: the parameter gradients are linear in it,
 * grad(c G) = grad(0) + c (grad(G) - grad(0)) for c = 2, at every point of every variant.
 * grad(G) (the hook writing nothing) takes the backward's fused paths, grad(0) and
 * grad(2 G) the paths that follow a changed gradient (at the pattern and scores the
 * unfused attention backward, at a LayerNorm the input gradient from d(normalized)), so
 * the check also holds those paths to the fused ones. Writing zeros changes the
 * gradients (the point is on the loss's path). */
START_TEST(test_written_gradient_flows_on_linearly) {
    const tu_variant *v = &TU_VARIANTS[_i];
    induct_model *m = make(v, 5 + (uint64_t)_i);
    int32_t tok[GB * GT];
    tu_tokens(tok, GB * GT, 11, 23);
    size_t P = induct_model_n_params(m);
    char names[MAX_POINTS][64];
    size_t np = points(m, names);
    for (size_t k = 0; k < np; k++) {
        float c[3] = {1.0f, 0.0f, 2.0f};
        float *g[3];
        double l[3];
        for (int r = 0; r < 3; r++) {
            induct_hook gh = {names[k], scale_grad, &c[r]};
            ck_ok(induct_model_backward_with_grad_hooks(m, tok, GB, GT, NULL, 0, &gh, 1, &l[r]));
            g[r] = tu_grads(m);
        }
        ck_assert(l[0] == l[1] && l[1] == l[2]); /* the forward pass is the same */
        double d2 = 0.0, n2 = 0.0, z2 = 0.0;
        for (size_t i = 0; i < P; i++) {
            double want = (double)g[1][i] + 2.0 * ((double)g[0][i] - g[1][i]);
            d2 += (g[2][i] - want) * (g[2][i] - want);
            n2 += (double)g[0][i] * g[0][i];
            z2 += ((double)g[0][i] - g[1][i]) * ((double)g[0][i] - g[1][i]);
        }
        /* float32 sums of a few dozen terms: relative rounding well under 1e-5 */
        ck_assert_msg(sqrt(d2) <= 1e-5 * sqrt(n2), "%s: %s: |grad(2G) - linear| = %g of %g",
                      v->name, names[k], sqrt(d2), sqrt(n2));
        ck_assert_msg(sqrt(z2) > 1e-3 * sqrt(n2), "%s: zeros at %s change no gradient", v->name,
                      names[k]);
        for (int r = 0; r < 3; r++) free(g[r]);
    }
    induct_model_free(m);
}
END_TEST

/* Every parameter gradient of a tensor, by name. */
static float *grad_of(induct_model *m, const char *name, size_t *n) {
    size_t len = 0;
    ck_assert_status(induct_model_get_tensor(m, name, INDUCT_BUF_GRAD, NULL, 0, &len),
                     INDUCT_EBUFSIZE);
    float *g = floats(len);
    ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_GRAD, g, len, &len));
    *n = len;
    return g;
}

static int zero_grad(void *user, const char *name, float *g, const uint32_t *shape,
                     uint32_t ndim) {
    (void)user, (void)name;
    memset(g, 0, numel(shape, ndim) * sizeof *g);
    return 0;
}

/* Zeros at blocks.1.hook_resid_pre (the residual stream between the layers) stop the
 * gradient: every parameter of layer 0 and the embeddings get exactly 0; the layer-1
 * and unembedding gradients are computed before that point and keep their bits. */
START_TEST(test_zero_gradient_stops_upstream) {
    const tu_variant *v = &TU_VARIANTS[_i];
    induct_model *m = make(v, 9);
    int32_t tok[GB * GT];
    tu_tokens(tok, GB * GT, 11, 29);
    double l0, l1;
    ck_ok(induct_model_backward(m, tok, GB, GT, &l0));
    float *plain = tu_grads(m);
    induct_hook gh = {"blocks.1.hook_resid_pre", zero_grad, NULL};
    ck_ok(induct_model_backward_with_grad_hooks(m, tok, GB, GT, NULL, 0, &gh, 1, &l1));
    ck_assert(l0 == l1);
    float *g = tu_grads(m);
    size_t off = 0, upstream = 0;
    for (size_t i = 0; i < induct_model_n_tensors(m); i++) {
        const char *name;
        size_t n;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &n));
        /* shortformer positions in every layer: layer 1 reads W_pos too */
        int pos_later = v->positional == INDUCT_POS_SHORTFORMER && v->shortformer_layers != 1;
        if (!strcmp(name, "pos_embed.W_pos") && pos_later) {
            off += n;
            continue;
        }
        int before = !strncmp(name, "blocks.0.", 9) || !strcmp(name, "embed.W_E") ||
                     !strcmp(name, "pos_embed.W_pos");
        for (size_t j = 0; j < n; j++) {
            if (before)
                ck_assert_msg(g[off + j] == 0.0f, "%s: %s[%zu] = %g behind a zeroed gradient",
                              v->name, name, j, g[off + j]);
            else
                ck_assert_msg(memcmp(&g[off + j], &plain[off + j], sizeof *g) == 0,
                              "%s: %s[%zu] changed (%g, plain %g)", v->name, name, j, g[off + j],
                              plain[off + j]);
        }
        upstream += before ? n : 0;
        off += n;
    }
    ck_assert_uint_gt(upstream, 100);
    free(g);
    free(plain);
    induct_model_free(m);
}
END_TEST

/* A chosen gradient G at blocks.0.attn.hook_q of an attention-only model without
 * LayerNorm (q = resid_pre W_Q + b_Q at layer 0, resid_pre cached): W_Q's gradient is
 * then by hand dW_Q[h][d][j] = sum_n resid_pre[n][d] G[n][h][j] and b_Q's sum_n G[n][h][j]
 * (q is read by nothing else), at the unfolded and the folded shape. */
static int set_known(void *user, const char *name, float *g, const uint32_t *shape,
                     uint32_t ndim) {
    (void)user, (void)name;
    for (size_t i = 0, n = numel(shape, ndim); i < n; i++)
        g[i] = 0.01f * (float)((int)(i * 37 % 23) - 11);
    return 0;
}

START_TEST(test_written_gradient_by_hand) {
    static const uint32_t shapes[2][2] = {{GB, GT}, {FB, FT}};
    induct_model *m = make(&TU_VARIANTS[0], 13);
    const uint32_t D = 8, H = 2, E = 4;
    for (int s = 0; s < 2; s++) {
        uint32_t b = shapes[s][0], t = shapes[s][1];
        size_t N = (size_t)b * t;
        int32_t tok[FB * FT];
        tu_tokens(tok, N, 11, 31);
        const char *rp_name = "blocks.0.hook_resid_pre";
        float *rp = floats(N * D), *G = floats(N * H * E);
        size_t cap = N * D;
        ck_ok(induct_model_run_with_cache(m, tok, b, t, &rp_name, &rp, &cap, 1, NULL, 0, NULL));
        uint32_t shape[4] = {b, t, H, E};
        set_known(NULL, NULL, G, shape, 4);
        induct_hook gh = {"blocks.0.attn.hook_q", set_known, NULL};
        ck_ok(induct_model_backward_with_grad_hooks(m, tok, b, t, NULL, 0, &gh, 1, NULL));
        size_t nw, nb;
        float *dW = grad_of(m, "blocks.0.attn.W_Q", &nw), *db = grad_of(m, "blocks.0.attn.b_Q", &nb);
        ck_assert_uint_eq(nw, (size_t)H * D * E);
        ck_assert_uint_eq(nb, (size_t)H * E);
        for (size_t h = 0; h < H; h++)
            for (size_t j = 0; j < E; j++) {
                double sb = 0.0;
                for (size_t n = 0; n < N; n++) sb += G[(n * H + h) * E + j];
                ck_assert_msg(fabs(db[h * E + j] - sb) <= 1e-5, "b_Q[%zu][%zu] %g vs %g", h, j,
                              db[h * E + j], sb);
                for (size_t d = 0; d < D; d++) {
                    double sw = 0.0;
                    for (size_t n = 0; n < N; n++) sw += (double)rp[n * D + d] * G[(n * H + h) * E + j];
                    float got = dW[(h * D + d) * E + j];
                    ck_assert_msg(fabs(got - sw) <= 1e-5 * (1.0 + fabs(sw)),
                                  "%u x %u: W_Q[%zu][%zu][%zu] %g vs by hand %g", b, t, h, d, j,
                                  got, sw);
                }
            }
        free(dW);
        free(db);
        free(rp);
        free(G);
    }
    induct_model_free(m);
}
END_TEST

/* The order of the calls: the reverse of the forward pass's points. */
typedef struct order_arg {
    char seen[MAX_POINTS][64];
    size_t n;
} order_arg;

static int record(void *user, const char *name, float *g, const uint32_t *shape, uint32_t ndim) {
    order_arg *a = user;
    (void)g, (void)shape, (void)ndim;
    ck_assert_uint_lt(a->n, MAX_POINTS);
    snprintf(a->seen[a->n++], 64, "%s", name);
    return 0;
}

START_TEST(test_calls_in_reverse_pass_order) {
    const tu_variant *v = &TU_VARIANTS[_i];
    induct_model *m = make(v, 1);
    int32_t tok[GB * GT];
    tu_tokens(tok, GB * GT, 11, 3);
    char names[MAX_POINTS][64];
    size_t np = points(m, names);
    induct_hook gh[MAX_POINTS];
    order_arg oa = {{{0}}, 0};
    for (size_t k = 0; k < np; k++) gh[k] = (induct_hook){names[k], record, &oa};
    ck_ok(induct_model_backward_with_grad_hooks(m, tok, GB, GT, NULL, 0, gh, np, NULL));
    ck_assert_uint_eq(oa.n, np);
    for (size_t k = 0; k < np; k++)
        ck_assert_msg(!strcmp(oa.seen[k], names[np - 1 - k]), "%s: call %zu is %s, expected %s",
                      v->name, k, oa.seen[k], names[np - 1 - k]);
    induct_model_free(m);
}
END_TEST

/* Copy the gradient out and write the copy back (no bit changes). */
static int write_back(void *user, const char *name, float *g, const uint32_t *shape,
                      uint32_t ndim) {
    (void)name;
    size_t n = numel(shape, ndim);
    float *c = floats(n);
    memcpy(c, g, n * sizeof *g);
    memcpy(g, c, n * sizeof *g);
    free(c);
    (*(int *)user)++;
    return 0;
}

/* Gradient hooks that only read (all points at once, and each alone writing back) leave
 * the loss and every parameter gradient bit-identical to induct_model_backward_with_hooks
 * (here with WRITES in the forward pass too); at the folded shape the points that turn
 * folding off are left out. */
START_TEST(test_reading_hooks_change_no_bit) {
    const tu_variant *v = &TU_VARIANTS[_i % TU_N_VARIANTS];
    size_t n_fwd = _i < TU_N_VARIANTS ? 0 : 2;
    induct_model *m = make(v, 2);
    static const uint32_t shapes[2][2] = {{GB, GT}, {FB, FT}};
    for (int s = 0; s < 2; s++) {
        uint32_t b = shapes[s][0], t = shapes[s][1];
        int32_t tok[FB * FT];
        tu_tokens(tok, (size_t)b * t, 11, 41);
        double l0, l;
        ck_ok(induct_model_backward_with_hooks(m, tok, b, t, WRITES, n_fwd, &l0));
        float *g0 = tu_grads(m);
        size_t P = induct_model_n_params(m);
        char names[MAX_POINTS][64];
        size_t np = points(m, names), kept = 0;
        induct_hook all[MAX_POINTS];
        int calls = 0;
        for (size_t k = 0; k < np; k++) {
            int folds = s == 1 && !v->layer_norm &&
                        (!strcmp(names[k], "hook_embed") || !strcmp(names[k], "hook_pos_embed") ||
                         !strcmp(names[k], "blocks.0.hook_resid_pre"));
            if (folds) continue;
            all[kept++] = (induct_hook){names[k], write_back, &calls};
            int one = 0;
            induct_hook gh = {names[k], write_back, &one};
            ck_ok(induct_model_backward_with_grad_hooks(m, tok, b, t, WRITES, n_fwd, &gh, 1, &l));
            ck_assert_int_eq(one, 1);
            float *g = tu_grads(m);
            ck_assert_msg(l == l0 && memcmp(g, g0, P * sizeof *g) == 0,
                          "%s, %u x %u: a reading hook at %s changes the gradients", v->name, b,
                          t, names[k]);
            free(g);
        }
        ck_ok(induct_model_backward_with_grad_hooks(m, tok, b, t, WRITES, n_fwd, all, kept, &l));
        ck_assert_int_eq(calls, (int)kept);
        float *g = tu_grads(m);
        ck_assert_msg(l == l0 && memcmp(g, g0, P * sizeof *g) == 0,
                      "%s: reading hooks at every point change the gradients", v->name);
        free(g);
        free(g0);
    }
    induct_model_free(m);
}
END_TEST

static int stop(void *user, const char *name, float *g, const uint32_t *shape, uint32_t ndim) {
    (void)user, (void)name, (void)g, (void)shape, (void)ndim;
    return 7;
}

static int count(void *user, const char *name, float *g, const uint32_t *shape, uint32_t ndim) {
    (void)name, (void)g, (void)shape, (void)ndim;
    (*(int *)user)++;
    return 0;
}

START_TEST(test_errors) {
    induct_model *m = make(&TU_VARIANTS[0], 1); /* attention-only: no LayerNorm, no MLP */
    int32_t tok[GB * GT];
    tu_tokens(tok, GB * GT, 11, 3);
    int calls = 0;
    induct_hook ok = {"blocks.0.attn.hook_z", count, &calls};
    const char *fn = "induct_model_backward_with_grad_hooks";
#define BWD(gh, n) induct_model_backward_with_grad_hooks(m, tok, GB, GT, NULL, 0, (gh), (n), NULL)
    ck_assert_status(induct_model_backward_with_grad_hooks(NULL, tok, GB, GT, NULL, 0, &ok, 1,
                                                           NULL),
                     INDUCT_EINVAL);
    ck_assert_status(induct_model_backward_with_grad_hooks(m, NULL, GB, GT, NULL, 0, &ok, 1, NULL),
                     INDUCT_EINVAL);
    ck_assert_status(induct_model_backward_with_grad_hooks(m, tok, GB, 9, NULL, 0, &ok, 1, NULL),
                     INDUCT_ERANGE);
    ck_assert_status(BWD(NULL, 1), INDUCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), fn));
    induct_hook nofn = {"blocks.0.attn.hook_z", NULL, NULL};
    ck_assert_status(BWD(&nofn, 1), INDUCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "gradient hooks"));
    induct_hook unknown = {"blocks.0.attn.hook_zz", count, &calls};
    ck_assert_status(BWD(&unknown, 1), INDUCT_EINVAL);
    induct_hook missing = {"blocks.0.ln1.hook_normalized", count, &calls};
    ck_assert_status(BWD(&missing, 1), INDUCT_ERANGE);
    induct_hook layer = {"blocks.2.attn.hook_z", count, &calls};
    ck_assert_status(BWD(&layer, 1), INDUCT_ERANGE);
    induct_hook *many = malloc(4097 * sizeof *many);
    for (size_t i = 0; i < 4097; i++) many[i] = ok;
    ck_assert_status(BWD(many, 4097), INDUCT_ELIMIT);
    free(many);
    ck_assert_int_eq(calls, 0); /* nothing ran */
    /* a hook that returns nonzero stops the pass; the loss is not written */
    induct_hook st[2] = {{"blocks.1.attn.hook_pattern", stop, NULL}, ok};
    double l = -1.0;
    ck_assert_status(induct_model_backward_with_grad_hooks(m, tok, GB, GT, NULL, 0, st, 2, &l),
                     INDUCT_EINTERRUPTED);
    ck_assert(l == -1.0);
    ck_assert_int_eq(calls, 0); /* blocks.0's z comes after blocks.1's pattern */
    /* the pattern's gradient needs [B, H, T, T] of scratch: over a tight memory limit */
    ck_ok(induct_model_backward(m, tok, GB, GT, NULL));
    ck_ok(induct_model_set_max_bytes(m, induct_model_memory_used(m) + 64));
    induct_hook pat = {"blocks.1.attn.hook_pattern", count, &calls};
    ck_assert_status(BWD(&pat, 1), INDUCT_ELIMIT);
    ck_ok(induct_model_set_max_bytes(m, 0));
    ck_ok(BWD(&pat, 1));
    ck_assert_int_eq(calls, 1);
    /* ablated heads: no backward pass */
    ck_ok(induct_model_ablate_head(m, 0, 0, INDUCT_ABLATE_ZERO));
    ck_assert_status(BWD(&ok, 1), INDUCT_ESTATE);
    ck_ok(induct_model_clear_ablations(m));
    /* no gradient hooks: induct_model_backward_with_hooks, bit for bit */
    double la, lb;
    ck_ok(induct_model_backward_with_hooks(m, tok, GB, GT, WRITES, 2, &la));
    float *ga = tu_grads(m);
    ck_ok(induct_model_backward_with_grad_hooks(m, tok, GB, GT, WRITES, 2, NULL, 0, &lb));
    float *gb = tu_grads(m);
    ck_assert(la == lb && memcmp(ga, gb, induct_model_n_params(m) * sizeof *ga) == 0);
    free(ga);
    free(gb);
#undef BWD
    induct_model_free(m);
}
END_TEST

/* ---- induct_model_backward_from_logits: the gradients of a metric of the logits ---- */

/* The metric: a logit difference, Σ over the first two sequences b and positions
 * p ∈ {T/2, T-1} of logits[b, p, i] - logits[b, p, j] with i = (3 b + p) mod V,
 * j = (i + 5) mod V: the metric of patching experiments, 8 logits. d(metric)/d(logits) is
 * +1 at i, -1 at j. */
static double logit_diff(const float *lg, uint32_t B, uint32_t T, uint32_t V) {
    double s = 0.0;
    for (uint32_t b = 0; b < B && b < 2; b++)
        for (uint32_t p = T / 2; p < T; p += T - 1 - T / 2) {
            uint32_t i = (3 * b + p) % V, j = (i + 5) % V;
            const float *row = lg + ((size_t)b * T + p) * V;
            s += (double)row[i] - (double)row[j];
        }
    return s;
}

static int logit_diff_grad(void *user, const float *lg, float *dl, uint32_t B, uint32_t T,
                           uint32_t V) {
    (void)lg;
    if (user) (*(int *)user)++;
    for (uint32_t b = 0; b < B && b < 2; b++)
        for (uint32_t p = T / 2; p < T; p += T - 1 - T / 2) { /* T >= 4 here */
            uint32_t i = (3 * b + p) % V, j = (i + 5) % V;
            float *row = dl + ((size_t)b * T + p) * V;
            row[i] += 1.0f;
            row[j] -= 1.0f;
        }
    return 0;
}

/* The metric of the pass with forward hooks `fwd` (tu_gradcheck's loss). */
typedef struct metric_arg {
    const int32_t *tok;
    uint32_t B, T;
    const induct_hook *fwd;
    size_t n_fwd;
} metric_arg;

static double metric_of(void *user, induct_model *m) {
    const metric_arg *a = user;
    uint32_t V = 11;
    float *lg = floats((size_t)a->B * a->T * V);
    ck_ok(induct_model_run_with_hooks(m, a->tok, a->B, a->T, a->fwd, a->n_fwd, lg,
                                      (size_t)a->B * a->T * V, NULL, 0, NULL));
    double s = logit_diff(lg, a->B, a->T, V);
    free(lg);
    return s;
}

/* Every parameter's gradient of the logit difference against central differences
 * (tu_gradcheck: eps 2e-3, |fd - g| <= 2e-3 + 2e-2 |fd|; the metric sums 8 float32
 * logits of size ~1, whose rounding, ~1e-6, makes at most 5e-4 of the difference
 * quotient), on every variant, without and with writing forward hooks (constants). */
START_TEST(test_logits_metric_parameter_gradients) {
    int vi = _i % TU_N_VARIANTS, writes = _i / TU_N_VARIANTS;
    const tu_variant *v = &TU_VARIANTS[vi];
    induct_model *m = make_std(v, 40 + (uint64_t)vi, FD_STD);
    int32_t tok[GB * GT];
    tu_tokens(tok, GB * GT, 11, 23);
    size_t n_fwd = writes ? 2 : 0;
    int calls = 0;
    double loss;
    ck_ok(induct_model_backward_from_logits(m, tok, GB, GT, WRITES, n_fwd, NULL, 0,
                                            logit_diff_grad, &calls, &loss));
    ck_assert_int_eq(calls, 1);
    /* the loss reported is the pass's mean loss */
    double l2;
    ck_ok(induct_model_run_with_hooks(m, tok, GB, GT, WRITES, n_fwd, NULL, 0, NULL, 0, &l2));
    ck_assert_msg(fabs(loss - l2) <= 1e-6 * fabs(l2), "%g vs %g", loss, l2);
    metric_arg ma = {tok, GB, GT, WRITES, n_fwd};
    size_t n = tu_gradcheck(m, metric_of, &ma, v->name);
    ck_assert_uint_eq(n, induct_model_n_params(m));
    induct_model_free(m);
}
END_TEST

/* The gradient hooks of a metric pass see d(metric)/d(activation): central differences
 * with one Richardson step (as test_gradients_match_finite_differences) through a forward
 * hook adding ±eps, at every point of every variant, at up to 24 elements of each (a
 * stride through the tensor). The tolerance: the metric's rounding, ~1e-6 (8 logits),
 * makes at most 1.5 * 1e-6 / eps = 1.5e-4 of R at eps = 1e-2: |g - R| <= 3e-4 +
 * 1e-3 |R|. Above the diagonal of the pattern and scores the gradient is exactly 0. */
START_TEST(test_logits_metric_hook_gradients) {
    int vi = _i % TU_N_VARIANTS, mode = _i / TU_N_VARIANTS; /* 0 plain, 1 folded */
    const tu_variant *v = &TU_VARIANTS[vi];
    if (mode == 1 && v->layer_norm) return;
    induct_model *m = make_std(v, 60 + (uint64_t)vi, FD_STD);
    uint32_t b = mode ? FB : GB, t = mode ? FT : GT, V = 11;
    int32_t tok[FB * FT];
    tu_tokens(tok, (size_t)b * t, 11, 29);
    char names[MAX_POINTS][64];
    size_t np = points(m, names), checked = 0;
    double total = 0.0;
    float *lg = floats((size_t)b * t * V);
    for (size_t k = 0; k < np; k++) {
        uint32_t shape[4], nd;
        size_t n;
        ck_ok(induct_model_hook_shape(m, names[k], b, t, shape, &nd, &n));
        keep_arg ka = {floats(n), n, 0};
        induct_hook gh = {names[k], keep, &ka};
        ck_ok(induct_model_backward_from_logits(m, tok, b, t, NULL, 0, &gh, 1, logit_diff_grad,
                                                NULL, NULL));
        ck_assert_int_eq(ka.calls, 1);
        nudge_arg na = {0, 0.0f};
        induct_hook fwd = {names[k], nudge, &na};
        int attn = strstr(names[k], "hook_attn_scores") || strstr(names[k], "hook_pattern");
        size_t stride = n / 24 ? n / 24 : 1;
        double norm = 0.0;
        for (size_t i = k % stride; i < n; i += stride) {
            double g = ka.g[i], d[2];
            size_t q = i / t % t, key = i % t;
            for (int r = 0; r < 2; r++) {
                float e = r ? 2 * FD_EPS : FD_EPS;
                na = (nudge_arg){i, e};
                ck_ok(induct_model_run_with_hooks(m, tok, b, t, &fwd, 1, lg, (size_t)b * t * V,
                                                  NULL, 0, NULL));
                double mp = logit_diff(lg, b, t, V);
                na.delta = -e;
                ck_ok(induct_model_run_with_hooks(m, tok, b, t, &fwd, 1, lg, (size_t)b * t * V,
                                                  NULL, 0, NULL));
                d[r] = (mp - logit_diff(lg, b, t, V)) / (2.0 * e);
            }
            if (attn && key > q) {
                ck_assert_msg(g == 0.0 && d[0] == 0.0, "%s %s[%zu]: %g above the diagonal",
                              v->name, names[k], i, g);
                continue;
            }
            double fd = (4.0 * d[0] - d[1]) / 3.0;
            ck_assert_msg(fabs(g - fd) <= 3e-4 + 1e-3 * fabs(fd),
                          "%s%s: %s[%zu] gradient of the logit difference %.6g vs finite "
                          "difference %.6g", v->name, mode ? " folded" : "", names[k], i, g, fd);
            norm += g * g;
            checked++;
        }
        free(ka.g);
        total += norm;
    }
    ck_assert_uint_gt(checked, 200);
    ck_assert_msg(sqrt(total) > 0.1, "%s: no gradient (%g)", v->name, sqrt(total));
    free(lg);
    induct_model_free(m);
}
END_TEST

/* d(logits) = the mean loss's gradient, (softmax - one-hot) / (B (T - 1)) at positions
 * 0 .. T-2 (computed here in double), gives the gradients of induct_model_backward():
 * the same quantity by two float32 routes (the fused unembedding-cross-entropy backward
 * and the products from d(logits)), which differ by rounding: a few float32 ulps of the
 * terms summed, far below 1e-5 of the largest gradient for these 14 rows x 11 logits. */
static int loss_grad(void *user, const float *lg, float *dl, uint32_t B, uint32_t T, uint32_t V) {
    const int32_t *tok = user;
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t p = 0; p + 1 < T; p++) {
            const float *row = lg + ((size_t)b * T + p) * V;
            double mx = row[0], z = 0.0;
            for (uint32_t v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
            for (uint32_t v = 0; v < V; v++) z += exp(row[v] - mx);
            for (uint32_t v = 0; v < V; v++) {
                double sm = exp(row[v] - mx) / z - (v == (uint32_t)tok[b * T + p + 1]);
                dl[((size_t)b * T + p) * V + v] = (float)(sm / ((double)B * (T - 1)));
            }
        }
    return 0;
}

START_TEST(test_logits_loss_gradient_is_backward) {
    const tu_variant *v = &TU_VARIANTS[_i];
    induct_model *m = make(v, 80 + (uint64_t)_i);
    int32_t tok[GB * GT];
    tu_tokens(tok, GB * GT, 11, 31);
    double l0, l1;
    ck_ok(induct_model_backward_with_hooks(m, tok, GB, GT, WRITES, 2, &l0));
    float *g0 = tu_grads(m);
    ck_ok(induct_model_backward_from_logits(m, tok, GB, GT, WRITES, 2, NULL, 0, loss_grad, tok,
                                            &l1));
    float *g1 = tu_grads(m);
    size_t P = induct_model_n_params(m);
    double mx = 0.0, err = 0.0;
    for (size_t i = 0; i < P; i++) {
        mx = fmax(mx, fabs(g0[i]));
        err = fmax(err, fabs((double)g0[i] - g1[i]));
    }
    ck_assert(l0 == l1);
    ck_assert_msg(mx > 1e-3 && err <= 1e-5 * mx, "%s: max |difference| %g, max |gradient| %g",
                  v->name, err, mx);
    free(g0);
    free(g1);
    induct_model_free(m);
}
END_TEST

static int stop_logits(void *user, const float *lg, float *dl, uint32_t B, uint32_t T,
                       uint32_t V) {
    (void)user, (void)lg, (void)dl, (void)B, (void)T, (void)V;
    return 3;
}

static int nan_logits(void *user, const float *lg, float *dl, uint32_t B, uint32_t T,
                      uint32_t V) {
    (void)user, (void)lg;
    dl[((size_t)(B - 1) * T + 2) * V + 4] = NAN;
    return 0;
}

START_TEST(test_logits_errors) {
    induct_model *m = make(&TU_VARIANTS[0], 1);
    int32_t tok[GB * GT];
    tu_tokens(tok, GB * GT, 11, 3);
    int calls = 0;
    induct_hook z = {"blocks.0.attn.hook_z", count, &calls};
    double l = -1.0;
    ck_assert_status(induct_model_backward_from_logits(NULL, tok, GB, GT, NULL, 0, NULL, 0,
                                                       logit_diff_grad, NULL, &l),
                     INDUCT_EINVAL);
    ck_assert_status(induct_model_backward_from_logits(m, tok, GB, GT, NULL, 0, NULL, 0, NULL,
                                                       NULL, &l),
                     INDUCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "grad_fn"));
    ck_assert_status(induct_model_backward_from_logits(m, tok, GB, 9, NULL, 0, NULL, 0,
                                                       logit_diff_grad, NULL, &l),
                     INDUCT_ERANGE);
    induct_hook unknown = {"blocks.0.attn.hook_zz", count, &calls};
    ck_assert_status(induct_model_backward_from_logits(m, tok, GB, GT, NULL, 0, &unknown, 1,
                                                       logit_diff_grad, NULL, &l),
                     INDUCT_EINVAL);
    /* the function stops the call before any gradient hook; the loss is not written */
    ck_assert_status(induct_model_backward_from_logits(m, tok, GB, GT, NULL, 0, &z, 1,
                                                       stop_logits, NULL, &l),
                     INDUCT_EINTERRUPTED);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "returned 3"));
    ck_assert_int_eq(calls, 0);
    ck_assert(l == -1.0);
    /* a NaN left in d(logits): named by batch, position and token */
    ck_assert_status(induct_model_backward_from_logits(m, tok, GB, GT, NULL, 0, &z, 1,
                                                       nan_logits, NULL, &l),
                     INDUCT_ENUMERIC);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "batch 1, position 2, token 4"));
    ck_assert_int_eq(calls, 0);
    ck_assert(l == -1.0);
    /* the d(logits) buffer counts against the model's memory limit */
    ck_ok(induct_model_backward(m, tok, GB, GT, NULL));
    ck_ok(induct_model_set_max_bytes(m, induct_model_memory_used(m) + 64));
    ck_assert_status(induct_model_backward_from_logits(m, tok, GB, GT, NULL, 0, NULL, 0,
                                                       logit_diff_grad, NULL, &l),
                     INDUCT_ELIMIT);
    ck_ok(induct_model_set_max_bytes(m, 0));
    ck_ok(induct_model_backward_from_logits(m, tok, GB, GT, NULL, 0, &z, 1, logit_diff_grad,
                                            NULL, &l));
    ck_assert_int_eq(calls, 1);
    ck_assert(l > 0.0);
    induct_model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("grad_hooks");
    TCase *tc = tcase_create("grad_hooks");
    tcase_add_loop_test(tc, test_gradients_match_finite_differences, 0, N_FD_RUNS);
    tcase_add_loop_test(tc, test_written_gradient_flows_on_linearly, 0, TU_N_VARIANTS);
    tcase_add_loop_test(tc, test_zero_gradient_stops_upstream, 0, TU_N_VARIANTS);
    tcase_add_test(tc, test_written_gradient_by_hand);
    tcase_add_loop_test(tc, test_calls_in_reverse_pass_order, 0, TU_N_VARIANTS);
    tcase_add_loop_test(tc, test_reading_hooks_change_no_bit, 0, 2 * TU_N_VARIANTS);
    tcase_add_test(tc, test_errors);
    tcase_add_loop_test(tc, test_logits_metric_parameter_gradients, 0, 2 * TU_N_VARIANTS);
    tcase_add_loop_test(tc, test_logits_metric_hook_gradients, 0, 2 * TU_N_VARIANTS);
    tcase_add_loop_test(tc, test_logits_loss_gradient_is_backward, 0, TU_N_VARIANTS);
    tcase_add_test(tc, test_logits_errors);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
