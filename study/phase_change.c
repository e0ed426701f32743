/* phase-change: the phase change of *In-context Learning and Induction Heads* (Olsson
 * et al. 2022, "ICL paper") on real text, with the paper's controls.
 *
 * Trains several attention-only models (by default a 2-layer model, a 1-layer control
 * and a 1-layer smeared-key model) on the same data, in the same order, for the same
 * budget; records loss, ICL score, loss by position, per-head prefix-matching and
 * previous-token scores and per-token loss vectors at every evaluation; then reports per
 * model the phase-change window, the ICL score before and after, the induction and
 * previous-token heads, the loss-curve bump, the ablation attribution, and a PCA of the
 * per-token loss vectors of all snapshots of all models. Four claims of the paper are
 * checked with fixed rules (CHECK_* below) and reported as pass or fail with the numbers.
 *
 * Every hyperparameter is a flag; the defaults are in DEFAULTS below. Full description
 * of the flags, the output files and every rule: docs/phase-change.md.
 *
 * Usage: phase-change (--text PATH [--suffix .py] | --tokens PATH --format u16|u32|llmc
 *                      [--d-vocab N]) [--out DIR] [options]     (phase-change --help)
 */
#include <induct/induct.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#ifndef PHASE_CHANGE_SOURCE_ROOT
#define PHASE_CHANGE_SOURCE_ROOT "."
#endif

/* ======================================================================== */
/* Defaults of every hyperparameter (change them here; docs/phase-change.md lists them). */

enum { POS_INIT_RANDOM = 0, POS_INIT_SINUSOIDAL = 1 };

typedef struct options {
    /* data */
    const char *text;        /* --text PATH: a file, or a directory with --suffix */
    const char *suffix;      /* --suffix .py */
    const char *tokens;      /* --tokens PATH */
    uint32_t format;         /* --format u16|u32|llmc */
    uint32_t d_vocab;        /* --d-vocab N (token files; 0 = largest id + 1) */
    uint32_t eval_windows;   /* --eval-windows N: fixed evaluation windows across the corpus */
    uint64_t data_seed;      /* --data-seed N: train-window order */
    double val_fraction;     /* --val-fraction F: held-out fraction */
    uint64_t block_tokens;   /* --block-tokens N: unit of the held-out split */
    uint32_t bos;            /* --bos 0|1 (text): a BOS token starts every document */
    double repeat_fraction;  /* --repeat-fraction X: training windows given a repeated span */
    uint32_t repeat_min, repeat_max; /* --repeat-len MIN,MAX: its length in tokens */
    /* models */
    const char *models;      /* --models 2L,1L,1L-smeared (2L-smeared too with --full) */
    uint32_t d_model;        /* --d-model */
    uint32_t heads;          /* --heads */
    uint32_t d_head;         /* --d-head: width of each head; 0 = d_model / heads */
    uint32_t seq_len;        /* --seq-len (= n_ctx) */
    int allow_short;         /* --allow-short: permit seq_len < 512 (quick tests) */
    uint32_t ln;             /* --ln 0|1 */
    uint32_t positional;     /* --positional shortformer|standard|none */
    uint32_t shortformer_layers; /* --shortformer-layers: W_pos in the first N layers' Q/K */
    int shortformer_layers_set;
    uint32_t init;           /* --init gpt2|torch */
    double init_std;         /* --init-std (gpt2 init); NAN = library default */
    uint32_t pos_init;       /* --pos-init random|sinusoidal */
    double pos_amp;          /* --pos-amp: amplitude of the sinusoidal W_pos */
    double smear_alpha;      /* --smear-alpha-init; NAN = library default */
    uint64_t seed;           /* --seed: model initialisation */
    /* optimisation */
    uint32_t batch;          /* --batch */
    double lr;               /* --lr: peak AdamW learning rate */
    uint64_t warmup;         /* --warmup: linear warm-up steps */
    double weight_decay;     /* --weight-decay; NAN = library default */
    double grad_clip;        /* --grad-clip; NAN = library default */
    uint32_t cosine;         /* --schedule constant|cosine */
    double min_lr_ratio;     /* --min-lr-ratio (cosine floor) */
    uint64_t steps;          /* --steps */
    uint64_t steps_1l;       /* --steps-1l: steps of the 1-layer models; without the flag
                              * the default or --steps, whichever is smaller */
    int steps_1l_set;        /* --steps-1l given */
    /* measurement */
    uint64_t eval_every;     /* --eval-every */
    uint32_t eval_batch;     /* --eval-batch: sequences of the evaluation set */
    uint32_t smooth;         /* --smooth: moving average of the window rule (odd) */
    uint32_t icl_band;       /* --icl-band W: ICL estimator averages L over ±W tokens (0 = single tokens) */
    uint32_t snapshots;      /* --snapshots N: periodic checkpoints (every steps/N) */
    uint32_t icl_windows;    /* --icl-windows N: windows of the evaluation the checks read */
    uint32_t window_windows; /* --window-windows N: windows of the window rule's ICL series at
                              * every evaluation (0: the per-step --eval-batch curve's) */
    uint32_t icl_groups;     /* --icl-groups G: batch means for the standard errors */
    uint32_t ablation_windows; /* --ablation-windows N: windows of the ablation evaluation */
    double thr_induction;    /* --induction-threshold (prefix matching); NAN = library default */
    double thr_previous;     /* --previous-token-threshold; NAN = library default */
    double thr_duplicate;    /* --duplicate-threshold; NAN = library default */
    /* execution */
    uint32_t threads;        /* --threads: OpenMP threads per model */
    uint32_t jobs;           /* --jobs: models trained at once */
    const char *out;         /* --out DIR */
    int estimate;            /* --no-estimate turns the up-front timing off */
} options;

/* The width of each head: --d-head, or d_model / heads without it. */
static uint32_t head_width(const options *o) { return o->d_head ? o->d_head : o->d_model / o->heads; }

static const options DEFAULTS = {
    .text = NULL, .suffix = NULL, .tokens = NULL, .format = INDUCT_TOKFILE_U16, .d_vocab = 0,
    .eval_windows = 1024, .data_seed = 0, .val_fraction = 0.1, .block_tokens = 65536, .bos = 0,
    .repeat_fraction = 0.0, .repeat_min = 8, .repeat_max = 64,
    .models = "2L,1L,1L-smeared", .d_model = 64, .heads = 2, .d_head = 0, .seq_len = 512, .allow_short = 0,
    .ln = 1, .positional = INDUCT_POS_SHORTFORMER, .shortformer_layers = 1, .init = INDUCT_INIT_GPT2, .init_std = NAN,
    .pos_init = POS_INIT_SINUSOIDAL, .pos_amp = 3.0, .smear_alpha = NAN, .seed = 0,
    .batch = 8, .lr = 1e-2, .warmup = 200, .weight_decay = NAN, .grad_clip = NAN,
    .cosine = 0, .min_lr_ratio = 0.0, .steps = 3000, .steps_1l = 2000,
    .eval_every = 250, .eval_batch = 256, .smooth = 3, .icl_band = 5, .snapshots = 4, .window_windows = 3072,
    .icl_windows = 8192, .icl_groups = 32, .ablation_windows = 512,
    .thr_induction = NAN, .thr_previous = NAN, .thr_duplicate = NAN,
    .threads = 1, .jobs = 2, .out = "phase-change-run", .estimate = 1,
};

/* ======================================================================== */
/* Decision rules of the four checks (docs/phase-change.md, "Checks"). */

/* Every ICL figure the checks read comes with a standard error (batch means over
 * --icl-groups groups of windows); a difference counts only when it exceeds
 * CHECK_SIGMAS standard errors. */
#define CHECK_SIGMAS 3.0
/* 2 layers: the ICL score falls by at least this across the window (nats). */
#define CHECK_ICL_FALL_MIN 0.15
/* 2 layers: the window is at most this many times the training before it opens. */
#define CHECK_WINDOW_MAX_VS_BEFORE 1.0
/* 2 layers: a last-layer head ends above this prefix-matching score ... */
#define CHECK_PM_HIGH 0.30
/* ... and at least this fraction of its rise from chance happens inside the window. */
#define CHECK_PM_RISE_INSIDE 0.50
/* 2 layers: after the window its ICL score is at least this far below the 1-layer
 * control's (nats). */
#define CHECK_ICL_BELOW_CONTROL 0.15
/* 1 layer: no head above this prefix-matching score at any evaluation. */
#define CHECK_PM_ONE_LAYER_MAX 0.10
/* 1 layer: the final ICL score within ± this of 0 (nats). */
#define CHECK_ICL_ONE_LAYER_ABS 0.05
/* Ablation: the induction heads together remove at least this fraction of the ICL score ... */
#define CHECK_ABLATION_MOST 0.50
/* ... and no single other head (patterns preserved) more than this fraction. */
#define CHECK_ABLATION_OTHER_MAX 0.25
/* Smallest change of a prefix-matching series that counts as a window (reported only). */
#define CHECK_PM_MIN_CHANGE 0.10

#define MAX_MODELS 16
#define NAME_MAX_LEN 32

/* ======================================================================== */
/* Small utilities. */

static double now(void) { return cli_now(); }

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "phase-change: out of memory\n");
        exit(1);
    }
    return p;
}

static char *xstrdup(const char *s) {
    char *p = xcalloc(strlen(s) + 1, 1);
    memcpy(p, s, strlen(s) + 1);
    return p;
}

static char *path_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = xcalloc(n, 1);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void lib_fail(int rc, const char *what) {
    fprintf(stderr, "phase-change: %s: %s (%s)\n", what, induct_status_name(rc),
            induct_last_error_message());
    exit(1);
}

static int mkdir_p(const char *path) {
    char *tmp = xstrdup(path);
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

/* Write `len` bytes to `path` atomically (cli.c). Returns 0 or -1 (errno set). */
static int write_atomic(const char *path, const char *data, size_t len) {
    return cli_write_atomic(path, data, len);
}

static char *read_file(const char *path, size_t *len_out) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = xcalloc(cap, 1);
    for (;;) {
        if (len + 1 >= cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return NULL;
    }
    buf[len] = 0;
    if (len_out) *len_out = len;
    return buf;
}

static void fmt_duration(double s, char *buf, size_t cap) { cli_fmt_duration(s, buf, cap); }

/* ======================================================================== */
/* Command line. */

static const char *prog = "phase-change";

static void usage(FILE *f) {
    fprintf(f,
        "usage: %s (--text PATH [--suffix SUF] | --tokens PATH [--format u16|u32|llmc] [--d-vocab N])\n"
        "       [--out DIR] [options]\n"
        "data:     --text PATH (file or directory)  --suffix .py  --tokens PATH  --format u16|u32|llmc\n"
        "          --d-vocab N (0: largest id + 1)  --eval-windows N (%u)  --data-seed N (%llu)\n"
        "          --val-fraction F (%g)  --block-tokens N (%llu)  --bos 0|1 (%u)\n"
        "curriculum (training windows only; evaluation stays on untouched held-out text):\n"
        "          --repeat-fraction X (%g; 0 = off): this share of the training windows carries\n"
        "          one repeated span (Sabry & Belz 2025: such windows speed up induction heads)\n"
        "          --repeat-len MIN,MAX (%u,%u tokens; %u is the shortest block of the repeated-\n"
        "          random-token data; %u keeps a span to an eighth of a 512-token window, so most\n"
        "          of each window stays natural text; capped at seq-len/2)\n"
        "models:   --models LIST (%s; names <n>L or <n>L-smeared)  --d-model N (%u)  --heads N (%u)\n"
        "          --d-head N (0: d-model / heads; heads x d-head need not equal d-model)\n"
        "          --seq-len N (%u; >= 512 unless --allow-short)  --ln 0|1 (%u)\n"
        "          --positional shortformer|standard|none (shortformer)  --init gpt2|torch (gpt2)\n"
        "          --shortformer-layers N (%u; W_pos enters the query/key input of the first N\n"
        "          layers only, 0 = every layer; so the previous-token head forms in layer 0)\n"
        "          --init-std X (library default)  --pos-init random|sinusoidal (%s)\n"
        "          --pos-amp X (%g)  --smear-alpha-init X (library default)  --seed N (%llu)\n"
        "training: --batch N (%u)  --lr X (%g)  --warmup N (%llu)  --weight-decay X (library default)\n"
        "          --grad-clip X (library default)  --schedule constant|cosine (constant)\n"
        "          --min-lr-ratio X (%g)  --steps N (%llu)  --steps-1l N (1-layer models;\n"
        "          %llu, or --steps if smaller)\n"
        "measure:  --eval-every N (%llu)  --eval-batch N (%u)  --smooth N (%u, odd)\n"
        "          --icl-band W (%u; ICL averages the loss over +-W tokens, 0 = single tokens)\n"
        "          --snapshots N (%u; checkpoints every steps/N, 0 = none; final.safetensors always)\n"
        "          --icl-windows N (%u; the evaluation the checks read)  --icl-groups G (%u;\n"
        "          standard errors by batch means)  --ablation-windows N (%u)\n"
        "          --window-windows N (%u; the window rule's ICL score at every evaluation,\n"
        "          bands only, in groups of 256; 0 = from the --eval-batch curve)\n"
        "          --induction-threshold X  --previous-token-threshold X  --duplicate-threshold X\n"
        "          (head classes; library defaults)\n"
        "run:      --threads N per model (%u)  --jobs N models at once (%u)  --out DIR (%s)\n"
        "          --no-estimate  --allow-short  --help\n"
        "judge:    %s --judge SUMMARY.json: the checks decided again on a summary's numbers\n"
        "See docs/phase-change.md.\n",
        prog, DEFAULTS.eval_windows, (unsigned long long)DEFAULTS.data_seed, DEFAULTS.val_fraction,
        (unsigned long long)DEFAULTS.block_tokens, DEFAULTS.bos, DEFAULTS.repeat_fraction,
        DEFAULTS.repeat_min, DEFAULTS.repeat_max, DEFAULTS.repeat_min, DEFAULTS.repeat_max,
        DEFAULTS.models, DEFAULTS.d_model,
        DEFAULTS.heads, DEFAULTS.seq_len, DEFAULTS.ln, DEFAULTS.shortformer_layers,
        DEFAULTS.pos_init == POS_INIT_SINUSOIDAL ? "sinusoidal" : "random", DEFAULTS.pos_amp,
        (unsigned long long)DEFAULTS.seed, DEFAULTS.batch, DEFAULTS.lr,
        (unsigned long long)DEFAULTS.warmup, DEFAULTS.min_lr_ratio,
        (unsigned long long)DEFAULTS.steps, (unsigned long long)DEFAULTS.steps_1l,
        (unsigned long long)DEFAULTS.eval_every,
        DEFAULTS.eval_batch, DEFAULTS.smooth,
        DEFAULTS.icl_band, DEFAULTS.snapshots, DEFAULTS.icl_windows, DEFAULTS.icl_groups,
        DEFAULTS.ablation_windows, DEFAULTS.window_windows, DEFAULTS.threads, DEFAULTS.jobs, DEFAULTS.out, prog);
}

static void bad_input(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    usage(stderr);
    exit(2);
}

/* Checked numbers (cli.c): `flag` is "--name". */
static uint64_t parse_u64(const char *flag, const char *v, uint64_t lo, uint64_t hi) {
    return cli_u64(flag + 2, v, lo, hi);
}

static double parse_f64(const char *flag, const char *v, double lo, double hi) {
    return cli_f64(flag + 2, v, lo, hi);
}

typedef struct model_spec {
    char name[NAME_MAX_LEN];
    uint32_t n_layers;
    uint32_t smeared;
    uint64_t steps; /* --steps, or --steps-1l for 1-layer models */
} model_spec;

/* "2L,1L,1L-smeared" → specs. */
static size_t parse_models(const char *list, const options *o, model_spec *out) {
    size_t n = 0;
    const char *p = list;
    while (1) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len >= NAME_MAX_LEN) bad_input("--models: bad model name in '%s'", list);
        if (n == MAX_MODELS) bad_input("--models: at most %d models", MAX_MODELS);
        char name[NAME_MAX_LEN];
        memcpy(name, p, len);
        name[len] = 0;
        char *end = NULL;
        if (name[0] < '1' || name[0] > '9')
            bad_input("--models: '%s' is not <n>L or <n>L-smeared", name);
        unsigned long nl = strtoul(name, &end, 10);
        if (nl < 1 || nl > 64 || *end != 'L' || (end[1] && strcmp(end + 1, "-smeared")))
            bad_input("--models: '%s' is not <n>L or <n>L-smeared (1 <= n <= 64)", name);
        for (size_t i = 0; i < n; i++)
            if (!strcmp(out[i].name, name)) bad_input("--models: '%s' given twice", name);
        memcpy(out[n].name, name, len + 1);
        out[n].n_layers = (uint32_t)nl;
        out[n].smeared = end[1] != 0;
        out[n].steps = nl == 1 ? o->steps_1l : o->steps;
        n++;
        if (!comma) break;
        p = comma + 1;
    }
    return n;
}

