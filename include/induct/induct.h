/*
 * libinduct — train small transformers and measure how they learn in context.
 * SPDX-License-Identifier: MIT
 */
/**
 * @file induct.h
 * @brief The one public header of libinduct.
 *
 * Conventions that hold for every function below (each is a testable claim):
 * - Every function that can fail returns `int`: ::INDUCT_OK (0) or a negative
 *   ::induct_status. The detail of the last failure is kept per thread and read
 *   with induct_last_error_message().
 * - Handles (::induct_model, ::induct_optimizer, ::induct_dataset) are opaque and
 *   created only by the library. `induct_X_new(&out, ...)` sets `*out` to NULL on
 *   failure. Every `induct_X_free(NULL)` is a harmless no-op.
 * - Outputs go into caller buffers `(out, out_cap, out_len)` whose capacity is
 *   counted in elements. `out == NULL` with `out_cap == 0` asks only for the
 *   length; a buffer that is too small returns ::INDUCT_EBUFSIZE and still sets
 *   `*out_len` to the length needed. Layouts are row-major and stated per function.
 * - Losses are in nats (natural logarithm).
 * - Threading: one thread per handle at a time; different handles may be used
 *   concurrently; a dataset is immutable after creation and may be read by any
 *   number of threads at once. There is no global state and no init call.
 *   See docs/threading.md.
 * - Names follow TransformerLens: `d_model`, `n_heads`, `d_head`, `d_mlp`,
 *   `n_ctx`, `d_vocab`, `W_Q`…, row-vector convention `x @ W`.
 *
 * References: "ICL paper" is Olsson et al. 2022, *In-context Learning and
 * Induction Heads*; "Framework" is Elhage et al. 2021, *A Mathematical Framework
 * for Transformer Circuits*.
 */
#ifndef INDUCT_INDUCT_H
#define INDUCT_INDUCT_H

#include <stddef.h>
#include <stdint.h>

#include "induct_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @cond INTERNAL */
#if defined(_WIN32)
#  if defined(INDUCT_BUILDING)
#    define INDUCT_API __declspec(dllexport)
#  else
#    define INDUCT_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define INDUCT_API __attribute__((visibility("default")))
#else
#  define INDUCT_API
#endif
/** @endcond */

/* ------------------------------------------------------------------------ */
/** @defgroup version Version and build features
 *  @{ */

/** @brief The library's version as `M*10000 + m*100 + p` (the loaded library, not the header).
 *  @since 0.1 Thread-safe. */
INDUCT_API unsigned induct_version_number(void);
/** @brief The library's version string, e.g. "0.1.0". Static storage, never NULL.
 *  @since 0.1 Thread-safe. */
INDUCT_API const char *induct_version_string(void);
/** @brief The ABI version: the `N` of the soname `libinduct.so.N`. Bindings refuse a mismatch.
 *  @since 0.1 Thread-safe. */
INDUCT_API unsigned induct_abi_version(void);

/** Feature bit of induct_build_features(): built with OpenMP. @since 0.1 */
#define INDUCT_FEATURE_OPENMP 0x1u
/** @brief Bit set of `INDUCT_FEATURE_*` the loaded library was built with.
 *  @since 0.1 Thread-safe. */
INDUCT_API unsigned induct_build_features(void);
/** @} */

/* ------------------------------------------------------------------------ */
/** @defgroup errors Status codes and per-thread errors
 *  @{ */

/**
 * @brief The status table: `X(NAME, value, message)`. Values are frozen and never reused.
 * @since 0.1
 */
#define INDUCT_STATUS_MAP(X)                                                        \
    X(OK, 0, "success")                                                             \
    X(ERROR, -1, "internal error")                                                  \
    X(ENOMEM, -2, "out of memory")                                                  \
    X(EINVAL, -3, "invalid argument or configuration")                              \
    X(ERANGE, -4, "index, token id or size out of range")                           \
    X(EBUFSIZE, -5, "output buffer too small")                                      \
    X(EIO, -6, "input/output error")                                                \
    X(EFORMAT, -7, "malformed or unsupported file")                                 \
    X(EABI, -8, "struct size or ABI version mismatch")                              \
    X(ESTATE, -9, "call out of order")                                              \
    X(EINTERRUPTED, -10, "interrupted")                                             \
    X(ENOTSUP, -11, "not supported")                                                \
    X(ENUMERIC, -12, "non-finite loss or gradient")                                 \
    X(ELIMIT, -13, "resource limit exceeded")

/** @brief Status codes returned by every fallible function. @since 0.1 */
typedef enum induct_status {
/** @cond INTERNAL */
#define INDUCT_STATUS_ENUM_(name, value, msg) INDUCT_##name = (value),
    INDUCT_STATUS_MAP(INDUCT_STATUS_ENUM_)
#undef INDUCT_STATUS_ENUM_
/** @endcond */
    INDUCT_STATUS_MIN_ = -13 /**< Smallest status value; not a status. */
} induct_status;

/** @brief Symbolic name of a status ("INDUCT_EINVAL"); "INDUCT_UNKNOWN" for other values.
 *  Static storage. @since 0.1 Thread-safe. */
INDUCT_API const char *induct_status_name(int status);
/** @brief Fixed English message of a status. Static storage. @since 0.1 Thread-safe. */
INDUCT_API const char *induct_status_str(int status);
/**
 * @brief Detailed message of the last failure on the calling thread.
 * Never NULL ("" when there was none). Owned by the library; valid until the next
 * failing call on the same thread. Meaningful only right after a failure.
 * @since 0.1 Thread-safe (per-thread storage).
 */
INDUCT_API const char *induct_last_error_message(void);
/** @brief Status of the last failure on the calling thread (::INDUCT_OK if none).
 *  @since 0.1 Thread-safe. */
INDUCT_API int induct_last_error_code(void);
/** @brief Forget the calling thread's last error. @since 0.1 Thread-safe. */
INDUCT_API void induct_error_clear(void);
/** @} */

/* ------------------------------------------------------------------------ */
/** @defgroup model Model
 *  Decoder-only transformer, fp32, causal softmax attention.
 *  @{ */

/** @brief Opaque model handle: parameters, gradients and a workspace. @since 0.1 */
typedef struct induct_model induct_model;

/** Positional variant: learned `W_pos` added to the residual stream. @since 0.1 */
#define INDUCT_POS_STANDARD 0u
/** Positional variant: `W_pos` added only to the query and key inputs of every
 *  layer (ICL paper, "Model Details": small models carry no positional
 *  information in the residual stream). @since 0.1 */
