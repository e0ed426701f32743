/* libFuzzer target: the safetensors loaders (model and optimizer state).
 *
 * The input is a checkpoint file's bytes, read through the loaders' in-memory entry
 * point (the same validation and reads as induct_model_load() on a file). A loaded
 * model is then used the way a host would use it: a forward pass, an optimizer loaded
 * from the same bytes, one training step. Every failure must be a clean status with a
 * message; sanitizers and libFuzzer's malloc limit report anything else.
 * Seeds: tests/fuzz/checkpoint/ (made by gen_seeds.c). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "train/train.h"

/* Memory a host would grant a model it loaded from an untrusted file. */
#define HOST_CAP ((uint64_t)64 << 20)

static void expect_failure_recorded(int rc) {
    /* a failing call names its status and leaves a message */
    if (rc < 0 && (induct_last_error_code() != rc || induct_last_error_message()[0] == '\0')) {
        fprintf(stderr, "status %s without a matching last error (%s: '%s')\n",
                induct_status_name(rc), induct_status_name(induct_last_error_code()),
                induct_last_error_message());
        __builtin_trap();
    }
}

/* A small fixed model whose optimizer state the input may hold (tests the optimizer
 * loader against shapes the file does not control). */
static induct_model *fixed_model(void) {
    static induct_model *m;
    if (!m) {
        induct_model_config c;
        induct_model_config_init(&c, sizeof c);
        c.n_layers = 1;
        c.d_model = 8;
        c.n_heads = 2;
        c.n_ctx = 8;
        c.d_vocab = 11;
        if (induct_model_new(&m, &c) != INDUCT_OK) __builtin_trap();
    }
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    induct_error_clear();
    induct_model *m = NULL;
    int rc = induct__model_load_mem(&m, data, size);
    expect_failure_recorded(rc);
    if ((rc == INDUCT_OK) != (m != NULL)) __builtin_trap();
    if (m) {
        induct_model_config c;
        c.size = sizeof c;
        if (induct_model_get_config(m, &c) != INDUCT_OK) __builtin_trap();
        /* the host caps what the model may grow to from here on */
        rc = induct_model_set_max_bytes(m, HOST_CAP);
        expect_failure_recorded(rc);
        uint32_t T = c.n_ctx < 4 ? c.n_ctx : 4;
        int32_t tok[8] = {0};
        for (uint32_t i = 0; i < 2 * T; i++) tok[i] = (int32_t)(i % c.d_vocab);
        double loss;
        expect_failure_recorded(induct_model_forward(m, tok, 2, T, NULL, 0, NULL, 0, &loss));
        induct_optimizer *o = NULL;
        rc = induct__optimizer_load_mem(&o, m, data, size);
        expect_failure_recorded(rc);
        if (o) expect_failure_recorded(induct_train_step_tokens(o, tok, 2, T, &loss));
        induct_optimizer_free(o);
        induct_model_free(m);
    }
    induct_optimizer *o = NULL;
    rc = induct__optimizer_load_mem(&o, fixed_model(), data, size);
    expect_failure_recorded(rc);
    induct_optimizer_free(o);
    return 0;
}
