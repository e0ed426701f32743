/* AdamW and SGD over the model's flat parameter buffer; warmup and schedule;
 * global-norm clipping; NaN/Inf guard. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"
#include "kernels/kernels.h"

typedef struct param_spec {
    double lo, hi;
    size_t field; /* offsetof into induct_optimizer, or 0 for STEP */
} param_spec;

#define F_(name) offsetof(induct_optimizer, name)
static const param_spec SPECS[] = {
    [INDUCT_OPT_LR] = {0.0, 10.0, F_(lr)},
    [INDUCT_OPT_BETA1] = {0.0, 0.999999, F_(beta1)},
    [INDUCT_OPT_BETA2] = {0.0, 0.999999999, F_(beta2)},
    [INDUCT_OPT_EPS] = {0.0, 1.0, F_(eps)},
    [INDUCT_OPT_WEIGHT_DECAY] = {0.0, 10.0, F_(weight_decay)},
    [INDUCT_OPT_GRAD_CLIP] = {0.0, 1e9, F_(grad_clip)},
    [INDUCT_OPT_WARMUP_STEPS] = {0.0, 1e12, F_(warmup)},
    [INDUCT_OPT_SCHEDULE] = {0.0, 1.0, F_(schedule)},
    [INDUCT_OPT_TOTAL_STEPS] = {0.0, 1e12, F_(total_steps)},
    [INDUCT_OPT_MIN_LR_RATIO] = {0.0, 1.0, F_(min_lr_ratio)},
    [INDUCT_OPT_MOMENTUM] = {0.0, 0.999999, F_(momentum)},
    [INDUCT_OPT_STEP] = {0.0, 9007199254740992.0, 0},
    [INDUCT_OPT_GRAD_SHARDS] = {1.0, 65536.0, F_(grad_shards)},
};
#undef F_
#define N_SPECS (sizeof SPECS / sizeof SPECS[0])

static int known(induct_opt_param p) { return p >= INDUCT_OPT_LR && (size_t)p < N_SPECS; }

INDUCT_API int induct_opt_param_bounds(induct_opt_param p, double *lo, double *hi) {
    INDUCT_FAIL_IF(!lo || !hi, INDUCT_EINVAL, "induct_opt_param_bounds: NULL output");
    INDUCT_FAIL_IF(!known(p), INDUCT_ENOTSUP, "optimizer parameter %d is unknown", (int)p);
    *lo = SPECS[p].lo;
    *hi = SPECS[p].hi;
    return INDUCT_OK;
}

INDUCT_API int induct_optimizer_new(induct_optimizer **out, induct_model *m, uint32_t kind) {
    INDUCT_FAIL_IF(!out, INDUCT_EINVAL, "induct_optimizer_new: out is NULL");
    *out = NULL;
    INDUCT_FAIL_IF(!m, INDUCT_EINVAL, "induct_optimizer_new: model is NULL");
    INDUCT_FAIL_IF(kind > INDUCT_OPTIM_SGD, INDUCT_EINVAL,
                   "induct_optimizer_new: kind %u is not an INDUCT_OPTIM_* value", kind);
    /* moments: one buffer for SGD (momentum), two for AdamW; counted on the model */
    size_t n = m->n_params ? m->n_params : 1;
    uint64_t bytes = (uint64_t)n * sizeof(float) * (kind == INDUCT_OPTIM_ADAMW ? 2u : 1u);
    INDUCT_TRY(induct__model_reserve(m, bytes, 0, "the optimizer moments"));
    induct_optimizer *o = calloc(1, sizeof *o);
    INDUCT_FAIL_IF(!o, INDUCT_ENOMEM, "out of memory allocating an optimizer");
    o->m1 = calloc(n, sizeof(float));
    if (kind == INDUCT_OPTIM_ADAMW) o->m2 = calloc(n, sizeof(float));
    if (!o->m1 || (kind == INDUCT_OPTIM_ADAMW && !o->m2)) {
        free(o->m1);
        free(o->m2);
        free(o);
        return induct__fail(INDUCT_ENOMEM, "out of memory for optimizer state (%zu floats)", n);
    }
    o->kind = kind;
    o->lr = 1e-3;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = 0.01;
    o->grad_clip = 0.0;
    o->warmup = 0.0;
    o->schedule = 0.0;
    o->total_steps = 0.0;
    o->min_lr_ratio = 0.0;
    o->momentum = 0.0;
    o->step = 0;
    o->grad_shards = 1.0;
    induct__model_ref(m);
    induct__model_held(m, bytes, 0);
    o->model = m;
    *out = o;
    return INDUCT_OK;
}

INDUCT_API void induct_optimizer_free(induct_optimizer *o) {
    if (!o) return;
    size_t n = o->model->n_params ? o->model->n_params : 1;
    induct__model_held(o->model, 0,
                       (uint64_t)n * sizeof(float) * (o->kind == INDUCT_OPTIM_ADAMW ? 2u : 1u));
    induct__model_held(o->model, 0, (uint64_t)o->shard_buf_n * sizeof(float));
    free(o->shard_buf);
    induct_model_free(o->model);
    free(o->m1);
    free(o->m2);
    free(o);
}

