/* study-analyse: the run it reads (the settings in config.json, the data and the
 * evaluation sets cut from it, the metrics log, the kept and final weights) and the
 * helpers every piece of the analysis shares: the library's statistics, JSON lists and
 * tables of heads. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyse.h"
#include "cli.h"

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "study-analyse: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(CLI_EXIT_FAILED);
}

void lib(int rc, const char *what) {
    if (rc) cli_lib_fail(rc, what);
}

/* ---- the evaluation sets ---- */

/* n windows in g groups of n / g (g <= n; at least 1 per group). */
static void grouping(uint64_t n, uint32_t g, uint32_t *groups, uint32_t *per) {
    if (n < 1) n = 1;
    if (g > n) g = (uint32_t)n;
    if (g < 1) g = 1;
    *groups = g;
    *per = (uint32_t)(n / g);
}

static evalset open_evalset(const ctx *x, uint32_t windows, uint32_t groups, induct_dataset **d) {
    lib(run_open_dataset(&x->c, windows, d), "reading the data");
    uint64_t n = 0;
    lib(induct_dataset_window_count(*d, INDUCT_SPLIT_EVAL, x->T, &n), "counting evaluation windows");
    evalset e = {*d, 0, 0};
    grouping(n, groups, &e.groups, &e.per);
    return e;
}

/* The data: the driver's evaluation set (the head scores read it too), the large
 * evaluation, the ablations' and the window evaluation's windows of the same text. */
static void open_data(ctx *x) {
    lib(run_open_dataset(&x->c, x->c.eval_windows, &x->d), "reading the data");
    lib(induct_dataset_set_repeats(x->d, x->c.repeat_fraction, x->c.repeat_min,
                                   x->c.repeat_max),
        "setting the repeated-span curriculum");
    x->ps = (evalset){x->d, 0, 0};
    grouping(x->E, 8, &x->ps.groups, &x->ps.per);
    x->big = open_evalset(x, x->o.icl_windows, x->o.icl_groups, &x->d_big);
    x->abl = open_evalset(x, x->o.ablation_windows, x->o.icl_groups, &x->d_abl);
    if (x->o.window_windows) {
        uint64_t n = 0;
        lib(run_open_dataset(&x->c, x->o.window_windows, &x->d_win), "reading the data");
        lib(induct_dataset_window_count(x->d_win, INDUCT_SPLIT_EVAL, x->T, &n),
            "counting windows");
        /* groups of 256 windows, as the large evaluation's (at least 2) */
        x->win = (evalset){x->d_win, 0, 0};
        grouping(n, n >= 512 ? (uint32_t)(n / 256) : 2, &x->win.groups, &x->win.per);
    }
}

/* Prefix matching under uniform attention on the dataset's probe ([BOS] + 25 x 4, the
 * metric's): mean over queries p in repeats r = 2..4 of (r - 1)/(p + 1). */
static double pm_chance(const induct_dataset *d) {
    induct_probe_config pr;
    lib(induct_probe_config_for_dataset(&pr, sizeof pr, d), "the probe");
    double sum = 0;
    size_t cnt = 0;
    for (uint32_t r = 2; r <= pr.n_repeats; r++)
        for (uint32_t i = 0; i < pr.block_len; i++) {
            uint32_t p = (pr.bos >= 0) + (r - 1) * pr.block_len + i;
            sum += (double)(r - 1) / (double)(p + 1);
            cnt++;
        }
    return sum / (double)cnt;
}

/* ---- the metrics log ---- */

static int json_floats(const cJSON *arr, float *dst, size_t n) {
    if (!cJSON_IsArray(arr) || (size_t)cJSON_GetArraySize(arr) != n) return -1;
    size_t i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, arr) {
        if (!cJSON_IsNumber(v)) return -1;
        dst[i++] = (float)v->valuedouble;
    }
    return 0;
}

/* [L][H] nested lists of a record into dst[NH]. */
static int json_heads(const cJSON *arr, float *dst, uint32_t L, uint32_t H) {
    if (!cJSON_IsArray(arr) || (uint32_t)cJSON_GetArraySize(arr) != L) return -1;
    uint32_t l = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, arr) {
        if (json_floats(row, dst + (size_t)l * H, H)) return -1;
        l++;
    }
    return 0;
}

