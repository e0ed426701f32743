/* The fused causal attention kernels per (batch, head), written once over the vector
 * vocabulary of simd.h and compiled once per instruction set (portable, AVX2 + FMA, and
 * AVX-512VL, whose 32 registers hold 8-row query tiles: QB 8; with 16 registers the tile
 * has ATTN_QB = 4 rows). Every lane performs the same operations in the same order in
 * all of them, so they are bit-identical: the tile height only decides which query rows
 * share a pass over K or V. attention.c chooses one per call (induct__attn_vec). */
#include "simd.h"

#if INDUCT_VEC
#ifdef INDUCT_ISA_AVX512
#define QB ATTN_QB_MAX /* query rows per register tile: 32 registers hold 8 */
#else
#define QB ATTN_QB
#endif

/* S[i][0 .. 8*nv) = scale * sum_j x[i][j] * yt[j][..], i < QB, for 8*nv columns of the
 * transposed operand yt [dh][Tp]. x rows are xr[i]. The sum runs over j in order. */
static ATTR void FN(block_dots)(float *S, size_t Tp, const float *const xr[QB], const float *yt,
                                size_t dh, size_t nv, float scale) {
    const VF vs = v_set1(scale);
    size_t c = 0;
    for (; c + 2 <= nv; c += 2) {
        VF a[QB][2];
        for (int i = 0; i < QB; i++) a[i][0] = a[i][1] = v_zero();
        const float *y = yt + 8 * c;
        for (size_t j = 0; j < dh; j++, y += Tp) {
            VF y0 = v_load(y), y1 = v_load(y + 8);
            for (int i = 0; i < QB; i++) {
                VF b = v_set1(xr[i][j]);
                a[i][0] = v_fma(b, y0, a[i][0]);
                a[i][1] = v_fma(b, y1, a[i][1]);
            }
        }
        for (int i = 0; i < QB; i++) {
            v_store(S + i * Tp + 8 * c, v_mul(a[i][0], vs));
            v_store(S + i * Tp + 8 * c + 8, v_mul(a[i][1], vs));
        }
    }
    if (c < nv) {
        VF a[QB];
        for (int i = 0; i < QB; i++) a[i] = v_zero();
        const float *y = yt + 8 * c;
        for (size_t j = 0; j < dh; j++, y += Tp) {
            VF y0 = v_load(y);
            for (int i = 0; i < QB; i++) a[i] = v_fma(v_set1(xr[i][j]), y0, a[i]);
        }
        for (int i = 0; i < QB; i++) v_store(S + i * Tp + 8 * c, v_mul(a[i], vs));
    }
}

/* out[i][col] = sum_{r = r0}^{r1-1} w[i][r*ldw] * Y[r][col] for i < nq, col < dh; the sum
 * runs over r in order. w[i] (QB of them, all readable for r in [r0, r1)), Y rows stride
 * ldy, out rows outr[i] (only i < nq written). */
static ATTR void FN(block_mix)(float *const outr[QB], size_t nq, const float *const w[QB],
                               size_t ldw, const float *Y, size_t ldy, size_t r0, size_t r1,
                               size_t dh) {
    size_t c0 = 0;
    for (; c0 + 16 <= dh; c0 += 16) {
        VF z[QB][2];
        for (int i = 0; i < QB; i++) z[i][0] = z[i][1] = v_zero();
        const float *y = Y + r0 * ldy + c0;
        for (size_t r = r0; r < r1; r++, y += ldy) {
            VF y0 = v_load(y), y1 = v_load(y + 8);
            size_t o = r * ldw;
            for (int i = 0; i < QB; i++) {
                VF b = v_set1(w[i][o]);
                z[i][0] = v_fma(b, y0, z[i][0]);
                z[i][1] = v_fma(b, y1, z[i][1]);
            }
        }
        for (size_t i = 0; i < nq; i++) {
            v_store(outr[i] + c0, z[i][0]);
            v_store(outr[i] + c0 + 8, z[i][1]);
        }
    }
    if (c0 + 8 <= dh) {
        VF z[QB];
        for (int i = 0; i < QB; i++) z[i] = v_zero();
        const float *y = Y + r0 * ldy + c0;
        for (size_t r = r0; r < r1; r++, y += ldy) {
            VF y0 = v_load(y);
            size_t o = r * ldw;
            for (int i = 0; i < QB; i++) z[i] = v_fma(v_set1(w[i][o]), y0, z[i]);
        }
        for (size_t i = 0; i < nq; i++) v_store(outr[i] + c0, z[i]);
        c0 += 8;
    }
    for (; c0 < dh; c0++)
        for (size_t i = 0; i < nq; i++) {
            float acc = 0.0f;
            for (size_t r = r0; r < r1; r++) acc = FMA_(w[i][r * ldw], Y[r * ldy + c0], acc);
            outr[i][c0] = acc;
        }
}

