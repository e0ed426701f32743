/* Head ablation (ICL paper, Appendix "Analyses") — zero, mean and pattern-preserving —
 * as hook providers: the ablations in force are a standing intervention on the model
 * (induct__standing) that adds hooks to every pass.
 *
 *   zero / mean           a hook on blocks.l.attn.hook_z of each layer with an ablated
 *                         head overwrites that head's slice with 0 or the stored mean;
 *   pattern-preserving    a bare clean pass first records hook_pattern of every layer
 *                         after the earliest ablated one; in the ablated pass a hook on
 *                         those hook_pattern points writes the clean patterns back for
 *                         the heads that are not ablated (z = A_clean v follows).
 *
 * The forward pass knows nothing of this file. With no head ablated the pass runs
 * bare, bit-identical to a never-ablated model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"

_Static_assert(INDUCT__ABL_NONE == INDUCT_ABLATE_NONE && INDUCT__ABL_ZERO == INDUCT_ABLATE_ZERO &&
                   INDUCT__ABL_MEAN == INDUCT_ABLATE_MEAN,
               "internal ablation modes are stored as the public INDUCT_ABLATE_* values");

static size_t n_heads_total(const induct_model *m) {
    return (size_t)m->cfg.n_layers * m->cfg.n_heads;
}

static int standing_run(void *self, induct_model *m, const induct__pass *p, double *mean_loss);

static void standing_release(void *self, induct_model *m) {
    induct__ablation *a = self;
    (void)m;
    free(a->mode);
    free(a->mean);
    free(a->frozen);
    free(a);
}

induct__ablation *induct__ablation_of(const induct_model *m) {
    return m->standing.run == standing_run ? m->standing.self : NULL;
}

int induct__ablation_state(induct_model *m, induct__ablation **out) {
    induct__ablation *a = induct__ablation_of(m);
    if (!a) {
        size_t bytes = n_heads_total(m); /* the mode table; the struct is bookkeeping */
        INDUCT_TRY(induct__model_reserve(m, bytes, 0, "ablation modes"));
        a = calloc(1, sizeof *a);
        uint8_t *mode = calloc(n_heads_total(m), 1);
        if (!a || !mode) {
            free(a);
            free(mode);
            return induct__fail(INDUCT_ENOMEM, "ablation: out of memory");
        }
        a->mode = mode;
        induct__model_held(m, bytes, 0);
        m->standing = (induct__standing){standing_run, standing_release, a};
    }
    *out = a;
    return INDUCT_OK;
}

void induct__ablation_recount(induct_model *m, induct__ablation *a) {
    uint32_t H = m->cfg.n_heads, n = 0, first = m->cfg.n_layers;
    for (size_t i = 0; i < n_heads_total(m); i++)
        if (a->mode[i] != INDUCT__ABL_NONE) {
            n++;
            if (i / H < first) first = (uint32_t)(i / H);
        }
    a->active = n;
    a->first_layer = n ? first : 0;
}

static int any_mean(const induct_model *m, const induct__ablation *a) {
    for (size_t i = 0; i < n_heads_total(m); i++)
        if (a->mode[i] == INDUCT__ABL_MEAN) return 1;
    return 0;
}

INDUCT_API int induct_model_ablate_head(induct_model *m, uint32_t layer, uint32_t head,
                                        uint32_t mode) {
    const char *fn = "induct_model_ablate_head";
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    INDUCT_FAIL_IF(mode > INDUCT_ABLATE_MEAN, INDUCT_EINVAL,
                   "%s: mode %u is not an INDUCT_ABLATE_* mode", fn, mode);
    INDUCT_FAIL_IF(layer >= m->cfg.n_layers || head >= m->cfg.n_heads, INDUCT_ERANGE,
                   "%s: head (%u, %u) does not exist (the model has %u layers of %u heads)", fn,
                   layer, head, m->cfg.n_layers, m->cfg.n_heads);
    induct__ablation *a = induct__ablation_of(m);
    INDUCT_FAIL_IF(mode == INDUCT_ABLATE_MEAN && (!a || !a->mean), INDUCT_ESTATE,
                   "%s: mean ablation needs a reference: call induct_model_set_ablation_mean "
                   "first",
                   fn);
    if (mode == INDUCT_ABLATE_NONE && !a) return INDUCT_OK;
    INDUCT_TRY(induct__ablation_state(m, &a));
    a->mode[(size_t)layer * m->cfg.n_heads + head] = (uint8_t)mode;
    induct__ablation_recount(m, a);
    return INDUCT_OK;
}

