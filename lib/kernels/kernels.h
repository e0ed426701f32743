/* lib/kernels: the transformer's kernels, pure functions with explicit shapes that
 * allocate nothing, and the rules that keep their results independent of the thread
 * count. Backward kernels ACCUMULATE (+=) into parameter gradients and into input
 * gradients unless stated otherwise. All arrays row-major. N = B*T rows. Private: never
 * installed. Below the model, analysis and training wings, above core (whose errors
 * linalg.c reports); this header itself needs nothing but the C library.
 * Every kernel family has its file: gemm.c (matrix products), linear.c, embedding.c,
 * layernorm.c, attention.c, unembed.c (the unembedding and the cross-entropy), gelu.c,
 * adamw.c, linalg.c (LAPACK), simd.c (which instruction set runs); the vector code of a
 * family is its *_vec.c, compiled once per instruction set (simd.h). The reference kernels
 * the tests compare with are reference.h, outside the library. */
#ifndef INDUCT_KERNELS_H
#define INDUCT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* ---- matrix products (gemm.c) ------------------------------------------------------ */
/* The OpenBLAS build the process uses (see gemm.c); the first call settles its
 * threading (the pthread build is set to one thread). Any thread may call it. With the
 * portable product (INDUCT_PORTABLE_GEMM) there is no BLAS: INDUCT__BLAS_OPENMP, whose
 * rules (any thread may call, no pool of its own) are the portable product's. */
enum { INDUCT__BLAS_UNKNOWN = 0, INDUCT__BLAS_SEQUENTIAL, INDUCT__BLAS_PTHREAD, INDUCT__BLAS_OPENMP };
int induct__blas_mode(void);

/* C[M,N] = alpha * op(A) op(B) + beta * C, row-major, through CBLAS (or, when built with
 * -Dgemm=portable, INDUCT_PORTABLE_GEMM, through induct__gemm_portable). */
void induct__gemm(int nt, int transA, int transB, size_t M, size_t N, size_t K, float alpha,
                  const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                  size_t ldc);
/* Two independent products (their outputs do not overlap). With two threads each runs
 * whole on its own thread, which balances products whose rows split unevenly or not at
 * all (a d_model x d_model weight gradient); otherwise one after the other, each split
 * over nt threads. The same bits either way (induct__gemm's splits keep them). */
typedef struct induct__gemm_args {
    int transA, transB;
    size_t M, N, K;
    float alpha;
    const float *A;
    size_t lda;
    const float *B;
    size_t ldb;
    float beta;
    float *C;
    size_t ldc;
} induct__gemm_args;
void induct__gemm2(int nt, const induct__gemm_args *x, const induct__gemm_args *y);

/* One single-threaded product, sgemm or dgemm: C[M,N] = alpha op(A) op(B) + beta C,
 * row-major, under the one serial rule of every BLAS and LAPACK call of the library
 * (gemm.c): outside a parallel region in a one-thread region (OpenBLAS's OpenMP build
 * then starts no team of its own, and the caller's OpenMP settings are untouched), inside
 * one directly, and serialised where the BLAS is the sequential build. The same bits for
 * any thread count. M or N 0: nothing. */
void induct__gemm_serial(int transA, int transB, size_t M, size_t N, size_t K, float alpha,
                         const float *A, size_t lda, const float *B, size_t ldb, float beta,
                         float *C, size_t ldc);
void induct__dgemm_serial(int transA, int transB, size_t M, size_t N, size_t K, double alpha,
                          const double *A, size_t lda, const double *B, size_t ldb, double beta,
                          double *C, size_t ldc);

/* The portable product (gemm_portable.c): same contract as one single-threaded sgemm /
 * dgemm call, plain C loops written for the vectoriser; always compiled (tests compare
 * it with CBLAS), the library's path only with INDUCT_PORTABLE_GEMM. */
void induct__gemm_portable(int transA, int transB, size_t M, size_t N, size_t K, float alpha,
                           const float *A, size_t lda, const float *B, size_t ldb, float beta,
                           float *C, size_t ldc);
void induct__dgemm_portable(int transA, int transB, size_t M, size_t N, size_t K, double alpha,
                            const double *A, size_t lda, const double *B, size_t ldb,
                            double beta, double *C, size_t ldc);

/* C[M,N] = inp[M,N] + bias[N] + A[M,K] B[K,N] (inp may be NULL: C = bias + A B), rows
 * of C, inp, A with strides ldc, ldi, lda; bias added before the product (beta = 1). */
