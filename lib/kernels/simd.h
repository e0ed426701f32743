/* The vector vocabulary of the kernels (lib/kernels): 8 float lanes (VF) and 8 double
 * lanes (VD, for sums) with the v_* operations below, one set per instruction set. A
 * kernel family's vector code (*_vec.c) is written once over it and compiled once per
 * instruction set, which lib/kernels/meson.build names with -DINDUCT_ISA_<set>:
 *  - PORTABLE: plain C on an 8-lane struct whose lanes use fmaf (WebAssembly: SIMD128, two
 *    4-lane vectors per 8 lanes, multiply and add for fmaf: see FMA_);
 *  - AVX2: AVX2 + FMA intrinsics (x86-64, chosen at run time where the CPU has them);
 *  - AVX512: the AVX2 code compiled for AVX-512VL, whose 32 vector registers hold larger
 *    register tiles (the attention kernels' 8 query rows).
 * Every lane performs the same operations in the same order in every set, and the
 * horizontal reductions keep one tree order, so the sets give the same bits (WebAssembly
 * apart: it has no fused multiply-add). A compilation for a set the host cannot build
 * (AVX2 off x86-64) defines INDUCT_VEC 0 and its file compiles to nothing.
 *
 * The vocabulary: VF, VD; v_zero, v_set1, v_load, v_store, v_fma (a*b+c, one rounding),
 * v_mul, v_add, v_sub, v_div, v_max (as MAXPS), v_sqrt, v_abs, v_copysign, v_exp
 * (induct__expf per lane), v_hsum, v_hmax, v_lanes_below(n) and v_select(k, a, b) (lane
 * masks), vd_zero, v_acc_d (double accumulation of a float vector), vd_hsum, vd_store_f,
 * v_stream (a streaming store to a 32-byte aligned address) and v_stream_fence()
 * (orders them), V_STREAMS (1 when v_stream bypasses the caches), and where the set has
 * it v_transpose8 (an 8x8 tile transpose). FN(name) names a function after the set
 * (name_portable, name_avx2, name_avx512) and ATTR is its target attribute. */
#ifndef INDUCT_KERNELS_SIMD_H
#define INDUCT_KERNELS_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels_internal.h"

/* One multiply-add of the portable path: fmaf (one rounding, as the AVX2 path's FMA, so
 * the two agree bit for bit), except on WebAssembly, which has no fused multiply-add
 * (neither scalar nor in SIMD128) and would call a slow software fmaf: there it is a
 * multiply and an add, which the compiler vectorises; the WebAssembly build has no other
 * path to agree with, and its results differ from the native ones by float rounding. */
#if defined(__wasm__)
#define FMA_(a, b, c) ((a) * (b) + (c))
#else
#define FMA_(a, b, c) fmaf(a, b, c)
#endif

#define EXP_LO (-87.33654475f) /* ln(FLT_MIN): below it the result would be subnormal */
#define EXP_HI 88.0f
#define EXP_LOG2E 1.44269504088896341f
#define EXP_C1 0.693359375f
#define EXP_C2 (-2.12194440e-4f)
#define EXP_P0 1.9875691500e-4f
#define EXP_P1 1.3981999507e-3f
#define EXP_P2 8.3334519073e-3f
#define EXP_P3 4.1665795894e-2f
#define EXP_P4 1.6666665459e-1f
#define EXP_P5 5.0000001201e-1f

/* v_lanes_below(n): lanes l < n selected (n clamped to [0, 8]), read from this table;
 * v_select(k, a, b) = k ? a : b per lane */
static const int32_t lane_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

#if defined(INDUCT_ISA_PORTABLE)
/* -- portable ----------------------------------------------------------------------- */
#define INDUCT_VEC 1
#define FN(name) name##_portable
#define ATTR
#if defined(__wasm_simd128__)
/* WebAssembly SIMD128: the "portable" instantiation as two 4-lane vectors per 8 lanes (the
 * WebAssembly build has no other). Every lane performs the operations of the plain C
 * helpers below except that FMA_ is a multiply and an add (see above); the reductions
 * keep their tree order. */
