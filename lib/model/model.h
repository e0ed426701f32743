/* lib/model: the model (config checks, the parameter table with TransformerLens names,
 * initialisation, the memory cap), its workspace, the one forward and backward pass
 * (induct__pass) with the hook points it fires, caller hooks and caches, and generation.
 * Private: never installed. Includes core/ only (the kernels it runs on are
 * kernels/kernels.h, included by the files that call them). */
#ifndef INDUCT_MODEL_H
#define INDUCT_MODEL_H

#include "core/core.h"

/* Whether layer l's query/key input is LN(resid) + W_pos (shortformer positions, in
 * the first `shortformer_layers` layers, or every layer when it is 0). */
static inline int induct__qk_reads_pos(const induct_model_config *c, uint32_t l) {
    return c->positional == INDUCT_POS_SHORTFORMER &&
           (c->shortformer_layers == 0 || l < c->shortformer_layers);
}

/* The smallest induct_model_config a caller may pass: the layout before
 * `shortformer_layers` was appended (older callers get its default, 0). */
#define INDUCT__MODEL_CONFIG_MIN offsetof(induct_model_config, shortformer_layers)

/* ---- model ---------------------------------------------------------------- */
#define INDUCT_NONE ((size_t)-1)
#define INDUCT_MAX_PARAMS ((size_t)1 << 31)
#define INDUCT_NAME_MAX 48

typedef struct induct__tensor {
    char name[INDUCT_NAME_MAX];
    size_t offset; /* in floats, into params/grads */
    size_t numel;
    uint32_t shape[4];
    uint32_t ndim;
    int decay; /* weight decay applies (tensors with >= 2 dims) */
} induct__tensor;

typedef struct induct__layer_off {
    size_t ln1_w, ln1_b, W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O, alpha;
    size_t ln2_w, ln2_b, W_in, b_in, W_out, b_out;
} induct__layer_off;

/* Activation offsets (in floats) into the workspace for the current (B, T). */
typedef struct induct__layer_act {
    size_t resid_pre, ln1, ln1_mean, ln1_rstd, qk_in, wq, wk, wv, q, k_raw, k, v, att, z;
    size_t resid_mid, ln2, ln2_mean, ln2_rstd, mlp_pre, mlp_post;
} induct__layer_act;

/* ---- one forward pass: its description and its hook points (pass.c, hooks.c) ----
 * Hook points, in the order a pass reaches them; the names are TransformerLens's
 * (hooks.c has the table of names and shapes). */
enum {
    INDUCT__HP_EMBED,       /* hook_embed            [batch, pos, d_model] */
    INDUCT__HP_POS_EMBED,   /* hook_pos_embed        [batch, pos, d_model] */
    INDUCT__HP_RESID_PRE,   /* blocks.l.hook_resid_pre */
    INDUCT__HP_LN1,         /* blocks.l.ln1.hook_normalized (before the gain and bias) */
    INDUCT__HP_Q,           /* blocks.l.attn.hook_q  [batch, pos, head, d_head] */
    INDUCT__HP_K,           /* blocks.l.attn.hook_k */
    INDUCT__HP_V,           /* blocks.l.attn.hook_v */
    INDUCT__HP_K_SMEARED,   /* blocks.l.attn.hook_k_smeared (not TransformerLens) */
    INDUCT__HP_SCORES,      /* blocks.l.attn.hook_attn_scores [batch, head, query, key] */
    INDUCT__HP_PATTERN,     /* blocks.l.attn.hook_pattern */
    INDUCT__HP_Z,           /* blocks.l.attn.hook_z  [batch, pos, head, d_head] */
    INDUCT__HP_RESULT,      /* blocks.l.attn.hook_result [batch, pos, head, d_model] */
    INDUCT__HP_ATTN_OUT,    /* blocks.l.hook_attn_out */
    INDUCT__HP_RESID_MID,   /* blocks.l.hook_resid_mid */
    INDUCT__HP_LN2,         /* blocks.l.ln2.hook_normalized */
    INDUCT__HP_MLP_PRE,     /* blocks.l.mlp.hook_pre [batch, pos, d_mlp] */
    INDUCT__HP_MLP_POST,    /* blocks.l.mlp.hook_post */
    INDUCT__HP_MLP_OUT,     /* blocks.l.hook_mlp_out [batch, pos, d_model] */
    INDUCT__HP_RESID_POST,  /* blocks.l.hook_resid_post */
    INDUCT__HP_LNF,         /* ln_final.hook_normalized */
    INDUCT__HP_COUNT
};
struct induct__pass;
/* Called with the activation `x` of `point` in `layer` (its shape: induct__hook_shape);
 * may change x in place when the hook was installed with `writes`. A negative return
 * stops the pass and is returned by it. */
