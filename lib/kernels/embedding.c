/* Embeddings: token and positional embeddings and their gradients, and layer 0 folded
 * into the embedding tables (its query, key and value inputs gathered per token and
 * position, their gradients grouped back). */
#include "kernels_internal.h"

#include <string.h>

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

void induct__embed_backward_par(float *dW_E, float *dW_pos, const float *dout,
                                const int32_t *tokens, size_t B, size_t T, size_t D, int nt) {
    /* column blocks of 16: every element still sums its rows in increasing n, as the
     * serial reference induct__embed_backward and induct__pos_backward do (position t's rows are
     * n = b T + t, b increasing) */
    const induct__group_vec *vec = INDUCT__VEC(group);
    size_t nb = (D + 15) / 16;
    if (B * T * D < ((size_t)1 << 16)) nt = 1;
    PFOR
    for (idx blk = 0; blk < (idx)nb; blk++) {
        size_t c0 = (size_t)blk * 16, w = D - c0 < 16 ? D - c0 : 16;
        float *gp = dW_pos ? dW_pos + c0 : NULL;
        vec->group16(dW_E + c0, gp, D, dout + c0, D, tokens, B * T, T, w);
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

void induct__fold_group(float *grp, const float *const d[3], const int pos[3],
                        const int32_t *tokens, size_t B, size_t T, size_t V, size_t HD, int nt) {
    const induct__group_vec *vec = INDUCT__VEC(group);
    size_t ld = 3 * HD, N = B * T;
    memset(grp, 0, (V + T) * ld * sizeof *grp);
    /* column blocks of 16 per thread; every output sums n in increasing order */
    size_t per = (HD + 15) / 16, nb = 3 * per;
    PFOR
    for (idx blk = 0; blk < (idx)nb; blk++) {
        int x = (int)((size_t)blk / per);
        size_t c0 = ((size_t)blk % per) * 16, w = HD - c0 < 16 ? HD - c0 : 16;
        float *ge = grp + x * HD + c0, *gp = pos[x] ? grp + V * ld + x * HD + c0 : NULL;
        vec->group16(ge, gp, ld, d[x] + c0, HD, tokens, N, T, w);
    }
}
