/* Training driver: steps on a schedule, evaluation into a JSON Lines metrics log,
 * snapshots, progress callback, interrupt. docs/training.md is the specification.
 *
 * Everything that measures the model lives in eval_metrics(): one block per
 * INDUCT_TRAIN_METRIC_* bit, each with its availability / dataset check (probe mode)
 * and its computation (record mode). New metrics are wired there only.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analysis/analysis.h"
#include "train.h"
#include "core/numtext.h"

#define ALL_METRICS                                                                        \
    (INDUCT_TRAIN_METRIC_LOSS | INDUCT_TRAIN_METRIC_ICL_SCORE |                            \
     INDUCT_TRAIN_METRIC_LOSS_BY_POSITION | INDUCT_TRAIN_METRIC_PREFIX_MATCHING |          \
     INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN | INDUCT_TRAIN_METRIC_COPYING |                    \
     INDUCT_TRAIN_METRIC_KV_ACCURACY | INDUCT_TRAIN_METRIC_KV_ATTENTION |                  \
     INDUCT_TRAIN_METRIC_INDUCTION_SCORE | INDUCT_TRAIN_METRIC_LOSS_VECTORS)

INDUCT_API int induct_train_config_init(induct_train_config *cfg, size_t size) {
    INDUCT__CONFIG_INIT_CHECK(cfg, size, sizeof(induct_train_config));
    memset(cfg, 0, size);
    cfg->size = size;
    cfg->steps = 1000;
    cfg->batch = 32;
    cfg->seq_len = 0;
    cfg->eval_every = 0;
    cfg->eval_log2 = 0;
    cfg->eval_batch = 64;
    cfg->metrics = INDUCT_TRAIN_METRIC_LOSS;
    cfg->metrics_append = 0;
    cfg->metrics_path = NULL;
    cfg->snapshot_every = 0;
    cfg->snapshot_log2 = 0;
    cfg->snapshot_optimizer = 1;
    cfg->snapshot_path = NULL;
    cfg->target_loss = 0.0;
    return INDUCT_OK;
}

typedef struct run {
    induct_optimizer *o;
    induct_model *m;
    const induct_dataset *d;
    induct_train_config c;
    uint32_t T;
    FILE *mf;          /* metrics log or NULL */
    int32_t *eval_tok; /* [eval_batch][T]: batch 0 of the eval split */
    float *heads;      /* [n_layers][n_heads] scratch */
    size_t n_heads_total;
    int pending_interrupt; /* an interrupt seen while an analysis call cleared the flag */
    uint64_t eval_bytes;   /* eval_tok's bytes, counted in the model's memory while held */
    induct_probe_config probe; /* of the prefix-matching and copying metrics */
    int ranks;                 /* a communicator of several ranks is attached */
    int stop_request;          /* this rank's callback asked to stop (ranks agree first) */
    int agreed_stop;           /* every rank stops here together */
} run;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Take the model's interrupt flag into r->pending_interrupt. The public analysis
 * entry points clear the flag when they start, so it is collected right before each
 * of them; an interrupt landing in the few instructions between this exchange and
 * their clear is still lost (it only delays the stop to a later interrupt). When the
 * analysis suite is wired in, call internal variants that leave the flag alone. */
static void collect_interrupt(run *r) {
    if (atomic_exchange(&r->m->interrupt, 0)) r->pending_interrupt = 1;
}

/* A JSON number whose text reads back exactly (as a float for float32 values,
 * as a double otherwise); null for NaN and infinities. */
static cJSON *json_num(double v, int as_float) {
    if (!isfinite(v)) return cJSON_CreateNull();
    char b[40];
    induct__fmt_double(b, sizeof b, v, as_float);
    return cJSON_CreateRaw(b);
}

static int add_num(cJSON *rec, const char *key, double v, int as_float) {
    cJSON *x = json_num(v, as_float);
    if (!x || !cJSON_AddItemToObject(rec, key, x)) {
        cJSON_Delete(x);
        return induct__fail(INDUCT_ENOMEM, "induct_train: out of memory building a metrics record");
    }
    return INDUCT_OK;
}

