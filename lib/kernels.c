/* Transformer kernels (see kernels.h). Parallel loops cover independent outputs
 * only, with a fixed summation order per output, so results do not depend on
 * the thread count. */
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef _OPENMP
#define PFOR _Pragma("omp parallel for num_threads(nt) schedule(static) if (nt > 1)")
#else
#define PFOR
#endif

typedef ptrdiff_t idx;

static void gemm1(int transA, int transB, size_t M, size_t N, size_t K, float alpha,
                  const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                  size_t ldc) {
    if (M == 0 || N == 0) return;
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K, alpha, A, (int)lda,
                B, (int)ldb, beta, C, (int)ldc);
}

/* One single-threaded sgemm. libinduct links OpenBLAS's OpenMP build, which runs
 * single-threaded inside an active parallel region and otherwise sizes its own
 * team from omp_get_max_threads(). Outside our regions we therefore call it from
 * a one-thread region whose nthreads ICV is set to 1: that ICV belongs to the
 * region's implicit task and disappears with it, so the caller's OpenMP settings
 * are never changed. All parallelism is ours (induct__gemm below). */
static void gemm_serial(int transA, int transB, size_t M, size_t N, size_t K, float alpha,
                        const float *A, size_t lda, const float *B, size_t ldb, float beta,
                        float *C, size_t ldc) {
#ifdef _OPENMP
    if (!omp_in_parallel()) {
#pragma omp parallel num_threads(1)
        {
            omp_set_num_threads(1);
            gemm1(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        }
        return;
    }
#endif
    gemm1(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Split the rows of C (or its columns when it has few rows) into one block per
 * thread; each element is still computed by one sgemm call with the same K
 * order, so the result does not depend on the thread count. */
void induct__gemm(int nt, int transA, int transB, size_t M, size_t N, size_t K, float alpha,
                  const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                  size_t ldc) {
    if (nt <= 1 || (M < 64 && N < 64) || M * N * K < ((size_t)1 << 18)) {
        gemm_serial(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int by_rows = M >= N || M >= 64 * (size_t)nt;
    size_t total = by_rows ? M : N;
    size_t unit = 16; /* keep blocks multiples of the micro-kernel width */
    size_t chunks = (total + unit - 1) / unit;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nt) schedule(static)
#endif
    for (int t = 0; t < nt; t++) {
        size_t c0 = chunks * (size_t)t / (size_t)nt, c1 = chunks * (size_t)(t + 1) / (size_t)nt;
        size_t r0 = c0 * unit, r1 = c1 * unit < total ? c1 * unit : total;
        if (r0 >= r1) continue;
        if (by_rows) {
            const float *Ab = transA ? A + r0 : A + r0 * lda;
            gemm_serial(transA, transB, r1 - r0, N, K, alpha, Ab, lda, B, ldb, beta, C + r0 * ldc, ldc);
        } else {
            const float *Bb = transB ? B + r0 * ldb : B + r0;
            gemm_serial(transA, transB, M, r1 - r0, K, alpha, A, lda, Bb, ldb, beta, C + r0, ldc);
        }
    }
}

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

void induct__embed_backward(float *dW_E, float *dW_pos, const float *dout, const int32_t *tokens,
                            size_t B, size_t T, size_t D) {
    for (size_t n = 0; n < B * T; n++) {
        float *g = dW_E + (size_t)tokens[n] * D;
        const float *d = dout + n * D;
        for (size_t i = 0; i < D; i++) g[i] += d[i];
    }
    if (dW_pos) induct__pos_backward(dW_pos, dout, B, T, D);
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

void induct__layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                               const float *w, const float *b, size_t N, size_t D, int nt) {
    PFOR
    for (idx n = 0; n < (idx)N; n++) {
        const float *x = inp + (size_t)n * D;
        double s = 0.0;
        for (size_t i = 0; i < D; i++) s += x[i];
        double mu = s / (double)D;
        double v = 0.0;
        for (size_t i = 0; i < D; i++) {
            double d = x[i] - mu;
            v += d * d;
        }
        v /= (double)D;
        float r = (float)(1.0 / sqrt(v + 1e-5));
        float m = (float)mu;
        float *o = out + (size_t)n * D;
        for (size_t i = 0; i < D; i++) o[i] = (x[i] - m) * r * w[i] + b[i];
        mean[n] = m;
        rstd[n] = r;
    }
}

void induct__layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *mean, const float *rstd,
                                const float *w, size_t N, size_t D, int nt) {
    PFOR
    for (idx n = 0; n < (idx)N; n++) {
        const float *x = inp + (size_t)n * D;
        const float *g = dout + (size_t)n * D;
        float m = mean[n], r = rstd[n];
        double s1 = 0.0, s2 = 0.0;
        for (size_t i = 0; i < D; i++) {
            double xh = (x[i] - m) * r;
            double gw = (double)g[i] * w[i];
            s1 += gw;
            s2 += gw * xh;
        }
        s1 /= (double)D;
        s2 /= (double)D;
        float *di = dinp + (size_t)n * D;
        for (size_t i = 0; i < D; i++) {
            double xh = (x[i] - m) * r;
            double gw = (double)g[i] * w[i];
            di[i] += (float)((gw - s1 - xh * s2) * r);
        }
    }
    /* parameter gradients: parallel over columns, rows summed in order */
    PFOR
    for (idx i = 0; i < (idx)D; i++) {
        double sw = 0.0, sb = 0.0;
        for (size_t n = 0; n < N; n++) {
            float g = dout[n * D + (size_t)i];
            float xh = (inp[n * D + (size_t)i] - mean[n]) * rstd[n];
            sw += (double)g * xh;
            sb += g;
        }
        dw[i] += (float)sw;
        db[i] += (float)sb;
    }
}

void induct__linear_forward(float *out, const float *inp, const float *W, const float *bias,
                            size_t N, size_t K, size_t C, int nt) {
    if (bias) {
        for (size_t n = 0; n < N; n++) memcpy(out + n * C, bias, C * sizeof *out);
        induct__gemm(nt, 0, 0, N, C, K, 1.0f, inp, K, W, C, 1.0f, out, C);
    } else {
        induct__gemm(nt, 0, 0, N, C, K, 1.0f, inp, K, W, C, 0.0f, out, C);
    }
}

void induct__colsum(float *dbias, const float *dout, size_t N, size_t C, size_t ld, int nt) {
    /* rows in order, columns vectorised; column blocks per thread */
    size_t nb = (C + 63) / 64;
    PFOR
    for (idx blk = 0; blk < (idx)nb; blk++) {
        size_t c0 = (size_t)blk * 64, c1 = c0 + 64 < C ? c0 + 64 : C;
        double acc[64] = {0};
        for (size_t n = 0; n < N; n++) {
            const float *row = dout + n * ld;
            for (size_t c = c0; c < c1; c++) acc[c - c0] += row[c];
        }
        for (size_t c = c0; c < c1; c++) dbias[c] += (float)acc[c - c0];
    }
}

void induct__linear_backward(float *dinp, float *dW, float *dbias, const float *dout,
                             const float *inp, const float *W, size_t N, size_t K, size_t C,
                             int nt) {
    if (dinp) induct__gemm(nt, 0, 1, N, K, C, 1.0f, dout, C, W, C, 1.0f, dinp, K);
    induct__gemm(nt, 1, 0, K, C, N, 1.0f, inp, K, dout, C, 1.0f, dW, C);
    if (dbias) induct__colsum(dbias, dout, N, C, C, nt);
}

static inline float sigmoidf_(float a) { return 1.0f / (1.0f + expf(-a)); }

void induct__smear_forward(float *k, const float *k_raw, const float *alpha, size_t B, size_t T,
                           size_t H, size_t dh, int nt) {
    size_t HD = H * dh;
    PFOR
    for (idx bt = 0; bt < (idx)(B * T); bt++) {
        size_t t = (size_t)bt % T;
        float *o = k + (size_t)bt * HD;
        const float *cur = k_raw + (size_t)bt * HD;
        if (t == 0) {
            memcpy(o, cur, HD * sizeof *o);
            continue;
        }
        const float *prev = cur - HD;
        for (size_t h = 0; h < H; h++) {
            float s = sigmoidf_(alpha[h]);
            for (size_t j = 0; j < dh; j++)
                o[h * dh + j] = s * cur[h * dh + j] + (1.0f - s) * prev[h * dh + j];
        }
    }
}

void induct__smear_backward(float *dk_raw, float *dalpha_bh, const float *dk, const float *k_raw,
                            const float *alpha, size_t B, size_t T, size_t H, size_t dh, int nt) {
    size_t HD = H * dh;
    PFOR
    for (idx bh = 0; bh < (idx)(B * H); bh++) {
        size_t b = (size_t)bh / H, h = (size_t)bh % H;
        float s = sigmoidf_(alpha[h]);
        double da = 0.0;
        for (size_t t = 0; t < T; t++) {
            size_t row = (b * T + t) * HD + h * dh;
            const float *g = dk + row;
            float *o = dk_raw + row;
            const float *gn = (t + 1 < T) ? dk + row + HD : NULL;
            for (size_t j = 0; j < dh; j++) {
                float v = (t == 0) ? g[j] : s * g[j];
                if (gn) v += (1.0f - s) * gn[j];
                o[j] = v;
            }
            if (t > 0) {
                const float *cur = k_raw + row, *prev = k_raw + row - HD;
                for (size_t j = 0; j < dh; j++) da += (double)g[j] * (cur[j] - prev[j]);
            }
        }
        dalpha_bh[bh] = (float)(da * s * (1.0f - s));
    }
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
        gemm_serial(0, 1, T, T, dh, scale, qb, HD, kb, HD, 0.0f, A, T);
        for (size_t p = 0; p < T; p++) {
            float *row = A + p * T;
            induct__softmax_row(row, row, p + 1);
            memset(row + p + 1, 0, (T - p - 1) * sizeof *row);
        }
        gemm_serial(0, 0, T, dh, T, 1.0f, A, T, vb, HD, 0.0f, z + b * T * HD + h * dh, HD);
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
            gemm_serial(0, 1, T, T, dh, 1.0f, dz + off, HD, v + off, HD, 0.0f, dA, T);
            /* dv = A^T dz */
            gemm_serial(1, 0, T, dh, T, 1.0f, A, T, dz + off, HD, 0.0f, dv + off, HD);
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
            gemm_serial(0, 0, T, dh, T, 1.0f, dA, T, k + off, HD, 0.0f, dq + off, HD);
            gemm_serial(1, 0, T, dh, T, 1.0f, dA, T, q + off, HD, 0.0f, dk + off, HD);
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
        losses[bt] = (float)(log(s) + (double)mx - (double)l[tgt]);
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

void induct__add_inplace(float *a, const float *b, size_t n, int nt) {
    PFOR
    for (idx i = 0; i < (idx)n; i++) a[i] += b[i];
}
