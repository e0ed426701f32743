/* Model lifecycle: config defaults and validation, the parameter table (one contiguous
 * buffer, TransformerLens names), initialisation, named tensor access. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* ---- parameter table ------------------------------------------------------ */

typedef struct table_builder {
    induct__tensor *t;
    size_t n, cap;
    size_t total;
    int overflow;
} table_builder;

static size_t add_tensor(table_builder *tb, const char *name, uint32_t ndim, uint32_t d0,
                         uint32_t d1, uint32_t d2) {
    size_t numel = d0, off = tb->total;
    uint32_t dims[3] = {d0, d1, d2};
    for (uint32_t i = 1; i < ndim; i++)
        if (!induct__mul(numel, dims[i], &numel)) tb->overflow = 1;
    if (!induct__add(tb->total, numel, &tb->total)) tb->overflow = 1;
    if (tb->t && tb->n < tb->cap) {
        induct__tensor *x = &tb->t[tb->n];
        snprintf(x->name, sizeof x->name, "%s", name);
        x->offset = off;
        x->numel = numel;
        x->ndim = ndim;
        memset(x->shape, 0, sizeof x->shape);
        for (uint32_t i = 0; i < ndim; i++) x->shape[i] = dims[i];
        x->decay = ndim >= 2;
    }
    tb->n++;
    return off;
}

/* Lays out every tensor. With tb->t == NULL only counts. Fills offsets in m. */
static void build_table(induct_model *m, table_builder *tb) {
    const induct_model_config *c = &m->cfg;
    uint32_t D = c->d_model, H = c->n_heads, dh = c->d_head, V = c->d_vocab, M = c->d_mlp;
    char nm[INDUCT_NAME_MAX];
    m->W_E = add_tensor(tb, "embed.W_E", 2, V, D, 0);
    m->W_pos = INDUCT_NONE;
    if (c->positional != INDUCT_POS_NONE)
        m->W_pos = add_tensor(tb, "pos_embed.W_pos", 2, c->n_ctx, D, 0);
    for (uint32_t l = 0; l < c->n_layers; l++) {
        size_t total0 = tb->total, n0 = tb->n;
        induct__layer_off lo;
        for (size_t i = 0; i < sizeof lo / sizeof(size_t); i++) ((size_t *)&lo)[i] = INDUCT_NONE;
#define T_(field, suffix, nd, a, b, cc)                                                    \
    snprintf(nm, sizeof nm, "blocks.%u." suffix, l);                                       \
    lo.field = add_tensor(tb, nm, nd, a, b, cc)
        if (c->layer_norm) {
            T_(ln1_w, "ln1.w", 1, D, 0, 0);
            T_(ln1_b, "ln1.b", 1, D, 0, 0);
        }
        T_(W_Q, "attn.W_Q", 3, H, D, dh);
        T_(W_K, "attn.W_K", 3, H, D, dh);
        T_(W_V, "attn.W_V", 3, H, D, dh);
        T_(W_O, "attn.W_O", 3, H, dh, D);
        T_(b_Q, "attn.b_Q", 2, H, dh, 0);
        T_(b_K, "attn.b_K", 2, H, dh, 0);
        T_(b_V, "attn.b_V", 2, H, dh, 0);
        T_(b_O, "attn.b_O", 1, D, 0, 0);
        if (c->smeared_keys) { T_(alpha, "attn.smear_alpha", 1, H, 0, 0); }
        if (M) {
            if (c->layer_norm) {
                T_(ln2_w, "ln2.w", 1, D, 0, 0);
                T_(ln2_b, "ln2.b", 1, D, 0, 0);
            }
            T_(W_in, "mlp.W_in", 2, D, M, 0);
            T_(b_in, "mlp.b_in", 1, M, 0, 0);
            T_(W_out, "mlp.W_out", 2, M, D, 0);
            T_(b_out, "mlp.b_out", 1, D, 0, 0);
        }
#undef T_
        if (m->L) m->L[l] = lo;
        if (!tb->t && c->n_layers > 1) {
            /* counting pass: every layer has layer 0's shapes, so count the other
             * n_layers - 1 at once (n_layers may be near 2^32) */
            size_t rest, rest_n;
            if (!induct__mul(tb->total - total0, c->n_layers - 1, &rest) ||
                !induct__add(tb->total, rest, &tb->total) ||
                !induct__mul(tb->n - n0, c->n_layers - 1, &rest_n) ||
                !induct__add(tb->n, rest_n, &tb->n))
                tb->overflow = 1;
            break;
        }
    }
    m->lnf_w = m->lnf_b = INDUCT_NONE;
    if (c->layer_norm) {
        m->lnf_w = add_tensor(tb, "ln_final.w", 1, D, 0, 0);
        m->lnf_b = add_tensor(tb, "ln_final.b", 1, D, 0, 0);
    }
    m->W_U = add_tensor(tb, "unembed.W_U", 2, D, V, 0);
    m->b_U = add_tensor(tb, "unembed.b_U", 1, V, 0, 0);
}

