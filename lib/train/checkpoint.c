/* Checkpoints: model weights (TransformerLens names) and optimizer state mapped onto
 * safetensors files (the format itself is safetensors.c). Saving names every tensor and
 * writes the config and the optimizer's parameters as __metadata__; loading takes the
 * config from the metadata (or the tensors' shapes, or the caller), checks every tensor the
 * model needs against it and refuses any it does not explain.
 * docs/checkpoint-format.md is the specification. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "train.h"

#define OPT_PREFIX "optimizer."

/* ---- writer ------------------------------------------------------------------- */

static const char *POS_NAMES[] = {"standard", "shortformer", "none"};
static const char *INIT_NAMES[] = {"gpt2", "torch"};

static int model_meta(cJSON *meta, const induct_model_config *c) {
    INDUCT_TRY(induct__st_put_str(meta, "format", "libinduct"));
    /* version 1 unless the model needs what only version 2 states, so that older
     * libraries keep reading every file they can honour and refuse the others */
    INDUCT_TRY(induct__st_put_u64(meta, "format_version", c->shortformer_layers ? 2 : 1));
    INDUCT_TRY(induct__st_put_str(meta, "library_version", INDUCT_VERSION_STRING));
    INDUCT_TRY(induct__st_put_u64(meta, "n_layers", c->n_layers));
    INDUCT_TRY(induct__st_put_u64(meta, "d_model", c->d_model));
    INDUCT_TRY(induct__st_put_u64(meta, "n_heads", c->n_heads));
    INDUCT_TRY(induct__st_put_u64(meta, "d_head", c->d_head));
    INDUCT_TRY(induct__st_put_u64(meta, "d_mlp", c->d_mlp));
    INDUCT_TRY(induct__st_put_u64(meta, "n_ctx", c->n_ctx));
    INDUCT_TRY(induct__st_put_u64(meta, "d_vocab", c->d_vocab));
    INDUCT_TRY(induct__st_put_str(meta, "positional_embedding_type", POS_NAMES[c->positional]));
    INDUCT_TRY(induct__st_put_str(meta, "normalization_type", c->layer_norm ? "LN" : "none"));
    INDUCT_TRY(induct__st_put_str(meta, "attn_only", c->d_mlp ? "false" : "true"));
    INDUCT_TRY(induct__st_put_str(meta, "act_fn", "gelu_new"));
    INDUCT_TRY(induct__st_put_u64(meta, "smeared_keys", c->smeared_keys));
    if (c->shortformer_layers)
        INDUCT_TRY(induct__st_put_u64(meta, "shortformer_layers", c->shortformer_layers));
    INDUCT_TRY(induct__st_put_f64(meta, "smear_alpha_init", c->smear_alpha_init));
    INDUCT_TRY(induct__st_put_str(meta, "init", INIT_NAMES[c->init]));
    INDUCT_TRY(induct__st_put_f64(meta, "init_std", c->init_std));
    INDUCT_TRY(induct__st_put_u64(meta, "seed", c->seed));
    INDUCT_TRY(induct__st_put_u64(meta, "n_threads", c->n_threads));
    return INDUCT_OK;
}

/* The optimizer parameters stored in the file (all but INDUCT_OPT_STEP), by key. */
typedef struct opt_key {
    const char *key;
    induct_opt_param p;
    double absent; /* value for a file without the key (written later), or NAN: required */
} opt_key;
static const opt_key OPT_KEYS[] = {
    {"optimizer.lr", INDUCT_OPT_LR, NAN},
    {"optimizer.beta1", INDUCT_OPT_BETA1, NAN},
    {"optimizer.beta2", INDUCT_OPT_BETA2, NAN},
    {"optimizer.eps", INDUCT_OPT_EPS, NAN},
    {"optimizer.weight_decay", INDUCT_OPT_WEIGHT_DECAY, NAN},
    {"optimizer.grad_clip", INDUCT_OPT_GRAD_CLIP, NAN},
    {"optimizer.warmup_steps", INDUCT_OPT_WARMUP_STEPS, NAN},
    {"optimizer.schedule", INDUCT_OPT_SCHEDULE, NAN},
    {"optimizer.total_steps", INDUCT_OPT_TOTAL_STEPS, NAN},
    {"optimizer.min_lr_ratio", INDUCT_OPT_MIN_LR_RATIO, NAN},
    {"optimizer.momentum", INDUCT_OPT_MOMENTUM, NAN},
    {"optimizer.grad_shards", INDUCT_OPT_GRAD_SHARDS, 1.0},
};
#define N_OPT_KEYS (sizeof OPT_KEYS / sizeof OPT_KEYS[0])

