/* Byte-level tokenizer: the id convention of the byte-level text datasets
 * (text.c): byte b is id b, the optional BOS is INDUCT_TEXT_BOS (256). */
#include <string.h>

#include "data.h"

INDUCT_API int induct_text_encode(const void *bytes, size_t n, uint32_t bos, int32_t *out,
                                  size_t out_cap, size_t *out_len) {
    INDUCT_FAIL_IF(!bytes && n, INDUCT_EINVAL, "induct_text_encode: bytes is NULL (n = %zu)", n);
    INDUCT_FAIL_IF(bos > 1, INDUCT_EINVAL, "induct_text_encode: bos must be 0 or 1, got %u", bos);
    INDUCT_FAIL_IF(n > (size_t)INT32_MAX - bos, INDUCT_ELIMIT,
                   "induct_text_encode: %zu bytes (+%u BOS) exceed %d tokens", n, bos, INT32_MAX);
    size_t need = n + bos;
    if (out_len) *out_len = need;
    INDUCT_FAIL_IF((!out && need) || out_cap < need, INDUCT_EBUFSIZE,
                   "induct_text_encode: needs %zu ids, buffer holds %zu", need, out ? out_cap : 0);
    const unsigned char *b = bytes;
    if (bos) out[0] = INDUCT_TEXT_BOS;
    for (size_t i = 0; i < n; i++) out[bos + i] = b[i];
    return INDUCT_OK;
}

INDUCT_API int induct_text_decode(const int32_t *tokens, size_t n, uint32_t bos, void *out,
                                  size_t out_cap, size_t *out_len) {
    INDUCT_FAIL_IF(!tokens && n, INDUCT_EINVAL, "induct_text_decode: tokens is NULL (n = %zu)",
                   n);
    INDUCT_FAIL_IF(bos > 1, INDUCT_EINVAL, "induct_text_decode: bos must be 0 or 1, got %u", bos);
    int32_t hi = bos ? INDUCT_TEXT_BOS : 255;
    size_t need = 0;
    for (size_t i = 0; i < n; i++) {
        INDUCT_FAIL_IF(tokens[i] < 0 || tokens[i] > hi, INDUCT_ERANGE,
                       "induct_text_decode: id %d at index %zu is not a byte-level id (0 to %d%s)",
                       tokens[i], i, hi, bos ? ", 256 = BOS" : "; 256 is BOS only with bos = 1");
        need += tokens[i] != INDUCT_TEXT_BOS;
    }
    if (out_len) *out_len = need;
    INDUCT_FAIL_IF((!out && need) || out_cap < need, INDUCT_EBUFSIZE,
                   "induct_text_decode: needs %zu bytes, buffer holds %zu", need,
                   out ? out_cap : 0);
    unsigned char *o = out;
    for (size_t i = 0, j = 0; i < n; i++)
        if (tokens[i] != INDUCT_TEXT_BOS) o[j++] = (unsigned char)tokens[i];
    return INDUCT_OK;
}