/* Every flag but --help (cli_parse handles it); the two without a value first. */
static const struct option LONGOPTS[] = {
    {"allow-short", no_argument, 0, 0}, {"no-estimate", no_argument, 0, 0},
    {"text", required_argument, 0, 0}, {"suffix", required_argument, 0, 0},
    {"tokens", required_argument, 0, 0}, {"format", required_argument, 0, 0},
    {"d-vocab", required_argument, 0, 0}, {"eval-windows", required_argument, 0, 0},
    {"data-seed", required_argument, 0, 0}, {"val-fraction", required_argument, 0, 0},
    {"block-tokens", required_argument, 0, 0}, {"bos", required_argument, 0, 0},
    {"repeat-fraction", required_argument, 0, 0}, {"repeat-len", required_argument, 0, 0},
    {"models", required_argument, 0, 0}, {"d-model", required_argument, 0, 0},
    {"d-head", required_argument, 0, 0},
    {"heads", required_argument, 0, 0}, {"seq-len", required_argument, 0, 0},
    {"ln", required_argument, 0, 0}, {"positional", required_argument, 0, 0},
    {"shortformer-layers", required_argument, 0, 0},
    {"init", required_argument, 0, 0}, {"init-std", required_argument, 0, 0},
    {"pos-init", required_argument, 0, 0}, {"pos-amp", required_argument, 0, 0},
    {"smear-alpha-init", required_argument, 0, 0}, {"seed", required_argument, 0, 0},
    {"batch", required_argument, 0, 0}, {"lr", required_argument, 0, 0},
    {"warmup", required_argument, 0, 0}, {"weight-decay", required_argument, 0, 0},
    {"grad-clip", required_argument, 0, 0}, {"schedule", required_argument, 0, 0},
    {"min-lr-ratio", required_argument, 0, 0}, {"steps", required_argument, 0, 0},
    {"steps-1l", required_argument, 0, 0},
    {"eval-every", required_argument, 0, 0}, {"eval-batch", required_argument, 0, 0},
    {"smooth", required_argument, 0, 0}, {"icl-band", required_argument, 0, 0},
    {"snapshots", required_argument, 0, 0}, {"threads", required_argument, 0, 0},
    {"icl-windows", required_argument, 0, 0}, {"icl-groups", required_argument, 0, 0},
    {"window-windows", required_argument, 0, 0},
    {"ablation-windows", required_argument, 0, 0},
    {"jobs", required_argument, 0, 0}, {"out", required_argument, 0, 0},
    {"induction-threshold", required_argument, 0, 0},
    {"previous-token-threshold", required_argument, 0, 0},
    {"duplicate-threshold", required_argument, 0, 0}, {0, 0, 0, 0}};