static int optimizer_meta(cJSON *meta, const induct_optimizer *o) {
    INDUCT_TRY(
        induct__st_put_str(meta, "optimizer", o->kind == INDUCT_OPTIM_ADAMW ? "adamw" : "sgd"));
    INDUCT_TRY(induct__st_put_u64(meta, "optimizer.step", o->step));
    for (size_t i = 0; i < N_OPT_KEYS; i++) {
        double v;
        INDUCT_TRY(induct_optimizer_get(o, OPT_KEYS[i].p, &v));
        INDUCT_TRY(induct__st_put_f64(meta, OPT_KEYS[i].key, v));
    }
    return INDUCT_OK;
}

/* Collect the model's tensors (and optionally the optimizer's) and write them. */
static int save(const induct_model *m, const induct_optimizer *o, const char *path) {
    INDUCT_FAIL_IF(!path || !*path, INDUCT_EINVAL, "checkpoint: path is NULL or empty");
    size_t per = 1 + (o ? (o->kind == INDUCT_OPTIM_ADAMW ? 2 : 1) : 0);
    size_t n = m->n_tensors * per;
    induct__st_out *ts = calloc(n ? n : 1, sizeof *ts);
    INDUCT_FAIL_IF(!ts, INDUCT_ENOMEM, "checkpoint: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < m->n_tensors; i++, k++) {
        snprintf(ts[k].name, sizeof ts[k].name, "%s", m->tensors[i].name);
        ts[k].data = m->params + m->tensors[i].offset;
        ts[k].t = &m->tensors[i];
    }
    for (size_t pass = 1; o && pass < per; pass++)
        for (size_t i = 0; i < m->n_tensors; i++, k++) {
            snprintf(ts[k].name, sizeof ts[k].name, OPT_PREFIX "%s.%s", pass == 1 ? "m" : "v",
                     m->tensors[i].name);
            ts[k].data = (pass == 1 ? o->m1 : o->m2) + m->tensors[i].offset;
            ts[k].t = &m->tensors[i];
        }
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_CreateObject();
    int rc = (root && meta) ? INDUCT_OK
                            : induct__fail(INDUCT_ENOMEM, "checkpoint: out of memory");
    if (rc == INDUCT_OK) rc = model_meta(meta, &m->cfg);
    if (rc == INDUCT_OK && o) rc = optimizer_meta(meta, o);
    if (rc == INDUCT_OK) {
        if (cJSON_AddItemToObject(root, "__metadata__", meta)) meta = NULL;
        else rc = induct__fail(INDUCT_ENOMEM, "checkpoint: out of memory");
    }
    if (rc == INDUCT_OK) rc = induct__st_write(path, root, ts, n);
    cJSON_Delete(meta);
    cJSON_Delete(root);
    free(ts);
    return rc;
}

INDUCT_API int induct_model_save(const induct_model *m, const char *path) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_save: model is NULL");
    return save(m, NULL, path);
}

INDUCT_API int induct_optimizer_save(const induct_optimizer *o, const char *path) {
    INDUCT_FAIL_IF(!o, INDUCT_EINVAL, "induct_optimizer_save: optimizer is NULL");
    return save(o->model, o, path);
}

/* ---- reader ------------------------------------------------------------------- */

/* A tensor the reader needs: present, F32, exactly the shape of `t`. */
static int st_expect(const induct__st_file *sf, const char *name, const induct__tensor *t,
                     const induct__st_entry **out) {
    const induct__st_entry *e = induct__st_find(sf, name);
    INDUCT_FAIL_IF(!e, INDUCT_EFORMAT, "checkpoint '%s': tensor '%s' is missing", sf->path, name);
    INDUCT_FAIL_IF(strcmp(e->dtype, "F32") != 0, INDUCT_EFORMAT,
                   "checkpoint '%s': tensor '%s' has dtype %s; libinduct reads F32 only", sf->path,
                   name, e->dtype);
    int same = e->ndim == t->ndim;
    for (uint32_t d = 0; same && d < t->ndim; d++) same = e->shape[d] == t->shape[d];
    if (!same) {
        char want[96] = "", got[160] = "";
        for (uint32_t d = 0; d < t->ndim; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%u", d ? ", " : "",
                     t->shape[d]);
        for (uint32_t d = 0; d < e->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%llu", d ? ", " : "",
                     (unsigned long long)e->shape[d]);
        return induct__fail(INDUCT_EFORMAT,
                            "checkpoint '%s': tensor '%s' has shape [%s] but the config needs [%s]",
                            sf->path, name, got, want);
    }
    *out = e;
    return INDUCT_OK;
}