/* Add `key`: [[...] * n_heads] * n_layers from r->heads. */
static int add_heads(run *r, cJSON *rec, const char *key) {
    uint32_t L = r->m->cfg.n_layers, H = r->m->cfg.n_heads;
    cJSON *outer = cJSON_AddArrayToObject(rec, key);
    for (uint32_t l = 0; outer && l < L; l++) {
        cJSON *row = cJSON_CreateArray();
        if (!row || !cJSON_AddItemToArray(outer, row)) {
            cJSON_Delete(row);
            outer = NULL;
            break;
        }
        for (uint32_t h = 0; h < H; h++) {
            cJSON *x = json_num((double)r->heads[(size_t)l * H + h], 1);
            if (!x || !cJSON_AddItemToArray(row, x)) {
                cJSON_Delete(x);
                outer = NULL;
                break;
            }
        }
    }
    INDUCT_FAIL_IF(!outer, INDUCT_ENOMEM, "induct_train: out of memory building a metrics record");
    return INDUCT_OK;
}

/* Add `key`: a list of n floats. */
static int add_list(cJSON *rec, const char *key, const float *v, size_t n) {
    cJSON *arr = cJSON_AddArrayToObject(rec, key);
    for (size_t i = 0; arr && i < n; i++) {
        cJSON *x = json_num((double)v[i], 1);
        if (!x || !cJSON_AddItemToArray(arr, x)) {
            cJSON_Delete(x);
            arr = NULL;
        }
    }
    INDUCT_FAIL_IF(!arr, INDUCT_ENOMEM, "induct_train: out of memory building a metrics record");
    return INDUCT_OK;
}

/* The analysis suite's evaluation set for this run: batch 0 of the eval split,
 * eval_batch sequences of seq_len tokens — the same tokens as r->eval_tok. */
static int eval_set(const run *r, induct_eval_config *ec) {
    INDUCT_TRY(induct_eval_config_init(ec, sizeof *ec));
    ec->n_seq = r->c.eval_batch;
    ec->seq_len = r->T;
    ec->chunk = r->c.eval_batch < 8 ? r->c.eval_batch : 8;
    ec->split = INDUCT_SPLIT_EVAL;
    ec->batch_index = 0;
    return INDUCT_OK;
}

/* The sums of the one evaluation pass (eval_metrics), filled chunk by chunk in the
 * order of a single pass: per position over the sequences in order (as the analysis
 * suite's loss-by-position pass), per head over the sequences in order (as
 * induct_analysis_previous_token_score), and each sequence's loss at its position (as
 * induct_analysis_loss_vectors). */
typedef struct eval_acc {
    uint32_t T;
    double *pos_sum; /* [T-1] or NULL */
    double *prev;    /* [n_layers][n_heads] or NULL */
    const uint32_t *pos; /* [n_seq] loss-vector positions, or NULL */
    float *vec;          /* [n_seq] loss vectors, or NULL */
} eval_acc;

static int eval_chunk_acc(void *user, induct_model *m, uint32_t b0, uint32_t nb) {
    eval_acc *a = user;
    uint32_t T = a->T, T1 = T - 1;
    const float *L = induct__ws(m, m->a_losses);
    if (a->pos_sum)
        for (uint32_t b = 0; b < nb; b++)
            for (uint32_t p = 0; p < T1; p++) a->pos_sum[p] += L[(size_t)b * T1 + p];
    if (a->vec)
        for (uint32_t b = 0; b < nb; b++) a->vec[b0 + b] = L[(size_t)b * T1 + a->pos[b0 + b]];
    if (a->prev) induct__previous_token_sums(m, T, nb, a->prev);
    /* an induct_model_interrupt() during the pass does not stop it: the run stops before
     * the next step, after this point's record, snapshot and callback (docs/training.md) */
    return INDUCT_OK;
}

/*
 * The one evaluation function.
 * probe (rec == NULL): check that every requested metric exists and that the dataset
 *   can provide it, compute nothing.
 * record: compute every requested metric on the evaluation set and add it to `rec`
 *   under its stable key; *eval_loss gets the loss or NaN when not requested.
 * Weights and optimizer are not touched; the workspace is.
 */
