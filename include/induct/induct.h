/*
 * libinduct — train small transformers and measure how they learn in context.
 * SPDX-License-Identifier: MIT
 */
/**
 * @file induct.h
 * @brief The one public header of libinduct.
 *
 * Outline (the stable API first, then the experimental block, as in zstd.h):
 * 1. Version and build features; status codes and per-thread errors.
 * 2. Model: configuration, creation, tensors, forward and backward passes,
 *    attention patterns, interruption, memory cap.
 * 3. Data: repeated random tokens, token arrays, key–value retrieval,
 *    byte-level text, token files (docs/datasets.md).
 * 4. Training: optimizer, training step, training driver and metrics log
 *    (docs/training.md).
 * 5. Analyses: evaluation set and ICL score, attention read-outs, probes and
 *    head evaluators, weight-based scores, key–value read-outs, head ablation,
 *    loss-vector PCA and the phase-change window (docs/analysis.md).
 * 6. Checkpoints: safetensors files (docs/checkpoint-format.md).
 * 7. Text in and out: byte-level tokenizer and generation.
 * 8. EXPERIMENTAL: hook points and the activation cache, hooks in training
 *    (docs/hooks.md); the local learning coefficient by SGLD (docs/llc.md). Newer
 *    than the rest; see the note at the start of that block.
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

/* ======================================================================== */
/*  STABLE API                                                               */
/* ======================================================================== */

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
 *  information in the residual stream), or of the first
 *  `induct_model_config.shortformer_layers` layers. @since 0.1 */
#define INDUCT_POS_SHORTFORMER 1u
/** Positional variant: no positional parameters at all. @since 0.1 */
#define INDUCT_POS_NONE 2u

/** Initialisation: normal(0, init_std) for every matrix and embedding, with
 *  `W_O` and `W_out` scaled by 1/sqrt(2 n_layers) (GPT-2); biases 0. @since 0.1 */
#define INDUCT_INIT_GPT2 0u
/** Initialisation: PyTorch module defaults — `W_E`, `W_pos` ~ N(0, 1); every
 *  linear weight and bias ~ U(−1/√fan_in, 1/√fan_in); `init_std` is ignored.
 *  A model so initialised starts from the distribution of a freshly constructed
 *  PyTorch model, as a PyTorch reference run does. @since 0.1 */
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
    uint64_t max_bytes;     /**< Memory cap of this model in bytes, or 0 for none beyond the
                                 fixed limits: parameters, gradients, bookkeeping tables,
                                 the activation workspace, token staging and the moments of
                                 its optimizers all count (induct_model_memory_used()). A
                                 config, file or call that would need more is refused with
                                 ::INDUCT_ELIMIT before anything is allocated
                                 (docs/hardening.md). Not saved in checkpoints. Default 0. */
    uint32_t shortformer_layers; /**< With ::INDUCT_POS_SHORTFORMER: W_pos enters the
                                 query/key input of the first `shortformer_layers` layers
                                 only; 0 means every layer (the ICL paper's small models).
                                 With 1, only layer 0 can attend by position, so a 2-layer
                                 model's previous-token head forms in layer 0, where a
                                 layer-1 induction head can compose with it
                                 (docs/phase-change.md, "Sweep"). Must be 0 with the other
                                 positional variants; ≤ n_layers (n_layers is stored as
                                 0: the same model). Default 0. */
    uint32_t reserved0;     /**< Must be 0. */
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
 *         `smear_alpha_init`, more than 1024 threads, `shortformer_layers` ≠ 0 without
 *         shortformer positions or above `n_layers`, `reserved0` ≠ 0;
 *         ::INDUCT_EABI for a bad `size` or non-zero unknown tail;
 *         ::INDUCT_ELIMIT if `n_heads·d_head` exceeds 2^30, the parameter count
 *         overflows `size_t` or exceeds 2^31 floats, the bookkeeping tables exceed
 *         2^30 bytes (about 500 000 layers), or parameters, gradients and tables
 *         together exceed a non-zero `max_bytes`; ::INDUCT_ENOMEM.
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
 * @param[out] out New model owned by the caller, released with induct_model_free(); NULL on
 *             failure.
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
 *                library's struct are zeroed. Untouched on failure. The 0.1.0 struct
 *                (88 bytes, before `shortformer_layers`) is accepted for a model that
 *                does not use that field.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (bad `size`, or a struct
 *         too old to hold a `shortformer_layers` the model uses).
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
 * Per-token loss (docs/definitions.md): `loss[b][p] = −ln P(tokens[b][p+1] | tokens[b][0..p])`
 * in nats for p in 0 … seq_len−2. Cross-entropy via log-sum-exp with the row maximum
 * subtracted: adding a constant to every logit of a row changes neither the losses nor
 * (induct_model_backward()) any gradient, for any finite logits.
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
 *         needed; nothing is written); ::INDUCT_ELIMIT (`batch × seq_len` above
 *         2^31 − 1 positions, a workspace above 2^36 floats or one that would take
 *         the model past its `max_bytes`, or an output length that overflows
 *         `size_t`); ::INDUCT_ENOMEM (workspace);
 *         ::INDUCT_ENUMERIC (non-finite loss: a logit that overflowed to ±inf or is
 *         NaN, or a loss above the float range).
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
 * The gradient of every `blocks.{l}.attn.b_K` is exactly 0: b_K adds `q·b_K` to all
 * scores of a query, which the softmax ignores (it is shift-invariant per query), so it
 * is set to 0 rather than summed (the sum would be rounding noise that Adam's
 * normalisation turns into updates of size lr). b_K stays a parameter (the TL layout):
 * optimizer steps leave it unchanged except for weight decay, which does not change
 * the model's output either.
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

/**
 * @brief Change the model's memory cap (::induct_model_config::max_bytes), e.g.
 * after induct_model_load(), whose models start without a cap.
 *
 * The cap applies from the next allocation on: a later call whose workspace,
 * token staging or optimizer moments would take induct_model_memory_used() past
 * it fails with ::INDUCT_ELIMIT and allocates nothing. induct_model_get_config()
 * reports the new value.
 * @param model The model.
 * @param max_bytes The cap in bytes; 0 removes it (the fixed limits remain).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_ELIMIT if the model
 *         already holds more than a non-zero `max_bytes` (the cap is then unchanged).
 * @since 0.1 Not concurrently with any other use of the same model.
 */
INDUCT_API int induct_model_set_max_bytes(induct_model *model, uint64_t max_bytes);

/**
 * @brief Bytes the model holds now: parameters and gradients (4 bytes each per
 * parameter), bookkeeping tables, the activation workspace (it grows to the largest
 * `batch × seq_len` used, never with `n_ctx` alone), token staging, and the moments of
 * every optimizer created for it (4 bytes per parameter for SGD, 8 for AdamW). This
 * is the quantity ::induct_model_config::max_bytes caps. Buffers of a single call
 * (the evaluation tokens of an analysis or of induct_train()) count while it runs.
 * @param model The model, or NULL.
 * @return The byte count; 0 for NULL.
 * @since 0.1 Not concurrently with a call that allocates for the same model.
 */
INDUCT_API uint64_t induct_model_memory_used(const induct_model *model);
/** @} */

/* ------------------------------------------------------------------------ */
/** @defgroup dataset Datasets
 *  Sources of token batches, immutable once configured. Batch `index` of a split is a pure
 *  function of (dataset, split, index, batch, seq_len): no hidden cursor, so a
 *  run resumes from its step counter alone. Kinds: repeated random tokens, a
 *  caller's token array, key–value retrieval, byte-level text and token files;
 *  their definitions, split rules and the key–value ceiling's derivation are in
 *  docs/datasets.md.
 *  @{ */

/** @brief Opaque dataset handle. Immutable once configured (induct_dataset_set_repeats()
 *  is the one setter); may be shared between threads. @since 0.1 */
typedef struct induct_dataset induct_dataset;

/** Split: training batches. @since 0.1 */
#define INDUCT_SPLIT_TRAIN 0u
/** Split: evaluation batches (a separate random stream or held-out data). @since 0.1 */
#define INDUCT_SPLIT_EVAL 1u

/**
 * @brief Repeated-random-token generator (the induction-head experiments; docs/definitions.md,
 * "Repeated random tokens").
 *
 * Each sequence of length T is: [BOS if `bos >= 0`], then a block of L tokens, then
 * `n_repeats − 1` copies of the same block, then filler to the end. L is drawn
 * uniformly from `[min_block, max_block]` per sequence (`max_block = 0` means
 * ⌊(T − has_bos) / n_repeats⌋). Block and filler tokens are uniform in
 * `[token_lo, token_hi)`; with `distinct_block = 1` the block is drawn without
 * replacement. The defaults are the usual induction-head training data: no BOS,
 * n_repeats 2, min_block 8, max_block T/2, token range [0, 64), `distinct_block = 0`,
 * and the filler is drawn for the whole row first (the copy overwrites it).
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
    uint32_t distinct_block;/**< 1: block tokens without replacement. Default 0. */
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
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, d_vocab 0 or above 2^31 (ids are
 *         int32), n_repeats < 2, min_block 0,
 *         max_block < min_block, empty or out-of-vocabulary range, BOS inside the range
 *         or ≥ d_vocab or < −1, distinct_block not 0/1, distinct_block with a range
 *         shorter than max_block); ::INDUCT_EABI; ::INDUCT_ENOMEM.
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_dataset_new_rrt(induct_dataset **out, const induct_rrt_config *cfg);

/**
 * @brief Create a dataset of random windows over a caller's token array (copied).
 * Window starts are uniform in `{0 … n − T − 1}` (docs/definitions.md, "Token files": the
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
 * @brief The dataset's BOS token: the id every sequence of it starts with, or −1 if its
 * sequences have none.
 *
 * The BOS rule of the library (docs/datasets.md, "BOS"): a BOS is one id at position 0
 * of a sequence, outside the range of the ordinary tokens; whether there is one, and
 * which id, is a property of the data and is set by the dataset's config only:
 * repeated random tokens `induct_rrt_config.bos` (default none), byte-level text
 * ::INDUCT_TEXT_BOS (256) with `induct_text_config.bos = 1` (default none); token arrays,
 * token files and key–value tasks have none. Sequences built for a model trained on a
 * dataset follow it: the training driver's probe metrics take their BOS from the
 * dataset (induct_probe_config_for_dataset()). The BOS is a position like any other:
 * positions (the ICL score's 50th and 500th token, loss by position) count it.
 * @param dataset The dataset.
 * @param[out] bos_out The BOS id, or −1 for none.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL argument).
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_dataset_bos(const induct_dataset *dataset, int32_t *bos_out);

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
 *         block longer than the token range, a window longer than the token
 *         array allows, or a train window shorter than twice the repeated span's
 *         `min_len`, induct_dataset_set_repeats()); ::INDUCT_EBUFSIZE (capacity below batch·seq_len or batch);
 *         ::INDUCT_EIO (a token file that can no longer be read: truncated or changed
 *         while in use; the outputs are then unspecified).
 * @since 0.1 Thread-safe: the dataset is only read.
 */
INDUCT_API int induct_dataset_batch(const induct_dataset *dataset, uint32_t split, uint64_t index,
                                    uint32_t batch, uint32_t seq_len, int32_t *tokens_out,
                                    size_t tokens_cap, int32_t *meta_out, size_t meta_cap);

/* ---- key–value retrieval ------------------------------------------------- */

/**
 * @brief Key–value retrieval generator (the task of the blog post "문맥 내 학습과 유도 헤드",
 * "In-context learning and induction heads"; docs/datasets.md, "Key–value retrieval").
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
 * blog post's experiment has a context of 24 tokens (`seq_len` 25) and 64 token ids.
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
                             0 = the loss at the answer position only (the blog post's objective;
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
 * value position `p + 1` of row b (the "answer position" of the blog post's table C).
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
 * @param seq_len Row length including the answer token (25 in the blog post's experiment).
 * @param[out] ceiling_out Probability in (0, 1].
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, not a KV dataset); ::INDUCT_ERANGE
 *         (pair range does not fit `seq_len`); ::INDUCT_ELIMIT (a task so large that c
 *         exceeds 4096 or the work ~4·10^10 operations); ::INDUCT_ENOMEM.
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_dataset_kv_ceiling(const induct_dataset *dataset, uint32_t seq_len,
                                         double *ceiling_out);

/* ---- byte-level text and token files ------------------------------------ */

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
    uint64_t max_bytes;      /**< Cap on the memory the dataset allocates, or 0 for none: the
                                  corpus (2 bytes a token), its document table and the split's
                                  segment tables. Input whose corpus needs more is refused with
                                  ::INDUCT_ELIMIT before it is read (file sizes are checked
                                  first; a file that grows while read is refused once past the
                                  cap), and tables that would not fit before they are built.
                                  A file's bytes are held while it is read, so the peak is at
                                  most 1.5 × max_bytes (docs/hardening.md). Default 0. */
} induct_text_config;

/** @brief Write the defaults into a text config of `size` bytes.
 *  @param cfg  The struct to fill (not NULL).
 *  @param size `sizeof(induct_text_config)` as the caller compiled it.
 *  @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (size).
 *  @since 0.1 Thread-safe. */
INDUCT_API int induct_text_config_init(induct_text_config *cfg, size_t size);

/**
 * @brief Byte-level text dataset from a caller's buffer (one document; copied).
 * @param[out] out Owned by the caller, released with induct_dataset_free(); NULL on failure.
 * @param bytes `n` bytes, any values.
 * @param n Number of bytes, ≥ 1.
 * @param cfg Copied.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, n 0, bad config: bos not 0/1,
 *         separator outside −1 … 255, unknown split, val_fraction outside [0, 1) or
 *         not finite, a document split, which needs two documents);
 *         ::INDUCT_EABI; ::INDUCT_ELIMIT (size overflow, or a corpus above
 *         `max_bytes`); ::INDUCT_ENOMEM.
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
 * @param[out] out Owned by the caller, released with induct_dataset_free(); NULL on failure.
 * @param path A regular file or a directory.
 * @param suffix File-name suffix filter for directories, or NULL.
 * @param cfg Copied.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, bad config, a document split with
 *         fewer than 2 non-empty documents); ::INDUCT_EIO (cannot open, stat or read,
 *         or `path` is neither a regular file nor a directory, e.g. a device or a FIFO;
 *         the path is named); ::INDUCT_EFORMAT (empty input: an empty file, or no
 *         non-empty matching file; the path is named); ::INDUCT_ELIMIT (size overflow,
 *         a directory tree deeper than 256, or input above `max_bytes`, refused before
 *         it is read); ::INDUCT_ENOMEM.
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
    uint64_t resident_limit; /**< Bound on the bytes of the files resident in the process.
                                  The files are read with pread(2), never mapped, so none
                                  of them becomes resident and any value is met; kept
                                  for compatibility (docs/datasets.md). Default 64 MiB. */
    uint64_t seed;           /**< Seed of the train windows. Default 0. */
    uint64_t max_bytes;      /**< Cap on the memory the dataset allocates, or 0 for none: the
                                  files are mapped, not copied, so this bounds the split's
                                  segment tables (up to 64 bytes per held-out block, e.g.
                                  with a tiny `block_tokens`), refused with ::INDUCT_ELIMIT
                                  before they are built (docs/hardening.md). Default 0. */
} induct_token_file_config;

/** @brief Write the defaults into a token-file config of `size` bytes.
 *  @param cfg  The struct to fill (not NULL).
 *  @param size `sizeof(induct_token_file_config)` as the caller compiled it.
 *  @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (size).
 *  @since 0.1 Thread-safe. */
INDUCT_API int induct_token_file_config_init(induct_token_file_config *cfg, size_t size);

/**
 * @brief Dataset over token files (read-only with pread(2): neither mapped nor copied).
 *
 * Every file is validated when opened: the size fits the format (a whole number of
 * tokens; for llm.c at least the 1024-byte header, the magic and version, and a size
 * of exactly 1024 + 2·count bytes), at least one token, and every id below d_vocab.
 * The validation pass and every window read go through small buffers, so no part of
 * the files becomes resident in the process however long the run and however large
 * the files. The files must not be changed or truncated while the dataset lives (a
 * window that can no longer be read gives ::INDUCT_EIO from induct_dataset_batch()).
 * @param[out] out Owned by the caller, released with induct_dataset_free(); NULL on failure.
 * @param path The training tokens (or all tokens, split by position).
 * @param val_path A separate validation file (nanoGPT's `val.bin`), or NULL to
 *        hold out part of `path` by ::induct_token_file_config::val_fraction.
 * @param cfg Copied.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, bad config); ::INDUCT_EIO (cannot open,
 *         stat or read); ::INDUCT_EFORMAT (truncated file, size not consistent with the
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

/**
 * @brief Training curriculum for text and token-file datasets: give a share of the
 * train split's windows one repeated span (Sabry & Belz 2025 report that training
 * windows containing repeated spans speed up induction-head formation).
 *
 * Afterwards each row of length T that induct_dataset_batch() draws from
 * ::INDUCT_SPLIT_TRAIN is, with probability `fraction`, changed in one place: a span
 * length L uniform in `[min_len, min(max_len, ⌊T/2⌋)]` (tokens) and a pair of starts
 * (a, b) uniform over all pairs with `0 ≤ a`, `a + L ≤ b`, `b + L ≤ T`; then
 * `row[b … b+L) = row[a … a+L)` (the later copy overwrites text; the earlier span is
 * unchanged). The window starts are drawn exactly as without the curriculum (the
 * repeats come from a separate random stream of (seed, batch index), row by row), so
 * a row equals the plain window outside `[b, b+L)`; `meta_out` still gives the window
 * start, and the rows stay a pure function of (dataset, split, index, seq_len); row b
 * does not depend on `batch`. This is a curriculum, not data: ::INDUCT_SPLIT_EVAL is
 * never changed, so evaluation stays on untouched held-out text. Every reader of the
 * train split sees the repeats (induct_train_step(), induct_train(), and an
 * evaluation config whose `split` is ::INDUCT_SPLIT_TRAIN). docs/datasets.md,
 * "Repeated-span curriculum".
 *
 * With `fraction > 0`, a train batch with `seq_len < 2·min_len` (no room for two
 * copies of the shortest span) is refused by induct_dataset_batch() with
 * ::INDUCT_ERANGE rather than silently left without repeats. `fraction = 0` (the
 * default of every dataset) turns the curriculum off: batches are then identical to
 * those of a dataset on which this was never called.
 * @param dataset A dataset from induct_dataset_new_text(), induct_dataset_new_text_path()
 *        or induct_dataset_new_token_file().
 * @param fraction Probability that a train row carries a repeated span, finite, in [0, 1].
 * @param min_len Shortest span in tokens, ≥ 1.
 * @param max_len Longest span in tokens, ≥ min_len (capped per batch at ⌊seq_len/2⌋).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, fraction outside [0, 1] or not finite,
 *         min_len 0 or above max_len; the dataset is then unchanged);
 *         ::INDUCT_ENOTSUP (a repeated-random-token, key–value or token-array dataset).
 * @since 0.1 Changes the dataset: not concurrently with any other use of it (a batch,
 *        a training step, another thread's read). Call it before the dataset is
 *        shared; afterwards the dataset may be shared again like any dataset.
 */
INDUCT_API int induct_dataset_set_repeats(induct_dataset *dataset, double fraction,
                                          uint32_t min_len, uint32_t max_len);
/** @} */