typedef int (*induct__hook_fn)(void *user, induct_model *m, const struct induct__pass *p,
                               uint32_t point, uint32_t layer, float *x);
typedef struct induct__hook {
    uint32_t point, layer; /* layer: 0 for the points outside blocks */
    uint32_t writes;       /* 0: the hook only reads (the pass may take its fast paths) */
    induct__hook_fn fn;
    void *user;
    /* A cache's buffer for the caller's whole batch (NULL: not a cache). When no hook at
     * the point may write, the pass may compute the activation straight into it (at its
     * sequences, row0 on) and read on from there: the hook then finds x at its place and
     * copies nothing. */
    float *dst;
} induct__hook;

/* What the writing hooks of a forward pass with gradients changed: per (point, layer),
 * mask[i] = 1 where the hook left another value than the pass computed (n_set of them).
 * The backward pass treats those entries as constants (no gradient flows to what they
 * replaced); entries left bit-identical keep their gradient, and a point where nothing
 * changed (n_set 0) is computed as if it had no writing hook. `value` keeps what a
 * backward formula needs that the workspace does not hold (else NULL): at a
 * LayerNorm's hook_normalized the values the hooks left (the gain's gradient reads
 * them; the workspace holds only the statistics of the unhooked input), at
 * hook_pattern the pattern before the hooks (the softmax's Jacobian is that of the
 * pattern the scores gave). Filled by induct__forward, read by induct__backward, freed
 * with induct__masks_free. */
typedef struct induct__mask {
    uint32_t point, layer;
    size_t numel, n_set;
    uint8_t *mask;
    float *value;
} induct__mask;
typedef struct induct__masks {
    size_t n, cap;
    induct__mask *e;
} induct__masks;
void induct__masks_free(induct__masks *ms);

/* Everything about one forward pass. Nothing of it lives on the model. */
typedef struct induct__pass {
    const int32_t *tokens; /* [B][T], validated */
    uint32_t B, T;
    uint32_t score_pos;    /* 0: every position is scored; p + 1: only position p of a row */
    const induct__hook *hooks[2]; /* two lists (e.g. the caller's and a standing provider's) */
    size_t n_hooks[2];
    uint32_t grad;         /* a backward pass follows */
    induct__masks *masks;  /* with grad and writing hooks: what they changed (else NULL) */
    uint32_t bare;         /* the model's standing intervention (see induct__standing) is off */
    /* Partial passes (forward only, for analyses that change one layer's output):
     * resume = l + 1 starts after layer l's attention, from what the workspace holds
     * (its attention output added to the residual stream, resid_mid or the next
     * resid_pre, and every earlier activation); rows (n_rows of them, b * T + p with
     * p < T - 1, any order) computes the final LayerNorm, logits and loss only at those
     * rows: row_loss[i] in nats, bit-identical to the whole pass's loss there (the
     * workspace's losses are not written; its logits at least at the rows). With rows
     * (at most an eighth of the positions) and no hook at the last layer, that layer's
     * query, pattern, z, attention output and MLP are computed only at the rows too (its
     * keys and values at every position): its other rows and the pattern's other rows
     * keep whatever they held. */
    uint32_t resume;
    const size_t *rows;
    size_t n_rows;
    double *row_loss;
    /* Gradient shards: the backward's 1/N factor counts scale_rows sequences (0: B), so
     * a shard's gradient is its part of the whole batch's mean; the forward stores the
     * sum of the scored losses (nats, double) at *loss_sum when it is not NULL. */
    uint32_t scale_rows;
    double *loss_sum;
    /* Gradient shards: the index of this pass's first sequence in the step's whole batch
     * (of scale_rows sequences; 0 for a pass over a whole batch). Caller hooks report it
     * through induct_model_hook_batch_index(). */
    uint32_t row0;
    /* Gradient hooks (grad set): called during the backward pass, in the reverse of the
     * forward's order of points, with the gradient of the loss (the mean over the scored
     * positions, of the whole batch of scale_rows sequences when sharded) with respect to
     * the activation of their point, in its shape; what they leave flows on (a shard's
     * copy of the pass calls them on its own rows). The hooks' `writes` and `dst` are not
     * used. */
    const induct__hook *grad_hooks;
    size_t n_grad_hooks;
    /* A caller's metric of the logits (grad set): the forward keeps the logits (no fused
     * cross-entropy gradient) and the backward starts from the d(logits) that logits_fn
     * leaves (induct_model_backward_from_logits) instead of the mean loss's. */
    induct_logits_grad_fn logits_fn;
    void *logits_user;
} induct__pass;
/* Shape of a hook point for (B, T): dims into shape[4], returns ndim; 0 when the point
 * does not exist in this model (hooks.c). */
