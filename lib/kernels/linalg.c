/* Linear algebra through LAPACKE (eigenvalues, the singular value decomposition), under the
 * serial rule of every BLAS and LAPACK call (gemm.c). A build without LAPACKE (the
 * portable WebAssembly build) has none: induct__lapack_check names the analysis that
 * needs it. */
#ifndef INDUCT_NO_LAPACKE
#include <lapacke.h>
#endif

#include "core/core.h"
#include "kernels_internal.h"

#ifdef INDUCT_NO_LAPACKE
int induct__lapack_check(const char *fn) {
    return induct__fail(INDUCT_ENOTSUP, "%s: this build has no LAPACK (LAPACKE was not found)",
                        fn);
}
int induct__dgeev(size_t n, double *a, double *wr, double *wi) {
    (void)n, (void)a, (void)wr, (void)wi;
    return -1;
}
int induct__dgesdd(size_t m, size_t n, double *a, double *s, double *u, double *vt) {
    (void)m, (void)n, (void)a, (void)s, (void)u, (void)vt;
    return -1;
}
#else
int induct__lapack_check(const char *fn) {
    (void)fn;
    return INDUCT_OK;
}

typedef struct dgeev_args {
    size_t n;
    double *a, *wr, *wi;
    lapack_int info;
} dgeev_args;

static void dgeev_call(void *args) {
    dgeev_args *g = args;
    g->info = LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', 'N', (lapack_int)g->n, g->a, (lapack_int)g->n,
                            g->wr, g->wi, NULL, 1, NULL, 1);
}

int induct__dgeev(size_t n, double *a, double *wr, double *wi) {
    dgeev_args g = {n, a, wr, wi, 0};
    induct__blas_serial(dgeev_call, &g);
    return (int)g.info;
}

typedef struct dgesdd_args {
    size_t m, n;
    double *a, *s, *u, *vt;
    lapack_int info;
} dgesdd_args;

static void dgesdd_call(void *args) {
    dgesdd_args *g = args;
    size_t k = g->m < g->n ? g->m : g->n;
    g->info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', (lapack_int)g->m, (lapack_int)g->n, g->a,
                             (lapack_int)g->n, g->s, g->u, (lapack_int)k, g->vt, (lapack_int)g->n);
}

int induct__dgesdd(size_t m, size_t n, double *a, double *s, double *u, double *vt) {
    dgesdd_args g = {m, n, a, s, u, vt, 0};
    induct__blas_serial(dgesdd_call, &g);
    return (int)g.info;
}
#endif