static void on_option(const char *name, const char *v, void *ud) {
    options *o = ud;
    char a[64];
    snprintf(a, sizeof a, "--%s", name);
    {
        if (!strcmp(a, "--allow-short")) { o->allow_short = 1; return; }
        if (!strcmp(a, "--no-estimate")) { o->estimate = 0; return; }
        if (!strcmp(a, "--text")) o->text = v;
        else if (!strcmp(a, "--suffix")) o->suffix = v;
        else if (!strcmp(a, "--tokens")) o->tokens = v;
        else if (!strcmp(a, "--format")) {
            if (!strcmp(v, "u16")) o->format = INDUCT_TOKFILE_U16;
            else if (!strcmp(v, "u32")) o->format = INDUCT_TOKFILE_U32;
            else if (!strcmp(v, "llmc")) o->format = INDUCT_TOKFILE_LLMC;
            else bad_input("--format must be u16, u32 or llmc, got '%s'", v);
        } else if (!strcmp(a, "--d-vocab")) o->d_vocab = (uint32_t)parse_u64(a, v, 0, INT32_MAX);
        else if (!strcmp(a, "--eval-windows"))
            o->eval_windows = (uint32_t)parse_u64(a, v, 1, UINT32_MAX);
        else if (!strcmp(a, "--data-seed")) o->data_seed = parse_u64(a, v, 0, UINT64_MAX);
        else if (!strcmp(a, "--val-fraction")) o->val_fraction = parse_f64(a, v, 1e-6, 0.9);
        else if (!strcmp(a, "--block-tokens")) o->block_tokens = parse_u64(a, v, 0, UINT64_MAX);
        else if (!strcmp(a, "--bos")) o->bos = (uint32_t)parse_u64(a, v, 0, 1);
        else if (!strcmp(a, "--repeat-fraction")) o->repeat_fraction = parse_f64(a, v, 0, 1);
        else if (!strcmp(a, "--repeat-len")) {
            const char *comma = strchr(v, ',');
            char lo[32];
            if (!comma || (size_t)(comma - v) >= sizeof lo)
                bad_input("--repeat-len must be MIN,MAX (tokens), got '%s'", v);
            memcpy(lo, v, (size_t)(comma - v));
            lo[comma - v] = 0;
            o->repeat_min = (uint32_t)parse_u64(a, lo, 1, 1 << 20);
            o->repeat_max = (uint32_t)parse_u64(a, comma + 1, 1, 1 << 20);
            if (o->repeat_min > o->repeat_max)
                bad_input("--repeat-len: MIN %u is above MAX %u", o->repeat_min, o->repeat_max);
        }
        else if (!strcmp(a, "--models")) o->models = v;
        else if (!strcmp(a, "--d-model")) o->d_model = (uint32_t)parse_u64(a, v, 1, 1 << 16);
        else if (!strcmp(a, "--heads")) o->heads = (uint32_t)parse_u64(a, v, 1, 1024);
        else if (!strcmp(a, "--d-head")) o->d_head = (uint32_t)parse_u64(a, v, 0, 4096);
        else if (!strcmp(a, "--seq-len")) o->seq_len = (uint32_t)parse_u64(a, v, 2, 1 << 20);
        else if (!strcmp(a, "--ln")) o->ln = (uint32_t)parse_u64(a, v, 0, 1);
        else if (!strcmp(a, "--positional")) {
            if (!strcmp(v, "shortformer")) o->positional = INDUCT_POS_SHORTFORMER;
            else if (!strcmp(v, "standard")) o->positional = INDUCT_POS_STANDARD;
            else if (!strcmp(v, "none")) o->positional = INDUCT_POS_NONE;
            else bad_input("--positional must be shortformer, standard or none, got '%s'", v);
        } else if (!strcmp(a, "--shortformer-layers")) {
            o->shortformer_layers = (uint32_t)parse_u64(a, v, 0, 1024);
            o->shortformer_layers_set = 1;
        } else if (!strcmp(a, "--init")) {
            if (!strcmp(v, "gpt2")) o->init = INDUCT_INIT_GPT2;
            else if (!strcmp(v, "torch")) o->init = INDUCT_INIT_TORCH;
            else bad_input("--init must be gpt2 or torch, got '%s'", v);
        } else if (!strcmp(a, "--init-std")) o->init_std = parse_f64(a, v, 0, 10);
        else if (!strcmp(a, "--pos-init")) {
            if (!strcmp(v, "random")) o->pos_init = POS_INIT_RANDOM;
            else if (!strcmp(v, "sinusoidal")) o->pos_init = POS_INIT_SINUSOIDAL;
            else bad_input("--pos-init must be random or sinusoidal, got '%s'", v);
        } else if (!strcmp(a, "--pos-amp")) o->pos_amp = parse_f64(a, v, 0, 1e3);
        else if (!strcmp(a, "--smear-alpha-init")) o->smear_alpha = parse_f64(a, v, -100, 100);
        else if (!strcmp(a, "--seed")) o->seed = parse_u64(a, v, 0, UINT64_MAX);
        else if (!strcmp(a, "--batch")) o->batch = (uint32_t)parse_u64(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--lr")) o->lr = parse_f64(a, v, 0, 10);
        else if (!strcmp(a, "--warmup")) o->warmup = parse_u64(a, v, 0, (uint64_t)1e12);
        else if (!strcmp(a, "--weight-decay")) o->weight_decay = parse_f64(a, v, 0, 10);
        else if (!strcmp(a, "--grad-clip")) o->grad_clip = parse_f64(a, v, 0, 1e9);
        else if (!strcmp(a, "--schedule")) {
            if (!strcmp(v, "constant")) o->cosine = 0;
            else if (!strcmp(v, "cosine")) o->cosine = 1;
            else bad_input("--schedule must be constant or cosine, got '%s'", v);
        } else if (!strcmp(a, "--min-lr-ratio")) o->min_lr_ratio = parse_f64(a, v, 0, 1);
        else if (!strcmp(a, "--steps")) o->steps = parse_u64(a, v, 1, (uint64_t)1e12);
        else if (!strcmp(a, "--steps-1l")) {
            o->steps_1l = parse_u64(a, v, 1, (uint64_t)1e12);
            o->steps_1l_set = 1;
        }
        else if (!strcmp(a, "--eval-every")) o->eval_every = parse_u64(a, v, 1, (uint64_t)1e12);
        else if (!strcmp(a, "--eval-batch")) o->eval_batch = (uint32_t)parse_u64(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--icl-band")) o->icl_band = (uint32_t)parse_u64(a, v, 0, 1000);
        else if (!strcmp(a, "--smooth")) {
            o->smooth = (uint32_t)parse_u64(a, v, 1, 1001);
            if (o->smooth % 2 == 0) bad_input("--smooth must be odd, got %u", o->smooth);
        } else if (!strcmp(a, "--snapshots")) o->snapshots = (uint32_t)parse_u64(a, v, 0, 1000);
        else if (!strcmp(a, "--icl-windows"))
            o->icl_windows = (uint32_t)parse_u64(a, v, 2, 1u << 20);
        else if (!strcmp(a, "--window-windows"))
        {
            o->window_windows = (uint32_t)parse_u64(a, v, 0, 1u << 20);
            if (o->window_windows == 1)
                bad_input("--window-windows must be 0 (the per-step curve) or >= 2 (a "
                          "standard error needs 2 groups)");
        }
        else if (!strcmp(a, "--icl-groups")) o->icl_groups = (uint32_t)parse_u64(a, v, 2, 4096);
        else if (!strcmp(a, "--ablation-windows"))
            o->ablation_windows = (uint32_t)parse_u64(a, v, 2, 1u << 20);
        else if (!strcmp(a, "--induction-threshold")) o->thr_induction = parse_f64(a, v, 1e-9, 1);
        else if (!strcmp(a, "--previous-token-threshold")) o->thr_previous = parse_f64(a, v, 1e-9, 1);
        else if (!strcmp(a, "--duplicate-threshold")) o->thr_duplicate = parse_f64(a, v, 1e-9, 1);
        else if (!strcmp(a, "--threads")) o->threads = (uint32_t)parse_u64(a, v, 1, 1024);
        else if (!strcmp(a, "--jobs")) o->jobs = (uint32_t)parse_u64(a, v, 1, MAX_MODELS);
        else if (!strcmp(a, "--out")) {
            if (!*v) bad_input("--out needs a directory");
            o->out = v;
        }
    }
}

static void parse_args(int argc, char **argv, options *o) {
    *o = DEFAULTS;
    cli_init(prog, "(--text PATH [--suffix SUF] | --tokens PATH [--format u16|u32|llmc]) "
                   "[--out DIR] [options]", usage);
    cli_parse(argc, argv, LONGOPTS, on_option, o);
    if (!o->text == !o->tokens) bad_input("give exactly one of --text PATH and --tokens PATH");
    if (o->suffix && !o->text) bad_input("--suffix goes with --text");
    const char *path = o->text ? o->text : o->tokens;
    struct stat st;
    if (stat(path, &st)) bad_input("cannot read '%s': %s", path, strerror(errno));
    if (o->tokens && !S_ISREG(st.st_mode)) bad_input("--tokens '%s' is not a regular file", path);
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        bad_input("'%s' is neither a regular file nor a directory", path);
    if (access(path, R_OK | (S_ISDIR(st.st_mode) ? X_OK : 0)))
        bad_input("cannot read '%s': %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode) && !o->suffix)
        fprintf(stderr, "%s: note: --text is a directory and no --suffix is given: every file "
                        "under it is read\n", prog);
    if (o->repeat_fraction > 0 && o->seq_len / 2 < o->repeat_min)
        bad_input("--repeat-len MIN %u does not fit twice in --seq-len %u", o->repeat_min,
                  o->seq_len);
    if (o->seq_len < 512 && !o->allow_short)
        bad_input("--seq-len %u is below 512: the ICL score needs the loss of the 500th token "
                  "(pass --allow-short for a quick test with a shortened score)", o->seq_len);
    if (o->seq_len < 101)
        bad_input("--seq-len %u is below 101, the length of the prefix-matching probe", o->seq_len);
    if (!o->d_head && o->d_model % o->heads)
        bad_input("--heads %u does not divide --d-model %u (or give --d-head)", o->heads,
                  o->d_model);
    if (o->shortformer_layers_set && o->positional != INDUCT_POS_SHORTFORMER)
        bad_input("--shortformer-layers needs --positional shortformer");
    if (o->pos_init == POS_INIT_SINUSOIDAL && o->positional == INDUCT_POS_NONE)
        bad_input("--pos-init sinusoidal needs positions (--positional shortformer|standard)");
    if (o->pos_init == POS_INIT_SINUSOIDAL && o->d_model % 2)
        bad_input("--pos-init sinusoidal needs an even --d-model");
    if (!o->steps_1l_set && o->steps_1l > o->steps) o->steps_1l = o->steps;
}

/* ======================================================================== */
/* Shared run state and per-model jobs. */

typedef struct job job;

typedef struct shared {
    const options *o;
    induct_dataset *d;
    induct_eval_config ec;     /* the training driver's evaluation set (+ ICL indices) */
    uint32_t early, late;      /* ICL indices ("k-th token") */
    int icl_metric;            /* the driver's icl_score metric is requested */
    uint32_t T, E;             /* sequence length, evaluation sequences */
    /* the evaluation the checks read (d_big: --icl-windows windows of the held-out text)
     * and the ablations' (d_abl), each in n groups of `per` windows (batch means) */
    const induct_dataset *d_big, *d_abl;
    uint32_t big_groups, big_per, abl_groups, abl_per, ps_groups, ps_per;
    /* the window rule's series (d_win: --window-windows windows; NULL = the per-step curve) */
    const induct_dataset *d_win;
    uint32_t win_groups, win_per;
    double pm_chance;          /* prefix matching of uniform attention on the probe */
    pthread_mutex_t mu;
    int tty;
    double t0;
    job *jobs;
    size_t n_jobs;
    size_t next;               /* next job to start (under mu) */
    uint32_t spare;            /* threads of workers that ran out of jobs (under mu): the
                                * next running job to report progress takes them */
    cli_progress bar;          /* the progress line (cli.c) */
} shared;

/* SIGINT / SIGTERM (cli.c): the training callbacks stop their runs. */
#define g_stop cli_interrupted()

/* What we read back from a model's metrics log. */
typedef struct series {
    size_t n;
    double *step, *tokens, *loss, *icl; /* icl: the band estimator (--icl-band), of the
                                          * window evaluation (or the per-step curve) */
    double *icl_se;            /* its standard error (window evaluation; NULL without) */
    double *icl_ps;            /* the per-step curve's band estimate (--eval-batch windows) */
    double *icl_token;         /* the single-token ICL score L[499] − L[49] */
    float *pm, *pt;            /* [n][n_layers*n_heads] */
} series;

struct job {
    model_spec spec;
    shared *sh;
    char *dir;
    induct_model *m;
    induct_optimizer *o;
    /* progress (under sh->mu) */
    uint64_t step;
    int started, finished;
    uint32_t threads;          /* this model's thread count now */
    double last_eval_loss, last_icl, tok_s;
    /* per-evaluation data from the callback */
    size_t n_ev, cap_ev;
    uint64_t *ev_step;
    float *ev_vec;             /* [n_ev][E] loss at each sequence's fixed random position */
    double *ev_icl;            /* from the context-index average: L[late-1] - L[early-1] */
    double *ev_icl_band;       /* the same with L averaged over ±icl_band tokens */
    float *avg_buf;            /* [T-1] scratch */
    induct_model **ev_model;   /* [n_ev] the weights at each evaluation (clones) */
    char *log_path;            /* <model>/metrics.jsonl, read in the callback */
    long log_off;              /* where the next record starts */
    /* failure */
    int rc;
    char err[1024];
    /* results */
    double wall, tokens_per_second;
    series s;
    cJSON *summary;            /* this model's summary object */
    /* numbers the checks use */
    int window_found;
    double w_start, w_end, w_frac;
    double icl_before, icl_after, icl_before_step, icl_before_se, icl_after_se;
    double icl_fall, icl_fall_se, ps_se;
    int pm_head;
    double pm_head_before, pm_head_after, pm_win_start, pm_win_end, pm_max_any;
    double pm_rise, pm_rise_inside;
    int pm_win_found, pm_coincide;
    int n_induction;
    double icl_clean, icl_clean_se, frac_induction, frac_induction_pp, max_other_frac,
        max_other_frac_pp;
    int max_other_head, max_other_head_pp;
    double eval_seconds_large, eval_seconds_ablation;
};

static void job_fail(job *j, int rc, const char *what) {
    j->rc = rc;
    snprintf(j->err, sizeof j->err, "%s [%s]: %s (%s)", what, j->spec.name,
             induct_status_name(rc), induct_last_error_message());
}

/* ---- progress display ---- */

static void draw_progress(shared *sh, int force) {
    (void)force; /* cli_progress_draw redraws at most 4 times a second, always at the end */
    double done = 0, total = 0;
    char line[1024];
    size_t off = 0;
    for (size_t i = 0; i < sh->n_jobs; i++) {
        const job *j = &sh->jobs[i];
        double w = (double)j->spec.n_layers;
        done += w * (double)j->step;
        total += w * (double)j->spec.steps;
        off += (size_t)snprintf(line + off, sizeof line - off,
                                "%s%s %llu/%llu", i ? "  " : "", j->spec.name,
                                (unsigned long long)j->step, (unsigned long long)j->spec.steps);
        if (off >= sizeof line) off = sizeof line - 1;
    }
    cli_progress_draw(&sh->bar, line, 0, done, total, "|");
}

static void end_progress_line(shared *sh) { cli_progress_end(&sh->bar); }

/* ---- training callback: each evaluation's loss curve and loss vectors ---- */

/* ICL score from a context-index average L[0 .. T-2]: mean of L over the 2w+1 indices
 * centred on late−1 minus the same around early−1 (w = 0: L[late−1] − L[early−1]). */
static double band_icl(const float *avg, uint32_t early, uint32_t late, uint32_t w) {
    double a = 0, b = 0;
    for (uint32_t k = 0; k <= 2 * w; k++) {
        a += avg[late - 1 - w + k];
        b += avg[early - 1 - w + k];
    }
    return (a - b) / (double)(2 * w + 1);
}

/* Mean and its standard error (sample standard deviation / sqrt(n)) of x[0..n); the
 * standard error is NAN for n < 2. */
static void mean_se(const double *x, size_t n, double *mean, double *se) {
    double m = 0, v = 0;
    for (size_t i = 0; i < n; i++) m += x[i];
    m = n ? m / (double)n : NAN;
    for (size_t i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    *mean = m;
    *se = n >= 2 ? sqrt(v / (double)(n - 1) / (double)n) : NAN;
}

/* The same for the paired differences a[i] − b[i] (the same windows, two models or two
 * ablations): the standard error of a difference measured on one set of windows. */
static void paired_se(const double *a, const double *b, size_t n, double *mean, double *se) {
    double *d = malloc((n ? n : 1) * sizeof *d);
    if (!d) { *mean = *se = NAN; return; }
    for (size_t i = 0; i < n; i++) d[i] = a[i] - b[i];
    mean_se(d, n, mean, se);
    free(d);
}

/* An ICL estimate over n_groups groups of windows: the mean of the groups' scores and
 * its standard error by batch means. Each group's windows are consecutive evaluation
 * windows of one dataset, i.e. one stretch of the held-out text, so the correlation of
 * overlapping windows stays inside a group. g_band keeps the groups' scores for paired
 * differences. */
typedef struct icl_est {
    uint32_t n_groups, per_group;
    double band, band_se, token, token_se;
    double *g_band; /* [n_groups], owned */
} icl_est;

static const icl_est ICL_NONE = {0, 0, NAN, NAN, NAN, NAN, NULL};

/* Evaluate `m` (ablations in force apply) on `d`'s evaluation windows in n_groups
 * batches of per_group (batch index g = windows g·per_group …); curve (optional, [T−1])
 * gets the loss by position averaged over every window. */
/* The context indices band_icl reads: the ±w bands around early−1 and late−1, merged
 * and strictly increasing (the library's rule for induct_eval_config.positions) into
 * out [2 (2w + 1)]; returns how many. */
static uint32_t band_positions(uint32_t early, uint32_t late, uint32_t w, uint32_t *out) {
    uint32_t n = 0;
    for (uint32_t k = 0; k <= 2 * w; k++) out[n++] = early - 1 - w + k;
    for (uint32_t k = 0; k <= 2 * w; k++)
        if (late - 1 - w + k > out[n - 1]) out[n++] = late - 1 - w + k;
    return n;
}

/* Groups of the large evaluation whose windows also give the loss-by-position curve
 * (a figure, not a check): an eighth of them, at least one. */
static uint32_t curve_groups(uint32_t n_groups) { return n_groups / 8 ? n_groups / 8 : 1; }

static int eval_groups(const shared *sh, induct_model *m, const induct_dataset *d,
                       uint32_t n_groups, uint32_t per_group, float *buf, double *curve,
                       icl_est *e) {
    *e = ICL_NONE;
    /* the ICL estimates need only the bands: the library computes the final LayerNorm,
     * unembedding and loss at those indices only (NaN elsewhere in buf, the same bits at
     * the bands); the curve, when asked for, comes from the first curve_groups() groups,
     * evaluated at every index */
    uint32_t w = sh->o->icl_band, *pos = xcalloc(2 * (2 * (size_t)w + 1), sizeof *pos);
    uint32_t n_pos = band_positions(sh->early, sh->late, w, pos);
    uint32_t n_curve = curve ? curve_groups(n_groups) : 0;
    e->n_groups = n_groups;
    e->per_group = per_group;
    e->g_band = xcalloc(n_groups, sizeof *e->g_band);
    double *gt = xcalloc(n_groups, sizeof *gt);
    if (curve) memset(curve, 0, (sh->T - 1) * sizeof *curve);
    int rc = 0;
    for (uint32_t g = 0; g < n_groups && !rc; g++) {
        induct_eval_config ec = sh->ec;
        ec.n_seq = per_group;
        ec.chunk = per_group < 8 ? per_group : 8;
        ec.batch_index = g;
        ec.positions = g < n_curve ? NULL : pos;
        ec.n_positions = g < n_curve ? 0 : n_pos;
        if ((rc = induct_analysis_loss_vectors(m, d, &ec, NULL, 0, buf, sh->T - 1))) break;
        e->g_band[g] = band_icl(buf, sh->early, sh->late, sh->o->icl_band);
        gt[g] = (double)buf[sh->late - 1] - (double)buf[sh->early - 1];
        if (g < n_curve)
            for (uint32_t p = 0; p + 1 < sh->T; p++) curve[p] += (double)buf[p] / n_curve;
    }
    if (!rc) {
        mean_se(e->g_band, n_groups, &e->band, &e->band_se);
        mean_se(gt, n_groups, &e->token, &e->token_se);
    }
    free(gt);
    free(pos);
    return rc;
}

static cJSON *double_list(const double *x, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, isfinite(x[i]) ? cJSON_CreateNumber(x[i]) : cJSON_CreateNull());
    return a;
}

/* The record induct_train() appended to the model's log for this evaluation (it writes
 * the record before it calls back): the next line from j->log_off. NULL on failure. */
static cJSON *next_record(job *j) {
    FILE *f = fopen(j->log_path, "rb");
    if (!f) return NULL;
    cJSON *rec = NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int c = EOF;
    if (buf && fseek(f, j->log_off, SEEK_SET) == 0) {
        while ((c = fgetc(f)) != EOF && c != '\n') {
            if (n + 1 == cap) {
                char *nb = realloc(buf, cap *= 2);
                if (!nb) break;
                buf = nb;
            }
            buf[n++] = (char)c;
        }
    }
    if (buf && c == '\n') {
        buf[n] = '\0';
        rec = cJSON_Parse(buf);
        if (rec) j->log_off += (long)n + 1;
    }
    free(buf);
    fclose(f);
    return rec;
}

/* Copy a JSON list of exactly n numbers into dst; 0 on success. */
static int json_floats(const cJSON *arr, float *dst, size_t n) {
    if (!cJSON_IsArray(arr) || (size_t)cJSON_GetArraySize(arr) != n) return -1;
    size_t i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) {
        if (!cJSON_IsNumber(x)) return -1;
        dst[i++] = (float)x->valuedouble;
    }
    return 0;
}

static int on_progress(const induct_progress *p, void *ud) {
    job *j = ud;
    shared *sh = j->sh;
    if (p->events & INDUCT_TRAIN_EVENT_EVAL) {
        if (j->n_ev == j->cap_ev) {
            size_t cap = j->cap_ev ? 2 * j->cap_ev : 32;
            uint64_t *st = realloc(j->ev_step, cap * sizeof *st);
            if (st) j->ev_step = st;
            float *v = realloc(j->ev_vec, cap * sh->E * sizeof *v);
            if (v) j->ev_vec = v;
            double *ic = realloc(j->ev_icl, cap * sizeof *ic);
            if (ic) j->ev_icl = ic;
            double *ib = realloc(j->ev_icl_band, cap * sizeof *ib);
            if (ib) j->ev_icl_band = ib;
            induct_model **em = realloc(j->ev_model, cap * sizeof *em);
            if (em) j->ev_model = em;
            if (!st || !v || !ic || !ib || !em) {
                j->rc = INDUCT_ENOMEM;
                snprintf(j->err, sizeof j->err, "[%s] out of memory", j->spec.name);
                return 1;
            }
            j->cap_ev = cap;
        }
        /* the curve and the loss vectors come from the driver's one evaluation pass
         * (loss_by_position, loss_vectors): read them back from the record it wrote */
        cJSON *rec = next_record(j);
        const cJSON *st = rec ? cJSON_GetObjectItemCaseSensitive(rec, "step") : NULL;
        int bad = !rec || !cJSON_IsNumber(st) || st->valuedouble != (double)p->step ||
                  json_floats(cJSON_GetObjectItemCaseSensitive(rec, "loss_by_position"),
                              j->avg_buf, sh->T - 1) ||
                  json_floats(cJSON_GetObjectItemCaseSensitive(rec, "loss_vectors"),
                              j->ev_vec + j->n_ev * sh->E, sh->E);
        cJSON_Delete(rec);
        if (bad) {
            j->rc = INDUCT_EFORMAT;
            snprintf(j->err, sizeof j->err, "[%s] cannot read the evaluation record at step %llu "
                     "back from %s", j->spec.name, (unsigned long long)p->step, j->log_path);
            return 1;
        }
        /* the weights of this evaluation, for the large evaluation of the point before the
         * window once the window is known (a model of this size is about 1 MB) */
        int crc = induct_model_clone(&j->ev_model[j->n_ev], j->m);
        if (crc) {
            job_fail(j, crc, "keeping the weights of an evaluation");
            return 1;
        }
        j->ev_step[j->n_ev] = p->step;
        j->ev_icl[j->n_ev] =
            (double)j->avg_buf[sh->late - 1] - (double)j->avg_buf[sh->early - 1];
        j->ev_icl_band[j->n_ev] = band_icl(j->avg_buf, sh->early, sh->late, sh->o->icl_band);
        j->n_ev++;
    }
    pthread_mutex_lock(&sh->mu);
    /* cores another worker left idle (it ran out of models) go to this model: the
     * results do not depend on the thread count, only the time does */
    uint32_t take = sh->spare;
    sh->spare = 0;
    j->step = p->step;
    j->tok_s = p->tokens_per_second;
    if (p->events & INDUCT_TRAIN_EVENT_EVAL) {
        j->last_eval_loss = p->eval_loss;
        j->last_icl = j->ev_icl_band[j->n_ev - 1];
        if (!sh->tty) {
            char eta[32];
            fmt_duration(p->eta_seconds, eta, sizeof eta);
            fprintf(stderr, "[%s] step %llu/%llu  eval loss %.4f  ICL %+.4f nats  %.0f tok/s  "
                            "ETA %s\n", j->spec.name, (unsigned long long)p->step,
                    (unsigned long long)p->steps, p->eval_loss, j->last_icl,
                    p->tokens_per_second, eta);
        }
    }
    if (sh->tty) draw_progress(sh, (p->events & INDUCT_TRAIN_EVENT_DONE) != 0);
    pthread_mutex_unlock(&sh->mu);
    if (take && induct_model_set_threads(j->m, j->threads + take) == INDUCT_OK)
        j->threads += take;
    return g_stop ? 1 : 0;
}

/* ======================================================================== */
/* Model creation. */

static int make_model(const options *o, const model_spec *sp, uint32_t d_vocab, induct_model **out,
                      induct_optimizer **opt_out) {
    induct_model_config mc;
    int rc = induct_model_config_init(&mc, sizeof mc);
    if (rc) return rc;
    mc.n_layers = sp->n_layers;
    mc.d_model = o->d_model;
    mc.n_heads = o->heads;
    mc.d_head = o->d_head;
    mc.d_mlp = 0; /* attention-only */
    mc.n_ctx = o->seq_len;
    mc.d_vocab = d_vocab;
    mc.positional = o->positional;
    /* N >= the model's layers means every layer, as 0 does */
    if (o->positional == INDUCT_POS_SHORTFORMER && o->shortformer_layers < sp->n_layers)
        mc.shortformer_layers = o->shortformer_layers;
    mc.layer_norm = o->ln;
    mc.smeared_keys = sp->smeared;
    mc.n_threads = o->threads;
    mc.init = o->init;
    if (!isnan(o->init_std)) mc.init_std = o->init_std;
    if (!isnan(o->smear_alpha)) mc.smear_alpha_init = o->smear_alpha;
    mc.seed = o->seed;
    induct_model *m = NULL;
    if ((rc = induct_model_new(&m, &mc))) return rc;
    if (o->pos_init == POS_INIT_SINUSOIDAL) {
        /* W_pos[p][2i] = amp·sin(p / 10000^(2i/d)), W_pos[p][2i+1] = amp·cos(same) */
        size_t n = (size_t)o->seq_len * o->d_model;
        float *w = xcalloc(n, sizeof *w);
        for (uint32_t p = 0; p < o->seq_len; p++)
            for (uint32_t i = 0; 2 * i < o->d_model; i++) {
                double ang = (double)p / pow(10000.0, (2.0 * i) / (double)o->d_model);
                w[(size_t)p * o->d_model + 2 * i] = (float)(o->pos_amp * sin(ang));
                if (2 * i + 1 < o->d_model)
                    w[(size_t)p * o->d_model + 2 * i + 1] = (float)(o->pos_amp * cos(ang));
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
        {INDUCT_OPT_LR, o->lr, 1},
        {INDUCT_OPT_WARMUP_STEPS, (double)o->warmup, 1},
        {INDUCT_OPT_WEIGHT_DECAY, o->weight_decay, !isnan(o->weight_decay)},
        {INDUCT_OPT_GRAD_CLIP, o->grad_clip, !isnan(o->grad_clip)},
        {INDUCT_OPT_SCHEDULE, (double)o->cosine, 1},
        {INDUCT_OPT_TOTAL_STEPS, (double)sp->steps, 1},
        {INDUCT_OPT_MIN_LR_RATIO, o->min_lr_ratio, 1},
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

/* ======================================================================== */
/* Reading a metrics log back. */

static int read_series(const char *path, uint32_t n_heads_total, series *s) {
    char *text = read_file(path, NULL);
    if (!text) return -1;
    size_t cap = 64;
    memset(s, 0, sizeof *s);
    s->step = xcalloc(cap, sizeof(double));
    s->tokens = xcalloc(cap, sizeof(double));
    s->loss = xcalloc(cap, sizeof(double));
    s->icl = xcalloc(cap, sizeof(double));
    s->pm = xcalloc(cap * n_heads_total, sizeof(float));
    s->pt = xcalloc(cap * n_heads_total, sizeof(float));
    int rc = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *rec = cJSON_Parse(line);
        if (!rec) { rc = -1; break; }
        if (s->n == cap) {
            cap *= 2;
            s->step = realloc(s->step, cap * sizeof(double));
            s->tokens = realloc(s->tokens, cap * sizeof(double));
            s->loss = realloc(s->loss, cap * sizeof(double));
            s->icl = realloc(s->icl, cap * sizeof(double));
            s->pm = realloc(s->pm, cap * n_heads_total * sizeof(float));
            s->pt = realloc(s->pt, cap * n_heads_total * sizeof(float));
            if (!s->step || !s->tokens || !s->loss || !s->icl || !s->pm || !s->pt) {
                fprintf(stderr, "phase-change: out of memory\n");
                exit(1);
            }
        }
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(rec, "step");
        const cJSON *tk = cJSON_GetObjectItemCaseSensitive(rec, "tokens");
        const cJSON *ls = cJSON_GetObjectItemCaseSensitive(rec, "eval_loss");
        const cJSON *ic = cJSON_GetObjectItemCaseSensitive(rec, "icl_score");
        s->step[s->n] = cJSON_IsNumber(st) ? st->valuedouble : NAN;
        s->tokens[s->n] = cJSON_IsNumber(tk) ? tk->valuedouble : NAN;
        s->loss[s->n] = cJSON_IsNumber(ls) ? ls->valuedouble : NAN;
        s->icl[s->n] = cJSON_IsNumber(ic) ? ic->valuedouble : NAN;
        const char *keys[2] = {"prefix_matching_score", "previous_token_score"};
        float *dst[2] = {s->pm + s->n * n_heads_total, s->pt + s->n * n_heads_total};
        for (int k = 0; k < 2; k++) {
            const cJSON *arr = cJSON_GetObjectItemCaseSensitive(rec, keys[k]);
            size_t idx = 0;
            const cJSON *row, *x;
            cJSON_ArrayForEach(row, arr) {
                cJSON_ArrayForEach(x, row) {
                    if (idx < n_heads_total) dst[k][idx] = (float)(cJSON_IsNumber(x) ? x->valuedouble : NAN);
                    idx++;
                }
            }
            if (idx != n_heads_total) rc = -1;
        }
        cJSON_Delete(rec);
        s->n++;
        if (rc) break;
    }
    free(text);
    return rc;
}

/* ======================================================================== */
/* JSON helpers. */

static cJSON *num(double x) { return isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull(); }

static void add_num(cJSON *o, const char *k, double x) { cJSON_AddItemToObject(o, k, num(x)); }

/* [n_layers][n_heads] nested list */
static cJSON *head_table(const float *v, uint32_t L, uint32_t H) {
    cJSON *outer = cJSON_CreateArray();
    for (uint32_t l = 0; l < L; l++) {
        cJSON *row = cJSON_CreateArray();
        for (uint32_t h = 0; h < H; h++) cJSON_AddItemToArray(row, num((double)v[l * H + h]));
        cJSON_AddItemToArray(outer, row);
    }
    return outer;
}

static void head_name(int idx, uint32_t H, char *buf, size_t cap) {
    snprintf(buf, cap, "%u.%u", (unsigned)(idx / (int)H), (unsigned)(idx % (int)H));
}

/* o[key] = "L.H" of head idx, or null when idx < 0 (no such head) */
static void add_head_or_null(cJSON *o, const char *key, int idx, uint32_t H) {
    char hn[32];
    if (idx < 0) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    head_name(idx, H, hn, sizeof hn);
    cJSON_AddStringToObject(o, key, hn);
}

/* ======================================================================== */
/* Per-model analysis after training. */

/* Index of the last eval point with step ≤ t (0 if none). */
static size_t last_at_or_before(const series *s, double t) {
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->step[i] <= t) k = i;
    return k;
}

/* Linear interpolation of the series y over the evaluation steps at step t (clamped to
 * the first and last evaluation). */
static double interp_at(const series *s, const double *y, double t) {
    if (!(t > s->step[0])) return y[0];
    for (size_t i = 0; i + 1 < s->n; i++)
        if (t <= s->step[i + 1])
            return y[i] + (y[i + 1] - y[i]) * (t - s->step[i]) / (s->step[i + 1] - s->step[i]);
    return y[s->n - 1];
}

/* The ICL estimate of the ablation evaluation (--ablation-windows, in groups) with the
 * heads `idx[0..n)` (flat layer·n_heads + head) zero-ablated, with the attention patterns
 * of the clean run kept (`pp` = 1) or not; the ablations (and with them the
 * preserve-patterns switch) are cleared again before returning. */
static int ablated_icl(job *j, const uint32_t *idx, uint32_t n, int pp, icl_est *out) {
    shared *sh = j->sh;
    const uint32_t H = sh->o->heads;
    *out = ICL_NONE;
    int rc = induct_model_set_preserve_patterns(j->m, (uint32_t)pp);
    for (uint32_t i = 0; i < n && !rc; i++)
        rc = induct_model_ablate_head(j->m, idx[i] / H, idx[i] % H, INDUCT_ABLATE_ZERO);
    if (!rc) rc = eval_groups(sh, j->m, sh->d_abl, sh->abl_groups, sh->abl_per, j->avg_buf, NULL, out);
    int rc2 = induct_model_clear_ablations(j->m);
    if (!rc) rc = rc2;
    return rc;
}

static int analyse(job *j) {
    shared *sh = j->sh;
    const options *o = sh->o;
    const uint32_t L = j->spec.n_layers, H = o->heads, NH = L * H;
    const double tok_per_step = (double)o->batch * (double)sh->T;
    cJSON *ms = j->summary = cJSON_CreateObject();
    int rc;

    char *mpath = path_join(j->dir, "metrics.jsonl");
    if (read_series(mpath, NH, &j->s) || j->s.n == 0) {
        j->rc = INDUCT_EFORMAT;
        snprintf(j->err, sizeof j->err, "[%s] cannot read back %s", j->spec.name, mpath);
        free(mpath);
        return 1;
    }
    free(mpath);
    series *s = &j->s;
    if (s->n != j->n_ev) {
        j->rc = INDUCT_ERROR;
        snprintf(j->err, sizeof j->err, "[%s] %zu metrics records but %zu evaluation callbacks",
                 j->spec.name, s->n, j->n_ev);
        return 1;
    }
    /* ICL series. icl_token: the driver's icl_score (docs/definitions.md: L[499] − L[49]), or (short
     * contexts) the callback's value from the same average curve. The window and the checks
     * use the band estimator (--icl-band W: mean of L over the 2W+1 tokens centred on each
     * index), a lower-variance estimate of the same quantity; W = 0 is the single-token one. */
    s->icl_token = xcalloc(s->n, sizeof *s->icl_token);
    s->icl_ps = xcalloc(s->n, sizeof *s->icl_ps);
    for (size_t i = 0; i < s->n; i++) {
        s->icl_token[i] = sh->icl_metric && isfinite(s->icl[i]) ? s->icl[i] : j->ev_icl[i];
        s->icl[i] = s->icl_ps[i] = j->ev_icl_band[i];
    }
    /* The window rule's series: the band ICL score of the weights kept at every
     * evaluation on --window-windows windows (bands only). The per-step curve's 256
     * windows have a standard error of about 0.05 nats, the size of the rule's smallest
     * change (min_change) and twice the 10 % point of a 0.2-nat fall: its sampling error,
     * which appears once a model predicts anything and then persists across evaluations,
     * would place the window. */
    double t_win = now();
    if (sh->d_win) {
        s->icl_se = xcalloc(s->n, sizeof *s->icl_se);
        for (size_t i = 0; i < s->n; i++) {
            icl_est e;
            rc = eval_groups(sh, j->ev_model[i], sh->d_win, sh->win_groups, sh->win_per,
                             j->avg_buf, NULL, &e);
            free(e.g_band);
            if (rc) {
                job_fail(j, rc, "the window evaluation");
                return 1;
            }
            s->icl[i] = e.band;
            s->icl_se[i] = e.band_se;
        }
    }
    t_win = now() - t_win;

    cJSON_AddStringToObject(ms, "name", j->spec.name);
    cJSON_AddNumberToObject(ms, "n_layers", L);
    cJSON_AddBoolToObject(ms, "smeared_keys", j->spec.smeared);
    cJSON_AddNumberToObject(ms, "n_params", (double)induct_model_n_params(j->m));
    add_num(ms, "wall_seconds", j->wall);
    add_num(ms, "tokens_per_second", j->tokens_per_second);
    add_num(ms, "threads_at_end", j->threads); /* more once other models ended */
    cJSON_AddNumberToObject(ms, "steps", (double)j->spec.steps);
    add_num(ms, "final_eval_loss", s->loss[s->n - 1]);

    /* ---- phase-change window on (step, ICL score) ---- */
    induct_phase_config pc;
    induct_phase_config_init(&pc, sizeof pc);
    pc.smooth = o->smooth;
    double ws = NAN, we = NAN;
    uint32_t found = 0;
    if (s->n >= 2 && (rc = induct_analysis_phase_window(s->step, s->icl, s->n, &pc, &ws, &we,
                                                        &found))) {
        job_fail(j, rc, "phase window");
        return 1;
    }
    j->window_found = (int)found;
    j->w_start = ws;
    j->w_end = we;
    j->w_frac = found ? (we - ws) / (double)j->spec.steps : NAN;
    cJSON *w = cJSON_AddObjectToObject(ms, "window");
    cJSON_AddBoolToObject(w, "found", found);
    add_num(w, "start_step", ws);
    add_num(w, "end_step", we);
    add_num(w, "start_tokens", ws * tok_per_step);
    add_num(w, "end_tokens", we * tok_per_step);
    add_num(w, "fraction_of_run", j->w_frac);
    cJSON_AddStringToObject(w, "series", sh->d_win ? "window evaluation (window_evaluation)"
                                                    : "per-step curve (--eval-batch windows)");
    cJSON_AddNumberToObject(w, "smooth", pc.smooth);
    add_num(w, "lo_frac", pc.lo_frac);
    add_num(w, "hi_frac", pc.hi_frac);
    add_num(w, "min_change", pc.min_change);

    /* ---- ICL and last-layer prefix matching before / after ---- */
    size_t bi;
    if (found) {
        bi = last_at_or_before(s, ws);
    } else {
        bi = s->n - 1;
        for (size_t i = 0; i < s->n; i++)
            if (s->step[i] >= (double)o->warmup) { bi = i; break; }
    }
    const size_t ai = s->n - 1;
    const uint32_t last = (L - 1) * H;
    double pm_b = -INFINITY, pm_a = -INFINITY;
    int best = 0;
    for (uint32_t h = 0; h < H; h++) {
        pm_b = fmax(pm_b, s->pm[bi * NH + last + h]);
        if (s->pm[ai * NH + last + h] > pm_a) {
            pm_a = s->pm[ai * NH + last + h];
            best = (int)h;
        }
    }
    double pm_any = 0;
    for (size_t i = 0; i < s->n * NH; i++) pm_any = fmax(pm_any, s->pm[i]);
    j->pm_max_any = pm_any;

    /* ---- the large evaluation (--icl-windows windows in --icl-groups groups, standard
     * errors by batch means): the final model and, when a window is found, the weights
     * kept at the evaluation before it; and the per-step evaluation's own standard error
     * (the final model on the per-step windows, in groups) ---- */
    double t_eval = now();
    double *curve = xcalloc(sh->T, sizeof *curve);
    icl_est ea = ICL_NONE, eb = ICL_NONE, eps = ICL_NONE;
    rc = eval_groups(sh, j->m, sh->d_big, sh->big_groups, sh->big_per, j->avg_buf, curve, &ea);
    if (!rc && found)
        rc = eval_groups(sh, j->ev_model[bi], sh->d_big, sh->big_groups, sh->big_per,
                         j->avg_buf, NULL, &eb);
    if (!rc)
        rc = eval_groups(sh, j->m, sh->d, sh->ps_groups, sh->ps_per, j->avg_buf, NULL, &eps);
    j->eval_seconds_large = now() - t_eval;
    if (rc) {
        free(curve);
        free(ea.g_band);
        free(eb.g_band);
        free(eps.g_band);
        job_fail(j, rc, "the large evaluation");
        return 1;
    }
    j->ps_se = eps.band_se;
    j->icl_before_step = s->step[bi];
    j->icl_after = ea.band;
    j->icl_after_se = ea.band_se;
    if (found) {
        j->icl_before = eb.band;
        j->icl_before_se = eb.band_se;
        paired_se(eb.g_band, ea.g_band, ea.n_groups, &j->icl_fall, &j->icl_fall_se);
    } else {
        j->icl_before = s->icl[bi];
        j->icl_before_se = s->icl_se ? s->icl_se[bi] : eps.band_se;
        j->icl_fall = j->icl_fall_se = NAN;
    }
    cJSON_AddStringToObject(ms, "icl_estimator",
                            o->icl_band ? "band: mean L over ±icl_band tokens around each index"
                                        : "single tokens (docs/definitions.md)");
    add_num(ms, "icl_before", j->icl_before);
    add_num(ms, "icl_before_se", j->icl_before_se);
    add_num(ms, "icl_token_before", found ? eb.token : s->icl_token[bi]);
    add_num(ms, "icl_token_before_se", found ? eb.token_se : eps.token_se);
    add_num(ms, "icl_before_step", s->step[bi]);
    cJSON_AddStringToObject(ms, "icl_before_rule",
                            found ? "last evaluation at or before the window start"
                                  : "no window: first evaluation at or after the warm-up");
    cJSON_AddStringToObject(ms, "icl_before_evaluation",
                            found ? "large (the weights kept at that evaluation)"
                            : sh->d_win ? "window evaluation (no window: no large evaluation)"
                                        : "per-step (no window: no large evaluation)");
    add_num(ms, "icl_after", j->icl_after);
    add_num(ms, "icl_after_se", j->icl_after_se);
    add_num(ms, "icl_token_after", ea.token);
    add_num(ms, "icl_token_after_se", ea.token_se);
    add_num(ms, "icl_after_step", s->step[ai]);
    cJSON_AddItemToObject(ms, "icl_after_groups", double_list(ea.g_band, ea.n_groups));
    add_num(ms, "icl_fall", j->icl_fall);
    add_num(ms, "icl_fall_se", j->icl_fall_se);
    if (sh->d_win) {
        cJSON *we = cJSON_AddObjectToObject(ms, "window_evaluation");
        cJSON_AddNumberToObject(we, "windows", (double)sh->win_groups * sh->win_per);
        cJSON_AddNumberToObject(we, "groups", sh->win_groups);
        cJSON_AddItemToObject(we, "steps", double_list(s->step, s->n));
        cJSON_AddItemToObject(we, "icl", double_list(s->icl, s->n));
        cJSON_AddItemToObject(we, "icl_se", double_list(s->icl_se, s->n));
        add_num(we, "seconds", t_win);
        cJSON_AddStringToObject(we, "note",
            "the window rule's series: the band ICL score of the weights kept at every "
            "evaluation, on these windows (bands only), standard errors by batch means");
    }
    cJSON *pse = cJSON_AddObjectToObject(ms, "per_step");
    add_num(pse, "icl_final", s->icl_ps[ai]);
    add_num(pse, "icl_token_final", s->icl_token[ai]);
    add_num(pse, "icl_se", eps.band_se);
    add_num(pse, "icl_token_se", eps.token_se);
    cJSON_AddStringToObject(pse, "note",
        "the per-step evaluations (curves, and the window rule with --window-windows 0) use "
        "--eval-batch windows; their standard error is measured on the final model in "
        "groups of those windows");
    add_num(ms, "large_evaluation_seconds", j->eval_seconds_large);
    cJSON_AddItemToObject(ms, "loss_by_position_final", double_list(curve, sh->T - 1));
    cJSON_AddNumberToObject(ms, "loss_by_position_final_windows",
                            (double)curve_groups(sh->big_groups) * sh->big_per);
    free(curve);
    free(ea.g_band);
    free(eb.g_band);
    free(eps.g_band);
    add_num(ms, "pm_before", pm_b);
    add_num(ms, "pm_after", pm_a);
    add_num(ms, "pm_max_any_head_any_step", pm_any);

    /* the last-layer head with the largest final prefix-matching score, and its own window */
    j->pm_head = (int)(last + (uint32_t)best);
    double *pmh = xcalloc(s->n, sizeof *pmh);
    for (size_t i = 0; i < s->n; i++) pmh[i] = s->pm[i * NH + (size_t)j->pm_head];
    induct_phase_config pcp = pc;
    pcp.min_change = CHECK_PM_MIN_CHANGE;
    double ps = NAN, pe = NAN;
    uint32_t pfound = 0;
    if (s->n >= 2 && (rc = induct_analysis_phase_window(s->step, pmh, s->n, &pcp, &ps, &pe,
                                                        &pfound))) {
        free(pmh);
        job_fail(j, rc, "prefix-matching window");
        return 1;
    }
    j->pm_head_before = pmh[bi];
    j->pm_head_after = pmh[ai];
    /* its rise from chance, and the part of it inside the ICL window (interpolated) */
    j->pm_rise = pmh[ai] - sh->pm_chance;
    j->pm_rise_inside = found ? interp_at(s, pmh, we) - interp_at(s, pmh, ws) : NAN;
    free(pmh);
    j->pm_win_found = (int)pfound;
    j->pm_win_start = ps;
    j->pm_win_end = pe;
    /* the windows coincide if they overlap, with one evaluation interval of slack */
    const double slack = (double)o->eval_every;
    j->pm_coincide = found && pfound && ps <= we + slack && pe >= ws - slack;
    char hn[32];
    head_name(j->pm_head, H, hn, sizeof hn);
    cJSON *pmo = cJSON_AddObjectToObject(ms, "pm_head");
    cJSON_AddStringToObject(pmo, "head", hn);
    add_num(pmo, "before", j->pm_head_before);
    add_num(pmo, "after", j->pm_head_after);
    cJSON_AddBoolToObject(pmo, "window_found", pfound);
    add_num(pmo, "window_start_step", ps);
    add_num(pmo, "window_end_step", pe);
    cJSON_AddBoolToObject(pmo, "coincides_with_icl_window", j->pm_coincide);
    add_num(pmo, "chance", sh->pm_chance);
    add_num(pmo, "rise_from_chance", j->pm_rise);
    add_num(pmo, "rise_inside_window", j->pm_rise_inside);

    /* ---- bump: a slope of the eval-loss curve inside the window more negative than the
     * slope of the last interval that ends at or before the window start ---- */
    cJSON *bump = cJSON_AddObjectToObject(ms, "bump");
    {
        double before_slope = NAN, min_in = NAN, in_t0 = NAN, in_t1 = NAN;
        int have_before = 0, have_in = 0;
        if (found) {
            for (size_t i = 0; i + 1 < s->n; i++) {
                double sl = (s->loss[i + 1] - s->loss[i]) / (s->step[i + 1] - s->step[i]);
                if (s->step[i + 1] <= ws) {
                    before_slope = sl;
                    have_before = 1;
                } else if (s->step[i] < we && s->step[i + 1] > ws) {
                    if (!have_in || sl < min_in) {
                        min_in = sl;
                        in_t0 = s->step[i];
                        in_t1 = s->step[i + 1];
                    }
                    have_in = 1;
                }
            }
        }
        int decided = found && have_before && have_in;
        if (decided) cJSON_AddBoolToObject(bump, "bump", min_in < before_slope);
        else cJSON_AddNullToObject(bump, "bump");
        add_num(bump, "slope_before_window", before_slope);
        add_num(bump, "steepest_slope_in_window", min_in);
        add_num(bump, "steepest_interval_start_step", in_t0);
        add_num(bump, "steepest_interval_end_step", in_t1);
        cJSON_AddStringToObject(bump, "unit", "nats per step");
        cJSON_AddStringToObject(bump, "rule",
            "slopes s_i = (L_{i+1} - L_i)/(t_{i+1} - t_i) of eval_loss between evaluations; "
            "bump = some interval overlapping the window (t_i < end, t_{i+1} > start) has a "
            "slope below the slope of the last interval with t_{i+1} <= start; null when "
            "there is no window or no such intervals");
    }

    /* ---- heads at the final model ---- */
    float *pt = xcalloc(NH, sizeof *pt), *pm = xcalloc(NH, sizeof *pm),
          *dup = xcalloc(NH, sizeof *dup);
    uint32_t *labels = xcalloc(NH, sizeof *labels);
    size_t len;
    induct_classify_config cc;
    induct_classify_config_init(&cc, sizeof cc);
    if (!isnan(o->thr_induction)) cc.induction = o->thr_induction;
    if (!isnan(o->thr_previous)) cc.previous_token = o->thr_previous;
    if (!isnan(o->thr_duplicate)) cc.duplicate = o->thr_duplicate;
    induct_probe_config probe; /* the data's BOS, as the driver's prefix-matching metric */
    if ((rc = induct_probe_config_for_dataset(&probe, sizeof probe, sh->d)) ||
        (rc = induct_analysis_previous_token_score(j->m, sh->d, sh->E, sh->T, pt, NH, &len)) ||
        (rc = induct_analysis_prefix_matching(j->m, &probe, pm, NH, &len)) ||
        (rc = induct_analysis_duplicate_token(j->m, &probe, dup, NH, &len)) ||
        (rc = induct_analysis_classify_heads(pt, pm, dup, NULL, NH, &cc, labels, NH, &len))) {
        job_fail(j, rc, "head scores");
        return 1;
    }
    cJSON *hd = cJSON_AddObjectToObject(ms, "heads");
    cJSON *ind = cJSON_AddArrayToObject(hd, "induction");
    /* name lists; the score tables below are "previous_token" / "duplicate_token" */
    cJSON *prev = cJSON_AddArrayToObject(hd, "previous_token_heads");
    cJSON *dupl = cJSON_AddArrayToObject(hd, "duplicate_token_heads");
    cJSON *lab = cJSON_CreateArray();
    static const char *const label_names[] = {"other", "previous_token", "induction", "duplicate"};
    j->n_induction = 0;
    for (uint32_t l = 0; l < L; l++) {
        cJSON *row = cJSON_CreateArray();
        for (uint32_t h = 0; h < H; h++) {
            uint32_t c = labels[l * H + h];
            cJSON_AddItemToArray(row, cJSON_CreateString(c < 4 ? label_names[c] : "?"));
            head_name((int)(l * H + h), H, hn, sizeof hn);
            if (c == INDUCT_HEAD_INDUCTION) {
                cJSON_AddItemToArray(ind, cJSON_CreateString(hn));
                j->n_induction++;
            }
            if (c == INDUCT_HEAD_PREVIOUS_TOKEN) cJSON_AddItemToArray(prev, cJSON_CreateString(hn));
            if (c == INDUCT_HEAD_DUPLICATE) cJSON_AddItemToArray(dupl, cJSON_CreateString(hn));
        }
        cJSON_AddItemToArray(lab, row);
    }
    cJSON_AddItemToObject(hd, "labels", lab);
    cJSON_AddItemToObject(hd, "prefix_matching", head_table(pm, L, H));
    cJSON_AddItemToObject(hd, "previous_token", head_table(pt, L, H));
    cJSON_AddItemToObject(hd, "duplicate_token", head_table(dup, L, H));
    cJSON *thr = cJSON_AddObjectToObject(hd, "thresholds");
    add_num(thr, "previous_token", cc.previous_token);
    add_num(thr, "induction", cc.induction);
    add_num(thr, "duplicate", cc.duplicate);
    cJSON_AddStringToObject(hd, "note", "classified without copying scores (the empirical "
                                        "copying score mislabels induction heads)");

    /* ---- ablation: the ICL score (the run's estimator) of the context-index average with
     * one head, or all induction heads, zero-ablated; plain and pattern-preserving ---- */
    float *dz = xcalloc(NH, sizeof *dz), *dpp = xcalloc(NH, sizeof *dpp);
    float *dz_se = xcalloc(NH, sizeof *dz_se), *dpp_se = xcalloc(NH, sizeof *dpp_se);
    double icl_clean = NAN, icl_clean_pp = NAN, icl_ind = NAN, icl_ind_pp = NAN;
    double clean_se = NAN, clean_pp_se = NAN, rem_ind = NAN, rem_ind_se = NAN;
    double t_abl = now();
    rc = 0;
    for (int pp = 0; pp < 2 && !rc; pp++) {
        icl_est clean, v;
        float *delta = pp ? dpp : dz, *delta_se = pp ? dpp_se : dz_se;
        if ((rc = ablated_icl(j, NULL, 0, pp, &clean))) break;
        *(pp ? &icl_clean_pp : &icl_clean) = clean.band;
        *(pp ? &clean_pp_se : &clean_se) = clean.band_se;
        for (uint32_t i = 0; i < NH && !rc; i++) {
            if ((rc = ablated_icl(j, &i, 1, pp, &v))) break;
            double dm, dse;
            paired_se(v.g_band, clean.g_band, clean.n_groups, &dm, &dse);
            delta[i] = (float)dm;
            delta_se[i] = (float)dse;
            free(v.g_band);
        }
        if (!rc && j->n_induction > 0) {
            uint32_t *set = xcalloc(NH, sizeof *set), n = 0;
            for (uint32_t i = 0; i < NH; i++)
                if (labels[i] == INDUCT_HEAD_INDUCTION) set[n++] = i;
            rc = ablated_icl(j, set, n, pp, &v);
            free(set);
            if (!rc) {
                *(pp ? &icl_ind_pp : &icl_ind) = v.band;
                if (!pp) paired_se(v.g_band, clean.g_band, clean.n_groups, &rem_ind, &rem_ind_se);
                free(v.g_band);
            }
        }
        free(clean.g_band);
    }
    j->eval_seconds_ablation = now() - t_abl;
    if (rc) {
        job_fail(j, rc, "ablation");
        return 1;
    }
    /* fraction of the ICL score removed: (icl_ablated − icl_clean) / |ICL score|, the
     * removal a paired difference on the ablation evaluation, the ICL score the model's
     * final one (the large evaluation: its standard error is 4× smaller than the ablation
     * evaluation's); defined only when that score is < 0 (context helps) */
    const double score = j->icl_after;
    const int defined = score < 0;
    j->icl_clean = icl_clean;
    j->icl_clean_se = clean_se;
    j->frac_induction = defined && j->n_induction ? (icl_ind - icl_clean) / -score : NAN;
    j->frac_induction_pp = defined && j->n_induction ? (icl_ind_pp - icl_clean_pp) / -score : NAN;
    /* the largest fraction one non-induction head removes, plainly (its own output and,
     * through later layers' patterns, e.g. a previous-token head's part in an induction
     * circuit) and pattern-preserving (its own output only: the heads that carry ICL) */
    j->max_other_frac = j->max_other_frac_pp = NAN;
    j->max_other_head = j->max_other_head_pp = -1;
    for (uint32_t i = 0; i < NH && defined; i++) {
        if (labels[i] == INDUCT_HEAD_INDUCTION) continue;
        double f = (double)dz[i] / -score, fp = (double)dpp[i] / -score;
        if (j->max_other_head < 0 || f > j->max_other_frac) {
            j->max_other_frac = f;
            j->max_other_head = (int)i;
        }
        if (j->max_other_head_pp < 0 || fp > j->max_other_frac_pp) {
            j->max_other_frac_pp = fp;
            j->max_other_head_pp = (int)i;
        }
    }
    cJSON *ab = cJSON_AddObjectToObject(ms, "ablation");
    add_num(ab, "icl_clean", icl_clean);
    add_num(ab, "icl_clean_se", clean_se);
    add_num(ab, "icl_clean_preserve_patterns", icl_clean_pp);
    add_num(ab, "icl_clean_preserve_patterns_se", clean_pp_se);
    cJSON_AddItemToObject(ab, "delta_icl_zero", head_table(dz, L, H));
    cJSON_AddItemToObject(ab, "delta_icl_zero_se", head_table(dz_se, L, H));
    cJSON_AddItemToObject(ab, "delta_icl_zero_preserve_patterns", head_table(dpp, L, H));
    cJSON_AddItemToObject(ab, "delta_icl_zero_preserve_patterns_se", head_table(dpp_se, L, H));
    add_num(ab, "removed_by_induction_heads", rem_ind);
    add_num(ab, "removed_by_induction_heads_se", rem_ind_se);
    add_num(ab, "seconds", j->eval_seconds_ablation);
    add_num(ab, "icl_induction_heads_ablated", icl_ind);
    add_num(ab, "icl_induction_heads_ablated_preserve_patterns", icl_ind_pp);
    add_num(ab, "fraction_removed_by_induction_heads", j->frac_induction);
    add_num(ab, "fraction_removed_by_induction_heads_preserve_patterns", j->frac_induction_pp);
    add_num(ab, "max_fraction_removed_by_other_head", j->max_other_frac);
    add_head_or_null(ab, "max_other_head", j->max_other_head, H);
    add_num(ab, "max_fraction_removed_by_other_head_preserve_patterns", j->max_other_frac_pp);
    add_head_or_null(ab, "max_other_head_preserve_patterns", j->max_other_head_pp, H);
    cJSON_AddStringToObject(ab, "fraction_rule",
        "(icl_ablated - icl_clean) / -icl_after: the removal on the ablation evaluation "
        "(paired), over the model's final ICL score (the large evaluation); defined when "
        "icl_after < 0; 1 = all of the ICL score removed, 0 = none, negative = ablation "
        "strengthens it; a single head's fraction is delta_icl_zero / -icl_after; every ICL "
        "value here is the run's estimator "
        "(config.evaluation.icl_band) on the ablation evaluation (config.evaluation."
        "ablation_windows in groups); *_se are standard errors by batch means, of the "
        "paired differences for the deltas and removed_by_induction_heads (nats)");
    cJSON_AddStringToObject(ab, "unit", "nats (icl and delta); fractions are ratios");
    free(pt);
    free(pm);
    free(dup);
    free(labels);
    free(dz);
    free(dpp);
    free(dz_se);
    free(dpp_se);
    return 0;
}

/* ======================================================================== */
/* A job: train one model, save it, analyse it. Runs on a worker thread. */

static void run_job(job *j) {
    shared *sh = j->sh;
    const options *o = sh->o;
    int rc;
    if (mkdir_p(j->dir)) {
        j->rc = INDUCT_EIO;
        snprintf(j->err, sizeof j->err, "cannot create %s: %s", j->dir, strerror(errno));
        return;
    }
    if ((rc = make_model(o, &j->spec, induct_dataset_d_vocab(sh->d), &j->m, &j->o))) {
        job_fail(j, rc, "creating the model");
        return;
    }
    j->threads = o->threads;
    j->avg_buf = xcalloc(sh->T, sizeof(float));
    char *metrics = j->log_path = path_join(j->dir, "metrics.jsonl");
    j->log_off = 0;
    char *snaps = path_join(j->dir, "ckpt-{step}.safetensors");
    induct_train_config tc;
    induct_train_config_init(&tc, sizeof tc);
    tc.steps = j->spec.steps;
    tc.batch = o->batch;
    tc.seq_len = sh->T;
    tc.eval_every = o->eval_every;
    tc.eval_batch = o->eval_batch;
    tc.metrics = INDUCT_TRAIN_METRIC_LOSS | INDUCT_TRAIN_METRIC_LOSS_BY_POSITION |
                 INDUCT_TRAIN_METRIC_PREFIX_MATCHING | INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN |
                 INDUCT_TRAIN_METRIC_LOSS_VECTORS |
                 (sh->icl_metric ? INDUCT_TRAIN_METRIC_ICL_SCORE : 0);
    tc.metrics_path = metrics;
    /* snapshots at steps k·steps/N for N = --snapshots (step 0 included when N > 0);
     * final.safetensors is written after the call in every case */
    uint64_t st = j->spec.steps;
    tc.snapshot_every = o->snapshots ? (st / o->snapshots ? st / o->snapshots : 1) : 0;
    tc.snapshot_optimizer = 1;
    tc.snapshot_path = snaps;
    double t0 = now();
    pthread_mutex_lock(&sh->mu);
    j->started = 1;
    pthread_mutex_unlock(&sh->mu);
    rc = induct_train(j->o, sh->d, &tc, on_progress, j);
    j->wall = now() - t0;
    j->tokens_per_second = j->tok_s;
    free(snaps);
    if (rc) {
        if (!j->rc) job_fail(j, rc, g_stop ? "training (interrupted)" : "training");
        return;
    }
    /* the callback failed at the last evaluation (induct_train returns OK after the last
     * step whatever the callback says): its message stands */
    if (j->rc) return;
    char *final = path_join(j->dir, "final.safetensors");
    /* the file records the model's thread count: save it with the configured one, so the
     * file does not depend on whether a finished worker's cores arrived (they change
     * only the time); the extra cores are taken back for the analyses after */
    if (j->threads != sh->o->threads) induct_model_set_threads(j->m, sh->o->threads);
    rc = induct_optimizer_save(j->o, final);
    if (j->threads != sh->o->threads) induct_model_set_threads(j->m, j->threads);
    free(final);
    if (rc) {
        job_fail(j, rc, "saving final.safetensors");
        return;
    }
    analyse(j);
    pthread_mutex_lock(&sh->mu);
    j->finished = 1;
    pthread_mutex_unlock(&sh->mu);
}

static void *worker(void *arg) {
    shared *sh = arg;
    for (;;) {
        pthread_mutex_lock(&sh->mu);
        size_t k = sh->next < sh->n_jobs ? sh->next++ : sh->n_jobs;
        if (k >= sh->n_jobs) sh->spare += sh->o->threads; /* this worker's cores are free */
        pthread_mutex_unlock(&sh->mu);
        if (k >= sh->n_jobs || g_stop) break;
        run_job(&sh->jobs[k]);
    }
    return NULL;
}

/* ======================================================================== */
/* Report. */

typedef struct check {
    const char *id, *claim, *model, *rule;
    const char *status; /* "pass", "fail", "not_run" */
    cJSON *numbers;
} check;


/* ---- the checks: decided on the numbers of summary.json's "models" alone, so that
 * `phase-change --judge summary.json` decides them again (and tests can feed synthetic
 * numbers). Every rule is in docs/phase-change.md, "Checks". ---- */

/* o's number at a dotted path ("window.start_step"); NAN when missing or null. */
static double jnum(const cJSON *o, const char *path) {
    char key[64];
    while (o && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof key) return NAN;
        memcpy(key, path, n);
        key[n] = '\0';
        o = cJSON_GetObjectItemCaseSensitive(o, key);
        path += n + (path[n] == '.');
    }
    return cJSON_IsNumber(o) ? o->valuedouble : NAN;
}

static int jtrue(const cJSON *o, const char *a, const char *b) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b) x = cJSON_GetObjectItemCaseSensitive(x, b);
    return cJSON_IsTrue(x);
}