/* ------------------------------------------------------------------------ */
/** @defgroup optim Training: optimizer and training step
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
    INDUCT_OPT_STEP = 12,         /**< Steps taken so far (read; writable to resume), integer in [0, 2^53]. */
    INDUCT_OPT_GRAD_SHARDS = 13   /**< Gradient shards S, integer in [1, 65536]: a step splits its batch into
                                       S shards of batch/S sequences and adds their gradients in one fixed
                                       binary tree (docs/distributed.md); the batch must be a multiple of S.
                                       1 = one pass over the whole batch. Saved in optimizer checkpoints.
                                       Default 1. @since 0.1 */
} induct_opt_param;

/**
 * @brief Create an optimizer for `model` (it takes a reference to the model).
 * Moments start at 0 and the step counter at 0.
 * @param[out] out Owned by the caller, released with induct_optimizer_free(); NULL on failure.
 * @param model The model whose parameters it updates; it stays alive while the
 *              optimizer does. Use one thread for the pair.
 * @param kind ::INDUCT_OPTIM_ADAMW or ::INDUCT_OPTIM_SGD.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, unknown kind); ::INDUCT_ELIMIT (the moments,
 *         4 or 8 bytes per parameter, would take induct_model_memory_used() past the
 *         model's `max_bytes`; nothing is allocated); ::INDUCT_ENOMEM.
 * @since 0.1
 */
INDUCT_API int induct_optimizer_new(induct_optimizer **out, induct_model *model, uint32_t kind);
/** @brief Release an optimizer (and its reference to the model). A communicator
 *  attached with induct_optimizer_set_comm() is not used after it returns (the caller
 *  still owns it).
 *  @param opt The optimizer, or NULL (a no-op).
 *  @since 0.1 Not concurrently with any other use of the same optimizer. */
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
 * dataset's train split, forward, backward, optimizer update. With
 * ::INDUCT_OPT_GRAD_SHARDS > 1 or a communicator (induct_optimizer_set_comm()) the
 * gradient is the fixed shard tree's (@ref distributed).
 * @param opt The optimizer (and through it the model).
 * @param dataset Source of the batch (only read; may be shared with other threads).
 * @param batch Number of sequences, ≥ 1.
 * @param seq_len Tokens per sequence, 2 … n_ctx.
 * @param[out] loss_out Mean per-token loss of the batch before the update (nats), or NULL.
 * @return the errors of induct_dataset_batch(), induct_model_backward() and
 *         induct_optimizer_step(); ::INDUCT_EINVAL if the dataset's vocabulary
 *         exceeds the model's, if batch is not a multiple of ::INDUCT_OPT_GRAD_SHARDS
 *         or that is not a multiple of the communicator's rank count; ::INDUCT_ERANGE
 *         if seq_len > n_ctx; a communicator's failure (its status, or ::INDUCT_EIO;
 *         the communicator's `abort` is called first). On any error the weights, the
 *         moments and the step counter are unchanged.
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
/** @defgroup distributed Training: gradient shards and communicators
 *  Data-parallel training whose weights are bit-identical for every number of ranks.
 *  A step with ::INDUCT_OPT_GRAD_SHARDS = S splits its batch of B sequences into S
 *  shards of B/S consecutive sequences; shard i's gradient is that of its summed
 *  per-token losses divided by the number of scored tokens of the whole batch (the
 *  same 1/N factor as a one-pass step), and the S shard gradients are added in one
 *  fixed binary tree: `tree(lo, n) = tree(lo, ⌈n/2⌉) + tree(lo + ⌈n/2⌉, ⌊n/2⌋)`,
 *  the left operand first, elementwise in float (pairwise for S a power of two:
 *  0+1, 2+3, then pairs of pairs). The loss sums of the shards (double) go through the
 *  same tree and the step's loss is that sum divided by the scored-token count.
 *
 *  With a communicator of P ranks (any P dividing S), rank r computes shards
 *  `r·S/P … (r+1)·S/P − 1`. For P a power of two the top log2(P) levels of the tree are
 *  its rank groups, summed by recursive halving (reduce-scatter) and recursive doubling
 *  (all-gather) over the communicator's send-and-receive. For other P each rank sums the
 *  largest subtrees made of its own shards; the gradient is cut into P segments, rank j
 *  receives every such subtree's segment j (one exchange with every other rank), adds the
 *  nodes above them in the tree's order, and the segments are exchanged back. Either way
 *  each element is added by one rank in the tree's order and copied to the others: every
 *  rank ends a step with the same gradient, loss and weights as one process with the
 *  same S, bit for bit. See docs/distributed.md.
 *  @{ */

/**
 * @brief A communicator: P ranks that exchange byte buffers, as a table of callbacks
 * (MPI is not linked into libinduct; an MPI layer, or the in-process one of
 * induct_comm_threads_new(), fills the table). Size-prefixed: set
 * `size = sizeof(induct_comm)`; fields are only ever appended. The library copies the
 * table (induct_optimizer_set_comm()); `user` is borrowed and must stay valid while
 * the optimizer uses it.
 *
 * Callbacks return 0 on success, or a negative ::induct_status (any other non-zero
 * value is reported as ::INDUCT_EIO). They are called on the thread that runs the
 * training step of this rank, every rank in the same order.
 * @since 0.1
 */
typedef struct induct_comm {
    size_t size;       /**< `sizeof(induct_comm)` as the caller compiled it. */
    uint32_t rank;     /**< This rank, 0 … n_ranks − 1. */
    uint32_t n_ranks;  /**< Number of ranks P, 1 … 65536 (it must divide ::INDUCT_OPT_GRAD_SHARDS). */
    void *user;        /**< Passed to every callback. */
    /** Send `send_bytes` from `sendbuf` to rank `peer` and receive `recv_bytes` from
     *  it into `recvbuf` (as MPI_Sendrecv); blocks until both are done. The peer makes
     *  the matching call with the sizes swapped. Either size may be 0. Required. */
    int (*sendrecv)(void *user, uint32_t peer, const void *sendbuf, size_t send_bytes,
                    void *recvbuf, size_t recv_bytes);
    /** Wait until every rank has called it. Required. */
    int (*barrier)(void *user);
    /** Called by a rank whose step failed after it may have left peers waiting in
     *  `sendrecv` or `barrier`: it must make their pending and later calls return an
     *  error (the threaded communicator does; an MPI layer may call MPI_Abort). NULL: a
     *  failing rank's peers may wait forever. */
    void (*abort)(void *user, int status);
} induct_comm;

/**
 * @brief Attach a communicator to an optimizer (or detach it with NULL): from then on
 * every training step of this optimizer (induct_train_step(), induct_train(),
 * induct_train_step_tokens() and their `_with_hooks` forms) computes only this rank's
 * gradient shards and sums them with the other ranks' (see @ref distributed). Caller
 * hooks in a step run on this rank's shards only (induct_train_step_with_hooks()). Each rank holds its own model and
 * optimizer, created identically (same config, seed and settings), and calls the same
 * steps with the same dataset, batch and seq_len: each rank reads the whole batch
 * (induct_dataset_batch() is a pure function of the step counter) and uses its rows.
 * ::INDUCT_OPT_GRAD_SHARDS must be a multiple of n_ranks when a step runs.
 * @param opt The optimizer.
 * @param comm The table (copied; only the first `comm->size` bytes are read), or NULL.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL optimizer, a NULL `sendrecv` or
 *         `barrier`, n_ranks not in 1 … 65536, rank ≥ n_ranks);
 *         ::INDUCT_EABI (`comm->size` below the 0.1 struct or above 4096). The old
 *         communicator is kept on failure.
 * @since 0.1 One thread per optimizer, as for the training step.
 */
INDUCT_API int induct_optimizer_set_comm(induct_optimizer *opt, const induct_comm *comm);

/** @brief An in-process communicator: P ranks that are threads of one process sharing
 *  memory (for tests, and for data-parallel training without MPI). @since 0.1 */
typedef struct induct_comm_threads induct_comm_threads;

/**
 * @brief Create P thread ranks. Rank r's table is induct_comm_threads_rank(); give it
 * to the optimizer that thread r drives. `sendrecv` copies the peer's buffer with
 * memcpy (sizes must match the peer's: else ::INDUCT_EINVAL on both); `abort` makes
 * every pending and later call of every rank return ::INDUCT_EINTERRUPTED (free the
 * group and create a new one to start again).
 * @param[out] out Owned by the caller, released with induct_comm_threads_free() once
 *             no rank uses it; NULL on failure.
 * @param n_ranks P, 1 … 64.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, P not in range);
 *         ::INDUCT_ENOMEM.
 * @since 0.1 The callbacks are thread-safe (one thread per rank).
 */
INDUCT_API int induct_comm_threads_new(induct_comm_threads **out, uint32_t n_ranks);
/** @brief Rank r's table (valid until induct_comm_threads_free()).
 *  @param group The group.
 *  @param rank 0 … n_ranks − 1.
 *  @return The table, or NULL with induct_last_error_code() ::INDUCT_EINVAL (NULL group)
 *          or ::INDUCT_ERANGE (rank ≥ n_ranks); the message says which.
 *  @since 0.1 Thread-safe. */
INDUCT_API const induct_comm *induct_comm_threads_rank(const induct_comm_threads *group,
                                                       uint32_t rank);
/** @brief Release a group (no rank may be inside a callback).
 *  @param group The group, or NULL (a no-op).
 *  @since 0.1 */
INDUCT_API void induct_comm_threads_free(induct_comm_threads *group);
/** @} */

/* ------------------------------------------------------------------------ */
/** @defgroup train Training: driver and metrics log
 *  induct_train() runs many steps with evaluation, a JSON Lines metrics log,
 *  snapshots and a progress callback. See docs/training.md.
 *  @{ */

/** Metric: mean per-token loss over the evaluation set (nats). JSON key
 *  `eval_loss`. @since 0.1 */
#define INDUCT_TRAIN_METRIC_LOSS 0x001u
/** Metric: in-context learning score, loss of the 500th minus the 50th token
 *  (ICL paper, "Key Concepts"; nats), induct_analysis_icl_score() on the evaluation
 *  set; needs seq_len ≥ 501 (else ::INDUCT_ERANGE before any step). JSON key
 *  `icl_score`. @since 0.1 */
#define INDUCT_TRAIN_METRIC_ICL_SCORE 0x002u
/** Metric: loss by position, `mean_b L_b[p]` for p = 0 … seq_len−2 (nats). JSON key
 *  `loss_by_position`, a list (induct_analysis_loss_by_position()). @since 0.1 */
#define INDUCT_TRAIN_METRIC_LOSS_BY_POSITION 0x004u
/** Metric: prefix-matching score per head (ICL paper, Appendix), `[n_layers][n_heads]`.
 *  induct_analysis_prefix_matching() on ::induct_train_config::probe (default: the
 *  dataset's probe, induct_probe_config_for_dataset()). JSON key
 *  `prefix_matching_score`. @since 0.1 */
#define INDUCT_TRAIN_METRIC_PREFIX_MATCHING 0x008u
/** Metric: previous-token score per head, induct_analysis_previous_token_score() on
 *  the evaluation set, `[n_layers][n_heads]`, in [0, 1]. JSON key
 *  `previous_token_score`. @since 0.1 */
#define INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN 0x010u
/** Metric: copying score per head (ICL paper, Appendix), `[n_layers][n_heads]`. JSON
 *  key `copying_score` (induct_analysis_copying() on ::induct_train_config::probe, as
 *  the prefix-matching metric). @since 0.1 */
#define INDUCT_TRAIN_METRIC_COPYING 0x020u
/** Metric: accuracy of the answer token on the key–value retrieval task (fraction).
 *  JSON key `kv_accuracy` (induct_analysis_kv_accuracy()); KV datasets only. @since 0.1 */
#define INDUCT_TRAIN_METRIC_KV_ACCURACY 0x040u
/** Metric: attention on the answer position per head on the key–value task,
 *  `[n_layers][n_heads]` (induct_analysis_kv_attention()). JSON key
 *  `kv_attention_on_answer`; KV datasets only. @since 0.1 */
#define INDUCT_TRAIN_METRIC_KV_ATTENTION 0x080u
/** Metric: induction score per head (the prefix-matching score on the training data),
 *  induct_analysis_induction_score() on the evaluation set (needs a
 *  repeated-random-token dataset without BOS),
 *  `[n_layers][n_heads]`, in [0, 1]. JSON key `induction_score`. @since 0.1 */
#define INDUCT_TRAIN_METRIC_INDUCTION_SCORE 0x100u
/** Metric: per-token loss vector (ICL paper, Appendix "Data Collection"): the loss of
 *  each evaluation sequence i at its fixed random position `pos_i`, `[eval_batch]`,
 *  nats; induct_analysis_loss_vectors() on the evaluation set with `pos_seed` 0
 *  (positions from induct_analysis_loss_positions()). Stack the vectors of every
 *  evaluation (and model) and give them to induct_analysis_pca(). JSON key
 *  `loss_vectors`. @since 0.1 */
#define INDUCT_TRAIN_METRIC_LOSS_VECTORS 0x200u

/** @brief Probe sequences of the head evaluators; defined with the analyses
 *  (::induct_probe_config, induct_probe_config_init()). @since 0.1 */
typedef struct induct_probe_config induct_probe_config;

/**
 * @brief Settings of one induct_train() call. Size-prefixed: set
 * `size = sizeof(induct_train_config)` (induct_train_config_init() does); fields are
 * only ever appended. Strings are borrowed for the duration of the call only.
 *
 * Schedules (evaluation and snapshots alike) are points of the optimizer's step
 * counter s: every multiple of `*_every` (when non-zero) and every power of two when
 * `*_log2` is 1 (1, 2, 4, 8, … as the ICL paper's log-spaced snapshots). A point is
 * taken when the counter reaches it during the call, and at s = 0 when the call starts
 * from step 0 (the initialisation). Evaluation also runs once at the final step.
 * @since 0.1
 */
typedef struct induct_train_config {
    size_t size;               /**< `sizeof(induct_train_config)` as the caller compiled it. */
    uint64_t steps;            /**< Train until the optimizer's step counter equals this
                                    (an absolute target, so a resumed run uses the same
                                    value). Default 1000. */
    uint32_t batch;            /**< Sequences per step, ≥ 1. Default 32. */
    uint32_t seq_len;          /**< Tokens per sequence, 2 … n_ctx; 0 means n_ctx. Default 0. */
    uint64_t eval_every;       /**< Evaluate every this many steps; 0 = never (unless
                                    `eval_log2`). Default 0. */
    uint32_t eval_log2;        /**< 1: also evaluate at every power of two. Default 0. */
    uint32_t eval_batch;       /**< Sequences in the evaluation set: batch 0 of the
                                    dataset's eval split, the same for every evaluation.
                                    Default 64. */
    uint32_t metrics;          /**< Bit set of `INDUCT_TRAIN_METRIC_*`. Default
                                    ::INDUCT_TRAIN_METRIC_LOSS. */
    uint32_t metrics_append;   /**< 1: continue `metrics_path` (to resume): its records of steps after
                                    the optimizer's step counter (all of them at step 0, which is
                                    evaluated again) and an incomplete last line, left by a run
                                    killed after its last snapshot, are cut off, then records are
                                    appended; 0: truncate it first. Default 0. */
    const char *metrics_path;  /**< JSON Lines file, one record per evaluation, or NULL for
                                    none. Keys and units: docs/training.md. Default NULL. */
    uint64_t snapshot_every;   /**< Snapshot every this many steps; 0 = never (unless
                                    `snapshot_log2`). Default 0. */
    uint32_t snapshot_log2;    /**< 1: also snapshot at every power of two. Default 0. */
    uint32_t snapshot_optimizer; /**< 1: snapshot files hold the optimizer state too
                                    (induct_optimizer_save(), resumable); 0: weights only
                                    (induct_model_save()). Default 1. */
    const char *snapshot_path; /**< Path template of snapshot files; every `{step}` is replaced
                                    by the step counter in decimal. NULL: no file, the
                                    callback still receives ::INDUCT_TRAIN_EVENT_SNAPSHOT.
                                    Default NULL. */
    double target_loss;        /**< Stop condition: end the run (returning ::INDUCT_OK) after an
                                    evaluation whose `eval_loss` is ≤ this (nats). 0 = off;
                                    needs ::INDUCT_TRAIN_METRIC_LOSS and an evaluation
                                    schedule. Default 0. */
    const induct_probe_config *probe; /**< Probe of the prefix-matching and copying
                                    metrics (borrowed for the call, checked before any
                                    step), or NULL for induct_probe_config_for_dataset() of
                                    the training dataset: its BOS and token range.
                                    A caller whose struct ends before this field (a
                                    smaller `size`) gets NULL. Default NULL. */
} induct_train_config;

/**
 * @brief Write the defaults into a training config of `size` bytes.
 * @param cfg  The struct to fill (not NULL).
 * @param size `sizeof(induct_train_config)` as the caller compiled it.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (size below the 0.1
 *         struct or above 4096).
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_train_config_init(induct_train_config *cfg, size_t size);

/** Event bit of ::induct_progress: a training step completed. @since 0.1 */
#define INDUCT_TRAIN_EVENT_STEP 0x01u
/** Event bit: an evaluation ran (its record is in the metrics log). @since 0.1 */
#define INDUCT_TRAIN_EVENT_EVAL 0x02u
/** Event bit: a snapshot point (the file, if any, is written). @since 0.1 */
#define INDUCT_TRAIN_EVENT_SNAPSHOT 0x04u
/** Event bit: the run ends after this callback (target step or target loss reached).
 *  @since 0.1 */
#define INDUCT_TRAIN_EVENT_DONE 0x08u
/** Event bit: the run ends because `eval_loss` ≤ `target_loss`. @since 0.1 */
#define INDUCT_TRAIN_EVENT_TARGET 0x10u

/**
 * @brief What the progress callback receives. Filled by the library; read only the
 * fields that fit in `size` (a newer library may append fields).
 * @since 0.1
 */
typedef struct induct_progress {
    size_t size;              /**< `sizeof(induct_progress)` of the library. */
    uint32_t events;          /**< Bit set of `INDUCT_TRAIN_EVENT_*`. */
    uint32_t reserved0;       /**< 0. */
    uint64_t step;            /**< The optimizer's step counter now. */
    uint64_t steps;           /**< The target step counter (the config's `steps`). */
    double loss;              /**< Training loss of the step just taken (nats); NaN without
                                   ::INDUCT_TRAIN_EVENT_STEP. */
    double lr;                /**< Learning rate that step used; NaN without a step. */
    double tokens_per_second; /**< Training tokens (batch × seq_len per step) per second of
                                   time spent in training steps during this call. */
    double elapsed_seconds;   /**< Wall time since the call started (steps, evaluation,
                                   snapshots). */
    double eta_seconds;       /**< Estimated wall time to the target step at the average
                                   pace of this call so far (evaluation included). */
    double eval_loss;         /**< `eval_loss` of this event's evaluation (nats); NaN without
                                   ::INDUCT_TRAIN_EVENT_EVAL or without the loss metric. */
    const char *snapshot_path;/**< File written at this snapshot, or NULL. Valid during
                                   the callback only. */
} induct_progress;

/**
 * @brief Progress callback: called on the thread that called induct_train(), after
 * every step and at every evaluation or snapshot point. It may read the model (save
 * it, run analyses, call induct_model_interrupt()) but must not free the model,
 * optimizer or dataset, nor change the weights.
 * @param progress Valid during the call only.
 * @param user_data The pointer given to induct_train().
 * @return 0 to continue; non-zero to stop the run before the next step
 *         (induct_train() then returns ::INDUCT_EINTERRUPTED).
 * @since 0.1
 */
