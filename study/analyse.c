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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyse.h"
#include "cli.h"

#define ANALYSIS_FORMAT "libinduct study analysis 1"

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

#define num run_add_num

/* ---- the model's ICL figures ---- */

/* The run's facts: its name, size, training time (train.json) and final loss. */
static void add_run(const ctx *x, cJSON *ms, const cJSON *train) {
    cJSON_AddStringToObject(ms, "name", x->name);
    cJSON_AddNumberToObject(ms, "n_layers", x->L);
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
}

/* The phase-change window on (step, ICL score) by the library's window rule ("window"),
 * and the evaluations before and after it. */
static window find_window(const ctx *x, cJSON *ms) {
    window w;
    memset(&w, 0, sizeof w);
    induct_phase_config_init(&w.pc, sizeof w.pc);
    w.pc.smooth = x->o.smooth;
    w.start = w.end = NAN;
    if (x->n >= 2)
        lib(induct_analysis_phase_window(x->step, x->icl, x->n, &w.pc, &w.start, &w.end,
                                         &w.found),
            "phase window");
    const double tok_per_step = (double)x->c.batch * (double)x->T;
    cJSON *o = cJSON_AddObjectToObject(ms, "window");
    cJSON_AddBoolToObject(o, "found", w.found);
    num(o, "start_step", w.start);
    num(o, "end_step", w.end);
    num(o, "start_tokens", w.start * tok_per_step);
    num(o, "end_tokens", w.end * tok_per_step);
    num(o, "fraction_of_run", w.found ? (w.end - w.start) / (double)x->c.steps : NAN);
    cJSON_AddStringToObject(o, "series", x->win.d ? "window evaluation (window_evaluation)"
                                                  : "per-step curve (--eval-batch windows)");
    cJSON_AddNumberToObject(o, "smooth", w.pc.smooth);
    num(o, "lo_frac", w.pc.lo_frac);
    num(o, "hi_frac", w.pc.hi_frac);
    num(o, "min_change", w.pc.min_change);
    /* before: the last evaluation at or before the window start; without a window, the
     * first at or after the warm-up */
    w.before = x->n - 1;
    if (w.found) {
        w.before = 0;
        for (size_t i = 0; i < x->n; i++)
            if (x->step[i] <= w.start) w.before = i;
    } else {
        for (size_t i = 0; i < x->n; i++)
            if (x->step[i] >= (double)x->c.warmup) { w.before = i; break; }
    }
    w.after = x->n - 1;
    return w;
}

/* The ICL score before and after (the large evaluation: the final model and, with a
 * window, the weights kept at the evaluation before it; their paired fall), the window
 * evaluation's series, the per-step evaluation's own standard error and the final loss
 * curve. *icl_after: the final ICL score; returns the large evaluation's seconds. */
static double icl_figures(const ctx *x, cJSON *ms, const window *w, double t_win,
                          double *icl_after) {
    const size_t bi = w->before, ai = w->after;
    const int found = (int)w->found;
    double t_eval = cli_now();
    double *curve = run_xcalloc(x->T - 1, sizeof *curve);
    est ea = icl_groups(x, x->m, &x->big, curve), eb;
    memset(&eb, 0, sizeof eb);
    if (found) {
        induct_model *mb = load_kept(x, x->step[bi]);
        eb = icl_groups(x, mb, &x->big, NULL);
        induct_model_free(mb);
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
    *icl_after = ea.e.icl;
    return t_large;
}

/* A slope of the eval-loss curve inside the window more negative than the slope of the
 * last interval that ends at or before the window start. */
static cJSON *bump_json(const ctx *x, const window *w) {
    const int found = (int)w->found;
    const double ws = w->start, we = w->end;
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
    cJSON *ms = cJSON_CreateObject();
    const double t_win = x->win.d ? window_evaluation(x) : NAN;
    add_run(x, ms, train);
    const window w = find_window(x, ms);
    double icl_after;
    const double t_large = icl_figures(x, ms, &w, t_win, &icl_after);

    /* prefix matching: the last layer's heads, where a 2-layer attention-only model's
     * induction head sits (any_layer below: every layer's) */
    double pm_b, pm_a, pm_any = 0;
    const uint32_t best = pm_best_head(x, (x->L - 1) * x->H, x->H, &w, &pm_b, &pm_a);
    for (size_t i = 0; i < x->n * x->NH; i++) pm_any = fmax(pm_any, x->pm[i]);
    num(ms, "pm_before", pm_b);
    num(ms, "pm_after", pm_a);
    num(ms, "pm_max_any_head_any_step", pm_any);
    cJSON_AddItemToObject(ms, "pm_head", pm_head_json(x, best, &w, 0));
    cJSON_AddItemToObject(ms, "bump", bump_json(x, &w));

    uint32_t *labels;
    float *pm;
    const double t_ablation = analyse_heads(x, ms, icl_after, &labels, &pm);
    any_layer(x, any, &w, labels, pm);
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
    double t0 = cli_now();
    cJSON *train = open_run(&x);

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
    char *ap = run_path(x.o.out, "analysis.json");
    if (run_write_json(ap, root)) {
        fprintf(stderr, "study-analyse: cannot write %s: %s\n", ap, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    printf("study-analyse: [%s] %s (%.1f s of evaluations)\n", x.name, ap, seconds);
    free(ap);
    cJSON_Delete(root);
    cJSON_Delete(train);
    close_run(&x);
    return 0;
}
