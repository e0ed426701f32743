/* analysis: PCA of a stack of per-token loss vectors (ICL paper,
 * Appendix "Data Collection") through LAPACKE's SVD. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "kernels/kernels.h"

INDUCT_API int induct_analysis_pca(const float *x, uint32_t n_rows, uint32_t n_cols, uint32_t k,
                                   float *scores_out, size_t scores_cap, float *components_out,
                                   size_t components_cap, double *variance_out, size_t variance_cap,
                                   double *total_variance_out) {
    const char *fn = "induct_analysis_pca";
    INDUCT_FAIL_IF(!x || !scores_out, INDUCT_EINVAL, "%s: NULL x or scores_out", fn);
    INDUCT_TRY(induct__lapack_check(fn));
    INDUCT_FAIL_IF((!components_out && components_cap) || (!variance_out && variance_cap),
                   INDUCT_EINVAL, "%s: a NULL buffer needs capacity 0", fn);
    INDUCT_FAIL_IF(n_rows < 2 || n_cols < 1, INDUCT_EINVAL,
                   "%s: needs at least 2 rows and 1 column (got %u x %u)", fn, n_rows, n_cols);
    size_t m = n_rows, n = n_cols, mn = m < n ? m : n, total;
    INDUCT_FAIL_IF(k == 0 || k > mn, INDUCT_ERANGE,
                   "%s: n_components %u outside [1, min(n_rows, n_cols) = %zu]", fn, k, mn);
    INDUCT_FAIL_IF(!induct__mul(m, n, &total) || total > ((size_t)1 << 31), INDUCT_ELIMIT,
                   "%s: %u x %u is too large", fn, n_rows, n_cols);
    INDUCT_FAIL_IF(scores_cap < m * k, INDUCT_EBUFSIZE,
                   "%s: scores_out needs %zu floats ([n_rows][k]), holds %zu", fn, m * k,
                   scores_cap);
    INDUCT_FAIL_IF(components_out && components_cap < (size_t)k * n, INDUCT_EBUFSIZE,
                   "%s: components_out needs %zu floats ([k][n_cols]), holds %zu", fn,
                   (size_t)k * n, components_cap);
    INDUCT_FAIL_IF(variance_out && variance_cap < k, INDUCT_EBUFSIZE,
                   "%s: variance_out needs %u doubles ([k]), holds %zu", fn, k, variance_cap);
    for (size_t i = 0; i < total; i++)
        INDUCT_FAIL_IF(!isfinite(x[i]), INDUCT_EINVAL, "%s: x[%zu] is not finite", fn, i);
    double *a = malloc(total * sizeof *a), *s = malloc(mn * sizeof *s),
           *u = malloc(m * mn * sizeof *u), *vt = malloc(mn * n * sizeof *vt);
    if (!a || !s || !u || !vt) {
        free(a);
        free(s);
        free(u);
        free(vt);
        return induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    }
    for (size_t j = 0; j < n; j++) {
        double mu = 0.0;
        for (size_t i = 0; i < m; i++)
            mu += x[i * n + j];
        mu /= (double)m;
        for (size_t i = 0; i < m; i++)
            a[i * n + j] = (double)x[i * n + j] - mu;
    }
    int info = induct__dgesdd(m, n, a, s, u, vt);
    int rc = INDUCT_OK;
    if (info != 0) {
        rc = induct__fail(INDUCT_ERROR, "%s: LAPACKE_dgesdd failed (info %d)", fn, info);
    } else {
        /* sign: the entry of largest magnitude of each component is positive */
        for (size_t c = 0; c < k; c++) {
            size_t jmax = 0;
            for (size_t j = 1; j < n; j++)
                if (fabs(vt[c * n + j]) > fabs(vt[c * n + jmax])) jmax = j;
            if (vt[c * n + jmax] < 0) {
                for (size_t j = 0; j < n; j++)
                    vt[c * n + j] = -vt[c * n + j];
                for (size_t i = 0; i < m; i++)
                    u[i * mn + c] = -u[i * mn + c];
            }
        }
        for (size_t i = 0; i < m; i++)
            for (size_t c = 0; c < k; c++)
                scores_out[i * k + c] = (float)(u[i * mn + c] * s[c]);
        if (components_out)
            for (size_t c = 0; c < k; c++)
                for (size_t j = 0; j < n; j++)
                    components_out[c * n + j] = (float)vt[c * n + j];
        double tv = 0.0;
        for (size_t c = 0; c < mn; c++)
            tv += s[c] * s[c] / (double)(m - 1);
        if (variance_out)
            for (size_t c = 0; c < k; c++)
                variance_out[c] = s[c] * s[c] / (double)(m - 1);
        if (total_variance_out) *total_variance_out = tv;
    }
    free(a);
    free(s);
    free(u);
    free(vt);
    return rc;
}