#define INDUCT_POS_SHORTFORMER 1u
/** Positional variant: no positional parameters at all. @since 0.1 */
#define INDUCT_POS_NONE 2u

/** Initialisation: normal(0, init_std) for every matrix and embedding, with
 *  `W_O` and `W_out` scaled by 1/sqrt(2 n_layers) (GPT-2); biases 0. @since 0.1 */
#define INDUCT_INIT_GPT2 0u
/** Initialisation: PyTorch module defaults — `W_E`, `W_pos` ~ N(0, 1); every
 *  linear weight and bias ~ U(−1/√fan_in, 1/√fan_in); `init_std` is ignored.
 *  This is what the seed's PyTorch experiment uses. @since 0.1 */
#define INDUCT_INIT_TORCH 1u

/**
 * @brief Model architecture. Size-prefixed: set `size = sizeof(induct_model_config)`
 * (induct_model_config_init() does). Fields are only ever appended.
 * @since 0.1
 */
typedef struct induct_model_config {
    size_t size;            /**< `sizeof(induct_model_config)` as the caller compiled it. */
    uint32_t n_layers;      /**< Number of blocks, ≥ 1. Default 2. */
    uint32_t d_model;       /**< Residual stream width. Default 64. */
    uint32_t n_heads;       /**< Attention heads per layer. Default 4. */
    uint32_t d_head;        /**< Width of each head; 0 means d_model / n_heads (must divide). Default 0. */
    uint32_t d_mlp;         /**< MLP hidden width; 0 means attention-only. Default 0. */
    uint32_t n_ctx;         /**< Longest sequence the model accepts. Default 64. */
    uint32_t d_vocab;       /**< Vocabulary size. Default 64. */
    uint32_t positional;    /**< `INDUCT_POS_*`. Default ::INDUCT_POS_STANDARD. */
    uint32_t layer_norm;    /**< 1: pre-LN in every block plus a final LN (eps 1e-5); 0: none. Default 0. */
    uint32_t smeared_keys;  /**< 1: per-head learnable smeared keys (ICL paper, Argument 2). Default 0. */
    uint32_t n_threads;     /**< OpenMP threads for this model's work; 0 means 1. Default 1. */
    uint32_t init;          /**< `INDUCT_INIT_*`. Default ::INDUCT_INIT_GPT2. */
    double smear_alpha_init;/**< Initial α of every head (σ(α) weights the current key). Default 0.0. */
    double init_std;        /**< Standard deviation for ::INDUCT_INIT_GPT2. Default 0.02. */
    uint64_t seed;          /**< Seed of the initialisation. Default 0. */
} induct_model_config;

/**
 * @brief Write the defaults into a config of `size` bytes.
 * @param cfg  The struct to fill (not NULL).
 * @param size `sizeof(induct_model_config)` as the caller compiled it.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL if cfg is NULL; ::INDUCT_EABI if size is
 *         smaller than the 0.1 struct or larger than 4096.
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_model_config_init(induct_model_config *cfg, size_t size);

/**
 * @brief Create a model with freshly initialised weights.
 *
 * Initialisation (documented choice): see ::INDUCT_INIT_GPT2 and ::INDUCT_INIT_TORCH;
 * LayerNorm gains 1, LayerNorm biases 0, smeared-key α = `smear_alpha_init`.
 * The weights depend only on the config (not on `n_threads`).
 * No activation memory is allocated until a forward pass needs it (it grows with
 * the largest `batch × seq_len` used, not with `n_ctx`).
 *
 * @param[out] out The new model, owned by the caller, released with induct_model_free().
 *                 NULL on failure.
 * @param cfg Architecture; copied.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL for a NULL argument, a zero size, `d_head = 0`
 *         with `n_heads` not dividing `d_model`, an unknown positional or init value,
 *         a flag other than 0/1, a non-finite or negative `init_std`;
 *         ::INDUCT_EABI for a bad `size` or non-zero unknown tail;
 *         ::INDUCT_ELIMIT if the parameter count or any buffer overflows `size_t`
 *         or exceeds 2^31 floats; ::INDUCT_ENOMEM.
 * @since 0.1
 */
INDUCT_API int induct_model_new(induct_model **out, const induct_model_config *cfg);

/** @brief Release a model. NULL is a no-op. An optimizer keeps its own reference:
 *  the memory goes when the last user is freed. @since 0.1 */
INDUCT_API void induct_model_free(induct_model *model);

/**
 * @brief Deep copy of a model's config and weights (not gradients, not ablations).
 * @param[out] out New model owned by the caller; NULL on failure.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_ENOMEM.
 * @since 0.1
 */
INDUCT_API int induct_model_clone(induct_model **out, const induct_model *model);

/**
 * @brief Copy the model's config into `cfg_out`, whose `size` field the caller sets.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (bad `size`).
 * @since 0.1
 */
INDUCT_API int induct_model_get_config(const induct_model *model, induct_model_config *cfg_out);

/**
 * @brief Set the number of OpenMP threads used by this model's work (0 means 1).
 * Results are bit-identical for a fixed thread count; see docs/threading.md for
 * whether they match across thread counts.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, or more than 1024).
 * @since 0.1
 */
INDUCT_API int induct_model_set_threads(induct_model *model, uint32_t n_threads);

/** @brief Total number of scalar parameters (all tensors). 0 for NULL. @since 0.1 */
INDUCT_API size_t induct_model_n_params(const induct_model *model);

/** @brief Number of named parameter tensors. 0 for NULL. @since 0.1 */
INDUCT_API size_t induct_model_n_tensors(const induct_model *model);

/**
 * @brief Describe parameter tensor `index` (0 … n_tensors−1), in storage order.
 *
 * Names and shapes are TransformerLens': `embed.W_E [d_vocab, d_model]`,
 * `pos_embed.W_pos [n_ctx, d_model]` (absent for ::INDUCT_POS_NONE),
 * `blocks.{l}.ln1.w/b [d_model]` (LayerNorm only),
 * `blocks.{l}.attn.W_Q/W_K/W_V [n_heads, d_model, d_head]`, `W_O [n_heads, d_head, d_model]`,
 * `b_Q/b_K/b_V [n_heads, d_head]`, `b_O [d_model]`,
 * `blocks.{l}.attn.smear_alpha [n_heads]` (smeared keys only; not a TL name),
 * `blocks.{l}.ln2.w/b`, `blocks.{l}.mlp.W_in [d_model, d_mlp]`, `b_in [d_mlp]`,
 * `W_out [d_mlp, d_model]`, `b_out [d_model]` (MLP only), `ln_final.w/b`,
 * `unembed.W_U [d_model, d_vocab]`, `unembed.b_U [d_vocab]`.
 *
 * @param[out] name_out  Borrowed name, valid while the model lives. May be NULL.
 * @param[out] shape_out Up to 4 dimensions. May be NULL.
 * @param[out] ndim_out  Number of dimensions (1–3). May be NULL.
 * @param[out] numel_out Number of elements. May be NULL.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model); ::INDUCT_ERANGE (index).
 * @since 0.1
 */
