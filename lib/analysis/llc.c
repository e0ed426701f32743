/* The local learning coefficient (LLC) by stochastic-gradient Langevin dynamics:
 * Lau, Furman, Wang, Murfet & Wei 2023/2025, "The Local Learning Coefficient: A
 * Singularity-Aware Complexity Measure" (the estimator, with localisation), as the
 * devinterp library implements it (SGLD with `nbeta`, `localization`, an
 * `optimize_over` mask); used over training by Hoogland et al. 2024, "The Developmental
 * Landscape of In-Context Learning", and per weight subset by Wang et al. 2024,
 * "Differentiation and Specialization of Attention Heads via the Refined Local
 * Learning Coefficient". docs/llc.md has the definitions and where we differ.
 *
 * One sampler serves two targets: a model (its forward and backward passes on dataset
 * minibatches, float32 weights) and a caller's potential (a callback giving loss and
 * gradient, double). The chain state is double in both; the model is evaluated at the
 * state rounded to float32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"

/* coordinates per noise block: each block draws from its own counter-based stream, so
 * the noise of a coordinate does not depend on how many threads share the blocks */
#define NOISE_BLOCK 4096u
/* limits that keep the stream and batch-index arithmetic exact */
#define MAX_CHAINS (1u << 20)
#define MAX_STEPS 0xffffffffu

/* ---- configuration --------------------------------------------------------------- */

INDUCT_API int induct_llc_config_init(induct_llc_config *cfg, size_t size) {
    INDUCT__CONFIG_INIT_CHECK(cfg, size, sizeof(induct_llc_config));
    memset(cfg, 0, size);
    cfg->size = size;
    /* devinterp's defaults (estimate_learning_coeff: SGLD lr 0.01, localization 0,
     * nbeta = default_nbeta(batch)) with its newer 4 chains x 200 draws, batch 32 */
    cfg->chains = 4;
    cfg->draws = 200;
    cfg->burnin = 0;
    cfg->every = 1;
    cfg->batch = 32;
    cfg->seq_len = 0;
    cfg->init_batches = 0;
    cfg->nbeta_rule = INDUCT_LLC_NBETA_BATCH;
    cfg->nbeta = 0.0;
    cfg->n_data = 0.0;
    cfg->epsilon = 0.01;
    cfg->gamma = 0.0;
    cfg->max_increase = 0.0;
    cfg->seed = 0;
    cfg->batch_offset = 0;
    cfg->split = INDUCT_SPLIT_TRAIN;
    cfg->mala = 0;
    cfg->paired = 0;
    return INDUCT_OK;
}

/* The validated config (defaults for NULL) and its nβ; `scored` = scored tokens per
 * sequence (for the tokens rule; 1 for a potential). */
static int llc_config(induct_llc_config *c, const induct_llc_config *cfg, uint64_t scored,
                      double *nbeta, const char *fn) {
    induct_llc_config_init(c, sizeof *c);
    if (cfg) INDUCT_TRY(induct__struct_in(c, sizeof *c, sizeof *c, cfg, "induct_llc_config"));
    INDUCT_FAIL_IF(c->chains == 0 || c->chains > MAX_CHAINS, INDUCT_EINVAL,
                   "%s: chains must be in [1, %u] (got %u)", fn, MAX_CHAINS, c->chains);
    INDUCT_FAIL_IF(c->draws == 0, INDUCT_EINVAL, "%s: draws must be >= 1", fn);
    INDUCT_FAIL_IF(c->every == 0, INDUCT_EINVAL, "%s: every (steps between draws) must be >= 1",
                   fn);
    INDUCT_FAIL_IF((uint64_t)c->draws * c->every + c->burnin > MAX_STEPS, INDUCT_ELIMIT,
                   "%s: burnin + draws x every = %llu steps per chain exceeds %u", fn,
                   (unsigned long long)((uint64_t)c->draws * c->every + c->burnin), MAX_STEPS);
    INDUCT_FAIL_IF(c->batch == 0, INDUCT_EINVAL, "%s: batch must be >= 1", fn);
    INDUCT_FAIL_IF(!(isfinite(c->epsilon) && c->epsilon > 0.0), INDUCT_EINVAL,
                   "%s: epsilon must be finite and > 0 (got %g)", fn, c->epsilon);
    INDUCT_FAIL_IF(!(isfinite(c->gamma) && c->gamma >= 0.0), INDUCT_EINVAL,
                   "%s: gamma must be finite and >= 0 (got %g)", fn, c->gamma);
    INDUCT_FAIL_IF(!(isfinite(c->max_increase) && c->max_increase >= 0.0), INDUCT_EINVAL,
                   "%s: max_increase must be finite and >= 0 (0 = no threshold; got %g)", fn,
                   c->max_increase);
    INDUCT_FAIL_IF(c->split > INDUCT_SPLIT_EVAL, INDUCT_EINVAL, "%s: unknown split %u", fn,
                   c->split);
    INDUCT_FAIL_IF(c->mala > 1, INDUCT_EINVAL, "%s: mala must be 0 or 1 (got %u)", fn, c->mala);
    INDUCT_FAIL_IF(c->paired > 1, INDUCT_EINVAL, "%s: paired must be 0 or 1 (got %u)", fn,
                   c->paired);
    INDUCT_FAIL_IF(c->reserved0 != 0, INDUCT_EINVAL, "%s: reserved0 must be 0", fn);
    double m;
    switch (c->nbeta_rule) {
    case INDUCT_LLC_NBETA_BATCH:
    case INDUCT_LLC_NBETA_TOKENS:
        m = (double)c->batch * (c->nbeta_rule == INDUCT_LLC_NBETA_TOKENS ? (double)scored : 1.0);
        INDUCT_FAIL_IF(m < 2.0, INDUCT_EINVAL,
                       "%s: the m / ln m rule needs m >= 2 samples per batch (m = %g); set "
                       "nbeta_rule = INDUCT_LLC_NBETA_FIXED and nbeta instead",
                       fn, m);
        *nbeta = m / log(m);
        break;
    case INDUCT_LLC_NBETA_DATA:
        INDUCT_FAIL_IF(!(isfinite(c->n_data) && c->n_data > 1.0), INDUCT_EINVAL,
                       "%s: the n / ln n rule needs n_data finite and > 1 (got %g)", fn,
                       c->n_data);
        *nbeta = c->n_data / log(c->n_data);
        break;
    case INDUCT_LLC_NBETA_FIXED:
        INDUCT_FAIL_IF(!(isfinite(c->nbeta) && c->nbeta > 0.0), INDUCT_EINVAL,
                       "%s: nbeta must be finite and > 0 with INDUCT_LLC_NBETA_FIXED (got %g)", fn,
                       c->nbeta);
        *nbeta = c->nbeta;
        break;
    default:
        return induct__fail(INDUCT_EINVAL, "%s: unknown nbeta_rule %u", fn, c->nbeta_rule);
    }
    return INDUCT_OK;
}

