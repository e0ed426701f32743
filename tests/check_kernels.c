/* Kernels (white box, lib/kernels/kernels.h and reference.h): every backward kernel
 * against central finite differences of a random scalar projection f = sum(r * out),
 * computed in double from the fp32 forward kernel; softmax and causal attention on extreme
 * finite scores.
 *
 * Conventions checked as kernels.h states them: outputs documented as "+="
 * are prefilled with random values and must come back as prefill + gradient;
 * outputs documented as "overwrite" are prefilled with NaN and must hold the
 * gradient alone.
 *
 * Tolerance (fp32 forward, double projection): |analytic - fd| <= ATOL + RTOL*|fd|
 * with the step EPS below. Measured worst ratios are printed (CK_VERBOSITY
 * does not hide stdout) so that a loosened tolerance is visible. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "testutil.h"

#define EPS 1e-2
#define ATOL 1e-4
#define RTOL 1e-3

/* ---- deterministic random numbers --------------------------------------- */
static uint64_t rng_state;
static void rng_seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ULL + 1; }
static uint64_t rng_u64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static double rng_unif(void) { return (double)(rng_u64() >> 11) / 9007199254740992.0; }
static double rng_normal(void) {
    double u1 = rng_unif() + 1e-300, u2 = rng_unif();
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
static float *randn(size_t n, double mean, double std) {
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(mean + std * rng_normal());
    return x;
}
static float *filled(size_t n, float v) {
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < n; i++) x[i] = v;
    return x;
}
static float *copy(const float *src, size_t n) {
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    memcpy(x, src, n * sizeof *x);
    return x;
}
static double dot(const float *r, const float *out, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)r[i] * out[i];
    return s;
}

/* ---- the finite-difference check ---------------------------------------- */
typedef double (*scalar_fn)(void *ctx);

/* For every x[j]: fd = (f(x+eps) - f(x-eps)) / (actual step), compared with
 * got[j] - base[j] (base NULL: 0), i.e. with what the kernel added. The
 * comparison is done as |got - (base + fd)| so no precision is lost when base
 * is large. Also requires the gradient not to be trivially zero. */
static void fd_check(const char *what, float *x, size_t n, const float *got, const float *base,
                     scalar_fn f, void *ctx) {
    double worst = 0.0, gmax = 0.0;
    size_t worst_j = 0;
    for (size_t j = 0; j < n; j++) {
        float orig = x[j];
        float xp = (float)(orig + EPS), xm = (float)(orig - EPS);
        x[j] = xp;
        double fp = f(ctx);
        x[j] = xm;
        double fm = f(ctx);
        x[j] = orig;
        double fd = (fp - fm) / ((double)xp - (double)xm);
        double b = base ? base[j] : 0.0;
        double err = fabs((double)got[j] - (b + fd));
        double ratio = err / (ATOL + RTOL * fabs(fd));
        ck_assert_msg(isfinite(got[j]), "%s[%zu]: gradient %g is not finite", what, j, got[j]);
        ck_assert_msg(ratio <= 1.0, "%s[%zu]: analytic %.7g vs finite difference %.7g (err %.3g)",
                      what, j, (double)got[j] - b, fd, err);
        if (ratio > worst) {
            worst = ratio;
            worst_j = j;
        }
        if (fabs(fd) > gmax) gmax = fabs(fd);
    }
    ck_assert_msg(gmax > 0.05, "%s: gradient is (nearly) zero everywhere, the check is vacuous",
                  what);
    printf("fd %-28s n=%-4zu max|grad| %.3g  worst err/tol %.3f at %zu\n", what, n, gmax, worst,
           worst_j);
}

/* ---- embed ----------------------------------------------------------------- */
typedef struct {
    size_t B, T, D;
    const int32_t *tok;
    float *W_E, *W_pos, *out;
    const float *r;
} embed_ctx;
static double embed_f(void *p) {
    embed_ctx *c = p;
    induct__embed_forward(c->out, c->tok, c->W_E, c->W_pos, c->B, c->T, c->D, 2);
    return dot(c->r, c->out, c->B * c->T * c->D);
}