static void read_metrics(ctx *x, const char *dir) {
    char *path = run_path(dir, "metrics.jsonl");
    char *text = run_read_file(path, NULL);
    if (!text) fail("cannot read %s: %s", path, strerror(errno));
    size_t cap = 0;
    for (const char *p = text; *p; p++) cap += *p == '\n';
    x->step = run_xcalloc(cap, sizeof(double));
    x->loss = run_xcalloc(cap, sizeof(double));
    x->icl_logged = run_xcalloc(cap, sizeof(double));
    x->icl_token = run_xcalloc(cap, sizeof(double));
    x->icl_band = run_xcalloc(cap, sizeof(double));
    x->icl = run_xcalloc(cap, sizeof(double));
    x->pm = run_xcalloc(cap * x->NH, sizeof(float));
    x->pt = run_xcalloc(cap * x->NH, sizeof(float));
    float *curve = run_xcalloc(x->T - 1, sizeof *curve);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *rec = cJSON_Parse(line);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(rec, "step");
        const cJSON *ls = cJSON_GetObjectItemCaseSensitive(rec, "eval_loss");
        const cJSON *ic = cJSON_GetObjectItemCaseSensitive(rec, "icl_score");
        size_t i = x->n;
        if (!cJSON_IsNumber(st) || i == cap ||
            json_floats(cJSON_GetObjectItemCaseSensitive(rec, "loss_by_position"), curve, x->T - 1) ||
            json_heads(cJSON_GetObjectItemCaseSensitive(rec, "prefix_matching_score"),
                       x->pm + i * x->NH, x->L, x->H) ||
            json_heads(cJSON_GetObjectItemCaseSensitive(rec, "previous_token_score"),
                       x->pt + i * x->NH, x->L, x->H) ||
            (i > 0 && st->valuedouble <= x->step[i - 1]))
            fail("%s: record %zu is not a record of this run (step, loss_by_position of %u, "
                 "prefix_matching_score and previous_token_score [%u][%u], steps increasing)",
                 path, i + 1, x->T - 1, x->L, x->H);
        x->step[i] = st->valuedouble;
        x->loss[i] = cJSON_IsNumber(ls) ? ls->valuedouble : NAN;
        x->icl_logged[i] = cJSON_IsNumber(ic) ? ic->valuedouble : NAN;
        /* single tokens: the driver's icl_score (docs/definitions.md), or (short contexts)
         * the curve's L[late-1] - L[early-1]; the band estimator from the same curve */
        double tok = (double)curve[x->late - 1] - (double)curve[x->early - 1];
        x->icl_token[i] = x->icl_metric && isfinite(x->icl_logged[i]) ? x->icl_logged[i] : tok;
        if (induct_analysis_icl_band(curve, x->T - 1, x->early, x->late, x->c.icl_band,
                                     &x->icl_band[i]))
            x->icl_band[i] = NAN;
        x->icl[i] = x->icl_band[i];
        x->n++;
        cJSON_Delete(rec);
    }
    if (x->n == 0) fail("%s has no record", path);
    if (x->step[x->n - 1] != (double)x->c.steps)
        fail("%s ends at step %.0f, not at the run's %llu: the run is not complete", path,
             x->step[x->n - 1], (unsigned long long)x->c.steps);
    free(curve);
    free(text);
    free(path);
}

/* ---- the run ---- */

cJSON *open_run(ctx *x) {
    const char *dir = x->o.out;
    /* the run's settings, and whether it is complete */
    char *cp = run_path(dir, "config.json"), *tp = run_path(dir, "train.json");
    x->config_json = run_read_json(cp);
    if (!x->config_json) fail("cannot read %s: not a run directory of study-train", cp);
    char err[256];
    if (run_config_from_json(&x->c, x->config_json, err, sizeof err)) fail("%s: %s", cp, err);
    cJSON *train = run_read_json(tp);
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(train, "complete")))
        fail("%s is not trained to the end (no %s): run study-train first", dir, tp);
    /* the data must be what the run was trained on */
    cJSON *data = NULL;
    char derr[512];
    if (run_data_identity(&x->c, &data, derr, sizeof derr)) fail("the data's SHA-256: %s", derr);
    const cJSON *trained = cJSON_GetObjectItemCaseSensitive(x->config_json, "data");
    if (!cJSON_Compare(data, trained, 1)) {
        const char *was = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(trained, "sha256"));
        fail("%s is not the data %s was trained on: SHA-256 %s now, %s in %s",
             x->c.text ? x->c.text : x->c.tokens, dir,
             cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(data, "sha256")),
             was ? was : "none recorded", cp);
    }
    cJSON_Delete(data);
    x->name = x->c.model;
    x->L = x->c.n_layers;
    x->H = x->c.heads;
    x->NH = x->L * x->H;
    x->T = x->c.seq_len;
    x->E = x->c.eval_batch;
    run_icl_tokens(&x->c, &x->early, &x->late, &x->icl_metric);
    open_data(x);
    x->pm_chance = pm_chance(x->d);
    read_metrics(x, dir);
    char *fp = run_path(dir, "final.safetensors");
    int rc = induct_model_load(&x->m, fp);
    if (rc) cli_lib_fail(rc, fp);
    lib(induct_model_set_threads(x->m, x->o.threads), "setting threads");
    free(fp);
    free(cp);
    free(tp);
    return train;
}