uint32_t induct__hook_shape(const induct_model *m, uint32_t point, uint32_t B, uint32_t T,
                            uint32_t shape[4]);
/* Resolve a TransformerLens name ("blocks.1.attn.hook_pattern") to (point, layer):
 * INDUCT_EINVAL with a message for an unknown name, ERANGE for a missing layer. */
int induct__hook_parse(const induct_model *m, const char *name, uint32_t *point,
                       uint32_t *layer);

/* A caller's hooks (public induct_hook) or a cache's copies as n internal hooks
 * (hooks.c): names parsed, shapes for (B, T), cache buffers checked; freed with
 * induct__hooks_free (also safe after a failure). */
typedef struct induct__call_hooks {
    struct induct__call_hook *ch;
    induct__hook *ih;
    size_t n;
} induct__call_hooks;
int induct__hooks_from_caller(induct__call_hooks *h, induct_model *m, const char *fn,
                              const induct_hook *hooks, size_t n, uint32_t B, uint32_t T);
int induct__hooks_for_cache(induct__call_hooks *h, induct_model *m, const char *fn,
                            const char *const *names, float *const *bufs, const size_t *caps,
                            size_t n, uint32_t B, uint32_t T);
void induct__hooks_free(induct__call_hooks *h);

/* A standing intervention on every pass of the model until removed (the head ablations
 * install one): run() performs the pass `p` with its own hooks added (it may run extra
 * passes first) by calling induct__forward on a copy marked `bare`; release() frees
 * `self` when the model is freed. */
typedef struct induct__standing {
    int (*run)(void *self, induct_model *m, const induct__pass *p, double *mean_loss);
    void (*release)(void *self, induct_model *m);
    void *self;
} induct__standing;

struct induct_model {
    induct_model_config cfg; /* normalised: d_head resolved, n_threads >= 1 */
    atomic_int refcount;
    atomic_int interrupt;

    size_t n_params;
    float *params;
    float *grads;
    induct__tensor *tensors;
    size_t n_tensors;
    size_t W_E, W_pos, lnf_w, lnf_b, W_U, b_U;
    induct__layer_off *L;

    /* workspace for the largest (B, T) used so far */
    float *ws;
    size_t ws_cap;   /* floats */
    uint32_t ws_B, ws_T;   /* shape the offsets below describe */
    uint32_t ws_nt;        /* n_threads the per-thread scratch was sized for */
    induct__layer_act *A; /* [n_layers] */
    size_t a_resid_final, a_lnf, a_lnf_mean, a_lnf_rstd, a_logits, a_losses;
    /* layer 0 folded into the embeddings (see induct__fold_layer0), else INDUCT_NONE:
     * f_tab [d_vocab + T][3 H d_head] = W_E W_{Q,K,V} and W_pos W_{Q,K,V};
     * f_grp, same shape: d q, k, v summed per token id and per position */
    size_t f_tab, f_grp;
    /* backward scratch */
    size_t g_resid, g_h, g_qk, g_q, g_k, g_v, g_z, g_mlp, g_mlp2, g_att, g_alpha, g_w, g_wt;
    int32_t *tok_ws; size_t tok_cap; /* token staging for dataset batches */
    induct__standing standing; /* e.g. head ablations (analysis/ablation.c); run == NULL: none */
    /* resource limits: bytes held for this model (parameters, gradients, tables,
     * workspace, staging, optimizer moments), capped by cfg.max_bytes */
    _Atomic uint64_t mem_held;
};