INDUCT_API int induct_model_set_preserve_patterns(induct_model *m, uint32_t on) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_set_preserve_patterns: model is NULL");
    INDUCT_FAIL_IF(on > 1, INDUCT_EINVAL, "induct_model_set_preserve_patterns: on must be 0 or 1");
    induct__ablation *a = induct__ablation_of(m);
    if (!on && !a) return INDUCT_OK;
    INDUCT_TRY(induct__ablation_state(m, &a));
    a->preserve = on;
    return INDUCT_OK;
}

INDUCT_API int induct_model_clear_ablations(induct_model *m) {
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_model_clear_ablations: model is NULL");
    induct__ablation *a = induct__ablation_of(m);
    if (!a) return INDUCT_OK;
    memset(a->mode, 0, n_heads_total(m));
    a->preserve = 0;
    free(a->frozen);
    induct__model_held(m, 0, (uint64_t)a->frozen_cap * sizeof(float));
    a->frozen = NULL;
    a->frozen_cap = 0;
    induct__ablation_recount(m, a);
    return INDUCT_OK;
}

INDUCT_API int induct_model_get_ablations(const induct_model *m, uint32_t *modes_out,
                                          size_t modes_cap, size_t *out_len,
                                          uint32_t *preserve_out) {
    const char *fn = "induct_model_get_ablations";
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    const induct__ablation *a = induct__ablation_of(m);
    if (preserve_out) *preserve_out = a ? a->preserve : 0;
    INDUCT_TRY(induct__an_heads_out(m, fn, modes_out, modes_cap, out_len));
    for (size_t i = 0; i < n_heads_total(m); i++)
        modes_out[i] = a ? a->mode[i] : INDUCT_ABLATE_NONE;
    return INDUCT_OK;
}

/* ---- the mean reference: a bare pass with a hook that sums hook_z --------------------- */

typedef struct mean_acc {
    double *acc; /* [n_layers][n_heads][MT][d_head] */
    uint32_t MT;
} mean_acc;

static int mean_hook(void *user, induct_model *m, const induct__pass *p, uint32_t point,
                     uint32_t l, float *z) {
    const mean_acc *ma = user;
    size_t H = m->cfg.n_heads, dh = m->cfg.d_head, HD = H * dh, per = p->T > 1 && ma->MT > 1;
    (void)point;
    for (size_t h = 0; h < H; h++) {
        double *acc = ma->acc + ((size_t)l * H + h) * ma->MT * dh;
        for (size_t b = 0; b < p->B; b++)
            for (size_t t = 0; t < p->T; t++) {
                const float *zp = z + ((b * p->T + t) * HD + h * dh);
                double *ap = acc + (per ? t : 0) * dh;
                for (size_t j = 0; j < dh; j++) ap[j] += zp[j];
            }
    }
    return INDUCT_OK;
}