void induct__gemm_bias(int nt, size_t M, size_t N, size_t K, const float *A, size_t lda,
                       const float *B, size_t ldb, float *C, size_t ldc, const float *inp,
                       size_t ldi, const float *bias);
/* Rows rows[0 .. n) (< M, any order) of the M-row product induct__gemm_bias(nt, M, N, K,
 * A, lda, B, ldb, C, ldc, inp, ldi, bias) (bias not NULL), with the bits the whole call
 * gives them. Other rows of A and inp are read, and C's other rows written (with what
 * their inputs give), only when the gathered product would have more than half the
 * whole one's rows: then the whole product is computed. scratch:
 * induct__gemm_bias_rows_scratch(M, N, K, rows, n) floats (0 in that case; else rows of
 * K + N floats, at most M / 2 of them). */
void induct__gemm_bias_rows(int nt, size_t M, size_t N, size_t K, const float *A, size_t lda,
                            const float *B, size_t ldb, float *C, size_t ldc, const float *inp,
                            size_t ldi, const float *bias, const size_t *rows, size_t n,
                            float *scratch);
size_t induct__gemm_bias_rows_scratch(size_t M, size_t N, size_t K, const size_t *rows,
                                      size_t n);

/* ---- linear layers (linear.c) ------------------------------------------------------ */
/* out[N,C] = inp[N,K] @ W[K,C] + bias[C] (bias may be NULL). */
void induct__linear_forward(float *out, const float *inp, const float *W, const float *bias,
                            size_t N, size_t K, size_t C, int nt);
/* dinp[N,K] += dout @ W^T (dinp may be NULL); dW[K,C] += inp^T dout; dbias[C] += colsum.
 * scratch: induct__linear_backward_scratch(N, K, C) floats (0: may be NULL). */
void induct__linear_backward(float *dinp, float *dW, float *dbias, const float *dout,
                             const float *inp, const float *W, size_t N, size_t K, size_t C,
                             float *scratch, int nt);
size_t induct__linear_backward_scratch(size_t N, size_t K, size_t C);
/* dbias[C] += column sums of dout[N, ld] (first C columns). */
void induct__colsum(float *dbias, const float *dout, size_t N, size_t C, size_t ld, int nt);

/* The per-head outputs res[n][h][:] = z[n][h*dh .. +dh] W_O[h] ([N][H][D], rows of z with
 * stride ldz; W_O [H][dh][D]), no bias: TransformerLens's hook_result. One sgemm per
 * block of rows and head; the blocks do not depend on nt (the same bits for any thread
 * count). */
void induct__head_results(int nt, size_t N, size_t H, size_t dh, size_t D, const float *z,
                          size_t ldz, const float *W_O, float *res);

/* a[i] += b[i] */
void induct__add_inplace(float *a, const float *b, size_t n, int nt);

/* x[0..n) = 0, in parallel chunks. */
void induct__zero(float *x, size_t n, int nt);

/* ---- embeddings (embedding.c) ------------------------------------------------------ */
/* out[N,D] = W_E[tokens] (+ W_pos[t] when W_pos != NULL). */
void induct__embed_forward(float *out, const int32_t *tokens, const float *W_E,
                           const float *W_pos, size_t B, size_t T, size_t D, int nt);

/* out[t-rows] = inp + W_pos[t]: add positions row-wise (B sequences of T rows). */
void induct__add_pos(float *out, const float *inp, const float *W_pos, size_t B, size_t T,
                     size_t D, int nt);
/* dW_pos[t] += sum_b dout[b,t]. */
void induct__pos_backward(float *dW_pos, const float *dout, size_t B, size_t T, size_t D);
/* dW_E[tok] += dout; dW_pos[t] += sum_b dout (when dW_pos != NULL), each element's rows
 * summed in increasing n; parallel over column blocks. */
void induct__embed_backward_par(float *dW_E, float *dW_pos, const float *dout,
                                const int32_t *tokens, size_t B, size_t T, size_t D, int nt);

/* Layer 0 folded into the embeddings. tab [V + T][3*HD]: rows 0..V-1 hold W_E W_X, rows
 * V.. hold W_pos W_X, X = Q, K, V at columns x*HD. out[x][n] = (tab[tok_n][x] +
 * tab[V + t_n][x] when pos[x]) + bias[x], n = b*T + t, rows of HD floats. */
void induct__fold_gather(float *const out[3], const float *const bias[3], const int pos[3],
                         const float *tab, const int32_t *tokens, size_t B, size_t T, size_t V,
                         size_t HD, int nt);
/* grp [V + T][3*HD] = (overwrite) per-token sums of d[x] (rows 0..V-1) and, when pos[x],
 * per-position sums (rows V..V+T-1; else left 0); n summed in increasing order. */
