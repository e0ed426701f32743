/* libFuzzer target: the config validators. A size-prefixed config struct
 * (induct_model_config, induct_rrt_config, induct_train_config, induct_eval_config or
 * induct_probe_config, chosen by the first byte) is filled from the input and handed to
 * induct_model_new(), induct_dataset_new_rrt(), induct_train(), the evaluation-set
 * analyses or the probe analyses; what they accept is then used.
 *
 * Input: byte 0 = selector (bits 0-6 modulo 5: which struct; bit 7: force `size` to the
 * struct's sizeof, else the input's own 8 bytes are the size); then the struct's bytes
 * (the rest of a 4096-byte struct buffer stays zero, or the defaults where the input
 * is shorter); for RRT, two more bytes choose the batch shape.
 *
 * The host-side policy is fixed by the harness: every model gets a memory cap
 * (max_bytes = 0 or larger than CAP becomes CAP), and induct_train's string pointers
 * are set by the harness, not by the input. Properties checked: a refused call records
 * its status; an accepted model never holds more than its cap; dataset tokens lie in
 * [0, d_vocab). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"

#define CAP ((uint64_t)1 << 20)
#define BUF 4096

static void check_rc(int rc) {
    if (rc < 0 && (induct_last_error_code() != rc || induct_last_error_message()[0] == '\0')) {
        fprintf(stderr, "%s without a matching last error\n", induct_status_name(rc));
        __builtin_trap();
    }
}

static void check_cap(const induct_model *m) {
    induct_model_config c;
    c.size = sizeof c;
    if (induct_model_get_config(m, &c) != INDUCT_OK) __builtin_trap();
    uint64_t used = induct_model_memory_used(m);
    if (c.max_bytes && used > c.max_bytes) {
        fprintf(stderr, "model holds %llu bytes, cap %llu\n", (unsigned long long)used,
                (unsigned long long)c.max_bytes);
        __builtin_trap();
    }
}

/* Overlay the input on a struct buffer that holds the defaults. */
static void overlay(unsigned char *buf, size_t known, const uint8_t *data, size_t n, int fix) {
    if (n > BUF) n = BUF;
    memcpy(buf, data, n);
    if (fix) memcpy(buf, &known, sizeof known);
}

static void fuzz_model(unsigned char *buf, const uint8_t *data, size_t n, int fix) {
    induct_model_config_init((induct_model_config *)buf, sizeof(induct_model_config));
    overlay(buf, sizeof(induct_model_config), data, n, fix);
    induct_model_config *c = (induct_model_config *)buf;
    if (c->max_bytes == 0 || c->max_bytes > CAP) c->max_bytes = CAP;
    induct_model *m = NULL;
    int rc = induct_model_new(&m, c);
    check_rc(rc);
    if ((rc == INDUCT_OK) != (m != NULL)) __builtin_trap();
    if (!m) return;
    check_cap(m);
    induct_model_config g;
    g.size = sizeof g;
    induct_model_get_config(m, &g);
    uint32_t T = g.n_ctx < 3 ? g.n_ctx : 3;
    int32_t tok[6];
    for (int i = 0; i < 6; i++) tok[i] = (int32_t)((uint32_t)i % g.d_vocab);
    double loss;
    check_rc(induct_model_backward(m, tok, 2, T, &loss));
    check_cap(m);
    induct_optimizer *o = NULL;
    rc = induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW);
    check_rc(rc);
    check_cap(m);
    induct_optimizer_free(o);
    induct_model_free(m);
}

static void fuzz_rrt(unsigned char *buf, const uint8_t *data, size_t n, int fix) {
    uint8_t shape[2] = {0, 0};
    if (n >= 2) { /* the last two bytes choose the batch shape */
        memcpy(shape, data + n - 2, 2);
        n -= 2;
    }
    induct_rrt_config_init((induct_rrt_config *)buf, sizeof(induct_rrt_config));
    overlay(buf, sizeof(induct_rrt_config), data, n, fix);
    induct_dataset *d = NULL;
    int rc = induct_dataset_new_rrt(&d, (const induct_rrt_config *)buf);
    check_rc(rc);
    if (!d) return;
    uint32_t B = 1u + shape[0] % 4u, T = 2u + shape[1];
    static int32_t tok[4 * 257], meta[4];
    rc = induct_dataset_batch(d, shape[0] >> 7, shape[0], B, T, tok, sizeof tok / sizeof *tok,
                              meta, 4);
    check_rc(rc);
    uint32_t V = induct_dataset_d_vocab(d);
    for (uint32_t i = 0; rc == INDUCT_OK && i < B * T; i++)
        if (tok[i] < 0 || (uint32_t)tok[i] >= V) {
            fprintf(stderr, "token %d at %u outside [0, %u)\n", tok[i], i, V);
            __builtin_trap();
        }
    induct_dataset_free(d);
}

static int stop_after(const induct_progress *p, void *ud) {
    (void)p;
    return ++*(int *)ud >= 3;
}

