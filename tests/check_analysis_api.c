/* Analysis suite, API behaviour: evaluation set and loss vectors, probe
 * construction, the phase window and head classification on known inputs,
 * analyses that change nothing (weights, each other's results, bit for bit),
 * ablation state rules and bad input. Links only the shared library. */
#include <math.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <threads.h>

#include "testutil.h"

/* Frozen layouts of the analysis config structs (LP64): fields are only ever appended. */
#include <stddef.h>
#if UINTPTR_MAX == 0xffffffffffffffffu
_Static_assert(sizeof(induct_eval_config) == 64, "induct_eval_config layout");
_Static_assert(offsetof(induct_eval_config, n_seq) == 8 &&
                   offsetof(induct_eval_config, late) == 24 &&
                   offsetof(induct_eval_config, split) == 28 &&
                   offsetof(induct_eval_config, batch_index) == 32 &&
                   offsetof(induct_eval_config, pos_seed) == 40 &&
                   offsetof(induct_eval_config, positions) == 48 &&
                   offsetof(induct_eval_config, n_positions) == 56,
               "induct_eval_config offsets");
_Static_assert(sizeof(induct_probe_config) == 48, "induct_probe_config layout");
_Static_assert(offsetof(induct_probe_config, bos) == 20 &&
                   offsetof(induct_probe_config, copying_bos) == 32 &&
                   offsetof(induct_probe_config, seed) == 40,
               "induct_probe_config offsets");
_Static_assert(sizeof(induct_phase_config) == 40 && offsetof(induct_phase_config, smooth) == 32,
               "induct_phase_config layout");
_Static_assert(sizeof(induct_classify_config) == 40 &&
                   offsetof(induct_classify_config, copying) == 32,
               "induct_classify_config layout");
#endif

static induct_model *rand_model(uint32_t L, uint32_t d_mlp, uint32_t ln, uint32_t pos,
                                uint32_t smeared, uint64_t seed) {
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = L;
    c.d_model = 12;
    c.n_heads = 2;
    c.d_mlp = d_mlp;
    c.layer_norm = ln;
    c.positional = pos;
    c.smeared_keys = smeared;
    c.d_vocab = 16;
    c.n_ctx = 32;
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, 0.5, seed);
    return m;
}

static induct_dataset *rrt(uint32_t V) { return tu_rrt(V, 3, 17); }

static void small_eval(induct_eval_config *ec) {
    induct_eval_config_init(ec, sizeof *ec);
    ec->n_seq = 6;
    ec->chunk = 4;
    ec->seq_len = 24;
    ec->early = 4;
    ec->late = 20;
    ec->pos_seed = 3;
}

static float *snapshot(induct_model *m) {
    size_t total = induct_model_n_params(m), off = 0, nt = induct_model_n_tensors(m);
    float *p = malloc(total * sizeof *p);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        size_t n, len;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &n));
        ck_ok(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, p + off, n, &len));
        off += n;
    }
    return p;
}

/* ---- evaluation set and loss vectors ------------------------------------------------- */

START_TEST(test_loss_vectors) {
    induct_model *m = rand_model(2, 0, 1, INDUCT_POS_STANDARD, 0, 4);
    induct_dataset *d = rrt(16);
    induct_eval_config ec;
    small_eval(&ec);
    enum { N = 6, T = 24 };
    /* the evaluation set is batch 0 of the eval split with batch size n_seq */
    int32_t tok[N * T];
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, N, T, tok, N * T, NULL, 0));
    float losses[N * (T - 1)];
    ck_ok(induct_model_forward(m, tok, N, T, NULL, 0, losses, N * (T - 1), NULL));
    uint32_t pos[N];
    size_t len;
    ck_assert_status(induct_analysis_loss_positions(m, &ec, NULL, 0, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, N);
    ck_ok(induct_analysis_loss_positions(m, &ec, pos, N, &len));
    int distinct = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_uint_lt(pos[i], T - 1);
        if (pos[i] != pos[0]) distinct = 1;
    }
    ck_assert(distinct);
    float vec[N], avg[T - 1], curve[T - 1];
    ck_ok(induct_analysis_loss_vectors(m, d, &ec, vec, N, avg, T - 1));
    ck_ok(induct_analysis_loss_by_position(m, d, &ec, curve, T - 1, &len));
    for (int i = 0; i < N; i++)
        ck_assert_double_eq_tol(vec[i], losses[i * (T - 1) + pos[i]], 1e-5);
    double mean_e = 0, mean_t = 0;
    for (int p = 0; p < T - 1; p++) {
        double s = 0;
        for (int i = 0; i < N; i++)
            s += losses[i * (T - 1) + p];
        ck_assert_double_eq_tol(avg[p], s / N, 1e-5);
        ck_assert_float_eq(avg[p], curve[p]);
    }
    for (int i = 0; i < N; i++) {
        mean_e += losses[i * (T - 1) + 3];
        mean_t += losses[i * (T - 1) + 19];
    }
    double icl;
    ck_ok(induct_analysis_icl_score(m, d, &ec, &icl));
    ck_assert_double_eq_tol(icl, mean_t / N - mean_e / N, 1e-5);
    /* chunking changes nothing */
    induct_eval_config e1 = ec;
    e1.chunk = 1;
    float vec1[N];
    double icl1;
    ck_ok(induct_analysis_loss_vectors(m, d, &e1, vec1, N, NULL, 0));
    ck_ok(induct_analysis_icl_score(m, d, &e1, &icl1));
    ck_assert_double_eq_tol(icl1, icl, 1e-6);
    for (int i = 0; i < N; i++)
        ck_assert_double_eq_tol(vec1[i], vec[i], 1e-6);
    /* another pos_seed gives other positions */
    e1.pos_seed = 4;
    uint32_t pos2[N];
    ck_ok(induct_analysis_loss_positions(m, &e1, pos2, N, &len));
    ck_assert(memcmp(pos, pos2, sizeof pos) != 0);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* ---- loss at chosen positions (induct_eval_config.positions) ------------------------ */