void induct__fold_group(float *grp, const float *const d[3], const int pos[3],
                        const int32_t *tokens, size_t B, size_t T, size_t V, size_t HD, int nt);

/* ---- LayerNorm (layernorm.c) -------------------------------------------------------- */
/* LayerNorm over the last dim, eps 1e-5, biased variance. */
void induct__layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                               const float *w, const float *b, size_t N, size_t D, int nt);
/* The backward of a LayerNorm whose normalised output xhat = (x - mean) * rstd a hook
 * overwrote where mask[n*D+i] is set, the layer's output being xhat_hooked * w + b:
 * dw += sum_n dout * xhat_hooked (the values the hook left, `xhat`), db += sum_n dout;
 * dinp += the unhooked LayerNorm's backward of d xhat = dout * w, set to 0 where the
 * hook wrote (those entries are constants). */
void induct__layernorm_backward_hooked(float *dinp, float *dw, float *db, const float *dout,
                                       const float *inp, const float *mean, const float *rstd,
                                       const float *w, const float *xhat, const uint8_t *mask,
                                       size_t N, size_t D, int nt);
/* (induct__layernorm_backward_hooked with dinp NULL computes dw and db only.) */
/* The input gradient of a LayerNorm from dnorm, the gradient at its normalised values
 * xhat = (x - mean) * rstd (before the gain): dinp += (g - mean(g) - xhat mean(g xhat))
 * * rstd per row, with g = dnorm, taken as 0 where mask[n*D+i] is set (NULL: nowhere).
 * For a backward pass whose gradient at hook_normalized a gradient hook changed. */
void induct__layernorm_backward_normalized(float *dinp, const float *dnorm, const float *inp,
                                           const float *mean, const float *rstd,
                                           const uint8_t *mask, size_t N, size_t D, int nt);

/* ---- attention (attention.c) -------------------------------------------------------- */
/* Smeared keys (ICL paper): k[j] = s k_raw[j] + (1-s) k_raw[j-1] for j >= 1, s = sigmoid(alpha[h]).
 * k, k_raw: [B,T,H,dh]. */
void induct__smear_forward(float *k, const float *k_raw, const float *alpha, size_t B, size_t T,
                           size_t H, size_t dh, int nt);
/* dk_raw = (overwrite) ..., dalpha_bh[B*H] = (overwrite) per (b,h) partial sums of dalpha. */
void induct__smear_backward(float *dk_raw, float *dalpha_bh, const float *dk, const float *k_raw,
                            const float *alpha, size_t B, size_t T, size_t H, size_t dh, int nt);

/* Floats of per-thread scratch the fused attention kernels need for (T, d_head). */
size_t induct__attn_scratch_floats(size_t T, size_t dh);

/* Causal attention computing only k <= p, with scores, mask and softmax fused per row.
 * The outputs of the reference induct__attention_forward (att [B,H,T,T] with exact zeros above the
 * diagonal; z [B,T,H,dh]). q, k, v, z rows have strides ldq, ldk, ldv, ldz (>= H*dh);
 * head h of row (b,t) starts at h*dh. scratch: nt * induct__attn_scratch_floats(T, dh).
 * `stages` picks the parts (INDUCT__ATTN_ALL: the fused pass). SCORES alone stores the
 * scaled scores in att (-inf above the diagonal); SOFTMAX without SCORES reads them
 * from att; MIX alone computes z from the pattern in att. Split or fused, each part
 * gives the same bits, so a caller may look at (or change) att between the parts. */
#define INDUCT__ATTN_SCORES 1u
#define INDUCT__ATTN_SOFTMAX 2u
#define INDUCT__ATTN_MIX 4u
#define INDUCT__ATTN_ALL 7u
/* With SOFTMAX: leave each pattern row unwritten past the 8-aligned end of its query
 * block (the rest of the row above the diagonal). Nothing the backward pass reads:
 * for training passes that nobody looks at the pattern of. */
#define INDUCT__ATTN_NO_TAIL 8u
void induct__attn_causal_forward(float *z, size_t ldz, float *att, const float *q, size_t ldq,
                                 const float *k, size_t ldk, const float *v, size_t ldv, size_t B,
                                 size_t T, size_t H, size_t dh, float *scratch, int nt,
                                 unsigned stages);
/* induct__attn_causal_forward (stages INDUCT__ATTN_ALL) that also stores the scaled
 * scores (-inf above the diagonal, as SCORES alone leaves them in att) in scores
 * [B,H,T,T] as it computes them, in the same pass. The bits of the parts run one after
 * the other. */
