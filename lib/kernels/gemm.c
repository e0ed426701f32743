/* Matrix products: which OpenBLAS build runs and the one serial rule of every BLAS and
 * LAPACK call, the row splits that keep a product's bits whatever the thread count, two
 * products side by side, and products onto a bias (also at a few rows only). */
#include "kernels_internal.h"

#ifndef INDUCT_PORTABLE_GEMM
#include <cblas.h>
#endif
#include <stdatomic.h>
#include <string.h>
#include <strings.h>

/* Which OpenBLAS build the process resolved libopenblas.so.0 to. Debian ships three
 * builds under one soname, chosen by update-alternatives, LD_LIBRARY_PATH or whichever
 * the host loaded first, so the build libinduct was linked against is not necessarily
 * the one it runs with:
 *  - OpenMP (the one we link): single-threaded inside our parallel regions, and
 *    induct__blas_serial() makes it single-threaded outside them;
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

/* One BLAS or LAPACK call as the build the process resolved requires: serialised for the
 * sequential build, which is not safe to call from several threads at once. */
static void blas_call(induct__blas_fn call, void *args) {
#ifndef INDUCT_PORTABLE_GEMM
    if (induct__blas_mode() == INDUCT__BLAS_SEQUENTIAL) {
#ifdef _OPENMP
#pragma omp critical(induct_sequential_blas)
#endif
        call(args);
        return;
    }
#endif
    call(args);
}

/* The serial rule of every BLAS and LAPACK call (induct__gemm_serial, linalg.c).
 * libinduct links OpenBLAS's OpenMP build, which runs single-threaded inside an active
 * parallel region and otherwise sizes its own team from omp_get_max_threads(). Outside
 * our regions we therefore call it from a one-thread region whose nthreads ICV is set to
 * 1: that ICV belongs to the region's implicit task and disappears with it, so the
 * caller's OpenMP settings are never changed. All parallelism is ours (induct__gemm
 * below). */
void induct__blas_serial(induct__blas_fn call, void *args) {
#ifdef _OPENMP
    if (!omp_in_parallel()) {
#pragma omp parallel num_threads(1)
        {
            omp_set_num_threads(1);
            blas_call(call, args);
        }
        return;
    }
#endif
    blas_call(call, args);
}

static void sgemm_call(void *args) {
    const induct__gemm_args *g = args;
#ifdef INDUCT_PORTABLE_GEMM
    induct__gemm_portable(g->transA, g->transB, g->M, g->N, g->K, g->alpha, g->A, g->lda, g->B,
                          g->ldb, g->beta, g->C, g->ldc);
#else
    cblas_sgemm(CblasRowMajor, g->transA ? CblasTrans : CblasNoTrans,
                g->transB ? CblasTrans : CblasNoTrans, (int)g->M, (int)g->N, (int)g->K, g->alpha,
                g->A, (int)g->lda, g->B, (int)g->ldb, g->beta, g->C, (int)g->ldc);
#endif
}

void induct__gemm_serial(int transA, int transB, size_t M, size_t N, size_t K, float alpha,
                         const float *A, size_t lda, const float *B, size_t ldb, float beta,
                         float *C, size_t ldc) {
    if (M == 0 || N == 0) return;
    induct__gemm_args g = {transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc};
    induct__blas_serial(sgemm_call, &g);
}

typedef struct dgemm_args {
    int transA, transB;
    size_t M, N, K;
    double alpha;
    const double *A;
    size_t lda;
    const double *B;
    size_t ldb;
    double beta;
    double *C;
    size_t ldc;
} dgemm_args;

static void dgemm_call(void *args) {
    const dgemm_args *g = args;
#ifdef INDUCT_PORTABLE_GEMM
    induct__dgemm_portable(g->transA, g->transB, g->M, g->N, g->K, g->alpha, g->A, g->lda, g->B,
                           g->ldb, g->beta, g->C, g->ldc);
#else
    cblas_dgemm(CblasRowMajor, g->transA ? CblasTrans : CblasNoTrans,
                g->transB ? CblasTrans : CblasNoTrans, (int)g->M, (int)g->N, (int)g->K, g->alpha,
                g->A, (int)g->lda, g->B, (int)g->ldb, g->beta, g->C, (int)g->ldc);
#endif
}

