/* analysis: the fixed evaluation set, the ICL score (ICL paper, "Key
 * Concepts"), the loss-by-position curve, per-token loss vectors (Appendix "Data
 * Collection") and the phase-change window. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"

/* the first layout, without positions: callers compiled against it still work */
#define EVAL_CONFIG_MIN offsetof(induct_eval_config, positions)

INDUCT_API int induct_eval_config_init(induct_eval_config *cfg, size_t size) {
    /* a caller compiled before `positions` was appended passes the older size (the
     * fields set below all lie inside it) */
    INDUCT__CONFIG_INIT_CHECK(cfg, size, EVAL_CONFIG_MIN);
    memset(cfg, 0, size);
    cfg->size = size;
    cfg->n_seq = 8;
    cfg->seq_len = 0;
    cfg->chunk = 4;
    cfg->early = 50;
    cfg->late = 500;
    cfg->split = INDUCT_SPLIT_EVAL;
    cfg->batch_index = 0;
    cfg->pos_seed = 0;
    return INDUCT_OK;
}

int induct__eval_config(induct_eval_config *c, const induct_model *m, const induct_eval_config *cfg,
                        int need_icl, const char *fn) {
    induct_eval_config_init(c, sizeof *c);
    if (cfg)
        INDUCT_TRY(induct__struct_in(c, sizeof *c, EVAL_CONFIG_MIN, cfg, "induct_eval_config"));
    if (c->seq_len == 0) c->seq_len = m->cfg.n_ctx;
    INDUCT_FAIL_IF(c->n_seq == 0, INDUCT_EINVAL, "%s: n_seq must be >= 1", fn);
    INDUCT_FAIL_IF(c->chunk == 0, INDUCT_EINVAL, "%s: chunk must be >= 1", fn);
    INDUCT_FAIL_IF(c->split > INDUCT_SPLIT_EVAL, INDUCT_EINVAL, "%s: unknown split %u", fn,
                   c->split);
    INDUCT_FAIL_IF(c->early == 0 || c->late <= c->early, INDUCT_EINVAL,
                   "%s: needs 1 <= early < late (got early %u, late %u)", fn, c->early, c->late);
    INDUCT_FAIL_IF(c->seq_len < 2 || c->seq_len > m->cfg.n_ctx, INDUCT_ERANGE,
                   "%s: seq_len %u outside [2, n_ctx = %u]", fn, c->seq_len, m->cfg.n_ctx);
    INDUCT_FAIL_IF(need_icl && (uint64_t)c->late + 1 > c->seq_len, INDUCT_ERANGE,
                   "%s: the context is too short: the loss of token %u needs seq_len >= %u, "
                   "got %u",
                   fn, c->late, c->late + 1, c->seq_len);
    INDUCT_FAIL_IF(c->reserved0 != 0, INDUCT_EINVAL, "%s: reserved0 must be 0", fn);
    INDUCT_FAIL_IF(c->n_positions && !c->positions, INDUCT_EINVAL,
                   "%s: positions is NULL with n_positions %u", fn, c->n_positions);
    INDUCT_FAIL_IF(!c->n_positions && c->positions, INDUCT_EINVAL,
                   "%s: positions is set with n_positions 0 (NULL and 0 mean every position)",
                   fn);
    for (uint32_t j = 0; j < c->n_positions; j++) {
        INDUCT_FAIL_IF(c->positions[j] >= c->seq_len - 1, INDUCT_ERANGE,
                       "%s: positions[%u] = %u outside [0, seq_len - 2 = %u]", fn, j,
                       c->positions[j], c->seq_len - 2);
        INDUCT_FAIL_IF(j > 0 && c->positions[j] <= c->positions[j - 1], INDUCT_EINVAL,
                       "%s: positions must increase strictly (positions[%u] = %u after %u)", fn,
                       j, c->positions[j], c->positions[j - 1]);
    }
    if (c->chunk > c->n_seq) c->chunk = c->n_seq;
    return INDUCT_OK;
}