typedef int (*induct_progress_fn)(const induct_progress *progress, void *user_data);

/**
 * @brief Train the optimizer's model on `dataset` until the step counter reaches
 * `cfg->steps`, evaluating, logging and snapshotting on the config's schedule.
 *
 * Each step is induct_train_step(): batch number s (the step counter) of the train
 * split, so data order follows the counter and a resumed run (induct_model_load() +
 * induct_optimizer_load() from an induct_optimizer_save() file) continues
 * bit-identically. At each point of the evaluation schedule the requested metrics
 * are computed on the evaluation set (batch 0 of the eval split, `eval_batch` ×
 * `seq_len`), appended as one JSON object per line to `metrics_path` (flushed after
 * every line) and reported to the callback. Evaluation and snapshots do not change
 * the weights or the optimizer.
 *
 * Stopping: the callback's non-zero return or induct_model_interrupt() (any thread)
 * stops the run between steps with ::INDUCT_EINTERRUPTED; the weights, moments and
 * step counter are then exactly those after the last completed step. The model's
 * interrupt flag is cleared when the call starts. `target_loss` ends the run with
 * ::INDUCT_OK. If the counter already equals or exceeds `steps`, nothing is trained
 * (a start-of-run evaluation at step 0 still happens when steps is 0).
 *
 * Data-parallel (a communicator attached with induct_optimizer_set_comm()): every
 * rank calls induct_train() with the same config and dataset; every rank trains and
 * evaluates alike, rank 0 alone writes `metrics_path` and the snapshot files (the
 * other ranks' callbacks get ::INDUCT_TRAIN_EVENT_SNAPSHOT with a NULL path), and a
 * stop request on any rank stops every rank before the same step (one small exchange
 * per step). A failure of one rank alone calls the communicator's `abort`.
 *
 * Every metric bit is checked before the first step, whether or not an evaluation
 * is scheduled: one the dataset or the context length cannot provide returns
 * ::INDUCT_EINVAL or ::INDUCT_ERANGE naming it. Files are not touched when the
 * arguments are refused.
 *
 * @param opt The optimizer; its model is trained.
 * @param dataset Train split for steps, eval split for evaluation.
 * @param cfg Settings (copied at the start; NULL is refused).
 * @param progress Callback or NULL.
 * @param user_data Passed to `progress`.
 * @return ::INDUCT_OK (target step or target loss reached); ::INDUCT_EINTERRUPTED;
 *         ::INDUCT_EINVAL (NULL, batch 0, seq_len 1, eval_batch 0 with evaluation on,
 *         unknown metric bits, a target without loss evaluation, a dataset vocabulary
 *         above the model's, a metric the dataset cannot provide, an eval split that
 *         cannot hold the evaluation set); ::INDUCT_ERANGE (seq_len > n_ctx, a dataset
 *         that cannot produce sequences of seq_len, a context too short for the ICL
 *         score); ::INDUCT_EABI (config size); ::INDUCT_EIO (metrics or snapshot
 *         file); ::INDUCT_ENUMERIC (non-finite loss or gradient; the failed step left
 *         the weights unchanged); ::INDUCT_ENOMEM.
 * @since 0.1 Uses the model: one thread per model, except induct_model_interrupt().
 */
INDUCT_API int induct_train(induct_optimizer *opt, const induct_dataset *dataset,
                            const induct_train_config *cfg, induct_progress_fn progress,
                            void *user_data);
/** @} */

/* ------------------------------------------------------------------------ */
/** @defgroup analysis Analyses
 *  The measurements of the ICL paper and the Framework, per head, with the
 *  definitions of docs/analysis.md (which states every choice we made where the
 *  papers leave a detail open). Shapes are row-major; head tables are
 *  `[n_layers][n_heads]`. Losses are in nats (natural log).
 *
 *  Functions that run the model honour the head ablations in force (see
 *  induct_model_ablate_head()); functions that read only weights
 *  (induct_analysis_copying_eigen(), induct_analysis_composition()) ignore them.
 *  No analysis changes the weights. Every analysis that runs the model uses its
 *  workspace: one thread per model at a time, as for induct_model_forward().
 *  @{ */

/* ---- evaluation set, ICL score, loss by position, loss vectors ----------- */

/**
 * @brief The fixed evaluation set and the indices of the ICL score.
 *
 * The evaluation set is batch number `batch_index` of the dataset's `split`, drawn
 * with batch size `n_seq` and sequence length `seq_len` (so it is the same for
 * every model and snapshot given the same dataset and config). It is run through
 * the model in chunks of at most `chunk` sequences (this changes only memory use and
 * speed: the same bits for every `chunk` of at least 48 / gcd(seq_len, 48) sequences). Size-prefixed: set `size = sizeof(induct_eval_config)`
 * (induct_eval_config_init() does). Fields are only ever appended: the analyses also
 * accept the 48-byte struct of callers compiled before `positions` existed (every
 * position).
 * @since 0.1
 */
typedef struct induct_eval_config {
    size_t size;          /**< `sizeof(induct_eval_config)` as the caller compiled it. */
    uint32_t n_seq;       /**< Sequences in the evaluation set, ≥ 1. Default 8. */
    uint32_t seq_len;     /**< Tokens per sequence; 0 means the model's n_ctx. Default 0. */
    uint32_t chunk;       /**< At most this many sequences per forward pass, ≥ 1 (a memory
                               bound). The set runs in the chunks of the library's one
                               evaluation rule (about 4096 tokens, a multiple of g = 48 /
                               gcd(seq_len, 48) sequences, so that every row keeps its place
                               in the matrix-product tiles), cut to this bound and rounded
                               down to a multiple of g: every `chunk` ≥ g gives the same
                               bits as one pass (g = 3 at seq_len 512); a smaller one, or
                               any in a build without OpenMP, may differ by float rounding.
                               Default 4. */
    uint32_t early;       /**< The "k-th token" of the early loss: L[early − 1], ≥ 1.
                               Default 50. */
    uint32_t late;        /**< The "k-th token" of the late loss: L[late − 1], > early.
                               Default 500. */
    uint32_t split;       /**< ::INDUCT_SPLIT_TRAIN or ::INDUCT_SPLIT_EVAL.
                               Default ::INDUCT_SPLIT_EVAL. */
    uint64_t batch_index; /**< Which batch of the split is the evaluation set. Default 0. */
    uint64_t pos_seed;    /**< Seed of the fixed random position per sequence
                               (induct_analysis_loss_vectors()). Default 0. */
    const uint32_t *positions; /**< The context indices p (0-based, strictly
                               increasing, each < seq_len − 1) at which
                               induct_analysis_loss_by_position() and the `avg_out` of
                               induct_analysis_loss_vectors() compute the loss; the other
                               indices are NaN. The final LayerNorm, unembedding and
                               cross-entropy then run at these rows only (equal to the full
                               pass within float rounding of the logits; see
                               induct_analysis_loss_by_position()). Borrowed for the
                               duration of the call. NULL with `n_positions` 0 (the default): every
                               position. Other analyses ignore it (the ICL score always
                               computes only its two indices). */
    uint32_t n_positions; /**< Length of `positions`; 0 = every position. Default 0. */
    uint32_t reserved0;   /**< Must be 0. */
} induct_eval_config;

/**
 * @brief Write the defaults into an evaluation config of `size` bytes.
 * @param cfg  The struct to fill (not NULL).
 * @param size `sizeof(induct_eval_config)` as the caller compiled it.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (size below the 0.1
 *         struct or above 4096).
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_eval_config_init(induct_eval_config *cfg, size_t size);

/**
 * @brief In-context learning score (ICL paper, "Key Concepts" and Appendix "Analyses").
 *
 * `icl = mean_b L_b[late − 1] − mean_b L_b[early − 1]` over the evaluation set, where
 * `L_b[p] = −ln P(t[p+1] | t[0..p])` (nats): the loss of the `late`-th token minus the
 * loss of the `early`-th token, "the k-th token" being the one predicted from k tokens
 * of context (defaults 500 and 50 as in the paper). Negative means the model uses
 * context. A model with all-zero logits scores exactly 0. Only the two indices are
 * computed (final LayerNorm, unembedding and cross-entropy at those rows; `positions`
 * is ignored), with the full pass's cross-entropy kernel (see
 * induct_analysis_loss_by_position() on the rounding of the logits).
 *
 * @param model   The model; its ablations in force apply.
 * @param dataset Source of the evaluation set; its vocabulary must fit the model's.
 * @param cfg     Evaluation set and indices; NULL means the defaults.
 * @param[out] score_out The score in nats (not NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model, dataset or score_out; n_seq or chunk
 *         0; early 0 or early ≥ late; unknown split; dataset vocabulary larger than the
 *         model's); ::INDUCT_EABI (cfg size); ::INDUCT_ERANGE (seq_len < late + 1: the
 *         context is too short to hold both indices — never clamped; seq_len > n_ctx;
 *         or the dataset cannot produce sequences that long); ::INDUCT_ENOMEM;
 *         ::INDUCT_ENUMERIC; ::INDUCT_EINTERRUPTED (induct_model_interrupt()).
 *         On failure `*score_out` is unchanged.
 * @since 0.1 One thread per model.
 */
INDUCT_API int induct_analysis_icl_score(induct_model *model, const induct_dataset *dataset,
                                         const induct_eval_config *cfg, double *score_out);

/**
 * @brief Loss by position (the "context-index average"), `[seq_len − 1]`:
 * `out[p] = mean_b L_b[p]` in nats over the evaluation set (ICL paper, Appendix).
 *
 * `early` and `late` are not used here except that they must satisfy
 * 1 ≤ early < late, so the same config serves both; unlike the ICL score, the context
 * need not hold them (the curve is defined for any seq_len ≥ 2). With `cfg->positions`
 * set, only `out[p]` for the listed p are computed (the final LayerNorm, unembedding
 * and cross-entropy run at those rows only; the layers below still see every token);
 * every other entry is NaN. The computed entries use the same cross-entropy kernel as
 * the full pass; the logits come from a matrix product over fewer rows, which a BLAS
 * may round differently in the last bits (measured: identical bits with OpenBLAS at
 * the phase-change example's shapes), so they equal the full pass's within float
 * rounding of the unembedding product.
 * @param model   The model; the ablations in force apply; weights are not changed.
 * @param dataset Source of the evaluation set (see induct_analysis_icl_score()).
 * @param cfg     Evaluation set; NULL means the defaults.
 * @param out `[seq_len − 1]` floats, or NULL with `out_cap` 0 to ask the length.
 * @param out_cap Capacity of `out` in floats.
 * @param[out] out_len Set to `seq_len − 1` (may be NULL).
 * @return as induct_analysis_icl_score() except the context-length error;
 *         ::INDUCT_EBUFSIZE (buffer too small; `*out_len` holds the length needed);
 *         ::INDUCT_EINVAL (`positions` NULL with `n_positions` > 0 or set with 0, not
 *         strictly increasing, `reserved0` not 0); ::INDUCT_ERANGE (a position ≥
 *         seq_len − 1).
 * @since 0.1 One thread per model.
 */
INDUCT_API int induct_analysis_loss_by_position(induct_model *model,
                                                const induct_dataset *dataset,
                                                const induct_eval_config *cfg, float *out,
                                                size_t out_cap, size_t *out_len);

/**
 * @brief Per-token loss vectors of one snapshot (ICL paper, Appendix "Data Collection").
 *
 * (a) `per_seq_out[i] = L_i[pos_i]`: the loss of sequence i at its fixed random
 * position `pos_i` (see induct_analysis_loss_positions()), a vector of length n_seq;
 * (b) `avg_out[p] = mean_i L_i[p]`, the context-index average, length seq_len − 1.
 * Both come from one pass over the evaluation set. Stack the (a) vectors of many
 * snapshots and pass them to induct_analysis_pca(). With `cfg->positions` set, (b) is
 * NaN outside the listed indices (see induct_analysis_loss_by_position()), while (a)
 * stays complete: each sequence's own `pos_i` is computed as well, listed or not.
 * @param model   The model; the ablations in force apply; weights are not changed.
 * @param dataset Source of the evaluation set (see induct_analysis_icl_score()).
 * @param cfg     Evaluation set and `pos_seed`; NULL means the defaults.
 * @param per_seq_out `[n_seq]` or NULL (then `per_seq_cap` must be 0).
 * @param per_seq_cap Capacity of `per_seq_out` in floats.
 * @param avg_out `[seq_len − 1]` or NULL (then `avg_cap` must be 0).
 * @param avg_cap Capacity of `avg_out` in floats.
 * @return as induct_analysis_loss_by_position(); ::INDUCT_EBUFSIZE (a non-NULL buffer is
 *         too small; the message names the length needed).
 * @since 0.1 One thread per model.
 */
INDUCT_API int induct_analysis_loss_vectors(induct_model *model, const induct_dataset *dataset,
                                            const induct_eval_config *cfg, float *per_seq_out,
                                            size_t per_seq_cap, float *avg_out, size_t avg_cap);

/**
 * @brief The fixed random positions of induct_analysis_loss_vectors(), `[n_seq]`:
 * `pos_i` is uniform in `[0, seq_len − 2]`, a pure function of (pos_seed, i, seq_len).
 * @param model Gives n_ctx when `cfg->seq_len` is 0; not modified.
 * @param cfg   NULL means the defaults.
 * @param out   `[n_seq]` or NULL with `out_cap` 0 to ask the length.
 * @param out_cap Capacity of `out` in elements.
 * @param[out] out_len Set to n_seq (may be NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL; ::INDUCT_EABI; ::INDUCT_ERANGE (seq_len < 2 or
 *         > n_ctx); ::INDUCT_EBUFSIZE.
 * @since 0.1 Thread-safe (reads the model's config only).
 */
INDUCT_API int induct_analysis_loss_positions(const induct_model *model,
                                              const induct_eval_config *cfg, uint32_t *out,
                                              size_t out_cap, size_t *out_len);

/* ---- attention read-outs on a dataset ------------------------------------ */

/**
 * @brief Induction score per head, `[n_layers][n_heads]`: the prefix-matching score
 * (induct_analysis_prefix_matching(), the one induction score of this library) read on
 * the training data instead of a probe. Kept as a documented alias of that score for
 * existing callers and metrics logs.
 *
 * Same target rule, computed by the same code: a query's target is the position right
 * after the earlier occurrence of its token. It differs only in where it looks, in the
 * way the common "induction score" does (docs/definitions.md, "Prefix-matching score"):
 * the sequences are batch 0 of the dataset's eval split (an RRT dataset with 2 or more
 * repeats and no BOS; L is each row's block length), only the second copy is scored,
 * from its second token on (queries t in `[L+1, 2L)`, target `t − L + 1`), and the
 * attention is averaged over every such query of every sequence (pooled, so longer
 * blocks weigh more). Range [0, 1].
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

/* ---- probes and head evaluators ----------------------------------------- */

/**
 * @brief Synthetic probe sequences for the head evaluators (ICL paper, Appendix,
 * "head activation evaluators"). Size-prefixed; fields are only ever appended.
 *
 * Probe sequence b is `[BOS] + r + r + … (n_repeats copies)`, r a block of
 * `block_len` tokens drawn without replacement from `[token_lo, token_hi)`, from a
 * random stream that depends only on (seed, b). The copying probe is `[BOS if
 * copying_bos] + r` (the same block, not repeated).
 * @since 0.1
 */
struct induct_probe_config {
    size_t size;          /**< `sizeof(induct_probe_config)` as the caller compiled it. */
    uint32_t n_seq;       /**< Probe sequences, ≥ 1. Default 10. */
    uint32_t block_len;   /**< Tokens per block, ≥ 1. Default 25. */
    uint32_t n_repeats;   /**< Copies of the block in the repeated probe, ≥ 2. Default 4. */
    int32_t bos;          /**< BOS id at position 0, or −1 for none; outside the token
                               range. Default 0. */
    uint32_t token_lo;    /**< First id of the token range. Default 1. */
    uint32_t token_hi;    /**< One past the last id; 0 means d_vocab. Default 0. */
    uint32_t copying_bos; /**< 1: the copying probe starts with BOS too (the paper omitted
                               it by mistake). Default 0. */
    uint32_t reserved0;   /**< Must be 0. */
    uint64_t seed;        /**< Seed of the probe stream. Default 0. */
};

/**
 * @brief Write the defaults into a probe config of `size` bytes (BOS 0, tokens from
 * `[1, d_vocab)`, 25 tokens × 4 repeats, 10 sequences, seed 0): the ICL paper's probe,
 * for a model whose training data is not at hand. For a model trained on a dataset,
 * induct_probe_config_for_dataset() gives the probe with that data's BOS.
 * @param cfg  The struct to fill (not NULL).
 * @param size `sizeof(induct_probe_config)` as the caller compiled it.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (size).
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_probe_config_init(induct_probe_config *cfg, size_t size);

/**
 * @brief Write the probe defaults with the BOS and token range of a dataset, so that
 * the probe looks like the data a model was trained on (the BOS rule: see
 * induct_dataset_bos()).
 *
 * `bos` is the dataset's BOS (−1 for none: no BOS in the probe). The token range is
 * that of the dataset's ordinary tokens: a repeated-random-token dataset's
 * `[token_lo, token_hi)`; otherwise `[0, d_vocab of the dataset)` without the BOS
 * (byte-level text with BOS: `[0, 256)`). The other fields are the defaults of
 * induct_probe_config_init(). The training driver's probe metrics use this probe unless
 * ::induct_train_config::probe is set.
 * @param cfg The struct to fill (not NULL).
 * @param size `sizeof(induct_probe_config)` as the caller compiled it.
 * @param dataset The dataset.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (size).
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_probe_config_for_dataset(induct_probe_config *cfg, size_t size,
                                               const induct_dataset *dataset);

/**
 * @brief The probe sequences themselves, `[n_seq][T]`.
 * @param model Gives d_vocab and n_ctx; not modified.
 * @param cfg NULL means the defaults.
 * @param copying 0: the repeated probe, `T = (bos ≥ 0) + block_len·n_repeats`;
 *                1: the copying probe, `T = copying_bos·(bos ≥ 0) + block_len`.
 * @param out `[n_seq][T]` or NULL with `out_cap` 0 to ask the length.
 * @param out_cap Capacity of `out` in elements.
 * @param[out] out_len Set to n_seq·T (may be NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model; n_seq, block_len 0; n_repeats < 2;
 *         empty range, range outside the vocabulary or shorter than block_len; BOS
 *         inside the range or ≥ d_vocab; reserved0 ≠ 0; copying not 0/1);
 *         ::INDUCT_EABI; ::INDUCT_ERANGE (T > n_ctx or T < 2); ::INDUCT_EBUFSIZE.
 * @since 0.1 Thread-safe (reads the model's config only).
 */
INDUCT_API int induct_analysis_probe_tokens(const induct_model *model,
                                            const induct_probe_config *cfg, uint32_t copying,
                                            int32_t *out, size_t out_cap, size_t *out_len);