INDUCT_API int induct_model_tensor_info(const induct_model *model, size_t index,
                                        const char **name_out, uint32_t shape_out[4],
                                        uint32_t *ndim_out, size_t *numel_out);

/** Which buffer induct_model_get_tensor() reads: the weights. @since 0.1 */
#define INDUCT_BUF_PARAM 0u
/** Which buffer induct_model_get_tensor() reads: the gradients of the last backward. @since 0.1 */
#define INDUCT_BUF_GRAD 1u

/**
 * @brief Copy a named tensor (weights or gradients) out, row-major in its TL shape.
 * @param which ::INDUCT_BUF_PARAM or ::INDUCT_BUF_GRAD.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, bad `which`); ::INDUCT_ERANGE (unknown
 *         name); ::INDUCT_EBUFSIZE (`*out_len` set to the element count).
 * @since 0.1
 */
INDUCT_API int induct_model_get_tensor(const induct_model *model, const char *name, uint32_t which,
                                       float *out, size_t out_cap, size_t *out_len);

/**
 * @brief Overwrite a named weight tensor from `len` floats (row-major, TL shape).
 * Non-finite values are refused. Nothing is modified on failure.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, non-finite value); ::INDUCT_ERANGE
 *         (unknown name, or `len` differs from the tensor's element count).
 * @since 0.1
 */
INDUCT_API int induct_model_set_tensor(induct_model *model, const char *name, const float *in,
                                       size_t len);

/**
 * @brief Forward pass on a batch of token ids.
 *
 * Per-token loss (DEFINITIONS): `loss[b][p] = −ln P(tokens[b][p+1] | tokens[b][0..p])`
 * in nats for p in 0 … seq_len−2. Cross-entropy via log-sum-exp.
 * Analysis ablations in force (see analysis functions) apply.
 *
 * @param tokens   `[batch][seq_len]` int32 ids in `[0, d_vocab)`.
 * @param logits_out `[batch][seq_len][d_vocab]` or NULL (then `logits_cap` must be 0).
 * @param losses_out `[batch][seq_len−1]` or NULL (then `losses_cap` must be 0).
 * @param[out] mean_loss_out Mean of all per-token losses, or NULL.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model/tokens, batch 0, seq_len < 2);
 *         ::INDUCT_ERANGE (seq_len > n_ctx, token id outside `[0, d_vocab)`, the id and
 *         position are named in the message); ::INDUCT_EBUFSIZE (a capacity smaller than
 *         needed); ::INDUCT_ENOMEM (workspace); ::INDUCT_ENUMERIC (non-finite loss).
 * @since 0.1 Uses the model's workspace: one thread per model.
 */
INDUCT_API int induct_model_forward(induct_model *model, const int32_t *tokens, uint32_t batch,
                                    uint32_t seq_len, float *logits_out, size_t logits_cap,
                                    float *losses_out, size_t losses_cap, double *mean_loss_out);

/**
 * @brief Forward and backward: gradients of the mean per-token loss into the model's
 * gradient buffer (overwritten, not accumulated).
 * @return as induct_model_forward(); on ::INDUCT_ENUMERIC the gradients are
 *         unspecified but the weights are untouched.
 * @since 0.1
 */
INDUCT_API int induct_model_backward(induct_model *model, const int32_t *tokens, uint32_t batch,
                                     uint32_t seq_len, double *mean_loss_out);

/**
 * @brief Attention patterns of one sequence, `[n_layers][n_heads][seq_len][seq_len]`,
 * row = query p, column = key k; entries with k > p are exactly 0; rows sum to 1.
 * @param tokens `[seq_len]` ids.
 * @return as induct_model_forward() for the input; ::INDUCT_EBUFSIZE.
 * @since 0.1
 */
INDUCT_API int induct_model_attention(induct_model *model, const int32_t *tokens, uint32_t seq_len,
                                      float *out, size_t out_cap, size_t *out_len);

/**
 * @brief Interrupt a long call on this model (training, evaluation, analysis) from any
 * thread. The call returns ::INDUCT_EINTERRUPTED at its next check and leaves the model
 * consistent. The flag is cleared when such a call starts.
 * @since 0.1 Safe from any thread (atomic flag).
 */
INDUCT_API void induct_model_interrupt(induct_model *model);
/** @} */

/* ------------------------------------------------------------------------ */
/** @defgroup dataset Datasets
 *  Immutable sources of token batches. Batch `index` of a split is a pure
 *  function of (dataset, split, index, batch, seq_len): no hidden cursor, so a
 *  run resumes from its step counter alone.
 *  @{ */

/** @brief Opaque dataset handle. Immutable; may be shared between threads. @since 0.1 */
typedef struct induct_dataset induct_dataset;

/** Split: training batches. @since 0.1 */
#define INDUCT_SPLIT_TRAIN 0u
/** Split: evaluation batches (a separate random stream or held-out data). @since 0.1 */
#define INDUCT_SPLIT_EVAL 1u

/**
 * @brief Repeated-random-token generator (seed 003, "직접 재현해 보기"; DEFINITIONS "RRT").
 *
 * Each sequence of length T is: [BOS if `bos >= 0`], then a block of L tokens, then
 * `n_repeats − 1` copies of the same block, then filler to the end. L is drawn
 * uniformly from `[min_block, max_block]` per sequence (`max_block = 0` means
 * ⌊(T − has_bos) / n_repeats⌋). Block and filler tokens are uniform in
 * `[token_lo, token_hi)`; with `distinct_block = 1` the block is drawn without
 * replacement. The seed's experiment is: no BOS, n_repeats 2, min_block 8,
 * max_block T/2, token range [0, 64), `distinct_block = 0`, and the filler is drawn
 * for the whole row first (the copy overwrites it).
 * @since 0.1
 */