/* How far two evaluations of the same per-position mean loss may differ when only the
 * rounding of the unembedding product differs (a BLAS may round a logits row
 * differently depending on where it sits in the product), from float rounding alone:
 * a logit b_u + sum_k x_k W_ku in float is off by at most g * S_u with g = (D+1) u /
 * (1 - (D+1) u), u = 2^-24, S_u = |b_u| + sum_k |x_k| |W_ku|, and |x_k| <= |w_k|
 * sqrt(D - 1) + |b_k| after the final LayerNorm (a normalised entry is at most
 * sqrt(D - 1)). Two such evaluations differ by 2 g S_max per logit, so the loss (the
 * log-sum-exp minus the target logit) by at most 4 g S_max; plus a few float roundings
 * of the loss itself (the float exp terms, the loss and the mean stored as float). */
static double logit_rounding_tol(induct_model *m, double loss) {
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    ck_ok(induct_model_get_config(m, &c));
    size_t D = c.d_model, V = c.d_vocab, len;
    ck_assert_uint_eq(c.layer_norm, 1);
    float *w = malloc(D * sizeof *w), *b = malloc(D * sizeof *b);
    float *WU = malloc(D * V * sizeof *WU), *bU = malloc(V * sizeof *bU);
    ck_ok(induct_model_get_tensor(m, "ln_final.w", INDUCT_BUF_PARAM, w, D, &len));
    ck_ok(induct_model_get_tensor(m, "ln_final.b", INDUCT_BUF_PARAM, b, D, &len));
    ck_ok(induct_model_get_tensor(m, "unembed.W_U", INDUCT_BUF_PARAM, WU, D * V, &len));
    ck_ok(induct_model_get_tensor(m, "unembed.b_U", INDUCT_BUF_PARAM, bU, V, &len));
    double smax = 0;
    for (size_t u = 0; u < V; u++) {
        double su = fabs(bU[u]);
        for (size_t k = 0; k < D; k++)
            su += (fabs(w[k]) * sqrt((double)D - 1) + fabs(b[k])) * fabs(WU[k * V + u]);
        if (su > smax) smax = su;
    }
    free(w), free(b), free(WU), free(bU);
    double u = ldexp(1.0, -24), g = (D + 1) * u / (1 - (D + 1) * u);
    return 4 * g * smax + 8 * u * (fabs(loss) > 1 ? fabs(loss) : 1);
}

/* The loss by position at chosen indices equals the full pass's there (the same
 * cross-entropy kernel; the logits within float rounding, bit-identical when the BLAS
 * rounds the rows alike), NaN elsewhere; the per-sequence vector is still complete;
 * the ICL score, which computes only its two indices, equals the one from the full
 * forward pass's losses; with a head ablated the same holds. */
START_TEST(test_positions) {
    induct_model *m = rand_model(2, 0, 1, INDUCT_POS_STANDARD, 0, 4);
    induct_dataset *d = rrt(16);
    enum { N = 6, T = 24, K = 5 };
    const uint32_t sel[K] = {0, 3, 4, 19, T - 2};
    int32_t tok[N * T];
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, N, T, tok, N * T, NULL, 0));
    for (int ablated = 0; ablated < 2; ablated++) {
        if (ablated) ck_ok(induct_model_ablate_head(m, 0, 1, INDUCT_ABLATE_ZERO));
        induct_eval_config ec;
        small_eval(&ec);
        float full[T - 1], vfull[N], part[T - 1], avg[T - 1], vpart[N];
        size_t len;
        ck_ok(induct_analysis_loss_vectors(m, d, &ec, vfull, N, full, T - 1));
        ec.positions = sel;
        ec.n_positions = K;
        ck_ok(induct_analysis_loss_by_position(m, d, &ec, part, T - 1, &len));
        ck_assert_uint_eq(len, T - 1);
        ck_ok(induct_analysis_loss_vectors(m, d, &ec, vpart, N, avg, T - 1));
        int j = 0, same_bits = 1;
        for (int p = 0; p < T - 1; p++) {
            if (j < K && sel[j] == (uint32_t)p) {
                ck_assert(isfinite(part[p]));
                ck_assert_double_eq_tol(part[p], full[p], logit_rounding_tol(m, full[p]));
                same_bits &= !memcmp(&part[p], &full[p], sizeof(float));
                j++;
            } else {
                ck_assert_msg(isnan(part[p]), "position %d: %g, expected NaN", p, part[p]);
            }
            ck_assert_int_eq(isnan(avg[p]), isnan(part[p]));
            if (!isnan(avg[p])) ck_assert_float_eq(avg[p], part[p]); /* one code path */
        }
        /* each sequence's own random position is computed too, wherever it is */
        for (int i = 0; i < N; i++)
            ck_assert_double_eq_tol(vpart[i], vfull[i], logit_rounding_tol(m, vfull[i]));
        /* the ICL score against the full forward pass's losses, summed in the same order */
        float losses[N * (T - 1)];
        ck_ok(induct_model_forward(m, tok, N, T, NULL, 0, losses, N * (T - 1), NULL));
        double se = 0, st = 0, icl;
        for (int i = 0; i < N; i++) {
            se += losses[i * (T - 1) + ec.early - 1];
            st += losses[i * (T - 1) + ec.late - 1];
        }
        ec.positions = NULL;
        ec.n_positions = 0;
        ck_ok(induct_analysis_icl_score(m, d, &ec, &icl));
        ck_assert_double_eq_tol(icl, st / N - se / N,
                                2 * logit_rounding_tol(m, fabs(st / N) + fabs(se / N)));
        if (same_bits) /* the same logits bits: the same kernel gives the same losses */
            ck_assert(icl == st / N - se / N);
        if (ablated) { /* the ablation is in force in both paths */
            float clean[T - 1];
            ck_ok(induct_model_clear_ablations(m));
            ck_ok(induct_analysis_loss_by_position(m, d, &ec, clean, T - 1, &len));
            ck_assert(fabs(clean[19] - full[19]) > 1e-4);
        }
    }
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* Bad positions are refused with a clear error; a caller compiled before the field
 * existed (the 48-byte struct) still gets every position. */
