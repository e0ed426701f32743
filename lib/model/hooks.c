/* Hook points: the names (TransformerLens's), their shapes and when they exist, and a
 * caller's hooks (or a cache's copies) as the internal hooks of a pass. The passes that
 * take them are in pass.c and train/step.c, which fire the hooks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* Dimensions of a point, as codes: B batch, T pos (query), K key, H head, E d_head,
 * D d_model, M d_mlp. */
typedef struct point_def {
    const char *name; /* after "blocks.{l}." for per-layer points */
    int per_layer;
    const char *dims;
} point_def;

static const point_def POINTS[INDUCT__HP_COUNT] = {
    [INDUCT__HP_EMBED] = {"hook_embed", 0, "BTD"},
    [INDUCT__HP_POS_EMBED] = {"hook_pos_embed", 0, "BTD"},
    [INDUCT__HP_RESID_PRE] = {"hook_resid_pre", 1, "BTD"},
    [INDUCT__HP_LN1] = {"ln1.hook_normalized", 1, "BTD"},
    [INDUCT__HP_Q] = {"attn.hook_q", 1, "BTHE"},
    [INDUCT__HP_K] = {"attn.hook_k", 1, "BTHE"},
    [INDUCT__HP_V] = {"attn.hook_v", 1, "BTHE"},
    [INDUCT__HP_K_SMEARED] = {"attn.hook_k_smeared", 1, "BTHE"},
    [INDUCT__HP_SCORES] = {"attn.hook_attn_scores", 1, "BHTK"},
    [INDUCT__HP_PATTERN] = {"attn.hook_pattern", 1, "BHTK"},
    [INDUCT__HP_Z] = {"attn.hook_z", 1, "BTHE"},
    [INDUCT__HP_RESULT] = {"attn.hook_result", 1, "BTHD"},
    [INDUCT__HP_ATTN_OUT] = {"hook_attn_out", 1, "BTD"},
    [INDUCT__HP_RESID_MID] = {"hook_resid_mid", 1, "BTD"},
    [INDUCT__HP_LN2] = {"ln2.hook_normalized", 1, "BTD"},
    [INDUCT__HP_MLP_PRE] = {"mlp.hook_pre", 1, "BTM"},
    [INDUCT__HP_MLP_POST] = {"mlp.hook_post", 1, "BTM"},
    [INDUCT__HP_MLP_OUT] = {"hook_mlp_out", 1, "BTD"},
    [INDUCT__HP_RESID_POST] = {"hook_resid_post", 1, "BTD"},
    [INDUCT__HP_LNF] = {"ln_final.hook_normalized", 0, "BTD"},
};

/* Does the point exist in this model? */
static int point_exists(const induct_model_config *c, uint32_t point) {
    switch (point) {
    case INDUCT__HP_POS_EMBED: return c->positional == INDUCT_POS_STANDARD;
    case INDUCT__HP_LN1:
    case INDUCT__HP_LNF: return c->layer_norm != 0;
    case INDUCT__HP_K_SMEARED: return c->smeared_keys != 0;
    case INDUCT__HP_RESID_MID:
    case INDUCT__HP_MLP_PRE:
    case INDUCT__HP_MLP_POST:
    case INDUCT__HP_MLP_OUT: return c->d_mlp != 0;
    case INDUCT__HP_LN2: return c->d_mlp != 0 && c->layer_norm != 0;
    default: return point < INDUCT__HP_COUNT;
    }
}

uint32_t induct__hook_shape(const induct_model *m, uint32_t point, uint32_t B, uint32_t T,
                            uint32_t shape[4]) {
    const induct_model_config *c = &m->cfg;
    if (!point_exists(c, point)) return 0;
    const char *d = POINTS[point].dims;
    uint32_t n = 0;
    for (; d[n]; n++) {
        switch (d[n]) {
        case 'B': shape[n] = B; break;
        case 'T':
        case 'K': shape[n] = T; break;
        case 'H': shape[n] = c->n_heads; break;
        case 'E': shape[n] = c->d_head; break;
        case 'D': shape[n] = c->d_model; break;
        default: shape[n] = c->d_mlp; break;
        }
    }
    return n;
}