START_TEST(test_embed) {
    enum { B = 2, T = 4, D = 5, V = 6 };
    rng_seed(1);
    /* repeated tokens: the gradient of a row is a sum over its occurrences */
    const int32_t tok[B * T] = {1, 3, 1, 5, 0, 3, 3, 1};
    embed_ctx c = {B, T, D, tok, randn(V * D, 0, 1), randn(T * D, 0, 1), filled(B * T * D, 0),
                   randn(B * T * D, 0, 1)};
    for (int with_pos = 1; with_pos >= 0; with_pos--) {
        float *keep_pos = c.W_pos;
        if (!with_pos) c.W_pos = NULL;
        float *g0E = randn(V * D, 0, 1), *g0P = randn(T * D, 0, 1);
        float *dE = copy(g0E, V * D), *dP = copy(g0P, T * D);
        induct__embed_backward(dE, with_pos ? dP : NULL, c.r, tok, B, T, D);
        fd_check(with_pos ? "embed dW_E" : "embed dW_E (no pos)", c.W_E, V * D, dE, g0E, embed_f,
                 &c);
        if (with_pos) fd_check("embed dW_pos", c.W_pos, T * D, dP, g0P, embed_f, &c);
        else ck_assert(memcmp(dP, g0P, T * D * sizeof *dP) == 0);
        /* a token that never occurs gets no gradient */
        for (size_t i = 0; i < D; i++) ck_assert_float_eq(dE[2 * D + i], g0E[2 * D + i]);
        c.W_pos = keep_pos;
        free(g0E), free(g0P), free(dE), free(dP);
    }
    free(c.W_E), free(c.W_pos), free(c.out), free((float *)c.r);
}
END_TEST

/* ---- add_pos / pos_backward -------------------------------------------------- */
typedef struct {
    size_t B, T, D;
    float *inp, *W_pos, *out;
    const float *r;
} pos_ctx;
static double pos_f(void *p) {
    pos_ctx *c = p;
    induct__add_pos(c->out, c->inp, c->W_pos, c->B, c->T, c->D, 2);
    return dot(c->r, c->out, c->B * c->T * c->D);
}

START_TEST(test_add_pos) {
    enum { B = 3, T = 4, D = 5 };
    rng_seed(2);
    pos_ctx c = {B, T, D, randn(B * T * D, 0, 1), randn(T * D, 0, 1), filled(B * T * D, 0),
                 randn(B * T * D, 0, 1)};
    float *g0 = randn(T * D, 0, 1), *dP = copy(g0, T * D);
    induct__pos_backward(dP, c.r, B, T, D);
    fd_check("pos_backward dW_pos", c.W_pos, T * D, dP, g0, pos_f, &c);
    /* the input's gradient is dout itself (identity): check the forward is inp + W_pos */
    pos_f(&c);
    for (size_t n = 0; n < B * T; n++)
        for (size_t i = 0; i < D; i++)
            ck_assert_float_eq(c.out[n * D + i], c.inp[n * D + i] + c.W_pos[(n % T) * D + i]);
    free(c.inp), free(c.W_pos), free(c.out), free((float *)c.r), free(g0), free(dP);
}
END_TEST

/* ---- layernorm ----------------------------------------------------------------- */
typedef struct {
    size_t N, D;
    float *inp, *w, *b, *out, *mean, *rstd;
    const float *r;
} ln_ctx;
static double ln_f(void *p) {
    ln_ctx *c = p;
    induct__layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->D, 2);
    return dot(c->r, c->out, c->N * c->D);
}