/* A list of numbers into a new array (NULL if not a list of numbers). */
static double *jlist(const cJSON *arr, size_t *n) {
    *n = 0;
    if (!cJSON_IsArray(arr)) return NULL;
    size_t k = (size_t)cJSON_GetArraySize(arr), i = 0;
    double *x = xcalloc(k ? k : 1, sizeof *x);
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        if (!cJSON_IsNumber(e)) { free(x); return NULL; }
        x[i++] = e->valuedouble;
    }
    *n = k;
    return x;
}

/* a − b with its standard error: paired over the groups when both models carry the same
 * number of groups (the same windows), else from the two standard errors. */
static void diff_after(const cJSON *a, const cJSON *b, double *d, double *se) {
    size_t na, nb;
    double *ga = jlist(cJSON_GetObjectItemCaseSensitive(a, "icl_after_groups"), &na);
    double *gb = jlist(cJSON_GetObjectItemCaseSensitive(b, "icl_after_groups"), &nb);
    if (ga && gb && na == nb && na >= 2) {
        paired_se(ga, gb, na, d, se);
    } else {
        *d = jnum(a, "icl_after") - jnum(b, "icl_after");
        *se = hypot(jnum(a, "icl_after_se"), jnum(b, "icl_after_se"));
    }
    free(ga);
    free(gb);
}

