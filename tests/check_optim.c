/* Optimizer: AdamW and SGD updates against values computed here in double from the
 * gradients the library reports, learning-rate schedules, global-norm clipping,
 * parameter bounds, and the NaN/Inf guard. Links only the shared library. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "testutil.h"

enum { B = 2, T = 8, V = 11 };

/* Tensors with 1, 2 and 3 dimensions (LayerNorm, MLP, smeared keys). */
static induct_model *make_model(void) {
    induct_model_config c;
    tu_tiny_config(&c);
    c.d_mlp = 6;
    c.layer_norm = 1;
    c.smeared_keys = 1;
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, 0.3, 21);
    return m;
}

/* The model's weights, gradients (of the last backward) and per-element "this
 * tensor has >= 2 dims" flag, as doubles in storage order. */
typedef struct state {
    size_t n;
    double *p, *g;
    unsigned char *matrix;
} state;

static void read_state(const induct_model *m, state *s) {
    s->n = induct_model_n_params(m);
    s->p = malloc(s->n * sizeof *s->p);
    s->g = malloc(s->n * sizeof *s->g);
    s->matrix = malloc(s->n);
    float *buf = malloc(s->n * sizeof *buf);
    size_t off = 0;
    for (size_t i = 0; i < induct_model_n_tensors(m); i++) {
        const char *name;
        uint32_t ndim;
        size_t n, len;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, &ndim, &n));
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, buf, n, &len));
        for (size_t j = 0; j < n; j++) s->p[off + j] = buf[j];
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_GRAD, buf, n, &len));
        for (size_t j = 0; j < n; j++) s->g[off + j] = buf[j];
        memset(s->matrix + off, ndim >= 2, n);
        off += n;
    }
    ck_assert_uint_eq(off, s->n);
    free(buf);
}

static void free_state(state *s) {
    free(s->p);
    free(s->g);
    free(s->matrix);
}

static double norm2(const double *g, size_t n) {
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += g[i] * g[i];
    return sqrt(ss);
}

/* Largest |got - want| relative to (1e-6 + 1e-6 |want|); <= 1 passes. */
static double worst_error(const double *got, const double *want, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]) / (1e-6 + 1e-6 * fabs(want[i]));
        if (e > worst) worst = e;
    }
    return worst;
}

static void backward(induct_model *m, uint64_t seed) {
    int32_t tok[B * T];
    tu_tokens(tok, B * T, V, seed);
    double loss;
    ck_ok(induct_model_backward(m, tok, B, T, &loss));
    ck_assert(isfinite(loss));
}

static void set(induct_optimizer *o, induct_opt_param p, double v) {
    ck_ok(induct_optimizer_set(o, p, v));
}

/* ---- AdamW -------------------------------------------------------------------------- */

typedef struct adam_ref {
    double lr, b1, b2, eps, wd, clip;
    double *m, *v;
} adam_ref;

/* One AdamW step in double: clip, moments, bias correction for step t (1-based),
 * decoupled decay lr*wd*p on >= 2-dim tensors only. `decay_all` and `no_bias_corr`
 * give the predictions of two wrong implementations. */
static void adam_predict(adam_ref *r, const state *s, uint64_t t, double *out, int decay_all,
                         int no_bias_corr) {
    double gn = norm2(s->g, s->n);
    double c = (r->clip > 0 && gn > r->clip) ? r->clip / gn : 1.0;
    double bc1 = no_bias_corr ? 1.0 : 1.0 - pow(r->b1, (double)t);
    double bc2 = no_bias_corr ? 1.0 : 1.0 - pow(r->b2, (double)t);
    for (size_t i = 0; i < s->n; i++) {
        double g = s->g[i] * c;
        double m = r->b1 * r->m[i] + (1 - r->b1) * g;
        double v = r->b2 * r->v[i] + (1 - r->b2) * g * g;
        double decay = (s->matrix[i] || decay_all) ? r->lr * r->wd * s->p[i] : 0.0;
        out[i] = s->p[i] - decay - r->lr * (m / bc1) / (sqrt(v / bc2) + r->eps);
    }
}

