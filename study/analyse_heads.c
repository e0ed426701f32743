/* study-analyse: the heads (docs/phase-change.md, "What is measured": "Prefix matching",
 * "Heads" and "Ablation"): prefix matching over training, of the last layer's heads and of
 * every layer's; the final model's head scores and classes; ablation attribution. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analyse.h"
#include "cli.h"

#define num run_add_num
/* Smallest change of a prefix-matching series that counts as a window (reported only;
 * the checks' rules are in study/checks.py). */
#define PM_MIN_CHANGE 0.10

/* ---- prefix matching over training ---- */

uint32_t pm_best_head(const ctx *x, uint32_t first, uint32_t count, const window *w,
                      double *pm_before, double *pm_after) {
    const float *b = x->pm + w->before * x->NH, *a = x->pm + w->after * x->NH;
    double pm_b = -INFINITY, pm_a = -INFINITY;
    uint32_t best = first;
    for (uint32_t i = first; i < first + count; i++) {
        pm_b = fmax(pm_b, b[i]);
        if (a[i] > pm_a) {
            pm_a = a[i];
            best = i;
        }
    }
    *pm_before = pm_b;
    *pm_after = pm_a;
    return best;
}

/* y at step t, linear between evaluations (clamped to the first and last). */
static double interp_at(const ctx *x, const double *y, double t) {
    if (!(t > x->step[0])) return y[0];
    for (size_t i = 0; i + 1 < x->n; i++)
        if (t <= x->step[i + 1])
            return y[i] + (y[i + 1] - y[i]) * (t - x->step[i]) / (x->step[i + 1] - x->step[i]);
    return y[x->n - 1];
}

cJSON *pm_head_json(const ctx *x, uint32_t head, const window *w, int with_layer) {
    double *pmh = run_xcalloc(x->n, sizeof *pmh);
    for (size_t i = 0; i < x->n; i++) pmh[i] = x->pm[i * x->NH + head];
    /* the series' own window (PM_MIN_CHANGE) */
    induct_phase_config pcp = w->pc;
    pcp.min_change = PM_MIN_CHANGE;
    double ws = NAN, we = NAN;
    uint32_t found = 0;
    if (x->n >= 2)
        lib(induct_analysis_phase_window(x->step, pmh, x->n, &pcp, &ws, &we, &found),
            "prefix-matching window");
    /* its rise from chance, and the part of it inside the ICL window (interpolated) */
    const double rise = pmh[w->after] - x->pm_chance;
    const double rise_inside =
        w->found ? interp_at(x, pmh, w->end) - interp_at(x, pmh, w->start) : NAN;
    /* the windows coincide if they overlap, with one evaluation interval of slack */
    const double slack = (double)x->c.eval_every;
    const int coincide =
        w->found && found && ws <= w->end + slack && we >= w->start - slack;
    cJSON *o = cJSON_CreateObject();
    char hn[32];
    head_name((int)head, x->H, hn, sizeof hn);
    cJSON_AddStringToObject(o, "head", hn);
    if (with_layer) cJSON_AddNumberToObject(o, "layer", (double)(head / x->H));
    num(o, "before", pmh[w->before]);
    num(o, "after", pmh[w->after]);
    cJSON_AddBoolToObject(o, "window_found", found);
    num(o, "window_start_step", ws);
    num(o, "window_end_step", we);
    cJSON_AddBoolToObject(o, "coincides_with_icl_window", coincide);
    num(o, "chance", x->pm_chance);
    num(o, "rise_from_chance", rise);
    num(o, "rise_inside_window", rise_inside);
    free(pmh);
    return o;
}

/* ---- the final model's heads: scores, classes, ablations ---- */

static void add_head_or_null(cJSON *o, const char *key, int idx, uint32_t H) {
    char hn[32];
    if (idx < 0) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    head_name(idx, H, hn, sizeof hn);
    cJSON_AddStringToObject(o, key, hn);
}

/* The ICL estimate of the ablation evaluation with the heads idx[0..n) zero-ablated,
 * patterns preserved (pp) or not; the ablations are cleared again. */
static est ablated(const ctx *x, const uint32_t *idx, uint32_t n, int pp) {
    lib(induct_model_set_preserve_patterns(x->m, (uint32_t)pp), "preserving patterns");
    for (uint32_t i = 0; i < n; i++)
        lib(induct_model_ablate_head(x->m, idx[i] / x->H, idx[i] % x->H, INDUCT_ABLATE_ZERO),
            "ablating a head");
    est e = icl_groups(x, x->m, &x->abl, NULL);
    lib(induct_model_clear_ablations(x->m), "clearing ablations");
    return e;
}