START_TEST(test_layernorm) {
    enum { N = 5, D = 7 };
    rng_seed(3);
    ln_ctx c = {N, D, randn(N * D, 0.5, 1.0), randn(D, 1.0, 0.3), randn(D, 0, 0.5),
                filled(N * D, 0), filled(N, 0), filled(N, 0), randn(N * D, 0, 1)};
    ln_f(&c);
    /* the forward against a double computation of its definition (biased variance, eps 1e-5) */
    for (size_t n = 0; n < N; n++) {
        double mu = 0, var = 0;
        for (size_t i = 0; i < D; i++) mu += c.inp[n * D + i];
        mu /= D;
        for (size_t i = 0; i < D; i++) var += pow(c.inp[n * D + i] - mu, 2);
        var /= D;
        for (size_t i = 0; i < D; i++) {
            double want = (c.inp[n * D + i] - mu) / sqrt(var + 1e-5) * c.w[i] + c.b[i];
            ck_assert_double_eq_tol(c.out[n * D + i], want, 1e-5 * (1 + fabs(want)));
        }
    }
    float *g0i = randn(N * D, 0, 1), *g0w = randn(D, 0, 1), *g0b = randn(D, 0, 1);
    float *di = copy(g0i, N * D), *dw = copy(g0w, D), *db = copy(g0b, D);
    induct__layernorm_backward(di, dw, db, c.r, c.inp, c.mean, c.rstd, c.w, N, D, 2);
    fd_check("layernorm dinp", c.inp, N * D, di, g0i, ln_f, &c);
    fd_check("layernorm dw", c.w, D, dw, g0w, ln_f, &c);
    fd_check("layernorm db", c.b, D, db, g0b, ln_f, &c);
    free(c.inp), free(c.w), free(c.b), free(c.out), free(c.mean), free(c.rstd), free((float *)c.r);
    free(g0i), free(g0w), free(g0b), free(di), free(dw), free(db);
}
END_TEST

/* The kernels run LayerNorm rows side by side and the parameter gradients' columns side
 * by side; every row and column must still get the operations of one row (column) at a
 * time, in order: the same bits as this transcription of the definition, for 1-3 threads,
 * with and without a hook mask, on sizes that leave partial groups (N 11, D 37). */
static void ln_rowwise(float *out, float *mean, float *rstd, float *dinp, float *dw, float *db,
                       const float *inp, const float *w, const float *b, const float *dout,
                       const float *xhat, const uint8_t *mask, size_t N, size_t D) {
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * D;
        double s = 0.0, v = 0.0;
        for (size_t i = 0; i < D; i++) s += x[i];
        double mu = s / (double)D;
        for (size_t i = 0; i < D; i++) v += (x[i] - mu) * (x[i] - mu);
        float r = (float)(1.0 / sqrt(v / (double)D + 1e-5)), m = (float)mu;
        for (size_t i = 0; i < D; i++) out[n * D + i] = (x[i] - m) * r * w[i] + b[i];
        mean[n] = m;
        rstd[n] = r;
    }
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * D, *g = dout + n * D;
        const uint8_t *mk = mask ? mask + n * D : NULL;
        double s1 = 0.0, s2 = 0.0;
        for (size_t i = 0; i < D; i++) {
            if (mk && mk[i]) continue;
            double xh = (x[i] - mean[n]) * rstd[n], gw = (double)g[i] * w[i];
            s1 += gw;
            s2 += gw * xh;
        }
        s1 /= (double)D;
        s2 /= (double)D;
        for (size_t i = 0; i < D; i++) {
            double xh = (x[i] - mean[n]) * rstd[n];
            double gw = mk && mk[i] ? 0.0 : (double)g[i] * w[i];
            dinp[n * D + i] += (float)((gw - s1 - xh * s2) * rstd[n]);
        }
    }
    for (size_t i = 0; i < D; i++) {
        double sw = 0.0, sb = 0.0;
        for (size_t n = 0; n < N; n++) {
            float g = dout[n * D + i];
            float xh = xhat ? xhat[n * D + i] : (inp[n * D + i] - mean[n]) * rstd[n];
            sw += (double)g * xh;
            sb += g;
        }
        dw[i] += (float)sw;
        db[i] += (float)sb;
    }
}

