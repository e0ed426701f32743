/* The unembedding and the cross-entropy: logits = x W_U + b_U by blocks of rows that stay
 * in cache, per-token losses in nats, their gradient, and the weight gradient summed over
 * the blocks in a fixed order (the row kernels themselves are xent_vec.c). */
#include "kernels_internal.h"

#include <math.h>
#include <string.h>

/* The loss of a row is log(sum) + (max - logit[target]): the two terms are added in this
 * order so that the max cancels exactly in double before the small log(sum) is added
 * (log(sum) + max first would lose log(sum) entirely once |max| is near 1e17). */
/* One logits row: its max (*mx_out), sum_v exp(l[v] - max) (*s_out) and the loss of
 * `target` in nats, rounded to float as every stored loss is. */
float induct__xent_row(const float *l, size_t V, int32_t target, float *mx_out, double *s_out) {
    const induct__xent_vec *vec = INDUCT__VEC(xent);
    float mx = vec->row_max(l, V);
    double s = vec->sumexp_row(l, V, mx);
    *mx_out = mx;
    *s_out = s;
    return (float)(log(s) + ((double)mx - (double)l[target])); /* the max cancels first */
}

/* One logits row's loss (as induct__xent_row) and its gradient g = (exp(l - max) / sum -
 * onehot(target)) * scale: the exponentials of the sum are stored and then scaled, the
 * same values a second pass exp(l - max) * (scale / sum) would give. g may be l (the
 * gradient then replaces the logits). */
static float xent_row_grad(float *g, const float *l, size_t V, int32_t target, float scale) {
    const induct__xent_vec *vec = INDUCT__VEC(xent);
    float lt = l[target];
    float mx = vec->row_max(l, V);
    double s = vec->sumexp_store(g, l, V, mx);
    float loss = (float)(log(s) + ((double)mx - (double)lt));
    float mul = (float)((double)scale / (double)(float)s);
    vec->scale_row(g, mul, V);
    g[target] -= scale;
    return loss;
}

/* Row blocks of induct__unembed_xent (induct__gemm_block's, over the product's row units:
 * the bits of a row do not depend on the block it is computed in, see
 * induct__gemm_split_rule in gemm.c): a multiple of the thread count of them, the logits
 * of a block within UNEMBED_BLOCK_FLOATS (they are read back from the last-level cache;
 * smaller blocks make OpenBLAS pack W_U more often), every product above the
 * small-matrix limit. */
#define UNEMBED_BLOCK_FLOATS ((size_t)1 << 20)
static int unembed_blocks(size_t N, size_t D, size_t V, size_t unit, int nt) {
    size_t units = (N + unit - 1) / unit, k = UNEMBED_BLOCK_FLOATS / (V * unit);
    if (!k) k = 1;
    if (N * V * D < ((size_t)1 << 20)) return 1; /* one product */
    size_t blocks = (units + k - 1) / k;
    blocks = (blocks + (size_t)nt - 1) / (size_t)nt * (size_t)nt; /* as many per thread */
    if (blocks > units) blocks = units;
    return induct__gemm_blocks_above_limit((int)blocks, units, unit, N, V, D);
}

/* With the weight gradient the row blocks must not depend on the thread count (each
 * block's term is one term of a fixed-order sum): the layout for UNEMBED_GRAD_NT threads,
 * which keeps 1 and 2 threads balanced, with at most N / (2 (D + 1)) blocks, so that
 * their terms (blocks x (D + 1) x V floats) take at most half the memory of the [N, V]
 * gradient they replace. *rows (unless rows is NULL) = the largest block's rows. */
#define UNEMBED_GRAD_NT 2
#define GRAD_SUM_CHUNK 4096 /* induct__unembed_grad_sum's parallel chunks (elements) */
static int unembed_grad_blocks(size_t N, size_t D, size_t V, size_t *rows) {
    size_t unit = induct__gemm_split_rule().unit, units = (N + unit - 1) / unit;
    size_t blocks = (size_t)unembed_blocks(N, D, V, unit, UNEMBED_GRAD_NT);
    size_t most = N / (2 * (D + 1));
    if (blocks > most)
        blocks = most < UNEMBED_GRAD_NT ? 1 : most / UNEMBED_GRAD_NT * UNEMBED_GRAD_NT;
    if (!rows) return (int)blocks;
    *rows = 0;
    for (size_t k = 0; k < blocks; k++) {
        size_t r0, r1;
        induct__gemm_block((int)k, (int)blocks, units, unit, N, &r0, &r1);
        if (r1 - r0 > *rows) *rows = r1 - r0;
    }
    return (int)blocks;
}

/* Whether a gradient pass's blocks are small enough to keep their logits in per-thread
 * scratch (where they stay in cache from block to block) rather than in the logits rows. */
static int unembed_grad_scratch_rows(size_t rows, size_t V) {
    return rows * V <= UNEMBED_BLOCK_FLOATS;
}

/* The weight-gradient scratch: the blocks' terms [blocks][D + 1][V], then per thread a
 * block's [x | 1] [rows][D + 1] and, when they fit, its logits [rows][V]. */
