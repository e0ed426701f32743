/* study-analyse: the run's configuration as the summary states it (config.data, model,
 * training, evaluation; docs/phase-change.md, "summary.json"). */
#include <math.h>

#include "analyse.h"

#define num run_add_num

cJSON *config_json(const ctx *x) {
    const run_config *c = &x->c;
    cJSON *cfg = cJSON_CreateObject();
    cJSON_AddStringToObject(cfg, "library_version", induct_version_string());
    cJSON *data = cJSON_AddObjectToObject(cfg, "data");
    if (c->text) {
        cJSON_AddStringToObject(data, "kind", "text (bytes)");
        cJSON_AddStringToObject(data, "path", c->text);
        if (c->suffix) cJSON_AddStringToObject(data, "suffix", c->suffix);
        else cJSON_AddNullToObject(data, "suffix");
        cJSON_AddBoolToObject(data, "bos", c->bos);
    } else {
        static const char *const fmts[] = {"u16", "u32", "llmc"};
        cJSON_AddStringToObject(data, "kind", "token file");
        cJSON_AddStringToObject(data, "path", c->tokens);
        cJSON_AddStringToObject(data, "format", fmts[c->format]);
    }
    uint64_t n_train = 0, n_val = 0, n_windows = 0;
    lib(induct_dataset_split_tokens(x->d, INDUCT_SPLIT_TRAIN, &n_train), "counting tokens");
    lib(induct_dataset_split_tokens(x->d, INDUCT_SPLIT_EVAL, &n_val), "counting tokens");
    lib(induct_dataset_window_count(x->d, INDUCT_SPLIT_EVAL, c->seq_len, &n_windows), "counting windows");
    cJSON_AddNumberToObject(data, "d_vocab", induct_dataset_d_vocab(x->d));
    cJSON_AddNumberToObject(data, "train_tokens", (double)n_train);
    cJSON_AddNumberToObject(data, "eval_tokens", (double)n_val);
    cJSON_AddNumberToObject(data, "eval_windows", (double)n_windows);
    cJSON_AddNumberToObject(data, "eval_windows_requested", c->eval_windows);
    num(data, "val_fraction", c->val_fraction);
    cJSON_AddNumberToObject(data, "block_tokens", (double)c->block_tokens);
    cJSON_AddNumberToObject(data, "seed", (double)c->data_seed);

    cJSON *mc = cJSON_AddObjectToObject(cfg, "model");
    cJSON_AddStringToObject(mc, "models", c->model);
    cJSON_AddNumberToObject(mc, "d_model", c->d_model);
    cJSON_AddNumberToObject(mc, "n_heads", c->heads);
    cJSON_AddNumberToObject(mc, "d_head", run_d_head(c));
    cJSON_AddNumberToObject(mc, "d_mlp", run_d_mlp(c));
    cJSON_AddNumberToObject(mc, "n_ctx", x->T);
    cJSON_AddNumberToObject(mc, "layer_norm", c->ln);
    cJSON_AddStringToObject(mc, "positional",
                            c->positional == INDUCT_POS_SHORTFORMER ? "shortformer"
                            : c->positional == INDUCT_POS_STANDARD  ? "standard" : "none");
    if (c->positional == INDUCT_POS_SHORTFORMER)
        cJSON_AddNumberToObject(mc, "shortformer_layers", c->shortformer_layers);
    cJSON_AddStringToObject(mc, "init", c->init == INDUCT_INIT_TORCH ? "torch" : "gpt2");
    num(mc, "init_std", c->init_std);
    cJSON_AddStringToObject(mc, "pos_init", c->pos_init == POS_INIT_SINUSOIDAL ? "sinusoidal" : "random");
    num(mc, "pos_amp", c->pos_init == POS_INIT_SINUSOIDAL ? c->pos_amp : NAN);
    num(mc, "smear_alpha_init", c->smear_alpha);
    cJSON_AddNumberToObject(mc, "seed", (double)c->seed);

    cJSON *tc = cJSON_AddObjectToObject(cfg, "training");
    cJSON_AddStringToObject(tc, "optimizer", "adamw");
    num(tc, "lr", c->lr);
    cJSON_AddNumberToObject(tc, "warmup_steps", (double)c->warmup);
    num(tc, "weight_decay", c->weight_decay);
    num(tc, "grad_clip", c->grad_clip);
    cJSON_AddStringToObject(tc, "schedule", c->cosine ? "cosine" : "constant");
    num(tc, "min_lr_ratio", c->min_lr_ratio);
    cJSON_AddNumberToObject(tc, "batch", c->batch);
    cJSON_AddNumberToObject(tc, "seq_len", x->T);
    cJSON_AddNumberToObject(tc, "steps", (double)c->steps);
    cJSON_AddNumberToObject(tc, "tokens_per_step", (double)c->batch * x->T);
    cJSON_AddNumberToObject(tc, "tokens_per_model", (double)c->steps * c->batch * x->T);
    cJSON *cur = cJSON_AddObjectToObject(tc, "curriculum");
    cJSON_AddStringToObject(cur, "kind", c->repeat_fraction > 0 ? "repeated_span" : "none");
    num(cur, "repeat_fraction", c->repeat_fraction);
    cJSON_AddNumberToObject(cur, "repeat_min_len", c->repeat_min);
    cJSON_AddNumberToObject(cur, "repeat_max_len", c->repeat_max);
    cJSON_AddNumberToObject(cur, "repeat_max_len_effective",
                            c->repeat_max < x->T / 2 ? c->repeat_max : x->T / 2);
    cJSON_AddStringToObject(cur, "applies_to",
                            "training windows only (their train loss included); every "
                            "evaluation is on untouched held-out text");
    cJSON_AddStringToObject(cur, "source", "Sabry & Belz 2025");
    cJSON_AddStringToObject(tc, "note", "null weight_decay / grad_clip / init_std / "
                                        "smear_alpha_init mean the library default");

    cJSON *ec = cJSON_AddObjectToObject(cfg, "evaluation");
    cJSON_AddNumberToObject(ec, "eval_every", (double)c->eval_every);
    cJSON_AddNumberToObject(ec, "eval_batch", x->E);
    num(ec, "eval_set_fraction_of_windows",
        n_windows ? fmin(1.0, (double)x->E / (double)n_windows) : NAN);
    cJSON_AddNumberToObject(ec, "icl_early_token", x->early);
    cJSON_AddNumberToObject(ec, "icl_late_token", x->late);
    cJSON_AddNumberToObject(ec, "pos_seed", 0); /* the driver's loss_vectors positions */
    cJSON_AddNumberToObject(ec, "smooth", x->o.smooth);
    cJSON_AddNumberToObject(ec, "icl_band", c->icl_band);
    cJSON_AddNumberToObject(ec, "snapshots", c->snapshots);
    num(ec, "prefix_matching_chance", x->pm_chance);
    const uint64_t disjoint = n_val > 0 ? (n_val - 1) / x->T : 0;
    cJSON *lg = cJSON_AddObjectToObject(ec, "large");
    cJSON_AddNumberToObject(lg, "windows_requested", x->o.icl_windows);
    cJSON_AddNumberToObject(lg, "windows", (double)x->big.groups * x->big.per);
    cJSON_AddNumberToObject(lg, "groups", x->big.groups);
    cJSON_AddNumberToObject(lg, "windows_per_group", x->big.per);
    cJSON_AddNumberToObject(lg, "disjoint_windows_in_held_out_text", (double)disjoint);
    cJSON_AddBoolToObject(lg, "windows_overlap", (double)x->big.groups * x->big.per > (double)disjoint);
    cJSON_AddStringToObject(lg, "windows_rule",
        "evenly spread starts over the held-out text (distinct offsets; they overlap when "
        "there are more than the disjoint ones); group g = windows g*per .. g*per+per-1, "
        "one stretch of the text; standard error = sd of the group means / sqrt(groups)");
    cJSON *ab = cJSON_AddObjectToObject(ec, "ablation");
    cJSON_AddNumberToObject(ab, "windows_requested", x->o.ablation_windows);
    cJSON_AddNumberToObject(ab, "windows", (double)x->abl.groups * x->abl.per);
    cJSON_AddNumberToObject(ab, "groups", x->abl.groups);
    cJSON_AddNumberToObject(ab, "windows_per_group", x->abl.per);
    cJSON_AddBoolToObject(ab, "windows_overlap", (double)x->abl.groups * x->abl.per > (double)disjoint);
    cJSON *ps = cJSON_AddObjectToObject(ec, "per_step");
    cJSON_AddNumberToObject(ps, "windows", x->E);
    cJSON_AddNumberToObject(ps, "se_groups", x->ps.groups);
    cJSON_AddNumberToObject(ps, "se_windows_per_group", x->ps.per);
    cJSON *wv = cJSON_AddObjectToObject(ec, "window");
    cJSON_AddNumberToObject(wv, "windows_requested", x->o.window_windows);
    cJSON_AddNumberToObject(wv, "windows", (double)x->win.groups * x->win.per);
    cJSON_AddNumberToObject(wv, "groups", x->win.groups);
    cJSON_AddStringToObject(wv, "series",
                            x->win.d ? "the window rule reads the band ICL score of the "
                                       "weights kept at every evaluation on these windows"
                                     : "--window-windows 0: the window rule reads the "
                                       "per-step curve");
    return cfg;
}

