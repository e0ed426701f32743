/* lib/kernels, inside the wing: what the kernel files share and the other wings need not
 * see (they include kernels.h). The parallel loop; the rules that keep a matrix product's
 * bits independent of how its rows are split (gemm.c); this thread's scratch; the
 * attention kernels' layout; and the tables through which a family's dispatch calls the
 * vector code of one instruction set (the *_vec.c files over simd.h). */
#ifndef INDUCT_KERNELS_INTERNAL_H
#define INDUCT_KERNELS_INTERNAL_H

#include "kernels.h"

#include <stdatomic.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* A parallel loop over independent outputs, each with a fixed summation order, so that
 * results do not depend on the thread count: nt threads, static schedule, none for 1. */
#ifdef _OPENMP
#define PFOR _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")
#else
#define PFOR
#endif

typedef ptrdiff_t idx;

/* ---- matrix products (gemm.c) --------------------------------------------------------
 * The serial rule (see induct__gemm_serial): call(args) runs one BLAS or LAPACK call
 * single-threaded, whichever OpenBLAS build the process has. */
typedef void (*induct__blas_fn)(void *args);
void induct__blas_serial(induct__blas_fn call, void *args);
/* How rows may be split without changing a product's bits (see gemm.c). */
typedef struct induct__gemm_split {
    size_t unit;      /* block rows: a multiple of the micro-tile period */
    double small_mnk; /* products with M*N*K at or below this take another kernel; 0: none */
} induct__gemm_split;
induct__gemm_split induct__gemm_split_rule(void);
/* Rows [*r0, *r1) of block t of nt over `chunks` blocks of `unit` rows (the last block
 * may be short). */
static inline void induct__gemm_block(int t, int nt, size_t chunks, size_t unit, size_t M,
                                      size_t *r0, size_t *r1) {
    size_t c0 = chunks * (size_t)t / (size_t)nt, c1 = chunks * (size_t)(t + 1) / (size_t)nt;
    *r0 = c0 * unit;
    *r1 = c1 * unit < M ? c1 * unit : M;
}
/* The largest n <= want such that each of n row blocks (induct__gemm_block over `chunks`
 * units) of an M x N x K product is above the small-matrix limit, as the whole call is;
 * >= 1. */
int induct__gemm_blocks_above_limit(int want, size_t chunks, size_t unit, size_t M, size_t N,
                                    size_t K);
/* Rows [r0, r1) of C = inp + bias (inp may be NULL) before a beta = 1 product. */
void induct__prefill_rows(float *C, size_t ldc, const float *inp, size_t ldi, const float *bias,
                          size_t r0, size_t r1, size_t N);
/* induct__gemm with beta = 1 after C = inp + bias (inp may be NULL), the prefill of each
 * row block done by the thread that multiplies it (one parallel region, not two). */
void induct__gemm_prefilled(int nt, int transA, int transB, size_t M, size_t N, size_t K,
                            const float *A, size_t lda, const float *B, size_t ldb, float *C,
                            size_t ldc, const float *inp, size_t ldi, const float *bias);

/* This thread's block of a kernel's scratch (per floats each). */
static inline float *induct__thread_scratch(float *scratch, size_t per) {
    int tid = 0;
#ifdef _OPENMP
    tid = omp_get_thread_num();
#endif
    return scratch + (size_t)tid * per;
}

/* ---- the attention kernels' layout (attention.c, attention_vec.c) ------------------ */
/* Row stride of the attention kernels' padded scratch rows: a multiple of 8 floats that
 * is an odd multiple, so that walking down a column does not hit the same cache sets
 * (a power-of-two stride such as 512 floats thrashes L1 and L2). */
static inline size_t attn_stride(size_t T) { return (((T + 7) / 8) | 1) * 8; }
/* Query rows per register tile of the attention kernels, and the scratch rows that
 * covers (the last tile may run past T). */
#ifndef ATTN_QB
#define ATTN_QB 4
#endif
#define ATTN_QB_MAX 8 /* the AVX-512VL instantiation's tile */
/* Query rows per group of the fused forward: their pattern rows stay in the scratch
 * (ATTN_GROUP x the padded row, 133 KB at T 512) for z = A v. */
#define ATTN_GROUP 64
_Static_assert(ATTN_GROUP % ATTN_QB == 0 && ATTN_GROUP % ATTN_QB_MAX == 0,
               "a group is whole query blocks (the blocks, and so the bits, do not change)");
