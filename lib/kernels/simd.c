/* Which instruction set the vector kernels run in (the switches the tests turn live in
 * reference.c, outside libinduct), and induct__expf, the exponential every set computes
 * lane by lane. */
#include "simd.h"

#include <stdatomic.h>

float induct__expf(float x) {
    if (x != x) return x;
    if (x < EXP_LO) return 0.0f;
    if (x > EXP_HI) x = EXP_HI;
    float fx = nearbyintf(x * EXP_LOG2E);
    float r = FMA_(fx, -EXP_C1, x);
    r = FMA_(fx, -EXP_C2, r);
    float z = r * r, p = EXP_P0;
    p = FMA_(p, r, EXP_P1);
    p = FMA_(p, r, EXP_P2);
    p = FMA_(p, r, EXP_P3);
    p = FMA_(p, r, EXP_P4);
    p = FMA_(p, r, EXP_P5);
    p = FMA_(p, z, r);
    p = p + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)fx + 127) << 23;
    float sc;
    memcpy(&sc, &bits, sizeof sc);
    return p * sc;
}

atomic_int induct__simd_allowed = 1, induct__avx512_allowed = 1;

int induct__simd_active(void) {
#ifdef INDUCT_X86_SIMD
    return atomic_load_explicit(&induct__simd_allowed, memory_order_relaxed) &&
           __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

int induct__simd_avx512_active(void) {
#ifdef INDUCT_X86_SIMD
    return atomic_load_explicit(&induct__avx512_allowed, memory_order_relaxed) &&
           __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
#else
    return 0;
#endif
}