static int eval_metrics(run *r, cJSON *rec, double *eval_loss) {
    const uint32_t want = r->c.metrics;
    induct_model *m = r->m;
    const uint32_t E = r->c.eval_batch, T = r->T;
    size_t len;
    if (eval_loss) *eval_loss = NAN;

    INDUCT_FAIL_IF(want & ~ALL_METRICS, INDUCT_EINVAL,
                   "induct_train: unknown metric bits 0x%x", want & ~ALL_METRICS);

    /* eval_loss, icl_score, loss_by_position, previous_token_score and loss_vectors all
     * read the forward pass of the evaluation set (r->eval_tok): one pass serves them
     * all. It runs in induct_model_forward's chunks, so eval_loss and
     * previous_token_score carry the bits of the separate calls (induct_model_forward's
     * mean loss, induct_analysis_previous_token_score); icl_score, loss_by_position and
     * loss_vectors are the analysis suite's read-outs of the same losses in the same
     * order. */
    const uint32_t both = INDUCT_TRAIN_METRIC_ICL_SCORE | INDUCT_TRAIN_METRIC_LOSS_BY_POSITION;
    const uint32_t one_pass = INDUCT_TRAIN_METRIC_LOSS | both |
                              INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN | INDUCT_TRAIN_METRIC_LOSS_VECTORS;
    induct_eval_config ec;
    INDUCT_TRY(eval_set(r, &ec));
    if (!rec && (want & INDUCT_TRAIN_METRIC_ICL_SCORE)) {
        /* probe: the ICL indices must fit the context before any step */
        induct_eval_config chk;
        INDUCT_TRY(induct__eval_config(&chk, m, &ec, 1, "induct_train (metric 'icl_score')"));
    }
    if (rec && (want & one_pass)) {
        size_t nh = r->n_heads_total;
        eval_acc acc = {.T = T};
        int rc = INDUCT_OK;
        if (want & both) acc.pos_sum = calloc((size_t)(T - 1), sizeof *acc.pos_sum);
        if (want & INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN) acc.prev = calloc(nh, sizeof *acc.prev);
        uint32_t *pos = NULL;
        if (want & INDUCT_TRAIN_METRIC_LOSS_VECTORS) {
            pos = malloc((size_t)E * sizeof *pos);
            acc.vec = malloc((size_t)E * sizeof *acc.vec);
            acc.pos = pos;
        }
        if (((want & both) && !acc.pos_sum) ||
            ((want & INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN) && !acc.prev) ||
            ((want & INDUCT_TRAIN_METRIC_LOSS_VECTORS) && (!pos || !acc.vec)))
            rc = induct__fail(INDUCT_ENOMEM, "induct_train: out of memory");
        /* loss_vectors: the positions of induct_analysis_loss_positions (pos_seed 0) */
        if (rc == INDUCT_OK && pos) rc = induct_analysis_loss_positions(m, &ec, pos, E, NULL);
        double total = 0.0;
        if (rc == INDUCT_OK)
            rc = induct__forward_chunks(m, r->eval_tok, E, T, eval_chunk_acc, &acc, &total);
        /* an interrupt during the pass is kept for the next step boundary (the callback
         * may run analyses, which clear the flag) */
        collect_interrupt(r);
        /* eval_loss: mean per-token loss over the evaluation set, nats */
        if (rc == INDUCT_OK && (want & INDUCT_TRAIN_METRIC_LOSS)) {
            double loss = total / ((double)E * (T - 1));
            if (!isfinite(loss))
                rc = induct__fail(INDUCT_ENUMERIC, "forward: the loss is not finite (%g)", loss);
            if (rc == INDUCT_OK) rc = add_num(rec, "eval_loss", loss, 0);
            if (rc == INDUCT_OK && eval_loss) *eval_loss = loss;
        }
        /* icl_score: L[late-1] - L[early-1] averaged over the evaluation set, nats (ICL
         * paper, "Key Concepts"; defaults 500th and 50th token, so seq_len must be
         * >= 501); loss_by_position: mean_b L_b[p] for p = 0 … seq_len-2, nats */
        if (rc == INDUCT_OK && (want & INDUCT_TRAIN_METRIC_ICL_SCORE))
            rc = add_num(rec, "icl_score",
                         induct__icl(acc.pos_sum[ec.late - 1], acc.pos_sum[ec.early - 1], E),
                         0);
        if (rc == INDUCT_OK && (want & INDUCT_TRAIN_METRIC_LOSS_BY_POSITION)) {
            float *lbp = malloc((size_t)(T - 1) * sizeof *lbp);
            if (!lbp) rc = induct__fail(INDUCT_ENOMEM, "induct_train: out of memory");
            for (uint32_t p = 0; lbp && p < T - 1; p++) lbp[p] = (float)(acc.pos_sum[p] / E);
            if (rc == INDUCT_OK) rc = add_list(rec, "loss_by_position", lbp, T - 1);
            free(lbp);
        }
        /* previous_token_score [n_layers][n_heads] on the evaluation set */
        if (rc == INDUCT_OK && (want & INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN)) {
            for (size_t i = 0; i < nh; i++) r->heads[i] = (float)(acc.prev[i] / E);
            rc = add_heads(r, rec, "previous_token_score");
        }
        /* loss_vectors [eval_batch]: sequence i's loss at pos_i, nats */
        if (rc == INDUCT_OK && (want & INDUCT_TRAIN_METRIC_LOSS_VECTORS))
            rc = add_list(rec, "loss_vectors", acc.vec, E);
        free(acc.pos_sum);
        free(acc.prev);
        free(acc.vec);
        free(pos);
        INDUCT_TRY(rc);
    }
    /* prefix_matching_score and copying_score [n_layers][n_heads]: the paper's
     * evaluators on r->probe (the config's probe, or the dataset's: its BOS and token
     * range, 25 distinct random tokens x 4, 10 sequences). Probe mode checks that the
     * probe is valid for this model. */
    for (int k = 0; k < 2; k++) {
        uint32_t bit = k ? INDUCT_TRAIN_METRIC_COPYING : INDUCT_TRAIN_METRIC_PREFIX_MATCHING;
        if (!(want & bit)) continue;
        if (!rec) {
            int rc = induct_analysis_probe_tokens(m, &r->probe, (uint32_t)k, NULL, 0, &len);
            if (rc != INDUCT_EBUFSIZE && rc != INDUCT_OK) {
                char msg[384];
                snprintf(msg, sizeof msg, "%s", induct_last_error_message());
                return induct__fail(rc, "induct_train: metric '%s' (probe: %s): %s",
                                    k ? "copying_score" : "prefix_matching_score",
                                    r->c.probe ? "induct_train_config.probe"
                                               : "the dataset's BOS and token range",
                                    msg);
            }
            continue;
        }
        collect_interrupt(r);
        INDUCT_TRY(k ? induct_analysis_copying(m, &r->probe, r->heads, r->n_heads_total, &len)
                     : induct_analysis_prefix_matching(m, &r->probe, r->heads,
                                                       r->n_heads_total, &len));
        INDUCT_TRY(add_heads(r, rec, k ? "copying_score" : "prefix_matching_score"));
    }
    /* kv_accuracy (fraction) and kv_attention_on_answer [n_layers][n_heads]: key-value
     * retrieval datasets, answer position seq_len - 2 of every eval row */
    if (want & (INDUCT_TRAIN_METRIC_KV_ACCURACY | INDUCT_TRAIN_METRIC_KV_ATTENTION)) {
        INDUCT_FAIL_IF(r->d->kind != INDUCT__DS_KV, INDUCT_EINVAL,
                       "induct_train: metrics 'kv_accuracy' and 'kv_attention_on_answer' need "
                       "a key-value retrieval dataset (induct_dataset_new_kv)");
    }
    if ((want & INDUCT_TRAIN_METRIC_KV_ACCURACY) && rec) {
        double acc;
        collect_interrupt(r);
        INDUCT_TRY(induct_analysis_kv_accuracy(m, r->d, E, T, &acc));
        INDUCT_TRY(add_num(rec, "kv_accuracy", acc, 0));
    }
    if ((want & INDUCT_TRAIN_METRIC_KV_ATTENTION) && rec) {
        collect_interrupt(r);
        INDUCT_TRY(induct_analysis_kv_attention(m, r->d, E, T, r->heads, r->n_heads_total, &len));
        INDUCT_TRY(add_heads(r, rec, "kv_attention_on_answer"));
    }
    /* induction_score [n_layers][n_heads]: prefix matching on the data, RRT datasets
     * without BOS */
    if (want & INDUCT_TRAIN_METRIC_INDUCTION_SCORE) {
        INDUCT_FAIL_IF(r->d->kind != INDUCT__DS_RRT || r->d->rrt.bos >= 0, INDUCT_EINVAL,
                       "induct_train: metric 'induction_score' needs a repeated-random-token "
                       "dataset without BOS");
        if (rec) {
            collect_interrupt(r);
            INDUCT_TRY(induct_analysis_induction_score(m, r->d, E, T, r->heads,
                                                       r->n_heads_total, &len));
            INDUCT_TRY(add_heads(r, rec, "induction_score"));
        }
    }
    return INDUCT_OK;
}

