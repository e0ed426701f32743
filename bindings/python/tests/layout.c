/* Prints sizeof/offsetof of every public struct as JSON, for the ctypes mirror test. */
#include <induct/induct.h>
#include <stddef.h>
#include <stdio.h>

#define F(s, f) printf("%s\"%s\": [%zu, %zu]", first++ ? ", " : "", #f, offsetof(s, f), sizeof(((s *)0)->f))

int main(void) {
    int first = 0;
    printf("{\"induct_model_config\": {\"__size__\": %zu, \"fields\": {", sizeof(induct_model_config));
    F(induct_model_config, size); F(induct_model_config, n_layers); F(induct_model_config, d_model);
    F(induct_model_config, n_heads); F(induct_model_config, d_head); F(induct_model_config, d_mlp);
    F(induct_model_config, n_ctx); F(induct_model_config, d_vocab); F(induct_model_config, positional);
    F(induct_model_config, layer_norm); F(induct_model_config, smeared_keys);
    F(induct_model_config, n_threads); F(induct_model_config, init);
    F(induct_model_config, smear_alpha_init); F(induct_model_config, init_std);
    F(induct_model_config, seed);
    first = 0;
    printf("}}, \"induct_rrt_config\": {\"__size__\": %zu, \"fields\": {", sizeof(induct_rrt_config));
    F(induct_rrt_config, size); F(induct_rrt_config, d_vocab); F(induct_rrt_config, n_repeats);
    F(induct_rrt_config, min_block); F(induct_rrt_config, max_block); F(induct_rrt_config, token_lo);
    F(induct_rrt_config, token_hi); F(induct_rrt_config, bos); F(induct_rrt_config, distinct_block);
    F(induct_rrt_config, seed);
    first = 0;
    printf("}}, \"induct_train_config\": {\"__size__\": %zu, \"fields\": {", sizeof(induct_train_config));
    F(induct_train_config, size); F(induct_train_config, steps); F(induct_train_config, batch);
    F(induct_train_config, seq_len); F(induct_train_config, eval_every); F(induct_train_config, eval_log2);
    F(induct_train_config, eval_batch); F(induct_train_config, metrics); F(induct_train_config, metrics_append);
    F(induct_train_config, metrics_path); F(induct_train_config, snapshot_every);
    F(induct_train_config, snapshot_log2); F(induct_train_config, snapshot_optimizer);
    F(induct_train_config, snapshot_path); F(induct_train_config, target_loss);
    first = 0;
    printf("}}, \"induct_progress\": {\"__size__\": %zu, \"fields\": {", sizeof(induct_progress));
    F(induct_progress, size); F(induct_progress, events); F(induct_progress, reserved0);
    F(induct_progress, step); F(induct_progress, steps); F(induct_progress, loss); F(induct_progress, lr);
    F(induct_progress, tokens_per_second); F(induct_progress, elapsed_seconds);
    F(induct_progress, eta_seconds); F(induct_progress, eval_loss); F(induct_progress, snapshot_path);
    printf("}}}\n");
    return 0;
}