/* Batch index of step t of chain c and of the k-th batch of L(w*): chains get disjoint
 * ranges that do not depend on the number of draws (so a shorter run is a prefix of a
 * longer one), the K batches of L(w*) come first. Wraps modulo 2^64 like any index. */
static uint64_t chain_batch(const induct_llc_config *c, uint32_t chain, uint64_t t) {
    return c->batch_offset + ((uint64_t)chain + 1) * ((uint64_t)1 << 32) + t;
}
static uint64_t init_batch(const induct_llc_config *c, uint32_t k) {
    return c->batch_offset + k;
}

/* ---- results --------------------------------------------------------------------- */

struct induct_llc_result {
    uint32_t chains, draws, steps, K;
    uint64_t n_sampled;
    double nbeta, init_loss;
    int mala, paired;
    double *chain_llc;   /* [chains] */
    double *draw_loss;   /* [chains][draws] */
    double *draw_ref;    /* [chains][draws] the draws' minibatch losses at w* (paired), or NULL */
    double *burn_loss;   /* [chains][burnin] */
    uint32_t burnin;
    double *below;       /* [chains] */
    double *accept;      /* [chains] mean MALA acceptance (NaN without) */
    double *init_losses; /* [K] */
};

INDUCT_API void induct_llc_result_free(induct_llc_result *r) {
    if (!r) return;
    free(r->chain_llc);
    free(r->draw_loss);
    free(r->draw_ref);
    free(r->burn_loss);
    free(r->below);
    free(r->accept);
    free(r->init_losses);
    free(r);
}

static int result_new(induct_llc_result **out, const induct_llc_config *c, uint32_t steps,
                      uint32_t K, const char *fn) {
    size_t nd, nbu;
    INDUCT_FAIL_IF(!induct__mul(c->chains, c->draws, &nd) ||
                       !induct__mul(c->chains, c->burnin, &nbu) ||
                       nd + nbu > ((size_t)1 << 36) / sizeof(double),
                   INDUCT_ELIMIT,
                   "%s: chains x (burnin + draws) = %u x %llu loss records are too many", fn,
                   c->chains, (unsigned long long)c->burnin + c->draws);
    induct_llc_result *r = calloc(1, sizeof *r);
    INDUCT_FAIL_IF(!r, INDUCT_ENOMEM, "%s: out of memory", fn);
    r->chains = c->chains;
    r->draws = c->draws;
    r->steps = steps;
    r->K = K;
    r->mala = (int)c->mala;
    r->paired = (int)c->paired;
    r->chain_llc = malloc(c->chains * sizeof(double));
    r->draw_loss = malloc(nd * sizeof(double));
    r->draw_ref = malloc(nd * sizeof(double));
    r->burnin = c->burnin;
    r->burn_loss = malloc((nbu ? nbu : 1) * sizeof(double));
    r->below = malloc(c->chains * sizeof(double));
    r->accept = malloc(c->chains * sizeof(double));
    r->init_losses = malloc((size_t)K * sizeof(double));
    if (!r->chain_llc || !r->draw_loss || !r->draw_ref || !r->burn_loss || !r->below || !r->accept ||
        !r->init_losses) {
        induct_llc_result_free(r);
        return induct__fail(INDUCT_ENOMEM, "%s: out of memory for the loss traces", fn);
    }
    *out = r;
    return INDUCT_OK;
}

