/* Fused kernels (lib/kernels, the *_vec.c files): the causal-only attention and the
 * unembedding + cross-entropy against the straightforward kernels (full T x T GEMMs through
 * CBLAS, libm expf, double sums) on awkward shapes and strides; exact zeros above the
 * diagonal; the SIMD and scalar paths bit-identical; 1, 2 and 3 threads bit-identical;
 * the exp approximation against libm. White-box: links the internal library. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "testutil.h"

static uint64_t st;
static float frand(void) { /* uniform in [-1, 1) */
    st = st * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(st >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void fill(float *x, size_t n, float amp) {
    for (size_t i = 0; i < n; i++) x[i] = amp * frand();
}

/* |a - b| <= atol + rtol |b| elementwise over an [rows][cols] block with row stride ld */
static void close_block(const float *a, size_t lda, const float *b, size_t ldb, size_t rows,
                        size_t cols, double atol, double rtol, const char *what) {
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            double x = a[r * lda + c], y = b[r * ldb + c];
            ck_assert_msg(fabs(x - y) <= atol + rtol * fabs(y), "%s[%zu][%zu]: %.9g vs %.9g",
                          what, r, c, x, y);
        }
}

START_TEST(test_expf) {
    double worst = 0;
    for (int i = 0; i <= 200000; i++) {
        float x = -87.0f * (float)i / 200000.0f;
        double ref = exp((double)x), got = induct__expf(x);
        double rel = fabs(got - ref) / ref;
        if (rel > worst) worst = rel;
    }
    ck_assert_msg(worst < 4e-7, "worst relative error %g", worst); /* ~3 ulp */
    ck_assert_float_eq(induct__expf(0.0f), 1.0f);
    ck_assert_float_eq(induct__expf(-INFINITY), 0.0f);
    ck_assert_float_eq(induct__expf(-100.0f), 0.0f);
    ck_assert(isnan(induct__expf(NAN)));
    ck_assert(fabs(induct__expf(1.0f) - 2.718281828) < 1e-6);
}
END_TEST

typedef struct shape {
    size_t B, T, H, dh, pad; /* pad: extra floats per row (strides > H*dh) */
} shape;
static const shape SHAPES[] = {
    {2, 1, 1, 4, 0},  {2, 3, 2, 5, 3},   {1, 8, 1, 8, 0},   {2, 13, 3, 16, 1},
    {1, 37, 2, 24, 0}, {1, 29, 1, 40, 5}, {1, 64, 2, 16, 0}, {1, 70, 1, 33, 2},
    {1, 200, 2, 16, 0}, {1, 131, 1, 32, 0}, {1, 300, 1, 16, 0}, {1, 264, 2, 8, 1},
    {2, 512, 1, 16, 2},
};
#define N_SHAPES (int)(sizeof SHAPES / sizeof SHAPES[0])

typedef struct bufs {
    size_t B, T, H, dh, HD, ld, N;
    float *q, *k, *v, *dz, *z, *att, *dq, *dk, *dv, *scratch;
} bufs;

static void bufs_init(bufs *b, const shape *s, int max_nt) {
    b->B = s->B;
    b->T = s->T;
    b->H = s->H;
    b->dh = s->dh;
    b->HD = s->H * s->dh;
    b->ld = b->HD + s->pad;
    b->N = s->B * s->T;
    size_t n = b->N * b->ld;
    float **all[] = {&b->q, &b->k, &b->v, &b->dz, &b->z, &b->dq, &b->dk, &b->dv};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        *all[i] = malloc(n * sizeof(float));
        fill(*all[i], n, 1.5f);
    }
    /* 64-byte aligned as in a model's workspace: from T 256 on (T a multiple of 8) the
     * forward then takes its grouped pass with streaming stores */
    b->att = aligned_alloc(64, (s->B * s->H * s->T * s->T * sizeof(float) + 63) & ~(size_t)63);
    b->scratch = malloc((size_t)max_nt * induct__attn_scratch_floats(s->T, s->dh) *
                        sizeof(float));
}

static void bufs_free(bufs *b) {
    float *all[] = {b->q, b->k, b->v, b->dz, b->z, b->dq, b->dk, b->dv, b->att, b->scratch};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
}

/* Contiguous [N][HD] copy of a strided buffer (the old kernels take stride HD). */
static float *dense(const bufs *b, const float *x) {
    float *d = malloc(b->N * b->HD * sizeof *d);
    for (size_t r = 0; r < b->N; r++) memcpy(d + r * b->HD, x + r * b->ld, b->HD * sizeof *d);
    return d;
}