typedef struct induct_rrt_config {
    size_t size;            /**< `sizeof(induct_rrt_config)`. */
    uint32_t d_vocab;       /**< Vocabulary of the model it feeds. Default 64. */
    uint32_t n_repeats;     /**< Copies of the block, ≥ 2. Default 2. */
    uint32_t min_block;     /**< Shortest block, ≥ 1. Default 8. */
    uint32_t max_block;     /**< Longest block; 0 = as long as fits. Default 0. */
    uint32_t token_lo;      /**< First token id of the range. Default 0. */
    uint32_t token_hi;      /**< One past the last id; 0 = d_vocab. Default 0. */
    int32_t bos;            /**< BOS id put at position 0, or −1 for none. Must lie outside the range. Default −1. */
    uint32_t distinct_block;/**< 1: block tokens without replacement. Default 0 (the seed). */
    uint64_t seed;          /**< Seed of the stream. Default 0. */
} induct_rrt_config;

/** @brief Write the defaults into an RRT config of `size` bytes.
 *  @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (size). @since 0.1 */
INDUCT_API int induct_rrt_config_init(induct_rrt_config *cfg, size_t size);

/**
 * @brief Create a repeated-random-token dataset.
 * @param[out] out Owned by the caller; NULL on failure.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, d_vocab 0, n_repeats < 2, min_block 0,
 *         max_block < min_block, empty or out-of-vocabulary range, BOS inside the range
 *         or ≥ d_vocab, distinct_block with a range shorter than max_block);
 *         ::INDUCT_EABI; ::INDUCT_ENOMEM.
 * @since 0.1
 */
INDUCT_API int induct_dataset_new_rrt(induct_dataset **out, const induct_rrt_config *cfg);

/**
 * @brief Create a dataset of random windows over a caller's token array (copied).
 * Window starts are uniform in `{0 … n − T − 1}` (DEFINITIONS, "Token files": the
 * window plus one further token fit in the array, so `n ≥ T + 1` is required). The
 * train split and the eval split are separate random streams over the same array.
 * @param tokens `n` ids in `[0, d_vocab)`.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, n 0, d_vocab 0); ::INDUCT_ERANGE (an id
 *         outside the vocabulary; its index is named); ::INDUCT_ENOMEM.
 * @since 0.1
 */
INDUCT_API int induct_dataset_new_tokens(induct_dataset **out, const int32_t *tokens, size_t n,
                                         uint32_t d_vocab, uint64_t seed);

/** @brief Release a dataset. NULL is a no-op. @since 0.1 */
INDUCT_API void induct_dataset_free(induct_dataset *dataset);

/** @brief Vocabulary size the dataset's ids live in. 0 for NULL. @since 0.1 */
INDUCT_API uint32_t induct_dataset_d_vocab(const induct_dataset *dataset);

/**
 * @brief Write batch number `index` of `split`: `tokens_out [batch][seq_len]`.
 * @param meta_out `[batch]` per-sequence information or NULL: for RRT the block length
 *                 L; for token windows the window's start offset (truncated to int32).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, batch 0, seq_len < 2, unknown split);
 *         ::INDUCT_ERANGE (seq_len too short for the generator, or longer than the
 *         token array allows); ::INDUCT_EBUFSIZE (capacity below batch·seq_len or batch).
 * @since 0.1 Thread-safe: the dataset is only read.
 */
INDUCT_API int induct_dataset_batch(const induct_dataset *dataset, uint32_t split, uint64_t index,
                                    uint32_t batch, uint32_t seq_len, int32_t *tokens_out,
                                    size_t tokens_cap, int32_t *meta_out, size_t meta_cap);
/** @} */

/* ------------------------------------------------------------------------ */
/** @defgroup optim Optimizer and training step
 *  @{ */

/** @brief Opaque optimizer handle; holds a reference to its model. @since 0.1 */
typedef struct induct_optimizer induct_optimizer;

/** Optimizer kind: AdamW (Loshchilov & Hutter), decoupled weight decay. @since 0.1 */
#define INDUCT_OPTIM_ADAMW 0u
/** Optimizer kind: SGD with optional momentum. @since 0.1 */
#define INDUCT_OPTIM_SGD 1u

/** @brief Runtime optimizer parameters (zstd-style setters). Values are frozen. @since 0.1 */
typedef enum induct_opt_param {
    INDUCT_OPT_LR = 1,            /**< Peak learning rate, [0, 10]. Default 1e-3. */
    INDUCT_OPT_BETA1 = 2,         /**< AdamW β1, [0, 1). Default 0.9. */
    INDUCT_OPT_BETA2 = 3,         /**< AdamW β2, [0, 1). Default 0.999. */
    INDUCT_OPT_EPS = 4,           /**< AdamW ε, [0, 1]. Default 1e-8. */
    INDUCT_OPT_WEIGHT_DECAY = 5,  /**< Decoupled decay, [0, 10]; applied only to tensors with ≥ 2 dims. Default 0.01. */
    INDUCT_OPT_GRAD_CLIP = 6,     /**< Global-norm clip; 0 = off, [0, 1e9]. Default 0. */
    INDUCT_OPT_WARMUP_STEPS = 7,  /**< Linear warmup steps, [0, 1e12]; step s (0-based) uses lr·(s+1)/warmup. Default 0. */
    INDUCT_OPT_SCHEDULE = 8,      /**< 0 constant after warmup, 1 cosine decay to min_lr_ratio·lr at total_steps. Default 0. */
    INDUCT_OPT_TOTAL_STEPS = 9,   /**< Steps of the cosine schedule, [0, 1e12]. Default 0. */
    INDUCT_OPT_MIN_LR_RATIO = 10, /**< Floor of the cosine schedule, [0, 1]. Default 0. */
    INDUCT_OPT_MOMENTUM = 11,     /**< SGD momentum, [0, 1). Default 0. */
    INDUCT_OPT_STEP = 12          /**< Steps taken so far (read; writable to resume), [0, 2^53]. */
} induct_opt_param;

/**
 * @brief Create an optimizer for `model` (it takes a reference to the model).
 * @param kind ::INDUCT_OPTIM_ADAMW or ::INDUCT_OPTIM_SGD.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, unknown kind); ::INDUCT_ENOMEM.
 * @since 0.1
 */
INDUCT_API int induct_optimizer_new(induct_optimizer **out, induct_model *model, uint32_t kind);
/** @brief Release an optimizer (and its reference to the model). NULL is a no-op. @since 0.1 */
INDUCT_API void induct_optimizer_free(induct_optimizer *opt);

/** @brief Set a runtime parameter. @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL,
 *  non-finite); ::INDUCT_ENOTSUP (unknown parameter); ::INDUCT_ERANGE (outside bounds).
 *  @since 0.1 */
INDUCT_API int induct_optimizer_set(induct_optimizer *opt, induct_opt_param param, double value);
/** @brief Read a runtime parameter. @return ::INDUCT_OK; ::INDUCT_EINVAL; ::INDUCT_ENOTSUP.
 *  @since 0.1 */
