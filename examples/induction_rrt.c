/* induction-rrt: the minimal induction-head experiment of the induction-head article.
 *
 * Attention-only transformers with 1 and 2 layers are trained on repeated random
 * tokens ([L random tokens][the same L again][random filler], L uniform in 8..32 per
 * sequence, so no fixed-offset shortcut works). An induction head forms only in the
 * 2-layer model. V=64, T=64, d_model=64, 4 heads, learned positions, no LayerNorm,
 * batch 64, 2000 AdamW steps at lr 1e-3, PyTorch's default initialisation.
 *
 * Usage: induction-rrt [--steps N] [--threads N] [--seed N] [--json]  (--help for more)
 */
#include <induct/induct.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define V 64
#define T 64
#define EVAL_LOSS_SEQ 512
#define EVAL_SCORE_SEQ 256

typedef struct result {
    unsigned layers;
    double loss, seconds;
    float induction[4], previous[4];
} result;

static int check(int rc, const char *what) {
    if (rc != INDUCT_OK) cli_lib_fail(rc, what);
    return rc;
}

/* Stop at a signal: nothing to save (the run is seconds long), exit status 130. */
static void stop_if_interrupted(unsigned layers, unsigned step) {
    if (!cli_interrupted()) return;
    fprintf(stderr, "\ninduction-rrt: interrupted in the %u-layer run at step %u\n", layers,
            step);
    exit(CLI_EXIT_INTERRUPTED);
}

/* Mean loss on the repeated segment: predictions of tokens L+1 .. 2L-1. */
static double repeated_loss(induct_model *m, const induct_dataset *d) {
    static int32_t tok[EVAL_LOSS_SEQ * T], L[EVAL_LOSS_SEQ];
    static float losses[EVAL_LOSS_SEQ * (T - 1)];
    check(induct_dataset_batch(d, INDUCT_SPLIT_EVAL, 0, EVAL_LOSS_SEQ, T, tok, sizeof tok / 4, L,
                               EVAL_LOSS_SEQ),
          "dataset batch");
    check(induct_model_forward(m, tok, EVAL_LOSS_SEQ, T, NULL, 0, losses,
                               sizeof losses / sizeof *losses, NULL),
          "forward");
    double s = 0;
    size_t n = 0;
    for (int b = 0; b < EVAL_LOSS_SEQ; b++)
        for (int t = L[b] + 1; t < 2 * L[b]; t++, n++) s += losses[b * (T - 1) + t - 1];
    return s / n;
}

static result run(unsigned layers, unsigned steps, unsigned threads, uint64_t seed) {
    result r = {.layers = layers};
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    mc.n_layers = layers;
    mc.d_model = 64;
    mc.n_heads = 4;
    mc.n_ctx = T;
    mc.d_vocab = V;
    mc.positional = INDUCT_POS_STANDARD;
    mc.init = INDUCT_INIT_TORCH;
    mc.n_threads = threads;
    mc.seed = seed;
    induct_model *m;
    check(induct_model_new(&m, &mc), "model");

    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = V; /* tokens 0..63, L in 8..T/2, filler random: the usual induction-head data */
    rc.seed = seed + 1;
    induct_dataset *d;
    check(induct_dataset_new_rrt(&d, &rc), "dataset");

    induct_optimizer *o;
    check(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW), "optimizer");
    check(induct_optimizer_set(o, INDUCT_OPT_LR, 1e-3), "lr");

    cli_progress bar;
    cli_progress_start(&bar);
    double loss = 0;
    char label[32], detail[64];
    snprintf(label, sizeof label, "%u layer%s", layers, layers > 1 ? "s" : " ");
    for (unsigned s = 1; s <= steps; s++) {
        check(induct_train_step(o, d, 64, T, &loss), "train step");
        stop_if_interrupted(layers, s);
        snprintf(detail, sizeof detail, "%4u/%u loss %.3f", s, steps, loss);
        cli_progress_draw(&bar, label, 30, s, steps, detail);
    }
    cli_progress_end(&bar);
    r.seconds = cli_now() - bar.t0;
    r.loss = repeated_loss(m, d);
    size_t len;
    float sc[3 * 4];
    check(induct_analysis_induction_score(m, d, EVAL_SCORE_SEQ, T, sc, 12, &len), "induction");
    memcpy(r.induction, sc + (layers - 1) * 4, sizeof r.induction);
    check(induct_analysis_previous_token_score(m, d, EVAL_SCORE_SEQ, T, sc, 12, &len), "prev");
    memcpy(r.previous, sc, sizeof r.previous);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
    return r;
}

static void print_list(const float *x, int n) {
    for (int i = 0; i < n; i++) printf("%s%.2f", i ? ", " : "", x[i]);
}

static cJSON *json_list(const float *x, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(x[i]));
    return a;
}

typedef struct options {
    uint32_t steps, threads;
    uint64_t seed;
    int json;
} options;

static const options DEFAULTS = {2000, 1, 0, 0};

