/* Transformer kernels (see kernels.h). Parallel loops cover independent outputs
 * only, with a fixed summation order per output, so results do not depend on
 * the thread count. */
#include "kernels.h"

#ifndef INDUCT_PORTABLE_GEMM
#include <cblas.h>
#endif
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <strings.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef _OPENMP
#define PFOR _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")
#else
#define PFOR
#endif

typedef ptrdiff_t idx;

/* Which OpenBLAS build the process resolved libopenblas.so.0 to. Debian ships three
 * builds under one soname, chosen by update-alternatives, LD_LIBRARY_PATH or whichever
 * the host loaded first, so the build libinduct was linked against is not necessarily
 * the one it runs with:
 *  - OpenMP (the one we link): single-threaded inside our parallel regions, and
 *    gemm_serial() makes it single-threaded outside them;
 *  - pthreads: each call would use the build's own pool of openblas_get_num_threads()
 *    threads, whatever our n_threads, and how it splits a product depends on that
 *    count and so on the machine. We set the build's thread count to 1 once (a
 *    process-wide setting of that library: the host's own calls to it become
 *    single-threaded too; docs/threading.md);
 *  - sequential: not safe to call from several threads at once (measured: 13 of 50
 *    batches of concurrent sgemm calls differed), so calls are serialised.
 * Every build then computes each product single-threaded with the same kernels, so
 * the results are the same bits whichever is selected (tests/test_install.py). */
int induct__blas_mode(void) {
#ifdef INDUCT_PORTABLE_GEMM
    return INDUCT__BLAS_OPENMP; /* no BLAS: the portable product follows the OpenMP rules */
#else
    static atomic_int mode = INDUCT__BLAS_UNKNOWN;
    int m = atomic_load_explicit(&mode, memory_order_acquire);
    if (m == INDUCT__BLAS_UNKNOWN) {
        int p = openblas_get_parallel();
        m = p == 2 ? INDUCT__BLAS_OPENMP : p == 1 ? INDUCT__BLAS_PTHREAD : INDUCT__BLAS_SEQUENTIAL;
        if (m == INDUCT__BLAS_PTHREAD) openblas_set_num_threads(1);
        atomic_store_explicit(&mode, m, memory_order_release);
    }
    return m;
#endif
}

static void gemm1(int transA, int transB, size_t M, size_t N, size_t K, float alpha,
                  const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                  size_t ldc) {
    if (M == 0 || N == 0) return;
#ifdef INDUCT_PORTABLE_GEMM
    induct__gemm_portable(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    if (induct__blas_mode() == INDUCT__BLAS_SEQUENTIAL) {
#ifdef _OPENMP
#pragma omp critical(induct_sequential_blas)
#endif
        cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                    transB ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, A,
                    (int)lda, B, (int)ldb, beta, C, (int)ldc);
        return;
    }
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, A, (int)lda,
                B, (int)ldb, beta, C, (int)ldc);
#endif
}

/* One single-threaded sgemm. libinduct links OpenBLAS's OpenMP build, which runs
 * single-threaded inside an active parallel region and otherwise sizes its own
 * team from omp_get_max_threads(). Outside our regions we therefore call it from
 * a one-thread region whose nthreads ICV is set to 1: that ICV belongs to the
 * region's implicit task and disappears with it, so the caller's OpenMP settings
 * are never changed. All parallelism is ours (induct__gemm below). */