INDUCT_API int induct_optimizer_get(const induct_optimizer *opt, induct_opt_param param,
                                    double *value_out);
/** @brief Bounds of a parameter. @return ::INDUCT_OK; ::INDUCT_EINVAL; ::INDUCT_ENOTSUP.
 *  @since 0.1 Thread-safe. */
INDUCT_API int induct_opt_param_bounds(induct_opt_param param, double *lo_out, double *hi_out);

/** @brief Learning rate the next step will use (after warmup and schedule).
 *  @return ::INDUCT_OK; ::INDUCT_EINVAL. @since 0.1 */
INDUCT_API int induct_optimizer_current_lr(const induct_optimizer *opt, double *lr_out);

/**
 * @brief Apply one update from the model's current gradients (clip, then AdamW or SGD)
 * and advance the step counter.
 * @param[out] grad_norm_out Global L2 norm of the gradients before clipping, or NULL.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL; ::INDUCT_ENUMERIC (a NaN/Inf gradient: nothing
 *         is changed, the step counter included).
 * @since 0.1
 */
INDUCT_API int induct_optimizer_step(induct_optimizer *opt, double *grad_norm_out);

/**
 * @brief One training step: batch number `step` (the optimizer's step counter) of the
 * dataset's train split, forward, backward, optimizer update.
 * @param[out] loss_out Mean per-token loss of the batch before the update (nats), or NULL.
 * @return the errors of induct_dataset_batch(), induct_model_backward() and
 *         induct_optimizer_step(); ::INDUCT_EINVAL if the dataset's vocabulary
 *         exceeds the model's. On any error the weights are unchanged.
 * @since 0.1 No allocation after the first step with a given shape.
 */
INDUCT_API int induct_train_step(induct_optimizer *opt, const induct_dataset *dataset,
                                 uint32_t batch, uint32_t seq_len, double *loss_out);

/** @brief As induct_train_step() on caller tokens `[batch][seq_len]`. @since 0.1 */
INDUCT_API int induct_train_step_tokens(induct_optimizer *opt, const int32_t *tokens,
                                        uint32_t batch, uint32_t seq_len, double *loss_out);
/** @} */

/* ------------------------------------------------------------------------ */
/** @defgroup analysis Attention read-outs
 *  @{ */

/**
 * @brief Induction score per head on repeated random tokens, `[n_layers][n_heads]`.
 *
 * For the sequences of batch 0 of the dataset's eval split (which must be an RRT
 * dataset with 2 or more repeats and no BOS, like the seed's): the mean, over every
 * query t in `[L+1, 2L)` of every sequence, of the attention from t to `t − L + 1`
 * (the token after the first occurrence of t's token). This is seed 003's
 * `induction_score`; with 2 repeats it equals the ICL paper's prefix-matching score
 * restricted to the second copy. Range [0, 1].
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, not an RRT dataset, n_seq 0);
 *         errors of induct_model_forward(); ::INDUCT_EBUFSIZE; ::INDUCT_EINTERRUPTED.
 * @since 0.1
 */
INDUCT_API int induct_analysis_induction_score(induct_model *model, const induct_dataset *dataset,
                                               uint32_t n_seq, uint32_t seq_len, float *out,
                                               size_t out_cap, size_t *out_len);

/**
 * @brief Previous-token score per head, `[n_layers][n_heads]` (ICL paper, Appendix):
 * `mean_{i=1..T−1} A[i, i−1]`, averaged over the `n_seq` sequences of batch 0 of the
 * dataset's eval split. Range [0, 1].
 * @return as induct_analysis_induction_score() (any dataset kind).
 * @since 0.1
 */
INDUCT_API int induct_analysis_previous_token_score(induct_model *model,
                                                    const induct_dataset *dataset, uint32_t n_seq,
                                                    uint32_t seq_len, float *out, size_t out_cap,
                                                    size_t *out_len);
/** @} */

/* ---- datasets: KV retrieval, text, token files (issue 3) ---------------- */
/** @defgroup datasets_ext Datasets: key–value retrieval, text, token files
 *  The three kinds of input of issue 3, built on ::induct_dataset and
 *  induct_dataset_batch() (batch `index` of a split stays a pure function of the
 *  dataset and the call's arguments). Definitions, split rules and the ceiling
 *  derivation are in docs/datasets.md.
 *  @{ */

/**
 * @brief Key–value retrieval generator (seed 002, "문맥 내 학습과 유도 헤드").
 *
 * A row of `seq_len` tokens is a context of `C = seq_len − 1` tokens followed by
 * the answer token:
 * - the key position `p` is uniform in `[pair_min, pair_max]` (0-based, in the
 *   context); the key `k` sits at `p` and again at `C − 1` (the query, the last
 *   context position); the value `v` sits at `p + 1`; the answer token at
 *   position `C = seq_len − 1` is `v`;
 * - `k`, `v` and every other context token ("filler") are drawn independently and
 *   uniformly from `[token_lo, token_hi)`, so filler and value may equal the key
 *   (this makes the task ambiguous: see induct_dataset_kv_ceiling());
 *   with `unique_key = 1` the value and the filler are drawn uniformly from the
 *   range without `k` instead, and the ceiling is exactly 1;
 * - draw order per row (for reproducibility): p, then k, then v, then the filler
 *   of positions 0 … C−2 other than p and p + 1 in increasing order; a draw
 *   "without k" takes u uniform in `[0, R−1)` and uses id `token_lo + u`, plus one
 *   if that is ≥ k.
 *
 * The answer is scored at position `C − 1 = seq_len − 2` (the query), whose
 * next-token prediction is the answer token. induct_train_step() on a KV dataset
 * minimises the loss at that position only (the mean over the batch of
 * `−ln P(answer | context)`, also what it reports), unless `all_positions` is 1; every
 * other call (induct_model_forward(), induct_train_step_tokens()) is unaffected. The
 * seed's experiment has a context of 24 tokens (`seq_len` 25) and 64 token ids.
 * @since 0.1
 */
typedef struct induct_kv_config {
    size_t size;        /**< `sizeof(induct_kv_config)`. */
    uint32_t d_vocab;   /**< Vocabulary of the model it feeds. Default 64. */
    uint32_t token_lo;  /**< First token id of the range keys, values and filler come from. Default 0. */
    uint32_t token_hi;  /**< One past the last id; 0 = d_vocab. Default 0. */
    uint32_t pair_min;  /**< Smallest key position p (0-based in the context). Default 0. */
    int32_t pair_max;   /**< Largest key position p; −1 = `seq_len − 4` (the value right before
                             the query), the largest that fits. Default −1. */
    uint32_t unique_key;/**< 1: value and filler never equal the key. Default 0. */
    uint32_t all_positions; /**< Training objective of induct_train_step() on this dataset:
                             0 = the loss at the answer position only (the seed's objective;
                             the answer is the only predictable token of a row); 1 = the mean
                             loss over every position, as for any token stream. Default 0. */
    uint64_t seed;      /**< Seed of the stream. Default 0. */
} induct_kv_config;