INDUCT_API int induct_llc_result_summary(const induct_llc_result *r, induct_llc_summary *out) {
    INDUCT_FAIL_IF(!r, INDUCT_EINVAL, "induct_llc_result_summary: result is NULL");
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_llc_result_summary: out is NULL");
    induct_llc_summary s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    double sum = 0.0;
    for (uint32_t c = 0; c < r->chains; c++) sum += r->chain_llc[c];
    s.llc_mean = sum / r->chains;
    double ss = 0.0;
    for (uint32_t c = 0; c < r->chains; c++) {
        double d = r->chain_llc[c] - s.llc_mean;
        ss += d * d;
    }
    s.llc_std = r->chains > 1 ? sqrt(ss / (r->chains - 1)) : NAN;
    s.llc_se = r->chains > 1 ? s.llc_std / sqrt((double)r->chains) : NAN;
    s.init_loss = r->init_loss;
    s.nbeta = r->nbeta;
    double below = 0.0, acc = 0.0;
    for (uint32_t c = 0; c < r->chains; c++) {
        below += r->below[c];
        acc += r->accept[c];
    }
    s.below_init = below / r->chains;
    s.mala_accept = r->mala ? acc / r->chains : NAN;
    s.n_sampled = r->n_sampled;
    s.chains = r->chains;
    s.draws = r->draws;
    s.steps = r->steps;
    s.init_batches = r->K;
    s.paired = (uint32_t)r->paired;
    return induct__struct_out(out, &s, sizeof s, sizeof s, "induct_llc_summary");
}

INDUCT_API int induct_llc_result_get(const induct_llc_result *r, uint32_t which, double *out,
                                     size_t out_cap, size_t *out_len) {
    const char *fn = "induct_llc_result_get";
    INDUCT_FAIL_IF(!r, INDUCT_EINVAL, "%s: result is NULL", fn);
    const double *src;
    size_t n;
    switch (which) {
    case INDUCT_LLC_CHAIN_LLC: src = r->chain_llc; n = r->chains; break;
    case INDUCT_LLC_DRAW_LOSSES: src = r->draw_loss; n = (size_t)r->chains * r->draws; break;
    case INDUCT_LLC_BURNIN_LOSSES: src = r->burn_loss; n = (size_t)r->chains * r->burnin; break;
    case INDUCT_LLC_CHAIN_BELOW: src = r->below; n = r->chains; break;
    case INDUCT_LLC_CHAIN_MALA: src = r->accept; n = r->chains; break;
    case INDUCT_LLC_INIT_LOSSES: src = r->init_losses; n = r->K; break;
    case INDUCT_LLC_DRAW_REF_LOSSES:
        INDUCT_FAIL_IF(!r->paired, INDUCT_EINVAL,
                       "%s: INDUCT_LLC_DRAW_REF_LOSSES needs a paired estimate (paired = 1)", fn);
        src = r->draw_ref;
        n = (size_t)r->chains * r->draws;
        break;
    default: return induct__fail(INDUCT_EINVAL, "%s: unknown output %u", fn, which);
    }
    if (out_len) *out_len = n;
    INDUCT_FAIL_IF(!out || out_cap < n, INDUCT_EBUFSIZE, "%s: needs %zu doubles, buffer holds %zu",
                   fn, n, out ? out_cap : 0);
    memcpy(out, src, n * sizeof *out);
    return INDUCT_OK;
}

/* ---- the sampler --------------------------------------------------------------------- */

/* What the sampler moves: n coordinates (the mask's, in storage order) of a weight
 * vector, as runs [start, start + len). */
typedef struct llc_runs {
    size_t n_runs, n;
    size_t *start, *len;
} llc_runs;

static void runs_free(llc_runs *r) {
    free(r->start);
    free(r->len);
    r->start = r->len = NULL;
}

/* Runs of the mask (NULL: every coordinate). INDUCT_EINVAL for a mask value other than
 * 0/1 or an empty mask. */
static int runs_of(llc_runs *r, const uint8_t *mask, size_t dim, const char *fn) {
    memset(r, 0, sizeof *r);
    size_t n_runs = 0, n = 0;
    if (!mask) {
        n_runs = 1;
        n = dim;
    } else {
        for (size_t i = 0; i < dim; i++) {
            INDUCT_FAIL_IF(mask[i] > 1, INDUCT_EINVAL, "%s: mask[%zu] is %u; a mask holds 0 or 1", fn,
                           i, mask[i]);
            if (mask[i] && (i == 0 || !mask[i - 1])) n_runs++;
            n += mask[i];
        }
    }
    INDUCT_FAIL_IF(n == 0, INDUCT_EINVAL, "%s: the mask selects no coordinate", fn);
    r->start = malloc(n_runs * sizeof(size_t));
    r->len = malloc(n_runs * sizeof(size_t));
    if (!r->start || !r->len) {
        runs_free(r);
        return induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    }
    if (!mask) {
        r->start[0] = 0;
        r->len[0] = dim;
    } else {
        size_t j = 0;
        for (size_t i = 0; i < dim; i++) {
            if (!mask[i]) continue;
            if (i == 0 || !mask[i - 1]) {
                r->start[j] = i;
                r->len[j] = 0;
                j++;
            }
            r->len[j - 1]++;
        }
    }
    r->n_runs = n_runs;
    r->n = n;
    return INDUCT_OK;
}