int induct__hook_parse(const induct_model *m, const char *name, uint32_t *point,
                       uint32_t *layer) {
    INDUCT_FAIL_IF(!name, INDUCT_EINVAL, "hook point name is NULL");
    const char *rest = name;
    unsigned long l = 0;
    int per_layer = !strncmp(name, "blocks.", 7);
    if (per_layer) {
        char *end;
        const char *digits = name + 7;
        INDUCT_FAIL_IF(*digits < '0' || *digits > '9', INDUCT_EINVAL,
                       "hook point '%s': expected blocks.<layer>.<point>", name);
        l = strtoul(digits, &end, 10);
        INDUCT_FAIL_IF(*end != '.', INDUCT_EINVAL,
                       "hook point '%s': expected blocks.<layer>.<point>", name);
        rest = end + 1;
    }
    for (uint32_t p = 0; p < INDUCT__HP_COUNT; p++) {
        if (POINTS[p].per_layer != per_layer || strcmp(POINTS[p].name, rest)) continue;
        INDUCT_FAIL_IF(per_layer && l >= m->cfg.n_layers, INDUCT_ERANGE,
                       "hook point '%s': the model has %u layers", name, m->cfg.n_layers);
        INDUCT_FAIL_IF(!point_exists(&m->cfg, p), INDUCT_ERANGE,
                       "hook point '%s' does not exist in this model (see the hook point "
                       "table for when each point exists)",
                       name);
        *point = p;
        *layer = (uint32_t)l;
        return INDUCT_OK;
    }
    return induct__fail(INDUCT_EINVAL, "unknown hook point '%s'", name);
}

/* ---- public -------------------------------------------------------------------------- */

INDUCT_API int induct_model_hook_shape(const induct_model *m, const char *name, uint32_t batch,
                                       uint32_t seq_len, uint32_t shape_out[4],
                                       uint32_t *ndim_out, size_t *numel_out) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_hook_shape: model is NULL");
    uint32_t point, layer, shape[4];
    INDUCT_TRY(induct__hook_parse(m, name, &point, &layer));
    uint32_t n = induct__hook_shape(m, point, batch, seq_len, shape);
    size_t numel = 1;
    for (uint32_t i = 0; i < n; i++)
        INDUCT_FAIL_IF(!induct__mul(numel, shape[i], &numel), INDUCT_ELIMIT,
                       "induct_model_hook_shape: '%s' for batch %u x seq_len %u overflows "
                       "size_t",
                       name, batch, seq_len);
    if (shape_out) {
        memset(shape_out, 0, 4 * sizeof *shape_out);
        memcpy(shape_out, shape, n * sizeof *shape);
    }
    if (ndim_out) *ndim_out = n;
    if (numel_out) *numel_out = numel;
    return INDUCT_OK;
}

/* The index-th point in pass order (the embeddings, each block's points, ln_final):
 * 1 and (point, layer), or 0 and the number of points in *count. */
static int nth_point(const induct_model *m, size_t index, uint32_t *point, uint32_t *layer,
                     size_t *count) {
    size_t k = 0;
    for (uint32_t l = 0; l <= m->cfg.n_layers + 1; l++)
        for (uint32_t p = 0; p < INDUCT__HP_COUNT; p++) {
            /* l = 0: the points before the blocks; then blocks l - 1; then after them */
            int here = l == 0 ? !POINTS[p].per_layer && p != INDUCT__HP_LNF
                              : l <= m->cfg.n_layers ? POINTS[p].per_layer : p == INDUCT__HP_LNF;
            if (!here || !point_exists(&m->cfg, p) || k++ != index) continue;
            *point = p;
            *layer = l >= 1 && l <= m->cfg.n_layers ? l - 1 : 0;
            return 1;
        }
    *count = k;
    return 0;
}