/** @brief Write the defaults into a KV config of `size` bytes.
 *  @param cfg  The struct to fill (not NULL).
 *  @param size `sizeof(induct_kv_config)` as the caller compiled it.
 *  @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (size).
 *  @since 0.1 Thread-safe. */
INDUCT_API int induct_kv_config_init(induct_kv_config *cfg, size_t size);

/**
 * @brief Create a key–value retrieval dataset (see ::induct_kv_config).
 *
 * induct_dataset_batch() writes rows as described there; its `meta_out[b]` is the
 * value position `p + 1` of row b (the "answer position" of the seed's table C).
 * Both splits are generated; they are different random streams.
 * @param[out] out Owned by the caller, released with induct_dataset_free(); NULL on failure.
 * @param cfg Copied.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, d_vocab 0, empty or out-of-vocabulary
 *         range, `unique_key` other than 0/1 or set with a range of one id,
 *         `pair_max` below −1, `pair_max ≥ 0` below `pair_min`); ::INDUCT_EABI; ::INDUCT_ENOMEM.
 *         Whether the pair range fits a sequence length is checked per call
 *         (::INDUCT_ERANGE from induct_dataset_batch()).
 * @since 0.1
 */
INDUCT_API int induct_dataset_new_kv(induct_dataset **out, const induct_kv_config *cfg);

/** Column of induct_dataset_kv_info(): position whose prediction is scored (`seq_len − 2`). @since 0.1 */
#define INDUCT_KV_ANSWER_POS 0
/** Column of induct_dataset_kv_info(): the answer token (the value, `tokens[seq_len − 1]`). @since 0.1 */
#define INDUCT_KV_ANSWER_TOKEN 1
/** Column of induct_dataset_kv_info(): key position p. @since 0.1 */
#define INDUCT_KV_KEY_POS 2
/** Column of induct_dataset_kv_info(): value position p + 1. @since 0.1 */
#define INDUCT_KV_VALUE_POS 3
/** Number of columns of induct_dataset_kv_info(). @since 0.1 */
#define INDUCT_KV_INFO_COLS 4

/**
 * @brief Per-sequence targets of batch `index` of a KV dataset,
 * `[batch][INDUCT_KV_INFO_COLS]` int32: answer position, answer token, key
 * position, value position (the `INDUCT_KV_*` column macros), for exactly the
 * rows induct_dataset_batch() returns with the same arguments.
 * @param dataset A dataset from induct_dataset_new_kv().
 * @param split ::INDUCT_SPLIT_TRAIN or ::INDUCT_SPLIT_EVAL.
 * @param index Batch number.
 * @param batch Rows, ≥ 1.
 * @param seq_len Row length including the answer token, ≥ 4.
 * @param out Output or NULL (then `out_cap` must be 0) to ask for the length.
 * @param out_cap Capacity of `out` in elements.
 * @param[out] out_len Set to `batch · 4` (may be NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL dataset, not a KV dataset, batch 0,
 *         unknown split); ::INDUCT_ERANGE (the pair range does not fit `seq_len`);
 *         ::INDUCT_EBUFSIZE.
 * @since 0.1 Thread-safe: the dataset is only read.
 */
INDUCT_API int induct_dataset_kv_info(const induct_dataset *dataset, uint32_t split,
                                      uint64_t index, uint32_t batch, uint32_t seq_len,
                                      int32_t *out, size_t out_cap, size_t *out_len);

/**
 * @brief Bayes-optimal accuracy of the KV generator at the answer position (the
 * task's ceiling), computed exactly.
 *
 * Given a row's context, every allowed key position j with `x[j] = x[C−1]` is
 * equally likely to be the pair, so the best guess is the token that most often
 * follows such a j. With R = `token_hi − token_lo` ids and m allowed positions,
 * the ceiling is `(R / m) · E[M]`, where M is the largest number of allowed
 * positions j with `x[j] = k` and `x[j+1] = v` (over v) for i.i.d. uniform tokens.
 * E[M] is evaluated exactly by a dynamic programme over the positions and the
 * exact distribution of the maximum occupancy of balls in R − 1 bins (derivation:
 * docs/datasets.md). Terms whose total probability is below 1e−18 are dropped, so
 * the value is exact to double rounding (absolute error < 1e−12). With
 * `unique_key` the ceiling is exactly 1.
 * Cost: O(m · c²  + R · c³) for c ≈ the largest likely number of key repeats.
 * @param dataset A dataset from induct_dataset_new_kv().
 * @param seq_len Row length including the answer token (25 for the seed).
 * @param[out] ceiling_out Probability in (0, 1].
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, not a KV dataset); ::INDUCT_ERANGE
 *         (pair range does not fit `seq_len`); ::INDUCT_ELIMIT (a task so large that c
 *         exceeds 4096 or the work ~4·10^10 operations); ::INDUCT_ENOMEM.
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_dataset_kv_ceiling(const induct_dataset *dataset, uint32_t seq_len,
                                         double *ceiling_out);

/**
 * @brief KV accuracy: the fraction of the `n_seq` rows of batch 0 of the dataset's
 * eval split whose argmax logit at the answer position (`seq_len − 2`) is the
 * answer token (ties go to the lowest id). Seed 002, tables A and B.
 * Evaluated in chunks, so memory does not grow with `n_seq`.
 * @param model Any model with `d_vocab ≥` the dataset's and `n_ctx ≥ seq_len`.
 * @param dataset A dataset from induct_dataset_new_kv().
 * @param n_seq Number of rows, ≥ 1.
 * @param seq_len Row length including the answer token.
 * @param[out] accuracy_out In [0, 1].
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, not a KV dataset, n_seq 0, vocabulary
 *         larger than the model's); ::INDUCT_ERANGE; errors of induct_model_forward();
 *         ::INDUCT_EINTERRUPTED (induct_model_interrupt()).
 * @since 0.1 Uses the model's workspace: one thread per model.
 */
INDUCT_API int induct_analysis_kv_accuracy(induct_model *model, const induct_dataset *dataset,
                                           uint32_t n_seq, uint32_t seq_len,
                                           double *accuracy_out);

