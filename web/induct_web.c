/* The C the JavaScript wrapper needs besides the library itself:
 * - the layout (size and field offsets) of the size-prefixed config structs and of
 *   induct_hook as this compiler lays them out, as a JSON string, so that induct.mjs fills
 *   them by field name instead of by hand-copied offsets;
 * - one hook function (induct_hook_fn) that hands every call to JavaScript, so that
 *   JavaScript callbacks can read and write activations at any hook point (docs/hooks.md)
 *   through the library's own induct_model_run_with_hooks().
 * Everything else the wrapper calls is the library's C API (the induct_* functions of
 * induct.h), exported unchanged. */
#include <induct/induct.h>

#include <emscripten.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The JavaScript side of a hook call: Module.inductHookCall, installed by induct-api.js,
 * calls the callback registered under `id` with a Float32Array view of the activation.
 * Returns 0 to continue, nonzero to stop the pass (a callback that threw). */
EM_JS(int, induct_web_hook_js,
      (uint32_t id, const char *name, float *activation, const uint32_t *shape, uint32_t ndim), {
          return Module.inductHookCall(id, name, activation, shape, ndim);
      });

/* An induct_hook_fn whose `user` is the id of a JavaScript callback. */
static int web_hook(void *user, const char *name, float *activation, const uint32_t *shape,
                    uint32_t ndim) {
    return induct_web_hook_js((uint32_t)(uintptr_t)user, name, activation, shape, ndim);
}

/* The function pointer (a table index in WebAssembly) to put into induct_hook.fn. */
induct_hook_fn induct_web_hook_fn(void) { return web_hook; }

#define KIND(x)                                                                                    \
    _Generic((x), uint32_t: "u32", int32_t: "i32", uint64_t: "u64", double: "f64", default: "?")

#define FIELD(S, f) {#f, offsetof(S, f), KIND(((S *)0)->f)}
#define PTRFIELD(S, f) {#f, offsetof(S, f), "ptr"}

typedef struct field {
    const char *name;
    size_t offset;
    const char *kind;
} field;

static const field model_fields[] = {
    FIELD(induct_model_config, n_layers),     FIELD(induct_model_config, d_model),
    FIELD(induct_model_config, n_heads),      FIELD(induct_model_config, d_head),
    FIELD(induct_model_config, d_mlp),        FIELD(induct_model_config, n_ctx),
    FIELD(induct_model_config, d_vocab),      FIELD(induct_model_config, positional),
    FIELD(induct_model_config, layer_norm),   FIELD(induct_model_config, smeared_keys),
    FIELD(induct_model_config, n_threads),    FIELD(induct_model_config, init),
    FIELD(induct_model_config, smear_alpha_init), FIELD(induct_model_config, init_std),
    FIELD(induct_model_config, seed),         FIELD(induct_model_config, max_bytes),
    FIELD(induct_model_config, shortformer_layers),
};
static const field rrt_fields[] = {
    FIELD(induct_rrt_config, d_vocab),   FIELD(induct_rrt_config, n_repeats),
    FIELD(induct_rrt_config, min_block), FIELD(induct_rrt_config, max_block),
    FIELD(induct_rrt_config, token_lo),  FIELD(induct_rrt_config, token_hi),
    FIELD(induct_rrt_config, bos),       FIELD(induct_rrt_config, distinct_block),
    FIELD(induct_rrt_config, seed),
};
static const field kv_fields[] = {
    FIELD(induct_kv_config, d_vocab),    FIELD(induct_kv_config, token_lo),
    FIELD(induct_kv_config, token_hi),   FIELD(induct_kv_config, pair_min),
    FIELD(induct_kv_config, pair_max),   FIELD(induct_kv_config, unique_key),
    FIELD(induct_kv_config, all_positions), FIELD(induct_kv_config, seed),
};
static const field eval_fields[] = {
    FIELD(induct_eval_config, n_seq), FIELD(induct_eval_config, seq_len),
    FIELD(induct_eval_config, chunk), FIELD(induct_eval_config, early),
    FIELD(induct_eval_config, late),  FIELD(induct_eval_config, split),
    FIELD(induct_eval_config, batch_index), FIELD(induct_eval_config, pos_seed),
};

static const field hook_fields[] = {
    PTRFIELD(induct_hook, name), PTRFIELD(induct_hook, fn), PTRFIELD(induct_hook, user),
};

static size_t put_struct(char *buf, size_t cap, size_t at, const char *name, size_t size,
                         const field *f, size_t n, int last) {
    at += (size_t)snprintf(buf + at, cap - at, "\"%s\":{\"size\":%zu,\"fields\":{", name, size);
    for (size_t i = 0; i < n && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s\"%s\":[%zu,\"%s\"]", i ? "," : "",
                               f[i].name, f[i].offset, f[i].kind);
    if (at < cap) at += (size_t)snprintf(buf + at, cap - at, "}}%s", last ? "" : ",");
    return at;
}

#define PUT(S, arr, last)                                                                          \
    at = put_struct(buf, sizeof buf, at, #S, sizeof(S), arr, sizeof arr / sizeof *arr, last)

/* {"induct_model_config": {"size": N, "fields": {"n_layers": [offset, "u32"], ...}}, ...};
 * static storage. */
const char *induct_web_layout(void) {
    static char buf[4096];
    if (buf[0]) return buf;
    size_t at = (size_t)snprintf(buf, sizeof buf, "{");
    PUT(induct_model_config, model_fields, 0);
    PUT(induct_rrt_config, rrt_fields, 0);
    PUT(induct_kv_config, kv_fields, 0);
    PUT(induct_eval_config, eval_fields, 0);
    PUT(induct_hook, hook_fields, 1);
    if (at < sizeof buf) snprintf(buf + at, sizeof buf - at, "}");
    return buf;
}