void close_run(ctx *x) {
    cJSON_Delete(x->config_json);
    induct_model_free(x->m);
    induct_dataset_free(x->d);
    induct_dataset_free(x->d_big);
    induct_dataset_free(x->d_abl);
    induct_dataset_free(x->d_win);
    free(x->step);
    free(x->loss);
    free(x->icl_logged);
    free(x->icl_token);
    free(x->icl_band);
    free(x->icl);
    free(x->icl_se);
    free(x->pm);
    free(x->pt);
}

induct_model *load_kept(const ctx *x, double step) {
    char *p = run_weights_path(x->o.out, (uint64_t)step);
    induct_model *m = NULL;
    int rc = induct_model_load(&m, p);
    if (rc) {
        fprintf(stderr, "study-analyse: the weights kept at step %.0f: ", step);
        cli_lib_fail(rc, p);
    }
    lib(induct_model_set_threads(m, x->o.threads), "setting threads");
    free(p);
    return m;
}

double window_evaluation(ctx *x) {
    double t0 = cli_now();
    x->icl_se = run_xcalloc(x->n, sizeof *x->icl_se);
    for (size_t i = 0; i < x->n; i++) {
        induct_model *m = load_kept(x, x->step[i]);
        est e = icl_groups(x, m, &x->win, NULL);
        x->icl[i] = e.e.icl;
        x->icl_se[i] = e.e.icl_se;
        free(e.groups);
        induct_model_free(m);
    }
    return cli_now() - t0;
}

/* ---- the statistics (the library's) ---- */

est icl_groups(const ctx *x, induct_model *m, const evalset *s, double *curve) {
    induct_icl_groups_config g;
    induct_icl_groups_config_init(&g, sizeof g);
    g.n_groups = s->groups;
    g.per_group = s->per;
    g.seq_len = x->T;
    g.early = x->early;
    g.late = x->late;
    g.band = x->c.icl_band;
    /* the loss-by-position curve (a figure, not a check): an eighth of the groups */
    g.curve_groups = curve ? (s->groups / 8 ? s->groups / 8 : 1) : 0;
    est r;
    memset(&r, 0, sizeof r);
    r.e.size = sizeof r.e;
    r.groups = run_xcalloc(s->groups, sizeof *r.groups);
    lib(induct_analysis_icl_groups(m, s->d, &g, &r.e, r.groups, s->groups, curve,
                                   curve ? x->T - 1 : 0),
        "the ICL score over groups of windows");
    return r;
}

void paired(const double *a, const double *b, size_t n, double *mean, double *se) {
    lib(induct_analysis_paired_difference(a, b, n, mean, se), "a paired difference");
}

/* ---- JSON ---- */

cJSON *double_list(const double *v, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, run_num(v[i]));
    return a;
}

cJSON *head_table(const float *v, uint32_t L, uint32_t H) {
    cJSON *outer = cJSON_CreateArray();
    for (uint32_t l = 0; l < L; l++) {
        cJSON *row = cJSON_CreateArray();
        for (uint32_t h = 0; h < H; h++) cJSON_AddItemToArray(row, run_num((double)v[l * H + h]));
        cJSON_AddItemToArray(outer, row);
    }
    return outer;
}

void head_name(int idx, uint32_t H, char *buf, size_t cap) {
    snprintf(buf, cap, "%u.%u", (unsigned)(idx / (int)H), (unsigned)(idx % (int)H));
}
