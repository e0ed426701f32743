/* GELU (tanh approximation, GPT-2's "gelu_new") and its backward, in parallel chunks (the
 * vector code is gelu_vec.c). */
#include "kernels_internal.h"

/* Parallel over fixed chunks of 4096 elements (boundaries independent of nt). */
#define GELU_CHUNK 4096

void induct__gelu_forward_fast(float *out, const float *inp, size_t n, int nt) {
    const induct__gelu_vec *vec = INDUCT__VEC(gelu);
    size_t chunks = (n + GELU_CHUNK - 1) / GELU_CHUNK;
    PFOR
    for (idx c = 0; c < (idx)chunks; c++) {
        size_t i0 = (size_t)c * GELU_CHUNK, len = n - i0 < GELU_CHUNK ? n - i0 : GELU_CHUNK;
        vec->fwd(out + i0, inp + i0, len);
    }
}

void induct__gelu_backward_fast(float *dinp, const float *inp, const float *dout, size_t n,
                                int nt) {
    const induct__gelu_vec *vec = INDUCT__VEC(gelu);
    size_t chunks = (n + GELU_CHUNK - 1) / GELU_CHUNK;
    PFOR
    for (idx c = 0; c < (idx)chunks; c++) {
        size_t i0 = (size_t)c * GELU_CHUNK, len = n - i0 < GELU_CHUNK ? n - i0 : GELU_CHUNK;
        vec->bwd(dinp + i0, inp + i0, dout + i0, len);
    }
}