/* yt[j][t] = Y[t][j] for t < T, 0 for T <= t < Tp (pure data movement: both
 * instantiations agree trivially). 8x8 tiles through v_transpose8 where it exists. */
static ATTR void FN(transpose)(float *yt, size_t Tp, const float *Y, size_t ldy, size_t T,
                               size_t dh) {
    size_t t0 = 0;
#ifdef v_transpose8
    for (; t0 + 8 <= T; t0 += 8) {
        size_t j = 0;
        for (; j + 8 <= dh; j += 8) v_transpose8(yt + j * Tp + t0, Tp, Y + t0 * ldy + j, ldy);
        for (; j < dh; j++)
            for (size_t t = t0; t < t0 + 8; t++) yt[j * Tp + t] = Y[t * ldy + j];
    }
#endif
    for (size_t j = 0; j < dh; j++) {
        float *row = yt + j * Tp;
        for (size_t t = t0; t < T; t++) row[t] = Y[t * ldy + j];
        for (size_t t = T; t < Tp; t++) row[t] = 0.0f;
    }
}

/* Copy n floats (vectors while they fit). */
static ATTR void FN(copy)(float *dst, const float *src, size_t n) {
    size_t t = 0;
    for (; t + 8 <= n; t += 8) v_store(dst + t, v_load(src + t));
    for (; t < n; t++) dst[t] = src[t];
}

/* Zero n floats. */
static ATTR void FN(zero)(float *dst, size_t n) {
    size_t t = 0;
    VF z = v_zero();
    for (; t + 8 <= n; t += 8) v_store(dst + t, z);
    for (; t < n; t++) dst[t] = 0.0f;
}

/* Copy a head's [T][dh] slice (rows stride ld) into contiguous rows. */
static ATTR void FN(pack)(float *dst, const float *src, size_t ld, size_t T, size_t dh) {
    for (size_t t = 0; t < T; t++) FN(copy)(dst + t * dh, src + t * ld, dh);
}

/* Causal softmax of the QB score rows S[i] (stride Tp), query p0+i sees keys < p0+i+1; the
 * rows are processed together so that their dependency chains overlap. The first nq rows
 * are written to out (pattern rows of length T, stride T) with exact zeros past the
 * diagonal; S keeps the unnormalised exponentials, or with keep_rows the pattern rows'
 * first 8*nv columns, which then go to out by streaming stores (out 32-byte aligned, T a
 * multiple of 8). */