START_TEST(test_attention_vs_reference) {
    const shape *s = &SHAPES[_i];
    st = 1000 + (uint64_t)_i;
    bufs b;
    bufs_init(&b, s, 1);
    size_t BHTT = b.B * b.H * b.T * b.T;
    induct__attn_causal_forward(b.z, b.ld, b.att, b.q, b.ld, b.k, b.ld, b.v, b.ld, b.B, b.T, b.H,
                                b.dh, b.scratch, 1, INDUCT__ATTN_ALL);
    induct__attn_causal_backward(b.dq, b.dk, b.dv, b.dz, b.ld, b.q, b.ld, b.k, b.ld, b.v, b.ld,
                                 b.att, NULL, NULL, NULL, b.B, b.T, b.H, b.dh, b.scratch, 1);
    float *q = dense(&b, b.q), *k = dense(&b, b.k), *v = dense(&b, b.v), *dz = dense(&b, b.dz);
    size_t n = b.N * b.HD;
    float *z = malloc(n * 4), *dq = malloc(n * 4), *dk = malloc(n * 4), *dv = malloc(n * 4);
    float *att = malloc(BHTT * 4), *datt = malloc(b.T * b.T * 4);
    induct__attention_forward(z, att, q, k, v, b.B, b.T, b.H, b.dh, 1);
    induct__attention_backward(dq, dk, dv, datt, dz, q, k, v, att, b.B, b.T, b.H, b.dh, 1);
    for (size_t bh = 0; bh < b.B * b.H; bh++)
        for (size_t p = 0; p < b.T; p++)
            for (size_t t = p + 1; t < b.T; t++)
                ck_assert_msg(b.att[(bh * b.T + p) * b.T + t] == 0.0f,
                              "pattern above the diagonal is not exactly 0");
    close_block(b.att, b.T, att, b.T, b.B * b.H * b.T, b.T, 1e-6, 1e-5, "att");
    close_block(b.z, b.ld, z, b.HD, b.N, b.HD, 1e-5, 1e-5, "z");
    close_block(b.dq, b.ld, dq, b.HD, b.N, b.HD, 1e-5, 1e-4, "dq");
    close_block(b.dk, b.ld, dk, b.HD, b.N, b.HD, 1e-5, 1e-4, "dk");
    close_block(b.dv, b.ld, dv, b.HD, b.N, b.HD, 1e-5, 1e-4, "dv");
    /* the padding columns of strided outputs are untouched */
    if (s->pad) {
        st = 1000 + (uint64_t)_i;
        bufs c;
        bufs_init(&c, s, 1);
        for (size_t r = 0; r < b.N; r++)
            for (size_t j = b.HD; j < b.ld; j++) {
                ck_assert(b.z[r * b.ld + j] == c.z[r * c.ld + j]);
                ck_assert(b.dq[r * b.ld + j] == c.dq[r * c.ld + j]);
                ck_assert(b.dk[r * b.ld + j] == c.dk[r * c.ld + j]);
                ck_assert(b.dv[r * b.ld + j] == c.dv[r * c.ld + j]);
            }
        bufs_free(&c);
    }
    free(q), free(k), free(v), free(dz), free(z), free(dq), free(dk), free(dv), free(att);
    free(datt);
    bufs_free(&b);
}
END_TEST

/* The kernels' path: 0 portable, 1 AVX2 (4-row tiles), 2 the default (AVX-512VL's 8-row
 * tiles where the CPU has it, else AVX2). */
static void simd_path(int level) {
    induct__simd_enable(level > 0);
    induct__simd_avx512_enable(level == 2);
}

/* Outputs of one run, copied out. */
static float *run_attention(const shape *s, int nt, int simd, size_t *len) {
    st = 77;
    bufs b;
    bufs_init(&b, s, nt);
    simd_path(simd);
    induct__attn_causal_forward(b.z, b.ld, b.att, b.q, b.ld, b.k, b.ld, b.v, b.ld, b.B, b.T, b.H,
                                b.dh, b.scratch, nt, INDUCT__ATTN_ALL);
    induct__attn_causal_backward(b.dq, b.dk, b.dv, b.dz, b.ld, b.q, b.ld, b.k, b.ld, b.v, b.ld,
                                 b.att, NULL, NULL, NULL, b.B, b.T, b.H, b.dh, b.scratch, nt);
    simd_path(2);
    size_t n = b.N * b.ld, a = b.B * b.H * b.T * b.T;
    float *out = malloc((4 * n + a) * sizeof *out);
    memcpy(out, b.z, n * 4);
    memcpy(out + n, b.dq, n * 4);
    memcpy(out + 2 * n, b.dk, n * 4);
    memcpy(out + 3 * n, b.dv, n * 4);
    memcpy(out + 4 * n, b.att, a * 4);
    *len = 4 * n + a;
    bufs_free(&b);
    return out;
}

START_TEST(test_attention_bitwise) {
    const shape *s = &SHAPES[_i];
    size_t n1, n2, n3, n4, n5;
    float *ref = run_attention(s, 1, 2, &n1);
    float *two = run_attention(s, 2, 2, &n2);
    float *three = run_attention(s, 3, 2, &n3);
    float *scalar = run_attention(s, 1, 0, &n4);
    float *avx2 = run_attention(s, 2, 1, &n5);
    ck_assert(memcmp(ref, two, n1 * 4) == 0);
    ck_assert(memcmp(ref, three, n1 * 4) == 0);
    ck_assert_msg(memcmp(ref, scalar, n1 * 4) == 0, "SIMD and scalar paths differ");
    ck_assert_msg(memcmp(ref, avx2, n1 * 4) == 0, "the 8-row and 4-row tiles differ");
    free(ref), free(two), free(three), free(scalar), free(avx2);
}
END_TEST

/* The parts of the fused pass run one after another, the scores or the pattern left in
 * att in between (where hooks read and write them), give the fused pass's bits. */