#include <wasm_simd128.h>
typedef struct vf8 {
    v128_t lo, hi;
} vf8;
typedef struct vd8 {
    v128_t d[4]; /* lanes 0-1, 2-3, 4-5, 6-7 as doubles */
} vd8;
static inline vf8 v_zero(void) {
    vf8 r = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
    return r;
}
static inline vf8 v_set1(float x) { vf8 r = {wasm_f32x4_splat(x), wasm_f32x4_splat(x)}; return r; }
static inline vf8 v_load(const float *p) {
    vf8 r = {wasm_v128_load(p), wasm_v128_load(p + 4)};
    return r;
}
static inline void v_store(float *p, vf8 a) {
    wasm_v128_store(p, a.lo);
    wasm_v128_store(p + 4, a.hi);
}
#define W2(name, op)                                                                               \
    static inline vf8 name(vf8 a, vf8 b) {                                                         \
        vf8 r = {op(a.lo, b.lo), op(a.hi, b.hi)};                                                  \
        return r;                                                                                  \
    }
W2(v_mul, wasm_f32x4_mul)
W2(v_add, wasm_f32x4_add)
W2(v_sub, wasm_f32x4_sub)
W2(v_div, wasm_f32x4_div)
#undef W2
static inline vf8 v_fma(vf8 a, vf8 b, vf8 c) { return v_add(v_mul(a, b), c); }
/* a > b ? a : b per lane, as MAXPS(a, b): pmax(b, a) = (b < a ? a : b) */
static inline vf8 v_max(vf8 a, vf8 b) {
    vf8 r = {wasm_f32x4_pmax(b.lo, a.lo), wasm_f32x4_pmax(b.hi, a.hi)};
    return r;
}
static inline float v_max1(float a, float b) { return a > b ? a : b; }
static inline vf8 v_lanes_below(size_t n) {
    size_t k = n > 8 ? 8 : n;
    return v_load((const float *)(const void *)(lane_tab + 8 - k));
}
static inline vf8 v_select(vf8 k, vf8 a, vf8 b) {
    vf8 r = {wasm_v128_bitselect(a.lo, b.lo, k.lo), wasm_v128_bitselect(a.hi, b.hi, k.hi)};
    return r;
}
static inline vf8 v_sqrt(vf8 a) {
    vf8 r = {wasm_f32x4_sqrt(a.lo), wasm_f32x4_sqrt(a.hi)};
    return r;
}
static inline vf8 v_abs(vf8 a) { vf8 r = {wasm_f32x4_abs(a.lo), wasm_f32x4_abs(a.hi)}; return r; }
static inline vf8 v_copysign(vf8 a, vf8 b) {
    const v128_t sign = wasm_f32x4_splat(-0.0f);
    vf8 r = {wasm_v128_bitselect(b.lo, a.lo, sign), wasm_v128_bitselect(b.hi, a.hi, sign)};
    return r;
}
/* induct__expf on 4 lanes, without branches: the special cases are chosen at the end */
static inline v128_t exp4(v128_t x) {
    const v128_t zero = wasm_f32x4_splat(0.0f);
    v128_t nan = wasm_f32x4_ne(x, x), lo = wasm_f32x4_lt(x, wasm_f32x4_splat(EXP_LO));
    v128_t xc = wasm_v128_bitselect(zero, wasm_f32x4_pmin(x, wasm_f32x4_splat(EXP_HI)),
                                    wasm_v128_or(nan, lo));
    v128_t fx = wasm_f32x4_nearest(wasm_f32x4_mul(xc, wasm_f32x4_splat(EXP_LOG2E)));
#define M4(a, b, c) wasm_f32x4_add(wasm_f32x4_mul(a, b), c)
    v128_t r = M4(fx, wasm_f32x4_splat(-EXP_C1), xc);
    r = M4(fx, wasm_f32x4_splat(-EXP_C2), r);
    v128_t z = wasm_f32x4_mul(r, r), p = wasm_f32x4_splat(EXP_P0);
    p = M4(p, r, wasm_f32x4_splat(EXP_P1));
    p = M4(p, r, wasm_f32x4_splat(EXP_P2));
    p = M4(p, r, wasm_f32x4_splat(EXP_P3));
    p = M4(p, r, wasm_f32x4_splat(EXP_P4));
    p = M4(p, r, wasm_f32x4_splat(EXP_P5));
    p = M4(p, z, r);
#undef M4
    p = wasm_f32x4_add(p, wasm_f32x4_splat(1.0f));
    v128_t n = wasm_i32x4_add(wasm_i32x4_trunc_sat_f32x4(fx), wasm_i32x4_splat(127));
    n = wasm_i32x4_shl(n, 23);
    v128_t y = wasm_f32x4_mul(p, n);
    return wasm_v128_bitselect(x, wasm_v128_bitselect(zero, y, lo), nan);
}
static inline vf8 v_exp(vf8 a) { vf8 r = {exp4(a.lo), exp4(a.hi)}; return r; }
/* horizontal reductions in the tree order of the plain C helpers */
static inline float v_hsum(vf8 a) {
    v128_t v = wasm_f32x4_add(a.lo, a.hi);
    return (wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 2)) +
           (wasm_f32x4_extract_lane(v, 1) + wasm_f32x4_extract_lane(v, 3));
}
static inline float v_hmax(vf8 a) {
    v128_t v = wasm_f32x4_pmax(a.hi, a.lo); /* lane l: max1(a[l], a[l + 4]) */
    return v_max1(v_max1(wasm_f32x4_extract_lane(v, 0), wasm_f32x4_extract_lane(v, 2)),
                  v_max1(wasm_f32x4_extract_lane(v, 1), wasm_f32x4_extract_lane(v, 3)));
}
static inline vd8 vd_zero(void) {
    vd8 r;
    for (int i = 0; i < 4; i++) r.d[i] = wasm_f64x2_splat(0.0);
    return r;
}
static inline void v_acc_d(vd8 *lo, vd8 *hi, vf8 x) {
    (void)hi;
    v128_t lo_hi = wasm_i32x4_shuffle(x.lo, x.lo, 2, 3, 0, 1);
    v128_t hi_hi = wasm_i32x4_shuffle(x.hi, x.hi, 2, 3, 0, 1);
    lo->d[0] = wasm_f64x2_add(lo->d[0], wasm_f64x2_promote_low_f32x4(x.lo));
    lo->d[1] = wasm_f64x2_add(lo->d[1], wasm_f64x2_promote_low_f32x4(lo_hi));
    lo->d[2] = wasm_f64x2_add(lo->d[2], wasm_f64x2_promote_low_f32x4(x.hi));
    lo->d[3] = wasm_f64x2_add(lo->d[3], wasm_f64x2_promote_low_f32x4(hi_hi));
}
static inline void vd_store_f(float *o, vd8 a) {
    for (int i = 0; i < 4; i++) {
        o[2 * i] = (float)wasm_f64x2_extract_lane(a.d[i], 0);
        o[2 * i + 1] = (float)wasm_f64x2_extract_lane(a.d[i], 1);
    }
}
static inline double vd_hsum(vd8 lo, vd8 hi) {
    (void)hi;
    v128_t a01 = wasm_f64x2_add(lo.d[0], lo.d[2]), a23 = wasm_f64x2_add(lo.d[1], lo.d[3]);
    /* a_l = lane l + lane l+4; then (a0 + a2) + (a1 + a3) */
    return (wasm_f64x2_extract_lane(a01, 0) + wasm_f64x2_extract_lane(a23, 0)) +
           (wasm_f64x2_extract_lane(a01, 1) + wasm_f64x2_extract_lane(a23, 1));
}
#else
typedef struct vf8 {
    float v[8];
} vf8;
typedef struct vd8 {
    double v[8];
} vd8;
static inline vf8 v_zero(void) { vf8 r; for (int l = 0; l < 8; l++) r.v[l] = 0.0f; return r; }
static inline vf8 v_set1(float x) { vf8 r; for (int l = 0; l < 8; l++) r.v[l] = x; return r; }
static inline vf8 v_load(const float *p) { vf8 r; memcpy(r.v, p, sizeof r.v); return r; }
static inline void v_store(float *p, vf8 a) { memcpy(p, a.v, sizeof a.v); }
static inline vf8 v_fma(vf8 a, vf8 b, vf8 c) {
    for (int l = 0; l < 8; l++) c.v[l] = FMA_(a.v[l], b.v[l], c.v[l]);
    return c;
}
static inline vf8 v_mul(vf8 a, vf8 b) { for (int l = 0; l < 8; l++) a.v[l] *= b.v[l]; return a; }
static inline vf8 v_add(vf8 a, vf8 b) { for (int l = 0; l < 8; l++) a.v[l] += b.v[l]; return a; }
static inline vf8 v_sub(vf8 a, vf8 b) { for (int l = 0; l < 8; l++) a.v[l] -= b.v[l]; return a; }
static inline float v_max1(float a, float b) { return a > b ? a : b; } /* as MAXPS(a, b) */
static inline vf8 v_max(vf8 a, vf8 b) {
    for (int l = 0; l < 8; l++) a.v[l] = v_max1(a.v[l], b.v[l]);
    return a;
}
static inline vf8 v_div(vf8 a, vf8 b) { for (int l = 0; l < 8; l++) a.v[l] /= b.v[l]; return a; }
static inline vf8 v_sqrt(vf8 a) { for (int l = 0; l < 8; l++) a.v[l] = sqrtf(a.v[l]); return a; }
static inline vf8 v_abs(vf8 a) { for (int l = 0; l < 8; l++) a.v[l] = fabsf(a.v[l]); return a; }
static inline vf8 v_copysign(vf8 a, vf8 b) {
    for (int l = 0; l < 8; l++) a.v[l] = copysignf(a.v[l], b.v[l]);
    return a;
}
static inline vf8 v_exp(vf8 a) { for (int l = 0; l < 8; l++) a.v[l] = induct__expf(a.v[l]); return a; }
static inline vf8 v_lanes_below(size_t n) {
    size_t k = n > 8 ? 8 : n;
    vf8 r;
    memcpy(r.v, lane_tab + 8 - k, sizeof r.v);
    return r;
}
static inline vf8 v_select(vf8 k, vf8 a, vf8 b) {
    for (int l = 0; l < 8; l++) {
        uint32_t bits;
        memcpy(&bits, &k.v[l], sizeof bits);
        if (!bits) a.v[l] = b.v[l];
    }
    return a;
}
/* horizontal reductions in the tree order of the AVX2 versions */
static inline float v_hsum(vf8 a) {
    float a0 = a.v[0] + a.v[4], a1 = a.v[1] + a.v[5], a2 = a.v[2] + a.v[6], a3 = a.v[3] + a.v[7];
    return (a0 + a2) + (a1 + a3);
}
static inline float v_hmax(vf8 a) {
    float a0 = v_max1(a.v[0], a.v[4]), a1 = v_max1(a.v[1], a.v[5]);
    float a2 = v_max1(a.v[2], a.v[6]), a3 = v_max1(a.v[3], a.v[7]);
    return v_max1(v_max1(a0, a2), v_max1(a1, a3));
}
static inline vd8 vd_zero(void) { vd8 r; for (int l = 0; l < 8; l++) r.v[l] = 0.0; return r; }
static inline void v_acc_d(vd8 *lo, vd8 *hi, vf8 x) {
    (void)hi;
    for (int l = 0; l < 8; l++) lo->v[l] += (double)x.v[l];
}
static inline void vd_store_f(float *o, vd8 a) {
    for (int l = 0; l < 8; l++) o[l] = (float)a.v[l];
}
static inline double vd_hsum(vd8 lo, vd8 hi) {
    (void)hi;
    double a0 = lo.v[0] + lo.v[4], a1 = lo.v[1] + lo.v[5], a2 = lo.v[2] + lo.v[6],
           a3 = lo.v[3] + lo.v[7];
    return (a0 + a2) + (a1 + a3);
}

