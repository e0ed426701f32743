/* Hook points through the public API: the cache is the plain pass, writes that change
 * nothing change no bit, zeroing hook_z is zero ablation, errors are clear. The values
 * of every point against an independent PyTorch model are in
 * bindings/python/tests/test_hooks.py. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

enum { B = 6, T = 8 }; /* B*T >= 2 (d_vocab + T): layer 0 is folded without LayerNorm */

typedef struct variant {
    const char *name;
    uint32_t d_mlp, layer_norm, smeared, positional;
    size_t n_points; /* hook points of the 2-layer model */
} variant;

static const variant VARIANTS[] = {
    /* embed, pos_embed; per layer resid_pre q k v scores pattern z result attn_out
     * resid_post */
    {"attn-only", 0, 0, 0, INDUCT_POS_STANDARD, 2 + 2 * 10},
    /* + ln1, resid_mid, ln2, mlp pre/post, mlp_out per layer; ln_final */
    {"mlp+ln", 16, 1, 0, INDUCT_POS_STANDARD, 2 + 2 * 16 + 1},
    /* no hook_pos_embed; + k_smeared per layer */
    {"smeared shortformer", 0, 0, 1, INDUCT_POS_SHORTFORMER, 1 + 2 * 11},
};
#define N_VARIANTS (sizeof VARIANTS / sizeof *VARIANTS)

static induct_model *make(const variant *v) {
    return tu_variant_model(v->d_mlp, v->layer_norm, v->positional, v->smeared, 7);
}

static float *floats(size_t n) {
    float *p = malloc(n * sizeof *p);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Every point cached in one pass: the logits are the plain pass's bits; the points
 * that are the same tensor agree bit for bit, as does the pattern with
 * induct_model_attention(). */
START_TEST(test_cache_is_the_plain_pass) {
    const variant *v = &VARIANTS[_i];
    induct_model *m = make(v);
    int32_t tok[B * T];
    tu_tokens(tok, B * T, 11, 3);
    char names[64][64];
    const char *np[64];
    float *bufs[64];
    size_t caps[64], n = 0, len;
    for (;; n++) {
        ck_assert_uint_lt(n, 64);
        int rc = induct_model_hook_point(m, n, names[n], sizeof names[n], &len);
        if (rc == INDUCT_ERANGE) break;
        ck_ok(rc);
        ck_assert_uint_eq(len, strlen(names[n]) + 1);
        np[n] = names[n];
        ck_ok(induct_model_hook_shape(m, names[n], B, T, NULL, NULL, &caps[n]));
        bufs[n] = floats(caps[n]);
    }
    ck_assert_msg(n == v->n_points, "%s: %zu points", v->name, n);
    float *lg = floats(B * T * 11), *ref = floats(B * T * 11);
    double mean, ref_mean;
    ck_ok(induct_model_run_with_cache(m, tok, B, T, np, bufs, caps, n, lg, B * T * 11, &mean));
    ck_ok(induct_model_forward(m, tok, B, T, ref, B * T * 11, NULL, 0, &ref_mean));
    ck_assert(memcmp(lg, ref, B * T * 11 * sizeof *lg) == 0);
    ck_assert(mean == ref_mean);
    /* resid_post of layer 0 is resid_pre of layer 1 */
    size_t post0 = n, pre1 = n, pat1 = n;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(names[i], "blocks.0.hook_resid_post")) post0 = i;
        if (!strcmp(names[i], "blocks.1.hook_resid_pre")) pre1 = i;
        if (!strcmp(names[i], "blocks.1.attn.hook_pattern")) pat1 = i;
    }
    ck_assert(post0 < n && pre1 < n && pat1 < n && post0 < pre1);
    ck_assert(memcmp(bufs[post0], bufs[pre1], caps[pre1] * sizeof(float)) == 0);
    /* one sequence's patterns of layer 1 are those induct_model_attention() gives (one
     * sequence: the batch decides whether layer 0 is folded, which changes low bits) */
    float att[2 * 2 * T * T], one[2 * T * T];
    float *onep[] = {one};
    size_t cap1 = 2 * T * T;
    ck_ok(induct_model_attention(m, tok, T, att, 2 * 2 * T * T, &len));
    ck_ok(induct_model_run_with_cache(m, tok, 1, T, &np[pat1], onep, &cap1, 1, NULL, 0, NULL));
    ck_assert(memcmp(one, att + 2 * T * T, 2 * T * T * sizeof(float)) == 0);
    for (size_t i = 0; i < n; i++) free(bufs[i]);
    free(lg);
    free(ref);
    induct_model_free(m);
}
END_TEST

typedef struct head_arg {
    uint32_t head, n_heads, d_head;
    int calls;
} head_arg;

/* Overwrite one head's [T][T] pattern (or scores) with a copy of itself. */
static int rewrite_head(void *user, const char *name, float *x, const uint32_t *shape,
                        uint32_t ndim) {
    head_arg *a = user;
    (void)name;
    ck_assert_uint_eq(ndim, 4);
    ck_assert_uint_eq(shape[1], a->n_heads);
    size_t tt = (size_t)shape[2] * shape[3];
    float *copy = floats(tt);
    for (uint32_t b = 0; b < shape[0]; b++) {
        float *h = x + ((size_t)b * shape[1] + a->head) * tt;
        memcpy(copy, h, tt * sizeof *h);
        memcpy(h, copy, tt * sizeof *h);
    }
    free(copy);
    a->calls++;
    return 0;
}

/* Writing a head's own pattern (or scores) back leaves the logits bit-identical: the
 * pass splits attention around the write with the fused kernel's arithmetic. */
