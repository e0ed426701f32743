/* Prints sizeof/offsetof of every public struct as JSON, for the ctypes mirror test. */
#include <induct/induct.h>
#include <stddef.h>
#include <stdio.h>

static int first_struct = 1, first_field;

static void begin(const char *name, size_t size) {
    printf("%s\"%s\": {\"__size__\": %zu, \"fields\": {", first_struct ? "{" : "}}, ", name,
           size);
    first_struct = 0;
    first_field = 1;
}

static void field(const char *name, size_t offset, size_t size) {
    printf("%s\"%s\": [%zu, %zu]", first_field ? "" : ", ", name, offset, size);
    first_field = 0;
}

/* S is the struct being printed: redefined before each BEGIN. */
#define STR_(x) #x
#define STR(x) STR_(x)
#define BEGIN() begin(STR(S), sizeof(S))
#define F(f) field(#f, offsetof(S, f), sizeof(((S *)0)->f))

int main(void) {
#define S induct_model_config
    BEGIN();
    F(size); F(n_layers); F(d_model); F(n_heads); F(d_head); F(d_mlp); F(n_ctx); F(d_vocab);
    F(positional); F(layer_norm); F(smeared_keys); F(n_threads); F(init); F(smear_alpha_init);
    F(init_std); F(seed); F(max_bytes); F(shortformer_layers); F(reserved0);
#undef S
#define S induct_rrt_config
    BEGIN();
    F(size); F(d_vocab); F(n_repeats); F(min_block); F(max_block); F(token_lo); F(token_hi); F(bos);
    F(distinct_block); F(seed);
#undef S
#define S induct_train_config
    BEGIN();
    F(size); F(steps); F(batch); F(seq_len); F(eval_every); F(eval_log2); F(eval_batch); F(metrics);
    F(metrics_append); F(metrics_path); F(snapshot_every); F(snapshot_log2); F(snapshot_optimizer);
    F(snapshot_path); F(target_loss); F(probe);
#undef S
#define S induct_progress
    BEGIN();
    F(size); F(events); F(reserved0); F(step); F(steps); F(loss); F(lr); F(tokens_per_second);
    F(elapsed_seconds); F(eta_seconds); F(eval_loss); F(snapshot_path);
#undef S
    /* analysis suite */
#define S induct_eval_config
    BEGIN();
    F(size); F(n_seq); F(seq_len); F(chunk); F(early); F(late); F(split); F(batch_index);
    F(pos_seed); F(positions); F(n_positions); F(reserved0);
#undef S
#define S induct_probe_config
    BEGIN();
    F(size); F(n_seq); F(block_len); F(n_repeats); F(bos); F(token_lo); F(token_hi); F(copying_bos);
    F(reserved0); F(seed);
#undef S
#define S induct_phase_config
    BEGIN();
    F(size); F(lo_frac); F(hi_frac); F(min_change); F(smooth); F(reserved0);
#undef S
#define S induct_icl_groups_config
    BEGIN();
    F(size); F(n_groups); F(per_group); F(seq_len); F(chunk); F(early); F(late); F(band);
    F(split); F(curve_groups); F(reserved0);
#undef S
#define S induct_icl_estimate
    BEGIN();
    F(size); F(icl); F(icl_se); F(icl_token); F(icl_token_se); F(n_groups); F(per_group);
#undef S
#define S induct_classify_config
    BEGIN();
    F(size); F(previous_token); F(induction); F(duplicate); F(copying);
#undef S
    /* datasets */
#define S induct_kv_config
    BEGIN();
    F(size); F(d_vocab); F(token_lo); F(token_hi); F(pair_min); F(pair_max); F(unique_key);
    F(all_positions); F(seed);
#undef S
#define S induct_text_config
    BEGIN();
    F(size); F(bos); F(separator); F(split); F(n_eval_windows); F(val_fraction); F(block_tokens);
    F(seed); F(max_bytes);
#undef S
#define S induct_token_file_config
    BEGIN();
    F(size); F(format); F(d_vocab); F(n_eval_windows); F(val_fraction); F(block_tokens);
    F(resident_limit); F(seed); F(max_bytes);
#undef S
#define S induct_generate_config
    BEGIN();
    F(size); F(max_new_tokens); F(reserved0); F(temperature); F(seed);
#undef S
    /* hook points */
#define S induct_hook
    BEGIN();
    F(name); F(fn); F(user);
#undef S
    /* communicators */
#define S induct_comm
    BEGIN();
    F(size); F(rank); F(n_ranks); F(user); F(sendrecv); F(barrier); F(abort);
#undef S
    /* the local learning coefficient */
#define S induct_llc_config
    BEGIN();
    F(size); F(chains); F(draws); F(burnin); F(every); F(batch); F(seq_len); F(init_batches);
    F(nbeta_rule); F(nbeta); F(n_data); F(epsilon); F(gamma); F(max_increase); F(seed);
    F(batch_offset); F(split); F(mala); F(paired); F(reserved0);
#undef S
#define S induct_llc_summary
    BEGIN();
    F(size); F(llc_mean); F(llc_std); F(llc_se); F(init_loss); F(nbeta); F(below_init);
    F(mala_accept); F(n_sampled); F(chains); F(draws); F(steps); F(init_batches); F(paired);
    F(reserved0);
#undef S
    printf("}}}\n");
    return 0;
}