/* "x counts": x exceeds CHECK_SIGMAS standard errors (false when either is NAN) */
static int counts(double x, double se) { return x > CHECK_SIGMAS * se; }

static const char *RULE_2L =
    "pass iff (a) a phase-change window of the ICL score is found (10%-90% of its change, "
    "per-step evaluations); (b) the ICL score falls by >= 0.15 nats across it (icl_before - "
    "icl_after on the large evaluation, paired over its groups) and the fall exceeds 3 "
    "standard errors; (c) the window is no longer than the training before it opens "
    "(end - start <= start); (d) the last-layer head with the largest final prefix-matching "
    "score ends above 0.30, and at least half of its rise from chance (final - chance) "
    "happens inside the window (interpolated between evaluations); (e) the final ICL score "
    "is >= 0.15 nats below the 1-layer control's, by more than 3 standard errors";
static const char *RULE_1L =
    "pass iff no phase-change window is found, no head's prefix-matching score exceeds 0.10 "
    "at any evaluation, and the final ICL score (large evaluation) is within +-0.05 nats of "
    "0 (a larger |ICL| counts only when it also exceeds 3 standard errors)";
static const char *RULE_1LS =
    "pass iff a phase-change window is found and it opens earlier than the 2-layer model's "
    "(a 2-layer model without a window in the run counts as opening later)";
static const char *RULE_ABL =
    "decided on every model with at least one head classified induction: each must have a "
    "final ICL score icl_after < 0, zero-ablating all its induction heads together must "
    "remove >= half of it ((icl_ablated - icl_clean) >= 0.5 |icl_after|, the removal a "
    "paired difference on the ablation evaluation exceeding 3 "
    "standard errors of the paired difference), and no single other head may remove more "
    "than a quarter under pattern-preserving zero ablation (a removal counts only when it "
    "exceeds 3 standard errors); pass iff at least one model has induction heads and every "
    "such model satisfies this";