int induct__eval_open(induct__eval *ev, induct_model *m, const induct_dataset *d,
                      const induct_eval_config *cfg, int need_icl, const char *fn) {
    memset(ev, 0, sizeof *ev);
    INDUCT_FAIL_IF(!m || !d, INDUCT_EINVAL, "%s: NULL model or dataset", fn);
    induct_eval_config c;
    INDUCT_TRY(induct__eval_config(&c, m, cfg, need_icl, fn));
    INDUCT_FAIL_IF(d->d_vocab > m->cfg.d_vocab, INDUCT_EINVAL,
                   "%s: dataset vocabulary %u exceeds the model's d_vocab %u", fn, d->d_vocab,
                   m->cfg.d_vocab);
    size_t n;
    INDUCT_FAIL_IF(!induct__mul(c.n_seq, c.seq_len, &n) || (uint64_t)n > ((uint64_t)1 << 34),
                   INDUCT_ELIMIT,
                   "%s: %u sequences of %u tokens are too many", fn, c.n_seq, c.seq_len);
    /* resource limits: the set (held while open), the per-position and per-sequence
     * scratch of the callers, and the workspace of one chunk must fit the model's
     * limits before anything is allocated */
    induct__bytes tmp = {0, 0};
    induct__bytes_add(&tmp, n, sizeof(int32_t));
    induct__bytes_add(&tmp, c.seq_len, sizeof(double));
    induct__bytes_add(&tmp, c.n_seq, sizeof(uint32_t) + sizeof(float));
    INDUCT_FAIL_IF(tmp.overflow, INDUCT_ELIMIT, "%s: size overflow", fn);
    /* the one chunking rule of every evaluation, with the caller's chunk as its bound */
    uint32_t chunk = induct__forward_chunk_rows(m, c.n_seq, c.seq_len, c.chunk);
    INDUCT_TRY(induct__model_check_workspace(m, chunk, c.seq_len, tmp.n));
    int32_t *tok = malloc(n * sizeof *tok);
    INDUCT_FAIL_IF(!tok, INDUCT_ENOMEM, "%s: out of memory for %zu tokens", fn, n);
    int rc = induct_dataset_batch(d, c.split, c.batch_index, c.n_seq, c.seq_len, tok, n, NULL, 0);
    if (rc == INDUCT_OK) rc = induct__model_validate_tokens(m, tok, c.n_seq, c.seq_len);
    if (rc != INDUCT_OK) {
        free(tok);
        return rc;
    }
    ev->m = m;
    ev->held = (uint64_t)n * sizeof *tok;
    induct__model_held(m, ev->held, 0);
    ev->tok = tok;
    ev->n_seq = c.n_seq;
    ev->T = c.seq_len;
    ev->chunk = chunk;
    ev->e = c.early - 1;
    ev->t = c.late - 1;
    ev->pos_seed = c.pos_seed;
    ev->sel = c.positions;
    ev->n_sel = c.n_positions;
    return INDUCT_OK;
}

void induct__eval_close(induct__eval *ev) {
    free(ev->tok);
    ev->tok = NULL;
    if (ev->m) induct__model_held(ev->m, 0, ev->held);
    ev->held = 0;
}

int induct__eval_chunk(induct_model *m, const induct__eval *ev, uint32_t s0, uint32_t B) {
    induct__pass p = induct__pass_of(ev->tok + (size_t)s0 * ev->T, B, ev->T);
    return induct__forward(m, &p, NULL);
}

/* One pass over the set: sum of losses per position (sum_out [T-1], may be NULL)
 * and the loss of sequence i at pos[i] (vec_out [n_seq], may be NULL). */
static int eval_pass(induct_model *m, const induct__eval *ev, double *sum_out, const uint32_t *pos,
                     float *vec_out, const char *fn) {
    uint32_t T1 = ev->T - 1;
    if (sum_out) memset(sum_out, 0, (size_t)T1 * sizeof *sum_out);
    for (uint32_t s0 = 0; s0 < ev->n_seq; s0 += ev->chunk) {
        INDUCT_TRY(induct__an_interrupted(m, fn));
        uint32_t B = ev->n_seq - s0 < ev->chunk ? ev->n_seq - s0 : ev->chunk;
        INDUCT_TRY(induct__eval_chunk(m, ev, s0, B));
        const float *L = induct__ws(m, m->a_losses);
        for (uint32_t b = 0; b < B; b++) {
            const float *Lb = L + (size_t)b * T1;
            if (sum_out)
                for (uint32_t p = 0; p < T1; p++)
                    sum_out[p] += Lb[p];
            if (vec_out) vec_out[s0 + b] = Lb[pos[s0 + b]];
        }
    }
    return INDUCT_OK;
}

/* One pass over the set computing the loss only at positions sel[0..n_sel) of every
 * sequence and, when pos is not NULL, at pos[i] of sequence i: sum_out[j] (n_sel) sums
 * the loss at sel[j] over the sequences, vec_out[i] (n_seq, with pos) is the loss at
 * pos[i]. The forward pass's row path (final LayerNorm, logits and loss at those rows
 * only); per row the same bits as the full pass's losses, summed in the same order. */
