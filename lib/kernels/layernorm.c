/* LayerNorm over the last dimension (eps 1e-5, biased variance) and its backward, also
 * through a hook that overwrote the normalised values (hook_normalized). */
#include "kernels_internal.h"

#include <math.h>

/* LayerNorm rows are processed LN_ROWS at a time: each row's double sums still run over
 * its elements in order (the same bits as one row at a time), but the rows' dependency
 * chains are independent, so they overlap instead of waiting on each addition. A group
 * past the last row repeats the last row (computed, not written). */
#define LN_ROWS 4

/* Row n0 + r of a group, clamped to the last row N - 1. */
static size_t ln_row(size_t n0, size_t r, size_t N) { return n0 + r < N ? n0 + r : N - 1; }

/* The rows n0 .. n0+LN_ROWS-1 (clamped to N-1) of x [N][D]. */
static void ln_rows(const float *rows[LN_ROWS], const float *x, size_t n0, size_t N, size_t D) {
    for (size_t r = 0; r < LN_ROWS; r++) rows[r] = x + ln_row(n0, r, N) * D;
}

void induct__layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                               const float *w, const float *b, size_t N, size_t D, int nt) {
    PFOR
    for (idx g = 0; g < (idx)((N + LN_ROWS - 1) / LN_ROWS); g++) {
        size_t n0 = (size_t)g * LN_ROWS;
        const float *x[LN_ROWS];
        ln_rows(x, inp, n0, N, D);
        double s[LN_ROWS] = {0}, v[LN_ROWS] = {0}, mu[LN_ROWS];
        for (size_t i = 0; i < D; i++)
            for (size_t r = 0; r < LN_ROWS; r++) s[r] += x[r][i];
        for (size_t r = 0; r < LN_ROWS; r++) mu[r] = s[r] / (double)D;
        for (size_t i = 0; i < D; i++)
            for (size_t r = 0; r < LN_ROWS; r++) {
                double d = x[r][i] - mu[r];
                v[r] += d * d;
            }
        for (size_t r = 0; r < LN_ROWS && n0 + r < N; r++) {
            size_t n = n0 + r;
            float rs = (float)(1.0 / sqrt(v[r] / (double)D + 1e-5));
            float m = (float)mu[r];
            float *o = out + n * D;
            for (size_t i = 0; i < D; i++) o[i] = (x[r][i] - m) * rs * w[i] + b[i];
            mean[n] = m;
            rstd[n] = rs;
        }
    }
}

/* di += (g w - a1 - xhat a2) r for one row (masked elements: g w taken as 0); the two
 * loops let the plain one vectorise. */
static void ln_dinp_row(float *restrict di, const float *restrict x, const float *restrict g,
                        const float *restrict w, const uint8_t *restrict mk, float m, float r,
                        double a1, double a2, size_t D) {
    if (mk) {
        for (size_t i = 0; i < D; i++) {
            double xh = (x[i] - m) * r;
            double gw = mk[i] ? 0.0 : (double)g[i] * w[i];
            di[i] += (float)((gw - a1 - xh * a2) * r);
        }
        return;
    }
    for (size_t i = 0; i < D; i++) {
        double xh = (x[i] - m) * r;
        double gw = (double)g[i] * w[i];
        di[i] += (float)((gw - a1 - xh * a2) * r);
    }
}

/* Columns of the parameter gradients summed side by side (each over the rows in order). */
#define LN_COLS 8

/* With mask (a hook wrote hook_normalized): written elements are constants, so no
 * gradient reaches the normalisation through them, and the gain trains on what the hook
 * left (xhat). Without (NULL, NULL): the plain backward, the same operations in the
 * same order. */
