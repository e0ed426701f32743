/* One model's run of a study: settings, flags, config.json, data, model (run_config.h). */
#include "run_config.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

const run_config RUN_DEFAULTS = {
    .model = "", .format = INDUCT_TOKFILE_U16, .eval_windows = 1024, .data_seed = 0,
    .val_fraction = 0.1, .block_tokens = 65536, .bos = 0, .repeat_fraction = 0.0,
    .repeat_min = 8, .repeat_max = 64,
    .d_model = 64, .heads = 2, .d_head = 0, .d_mlp = 0, .seq_len = 512, .allow_short = 0, .ln = 1,
    .positional = INDUCT_POS_SHORTFORMER, .shortformer_layers = 1, .init = INDUCT_INIT_GPT2,
    .init_std = NAN, .pos_init = POS_INIT_SINUSOIDAL, .pos_amp = 3.0, .smear_alpha = NAN,
    .seed = 0, .batch = 8, .lr = 1e-2, .warmup = 200, .weight_decay = NAN, .grad_clip = NAN,
    .cosine = 0, .min_lr_ratio = 0.0, .steps = 3000,
    .eval_every = 250, .eval_batch = 256, .icl_band = 5, .snapshots = 4,
};

int run_parse_model(run_config *c, const char *name) {
    if (strlen(name) >= NAME_MAX_LEN || name[0] < '1' || name[0] > '9') return -1;
    char *end = NULL;
    unsigned long nl = strtoul(name, &end, 10);
    if (nl < 1 || nl > 64 || *end != 'L') return -1;
    const char *rest = end + 1;
    uint32_t mlp = 0, smeared = 0;
    if (!strncmp(rest, "-mlp", 4)) mlp = 1, rest += 4;
    if (!strncmp(rest, "-smeared", 8)) smeared = 1, rest += 8;
    if (*rest) return -1;
    snprintf(c->model, sizeof c->model, "%s", name);
    c->n_layers = (uint32_t)nl;
    c->mlp = mlp;
    c->smeared = smeared;
    return 0;
}

uint32_t run_d_head(const run_config *c) { return c->d_head ? c->d_head : c->d_model / c->heads; }

uint32_t run_d_mlp(const run_config *c) {
    return c->mlp ? (c->d_mlp ? c->d_mlp : 4 * c->d_model) : 0;
}

/* ---- the settings as a table: flag, type, field, range ---- */

typedef enum { T_U32, T_U64, T_F64, T_STR, T_CHOICE } ftype;

static const char *const FORMATS[] = {"u16", "u32", "llmc", NULL};
static const char *const POSITIONALS[] = {"standard", "shortformer", "none", NULL}; /* INDUCT_POS_* */
static const char *const INITS[] = {"gpt2", "torch", NULL};                       /* INDUCT_INIT_* */
static const char *const POS_INITS[] = {"random", "sinusoidal", NULL};
static const char *const SCHEDULES[] = {"constant", "cosine", NULL};

typedef struct field {
    const char *flag; /* also the JSON key, with '-' as '_' */
    ftype type;
    size_t off;
    double lo, hi;                /* numbers */
    const char *const *choices;   /* T_CHOICE */
} field;

