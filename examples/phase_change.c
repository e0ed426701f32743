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
    /* models */
    const char *models;      /* --models 2L,1L,1L-smeared (2L-smeared too with --full) */
    uint32_t d_model;        /* --d-model */
    uint32_t heads;          /* --heads */
    uint32_t seq_len;        /* --seq-len (= n_ctx) */
    int allow_short;         /* --allow-short: permit seq_len < 512 (quick tests) */
    uint32_t ln;             /* --ln 0|1 */
    uint32_t positional;     /* --positional shortformer|standard|none */
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
    /* measurement */
    uint64_t eval_every;     /* --eval-every */
    uint32_t eval_batch;     /* --eval-batch: sequences of the evaluation set */
    uint32_t smooth;         /* --smooth: moving average of the window rule (odd) */
    uint32_t icl_band;       /* --icl-band W: ICL estimator averages L over ±W tokens (0 = single tokens) */
    uint32_t snapshots;      /* --snapshots N: periodic checkpoints (every steps/N) */
    double thr_induction;    /* --induction-threshold (prefix matching); NAN = library default */
    double thr_previous;     /* --previous-token-threshold; NAN = library default */
    double thr_duplicate;    /* --duplicate-threshold; NAN = library default */
    /* execution */
    uint32_t threads;        /* --threads: OpenMP threads per model */
    uint32_t jobs;           /* --jobs: models trained at once */
    const char *out;         /* --out DIR */
    int estimate;            /* --no-estimate turns the up-front timing off */
} options;

static const options DEFAULTS = {
    .text = NULL, .suffix = NULL, .tokens = NULL, .format = INDUCT_TOKFILE_U16, .d_vocab = 0,
    .eval_windows = 1024, .data_seed = 0, .val_fraction = 0.1, .block_tokens = 65536, .bos = 0,
    .models = "2L,1L,1L-smeared", .d_model = 64, .heads = 4, .seq_len = 512, .allow_short = 0,
    .ln = 1, .positional = INDUCT_POS_SHORTFORMER, .init = INDUCT_INIT_GPT2, .init_std = NAN,
    .pos_init = POS_INIT_SINUSOIDAL, .pos_amp = 3.0, .smear_alpha = NAN, .seed = 0,
    .batch = 8, .lr = 1e-2, .warmup = 200, .weight_decay = NAN, .grad_clip = NAN,
    .cosine = 0, .min_lr_ratio = 0.0, .steps = 1200,
    .eval_every = 100, .eval_batch = 256, .smooth = 3, .icl_band = 5, .snapshots = 4,
    .thr_induction = NAN, .thr_previous = NAN, .thr_duplicate = NAN,
    .threads = 1, .jobs = 2, .out = "phase-change-run", .estimate = 1,
};

/* ======================================================================== */
/* Decision rules of the four checks (docs/phase-change.md, "Checks"). */

/* The paper's ICL-score magnitude before the phase change (nats). */
#define CHECK_ICL_BEFORE_MAX 0.15
/* "Clearly above" 0.15: the final ICL score must be ≤ −this (nats). */
#define CHECK_ICL_AFTER_MIN 0.25
/* "Short compared to the run": (window end − start) / steps ≤ this. */
#define CHECK_WINDOW_MAX_FRACTION 0.25
/* "Near chance": the head's prefix-matching score at the pre-window point ≤ this
 * (uniform attention on the probe scores ≈ 0.03; the exact value is in summary.json
 * as prefix_matching_chance). */
#define CHECK_PM_NEAR_CHANCE 0.10
/* "Well above 0.3": the head's final prefix-matching score must exceed this. */
#define CHECK_PM_HIGH 0.30
/* Smallest change of a prefix-matching series that counts as a window. */
#define CHECK_PM_MIN_CHANGE 0.10
/* "Removes most": (icl_clean − icl_ablated) / icl_clean ≥ this. */
#define CHECK_ABLATION_MOST 0.50

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
        "models:   --models LIST (%s; names <n>L or <n>L-smeared)  --d-model N (%u)  --heads N (%u)\n"
        "          --seq-len N (%u; >= 512 unless --allow-short)  --ln 0|1 (%u)\n"
        "          --positional shortformer|standard|none (shortformer)  --init gpt2|torch (gpt2)\n"
        "          --init-std X (library default)  --pos-init random|sinusoidal (%s)\n"
        "          --pos-amp X (%g)  --smear-alpha-init X (library default)  --seed N (%llu)\n"
        "training: --batch N (%u)  --lr X (%g)  --warmup N (%llu)  --weight-decay X (library default)\n"
        "          --grad-clip X (library default)  --schedule constant|cosine (constant)\n"
        "          --min-lr-ratio X (%g)  --steps N (%llu)\n"
        "measure:  --eval-every N (%llu)  --eval-batch N (%u)  --smooth N (%u, odd)\n"
        "          --icl-band W (%u; ICL averages the loss over +-W tokens, 0 = single tokens)\n"
        "          --snapshots N (%u; checkpoints every steps/N, 0 = none; final.safetensors always)\n"
        "          --induction-threshold X  --previous-token-threshold X  --duplicate-threshold X\n"
        "          (head classes; library defaults)\n"
        "run:      --threads N per model (%u)  --jobs N models at once (%u)  --out DIR (%s)\n"
        "          --no-estimate  --allow-short  --help\n"
        "See docs/phase-change.md.\n",
        prog, DEFAULTS.eval_windows, (unsigned long long)DEFAULTS.data_seed, DEFAULTS.val_fraction,
        (unsigned long long)DEFAULTS.block_tokens, DEFAULTS.bos, DEFAULTS.models, DEFAULTS.d_model,
        DEFAULTS.heads, DEFAULTS.seq_len, DEFAULTS.ln,
        DEFAULTS.pos_init == POS_INIT_SINUSOIDAL ? "sinusoidal" : "random", DEFAULTS.pos_amp,
        (unsigned long long)DEFAULTS.seed, DEFAULTS.batch, DEFAULTS.lr,
        (unsigned long long)DEFAULTS.warmup, DEFAULTS.min_lr_ratio,
        (unsigned long long)DEFAULTS.steps, (unsigned long long)DEFAULTS.eval_every,
        DEFAULTS.eval_batch, DEFAULTS.smooth,
        DEFAULTS.icl_band, DEFAULTS.snapshots, DEFAULTS.threads, DEFAULTS.jobs, DEFAULTS.out);
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
} model_spec;