/**
 * @brief Attention from the query (answer position `seq_len − 2`) to the value
 * position `p + 1`, per head, `[n_layers][n_heads]`, averaged over the `n_seq` rows
 * of batch 0 of the dataset's eval split. Seed 002, table C ("정답 자리를 본 비율");
 * uniform attention scores `1 / (seq_len − 1)`. Range [0, 1].
 * @param model,dataset,n_seq,seq_len As induct_analysis_kv_accuracy().
 * @param out `[n_layers][n_heads]` floats.
 * @param out_cap Capacity in floats.
 * @param[out] out_len Set to `n_layers · n_heads` (may be NULL).
 * @return as induct_analysis_kv_accuracy(); ::INDUCT_EBUFSIZE.
 * @since 0.1 Uses the model's workspace: one thread per model.
 */
INDUCT_API int induct_analysis_kv_attention(induct_model *model, const induct_dataset *dataset,
                                            uint32_t n_seq, uint32_t seq_len, float *out,
                                            size_t out_cap, size_t *out_len);

/** Byte-level text: the id of the optional BOS token (d_vocab becomes 257). @since 0.1 */
#define INDUCT_TEXT_BOS 256
/** Split rule: by position, in blocks spread over the stream. @since 0.1 */
#define INDUCT_SPLIT_BY_POSITION 0u
/** Split rule: by document (file). @since 0.1 */
#define INDUCT_SPLIT_BY_DOCUMENT 1u

/**
 * @brief Byte-level text corpus and its train/validation split.
 *
 * Tokens are bytes (ids 0 … 255, `d_vocab` 256); any byte sequence is accepted
 * (invalid UTF-8 is still bytes). A document (one file, or the caller's buffer)
 * becomes `[BOS if bos] bytes [separator if separator ≥ 0]`; documents are
 * concatenated in order (sorted path order for a directory). Empty documents
 * contribute nothing.
 *
 * Split (deterministic, independent of the seed): the units are blocks of
 * `block_tokens` consecutive tokens (::INDUCT_SPLIT_BY_POSITION; the last block
 * may be shorter; `block_tokens = 0` makes the whole stream one unit, cut so that
 * its last ⌊n · val_fraction⌋ tokens are held out) or documents
 * (::INDUCT_SPLIT_BY_DOCUMENT). Unit i (0-based, of n units) is held out iff
 * ⌊(i+1)·f⌋ > ⌊i·f⌋ with f = `val_fraction`: exactly ⌊n·f⌋ units, spread evenly
 * over the whole corpus. Each split's stream is its units concatenated in order.
 *
 * Windows: the train split gives random windows of length T with starts uniform
 * in `{0 … n_train − T − 1}` (a fresh draw per row from (seed, split, batch
 * index)). The eval split gives a fixed set of E windows over the held-out stream,
 * identical across runs and seeds: with S = n_val − T valid starts and
 * N = `n_eval_windows`, E = min(N, S) windows start at ⌊i·S/E⌋ (i = 0 … E−1),
 * evenly spread; with N = 0 they are all E = ⌊(n_val − 1)/T⌋ disjoint windows,
 * starting at i·T. Row r of eval batch `index` is window `(index · batch + r) mod E`.
 * induct_dataset_batch()'s `meta_out[b]` is the row's start within its split's stream
 * (clamped to INT32_MAX); too short a split gives ::INDUCT_ERANGE.
 * @since 0.1
 */
typedef struct induct_text_config {
    size_t size;             /**< `sizeof(induct_text_config)`. */
    uint32_t bos;            /**< 1: ::INDUCT_TEXT_BOS starts every document and d_vocab is 257. Default 0. */
    int32_t separator;       /**< Byte 0 … 255 appended after every document, or −1 for none. Default −1. */
    uint32_t split;          /**< ::INDUCT_SPLIT_BY_POSITION or ::INDUCT_SPLIT_BY_DOCUMENT. Default by position. */
    uint32_t n_eval_windows; /**< Fixed evaluation windows; 0 = all disjoint windows. Default 1024. */
    double val_fraction;     /**< Held-out fraction f in [0, 1). Default 0.1. */
    uint64_t block_tokens;   /**< Unit of the position split; 0 = one cut at the end. Default 65536. */
    uint64_t seed;           /**< Seed of the train windows. Default 0. */
} induct_text_config;

/** @brief Write the defaults into a text config of `size` bytes.
 *  @param cfg  The struct to fill (not NULL).
 *  @param size `sizeof(induct_text_config)` as the caller compiled it.
 *  @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (size).
 *  @since 0.1 Thread-safe. */
INDUCT_API int induct_text_config_init(induct_text_config *cfg, size_t size);

/**
 * @brief Byte-level text dataset from a caller's buffer (one document; copied).
 * @param[out] out Owned by the caller; NULL on failure.
 * @param bytes `n` bytes, any values.
 * @param n Number of bytes, ≥ 1.
 * @param cfg Copied.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, n 0, bad config: bos not 0/1,
 *         separator outside −1 … 255, unknown split, val_fraction outside [0, 1) or
 *         not finite, a document split, which needs two documents);
 *         ::INDUCT_EABI; ::INDUCT_ELIMIT (size overflow); ::INDUCT_ENOMEM.
 * @since 0.1
 */
INDUCT_API int induct_dataset_new_text(induct_dataset **out, const void *bytes, size_t n,
                                       const induct_text_config *cfg);

/**
 * @brief Byte-level text dataset from a file, or from every regular file under a
 * directory whose name ends with `suffix` (e.g. ".py"; NULL or "" = every file).
 *
 * A directory is walked recursively without following symbolic links (links are
 * skipped); the files are read in byte-wise `strcmp` order of their paths relative
 * to `path`, each one document. The corpus is read into memory (2 bytes a token).
 * @param[out] out Owned by the caller; NULL on failure.
 * @param path A regular file or a directory.
 * @param suffix File-name suffix filter for directories, or NULL.
 * @param cfg Copied.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, bad config, a document split with
 *         fewer than 2 non-empty documents); ::INDUCT_EIO (cannot open, stat or read;
 *         the path is named); ::INDUCT_EFORMAT (empty input: an empty file, or no
 *         non-empty matching file; the path is named); ::INDUCT_ELIMIT; ::INDUCT_ENOMEM.
 * @since 0.1
 */
INDUCT_API int induct_dataset_new_text_path(induct_dataset **out, const char *path,
                                            const char *suffix, const induct_text_config *cfg);

