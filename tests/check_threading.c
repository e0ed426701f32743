/* The host's threading environment does not change the results (docs/threading.md).
 *
 * A "job" is one model (two architectures) at a requested thread count (1, 2, 4): one
 * backward pass on fixed tokens (its loss and every gradient byte), then ten AdamW
 * training steps on a repeated-random-token dataset (the ten losses, every weight
 * byte and every gradient byte of the last step). The reference bytes of every job
 * come from a child process (this program with --reference) started with a clean
 * environment: every OMP_*, GOMP_* and KMP_* variable removed. This process runs the
 * same jobs in whatever environment meson gave it (tests/meson.build runs it plainly
 * and under OMP_DYNAMIC=true, OMP_THREAD_LIMIT=1, OMP_NUM_THREADS=1 and
 * OMP_MAX_ACTIVE_LEVELS=2), and
 *  - on the calling thread,
 *  - from inside the host's own `omp parallel` region, two jobs at a time (one model
 *    per outer thread),
 *  - from two plain pthreads, two models at once,
 * and every result must be the reference's bytes. The OpenMP settings the host sees
 * must be the same before and after. */
#define _GNU_SOURCE
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

extern char **environ;

enum { N_ARCH = 2, N_NT = 3, N_JOBS = N_ARCH * N_NT, STEPS = 10, BATCH = 8 };
static const uint32_t NTS[N_NT] = {1, 2, 4};

/* A growable byte record of one job's results, with the offset where each named part
 * starts (for the failure message). */
typedef struct rec {
    unsigned char *b;
    size_t n, cap;
    char part[64][48];
    size_t start[64];
    int n_parts;
} rec;

static void die(const char *what) {
    fprintf(stderr, "check_threading: %s: %s\n", what, induct_last_error_message());
    abort();
}

static void put(rec *r, const char *part, const void *p, size_t n) {
    if (r->n + n > r->cap) {
        size_t cap = r->cap ? r->cap : 1 << 16;
        while (cap < r->n + n) cap *= 2;
        r->b = realloc(r->b, cap);
        if (!r->b) abort();
        r->cap = cap;
    }
    if (part && r->n_parts < 64) {
        snprintf(r->part[r->n_parts], sizeof r->part[0], "%s", part);
        r->start[r->n_parts++] = r->n;
    }
    memcpy(r->b + r->n, p, n);
    r->n += n;
}

static void put_buf(rec *r, const char *prefix, induct_model *m, uint32_t which) {
    for (size_t i = 0; i < induct_model_n_tensors(m); i++) {
        const char *name;
        size_t n, len;
        char part[48];
        if (induct_model_tensor_info(m, i, &name, NULL, NULL, &n)) die("tensor_info");
        float *x = malloc(n * sizeof *x);
        if (!x || induct_model_get_tensor(m, name, which, x, n, &len)) die("get_tensor");
        snprintf(part, sizeof part, "%s %s", prefix, name);
        put(r, part, x, n * sizeof *x);
        free(x);
    }
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

/* Architecture 0: the 2-layer attention-only model of the report this test came from
 * (d_model 64, n_ctx 128, d_vocab 256, batch 8). Architecture 1: MLP, LayerNorm, shortformer
 * positions, smeared keys, and two gradient shards per step. */
static void job(int arch, uint32_t nt, rec *r) {
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = 2;
    c.d_model = 64;
    c.n_heads = arch ? 4 : 2;
    c.n_ctx = arch ? 64 : 128;
    c.d_vocab = arch ? 64 : 256;
    c.seed = 11 + (uint64_t)arch;
    c.n_threads = nt;
    if (arch) {
        c.d_mlp = 256;
        c.layer_norm = 1;
        c.positional = INDUCT_POS_SHORTFORMER;
        c.smeared_keys = 1;
    }
    uint32_t T = c.n_ctx;
    induct_model *m;
    induct_optimizer *o;
    induct_dataset *d;
    if (induct_model_new(&m, &c)) die("model_new");
    int32_t *tok = malloc((size_t)BATCH * T * sizeof *tok);
    uint64_t s = 1 + (uint64_t)arch;
    for (size_t i = 0; i < (size_t)BATCH * T; i++) tok[i] = (int32_t)(lcg(&s) % c.d_vocab);
    double loss;
    if (induct_model_backward(m, tok, BATCH, T, &loss)) die("backward");
    put(r, "backward loss", &loss, sizeof loss);
    put_buf(r, "backward grad", m, INDUCT_BUF_GRAD);

    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = c.d_vocab;
    rc.seed = 5;
    if (induct_dataset_new_rrt(&d, &rc)) die("dataset");
    if (induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW)) die("optimizer");
    if (arch && induct_optimizer_set(o, INDUCT_OPT_GRAD_SHARDS, 2)) die("shards");
    double losses[STEPS];
    for (int i = 0; i < STEPS; i++)
        if (induct_train_step(o, d, BATCH, T, &losses[i])) die("train_step");
    put(r, "training losses", losses, sizeof losses);
    put_buf(r, "trained weight", m, INDUCT_BUF_PARAM);
    put_buf(r, "last step's grad", m, INDUCT_BUF_GRAD);
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
    free(tok);
}