static void adam_advance(adam_ref *r, const state *s) {
    double gn = norm2(s->g, s->n);
    double c = (r->clip > 0 && gn > r->clip) ? r->clip / gn : 1.0;
    for (size_t i = 0; i < s->n; i++) {
        double g = s->g[i] * c;
        r->m[i] = r->b1 * r->m[i] + (1 - r->b1) * g;
        r->v[i] = r->b2 * r->v[i] + (1 - r->b2) * g * g;
    }
}

static void run_adamw(double clip) {
    induct_model *m = make_model();
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    adam_ref r = {0.01, 0.8, 0.95, 1e-4, 0.1, clip, NULL, NULL};
    set(o, INDUCT_OPT_LR, r.lr);
    set(o, INDUCT_OPT_BETA1, r.b1);
    set(o, INDUCT_OPT_BETA2, r.b2);
    set(o, INDUCT_OPT_EPS, r.eps);
    set(o, INDUCT_OPT_WEIGHT_DECAY, r.wd);
    set(o, INDUCT_OPT_GRAD_CLIP, clip);
    size_t n = induct_model_n_params(m);
    r.m = calloc(n, sizeof(double));
    r.v = calloc(n, sizeof(double));
    double *want = malloc(n * sizeof *want), *alt = malloc(n * sizeof *alt);

    for (uint64_t t = 1; t <= 2; t++) {
        backward(m, 100 + t);
        state s0;
        read_state(m, &s0);
        if (t == 1 && clip > 0) ck_assert(norm2(s0.g, n) > 2 * clip); /* clipping is active */
        adam_predict(&r, &s0, t, want, 0, 0);
        double gn = -1;
        ck_ok(induct_optimizer_step(o, &gn));
        ck_assert_double_eq_tol(gn, norm2(s0.g, n), 1e-6 * norm2(s0.g, n));
        state s1;
        read_state(m, &s1);
        double err = worst_error(s1.p, want, n);
        ck_assert_msg(err <= 1.0, "step %llu: error %.3g x tolerance", (unsigned long long)t, err);
        /* the test can tell: decaying 1-dim tensors, or skipping bias correction,
         * would be far outside the tolerance */
        adam_predict(&r, &s0, t, alt, 1, 0);
        ck_assert_msg(worst_error(s1.p, alt, n) > 50, "decay on 1-dim tensors not detectable");
        adam_predict(&r, &s0, t, alt, 0, 1);
        ck_assert_msg(worst_error(s1.p, alt, n) > 50, "bias correction not detectable");
        adam_advance(&r, &s0);
        double step;
        ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step));
        ck_assert(step == (double)t);
        free_state(&s0);
        free_state(&s1);
    }
    free(r.m);
    free(r.v);
    free(want);
    free(alt);
    induct_optimizer_free(o);
    induct_model_free(m);
}

START_TEST(test_adamw_two_steps) { run_adamw(0.0); }
END_TEST

START_TEST(test_adamw_clipped) { run_adamw(0.05); }
END_TEST

/* ---- SGD ------------------------------------------------------------------------------ */

