/* study-train: train ONE model of a study into its own run directory, resumably.
 *
 * The model (--model 2L, 3L-mlp, 1L-smeared, ...) is trained with the library's training
 * driver, induct_train(), on the data and with the settings the flags give (the defaults
 * are the main job's, docs/phase-change.md). The run directory (--out DIR; docs/study.md,
 * "The run directory") receives:
 *   config.json                 the settings and the data's SHA-256 (a re-run with other
 *                               settings or on changed data is refused)
 *   metrics.jsonl               the driver's record of every evaluation
 *   weights/step-<S>.safetensors  the weights at every evaluation (weights only)
 *   resume.safetensors, resume.json  the last evaluation's weights + optimizer state (one
 *                               rolling file), while the run is unfinished
 *   ckpt-<S>.safetensors        weights + optimizer every steps/--snapshots steps
 *   final.safetensors           the final weights + optimizer state
 *   train.json                  written last: wall time, throughput (the run is complete)
 * Killed at any moment and started again with the same command, it continues from the
 * last evaluation it completed and ends with the same bits as an uninterrupted run: the
 * metrics log is cut back to that evaluation, later kept weights are removed, and the
 * driver resumes from the snapshot (docs/training.md, "Resume": a resume at an evaluation
 * point repeats no record and averages train_loss over the same steps).
 *
 * usage: study-train --model NAME --out DIR (--text PATH | --tokens PATH) [flags]
 *        study-train --check [flags]     the flags and the data checked, nothing trained
 *        study-train --time-step [flags] seconds of one training step (the runner's estimate)
 */
#include <induct/induct.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "run_config.h"

typedef struct options {
    run_config c;
    int shortformer_set;
    const char *out;
    uint32_t threads;
    int check, time_step;
} options;

static void help(FILE *f) {
    fprintf(f, "usage: study-train --model NAME --out DIR (--text PATH | --tokens PATH) [flags]\n"
               "       study-train --check [flags]      check the flags and the data, train nothing\n"
               "       study-train --time-step [flags]  print the seconds of one training step\n\n"
               "Trains one model of a study into DIR, resumably (docs/study.md).\n\n");
    run_flags_usage(f);
    fprintf(f, "run:       --out DIR  --threads N (1; OpenMP threads, the bits do not depend on it)\n"
               "           -h, --help  this help\n"
               "Exit status: 0 trained (or already complete), 1 failed, 2 bad input, 130 stopped\n"
               "(SIGINT/SIGTERM; the same command continues from the last evaluation).\n");
}

static void on_option(const char *name, const char *v, void *ud) {
    options *o = ud;
    if (run_on_flag(&o->c, name, v, &o->shortformer_set)) return;
    if (!strcmp(name, "out")) {
        if (!*v) cli_usage_error("--out needs a directory");
        o->out = v;
    } else if (!strcmp(name, "threads")) o->threads = cli_u32(name, v, 1, 1024);
    else if (!strcmp(name, "check")) o->check = 1;
    else if (!strcmp(name, "time-step")) o->time_step = 1;
}

static void parse(int argc, char **argv, options *o) {
    size_t n = 0;
    while (RUN_FLAGS[n].name) n++;
    struct option *opts = run_xcalloc(n + 5, sizeof *opts);
    memcpy(opts, RUN_FLAGS, n * sizeof *opts);
    opts[n++] = (struct option){"out", required_argument, 0, 0};
    opts[n++] = (struct option){"threads", required_argument, 0, 0};
    opts[n++] = (struct option){"check", no_argument, 0, 0};
    opts[n++] = (struct option){"time-step", no_argument, 0, 0};
    memset(o, 0, sizeof *o);
    o->c = RUN_DEFAULTS;
    o->threads = 1;
    cli_init("study-train", "--model NAME --out DIR (--text PATH | --tokens PATH) [flags]", help);
    cli_parse(argc, argv, opts, on_option, o);
    free(opts);
    run_validate(&o->c, o->shortformer_set);
    if (!o->check && !o->c.model[0]) cli_usage_error("give --model NAME");
    if (!o->check && !o->time_step && !o->out) cli_usage_error("give --out DIR");
}