static void fuzz_train(unsigned char *buf, const uint8_t *data, size_t n, int fix) {
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    mc.n_layers = 1;
    mc.d_model = 8;
    mc.n_heads = 2;
    mc.n_ctx = 8;
    mc.d_vocab = 11;
    mc.max_bytes = CAP;
    induct_rrt_config rc_;
    induct_rrt_config_init(&rc_, sizeof rc_);
    rc_.d_vocab = 11;
    rc_.min_block = 2;
    induct_model *m = NULL;
    induct_optimizer *o = NULL;
    induct_dataset *d = NULL;
    if (induct_model_new(&m, &mc) || induct_optimizer_new(&o, m, INDUCT_OPTIM_SGD) ||
        induct_dataset_new_rrt(&d, &rc_))
        __builtin_trap();
    induct_train_config_init((induct_train_config *)buf, sizeof(induct_train_config));
    overlay(buf, sizeof(induct_train_config), data, n, fix);
    induct_train_config *tc = (induct_train_config *)buf;
    /* strings and the probe are the host's: never pointers from the input */
    tc->metrics_path = (n > 1 && (data[1] & 1)) ? "/dev/null" : NULL;
    tc->snapshot_path = NULL;
    static induct_probe_config probe;
    induct_probe_config_init(&probe, sizeof probe);
    tc->probe = (n > 1 && (data[1] & 2)) ? &probe : NULL;
    int calls = 0;
    int rc = induct_train(o, d, tc, stop_after, &calls);
    check_rc(rc);
    check_cap(m);
    induct_dataset_free(d);
    induct_optimizer_free(o);
    induct_model_free(m);
}

/* A tiny capped model for the analyses (fresh per input: analyses write its workspace
 * and ablation state). */
static induct_model *analysis_model(void) {
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    mc.n_layers = 2;
    mc.d_model = 8;
    mc.n_heads = 2;
    mc.n_ctx = 24;
    mc.d_vocab = 11;
    induct_model *m = NULL;
    if (induct_model_new(&m, &mc)) __builtin_trap();
    /* the host's policy for analyses: a workspace for chunks of up to 4 full-length
     * sequences, plus 32 KiB (8192 tokens) for evaluation sets and probes. The CPU
     * time of an analysis is linear in its set, so this also bounds the time per input
     * (an uncapped set of 5888 x 24 tokens took 44 s under ASan+UBSan+coverage). */
    static int32_t tok[4 * 24];
    if (induct_model_forward(m, tok, 4, 24, NULL, 0, NULL, 0, NULL)) __builtin_trap();
    if (induct_model_set_max_bytes(m, induct_model_memory_used(m) + 32768)) __builtin_trap();
    return m;
}

static void fuzz_eval(unsigned char *buf, const uint8_t *data, size_t n, int fix) {
    induct_eval_config_init((induct_eval_config *)buf, sizeof(induct_eval_config));
    overlay(buf, sizeof(induct_eval_config), data, n, fix);
    induct_eval_config *ec = (induct_eval_config *)buf;
    /* the positions are the host's: never a pointer from the input. Up to 8 indices, their
     * values (often out of range or out of order) and count from the input; sometimes a
     * buffer with a count of 0 or none with a count (both refused) */
    static uint32_t host_pos[8];
    for (size_t i = 0; i < 8; i++) host_pos[i] = n > 2 + i ? data[2 + i] % 40u : (uint32_t)i;
    uint32_t k = ec->n_positions % 9u;
    switch (n > 1 ? data[1] % 3 : 0) {
    case 0: ec->positions = NULL, ec->n_positions = 0; break;  /* every position */
    case 1: ec->positions = host_pos, ec->n_positions = k; break; /* k = 0: refused */
    default: ec->positions = NULL, ec->n_positions = k ? k : 1; break; /* refused */
    }
    induct_model *m = analysis_model();
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 11;
    rc.min_block = 1;
    induct_dataset *d = NULL;
    if (induct_dataset_new_rrt(&d, &rc)) __builtin_trap();
    double icl;
    check_rc(induct_analysis_icl_score(m, d, ec, &icl));
    check_cap(m);
    float lbp[32];
    size_t len;
    check_rc(induct_analysis_loss_by_position(m, d, ec, lbp, 32, &len));
    check_cap(m);
    float attr[4];
    check_rc(induct_analysis_ablation_attribution(m, d, ec, INDUCT_ABLATE_ZERO, attr, 4, &len,
                                                  &icl));
    check_cap(m);
    induct_dataset_free(d);
    induct_model_free(m);
}

static void fuzz_probe(unsigned char *buf, const uint8_t *data, size_t n, int fix) {
    induct_probe_config_init((induct_probe_config *)buf, sizeof(induct_probe_config));
    overlay(buf, sizeof(induct_probe_config), data, n, fix);
    const induct_probe_config *pc = (const induct_probe_config *)buf;
    induct_model *m = analysis_model();
    float out[4];
    size_t len;
    check_rc(induct_analysis_prefix_matching(m, pc, out, 4, &len));
    check_cap(m);
    check_rc(induct_analysis_copying(m, pc, out, 4, &len));
    check_cap(m);
    static int32_t tok[4096];
    int rc = induct_analysis_probe_tokens(m, pc, 0, tok, 4096, &len);
    check_rc(rc);
    for (size_t i = 0; rc == INDUCT_OK && i < len; i++)
        if (tok[i] < 0 || tok[i] >= 11) __builtin_trap();
    induct_model_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static unsigned char buf[BUF + 64];
    memset(buf, 0, sizeof buf);
    induct_error_clear();
    int fix = data[0] >> 7;
    switch ((data[0] & 0x7f) % 5) {
    case 0: fuzz_model(buf, data + 1, size - 1, fix); break;
    case 1: fuzz_rrt(buf, data + 1, size - 1, fix); break;
    case 2: fuzz_train(buf, data + 1, size - 1, fix); break;
    case 3: fuzz_eval(buf, data + 1, size - 1, fix); break;
    default: fuzz_probe(buf, data + 1, size - 1, fix); break;
    }
    return 0;
}
