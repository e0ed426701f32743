/* bench_attn: the fused causal attention kernels alone (not a test).
 *
 *   bench_attn [--seq T] [--heads H] [--d-head E] [--tokens N] [--reps R] [--tile 4|8]
 *
 * Times induct__attn_causal_forward (as a training pass runs it: no pattern tail) and
 * induct__attn_causal_backward on one thread for N/T sequences of T tokens (default 8 x
 * 512, 4 heads of d_head 16: the main job's layer), R repetitions (default 9), and
 * prints the minimum thread CPU time of each (the least disturbed by other processes)
 * and its rate in GFLOP/s, counting 2 FLOPs per multiply-add over the causal pairs
 * k <= p: 2 products forward, 3 backward. --tile 4 forces the AVX2 kernels' 4-row tiles
 * where the CPU would take the AVX-512VL 8-row ones (the same bits; see
 * docs/performance.md). Links the internal library.
 */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/kernels.h"
#include "kernels/reference.h"

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static size_t arg(const char *s, size_t lo, size_t hi) {
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "bench_attn: '%s' is not an integer in [%zu, %zu]\n", s, lo, hi);
        exit(2);
    }
    return (size_t)v;
}

static float *filled(size_t n, unsigned *seed) {
    /* 64-byte aligned, as the library's workspace is */
    float *x = aligned_alloc(64, (n * sizeof *x + 63) & ~(size_t)63);
    if (!x) {
        fprintf(stderr, "bench_attn: out of memory (%zu floats)\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        x[i] = (float)((*seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    return x;
}

int main(int argc, char **argv) {
    size_t T = 512, H = 4, dh = 16, tokens = 4096, reps = 9, tile = 0;
    static const struct option opts[] = {
        {"seq", required_argument, 0, 't'},    {"heads", required_argument, 0, 'h'},
        {"d-head", required_argument, 0, 'e'}, {"tokens", required_argument, 0, 'n'},
        {"reps", required_argument, 0, 'r'},   {"tile", required_argument, 0, 'q'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 't': T = arg(optarg, 2, 8192); break;
        case 'h': H = arg(optarg, 1, 64); break;
        case 'e': dh = arg(optarg, 1, 256); break;
        case 'n': tokens = arg(optarg, 2, (size_t)1 << 20); break;
        case 'r': reps = arg(optarg, 1, 1000); break;
        case 'q': tile = arg(optarg, 4, 8); break;
        default: fprintf(stderr, "usage: see the comment at the top of bench/bench_attn.c\n"); return 2;
        }
    }
    if (tile != 0 && tile != 4 && tile != 8) {
        fprintf(stderr, "bench_attn: --tile is 4 or 8\n");
        return 2;
    }
    if (tile == 4) induct__simd_avx512_enable(0);
    size_t B = tokens / T ? tokens / T : 1, N = B * T, ld = H * dh;
    unsigned seed = 1;
    float *q = filled(N * ld, &seed), *k = filled(N * ld, &seed), *v = filled(N * ld, &seed);
    float *dz = filled(N * ld, &seed), *z = filled(N * ld, &seed), *dq = filled(N * ld, &seed);
    float *dk = filled(N * ld, &seed), *dv = filled(N * ld, &seed);
    float *att = filled(B * H * T * T, &seed);
    float *scratch = filled(induct__attn_scratch_floats(T, dh), &seed);
    double fwd = 1e30, bwd = 1e30;
    for (size_t r = 0; r < reps; r++) {
        double t0 = cpu_s();
        induct__attn_causal_forward(z, ld, att, q, ld, k, ld, v, ld, B, T, H, dh, scratch, 1,
                                    INDUCT__ATTN_ALL | INDUCT__ATTN_NO_TAIL);
        double t1 = cpu_s();
        induct__attn_causal_backward(dq, dk, dv, dz, ld, q, ld, k, ld, v, ld, att, NULL, NULL,
                                     NULL, B, T, H, dh, scratch, 1);
        double t2 = cpu_s();
        if (t1 - t0 < fwd) fwd = t1 - t0;
        if (t2 - t1 < bwd) bwd = t2 - t1;
    }
    double product = 2.0 * B * H * (T * (T + 1) / 2.0) * dh; /* FLOPs of one product */
    printf("{\"seq\": %zu, \"batch\": %zu, \"heads\": %zu, \"d_head\": %zu, \"tile\": \"%s\", "
           "\"forward_ms\": %.3f, \"forward_gflops\": %.1f, \"backward_ms\": %.3f, "
           "\"backward_gflops\": %.1f}\n",
           T, B, H, dh, tile == 4 ? "4" : "auto", fwd * 1e3, 2 * product / fwd * 1e-9,
           bwd * 1e3, 3 * product / bwd * 1e-9);
    free(q), free(k), free(v), free(dz), free(z), free(dq), free(dk), free(dv), free(att);
    free(scratch);
    return 0;
}
