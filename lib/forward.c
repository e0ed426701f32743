/* Forward and backward passes: the model's data path, built from kernels.c.
 *
 * Per layer l (TransformerLens order, row vectors):
 *   h      = LN1(resid_pre)            (or resid_pre without LayerNorm)
 *   qk_in  = h + W_pos[t]              (shortformer; else qk_in = h)
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

#include "induct_internal.h"
#include "kernels.h"

#define P(off) (m->params + (off))
#define G(off) (m->grads + (off))
#define W(off) (m->ws + (off))

/* Lay out activations for (B, T); returns the total float count or 0 on overflow. */
static size_t layout(induct_model *m, uint32_t B, uint32_t T) {
    const induct_model_config *c = &m->cfg;
    size_t N = (size_t)B * T, D = c->d_model, HD = (size_t)c->n_heads * c->d_head;
    size_t V = c->d_vocab, M = c->d_mlp, H = c->n_heads;
    size_t off = 0;
    int bad = 0;
    size_t tmp = 0;
#define ALLOC(dst, a, b)                                                                   \
    do {                                                                                   \
        if (!induct__mul((a), (b), &tmp) || !induct__add(off, tmp, &off)) bad = 1;         \
        (dst) = off - tmp;                                                                 \
    } while (0)
#define NONE_(dst) (dst) = INDUCT_NONE
    size_t ND = N * D; /* N <= 2^32, D < 2^32: checked below by ALLOC on products */
    size_t BH, TT, att_n;
    if (!induct__mul((size_t)B, H, &BH) || !induct__mul((size_t)T, T, &TT) ||
        !induct__mul(BH, TT, &att_n) || !induct__mul(N, D, &ND))
        return 0;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        induct__layer_act *a = &m->A[l];
        ALLOC(a->resid_pre, N, D);
        if (c->layer_norm) {
            ALLOC(a->ln1, N, D);
            ALLOC(a->ln1_mean, N, 1);
            ALLOC(a->ln1_rstd, N, 1);
        } else {
            a->ln1 = a->resid_pre;
            NONE_(a->ln1_mean);
            NONE_(a->ln1_rstd);
        }
        if (c->positional == INDUCT_POS_SHORTFORMER) ALLOC(a->qk_in, N, D);
        else a->qk_in = a->ln1;
        ALLOC(a->wq, D, HD);
        ALLOC(a->wk, D, HD);
        ALLOC(a->wv, D, HD);
        ALLOC(a->q, N, HD);
        ALLOC(a->k_raw, N, HD);
        if (c->smeared_keys) ALLOC(a->k, N, HD);
        else a->k = a->k_raw;
        ALLOC(a->v, N, HD);
        ALLOC(a->att, att_n, 1);
        ALLOC(a->z, N, HD);
        if (M) {
            ALLOC(a->resid_mid, N, D);
            if (c->layer_norm) {
                ALLOC(a->ln2, N, D);
                ALLOC(a->ln2_mean, N, 1);
                ALLOC(a->ln2_rstd, N, 1);
            } else {
                a->ln2 = a->resid_mid;
                NONE_(a->ln2_mean);
                NONE_(a->ln2_rstd);
            }
            ALLOC(a->mlp_pre, N, M);
            ALLOC(a->mlp_post, N, M);
        } else {
            NONE_(a->resid_mid);
            NONE_(a->ln2);
            NONE_(a->ln2_mean);
            NONE_(a->ln2_rstd);
            NONE_(a->mlp_pre);
            NONE_(a->mlp_post);
        }
    }
    ALLOC(m->a_resid_final, N, D);
    if (c->layer_norm) {
        ALLOC(m->a_lnf, N, D);
        ALLOC(m->a_lnf_mean, N, 1);
        ALLOC(m->a_lnf_rstd, N, 1);
    } else {
        m->a_lnf = m->a_resid_final;
    }
    ALLOC(m->a_logits, N, V);
    ALLOC(m->a_losses, N, 1);
    /* backward scratch */
    ALLOC(m->g_resid, N, D);
    ALLOC(m->g_h, N, D);
    ALLOC(m->g_qk, N, D);
    ALLOC(m->g_q, N, HD);
    ALLOC(m->g_k, N, HD);
    ALLOC(m->g_v, N, HD);
    ALLOC(m->g_z, N, HD);
    if (M) {
        ALLOC(m->g_mlp, N, M);
        ALLOC(m->g_mlp2, N, M);
    }
    ALLOC(m->g_logits, N, V);
    ALLOC(m->g_att, (size_t)c->n_threads * T, T);
    ALLOC(m->g_alpha, BH, 1);
    ALLOC(m->g_w, D, HD);