/* ---- validation ------------------------------------------------------------ */

INDUCT_API int induct_model_config_init(induct_model_config *cfg, size_t size) {
    INDUCT__CONFIG_INIT_CHECK(cfg, size, INDUCT__MODEL_CONFIG_MIN);
    /* the defaults in a whole struct, then as much of it as the caller's size holds
     * (a caller compiled before a field was appended does not have it) */
    induct_model_config d;
    memset(&d, 0, sizeof d);
    d.n_layers = 2;
    d.d_model = 64;
    d.n_heads = 4;
    d.d_head = 0;
    d.d_mlp = 0;
    d.n_ctx = 64;
    d.d_vocab = 64;
    d.positional = INDUCT_POS_STANDARD;
    d.layer_norm = 0;
    d.smeared_keys = 0;
    d.n_threads = 1;
    d.init = INDUCT_INIT_GPT2;
    d.smear_alpha_init = 0.0;
    d.init_std = 0.02;
    d.seed = 0;
    d.shortformer_layers = 0;
    memset(cfg, 0, size);
    memcpy(cfg, &d, size < sizeof d ? size : sizeof d);
    cfg->size = size;
    return INDUCT_OK;
}

static int validate_config(induct_model_config *c) {
    INDUCT_FAIL_IF(c->n_layers == 0, INDUCT_EINVAL, "model config: n_layers must be >= 1");
    INDUCT_FAIL_IF(c->d_model == 0, INDUCT_EINVAL, "model config: d_model must be >= 1");
    INDUCT_FAIL_IF(c->n_heads == 0, INDUCT_EINVAL, "model config: n_heads must be >= 1");
    INDUCT_FAIL_IF(c->n_ctx == 0, INDUCT_EINVAL, "model config: n_ctx must be >= 1");
    INDUCT_FAIL_IF(c->d_vocab == 0, INDUCT_EINVAL, "model config: d_vocab must be >= 1");
    if (c->d_head == 0) {
        INDUCT_FAIL_IF(c->d_model % c->n_heads != 0, INDUCT_EINVAL,
                       "model config: d_head = 0 asks for d_model / n_heads, but n_heads (%u) "
                       "does not divide d_model (%u)",
                       c->n_heads, c->d_model);
        c->d_head = c->d_model / c->n_heads;
    }
    INDUCT_FAIL_IF(c->positional > INDUCT_POS_NONE, INDUCT_EINVAL,
                   "model config: positional %u is not an INDUCT_POS_* value", c->positional);
    INDUCT_FAIL_IF(c->layer_norm > 1, INDUCT_EINVAL, "model config: layer_norm must be 0 or 1");
    INDUCT_FAIL_IF(c->smeared_keys > 1, INDUCT_EINVAL,
                   "model config: smeared_keys must be 0 or 1");
    INDUCT_FAIL_IF(c->shortformer_layers && c->positional != INDUCT_POS_SHORTFORMER,
                   INDUCT_EINVAL,
                   "model config: shortformer_layers = %u needs positional = "
                   "INDUCT_POS_SHORTFORMER (0 with the other variants)",
                   c->shortformer_layers);
    INDUCT_FAIL_IF(c->shortformer_layers > c->n_layers, INDUCT_EINVAL,
                   "model config: shortformer_layers = %u exceeds n_layers = %u",
                   c->shortformer_layers, c->n_layers);
    INDUCT_FAIL_IF(c->reserved0 != 0, INDUCT_EINVAL, "model config: reserved0 must be 0");
    /* the first n_layers layers are every layer: one model, one config (and a checkpoint
     * that every 0.1 library reads) */
    if (c->shortformer_layers == c->n_layers) c->shortformer_layers = 0;
    INDUCT_FAIL_IF(c->init > INDUCT_INIT_TORCH, INDUCT_EINVAL,
                   "model config: init %u is not an INDUCT_INIT_* value", c->init);
    INDUCT_FAIL_IF(!isfinite(c->init_std) || c->init_std < 0, INDUCT_EINVAL,
                   "model config: init_std must be finite and >= 0");
    INDUCT_FAIL_IF(!isfinite(c->smear_alpha_init), INDUCT_EINVAL,
                   "model config: smear_alpha_init must be finite");
    INDUCT_FAIL_IF(c->n_threads > 1024, INDUCT_EINVAL, "model config: n_threads %u > 1024",
                   c->n_threads);
    if (c->n_threads == 0) c->n_threads = 1;
    /* the largest single matrix dimension products must fit in int for CBLAS */
    size_t hd;
    INDUCT_FAIL_IF(!induct__mul(c->n_heads, c->d_head, &hd) || hd > (1u << 30), INDUCT_ELIMIT,
                   "model config: n_heads * d_head overflows");
    return INDUCT_OK;
}