static rec REF[N_JOBS];

/* --reference FILE: every job, in a clean environment (the parent made it so) */
static int write_reference(const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    for (int j = 0; j < N_JOBS; j++) {
        rec r = {0};
        job(j / N_NT, NTS[j % N_NT], &r);
        uint64_t n = r.n;
        if (fwrite(&n, sizeof n, 1, f) != 1 || fwrite(r.b, 1, r.n, f) != r.n) return 1;
        free(r.b);
    }
    return fclose(f) != 0;
}

static int clean_var(const char *e) {
    return !strncmp(e, "OMP_", 4) || !strncmp(e, "GOMP_", 5) || !strncmp(e, "KMP_", 4);
}

/* Run this program with --reference in a clean environment; read its records. */
static void load_reference(void) {
    char path[] = "/tmp/induct-threading-ref-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) abort();
    close(fd);
    size_t n_env = 0, k = 0;
    while (environ[n_env]) n_env++;
    char **env = calloc(n_env + 1, sizeof *env);
    for (size_t i = 0; i < n_env; i++)
        if (!clean_var(environ[i])) env[k++] = environ[i];
    char *argv[] = {"/proc/self/exe", "--reference", path, NULL};
    pid_t pid;
    int st;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, env) ||
        waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "check_threading: the reference process failed\n");
        abort();
    }
    free(env);
    FILE *f = fopen(path, "rb");
    for (int j = 0; j < N_JOBS; j++) {
        uint64_t n;
        if (!f || fread(&n, sizeof n, 1, f) != 1) abort();
        REF[j].b = malloc(n);
        REF[j].n = n;
        if (!REF[j].b || fread(REF[j].b, 1, n, f) != n) abort();
    }
    fclose(f);
    unlink(path);
}

/* Run job j and compare its bytes with the reference; a message on mismatch. */
static void check_job(int j, const char *where, char *msg, size_t msg_len) {
    rec r = {0};
    job(j / N_NT, NTS[j % N_NT], &r);
    msg[0] = 0;
    if (r.n != REF[j].n) {
        snprintf(msg, msg_len, "%s: architecture %d, %u threads: %zu bytes, reference %zu", where,
                 j / N_NT, NTS[j % N_NT], r.n, REF[j].n);
    } else {
        for (size_t i = 0; i < r.n; i++)
            if (r.b[i] != REF[j].b[i]) {
                int p = 0;
                while (p + 1 < r.n_parts && r.start[p + 1] <= i) p++;
                snprintf(msg, msg_len,
                         "%s: architecture %d, %u threads: differs from the clean environment "
                         "in %s (byte %zu of the part)",
                         where, j / N_NT, NTS[j % N_NT], r.part[p], i - r.start[p]);
                break;
            }
    }
    free(r.b);
}

typedef struct omp_state {
    int max_threads, dynamic, max_active_levels, thread_limit, in_parallel;
} omp_state;

static omp_state host_state(void) {
    omp_state s = {0};
#ifdef _OPENMP
    s.max_threads = omp_get_max_threads();
    s.dynamic = omp_get_dynamic();
    s.max_active_levels = omp_get_max_active_levels();
    s.thread_limit = omp_get_thread_limit();
    s.in_parallel = omp_in_parallel();
#endif
    return s;
}

/* On the calling thread. */
START_TEST(test_calling_thread) {
    char msg[256];
    omp_state before = host_state();
    check_job(_i, "calling thread", msg, sizeof msg);
    ck_assert_msg(!msg[0], "%s", msg);
    omp_state after = host_state();
    ck_assert_msg(!memcmp(&before, &after, sizeof before),
                  "the host's OpenMP settings changed: max_threads %d -> %d, dynamic %d -> %d, "
                  "max_active_levels %d -> %d",
                  before.max_threads, after.max_threads, before.dynamic, after.dynamic,
                  before.max_active_levels, after.max_active_levels);
}
END_TEST

/* The same job's bytes for 1, 2 and 4 threads (docs/threading.md, "Also across thread
 * counts"): the reference process's records. */
