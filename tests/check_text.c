/* Text in and out: the byte-level tokenizer (against the byte-level text dataset's own
 * tokens) and generation (greedy = the arg max of the forward pass's logits; sampling
 * frequencies = softmax(logits / temperature) on a model whose logits are known in
 * closed form; reproducible per seed; bad input). Public API only. */
#include <math.h>
#include <string.h>

#include "testutil.h"

static const char TEXT[] = "the cat sat on the mat; the cat sat on the mat\n";

START_TEST(test_encode_decode_roundtrip) {
    unsigned char bytes[256];
    for (int i = 0; i < 256; i++) bytes[i] = (unsigned char)(255 - i); /* every byte value */
    for (uint32_t bos = 0; bos <= 1; bos++) {
        size_t n = 0;
        ck_assert_status(induct_text_encode(bytes, 256, bos, NULL, 0, &n), INDUCT_EBUFSIZE);
        ck_assert_uint_eq(n, 256 + bos);
        int32_t ids[257];
        ck_assert_status(induct_text_encode(bytes, 256, bos, ids, n - 1, &n), INDUCT_EBUFSIZE);
        ck_ok(induct_text_encode(bytes, 256, bos, ids, 257, &n));
        ck_assert_uint_eq(n, 256 + bos);
        if (bos) ck_assert_int_eq(ids[0], INDUCT_TEXT_BOS);
        for (int i = 0; i < 256; i++) ck_assert_int_eq(ids[bos + i], 255 - i);
        unsigned char back[256];
        size_t m = 0;
        ck_assert_status(induct_text_decode(ids, n, bos, NULL, 0, &m), INDUCT_EBUFSIZE);
        ck_assert_uint_eq(m, 256);
        ck_ok(induct_text_decode(ids, n, bos, back, sizeof back, &m));
        ck_assert_uint_eq(m, 256);
        ck_assert_mem_eq(back, bytes, 256);
    }
    /* empty input: nothing, or the BOS alone; decoding BOS alone gives no byte */
    size_t n = 99;
    int32_t one[1] = {-1};
    ck_ok(induct_text_encode(NULL, 0, 0, NULL, 0, &n));
    ck_assert_uint_eq(n, 0);
    ck_ok(induct_text_encode(NULL, 0, 1, one, 1, &n));
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(one[0], 256);
    ck_ok(induct_text_decode(one, 1, 1, NULL, 0, &n));
    ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(test_decode_bos_anywhere_and_range) {
    int32_t ids[] = {256, 'a', 256, 'b', 256};
    char out[8] = {0};
    size_t n = 0;
    ck_ok(induct_text_decode(ids, 5, 1, out, sizeof out, &n));
    ck_assert_uint_eq(n, 2);
    ck_assert_mem_eq(out, "ab", 2);
    /* without BOS in the vocabulary, 256 is out of range; nothing is written */
    memset(out, 'x', sizeof out);
    ck_assert_status(induct_text_decode(ids, 5, 0, out, sizeof out, &n), INDUCT_ERANGE);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "index 0"));
    ck_assert_int_eq(out[0], 'x');
    int32_t bad[] = {'a', 257};
    ck_assert_status(induct_text_decode(bad, 2, 1, out, sizeof out, &n), INDUCT_ERANGE);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "257"));
    int32_t neg[] = {-1};
    ck_assert_status(induct_text_decode(neg, 1, 1, out, sizeof out, &n), INDUCT_ERANGE);
    ck_assert_status(induct_text_decode(NULL, 1, 0, out, sizeof out, &n), INDUCT_EINVAL);
    ck_assert_status(induct_text_decode(ids, 1, 2, out, sizeof out, &n), INDUCT_EINVAL);
    ck_assert_status(induct_text_encode(NULL, 1, 0, NULL, 0, &n), INDUCT_EINVAL);
    ck_assert_status(induct_text_encode("a", 1, 2, NULL, 0, &n), INDUCT_EINVAL);
}
END_TEST

/* The tokenizer makes exactly the tokens of the byte-level text dataset: one document
 * with bos = 1, no held-out part, one window covering the whole train stream. */
START_TEST(test_encode_matches_text_dataset) {
    size_t n = sizeof TEXT - 1;
    for (uint32_t bos = 0; bos <= 1; bos++) {
        induct_text_config tc;
        induct_text_config_init(&tc, sizeof tc);
        tc.bos = bos;
        tc.val_fraction = 0.0;
        tc.n_eval_windows = 0;
        induct_dataset *d;
        ck_ok(induct_dataset_new_text(&d, TEXT, n, &tc));
        ck_assert_uint_eq(induct_dataset_d_vocab(d), 256 + bos);
        uint32_t T = (uint32_t)(n + bos - 1); /* the only start is 0 */
        int32_t win[64], ids[64];
        ck_ok(induct_dataset_batch(d, INDUCT_SPLIT_TRAIN, 0, 1, T, win, T, NULL, 0));
        size_t len;
        ck_ok(induct_text_encode(TEXT, n, bos, ids, 64, &len));
        ck_assert_uint_eq(len, n + bos);
        for (uint32_t i = 0; i < T; i++) ck_assert_int_eq(win[i], ids[i]);
        induct_dataset_free(d);
    }
}
END_TEST

