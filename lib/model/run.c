/* The public passes over the one forward and backward pass (pass.c): forward with logits
 * and losses, in cache-sized chunks where only losses are wanted; with the caller's hooks
 * or a cache; backward with hooks; attention patterns. */
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define W(off) (m->ws + (off))

/* Sequences per chunk of a forward-only evaluation — the one chunking rule of every
 * evaluation over a set (induct__forward_chunks, the analysis suite's evaluation set,
 * the training driver): about 4096 tokens, so that the activations (above all the
 * [B, H, T, T] patterns) stay in the caches; at least the batch of the current workspace
 * for this T, which is already allocated and warm; at most `cap` sequences when cap > 0
 * (a caller's memory bound), rounded down to the unit that keeps the bits. */
uint32_t induct__forward_chunk_rows(const induct_model *m, uint32_t B, uint32_t T, uint32_t cap) {
#ifndef _OPENMP
    /* without OpenMP, OpenBLAS (its OpenMP build) threads each call itself and splits
     * rows by the call's size: chunks would change the bits, so none unless capped */
    (void)m;
    (void)T;
    if (cap && cap < B) return cap;
    return B ? B : 1;
#endif
    /* chunks of 48-row multiples (a multiple of induct__gemm's row blocks, kernels/gemm.c),
     * so that every row keeps its position in OpenBLAS's micro-tiles: one pass's bits */
    uint32_t g = 48, t = T;
    while (t) { /* g = 48 / gcd(T, 48) */
        uint32_t r = g % t;
        g = t;
        t = r;
    }
    g = 48 / g;
    uint32_t c = 4096 / T;
    if (m->ws && m->ws_T == T && m->ws_B > c) c = m->ws_B;
    c -= c % g;
    if (c < g) c = g;
    /* the caller's bound: a multiple of g keeps the bits; below g, float rounding may
     * differ from one pass */
    if (cap && cap < c) c = cap >= g ? cap - cap % g : cap;
    /* the same layer-0 path as one pass, or no chunks */
    if (c < B && induct__fold_layer0(m, c, T) != induct__fold_layer0(m, B, T))
        c = cap && cap < B ? c : B;
    return c < B ? c : (B ? B : 1);
}

int induct__forward_chunks(induct_model *m, const int32_t *tokens, uint32_t B, uint32_t T,
                           induct__chunk_fn fn, void *user, double *loss_sum) {
    uint32_t chunk = induct__forward_chunk_rows(m, B, T, 0);
    double sum = 0.0;
    for (uint32_t b0 = 0; b0 < B; b0 += chunk) {
        uint32_t nb = B - b0 < chunk ? B - b0 : chunk;
        induct__pass p = induct__pass_of(tokens + (size_t)b0 * T, nb, T);
        INDUCT_TRY(induct__forward(m, &p, NULL));
        /* continue one sequential sum: the same additions as a single pass */
        const float *l = W(m->a_losses);
        for (size_t i = 0, n = (size_t)nb * (T - 1); i < n; i++) sum += l[i];
        if (fn) INDUCT_TRY(fn(user, m, b0, nb));
    }
    if (loss_sum) *loss_sum = sum;
    return INDUCT_OK;
}

typedef struct stage_losses {
    float *dst;
    uint32_t T;
} stage_losses;

static int copy_losses(void *user, induct_model *m, uint32_t b0, uint32_t nb) {
    const stage_losses *sl = user;
    size_t row = sl->T - 1;
    memcpy(sl->dst + (size_t)b0 * row, W(m->a_losses), (size_t)nb * row * sizeof(float));
    return INDUCT_OK;
}

/* The output lengths for (B, T), checked against the caller's capacities. */
static int outputs_fit(const induct_model *m, const char *fn, uint32_t B, uint32_t T,
                       const float *logits_out, size_t logits_cap, const float *losses_out,
                       size_t losses_cap, size_t *n_logits, size_t *n_losses) {
    *n_losses = (size_t)B * (T - 1); /* < 2^64: B, T < 2^32 */
    INDUCT_FAIL_IF(!induct__mul((size_t)B * T, m->cfg.d_vocab, n_logits), INDUCT_ELIMIT,
                   "%s: batch %u x seq_len %u x d_vocab %u logits overflow size_t", fn, B, T,
                   m->cfg.d_vocab);
    INDUCT_FAIL_IF(logits_out && logits_cap < *n_logits, INDUCT_EBUFSIZE,
                   "%s: logits need %zu floats, buffer holds %zu", fn, *n_logits, logits_cap);
    INDUCT_FAIL_IF(losses_out && losses_cap < *n_losses, INDUCT_EBUFSIZE,
                   "%s: losses need %zu floats, buffer holds %zu", fn, *n_losses, losses_cap);
    return INDUCT_OK;
}