START_TEST(test_layernorm_bits) {
    enum { N = 11, D = 37 };
    rng_seed(4);
    float *inp = randn(N * D, 0.3, 2.0), *w = randn(D, 1.0, 0.3), *b = randn(D, 0, 0.5);
    float *dout = randn(N * D, 0, 1), *xhat = randn(N * D, 0, 1);
    uint8_t mask[N * D];
    for (size_t i = 0; i < N * D; i++) mask[i] = (uint8_t)(i % 5 == 2);
    float out0[N * D], mean0[N], rstd0[N], di0[N * D], dw0[D], db0[D];
    float out[N * D], mean[N], rstd[N], di[N * D], dw[D], db[D];
    for (int masked = 0; masked < 2; masked++) {
        const float *xh = masked ? xhat : NULL;
        const uint8_t *mk = masked ? mask : NULL;
        for (size_t i = 0; i < N * D; i++) di0[i] = 0.25f;
        for (size_t i = 0; i < D; i++) dw0[i] = db0[i] = -0.5f;
        ln_rowwise(out0, mean0, rstd0, di0, dw0, db0, inp, w, b, dout, xh, mk, N, D);
        for (int nt = 1; nt <= 3; nt++) {
            for (size_t i = 0; i < N * D; i++) di[i] = 0.25f;
            for (size_t i = 0; i < D; i++) dw[i] = db[i] = -0.5f;
            induct__layernorm_forward(out, mean, rstd, inp, w, b, N, D, nt);
            induct__layernorm_backward_hooked(di, dw, db, dout, inp, mean, rstd, w, xh, mk, N, D,
                                              nt);
            ck_assert(memcmp(out, out0, sizeof out) == 0);
            ck_assert(memcmp(mean, mean0, sizeof mean) == 0);
            ck_assert(memcmp(rstd, rstd0, sizeof rstd) == 0);
            ck_assert_msg(memcmp(di, di0, sizeof di) == 0, "dinp, masked %d, %d threads", masked,
                          nt);
            ck_assert(memcmp(dw, dw0, sizeof dw) == 0);
            ck_assert(memcmp(db, db0, sizeof db) == 0);
        }
    }
    free(inp), free(w), free(b), free(dout), free(xhat);
}
END_TEST

/* ---- linear ----------------------------------------------------------------------- */
typedef struct {
    size_t N, K, C;
    float *inp, *W, *bias, *out;
    const float *r;
} lin_ctx;
static double lin_f(void *p) {
    lin_ctx *c = p;
    induct__linear_forward(c->out, c->inp, c->W, c->bias, c->N, c->K, c->C, 2);
    return dot(c->r, c->out, c->N * c->C);
}

/* K = 4 > C = 3: dW = inp^T dout and column sums; K = 3 < C = 5: the transposed product
 * [dW^T | dbias] = dout^T [inp | 1] (the unembedding's route) */