/* ---- generation ---------------------------------------------------------------------- */

static induct_model *tiny(void) {
    induct_model_config c;
    tu_tiny_config(&c);
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, 0.5, 7);
    return m;
}

static void gen(induct_model *m, const int32_t *prompt, uint32_t n, uint32_t new_tokens,
                double temperature, uint64_t seed, int32_t *out) {
    induct_generate_config g;
    ck_ok(induct_generate_config_init(&g, sizeof g));
    g.max_new_tokens = new_tokens;
    g.temperature = temperature;
    g.seed = seed;
    size_t len = 0;
    ck_ok(induct_model_generate(m, prompt, n, &g, out, new_tokens, &len));
    ck_assert_uint_eq(len, new_tokens);
}

/* Greedy: every new token is the arg max of the last position's logits of a forward
 * pass over the last n_ctx tokens so far, recomputed here independently. */
START_TEST(test_greedy_is_argmax_of_forward) {
    induct_model *m = tiny();
    induct_model_config c;
    c.size = sizeof c;
    ck_ok(induct_model_get_config(m, &c));
    const uint32_t V = c.d_vocab, n_ctx = c.n_ctx, P = 3, NEW = 12; /* runs past n_ctx */
    int32_t seq[3 + 12] = {1, 4, 2}, out[12];
    gen(m, seq, P, NEW, 0.0, 0, out);
    float *logits = malloc((size_t)n_ctx * V * sizeof *logits);
    for (uint32_t i = 0; i < NEW; i++) {
        uint32_t len = P + i, T = len < n_ctx ? len : n_ctx;
        ck_ok(induct_model_forward(m, seq + len - T, 1, T, logits, (size_t)n_ctx * V, NULL, 0,
                                   NULL));
        const float *row = logits + (size_t)(T - 1) * V;
        uint32_t best = 0;
        for (uint32_t v = 1; v < V; v++)
            if (row[v] > row[best]) best = v;
        ck_assert_int_eq(out[i], (int32_t)best);
        seq[len] = out[i];
    }
    /* a one-token prompt: the logits of position 0 of any two-token sequence */
    int32_t one[1] = {5}, two[2] = {5, 9}, o1;
    gen(m, one, 1, 1, 0.0, 0, &o1);
    ck_ok(induct_model_forward(m, two, 1, 2, logits, (size_t)n_ctx * V, NULL, 0, NULL));
    uint32_t best = 0;
    for (uint32_t v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    ck_assert_int_eq(o1, (int32_t)best);
    free(logits);
    induct_model_free(m);
}
END_TEST

/* A model whose every weight is 0 but b_U: the logits are b_U at every position, so
 * each sampled token is an independent draw from softmax(b_U / temperature). */
START_TEST(test_sampling_frequencies_match_softmax) {
    induct_model_config c;
    tu_tiny_config(&c); /* d_vocab 11 */
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    size_t nt = induct_model_n_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        size_t n;
        ck_ok(induct_model_tensor_info(m, i, &name, NULL, NULL, &n));
        float *z = calloc(n, sizeof *z);
        ck_ok(induct_model_set_tensor(m, name, z, n));
        free(z);
    }
    const uint32_t V = c.d_vocab;
    float bU[16];
    for (uint32_t v = 0; v < V; v++) bU[v] = (float)(0.3 * v - 1.0);
    ck_ok(induct_model_set_tensor(m, "unembed.b_U", bU, V));
    const double temperature = 1.7;
    double p[16], z = 0.0;
    for (uint32_t v = 0; v < V; v++) z += (p[v] = exp(bU[v] / temperature));
    enum { N = 6000 };
    int32_t prompt[2] = {0, 1};
    int32_t *out = malloc(N * sizeof *out), *again = malloc(N * sizeof *again);
    gen(m, prompt, 2, N, temperature, 42, out);
    unsigned count[16] = {0};
    for (int i = 0; i < N; i++) {
        ck_assert(out[i] >= 0 && (uint32_t)out[i] < V);
        count[out[i]]++;
    }
    double chi2 = 0.0;
    for (uint32_t v = 0; v < V; v++) {
        double e = N * p[v] / z;
        chi2 += (count[v] - e) * (count[v] - e) / e;
    }
    /* 10 degrees of freedom: P(chi2 > 35) < 2e-4; a wrong temperature (1.0 or 3.4)
     * gives chi2 in the hundreds */
    ck_assert_msg(chi2 < 35.0, "chi2 %.1f", chi2);
    /* the same seed gives the same tokens; another seed other tokens */
    gen(m, prompt, 2, N, temperature, 42, again);
    ck_assert_mem_eq(out, again, N * sizeof *out);
    gen(m, prompt, 2, N, temperature, 43, again);
    ck_assert(memcmp(out, again, N * sizeof *out) != 0);
    /* greedy: the largest b_U */
    gen(m, prompt, 2, 3, 0.0, 0, again);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(again[i], (int32_t)V - 1);
    free(out);
    free(again);
    induct_model_free(m);
}
END_TEST

