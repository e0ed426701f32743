/* The column sums of a bias gradient on a strip of 32 columns, written once over the
 * vector vocabulary of simd.h and compiled once per instruction set; linear.c calls it
 * through induct__colsum_vec. */
#include "simd.h"

#if INDUCT_VEC
/* dbias[c] += (float)(sum over n in order of x[n*ld + c]) in double, c < w <= 32 */
static ATTR void FN(colsum32)(float *dbias, const float *x, size_t N, size_t w, size_t ld) {
    if (w == 32) {
        VD a0 = vd_zero(), a1 = vd_zero(), a2 = vd_zero(), a3 = vd_zero(), unused = vd_zero();
        for (size_t n = 0; n < N; n++, x += ld) {
            v_acc_d(&a0, &unused, v_load(x));
            v_acc_d(&a1, &unused, v_load(x + 8));
            v_acc_d(&a2, &unused, v_load(x + 16));
            v_acc_d(&a3, &unused, v_load(x + 24));
        }
        float o[32];
        vd_store_f(o, a0);
        vd_store_f(o + 8, a1);
        vd_store_f(o + 16, a2);
        vd_store_f(o + 24, a3);
        for (size_t c = 0; c < 32; c++) dbias[c] += o[c];
        return;
    }
    double acc[32] = {0};
    for (size_t n = 0; n < N; n++, x += ld)
        for (size_t c = 0; c < w; c++) acc[c] += x[c];
    for (size_t c = 0; c < w; c++) dbias[c] += (float)acc[c];
}

const induct__colsum_vec FN(induct__colsum) = {FN(colsum32)};
#endif