/* Is step counter value s a point of the schedule (every, log2)? */
static int due(uint64_t s, uint64_t every, uint32_t log2_) {
    if (s == 0) return every != 0 || log2_;
    if (every && s % every == 0) return 1;
    return log2_ && (s & (s - 1)) == 0;
}

/* Evaluate and append one record to the log. */
static int evaluate(run *r, double train_loss, uint64_t train_steps, double lr, double elapsed,
                    double *eval_loss) {
    cJSON *rec = cJSON_CreateObject();
    INDUCT_FAIL_IF(!rec, INDUCT_ENOMEM, "induct_train: out of memory building a metrics record");
    uint64_t s = r->o->step;
    int rc = INDUCT_OK;
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)s); /* exact beyond 2^53 too */
    cJSON *x = cJSON_CreateRaw(b);
    if (!x || !cJSON_AddItemToObject(rec, "step", x)) {
        cJSON_Delete(x);
        rc = induct__fail(INDUCT_ENOMEM, "induct_train: out of memory building a metrics record");
    }
    if (rc == INDUCT_OK) rc = add_num(rec, "tokens", (double)s * r->c.batch * r->T, 0);
    if (rc == INDUCT_OK) /* wall time: microseconds are plenty */
        rc = add_num(rec, "elapsed_seconds", round(elapsed * 1e6) / 1e6, 0);
    if (rc == INDUCT_OK) rc = add_num(rec, "lr", lr, 0);
    if (rc == INDUCT_OK) rc = add_num(rec, "train_loss", train_loss, 0);
    if (rc == INDUCT_OK) rc = add_num(rec, "train_loss_steps", (double)train_steps, 0);
    if (rc == INDUCT_OK) rc = eval_metrics(r, rec, eval_loss);
    if (rc == INDUCT_OK && r->mf) {
        char *line = cJSON_PrintUnformatted(rec);
        if (!line)
            rc = induct__fail(INDUCT_ENOMEM, "induct_train: out of memory printing a record");
        else {
            char eb[128];
            if (fputs(line, r->mf) == EOF || fputc('\n', r->mf) == EOF || fflush(r->mf) != 0)
                rc = induct__fail(INDUCT_EIO, "induct_train: cannot write the metrics log '%s': %s",
                                  r->c.metrics_path, induct__errstr(errno, eb, sizeof eb));
            free(line);
        }
    }
    cJSON_Delete(rec);
    return rc;
}

