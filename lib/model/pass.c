/* The forward and backward passes, and the hook points they fire: the model's data
 * path, built from the kernels (lib/kernels).
 *
 * Per layer l (TransformerLens order, row vectors):
 *   h      = LN1(resid_pre)            (or resid_pre without LayerNorm)
 *   qk_in  = h + W_pos[t]              (shortformer, in the first shortformer_layers
 *                                       layers or all; else qk_in = h)
 *   q = qk_in W_Q + b_Q ; k_raw = qk_in W_K + b_K ; v = h W_V + b_V
 *   k = smear(k_raw)                   (smeared keys; else k = k_raw)
 *   z = softmax(mask(q k^T / sqrt(d_head))) v
 *   resid_mid = resid_pre + z W_O + b_O
 *   resid_post = resid_mid + MLP(LN2(resid_mid))   (MLP models)
 * logits = LN_final(resid) W_U + b_U.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model.h"

#define P(off) (m->params + (off))
#define G(off) (m->grads + (off))
#define W(off) (m->ws + (off))

/* packed[d][h*dh + j] = W[h][d][j] */
static void pack_heads(float *packed, const float *W, size_t D, size_t H, size_t dh) {
    size_t HD = H * dh;
    for (size_t h = 0; h < H; h++)
        for (size_t d = 0; d < D; d++)
            memcpy(packed + d * HD + h * dh, W + (h * D + d) * dh, dh * sizeof(float));
}

/* y = x Wp (+ b), Wp the packed [D, HD] copy of a [H, D, dh] weight:
 * dx = dx_beta dx + dy Wp^T ; dW[h][d][j] += (x^T dy)[d][h*dh + j]. */
static void proj_backward(induct_model *m, float *dx, float dx_beta, float *dW, const float *dy,
                          const float *x, const float *Wp, size_t N, size_t D, size_t H,
                          size_t dh) {
    int nt = induct__nt(m);
    size_t HD = H * dh;
    float *gw = W(m->g_w);
    induct__gemm_args w = {1, 0, D, HD, N, 1.0f, x, D, dy, HD, 0.0f, gw, HD};
    induct__gemm_args in = {0, 1, N, D, HD, 1.0f, dy, HD, Wp, HD, dx_beta, dx, D};
    induct__gemm2(nt, &w, &in);
    for (size_t h = 0; h < H; h++)
        for (size_t d = 0; d < D; d++) {
            float *dst = dW + (h * D + d) * dh;
            const float *src = gw + d * HD + h * dh;
            for (size_t j = 0; j < dh; j++) dst[j] += src[j];
        }
}

/* dinp = (overwrite) dout W^T; dW += inp^T dout; dbias += column sums (beta = 0 instead
 * of a memset and an accumulation: the same bits, one pass less, zeroed in parallel). */
static void linear_backward_new(induct_model *m, float *dinp, float *dW, float *dbias,
                                const float *dout, const float *inp, const float *Wt, size_t N,
                                size_t K, size_t C) {
    int nt = induct__nt(m);
    induct__gemm(nt, 0, 1, N, K, C, 1.0f, dout, C, Wt, C, 0.0f, dinp, K);
    induct__linear_backward(NULL, dW, dbias, dout, inp, Wt, N, K, C, W(m->g_wt), nt);
}

/* Which of Q, K, V read W_pos in layer 0 (standard: all; shortformer: Q and K). */
static int pos_reads(const induct_model *m, int x) {
    return m->cfg.positional == INDUCT_POS_STANDARD ||
           (induct__qk_reads_pos(&m->cfg, 0) && x < 2);
}

/* Layer 0's q, k_raw, v (the workspace's or a cache's, cache_or) from the tables (see
 * induct__fold_layer0, workspace.c). */
static void fold_forward(induct_model *m, const int32_t *tokens, uint32_t B, uint32_t T,
                         float *q, float *k_raw, float *v) {
    const induct_model_config *c = &m->cfg;
    const induct__layer_off *o = &m->L[0];
    const induct__layer_act *a = &m->A[0];
    int nt = induct__nt(m);
    size_t D = c->d_model, HD = (size_t)c->n_heads * c->d_head, V = c->d_vocab, ld = 3 * HD;
    float *tab = W(m->f_tab);
    const float *Wp[3] = {W(a->wq), W(a->wk), W(a->wv)};
    const float *bias[3] = {P(o->b_Q), P(o->b_K), P(o->b_V)};
    float *out[3] = {q, k_raw, v};
    int pos[3];
    for (int x = 0; x < 3; x++) {
        pos[x] = pos_reads(m, x);
        induct__gemm(nt, 0, 0, V, HD, D, 1.0f, P(m->W_E), D, Wp[x], HD, 0.0f, tab + x * HD, ld);
        if (pos[x])
            induct__gemm(nt, 0, 0, T, HD, D, 1.0f, P(m->W_pos), D, Wp[x], HD, 0.0f,
                         tab + V * ld + x * HD, ld);
    }
    induct__fold_gather(out, bias, pos, tab, tokens, B, T, V, HD, nt);
}

/* Layer 0's projection gradients from d q, d k_raw, d v (see induct__fold_layer0): weight
 * gradients W_E^T G_E + W_pos^T G_P, embedding gradients G_E W^T and G_P W^T, with G_E,
 * G_P the per-token and per-position sums. */
static void fold_backward(induct_model *m, const int32_t *tokens, uint32_t B, uint32_t T,
                          const float *dq, const float *dk, const float *dv) {
    const induct_model_config *c = &m->cfg;
    const induct__layer_off *o = &m->L[0];
    const induct__layer_act *a = &m->A[0];
    int nt = induct__nt(m);
    size_t N = (size_t)B * T, D = c->d_model, H = c->n_heads, dh = c->d_head, HD = H * dh;
    size_t V = c->d_vocab, ld = 3 * HD;
    float *grp = W(m->f_grp), *gw = W(m->g_w);
    const float *d[3] = {dq, dk, dv};
    const float *Wp[3] = {W(a->wq), W(a->wk), W(a->wv)};
    float *dW[3] = {G(o->W_Q), G(o->W_K), G(o->W_V)}, *db[3] = {G(o->b_Q), G(o->b_K), G(o->b_V)};
    int pos[3];
    for (int x = 0; x < 3; x++) pos[x] = pos_reads(m, x);
    induct__fold_group(grp, d, pos, tokens, B, T, V, HD, nt);
    for (int x = 0; x < 3; x++) {
        const float *ge = grp + x * HD, *gp = grp + V * ld + x * HD;
        induct__gemm(nt, 1, 0, D, HD, V, 1.0f, P(m->W_E), D, ge, ld, 0.0f, gw, HD);
        if (pos[x]) induct__gemm(nt, 1, 0, D, HD, T, 1.0f, P(m->W_pos), D, gp, ld, 1.0f, gw, HD);
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < D; i++) {
                float *dst = dW[x] + (h * D + i) * dh;
                const float *src = gw + i * HD + h * dh;
                for (size_t j = 0; j < dh; j++) dst[j] += src[j];
            }
        induct__gemm(nt, 0, 1, V, D, HD, 1.0f, ge, ld, Wp[x], HD, 1.0f, G(m->W_E), D);
        if (pos[x]) induct__gemm(nt, 0, 1, T, D, HD, 1.0f, gp, ld, Wp[x], HD, 1.0f, G(m->W_pos), D);
        if (x != 1) induct__colsum(db[x], d[x], N, HD, HD, nt); /* b_K: induct__backward */
    }
}

/* ---- hooks -------------------------------------------------------------------- */

static int n_hooks(const induct__pass *p) { return p->n_hooks[0] + p->n_hooks[1] != 0; }

/* Does a hook (a writing one, if `writes`) sit at (point, layer)? */
static int hooked(const induct__pass *p, uint32_t point, uint32_t l, int writes) {
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < p->n_hooks[s]; i++) {
            const induct__hook *h = &p->hooks[s][i];
            if (h->point == point && h->layer == l && (!writes || h->writes)) return 1;
        }
    return 0;
}

/* Where pass p computes the activation of (point, l): straight into a cache's buffer (at
 * the pass's sequences) when a cache holds the point and no hook there may write, so
 * that the cache needs no copy; else ws, the workspace's (or scratch's) place. The pass
 * then reads on from the returned buffer: the same kernels on the same values, the same
 * bits (the workspace's copy of the point is left stale: nothing reads it after a pass
 * with caches, which never has gradients). Partial passes (resumed, rows), which read
 * the workspace of an earlier pass, always use it. */
static float *cache_or(const induct_model *m, const induct__pass *p, uint32_t point, uint32_t l,
                       float *ws) {
    float *dst = NULL;
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < p->n_hooks[s]; i++) {
            const induct__hook *h = &p->hooks[s][i];
            if (h->point != point || h->layer != l) continue;
            if (h->writes) return ws;
            if (!dst) dst = h->dst;
        }
    if (!dst || p->grad || p->resume || p->rows) return ws;
    uint32_t shape[4], nd = induct__hook_shape(m, point, 1, p->T, shape);
    size_t per_seq = 1;
    for (uint32_t i = 0; i < nd; i++) per_seq *= shape[i]; /* checked with the cache */
    return dst + (size_t)p->row0 * per_seq;
}

/* The residual stream entering layer l (l = n_layers: leaving the last), where pass p
 * keeps it: blocks.{l}.hook_resid_pre and blocks.{l-1}.hook_resid_post are that one
 * tensor, so a cache of either holds it when no hook at either may write (cache_or);
 * else the workspace. */
