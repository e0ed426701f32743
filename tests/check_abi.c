/* ABI freeze: the layout of every public struct and the value of every status code,
 * enumerator and flag, as released in libinduct.so.0 (LP64). A change here is an ABI
 * change: bump the soname and record it under "ABI breaks" in CHANGELOG.md
 * (docs/abi-policy.md). Generated once from the 0.1 headers; edit by hand only to
 * append new fields or values. The runtime test checks that the library reads a config
 * written byte by byte at the frozen offsets. */
#include <induct/induct.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "testutil.h"

#if defined(__LP64__)
_Static_assert(sizeof(induct_model_config) == 96, "induct_model_config size");
_Static_assert(offsetof(induct_model_config, size) == 0, "induct_model_config.size");
_Static_assert(offsetof(induct_model_config, n_layers) == 8, "induct_model_config.n_layers");
_Static_assert(offsetof(induct_model_config, d_model) == 12, "induct_model_config.d_model");
_Static_assert(offsetof(induct_model_config, n_heads) == 16, "induct_model_config.n_heads");
_Static_assert(offsetof(induct_model_config, d_head) == 20, "induct_model_config.d_head");
_Static_assert(offsetof(induct_model_config, d_mlp) == 24, "induct_model_config.d_mlp");
_Static_assert(offsetof(induct_model_config, n_ctx) == 28, "induct_model_config.n_ctx");
_Static_assert(offsetof(induct_model_config, d_vocab) == 32, "induct_model_config.d_vocab");
_Static_assert(offsetof(induct_model_config, positional) == 36, "induct_model_config.positional");
_Static_assert(offsetof(induct_model_config, layer_norm) == 40, "induct_model_config.layer_norm");
_Static_assert(offsetof(induct_model_config, smeared_keys) == 44, "induct_model_config.smeared_keys");
_Static_assert(offsetof(induct_model_config, n_threads) == 48, "induct_model_config.n_threads");
_Static_assert(offsetof(induct_model_config, init) == 52, "induct_model_config.init");
_Static_assert(offsetof(induct_model_config, smear_alpha_init) == 56, "induct_model_config.smear_alpha_init");
_Static_assert(offsetof(induct_model_config, init_std) == 64, "induct_model_config.init_std");
_Static_assert(offsetof(induct_model_config, seed) == 72, "induct_model_config.seed");
_Static_assert(offsetof(induct_model_config, max_bytes) == 80, "induct_model_config.max_bytes");
/* appended after 0.1.0 (a 0.1.0 caller passes size 88) */
_Static_assert(offsetof(induct_model_config, shortformer_layers) == 88, "induct_model_config.shortformer_layers");
_Static_assert(offsetof(induct_model_config, reserved0) == 92, "induct_model_config.reserved0");
_Static_assert(sizeof(induct_rrt_config) == 48, "induct_rrt_config size");
_Static_assert(offsetof(induct_rrt_config, size) == 0, "induct_rrt_config.size");
_Static_assert(offsetof(induct_rrt_config, d_vocab) == 8, "induct_rrt_config.d_vocab");
_Static_assert(offsetof(induct_rrt_config, n_repeats) == 12, "induct_rrt_config.n_repeats");
_Static_assert(offsetof(induct_rrt_config, min_block) == 16, "induct_rrt_config.min_block");
_Static_assert(offsetof(induct_rrt_config, max_block) == 20, "induct_rrt_config.max_block");
_Static_assert(offsetof(induct_rrt_config, token_lo) == 24, "induct_rrt_config.token_lo");
_Static_assert(offsetof(induct_rrt_config, token_hi) == 28, "induct_rrt_config.token_hi");
_Static_assert(offsetof(induct_rrt_config, bos) == 32, "induct_rrt_config.bos");
_Static_assert(offsetof(induct_rrt_config, distinct_block) == 36, "induct_rrt_config.distinct_block");
_Static_assert(offsetof(induct_rrt_config, seed) == 40, "induct_rrt_config.seed");
_Static_assert(sizeof(induct_kv_config) == 48, "induct_kv_config size");
_Static_assert(offsetof(induct_kv_config, size) == 0, "induct_kv_config.size");
_Static_assert(offsetof(induct_kv_config, d_vocab) == 8, "induct_kv_config.d_vocab");
_Static_assert(offsetof(induct_kv_config, token_lo) == 12, "induct_kv_config.token_lo");
_Static_assert(offsetof(induct_kv_config, token_hi) == 16, "induct_kv_config.token_hi");
_Static_assert(offsetof(induct_kv_config, pair_min) == 20, "induct_kv_config.pair_min");
_Static_assert(offsetof(induct_kv_config, pair_max) == 24, "induct_kv_config.pair_max");
_Static_assert(offsetof(induct_kv_config, unique_key) == 28, "induct_kv_config.unique_key");
_Static_assert(offsetof(induct_kv_config, all_positions) == 32, "induct_kv_config.all_positions");
_Static_assert(offsetof(induct_kv_config, seed) == 40, "induct_kv_config.seed");
_Static_assert(sizeof(induct_text_config) == 56, "induct_text_config size");
_Static_assert(offsetof(induct_text_config, size) == 0, "induct_text_config.size");
_Static_assert(offsetof(induct_text_config, bos) == 8, "induct_text_config.bos");
_Static_assert(offsetof(induct_text_config, separator) == 12, "induct_text_config.separator");
_Static_assert(offsetof(induct_text_config, split) == 16, "induct_text_config.split");
_Static_assert(offsetof(induct_text_config, n_eval_windows) == 20, "induct_text_config.n_eval_windows");
_Static_assert(offsetof(induct_text_config, val_fraction) == 24, "induct_text_config.val_fraction");
_Static_assert(offsetof(induct_text_config, block_tokens) == 32, "induct_text_config.block_tokens");
_Static_assert(offsetof(induct_text_config, seed) == 40, "induct_text_config.seed");
_Static_assert(offsetof(induct_text_config, max_bytes) == 48, "induct_text_config.max_bytes");
_Static_assert(sizeof(induct_token_file_config) == 64, "induct_token_file_config size");
_Static_assert(offsetof(induct_token_file_config, size) == 0, "induct_token_file_config.size");
_Static_assert(offsetof(induct_token_file_config, format) == 8, "induct_token_file_config.format");
_Static_assert(offsetof(induct_token_file_config, d_vocab) == 12, "induct_token_file_config.d_vocab");
_Static_assert(offsetof(induct_token_file_config, n_eval_windows) == 16, "induct_token_file_config.n_eval_windows");
_Static_assert(offsetof(induct_token_file_config, val_fraction) == 24, "induct_token_file_config.val_fraction");
_Static_assert(offsetof(induct_token_file_config, block_tokens) == 32, "induct_token_file_config.block_tokens");
_Static_assert(offsetof(induct_token_file_config, resident_limit) == 40, "induct_token_file_config.resident_limit");
_Static_assert(offsetof(induct_token_file_config, seed) == 48, "induct_token_file_config.seed");
_Static_assert(offsetof(induct_token_file_config, max_bytes) == 56, "induct_token_file_config.max_bytes");
_Static_assert(sizeof(induct_eval_config) == 64, "induct_eval_config size");
_Static_assert(offsetof(induct_eval_config, size) == 0, "induct_eval_config.size");
_Static_assert(offsetof(induct_eval_config, n_seq) == 8, "induct_eval_config.n_seq");
_Static_assert(offsetof(induct_eval_config, seq_len) == 12, "induct_eval_config.seq_len");
_Static_assert(offsetof(induct_eval_config, chunk) == 16, "induct_eval_config.chunk");
_Static_assert(offsetof(induct_eval_config, early) == 20, "induct_eval_config.early");
_Static_assert(offsetof(induct_eval_config, late) == 24, "induct_eval_config.late");
_Static_assert(offsetof(induct_eval_config, split) == 28, "induct_eval_config.split");
_Static_assert(offsetof(induct_eval_config, batch_index) == 32, "induct_eval_config.batch_index");
_Static_assert(offsetof(induct_eval_config, pos_seed) == 40, "induct_eval_config.pos_seed");
_Static_assert(offsetof(induct_eval_config, positions) == 48, "induct_eval_config.positions");
_Static_assert(offsetof(induct_eval_config, n_positions) == 56, "induct_eval_config.n_positions");
_Static_assert(offsetof(induct_eval_config, reserved0) == 60, "induct_eval_config.reserved0");
_Static_assert(sizeof(induct_probe_config) == 48, "induct_probe_config size");
_Static_assert(offsetof(induct_probe_config, size) == 0, "induct_probe_config.size");
_Static_assert(offsetof(induct_probe_config, n_seq) == 8, "induct_probe_config.n_seq");
_Static_assert(offsetof(induct_probe_config, block_len) == 12, "induct_probe_config.block_len");
_Static_assert(offsetof(induct_probe_config, n_repeats) == 16, "induct_probe_config.n_repeats");
_Static_assert(offsetof(induct_probe_config, bos) == 20, "induct_probe_config.bos");
_Static_assert(offsetof(induct_probe_config, token_lo) == 24, "induct_probe_config.token_lo");
_Static_assert(offsetof(induct_probe_config, token_hi) == 28, "induct_probe_config.token_hi");
_Static_assert(offsetof(induct_probe_config, copying_bos) == 32, "induct_probe_config.copying_bos");
_Static_assert(offsetof(induct_probe_config, reserved0) == 36, "induct_probe_config.reserved0");
_Static_assert(offsetof(induct_probe_config, seed) == 40, "induct_probe_config.seed");
_Static_assert(sizeof(induct_phase_config) == 40, "induct_phase_config size");
_Static_assert(offsetof(induct_phase_config, size) == 0, "induct_phase_config.size");
_Static_assert(offsetof(induct_phase_config, lo_frac) == 8, "induct_phase_config.lo_frac");
_Static_assert(offsetof(induct_phase_config, hi_frac) == 16, "induct_phase_config.hi_frac");
_Static_assert(offsetof(induct_phase_config, min_change) == 24, "induct_phase_config.min_change");
_Static_assert(offsetof(induct_phase_config, smooth) == 32, "induct_phase_config.smooth");
_Static_assert(offsetof(induct_phase_config, reserved0) == 36, "induct_phase_config.reserved0");
_Static_assert(sizeof(induct_classify_config) == 40, "induct_classify_config size");
_Static_assert(offsetof(induct_classify_config, size) == 0, "induct_classify_config.size");
_Static_assert(offsetof(induct_classify_config, previous_token) == 8, "induct_classify_config.previous_token");
_Static_assert(offsetof(induct_classify_config, induction) == 16, "induct_classify_config.induction");
_Static_assert(offsetof(induct_classify_config, duplicate) == 24, "induct_classify_config.duplicate");
_Static_assert(offsetof(induct_classify_config, copying) == 32, "induct_classify_config.copying");
_Static_assert(sizeof(induct_train_config) == 96, "induct_train_config size");
_Static_assert(offsetof(induct_train_config, size) == 0, "induct_train_config.size");
_Static_assert(offsetof(induct_train_config, steps) == 8, "induct_train_config.steps");
_Static_assert(offsetof(induct_train_config, batch) == 16, "induct_train_config.batch");
_Static_assert(offsetof(induct_train_config, seq_len) == 20, "induct_train_config.seq_len");
_Static_assert(offsetof(induct_train_config, eval_every) == 24, "induct_train_config.eval_every");
_Static_assert(offsetof(induct_train_config, eval_log2) == 32, "induct_train_config.eval_log2");
_Static_assert(offsetof(induct_train_config, eval_batch) == 36, "induct_train_config.eval_batch");
_Static_assert(offsetof(induct_train_config, metrics) == 40, "induct_train_config.metrics");
_Static_assert(offsetof(induct_train_config, metrics_append) == 44, "induct_train_config.metrics_append");
_Static_assert(offsetof(induct_train_config, metrics_path) == 48, "induct_train_config.metrics_path");
_Static_assert(offsetof(induct_train_config, snapshot_every) == 56, "induct_train_config.snapshot_every");
_Static_assert(offsetof(induct_train_config, snapshot_log2) == 64, "induct_train_config.snapshot_log2");
_Static_assert(offsetof(induct_train_config, snapshot_optimizer) == 68, "induct_train_config.snapshot_optimizer");
_Static_assert(offsetof(induct_train_config, snapshot_path) == 72, "induct_train_config.snapshot_path");
_Static_assert(offsetof(induct_train_config, target_loss) == 80, "induct_train_config.target_loss");
_Static_assert(offsetof(induct_train_config, probe) == 88, "induct_train_config.probe");
_Static_assert(sizeof(induct_progress) == 88, "induct_progress size");
_Static_assert(offsetof(induct_progress, size) == 0, "induct_progress.size");
_Static_assert(offsetof(induct_progress, events) == 8, "induct_progress.events");
_Static_assert(offsetof(induct_progress, reserved0) == 12, "induct_progress.reserved0");
_Static_assert(offsetof(induct_progress, step) == 16, "induct_progress.step");
_Static_assert(offsetof(induct_progress, steps) == 24, "induct_progress.steps");
_Static_assert(offsetof(induct_progress, loss) == 32, "induct_progress.loss");
_Static_assert(offsetof(induct_progress, lr) == 40, "induct_progress.lr");
_Static_assert(offsetof(induct_progress, tokens_per_second) == 48, "induct_progress.tokens_per_second");
_Static_assert(offsetof(induct_progress, elapsed_seconds) == 56, "induct_progress.elapsed_seconds");
_Static_assert(offsetof(induct_progress, eta_seconds) == 64, "induct_progress.eta_seconds");
_Static_assert(offsetof(induct_progress, eval_loss) == 72, "induct_progress.eval_loss");
_Static_assert(offsetof(induct_progress, snapshot_path) == 80, "induct_progress.snapshot_path");
_Static_assert(sizeof(induct_comm) == 48, "induct_comm size");
_Static_assert(offsetof(induct_comm, size) == 0, "induct_comm.size");
_Static_assert(offsetof(induct_comm, rank) == 8, "induct_comm.rank");
_Static_assert(offsetof(induct_comm, n_ranks) == 12, "induct_comm.n_ranks");
_Static_assert(offsetof(induct_comm, user) == 16, "induct_comm.user");
_Static_assert(offsetof(induct_comm, sendrecv) == 24, "induct_comm.sendrecv");
_Static_assert(offsetof(induct_comm, barrier) == 32, "induct_comm.barrier");
_Static_assert(offsetof(induct_comm, abort) == 40, "induct_comm.abort");
_Static_assert(sizeof(induct_generate_config) == 32, "induct_generate_config size");
_Static_assert(offsetof(induct_generate_config, size) == 0, "induct_generate_config.size");
_Static_assert(offsetof(induct_generate_config, max_new_tokens) == 8, "induct_generate_config.max_new_tokens");
_Static_assert(offsetof(induct_generate_config, reserved0) == 12, "induct_generate_config.reserved0");
_Static_assert(offsetof(induct_generate_config, temperature) == 16, "induct_generate_config.temperature");
_Static_assert(offsetof(induct_generate_config, seed) == 24, "induct_generate_config.seed");
_Static_assert(sizeof(induct_icl_groups_config) == 48, "induct_icl_groups_config size");
_Static_assert(offsetof(induct_icl_groups_config, size) == 0, "induct_icl_groups_config.size");
_Static_assert(offsetof(induct_icl_groups_config, n_groups) == 8, "induct_icl_groups_config.n_groups");
_Static_assert(offsetof(induct_icl_groups_config, per_group) == 12, "induct_icl_groups_config.per_group");
_Static_assert(offsetof(induct_icl_groups_config, seq_len) == 16, "induct_icl_groups_config.seq_len");
_Static_assert(offsetof(induct_icl_groups_config, chunk) == 20, "induct_icl_groups_config.chunk");
_Static_assert(offsetof(induct_icl_groups_config, early) == 24, "induct_icl_groups_config.early");
_Static_assert(offsetof(induct_icl_groups_config, late) == 28, "induct_icl_groups_config.late");
_Static_assert(offsetof(induct_icl_groups_config, band) == 32, "induct_icl_groups_config.band");
_Static_assert(offsetof(induct_icl_groups_config, split) == 36, "induct_icl_groups_config.split");
_Static_assert(offsetof(induct_icl_groups_config, curve_groups) == 40, "induct_icl_groups_config.curve_groups");
_Static_assert(offsetof(induct_icl_groups_config, reserved0) == 44, "induct_icl_groups_config.reserved0");
_Static_assert(sizeof(induct_icl_estimate) == 48, "induct_icl_estimate size");
_Static_assert(offsetof(induct_icl_estimate, size) == 0, "induct_icl_estimate.size");
_Static_assert(offsetof(induct_icl_estimate, icl) == 8, "induct_icl_estimate.icl");
_Static_assert(offsetof(induct_icl_estimate, icl_se) == 16, "induct_icl_estimate.icl_se");
_Static_assert(offsetof(induct_icl_estimate, icl_token) == 24, "induct_icl_estimate.icl_token");
_Static_assert(offsetof(induct_icl_estimate, icl_token_se) == 32, "induct_icl_estimate.icl_token_se");
_Static_assert(offsetof(induct_icl_estimate, n_groups) == 40, "induct_icl_estimate.n_groups");
_Static_assert(offsetof(induct_icl_estimate, per_group) == 44, "induct_icl_estimate.per_group");
_Static_assert(INDUCT_TEXT_BOS == 256, "INDUCT_TEXT_BOS");
_Static_assert(INDUCT_OK == 0, "INDUCT_OK");
_Static_assert(INDUCT_ERROR == -1, "INDUCT_ERROR");
_Static_assert(INDUCT_ENOMEM == -2, "INDUCT_ENOMEM");
_Static_assert(INDUCT_EINVAL == -3, "INDUCT_EINVAL");
_Static_assert(INDUCT_ERANGE == -4, "INDUCT_ERANGE");
_Static_assert(INDUCT_EBUFSIZE == -5, "INDUCT_EBUFSIZE");
_Static_assert(INDUCT_EIO == -6, "INDUCT_EIO");
_Static_assert(INDUCT_EFORMAT == -7, "INDUCT_EFORMAT");
_Static_assert(INDUCT_EABI == -8, "INDUCT_EABI");
_Static_assert(INDUCT_ESTATE == -9, "INDUCT_ESTATE");
_Static_assert(INDUCT_EINTERRUPTED == -10, "INDUCT_EINTERRUPTED");
_Static_assert(INDUCT_ENOTSUP == -11, "INDUCT_ENOTSUP");
_Static_assert(INDUCT_ENUMERIC == -12, "INDUCT_ENUMERIC");
_Static_assert(INDUCT_ELIMIT == -13, "INDUCT_ELIMIT");
_Static_assert(INDUCT_STATUS_MIN_ == -13, "INDUCT_STATUS_MIN_");
_Static_assert(INDUCT_OPT_LR == 1, "INDUCT_OPT_LR");
_Static_assert(INDUCT_OPT_BETA1 == 2, "INDUCT_OPT_BETA1");
_Static_assert(INDUCT_OPT_BETA2 == 3, "INDUCT_OPT_BETA2");
_Static_assert(INDUCT_OPT_EPS == 4, "INDUCT_OPT_EPS");
_Static_assert(INDUCT_OPT_WEIGHT_DECAY == 5, "INDUCT_OPT_WEIGHT_DECAY");
_Static_assert(INDUCT_OPT_GRAD_CLIP == 6, "INDUCT_OPT_GRAD_CLIP");
_Static_assert(INDUCT_OPT_WARMUP_STEPS == 7, "INDUCT_OPT_WARMUP_STEPS");
_Static_assert(INDUCT_OPT_SCHEDULE == 8, "INDUCT_OPT_SCHEDULE");
_Static_assert(INDUCT_OPT_TOTAL_STEPS == 9, "INDUCT_OPT_TOTAL_STEPS");
_Static_assert(INDUCT_OPT_MIN_LR_RATIO == 10, "INDUCT_OPT_MIN_LR_RATIO");
_Static_assert(INDUCT_OPT_MOMENTUM == 11, "INDUCT_OPT_MOMENTUM");
_Static_assert(INDUCT_OPT_STEP == 12, "INDUCT_OPT_STEP");
_Static_assert(INDUCT_OPT_GRAD_SHARDS == 13, "INDUCT_OPT_GRAD_SHARDS");
_Static_assert(INDUCT_FEATURE_OPENMP == 1u, "INDUCT_FEATURE_OPENMP");
_Static_assert(INDUCT_POS_STANDARD == 0u, "INDUCT_POS_STANDARD");
_Static_assert(INDUCT_POS_SHORTFORMER == 1u, "INDUCT_POS_SHORTFORMER");
_Static_assert(INDUCT_POS_NONE == 2u, "INDUCT_POS_NONE");
_Static_assert(INDUCT_INIT_GPT2 == 0u, "INDUCT_INIT_GPT2");
_Static_assert(INDUCT_INIT_TORCH == 1u, "INDUCT_INIT_TORCH");
_Static_assert(INDUCT_BUF_PARAM == 0u, "INDUCT_BUF_PARAM");
_Static_assert(INDUCT_BUF_GRAD == 1u, "INDUCT_BUF_GRAD");
_Static_assert(INDUCT_SPLIT_TRAIN == 0u, "INDUCT_SPLIT_TRAIN");
_Static_assert(INDUCT_SPLIT_EVAL == 1u, "INDUCT_SPLIT_EVAL");
_Static_assert(INDUCT_OPTIM_ADAMW == 0u, "INDUCT_OPTIM_ADAMW");
_Static_assert(INDUCT_OPTIM_SGD == 1u, "INDUCT_OPTIM_SGD");
_Static_assert(INDUCT_SPLIT_BY_POSITION == 0u, "INDUCT_SPLIT_BY_POSITION");
_Static_assert(INDUCT_SPLIT_BY_DOCUMENT == 1u, "INDUCT_SPLIT_BY_DOCUMENT");
_Static_assert(INDUCT_TOKFILE_U16 == 0u, "INDUCT_TOKFILE_U16");
_Static_assert(INDUCT_TOKFILE_U32 == 1u, "INDUCT_TOKFILE_U32");
_Static_assert(INDUCT_TOKFILE_LLMC == 2u, "INDUCT_TOKFILE_LLMC");
_Static_assert(INDUCT_ABLATE_NONE == 0u, "INDUCT_ABLATE_NONE");
_Static_assert(INDUCT_ABLATE_ZERO == 1u, "INDUCT_ABLATE_ZERO");
_Static_assert(INDUCT_ABLATE_MEAN == 2u, "INDUCT_ABLATE_MEAN");
_Static_assert(INDUCT_ABLATE_PRESERVE_PATTERNS == 256u, "INDUCT_ABLATE_PRESERVE_PATTERNS");
_Static_assert(INDUCT_MEAN_POOLED == 0u, "INDUCT_MEAN_POOLED");
_Static_assert(INDUCT_MEAN_PER_POSITION == 1u, "INDUCT_MEAN_PER_POSITION");
_Static_assert(INDUCT_COMPOSITION_Q == 0u, "INDUCT_COMPOSITION_Q");
_Static_assert(INDUCT_COMPOSITION_K == 1u, "INDUCT_COMPOSITION_K");
_Static_assert(INDUCT_COMPOSITION_V == 2u, "INDUCT_COMPOSITION_V");
_Static_assert(INDUCT_HEAD_OTHER == 0u, "INDUCT_HEAD_OTHER");
_Static_assert(INDUCT_HEAD_PREVIOUS_TOKEN == 1u, "INDUCT_HEAD_PREVIOUS_TOKEN");
_Static_assert(INDUCT_HEAD_INDUCTION == 2u, "INDUCT_HEAD_INDUCTION");
_Static_assert(INDUCT_HEAD_DUPLICATE == 3u, "INDUCT_HEAD_DUPLICATE");
_Static_assert(INDUCT_TRAIN_METRIC_LOSS == 1u, "INDUCT_TRAIN_METRIC_LOSS");
_Static_assert(INDUCT_TRAIN_METRIC_ICL_SCORE == 2u, "INDUCT_TRAIN_METRIC_ICL_SCORE");
_Static_assert(INDUCT_TRAIN_METRIC_LOSS_BY_POSITION == 4u, "INDUCT_TRAIN_METRIC_LOSS_BY_POSITION");
_Static_assert(INDUCT_TRAIN_METRIC_PREFIX_MATCHING == 8u, "INDUCT_TRAIN_METRIC_PREFIX_MATCHING");
_Static_assert(INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN == 16u, "INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN");
_Static_assert(INDUCT_TRAIN_METRIC_COPYING == 32u, "INDUCT_TRAIN_METRIC_COPYING");
_Static_assert(INDUCT_TRAIN_METRIC_KV_ACCURACY == 64u, "INDUCT_TRAIN_METRIC_KV_ACCURACY");
_Static_assert(INDUCT_TRAIN_METRIC_KV_ATTENTION == 128u, "INDUCT_TRAIN_METRIC_KV_ATTENTION");
_Static_assert(INDUCT_TRAIN_METRIC_INDUCTION_SCORE == 256u, "INDUCT_TRAIN_METRIC_INDUCTION_SCORE");
_Static_assert(INDUCT_TRAIN_METRIC_LOSS_VECTORS == 512u, "INDUCT_TRAIN_METRIC_LOSS_VECTORS");
_Static_assert(INDUCT_TRAIN_EVENT_STEP == 1u, "INDUCT_TRAIN_EVENT_STEP");
_Static_assert(INDUCT_TRAIN_EVENT_EVAL == 2u, "INDUCT_TRAIN_EVENT_EVAL");
_Static_assert(INDUCT_TRAIN_EVENT_SNAPSHOT == 4u, "INDUCT_TRAIN_EVENT_SNAPSHOT");
_Static_assert(INDUCT_TRAIN_EVENT_DONE == 8u, "INDUCT_TRAIN_EVENT_DONE");
_Static_assert(INDUCT_TRAIN_EVENT_TARGET == 16u, "INDUCT_TRAIN_EVENT_TARGET");
#endif