/* The snapshot path: the template with every "{step}" replaced. Caller frees. */
static int snapshot_path(const char *tpl, uint64_t step, char **out) {
    char num[32];
    int nl = snprintf(num, sizeof num, "%llu", (unsigned long long)step);
    size_t n = 0;
    for (const char *p = tpl; *p;) {
        if (!strncmp(p, "{step}", 6)) {
            n += (size_t)nl;
            p += 6;
        } else {
            n++;
            p++;
        }
    }
    char *s = malloc(n + 1), *q = s;
    INDUCT_FAIL_IF(!s, INDUCT_ENOMEM, "induct_train: out of memory");
    for (const char *p = tpl; *p;) {
        if (!strncmp(p, "{step}", 6)) {
            memcpy(q, num, (size_t)nl);
            q += nl;
            p += 6;
        } else {
            *q++ = *p++;
        }
    }
    *q = '\0';
    *out = s;
    return INDUCT_OK;
}

static int snapshot(run *r, char **path_out) {
    *path_out = NULL;
    if (!r->c.snapshot_path) return INDUCT_OK;
    char *p = NULL;
    INDUCT_TRY(snapshot_path(r->c.snapshot_path, r->o->step, &p));
    int rc = r->c.snapshot_optimizer ? induct_optimizer_save(r->o, p) : induct_model_save(r->m, p);
    if (rc != INDUCT_OK) {
        free(p);
        return rc;
    }
    *path_out = p;
    return INDUCT_OK;
}

/* A resumed run continues the log at the optimizer's step: the records of later steps
 * (written after the snapshot it resumed from, by a run that was then killed; at step 0
 * every record, as step 0 is evaluated again) and an incomplete last line (a write cut
 * short) are cut off, so that the log reads as one run. Lines before the cut that are
 * not records with a "step" are kept. No file: nothing to do. */