/* A target: evaluates the loss (and, with grad, the gradient of the sampled
 * coordinates into g[0..n)) at the weights last stored, on batch `index`. A status
 * ENUMERIC means a non-finite loss. */
typedef struct llc_target {
    int (*eval)(struct llc_target *t, uint64_t index, int grad, double *loss, double *g);
    void (*store)(struct llc_target *t, const double *x); /* set the weights from x[0..n) */
    const llc_runs *runs;
    int nt; /* threads of the noise and update loops */
    const char *fn;
} llc_target;

/* One SGLD step on the n coordinates x (double), blocks of NOISE_BLOCK in parallel:
 *   x <- x - (eps/2) (nbeta g + gamma (x - x*)) + sqrt(eps) xi,   xi ~ N(0, I)
 * (Welling & Teh 2011 with the localisation of Lau et al.; devinterp's SGLD step), the
 * noise of block b from the stream (seed, chain, step, b). With MALA (prev != NULL),
 * x before the step is copied to prev and the block sums of |xi|^2 are written to
 * xi2[b]. Returns the number of blocks with a non-finite gradient (0: fine). */
static size_t sgld_step(size_t n, double *x, const double *xs, const double *g, double eps,
                        double nbeta, double gamma, uint64_t seed, uint32_t chain, uint64_t t,
                        int nt, double *prev, double *xi2) {
    const size_t nb = (n + NOISE_BLOCK - 1) / NOISE_BLOCK;
    const double h = 0.5 * eps, se = sqrt(eps);
    size_t bad = 0;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(+ : bad) if (nt > 1)
    for (size_t b = 0; b < nb; b++) {
        induct__rng r;
        /* (chain, step) in one 64-bit word: chain < 2^20, step < 2^32 */
        induct__rng_seed3(&r, seed, ((uint64_t)chain << 40) | t, b);
        size_t k0 = b * NOISE_BLOCK, k1 = k0 + NOISE_BLOCK < n ? k0 + NOISE_BLOCK : n;
        double s2 = 0.0;
        int fin = 1;
        double z[2];
        for (size_t k = k0; k < k1; k++) {
            /* normals in pairs (both outputs of one Box–Muller transform) */
            if ((k - k0) % 2 == 0) induct__rng_normal_pair(&r, &z[0], &z[1]);
            double xi = z[(k - k0) % 2];
            if (!isfinite(g[k])) fin = 0;
            if (prev) prev[k] = x[k];
            x[k] = x[k] - h * (nbeta * g[k] + gamma * (x[k] - xs[k])) + se * xi;
            s2 += xi * xi;
        }
        if (xi2) xi2[b] = s2;
        if (!fin) bad++;
    }
    return bad;
}

/* MALA (Roberts & Tweedie 1996) acceptance probability of the move prev -> x that the
 * last step made with gradient g_prev of U at prev, judged with U and its gradient at x
 * (u, g): min(1, exp(U(prev) − U(x) + log q(prev | x) − log q(x | prev))), q the
 * Langevin proposal N(w − (eps/2)∇U(w), eps I). U = nβ·loss + γ/2·|x − x*|² (the
 * minibatch losses of the two steps, as devinterp's MalaAcceptanceRate does). The
 * forward move's log q is −|xi|²/2 (sum of the block sums xi2). Block partial sums in
 * a fixed order keep the result independent of the thread count. */
static double mala_accept(size_t n, const double *x, const double *prev, const double *xs,
                          const double *g, double loss, double loss_prev, double dist2_prev,
                          const double *xi2, double eps, double nbeta, double gamma, int nt,
                          double *part, double *dist2_out) {
    const size_t nb = (n + NOISE_BLOCK - 1) / NOISE_BLOCK;
    const double h = 0.5 * eps;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (size_t b = 0; b < nb; b++) {
        size_t k0 = b * NOISE_BLOCK, k1 = k0 + NOISE_BLOCK < n ? k0 + NOISE_BLOCK : n;
        double back = 0.0, d2 = 0.0;
        for (size_t k = k0; k < k1; k++) {
            double dx = x[k] - xs[k];
            double gu = nbeta * g[k] + gamma * dx;
            double e = prev[k] - x[k] + h * gu;
            back += e * e;
            d2 += dx * dx;
        }
        part[2 * b] = back;
        part[2 * b + 1] = d2;
    }
    double back = 0.0, d2 = 0.0, fwd = 0.0;
    for (size_t b = 0; b < nb; b++) {
        back += part[2 * b];
        d2 += part[2 * b + 1];
        fwd += xi2[b];
    }
    *dist2_out = d2;
    double u_prev = nbeta * loss_prev + 0.5 * gamma * dist2_prev;
    double u = nbeta * loss + 0.5 * gamma * d2;
    double log_a = u_prev - u + (-back / (2.0 * eps)) - (-0.5 * fwd);
    if (!(log_a < 0.0)) return 1.0; /* also NaN-free: log_a is finite here */
    return exp(log_a);
}

