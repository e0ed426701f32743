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
 *   with induct_last_error_message() (docs/errors.md).
 * - Handles (::induct_model, ::induct_optimizer, ::induct_dataset) are opaque and
 *   created only by the library. `induct_X_new(&out, ...)` sets `*out` to NULL on
 *   failure. Every `induct_X_free(NULL)` is a harmless no-op.
 * - Nothing is modified on failure: a call that returns an error leaves the
 *   weights, the optimizer state and every output buffer as they were (an
 *   `out_len` length report excepted).
 * - Outputs go into caller buffers `(out, out_cap, out_len)` whose capacity is
 *   counted in elements. A buffer that is too small, including `out == NULL`
 *   (the way to ask for the length), returns ::INDUCT_EBUFSIZE and still sets
 *   `*out_len` to the length needed. Layouts are row-major and stated per function.
 * - Config structs are size-prefixed (`size_t size` first; docs/abi-policy.md).
 * - Losses are in nats (natural logarithm).
 * - Threading: one thread per handle at a time; different handles may be used
 *   concurrently; a dataset is immutable after creation and may be read by any
 *   number of threads at once; induct_model_interrupt() may be called from any
 *   thread. There is no global state and no init call. See docs/threading.md.
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

/** @brief The version of the loaded library (not of the header it was compiled with).
 *  @return `M*10000 + m*100 + p`; compare with ::INDUCT_VERSION_NUMBER to detect a
 *          header/library mismatch.
 *  @since 0.1 Thread-safe. */
INDUCT_API unsigned induct_version_number(void);
/** @brief The version string of the loaded library.
 *  @return e.g. "0.1.0"; static storage, never NULL, never to be freed.
 *  @since 0.1 Thread-safe. */
INDUCT_API const char *induct_version_string(void);
/** @brief The ABI version of the loaded library.
 *  @return The `N` of the soname `libinduct.so.N`; bindings refuse a mismatch with
 *          the ::INDUCT_ABI_VERSION they were written for (docs/abi-policy.md).
 *  @since 0.1 Thread-safe. */
INDUCT_API unsigned induct_abi_version(void);

/** Feature bit of induct_build_features(): built with OpenMP. @since 0.1 */
#define INDUCT_FEATURE_OPENMP 0x1u
/** @brief What the loaded library was built with.
 *  @return Bit set of `INDUCT_FEATURE_*`; no other bit is ever set.
 *  @since 0.1 Thread-safe. */
INDUCT_API unsigned induct_build_features(void);
/** @} */

/* ------------------------------------------------------------------------ */
/** @defgroup errors Status codes and per-thread errors
 *  See docs/errors.md.
 *  @{ */

/**
 * @brief The status table: `X(NAME, value, message)` for every ::induct_status.
 * Values are frozen and never reused. The library's induct_status_name() and
 * induct_status_str() are generated from it; callers may expand it too.
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

/**
 * @brief Status codes returned by every fallible function. The values are those of
 * ::INDUCT_STATUS_MAP (the library checks at build time that both agree).
 * @since 0.1
 */
typedef enum induct_status {
    INDUCT_OK = 0,            /**< Success. */
    INDUCT_ERROR = -1,        /**< Internal error (a bug in libinduct). */
    INDUCT_ENOMEM = -2,       /**< Out of memory. */
    INDUCT_EINVAL = -3,       /**< Invalid argument or configuration (NULL, zero size, unknown value). */
    INDUCT_ERANGE = -4,       /**< Index, token id or size out of range (e.g. `seq_len > n_ctx`). */
    INDUCT_EBUFSIZE = -5,     /**< Output buffer too small; the length needed is reported. */
    INDUCT_EIO = -6,          /**< Input/output error. */
    INDUCT_EFORMAT = -7,      /**< Malformed or unsupported file. */
    INDUCT_EABI = -8,         /**< Struct size or ABI version mismatch (size-prefixed structs). */
    INDUCT_ESTATE = -9,       /**< Call out of order. */
    INDUCT_EINTERRUPTED = -10,/**< Stopped by induct_model_interrupt(). */
    INDUCT_ENOTSUP = -11,     /**< Not supported (not built in, or an unknown parameter). */
    INDUCT_ENUMERIC = -12,    /**< NaN or infinity in the loss or the gradients. */
    INDUCT_ELIMIT = -13,      /**< A size exceeds what the library accepts (e.g. 2^31 parameters). */
    INDUCT_STATUS_MIN_ = -13  /**< Smallest status value; not a status. */
} induct_status;