/* ---- the run directory ---- */

typedef struct run {
    const options *o;
    induct_optimizer *opt;
    induct_model *m;
    const char *dir;
    char *weights_dir;
    double wall_before; /* seconds of earlier sessions (resume.json) */
    double t0, tok_s;
    int fail;           /* a save in the callback failed (message printed) */
} run;

/* Remove DIR/<prefix><S>.safetensors for every S > keep (and every S when keep < 0),
 * and the temporary files of atomic writes a kill left behind ("<file>.tmp.<pid>..."). */
static void remove_after(const char *dir, const char *prefix, long long keep) {
    DIR *d = opendir(dir);
    if (!d) return;
    size_t n = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end = NULL;
        if (strstr(e->d_name, ".safetensors.tmp.") || strstr(e->d_name, ".json.tmp.") ||
            strstr(e->d_name, ".jsonl.tmp.")) {
            char *p = run_path(dir, e->d_name);
            unlink(p);
            free(p);
            continue;
        }
        if (strncmp(e->d_name, prefix, n) || e->d_name[n] < '0' || e->d_name[n] > '9') continue;
        unsigned long long s = strtoull(e->d_name + n, &end, 10);
        if (strcmp(end, ".safetensors") || (keep >= 0 && s <= (unsigned long long)keep)) continue;
        char *p = run_path(dir, e->d_name);
        unlink(p);
        free(p);
    }
    closedir(d);
}

/* Cut metrics.jsonl after the record of step `keep`: every complete line up to and
 * including it stays. -1 when that record is not in the file. */
static int cut_metrics(const char *path, uint64_t keep) {
    size_t len;
    char *text = run_read_file(path, &len);
    if (!text) return -1;
    size_t end = 0;
    int found = 0;
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        if (!nl) break; /* a line cut off by a kill */
        *nl = 0;
        cJSON *rec = cJSON_Parse(line);
        *nl = '\n';
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(rec, "step");
        int here = cJSON_IsNumber(st) && st->valuedouble == (double)keep;
        int before = cJSON_IsNumber(st) && st->valuedouble < (double)keep;
        cJSON_Delete(rec);
        if (!here && !before) break;
        end = (size_t)(nl + 1 - text);
        line = nl + 1;
        if (here) {
            found = 1;
            break;
        }
    }
    int rc = found ? cli_write_atomic(path, text, end) : -1;
    free(text);
    return rc;
}

static void save_resume_json(run *r, uint64_t step) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "step", (double)step);
    run_add_num(j, "wall_seconds", r->wall_before + (cli_now() - r->t0));
    run_add_num(j, "tokens_per_second", r->tok_s);
    char *p = run_path(r->dir, "resume.json");
    if (run_write_json(p, j)) {
        fprintf(stderr, "study-train: cannot write %s: %s\n", p, strerror(errno));
        r->fail = 1;
    }
    free(p);
    cJSON_Delete(j);
}

/* At every evaluation (after its record is in metrics.jsonl): the weights, then the
 * rolling resume point. A kill between any two of these leaves a resume point at or
 * before the last record, and the record's weights when the resume point is there. */
static int on_progress(const induct_progress *p, void *ud) {
    run *r = ud;
    r->tok_s = p->tokens_per_second;
    if (p->events & INDUCT_TRAIN_EVENT_EVAL) {
        char *w = run_weights_path(r->dir, p->step);
        int rc = induct_model_save(r->m, w);
        free(w);
        char *res = run_path(r->dir, "resume.safetensors");
        if (!rc) rc = induct_optimizer_save(r->opt, res);
        free(res);
        if (rc) {
            fprintf(stderr, "study-train: [%s] saving the evaluation at step %llu: %s (%s)\n",
                    r->o->c.model, (unsigned long long)p->step, induct_status_name(rc),
                    induct_last_error_message());
            r->fail = 1;
            return 1;
        }
        save_resume_json(r, p->step);
        char eta[32];
        cli_fmt_duration(p->eta_seconds, eta, sizeof eta);
        fprintf(stderr, "[%s] step %llu/%llu  eval loss %.4f  %.0f tok/s  ETA %s\n",
                r->o->c.model, (unsigned long long)p->step, (unsigned long long)p->steps,
                p->eval_loss, p->tokens_per_second, eta);
    }
    return cli_interrupted() || r->fail ? 1 : 0;
}