static float *resid_at(const induct_model *m, const induct__pass *p, uint32_t l) {
    uint32_t L = m->cfg.n_layers;
    float *ws = l < L ? W(m->A[l].resid_pre) : W(m->a_resid_final);
    if (!n_hooks(p)) return ws;
    if ((l < L && hooked(p, INDUCT__HP_RESID_PRE, l, 1)) ||
        (l > 0 && hooked(p, INDUCT__HP_RESID_POST, l - 1, 1)))
        return ws;
    float *d = l < L ? cache_or(m, p, INDUCT__HP_RESID_PRE, l, NULL) : NULL;
    if (!d && l > 0) d = cache_or(m, p, INDUCT__HP_RESID_POST, l - 1, NULL);
    return d ? d : ws;
}

static int fire_hooks(induct_model *m, const induct__pass *p, uint32_t point, uint32_t l,
                      float *x) {
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < p->n_hooks[s]; i++) {
            const induct__hook *h = &p->hooks[s][i];
            if (h->point == point && h->layer == l) INDUCT_TRY(h->fn(h->user, m, p, point, l, x));
        }
    return INDUCT_OK;
}

void induct__masks_free(induct__masks *ms) {
    for (size_t i = 0; i < ms->n; i++) {
        free(ms->e[i].mask);
        free(ms->e[i].value);
    }
    free(ms->e);
    memset(ms, 0, sizeof *ms);
}

/* The points where what the hooks leave picks the route of the rest of the pass: after
 * a change at hook_result, hook_attn_out or hook_mlp_out the residual stream is rebuilt
 * from what they left (else the fused product adds the output), after one at hook_embed,
 * hook_pos_embed or blocks.0.hook_resid_pre layer 0 is not folded into the embedding
 * tables. A pass without gradients records only these (induct__forward). */
static int route_point(uint32_t point, uint32_t l) {
    switch (point) {
    case INDUCT__HP_EMBED:
    case INDUCT__HP_POS_EMBED:
    case INDUCT__HP_RESULT:
    case INDUCT__HP_ATTN_OUT:
    case INDUCT__HP_MLP_OUT: return 1;
    case INDUCT__HP_RESID_PRE: return l == 0;
    default: return 0;
    }
}

/* Run the hooks at (point, layer) on x: the standing intervention's first, then the
 * caller's, each in list order. In a pass with gradients (and at the route points of one
 * without, see route_point), record what writing hooks changed and, where they changed
 * something, the values the backward pass needs (see induct__mask). */
static int fire(induct_model *m, const induct__pass *p, uint32_t point, uint32_t l, float *x) {
    if (!p->masks || !hooked(p, point, l, 1) || (!p->grad && !route_point(point, l)))
        return fire_hooks(m, p, point, l, x);
    induct__masks *ms = p->masks;
    uint32_t shape[4], nd = induct__hook_shape(m, point, p->B, p->T, shape);
    size_t n = 1;
    for (uint32_t i = 0; i < nd; i++) n *= shape[i]; /* <= a workspace buffer */
    if (ms->n == ms->cap) {
        size_t cap = ms->cap ? 2 * ms->cap : 8;
        induct__mask *e = realloc(ms->e, cap * sizeof *e);
        INDUCT_FAIL_IF(!e, INDUCT_ENOMEM, "out of memory recording a hook's writes");
        ms->e = e;
        ms->cap = cap;
    }
    float *before = malloc(n * sizeof *before);
    uint8_t *mask = malloc(n);
    if (!before || !mask) {
        free(before);
        free(mask);
        return induct__fail(INDUCT_ENOMEM, "out of memory recording a hook's writes");
    }
    memcpy(before, x, n * sizeof *x);
    int rc = fire_hooks(m, p, point, l, x);
    size_t n_set = 0, T = p->T;
    for (size_t i = 0; i < n; i++) {
        mask[i] = memcmp(&before[i], &x[i], sizeof *x) != 0;
        /* above the diagonal (key > query) the softmax masks the scores and the pass
         * sets the pattern back to 0: writes there change nothing */
        if ((point == INDUCT__HP_SCORES || point == INDUCT__HP_PATTERN) && i % T > i / T % T)
            mask[i] = 0;
        n_set += mask[i];
    }
    float *value = NULL;
    if (rc == INDUCT_OK && n_set) {
        if (point == INDUCT__HP_PATTERN) { /* the pattern the scores gave */
            value = before;
            before = NULL;
        } else if (point == INDUCT__HP_LN1 || point == INDUCT__HP_LN2 ||
                   point == INDUCT__HP_LNF) { /* what the hooks left */
            value = before; /* reused: the same size */
            before = NULL;
            memcpy(value, x, n * sizeof *x);
        }
    }
    free(before);
    if (rc != INDUCT_OK) {
        free(mask);
        return rc;
    }
    ms->e[ms->n++] = (induct__mask){point, l, n, n_set, mask, value};
    return INDUCT_OK;
}

/* The record of (point, layer) when a writing hook there changed something, else NULL. */
static const induct__mask *written(const induct__pass *p, uint32_t point, uint32_t l) {
    for (size_t k = 0; p->masks && k < p->masks->n; k++) {
        const induct__mask *e = &p->masks->e[k];
        if (e->point == point && e->layer == l && e->n_set) return e; /* one per point */
    }
    return NULL;
}

/* Does the rest of the pass have to use what a hook at (point, layer) left, rather than
 * the plain pass's value? Where the pass records what the hooks changed (every point
 * with gradients, the route points without): only if they changed something, so a hook
 * that reads, or writes back what it read, changes no bit of the pass or its gradients;
 * elsewhere: if a hook there may write. */
static int wrote(const induct__pass *p, uint32_t point, uint32_t l) {
    if (p->masks && (p->grad || route_point(point, l))) return written(p, point, l) != NULL;
    return hooked(p, point, l, 1);
}

/* Zero the gradient entries that a writing hook at (point, layer) set (see fire). */
static void mask_grad(const induct__pass *p, uint32_t point, uint32_t l, float *g) {
    const induct__mask *e = written(p, point, l);
    if (!e) return;
    for (size_t i = 0; i < e->numel; i++)
        if (e->mask[i]) g[i] = 0.0f;
}

/* The mask of (point, layer), NULL if no writing hook changed anything there. */
static const uint8_t *mask_of(const induct__pass *p, uint32_t point, uint32_t l) {
    const induct__mask *e = written(p, point, l);
    return e ? e->mask : NULL;
}
/* Is a gradient hook at (point, layer)? */
static int grad_hooked(const induct__pass *p, uint32_t point, uint32_t l) {
    for (size_t i = 0; i < p->n_grad_hooks; i++)
        if (p->grad_hooks[i].point == point && p->grad_hooks[i].layer == l) return 1;
    return 0;
}

/* Run the gradient hooks at (point, layer), in list order, on g: the gradient of the
 * loss with respect to that activation, in its shape. With `changed`, *changed tells
 * whether they left any other bit than they found (the backward pass then follows what
 * they left where it would otherwise take its fused or shared paths). */
static int fire_grad(induct_model *m, const induct__pass *p, uint32_t point, uint32_t l,
                     float *g, int *changed) {
    if (changed) *changed = 0;
    if (!grad_hooked(p, point, l)) return INDUCT_OK;
    float *before = NULL;
    size_t n = 1;
    if (changed) {
        uint32_t shape[4], nd = induct__hook_shape(m, point, p->B, p->T, shape);
        for (uint32_t i = 0; i < nd; i++) n *= shape[i]; /* <= a workspace or scratch buffer */
        before = malloc(n * sizeof *before);
        INDUCT_FAIL_IF(!before, INDUCT_ENOMEM, "out of memory comparing a gradient hook's writes");
        memcpy(before, g, n * sizeof *g);
    }
    int rc = INDUCT_OK;
    for (size_t i = 0; i < p->n_grad_hooks && rc == INDUCT_OK; i++) {
        const induct__hook *h = &p->grad_hooks[i];
        if (h->point == point && h->layer == l) rc = h->fn(h->user, m, p, point, l, g);
    }
    if (rc == INDUCT_OK && changed) *changed = memcmp(before, g, n * sizeof *g) != 0;
    free(before);
    return rc;
}

#define FIRE(point, l, x)                                                                  \
    do {                                                                                   \
        if (any) INDUCT_TRY(fire(m, p, (point), (l), (x)));                                \
    } while (0)

/* Layer 0 folded into the tables unless a hook changed what it reads (known once the
 * hooks at blocks.0.hook_resid_pre have run: the forward pass asks there). */
static int use_fold(const induct_model *m, const induct__pass *p) {
    return induct__fold_layer0(m, p->B, p->T) && !wrote(p, INDUCT__HP_EMBED, 0) &&
           !wrote(p, INDUCT__HP_POS_EMBED, 0) && !wrote(p, INDUCT__HP_RESID_PRE, 0) &&
           /* a gradient hook there needs the whole d resid_pre of layer 0, which the
            * folded backward does not form */
           !grad_hooked(p, INDUCT__HP_EMBED, 0) && !grad_hooked(p, INDUCT__HP_POS_EMBED, 0) &&
           !grad_hooked(p, INDUCT__HP_RESID_PRE, 0);
}