/* ---- initialisation -------------------------------------------------------- */

static void fill_normal(float *p, size_t n, double std, induct__rng *r) {
    for (size_t i = 0; i < n; i++) p[i] = (float)(std * induct__rng_normal(r));
}
static void fill_uniform(float *p, size_t n, double bound, induct__rng *r) {
    for (size_t i = 0; i < n; i++) p[i] = (float)(bound * (2.0 * induct__rng_uniform(r) - 1.0));
}
static void fill_const(float *p, size_t n, float v) {
    for (size_t i = 0; i < n; i++) p[i] = v;
}

static void init_weights(induct_model *m) {
    const induct_model_config *c = &m->cfg;
    induct__rng r;
    induct__rng_seed(&r, c->seed);
    int torch = c->init == INDUCT_INIT_TORCH;
    double std = c->init_std, std_out = c->init_std / sqrt(2.0 * c->n_layers);
    for (size_t i = 0; i < m->n_tensors; i++) {
        const induct__tensor *t = &m->tensors[i];
        float *p = m->params + t->offset;
        const char *nm = strrchr(t->name, '.');
        nm = nm ? nm + 1 : t->name;
        if (!strcmp(nm, "w")) { fill_const(p, t->numel, 1.0f); continue; } /* LN gain */
        if (!strcmp(nm, "smear_alpha")) { fill_const(p, t->numel, (float)c->smear_alpha_init); continue; }
        int is_bias = nm[0] == 'b';
        if (!torch) {
            if (is_bias) fill_const(p, t->numel, 0.0f);
            else if (!strcmp(nm, "W_O") || !strcmp(nm, "W_out")) fill_normal(p, t->numel, std_out, &r);
            else fill_normal(p, t->numel, std, &r);
            continue;
        }
        /* PyTorch defaults: Embedding N(0,1); Linear U(+-1/sqrt(fan_in)) for weight and bias */
        if (!strcmp(nm, "W_E") || !strcmp(nm, "W_pos")) { fill_normal(p, t->numel, 1.0, &r); continue; }
        if (!strcmp(t->name + strlen(t->name) - 2, ".b") && t->ndim == 1 &&
            strstr(t->name, "ln")) { fill_const(p, t->numel, 0.0f); continue; } /* LN bias */
        double fan_in;
        if (!strcmp(nm, "W_O") || !strcmp(nm, "b_O")) fan_in = (double)c->n_heads * c->d_head;
        else if (!strcmp(nm, "W_out") || !strcmp(nm, "b_out")) fan_in = c->d_mlp;
        else fan_in = c->d_model; /* W_Q/K/V, b_Q/K/V, W_in, b_in, W_U, b_U */
        fill_uniform(p, t->numel, 1.0 / sqrt(fan_in), &r);
    }
}

