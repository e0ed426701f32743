/* The optimizer's kernels: the AdamW update in parallel chunks (the vector code is
 * adamw_vec.c) and the sum of squares of the gradient clipping. */
#include "kernels_internal.h"

#define ADAMW_CHUNK 8192

void induct__adamw_update(float *p, const float *g, float *m1, float *m2, size_t n, float clip,
                          float b1, float b2, float bc1, float bc2, float eps, float decay,
                          float lr, int nt) {
    const induct__adamw_vec *vec = INDUCT__VEC(adamw);
    size_t chunks = (n + ADAMW_CHUNK - 1) / ADAMW_CHUNK;
    if (chunks < 2) nt = 1;
    PFOR
    for (idx c = 0; c < (idx)chunks; c++) {
        size_t i0 = (size_t)c * ADAMW_CHUNK, len = n - i0 < ADAMW_CHUNK ? n - i0 : ADAMW_CHUNK;
        vec->adamw(p + i0, g + i0, m1 + i0, m2 + i0, len, clip, b1, b2, bc1, bc2, eps, decay, lr);
    }
}

/* Sum of squares in double: at most SUMSQ_BLOCKS blocks of at least 16384 floats (the
 * block size depends on n only), each summed in four interleaved partial sums (four
 * dependency chains instead of one), the blocks added in order: the same bits for any nt. */
#define SUMSQ_BLOCKS 256
double induct__sumsq(const float *x, size_t n, int nt) {
    size_t len = (n + SUMSQ_BLOCKS - 1) / SUMSQ_BLOCKS;
    if (len < 16384) len = 16384;
    size_t blocks = (n + len - 1) / len;
    double part[SUMSQ_BLOCKS];
    if (blocks < 2) nt = 1;
    PFOR
    for (idx k = 0; k < (idx)blocks; k++) {
        size_t i = (size_t)k * len, end = i + len < n ? i + len : n;
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        for (; i + 4 <= end; i += 4) {
            s0 += (double)x[i] * x[i];
            s1 += (double)x[i + 1] * x[i + 1];
            s2 += (double)x[i + 2] * x[i + 2];
            s3 += (double)x[i + 3] * x[i + 3];
        }
        for (; i < end; i++) s0 += (double)x[i] * x[i];
        part[k] = (s0 + s1) + (s2 + s3);
    }
    double s = 0.0;
    for (size_t k = 0; k < blocks; k++) s += part[k];
    return s;
}