START_TEST(test_attention_stages_bitwise) {
    const shape *s = &SHAPES[_i];
    const unsigned plans[2][3] = {
        {INDUCT__ATTN_SCORES, INDUCT__ATTN_SOFTMAX, INDUCT__ATTN_MIX},
        {INDUCT__ATTN_SCORES | INDUCT__ATTN_SOFTMAX, INDUCT__ATTN_MIX, 0}};
    for (int simd = 0; simd < 3; simd++) {
        simd_path(simd);
        st = 77;
        bufs f;
        bufs_init(&f, s, 2);
        induct__attn_causal_forward(f.z, f.ld, f.att, f.q, f.ld, f.k, f.ld, f.v, f.ld, f.B, f.T,
                                    f.H, f.dh, f.scratch, 2, INDUCT__ATTN_ALL);
        for (int pl = 0; pl < 2; pl++) {
            st = 77;
            bufs a;
            bufs_init(&a, s, 2);
            for (int k = 0; k < 3 && plans[pl][k]; k++) {
                induct__attn_causal_forward(a.z, a.ld, a.att, a.q, a.ld, a.k, a.ld, a.v, a.ld,
                                            a.B, a.T, a.H, a.dh, a.scratch, 2, plans[pl][k]);
                if (plans[pl][k] != INDUCT__ATTN_SCORES) continue;
                /* the stored scores: q.k / sqrt(d_head) on and below the diagonal */
                for (size_t p = 0; p < a.T; p++)
                    for (size_t t = 0; t < a.T; t++) {
                        float sc = a.att[p * a.T + t]; /* batch 0, head 0 */
                        if (t > p) {
                            ck_assert(isinf(sc) && sc < 0);
                            continue;
                        }
                        double ref = 0.0;
                        for (size_t j = 0; j < a.dh; j++)
                            ref += (double)a.q[p * a.ld + j] * a.k[t * a.ld + j];
                        ref /= sqrt((double)a.dh);
                        ck_assert_msg(fabs(sc - ref) <= 1e-5 * (1.0 + fabs(ref)),
                                      "score (%zu, %zu): %g vs %g", p, t, sc, ref);
                    }
            }
            ck_assert(memcmp(a.att, f.att, a.B * a.H * a.T * a.T * sizeof(float)) == 0);
            ck_assert(memcmp(a.z, f.z, a.N * a.ld * sizeof(float)) == 0);
            bufs_free(&a);
        }
        /* a training pass's variant (no pattern tail): the same z and causal pattern rows */
        st = 77;
        bufs n;
        bufs_init(&n, s, 2);
        induct__attn_causal_forward(n.z, n.ld, n.att, n.q, n.ld, n.k, n.ld, n.v, n.ld, n.B, n.T,
                                    n.H, n.dh, n.scratch, 2,
                                    INDUCT__ATTN_ALL | INDUCT__ATTN_NO_TAIL);
        ck_assert(memcmp(n.z, f.z, n.N * n.ld * sizeof(float)) == 0);
        for (size_t bh = 0; bh < n.B * n.H; bh++)
            for (size_t p = 0; p < n.T; p++) {
                size_t o = (bh * n.T + p) * n.T;
                ck_assert(memcmp(n.att + o, f.att + o, (p + 1) * sizeof(float)) == 0);
            }
        bufs_free(&n);
        bufs_free(&f);
    }
    simd_path(2);
}
END_TEST

/* The unembedding with the weight gradient's terms (induct__unembed_xent with wpart,
 * then induct__unembed_grad_sum), against the plain call's results: the same losses
 * (sum s1, rows l1) and d(input) (dx_ref) bits; dW_U and db_U (added to what they held)
 * the same bits for 1, 2 and 3 threads and within the float summation bound of the
 * double reference [x | 1]^T dlogits (g_ref; n terms in float: |error| <= n u sum
 * |terms|); the scratch within its documented bound. */
static void grad_terms(const float *x, const float *W, const float *bias, const int32_t *tok,
                       size_t B, size_t T, size_t D, size_t V, float scale, const float *g_ref,
                       const float *l1, double s1, const float *dx_ref) {
    size_t N = B * T, ws = induct__unembed_grad_scratch(N, D, V, 3);
    ck_assert_uint_le(induct__unembed_grad_scratch(N, D, V, 3),
                      N * V / 2 + (D + 1) * V + 3 * (((size_t)1 << 20) + N * (D + 1)));
    float *wp = malloc(ws * 4), *dW = malloc(D * V * 4), *db = malloc(V * 4);
    float *dW1 = malloc(D * V * 4), *db1 = malloc(V * 4), *lg = malloc(N * V * 4);
    float *l3 = malloc(N * 4), *dx = malloc(N * D * 4);
    for (int nt = 1; nt <= 3; nt++) {
        for (size_t i = 0; i < D * V; i++) dW[i] = 0.5f;
        for (size_t i = 0; i < V; i++) db[i] = -0.5f;
        double s5 = induct__unembed_xent(lg, l3, NULL, dx, wp, x, W, bias, tok, B, T, D, V,
                                         scale, 0, nt);
        ck_assert(s5 == s1);
        ck_assert(memcmp(l3, l1, B * (T - 1) * 4) == 0);
        ck_assert(memcmp(dx, dx_ref, N * D * 4) == 0);
        induct__unembed_grad_sum(dW, db, wp, N, D, V, nt);
        if (nt > 1) {
            ck_assert(memcmp(dW, dW1, D * V * 4) == 0);
            ck_assert(memcmp(db, db1, V * 4) == 0);
            continue;
        }
        memcpy(dW1, dW, D * V * 4);
        memcpy(db1, db, V * 4);
        const double u = FLT_EPSILON / 2, bound = 1.01 * (double)(N + 1) * u;
        for (size_t v = 0; v < V; v++)
            for (size_t d = 0; d <= D; d++) {
                double r = 0.0, mag = 0.0;
                for (size_t bt = 0; bt < N; bt++) {
                    double t = (double)g_ref[bt * V + v] * (d < D ? x[bt * D + d] : 1.0);
                    r += t;
                    mag += fabs(t);
                }
                double got = d < D ? dW[d * V + v] - 0.5 : db[v] + 0.5;
                ck_assert_msg(fabs(got - r) <= bound * mag + 2 * u,
                              "V %zu: gradient [%zu][%zu] %.9g, reference %.9g", V, d, v, got, r);
            }
    }
    free(wp), free(dW), free(db), free(dW1), free(db1), free(lg), free(l3), free(dx);
}