START_TEST(test_own_pattern_written_back_is_bit_identical) {
    const variant *v = &VARIANTS[_i];
    induct_model *m = make(v);
    int32_t tok[B * T];
    tu_tokens(tok, B * T, 11, 5);
    float *plain = floats(B * T * 11), *hooked = floats(B * T * 11);
    ck_ok(induct_model_forward(m, tok, B, T, plain, B * T * 11, NULL, 0, NULL));
    const char *points[] = {"blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern",
                            "blocks.1.attn.hook_attn_scores"};
    for (size_t k = 0; k < 3; k++) {
        head_arg a = {1, 2, 4, 0};
        induct_hook h = {points[k], rewrite_head, &a};
        memset(hooked, 0, B * T * 11 * sizeof *hooked);
        ck_ok(induct_model_run_with_hooks(m, tok, B, T, &h, 1, hooked, B * T * 11, NULL, 0,
                                          NULL));
        ck_assert_int_eq(a.calls, 1);
        ck_assert_msg(memcmp(plain, hooked, B * T * 11 * sizeof *plain) == 0, "%s: %s", v->name,
                      points[k]);
    }
    free(plain);
    free(hooked);
    induct_model_free(m);
}
END_TEST

/* Zero one head's slice of hook_z. */
static int zero_head(void *user, const char *name, float *z, const uint32_t *shape,
                     uint32_t ndim) {
    head_arg *a = user;
    (void)name;
    ck_assert_uint_eq(ndim, 4);
    ck_assert_uint_eq(shape[2], a->n_heads);
    ck_assert_uint_eq(shape[3], a->d_head);
    for (size_t r = 0; r < (size_t)shape[0] * shape[1]; r++)
        memset(z + (r * a->n_heads + a->head) * a->d_head, 0, a->d_head * sizeof *z);
    a->calls++;
    return 0;
}

/* Read hook_z's head slice: is it all zero? */
static int head_is_zero(void *user, const char *name, float *z, const uint32_t *shape,
                        uint32_t ndim) {
    head_arg *a = user;
    (void)name, (void)ndim;
    int zero = 1;
    for (size_t r = 0; r < (size_t)shape[0] * shape[1]; r++)
        for (uint32_t j = 0; j < a->d_head; j++)
            zero &= z[(r * a->n_heads + a->head) * a->d_head + j] == 0.0f;
    a->calls = zero;
    return 0;
}

START_TEST(test_zeroed_z_is_zero_ablation) {
    const variant *v = &VARIANTS[_i];
    induct_model *m = make(v);
    int32_t tok[B * T];
    tu_tokens(tok, B * T, 11, 9);
    enum { NL = B * T * 11, NS = B * (T - 1) };
    float *lg_h = floats(NL), *lg_a = floats(NL), *lg_0 = floats(NL);
    float ls_h[NS], ls_a[NS];
    double m_h, m_a;
    head_arg a = {1, 2, 4, 0};
    induct_hook h = {"blocks.0.attn.hook_z", zero_head, &a};
    ck_ok(induct_model_run_with_hooks(m, tok, B, T, &h, 1, lg_h, NL, ls_h, NS, &m_h));
    ck_ok(induct_model_forward(m, tok, B, T, lg_0, NL, NULL, 0, NULL));
    ck_ok(induct_model_ablate_head(m, 0, 1, INDUCT_ABLATE_ZERO));
    ck_ok(induct_model_forward(m, tok, B, T, lg_a, NL, ls_a, NS, &m_a));
    ck_assert(memcmp(lg_h, lg_a, NL * sizeof(float)) == 0);
    ck_assert(memcmp(ls_h, ls_a, NS * sizeof(float)) == 0);
    ck_assert(m_h == m_a);
    ck_assert(memcmp(lg_h, lg_0, NL * sizeof(float)) != 0); /* the head mattered */
    /* the ablation runs before the caller's hooks: a reader sees the zeros */
    head_arg r = {1, 2, 4, -1};
    induct_hook rd = {"blocks.0.attn.hook_z", head_is_zero, &r};
    ck_ok(induct_model_run_with_hooks(m, tok, B, T, &rd, 1, NULL, 0, NULL, 0, NULL));
    ck_assert_int_eq(r.calls, 1);
    ck_ok(induct_model_clear_ablations(m));
    ck_ok(induct_model_run_with_hooks(m, tok, B, T, &rd, 1, NULL, 0, NULL, 0, NULL));
    ck_assert_int_eq(r.calls, 0);
    free(lg_h);
    free(lg_a);
    free(lg_0);
    induct_model_free(m);
}
END_TEST

static int stop(void *user, const char *name, float *x, const uint32_t *shape, uint32_t ndim) {
    (void)user, (void)name, (void)x, (void)shape, (void)ndim;
    return 7;
}

