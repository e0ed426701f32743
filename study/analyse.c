/* study-analyse: the per-model analysis of one trained run directory (study-train's),
 * written to DIR/analysis.json (docs/study.md, "analysis.json").
 *
 * From the run's metrics log and the weights it kept at every evaluation:
 *   - the window evaluation: the band ICL score of every kept weight on --window-windows
 *     windows, with standard errors by batch means (induct_analysis_icl_groups);
 *   - the phase-change window of that series (induct_analysis_phase_window);
 *   - the ICL score before the window and after training on the large evaluation
 *     (--icl-windows windows in --icl-groups groups), and the paired fall;
 *   - prefix matching of the last layer's heads and of every layer's, the head classes,
 *     the loss-curve bump;
 *   - ablation attribution of every head, plain and pattern-preserving, and of the
 *     induction heads together (--ablation-windows windows).
 * The definitions and rules are those of docs/phase-change.md ("What is measured");
 * the statistics are the library's (docs/analysis.md, "Standard errors").
 *
 * usage: study-analyse --out DIR [--icl-windows N] [--icl-groups G] [--ablation-windows N]
 *                      [--window-windows N] [--smooth N] [--induction-threshold X]
 *                      [--previous-token-threshold X] [--duplicate-threshold X] [--threads N]
 */
#include <induct/induct.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyse.h"
#include "cli.h"

#define ANALYSIS_FORMAT "libinduct study analysis 1"
/* Smallest change of a prefix-matching series that counts as a window (reported only;
 * the checks' rules are in study/checks.py). */
#define PM_MIN_CHANGE 0.10

static const options DEFAULTS = {NULL, 8192, 32, 512, 3072, 3, 1, NAN, NAN, NAN, 0};

static void help(FILE *f) {
    fprintf(f,
        "usage: study-analyse --out DIR [options]\n\n"
        "The per-model analysis of a run directory trained by study-train; writes\n"
        "DIR/analysis.json (docs/study.md).\n\n"
        "  --icl-windows N       windows of the large evaluation (%u)\n"
        "  --icl-groups G        groups for the standard errors by batch means (%u)\n"
        "  --ablation-windows N  windows of the ablation evaluation (%u)\n"
        "  --window-windows N    windows of the window evaluation, in groups of 256 (%u; 0 =\n"
        "                        the window rule reads the per-step curve)\n"
        "  --smooth N            moving average of the window rule, odd (%u)\n"
        "  --induction-threshold X  --previous-token-threshold X  --duplicate-threshold X\n"
        "                        head classes (library defaults)\n"
        "  --threads N           OpenMP threads (%u; the bits do not depend on it)\n"
        "  --check               check the flags only\n"
        "  -h, --help            this help\n"
        "Exit status: 0 written, 1 failed (or DIR not trained), 2 bad input.\n",
        DEFAULTS.icl_windows, DEFAULTS.icl_groups, DEFAULTS.ablation_windows,
        DEFAULTS.window_windows, DEFAULTS.smooth, DEFAULTS.threads);
}

static void on_option(const char *name, const char *v, void *ud) {
    options *o = ud;
    if (!strcmp(name, "out")) {
        if (!*v) cli_usage_error("--out needs a directory");
        o->out = v;
    } else if (!strcmp(name, "icl-windows")) o->icl_windows = cli_u32(name, v, 2, 1u << 20);
    else if (!strcmp(name, "icl-groups")) o->icl_groups = cli_u32(name, v, 2, 4096);
    else if (!strcmp(name, "ablation-windows")) o->ablation_windows = cli_u32(name, v, 2, 1u << 20);
    else if (!strcmp(name, "window-windows")) {
        o->window_windows = cli_u32(name, v, 0, 1u << 20);
        if (o->window_windows == 1)
            cli_usage_error("--window-windows must be 0 (the per-step curve) or >= 2 (a standard "
                            "error needs 2 groups)");
    } else if (!strcmp(name, "smooth")) {
        o->smooth = cli_u32(name, v, 1, 1001);
        if (o->smooth % 2 == 0) cli_usage_error("--smooth must be odd, got %u", o->smooth);
    } else if (!strcmp(name, "induction-threshold")) o->thr_induction = cli_f64(name, v, 1e-9, 1);
    else if (!strcmp(name, "previous-token-threshold")) o->thr_previous = cli_f64(name, v, 1e-9, 1);
    else if (!strcmp(name, "duplicate-threshold")) o->thr_duplicate = cli_f64(name, v, 1e-9, 1);
    else if (!strcmp(name, "threads")) o->threads = cli_u32(name, v, 1, 1024);
    else if (!strcmp(name, "check")) o->check = 1;
}