/* One pass p; logits and losses (checked by outputs_fit) copied out. */
static int pass_out(induct_model *m, const induct__pass *p, float *logits_out, size_t n_logits,
                    float *losses_out, size_t n_losses, double *mean_loss_out) {
    double mean;
    INDUCT_TRY(induct__forward(m, p, &mean));
    if (logits_out) memcpy(logits_out, W(m->a_logits), n_logits * sizeof(float));
    if (losses_out) memcpy(losses_out, W(m->a_losses), n_losses * sizeof(float));
    if (mean_loss_out) *mean_loss_out = mean;
    return INDUCT_OK;
}

INDUCT_API int induct_model_forward(induct_model *m, const int32_t *tokens, uint32_t B,
                                    uint32_t T, float *logits_out, size_t logits_cap,
                                    float *losses_out, size_t losses_cap, double *mean_loss_out) {
    const char *fn = "induct_model_forward";
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    INDUCT_TRY(induct__model_validate_tokens(m, tokens, B, T));
    size_t n_logits = 0, n_losses = 0;
    INDUCT_TRY(outputs_fit(m, fn, B, T, logits_out, logits_cap, losses_out, losses_cap,
                           &n_logits, &n_losses));
    if (logits_out) {
        induct__pass p = induct__pass_of(tokens, B, T);
        return pass_out(m, &p, logits_out, n_logits, losses_out, n_losses, mean_loss_out);
    }
    /* losses only: cache-sized chunks, staged so that the caller's buffer is untouched on
     * failure; the same bits and mean as one pass */
    float *staged = NULL;
    if (losses_out && B > induct__forward_chunk_rows(m, B, T, 0)) {
        staged = malloc(n_losses * sizeof *staged);
        INDUCT_FAIL_IF(!staged, INDUCT_ENOMEM, "out of memory staging %zu losses", n_losses);
    }
    stage_losses sl = {staged ? staged : losses_out, T};
    double sum;
    int rc = induct__forward_chunks(m, tokens, B, T, losses_out ? copy_losses : NULL, &sl, &sum);
    if (rc == INDUCT_OK && staged) memcpy(losses_out, staged, n_losses * sizeof *staged);
    free(staged);
    INDUCT_TRY(rc);
    if (mean_loss_out) *mean_loss_out = sum / ((double)B * (T - 1));
    return INDUCT_OK;
}

/* One pass with hooks (list 1); logits and losses copied out (buffers checked first). */
static int run_hooked(induct_model *m, const char *fn, const int32_t *tokens, uint32_t B,
                      uint32_t T, const induct__call_hooks *h, float *logits_out,
                      size_t logits_cap, float *losses_out, size_t losses_cap,
                      double *mean_loss_out) {
    size_t n_logits = 0, n_losses = 0;
    INDUCT_TRY(outputs_fit(m, fn, B, T, logits_out, logits_cap, losses_out, losses_cap,
                           &n_logits, &n_losses));
    induct__pass p = induct__pass_of(tokens, B, T);
    p.hooks[1] = h->ih;
    p.n_hooks[1] = h->n;
    return pass_out(m, &p, logits_out, n_logits, losses_out, n_losses, mean_loss_out);
}

INDUCT_API int induct_model_run_with_hooks(induct_model *m, const int32_t *tokens, uint32_t B,
                                           uint32_t T, const induct_hook *hooks, size_t n_hooks,
                                           float *logits_out, size_t logits_cap,
                                           float *losses_out, size_t losses_cap,
                                           double *mean_loss_out) {
    const char *fn = "induct_model_run_with_hooks";
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    INDUCT_TRY(induct__model_validate_tokens(m, tokens, B, T));
    induct__call_hooks h;
    INDUCT_TRY(induct__hooks_from_caller(&h, m, fn, hooks, n_hooks, B, T));
    int rc = run_hooked(m, fn, tokens, B, T, &h, logits_out, logits_cap, losses_out,
                        losses_cap, mean_loss_out);
    induct__hooks_free(&h);
    return rc;
}

INDUCT_API int induct_model_run_with_cache(induct_model *m, const int32_t *tokens, uint32_t B,
                                           uint32_t T, const char *const *names,
                                           float *const *bufs, const size_t *caps, size_t n,
                                           float *logits_out, size_t logits_cap,
                                           double *mean_loss_out) {
    const char *fn = "induct_model_run_with_cache";
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    INDUCT_TRY(induct__model_validate_tokens(m, tokens, B, T));
    induct__call_hooks h;
    INDUCT_TRY(induct__hooks_for_cache(&h, m, fn, names, bufs, caps, n, B, T));
    int rc = run_hooked(m, fn, tokens, B, T, &h, logits_out, logits_cap, NULL, 0,
                        mean_loss_out);
    induct__hooks_free(&h);
    return rc;
}

/* Forward with the caller's hooks and backward with the caller's gradient hooks (either
 * list may be empty): the model's gradients, the mean loss. */
