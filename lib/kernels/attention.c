/* Attention: smeared keys (ICL paper) and the fused causal attention kernels' dispatch:
 * scores, mask, softmax and the mix with V per (batch, head), computing only k <= p, in
 * the instruction set attn_vec chooses (the kernels themselves are attention_vec.c). */
#include "kernels_internal.h"

#include <math.h>
#include <string.h>

static inline float sigmoidf_(float a) { return 1.0f / (1.0f + expf(-a)); }

void induct__smear_forward(float *k, const float *k_raw, const float *alpha, size_t B, size_t T,
                           size_t H, size_t dh, int nt) {
    size_t HD = H * dh;
    PFOR
    for (idx bt = 0; bt < (idx)(B * T); bt++) {
        size_t t = (size_t)bt % T;
        float *o = k + (size_t)bt * HD;
        const float *cur = k_raw + (size_t)bt * HD;
        if (t == 0) {
            memcpy(o, cur, HD * sizeof *o);
            continue;
        }
        const float *prev = cur - HD;
        for (size_t h = 0; h < H; h++) {
            float s = sigmoidf_(alpha[h]);
            for (size_t j = 0; j < dh; j++)
                o[h * dh + j] = s * cur[h * dh + j] + (1.0f - s) * prev[h * dh + j];
        }
    }
}

void induct__smear_backward(float *dk_raw, float *dalpha_bh, const float *dk, const float *k_raw,
                            const float *alpha, size_t B, size_t T, size_t H, size_t dh, int nt) {
    size_t HD = H * dh;
    PFOR
    for (idx bh = 0; bh < (idx)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H;
        float s = sigmoidf_(alpha[h]);
        double da = 0.0;
        for (size_t t = 0; t < T; t++) {
            size_t row = (b * T + t) * HD + h * dh;
            const float *g = dk + row;
            float *o = dk_raw + row;
            const float *gn = (t + 1 < T) ? dk + row + HD : NULL;
            for (size_t j = 0; j < dh; j++) {
                float v = (t == 0) ? g[j] : s * g[j];
                if (gn) v += (1.0f - s) * gn[j];
                o[j] = v;
            }
            if (t > 0) {
                const float *cur = k_raw + row, *prev = k_raw + row - HD;
                for (size_t j = 0; j < dh; j++) da += (double)g[j] * (cur[j] - prev[j]);
            }
        }
        dalpha_bh[bh] = (float)(da * s * (1.0f - s));
    }
}

/* The attention kernels' instruction set for sequences of T: AVX-512VL, AVX2 or
 * portable. The 8-row tiles pay off from long sequences on (measured on Zen 4, 4096
 * tokens, d_head 16: T 512 4-6 % faster forward and backward, T 256 even, T 64 the
 * backward 15 % slower: more of each tile lies past the diagonal). */
static const induct__attn_vec *attn_vec(size_t T) {
#ifdef INDUCT_X86_SIMD
    if (!induct__simd_active()) return &induct__attn_portable;
    if (T > 256 && induct__simd_avx512_active()) return &induct__attn_avx512;
    return &induct__attn_avx2;
#else
    (void)T;
    return &induct__attn_portable;
#endif
}

size_t induct__attn_scratch_floats(size_t T, size_t dh) {
    size_t Tp = attn_stride(T), Tr = attn_rows(T);
    /* backward (the larger): V^T, packed K, Q, dz, then dS and a copy of the pattern */
    size_t n = dh * Tp + 3 * T * dh + 2 * Tr * Tp;
    return (n + 15) & ~(size_t)15; /* keep every thread's block 64-byte aligned */
}

/* Short sequences: while one (batch, head) computes, its successor's operands are
 * prefetched into L2. In a training step they come from L3 or memory (the projections and
 * the layer's other heads ran in between), and a head of T 64, d_head 16 is too short a
 * job for the hardware prefetchers to run ahead: the backward spent about half its own
 * time on loads of the pattern and the packed rows. Measured on Zen 4 (bench config b,
 * T 64): the step 7-12 % faster at one thread. For T > 128 nothing measurable was gained
 * (config e, T 512), and a pattern of that size would not sit in L2 beside the current
 * head's. A hint only: no result depends on it. */
#define PREFETCH_T 128

/* the [T][dh] rows of (batch, head) bh (of H heads) in a [B T][ld] matrix of heads' columns */
static void prefetch_head(const float *x, size_t ld, size_t bh, size_t H, size_t T, size_t dh) {
    x += bh / H * T * ld + bh % H * dh;
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < dh; j += 16) __builtin_prefetch(x + t * ld + j, 0, 2);
}