#undef ALLOC
#undef NONE_
    return bad ? 0 : off;
}

/* packed[d][h*dh + j] = W[h][d][j] */
static void pack_heads(float *packed, const float *W, size_t D, size_t H, size_t dh) {
    size_t HD = H * dh;
    for (size_t h = 0; h < H; h++)
        for (size_t d = 0; d < D; d++)
            memcpy(packed + d * HD + h * dh, W + (h * D + d) * dh, dh * sizeof(float));
}

/* y = x Wp (+ b), Wp the packed [D, HD] copy of a [H, D, dh] weight:
 * dx += dy Wp^T ; dW[h][d][j] += (x^T dy)[d][h*dh + j]. */
static void proj_backward(induct_model *m, float *dx, float *dW, const float *dy, const float *x,
                          const float *Wp, size_t N, size_t D, size_t H, size_t dh) {
    int nt = induct__nt(m);
    size_t HD = H * dh;
    float *gw = W(m->g_w);
    induct__gemm(nt, 1, 0, D, HD, N, 1.0f, x, D, dy, HD, 0.0f, gw, HD);
    for (size_t h = 0; h < H; h++)
        for (size_t d = 0; d < D; d++) {
            float *dst = dW + (h * D + d) * dh;
            const float *src = gw + d * HD + h * dh;
            for (size_t j = 0; j < dh; j++) dst[j] += src[j];
        }
    induct__gemm(nt, 0, 1, N, D, HD, 1.0f, dy, HD, Wp, HD, 1.0f, dx, D);
}

int induct__model_workspace(induct_model *m, uint32_t B, uint32_t T) {
    if (m->ws && m->ws_B == B && m->ws_T == T) return INDUCT_OK;
    /* layout() rewrites every activation offset: from here on the offsets describe
     * (B, T), not the cached shape, so a failure must forget the cached shape too
     * (else the next call with the old shape would use the new offsets). */
    m->ws_B = m->ws_T = 0;
    size_t need = layout(m, B, T);
    INDUCT_FAIL_IF(need == 0, INDUCT_ELIMIT,
                   "workspace for batch %u x seq_len %u overflows size_t", B, T);
    INDUCT_FAIL_IF(need > ((size_t)1 << 36), INDUCT_ELIMIT,
                   "workspace for batch %u x seq_len %u needs %zu floats (limit 2^36)", B, T,
                   need);
    if (need > m->ws_cap) {
        float *w = malloc(need * sizeof(float));
        if (!w) {
            return induct__fail(INDUCT_ENOMEM, "out of memory: workspace of %zu floats", need);
        }
        free(m->ws);
        m->ws = w;
        m->ws_cap = need;
    }
    m->ws_B = B;
    m->ws_T = T;
    return INDUCT_OK;
}

