#include "testutil.h"

#include <math.h>
#include <string.h>

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 11;
}

void tu_tiny_config(induct_model_config *c) {
    induct_model_config_init(c, sizeof *c);
    c->n_layers = 2;
    c->d_model = 8;
    c->n_heads = 2;
    c->n_ctx = 8;
    c->d_vocab = 11;
    c->seed = 7;
}

const tu_variant TU_VARIANTS[] = {
    {"attention-only", 0, 0, INDUCT_POS_STANDARD, 0, 0},
    {"mlp", 12, 0, INDUCT_POS_STANDARD, 0, 0},
    {"layernorm", 0, 1, INDUCT_POS_STANDARD, 0, 0},
    {"shortformer", 0, 0, INDUCT_POS_SHORTFORMER, 0, 0},
    {"none", 0, 0, INDUCT_POS_NONE, 0, 0},
    {"smeared-keys", 0, 0, INDUCT_POS_STANDARD, 1, 0},
    {"everything", 12, 1, INDUCT_POS_SHORTFORMER, 1, 0},
    {"shortformer-layer0", 0, 1, INDUCT_POS_SHORTFORMER, 0, 1},
    {"shortformer-layer0-no-ln", 0, 0, INDUCT_POS_SHORTFORMER, 0, 1},
};
const int TU_N_VARIANTS = (int)(sizeof TU_VARIANTS / sizeof TU_VARIANTS[0]);

void tu_variant_apply(induct_model_config *c, const tu_variant *v) {
    c->d_mlp = v->d_mlp;
    c->layer_norm = v->layer_norm;
    c->positional = v->positional;
    c->smeared_keys = v->smeared;
    c->shortformer_layers = v->shortformer_layers;
}

induct_model *tu_variant_model(uint32_t d_mlp, uint32_t layer_norm, uint32_t positional,
                               uint32_t smeared_keys, uint64_t seed) {
    induct_model_config c;
    tu_tiny_config(&c);
    c.d_mlp = d_mlp;
    c.layer_norm = layer_norm;
    c.positional = positional;
    c.smeared_keys = smeared_keys;
    induct_model *m;
    ck_assert_int_eq(induct_model_new(&m, &c), INDUCT_OK);
    tu_randomize(m, 0.5, seed);
    return m;
}

induct_dataset *tu_rrt(uint32_t d_vocab, uint32_t min_block, uint64_t seed) {
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = d_vocab;
    rc.min_block = min_block;
    rc.seed = seed;
    induct_dataset *d = NULL;
    ck_assert_int_eq(induct_dataset_new_rrt(&d, &rc), INDUCT_OK);
    return d;
}

void tu_tokens(int32_t *t, size_t n, uint32_t V, uint64_t seed) {
    uint64_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) t[i] = (int32_t)(lcg(&s) % V);
}

void tu_randomize(induct_model *m, double std, uint64_t seed) {
    uint64_t s = seed + 12345;
    size_t nt = induct_model_n_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        size_t n;
        ck_assert_int_eq(induct_model_tensor_info(m, i, &name, NULL, NULL, &n), INDUCT_OK);
        float *buf = malloc(n * sizeof *buf);
        for (size_t j = 0; j < n; j++) {
            double u1 = ((double)lcg(&s) + 1.0) / 9007199254740993.0;
            double u2 = (double)lcg(&s) / 9007199254740992.0;
            double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
            buf[j] = (float)(std * z);
            if (strstr(name, ".w") && strstr(name, "ln")) buf[j] += 1.0f; /* LN gains near 1 */
        }
        ck_assert_int_eq(induct_model_set_tensor(m, name, buf, n), INDUCT_OK);
        free(buf);
    }
}

size_t tu_gradcheck(induct_model *m, tu_loss_fn loss, void *user, const char *what) {
    size_t nt = induct_model_n_tensors(m), checked = 0;
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        size_t n, len;
        ck_assert_int_eq(induct_model_tensor_info(m, i, &name, NULL, NULL, &n), INDUCT_OK);
        float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g);
        ck_assert_int_eq(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, p, n, &len),
                         INDUCT_OK);
        ck_assert_int_eq(induct_model_get_tensor(m, name, INDUCT_BUF_GRAD, g, n, &len),
                         INDUCT_OK);
        for (size_t j = 0; j < n; j++) {
            const float eps = 2e-3f;
            float orig = p[j];
            p[j] = orig + eps;
            ck_assert_int_eq(induct_model_set_tensor(m, name, p, n), INDUCT_OK);
            double lp = loss(user, m);
            p[j] = orig - eps;
            ck_assert_int_eq(induct_model_set_tensor(m, name, p, n), INDUCT_OK);
            double lm = loss(user, m);
            p[j] = orig;
            ck_assert_int_eq(induct_model_set_tensor(m, name, p, n), INDUCT_OK);
            double fd = (lp - lm) / (2.0 * ((double)(orig + eps) - (double)orig));
            double err = fabs(fd - g[j]) / (2e-3 + 2e-2 * fabs(fd));
            ck_assert_msg(err <= 1.0, "%s: %s[%zu] analytic %.6g vs finite difference %.6g",
                          what, name, j, g[j], fd);
            checked++;
        }
        free(p);
        free(g);
    }
    return checked;
}

int tu_clamp_previous_token(void *user, const char *name, float *att, const uint32_t *shape,
                            uint32_t ndim) {
    size_t head = *(const uint32_t *)user, H = shape[1], T = shape[2];
    (void)name;
    ck_assert_uint_eq(ndim, 4);
    for (size_t b = 0; b < shape[0]; b++) {
        float *A = att + (b * H + head) * T * T;
        memset(A, 0, T * T * sizeof *A);
        for (size_t p = 0; p < T; p++) A[p * T + (p ? p - 1 : 0)] = 1.0f;
    }
    return 0;
}

float *tu_grads(induct_model *m) {
    size_t nt = induct_model_n_tensors(m), total = induct_model_n_params(m), off = 0;
    float *g = malloc(total * sizeof *g);
    ck_assert_ptr_nonnull(g);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        size_t n, len;
        ck_assert_int_eq(induct_model_tensor_info(m, i, &name, NULL, NULL, &n), INDUCT_OK);
        ck_assert_uint_le(off + n, total);
        ck_assert_int_eq(induct_model_get_tensor(m, name, INDUCT_BUF_GRAD, g + off, n, &len),
                         INDUCT_OK);
        off += n;
    }
    ck_assert_uint_eq(off, total);
    return g;
}

int tu_run(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