/* Does pass p compute layer l only at its rows p->rows (the query, pattern rows, z,
 * attention output and MLP; attention_layer and forward_pass)?
 * Only the last layer of a forward-only pass with rows, at most an eighth of its
 * positions (the analyses' partial passes; never training), and only when no hook sits
 * at that layer (a hook there sees a whole tensor: the whole layer is computed, correct
 * first). The earlier layers feed the keys and values of every position, so they stay
 * whole. */
static int rows_layer(const induct_model *m, const induct__pass *p, uint32_t l) {
    if (!p->rows || p->grad || l + 1 != m->cfg.n_layers) return 0;
    /* a row costs the attention kernel a whole query tile (up to 8 rows): from an eighth
     * of the positions on, the whole layer costs less */
    if (p->n_rows > (size_t)p->B * p->T / 8) return 0;
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < p->n_hooks[s]; i++)
            if (p->hooks[s][i].layer == l) return 0;
    return 1;
}

static size_t rows_tail_scratch(const induct_model *m, const induct__pass *p);

/* A LayerNorm over every row, or (at_rows) at the rows p->rows only, row by row: the same
 * bits per row. */
static void ln_forward_at(induct_model *m, const induct__pass *p, int at_rows, float *out,
                          float *mean, float *rstd, const float *inp, const float *w,
                          const float *b) {
    size_t D = m->cfg.d_model;
    if (!at_rows) {
        induct__layernorm_forward(out, mean, rstd, inp, w, b, (size_t)p->B * p->T, D,
                                  induct__nt(m));
        return;
    }
    for (size_t i = 0; i < p->n_rows; i++) {
        size_t r = p->rows[i];
        induct__layernorm_forward(out + r * D, mean + r, rstd + r, inp + r * D, w, b, 1, D, 1);
    }
}

/* out[N][C] = inp + bias + A[N][K] W[K][C] (inp may be NULL; rows contiguous) over every
 * row, or (at_rows) at the rows p->rows only with each row's whole-product bits
 * (induct__gemm_bias_rows; hs holds rows_scratch floats). */
static void product_at(induct_model *m, const induct__pass *p, int at_rows, size_t C,
                       size_t K, const float *A, const float *Wt, float *out, const float *inp,
                       const float *bias, float *hs) {
    size_t N = (size_t)p->B * p->T;
    if (at_rows)
        induct__gemm_bias_rows(induct__nt(m), N, C, K, A, K, Wt, C, out, C, inp, C, bias,
                               p->rows, p->n_rows, hs);
    else
        induct__gemm_bias(induct__nt(m), N, C, K, A, K, Wt, C, out, C, inp, C, bias);
}

/* Floats of scratch the row products of a rows_layer need (product_at). */
static size_t rows_scratch(const induct_model *m, const induct__pass *p) {
    const induct_model_config *c = &m->cfg;
    if (!rows_layer(m, p, c->n_layers - 1)) return 0;
    size_t N = (size_t)p->B * p->T, D = c->d_model, HD = (size_t)c->n_heads * c->d_head;
    size_t M = c->d_mlp, need = 0;
    size_t shape[4][2] = {{HD, D}, {D, HD}, {M, D}, {D, M}}; /* W_Q, W_O, W_in, W_out */
    for (int i = 0; i < (M ? 4 : 2); i++) {
        size_t n = induct__gemm_bias_rows_scratch(N, shape[i][0], shape[i][1], p->rows,
                                                  p->n_rows);
        if (n > need) need = n;
    }
    return need;
}

/* Floats of scratch the hooks of pass p need for points the workspace does not hold:
 * the embeddings apart, a LayerNorm's normalised input, the per-head results and the
 * attention output. */
static size_t hook_scratch(const induct_model *m, const induct__pass *p) {
    const induct_model_config *c = &m->cfg;
    size_t ND = (size_t)p->B * p->T * c->d_model, need = 0;
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < p->n_hooks[s]; i++) {
            size_t n = 0;
            switch (p->hooks[s][i].point) {
            case INDUCT__HP_EMBED:
            case INDUCT__HP_POS_EMBED: n = 2 * ND; break;
            case INDUCT__HP_LN1:
            case INDUCT__HP_LN2:
            case INDUCT__HP_LNF:
            case INDUCT__HP_ATTN_OUT:
            case INDUCT__HP_MLP_OUT: n = ND; break;
            case INDUCT__HP_RESULT: /* [N][H][D] and the output: SIZE_MAX on overflow */
                if (!induct__mul(ND, (size_t)c->n_heads + 1, &n)) return SIZE_MAX;
                break;
            default: break;
            }
            if (n > need) need = n;
        }
    if (!p->rows) return need;
    size_t tail = rows_tail_scratch(m, p), layer = rows_scratch(m, p);
    if (tail > need) need = tail;
    return layer > need ? layer : need;
}

/* Floats of rows_tail's scratch: the unembedding's row product. */
static size_t rows_tail_scratch(const induct_model *m, const induct__pass *p) {
    const induct_model_config *c = &m->cfg;
    return induct__gemm_bias_rows_scratch((size_t)p->B * p->T, c->d_vocab, c->d_model, p->rows,
                                          p->n_rows);
}

/* The final LayerNorm, logits and loss at rows p->rows only (see induct__pass): each
 * row's loss has the whole pass's bits (LayerNorm row by row, the unembedding's rows at
 * their places in OpenBLAS's tiles, induct__gemm_bias_rows, the same cross-entropy row).
 * The workspace's final LayerNorm and logits are written at those rows (or the logits
 * everywhere, when the row product computes the whole product), its losses not. */
static double rows_tail(induct_model *m, const induct__pass *p, float *hs) {
    const induct_model_config *c = &m->cfg;
    size_t R = p->n_rows, D = c->d_model, V = c->d_vocab;
    if (c->layer_norm)
        ln_forward_at(m, p, 1, W(m->a_lnf), W(m->a_lnf_mean), W(m->a_lnf_rstd),
                      W(m->a_resid_final), P(m->lnf_w), P(m->lnf_b));
    float *lg = W(m->a_logits);
    product_at(m, p, 1, V, D, W(m->a_lnf), P(m->W_U), lg, NULL, P(m->b_U), hs);
    double sum = 0.0;
    for (size_t i = 0; i < R; i++) {
        /* the full pass's cross-entropy kernel, one row: the same bits from the same logits */
        float mx;
        double e;
        size_t r = p->rows[i];
        p->row_loss[i] = induct__xent_row(lg + r * V, V, p->tokens[r + 1], &mx, &e);
        sum += p->row_loss[i];
    }
    return sum;
}

/* LayerNorm with a hook on its normalised input (x - mean) * rstd, before the gain and
 * bias: TransformerLens's hook_normalized. */
static int layernorm_hooked(induct_model *m, const induct__pass *p, uint32_t point, uint32_t l,
                            float *out, float *mean, float *rstd, const float *x, const float *w,
                            const float *b, float *hs) {
    size_t N = (size_t)p->B * p->T, D = m->cfg.d_model;
    int nt = induct__nt(m);
    induct__layernorm_forward(out, mean, rstd, x, w, b, N, D, nt);
    hs = cache_or(m, p, point, l, hs);
    for (size_t n = 0; n < N; n++)
        for (size_t i = 0; i < D; i++) hs[n * D + i] = (x[n * D + i] - mean[n]) * rstd[n];
    INDUCT_TRY(fire(m, p, point, l, hs));
    if (wrote(p, point, l))
        for (size_t n = 0; n < N; n++)
            for (size_t i = 0; i < D; i++) out[n * D + i] = hs[n * D + i] * w[i] + b[i];
    return INDUCT_OK;
}

/* Embeddings with hooks on W_E[token] and W_pos[position] apart; their sum is the one
 * induct__embed_forward computes. */
static int embed_hooked(induct_model *m, const induct__pass *p, float *out, float *hs) {
    const induct_model_config *c = &m->cfg;
    size_t N = (size_t)p->B * p->T, D = c->d_model;
    float *E = cache_or(m, p, INDUCT__HP_EMBED, 0, hs);
    float *Pe = cache_or(m, p, INDUCT__HP_POS_EMBED, 0, hs + N * D);
    induct__embed_forward(E, p->tokens, P(m->W_E), NULL, p->B, p->T, D, induct__nt(m));
    INDUCT_TRY(fire(m, p, INDUCT__HP_EMBED, 0, E));
    if (c->positional != INDUCT_POS_STANDARD) {
        memcpy(out, E, N * D * sizeof *out);
        return INDUCT_OK;
    }
    for (size_t n = 0; n < N; n++) memcpy(Pe + n * D, P(m->W_pos) + (n % p->T) * D, D * sizeof *Pe);
    INDUCT_TRY(fire(m, p, INDUCT__HP_POS_EMBED, 0, Pe));
    for (size_t i = 0; i < N * D; i++) out[i] = E[i] + Pe[i];
    return INDUCT_OK;
}

/* Attention output z W_O + b_O with hooks on it (and on the per-head results
 * z_h W_O[h], [N][H][D], computed only when hooked); attn_resid = resid_pre + output.
 * Hooks that only read leave the residual stream to the plain pass's fused product
 * (the same bits); after a write it is resid_pre + output. */