INDUCT_API int induct_model_hook_point(const induct_model *m, size_t index, char *out,
                                       size_t out_cap, size_t *out_len) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_hook_point: model is NULL");
    uint32_t p, l;
    size_t count = 0;
    INDUCT_FAIL_IF(!nth_point(m, index, &p, &l, &count), INDUCT_ERANGE,
                   "induct_model_hook_point: index %zu: the model has %zu hook points", index,
                   count);
    char name[64];
    if (POINTS[p].per_layer)
        snprintf(name, sizeof name, "blocks.%u.%s", l, POINTS[p].name);
    else
        snprintf(name, sizeof name, "%s", POINTS[p].name);
    size_t len = strlen(name) + 1;
    if (out_len) *out_len = len;
    INDUCT_FAIL_IF(!out || out_cap < len, INDUCT_EBUFSIZE,
                   "induct_model_hook_point: the name needs %zu bytes, buffer holds %zu", len,
                   out ? out_cap : 0);
    memcpy(out, name, len);
    return INDUCT_OK;
}

/* A caller's hook (or a cache's copy) as an internal one. */
struct induct__call_hook {
    const char *name;
    induct_hook_fn fn;
    void *user;
    uint32_t shape[4], ndim;
    float *dst; /* cache: copy here */
    size_t numel;
};

/* The pass p may cover part of the caller's batch (a gradient shard: sequences p->row0
 * ... p->row0 + p->B - 1 of c->shape[0]): the callback sees shape[0] = p->B, a cache
 * copy goes to those sequences' place. */
/* The callback running on this thread: which model's pass, and the sequences of the
 * caller's batch it sees (induct_model_hook_batch_index). Per thread, not on the model:
 * nothing about one call lives on the model, and a pass calls its hooks on the thread
 * that runs it. */
typedef struct hook_call {
    const induct_model *model; /* NULL outside a callback */
    uint32_t first, batch;
} hook_call;
static _Thread_local hook_call current;

static int call_trampoline(void *user, induct_model *m, const induct__pass *p, uint32_t point,
                           uint32_t l, float *x) {
    const struct induct__call_hook *c = user;
    (void)point, (void)l;
    size_t per_seq = c->numel / c->shape[0]; /* every point's first dimension is the batch */
    if (c->dst) {
        float *at = c->dst + (size_t)p->row0 * per_seq;
        if (at != x) /* else the pass computed the point in place (induct__hook.dst) */
            memcpy(at, x, (size_t)p->B * per_seq * sizeof *x);
        return INDUCT_OK;
    }
    uint32_t shape[4];
    memcpy(shape, c->shape, sizeof shape);
    shape[0] = p->B;
    hook_call outer = current; /* restored after the call (a hook may run a pass) */
    current = (hook_call){m, p->row0, p->scale_rows ? p->scale_rows : p->B};
    int r = c->fn(c->user, c->name, x, shape, c->ndim);
    current = outer;
    INDUCT_FAIL_IF(r != 0, INDUCT_EINTERRUPTED, "hook on '%s' returned %d: pass stopped", c->name,
                   r);
    return INDUCT_OK;
}

INDUCT_API int induct_model_hook_batch_index(const induct_model *m, uint32_t *first_out,
                                             uint32_t *batch_out) {
    const char *fn = "induct_model_hook_batch_index";
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    INDUCT_FAIL_IF(current.model != m, INDUCT_ESTATE,
                   "%s: no hook of this model is running on this thread", fn);
    if (first_out) *first_out = current.first;
    if (batch_out) *batch_out = current.batch;
    return INDUCT_OK;
}

void induct__hooks_free(induct__call_hooks *h) {
    free(h->ch);
    free(h->ih);
    memset(h, 0, sizeof *h);
}

static int hooks_alloc(induct__call_hooks *h, const char *fn, size_t n) {
    memset(h, 0, sizeof *h);
    INDUCT_FAIL_IF(n > 4096, INDUCT_ELIMIT, "%s: %zu hooks (at most 4096)", fn, n);
    h->ch = calloc(n ? n : 1, sizeof *h->ch);
    h->ih = calloc(n ? n : 1, sizeof *h->ih);
    if (!h->ch || !h->ih) {
        induct__hooks_free(h);
        return induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    }
    h->n = n;
    return INDUCT_OK;
}