int induct__model_validate_tokens(const induct_model *m, const int32_t *tokens, uint32_t B,
                                  uint32_t T);
/* Make sure the workspace covers (B, T); may allocate (never during a step whose
 * shape was seen before). */
int induct__model_workspace(induct_model *m, uint32_t B, uint32_t T);
/* A pass over every position of validated tokens, no hooks. */
static inline induct__pass induct__pass_of(const int32_t *tokens, uint32_t B, uint32_t T) {
    induct__pass p = {tokens, B, T, 0, {NULL, NULL}, {0, 0}, 0, NULL, 0, 0, NULL, 0, NULL, 0, NULL,
                      0, NULL, 0, NULL, NULL};
    return p;
}
/* The forward pass `p`: fills the workspace (per-token losses at a_losses, [B][T-1]),
 * runs the hooks and the model's standing intervention; mean loss over the scored
 * positions into *mean_loss (may be NULL). */
int induct__forward(induct_model *m, const induct__pass *p, double *mean_loss);
/* Backward after induct__forward(m, p) (p->grad set): grads overwritten. */
int induct__backward(induct_model *m, const induct__pass *p);
/* Forward-only over B sequences in chunks of whole GEMM row blocks that stay in cache
 * (about 4096 tokens; the same bits as one pass). After each chunk, fn(user, m, b0, nb)
 * runs while the workspace holds the activations of sequences b0 .. b0+nb-1 (patterns
 * A[l].att for nb sequences, a_losses, ...); a negative return stops and is returned.
 * loss_sum (may be NULL) receives the sum of all per-token losses, in order. */
typedef int (*induct__chunk_fn)(void *user, induct_model *m, uint32_t b0, uint32_t nb);
int induct__forward_chunks(induct_model *m, const int32_t *tokens, uint32_t B, uint32_t T,
                           induct__chunk_fn fn, void *user, double *loss_sum);
/* Sequences per chunk of every evaluation over a set of B sequences of T tokens: the
 * one rule (induct__forward_chunks uses it with cap 0), at most cap sequences if cap > 0. */
uint32_t induct__forward_chunk_rows(const induct_model *m, uint32_t B, uint32_t T, uint32_t cap);
const induct__tensor *induct__model_find(const induct_model *m, const char *name);
void induct__model_ref(induct_model *m);
/* resource limits, model.c: can the model hold `add` more bytes (after giving
 * back `release`) within cfg.max_bytes? ELIMIT naming `what` if not. Allocates and
 * records nothing: call induct__model_held() after the allocation succeeded. */
int induct__model_reserve(const induct_model *m, uint64_t add, uint64_t release,
                          const char *what);
void induct__model_held(induct_model *m, uint64_t add, uint64_t release);
/* workspace.c: the most floats a workspace may hold (compared as uint64_t: a 32-bit
 * size_t cannot hold it). */
#define INDUCT__WS_FLOATS_MAX ((uint64_t)1 << 36)
/* workspace.c: whether passes over (B, T) fold layer 0 into the embedding tables (layer 0
 * without LayerNorm, d_vocab + T at most half of B T; never depends on the thread count). */
int induct__fold_layer0(const induct_model *m, uint32_t B, uint32_t T);
/* workspace.c: would the workspace for (B, T), plus `extra` bytes of temporaries of the
 * calling function, fit the fixed limit and the cap? Forgets the cached layout (the
 * next pass lays it out again); allocates nothing. */
int induct__model_check_workspace(induct_model *m, uint32_t B, uint32_t T, uint64_t extra);
static inline float *induct__ws(const induct_model *m, size_t off) { return m->ws + off; }

/* ---- threading helpers ------------------------------------------------------ */
static inline int induct__nt(const induct_model *m) { return (int)m->cfg.n_threads; }

#endif
