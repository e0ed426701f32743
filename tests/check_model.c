/* Model: whole-model gradients against central finite differences for every
 * variant, causality, exact loss of all-zero logits, determinism, bad input.
 * Links only the shared library (public API). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

enum { B = 2, T = 7 };

typedef tu_variant variant;
#define VARIANTS TU_VARIANTS
#define N_VARIANTS TU_N_VARIANTS

static induct_model *make(const variant *v) {
    induct_model_config c;
    tu_tiny_config(&c);
    tu_variant_apply(&c, v);
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, 0.5, 3);
    return m;
}

static double loss_of(void *tok, induct_model *m) {
    double l;
    ck_ok(induct_model_forward(m, tok, B, T, NULL, 0, NULL, 0, &l));
    return l;
}

START_TEST(test_gradcheck) {
    const variant *v = &VARIANTS[_i];
    induct_model *m = make(v);
    int32_t tok[B * T];
    tu_tokens(tok, B * T, 11, 5);
    double l0;
    ck_ok(induct_model_backward(m, tok, B, T, &l0));
    ck_assert_uint_eq(tu_gradcheck(m, loss_of, tok, v->name), induct_model_n_params(m));
    induct_model_free(m);
}
END_TEST

/* Changing token j never changes logits at positions < j (bitwise). */
START_TEST(test_causality) {
    induct_model *m = make(&VARIANTS[TU_EVERYTHING]);
    int32_t tok[T];
    tu_tokens(tok, T, 11, 9);
    float a[T * 11], b[T * 11];
    ck_ok(induct_model_forward(m, tok, 1, T, a, T * 11, NULL, 0, NULL));
    for (int j = 1; j < T; j++) {
        int32_t t2[T];
        memcpy(t2, tok, sizeof tok);
        t2[j] = (t2[j] + 1 + j) % 11;
        ck_ok(induct_model_forward(m, t2, 1, T, b, T * 11, NULL, 0, NULL));
        ck_assert_msg(memcmp(a, b, (size_t)j * 11 * sizeof(float)) == 0,
                      "changing token %d changed an earlier logit", j);
        ck_assert_msg(memcmp(a + j * 11, b + j * 11, 11 * sizeof(float)) != 0,
                      "changing token %d did not change its own logits", j);
    }
    induct_model_free(m);
}
END_TEST

/* All-zero logits give exactly ln(d_vocab) at every position. */
START_TEST(test_zero_logits_loss) {
    induct_model *m = make(&VARIANTS[0]);
    float zeros[8 * 11] = {0};
    ck_ok(induct_model_set_tensor(m, "unembed.W_U", zeros, 8 * 11));
    ck_ok(induct_model_set_tensor(m, "unembed.b_U", zeros, 11));
    int32_t tok[B * T];
    tu_tokens(tok, B * T, 11, 1);
    float losses[B * (T - 1)];
    double mean;
    ck_ok(induct_model_forward(m, tok, B, T, NULL, 0, losses, B * (T - 1), &mean));
    for (int i = 0; i < B * (T - 1); i++) ck_assert_float_eq(losses[i], (float)log(11.0));
    ck_assert_double_eq_tol(mean, log(11.0), 1e-6);
    induct_model_free(m);
}
END_TEST

/* Logits equal to b_U (W_U = 0, so logits = 0 + b_U exactly); the model otherwise random. */
static induct_model *logits_model(const float *b_U) {
    induct_model *m = make(&VARIANTS[0]);
    float zeros[8 * 11] = {0};
    ck_ok(induct_model_set_tensor(m, "unembed.W_U", zeros, 8 * 11));
    ck_ok(induct_model_set_tensor(m, "unembed.b_U", b_U, 11));
    return m;
}

/* Cross-entropy against closed forms at extreme but finite logits: the loss and the
 * probabilities the backward pass uses (read through the gradient of b_U, which is the
 * mean over positions of softmax - onehot) are those of the softmax with the max
 * subtracted, whatever the common offset. */
