/* Atomic file replacement (white box, lib/core/atomic_file.c): the one writer behind
 * induct_model_save(), induct_optimizer_save() and induct_token_file_write(). A
 * successful write replaces the file with exactly what the callback wrote; a failing
 * callback, or a directory that does not exist, gives INDUCT_EIO naming the system
 * error, leaves the previous file byte for byte, and leaves no temporary file. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "testutil.h"

static char dir[256];

static void make_dir(void) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/induct-atomic-XXXXXX", base && *base ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* Number of entries in the directory besides . and .. */
static int entries(void) {
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void read_back(const char *path, char *buf, size_t cap, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    *len = fread(buf, 1, cap, f);
    fclose(f);
}

typedef struct payload {
    const char *text;
    int fail_errno; /* 0: succeed; else write half, then fail with this errno */
} payload;

static int write_payload(FILE *f, void *user) {
    const payload *p = user;
    size_t n = strlen(p->text);
    if (p->fail_errno) {
        if (fwrite(p->text, 1, n / 2, f) != n / 2) return -1;
        errno = p->fail_errno;
        return -1;
    }
    return fwrite(p->text, 1, n, f) == n ? 0 : -1;
}

START_TEST(test_replace_and_fail) {
    make_dir();
    char path[300], buf[64];
    snprintf(path, sizeof path, "%s/f.bin", dir);
    size_t len;
    payload first = {"first version", 0}, second = {"second, longer version", 0};
    ck_assert_int_eq(induct__write_atomic(path, "test", write_payload, &first), INDUCT_OK);
    read_back(path, buf, sizeof buf, &len);
    ck_assert_uint_eq(len, strlen(first.text));
    ck_assert_mem_eq(buf, first.text, len);
    /* mode 0666 less the umask */
    mode_t um = umask(0);
    umask(um);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0666 & ~um);
    /* replaced whole */
    ck_assert_int_eq(induct__write_atomic(path, "test", write_payload, &second), INDUCT_OK);
    read_back(path, buf, sizeof buf, &len);
    ck_assert_uint_eq(len, strlen(second.text));
    ck_assert_mem_eq(buf, second.text, len);
    ck_assert_int_eq(entries(), 1);
    /* a failing write: EIO with the system error, the old file intact, no temporary */
    payload bad = {"third version that fails half way", ENOSPC};
    ck_assert_int_eq(induct__write_atomic(path, "test", write_payload, &bad), INDUCT_EIO);
    ck_assert_int_eq(induct_last_error_code(), INDUCT_EIO);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), strerror(ENOSPC)));
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), path));
    read_back(path, buf, sizeof buf, &len);
    ck_assert_uint_eq(len, strlen(second.text));
    ck_assert_mem_eq(buf, second.text, len);
    ck_assert_int_eq(entries(), 1);
    /* a directory that does not exist */
    char missing[320];
    snprintf(missing, sizeof missing, "%s/no/such/dir.bin", dir);
    ck_assert_int_eq(induct__write_atomic(missing, "test", write_payload, &first), INDUCT_EIO);
    ck_assert_ptr_nonnull(strstr(induct_last_error_message(), "cannot create temporary file"));
    ck_assert_int_eq(entries(), 1);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("atomic_file");
    TCase *tc = tcase_create("atomic_file");
    tcase_add_test(tc, test_replace_and_fail);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