/**
 * @brief Prefix-matching score per head, `[n_layers][n_heads]`, range [0, 1]
 * (ICL paper, Appendix, "head activation evaluators").
 *
 * On the repeated probe (block length P): for every query p in repeats 2 … n_repeats
 * (repeat r, 1-based), its targets are `p − mP + 1` for m = 1 … r − 1, the
 * positions right after each earlier occurrence of `t[p]`. Score = mean over those
 * queries of the summed attention on the targets, averaged over the probe
 * sequences. One-hot attention on a target scores 1; uniform attention scores the
 * mean of (r − 1)/(p + 1). With 2 repeats this is the common "induction score";
 * induct_analysis_induction_score() is this score read on a repeated-random-token
 * dataset instead of the probe.
 * @param model The model; the ablations in force apply; weights are not changed.
 * @param cfg   Probe; NULL means the defaults.
 * @param out `[n_layers][n_heads]` or NULL with `out_cap` 0 to ask the length.
 * @param out_cap Capacity of `out` in floats.
 * @param[out] out_len Set to n_layers·n_heads (may be NULL).
 * @return the errors of induct_analysis_probe_tokens() and induct_model_forward();
 *         ::INDUCT_EBUFSIZE.
 * @since 0.1 One thread per model.
 */
INDUCT_API int induct_analysis_prefix_matching(induct_model *model,
                                               const induct_probe_config *cfg, float *out,
                                               size_t out_cap, size_t *out_len);

/**
 * @brief Duplicate-token score per head, `[n_layers][n_heads]`, range [0, 1].
 *
 * As induct_analysis_prefix_matching() but the targets are the earlier occurrences of
 * the same token, `p − mP` (m = 1 … r − 1). Uniform attention scores the same
 * mean of (r − 1)/(p + 1). Our definition (the ICL paper names duplicate-token heads
 * without giving an evaluator).
 * @param model The model; the ablations in force apply; weights are not changed.
 * @param cfg   Probe; NULL means the defaults.
 * @param out `[n_layers][n_heads]` or NULL with `out_cap` 0 to ask the length.
 * @param out_cap Capacity of `out` in floats.
 * @param[out] out_len Set to n_layers·n_heads (may be NULL).
 * @return as induct_analysis_prefix_matching().
 * @since 0.1 One thread per model.
 */
INDUCT_API int induct_analysis_duplicate_token(induct_model *model,
                                               const induct_probe_config *cfg, float *out,
                                               size_t out_cap, size_t *out_len);

/**
 * @brief Empirical copying score per head, `[n_layers][n_heads]`, range [−1, 1]
 * (ICL paper, Appendix, "head activation evaluators"; the exact ratio is our reading).
 *
 * On the copying probe: for each query p the head's direct contribution to the
 * logits is `ℓ_p = z_{p,h} W_O[h] W_U` (z includes b_V; with a final LayerNorm, its
 * linear part at the clean run's frozen scale: centring, ·w / σ_p; b_U and the LN
 * bias are not part of the head's contribution). `ℓ'_p = ReLU(ℓ_p − mean_v ℓ_p)`.
 * `r = Σ_p Σ_k A[p,k] ℓ'_p[t_k] / Σ_p Σ_{v ∈ S} ℓ'_p[v]`, S the distinct tokens of
 * the probe sequence, sums pooled over every query of every probe sequence;
 * score `2r − 1`. 1 means the head raises only the tokens it attends to, −1 only
 * other tokens of the sample; a head whose contribution is zero scores 0.
 * @param model The model; the ablations in force apply; weights are not changed.
 * @param cfg   Probe; NULL means the defaults.
 * @param out `[n_layers][n_heads]` or NULL with `out_cap` 0 to ask the length.
 * @param out_cap Capacity of `out` in floats.
 * @param[out] out_len Set to n_layers·n_heads (may be NULL).
 * @return as induct_analysis_prefix_matching().
 * @since 0.1 One thread per model.
 */
INDUCT_API int induct_analysis_copying(induct_model *model, const induct_probe_config *cfg,
                                       float *out, size_t out_cap, size_t *out_len);

/** Head label: none of the classes below. @since 0.1 */
#define INDUCT_HEAD_OTHER 0u
/** Head label: previous-token head. @since 0.1 */
#define INDUCT_HEAD_PREVIOUS_TOKEN 1u
/** Head label: induction head. @since 0.1 */
#define INDUCT_HEAD_INDUCTION 2u
/** Head label: duplicate-token head. @since 0.1 */
#define INDUCT_HEAD_DUPLICATE 3u

/**
 * @brief Thresholds of induct_analysis_classify_heads(). Size-prefixed.
 * @since 0.1
 */
typedef struct induct_classify_config {
    size_t size;           /**< `sizeof(induct_classify_config)` as the caller compiled it. */
    double previous_token; /**< Previous-token score threshold, (0, 1]. Default 0.4. */
    double induction;      /**< Prefix-matching score threshold, (0, 1]. Default 0.4. */
    double duplicate;      /**< Duplicate-token score threshold, (0, 1]. Default 0.4. */
    double copying;        /**< Copying score an induction head also needs when copying
                                scores are given, [−1, 1]. Default 0. */
} induct_classify_config;

/**
 * @brief Write the defaults into a classify config of `size` bytes.
 * @param cfg  The struct to fill (not NULL).
 * @param size `sizeof(induct_classify_config)` as the caller compiled it.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL; ::INDUCT_EABI. @since 0.1 Thread-safe.
 */
INDUCT_API int induct_classify_config_init(induct_classify_config *cfg, size_t size);

/**
 * @brief Label each head from its scores (the rule is ours; the ICL paper defines
 * induction heads as prefix-matching and copying).
 *
 * A head is a candidate for a class when its score reaches the class threshold
 * (induction additionally needs `copying[i] ≥ copying` when `copying` is not NULL).
 * Among its candidate classes it gets the one with the largest margin `score −
 * threshold` (ties: induction, then previous-token, then duplicate); with no
 * candidate it is ::INDUCT_HEAD_OTHER.
 * @param previous_token `[n]` previous-token scores (induct_analysis_previous_token_score()).
 * @param prefix_matching `[n]` prefix-matching scores.
 * @param duplicate `[n]` duplicate-token scores.
 * @param copying `[n]` copying scores, or NULL.
 * @param n Heads (normally n_layers·n_heads).
 * @param cfg NULL means the defaults.
 * @param labels_out `[n]` `INDUCT_HEAD_*` values, or NULL with `labels_cap` 0 to ask the length.
 * @param labels_cap Capacity of `labels_out`.
 * @param[out] out_len Set to n (may be NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL score array, non-finite score, threshold
 *         out of range); ::INDUCT_EABI; ::INDUCT_EBUFSIZE.
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_analysis_classify_heads(const float *previous_token,
                                              const float *prefix_matching,
                                              const float *duplicate, const float *copying,
                                              size_t n, const induct_classify_config *cfg,
                                              uint32_t *labels_out, size_t labels_cap,
                                              size_t *out_len);

/* ---- weight-based scores (OV eigenvalues, composition) ------------------- */

/**
 * @brief OV-circuit eigenvalue copying score per head, `[n_layers][n_heads]`, range
 * [−1, 1] (Framework, "Copying / Induction heads", eigenvalue analysis).
 *
 * The full OV circuit `W_E W_V[h] W_O[h] W_U` has the same non-zero eigenvalues λ as
 * the `d_head × d_head` matrix `W_O[h] W_U W_E W_V[h]`; score `Re(Σλ) / Σ|λ|`
 * (LAPACKE dgeev, double precision). 0 when every λ is 0. Weights only: positions,
 * biases and LayerNorm are not included; ablations are ignored.
 * @param model The model; only its weights are read.
 * @param out `[n_layers][n_heads]` or NULL with `out_cap` 0 to ask the length.
 * @param out_cap Capacity of `out` in floats.
 * @param[out] out_len Set to n_layers·n_heads (may be NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model); ::INDUCT_EBUFSIZE;
 *         ::INDUCT_ENOMEM; ::INDUCT_ERROR (LAPACK did not converge); ::INDUCT_ENOTSUP
 *         (a build without LAPACK, such as the WebAssembly build).
 * @since 0.1 Thread-safe (reads the weights only).
 */
INDUCT_API int induct_analysis_copying_eigen(const induct_model *model, float *out,
                                             size_t out_cap, size_t *out_len);

/** Composition kind: Q-composition (Framework, "Analyzing a Two-Layer Model"). @since 0.1 */
#define INDUCT_COMPOSITION_Q 0u
/** Composition kind: K-composition. @since 0.1 */
#define INDUCT_COMPOSITION_K 1u
/** Composition kind: V-composition. @since 0.1 */
#define INDUCT_COMPOSITION_V 2u

/**
 * @brief Composition scores, `[n_layers][n_heads][n_layers][n_heads]` indexed
 * `[l1][h1][l2][h2]` (Framework, "Analyzing a Two-Layer Model").
 *
 * TransformerLens row convention: `OV_h = W_V[h] W_O[h]`, `QK_h = W_Q[h] W_K[h]ᵀ`
 * (d_model × d_model). For head h1 in an earlier layer and h2 in a later one:
 * Q: `‖OV_h1 QK_h2‖_F / (‖OV_h1‖_F ‖QK_h2‖_F)`; K: the same with `QK_h2ᵀ`;
 * V: with `OV_h2`. Entries are 0 unless l1 < l2, and 0 when a norm is 0. Raw weights:
 * LayerNorm gains are not folded in (our choice); ablations are ignored.
 * Subtract induct_analysis_composition_baseline() for the Framework's baseline-
 * corrected scores.
 * @param model The model; only its weights are read.
 * @param kind ::INDUCT_COMPOSITION_Q, ::INDUCT_COMPOSITION_K or ::INDUCT_COMPOSITION_V.
 * @param out `[L][H][L][H]` or NULL with `out_cap` 0 to ask the length.
 * @param out_cap Capacity of `out` in floats.
 * @param[out] out_len Set to (n_layers·n_heads)² (may be NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model, unknown kind); ::INDUCT_EBUFSIZE;
 *         ::INDUCT_ENOMEM.
 * @since 0.1 Thread-safe (reads the weights only).
 */
INDUCT_API int induct_analysis_composition(const induct_model *model, uint32_t kind, float *out,
                                           size_t out_cap, size_t *out_len);

/**
 * @brief Random baseline of the composition scores for this model's shapes.
 *
 * The mean score of `n_samples` draws in which the four factors (`W_V`, `W_O` of h1
 * and `W_Q`, `W_K` — or `W_V`, `W_O` — of h2) are independent standard Gaussian
 * matrices of the model's shapes; Q, K and V composition have the same baseline
 * (≈ 1/√d_model when d_head ≪ d_model). Deterministic given `seed`.
 * @param model Gives d_model and d_head; not modified.
 * @param n_samples Draws, 1 … 100000.
 * @param seed Seed of the draws.
 * @param[out] baseline_out The mean score (not NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, n_samples out of range); ::INDUCT_ENOMEM.
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_analysis_composition_baseline(const induct_model *model,
                                                    uint32_t n_samples, uint64_t seed,
                                                    double *baseline_out);

/* ---- key–value retrieval read-outs --------------------------------------- */

/**
 * @brief KV accuracy: the fraction of the `n_seq` rows of batch 0 of the dataset's
 * eval split whose argmax logit at the answer position (`seq_len − 2`) is the
 * answer token (ties go to the lowest id). The blog post's tables A and B.
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
 * of batch 0 of the dataset's eval split. The blog post's table C ("정답 자리를 본 비율",
 * the share of attention on the answer position);
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

/* ---- head ablation -------------------------------------------------------- */

/** Ablation mode: the head is not ablated. @since 0.1 */
#define INDUCT_ABLATE_NONE 0u
/** Ablation mode: the head's result `z_h W_O[h]` is removed (z_h := 0); `b_O` stays. @since 0.1 */
#define INDUCT_ABLATE_ZERO 1u
/** Ablation mode: z_h is replaced by its mean over the reference set of
 *  induct_model_set_ablation_mean(). @since 0.1 */
#define INDUCT_ABLATE_MEAN 2u
/** Flag for induct_analysis_ablation_attribution(): also freeze downstream
 *  patterns (pattern-preserving ablation). @since 0.1 */
#define INDUCT_ABLATE_PRESERVE_PATTERNS 0x100u

/** Mean reference: one mean per head, pooled over sequences and positions. @since 0.1 */
#define INDUCT_MEAN_POOLED 0u
/** Mean reference: one mean per head and position, over the sequences. @since 0.1 */
#define INDUCT_MEAN_PER_POSITION 1u

/**
 * @brief Ablate (or restore) one head for every later forward pass and analysis
 * (ICL paper, Appendix "Analyses"), until induct_model_clear_ablations().
 *
 * After layer `layer`'s attention computes `z` (`[batch][seq][n_heads][d_head]`,
 * the pattern-weighted values before W_O), head `head`'s slice is replaced: by 0
 * (::INDUCT_ABLATE_ZERO; the head's result `z_h W_O[h]` leaves the residual
 * stream, `b_O` stays) or by the stored mean (::INDUCT_ABLATE_MEAN). Any set of
 * heads may be ablated at once, each with its own mode. Ablation never changes the
 * weights; once every head is restored (or the ablations are cleared) forward
 * passes are bit-identical to those before.
 *
 * While any head is ablated, induct_model_backward(), induct_train_step() and
 * induct_train_step_tokens() refuse with ::INDUCT_ESTATE (gradients through an
 * ablated model are not offered). induct_model_clone() does not copy ablations.
 *
 * @param model The model whose forward passes are affected.
 * @param layer Layer index, 0 … n_layers − 1.
 * @param head  Head index within the layer, 0 … n_heads − 1.
 * @param mode ::INDUCT_ABLATE_NONE (restore), ::INDUCT_ABLATE_ZERO or ::INDUCT_ABLATE_MEAN.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model, unknown mode); ::INDUCT_ERANGE
 *         (layer ≥ n_layers or head ≥ n_heads: the head does not exist);
 *         ::INDUCT_ESTATE (::INDUCT_ABLATE_MEAN without a reference set);
 *         ::INDUCT_ENOMEM. Nothing is changed on failure.
 * @since 0.1 One thread per model.
 */
INDUCT_API int induct_model_ablate_head(induct_model *model, uint32_t layer, uint32_t head,
                                        uint32_t mode);

/**
 * @brief Pattern-preserving ablation on or off (ICL paper, Appendix "Analyses").
 *
 * When on and at least one head is ablated, every forward pass first runs the
 * model without ablations on the same tokens and records the attention patterns;
 * the ablated pass then uses those clean patterns for every head of every layer
 * after the earliest layer that has an ablated head (`z = A_clean v`, with `v` from
 * the ablated residual stream), so only the ablated heads' values propagate.
 * Patterns read with induct_model_attention() are those in effect. Costs a second
 * forward pass and `[later layers][batch][n_heads][seq][seq]` floats.
 * @param model The model.
 * @param on 1 on, 0 off.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model, `on` not 0/1).
 * @since 0.1 One thread per model.
 */
INDUCT_API int induct_model_set_preserve_patterns(induct_model *model, uint32_t on);

/**
 * @brief Compute the reference means for ::INDUCT_ABLATE_MEAN from a reference set.
 *
 * Runs the model without any ablation on `tokens` and stores, for every head,
 * the mean of z_h (`[d_head]`): pooled over all sequences and positions
 * (::INDUCT_MEAN_POOLED), or per position over the sequences
 * (::INDUCT_MEAN_PER_POSITION; inputs longer than `seq_len` are then refused with
 * ::INDUCT_ERANGE while a head is mean-ablated). Replaces any earlier reference; the
 * means are kept until the model is freed (clearing ablations keeps them).
 * @param model The model (run without ablations; weights are not changed).
 * @param tokens `[batch][seq_len]` ids in `[0, d_vocab)`.
 * @param batch Sequences in the reference set, ≥ 1.
 * @param seq_len Tokens per sequence, 2 … n_ctx.
 * @param how ::INDUCT_MEAN_POOLED or ::INDUCT_MEAN_PER_POSITION.
 * @return as induct_model_forward() for the tokens; ::INDUCT_EINVAL (unknown `how`);
 *         ::INDUCT_ENOMEM. Nothing is changed on failure.
 * @since 0.1 One thread per model.
 */
INDUCT_API int induct_model_set_ablation_mean(induct_model *model, const int32_t *tokens,
                                              uint32_t batch, uint32_t seq_len, uint32_t how);

/**
 * @brief Restore every head and turn pattern preservation off. Later forward passes are
 * bit-identical to those of a model that was never ablated. The mean reference is kept.
 * @param model The model.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL).
 * @since 0.1 One thread per model.
 */
INDUCT_API int induct_model_clear_ablations(induct_model *model);

/**
 * @brief Read the ablations in force: `modes_out [n_layers][n_heads]` holds
 * `INDUCT_ABLATE_*` per head.
 * @param model The model; not modified.
 * @param modes_out `[n_layers][n_heads]` or NULL with `modes_cap` 0 to ask the length.
 * @param modes_cap Capacity of `modes_out` in elements.
 * @param[out] out_len Set to n_layers·n_heads (may be NULL).
 * @param[out] preserve_out 1 if pattern preservation is on, else 0 (may be NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model); ::INDUCT_EBUFSIZE.
 * @since 0.1
 */
INDUCT_API int induct_model_get_ablations(const induct_model *model, uint32_t *modes_out,
                                          size_t modes_cap, size_t *out_len,
                                          uint32_t *preserve_out);

/**
 * @brief Ablation attribution (ICL paper, Appendix "Analyses"): `out[l][h] =
 * icl(with head (l, h) ablated) − icl(without)`, `[n_layers][n_heads]`, nats.
 *
 * Positive values mean the head helps in-context learning. "Without" is the model
 * with the ablations already in force (normally none); head (l, h) is added to them
 * with `mode`. The evaluation set and indices are those of induct_analysis_icl_score().
 *
 * With no ablation in force, the clean forward pass is run once per chunk and, for
 * each head, the forward pass is resumed after that head's layer from the clean
 * residual stream plus the head's change `(z'_h − z_h) W_O[h]`; the last layer (its
 * queries, pattern rows, attention output and MLP), the final LayerNorm and the
 * unembedding run only at the two positions the score reads, with the bits a whole
 * pass gives them. Otherwise each head costs one pass over the evaluation set with the
 * ablation in force. Both give the same values up to float rounding (about 1e-5 nats).
 *
 * @param model   The model; its ablations are the same afterwards; weights are not changed.
 * @param dataset Source of the evaluation set (see induct_analysis_icl_score()).
 * @param cfg     Evaluation set and indices; NULL means the defaults.
 * @param mode ::INDUCT_ABLATE_ZERO or ::INDUCT_ABLATE_MEAN, optionally or-ed with
 *             ::INDUCT_ABLATE_PRESERVE_PATTERNS.
 * @param out `[n_layers][n_heads]` or NULL with `out_cap` 0 to ask the length.
 * @param out_cap Capacity of `out` in floats.
 * @param[out] out_len Set to n_layers·n_heads (may be NULL).
 * @param[out] icl_out The ICL score without the extra ablation (may be NULL).
 * @return as induct_analysis_icl_score(); ::INDUCT_EINVAL (bad mode);
 *         ::INDUCT_ESTATE (::INDUCT_ABLATE_MEAN without a reference set);
 *         ::INDUCT_EBUFSIZE. The ablations in force are the same afterwards,
 *         also on failure.
 * @since 0.1 One thread per model.
 */
INDUCT_API int induct_analysis_ablation_attribution(induct_model *model,
                                                    const induct_dataset *dataset,
                                                    const induct_eval_config *cfg, uint32_t mode,
                                                    float *out, size_t out_cap, size_t *out_len,
                                                    double *icl_out);

/* ---- trajectories: loss-vector PCA, phase-change window ------------------ */

