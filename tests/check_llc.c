/* The local learning coefficient: the API's contract (defaults, bad input, buffers,
 * masks by name and head), determinism (thread counts, the prefix property, the same
 * noise and batches for every w*), that a masked coordinate gives the same estimate as
 * dropping it, divergence as an error, and that the model's weights come back bit for
 * bit. The estimator's values are tested against known learning coefficients in
 * tests/test_llc_known.py and against PyTorch in bindings/python/tests/test_llc.py.
 * Links only the shared library. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "testutil.h"

/* ---- potentials ------------------------------------------------------------------- */

/* K(w) = 1/2 sum a_i w_i^2 (a_i = i + 1) */
static int quadratic(void *user, const double *w, size_t dim, uint64_t batch, double *loss,
                     double *g) {
    (void)user;
    (void)batch;
    double L = 0.0;
    for (size_t i = 0; i < dim; i++) {
        L += 0.5 * (double)(i + 1) * w[i] * w[i];
        g[i] = (double)(i + 1) * w[i];
    }
    *loss = L;
    return 0;
}

/* the normal crossing 1/2 w0^2 w1^4 plus 1/2 w2^2: coordinate 2 separate */
static int crossing3(void *user, const double *w, size_t dim, uint64_t batch, double *loss,
                     double *g) {
    (void)user;
    (void)batch;
    double w0 = w[0], w1 = dim > 2 ? w[1] : 0.0, w2 = w[dim - 1];
    double f = w0 * w1 * w1;
    *loss = 0.5 * f * f + 0.5 * w2 * w2;
    g[0] = f * w1 * w1;
    if (dim > 2) g[1] = f * 2.0 * w0 * w1;
    g[dim - 1] = w2;
    return 0;
}

/* the same without its middle coordinate, held at w* = 0.3 */
static int crossing3_dropped(void *user, const double *w, size_t dim, uint64_t batch,
                             double *loss, double *g) {
    double full[3] = {w[0], 0.3, w[1]}, gf[3] = {0, 0, 0};
    (void)dim;
    int rc = crossing3(user, full, 3, batch, loss, gf);
    g[0] = gf[0];
    g[1] = gf[2];
    return rc;
}

/* the quadratic plus an offset that depends on the minibatch only (its "difficulty"),
 * uniform in [-1, 1): what the paired estimate removes */