/* ---- lifecycle --------------------------------------------------------------- */

static void model_destroy(induct_model *m) {
    free(m->params);
    free(m->grads);
    free(m->tensors);
    free(m->L);
    free(m->A);
    free(m->ws);
    free(m->tok_ws);
    if (m->standing.release) m->standing.release(m->standing.self, m);
    free(m);
}

void induct__model_ref(induct_model *m) { atomic_fetch_add(&m->refcount, 1); }

INDUCT_API void induct_model_free(induct_model *m) {
    if (!m) return;
    if (atomic_fetch_sub(&m->refcount, 1) == 1) model_destroy(m);
}

#define TABLE_BYTES_MAX ((uint64_t)1 << 30)

static int model_alloc(induct_model **out, const induct_model_config *c) {
    induct_model *m = calloc(1, sizeof *m);
    INDUCT_FAIL_IF(!m, INDUCT_ENOMEM, "out of memory allocating a model");
    m->cfg = *c;
    atomic_init(&m->refcount, 1);
    atomic_init(&m->interrupt, 0);
    atomic_init(&m->mem_held, 0);
    /* count first (m->L is NULL, so nothing is stored): the limits are checked before
     * anything proportional to the config is allocated */
    table_builder tb = {0};
    build_table(m, &tb);
    if (tb.overflow || tb.total > INDUCT_MAX_PARAMS) {
        model_destroy(m);
        return induct__fail(INDUCT_ELIMIT,
                            "model config asks for %s parameters (limit 2^31)",
                            tb.overflow ? "more than SIZE_MAX" : "too many");
    }
    /* bookkeeping: a tensor table entry and two per-layer tables; with tiny layers
     * these outgrow the parameters themselves, so they have their own limit */
    uint64_t tables = (uint64_t)c->n_layers * (sizeof *m->L + sizeof *m->A);
    if (tb.n > TABLE_BYTES_MAX / sizeof *tb.t ||
        tables + tb.n * sizeof *tb.t > TABLE_BYTES_MAX) {
        model_destroy(m);
        return induct__fail(INDUCT_ELIMIT,
                            "model config asks for %zu tensors in %u layers: their tables "
                            "exceed the limit of 2^30 bytes",
                            tb.n, c->n_layers);
    }
    tables += tb.n * sizeof *tb.t;
    uint64_t bytes = (uint64_t)tb.total * 2u * sizeof(float) + tables;
    if (c->max_bytes && bytes > c->max_bytes) {
        model_destroy(m);
        return induct__fail(INDUCT_ELIMIT,
                            "model config needs %llu bytes (%zu parameters and their gradients, "
                            "tables), more than its max_bytes %llu",
                            (unsigned long long)bytes, tb.total,
                            (unsigned long long)c->max_bytes);
    }
    m->L = calloc(c->n_layers, sizeof *m->L);
    m->A = calloc(c->n_layers, sizeof *m->A);
    if (!m->L || !m->A) {
        model_destroy(m);
        return induct__fail(INDUCT_ENOMEM, "out of memory allocating layer tables");
    }
    tb.t = calloc(tb.n, sizeof *tb.t);
    m->params = calloc(tb.total ? tb.total : 1, sizeof(float));
    m->grads = calloc(tb.total ? tb.total : 1, sizeof(float));
    if (!tb.t || !m->params || !m->grads) {
        free(tb.t);
        model_destroy(m);
        return induct__fail(INDUCT_ENOMEM, "out of memory allocating %zu parameters", tb.total);
    }
    tb.cap = tb.n;
    tb.n = 0;
    tb.total = 0;
    build_table(m, &tb);
    m->tensors = tb.t;
    m->n_tensors = tb.n;
    m->n_params = tb.total;
    atomic_store(&m->mem_held, bytes);
    *out = m;
    return INDUCT_OK;
}