/* Entry i: name, shape for (B, T), the internal hook (writes or only reads). */
static int hooks_entry(induct__call_hooks *h, induct_model *m, size_t i, const char *name,
                       uint32_t B, uint32_t T, uint32_t writes) {
    uint32_t point, layer;
    struct induct__call_hook *c = &h->ch[i];
    c->name = name;
    INDUCT_TRY(induct__hook_parse(m, name, &point, &layer));
    c->ndim = induct__hook_shape(m, point, B, T, c->shape);
    c->numel = 1;
    for (uint32_t k = 0; k < c->ndim; k++) c->numel *= c->shape[k]; /* checked by the caller */
    h->ih[i] = (induct__hook){point, layer, writes, call_trampoline, c, c->dst};
    return INDUCT_OK;
}

int induct__hooks_from_caller(induct__call_hooks *h, induct_model *m, const char *fn,
                              const induct_hook *hooks, size_t n, uint32_t B, uint32_t T) {
    memset(h, 0, sizeof *h);
    INDUCT_FAIL_IF(n && !hooks, INDUCT_EINVAL, "%s: hooks is NULL", fn);
    for (size_t i = 0; i < n && i <= 4096; i++)
        INDUCT_FAIL_IF(!hooks[i].fn, INDUCT_EINVAL, "%s: hook %zu has no function", fn, i);
    INDUCT_TRY(hooks_alloc(h, fn, n));
    for (size_t i = 0; i < n; i++) {
        h->ch[i].fn = hooks[i].fn;
        h->ch[i].user = hooks[i].user;
        int rc = hooks_entry(h, m, i, hooks[i].name, B, T, 1);
        if (rc != INDUCT_OK) {
            induct__hooks_free(h);
            return rc;
        }
    }
    return INDUCT_OK;
}

static int by_address(const void *x, const void *y) {
    uintptr_t a = (uintptr_t)((const struct induct__call_hook *const *)x)[0]->dst;
    uintptr_t b = (uintptr_t)((const struct induct__call_hook *const *)y)[0]->dst;
    return (a > b) - (a < b);
}

/* Do any two of the n cache buffers (numel floats each) overlap? (1 if out of memory
 * to tell: the copies are always right.) */
static int buffers_overlap(struct induct__call_hook *ch, size_t n) {
    if (n < 2) return 0;
    struct induct__call_hook **o = malloc(n * sizeof *o);
    if (!o) return 1;
    for (size_t i = 0; i < n; i++) o[i] = &ch[i];
    qsort(o, n, sizeof *o, by_address);
    int overlap = 0;
    for (size_t i = 1; i < n && !overlap; i++)
        overlap = (uintptr_t)o[i]->dst < (uintptr_t)(o[i - 1]->dst + o[i - 1]->numel);
    free(o);
    return overlap;
}

int induct__hooks_for_cache(induct__call_hooks *h, induct_model *m, const char *fn,
                            const char *const *names, float *const *bufs, const size_t *caps,
                            size_t n, uint32_t B, uint32_t T) {
    memset(h, 0, sizeof *h);
    INDUCT_FAIL_IF(n && (!names || !bufs || !caps), INDUCT_EINVAL,
                   "%s: names, bufs and caps must not be NULL", fn);
    INDUCT_FAIL_IF(n > 4096, INDUCT_ELIMIT, "%s: %zu points (at most 4096)", fn, n);
    /* every buffer is checked before the pass: on failure none is written */
    for (size_t i = 0; i < n; i++) {
        size_t need;
        INDUCT_TRY(induct_model_hook_shape(m, names[i], B, T, NULL, NULL, &need));
        INDUCT_FAIL_IF(!bufs[i] || caps[i] < need, INDUCT_EBUFSIZE,
                       "%s: '%s' needs %zu floats, buffer %zu holds %zu", fn, names[i], need, i,
                       bufs[i] ? caps[i] : 0);
    }
    INDUCT_TRY(hooks_alloc(h, fn, n));
    for (size_t i = 0; i < n; i++) {
        h->ch[i].dst = bufs[i];
        int rc = hooks_entry(h, m, i, names[i], B, T, 0);
        if (rc != INDUCT_OK) {
            induct__hooks_free(h);
            return rc;
        }
    }
    /* the pass computes in the buffers and reads on from them (induct__hook.dst): only
     * if no two overlap, else every point is copied as it passes (the later copy wins) */
    if (buffers_overlap(h->ch, n))
        for (size_t i = 0; i < n; i++) h->ih[i].dst = NULL;
    return INDUCT_OK;
}