static void judge(const cJSON *models, check *c) {
    const cJSON *m2 = cJSON_GetObjectItemCaseSensitive(models, "2L");
    const cJSON *m1 = cJSON_GetObjectItemCaseSensitive(models, "1L");
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(models, "1L-smeared");
    /* 1. two layers */
    c[0] = (check){"two_layer_phase_change",
                   "2 layers: the ICL score falls by >= 0.15 nats inside a window no longer "
                   "than the training before it, while a last-layer head's prefix matching "
                   "rises above 0.3, ending >= 0.15 nats below the 1-layer control",
                   "2L", RULE_2L, "not_run", NULL};
    if (m2) {
        cJSON *n = c[0].numbers = cJSON_CreateObject();
        int found = jtrue(m2, "window", "found");
        double ws = jnum(m2, "window.start_step"), we = jnum(m2, "window.end_step");
        double fall = jnum(m2, "icl_fall"), fall_se = jnum(m2, "icl_fall_se");
        double pa = jnum(m2, "pm_head.after"), rise = jnum(m2, "pm_head.rise_from_chance"),
               rin = jnum(m2, "pm_head.rise_inside_window");
        double gap = NAN, gap_se = NAN;
        if (m1) diff_after(m1, m2, &gap, &gap_se);
        int ok_len = found && we - ws <= CHECK_WINDOW_MAX_VS_BEFORE * ws;
        int ok_fall = found && fall >= CHECK_ICL_FALL_MIN && counts(fall, fall_se);
        int ok_head = pa > CHECK_PM_HIGH && rise > 0 && rin >= CHECK_PM_RISE_INSIDE * rise;
        int ok_gap = m1 && gap >= CHECK_ICL_BELOW_CONTROL && counts(gap, gap_se);
        cJSON_AddBoolToObject(n, "window_found", found);
        add_num(n, "window_start_step", ws);
        add_num(n, "window_end_step", we);
        cJSON_AddBoolToObject(n, "window_no_longer_than_training_before", ok_len);
        add_num(n, "icl_before", jnum(m2, "icl_before"));
        add_num(n, "icl_before_se", jnum(m2, "icl_before_se"));
        add_num(n, "icl_after", jnum(m2, "icl_after"));
        add_num(n, "icl_after_se", jnum(m2, "icl_after_se"));
        add_num(n, "icl_fall", fall);
        add_num(n, "icl_fall_se", fall_se);
        cJSON_AddBoolToObject(n, "icl_fall_ok", ok_fall);
        add_num(n, "pm_head_after", pa);
        add_num(n, "pm_rise_from_chance", rise);
        add_num(n, "pm_rise_inside_window", rin);
        cJSON_AddBoolToObject(n, "head_ok", ok_head);
        if (m1) {
            add_num(n, "icl_after_control", jnum(m1, "icl_after"));
            add_num(n, "icl_below_control", gap);
            add_num(n, "icl_below_control_se", gap_se);
        } else {
            cJSON_AddStringToObject(n, "control", "the 1-layer control was not run");
        }
        cJSON_AddBoolToObject(n, "below_control_ok", ok_gap);
        c[0].status = found && ok_len && ok_fall && ok_head && ok_gap ? "pass" : "fail";
    }
    /* 2. one layer */
    c[1] = (check){"one_layer_no_phase_change",
                   "1 layer: no window, no prefix-matching head, no in-context learning "
                   "(final ICL score within +-0.05 nats of 0)", "1L", RULE_1L, "not_run", NULL};
    if (m1) {
        cJSON *n = c[1].numbers = cJSON_CreateObject();
        int found = jtrue(m1, "window", "found");
        double pm = jnum(m1, "pm_max_any_head_any_step");
        double a = jnum(m1, "icl_after"), se = jnum(m1, "icl_after_se");
        int ok_icl = fabs(a) <= CHECK_ICL_ONE_LAYER_ABS || !counts(fabs(a), se);
        cJSON_AddBoolToObject(n, "window_found", found);
        add_num(n, "pm_max_any_head_any_step", pm);
        add_num(n, "icl_after", a);
        add_num(n, "icl_after_se", se);
        cJSON_AddBoolToObject(n, "icl_ok", ok_icl);
        c[1].status = !found && pm <= CHECK_PM_ONE_LAYER_MAX && ok_icl ? "pass" : "fail";
    }
    /* 3. one layer, smeared keys */
    c[2] = (check){"smeared_one_layer_phase_change",
                   "1 layer with smeared keys: the phase change comes earlier than the "
                   "2-layer model's (moving the induction heads' formation moves the ICL jump)",
                   "1L-smeared", RULE_1LS, "not_run", NULL};
    if (ms) {
        cJSON *n = c[2].numbers = cJSON_CreateObject();
        int found = jtrue(ms, "window", "found");
        double ws = jnum(ms, "window.start_step");
        cJSON_AddBoolToObject(n, "window_found", found);
        add_num(n, "window_start_step", ws);
        add_num(n, "window_end_step", jnum(ms, "window.end_step"));
        add_num(n, "icl_before", jnum(ms, "icl_before"));
        add_num(n, "icl_before_se", jnum(ms, "icl_before_se"));
        add_num(n, "icl_after", jnum(ms, "icl_after"));
        add_num(n, "icl_after_se", jnum(ms, "icl_after_se"));
        int earlier = 0;
        if (m2) {
            int f2 = jtrue(m2, "window", "found");
            double ws2 = jnum(m2, "window.start_step");
            cJSON_AddBoolToObject(n, "two_layer_window_found", f2);
            add_num(n, "two_layer_window_start_step", ws2);
            earlier = found && (!f2 || ws < ws2);
        } else {
            cJSON_AddStringToObject(n, "two_layer", "the 2-layer model was not run");
        }
        cJSON_AddBoolToObject(n, "opens_earlier", earlier);
        c[2].status = found && earlier ? "pass" : "fail";
    }
    /* 4. ablation: every model with at least one head classified induction */
    c[3] = (check){"induction_heads_carry_icl",
                   "Zero-ablating the heads classified as induction removes at least half of "
                   "the ICL score; no single other head removes more than a quarter "
                   "(patterns preserved)", "every model with induction heads", RULE_ABL,
                   "not_run", NULL};
    {
        cJSON *n = cJSON_CreateObject();
        int any_run = 0, n_with = 0, all_ok = 1;
        const cJSON *m;
        cJSON_ArrayForEach(m, models) {
            any_run = 1;
            const cJSON *hd = cJSON_GetObjectItemCaseSensitive(m, "heads");
            const cJSON *ind = cJSON_GetObjectItemCaseSensitive(hd, "induction");
            if (!cJSON_GetArraySize(ind)) continue;
            n_with++;
            const cJSON *ab = cJSON_GetObjectItemCaseSensitive(m, "ablation");
            /* the ICL score: the model's final one (large evaluation); the removals are
             * paired differences on the ablation evaluation */
            double clean = jnum(m, "icl_after"), clean_pp = clean;
            double rem = jnum(ab, "removed_by_induction_heads"),
                   rem_se = jnum(ab, "removed_by_induction_heads_se");
            int ok_ind = clean < 0 && rem >= CHECK_ABLATION_MOST * -clean && counts(rem, rem_se);
            /* the other heads, pattern-preserving */
            const cJSON *lab = cJSON_GetObjectItemCaseSensitive(hd, "labels");
            const cJSON *dpp = cJSON_GetObjectItemCaseSensitive(ab, "delta_icl_zero_preserve_patterns");
            const cJSON *dse = cJSON_GetObjectItemCaseSensitive(ab, "delta_icl_zero_preserve_patterns_se");
            int ok_other = 1;
            double worst = NAN, worst_rem = NAN, worst_se = NAN;
            char worst_head[32] = "none";
            int l = 0;
            const cJSON *row;
            cJSON_ArrayForEach(row, lab) {
                int h = 0;
                const cJSON *x;
                cJSON_ArrayForEach(x, row) {
                    if (!(cJSON_IsString(x) && !strcmp(x->valuestring, "induction"))) {
                        const cJSON *dr = cJSON_GetArrayItem(cJSON_GetArrayItem(dpp, l), h);
                        const cJSON *sr = cJSON_GetArrayItem(cJSON_GetArrayItem(dse, l), h);
                        double r = cJSON_IsNumber(dr) ? dr->valuedouble : NAN;
                        double rs = cJSON_IsNumber(sr) ? sr->valuedouble : NAN;
                        double f = clean_pp < 0 ? r / -clean_pp : NAN;
                        if (isfinite(f) && (!isfinite(worst) || f > worst)) {
                            worst = f;
                            worst_rem = r;
                            worst_se = rs;
                            snprintf(worst_head, sizeof worst_head, "%d.%d", l, h);
                        }
                        if (f > CHECK_ABLATION_OTHER_MAX && counts(r, rs)) ok_other = 0;
                    }
                    h++;
                }
                l++;
            }
            int ok = ok_ind && ok_other;
            all_ok = all_ok && ok;
            cJSON *mo = cJSON_AddObjectToObject(n, cJSON_GetObjectItemCaseSensitive(m, "name")
                                                       ? cJSON_GetObjectItemCaseSensitive(m, "name")->valuestring
                                                       : m->string);
            cJSON_AddBoolToObject(mo, "passed", ok);
            add_num(mo, "icl_after", clean);
            add_num(mo, "icl_after_se", jnum(m, "icl_after_se"));
            cJSON_AddNumberToObject(mo, "n_induction_heads", cJSON_GetArraySize(ind));
            add_num(mo, "removed_by_induction_heads", rem);
            add_num(mo, "removed_by_induction_heads_se", rem_se);
            add_num(mo, "fraction_removed_by_induction_heads", clean < 0 ? rem / -clean : NAN);
            cJSON_AddBoolToObject(mo, "induction_heads_ok", ok_ind);
            cJSON_AddStringToObject(mo, "max_other_head_preserve_patterns", worst_head);
            add_num(mo, "max_fraction_removed_by_other_head_preserve_patterns", worst);
            add_num(mo, "max_other_head_removed", worst_rem);
            add_num(mo, "max_other_head_removed_se", worst_se);
            cJSON_AddBoolToObject(mo, "other_heads_ok", ok_other);
        }
        if (any_run) {
            c[3].status = n_with > 0 && all_ok ? "pass" : "fail";
            cJSON_AddNumberToObject(n, "models_with_induction_heads", n_with);
            c[3].numbers = n;
        } else {
            cJSON_Delete(n);
        }
    }
}

/* The checks as summary.json's "checks" object. */
static cJSON *checks_json(const check *checks) {
    cJSON *ck = cJSON_CreateObject();
    for (int k = 0; k < 4; k++) {
        cJSON *c = cJSON_AddObjectToObject(ck, checks[k].id);
        cJSON_AddStringToObject(c, "claim", checks[k].claim);
        cJSON_AddStringToObject(c, "model", checks[k].model);
        cJSON_AddStringToObject(c, "status", checks[k].status);
        if (!strcmp(checks[k].status, "not_run")) cJSON_AddNullToObject(c, "passed");
        else cJSON_AddBoolToObject(c, "passed", !strcmp(checks[k].status, "pass"));
        cJSON_AddStringToObject(c, "rule", checks[k].rule);
        if (checks[k].numbers) cJSON_AddItemToObject(c, "numbers", checks[k].numbers);
        else cJSON_AddNullToObject(c, "numbers");
    }
    return ck;
}

/* The rules' constants (summary.json "rules"). */
static cJSON *rules_json(void) {
    cJSON *r = cJSON_CreateObject();
    add_num(r, "sigmas", CHECK_SIGMAS);
    add_num(r, "icl_fall_min", CHECK_ICL_FALL_MIN);
    add_num(r, "window_max_vs_training_before", CHECK_WINDOW_MAX_VS_BEFORE);
    add_num(r, "pm_high", CHECK_PM_HIGH);
    add_num(r, "pm_rise_inside_window", CHECK_PM_RISE_INSIDE);
    add_num(r, "icl_below_control", CHECK_ICL_BELOW_CONTROL);
    add_num(r, "pm_one_layer_max", CHECK_PM_ONE_LAYER_MAX);
    add_num(r, "icl_one_layer_abs", CHECK_ICL_ONE_LAYER_ABS);
    add_num(r, "ablation_most", CHECK_ABLATION_MOST);
    add_num(r, "ablation_other_max", CHECK_ABLATION_OTHER_MAX);
    add_num(r, "pm_min_change", CHECK_PM_MIN_CHANGE);
    return r;
}

/* phase-change --judge SUMMARY.json: the checks decided on the file's "models"; prints
 * {"rules": …, "checks": …} on stdout; exit 0, or 2 for an unreadable file. */
static int judge_file(const char *path) {
    char *text = read_file(path, NULL);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *models = cJSON_GetObjectItemCaseSensitive(root, "models");
    if (!cJSON_IsObject(models)) {
        fprintf(stderr, "phase-change: --judge: %s is not a summary with a \"models\" object\n",
                path);
        cJSON_Delete(root);
        return 2;
    }
    check c[4];
    judge(models, c);
    cJSON *out = cJSON_CreateObject();
    cJSON_AddItemToObject(out, "rules", rules_json());
    cJSON_AddItemToObject(out, "checks", checks_json(c));
    char *js = cJSON_Print(out);
    printf("%s\n", js);
    free(js);
    cJSON_Delete(out);
    cJSON_Delete(root);
    return 0;
}

/* The curriculum as the report states it. */
static const char *curriculum_line(const options *o, uint32_t T) {
    static char line[256];
    uint32_t hi = o->repeat_max < T / 2 ? o->repeat_max : T / 2;
    snprintf(line, sizeof line,
             "training curriculum: %g of training windows carry a repeated span of %u..%u "
             "tokens (evaluation: untouched held-out text)",
             o->repeat_fraction, o->repeat_min, hi);
    return line;
}

/* Markdown report (also printed at the end). */
static char *markdown(shared *sh, const check *c, const char *dir) {
    size_t cap = 1 << 16, off = 0;
    char *b = xcalloc(cap, 1);
#define MD(...)                                                                    \
    do {                                                                           \
        int n_ = snprintf(b + off, cap - off, __VA_ARGS__);                        \
        while (n_ >= 0 && (size_t)n_ >= cap - off) {                               \
            cap *= 2;                                                              \
            b = realloc(b, cap);                                                   \
            if (!b) { fprintf(stderr, "phase-change: out of memory\n"); exit(1); } \
            n_ = snprintf(b + off, cap - off, __VA_ARGS__);                        \
        }                                                                          \
        off += (size_t)n_;                                                         \
    } while (0)
    const options *o = sh->o;
    MD("# Phase change on %s\n\n", o->text ? o->text : o->tokens);
    MD("d_model %u, %u heads of d_head %u, seq_len %u, batch %u, lr %g, warm-up %llu, %llu "
       "steps (%.3g M tokens per model), evaluation every %llu steps on %u sequences.\n\n",
       o->d_model, o->heads, head_width(o), sh->T, o->batch, o->lr, (unsigned long long)o->warmup,
       (unsigned long long)o->steps, (double)o->steps * o->batch * sh->T / 1e6,
       (unsigned long long)o->eval_every, sh->E);
    if (o->steps_1l != o->steps)
        MD("The 1-layer models train for %llu steps (%.3g M tokens), not %llu: they are the "
           "control and the smeared-key comparison, whose outcome is decided well before "
           "(docs/phase-change.md, \"The default run\"); the 2-layer models' ICL figures are "
           "compared with the control's at its end.\n\n",
           (unsigned long long)o->steps_1l, (double)o->steps_1l * o->batch * sh->T / 1e6,
           (unsigned long long)o->steps);
    if (o->positional == INDUCT_POS_SHORTFORMER && o->shortformer_layers == 1)
        MD("Positions (shortformer) enter the queries and keys of layer 0 only "
           "(`--shortformer-layers 1`; the ICL paper's small models have them in every "
           "layer): the 2-layer models can attend by position only in layer 0, where their "
           "previous-token head must then form.\n\n");
    else if (o->positional == INDUCT_POS_SHORTFORMER && o->shortformer_layers)
        MD("Positions (shortformer) enter the queries and keys of the first %u layers only "
           "(`--shortformer-layers`); models with no more layers than that have them in "
           "every layer.\n\n", o->shortformer_layers);
    if (o->repeat_fraction > 0) MD("%s\n\n", curriculum_line(o, sh->T));
    char hn[32], pct[64];
    MD("ICL scores: band estimator (loss averaged over ±%u tokens around tokens %u and %u), "
       "mean ± standard error by batch means. The figures the checks read come from the "
       "large evaluation: %u windows at distinct evenly spread offsets of the held-out text "
       "in %u groups; the ablations use %u windows in %u groups; the per-step curves %u "
       "windows.\n\n", o->icl_band, sh->early, sh->late, sh->big_groups * sh->big_per,
       sh->big_groups, sh->abl_groups * sh->abl_per, sh->abl_groups, sh->E);
    if (sh->d_win)
        MD("The phase-change windows come from the ICL score of the weights kept at every "
           "evaluation on %u windows in %u groups (bands only; a standard error about %.0f %% "
           "of the per-step curve's, whose sampling error would otherwise place the "
           "window).\n\n",
           sh->win_groups * sh->win_per, sh->win_groups,
           100.0 * sqrt((double)sh->E / ((double)sh->win_groups * sh->win_per)));
    for (size_t i = 0; i < sh->n_jobs; i++) {
        const job *j = &sh->jobs[i];
        if (!j->summary) continue;
        const cJSON *hd = cJSON_GetObjectItem(j->summary, "heads");
        MD("## %s (%u layer%s%s)\n\n", j->spec.name, j->spec.n_layers,
           j->spec.n_layers > 1 ? "s" : "", j->spec.smeared ? ", smeared keys" : "");
        const int deep = j->spec.n_layers > 1 || j->spec.smeared;
        MD("| measure | ours | ICL paper (Olsson et al. 2022) | Hoogland et al. 2024 (2 layers, "
           "d_model 256, BPE-5000) |\n|---|---|---|---|\n");
        if (j->window_found)
            MD("| phase-change window | steps %.0f–%.0f (%.3g–%.3g M tokens; %.0f%% of the run, "
               "%.2f× the training before it) | %s | %s |\n", j->w_start, j->w_end,
               j->w_start * o->batch * sh->T / 1e6, j->w_end * o->batch * sh->T / 1e6,
               100 * j->w_frac, j->w_start > 0 ? (j->w_end - j->w_start) / j->w_start : NAN,
               deep ? "a short window early in training (2.5–5 B tokens)" : "none (1 layer)",
               deep ? "induction heads form at steps 8.5 k–17.5 k of 50 k" : "none (1 layer)");
        else
            MD("| phase-change window | none found | %s | %s |\n",
               deep ? "a short window early in training (2.5–5 B tokens)" : "none (1 layer)",
               deep ? "induction heads form at steps 8.5 k–17.5 k of 50 k" : "none (1 layer)");
        MD("| ICL score before (step %.0f, %s evaluation) | %+.3f ± %.3f nats | near 0 | near 0 |\n",
           j->icl_before_step, j->window_found ? "large" : sh->d_win ? "window" : "per-step",
           j->icl_before,
           j->icl_before_se);
        MD("| ICL score after (final, large evaluation) | %+.3f ± %.3f nats | %s | %s |\n",
           j->icl_after, j->icl_after_se, deep ? "≈ −0.4 nats" : "≈ 0 (1 layer)",
           deep ? "≈ −0.2 nats (single tokens −0.12 … −0.16)" : "≈ 0.00 (1 layer)");
        if (j->window_found)
            MD("| ICL fall across the window | %+.3f ± %.3f nats | ≈ 0.4 nats | ≈ 0.2 nats |\n",
               j->icl_fall, j->icl_fall_se);
        MD("| ICL score at the last per-step evaluation (%u windows) | %+.3f ± %.3f nats | — | — |\n",
           sh->E, j->s.icl_ps[j->s.n - 1], j->ps_se);
        head_name(j->pm_head, o->heads, hn, sizeof hn);
        MD("| prefix matching, head %s, before → after (rise inside the window) | %.3f → %.3f "
           "(%s) | %s | %s |\n", hn, j->pm_head_before, j->pm_head_after,
           isfinite(j->pm_rise_inside) && j->pm_rise > 0
               ? (snprintf(pct, sizeof pct, "%.0f%% of %.3f", 100 * j->pm_rise_inside / j->pm_rise,
                           j->pm_rise), pct)
               : "no window",
           deep ? "near chance → well above 0.3" : "stays near chance",
           deep ? "rises during the induction-head stage" : "stays near chance");
        const char *lists[2] = {"induction", "previous_token_heads"};
        for (int k = 0; k < 2; k++) {
            const cJSON *arr = cJSON_GetObjectItem(hd, lists[k]), *x;
            MD("| %s heads | ", k ? "previous-token" : "induction");
            if (!cJSON_GetArraySize(arr)) MD("none");
            int first = 1;
            cJSON_ArrayForEach(x, arr) {
                MD("%s%s", first ? "" : ", ", x->valuestring);
                first = 0;
            }
            MD(" | %s | %s |\n", k ? "in the layer before the induction heads"
                                   : (deep ? "form in the window" : "none"),
               k ? "layer 0" : (deep ? "layer 1" : "none"));
        }
        const cJSON *bump = cJSON_GetObjectItem(cJSON_GetObjectItem(j->summary, "bump"), "bump");
        MD("| loss-curve bump in the window | %s | %s | %s |\n",
           cJSON_IsBool(bump) ? (cJSON_IsTrue(bump) ? "yes" : "no")
           : j->window_found  ? "undecided (no evaluation interval before or inside the window)"
                              : "undecided (no window)",
           deep ? "yes" : "none", deep ? "a plateau, then a drop" : "none");
        const cJSON *ab = cJSON_GetObjectItem(j->summary, "ablation");
        snprintf(pct, sizeof pct, "%.0f%%", 100 * j->frac_induction_pp);
        MD("| ICL score on the ablation evaluation (clean) | %+.3f ± %.3f nats | — | — |\n",
           j->icl_clean, j->icl_clean_se);
        if (isfinite(j->frac_induction))
            MD("| ICL removed by ablating the induction heads (zero / pattern-preserving) | "
               "%.0f%% (%.3f ± %.3f nats) / %s | most | — |\n", 100 * j->frac_induction,
               jnum(ab, "removed_by_induction_heads"), jnum(ab, "removed_by_induction_heads_se"),
               isfinite(j->frac_induction_pp) ? pct : "n/a (ICL score not negative)");
        else
            MD("| ICL removed by ablating the induction heads | n/a (%s) | most | — |\n",
               j->n_induction ? "ICL score not negative" : "no induction head");
        if (j->max_other_head_pp >= 0) {
            char hz[32] = "none";
            head_name(j->max_other_head_pp, o->heads, hn, sizeof hn);
            if (j->max_other_head >= 0) head_name(j->max_other_head, o->heads, hz, sizeof hz);
            MD("| most ICL removed by one other head: pattern-preserving / zero ablation | "
               "%.0f%% (%s) / %.0f%% (%s) | little | — |\n", 100 * j->max_other_frac_pp, hn,
               100 * j->max_other_frac, hz);
        }
        MD("| final eval loss | %.4f nats/token | — | — |\n", j->s.loss[j->s.n - 1]);
        MD("| wall time (training), throughput; large evaluation, ablations | %.1f s, %.0f "
           "tokens/s; %.1f s, %.1f s | — | — |\n\n", j->wall, j->tokens_per_second,
           j->eval_seconds_large, j->eval_seconds_ablation);
    }
    MD("## Checks\n\n| claim | model | result |\n|---|---|---|\n");
    for (int k = 0; k < 4; k++)
        MD("| %s | %s | **%s** |\n", c[k].claim, c[k].model,
           !strcmp(c[k].status, "pass") ? "PASS" : !strcmp(c[k].status, "fail") ? "FAIL"
                                                                                : "not run");
    MD("\nThe rules and the numbers each result was decided on are in summary.json "
       "(\"checks\") and docs/phase-change.md. A difference counts only when it exceeds "
       "%g standard errors. Where ours differ from the papers: our models are 4× narrower "
       "than Hoogland et al.'s (d_model %u against 256) and see %.3g M tokens each, against "
       "about 5 B (Hoogland et al.) and 10 B (the ICL paper); with %u tokens in the "
       "vocabulary a copied token saves fewer nats than with the paper's, so the rules ask "
       "for an ICL fall of 0.15 nats, not the paper's 0.4.\n\n", CHECK_SIGMAS, o->d_model,
       (double)o->steps * o->batch * sh->T / 1e6, induct_dataset_d_vocab(sh->d));
    MD("## Figures\n\n");
    const char *figs[5] = {"phase_change.png", "attention.png", "ablation.png", "pca.png",
                           "loss_by_position.png"};
    for (int k = 0; k < 5; k++) MD("- %s/%s\n", dir, figs[k]);
    MD("\n(drawn by /usr/bin/python3 %s/study/plot_phase_change.py %s; "
       "scripts/phase-change.sh runs it after the program)\n",
       PHASE_CHANGE_SOURCE_ROOT, dir);
#undef MD
    return b;
}