INDUCT_API int induct_model_set_ablation_mean(induct_model *m, const int32_t *tokens, uint32_t B,
                                              uint32_t T, uint32_t how) {
    const char *fn = "induct_model_set_ablation_mean";
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "%s: model is NULL", fn);
    INDUCT_FAIL_IF(how > INDUCT_MEAN_PER_POSITION, INDUCT_EINVAL,
                   "%s: how must be INDUCT_MEAN_POOLED or INDUCT_MEAN_PER_POSITION", fn);
    INDUCT_TRY(induct__model_validate_tokens(m, tokens, B, T));
    const induct_model_config *c = &m->cfg;
    size_t L = c->n_layers, H = c->n_heads, dh = c->d_head;
    size_t MT = how ? T : 1, n;
    INDUCT_FAIL_IF(!induct__mul(L * H, MT, &n) || !induct__mul(n, dh, &n), INDUCT_ELIMIT,
                   "%s: reference too large", fn);
    induct__ablation *a;
    INDUCT_TRY(induct__ablation_state(m, &a));
    /* the reference (held with the model, replacing the old one), its accumulator and
     * the reference pass must fit the model's limits */
    induct__bytes tmp = {0, 0};
    induct__bytes_add(&tmp, n, sizeof(float));
    uint64_t mean_bytes = tmp.n,
             old_bytes = a->mean ? (uint64_t)L * H * a->mean_T * dh * sizeof(float) : 0;
    induct__bytes_add(&tmp, n, sizeof(double));
    INDUCT_FAIL_IF(tmp.overflow, INDUCT_ELIMIT, "%s: reference too large", fn);
    INDUCT_TRY(induct__model_check_workspace(m, B, T, tmp.n));
    float *mean = malloc(n * sizeof *mean);
    double *acc = calloc(n, sizeof *acc);
    if (!mean || !acc) {
        free(mean);
        free(acc);
        return induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    }
    /* the clean model: a bare pass, no ablation */
    mean_acc ma = {acc, (uint32_t)MT};
    induct__hook *hk = malloc(L * sizeof *hk);
    int rc = hk ? INDUCT_OK : induct__fail(INDUCT_ENOMEM, "%s: out of memory", fn);
    if (rc == INDUCT_OK) {
        for (size_t l = 0; l < L; l++)
            hk[l] = (induct__hook){INDUCT__HP_Z, (uint32_t)l, 0, mean_hook, &ma, NULL};
        induct__pass p = induct__pass_of(tokens, B, T);
        p.bare = 1;
        p.hooks[0] = hk;
        p.n_hooks[0] = L;
        rc = induct__forward(m, &p, NULL);
    }
    free(hk);
    if (rc != INDUCT_OK) {
        free(mean);
        free(acc);
        return rc;
    }
    double cnt = how ? (double)B : (double)B * T;
    for (size_t i = 0; i < n; i++) mean[i] = (float)(acc[i] / cnt);
    free(acc);
    free(a->mean);
    induct__model_held(m, mean_bytes, old_bytes);
    a->mean = mean;
    a->mean_T = (uint32_t)MT;
    a->mean_per_pos = how;
    return INDUCT_OK;
}

/* ---- the hooks -------------------------------------------------------------------------- */

const float *induct__ablation_mean_of(const induct_model *m, const induct__ablation *a, size_t l,
                                      size_t h, size_t p) {
    size_t dh = m->cfg.d_head;
    return a->mean + ((l * m->cfg.n_heads + h) * a->mean_T + (a->mean_per_pos ? p : 0)) * dh;
}

/* hook_z: the ablated heads' slices become 0 or the mean. */
static int z_hook(void *user, induct_model *m, const induct__pass *p, uint32_t point, uint32_t l,
                  float *z) {
    const induct__ablation *a = user;
    size_t H = m->cfg.n_heads, dh = m->cfg.d_head, HD = H * dh;
    const uint8_t *mode = a->mode + (size_t)l * H;
    (void)point;
    for (size_t h = 0; h < H; h++) {
        if (mode[h] == INDUCT__ABL_NONE) continue;
        for (size_t b = 0; b < p->B; b++)
            for (size_t t = 0; t < p->T; t++) {
                float *zp = z + (b * p->T + t) * HD + h * dh;
                if (mode[h] == INDUCT__ABL_ZERO)
                    memset(zp, 0, dh * sizeof *zp);
                else
                    memcpy(zp, induct__ablation_mean_of(m, a, l, h, t), dh * sizeof *zp);
            }
    }
    return INDUCT_OK;
}

/* The frozen patterns of layer l: [B][H][T][T]. */
static float *frozen_of(const induct_model *m, const induct__ablation *a, const induct__pass *p,
                        uint32_t l) {
    size_t per = (size_t)p->B * m->cfg.n_heads * p->T * p->T;
    return a->frozen + (size_t)(l - a->first_layer - 1) * per;
}

/* hook_pattern in the clean pass: record. */
static int record_hook(void *user, induct_model *m, const induct__pass *p, uint32_t point,
                       uint32_t l, float *att) {
    const induct__ablation *a = user;
    (void)point;
    memcpy(frozen_of(m, a, p, l), att,
           (size_t)p->B * m->cfg.n_heads * p->T * p->T * sizeof *att);
    return INDUCT_OK;
}

/* hook_pattern in the ablated pass: the clean patterns of the heads not ablated. */
static int freeze_hook(void *user, induct_model *m, const induct__pass *p, uint32_t point,
                       uint32_t l, float *att) {
    const induct__ablation *a = user;
    size_t H = m->cfg.n_heads, TT = (size_t)p->T * p->T;
    const uint8_t *mode = a->mode + (size_t)l * H;
    const float *fr = frozen_of(m, a, p, l);
    (void)point;
    for (size_t b = 0; b < p->B; b++)
        for (size_t h = 0; h < H; h++)
            if (mode[h] == INDUCT__ABL_NONE)
                memcpy(att + (b * H + h) * TT, fr + (b * H + h) * TT, TT * sizeof *att);
    return INDUCT_OK;
}