START_TEST(test_errors) {
    induct_model *m = make(&VARIANTS[0]); /* attention-only, standard positions */
    int32_t tok[B * T];
    tu_tokens(tok, B * T, 11, 1);
    uint32_t shape[4], nd;
    size_t numel;
    ck_ok(induct_model_hook_shape(m, "blocks.1.attn.hook_result", 3, 5, shape, &nd, &numel));
    ck_assert(nd == 4 && shape[0] == 3 && shape[1] == 5 && shape[2] == 2 && shape[3] == 8);
    ck_assert_uint_eq(numel, 3 * 5 * 2 * 8);
    ck_ok(induct_model_hook_shape(m, "blocks.0.attn.hook_attn_scores", 3, 5, shape, &nd, NULL));
    ck_assert(nd == 4 && shape[1] == 2 && shape[2] == 5 && shape[3] == 5);
    ck_ok(induct_model_hook_shape(m, "hook_pos_embed", 3, 5, shape, &nd, NULL));
    ck_assert(nd == 3 && shape[2] == 8);
    ck_assert_status(induct_model_hook_shape(m, "blocks.0.attn.hook_nothing", 1, 2, NULL, NULL,
                                             NULL),
                     INDUCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "blocks.0.attn.hook_nothing"));
    ck_assert_status(induct_model_hook_shape(m, "blocks.x.hook_resid_pre", 1, 2, NULL, NULL,
                                             NULL),
                     INDUCT_EINVAL);
    ck_assert_status(induct_model_hook_shape(m, "blocks.2.hook_resid_pre", 1, 2, NULL, NULL,
                                             NULL),
                     INDUCT_ERANGE);
    /* points this model does not have */
    ck_assert_status(induct_model_hook_shape(m, "blocks.0.mlp.hook_pre", 1, 2, NULL, NULL, NULL),
                     INDUCT_ERANGE);
    ck_assert_status(induct_model_hook_shape(m, "ln_final.hook_normalized", 1, 2, NULL, NULL,
                                             NULL),
                     INDUCT_ERANGE);
    ck_assert_status(induct_model_hook_shape(NULL, "hook_embed", 1, 2, NULL, NULL, NULL),
                     INDUCT_EINVAL);
    ck_assert_status(induct_model_hook_shape(m, NULL, 1, 2, NULL, NULL, NULL), INDUCT_EINVAL);
    /* names: past the end, short buffer */
    char name[8];
    size_t len;
    ck_assert_status(induct_model_hook_point(m, 22, name, sizeof name, &len), INDUCT_ERANGE);
    ck_assert_status(induct_model_hook_point(m, 2, name, sizeof name, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, strlen("blocks.0.hook_resid_pre") + 1);
    /* a hook that stops the pass; a hook without a function */
    induct_hook h = {"blocks.1.hook_resid_pre", stop, NULL};
    float lg[B * T * 11];
    lg[0] = 42.0f;
    ck_assert_status(induct_model_run_with_hooks(m, tok, B, T, &h, 1, lg, B * T * 11, NULL, 0,
                                                 NULL),
                     INDUCT_EINTERRUPTED);
    ck_assert(lg[0] == 42.0f);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "returned 7"));
    h.fn = NULL;
    ck_assert_status(induct_model_run_with_hooks(m, tok, B, T, &h, 1, NULL, 0, NULL, 0, NULL),
                     INDUCT_EINVAL);
    ck_assert_status(induct_model_run_with_hooks(m, tok, B, T, NULL, 1, NULL, 0, NULL, 0, NULL),
                     INDUCT_EINVAL);
    ck_assert_status(induct_model_run_with_hooks(m, tok, B, T, NULL, 0, lg, 5, NULL, 0, NULL),
                     INDUCT_EBUFSIZE);
    /* cache: a short buffer is refused before the pass, nothing written */
    const char *names[] = {"hook_embed", "blocks.0.attn.hook_pattern"};
    float e[B * T * 8], p[B * 2 * T * T - 1];
    float *bufs[] = {e, p};
    size_t caps[] = {B * T * 8, B * 2 * T * T - 1};
    e[0] = 42.0f;
    ck_assert_status(induct_model_run_with_cache(m, tok, B, T, names, bufs, caps, 2, NULL, 0,
                                                 NULL),
                     INDUCT_EBUFSIZE);
    ck_assert(e[0] == 42.0f);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "blocks.0.attn.hook_pattern"));
    ck_assert_status(induct_model_run_with_cache(m, tok, B, T, NULL, bufs, caps, 2, NULL, 0,
                                                 NULL),
                     INDUCT_EINVAL);
    /* the scratch of computed-on-demand points counts against the model's max_bytes */
    ck_ok(induct_model_forward(m, tok, B, T, NULL, 0, NULL, 0, NULL)); /* workspace held */
    ck_ok(induct_model_set_max_bytes(m, induct_model_memory_used(m) + 1024));
    induct_hook res = {"blocks.1.attn.hook_result", stop, NULL};
    ck_assert_status(induct_model_run_with_hooks(m, tok, B, T, &res, 1, NULL, 0, NULL, 0, NULL),
                     INDUCT_ELIMIT);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "hooks' scratch"));
    ck_ok(induct_model_set_max_bytes(m, 0));
    /* bad tokens are refused as by induct_model_forward */
    tok[3] = 11;
    ck_assert_status(induct_model_run_with_cache(m, tok, B, T, names, bufs, caps, 1, NULL, 0,
                                                 NULL),
                     INDUCT_ERANGE);
    induct_model_free(m);
}
END_TEST

/* ---- gradients through writing hooks ------------------------------------------------ */

enum { GB = 2, GT = 7 };

/* The head tu_clamp_previous_token clamps. */
static uint32_t HEAD1 = 1;

/* Overwrite position 2 of the residual stream with constants. */
static int set_resid(void *user, const char *name, float *x, const uint32_t *shape,
                     uint32_t ndim) {
    (void)user, (void)name, (void)ndim;
    for (size_t b = 0; b < shape[0]; b++)
        for (size_t i = 0; i < shape[2]; i++) x[(b * shape[1] + 2) * shape[2] + i] = 0.25f;
    return 0;
}

typedef struct hooked_input {
    const int32_t *tok;
    const induct_hook *hooks;
    size_t n;
    uint32_t b, t; /* [b][t] tokens */
} hooked_input;