/** Token-file format: raw little-endian uint16 array (nanoGPT's `train.bin`). @since 0.1 */
#define INDUCT_TOKFILE_U16 0u
/** Token-file format: raw little-endian uint32 array. @since 0.1 */
#define INDUCT_TOKFILE_U32 1u
/** Token-file format: llm.c's — a header of 256 little-endian int32 (magic 20240520,
 *  version 1, token count, the rest 0), then `count` little-endian uint16. @since 0.1 */
#define INDUCT_TOKFILE_LLMC 2u
/** llm.c token-file magic number. @since 0.1 */
#define INDUCT_LLMC_MAGIC 20240520
/** llm.c token-file version this library reads and writes. @since 0.1 */
#define INDUCT_LLMC_VERSION 1

/**
 * @brief Token-file dataset configuration. Windows and splits follow
 * ::induct_text_config (position split only: a token file has no documents).
 * @since 0.1
 */
typedef struct induct_token_file_config {
    size_t size;             /**< `sizeof(induct_token_file_config)`. */
    uint32_t format;         /**< `INDUCT_TOKFILE_*`. Default ::INDUCT_TOKFILE_U16. */
    uint32_t d_vocab;        /**< Every id must be below it; 0 = (largest id in the files) + 1. Default 0. */
    uint32_t n_eval_windows; /**< As ::induct_text_config. Default 1024. */
    double val_fraction;     /**< As ::induct_text_config; ignored when a validation file is given. Default 0.1. */
    uint64_t block_tokens;   /**< As ::induct_text_config. Default 65536. */
    uint64_t resident_limit; /**< Bytes of the mapping read after which its pages are
                                  released (madvise MADV_DONTNEED), bounding resident memory;
                                  0 = never release. Default 64 MiB. */
    uint64_t seed;           /**< Seed of the train windows. Default 0. */
} induct_token_file_config;

/** @brief Write the defaults into a token-file config of `size` bytes.
 *  @param cfg  The struct to fill (not NULL).
 *  @param size `sizeof(induct_token_file_config)` as the caller compiled it.
 *  @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (size).
 *  @since 0.1 Thread-safe. */
INDUCT_API int induct_token_file_config_init(induct_token_file_config *cfg, size_t size);

/**
 * @brief Dataset over memory-mapped token files (read-only, not copied).
 *
 * Every file is validated when opened: the size fits the format (a whole number of
 * tokens; for llm.c at least the 1024-byte header, the magic and version, and a size
 * of exactly 1024 + 2·count bytes), at least one token, and every id below d_vocab.
 * The validation pass and every window read release the mapping's pages whenever
 * `resident_limit` bytes have been read since the last release, so resident memory
 * stays bounded however long the run. The files must not be changed or truncated
 * while the dataset lives.
 * @param[out] out Owned by the caller; NULL on failure.
 * @param path The training tokens (or all tokens, split by position).
 * @param val_path A separate validation file (nanoGPT's `val.bin`), or NULL to
 *        hold out part of `path` by ::induct_token_file_config::val_fraction.
 * @param cfg Copied.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, bad config); ::INDUCT_EIO (cannot open,
 *         stat or map); ::INDUCT_EFORMAT (truncated file, size not consistent with the
 *         header or the dtype, wrong magic, unsupported version, zero tokens);
 *         ::INDUCT_ERANGE (an id ≥ d_vocab, or a uint32 id above INT32_MAX); every
 *         message names the file and the problem; ::INDUCT_ENOMEM.
 * @since 0.1 The handle is thread-safe like every dataset.
 */
INDUCT_API int induct_dataset_new_token_file(induct_dataset **out, const char *path,
                                             const char *val_path,
                                             const induct_token_file_config *cfg);

/**
 * @brief Read a whole token file (validated as by induct_dataset_new_token_file())
 * into int32 ids.
 * @param path The file.
 * @param format `INDUCT_TOKFILE_*`.
 * @param d_vocab Every id must be below it; 0 = no bound (other than INT32_MAX).
 * @param out `[n_tokens]` or NULL (then `out_cap` must be 0) to ask for the count.
 * @param out_cap Capacity of `out` in elements.
 * @param[out] out_len Set to the token count (may be NULL).
 * @return as induct_dataset_new_token_file(); ::INDUCT_EBUFSIZE.
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_token_file_read(const char *path, uint32_t format, uint32_t d_vocab,
                                      int32_t *out, size_t out_cap, size_t *out_len);

/**
 * @brief Write `n` token ids to `path` atomically (a temporary file in the same
 * directory, flushed and fsync'ed, then renamed over `path`).
 * @param path Destination; replaced only on success.
 * @param format `INDUCT_TOKFILE_*`.
 * @param tokens `n` ids; each must fit the format (0 … 65535 for U16 and LLMC,
 *        0 … INT32_MAX for U32).
 * @param n Number of tokens, ≥ 1 (≤ INT32_MAX for LLMC, whose header holds an int32 count).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, n 0, unknown format); ::INDUCT_ERANGE
 *         (an id that does not fit; its index is named; nothing is written);
 *         ::INDUCT_ELIMIT (n too large for the format); ::INDUCT_EIO.
 * @since 0.1 Thread-safe (different paths).
 */
INDUCT_API int induct_token_file_write(const char *path, uint32_t format, const int32_t *tokens,
                                       size_t n);

/**
 * @brief Number of tokens in a split's stream (text, token-file and token-array datasets).
 * @param dataset The dataset.
 * @param split ::INDUCT_SPLIT_TRAIN or ::INDUCT_SPLIT_EVAL.
 * @param[out] n_out Token count (0 for an empty held-out part). For
 *        induct_dataset_new_tokens() both splits are the whole array.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, unknown split, a generator dataset).
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_dataset_split_tokens(const induct_dataset *dataset, uint32_t split,
                                           uint64_t *n_out);

/**
 * @brief Number of distinct windows of length `seq_len` a split yields:
 * for ::INDUCT_SPLIT_TRAIN the number of valid random starts `n − T` (0 if n ≤ T),
 * for ::INDUCT_SPLIT_EVAL the size E of the fixed evaluation set (see
 * ::induct_text_config). Text and token-file datasets.
 * @param dataset The dataset.
 * @param split The split.
 * @param seq_len Window length T ≥ 2.
 * @param[out] n_out The count.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, unknown split, T < 2, other kinds).
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_dataset_window_count(const induct_dataset *dataset, uint32_t split,
                                           uint32_t seq_len, uint64_t *n_out);
/** @} */

/* ---- analysis suite (issue 4) ------------------------------------------ */

/* ---- training driver, metrics, checkpoints (issue 5) ------------------- */

#ifdef __cplusplus
}
#endif

#endif /* INDUCT_INDUCT_H */
