/* The statistics the phase-change checks rest on (lib/analysis/stats.c): batch means,
 * paired differences, the band ICL estimator and the ICL score over groups of windows,
 * against values computed by hand on small inputs and against the library's own loss
 * curves. */
#include <induct/induct.h>
#include <math.h>
#include <string.h>

#include "testutil.h"

START_TEST(test_batch_means_by_hand) {
    const double x[4] = {1, 2, 3, 4};
    double m = -1, se = -1;
    ck_ok(induct_analysis_batch_means(x, 4, &m, &se));
    /* mean 2.5; deviations ±1.5, ±0.5: sum of squares 5, variance 5/3, se sqrt(5/3)/2 */
    ck_assert_double_eq_tol(m, 2.5, 1e-15);
    ck_assert_double_eq_tol(se, sqrt(5.0 / 3.0) / 2.0, 1e-15);
    /* one batch: its value, no standard error */
    ck_ok(induct_analysis_batch_means(x + 2, 1, &m, &se));
    ck_assert(m == 3.0 && isnan(se));
    /* equal values: zero standard error, exactly */
    const double c[3] = {-0.25, -0.25, -0.25};
    ck_ok(induct_analysis_batch_means(c, 3, &m, &se));
    ck_assert(m == -0.25 && se == 0.0);
    /* bad input: nothing written */
    m = se = 7;
    ck_assert_status(induct_analysis_batch_means(x, 0, &m, &se), INDUCT_EINVAL);
    ck_assert_status(induct_analysis_batch_means(NULL, 4, &m, &se), INDUCT_EINVAL);
    ck_assert_status(induct_analysis_batch_means(x, 4, NULL, &se), INDUCT_EINVAL);
    const double bad[3] = {1, NAN, 2};
    ck_assert_status(induct_analysis_batch_means(bad, 3, &m, &se), INDUCT_EINVAL);
    const double inf[2] = {1, INFINITY};
    ck_assert_status(induct_analysis_batch_means(inf, 2, &m, &se), INDUCT_EINVAL);
    ck_assert(m == 7 && se == 7);
}
END_TEST

START_TEST(test_paired_difference_by_hand) {
    const double a[3] = {3, 5, 4}, b[3] = {1, 2, 4};
    double m, se;
    ck_ok(induct_analysis_paired_difference(a, b, 3, &m, &se));
    /* differences 2, 3, 0: mean 5/3; deviations 1/3, 4/3, -5/3, squares 42/9, variance
     * 7/3, se sqrt(7/9) */
    ck_assert_double_eq_tol(m, 5.0 / 3.0, 1e-15);
    ck_assert_double_eq_tol(se, sqrt(7.0) / 3.0, 1e-15);
    /* the same as the batch means of the differences, to the bit */
    const double d[3] = {2, 3, 0};
    double m2, se2;
    ck_ok(induct_analysis_batch_means(d, 3, &m2, &se2));
    ck_assert(m == m2 && se == se2);
    /* a shared offset cancels: the standard error of a paired difference ignores it,
     * that of the two means does not */
    const double p[4] = {10.0, -10.0, 10.5, -9.5}, q[4] = {9.0, -11.0, 9.5, -10.5};
    ck_ok(induct_analysis_paired_difference(p, q, 4, &m, &se));
    ck_assert(m == 1.0 && se == 0.0);
    ck_ok(induct_analysis_batch_means(p, 4, &m2, &se2));
    ck_assert(se2 > 5.0);
    ck_assert_status(induct_analysis_paired_difference(a, b, 0, &m, &se), INDUCT_EINVAL);
    ck_assert_status(induct_analysis_paired_difference(a, NULL, 3, &m, &se), INDUCT_EINVAL);
    const double bad[3] = {1, 2, NAN};
    ck_assert_status(induct_analysis_paired_difference(a, bad, 3, &m, &se), INDUCT_EINVAL);
}
END_TEST