/* ---- config from metadata and shapes -------------------------------------------- */

static int meta_dim(const induct__st_file *sf, const char *key, uint32_t *dst) {
    uint64_t v = 0;
    int present;
    INDUCT_TRY(induct__st_get_u64(sf, key, UINT32_MAX, &v, &present));
    if (present) *dst = (uint32_t)v;
    return present;
}

/* Shape dimension `d` of a tensor if it exists with `ndim` dims. */
static int shape_of(const induct__st_file *sf, const char *name, uint32_t ndim, uint32_t d,
                    uint32_t *dst) {
    const induct__st_entry *e = induct__st_find(sf, name);
    if (!e || e->ndim != ndim || e->shape[d] > UINT32_MAX) return 0;
    *dst = (uint32_t)e->shape[d];
    return 1;
}

/* Before a model of config `c` is allocated: the tensors that carry each dimension
 * (embed.W_E, pos_embed.W_pos, every layer's W_Q and W_in) must be in the file with
 * exactly the shape the config implies. Each one's bytes lie inside the data section
 * without overlap, so the model about to be allocated is at most a small multiple of
 * the file's size, whatever the metadata claims. */
static int precheck(const induct__st_file *sf, const induct_model_config *c) {
    uint32_t dh = c->d_head ? c->d_head : (c->n_heads ? c->d_model / c->n_heads : 0);
    induct__tensor t;
    const induct__st_entry *e;
    char name[INDUCT_NAME_MAX];
    memset(&t, 0, sizeof t);
    t.ndim = 2;
    t.shape[0] = c->d_vocab;
    t.shape[1] = c->d_model;
    INDUCT_TRY(st_expect(sf, "embed.W_E", &t, &e));
    if (c->positional != INDUCT_POS_NONE) {
        t.shape[0] = c->n_ctx;
        INDUCT_TRY(st_expect(sf, "pos_embed.W_pos", &t, &e));
    }
    for (uint32_t l = 0; l < c->n_layers; l++) {
        t.ndim = 3;
        t.shape[0] = c->n_heads;
        t.shape[1] = c->d_model;
        t.shape[2] = dh;
        snprintf(name, sizeof name, "blocks.%u.attn.W_Q", l);
        INDUCT_TRY(st_expect(sf, name, &t, &e));
        if (c->d_mlp) {
            t.ndim = 2;
            t.shape[0] = c->d_model;
            t.shape[1] = c->d_mlp;
            t.shape[2] = 0;
            snprintf(name, sizeof name, "blocks.%u.mlp.W_in", l);
            INDUCT_TRY(st_expect(sf, name, &t, &e));
        }
    }
    return INDUCT_OK;
}

/* The config of a file: its __metadata__, else its tensor shapes where they tell; or,
 * with `given`, the caller's config, which the metadata present must agree with. A
 * choice the tensors cannot tell (positions, LayerNorm when there are no LN tensors, the
 * MLP's activation) needs the metadata or `given`: else EFORMAT, naming each one. */
