/* study-analyse's pieces: analyse.c (the command line and the model's ICL figures: the
 * window, before and after, the loss-curve bump), analyse_run.c (the run it reads and
 * the helpers the pieces share), analyse_heads.c (the heads: prefix matching over
 * training in the last layer and in every layer, classes, ablations), analyse_config.c
 * (the run's configuration as the report states it). Not part of the library's API. */
#ifndef STUDY_ANALYSE_H
#define STUDY_ANALYSE_H

#include <induct/induct.h>

#include <cjson/cJSON.h>
#include <stdint.h>

#include "run_config.h"

typedef struct options {
    const char *out;
    uint32_t icl_windows, icl_groups, ablation_windows, window_windows, smooth, threads;
    double thr_induction, thr_previous, thr_duplicate; /* NAN = the library's default */
    int check;
} options;

/* Windows of one evaluation in groups (batch means): group g = batch g of `per`. */
typedef struct evalset {
    const induct_dataset *d;
    uint32_t groups, per;
} evalset;

typedef struct ctx {
    options o;
    run_config c;
    cJSON *config_json;        /* owns c's strings */
    const char *name;
    uint32_t L, H, NH, T, E, early, late;
    int icl_metric;            /* the driver logged icl_score (the same tokens) */
    induct_dataset *d, *d_big, *d_abl, *d_win;
    evalset big, abl, ps, win; /* win.d NULL: the window rule reads the per-step curve */
    double pm_chance;
    induct_model *m;           /* the final weights */
    /* the metrics log, one entry per evaluation */
    size_t n;
    double *step, *loss, *icl_logged, *icl_token, *icl_band, *icl, *icl_se;
    float *pm, *pt;            /* [n][NH] */
} ctx;

/* The phase-change window of the ICL series (the window rule's settings and result) and
 * the two evaluations the before/after figures compare. */
typedef struct window {
    induct_phase_config pc;
    uint32_t found;
    double start, end; /* steps; NAN when not found */
    size_t before;     /* the last evaluation at or before the start (no window: the first
                          at or after the warm-up) */
    size_t after;      /* the last evaluation */
} window;

/* An ICL estimate over groups and the groups' band scores (owned). */
typedef struct est {
    induct_icl_estimate e;
    double *groups;
} est;

/* ---- analyse_run.c: the run ---- */

/* Read the run directory x->o.out (x->o set): its settings, the data and the evaluation
 * sets, the metrics log, the final weights. Returns train.json (the caller deletes it);
 * exits with a message when DIR is not a complete run of study-train. */
cJSON *open_run(ctx *x);
void close_run(ctx *x);
/* The weights kept at the evaluation of `step` (weights/step-<S>.safetensors), on
 * --threads threads; exits on error. */
induct_model *load_kept(const ctx *x, double step);
/* The window evaluation: the band ICL score of the weights kept at every evaluation on
 * the window windows, into x->icl and x->icl_se. Returns its seconds. */
double window_evaluation(ctx *x);

/* ---- analyse_run.c: helpers every piece uses ---- */

/* Exit with the library's status and message when rc is not INDUCT_OK. */
void lib(int rc, const char *what);
/* The library's ICL score over the groups of `s` (curve: [T - 1] or NULL); exits on error. */
est icl_groups(const ctx *x, induct_model *m, const evalset *s, double *curve);
/* The library's paired difference; exits on error. */
void paired(const double *a, const double *b, size_t n, double *mean, double *se);
/* JSON: a list of exact doubles, [L][H] tables and "L.H" names. */
cJSON *double_list(const double *v, size_t n);
cJSON *head_table(const float *v, uint32_t L, uint32_t H);
void head_name(int idx, uint32_t H, char *buf, size_t cap);

/* ---- analyse_heads.c: the heads ---- */

/* Of the heads first .. first + count - 1 (flat indices), the one with the largest final
 * prefix-matching score (the first on ties); *pm_before and *pm_after: the largest score
 * among them at w->before and at the end. */
uint32_t pm_best_head(const ctx *x, uint32_t first, uint32_t count, const window *w,
                      double *pm_before, double *pm_after);
/* Head `head`'s prefix-matching series over training: before, after, its own window, its
 * rise from chance and the part of it inside the ICL window (the model's "pm_head";
 * with_layer adds its layer). */
cJSON *pm_head_json(const ctx *x, uint32_t head, const window *w, int with_layer);

/* The final model's heads: their scores and classes ("heads") and the ablation
 * attribution ("ablation"), added to the model's object `ms`; `score` is the model's
 * final ICL score (the large evaluation). Returns the labels [NH] and prefix-matching
 * scores [NH] (the caller frees them) and the seconds of the ablations. */
double analyse_heads(const ctx *x, cJSON *ms, double score, uint32_t **labels_out,
                     float **pm_out);

/* "any_layer": where the induction heads are, every layer searched (labels and pm: the
 * final heads' classes and prefix-matching scores of analyse_heads()). */
void any_layer(const ctx *x, cJSON *any, const window *w, const uint32_t *labels,
               const float *pm);

/* ---- analyse_config.c ---- */

/* config: the sections data, model, training, evaluation of the run, as the summary
 * states them (docs/phase-change.md, "summary.json"). */
cJSON *config_json(const ctx *x);

#endif