START_TEST(test_icl_band_by_hand) {
    float c[10];
    for (int p = 0; p < 10; p++) c[p] = (float)p; /* a straight line: late - early, any band */
    double icl;
    ck_ok(induct_analysis_icl_band(c, 10, 3, 8, 1, &icl));
    ck_assert(icl == 5.0); /* (6 + 7 + 8 - 1 - 2 - 3) / 3 */
    ck_ok(induct_analysis_icl_band(c, 10, 3, 8, 0, &icl));
    ck_assert(icl == 5.0);
    /* a step at index 7: the single tokens 3 and 7 (indices 2 and 6) both read 1, the
     * band of token 7 (indices 5, 6, 7) reads 1, 1, 2 */
    for (int p = 0; p < 10; p++) c[p] = p >= 7 ? 2.0f : 1.0f;
    ck_ok(induct_analysis_icl_band(c, 10, 3, 7, 0, &icl));
    ck_assert(icl == 0.0);
    ck_ok(induct_analysis_icl_band(c, 10, 3, 7, 1, &icl));
    ck_assert_double_eq_tol(icl, 1.0 / 3.0, 1e-15);
    /* indices outside the bands are not read */
    c[0] = NAN;
    c[9] = NAN;
    ck_ok(induct_analysis_icl_band(c, 10, 3, 7, 1, &icl));
    ck_assert_double_eq_tol(icl, 1.0 / 3.0, 1e-15);
    c[4] = NAN; /* inside: refused */
    ck_assert_status(induct_analysis_icl_band(c, 10, 3, 5, 1, &icl), INDUCT_EINVAL);
    c[4] = 1.0f;
    c[9] = 2.0f;
    /* bands outside the curve, bad tokens */
    ck_assert_status(induct_analysis_icl_band(c, 10, 3, 7, 3, &icl), INDUCT_ERANGE);
    ck_assert_status(induct_analysis_icl_band(c, 10, 3, 9, 2, &icl), INDUCT_ERANGE);
    ck_ok(induct_analysis_icl_band(c, 10, 3, 9, 1, &icl)); /* index 9 is the last */
    ck_assert_status(induct_analysis_icl_band(c, 10, 0, 7, 0, &icl), INDUCT_EINVAL);
    ck_assert_status(induct_analysis_icl_band(c, 10, 7, 7, 0, &icl), INDUCT_EINVAL);
    ck_assert_status(induct_analysis_icl_band(NULL, 10, 3, 7, 0, &icl), INDUCT_EINVAL);
}
END_TEST

enum { V = 16, T = 40 };

static induct_model *small_model(void) {
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = 2;
    c.d_model = 16;
    c.n_heads = 2;
    c.n_ctx = T;
    c.d_vocab = V;
    c.layer_norm = 1;
    c.seed = 3;
    induct_model *m = NULL;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, 0.5, 9);
    return m;
}

static induct_icl_groups_config groups_config(void) {
    induct_icl_groups_config g;
    ck_ok(induct_icl_groups_config_init(&g, sizeof g));
    g.n_groups = 4;
    g.per_group = 5;
    g.seq_len = T;
    g.early = 5;
    g.late = 30;
    g.band = 2;
    return g;
}

/* A model whose logits are all zero predicts uniformly: every loss is ln V, so the ICL
 * score is 0 in every group, with a standard error of exactly 0. */