/* The step of the resume point, or 0 (start over): resume.safetensors, whose step is
 * above 0 and has its record in the metrics log. resume.json, written after it, gives
 * the earlier sessions' time when it names the same step. */
static uint64_t resume_step(run *r, induct_model **m, induct_optimizer **opt) {
    char *res = run_path(r->dir, "resume.safetensors"), *rj = run_path(r->dir, "resume.json");
    uint64_t step = 0;
    double sv = 0;
    if (access(res, F_OK) == 0) {
        int rc = induct_model_load(m, res);
        if (!rc) rc = induct_optimizer_load(opt, *m, res);
        if (!rc) rc = induct_optimizer_get(*opt, INDUCT_OPT_STEP, &sv);
        if (rc)
            fprintf(stderr, "study-train: [%s] cannot resume from %s: %s (%s); starting over\n",
                    r->o->c.model, res, induct_status_name(rc), induct_last_error_message());
        else
            step = (uint64_t)sv;
    }
    char *mp = run_path(r->dir, "metrics.jsonl");
    if (step && cut_metrics(mp, step)) {
        fprintf(stderr, "study-train: [%s] the metrics log has no record of step %llu, the "
                        "resume point: starting over\n", r->o->c.model, (unsigned long long)step);
        step = 0;
    }
    if (step) {
        cJSON *j = run_read_json(rj);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "step");
        const cJSON *wall = cJSON_GetObjectItemCaseSensitive(j, "wall_seconds");
        const cJSON *tps = cJSON_GetObjectItemCaseSensitive(j, "tokens_per_second");
        if (cJSON_IsNumber(st) && st->valuedouble == (double)step && cJSON_IsNumber(wall))
            r->wall_before = wall->valuedouble;
        if (cJSON_IsNumber(st) && st->valuedouble == (double)step && cJSON_IsNumber(tps))
            r->tok_s = tps->valuedouble;
        cJSON_Delete(j);
    } else {
        induct_optimizer_free(*opt);
        induct_model_free(*m);
        *opt = NULL;
        *m = NULL;
    }
    free(mp);
    free(res);
    free(rj);
    return step;
}

/* config.json: written on the first start (the settings and the data's identity); a
 * later start must have the same settings and the same data. */
static void check_config(const options *o, const char *dir, const cJSON *data) {
    char *p = run_path(dir, "config.json");
    cJSON *want = run_config_json(&o->c);
    cJSON_AddItemToObject(want, "data", cJSON_Duplicate(data, 1));
    /* compared as read back (exact numbers are written as raw text) */
    char *text = cJSON_Print(want);
    cJSON *want_read = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!want_read) {
        fprintf(stderr, "study-train: out of memory\n");
        exit(CLI_EXIT_FAILED);
    }
    cJSON *have = run_read_json(p);
    if (have) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(have, "settings");
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(want_read, "settings");
        if (!cJSON_Compare(a, b, 1)) {
            const cJSON *x;
            cJSON_ArrayForEach(x, b) {
                const cJSON *y = cJSON_GetObjectItemCaseSensitive(a, x->string);
                if (!y || !cJSON_Compare(x, y, 1)) break;
            }
            cli_usage_error("%s holds a run with other settings (%s differs): give another --out, "
                            "or remove it", dir, x ? x->string : "a setting");
        }
        const cJSON *hd = cJSON_GetObjectItemCaseSensitive(have, "data");
        const cJSON *wd = cJSON_GetObjectItemCaseSensitive(want_read, "data");
        if (!cJSON_Compare(hd, wd, 1)) {
            const char *was = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(hd, "sha256"));
            cli_usage_error("%s holds a run trained on other data: %s has SHA-256 %s now, %s when "
                            "the run started: give another --out, or remove it", dir,
                            o->c.text ? o->c.text : o->c.tokens,
                            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(wd, "sha256")),
                            was ? was : "not recorded");
        }
    } else if (run_write_json(p, want)) {
        fprintf(stderr, "study-train: cannot write %s: %s\n", p, strerror(errno));
        exit(CLI_EXIT_FAILED);
    }
    cJSON_Delete(have);
    cJSON_Delete(want);
    cJSON_Delete(want_read);
    free(p);
}

