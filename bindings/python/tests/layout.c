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
    F(induct_model_config, seed); F(induct_model_config, max_bytes);
    first = 0;
    printf("}}, \"induct_rrt_config\": {\"__size__\": %zu, \"fields\": {", sizeof(induct_rrt_config));
    F(induct_rrt_config, size); F(induct_rrt_config, d_vocab); F(induct_rrt_config, n_repeats);
    F(induct_rrt_config, min_block); F(induct_rrt_config, max_block); F(induct_rrt_config, token_lo);
    F(induct_rrt_config, token_hi); F(induct_rrt_config, bos); F(induct_rrt_config, distinct_block);
    F(induct_rrt_config, seed);
    printf("}}}\n");
    return 0;
}