START_TEST(test_linear) {
    size_t N = 6, K = _i ? 3 : 4, C = _i ? 5 : 3;
    rng_seed(4 + (uint64_t)_i);
    float *scratch = malloc((induct__linear_backward_scratch(N, K, C) + 1) * sizeof(float));
    ck_assert_uint_eq(induct__linear_backward_scratch(N, K, C), _i ? (N + C) * (K + 1) : 0);
    lin_ctx c = {N, K, C, randn(N * K, 0, 1), randn(K * C, 0, 1), randn(C, 0, 1),
                 filled(N * C, 0), randn(N * C, 0, 1)};
    float *g0i = randn(N * K, 0, 1), *g0W = randn(K * C, 0, 1), *g0b = randn(C, 0, 1);
    float *di = copy(g0i, N * K), *dW = copy(g0W, K * C), *db = copy(g0b, C);
    induct__linear_backward(di, dW, db, c.r, c.inp, c.W, N, K, C, scratch, 1);
    fd_check("linear dinp", c.inp, N * K, di, g0i, lin_f, &c);
    fd_check("linear dW", c.W, K * C, dW, g0W, lin_f, &c);
    fd_check("linear dbias", c.bias, C, db, g0b, lin_f, &c);
    /* dinp NULL (first layer) and bias NULL: the rest is unchanged */
    float *dW2 = copy(g0W, K * C);
    induct__linear_backward(NULL, dW2, NULL, c.r, c.inp, c.W, N, K, C, scratch, 2);
    ck_assert(memcmp(dW, dW2, K * C * sizeof *dW) == 0);
    float *keep = c.bias;
    c.bias = NULL;
    lin_f(&c);
    for (size_t n = 0; n < N; n++)
        for (size_t j = 0; j < C; j++) {
            double want = 0;
            for (size_t k = 0; k < K; k++) want += (double)c.inp[n * K + k] * c.W[k * C + j];
            ck_assert_double_eq_tol(c.out[n * C + j], want, 1e-5);
        }
    c.bias = keep;
    free(c.inp), free(c.W), free(c.bias), free(c.out), free((float *)c.r);
    free(g0i), free(g0W), free(g0b), free(di), free(dW), free(db), free(dW2), free(scratch);
}
END_TEST

/* ---- colsum: the backward of broadcasting a bias over the first C of ld columns ---- */
typedef struct {
    size_t N, C, ld;
    float *bias, *out;
    const float *r;
} col_ctx;
static double col_f(void *p) {
    col_ctx *c = p;
    for (size_t n = 0; n < c->N; n++)
        for (size_t j = 0; j < c->ld; j++)
            c->out[n * c->ld + j] = (j < c->C ? c->bias[j] : 0.0f) + 0.25f * (float)(n + j);
    return dot(c->r, c->out, c->N * c->ld);
}

START_TEST(test_colsum) {
    enum { N = 3, C = 70, LD = 73 }; /* C > 64: more than one column block */
    rng_seed(5);
    col_ctx c = {N, C, LD, randn(C, 0, 1), filled(N * LD, 0), randn(N * LD, 0, 1)};
    float *g0 = randn(C + 3, 0, 1), *db = copy(g0, C + 3);
    induct__colsum(db, c.r, N, C, LD, 2);
    fd_check("colsum dbias", c.bias, C, db, g0, col_f, &c);
    for (size_t j = C; j < C + 3; j++) ck_assert_float_eq(db[j], g0[j]); /* nothing past C */
    free(c.bias), free(c.out), free((float *)c.r), free(g0), free(db);
}
END_TEST

/* ---- smear --------------------------------------------------------------------- */
typedef struct {
    size_t B, T, H, dh;
    float *k_raw, *alpha, *k;
    const float *r;
} smear_ctx;
static double smear_f(void *p) {
    smear_ctx *c = p;
    induct__smear_forward(c->k, c->k_raw, c->alpha, c->B, c->T, c->H, c->dh, 2);
    return dot(c->r, c->k, c->B * c->T * c->H * c->dh);
}

START_TEST(test_smear) {
    enum { B = 2, T = 5, H = 2, dh = 3, NK = B * T * H * dh };
    rng_seed(6);
    float alpha[H] = {0.7f, -1.3f};
    smear_ctx c = {B, T, H, dh, randn(NK, 0, 1), alpha, filled(NK, 0), randn(NK, 0, 1)};
    float *dk = filled(NK, NAN), *dal = filled(B * H, NAN);
    induct__smear_backward(dk, dal, c.r, c.k_raw, c.alpha, B, T, H, dh, 2);
    fd_check("smear dk_raw", c.k_raw, NK, dk, NULL, smear_f, &c);
    float dalpha[H];
    for (size_t h = 0; h < H; h++) {
        double s = 0;
        for (size_t b = 0; b < B; b++) s += dal[b * H + h];
        dalpha[h] = (float)s;
    }
    fd_check("smear dalpha", c.alpha, H, dalpha, NULL, smear_f, &c);
    /* k'_0 = k_0 exactly */
    smear_f(&c);
    for (size_t b = 0; b < B; b++)
        ck_assert(memcmp(c.k + b * T * H * dh, c.k_raw + b * T * H * dh, H * dh * sizeof(float)) ==
                  0);
    free(c.k_raw), free(c.k), free((float *)c.r), free(dk), free(dal);
}
END_TEST