void induct__dgemm_serial(int transA, int transB, size_t M, size_t N, size_t K, double alpha,
                          const double *A, size_t lda, const double *B, size_t ldb, double beta,
                          double *C, size_t ldc) {
    if (M == 0 || N == 0) return;
    dgemm_args g = {transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc};
    induct__blas_serial(dgemm_call, &g);
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
induct__gemm_split induct__gemm_split_rule(void) {
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
    return (induct__gemm_split){(size_t)u, sm ? 1e6 : 0.0};
}

int induct__gemm_blocks_above_limit(int want, size_t chunks, size_t unit, size_t M, size_t N,
                                    size_t K) {
    double small = induct__gemm_split_rule().small_mnk;
    for (; want > 1; want--) {
        int ok = 1;
        for (int t = 0; t < want && ok; t++) {
            size_t r0, r1;
            induct__gemm_block(t, want, chunks, unit, M, &r0, &r1);
            ok = (double)(r1 - r0) * (double)N * (double)K > small;
        }
        if (ok) break;
    }
    return want;
}

/* How many row blocks (threads) an M x N x K product is split into; 1 means one call.
 * *chunks and *unit describe the blocks for induct__gemm_block. */
static int gemm_plan(int nt, size_t M, size_t N, size_t K, size_t *chunks, size_t *unit) {
    induct__gemm_split rule = induct__gemm_split_rule();
    *unit = rule.unit;
#ifndef _OPENMP
    nt = 1; /* no threads of ours: one call, whatever n_threads says */
#endif
    /* below ~2^20 multiply-adds (~20 us) a fork/join costs more than it saves */
    if (nt <= 1 || M <= rule.unit || M * N * K < ((size_t)1 << 20)) return 1;
    *chunks = (M + rule.unit - 1) / rule.unit;
    if ((size_t)nt > *chunks) nt = (int)*chunks;
    return induct__gemm_blocks_above_limit(nt, *chunks, rule.unit, M, N, K);
}

void induct__gemm(int nt, int transA, int transB, size_t M, size_t N, size_t K, float alpha,
                  const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                  size_t ldc) {
    /* rows only: a split of the columns changes OpenBLAS's blocking of the whole call
     * (measured: no column offset reproduces the single call's bits) */
    size_t chunks = 0, unit = 0;
    nt = gemm_plan(nt, M, N, K, &chunks, &unit);
    if (nt <= 1) {
        induct__gemm_serial(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
#endif
    for (int t = 0; t < nt; t++) {
        size_t r0, r1;
        induct__gemm_block(t, nt, chunks, unit, M, &r0, &r1);
        if (r0 >= r1) continue;
        const float *Ab = transA ? A + r0 : A + r0 * lda;
        induct__gemm_serial(transA, transB, r1 - r0, N, K, alpha, Ab, lda, B, ldb, beta,
                            C + r0 * ldc, ldc);
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
            induct__gemm_serial(g->transA, g->transB, g->M, g->N, g->K, g->alpha, g->A, g->lda,
                                g->B, g->ldb, g->beta, g->C, g->ldc);
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

void induct__prefill_rows(float *C, size_t ldc, const float *inp, size_t ldi, const float *bias,
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

void induct__gemm_prefilled(int nt, int transA, int transB, size_t M, size_t N, size_t K,
                            const float *A, size_t lda, const float *B, size_t ldb, float *C,
                            size_t ldc, const float *inp, size_t ldi, const float *bias) {
    size_t chunks = 0, unit = 0;
    nt = gemm_plan(nt, M, N, K, &chunks, &unit);
    if (nt <= 1) {
        induct__prefill_rows(C, ldc, inp, ldi, bias, 0, M, N);
        induct__gemm_serial(transA, transB, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, C, ldc);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
#endif
    for (int t = 0; t < nt; t++) {
        size_t r0, r1;
        induct__gemm_block(t, nt, chunks, unit, M, &r0, &r1);
        if (r0 >= r1) continue;
        induct__prefill_rows(C, ldc, inp, ldi, bias, r0, r1, N);
        const float *Ab = transA ? A + r0 : A + r0 * lda;
        induct__gemm_serial(transA, transB, r1 - r0, N, K, 1.0f, Ab, lda, B, ldb, 1.0f,
                            C + r0 * ldc, ldc);
    }
}

void induct__gemm_bias(int nt, size_t M, size_t N, size_t K, const float *A, size_t lda,
                       const float *B, size_t ldb, float *C, size_t ldc, const float *inp,
                       size_t ldi, const float *bias) {
    induct__gemm_prefilled(nt, 0, 0, M, N, K, A, lda, B, ldb, C, ldc, inp, ldi, bias);
}

/* Rows of a product computed apart (induct__gemm_bias_rows). The whole M-row call gives
 * a row bits that depend on its position modulo OpenBLAS's micro-tile period (every
 * period induct__gemm_split_rule knows divides GEMM_ROWS_PERIOD) and on whether it lies
 * in the call's last M mod period rows (remainder kernels): the rule that lets
 * induct__gemm split rows. The gathered call therefore puts each requested row at a slot congruent to
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
    double small = induct__gemm_split_rule().small_mnk, nk = (double)N * (double)K;
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
        induct__prefill_rows(Cg + r * N, N, inp ? inp + rows[i] * ldi : NULL, ldi, bias, 0, 1, N);
    }
    /* what gemm_prefilled multiplies after its prefill: the same sgemm calls */
    induct__gemm(nt, 0, 0, Mg, N, K, 1.0f, Ag, K, B, ldb, 1.0f, Cg, N);
    memset(&it, 0, sizeof it);
    it.last = SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        memcpy(C + rows[i] * ldc, Cg + gemm_rows_next(&it, M, rows[i], pl.body) * N,
               N * sizeof *C);
}
