/* Command-line plumbing shared by the example programs (examples/cli.c): option parsing
 * with getopt_long and checked numbers, --help, SIGINT/SIGTERM, a progress line and
 * atomic file writes. Not part of the library's API. */
#ifndef INDUCT_EXAMPLES_CLI_H
#define INDUCT_EXAMPLES_CLI_H

#include <induct/induct.h>

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses of every example: 0 done, 1 failed, 2 bad command line, 130 stopped by
 * SIGINT or SIGTERM (128 + SIGINT, as a shell reports a Ctrl-C). */
enum { CLI_EXIT_OK = 0, CLI_EXIT_FAILED = 1, CLI_EXIT_USAGE = 2, CLI_EXIT_INTERRUPTED = 130 };

/* The program's name for messages, its one-line synopsis ("PROG [options]" without the
 * name) and its full help text (written by `help` to the stream given: stdout for --help). */
void cli_init(const char *prog, const char *synopsis, void (*help)(FILE *f));
const char *cli_prog(void);

/* "PROG: <message>", "usage: PROG <synopsis>" and "Try 'PROG --help' for every option."
 * on stderr, then exit(CLI_EXIT_USAGE). */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2), noreturn))
#endif
void cli_usage_error(const char *fmt, ...);

/* "PROG: <what>: <status name> (<library message>)" on stderr, exit(CLI_EXIT_FAILED). */
#if defined(__GNUC__)
__attribute__((noreturn))
#endif
void cli_lib_fail(int status, const char *what);

/* Parse argv with getopt_long over `longopts` (terminated by a zero entry). --help / -h
 * is handled here (help to stdout, exit 0); an unknown option, a missing value or a
 * positional argument is a usage error. Every other option calls
 * on_option(name, value or NULL, user_data), with the option's long name. */
void cli_parse(int argc, char **argv, const struct option *longopts,
               void (*on_option)(const char *name, const char *value, void *user_data),
               void *user_data);

/* Checked numbers: the whole of `value` must be a decimal number within [lo, hi];
 * otherwise a usage error naming --`name` (no sign for the unsigned ones: "-5" is
 * refused, not wrapped around; "abc", "", "12x" and out-of-range values too). */
uint64_t cli_u64(const char *name, const char *value, uint64_t lo, uint64_t hi);
uint32_t cli_u32(const char *name, const char *value, uint32_t lo, uint32_t hi);
double cli_f64(const char *name, const char *value, double lo, double hi);
/* The index of `value` in the NULL-terminated `choices`; a usage error otherwise. */
unsigned cli_choice(const char *name, const char *value, const char *const *choices);

/* SIGINT and SIGTERM: the first one sets a flag (cli_interrupted()) and interrupts the
 * model given to cli_watch_model(), if any; a second one ends the process at once with
 * the default action. cli_signals_restore() puts the previous handlers back. */
void cli_signals_catch(void);
void cli_signals_restore(void);
void cli_watch_model(induct_model *model);
/* The signal that asked to stop (SIGINT or SIGTERM), or 0. Any thread. */
int cli_interrupted(void);

/* A progress line on stderr, redrawn in place when stderr is a terminal (at most 4
 * times a second, and always at done == total); nothing when it is not (callers print
 * occasional plain lines instead, see cli_progress_tty()). */
typedef struct cli_progress {
    int tty;
    int open; /* a line without its newline is on the terminal */
    double t0, last_draw;
} cli_progress;
void cli_progress_start(cli_progress *p);
int cli_progress_tty(const cli_progress *p);
/* "\r<label> [#####.....] <detail>  <elapsed> elapsed, ETA <eta>"; `bar_width` 0 draws
 * no bar. `detail` may be NULL. */
void cli_progress_draw(cli_progress *p, const char *label, int bar_width, double done,
                       double total, const char *detail);
/* End an open line with a newline (before printing anything else). */
void cli_progress_end(cli_progress *p);
/* Seconds as "42s", "3m07s" or "1h05m"; "?" when not finite or negative. */
void cli_fmt_duration(double seconds, char *buf, size_t cap);
/* Monotonic seconds. */
double cli_now(void);

/* Write `len` bytes to `path` atomically: a temporary file in the same directory,
 * flushed and fsync'ed, renamed over `path`. 0, or -1 with errno set (the temporary
 * file removed, `path` untouched). */
int cli_write_atomic(const char *path, const void *data, size_t len);

#endif
