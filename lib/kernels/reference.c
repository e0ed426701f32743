/* Reference kernels (reference.h): the plain forms the tests compare the library's
 * kernels with, and the instruction-set switches the tests turn. Built into a static
 * library that only the tests link, never into libinduct. */
#include "reference.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "kernels_internal.h"

void induct__embed_backward(float *dW_E, float *dW_pos, const float *dout, const int32_t *tokens,
                            size_t B, size_t T, size_t D) {
    for (size_t n = 0; n < B * T; n++) {
        float *g = dW_E + (size_t)tokens[n] * D;
        const float *d = dout + n * D;
        for (size_t i = 0; i < D; i++) g[i] += d[i];
    }
    if (dW_pos) induct__pos_backward(dW_pos, dout, B, T, D);
}

void induct__layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *mean, const float *rstd,
                                const float *w, size_t N, size_t D, int nt) {
    induct__layernorm_backward_hooked(dinp, dw, db, dout, inp, mean, rstd, w, NULL, NULL, N, D,
                                      nt);
}

void induct__softmax_row(float *out, const float *scores, size_t n) {
    float mx = scores[0];
    for (size_t i = 1; i < n; i++)
        if (scores[i] > mx) mx = scores[i];
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        /* the difference of two finite floats may round to -inf: exp gives 0 */
        float e = expf(scores[i] - mx);
        out[i] = e;
        sum += e;
    }
    /* sum >= 1 (the max contributes exp(0) = 1), so the division is safe */
    float inv = (float)(1.0 / sum);
    for (size_t i = 0; i < n; i++) out[i] *= inv;
}

void induct__attention_forward(float *z, float *att, const float *q, const float *k,
                               const float *v, size_t B, size_t T, size_t H, size_t dh, int nt) {
    size_t HD = H * dh;
    float scale = 1.0f / sqrtf((float)dh);
    PFOR
    for (idx bh = 0; bh < (idx)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H;
        const float *qb = q + b * T * HD + h * dh;
        const float *kb = k + b * T * HD + h * dh;
        const float *vb = v + b * T * HD + h * dh;
        float *A = att + ((size_t)b * H + h) * T * T;
        /* scores for all (p, k), then the causal part only is used */
        induct__gemm_serial(0, 1, T, T, dh, scale, qb, HD, kb, HD, 0.0f, A, T);
        for (size_t p = 0; p < T; p++) {
            float *row = A + p * T;
            induct__softmax_row(row, row, p + 1);
            memset(row + p + 1, 0, (T - p - 1) * sizeof *row);
        }
        induct__gemm_serial(0, 0, T, dh, T, 1.0f, A, T, vb, HD, 0.0f, z + b * T * HD + h * dh, HD);
    }
}

void induct__attention_backward(float *dq, float *dk, float *dv, float *datt, const float *dz,
                                const float *q, const float *k, const float *v, const float *att,
                                size_t B, size_t T, size_t H, size_t dh, int nt) {
    size_t HD = H * dh;
    float scale = 1.0f / sqrtf((float)dh);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *dA = datt + (size_t)tid * T * T;
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (idx bh = 0; bh < (idx)(B * H); bh++) {
            size_t b = (size_t)bh / H, h = (size_t)bh % H;
            size_t off = b * T * HD + h * dh;
            const float *A = att + ((size_t)b * H + h) * T * T;
            /* dA = dz v^T */
            induct__gemm_serial(0, 1, T, T, dh, 1.0f, dz + off, HD, v + off, HD, 0.0f, dA, T);
            /* dv = A^T dz */
            induct__gemm_serial(1, 0, T, dh, T, 1.0f, A, T, dz + off, HD, 0.0f, dv + off, HD);
            /* softmax backward, causal part; masked entries become 0 */
            for (size_t p = 0; p < T; p++) {
                const float *a = A + p * T;
                float *g = dA + p * T;
                double s = 0.0;
                for (size_t j = 0; j <= p; j++) s += (double)g[j] * a[j];
                float fs = (float)s;
                for (size_t j = 0; j <= p; j++) g[j] = a[j] * (g[j] - fs) * scale;
                for (size_t j = p + 1; j < T; j++) g[j] = 0.0f;
            }
            /* dq = dS k ; dk = dS^T q */
            induct__gemm_serial(0, 0, T, dh, T, 1.0f, dA, T, k + off, HD, 0.0f, dq + off, HD);
            induct__gemm_serial(1, 0, T, dh, T, 1.0f, dA, T, q + off, HD, 0.0f, dk + off, HD);
        }
    }
}

#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */

void induct__gelu_forward(float *out, const float *inp, size_t n, int nt) {
    PFOR
    for (idx i = 0; i < (idx)n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(GELU_C * (x + 0.044715f * x * x * x)));
    }
}

void induct__gelu_backward(float *dinp, const float *inp, const float *dout, size_t n, int nt) {
    PFOR
    for (idx i = 0; i < (idx)n; i++) {
        float x = inp[i];
        float u = GELU_C * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float d = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_C * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = dout[i] * d;
    }
}

double induct__xent_forward(float *losses, const float *logits, const int32_t *tokens, size_t B,
                            size_t T, size_t V, int nt) {
    PFOR
    for (idx bt = 0; bt < (idx)(B * (T - 1)); bt++) {
        size_t b = (size_t)bt / (T - 1), p = (size_t)bt % (T - 1);
        const float *l = logits + (b * T + p) * V;
        float mx = l[0];
        for (size_t v = 1; v < V; v++)
            if (l[v] > mx) mx = l[v];
        double s = 0.0;
        for (size_t v = 0; v < V; v++) s += expf(l[v] - mx);
        int32_t tgt = tokens[b * T + p + 1];
        losses[bt] = (float)(log(s) + ((double)mx - (double)l[tgt])); /* max cancels first */
    }
    double sum = 0.0;
    for (size_t i = 0; i < B * (T - 1); i++) sum += losses[i];
    return sum;
}

void induct__xent_backward(float *dlogits, const float *logits, const int32_t *tokens, size_t B,
                           size_t T, size_t V, float scale, int nt) {
    PFOR
    for (idx bt = 0; bt < (idx)(B * T); bt++) {
        size_t b = (size_t)bt / T, p = (size_t)bt % T;
        float *g = dlogits + (size_t)bt * V;
        if (p == T - 1) {
            memset(g, 0, V * sizeof *g);
            continue;
        }
        const float *l = logits + (size_t)bt * V;
        float mx = l[0];
        for (size_t v = 1; v < V; v++)
            if (l[v] > mx) mx = l[v];
        double s = 0.0;
        for (size_t v = 0; v < V; v++) s += expf(l[v] - mx);
        double inv = 1.0 / s;
        float finv = (float)inv * scale;
        for (size_t v = 0; v < V; v++) g[v] = expf(l[v] - mx) * finv;
        g[tokens[b * T + p + 1]] -= scale;
    }
}

void induct__simd_enable(int on) { atomic_store(&induct__simd_allowed, on ? 1 : 0); }

void induct__simd_avx512_enable(int on) { atomic_store(&induct__avx512_allowed, on ? 1 : 0); }