int induct__forward(induct_model *m, const int32_t *tokens, uint32_t B, uint32_t T,
                    double *mean_loss) {
    if (m->abl.active && m->abl.phase == INDUCT__ABL_PHASE_IDLE) /* analysis (issue 4) */
        return induct__ablation_forward(m, tokens, B, T, mean_loss);
    INDUCT_TRY(induct__model_workspace(m, B, T));
    const induct_model_config *c = &m->cfg;
    int nt = induct__nt(m);
    size_t N = (size_t)B * T, D = c->d_model, H = c->n_heads, dh = c->d_head, HD = H * dh;
    size_t V = c->d_vocab, M = c->d_mlp;
    int standard = c->positional == INDUCT_POS_STANDARD;
    induct__embed_forward(W(m->A[0].resid_pre), tokens, P(m->W_E), standard ? P(m->W_pos) : NULL,
                          B, T, D, nt);
    for (uint32_t l = 0; l < c->n_layers; l++) {
        const induct__layer_off *o = &m->L[l];
        const induct__layer_act *a = &m->A[l];
        float *out_resid = (l + 1 < c->n_layers) ? W(m->A[l + 1].resid_pre) : W(m->a_resid_final);
        float *attn_resid = M ? W(a->resid_mid) : out_resid;
        if (c->layer_norm)
            induct__layernorm_forward(W(a->ln1), W(a->ln1_mean), W(a->ln1_rstd), W(a->resid_pre),
                                      P(o->ln1_w), P(o->ln1_b), N, D, nt);
        if (c->positional == INDUCT_POS_SHORTFORMER)
            induct__add_pos(W(a->qk_in), W(a->ln1), P(m->W_pos), B, T, D, nt);
        /* W_Q [H, D, dh] -> [D, H*dh] so each projection is one GEMM into [N, H, dh] */
        pack_heads(W(a->wq), P(o->W_Q), D, H, dh);
        pack_heads(W(a->wk), P(o->W_K), D, H, dh);
        pack_heads(W(a->wv), P(o->W_V), D, H, dh);
        induct__linear_forward(W(a->q), W(a->qk_in), W(a->wq), P(o->b_Q), N, D, HD, nt);
        induct__linear_forward(W(a->k_raw), W(a->qk_in), W(a->wk), P(o->b_K), N, D, HD, nt);
        induct__linear_forward(W(a->v), W(a->ln1), W(a->wv), P(o->b_V), N, D, HD, nt);
        if (c->smeared_keys)
            induct__smear_forward(W(a->k), W(a->k_raw), P(o->alpha), B, T, H, dh, nt);
        induct__attention_forward(W(a->z), W(a->att), W(a->q), W(a->k), W(a->v), B, T, H, dh, nt);
        if (m->abl.active) induct__ablation_hook(m, l, B, T); /* analysis (issue 4) */
        /* resid_mid = resid_pre + z W_O + b_O ; W_O [H, dh, D] is [HD, D] row-major */
        const float *rp = W(a->resid_pre), *bO = P(o->b_O);
        for (size_t n = 0; n < N; n++)
            for (size_t i = 0; i < D; i++) attn_resid[n * D + i] = rp[n * D + i] + bO[i];
        induct__gemm(nt, 0, 0, N, D, HD, 1.0f, W(a->z), HD, P(o->W_O), D, 1.0f, attn_resid, D);
        if (M) {
            if (c->layer_norm)
                induct__layernorm_forward(W(a->ln2), W(a->ln2_mean), W(a->ln2_rstd),
                                          W(a->resid_mid), P(o->ln2_w), P(o->ln2_b), N, D, nt);
            induct__linear_forward(W(a->mlp_pre), W(a->ln2), P(o->W_in), P(o->b_in), N, D, M, nt);
            induct__gelu_forward(W(a->mlp_post), W(a->mlp_pre), N * M, nt);
            memcpy(out_resid, W(a->resid_mid), N * D * sizeof(float));
            induct__linear_forward(W(m->g_resid), W(a->mlp_post), P(o->W_out), P(o->b_out), N, M,
                                   D, nt);
            induct__add_inplace(out_resid, W(m->g_resid), N * D, nt);
        }
    }
    if (c->layer_norm)
        induct__layernorm_forward(W(m->a_lnf), W(m->a_lnf_mean), W(m->a_lnf_rstd),
                                  W(m->a_resid_final), P(m->lnf_w), P(m->lnf_b), N, D, nt);
    induct__linear_forward(W(m->a_logits), W(m->a_lnf), P(m->W_U), P(m->b_U), N, D, V, nt);
    double sum = induct__xent_forward(W(m->a_losses), W(m->a_logits), tokens, B, T, V, nt);
    double count = (double)B * (T - 1);
    if (m->loss_only) { /* datasets (issue 3): one scored position per row */
        const float *ls = W(m->a_losses);
        sum = 0.0;
        for (size_t b = 0; b < B; b++) sum += ls[b * (T - 1) + m->loss_only - 1];
        count = (double)B;
    }
    double mean = sum / count;
    INDUCT_FAIL_IF(!isfinite(mean), INDUCT_ENUMERIC, "forward: the loss is not finite (%g)", mean);
    if (mean_loss) *mean_loss = mean;
    return INDUCT_OK;
}