/* The unembedding + cross-entropy by blocks of rows: logits as one product gives them
 * (bit for bit, any thread count), losses and dlogits against the plain kernels, the
 * weight gradient's blocks, the SIMD and scalar paths bit-identical, `only` and the
 * forward-only call. V 1500 with
 * d_model 32 and 1,200 rows makes two blocks (the second one short); V 7 and 37 one. */
START_TEST(test_unembed_xent) {
    const size_t B = 4, T = 300, D = 32, N = B * T;
    const size_t Vs[] = {7, 37, 1500};
    for (size_t vi = 0; vi < sizeof Vs / sizeof *Vs; vi++) {
        size_t V = Vs[vi], n = N * V;
        st = 5 + vi;
        float *x = malloc(N * D * 4), *W = malloc(D * V * 4), *bias = malloc(V * 4);
        float *lg = malloc(n * 4), *ref = malloc(n * 4), *g1 = malloc(n * 4), *g2 = malloc(n * 4);
        float *lg2 = malloc(n * 4), *l1 = malloc(N * 4), *l2 = malloc(N * 4), *l3 = malloc(N * 4);
        int32_t *tok = malloc(N * sizeof *tok);
        fill(x, N * D, 2.0f);
        fill(W, D * V, 1.0f);
        fill(bias, V, 0.5f);
        for (size_t i = 0; i < N; i++) tok[i] = (int32_t)((i * 7 + 3) % V);
        const float scale = 0.25f;
        double s1 =
            induct__unembed_xent(lg, l1, g1, NULL, NULL, x, W, bias, tok, B, T, D, V, scale, 0, 1);
        /* the logits: the product of induct__linear_forward, bit for bit */
        induct__linear_forward(ref, x, W, bias, N, D, V, 1);
        ck_assert(memcmp(lg, ref, n * 4) == 0);
        /* losses and gradient against the plain kernels (libm expf, double sums) */
        double s2 = induct__xent_forward(l2, ref, tok, B, T, V, 1);
        ck_assert_double_eq_tol(s1, s2, 1e-5 * fabs(s2) + 1e-6);
        close_block(l1, 1, l2, 1, B * (T - 1), 1, 1e-6, 1e-5, "losses");
        induct__xent_backward(g2, ref, tok, B, T, V, scale, 1);
        close_block(g1, 1, g2, 1, n, 1, 1e-7, 1e-5, "dlogits");
        /* every loss is the row kernel's, the sum in order */
        double sum = 0.0;
        for (size_t bt = 0; bt < N; bt++) {
            if (bt % T == T - 1) continue;
            float mx;
            double se;
            float lr = induct__xent_row(lg + bt * V, V, tok[bt + 1], &mx, &se);
            ck_assert(memcmp(&lr, &l1[bt / T * (T - 1) + bt % T], 4) == 0);
        }
        for (size_t i = 0; i < B * (T - 1); i++) sum += l1[i];
        ck_assert(sum == s1);
        /* d(input) = dlogits W_U^T: the product of the plain backward, bit for bit */
        float *dx = malloc(N * D * 4), *dx2 = malloc(N * D * 4);
        induct__gemm(1, 0, 1, N, D, V, 1.0f, g1, V, W, V, 0.0f, dx2, D);
        /* 1, 2 and 3 threads, and the scalar path: the same bits */
        for (int nt = 1; nt <= 3; nt++) {
            double s3 = induct__unembed_xent(lg2, l3, g2, dx, NULL, x, W, bias, tok, B, T, D, V,
                                             scale, 0, nt);
            ck_assert(s3 == s1);
            ck_assert(memcmp(lg2, lg, n * 4) == 0);
            ck_assert(memcmp(l3, l1, B * (T - 1) * 4) == 0);
            ck_assert(memcmp(g2, g1, n * 4) == 0);
            ck_assert(memcmp(dx, dx2, N * D * 4) == 0);
        }
        grad_terms(x, W, bias, tok, B, T, D, V, scale, g1, l1, s1, dx2);
        induct__simd_enable(0);
        double s4 =
            induct__unembed_xent(lg2, l3, g2, NULL, NULL, x, W, bias, tok, B, T, D, V, scale, 0, 1);
        induct__simd_enable(1);
        ck_assert(s4 == s1);
        ck_assert(memcmp(l3, l1, B * (T - 1) * 4) == 0);
        ck_assert(memcmp(g2, g1, n * 4) == 0);
        /* forward only: the same losses; one scored position: the others' rows are 0 */
        induct__unembed_xent(lg2, l3, NULL, NULL, NULL, x, W, bias, tok, B, T, D, V, scale, 0, 2);
        ck_assert(memcmp(l3, l1, B * (T - 1) * 4) == 0);
        const size_t only = 140;
        induct__unembed_xent(lg2, l3, g2, NULL, NULL, x, W, bias, tok, B, T, D, V, scale, only, 2);
        ck_assert(memcmp(l3, l1, B * (T - 1) * 4) == 0);
        for (size_t bt = 0; bt < N; bt++)
            for (size_t v = 0; v < V; v++) {
                float want = bt % T == only - 1 ? g1[bt * V + v] : 0.0f;
                ck_assert(memcmp(&g2[bt * V + v], &want, 4) == 0);
            }
        free(x), free(W), free(bias), free(lg), free(ref), free(g1), free(g2), free(lg2);
        free(dx), free(dx2);
        free(l1), free(l2), free(l3), free(tok);
    }
}
END_TEST

/* The weight gradient's terms where a block's logits do not fit the per-thread scratch
 * and the number of blocks is capped by the memory of their terms (d_model 300: one
 * block of 1,200 rows x 1,500 logits, computed in the logits rows). */