/* --check: the data's and the settings' facts, one JSON object on stdout (the runner's
 * header). */
static void print_facts(const run_config *c, const induct_dataset *d, const cJSON *data,
                        uint64_t n_train, uint64_t n_val, uint64_t n_windows) {
    uint32_t early, late;
    int full;
    run_icl_tokens(c, &early, &late, &full);
    char buf[256];
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "library_version", induct_version_string());
    snprintf(buf, sizeof buf, "%s%s%s", c->text ? c->text : c->tokens, c->suffix ? " *" : "",
             c->suffix ? c->suffix : "");
    cJSON_AddStringToObject(f, "path", buf);
    cJSON_AddNumberToObject(f, "train_tokens", (double)n_train);
    cJSON_AddNumberToObject(f, "eval_tokens", (double)n_val);
    cJSON_AddNumberToObject(f, "eval_windows", (double)n_windows);
    cJSON_AddNumberToObject(f, "eval_batch", c->eval_batch);
    cJSON_AddNumberToObject(f, "d_vocab", induct_dataset_d_vocab(d));
    cJSON_AddNumberToObject(f, "steps", (double)c->steps);
    cJSON_AddNumberToObject(f, "batch", c->batch);
    cJSON_AddNumberToObject(f, "seq_len", c->seq_len);
    cJSON_AddNumberToObject(f, "d_model", c->d_model);
    cJSON_AddNumberToObject(f, "heads", c->heads);
    cJSON_AddNumberToObject(f, "d_head", run_d_head(c));
    snprintf(buf, sizeof buf, "LN %s, positions %s%s (%s init), init %s", c->ln ? "on" : "off",
             c->positional == INDUCT_POS_SHORTFORMER ? "shortformer"
             : c->positional == INDUCT_POS_STANDARD  ? "standard" : "none",
             c->positional != INDUCT_POS_SHORTFORMER || !c->shortformer_layers ? ""
             : c->shortformer_layers == 1 ? " in layer 0's queries and keys only"
                                          : " in the queries and keys of the first "
                                            "--shortformer-layers layers only",
             c->pos_init == POS_INIT_SINUSOIDAL ? "sinusoidal" : "random",
             c->init == INDUCT_INIT_TORCH ? "torch" : "gpt2");
    cJSON_AddStringToObject(f, "positions", buf);
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)c->seed);
    cJSON_AddStringToObject(f, "seed", buf);
    snprintf(buf, sizeof buf, "%g", c->lr);
    cJSON_AddStringToObject(f, "lr", buf);
    cJSON_AddNumberToObject(f, "warmup", (double)c->warmup);
    cJSON_AddNumberToObject(f, "eval_every", (double)c->eval_every);
    cJSON_AddNumberToObject(f, "early", early);
    cJSON_AddNumberToObject(f, "late", late);
    cJSON_AddNumberToObject(f, "icl_band", c->icl_band);
    if (c->repeat_fraction > 0) {
        snprintf(buf, sizeof buf,
                 "training curriculum: %g of training windows carry a repeated span of %u..%u "
                 "tokens (evaluation: untouched held-out text)", c->repeat_fraction,
                 c->repeat_min, c->repeat_max < c->seq_len / 2 ? c->repeat_max : c->seq_len / 2);
        cJSON_AddStringToObject(f, "curriculum", buf);
    }
    /* what config.json will hold (the study's plan records them; the report checks every
     * run directory against them) */
    cJSON *cj = run_config_json(c);
    cJSON_AddItemToObject(f, "settings", cJSON_DetachItemFromObject(cj, "settings"));
    cJSON_Delete(cj);
    cJSON_AddItemToObject(f, "data", cJSON_Duplicate(data, 1));
    char *text = cJSON_PrintUnformatted(f);
    printf("%s\n", text);
    free(text);
    cJSON_Delete(f);
}