static double hooked_loss(void *user, induct_model *m) {
    const hooked_input *in = user;
    double l;
    ck_ok(induct_model_run_with_hooks(m, in->tok, in->b, in->t, in->hooks, in->n, NULL, 0, NULL, 0,
                                      &l));
    return l;
}

/* Every parameter's gradient with active writing hooks against central finite
 * differences of the hooked loss; the clamped head's W_Q and W_K get exactly 0. */
START_TEST(test_gradcheck_through_writing_hooks) {
    const variant *v = &VARIANTS[_i];
    induct_model *m = make(v);
    int32_t tok[GB * GT];
    tu_tokens(tok, GB * GT, 11, 5);
    head_arg za = {0, 2, 4, 0};
    induct_hook hooks[3] = {{"blocks.1.attn.hook_pattern", tu_clamp_previous_token, &HEAD1},
                            {"blocks.0.attn.hook_z", zero_head, &za},
                            {v->d_mlp ? "blocks.0.hook_resid_mid" : "blocks.0.hook_resid_post",
                             set_resid, NULL}};
    hooked_input in = {tok, hooks, 3, GB, GT};
    double l0;
    ck_ok(induct_model_backward_with_hooks(m, tok, GB, GT, hooks, 3, &l0));
    ck_assert(l0 == hooked_loss(&in, m));
    const char *qk[] = {"blocks.1.attn.W_Q", "blocks.1.attn.W_K"};
    for (int i = 0; i < 2; i++) { /* head 1 of [2, d_model, d_head] */
        float g[2 * 8 * 4];
        size_t len;
        ck_ok(induct_model_get_tensor(m, qk[i], INDUCT_BUF_GRAD, g, 64, &len));
        for (size_t j = len / 2; j < len; j++)
            ck_assert_msg(g[j] == 0.0f, "%s: clamped head has gradient %g", qk[i], g[j]);
    }
    ck_assert_uint_eq(tu_gradcheck(m, hooked_loss, &in, v->name), induct_model_n_params(m));
    /* training while heads are ablated is refused */
    ck_ok(induct_model_ablate_head(m, 0, 0, INDUCT_ABLATE_ZERO));
    ck_assert_status(induct_model_backward_with_hooks(m, tok, GB, GT, hooks, 1, NULL),
                     INDUCT_ESTATE);
    induct_model_free(m);
}
END_TEST

/* A training step with a hook equals forward + backward with the hook + an optimizer
 * step; without hooks it is induct_train_step, bit for bit. */
START_TEST(test_train_step_with_hooks) {
    const variant *v = &VARIANTS[1];
    induct_model *a = make(v), *b = make(v);
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 11;
    rc.min_block = 2;
    induct_dataset *d;
    ck_ok(induct_dataset_new_rrt(&d, &rc));
    induct_optimizer *oa, *ob;
    ck_ok(induct_optimizer_new(&oa, a, INDUCT_OPTIM_ADAMW));
    ck_ok(induct_optimizer_new(&ob, b, INDUCT_OPTIM_ADAMW));
    double la, lb;
    ck_ok(induct_train_step(oa, d, 4, 8, &la));
    ck_ok(induct_train_step_with_hooks(ob, d, 4, 8, NULL, 0, &lb));
    ck_assert(la == lb);
    float pa[4096], pb[4096];
    size_t len;
    ck_ok(induct_model_get_tensor(a, "blocks.1.attn.W_Q", INDUCT_BUF_PARAM, pa, 4096, &len));
    ck_ok(induct_model_get_tensor(b, "blocks.1.attn.W_Q", INDUCT_BUF_PARAM, pb, 4096, &len));
    ck_assert(memcmp(pa, pb, len * sizeof *pa) == 0);
    /* with the pattern clamp: the clamped head's W_Q does not move (a fresh AdamW with
     * weight decay 0 and no gradient: the first moment stays 0) */
    induct_hook h = {"blocks.1.attn.hook_pattern", tu_clamp_previous_token, &HEAD1};
    induct_optimizer *oc;
    ck_ok(induct_optimizer_new(&oc, b, INDUCT_OPTIM_ADAMW));
    ck_ok(induct_optimizer_set(oc, INDUCT_OPT_WEIGHT_DECAY, 0.0));
    float before[4096];
    memcpy(before, pb, len * sizeof *pb);
    for (int s = 0; s < 3; s++) ck_ok(induct_train_step_with_hooks(oc, d, 4, 8, &h, 1, &lb));
    induct_optimizer_free(oc);
    ck_ok(induct_model_get_tensor(b, "blocks.1.attn.W_Q", INDUCT_BUF_PARAM, pb, 4096, &len));
    ck_assert(memcmp(pb + len / 2, before + len / 2, len / 2 * sizeof *pb) == 0);
    ck_assert(memcmp(pb, before, len / 2 * sizeof *pb) != 0); /* head 0 trains */
    induct_optimizer_free(oa);
    induct_optimizer_free(ob);
    induct_dataset_free(d);
    induct_model_free(a);
    induct_model_free(b);
}
END_TEST

/* ---- writing hooks with gradients at every point -------------------------------------- */

/* A writing hook on a fifth of the elements (flat index i % 5 == 2: spread over the
 * batch, positions, heads and features, above the diagonal of scores too): a constant
 * overwrite (scale 0: x = 0.3 + 0.05 (i % 7)) or a scaling (x *= scale). The library
 * treats every element a hook changed as a constant, whatever computed it, so the
 * finite-difference reference holds the hook's output fixed: after the first pass the
 * hook replays what it left there (`replay`). */