START_TEST(test_xent_extreme_logits) {
    const double offsets[] = {0, -20000, 20000, -1e10, 1e10, -1e17, 1e17, -3e38, 3e38};
    const double n_rows = B * (T - 1);
    for (size_t oi = 0; oi < sizeof offsets / sizeof *offsets; oi++) {
        double c = offsets[oi];
        /* uniform logits: every probability 1/V, loss ln V, grad b_U = 1/V - share of v */
        float bU[11];
        for (int v = 0; v < 11; v++) bU[v] = (float)c;
        induct_model *m = logits_model(bU);
        int32_t tok[B * T];
        tu_tokens(tok, B * T, 11, 1);
        float losses[B * (T - 1)], g[11];
        double mean;
        ck_ok(induct_model_forward(m, tok, B, T, NULL, 0, losses, B * (T - 1), &mean));
        for (int i = 0; i < B * (T - 1); i++)
            ck_assert_msg(losses[i] == (float)log(11.0), "offset %g: loss %g, not ln 11", c,
                          losses[i]);
        ck_ok(induct_model_backward(m, tok, B, T, NULL));
        ck_ok(induct_model_get_tensor(m, "unembed.b_U", INDUCT_BUF_GRAD, g, 11, NULL));
        double gsum = 0;
        for (int v = 0; v < 11; v++) {
            double share = 0;
            for (int b = 0; b < B; b++)
                for (int p = 1; p < T; p++) share += tok[b * T + p] == v;
            ck_assert_msg(fabs(g[v] - (1.0 / 11 - share / n_rows)) < 1e-6,
                          "offset %g: grad b_U[%d] = %.9g, expected %.9g", c, v, g[v],
                          1.0 / 11 - share / n_rows);
            gsum += g[v];
        }
        ck_assert_msg(fabs(gsum) < 1e-6, "offset %g: grad b_U sums to %g, not 0", c, gsum);
        induct_model_free(m);

        /* two tied maxima, the rest far below: probabilities exactly 1/2, 1/2, 0 ... */
        double gap = fabs(c) / 10 > 1000 ? fabs(c) / 10 : 1000;
        for (int v = 0; v < 11; v++) bU[v] = v < 2 ? (float)c : (float)(c - gap);
        m = logits_model(bU);
        tu_tokens(tok, B * T, 2, 5); /* targets among the two maxima */
        ck_ok(induct_model_forward(m, tok, B, T, NULL, 0, losses, B * (T - 1), &mean));
        for (int i = 0; i < B * (T - 1); i++)
            ck_assert_msg(losses[i] == (float)log(2.0), "offset %g: loss %g, not ln 2", c,
                          losses[i]);
        ck_ok(induct_model_backward(m, tok, B, T, NULL));
        ck_ok(induct_model_get_tensor(m, "unembed.b_U", INDUCT_BUF_GRAD, g, 11, NULL));
        double share0 = 0;
        for (int b = 0; b < B; b++)
            for (int p = 1; p < T; p++) share0 += tok[b * T + p] == 0;
        ck_assert_double_eq_tol(g[0], 0.5 - share0 / n_rows, 1e-6);
        ck_assert_double_eq_tol(g[1], 0.5 - (n_rows - share0) / n_rows, 1e-6);
        for (int v = 2; v < 11; v++) ck_assert_float_eq(g[v], 0.0f);
        induct_model_free(m);
    }
}
END_TEST

/* Adding a constant to every logit changes neither the losses nor any gradient: with
 * logits on a 1/8 grid the shifted logits are exact, so the results are bit-identical. */
START_TEST(test_xent_shift_invariance) {
    const double offsets[] = {-1e6, -20000, -100, 100, 20000, 1e6};
    float base[11], bU[11];
    for (int v = 0; v < 11; v++) base[v] = (float)((v * 37 % 64) - 32) / 8.0f; /* in [-4, 4) */
    int32_t tok[B * T];
    tu_tokens(tok, B * T, 11, 2);
    induct_model *m0 = logits_model(base);
    float l0[B * (T - 1)], l1[B * (T - 1)];
    ck_ok(induct_model_forward(m0, tok, B, T, NULL, 0, l0, B * (T - 1), NULL));
    ck_ok(induct_model_backward(m0, tok, B, T, NULL));
    size_t nt = induct_model_n_tensors(m0);
    for (size_t oi = 0; oi < sizeof offsets / sizeof *offsets; oi++) {
        for (int v = 0; v < 11; v++) {
            bU[v] = (float)(base[v] + offsets[oi]);
            ck_assert((double)bU[v] == (double)base[v] + offsets[oi]); /* exact */
        }
        induct_model *m = logits_model(bU);
        ck_ok(induct_model_forward(m, tok, B, T, NULL, 0, l1, B * (T - 1), NULL));
        ck_assert_msg(memcmp(l0, l1, sizeof l0) == 0, "offset %g changes the losses",
                      offsets[oi]);
        ck_ok(induct_model_backward(m, tok, B, T, NULL));
        for (size_t i = 0; i < nt; i++) {
            const char *name;
            size_t n;
            ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &n));
            float *g0 = malloc(n * sizeof *g0), *g1 = malloc(n * sizeof *g1);
            ck_ok(induct_model_get_tensor(m0, name, INDUCT_BUF_GRAD, g0, n, NULL));
            ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_GRAD, g1, n, NULL));
            ck_assert_msg(memcmp(g0, g1, n * sizeof *g0) == 0,
                          "offset %g changes the gradient of %s", offsets[oi], name);
            free(g0), free(g1);
        }
        induct_model_free(m);
    }
    induct_model_free(m0);
}
END_TEST

