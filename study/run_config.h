/* One model's run of a study: its settings (the flags of study-train, kept in the run
 * directory's config.json, read back by study-analyse), the data they name, the model
 * they build, and the small file helpers both stages share. docs/study.md describes the
 * run directory. Not part of the library's API. */
#ifndef STUDY_RUN_CONFIG_H
#define STUDY_RUN_CONFIG_H

#include <induct/induct.h>

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#define RUN_FORMAT "libinduct study run 1"
#define NAME_MAX_LEN 32

enum { POS_INIT_RANDOM = 0, POS_INIT_SINUSOIDAL = 1 };

typedef struct run_config {
    /* the model: <n>L[-mlp][-smeared] */
    char model[NAME_MAX_LEN];
    uint32_t n_layers, mlp, smeared;
    /* data */
    const char *text, *suffix, *tokens;
    uint32_t format, d_vocab, eval_windows, bos;
    uint64_t data_seed, block_tokens;
    double val_fraction, repeat_fraction;
    uint32_t repeat_min, repeat_max;
    /* architecture */
    uint32_t d_model, heads, d_head, d_mlp, seq_len, allow_short, ln, positional;
    uint32_t shortformer_layers, init, pos_init;
    double init_std, pos_amp, smear_alpha; /* NAN = the library's default */
    uint64_t seed;
    /* optimisation */
    uint32_t batch, cosine;
    double lr, weight_decay, grad_clip, min_lr_ratio; /* NAN = the library's default */
    uint64_t warmup, steps;
    /* the measurements during training */
    uint64_t eval_every;
    uint32_t eval_batch, icl_band, snapshots;
} run_config;

/* The defaults of the main job (docs/phase-change.md, "Flags"). */
extern const run_config RUN_DEFAULTS;

/* Parse "<n>L[-mlp][-smeared]" (1 <= n <= 64) into c->model, n_layers, mlp, smeared;
 * 0, or -1 for a bad name. */
int run_parse_model(run_config *c, const char *name);
/* The width of each head and of the MLP (0 for attention-only models). */
uint32_t run_d_head(const run_config *c);
uint32_t run_d_mlp(const run_config *c);

/* The flags of study-train that set a run_config (getopt_long entries, the zero entry
 * last) and their handler; run_flags_usage prints them. */
extern const struct option RUN_FLAGS[];
/* Handles flag `name` (without "--") if it is one of RUN_FLAGS; 1 if it was, else 0. */
int run_on_flag(run_config *c, const char *name, const char *value, int *shortformer_set);
void run_flags_usage(FILE *f);
/* Cross-flag rules, the data path's existence and the ICL bands (usage errors). */
void run_validate(const run_config *c, int shortformer_set);

/* The ICL score's tokens: 500 and 50 when their bands fit seq_len, else (allow_short)
 * the last token whose band fits and a tenth of it; *full: the driver's icl_score
 * metric reads the same tokens. */
void run_icl_tokens(const run_config *c, uint32_t *early, uint32_t *late, int *full);

/* config.json: {"format", "library_version", "settings": {every field}}. */
cJSON *run_config_json(const run_config *c);
/* Read the settings of a config.json back (strings point into `root`, which must live
 * as long as c). 0, or -1 with a message in err. */
int run_config_from_json(run_config *c, const cJSON *root, char *err, size_t cap);

/* The dataset of the settings with n_eval_windows windows; the library's status. */
int run_open_dataset(const run_config *c, uint32_t n_eval_windows, induct_dataset **d);
/* A freshly initialised model and its AdamW optimizer, as the settings say (the
 * sinusoidal W_pos written in); the library's status. */
int run_make_model(const run_config *c, uint32_t d_vocab, uint32_t threads, induct_model **m,
                   induct_optimizer **o);

/* The identity of the data the settings name (docs/study.md, "The run directory"): an
 * object {"sha256", "bytes", "files"}: for a file (--tokens, or --text FILE) the SHA-256
 * of its bytes, as sha256sum prints it; for --text DIR, of the lines
 * "<SHA-256 of the file>  <relative path>\n" of the files the library reads (regular
 * files, links not followed, names ending in --suffix, in byte order of their paths).
 * 0 with *out owned by the caller, or -1 with a message in err. */
int run_data_identity(const run_config *c, cJSON **out, char *err, size_t cap);

/* ---- files ---- */
char *run_path(const char *dir, const char *name); /* malloc'ed "dir/name" */
/* The weights kept at the evaluation of `step`: malloc'ed "dir/weights/step-<S>.safetensors"
 * (docs/study.md, "The run directory"). */
char *run_weights_path(const char *dir, uint64_t step);
int run_mkdir_p(const char *path);                  /* 0 or -1 (errno) */
char *run_read_file(const char *path, size_t *len); /* malloc'ed, NUL-terminated; NULL */
cJSON *run_read_json(const char *path);             /* NULL: missing or not JSON */
/* Write JSON atomically (cli_write_atomic), with a final newline; 0 or -1 (errno). */
int run_write_json(const char *path, const cJSON *json);
/* A number that reads back as the same double: the shortest of %.15g, %.16g and %.17g
 * that does (the default printer of cJSON rounds to 15 digits); null when not finite. */
cJSON *run_num(double x);
void run_add_num(cJSON *o, const char *key, double x);
/* Exit with a message (status 1) when out of memory. */
void *run_xcalloc(size_t n, size_t size);

#endif