static double offset_of(uint64_t batch) {
    uint64_t z = batch * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static int quadratic_offset(void *user, const double *w, size_t dim, uint64_t batch,
                            double *loss, double *g) {
    int rc = quadratic(user, w, dim, batch, loss, g);
    *loss += offset_of(batch);
    return rc;
}

/* records the batch indices and the weights it is called with (zero potential) */
typedef struct recorder {
    uint64_t batch[64];
    double w[64][2];
    size_t n;
} recorder;
static int record_zero(void *user, const double *w, size_t dim, uint64_t batch, double *loss,
                       double *g) {
    recorder *r = user;
    (void)g;
    if (r->n < 64) {
        r->batch[r->n] = batch;
        for (size_t i = 0; i < dim && i < 2; i++) r->w[r->n][i] = w[i];
    }
    r->n++;
    *loss = 0.0;
    return 0;
}

static int stop_at_5(void *user, const double *w, size_t dim, uint64_t batch, double *loss,
                     double *g) {
    int *n = user;
    (void)w;
    (void)dim;
    (void)batch;
    (void)g;
    *loss = 0.0;
    return ++*n >= 5 ? (*n == 5 ? 1 : INDUCT_EIO) : 0;
}

static int fail_io(void *user, const double *w, size_t dim, uint64_t batch, double *loss,
                   double *g) {
    (void)user;
    (void)w;
    (void)dim;
    (void)batch;
    (void)g;
    *loss = 0.0;
    return INDUCT_EIO;
}

static induct_llc_config small_config(void) {
    induct_llc_config c;
    induct_llc_config_init(&c, sizeof c);
    c.chains = 3;
    c.draws = 40;
    c.burnin = 5;
    c.nbeta_rule = INDUCT_LLC_NBETA_FIXED;
    c.nbeta = 10.0;
    c.epsilon = 0.01;
    return c;
}

static void get_all(const induct_llc_result *r, uint32_t which, double *out, size_t cap,
                    size_t expect) {
    size_t n = 0;
    ck_ok(induct_llc_result_get(r, which, out, cap, &n));
    ck_assert_uint_eq(n, expect);
}

/* ---- configuration and results ------------------------------------------------------- */

START_TEST(test_config_defaults) {
    induct_llc_config c;
    ck_ok(induct_llc_config_init(&c, sizeof c));
    ck_assert_uint_eq(c.size, sizeof c);
    ck_assert_uint_eq(c.chains, 4);
    ck_assert_uint_eq(c.draws, 200);
    ck_assert_uint_eq(c.batch, 32);
    ck_assert_uint_eq(c.every, 1);
    ck_assert_uint_eq(c.nbeta_rule, INDUCT_LLC_NBETA_BATCH);
    ck_assert(c.epsilon == 0.01 && c.gamma == 0.0);
    ck_assert_uint_eq(c.split, INDUCT_SPLIT_TRAIN);
    ck_assert_status(induct_llc_config_init(NULL, sizeof c), INDUCT_EINVAL);
    ck_assert_status(induct_llc_config_init(&c, 16), INDUCT_EABI);
    ck_assert_status(induct_llc_config_init(&c, 8192), INDUCT_EABI);
    /* a larger (newer) struct: accepted when its unknown tail is zero */
    unsigned char big[sizeof(induct_llc_config) + 16];
    ck_ok(induct_llc_config_init((induct_llc_config *)(void *)big, sizeof big));
    double w = 0.0;
    induct_llc_result *r = (induct_llc_result *)&w;
    ck_ok(induct_llc_sample(&r, quadratic, NULL, &w, 1, NULL,
                            (const induct_llc_config *)(const void *)big));
    induct_llc_result_free(r);
    big[sizeof big - 1] = 1;
    ck_assert_status(induct_llc_sample(&r, quadratic, NULL, &w, 1, NULL,
                                       (const induct_llc_config *)(const void *)big),
                     INDUCT_EABI);
    ck_assert_ptr_null(r);
}
END_TEST

/* nβ of each rule, read back from the summary */
START_TEST(test_nbeta_rules) {
    double w = 0.0;
    induct_llc_config c = small_config();
    c.chains = 1;
    c.draws = 2;
    induct_llc_result *r;
    induct_llc_summary s;
    s.size = sizeof s;
    c.nbeta_rule = INDUCT_LLC_NBETA_BATCH;
    c.batch = 32;
    ck_ok(induct_llc_sample(&r, quadratic, NULL, &w, 1, NULL, &c));
    ck_ok(induct_llc_result_summary(r, &s));
    ck_assert_double_eq_tol(s.nbeta, 32.0 / log(32.0), 1e-12);
    ck_assert(isnan(s.llc_std) && isnan(s.llc_se)); /* one chain */
    ck_assert(isnan(s.mala_accept));
    induct_llc_result_free(r);
    c.nbeta_rule = INDUCT_LLC_NBETA_DATA;
    c.n_data = 1e6;
    ck_ok(induct_llc_sample(&r, quadratic, NULL, &w, 1, NULL, &c));
    ck_ok(induct_llc_result_summary(r, &s));
    ck_assert_double_eq_tol(s.nbeta, 1e6 / log(1e6), 1e-6);
    induct_llc_result_free(r);
    c.nbeta_rule = INDUCT_LLC_NBETA_FIXED;
    c.nbeta = 3.5;
    ck_ok(induct_llc_sample(&r, quadratic, NULL, &w, 1, NULL, &c));
    ck_ok(induct_llc_result_summary(r, &s));
    ck_assert(s.nbeta == 3.5);
    ck_assert_uint_eq(s.steps, 5 + 2);
    ck_assert_uint_eq(s.init_batches, 1);
    ck_assert_uint_eq(s.n_sampled, 1);
    induct_llc_result_free(r);
}
END_TEST

START_TEST(test_bad_input) {
    double w[2] = {0.0, 0.0};
    induct_llc_result *r = (induct_llc_result *)w;
    induct_llc_config c = small_config();
    ck_assert_status(induct_llc_sample(NULL, quadratic, NULL, w, 2, NULL, &c), INDUCT_EINVAL);
    ck_assert_status(induct_llc_sample(&r, NULL, NULL, w, 2, NULL, &c), INDUCT_EINVAL);
    ck_assert_ptr_null(r);
    ck_assert_status(induct_llc_sample(&r, quadratic, NULL, NULL, 2, NULL, &c), INDUCT_EINVAL);
    ck_assert_status(induct_llc_sample(&r, quadratic, NULL, w, 0, NULL, &c), INDUCT_EINVAL);
    double bad[2] = {0.0, NAN};
    ck_assert_status(induct_llc_sample(&r, quadratic, NULL, bad, 2, NULL, &c), INDUCT_EINVAL);
    uint8_t m2[2] = {1, 2}, m0[2] = {0, 0};
    ck_assert_status(induct_llc_sample(&r, quadratic, NULL, w, 2, m2, &c), INDUCT_EINVAL);
    ck_assert_status(induct_llc_sample(&r, quadratic, NULL, w, 2, m0, &c), INDUCT_EINVAL);
    struct {
        size_t off;
        int kind; /* 0 uint32, 1 double */
        double v;
        int status;
    } cases[] = {
        {offsetof(induct_llc_config, chains), 0, 0, INDUCT_EINVAL},
        {offsetof(induct_llc_config, chains), 0, (1 << 20) + 1, INDUCT_EINVAL},
        {offsetof(induct_llc_config, draws), 0, 0, INDUCT_EINVAL},
        {offsetof(induct_llc_config, every), 0, 0, INDUCT_EINVAL},
        {offsetof(induct_llc_config, batch), 0, 0, INDUCT_EINVAL},
        {offsetof(induct_llc_config, nbeta_rule), 0, 9, INDUCT_EINVAL},
        {offsetof(induct_llc_config, split), 0, 2, INDUCT_EINVAL},
        {offsetof(induct_llc_config, mala), 0, 2, INDUCT_EINVAL},
        {offsetof(induct_llc_config, epsilon), 1, 0.0, INDUCT_EINVAL},
        {offsetof(induct_llc_config, epsilon), 1, NAN, INDUCT_EINVAL},
        {offsetof(induct_llc_config, epsilon), 1, INFINITY, INDUCT_EINVAL},
        {offsetof(induct_llc_config, gamma), 1, -1.0, INDUCT_EINVAL},
        {offsetof(induct_llc_config, max_increase), 1, -1.0, INDUCT_EINVAL},
        {offsetof(induct_llc_config, nbeta), 1, 0.0, INDUCT_EINVAL},
        {offsetof(induct_llc_config, nbeta), 1, NAN, INDUCT_EINVAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        induct_llc_config b = small_config();
        if (cases[i].kind == 0) {
            uint32_t u = (uint32_t)cases[i].v;
            memcpy((char *)&b + cases[i].off, &u, sizeof u);
        } else {
            memcpy((char *)&b + cases[i].off, &cases[i].v, sizeof(double));
        }
        r = (induct_llc_result *)w;
        ck_assert_status(induct_llc_sample(&r, quadratic, NULL, w, 2, NULL, &b), cases[i].status);
        ck_assert_ptr_null(r);
    }
    /* the m / ln m rules need m >= 2; the data rule n > 1 */
    induct_llc_config b = small_config();
    b.nbeta_rule = INDUCT_LLC_NBETA_BATCH;
    b.batch = 1;
    ck_assert_status(induct_llc_sample(&r, quadratic, NULL, w, 2, NULL, &b), INDUCT_EINVAL);
    b.nbeta_rule = INDUCT_LLC_NBETA_DATA;
    b.n_data = 1.0;
    ck_assert_status(induct_llc_sample(&r, quadratic, NULL, w, 2, NULL, &b), INDUCT_EINVAL);
    /* too many steps per chain */
    b = small_config();
    b.draws = 0x80000000u;
    b.every = 2;
    ck_assert_status(induct_llc_sample(&r, quadratic, NULL, w, 2, NULL, &b), INDUCT_ELIMIT);
    /* result accessors */
    ck_assert_status(induct_llc_result_summary(NULL, NULL), INDUCT_EINVAL);
    ck_assert_status(induct_llc_result_get(NULL, 0, NULL, 0, NULL), INDUCT_EINVAL);
    induct_llc_result_free(NULL);
}
END_TEST

START_TEST(test_result_buffers) {
    double w[2] = {0.0, 0.0};
    induct_llc_config c = small_config();
    c.mala = 1;
    induct_llc_result *r;
    ck_ok(induct_llc_sample(&r, quadratic, NULL, w, 2, NULL, &c));
    size_t n = 0;
    ck_assert_status(induct_llc_result_get(r, INDUCT_LLC_DRAW_LOSSES, NULL, 0, &n),
                     INDUCT_EBUFSIZE);
    ck_assert_uint_eq(n, 3 * 40);
    double small[4];
    ck_assert_status(induct_llc_result_get(r, INDUCT_LLC_DRAW_LOSSES, small, 4, &n),
                     INDUCT_EBUFSIZE);
    ck_assert_status(induct_llc_result_get(r, 99, small, 4, &n), INDUCT_EINVAL);
    double llc[3], draws[120], burn[15], below[3], mala[3], init[3];
    get_all(r, INDUCT_LLC_CHAIN_LLC, llc, 3, 3);
    get_all(r, INDUCT_LLC_DRAW_LOSSES, draws, 120, 120);
    get_all(r, INDUCT_LLC_BURNIN_LOSSES, burn, 15, 15);
    get_all(r, INDUCT_LLC_CHAIN_BELOW, below, 3, 3);
    get_all(r, INDUCT_LLC_CHAIN_MALA, mala, 3, 3);
    get_all(r, INDUCT_LLC_INIT_LOSSES, init, 3, 3);
    induct_llc_summary s;
    s.size = sizeof s;
    ck_ok(induct_llc_result_summary(r, &s));
    /* λ̂ of each chain is nβ (mean draw − L(w*)), L(w*) = 0 here */
    double mean = 0.0;
    for (int ch = 0; ch < 3; ch++) {
        double sum = 0.0;
        for (int d = 0; d < 40; d++) sum += draws[ch * 40 + d];
        ck_assert_double_eq_tol(llc[ch], 10.0 * (sum / 40.0 - 0.0), 1e-12);
        ck_assert(below[ch] == 0.0); /* K >= 0 = K(w*) */
        ck_assert(mala[ch] > 0.0 && mala[ch] <= 1.0);
        mean += llc[ch] / 3.0;
    }
    ck_assert_double_eq_tol(s.llc_mean, mean, 1e-12);
    ck_assert(s.init_loss == 0.0 && init[0] == 0.0);
    ck_assert(s.mala_accept > 0.5 && s.mala_accept <= 1.0); /* eps A = 0.2 at most */
    ck_assert(s.llc_std > 0.0 && fabs(s.llc_se - s.llc_std / sqrt(3.0)) < 1e-12);
    /* the first burn-in loss is at w* itself */
    ck_assert(burn[0] == 0.0 && burn[5] == 0.0 && burn[10] == 0.0);
    /* an older, smaller summary struct gets a clean EABI; a larger one zeros its tail */
    unsigned char big[sizeof(induct_llc_summary) + 8];
    memset(big, 0xff, sizeof big);
    size_t bs = sizeof big;
    memcpy(big, &bs, sizeof bs);
    ck_ok(induct_llc_result_summary(r, (induct_llc_summary *)(void *)big));
    ck_assert_uint_eq(big[sizeof big - 1], 0);
    s.size = 16;
    ck_assert_status(induct_llc_result_summary(r, &s), INDUCT_EABI);
    induct_llc_result_free(r);
}
END_TEST

/* ---- determinism and masks ----------------------------------------------------------- */

/* A masked coordinate gives the same estimate as dropping it: the noise follows the
 * sampled coordinates in order and the potential sees the held one at w*, so the
 * chains are the same bits. */
START_TEST(test_mask_equals_drop) {
    double w3[3] = {0.1, 0.3, -0.2}, w2[2] = {0.1, -0.2};
    uint8_t mask[3] = {1, 0, 1};
    induct_llc_config c = small_config();
    c.gamma = 2.0;
    c.mala = 1;
    induct_llc_result *ra, *rb;
    ck_ok(induct_llc_sample(&ra, crossing3, NULL, w3, 3, mask, &c));
    ck_ok(induct_llc_sample(&rb, crossing3_dropped, NULL, w2, 2, NULL, &c));
    double a[120], b[120];
    get_all(ra, INDUCT_LLC_DRAW_LOSSES, a, 120, 120);
    get_all(rb, INDUCT_LLC_DRAW_LOSSES, b, 120, 120);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    get_all(ra, INDUCT_LLC_CHAIN_MALA, a, 3, 3);
    get_all(rb, INDUCT_LLC_CHAIN_MALA, b, 3, 3);
    ck_assert(memcmp(a, b, 3 * sizeof *a) == 0);
    induct_llc_summary sa, sb;
    sa.size = sb.size = sizeof sa;
    ck_ok(induct_llc_result_summary(ra, &sa));
    ck_ok(induct_llc_result_summary(rb, &sb));
    ck_assert(sa.llc_mean == sb.llc_mean && sa.n_sampled == 2 && sb.n_sampled == 2);
    induct_llc_result_free(ra);
    induct_llc_result_free(rb);
}
END_TEST

/* The same noise and batch indices whatever w* is; a shorter run is a prefix of a longer
 * one; batch indices as documented. */
START_TEST(test_same_noise_and_batches) {
    induct_llc_config c = small_config();
    c.chains = 2;
    c.draws = 10;
    c.burnin = 0;
    c.init_batches = 3;
    c.batch_offset = 1000;
    recorder ra, rb;
    memset(&ra, 0, sizeof ra);
    memset(&rb, 0, sizeof rb);
    double wa[2] = {0.0, 0.0}, wb[2] = {5.0, -1.0};
    induct_llc_result *r;
    ck_ok(induct_llc_sample(&r, record_zero, &ra, wa, 2, NULL, &c));
    induct_llc_result_free(r);
    ck_ok(induct_llc_sample(&r, record_zero, &rb, wb, 2, NULL, &c));
    induct_llc_result_free(r);
    ck_assert_uint_eq(ra.n, 3 + 2 * 10);
    ck_assert_uint_eq(rb.n, ra.n);
    for (size_t i = 0; i < 3; i++) ck_assert(ra.batch[i] == 1000 + i);
    for (size_t t = 0; t < 10; t++) {
        ck_assert(ra.batch[3 + t] == 1000 + (1ull << 32) + t);
        ck_assert(ra.batch[13 + t] == 1000 + (2ull << 32) + t);
    }
    ck_assert(memcmp(ra.batch, rb.batch, sizeof(uint64_t) * ra.n) == 0);
    /* zero potential, no localisation: every step adds sqrt(eps) xi, the same xi */
    for (size_t i = 4; i < 13; i++)
        for (int k = 0; k < 2; k++)
            ck_assert_double_eq_tol(ra.w[i][k] - ra.w[i - 1][k], rb.w[i][k] - rb.w[i - 1][k],
                                    1e-12);
    /* the increments are N(0, eps): not all equal, of the right size */
    ck_assert(ra.w[4][0] != ra.w[4][1]);
    /* prefix: a run of 20 draws is the start of a run of 40 */
    double l40[2 * 40], l20[2 * 20];
    c.draws = 40;
    ck_ok(induct_llc_sample(&r, quadratic, NULL, wb, 2, NULL, &c));
    get_all(r, INDUCT_LLC_DRAW_LOSSES, l40, 80, 80);
    induct_llc_result_free(r);
    c.draws = 20;
    ck_ok(induct_llc_sample(&r, quadratic, NULL, wb, 2, NULL, &c));
    get_all(r, INDUCT_LLC_DRAW_LOSSES, l20, 40, 40);
    induct_llc_result_free(r);
    for (int ch = 0; ch < 2; ch++)
        ck_assert(memcmp(l20 + ch * 20, l40 + ch * 40, 20 * sizeof(double)) == 0);
    /* another seed: other noise */
    c.seed = 1;
    ck_ok(induct_llc_sample(&r, quadratic, NULL, wb, 2, NULL, &c));
    get_all(r, INDUCT_LLC_DRAW_LOSSES, l40, 40, 40);
    induct_llc_result_free(r);
    ck_assert(l40[5] != l20[5]);
}
END_TEST

/* The paired estimate compares each draw with its own minibatch at w*: a loss offset that
 * depends on the minibatch alone cancels, so with offsets it equals the estimate without
 * them (same noise, same path); the unpaired estimate carries the offsets' spread. */
START_TEST(test_paired) {
    double w[2] = {0.0, 0.0};
    induct_llc_config c = small_config();
    induct_llc_result *plain, *paired, *unpaired;
    ck_ok(induct_llc_sample(&plain, quadratic, NULL, w, 2, NULL, &c));
    c.paired = 1;
    ck_ok(induct_llc_sample(&paired, quadratic_offset, NULL, w, 2, NULL, &c));
    c.paired = 0;
    ck_ok(induct_llc_sample(&unpaired, quadratic_offset, NULL, w, 2, NULL, &c));
    double a[3], b[3], u[3], ref[120], dl[120];
    get_all(plain, INDUCT_LLC_CHAIN_LLC, a, 3, 3);
    get_all(paired, INDUCT_LLC_CHAIN_LLC, b, 3, 3);
    get_all(unpaired, INDUCT_LLC_CHAIN_LLC, u, 3, 3);
    double spread = 0.0;
    for (int i = 0; i < 3; i++) {
        ck_assert_double_eq_tol(a[i], b[i], 1e-9 * (1.0 + fabs(a[i])));
        spread = fmax(spread, fabs(u[i] - a[i]));
    }
    ck_assert(spread > 0.5); /* nβ = 10 times offsets of spread ~0.6 / sqrt(40) */
    get_all(paired, INDUCT_LLC_DRAW_REF_LOSSES, ref, 120, 120);
    get_all(paired, INDUCT_LLC_DRAW_LOSSES, dl, 120, 120);
    /* chain 1's first draw (after 5 burn-in steps) is on batch 2^33 + 5 */
    ck_assert(ref[40] == offset_of((2ull << 32) + 5));
    ck_assert(dl[40] >= ref[40]);
    induct_llc_summary s;
    s.size = sizeof s;
    ck_ok(induct_llc_result_summary(paired, &s));
    ck_assert_uint_eq(s.paired, 1);
    ck_assert(s.below_init == 0.0); /* K >= 0 against each draw's own reference */
    size_t n;
    ck_assert_status(induct_llc_result_get(unpaired, INDUCT_LLC_DRAW_REF_LOSSES, ref, 120, &n),
                     INDUCT_EINVAL);
    induct_llc_result_free(plain);
    induct_llc_result_free(paired);
    induct_llc_result_free(unpaired);
    c.paired = 2;
    ck_assert_status(induct_llc_sample(&plain, quadratic, NULL, w, 2, NULL, &c), INDUCT_EINVAL);
    c.paired = 0;
    c.reserved0 = 1;
    ck_assert_status(induct_llc_sample(&plain, quadratic, NULL, w, 2, NULL, &c), INDUCT_EINVAL);
}
END_TEST

START_TEST(test_potential_stops) {
    double w = 0.0;
    induct_llc_config c = small_config();
    induct_llc_result *r = (induct_llc_result *)&w;
    int n = 0;
    ck_assert_status(induct_llc_sample(&r, stop_at_5, &n, &w, 1, NULL, &c), INDUCT_EINTERRUPTED);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(n, 5);
    ck_assert_status(induct_llc_sample(&r, fail_io, NULL, &w, 1, NULL, &c), INDUCT_EIO);
}
END_TEST

/* A step too large for the curvature: the chain oscillates with growing amplitude until
 * a loss overflows, or passes max_increase first: an error naming the chain, no estimate. */
START_TEST(test_divergence) {
    double w[2] = {0.0, 0.0};
    induct_llc_config c = small_config();
    c.epsilon = 1.0; /* eps A = 10 and 20: |1 - eps A / 2| > 1 */
    c.draws = 2000;
    induct_llc_result *r = (induct_llc_result *)w;
    ck_assert_status(induct_llc_sample(&r, quadratic, NULL, w, 2, NULL, &c), INDUCT_ENUMERIC);
    ck_assert_ptr_null(r);
    ck_assert(strstr(induct_last_error_message(), "chain 0 diverged") != NULL);
    c.max_increase = 100.0;
    ck_assert_status(induct_llc_sample(&r, quadratic, NULL, w, 2, NULL, &c), INDUCT_ENUMERIC);
    ck_assert(strstr(induct_last_error_message(), "max_increase") != NULL);
    /* the same threshold does not trip a healthy chain */
    c.epsilon = 0.01;
    ck_ok(induct_llc_sample(&r, quadratic, NULL, w, 2, NULL, &c));
    induct_llc_result_free(r);
}
END_TEST

/* ---- models ---------------------------------------------------------------------------- */

static induct_dataset *token_data(uint32_t V) {
    int32_t tok[512];
    tu_tokens(tok, 512, V, 3);
    induct_dataset *d;
    ck_ok(induct_dataset_new_tokens(&d, tok, 512, V, 5));
    return d;
}

static induct_llc_config model_config(void) {
    induct_llc_config c;
    induct_llc_config_init(&c, sizeof c);
    c.chains = 2;
    c.draws = 6;
    c.burnin = 2;
    c.batch = 4;
    c.epsilon = 1e-3;
    c.gamma = 100.0;
    c.mala = 1;
    c.paired = 1;
    return c;
}

static void estimate(induct_model *m, induct_dataset *d, const uint8_t *mask, size_t mask_len,
                     const induct_llc_config *c, double *draws, double *mala,
                     induct_llc_summary *s) {
    induct_llc_result *r;
    ck_ok(induct_llc_estimate(&r, m, d, mask, mask_len, c));
    size_t n = (size_t)c->chains * c->draws;
    get_all(r, INDUCT_LLC_DRAW_LOSSES, draws, n, n);
    get_all(r, INDUCT_LLC_CHAIN_MALA, mala, c->chains, c->chains);
    s->size = sizeof *s;
    ck_ok(induct_llc_result_summary(r, s));
    induct_llc_result_free(r);
}

/* Bit-identical at 1 and 3 threads; NULL mask = all-ones mask; the weights come back
 * bit for bit; the estimate is sane (above L(w*) on average for a trained-ish point). */
START_TEST(test_model_determinism) {
    induct_model_config mc;
    tu_tiny_config(&mc);
    mc.layer_norm = 1;
    induct_model *m;
    ck_ok(induct_model_new(&m, &mc));
    induct_dataset *d = token_data(mc.d_vocab);
    size_t P = induct_model_n_params(m);
    float *before = malloc(P * sizeof *before), *after = malloc(P * sizeof *after);
    uint8_t *ones = malloc(P);
    memset(ones, 1, P);
    size_t at = 0;
    for (size_t i = 0; i < induct_model_n_tensors(m); i++) {
        const char *name;
        size_t numel;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &numel));
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, before + at, numel, NULL));
        at += numel;
    }
    induct_llc_config c = model_config();
    double d1[12], d3[12], dm[12], m1[2], m3[2], mm[2];
    induct_llc_summary s1, s3, sm;
    estimate(m, d, NULL, 0, &c, d1, m1, &s1);
    ck_ok(induct_model_set_threads(m, 3));
    estimate(m, d, NULL, 0, &c, d3, m3, &s3);
    estimate(m, d, ones, P, &c, dm, mm, &sm);
    ck_assert(memcmp(d1, d3, sizeof d1) == 0 && memcmp(m1, m3, sizeof m1) == 0);
    ck_assert(memcmp(d1, dm, sizeof d1) == 0 && memcmp(m1, mm, sizeof m1) == 0);
    ck_assert(s1.llc_mean == s3.llc_mean && s1.init_loss == s3.init_loss);
    ck_assert_uint_eq(s1.n_sampled, P);
    ck_assert(isfinite(s1.llc_mean) && s1.mala_accept > 0.0 && s1.mala_accept <= 1.0);
    ck_assert_double_eq_tol(s1.nbeta, 4.0 / log(4.0), 1e-12);
    at = 0;
    for (size_t i = 0; i < induct_model_n_tensors(m); i++) {
        const char *name;
        size_t numel;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &numel));
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, after + at, numel, NULL));
        at += numel;
    }
    ck_assert(memcmp(before, after, P * sizeof *before) == 0);
    /* a divergent chain: an error, and the weights are still the caller's */
    c.epsilon = 1e6;
    c.gamma = 0.0;
    induct_llc_result *r = (induct_llc_result *)ones;
    ck_assert_status(induct_llc_estimate(&r, m, d, NULL, 0, &c), INDUCT_ENUMERIC);
    ck_assert_ptr_null(r);
    at = 0;
    for (size_t i = 0; i < induct_model_n_tensors(m); i++) {
        const char *name;
        size_t numel;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &numel));
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, after + at, numel, NULL));
        at += numel;
    }
    ck_assert(memcmp(before, after, P * sizeof *before) == 0);
    free(before);
    free(after);
    free(ones);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