static int config_from_file(const induct__st_file *sf, induct_model_config *c,
                            const induct_model_config *given) {
    induct_model_config_init(c, sizeof *c);
    int rc;
    /* explicit metadata first */
    int has_layers, has_d_model, has_heads, has_d_head, has_mlp, has_ctx, has_vocab, has_pos,
        has_ln;
    if ((rc = has_layers = meta_dim(sf, "n_layers", &c->n_layers)) < 0) return rc;
    if ((rc = has_d_model = meta_dim(sf, "d_model", &c->d_model)) < 0) return rc;
    if ((rc = has_heads = meta_dim(sf, "n_heads", &c->n_heads)) < 0) return rc;
    if ((rc = has_d_head = meta_dim(sf, "d_head", &c->d_head)) < 0) return rc;
    if ((rc = has_mlp = meta_dim(sf, "d_mlp", &c->d_mlp)) < 0) return rc;
    if ((rc = has_ctx = meta_dim(sf, "n_ctx", &c->n_ctx)) < 0) return rc;
    if ((rc = has_vocab = meta_dim(sf, "d_vocab", &c->d_vocab)) < 0) return rc;
    if ((rc = has_pos = induct__st_get_choice(sf, "positional_embedding_type", POS_NAMES, 3,
                                              &c->positional)) < 0)
        return rc;
    static const char *const NORM[] = {"none", "LN"};
    if ((rc = has_ln =
             induct__st_get_choice(sf, "normalization_type", NORM, 2, &c->layer_norm)) < 0)
        return rc;
    static const char *const ACT[] = {"gelu_new"};
    uint32_t dummy;
    int has_act;
    if ((rc = has_act = induct__st_get_choice(sf, "act_fn", ACT, 1, &dummy)) < 0) return rc;
    if ((rc = induct__st_get_choice(sf, "init", INIT_NAMES, 2, &c->init)) < 0) return rc;
    int has_smear, present;
    uint64_t u;
    INDUCT_TRY(induct__st_get_u64(sf, "smeared_keys", 1, &u, &has_smear));
    if (has_smear) c->smeared_keys = (uint32_t)u;
    int has_sfl;
    INDUCT_TRY(induct__st_get_u64(sf, "shortformer_layers", UINT32_MAX, &u, &has_sfl));
    if (has_sfl) c->shortformer_layers = (uint32_t)u;
    INDUCT_TRY(induct__st_get_u64(sf, "n_threads", 1024, &u, &present));
    if (present) c->n_threads = (uint32_t)u;
    INDUCT_TRY(induct__st_get_u64(sf, "seed", UINT64_MAX, &u, &present));
    if (present) c->seed = u;
    INDUCT_TRY(induct__st_get_f64(sf, "smear_alpha_init", &c->smear_alpha_init, &present));
    INDUCT_TRY(induct__st_get_f64(sf, "init_std", &c->init_std, &present));

    if (given) {
        /* the caller's config; the metadata present must agree with it */
        uint32_t dh = given->d_head ? given->d_head
                      : given->n_heads    ? given->d_model / given->n_heads
                                          : 0;
        const struct {
            int has;
            uint32_t file, want;
            const char *key;
        } agree[] = {{has_layers, c->n_layers, given->n_layers, "n_layers"},
                     {has_d_model, c->d_model, given->d_model, "d_model"},
                     {has_heads, c->n_heads, given->n_heads, "n_heads"},
                     {has_d_head, c->d_head, dh, "d_head"},
                     {has_mlp, c->d_mlp, given->d_mlp, "d_mlp"},
                     {has_ctx, c->n_ctx, given->n_ctx, "n_ctx"},
                     {has_vocab, c->d_vocab, given->d_vocab, "d_vocab"},
                     {has_pos, c->positional, given->positional, "positional_embedding_type"},
                     {has_ln, c->layer_norm, given->layer_norm, "normalization_type"},
                     {has_smear, c->smeared_keys, given->smeared_keys, "smeared_keys"},
                     {has_sfl, c->shortformer_layers, given->shortformer_layers,
                      "shortformer_layers"}};
        for (size_t i = 0; i < sizeof agree / sizeof *agree; i++)
            INDUCT_FAIL_IF(agree[i].has && agree[i].file != agree[i].want, INDUCT_EFORMAT,
                           "checkpoint '%s': __metadata__ %s (%u) contradicts the given "
                           "config (%u)",
                           sf->path, agree[i].key, agree[i].file, agree[i].want);
        *c = *given;
        return INDUCT_OK;
    }
    /* what the tensors cannot tell needs the metadata or a config given explicitly */
    {
        char why[768] = "";
        size_t k = 0;
        int has_w_pos = induct__st_find(sf, "pos_embed.W_pos") != NULL;
        if (!has_pos)
            k += (size_t)snprintf(why + k, sizeof why - k, "%s",
                                  has_w_pos ? "; positional_embedding_type (W_pos serves "
                                              "standard and shortformer alike)"
                                            : "; positional_embedding_type (no W_pos: none, "
                                              "or rotary)");
        if (!has_ln && !induct__st_find(sf, "ln_final.w") && k < sizeof why)
            k += (size_t)snprintf(why + k, sizeof why - k,
                                  "; normalization_type (no LN tensors: none, or LN folded "
                                  "in, TransformerLens's fold_ln=True)");
        uint32_t mlp = 0;
        if (!has_act && (has_mlp ? c->d_mlp != 0 : shape_of(sf, "blocks.0.mlp.W_in", 2, 1, &mlp) != 0) &&
            k < sizeof why)
            k += (size_t)snprintf(why + k, sizeof why - k,
                                  "; act_fn (the MLP's activation)");
        INDUCT_FAIL_IF(k > 0, INDUCT_EFORMAT,
                       "checkpoint '%s': its architecture cannot be told from its tensors; "
                       "missing: %s. Give these __metadata__ keys or the whole configuration "
                       "(induct_model_load_config)",
                       sf->path, why + 2);
    }
    /* inferred from shapes where the metadata is silent (documented) */
    if (!has_vocab) shape_of(sf, "embed.W_E", 2, 0, &c->d_vocab);
    if (!has_d_model) shape_of(sf, "embed.W_E", 2, 1, &c->d_model);
    if (!has_ctx && !shape_of(sf, "pos_embed.W_pos", 2, 0, &c->n_ctx))
        return induct__fail(INDUCT_EFORMAT,
                            "checkpoint '%s': n_ctx is not in __metadata__ and there is no "
                            "pos_embed.W_pos to infer it from",
                            sf->path);
    if (!has_layers) {
        uint32_t L = 0;
        for (size_t i = 0; i < sf->n; i++) {
            unsigned long l;
            char *end;
            if (strncmp(sf->e[i].name, "blocks.", 7) != 0) continue;
            errno = 0;
            l = strtoul(sf->e[i].name + 7, &end, 10);
            if (end != sf->e[i].name + 7 && *end == '.' && !errno && l < sf->n && l + 1 > L)
                L = (uint32_t)(l + 1);
        }
        c->n_layers = L;
    }
    if (!has_heads) shape_of(sf, "blocks.0.attn.W_Q", 3, 0, &c->n_heads);
    if (!has_d_head) shape_of(sf, "blocks.0.attn.W_Q", 3, 2, &c->d_head);
    if (!has_mlp && !shape_of(sf, "blocks.0.mlp.W_in", 2, 1, &c->d_mlp)) c->d_mlp = 0;
    if (!has_ln) c->layer_norm = 1; /* ln_final.w exists (checked above) */
    if (!has_smear) c->smeared_keys = induct__st_find(sf, "blocks.0.attn.smear_alpha") != NULL;
    const char *ao = induct__st_meta(sf, "attn_only");
    INDUCT_FAIL_IF(ao && strcmp(ao, c->d_mlp ? "false" : "true") != 0, INDUCT_EFORMAT,
                   "checkpoint '%s': __metadata__ attn_only = \"%s\" contradicts d_mlp = %u",
                   sf->path, ao, c->d_mlp);
    return INDUCT_OK;
}

