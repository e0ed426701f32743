/* train-run: a training run as the ICL paper records it — a metrics time series and
 * log-spaced snapshots — that survives interruption and resumes bit-identically.
 *
 * Model and data are seed 003's (see induction_rrt.c): an attention-only transformer
 * (2 layers by default) on repeated random tokens, V = T = 64, AdamW lr 1e-3.
 * Writes into --out DIR (which must exist):
 *   DIR/metrics.jsonl              one JSON object per evaluation (docs/training.md)
 *   DIR/ckpt-<step>.safetensors    snapshots at steps 0, 1, 2, 4, … and every 500
 *                                  (model + optimizer: each one is a resume point)
 * Ctrl-C stops between two steps (induct_model_interrupt from the signal handler) and
 * saves DIR/interrupted.safetensors; `--resume DIR/interrupted.safetensors` continues
 * the run where it stopped, appending to the same metrics log.
 *
 * Usage: train-run --out DIR [--steps N] [--layers L] [--eval-every K] [--threads N]
 *                  [--resume FILE] [--target-loss X]
 */
#include <induct/induct.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define V 64
#define T 64

static induct_model *g_model; /* for the signal handler */

/* induct_model_interrupt() only stores to a lock-free atomic flag, which is
 * async-signal-safe. */
static void on_sigint(int sig) {
    (void)sig;
    induct_model_interrupt(g_model);
}

static void die(int rc, const char *what) {
    fprintf(stderr, "train-run: %s: %s (%s)\n", what, induct_status_name(rc),
            induct_last_error_message());
    exit(1);
}

typedef struct bar {
    int tty;
    double last_eval;
} bar;

/* Progress bar on a terminal, one line per evaluation otherwise. */
static int progress(const induct_progress *p, void *ud) {
    bar *b = ud;
    if (p->events & INDUCT_TRAIN_EVENT_EVAL) b->last_eval = p->eval_loss;
    if (b->tty) {
        const int width = 28;
        int fill = p->steps ? (int)((double)p->step / (double)p->steps * width) : width;
        fprintf(stderr, "\r[");
        for (int i = 0; i < width; i++) fputc(i < fill ? '#' : '.', stderr);
        fprintf(stderr, "] %llu/%llu  loss %.3f  eval %.3f  lr %.2g  %.0f tok/s  ETA %.0fs  ",
                (unsigned long long)p->step, (unsigned long long)p->steps,
                isnan(p->loss) ? 0.0 : p->loss, b->last_eval, isnan(p->lr) ? 0.0 : p->lr,
                p->tokens_per_second, isnan(p->eta_seconds) ? 0.0 : p->eta_seconds);
        if (p->events & INDUCT_TRAIN_EVENT_DONE) fputc('\n', stderr);
    } else if (p->events & INDUCT_TRAIN_EVENT_EVAL) {
        fprintf(stderr, "step %llu: eval loss %.4f nats\n", (unsigned long long)p->step,
                p->eval_loss);
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *out = NULL, *resume = NULL;
    unsigned long long steps = 2000, eval_every = 100;
    unsigned layers = 2, threads = 1;
    double target = 0.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) goto usage;
        if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--resume")) resume = v;
        else if (!strcmp(a, "--steps")) steps = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--eval-every")) eval_every = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--layers")) layers = (unsigned)atoi(v);
        else if (!strcmp(a, "--threads")) threads = (unsigned)atoi(v);
        else if (!strcmp(a, "--target-loss")) target = atof(v);
        else goto usage;
        i++;
    }
    if (!out) goto usage;

    induct_model *m = NULL;
    induct_optimizer *o = NULL;
    int rc;
    if (resume) {
        if ((rc = induct_model_load(&m, resume))) die(rc, "loading the model");
        if ((rc = induct_optimizer_load(&o, m, resume))) die(rc, "loading the optimizer");
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
        if ((rc = induct_model_new(&m, &mc))) die(rc, "model");
        if ((rc = induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW))) die(rc, "optimizer");
        induct_optimizer_set(o, INDUCT_OPT_LR, 1e-3);
    }
    induct_rrt_config rc_;
    induct_rrt_config_init(&rc_, sizeof rc_);
    rc_.d_vocab = V;
    rc_.seed = 1; /* the dataset is not in the checkpoint: recreate it identically */
    induct_dataset *d;
    if ((rc = induct_dataset_new_rrt(&d, &rc_))) die(rc, "dataset");

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

    g_model = m;
    signal(SIGINT, on_sigint);
    bar b = {isatty(2), NAN};
    rc = induct_train(o, d, &tc, progress, &b);
    signal(SIGINT, SIG_DFL);
    double step = 0;
    induct_optimizer_get(o, INDUCT_OPT_STEP, &step);
    if (rc == INDUCT_EINTERRUPTED) {
        if (b.tty) fputc('\n', stderr);
        int src = induct_optimizer_save(o, stop_file);
        if (src) die(src, "saving the interrupted state");
        printf("interrupted at step %.0f; resume with: %s --out %s --resume %s --steps %llu\n",
               step, argv[0], out, stop_file, steps);
    } else if (rc) {
        die(rc, "training");
    } else {
        printf("trained to step %.0f; metrics in %s, snapshots %s\n", step, metrics, snaps);
    }
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
    return rc == INDUCT_OK || rc == INDUCT_EINTERRUPTED ? 0 : 1;

usage:
    fprintf(stderr,
            "usage: %s --out DIR [--steps N] [--layers L] [--eval-every K] [--threads N]\n"
            "       [--resume FILE] [--target-loss X]\n",
            argv[0]);
    return 2;
}
