/* Shared helpers for the libcheck suites. */
#ifndef INDUCT_TESTUTIL_H
#define INDUCT_TESTUTIL_H

#include <check.h>
#include <induct/induct.h>
#include <stdint.h>
#include <stdlib.h>

/* Assert a call returned `expected`, printing the library's message otherwise. */
#define ck_assert_status(call, expected)                                                   \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        ck_assert_msg(rc_ == (expected), "%s returned %s (%s), expected %s", #call,        \
                      induct_status_name(rc_), induct_last_error_message(),                \
                      induct_status_name(expected));                                       \
    } while (0)
#define ck_ok(call) ck_assert_status(call, INDUCT_OK)

/* A tiny config: 2 layers, d_model 8, 2 heads, n_ctx 8, d_vocab 11. */
void tu_tiny_config(induct_model_config *c);
/* A tu_tiny_config model with the given architecture variant, its parameters
 * randomised by tu_randomize(m, 0.5, seed). */
induct_model *tu_variant_model(uint32_t d_mlp, uint32_t layer_norm, uint32_t positional,
                               uint32_t smeared_keys, uint64_t seed);
/* The architecture variants every whole-model suite runs over (gradients, round
 * trips): attention-only, mlp, layernorm, shortformer, none, smeared-keys,
 * everything (TU_EVERYTHING), shortformer-layer0 (W_pos in layer 0 only), and the
 * same without LayerNorm. */
typedef struct tu_variant {
    const char *name;
    uint32_t d_mlp, layer_norm, positional, smeared, shortformer_layers;
} tu_variant;
extern const tu_variant TU_VARIANTS[];
extern const int TU_N_VARIANTS;
#define TU_EVERYTHING 6
/* Set c's architecture fields to the variant's (the other fields untouched). */
void tu_variant_apply(induct_model_config *c, const tu_variant *v);
/* A repeated-random-token dataset (induct_dataset_new_rrt) with these fields set, the
 * other fields at their defaults. */
induct_dataset *tu_rrt(uint32_t d_vocab, uint32_t min_block, uint64_t seed);
/* Deterministic pseudo-random tokens in [0, V). */
void tu_tokens(int32_t *t, size_t n, uint32_t V, uint64_t seed);
/* Overwrite every parameter with N(0, std) values (deterministic) so that biases,
 * LayerNorm and alpha are all non-trivial. */
void tu_randomize(induct_model *m, double std, uint64_t seed);
/* The mean loss of the model on the caller's fixed input (for tu_gradcheck). */
typedef double (*tu_loss_fn)(void *user, induct_model *m);
/* Check every parameter's gradient (the model's gradient buffer, filled by the caller)
 * against central finite differences (eps 2e-3) of loss: |fd - g| <= 2e-3 + 2e-2 |fd|.
 * Returns the number of parameters checked. */
size_t tu_gradcheck(induct_model *m, tu_loss_fn loss, void *user, const char *what);
/* A hook (induct_hook_fn) on hook_pattern ([B, H, T, K]) that clamps head
 * *(const uint32_t *)user to the previous-token pattern (query p attends to key p - 1,
 * query 0 to itself): a constant overwrite. */
int tu_clamp_previous_token(void *user, const char *name, float *att, const uint32_t *shape,
                            uint32_t ndim);
/* Every parameter's gradient (INDUCT_BUF_GRAD), tensors in storage order, in one
 * malloc'ed array of induct_model_n_params(m) floats (the caller frees it). */
float *tu_grads(induct_model *m);
/* Run a suite; returns the process exit status. */
int tu_run(Suite *s);

#endif