static int attn_out_hooked(induct_model *m, const induct__pass *p, uint32_t l, const float *z,
                           const float *rp, float *attn_resid, float *hs) {
    const induct_model_config *c = &m->cfg;
    const induct__layer_off *o = &m->L[l];
    int nt = induct__nt(m);
    size_t N = (size_t)p->B * p->T, D = c->d_model, H = c->n_heads, dh = c->d_head, HD = H * dh;
    float *out = cache_or(m, p, INDUCT__HP_ATTN_OUT, l, hs);
    float *res = cache_or(m, p, INDUCT__HP_RESULT, l, hs + N * D);
    if (hooked(p, INDUCT__HP_RESULT, l, 0)) {
        induct__head_results(nt, N, H, dh, D, z, HD, P(o->W_O), res);
        INDUCT_TRY(fire(m, p, INDUCT__HP_RESULT, l, res));
    }
    int w_res = wrote(p, INDUCT__HP_RESULT, l);
    if (w_res) { /* the output from what the hooks left */
        for (size_t n = 0; n < N; n++)
            for (size_t i = 0; i < D; i++) {
                float s = P(o->b_O)[i];
                for (size_t h = 0; h < H; h++) s += res[(n * H + h) * D + i];
                out[n * D + i] = s;
            }
    } else if (hooked(p, INDUCT__HP_ATTN_OUT, l, 0)) {
        induct__gemm_bias(nt, N, D, HD, z, HD, P(o->W_O), D, out, D, NULL, D, P(o->b_O));
    }
    if (hooked(p, INDUCT__HP_ATTN_OUT, l, 0)) INDUCT_TRY(fire(m, p, INDUCT__HP_ATTN_OUT, l, out));
    if (w_res || wrote(p, INDUCT__HP_ATTN_OUT, l)) {
        for (size_t i = 0; i < N * D; i++) attn_resid[i] = rp[i] + out[i];
    } else {
        induct__gemm_bias(nt, N, D, HD, z, HD, P(o->W_O), D, attn_resid, D, rp, D, P(o->b_O));
    }
    return INDUCT_OK;
}

static int forward_pass(induct_model *m, const induct__pass *p, float *hs, double *mean_loss);

/* Does a writing hook sit at a route point (route_point)? */
static int route_hooked(const induct__pass *p) {
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < p->n_hooks[s]; i++) {
            const induct__hook *h = &p->hooks[s][i];
            if (h->writes && route_point(h->point, h->layer)) return 1;
        }
    return 0;
}

int induct__forward(induct_model *m, const induct__pass *p, double *mean_loss) {
    if (m->standing.run && !p->bare) return m->standing.run(m->standing.self, m, p, mean_loss);
    /* every point supports writing hooks with gradients, given the record of what they
     * changed (every pass with gradients and hooks keeps one: a gradient shard its own) */
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < p->n_hooks[s]; i++)
            INDUCT_FAIL_IF(p->grad && p->hooks[s][i].writes && !p->masks, INDUCT_ENOTSUP,
                           "writing hooks in a pass with gradients need a record of what "
                           "they change (internal: none was given)");
    if (!p->grad && !p->masks && route_hooked(p)) {
        /* a record of what writing hooks change at the route points, so that hooks that
         * leave the values as they were keep the plain pass's route (and bits) */
        induct__masks local = {0, 0, NULL};
        induct__pass q = *p;
        q.masks = &local;
        int rc = induct__forward(m, &q, mean_loss);
        induct__masks_free(&local);
        return rc;
    }
    INDUCT_TRY(induct__model_workspace(m, p->B, p->T));
    size_t ns = n_hooks(p) || p->rows ? hook_scratch(m, p) : 0;
    if (!ns) return forward_pass(m, p, NULL, mean_loss);
    INDUCT_FAIL_IF(ns > INDUCT__WS_FLOATS_MAX, INDUCT_ELIMIT,
                   "the hooks' scratch for batch %u x seq_len %u is above 2^36 floats", p->B,
                   p->T);
    uint64_t bytes = (uint64_t)ns * sizeof(float);
    INDUCT_TRY(induct__model_reserve(m, bytes, 0, "the hooks' scratch"));
    float *hs = malloc(ns * sizeof *hs);
    INDUCT_FAIL_IF(!hs, INDUCT_ENOMEM, "out of memory: %zu floats of hook scratch", ns);
    induct__model_held(m, bytes, 0);
    int rc = forward_pass(m, p, hs, mean_loss);
    free(hs);
    induct__model_held(m, 0, bytes);
    return rc;
}

/* Set the entries above the diagonal (key > query) of n [T][T] patterns back to 0: the
 * mixing z = A v reads some of them (whole vectors), and no query may see later keys. */
static void causal_zero(float *att, size_t n, size_t T) {
    for (size_t r = 0; r < n * T; r++) {
        size_t q = r % T;
        memset(att + r * T + q + 1, 0, (T - q - 1) * sizeof *att);
    }
}

/* Layer l up to its attention output: LN1, Q/K/V, attention, attn_resid = resid_pre +
 * z W_O + b_O, with the hooks on the way. */
static int attention_layer(induct_model *m, const induct__pass *p, uint32_t l, float *rp,
                           float *attn_resid, float *hs) {
    const induct_model_config *c = &m->cfg;
    const induct__layer_off *o = &m->L[l];
    const induct__layer_act *a = &m->A[l];
    const int32_t *tokens = p->tokens;
    uint32_t B = p->B, T = p->T;
    int nt = induct__nt(m), any = n_hooks(p);
    size_t N = (size_t)B * T, D = c->d_model, H = c->n_heads, dh = c->d_head, HD = H * dh;
    /* the scored rows only (no hook at this layer): LN1, keys and values stay whole (every
     * position up to a row is read), the query, pattern rows, z and output at the rows */
    int at_rows = rows_layer(m, p, l);
    /* rp: the residual stream entering the layer (resid_at); without LayerNorm it is the
     * input of the projections */
    float *ln1 = c->layer_norm ? W(a->ln1) : rp;
    float *qk_in = induct__qk_reads_pos(c, l) ? W(a->qk_in) : ln1;
    FIRE(INDUCT__HP_RESID_PRE, l, rp);
    if (c->layer_norm) {
        if (any && hooked(p, INDUCT__HP_LN1, l, 0))
            INDUCT_TRY(layernorm_hooked(m, p, INDUCT__HP_LN1, l, ln1, W(a->ln1_mean),
                                        W(a->ln1_rstd), rp, P(o->ln1_w), P(o->ln1_b), hs));
        else
            induct__layernorm_forward(ln1, W(a->ln1_mean), W(a->ln1_rstd), rp, P(o->ln1_w),
                                      P(o->ln1_b), N, D, nt);
    }
    if (induct__qk_reads_pos(c, l)) induct__add_pos(qk_in, ln1, P(m->W_pos), B, T, D, nt);
    /* W_Q [H, D, dh] -> [D, H*dh] so each projection is one GEMM into [N, H, dh] */
    pack_heads(W(a->wq), P(o->W_Q), D, H, dh);
    pack_heads(W(a->wk), P(o->W_K), D, H, dh);
    pack_heads(W(a->wv), P(o->W_V), D, H, dh);
    /* q, k, v, the keys attended to, the pattern and z: where a cache holds them, else in
     * the workspace (cache_or) */
    float *q = W(a->q), *k_raw = W(a->k_raw), *v = W(a->v), *k = W(a->k), *att = W(a->att);
    float *z = W(a->z);
    if (any) {
        q = cache_or(m, p, INDUCT__HP_Q, l, q);
        k_raw = cache_or(m, p, INDUCT__HP_K, l, k_raw);
        v = cache_or(m, p, INDUCT__HP_V, l, v);
        k = c->smeared_keys ? cache_or(m, p, INDUCT__HP_K_SMEARED, l, k) : k_raw;
        att = cache_or(m, p, INDUCT__HP_PATTERN, l, att);
        z = cache_or(m, p, INDUCT__HP_Z, l, z);
    }
    if (l == 0 && use_fold(m, p)) { /* after the hooks at blocks.0.hook_resid_pre */
        fold_forward(m, tokens, B, T, q, k_raw, v);
    } else {
        product_at(m, p, at_rows, HD, D, qk_in, W(a->wq), q, NULL, P(o->b_Q), hs);
        induct__linear_forward(k_raw, qk_in, W(a->wk), P(o->b_K), N, D, HD, nt);
        induct__linear_forward(v, ln1, W(a->wv), P(o->b_V), N, D, HD, nt);
    }
    FIRE(INDUCT__HP_Q, l, q);
    FIRE(INDUCT__HP_K, l, k_raw);
    FIRE(INDUCT__HP_V, l, v);
    if (c->smeared_keys) {
        induct__smear_forward(k, k_raw, P(o->alpha), B, T, H, dh, nt);
        FIRE(INDUCT__HP_K_SMEARED, l, k);
    }
    /* causal half only (k <= p), scores + mask + softmax fused per query row; split
     * into its parts (the same bits) around hooks on the scores or the pattern */
#define ATTN(stages)                                                                       \
induct__attn_causal_forward(z, HD, att, q, HD, k, HD, v, HD,                              \
                            B, T, H, dh, W(m->g_att), nt, (stages))
    int h_scores = any && hooked(p, INDUCT__HP_SCORES, l, 0);
    if (at_rows) { /* each row with the whole pass's operations (its query block's) */
        induct__attn_causal_rows(z, HD, att, q, HD, k, HD, v, HD, B, T, H, dh, p->rows,
                                 p->n_rows, W(m->g_att), nt);
    } else if (!any || (!h_scores && !hooked(p, INDUCT__HP_PATTERN, l, 0))) {
        /* a training pass: nobody reads the pattern above the diagonal */
        ATTN(INDUCT__ATTN_ALL | (p->grad ? INDUCT__ATTN_NO_TAIL : 0u));
    } else if (!hooked(p, INDUCT__HP_SCORES, l, 1) && !hooked(p, INDUCT__HP_PATTERN, l, 1) &&
               (!h_scores || cache_or(m, p, INDUCT__HP_SCORES, l, NULL))) {
        /* hooks that only read (a cache): the fused kernel, the same bits as its parts, with
         * the scores stored per (batch, head) straight into a cache's buffer; the hooks
         * run after it */
        float *scores = h_scores ? cache_or(m, p, INDUCT__HP_SCORES, l, NULL) : NULL;
        if (scores)
            induct__attn_causal_forward_scores(z, HD, att, scores, q, HD, k, HD, v, HD, B, T, H,
                                               dh, W(m->g_att), nt);
        else
            ATTN(INDUCT__ATTN_ALL);
        if (scores) INDUCT_TRY(fire(m, p, INDUCT__HP_SCORES, l, scores));
        INDUCT_TRY(fire(m, p, INDUCT__HP_PATTERN, l, att));
    } else {
        if (h_scores) {
            ATTN(INDUCT__ATTN_SCORES);
            INDUCT_TRY(fire(m, p, INDUCT__HP_SCORES, l, att));
            ATTN(INDUCT__ATTN_SOFTMAX);
        } else {
            ATTN(INDUCT__ATTN_SCORES | INDUCT__ATTN_SOFTMAX);
        }
        INDUCT_TRY(fire(m, p, INDUCT__HP_PATTERN, l, att));
        if (hooked(p, INDUCT__HP_PATTERN, l, 1)) causal_zero(att, (size_t)B * H, T);
        ATTN(INDUCT__ATTN_MIX);
    }
#undef ATTN
    FIRE(INDUCT__HP_Z, l, z);
    if (any && (hooked(p, INDUCT__HP_RESULT, l, 0) || hooked(p, INDUCT__HP_ATTN_OUT, l, 0)))
        INDUCT_TRY(attn_out_hooked(m, p, l, z, rp, attn_resid, hs));
    else /* resid_mid = resid_pre + z W_O + b_O ; W_O [H, dh, D] is [HD, D] row-major */
        product_at(m, p, at_rows, D, HD, z, P(o->W_O), attn_resid, rp, P(o->b_O), hs);
    return INDUCT_OK;
}