static void gemm_serial(int transA, int transB, size_t M, size_t N, size_t K, float alpha,
                        const float *A, size_t lda, const float *B, size_t ldb, float beta,
                        float *C, size_t ldc) {
#ifdef _OPENMP
    if (!omp_in_parallel()) {
#pragma omp parallel num_threads(1)
        {
            omp_set_num_threads(1);
            gemm1(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        }
        return;
    }
#endif
    gemm1(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Split the rows of C into one block per thread; each element is still computed by
 * one sgemm call with the same K order. That alone does not make the result
 * independent of the thread count, for two reasons.
 * - OpenBLAS computes a row of C with a code path that depends on the row's position in
 *   its micro-tiles (measured on Zen: rows repeat with period 12, and the last M mod 12
 *   rows of a call take a remainder kernel with other rounding), and a split of the
 *   columns changes its blocking of the whole call. So only rows are split, at multiples
 *   of the period: 12 for OpenBLAS's Haswell and Zen kernels (measured), else
 *   48 = lcm(12, 16), which covers the 4, 6, 8, 12, 16 and 24-row tiles of the other x86
 *   targets.
 * - On its AVX-512 targets (SkylakeX, Cooperlake, SapphireRapids) OpenBLAS computes a
 *   product with M*N*K <= 10^6 by a separate small-matrix kernel with other rounding
 *   (measured on Cooperlake: a block of 19 rows of a 64 x 64 x 800 product differs from
 *   the same rows of the whole call, one of 20 rows does not). The whole call never takes
 *   that kernel here (it is split only above 2^20 multiply-adds), so every block must
 *   stay above the limit too.
 * Every row then takes the same kernel, tile position and remainder as in the single
 * call; tests/check_fused.c checks 1, 2 and 3 threads on the machine that runs it. */
typedef struct gemm_split {
    size_t unit;      /* block rows: a multiple of the micro-tile period */
    double small_mnk; /* products with M*N*K at or below this take another kernel; 0: none */
} gemm_split;

static gemm_split gemm_split_rule(void) {
    static atomic_int unit = 0, small = -1;
    int u = atomic_load_explicit(&unit, memory_order_relaxed);
    int sm = atomic_load_explicit(&small, memory_order_relaxed);
    if (!u || sm < 0) {
#ifdef INDUCT_PORTABLE_GEMM
        u = 48; /* the portable product gives every row the same bits wherever it starts */
        sm = 0;
#else
        (void)induct__blas_mode(); /* settle the BLAS's threading before any parallel region */
        const char *core = openblas_get_corename();
        u = core && (!strcmp(core, "Haswell") || !strcmp(core, "Zen")) ? 12 : 48;
        sm = core && (!strcasecmp(core, "SkylakeX") || !strcasecmp(core, "Cooperlake") ||
                      !strcasecmp(core, "SapphireRapids"));
#endif
        atomic_store_explicit(&unit, u, memory_order_relaxed);
        atomic_store_explicit(&small, sm, memory_order_relaxed);
    }
    return (gemm_split){(size_t)u, sm ? 1e6 : 0.0};
}

/* Rows [*r0, *r1) of block t of nt over `chunks` blocks of `unit` rows (the last block
 * may be short). */
static void gemm_block(int t, int nt, size_t chunks, size_t unit, size_t M, size_t *r0,
                       size_t *r1) {
    size_t c0 = chunks * (size_t)t / (size_t)nt, c1 = chunks * (size_t)(t + 1) / (size_t)nt;
    *r0 = c0 * unit;
    *r1 = c1 * unit < M ? c1 * unit : M;
}

/* The largest n <= want such that each of n row blocks (gemm_block over `chunks` units)
 * of an M x N x K product is above the small-matrix limit, as the whole call is; >= 1. */
static int gemm_blocks_above_limit(int want, size_t chunks, size_t unit, size_t M, size_t N,
                                   size_t K) {
    double small = gemm_split_rule().small_mnk;
    for (; want > 1; want--) {
        int ok = 1;
        for (int t = 0; t < want && ok; t++) {
            size_t r0, r1;
            gemm_block(t, want, chunks, unit, M, &r0, &r1);
            ok = (double)(r1 - r0) * (double)N * (double)K > small;
        }
        if (ok) break;
    }
    return want;
}

/* How many row blocks (threads) an M x N x K product is split into; 1 means one call.
 * *chunks and *unit describe the blocks for gemm_block. */
static int gemm_plan(int nt, size_t M, size_t N, size_t K, size_t *chunks, size_t *unit) {
    gemm_split rule = gemm_split_rule();
    *unit = rule.unit;
#ifndef _OPENMP
    nt = 1; /* no threads of ours: one call, whatever n_threads says */
#endif
    /* below ~2^20 multiply-adds (~20 us) a fork/join costs more than it saves */
    if (nt <= 1 || M <= rule.unit || M * N * K < ((size_t)1 << 20)) return 1;
    *chunks = (M + rule.unit - 1) / rule.unit;
    if ((size_t)nt > *chunks) nt = (int)*chunks;
    return gemm_blocks_above_limit(nt, *chunks, rule.unit, M, N, K);
}

void induct__gemm(int nt, int transA, int transB, size_t M, size_t N, size_t K, float alpha,
                  const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                  size_t ldc) {
    /* rows only: a split of the columns changes OpenBLAS's blocking of the whole call
     * (measured: no column offset reproduces the single call's bits) */
    size_t chunks = 0, unit = 0;
    nt = gemm_plan(nt, M, N, K, &chunks, &unit);
    if (nt <= 1) {
        gemm_serial(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
#endif
    for (int t = 0; t < nt; t++) {
        size_t r0, r1;
        gemm_block(t, nt, chunks, unit, M, &r0, &r1);
        if (r0 >= r1) continue;
        const float *Ab = transA ? A + r0 : A + r0 * lda;
        gemm_serial(transA, transB, r1 - r0, N, K, alpha, Ab, lda, B, ldb, beta, C + r0 * ldc,
                    ldc);
    }
}

void induct__gemm2(int nt, const induct__gemm_args *x, const induct__gemm_args *y) {
#ifdef _OPENMP
    if (nt == 2) {
        /* a loop over the two products, not one product per thread number: the runtime
         * may grant fewer threads than asked (OMP_THREAD_LIMIT, OMP_DYNAMIC, a caller's
         * own parallel region), and each product must still be computed, by one
         * single-threaded call whichever thread takes it */
#pragma omp parallel for num_threads(2) schedule(static)
        for (int i = 0; i < 2; i++) {
            const induct__gemm_args *g = i ? y : x;
            gemm_serial(g->transA, g->transB, g->M, g->N, g->K, g->alpha, g->A, g->lda, g->B,
                        g->ldb, g->beta, g->C, g->ldc);
        }
        return;
    }
#endif
    for (int i = 0; i < 2; i++) {
        const induct__gemm_args *g = i ? y : x;
        induct__gemm(nt, g->transA, g->transB, g->M, g->N, g->K, g->alpha, g->A, g->lda, g->B,
                     g->ldb, g->beta, g->C, g->ldc);
    }
}

/* Blocks of rows whose products (each head's) stay at or below HEAD_RESULT_MADDS
 * multiply-adds, in multiples of 48 rows (the tile heights' common multiple), 48 at least:
 * below OpenBLAS's small-matrix limit its AVX-512 targets take the small-matrix kernel,
 * which writes C directly (K = d_head is too short for the packed path's packing and
 * separate zeroing of C for beta = 0 to pay off), and elsewhere a block's [rows][H][D]
 * outputs stay in cache while every head writes its part. Measured, 1 thread, 4096 rows:
 * d_model 64, 4 heads 0.50 -> 0.33 ms; d_model 256, 8 heads 17.2 -> 9.9 ms (whole-height
 * products per head before). */
#define HEAD_RESULT_MADDS 1e6
void induct__head_results(int nt, size_t N, size_t H, size_t dh, size_t D, const float *z,
                          size_t ldz, const float *W_O, float *res) {
    size_t rows = (size_t)(HEAD_RESULT_MADDS / ((double)D * (double)dh)) / 48 * 48;
    if (rows < 48) rows = 48;
    size_t nb = (N + rows - 1) / rows;
    if ((size_t)nt > nb) nt = (int)nb;
    PFOR
    for (idx b = 0; b < (idx)nb; b++) {
        size_t r0 = (size_t)b * rows, m = N - r0 < rows ? N - r0 : rows;
        for (size_t h = 0; h < H; h++)
            gemm_serial(0, 0, m, D, dh, 1.0f, z + r0 * ldz + h * dh, ldz, W_O + h * dh * D, D,
                        0.0f, res + (r0 * H + h) * D, H * D);
    }
}

/* Rows [r0, r1) of C = inp + bias (inp may be NULL) before a beta = 1 product. */
static void prefill_rows(float *C, size_t ldc, const float *inp, size_t ldi, const float *bias,
                         size_t r0, size_t r1, size_t N) {
    for (size_t r = r0; r < r1; r++) {
        float *o = C + r * ldc;
        if (inp) {
            const float *x = inp + r * ldi;
            for (size_t i = 0; i < N; i++) o[i] = x[i] + bias[i];
        } else {
            for (size_t i = 0; i < N; i++) o[i] = bias[i]; /* short rows: no libc call */
        }
    }
}

/* induct__gemm with beta = 1 after C = inp + bias (inp may be NULL), the prefill of each
 * row block done by the thread that multiplies it (one parallel region, not two). */
static void gemm_prefilled(int nt, int transA, int transB, size_t M, size_t N, size_t K,
                           const float *A, size_t lda, const float *B, size_t ldb, float *C,
                           size_t ldc, const float *inp, size_t ldi, const float *bias) {
    size_t chunks = 0, unit = 0;
    nt = gemm_plan(nt, M, N, K, &chunks, &unit);
    if (nt <= 1) {
        prefill_rows(C, ldc, inp, ldi, bias, 0, M, N);
        gemm_serial(transA, transB, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, C, ldc);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
#endif
    for (int t = 0; t < nt; t++) {
        size_t r0, r1;
        gemm_block(t, nt, chunks, unit, M, &r0, &r1);
        if (r0 >= r1) continue;
        prefill_rows(C, ldc, inp, ldi, bias, r0, r1, N);
        const float *Ab = transA ? A + r0 : A + r0 * lda;
        gemm_serial(transA, transB, r1 - r0, N, K, 1.0f, Ab, lda, B, ldb, 1.0f, C + r0 * ldc,
                    ldc);
    }
}

void induct__gemm_bias(int nt, size_t M, size_t N, size_t K, const float *A, size_t lda,
                       const float *B, size_t ldb, float *C, size_t ldc, const float *inp,
                       size_t ldi, const float *bias) {
    gemm_prefilled(nt, 0, 0, M, N, K, A, lda, B, ldb, C, ldc, inp, ldi, bias);
}

/* Rows of a product computed apart (induct__gemm_bias_rows). The whole M-row call gives
 * a row bits that depend on its position modulo OpenBLAS's micro-tile period (every
 * period gemm_split_rule knows divides GEMM_ROWS_PERIOD) and on whether it lies in the
 * call's last M mod period rows (remainder kernels): the rule that lets induct__gemm
 * split rows. The gathered call therefore puts each requested row at a slot congruent to
 * it modulo GEMM_ROWS_PERIOD (the k-th row of a residue at k periods), the rows of the
 * whole call's last partial period (M mod GEMM_ROWS_PERIOD rows) last at their own
 * offsets, and adds zero rows, a period at a time, to stay above OpenBLAS's small-matrix
 * limit when the whole call is above it (tests/check_rows.c compares the two). */
#define GEMM_ROWS_PERIOD 48

typedef struct gemm_rows_plan {
    size_t body, tail; /* rows before the last partial period (a multiple of it), after it */
    size_t cnt[GEMM_ROWS_PERIOD];
    size_t last;
} gemm_rows_plan;

/* The slot of the next requested row (any order; a row repeated right after itself
 * keeps its slot, a later repeat takes another with the same value); body: the plan's
 * (when known). */
static size_t gemm_rows_next(gemm_rows_plan *pl, size_t M, size_t row, size_t body) {
    const size_t u = GEMM_ROWS_PERIOD, r = row % u;
    if (M % u && row >= M - M % u) {
        pl->tail = M % u;
        return body + r;
    }
    if (row != pl->last) pl->cnt[r]++;
    pl->last = row;
    size_t slot = (pl->cnt[r] - 1) * u + r;
    if (slot + u - r > pl->body) pl->body = slot + u - r;
    return slot;
}

static gemm_rows_plan gemm_rows_layout(size_t M, size_t N, size_t K, const size_t *rows,
                                       size_t n) {
    gemm_rows_plan pl;
    memset(&pl, 0, sizeof pl);
    pl.last = SIZE_MAX;
    for (size_t i = 0; i < n; i++) (void)gemm_rows_next(&pl, M, rows[i], 0);
    double small = gemm_split_rule().small_mnk, nk = (double)N * (double)K;
    if (small > 0 && (double)M * nk > small)
        while ((double)(pl.body + pl.tail) * nk <= small) pl.body += GEMM_ROWS_PERIOD;
    return pl;
}

/* Is the gathered product worth it? Not when it has more than half the whole one's rows
 * (tiny shapes, or the rows' residues pile up): then the whole product is computed. */
static int gemm_rows_gathered(const gemm_rows_plan *pl, size_t M) {
    return 2 * (pl->body + pl->tail) <= M;
}

size_t induct__gemm_bias_rows_scratch(size_t M, size_t N, size_t K, const size_t *rows,
                                      size_t n) {
    gemm_rows_plan pl = gemm_rows_layout(M, N, K, rows, n);
    return gemm_rows_gathered(&pl, M) ? (pl.body + pl.tail) * (K + N) : 0;
}

void induct__gemm_bias_rows(int nt, size_t M, size_t N, size_t K, const float *A, size_t lda,
                            const float *B, size_t ldb, float *C, size_t ldc, const float *inp,
                            size_t ldi, const float *bias, const size_t *rows, size_t n,
                            float *scratch) {
    gemm_rows_plan pl = gemm_rows_layout(M, N, K, rows, n), it;
    if (!gemm_rows_gathered(&pl, M)) {
        induct__gemm_bias(nt, M, N, K, A, lda, B, ldb, C, ldc, inp, ldi, bias);
        return;
    }
    size_t Mg = pl.body + pl.tail;
    float *Ag = scratch, *Cg = scratch + Mg * K;
    /* rows nobody asked for: zeros (each row of C reads only its own row of A) */
    memset(Ag, 0, Mg * K * sizeof *Ag);
    memset(Cg, 0, Mg * N * sizeof *Cg);
    memset(&it, 0, sizeof it);
    it.last = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        size_t r = gemm_rows_next(&it, M, rows[i], pl.body);
        memcpy(Ag + r * K, A + rows[i] * lda, K * sizeof *Ag);
        prefill_rows(Cg + r * N, N, inp ? inp + rows[i] * ldi : NULL, ldi, bias, 0, 1, N);
    }
    /* what gemm_prefilled multiplies after its prefill: the same sgemm calls */
    induct__gemm(nt, 0, 0, Mg, N, K, 1.0f, Ag, K, B, ldb, 1.0f, Cg, N);
    memset(&it, 0, sizeof it);
    it.last = SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        memcpy(C + rows[i] * ldc, Cg + gemm_rows_next(&it, M, rows[i], pl.body) * N,
               N * sizeof *C);
}

void induct__embed_forward(float *out, const int32_t *tokens, const float *W_E,
                           const float *W_pos, size_t B, size_t T, size_t D, int nt) {
    PFOR
    for (idx n = 0; n < (idx)(B * T); n++) {
        const float *e = W_E + (size_t)tokens[n] * D;
        float *o = out + (size_t)n * D;
        if (W_pos) {
            const float *p = W_pos + ((size_t)n % T) * D;
            for (size_t i = 0; i < D; i++) o[i] = e[i] + p[i];
        } else {
            memcpy(o, e, D * sizeof *o);
        }
    }
}

void induct__embed_backward(float *dW_E, float *dW_pos, const float *dout, const int32_t *tokens,
                            size_t B, size_t T, size_t D) {
    for (size_t n = 0; n < B * T; n++) {
        float *g = dW_E + (size_t)tokens[n] * D;
        const float *d = dout + n * D;
        for (size_t i = 0; i < D; i++) g[i] += d[i];
    }
    if (dW_pos) induct__pos_backward(dW_pos, dout, B, T, D);
}

void induct__add_pos(float *out, const float *inp, const float *W_pos, size_t B, size_t T,
                     size_t D, int nt) {
    PFOR
    for (idx n = 0; n < (idx)(B * T); n++) {
        const float *p = W_pos + ((size_t)n % T) * D;
        const float *x = inp + (size_t)n * D;
        float *o = out + (size_t)n * D;
        for (size_t i = 0; i < D; i++) o[i] = x[i] + p[i];
    }
}

void induct__pos_backward(float *dW_pos, const float *dout, size_t B, size_t T, size_t D) {
    for (size_t t = 0; t < T; t++) {
        float *g = dW_pos + t * D;
        for (size_t b = 0; b < B; b++) {
            const float *d = dout + (b * T + t) * D;
            for (size_t i = 0; i < D; i++) g[i] += d[i];
        }
    }
}

/* LayerNorm rows are processed LN_ROWS at a time: each row's double sums still run over
 * its elements in order (the same bits as one row at a time), but the rows' dependency
 * chains are independent, so they overlap instead of waiting on each addition. A group
 * past the last row repeats the last row (computed, not written). */
#define LN_ROWS 4

/* Row n0 + r of a group, clamped to the last row N - 1. */
static size_t ln_row(size_t n0, size_t r, size_t N) { return n0 + r < N ? n0 + r : N - 1; }

/* The rows n0 .. n0+LN_ROWS-1 (clamped to N-1) of x [N][D]. */
static void ln_rows(const float *rows[LN_ROWS], const float *x, size_t n0, size_t N, size_t D) {
    for (size_t r = 0; r < LN_ROWS; r++) rows[r] = x + ln_row(n0, r, N) * D;
}

void induct__layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                               const float *w, const float *b, size_t N, size_t D, int nt) {
    PFOR
    for (idx g = 0; g < (idx)((N + LN_ROWS - 1) / LN_ROWS); g++) {
        size_t n0 = (size_t)g * LN_ROWS;
        const float *x[LN_ROWS];
        ln_rows(x, inp, n0, N, D);
        double s[LN_ROWS] = {0}, v[LN_ROWS] = {0}, mu[LN_ROWS];
        for (size_t i = 0; i < D; i++)
            for (size_t r = 0; r < LN_ROWS; r++) s[r] += x[r][i];
        for (size_t r = 0; r < LN_ROWS; r++) mu[r] = s[r] / (double)D;
        for (size_t i = 0; i < D; i++)
            for (size_t r = 0; r < LN_ROWS; r++) {
                double d = x[r][i] - mu[r];
                v[r] += d * d;
            }
        for (size_t r = 0; r < LN_ROWS && n0 + r < N; r++) {
            size_t n = n0 + r;
            float rs = (float)(1.0 / sqrt(v[r] / (double)D + 1e-5));
            float m = (float)mu[r];
            float *o = out + n * D;
            for (size_t i = 0; i < D; i++) o[i] = (x[r][i] - m) * rs * w[i] + b[i];
            mean[n] = m;
            rstd[n] = rs;
        }
    }
}

void induct__layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *mean, const float *rstd,
                                const float *w, size_t N, size_t D, int nt) {
    induct__layernorm_backward_hooked(dinp, dw, db, dout, inp, mean, rstd, w, NULL, NULL, N, D,
                                      nt);
}

/* di += (g w - a1 - xhat a2) r for one row (masked elements: g w taken as 0); the two
 * loops let the plain one vectorise. */
static void ln_dinp_row(float *restrict di, const float *restrict x, const float *restrict g,
                        const float *restrict w, const uint8_t *restrict mk, float m, float r,
                        double a1, double a2, size_t D) {
    if (mk) {
        for (size_t i = 0; i < D; i++) {
            double xh = (x[i] - m) * r;
            double gw = mk[i] ? 0.0 : (double)g[i] * w[i];
            di[i] += (float)((gw - a1 - xh * a2) * r);
        }
        return;
    }
    for (size_t i = 0; i < D; i++) {
        double xh = (x[i] - m) * r;
        double gw = (double)g[i] * w[i];
        di[i] += (float)((gw - a1 - xh * a2) * r);
    }
}

/* Columns of the parameter gradients summed side by side (each over the rows in order). */
#define LN_COLS 8

/* With mask (a hook wrote hook_normalized): written elements are constants, so no
 * gradient reaches the normalisation through them, and the gain trains on what the hook
 * left (xhat). Without (NULL, NULL): the plain backward, the same operations in the
 * same order. */
void induct__layernorm_backward_hooked(float *dinp, float *dw, float *db, const float *dout,
                                       const float *inp, const float *mean, const float *rstd,
                                       const float *w, const float *xhat, const uint8_t *mask,
                                       size_t N, size_t D, int nt) {
    PFOR
    for (idx gi = 0; gi < (idx)((N + LN_ROWS - 1) / LN_ROWS); gi++) {
        size_t n0 = (size_t)gi * LN_ROWS;
        const float *x[LN_ROWS], *g[LN_ROWS];
        ln_rows(x, inp, n0, N, D);
        ln_rows(g, dout, n0, N, D);
        float m[LN_ROWS], r[LN_ROWS];
        double s1[LN_ROWS] = {0}, s2[LN_ROWS] = {0};
        for (size_t k = 0; k < LN_ROWS; k++) {
            m[k] = mean[ln_row(n0, k, N)];
            r[k] = rstd[ln_row(n0, k, N)];
        }
        if (mask) {
            const uint8_t *mk[LN_ROWS];
            for (size_t k = 0; k < LN_ROWS; k++) mk[k] = mask + ln_row(n0, k, N) * D;
            for (size_t i = 0; i < D; i++)
                for (size_t k = 0; k < LN_ROWS; k++) {
                    if (mk[k][i]) continue;
                    double xh = (x[k][i] - m[k]) * r[k];
                    double gw = (double)g[k][i] * w[i];
                    s1[k] += gw;
                    s2[k] += gw * xh;
                }
        } else {
            for (size_t i = 0; i < D; i++)
                for (size_t k = 0; k < LN_ROWS; k++) {
                    double xh = (x[k][i] - m[k]) * r[k];
                    double gw = (double)g[k][i] * w[i];
                    s1[k] += gw;
                    s2[k] += gw * xh;
                }
        }
        for (size_t k = 0; k < LN_ROWS && n0 + k < N; k++)
            ln_dinp_row(dinp + (n0 + k) * D, x[k], g[k], w, mask ? mask + (n0 + k) * D : NULL,
                        m[k], r[k], s1[k] / (double)D, s2[k] / (double)D, D);
    }
    /* parameter gradients: parallel over groups of columns, rows summed in order */
    PFOR
    for (idx gc = 0; gc < (idx)((D + LN_COLS - 1) / LN_COLS); gc++) {
        size_t i0 = (size_t)gc * LN_COLS, nc = D - i0 < LN_COLS ? D - i0 : LN_COLS;
        double sw[LN_COLS] = {0}, sb[LN_COLS] = {0};
        for (size_t n = 0; n < N; n++) {
            const float *gr = dout + n * D + i0;
            if (xhat) {
                const float *xr = xhat + n * D + i0;
                for (size_t j = 0; j < nc; j++) {
                    sw[j] += (double)gr[j] * xr[j];
                    sb[j] += gr[j];
                }
            } else {
                const float *xr = inp + n * D + i0;
                float mn = mean[n], rs = rstd[n];
                for (size_t j = 0; j < nc; j++) {
                    float xh = (xr[j] - mn) * rs;
                    sw[j] += (double)gr[j] * xh;
                    sb[j] += gr[j];
                }
            }
        }
        for (size_t j = 0; j < nc; j++) {
            dw[i0 + j] += (float)sw[j];
            db[i0 + j] += (float)sb[j];
        }
    }
}

void induct__linear_forward(float *out, const float *inp, const float *W, const float *bias,
                            size_t N, size_t K, size_t C, int nt) {
    if (bias) {
        gemm_prefilled(nt, 0, 0, N, C, K, inp, K, W, C, out, C, NULL, 0, bias);
    } else {
        induct__gemm(nt, 0, 0, N, C, K, 1.0f, inp, K, W, C, 0.0f, out, C);
    }
}

static void colsum_blocks(float *dbias, const float *dout, size_t N, size_t C, size_t ld,
                          int nt);

void induct__colsum(float *dbias, const float *dout, size_t N, size_t C, size_t ld, int nt) {
    /* per column: rows summed in order in double (vectorised across columns); blocks of
     * 32 columns per thread (see colsum_blocks below) */
    colsum_blocks(dbias, dout, N, C, ld, nt);
}

size_t induct__linear_backward_scratch(size_t N, size_t K, size_t C) {
    size_t r;
    if (C <= K) return 0;
    if (N > SIZE_MAX - C || K == SIZE_MAX || N + C > SIZE_MAX / (K + 1)) return SIZE_MAX;
    r = (N + C) * (K + 1);
    return r;
}

void induct__linear_backward(float *dinp, float *dW, float *dbias, const float *dout,
                             const float *inp, const float *W, size_t N, size_t K, size_t C,
                             float *scratch, int nt) {
    if (dinp) induct__gemm(nt, 0, 1, N, K, C, 1.0f, dout, C, W, C, 1.0f, dinp, K);
    if (C <= K) {
        induct__gemm(nt, 1, 0, K, C, N, 1.0f, inp, K, dout, C, 1.0f, dW, C);
        if (dbias) induct__colsum(dbias, dout, N, C, C, nt);
        return;
    }
    /* More outputs than inputs (an MLP's W_in: d_mlp columns, d_model rows). dW has
     * only K rows, too few to split between threads at the row multiples that keep the
     * bits (induct__gemm), and the bias gradient would be one more pass over dout. So
     * compute [dW^T | dbias] = dout^T [inp | 1]: C rows to split, and the column sums
     * come out of the same product (a float sum in the BLAS's order, as PyTorch's). */
    size_t K1 = K + 1;
    float *xa = scratch, *t = scratch + N * K1;
    PFOR
    for (idx n = 0; n < (idx)N; n++) {
        memcpy(xa + (size_t)n * K1, inp + (size_t)n * K, K * sizeof *xa);
        xa[(size_t)n * K1 + K] = 1.0f;
    }
    induct__gemm(nt, 1, 0, C, K1, N, 1.0f, dout, C, xa, K1, 0.0f, t, K1);
    PFOR
    for (idx k = 0; k < (idx)K; k++) {
        float *row = dW + (size_t)k * C;
        for (size_t c = 0; c < C; c++) row[c] += t[c * K1 + (size_t)k];
    }
    if (dbias)
        for (size_t c = 0; c < C; c++) dbias[c] += t[c * K1 + K];
}

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

void induct__softmax_row(float *out, const float *scores, size_t n) {
    float mx = scores[0];
    for (size_t i = 1; i < n; i++)
        if (scores[i] > mx) mx = scores[i];
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        /* the difference of two finite floats may round to -inf: exp gives 0 */
        float e = expf(scores[i] - mx);
        out[i] = e;
        sum += e;
    }
    /* sum >= 1 (the max contributes exp(0) = 1), so the division is safe */
    float inv = (float)(1.0 / sum);
    for (size_t i = 0; i < n; i++) out[i] *= inv;
}

void induct__attention_forward(float *z, float *att, const float *q, const float *k,
                               const float *v, size_t B, size_t T, size_t H, size_t dh, int nt) {
    size_t HD = H * dh;
    float scale = 1.0f / sqrtf((float)dh);
    PFOR
    for (idx bh = 0; bh < (idx)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H;
        const float *qb = q + b * T * HD + h * dh;
        const float *kb = k + b * T * HD + h * dh;
        const float *vb = v + b * T * HD + h * dh;
        float *A = att + ((size_t)b * H + h) * T * T;
        /* scores for all (p, k), then the causal part only is used */
        gemm_serial(0, 1, T, T, dh, scale, qb, HD, kb, HD, 0.0f, A, T);
        for (size_t p = 0; p < T; p++) {
            float *row = A + p * T;
            induct__softmax_row(row, row, p + 1);
            memset(row + p + 1, 0, (T - p - 1) * sizeof *row);
        }
        gemm_serial(0, 0, T, dh, T, 1.0f, A, T, vb, HD, 0.0f, z + b * T * HD + h * dh, HD);
    }
}

void induct__attention_backward(float *dq, float *dk, float *dv, float *datt, const float *dz,
                                const float *q, const float *k, const float *v, const float *att,
                                size_t B, size_t T, size_t H, size_t dh, int nt) {
    size_t HD = H * dh;
    float scale = 1.0f / sqrtf((float)dh);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *dA = datt + (size_t)tid * T * T;
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (idx bh = 0; bh < (idx)(B * H); bh++) {
            size_t b = (size_t)bh / H, h = (size_t)bh % H;
            size_t off = b * T * HD + h * dh;
            const float *A = att + ((size_t)b * H + h) * T * T;
            /* dA = dz v^T */
            gemm_serial(0, 1, T, T, dh, 1.0f, dz + off, HD, v + off, HD, 0.0f, dA, T);
            /* dv = A^T dz */
            gemm_serial(1, 0, T, dh, T, 1.0f, A, T, dz + off, HD, 0.0f, dv + off, HD);
            /* softmax backward, causal part; masked entries become 0 */
            for (size_t p = 0; p < T; p++) {
                const float *a = A + p * T;
                float *g = dA + p * T;
                double s = 0.0;
                for (size_t j = 0; j <= p; j++) s += (double)g[j] * a[j];
                float fs = (float)s;
                for (size_t j = 0; j <= p; j++) g[j] = a[j] * (g[j] - fs) * scale;
                for (size_t j = p + 1; j < T; j++) g[j] = 0.0f;
            }
            /* dq = dS k ; dk = dS^T q */
            gemm_serial(0, 0, T, dh, T, 1.0f, dA, T, k + off, HD, 0.0f, dq + off, HD);
            gemm_serial(1, 0, T, dh, T, 1.0f, dA, T, q + off, HD, 0.0f, dk + off, HD);
        }
    }
}

#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */

void induct__gelu_forward(float *out, const float *inp, size_t n, int nt) {
    PFOR
    for (idx i = 0; i < (idx)n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_C * (x + 0.044715f * x * x * x)));
    }
}