static void run_sgd(double momentum, double clip) {
    induct_model *m = make_model();
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_SGD));
    const double lr = 0.05, wd = 0.1;
    set(o, INDUCT_OPT_LR, lr);
    set(o, INDUCT_OPT_WEIGHT_DECAY, wd);
    set(o, INDUCT_OPT_MOMENTUM, momentum);
    set(o, INDUCT_OPT_GRAD_CLIP, clip);
    size_t n = induct_model_n_params(m);
    double *buf = calloc(n, sizeof *buf), *want = malloc(n * sizeof *want);
    for (uint64_t t = 1; t <= 3; t++) {
        backward(m, 200 + t);
        state s0;
        read_state(m, &s0);
        double gn = norm2(s0.g, n);
        double c = (clip > 0 && gn > clip) ? clip / gn : 1.0;
        if (clip > 0) ck_assert(c < 0.5); /* clipping is active */
        for (size_t i = 0; i < n; i++) {
            double g = s0.g[i] * c;
            /* PyTorch's convention: the first step's buffer is the gradient itself */
            buf[i] = momentum > 0 ? (t == 1 ? g : momentum * buf[i] + g) : g;
            want[i] = s0.p[i] - (s0.matrix[i] ? lr * wd * s0.p[i] : 0.0) - lr * buf[i];
        }
        double gn_lib = -1;
        ck_ok(induct_optimizer_step(o, &gn_lib));
        ck_assert_double_eq_tol(gn_lib, gn, 1e-6 * gn);
        state s1;
        read_state(m, &s1);
        double err = worst_error(s1.p, want, n);
        ck_assert_msg(err <= 1.0, "SGD momentum %g clip %g step %llu: error %.3g x tolerance",
                      momentum, clip, (unsigned long long)t, err);
        free_state(&s0);
        free_state(&s1);
    }
    free(buf);
    free(want);
    induct_optimizer_free(o);
    induct_model_free(m);
}

START_TEST(test_sgd_plain) { run_sgd(0.0, 0.0); }
END_TEST

START_TEST(test_sgd_momentum) { run_sgd(0.9, 0.0); }
END_TEST

START_TEST(test_sgd_clipped) { run_sgd(0.5, 0.02); }
END_TEST

/* Clipping threshold above the norm: no scaling at all. */
START_TEST(test_clip_inactive) {
    induct_model *m = make_model();
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_SGD));
    set(o, INDUCT_OPT_LR, 0.1);
    set(o, INDUCT_OPT_WEIGHT_DECAY, 0.0);
    backward(m, 7);
    state s0;
    read_state(m, &s0);
    set(o, INDUCT_OPT_GRAD_CLIP, 2 * norm2(s0.g, s0.n));
    ck_ok(induct_optimizer_step(o, NULL)); /* grad_norm_out is optional */
    state s1;
    read_state(m, &s1);
    double *want = malloc(s0.n * sizeof *want);
    for (size_t i = 0; i < s0.n; i++) want[i] = s0.p[i] - 0.1 * s0.g[i];
    ck_assert(worst_error(s1.p, want, s0.n) <= 1.0);
    free(want);
    free_state(&s0);
    free_state(&s1);
    induct_optimizer_free(o);
    induct_model_free(m);
}
END_TEST

/* ---- learning-rate schedules ------------------------------------------------------------- */

/* Linear warmup: step s (0-based) uses lr (s+1)/W, so the very first step already
 * moves the weights; then constant. The rate reported is the one applied. */
START_TEST(test_warmup_constant) {
    induct_model *m = make_model();
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_SGD));
    const double lr = 0.1;
    const int W = 4;
    set(o, INDUCT_OPT_LR, lr);
    set(o, INDUCT_OPT_WEIGHT_DECAY, 0.0);
    set(o, INDUCT_OPT_WARMUP_STEPS, W);
    for (int s = 0; s < 7; s++) {
        double want = s < W ? lr * (s + 1) / W : lr, got;
        ck_ok(induct_optimizer_current_lr(o, &got));
        ck_assert_double_eq_tol(got, want, 1e-15);
        backward(m, 300 + s);
        state s0;
        read_state(m, &s0);
        ck_ok(induct_optimizer_step(o, NULL));
        state s1;
        read_state(m, &s1);
        /* the applied rate, recovered from the update */
        double num = 0, den = 0;
        for (size_t i = 0; i < s0.n; i++) {
            num += (s0.p[i] - s1.p[i]) * s0.g[i];
            den += s0.g[i] * s0.g[i];
        }
        ck_assert_msg(fabs(num / den - want) < 1e-4 * want, "step %d applied %g, expected %g",
                      s, num / den, want);
        free_state(&s0);
        free_state(&s1);
    }
    /* constant long after the warmup */
    set(o, INDUCT_OPT_STEP, 1e6);
    double got;
    ck_ok(induct_optimizer_current_lr(o, &got));
    ck_assert(got == lr);
    /* no warmup: the first step has the full rate */
    set(o, INDUCT_OPT_WARMUP_STEPS, 0);
    set(o, INDUCT_OPT_STEP, 0);
    ck_ok(induct_optimizer_current_lr(o, &got));
    ck_assert(got == lr);
    induct_optimizer_free(o);
    induct_model_free(m);
}
END_TEST