/** @brief Symbolic name of a status.
 *  @param status Any int.
 *  @return "INDUCT_EINVAL" etc.; "INDUCT_UNKNOWN" for a value not in the table.
 *          Static storage, never NULL.
 *  @since 0.1 Thread-safe. */
INDUCT_API const char *induct_status_name(int status);
/** @brief Fixed English message of a status.
 *  @param status Any int.
 *  @return The message of ::INDUCT_STATUS_MAP; "unknown status" for a value not in
 *          the table. Static storage, never NULL.
 *  @since 0.1 Thread-safe. */
INDUCT_API const char *induct_status_str(int status);
/**
 * @brief Detailed message of the last failure on the calling thread.
 * @return Never NULL ("" when there was none, or after induct_error_clear()).
 *         Owned by the library; valid until the next failing call on the same
 *         thread. Meaningful only right after a failure: successful calls do not
 *         clear it.
 * @since 0.1 Thread-safe (per-thread storage: a failure on one thread never
 *        changes another thread's message).
 */
INDUCT_API const char *induct_last_error_message(void);
/** @brief Status of the last failure on the calling thread.
 *  @return The code of that failure, ::INDUCT_OK if none (or after induct_error_clear()).
 *  @since 0.1 Thread-safe (per-thread storage). */
INDUCT_API int induct_last_error_code(void);
/** @brief Forget the calling thread's last error (message "" and code ::INDUCT_OK).
 *  @since 0.1 Thread-safe. */
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
    uint32_t n_threads;     /**< OpenMP threads for this model's work, ≤ 1024; 0 means 1. Default 1. */
    uint32_t init;          /**< `INDUCT_INIT_*`. Default ::INDUCT_INIT_GPT2. */
    double smear_alpha_init;/**< Initial α of every head (σ(α) weights the current key). Default 0.0. */
    double init_std;        /**< Standard deviation for ::INDUCT_INIT_GPT2. Default 0.02. */
    uint64_t seed;          /**< Seed of the initialisation. Default 0. */
} induct_model_config;

/**
 * @brief Write the defaults into a config of `size` bytes.
 * Bytes past `sizeof(induct_model_config)` (a caller compiled against a newer
 * header) are set to 0; `cfg->size` is set to `size`.
 * @param[out] cfg The struct to fill (not NULL). Untouched on failure.
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
 * @param cfg Architecture; copied, so it may be freed after the call. A larger
 *            (newer) struct is accepted if every byte this library does not know is 0.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL for a NULL argument, a zero size, `d_head = 0`
 *         with `n_heads` not dividing `d_model`, an unknown positional or init value,
 *         a flag other than 0/1, a non-finite or negative `init_std`, a non-finite
 *         `smear_alpha_init`, more than 1024 threads;
 *         ::INDUCT_EABI for a bad `size` or non-zero unknown tail;
 *         ::INDUCT_ELIMIT if `n_heads·d_head` exceeds 2^30, or the parameter count
 *         overflows `size_t` or exceeds 2^31 floats; ::INDUCT_ENOMEM.
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_model_new(induct_model **out, const induct_model_config *cfg);

/** @brief Release a model.
 *  An optimizer keeps its own reference: the memory goes when the last user is
 *  freed, so models and optimizers may be freed in any order.
 *  @param model The model, or NULL (a no-op).
 *  @since 0.1 Not concurrently with any other use of the same model. */
INDUCT_API void induct_model_free(induct_model *model);