START_TEST(test_unembed_grad_wide) {
    const size_t B = 4, T = 300, D = 300, V = 1500, N = B * T, n = N * V;
    st = 11;
    float *x = malloc(N * D * 4), *W = malloc(D * V * 4), *bias = malloc(V * 4);
    float *lg = malloc(n * 4), *g1 = malloc(n * 4), *l1 = malloc(N * 4), *dx = malloc(N * D * 4);
    int32_t *tok = malloc(N * sizeof *tok);
    fill(x, N * D, 0.5f);
    fill(W, D * V, 0.5f);
    fill(bias, V, 0.5f);
    for (size_t i = 0; i < N; i++) tok[i] = (int32_t)((i * 11 + 5) % V);
    double s1 = induct__unembed_xent(lg, l1, g1, dx, NULL, x, W, bias, tok, B, T, D, V, 0.125f,
                                     0, 1);
    grad_terms(x, W, bias, tok, B, T, D, V, 0.125f, g1, l1, s1, dx);
    /* the cap on the number of blocks: d_vocab 30000 would give one block per 48 rows,
     * 25 terms of 301 x 30000 floats, far above the bound (only the size is computed) */
    const size_t V2 = 30000;
    ck_assert_uint_le(induct__unembed_grad_scratch(N, D, V2, 3),
                      N * V2 / 2 + (D + 1) * V2 + 3 * (((size_t)1 << 20) + N * (D + 1)));
    free(x), free(W), free(bias), free(lg), free(g1), free(l1), free(dx), free(tok);
}
END_TEST

START_TEST(test_gelu) {
    const size_t ns[] = {1, 7, 8, 100, 4096 * 2 + 13};
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
        size_t n = ns[ni];
        st = 31 + ni;
        float *x = malloc(n * 4), *g = malloc(n * 4), *a = malloc(n * 4), *b = malloc(n * 4);
        float *c = malloc(n * 4);
        fill(x, n, 6.0f);
        fill(g, n, 1.0f);
        if (n > 3) {
            x[0] = 0.0f;
            x[1] = -30.0f;
            x[2] = 30.0f;
        }
        induct__gelu_forward_fast(a, x, n, 2);
        induct__gelu_forward(b, x, n, 1);
        close_block(a, 1, b, 1, n, 1, 2e-6, 1e-6, "gelu");
        induct__simd_enable(0);
        induct__gelu_forward_fast(c, x, n, 1);
        induct__simd_enable(1);
        ck_assert(memcmp(a, c, n * 4) == 0);
        induct__gelu_backward_fast(a, x, g, n, 3);
        induct__gelu_backward(b, x, g, n, 1);
        close_block(a, 1, b, 1, n, 1, 2e-6, 1e-6, "gelu'");
        induct__simd_enable(0);
        induct__gelu_backward_fast(c, x, g, n, 1);
        induct__simd_enable(1);
        ck_assert(memcmp(a, c, n * 4) == 0);
        free(x), free(g), free(a), free(b), free(c);
    }
}
END_TEST

/* The gradient norm's sum of squares: against a long double sum, and the same bits for
 * 1, 2 and 3 threads (one block, several, and more than 256 blocks' worth of floats). */
START_TEST(test_sumsq) {
    const size_t ns[] = {0, 1, 5, 3 * 16384 + 7, 256 * 16384 + 4099};
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
        size_t n = ns[ni];
        st = 11 + ni;
        float *x = malloc((n ? n : 1) * 4);
        fill(x, n, 3.0f);
        long double ref = 0.0L;
        for (size_t i = 0; i < n; i++) ref += (long double)x[i] * x[i];
        double s1 = induct__sumsq(x, n, 1);
        ck_assert_msg(fabsl((long double)s1 - ref) <= 1e-12L * ref, "%zu: %.17g vs %.17Lg", n,
                      s1, ref);
        for (int nt = 2; nt <= 3; nt++) {
            double s2 = induct__sumsq(x, n, nt);
            ck_assert(memcmp(&s1, &s2, sizeof s1) == 0);
        }
        free(x);
    }
}
END_TEST

/* colsum: per column, rows in order, in double: exactly this loop. */
START_TEST(test_colsum) {
    const size_t N = 300, C = 37, ld = 41;
    st = 3;
    float *x = malloc(N * ld * 4), got[37], got2[37], ref[37];
    fill(x, N * ld, 3.0f);
    for (size_t c = 0; c < C; c++) {
        double a = 0;
        for (size_t n = 0; n < N; n++) a += x[n * ld + c];
        ref[c] = 0.5f + (float)a;
        got[c] = got2[c] = 0.5f;
    }
    induct__colsum(got, x, N, C, ld, 3);
    induct__simd_enable(0);
    induct__colsum(got2, x, N, C, ld, 1);
    induct__simd_enable(1);
    ck_assert(memcmp(got, ref, sizeof ref) == 0);
    ck_assert(memcmp(got2, ref, sizeof ref) == 0);
    free(x);
}
END_TEST

/* Parallel embedding backward: the same bits as the serial kernel. */
START_TEST(test_embed_backward) {
    const size_t B = 8, T = 64, D = 150, V = 7; /* above the parallel threshold */
    st = 6;
    float *d = malloc(B * T * D * 4), *e1 = calloc(V * D, 4), *e2 = calloc(V * D, 4);
    float *p1 = calloc(T * D, 4), *p2 = calloc(T * D, 4);
    int32_t tok[B * T];
    fill(d, B * T * D, 1.0f);
    for (size_t i = 0; i < B * T; i++) tok[i] = (int32_t)((i * 5 + 1) % V);
    induct__embed_backward(e1, p1, d, tok, B, T, D);
    induct__embed_backward_par(e2, p2, d, tok, B, T, D, 3);
    ck_assert(memcmp(e1, e2, V * D * 4) == 0);
    ck_assert(memcmp(p1, p2, T * D * 4) == 0);
    free(d), free(e1), free(e2), free(p1), free(p2);
}
END_TEST