static ATTR void FN(softmax_block)(float *out, size_t T, size_t nq, float *S, size_t Tp,
                                   size_t p0, size_t nv, int tail, int keep_rows) {
    /* only the last vector of a row can reach past its diagonal (QB <= 8 rows, 8 lanes) */
    size_t cl = 8 * (nv - 1);
    VF m[QB], a[QB], keep[QB];
    const VF ninf = v_set1(-INFINITY);
    for (int i = 0; i < QB; i++) {
        keep[i] = v_lanes_below(p0 + (size_t)i + 1 - cl);
        m[i] = v_select(keep[i], v_load(S + i * Tp + cl), ninf);
    }
    for (size_t c = 0; c < cl; c += 8)
        for (int i = 0; i < QB; i++) m[i] = v_max(m[i], v_load(S + i * Tp + c));
    for (int i = 0; i < QB; i++) {
        m[i] = v_set1(v_hmax(m[i]));
        a[i] = v_zero();
    }
    for (size_t c = 0; c < cl; c += 8)
        for (int i = 0; i < QB; i++) {
            VF e = v_exp(v_sub(v_load(S + i * Tp + c), m[i]));
            v_store(S + i * Tp + c, e);
            a[i] = v_add(a[i], e);
        }
    for (int i = 0; i < QB; i++) {
        VF e = v_select(keep[i], v_exp(v_sub(v_load(S + i * Tp + cl), m[i])), v_zero());
        v_store(S + i * Tp + cl, e);
        a[i] = v_add(a[i], e);
    }
    /* each sum is >= 1 (the maximum contributes exp(0) = 1) */
    for (int i = 0; i < QB; i++) a[i] = v_set1(1.0f / v_hsum(a[i]));
    if (keep_rows) { /* the rows' 8*nv columns lie inside T (a multiple of 8) */
        for (size_t i = 0; i < nq; i++) {
            float *o = out + i * T, *r = S + i * Tp;
            for (size_t c = 0; c < 8 * nv; c += 8) {
                VF x = v_mul(v_load(r + c), a[i]);
                v_store(r + c, x);
                v_stream(o + c, x);
            }
            if (tail)
                for (size_t c = 8 * nv; c < T; c += 8) v_stream(o + c, v_zero());
        }
        return;
    }
    /* normalised straight into the pattern rows (rows past T are not written): whole
     * vectors while they fit in T, then lane by lane, then zeros to the end of the row */
    size_t cw = T < 8 * nv ? T & ~(size_t)7 : 8 * nv;
    for (size_t i = 0; i < nq; i++) {
        float *o = out + i * T;
        for (size_t c = 0; c < cw; c += 8) v_store(o + c, v_mul(v_load(S + i * Tp + c), a[i]));
        if (cw < 8 * nv) {
            float tail[8];
            v_store(tail, v_mul(v_load(S + i * Tp + cw), a[i]));
            for (size_t t = cw; t < T; t++) o[t] = tail[t - cw];
        }
        if (tail) FN(zero)(o + 8 * nv, T > 8 * nv ? T - 8 * nv : 0);
    }
}

/* Softmax backward of QB rows: S[i] holds dA (stride Tp) for columns < 8*nv, A[i] the
 * pattern rows (stride lda) with exact zeros past the diagonal up to 8*nv. Result:
 * S[i][t] = A (dA - sum_t' A dA) * scale for t < 8*nv, which is (+-)0 past the diagonal. */
static ATTR void FN(softmax_back_block)(float *S, size_t Tp, const float *A, size_t lda,
                                        size_t nv, float scale) {
    VF d[QB];
    for (int i = 0; i < QB; i++) d[i] = v_zero();
    for (size_t c = 0; c < 8 * nv; c += 8)
        for (int i = 0; i < QB; i++)
            d[i] = v_fma(v_load(A + i * lda + c), v_load(S + i * Tp + c), d[i]);
    for (int i = 0; i < QB; i++) d[i] = v_set1(v_hsum(d[i]));
    VF vs = v_set1(scale);
    for (size_t c = 0; c < 8 * nv; c += 8)
        for (int i = 0; i < QB; i++) {
            float *s = S + i * Tp + c;
            v_store(s, v_mul(v_mul(v_load(A + i * lda + c), v_sub(v_load(s), d[i])), vs));
        }
}

/* The nq score rows of query block p0 from S (stride Tp) into out (stride T): the
 * causal part, -inf above the diagonal. */
static ATTR void FN(store_scores)(float *out, size_t T, const float *S, size_t Tp, size_t p0,
                                  size_t nq) {
    for (size_t i = 0; i < nq; i++) {
        float *o = out + i * T;
        FN(copy)(o, S + i * Tp, p0 + i + 1);
        for (size_t t = p0 + i + 1; t < T; t++) o[t] = -INFINITY;
    }
}

/* One (batch, head): see induct__attn_causal_forward. Scratch (attn_layout): kt [dh][Tp],
 * vh [T][dh], S [Tr][Tp]. Two passes over the query blocks: scores, softmax and the
 * pattern rows (reads K^T), then z = A v (reads V); interleaving them per block made
 * the two streams evict each other from L1 (measured 1.5-2x slower for T >= 256).
 * The fused pass of a long sequence (T >= ATTN_STREAM_T, a multiple of 8, att 32-byte
 * aligned, an instantiation with streaming stores) makes the two passes per group of
 * ATTN_GROUP query rows instead: the group's pattern rows stay in S, where z = A v reads
 * them from cache, and go to att by streaming stores, which skip reading each line of att
 * from memory before writing it (measured on Zen 4, d_head 16-64, T 256-1024: the forward
 * 8-27 % faster). z = A v reads the same values in the same order either way, so the bits
 * do not change.
 * `stages` (INDUCT__ATTN_*) selects parts: without SCORES the scores are read from att
 * (as SCORES without SOFTMAX left them), without SOFTMAX the masked scores are stored in
 * att; each part does the same operations as in the fused pass, so the split pass has the
 * fused pass's bits. scores (or NULL): [T][T], where SCORES also stores the masked scores
 * as SCORES alone would store them in att. */