void induct__attn_causal_forward_scores(float *z, size_t ldz, float *att, float *scores,
                                        const float *q, size_t ldq, const float *k, size_t ldk,
                                        const float *v, size_t ldv, size_t B, size_t T, size_t H,
                                        size_t dh, float *scratch, int nt);
/* induct__attn_causal_forward (stages INDUCT__ATTN_ALL) at the query rows rows[0 ..
 * n_rows) only (b * T + p, any order): their pattern rows (exact zeros past the diagonal)
 * and z rows, with the bits the whole pass gives those rows (the same per-row operations:
 * the row's query block, vector count and mixing range). Reads q at those rows and k, v
 * at every position of their sequences; nothing else of z or att is written. */
void induct__attn_causal_rows(float *z, size_t ldz, float *att, const float *q, size_t ldq,
                              const float *k, size_t ldk, const float *v, size_t ldv, size_t B,
                              size_t T, size_t H, size_t dh, const size_t *rows, size_t n_rows,
                              float *scratch, int nt);
/* Backward of induct__attn_causal_forward: dq, dk, dv overwritten (strides ldq.. as q..;
 * dz stride ldz); only k <= p touched. amask [B,H,T,T] (or NULL): pattern entries set
 * to constants (by a hook), which get no gradient (dA = 0 there). att_sm [B,H,T,T] (or
 * NULL: att): the softmax of the scores, when a hook changed the pattern att that z was
 * computed from (the softmax's Jacobian is taken at att_sm, dv reads att). smask
 * [B,H,T,T] (or NULL): scores set to constants (by a hook), which pass no gradient to
 * q and k (dS = 0 there). */
void induct__attn_causal_backward(float *dq, float *dk, float *dv, const float *dz, size_t ldz,
                                  const float *q, size_t ldq, const float *k, size_t ldk,
                                  const float *v, size_t ldv, const float *att,
                                  const uint8_t *amask, const float *att_sm,
                                  const uint8_t *smask, size_t B, size_t T, size_t H, size_t dh,
                                  float *scratch, int nt);
/* The attention's backward in parts, for a backward pass that shows the gradients at
 * hook_pattern and hook_attn_scores to gradient hooks and continues from what they
 * leave. Layouts as induct__attn_causal_backward: dA, dS, att [B,H,T,T]; q, k, v, dz and
 * dq, dk, dv rows of stride ld (head h at h*dh). Only k <= p of att is read.
 * grad_pattern: dA[b,h,p,k] = dz[b,p,h] . v[b,k,h] for k <= p, 0 above (overwrite; one
 * product per (batch, head)).
 * grad_scores: dS = att_j (dA - sum_k att_j dA) per row (double sums), the softmax's
 * backward at the pattern att_j (the softmax of the scores), with dA taken as 0 where
 * amask is set (NULL: nowhere) and 0 above the diagonal; dS may be dA (in place).
 * Without the 1/sqrt(d_head) scale.
 * grad_qkv: dq = scale dS k, dk = scale dS^T q, dv = att^T dz (overwrite), with dS taken
 * as 0 where smask is set (NULL: nowhere) and above the diagonal (dS is set so, in
 * place), scale = 1/sqrt(dh); scratch: T*T floats. */
void induct__attn_grad_pattern(float *dA, const float *dz, const float *v, size_t ld, size_t B,
                               size_t T, size_t H, size_t dh, int nt);
void induct__attn_grad_scores(float *dS, const float *dA, const float *att_j,
                              const uint8_t *amask, size_t BH, size_t T, int nt);
void induct__attn_grad_qkv(float *dq, float *dk, float *dv, float *dS, const uint8_t *smask,
                           const float *att, const float *dz, const float *q, const float *k,
                           size_t ld, size_t B, size_t T, size_t H, size_t dh, float *scratch,
                           int nt);

/* ---- the unembedding and the cross-entropy (unembed.c) ------------------------------ */
/* One row of the cross-entropy: *mx_out = max_v l[v], *s_out = sum_v exp(l[v] -
 * max), returns the loss -ln softmax(l)[target] in nats rounded to float (the same bits
 * as the batched kernel gives that row). Thread-safe. */