/* From this sequence length on the fused forward writes the pattern with streaming
 * stores: a layer's pattern then outgrows the caches (e.g. 8 x 4 heads x 512^2 floats,
 * 32 MB), and plain stores would first read every line from memory. Shorter patterns stay
 * in cache for the backward. */
#define ATTN_STREAM_T 256
static inline size_t attn_rows(size_t T) { return (T + ATTN_QB_MAX + 7) & ~(size_t)7; }

/* ---- vector kernels, one table per family and instruction set --------------------
 * Each *_vec.c file defines its family's table once per instruction set (simd.h):
 * induct__<family>_portable everywhere, induct__<family>_avx2 on x86-64 (and the
 * attention kernels' induct__attn_avx512). INDUCT__VEC(family) is the table of the set in
 * use: AVX2 + FMA where the CPU has them and induct__simd_enable() left them on, else
 * portable. Adding an instruction set to a family: compile its *_vec.c once more
 * (meson.build) and choose the table in its dispatch. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(INDUCT_NO_SIMD)
#define INDUCT_X86_SIMD 1
#endif

/* attention.c: the kernels of one (batch, head) */
typedef struct induct__attn_vec {
    void (*fwd)(float *, size_t, float *, const float *, size_t, const float *, size_t,
                const float *, size_t, size_t, size_t, float, float *, unsigned, float *);
    void (*rows)(float *, size_t, float *, const float *, size_t, const float *, size_t,
                 const float *, size_t, size_t, size_t, float, float *, const size_t *, size_t,
                 size_t);
    void (*bwd)(float *, float *, float *, const float *, size_t, const float *, size_t,
                const float *, size_t, const float *, size_t, const float *, const uint8_t *,
                const float *, const uint8_t *, size_t, size_t, float, float *);
} induct__attn_vec;
/* unembed.c: one logits row's max, sum of exponentials, and the gradient's scaling */
typedef struct induct__xent_vec {
    float (*row_max)(const float *x, size_t n);
    double (*sumexp_row)(const float *x, size_t n, float mx);
    double (*sumexp_store)(float *g, const float *x, size_t n, float mx);
    void (*scale_row)(float *g, float mul, size_t n);
} induct__xent_vec;
/* gelu.c: GELU and its backward on a chunk */
typedef struct induct__gelu_vec {
    void (*fwd)(float *out, const float *inp, size_t n);
    void (*bwd)(float *dinp, const float *inp, const float *dout, size_t n);
} induct__gelu_vec;
/* linear.c: column sums of a strip of at most 32 columns */
typedef struct induct__colsum_vec {
    void (*colsum32)(float *dbias, const float *x, size_t N, size_t w, size_t ld);
} induct__colsum_vec;
/* embedding.c: sums grouped by token id and position, a strip of at most 16 columns */
typedef struct induct__group_vec {
    void (*group16)(float *ge, float *gp, size_t ld, const float *d, size_t ldd,
                    const int32_t *tokens, size_t N, size_t T, size_t w);
} induct__group_vec;
/* adamw.c: the AdamW update of a chunk */
typedef struct induct__adamw_vec {
    void (*adamw)(float *p, const float *g, float *m1, float *m2, size_t n, float clip,
                  float b1, float b2, float bc1, float bc2, float eps, float decay, float lr);
} induct__adamw_vec;

extern const induct__attn_vec induct__attn_portable;
extern const induct__xent_vec induct__xent_portable;
extern const induct__gelu_vec induct__gelu_portable;
extern const induct__colsum_vec induct__colsum_portable;
extern const induct__group_vec induct__group_portable;
extern const induct__adamw_vec induct__adamw_portable;
#ifdef INDUCT_X86_SIMD
extern const induct__attn_vec induct__attn_avx2, induct__attn_avx512;
extern const induct__xent_vec induct__xent_avx2;
extern const induct__gelu_vec induct__gelu_avx2;
extern const induct__colsum_vec induct__colsum_avx2;
extern const induct__group_vec induct__group_avx2;
extern const induct__adamw_vec induct__adamw_avx2;
#define INDUCT__VEC(family)                                                                \
    (induct__simd_active() ? &induct__##family##_avx2 : &induct__##family##_portable)
#else
#define INDUCT__VEC(family) (&induct__##family##_portable)
#endif
/* The attention kernels' AVX-512VL tile is allowed (induct__simd_avx512_enable) and the
 * CPU has AVX-512F and VL (simd.c). */
int induct__simd_avx512_active(void);
/* The two switches of simd.c, 1 by default; only the tests' induct__simd_enable and
 * induct__simd_avx512_enable (reference.c) set them. */
extern atomic_int induct__simd_allowed, induct__avx512_allowed;

#endif