static int time_step(const options *o, induct_dataset *d) {
    induct_model *m;
    induct_optimizer *opt;
    int rc = run_make_model(&o->c, induct_dataset_d_vocab(d), o->threads, &m, &opt);
    if (rc) cli_lib_fail(rc, "creating the model");
    double t = 0;
    for (int k = 0; k < 2 && !rc; k++) { /* the second one counts */
        double ts = cli_now();
        rc = induct_train_step(opt, d, o->c.batch, o->c.seq_len, NULL);
        t = cli_now() - ts;
    }
    if (rc) cli_lib_fail(rc, "timing a training step");
    printf("%.6f\n", t);
    induct_optimizer_free(opt);
    induct_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    options o;
    parse(argc, argv, &o);
    const run_config *c = &o.c;

    /* the data: the driver's evaluation set has --eval-windows windows; the curriculum
     * changes the train split only */
    induct_dataset *d = NULL;
    int rc = run_open_dataset(c, c->eval_windows, &d);
    if (rc) cli_lib_fail(rc, c->text ? "reading the text" : "reading the token file");
    if ((rc = induct_dataset_set_repeats(d, c->repeat_fraction, c->repeat_min, c->repeat_max)))
        cli_lib_fail(rc, "setting the repeated-span curriculum");
    uint64_t n_train = 0, n_val = 0, n_windows = 0;
    if ((rc = induct_dataset_split_tokens(d, INDUCT_SPLIT_TRAIN, &n_train)) ||
        (rc = induct_dataset_split_tokens(d, INDUCT_SPLIT_EVAL, &n_val)) ||
        (rc = induct_dataset_window_count(d, INDUCT_SPLIT_EVAL, c->seq_len, &n_windows)))
        cli_lib_fail(rc, "counting tokens");
    if (n_train <= c->seq_len)
        cli_usage_error("the train split has %llu tokens, fewer than --seq-len %u + 1",
                        (unsigned long long)n_train, c->seq_len);
    if (n_windows == 0)
        cli_usage_error("the held-out split (%llu tokens) has no window of --seq-len %u: raise "
                        "--val-fraction or lower --block-tokens", (unsigned long long)n_val,
                        c->seq_len);
    cJSON *data = NULL;
    char err[512];
    if (run_data_identity(c, &data, err, sizeof err)) {
        fprintf(stderr, "study-train: the data's SHA-256: %s\n", err);
        return CLI_EXIT_FAILED;
    }
    if (o.check) {
        print_facts(c, d, data, n_train, n_val, n_windows);
        cJSON_Delete(data);
        induct_dataset_free(d);
        return 0;
    }
    if (o.time_step) {
        cJSON_Delete(data);
        return time_step(&o, d);
    }

    if (run_mkdir_p(o.out)) {
        fprintf(stderr, "study-train: cannot create --out '%s': %s\n", o.out, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    check_config(&o, o.out, data);
    cJSON_Delete(data);
    char *done = run_path(o.out, "train.json");
    if (access(done, F_OK) == 0) {
        printf("study-train: [%s] already trained (%s)\n", c->model, done);
        free(done);
        induct_dataset_free(d);
        return 0;
    }
    run r = {.o = &o, .dir = o.out, .weights_dir = run_path(o.out, "weights")};
    if (run_mkdir_p(r.weights_dir)) {
        fprintf(stderr, "study-train: cannot create %s: %s\n", r.weights_dir, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    uint64_t from = resume_step(&r, &r.m, &r.opt);
    if (from) {
        if ((rc = induct_model_set_threads(r.m, o.threads))) cli_lib_fail(rc, "setting threads");
        printf("study-train: [%s] resuming at step %llu\n", c->model, (unsigned long long)from);
    } else if ((rc = run_make_model(c, induct_dataset_d_vocab(d), o.threads, &r.m, &r.opt))) {
        cli_lib_fail(rc, "creating the model");
    }
    /* nothing of this run after the resume point (a fresh start keeps nothing) */
    remove_after(r.weights_dir, "step-", from ? (long long)from : -1);
    remove_after(o.out, "ckpt-", from ? (long long)from : -1);
    char *metrics = run_path(o.out, "metrics.jsonl");
    int full;
    uint32_t early, late;
    run_icl_tokens(c, &early, &late, &full);
    char *snaps = run_path(o.out, "ckpt-{step}.safetensors");
    induct_train_config tc;
    induct_train_config_init(&tc, sizeof tc);
    tc.steps = c->steps;
    tc.batch = c->batch;
    tc.seq_len = c->seq_len;
    tc.eval_every = c->eval_every;
    tc.eval_batch = c->eval_batch;
    tc.metrics = INDUCT_TRAIN_METRIC_LOSS | INDUCT_TRAIN_METRIC_LOSS_BY_POSITION |
                 INDUCT_TRAIN_METRIC_PREFIX_MATCHING | INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN |
                 INDUCT_TRAIN_METRIC_LOSS_VECTORS | (full ? INDUCT_TRAIN_METRIC_ICL_SCORE : 0);
    tc.metrics_path = metrics;
    tc.metrics_append = from > 0;
    /* checkpoints at steps k·steps/N (step 0 included when N > 0) */
    tc.snapshot_every = c->snapshots ? (c->steps / c->snapshots ? c->steps / c->snapshots : 1) : 0;
    tc.snapshot_optimizer = 1;
    tc.snapshot_path = snaps;
    cli_signals_catch();
    cli_watch_model(r.m);
    r.t0 = cli_now();
    rc = induct_train(r.opt, d, &tc, on_progress, &r);
    double wall = r.wall_before + (cli_now() - r.t0);
    cli_signals_restore();
    free(snaps);
    if (rc || r.fail) {
        if (rc == INDUCT_EINTERRUPTED && cli_interrupted()) {
            fprintf(stderr, "study-train: [%s] stopped; the same command continues from the last "
                            "evaluation\n", c->model);
            return CLI_EXIT_INTERRUPTED;
        }
        if (rc) cli_lib_fail(rc, "training");
        return CLI_EXIT_FAILED;
    }
    char *final = run_path(o.out, "final.safetensors");
    if ((rc = induct_optimizer_save(r.opt, final))) cli_lib_fail(rc, "saving final.safetensors");
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "model", c->model);
    cJSON_AddNumberToObject(t, "steps", (double)c->steps);
    cJSON_AddNumberToObject(t, "n_params", (double)induct_model_n_params(r.m));
    run_add_num(t, "wall_seconds", wall);
    run_add_num(t, "tokens_per_second", r.tok_s);
    cJSON_AddNumberToObject(t, "threads", o.threads);
    cJSON_AddNumberToObject(t, "resumed_at_step", (double)from);
    cJSON_AddBoolToObject(t, "complete", 1);
    if (run_write_json(done, t)) {
        fprintf(stderr, "study-train: cannot write %s: %s\n", done, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    cJSON_Delete(t);
    /* the resume point is the final state now */
    char *res = run_path(o.out, "resume.safetensors"), *rj = run_path(o.out, "resume.json");
    unlink(res);
    unlink(rj);
    printf("study-train: [%s] trained %llu steps in %.1f s (%s)\n", c->model,
           (unsigned long long)c->steps, wall, o.out);
    free(res);
    free(rj);
    free(final);
    free(done);
    free(metrics);
    free(r.weights_dir);
    induct_optimizer_free(r.opt);
    induct_model_free(r.m);
    induct_dataset_free(d);
    return 0;
}