static ATTR void FN(attn_fwd_bh)(float *z, size_t ldz, float *att, const float *q, size_t ldq,
                                 const float *k, size_t ldk, const float *v, size_t ldv, size_t T,
                                 size_t dh, float scale, float *scratch, unsigned stages,
                                 float *scores) {
    size_t Tp = attn_stride(T);
    float *kt = scratch, *vh = kt + dh * Tp, *S = vh + T * dh;
    int fused = V_STREAMS && (stages & INDUCT__ATTN_ALL) == INDUCT__ATTN_ALL && !scores &&
                T >= ATTN_STREAM_T && T % 8 == 0 && (uintptr_t)att % 32 == 0;
    size_t G = fused ? ATTN_GROUP : T; /* otherwise one group of every row */
    if (stages & INDUCT__ATTN_SCORES) FN(transpose)(kt, Tp, k, ldk, T, dh);
    if (stages & INDUCT__ATTN_MIX) FN(pack)(vh, v, ldv, T, dh);
    for (size_t g0 = 0; g0 < T; g0 += G) {
        size_t g1 = T - g0 < G ? T : g0 + G;
        for (size_t p0 = g0; (stages & (INDUCT__ATTN_SCORES | INDUCT__ATTN_SOFTMAX)) && p0 < g1;
             p0 += QB) {
            size_t nq = T - p0 < QB ? T - p0 : QB, kend = p0 + nq, nv = (kend + 7) / 8;
            float *Sb = S + (p0 - g0) * Tp; /* g0 is 0 unless fused */
            if (stages & INDUCT__ATTN_SCORES) {
                const float *qr[QB];
                for (size_t i = 0; i < QB; i++) qr[i] = q + (p0 + (i < nq ? i : nq - 1)) * ldq;
                FN(block_dots)(Sb, Tp, qr, kt, dh, nv, scale);
            } else { /* the stored scores; columns past T are masked by the softmax */
                size_t w = 8 * nv < T ? 8 * nv : T;
                for (size_t i = 0; i < QB; i++) {
                    FN(copy)(Sb + i * Tp, att + (p0 + (i < nq ? i : nq - 1)) * T, w);
                    FN(zero)(Sb + i * Tp + w, 8 * nv - w);
                }
            }
            if (scores && (stages & INDUCT__ATTN_SCORES))
                FN(store_scores)(scores + p0 * T, T, Sb, Tp, p0, nq);
            if (stages & INDUCT__ATTN_SOFTMAX)
                FN(softmax_block)(att + p0 * T, T, nq, Sb, Tp, p0, nv,
                                  !(stages & INDUCT__ATTN_NO_TAIL), fused);
            else
                FN(store_scores)(att + p0 * T, T, Sb, Tp, p0, nq);
        }
        if (!(stages & INDUCT__ATTN_MIX)) continue;
        for (size_t p0 = g0; p0 < g1; p0 += QB) {
            size_t nq = T - p0 < QB ? T - p0 : QB;
            const float *ar[QB];
            float *zr[QB];
            for (size_t i = 0; i < QB; i++) {
                size_t p = p0 + (i < nq ? i : nq - 1);
                zr[i] = z + p * ldz;
                ar[i] = fused ? S + (p - g0) * Tp : att + p * T;
            }
            FN(block_mix)(zr, nq, ar, 1, vh, dh, 0, p0 + nq, dh); /* z = A v */
        }
    }
    if (fused) v_stream_fence();
}

/* One (batch, head) b, only at the rows b*T + p among rows[0 .. n) (any order; the
 * others are skipped): see induct__attn_causal_rows. Each row gets the operations
 * attn_fwd_bh gives it in its query block [p0, p0 + nq), p0 = p - p % QB: the scores of
 * the 8*nv keys that block reads (nv = ceil((p0 + nq) / 8) = ceil((p + 1) / 8), as QB
 * divides 8), the softmax with the same lanes kept, and z = A v summed over r < p0 + nq
 * (the pattern row is exactly 0 past p). The tile's other rows repeat the row; only it
 * is written. */
