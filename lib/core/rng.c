/* Explicit-state PRNG: xoshiro256** seeded through splitmix64. No globals. */
#include <math.h>

#include "core.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void induct__rng_seed(induct__rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

void induct__rng_seed3(induct__rng *r, uint64_t a, uint64_t b, uint64_t c) {
    uint64_t x = a;
    uint64_t h = splitmix64(&x);
    x = h ^ b;
    h = splitmix64(&x);
    x = h ^ c;
    h = splitmix64(&x);
    induct__rng_seed(r, h);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t induct__rng_u64(induct__rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t induct__rng_below(induct__rng *r, uint64_t n) {
    /* Rejection sampling: unbiased. */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
    uint64_t x;
    do x = induct__rng_u64(r);
    while (x >= limit);
    return x % n;
}

double induct__rng_uniform(induct__rng *r) {
    return (double)(induct__rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

double induct__rng_normal(induct__rng *r) {
    double u1 = induct__rng_uniform(r);
    double u2 = induct__rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void induct__rng_normal_pair(induct__rng *r, double *z0, double *z1) {
    double u1 = induct__rng_uniform(r);
    double u2 = induct__rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
    *z0 = rad * cos(th);
    *z1 = rad * sin(th);
}