double analyse_heads(const ctx *x, cJSON *ms, double score, uint32_t **labels_out,
                     float **pm_out) {
    const uint32_t L = x->L, H = x->H, NH = x->NH;
    /* ---- the heads' scores and classes ---- */
    float *pt = run_xcalloc(NH, sizeof *pt), *pm = run_xcalloc(NH, sizeof *pm),
          *dup = run_xcalloc(NH, sizeof *dup);
    uint32_t *labels = run_xcalloc(NH, sizeof *labels);
    size_t len;
    induct_classify_config cc;
    induct_classify_config_init(&cc, sizeof cc);
    if (!isnan(x->o.thr_induction)) cc.induction = x->o.thr_induction;
    if (!isnan(x->o.thr_previous)) cc.previous_token = x->o.thr_previous;
    if (!isnan(x->o.thr_duplicate)) cc.duplicate = x->o.thr_duplicate;
    induct_probe_config probe; /* the data's BOS, as the driver's prefix-matching metric */
    lib(induct_probe_config_for_dataset(&probe, sizeof probe, x->d), "the probe");
    lib(induct_analysis_previous_token_score(x->m, x->d, x->E, x->T, pt, NH, &len), "head scores");
    lib(induct_analysis_prefix_matching(x->m, &probe, pm, NH, &len), "head scores");
    lib(induct_analysis_duplicate_token(x->m, &probe, dup, NH, &len), "head scores");
    lib(induct_analysis_classify_heads(pt, pm, dup, NULL, NH, &cc, labels, NH, &len), "head classes");
    cJSON *hd = cJSON_AddObjectToObject(ms, "heads");
    cJSON *ind = cJSON_AddArrayToObject(hd, "induction");
    cJSON *prev = cJSON_AddArrayToObject(hd, "previous_token_heads");
    cJSON *dupl = cJSON_AddArrayToObject(hd, "duplicate_token_heads");
    cJSON *lab = cJSON_CreateArray();
    static const char *const label_names[] = {"other", "previous_token", "induction", "duplicate"};
    uint32_t n_induction = 0;
    char hn[32];
    for (uint32_t l = 0; l < L; l++) {
        cJSON *row = cJSON_CreateArray();
        for (uint32_t h = 0; h < H; h++) {
            uint32_t c = labels[l * H + h];
            cJSON_AddItemToArray(row, cJSON_CreateString(c < 4 ? label_names[c] : "?"));
            head_name((int)(l * H + h), H, hn, sizeof hn);
            if (c == INDUCT_HEAD_INDUCTION) {
                cJSON_AddItemToArray(ind, cJSON_CreateString(hn));
                n_induction++;
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
    num(thr, "previous_token", cc.previous_token);
    num(thr, "induction", cc.induction);
    num(thr, "duplicate", cc.duplicate);
    cJSON_AddStringToObject(hd, "note", "classified without copying scores (the empirical "
                                        "copying score mislabels induction heads)");

    /* ---- ablation: the ICL score with one head, or all induction heads, zero-ablated;
     * plain and pattern-preserving ---- */
    float *dz = run_xcalloc(NH, sizeof *dz), *dpp = run_xcalloc(NH, sizeof *dpp);
    float *dz_se = run_xcalloc(NH, sizeof *dz_se), *dpp_se = run_xcalloc(NH, sizeof *dpp_se);
    double icl_clean = NAN, icl_clean_pp = NAN, icl_ind = NAN, icl_ind_pp = NAN;
    double clean_se = NAN, clean_pp_se = NAN, rem_ind = NAN, rem_ind_se = NAN;
    double t_abl = cli_now();
    for (int pp = 0; pp < 2; pp++) {
        float *delta = pp ? dpp : dz, *delta_se = pp ? dpp_se : dz_se;
        est clean = ablated(x, NULL, 0, pp);
        *(pp ? &icl_clean_pp : &icl_clean) = clean.e.icl;
        *(pp ? &clean_pp_se : &clean_se) = clean.e.icl_se;
        for (uint32_t i = 0; i < NH; i++) {
            est v = ablated(x, &i, 1, pp);
            double dm, dse;
            paired(v.groups, clean.groups, clean.e.n_groups, &dm, &dse);
            delta[i] = (float)dm;
            delta_se[i] = (float)dse;
            free(v.groups);
        }
        if (n_induction > 0) {
            uint32_t *set = run_xcalloc(NH, sizeof *set), n = 0;
            for (uint32_t i = 0; i < NH; i++)
                if (labels[i] == INDUCT_HEAD_INDUCTION) set[n++] = i;
            est v = ablated(x, set, n, pp);
            free(set);
            *(pp ? &icl_ind_pp : &icl_ind) = v.e.icl;
            if (!pp) paired(v.groups, clean.groups, clean.e.n_groups, &rem_ind, &rem_ind_se);
            free(v.groups);
        }
        free(clean.groups);
    }
    const double t_ablation = cli_now() - t_abl;
    /* fractions of the model's final ICL score (the large evaluation), defined when it is
     * negative (context helps) */
    const int defined = score < 0;
    const double frac_ind = defined && n_induction ? (icl_ind - icl_clean) / -score : NAN;
    const double frac_ind_pp = defined && n_induction ? (icl_ind_pp - icl_clean_pp) / -score : NAN;
    /* the largest fraction one non-induction head removes, plainly and pattern-preserving */
    double max_other = NAN, max_other_pp = NAN;
    int max_head = -1, max_head_pp = -1;
    for (uint32_t i = 0; i < NH && defined; i++) {
        if (labels[i] == INDUCT_HEAD_INDUCTION) continue;
        double f = (double)dz[i] / -score, fp = (double)dpp[i] / -score;
        if (max_head < 0 || f > max_other) {
            max_other = f;
            max_head = (int)i;
        }
        if (max_head_pp < 0 || fp > max_other_pp) {
            max_other_pp = fp;
            max_head_pp = (int)i;
        }
    }
    cJSON *ab = cJSON_AddObjectToObject(ms, "ablation");
    num(ab, "icl_clean", icl_clean);
    num(ab, "icl_clean_se", clean_se);
    num(ab, "icl_clean_preserve_patterns", icl_clean_pp);
    num(ab, "icl_clean_preserve_patterns_se", clean_pp_se);
    cJSON_AddItemToObject(ab, "delta_icl_zero", head_table(dz, L, H));
    cJSON_AddItemToObject(ab, "delta_icl_zero_se", head_table(dz_se, L, H));
    cJSON_AddItemToObject(ab, "delta_icl_zero_preserve_patterns", head_table(dpp, L, H));
    cJSON_AddItemToObject(ab, "delta_icl_zero_preserve_patterns_se", head_table(dpp_se, L, H));
    num(ab, "removed_by_induction_heads", rem_ind);
    num(ab, "removed_by_induction_heads_se", rem_ind_se);
    num(ab, "seconds", t_ablation);
    num(ab, "icl_induction_heads_ablated", icl_ind);
    num(ab, "icl_induction_heads_ablated_preserve_patterns", icl_ind_pp);
    num(ab, "fraction_removed_by_induction_heads", frac_ind);
    num(ab, "fraction_removed_by_induction_heads_preserve_patterns", frac_ind_pp);
    num(ab, "max_fraction_removed_by_other_head", max_other);
    add_head_or_null(ab, "max_other_head", max_head, H);
    num(ab, "max_fraction_removed_by_other_head_preserve_patterns", max_other_pp);
    add_head_or_null(ab, "max_other_head_preserve_patterns", max_head_pp, H);
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
    free(dup);
    free(dz);
    free(dpp);
    free(dz_se);
    free(dpp_se);
    *labels_out = labels;
    *pm_out = pm;
    return t_ablation;
}

/* ---- every layer ---- */

void any_layer(const ctx *x, cJSON *any, const window *w, const uint32_t *labels,
               const float *pm) {
    double pm_b, pm_a;
    uint32_t best = pm_best_head(x, 0, x->NH, w, &pm_b, &pm_a);
    num(any, "pm_before", pm_b);
    num(any, "pm_after", pm_a);
    cJSON_AddItemToObject(any, "pm_head", pm_head_json(x, best, w, 1));
    cJSON *ih = cJSON_AddArrayToObject(any, "induction_heads");
    char hn[32];
    for (uint32_t i = 0; i < x->NH; i++) {
        if (labels[i] != INDUCT_HEAD_INDUCTION) continue;
        cJSON *h = cJSON_CreateObject();
        head_name((int)i, x->H, hn, sizeof hn);
        cJSON_AddStringToObject(h, "head", hn);
        cJSON_AddNumberToObject(h, "layer", i / x->H);
        num(h, "relative_depth", (double)(i / x->H + 1) / (double)x->L);
        num(h, "prefix_matching", pm[i]);
        cJSON_AddItemToArray(ih, h);
    }
    cJSON_AddStringToObject(any, "note",
        "every layer's heads: pm_head is the head of any layer with the largest final "
        "prefix-matching score (the model's pm_head: of the last layer), with the same "
        "rules; induction_heads are the heads classified induction, with their layer and "
        "relative depth (layer + 1) / n_layers");
}
