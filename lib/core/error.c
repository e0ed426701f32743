/* Status table lookups and the per-thread last-error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

/* The enum in induct.h is written out (so that each code is documented); the
 * table is what the lookups below use. Both must agree. */
#define SAME_(name, value, msg) \
    _Static_assert(INDUCT_##name == (value), "induct_status and INDUCT_STATUS_MAP differ: " #name);
INDUCT_STATUS_MAP(SAME_)
#undef SAME_
#define COUNT_(name, value, msg) +1
_Static_assert(0 INDUCT_STATUS_MAP(COUNT_) == 1 - INDUCT_STATUS_MIN_,
               "INDUCT_STATUS_MIN_ must be the last status of INDUCT_STATUS_MAP");
#undef COUNT_

static _Thread_local char last_msg[512];
static _Thread_local int last_code;

INDUCT_API const char *induct_status_name(int status) {
    switch (status) {
#define X(name, value, msg)                                                                \
    case value:                                                                            \
        return "INDUCT_" #name;
        INDUCT_STATUS_MAP(X)
#undef X
    default:
        return "INDUCT_UNKNOWN";
    }
}

INDUCT_API const char *induct_status_str(int status) {
    switch (status) {
#define X(name, value, msg)                                                                \
    case value:                                                                            \
        return msg;
        INDUCT_STATUS_MAP(X)
#undef X
    default:
        return "unknown status";
    }
}

INDUCT_API const char *induct_last_error_message(void) { return last_msg; }
INDUCT_API int induct_last_error_code(void) { return last_code; }
INDUCT_API void induct_error_clear(void) {
    last_msg[0] = '\0';
    last_code = INDUCT_OK;
}

const char *induct__errstr(int e, char *buf, size_t cap) {
    if (strerror_r(e, buf, cap) != 0) snprintf(buf, cap, "error %d", e);
    return buf;
}

int induct__fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    last_code = status;
    return status;
}