/**
 * @brief Principal component analysis of a stack of vectors (ICL paper, Appendix
 * "Data Collection"), through LAPACKE's SVD (dgesdd, double precision).
 *
 * `x [n_rows][n_cols]` (one row per snapshot, e.g. the (a) vectors of
 * induct_analysis_loss_vectors()) is centred column by column; with the SVD
 * `X_c = U S Vᵀ`, component i is row i of Vᵀ, signed so that its entry of largest
 * magnitude is positive (the first such entry on ties); scores are `X_c V_k`
 * (`U_k S_k`); explained variance is `s_i² / (n_rows − 1)` and the total variance is
 * the sum over all singular values (so `variance[i] / total` is the explained ratio).
 * @param x `[n_rows][n_cols]`, finite.
 * @param n_rows Rows, ≥ 2.
 * @param n_cols Columns, ≥ 1.
 * @param n_components k, 1 … min(n_rows, n_cols).
 * @param scores_out `[n_rows][k]` (not NULL).
 * @param scores_cap Capacity of `scores_out` in floats.
 * @param components_out `[k][n_cols]` or NULL (then `components_cap` must be 0).
 * @param components_cap Capacity of `components_out` in floats.
 * @param variance_out `[k]` explained variances or NULL (then `variance_cap` must be 0).
 * @param variance_cap Capacity of `variance_out` in doubles.
 * @param[out] total_variance_out Total variance, or NULL.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL x or scores_out, a non-finite value, too few
 *         rows or columns); ::INDUCT_ERANGE (n_components out of range);
 *         ::INDUCT_EBUFSIZE (the message names the length needed); ::INDUCT_ELIMIT;
 *         ::INDUCT_ENOMEM; ::INDUCT_ERROR (the SVD did not converge); ::INDUCT_ENOTSUP
 *         (a build without LAPACK, such as the WebAssembly build).
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_analysis_pca(const float *x, uint32_t n_rows, uint32_t n_cols,
                                   uint32_t n_components, float *scores_out, size_t scores_cap,
                                   float *components_out, size_t components_cap,
                                   double *variance_out, size_t variance_cap,
                                   double *total_variance_out);

/**
 * @brief Rule of induct_analysis_phase_window(). Size-prefixed; fields only appended.
 * @since 0.1
 */
typedef struct induct_phase_config {
    size_t size;        /**< `sizeof(induct_phase_config)` as the caller compiled it. */
    double lo_frac;     /**< Fraction of the final change that opens the window, (0, 1).
                             Default 0.1. */
    double hi_frac;     /**< Fraction that closes it, (lo_frac, 1]. Default 0.9. */
    double min_change;  /**< |final change| below this (nats) means no phase change, ≥ 0.
                             Default 0.05. */
    uint32_t smooth;    /**< Width of the centred moving average, odd, ≥ 1 (1 = none).
                             Default 1. */
    uint32_t reserved0; /**< Must be 0. */
} induct_phase_config;

/**
 * @brief Write the defaults into a phase config of `size` bytes.
 * @param cfg  The struct to fill (not NULL).
 * @param size `sizeof(induct_phase_config)` as the caller compiled it.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL; ::INDUCT_EABI. @since 0.1 Thread-safe.
 */
INDUCT_API int induct_phase_config_init(induct_phase_config *cfg, size_t size);

/**
 * @brief Phase-change window from a series of (step, ICL score) points (ICL paper,
 * "the phase change"; the rule is ours).
 *
 * The scores are smoothed with a centred moving average of width `smooth`
 * (truncated at the ends); `Δ = s[n−1] − s[0]` is the final change. If `|Δ| <
 * min_change` there is no window. Otherwise `f_i = (s_i − s_0) / Δ` is the fraction
 * of the final change reached at point i; the window opens at the first crossing of
 * `lo_frac` and closes at the first crossing of `hi_frac` at or after it, each
 * located by linear interpolation between the two points around the crossing.
 * @param steps `[n]` strictly increasing, finite (training steps, tokens, …).
 * @param icl `[n]` finite ICL scores.
 * @param n Points, ≥ 2.
 * @param cfg NULL means the defaults.
 * @param[out] start_out Opening step, NaN when no window (not NULL).
 * @param[out] end_out Closing step, NaN when no window (not NULL).
 * @param[out] found_out 1 if a window was found, else 0 (may be NULL).
 * @return ::INDUCT_OK (also when no window is found); ::INDUCT_EINVAL (NULL, n < 2,
 *         non-finite values, steps not increasing, bad fractions, even or zero
 *         smooth, reserved0 ≠ 0); ::INDUCT_EABI.
 * @since 0.1 Thread-safe.
 */
INDUCT_API int induct_analysis_phase_window(const double *steps, const double *icl, size_t n,
                                            const induct_phase_config *cfg, double *start_out,
                                            double *end_out, uint32_t *found_out);

/* ---- statistics of the checks: batch means, paired differences, band ICL scores ---- */

/**
 * @brief Mean of `n` batch values and its standard error by batch means.
 *
 * Each value is the mean of one batch (a group) of measurements, e.g. the ICL score of
 * one group of evaluation windows. The batches are taken as independent, so the
 * standard error of their mean is the sample standard deviation of the values over
 * √n: `mean = (Σ x_i) / n`, `se = sqrt(Σ (x_i − mean)² / (n − 1) / n)`, summed in
 * index order in double precision. Correlated measurements (overlapping windows of one
 * stretch of text) stay inside a batch; this is the method of batch means (Law and
 * Kelton, *Simulation Modeling and Analysis*, "batch means"). docs/analysis.md,
 * "Standard errors".
 * @param x `[n]` finite values (any unit; the results have the same unit).
 * @param n Number of batches, ≥ 1.
 * @param[out] mean_out The mean (not NULL).
 * @param[out] se_out Its standard error; NaN when n = 1 (not NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL pointer, n = 0, a non-finite value).
 *         Nothing is written on failure.
 * @since 0.2 Thread-safe.
 */
INDUCT_API int induct_analysis_batch_means(const double *x, size_t n, double *mean_out,
                                           double *se_out);

/**
 * @brief Mean of the paired differences `a[i] − b[i]` and its standard error: the
 * difference of two figures measured on the same batches (two models, or a model with
 * and without an ablation, on the same groups of windows), whose shared sampling error
 * cancels. The same arithmetic as induct_analysis_batch_means() on the differences
 * (each difference rounded to double first). docs/analysis.md, "Standard errors".
 * @param a `[n]` finite values of the first figure, one per batch.
 * @param b `[n]` finite values of the second figure on the same batches.
 * @param n Number of batches, ≥ 1.
 * @param[out] mean_out Mean difference (not NULL).
 * @param[out] se_out Its standard error; NaN when n = 1 (not NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL pointer, n = 0, a non-finite value).
 *         Nothing is written on failure.
 * @since 0.2 Thread-safe.
 */
INDUCT_API int induct_analysis_paired_difference(const double *a, const double *b, size_t n,
                                                 double *mean_out, double *se_out);

/**
 * @brief The band ICL estimator on a loss-by-position curve: the ICL score (ICL paper,
 * "Key Concepts": loss of the `late`-th token minus loss of the `early`-th token) with
 * each of the two losses averaged over the `2·band + 1` context indices centred on it:
 * `(Σ_k L[late − 1 − band + k] − Σ_k L[early − 1 − band + k]) / (2·band + 1)`, k = 0 …
 * 2·band, each sum in double precision in index order. `band = 0` is the single-token
 * score `L[late − 1] − L[early − 1]`. Averaging neighbouring tokens lowers the variance
 * of the estimate; the band is our choice (docs/analysis.md, "The band ICL
 * estimator").
 * @param curve `[len]` losses by context index (nats), e.g. from
 *              induct_analysis_loss_by_position(); the indices outside the two bands
 *              are not read (they may be NaN).
 * @param len Length of `curve` (seq_len − 1).
 * @param early The early token, ≥ 1 (default of the ICL score: 50).
 * @param late The late token, > early (500).
 * @param band Half-width W of each band; needs `band < early` and `late + band ≤ len`.
 * @param[out] icl_out The estimate in nats (not NULL); negative means the model uses
 *             context.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL pointer, early = 0, late ≤ early, a
 *         non-finite loss in a band); ::INDUCT_ERANGE (a band outside the curve).
 * @since 0.2 Thread-safe.
 */
INDUCT_API int induct_analysis_icl_band(const float *curve, size_t len, uint32_t early,
                                        uint32_t late, uint32_t band, double *icl_out);

/**
 * @brief Settings of induct_analysis_icl_groups(). Size-prefixed; fields only appended.
 * @since 0.2
 */
typedef struct induct_icl_groups_config {
    size_t size;           /**< `sizeof(induct_icl_groups_config)` as the caller compiled it. */
    uint32_t n_groups;     /**< Groups G, ≥ 1 (a standard error needs ≥ 2). Default 32. */
    uint32_t per_group;    /**< Windows per group, ≥ 1. Group g is batch g of `per_group`
                                windows of the split (induct_eval_config.batch_index = g):
                                windows g·per_group … (g + 1)·per_group − 1 of the dataset's
                                evaluation order. Default 256. */
    uint32_t seq_len;      /**< Tokens per window; 0 means the model's n_ctx. Default 0. */
    uint32_t chunk;        /**< Bound on the sequences per forward pass (as
                                induct_eval_config.chunk; used as min(chunk, per_group)).
                                Default 8. */
    uint32_t early;        /**< The early token. Default 50. */
    uint32_t late;         /**< The late token. Default 500. */
    uint32_t band;         /**< Half-width W of the bands (induct_analysis_icl_band()).
                                Default 5. */
    uint32_t split;        /**< ::INDUCT_SPLIT_EVAL or ::INDUCT_SPLIT_TRAIN. Default
                                ::INDUCT_SPLIT_EVAL. */
    uint32_t curve_groups; /**< The first `curve_groups` groups are evaluated at every
                                position and their mean loss-by-position curve is returned
                                (≤ n_groups); the others only at the two bands. Default 0. */
    uint32_t reserved0;    /**< Must be 0. */
} induct_icl_groups_config;

/**
 * @brief Write the defaults into a groups config of `size` bytes.
 * @param cfg  The struct to fill (not NULL).
 * @param size `sizeof(induct_icl_groups_config)` as the caller compiled it.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (size below the struct's or
 *         above 4096).
 * @since 0.2 Thread-safe.
 */
INDUCT_API int induct_icl_groups_config_init(induct_icl_groups_config *cfg, size_t size);

/**
 * @brief Result of induct_analysis_icl_groups(). An output struct: the caller sets
 * `size`; the library fills the fields that fit. @since 0.2
 */
typedef struct induct_icl_estimate {
    size_t size;         /**< `sizeof(induct_icl_estimate)` as the caller compiled it. */
    double icl;          /**< Band estimate: the mean of the groups' band ICL scores (nats). */
    double icl_se;       /**< Its standard error by batch means; NaN for one group. */
    double icl_token;    /**< Single-token estimate: mean of the groups' L[late−1] − L[early−1]. */
    double icl_token_se; /**< Its standard error by batch means; NaN for one group. */
    uint32_t n_groups;   /**< Groups evaluated. */
    uint32_t per_group;  /**< Windows per group. */
} induct_icl_estimate;

/**
 * @brief The ICL score of a model over groups of evaluation windows, with standard
 * errors by batch means (ICL paper, "Key Concepts"; the estimator and the grouping are
 * ours: docs/analysis.md, "Standard errors").
 *
 * For each group g the loss-by-position curve of its `per_group` windows is computed as
 * induct_analysis_loss_vectors() computes its average (ablations in force apply) — at
 * every context index for the first `curve_groups` groups, at the two bands only
 * (induct_eval_config.positions) for the others, which gives the same bits at the
 * bands — and its band score (induct_analysis_icl_band()) and single-token score are
 * taken. The estimates are the means of the group scores, their standard errors by
 * batch means (induct_analysis_batch_means()); the mean of the group band scores equals
 * the band score of all windows' average curve. Figures measured on the same groups
 * (two models, an ablation) compare with induct_analysis_paired_difference() on
 * `group_icl_out`.
 * @param model   The model; weights and ablations are not changed.
 * @param dataset Source of the windows; its vocabulary must fit the model's.
 * @param cfg     Settings; NULL means the defaults.
 * @param[out] out The estimates (not NULL; `out->size` set by the caller).
 * @param group_icl_out `[n_groups]` the groups' band scores (nats), or NULL with
 *                      `group_cap` 0.
 * @param group_cap Capacity of `group_icl_out` in doubles.
 * @param curve_out `[seq_len − 1]` the mean loss-by-position curve of the first
 *                  `curve_groups` groups (nats; each group's float curve averaged in
 *                  double), or NULL with `curve_cap` 0; needs `curve_groups` ≥ 1.
 * @param curve_cap Capacity of `curve_out` in doubles.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model, dataset or out; a zero count; a NULL
 *         buffer with capacity; `curve_out` without `curve_groups` or the reverse;
 *         `curve_groups` > n_groups; bad early/late; reserved0 ≠ 0);
 *         ::INDUCT_ERANGE (seq_len outside [2, n_ctx], a band outside the context);
 *         ::INDUCT_EBUFSIZE; ::INDUCT_EABI; ::INDUCT_EINTERRUPTED
 *         (induct_model_interrupt() between two groups); the errors of
 *         induct_analysis_loss_vectors(). `out` and the buffers are written only on
 *         success.
 * @since 0.2 One thread per model.
 */
INDUCT_API int induct_analysis_icl_groups(induct_model *model, const induct_dataset *dataset,
                                          const induct_icl_groups_config *cfg,
                                          induct_icl_estimate *out, double *group_icl_out,
                                          size_t group_cap, double *curve_out,
                                          size_t curve_cap);

/** @} */

/* ------------------------------------------------------------------------ */
/** @defgroup checkpoint Checkpoints (safetensors)
 *  Files in the safetensors format with TransformerLens tensor names; the layout,
 *  the metadata keys and every validation rule are in docs/checkpoint-format.md.
 *  @{ */

/** The newest checkpoint layout this library reads (`__metadata__["format_version"]`);
 *  a file stating a larger value is refused. The library writes version 1 (every
 *  0.1 library reads it) unless the model needs version 2: a model with
 *  `shortformer_layers` ≠ 0, whose file states it under that key (an older library
 *  would build a different model from it, so it must refuse the file).
 *  @since 0.1 (2 since `shortformer_layers`) */
#define INDUCT_CHECKPOINT_FORMAT_VERSION 2

/**
 * @brief Save the model's config and weights as a safetensors file.
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON header (padded with
 * spaces to a multiple of 8), then the raw little-endian F32 data of every tensor in
 * storage order (induct_model_tensor_info()), contiguous, without holes. Tensor names
 * and shapes are TransformerLens' (see induct_model_tensor_info(); the smeared-key α
 * is `blocks.{l}.attn.smear_alpha [n_heads]`). `__metadata__` holds the config, the
 * library version and the format version (::INDUCT_CHECKPOINT_FORMAT_VERSION), all as strings.
 *
 * The write is atomic: the data go to a temporary file `<path>.tmp.<pid>.<n>` in the
 * same directory, which is flushed, fsync'ed and renamed over `path` (the directory is
 * then fsync'ed, best effort). A process killed during the save leaves the previous
 * file at `path` intact (and may leave the temporary file behind).
 *
 * @param model The model (only read).
 * @param path  Destination file, UTF-8 / native encoding. Its directory must exist.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL argument, empty path); ::INDUCT_EIO (any
 *         create, write, flush, sync or rename failure; the message names the file and
 *         the system error; `path` is untouched); ::INDUCT_ENOMEM.
 * @since 0.1 Reads the model: one thread per model.
 */
INDUCT_API int induct_model_save(const induct_model *model, const char *path);

/**
 * @brief Load a model (config and weights) from a safetensors file.
 *
 * Accepts files written by induct_model_save() and induct_optimizer_save(), and
 * safetensors files written by other tools (PyTorch, NumPy) that use the TL names.
 * The config comes from `__metadata__`; keys it lacks are inferred from the tensor
 * shapes where they tell (docs/checkpoint-format.md lists which). What the tensors
 * cannot tell is never guessed: without `positional_embedding_type` (`pos_embed.W_pos`
 * serves standard and shortformer positions alike), without `normalization_type` when
 * there are no LayerNorm tensors (no LayerNorm, or LayerNorm folded into the weights as
 * TransformerLens exports by default), and without `act_fn` for a model with an MLP,
 * the load fails with ::INDUCT_EFORMAT naming each missing choice; such a file loads
 * with induct_model_load_config(). Validation, each
 * failure being ::INDUCT_EFORMAT with a message naming the tensor or key: the header
 * length fits in the file; the header is a JSON object; every entry has a known
 * dtype, a shape and `data_offsets` whose span equals the shape's byte size; entries
 * lie inside the data section, do not overlap and leave no holes, and the data
 * section ends exactly at the end of the file; every tensor the config needs exists
 * with dtype F32 and exactly its TL shape, and holds finite values; any other tensor
 * is refused unless its name starts with `optimizer.` (optimizer state, read by
 * induct_optimizer_load()); a `format_version` above ::INDUCT_CHECKPOINT_FORMAT_VERSION
 * is refused. Nothing is read past the end of the file, and no buffer larger than the
 * file's data section is allocated for a model.
 *
 * @param[out] out The new model, owned by the caller, released with induct_model_free();
 *             NULL on failure.
 * @param path The file.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL argument); ::INDUCT_EIO (cannot open or
 *         read); ::INDUCT_EFORMAT (see above); ::INDUCT_ENOMEM.
 * @since 0.1 Several threads may load at once (each call has its own state; cJSON
 *        records its last parse error in a global that libinduct never reads).
 */
INDUCT_API int induct_model_load(induct_model **out, const char *path);

/**
 * @brief Load a model from a safetensors file with the configuration given explicitly:
 * for files whose architecture cannot be told from their tensors (see
 * induct_model_load(); e.g. a shortformer model, or a model without LayerNorm, saved
 * by another tool without `__metadata__`).
 *
 * The model is `cfg` (every field, including the non-architectural ones such as
 * `n_threads` and `seed`); the file must hold exactly its tensors (names, F32, TL
 * shapes, finite values) and any architecture key in its `__metadata__` (n_layers,
 * d_model, n_heads, d_head, d_mlp, n_ctx, d_vocab, positional_embedding_type,
 * normalization_type, smeared_keys) must agree with `cfg`. All other validation is
 * induct_model_load()'s. A TransformerLens export with LayerNorm folded in
 * (`fold_ln=True`) has no LayerNorm weights but still normalises: no config of this
 * library runs it; export with `fold_ln=False` (and `fold_value_biases=False`).
 * @param[out] out The new model, owned by the caller, released with induct_model_free();
 *             NULL on failure.
 * @param path The file.
 * @param cfg The model's configuration (size-prefixed, as for induct_model_new()).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL argument); ::INDUCT_EABI (`cfg->size`);
 *         ::INDUCT_EIO; ::INDUCT_EFORMAT (as induct_model_load(), a metadata key that
 *         contradicts `cfg`, a tensor `cfg` does not have or has in another shape, or
 *         `cfg` invalid for induct_model_new()); ::INDUCT_ENOMEM.
 * @since 0.1 As induct_model_load().
 */
INDUCT_API int induct_model_load_config(induct_model **out, const char *path,
                                        const induct_model_config *cfg);