typedef struct write_arg {
    float scale;
    int replay, calls;
    float *rec; /* what the hook left in its first pass */
    size_t n;
} write_arg;

static int write_some(void *user, const char *name, float *x, const uint32_t *shape,
                      uint32_t ndim) {
    write_arg *a = user;
    (void)name;
    size_t n = 1;
    for (uint32_t k = 0; k < ndim; k++) n *= shape[k];
    if (!a->rec) {
        a->rec = floats(n);
        a->n = n;
    }
    ck_assert_uint_eq(a->n, n);
    for (size_t i = 2; i < n; i += 5) {
        if (a->replay) x[i] = a->rec[i];
        else x[i] = a->scale != 0.0f ? x[i] * a->scale : 0.3f + 0.05f * (float)(i % 7);
    }
    if (!a->replay) memcpy(a->rec, x, n * sizeof *x);
    a->calls++;
    return 0;
}

typedef struct grad_case {
    size_t variant;        /* into VARIANTS */
    const char *points[2]; /* the written points (NULL: none) */
    int folded;            /* batch B x T: an attention-only model folds layer 0 (else GB x GT) */
} grad_case;

static const grad_case GRAD_CASES[] = {
    /* MLP + LayerNorm, standard positions */
    {1, {"hook_embed", NULL}, 0},
    {1, {"hook_pos_embed", NULL}, 0},
    {1, {"blocks.0.ln1.hook_normalized", NULL}, 0},
    {1, {"blocks.1.ln1.hook_normalized", NULL}, 0},
    {1, {"blocks.0.ln2.hook_normalized", NULL}, 0},
    {1, {"blocks.1.ln2.hook_normalized", NULL}, 0},
    {1, {"ln_final.hook_normalized", NULL}, 0},
    {1, {"blocks.0.attn.hook_attn_scores", NULL}, 0},
    {1, {"blocks.1.attn.hook_attn_scores", NULL}, 0},
    {1, {"blocks.0.attn.hook_result", NULL}, 0},
    {1, {"blocks.1.attn.hook_result", NULL}, 0},
    {1, {"blocks.0.hook_attn_out", NULL}, 0},
    {1, {"blocks.1.hook_attn_out", NULL}, 0},
    {1, {"blocks.0.attn.hook_result", "blocks.0.hook_attn_out"}, 0},
    {1, {"blocks.0.hook_mlp_out", NULL}, 0},
    {1, {"blocks.1.hook_mlp_out", NULL}, 0},
    {1, {"blocks.0.mlp.hook_post", "blocks.0.hook_mlp_out"}, 0},
    {1, {"hook_embed", "blocks.0.ln1.hook_normalized"}, 0},
    /* some entries of each pattern row: the softmax's Jacobian is that of the scores'
     * pattern, not of the one the hook left */
    {1, {"blocks.0.attn.hook_pattern", NULL}, 0},
    {1, {"blocks.0.attn.hook_attn_scores", "blocks.0.attn.hook_pattern"}, 0},
    /* attention-only, standard positions (no LayerNorm: layer 0 unfolded by the writes) */
    {0, {"hook_embed", "hook_pos_embed"}, 0},
    {0, {"blocks.0.attn.hook_result", NULL}, 0},
    {0, {"blocks.1.hook_attn_out", NULL}, 0},
    {0, {"blocks.1.attn.hook_attn_scores", NULL}, 0},
    /* layer 0 folded into the embedding tables: its q, k, v gradients through writes */
    {0, {"blocks.0.attn.hook_attn_scores", NULL}, 1},
    {0, {"blocks.0.attn.hook_result", "blocks.0.hook_attn_out"}, 1},
    /* smeared keys, shortformer positions */
    {2, {"blocks.0.attn.hook_attn_scores", NULL}, 0},
    {2, {"blocks.1.attn.hook_attn_scores", NULL}, 0},
    {2, {"hook_embed", NULL}, 0},
    {2, {"blocks.0.hook_attn_out", "blocks.1.attn.hook_result"}, 0},
};
#define N_GRAD_CASES (sizeof GRAD_CASES / sizeof *GRAD_CASES)

/* Every parameter's gradient with writes at each point (case _i / 2; constants for even
 * _i, a scaling by 1.5 for odd) against central finite differences of the hooked loss
 * with the written values held fixed. The writes matter: loss and gradients differ from
 * the plain pass's. */
START_TEST(test_gradcheck_writes_at_every_point) {
    const grad_case *gc = &GRAD_CASES[_i / 2];
    const variant *v = &VARIANTS[gc->variant];
    float scale = _i % 2 ? 1.5f : 0.0f;
    induct_model *m = make(v);
    uint32_t b = gc->folded ? B : GB, t = gc->folded ? T : GT;
    int32_t tok[B * T];
    tu_tokens(tok, (size_t)b * t, 11, 5);
    double l_plain, l0;
    ck_ok(induct_model_backward(m, tok, b, t, &l_plain));
    float *g_plain = tu_grads(m);
    write_arg wa[2] = {{scale, 0, 0, NULL, 0}, {scale, 0, 0, NULL, 0}};
    induct_hook hooks[2];
    size_t n = 0;
    for (size_t k = 0; k < 2; k++)
        if (gc->points[k]) {
            hooks[n] = (induct_hook){gc->points[k], write_some, &wa[n]};
            n++;
        }
    char what[160];
    snprintf(what, sizeof what, "%s%s, %s%s%s (%s)", v->name, gc->folded ? " folded" : "",
             gc->points[0], n > 1 ? " + " : "", n > 1 ? gc->points[1] : "",
             scale != 0.0f ? "scaled" : "constants");
    ck_ok(induct_model_backward_with_hooks(m, tok, b, t, hooks, n, &l0));
    float *g = tu_grads(m);
    size_t np = induct_model_n_params(m);
    ck_assert_msg(l0 != l_plain, "%s: the write does not change the loss", what);
    ck_assert_msg(memcmp(g, g_plain, np * sizeof *g) != 0, "%s: same gradients", what);
    for (size_t k = 0; k < n; k++) {
        ck_assert_int_eq(wa[k].calls, 1);
        wa[k].replay = 1;
    }
    hooked_input in = {tok, hooks, n, b, t};
    ck_assert_msg(l0 == hooked_loss(&in, m), "%s: the replayed pass has another loss", what);
    ck_assert_uint_eq(tu_gradcheck(m, hooked_loss, &in, what), np);
    for (size_t k = 0; k < n; k++) free(wa[k].rec);
    free(g);
    free(g_plain);
    induct_model_free(m);
}
END_TEST