/* Cosine after warmup: min + (lr - min) (1 + cos(pi (s - W) / (S - W))) / 2, held at
 * min = ratio * lr from step S on. */
START_TEST(test_warmup_cosine) {
    induct_model *m = make_model();
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    const double lr = 2.0, ratio = 0.1, W = 2, S = 10;
    set(o, INDUCT_OPT_LR, lr);
    set(o, INDUCT_OPT_WARMUP_STEPS, W);
    set(o, INDUCT_OPT_SCHEDULE, 1);
    set(o, INDUCT_OPT_TOTAL_STEPS, S);
    set(o, INDUCT_OPT_MIN_LR_RATIO, ratio);
    const double pi = 3.14159265358979323846;
    for (int s = 0; s <= 15; s++) {
        double want;
        if (s < W) want = lr * (s + 1) / W;
        else {
            double prog = (s - W) / (S - W);
            if (prog > 1) prog = 1;
            want = ratio * lr + (lr - ratio * lr) * 0.5 * (1 + cos(pi * prog));
        }
        set(o, INDUCT_OPT_STEP, s);
        double got;
        ck_ok(induct_optimizer_current_lr(o, &got));
        ck_assert_msg(fabs(got - want) < 1e-12, "step %d: %.17g, expected %.17g", s, got, want);
    }
    /* a few values written out */
    double got;
    set(o, INDUCT_OPT_STEP, 0);
    ck_ok(induct_optimizer_current_lr(o, &got));
    ck_assert_double_eq_tol(got, 1.0, 1e-15); /* lr * 1/2 */
    set(o, INDUCT_OPT_STEP, 6);
    ck_ok(induct_optimizer_current_lr(o, &got));
    ck_assert_double_eq_tol(got, 1.1, 1e-12); /* halfway: (0.2 + 2) / 2 */
    set(o, INDUCT_OPT_STEP, 10);
    ck_ok(induct_optimizer_current_lr(o, &got));
    ck_assert_double_eq_tol(got, 0.2, 1e-12);
    set(o, INDUCT_OPT_STEP, 1000);
    ck_ok(induct_optimizer_current_lr(o, &got));
    ck_assert_double_eq_tol(got, 0.2, 1e-12);
    /* the step counter advances by one per step */
    set(o, INDUCT_OPT_STEP, 3);
    backward(m, 5);
    ck_ok(induct_optimizer_step(o, NULL));
    double step;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step));
    ck_assert(step == 4);
    induct_optimizer_free(o);
    induct_model_free(m);
}
END_TEST

/* ---- parameters and bounds ------------------------------------------------------------- */

typedef struct doc_param {
    induct_opt_param p;
    double def, lo, hi; /* as documented in induct.h */
    int hi_open;        /* documented as [lo, hi): hi itself is refused */
} doc_param;

static const doc_param DOC[] = {
    {INDUCT_OPT_LR, 1e-3, 0, 10, 0},
    {INDUCT_OPT_BETA1, 0.9, 0, 1, 1},
    {INDUCT_OPT_BETA2, 0.999, 0, 1, 1},
    {INDUCT_OPT_EPS, 1e-8, 0, 1, 0},
    {INDUCT_OPT_WEIGHT_DECAY, 0.01, 0, 10, 0},
    {INDUCT_OPT_GRAD_CLIP, 0, 0, 1e9, 0},
    {INDUCT_OPT_WARMUP_STEPS, 0, 0, 1e12, 0},
    {INDUCT_OPT_SCHEDULE, 0, 0, 1, 0},
    {INDUCT_OPT_TOTAL_STEPS, 0, 0, 1e12, 0},
    {INDUCT_OPT_MIN_LR_RATIO, 0, 0, 1, 0},
    {INDUCT_OPT_MOMENTUM, 0, 0, 1, 1},
    {INDUCT_OPT_STEP, 0, 0, 9007199254740992.0, 0},
    {INDUCT_OPT_GRAD_SHARDS, 1, 1, 65536, 0},
};