/**
 * @brief Save a complete resume point: the optimizer's model (as induct_model_save())
 * plus the optimizer state in the same file.
 *
 * Extra tensors: `optimizer.m.<name>` (AdamW first moment / SGD momentum buffer) for
 * every parameter tensor `<name>`, and `optimizer.v.<name>` (AdamW second moment; AdamW
 * only), F32, same shape as the parameter. Extra metadata: `optimizer` ("adamw" or
 * "sgd"), `optimizer.step` and every ::induct_opt_param value (doubles printed with 17
 * significant digits, so they read back bit-identically). Data order needs no state:
 * batch `k` of a dataset is a pure function of `k`, the step counter.
 * Written atomically as induct_model_save().
 *
 * @param opt  The optimizer (only read); its model's weights are saved with it.
 * @param path Destination file; its directory must exist.
 * @return as induct_model_save().
 * @since 0.1 Reads the optimizer and its model: one thread per model.
 */
INDUCT_API int induct_optimizer_save(const induct_optimizer *opt, const char *path);

/**
 * @brief Create an optimizer for `model` from the optimizer state in a file written by
 * induct_optimizer_save(): kind, step counter, every parameter and the moments.
 *
 * The model's weights are not touched: load them with induct_model_load() from the
 * same file. Validation as induct_model_load(), plus: the optimizer metadata keys are
 * present and in range; `optimizer.m.<name>` (and `optimizer.v.<name>` for AdamW)
 * exist for every parameter tensor of `model`, with dtype F32 and that tensor's shape;
 * any other `optimizer.` tensor is refused. Tensors without the prefix are validated
 * as entries (offsets, dtype, size) but not compared with `model`.
 *
 * @param[out] out The new optimizer (holding a reference to `model`), owned by the
 *             caller and released with induct_optimizer_free(); NULL on failure.
 * @param model The model it will update.
 * @param path The file.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL argument); ::INDUCT_EIO; ::INDUCT_EFORMAT
 *         (see above; also a file without optimizer state); ::INDUCT_ELIMIT (as
 *         induct_optimizer_new()); ::INDUCT_ENOMEM.
 * @since 0.1 Reads the file and `model`: one thread per model, as induct_optimizer_new().
 */
INDUCT_API int induct_optimizer_load(induct_optimizer **out, induct_model *model,
                                     const char *path);
/** @} */

/* ------------------------------------------------------------------------ */
/** @defgroup text Text in and out: byte-level tokenizer and generation
 *  Byte-level text (the tokenizer of the byte-level text datasets) and sampling
 *  from a model, so that text goes in and comes out without leaving the library.
 *  Word-piece tokenizers (sentencepiece) are in the Python bindings.
 *  @{ */

/**
 * @brief Byte-level tokens of `n` bytes: token i is byte i (ids 0 … 255), preceded
 * by ::INDUCT_TEXT_BOS (256) when `bos` is 1 — exactly the tokens
 * induct_dataset_new_text() with the same `bos` makes of one document (without its
 * separator), following the library's BOS rule (induct_dataset_bos()). A model for
 * these tokens has `d_vocab` 256, or 257 with BOS.
 * Any byte values are accepted (invalid UTF-8 is still bytes).
 * @param bytes `n` bytes, or NULL when `n` is 0.
 * @param n Number of bytes (0 gives `bos` tokens: none, or the BOS alone).
 * @param bos 1: prepend ::INDUCT_TEXT_BOS; 0: no BOS.
 * @param[out] out `n + bos` int32 ids, or NULL to ask for the length.
 * @param out_cap Capacity of `out` in ids.
 * @param[out] out_len `n + bos` (set also on ::INDUCT_EBUFSIZE), or NULL.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (`bytes` NULL with `n` > 0, `bos` not 0/1);
 *         ::INDUCT_ELIMIT (`n + bos` above INT32_MAX ids: token buffers are
 *         indexed by int32 elsewhere); ::INDUCT_EBUFSIZE.
 * @since 0.1 Thread-safe (no state).
 */
INDUCT_API int induct_text_encode(const void *bytes, size_t n, uint32_t bos, int32_t *out,
                                  size_t out_cap, size_t *out_len);

/**
 * @brief Bytes of byte-level tokens, the inverse of induct_text_encode(): id b in
 * 0 … 255 becomes byte b. With `bos` 1 every ::INDUCT_TEXT_BOS (256), wherever it
 * stands, is a document boundary and produces no byte; with `bos` 0 it is an id
 * outside the vocabulary. The output is raw bytes, not NUL-terminated, and need not
 * be valid UTF-8 (a model may emit any byte).
 * @param tokens `n` ids, or NULL when `n` is 0.
 * @param n Number of ids.
 * @param bos 1: the vocabulary has BOS (`d_vocab` 257), 0: it has not (256).
 * @param[out] out Byte buffer, or NULL to ask for the length.
 * @param out_cap Capacity of `out` in bytes.
 * @param[out] out_len Number of bytes (the ids other than BOS; set also on
 *                     ::INDUCT_EBUFSIZE), or NULL.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (`tokens` NULL with `n` > 0, `bos` not 0/1);
 *         ::INDUCT_ERANGE (an id outside 0 … 255, or 0 … 256 with `bos`; the id and
 *         its index are named; nothing is written); ::INDUCT_EBUFSIZE.
 * @since 0.1 Thread-safe (no state).
 */
INDUCT_API int induct_text_decode(const int32_t *tokens, size_t n, uint32_t bos, void *out,
                                  size_t out_cap, size_t *out_len);

/**
 * @brief Settings of induct_model_generate(). Size-prefixed: set
 * `size = sizeof(induct_generate_config)` (induct_generate_config_init() does);
 * fields are only ever appended.
 * @since 0.1
 */
typedef struct induct_generate_config {
    size_t size;             /**< `sizeof(induct_generate_config)` as the caller compiled it. */
    uint32_t max_new_tokens; /**< Tokens to generate, ≥ 1. Default 16. */
    uint32_t reserved0;      /**< 0. */
    double temperature;      /**< 0: greedy (the arg max of the logits, the lowest id on a
                                  tie); > 0: sample from softmax(logits / temperature),
                                  computed in double precision. Finite, 0 … 1e6.
                                  Default 0. */
    uint64_t seed;           /**< Seed of the sampling (unused when greedy). Default 0. */
} induct_generate_config;

/** @brief Write the defaults into a generation config of `size` bytes.
 *  @param cfg  The struct to fill (not NULL).
 *  @param size `sizeof(induct_generate_config)` as the caller compiled it.
 *  @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (size below the 0.1
 *          struct or above 4096).
 *  @since 0.1 Thread-safe. */
INDUCT_API int induct_generate_config_init(induct_generate_config *cfg, size_t size);

/**
 * @brief Continue a prompt token by token: each new token is chosen from the logits
 * of the last position of a forward pass (induct_model_forward()) over the tokens
 * so far, then appended.
 *
 * The context of each pass is the last `min(length, n_ctx)` tokens (prompt plus the
 * tokens generated so far), as nanoGPT's `generate` crops it; with ::INDUCT_POS_STANDARD
 * or ::INDUCT_POS_SHORTFORMER positions a cropped context starts again at position 0.
 * A one-token context is run as two tokens (the second a copy of the first): causal
 * attention makes the logits of position 0 independent of position 1. There is no key–
 * value cache: each new token costs one forward pass over its context.
 * Greedy generation (`temperature` 0) is deterministic; sampling is deterministic for a
 * given seed, model, prompt and thread count: token i is drawn by inverting the CDF of
 * softmax(logits / temperature) at a uniform number from (seed, i) alone. Head ablations
 * in force apply, as in every forward pass. To complete a repeated sequence
 * with an induction head, give the first copy and the start of the second as the prompt.
 * @param model The model (its workspace is written; the weights are only read).
 * @param prompt `prompt_len` ids in `[0, d_vocab)`.
 * @param prompt_len ≥ 1 (any length: only the last n_ctx tokens are used).
 * @param cfg Settings (copied; NULL is refused).
 * @param[out] out The `max_new_tokens` generated ids (the prompt is not repeated), or
 *                 NULL to ask for the length.
 * @param out_cap Capacity of `out` in ids.
 * @param[out] out_len `max_new_tokens` (set also on ::INDUCT_EBUFSIZE), or NULL.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model, prompt or cfg, `prompt_len` 0,
 *         `max_new_tokens` 0, a temperature that is negative, not finite or above
 *         1e6, non-zero `reserved0`); ::INDUCT_EABI (cfg size); ::INDUCT_ERANGE (a
 *         prompt id outside `[0, d_vocab)`, its index named; a model with `n_ctx` 1,
 *         which no forward pass accepts); ::INDUCT_ELIMIT
 *         (prompt plus new tokens above INT32_MAX); ::INDUCT_ENUMERIC (non-finite
 *         logits); ::INDUCT_EINTERRUPTED (induct_model_interrupt(), checked between
 *         tokens; `out` is then untouched); ::INDUCT_ENOMEM; ::INDUCT_EBUFSIZE. On any
 *         failure `out` is untouched.
 * @since 0.1 Uses the model's workspace: one thread per model, except
 *        induct_model_interrupt().
 */
INDUCT_API int induct_model_generate(induct_model *model, const int32_t *prompt,
                                     uint32_t prompt_len, const induct_generate_config *cfg,
                                     int32_t *out, size_t out_cap, size_t *out_len);
/** @} */

/* ======================================================================== */
/*  EXPERIMENTAL API                                                         */
/* ======================================================================== */
/* The declarations below are the newest of the library. They are exported and
 * covered by the ABI check like the rest (docs/abi-policy.md), but their names and
 * behaviour may still change before they move up into the stable part; a change that
 * breaks them is recorded as an ABI break. Build on them knowing that.
 */

/* ------------------------------------------------------------------------ */
/** @defgroup hooks Hook points and the activation cache (experimental)
 *
 * Every forward pass passes named points where an activation can be read or
 * overwritten, named as in TransformerLens (HookedTransformer). Shapes use B = batch,
 * T = seq_len (pos or query), K = seq_len (key), H = n_heads, E = d_head,
 * D = d_model, M = d_mlp; all are float32, row-major, contiguous.
 *
 * | point                              | shape          | exists when                |
 * |------------------------------------|----------------|----------------------------|
 * | `hook_embed`                       | [B, T, D]      | always (W_E[token])        |
 * | `hook_pos_embed`                   | [B, T, D]      | standard positions (W_pos[p]) |
 * | `blocks.{l}.hook_resid_pre`        | [B, T, D]      | always                     |
 * | `blocks.{l}.ln1.hook_normalized`   | [B, T, D]      | LayerNorm models           |
 * | `blocks.{l}.attn.hook_q`, `hook_k`, `hook_v` | [B, T, H, E] | always (after the biases) |
 * | `blocks.{l}.attn.hook_k_smeared`   | [B, T, H, E]   | smeared keys (not in TransformerLens) |
 * | `blocks.{l}.attn.hook_attn_scores` | [B, H, T, K]   | always, computed when hooked |
 * | `blocks.{l}.attn.hook_pattern`     | [B, H, T, K]   | always                     |
 * | `blocks.{l}.attn.hook_z`           | [B, T, H, E]   | always                     |
 * | `blocks.{l}.attn.hook_result`      | [B, T, H, D]   | always, computed when hooked |
 * | `blocks.{l}.hook_attn_out`         | [B, T, D]      | always                     |
 * | `blocks.{l}.hook_resid_mid`        | [B, T, D]      | MLP models                 |
 * | `blocks.{l}.ln2.hook_normalized`   | [B, T, D]      | MLP models with LayerNorm  |
 * | `blocks.{l}.mlp.hook_pre`, `hook_post` | [B, T, M]  | MLP models                 |
 * | `blocks.{l}.hook_mlp_out`          | [B, T, D]      | MLP models, computed when hooked |
 * | `blocks.{l}.hook_resid_post`       | [B, T, D]      | always                     |
 * | `ln_final.hook_normalized`         | [B, T, D]      | LayerNorm models           |
 *
 * Meanings (TransformerLens conventions): `hook_normalized` is the LayerNorm's
 * `(x − mean) / sqrt(var + 1e-5)` before its gain and bias; `hook_k` is the key
 * projection and, with smeared keys, `hook_k_smeared` the mixed key
 * `k'_p = σ(α_h) k_p + (1 − σ(α_h)) k_{p−1}` (`k'_0 = k_0`) that the scores use;
 * `hook_attn_scores` is `q·k / sqrt(d_head)` with −inf above the diagonal (key > query);
 * `hook_pattern` its causal softmax (exact zeros above the diagonal; writes above the
 * diagonal of either are ignored: the softmax masks those scores and the pass sets
 * those pattern entries back to 0, so no query sees a later key); `hook_z` the
 * pattern-weighted values; `hook_result` the per-head output `z_h W_O[h]` (no bias);
 * `hook_attn_out` = Σ_h result + b_O; `hook_mlp_out` the MLP's output
 * `hook_post W_out + b_out` (resid_post = resid_mid + mlp_out). `blocks.{l}.hook_resid_post` and
 * `blocks.{l+1}.hook_resid_pre` are the same tensor at two consecutive points.
 * Shortformer models add W_pos to the query/key input only: they have no `hook_pos_embed`.
 *
 * A hook that writes changes what the rest of the pass computes from that point on.
 * With no hook installed the pass is the plain forward pass (same bits, same speed);
 * hooks that only read, or write back what they read, leave every activation and the
 * logits bit-identical (where what a hook leaves picks the pass's route, at
 * `hook_embed`, `hook_pos_embed`, `blocks.0.hook_resid_pre`, `hook_result`,
 * `hook_attn_out` and `hook_mlp_out`, the pass compares it with what it computed).
 * A change at `hook_result`, `hook_attn_out` or `hook_mlp_out` rebuilds the residual
 * stream from what the hooks left (other roundings than the plain pass's fused product);
 * one at `hook_embed`, `hook_pos_embed` or `blocks.0.hook_resid_pre` of a model without
 * LayerNorm turns off the folding of layer 0 into the embeddings (other roundings). Head ablations in force (induct_model_ablate_head()) are hooks too;
 * they run before the caller's at the same point. Hooks may also stay in training steps
 * (induct_train_step_with_hooks(), induct_model_backward_with_hooks()).
 *  @{ */

/**
 * @brief A caller's hook: called with the activation at its point during a pass.
 * @param user The `user` of its ::induct_hook.
 * @param name The point's name, as given.
 * @param activation The activation, `shape[0] × … × shape[ndim−1]` floats, valid during
 *        the call only; may be changed in place (the rest of the pass uses it).
 * @param shape The activation's dimensions (see the table above). `shape[0]` is the
 *        number of sequences of this pass: the batch, or in a training step with
 *        ::INDUCT_OPT_GRAD_SHARDS = S the shard's batch/S (the hook is then called once
 *        per shard; induct_model_hook_batch_index() tells which sequences these are).
 * @param ndim Number of dimensions (3 or 4).
 * @return 0 to continue; any other value stops the pass, which then fails with
 *         ::INDUCT_EINTERRUPTED.
 */
typedef int (*induct_hook_fn)(void *user, const char *name, float *activation,
                              const uint32_t *shape, uint32_t ndim);

/** One hook: a point name, the function, its user pointer. @since 0.1 */
typedef struct induct_hook {
    const char *name;  /**< A hook point name from the table, e.g. `blocks.1.attn.hook_pattern`. */
    induct_hook_fn fn; /**< Called when the pass reaches the point. */
    void *user;        /**< Passed to `fn`. */
} induct_hook;

/**
 * @brief Shape of a hook point for a `[batch][seq_len]` input.
 * @param model The model.
 * @param name A hook point name (see the table).
 * @param batch Sequences in the input.
 * @param seq_len Tokens per sequence.
 * @param[out] shape_out 4 entries: the dimensions, unused ones 0 (may be NULL).
 * @param[out] ndim_out 3 or 4 (may be NULL).
 * @param[out] numel_out The product of the dimensions (may be NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model or name, unknown name);
 *         ::INDUCT_ERANGE (a layer ≥ n_layers, or a point this model does not have);
 *         ::INDUCT_ELIMIT (the element count overflows `size_t`).
 * @since 0.1 Thread-safe (reads the model's config only).
 */
INDUCT_API int induct_model_hook_shape(const induct_model *model, const char *name,
                                       uint32_t batch, uint32_t seq_len, uint32_t shape_out[4],
                                       uint32_t *ndim_out, size_t *numel_out);

/**
 * @brief Name of the `index`-th hook point of this model, in the order a pass reaches
 * them (the embeddings, each block's points, `ln_final`), NUL-terminated.
 * @param model The model.
 * @param index 0, 1, … until ::INDUCT_ERANGE.
 * @param[out] out Buffer of `out_cap` bytes, or NULL to ask for the length.
 * @param out_cap Capacity of `out` in bytes.
 * @param[out] out_len Bytes needed, the NUL included (may be NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model); ::INDUCT_ERANGE (index ≥ the number
 *         of points); ::INDUCT_EBUFSIZE.
 * @since 0.1 Thread-safe (reads the model's config only).
 */
INDUCT_API int induct_model_hook_point(const induct_model *model, size_t index, char *out,
                                       size_t out_cap, size_t *out_len);

/**
 * @brief One forward pass with caller hooks that read or overwrite activations.
 *
 * Each hook runs when the pass reaches its point (hooks at the same point in list
 * order, after the ablations in force); what it leaves in the activation is what the
 * rest of the pass uses. Outputs as induct_model_forward() (one pass over the whole
 * batch). Examples: zeroing a head's slice of `attn.hook_z` is zero ablation of that
 * head; writing one run's activation into another's is activation patching (see
 * docs/hooks.md).
 *
 * @param model The model (its workspace is written; the weights are only read).
 * @param tokens `[batch][seq_len]` ids in `[0, d_vocab)`.
 * @param batch Number of sequences, ≥ 1.
 * @param seq_len Tokens per sequence, 2 … n_ctx.
 * @param hooks `n_hooks` hooks (may be NULL when `n_hooks` is 0); read during the call only.
 * @param n_hooks At most 4096.
 * @param[out] logits_out `[batch][seq_len][d_vocab]`, or NULL.
 * @param logits_cap Capacity of `logits_out` in floats.
 * @param[out] losses_out `[batch][seq_len−1]` per-token losses in nats, or NULL.
 * @param losses_cap Capacity of `losses_out` in floats.
 * @param[out] mean_loss_out Mean per-token loss (nats), or NULL.
 * @return as induct_model_forward(); ::INDUCT_EINVAL (a hook without a function, an
 *         unknown point name); ::INDUCT_ERANGE (a point this model does not have);
 *         ::INDUCT_ELIMIT (more than 4096 hooks); ::INDUCT_ENOMEM (the hooks' scratch, or
 *         the copy that tells whether the hooks at a point of the list above changed
 *         it); ::INDUCT_EINTERRUPTED (a hook returned nonzero: the outputs are not
 *         written). Buffers are checked before the pass.
 * @since 0.1 Uses the model's workspace: one thread per model; hooks run on the
 *        calling thread.
 */
INDUCT_API int induct_model_run_with_hooks(induct_model *model, const int32_t *tokens,
                                           uint32_t batch, uint32_t seq_len,
                                           const induct_hook *hooks, size_t n_hooks,
                                           float *logits_out, size_t logits_cap,
                                           float *losses_out, size_t losses_cap,
                                           double *mean_loss_out);

