/* kv-retrieval: the key-value retrieval experiment of the in-context learning blog post
 * on induction heads ("the moment an ability switches on"), its three tables, next to the
 * task's exact ceiling.
 *
 * Task: a context of 24 tokens over 64 ids, one [key][value] pair in the middle
 * (key position uniform in 4..19), the same key again at the last position; the
 * model must predict the value there. Keys, values and filler are uniform i.i.d.,
 * so the key can also occur by chance in the filler: the exact Bayes-optimal
 * accuracy (the ceiling) is printed with the results.
 *
 * Models (the post names only T=24, vocab 64, attention-only and the step counts;
 * the rest is our choice, the same as examples/induction_rrt.c): d_model 64, 4 heads,
 * learned positions, no LayerNorm, PyTorch's default initialisation, batch 64, AdamW
 * lr 1e-3 (weight decay 0.01), 6000 steps. As in the post, the loss is the
 * cross-entropy at the answer position only (the KV dataset's default objective);
 * --all-positions trains on the mean next-token loss over every position instead,
 * where the 22 unpredictable positions per row drown the answer's gradient.
 *
 *   A: accuracy of the 2-layer model at steps 0, 100, 200, 300, 400, 600, 6000;
 *   B: final accuracy of 1, 2 and 3 layers;
 *   C: attention from the last position to the value position at steps 0, 200, 300,
 *      600, 2200 (the head that attends most at the end, averaged over the eval set).
 *
 * Accuracy is evaluated every 10 steps on the first 512 rows of the fixed evaluation
 * set (for the 10 % / 80 % crossings) and on all --eval rows (default 2048) at the
 * tables' steps and at the end.
 *
 * --quick runs 2500 steps instead of 6000.
 *
 * Usage: kv-retrieval [--steps N | --quick] [--eval N] [--threads N] [--seed N]
 *                     [--all-positions] [--lr X] [--only L] [--json]
 * (--only L trains just the L-layer model and prints its accuracy curve.) --help lists
 * every option.
 */
#include <induct/induct.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define V 64
#define CTX 24
#define SEQ (CTX + 1) /* context + the answer token */
#define D_MODEL 64
#define HEADS 4
#define BATCH 64
#define MAX_LAYERS 3
#define CURVE_EVERY 10
#define CURVE_ROWS 512

static const unsigned A_STEPS[] = {0, 100, 200, 300, 400, 600, 6000};
static const double A_POST[] = {1.5, 4.9, 8.5, 18.1, 75.3, 87.3, 87.6};
static const unsigned C_STEPS[] = {0, 200, 300, 600, 2200};
static const double C_POST[] = {4.2, 21.5, 40.5, 87.6, 79.6};
static const double B_POST[] = {10.2, 87.6, 87.1};
#define NA (sizeof A_STEPS / sizeof *A_STEPS)
#define NC (sizeof C_STEPS / sizeof *C_STEPS)

typedef struct run_result {
    unsigned layers;
    double final_acc, seconds;
    unsigned n_curve;
    unsigned *curve_step;
    double *curve_acc;
    float *curve_att;  /* [n_curve][layers*HEADS] */
    unsigned best_l, best_h;
} run_result;

static void check(int rc, const char *what) {
    if (rc != INDUCT_OK) cli_lib_fail(rc, what);
}

/* On a terminal a bar, otherwise a line every 1000 steps. */
static void progress(cli_progress *bar, unsigned layers, unsigned step, unsigned steps,
                     double acc) {
    if (!cli_progress_tty(bar)) {
        if (step % 1000 == 0 || step == steps)
            fprintf(stderr, "%u layer%s: step %u/%u, accuracy %.1f%%, %.0f s\n", layers,
                    layers > 1 ? "s" : "", step, steps, 100 * acc, cli_now() - bar->t0);
        return;
    }
    char label[32], detail[64];
    snprintf(label, sizeof label, "%u layer%s", layers, layers > 1 ? "s" : " ");
    snprintf(detail, sizeof detail, "%5u/%u acc %5.1f%%", step, steps, 100 * acc);
    cli_progress_draw(bar, label, 30, step, steps, detail);
}