static ATTR void FN(attn_rows_bh)(float *z, size_t ldz, float *att, const float *q, size_t ldq,
                                  const float *k, size_t ldk, const float *v, size_t ldv,
                                  size_t T, size_t dh, float scale, float *scratch,
                                  const size_t *rows, size_t n, size_t b) {
    size_t Tp = attn_stride(T);
    float *kt = scratch, *vh = kt + dh * Tp, *S = vh + T * dh;
    int packed = 0;
    for (size_t i = 0; i < n; i++) {
        if (rows[i] / T != b) continue;
        if (!packed) {
            FN(transpose)(kt, Tp, k, ldk, T, dh);
            FN(pack)(vh, v, ldv, T, dh);
            packed = 1;
        }
        size_t p = rows[i] % T, p0 = p - p % QB, nq = T - p0 < QB ? T - p0 : QB;
        size_t nv = (p0 + nq + 7) / 8;
        const float *qr[QB];
        const float *ar[QB];
        float *zr[QB];
        for (size_t j = 0; j < QB; j++) {
            qr[j] = q + p * ldq;
            ar[j] = att + p * T;
            zr[j] = z + p * ldz;
        }
        FN(block_dots)(S, Tp, qr, kt, dh, nv, scale);
        FN(softmax_block)(att + p * T, T, 1, S, Tp, p, nv, 1, 0);
        FN(block_mix)(zr, 1, ar, 1, vh, dh, 0, p0 + nq, dh);
    }
}

/* Rows p0 .. p0+QB-1 of A2 (stride Tp) from the pattern att (stride T): whole vectors
 * of each row (exactly 0 past the diagonal up to T), zeros up to `wide`; rows past T all
 * zero. */
static ATTR void FN(pattern_rows)(float *A2, size_t Tp, const float *att, size_t T, size_t p0,
                                  size_t nq, size_t wide) {
    for (size_t i = 0; i < QB; i++) {
        float *a2 = A2 + (p0 + i) * Tp;
        size_t n = 0;
        if (i < nq) {
            n = (p0 + i + 8) & ~(size_t)7;
            if (n > T) n = T;
            FN(copy)(a2, att + (p0 + i) * T, n);
        }
        FN(zero)(a2 + n, wide - n);
    }
}

/* One (batch, head): see induct__attn_causal_backward. Scratch (attn_layout): vt [dh][Tp],
 * kh, qh, dzh [T][dh], S and A2 [Tr][Tp]. */
