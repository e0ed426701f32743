/* GELU (tanh approximation, GPT-2's "gelu_new") forward and backward on a chunk, written
 * once over the vector vocabulary of simd.h and compiled once per instruction set;
 * gelu.c calls them through induct__gelu_vec. */
#include "simd.h"

#if INDUCT_VEC
/* tanh(u) = sign(u) (1 - e) / (1 + e), e = exp(-2|u|) */
static ATTR VF FN(tanh8)(VF u) {
    VF a = v_abs(u);
    VF e = v_exp(v_sub(v_zero(), v_add(a, a)));
    VF one = v_set1(1.0f);
    return v_copysign(v_div(v_sub(one, e), v_add(one, e)), u);
}

#define GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K1 0.044715f

/* out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), n floats (tanh approximation) */
static ATTR void FN(gelu_fwd)(float *out, const float *inp, size_t n) {
    size_t nv = n / 8;
    const VF c0 = v_set1(GELU_K0), c1 = v_set1(GELU_K1), half = v_set1(0.5f),
             one = v_set1(1.0f);
    for (size_t c = 0; c < nv; c++) {
        VF x = v_load(inp + 8 * c);
        VF u = v_mul(c0, v_add(x, v_mul(v_mul(v_mul(c1, x), x), x)));
        v_store(out + 8 * c, v_mul(v_mul(half, x), v_add(one, FN(tanh8)(u))));
    }
    if (8 * nv < n) {
        float xi[8] = {0}, o[8];
        for (size_t i = 8 * nv; i < n; i++) xi[i - 8 * nv] = inp[i];
        VF x = v_load(xi);
        VF u = v_mul(c0, v_add(x, v_mul(v_mul(v_mul(c1, x), x), x)));
        v_store(o, v_mul(v_mul(half, x), v_add(one, FN(tanh8)(u))));
        for (size_t i = 8 * nv; i < n; i++) out[i] = o[i - 8 * nv];
    }
}

/* dinp = dout * gelu'(inp) */
static ATTR VF FN(gelu_grad8)(VF x, VF g) {
    const VF c0 = v_set1(GELU_K0), c1 = v_set1(GELU_K1), c3 = v_set1(3.0f * GELU_K1),
             half = v_set1(0.5f), one = v_set1(1.0f);
    VF u = v_mul(c0, v_add(x, v_mul(v_mul(v_mul(c1, x), x), x)));
    VF th = FN(tanh8)(u);
    VF sech2 = v_sub(one, v_mul(th, th));
    VF d = v_add(v_mul(half, v_add(one, th)),
                 v_mul(v_mul(v_mul(v_mul(half, x), sech2), c0),
                       v_add(one, v_mul(v_mul(c3, x), x))));
    return v_mul(g, d);
}

static ATTR void FN(gelu_bwd)(float *dinp, const float *inp, const float *dout, size_t n) {
    size_t nv = n / 8;
    for (size_t c = 0; c < nv; c++)
        v_store(dinp + 8 * c, FN(gelu_grad8)(v_load(inp + 8 * c), v_load(dout + 8 * c)));
    if (8 * nv < n) {
        float xi[8] = {0}, gi[8] = {0}, o[8];
        for (size_t i = 8 * nv; i < n; i++) {
            xi[i - 8 * nv] = inp[i];
            gi[i - 8 * nv] = dout[i];
        }
        v_store(o, FN(gelu_grad8)(v_load(xi), v_load(gi)));
        for (size_t i = 8 * nv; i < n; i++) dinp[i] = o[i - 8 * nv];
    }
}

const induct__gelu_vec FN(induct__gelu) = {FN(gelu_fwd), FN(gelu_bwd)};
#endif