START_TEST(test_model_bad_input) {
    induct_model_config mc;
    tu_tiny_config(&mc);
    induct_model *m;
    ck_ok(induct_model_new(&m, &mc));
    induct_dataset *d = token_data(mc.d_vocab), *big = token_data(40);
    size_t P = induct_model_n_params(m);
    uint8_t *mask = calloc(P, 1);
    induct_llc_config c = model_config();
    induct_llc_result *r;
    ck_assert_status(induct_llc_estimate(NULL, m, d, NULL, 0, &c), INDUCT_EINVAL);
    ck_assert_status(induct_llc_estimate(&r, NULL, d, NULL, 0, &c), INDUCT_EINVAL);
    ck_assert_status(induct_llc_estimate(&r, m, NULL, NULL, 0, &c), INDUCT_EINVAL);
    ck_assert_status(induct_llc_estimate(&r, m, big, NULL, 0, &c), INDUCT_EINVAL);
    ck_assert_status(induct_llc_estimate(&r, m, d, mask, P - 1, &c), INDUCT_ERANGE);
    ck_assert_status(induct_llc_estimate(&r, m, d, NULL, 5, &c), INDUCT_EINVAL);
    ck_assert_status(induct_llc_estimate(&r, m, d, mask, P, &c), INDUCT_EINVAL); /* empty */
    c.seq_len = 9; /* n_ctx 8 */
    ck_assert_status(induct_llc_estimate(&r, m, d, NULL, 0, &c), INDUCT_ERANGE);
    c.seq_len = 1;
    ck_assert_status(induct_llc_estimate(&r, m, d, NULL, 0, &c), INDUCT_ERANGE);
    /* an ablated head: the backward pass refuses, and the weights stay */
    c.seq_len = 0;
    float w0[16], w1[16];
    size_t n0;
    ck_ok(induct_model_get_tensor(m, "blocks.0.attn.b_O", INDUCT_BUF_PARAM, w0, 16, &n0));
    ck_ok(induct_model_ablate_head(m, 1, 0, INDUCT_ABLATE_ZERO));
    ck_assert_status(induct_llc_estimate(&r, m, d, NULL, 0, &c), INDUCT_ESTATE);
    ck_ok(induct_model_get_tensor(m, "blocks.0.attn.b_O", INDUCT_BUF_PARAM, w1, 16, &n0));
    ck_assert(memcmp(w0, w1, n0 * sizeof *w0) == 0);
    ck_ok(induct_model_clear_ablations(m));
    ck_ok(induct_llc_estimate(&r, m, d, NULL, 0, &c));
    induct_llc_result_free(r);
    free(mask);
    induct_dataset_free(d);
    induct_dataset_free(big);
    induct_model_free(m);
}
END_TEST