float induct__xent_row(const float *l, size_t V, int32_t target, float *mx_out, double *s_out);
/* The unembedding and the cross-entropy, by blocks of rows so that each block's logits
 * are read back from cache: logits[B*T][V] = x W_U + b_U (x [B*T][D], W_U [D][V]),
 * losses[B][T-1] in nats as induct__xent_row gives them, and, when dlogits is not NULL,
 * dlogits (overwrite) = (softmax - onehot) * scale at the scored rows (every p < T-1, or
 * only p = only-1 when only > 0) and 0 at the others; with dlogits, when dx is not NULL,
 * dx[B*T][D] (overwrite) = dlogits W_U^T. Returns the sum of all losses (double, in
 * order). The same bits as whole products (induct__gemm) and the row kernels, any nt.
 * When wpart is not NULL (induct__unembed_grad_scratch floats; dlogits is then not
 * written and may be NULL) the gradients are computed as with dlogits, each block's
 * dlogits replacing its logits (in wpart when the blocks are small, else in logits, which
 * then holds no defined values), and each block b's term of the weight gradient,
 * [x_b | 1]^T dlogits_b, is left in wpart for induct__unembed_grad_sum (the blocks then do
 * not depend on nt). */
double induct__unembed_xent(float *logits, float *losses, float *dlogits, float *dx,
                            float *wpart, const float *x, const float *W_U, const float *b_U,
                            const int32_t *tokens, size_t B, size_t T, size_t D, size_t V,
                            float scale, size_t only, int nt);

/* Floats of induct__unembed_xent's weight-gradient scratch for nt threads (SIZE_MAX on
 * overflow): at most N V / 2 + (D + 1) V + nt (2^20 + N (D + 1)). */
size_t induct__unembed_grad_scratch(size_t N, size_t D, size_t V, int nt);
/* dW [D][V] += sum_b x_b^T dlogits_b, dbias [V] (may be NULL) += sum_b of dlogits_b's
 * column sums, from the blocks' terms wpart left by induct__unembed_xent with the same N,
 * D, V: the terms summed in block order (the same bits for any nt); wpart is consumed. */
void induct__unembed_grad_sum(float *dW, float *dbias, float *wpart, size_t N, size_t D,
                              size_t V, int nt);

/* ---- GELU (gelu.c) --------------------------------------------------------------------- */
/* GELU (tanh approximation) as the reference induct__gelu_forward / _backward
 * (reference.h), vectorised: tanh(u) = sign(u) (1 - e) / (1 + e) with
 * e = induct__expf(-2|u|) (absolute error about 1e-7 against tanhf). */
void induct__gelu_forward_fast(float *out, const float *inp, size_t n, int nt);
void induct__gelu_backward_fast(float *dinp, const float *inp, const float *dout, size_t n,
                                int nt);

/* ---- the optimizer (adamw.c) --------------------------------------------------------- */
/* AdamW update of n parameters: exactly the per-element float operations of train/optimizer.c's
 * loop (so every path and thread count gives the same bits), vectorised and parallel over
 * fixed chunks. */
void induct__adamw_update(float *p, const float *g, float *m1, float *m2, size_t n, float clip,
                          float b1, float b2, float bc1, float bc2, float eps, float decay,
                          float lr, int nt);

/* sum_i x[i]^2 in double, in a fixed order that depends on n only (any nt: same bits). */
double induct__sumsq(const float *x, size_t n, int nt);

/* ---- instruction sets (simd.c) ------------------------------------------------------- */
/* The vector kernels run with AVX2 + FMA when the CPU has them (a run-time check),
 * otherwise portable code that performs the same operations in the same order (fmaf is
 * correctly rounded), so both give bit-identical results. */
/* exp(x) for one float (Cephes-style polynomial, about 1 ulp): the function the fused
 * kernels use. 0 for x < -87.3, NaN propagates. Meant for x <= 0 (softmax, log-sum-exp). */
float induct__expf(float x);
/* Whether the AVX2 + FMA kernels run: the CPU has them and the tests have not switched
 * them off (induct__simd_enable, reference.h). */
int induct__simd_active(void);

/* ---- linear algebra (linalg.c) ------------------------------------------------------- */
/* INDUCT_OK, or INDUCT_ENOTSUP naming `fn` in a build without LAPACKE (the portable
 * WebAssembly build): the LAPACK-based analyses call it first. */
int induct__lapack_check(const char *fn);
/* Eigenvalues of the n x n row-major matrix a (overwritten), under the serial rule of
 * induct__gemm_serial. LAPACKE's info (-1 without LAPACKE). */
int induct__dgeev(size_t n, double *a, double *wr, double *wi);
/* Thin SVD of the m x n row-major matrix a (overwritten): u [m][k], s [k], vt [k][n],
 * k = min(m, n), under the same rule. LAPACKE's info (-1 without LAPACKE). */
int induct__dgesdd(size_t m, size_t n, double *a, double *s, double *u, double *vt);

#endif