/* Rows to evaluate at step s: all of them at the tables' steps and the end, the first
 * CURVE_ROWS every CURVE_EVERY steps, none otherwise. */
static unsigned eval_rows(unsigned s, unsigned steps, unsigned n_eval) {
    int table = s == steps;
    for (unsigned i = 0; i < NA; i++) table |= A_STEPS[i] == s;
    for (unsigned i = 0; i < NC; i++) table |= C_STEPS[i] == s;
    if (table) return n_eval;
    if (s % CURVE_EVERY == 0) return n_eval < CURVE_ROWS ? n_eval : CURVE_ROWS;
    return 0;
}

static double g_lr = 1e-3;

static run_result run(unsigned layers, unsigned steps, unsigned n_eval, unsigned threads,
                      uint64_t seed, const induct_dataset *d) {
    run_result r = {.layers = layers};
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    mc.n_layers = layers;
    mc.d_model = D_MODEL;
    mc.n_heads = HEADS;
    mc.n_ctx = SEQ;
    mc.d_vocab = V;
    mc.positional = INDUCT_POS_STANDARD;
    mc.init = INDUCT_INIT_TORCH;
    mc.n_threads = threads;
    mc.seed = seed + layers;
    induct_model *m;
    check(induct_model_new(&m, &mc), "model");
    induct_optimizer *o;
    check(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW), "optimizer");
    check(induct_optimizer_set(o, INDUCT_OPT_LR, g_lr), "lr");

    size_t cap = steps / CURVE_EVERY + NC + 2, nh = (size_t)layers * HEADS;
    r.curve_step = calloc(cap, sizeof *r.curve_step);
    r.curve_acc = calloc(cap, sizeof *r.curve_acc);
    r.curve_att = calloc(cap * nh, sizeof *r.curve_att);
    if (!r.curve_step || !r.curve_acc || !r.curve_att) {
        fprintf(stderr, "kv-retrieval: out of memory\n");
        exit(1);
    }
    cli_progress bar;
    cli_progress_start(&bar);
    double acc = 0;
    for (unsigned s = 0;; s++) {
        if (cli_interrupted()) {
            cli_progress_end(&bar);
            fprintf(stderr, "kv-retrieval: interrupted in the %u-layer run at step %u\n",
                    layers, s);
            exit(CLI_EXIT_INTERRUPTED);
        }
        unsigned rows = eval_rows(s, steps, n_eval);
        if (rows) {
            size_t len;
            check(induct_analysis_kv_accuracy(m, d, rows, SEQ, &acc), "kv accuracy");
            check(induct_analysis_kv_attention(m, d, rows, SEQ, r.curve_att + r.n_curve * nh,
                                               nh, &len),
                  "kv attention");
            r.curve_step[r.n_curve] = s;
            r.curve_acc[r.n_curve++] = acc;
            progress(&bar, layers, s, steps, acc);
        }
        if (s == steps) break;
        check(induct_train_step(o, d, BATCH, SEQ, NULL), "train step");
    }
    cli_progress_end(&bar);
    r.seconds = cli_now() - bar.t0;
    r.final_acc = acc;
    /* the head that attends most to the value position at the end */
    const float *last = r.curve_att + (r.n_curve - 1) * nh;
    size_t best = 0;
    for (size_t i = 1; i < nh; i++)
        if (last[i] > last[best]) best = i;
    r.best_l = (unsigned)(best / HEADS);
    r.best_h = (unsigned)(best % HEADS);
    induct_optimizer_free(o);
    induct_model_free(m);
    return r;
}

/* Value of the curve at step s, or NAN if it was not evaluated (a shorter run). */
static int curve_index(const run_result *r, unsigned s) {
    for (unsigned i = 0; i < r->n_curve; i++)
        if (r->curve_step[i] == s) return (int)i;
    return -1;
}