START_TEST(test_positions_bad_input) {
    induct_model *m = rand_model(2, 0, 1, INDUCT_POS_STANDARD, 0, 4);
    induct_dataset *d = rrt(16);
    induct_eval_config ec;
    small_eval(&ec);
    float out[23];
    size_t len;
    const uint32_t dup[2] = {3, 3}, down[2] = {5, 4}, last[1] = {23}, ok1[1] = {22};
    ec.n_positions = 2;
    ck_assert_status(induct_analysis_loss_by_position(m, d, &ec, out, 23, &len), INDUCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "positions is NULL"));
    ec.positions = dup;
    ec.n_positions = 0;
    ck_assert_status(induct_analysis_loss_by_position(m, d, &ec, out, 23, &len), INDUCT_EINVAL);
    ec.n_positions = 2;
    ck_assert_status(induct_analysis_loss_by_position(m, d, &ec, out, 23, &len), INDUCT_EINVAL);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "increase strictly"));
    ec.positions = down;
    ck_assert_status(induct_analysis_loss_vectors(m, d, &ec, NULL, 0, out, 23), INDUCT_EINVAL);
    ec.positions = last; /* index T - 1 has no next token */
    ec.n_positions = 1;
    ck_assert_status(induct_analysis_loss_by_position(m, d, &ec, out, 23, &len), INDUCT_ERANGE);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "positions[0] = 23"));
    ck_assert_status(induct_analysis_loss_positions(m, &ec, NULL, 0, &len), INDUCT_ERANGE);
    ec.positions = ok1;
    ec.reserved0 = 1;
    ck_assert_status(induct_analysis_loss_by_position(m, d, &ec, out, 23, &len), INDUCT_EINVAL);
    ec.reserved0 = 0;
    ck_ok(induct_analysis_loss_by_position(m, d, &ec, out, 23, &len));
    ck_assert(isfinite(out[22]) && isnan(out[21]));
    /* the first layout: 48 bytes, no positions */
    float full[23], old[23];
    induct_eval_config e0;
    small_eval(&e0);
    ck_ok(induct_analysis_loss_by_position(m, d, &e0, full, 23, &len));
    unsigned char raw[48];
    memcpy(raw, &e0, sizeof raw);
    size_t sz = 48;
    memcpy(raw, &sz, sizeof sz);
    ck_ok(induct_analysis_loss_by_position(m, d, (const induct_eval_config *)(void *)raw, old, 23,
                                           &len));
    ck_assert(memcmp(full, old, sizeof full) == 0);
    sz = 40; /* below the first layout */
    memcpy(raw, &sz, sizeof sz);
    ck_assert_status(induct_analysis_loss_by_position(m, d, (const induct_eval_config *)(void *)raw,
                                                      old, 23, &len),
                     INDUCT_EABI);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

START_TEST(test_probe_tokens) {
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.d_vocab = 40;
    c.n_ctx = 101;
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    size_t len;
    ck_assert_status(induct_analysis_probe_tokens(m, NULL, 0, NULL, 0, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 10 * 101); /* the paper's default: BOS + 25 x 4, 10 sequences */
    int32_t *t = malloc(len * sizeof *t), cp[10 * 25];
    ck_ok(induct_analysis_probe_tokens(m, NULL, 0, t, len, &len));
    ck_ok(induct_analysis_probe_tokens(m, NULL, 1, cp, 250, &len));
    ck_assert_uint_eq(len, 250); /* copying probe: no BOS, one block */
    for (int b = 0; b < 10; b++) {
        const int32_t *x = t + b * 101;
        ck_assert_int_eq(x[0], 0);
        for (int i = 0; i < 25; i++) {
            ck_assert(x[1 + i] >= 1 && x[1 + i] < 40);
            for (int j = 0; j < i; j++)
                ck_assert_int_ne(x[1 + i], x[1 + j]);
            for (int r = 1; r < 4; r++)
                ck_assert_int_eq(x[1 + r * 25 + i], x[1 + i]);
            ck_assert_int_eq(cp[b * 25 + i], x[1 + i]);
        }
        if (b) ck_assert(memcmp(x + 1, t + 1, 25 * 4) != 0);
    }
    free(t);
    induct_model_free(m);
}
END_TEST

/* The induction score is the prefix-matching score read on the data: for each eval row
 * with block length L (the dataset's meta), the attention from every query t in
 * [L+1, 2L) to t - L + 1, pooled over the rows. Recomputed here from the attention
 * patterns of induct_model_attention(), one row at a time. */
START_TEST(test_induction_score_definition) {
    induct_model *m = rand_model(2, 0, 1, INDUCT_POS_STANDARD, 0, 5);
    induct_dataset *d = rrt(16);
    enum { B = 7, T = 24, H = 2, NL = 2 };
    int32_t tok[B * T], meta[B];
    ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, B, T, tok, B * T, meta, B));
    static float att[NL * H * T * T];
    double s[NL * H] = {0};
    size_t cnt = 0, len;
    for (int b = 0; b < B; b++) {
        ck_ok(induct_model_attention(m, tok + b * T, T, att, NL * H * T * T, &len));
        int L = meta[b];
        ck_assert(L >= 3 && 2 * L <= T);
        for (int k = 0; k < NL * H; k++)
            for (int t = L + 1; t < 2 * L; t++)
                s[k] += att[((size_t)k * T + t) * T + (t - L + 1)];
        cnt += (size_t)(L - 1);
    }
    float out[NL * H];
    ck_ok(induct_analysis_induction_score(m, d, B, T, out, NL * H, &len));
    ck_assert_uint_eq(len, NL * H);
    for (int k = 0; k < NL * H; k++) {
        ck_assert(s[k] > 0.0);
        ck_assert_double_eq_tol(out[k], s[k] / (double)cnt, 1e-6);
    }
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* ---- phase window and classification on known inputs ---------------------------------- */