/**
 * @brief Forward and backward with caller hooks: gradients of the mean per-token loss of
 * the hooked pass into the model's gradient buffer (as induct_model_backward()).
 *
 * A writing hook is a constant overwrite for the backward pass: the entries it changed
 * (compared bit for bit with what the pass computed) pass no gradient to what they
 * replaced; entries it left unchanged keep their gradient, and everything downstream
 * trains on the values the hook left. So a clamped `hook_pattern` (Singh et al. 2024,
 * "What needs to go right for an induction head?") trains the rest of the model around
 * the clamp, and a zeroed `hook_z` slice sends no gradient into its head. A hook that
 * computes its output from its input (a scaling, say) is treated the same way: its
 * function is not differentiated, each element it changed is a constant. Every hook
 * point may be written. In particular: at a LayerNorm's `hook_normalized` the gain and
 * bias train on the values left, and the input's gradient is the unhooked LayerNorm's
 * backward of the gradient at the entries left unchanged (0 at the changed ones); at
 * `hook_attn_scores` the pattern is the softmax of the scores left, and q and k (and
 * b_K, which then has a gradient) get theirs through the unchanged scores only; at
 * `hook_pattern` the softmax's Jacobian is taken at the pattern the scores gave;
 * `hook_attn_out` passes its gradient on to `b_O`, `W_O` and z, `hook_result` (per
 * head and element) to `W_O[h]` and z_h, and `hook_mlp_out` to `b_out`, `W_out` and
 * `hook_post`, only where unchanged (the residual stream around them passes its
 * gradient on as it is); `hook_embed` and
 * `hook_pos_embed` pass d resid to `W_E` and `W_pos` only where unchanged. Writes above
 * the diagonal of the scores or pattern change nothing. A hook that writes back what
 * it read leaves the loss and every gradient bit-identical to induct_model_backward().
 * @param model The model.
 * @param tokens `[batch][seq_len]` ids in `[0, d_vocab)`.
 * @param batch Number of sequences, ≥ 1.
 * @param seq_len Tokens per sequence, 2 … n_ctx.
 * @param hooks `n_hooks` hooks (may be NULL when `n_hooks` is 0); read during the call only.
 * @param n_hooks At most 4096.
 * @param[out] mean_loss_out Mean per-token loss of the hooked pass (nats), or NULL.
 * @return as induct_model_run_with_hooks() and induct_model_backward(); ::INDUCT_ESTATE
 *         (heads ablated); ::INDUCT_ENOMEM or ::INDUCT_ELIMIT (the record of what the
 *         hooks changed: one byte per hooked element, and a copy of the values at a
 *         LayerNorm's `hook_normalized` or `hook_pattern` where a hook changed some;
 *         after writes at `hook_embed`, `hook_pos_embed`, `hook_result`,
 *         `hook_attn_out` or `hook_mlp_out`, two [batch, seq_len, d_model] buffers of
 *         backward scratch,
 *         which count against the model's memory limit: ::INDUCT_ELIMIT).
 * @since 0.1 Uses the model's workspace: one thread per model.
 */
INDUCT_API int induct_model_backward_with_hooks(induct_model *model, const int32_t *tokens,
                                                uint32_t batch, uint32_t seq_len,
                                                const induct_hook *hooks, size_t n_hooks,
                                                double *mean_loss_out);

/**
 * @brief Forward and backward with caller hooks, and gradient hooks that see (and may
 * overwrite) the gradient of the loss at hook points during the backward pass, as
 * TransformerLens's backward hooks do.
 *
 * The forward pass and its `hooks` are those of induct_model_backward_with_hooks(), and so
 * are the gradients it leaves in the model's gradient buffer, except for what the gradient
 * hooks change. Each gradient hook is an ::induct_hook whose function is called during the
 * backward pass with `activation` = the gradient of the mean per-token loss (nats, the
 * mean over batch × (seq_len − 1) positions, as `mean_loss_out`) with respect to the
 * activation at its point, in that activation's shape (the table above; `shape[0]` =
 * batch), that is nats per unit of activation. The activation is the one the rest of the
 * forward pass used: what the forward hooks at the point left. The points are visited in
 * the reverse of the forward pass's order: `ln_final.hook_normalized`, then for each
 * layer l from the last to the first `hook_resid_post`, `hook_mlp_out`, `mlp.hook_post`, `mlp.hook_pre`,
 * `ln2.hook_normalized`, `hook_resid_mid`, `hook_attn_out`, `attn.hook_result`,
 * `attn.hook_z`, `attn.hook_pattern`, `attn.hook_attn_scores`, `attn.hook_k_smeared`,
 * `attn.hook_v`, `attn.hook_k`, `attn.hook_q`, `ln1.hook_normalized`, `hook_resid_pre`,
 * then `hook_pos_embed` and `hook_embed` (the points the model has); gradient hooks at the
 * same point run in list order, each seeing what the one before left.
 *
 * What the hooks leave in the buffer is what flows on: into the gradients of the
 * parameters before the point and of every earlier point (writing zeros at a point stops
 * the gradient through it). Parameters after the point keep the gradients of the
 * unchanged pass: at a LayerNorm's `hook_normalized` the gain and bias (the input's
 * gradient is the LayerNorm's backward of what the hooks left), at `attn.hook_result`
 * b_O (which gets `hook_attn_out`'s gradient). `hook_attn_out` has its own gradient
 * buffer: the residual stream around the attention (resid_mid = resid_pre + attn_out)
 * passes d resid_mid on to resid_pre as it is, and what the hooks leave goes to b_O, W_O
 * and z; so does `hook_mlp_out` (to b_out, W_out and `hook_post`); in the same way `hook_pos_embed` and `hook_embed` each get a copy of layer 0's d
 * resid_pre, and what they leave goes to W_pos and W_E. `blocks.{l}.hook_resid_post` and
 * `blocks.{l+1}.hook_resid_pre` are one tensor: the hooks at the latter run first, the
 * former's see what they left. Above the diagonal (key > query) of `hook_pattern` and
 * `hook_attn_scores` the gradient is 0 (the pass ignores those entries, see the table's
 * notes) and what a hook writes there is ignored. Entries a forward hook changed are
 * constants of the backward pass (induct_model_backward_with_hooks()): the gradient hook
 * at that point sees the loss's gradient with respect to them, and nothing flows past them
 * to what they replaced.
 *
 * Gradient hooks that only read (or write back what they read) leave the loss and every
 * parameter gradient bit-identical to induct_model_backward_with_hooks() with the same
 * `hooks`, except that a gradient hook at `hook_embed`, `hook_pos_embed` or
 * `blocks.0.hook_resid_pre` of a model without LayerNorm turns off the folding of layer 0
 * into the embeddings (other roundings). After a change at `hook_pattern` or
 * `hook_attn_scores` the layer's query, key and value gradients are computed by matrix
 * products per batch and head instead of the fused kernel (other roundings).
 *
 * This is one pass over the whole batch: `shape[0]` is `batch` and
 * induct_model_hook_batch_index() reports the first sequence as 0. (The gradient shards of
 * the training steps, ::INDUCT_OPT_GRAD_SHARDS, do not apply here: a pass split into
 * shards would call each gradient hook once per shard, on that shard's sequences, with
 * its part of the whole batch's mean.)
 *
 * Uses: attribution patching, the first-order estimate of activation patching from one
 * forward and one backward pass (Syed, Rager and Conmy 2023, "Attribution Patching
 * Outperforms Automated Circuit Discovery", section 2), gradient-based saliency at hook
 * points, stopping the gradient through a path.
 *
 * @param model The model (its workspace and gradient buffer are written; the weights are
 *        only read).
 * @param tokens `[batch][seq_len]` ids in `[0, d_vocab)`.
 * @param batch Number of sequences, ≥ 1.
 * @param seq_len Tokens per sequence, 2 … n_ctx.
 * @param hooks `n_hooks` forward hooks (may be NULL when `n_hooks` is 0); read during the
 *        call only.
 * @param n_hooks At most 4096.
 * @param grad_hooks `n_grad_hooks` gradient hooks (may be NULL when `n_grad_hooks` is 0):
 *        a point name from the table and a function, called with the gradient (valid
 *        during the call only; may be changed in place); read during the call only.
 * @param n_grad_hooks At most 4096 (0: induct_model_backward_with_hooks()).
 * @param[out] mean_loss_out Mean per-token loss of the hooked pass (nats), or NULL.
 * @return as induct_model_backward_with_hooks(); ::INDUCT_EINVAL also for a gradient hook
 *         without a function, an unknown point name or NULL `grad_hooks` with
 *         `n_grad_hooks` > 0; ::INDUCT_ERANGE (a point this model does not have);
 *         ::INDUCT_ELIMIT (more than 4096 gradient hooks; the gradient hooks' scratch
 *         above 2^36 floats or over the model's memory limit: [batch, seq_len, d_model]
 *         for hooks at a `hook_normalized`, `hook_attn_out` or `hook_mlp_out`, two of them
 *         and two more of backward scratch for `hook_embed`, `hook_pos_embed`,
 *         `hook_attn_out`, `hook_mlp_out` or `hook_result`, [batch, seq_len, n_heads, d_model] for `hook_result`,
 *         [batch, n_heads, seq_len, seq_len] for `hook_pattern` or `hook_attn_scores`);
 *         ::INDUCT_ENOMEM (those, or the temporary copy of a point's gradient that tells
 *         whether its hooks changed it); ::INDUCT_EINTERRUPTED (a gradient hook returned
 *         nonzero: the backward pass stops there, the gradient buffer's contents are
 *         unspecified and `mean_loss_out` is not written). Names and lists are checked
 *         before the pass.
 * @since 0.2 Uses the model's workspace and gradient buffer: one thread per model; every
 *        hook runs on the calling thread.
 */
INDUCT_API int induct_model_backward_with_grad_hooks(induct_model *model, const int32_t *tokens,
                                                     uint32_t batch, uint32_t seq_len,
                                                     const induct_hook *hooks, size_t n_hooks,
                                                     const induct_hook *grad_hooks,
                                                     size_t n_grad_hooks, double *mean_loss_out);

/**
 * @brief The caller's gradient at the logits of a pass: fill `d_logits` from `logits`.
 * @param user The `user` given to induct_model_backward_from_logits().
 * @param logits The pass's logits, `[batch][seq_len][d_vocab]` floats (nats: the
 *        unnormalised log-probabilities of the next token), read-only, valid during the
 *        call only.
 * @param d_logits `[batch][seq_len][d_vocab]` floats, all 0 on entry: write d(metric)/
 *        d(logits) there (the units of the caller's metric per nat); what is left there
 *        seeds the backward pass. Valid during the call only.
 * @param batch Sequences of the pass.
 * @param seq_len Positions per sequence.
 * @param d_vocab Vocabulary size.
 * @return 0 to continue; any other value stops the call, which then fails with
 *         ::INDUCT_EINTERRUPTED.
 * @since 0.2
 */
typedef int (*induct_logits_grad_fn)(void *user, const float *logits, float *d_logits,
                                     uint32_t batch, uint32_t seq_len, uint32_t d_vocab);

/**
 * @brief One forward and one backward pass of a caller's function of the logits: the
 * gradients of a metric (a logit difference, a probability, ...) instead of the loss,
 * with forward and gradient hooks.
 *
 * The forward pass and its `hooks` are those of induct_model_backward_with_grad_hooks().
 * Then `grad_fn` is called once with the pass's logits and a zeroed `d_logits` buffer of
 * the same shape, in which it leaves d(metric)/d(logits) for its own metric (for the logit
 * difference logits[b, p, i] − logits[b, p, j]: +1 at (b, p, i), −1 at (b, p, j)). The
 * backward pass starts from there instead of from the mean loss's gradient: the model's
 * gradient buffer (induct_model_get_tensor() with ::INDUCT_BUF_GRAD) receives
 * d(metric)/d(parameter), and each gradient hook is called with d(metric)/d(activation)
 * at its point, with every rule of induct_model_backward_with_grad_hooks() (order,
 * what the hooks leave flows on, writes of forward hooks are constants, bit-identity of
 * hooks that only read). With `d_logits` = the mean loss's gradient ((softmax − one-hot of
 * the next token) / (batch × (seq_len − 1)) at positions 0 … seq_len − 2, 0 at the last)
 * the gradients are those of induct_model_backward_with_grad_hooks() up to rounding (the
 * loss's own backward fuses the unembedding with the cross-entropy).
 *
 * Uses: attribution patching, the first-order estimate of activation patching from one
 * forward and one backward pass of the corrupted input (Nanda 2023, "Attribution
 * Patching: Activation Patching At Industrial Scale"; Syed, Rager and Conmy 2023,
 * "Attribution Patching Outperforms Automated Circuit Discovery", section 2: the change of
 * a metric when the activation a goes to a' is estimated by (a' − a) · d metric/d a),
 * which needs the gradient of the metric of the patching experiment (Wang et al. 2022,
 * "Interpretability in the Wild", section 3: the logit difference), not the loss's.
 *
 * @param model The model (its workspace and gradient buffer are written; the weights are
 *        only read).
 * @param tokens `[batch][seq_len]` ids in `[0, d_vocab)` (the next tokens also give the
 *        loss reported in `mean_loss_out`).
 * @param batch Number of sequences, ≥ 1.
 * @param seq_len Tokens per sequence, 2 … n_ctx.
 * @param hooks `n_hooks` forward hooks (may be NULL when `n_hooks` is 0); read during the
 *        call only.
 * @param n_hooks At most 4096.
 * @param grad_hooks `n_grad_hooks` gradient hooks (may be NULL when `n_grad_hooks` is 0),
 *        as in induct_model_backward_with_grad_hooks(); read during the call only.
 * @param n_grad_hooks At most 4096.
 * @param grad_fn The function that gives d(metric)/d(logits); not NULL.
 * @param user Passed to `grad_fn` as is (may be NULL).
 * @param[out] mean_loss_out Mean per-token loss of the hooked pass (nats), or NULL.
 * @return ::INDUCT_OK; the errors of induct_model_backward_with_grad_hooks(); ::INDUCT_EINVAL
 *         for a NULL `grad_fn`; ::INDUCT_ELIMIT or ::INDUCT_ENOMEM for the `d_logits`
 *         buffer (batch × seq_len × d_vocab floats, counted against the model's memory
 *         limit); ::INDUCT_EINTERRUPTED (`grad_fn` returned nonzero);
 *         ::INDUCT_ENUMERIC (`grad_fn` left a NaN or an infinity). On an error after the
 *         forward pass the gradient buffer's contents are unspecified and `mean_loss_out`
 *         is not written.
 * @since 0.2 Uses the model's workspace and gradient buffer: one thread per model;
 *        `grad_fn` and every hook run on the calling thread.
 */
INDUCT_API int induct_model_backward_from_logits(induct_model *model, const int32_t *tokens,
                                                 uint32_t batch, uint32_t seq_len,
                                                 const induct_hook *hooks, size_t n_hooks,
                                                 const induct_hook *grad_hooks,
                                                 size_t n_grad_hooks,
                                                 induct_logits_grad_fn grad_fn, void *user,
                                                 double *mean_loss_out);

/**
 * @brief One forward pass that copies the activations at `n` named points into caller
 * buffers (a cache, as TransformerLens's run_with_cache).
 *
 * `bufs[i]` receives the activation at `names[i]` with the shape of the table
 * (induct_model_hook_shape()). Caching does not change the pass: logits and every
 * activation are bit-identical to induct_model_forward() on the same batch. The
 * ablations in force apply. Where no ablation writes a point, the pass computes it in
 * its buffer and reads it from there (no copy, the same bits), so the buffers are
 * in use during the whole call: another thread must not touch them until it returns.
 * Buffers that overlap one another are allowed: every point is then copied as the
 * pass reaches it, and where two overlap the later point's values remain.
 * @param model The model.
 * @param tokens `[batch][seq_len]` ids in `[0, d_vocab)`.
 * @param batch Number of sequences, ≥ 1.
 * @param seq_len Tokens per sequence, 2 … n_ctx.
 * @param names `n` hook point names.
 * @param bufs `n` buffers (any alignment), written during the call; after a failure
 *        before the pass none is written, after one during it (a loss that is not
 *        finite: ::INDUCT_ENUMERIC) their contents are unspecified.
 * @param caps `n` capacities in floats.
 * @param n At most 4096 (0: a plain pass).
 * @param[out] logits_out `[batch][seq_len][d_vocab]`, or NULL.
 * @param logits_cap Capacity of `logits_out` in floats.
 * @param[out] mean_loss_out Mean per-token loss (nats), or NULL.
 * @return as induct_model_forward(); ::INDUCT_EINVAL (NULL arrays with n > 0, unknown
 *         name); ::INDUCT_ERANGE (a point this model does not have); ::INDUCT_EBUFSIZE
 *         (a NULL or short buffer: checked before the pass, nothing is written).
 * @since 0.1 Uses the model's workspace: one thread per model.
 */
INDUCT_API int induct_model_run_with_cache(induct_model *model, const int32_t *tokens,
                                           uint32_t batch, uint32_t seq_len,
                                           const char *const *names, float *const *bufs,
                                           const size_t *caps, size_t n, float *logits_out,
                                           size_t logits_cap, double *mean_loss_out);

/**
 * @brief One training step (as induct_train_step()) with caller hooks in its forward
 * pass; the backward pass follows what they did (see induct_model_backward_with_hooks()).
 *
 * With ::INDUCT_OPT_GRAD_SHARDS = S > 1 or a communicator (@ref distributed) the hooks
 * run in every shard's forward pass, on that shard's batch/S sequences (`shape[0]` is
 * batch/S), in shard order: shard 0's forward and backward, then shard 1's, …; on
 * rank r of P ranks only for its own shards `r·S/P … (r+1)·S/P − 1`. So a hook at one
 * point is called S/P times per step; induct_model_hook_batch_index() gives, inside the
 * callback, the index in the whole batch of the activation's first sequence. Each
 * shard's backward pass follows what the hooks wrote in its own forward pass, as
 * above. A hook that treats every sequence alone (a constant overwrite, a clamp that
 * depends on the sequence's own tokens) gives the gradient of the one-pass step up to
 * the float rounding of the shard tree, and the same bits for every rank count P (as
 * without hooks); a hook whose writes depend on the whole batch (its mean, say) sees
 * only a shard.
 * @param optimizer The optimizer (and its model).
 * @param dataset Source of the batch (as induct_train_step()).
 * @param batch Number of sequences, ≥ 1.
 * @param seq_len Tokens per sequence, 2 … n_ctx.
 * @param hooks `n_hooks` hooks (may be NULL when `n_hooks` is 0); read during the call only.
 * @param n_hooks At most 4096.
 * @param[out] loss_out Mean loss of the hooked pass before the update (nats), or NULL.
 * @return as induct_train_step() and induct_model_backward_with_hooks(); a hook that
 *         returns nonzero in any shard stops the step with ::INDUCT_EINTERRUPTED (the
 *         other ranks' steps then fail too, through the communicator's `abort`). On any
 *         error the weights, the moments and the step counter are unchanged (the
 *         gradient buffer is not).
 * @since 0.1 One thread per model; the hooks run on the calling thread.
 */
INDUCT_API int induct_train_step_with_hooks(induct_optimizer *optimizer,
                                            const induct_dataset *dataset, uint32_t batch,
                                            uint32_t seq_len, const induct_hook *hooks,
                                            size_t n_hooks, double *loss_out);

/**
 * @brief As induct_train_step_with_hooks() on caller tokens (induct_train_step_tokens()
 * with hooks).
 * @param optimizer The optimizer (and its model).
 * @param tokens `[batch][seq_len]` int32 ids in `[0, d_vocab)`.
 * @param batch Number of sequences, ≥ 1.
 * @param seq_len Tokens per sequence, 2 … n_ctx.
 * @param hooks `n_hooks` hooks (may be NULL when `n_hooks` is 0); read during the call only.
 * @param n_hooks At most 4096.
 * @param[out] loss_out Mean loss of the hooked pass before the update (nats), or NULL.
 * @return as induct_train_step_with_hooks() (::INDUCT_ERANGE also for a token id outside
 *         the vocabulary).
 * @since 0.1 One thread per model; the hooks run on the calling thread.
 */