static ATTR void FN(attn_bwd_bh)(float *dq, float *dk, float *dv, const float *dz, size_t ldz,
                                 const float *q, size_t ldq, const float *k, size_t ldk,
                                 const float *v, size_t ldv, const float *att,
                                 const uint8_t *amask, const float *att_sm,
                                 const uint8_t *smask, size_t T, size_t dh, float scale,
                                 float *scratch) {
    size_t Tp = attn_stride(T), Tr = attn_rows(T);
    float *vt = scratch, *kh = vt + dh * Tp, *qh = kh + T * dh, *dzh = qh + T * dh;
    float *S = dzh + T * dh, *A2 = S + Tr * Tp;
    /* The pattern is read in whole vectors and down columns. When T is a multiple of 8
     * it is read in place: a row is exactly 0 past the diagonal to the end of the diagonal's
     * vector, and no read goes further (pass 2 reads row r of key block k0 <= r at columns
     * below k0 + QB, inside the vector of r's diagonal when QB divides 8). Reading down
     * columns at a power-of-two stride such as T = 512 costs less than copying the rows
     * (measured on Zen 4, T 256-1024, d_head 16 and 32: the backward 5-12 % faster).
     * Otherwise from A2, a copy at the padded stride (always when the softmax's Jacobian
     * reads another pattern, att_sm: A2 holds it in pass 1, then att for dv). */
    int direct = !att_sm && T % 8 == 0;
    const float *A = direct ? att : A2;
    size_t lda = direct ? T : Tp;
    FN(transpose)(vt, Tp, v, ldv, T, dh);
    FN(pack)(kh, k, ldk, T, dh);
    FN(pack)(qh, q, ldq, T, dh);
    FN(pack)(dzh, dz, ldz, T, dh);
    /* pass 1, query-major: dA = dz v^T and dS = softmax backward, kept whole for the
     * passes below. A2 (when not direct) = the pattern rows at the padded stride, exact
     * zeros past the diagonal up to the columns pass 2 reads (8*nv + QB, at most Tp);
     * rows past T are all zero. */
    for (size_t p0 = 0; p0 < T; p0 += QB) {
        size_t nq = T - p0 < QB ? T - p0 : QB, kend = p0 + nq, nv = (kend + 7) / 8;
        size_t wide = 8 * nv + QB < Tp ? 8 * nv + QB : Tp;
        const float *dzr[QB];
        for (size_t i = 0; i < QB; i++) dzr[i] = dzh + (p0 + (i < nq ? i : nq - 1)) * dh;
        if (!direct) FN(pattern_rows)(A2, Tp, att_sm ? att_sm : att, T, p0, nq, wide);
        FN(block_dots)(S + p0 * Tp, Tp, dzr, vt, dh, nv, 1.0f);
        if (amask) /* pattern entries a hook set are constants: no dA */
            for (size_t i = 0; i < nq; i++)
                for (size_t t = 0; t <= p0 + i; t++)
                    if (amask[(p0 + i) * T + t]) S[(p0 + i) * Tp + t] = 0.0f;
        FN(softmax_back_block)(S + p0 * Tp, Tp, A + p0 * lda, lda, nv, scale);
        if (smask) /* scores a hook set are constants: no gradient to q and k */
            for (size_t i = 0; i < nq; i++)
                for (size_t t = 0; t <= p0 + i; t++)
                    if (smask[(p0 + i) * T + t]) S[(p0 + i) * Tp + t] = 0.0f;
        for (size_t i = 0; i < QB; i++) FN(zero)(S + (p0 + i) * Tp + 8 * nv, wide - 8 * nv);
    }
    if (att_sm) /* dv = A^T dz reads the pattern z was computed from */
        for (size_t p0 = 0; p0 < T; p0 += QB) {
            size_t nq = T - p0 < QB ? T - p0 : QB, nv = (p0 + nq + 7) / 8;
            size_t wide = 8 * nv + QB < Tp ? 8 * nv + QB : Tp;
            FN(pattern_rows)(A2, Tp, att, T, p0, nq, wide);
        }
    /* dq = dS k, its own pass (separate streams, as in the forward) */
    for (size_t p0 = 0; p0 < T; p0 += QB) {
        size_t nq = T - p0 < QB ? T - p0 : QB;
        const float *sr[QB];
        float *dqr[QB];
        for (size_t i = 0; i < QB; i++) {
            dqr[i] = dq + (p0 + (i < nq ? i : nq - 1)) * ldq;
            sr[i] = S + (p0 + i) * Tp;
        }
        FN(block_mix)(dqr, nq, sr, 1, kh, dh, 0, p0 + nq, dh);
    }
    /* pass 2, key-major: dk = dS^T q, dv = A^T dz, over queries r >= the block's first key
     * (row r is read at columns <= r + QB - 1, all set above) */
    for (size_t k0 = 0; k0 < T; k0 += QB) {
        size_t nk = T - k0 < QB ? T - k0 : QB;
        const float *sc[QB];
        float *dkr[QB];
        for (size_t i = 0; i < QB; i++) {
            size_t kk = k0 + (i < nk ? i : nk - 1);
            sc[i] = S + kk;
            dkr[i] = dk + kk * ldk;
        }
        FN(block_mix)(dkr, nk, sc, Tp, qh, dh, k0, T, dh);
    }
    for (size_t k0 = 0; k0 < T; k0 += QB) {
        size_t nk = T - k0 < QB ? T - k0 : QB;
        const float *ac[QB];
        float *dvr[QB];
        for (size_t i = 0; i < QB; i++) {
            size_t kk = k0 + (i < nk ? i : nk - 1);
            ac[i] = A + kk;
            dvr[i] = dv + kk * ldv;
        }
        FN(block_mix)(dvr, nk, ac, lda, dzh, dh, k0, T, dh);
    }
}

const induct__attn_vec FN(induct__attn) = {FN(attn_fwd_bh), FN(attn_rows_bh), FN(attn_bwd_bh)};
#endif