/* AdamW: bit-identical to the plain per-element loop (lib/train/optimizer.c's definition). */
START_TEST(test_adamw) {
    const size_t n = 8192 * 2 + 21;
    st = 4;
    float *p = malloc(n * 4), *g = malloc(n * 4), *m1 = malloc(n * 4), *m2 = malloc(n * 4);
    float *rp = malloc(n * 4), *r1 = malloc(n * 4), *r2 = malloc(n * 4);
    fill(p, n, 1.0f);
    fill(g, n, 0.1f);
    fill(m1, n, 0.01f);
    fill(m2, n, 0.001f);
    for (size_t i = 0; i < n; i++) m2[i] = fabsf(m2[i]);
    memcpy(rp, p, n * 4), memcpy(r1, m1, n * 4), memcpy(r2, m2, n * 4);
    const float clip = 0.7f, b1 = 0.9f, b2 = 0.999f, bc1 = 0.19f, bc2 = 0.002f, eps = 1e-8f,
                decay = 1e-5f, lr = 1e-3f;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * clip;
        r1[i] = b1 * r1[i] + (1.0f - b1) * gi;
        r2[i] = b2 * r2[i] + (1.0f - b2) * gi * gi;
        float mh = r1[i] / bc1, vh = r2[i] / bc2;
        rp[i] -= decay * rp[i];
        rp[i] -= lr * mh / (sqrtf(vh) + eps);
    }
    for (int simd = 0; simd < 2; simd++) {
        float *q = malloc(n * 4), *a = malloc(n * 4), *b = malloc(n * 4);
        memcpy(q, p, n * 4), memcpy(a, m1, n * 4), memcpy(b, m2, n * 4);
        induct__simd_enable(simd);
        induct__adamw_update(q, g, a, b, n, clip, b1, b2, bc1, bc2, eps, decay, lr, 2);
        induct__simd_enable(1);
        ck_assert(memcmp(q, rp, n * 4) == 0);
        ck_assert(memcmp(a, r1, n * 4) == 0);
        ck_assert(memcmp(b, r2, n * 4) == 0);
        free(q), free(a), free(b);
    }
    free(p), free(g), free(m1), free(m2), free(rp), free(r1), free(r2);
}
END_TEST

/* induct__gemm gives the same bits for 1, 2 and 3 threads (OpenBLAS's results depend
 * on a row's position in its micro-tiles; the split respects that, see lib/kernels/gemm.c). */
START_TEST(test_gemm_threads) {
    const size_t Ms[] = {64, 96, 100, 800}, Ns[] = {11, 64, 500}, Ks[] = {7, 64, 800};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (size_t i = 0; i < 4; i++)
                for (size_t j = 0; j < 3; j++)
                    for (size_t k = 0; k < 3; k++) {
                        size_t M = Ms[i], N = Ns[j], K = Ks[k];
                        st = 50 + i + 4 * j + 16 * k;
                        float *A = malloc(M * K * 4), *B = malloc(K * N * 4);
                        float *C[3];
                        fill(A, M * K, 1.0f);
                        fill(B, K * N, 1.0f);
                        for (int t = 0; t < 3; t++) {
                            C[t] = malloc(M * N * 4);
                            st = 9;
                            fill(C[t], M * N, 1.0f); /* beta = 1 keeps this */
                            induct__gemm(t + 1, ta, tb, M, N, K, 0.5f, A, ta ? M : K, B,
                                         tb ? K : N, 1.0f, C[t], N);
                        }
                        ck_assert_msg(memcmp(C[0], C[1], M * N * 4) == 0 &&
                                          memcmp(C[0], C[2], M * N * 4) == 0,
                                      "transA %d transB %d M %zu N %zu K %zu: threads differ", ta,
                                      tb, M, N, K);
                        for (int t = 0; t < 3; t++) free(C[t]);
                        free(A), free(B);
                    }
}
END_TEST

/* Training a model large enough that every parallel path runs (GEMM row blocks,
 * attention, LayerNorm, GELU, AdamW chunks) gives the same bits at 1, 2 and 3 threads. */
static void train_threads(uint32_t threads, uint32_t pos, float *out, size_t cap, double *loss) {
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = 2;
    c.d_model = 64;
    c.n_heads = 4;
    c.d_mlp = pos == INDUCT_POS_STANDARD ? 128 : 0;
    c.layer_norm = pos == INDUCT_POS_STANDARD;
    c.smeared_keys = 1;
    c.positional = pos;
    c.n_ctx = 32;
    c.d_vocab = 64;
    c.n_threads = threads;
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 64;
    rc.seed = 5;
    induct_dataset *d;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    for (int s = 0; s < 3; s++) ck_ok(induct_train_step(o, d, 16, 32, &loss[s]));
    size_t off = 0, nt = induct_model_n_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        size_t n, len;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &n));
        ck_assert(off + n <= cap);
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, out + off, n, &len));
        off += n;
    }
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
}