/* Logits that overflow to +-inf (finite weights, an overflowing product): the loss is not
 * finite and forward and backward report INDUCT_ENUMERIC. */
START_TEST(test_xent_nonfinite_logits) {
    for (int sign = -1; sign <= 1; sign += 2) {
        induct_model *m = make(&VARIANTS[0]);
        size_t nt = induct_model_n_tensors(m);
        for (size_t i = 0; i < nt; i++) {
            const char *name;
            size_t n;
            ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &n));
            float *buf = calloc(n, sizeof *buf);
            float fill = !strcmp(name, "embed.W_E") ? 1.0f
                         : !strcmp(name, "unembed.W_U") ? (float)sign * 3e38f
                                                         : 0.0f;
            for (size_t j = 0; j < n; j++) buf[j] = fill;
            ck_ok(induct_model_set_tensor(m, name, buf, n));
            free(buf);
        }
        int32_t tok[B * T];
        tu_tokens(tok, B * T, 11, 3);
        float logits[B * T * 11];
        ck_assert_status(induct_model_forward(m, tok, B, T, logits, B * T * 11, NULL, 0, NULL),
                         INDUCT_ENUMERIC);
        ck_assert_status(induct_model_backward(m, tok, B, T, NULL), INDUCT_ENUMERIC);
        induct_model_free(m);
    }
}
END_TEST

/* b_K shifts every score of a query by q·b_K, which the softmax ignores: its gradient is
 * exactly 0 in every variant (not rounding noise), so AdamW (without weight decay)
 * leaves it bit-identical while every other tensor moves. */
START_TEST(test_b_K_gradient_is_zero) {
    const variant *v = &VARIANTS[_i];
    induct_model *m = make(v);
    int32_t tok[B * T];
    tu_tokens(tok, B * T, 11, 9);
    ck_ok(induct_model_backward(m, tok, B, T, NULL));
    float g[2 * 4], w0[2][2 * 4], w1[2 * 4];
    char name[64];
    for (int l = 0; l < 2; l++) {
        snprintf(name, sizeof name, "blocks.%d.attn.b_K", l);
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_GRAD, g, 8, NULL));
        for (int i = 0; i < 8; i++)
            ck_assert_msg(g[i] == 0.0f, "%s: grad %s[%d] = %g, not 0", v->name, name, i, g[i]);
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, w0[l], 8, NULL));
        snprintf(name, sizeof name, "blocks.%d.attn.b_Q", l);
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_GRAD, g, 8, NULL));
        float mx = 0;
        for (int i = 0; i < 8; i++) mx = fabsf(g[i]) > mx ? fabsf(g[i]) : mx;
        ck_assert_msg(mx > 1e-4f, "%s: grad %s is zero too", v->name, name);
    }
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_WEIGHT_DECAY, 0.0));
    for (int s = 0; s < 3; s++) ck_ok(induct_train_step_tokens(o, tok, B, T, NULL));
    for (int l = 0; l < 2; l++) {
        snprintf(name, sizeof name, "blocks.%d.attn.b_K", l);
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, w1, 8, NULL));
        ck_assert_msg(memcmp(w0[l], w1, sizeof w1) == 0, "%s: AdamW moved %s", v->name, name);
    }
    induct_optimizer_free(o);
    induct_model_free(m);
}
END_TEST

