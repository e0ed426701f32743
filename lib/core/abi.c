/* Version queries and size-prefixed struct handling (xkbcommon scheme). */
#include <string.h>

#include "induct_internal.h"

INDUCT_API unsigned induct_version_number(void) { return INDUCT_VERSION_NUMBER; }
INDUCT_API const char *induct_version_string(void) { return INDUCT_VERSION_STRING; }
INDUCT_API unsigned induct_abi_version(void) { return INDUCT_ABI_VERSION; }
INDUCT_API unsigned induct_build_features(void) {
#ifdef _OPENMP
    return INDUCT_FEATURE_OPENMP;
#else
    return 0;
#endif
}

#define STRUCT_SIZE_CAP 4096

int induct__struct_in(void *dst, size_t known, size_t min_size, const void *src,
                      const char *what) {
    INDUCT_FAIL_IF(!src, INDUCT_EINVAL, "%s is NULL", what);
    size_t size;
    memcpy(&size, src, sizeof size);
    INDUCT_FAIL_IF(size < min_size || size > STRUCT_SIZE_CAP, INDUCT_EABI,
                   "%s.size is %zu; this library accepts %zu to %d (its own is %zu)", what,
                   size, min_size, STRUCT_SIZE_CAP, known);
    const unsigned char *p = src;
    for (size_t i = known; i < size; i++)
        INDUCT_FAIL_IF(p[i] != 0, INDUCT_EABI,
                       "%s has %zu bytes but this library knows %zu: byte %zu of the "
                       "unknown tail is not zero (a newer field is set)",
                       what, size, known, i);
    size_t n = size < known ? size : known;
    memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t),
           n - sizeof(size_t));
    memcpy(dst, &known, sizeof known);
    return INDUCT_OK;
}

int induct__struct_out(void *dst, const void *src, size_t known, size_t min_size,
                       const char *what) {
    INDUCT_FAIL_IF(!dst, INDUCT_EINVAL, "%s is NULL", what);
    size_t size;
    memcpy(&size, dst, sizeof size);
    INDUCT_FAIL_IF(size < min_size || size > STRUCT_SIZE_CAP, INDUCT_EABI,
                   "%s.size is %zu; this library accepts %zu to %d", what, size, min_size,
                   STRUCT_SIZE_CAP);
    size_t n = size < known ? size : known;
    memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t),
           n - sizeof(size_t));
    if (size > known) memset((char *)dst + known, 0, size - known);
    return INDUCT_OK;
}

INDUCT_API int induct_model_config_init(induct_model_config *cfg, size_t size) {
    INDUCT_FAIL_IF(!cfg, INDUCT_EINVAL, "induct_model_config_init: cfg is NULL");
    INDUCT_FAIL_IF(size < INDUCT__MODEL_CONFIG_MIN || size > STRUCT_SIZE_CAP, INDUCT_EABI,
                   "induct_model_config_init: size %zu, expected %zu to %d", size,
                   (size_t)INDUCT__MODEL_CONFIG_MIN, STRUCT_SIZE_CAP);
    /* the defaults in a whole struct, then as much of it as the caller's size holds
     * (a caller compiled before a field was appended does not have it) */
    induct_model_config d;
    memset(&d, 0, sizeof d);
    d.n_layers = 2;
    d.d_model = 64;
    d.n_heads = 4;
    d.d_head = 0;
    d.d_mlp = 0;
    d.n_ctx = 64;
    d.d_vocab = 64;
    d.positional = INDUCT_POS_STANDARD;
    d.layer_norm = 0;
    d.smeared_keys = 0;
    d.n_threads = 1;
    d.init = INDUCT_INIT_GPT2;
    d.smear_alpha_init = 0.0;
    d.init_std = 0.02;
    d.seed = 0;
    d.shortformer_layers = 0;
    memset(cfg, 0, size);
    memcpy(cfg, &d, size < sizeof d ? size : sizeof d);
    cfg->size = size;
    return INDUCT_OK;
}

INDUCT_API int induct_rrt_config_init(induct_rrt_config *cfg, size_t size) {
    INDUCT_FAIL_IF(!cfg, INDUCT_EINVAL, "induct_rrt_config_init: cfg is NULL");
    INDUCT_FAIL_IF(size < sizeof(induct_rrt_config) || size > STRUCT_SIZE_CAP, INDUCT_EABI,
                   "induct_rrt_config_init: size %zu, expected %zu to %d", size,
                   sizeof(induct_rrt_config), STRUCT_SIZE_CAP);
    memset(cfg, 0, size);
    cfg->size = size;
    cfg->d_vocab = 64;
    cfg->n_repeats = 2;
    cfg->min_block = 8;
    cfg->max_block = 0;
    cfg->token_lo = 0;
    cfg->token_hi = 0;
    cfg->bos = -1;
    cfg->distinct_block = 0;
    cfg->seed = 0;
    return INDUCT_OK;
}