int induct__backward(induct_model *m, const int32_t *tokens, uint32_t B, uint32_t T) {
    INDUCT_FAIL_IF(m->abl.active, INDUCT_ESTATE, /* analysis (issue 4) */
                   "backward: %u head(s) are ablated; clear the ablations first",
                   m->abl.active);
    const induct_model_config *c = &m->cfg;
    int nt = induct__nt(m);
    size_t N = (size_t)B * T, D = c->d_model, H = c->n_heads, dh = c->d_head, HD = H * dh;
    size_t V = c->d_vocab, M = c->d_mlp;
    memset(m->grads, 0, m->n_params * sizeof(float));
    float *dres = W(m->g_resid), *dh_ = W(m->g_h);
    float scale = (float)(1.0 / ((double)B * (m->loss_only ? 1 : T - 1)));
    induct__xent_backward(W(m->g_logits), W(m->a_logits), tokens, B, T, V, scale, nt);
    if (m->loss_only) /* datasets (issue 3): only the scored position has a gradient */
        for (size_t n = 0; n < N; n++)
            if (n % T != m->loss_only - 1) memset(W(m->g_logits) + n * V, 0, V * sizeof(float));
    /* unembed: logits = lnf W_U + b_U */
    memset(dh_, 0, N * D * sizeof(float));
    induct__linear_backward(dh_, G(m->W_U), G(m->b_U), W(m->g_logits), W(m->a_lnf), P(m->W_U), N,
                            D, V, nt);
    if (c->layer_norm) {
        memset(dres, 0, N * D * sizeof(float));
        induct__layernorm_backward(dres, G(m->lnf_w), G(m->lnf_b), dh_, W(m->a_resid_final),
                                   W(m->a_lnf_mean), W(m->a_lnf_rstd), P(m->lnf_w), N, D, nt);
    } else {
        memcpy(dres, dh_, N * D * sizeof(float));
    }
    /* dres now holds d(resid_post of the last layer) */
    for (uint32_t li = c->n_layers; li-- > 0;) {
        const induct__layer_off *o = &m->L[li];
        const induct__layer_act *a = &m->A[li];
        if (M) {
            /* resid_post = resid_mid + W_out(gelu(W_in LN2(resid_mid))) */
            float *dpost = W(m->g_mlp), *dpre = W(m->g_mlp2);
            memset(dpost, 0, N * M * sizeof(float));
            induct__linear_backward(dpost, G(o->W_out), G(o->b_out), dres, W(a->mlp_post),
                                    P(o->W_out), N, M, D, nt);
            induct__gelu_backward(dpre, W(a->mlp_pre), dpost, N * M, nt);
            memset(dh_, 0, N * D * sizeof(float));
            induct__linear_backward(dh_, G(o->W_in), G(o->b_in), dpre, W(a->ln2), P(o->W_in), N, D,
                                    M, nt);
            if (c->layer_norm)
                induct__layernorm_backward(dres, G(o->ln2_w), G(o->ln2_b), dh_, W(a->resid_mid),
                                           W(a->ln2_mean), W(a->ln2_rstd), P(o->ln2_w), N, D, nt);
            else
                induct__add_inplace(dres, dh_, N * D, nt);
        }
        /* attention output: resid_mid = resid_pre + z W_O + b_O */
        float *dz = W(m->g_z);
        induct__colsum(G(o->b_O), dres, N, D, D, nt);
        induct__gemm(nt, 0, 1, N, HD, D, 1.0f, dres, D, P(o->W_O), D, 0.0f, dz, HD);
        induct__gemm(nt, 1, 0, HD, D, N, 1.0f, W(a->z), HD, dres, D, 1.0f, G(o->W_O), D);
        float *dq = W(m->g_q), *dk = W(m->g_k), *dv = W(m->g_v);
        induct__attention_backward(dq, dk, dv, W(m->g_att), dz, W(a->q), W(a->k), W(a->v),
                                   W(a->att), B, T, H, dh, nt);
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
        /* projections: q = qk_in W_Q + b_Q, k = qk_in W_K + b_K, v = h W_V + b_V */
        float *dqk = W(m->g_qk);
        int separate_qk = a->qk_in != a->ln1;
        memset(dh_, 0, N * D * sizeof(float));
        float *dqk_target = separate_qk ? dqk : dh_;
        if (separate_qk) memset(dqk, 0, N * D * sizeof(float));
        proj_backward(m, dqk_target, G(o->W_Q), dq, W(a->qk_in), W(a->wq), N, D, H, dh);
        proj_backward(m, dqk_target, G(o->W_K), dk, W(a->qk_in), W(a->wk), N, D, H, dh);
        proj_backward(m, dh_, G(o->W_V), dv, W(a->ln1), W(a->wv), N, D, H, dh);
        induct__colsum(G(o->b_Q), dq, N, HD, HD, nt);
        induct__colsum(G(o->b_K), dk, N, HD, HD, nt);
        induct__colsum(G(o->b_V), dv, N, HD, HD, nt);
        if (separate_qk) {
            induct__pos_backward(G(m->W_pos), dqk, B, T, D);
            induct__add_inplace(dh_, dqk, N * D, nt);
        }
        /* dh_ = d(LN1 output or resid_pre); dres += through LN1 */
        if (c->layer_norm)
            induct__layernorm_backward(dres, G(o->ln1_w), G(o->ln1_b), dh_, W(a->resid_pre),
                                       W(a->ln1_mean), W(a->ln1_rstd), P(o->ln1_w), N, D, nt);
        else
            induct__add_inplace(dres, dh_, N * D, nt);
    }
    induct__embed_backward(G(m->W_E),
                           c->positional == INDUCT_POS_STANDARD ? G(m->W_pos) : NULL, dres,
                           tokens, B, T, D);
    return INDUCT_OK;
}