static long first_reach(const run_result *r, double level) {
    for (unsigned i = 0; i < r->n_curve; i++)
        if (r->curve_acc[i] >= level) return (long)r->curve_step[i];
    return -1;
}

static cJSON *jnum(double x) { return isnan(x) ? cJSON_CreateNull() : cJSON_CreateNumber(x); }

typedef struct options {
    uint32_t steps, threads, n_eval, only;
    uint64_t seed;
    double lr;
    int json, all_positions;
} options;

static const options DEFAULTS = {6000, 1, 2048, 0, 0, 1e-3, 0, 0};

static void help(FILE *f) {
    fprintf(f,
            "usage: kv-retrieval [options]\n"
            "\n"
            "Key-value retrieval: a context of %d tokens over %d ids with one [key][value]\n"
            "pair, the key again at the end; the model must answer the value. Trains\n"
            "attention-only models with 1, 2 and 3 layers (d_model %d, %d heads, batch %d, AdamW)\n"
            "and prints the blog post's three tables next to ours and the task's exact ceiling.\n"
            "\n"
            "  --steps N        AdamW steps per model (default %u; 1 ... 10^7)\n"
            "  --quick          2500 steps (about 6 minutes on 2 cores)\n"
            "  --eval N         evaluation sequences (default %u; 1 ... 10^6)\n"
            "  --threads N      threads per model (default %u; 1 ... 1024)\n"
            "  --seed N         seed of the models (+ layers) and of the data (+ 100) (default %llu)\n"
            "  --lr X           AdamW learning rate (default %g; (0, 10])\n"
            "  --all-positions  train on the next-token loss at every position, not only the answer\n"
            "  --only L         train only the L-layer model (1 ... %d) and print its accuracy curve\n"
            "  --json           also print the results as one JSON object (last line)\n"
            "  -h, --help       this help\n"
            "\n"
            "Exit status: 0 done, 1 failed, 2 bad command line, 130 interrupted (SIGINT/SIGTERM).\n",
            CTX, V, D_MODEL, HEADS, BATCH, DEFAULTS.steps, DEFAULTS.n_eval, DEFAULTS.threads,
            (unsigned long long)DEFAULTS.seed, DEFAULTS.lr, MAX_LAYERS);
}

static void on_option(const char *name, const char *v, void *ud) {
    options *o = ud;
    if (!strcmp(name, "json")) o->json = 1;
    else if (!strcmp(name, "all-positions")) o->all_positions = 1;
    else if (!strcmp(name, "quick")) o->steps = 2500;
    else if (!strcmp(name, "lr")) {
        o->lr = cli_f64(name, v, 0, 10);
        if (!(o->lr > 0)) cli_usage_error("--lr must be > 0, got %s", v);
    } else if (!strcmp(name, "only")) o->only = cli_u32(name, v, 1, MAX_LAYERS);
    else if (!strcmp(name, "steps")) o->steps = cli_u32(name, v, 1, 10000000);
    else if (!strcmp(name, "eval")) o->n_eval = cli_u32(name, v, 1, 1000000);
    else if (!strcmp(name, "threads")) o->threads = cli_u32(name, v, 1, 1024);
    else if (!strcmp(name, "seed")) o->seed = cli_u64(name, v, 0, UINT64_MAX - 100);
}

