/* lib/analysis: what the library measures on a model: the evaluation set and the ICL
 * score, attention read-outs, probes and head scores, weight-based scores, head ablation
 * and attribution, key-value read-outs, PCA, the local learning coefficient (llc.c, which
 * declares nothing here). Private: never installed. Includes the wings below it: core,
 * kernels (products and LAPACK through the one serial rule), model and data. */
#ifndef INDUCT_ANALYSIS_H
#define INDUCT_ANALYSIS_H

#include "data/data.h"
#include "model/model.h"

/* ---- the prefix-matching score (probes.c) ---------------------------------------
 * One head, one sequence with a repeated block of length P from position `off` on:
 * adds to *s the attention A[p][p − mP + shift] of every query p = off + (r−1)P + i for
 * r = 2 … R, i = i_from … P−1, m = 1 … r−1, in that order, and returns the number of
 * queries. shift 1 is the prefix-matching target (the position after each earlier
 * occurrence of the query's token; docs/definitions.md, "Prefix-matching score"),
 * shift 0 the duplicate-token target. The one implementation of that score: the probe
 * evaluators and induct_analysis_induction_score() (off 0, R 2, i_from 1) call it.
 * A is [T][T]. */
size_t induct__repeat_attention(const float *A, size_t T, size_t off, size_t P, size_t R,
                                size_t i_from, size_t shift, double *s);

/* ---- attention read-outs (readouts.c) -------------------------------------------
 * Add to s[l * n_heads + h] each of the nb sequences' previous-token score (mean over
 * p >= 1 of pattern[p][p-1]) from the patterns of the last forward pass of length T,
 * sequences in order (the training driver's one evaluation pass shares it). */
void induct__previous_token_sums(induct_model *m, uint32_t T, uint32_t nb, double *s);

/* ---- output buffers (outputs.c) ------------------------------------------------ */
/* Check a caller buffer of `need` elements: sets *len, EBUFSIZE with the length. */
int induct__an_out(const char *fn, const char *shape, size_t need, const void *out, size_t cap,
                   size_t *len);
/* `[n_layers][n_heads]` buffer. */
int induct__an_heads_out(const induct_model *m, const char *fn, const void *out, size_t cap,
                         size_t *len);
/* Fail with EINTERRUPTED if induct_model_interrupt() was called. */
int induct__an_interrupted(induct_model *m, const char *fn);

/* ---- the evaluation set (eval.c) ------------------------------------------ */
typedef struct induct__eval {
    int32_t *tok; /* [n_seq][T], validated against the model */
    uint32_t n_seq, T, chunk;
    uint32_t e, t; /* loss indices: early - 1, late - 1 */
    uint64_t pos_seed;
    const uint32_t *sel; /* the caller's positions (strictly increasing, < T - 1), or NULL */
    uint32_t n_sel;      /* 0: every position */
    induct_model *m; /* resource limits: the tokens count in m's memory while open */
    uint64_t held;
} induct__eval;
/* Validate cfg (NULL = defaults) against the model and fetch the tokens. need_icl:
 * the context must hold the late index (ICL score, attribution); loss curves and
 * vectors do not need it. */
int induct__eval_open(induct__eval *ev, induct_model *m, const induct_dataset *d,
                      const induct_eval_config *cfg, int need_icl, const char *fn);
void induct__eval_close(induct__eval *ev);
/* Run sequences [s0, s0 + B) through the model; per-token losses are then in the
 * workspace at m->a_losses, [B][T-1]. Ablations in force apply. */
int induct__eval_chunk(induct_model *m, const induct__eval *ev, uint32_t s0, uint32_t B);
/* ICL score over the whole set with the ablations in force; only the two indices are
 * computed (the same bits as from the full pass's losses). */
int induct__eval_icl(induct_model *m, const induct__eval *ev, double *icl);
/* Validated config copy (defaults for NULL) and the resolved seq_len. */
int induct__eval_config(induct_eval_config *c, const induct_model *m, const induct_eval_config *cfg,
                        int need_icl, const char *fn);

/* The ICL score (ICL paper, "Key Concepts") from the sums over n sequences of the
 * losses at the late and the early index: mean late loss − mean early loss, nats. The
 * one place the formula is written. */
static inline double induct__icl(double late_sum, double early_sum, uint32_t n) {
    return late_sum / n - early_sum / n;
}

/* ---- head ablations (ablation.c): a standing intervention of hooks ------------------ */
#define INDUCT__ABL_NONE 0
#define INDUCT__ABL_ZERO 1
#define INDUCT__ABL_MEAN 2
typedef struct induct__ablation {
    uint8_t *mode;        /* [n_layers * n_heads] INDUCT__ABL_* */
    uint32_t active;      /* number of ablated heads */
    uint32_t first_layer; /* earliest layer with an ablated head (valid when active) */
    uint32_t preserve;    /* pattern-preserving: freeze patterns of layers > first_layer */
    float *mean;          /* [n_layers][n_heads][mean_T][d_head] or NULL */
    uint32_t mean_T;      /* positions in `mean` (1 when pooled) */
    uint32_t mean_per_pos;
    float *frozen;        /* clean patterns [n_layers - first_layer - 1][B][H][T][T] */
    size_t frozen_cap;    /* floats */
} induct__ablation;
/* The model's ablation state, NULL if it never had one. */
induct__ablation *induct__ablation_of(const induct_model *m);
/* The state, created (and installed as the model's standing intervention) if needed. */
int induct__ablation_state(induct_model *m, induct__ablation **out);
/* Update `active` and `first_layer` after changing `mode`. */
void induct__ablation_recount(induct_model *m, induct__ablation *a);
/* The mean reference of head (l, h) at position p, [d_head]. */
const float *induct__ablation_mean_of(const induct_model *m, const induct__ablation *a, size_t l,
                                      size_t h, size_t p);

/* ---- entry points for other library code ------------------------------------------
 * As the public functions of the same name, but they leave the model's interrupt flag
 * alone (the public ones clear it when they start), so that a caller such as the
 * training driver's metric evaluation does not lose an interrupt that arrives while it
 * runs. They still return INDUCT_EINTERRUPTED when the flag is set. */
int induct__analysis_icl_score(induct_model *m, const induct_dataset *d,
                               const induct_eval_config *cfg, double *score_out);
int induct__analysis_loss_by_position(induct_model *m, const induct_dataset *d,
                                      const induct_eval_config *cfg, float *out, size_t out_cap,
                                      size_t *out_len);
int induct__analysis_loss_vectors(induct_model *m, const induct_dataset *d,
                                  const induct_eval_config *cfg, float *per_seq_out,
                                  size_t per_seq_cap, float *avg_out, size_t avg_cap);
int induct__analysis_ablation_attribution(induct_model *m, const induct_dataset *d,
                                          const induct_eval_config *cfg, uint32_t mode, float *out,
                                          size_t out_cap, size_t *out_len, double *icl_out);

#endif