/* Attention rows sum to 1 and keys after the query get exactly 0. */
START_TEST(test_attention_pattern) {
    induct_model *m = make(&VARIANTS[TU_EVERYTHING]);
    int32_t tok[T];
    tu_tokens(tok, T, 11, 2);
    size_t need;
    ck_assert_status(induct_model_attention(m, tok, T, NULL, 0, &need), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(need, 2 * 2 * T * T);
    float *A = malloc(need * sizeof *A);
    ck_ok(induct_model_attention(m, tok, T, A, need, &need));
    for (int lh = 0; lh < 4; lh++)
        for (int p = 0; p < T; p++) {
            double s = 0;
            for (int k = 0; k < T; k++) {
                float a = A[(lh * T + p) * T + k];
                if (k > p) ck_assert_float_eq(a, 0.0f);
                else ck_assert(a >= 0.0f);
                s += a;
            }
            ck_assert_double_eq_tol(s, 1.0, 1e-5);
        }
    free(A);
    induct_model_free(m);
}
END_TEST

/* Very large weights make the scores extreme but finite: patterns stay exact. */
START_TEST(test_extreme_scores) {
    induct_model *m = make(&VARIANTS[0]);
    tu_randomize(m, 300.0, 4); /* scores of order 1e9 */
    int32_t tok[T];
    tu_tokens(tok, T, 11, 3);
    float A[2 * 2 * T * T];
    size_t len;
    ck_ok(induct_model_attention(m, tok, T, A, sizeof A / sizeof *A, &len));
    for (int lh = 0; lh < 4; lh++)
        for (int p = 0; p < T; p++) {
            double s = 0;
            for (int k = 0; k <= p; k++) {
                ck_assert(isfinite(A[(lh * T + p) * T + k]));
                s += A[(lh * T + p) * T + k];
            }
            ck_assert_double_eq_tol(s, 1.0, 1e-5);
        }
    induct_model_free(m);
}
END_TEST

static void train_n(uint32_t threads, int steps, float *params_out, double *loss_out) {
    induct_model_config c;
    tu_tiny_config(&c);
    c.d_mlp = 16;
    c.layer_norm = 1;
    c.smeared_keys = 1;
    c.n_threads = threads;
    c.n_ctx = 32;
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 11;
    rc.min_block = 3;
    rc.seed = 99;
    induct_dataset *d;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    ck_ok(induct_optimizer_set(o, INDUCT_OPT_LR, 1e-2));
    for (int s = 0; s < steps; s++) ck_ok(induct_train_step(o, d, 16, 32, &loss_out[s]));
    size_t off = 0, nt = induct_model_n_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        size_t n, len;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &n));
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, params_out + off, n, &len));
        off += n;
    }
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
}

/* Same seed, config and thread count: bit-identical. Also across thread counts
 * (documented in docs/threading.md): parallel loops cover independent outputs. */
START_TEST(test_determinism) {
    enum { STEPS = 20, NP = 20000 };
    static float p1[NP], p2[NP], p3[NP];
    double l1[STEPS], l2[STEPS], l3[STEPS];
    train_n(1, STEPS, p1, l1);
    train_n(1, STEPS, p2, l2);
    train_n(2, STEPS, p3, l3);
    ck_assert(memcmp(p1, p2, sizeof p1) == 0);
    ck_assert(memcmp(l1, l2, sizeof l1) == 0);
    ck_assert_msg(memcmp(p1, p3, sizeof p1) == 0, "1 and 2 threads differ");
    ck_assert(memcmp(l1, l3, sizeof l1) == 0);
    ck_assert(l1[STEPS - 1] < l1[0]);
}
END_TEST

Suite *model_suite(void) {
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("gradients");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_gradcheck, 0, N_VARIANTS);
    suite_add_tcase(s, tc);
    tc = tcase_create("numerics");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_causality);
    tcase_add_test(tc, test_zero_logits_loss);
    tcase_add_test(tc, test_xent_extreme_logits);
    tcase_add_test(tc, test_xent_shift_invariance);
    tcase_add_test(tc, test_xent_nonfinite_logits);
    tcase_add_loop_test(tc, test_b_K_gradient_is_zero, 0, N_VARIANTS);
    tcase_add_test(tc, test_attention_pattern);
    tcase_add_test(tc, test_extreme_scores);
    tcase_add_test(tc, test_determinism);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(model_suite()); }
