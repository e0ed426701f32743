/* Linear layers: x W + b and its backward, the bias gradient's column sums, the attention
 * heads' per-head outputs (hook_result), and two elementwise helpers of the residual
 * stream. */
#include "kernels_internal.h"

#include <string.h>

void induct__linear_forward(float *out, const float *inp, const float *W, const float *bias,
                            size_t N, size_t K, size_t C, int nt) {
    if (bias) {
        induct__gemm_prefilled(nt, 0, 0, N, C, K, inp, K, W, C, out, C, NULL, 0, bias);
    } else {
        induct__gemm(nt, 0, 0, N, C, K, 1.0f, inp, K, W, C, 0.0f, out, C);
    }
}

/* Wide matrices (the unembedding's d_vocab columns): blocks of COLSUM_WIDE columns walked
 * row by row, each row's slice contiguous, into double accumulators in L1. The same
 * operations per column as colsum32 (rows in order, double, one rounding to float at
 * the end), so the same bits; 32-column strips of a 2049-wide matrix read two cache
 * lines per 8 KiB row and ran at a third of the memory bandwidth. */
#define COLSUM_WIDE 256

static void colsum_wide(float *dbias, const float *x, size_t N, size_t w, size_t ld) {
    double acc[COLSUM_WIDE] = {0};
    for (size_t n = 0; n < N; n++, x += ld)
        for (size_t c = 0; c < w; c++) acc[c] += (double)x[c];
    for (size_t c = 0; c < w; c++) dbias[c] += (float)acc[c];
}

static void colsum_blocks(float *dbias, const float *dout, size_t N, size_t C, size_t ld,
                          int nt) {
    if (C >= 2 * COLSUM_WIDE) {
        size_t nw = (C + COLSUM_WIDE - 1) / COLSUM_WIDE;
        PFOR
        for (idx blk = 0; blk < (idx)nw; blk++) {
            size_t c0 = (size_t)blk * COLSUM_WIDE;
            colsum_wide(dbias + c0, dout + c0, N, C - c0 < COLSUM_WIDE ? C - c0 : COLSUM_WIDE,
                        ld);
        }
        return;
    }
    const induct__colsum_vec *vec = INDUCT__VEC(colsum);
    size_t nb = (C + 31) / 32;
    PFOR
    for (idx blk = 0; blk < (idx)nb; blk++) {
        size_t c0 = (size_t)blk * 32, n = C - c0 < 32 ? C - c0 : 32;
        vec->colsum32(dbias + c0, dout + c0, N, n, ld);
    }
}

void induct__colsum(float *dbias, const float *dout, size_t N, size_t C, size_t ld, int nt) {
    /* per column: rows summed in order in double (vectorised across columns); blocks of
     * 32 columns per thread (see colsum_blocks above) */
    colsum_blocks(dbias, dout, N, C, ld, nt);
}

size_t induct__linear_backward_scratch(size_t N, size_t K, size_t C) {
    size_t r;
    if (C <= K) return 0;
    if (N > SIZE_MAX - C || K == SIZE_MAX || N + C > SIZE_MAX / (K + 1)) return SIZE_MAX;
    r = (N + C) * (K + 1);
    return r;
}

void induct__linear_backward(float *dinp, float *dW, float *dbias, const float *dout,
                             const float *inp, const float *W, size_t N, size_t K, size_t C,
                             float *scratch, int nt) {
    if (dinp) induct__gemm(nt, 0, 1, N, K, C, 1.0f, dout, C, W, C, 1.0f, dinp, K);
    if (C <= K) {
        induct__gemm(nt, 1, 0, K, C, N, 1.0f, inp, K, dout, C, 1.0f, dW, C);
        if (dbias) induct__colsum(dbias, dout, N, C, C, nt);
        return;
    }
    /* More outputs than inputs (an MLP's W_in: d_mlp columns, d_model rows). dW has
     * only K rows, too few to split between threads at the row multiples that keep the
     * bits (induct__gemm), and the bias gradient would be one more pass over dout. So
     * compute [dW^T | dbias] = dout^T [inp | 1]: C rows to split, and the column sums
     * come out of the same product (a float sum in the BLAS's order, as PyTorch's). */
    size_t K1 = K + 1;
    float *xa = scratch, *t = scratch + N * K1;
    PFOR
    for (idx n = 0; n < (idx)N; n++) {
        memcpy(xa + (size_t)n * K1, inp + (size_t)n * K, K * sizeof *xa);
        xa[(size_t)n * K1 + K] = 1.0f;
    }
    induct__gemm(nt, 1, 0, C, K1, N, 1.0f, dout, C, xa, K1, 0.0f, t, K1);
    PFOR
    for (idx k = 0; k < (idx)K; k++) {
        float *row = dW + (size_t)k * C;
        for (size_t c = 0; c < C; c++) row[c] += t[c * K1 + (size_t)k];
    }
    if (dbias)
        for (size_t c = 0; c < C; c++) dbias[c] += t[c * K1 + K];
}

/* Blocks of rows whose products (each head's) stay at or below HEAD_RESULT_MADDS
 * multiply-adds, in multiples of 48 rows (the tile heights' common multiple), 48 at least:
 * below OpenBLAS's small-matrix limit its AVX-512 targets take the small-matrix kernel,
 * which writes C directly (K = d_head is too short for the packed path's packing and
 * separate zeroing of C for beta = 0 to pay off), and elsewhere a block's [rows][H][D]
 * outputs stay in cache while every head writes its part. Measured, 1 thread, 4096 rows:
 * d_model 64, 4 heads 0.50 -> 0.33 ms; d_model 256, 8 heads 17.2 -> 9.9 ms (whole-height
 * products per head before). */
#define HEAD_RESULT_MADDS 1e6
void induct__head_results(int nt, size_t N, size_t H, size_t dh, size_t D, const float *z,
                          size_t ldz, const float *W_O, float *res) {
    size_t rows = (size_t)(HEAD_RESULT_MADDS / ((double)D * (double)dh)) / 48 * 48;
    if (rows < 48) rows = 48;
    size_t nb = (N + rows - 1) / rows;
    if ((size_t)nt > nb) nt = (int)nb;
    PFOR
    for (idx b = 0; b < (idx)nb; b++) {
        size_t r0 = (size_t)b * rows, m = N - r0 < rows ? N - r0 : rows;
        for (size_t h = 0; h < H; h++)
            induct__gemm_serial(0, 0, m, D, dh, 1.0f, z + r0 * ldz + h * dh, ldz, W_O + h * dh * D,
                                D, 0.0f, res + (r0 * H + h) * D, H * D);
    }
}

void induct__add_inplace(float *a, const float *b, size_t n, int nt) {
    PFOR
    for (idx i = 0; i < (idx)n; i++) a[i] += b[i];
}

void induct__zero(float *x, size_t n, int nt) {
    size_t chunks = (n + 65535) / 65536;
    if (chunks < 2) nt = 1;
    PFOR
    for (idx c = 0; c < (idx)chunks; c++) {
        size_t i0 = (size_t)c * 65536, len = n - i0 < 65536 ? n - i0 : 65536;
        memset(x + i0, 0, len * sizeof *x);
    }
}