/* Where the unembedding's input gradient goes: d(lnf) with LayerNorm, else straight into
 * d(resid). */
static float *unembed_dinp(induct_model *m) {
    return m->cfg.layer_norm ? W(m->g_h) : W(m->g_resid);
}

/* The loss gradient's factor: 1 / (the mean's sequences x scored positions in each). */
static float loss_scale(const induct__pass *p) {
    double rows = p->scale_rows ? (double)p->scale_rows : (double)p->B;
    return (float)(1.0 / (rows * (p->score_pos ? 1 : p->T - 1)));
}

static int forward_pass(induct_model *m, const induct__pass *p, float *hs, double *mean_loss) {
    const induct_model_config *c = &m->cfg;
    const int32_t *tokens = p->tokens;
    uint32_t B = p->B, T = p->T;
    int nt = induct__nt(m), any = n_hooks(p);
    size_t N = (size_t)B * T, D = c->d_model, V = c->d_vocab, M = c->d_mlp;
    int standard = c->positional == INDUCT_POS_STANDARD;
    /* resumed: the workspace holds everything up to layer l0's attention output */
    uint32_t l0 = p->resume ? p->resume - 1 : 0;
    if (p->resume)
        ;
    else if (any && (hooked(p, INDUCT__HP_EMBED, 0, 0) || hooked(p, INDUCT__HP_POS_EMBED, 0, 0)))
        INDUCT_TRY(embed_hooked(m, p, resid_at(m, p, 0), hs));
    else
        induct__embed_forward(resid_at(m, p, 0), tokens, P(m->W_E), standard ? P(m->W_pos) : NULL,
                              B, T, D, nt);
    for (uint32_t l = l0; l < c->n_layers; l++) {
        const induct__layer_off *o = &m->L[l];
        const induct__layer_act *a = &m->A[l];
        /* the residual stream's buffers: the workspace's or a cache's (resid_at, cache_or) */
        float *rp = resid_at(m, p, l), *out_resid = resid_at(m, p, l + 1);
        float *mid = NULL; /* resid_mid: with an MLP only (else its offset is INDUCT_NONE) */
        if (M)
            mid = any ? cache_or(m, p, INDUCT__HP_RESID_MID, l, W(a->resid_mid))
                      : W(a->resid_mid);
        float *attn_resid = M ? mid : out_resid;
        if (!p->resume || l != l0)
            INDUCT_TRY(attention_layer(m, p, l, rp, attn_resid, hs));
        if (M) {
            int at_rows = rows_layer(m, p, l); /* no hook at this layer then */
            float *ln2 = c->layer_norm ? W(a->ln2) : mid;
            FIRE(INDUCT__HP_RESID_MID, l, mid);
            if (c->layer_norm) {
                if (any && hooked(p, INDUCT__HP_LN2, l, 0))
                    INDUCT_TRY(layernorm_hooked(m, p, INDUCT__HP_LN2, l, ln2, W(a->ln2_mean),
                                                W(a->ln2_rstd), mid, P(o->ln2_w), P(o->ln2_b),
                                                hs));
                else
                    ln_forward_at(m, p, at_rows, ln2, W(a->ln2_mean), W(a->ln2_rstd), mid,
                                  P(o->ln2_w), P(o->ln2_b));
            }
            float *pre = W(a->mlp_pre), *post = W(a->mlp_post); /* or a cache's (cache_or) */
            if (any) {
                pre = cache_or(m, p, INDUCT__HP_MLP_PRE, l, pre);
                post = cache_or(m, p, INDUCT__HP_MLP_POST, l, post);
            }
            product_at(m, p, at_rows, M, D, ln2, P(o->W_in), pre, NULL, P(o->b_in), hs);
            FIRE(INDUCT__HP_MLP_PRE, l, pre);
            if (at_rows) /* element by element: the same bits per row */
                for (size_t i = 0; i < p->n_rows; i++)
                    induct__gelu_forward_fast(post + p->rows[i] * M, pre + p->rows[i] * M, M, 1);
            else
                induct__gelu_forward_fast(post, pre, N * M, nt);
            FIRE(INDUCT__HP_MLP_POST, l, post);
            if (any && hooked(p, INDUCT__HP_MLP_OUT, l, 0)) {
                /* hook_mlp_out = mlp_post W_out + b_out, computed for its hooks; the
                 * residual stream takes what they left, or (nothing changed) the plain
                 * pass's fused sum below, the same bits */
                float *mo = cache_or(m, p, INDUCT__HP_MLP_OUT, l, hs);
                induct__gemm_bias(nt, N, D, M, post, M, P(o->W_out), D, mo, D, NULL, D,
                                  P(o->b_out));
                INDUCT_TRY(fire(m, p, INDUCT__HP_MLP_OUT, l, mo));
                if (wrote(p, INDUCT__HP_MLP_OUT, l)) {
                    for (size_t i = 0; i < N * D; i++) out_resid[i] = mid[i] + mo[i];
                    FIRE(INDUCT__HP_RESID_POST, l, out_resid);
                    continue;
                }
            }
            /* resid_post = resid_mid + b_out + mlp_post W_out */
            product_at(m, p, at_rows, D, M, post, P(o->W_out), out_resid, mid, P(o->b_out), hs);
        }
        FIRE(INDUCT__HP_RESID_POST, l, out_resid);
    }
    if (p->rows) {
        double mean = rows_tail(m, p, hs) / (double)p->n_rows;
        INDUCT_FAIL_IF(!isfinite(mean), INDUCT_ENUMERIC, "forward: the loss is not finite (%g)",
                       mean);
        if (mean_loss) *mean_loss = mean;
        return INDUCT_OK;
    }
    float *final = resid_at(m, p, c->n_layers), *lnf = c->layer_norm ? W(m->a_lnf) : final;
    if (c->layer_norm) {
        if (any && hooked(p, INDUCT__HP_LNF, 0, 0))
            INDUCT_TRY(layernorm_hooked(m, p, INDUCT__HP_LNF, 0, lnf, W(m->a_lnf_mean),
                                        W(m->a_lnf_rstd), final, P(m->lnf_w), P(m->lnf_b), hs));
        else
            induct__layernorm_forward(lnf, W(m->a_lnf_mean), W(m->a_lnf_rstd), final,
                                      P(m->lnf_w), P(m->lnf_b), N, D, nt);
    }
    /* with gradients, d(lnf) and the terms of W_U's and b_U's gradients come out of the
     * same pass over each block of logits while they are in cache (the logits are not kept:
     * a_logits holds no defined values after such a pass; the backward pass takes the
     * gradients from there) */
    int g = p->grad && !p->logits_fn; /* a caller's metric: its backward starts from the logits */
    double sum = induct__unembed_xent(W(m->a_logits), W(m->a_losses), NULL,
                                      g ? unembed_dinp(m) : NULL, g ? W(m->g_wt) : NULL,
                                      lnf, P(m->W_U), P(m->b_U), tokens, B, T, D, V,
                                      loss_scale(p), p->score_pos, nt);
    double count = (double)B * (T - 1);
    if (p->score_pos) { /* one scored position per row (e.g. key-value retrieval) */
        const float *ls = W(m->a_losses);
        sum = 0.0;
        for (size_t b = 0; b < B; b++) sum += ls[b * (T - 1) + p->score_pos - 1];
        count = (double)B;
    }
    double mean = sum / count;
    INDUCT_FAIL_IF(!isfinite(mean), INDUCT_ENUMERIC, "forward: the loss is not finite (%g)", mean);
    if (mean_loss) *mean_loss = mean;
    if (p->loss_sum) *p->loss_sum = sum;
    return INDUCT_OK;
}
#undef FIRE

