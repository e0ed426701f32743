/* The workspace of a model's passes: the layout of every activation for a (B, T) in one
 * buffer (offsets in floats, induct__layer_act), its limits, and its allocation. */
#define _DEFAULT_SOURCE /* madvise(MADV_HUGEPAGE) for the workspace (Linux) */
#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "kernels/kernels.h"
#include "model.h"


/* Layer 0 without LayerNorm reads exactly W_E[tok] (+ W_pos[t]): its Q, K and V are then
 * rows of the tables W_E W_X and W_pos W_X (X = Q, K, V), and the weight and embedding
 * gradients of those projections follow from d X summed per token id and per position.
 * Mathematically the same model; it replaces three [N, D] x [D, H d_head] products (and
 * six in the backward pass) by products with d_vocab + T rows, so it is used only when
 * that is at most half of N = B T. Whether it is used depends on (B, T), never on the
 * thread count. */
int induct__fold_layer0(const induct_model *m, uint32_t B, uint32_t T) {
    const induct_model_config *c = &m->cfg;
    return !c->layer_norm && 2 * ((size_t)c->d_vocab + T) <= (size_t)B * T;
}


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
        if (induct__qk_reads_pos(c, l)) ALLOC(a->qk_in, N, D);
        else a->qk_in = a->ln1;
        ALLOC(a->wq, D, HD);
        ALLOC(a->wk, D, HD);
        ALLOC(a->wv, D, HD);
        ALLOC(a->q, N, HD);
        ALLOC(a->k_raw, N, HD);
        if (c->smeared_keys) ALLOC(a->k, N, HD);
        else a->k = a->k_raw;
        ALLOC(a->v, N, HD);
        /* the pattern starts on 64 bytes (the workspace is 64-byte aligned): the attention
         * forward's streaming stores need 32 */
        if (!induct__add(off, 15, &tmp)) bad = 1;
        off = tmp & ~(size_t)15;
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
    /* d(LN output) or d(MLP input): attention-only models without LN need none */
    if (c->layer_norm || M) ALLOC(m->g_h, N, D);
    else NONE_(m->g_h);
    if (c->positional == INDUCT_POS_SHORTFORMER) ALLOC(m->g_qk, N, D); /* d(q/k input) */
    else NONE_(m->g_qk);
    ALLOC(m->g_q, N, HD);
    ALLOC(m->g_k, N, HD);
    ALLOC(m->g_v, N, HD);
    ALLOC(m->g_z, N, HD);
    if (M) {
        ALLOC(m->g_mlp, N, M);
        ALLOC(m->g_mlp2, N, M);
    }
    /* per-thread scratch of the fused attention kernels */
    ALLOC(m->g_att, (size_t)c->n_threads, induct__attn_scratch_floats(T, c->d_head));
    ALLOC(m->g_alpha, BH, 1);
    ALLOC(m->g_w, D, HD);
    { /* the unembedding's and the MLP's weight-gradient scratch */
        size_t a = induct__unembed_grad_scratch(N, D, V, (int)c->n_threads), b = 0, b2 = 0;
        if (M) {
            b = induct__linear_backward_scratch(N, D, M);
            b2 = induct__linear_backward_scratch(N, M, D);
        }
        if (b2 > b) b = b2;
        ALLOC(m->g_wt, a > b ? a : b, 1); /* SIZE_MAX on overflow: ALLOC fails */
    }
    if (induct__fold_layer0(m, B, T)) {
        ALLOC(m->f_tab, V + T, 3 * HD);
        ALLOC(m->f_grp, V + T, 3 * HD);
    } else {
        NONE_(m->f_tab);
        NONE_(m->f_grp);
    }
#undef ALLOC
#undef NONE_
    return bad ? 0 : off;
}

/* The workspace: 64-byte aligned (cache lines, vector loads). Large ones are 2 MiB
 * aligned and advised as transparent huge pages where Linux offers them: the first
 * touch of fresh memory costs several microseconds per 4 KiB page on some machines
 * (measured 4-17 us here), which dominates the first step and every evaluation at a
 * larger shape; with huge pages it is about 8x cheaper. Only from 32 MiB on, where
 * rounding to 2 MiB pages costs little resident memory. Advice only: the memory is
 * the same if the kernel declines. */
static float *ws_alloc(size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const size_t huge = (size_t)2 << 20;
    if (bytes >= 16 * huge) { /* small ones: the 2 MiB rounding would cost RSS */
        void *p = NULL;
        size_t b = (bytes + huge - 1) & ~(huge - 1);
        if (posix_memalign(&p, huge, b) != 0) return NULL;
        (void)madvise(p, b, MADV_HUGEPAGE);
        return p;
    }
#endif
    return aligned_alloc(64, (bytes + 63) & ~(size_t)63);
}

/* Lay out (B, T) and check the fixed limit; the cached shape is forgotten first. */
static int ws_need(induct_model *m, uint32_t B, uint32_t T, size_t *need) {
    /* layout() rewrites every activation offset: from here on the offsets describe
     * (B, T), not the cached shape, so the cached shape is forgotten (else the next
     * call with the old shape would use the new offsets) */
    m->ws_B = m->ws_T = 0;
    /* CBLAS takes int sizes: the B*T rows of every activation matrix must fit (the
     * other dimensions are bounded by the parameter limit) */
    INDUCT_FAIL_IF((uint64_t)B * T > INT32_MAX, INDUCT_ELIMIT,
                   "batch %u x seq_len %u is above 2^31 - 1 positions (BLAS sizes are int)",
                   B, T);
    *need = layout(m, B, T);
    INDUCT_FAIL_IF(*need == 0, INDUCT_ELIMIT,
                   "workspace for batch %u x seq_len %u overflows size_t", B, T);
    INDUCT_FAIL_IF(*need > INDUCT__WS_FLOATS_MAX, INDUCT_ELIMIT,
                   "workspace for batch %u x seq_len %u needs %zu floats (limit 2^36)", B, T,
                   *need);
    return INDUCT_OK;
}

int induct__model_check_workspace(induct_model *m, uint32_t B, uint32_t T, uint64_t extra) {
    size_t need = 0;
    INDUCT_TRY(ws_need(m, B, T, &need));
    uint64_t grow = need > m->ws_cap ? (uint64_t)(need - m->ws_cap) * sizeof(float) : 0;
    return induct__model_reserve(m, grow + extra, 0, "the activation workspace");
}

int induct__model_workspace(induct_model *m, uint32_t B, uint32_t T) {
    if (m->ws && m->ws_B == B && m->ws_T == T && m->ws_nt == m->cfg.n_threads) return INDUCT_OK;
    size_t need = 0;
    INDUCT_TRY(ws_need(m, B, T, &need));
    if (need > m->ws_cap) {
        uint64_t old = (uint64_t)m->ws_cap * sizeof(float), want = (uint64_t)need * sizeof(float);
        INDUCT_TRY(induct__model_reserve(m, want, old, "the activation workspace"));
        /* the old workspace goes first, so the peak is the new size only */
        free(m->ws);
        m->ws = NULL;
        m->ws_cap = 0;
        induct__model_held(m, 0, old);
        float *w = ws_alloc(need * sizeof(float));
        INDUCT_FAIL_IF(!w, INDUCT_ENOMEM, "out of memory: workspace of %zu floats", need);
        m->ws = w;
        m->ws_cap = need;
        induct__model_held(m, want, 0);
    }
    m->ws_B = B;
    m->ws_T = T;
    m->ws_nt = m->cfg.n_threads;
    return INDUCT_OK;
}