/* Copy the activation out and write the copy back. */
static int write_back(void *user, const char *name, float *x, const uint32_t *shape,
                      uint32_t ndim) {
    (void)name;
    size_t n = 1;
    for (uint32_t k = 0; k < ndim; k++) n *= shape[k];
    float *c = floats(n);
    memcpy(c, x, n * sizeof *x);
    memcpy(x, c, n * sizeof *x);
    free(c);
    (*(int *)user)++;
    return 0;
}

/* Constants above the diagonal of every head's scores or pattern (ignored). */
static int write_above_diagonal(void *user, const char *name, float *s, const uint32_t *shape,
                                uint32_t ndim) {
    (void)name, (void)ndim;
    size_t T = shape[2];
    for (size_t bh = 0; bh < (size_t)shape[0] * shape[1]; bh++)
        for (size_t q = 0; q < T; q++)
            for (size_t k = q + 1; k < T; k++) s[(bh * T + q) * T + k] = 0.75f;
    (*(int *)user)++;
    return 0;
}

/* A hook that writes back what it read changes nothing: the loss and every gradient
 * are the unhooked pass's bits, at every point of the model, also at B x T = 48 where a
 * model without LayerNorm folds layer 0 into the embedding tables (a hook at what layer
 * 0 reads keeps the folding when it changed nothing); nor does writing scores or a
 * pattern above the diagonal (no query sees later keys). */
START_TEST(test_written_back_gradients_are_bit_identical) {
    const variant *v = &VARIANTS[_i];
    induct_model *m = make(v);
    static const uint32_t shapes[2][2] = {{GB, GT}, {B, T}};
    for (size_t s = 0; s < 2; s++) {
        uint32_t b = shapes[s][0], t = shapes[s][1];
        int32_t tok[B * T];
        tu_tokens(tok, (size_t)b * t, 11, 13);
        double l_plain, l;
        ck_ok(induct_model_backward(m, tok, b, t, &l_plain));
        float *g_plain = tu_grads(m);
        size_t np = induct_model_n_params(m), checked = 0;
        char name[64];
        for (size_t k = 0;; k++) {
            int rc = induct_model_hook_point(m, k, name, sizeof name, NULL);
            if (rc == INDUCT_ERANGE) break;
            ck_ok(rc);
            int calls = 0;
            induct_hook h = {name, write_back, &calls};
            ck_ok(induct_model_backward_with_hooks(m, tok, b, t, &h, 1, &l));
            ck_assert_int_eq(calls, 1);
            float *g = tu_grads(m);
            ck_assert_msg(l == l_plain && memcmp(g, g_plain, np * sizeof *g) == 0,
                          "%s, %u x %u: writing back %s changes the gradients", v->name, b, t,
                          name);
            free(g);
            checked++;
        }
        ck_assert_uint_eq(checked, v->n_points);
        const char *above[] = {"blocks.1.attn.hook_attn_scores", "blocks.0.attn.hook_pattern"};
        for (size_t k = 0; k < 2; k++) {
            int calls = 0;
            induct_hook h = {above[k], write_above_diagonal, &calls};
            ck_ok(induct_model_backward_with_hooks(m, tok, b, t, &h, 1, &l));
            ck_assert_int_eq(calls, 1);
            float *g = tu_grads(m);
            ck_assert_msg(l == l_plain && memcmp(g, g_plain, np * sizeof *g) == 0,
                          "%s: %s written above the diagonal changes the gradients", v->name,
                          above[k]);
            free(g);
            double lf;
            ck_ok(induct_model_run_with_hooks(m, tok, b, t, &h, 1, NULL, 0, NULL, 0, &lf));
            ck_assert_msg(lf == l_plain, "%s: %s written above the diagonal changes the loss",
                          v->name, above[k]);
        }
        free(g_plain);
    }
    induct_model_free(m);
}
END_TEST

/* The same in a forward pass without gradients: a callback that writes back what it
 * read (or only reads) leaves the logits and the loss bit-identical to the plain pass at
 * every point, one at a time and all at once, also at hook_result, hook_attn_out and
 * hook_mlp_out (the residual stream keeps the fused product) and, at B x T = 48 without
 * LayerNorm, at the points layer 0 reads (layer 0 stays folded). */
