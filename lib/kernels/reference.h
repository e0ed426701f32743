/* Reference kernels: the plain, unfused forms of the transformer's operations that the
 * tests compare the library's kernels with (tests/check_kernels.c, tests/check_fused.c),
 * and the switches that choose the instruction set the tests run. Not part of libinduct:
 * they are built into a static library that only the tests and benchmarks link
 * (lib/meson.build). Same conventions as kernels.h. */
#ifndef INDUCT_KERNELS_REFERENCE_H
#define INDUCT_KERNELS_REFERENCE_H

#include "kernels.h"

/* dW_E[tok] += dout; dW_pos[t] += sum_b dout (when dW_pos != NULL). Serial, fixed order. */
void induct__embed_backward(float *dW_E, float *dW_pos, const float *dout, const int32_t *tokens,
                            size_t B, size_t T, size_t D);

/* dinp += ..., dw += ..., db += ...: induct__layernorm_backward_hooked without a hook. */
void induct__layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *mean, const float *rstd,
                                const float *w, size_t N, size_t D, int nt);

/* Causal attention. q,k,v,z: [B,T,H,dh]; att: [B,H,T,T] (post-softmax pattern,
 * upper triangle exactly 0). Scores q.k/sqrt(dh). */
void induct__attention_forward(float *z, float *att, const float *q, const float *k,
                               const float *v, size_t B, size_t T, size_t H, size_t dh, int nt);
/* dq, dk, dv overwritten; datt scratch: nt * T * T floats. */
void induct__attention_backward(float *dq, float *dk, float *dv, float *datt, const float *dz,
                                const float *q, const float *k, const float *v, const float *att,
                                size_t B, size_t T, size_t H, size_t dh, int nt);
/* Numerically exact causal softmax of one row of `n` finite scores into out (n <= row length). */
void induct__softmax_row(float *out, const float *scores, size_t n);

/* GELU, tanh approximation (GPT-2 / TransformerLens "gelu_new"). */
void induct__gelu_forward(float *out, const float *inp, size_t n, int nt);
/* dinp = (overwrite) dout * gelu'(inp). */
void induct__gelu_backward(float *dinp, const float *inp, const float *dout, size_t n, int nt);

/* Per-token cross-entropy: losses[B,T-1] from logits[B,T,V] and next tokens. Returns the
 * sum of all losses (double). */
double induct__xent_forward(float *losses, const float *logits, const int32_t *tokens, size_t B,
                            size_t T, size_t V, int nt);
/* dlogits (overwrite) = (softmax - onehot) * scale for p < T-1, 0 at p = T-1. */
void induct__xent_backward(float *dlogits, const float *logits, const int32_t *tokens, size_t B,
                           size_t T, size_t V, float scale, int nt);

/* Force the portable vector kernels (on = 0) or allow AVX2 + FMA where the CPU has them
 * (on = 1, the default). The same bits either way. */
void induct__simd_enable(int on);
/* The attention kernels' AVX-512VL tile (on by default where the CPU has it); off, they
 * take the AVX2 path. The same bits either way. */
void induct__simd_avx512_enable(int on);

#endif