/**
 * @brief Deep copy of a model's config and weights (not gradients, not ablations).
 * A clone lets several threads analyse the same weights at once.
 * @param[out] out New model owned by the caller; NULL on failure.
 * @param model The model to copy (only read).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_ENOMEM.
 * @since 0.1 Not concurrently with a call that modifies `model`.
 */
INDUCT_API int induct_model_clone(induct_model **out, const induct_model *model);

/**
 * @brief Copy the model's config, as normalised at creation (`d_head` resolved,
 * `n_threads` ≥ 1 and as last set by induct_model_set_threads()).
 * @param model The model.
 * @param[in,out] cfg_out Struct whose `size` field the caller sets; fields past the
 *                library's struct are zeroed. Untouched on failure.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (bad `size`).
 * @since 0.1
 */
INDUCT_API int induct_model_get_config(const induct_model *model, induct_model_config *cfg_out);

/**
 * @brief Set the number of OpenMP threads used by this model's work.
 * Results are bit-identical for a fixed thread count, and in this build also
 * across thread counts (docs/threading.md).
 * @param model The model.
 * @param n_threads 1 … 1024; 0 means 1.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, or more than 1024).
 * @since 0.1
 */
INDUCT_API int induct_model_set_threads(induct_model *model, uint32_t n_threads);

/** @brief Total number of scalar parameters (all tensors).
 *  @param model The model, or NULL.
 *  @return The count; 0 for NULL.
 *  @since 0.1 */
INDUCT_API size_t induct_model_n_params(const induct_model *model);

/** @brief Number of named parameter tensors.
 *  @param model The model, or NULL.
 *  @return The count; 0 for NULL.
 *  @since 0.1 */
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
 * @param model The model.
 * @param index 0 … induct_model_n_tensors() − 1.
 * @param[out] name_out  Borrowed name, valid while the model lives. May be NULL.
 * @param[out] shape_out Up to 4 dimensions (unused ones 0). May be NULL.
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
 * @param model The model.
 * @param name A name listed by induct_model_tensor_info().
 * @param which ::INDUCT_BUF_PARAM or ::INDUCT_BUF_GRAD (gradients of the mean loss
 *              of the last induct_model_backward(); zero before any).
 * @param[out] out Buffer of `out_cap` floats, or NULL to ask for the length.
 * @param out_cap Capacity of `out` in floats.
 * @param[out] out_len Element count of the tensor (set also on ::INDUCT_EBUFSIZE), or NULL.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, bad `which`); ::INDUCT_ERANGE (unknown
 *         name); ::INDUCT_EBUFSIZE (`*out_len` set to the element count).
 * @since 0.1
 */
INDUCT_API int induct_model_get_tensor(const induct_model *model, const char *name, uint32_t which,
                                       float *out, size_t out_cap, size_t *out_len);

/**
 * @brief Overwrite a named weight tensor from `len` floats (row-major, TL shape).
 * Non-finite values are refused. Nothing is modified on failure.
 * @param model The model.
 * @param name A name listed by induct_model_tensor_info().
 * @param in `len` floats, copied.
 * @param len Must equal the tensor's element count.
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
 * @param model The model (its workspace is written; the weights are only read).
 * @param tokens   `[batch][seq_len]` int32 ids in `[0, d_vocab)`.
 * @param batch Number of sequences, ≥ 1.
 * @param seq_len Tokens per sequence, 2 … n_ctx.
 * @param[out] logits_out `[batch][seq_len][d_vocab]`, or NULL (then `logits_cap` is ignored).
 * @param logits_cap Capacity of `logits_out` in floats.
 * @param[out] losses_out `[batch][seq_len−1]` per-token losses in nats, or NULL
 *                        (then `losses_cap` is ignored).
 * @param losses_cap Capacity of `losses_out` in floats.
 * @param[out] mean_loss_out Mean of all per-token losses (nats), or NULL.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model/tokens, batch 0, seq_len < 2);
 *         ::INDUCT_ERANGE (seq_len > n_ctx, token id outside `[0, d_vocab)`, the id and
 *         position are named in the message); ::INDUCT_EBUFSIZE (a capacity smaller than
 *         needed; nothing is written); ::INDUCT_ELIMIT (the workspace for
 *         `batch × seq_len` would exceed 2^36 floats); ::INDUCT_ENOMEM (workspace);
 *         ::INDUCT_ENUMERIC (non-finite loss).
 * @since 0.1 Uses the model's workspace: one thread per model.
 */
