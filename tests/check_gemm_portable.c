/* The portable matrix product (lib/kernels/gemm_portable.c, the library's path with
 * -Dgemm=portable) against a double-precision reference and against CBLAS (induct__gemm
 * in this build): every transpose, shapes around its 4 x 8 tiles and its 256-long k
 * blocks, alpha and beta including beta = 0 over NaN. */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "testutil.h"

static uint64_t rng = 1;
static float urand(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) * (1.0 / (1 << 24))) * 2.0f - 1.0f;
}
static float *rnd(size_t n) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    ck_assert_ptr_nonnull(x);
    for (size_t i = 0; i < n; i++) x[i] = urand();
    return x;
}

/* |c - ref| <= 2 (K + 2) 2^-24 (|alpha| sum_k |a b| + |beta c0|) + 1e-30: the float
 * rounding bound of a K-term sum, whatever the summation order */
static void one(int tA, int tB, size_t M, size_t N, size_t K, float alpha, float beta) {
    size_t lda = (tA ? M : K) + 3, ldb = (tB ? K : N) + 2, ldc = N + 1;
    size_t ra = tA ? K : M, rb = tB ? N : K;
    float *A = rnd(ra * lda), *B = rnd(rb * ldb), *C0 = rnd(M * ldc);
    if (beta == 0.0f)
        for (size_t i = 0; i < M * ldc; i++) C0[i] = NAN; /* must not survive beta = 0 */
    float *C = malloc(M * ldc * sizeof *C), *Cb = malloc(M * ldc * sizeof *Cb);
    memcpy(C, C0, M * ldc * sizeof *C);
    memcpy(Cb, C0, M * ldc * sizeof *C);
    induct__gemm_portable(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    induct__gemm(1, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, Cb, ldc);
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double s = 0, sa = 0;
            for (size_t k = 0; k < K; k++) {
                double p = (double)(tA ? A[k * lda + i] : A[i * lda + k]) *
                           (tB ? B[j * ldb + k] : B[k * ldb + j]);
                s += p;
                sa += fabs(p);
            }
            double c0 = beta == 0.0f ? 0.0 : C0[i * ldc + j];
            double ref = alpha * s + beta * c0;
            double tol =
                2.0 * (K + 2) * ldexp(1.0, -24) * (fabs(alpha) * sa + fabs(beta * c0)) + 1e-30;
            ck_assert_msg(fabs(C[i * ldc + j] - ref) <= tol,
                          "portable tA %d tB %d M %zu N %zu K %zu: C[%zu][%zu] = %.9g, want %.9g",
                          tA, tB, M, N, K, i, j, C[i * ldc + j], ref);
            ck_assert_msg(fabs(C[i * ldc + j] - Cb[i * ldc + j]) <= 2 * tol,
                          "portable vs CBLAS at [%zu][%zu]: %.9g vs %.9g", i, j, C[i * ldc + j],
                          Cb[i * ldc + j]);
        }
    /* the padding columns of C are never written */
    for (size_t i = 0; i < M; i++) {
        float want = C0[i * ldc + N], got = C[i * ldc + N];
        ck_assert(memcmp(&want, &got, sizeof got) == 0);
    }
    free(A), free(B), free(C0), free(C), free(Cb);
}

START_TEST(test_shapes) {
    static const size_t sizes[] = {1, 3, 4, 5, 8, 9, 17, 64};
    static const size_t ks[] = {1, 7, 64, 256, 300};
    for (int tA = 0; tA < 2; tA++)
        for (int tB = 0; tB < 2; tB++)
            for (size_t a = 0; a < 8; a++)
                for (size_t b = 0; b < 8; b += 3)
                    for (size_t c = 0; c < 5; c++)
                        one(tA, tB, sizes[a], sizes[b], ks[c], c % 2 ? 0.5f : 1.0f,
                            c == 0 ? 0.0f : c == 1 ? 1.0f : -0.7f);
}
END_TEST

/* Any split of the rows gives the same bits (induct__gemm's threads split rows). */
START_TEST(test_row_split) {
    size_t M = 37, N = 21, K = 300;
    float *A = rnd(M * K), *B = rnd(K * N), *C1 = rnd(M * N), *C2 = malloc(M * N * sizeof *C2);
    memcpy(C2, C1, M * N * sizeof *C2);
    induct__gemm_portable(0, 0, M, N, K, 0.75f, A, K, B, N, 0.5f, C1, N);
    size_t cut[] = {0, 5, 6, 19, 37};
    for (int i = 0; i < 4; i++)
        induct__gemm_portable(0, 0, cut[i + 1] - cut[i], N, K, 0.75f, A + cut[i] * K, K, B, N,
                              0.5f, C2 + cut[i] * N, N);
    ck_assert(memcmp(C1, C2, M * N * sizeof *C1) == 0);
    free(A), free(B), free(C1), free(C2);
}
END_TEST

START_TEST(test_dgemm) {
    size_t M = 5, N = 7, K = 9;
    double A[9 * 9], B[9 * 9], C[9 * 9];
    for (int tA = 0; tA < 2; tA++)
        for (int tB = 0; tB < 2; tB++) {
            for (size_t i = 0; i < 81; i++) A[i] = urand(), B[i] = urand(), C[i] = urand();
            double C0[81];
            memcpy(C0, C, sizeof C);
            induct__dgemm_portable(tA, tB, M, N, K, 2.0, A, 9, B, 9, -1.0, C, 9);
            for (size_t i = 0; i < M; i++)
                for (size_t j = 0; j < N; j++) {
                    double s = 0;
                    for (size_t k = 0; k < K; k++)
                        s += (tA ? A[k * 9 + i] : A[i * 9 + k]) *
                             (tB ? B[j * 9 + k] : B[k * 9 + j]);
                    ck_assert_double_eq_tol(C[i * 9 + j], 2.0 * s - C0[i * 9 + j], 1e-12);
                }
        }
}
END_TEST

int main(void) {
    Suite *s = suite_create("gemm_portable");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_shapes);
    tcase_add_test(tc, test_row_split);
    tcase_add_test(tc, test_dgemm);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
