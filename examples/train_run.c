/* train-run: a training run as the ICL paper records it — a metrics time series and
 * log-spaced snapshots — that survives interruption and resumes bit-identically.
 *
 * Model and data are those of induction-rrt (see induction_rrt.c): an attention-only
 * transformer (2 layers by default) on repeated random tokens, V = T = 64, AdamW lr 1e-3.
 * Writes into --out DIR (which must exist):
 *   DIR/metrics.jsonl              one JSON object per evaluation (docs/training.md)
 *   DIR/ckpt-<step>.safetensors    snapshots at steps 0, 1, 2, 4, … and every 500
 *                                  (model + optimizer: each one is a resume point)
 * Ctrl-C or SIGTERM stops between two steps and saves DIR/interrupted.safetensors
 * (exit status 130); `--resume DIR/interrupted.safetensors` continues the run where it
 * stopped, appending to the same metrics log. `train-run --help` lists every option.
 */
#include <induct/induct.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define V 64
#define T 64

typedef struct options {
    const char *out, *resume;
    uint64_t steps, eval_every;
    uint32_t layers, threads;
    double target;
} options;

static const options DEFAULTS = {NULL, NULL, 2000, 100, 2, 1, 0.0};

static void help(FILE *f) {
    fprintf(f,
            "usage: train-run --out DIR [options]\n"
            "\n"
            "Train an attention-only transformer on repeated random tokens (V = T = 64,\n"
            "d_model 64, 4 heads, batch 64, AdamW lr 1e-3) with induct_train(): a metrics\n"
            "log, log-spaced snapshots, a progress bar, and a resume point on Ctrl-C.\n"
            "\n"
            "  --out DIR          existing directory for metrics.jsonl and ckpt-<step>.safetensors\n"
            "  --steps N          train until the step counter is N (default %llu; 1 ... 10^9)\n"
            "  --layers L         number of attention layers (default %u; 1 ... 16)\n"
            "  --eval-every K     evaluate every K steps (default %llu; 1 ... 10^9)\n"
            "  --threads N        threads for the model (default %u; 1 ... 1024)\n"
            "  --resume FILE      continue from a snapshot or DIR/interrupted.safetensors\n"
            "                     (the same --out and --steps; the metrics log continues from\n"
            "                     the snapshot's step, records written after it are dropped)\n"
            "  --target-loss X    stop once the evaluation loss is <= X nats (default 0: off)\n"
            "  -h, --help         this help\n"
            "\n"
            "Ctrl-C or SIGTERM stops between two steps and saves DIR/interrupted.safetensors\n"
            "(a second one ends the program at once).\n"
            "Exit status: 0 done, 1 failed, 2 bad command line, 130 interrupted (resume point saved).\n",
            (unsigned long long)DEFAULTS.steps, DEFAULTS.layers,
            (unsigned long long)DEFAULTS.eval_every, DEFAULTS.threads);
}

/* A run killed while it wrote a snapshot leaves that write's temporary file
 * (`<snapshot>.tmp.<pid>.<n>`, the previous snapshot intact). Remove those of processes
 * that no longer exist, so that repeated kills do not fill the disk. */
static void remove_stale_temporaries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *t = strstr(e->d_name, ".safetensors.tmp.");
        if (!t) continue;
        long pid = strtol(t + strlen(".safetensors.tmp."), NULL, 10);
        if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH)) {
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (pid > 0) unlink(path);
        }
    }
    closedir(d);
}

static void on_option(const char *name, const char *v, void *ud) {
    options *o = ud;
    if (!strcmp(name, "out")) o->out = v;
    else if (!strcmp(name, "resume")) o->resume = v;
    else if (!strcmp(name, "steps")) o->steps = cli_u64(name, v, 1, 1000000000);
    else if (!strcmp(name, "eval-every")) o->eval_every = cli_u64(name, v, 1, 1000000000);
    else if (!strcmp(name, "layers")) o->layers = cli_u32(name, v, 1, 16);
    else if (!strcmp(name, "threads")) o->threads = cli_u32(name, v, 1, 1024);
    else if (!strcmp(name, "target-loss")) o->target = cli_f64(name, v, 0, 1e6);
}

typedef struct bar {
    cli_progress p;
    double last_eval;
} bar;

/* Progress bar on a terminal, one line per evaluation otherwise. */
static int progress(const induct_progress *p, void *ud) {
    bar *b = ud;
    if (p->events & INDUCT_TRAIN_EVENT_EVAL) b->last_eval = p->eval_loss;
    if (cli_progress_tty(&b->p)) {
        char detail[160];
        snprintf(detail, sizeof detail, "%llu/%llu  loss %.3f  eval %.3f  lr %.2g  %.0f tok/s",
                 (unsigned long long)p->step, (unsigned long long)p->steps,
                 isnan(p->loss) ? 0.0 : p->loss, b->last_eval, isnan(p->lr) ? 0.0 : p->lr,
                 p->tokens_per_second);
        cli_progress_draw(&b->p, "", 28, (double)p->step, (double)p->steps, detail);
    } else if (p->events & INDUCT_TRAIN_EVENT_EVAL) {
        fprintf(stderr, "step %llu: eval loss %.4f nats\n", (unsigned long long)p->step,
                p->eval_loss);
    }
    return cli_interrupted() != 0;
}