INDUCT_API int induct_model_forward(induct_model *model, const int32_t *tokens, uint32_t batch,
                                    uint32_t seq_len, float *logits_out, size_t logits_cap,
                                    float *losses_out, size_t losses_cap, double *mean_loss_out);

/**
 * @brief Forward and backward: gradients of the mean per-token loss into the model's
 * gradient buffer (overwritten, not accumulated), read with induct_model_get_tensor()
 * and ::INDUCT_BUF_GRAD.
 * @param model The model.
 * @param tokens `[batch][seq_len]` int32 ids in `[0, d_vocab)`.
 * @param batch Number of sequences, ≥ 1.
 * @param seq_len Tokens per sequence, 2 … n_ctx.
 * @param[out] mean_loss_out Mean per-token loss (nats) before any update, or NULL.
 * @return as induct_model_forward(); on ::INDUCT_ENUMERIC the gradients are
 *         unspecified but the weights are untouched. Non-finite gradients with a
 *         finite loss are not an error here (induct_optimizer_step() refuses them).
 * @since 0.1 Uses the model's workspace: one thread per model.
 */
INDUCT_API int induct_model_backward(induct_model *model, const int32_t *tokens, uint32_t batch,
                                     uint32_t seq_len, double *mean_loss_out);

/**
 * @brief Attention patterns of one sequence, `[n_layers][n_heads][seq_len][seq_len]`,
 * row = query p, column = key k; entries with k > p are exactly 0; rows sum to 1.
 * @param model The model.
 * @param tokens `[seq_len]` ids in `[0, d_vocab)`.
 * @param seq_len 2 … n_ctx.
 * @param[out] out Buffer of `out_cap` floats, or NULL to ask for the length.
 * @param out_cap Capacity of `out` in floats.
 * @param[out] out_len `n_layers·n_heads·seq_len²` (set also on ::INDUCT_EBUFSIZE), or NULL.
 * @return as induct_model_forward() for the input; ::INDUCT_EBUFSIZE.
 * @since 0.1 Uses the model's workspace: one thread per model.
 */
INDUCT_API int induct_model_attention(induct_model *model, const int32_t *tokens, uint32_t seq_len,
                                      float *out, size_t out_cap, size_t *out_len);

/**
 * @brief Interrupt a long call on this model (training, evaluation, analysis) from any
 * thread. The call returns ::INDUCT_EINTERRUPTED at its next check and leaves the model
 * consistent. The flag is cleared when such a call starts.
 * @param model The model, or NULL (a no-op). It must stay alive during the call.
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

/** @brief Write the defaults into an RRT config of `size` bytes (bytes past the
 *  library's struct are zeroed; `cfg->size` is set to `size`).
 *  @param[out] cfg The struct to fill; untouched on failure.
 *  @param size `sizeof(induct_rrt_config)` as the caller compiled it.
 *  @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (size below the 0.1
 *          struct or above 4096).
 *  @since 0.1 Thread-safe. */
INDUCT_API int induct_rrt_config_init(induct_rrt_config *cfg, size_t size);