/* ---- public passes ------------------------------------------------------------- */

INDUCT_API int induct_model_forward(induct_model *m, const int32_t *tokens, uint32_t B,
                                    uint32_t T, float *logits_out, size_t logits_cap,
                                    float *losses_out, size_t losses_cap, double *mean_loss_out) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_forward: model is NULL");
    INDUCT_TRY(induct__model_validate_tokens(m, tokens, B, T));
    size_t n_logits = (size_t)B * T * m->cfg.d_vocab, n_losses = (size_t)B * (T - 1);
    INDUCT_FAIL_IF(logits_out && logits_cap < n_logits, INDUCT_EBUFSIZE,
                   "induct_model_forward: logits need %zu floats, buffer holds %zu", n_logits,
                   logits_cap);
    INDUCT_FAIL_IF(losses_out && losses_cap < n_losses, INDUCT_EBUFSIZE,
                   "induct_model_forward: losses need %zu floats, buffer holds %zu", n_losses,
                   losses_cap);
    double mean;
    INDUCT_TRY(induct__forward(m, tokens, B, T, &mean));
    if (logits_out) memcpy(logits_out, W(m->a_logits), n_logits * sizeof(float));
    if (losses_out) memcpy(losses_out, W(m->a_losses), n_losses * sizeof(float));
    if (mean_loss_out) *mean_loss_out = mean;
    return INDUCT_OK;
}

INDUCT_API int induct_model_backward(induct_model *m, const int32_t *tokens, uint32_t B,
                                     uint32_t T, double *mean_loss_out) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_backward: model is NULL");
    INDUCT_TRY(induct__model_validate_tokens(m, tokens, B, T));
    double mean;
    INDUCT_TRY(induct__forward(m, tokens, B, T, &mean));
    INDUCT_TRY(induct__backward(m, tokens, B, T));
    if (mean_loss_out) *mean_loss_out = mean;
    return INDUCT_OK;
}

INDUCT_API int induct_model_attention(induct_model *m, const int32_t *tokens, uint32_t T,
                                      float *out, size_t out_cap, size_t *out_len) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_attention: model is NULL");
    INDUCT_TRY(induct__model_validate_tokens(m, tokens, 1, T));
    size_t per = (size_t)T * T, need = (size_t)m->cfg.n_layers * m->cfg.n_heads * per;
    if (out_len) *out_len = need;
    INDUCT_FAIL_IF(!out || out_cap < need, INDUCT_EBUFSIZE,
                   "induct_model_attention: needs %zu floats, buffer holds %zu", need,
                   out ? out_cap : 0);
    INDUCT_TRY(induct__forward(m, tokens, 1, T, NULL));
    for (uint32_t l = 0; l < m->cfg.n_layers; l++)
        memcpy(out + (size_t)l * m->cfg.n_heads * per, W(m->A[l].att),
               m->cfg.n_heads * per * sizeof(float));
    return INDUCT_OK;
}
