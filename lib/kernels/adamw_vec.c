/* The AdamW update on a chunk of parameters, written once over the vector vocabulary of
 * simd.h and compiled once per instruction set; adamw.c calls it through
 * induct__adamw_vec. */
#include "simd.h"

#if INDUCT_VEC
/* AdamW on n floats, the same operations in the same order as the scalar loop in
 * train/optimizer.c:
 * g' = g clip; m1 = b1 m1 + (1-b1) g'; m2 = b2 m2 + (1-b2) g' g'; p -= decay p;
 * p -= lr (m1/bc1) / (sqrt(m2/bc2) + eps). */
static ATTR void FN(adamw)(float *p, const float *g, float *m1, float *m2, size_t n, float clip,
                           float b1, float b2, float bc1, float bc2, float eps, float decay,
                           float lr) {
    const VF vclip = v_set1(clip), vb1 = v_set1(b1), vb2 = v_set1(b2), vc1 = v_set1(1.0f - b1),
             vc2 = v_set1(1.0f - b2), vbc1 = v_set1(bc1), vbc2 = v_set1(bc2), veps = v_set1(eps),
             vdecay = v_set1(decay), vlr = v_set1(lr);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        VF gi = v_mul(v_load(g + i), vclip);
        VF a = v_add(v_mul(vb1, v_load(m1 + i)), v_mul(vc1, gi));
        VF b = v_add(v_mul(vb2, v_load(m2 + i)), v_mul(v_mul(vc2, gi), gi));
        v_store(m1 + i, a);
        v_store(m2 + i, b);
        VF mh = v_div(a, vbc1), vh = v_div(b, vbc2);
        VF x = v_load(p + i);
        x = v_sub(x, v_mul(vdecay, x));
        x = v_sub(x, v_div(v_mul(vlr, mh), v_add(v_sqrt(vh), veps)));
        v_store(p + i, x);
    }
    for (; i < n; i++) {
        float gi = g[i] * clip;
        m1[i] = b1 * m1[i] + (1.0f - b1) * gi;
        m2[i] = b2 * m2[i] + (1.0f - b2) * gi * gi;
        float mh = m1[i] / bc1, vh = m2[i] / bc2;
        p[i] -= decay * p[i];
        p[i] -= lr * mh / (sqrtf(vh) + eps);
    }
}

const induct__adamw_vec FN(induct__adamw) = {FN(adamw)};
#endif
