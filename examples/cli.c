/* Command-line plumbing shared by the example programs: see cli.h. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *g_prog = "example";
static const char *g_synopsis = "[options]";
static void (*g_help)(FILE *f);

void cli_init(const char *prog, const char *synopsis, void (*help)(FILE *f)) {
    g_prog = prog;
    g_synopsis = synopsis;
    g_help = help;
}

const char *cli_prog(void) { return g_prog; }

void cli_usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", g_prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: %s %s\nTry '%s --help' for every option.\n", g_prog, g_synopsis,
            g_prog);
    exit(CLI_EXIT_USAGE);
}

void cli_lib_fail(int status, const char *what) {
    fprintf(stderr, "%s: %s: %s (%s)\n", g_prog, what, induct_status_name(status),
            induct_last_error_message());
    exit(CLI_EXIT_FAILED);
}

void cli_parse(int argc, char **argv, const struct option *longopts,
               void (*on_option)(const char *name, const char *value, void *user_data),
               void *user_data) {
    /* getopt_long wants its own table: ours plus --help, values returned as the index */
    size_t n = 0;
    while (longopts[n].name) n++;
    struct option *opts = calloc(n + 2, sizeof *opts);
    if (!opts) {
        fprintf(stderr, "%s: out of memory\n", g_prog);
        exit(CLI_EXIT_FAILED);
    }
    for (size_t i = 0; i < n; i++) {
        opts[i] = longopts[i];
        opts[i].flag = NULL;
        opts[i].val = 1000 + (int)i;
    }
    opts[n] = (struct option){"help", no_argument, NULL, 'h'};
    opterr = 0; /* our messages, with the program's name and the --help hint */
    optind = 1;
    for (;;) {
        int prev = optind;
        int c = getopt_long(argc, argv, ":h", opts, NULL);
        if (c == -1) break;
        if (c == 'h') {
            if (g_help) g_help(stdout);
            free(opts);
            exit(CLI_EXIT_OK);
        }
        const char *arg = prev < argc ? argv[prev] : "?";
        if (c == ':') cli_usage_error("%s needs a value", arg);
        if (c == '?') cli_usage_error("unknown flag '%s'", arg);
        on_option(opts[c - 1000].name, optarg, user_data);
    }
    if (optind < argc) cli_usage_error("unexpected argument '%s'", argv[optind]);
    free(opts);
}

uint64_t cli_u64(const char *name, const char *value, uint64_t lo, uint64_t hi) {
    const char *v = value ? value : "";
    if (*v < '0' || *v > '9') /* strtoull would accept "-5" as 2^64 - 5, and " 5", "+5" */
        cli_usage_error("--%s needs a non-negative integer in [%llu, %llu], got '%s'", name,
                        (unsigned long long)lo, (unsigned long long)hi, v);
    errno = 0;
    char *end = NULL;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end) cli_usage_error("--%s needs a non-negative integer, got '%s'", name, v);
    if (errno == ERANGE || x < lo || x > hi)
        cli_usage_error("--%s must be in [%llu, %llu], got %s", name, (unsigned long long)lo,
                        (unsigned long long)hi, v);
    return x;
}

uint32_t cli_u32(const char *name, const char *value, uint32_t lo, uint32_t hi) {
    return (uint32_t)cli_u64(name, value, lo, hi);
}

double cli_f64(const char *name, const char *value, double lo, double hi) {
    const char *v = value ? value : "";
    errno = 0;
    char *end = NULL;
    double x = strtod(v, &end);
    if (!*v || *end || end == v || errno == ERANGE || !isfinite(x))
        cli_usage_error("--%s needs a number (finite), got '%s'", name, v);
    if (x < lo || x > hi) cli_usage_error("--%s must be in [%g, %g], got %s", name, lo, hi, v);
    return x;
}

unsigned cli_choice(const char *name, const char *value, const char *const *choices) {
    for (unsigned i = 0; choices[i]; i++)
        if (!strcmp(value, choices[i])) return i;
    char list[256] = "";
    size_t off = 0;
    for (unsigned i = 0; choices[i] && off < sizeof list; i++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", i ? ", " : "",
                                choices[i]);
    cli_usage_error("--%s must be one of %s, got '%s'", name, list, value);
}

/* ---- signals ---- */

static volatile sig_atomic_t g_signal;
static induct_model *_Atomic g_watched;
static struct sigaction g_old_int, g_old_term;
static int g_caught;

/* Only async-signal-safe work: a sig_atomic_t store and induct_model_interrupt(), which
 * stores to a lock-free atomic flag. SA_RESETHAND: a second signal takes the default
 * action (ends the process), so a stuck program can still be stopped. */
static void on_signal(int sig) {
    g_signal = sig;
    induct_model *m = atomic_load(&g_watched);
    if (m) induct_model_interrupt(m);
}

void cli_signals_catch(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
    g_caught = 1;
}

void cli_signals_restore(void) {
    if (!g_caught) return;
    sigaction(SIGINT, &g_old_int, NULL);
    sigaction(SIGTERM, &g_old_term, NULL);
    g_caught = 0;
}

void cli_watch_model(induct_model *model) { atomic_store(&g_watched, model); }

int cli_interrupted(void) { return g_signal; }

/* ---- progress line ---- */

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_fmt_duration(double s, char *buf, size_t cap) {
    if (!isfinite(s) || s < 0) snprintf(buf, cap, "?");
    else if (s < 90) snprintf(buf, cap, "%.0fs", s);
    else if (s < 5400) snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
}

void cli_progress_start(cli_progress *p) {
    memset(p, 0, sizeof *p);
    p->tty = isatty(2);
    p->t0 = cli_now();
    p->last_draw = -1e300;
}

int cli_progress_tty(const cli_progress *p) { return p->tty; }

void cli_progress_draw(cli_progress *p, const char *label, int bar_width, double done,
                       double total, const char *detail) {
    if (!p->tty) return;
    double t = cli_now();
    int final = done >= total;
    if (!final && t - p->last_draw < 0.25) return;
    p->last_draw = t;
    double el = t - p->t0;
    char els[32], eta[32];
    cli_fmt_duration(el, els, sizeof els);
    cli_fmt_duration(done > 0 ? el * (total - done) / done : NAN, eta, sizeof eta);
    fprintf(stderr, "\r%s", label ? label : "");
    if (bar_width > 0) {
        int fill = total > 0 ? (int)(done / total * bar_width) : bar_width;
        fputs(" [", stderr);
        for (int i = 0; i < bar_width; i++) fputc(i < fill ? '#' : '.', stderr);
        fputc(']', stderr);
    }
    fprintf(stderr, " %s  %s elapsed, ETA %s   ", detail ? detail : "", els, eta);
    fflush(stderr);
    p->open = 1;
}

void cli_progress_end(cli_progress *p) {
    if (p->tty && p->open) {
        fputc('\n', stderr);
        p->open = 0;
    }
}

/* ---- files ---- */

int cli_write_atomic(const char *path, const void *data, size_t len) {
    size_t n = strlen(path) + 64;
    char *tmp = malloc(n);
    if (!tmp) {
        errno = ENOMEM;
        return -1;
    }
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int ok = f != NULL;
    if (ok) ok = fwrite(data, 1, len, f) == len;
    if (f) {
        ok = fflush(f) == 0 && ok;
        ok = fsync(fileno(f)) == 0 && ok;
        ok = fclose(f) == 0 && ok;
    }
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) {
        int e = errno;
        unlink(tmp);
        errno = e;
    }
    free(tmp);
    return ok ? 0 : -1;
}