/* ---- backward through writing hooks and gradient hooks ------------------------------- */

/* A LayerNorm's backward (see induct__layernorm_backward_hooked) at its hook_normalized
 * (point, l): the plain backward unless a writing hook changed the normalised values.
 * Gradient hooks there get d(normalized) = dout * w (the gain's share; gs holds it) and
 * the input's gradient follows what they leave, the gain's and the bias's being those
 * of dout (they come after the point). */
static int ln_backward(induct_model *m, const induct__pass *p, uint32_t point, uint32_t l,
                       float *dinp, float *dw, float *db, const float *dout, const float *inp,
                       const float *mean, const float *rstd, const float *w, float *gs) {
    const induct__mask *e = written(p, point, l);
    size_t N = (size_t)p->B * p->T, D = m->cfg.d_model;
    int nt = induct__nt(m), changed = 0;
    if (grad_hooked(p, point, l)) {
        for (size_t n = 0; n < N; n++)
            for (size_t i = 0; i < D; i++) gs[n * D + i] = dout[n * D + i] * w[i];
        INDUCT_TRY(fire_grad(m, p, point, l, gs, &changed));
    }
    if (!changed) {
        induct__layernorm_backward_hooked(dinp, dw, db, dout, inp, mean, rstd, w,
                                          e ? e->value : NULL, e ? e->mask : NULL, N, D, nt);
        return INDUCT_OK;
    }
    induct__layernorm_backward_hooked(NULL, dw, db, dout, inp, mean, rstd, w,
                                      e ? e->value : NULL, NULL, N, D, nt);
    induct__layernorm_backward_normalized(dinp, gs, inp, mean, rstd, e ? e->mask : NULL, N, D,
                                          nt);
    return INDUCT_OK;
}

/* Floats of backward scratch for what writing hooks changed, or gradient hooks may
 * change, at the points the workspace has no gradient buffer for (the embeddings,
 * hook_result, hook_attn_out, hook_mlp_out): two [N, D]. */
static size_t backward_scratch(const induct_model *m, const induct__pass *p) {
    size_t two = 2 * (size_t)p->B * p->T * m->cfg.d_model; /* two workspace-sized rows */
    for (size_t k = 0; p->masks && k < p->masks->n; k++) {
        uint32_t pt = p->masks->e[k].point;
        if (p->masks->e[k].n_set && (pt == INDUCT__HP_EMBED || pt == INDUCT__HP_POS_EMBED ||
                                     pt == INDUCT__HP_RESULT || pt == INDUCT__HP_ATTN_OUT ||
                                     pt == INDUCT__HP_MLP_OUT))
            return two;
    }
    for (size_t k = 0; k < p->n_grad_hooks; k++) {
        uint32_t pt = p->grad_hooks[k].point;
        if (pt == INDUCT__HP_EMBED || pt == INDUCT__HP_POS_EMBED || pt == INDUCT__HP_RESULT ||
            pt == INDUCT__HP_ATTN_OUT || pt == INDUCT__HP_MLP_OUT)
            return two;
    }
    return 0;
}

/* The gradient hooks' scratch: the gradients the backward pass does not otherwise hold,
 * in three regions: `a` [N, D] (a LayerNorm's d(normalized), d attn_out; two of them for
 * d hook_embed and d hook_pos_embed), `r` [N, H, D] (d hook_result), `s` [B, H, T, T]
 * (d hook_pattern, then d hook_attn_scores). Offsets in floats; total SIZE_MAX on
 * overflow. */
typedef struct grad_scratch {
    size_t a, r, s, total;
} grad_scratch;

static grad_scratch grad_scratch_of(const induct_model *m, const induct__pass *p) {
    const induct_model_config *c = &m->cfg;
    size_t N = (size_t)p->B * p->T, ND = N * c->d_model, na = 0, nr = 0, ns = 0;
    for (size_t k = 0; k < p->n_grad_hooks; k++) {
        switch (p->grad_hooks[k].point) {
        case INDUCT__HP_EMBED:
        case INDUCT__HP_POS_EMBED: na = 2 * ND; break;
        case INDUCT__HP_LN1:
        case INDUCT__HP_LN2:
        case INDUCT__HP_LNF:
        case INDUCT__HP_ATTN_OUT:
        case INDUCT__HP_MLP_OUT:
            if (na < ND) na = ND;
            break;
        case INDUCT__HP_RESULT: /* [N][H][D]: checked */
            if (!induct__mul(ND, c->n_heads, &nr)) return (grad_scratch){0, 0, 0, SIZE_MAX};
            break;
        case INDUCT__HP_SCORES:
        case INDUCT__HP_PATTERN: /* the size of a workspace pattern */
            ns = (size_t)p->B * c->n_heads * p->T * p->T;
            break;
        default: break;
        }
    }
    grad_scratch g = {0, na, 0, 0};
    if (!induct__add(na, nr, &g.s) || !induct__add(g.s, ns, &g.total)) g.total = SIZE_MAX;
    return g;
}

/* Layer l's attention output, resid_mid = resid_pre + attn_out with attn_out = Σ_h
 * result_h + b_O and result_h = z_h W_O[h]: the gradients of b_O and W_O and dz
 * (overwritten) from dres = d resid_mid. Entries of hook_attn_out and hook_result that
 * a writing hook changed pass no gradient back (dres itself still flows on to
 * resid_pre). Gradient hooks at hook_attn_out get a copy of dres (in ga) and at
 * hook_result d attn_out for each head (in gr); what they leave flows to b_O (from
 * hook_attn_out only), W_O and z. bs: backward_scratch floats when a hook changed either
 * or a gradient hook sits at either (else unused). */
static int attn_out_backward(induct_model *m, const induct__pass *p, uint32_t l,
                             const float *dres, float *dz, float *bs, float *ga, float *gr) {
    const induct_model_config *c = &m->cfg;
    const induct__layer_off *o = &m->L[l];
    const induct__layer_act *a = &m->A[l];
    int nt = induct__nt(m);
    size_t N = (size_t)p->B * p->T, D = c->d_model, H = c->n_heads, dh = c->d_head, HD = H * dh;
    const uint8_t *mo = mask_of(p, INDUCT__HP_ATTN_OUT, l), *mr = mask_of(p, INDUCT__HP_RESULT, l);
    const float *dout = dres; /* d attn_out */
    int changed = 0;
    if (grad_hooked(p, INDUCT__HP_ATTN_OUT, l)) {
        memcpy(ga, dres, N * D * sizeof *ga);
        INDUCT_TRY(fire_grad(m, p, INDUCT__HP_ATTN_OUT, l, ga, &changed));
        if (changed) dout = ga;
    }
    if (mo) {
        float *g = bs;
        for (size_t i = 0; i < N * D; i++) g[i] = mo[i] ? 0.0f : dout[i];
        dout = g;
    }
    induct__colsum(G(o->b_O), dout, N, D, D, nt);
    int r_changed = 0;
    if (grad_hooked(p, INDUCT__HP_RESULT, l)) {
        for (size_t n = 0; n < N; n++)
            for (size_t h = 0; h < H; h++) memcpy(gr + (n * H + h) * D, dout + n * D, D * sizeof *gr);
        INDUCT_TRY(fire_grad(m, p, INDUCT__HP_RESULT, l, gr, &r_changed));
    }
    if (!mr && !r_changed) {
        induct__gemm_args in = {0, 1, N, HD, D, 1.0f, dout, D, P(o->W_O), D, 0.0f, dz, HD};
        induct__gemm_args w = {1, 0, HD, D, N, 1.0f, W(a->z), HD, dout, D, 1.0f, G(o->W_O), D};
        induct__gemm2(nt, &in, &w);
        return INDUCT_OK;
    }
    float *dr = bs + N * D; /* d result_h, [N, D] per head */
    for (size_t h = 0; h < H; h++) {
        for (size_t n = 0; n < N; n++)
            for (size_t i = 0; i < D; i++) {
                size_t e = (n * H + h) * D + i;
                dr[n * D + i] = mr && mr[e] ? 0.0f : r_changed ? gr[e] : dout[n * D + i];
            }
        induct__gemm(nt, 0, 1, N, dh, D, 1.0f, dr, D, P(o->W_O) + h * dh * D, D, 0.0f, dz + h * dh,
                     HD);
        induct__gemm(nt, 1, 0, dh, D, N, 1.0f, W(a->z) + h * dh, HD, dr, D, 1.0f,
                     G(o->W_O) + h * dh * D, D);
    }
    return INDUCT_OK;
}

/* Layer l's attention: dq, dk, dv (overwritten) from dz. With gradient hooks at
 * hook_pattern or hook_attn_scores the gradients there are formed in gs ([B, H, T, T])
 * and shown to them; if they change a bit, dq, dk and dv are computed from what they
 * left (induct__attn_grad_*), else by the fused kernel as without them (the same bits).
 * *s_changed: the gradient at the scores was changed (b_K then has a gradient). */