/* Run every chain from w* on the target; fills r. x* (xs) holds the n sampled
 * coordinates of w*, which the target's weights equal on entry. */
static int run_chains(llc_target *tg, const induct_llc_config *c, double nbeta, const double *xs,
                      induct_llc_result *r, int (*interrupted)(void *), void *iu) {
    const char *fn = tg->fn;
    const size_t n = tg->runs->n;
    const size_t nb = (n + NOISE_BLOCK - 1) / NOISE_BLOCK;
    const uint32_t S = r->steps;
    int rc = INDUCT_OK;
    double *x = malloc(n * sizeof *x), *g = malloc(n * sizeof *g);
    double *prev = c->mala ? malloc(n * sizeof *prev) : NULL;
    double *xi2 = c->mala ? malloc(nb * sizeof *xi2) : NULL;
    double *part = c->mala ? malloc(2 * nb * sizeof *part) : NULL;
    if (!x || !g || (c->mala && (!prev || !xi2 || !part))) {
        rc = induct__fail(INDUCT_ENOMEM, "%s: out of memory for the chain state (%zu coordinates)",
                          fn, n);
        goto done;
    }
    /* L(w*): the mean loss over K fixed batches at w* */
    double l0 = 0.0;
    for (uint32_t k = 0; k < r->K; k++) {
        double lk;
        rc = tg->eval(tg, init_batch(c, k), 0, &lk, NULL);
        if (rc == INDUCT_ENUMERIC)
            rc = induct__fail(INDUCT_ENUMERIC, "%s: the loss at w* on batch %u is not finite", fn, k);
        if (rc) goto done;
        r->init_losses[k] = lk;
        l0 += lk;
    }
    l0 /= r->K;
    r->init_loss = l0;
    r->nbeta = nbeta;
    r->n_sampled = n;
    for (uint32_t ch = 0; ch < c->chains; ch++) {
        memcpy(x, xs, n * sizeof *x);
        tg->store(tg, x);
        double sum = 0.0, below = 0.0, acc = 0.0, loss_prev = 0.0, dist2_prev = 0.0;
        uint32_t d = 0, n_acc = 0;
        for (uint32_t t = 0; t < S; t++) {
            if (interrupted && (rc = interrupted(iu))) goto done;
            double loss;
            rc = tg->eval(tg, chain_batch(c, ch, t), 1, &loss, g);
            if (rc == INDUCT_OK && !isfinite(loss)) rc = INDUCT_ENUMERIC;
            if (rc == INDUCT_ENUMERIC) {
                rc = induct__fail(INDUCT_ENUMERIC,
                                  "%s: chain %u diverged at step %u: the loss is not finite "
                                  "(L(w*) = %.6g nats); lower epsilon, raise gamma or nbeta's "
                                  "batch", fn, ch, t, l0);
                goto done;
            }
            if (rc) goto done;
            if (c->max_increase > 0.0 && loss - l0 > c->max_increase) {
                rc = induct__fail(INDUCT_ENUMERIC,
                                  "%s: chain %u diverged at step %u: loss %.6g nats is %.6g above "
                                  "L(w*) = %.6g, more than max_increase %g; lower epsilon or "
                                  "raise gamma",
                                  fn, ch, t, loss, loss - l0, l0, c->max_increase);
                goto done;
            }
            if (t < c->burnin) r->burn_loss[(size_t)ch * c->burnin + t] = loss;
            if (t >= c->burnin && (t + 1 - c->burnin) % c->every == 0) {
                /* paired: the same minibatch at w* (then the chain's weights again) */
                double ref = l0;
                if (c->paired) {
                    tg->store(tg, xs);
                    rc = tg->eval(tg, chain_batch(c, ch, t), 0, &ref, NULL);
                    tg->store(tg, x);
                    if (rc == INDUCT_ENUMERIC)
                        rc = induct__fail(INDUCT_ENUMERIC,
                                          "%s: the loss at w* on the batch of chain %u step %u "
                                          "is not finite", fn, ch, t);
                    if (rc) goto done;
                    r->draw_ref[(size_t)ch * c->draws + d] = ref;
                }
                r->draw_loss[(size_t)ch * c->draws + d++] = loss;
                sum += loss - ref;
                below += loss < ref;
            }
            if (c->mala && t > 0) {
                double d2;
                acc += mala_accept(n, x, prev, xs, g, loss, loss_prev, dist2_prev, xi2, c->epsilon,
                                   nbeta, c->gamma, tg->nt, part, &d2);
                n_acc++;
                dist2_prev = d2;
            }
            loss_prev = loss;
            if (sgld_step(n, x, xs, g, c->epsilon, nbeta, c->gamma, c->seed, ch, t, tg->nt, prev,
                          xi2)) {
                rc = induct__fail(INDUCT_ENUMERIC,
                                  "%s: chain %u diverged at step %u: a gradient is not finite "
                                  "(loss %.6g nats, L(w*) = %.6g); lower epsilon or raise gamma",
                                  fn, ch, t, loss, l0);
                goto done;
            }
            tg->store(tg, x);
        }
        r->chain_llc[ch] = nbeta * (sum / c->draws);
        r->below[ch] = below / c->draws;
        r->accept[ch] = c->mala ? (n_acc ? acc / n_acc : NAN) : NAN;
    }
done:
    free(x);
    free(g);
    free(prev);
    free(xi2);
    free(part);
    return rc;
}