static int metrics_cut(const char *path, uint64_t step) {
    char eb[128];
    FILE *f = fopen(path, "rb");
    if (!f) {
        INDUCT_FAIL_IF(errno != ENOENT, INDUCT_EIO,
                       "induct_train: cannot read the metrics log '%s': %s", path,
                       induct__errstr(errno, eb, sizeof eb));
        return INDUCT_OK;
    }
    char *line = NULL;
    size_t cap = 0, keep = 0, total = 0;
    ssize_t len;
    int cut = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        total += (size_t)len;
        if (cut) continue;
        if (line[len - 1] != '\n') { /* incomplete: the last line, cut */
            cut = 1;
            continue;
        }
        cJSON *rec = cJSON_ParseWithLength(line, (size_t)len);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(rec, "step");
        if (cJSON_IsNumber(st) && (st->valuedouble > (double)step || step == 0)) cut = 1;
        else keep = total;
        cJSON_Delete(rec);
    }
    int err = ferror(f) ? errno : 0;
    free(line);
    fclose(f);
    INDUCT_FAIL_IF(err, INDUCT_EIO, "induct_train: cannot read the metrics log '%s': %s", path,
                   induct__errstr(err, eb, sizeof eb));
    INDUCT_FAIL_IF(keep < total && truncate(path, (off_t)keep) != 0, INDUCT_EIO,
                   "induct_train: cannot cut the metrics log '%s' back to step %llu: %s", path,
                   (unsigned long long)step, induct__errstr(errno, eb, sizeof eb));
    return INDUCT_OK;
}

static int setup(run *r) {
    induct_model *m = r->m;
    induct_train_config *c = &r->c;
    r->T = c->seq_len ? c->seq_len : m->cfg.n_ctx;
    INDUCT_FAIL_IF(c->batch == 0, INDUCT_EINVAL, "induct_train: batch must be >= 1");
    INDUCT_FAIL_IF(r->T < 2, INDUCT_EINVAL, "induct_train: seq_len must be >= 2 (got %u)", r->T);
    INDUCT_FAIL_IF(r->T > m->cfg.n_ctx, INDUCT_ERANGE,
                   "induct_train: seq_len %u exceeds the model's n_ctx %u", r->T, m->cfg.n_ctx);
    INDUCT_FAIL_IF(r->d->d_vocab > m->cfg.d_vocab, INDUCT_EINVAL,
                   "induct_train: dataset vocabulary %u exceeds the model's d_vocab %u",
                   r->d->d_vocab, m->cfg.d_vocab);
    INDUCT_FAIL_IF(c->eval_log2 > 1 || c->snapshot_log2 > 1 || c->snapshot_optimizer > 1 ||
                       c->metrics_append > 1,
                   INDUCT_EINVAL,
                   "induct_train: eval_log2, snapshot_log2, snapshot_optimizer and "
                   "metrics_append must be 0 or 1");
    int evals = c->eval_every != 0 || c->eval_log2;
    INDUCT_FAIL_IF(!(c->target_loss >= 0.0) || !isfinite(c->target_loss), INDUCT_EINVAL,
                   "induct_train: target_loss must be finite and >= 0");
    INDUCT_FAIL_IF(c->target_loss > 0 && (!evals || !(c->metrics & INDUCT_TRAIN_METRIC_LOSS)),
                   INDUCT_EINVAL,
                   "induct_train: target_loss needs an evaluation schedule (eval_every or "
                   "eval_log2) and INDUCT_TRAIN_METRIC_LOSS");
    INDUCT_FAIL_IF(c->snapshot_path && !*c->snapshot_path, INDUCT_EINVAL,
                   "induct_train: snapshot_path is empty");
    INDUCT_FAIL_IF(c->metrics_path && !*c->metrics_path, INDUCT_EINVAL,
                   "induct_train: metrics_path is empty");
    /* every step must fit the limits (workspace and token staging) before anything,
     * the probe below included, is allocated */
    size_t n, bytes;
    INDUCT_FAIL_IF(!induct__mul(c->batch, r->T, &n) || !induct__mul(n, sizeof(int32_t), &bytes),
                   INDUCT_ELIMIT, "induct_train: batch %u x seq_len %u overflows size_t",
                   c->batch, r->T);
    INDUCT_TRY(induct__model_check_workspace(
        m, c->batch, r->T,
        (n > m->tok_cap ? bytes - (uint64_t)m->tok_cap * sizeof(int32_t) : 0) +
            (uint64_t)r->T * sizeof(int32_t)));
    /* the train split must produce sequences of T tokens: row 0 of a batch does not
     * depend on the batch size, so one row is probed */
    int32_t *probe = malloc((size_t)r->T * sizeof *probe); /* T <= n_ctx < 2^32 */
    INDUCT_FAIL_IF(!probe, INDUCT_ENOMEM, "induct_train: out of memory");
    int rc = induct_dataset_batch(r->d, INDUCT_SPLIT_TRAIN, r->o->step, 1, r->T, probe, r->T,
                                  NULL, 0);
    free(probe);
    INDUCT_TRY(rc);
    /* probe every requested metric (EINVAL / ERANGE) before any step, even when no
     * evaluation is scheduled: a metric that cannot be provided is never skipped */
    INDUCT_TRY(eval_metrics(r, NULL, NULL));
    if (evals) {
        INDUCT_FAIL_IF(c->eval_batch == 0, INDUCT_EINVAL,
                       "induct_train: eval_batch must be >= 1 when evaluation is on");
        INDUCT_FAIL_IF(!induct__mul(c->eval_batch, r->T, &n) ||
                           !induct__mul(n, sizeof(int32_t), &bytes),
                       INDUCT_ELIMIT, "induct_train: eval_batch %u x seq_len %u overflows size_t",
                       c->eval_batch, r->T);
        /* the evaluation set is held for the whole call, next to the workspace its
         * forward pass needs */
        INDUCT_TRY(induct__model_check_workspace(m, c->eval_batch, r->T, bytes));
        r->eval_tok = malloc(bytes);
        r->n_heads_total = (size_t)m->cfg.n_layers * m->cfg.n_heads;
        r->heads = malloc(r->n_heads_total * sizeof *r->heads);
        INDUCT_FAIL_IF(!r->eval_tok || !r->heads, INDUCT_ENOMEM, "induct_train: out of memory");
        r->eval_bytes = bytes; /* held by the model until the call returns */
        induct__model_held(m, bytes, 0);
        INDUCT_TRY(induct_dataset_batch(r->d, INDUCT_SPLIT_EVAL, 0, c->eval_batch, r->T,
                                        r->eval_tok, n, NULL, 0));
    }
    if (c->metrics_path) {
        char eb[128];
        if (c->metrics_append) INDUCT_TRY(metrics_cut(c->metrics_path, r->o->step));
        r->mf = fopen(c->metrics_path, c->metrics_append ? "a" : "w");
        INDUCT_FAIL_IF(!r->mf, INDUCT_EIO, "induct_train: cannot open the metrics log '%s': %s",
                       c->metrics_path, induct__errstr(errno, eb, sizeof eb));
    }
    return INDUCT_OK;
}