START_TEST(test_written_back_forward_is_bit_identical) {
    const variant *v = &VARIANTS[_i];
    induct_model *m = make(v);
    static const uint32_t shapes[2][2] = {{GB, GT}, {B, T}};
    for (size_t s = 0; s < 2; s++) {
        uint32_t b = shapes[s][0], t = shapes[s][1];
        size_t n_lg = (size_t)b * t * 11;
        int32_t tok[B * T];
        tu_tokens(tok, (size_t)b * t, 11, 19);
        float *plain = floats(n_lg), *lg = floats(n_lg);
        double l_plain, l;
        ck_ok(induct_model_forward(m, tok, b, t, plain, n_lg, NULL, 0, &l_plain));
        char names[64][64];
        induct_hook all[64];
        int calls = 0;
        size_t n = 0;
        for (;; n++) {
            ck_assert_uint_lt(n, 64);
            int rc = induct_model_hook_point(m, n, names[n], sizeof names[n], NULL);
            if (rc == INDUCT_ERANGE) break;
            ck_ok(rc);
            all[n] = (induct_hook){names[n], write_back, &calls};
            ck_ok(induct_model_run_with_hooks(m, tok, b, t, &all[n], 1, lg, n_lg, NULL, 0, &l));
            ck_assert_msg(l == l_plain && memcmp(lg, plain, n_lg * sizeof *lg) == 0,
                          "%s, %u x %u: a hook writing back %s changes the logits", v->name, b,
                          t, names[n]);
        }
        ck_assert_uint_eq(n, v->n_points);
        calls = 0;
        ck_ok(induct_model_run_with_hooks(m, tok, b, t, all, n, lg, n_lg, NULL, 0, &l));
        ck_assert_int_eq(calls, (int)n);
        ck_assert_msg(l == l_plain && memcmp(lg, plain, n_lg * sizeof *lg) == 0,
                      "%s, %u x %u: hooks writing back every point change the logits", v->name,
                      b, t);
        free(plain);
        free(lg);
    }
    induct_model_free(m);
}
END_TEST

/* A read-only copy of one point through a callback (the pass then treats the point as
 * written: the cache's fast paths are off there, the value is the plain pass's). */
static int copy_out(void *user, const char *name, float *x, const uint32_t *shape,
                    uint32_t ndim) {
    size_t n = 1;
    (void)name;
    for (uint32_t i = 0; i < ndim; i++) n *= shape[i];
    memcpy(user, x, n * sizeof *x);
    return 0;
}

/* A cache computes its points in the caller's buffers and runs the fused attention
 * kernel around read-only hooks on the scores and the pattern: every point it returns is
 * bit for bit what a callback at that point alone sees (the plain pass's value, computed
 * in the workspace, attention in parts), and the logits are the plain pass's. Every
 * architecture variant (1 thread, T 64, a shape past OpenBLAS's small-matrix kernels),
 * then attention-only and TU_EVERYTHING with 2 threads, with T > 256 (the AVX-512
 * attention tiles where the CPU has them), and with a pattern-preserving zero ablation in
 * force (its hooks write hook_z of layer 0 and hook_pattern of layer 1: those points
 * must come from the workspace, after the writes; the same holds against the ablated
 * pass). Buffers 4 and 12 bytes off malloc's alignment. */
typedef struct in_place_case {
    int variant;
    uint32_t threads, long_seq, ablate;
} in_place_case;
static const in_place_case IN_PLACE_EXTRA[] = {
    {0, 2, 0, 0}, {TU_EVERYTHING, 2, 0, 0}, {0, 1, 1, 0},
    {TU_EVERYTHING, 2, 1, 0}, {0, 1, 0, 1}, {TU_EVERYTHING, 2, 0, 1},
};
#define N_IN_PLACE_EXTRA (sizeof IN_PLACE_EXTRA / sizeof *IN_PLACE_EXTRA)