/**
 * @brief Create a repeated-random-token dataset.
 * @param[out] out Owned by the caller, released with induct_dataset_free(); NULL on failure.
 * @param cfg The generator; copied. A larger (newer) struct is accepted if every
 *            byte this library does not know is 0.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, d_vocab 0, n_repeats < 2, min_block 0,
 *         max_block < min_block, empty or out-of-vocabulary range, BOS inside the range
 *         or ≥ d_vocab or < −1, distinct_block not 0/1, distinct_block with a range
 *         shorter than max_block); ::INDUCT_EABI; ::INDUCT_ENOMEM.
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_dataset_new_rrt(induct_dataset **out, const induct_rrt_config *cfg);

/**
 * @brief Create a dataset of random windows over a caller's token array (copied).
 * Window starts are uniform in `{0 … n − T − 1}` (DEFINITIONS, "Token files": the
 * window plus one further token fit in the array, so `n ≥ T + 1` is required). The
 * train split and the eval split are separate random streams over the same array.
 * @param[out] out Owned by the caller, released with induct_dataset_free(); NULL on failure.
 * @param tokens `n` ids in `[0, d_vocab)`; copied, so the array may be freed after the call.
 * @param n Number of tokens, ≥ 1.
 * @param d_vocab Vocabulary size of the ids, ≥ 1.
 * @param seed Seed of the window streams.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, n 0, d_vocab 0); ::INDUCT_ERANGE (an id
 *         outside the vocabulary; its index is named); ::INDUCT_ELIMIT (n·4 bytes
 *         overflows `size_t`); ::INDUCT_ENOMEM.
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_dataset_new_tokens(induct_dataset **out, const int32_t *tokens, size_t n,
                                         uint32_t d_vocab, uint64_t seed);

/** @brief Release a dataset.
 *  @param dataset The dataset, or NULL (a no-op).
 *  @since 0.1 Not concurrently with any other use of the same dataset. */
INDUCT_API void induct_dataset_free(induct_dataset *dataset);

/** @brief Vocabulary size the dataset's ids live in.
 *  @param dataset The dataset, or NULL.
 *  @return `d_vocab`; 0 for NULL.
 *  @since 0.1 Thread-safe. */
INDUCT_API uint32_t induct_dataset_d_vocab(const induct_dataset *dataset);

/**
 * @brief Write batch number `index` of `split`: `tokens_out [batch][seq_len]`.
 * Row b of a batch does not depend on `batch` (a smaller batch is a prefix).
 * @param dataset The dataset (only read).
 * @param split ::INDUCT_SPLIT_TRAIN or ::INDUCT_SPLIT_EVAL.
 * @param index Batch number (the training step uses the optimizer's step counter).
 * @param batch Number of sequences, ≥ 1.
 * @param seq_len Tokens per sequence, ≥ 2.
 * @param[out] tokens_out `[batch][seq_len]` int32 ids.
 * @param tokens_cap Capacity of `tokens_out` in elements.
 * @param[out] meta_out `[batch]` per-sequence information or NULL: for RRT the block length
 *                 L; for token windows the window's start offset (clamped to INT32_MAX).
 * @param meta_cap Capacity of `meta_out` in elements (ignored if it is NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, batch 0, seq_len < 2, unknown split);
 *         ::INDUCT_ERANGE (seq_len too short for the generator's blocks, a distinct
 *         block longer than the token range, or a window longer than the token
 *         array allows); ::INDUCT_EBUFSIZE (capacity below batch·seq_len or batch).
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

/** Optimizer kind: AdamW (Loshchilov & Hutter 2019, *Decoupled Weight Decay
 *  Regularization*). With g the (clipped) gradient, t the 1-based step and lr the
 *  scheduled rate: `m = β1 m + (1−β1) g`, `v = β2 v + (1−β2) g²`,
 *  `p −= lr·wd·p` (tensors with ≥ 2 dims only), then
 *  `p −= lr·(m / (1−β1^t)) / (√(v / (1−β2^t)) + ε)`. @since 0.1 */