/* ---- a caller's potential ---------------------------------------------------------- */

typedef struct pot_target {
    llc_target base;
    induct_llc_potential_fn fn;
    void *user;
    double *w;    /* [dim], the full weight vector the callback sees */
    double *grad; /* [dim] */
    size_t dim;
} pot_target;

static int pot_eval(llc_target *t, uint64_t index, int grad, double *loss, double *g) {
    pot_target *p = (pot_target *)t;
    double l = NAN;
    memset(p->grad, 0, p->dim * sizeof *p->grad);
    int rc = p->fn(p->user, p->w, p->dim, index, &l, p->grad);
    INDUCT_FAIL_IF(rc < 0, rc, "%s: the potential failed with status %d at batch %llu", t->fn, rc,
                   (unsigned long long)index);
    INDUCT_FAIL_IF(rc > 0, INDUCT_EINTERRUPTED, "%s: the potential stopped the run (it returned "
                   "%d at batch %llu)", t->fn, rc, (unsigned long long)index);
    if (!isfinite(l)) return INDUCT_ENUMERIC;
    *loss = l;
    if (grad) {
        size_t k = 0;
        for (size_t j = 0; j < t->runs->n_runs; j++)
            for (size_t i = 0; i < t->runs->len[j]; i++) g[k++] = p->grad[t->runs->start[j] + i];
    }
    return INDUCT_OK;
}

static void pot_store(llc_target *t, const double *x) {
    pot_target *p = (pot_target *)t;
    size_t k = 0;
    for (size_t j = 0; j < t->runs->n_runs; j++)
        for (size_t i = 0; i < t->runs->len[j]; i++) p->w[t->runs->start[j] + i] = x[k++];
}

INDUCT_API int induct_llc_sample(induct_llc_result **out, induct_llc_potential_fn fn, void *user,
                                 const double *w_star, size_t dim, const uint8_t *mask,
                                 const induct_llc_config *cfg) {
    const char *name = "induct_llc_sample";
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "%s: out is NULL", name);
    *out = NULL;
    INDUCT_FAIL_IF(!fn || !w_star, INDUCT_EINVAL, "%s: NULL potential or w_star", name);
    INDUCT_FAIL_IF(dim == 0, INDUCT_EINVAL, "%s: dim must be >= 1", name);
    INDUCT_FAIL_IF(dim > ((size_t)1 << 34), INDUCT_ELIMIT, "%s: dim %zu exceeds 2^34", name, dim);
    for (size_t i = 0; i < dim; i++)
        INDUCT_FAIL_IF(!isfinite(w_star[i]), INDUCT_EINVAL, "%s: w_star[%zu] is not finite", name,
                       i);
    induct_llc_config c;
    double nbeta;
    INDUCT_TRY(llc_config(&c, cfg, 1, &nbeta, name));
    uint32_t S = c.burnin + c.draws * c.every;
    uint32_t K = c.init_batches ? c.init_batches : c.chains;
    llc_runs runs;
    INDUCT_TRY(runs_of(&runs, mask, dim, name));
    pot_target p;
    memset(&p, 0, sizeof p);
    p.base.eval = pot_eval;
    p.base.store = pot_store;
    p.base.runs = &runs;
    p.base.nt = 1;
    p.base.fn = name;
    p.fn = fn;
    p.user = user;
    p.dim = dim;
    p.w = malloc(dim * sizeof *p.w);
    p.grad = malloc(dim * sizeof *p.grad);
    double *xs = malloc(runs.n * sizeof *xs);
    induct_llc_result *r = NULL;
    int rc = (!p.w || !p.grad || !xs) ? induct__fail(INDUCT_ENOMEM, "%s: out of memory", name)
                                      : result_new(&r, &c, S, K, name);
    if (rc == INDUCT_OK) {
        memcpy(p.w, w_star, dim * sizeof *p.w);
        size_t k = 0;
        for (size_t j = 0; j < runs.n_runs; j++)
            for (size_t i = 0; i < runs.len[j]; i++) xs[k++] = w_star[runs.start[j] + i];
        rc = run_chains(&p.base, &c, nbeta, xs, r, NULL, NULL);
    }
    free(p.w);
    free(p.grad);
    free(xs);
    runs_free(&runs);
    if (rc) {
        induct_llc_result_free(r);
        return rc;
    }
    *out = r;
    return INDUCT_OK;
}

/* ---- a model ------------------------------------------------------------------------ */

typedef struct model_target {
    llc_target base;
    induct_model *m;
    const induct_dataset *d;
    uint32_t split, B, T, score_pos;
} model_target;