size_t induct__unembed_grad_scratch(size_t N, size_t D, size_t V, int nt) {
    /* the terms take at most max(N / 2, D + 1) V floats and a thread at most N (D + 1 + V):
     * the total is below (nt + 1) (N + D + 1) (D + 1 + V) */
    size_t K1 = D + 1, a = N + K1, b = K1 + V;
    if (N >= SIZE_MAX / 4 || D >= SIZE_MAX / 4 || V >= SIZE_MAX / 4 || b > SIZE_MAX / a ||
        (size_t)nt + 1 > SIZE_MAX / (a * b))
        return SIZE_MAX;
    size_t rows, blocks = (size_t)unembed_grad_blocks(N, D, V, &rows);
    size_t per = rows * K1 + (unembed_grad_scratch_rows(rows, V) ? rows * V : 0);
    return blocks * K1 * V + ((size_t)nt < blocks ? (size_t)nt : blocks) * per;
}

double induct__unembed_xent(float *logits, float *losses, float *dlogits, float *dx,
                            float *wpart, const float *x, const float *W_U, const float *b_U,
                            const int32_t *tokens, size_t B, size_t T, size_t D, size_t V,
                            float scale, size_t only, int nt) {
    size_t N = B * T, unit = induct__gemm_split_rule().unit, units = (N + unit - 1) / unit;
    size_t K1 = D + 1;
    size_t rows = 0;
    int blocks = wpart ? unembed_grad_blocks(N, D, V, &rows) : unembed_blocks(N, D, V, unit, nt);
    int own = wpart && unembed_grad_scratch_rows(rows, V); /* logits in per-thread scratch */
    float *per_thread = wpart ? wpart + (size_t)blocks * K1 * V : NULL;
    size_t per = rows * K1 + (own ? rows * V : 0);
    int grad = dlogits || wpart;
    if (nt > blocks) nt = blocks;
    PFOR
    for (idx k = 0; k < (idx)blocks; k++) {
        size_t r0, r1;
        induct__gemm_block((int)k, blocks, units, unit, N, &r0, &r1);
        float *xa = wpart ? induct__thread_scratch(per_thread, per) : NULL;
        /* the block's logits: the thread's scratch or the logits rows; with wpart its
         * dlogits replace them row by row, else they go to the caller's rows */
        float *lb = own ? xa + rows * K1 : logits + r0 * V;
        float *gb = wpart ? lb : dlogits ? dlogits + r0 * V : NULL;
        induct__prefill_rows(lb, V, NULL, 0, b_U, 0, r1 - r0, V);
        induct__gemm_serial(0, 0, r1 - r0, V, D, 1.0f, x + r0 * D, D, W_U, V, 1.0f, lb, V);
        for (size_t bt = r0; bt < r1; bt++) {
            size_t b = bt / T, p = bt % T;
            const float *l = lb + (bt - r0) * V;
            float *g = grad ? gb + (bt - r0) * V : NULL;
            if (p + 1 == T) { /* no next token: no loss, no gradient */
                if (g) memset(g, 0, V * sizeof *g);
                continue;
            }
            int32_t tgt = tokens[bt + 1];
            float loss;
            if (g && (!only || p + 1 == only)) {
                loss = xent_row_grad(g, l, V, tgt, scale);
            } else {
                float mx;
                double s;
                loss = induct__xent_row(l, V, tgt, &mx, &s);
                if (g) memset(g, 0, V * sizeof *g);
            }
            losses[b * (T - 1) + p] = loss;
        }
        /* the block's gradients while its dlogits are in cache */
        if (grad && dx)
            induct__gemm_serial(0, 1, r1 - r0, D, V, 1.0f, gb, V, W_U, V, 0.0f, dx + r0 * D, D);
        if (wpart) { /* its term of [dW_U ; db_U] = [x | 1]^T dlogits: the column of ones
                      * gives the bias gradient's column sums from the same product */
            for (size_t r = r0; r < r1; r++) {
                memcpy(xa + (r - r0) * K1, x + r * D, D * sizeof *xa);
                xa[(r - r0) * K1 + D] = 1.0f;
            }
            induct__gemm_serial(1, 0, K1, V, r1 - r0, 1.0f, xa, K1, gb, V, 0.0f,
                                wpart + (size_t)k * K1 * V, V);
        }
    }
    double sum = 0.0;
    for (size_t i = 0; i < B * (T - 1); i++) sum += losses[i];
    return sum;
}

void induct__unembed_grad_sum(float *dW, float *dbias, float *wpart, size_t N, size_t D,
                              size_t V, int nt) {
    size_t blocks = (size_t)unembed_grad_blocks(N, D, V, NULL), n = (D + 1) * V;
    /* element i of every term, in block order: dW's rows, then db's */
    size_t chunks = (n + GRAD_SUM_CHUNK - 1) / GRAD_SUM_CHUNK;
    PFOR
    for (idx ch = 0; ch < (idx)chunks; ch++) {
        size_t i0 = (size_t)ch * GRAD_SUM_CHUNK;
        size_t i1 = n - i0 < GRAD_SUM_CHUNK ? n : i0 + GRAD_SUM_CHUNK;
        float *t = wpart; /* block 0's term, summed into in place */
        for (size_t k = 1; k < blocks; k++) {
            const float *u = wpart + k * n;
            for (size_t i = i0; i < i1; i++) t[i] += u[i];
        }
        for (size_t i = i0; i < i1; i++) {
            if (i < D * V) dW[i] += t[i];
            else if (dbias) dbias[i - D * V] += t[i];
        }
    }
}