START_TEST(test_phase_window) {
    enum { N = 101 };
    double steps[N], icl[N];
    for (int i = 0; i < N; i++) {
        steps[i] = 10.0 * i;
        double f = i < 20 ? 0.0 : i > 70 ? 1.0 : (i - 20) / 50.0;
        icl[i] = -0.05 - 0.4 * f; /* falls by 0.4 nats between steps 200 and 700 */
    }
    double a, b;
    uint32_t found;
    ck_ok(induct_analysis_phase_window(steps, icl, N, NULL, &a, &b, &found));
    ck_assert_uint_eq(found, 1);
    ck_assert_double_eq_tol(a, 250.0, 1e-9); /* 10 % of the way: step 200 + 0.1 * 500 */
    ck_assert_double_eq_tol(b, 650.0, 1e-9); /* 90 % */
    induct_phase_config pc;
    induct_phase_config_init(&pc, sizeof pc);
    pc.smooth = 3; /* the ramp's interior is linear: smoothing keeps both crossings */
    ck_ok(induct_analysis_phase_window(steps, icl, N, &pc, &a, &b, &found));
    ck_assert_double_eq_tol(a, 250.0, 1e-9);
    ck_assert_double_eq_tol(b, 650.0, 1e-9);
    pc.smooth = 1;
    pc.lo_frac = 0.5;
    pc.hi_frac = 1.0;
    ck_ok(induct_analysis_phase_window(steps, icl, N, &pc, &a, &b, &found));
    ck_assert_double_eq_tol(a, 450.0, 1e-9);
    ck_assert_double_eq_tol(b, 700.0, 1e-9);
    /* a change smaller than min_change: no window */
    for (int i = 0; i < N; i++)
        icl[i] = -0.01 * i / (N - 1);
    ck_ok(induct_analysis_phase_window(steps, icl, N, NULL, &a, &b, &found));
    ck_assert_uint_eq(found, 0);
    ck_assert(isnan(a) && isnan(b));
    /* bad input */
    ck_assert_status(induct_analysis_phase_window(steps, icl, 1, NULL, &a, &b, &found),
                     INDUCT_EINVAL);
    steps[5] = steps[4];
    ck_assert_status(induct_analysis_phase_window(steps, icl, N, NULL, &a, &b, &found),
                     INDUCT_EINVAL);
    steps[5] = 50.0;
    icl[3] = NAN;
    ck_assert_status(induct_analysis_phase_window(steps, icl, N, NULL, &a, &b, &found),
                     INDUCT_EINVAL);
    icl[3] = 0.0;
    pc.smooth = 2;
    ck_assert_status(induct_analysis_phase_window(steps, icl, N, &pc, &a, &b, &found),
                     INDUCT_EINVAL);
    pc.smooth = 1;
    pc.lo_frac = 0.9;
    pc.hi_frac = 0.5;
    ck_assert_status(induct_analysis_phase_window(steps, icl, N, &pc, &a, &b, &found),
                     INDUCT_EINVAL);
    pc.size = 3;
    ck_assert_status(induct_analysis_phase_window(steps, icl, N, &pc, &a, &b, &found), INDUCT_EABI);
}
END_TEST

START_TEST(test_classify) {
    /* head:         0     1     2     3     4     5 */
    float prev[] = {0.9f, 0.1f, 0.1f, 0.5f, 0.1f, 0.6f};
    float pm[] = {0.0f, 0.8f, 0.1f, 0.5f, 0.8f, 0.6f};
    float dup[] = {0.0f, 0.0f, 0.7f, 0.0f, 0.0f, 0.9f};
    float copy[] = {0.0f, 0.5f, 0.0f, 0.5f, -0.5f, 0.0f};
    uint32_t lab[6];
    size_t len;
    ck_ok(induct_analysis_classify_heads(prev, pm, dup, NULL, 6, NULL, lab, 6, &len));
    const uint32_t want[] = {INDUCT_HEAD_PREVIOUS_TOKEN, INDUCT_HEAD_INDUCTION,
                             INDUCT_HEAD_DUPLICATE,      INDUCT_HEAD_INDUCTION /* tie */,
                             INDUCT_HEAD_INDUCTION,      INDUCT_HEAD_DUPLICATE};
    for (int i = 0; i < 6; i++)
        ck_assert_uint_eq(lab[i], want[i]);
    /* with copying scores, head 4 (prefix-matching but anti-copying) is not induction */
    ck_ok(induct_analysis_classify_heads(prev, pm, dup, copy, 6, NULL, lab, 6, &len));
    ck_assert_uint_eq(lab[4], INDUCT_HEAD_OTHER);
    ck_assert_uint_eq(lab[1], INDUCT_HEAD_INDUCTION);
    /* thresholds are overridable */
    induct_classify_config cc;
    induct_classify_config_init(&cc, sizeof cc);
    cc.previous_token = 0.95;
    cc.duplicate = 0.95;
    ck_ok(induct_analysis_classify_heads(prev, pm, dup, NULL, 6, &cc, lab, 6, &len));
    ck_assert_uint_eq(lab[0], INDUCT_HEAD_OTHER);
    ck_assert_uint_eq(lab[2], INDUCT_HEAD_OTHER);
    ck_assert_uint_eq(lab[5], INDUCT_HEAD_INDUCTION);
    cc.induction = 0.0;
    ck_assert_status(induct_analysis_classify_heads(prev, pm, dup, NULL, 6, &cc, lab, 6, &len),
                     INDUCT_EINVAL);
    ck_assert_status(induct_analysis_classify_heads(prev, pm, dup, NULL, 6, NULL, lab, 5, &len),
                     INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 6);
    pm[2] = INFINITY;
    ck_assert_status(induct_analysis_classify_heads(prev, pm, dup, NULL, 6, NULL, lab, 6, &len),
                     INDUCT_EINVAL);
}
END_TEST