int main(int argc, char **argv) {
    cli_init("kv-retrieval", "[options]", help);
    options opt = DEFAULTS;
    static const struct option longopts[] = {
        {"steps", required_argument, 0, 0}, {"quick", no_argument, 0, 0},
        {"eval", required_argument, 0, 0},  {"threads", required_argument, 0, 0},
        {"seed", required_argument, 0, 0},  {"lr", required_argument, 0, 0},
        {"only", required_argument, 0, 0},  {"all-positions", no_argument, 0, 0},
        {"json", no_argument, 0, 0},        {0, 0, 0, 0}};
    cli_parse(argc, argv, longopts, on_option, &opt);
    unsigned steps = opt.steps, threads = opt.threads, n_eval = opt.n_eval, only = opt.only;
    uint64_t seed = opt.seed;
    int json = opt.json, all_positions = opt.all_positions;
    g_lr = opt.lr;
    setvbuf(stdout, NULL, _IOLBF, 0);
    cli_signals_catch();
    induct_kv_config kc;
    induct_kv_config_init(&kc, sizeof kc);
    kc.d_vocab = V;
    kc.pair_min = 4;
    kc.pair_max = 19;
    kc.seed = seed + 100;
    kc.all_positions = (uint32_t)all_positions;
    induct_dataset *d;
    check(induct_dataset_new_kv(&d, &kc), "dataset");
    double ceiling;
    check(induct_dataset_kv_ceiling(d, SEQ, &ceiling), "ceiling");

    printf("libinduct %s: the blog post's key-value retrieval, context %d, vocab %d, key at 4..19;\n"
           "attention-only, d_model %d, %d heads, batch %d, AdamW lr 1e-3, %u steps, loss at %s; "
           "eval %u sequences\n",
           induct_version_string(), CTX, V, D_MODEL, HEADS, BATCH, steps,
           all_positions ? "every position" : "the answer position", n_eval);
    printf("chance 1/64 = 1.6%%; uniform attention 1/24 = 4.2%%; ceiling (exact Bayes-optimal "
           "accuracy of this generator) = %.2f%% (the post's generator: 89.5%%)\n\n",
           100 * ceiling);

    if (only >= 1 && only <= MAX_LAYERS) {
        run_result r = run(only, steps, n_eval, threads, seed, d);
        for (unsigned i = 0; i < r.n_curve; i++)
            if (r.curve_step[i] % 100 == 0 || i + 1 == r.n_curve)
                printf("step %5u  accuracy %5.1f%%\n", r.curve_step[i], 100 * r.curve_acc[i]);
        size_t nh = (size_t)only * HEADS, bi = r.best_l * HEADS + r.best_h;
        printf("%u layer%s: final accuracy %.2f%% (ceiling %.2f%%); first step >= 10%%: %ld, "
               ">= 80%%: %ld; head L%uH%u attention on the value %.3f -> %.3f; %.1f s\n",
               only, only > 1 ? "s" : "", 100 * r.final_acc, 100 * ceiling,
               first_reach(&r, 0.10), first_reach(&r, 0.80), r.best_l, r.best_h,
               r.curve_att[bi], r.curve_att[(r.n_curve - 1) * nh + bi], r.seconds);
        return 0;
    }
    run_result res[MAX_LAYERS];
    for (unsigned l = 1; l <= MAX_LAYERS; l++) res[l - 1] = run(l, steps, n_eval, threads, seed, d);
    const run_result *two = &res[1];

    printf("A. accuracy of the 2-layer model (%%)\n%-10s", "step");
    for (size_t i = 0; i < NA; i++) printf(" | %6u", A_STEPS[i] == 6000 ? steps : A_STEPS[i]);
    printf("\n%-10s", "ours");
    for (size_t i = 0; i < NA; i++) {
        int k = curve_index(two, A_STEPS[i] == 6000 ? steps : A_STEPS[i]);
        if (k < 0) printf(" | %6s", "-");
        else printf(" | %6.1f", 100 * two->curve_acc[k]);
    }
    printf("\n%-10s", "post");
    for (size_t i = 0; i < NA; i++) printf(" | %6.1f", A_POST[i]);
    long s10 = first_reach(two, 0.10), s80 = first_reach(two, 0.80);
    printf("\nfirst step >= 10%%: %ld, >= 80%%: %ld (post: 250, 450); evaluated every %d steps on "
           "%d rows\n\n",
           s10, s80, CURVE_EVERY, CURVE_ROWS);

    printf("B. final accuracy by number of attention layers (%%)\n%-10s | %6s | %6s | %6s\n",
           "layers", "1", "2", "3");
    printf("%-10s | %6.1f | %6.1f | %6.1f\n", "ours", 100 * res[0].final_acc,
           100 * res[1].final_acc, 100 * res[2].final_acc);
    printf("%-10s | %6.1f | %6.1f | %6.1f\n\n", "post", B_POST[0], B_POST[1], B_POST[2]);

    size_t nh2 = 2 * HEADS, bi = two->best_l * HEADS + two->best_h;
    printf("C. 2 layers: attention from the last position to the value position (%%), head "
           "L%uH%u\n%-10s",
           two->best_l, two->best_h, "step");
    for (size_t i = 0; i < NC; i++) printf(" | %6u", C_STEPS[i]);
    printf(" | %6u\n%-10s", steps, "ours");
    for (size_t i = 0; i <= NC; i++) {
        int k = curve_index(two, i < NC ? C_STEPS[i] : steps);
        if (k < 0) printf(" | %6s", "-");
        else printf(" | %6.1f", 100 * two->curve_att[k * nh2 + bi]);
    }
    printf("\n%-10s", "accuracy");
    for (size_t i = 0; i <= NC; i++) {
        int k = curve_index(two, i < NC ? C_STEPS[i] : steps);
        if (k < 0) printf(" | %6s", "-");
        else printf(" | %6.1f", 100 * two->curve_acc[k]);
    }
    printf("\n%-10s", "post att.");
    for (size_t i = 0; i < NC; i++) printf(" | %6.1f", C_POST[i]);
    printf(" | %6s\n\n", "-");

    /* the post's claims, as checks */
    double att0 = two->curve_att[bi], attN = two->curve_att[(two->n_curve - 1) * nh2 + bi];
    int ok_two = res[1].final_acc >= 0.95 * ceiling;
    int ok_one = res[0].final_acc <= 0.25;
    int ok_three = fabs(res[2].final_acc - res[1].final_acc) <= 0.03;
    int ok_sharp = s10 > 0 && s80 > 0 && (s80 - s10) < s10 / 2.0;
    int ok_att = attN >= 0.8;
    printf("checks: 2 layers >= 95%% of the ceiling (%.1f%% of %.1f%%): %s\n",
           100 * res[1].final_acc, 100 * ceiling, ok_two ? "yes" : "NO");
    printf("        1 layer <= 25%% (%.1f%%): %s\n", 100 * res[0].final_acc, ok_one ? "yes" : "NO");
    printf("        3 layers within 3 points of 2 (%.1f vs %.1f): %s\n", 100 * res[2].final_acc,
           100 * res[1].final_acc, ok_three ? "yes" : "NO");
    printf("        sharp switch: 10%%->80%% took %ld steps, reaching 10%% took %ld: %s\n",
           s80 - s10, s10, ok_sharp ? "yes" : "NO");
    printf("        best head's attention on the value %.3f -> %.3f (1/24 = %.3f; want >= 0.8): "
           "%s\n",
           att0, attN, 1.0 / CTX, ok_att ? "yes" : "NO");
    printf("time: %.1f s, %.1f s, %.1f s for 1, 2, 3 layers\n", res[0].seconds, res[1].seconds,
           res[2].seconds);

    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "experiment", "kv-retrieval");
        cJSON_AddNumberToObject(root, "context", CTX);
        cJSON_AddNumberToObject(root, "d_vocab", V);
        cJSON_AddNumberToObject(root, "steps", steps);
        cJSON_AddStringToObject(root, "loss", all_positions ? "all_positions" : "answer_position");
        cJSON_AddNumberToObject(root, "eval_sequences", n_eval);
        cJSON_AddNumberToObject(root, "ceiling", ceiling);
        cJSON_AddStringToObject(root, "ceiling_method", "exact");
        cJSON *ta = cJSON_AddObjectToObject(root, "table_a");
        cJSON *a_steps = cJSON_AddArrayToObject(ta, "steps");
        cJSON *a_acc = cJSON_AddArrayToObject(ta, "accuracy");
        cJSON *a_ref = cJSON_AddArrayToObject(ta, "post_accuracy");
        for (size_t i = 0; i < NA; i++) {
            unsigned st = A_STEPS[i] == 6000 ? steps : A_STEPS[i];
            int k = curve_index(two, st);
            cJSON_AddItemToArray(a_steps, cJSON_CreateNumber(st));
            cJSON_AddItemToArray(a_acc, jnum(k < 0 ? NAN : two->curve_acc[k]));
            cJSON_AddItemToArray(a_ref, cJSON_CreateNumber(A_POST[i] / 100));
        }
        cJSON_AddNumberToObject(ta, "first_step_10", (double)s10);
        cJSON_AddNumberToObject(ta, "first_step_80", (double)s80);
        cJSON *tb = cJSON_AddObjectToObject(root, "table_b");
        cJSON *b_layers = cJSON_AddArrayToObject(tb, "layers");
        cJSON *b_acc = cJSON_AddArrayToObject(tb, "accuracy");
        cJSON *b_ref = cJSON_AddArrayToObject(tb, "post_accuracy");
        cJSON *b_sec = cJSON_AddArrayToObject(tb, "seconds");
        for (int l = 0; l < MAX_LAYERS; l++) {
            cJSON_AddItemToArray(b_layers, cJSON_CreateNumber(l + 1));
            cJSON_AddItemToArray(b_acc, jnum(res[l].final_acc));
            cJSON_AddItemToArray(b_ref, cJSON_CreateNumber(B_POST[l] / 100));
            cJSON_AddItemToArray(b_sec, jnum(res[l].seconds));
        }
        cJSON *tcj = cJSON_AddObjectToObject(root, "table_c");
        cJSON *head = cJSON_AddArrayToObject(tcj, "head");
        cJSON_AddItemToArray(head, cJSON_CreateNumber(two->best_l));
        cJSON_AddItemToArray(head, cJSON_CreateNumber(two->best_h));
        cJSON *c_steps = cJSON_AddArrayToObject(tcj, "steps");
        cJSON *c_att = cJSON_AddArrayToObject(tcj, "attention");
        cJSON *c_ref = cJSON_AddArrayToObject(tcj, "post_attention");
        for (size_t i = 0; i <= NC; i++) {
            unsigned st = i < NC ? C_STEPS[i] : steps;
            int k = curve_index(two, st);
            cJSON_AddItemToArray(c_steps, cJSON_CreateNumber(st));
            cJSON_AddItemToArray(c_att, jnum(k < 0 ? NAN : two->curve_att[k * nh2 + bi]));
            cJSON_AddItemToArray(c_ref, jnum(i < NC ? C_POST[i] / 100 : NAN));
        }
        cJSON *checks = cJSON_AddObjectToObject(root, "checks");
        cJSON_AddBoolToObject(checks, "two_layers_95pct_ceiling", ok_two);
        cJSON_AddBoolToObject(checks, "one_layer_le_25pct", ok_one);
        cJSON_AddBoolToObject(checks, "three_within_3pts", ok_three);
        cJSON_AddBoolToObject(checks, "sharp_switch", ok_sharp);
        cJSON_AddBoolToObject(checks, "attention_ge_0_8", ok_att);
        char *text = cJSON_PrintUnformatted(root);
        if (!text) {
            fprintf(stderr, "kv-retrieval: out of memory\n");
            return CLI_EXIT_FAILED;
        }
        printf("%s\n", text);
        cJSON_free(text);
        cJSON_Delete(root);
    }
    for (unsigned l = 0; l < MAX_LAYERS; l++) {
        free(res[l].curve_step);
        free(res[l].curve_acc);
        free(res[l].curve_att);
    }
    induct_dataset_free(d);
    return 0;
}