/* ---- attention ------------------------------------------------------------------ */
typedef struct {
    size_t B, T, H, dh;
    float *q, *k, *v, *z, *att;
    const float *r;
} att_ctx;
static double att_f(void *p) {
    att_ctx *c = p;
    induct__attention_forward(c->z, c->att, c->q, c->k, c->v, c->B, c->T, c->H, c->dh, 2);
    return dot(c->r, c->z, c->B * c->T * c->H * c->dh);
}

START_TEST(test_attention) {
    enum { B = 2, T = 5, H = 2, dh = 3, NQ = B * T * H * dh };
    rng_seed(7);
    att_ctx c = {B,
                 T,
                 H,
                 dh,
                 randn(NQ, 0, 1),
                 randn(NQ, 0, 1),
                 randn(NQ, 0, 1),
                 filled(NQ, 0),
                 filled(B * H * T * T, 0),
                 randn(NQ, 0, 1)};
    att_f(&c);
    float *dq[2], *dk[2], *dv[2];
    for (int t = 0; t < 2; t++) {
        int nt = t + 1;
        dq[t] = filled(NQ, NAN), dk[t] = filled(NQ, NAN), dv[t] = filled(NQ, NAN);
        float *scratch = filled((size_t)nt * T * T, NAN);
        induct__attention_backward(dq[t], dk[t], dv[t], scratch, c.r, c.q, c.k, c.v, c.att, B, T,
                                   H, dh, nt);
        free(scratch);
    }
    fd_check("attention dq", c.q, NQ, dq[0], NULL, att_f, &c);
    fd_check("attention dk", c.k, NQ, dk[0], NULL, att_f, &c);
    fd_check("attention dv", c.v, NQ, dv[0], NULL, att_f, &c);
    /* one thread per (b, h): the thread count does not change a bit */
    ck_assert(memcmp(dq[0], dq[1], NQ * sizeof(float)) == 0);
    ck_assert(memcmp(dk[0], dk[1], NQ * sizeof(float)) == 0);
    ck_assert(memcmp(dv[0], dv[1], NQ * sizeof(float)) == 0);
    for (int t = 0; t < 2; t++) free(dq[t]), free(dk[t]), free(dv[t]);
    free(c.q), free(c.k), free(c.v), free(c.z), free(c.att), free((float *)c.r);
}
END_TEST

/* ---- gelu ------------------------------------------------------------------------ */
typedef struct {
    size_t n;
    float *inp, *out;
    const float *r;
} gelu_ctx;
static double gelu_f(void *p) {
    gelu_ctx *c = p;
    induct__gelu_forward(c->out, c->inp, c->n, 2);
    return dot(c->r, c->out, c->n);
}

START_TEST(test_gelu) {
    enum { n = 25 };
    rng_seed(8);
    gelu_ctx c = {n, filled(n, 0), filled(n, 0), randn(n, 0, 1)};
    for (size_t i = 0; i < n; i++) c.inp[i] = -4.0f + 8.0f * (float)i / (n - 1); /* 0 included */
    gelu_f(&c);
    for (size_t i = 0; i < n; i++) { /* the tanh approximation, in double */
        double x = c.inp[i];
        double want = 0.5 * x * (1 + tanh(sqrt(2 / 3.141592653589793) * (x + 0.044715 * x * x * x)));
        ck_assert_double_eq_tol(c.out[i], want, 1e-6);
    }
    float *d = filled(n, NAN);
    induct__gelu_backward(d, c.inp, c.r, n, 2);
    fd_check("gelu dinp", c.inp, n, d, NULL, gelu_f, &c);
    free(c.inp), free(c.out), free((float *)c.r), free(d);
}
END_TEST