/* ---- no side effects -------------------------------------------------------------------- */

typedef struct results {
    double icl;
    float curve[23], vec[6], pm[6], dup[6], prev[6], copy[6], eig[6], attr[6];
    float comp[3][36];
    double base;
    float logits[24 * 16];
} results;

static void run_all(induct_model *m, induct_dataset *d, results *r, int order) {
    induct_eval_config ec;
    small_eval(&ec);
    induct_probe_config pc;
    induct_probe_config_init(&pc, sizeof pc);
    pc.block_len = 5;
    pc.n_repeats = 3;
    pc.n_seq = 3;
    size_t len;
    int32_t tok[24];
    tu_tokens(tok, 24, 16, 8);
    for (int step = 0; step < 11; step++) {
        int s = order ? 10 - step : step;
        switch (s) {
        case 0: ck_ok(induct_analysis_icl_score(m, d, &ec, &r->icl)); break;
        case 1: ck_ok(induct_analysis_loss_by_position(m, d, &ec, r->curve, 23, &len)); break;
        case 2: ck_ok(induct_analysis_loss_vectors(m, d, &ec, r->vec, 6, NULL, 0)); break;
        case 3: ck_ok(induct_analysis_prefix_matching(m, &pc, r->pm, 6, &len)); break;
        case 4: ck_ok(induct_analysis_duplicate_token(m, &pc, r->dup, 6, &len)); break;
        case 5: ck_ok(induct_analysis_previous_token_score(m, d, 4, 24, r->prev, 6, &len)); break;
        case 6: ck_ok(induct_analysis_copying(m, &pc, r->copy, 6, &len)); break;
        case 7: ck_ok(induct_analysis_copying_eigen(m, r->eig, 6, &len)); break;
        case 8:
            for (uint32_t k = 0; k < 3; k++)
                ck_ok(induct_analysis_composition(m, k, r->comp[k], 36, &len));
            ck_ok(induct_analysis_composition_baseline(m, 20, 1, &r->base));
            break;
        case 9:
            ck_ok(induct_analysis_ablation_attribution(m, d, &ec, INDUCT_ABLATE_ZERO, r->attr, 6,
                                                       &len, NULL));
            break;
        case 10:
            ck_ok(induct_model_forward(m, tok, 1, 24, r->logits, 24 * 16, NULL, 0, NULL));
            break;
        }
    }
}