void induct__gelu_backward(float *dinp, const float *inp, const float *dout, size_t n, int nt) {
    PFOR
    for (idx i = 0; i < (idx)n; i++) {
        float x = inp[i];
        float u = GELU_C * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float d = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_C * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = dout[i] * d;
    }
}

double induct__xent_forward(float *losses, const float *logits, const int32_t *tokens, size_t B,
                            size_t T, size_t V, int nt) {
    PFOR
    for (idx bt = 0; bt < (idx)(B * (T - 1)); bt++) {
        size_t b = (size_t)bt / (T - 1), p = (size_t)bt % (T - 1);
        const float *l = logits + (b * T + p) * V;
        float mx = l[0];
        for (size_t v = 1; v < V; v++)
            if (l[v] > mx) mx = l[v];
        double s = 0.0;
        for (size_t v = 0; v < V; v++) s += expf(l[v] - mx);
        int32_t tgt = tokens[b * T + p + 1];
        losses[bt] = (float)(log(s) + ((double)mx - (double)l[tgt])); /* max cancels first */
    }
    double sum = 0.0;
    for (size_t i = 0; i < B * (T - 1); i++) sum += losses[i];
    return sum;
}

void induct__xent_backward(float *dlogits, const float *logits, const int32_t *tokens, size_t B,
                           size_t T, size_t V, float scale, int nt) {
    PFOR
    for (idx bt = 0; bt < (idx)(B * T); bt++) {
        size_t b = (size_t)bt / T, p = (size_t)bt % T;
        float *g = dlogits + (size_t)bt * V;
        if (p == T - 1) {
            memset(g, 0, V * sizeof *g);
            continue;
        }
        const float *l = logits + (size_t)bt * V;
        float mx = l[0];
        for (size_t v = 1; v < V; v++)
            if (l[v] > mx) mx = l[v];
        double s = 0.0;
        for (size_t v = 0; v < V; v++) s += expf(l[v] - mx);
        double inv = 1.0 / s;
        float finv = (float)inv * scale;
        for (size_t v = 0; v < V; v++) g[v] = expf(l[v] - mx) * finv;
        g[tokens[b * T + p + 1]] -= scale;
    }
}