/* ---- cross-entropy ------------------------------------------------------------------ */
typedef struct {
    size_t B, T, V;
    const int32_t *tok;
    float *logits, *losses;
    double scale;
} xent_ctx;
static double xent_f(void *p) {
    xent_ctx *c = p;
    double s = induct__xent_forward(c->losses, c->logits, c->tok, c->B, c->T, c->V, 2);
    return c->scale * s;
}

START_TEST(test_xent) {
    enum { B = 2, T = 4, V = 5 };
    rng_seed(9);
    const int32_t tok[B * T] = {1, 4, 0, 2, 3, 3, 1, 0};
    xent_ctx c = {B, T, V, tok, randn(B * T * V, 0, 2), filled(B * (T - 1), 0), 0.37};
    double sum = xent_f(&c) / c.scale;
    /* losses against log-sum-exp in double: L[b,p] = lse(logits[b,p]) - logits[b,p,t[p+1]] */
    double want_sum = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t p = 0; p + 1 < T; p++) {
            const float *l = c.logits + (b * T + p) * V;
            double s = 0;
            for (size_t v = 0; v < V; v++) s += exp((double)l[v]);
            double want = log(s) - l[tok[b * T + p + 1]];
            ck_assert_double_eq_tol(c.losses[b * (T - 1) + p], want, 1e-5);
            want_sum += want;
        }
    ck_assert_double_eq_tol(sum, want_sum, 1e-5);
    float *d = filled(B * T * V, NAN);
    induct__xent_backward(d, c.logits, tok, B, T, V, (float)c.scale, 2);
    fd_check("xent dlogits", c.logits, B * T * V, d, NULL, xent_f, &c);
    for (size_t b = 0; b < B; b++) /* the last position predicts nothing: exactly 0 */
        for (size_t v = 0; v < V; v++) ck_assert(d[(b * T + T - 1) * V + v] == 0.0f);
    free(c.logits), free(c.losses), free(d);
}
END_TEST

/* ---- softmax and causal attention on extreme finite scores ------------------------- */
static void check_softmax(const float *s, size_t n, const char *what) {
    float *out = filled(n, NAN);
    induct__softmax_row(out, s, n);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(!isnan(out[i]) && out[i] >= 0.0f && out[i] <= 1.0f, "%s: out[%zu] = %g",
                      what, i, out[i]);
        sum += out[i];
    }
    ck_assert_msg(fabs(sum - 1.0) <= 1e-6, "%s: sums to %.9g", what, sum);
    /* against a double softmax (max-subtracted) */
    double mx = -INFINITY, z = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, s[i]);
    for (size_t i = 0; i < n; i++) z += exp((double)s[i] - mx);
    for (size_t i = 0; i < n; i++) {
        double want = exp((double)s[i] - mx) / z;
        ck_assert_msg(fabs(out[i] - want) <= 1e-6, "%s: out[%zu] %.9g vs %.9g", what, i, out[i],
                      want);
    }
    free(out);
}

START_TEST(test_softmax_extreme) {
    float all_neg[5] = {-3e38f, -3e38f, -3e38f, -3e38f, -3e38f};
    check_softmax(all_neg, 5, "all -3e38");
    check_softmax(all_neg, 1, "one -3e38");
    float mixed[6] = {-1e30f, 1e30f, -1e30f, 1e30f, 0.0f, -1e30f};
    check_softmax(mixed, 6, "-1e30/1e30 mixed");
    float out[6];
    induct__softmax_row(out, mixed, 6);
    ck_assert(out[0] == 0.0f && out[2] == 0.0f && out[4] == 0.0f && out[5] == 0.0f);
    ck_assert_float_eq_tol(out[1], 0.5f, 1e-7f);
    float span[4] = {-FLT_MAX, FLT_MAX, -FLT_MAX, FLT_MAX}; /* differences overflow to -inf */
    check_softmax(span, 4, "+-FLT_MAX");
    float tiny_diff[1000];
    rng_seed(10);
    for (size_t i = 0; i < 1000; i++) tiny_diff[i] = (float)(-1e30 + 1e24 * rng_normal());
    check_softmax(tiny_diff, 1000, "1000 scores near -1e30");
    float moderate[8];
    for (size_t i = 0; i < 8; i++) moderate[i] = (float)(3 * rng_normal());
    check_softmax(moderate, 8, "moderate");
}
END_TEST