#endif
#define VF vf8
#define VD vd8
#define v_stream v_store /* no streaming stores (V_STREAMS 0) */
#define v_stream_fence() ((void)0)
#define V_STREAMS 0

#elif (defined(INDUCT_ISA_AVX2) || defined(INDUCT_ISA_AVX512)) && defined(INDUCT_X86_SIMD)
/* -- AVX2 + FMA, and the same code for AVX-512VL ------------------------------------- */
#define INDUCT_VEC 1
#include <immintrin.h>
#define AVX2_ __attribute__((target("avx2,fma")))
typedef struct vd2 {
    __m256d lo, hi;
} vd2;
AVX2_ static inline __m256 v_zero(void) { return _mm256_setzero_ps(); }
AVX2_ static inline __m256 v_set1(float x) { return _mm256_set1_ps(x); }
AVX2_ static inline __m256 v_load(const float *p) { return _mm256_loadu_ps(p); }
AVX2_ static inline void v_store(float *p, __m256 a) { _mm256_storeu_ps(p, a); }
/* a streaming store (past the caches; p 32-byte aligned); _mm_sfence orders them */
AVX2_ static inline void v_stream(float *p, __m256 a) { _mm256_stream_ps(p, a); }
AVX2_ static inline __m256 v_fma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
AVX2_ static inline __m256 v_mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
AVX2_ static inline __m256 v_add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
AVX2_ static inline __m256 v_sub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
AVX2_ static inline __m256 v_max(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
AVX2_ static inline __m256 v_lanes_below(size_t n) {
    size_t k = n > 8 ? 8 : n;
    return _mm256_loadu_ps((const float *)(lane_tab + 8 - k));
}
AVX2_ static inline __m256 v_select(__m256 k, __m256 a, __m256 b) {
    return _mm256_blendv_ps(b, a, k);
}
AVX2_ static inline __m256 v_div(__m256 a, __m256 b) { return _mm256_div_ps(a, b); }
AVX2_ static inline __m256 v_sqrt(__m256 a) { return _mm256_sqrt_ps(a); }
AVX2_ static inline __m256 v_abs(__m256 a) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a);
}
/* magnitude of a (sign bit clear) with the sign of b */
AVX2_ static inline __m256 v_copysign(__m256 a, __m256 b) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign, a), _mm256_and_ps(sign, b));
}
AVX2_ static inline __m256 v_exp(__m256 x) {
    const __m256 lo = _mm256_set1_ps(EXP_LO);
    __m256 keep = _mm256_cmp_ps(x, lo, _CMP_NLT_UQ); /* x >= lo or NaN */
    /* MAXPS/MINPS return the second operand when one is NaN: NaN propagates */
    __m256 xc = _mm256_min_ps(_mm256_set1_ps(EXP_HI), _mm256_max_ps(lo, x));
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(EXP_LOG2E)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(fx, _mm256_set1_ps(-EXP_C1), xc);
    r = _mm256_fmadd_ps(fx, _mm256_set1_ps(-EXP_C2), r);
    __m256 z = _mm256_mul_ps(r, r), p = _mm256_set1_ps(EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_P5));
    p = _mm256_fmadd_ps(p, z, r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    __m256i n = _mm256_cvtps_epi32(fx);
    n = _mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(keep, _mm256_mul_ps(p, _mm256_castsi256_ps(n)));
}
AVX2_ static inline float v_hsum(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_add_ss(b, _mm_movehdup_ps(b)));
}
AVX2_ static inline float v_hmax(__m256 v) {
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 b = _mm_max_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_max_ss(b, _mm_movehdup_ps(b)));
}
AVX2_ static inline vd2 vd_zero(void) {
    vd2 r = {_mm256_setzero_pd(), _mm256_setzero_pd()};
    return r;
}
AVX2_ static inline void v_acc_d(vd2 *lo, vd2 *hi, __m256 x) {
    (void)hi;
    lo->lo = _mm256_add_pd(lo->lo, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
    lo->hi = _mm256_add_pd(lo->hi, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
}
AVX2_ static inline void vd_store_f(float *o, vd2 a) {
    _mm_storeu_ps(o, _mm256_cvtpd_ps(a.lo));
    _mm_storeu_ps(o + 4, _mm256_cvtpd_ps(a.hi));
}
AVX2_ static inline double vd_hsum(vd2 lo, vd2 hi) {
    (void)hi;
    __m256d a = _mm256_add_pd(lo.lo, lo.hi); /* lanes l + l+4 */
    __m128d b = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_add_sd(b, _mm_unpackhi_pd(b, b)));
}
/* 8x8 tile transpose: dst[j][t] = src[t][j] */
AVX2_ static inline void v_transpose8(float *dst, size_t ldd, const float *src, size_t lds) {
    __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds);
    __m256 r2 = _mm256_loadu_ps(src + 2 * lds), r3 = _mm256_loadu_ps(src + 3 * lds);
    __m256 r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds);
    __m256 r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(dst + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#define VF __m256
#define VD vd2
#define v_stream_fence _mm_sfence
#define V_STREAMS 1
#ifdef INDUCT_ISA_AVX512
#define FN(name) name##_avx512
#define ATTR __attribute__((target("avx2,fma,avx512f,avx512vl")))
#else
#define FN(name) name##_avx2
#define ATTR AVX2_
#endif

#elif defined(INDUCT_ISA_AVX2) || defined(INDUCT_ISA_AVX512)
#define INDUCT_VEC 0 /* not an x86-64 build: the portable set is the only one */
#endif

#endif