#define F(flag, type, member, lo, hi) {flag, type, offsetof(run_config, member), lo, hi, NULL}
#define C(flag, member, list) {flag, T_CHOICE, offsetof(run_config, member), 0, 0, list}
static const field FIELDS[] = {
    F("text", T_STR, text, 0, 0),
    F("suffix", T_STR, suffix, 0, 0),
    F("tokens", T_STR, tokens, 0, 0),
    C("format", format, FORMATS),
    F("d-vocab", T_U32, d_vocab, 0, INT32_MAX),
    F("eval-windows", T_U32, eval_windows, 1, UINT32_MAX),
    F("data-seed", T_U64, data_seed, 0, (double)UINT64_MAX),
    F("val-fraction", T_F64, val_fraction, 1e-6, 0.9),
    F("block-tokens", T_U64, block_tokens, 0, (double)UINT64_MAX),
    F("bos", T_U32, bos, 0, 1),
    F("repeat-fraction", T_F64, repeat_fraction, 0, 1),
    F("d-model", T_U32, d_model, 1, 1 << 16),
    F("heads", T_U32, heads, 1, 1024),
    F("d-head", T_U32, d_head, 0, 4096),
    F("d-mlp", T_U32, d_mlp, 0, 1 << 20),
    F("seq-len", T_U32, seq_len, 2, 1 << 20),
    F("ln", T_U32, ln, 0, 1),
    C("positional", positional, POSITIONALS),
    F("shortformer-layers", T_U32, shortformer_layers, 0, 1024),
    C("init", init, INITS),
    F("init-std", T_F64, init_std, 0, 10),
    C("pos-init", pos_init, POS_INITS),
    F("pos-amp", T_F64, pos_amp, 0, 1e3),
    F("smear-alpha-init", T_F64, smear_alpha, -100, 100),
    F("seed", T_U64, seed, 0, (double)UINT64_MAX),
    F("batch", T_U32, batch, 1, 1 << 20),
    F("lr", T_F64, lr, 0, 10),
    F("warmup", T_U64, warmup, 0, 1e12),
    F("weight-decay", T_F64, weight_decay, 0, 10),
    F("grad-clip", T_F64, grad_clip, 0, 1e9),
    C("schedule", cosine, SCHEDULES),
    F("min-lr-ratio", T_F64, min_lr_ratio, 0, 1),
    F("steps", T_U64, steps, 1, 1e12),
    F("eval-every", T_U64, eval_every, 1, 1e12),
    F("eval-batch", T_U32, eval_batch, 1, 1 << 20),
    F("icl-band", T_U32, icl_band, 0, 1000),
    F("snapshots", T_U32, snapshots, 0, 1000),
};
#undef F
#undef C
#define N_FIELDS (sizeof FIELDS / sizeof FIELDS[0])

const struct option RUN_FLAGS[] = {
    {"text", required_argument, 0, 0}, {"suffix", required_argument, 0, 0},
    {"tokens", required_argument, 0, 0}, {"format", required_argument, 0, 0},
    {"d-vocab", required_argument, 0, 0}, {"eval-windows", required_argument, 0, 0},
    {"data-seed", required_argument, 0, 0}, {"val-fraction", required_argument, 0, 0},
    {"block-tokens", required_argument, 0, 0}, {"bos", required_argument, 0, 0},
    {"repeat-fraction", required_argument, 0, 0}, {"repeat-len", required_argument, 0, 0},
    {"model", required_argument, 0, 0}, {"d-model", required_argument, 0, 0},
    {"heads", required_argument, 0, 0}, {"d-head", required_argument, 0, 0},
    {"d-mlp", required_argument, 0, 0}, {"seq-len", required_argument, 0, 0},
    {"allow-short", no_argument, 0, 0}, {"ln", required_argument, 0, 0},
    {"positional", required_argument, 0, 0}, {"shortformer-layers", required_argument, 0, 0},
    {"init", required_argument, 0, 0}, {"init-std", required_argument, 0, 0},
    {"pos-init", required_argument, 0, 0}, {"pos-amp", required_argument, 0, 0},
    {"smear-alpha-init", required_argument, 0, 0}, {"seed", required_argument, 0, 0},
    {"batch", required_argument, 0, 0}, {"lr", required_argument, 0, 0},
    {"warmup", required_argument, 0, 0}, {"weight-decay", required_argument, 0, 0},
    {"grad-clip", required_argument, 0, 0}, {"schedule", required_argument, 0, 0},
    {"min-lr-ratio", required_argument, 0, 0}, {"steps", required_argument, 0, 0},
    {"eval-every", required_argument, 0, 0}, {"eval-batch", required_argument, 0, 0},
    {"icl-band", required_argument, 0, 0}, {"snapshots", required_argument, 0, 0},
    {0, 0, 0, 0}};