static int model_eval(llc_target *t, uint64_t index, int grad, double *loss, double *g) {
    model_target *mt = (model_target *)t;
    induct_model *m = mt->m;
    size_t need = (size_t)mt->B * mt->T;
    INDUCT_TRY(induct_dataset_batch(mt->d, mt->split, index, mt->B, mt->T, m->tok_ws, need, NULL,
                                    0));
    induct__pass p = induct__pass_of(m->tok_ws, mt->B, mt->T);
    p.grad = (uint32_t)grad;
    p.score_pos = mt->score_pos;
    double l;
    int rc = induct__forward(m, &p, &l);
    if (rc == INDUCT_OK && grad) rc = induct__backward(m, &p);
    if (rc) return rc;
    *loss = l;
    if (grad) {
        size_t k = 0;
        const llc_runs *ru = t->runs;
        for (size_t j = 0; j < ru->n_runs; j++) {
            const float *src = m->grads + ru->start[j];
            for (size_t i = 0; i < ru->len[j]; i++) g[k++] = (double)src[i];
        }
    }
    return INDUCT_OK;
}

static void model_store(llc_target *t, const double *x) {
    model_target *mt = (model_target *)t;
    size_t k = 0;
    const llc_runs *ru = t->runs;
    for (size_t j = 0; j < ru->n_runs; j++) {
        float *dst = mt->m->params + ru->start[j];
        for (size_t i = 0; i < ru->len[j]; i++) dst[i] = (float)x[k++];
    }
}

static int model_interrupted(void *u) { return induct__an_interrupted(u, "induct_llc_estimate"); }

INDUCT_API int induct_llc_estimate(induct_llc_result **out, induct_model *m,
                                   const induct_dataset *d, const uint8_t *mask, size_t mask_len,
                                   const induct_llc_config *cfg) {
    const char *fn = "induct_llc_estimate";
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "%s: out is NULL", fn);
    *out = NULL;
    INDUCT_FAIL_IF(!m || !d, INDUCT_EINVAL, "%s: NULL model or dataset", fn);
    atomic_store(&m->interrupt, 0);
    INDUCT_FAIL_IF(mask && mask_len != m->n_params, INDUCT_ERANGE,
                   "%s: the mask has %zu entries; the model has %zu parameters", fn, mask_len,
                   m->n_params);
    INDUCT_FAIL_IF(!mask && mask_len != 0, INDUCT_EINVAL,
                   "%s: mask is NULL with mask_len %zu (NULL and 0 mean every parameter)", fn,
                   mask_len);
    INDUCT_FAIL_IF(d->d_vocab > m->cfg.d_vocab, INDUCT_EINVAL,
                   "%s: dataset vocabulary %u exceeds the model's d_vocab %u", fn, d->d_vocab,
                   m->cfg.d_vocab);
    induct_llc_config c;
    induct_llc_config_init(&c, sizeof c);
    if (cfg) INDUCT_TRY(induct__struct_in(&c, sizeof c, sizeof c, cfg, "induct_llc_config"));
    uint32_t T = c.seq_len ? c.seq_len : m->cfg.n_ctx;
    INDUCT_FAIL_IF(T < 2 || T > m->cfg.n_ctx, INDUCT_ERANGE, "%s: seq_len %u outside [2, n_ctx = %u]",
                   fn, T, m->cfg.n_ctx);
    uint32_t score_pos = induct__dataset_score_pos(d, T);
    double nbeta;
    INDUCT_TRY(llc_config(&c, cfg, score_pos ? 1 : (uint64_t)T - 1, &nbeta, fn));
    uint32_t S = c.burnin + c.draws * c.every;
    uint32_t K = c.init_batches ? c.init_batches : c.chains;
    const uint32_t B = c.batch;
    size_t need = (size_t)B * T, tok_bytes; /* < 2^64: B, T < 2^32 */
    INDUCT_FAIL_IF(!induct__mul(need, sizeof(int32_t), &tok_bytes), INDUCT_ELIMIT,
                   "%s: batch %u x seq_len %u tokens overflow size_t", fn, B, T);
    llc_runs runs;
    INDUCT_TRY(runs_of(&runs, mask, m->n_params, fn));
    /* resource limits: the chain state (x, x*, g and with MALA the previous x, 8 bytes
     * each per sampled coordinate), the saved weights (4 bytes per parameter), token
     * staging; held while the call runs */
    induct__bytes nb = {0, 0};
    induct__bytes_add(&nb, runs.n, (c.mala ? 4 : 3) * sizeof(double));
    induct__bytes_add(&nb, m->n_params, sizeof(float));
    uint64_t tok_add = need > m->tok_cap ? (uint64_t)tok_bytes - (uint64_t)m->tok_cap * 4 : 0;
    induct__bytes_add(&nb, tok_add, 1);
    int rc = nb.overflow ? induct__fail(INDUCT_ELIMIT, "%s: the chain state overflows", fn)
                         : induct__model_check_workspace(m, B, T, nb.n);
    if (rc) {
        runs_free(&runs);
        return rc;
    }
    if (need > m->tok_cap) {
        int32_t *t = realloc(m->tok_ws, tok_bytes);
        if (!t) {
            runs_free(&runs);
            return induct__fail(INDUCT_ENOMEM, "%s: out of memory staging %zu tokens", fn, need);
        }
        uint64_t old = (uint64_t)m->tok_cap * sizeof(int32_t);
        m->tok_ws = t;
        m->tok_cap = need;
        induct__model_held(m, tok_bytes, old);
    }
    uint64_t held = nb.n - tok_add;
    induct__model_held(m, held, 0);
    float *saved = malloc(m->n_params * sizeof *saved);
    double *xs = malloc(runs.n * sizeof *xs);
    induct_llc_result *r = NULL;
    rc = (!saved || !xs) ? induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn)
                         : result_new(&r, &c, S, K, fn);
    if (rc == INDUCT_OK) {
        memcpy(saved, m->params, m->n_params * sizeof *saved);
        size_t k = 0;
        for (size_t j = 0; j < runs.n_runs; j++)
            for (size_t i = 0; i < runs.len[j]; i++) xs[k++] = (double)m->params[runs.start[j] + i];
        model_target mt;
        memset(&mt, 0, sizeof mt);
        mt.base.eval = model_eval;
        mt.base.store = model_store;
        mt.base.runs = &runs;
        mt.base.nt = induct__nt(m);
        mt.base.fn = fn;
        mt.m = m;
        mt.d = d;
        mt.split = c.split;
        mt.B = B;
        mt.T = T;
        mt.score_pos = score_pos;
        rc = run_chains(&mt.base, &c, nbeta, xs, r, model_interrupted, m);
        /* the weights are the caller's again, bit for bit, whatever happened */
        memcpy(m->params, saved, m->n_params * sizeof *saved);
    }
    induct__model_held(m, 0, held);
    free(saved);
    free(xs);
    runs_free(&runs);
    if (rc) {
        induct_llc_result_free(r);
        return rc;
    }
    *out = r;
    return INDUCT_OK;
}