void induct__add_inplace(float *a, const float *b, size_t n, int nt) {
    PFOR
    for (idx i = 0; i < (idx)n; i++) a[i] += b[i];
}

/* ==== fused kernels (performance) ==================================== */

#include <stdatomic.h>

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

/* Row stride of the attention kernels' padded scratch rows: a multiple of 8 floats that
 * is an odd multiple, so that walking down a column does not hit the same cache sets
 * (a power-of-two stride such as 512 floats thrashes L1 and L2). */
static size_t attn_stride(size_t T) { return (((T + 7) / 8) | 1) * 8; }
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
static size_t attn_rows(size_t T) { return (T + ATTN_QB_MAX + 7) & ~(size_t)7; }

/* -- portable 8-lane instantiation ------------------------------------------------ */
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
static inline vf8 s_zero(void) {
    vf8 r = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
    return r;
}
static inline vf8 s_set1(float x) { vf8 r = {wasm_f32x4_splat(x), wasm_f32x4_splat(x)}; return r; }
static inline vf8 s_load(const float *p) {
    vf8 r = {wasm_v128_load(p), wasm_v128_load(p + 4)};
    return r;
}
static inline void s_store(float *p, vf8 a) {
    wasm_v128_store(p, a.lo);
    wasm_v128_store(p + 4, a.hi);
}
#define W2(name, op)                                                                               \
    static inline vf8 name(vf8 a, vf8 b) {                                                         \
        vf8 r = {op(a.lo, b.lo), op(a.hi, b.hi)};                                                  \
        return r;                                                                                  \
    }