/* ---- public loaders ------------------------------------------------------------ */

/* The model's tensor names, sorted: membership tests in O(log n) for every entry of a
 * header (a linear search per entry would be quadratic in a hostile header). */
static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const induct__tensor *const *)a)[0]->name,
                  ((const induct__tensor *const *)b)[0]->name);
}
static const induct__tensor **sorted_tensors(const induct_model *m) {
    const induct__tensor **v = calloc(m->n_tensors ? m->n_tensors : 1, sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < m->n_tensors; i++) v[i] = &m->tensors[i];
    qsort(v, m->n_tensors, sizeof *v, cmp_tensor_name);
    return v;
}
static int has_tensor(const induct__tensor **v, size_t n, const char *name) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(v[mid]->name, name);
        if (c == 0) return 1;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

/* induct_model_load() on an opened file (with `given`: induct_model_load_config());
 * closes it. */
static int model_load(induct_model **out, induct__st_file *sf_, const induct_model_config *given) {
    induct__st_file sf = *sf_;
    const char *path = sf.path;
    induct_model_config c;
    int rc = config_from_file(&sf, &c, given);
    induct_model *m = NULL;
    if (rc == INDUCT_OK && c.n_layers == 0)
        rc = induct__fail(INDUCT_EFORMAT, "checkpoint '%s': no blocks.{l}. tensors and no n_layers "
                                          "in __metadata__", path);
    if (rc == INDUCT_OK) rc = precheck(&sf, &c);
    if (rc == INDUCT_OK) {
        rc = induct_model_new(&m, &c);
        if (rc == INDUCT_EINVAL || rc == INDUCT_ELIMIT || rc == INDUCT_EABI) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", induct_last_error_message());
            rc = induct__fail(INDUCT_EFORMAT, "checkpoint '%s': its config is invalid: %s", path,
                              msg);
        }
    }
    /* every model tensor, exactly */
    for (size_t i = 0; rc == INDUCT_OK && i < m->n_tensors; i++) {
        const induct__st_entry *e;
        rc = st_expect(&sf, m->tensors[i].name, &m->tensors[i], &e);
        if (rc == INDUCT_OK)
            rc = induct__st_read(&sf, e, m->params + m->tensors[i].offset, m->tensors[i].numel);
    }
    /* nothing else, except optimizer state */
    const induct__tensor **names = NULL;
    if (rc == INDUCT_OK && !(names = sorted_tensors(m)))
        rc = induct__fail(INDUCT_ENOMEM, "checkpoint '%s': out of memory", path);
    for (size_t i = 0; rc == INDUCT_OK && i < sf.n; i++) {
        const char *nm = sf.e[i].name;
        if (strncmp(nm, OPT_PREFIX, strlen(OPT_PREFIX)) == 0) continue;
        if (!has_tensor(names, m->n_tensors, nm))
            rc = induct__fail(INDUCT_EFORMAT,
                              "checkpoint '%s': unknown tensor '%s' (not a parameter of the "
                              "model the metadata describes)",
                              path, nm);
    }
    free(names);
    induct__st_close(&sf);
    if (rc != INDUCT_OK) {
        induct_model_free(m);
        return rc;
    }
    *out = m;
    return INDUCT_OK;
}