int induct__model_reserve(const induct_model *m, uint64_t add, uint64_t release,
                          const char *what) {
    uint64_t cap = m->cfg.max_bytes, held = atomic_load(&m->mem_held);
    uint64_t base = held > release ? held - release : 0;
    INDUCT_FAIL_IF(cap && (add > cap || base > cap - add), INDUCT_ELIMIT,
                   "%s needs %llu more bytes; the model holds %llu and its max_bytes is %llu",
                   what, (unsigned long long)(add > release ? add - release : 0),
                   (unsigned long long)held, (unsigned long long)cap);
    return INDUCT_OK;
}

void induct__model_held(induct_model *m, uint64_t add, uint64_t release) {
    uint64_t held = atomic_load(&m->mem_held);
    held = held > release ? held - release : 0;
    atomic_store(&m->mem_held, held + add);
}

INDUCT_API int induct_model_set_max_bytes(induct_model *m, uint64_t max_bytes) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_set_max_bytes: model is NULL");
    uint64_t held = atomic_load(&m->mem_held);
    INDUCT_FAIL_IF(max_bytes && held > max_bytes, INDUCT_ELIMIT,
                   "induct_model_set_max_bytes: the model already holds %llu bytes, more than "
                   "%llu",
                   (unsigned long long)held, (unsigned long long)max_bytes);
    m->cfg.max_bytes = max_bytes;
    return INDUCT_OK;
}

INDUCT_API uint64_t induct_model_memory_used(const induct_model *m) {
    return m ? atomic_load(&m->mem_held) : 0;
}

INDUCT_API int induct_model_new(induct_model **out, const induct_model_config *cfg) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_model_new: out is NULL");
    *out = NULL;
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    INDUCT_TRY(induct__struct_in(&c, sizeof c, INDUCT__MODEL_CONFIG_MIN, cfg, "induct_model_config"));
    INDUCT_TRY(validate_config(&c));
    induct_model *m;
    INDUCT_TRY(model_alloc(&m, &c));
    init_weights(m);
    *out = m;
    return INDUCT_OK;
}

INDUCT_API int induct_model_clone(induct_model **out, const induct_model *src) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_model_clone: out is NULL");
    *out = NULL;
    INDUCT_FAIL_IF(!src, INDUCT_EINVAL, "induct_model_clone: model is NULL");
    induct_model *m;
    INDUCT_TRY(model_alloc(&m, &src->cfg));
    memcpy(m->params, src->params, src->n_params * sizeof(float));
    *out = m;
    return INDUCT_OK;
}

INDUCT_API int induct_model_get_config(const induct_model *m, induct_model_config *cfg_out) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_get_config: model is NULL");
    /* a caller whose struct ends before a field the model uses could not rebuild it */
    size_t size;
    if (cfg_out && m->cfg.shortformer_layers) {
        memcpy(&size, cfg_out, sizeof size);
        INDUCT_FAIL_IF(size >= INDUCT__MODEL_CONFIG_MIN &&
                           size < offsetof(induct_model_config, shortformer_layers) +
                                      sizeof(uint32_t),
                       INDUCT_EABI,
                       "induct_model_get_config: the model has shortformer_layers = %u, which "
                       "a %zu-byte induct_model_config cannot hold (a caller compiled against "
                       "an older header)",
                       m->cfg.shortformer_layers, size);
    }
    return induct__struct_out(cfg_out, &m->cfg, sizeof m->cfg, INDUCT__MODEL_CONFIG_MIN,
                              "induct_model_config");
}

INDUCT_API int induct_model_set_threads(induct_model *m, uint32_t n) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_set_threads: model is NULL");
    INDUCT_FAIL_IF(n > 1024, INDUCT_EINVAL, "induct_model_set_threads: %u threads > 1024", n);
    m->cfg.n_threads = n ? n : 1;
    return INDUCT_OK;
}

INDUCT_API size_t induct_model_n_params(const induct_model *m) { return m ? m->n_params : 0; }
INDUCT_API size_t induct_model_n_tensors(const induct_model *m) { return m ? m->n_tensors : 0; }