static int eval_rows(induct_model *m, const induct__eval *ev, const uint32_t *sel, uint32_t n_sel,
                     const uint32_t *pos, double *sum_out, float *vec_out, const char *fn) {
    size_t k = (size_t)n_sel + (pos != NULL), R = k * ev->chunk; /* k <= T, chunk <= n_seq */
    size_t *rows = malloc(R * sizeof *rows);
    double *loss = malloc(R * sizeof *loss);
    int rc = rows && loss ? INDUCT_OK : induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    memset(sum_out, 0, (size_t)n_sel * sizeof *sum_out);
    for (uint32_t s0 = 0; rc == INDUCT_OK && s0 < ev->n_seq; s0 += ev->chunk) {
        rc = induct__an_interrupted(m, fn);
        if (rc != INDUCT_OK) break;
        uint32_t B = ev->n_seq - s0 < ev->chunk ? ev->n_seq - s0 : ev->chunk;
        for (uint32_t b = 0; b < B; b++) {
            for (uint32_t j = 0; j < n_sel; j++) rows[b * k + j] = (size_t)b * ev->T + sel[j];
            if (pos) rows[b * k + n_sel] = (size_t)b * ev->T + pos[s0 + b];
        }
        induct__pass p = induct__pass_of(ev->tok + (size_t)s0 * ev->T, B, ev->T);
        p.rows = rows;
        p.n_rows = k * B;
        p.row_loss = loss;
        rc = induct__forward(m, &p, NULL);
        if (rc != INDUCT_OK) break;
        for (uint32_t b = 0; b < B; b++) {
            for (uint32_t j = 0; j < n_sel; j++) sum_out[j] += loss[b * k + j];
            if (pos) vec_out[s0 + b] = (float)loss[b * k + n_sel];
        }
    }
    free(rows);
    free(loss);
    return rc;
}

int induct__eval_icl(induct_model *m, const induct__eval *ev, double *icl) {
    const uint32_t sel[2] = {ev->e, ev->t};
    double sum[2];
    INDUCT_TRY(eval_rows(m, ev, sel, 2, NULL, sum, NULL, "icl score"));
    *icl = induct__icl(sum[1], sum[0], ev->n_seq);
    return INDUCT_OK;
}

/* One pass over the set, full or at the caller's positions (ev->sel): the mean loss per
 * position (avg_out [T-1], NaN where not computed; may be NULL) and the loss of sequence
 * i at pos[i] (vec_out [n_seq], may be NULL). */
static int eval_means(induct_model *m, const induct__eval *ev, float *avg_out,
                      const uint32_t *pos, float *vec_out, const char *fn) {
    uint32_t T1 = ev->T - 1, n = ev->n_sel ? ev->n_sel : T1;
    double *sum = malloc((size_t)n * sizeof *sum);
    INDUCT_FAIL_IF(!sum, INDUCT_ENOMEM, "%s: out of memory", fn);
    int rc = ev->n_sel ? eval_rows(m, ev, ev->sel, ev->n_sel, vec_out ? pos : NULL, sum, vec_out, fn)
                       : eval_pass(m, ev, sum, pos, vec_out, fn);
    if (rc == INDUCT_OK && avg_out) {
        if (ev->n_sel) {
            for (uint32_t p = 0; p < T1; p++) avg_out[p] = NAN;
            for (uint32_t j = 0; j < ev->n_sel; j++)
                avg_out[ev->sel[j]] = (float)(sum[j] / ev->n_seq);
        } else {
            for (uint32_t p = 0; p < T1; p++) avg_out[p] = (float)(sum[p] / ev->n_seq);
        }
    }
    free(sum);
    return rc;
}

INDUCT_API int induct_analysis_icl_score(induct_model *m, const induct_dataset *d,
                                         const induct_eval_config *cfg, double *score_out) {
    if (m) atomic_store(&m->interrupt, 0);
    return induct__analysis_icl_score(m, d, cfg, score_out);
}

int induct__analysis_icl_score(induct_model *m, const induct_dataset *d,
                               const induct_eval_config *cfg, double *score_out) {
    const char *fn = "induct_analysis_icl_score";
    INDUCT_FAIL_IF(!score_out, INDUCT_EINVAL, "%s: score_out is NULL", fn);
    induct__eval ev;
    INDUCT_TRY(induct__eval_open(&ev, m, d, cfg, 1, fn));
    double icl;
    int rc = induct__eval_icl(m, &ev, &icl);
    induct__eval_close(&ev);
    if (rc == INDUCT_OK) *score_out = icl;
    return rc;
}