W2(s_mul, wasm_f32x4_mul)
W2(s_add, wasm_f32x4_add)
W2(s_sub, wasm_f32x4_sub)
W2(s_div, wasm_f32x4_div)
#undef W2
static inline vf8 s_fma(vf8 a, vf8 b, vf8 c) { return s_add(s_mul(a, b), c); }
/* a > b ? a : b per lane, as MAXPS(a, b): pmax(b, a) = (b < a ? a : b) */
static inline vf8 s_max(vf8 a, vf8 b) {
    vf8 r = {wasm_f32x4_pmax(b.lo, a.lo), wasm_f32x4_pmax(b.hi, a.hi)};
    return r;
}
static inline float s_max1(float a, float b) { return a > b ? a : b; }
static const int32_t lane_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
static inline vf8 s_lanes_below(size_t n) {
    size_t k = n > 8 ? 8 : n;
    return s_load((const float *)(const void *)(lane_tab + 8 - k));
}
static inline vf8 s_select(vf8 k, vf8 a, vf8 b) {
    vf8 r = {wasm_v128_bitselect(a.lo, b.lo, k.lo), wasm_v128_bitselect(a.hi, b.hi, k.hi)};
    return r;
}
static inline vf8 s_sqrt(vf8 a) {
    vf8 r = {wasm_f32x4_sqrt(a.lo), wasm_f32x4_sqrt(a.hi)};
    return r;
}
static inline vf8 s_abs(vf8 a) { vf8 r = {wasm_f32x4_abs(a.lo), wasm_f32x4_abs(a.hi)}; return r; }
static inline vf8 s_copysign(vf8 a, vf8 b) {
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
static inline vf8 s_exp(vf8 a) { vf8 r = {exp4(a.lo), exp4(a.hi)}; return r; }
/* horizontal reductions in the tree order of the plain C helpers */
static inline float s_hsum(vf8 a) {
    v128_t v = wasm_f32x4_add(a.lo, a.hi);
    return (wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 2)) +
           (wasm_f32x4_extract_lane(v, 1) + wasm_f32x4_extract_lane(v, 3));
}
static inline float s_hmax(vf8 a) {
    v128_t v = wasm_f32x4_pmax(a.hi, a.lo); /* lane l: max1(a[l], a[l + 4]) */
    return s_max1(s_max1(wasm_f32x4_extract_lane(v, 0), wasm_f32x4_extract_lane(v, 2)),
                  s_max1(wasm_f32x4_extract_lane(v, 1), wasm_f32x4_extract_lane(v, 3)));
}
static inline vd8 s_dzero(void) {
    vd8 r;
    for (int i = 0; i < 4; i++) r.d[i] = wasm_f64x2_splat(0.0);
    return r;
}
static inline void s_acc_d(vd8 *lo, vd8 *hi, vf8 x) {
    (void)hi;
    v128_t lo_hi = wasm_i32x4_shuffle(x.lo, x.lo, 2, 3, 0, 1);
    v128_t hi_hi = wasm_i32x4_shuffle(x.hi, x.hi, 2, 3, 0, 1);
    lo->d[0] = wasm_f64x2_add(lo->d[0], wasm_f64x2_promote_low_f32x4(x.lo));
    lo->d[1] = wasm_f64x2_add(lo->d[1], wasm_f64x2_promote_low_f32x4(lo_hi));
    lo->d[2] = wasm_f64x2_add(lo->d[2], wasm_f64x2_promote_low_f32x4(x.hi));
    lo->d[3] = wasm_f64x2_add(lo->d[3], wasm_f64x2_promote_low_f32x4(hi_hi));
}
static inline void s_dstore_f(float *o, vd8 a) {
    for (int i = 0; i < 4; i++) {
        o[2 * i] = (float)wasm_f64x2_extract_lane(a.d[i], 0);
        o[2 * i + 1] = (float)wasm_f64x2_extract_lane(a.d[i], 1);
    }
}
static inline double s_dhsum(vd8 lo, vd8 hi) {
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
static inline vf8 s_zero(void) { vf8 r; for (int l = 0; l < 8; l++) r.v[l] = 0.0f; return r; }
static inline vf8 s_set1(float x) { vf8 r; for (int l = 0; l < 8; l++) r.v[l] = x; return r; }
static inline vf8 s_load(const float *p) { vf8 r; memcpy(r.v, p, sizeof r.v); return r; }
static inline void s_store(float *p, vf8 a) { memcpy(p, a.v, sizeof a.v); }
static inline vf8 s_fma(vf8 a, vf8 b, vf8 c) {
    for (int l = 0; l < 8; l++) c.v[l] = FMA_(a.v[l], b.v[l], c.v[l]);
    return c;
}
static inline vf8 s_mul(vf8 a, vf8 b) { for (int l = 0; l < 8; l++) a.v[l] *= b.v[l]; return a; }
static inline vf8 s_add(vf8 a, vf8 b) { for (int l = 0; l < 8; l++) a.v[l] += b.v[l]; return a; }
static inline vf8 s_sub(vf8 a, vf8 b) { for (int l = 0; l < 8; l++) a.v[l] -= b.v[l]; return a; }
static inline float s_max1(float a, float b) { return a > b ? a : b; } /* as MAXPS(a, b) */
static inline vf8 s_max(vf8 a, vf8 b) {
    for (int l = 0; l < 8; l++) a.v[l] = s_max1(a.v[l], b.v[l]);
    return a;
}
static inline vf8 s_div(vf8 a, vf8 b) { for (int l = 0; l < 8; l++) a.v[l] /= b.v[l]; return a; }
static inline vf8 s_sqrt(vf8 a) { for (int l = 0; l < 8; l++) a.v[l] = sqrtf(a.v[l]); return a; }
static inline vf8 s_abs(vf8 a) { for (int l = 0; l < 8; l++) a.v[l] = fabsf(a.v[l]); return a; }
static inline vf8 s_copysign(vf8 a, vf8 b) {
    for (int l = 0; l < 8; l++) a.v[l] = copysignf(a.v[l], b.v[l]);
    return a;
}
static inline vf8 s_exp(vf8 a) { for (int l = 0; l < 8; l++) a.v[l] = induct__expf(a.v[l]); return a; }
/* lanes l < n selected (n clamped to [0, 8]); v_select(k, a, b) = k ? a : b per lane */
static const int32_t lane_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
static inline vf8 s_lanes_below(size_t n) {
    size_t k = n > 8 ? 8 : n;
    vf8 r;
    memcpy(r.v, lane_tab + 8 - k, sizeof r.v);
    return r;
}
static inline vf8 s_select(vf8 k, vf8 a, vf8 b) {
    for (int l = 0; l < 8; l++) {
        uint32_t bits;
        memcpy(&bits, &k.v[l], sizeof bits);
        if (!bits) a.v[l] = b.v[l];
    }
    return a;
}
/* horizontal reductions in the tree order of the AVX2 versions below */
static inline float s_hsum(vf8 a) {
    float a0 = a.v[0] + a.v[4], a1 = a.v[1] + a.v[5], a2 = a.v[2] + a.v[6], a3 = a.v[3] + a.v[7];
    return (a0 + a2) + (a1 + a3);
}
static inline float s_hmax(vf8 a) {
    float a0 = s_max1(a.v[0], a.v[4]), a1 = s_max1(a.v[1], a.v[5]);
    float a2 = s_max1(a.v[2], a.v[6]), a3 = s_max1(a.v[3], a.v[7]);
    return s_max1(s_max1(a0, a2), s_max1(a1, a3));
}
static inline vd8 s_dzero(void) { vd8 r; for (int l = 0; l < 8; l++) r.v[l] = 0.0; return r; }
static inline void s_acc_d(vd8 *lo, vd8 *hi, vf8 x) {
    (void)hi;
    for (int l = 0; l < 8; l++) lo->v[l] += (double)x.v[l];
}
static inline void s_dstore_f(float *o, vd8 a) {
    for (int l = 0; l < 8; l++) o[l] = (float)a.v[l];
}
static inline double s_dhsum(vd8 lo, vd8 hi) {
    (void)hi;
    double a0 = lo.v[0] + lo.v[4], a1 = lo.v[1] + lo.v[5], a2 = lo.v[2] + lo.v[6],
           a3 = lo.v[3] + lo.v[7];
    return (a0 + a2) + (a1 + a3);
}

#endif

#define FN(name) name##_scalar
#define ATTR
#define VF vf8
#define VD vd8
#define v_zero s_zero
#define v_set1 s_set1
#define v_load s_load
#define v_store s_store
#define v_stream s_store /* unused: no streaming stores (V_STREAMS 0) */
#define v_stream_fence() ((void)0)
#define V_STREAMS 0
#define v_fma s_fma
#define v_mul s_mul
#define v_add s_add
#define v_sub s_sub
#define v_max s_max
#define v_lanes_below s_lanes_below
#define v_select s_select
#define v_div s_div
#define v_sqrt s_sqrt
#define v_abs s_abs
#define v_copysign s_copysign
#define v_exp s_exp
#define v_hsum s_hsum
#define v_hmax s_hmax
#define vd_zero s_dzero
#define v_acc_d s_acc_d
#define vd_hsum s_dhsum
#define vd_store_f s_dstore_f
#include "kernels_attn.inc"
#include "kernels_attn_undef.inc"

/* -- AVX2 + FMA instantiation ---------------------------------------------------- */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(INDUCT_NO_SIMD)
#define INDUCT_AVX2 1
#include <immintrin.h>
#define AVX2_ __attribute__((target("avx2,fma")))
typedef struct vd2 {
    __m256d lo, hi;
} vd2;
AVX2_ static inline __m256 a_zero(void) { return _mm256_setzero_ps(); }
AVX2_ static inline __m256 a_set1(float x) { return _mm256_set1_ps(x); }
AVX2_ static inline __m256 a_load(const float *p) { return _mm256_loadu_ps(p); }
AVX2_ static inline void a_store(float *p, __m256 a) { _mm256_storeu_ps(p, a); }
/* a streaming store (past the caches; p 32-byte aligned); _mm_sfence orders them */
AVX2_ static inline void a_stream(float *p, __m256 a) { _mm256_stream_ps(p, a); }
AVX2_ static inline __m256 a_fma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
AVX2_ static inline __m256 a_mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
AVX2_ static inline __m256 a_add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
AVX2_ static inline __m256 a_sub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
AVX2_ static inline __m256 a_max(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
AVX2_ static inline __m256 a_lanes_below(size_t n) {
    size_t k = n > 8 ? 8 : n;
    return _mm256_loadu_ps((const float *)(lane_tab + 8 - k));
}
AVX2_ static inline __m256 a_select(__m256 k, __m256 a, __m256 b) {
    return _mm256_blendv_ps(b, a, k);
}
AVX2_ static inline __m256 a_div(__m256 a, __m256 b) { return _mm256_div_ps(a, b); }
AVX2_ static inline __m256 a_sqrt(__m256 a) { return _mm256_sqrt_ps(a); }
AVX2_ static inline __m256 a_abs(__m256 a) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a);
}
/* magnitude of a (sign bit clear) with the sign of b */
AVX2_ static inline __m256 a_copysign(__m256 a, __m256 b) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign, a), _mm256_and_ps(sign, b));
}
AVX2_ static inline __m256 a_exp(__m256 x) {
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
AVX2_ static inline float a_hsum(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_add_ss(b, _mm_movehdup_ps(b)));
}
AVX2_ static inline float a_hmax(__m256 v) {
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 b = _mm_max_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_max_ss(b, _mm_movehdup_ps(b)));
}
AVX2_ static inline vd2 a_dzero(void) {
    vd2 r = {_mm256_setzero_pd(), _mm256_setzero_pd()};
    return r;
}
AVX2_ static inline void a_acc_d(vd2 *lo, vd2 *hi, __m256 x) {
    (void)hi;
    lo->lo = _mm256_add_pd(lo->lo, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
    lo->hi = _mm256_add_pd(lo->hi, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
}
AVX2_ static inline void a_dstore_f(float *o, vd2 a) {
    _mm_storeu_ps(o, _mm256_cvtpd_ps(a.lo));
    _mm_storeu_ps(o + 4, _mm256_cvtpd_ps(a.hi));
}
AVX2_ static inline double a_dhsum(vd2 lo, vd2 hi) {
    (void)hi;
    __m256d a = _mm256_add_pd(lo.lo, lo.hi); /* lanes l + l+4 */
    __m128d b = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_add_sd(b, _mm_unpackhi_pd(b, b)));
}
/* 8x8 tile transpose: dst[j][t] = src[t][j] */
AVX2_ static inline void a_transpose8(float *dst, size_t ldd, const float *src, size_t lds) {
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
#define v_transpose8 a_transpose8
#define FN(name) name##_avx2
#define ATTR AVX2_
#define VF __m256
#define VD vd2
#define v_zero a_zero
#define v_set1 a_set1
#define v_load a_load
#define v_store a_store
#define v_stream a_stream
#define v_stream_fence _mm_sfence
#define V_STREAMS 1
#define v_fma a_fma
#define v_mul a_mul
#define v_add a_add
#define v_sub a_sub
#define v_max a_max
#define v_lanes_below a_lanes_below
#define v_select a_select
#define v_div a_div
#define v_sqrt a_sqrt
#define v_abs a_abs
#define v_copysign a_copysign
#define v_exp a_exp
#define v_hsum a_hsum
#define v_hmax a_hmax
#define vd_zero a_dzero
#define v_acc_d a_acc_d
#define vd_hsum a_dhsum
#define vd_store_f a_dstore_f
#include "kernels_attn.inc"
/* -- the same with AVX-512VL: the AVX2 code given 32 vector registers, which hold the
 * attention kernels' 8-row register tiles (QB 8; with 16 registers the tile has 4 rows).
 * Every lane still performs the same operations in the same order, so the bits are the
 * AVX2 path's: the tile only decides which query rows share one pass over K or V. */
#undef FN
#undef ATTR
#define INDUCT_AVX512 1
#define QB 8
#define FN(name) name##_avx512
#define ATTR __attribute__((target("avx2,fma,avx512f,avx512vl"), unused))
#include "kernels_attn.inc"
#include "kernels_attn_undef.inc"
#endif

static atomic_int simd_allowed = 1, avx512_allowed = 1;

void induct__simd_enable(int on) { atomic_store(&simd_allowed, on ? 1 : 0); }

void induct__simd_avx512_enable(int on) { atomic_store(&avx512_allowed, on ? 1 : 0); }

int induct__simd_active(void) {
#ifdef INDUCT_AVX2
    return atomic_load_explicit(&simd_allowed, memory_order_relaxed) &&
           __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

/* The attention kernels' instantiation for sequences of T: 2 AVX-512VL, 1 AVX2, 0
 * portable. The 8-row tiles pay off from long sequences on (measured on Zen 4, 4096
 * tokens, d_head 16: T 512 4-6 % faster forward and backward, T 256 even, T 64 the
 * backward 15 % slower: more of each tile lies past the diagonal). */
static int attn_simd(size_t T) {
    if (!induct__simd_active()) return 0;
#ifdef INDUCT_AVX512
    if (T > 256 && atomic_load_explicit(&avx512_allowed, memory_order_relaxed) &&
        __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"))
        return 2;
#endif
    return 1;
}

size_t induct__attn_scratch_floats(size_t T, size_t dh) {
    size_t Tp = attn_stride(T), Tr = attn_rows(T);
    /* backward (the larger): V^T, packed K, Q, dz, then dS and a copy of the pattern */
    size_t n = dh * Tp + 3 * T * dh + 2 * Tr * Tp;
    return (n + 15) & ~(size_t)15; /* keep every thread's block 64-byte aligned */
}

/* The per-(batch, head) kernels of one instantiation (attn_simd decides which). */
typedef void (*attn_fwd_fn)(float *, size_t, float *, const float *, size_t, const float *,
                            size_t, const float *, size_t, size_t, size_t, float, float *,
                            unsigned, float *);
typedef void (*attn_rows_fn)(float *, size_t, float *, const float *, size_t, const float *,
                             size_t, const float *, size_t, size_t, size_t, float, float *,
                             const size_t *, size_t, size_t);
typedef void (*attn_bwd_fn)(float *, float *, float *, const float *, size_t, const float *,
                            size_t, const float *, size_t, const float *, size_t, const float *,
                            const uint8_t *, const float *, const uint8_t *, size_t, size_t,
                            float, float *);
typedef struct attn_kernels {
    attn_fwd_fn fwd;
    attn_rows_fn rows;
    attn_bwd_fn bwd;
} attn_kernels;

static attn_kernels attn_kernels_for(size_t T) {
    attn_kernels k = {attn_fwd_bh_scalar, attn_rows_bh_scalar, attn_bwd_bh_scalar};
    int simd = attn_simd(T);
    (void)simd;
#ifdef INDUCT_AVX2
    if (simd == 1) k = (attn_kernels){attn_fwd_bh_avx2, attn_rows_bh_avx2, attn_bwd_bh_avx2};
#endif
#ifdef INDUCT_AVX512
    if (simd == 2) k = (attn_kernels){attn_fwd_bh_avx512, attn_rows_bh_avx512, attn_bwd_bh_avx512};
#endif
    return k;
}

/* This thread's block of the kernels' scratch (per floats each). */
static float *thread_scratch(float *scratch, size_t per) {
    int tid = 0;
#ifdef _OPENMP
    tid = omp_get_thread_num();
#endif
    return scratch + (size_t)tid * per;
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
    attn_kernels kn = attn_kernels_for(T);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        float *sc = thread_scratch(scratch, per);
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
            kn.fwd(zb, ldz, ab, qb, ldq, kb, ldk, vb, ldv, T, dh, scale, sc, stages,
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
    attn_kernels kn = attn_kernels_for(T); /* the instantiation (and tile) the whole pass takes */
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        float *sc = thread_scratch(scratch, per);
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (idx bh = 0; bh < (idx)(B * H); bh++) {
            size_t b = (size_t)bh / H, h = (size_t)bh % H, r0 = b * T;
            kn.rows(z + r0 * ldz + h * dh, ldz, att + (size_t)bh * T * T, q + r0 * ldq + h * dh,
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
    attn_kernels kn = attn_kernels_for(T);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        float *sc = thread_scratch(scratch, per);
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
            kn.bwd(dq + r0 * ldq + o, dk + r0 * ldk + o, dv + r0 * ldv + o, dz + r0 * ldz + o,
                   ldz, q + r0 * ldq + o, ldq, k + r0 * ldk + o, ldk, v + r0 * ldv + o, ldv,
                   att + a0, amask ? amask + a0 : NULL, att_sm ? att_sm + a0 : NULL,
                   smask ? smask + a0 : NULL, T, dh, scale, sc);
        }
    }
}

/* The loss of a row is log(sum) + (max - logit[target]): the two terms are added in this
 * order so that the max cancels exactly in double before the small log(sum) is added
 * (log(sum) + max first would lose log(sum) entirely once |max| is near 1e17). */
/* One logits row: its max (*mx_out), sum_v exp(l[v] - max) (*s_out) and the loss of
 * `target` in nats, rounded to float as every stored loss is. */
float induct__xent_row(const float *l, size_t V, int32_t target, float *mx_out, double *s_out) {
    float mx;
    double s;
#ifdef INDUCT_AVX2
    if (induct__simd_active()) {
        mx = row_max_avx2(l, V);
        s = sumexp_row_avx2(l, V, mx);
    } else
#endif
    {
        mx = row_max_scalar(l, V);
        s = sumexp_row_scalar(l, V, mx);
    }
    *mx_out = mx;
    *s_out = s;
    return (float)(log(s) + ((double)mx - (double)l[target])); /* the max cancels first */
}

/* One logits row's loss (as induct__xent_row) and its gradient g = (exp(l - max) / sum -
 * onehot(target)) * scale: the exponentials of the sum are stored and then scaled, the
 * same values a second pass exp(l - max) * (scale / sum) would give. g may be l (the
 * gradient then replaces the logits). */
static float xent_row_grad(float *g, const float *l, size_t V, int32_t target, float scale) {
    float mx, lt = l[target];
    double s;
#ifdef INDUCT_AVX2
    if (induct__simd_active()) {
        mx = row_max_avx2(l, V);
        s = sumexp_store_avx2(g, l, V, mx);
    } else
#endif
    {
        mx = row_max_scalar(l, V);
        s = sumexp_store_scalar(g, l, V, mx);
    }
    float loss = (float)(log(s) + ((double)mx - (double)lt));
    float mul = (float)((double)scale / (double)(float)s);
#ifdef INDUCT_AVX2
    if (induct__simd_active()) scale_row_avx2(g, mul, V);
    else
#endif
        scale_row_scalar(g, mul, V);
    g[target] -= scale;
    return loss;
}

/* Row blocks of induct__unembed_xent (gemm_block's, over the product's row units: the
 * bits of a row do not depend on the block it is computed in, see gemm_split_rule): a
 * multiple of the thread count of them, the logits of a block within UNEMBED_BLOCK_FLOATS
 * (they are read back from the last-level cache; smaller blocks make OpenBLAS pack W_U
 * more often), every product above the small-matrix limit. */
#define UNEMBED_BLOCK_FLOATS ((size_t)1 << 20)
static int unembed_blocks(size_t N, size_t D, size_t V, size_t unit, int nt) {
    size_t units = (N + unit - 1) / unit, k = UNEMBED_BLOCK_FLOATS / (V * unit);
    if (!k) k = 1;
    if (N * V * D < ((size_t)1 << 20)) return 1; /* one product */
    size_t blocks = (units + k - 1) / k;
    blocks = (blocks + (size_t)nt - 1) / (size_t)nt * (size_t)nt; /* as many per thread */
    if (blocks > units) blocks = units;
    return gemm_blocks_above_limit((int)blocks, units, unit, N, V, D);
}

/* With the weight gradient the row blocks must not depend on the thread count (each
 * block's term is one term of a fixed-order sum): the layout for UNEMBED_GRAD_NT threads,
 * which keeps 1 and 2 threads balanced, with at most N / (2 (D + 1)) blocks, so that
 * their terms (blocks x (D + 1) x V floats) take at most half the memory of the [N, V]
 * gradient they replace. *rows (unless rows is NULL) = the largest block's rows. */
#define UNEMBED_GRAD_NT 2
#define GRAD_SUM_CHUNK 4096 /* induct__unembed_grad_sum's parallel chunks (elements) */
static int unembed_grad_blocks(size_t N, size_t D, size_t V, size_t *rows) {
    size_t unit = gemm_split_rule().unit, units = (N + unit - 1) / unit;
    size_t blocks = (size_t)unembed_blocks(N, D, V, unit, UNEMBED_GRAD_NT);
    size_t most = N / (2 * (D + 1));
    if (blocks > most)
        blocks = most < UNEMBED_GRAD_NT ? 1 : most / UNEMBED_GRAD_NT * UNEMBED_GRAD_NT;
    if (!rows) return (int)blocks;
    *rows = 0;
    for (size_t k = 0; k < blocks; k++) {
        size_t r0, r1;
        gemm_block((int)k, (int)blocks, units, unit, N, &r0, &r1);
        if (r1 - r0 > *rows) *rows = r1 - r0;
    }
    return (int)blocks;
}

/* Whether a gradient pass's blocks are small enough to keep their logits in per-thread
 * scratch (where they stay in cache from block to block) rather than in the logits rows. */
static int unembed_grad_scratch_rows(size_t rows, size_t V) {
    return rows * V <= UNEMBED_BLOCK_FLOATS;
}

/* The weight-gradient scratch: the blocks' terms [blocks][D + 1][V], then per thread a
 * block's [x | 1] [rows][D + 1] and, when they fit, its logits [rows][V]. */
size_t induct__unembed_grad_scratch(size_t N, size_t D, size_t V, int nt) {
    /* the terms take at most max(N / 2, D + 1) V floats and a thread at most N (D + 1 + V):
     * the total is below (nt + 1) (N + D + 1) (D + 1 + V) */
    size_t K1 = D + 1, a = N + K1, b = K1 + V;
    if (N >= SIZE_MAX / 4 || D >= SIZE_MAX / 4 || V >= SIZE_MAX / 4 || b > SIZE_MAX / a ||
        (size_t)nt + 1 > SIZE_MAX / (a * b))
        return SIZE_MAX;
    size_t rows, blocks = (size_t)unembed_grad_blocks(N, D, V, &rows);
    size_t per = rows * K1 + (unembed_grad_scratch_rows(rows, V) ? rows * V : 0);
    return blocks * K1 * V + ((size_t)nt < blocks ? (size_t)nt : blocks) * per;
}

double induct__unembed_xent(float *logits, float *losses, float *dlogits, float *dx,
                            float *wpart, const float *x, const float *W_U, const float *b_U,
                            const int32_t *tokens, size_t B, size_t T, size_t D, size_t V,
                            float scale, size_t only, int nt) {
    size_t N = B * T, unit = gemm_split_rule().unit, units = (N + unit - 1) / unit, K1 = D + 1;
    size_t rows = 0;
    int blocks = wpart ? unembed_grad_blocks(N, D, V, &rows) : unembed_blocks(N, D, V, unit, nt);
    int own = wpart && unembed_grad_scratch_rows(rows, V); /* logits in per-thread scratch */
    float *per_thread = wpart ? wpart + (size_t)blocks * K1 * V : NULL;
    size_t per = rows * K1 + (own ? rows * V : 0);
    int grad = dlogits || wpart;
    if (nt > blocks) nt = blocks;
    PFOR
    for (idx k = 0; k < (idx)blocks; k++) {
        size_t r0, r1;
        gemm_block((int)k, blocks, units, unit, N, &r0, &r1);
        float *xa = wpart ? thread_scratch(per_thread, per) : NULL;
        /* the block's logits: the thread's scratch or the logits rows; with wpart its
         * dlogits replace them row by row, else they go to the caller's rows */
        float *lb = own ? xa + rows * K1 : logits + r0 * V;
        float *gb = wpart ? lb : dlogits ? dlogits + r0 * V : NULL;
        prefill_rows(lb, V, NULL, 0, b_U, 0, r1 - r0, V);
        gemm_serial(0, 0, r1 - r0, V, D, 1.0f, x + r0 * D, D, W_U, V, 1.0f, lb, V);
        for (size_t bt = r0; bt < r1; bt++) {
            size_t b = bt / T, p = bt % T;
            const float *l = lb + (bt - r0) * V;
            float *g = grad ? gb + (bt - r0) * V : NULL;
            if (p + 1 == T) { /* no next token: no loss, no gradient */
                if (g) memset(g, 0, V * sizeof *g);
                continue;
            }
            int32_t tgt = tokens[bt + 1];
            float loss;
            if (g && (!only || p + 1 == only)) {
                loss = xent_row_grad(g, l, V, tgt, scale);
            } else {
                float mx;
                double s;
                loss = induct__xent_row(l, V, tgt, &mx, &s);
                if (g) memset(g, 0, V * sizeof *g);
            }
            losses[b * (T - 1) + p] = loss;
        }
        /* the block's gradients while its dlogits are in cache */
        if (grad && dx)
            gemm_serial(0, 1, r1 - r0, D, V, 1.0f, gb, V, W_U, V, 0.0f, dx + r0 * D, D);
        if (wpart) { /* its term of [dW_U ; db_U] = [x | 1]^T dlogits: the column of ones
                      * gives the bias gradient's column sums from the same product */
            for (size_t r = r0; r < r1; r++) {
                memcpy(xa + (r - r0) * K1, x + r * D, D * sizeof *xa);
                xa[(r - r0) * K1 + D] = 1.0f;
            }
            gemm_serial(1, 0, K1, V, r1 - r0, 1.0f, xa, K1, gb, V, 0.0f,
                        wpart + (size_t)k * K1 * V, V);
        }
    }
    double sum = 0.0;
    for (size_t i = 0; i < B * (T - 1); i++) sum += losses[i];
    return sum;
}

void induct__unembed_grad_sum(float *dW, float *dbias, float *wpart, size_t N, size_t D,
                              size_t V, int nt) {
    size_t blocks = (size_t)unembed_grad_blocks(N, D, V, NULL), n = (D + 1) * V;
    /* element i of every term, in block order: dW's rows, then db's */
    size_t chunks = (n + GRAD_SUM_CHUNK - 1) / GRAD_SUM_CHUNK;
    PFOR
    for (idx ch = 0; ch < (idx)chunks; ch++) {
        size_t i0 = (size_t)ch * GRAD_SUM_CHUNK;
        size_t i1 = n - i0 < GRAD_SUM_CHUNK ? n : i0 + GRAD_SUM_CHUNK;
        float *t = wpart; /* block 0's term, summed into in place */
        for (size_t k = 1; k < blocks; k++) {
            const float *u = wpart + k * n;
            for (size_t i = i0; i < i1; i++) t[i] += u[i];
        }
        for (size_t i = i0; i < i1; i++) {
            if (i < D * V) dW[i] += t[i];
            else if (dbias) dbias[i - D * V] += t[i];
        }
    }
}

/* Parallel over fixed chunks of 4096 elements (boundaries independent of nt). */
#define GELU_CHUNK 4096

void induct__gelu_forward_fast(float *out, const float *inp, size_t n, int nt) {
    int simd = induct__simd_active();
    (void)simd;
    size_t chunks = (n + GELU_CHUNK - 1) / GELU_CHUNK;
    PFOR
    for (idx c = 0; c < (idx)chunks; c++) {
        size_t i0 = (size_t)c * GELU_CHUNK, len = n - i0 < GELU_CHUNK ? n - i0 : GELU_CHUNK;
#ifdef INDUCT_AVX2
        if (simd) {
            gelu_fwd_avx2(out + i0, inp + i0, len);
            continue;
        }
#endif
        gelu_fwd_scalar(out + i0, inp + i0, len);
    }
}

void induct__gelu_backward_fast(float *dinp, const float *inp, const float *dout, size_t n,
                                int nt) {
    int simd = induct__simd_active();
    (void)simd;
    size_t chunks = (n + GELU_CHUNK - 1) / GELU_CHUNK;
    PFOR
    for (idx c = 0; c < (idx)chunks; c++) {
        size_t i0 = (size_t)c * GELU_CHUNK, len = n - i0 < GELU_CHUNK ? n - i0 : GELU_CHUNK;
#ifdef INDUCT_AVX2
        if (simd) {
            gelu_bwd_avx2(dinp + i0, inp + i0, dout + i0, len);
            continue;
        }
#endif
        gelu_bwd_scalar(dinp + i0, inp + i0, dout + i0, len);
    }
}

void induct__fold_gather(float *const out[3], const float *const bias[3], const int pos[3],
                         const float *tab, const int32_t *tokens, size_t B, size_t T, size_t V,
                         size_t HD, int nt) {
    size_t ld = 3 * HD;
    PFOR
    for (idx n = 0; n < (idx)(B * T); n++) {
        const float *te = tab + (size_t)tokens[n] * ld, *tp = tab + (V + (size_t)n % T) * ld;
        for (int x = 0; x < 3; x++) {
            float *o = out[x] + (size_t)n * HD;
            const float *e = te + x * HD, *p = tp + x * HD, *b = bias[x];
            if (pos[x])
                for (size_t j = 0; j < HD; j++) o[j] = (e[j] + p[j]) + b[j];
            else
                for (size_t j = 0; j < HD; j++) o[j] = e[j] + b[j];
        }
    }
}

/* Wide matrices (the unembedding's d_vocab columns): blocks of COLSUM_WIDE columns walked
 * row by row, each row's slice contiguous, into double accumulators in L1. The same
 * operations per column as colsum32 (rows in order, double, one rounding to float at
 * the end), so the same bits; 32-column strips of a 2049-wide matrix read two cache
 * lines per 8 KiB row and ran at a third of the memory bandwidth. */
#define COLSUM_WIDE 256

static void colsum_wide(float *dbias, const float *x, size_t N, size_t w, size_t ld) {
    double acc[COLSUM_WIDE] = {0};
    for (size_t n = 0; n < N; n++, x += ld)
        for (size_t c = 0; c < w; c++) acc[c] += (double)x[c];
    for (size_t c = 0; c < w; c++) dbias[c] += (float)acc[c];
}

static void colsum_blocks(float *dbias, const float *dout, size_t N, size_t C, size_t ld,
                          int nt) {
    int simd = induct__simd_active();
    (void)simd;
    if (C >= 2 * COLSUM_WIDE) {
        size_t nw = (C + COLSUM_WIDE - 1) / COLSUM_WIDE;
        PFOR
        for (idx blk = 0; blk < (idx)nw; blk++) {
            size_t c0 = (size_t)blk * COLSUM_WIDE;
            colsum_wide(dbias + c0, dout + c0, N, C - c0 < COLSUM_WIDE ? C - c0 : COLSUM_WIDE,
                        ld);
        }
        return;
    }
    size_t nb = (C + 31) / 32;
    PFOR
    for (idx blk = 0; blk < (idx)nb; blk++) {
        size_t c0 = (size_t)blk * 32, n = C - c0 < 32 ? C - c0 : 32;
#ifdef INDUCT_AVX2
        if (simd) {
            colsum32_avx2(dbias + c0, dout + c0, N, n, ld);
            continue;
        }
#endif
        colsum32_scalar(dbias + c0, dout + c0, N, n, ld);
    }
}

void induct__fold_group(float *grp, const float *const d[3], const int pos[3],
                        const int32_t *tokens, size_t B, size_t T, size_t V, size_t HD, int nt) {
    int simd = induct__simd_active();
    (void)simd;
    size_t ld = 3 * HD, N = B * T;
    memset(grp, 0, (V + T) * ld * sizeof *grp);
    /* column blocks of 16 per thread; every output sums n in increasing order */
    size_t per = (HD + 15) / 16, nb = 3 * per;
    PFOR
    for (idx blk = 0; blk < (idx)nb; blk++) {
        int x = (int)((size_t)blk / per);
        size_t c0 = ((size_t)blk % per) * 16, w = HD - c0 < 16 ? HD - c0 : 16;
        float *ge = grp + x * HD + c0, *gp = pos[x] ? grp + V * ld + x * HD + c0 : NULL;
#ifdef INDUCT_AVX2
        if (simd) {
            group16_avx2(ge, gp, ld, d[x] + c0, HD, tokens, N, T, w);
            continue;
        }
#endif
        group16_scalar(ge, gp, ld, d[x] + c0, HD, tokens, N, T, w);
    }
}

#define ADAMW_CHUNK 8192

void induct__adamw_update(float *p, const float *g, float *m1, float *m2, size_t n, float clip,
                          float b1, float b2, float bc1, float bc2, float eps, float decay,
                          float lr, int nt) {
    int simd = induct__simd_active();
    (void)simd;
    size_t chunks = (n + ADAMW_CHUNK - 1) / ADAMW_CHUNK;
    if (chunks < 2) nt = 1;
    PFOR
    for (idx c = 0; c < (idx)chunks; c++) {
        size_t i0 = (size_t)c * ADAMW_CHUNK, len = n - i0 < ADAMW_CHUNK ? n - i0 : ADAMW_CHUNK;
#ifdef INDUCT_AVX2
        if (simd) {
            adamw_avx2(p + i0, g + i0, m1 + i0, m2 + i0, len, clip, b1, b2, bc1, bc2, eps, decay,
                       lr);
            continue;
        }
#endif
        adamw_scalar(p + i0, g + i0, m1 + i0, m2 + i0, len, clip, b1, b2, bc1, bc2, eps, decay,
                     lr);
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

void induct__embed_backward_par(float *dW_E, float *dW_pos, const float *dout,
                                const int32_t *tokens, size_t B, size_t T, size_t D, int nt) {
    /* column blocks of 16: every element still sums its rows in increasing n, as the
     * serial induct__embed_backward / induct__pos_backward do (position t's rows are
     * n = b T + t, b increasing) */
    int simd = induct__simd_active();
    (void)simd;
    size_t nb = (D + 15) / 16;
    if (B * T * D < ((size_t)1 << 16)) nt = 1;
    PFOR
    for (idx blk = 0; blk < (idx)nb; blk++) {
        size_t c0 = (size_t)blk * 16, w = D - c0 < 16 ? D - c0 : 16;
        float *gp = dW_pos ? dW_pos + c0 : NULL;
#ifdef INDUCT_AVX2
        if (simd) {
            group16_avx2(dW_E + c0, gp, D, dout + c0, D, tokens, B * T, T, w);
            continue;
        }
#endif
        group16_scalar(dW_E + c0, gp, D, dout + c0, D, tokens, B * T, T, w);
    }
}

void induct__zero(float *x, size_t n, int nt) {
    size_t chunks = (n + 65535) / 65536;
    if (chunks < 2) nt = 1;
    PFOR
    for (idx c = 0; c < (idx)chunks; c++) {
        size_t i0 = (size_t)c * 65536, len = n - i0 < 65536 ? n - i0 : 65536;
        memset(x + i0, 0, len * sizeof *x);
    }
}