#define INDUCT_OPTIM_ADAMW 0u
/** Optimizer kind: SGD with optional momentum μ (PyTorch's convention: the
 *  buffer starts as the first gradient, no dampening): `buf = μ buf + g`,
 *  `p −= lr·wd·p` (decoupled, tensors with ≥ 2 dims only), `p −= lr·buf`
 *  (`buf = g` when μ = 0). @since 0.1 */
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
    INDUCT_OPT_SCHEDULE = 8,      /**< 0 constant after warmup, 1 cosine decay to min_lr_ratio·lr at total_steps (if total_steps > warmup). Fractions are rounded down. Default 0. */
    INDUCT_OPT_TOTAL_STEPS = 9,   /**< Steps of the cosine schedule, [0, 1e12]. Default 0. */
    INDUCT_OPT_MIN_LR_RATIO = 10, /**< Floor of the cosine schedule, [0, 1]. Default 0. */
    INDUCT_OPT_MOMENTUM = 11,     /**< SGD momentum, [0, 1). Default 0. */
    INDUCT_OPT_STEP = 12          /**< Steps taken so far (read; writable to resume), integer in [0, 2^53]. */
} induct_opt_param;

/**
 * @brief Create an optimizer for `model` (it takes a reference to the model).
 * Moments start at 0 and the step counter at 0.
 * @param[out] out Owned by the caller, released with induct_optimizer_free(); NULL on failure.
 * @param model The model whose parameters it updates; it stays alive while the
 *              optimizer does. Use one thread for the pair.
 * @param kind ::INDUCT_OPTIM_ADAMW or ::INDUCT_OPTIM_SGD.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, unknown kind); ::INDUCT_ENOMEM.
 * @since 0.1
 */
INDUCT_API int induct_optimizer_new(induct_optimizer **out, induct_model *model, uint32_t kind);
/** @brief Release an optimizer (and its reference to the model).
 *  @param opt The optimizer, or NULL (a no-op).
 *  @since 0.1 */
INDUCT_API void induct_optimizer_free(induct_optimizer *opt);

/** @brief Set a runtime parameter; it stays in force for every later step.
 *  @param opt The optimizer.
 *  @param param One of ::induct_opt_param.
 *  @param value Within induct_opt_param_bounds().
 *  @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, non-finite value); ::INDUCT_ENOTSUP
 *          (unknown parameter); ::INDUCT_ERANGE (outside the bounds, or a
 *          non-integer ::INDUCT_OPT_STEP). The old value is kept on failure.
 *  @since 0.1 */
INDUCT_API int induct_optimizer_set(induct_optimizer *opt, induct_opt_param param, double value);
/** @brief Read a runtime parameter.
 *  @param opt The optimizer.
 *  @param param One of ::induct_opt_param.
 *  @param[out] value_out The value; untouched on failure.
 *  @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_ENOTSUP (unknown parameter).
 *  @since 0.1 */
INDUCT_API int induct_optimizer_get(const induct_optimizer *opt, induct_opt_param param,
                                    double *value_out);
/** @brief Bounds of a parameter (both inclusive).
 *  @param param One of ::induct_opt_param.
 *  @param[out] lo_out Smallest accepted value.
 *  @param[out] hi_out Largest accepted value.
 *  @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL output); ::INDUCT_ENOTSUP (unknown
 *          parameter: probe for features this way).
 *  @since 0.1 Thread-safe. */
INDUCT_API int induct_opt_param_bounds(induct_opt_param param, double *lo_out, double *hi_out);

/** @brief Learning rate the next step will use (after warmup and schedule).
 *  @param opt The optimizer.
 *  @param[out] lr_out The rate for step ::INDUCT_OPT_STEP.
 *  @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL).
 *  @since 0.1 */
INDUCT_API int induct_optimizer_current_lr(const induct_optimizer *opt, double *lr_out);

/**
 * @brief Apply one update from the model's current gradients (clip, then AdamW or SGD)
 * and advance the step counter.
 * Clipping: if `grad_clip > 0` and the global L2 norm exceeds it, every gradient is
 * scaled by `grad_clip / norm` before the update.
 * @param opt The optimizer.
 * @param[out] grad_norm_out Global L2 norm of the gradients before clipping, or NULL.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_ENUMERIC (a NaN/Inf gradient:
 *         nothing is changed, the moments and the step counter included).
 * @since 0.1
 */
INDUCT_API int induct_optimizer_step(induct_optimizer *opt, double *grad_norm_out);