START_TEST(test_training_threads) {
    enum { CAP = 200000 };
    uint32_t pos = _i ? INDUCT_POS_SHORTFORMER : INDUCT_POS_STANDARD;
    float *p[3];
    double l[3][3];
    for (int t = 0; t < 3; t++) {
        p[t] = calloc(CAP, 4);
        train_threads((uint32_t)t + 1, pos, p[t], CAP, l[t]);
    }
    ck_assert_msg(memcmp(l[0], l[1], sizeof l[0]) == 0, "losses differ between 1 and 2 threads");
    ck_assert_msg(memcmp(l[0], l[2], sizeof l[0]) == 0, "losses differ between 1 and 3 threads");
    ck_assert_msg(memcmp(p[0], p[1], CAP * 4) == 0, "weights differ between 1 and 2 threads");
    ck_assert_msg(memcmp(p[0], p[2], CAP * 4) == 0, "weights differ between 1 and 3 threads");
    for (int t = 0; t < 3; t++) free(p[t]);
}
END_TEST

/* Raising n_threads after the workspace exists re-lays out the per-thread scratch (it
 * used to be sized for the old count and overrun); results do not change. */
START_TEST(test_set_threads_later) {
    double a[2], b[2];
    float *pa = calloc(200000, 4), *pb = calloc(200000, 4);
    for (int run = 0; run < 2; run++) {
        induct_model_config c;
        induct_model_config_init(&c, sizeof c);
        c.d_model = 64;
        c.n_ctx = 64;
        induct_model *m;
        ck_ok(induct_model_new(&m, &c));
        induct_rrt_config rc;
        induct_rrt_config_init(&rc, sizeof rc);
        induct_dataset *d;
        ck_ok(induct_dataset_new_rrt(&d, &rc));
        induct_optimizer *o;
        ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
        double *l = run ? b : a;
        ck_ok(induct_train_step(o, d, 8, 64, &l[0]));
        if (run) ck_ok(induct_model_set_threads(m, 3));
        ck_ok(induct_train_step(o, d, 8, 64, &l[1]));
        size_t len;
        ck_ok(induct_model_get_tensor(m, "blocks.1.attn.W_Q", INDUCT_BUF_PARAM, run ? pb : pa,
                                      200000, &len));
        induct_optimizer_free(o);
        induct_model_free(m);
        induct_dataset_free(d);
    }
    ck_assert(memcmp(a, b, sizeof a) == 0);
    ck_assert(memcmp(pa, pb, 200000 * 4) == 0);
    free(pa), free(pb);
}
END_TEST

/* Layer 0 folded into the embeddings (lib/model/workspace.c, induct__fold_layer0: no
 * LayerNorm and 2 (d_vocab + T) <= B T). Here V = 5, T = 6, B = 4 qualifies; B = 1 does
 * not. */
enum { FV = 5, FT = 6, FB = 4 };
static const uint32_t FOLD_POS[] = {INDUCT_POS_STANDARD, INDUCT_POS_SHORTFORMER, INDUCT_POS_NONE,
                                    INDUCT_POS_STANDARD, INDUCT_POS_STANDARD};
static const uint32_t FOLD_MLP[] = {0, 0, 0, 6, 0};
static const uint32_t FOLD_SMEAR[] = {0, 0, 0, 0, 1};

static induct_model *fold_model(int i) {
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = 2;
    c.d_model = 8;
    c.n_heads = 2;
    c.n_ctx = FT;
    c.d_vocab = FV;
    c.positional = FOLD_POS[i];
    c.d_mlp = FOLD_MLP[i];
    c.smeared_keys = FOLD_SMEAR[i];
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, 0.5, 40 + (uint64_t)i);
    return m;
}

START_TEST(test_fold_gradcheck) {
    induct_model *m = fold_model(_i);
    int32_t tok[FB * FT];
    tu_tokens(tok, FB * FT, FV, 8 + (uint64_t)_i);
    double l0;
    ck_ok(induct_model_backward(m, tok, FB, FT, &l0));
    size_t nt = induct_model_n_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        size_t n, len;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &n));
        float *p = malloc(n * 4), *g = malloc(n * 4);
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, p, n, &len));
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_GRAD, g, n, &len));
        for (size_t j = 0; j < n; j++) {
            const float eps = 2e-3f;
            float orig = p[j];
            double lp, lm;
            p[j] = orig + eps;
            ck_ok(induct_model_set_tensor(m, name, p, n));
            ck_ok(induct_model_forward(m, tok, FB, FT, NULL, 0, NULL, 0, &lp));
            p[j] = orig - eps;
            ck_ok(induct_model_set_tensor(m, name, p, n));
            ck_ok(induct_model_forward(m, tok, FB, FT, NULL, 0, NULL, 0, &lm));
            p[j] = orig;
            ck_ok(induct_model_set_tensor(m, name, p, n));
            double fd = (lp - lm) / (2.0 * ((double)(orig + eps) - (double)orig));
            ck_assert_msg(fabs(fd - g[j]) <= 2e-3 + 2e-2 * fabs(fd),
                          "variant %d: %s[%zu] analytic %.6g vs finite difference %.6g", _i, name,
                          j, g[j], fd);
        }
        free(p);
        free(g);
    }
    induct_model_free(m);
}
END_TEST

/* The folded batch gives the same logits as each sequence run alone (unfolded). */
START_TEST(test_fold_matches_unfolded) {
    induct_model *m = fold_model(_i);
    int32_t tok[FB * FT];
    tu_tokens(tok, FB * FT, FV, 9);
    float all[FB * FT * FV], one[FT * FV];
    ck_ok(induct_model_forward(m, tok, FB, FT, all, FB * FT * FV, NULL, 0, NULL));
    for (int b = 0; b < FB; b++) {
        ck_ok(induct_model_forward(m, tok + b * FT, 1, FT, one, FT * FV, NULL, 0, NULL));
        close_block(all + b * FT * FV, 1, one, 1, FT * FV, 1, 1e-5, 1e-5, "logits");
    }
    induct_model_free(m);
}
END_TEST