INDUCT_API int induct_optimizer_set(induct_optimizer *o, induct_opt_param p, double v) {
    INDUCT_FAIL_IF(!o, INDUCT_EINVAL, "induct_optimizer_set: optimizer is NULL");
    INDUCT_FAIL_IF(!known(p), INDUCT_ENOTSUP, "optimizer parameter %d is unknown", (int)p);
    INDUCT_FAIL_IF(!isfinite(v), INDUCT_EINVAL, "optimizer parameter %d: value is not finite",
                   (int)p);
    INDUCT_FAIL_IF(v < SPECS[p].lo || v > SPECS[p].hi, INDUCT_ERANGE,
                   "optimizer parameter %d: %g is outside [%g, %g]", (int)p, v, SPECS[p].lo,
                   SPECS[p].hi);
    if (p == INDUCT_OPT_SCHEDULE) v = floor(v);
    INDUCT_FAIL_IF(p == INDUCT_OPT_GRAD_SHARDS && v != floor(v), INDUCT_ERANGE,
                   "INDUCT_OPT_GRAD_SHARDS must be an integer (got %g)", v);
    if (p == INDUCT_OPT_STEP) {
        INDUCT_FAIL_IF(v != floor(v), INDUCT_ERANGE, "INDUCT_OPT_STEP must be an integer");
        o->step = (uint64_t)v;
        return INDUCT_OK;
    }
    *(double *)((char *)o + SPECS[p].field) = v;
    return INDUCT_OK;
}

INDUCT_API int induct_optimizer_get(const induct_optimizer *o, induct_opt_param p, double *v) {
    INDUCT_FAIL_IF(!o || !v, INDUCT_EINVAL, "induct_optimizer_get: NULL argument");
    INDUCT_FAIL_IF(!known(p), INDUCT_ENOTSUP, "optimizer parameter %d is unknown", (int)p);
    if (p == INDUCT_OPT_STEP) *v = (double)o->step;
    else *v = *(const double *)((const char *)o + SPECS[p].field);
    return INDUCT_OK;
}

/* Learning rate for step s (0-based): linear warmup lr*(s+1)/W for s < W, then constant or
 * cosine from lr down to min_lr_ratio*lr at total_steps (held there afterwards). */
static double lr_at(const induct_optimizer *o, uint64_t s) {
    double lr = o->lr, w = o->warmup;
    if (w > 0 && (double)s < w) return lr * ((double)s + 1.0) / w;
    if (o->schedule >= 1.0 && o->total_steps > w) {
        double prog = ((double)s - w) / (o->total_steps - w);
        if (prog > 1.0) prog = 1.0;
        double floor_ = o->min_lr_ratio * lr;
        return floor_ + (lr - floor_) * 0.5 * (1.0 + cos(3.141592653589793 * prog));
    }
    return lr;
}

INDUCT_API int induct_optimizer_current_lr(const induct_optimizer *o, double *lr_out) {
    INDUCT_FAIL_IF(!o || !lr_out, INDUCT_EINVAL, "induct_optimizer_current_lr: NULL argument");
    *lr_out = lr_at(o, o->step);
    return INDUCT_OK;
}

INDUCT_API int induct_optimizer_step(induct_optimizer *o, double *grad_norm_out) {
    INDUCT_FAIL_IF(!o, INDUCT_EINVAL, "induct_optimizer_step: optimizer is NULL");
    induct_model *m = o->model;
    const float *g = m->grads;
    double ss = induct__sumsq(g, m->n_params, induct__nt(m));
    INDUCT_FAIL_IF(!isfinite(ss), INDUCT_ENUMERIC,
                   "optimizer step %llu: a gradient is NaN or infinite; weights unchanged",
                   (unsigned long long)o->step);
    double norm = sqrt(ss);
    if (grad_norm_out) *grad_norm_out = norm;
    float clip = 1.0f;
    if (o->grad_clip > 0 && norm > o->grad_clip) clip = (float)(o->grad_clip / norm);
    double lr = lr_at(o, o->step);
    float flr = (float)lr;
    uint64_t t = o->step + 1;
    for (size_t ti = 0; ti < m->n_tensors; ti++) {
        const induct__tensor *tn = &m->tensors[ti];
        float *p = m->params + tn->offset;
        const float *gp = g + tn->offset;
        float *m1 = o->m1 + tn->offset, *m2 = o->m2 ? o->m2 + tn->offset : NULL; /* AdamW */
        float decay = tn->decay ? (float)(lr * o->weight_decay) : 0.0f;
        if (o->kind == INDUCT_OPTIM_ADAMW) {
            float b1 = (float)o->beta1, b2 = (float)o->beta2;
            float bc1 = (float)(1.0 - pow(o->beta1, (double)t));
            float bc2 = (float)(1.0 - pow(o->beta2, (double)t));
            float eps = (float)o->eps;
            /* per element: g *= clip; m1 = b1 m1 + (1-b1) g; m2 = b2 m2 + (1-b2) g g;
             * decoupled decay first (as torch.optim.AdamW), then
             * p -= lr (m1/bc1) / (sqrt(m2/bc2) + eps); vectorised in kernels/adamw_vec.c */
            induct__adamw_update(p, gp, m1, m2, tn->numel, clip, b1, b2, bc1, bc2, eps, decay,
                                 flr, induct__nt(m));
        } else {
            float mu = (float)o->momentum;
            for (size_t i = 0; i < tn->numel; i++) {
                float gi = gp[i] * clip;
                if (mu > 0.0f) {
                    m1[i] = (t == 1) ? gi : mu * m1[i] + gi;
                    gi = m1[i];
                }
                p[i] -= decay * p[i];
                p[i] -= flr * gi;
            }
        }
    }
    o->step = t;
    return INDUCT_OK;
}