static int backward_hooked(induct_model *m, const char *fn, const char *grad_fn,
                           const int32_t *tokens, uint32_t B, uint32_t T,
                           const induct_hook *hooks, size_t n_hooks,
                           const induct_hook *grad_hooks, size_t n_grad_hooks,
                           induct_logits_grad_fn logits_fn, void *logits_user,
                           double *mean_loss_out) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    INDUCT_TRY(induct__model_validate_tokens(m, tokens, B, T));
    induct__call_hooks h, gh;
    INDUCT_TRY(induct__hooks_from_caller(&h, m, fn, hooks, n_hooks, B, T));
    int rc = induct__hooks_from_caller(&gh, m, grad_fn, grad_hooks, n_grad_hooks, B, T);
    if (rc != INDUCT_OK) {
        induct__hooks_free(&h);
        return rc;
    }
    induct__masks masks = {0, 0, NULL};
    induct__pass p = induct__pass_of(tokens, B, T);
    p.hooks[1] = h.ih;
    p.n_hooks[1] = h.n;
    p.grad = 1;
    p.masks = &masks;
    p.grad_hooks = gh.ih;
    p.n_grad_hooks = gh.n;
    p.logits_fn = logits_fn;
    p.logits_user = logits_user;
    double mean;
    rc = induct__forward(m, &p, &mean);
    if (rc == INDUCT_OK) rc = induct__backward(m, &p);
    if (rc == INDUCT_OK && mean_loss_out) *mean_loss_out = mean;
    induct__masks_free(&masks);
    induct__hooks_free(&gh);
    induct__hooks_free(&h);
    return rc;
}

INDUCT_API int induct_model_backward_with_hooks(induct_model *m, const int32_t *tokens,
                                                uint32_t B, uint32_t T, const induct_hook *hooks,
                                                size_t n_hooks, double *mean_loss_out) {
    return backward_hooked(m, "induct_model_backward_with_hooks", "", tokens, B, T, hooks,
                           n_hooks, NULL, 0, NULL, NULL, mean_loss_out);
}

INDUCT_API int induct_model_backward_with_grad_hooks(induct_model *m, const int32_t *tokens,
                                                     uint32_t B, uint32_t T,
                                                     const induct_hook *hooks, size_t n_hooks,
                                                     const induct_hook *grad_hooks,
                                                     size_t n_grad_hooks, double *mean_loss_out) {
    return backward_hooked(m, "induct_model_backward_with_grad_hooks",
                           "induct_model_backward_with_grad_hooks (gradient hooks)", tokens, B, T,
                           hooks, n_hooks, grad_hooks, n_grad_hooks, NULL, NULL, mean_loss_out);
}

INDUCT_API int induct_model_backward_from_logits(induct_model *m, const int32_t *tokens,
                                                 uint32_t B, uint32_t T,
                                                 const induct_hook *hooks, size_t n_hooks,
                                                 const induct_hook *grad_hooks,
                                                 size_t n_grad_hooks,
                                                 induct_logits_grad_fn grad_fn, void *user,
                                                 double *mean_loss_out) {
    INDUCT_FAIL_IF(!grad_fn, INDUCT_EINVAL, "induct_model_backward_from_logits: grad_fn is NULL");
    return backward_hooked(m, "induct_model_backward_from_logits",
                           "induct_model_backward_from_logits (gradient hooks)", tokens, B, T,
                           hooks, n_hooks, grad_hooks, n_grad_hooks, grad_fn, user,
                           mean_loss_out);
}

INDUCT_API int induct_model_backward(induct_model *m, const int32_t *tokens, uint32_t B,
                                     uint32_t T, double *mean_loss_out) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_backward: model is NULL");
    INDUCT_TRY(induct__model_validate_tokens(m, tokens, B, T));
    double mean;
    induct__pass p = induct__pass_of(tokens, B, T);
    p.grad = 1;
    INDUCT_TRY(induct__forward(m, &p, &mean));
    INDUCT_TRY(induct__backward(m, &p));
    if (mean_loss_out) *mean_loss_out = mean;
    return INDUCT_OK;
}

INDUCT_API int induct_model_attention(induct_model *m, const int32_t *tokens, uint32_t T,
                                      float *out, size_t out_cap, size_t *out_len) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_attention: model is NULL");
    INDUCT_TRY(induct__model_validate_tokens(m, tokens, 1, T));
    size_t per = (size_t)T * T, need; /* T*T < 2^64: T < 2^32 */
    INDUCT_FAIL_IF(!induct__mul((size_t)m->cfg.n_layers * m->cfg.n_heads, per, &need),
                   INDUCT_ELIMIT, "induct_model_attention: n_layers x n_heads x seq_len^2 "
                   "overflows size_t");
    if (out_len) *out_len = need;
    INDUCT_FAIL_IF(!out || out_cap < need, INDUCT_EBUFSIZE,
                   "induct_model_attention: needs %zu floats, buffer holds %zu", need,
                   out ? out_cap : 0);
    induct__pass p = induct__pass_of(tokens, 1, T);
    INDUCT_TRY(induct__forward(m, &p, NULL));
    for (uint32_t l = 0; l < m->cfg.n_layers; l++)
        memcpy(out + (size_t)l * m->cfg.n_heads * per, W(m->A[l].att),
               m->cfg.n_heads * per * sizeof(float));
    return INDUCT_OK;
}