/* A losses-only forward over several evaluation chunks (about 4096 tokens) gives the same
 * losses and mean, bit for bit, as the single pass that also returns logits. */
START_TEST(test_chunked_forward) {
    enum { CB = 1100, CT = 8, CV = 11 };
    induct_model_config c;
    tu_tiny_config(&c);
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, 0.5, 5);
    int32_t *tok = malloc(CB * CT * sizeof *tok);
    tu_tokens(tok, CB * CT, CV, 4);
    float *logits = malloc((size_t)CB * CT * CV * 4), *l1 = malloc(CB * (CT - 1) * 4);
    float *l2 = malloc(CB * (CT - 1) * 4);
    double m1, m2;
    /* chunked first (510 + 510 + 80 sequences): the workspace then holds the last chunk */
    ck_ok(induct_model_forward(m, tok, CB, CT, NULL, 0, l2, CB * (CT - 1), &m2));
    ck_ok(induct_model_forward(m, tok, CB, CT, logits, (size_t)CB * CT * CV, l1, CB * (CT - 1),
                               &m1));
    ck_assert(memcmp(l1, l2, CB * (CT - 1) * 4) == 0);
    ck_assert(m1 == m2);
    /* a failure in the last chunk (a non-finite loss) leaves the caller's buffer alone */
    memset(l2, 0x55, CB * (CT - 1) * 4);
    float big[8 * 11];
    for (int i = 0; i < 8 * 11; i++) big[i] = 3e38f; /* logits overflow to inf */
    ck_ok(induct_model_set_tensor(m, "unembed.W_U", big, 8 * 11));
    ck_assert_status(induct_model_forward(m, tok, CB, CT, NULL, 0, l2, CB * (CT - 1), &m2),
                     INDUCT_ENUMERIC);
    for (size_t i = 0; i < CB * (CT - 1); i++) {
        uint32_t bits;
        memcpy(&bits, &l2[i], 4);
        ck_assert_uint_eq(bits, 0x55555555u);
    }
    free(tok), free(logits), free(l1), free(l2);
    induct_model_free(m);
}
END_TEST

/* The induction and previous-token scores (run in chunks over the sequences) against
 * the same averages computed from each sequence's patterns (induct_model_attention). */
START_TEST(test_scores_chunked) {
    enum { NS = 100, ST = 64, SV = 32, L_ = 2, SH = 2 };
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = L_;
    c.d_model = 16;
    c.n_heads = SH;
    c.n_ctx = ST;
    c.d_vocab = SV;
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, 0.3, 12);
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = SV;
    rc.seed = 21;
    induct_dataset *d;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    float ind[L_ * SH], prev[L_ * SH];
    size_t len;
    ck_ok(induct_analysis_induction_score(m, d, NS, ST, ind, L_ * SH, &len));
    ck_ok(induct_analysis_previous_token_score(m, d, NS, ST, prev, L_ * SH, &len));
    int32_t *tok = malloc(NS * ST * 4), meta[NS];
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, NS, ST, tok, NS * ST, meta, NS));
    float *A = malloc(L_ * SH * ST * ST * 4);
    double si[L_ * SH] = {0}, sp[L_ * SH] = {0};
    size_t cnt[L_ * SH] = {0};
    for (int b = 0; b < NS; b++) {
        ck_ok(induct_model_attention(m, tok + b * ST, ST, A, L_ * SH * ST * ST, &len));
        for (int lh = 0; lh < L_ * SH; lh++) {
            const float *a = A + (size_t)lh * ST * ST;
            int Lb = meta[b];
            for (int t = Lb + 1; t < 2 * Lb; t++, cnt[lh]++) si[lh] += a[t * ST + t - Lb + 1];
            double r = 0;
            for (int i = 1; i < ST; i++) r += a[i * ST + i - 1];
            sp[lh] += r / (ST - 1);
        }
    }
    for (int lh = 0; lh < L_ * SH; lh++) {
        ck_assert(cnt[lh] > 0);
        ck_assert_double_eq_tol(ind[lh], si[lh] / cnt[lh], 1e-5);
        ck_assert_double_eq_tol(prev[lh], sp[lh] / NS, 1e-5);
    }
    free(tok), free(A);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

Suite *fused_suite(void) {
    Suite *s = suite_create("fused");
    TCase *tc = tcase_create("kernels");
    tcase_add_test(tc, test_expf);
    tcase_add_loop_test(tc, test_attention_vs_reference, 0, N_SHAPES);
    tcase_add_loop_test(tc, test_attention_bitwise, 0, N_SHAPES);
    tcase_add_loop_test(tc, test_attention_stages_bitwise, 0, N_SHAPES);
    tcase_add_test(tc, test_unembed_xent);
    tcase_add_test(tc, test_unembed_grad_wide);
    tcase_add_test(tc, test_sumsq);
    tcase_add_test(tc, test_gelu);
    tcase_add_test(tc, test_colsum);
    tcase_add_test(tc, test_adamw);
    tcase_add_test(tc, test_embed_backward);
    tcase_add_test(tc, test_gemm_threads);
    tcase_add_loop_test(tc, test_training_threads, 0, 2);
    tcase_add_test(tc, test_set_threads_later);
    suite_add_tcase(s, tc);
    tc = tcase_create("fold");
    tcase_add_loop_test(tc, test_fold_gradcheck, 0, 5);
    tcase_add_loop_test(tc, test_fold_matches_unfolded, 0, 5);
    tcase_add_test(tc, test_chunked_forward);
    tcase_add_test(tc, test_scores_chunked);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(fused_suite()); }
