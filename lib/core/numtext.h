/* Locale-independent number <-> text for the JSON and metadata that checkpoints and
 * metrics logs carry (private). A host application may have set LC_NUMERIC
 * to a locale with a decimal comma; these switch the calling thread to the C locale
 * for the one conversion (POSIX 2008 uselocale), which is thread-safe. */
#ifndef INDUCT_NUMTEXT_H
#define INDUCT_NUMTEXT_H

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>

/* The shortest "%.{p}g" text, p in [p_min, 17], that reads back as exactly `v`
 * (as a float when `as_float`). `buf` holds at least 32 bytes. */
static inline void induct__fmt_double(char *buf, size_t cap, double v, int as_float) {
    locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t old = c ? uselocale(c) : (locale_t)0;
    for (int p = as_float ? 6 : 15; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, v);
        double back = strtod(buf, NULL);
        if (as_float ? (float)back == (float)v : back == v) break;
    }
    if (c) {
        uselocale(old);
        freelocale(c);
    }
}

/* strtod in the C locale; returns 1 when all of `s` is one finite number. */
static inline int induct__parse_double(const char *s, double *out) {
    locale_t c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t old = c ? uselocale(c) : (locale_t)0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (c) {
        uselocale(old);
        freelocale(c);
    }
    if (end == s || *end || v != v || v - v != 0) return 0;
    *out = v;
    return 1;
}

#endif