INDUCT_API int induct_model_load(induct_model **out, const char *path) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_model_load: out is NULL");
    *out = NULL;
    INDUCT_FAIL_IF(!path, INDUCT_EINVAL, "induct_model_load: path is NULL");
    induct__st_file sf;
    INDUCT_TRY(induct__st_open(&sf, path));
    return model_load(out, &sf, NULL);
}

INDUCT_API int induct_model_load_config(induct_model **out, const char *path,
                                        const induct_model_config *cfg) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_model_load_config: out is NULL");
    *out = NULL;
    INDUCT_FAIL_IF(!path, INDUCT_EINVAL, "induct_model_load_config: path is NULL");
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    INDUCT_TRY(induct__struct_in(&c, sizeof c, INDUCT__MODEL_CONFIG_MIN, cfg, "induct_model_config"));
    induct__st_file sf;
    INDUCT_TRY(induct__st_open(&sf, path));
    return model_load(out, &sf, &c);
}

int induct__model_load_mem(induct_model **out, const void *data, size_t len) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct__model_load_mem: out is NULL");
    *out = NULL;
    induct__st_file sf;
    INDUCT_TRY(induct__st_open_mem(&sf, data, len));
    return model_load(out, &sf, NULL);
}

/* induct_optimizer_load() on an opened file; closes it. */
static int optimizer_load(induct_optimizer **out, induct_model *m, induct__st_file *sf_) {
    induct__st_file sf = *sf_;
    const char *path = sf.path;
    int rc = INDUCT_OK;
    const char *kind = induct__st_meta(&sf, "optimizer");
    uint32_t k = 0;
    if (!kind)
        rc = induct__fail(INDUCT_EFORMAT,
                          "checkpoint '%s': no optimizer state (__metadata__ \"optimizer\" is "
                          "missing)",
                          path);
    else if (!strcmp(kind, "adamw")) k = INDUCT_OPTIM_ADAMW;
    else if (!strcmp(kind, "sgd")) k = INDUCT_OPTIM_SGD;
    else
        rc = induct__fail(INDUCT_EFORMAT,
                          "checkpoint '%s': __metadata__ optimizer = \"%s\" is not adamw or sgd",
                          path, kind);
    induct_optimizer *o = NULL;
    if (rc == INDUCT_OK) rc = induct_optimizer_new(&o, m, k);
    for (size_t i = 0; rc == INDUCT_OK && i < N_OPT_KEYS; i++) {
        double v = 0;
        int present;
        rc = induct__st_get_f64(&sf, OPT_KEYS[i].key, &v, &present);
        if (rc == INDUCT_OK && !present && !isnan(OPT_KEYS[i].absent)) v = OPT_KEYS[i].absent;
        else if (rc == INDUCT_OK && !present)
            rc = induct__fail(INDUCT_EFORMAT, "checkpoint '%s': __metadata__ \"%s\" is missing",
                              path, OPT_KEYS[i].key);
        if (rc == INDUCT_OK && induct_optimizer_set(o, OPT_KEYS[i].p, v) != INDUCT_OK)
            rc = induct__fail(INDUCT_EFORMAT,
                              "checkpoint '%s': __metadata__ \"%s\" = %.17g is out of range",
                              path, OPT_KEYS[i].key, v);
    }
    if (rc == INDUCT_OK) {
        uint64_t step = 0;
        int present;
        rc = induct__st_get_u64(&sf, "optimizer.step", (uint64_t)1 << 53, &step, &present);
        if (rc == INDUCT_OK && !present)
            rc = induct__fail(INDUCT_EFORMAT,
                              "checkpoint '%s': __metadata__ \"optimizer.step\" is missing", path);
        if (rc == INDUCT_OK) o->step = step;
    }
    size_t npass = k == INDUCT_OPTIM_ADAMW ? 2 : 1;
    char name[INDUCT_NAME_MAX + 16];
    for (size_t pass = 0; rc == INDUCT_OK && pass < npass; pass++)
        for (size_t i = 0; rc == INDUCT_OK && i < m->n_tensors; i++) {
            const induct__tensor *t = &m->tensors[i];
            const induct__st_entry *e;
            snprintf(name, sizeof name, OPT_PREFIX "%s.%s", pass ? "v" : "m", t->name);
            rc = st_expect(&sf, name, t, &e);
            if (rc == INDUCT_OK)
                rc = induct__st_read(&sf, e, (pass ? o->m2 : o->m1) + t->offset, t->numel);
        }
    /* no optimizer tensor that this model and kind do not explain */
    const induct__tensor **names = NULL;
    if (rc == INDUCT_OK && !(names = sorted_tensors(m)))
        rc = induct__fail(INDUCT_ENOMEM, "checkpoint '%s': out of memory", path);
    for (size_t i = 0; rc == INDUCT_OK && i < sf.n; i++) {
        const char *nm = sf.e[i].name;
        size_t pl = strlen(OPT_PREFIX);
        if (strncmp(nm, OPT_PREFIX, pl) != 0) continue;
        int known = (nm[pl] == 'm' || (nm[pl] == 'v' && npass == 2)) && nm[pl + 1] == '.' &&
                    has_tensor(names, m->n_tensors, nm + pl + 2);
        if (!known)
            rc = induct__fail(INDUCT_EFORMAT,
                              "checkpoint '%s': unknown tensor '%s' (no such optimizer state for "
                              "this model and optimizer kind)",
                              path, nm);
    }
    free(names);
    induct__st_close(&sf);
    if (rc != INDUCT_OK) {
        induct_optimizer_free(o);
        return rc;
    }
    *out = o;
    return INDUCT_OK;
}

INDUCT_API int induct_optimizer_load(induct_optimizer **out, induct_model *m, const char *path) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_optimizer_load: out is NULL");
    *out = NULL;
    INDUCT_FAIL_IF(!m || !path, INDUCT_EINVAL, "induct_optimizer_load: NULL argument");
    induct__st_file sf;
    INDUCT_TRY(induct__st_open(&sf, path));
    return optimizer_load(out, m, &sf);
}

int induct__optimizer_load_mem(induct_optimizer **out, induct_model *m, const void *data,
                               size_t len) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct__optimizer_load_mem: out is NULL");
    *out = NULL;
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct__optimizer_load_mem: model is NULL");
    induct__st_file sf;
    INDUCT_TRY(induct__st_open_mem(&sf, data, len));
    return optimizer_load(out, m, &sf);
}