START_TEST(test_no_side_effects) {
    /* variants: attention-only (fast attribution) and MLP + everything (general path) */
    induct_model *m = _i == 0 ? rand_model(3, 0, 0, INDUCT_POS_STANDARD, 0, 5)
                              : rand_model(3, 10, 1, INDUCT_POS_SHORTFORMER, 1, 6);
    induct_dataset *d = rrt(16);
    float *w0 = snapshot(m);
    static results a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    run_all(m, d, &a, 0);
    float *w1 = snapshot(m);
    ck_assert(memcmp(w0, w1, induct_model_n_params(m) * sizeof *w0) == 0);
    run_all(m, d, &b, 1); /* reverse order */
    ck_assert(memcmp(&a, &b, sizeof a) == 0);
    /* ablate, analyse, clear: a clean forward is bit-identical to the one before */
    ck_ok(induct_model_ablate_head(m, 1, 0, INDUCT_ABLATE_ZERO));
    ck_ok(induct_model_set_preserve_patterns(m, 1));
    int32_t ref[2 * 24];
    tu_tokens(ref, 48, 16, 9);
    ck_ok(induct_model_set_ablation_mean(m, ref, 2, 24, INDUCT_MEAN_PER_POSITION));
    ck_ok(induct_model_ablate_head(m, 2, 1, INDUCT_ABLATE_MEAN));
    run_all(m, d, &b, 0);
    ck_assert(memcmp(&a.logits, &b.logits, sizeof a.logits) != 0);
    ck_assert(memcmp(a.eig, b.eig, sizeof a.eig) == 0); /* weights-only: ablations ignored */
    ck_assert(memcmp(a.comp, b.comp, sizeof a.comp) == 0);
    ck_ok(induct_model_clear_ablations(m));
    memset(&b, 0, sizeof b);
    run_all(m, d, &b, 1);
    ck_assert(memcmp(&a, &b, sizeof a) == 0);
    float *w2 = snapshot(m);
    ck_assert(memcmp(w0, w2, induct_model_n_params(m) * sizeof *w0) == 0);
    free(w0);
    free(w1);
    free(w2);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* Training and backward refuse while heads are ablated; weights stay unchanged. */
START_TEST(test_backward_refused) {
    induct_model *m = rand_model(2, 0, 0, INDUCT_POS_STANDARD, 0, 7);
    induct_dataset *d = rrt(16);
    induct_optimizer *o;
    ck_ok(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    float *w0 = snapshot(m);
    int32_t tok[2 * 24];
    tu_tokens(tok, 48, 16, 1);
    ck_ok(induct_model_ablate_head(m, 0, 1, INDUCT_ABLATE_ZERO));
    ck_assert_status(induct_model_backward(m, tok, 2, 24, NULL), INDUCT_ESTATE);
    ck_assert_status(induct_train_step(o, d, 2, 24, NULL), INDUCT_ESTATE);
    ck_assert_status(induct_train_step_tokens(o, tok, 2, 24, NULL), INDUCT_ESTATE);
    float *w1 = snapshot(m);
    ck_assert(memcmp(w0, w1, induct_model_n_params(m) * sizeof *w0) == 0);
    double step;
    ck_ok(induct_optimizer_get(o, INDUCT_OPT_STEP, &step));
    ck_assert_double_eq(step, 0.0);
    /* restoring the head (mode NONE) is enough */
    ck_ok(induct_model_ablate_head(m, 0, 1, INDUCT_ABLATE_NONE));
    ck_ok(induct_train_step(o, d, 2, 24, NULL));
    /* a clone does not inherit ablations */
    ck_ok(induct_model_ablate_head(m, 1, 1, INDUCT_ABLATE_ZERO));
    induct_model *c;
    ck_ok(induct_model_clone(&c, m));
    ck_ok(induct_model_backward(c, tok, 2, 24, NULL));
    induct_model_free(c);
    free(w0);
    free(w1);
    induct_optimizer_free(o);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------------ */

START_TEST(test_bad_input) {
    induct_model *m = rand_model(2, 0, 0, INDUCT_POS_STANDARD, 0, 8);
    induct_dataset *d = rrt(16);
    induct_eval_config ec;
    small_eval(&ec);
    double icl = 42.0;
    size_t len = 0;
    float buf[64];
    /* ICL indices */
    ec.late = 24; /* needs seq_len >= 25 */
    ck_assert_status(induct_analysis_icl_score(m, d, &ec, &icl), INDUCT_ERANGE);
    ck_assert_msg(strstr(induct_last_error_message(), "too short") != NULL, "%s",
                  induct_last_error_message());
    ck_assert_double_eq(icl, 42.0);
    ec.late = 23;
    ck_ok(induct_analysis_icl_score(m, d, &ec, &icl)); /* the last loss index: exactly fits */
    ec.late = 4;                                       /* early == late */
    ck_assert_status(induct_analysis_icl_score(m, d, &ec, &icl), INDUCT_EINVAL);
    small_eval(&ec);
    ec.early = 0;
    ck_assert_status(induct_analysis_icl_score(m, d, &ec, &icl), INDUCT_EINVAL);
    small_eval(&ec);
    ec.seq_len = 33; /* n_ctx 32 */
    ck_assert_status(induct_analysis_icl_score(m, d, &ec, &icl), INDUCT_ERANGE);
    small_eval(&ec);
    ec.seq_len = 0; /* n_ctx = 32 < default late 500 + 1 */
    ec.early = 50;
    ec.late = 500;
    ck_assert_status(induct_analysis_icl_score(m, d, &ec, &icl), INDUCT_ERANGE);
    ck_assert_status(induct_analysis_icl_score(m, d, NULL, &icl), INDUCT_ERANGE);
    small_eval(&ec);
    ec.n_seq = 0;
    ck_assert_status(induct_analysis_icl_score(m, d, &ec, &icl), INDUCT_EINVAL);
    small_eval(&ec);
    ec.split = 7;
    ck_assert_status(induct_analysis_icl_score(m, d, &ec, &icl), INDUCT_EINVAL);
    small_eval(&ec);
    ec.size = 4;
    ck_assert_status(induct_analysis_icl_score(m, d, &ec, &icl), INDUCT_EABI);
    small_eval(&ec);
    ck_assert_status(induct_analysis_icl_score(NULL, d, &ec, &icl), INDUCT_EINVAL);
    ck_assert_status(induct_analysis_icl_score(m, NULL, &ec, &icl), INDUCT_EINVAL);
    ck_assert_status(induct_analysis_icl_score(m, d, &ec, NULL), INDUCT_EINVAL);
    induct_dataset *big = rrt(40); /* vocabulary larger than the model's 16 */
    ck_assert_status(induct_analysis_icl_score(m, big, &ec, &icl), INDUCT_EINVAL);
    induct_dataset_free(big);
    /* buffer sizes report the length needed */
    ck_assert_status(induct_analysis_loss_by_position(m, d, &ec, buf, 22, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 23);
    ck_assert_status(induct_analysis_loss_by_position(m, d, &ec, NULL, 0, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 23);
    ck_assert_status(induct_analysis_loss_vectors(m, d, &ec, buf, 5, NULL, 0), INDUCT_EBUFSIZE);
    ck_assert_status(induct_analysis_loss_vectors(m, d, &ec, NULL, 0, buf, 22), INDUCT_EBUFSIZE);
    ck_assert_status(induct_analysis_loss_vectors(m, d, &ec, NULL, 6, NULL, 0), INDUCT_EINVAL);
    ck_assert_status(induct_analysis_prefix_matching(m, NULL, buf, 3, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 4);
    ck_assert_status(induct_analysis_duplicate_token(m, NULL, NULL, 0, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 4);
    ck_assert_status(induct_analysis_copying(m, NULL, buf, 1, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 4);
    ck_assert_status(induct_analysis_copying_eigen(m, buf, 3, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 4);
    ck_assert_status(induct_analysis_composition(m, INDUCT_COMPOSITION_Q, buf, 15, &len),
                     INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 16);
    ck_assert_status(
        induct_analysis_ablation_attribution(m, d, &ec, INDUCT_ABLATE_ZERO, buf, 3, &len, NULL),
        INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 4);
    uint32_t modes[4];
    ck_assert_status(induct_model_get_ablations(m, modes, 3, &len, NULL), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 4);
    /* probes: BOS + 10 x 4 = 41 tokens exceed n_ctx 32; the default's 25 distinct tokens
     * do not fit in [1, 16) */
    induct_probe_config pc;
    induct_probe_config_init(&pc, sizeof pc);
    pc.block_len = 10;
    ck_assert_status(induct_analysis_prefix_matching(m, &pc, buf, 4, &len), INDUCT_ERANGE);
    ck_assert_status(induct_analysis_prefix_matching(m, NULL, buf, 4, &len), INDUCT_EINVAL);
    pc.block_len = 16; /* range [1, 16) holds only 15 distinct tokens */
    pc.n_repeats = 2;
    ck_assert_status(induct_analysis_prefix_matching(m, &pc, buf, 4, &len), INDUCT_EINVAL);
    pc.block_len = 5;
    pc.bos = 3; /* inside the token range */
    ck_assert_status(induct_analysis_prefix_matching(m, &pc, buf, 4, &len), INDUCT_EINVAL);
    pc.bos = 0;
    pc.n_repeats = 1;
    ck_assert_status(induct_analysis_duplicate_token(m, &pc, buf, 4, &len), INDUCT_EINVAL);
    pc.n_repeats = 2;
    pc.token_hi = 17;
    ck_assert_status(induct_analysis_copying(m, &pc, buf, 4, &len), INDUCT_EINVAL);
    pc.token_hi = 0;
    pc.reserved0 = 1;
    ck_assert_status(induct_analysis_copying(m, &pc, buf, 4, &len), INDUCT_EINVAL);
    pc.reserved0 = 0;
    ck_assert_status(induct_analysis_probe_tokens(m, &pc, 2, NULL, 0, &len), INDUCT_EINVAL);
    ck_ok(induct_analysis_prefix_matching(m, &pc, buf, 4, &len));
    /* heads that do not exist, unknown modes */
    ck_assert_status(induct_model_ablate_head(m, 2, 0, INDUCT_ABLATE_ZERO), INDUCT_ERANGE);
    ck_assert_status(induct_model_ablate_head(m, 0, 2, INDUCT_ABLATE_ZERO), INDUCT_ERANGE);
    ck_assert_status(induct_model_ablate_head(m, 0, 0, 3), INDUCT_EINVAL);
    ck_assert_status(induct_model_ablate_head(NULL, 0, 0, 1), INDUCT_EINVAL);
    ck_assert_status(induct_model_set_preserve_patterns(m, 2), INDUCT_EINVAL);
    ck_ok(induct_model_get_ablations(m, modes, 4, &len, NULL));
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(modes[i], 0); /* nothing changed */
    ck_assert_status(induct_analysis_ablation_attribution(m, d, &ec, 3, buf, 4, &len, NULL),
                     INDUCT_EINVAL);
    ck_assert_status(induct_analysis_ablation_attribution(m, d, &ec, INDUCT_ABLATE_ZERO | 0x200,
                                                          buf, 4, &len, NULL),
                     INDUCT_EINVAL);
    ck_assert_status(
        induct_analysis_ablation_attribution(m, d, &ec, INDUCT_ABLATE_MEAN, buf, 4, &len, NULL),
        INDUCT_ESTATE);
    int32_t tok[24];
    tu_tokens(tok, 24, 16, 2);
    tok[5] = 16;
    ck_assert_status(induct_model_set_ablation_mean(m, tok, 1, 24, INDUCT_MEAN_POOLED),
                     INDUCT_ERANGE);
    tok[5] = 1;
    ck_assert_status(induct_model_set_ablation_mean(m, tok, 1, 24, 2), INDUCT_EINVAL);
    ck_ok(induct_model_set_ablation_mean(m, tok, 1, 12, INDUCT_MEAN_PER_POSITION));
    ck_assert_status(
        induct_analysis_ablation_attribution(m, d, &ec, INDUCT_ABLATE_MEAN, buf, 4, &len, NULL),
        INDUCT_ERANGE); /* reference shorter than the evaluation set */
    /* composition and baseline */
    ck_assert_status(induct_analysis_composition(m, 3, buf, 16, &len), INDUCT_EINVAL);
    double base;
    ck_assert_status(induct_analysis_composition_baseline(m, 0, 1, &base), INDUCT_EINVAL);
    ck_assert_status(induct_analysis_composition_baseline(m, 10, 1, NULL), INDUCT_EINVAL);
    /* PCA */
    float x[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13};
    float sc[12];
    double var[3];
    ck_assert_status(induct_analysis_pca(x, 4, 3, 4, sc, 12, NULL, 0, NULL, 0, NULL),
                     INDUCT_ERANGE);
    ck_assert_status(induct_analysis_pca(x, 4, 3, 0, sc, 12, NULL, 0, NULL, 0, NULL),
                     INDUCT_ERANGE);
    ck_assert_status(induct_analysis_pca(x, 1, 12, 1, sc, 12, NULL, 0, NULL, 0, NULL),
                     INDUCT_EINVAL);
    ck_assert_status(induct_analysis_pca(x, 4, 3, 2, sc, 7, NULL, 0, NULL, 0, NULL),
                     INDUCT_EBUFSIZE);
    ck_assert_status(induct_analysis_pca(x, 4, 3, 2, sc, 8, buf, 5, NULL, 0, NULL),
                     INDUCT_EBUFSIZE);
    ck_assert_status(induct_analysis_pca(x, 4, 3, 2, sc, 8, NULL, 0, var, 1, NULL),
                     INDUCT_EBUFSIZE);
    ck_assert_status(induct_analysis_pca(x, 4, 3, 2, sc, 8, NULL, 3, NULL, 0, NULL), INDUCT_EINVAL);
    x[4] = NAN;
    ck_assert_status(induct_analysis_pca(x, 4, 3, 2, sc, 8, NULL, 0, NULL, 0, NULL), INDUCT_EINVAL);
    /* config init */
    ck_assert_status(induct_eval_config_init(&ec, 3), INDUCT_EABI);
    ck_assert_status(induct_probe_config_init(NULL, sizeof pc), INDUCT_EINVAL);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* A larger struct with a zero tail is accepted; a non-zero tail is refused. */
START_TEST(test_config_abi) {
    induct_model *m = rand_model(2, 0, 0, INDUCT_POS_STANDARD, 0, 1);
    induct_dataset *d = rrt(16);
    struct {
        induct_eval_config c;
        uint64_t future;
    } big;
    induct_eval_config_init(&big.c, sizeof big);
    ck_assert_uint_eq(big.c.size, sizeof big);
    ck_assert_uint_eq(big.future, 0);
    big.c.seq_len = 24;
    big.c.early = 4;
    big.c.late = 20;
    double icl;
    ck_ok(induct_analysis_icl_score(m, d, &big.c, &icl));
    big.future = 1;
    ck_assert_status(induct_analysis_icl_score(m, d, &big.c, &icl), INDUCT_EABI);
    induct_eval_config e;
    induct_probe_config p;
    induct_phase_config ph;
    induct_classify_config cl;
    ck_ok(induct_eval_config_init(&e, sizeof e));
    ck_ok(induct_probe_config_init(&p, sizeof p));
    ck_ok(induct_phase_config_init(&ph, sizeof ph));
    ck_ok(induct_classify_config_init(&cl, sizeof cl));
    ck_assert_uint_eq(e.n_seq, 8);
    ck_assert_uint_eq(e.early, 50);
    ck_assert_uint_eq(e.late, 500);
    ck_assert_uint_eq(p.n_seq, 10);
    ck_assert_uint_eq(p.block_len, 25);
    ck_assert_uint_eq(p.n_repeats, 4);
    ck_assert_int_eq(p.bos, 0);
    ck_assert_uint_eq(p.copying_bos, 0);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* Interrupting from the same thread before a call has no effect (the flag is cleared
 * when the call starts); the attribution of a flagged model still completes. */
START_TEST(test_interrupt_flag_cleared) {
    induct_model *m = rand_model(2, 0, 0, INDUCT_POS_STANDARD, 0, 3);
    induct_dataset *d = rrt(16);
    induct_eval_config ec;
    small_eval(&ec);
    induct_model_interrupt(m);
    double icl;
    ck_ok(induct_analysis_icl_score(m, d, &ec, &icl));
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

/* An interrupt from another thread stops an analysis with INDUCT_EINTERRUPTED and
 * leaves the model usable with its ablations unchanged. The other thread keeps setting
 * the flag until told to stop (a call clears it once when it starts), and each analysis
 * is called until one call is interrupted: every call either completes (INDUCT_OK) or is
 * interrupted, so the outcome does not depend on when the other thread runs, only how
 * many calls it takes (no time limit: under any fair scheduler the other thread runs
 * while some call is in progress). The other thread has started interrupting before the
 * first call (a handshake), and the values of an interrupted call are left untouched. */
static atomic_int stop_spinning, spinning;
static int spin_interrupt(void *arg) {
    while (!atomic_load(&stop_spinning)) {
        induct_model_interrupt((induct_model *)arg);
        atomic_store(&spinning, 1);
    }
    return 0;
}

START_TEST(test_interrupt_from_thread) {
    induct_model *m = rand_model(2, 0, 0, INDUCT_POS_STANDARD, 0, 3);
    induct_dataset *d = rrt(16);
    induct_eval_config ec;
    small_eval(&ec);
    ec.n_seq = 48;
    ec.chunk = 1;
    ck_ok(induct_model_ablate_head(m, 1, 1, INDUCT_ABLATE_ZERO));
    atomic_store(&stop_spinning, 0);
    atomic_store(&spinning, 0);
    thrd_t th;
    ck_assert_int_eq(thrd_create(&th, spin_interrupt, m), thrd_success);
    while (!atomic_load(&spinning)) thrd_yield();
    float attr[4] = {7.0f, 7.0f, 7.0f, 7.0f};
    size_t len;
    double icl;
    int rc1, rc2;
    long calls1 = 0, calls2 = 0;
    do {
        icl = 7.0;
        rc1 = induct_analysis_icl_score(m, d, &ec, &icl);
        calls1++;
    } while (rc1 == INDUCT_OK);
    ck_assert_int_eq(rc1, INDUCT_EINTERRUPTED);
    ck_assert_double_eq(icl, 7.0);
    do {
        rc2 = induct_analysis_ablation_attribution(m, d, &ec, INDUCT_ABLATE_ZERO, attr, 4, &len,
                                                   NULL);
        calls2++;
    } while (rc2 == INDUCT_OK);
    atomic_store(&stop_spinning, 1);
    thrd_join(th, NULL);
    ck_assert_int_eq(rc2, INDUCT_EINTERRUPTED);
    ck_assert_int_eq(induct_last_error_code(), INDUCT_EINTERRUPTED);
    uint32_t modes[4];
    ck_ok(induct_model_get_ablations(m, modes, 4, &len, NULL));
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(modes[i], i == 3 ? INDUCT_ABLATE_ZERO : 0);
    ec.n_seq = 6;
    ck_ok(induct_analysis_icl_score(m, d, &ec, &icl)); /* flag cleared at the start */
    fprintf(stderr, "interrupted after %ld and %ld calls\n", calls1, calls2);
    induct_dataset_free(d);
    induct_model_free(m);
}
END_TEST

Suite *analysis_api_suite(void) {
    Suite *s = suite_create("analysis_api");
    TCase *tc = tcase_create("api");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_loss_vectors);
    tcase_add_test(tc, test_positions);
    tcase_add_test(tc, test_positions_bad_input);
    tcase_add_test(tc, test_probe_tokens);
    tcase_add_test(tc, test_induction_score_definition);
    tcase_add_test(tc, test_phase_window);
    tcase_add_test(tc, test_classify);
    tcase_add_loop_test(tc, test_no_side_effects, 0, 2);
    tcase_add_test(tc, test_backward_refused);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_config_abi);
    tcase_add_test(tc, test_interrupt_flag_cleared);
    tcase_add_test(tc, test_interrupt_from_thread);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(analysis_api_suite()); }