static void *at(run_config *c, const field *f) { return (char *)c + f->off; }
static const void *at_c(const run_config *c, const field *f) { return (const char *)c + f->off; }

int run_on_flag(run_config *c, const char *name, const char *v, int *shortformer_set) {
    if (!strcmp(name, "model")) {
        if (run_parse_model(c, v))
            cli_usage_error("--model: '%s' is not <n>L, <n>L-mlp, <n>L-smeared or "
                            "<n>L-mlp-smeared (1 <= n <= 64)", v);
        return 1;
    }
    if (!strcmp(name, "allow-short")) {
        c->allow_short = 1;
        return 1;
    }
    if (!strcmp(name, "repeat-len")) {
        const char *comma = strchr(v, ',');
        char lo[32];
        if (!comma || (size_t)(comma - v) >= sizeof lo)
            cli_usage_error("--repeat-len must be MIN,MAX (tokens), got '%s'", v);
        memcpy(lo, v, (size_t)(comma - v));
        lo[comma - v] = 0;
        c->repeat_min = cli_u32("repeat-len", lo, 1, 1 << 20);
        c->repeat_max = cli_u32("repeat-len", comma + 1, 1, 1 << 20);
        if (c->repeat_min > c->repeat_max)
            cli_usage_error("--repeat-len: MIN %u is above MAX %u", c->repeat_min, c->repeat_max);
        return 1;
    }
    for (size_t i = 0; i < N_FIELDS; i++) {
        const field *f = &FIELDS[i];
        if (strcmp(name, f->flag)) continue;
        switch (f->type) {
        case T_U32: *(uint32_t *)at(c, f) = cli_u32(name, v, (uint32_t)f->lo, (uint32_t)f->hi); break;
        case T_U64:
            *(uint64_t *)at(c, f) =
                cli_u64(name, v, (uint64_t)f->lo, f->hi >= 1.8e19 ? UINT64_MAX : (uint64_t)f->hi);
            break;
        case T_F64: *(double *)at(c, f) = cli_f64(name, v, f->lo, f->hi); break;
        case T_STR: *(const char **)at(c, f) = v; break;
        case T_CHOICE: *(uint32_t *)at(c, f) = cli_choice(name, v, f->choices); break;
        }
        if (!strcmp(name, "shortformer-layers")) *shortformer_set = 1;
        return 1;
    }
    return 0;
}

void run_flags_usage(FILE *f) {
    const run_config *d = &RUN_DEFAULTS;
    fprintf(f,
        "data:      --text PATH (a file, or a directory with --suffix SUF) | --tokens PATH\n"
        "           [--format u16|u32|llmc] [--d-vocab N (0: largest id + 1)]\n"
        "           --eval-windows N (%u)  --data-seed N (%llu)  --val-fraction F (%g)\n"
        "           --block-tokens N (%llu)  --bos 0|1 (%u)\n"
        "           --repeat-fraction X (%g; training windows with a repeated span)\n"
        "           --repeat-len MIN,MAX (%u,%u tokens)\n"
        "model:     --model <n>L[-mlp][-smeared] (attention-only; -mlp: GELU MLPs of --d-mlp,\n"
        "           0 = 4 d_model; -smeared: smeared keys)  --d-model N (%u)  --heads N (%u)\n"
        "           --d-head N (0: d-model / heads)  --d-mlp N (0)  --seq-len N (%u; >= 512\n"
        "           unless --allow-short)  --ln 0|1 (%u)  --positional shortformer|standard|none\n"
        "           --shortformer-layers N (%u; 0 = every layer)  --init gpt2|torch\n"
        "           --init-std X  --pos-init random|sinusoidal (sinusoidal)  --pos-amp X (%g)\n"
        "           --smear-alpha-init X  --seed N (%llu)\n"
        "training:  --batch N (%u)  --lr X (%g)  --warmup N (%llu)  --weight-decay X\n"
        "           --grad-clip X  --schedule constant|cosine  --min-lr-ratio X (%g)\n"
        "           --steps N (%llu)\n"
        "measures:  --eval-every N (%llu)  --eval-batch N (%u)  --icl-band W (%u)\n"
        "           --snapshots N (%u: weights + optimizer every steps/N, 0 = none)\n",
        d->eval_windows, (unsigned long long)d->data_seed, d->val_fraction,
        (unsigned long long)d->block_tokens, d->bos, d->repeat_fraction, d->repeat_min,
        d->repeat_max, d->d_model, d->heads, d->seq_len, d->ln, d->shortformer_layers, d->pos_amp,
        (unsigned long long)d->seed, d->batch, d->lr, (unsigned long long)d->warmup,
        d->min_lr_ratio, (unsigned long long)d->steps, (unsigned long long)d->eval_every,
        d->eval_batch, d->icl_band, d->snapshots);
}

