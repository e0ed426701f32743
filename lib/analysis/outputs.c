/* analysis: single-threaded BLAS/LAPACK calls and output-buffer checks
 * shared by the analysis files. */
#ifndef INDUCT_PORTABLE_GEMM
#include <cblas.h>
#endif
#ifndef INDUCT_NO_LAPACKE
#include <lapacke.h>
#endif

#include "analysis_internal.h"
#include "kernels.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* Run `call` in a one-thread region whose nthreads ICV is 1 (see analysis_internal.h). */
#ifdef _OPENMP
#define SERIAL(call)                                                                               \
    do {                                                                                           \
        int seq_ = induct__blas_mode() == INDUCT__BLAS_SEQUENTIAL;                                 \
        if (omp_in_parallel() && seq_) {                                                           \
            _Pragma("omp critical(induct_sequential_blas)") { call; }                              \
        } else if (omp_in_parallel()) {                                                            \
            call;                                                                                  \
        } else {                                                                                   \
            _Pragma("omp parallel num_threads(1)") {                                               \
                omp_set_num_threads(1);                                                            \
                call;                                                                              \
            }                                                                                      \
        }                                                                                          \
    } while (0)
#else
#define SERIAL(call)                                                                               \
    do {                                                                                           \
        (void)induct__blas_mode();                                                                 \
        call;                                                                                      \
    } while (0)
#endif

void induct__an_sgemm(int transA, int transB, size_t M, size_t N, size_t K, float alpha,
                      const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                      size_t ldc) {
    if (M == 0 || N == 0) return;
#ifdef INDUCT_PORTABLE_GEMM
    induct__gemm_portable(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    SERIAL(cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                       transB ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, A,
                       (int)lda, B, (int)ldb, beta, C, (int)ldc));
#endif
}

void induct__an_dgemm(int transA, int transB, size_t M, size_t N, size_t K, double alpha,
                      const double *A, size_t lda, const double *B, size_t ldb, double beta,
                      double *C, size_t ldc) {
    if (M == 0 || N == 0) return;
#ifdef INDUCT_PORTABLE_GEMM
    induct__dgemm_portable(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    SERIAL(cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                       transB ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, A,
                       (int)lda, B, (int)ldb, beta, C, (int)ldc));
#endif
}

#ifdef INDUCT_NO_LAPACKE
int induct__an_lapack(const char *fn) {
    return induct__fail(INDUCT_ENOTSUP, "%s: this build has no LAPACK (LAPACKE was not found)",
                        fn);
}
int induct__an_dgeev(size_t n, double *a, double *wr, double *wi) {
    (void)n, (void)a, (void)wr, (void)wi;
    return -1;
}
int induct__an_dgesdd(size_t m, size_t n, double *a, double *s, double *u, double *vt) {
    (void)m, (void)n, (void)a, (void)s, (void)u, (void)vt;
    return -1;
}
#else
int induct__an_lapack(const char *fn) {
    (void)fn;
    return INDUCT_OK;
}

int induct__an_dgeev(size_t n, double *a, double *wr, double *wi) {
    lapack_int info = 0;
    SERIAL(info = LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', 'N', (lapack_int)n, a, (lapack_int)n, wr, wi,
                                NULL, 1, NULL, 1));
    return (int)info;
}

int induct__an_dgesdd(size_t m, size_t n, double *a, double *s, double *u, double *vt) {
    lapack_int info = 0;
    size_t k = m < n ? m : n;
    SERIAL(info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', (lapack_int)m, (lapack_int)n, a,
                                 (lapack_int)n, s, u, (lapack_int)k, vt, (lapack_int)n));
    return (int)info;
}
#endif

int induct__an_out(const char *fn, const char *shape, size_t need, const void *out, size_t cap,
                   size_t *len) {
    if (len) *len = need;
    INDUCT_FAIL_IF((!out && need) || cap < need, INDUCT_EBUFSIZE,
                   "%s: needs %zu elements (%s), buffer holds %zu", fn, need, shape, out ? cap : 0);
    return INDUCT_OK;
}

int induct__an_heads_out(const induct_model *m, const char *fn, const void *out, size_t cap,
                         size_t *len) {
    return induct__an_out(fn, "[n_layers][n_heads]", (size_t)m->cfg.n_layers * m->cfg.n_heads, out,
                          cap, len);
}

int induct__an_interrupted(induct_model *m, const char *fn) {
    INDUCT_FAIL_IF(atomic_load(&m->interrupt), INDUCT_EINTERRUPTED, "%s: interrupted", fn);
    return INDUCT_OK;
}