/* "2L,1L,1L-smeared" → specs. */
static size_t parse_models(const char *list, model_spec *out) {
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
    {"models", required_argument, 0, 0}, {"d-model", required_argument, 0, 0},
    {"heads", required_argument, 0, 0}, {"seq-len", required_argument, 0, 0},
    {"ln", required_argument, 0, 0}, {"positional", required_argument, 0, 0},
    {"init", required_argument, 0, 0}, {"init-std", required_argument, 0, 0},
    {"pos-init", required_argument, 0, 0}, {"pos-amp", required_argument, 0, 0},
    {"smear-alpha-init", required_argument, 0, 0}, {"seed", required_argument, 0, 0},
    {"batch", required_argument, 0, 0}, {"lr", required_argument, 0, 0},
    {"warmup", required_argument, 0, 0}, {"weight-decay", required_argument, 0, 0},
    {"grad-clip", required_argument, 0, 0}, {"schedule", required_argument, 0, 0},
    {"min-lr-ratio", required_argument, 0, 0}, {"steps", required_argument, 0, 0},
    {"eval-every", required_argument, 0, 0}, {"eval-batch", required_argument, 0, 0},
    {"smooth", required_argument, 0, 0}, {"icl-band", required_argument, 0, 0},
    {"snapshots", required_argument, 0, 0}, {"threads", required_argument, 0, 0},
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
        else if (!strcmp(a, "--models")) o->models = v;
        else if (!strcmp(a, "--d-model")) o->d_model = (uint32_t)parse_u64(a, v, 1, 1 << 16);
        else if (!strcmp(a, "--heads")) o->heads = (uint32_t)parse_u64(a, v, 1, 1024);
        else if (!strcmp(a, "--seq-len")) o->seq_len = (uint32_t)parse_u64(a, v, 2, 1 << 20);
        else if (!strcmp(a, "--ln")) o->ln = (uint32_t)parse_u64(a, v, 0, 1);
        else if (!strcmp(a, "--positional")) {
            if (!strcmp(v, "shortformer")) o->positional = INDUCT_POS_SHORTFORMER;
            else if (!strcmp(v, "standard")) o->positional = INDUCT_POS_STANDARD;
            else if (!strcmp(v, "none")) o->positional = INDUCT_POS_NONE;
            else bad_input("--positional must be shortformer, standard or none, got '%s'", v);
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
        else if (!strcmp(a, "--eval-every")) o->eval_every = parse_u64(a, v, 1, (uint64_t)1e12);
        else if (!strcmp(a, "--eval-batch")) o->eval_batch = (uint32_t)parse_u64(a, v, 1, 1 << 20);
        else if (!strcmp(a, "--icl-band")) o->icl_band = (uint32_t)parse_u64(a, v, 0, 1000);
        else if (!strcmp(a, "--smooth")) {
            o->smooth = (uint32_t)parse_u64(a, v, 1, 1001);
            if (o->smooth % 2 == 0) bad_input("--smooth must be odd, got %u", o->smooth);
        } else if (!strcmp(a, "--snapshots")) o->snapshots = (uint32_t)parse_u64(a, v, 0, 1000);
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
    if (o->seq_len < 512 && !o->allow_short)
        bad_input("--seq-len %u is below 512: the ICL score needs the loss of the 500th token "
                  "(pass --allow-short for a quick test with a shortened score)", o->seq_len);
    if (o->seq_len < 101)
        bad_input("--seq-len %u is below 101, the length of the prefix-matching probe", o->seq_len);
    if (o->d_model % o->heads) bad_input("--heads %u does not divide --d-model %u", o->heads,
                                         o->d_model);
    if (o->pos_init == POS_INIT_SINUSOIDAL && o->positional == INDUCT_POS_NONE)
        bad_input("--pos-init sinusoidal needs positions (--positional shortformer|standard)");
    if (o->pos_init == POS_INIT_SINUSOIDAL && o->d_model % 2)
        bad_input("--pos-init sinusoidal needs an even --d-model");
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
    pthread_mutex_t mu;
    int tty;
    double t0;
    job *jobs;
    size_t n_jobs;
    size_t next;               /* next job to start (under mu) */
    cli_progress bar;          /* the progress line (cli.c) */
} shared;

/* SIGINT / SIGTERM (cli.c): the training callbacks stop their runs. */
#define g_stop cli_interrupted()

/* What we read back from a model's metrics log. */
typedef struct series {
    size_t n;
    double *step, *tokens, *loss, *icl; /* icl: the band estimator (--icl-band) */
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
    double last_eval_loss, last_icl, tok_s;
    /* per-evaluation data from the callback */
    size_t n_ev, cap_ev;
    uint64_t *ev_step;
    float *ev_vec;             /* [n_ev][E] loss at each sequence's fixed random position */
    double *ev_icl;            /* from the context-index average: L[late-1] - L[early-1] */
    double *ev_icl_band;       /* the same with L averaged over ±icl_band tokens */
    float *avg_buf;            /* [T-1] scratch */
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
    double icl_before, icl_after, icl_before_step;
    int icl_jump;
    int pm_head;
    double pm_head_before, pm_head_after, pm_win_start, pm_win_end, pm_max_any;
    int pm_win_found, pm_coincide;
    int n_induction;
    double icl_clean, frac_induction, frac_induction_pp, max_other_frac, max_other_frac_pp;
    int max_other_head, max_other_head_pp;
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
        total += w * (double)sh->o->steps;
        off += (size_t)snprintf(line + off, sizeof line - off,
                                "%s%s %llu/%llu", i ? "  " : "", j->spec.name,
                                (unsigned long long)j->step, (unsigned long long)sh->o->steps);
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
            if (!st || !v || !ic || !ib) {
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
        j->ev_step[j->n_ev] = p->step;
        j->ev_icl[j->n_ev] =
            (double)j->avg_buf[sh->late - 1] - (double)j->avg_buf[sh->early - 1];
        j->ev_icl_band[j->n_ev] = band_icl(j->avg_buf, sh->early, sh->late, sh->o->icl_band);
        j->n_ev++;
    }
    pthread_mutex_lock(&sh->mu);
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
    mc.d_mlp = 0; /* attention-only */
    mc.n_ctx = o->seq_len;
    mc.d_vocab = d_vocab;
    mc.positional = o->positional;
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
        {INDUCT_OPT_TOTAL_STEPS, (double)o->steps, 1},
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

/* The run's ICL estimate (band_icl of the context-index average over the evaluation set)
 * with the heads `idx[0..n)` (flat layer·n_heads + head) zero-ablated, with the attention
 * patterns of the clean run kept (`pp` = 1) or not; the ablations (and with them the
 * preserve-patterns switch) are cleared again before returning. */
static int ablated_icl(job *j, const uint32_t *idx, uint32_t n, int pp, double *out) {
    shared *sh = j->sh;
    const uint32_t H = sh->o->heads;
    int rc = induct_model_set_preserve_patterns(j->m, (uint32_t)pp);
    for (uint32_t i = 0; i < n && !rc; i++)
        rc = induct_model_ablate_head(j->m, idx[i] / H, idx[i] % H, INDUCT_ABLATE_ZERO);
    if (!rc)
        rc = induct_analysis_loss_vectors(j->m, sh->d, &sh->ec, NULL, 0, j->avg_buf, sh->T - 1);
    int rc2 = induct_model_clear_ablations(j->m);
    if (!rc) rc = rc2;
    if (!rc) *out = band_icl(j->avg_buf, sh->early, sh->late, sh->o->icl_band);
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
    for (size_t i = 0; i < s->n; i++) {
        s->icl_token[i] = sh->icl_metric && isfinite(s->icl[i]) ? s->icl[i] : j->ev_icl[i];
        s->icl[i] = j->ev_icl_band[i];
    }

    cJSON_AddStringToObject(ms, "name", j->spec.name);
    cJSON_AddNumberToObject(ms, "n_layers", L);
    cJSON_AddBoolToObject(ms, "smeared_keys", j->spec.smeared);
    cJSON_AddNumberToObject(ms, "n_params", (double)induct_model_n_params(j->m));
    add_num(ms, "wall_seconds", j->wall);
    add_num(ms, "tokens_per_second", j->tokens_per_second);
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
    j->w_frac = found ? (we - ws) / (double)o->steps : NAN;
    cJSON *w = cJSON_AddObjectToObject(ms, "window");
    cJSON_AddBoolToObject(w, "found", found);
    add_num(w, "start_step", ws);
    add_num(w, "end_step", we);
    add_num(w, "start_tokens", ws * tok_per_step);
    add_num(w, "end_tokens", we * tok_per_step);
    add_num(w, "fraction_of_run", j->w_frac);
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
    j->icl_before = s->icl[bi];
    j->icl_before_step = s->step[bi];
    j->icl_after = s->icl[ai];
    j->pm_max_any = pm_any;
    add_num(ms, "icl_before", j->icl_before);
    add_num(ms, "icl_token_before", s->icl_token[bi]);
    add_num(ms, "icl_token_after", s->icl_token[ai]);
    cJSON_AddStringToObject(ms, "icl_estimator",
                            o->icl_band ? "band: mean L over ±icl_band tokens around each index"
                                        : "single tokens (docs/definitions.md)");
    add_num(ms, "icl_before_step", s->step[bi]);
    cJSON_AddStringToObject(ms, "icl_before_rule",
                            found ? "last evaluation at or before the window start"
                                  : "no window: first evaluation at or after the warm-up");
    add_num(ms, "icl_after", j->icl_after);
    add_num(ms, "icl_after_step", s->step[ai]);
    add_num(ms, "pm_before", pm_b);
    add_num(ms, "pm_after", pm_a);
    add_num(ms, "pm_max_any_head_any_step", pm_any);

    /* ICL jump: window found, short, |ICL| < 0.15 before, ICL ≤ −0.25 after */
    j->icl_jump = found && j->w_frac <= CHECK_WINDOW_MAX_FRACTION &&
                  fabs(j->icl_before) < CHECK_ICL_BEFORE_MAX && j->icl_after <= -CHECK_ICL_AFTER_MIN;

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
    double icl_clean = NAN, icl_clean_pp = NAN, icl_ind = NAN, icl_ind_pp = NAN;
    rc = 0;
    for (int pp = 0; pp < 2 && !rc; pp++) {
        double *clean = pp ? &icl_clean_pp : &icl_clean, *ind = pp ? &icl_ind_pp : &icl_ind;
        float *delta = pp ? dpp : dz;
        if ((rc = ablated_icl(j, NULL, 0, pp, clean))) break;
        for (uint32_t i = 0; i < NH && !rc; i++) {
            double v = NAN;
            rc = ablated_icl(j, &i, 1, pp, &v);
            delta[i] = (float)(v - *clean);
        }
        if (!rc && j->n_induction > 0) {
            uint32_t *set = xcalloc(NH, sizeof *set), n = 0;
            for (uint32_t i = 0; i < NH; i++)
                if (labels[i] == INDUCT_HEAD_INDUCTION) set[n++] = i;
            rc = ablated_icl(j, set, n, pp, ind);
            free(set);
        }
    }
    if (rc) {
        job_fail(j, rc, "ablation");
        return 1;
    }
    /* fraction of the ICL score removed: (icl_clean − icl_ablated) / icl_clean, defined
     * only when icl_clean < 0 (context helps) */
    const int defined = icl_clean < 0;
    j->icl_clean = icl_clean;
    j->frac_induction = defined && j->n_induction ? (icl_clean - icl_ind) / icl_clean : NAN;
    j->frac_induction_pp =
        icl_clean_pp < 0 && j->n_induction ? (icl_clean_pp - icl_ind_pp) / icl_clean_pp : NAN;
    /* the largest fraction one non-induction head removes, plainly (its own output and,
     * through later layers' patterns, e.g. a previous-token head's part in an induction
     * circuit) and pattern-preserving (its own output only: the heads that carry ICL) */
    j->max_other_frac = j->max_other_frac_pp = NAN;
    j->max_other_head = j->max_other_head_pp = -1;
    for (uint32_t i = 0; i < NH; i++) {
        if (labels[i] == INDUCT_HEAD_INDUCTION) continue;
        double f = -(double)dz[i] / icl_clean, fp = -(double)dpp[i] / icl_clean_pp;
        if (defined && (j->max_other_head < 0 || f > j->max_other_frac)) {
            j->max_other_frac = f;
            j->max_other_head = (int)i;
        }
        if (icl_clean_pp < 0 && (j->max_other_head_pp < 0 || fp > j->max_other_frac_pp)) {
            j->max_other_frac_pp = fp;
            j->max_other_head_pp = (int)i;
        }
    }
    cJSON *ab = cJSON_AddObjectToObject(ms, "ablation");
    add_num(ab, "icl_clean", icl_clean);
    add_num(ab, "icl_clean_preserve_patterns", icl_clean_pp);
    cJSON_AddItemToObject(ab, "delta_icl_zero", head_table(dz, L, H));
    cJSON_AddItemToObject(ab, "delta_icl_zero_preserve_patterns", head_table(dpp, L, H));
    add_num(ab, "icl_induction_heads_ablated", icl_ind);
    add_num(ab, "icl_induction_heads_ablated_preserve_patterns", icl_ind_pp);
    add_num(ab, "fraction_removed_by_induction_heads", j->frac_induction);
    add_num(ab, "fraction_removed_by_induction_heads_preserve_patterns", j->frac_induction_pp);
    add_num(ab, "max_fraction_removed_by_other_head", j->max_other_frac);
    add_head_or_null(ab, "max_other_head", j->max_other_head, H);
    add_num(ab, "max_fraction_removed_by_other_head_preserve_patterns", j->max_other_frac_pp);
    add_head_or_null(ab, "max_other_head_preserve_patterns", j->max_other_head_pp, H);
    cJSON_AddStringToObject(ab, "fraction_rule",
        "(icl_clean - icl_ablated) / icl_clean, defined when icl_clean < 0; 1 = all of the "
        "ICL score removed, 0 = none, negative = ablation strengthens it; a single head's "
        "fraction is -delta_icl_zero / icl_clean; every ICL value here is the run's estimator "
        "(config.evaluation.icl_band) on the context-index average over the evaluation set");
    cJSON_AddStringToObject(ab, "unit", "nats (icl and delta); fractions are ratios");
    free(pt);
    free(pm);
    free(dup);
    free(labels);
    free(dz);
    free(dpp);
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
    j->avg_buf = xcalloc(sh->T, sizeof(float));
    char *metrics = j->log_path = path_join(j->dir, "metrics.jsonl");
    j->log_off = 0;
    char *snaps = path_join(j->dir, "ckpt-{step}.safetensors");
    induct_train_config tc;
    induct_train_config_init(&tc, sizeof tc);
    tc.steps = o->steps;
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
    tc.snapshot_every = o->snapshots ? (o->steps / o->snapshots ? o->steps / o->snapshots : 1) : 0;
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
    rc = induct_optimizer_save(j->o, final);
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

static job *find_job(shared *sh, const char *name) {
    for (size_t i = 0; i < sh->n_jobs; i++)
        if (!strcmp(sh->jobs[i].spec.name, name)) return &sh->jobs[i];
    return NULL;
}

static cJSON *jump_numbers(const job *j) {
    cJSON *n = cJSON_CreateObject();
    cJSON_AddBoolToObject(n, "window_found", j->window_found);
    add_num(n, "window_start_step", j->w_start);
    add_num(n, "window_end_step", j->w_end);
    add_num(n, "window_fraction_of_run", j->w_frac);
    add_num(n, "icl_before", j->icl_before);
    add_num(n, "icl_before_step", j->icl_before_step);
    add_num(n, "icl_after", j->icl_after);
    char hn[32];
    head_name(j->pm_head, j->sh->o->heads, hn, sizeof hn);
    cJSON_AddStringToObject(n, "pm_head", hn);
    add_num(n, "pm_head_before", j->pm_head_before);
    add_num(n, "pm_head_after", j->pm_head_after);
    cJSON_AddBoolToObject(n, "pm_window_found", j->pm_win_found);
    add_num(n, "pm_window_start_step", j->pm_win_start);
    add_num(n, "pm_window_end_step", j->pm_win_end);
    cJSON_AddBoolToObject(n, "windows_coincide", j->pm_coincide);
    add_num(n, "pm_max_any_head_any_step", j->pm_max_any);
    return n;
}

static const char *JUMP_RULE =
    "pass iff (a) a phase-change window of the ICL score is found, (end - start)/steps <= "
    "0.25, |icl_before| < 0.15 nats and icl_after <= -0.25 nats; and (b) the last-layer head "
    "with the largest final prefix-matching score scores <= 0.10 at the pre-window point and "
    "> 0.30 at the end, and its own prefix-matching window (same rule, min_change 0.10) "
    "overlaps the ICL window widened by one evaluation interval on each side";

static int pm_jump(const job *j) {
    return j->pm_head_before <= CHECK_PM_NEAR_CHANCE && j->pm_head_after > CHECK_PM_HIGH &&
           j->pm_coincide;
}

static void make_checks(shared *sh, check *c) {
    job *j;
    /* 1. two layers */
    c[0] = (check){"two_layer_phase_change",
                   "2 layers: the ICL score's magnitude rises from below 0.15 nats to clearly "
                   "above it inside a window short compared to the run, at the steps where a "
                   "last-layer head's prefix-matching score jumps from near chance to > 0.3",
                   "2L", JUMP_RULE, "not_run", NULL};
    if ((j = find_job(sh, "2L")) && j->summary) {
        c[0].status = j->icl_jump && pm_jump(j) ? "pass" : "fail";
        c[0].numbers = jump_numbers(j);
    }
    /* 2. one layer */
    c[1] = (check){"one_layer_no_phase_change",
                   "1 layer: no such jump in ICL score or prefix-matching", "1L",
                   "pass iff the ICL part (a) of the 2-layer rule does not hold and no head's "
                   "prefix-matching score exceeds 0.30 at any evaluation",
                   "not_run", NULL};
    if ((j = find_job(sh, "1L")) && j->summary) {
        c[1].status = !j->icl_jump && j->pm_max_any <= CHECK_PM_HIGH ? "pass" : "fail";
        c[1].numbers = jump_numbers(j);
        cJSON_AddBoolToObject(c[1].numbers, "icl_jump", j->icl_jump);
    }
    /* 3. one layer, smeared keys */
    c[2] = (check){"smeared_one_layer_phase_change",
                   "1 layer with smeared keys: the jump happens", "1L-smeared",
                   "the 2-layer rule applied to this model (its only layer is the last)",
                   "not_run", NULL};
    if ((j = find_job(sh, "1L-smeared")) && j->summary) {
        c[2].status = j->icl_jump && pm_jump(j) ? "pass" : "fail";
        c[2].numbers = jump_numbers(j);
    }
    /* 4. ablation: every model with at least one head classified induction */
    c[3] = (check){"induction_heads_carry_icl",
                   "Ablating the heads classified as induction removes most of the ICL score; "
                   "ablating any single other head does not",
                   "every model with induction heads",
                   "decided on every model with at least one head classified induction: each "
                   "must have icl_clean < 0, a fraction removed by zero-ablating all its "
                   "induction heads together, (icl_clean - icl_ablated)/icl_clean, of >= 0.5, "
                   "and a largest fraction removed by any single non-induction head under "
                   "pattern-preserving zero ablation (its own contribution; plain zero "
                   "ablation of a previous-token head also disables the induction head that "
                   "reads it, reported beside) of < 0.5; pass iff at least one model has "
                   "induction heads and every such model satisfies this",
                   "not_run", NULL};
    {
        cJSON *n = cJSON_CreateObject();
        int any_run = 0, n_with = 0, all_ok = 1;
        for (size_t i = 0; i < sh->n_jobs; i++) {
            j = &sh->jobs[i];
            if (!j->summary) continue;
            any_run = 1;
            if (j->n_induction == 0) continue;
            n_with++;
            int ok = j->icl_clean < 0 && j->frac_induction >= CHECK_ABLATION_MOST &&
                     (j->max_other_head_pp < 0 /* every head is an induction head */ ||
                      j->max_other_frac_pp < CHECK_ABLATION_MOST);
            all_ok = all_ok && ok;
            cJSON *mo = cJSON_AddObjectToObject(n, j->spec.name);
            cJSON_AddBoolToObject(mo, "passed", ok);
            add_num(mo, "icl_clean", j->icl_clean);
            cJSON_AddNumberToObject(mo, "n_induction_heads", j->n_induction);
            add_num(mo, "fraction_removed_by_induction_heads", j->frac_induction);
            add_num(mo, "fraction_removed_by_induction_heads_preserve_patterns",
                    j->frac_induction_pp);
            add_num(mo, "max_fraction_removed_by_other_head", j->max_other_frac);
            char hn[32] = "none";
            if (j->max_other_head >= 0) head_name(j->max_other_head, sh->o->heads, hn, sizeof hn);
            cJSON_AddStringToObject(mo, "max_other_head", hn);
            add_num(mo, "max_fraction_removed_by_other_head_preserve_patterns",
                    j->max_other_frac_pp);
            char hp[32] = "none";
            if (j->max_other_head_pp >= 0)
                head_name(j->max_other_head_pp, sh->o->heads, hp, sizeof hp);
            cJSON_AddStringToObject(mo, "max_other_head_preserve_patterns", hp);
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
    MD("d_model %u, %u heads, seq_len %u, batch %u, lr %g, warm-up %llu, %llu steps "
       "(%.3g M tokens per model), evaluation every %llu steps on %u sequences.\n\n",
       o->d_model, o->heads, sh->T, o->batch, o->lr, (unsigned long long)o->warmup,
       (unsigned long long)o->steps, (double)o->steps * o->batch * sh->T / 1e6,
       (unsigned long long)o->eval_every, sh->E);
    char hn[32];
    for (size_t i = 0; i < sh->n_jobs; i++) {
        const job *j = &sh->jobs[i];
        if (!j->summary) continue;
        const cJSON *hd = cJSON_GetObjectItem(j->summary, "heads");
        MD("## %s (%u layer%s%s)\n\n", j->spec.name, j->spec.n_layers,
           j->spec.n_layers > 1 ? "s" : "", j->spec.smeared ? ", smeared keys" : "");
        MD("| measure | ours | paper |\n|---|---|---|\n");
        if (j->window_found)
            MD("| phase-change window | steps %.0f–%.0f (%.3g–%.3g M tokens, %.0f%% of the run) "
               "| %s |\n", j->w_start, j->w_end, j->w_start * o->batch * sh->T / 1e6,
               j->w_end * o->batch * sh->T / 1e6, 100 * j->w_frac,
               j->spec.n_layers > 1 || j->spec.smeared ? "a short window early in training"
                                                       : "none (1 layer)");
        else
            MD("| phase-change window | none found | %s |\n",
               j->spec.n_layers > 1 || j->spec.smeared ? "a short window early in training"
                                                       : "none (1 layer)");
        MD("| ICL score before (step %.0f) | %+.3f nats | magnitude < 0.15 nats |\n",
           j->icl_before_step, j->icl_before);
        MD("| ICL score after (final) | %+.3f nats | ≈ −0.4 nats%s |\n", j->icl_after,
           j->spec.n_layers > 1 || j->spec.smeared ? "" : " only with induction heads");
        head_name(j->pm_head, o->heads, hn, sizeof hn);
        MD("| prefix matching, head %s, before → after | %.3f → %.3f | near chance → well "
           "above 0.3 |\n", hn, j->pm_head_before, j->pm_head_after);
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
            MD(" | %s |\n", k ? "in the layer before the induction heads"
                              : (j->spec.n_layers > 1 || j->spec.smeared ? "form in the window"
                                                                         : "none"));
        }
        const cJSON *bump = cJSON_GetObjectItem(cJSON_GetObjectItem(j->summary, "bump"), "bump");
        MD("| loss-curve bump in the window | %s | yes |\n",
           cJSON_IsBool(bump) ? (cJSON_IsTrue(bump) ? "yes" : "no")
           : j->window_found  ? "undecided (no evaluation interval before or inside the window)"
                              : "undecided (no window)");
        char pct[32];
        snprintf(pct, sizeof pct, "%.0f%%", 100 * j->frac_induction_pp);
        if (isfinite(j->frac_induction))
            MD("| ICL removed by ablating the induction heads (zero / pattern-preserving) | "
               "%.0f%% / %s | most |\n", 100 * j->frac_induction,
               isfinite(j->frac_induction_pp) ? pct : "n/a (ICL score not negative)");
        else
            MD("| ICL removed by ablating the induction heads | n/a (%s) | most |\n",
               j->n_induction ? "ICL score not negative" : "no induction head");
        if (j->max_other_head_pp >= 0) {
            char hz[32] = "none";
            head_name(j->max_other_head_pp, o->heads, hn, sizeof hn);
            if (j->max_other_head >= 0) head_name(j->max_other_head, o->heads, hz, sizeof hz);
            MD("| most ICL removed by one other head: pattern-preserving / zero ablation | "
               "%.0f%% (%s) / %.0f%% (%s) | little |\n", 100 * j->max_other_frac_pp, hn,
               100 * j->max_other_frac, hz);
        }
        MD("| final eval loss | %.4f nats/token | — |\n", j->s.loss[j->s.n - 1]);
        MD("| wall time, throughput | %.1f s, %.0f tokens/s | — |\n\n", j->wall,
           j->tokens_per_second);
    }
    MD("## Checks\n\n| claim | model | result |\n|---|---|---|\n");
    for (int k = 0; k < 4; k++)
        MD("| %s | %s | **%s** |\n", c[k].claim, c[k].model,
           !strcmp(c[k].status, "pass") ? "PASS" : !strcmp(c[k].status, "fail") ? "FAIL"
                                                                                : "not run");
    MD("\nThe rules and the numbers each result was decided on are in summary.json "
       "(\"checks\") and docs/phase-change.md.\n\n");
    MD("## Figures\n\n");
    const char *figs[4] = {"phase_change.png", "attention.png", "ablation.png", "pca.png"};
    for (int k = 0; k < 4; k++) MD("- %s/%s\n", dir, figs[k]);
    MD("\n(drawn by /usr/bin/python3 %s/examples/plot_phase_change.py %s; "
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

int main(int argc, char **argv) {
    options o;
    parse_args(argc, argv, &o);
    model_spec specs[MAX_MODELS];
    size_t n_models = parse_models(o.models, specs);

    /* ---- data ---- */
    induct_dataset *d = NULL;
    int rc;
    cJSON *data = cJSON_CreateObject();
    if (o.text) {
        induct_text_config tc;
        induct_text_config_init(&tc, sizeof tc);
        tc.n_eval_windows = o.eval_windows;
        tc.val_fraction = o.val_fraction;
        tc.block_tokens = o.block_tokens;
        tc.seed = o.data_seed;
        tc.bos = o.bos;
        if ((rc = induct_dataset_new_text_path(&d, o.text, o.suffix, &tc)))
            lib_fail(rc, "reading the text");
        cJSON_AddStringToObject(data, "kind", "text (bytes)");
        cJSON_AddStringToObject(data, "path", o.text);
        if (o.suffix) cJSON_AddStringToObject(data, "suffix", o.suffix);
        else cJSON_AddNullToObject(data, "suffix");
        cJSON_AddBoolToObject(data, "bos", o.bos);
    } else {
        induct_token_file_config tf;
        induct_token_file_config_init(&tf, sizeof tf);
        tf.format = o.format;
        tf.d_vocab = o.d_vocab;
        tf.n_eval_windows = o.eval_windows;
        tf.val_fraction = o.val_fraction;
        tf.block_tokens = o.block_tokens;
        tf.seed = o.data_seed;
        if ((rc = induct_dataset_new_token_file(&d, o.tokens, NULL, &tf)))
            lib_fail(rc, "reading the token file");
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
    printf("phase-change (libinduct %s)\n", induct_version_string());
    printf("data: %s%s%s: %llu train tokens, %llu held out, d_vocab %u; evaluation set: %u of "
           "%llu fixed windows of %u tokens, spread over the held-out text\n", o.text ? o.text : o.tokens,
           o.suffix ? " *" : "", o.suffix ? o.suffix : "", (unsigned long long)n_train,
           (unsigned long long)n_val, induct_dataset_d_vocab(d), sh.E,
           (unsigned long long)n_windows, sh.T);
    printf("models: %s — attention-only, d_model %u, %u heads, n_ctx %u, LN %s, positions %s "
           "(%s init), init %s, seed %llu\n", o.models, o.d_model, o.heads, sh.T,
           o.ln ? "on" : "off",
           o.positional == INDUCT_POS_SHORTFORMER ? "shortformer"
           : o.positional == INDUCT_POS_STANDARD  ? "standard" : "none",
           o.pos_init == POS_INIT_SINUSOIDAL ? "sinusoidal" : "random",
           o.init == INDUCT_INIT_TORCH ? "torch" : "gpt2", (unsigned long long)o.seed);
    printf("training: AdamW lr %g, warm-up %llu, %s schedule, batch %u, %llu steps = %.3g M "
           "tokens per model (%.3g M in all); evaluation every %llu steps; ICL score = loss of "
           "token %u − token %u (each averaged over ±%u tokens)\n", o.lr,
           (unsigned long long)o.warmup, o.cosine ? "cosine" : "constant", o.batch,
           (unsigned long long)o.steps, tok_model / 1e6, tok_model * n_models / 1e6,
           (unsigned long long)o.eval_every, sh.late, sh.early, o.icl_band);
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
            double run = (double)o.steps * t1 *
                         (1.0 + (double)sh.E / (3.0 * (double)o.batch * (double)o.eval_every));
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
    make_checks(&sh, checks);
    cJSON *root = cJSON_CreateObject();
    cJSON *cfg = cJSON_AddObjectToObject(root, "config");
    cJSON_AddStringToObject(cfg, "library_version", induct_version_string());
    cJSON_AddItemToObject(cfg, "data", data);
    cJSON *mcfg = cJSON_AddObjectToObject(cfg, "model");
    cJSON_AddStringToObject(mcfg, "models", o.models);
    cJSON_AddNumberToObject(mcfg, "d_model", o.d_model);
    cJSON_AddNumberToObject(mcfg, "n_heads", o.heads);
    cJSON_AddNumberToObject(mcfg, "d_mlp", 0);
    cJSON_AddNumberToObject(mcfg, "n_ctx", sh.T);
    cJSON_AddNumberToObject(mcfg, "layer_norm", o.ln);
    cJSON_AddStringToObject(mcfg, "positional",
                            o.positional == INDUCT_POS_SHORTFORMER ? "shortformer"
                            : o.positional == INDUCT_POS_STANDARD  ? "standard" : "none");
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
    cJSON_AddNumberToObject(tcfg, "tokens_per_step", (double)o.batch * sh.T);
    cJSON_AddNumberToObject(tcfg, "tokens_per_model", tok_model);
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
    {
        /* prefix-matching under uniform attention on the dataset's probe ([BOS] + 25 × 4,
         * the metric's): mean over queries p in repeats r = 2..4 of (r − 1)/(p + 1) */
        induct_probe_config pr;
        induct_probe_config_for_dataset(&pr, sizeof pr, sh.d);
        double sum = 0;
        size_t cnt = 0;
        for (uint32_t r = 2; r <= pr.n_repeats; r++)
            for (uint32_t i = 0; i < pr.block_len; i++) {
                uint32_t p = (pr.bos >= 0) + (r - 1) * pr.block_len + i;
                sum += (double)(r - 1) / (double)(p + 1);
                cnt++;
            }
        add_num(ecfg, "prefix_matching_chance", sum / (double)cnt);
    }
    cJSON *rcfg = cJSON_AddObjectToObject(cfg, "run");
    cJSON_AddNumberToObject(rcfg, "threads_per_model", o.threads);
    cJSON_AddNumberToObject(rcfg, "jobs", o.jobs);
    add_num(rcfg, "wall_seconds", total_wall);
    cJSON *rules = cJSON_AddObjectToObject(root, "rules");
    add_num(rules, "icl_before_max", CHECK_ICL_BEFORE_MAX);
    add_num(rules, "icl_after_min", CHECK_ICL_AFTER_MIN);
    add_num(rules, "window_max_fraction", CHECK_WINDOW_MAX_FRACTION);
    add_num(rules, "pm_near_chance", CHECK_PM_NEAR_CHANCE);
    add_num(rules, "pm_high", CHECK_PM_HIGH);
    add_num(rules, "pm_min_change", CHECK_PM_MIN_CHANGE);
    add_num(rules, "ablation_most", CHECK_ABLATION_MOST);
    cJSON *order_arr = cJSON_AddArrayToObject(root, "model_order");
    cJSON *models = cJSON_AddObjectToObject(root, "models");
    for (size_t i = 0; i < n_models; i++) {
        cJSON_AddItemToArray(order_arr, cJSON_CreateString(sh.jobs[i].spec.name));
        cJSON_AddItemToObject(models, sh.jobs[i].spec.name, sh.jobs[i].summary);
        sh.jobs[i].summary = cJSON_Duplicate(sh.jobs[i].summary, 1); /* kept for markdown */
    }
    cJSON_AddItemToObject(root, "pca", pca);
    cJSON *ck = cJSON_AddObjectToObject(root, "checks");
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
    cJSON *figs = cJSON_AddArrayToObject(root, "figures");
    const char *fig_names[4] = {"phase_change.png", "attention.png", "ablation.png", "pca.png"};
    for (int k = 0; k < 4; k++) cJSON_AddItemToArray(figs, cJSON_CreateString(fig_names[k]));
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
        free(j->avg_buf);
        free(j->log_path);
        free(j->s.step);
        free(j->s.tokens);
        free(j->s.loss);
        free(j->s.icl);
        free(j->s.icl_token);
        free(j->s.pm);
        free(j->s.pt);
    }
    free(sh.jobs);
    induct_dataset_free(d);
    pthread_mutex_destroy(&sh.mu);
    return 0;
}