/* Room for the frozen patterns of pass p. */
static int frozen_reserve(induct_model *m, induct__ablation *a, const induct__pass *p) {
    const induct_model_config *c = &m->cfg;
    size_t need, TT;
    if (!induct__mul(p->T, p->T, &TT) || !induct__mul(TT, (size_t)p->B * c->n_heads, &need) ||
        !induct__mul(need, c->n_layers - a->first_layer - 1, &need) ||
        need > SIZE_MAX / sizeof(float))
        return induct__fail(INDUCT_ELIMIT, "pattern-preserving ablation: size overflow");
    if (need <= a->frozen_cap) return INDUCT_OK;
    /* the passes' workspace first (it bounds B, T), then the frozen patterns, held with
     * the model, within its limits */
    uint64_t old = (uint64_t)a->frozen_cap * sizeof(float);
    INDUCT_TRY(induct__model_check_workspace(m, p->B, p->T, 0));
    INDUCT_TRY(induct__model_reserve(m, (uint64_t)need * sizeof(float), old,
                                     "pattern-preserving ablation"));
    float *f = malloc(need * sizeof *f);
    INDUCT_FAIL_IF(!f, INDUCT_ENOMEM, "pattern-preserving ablation: out of memory for %zu floats",
                   need);
    free(a->frozen);
    a->frozen = f;
    a->frozen_cap = need;
    induct__model_held(m, (uint64_t)need * sizeof(float), old);
    return INDUCT_OK;
}

/* The standing intervention: pass p with the ablation hooks in list 0. */
static int standing_run(void *self, induct_model *m, const induct__pass *p, double *mean_loss) {
    induct__ablation *a = self;
    const induct_model_config *c = &m->cfg;
    induct__pass q = *p;
    q.bare = 1;
    if (!a->active) return induct__forward(m, &q, mean_loss);
    INDUCT_FAIL_IF(p->grad, INDUCT_ESTATE, "backward: %u head(s) are ablated; clear the "
                   "ablations first", a->active);
    INDUCT_FAIL_IF(any_mean(m, a) && a->mean_per_pos && p->T > a->mean_T, INDUCT_ERANGE,
                   "mean ablation: the per-position reference covers %u positions, the input "
                   "has %u",
                   a->mean_T, p->T);
    uint32_t L = c->n_layers, n = 0;
    int preserve = a->preserve && a->first_layer + 1 < L;
    induct__hook hk[2 * 256]; /* at most two hooks per layer */
    induct__hook *h = L <= 256 ? hk : malloc(2 * (size_t)L * sizeof *h);
    INDUCT_FAIL_IF(!h, INDUCT_ENOMEM, "ablation: out of memory");
    int rc = INDUCT_OK;
    if (preserve) {
        rc = frozen_reserve(m, a, p);
        for (uint32_t l = a->first_layer + 1; l < L; l++)
            h[n++] = (induct__hook){INDUCT__HP_PATTERN, l, 0, record_hook, a, NULL};
        induct__pass clean = induct__pass_of(p->tokens, p->B, p->T);
        clean.bare = 1;
        clean.hooks[0] = h;
        clean.n_hooks[0] = n;
        if (rc == INDUCT_OK) rc = induct__forward(m, &clean, NULL);
        for (uint32_t i = 0; i < n; i++) h[i].fn = freeze_hook, h[i].writes = 1;
    }
    for (uint32_t l = a->first_layer; l < L; l++)
        if (memchr(a->mode + (size_t)l * c->n_heads, INDUCT__ABL_ZERO, c->n_heads) ||
            memchr(a->mode + (size_t)l * c->n_heads, INDUCT__ABL_MEAN, c->n_heads))
            h[n++] = (induct__hook){INDUCT__HP_Z, l, 1, z_hook, a, NULL};
    q.hooks[0] = h;
    q.n_hooks[0] = n;
    if (rc == INDUCT_OK) rc = induct__forward(m, &q, mean_loss);
    if (h != hk) free(h);
    return rc;
}