START_TEST(test_config_read_at_frozen_offsets) {
    unsigned char buf[sizeof(induct_model_config)];
    memset(buf, 0, sizeof buf);
    size_t size = sizeof buf;
    uint32_t u;
    double dv;
    uint64_t seed = 42;
    memcpy(buf + 0, &size, sizeof size);
    const struct { size_t off; uint32_t v; } f[] = {
        {offsetof(induct_model_config, n_layers), 3}, {offsetof(induct_model_config, d_model), 24},
        {offsetof(induct_model_config, n_heads), 3},  {offsetof(induct_model_config, n_ctx), 16},
        {offsetof(induct_model_config, d_vocab), 13}, {offsetof(induct_model_config, d_mlp), 8},
        {offsetof(induct_model_config, n_threads), 1},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        u = f[i].v;
        memcpy(buf + f[i].off, &u, sizeof u);
    }
    dv = 0.02;
    memcpy(buf + offsetof(induct_model_config, init_std), &dv, sizeof dv);
    memcpy(buf + offsetof(induct_model_config, seed), &seed, sizeof seed);
    induct_model *m;
    ck_ok(induct_model_new(&m, (const induct_model_config *)(const void *)buf));
    induct_model_config back;
    back.size = sizeof back;
    ck_ok(induct_model_get_config(m, &back));
    ck_assert_uint_eq(back.n_layers, 3);
    ck_assert_uint_eq(back.d_model, 24);
    ck_assert_uint_eq(back.n_heads, 3);
    ck_assert_uint_eq(back.d_head, 8);
    ck_assert_uint_eq(back.n_ctx, 16);
    ck_assert_uint_eq(back.d_vocab, 13);
    ck_assert_uint_eq(back.d_mlp, 8);
    ck_assert(back.seed == 42);
    /* 13 x 24 embedding: the parameter count follows the frozen fields */
    uint32_t shape[4];
    const char *name;
    ck_ok(induct_model_tensor_info(m, 0, &name, shape, NULL, NULL));
    ck_assert_str_eq(name, "embed.W_E");
    ck_assert_uint_eq(shape[0], 13);
    ck_assert_uint_eq(shape[1], 24);
    induct_model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("layout");
    tcase_add_test(tc, test_config_read_at_frozen_offsets);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
