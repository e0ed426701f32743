/* analysis: the statistics the phase-change checks rest on — batch means, paired
 * differences, the band ICL estimator on a loss curve, and the ICL score over groups of
 * evaluation windows with standard errors (docs/analysis.md, "Standard errors"). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"

/* The one place the batch-means formula is written: mean, and the sample standard
 * deviation over sqrt(n) (NaN for n = 1), summed in index order. */
static void mean_se(const double *x, size_t n, double *mean, double *se) {
    double m = 0, v = 0;
    for (size_t i = 0; i < n; i++) m += x[i];
    m /= (double)n;
    for (size_t i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    *mean = m;
    *se = n >= 2 ? sqrt(v / (double)(n - 1) / (double)n) : NAN;
}

static int finite_values(const double *x, size_t n, const char *fn, const char *what) {
    for (size_t i = 0; i < n; i++)
        INDUCT_FAIL_IF(!isfinite(x[i]), INDUCT_EINVAL, "%s: %s[%zu] is not finite", fn, what, i);
    return INDUCT_OK;
}

INDUCT_API int induct_analysis_batch_means(const double *x, size_t n, double *mean_out,
                                           double *se_out) {
    const char *fn = "induct_analysis_batch_means";
    INDUCT_FAIL_IF(!x || !mean_out || !se_out, INDUCT_EINVAL, "%s: NULL argument", fn);
    INDUCT_FAIL_IF(n == 0, INDUCT_EINVAL, "%s: needs at least one value", fn);
    INDUCT_TRY(finite_values(x, n, fn, "x"));
    mean_se(x, n, mean_out, se_out);
    return INDUCT_OK;
}

INDUCT_API int induct_analysis_paired_difference(const double *a, const double *b, size_t n,
                                                 double *mean_out, double *se_out) {
    const char *fn = "induct_analysis_paired_difference";
    INDUCT_FAIL_IF(!a || !b || !mean_out || !se_out, INDUCT_EINVAL, "%s: NULL argument", fn);
    INDUCT_FAIL_IF(n == 0, INDUCT_EINVAL, "%s: needs at least one pair", fn);
    INDUCT_TRY(finite_values(a, n, fn, "a"));
    INDUCT_TRY(finite_values(b, n, fn, "b"));
    size_t bytes;
    INDUCT_FAIL_IF(!induct__mul(n, sizeof(double), &bytes), INDUCT_ELIMIT, "%s: n %zu is too large",
                   fn, n);
    double *d = malloc(bytes);
    INDUCT_FAIL_IF(!d, INDUCT_ENOMEM, "%s: out of memory for %zu differences", fn, n);
    for (size_t i = 0; i < n; i++) d[i] = a[i] - b[i];
    mean_se(d, n, mean_out, se_out);
    free(d);
    return INDUCT_OK;
}

/* Band arguments against a curve of len indices. */
static int band_check(size_t len, uint32_t early, uint32_t late, uint32_t band, const char *fn) {
    INDUCT_FAIL_IF(early == 0 || late <= early, INDUCT_EINVAL,
                   "%s: needs 1 <= early < late (got early %u, late %u)", fn, early, late);
    INDUCT_FAIL_IF(band >= early, INDUCT_ERANGE,
                   "%s: the band of token %u (+-%u) starts before the first context index: "
                   "needs band < early", fn, early, band);
    INDUCT_FAIL_IF((uint64_t)late + band > len, INDUCT_ERANGE,
                   "%s: the band of token %u (+-%u) ends past the curve's %zu indices", fn, late,
                   band, len);
    return INDUCT_OK;
}

/* The estimator without checks: the bands are inside the curve. */
static double band_icl(const float *avg, uint32_t early, uint32_t late, uint32_t w) {
    double a = 0, b = 0;
    for (uint32_t k = 0; k <= 2 * w; k++) {
        a += avg[late - 1 - w + k];
        b += avg[early - 1 - w + k];
    }
    return (a - b) / (double)(2 * w + 1);
}

INDUCT_API int induct_analysis_icl_band(const float *curve, size_t len, uint32_t early,
                                        uint32_t late, uint32_t band, double *icl_out) {
    const char *fn = "induct_analysis_icl_band";
    INDUCT_FAIL_IF(!curve || !icl_out, INDUCT_EINVAL, "%s: NULL argument", fn);
    INDUCT_TRY(band_check(len, early, late, band, fn));
    for (uint32_t k = 0; k <= 2 * band; k++) {
        size_t i = early - 1 - band + k, j = late - 1 - band + k;
        INDUCT_FAIL_IF(!isfinite(curve[i]) || !isfinite(curve[j]), INDUCT_EINVAL,
                       "%s: a loss in a band is not finite (index %zu or %zu)", fn, i, j);
    }
    *icl_out = band_icl(curve, early, late, band);
    return INDUCT_OK;
}

INDUCT_API int induct_icl_groups_config_init(induct_icl_groups_config *cfg, size_t size) {
    INDUCT__CONFIG_INIT_CHECK(cfg, size, sizeof(induct_icl_groups_config));
    memset(cfg, 0, size);
    cfg->size = size;
    cfg->n_groups = 32;
    cfg->per_group = 256;
    cfg->seq_len = 0;
    cfg->chunk = 8;
    cfg->early = 50;
    cfg->late = 500;
    cfg->band = 5;
    cfg->split = INDUCT_SPLIT_EVAL;
    cfg->curve_groups = 0;
    return INDUCT_OK;
}

/* The context indices the estimator reads: the +-w bands around early - 1 and late - 1,
 * merged and strictly increasing (induct_eval_config.positions) into out [2 (2w + 1)];
 * returns how many. */
static uint32_t band_positions(uint32_t early, uint32_t late, uint32_t w, uint32_t *out) {
    uint32_t n = 0;
    for (uint32_t k = 0; k <= 2 * w; k++) out[n++] = early - 1 - w + k;
    for (uint32_t k = 0; k <= 2 * w; k++)
        if (late - 1 - w + k > out[n - 1]) out[n++] = late - 1 - w + k;
    return n;
}

INDUCT_API int induct_analysis_icl_groups(induct_model *m, const induct_dataset *d,
                                          const induct_icl_groups_config *cfg,
                                          induct_icl_estimate *out, double *group_icl_out,
                                          size_t group_cap, double *curve_out,
                                          size_t curve_cap) {
    const char *fn = "induct_analysis_icl_groups";
    INDUCT_FAIL_IF(!m || !d || !out, INDUCT_EINVAL, "%s: NULL model, dataset or out", fn);
    size_t out_size;
    memcpy(&out_size, out, sizeof out_size);
    INDUCT_FAIL_IF(out_size < sizeof(induct_icl_estimate) || out_size > INDUCT__STRUCT_SIZE_CAP,
                   INDUCT_EABI, "%s: out->size is %zu; this library accepts %zu to %d", fn,
                   out_size, sizeof(induct_icl_estimate), INDUCT__STRUCT_SIZE_CAP);
    atomic_store(&m->interrupt, 0);
    induct_icl_groups_config c;
    induct_icl_groups_config_init(&c, sizeof c);
    if (cfg)
        INDUCT_TRY(induct__struct_in(&c, sizeof c, sizeof c, cfg, "induct_icl_groups_config"));
    INDUCT_FAIL_IF(c.reserved0 != 0, INDUCT_EINVAL, "%s: reserved0 must be 0", fn);
    INDUCT_FAIL_IF(c.n_groups == 0 || c.per_group == 0 || c.chunk == 0, INDUCT_EINVAL,
                   "%s: n_groups, per_group and chunk must be >= 1 (got %u, %u, %u)", fn,
                   c.n_groups, c.per_group, c.chunk);
    INDUCT_FAIL_IF(c.split > INDUCT_SPLIT_EVAL, INDUCT_EINVAL, "%s: unknown split %u", fn, c.split);
    INDUCT_FAIL_IF(c.curve_groups > c.n_groups, INDUCT_EINVAL,
                   "%s: curve_groups %u exceeds n_groups %u", fn, c.curve_groups, c.n_groups);
    INDUCT_FAIL_IF((!group_icl_out && group_cap) || (!curve_out && curve_cap), INDUCT_EINVAL,
                   "%s: a NULL buffer needs capacity 0", fn);
    INDUCT_FAIL_IF(!curve_out != !c.curve_groups, INDUCT_EINVAL,
                   "%s: curve_out and curve_groups go together (curve_groups %u, curve_out %s)",
                   fn, c.curve_groups, curve_out ? "given" : "NULL");
    const uint32_t T = c.seq_len ? c.seq_len : m->cfg.n_ctx;
    INDUCT_FAIL_IF(T < 2 || T > m->cfg.n_ctx, INDUCT_ERANGE, "%s: seq_len %u outside [2, n_ctx = %u]",
                   fn, T, m->cfg.n_ctx);
    INDUCT_TRY(band_check(T - 1, c.early, c.late, c.band, fn));
    INDUCT_FAIL_IF(group_icl_out && group_cap < c.n_groups, INDUCT_EBUFSIZE,
                   "%s: group_icl_out needs %u doubles ([n_groups]), holds %zu", fn, c.n_groups,
                   group_cap);
    INDUCT_FAIL_IF(curve_out && curve_cap < (size_t)T - 1, INDUCT_EBUFSIZE,
                   "%s: curve_out needs %u doubles ([seq_len - 1]), holds %zu", fn, T - 1,
                   curve_cap);

    /* band < early < late < T (checked): the sizes below cannot overflow */
    uint32_t *posp = malloc(2 * (2 * (size_t)c.band + 1) * sizeof *posp);
    float *buf = malloc(((size_t)T - 1) * sizeof *buf);
    double *gb = malloc((size_t)c.n_groups * sizeof *gb), *gt = malloc((size_t)c.n_groups * sizeof *gt);
    double *curve = c.curve_groups ? calloc((size_t)T - 1, sizeof *curve) : NULL;
    int rc = INDUCT_OK;
    uint32_t n_pos = 0;
    if (!posp || !buf || !gb || !gt || (c.curve_groups && !curve))
        rc = induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    else
        n_pos = band_positions(c.early, c.late, c.band, posp);
    for (uint32_t g = 0; g < c.n_groups && rc == INDUCT_OK; g++) {
        induct_eval_config ec;
        induct_eval_config_init(&ec, sizeof ec);
        ec.n_seq = c.per_group;
        ec.seq_len = T;
        ec.chunk = c.per_group < c.chunk ? c.per_group : c.chunk;
        ec.early = c.early;
        ec.late = c.late;
        ec.split = c.split;
        ec.batch_index = g;
        ec.pos_seed = 0;
        const int full = g < c.curve_groups;
        ec.positions = full ? NULL : posp;
        ec.n_positions = full ? 0 : n_pos;
        if ((rc = induct__an_interrupted(m, fn))) break;
        if ((rc = induct__analysis_loss_vectors(m, d, &ec, NULL, 0, buf, T - 1))) break;
        gb[g] = band_icl(buf, c.early, c.late, c.band);
        gt[g] = (double)buf[c.late - 1] - (double)buf[c.early - 1];
        if (full)
            for (uint32_t p = 0; p + 1 < T; p++) curve[p] += (double)buf[p] / c.curve_groups;
    }
    if (rc == INDUCT_OK) {
        induct_icl_estimate e;
        memset(&e, 0, sizeof e);
        e.size = sizeof e;
        mean_se(gb, c.n_groups, &e.icl, &e.icl_se);
        mean_se(gt, c.n_groups, &e.icl_token, &e.icl_token_se);
        e.n_groups = c.n_groups;
        e.per_group = c.per_group;
        rc = induct__struct_out(out, &e, sizeof e, sizeof e, "induct_icl_estimate");
    }
    if (rc == INDUCT_OK) {
        if (group_icl_out) memcpy(group_icl_out, gb, (size_t)c.n_groups * sizeof *gb);
        if (curve_out) memcpy(curve_out, curve, ((size_t)T - 1) * sizeof *curve);
    }
    free(posp);
    free(buf);
    free(gb);
    free(gt);
    free(curve);
    return rc;
}