INDUCT_API int induct_model_tensor_info(const induct_model *m, size_t index, const char **name_out,
                                        uint32_t shape_out[4], uint32_t *ndim_out,
                                        size_t *numel_out) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_tensor_info: model is NULL");
    INDUCT_FAIL_IF(index >= m->n_tensors, INDUCT_ERANGE,
                   "induct_model_tensor_info: index %zu >= %zu tensors", index, m->n_tensors);
    const induct__tensor *t = &m->tensors[index];
    if (name_out) *name_out = t->name;
    if (shape_out) memcpy(shape_out, t->shape, sizeof t->shape);
    if (ndim_out) *ndim_out = t->ndim;
    if (numel_out) *numel_out = t->numel;
    return INDUCT_OK;
}

const induct__tensor *induct__model_find(const induct_model *m, const char *name) {
    for (size_t i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

INDUCT_API int induct_model_get_tensor(const induct_model *m, const char *name, uint32_t which,
                                       float *out, size_t out_cap, size_t *out_len) {
    INDUCT_FAIL_IF(!m || !name, INDUCT_EINVAL, "induct_model_get_tensor: NULL argument");
    INDUCT_FAIL_IF(which > INDUCT_BUF_GRAD, INDUCT_EINVAL,
                   "induct_model_get_tensor: which must be INDUCT_BUF_PARAM or INDUCT_BUF_GRAD");
    const induct__tensor *t = induct__model_find(m, name);
    INDUCT_FAIL_IF(!t, INDUCT_ERANGE, "induct_model_get_tensor: no tensor named '%s'", name);
    if (out_len) *out_len = t->numel;
    INDUCT_FAIL_IF(!out || out_cap < t->numel, INDUCT_EBUFSIZE,
                   "induct_model_get_tensor: '%s' has %zu elements, buffer holds %zu", name,
                   t->numel, out ? out_cap : 0);
    memcpy(out, (which == INDUCT_BUF_GRAD ? m->grads : m->params) + t->offset,
           t->numel * sizeof(float));
    return INDUCT_OK;
}

INDUCT_API int induct_model_set_tensor(induct_model *m, const char *name, const float *in,
                                       size_t len) {
    INDUCT_FAIL_IF(!m || !name || !in, INDUCT_EINVAL, "induct_model_set_tensor: NULL argument");
    const induct__tensor *t = induct__model_find(m, name);
    INDUCT_FAIL_IF(!t, INDUCT_ERANGE, "induct_model_set_tensor: no tensor named '%s'", name);
    INDUCT_FAIL_IF(len != t->numel, INDUCT_ERANGE,
                   "induct_model_set_tensor: '%s' has %zu elements, got %zu", name, t->numel,
                   len);
    for (size_t i = 0; i < len; i++)
        INDUCT_FAIL_IF(!isfinite(in[i]), INDUCT_EINVAL,
                       "induct_model_set_tensor: '%s' element %zu is not finite", name, i);
    memcpy(m->params + t->offset, in, len * sizeof(float));
    return INDUCT_OK;
}

INDUCT_API void induct_model_interrupt(induct_model *m) {
    if (m) atomic_store(&m->interrupt, 1);
}

int induct__model_validate_tokens(const induct_model *m, const int32_t *tokens, uint32_t B,
                                  uint32_t T) {
    INDUCT_FAIL_IF(!tokens, INDUCT_EINVAL, "tokens is NULL");
    INDUCT_FAIL_IF(B == 0, INDUCT_EINVAL, "batch must be >= 1");
    INDUCT_FAIL_IF(T < 2, INDUCT_EINVAL, "seq_len must be >= 2 (got %u)", T);
    INDUCT_FAIL_IF(T > m->cfg.n_ctx, INDUCT_ERANGE, "seq_len %u exceeds the model's n_ctx %u", T,
                   m->cfg.n_ctx);
    size_t n = (size_t)B * T;
    for (size_t i = 0; i < n; i++)
        INDUCT_FAIL_IF(tokens[i] < 0 || (uint32_t)tokens[i] >= m->cfg.d_vocab, INDUCT_ERANGE,
                       "token id %d at batch %zu, position %zu is outside [0, %u)", tokens[i],
                       i / T, i % T, m->cfg.d_vocab);
    return INDUCT_OK;
}