INDUCT_API int induct_analysis_loss_by_position(induct_model *m, const induct_dataset *d,
                                                const induct_eval_config *cfg, float *out,
                                                size_t out_cap, size_t *out_len) {
    if (m) atomic_store(&m->interrupt, 0);
    return induct__analysis_loss_by_position(m, d, cfg, out, out_cap, out_len);
}

int induct__analysis_loss_by_position(induct_model *m, const induct_dataset *d,
                                      const induct_eval_config *cfg, float *out, size_t out_cap,
                                      size_t *out_len) {
    const char *fn = "induct_analysis_loss_by_position";
    induct__eval ev;
    INDUCT_TRY(induct__eval_open(&ev, m, d, cfg, 0, fn));
    int rc = induct__an_out(fn, "[seq_len - 1]", ev.T - 1, out, out_cap, out_len);
    if (rc == INDUCT_OK) rc = eval_means(m, &ev, out, NULL, NULL, fn);
    induct__eval_close(&ev);
    return rc;
}

/* pos_i uniform in [0, T-2], a pure function of (seed, i, T). */
static void positions(uint64_t seed, uint32_t n, uint32_t T, uint32_t *out) {
    for (uint32_t i = 0; i < n; i++) {
        induct__rng r;
        induct__rng_seed3(&r, seed, 0x4c4f5353504f53ULL /* "LOSSPOS" */, ((uint64_t)T << 32) | i);
        out[i] = (uint32_t)induct__rng_below(&r, T - 1);
    }
}

INDUCT_API int induct_analysis_loss_positions(const induct_model *m, const induct_eval_config *cfg,
                                              uint32_t *out, size_t out_cap, size_t *out_len) {
    const char *fn = "induct_analysis_loss_positions";
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    induct_eval_config c;
    INDUCT_TRY(induct__eval_config(&c, m, cfg, 0, fn));
    INDUCT_TRY(induct__an_out(fn, "[n_seq]", c.n_seq, out, out_cap, out_len));
    positions(c.pos_seed, c.n_seq, c.seq_len, out);
    return INDUCT_OK;
}

INDUCT_API int induct_analysis_loss_vectors(induct_model *m, const induct_dataset *d,
                                            const induct_eval_config *cfg, float *per_seq_out,
                                            size_t per_seq_cap, float *avg_out, size_t avg_cap) {
    if (m) atomic_store(&m->interrupt, 0);
    return induct__analysis_loss_vectors(m, d, cfg, per_seq_out, per_seq_cap, avg_out, avg_cap);
}

int induct__analysis_loss_vectors(induct_model *m, const induct_dataset *d,
                                  const induct_eval_config *cfg, float *per_seq_out,
                                  size_t per_seq_cap, float *avg_out, size_t avg_cap) {
    const char *fn = "induct_analysis_loss_vectors";
    INDUCT_FAIL_IF((!per_seq_out && per_seq_cap) || (!avg_out && avg_cap), INDUCT_EINVAL,
                   "%s: a NULL buffer needs capacity 0", fn);
    induct__eval ev;
    INDUCT_TRY(induct__eval_open(&ev, m, d, cfg, 0, fn));
    uint32_t T1 = ev.T - 1;
    int rc = INDUCT_OK;
    if (per_seq_out && per_seq_cap < ev.n_seq)
        rc = induct__fail(INDUCT_EBUFSIZE, "%s: per_seq_out needs %u floats ([n_seq]), holds %zu",
                          fn, ev.n_seq, per_seq_cap);
    else if (avg_out && avg_cap < T1)
        rc = induct__fail(INDUCT_EBUFSIZE, "%s: avg_out needs %u floats ([seq_len - 1]), holds %zu",
                          fn, T1, avg_cap);
    uint32_t *pos = NULL;
    float *vec = NULL;
    if (rc == INDUCT_OK) {
        pos = malloc((size_t)ev.n_seq * sizeof *pos);
        vec = malloc((size_t)ev.n_seq * sizeof *vec);
        if (!pos || !vec) rc = induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    }
    if (rc == INDUCT_OK) {
        positions(ev.pos_seed, ev.n_seq, ev.T, pos);
        /* the whole (a) vector is computed, so a pass at chosen positions must also run
         * each sequence's own random position */
        rc = eval_means(m, &ev, avg_out, pos, per_seq_out ? vec : NULL, fn);
    }
    if (rc == INDUCT_OK && per_seq_out) memcpy(per_seq_out, vec, (size_t)ev.n_seq * sizeof *vec);
    free(pos);
    free(vec);
    induct__eval_close(&ev);
    return rc;
}

/* ---- phase-change window ------------------------------------------------------- */