void run_icl_tokens(const run_config *c, uint32_t *early, uint32_t *late, int *full) {
    const uint32_t T = c->seq_len, w = c->icl_band;
    *full = T >= 501 + w;
    *late = *full ? 500 : (T > 1 + w ? T - 1 - w : 1);
    *early = *full ? 50 : (*late / 10 ? *late / 10 : 1);
}

void run_validate(const run_config *c, int shortformer_set) {
    if (!c->text == !c->tokens) cli_usage_error("give exactly one of --text PATH and --tokens PATH");
    if (c->suffix && !c->text) cli_usage_error("--suffix goes with --text");
    const char *path = c->text ? c->text : c->tokens;
    struct stat st;
    if (stat(path, &st)) cli_usage_error("cannot read '%s': %s", path, strerror(errno));
    if (c->tokens && !S_ISREG(st.st_mode)) cli_usage_error("--tokens '%s' is not a regular file", path);
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        cli_usage_error("'%s' is neither a regular file nor a directory", path);
    if (access(path, R_OK | (S_ISDIR(st.st_mode) ? X_OK : 0)))
        cli_usage_error("cannot read '%s': %s", path, strerror(errno));
    if (c->repeat_fraction > 0 && c->seq_len / 2 < c->repeat_min)
        cli_usage_error("--repeat-len MIN %u does not fit twice in --seq-len %u", c->repeat_min,
                        c->seq_len);
    if (c->seq_len < 512 && !c->allow_short)
        cli_usage_error("--seq-len %u is below 512: the ICL score needs the loss of the 500th "
                        "token (pass --allow-short for a quick test with a shortened score)",
                        c->seq_len);
    if (c->seq_len < 101)
        cli_usage_error("--seq-len %u is below 101, the length of the prefix-matching probe",
                        c->seq_len);
    if (!c->d_head && c->d_model % c->heads)
        cli_usage_error("--heads %u does not divide --d-model %u (or give --d-head)", c->heads,
                        c->d_model);
    if (shortformer_set && c->positional != INDUCT_POS_SHORTFORMER)
        cli_usage_error("--shortformer-layers needs --positional shortformer");
    if (c->pos_init == POS_INIT_SINUSOIDAL && c->positional == INDUCT_POS_NONE)
        cli_usage_error("--pos-init sinusoidal needs positions (--positional shortformer|standard)");
    if (c->pos_init == POS_INIT_SINUSOIDAL && c->d_model % 2)
        cli_usage_error("--pos-init sinusoidal needs an even --d-model");
    uint32_t early, late;
    int full;
    run_icl_tokens(c, &early, &late, &full);
    if (!full && !c->allow_short)
        cli_usage_error("--icl-band %u needs --seq-len >= %u for the bands around token 500 (or "
                        "--allow-short)", c->icl_band, 501 + c->icl_band);
    if (c->icl_band >= early || late - 1 + c->icl_band > c->seq_len - 2)
        cli_usage_error("--icl-band %u does not fit: the bands around tokens %u and %u need "
                        "--icl-band < %u and <= %u", c->icl_band, early, late, early,
                        c->seq_len - 1 - late);
}

