/* Ablation attribution of the ICL score (ICL paper, Appendix "Analyses"): each head in
 * turn is added to the ablations in force (ablation.c) and the evaluation set is run
 * through the real forward pass. */
#include <stdlib.h>
#include <string.h>

#include "analysis_internal.h"

/* ---- attribution: general path ---------------------------------------------------- */

/* Each head: add it to the ablations in force, one pass over the evaluation set. */
static int attribution_general(induct_model *m, const induct__eval *ev, uint32_t mode,
                               uint32_t preserve, float *out, double *icl_out) {
    double base;
    INDUCT_TRY(induct__eval_icl(m, ev, &base));
    induct__ablation *a;
    INDUCT_TRY(induct__ablation_state(m, &a));
    uint32_t p0 = a->preserve;
    for (size_t i = 0; i < (size_t)m->cfg.n_layers * m->cfg.n_heads; i++) {
        uint8_t old = a->mode[i];
        a->mode[i] = (uint8_t)mode;
        a->preserve = p0 | preserve;
        induct__ablation_recount(m, a);
        double v = 0.0;
        int rc = induct__eval_icl(m, ev, &v);
        a->mode[i] = old;
        a->preserve = p0;
        induct__ablation_recount(m, a);
        if (rc != INDUCT_OK) return rc;
        out[i] = (float)(v - base);
    }
    *icl_out = base;
    return INDUCT_OK;
}

INDUCT_API int induct_analysis_ablation_attribution(induct_model *m, const induct_dataset *d,
                                                    const induct_eval_config *cfg, uint32_t mode,
                                                    float *out, size_t out_cap, size_t *out_len,
                                                    double *icl_out) {
    if (m) atomic_store(&m->interrupt, 0);
    return induct__analysis_ablation_attribution(m, d, cfg, mode, out, out_cap, out_len, icl_out);
}

int induct__analysis_ablation_attribution(induct_model *m, const induct_dataset *d,
                                          const induct_eval_config *cfg, uint32_t mode, float *out,
                                          size_t out_cap, size_t *out_len, double *icl_out) {
    const char *fn = "induct_analysis_ablation_attribution";
    INDUCT_FAIL_IF(!m || !d, INDUCT_EINVAL, "%s: NULL model or dataset", fn);
    uint32_t base_mode = mode & 0xffu, flags = mode & ~0xffu;
    INDUCT_FAIL_IF((base_mode != INDUCT_ABLATE_ZERO && base_mode != INDUCT_ABLATE_MEAN) ||
                       (flags & ~INDUCT_ABLATE_PRESERVE_PATTERNS),
                   INDUCT_EINVAL,
                   "%s: mode 0x%x must be INDUCT_ABLATE_ZERO or INDUCT_ABLATE_MEAN, optionally "
                   "| INDUCT_ABLATE_PRESERVE_PATTERNS",
                   fn, mode);
    const induct__ablation *a = induct__ablation_of(m);
    INDUCT_FAIL_IF(base_mode == INDUCT_ABLATE_MEAN && (!a || !a->mean), INDUCT_ESTATE,
                   "%s: mean ablation needs a reference: call induct_model_set_ablation_mean first",
                   fn);
    INDUCT_TRY(induct__an_heads_out(m, fn, out, out_cap, out_len));
    induct__eval ev;
    INDUCT_TRY(induct__eval_open(&ev, m, d, cfg, 1, fn));
    int rc = INDUCT_OK;
    if (base_mode == INDUCT_ABLATE_MEAN && a->mean_per_pos && ev.T > a->mean_T)
        rc = induct__fail(INDUCT_ERANGE,
                          "%s: the per-position mean reference covers %u positions, the "
                          "evaluation set has %u",
                          fn, a->mean_T, ev.T);
    double icl = 0.0;
    if (rc == INDUCT_OK) {
        uint32_t preserve = (flags & INDUCT_ABLATE_PRESERVE_PATTERNS) ? 1u : 0u;
        rc = attribution_general(m, &ev, base_mode, preserve, out, &icl);
    }
    induct__eval_close(&ev);
    if (rc == INDUCT_OK && icl_out) *icl_out = icl;
    return rc;
}