/* the causal part of a [T][T] pattern: row t up to column t */
static void prefetch_causal(const float *att, size_t T) {
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j <= t; j += 16) __builtin_prefetch(att + t * T + j, 0, 2);
}

/* induct__attn_causal_forward, and with scores_out the masked scores stored there as the
 * kernel computes them (before its softmax, from the same registers' values). */
static void attn_forward(float *z, size_t ldz, float *att, const float *q, size_t ldq,
                         const float *k, size_t ldk, const float *v, size_t ldv, size_t B,
                         size_t T, size_t H, size_t dh, float *scratch, int nt, unsigned stages,
                         float *scores_out) {
    size_t per = induct__attn_scratch_floats(T, dh);
    float scale = 1.0f / sqrtf((float)dh);
    const induct__attn_vec *kn = attn_vec(T);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        float *sc = induct__thread_scratch(scratch, per);
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (idx bh = 0; bh < (idx)(B * H); bh++) {
            size_t b = (size_t)bh / H, h = (size_t)bh % H, r0 = b * T, a0 = (size_t)bh * T * T;
            float *zb = z + r0 * ldz + h * dh, *ab = att + a0;
            const float *qb = q + r0 * ldq + h * dh, *kb = k + r0 * ldk + h * dh;
            const float *vb = v + r0 * ldv + h * dh;
            if (T <= PREFETCH_T && bh + 1 < (idx)(B * H)) {
                size_t n = (size_t)bh + 1;
                prefetch_head(q, ldq, n, H, T, dh);
                prefetch_head(k, ldk, n, H, T, dh);
                prefetch_head(v, ldv, n, H, T, dh);
            }
            kn->fwd(zb, ldz, ab, qb, ldq, kb, ldk, vb, ldv, T, dh, scale, sc, stages,
                   scores_out ? scores_out + a0 : NULL);
        }
    }
}

void induct__attn_causal_forward(float *z, size_t ldz, float *att, const float *q, size_t ldq,
                                 const float *k, size_t ldk, const float *v, size_t ldv, size_t B,
                                 size_t T, size_t H, size_t dh, float *scratch, int nt,
                                 unsigned stages) {
    attn_forward(z, ldz, att, q, ldq, k, ldk, v, ldv, B, T, H, dh, scratch, nt, stages, NULL);
}

void induct__attn_causal_forward_scores(float *z, size_t ldz, float *att, float *scores,
                                        const float *q, size_t ldq, const float *k, size_t ldk,
                                        const float *v, size_t ldv, size_t B, size_t T, size_t H,
                                        size_t dh, float *scratch, int nt) {
    attn_forward(z, ldz, att, q, ldq, k, ldk, v, ldv, B, T, H, dh, scratch, nt,
                 INDUCT__ATTN_ALL, scores);
}

void induct__attn_causal_rows(float *z, size_t ldz, float *att, const float *q, size_t ldq,
                              const float *k, size_t ldk, const float *v, size_t ldv, size_t B,
                              size_t T, size_t H, size_t dh, const size_t *rows, size_t n_rows,
                              float *scratch, int nt) {
    size_t per = induct__attn_scratch_floats(T, dh);
    float scale = 1.0f / sqrtf((float)dh);
    const induct__attn_vec *kn = attn_vec(T); /* the set (and tile) the whole pass takes */
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        float *sc = induct__thread_scratch(scratch, per);
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (idx bh = 0; bh < (idx)(B * H); bh++) {
            size_t b = (size_t)bh / H, h = (size_t)bh % H, r0 = b * T;
            kn->rows(z + r0 * ldz + h * dh, ldz, att + (size_t)bh * T * T, q + r0 * ldq + h * dh,
                    ldq, k + r0 * ldk + h * dh, ldk, v + r0 * ldv + h * dh, ldv, T, dh, scale, sc,
                    rows, n_rows, b);
        }
    }
}