/* ---- config.json ---- */

static void json_key(const char *flag, char *key, size_t cap) {
    snprintf(key, cap, "%s", flag);
    for (char *p = key; *p; p++)
        if (*p == '-') *p = '_';
}

/* A uint64 as a JSON number while doubles hold it exactly, else as a decimal string. */
static cJSON *u64_json(uint64_t x) {
    if (x <= ((uint64_t)1 << 53)) return cJSON_CreateNumber((double)x);
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)x);
    return cJSON_CreateString(b);
}

cJSON *run_config_json(const run_config *c) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", RUN_FORMAT);
    cJSON_AddStringToObject(root, "library_version", induct_version_string());
    cJSON *s = cJSON_AddObjectToObject(root, "settings");
    cJSON_AddStringToObject(s, "model", c->model);
    char key[64];
    for (size_t i = 0; i < N_FIELDS; i++) {
        const field *f = &FIELDS[i];
        json_key(f->flag, key, sizeof key);
        const void *p = at_c(c, f);
        switch (f->type) {
        case T_U32: cJSON_AddNumberToObject(s, key, *(const uint32_t *)p); break;
        case T_U64: cJSON_AddItemToObject(s, key, u64_json(*(const uint64_t *)p)); break;
        case T_F64: cJSON_AddItemToObject(s, key, run_num(*(const double *)p)); break;
        case T_STR:
            if (*(const char *const *)p) cJSON_AddStringToObject(s, key, *(const char *const *)p);
            else cJSON_AddNullToObject(s, key);
            break;
        case T_CHOICE: cJSON_AddStringToObject(s, key, f->choices[*(const uint32_t *)p]); break;
        }
    }
    cJSON_AddNumberToObject(s, "repeat_min", c->repeat_min);
    cJSON_AddNumberToObject(s, "repeat_max", c->repeat_max);
    cJSON_AddBoolToObject(s, "allow_short", c->allow_short);
    return root;
}

int run_config_from_json(run_config *c, const cJSON *root, char *err, size_t cap) {
    *c = RUN_DEFAULTS;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "settings");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, RUN_FORMAT) || !cJSON_IsObject(s)) {
        snprintf(err, cap, "not a run configuration of this version (\"format\": \"%s\")",
                 RUN_FORMAT);
        return -1;
    }
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(s, "model");
    if (!cJSON_IsString(m) || run_parse_model(c, m->valuestring)) {
        snprintf(err, cap, "settings.model is not a model name");
        return -1;
    }
    char key[64];
    for (size_t i = 0; i < N_FIELDS; i++) {
        const field *f = &FIELDS[i];
        json_key(f->flag, key, sizeof key);
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(s, key);
        void *p = at(c, f);
        int ok = 1;
        switch (f->type) {
        case T_U32:
            ok = cJSON_IsNumber(x) && x->valuedouble >= f->lo && x->valuedouble <= f->hi &&
                 x->valuedouble == floor(x->valuedouble);
            if (ok) *(uint32_t *)p = (uint32_t)x->valuedouble;
            break;
        case T_U64:
            if (cJSON_IsString(x)) {
                char *end = NULL;
                errno = 0;
                *(uint64_t *)p = strtoull(x->valuestring, &end, 10);
                ok = *x->valuestring >= '0' && *x->valuestring <= '9' && !*end && !errno;
            } else {
                ok = cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble <= 9007199254740992.0 &&
                     x->valuedouble == floor(x->valuedouble);
                if (ok) *(uint64_t *)p = (uint64_t)x->valuedouble;
            }
            break;
        case T_F64:
            ok = cJSON_IsNull(x) || cJSON_IsNumber(x);
            if (ok) *(double *)p = cJSON_IsNull(x) ? NAN : x->valuedouble;
            break;
        case T_STR:
            ok = cJSON_IsNull(x) || cJSON_IsString(x);
            if (ok) *(const char **)p = cJSON_IsNull(x) ? NULL : x->valuestring;
            break;
        case T_CHOICE:
            ok = 0;
            for (uint32_t k = 0; cJSON_IsString(x) && f->choices[k]; k++)
                if (!strcmp(x->valuestring, f->choices[k])) *(uint32_t *)p = k, ok = 1;
            break;
        }
        if (!ok) {
            snprintf(err, cap, "settings.%s is missing or not valid", key);
            return -1;
        }
    }
    const cJSON *lo = cJSON_GetObjectItemCaseSensitive(s, "repeat_min");
    const cJSON *hi = cJSON_GetObjectItemCaseSensitive(s, "repeat_max");
    const cJSON *as = cJSON_GetObjectItemCaseSensitive(s, "allow_short");
    if (!cJSON_IsNumber(lo) || !cJSON_IsNumber(hi) || !cJSON_IsBool(as) || lo->valuedouble < 1 ||
        hi->valuedouble < lo->valuedouble || hi->valuedouble > (1 << 20)) {
        snprintf(err, cap, "settings.repeat_min, repeat_max or allow_short is missing or not valid");
        return -1;
    }
    c->repeat_min = (uint32_t)lo->valuedouble;
    c->repeat_max = (uint32_t)hi->valuedouble;
    c->allow_short = cJSON_IsTrue(as);
    if (c->heads == 0 || (!c->d_head && c->d_model % c->heads) || c->seq_len < 101) {
        snprintf(err, cap, "settings: inconsistent heads, d_model, d_head or seq_len");
        return -1;
    }
    return 0;
}