START_TEST(test_param_bounds) {
    induct_model *m = make_model();
    for (uint32_t kind = 0; kind <= INDUCT_OPTIM_SGD; kind++) {
        induct_optimizer *o;
        ck_ok(induct_optimizer_new(&o, m, kind));
        for (size_t i = 0; i < sizeof DOC / sizeof DOC[0]; i++) {
            const doc_param *d = &DOC[i];
            double lo, hi, v;
            ck_ok(induct_opt_param_bounds(d->p, &lo, &hi));
            ck_assert(lo == d->lo);
            if (d->hi_open) ck_assert(hi < d->hi && hi > d->hi - 1e-3);
            else ck_assert(hi == d->hi);
            ck_ok(induct_optimizer_get(o, d->p, &v));
            ck_assert_msg(v == d->def, "param %d default %g, documented %g", d->p, v, d->def);
            ck_assert(lo <= v && v <= hi);
            /* both ends accepted and read back */
            ck_ok(induct_optimizer_set(o, d->p, lo));
            ck_ok(induct_optimizer_get(o, d->p, &v));
            ck_assert(v == lo);
            ck_ok(induct_optimizer_set(o, d->p, hi));
            ck_ok(induct_optimizer_get(o, d->p, &v));
            ck_assert(v == hi);
            /* just outside: ERANGE, value kept */
            induct_error_clear();
            ck_assert_status(induct_optimizer_set(o, d->p, nextafter(hi, INFINITY)), INDUCT_ERANGE);
            ck_assert(induct_last_error_message()[0] != '\0');
            ck_assert_status(induct_optimizer_set(o, d->p, nextafter(lo, -INFINITY)), INDUCT_ERANGE);
            ck_assert_status(induct_optimizer_set(o, d->p, -1.0), INDUCT_ERANGE);
            ck_assert_status(induct_optimizer_set(o, d->p, 1e300), INDUCT_ERANGE);
            if (d->hi_open) ck_assert_status(induct_optimizer_set(o, d->p, d->hi), INDUCT_ERANGE);
            ck_assert_status(induct_optimizer_set(o, d->p, NAN), INDUCT_EINVAL);
            ck_assert_status(induct_optimizer_set(o, d->p, INFINITY), INDUCT_EINVAL);
            ck_ok(induct_optimizer_get(o, d->p, &v));
            ck_assert(v == hi);
        }
        /* unknown parameters */
        const int unknown[] = {0, 14, 15, -1, 999, 1000, INT_MAX, INT_MIN};
        for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
            induct_opt_param p = (induct_opt_param)unknown[i];
            double lo = -5, hi = -5, v = -5;
            induct_error_clear();
            ck_assert_status(induct_opt_param_bounds(p, &lo, &hi), INDUCT_ENOTSUP);
            ck_assert(induct_last_error_message()[0] != '\0');
            ck_assert(lo == -5 && hi == -5);
            ck_assert_status(induct_optimizer_set(o, p, 0.0), INDUCT_ENOTSUP);
            ck_assert_status(induct_optimizer_get(o, p, &v), INDUCT_ENOTSUP);
            ck_assert(v == -5);
        }
        induct_optimizer_free(o);
    }
    induct_model_free(m);
}
END_TEST

/* ---- NaN/Inf guard --------------------------------------------------------------------- */