void induct__layernorm_backward_hooked(float *dinp, float *dw, float *db, const float *dout,
                                       const float *inp, const float *mean, const float *rstd,
                                       const float *w, const float *xhat, const uint8_t *mask,
                                       size_t N, size_t D, int nt) {
    PFOR
    for (idx gi = 0; gi < (idx)(dinp ? (N + LN_ROWS - 1) / LN_ROWS : 0); gi++) {
        size_t n0 = (size_t)gi * LN_ROWS;
        const float *x[LN_ROWS], *g[LN_ROWS];
        ln_rows(x, inp, n0, N, D);
        ln_rows(g, dout, n0, N, D);
        float m[LN_ROWS], r[LN_ROWS];
        double s1[LN_ROWS] = {0}, s2[LN_ROWS] = {0};
        for (size_t k = 0; k < LN_ROWS; k++) {
            m[k] = mean[ln_row(n0, k, N)];
            r[k] = rstd[ln_row(n0, k, N)];
        }
        if (mask) {
            const uint8_t *mk[LN_ROWS];
            for (size_t k = 0; k < LN_ROWS; k++) mk[k] = mask + ln_row(n0, k, N) * D;
            for (size_t i = 0; i < D; i++)
                for (size_t k = 0; k < LN_ROWS; k++) {
                    if (mk[k][i]) continue;
                    double xh = (x[k][i] - m[k]) * r[k];
                    double gw = (double)g[k][i] * w[i];
                    s1[k] += gw;
                    s2[k] += gw * xh;
                }
        } else {
            for (size_t i = 0; i < D; i++)
                for (size_t k = 0; k < LN_ROWS; k++) {
                    double xh = (x[k][i] - m[k]) * r[k];
                    double gw = (double)g[k][i] * w[i];
                    s1[k] += gw;
                    s2[k] += gw * xh;
                }
        }
        for (size_t k = 0; k < LN_ROWS && n0 + k < N; k++)
            ln_dinp_row(dinp + (n0 + k) * D, x[k], g[k], w, mask ? mask + (n0 + k) * D : NULL,
                        m[k], r[k], s1[k] / (double)D, s2[k] / (double)D, D);
    }
    /* parameter gradients: parallel over groups of columns, rows summed in order */
    PFOR
    for (idx gc = 0; gc < (idx)((D + LN_COLS - 1) / LN_COLS); gc++) {
        size_t i0 = (size_t)gc * LN_COLS, nc = D - i0 < LN_COLS ? D - i0 : LN_COLS;
        double sw[LN_COLS] = {0}, sb[LN_COLS] = {0};
        for (size_t n = 0; n < N; n++) {
            const float *gr = dout + n * D + i0;
            if (xhat) {
                const float *xr = xhat + n * D + i0;
                for (size_t j = 0; j < nc; j++) {
                    sw[j] += (double)gr[j] * xr[j];
                    sb[j] += gr[j];
                }
            } else {
                const float *xr = inp + n * D + i0;
                float mn = mean[n], rs = rstd[n];
                for (size_t j = 0; j < nc; j++) {
                    float xh = (xr[j] - mn) * rs;
                    sw[j] += (double)gr[j] * xh;
                    sb[j] += gr[j];
                }
            }
        }
        for (size_t j = 0; j < nc; j++) {
            dw[i0 + j] += (float)sw[j];
            db[i0 + j] += (float)sb[j];
        }
    }
}

/* The input gradient from the gradient at the normalised values (no gain): per row,
 * dinp += (g - mean(g) - xhat mean(g xhat)) rstd over the unmasked elements (masked ones
 * taken as g = 0), xhat = (x - mean) rstd of the input. Rows in parallel, each row's
 * sums in double over its elements in order. */
void induct__layernorm_backward_normalized(float *dinp, const float *dnorm, const float *inp,
                                           const float *mean, const float *rstd,
                                           const uint8_t *mask, size_t N, size_t D, int nt) {
    PFOR
    for (idx n = 0; n < (idx)N; n++) {
        const float *x = inp + (size_t)n * D, *g = dnorm + (size_t)n * D;
        const uint8_t *mk = mask ? mask + (size_t)n * D : NULL;
        float m = mean[n], r = rstd[n];
        double s1 = 0.0, s2 = 0.0;
        for (size_t i = 0; i < D; i++) {
            if (mk && mk[i]) continue;
            double xh = (x[i] - m) * r;
            s1 += g[i];
            s2 += (double)g[i] * xh;
        }
        double a1 = s1 / (double)D, a2 = s2 / (double)D;
        float *di = dinp + (size_t)n * D;
        for (size_t i = 0; i < D; i++) {
            double xh = (x[i] - m) * r;
            double gi = mk && mk[i] ? 0.0 : (double)g[i];
            di[i] += (float)((gi - a1 - xh * a2) * r);
        }
    }
}