void induct__attn_causal_backward(float *dq, float *dk, float *dv, const float *dz, size_t ldz,
                                  const float *q, size_t ldq, const float *k, size_t ldk,
                                  const float *v, size_t ldv, const float *att,
                                  const uint8_t *amask, const float *att_sm,
                                  const uint8_t *smask, size_t B, size_t T, size_t H, size_t dh,
                                  float *scratch, int nt) {
    size_t per = induct__attn_scratch_floats(T, dh);
    float scale = 1.0f / sqrtf((float)dh);
    const induct__attn_vec *kn = attn_vec(T);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        float *sc = induct__thread_scratch(scratch, per);
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (idx bh = 0; bh < (idx)(B * H); bh++) {
            size_t b = (size_t)bh / H, h = (size_t)bh % H, r0 = b * T, o = h * dh;
            size_t a0 = (size_t)bh * T * T;
            if (T <= PREFETCH_T && bh + 1 < (idx)(B * H)) {
                size_t n = (size_t)bh + 1;
                prefetch_causal(att + a0 + T * T, T);
                prefetch_head(q, ldq, n, H, T, dh);
                prefetch_head(k, ldk, n, H, T, dh);
                prefetch_head(dz, ldz, n, H, T, dh);
                prefetch_head(v, ldv, n, H, T, dh);
            }
            kn->bwd(dq + r0 * ldq + o, dk + r0 * ldk + o, dv + r0 * ldv + o, dz + r0 * ldz + o,
                   ldz, q + r0 * ldq + o, ldq, k + r0 * ldk + o, ldk, v + r0 * ldv + o, ldv,
                   att + a0, amask ? amask + a0 : NULL, att_sm ? att_sm + a0 : NULL,
                   smask ? smask + a0 : NULL, T, dh, scale, sc);
        }
    }
}

/* ---- the backward in parts (gradient hooks at the pattern and the scores) ---------- */

void induct__attn_grad_pattern(float *dA, const float *dz, const float *v, size_t ld, size_t B,
                               size_t T, size_t H, size_t dh, int nt) {
    /* per (batch, head): dA = dz v^T, one product, then the part above the diagonal 0 */
    for (size_t bh = 0; bh < B * H; bh++) {
        size_t o = bh / H * T * ld + bh % H * dh;
        float *a = dA + bh * T * T;
        induct__gemm(nt, 0, 1, T, T, dh, 1.0f, dz + o, ld, v + o, ld, 0.0f, a, T);
        for (size_t p = 0; p + 1 < T; p++) memset(a + p * T + p + 1, 0, (T - p - 1) * sizeof *a);
    }
}

void induct__attn_grad_scores(float *dS, const float *dA, const float *att_j,
                              const uint8_t *amask, size_t BH, size_t T, int nt) {
    PFOR
    for (idx r = 0; r < (idx)(BH * T); r++) {
        size_t p = (size_t)r % T, o = (size_t)r * T;
        const float *a = att_j + o, *g = dA + o;
        const uint8_t *mk = amask ? amask + o : NULL;
        double s = 0.0;
        for (size_t k = 0; k <= p; k++)
            if (!mk || !mk[k]) s += (double)a[k] * g[k];
        float *d = dS + o;
        for (size_t k = 0; k <= p; k++) {
            double gk = mk && mk[k] ? 0.0 : (double)g[k];
            d[k] = (float)(a[k] * (gk - s));
        }
        for (size_t k = p + 1; k < T; k++) d[k] = 0.0f;
    }
}

void induct__attn_grad_qkv(float *dq, float *dk, float *dv, float *dS, const uint8_t *smask,
                           const float *att, const float *dz, const float *q, const float *k,
                           size_t ld, size_t B, size_t T, size_t H, size_t dh, float *scratch,
                           int nt) {
    float scale = 1.0f / sqrtf((float)dh);
    for (size_t bh = 0; bh < B * H; bh++) {
        size_t o = bh / H * T * ld + bh % H * dh, e0 = bh * T * T;
        float *S = dS + e0, *A = scratch;
        /* dS with the masked scores and everything above the diagonal 0 (in place); the
         * causal part of the pattern (the rest of a training pass's rows is not written) */
        for (size_t p = 0; p < T; p++) {
            for (size_t t = 0; t <= p; t++) {
                if (smask && smask[e0 + p * T + t]) S[p * T + t] = 0.0f;
                A[p * T + t] = att[e0 + p * T + t];
            }
            for (size_t t = p + 1; t < T; t++) S[p * T + t] = A[p * T + t] = 0.0f;
        }
        induct__gemm(nt, 0, 0, T, dh, T, scale, S, T, k + o, ld, 0.0f, dq + o, ld);
        induct__gemm(nt, 1, 0, T, dh, T, scale, S, T, q + o, ld, 0.0f, dk + o, ld);
        induct__gemm(nt, 1, 0, T, dh, T, 1.0f, A, T, dz + o, ld, 0.0f, dv + o, ld);
    }
}