static float *tensor(const induct_model *m, const char *name, size_t *n) {
    ck_assert_status(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, NULL, 0, n),
                     INDUCT_EBUFSIZE);
    float *b = malloc(*n * sizeof *b);
    ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, b, *n, n));
    return b;
}

static void fill_tensor(induct_model *m, const char *name, float v) {
    size_t n;
    float *b = tensor(m, name, &n);
    for (size_t i = 0; i < n; i++) b[i] = v;
    ck_ok(induct_model_set_tensor(m, name, b, n));
    free(b);
}

static void put_tensor(induct_model *m, const char *name, const float *b) {
    size_t n;
    float *old = tensor(m, name, &n);
    ck_ok(induct_model_set_tensor(m, name, b, n));
    free(old);
}

static int same_weights(const induct_model *a, const induct_model *b) {
    state sa, sb;
    read_state(a, &sa);
    read_state(b, &sb);
    int same = sa.n == sb.n && memcmp(sa.p, sb.p, sa.n * sizeof *sa.p) == 0;
    free_state(&sa);
    free_state(&sb);
    return same;
}

static induct_model *guard_model(void) {
    induct_model_config c;
    tu_tiny_config(&c);
    c.n_layers = 1;
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, 0.3, 5);
    return m;
}

/* Huge finite weights make the forward overflow (loss NaN): the step fails with
 * ENUMERIC and the weights, the moments and the step counter stay as they were. */
START_TEST(test_guard_loss) {
    induct_model *m = guard_model(), *ref = guard_model();
    induct_optimizer *o, *oref;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    ck_ok(induct_optimizer_new(&oref, ref, INDUCT_OPTIM_ADAMW));
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = V;
    rc.min_block = 2;
    induct_dataset *d;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    double loss;
    ck_ok(induct_train_step(o, d, B, T, &loss));
    ck_ok(induct_train_step(oref, d, B, T, &loss));

    size_t n;
    float *W_E = tensor(m, "embed.W_E", &n), *W_pos = tensor(m, "pos_embed.W_pos", &n);
    fill_tensor(m, "embed.W_E", 3e38f);
    fill_tensor(m, "pos_embed.W_pos", 3e38f); /* W_E + W_pos = +inf */
    state before;
    read_state(m, &before);
    loss = -1;
    ck_assert_status(induct_train_step(o, d, B, T, &loss), INDUCT_ENUMERIC);
    ck_assert_int_eq(induct_last_error_code(), INDUCT_ENUMERIC);
    ck_assert(loss == -1); /* not written on failure */
    state after;
    read_state(m, &after);
    ck_assert(memcmp(before.p, after.p, before.n * sizeof *before.p) == 0);
    double step;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step));
    ck_assert(step == 1);
    const int32_t three[3] = {1, 2, 3};
    ck_assert_status(induct_model_forward(m, three, 1, 3, NULL, 0, NULL, 0, &loss),
                     INDUCT_ENUMERIC);
    free_state(&before);
    free_state(&after);

    /* restore: the next step is bit-identical to one that never saw the failure
     * (same batch index, same moments, same bias correction) */
    put_tensor(m, "embed.W_E", W_E);
    put_tensor(m, "pos_embed.W_pos", W_pos);
    ck_assert(same_weights(m, ref));
    double l1, l2;
    ck_ok(induct_train_step(o, d, B, T, &l1));
    ck_ok(induct_train_step(oref, d, B, T, &l2));
    ck_assert(l1 == l2);
    ck_assert(same_weights(m, ref));
    free(W_E);
    free(W_pos);
    induct_dataset_free(d);
    induct_optimizer_free(o);
    induct_optimizer_free(oref);
    induct_model_free(m);
    induct_model_free(ref);
}
END_TEST

/* A finite loss with infinite gradients: every token is 3, the residual stream is
 * tiny (W_E = 1e-30, everything else in the block 0) and W_U = +-3e38 with the
 * sign of the target's column flipped, so every position's d(resid) is about
 * +4e37 and W_E's gradient, summed over 14 positions, overflows float. */