static int attn_backward(induct_model *m, const induct__pass *p, uint32_t l, float *dq, float *dk,
                         float *dv, const float *dz, float *gs, int *s_changed) {
    const induct_model_config *c = &m->cfg;
    const induct__layer_act *a = &m->A[l];
    int nt = induct__nt(m);
    size_t B = p->B, T = p->T, H = c->n_heads, dh = c->d_head, HD = H * dh;
    const induct__mask *pm = written(p, INDUCT__HP_PATTERN, l);
    const uint8_t *amask = pm ? pm->mask : NULL, *smask = mask_of(p, INDUCT__HP_SCORES, l);
    const float *att_j = pm ? pm->value : W(a->att); /* the softmax's Jacobian's pattern */
    int hp = grad_hooked(p, INDUCT__HP_PATTERN, l), hs = grad_hooked(p, INDUCT__HP_SCORES, l);
    int p_changed = 0;
    *s_changed = 0;
    if (hp || hs) {
        induct__attn_grad_pattern(gs, dz, W(a->v), HD, B, T, H, dh, nt);
        if (hp) INDUCT_TRY(fire_grad(m, p, INDUCT__HP_PATTERN, l, gs, &p_changed));
        if (hs) {
            induct__attn_grad_scores(gs, gs, att_j, amask, B * H, T, nt);
            INDUCT_TRY(fire_grad(m, p, INDUCT__HP_SCORES, l, gs, s_changed));
        }
        if (p_changed || *s_changed) {
            if (!hs) induct__attn_grad_scores(gs, gs, att_j, amask, B * H, T, nt);
            induct__attn_grad_qkv(dq, dk, dv, gs, smask, W(a->att), dz, W(a->q), W(a->k), HD, B,
                                  T, H, dh, W(m->g_att), nt);
            return INDUCT_OK;
        }
    }
    induct__attn_causal_backward(dq, dk, dv, dz, HD, W(a->q), HD, W(a->k), HD, W(a->v), HD,
                                 W(a->att), amask, pm ? pm->value : NULL, smask, B, T, H, dh,
                                 W(m->g_att), nt);
    return INDUCT_OK;
}

/* resid_pre of layer 0 = hook_embed + hook_pos_embed: the embedding gradients from
 * dres, without the entries a writing hook changed at either point. Gradient hooks at
 * hook_pos_embed, then hook_embed, get copies of dres (in ga: two [N, D]); what they
 * leave goes to W_pos, W_E. bs: [N, D] when a writing hook changed either point or a
 * gradient hook sits at either (else NULL: the plain backward). */
static int embed_backward(induct_model *m, const induct__pass *p, const float *dres, float *bs,
                          float *ga) {
    const induct_model_config *c = &m->cfg;
    size_t N = (size_t)p->B * p->T, D = c->d_model;
    int nt = induct__nt(m), standard = c->positional == INDUCT_POS_STANDARD;
    const float *de = dres, *dp = dres;
    int changed = 0;
    if (standard && grad_hooked(p, INDUCT__HP_POS_EMBED, 0)) {
        memcpy(ga, dres, N * D * sizeof *ga);
        INDUCT_TRY(fire_grad(m, p, INDUCT__HP_POS_EMBED, 0, ga, &changed));
        if (changed) dp = ga;
    }
    if (grad_hooked(p, INDUCT__HP_EMBED, 0)) {
        memcpy(ga + N * D, dres, N * D * sizeof *ga);
        INDUCT_TRY(fire_grad(m, p, INDUCT__HP_EMBED, 0, ga + N * D, &changed));
        if (changed) de = ga + N * D;
    }
    const uint8_t *me = mask_of(p, INDUCT__HP_EMBED, 0), *mp = mask_of(p, INDUCT__HP_POS_EMBED, 0);
    if (!bs || (!me && !mp && de == dres && dp == dres)) {
        induct__embed_backward_par(G(m->W_E), standard ? G(m->W_pos) : NULL, dres, p->tokens,
                                   p->B, p->T, D, nt);
        return INDUCT_OK;
    }
    for (size_t i = 0; i < N * D; i++) bs[i] = me && me[i] ? 0.0f : de[i];
    induct__embed_backward_par(G(m->W_E), NULL, bs, p->tokens, p->B, p->T, D, nt);
    if (!standard) return INDUCT_OK;
    for (size_t i = 0; i < N * D; i++) bs[i] = mp && mp[i] ? 0.0f : dp[i];
    induct__pos_backward(G(m->W_pos), bs, p->B, p->T, D);
    return INDUCT_OK;
}

/* Layer l's MLP output, resid_post = resid_mid + mlp_out with mlp_out = mlp_post W_out
 * + b_out: the gradients of W_out and b_out and dpost (overwritten) from dres = d
 * resid_post. Entries of hook_mlp_out a writing hook changed pass no gradient back;
 * gradient hooks there get a copy of dres (in ga) and what they leave goes to W_out,
 * b_out and mlp_post (dres itself flows on to resid_mid). bs: [N, D] when either
 * happens (backward_scratch). */
static int mlp_out_backward(induct_model *m, const induct__pass *p, uint32_t l,
                            const float *dres, float *dpost, float *bs, float *ga) {
    const induct__layer_off *o = &m->L[l];
    const induct__layer_act *a = &m->A[l];
    size_t N = (size_t)p->B * p->T, D = m->cfg.d_model, M = m->cfg.d_mlp;
    const float *dout = dres; /* d mlp_out */
    int changed = 0;
    if (grad_hooked(p, INDUCT__HP_MLP_OUT, l)) {
        memcpy(ga, dres, N * D * sizeof *ga);
        INDUCT_TRY(fire_grad(m, p, INDUCT__HP_MLP_OUT, l, ga, &changed));
        if (changed) dout = ga;
    }
    const uint8_t *mk = mask_of(p, INDUCT__HP_MLP_OUT, l);
    if (mk) {
        for (size_t i = 0; i < N * D; i++) bs[i] = mk[i] ? 0.0f : dout[i];
        dout = bs;
    }
    linear_backward_new(m, dpost, G(o->W_out), G(o->b_out), dout, W(a->mlp_post), P(o->W_out), N,
                        M, D);
    return INDUCT_OK;
}

static int backward_pass(induct_model *m, const induct__pass *p, float *bs, float *gs,
                         grad_scratch gl);

int induct__backward(induct_model *m, const induct__pass *p) {
    size_t nb = backward_scratch(m, p);
    grad_scratch gl = grad_scratch_of(m, p);
    INDUCT_FAIL_IF(gl.total > INDUCT__WS_FLOATS_MAX || nb > INDUCT__WS_FLOATS_MAX - gl.total,
                   INDUCT_ELIMIT,
                   "the gradient hooks' scratch for batch %u x seq_len %u is above 2^36 floats",
                   p->B, p->T);
    size_t n = nb + gl.total;
    if (!n) return backward_pass(m, p, NULL, NULL, gl);
    uint64_t bytes = (uint64_t)n * sizeof(float);
    INDUCT_TRY(induct__model_reserve(m, bytes, 0, "the backward scratch of hooks"));
    float *bs = malloc(n * sizeof *bs);
    INDUCT_FAIL_IF(!bs, INDUCT_ENOMEM, "out of memory: %zu floats of backward scratch", n);
    induct__model_held(m, bytes, 0);
    int rc = backward_pass(m, p, nb ? bs : NULL, gl.total ? bs + nb : NULL, gl);
    free(bs);
    induct__model_held(m, 0, bytes);
    return rc;
}

/* The unembedding's backward from a caller's d(logits) (induct_model_backward_from_logits):
 * p->logits_fn fills d(logits) [N, V] from the logits the forward left (a_logits); then
 * d(lnf) = d(logits) W_U^T (into unembed_dinp), W_U's gradient lnf^T d(logits) and b_U's
 * the column sums. The d(logits) buffer counts against the model's memory limit. */
static int unembed_backward_from_logits(induct_model *m, const induct__pass *p) {
    const induct_model_config *c = &m->cfg;
    size_t N = (size_t)p->B * p->T, D = c->d_model, V = c->d_vocab, n;
    int nt = induct__nt(m);
    INDUCT_FAIL_IF(!induct__mul(N, V, &n) || n > INDUCT__WS_FLOATS_MAX, INDUCT_ELIMIT,
                   "d(logits) for batch %u x seq_len %u x d_vocab %zu is above 2^36 floats",
                   p->B, p->T, V);
    uint64_t bytes = (uint64_t)n * sizeof(float);
    INDUCT_TRY(induct__model_reserve(m, bytes, 0, "d(logits)"));
    float *dl = calloc(n, sizeof *dl);
    INDUCT_FAIL_IF(!dl, INDUCT_ENOMEM, "out of memory: %zu floats of d(logits)", n);
    induct__model_held(m, bytes, 0);
    int rc = p->logits_fn(p->logits_user, W(m->a_logits), dl, p->B, p->T, (uint32_t)V);
    if (rc != 0) {
        rc = induct__fail(INDUCT_EINTERRUPTED, "the d(logits) function returned %d", rc);
    } else {
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (!isfinite(dl[i])) bad = i;
        if (bad < n)
            rc = induct__fail(INDUCT_ENUMERIC,
                              "the d(logits) function left %g at batch %zu, position %zu, "
                              "token %zu", (double)dl[bad], bad / V / p->T, bad / V % p->T,
                              bad % V);
    }
    if (rc == INDUCT_OK) {
        const float *lnf = c->layer_norm ? W(m->a_lnf) : W(m->a_resid_final);
        induct__gemm_args in = {0, 1, N, D, V, 1.0f, dl, V, P(m->W_U), V, 0.0f,
                                unembed_dinp(m), D};
        induct__gemm_args w = {1, 0, D, V, N, 1.0f, lnf, D, dl, V, 0.0f, G(m->W_U), V};
        induct__gemm2(nt, &in, &w);
        induct__colsum(G(m->b_U), dl, N, V, V, nt);
    }
    free(dl);
    induct__model_held(m, 0, bytes);
    return rc;
}