INDUCT_API int induct_train_step_tokens_with_hooks(induct_optimizer *optimizer,
                                                   const int32_t *tokens, uint32_t batch,
                                                   uint32_t seq_len, const induct_hook *hooks,
                                                   size_t n_hooks, double *loss_out);

/**
 * @brief Inside a hook's callback: which sequences of the caller's batch the activation
 * holds. In a training step with gradient shards a hook sees one shard at a time
 * (`shape[0]` = batch/S sequences); its rows are the whole batch's sequences
 * `*first_out … *first_out + shape[0] − 1`. In every other pass `*first_out` is 0 and
 * `*batch_out` is `shape[0]`.
 * @param model The model whose pass called the hook.
 * @param[out] first_out Index in the whole batch of the activation's first sequence
 *        (may be NULL).
 * @param[out] batch_out Sequences in the whole batch (may be NULL).
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model); ::INDUCT_ESTATE (not called from
 *         inside a callback of a pass on this model, on the thread that runs the pass).
 * @since 0.1 Call it from the hook, on the thread that runs the pass (the answer is kept
 *        per thread, not on the model).
 */
INDUCT_API int induct_model_hook_batch_index(const induct_model *model, uint32_t *first_out,
                                             uint32_t *batch_out);
/** @} */

/* ------------------------------------------------------------------------ */
/** @defgroup llc The local learning coefficient (experimental)
 *
 * The local learning coefficient (LLC) λ(w*) of singular learning theory measures the
 * effective dimensionality of the loss basin at the weights w*: the volume of the set
 * {w near w* : L(w) − L(w*) < ε} scales as ε^λ (Watanabe 2009; Lau et al. 2023,
 * *The Local Learning Coefficient: A Singularity-Aware Complexity Measure*). A regular
 * minimum in d dimensions has λ = d/2; a degenerate one less. Hoogland et al. 2024
 * (*The Developmental Landscape of In-Context Learning*) follow it over training,
 * and Wang et al. 2024 (*Differentiation and Specialization of Attention Heads via the
 * Refined Local Learning Coefficient*) restrict it to one head's weights.
 *
 * The estimator (Lau et al., Section 4; as the devinterp library computes it): from
 * w*, each of `chains` chains runs stochastic-gradient Langevin dynamics (Welling &
 * Teh 2011) on minibatches,
 *
 *     w ← w − (ε/2)·(nβ·∇L_m(w) + γ·(w − w*)) + √ε·ξ,   ξ ~ N(0, I),
 *
 * only on the coordinates of a mask (the others stay at w*: the weight-refined LLC).
 * The loss L_m(w) of each step's minibatch, taken before the step, is recorded at
 * every `every`-th step after `burnin`; a chain's estimate is
 *
 *     λ̂ = nβ·(mean of its recorded losses − L(w*)),
 *
 * with L(w*) the mean loss over `init_batches` fixed minibatches at w* (or, with
 * `paired`, each recorded loss less the same minibatch's loss at w*). The result
 * reports the mean and the standard deviation over chains, every chain's loss trace,
 * the fraction of draws below L(w*) and, optionally, the Metropolis-adjusted Langevin
 * (MALA) acceptance rate of the steps. docs/llc.md has the definitions, every parameter,
 * the diagnostics, the tests against known learning coefficients and where this
 * implementation differs from devinterp.
 *
 * Determinism: the noise of coordinate k (in storage order among the sampled ones) at
 * step t of chain c and the minibatch of that step are functions of (seed, c, t, k)
 * and (batch_offset, c, t) only, so a result is bit-identical for the same seed, config
 * and weights at any thread count and under any OpenMP settings of the host; the same
 * config samples the same noise and batches at every checkpoint of a training run; and
 * a run with fewer draws is a prefix of one with more.
 *  @{ */

/** nβ = m / ln m with m = `batch`, the sequences of a minibatch (devinterp's
 *  `default_nbeta(dataloader)`). @since 0.2 */
#define INDUCT_LLC_NBETA_BATCH 0u
/** nβ = m / ln m with m = the scored tokens of a minibatch (`batch` × `seq_len − 1`,
 *  or `batch` when the dataset scores one position per sequence). @since 0.2 */
#define INDUCT_LLC_NBETA_TOKENS 1u
/** nβ = n / ln n with n = `n_data`, the size of the training set (Lau et al.: the
 *  inverse temperature β* = 1 / ln n). @since 0.2 */
#define INDUCT_LLC_NBETA_DATA 2u
/** nβ = `nbeta` as given. @since 0.2 */
#define INDUCT_LLC_NBETA_FIXED 3u

/**
 * @brief Settings of induct_llc_estimate() and induct_llc_sample(). Size-prefixed;
 * fields only appended. The defaults are devinterp's (`estimate_learning_coeff` with
 * SGLD: lr 0.01, no localisation, `default_nbeta`) with its newer 4 chains × 200 draws
 * and batch 32: a starting point for a calibration (docs/llc.md), not a recommendation.
 * @since 0.2
 */
typedef struct induct_llc_config {
    size_t size;            /**< `sizeof(induct_llc_config)` as the caller compiled it. */
    uint32_t chains;        /**< Independent chains, 1 … 2^20. Default 4. */
    uint32_t draws;         /**< Recorded losses per chain, ≥ 1. Default 200. */
    uint32_t burnin;        /**< Steps before the first recorded loss. Default 0. */
    uint32_t every;         /**< Steps per recorded loss, ≥ 1 (devinterp's
                                 `num_steps_bw_draws`). A chain runs
                                 `burnin + draws·every` < 2^32 steps. Default 1. */
    uint32_t batch;         /**< m: sequences per minibatch (induct_llc_estimate()); for
                                 induct_llc_sample() only the m of the nβ rules. Default 32. */
    uint32_t seq_len;       /**< Tokens per sequence, 2 … n_ctx; 0 means n_ctx (ignored by
                                 induct_llc_sample()). Default 0. */
    uint32_t init_batches;  /**< K: minibatches whose mean loss at w* is L(w*); 0 means
                                 `chains` (as devinterp). Default 0. */
    uint32_t nbeta_rule;    /**< `INDUCT_LLC_NBETA_*`. Default ::INDUCT_LLC_NBETA_BATCH. */
    double nbeta;           /**< nβ with ::INDUCT_LLC_NBETA_FIXED, finite, > 0. Default 0. */
    double n_data;          /**< n with ::INDUCT_LLC_NBETA_DATA, finite, > 1. Default 0. */
    double epsilon;         /**< ε, the step size, finite, > 0. Default 0.01. */
    double gamma;           /**< γ, the localisation strength (a Gaussian prior of
                                 precision γ centred at w*), finite, ≥ 0. Default 0. */
    double max_increase;    /**< A chain has diverged when a recorded minibatch loss
                                 exceeds L(w*) by more than this (nats); 0 means only a
                                 non-finite loss or gradient counts. Finite, ≥ 0. Default 0. */
    uint64_t seed;          /**< Seed of the Gaussian noise. Default 0. */
    uint64_t batch_offset;  /**< Minibatch indices: batch k of L(w*) is dataset batch
                                 `batch_offset + k`; step t of chain c is batch
                                 `batch_offset + (c + 1)·2^32 + t` (modulo 2^64).
                                 Default 0. */
    uint32_t split;         /**< ::INDUCT_SPLIT_TRAIN (the training loss, as the LLC is
                                 defined) or ::INDUCT_SPLIT_EVAL. Default train. */
    uint32_t mala;          /**< 1: compute the MALA acceptance rate of every step (a
                                 diagnostic; the chain is not changed). Default 0. */
    uint32_t paired;        /**< 1: the paired estimate (not in devinterp): each recorded
                                 loss is compared with the loss of the same minibatch at
                                 w*, λ̂ = nβ·mean(L_m(w_t) − L_m(w*)); the same expectation,
                                 without the minibatch-to-minibatch spread of the loss
                                 (dominant with small minibatches of text), for one
                                 forward pass more per draw. 0: λ̂ = nβ·(mean L_m(w_t) −
                                 L(w*)) as devinterp. Default 0. */
    uint32_t reserved0;     /**< Must be 0. */
} induct_llc_config;

/**
 * @brief Write the defaults into an LLC config of `size` bytes.
 * @param cfg  The struct to fill (not NULL). Untouched on failure.
 * @param size `sizeof(induct_llc_config)` as the caller compiled it.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (size below the struct or
 *         above 4096).
 * @since 0.2 Thread-safe.
 */
INDUCT_API int induct_llc_config_init(induct_llc_config *cfg, size_t size);

/** @brief Opaque result of an LLC estimate: per-chain values and loss traces, read with
 *  induct_llc_result_summary() and induct_llc_result_get(), released with
 *  induct_llc_result_free(). @since 0.2 */
typedef struct induct_llc_result induct_llc_result;

/**
 * @brief A potential for induct_llc_sample(): the loss and its gradient at `w`.
 * @param user The pointer given to induct_llc_sample().
 * @param w `[dim]` the current weights (the sampled coordinates move, the others stay
 *        at w*); valid during the call only.
 * @param dim The dimension.
 * @param batch Index of the minibatch (see ::induct_llc_config::batch_offset); a
 *        potential without data ignores it.
 * @param[out] loss_out The loss L(w) (any finite value; a non-finite one ends the run
 *        as a divergence).
 * @param[out] grad_out `[dim]` ∇L(w), zeroed before the call; only the sampled
 *        coordinates are read.
 * @return 0 to go on; a negative ::induct_status ends the run with that status, a
 *         positive value with ::INDUCT_EINTERRUPTED.
 * @since 0.2
 */
typedef int (*induct_llc_potential_fn)(void *user, const double *w, size_t dim, uint64_t batch,
                                       double *loss_out, double *grad_out);

/**
 * @brief Estimate the LLC of a model at its current weights (see the group's
 * description for the update and the estimate).
 *
 * Every step runs the model's forward and backward pass on `batch` sequences of
 * `seq_len` tokens of `dataset` (batch indices as ::induct_llc_config::batch_offset
 * says; the positions a training step scores, the mean loss in nats). The chain state is
 * double, evaluated at its float32 rounding.
 * @param[out] out The result, owned by the caller (induct_llc_result_free()); NULL on
 *        failure.
 * @param model The model at w*. Its weights are restored bit for bit before the call
 *        returns, also on failure; its gradient buffer and workspace are overwritten.
 * @param dataset Minibatches (only read).
 * @param mask `[n_params]` bytes in storage order (induct_model_tensor_info()), 1 =
 *        sampled, 0 = held at w*; NULL means every parameter (then `mask_len` is 0).
 *        induct_llc_mask_select() builds masks by name and by head.
 * @param mask_len n_params, or 0 with a NULL mask.
 * @param cfg Settings; NULL means the defaults.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL model or dataset, a mask entry other than
 *         0/1 or an empty mask, a dataset vocabulary above d_vocab, a bad setting: zero
 *         chains, draws, every or batch, a non-positive or non-finite ε, nβ or n_data, a
 *         negative γ, an nβ rule with m < 2, an unknown rule or split, mala or paired not
 *         0/1, reserved0 ≠ 0);
 *         ::INDUCT_ERANGE (seq_len outside [2, n_ctx], a mask length other than
 *         n_params); ::INDUCT_EABI; ::INDUCT_ELIMIT (too many steps, a workspace or
 *         chain state beyond the model's `max_bytes`); ::INDUCT_ENOMEM;
 *         ::INDUCT_ENUMERIC (a chain diverged: a non-finite loss or gradient, or a loss
 *         more than `max_increase` above L(w*); the message names the chain and step;
 *         no estimate is returned); ::INDUCT_EINTERRUPTED (induct_model_interrupt());
 *         ::INDUCT_ESTATE (a head is ablated: the backward pass refuses ablations, clear
 *         them first); the dataset's errors (e.g. ::INDUCT_ERANGE for a window too long for
 *         it).
 * @since 0.2 Uses the model's workspace and its `n_threads`: one thread per model.
 */
INDUCT_API int induct_llc_estimate(induct_llc_result **out, induct_model *model,
                                   const induct_dataset *dataset, const uint8_t *mask,
                                   size_t mask_len, const induct_llc_config *cfg);

/**
 * @brief Estimate the LLC of a caller's potential at `w_star` with the same sampler: the
 * estimator on its own, for potentials whose learning coefficient is known.
 * `batch`, `seq_len` and `split` of the config play no part except m in the nβ rules
 * (::INDUCT_LLC_NBETA_TOKENS counts `batch` samples).
 * @param[out] out The result (induct_llc_result_free()); NULL on failure.
 * @param fn The potential, called once per minibatch of L(w*) and once per step, on the
 *        calling thread.
 * @param user Passed to `fn`.
 * @param w_star `[dim]` finite; copied.
 * @param dim ≥ 1, ≤ 2^34.
 * @param mask `[dim]` bytes, 1 = sampled, or NULL for every coordinate.
 * @param cfg Settings; NULL means the defaults.
 * @return as induct_llc_estimate() for the settings and divergence; ::INDUCT_EINVAL
 *         (NULL fn or w_star, dim 0, a non-finite w_star); the potential's own negative
 *         status; ::INDUCT_EINTERRUPTED when it returned a positive value.
 * @since 0.2 Thread-safe (nothing is shared between calls).
 */
INDUCT_API int induct_llc_sample(induct_llc_result **out, induct_llc_potential_fn fn, void *user,
                                 const double *w_star, size_t dim, const uint8_t *mask,
                                 const induct_llc_config *cfg);

/**
 * @brief Mark parameters in a mask for induct_llc_estimate(), by TransformerLens name.
 *
 * With `head` = −1: the tensor `name` (`"blocks.1.attn.W_Q"`), or every tensor under
 * the prefix `name` (`"blocks.1.attn"`, `"blocks.0"`, `"embed"`), or every tensor for
 * `""`. With `head` = h ≥ 0: head h's slice of the tensors with a head axis —
 * under an attention prefix (`"blocks.1.attn"`, or `"blocks.1"`) that head's
 * `W_Q[h]`, `W_K[h]`, `W_V[h]` and `W_O[h]` (the weights Wang et al. 2024 refine a
 * head's LLC to; its biases are added by naming them: `"blocks.1.attn.b_Q"` with h),
 * or of the one tensor named. Entries are set to 1 (OR with what the mask holds);
 * nothing is cleared.
 * @param model The model (only read).
 * @param name A tensor name or a prefix ending before a `.`; "" for all.
 * @param head −1, or a head index < n_heads.
 * @param[in,out] mask `[n_params]` bytes in storage order. Untouched on failure.
 * @param mask_len Must be n_params.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL, head < −1, a head of a named tensor
 *         without a head axis); ::INDUCT_ERANGE (mask_len ≠ n_params, head ≥ n_heads,
 *         no tensor matches).
 * @since 0.2 Thread-safe (the model is only read).
 */
INDUCT_API int induct_llc_mask_select(const induct_model *model, const char *name, int32_t head,
                                      uint8_t *mask, size_t mask_len);

/**
 * @brief Scalars of an LLC result. Filled by induct_llc_result_summary() up to the
 * caller's `size`. @since 0.2
 */
typedef struct induct_llc_summary {
    size_t size;          /**< `sizeof(induct_llc_summary)` as the caller compiled it (set it). */
    double llc_mean;      /**< Mean of the chains' λ̂. */
    double llc_std;       /**< Sample standard deviation of the chains' λ̂ (n − 1); NaN
                               with one chain. */
    double llc_se;        /**< Its standard error, llc_std / √chains; NaN with one chain. */
    double init_loss;     /**< L(w*), nats. */
    double nbeta;         /**< The nβ used. */
    double below_init;    /**< Fraction of all draws whose loss is below L(w*) (paired:
                               below the same minibatch's loss at w*). */
    double mala_accept;   /**< Mean MALA acceptance probability over chains and steps;
                               NaN unless `mala` was set. */
    uint64_t n_sampled;   /**< Coordinates sampled (the mask's ones). */
    uint32_t chains;      /**< As configured. */
    uint32_t draws;       /**< Recorded losses per chain. */
    uint32_t steps;       /**< Steps per chain, burnin + draws·every. */
    uint32_t init_batches;/**< K, the minibatches of L(w*). */
    uint32_t paired;      /**< 1 for a paired estimate (::induct_llc_config::paired). */
    uint32_t reserved0;   /**< 0. */
} induct_llc_summary;

/**
 * @brief The scalars of a result.
 * @param result The result.
 * @param[in,out] out Struct whose `size` the caller sets; filled up to it.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL); ::INDUCT_EABI (bad `size`).
 * @since 0.2 Thread-safe (the result is only read).
 */
INDUCT_API int induct_llc_result_summary(const induct_llc_result *result,
                                         induct_llc_summary *out);

/** induct_llc_result_get(): λ̂ of every chain, `[chains]`. @since 0.2 */
#define INDUCT_LLC_CHAIN_LLC 0u
/** induct_llc_result_get(): the recorded losses, `[chains][draws]` (nats). @since 0.2 */
#define INDUCT_LLC_DRAW_LOSSES 1u
/** induct_llc_result_get(): the losses of the burn-in steps, `[chains][burnin]` (nats;
 *  with `every` = 1 they and the draws are every step's loss). @since 0.2 */
#define INDUCT_LLC_BURNIN_LOSSES 2u
/** induct_llc_result_get(): per chain, the fraction of draws below L(w*) (paired: below
 *  their minibatch's loss at w*), `[chains]`. @since 0.2 */
#define INDUCT_LLC_CHAIN_BELOW 3u
/** induct_llc_result_get(): per chain, the mean MALA acceptance, `[chains]` (NaN without
 *  `mala`). @since 0.2 */
#define INDUCT_LLC_CHAIN_MALA 4u
/** induct_llc_result_get(): the loss at w* of each of the K minibatches, `[K]`. @since 0.2 */
#define INDUCT_LLC_INIT_LOSSES 5u
/** induct_llc_result_get(): with `paired`, the loss at w* of each draw's minibatch,
 *  `[chains][draws]` (nats). @since 0.2 */
#define INDUCT_LLC_DRAW_REF_LOSSES 6u

/**
 * @brief Copy one array of a result out.
 * @param result The result.
 * @param which `INDUCT_LLC_CHAIN_LLC`, `…_DRAW_LOSSES`, `…_BURNIN_LOSSES`, `…_CHAIN_BELOW`,
 *        `…_CHAIN_MALA`, `…_INIT_LOSSES` or `…_DRAW_REF_LOSSES`.
 * @param[out] out Buffer of `out_cap` doubles, or NULL to ask for the length.
 * @param out_cap Capacity of `out`.
 * @param[out] out_len Elements of the array (set also on ::INDUCT_EBUFSIZE), or NULL.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL result, unknown `which`,
 *         `…_DRAW_REF_LOSSES` of an estimate that was not paired); ::INDUCT_EBUFSIZE.
 * @since 0.2 Thread-safe (the result is only read).
 */
INDUCT_API int induct_llc_result_get(const induct_llc_result *result, uint32_t which,
                                     double *out, size_t out_cap, size_t *out_len);

/** @brief Release a result. @param result The result, or NULL (a no-op). @since 0.2 */
INDUCT_API void induct_llc_result_free(induct_llc_result *result);
/** @} */

#ifdef __cplusplus
}
#endif

#endif /* INDUCT_INDUCT_H */