START_TEST(test_guard_gradient) {
    induct_model *m = guard_model(), *ref = guard_model();
    induct_optimizer *o, *oref;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    ck_ok(induct_optimizer_new(&oref, ref, INDUCT_OPTIM_ADAMW));
    int32_t good[B * T];
    tu_tokens(good, B * T, V, 31);
    double loss;
    ck_ok(induct_train_step_tokens(o, good, B, T, &loss));
    ck_ok(induct_train_step_tokens(oref, good, B, T, &loss));

    /* keep every weight, then build the overflow */
    state keep;
    read_state(m, &keep);
    size_t nt = induct_model_n_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, NULL));
        fill_tensor(m, name, 0.0f);
    }
    fill_tensor(m, "embed.W_E", 1e-30f);
    size_t n;
    float *W_U = tensor(m, "unembed.W_U", &n); /* [d_model][V] */
    for (size_t i = 0; i < n; i++) W_U[i] = (i % V == 3) ? -3e38f : 3e38f;
    put_tensor(m, "unembed.W_U", W_U);
    free(W_U);
    int32_t threes[B * T];
    for (int i = 0; i < B * T; i++) threes[i] = 3;
    /* the loss is finite ... */
    ck_ok(induct_model_forward(m, threes, B, T, NULL, 0, NULL, 0, &loss));
    ck_assert(isfinite(loss) && loss > 1e9);
    /* ... the gradients are not */
    ck_ok(induct_model_backward(m, threes, B, T, &loss));
    state bad;
    read_state(m, &bad);
    int nonfinite = 0;
    for (size_t i = 0; i < bad.n; i++) nonfinite += !isfinite(bad.g[i]);
    ck_assert_int_gt(nonfinite, 0);
    double gn = -1;
    ck_assert_status(induct_optimizer_step(o, &gn), INDUCT_ENUMERIC);
    state after;
    read_state(m, &after);
    ck_assert(memcmp(bad.p, after.p, bad.n * sizeof *bad.p) == 0);
    ck_assert_status(induct_train_step_tokens(o, threes, B, T, &loss), INDUCT_ENUMERIC);
    free_state(&after);
    read_state(m, &after);
    ck_assert(memcmp(bad.p, after.p, bad.n * sizeof *bad.p) == 0);
    double step;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step));
    ck_assert(step == 1);
    free_state(&after);
    free_state(&bad);

    /* restore every weight: the next step matches the reference bit for bit */
    size_t off = 0;
    float *buf = malloc(keep.n * sizeof *buf);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        size_t k;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &k));
        for (size_t j = 0; j < k; j++) buf[j] = (float)keep.p[off + j];
        ck_ok(induct_model_set_tensor(m, name, buf, k));
        off += k;
    }
    free(buf);
    free_state(&keep);
    ck_assert(same_weights(m, ref));
    tu_tokens(good, B * T, V, 32);
    double l1, l2;
    ck_ok(induct_train_step_tokens(o, good, B, T, &l1));
    ck_ok(induct_train_step_tokens(oref, good, B, T, &l2));
    ck_assert(l1 == l2);
    ck_assert(same_weights(m, ref));
    induct_optimizer_free(o);
    induct_optimizer_free(oref);
    induct_model_free(m);
    induct_model_free(ref);
}
END_TEST

int main(void) {
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("updates");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_adamw_two_steps);
    tcase_add_test(tc, test_adamw_clipped);
    tcase_add_test(tc, test_sgd_plain);
    tcase_add_test(tc, test_sgd_momentum);
    tcase_add_test(tc, test_sgd_clipped);
    tcase_add_test(tc, test_clip_inactive);
    suite_add_tcase(s, tc);
    tc = tcase_create("schedules");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_warmup_constant);
    tcase_add_test(tc, test_warmup_cosine);
    tcase_add_test(tc, test_param_bounds);
    suite_add_tcase(s, tc);
    tc = tcase_create("guard");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_guard_loss);
    tcase_add_test(tc, test_guard_gradient);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