/* Keys after the query get exactly 0 weight even when their scores would dominate,
 * and future keys/values never change z (bitwise). Scores ~1e36: extreme but finite. */
START_TEST(test_attention_causal_extreme) {
    enum { B = 1, T = 6, H = 2, dh = 2, NQ = B * T * H * dh };
    float q[NQ], k[NQ], v[NQ], z[NQ], z2[NQ], att[B * H * T * T];
    rng_seed(11);
    for (size_t t = 0; t < T; t++)
        for (size_t h = 0; h < H; h++)
            for (size_t j = 0; j < dh; j++) {
                size_t i = (t * H + h) * dh + j;
                q[i] = 1e18f;
                /* head 0: later keys score higher (each would dominate every query before it);
                 * head 1: every score is about -1e36 */
                k[i] = h == 0 ? (float)(t + 1) * 1e17f : -1e18f;
                v[i] = (float)rng_normal();
            }
    for (size_t i = 0; i < B * H * T * T; i++) att[i] = NAN;
    induct__attention_forward(z, att, q, k, v, B, T, H, dh, 2);
    for (size_t h = 0; h < H; h++)
        for (size_t p = 0; p < T; p++) {
            const float *row = att + (h * T + p) * T;
            double s = 0;
            for (size_t j = 0; j < T; j++) {
                ck_assert_msg(isfinite(row[j]), "head %zu row %zu col %zu: %g", h, p, j, row[j]);
                if (j > p) ck_assert_msg(row[j] == 0.0f, "future key %zu of %zu: %g", j, p, row[j]);
                s += row[j];
            }
            ck_assert_msg(fabs(s - 1.0) <= 1e-6, "head %zu row %zu sums to %.9g", h, p, s);
            if (h == 0) ck_assert_float_eq(row[p], 1.0f); /* the latest allowed key wins */
            else
                for (size_t j = 0; j <= p; j++) /* equal scores: uniform */
                    ck_assert_float_eq_tol(row[j], 1.0f / (float)(p + 1), 1e-7f);
        }
    /* changing keys and values after position p leaves z[p] bitwise unchanged */
    for (size_t p = 0; p + 1 < T; p++) {
        float k2[NQ], v2[NQ];
        memcpy(k2, k, sizeof k);
        memcpy(v2, v, sizeof v);
        for (size_t i = (p + 1) * H * dh; i < NQ; i++) {
            k2[i] = 3e18f;
            v2[i] = 1e6f;
        }
        induct__attention_forward(z2, att, q, k2, v2, B, T, H, dh, 1);
        ck_assert_msg(memcmp(z, z2, (p + 1) * H * dh * sizeof(float)) == 0,
                      "future keys changed z at %zu", p);
    }
}
END_TEST

static Suite *kernels_suite(void) {
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("finite differences");
    tcase_add_test(tc, test_embed);
    tcase_add_test(tc, test_add_pos);
    tcase_add_test(tc, test_layernorm);
    tcase_add_test(tc, test_layernorm_bits);
    tcase_add_loop_test(tc, test_linear, 0, 2);
    tcase_add_test(tc, test_colsum);
    tcase_add_test(tc, test_smear);
    tcase_add_test(tc, test_attention);
    tcase_add_test(tc, test_gelu);
    tcase_add_test(tc, test_xent);
    suite_add_tcase(s, tc);
    tc = tcase_create("extreme scores");
    tcase_add_test(tc, test_softmax_extreme);
    tcase_add_test(tc, test_attention_causal_extreme);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(kernels_suite()); }