START_TEST(test_cache_in_place_is_the_plain_pass) {
    in_place_case k = {_i, 1, 0, 0};
    if (_i >= TU_N_VARIANTS) k = IN_PLACE_EXTRA[_i - TU_N_VARIANTS];
    const tu_variant *v = &TU_VARIANTS[k.variant];
    uint32_t threads = k.threads, long_seq = k.long_seq, ablate = k.ablate;
    uint32_t Bc = long_seq ? 2 : 24, Tc = long_seq ? 264 : 64, V = 37;
    induct_model_config c;
    tu_tiny_config(&c);
    tu_variant_apply(&c, v);
    c.d_model = 32;
    c.n_heads = 4;
    c.n_ctx = Tc;
    c.d_vocab = V;
    c.n_threads = threads;
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, 0.5, 3);
    if (ablate) {
        ck_ok(induct_model_set_preserve_patterns(m, 1));
        ck_ok(induct_model_ablate_head(m, 0, 1, INDUCT_ABLATE_ZERO));
    }
    int32_t *tok = malloc((size_t)Bc * Tc * sizeof *tok);
    ck_assert_ptr_nonnull(tok);
    tu_tokens(tok, (size_t)Bc * Tc, V, 5);
    char names[128][64];
    const char *np[128];
    float *raw[128], *bufs[128];
    size_t caps[128], n = 0, len;
    while (induct_model_hook_point(m, n, names[n], sizeof names[n], &len) == INDUCT_OK) {
        ck_assert_uint_lt(n + 1, 128);
        np[n] = names[n];
        ck_ok(induct_model_hook_shape(m, names[n], Bc, Tc, NULL, NULL, &caps[n]));
        raw[n] = floats(caps[n] + 3);
        bufs[n] = raw[n] + 1 + 2 * (n % 2); /* 4 or 12 bytes past malloc's alignment */
        n++;
    }
    size_t nl = (size_t)Bc * Tc * V;
    float *lg = floats(nl), *ref = floats(nl);
    double mean, ref_mean;
    ck_ok(induct_model_run_with_cache(m, tok, Bc, Tc, np, bufs, caps, n, lg, nl, &mean));
    ck_ok(induct_model_forward(m, tok, Bc, Tc, ref, nl, NULL, 0, &ref_mean));
    ck_assert_msg(memcmp(lg, ref, nl * sizeof *lg) == 0 && mean == ref_mean,
                  "%s, %u threads, T %u, ablation %u: the cache's logits are not the plain "
                  "pass's",
                  v->name, threads, Tc, ablate);
    for (size_t i = 0; i < n; i++) {
        float *one = floats(caps[i]);
        induct_hook h = {np[i], copy_out, one};
        ck_ok(induct_model_run_with_hooks(m, tok, Bc, Tc, &h, 1, NULL, 0, NULL, 0, NULL));
        size_t bad = 0;
        for (size_t j = 0; j < caps[i]; j++) bad += memcmp(&one[j], &bufs[i][j], sizeof *one) != 0;
        ck_assert_msg(bad == 0, "%s, %u threads, T %u, ablation %u: %zu of %zu values of '%s' "
                      "differ",
                      v->name, threads, Tc, ablate, bad, caps[i], np[i]);
        free(one);
    }
    /* the patterns alone (no scores: the fused kernel without the scores' copy), into
     * buffers full of NaN: every entry written, the same bits */
    for (size_t i = 0; i < n; i++) {
        if (!strstr(np[i], "hook_pattern")) continue;
        float *pat = floats(caps[i]);
        for (size_t j = 0; j < caps[i]; j++) pat[j] = NAN;
        ck_ok(induct_model_run_with_cache(m, tok, Bc, Tc, &np[i], &pat, &caps[i], 1, NULL, 0,
                                          NULL));
        ck_assert_msg(memcmp(pat, bufs[i], caps[i] * sizeof *pat) == 0,
                      "%s, %u threads, T %u, ablation %u: '%s' cached alone differs", v->name,
                      threads, Tc, ablate, np[i]);
        free(pat);
    }
    for (size_t i = 0; i < n; i++) free(raw[i]);
    free(lg);
    free(ref);
    free(tok);
    induct_model_free(m);
}
END_TEST

/* Cache buffers that overlap (here hook_q and hook_k of layer 1 in one buffer, and the
 * pattern of layer 0 in the second half of another point's): the pass cannot compute in
 * them, every point is copied as the pass reaches it; the logits stay the plain pass's
 * and the shared buffer holds the later point. */
START_TEST(test_cache_overlapping_buffers) {
    induct_model *m = make(&VARIANTS[_i]);
    int32_t tok[B * T];
    tu_tokens(tok, B * T, 11, 4);
    const char *names[] = {"blocks.1.attn.hook_q", "blocks.1.attn.hook_k",
                           "blocks.0.attn.hook_attn_scores", "blocks.0.attn.hook_pattern"};
    size_t cq, cs;
    ck_ok(induct_model_hook_shape(m, names[0], B, T, NULL, NULL, &cq));
    ck_ok(induct_model_hook_shape(m, names[2], B, T, NULL, NULL, &cs));
    float *qk = floats(cq), *sp = floats(cs + cs / 2), *k = floats(cq), *pat = floats(cs);
    float *bufs[] = {qk, qk, sp, sp + cs / 2};
    size_t caps[] = {cq, cq, cs, cs};
    float lg[B * T * 11], ref[B * T * 11];
    ck_ok(induct_model_run_with_cache(m, tok, B, T, names, bufs, caps, 4, lg, B * T * 11, NULL));
    ck_ok(induct_model_forward(m, tok, B, T, ref, B * T * 11, NULL, 0, NULL));
    ck_assert_msg(memcmp(lg, ref, sizeof lg) == 0,
                  "%s: overlapping cache buffers change the logits", VARIANTS[_i].name);
    float *one[] = {k, pat};
    size_t one_caps[] = {cq, cs};
    ck_ok(induct_model_run_with_cache(m, tok, B, T, &names[1], &one[0], &one_caps[0], 1, NULL, 0,
                                      NULL));
    ck_ok(induct_model_run_with_cache(m, tok, B, T, &names[3], &one[1], &one_caps[1], 1, NULL, 0,
                                      NULL));
    ck_assert(memcmp(qk, k, cq * sizeof *k) == 0);
    ck_assert(memcmp(sp + cs / 2, pat, cs * sizeof *pat) == 0);
    free(qk);
    free(sp);
    free(k);
    free(pat);
    induct_model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("hooks");
    TCase *tc = tcase_create("hooks");
    tcase_add_loop_test(tc, test_cache_is_the_plain_pass, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_cache_overlapping_buffers, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_cache_in_place_is_the_plain_pass, 0,
                        TU_N_VARIANTS + (int)N_IN_PLACE_EXTRA);
    tcase_add_loop_test(tc, test_own_pattern_written_back_is_bit_identical, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_zeroed_z_is_zero_ablation, 0, N_VARIANTS);
    tcase_add_test(tc, test_errors);
    tcase_add_loop_test(tc, test_gradcheck_through_writing_hooks, 0, N_VARIANTS);
    tcase_add_test(tc, test_train_step_with_hooks);
    tcase_add_loop_test(tc, test_gradcheck_writes_at_every_point, 0, 2 * N_GRAD_CASES);
    tcase_add_loop_test(tc, test_written_back_gradients_are_bit_identical, 0, N_VARIANTS);
    tcase_add_loop_test(tc, test_written_back_forward_is_bit_identical, 0, N_VARIANTS);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