typedef struct loop {
    double t0, step_time, loss_sum;
    uint64_t loss_n, done;
    int evals, snaps;
} loop;

/* After a step (or at step 0 of a fresh run): evaluation, snapshot and callback as
 * scheduled. *finished is set when the run ends here. */
static int point(run *r, loop *lp, induct_progress *p, induct_progress_fn cb, void *ud,
                 int *finished) {
    const induct_train_config *c = &r->c;
    uint64_t s = r->o->step;
    int last = s >= c->steps, target = 0;
    *finished = 0;
    if (lp->evals && (due(s, c->eval_every, c->eval_log2) || (last && lp->done))) {
        double el = NAN;
        INDUCT_TRY(evaluate(r, lp->loss_n ? lp->loss_sum / (double)lp->loss_n : NAN, lp->loss_n,
                            p->lr, now_seconds() - lp->t0, &el));
        lp->loss_sum = 0.0;
        lp->loss_n = 0;
        p->events |= INDUCT_TRAIN_EVENT_EVAL;
        p->eval_loss = el;
        target = c->target_loss > 0 && el <= c->target_loss;
    }
    char *snap = NULL;
    if (lp->snaps && due(s, c->snapshot_every, c->snapshot_log2)) {
        INDUCT_TRY(snapshot(r, &snap));
        p->events |= INDUCT_TRAIN_EVENT_SNAPSHOT;
        p->snapshot_path = snap;
    }
    if (last || target) p->events |= INDUCT_TRAIN_EVENT_DONE;
    if (target) p->events |= INDUCT_TRAIN_EVENT_TARGET;
    p->step = s;
    double el = now_seconds() - lp->t0;
    p->elapsed_seconds = el;
    p->tokens_per_second = lp->step_time > 0
                               ? (double)lp->done * c->batch * r->T / lp->step_time
                               : 0.0;
    p->eta_seconds = lp->done ? el / (double)lp->done * (double)(last ? 0 : c->steps - s) : NAN;
    int stop = cb ? cb(p, ud) : 0;
    free(snap);
    if (last || target) {
        *finished = 1;
        return INDUCT_OK;
    }
    if (stop && r->ranks) { /* the ranks agree before the next step (train_loop) */
        r->stop_request = 1;
        return INDUCT_OK;
    }
    INDUCT_FAIL_IF(stop, INDUCT_EINTERRUPTED,
                   "induct_train: stopped by the progress callback at step %llu",
                   (unsigned long long)s);
    return INDUCT_OK;
}