/* The gradient hooks at (point, layer) on g, the backward's own buffer of that gradient
 * (what they leave flows on as it is). */
#define GRAD(point, l, g)                                                                  \
    do {                                                                                   \
        if (p->n_grad_hooks) INDUCT_TRY(fire_grad(m, p, (point), (l), (g), NULL));         \
    } while (0)

static int backward_pass(induct_model *m, const induct__pass *p, float *bs, float *gs,
                         grad_scratch gl) {
    const int32_t *tokens = p->tokens;
    uint32_t B = p->B, T = p->T;
    int fold = use_fold(m, p);
    const induct_model_config *c = &m->cfg;
    int nt = induct__nt(m);
    size_t N = (size_t)B * T, D = c->d_model, H = c->n_heads, dh = c->d_head, HD = H * dh;
    size_t V = c->d_vocab, M = c->d_mlp;
    float *ga = gs ? gs + gl.a : NULL, *gr = gs ? gs + gl.r : NULL, *gsc = gs ? gs + gl.s : NULL;
    induct__zero(m->grads, m->n_params, nt);
    float *dres = W(m->g_resid), *dh_ = m->g_h != INDUCT_NONE ? W(m->g_h) : NULL;
    /* unembed: logits = lnf W_U + b_U; the forward left d(lnf) (unembed_dinp) and the
     * row blocks' terms of W_U's and b_U's gradients (g_wt), or, for a caller's metric of
     * the logits, the logits themselves */
    if (p->logits_fn)
        INDUCT_TRY(unembed_backward_from_logits(m, p));
    else
        induct__unembed_grad_sum(G(m->W_U), G(m->b_U), W(m->g_wt), N, D, V, nt);
    if (c->layer_norm) {
        memset(dres, 0, N * D * sizeof(float));
        INDUCT_TRY(ln_backward(m, p, INDUCT__HP_LNF, 0, dres, G(m->lnf_w), G(m->lnf_b), dh_,
                               W(m->a_resid_final), W(m->a_lnf_mean), W(m->a_lnf_rstd),
                               P(m->lnf_w), ga));
    }
    /* dres now holds d(resid_post of the last layer) */
    for (uint32_t li = c->n_layers; li-- > 0;) {
        const induct__layer_off *o = &m->L[li];
        const induct__layer_act *a = &m->A[li];
        GRAD(INDUCT__HP_RESID_POST, li, dres);
        mask_grad(p, INDUCT__HP_RESID_POST, li, dres);
        if (M) {
            /* resid_post = resid_mid + W_out(gelu(W_in LN2(resid_mid))) */
            float *dpost = W(m->g_mlp), *dpre = W(m->g_mlp2);
            INDUCT_TRY(mlp_out_backward(m, p, li, dres, dpost, bs, ga));
            GRAD(INDUCT__HP_MLP_POST, li, dpost);
            mask_grad(p, INDUCT__HP_MLP_POST, li, dpost);
            induct__gelu_backward_fast(dpre, W(a->mlp_pre), dpost, N * M, nt);
            GRAD(INDUCT__HP_MLP_PRE, li, dpre);
            mask_grad(p, INDUCT__HP_MLP_PRE, li, dpre);
            linear_backward_new(m, dh_, G(o->W_in), G(o->b_in), dpre, W(a->ln2), P(o->W_in), N, D,
                                M);
            if (c->layer_norm)
                INDUCT_TRY(ln_backward(m, p, INDUCT__HP_LN2, li, dres, G(o->ln2_w), G(o->ln2_b),
                                       dh_, W(a->resid_mid), W(a->ln2_mean), W(a->ln2_rstd),
                                       P(o->ln2_w), ga));
            else
                induct__add_inplace(dres, dh_, N * D, nt);
            GRAD(INDUCT__HP_RESID_MID, li, dres);
            mask_grad(p, INDUCT__HP_RESID_MID, li, dres);
        }
        /* attention output: resid_mid = resid_pre + z W_O + b_O */
        float *dz = W(m->g_z);
        INDUCT_TRY(attn_out_backward(m, p, li, dres, dz, bs, ga, gr));
        GRAD(INDUCT__HP_Z, li, dz);
        mask_grad(p, INDUCT__HP_Z, li, dz);
        float *dq = W(m->g_q), *dk = W(m->g_k), *dv = W(m->g_v);
        int k_changed = 0, changed = 0; /* whether gradient hooks changed d scores, d k */
        INDUCT_TRY(attn_backward(m, p, li, dq, dk, dv, dz, gsc, &k_changed));
        if (c->smeared_keys) {
            INDUCT_TRY(fire_grad(m, p, INDUCT__HP_K_SMEARED, li, dk, &changed));
            k_changed |= changed;
            mask_grad(p, INDUCT__HP_K_SMEARED, li, dk);
        }
        GRAD(INDUCT__HP_V, li, dv);
        mask_grad(p, INDUCT__HP_V, li, dv);
        if (c->smeared_keys) {
            /* dk is d(smeared k); turn it into d(k_raw), reusing g_z (dz no longer needed) */
            float *dkr = W(m->g_z), *dal = W(m->g_alpha);
            induct__smear_backward(dkr, dal, dk, W(a->k_raw), P(o->alpha), B, T, H, dh, nt);
            memcpy(dk, dkr, N * HD * sizeof(float));
            for (size_t h = 0; h < H; h++) {
                double s = 0.0;
                for (size_t b = 0; b < B; b++) s += dal[b * H + h];
                G(o->alpha)[h] += (float)s;
            }
        }
        INDUCT_TRY(fire_grad(m, p, INDUCT__HP_K, li, dk, &changed));
        k_changed |= changed;
        mask_grad(p, INDUCT__HP_K, li, dk);
        GRAD(INDUCT__HP_Q, li, dq);
        mask_grad(p, INDUCT__HP_Q, li, dq);
        /* b_K adds q·b_K to every score of a query, which the softmax ignores: its
         * gradient is exactly 0 and stays the 0 the buffer was cleared to (summing dk
         * would give rounding noise, which Adam's normalisation turns into updates),
         * unless a hook set some scores (then the shift changes the pattern) or a
         * gradient hook changed the gradient at the scores or the keys */
        if (mask_of(p, INDUCT__HP_SCORES, li) || k_changed)
            induct__colsum(G(o->b_K), dk, N, HD, HD, nt);
        if (li == 0 && fold) {
            /* the projections' share of d resid_pre goes straight to W_E and W_pos */
            fold_backward(m, tokens, B, T, dq, dk, dv);
            continue;
        }
        /* projections: q = qk_in W_Q + b_Q, k = qk_in W_K + b_K, v = h W_V + b_V */
        int separate_qk = a->qk_in != a->ln1;
        float *dqk = separate_qk ? W(m->g_qk) : NULL;
        /* d(LN1 output) into dh_; without LN that is d resid_pre, accumulated straight
         * into dres (no separate sum). The first product into dh_ or dqk overwrites it. */
        float *dx = c->layer_norm ? dh_ : dres;
        float beta0 = c->layer_norm ? 0.0f : 1.0f;
        float *dqk_target = separate_qk ? dqk : dx;
        proj_backward(m, dqk_target, separate_qk ? 0.0f : beta0, G(o->W_Q), dq, W(a->qk_in),
                      W(a->wq), N, D, H, dh);
        proj_backward(m, dqk_target, 1.0f, G(o->W_K), dk, W(a->qk_in), W(a->wk), N, D, H, dh);
        proj_backward(m, dx, separate_qk ? beta0 : 1.0f, G(o->W_V), dv, W(a->ln1), W(a->wv), N,
                      D, H, dh);
        induct__colsum(G(o->b_Q), dq, N, HD, HD, nt);
        induct__colsum(G(o->b_V), dv, N, HD, HD, nt); /* b_K: above */
        if (separate_qk) {
            induct__pos_backward(G(m->W_pos), dqk, B, T, D);
            induct__add_inplace(dx, dqk, N * D, nt);
        }
        /* with LN: dh_ = d(LN1 output); dres += through LN1 */
        if (c->layer_norm)
            INDUCT_TRY(ln_backward(m, p, INDUCT__HP_LN1, li, dres, G(o->ln1_w), G(o->ln1_b), dh_,
                                   W(a->resid_pre), W(a->ln1_mean), W(a->ln1_rstd), P(o->ln1_w),
                                   ga));
        GRAD(INDUCT__HP_RESID_PRE, li, dres);
        mask_grad(p, INDUCT__HP_RESID_PRE, li, dres);
    }
    return embed_backward(m, p, dres, bs, ga);
}
#undef GRAD
