/* Training step: dataset batch -> forward -> backward -> optimizer. */
#include <stdlib.h>

#include "train.h"

/* One step on the pass p (grad set; the masks of its writing hooks kept here). With
 * gradient shards or a communicator the gradient is the shard tree's (shards.c): each
 * shard's pass runs the hooks on its rows and keeps its own masks. */
static int train_pass(induct_optimizer *o, induct__pass *p, double *loss_out) {
    induct_model *m = o->model;
    double loss;
    if (o->grad_shards > 1.0 || o->has_comm) {
        INDUCT_TRY(induct__shards_grad(o, p, &loss));
    } else {
        induct__masks masks = {0, 0, NULL};
        p->masks = &masks;
        int rc = induct__forward(m, p, &loss);
        if (rc == INDUCT_OK) rc = induct__backward(m, p);
        induct__masks_free(&masks);
        INDUCT_TRY(rc);
    }
    INDUCT_TRY(induct_optimizer_step(o, NULL));
    if (loss_out) *loss_out = loss;
    return INDUCT_OK;
}

INDUCT_API int induct_train_step_tokens(induct_optimizer *o, const int32_t *tokens, uint32_t B,
                                        uint32_t T, double *loss_out) {
    INDUCT_FAIL_IF(!o, INDUCT_EINVAL, "induct_train_step_tokens: optimizer is NULL");
    INDUCT_TRY(induct__model_validate_tokens(o->model, tokens, B, T));
    induct__pass p = induct__pass_of(tokens, B, T);
    p.grad = 1;
    return train_pass(o, &p, loss_out);
}

INDUCT_API int induct_train_step_tokens_with_hooks(induct_optimizer *o, const int32_t *tokens,
                                                   uint32_t B, uint32_t T,
                                                   const induct_hook *hooks, size_t n_hooks,
                                                   double *loss_out) {
    const char *fn = "induct_train_step_tokens_with_hooks";
    INDUCT_FAIL_IF(!o, INDUCT_EINVAL, "%s: optimizer is NULL", fn);
    INDUCT_TRY(induct__model_validate_tokens(o->model, tokens, B, T));
    induct__call_hooks h;
    INDUCT_TRY(induct__hooks_from_caller(&h, o->model, fn, hooks, n_hooks, B, T));
    induct__pass p = induct__pass_of(tokens, B, T);
    p.grad = 1;
    p.hooks[1] = h.ih;
    p.n_hooks[1] = h.n;
    int rc = train_pass(o, &p, loss_out);
    induct__hooks_free(&h);
    return rc;
}

static int train_step(induct_optimizer *o, const induct_dataset *d, uint32_t B, uint32_t T,
                      const induct__hook *hooks, size_t n_hooks, double *loss_out);

INDUCT_API int induct_train_step(induct_optimizer *o, const induct_dataset *d, uint32_t B,
                                 uint32_t T, double *loss_out) {
    return train_step(o, d, B, T, NULL, 0, loss_out);
}

INDUCT_API int induct_train_step_with_hooks(induct_optimizer *o, const induct_dataset *d,
                                            uint32_t B, uint32_t T, const induct_hook *hooks,
                                            size_t n_hooks, double *loss_out) {
    const char *fn = "induct_train_step_with_hooks";
    INDUCT_FAIL_IF(!o || !d, INDUCT_EINVAL, "%s: NULL argument", fn);
    INDUCT_FAIL_IF(B == 0 || T < 2, INDUCT_EINVAL, "%s: batch must be >= 1 and seq_len >= 2",
                   fn);
    induct__call_hooks h;
    INDUCT_TRY(induct__hooks_from_caller(&h, o->model, fn, hooks, n_hooks, B, T));
    int rc = train_step(o, d, B, T, h.ih, h.n, loss_out);
    induct__hooks_free(&h);
    return rc;
}

/* One step on a batch of d with the hooks (list 1 of the pass; may be none). */
static int train_step(induct_optimizer *o, const induct_dataset *d, uint32_t B, uint32_t T,
                      const induct__hook *hooks, size_t n_hooks, double *loss_out) {
    INDUCT_FAIL_IF(!o || !d, INDUCT_EINVAL, "induct_train_step: NULL argument");
    induct_model *m = o->model;
    INDUCT_FAIL_IF(d->d_vocab > m->cfg.d_vocab, INDUCT_EINVAL,
                   "induct_train_step: dataset vocabulary %u exceeds the model's d_vocab %u",
                   d->d_vocab, m->cfg.d_vocab);
    INDUCT_FAIL_IF(B == 0 || T < 2, INDUCT_EINVAL,
                   "induct_train_step: batch must be >= 1 and seq_len >= 2");
    INDUCT_FAIL_IF(T > m->cfg.n_ctx, INDUCT_ERANGE, "seq_len %u exceeds the model's n_ctx %u", T,
                   m->cfg.n_ctx);
    size_t need = (size_t)B * T, bytes; /* < 2^64: B, T < 2^32 */
    INDUCT_FAIL_IF(!induct__mul(need, sizeof(int32_t), &bytes), INDUCT_ELIMIT,
                   "induct_train_step: batch %u x seq_len %u tokens overflow size_t", B, T);
    if (need > m->tok_cap) {
        /* the whole step must fit (workspace and staging) before either is allocated */
        uint64_t old = (uint64_t)m->tok_cap * sizeof(int32_t);
        INDUCT_TRY(induct__model_check_workspace(m, B, T, bytes - old));
        int32_t *t = realloc(m->tok_ws, bytes);
        INDUCT_FAIL_IF(!t, INDUCT_ENOMEM, "out of memory staging %zu tokens", need);
        m->tok_ws = t;
        m->tok_cap = need;
        induct__model_held(m, bytes, old);
    }
    INDUCT_TRY(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, o->step, B, T, m->tok_ws, need, NULL, 0));
    induct__pass p = induct__pass_of(m->tok_ws, B, T);
    p.grad = 1;
    p.score_pos = induct__dataset_score_pos(d, T);
    p.hooks[1] = hooks;
    p.n_hooks[1] = n_hooks;
    return train_pass(o, &p, loss_out);
}
