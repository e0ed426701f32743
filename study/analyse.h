/* study-analyse's pieces (analyse.c: the run and the ICL figures; analyse_heads.c: head
 * classes and ablations; analyse_config.c: the run's configuration as the report states
 * it). Not part of the library's API. */
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

/* An ICL estimate over groups and the groups' band scores (owned). */
typedef struct est {
    induct_icl_estimate e;
    double *groups;
} est;

/* The library's ICL score over the groups of `s` (curve: [T - 1] or NULL); exits on error. */
est icl_groups(const ctx *x, induct_model *m, const evalset *s, double *curve);
/* The library's paired difference; exits on error. */
void paired(const double *a, const double *b, size_t n, double *mean, double *se);
/* Exit with the library's status and message when rc is not INDUCT_OK. */
void lib(int rc, const char *what);

/* JSON: [L][H] tables and "L.H" names. */
cJSON *head_table(const float *v, uint32_t L, uint32_t H);
void head_name(int idx, uint32_t H, char *buf, size_t cap);

/* The final model's heads: their scores and classes ("heads") and the ablation
 * attribution ("ablation"), added to the model's object `ms`; `score` is the model's
 * final ICL score (the large evaluation). Returns the labels [NH] and prefix-matching
 * scores [NH] (the caller frees them) and the seconds of the ablations. */
double analyse_heads(const ctx *x, cJSON *ms, double score, uint32_t **labels_out,
                     float **pm_out);

/* config: the sections data, model, training, evaluation of the run, as the summary
 * states them (docs/phase-change.md, "summary.json"). */
cJSON *config_json(const ctx *x);

#endif