/* ---- masks by name and by head ------------------------------------------------------- */

/* Set mask[offset .. offset + count) to 1. */
static void mask_set(uint8_t *mask, size_t offset, size_t count) { memset(mask + offset, 1, count); }

INDUCT_API int induct_llc_mask_select(const induct_model *m, const char *name, int32_t head,
                                      uint8_t *mask, size_t mask_len) {
    const char *fn = "induct_llc_mask_select";
    INDUCT_FAIL_IF(!m || !name || !mask, INDUCT_EINVAL, "%s: NULL argument", fn);
    INDUCT_FAIL_IF(mask_len != m->n_params, INDUCT_ERANGE,
                   "%s: the mask has %zu entries; the model has %zu parameters", fn, mask_len,
                   m->n_params);
    INDUCT_FAIL_IF(head < -1, INDUCT_EINVAL, "%s: head must be -1 (whole tensors) or >= 0", fn);
    const uint32_t H = m->cfg.n_heads;
    INDUCT_FAIL_IF(head >= 0 && (uint32_t)head >= H, INDUCT_ERANGE,
                   "%s: head %d outside [0, n_heads = %u)", fn, head, H);
    size_t len = strlen(name);
    /* the tensors `name` selects: itself, or every tensor under it ("blocks.1.attn" ->
     * "blocks.1.attn.W_Q", ...; "" -> all); checked before anything is written */
    size_t hits = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < m->n_tensors; i++) {
            const induct__tensor *t = &m->tensors[i];
            int match = len == 0 || strcmp(t->name, name) == 0 ||
                        (strncmp(t->name, name, len) == 0 && t->name[len] == '.');
            if (!match) continue;
            if (head < 0) {
                if (pass) mask_set(mask, t->offset, t->numel);
                hits++;
                continue;
            }
            /* a head: the slice of a tensor whose first axis is the head. Under an
             * attention prefix only W_Q, W_K, W_V and W_O (the head's matrices, as
             * Wang et al. 2024 refine by head); a bias or smear_alpha when named */
            const char *leaf = strrchr(t->name, '.');
            int head_axis = t->ndim >= 1 && t->shape[0] == H && leaf &&
                            strstr(t->name, ".attn.") != NULL;
            int matrix = leaf && (!strcmp(leaf, ".W_Q") || !strcmp(leaf, ".W_K") ||
                                  !strcmp(leaf, ".W_V") || !strcmp(leaf, ".W_O"));
            int named = strcmp(t->name, name) == 0;
            if (!head_axis || (!named && !matrix)) {
                INDUCT_FAIL_IF(named, INDUCT_EINVAL,
                               "%s: %s has no head axis; give head -1 for the whole tensor", fn,
                               t->name);
                continue;
            }
            size_t per = t->numel / H;
            if (pass) mask_set(mask, t->offset + (size_t)head * per, per);
            hits++;
        }
        INDUCT_FAIL_IF(!hits && head < 0, INDUCT_ERANGE,
                       "%s: no parameter tensor is named '%s' or lies under it", fn, name);
        INDUCT_FAIL_IF(!hits, INDUCT_ERANGE,
                       "%s: no attention tensor with a head axis is named '%s' or lies under it",
                       fn, name);
    }
    return INDUCT_OK;
}
