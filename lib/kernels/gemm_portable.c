/* The portable matrix product: plain C loops, no BLAS, no threads of its own.
 *
 * Selected at build time with `-Dgemm=portable` (the WebAssembly build, where no BLAS
 * exists); the default build uses CBLAS (OpenBLAS) and compiles this file only so that
 * the tests can compare the two. A 4 x 8 register tile over a packed strip of B, written
 * with the generic vector type of GCC and clang (no intrinsics), which the compiler maps
 * to WebAssembly SIMD (`-msimd128`) or SSE.
 *
 * Summation order (fixed, independent of threads and of the row split of induct__gemm):
 * C is first scaled by beta (set to 0 when beta is 0, so NaN in C does not survive),
 * then for each block of GEMM_KC values of k, in increasing order, the block's products
 * are summed in increasing k in float and alpha times that sum is added to C. Every
 * element of C is computed by the same operations whatever its position, so a split of
 * the rows (induct__gemm's threads) cannot change a bit. */
#include "kernels.h"

#include <string.h>

#define GEMM_MR 4    /* rows of the register tile */
#define GEMM_NR 8    /* columns of the register tile (two 4-lane vectors) */
#define GEMM_KC 256  /* k per block: the packed strip of B (KC x NR floats) stays in L1 */

/* Four floats as one vector value: GCC and clang map it to WebAssembly SIMD128 or SSE
 * (generic vector extension, no intrinsics); loads and stores go through memcpy, so no
 * alignment is assumed. */
typedef float vf4 __attribute__((vector_size(16)));
static inline vf4 ld4(const float *p) {
    vf4 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline vf4 splat4(float x) { return (vf4){x, x, x, x}; }

/* Pack columns j0 .. j0+nr-1 (nr <= NR) of op(B) for k in [k0, k0+kc) into bp[kc][NR],
 * padding the missing columns with 0. */
static void pack_b(float *bp, const float *B, size_t ldb, int transB, size_t k0, size_t kc,
                   size_t j0, size_t nr) {
    for (size_t k = 0; k < kc; k++) {
        float *o = bp + k * GEMM_NR;
        size_t l = 0;
        if (transB)
            for (; l < nr; l++) o[l] = B[(j0 + l) * ldb + k0 + k];
        else
            for (; l < nr; l++) o[l] = B[(k0 + k) * ldb + j0 + l];
        for (; l < GEMM_NR; l++) o[l] = 0.0f;
    }
}

/* C[r][0..nr) += alpha * sum_{k < kc} a[r][k * as] * bp[k][0..nr) for the mr <= MR rows
 * a[r] (as: the stride of k in A, 1 or lda). The four-row case keeps its 4 x 8
 * accumulators in eight vector registers; rows below mr are computed and dropped. */
static void tile(size_t mr, size_t nr, size_t kc, const float *const a[GEMM_MR], size_t as,
                 const float *bp, float alpha, float *C, size_t ldc) {
    vf4 c0l = {0}, c0h = {0}, c1l = {0}, c1h = {0}, c2l = {0}, c2h = {0}, c3l = {0}, c3h = {0};
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    for (size_t k = 0; k < kc; k++, a0 += as, a1 += as, a2 += as, a3 += as) {
        vf4 bl = ld4(bp + k * GEMM_NR), bh = ld4(bp + k * GEMM_NR + 4);
        vf4 x = splat4(*a0);
        c0l += x * bl;
        c0h += x * bh;
        x = splat4(*a1);
        c1l += x * bl;
        c1h += x * bh;
        x = splat4(*a2);
        c2l += x * bl;
        c2h += x * bh;
        x = splat4(*a3);
        c3l += x * bl;
        c3h += x * bh;
    }
    float acc[GEMM_MR][GEMM_NR];
    memcpy(acc[0], &c0l, 16), memcpy(acc[0] + 4, &c0h, 16);
    memcpy(acc[1], &c1l, 16), memcpy(acc[1] + 4, &c1h, 16);
    memcpy(acc[2], &c2l, 16), memcpy(acc[2] + 4, &c2h, 16);
    memcpy(acc[3], &c3l, 16), memcpy(acc[3] + 4, &c3h, 16);
    for (size_t r = 0; r < mr; r++) {
        float *c = C + r * ldc;
        for (size_t l = 0; l < nr; l++) c[l] += alpha * acc[r][l];
    }
}

void induct__gemm_portable(int transA, int transB, size_t M, size_t N, size_t K, float alpha,
                           const float *A, size_t lda, const float *B, size_t ldb, float beta,
                           float *C, size_t ldc) {
    if (M == 0 || N == 0) return;
    if (beta != 1.0f) {
        for (size_t i = 0; i < M; i++) {
            float *c = C + i * ldc;
            if (beta == 0.0f) memset(c, 0, N * sizeof *c);
            else
                for (size_t j = 0; j < N; j++) c[j] *= beta;
        }
    }
    if (K == 0 || alpha == 0.0f) return;
    float bp[GEMM_KC * GEMM_NR];
    for (size_t k0 = 0; k0 < K; k0 += GEMM_KC) {
        size_t kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
        for (size_t j0 = 0; j0 < N; j0 += GEMM_NR) {
            size_t nr = N - j0 < GEMM_NR ? N - j0 : GEMM_NR;
            pack_b(bp, B, ldb, transB, k0, kc, j0, nr);
            for (size_t i0 = 0; i0 < M; i0 += GEMM_MR) {
                size_t mr = M - i0 < GEMM_MR ? M - i0 : GEMM_MR;
                /* op(A)(i, k0 + k) = a[i - i0][k * as]; missing rows repeat the last one */
                const float *a[GEMM_MR];
                for (size_t r = 0; r < GEMM_MR; r++) {
                    size_t i = i0 + (r < mr ? r : mr - 1);
                    a[r] = transA ? A + k0 * lda + i : A + i * lda + k0;
                }
                tile(mr, nr, kc, a, transA ? lda : 1, bp, alpha, C + i0 * ldc + j0, ldc);
            }
        }
    }
}

void induct__dgemm_portable(int transA, int transB, size_t M, size_t N, size_t K, double alpha,
                            const double *A, size_t lda, const double *B, size_t ldb,
                            double beta, double *C, size_t ldc) {
    /* the analysis' small double products (head matrices of d_head x d_head and the like):
     * one dot product per element, k in increasing order */
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double s = 0.0;
            for (size_t k = 0; k < K; k++)
                s += (transA ? A[k * lda + i] : A[i * lda + k]) *
                     (transB ? B[j * ldb + k] : B[k * ldb + j]);
            double *c = C + i * ldc + j;
            *c = beta == 0.0 ? alpha * s : alpha * s + beta * *c;
        }
}