int main(int argc, char **argv) {
    cli_init("train-run", "--out DIR [options]", help);
    options opt = DEFAULTS;
    static const struct option longopts[] = {
        {"out", required_argument, 0, 0},        {"resume", required_argument, 0, 0},
        {"steps", required_argument, 0, 0},      {"eval-every", required_argument, 0, 0},
        {"layers", required_argument, 0, 0},     {"threads", required_argument, 0, 0},
        {"target-loss", required_argument, 0, 0}, {0, 0, 0, 0}};
    cli_parse(argc, argv, longopts, on_option, &opt);
    if (!opt.out) cli_usage_error("--out DIR is required");
    const char *out = opt.out, *resume = opt.resume;
    unsigned long long steps = opt.steps, eval_every = opt.eval_every;
    unsigned layers = opt.layers, threads = opt.threads;
    double target = opt.target;
    if (strlen(out) > 4000) cli_usage_error("--out: the path is too long");
    cli_signals_catch(); /* from here a Ctrl-C or SIGTERM ends in a resume point */
    remove_stale_temporaries(out);

    induct_model *m = NULL;
    induct_optimizer *o = NULL;
    int rc;
    if (resume) {
        if ((rc = induct_model_load(&m, resume))) cli_lib_fail(rc, "loading the model");
        if ((rc = induct_optimizer_load(&o, m, resume))) cli_lib_fail(rc, "loading the optimizer");
        induct_model_set_threads(m, threads);
    } else {
        induct_model_config mc;
        induct_model_config_init(&mc, sizeof mc);
        mc.n_layers = layers;
        mc.d_model = 64;
        mc.n_heads = 4;
        mc.n_ctx = T;
        mc.d_vocab = V;
        mc.init = INDUCT_INIT_TORCH;
        mc.n_threads = threads;
        if ((rc = induct_model_new(&m, &mc))) cli_lib_fail(rc, "model");
        if ((rc = induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW))) cli_lib_fail(rc, "optimizer");
        induct_optimizer_set(o, INDUCT_OPT_LR, 1e-3);
    }
    induct_rrt_config rc_;
    induct_rrt_config_init(&rc_, sizeof rc_);
    rc_.d_vocab = V;
    rc_.seed = 1; /* the dataset is not in the checkpoint: recreate it identically */
    induct_dataset *d;
    if ((rc = induct_dataset_new_rrt(&d, &rc_))) cli_lib_fail(rc, "dataset");

    char metrics[4096], snaps[4096], stop_file[4096];
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", out);
    snprintf(snaps, sizeof snaps, "%s/ckpt-{step}.safetensors", out);
    snprintf(stop_file, sizeof stop_file, "%s/interrupted.safetensors", out);
    induct_train_config tc;
    induct_train_config_init(&tc, sizeof tc);
    tc.steps = steps;
    tc.batch = 64;
    tc.seq_len = T;
    tc.eval_every = eval_every;
    tc.eval_batch = 128;
    tc.metrics = INDUCT_TRAIN_METRIC_LOSS | INDUCT_TRAIN_METRIC_PREVIOUS_TOKEN |
                 INDUCT_TRAIN_METRIC_INDUCTION_SCORE;
    tc.metrics_path = metrics;
    tc.metrics_append = resume != NULL;
    tc.snapshot_log2 = 1;
    tc.snapshot_every = 500;
    tc.snapshot_path = snaps;
    tc.target_loss = target;

    cli_watch_model(m); /* a signal also stops an evaluation in progress */
    bar b = {.last_eval = NAN};
    cli_progress_start(&b.p);
    rc = induct_train(o, d, &tc, progress, &b);
    cli_progress_end(&b.p);
    cli_watch_model(NULL);
    double step = 0;
    induct_optimizer_get(o, INDUCT_OPT_STEP, &step);
    int status = CLI_EXIT_OK;
    if (rc == INDUCT_EINTERRUPTED) {
        int src = induct_optimizer_save(o, stop_file);
        if (src) cli_lib_fail(src, "saving the interrupted state");
        printf("interrupted (%s) at step %.0f; resume with: %s --out %s --resume %s --steps %llu\n",
               cli_interrupted() == SIGTERM ? "SIGTERM" : "SIGINT", step, argv[0], out,
               stop_file, steps);
        status = CLI_EXIT_INTERRUPTED;
    } else if (rc) {
        cli_lib_fail(rc, "training");
    } else {
        printf("trained to step %.0f; metrics in %s, snapshots %s\n", step, metrics, snaps);
    }
    cli_signals_restore();
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
    return status;
}
