/* The cross-entropy's row kernels (log-sum-exp over a logits row), written once over the
 * vector vocabulary of simd.h and compiled once per instruction set; unembed.c calls
 * them through induct__xent_vec. */
#include "simd.h"

#if INDUCT_VEC
/* Maximum of n >= 1 floats (NaN handling as MAXPS: a NaN may or may not win, and a NaN
 * maximum makes the row's loss NaN, which the caller reports). */
static ATTR float FN(row_max)(const float *x, size_t n) {
    size_t nv = n / 8, c;
    float mx = x[0];
    if (nv) {
        VF m = v_load(x);
        for (c = 1; c < nv; c++) m = v_max(m, v_load(x + 8 * c));
        mx = v_hmax(m);
    }
    for (size_t i = 8 * nv; i < n; i++)
        if (x[i] > mx) mx = x[i];
    return mx;
}

/* Sum of exp(x - mx) over n floats, accumulated in double lanes; mx = max(x), so the sum
 * is in [1, n] for finite x whatever their magnitude (x - mx may round to -inf: exp
 * gives 0). */
static ATTR double FN(sumexp_row)(const float *x, size_t n, float mx) {
    size_t nv = n / 8, c;
    VF vm = v_set1(mx);
    VD lo = vd_zero(), hi = vd_zero();
    for (c = 0; c < nv; c++) v_acc_d(&lo, &hi, v_exp(v_sub(v_load(x + 8 * c), vm)));
    double s = vd_hsum(lo, hi);
    for (size_t i = 8 * nv; i < n; i++) s += (double)induct__expf(x[i] - mx);
    return s;
}

/* sumexp_row that also stores g[i] = exp(x[i] - mx): the same sum, the same exponentials */
static ATTR double FN(sumexp_store)(float *g, const float *x, size_t n, float mx) {
    size_t nv = n / 8, c;
    VF vm = v_set1(mx);
    VD lo = vd_zero(), hi = vd_zero();
    for (c = 0; c < nv; c++) {
        VF e = v_exp(v_sub(v_load(x + 8 * c), vm));
        v_store(g + 8 * c, e);
        v_acc_d(&lo, &hi, e);
    }
    double s = vd_hsum(lo, hi);
    for (size_t i = 8 * nv; i < n; i++) {
        g[i] = induct__expf(x[i] - mx);
        s += (double)g[i];
    }
    return s;
}

/* g[i] *= mul */
static ATTR void FN(scale_row)(float *g, float mul, size_t n) {
    size_t nv = n / 8;
    VF vs = v_set1(mul);
    for (size_t c = 0; c < nv; c++) v_store(g + 8 * c, v_mul(v_load(g + 8 * c), vs));
    for (size_t i = 8 * nv; i < n; i++) g[i] *= mul;
}

const induct__xent_vec FN(induct__xent) = {FN(row_max), FN(sumexp_row), FN(sumexp_store),
                                          FN(scale_row)};
#endif