START_TEST(test_icl_groups_uniform_model) {
    induct_model *m = small_model();
    float zero[16 * V];
    memset(zero, 0, sizeof zero);
    ck_ok(induct_model_set_tensor(m, "unembed.W_U", zero, 16 * V));
    ck_ok(induct_model_set_tensor(m, "unembed.b_U", zero, V));
    induct_dataset *d = tu_rrt(V, 3, 17);
    induct_icl_groups_config g = groups_config();
    g.curve_groups = 2;
    induct_icl_estimate e;
    e.size = sizeof e;
    double groups[4], curve[T - 1];
    ck_ok(induct_analysis_icl_groups(m, d, &g, &e, groups, 4, curve, T - 1));
    ck_assert(e.icl == 0.0 && e.icl_se == 0.0 && e.icl_token == 0.0 && e.icl_token_se == 0.0);
    ck_assert_uint_eq(e.n_groups, 4);
    ck_assert_uint_eq(e.per_group, 5);
    for (int i = 0; i < 4; i++) ck_assert(groups[i] == 0.0);
    for (int p = 0; p < T - 1; p++) ck_assert_double_eq_tol(curve[p], log((double)V), 1e-6);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* Each group is batch g of per_group windows: its band score is the estimator on that
 * batch's loss curve, the estimates are the batch means of the group scores. */
START_TEST(test_icl_groups_match_loss_curves) {
    induct_model *m = small_model();
    induct_dataset *d = tu_rrt(V, 3, 17);
    induct_icl_groups_config g = groups_config();
    g.curve_groups = 1;
    induct_icl_estimate e;
    e.size = sizeof e;
    double groups[4], curve[T - 1];
    ck_ok(induct_analysis_icl_groups(m, d, &g, &e, groups, 4, curve, T - 1));
    double band[4], tok[4];
    for (uint32_t k = 0; k < 4; k++) {
        induct_eval_config ec;
        induct_eval_config_init(&ec, sizeof ec);
        ec.n_seq = 5;
        ec.seq_len = T;
        ec.chunk = 5;
        ec.batch_index = k;
        float lbp[T - 1];
        size_t len;
        ck_ok(induct_analysis_loss_by_position(m, d, &ec, lbp, T - 1, &len));
        ck_ok(induct_analysis_icl_band(lbp, T - 1, 5, 30, 2, &band[k]));
        tok[k] = (double)lbp[29] - (double)lbp[4];
        ck_assert_double_eq_tol(groups[k], band[k], 1e-5);
        if (k == 0)
            for (int p = 0; p < T - 1; p++) ck_assert_double_eq_tol(curve[p], lbp[p], 1e-5);
    }
    /* the groups differ (else the standard error would test nothing) */
    ck_assert(fabs(groups[0] - groups[1]) > 1e-3);
    double mean, se;
    ck_ok(induct_analysis_batch_means(groups, 4, &mean, &se));
    ck_assert(e.icl == mean && e.icl_se == se);
    ck_ok(induct_analysis_batch_means(tok, 4, &mean, &se));
    ck_assert_double_eq_tol(e.icl_token, mean, 1e-5);
    ck_assert_double_eq_tol(e.icl_token_se, se, 1e-5);
    ck_ok(induct_analysis_batch_means(band, 4, &mean, &se));
    ck_assert_double_eq_tol(e.icl, mean, 1e-5);
    /* the same call without the outputs it does not need: the same estimate */
    induct_icl_estimate e2;
    e2.size = sizeof e2;
    g.curve_groups = 0;
    ck_ok(induct_analysis_icl_groups(m, d, &g, &e2, NULL, 0, NULL, 0));
    ck_assert(e2.icl == e.icl && e2.icl_se == e.icl_se);
    /* ablations in force apply: zeroing both heads of layer 1 changes the score */
    ck_ok(induct_model_ablate_head(m, 1, 0, INDUCT_ABLATE_ZERO));
    ck_ok(induct_model_ablate_head(m, 1, 1, INDUCT_ABLATE_ZERO));
    ck_ok(induct_analysis_icl_groups(m, d, &g, &e2, NULL, 0, NULL, 0));
    ck_assert(e2.icl != e.icl);
    ck_ok(induct_model_clear_ablations(m));
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

START_TEST(test_icl_groups_bad_input) {
    induct_model *m = small_model();
    induct_dataset *d = tu_rrt(V, 3, 17);
    induct_icl_groups_config g = groups_config();
    induct_icl_estimate e;
    e.size = sizeof e;
    e.icl = 123.0;
    double groups[4], curve[T - 1];
    ck_assert_status(induct_analysis_icl_groups(NULL, d, &g, &e, NULL, 0, NULL, 0), INDUCT_EINVAL);
    ck_assert_status(induct_analysis_icl_groups(m, d, &g, NULL, NULL, 0, NULL, 0), INDUCT_EINVAL);
    ck_assert_status(induct_analysis_icl_groups(m, d, &g, &e, groups, 3, NULL, 0), INDUCT_EBUFSIZE);
    ck_assert_status(induct_analysis_icl_groups(m, d, &g, &e, NULL, 4, NULL, 0), INDUCT_EINVAL);
    /* a curve needs curve_groups, and curve_groups a curve */
    ck_assert_status(induct_analysis_icl_groups(m, d, &g, &e, NULL, 0, curve, T - 1), INDUCT_EINVAL);
    g.curve_groups = 1;
    ck_assert_status(induct_analysis_icl_groups(m, d, &g, &e, NULL, 0, NULL, 0), INDUCT_EINVAL);
    ck_assert_status(induct_analysis_icl_groups(m, d, &g, &e, NULL, 0, curve, T - 2), INDUCT_EBUFSIZE);
    g.curve_groups = 5;
    ck_assert_status(induct_analysis_icl_groups(m, d, &g, &e, NULL, 0, curve, T - 1), INDUCT_EINVAL);
    g = groups_config();
    g.band = 5; /* the band of token 5 would start before index 0 */
    ck_assert_status(induct_analysis_icl_groups(m, d, &g, &e, NULL, 0, NULL, 0), INDUCT_ERANGE);
    g = groups_config();
    g.late = 39; /* index 38 is the last of a 40-token window: its band does not fit */
    ck_assert_status(induct_analysis_icl_groups(m, d, &g, &e, NULL, 0, NULL, 0), INDUCT_ERANGE);
    g = groups_config();
    g.seq_len = T + 1;
    ck_assert_status(induct_analysis_icl_groups(m, d, &g, &e, NULL, 0, NULL, 0), INDUCT_ERANGE);
    g = groups_config();
    g.n_groups = 0;
    ck_assert_status(induct_analysis_icl_groups(m, d, &g, &e, NULL, 0, NULL, 0), INDUCT_EINVAL);
    g = groups_config();
    g.reserved0 = 1;
    ck_assert_status(induct_analysis_icl_groups(m, d, &g, &e, NULL, 0, NULL, 0), INDUCT_EINVAL);
    g = groups_config();
    g.size = 8;
    ck_assert_status(induct_analysis_icl_groups(m, d, &g, &e, NULL, 0, NULL, 0), INDUCT_EABI);
    g = groups_config();
    e.size = 8;
    ck_assert_status(induct_analysis_icl_groups(m, d, &g, &e, NULL, 0, NULL, 0), INDUCT_EABI);
    e.size = sizeof e;
    ck_assert(e.icl == 123.0); /* untouched by every failure */
    ck_assert_status(induct_icl_groups_config_init(&g, 4), INDUCT_EABI);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("analysis_stats");
    TCase *tc = tcase_create("stats");
    tcase_add_test(tc, test_batch_means_by_hand);
    tcase_add_test(tc, test_paired_difference_by_hand);
    tcase_add_test(tc, test_icl_band_by_hand);
    tcase_add_test(tc, test_icl_groups_uniform_model);
    tcase_add_test(tc, test_icl_groups_match_loss_curves);
    tcase_add_test(tc, test_icl_groups_bad_input);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