/* ---- data and model ---- */

int run_open_dataset(const run_config *c, uint32_t n_eval_windows, induct_dataset **d) {
    if (c->text) {
        induct_text_config tc;
        induct_text_config_init(&tc, sizeof tc);
        tc.n_eval_windows = n_eval_windows;
        tc.val_fraction = c->val_fraction;
        tc.block_tokens = c->block_tokens;
        tc.seed = c->data_seed;
        tc.bos = c->bos;
        return induct_dataset_new_text_path(d, c->text, c->suffix, &tc);
    }
    induct_token_file_config tf;
    induct_token_file_config_init(&tf, sizeof tf);
    tf.format = c->format;
    tf.d_vocab = c->d_vocab;
    tf.n_eval_windows = n_eval_windows;
    tf.val_fraction = c->val_fraction;
    tf.block_tokens = c->block_tokens;
    tf.seed = c->data_seed;
    return induct_dataset_new_token_file(d, c->tokens, NULL, &tf);
}

int run_make_model(const run_config *c, uint32_t d_vocab, uint32_t threads, induct_model **out,
                   induct_optimizer **opt_out) {
    induct_model_config mc;
    int rc = induct_model_config_init(&mc, sizeof mc);
    if (rc) return rc;
    mc.n_layers = c->n_layers;
    mc.d_model = c->d_model;
    mc.n_heads = c->heads;
    mc.d_head = c->d_head;
    mc.d_mlp = run_d_mlp(c);
    mc.n_ctx = c->seq_len;
    mc.d_vocab = d_vocab;
    mc.positional = c->positional;
    /* N >= the model's layers means every layer, as 0 does */
    if (c->positional == INDUCT_POS_SHORTFORMER && c->shortformer_layers < c->n_layers)
        mc.shortformer_layers = c->shortformer_layers;
    mc.layer_norm = c->ln;
    mc.smeared_keys = c->smeared;
    mc.n_threads = threads;
    mc.init = c->init;
    if (!isnan(c->init_std)) mc.init_std = c->init_std;
    if (!isnan(c->smear_alpha)) mc.smear_alpha_init = c->smear_alpha;
    mc.seed = c->seed;
    induct_model *m = NULL;
    if ((rc = induct_model_new(&m, &mc))) return rc;
    if (c->pos_init == POS_INIT_SINUSOIDAL) {
        /* W_pos[p][2i] = amp·sin(p / 10000^(2i/d)), W_pos[p][2i+1] = amp·cos(same) */
        size_t n = (size_t)c->seq_len * c->d_model;
        float *w = run_xcalloc(n, sizeof *w);
        for (uint32_t p = 0; p < c->seq_len; p++)
            for (uint32_t i = 0; 2 * i < c->d_model; i++) {
                double ang = (double)p / pow(10000.0, (2.0 * i) / (double)c->d_model);
                w[(size_t)p * c->d_model + 2 * i] = (float)(c->pos_amp * sin(ang));
                if (2 * i + 1 < c->d_model)
                    w[(size_t)p * c->d_model + 2 * i + 1] = (float)(c->pos_amp * cos(ang));
            }
        rc = induct_model_set_tensor(m, "pos_embed.W_pos", w, n);
        free(w);
        if (rc) {
            induct_model_free(m);
            return rc;
        }
    }
    induct_optimizer *opt = NULL;
    if ((rc = induct_optimizer_new(&opt, m, INDUCT_OPTIM_ADAMW))) {
        induct_model_free(m);
        return rc;
    }
    struct { induct_opt_param p; double v; int set; } params[] = {
        {INDUCT_OPT_LR, c->lr, 1},
        {INDUCT_OPT_WARMUP_STEPS, (double)c->warmup, 1},
        {INDUCT_OPT_WEIGHT_DECAY, c->weight_decay, !isnan(c->weight_decay)},
        {INDUCT_OPT_GRAD_CLIP, c->grad_clip, !isnan(c->grad_clip)},
        {INDUCT_OPT_SCHEDULE, (double)c->cosine, 1},
        {INDUCT_OPT_TOTAL_STEPS, (double)c->steps, 1},
        {INDUCT_OPT_MIN_LR_RATIO, c->min_lr_ratio, 1},
    };
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        if (!params[i].set) continue;
        if ((rc = induct_optimizer_set(opt, params[i].p, params[i].v))) {
            induct_optimizer_free(opt);
            induct_model_free(m);
            return rc;
        }
    }
    *out = m;
    *opt_out = opt;
    return INDUCT_OK;
}