static void help(FILE *f) {
    fprintf(f,
            "usage: induction-rrt [options]\n"
            "\n"
            "Train attention-only transformers with 1 and with 2 layers on repeated random\n"
            "tokens (V = T = 64, d_model 64, 4 heads, batch 64, AdamW lr 1e-3) and print the\n"
            "loss on the repeated segment and the last layer's induction scores next to the\n"
            "induction-head article's figures. An induction head forms in the 2-layer model only.\n"
            "\n"
            "  --steps N      AdamW steps per model (default %u; 1 ... 10^7)\n"
            "  --threads N    threads per model (default %u; 1 ... 1024)\n"
            "  --seed N       model seed; the data use N + 1 (default %llu)\n"
            "  --json         also print the results as one JSON object (last line)\n"
            "  -h, --help     this help\n"
            "\n"
            "Exit status: 0 done, 1 failed, 2 bad command line, 130 interrupted (SIGINT/SIGTERM).\n",
            DEFAULTS.steps, DEFAULTS.threads, (unsigned long long)DEFAULTS.seed);
}

static void on_option(const char *name, const char *v, void *ud) {
    options *o = ud;
    if (!strcmp(name, "json")) o->json = 1;
    else if (!strcmp(name, "steps")) o->steps = cli_u32(name, v, 1, 10000000);
    else if (!strcmp(name, "threads")) o->threads = cli_u32(name, v, 1, 1024);
    else if (!strcmp(name, "seed")) o->seed = cli_u64(name, v, 0, UINT64_MAX - 1);
}

int main(int argc, char **argv) {
    cli_init("induction-rrt", "[options]", help);
    options opt = DEFAULTS;
    static const struct option longopts[] = {{"steps", required_argument, 0, 0},
                                             {"threads", required_argument, 0, 0},
                                             {"seed", required_argument, 0, 0},
                                             {"json", no_argument, 0, 0},
                                             {0, 0, 0, 0}};
    cli_parse(argc, argv, longopts, on_option, &opt);
    unsigned steps = opt.steps, threads = opt.threads;
    uint64_t seed = opt.seed;
    cli_signals_catch();
    printf("libinduct %s: the induction-head article's experiment, V=%d T=%d d_model=64 4 heads, "
           "%u AdamW steps\n",
           induct_version_string(), V, T, steps);
    fflush(stdout);
    result res[2] = {run(1, steps, threads, seed), run(2, steps, threads, seed)};
    static const char *article_fig[2] = {"3.63 | 0.08, 0.08, 0.08, 0.08",
                                         "0.60 | 0.79, 0.79, 0.78, 0.78"};
    printf("\nrandom guessing: ln 64 = 4.16 nats\n");
    printf("%-8s | %-26s | %-28s | %-22s | %s\n", "model", "repeated-segment loss (nats)",
           "last-layer induction scores", "layer-0 prev-token", "seconds");
    for (int i = 0; i < 2; i++) {
        printf("%u layer%s | %-26.2f | ", res[i].layers, i ? "s" : " ", res[i].loss);
        print_list(res[i].induction, 4);
        printf("       | ");
        print_list(res[i].previous, 4);
        printf("   | %.1f\n", res[i].seconds);
        printf("  article| %s\n", article_fig[i]);
    }
    if (opt.json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "experiment", "induction-rrt");
        cJSON_AddNumberToObject(root, "steps", steps);
        cJSON *models = cJSON_AddArrayToObject(root, "models");
        for (int i = 0; i < 2; i++) {
            cJSON *m = cJSON_CreateObject();
            cJSON_AddNumberToObject(m, "layers", res[i].layers);
            cJSON_AddNumberToObject(m, "loss", res[i].loss);
            cJSON_AddItemToObject(m, "induction_scores", json_list(res[i].induction, 4));
            cJSON_AddItemToObject(m, "previous_token_scores", json_list(res[i].previous, 4));
            cJSON_AddNumberToObject(m, "seconds", res[i].seconds);
            cJSON_AddItemToArray(models, m);
        }
        static const float ref_scores[2][4] = {{0.08f, 0.08f, 0.08f, 0.08f},
                                               {0.79f, 0.79f, 0.78f, 0.78f}};
        static const double ref_loss[2] = {3.63, 0.60};
        cJSON *ref = cJSON_AddArrayToObject(root, "article_reference");
        for (int i = 0; i < 2; i++) {
            cJSON *m = cJSON_CreateObject();
            cJSON_AddNumberToObject(m, "layers", i + 1);
            cJSON_AddNumberToObject(m, "loss", ref_loss[i]);
            cJSON_AddItemToObject(m, "induction_scores", json_list(ref_scores[i], 4));
            cJSON_AddItemToArray(ref, m);
        }
        char *text = cJSON_PrintUnformatted(root);
        if (!text) {
            fprintf(stderr, "induction-rrt: out of memory\n");
            return CLI_EXIT_FAILED;
        }
        printf("%s\n", text);
        cJSON_free(text);
        cJSON_Delete(root);
    }
    cli_signals_restore();
    return CLI_EXIT_OK;
}