/**
 * @brief One training step: batch number `step` (the optimizer's step counter) of the
 * dataset's train split, forward, backward, optimizer update.
 * @param opt The optimizer (and through it the model).
 * @param dataset Source of the batch (only read; may be shared with other threads).
 * @param batch Number of sequences, ≥ 1.
 * @param seq_len Tokens per sequence, 2 … n_ctx.
 * @param[out] loss_out Mean per-token loss of the batch before the update (nats), or NULL.
 * @return the errors of induct_dataset_batch(), induct_model_backward() and
 *         induct_optimizer_step(); ::INDUCT_EINVAL if the dataset's vocabulary
 *         exceeds the model's; ::INDUCT_ERANGE if seq_len > n_ctx. On any error the
 *         weights, the moments and the step counter are unchanged.
 * @since 0.1 No allocation after the first step with a given shape.
 */
INDUCT_API int induct_train_step(induct_optimizer *opt, const induct_dataset *dataset,
                                 uint32_t batch, uint32_t seq_len, double *loss_out);

/** @brief As induct_train_step() on caller tokens.
 *  @param opt The optimizer (and through it the model).
 *  @param tokens `[batch][seq_len]` int32 ids in `[0, d_vocab)`.
 *  @param batch Number of sequences, ≥ 1.
 *  @param seq_len Tokens per sequence, 2 … n_ctx.
 *  @param[out] loss_out Mean per-token loss before the update (nats), or NULL.
 *  @return as induct_train_step() (::INDUCT_ERANGE also for a token id outside
 *          the vocabulary).
 *  @since 0.1 */
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
 * @param model The model (its workspace is written).
 * @param dataset An RRT dataset without BOS.
 * @param n_seq Number of sequences, ≥ 1.
 * @param seq_len Tokens per sequence, 2 … n_ctx.
 * @param[out] out `[n_layers][n_heads]` floats, or NULL to ask for the length.
 * @param out_cap Capacity of `out` in floats.
 * @param[out] out_len `n_layers·n_heads` (set also on ::INDUCT_EBUFSIZE), or NULL.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, not an RRT dataset, n_seq 0);
 *         errors of induct_model_forward(); ::INDUCT_EBUFSIZE; ::INDUCT_EINTERRUPTED.
 * @since 0.1 Uses the model's workspace: one thread per model.
 */
INDUCT_API int induct_analysis_induction_score(induct_model *model, const induct_dataset *dataset,
                                               uint32_t n_seq, uint32_t seq_len, float *out,
                                               size_t out_cap, size_t *out_len);

/**
 * @brief Previous-token score per head, `[n_layers][n_heads]` (ICL paper, Appendix):
 * `mean_{i=1..T−1} A[i, i−1]`, averaged over the `n_seq` sequences of batch 0 of the
 * dataset's eval split. Range [0, 1].
 * @param model The model (its workspace is written).
 * @param dataset Any dataset whose vocabulary fits the model's.
 * @param n_seq Number of sequences, ≥ 1.
 * @param seq_len Tokens per sequence, 2 … n_ctx.
 * @param[out] out `[n_layers][n_heads]` floats, or NULL to ask for the length.
 * @param out_cap Capacity of `out` in floats.
 * @param[out] out_len `n_layers·n_heads` (set also on ::INDUCT_EBUFSIZE), or NULL.
 * @return as induct_analysis_induction_score() (any dataset kind).
 * @since 0.1 Uses the model's workspace: one thread per model.
 */
INDUCT_API int induct_analysis_previous_token_score(induct_model *model,
                                                    const induct_dataset *dataset, uint32_t n_seq,
                                                    uint32_t seq_len, float *out, size_t out_cap,
                                                    size_t *out_len);
/** @} */

/* ---- datasets: KV retrieval, text, token files (issue 3) ---------------- */

/* ---- analysis suite (issue 4) ------------------------------------------ */

/* ---- training driver, metrics, checkpoints (issue 5) ------------------- */

#ifdef __cplusplus
}
#endif

#endif /* INDUCT_INDUCT_H */