START_TEST(test_reference_across_thread_counts) {
    for (int a = 0; a < N_ARCH; a++)
        for (int t = 1; t < N_NT; t++) {
            const rec *x = &REF[a * N_NT], *y = &REF[a * N_NT + t];
            ck_assert_msg(x->n == y->n && !memcmp(x->b, y->b, x->n),
                          "architecture %d: 1 and %u threads differ", a, NTS[t]);
        }
}
END_TEST

/* From inside the host's `omp parallel` region: the jobs shared among two outer
 * threads (two models trained at once, one per outer thread). */
START_TEST(test_inside_host_parallel) {
    static char msg[N_JOBS][256];
    int team = 1;
    omp_state before = host_state();
#ifdef _OPENMP
#pragma omp parallel for num_threads(2) schedule(static, 1)
#endif
    for (int j = 0; j < N_JOBS; j++) {
#ifdef _OPENMP
        if (j == 0) team = omp_get_num_threads();
#endif
        omp_state in_before = host_state();
        check_job(j, "inside the host's omp parallel", msg[j], sizeof msg[j]);
        omp_state in_after = host_state();
        if (!msg[j][0] && memcmp(&in_before, &in_after, sizeof in_before))
            snprintf(msg[j], sizeof msg[j], "job %d: the OpenMP settings of the host's outer "
                     "thread changed", j);
    }
    for (int j = 0; j < N_JOBS; j++) ck_assert_msg(!msg[j][0], "%s", msg[j]);
    omp_state after = host_state();
    ck_assert(!memcmp(&before, &after, sizeof before));
    fprintf(stderr, "host region: %d outer threads\n", team);
}
END_TEST

/* The host sets its own default team size (omp_set_num_threads) to 1, then 3: the
 * jobs' bytes do not change, and the host's setting is still its own afterwards. */
START_TEST(test_host_sets_num_threads) {
#ifdef _OPENMP
    static const int HOST[2] = {1, 3};
    for (int i = 0; i < 2; i++) {
        omp_set_num_threads(HOST[i]);
        for (int j = 0; j < N_JOBS; j++) {
            char msg[256];
            check_job(j, "after omp_set_num_threads", msg, sizeof msg);
            ck_assert_msg(!msg[0], "omp_set_num_threads(%d): %s", HOST[i], msg);
        }
        ck_assert_int_eq(omp_get_max_threads(), HOST[i]);
    }
#endif
}
END_TEST

typedef struct worker {
    int first;
    char msg[N_JOBS][256];
} worker;

static void *pthread_jobs(void *arg) {
    worker *w = arg;
    for (int j = w->first; j < N_JOBS; j += 2) check_job(j, "pthread", w->msg[j], 256);
    return NULL;
}

/* From two plain threads (not OpenMP threads), two models at once. */
START_TEST(test_two_pthreads) {
    static worker w[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].first = i;
        ck_assert_int_eq(pthread_create(&th[i], NULL, pthread_jobs, &w[i]), 0);
    }
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < N_JOBS; j++) ck_assert_msg(!w[i].msg[j][0], "%s", w[i].msg[j]);
}
END_TEST

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--reference")) return write_reference(argv[2]);
    omp_state s = host_state();
    fprintf(stderr,
            "environment: OMP_DYNAMIC=%s OMP_THREAD_LIMIT=%s OMP_NUM_THREADS=%s "
            "OMP_MAX_ACTIVE_LEVELS=%s; runtime: max_threads %d, dynamic %d, thread_limit %d, "
            "max_active_levels %d\n",
            getenv("OMP_DYNAMIC") ? getenv("OMP_DYNAMIC") : "-",
            getenv("OMP_THREAD_LIMIT") ? getenv("OMP_THREAD_LIMIT") : "-",
            getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "-",
            getenv("OMP_MAX_ACTIVE_LEVELS") ? getenv("OMP_MAX_ACTIVE_LEVELS") : "-",
            s.max_threads, s.dynamic, s.thread_limit, s.max_active_levels);
    load_reference();
    Suite *su = suite_create("threading");
    TCase *tc = tcase_create("environment");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_reference_across_thread_counts);
    tcase_add_loop_test(tc, test_calling_thread, 0, N_JOBS);
    tcase_add_test(tc, test_inside_host_parallel);
    tcase_add_test(tc, test_host_sets_num_threads);
    tcase_add_test(tc, test_two_pthreads);
    suite_add_tcase(su, tc);
    int rc = tu_run(su);
    for (int j = 0; j < N_JOBS; j++) free(REF[j].b);
    return rc;
}