static void progress_init(induct_progress *p, const run *r) {
    memset(p, 0, sizeof *p);
    p->size = sizeof *p;
    p->steps = r->c.steps;
    p->loss = p->lr = p->eval_loss = NAN;
}

static int train_loop(run *r, induct_progress_fn cb, void *ud) {
    induct_optimizer *o = r->o;
    const induct_train_config *c = &r->c;
    loop lp = {0};
    lp.t0 = now_seconds();
    lp.evals = c->eval_every != 0 || c->eval_log2;
    lp.snaps = c->snapshot_every != 0 || c->snapshot_log2;
    induct_progress p;
    int finished = 0;
    if (o->step == 0 && (lp.evals || lp.snaps)) { /* the initialisation is a point */
        progress_init(&p, r);
        INDUCT_TRY(point(r, &lp, &p, cb, ud, &finished));
        if (finished) return INDUCT_OK;
    }
    while (o->step < c->steps) {
        collect_interrupt(r);
        if (r->ranks) { /* a stop on any rank stops every rank before this step */
            int any = r->pending_interrupt || r->stop_request;
            INDUCT_TRY(induct__comm_any(o, &any));
            r->agreed_stop = any;
            INDUCT_FAIL_IF(any, INDUCT_EINTERRUPTED,
                           "induct_train: stopped at step %llu (callback or "
                           "induct_model_interrupt on %s rank)",
                           (unsigned long long)o->step,
                           r->pending_interrupt || r->stop_request ? "this" : "another");
        }
        INDUCT_FAIL_IF(r->pending_interrupt, INDUCT_EINTERRUPTED,
                       "induct_train: interrupted at step %llu (induct_model_interrupt)",
                       (unsigned long long)o->step);
        progress_init(&p, r);
        double lr, loss, ts = now_seconds();
        INDUCT_TRY(induct_optimizer_current_lr(o, &lr));
        INDUCT_TRY(induct_train_step(o, r->d, c->batch, r->T, &loss));
        lp.step_time += now_seconds() - ts;
        lp.done++;
        lp.loss_sum += loss;
        lp.loss_n++;
        p.events = INDUCT_TRAIN_EVENT_STEP;
        p.loss = loss;
        p.lr = lr;
        INDUCT_TRY(point(r, &lp, &p, cb, ud, &finished));
        if (finished) return INDUCT_OK;
    }
    return INDUCT_OK;
}

INDUCT_API int induct_train(induct_optimizer *o, const induct_dataset *d,
                            const induct_train_config *cfg, induct_progress_fn cb, void *ud) {
    INDUCT_FAIL_IF(!o || !d || !cfg, INDUCT_EINVAL, "induct_train: NULL argument");
    run r;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.m = o->model;
    r.d = d;
    induct_train_config_init(&r.c, sizeof r.c);
    INDUCT_TRY(induct__struct_in(&r.c, sizeof r.c, offsetof(induct_train_config, probe), cfg,
                                 "induct_train_config"));
    if (r.c.probe) /* borrowed for the call: copied, checked like every probe config */
        INDUCT_TRY(induct__struct_in(&r.probe, sizeof r.probe, sizeof r.probe, r.c.probe,
                                     "induct_train_config.probe"));
    else
        INDUCT_TRY(induct_probe_config_for_dataset(&r.probe, sizeof r.probe, d));
    /* data-parallel: every rank trains and evaluates alike, rank 0 alone writes files */
    r.ranks = o->has_comm && o->comm.n_ranks > 1;
    if (o->has_comm && o->comm.rank != 0) {
        r.c.metrics_path = NULL;
        r.c.snapshot_path = NULL;
    }
    atomic_store(&r.m->interrupt, 0);
    int rc = setup(&r);
    if (rc == INDUCT_OK) rc = train_loop(&r, cb, ud);
    if (r.mf && fclose(r.mf) != 0 && rc == INDUCT_OK)
        rc = induct__fail(INDUCT_EIO, "induct_train: cannot close the metrics log '%s'",
                          r.c.metrics_path);
    /* a failure of this rank alone (a file, memory) would leave the others waiting in
     * the next step's exchange: release them (a step's failure has done so already) */
    if (rc != INDUCT_OK && r.ranks && !r.agreed_stop && o->comm.abort)
        o->comm.abort(o->comm.user, rc);
    free(r.eval_tok);
    free(r.heads);
    induct__model_held(r.m, 0, r.eval_bytes);
    return rc;
}
