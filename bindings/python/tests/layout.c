/* Prints sizeof/offsetof of every public struct as JSON, for the ctypes mirror test. */
#include <induct/induct.h>
#include <stddef.h>
#include <stdio.h>

static int first_struct = 1, first_field;

#define BEGIN(s)                                                                                   \
    do {                                                                                           \
        printf("%s\"" #s "\": {\"__size__\": %zu, \"fields\": {", first_struct ? "{" : "}}, ",    \
               sizeof(s));                                                                         \
        first_struct = 0;                                                                          \
        first_field = 1;                                                                           \
    } while (0)
#define F(s, f)                                                                                    \
    do {                                                                                           \
        printf("%s\"%s\": [%zu, %zu]", first_field ? "" : ", ", #f, offsetof(s, f),              \
               sizeof(((s *)0)->f));                                                               \
        first_field = 0;                                                                           \
    } while (0)

int main(void) {
    BEGIN(induct_model_config);
    F(induct_model_config, size); F(induct_model_config, n_layers); F(induct_model_config, d_model);
    F(induct_model_config, n_heads); F(induct_model_config, d_head); F(induct_model_config, d_mlp);
    F(induct_model_config, n_ctx); F(induct_model_config, d_vocab); F(induct_model_config, positional);
    F(induct_model_config, layer_norm); F(induct_model_config, smeared_keys);
    F(induct_model_config, n_threads); F(induct_model_config, init);
    F(induct_model_config, smear_alpha_init); F(induct_model_config, init_std);
    F(induct_model_config, seed);
    BEGIN(induct_rrt_config);
    F(induct_rrt_config, size); F(induct_rrt_config, d_vocab); F(induct_rrt_config, n_repeats);
    F(induct_rrt_config, min_block); F(induct_rrt_config, max_block); F(induct_rrt_config, token_lo);
    F(induct_rrt_config, token_hi); F(induct_rrt_config, bos); F(induct_rrt_config, distinct_block);
    F(induct_rrt_config, seed);
    BEGIN(induct_train_config);
    F(induct_train_config, size); F(induct_train_config, steps); F(induct_train_config, batch);
    F(induct_train_config, seq_len); F(induct_train_config, eval_every); F(induct_train_config, eval_log2);
    F(induct_train_config, eval_batch); F(induct_train_config, metrics); F(induct_train_config, metrics_append);
    F(induct_train_config, metrics_path); F(induct_train_config, snapshot_every);
    F(induct_train_config, snapshot_log2); F(induct_train_config, snapshot_optimizer);
    F(induct_train_config, snapshot_path); F(induct_train_config, target_loss);
    BEGIN(induct_progress);
    F(induct_progress, size); F(induct_progress, events); F(induct_progress, reserved0);
    F(induct_progress, step); F(induct_progress, steps); F(induct_progress, loss); F(induct_progress, lr);
    F(induct_progress, tokens_per_second); F(induct_progress, elapsed_seconds);
    F(induct_progress, eta_seconds); F(induct_progress, eval_loss); F(induct_progress, snapshot_path);
    /* analysis suite (issue 4) */
    BEGIN(induct_eval_config);
    F(induct_eval_config, size); F(induct_eval_config, n_seq); F(induct_eval_config, seq_len);
    F(induct_eval_config, chunk); F(induct_eval_config, early); F(induct_eval_config, late);
    F(induct_eval_config, split); F(induct_eval_config, batch_index); F(induct_eval_config, pos_seed);
    BEGIN(induct_probe_config);
    F(induct_probe_config, size); F(induct_probe_config, n_seq); F(induct_probe_config, block_len);
    F(induct_probe_config, n_repeats); F(induct_probe_config, bos); F(induct_probe_config, token_lo);
    F(induct_probe_config, token_hi); F(induct_probe_config, copying_bos);
    F(induct_probe_config, reserved0); F(induct_probe_config, seed);
    BEGIN(induct_phase_config);
    F(induct_phase_config, size); F(induct_phase_config, lo_frac); F(induct_phase_config, hi_frac);
    F(induct_phase_config, min_change); F(induct_phase_config, smooth); F(induct_phase_config, reserved0);
    BEGIN(induct_classify_config);
    F(induct_classify_config, size); F(induct_classify_config, previous_token);
    F(induct_classify_config, induction); F(induct_classify_config, duplicate);
    F(induct_classify_config, copying);
    /* datasets (issue 3) */
    printf("}}}\n");
    return 0;
}
