/* Row sums grouped by token id (and by position) on a strip of 16 columns: the backward
 * of the embeddings and of the folded layer-0 table, written once over the vector
 * vocabulary of simd.h and compiled once per instruction set; embedding.c calls it
 * through induct__group_vec. */
#include "simd.h"

#if INDUCT_VEC
/* ge[tok_n][c] += d[n][c] (and gp[n % T][c] when gp), n in order, c < w <= 16; ge and gp
 * rows have stride ld, d rows stride ldd. */
static ATTR void FN(group16)(float *ge, float *gp, size_t ld, const float *d, size_t ldd,
                             const int32_t *tokens, size_t N, size_t T, size_t w) {
    if (w == 16) {
        for (size_t n = 0; n < N; n++) {
            const float *s = d + n * ldd;
            VF s0 = v_load(s), s1 = v_load(s + 8);
            float *e = ge + (size_t)tokens[n] * ld;
            v_store(e, v_add(v_load(e), s0));
            v_store(e + 8, v_add(v_load(e + 8), s1));
            if (gp) {
                float *p = gp + (n % T) * ld;
                v_store(p, v_add(v_load(p), s0));
                v_store(p + 8, v_add(v_load(p + 8), s1));
            }
        }
        return;
    }
    for (size_t n = 0; n < N; n++) {
        const float *s = d + n * ldd;
        float *e = ge + (size_t)tokens[n] * ld;
        for (size_t c = 0; c < w; c++) e[c] += s[c];
        if (gp) {
            float *p = gp + (n % T) * ld;
            for (size_t c = 0; c < w; c++) p[c] += s[c];
        }
    }
}

const induct__group_vec FN(induct__group) = {FN(group16)};
#endif