/* Merge the per-model logs into DIR/metrics.jsonl, each line starting with "model". */
static int merge_metrics(shared *sh, const char *dir) {
    size_t cap = 1 << 16, off = 0;
    char *out = xcalloc(cap, 1);
    for (size_t i = 0; i < sh->n_jobs; i++) {
        char *p = path_join(sh->jobs[i].dir, "metrics.jsonl");
        size_t len;
        char *text = read_file(p, &len);
        free(p);
        if (!text) { free(out); return -1; }
        char *save = NULL;
        for (char *line = strtok_r(text, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
            if (line[0] != '{') continue;
            size_t need = strlen(line) + strlen(sh->jobs[i].spec.name) + 32;
            while (off + need >= cap) {
                cap *= 2;
                out = realloc(out, cap);
                if (!out) { fprintf(stderr, "phase-change: out of memory\n"); exit(1); }
            }
            off += (size_t)snprintf(out + off, cap - off, "{\"model\":\"%s\"%s%s\n",
                                    sh->jobs[i].spec.name, line[1] == '}' ? "" : ",", line + 1);
        }
        free(text);
    }
    char *path = path_join(dir, "metrics.jsonl");
    int rc = write_atomic(path, out, off);
    free(path);
    free(out);
    return rc;
}

/* ======================================================================== */

/* The dataset of the options with `n_eval_windows` evaluation windows (exits on error). */
static void open_dataset(const options *o, uint32_t n_eval_windows, induct_dataset **d) {
    int rc;
    if (o->text) {
        induct_text_config tc;
        induct_text_config_init(&tc, sizeof tc);
        tc.n_eval_windows = n_eval_windows;
        tc.val_fraction = o->val_fraction;
        tc.block_tokens = o->block_tokens;
        tc.seed = o->data_seed;
        tc.bos = o->bos;
        if ((rc = induct_dataset_new_text_path(d, o->text, o->suffix, &tc)))
            lib_fail(rc, "reading the text");
    } else {
        induct_token_file_config tf;
        induct_token_file_config_init(&tf, sizeof tf);
        tf.format = o->format;
        tf.d_vocab = o->d_vocab;
        tf.n_eval_windows = n_eval_windows;
        tf.val_fraction = o->val_fraction;
        tf.block_tokens = o->block_tokens;
        tf.seed = o->data_seed;
        if ((rc = induct_dataset_new_token_file(d, o->tokens, NULL, &tf)))
            lib_fail(rc, "reading the token file");
    }
}

/* n windows in g groups of n / g (g ≤ n; at least 1 per group): the groups and the size. */
static void grouping(uint64_t n, uint32_t g, uint32_t *groups, uint32_t *per) {
    if (n < 1) n = 1;
    if (g > n) g = (uint32_t)n;
    if (g < 1) g = 1;
    *groups = g;
    *per = (uint32_t)(n / g);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--judge")) return judge_file(argv[2]);
    options o;
    parse_args(argc, argv, &o);
    model_spec specs[MAX_MODELS];
    size_t n_models = parse_models(o.models, &o, specs);

    /* ---- data ---- */
    induct_dataset *d = NULL, *d_big = NULL, *d_abl = NULL, *d_win = NULL;
    int rc;
    cJSON *data = cJSON_CreateObject();
    open_dataset(&o, o.eval_windows, &d);
    /* the curriculum changes the train split of the training dataset only; every
     * evaluation (the driver's per-step metrics, the large one, the ablations', the
     * previous-token score) reads eval splits, which it never changes */
    if ((rc = induct_dataset_set_repeats(d, o.repeat_fraction, o.repeat_min, o.repeat_max)))
        lib_fail(rc, "setting the repeated-span curriculum");
    /* the same text with more evaluation windows: the evaluation the checks read and the
     * ablations' (the split does not depend on the number of windows) */
    open_dataset(&o, o.icl_windows, &d_big);
    open_dataset(&o, o.ablation_windows, &d_abl);
    if (o.window_windows) open_dataset(&o, o.window_windows, &d_win);
    if (o.text) {
        cJSON_AddStringToObject(data, "kind", "text (bytes)");
        cJSON_AddStringToObject(data, "path", o.text);
        if (o.suffix) cJSON_AddStringToObject(data, "suffix", o.suffix);
        else cJSON_AddNullToObject(data, "suffix");
        cJSON_AddBoolToObject(data, "bos", o.bos);
    } else {
        static const char *const fmts[] = {"u16", "u32", "llmc"};
        cJSON_AddStringToObject(data, "kind", "token file");
        cJSON_AddStringToObject(data, "path", o.tokens);
        cJSON_AddStringToObject(data, "format", fmts[o.format]);
    }
    uint64_t n_train = 0, n_val = 0, n_windows = 0;
    if ((rc = induct_dataset_split_tokens(d, INDUCT_SPLIT_TRAIN, &n_train)) ||
        (rc = induct_dataset_split_tokens(d, INDUCT_SPLIT_EVAL, &n_val)))
        lib_fail(rc, "counting tokens");
    if ((rc = induct_dataset_window_count(d, INDUCT_SPLIT_EVAL, o.seq_len, &n_windows)))
        lib_fail(rc, "counting evaluation windows");
    if (n_train <= o.seq_len)
        bad_input("the train split has %llu tokens, fewer than --seq-len %u + 1",
                  (unsigned long long)n_train, o.seq_len);
    if (n_windows == 0)
        bad_input("the held-out split (%llu tokens) has no window of --seq-len %u: raise "
                  "--val-fraction or lower --block-tokens", (unsigned long long)n_val, o.seq_len);
    cJSON_AddNumberToObject(data, "d_vocab", induct_dataset_d_vocab(d));
    cJSON_AddNumberToObject(data, "train_tokens", (double)n_train);
    cJSON_AddNumberToObject(data, "eval_tokens", (double)n_val);
    cJSON_AddNumberToObject(data, "eval_windows", (double)n_windows);
    cJSON_AddNumberToObject(data, "eval_windows_requested", o.eval_windows);
    cJSON_AddNumberToObject(data, "val_fraction", o.val_fraction);
    cJSON_AddNumberToObject(data, "block_tokens", (double)o.block_tokens);
    cJSON_AddNumberToObject(data, "seed", (double)o.data_seed);

    /* ---- shared state ---- */
    shared sh;
    memset(&sh, 0, sizeof sh);
    sh.o = &o;
    sh.d = d;
    sh.T = o.seq_len;
    sh.E = o.eval_batch;
    sh.d_big = d_big;
    sh.d_abl = d_abl;
    uint64_t n_big = 0, n_abl = 0;
    if ((rc = induct_dataset_window_count(d_big, INDUCT_SPLIT_EVAL, o.seq_len, &n_big)) ||
        (rc = induct_dataset_window_count(d_abl, INDUCT_SPLIT_EVAL, o.seq_len, &n_abl)))
        lib_fail(rc, "counting evaluation windows");
    grouping(n_big, o.icl_groups, &sh.big_groups, &sh.big_per);
    grouping(n_abl, o.icl_groups, &sh.abl_groups, &sh.abl_per);
    grouping(sh.E, 8, &sh.ps_groups, &sh.ps_per);
    if (d_win) {
        uint64_t n_win = 0;
        if ((rc = induct_dataset_window_count(d_win, INDUCT_SPLIT_EVAL, o.seq_len, &n_win)))
            lib_fail(rc, "counting evaluation windows");
        sh.d_win = d_win;
        /* groups of 256 windows, as the large evaluation's (at least 2) */
        grouping(n_win, n_win >= 512 ? (uint32_t)(n_win / 256) : 2, &sh.win_groups, &sh.win_per);
    }
    {
        /* prefix-matching under uniform attention on the dataset's probe ([BOS] + 25 × 4,
         * the metric's): mean over queries p in repeats r = 2..4 of (r − 1)/(p + 1) */
        induct_probe_config pr;
        induct_probe_config_for_dataset(&pr, sizeof pr, d);
        double sum = 0;
        size_t cnt = 0;
        for (uint32_t r = 2; r <= pr.n_repeats; r++)
            for (uint32_t i = 0; i < pr.block_len; i++) {
                uint32_t p = (pr.bos >= 0) + (r - 1) * pr.block_len + i;
                sum += (double)(r - 1) / (double)(p + 1);
                cnt++;
            }
        sh.pm_chance = sum / (double)cnt;
    }
    /* tokens 500 and 50 when their ±icl_band bands fit; otherwise (only with
     * --allow-short) the last token whose band fits and a tenth of it */
    const int full_ctx = sh.T >= 501 + o.icl_band;
    if (!full_ctx && !o.allow_short)
        bad_input("--icl-band %u needs --seq-len >= %u for the bands around token 500 (or "
                  "--allow-short)", o.icl_band, 501 + o.icl_band);
    sh.icl_metric = full_ctx; /* the driver's icl_score is then of the same tokens */
    sh.late = full_ctx ? 500 : (sh.T > 1 + o.icl_band ? sh.T - 1 - o.icl_band : 1);
    sh.early = full_ctx ? 50 : (sh.late / 10 ? sh.late / 10 : 1);
    induct_eval_config_init(&sh.ec, sizeof sh.ec);
    sh.ec.n_seq = sh.E; /* the training driver's evaluation set: batch 0 of the eval split */
    sh.ec.seq_len = sh.T;
    sh.ec.chunk = sh.E < 8 ? sh.E : 8;
    sh.ec.split = INDUCT_SPLIT_EVAL;
    sh.ec.batch_index = 0;
    sh.ec.early = sh.early;
    sh.ec.late = sh.late;
    sh.ec.pos_seed = 0; /* the driver's loss_vectors positions */
    if (o.icl_band >= sh.early || sh.late - 1 + o.icl_band > sh.T - 2)
        bad_input("--icl-band %u does not fit: the bands around tokens %u and %u need "
                  "--icl-band < %u and <= %u", o.icl_band, sh.early, sh.late, sh.early,
                  sh.T - 1 - sh.late);
    sh.tty = isatty(2);
    pthread_mutex_init(&sh.mu, NULL);
    sh.n_jobs = n_models;
    sh.jobs = xcalloc(n_models, sizeof(job));
    /* longest first: more layers first, smeared before plain at equal depth; stable */
    size_t order[MAX_MODELS];
    for (size_t i = 0; i < n_models; i++) order[i] = i;
    for (size_t i = 1; i < n_models; i++)
        for (size_t k = i; k > 0; k--) {
            const model_spec *a = &specs[order[k - 1]], *b = &specs[order[k]];
            if (b->n_layers > a->n_layers ||
                (b->n_layers == a->n_layers && b->smeared > a->smeared)) {
                size_t t = order[k];
                order[k] = order[k - 1];
                order[k - 1] = t;
            }
        }
    if (mkdir_p(o.out)) {
        fprintf(stderr, "phase-change: cannot create --out '%s': %s\n", o.out, strerror(errno));
        return 1;
    }
    for (size_t i = 0; i < n_models; i++) {
        job *j = &sh.jobs[i];
        j->spec = specs[order[i]];
        j->sh = &sh;
        j->dir = path_join(o.out, j->spec.name);
        j->last_eval_loss = j->last_icl = NAN;
        j->pm_head = 0;
    }

    /* ---- configuration and estimate ---- */
    const double tok_model = (double)o.steps * o.batch * sh.T;
    double tok_all = 0;
    for (size_t i = 0; i < n_models; i++) tok_all += (double)specs[i].steps * o.batch * sh.T;
    printf("phase-change (libinduct %s)\n", induct_version_string());
    printf("data: %s%s%s: %llu train tokens, %llu held out, d_vocab %u; evaluation set: %u of "
           "%llu fixed windows of %u tokens, spread over the held-out text\n", o.text ? o.text : o.tokens,
           o.suffix ? " *" : "", o.suffix ? o.suffix : "", (unsigned long long)n_train,
           (unsigned long long)n_val, induct_dataset_d_vocab(d), sh.E,
           (unsigned long long)n_windows, sh.T);
    printf("models: %s — attention-only, d_model %u, %u heads of d_head %u, n_ctx %u, LN %s, "
           "positions %s%s (%s init), init %s, seed %llu\n", o.models, o.d_model, o.heads,
           head_width(&o), sh.T,
           o.ln ? "on" : "off",
           o.positional == INDUCT_POS_SHORTFORMER ? "shortformer"
           : o.positional == INDUCT_POS_STANDARD  ? "standard" : "none",
           o.positional != INDUCT_POS_SHORTFORMER || !o.shortformer_layers ? ""
           : o.shortformer_layers == 1 ? " in layer 0's queries and keys only"
                                       : " in the queries and keys of the first --shortformer-layers layers only",
           o.pos_init == POS_INIT_SINUSOIDAL ? "sinusoidal" : "random",
           o.init == INDUCT_INIT_TORCH ? "torch" : "gpt2", (unsigned long long)o.seed);
    printf("training: AdamW lr %g, warm-up %llu, %s schedule, batch %u, %llu steps = %.3g M "
           "tokens per model (%.3g M in all); evaluation every %llu steps; ICL score = loss of "
           "token %u − token %u (each averaged over ±%u tokens)\n", o.lr,
           (unsigned long long)o.warmup, o.cosine ? "cosine" : "constant", o.batch,
           (unsigned long long)o.steps, tok_model / 1e6, tok_all / 1e6,
           (unsigned long long)o.eval_every, sh.late, sh.early, o.icl_band);
    if (o.steps_1l != o.steps)
        printf("          1-layer models: %llu steps = %.3g M tokens (--steps-1l)\n",
               (unsigned long long)o.steps_1l, (double)o.steps_1l * o.batch * sh.T / 1e6);
    if (o.repeat_fraction > 0) printf("%s\n", curriculum_line(&o, sh.T));
    printf("running: %u job%s at once, %u thread%s per model, output in %s\n", o.jobs,
           o.jobs > 1 ? "s" : "", o.threads, o.threads > 1 ? "s" : "", o.out);
    if (o.estimate) {
        /* time two training steps of each model on a throwaway copy (the second counts);
         * a model's run = steps x (its step + its evaluations: one forward pass of the
         * evaluation set, about a third of a step per token, every eval_every steps);
         * the jobs go to the first free slot in order, as the workers take them */
        double slot[64] = {0}, t_first = 0;
        uint32_t par = o.jobs < n_models ? o.jobs : (uint32_t)n_models;
        if (par > 64) par = 64;
        for (size_t i = 0; i < n_models && !rc; i++) {
            induct_model *m = NULL;
            induct_optimizer *op = NULL;
            if ((rc = make_model(&o, &sh.jobs[i].spec, induct_dataset_d_vocab(d), &m, &op)))
                lib_fail(rc, "creating the model");
            double t1 = 0;
            for (int k = 0; k < 2 && !rc; k++) {
                double ts = now();
                rc = induct_train_step(op, d, o.batch, sh.T, NULL);
                t1 = now() - ts;
            }
            induct_optimizer_free(op);
            induct_model_free(m);
            if (rc) lib_fail(rc, "timing a training step");
            if (i == 0) t_first = t1;
            double run = (double)sh.jobs[i].spec.steps * t1 *
                         (1.0 + (double)sh.E / (3.0 * (double)o.batch * (double)o.eval_every));
            /* + the large evaluation (final model and the point before a window) and the
             * ablations (2 × (clean + each head + the induction heads) passes) */
            const double nh = (double)sh.jobs[i].spec.n_layers * o.heads;
            run += t1 * (2.0 * sh.big_groups * sh.big_per +
                         2.0 * (nh + 2.0) * sh.abl_groups * sh.abl_per) / (3.0 * o.batch);
            /* + the window evaluation of every kept evaluation (bands only: ~half a pass) */
            run += t1 * 0.5 * (double)(sh.jobs[i].spec.steps / o.eval_every + 2) *
                   (double)sh.win_groups * sh.win_per / (3.0 * o.batch);
            uint32_t k = 0;
            for (uint32_t q = 1; q < par; q++)
                if (slot[q] < slot[k]) k = q;
            slot[k] += run;
        }
        double total = 0;
        for (uint32_t q = 0; q < par; q++)
            if (slot[q] > total) total = slot[q];
        char est[32];
        fmt_duration(total, est, sizeof est);
        printf("estimate: %.0f ms per step of %s; about %s for training and evaluation, plus "
               "the final analysis (rough: assumes %u free core%s per job)\n", t_first * 1e3,
               sh.jobs[0].spec.name, est, o.threads, o.threads > 1 ? "s" : "");
    }
    fflush(stdout);

    /* ---- train ---- */
    cli_signals_catch();
    sh.t0 = now();
    cli_progress_start(&sh.bar);
    uint32_t n_threads = o.jobs < n_models ? o.jobs : (uint32_t)n_models;
    pthread_t th[MAX_MODELS];
    for (uint32_t t = 0; t < n_threads; t++)
        if (pthread_create(&th[t], NULL, worker, &sh)) {
            fprintf(stderr, "phase-change: cannot start a thread\n");
            return 1;
        }
    for (uint32_t t = 0; t < n_threads; t++) pthread_join(th[t], NULL);
    cli_signals_restore();
    if (sh.tty) {
        draw_progress(&sh, 1);
        end_progress_line(&sh);
    }
    double total_wall = now() - sh.t0;
    int failed = 0;
    for (size_t i = 0; i < n_models; i++)
        if (sh.jobs[i].rc) {
            fprintf(stderr, "phase-change: %s\n", sh.jobs[i].err);
            failed = 1;
        }
    if (failed) {
        /* a Ctrl-C that came after every model had finished does not discard the run */
        if (g_stop) {
            fprintf(stderr, "phase-change: interrupted; snapshots so far are in %s/<model>/\n",
                    o.out);
            return CLI_EXIT_INTERRUPTED;
        }
        return 1;
    }

    /* ---- PCA of the per-token loss vectors of every evaluation of every model ---- */
    cJSON *pca = cJSON_CreateObject();
    size_t rows = 0;
    for (size_t i = 0; i < n_models; i++) rows += sh.jobs[i].n_ev;
    if (rows >= 2 && sh.E >= 2 && rows <= UINT32_MAX) {
        float *x = xcalloc(rows * sh.E, sizeof *x), *scores = xcalloc(rows * 2, sizeof *scores);
        size_t r = 0;
        for (size_t i = 0; i < n_models; i++) {
            memcpy(x + r * sh.E, sh.jobs[i].ev_vec, sh.jobs[i].n_ev * sh.E * sizeof *x);
            r += sh.jobs[i].n_ev;
        }
        double var[2], total = 0;
        if ((rc = induct_analysis_pca(x, (uint32_t)rows, sh.E, 2, scores, rows * 2, NULL, 0, var,
                                      2, &total)))
            lib_fail(rc, "PCA of the per-token loss vectors");
        cJSON *ev = cJSON_AddArrayToObject(pca, "explained_variance");
        cJSON *er = cJSON_AddArrayToObject(pca, "explained_variance_ratio");
        for (int k = 0; k < 2; k++) {
            cJSON_AddItemToArray(ev, num(var[k]));
            cJSON_AddItemToArray(er, num(total > 0 ? var[k] / total : NAN));
        }
        add_num(pca, "total_variance", total);
        cJSON_AddNumberToObject(pca, "n_rows", (double)rows);
        cJSON_AddNumberToObject(pca, "n_cols", sh.E);
        cJSON_AddStringToObject(pca, "rows",
            "one per evaluation of every model: the loss of each evaluation sequence at its "
            "fixed random position (the training log's loss_vectors: induct_analysis_loss_vectors "
            "with pos_seed 0)");
        r = 0;
        for (size_t i = 0; i < n_models; i++) {
            job *j = &sh.jobs[i];
            cJSON *tr = cJSON_CreateArray();
            for (size_t e = 0; e < j->n_ev; e++, r++) {
                cJSON *pt = cJSON_CreateObject();
                cJSON_AddNumberToObject(pt, "step", (double)j->ev_step[e]);
                cJSON_AddNumberToObject(pt, "tokens", (double)j->ev_step[e] * o.batch * sh.T);
                add_num(pt, "pc1", scores[r * 2]);
                add_num(pt, "pc2", scores[r * 2 + 1]);
                cJSON_AddItemToArray(tr, pt);
            }
            cJSON_AddItemToObject(j->summary, "pca_trajectory", tr);
        }
        free(x);
        free(scores);
    } else {
        cJSON_AddStringToObject(pca, "skipped", "needs at least 2 evaluations and --eval-batch >= 2");
        for (size_t i = 0; i < n_models; i++)
            cJSON_AddItemToObject(sh.jobs[i].summary, "pca_trajectory", cJSON_CreateArray());
    }

    /* ---- summary.json ---- */
    check checks[4];
    {
        cJSON *mods = cJSON_CreateObject();
        for (size_t i = 0; i < n_models; i++)
            cJSON_AddItemReferenceToObject(mods, sh.jobs[i].spec.name, sh.jobs[i].summary);
        judge(mods, checks);
        cJSON_Delete(mods);
    }
    cJSON *root = cJSON_CreateObject();
    cJSON *cfg = cJSON_AddObjectToObject(root, "config");
    cJSON_AddStringToObject(cfg, "library_version", induct_version_string());
    cJSON_AddItemToObject(cfg, "data", data);
    cJSON *mcfg = cJSON_AddObjectToObject(cfg, "model");
    cJSON_AddStringToObject(mcfg, "models", o.models);
    cJSON_AddNumberToObject(mcfg, "d_model", o.d_model);
    cJSON_AddNumberToObject(mcfg, "n_heads", o.heads);
    cJSON_AddNumberToObject(mcfg, "d_head", head_width(&o));
    cJSON_AddNumberToObject(mcfg, "d_mlp", 0);
    cJSON_AddNumberToObject(mcfg, "n_ctx", sh.T);
    cJSON_AddNumberToObject(mcfg, "layer_norm", o.ln);
    cJSON_AddStringToObject(mcfg, "positional",
                            o.positional == INDUCT_POS_SHORTFORMER ? "shortformer"
                            : o.positional == INDUCT_POS_STANDARD  ? "standard" : "none");
    if (o.positional == INDUCT_POS_SHORTFORMER)
        cJSON_AddNumberToObject(mcfg, "shortformer_layers", o.shortformer_layers);
    cJSON_AddStringToObject(mcfg, "init", o.init == INDUCT_INIT_TORCH ? "torch" : "gpt2");
    add_num(mcfg, "init_std", o.init_std);
    cJSON_AddStringToObject(mcfg, "pos_init",
                            o.pos_init == POS_INIT_SINUSOIDAL ? "sinusoidal" : "random");
    add_num(mcfg, "pos_amp", o.pos_init == POS_INIT_SINUSOIDAL ? o.pos_amp : NAN);
    add_num(mcfg, "smear_alpha_init", o.smear_alpha);
    cJSON_AddNumberToObject(mcfg, "seed", (double)o.seed);
    cJSON *tcfg = cJSON_AddObjectToObject(cfg, "training");
    cJSON_AddStringToObject(tcfg, "optimizer", "adamw");
    add_num(tcfg, "lr", o.lr);
    cJSON_AddNumberToObject(tcfg, "warmup_steps", (double)o.warmup);
    add_num(tcfg, "weight_decay", o.weight_decay);
    add_num(tcfg, "grad_clip", o.grad_clip);
    cJSON_AddStringToObject(tcfg, "schedule", o.cosine ? "cosine" : "constant");
    add_num(tcfg, "min_lr_ratio", o.min_lr_ratio);
    cJSON_AddNumberToObject(tcfg, "batch", o.batch);
    cJSON_AddNumberToObject(tcfg, "seq_len", sh.T);
    cJSON_AddNumberToObject(tcfg, "steps", (double)o.steps);
    cJSON_AddNumberToObject(tcfg, "steps_1l", (double)o.steps_1l);
    cJSON_AddNumberToObject(tcfg, "tokens_per_step", (double)o.batch * sh.T);
    cJSON_AddNumberToObject(tcfg, "tokens_per_model", tok_model);
    {
        cJSON *cur = cJSON_AddObjectToObject(tcfg, "curriculum");
        cJSON_AddStringToObject(cur, "kind", o.repeat_fraction > 0 ? "repeated_span" : "none");
        cJSON_AddNumberToObject(cur, "repeat_fraction", o.repeat_fraction);
        cJSON_AddNumberToObject(cur, "repeat_min_len", o.repeat_min);
        cJSON_AddNumberToObject(cur, "repeat_max_len", o.repeat_max);
        cJSON_AddNumberToObject(cur, "repeat_max_len_effective",
                                o.repeat_max < sh.T / 2 ? o.repeat_max : sh.T / 2);
        cJSON_AddStringToObject(cur, "applies_to",
                                "training windows only (their train loss included); every "
                                "evaluation is on untouched held-out text");
        cJSON_AddStringToObject(cur, "source", "Sabry & Belz 2025");
    }
    cJSON_AddStringToObject(tcfg, "note", "null weight_decay / grad_clip / init_std / "
                                          "smear_alpha_init mean the library default");
    cJSON *ecfg = cJSON_AddObjectToObject(cfg, "evaluation");
    cJSON_AddNumberToObject(ecfg, "eval_every", (double)o.eval_every);
    cJSON_AddNumberToObject(ecfg, "eval_batch", sh.E);
    add_num(ecfg, "eval_set_fraction_of_windows",
            n_windows ? fmin(1.0, (double)sh.E / (double)n_windows) : NAN);
    cJSON_AddNumberToObject(ecfg, "icl_early_token", sh.early);
    cJSON_AddNumberToObject(ecfg, "icl_late_token", sh.late);
    cJSON_AddNumberToObject(ecfg, "pos_seed", 0); /* the driver's loss_vectors positions */
    cJSON_AddNumberToObject(ecfg, "smooth", o.smooth);
    cJSON_AddNumberToObject(ecfg, "icl_band", o.icl_band);
    cJSON_AddNumberToObject(ecfg, "snapshots", o.snapshots);
    add_num(ecfg, "prefix_matching_chance", sh.pm_chance);
    {
        /* the evaluation the checks read and the ablations' */
        const uint64_t disjoint = n_val > 0 ? (n_val - 1) / sh.T : 0;
        cJSON *lg = cJSON_AddObjectToObject(ecfg, "large");
        cJSON_AddNumberToObject(lg, "windows_requested", o.icl_windows);
        cJSON_AddNumberToObject(lg, "windows", (double)sh.big_groups * sh.big_per);
        cJSON_AddNumberToObject(lg, "groups", sh.big_groups);
        cJSON_AddNumberToObject(lg, "windows_per_group", sh.big_per);
        cJSON_AddNumberToObject(lg, "disjoint_windows_in_held_out_text", (double)disjoint);
        cJSON_AddBoolToObject(lg, "windows_overlap", (double)sh.big_groups * sh.big_per > (double)disjoint);
        cJSON_AddStringToObject(lg, "windows_rule",
            "evenly spread starts over the held-out text (distinct offsets; they overlap when "
            "there are more than the disjoint ones); group g = windows g*per .. g*per+per-1, "
            "one stretch of the text; standard error = sd of the group means / sqrt(groups)");
        cJSON *ab = cJSON_AddObjectToObject(ecfg, "ablation");
        cJSON_AddNumberToObject(ab, "windows_requested", o.ablation_windows);
        cJSON_AddNumberToObject(ab, "windows", (double)sh.abl_groups * sh.abl_per);
        cJSON_AddNumberToObject(ab, "groups", sh.abl_groups);
        cJSON_AddNumberToObject(ab, "windows_per_group", sh.abl_per);
        cJSON_AddBoolToObject(ab, "windows_overlap", (double)sh.abl_groups * sh.abl_per > (double)disjoint);
        cJSON *ps = cJSON_AddObjectToObject(ecfg, "per_step");
        cJSON_AddNumberToObject(ps, "windows", sh.E);
        cJSON_AddNumberToObject(ps, "se_groups", sh.ps_groups);
        cJSON_AddNumberToObject(ps, "se_windows_per_group", sh.ps_per);
        cJSON *wv = cJSON_AddObjectToObject(ecfg, "window");
        cJSON_AddNumberToObject(wv, "windows_requested", o.window_windows);
        cJSON_AddNumberToObject(wv, "windows", (double)sh.win_groups * sh.win_per);
        cJSON_AddNumberToObject(wv, "groups", sh.win_groups);
        cJSON_AddStringToObject(wv, "series",
                                sh.d_win ? "the window rule reads the band ICL score of the "
                                           "weights kept at every evaluation on these windows"
                                         : "--window-windows 0: the window rule reads the "
                                           "per-step curve");
    }
    cJSON *rcfg = cJSON_AddObjectToObject(cfg, "run");
    cJSON_AddNumberToObject(rcfg, "threads_per_model", o.threads);
    cJSON_AddNumberToObject(rcfg, "jobs", o.jobs);
    add_num(rcfg, "wall_seconds", total_wall);
    cJSON_AddItemToObject(root, "rules", rules_json());
    cJSON *order_arr = cJSON_AddArrayToObject(root, "model_order");
    cJSON *models = cJSON_AddObjectToObject(root, "models");
    for (size_t i = 0; i < n_models; i++) {
        cJSON_AddItemToArray(order_arr, cJSON_CreateString(sh.jobs[i].spec.name));
        cJSON_AddItemToObject(models, sh.jobs[i].spec.name, sh.jobs[i].summary);
        sh.jobs[i].summary = cJSON_Duplicate(sh.jobs[i].summary, 1); /* kept for markdown */
    }
    cJSON_AddItemToObject(root, "pca", pca);
    cJSON_AddItemToObject(root, "checks", checks_json(checks));
    cJSON *figs = cJSON_AddArrayToObject(root, "figures");
    const char *fig_names[5] = {"phase_change.png", "attention.png", "ablation.png", "pca.png",
                                "loss_by_position.png"};
    for (int k = 0; k < 5; k++) cJSON_AddItemToArray(figs, cJSON_CreateString(fig_names[k]));
    /* the plot's repeated passage: the first 40 tokens of evaluation window 0, twice */
    {
        int32_t *tok = xcalloc(sh.T, sizeof *tok);
        if ((rc = induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, 1, sh.T, tok, sh.T, NULL, 0)))
            lib_fail(rc, "reading an evaluation window");
        cJSON *rp = cJSON_AddArrayToObject(root, "attention_probe_tokens");
        for (int k = 0; k < 80; k++) cJSON_AddItemToArray(rp, cJSON_CreateNumber(tok[k % 40]));
        free(tok);
    }
    char *json = cJSON_Print(root);
    char *sp = path_join(o.out, "summary.json");
    if (!json || write_atomic(sp, json, strlen(json)) ||
        merge_metrics(&sh, o.out)) {
        fprintf(stderr, "phase-change: cannot write the results into %s: %s\n", o.out,
                strerror(errno));
        return 1;
    }
    free(sp);
    free(json);
    char *md = markdown(&sh, checks, o.out);
    char *mp = path_join(o.out, "summary.md");
    if (write_atomic(mp, md, strlen(md))) {
        fprintf(stderr, "phase-change: cannot write %s: %s\n", mp, strerror(errno));
        return 1;
    }
    printf("\n%s\nrun directory: %s (summary.json, summary.md, metrics.jsonl, <model>/)\n", md,
           o.out);
    free(md);
    free(mp);

    cJSON_Delete(root);
    for (size_t i = 0; i < n_models; i++) {
        job *j = &sh.jobs[i];
        cJSON_Delete(j->summary);
        induct_optimizer_free(j->o);
        induct_model_free(j->m);
        free(j->dir);
        free(j->ev_step);
        free(j->ev_vec);
        free(j->ev_icl);
        free(j->ev_icl_band);
        for (size_t e = 0; e < j->n_ev; e++) induct_model_free(j->ev_model[e]);
        free(j->ev_model);
        free(j->avg_buf);
        free(j->log_path);
        free(j->s.step);
        free(j->s.tokens);
        free(j->s.loss);
        free(j->s.icl);
        free(j->s.icl_token);
        free(j->s.icl_se);
        free(j->s.icl_ps);
        free(j->s.pm);
        free(j->s.pt);
    }
    free(sh.jobs);
    induct_dataset_free(d);
    induct_dataset_free(d_big);
    induct_dataset_free(d_win);
    induct_dataset_free(d_abl);
    pthread_mutex_destroy(&sh.mu);
    return 0;
}