/* ---- the run: settings, data, metrics ---- */

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

/* ---- JSON helpers ---- */

static cJSON *double_list(const double *v, size_t n) {
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

#define num run_add_num

/* ---- pieces of the analysis ---- */

/* Index of the last evaluation with step <= t (0 if none). */
static size_t last_at_or_before(const ctx *x, double t) {
    size_t k = 0;
    for (size_t i = 0; i < x->n; i++)
        if (x->step[i] <= t) k = i;
    return k;
}

/* y at step t, linear between evaluations (clamped to the first and last). */
static double interp_at(const ctx *x, const double *y, double t) {
    if (!(t > x->step[0])) return y[0];
    for (size_t i = 0; i + 1 < x->n; i++)
        if (t <= x->step[i + 1])
            return y[i] + (y[i + 1] - y[i]) * (t - x->step[i]) / (x->step[i + 1] - x->step[i]);
    return y[x->n - 1];
}

/* The window evaluation: the band ICL score of the weights kept at every evaluation. */
static double window_evaluation(ctx *x, const char *dir) {
    double t0 = cli_now();
    x->icl_se = run_xcalloc(x->n, sizeof *x->icl_se);
    char *wdir = run_path(dir, "weights");
    for (size_t i = 0; i < x->n; i++) {
        char name[64];
        snprintf(name, sizeof name, "step-%.0f.safetensors", x->step[i]);
        char *p = run_path(wdir, name);
        induct_model *m = NULL;
        int rc = induct_model_load(&m, p);
        if (rc) {
            fprintf(stderr, "study-analyse: the weights kept at step %.0f: ", x->step[i]);
            cli_lib_fail(rc, p);
        }
        lib(induct_model_set_threads(m, x->o.threads), "setting threads");
        est e = icl_groups(x, m, &x->win, NULL);
        x->icl[i] = e.e.icl;
        x->icl_se[i] = e.e.icl_se;
        free(e.groups);
        induct_model_free(m);
        free(p);
    }
    free(wdir);
    return cli_now() - t0;
}

/* A prefix-matching series' own window (PM_MIN_CHANGE) and its rise inside the ICL
 * window, for head `head` (flat index). */
typedef struct pm_info {
    int head;
    double before, after, win_start, win_end, rise, rise_inside;
    uint32_t win_found;
    int coincide;
} pm_info;

static pm_info pm_head_info(const ctx *x, int head, size_t bi, size_t ai, const induct_phase_config *pc,
                            int found, double ws, double we) {
    pm_info r = {.head = head, .win_start = NAN, .win_end = NAN};
    double *pmh = run_xcalloc(x->n, sizeof *pmh);
    for (size_t i = 0; i < x->n; i++) pmh[i] = x->pm[i * x->NH + (size_t)head];
    induct_phase_config pcp = *pc;
    pcp.min_change = PM_MIN_CHANGE;
    if (x->n >= 2)
        lib(induct_analysis_phase_window(x->step, pmh, x->n, &pcp, &r.win_start, &r.win_end,
                                         &r.win_found),
            "prefix-matching window");
    r.before = pmh[bi];
    r.after = pmh[ai];
    /* its rise from chance, and the part of it inside the ICL window (interpolated) */
    r.rise = pmh[ai] - x->pm_chance;
    r.rise_inside = found ? interp_at(x, pmh, we) - interp_at(x, pmh, ws) : NAN;
    /* the windows coincide if they overlap, with one evaluation interval of slack */
    const double slack = (double)x->c.eval_every;
    r.coincide = found && r.win_found && r.win_start <= we + slack && r.win_end >= ws - slack;
    free(pmh);
    return r;
}

static cJSON *pm_head_json(const ctx *x, const pm_info *p, int with_layer) {
    cJSON *o = cJSON_CreateObject();
    char hn[32];
    head_name(p->head, x->H, hn, sizeof hn);
    cJSON_AddStringToObject(o, "head", hn);
    if (with_layer) cJSON_AddNumberToObject(o, "layer", (double)((uint32_t)p->head / x->H));
    num(o, "before", p->before);
    num(o, "after", p->after);
    cJSON_AddBoolToObject(o, "window_found", p->win_found);
    num(o, "window_start_step", p->win_start);
    num(o, "window_end_step", p->win_end);
    cJSON_AddBoolToObject(o, "coincides_with_icl_window", p->coincide);
    num(o, "chance", x->pm_chance);
    num(o, "rise_from_chance", p->rise);
    num(o, "rise_inside_window", p->rise_inside);
    return o;
}

/* A slope of the eval-loss curve inside the window more negative than the slope of the
 * last interval that ends at or before the window start. */
static cJSON *bump_json(const ctx *x, int found, double ws, double we) {
    cJSON *bump = cJSON_CreateObject();
    double before_slope = NAN, min_in = NAN, in_t0 = NAN, in_t1 = NAN;
    int have_before = 0, have_in = 0;
    for (size_t i = 0; found && i + 1 < x->n; i++) {
        double sl = (x->loss[i + 1] - x->loss[i]) / (x->step[i + 1] - x->step[i]);
        if (x->step[i + 1] <= ws) {
            before_slope = sl;
            have_before = 1;
        } else if (x->step[i] < we && x->step[i + 1] > ws) {
            if (!have_in || sl < min_in) {
                min_in = sl;
                in_t0 = x->step[i];
                in_t1 = x->step[i + 1];
            }
            have_in = 1;
        }
    }
    if (found && have_before && have_in) cJSON_AddBoolToObject(bump, "bump", min_in < before_slope);
    else cJSON_AddNullToObject(bump, "bump");
    num(bump, "slope_before_window", before_slope);
    num(bump, "steepest_slope_in_window", min_in);
    num(bump, "steepest_interval_start_step", in_t0);
    num(bump, "steepest_interval_end_step", in_t1);
    cJSON_AddStringToObject(bump, "unit", "nats per step");
    cJSON_AddStringToObject(bump, "rule",
        "slopes s_i = (L_{i+1} - L_i)/(t_{i+1} - t_i) of eval_loss between evaluations; "
        "bump = some interval overlapping the window (t_i < end, t_{i+1} > start) has a "
        "slope below the slope of the last interval with t_{i+1} <= start; null when "
        "there is no window or no such intervals");
    return bump;
}


/* ---- the analysis ---- */

static cJSON *analyse(ctx *x, const cJSON *train, cJSON *any, double *seconds_out) {
    const uint32_t L = x->L, H = x->H, NH = x->NH;
    const double tok_per_step = (double)x->c.batch * (double)x->T;
    cJSON *ms = cJSON_CreateObject();
    double t_win = x->win.d ? 0 : NAN;
    if (x->win.d) t_win = window_evaluation(x, x->o.out);

    cJSON_AddStringToObject(ms, "name", x->name);
    cJSON_AddNumberToObject(ms, "n_layers", L);
    cJSON_AddBoolToObject(ms, "smeared_keys", x->c.smeared);
    cJSON_AddNumberToObject(ms, "n_params", (double)induct_model_n_params(x->m));
    const cJSON *tw = cJSON_GetObjectItemCaseSensitive(train, "wall_seconds");
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(train, "tokens_per_second");
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(train, "threads");
    num(ms, "wall_seconds", cJSON_IsNumber(tw) ? tw->valuedouble : NAN);
    num(ms, "tokens_per_second", cJSON_IsNumber(tt) ? tt->valuedouble : NAN);
    num(ms, "threads_at_end", cJSON_IsNumber(th) ? th->valuedouble : NAN);
    cJSON_AddNumberToObject(ms, "steps", (double)x->c.steps);
    num(ms, "final_eval_loss", x->loss[x->n - 1]);

    /* ---- phase-change window on (step, ICL score) ---- */
    induct_phase_config pc;
    induct_phase_config_init(&pc, sizeof pc);
    pc.smooth = x->o.smooth;
    double ws = NAN, we = NAN;
    uint32_t found = 0;
    if (x->n >= 2)
        lib(induct_analysis_phase_window(x->step, x->icl, x->n, &pc, &ws, &we, &found), "phase window");
    const double w_frac = found ? (we - ws) / (double)x->c.steps : NAN;
    cJSON *w = cJSON_AddObjectToObject(ms, "window");
    cJSON_AddBoolToObject(w, "found", found);
    num(w, "start_step", ws);
    num(w, "end_step", we);
    num(w, "start_tokens", ws * tok_per_step);
    num(w, "end_tokens", we * tok_per_step);
    num(w, "fraction_of_run", w_frac);
    cJSON_AddStringToObject(w, "series", x->win.d ? "window evaluation (window_evaluation)"
                                                  : "per-step curve (--eval-batch windows)");
    cJSON_AddNumberToObject(w, "smooth", pc.smooth);
    num(w, "lo_frac", pc.lo_frac);
    num(w, "hi_frac", pc.hi_frac);
    num(w, "min_change", pc.min_change);

    /* ---- the points before and after ---- */
    size_t bi = x->n - 1;
    if (found) {
        bi = last_at_or_before(x, ws);
    } else {
        for (size_t i = 0; i < x->n; i++)
            if (x->step[i] >= (double)x->c.warmup) { bi = i; break; }
    }
    const size_t ai = x->n - 1;
    const uint32_t last = (L - 1) * H;
    double pm_b = -INFINITY, pm_a = -INFINITY;
    int best = 0;
    for (uint32_t h = 0; h < H; h++) {
        pm_b = fmax(pm_b, x->pm[bi * NH + last + h]);
        if (x->pm[ai * NH + last + h] > pm_a) {
            pm_a = x->pm[ai * NH + last + h];
            best = (int)h;
        }
    }
    double pm_any = 0;
    for (size_t i = 0; i < x->n * NH; i++) pm_any = fmax(pm_any, x->pm[i]);

    /* ---- the large evaluation: the final model and, with a window, the weights kept at
     * the evaluation before it; the per-step evaluation's own standard error ---- */
    double t_eval = cli_now();
    double *curve = run_xcalloc(x->T - 1, sizeof *curve);
    est ea = icl_groups(x, x->m, &x->big, curve), eb;
    memset(&eb, 0, sizeof eb);
    if (found) {
        char name[64];
        snprintf(name, sizeof name, "weights/step-%.0f.safetensors", x->step[bi]);
        char *p = run_path(x->o.out, name);
        induct_model *mb = NULL;
        int rc = induct_model_load(&mb, p);
        if (rc) cli_lib_fail(rc, p);
        lib(induct_model_set_threads(mb, x->o.threads), "setting threads");
        eb = icl_groups(x, mb, &x->big, NULL);
        induct_model_free(mb);
        free(p);
    }
    est eps = icl_groups(x, x->m, &x->ps, NULL);
    const double t_large = cli_now() - t_eval;
    double icl_before, icl_before_se, icl_fall = NAN, icl_fall_se = NAN;
    if (found) {
        icl_before = eb.e.icl;
        icl_before_se = eb.e.icl_se;
        paired(eb.groups, ea.groups, ea.e.n_groups, &icl_fall, &icl_fall_se);
    } else {
        icl_before = x->icl[bi];
        icl_before_se = x->icl_se ? x->icl_se[bi] : eps.e.icl_se;
    }
    cJSON_AddStringToObject(ms, "icl_estimator",
                            x->c.icl_band ? "band: mean L over ±icl_band tokens around each index"
                                          : "single tokens (docs/definitions.md)");
    num(ms, "icl_before", icl_before);
    num(ms, "icl_before_se", icl_before_se);
    num(ms, "icl_token_before", found ? eb.e.icl_token : x->icl_token[bi]);
    num(ms, "icl_token_before_se", found ? eb.e.icl_token_se : eps.e.icl_token_se);
    num(ms, "icl_before_step", x->step[bi]);
    cJSON_AddStringToObject(ms, "icl_before_rule",
                            found ? "last evaluation at or before the window start"
                                  : "no window: first evaluation at or after the warm-up");
    cJSON_AddStringToObject(ms, "icl_before_evaluation",
                            found ? "large (the weights kept at that evaluation)"
                            : x->win.d ? "window evaluation (no window: no large evaluation)"
                                       : "per-step (no window: no large evaluation)");
    num(ms, "icl_after", ea.e.icl);
    num(ms, "icl_after_se", ea.e.icl_se);
    num(ms, "icl_token_after", ea.e.icl_token);
    num(ms, "icl_token_after_se", ea.e.icl_token_se);
    num(ms, "icl_after_step", x->step[ai]);
    cJSON_AddItemToObject(ms, "icl_after_groups", double_list(ea.groups, ea.e.n_groups));
    num(ms, "icl_fall", icl_fall);
    num(ms, "icl_fall_se", icl_fall_se);
    if (x->win.d) {
        cJSON *we_ = cJSON_AddObjectToObject(ms, "window_evaluation");
        cJSON_AddNumberToObject(we_, "windows", (double)x->win.groups * x->win.per);
        cJSON_AddNumberToObject(we_, "groups", x->win.groups);
        cJSON_AddItemToObject(we_, "steps", double_list(x->step, x->n));
        cJSON_AddItemToObject(we_, "icl", double_list(x->icl, x->n));
        cJSON_AddItemToObject(we_, "icl_se", double_list(x->icl_se, x->n));
        num(we_, "seconds", t_win);
        cJSON_AddStringToObject(we_, "note",
            "the window rule's series: the band ICL score of the weights kept at every "
            "evaluation, on these windows (bands only), standard errors by batch means");
    }
    cJSON *pse = cJSON_AddObjectToObject(ms, "per_step");
    num(pse, "icl_final", x->icl_band[ai]);
    num(pse, "icl_token_final", x->icl_token[ai]);
    num(pse, "icl_se", eps.e.icl_se);
    num(pse, "icl_token_se", eps.e.icl_token_se);
    cJSON_AddStringToObject(pse, "note",
        "the per-step evaluations (curves, and the window rule with --window-windows 0) use "
        "--eval-batch windows; their standard error is measured on the final model in "
        "groups of those windows");
    num(ms, "large_evaluation_seconds", t_large);
    cJSON_AddItemToObject(ms, "loss_by_position_final", double_list(curve, x->T - 1));
    cJSON_AddNumberToObject(ms, "loss_by_position_final_windows",
                            (double)(x->big.groups / 8 ? x->big.groups / 8 : 1) * x->big.per);
    free(curve);
    free(ea.groups);
    free(eb.groups);
    free(eps.groups);
    num(ms, "pm_before", pm_b);
    num(ms, "pm_after", pm_a);
    num(ms, "pm_max_any_head_any_step", pm_any);

    /* the last-layer head with the largest final prefix-matching score, and its window */
    pm_info ph = pm_head_info(x, (int)(last + (uint32_t)best), bi, ai, &pc, (int)found, ws, we);
    cJSON_AddItemToObject(ms, "pm_head", pm_head_json(x, &ph, 0));
    cJSON_AddItemToObject(ms, "bump", bump_json(x, (int)found, ws, we));

    uint32_t *labels;
    float *pm;
    double t_ablation = analyse_heads(x, ms, ea.e.icl, &labels, &pm);
    char hn[32];


    /* ---- every layer: where the induction heads are (the fields above read the last
     * layer, where a 2-layer attention-only model's induction head sits) ---- */
    int best_any = 0;
    double pm_b_any = -INFINITY, pm_a_any = -INFINITY;
    for (uint32_t i = 0; i < NH; i++) {
        pm_b_any = fmax(pm_b_any, x->pm[bi * NH + i]);
        if (x->pm[ai * NH + i] > pm_a_any) {
            pm_a_any = x->pm[ai * NH + i];
            best_any = (int)i;
        }
    }
    num(any, "pm_before", pm_b_any);
    num(any, "pm_after", pm_a_any);
    pm_info pa = pm_head_info(x, best_any, bi, ai, &pc, (int)found, ws, we);
    cJSON_AddItemToObject(any, "pm_head", pm_head_json(x, &pa, 1));
    cJSON *ih = cJSON_AddArrayToObject(any, "induction_heads");
    for (uint32_t i = 0; i < NH; i++) {
        if (labels[i] != INDUCT_HEAD_INDUCTION) continue;
        cJSON *h = cJSON_CreateObject();
        head_name((int)i, H, hn, sizeof hn);
        cJSON_AddStringToObject(h, "head", hn);
        cJSON_AddNumberToObject(h, "layer", i / H);
        num(h, "relative_depth", (double)(i / H + 1) / (double)L);
        num(h, "prefix_matching", pm[i]);
        cJSON_AddItemToArray(ih, h);
    }
    cJSON_AddStringToObject(any, "note",
        "every layer's heads: pm_head is the head of any layer with the largest final "
        "prefix-matching score (the model's pm_head: of the last layer), with the same "
        "rules; induction_heads are the heads classified induction, with their layer and "
        "relative depth (layer + 1) / n_layers");
    *seconds_out = (x->win.d ? t_win : 0) + t_large + t_ablation;
    free(pm);
    free(labels);
    return ms;
}

int main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"out", required_argument, 0, 0}, {"icl-windows", required_argument, 0, 0},
        {"icl-groups", required_argument, 0, 0}, {"ablation-windows", required_argument, 0, 0},
        {"window-windows", required_argument, 0, 0}, {"smooth", required_argument, 0, 0},
        {"induction-threshold", required_argument, 0, 0},
        {"previous-token-threshold", required_argument, 0, 0},
        {"duplicate-threshold", required_argument, 0, 0}, {"threads", required_argument, 0, 0},
        {"check", no_argument, 0, 0}, {0, 0, 0, 0}};
    ctx x;
    memset(&x, 0, sizeof x);
    x.o = DEFAULTS;
    cli_init("study-analyse", "--out DIR [options]", help);
    cli_parse(argc, argv, longopts, on_option, &x.o);
    if (x.o.check) { /* the settings, for the runner's estimate */
        printf("{\"icl_windows\": %u, \"icl_groups\": %u, \"ablation_windows\": %u, "
               "\"window_windows\": %u}\n", x.o.icl_windows, x.o.icl_groups,
               x.o.ablation_windows, x.o.window_windows);
        return 0;
    }
    if (!x.o.out) cli_usage_error("give --out DIR (a run directory of study-train)");
    const char *dir = x.o.out;
    double t0 = cli_now();

    /* the run's settings, and whether it is complete */
    char *cp = run_path(dir, "config.json"), *tp = run_path(dir, "train.json");
    x.config_json = run_read_json(cp);
    if (!x.config_json) fail("cannot read %s: not a run directory of study-train", cp);
    char err[256];
    if (run_config_from_json(&x.c, x.config_json, err, sizeof err)) fail("%s: %s", cp, err);
    cJSON *train = run_read_json(tp);
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(train, "complete")))
        fail("%s is not trained to the end (no %s): run study-train first", dir, tp);
    x.name = x.c.model;
    x.L = x.c.n_layers;
    x.H = x.c.heads;
    x.NH = x.L * x.H;
    x.T = x.c.seq_len;
    x.E = x.c.eval_batch;
    run_icl_tokens(&x.c, &x.early, &x.late, &x.icl_metric);

    /* the data: the driver's evaluation set (the head scores read it too), the large
     * evaluation, the ablations' and the window evaluation's windows of the same text */
    lib(run_open_dataset(&x.c, x.c.eval_windows, &x.d), "reading the data");
    lib(induct_dataset_set_repeats(x.d, x.c.repeat_fraction, x.c.repeat_min, x.c.repeat_max),
        "setting the repeated-span curriculum");
    x.ps = (evalset){x.d, 0, 0};
    grouping(x.E, 8, &x.ps.groups, &x.ps.per);
    x.big = open_evalset(&x, x.o.icl_windows, x.o.icl_groups, &x.d_big);
    x.abl = open_evalset(&x, x.o.ablation_windows, x.o.icl_groups, &x.d_abl);
    if (x.o.window_windows) {
        uint64_t n = 0;
        lib(run_open_dataset(&x.c, x.o.window_windows, &x.d_win), "reading the data");
        lib(induct_dataset_window_count(x.d_win, INDUCT_SPLIT_EVAL, x.T, &n), "counting windows");
        /* groups of 256 windows, as the large evaluation's (at least 2) */
        x.win = (evalset){x.d_win, 0, 0};
        grouping(n, n >= 512 ? (uint32_t)(n / 256) : 2, &x.win.groups, &x.win.per);
    }
    {
        /* prefix matching under uniform attention on the dataset's probe ([BOS] + 25 x 4,
         * the metric's): mean over queries p in repeats r = 2..4 of (r - 1)/(p + 1) */
        induct_probe_config pr;
        lib(induct_probe_config_for_dataset(&pr, sizeof pr, x.d), "the probe");
        double sum = 0;
        size_t cnt = 0;
        for (uint32_t r = 2; r <= pr.n_repeats; r++)
            for (uint32_t i = 0; i < pr.block_len; i++) {
                uint32_t p = (pr.bos >= 0) + (r - 1) * pr.block_len + i;
                sum += (double)(r - 1) / (double)(p + 1);
                cnt++;
            }
        x.pm_chance = sum / (double)cnt;
    }
    read_metrics(&x, dir);
    char *fp = run_path(dir, "final.safetensors");
    int rc = induct_model_load(&x.m, fp);
    if (rc) cli_lib_fail(rc, fp);
    lib(induct_model_set_threads(x.m, x.o.threads), "setting threads");

    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", ANALYSIS_FORMAT);
    cJSON *any = cJSON_CreateObject();
    double seconds = 0;
    cJSON_AddItemToObject(root, "model", analyse(&x, train, any, &seconds));
    cJSON_AddItemToObject(root, "any_layer", any);
    cJSON_AddItemToObject(root, "config", config_json(&x));
    /* the figure's repeated passage: the first 40 tokens of evaluation window 0, twice */
    int32_t *tok = run_xcalloc(x.T, sizeof *tok);
    lib(induct_dataset_batch(x.d, INDUCT_SPLIT_EVAL, 0, 1, x.T, tok, x.T, NULL, 0),
        "reading an evaluation window");
    cJSON *rp = cJSON_AddArrayToObject(root, "attention_probe_tokens");
    for (int k = 0; k < 80; k++) cJSON_AddItemToArray(rp, cJSON_CreateNumber(tok[k % 40]));
    free(tok);
    cJSON_AddNumberToObject(root, "threads", x.o.threads);
    run_add_num(root, "seconds", cli_now() - t0);
    char *ap = run_path(dir, "analysis.json");
    if (run_write_json(ap, root)) {
        fprintf(stderr, "study-analyse: cannot write %s: %s\n", ap, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    printf("study-analyse: [%s] %s (%.1f s of evaluations)\n", x.name, ap, seconds);
    free(ap);
    free(fp);
    free(cp);
    free(tp);
    cJSON_Delete(root);
    cJSON_Delete(train);
    cJSON_Delete(x.config_json);
    induct_model_free(x.m);
    induct_dataset_free(x.d);
    induct_dataset_free(x.d_big);
    induct_dataset_free(x.d_abl);
    induct_dataset_free(x.d_win);
    free(x.step);
    free(x.loss);
    free(x.icl_logged);
    free(x.icl_token);
    free(x.icl_band);
    free(x.icl);
    free(x.icl_se);
    free(x.pm);
    free(x.pt);
    return 0;
}