/* Only the masked weights move: a head's mask samples exactly its four matrix slices. */
START_TEST(test_mask_select) {
    induct_model_config mc;
    tu_tiny_config(&mc); /* 2 layers, d_model 8, 2 heads of d_head 4 */
    induct_model *m;
    ck_ok(induct_model_new(&m, &mc));
    size_t P = induct_model_n_params(m);
    uint8_t *mask = calloc(P, 1), *ref = calloc(P, 1);
    ck_ok(induct_llc_mask_select(m, "blocks.1.attn", 1, mask, P));
    /* expected: W_Q[1], W_K[1], W_V[1] ([2][8][4]: elements 32..63) and W_O[1] ([2][4][8]) */
    size_t off = 0, count = 0;
    for (size_t i = 0; i < induct_model_n_tensors(m); i++) {
        const char *name;
        size_t numel;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &numel));
        if (!strcmp(name, "blocks.1.attn.W_Q") || !strcmp(name, "blocks.1.attn.W_K") ||
            !strcmp(name, "blocks.1.attn.W_V") || !strcmp(name, "blocks.1.attn.W_O"))
            memset(ref + off + numel / 2, 1, numel / 2);
        off += numel;
    }
    ck_assert(memcmp(mask, ref, P) == 0);
    for (size_t i = 0; i < P; i++) count += mask[i];
    ck_assert_uint_eq(count, 4 * 32);
    /* a bias by name with the head; whole tensors; a prefix; everything */
    ck_ok(induct_llc_mask_select(m, "blocks.1.attn.b_Q", 1, mask, P));
    count = 0;
    for (size_t i = 0; i < P; i++) count += mask[i];
    ck_assert_uint_eq(count, 4 * 32 + 4);
    memset(mask, 0, P);
    ck_ok(induct_llc_mask_select(m, "embed.W_E", -1, mask, P));
    count = 0;
    for (size_t i = 0; i < P; i++) count += mask[i];
    ck_assert_uint_eq(count, 11 * 8);
    ck_assert_uint_eq(mask[0], 1);
    ck_ok(induct_llc_mask_select(m, "", -1, mask, P));
    count = 0;
    for (size_t i = 0; i < P; i++) count += mask[i];
    ck_assert_uint_eq(count, P);
    /* errors leave the mask alone */
    memset(mask, 0, P);
    ck_assert_status(induct_llc_mask_select(m, "blocks.1.attn", 2, mask, P), INDUCT_ERANGE);
    ck_assert_status(induct_llc_mask_select(m, "blocks.1.attn.b_O", 0, mask, P), INDUCT_EINVAL);
    ck_assert_status(induct_llc_mask_select(m, "blocks.1.att", -1, mask, P), INDUCT_ERANGE);
    ck_assert_status(induct_llc_mask_select(m, "blocks.7", -1, mask, P), INDUCT_ERANGE);
    ck_assert_status(induct_llc_mask_select(m, "embed", 0, mask, P), INDUCT_ERANGE);
    ck_assert_status(induct_llc_mask_select(m, "embed", -2, mask, P), INDUCT_EINVAL);
    ck_assert_status(induct_llc_mask_select(m, "embed", -1, mask, P - 1), INDUCT_ERANGE);
    ck_assert_status(induct_llc_mask_select(NULL, "embed", -1, mask, P), INDUCT_EINVAL);
    for (size_t i = 0; i < P; i++) ck_assert_uint_eq(mask[i], 0);
    /* a head-refined estimate samples exactly those coordinates */
    ck_ok(induct_llc_mask_select(m, "blocks.0.attn", 0, mask, P));
    induct_dataset *d = token_data(mc.d_vocab);
    induct_llc_config c = model_config();
    double dr[12], mm[2];
    induct_llc_summary s;
    estimate(m, d, mask, P, &c, dr, mm, &s);
    ck_assert_uint_eq(s.n_sampled, 4 * 32);
    induct_dataset_free(d);
    free(mask);
    free(ref);
    induct_model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("llc");
    TCase *tc = tcase_create("llc");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_config_defaults);
    tcase_add_test(tc, test_nbeta_rules);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_result_buffers);
    tcase_add_test(tc, test_mask_equals_drop);
    tcase_add_test(tc, test_same_noise_and_batches);
    tcase_add_test(tc, test_paired);
    tcase_add_test(tc, test_potential_stops);
    tcase_add_test(tc, test_divergence);
    tcase_add_test(tc, test_model_determinism);
    tcase_add_test(tc, test_model_bad_input);
    tcase_add_test(tc, test_mask_select);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