/* ---- files ---- */

void *run_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", cli_prog());
        exit(CLI_EXIT_FAILED);
    }
    return p;
}

char *run_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = run_xcalloc(n, 1);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

char *run_weights_path(const char *dir, uint64_t step) {
    char name[64];
    snprintf(name, sizeof name, "weights/step-%llu.safetensors", (unsigned long long)step);
    return run_path(dir, name);
}

int run_mkdir_p(const char *path) {
    size_t n = strlen(path);
    char *tmp = run_xcalloc(n + 1, 1);
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0777) && errno != EEXIST) {
            free(tmp);
            return -1;
        }
        *p = '/';
    }
    int rc = mkdir(tmp, 0777) && errno != EEXIST ? -1 : 0;
    free(tmp);
    return rc;
}

char *run_read_file(const char *path, size_t *len_out) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        free(buf);
        return NULL;
    }
    buf[len] = 0;
    if (len_out) *len_out = len;
    return buf;
}

cJSON *run_read_json(const char *path) {
    char *text = run_read_file(path, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    return j;
}

int run_write_json(const char *path, const cJSON *json) {
    char *text = cJSON_Print(json);
    if (!text) {
        errno = ENOMEM;
        return -1;
    }
    size_t n = strlen(text);
    char *withnl = realloc(text, n + 2);
    if (!withnl) {
        free(text);
        errno = ENOMEM;
        return -1;
    }
    withnl[n] = '\n';
    withnl[n + 1] = 0;
    int rc = cli_write_atomic(path, withnl, n + 1);
    free(withnl);
    return rc;
}

cJSON *run_num(double x) {
    if (!isfinite(x)) return cJSON_CreateNull();
    char b[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, x);
        if (strtod(b, NULL) == x) break;
    }
    return cJSON_CreateRaw(b);
}

void run_add_num(cJSON *o, const char *key, double x) { cJSON_AddItemToObject(o, key, run_num(x)); }
