/* analysis: the output-buffer checks and the interrupt check shared by the analysis
 * files. */
#include "analysis.h"

int induct__an_out(const char *fn, const char *shape, size_t need, const void *out, size_t cap,
                   size_t *len) {
    if (len) *len = need;
    INDUCT_FAIL_IF((!out && need) || cap < need, INDUCT_EBUFSIZE,
                   "%s: needs %zu elements (%s), buffer holds %zu", fn, need, shape, out ? cap : 0);
    return INDUCT_OK;
}

int induct__an_heads_out(const induct_model *m, const char *fn, const void *out, size_t cap,
                         size_t *len) {
    return induct__an_out(fn, "[n_layers][n_heads]", (size_t)m->cfg.n_layers * m->cfg.n_heads, out,
                          cap, len);
}

int induct__an_interrupted(induct_model *m, const char *fn) {
    INDUCT_FAIL_IF(atomic_load(&m->interrupt), INDUCT_EINTERRUPTED, "%s: interrupted", fn);
    return INDUCT_OK;
}