INDUCT_API int induct_phase_config_init(induct_phase_config *cfg, size_t size) {
    INDUCT__CONFIG_INIT_CHECK(cfg, size, sizeof(induct_phase_config));
    memset(cfg, 0, size);
    cfg->size = size;
    cfg->lo_frac = 0.1;
    cfg->hi_frac = 0.9;
    cfg->min_change = 0.05;
    cfg->smooth = 1;
    return INDUCT_OK;
}

/* Step at which f first reaches `level`, searching from index `from`; linear
 * interpolation between the point before and the crossing point. */
static double crossing(const double *x, const double *f, size_t n, size_t from, double level,
                       size_t *idx) {
    for (size_t i = from; i < n; i++) {
        if (f[i] >= level) {
            *idx = i;
            if (i == 0 || f[i] == f[i - 1]) return x[i];
            double a = (level - f[i - 1]) / (f[i] - f[i - 1]);
            if (a < 0) a = 0; /* f[i-1] already >= level (when starting mid-series) */
            return x[i - 1] + a * (x[i] - x[i - 1]);
        }
    }
    *idx = n - 1;
    return x[n - 1]; /* unreachable: f[n-1] == 1 >= level */
}

INDUCT_API int induct_analysis_phase_window(const double *steps, const double *icl, size_t n,
                                            const induct_phase_config *cfg, double *start_out,
                                            double *end_out, uint32_t *found_out) {
    const char *fn = "induct_analysis_phase_window";
    INDUCT_FAIL_IF(!steps || !icl || !start_out || !end_out, INDUCT_EINVAL, "%s: NULL argument",
                   fn);
    INDUCT_FAIL_IF(n < 2, INDUCT_EINVAL, "%s: needs at least 2 points (got %zu)", fn, n);
    induct_phase_config c;
    induct_phase_config_init(&c, sizeof c);
    if (cfg) INDUCT_TRY(induct__struct_in(&c, sizeof c, sizeof c, cfg, "induct_phase_config"));
    INDUCT_FAIL_IF(!(c.lo_frac > 0 && c.lo_frac < 1 && c.hi_frac > c.lo_frac && c.hi_frac <= 1),
                   INDUCT_EINVAL, "%s: needs 0 < lo_frac < hi_frac <= 1 (got %g, %g)", fn,
                   c.lo_frac, c.hi_frac);
    INDUCT_FAIL_IF(!(c.min_change >= 0) || !isfinite(c.min_change), INDUCT_EINVAL,
                   "%s: min_change must be finite and >= 0", fn);
    INDUCT_FAIL_IF(c.smooth == 0 || c.smooth % 2 == 0, INDUCT_EINVAL,
                   "%s: smooth must be odd and >= 1 (got %u)", fn, c.smooth);
    INDUCT_FAIL_IF(c.reserved0 != 0, INDUCT_EINVAL, "%s: reserved0 must be 0", fn);
    for (size_t i = 0; i < n; i++) {
        INDUCT_FAIL_IF(!isfinite(steps[i]) || !isfinite(icl[i]), INDUCT_EINVAL,
                       "%s: point %zu is not finite", fn, i);
        INDUCT_FAIL_IF(i > 0 && !(steps[i] > steps[i - 1]), INDUCT_EINVAL,
                       "%s: steps must increase strictly (point %zu)", fn, i);
    }
    size_t bytes;
    INDUCT_FAIL_IF(!induct__mul(n, 2 * sizeof(double), &bytes), INDUCT_ELIMIT,
                   "%s: too many points", fn);
    double *s = malloc(bytes);
    INDUCT_FAIL_IF(!s, INDUCT_ENOMEM, "%s: out of memory", fn);
    double *f = s + n;
    size_t half = c.smooth / 2;
    for (size_t i = 0; i < n; i++) {
        size_t lo = i > half ? i - half : 0, hi = i + half < n - 1 ? i + half : n - 1;
        double acc = 0.0;
        for (size_t j = lo; j <= hi; j++)
            acc += icl[j];
        s[i] = acc / (double)(hi - lo + 1);
    }
    double delta = s[n - 1] - s[0];
    uint32_t found = fabs(delta) >= c.min_change && delta != 0.0;
    double start = NAN, end = NAN;
    if (found) {
        for (size_t i = 0; i < n; i++)
            f[i] = (s[i] - s[0]) / delta;
        f[n - 1] = 1.0;
        size_t i0, i1;
        start = crossing(steps, f, n, 0, c.lo_frac, &i0);
        end = crossing(steps, f, n, i0, c.hi_frac, &i1);
        if (end < start) end = start;
    }
    free(s);
    *start_out = start;
    *end_out = end;
    if (found_out) *found_out = found;
    return INDUCT_OK;
}