START_TEST(test_generate_bad_input) {
    induct_model *m = tiny();
    induct_generate_config g;
    ck_ok(induct_generate_config_init(&g, sizeof g));
    ck_assert_uint_eq(g.max_new_tokens, 16);
    ck_assert(g.temperature == 0.0);
    int32_t prompt[3] = {1, 2, 3}, out[16];
    size_t len = 0;
    for (int i = 0; i < 16; i++) out[i] = -7;
    ck_assert_status(induct_model_generate(NULL, prompt, 3, &g, out, 16, &len), INDUCT_EINVAL);
    ck_assert_status(induct_model_generate(m, NULL, 3, &g, out, 16, &len), INDUCT_EINVAL);
    ck_assert_status(induct_model_generate(m, prompt, 3, NULL, out, 16, &len), INDUCT_EINVAL);
    ck_assert_status(induct_model_generate(m, prompt, 0, &g, out, 16, &len), INDUCT_EINVAL);
    ck_assert_status(induct_model_generate(m, prompt, 3, &g, NULL, 0, &len), INDUCT_EBUFSIZE);
    ck_assert_uint_eq(len, 16);
    ck_assert_status(induct_model_generate(m, prompt, 3, &g, out, 15, &len), INDUCT_EBUFSIZE);
    int32_t bad[3] = {1, 11, 3}; /* d_vocab 11 */
    ck_assert_status(induct_model_generate(m, bad, 3, &g, out, 16, &len), INDUCT_ERANGE);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "index 1"));
    double temps[] = {-0.5, NAN, INFINITY, 2e6};
    for (int i = 0; i < 4; i++) {
        g.temperature = temps[i];
        ck_assert_status(induct_model_generate(m, prompt, 3, &g, out, 16, &len), INDUCT_EINVAL);
    }
    g.temperature = 0.0;
    g.max_new_tokens = 0;
    ck_assert_status(induct_model_generate(m, prompt, 3, &g, out, 16, &len), INDUCT_EINVAL);
    g.max_new_tokens = 4;
    g.reserved0 = 1;
    ck_assert_status(induct_model_generate(m, prompt, 3, &g, out, 16, &len), INDUCT_EINVAL);
    g.reserved0 = 0;
    g.size = 8;
    ck_assert_status(induct_model_generate(m, prompt, 3, &g, out, 16, &len), INDUCT_EABI);
    ck_assert_status(induct_generate_config_init(&g, 8), INDUCT_EABI);
    ck_assert_status(induct_generate_config_init(NULL, sizeof g), INDUCT_EINVAL);
    /* logits that overflow float (W_U of 3e38): ENUMERIC, out untouched */
    ck_ok(induct_generate_config_init(&g, sizeof g));
    float WU[8 * 11]; /* d_model 8, d_vocab 11 */
    for (int i = 0; i < 8 * 11; i++) WU[i] = 3e38f;
    ck_ok(induct_model_set_tensor(m, "unembed.W_U", WU, 8 * 11));
    ck_assert_status(induct_model_generate(m, prompt, 3, &g, out, 16, &len), INDUCT_ENUMERIC);
    for (int i = 0; i < 16; i++) ck_assert_int_eq(out[i], -7); /* untouched on failure */
    induct_model_free(m);
    /* n_ctx 1: no forward pass accepts a sequence, so nothing can be generated */
    induct_model_config c;
    tu_tiny_config(&c);
    c.n_ctx = 1;
    ck_ok(induct_model_new(&m, &c));
    ck_assert_status(induct_model_generate(m, prompt, 1, &g, out, 16, &len), INDUCT_ERANGE);
    induct_model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("text");
    TCase *tc = tcase_create("text");
    tcase_add_test(tc, test_encode_decode_roundtrip);
    tcase_add_test(tc, test_decode_bos_anywhere_and_range);
    tcase_add_test(tc, test_encode_matches_text_dataset);
    tcase_add_test(tc, test_greedy_is_argmax_of_forward);
    tcase_add_test(tc, test_sampling_frequencies_match_softmax);
    tcase_add_test(tc, test_generate_bad_input);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
