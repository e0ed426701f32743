/* Version queries and the size-prefixed struct rules of the ABI (xkbcommon scheme,
 * docs/abi-policy.md): copying structs in and out, and the guard of every *_config_init. */
#include <string.h>

#include "core.h"

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

int induct__struct_in(void *dst, size_t known, size_t min_size, const void *src,
                      const char *what) {
    INDUCT_FAIL_IF(!src, INDUCT_EINVAL, "%s is NULL", what);
    size_t size;
    memcpy(&size, src, sizeof size);
    INDUCT_FAIL_IF(size < min_size || size > INDUCT__STRUCT_SIZE_CAP, INDUCT_EABI,
                   "%s.size is %zu; this library accepts %zu to %d (its own is %zu)", what,
                   size, min_size, INDUCT__STRUCT_SIZE_CAP, known);
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
    INDUCT_FAIL_IF(size < min_size || size > INDUCT__STRUCT_SIZE_CAP, INDUCT_EABI,
                   "%s.size is %zu; this library accepts %zu to %d", what, size, min_size,
                   INDUCT__STRUCT_SIZE_CAP);
    size_t n = size < known ? size : known;
    memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t),
           n - sizeof(size_t));
    if (size > known) memset((char *)dst + known, 0, size - known);
    return INDUCT_OK;
}

int induct__config_init_check(const void *cfg, size_t size, size_t min_size, const char *fn) {
    INDUCT_FAIL_IF(!cfg, INDUCT_EINVAL, "%s: cfg is NULL", fn);
    INDUCT_FAIL_IF(size < min_size || size > INDUCT__STRUCT_SIZE_CAP, INDUCT_EABI,
                   "%s: size %zu, expected %zu to %d", fn, size, min_size,
                   INDUCT__STRUCT_SIZE_CAP);
    return INDUCT_OK;
}
