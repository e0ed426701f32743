/* The identity of a run's data: SHA-256 of the file, or of a directory's files
 * (run_config.h, run_data_identity; docs/study.md, "The run directory"). */
#define _XOPEN_SOURCE 700 /* nftw */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "run_config.h"

#define HEX_LEN (2 * 32)

/* SHA-256 of the file at `path` as lowercase hex (hex: HEX_LEN + 1 bytes); its size in
 * *bytes. 0, or -1 with a message in err. */
static int sha256_file(const char *path, char *hex, uint64_t *bytes, char *err, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    unsigned char buf[1 << 16];
    uint64_t n = 0;
    size_t got;
    while (ok && (got = fread(buf, 1, sizeof buf, f)) > 0) {
        ok = EVP_DigestUpdate(ctx, buf, got) == 1;
        n += got;
    }
    int read_error = ferror(f);
    fclose(f);
    unsigned char md[32];
    unsigned int md_len = 0;
    ok = ok && !read_error && EVP_DigestFinal_ex(ctx, md, &md_len) == 1 && md_len == 32;
    EVP_MD_CTX_free(ctx);
    if (!ok) {
        snprintf(err, cap, read_error ? "cannot read %s: a read error" : "%s: SHA-256 failed",
                 path);
        return -1;
    }
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    *bytes = n;
    return 0;
}

/* nftw has no user pointer: the walk's state (one walk at a time). */
static struct {
    const char *suffix;
    size_t root_len;
    char **paths; /* relative paths, malloc'ed */
    size_t n, cap;
    int oom;
} walk;

static int on_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb;
    (void)ftw;
    if (type != FTW_F) return 0; /* directories; links are not followed (FTW_PHYS) */
    const char *base = path + ftw->base;
    size_t lb = strlen(base), ls = walk.suffix ? strlen(walk.suffix) : 0;
    if (ls > lb || (ls && memcmp(base + lb - ls, walk.suffix, ls))) return 0;
    if (walk.n == walk.cap) {
        size_t nc = walk.cap ? 2 * walk.cap : 256;
        char **p = realloc(walk.paths, nc * sizeof *p);
        if (!p) return walk.oom = 1;
        walk.paths = p;
        walk.cap = nc;
    }
    const char *rel = path + walk.root_len;
    while (*rel == '/') rel++;
    if (!(walk.paths[walk.n] = strdup(rel))) return walk.oom = 1;
    walk.n++;
    return 0;
}

static int cmp_path(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The directory's files as the library reads them (regular files, links not followed,
 * names ending in the suffix, in byte order of their relative paths): SHA-256 of the
 * lines "<hex SHA-256 of the file>  <relative path>\n", the lines sha256sum prints. */
static int sha256_dir(const char *root, const char *suffix, char *hex, uint64_t *bytes,
                      uint64_t *files, char *err, size_t cap) {
    memset(&walk, 0, sizeof walk);
    walk.suffix = suffix && *suffix ? suffix : NULL;
    walk.root_len = strlen(root);
    int rc = nftw(root, on_entry, 64, FTW_PHYS);
    if (rc != 0 || walk.oom) {
        snprintf(err, cap, walk.oom ? "out of memory walking %s" : "cannot walk %s: %s", root,
                 strerror(errno));
        rc = -1;
    }
    if (!rc && walk.n > 1) qsort(walk.paths, walk.n, sizeof *walk.paths, cmp_path);
    EVP_MD_CTX *ctx = rc ? NULL : EVP_MD_CTX_new();
    if (!rc && (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)) {
        snprintf(err, cap, "SHA-256 failed");
        rc = -1;
    }
    uint64_t total = 0;
    for (size_t i = 0; !rc && i < walk.n; i++) {
        size_t len = walk.root_len + strlen(walk.paths[i]) + 2;
        char *full = run_xcalloc(len, 1);
        snprintf(full, len, "%s/%s", root, walk.paths[i]);
        char fhex[HEX_LEN + 1];
        uint64_t fb = 0;
        rc = sha256_file(full, fhex, &fb, err, cap);
        free(full);
        total += fb;
        if (!rc && (EVP_DigestUpdate(ctx, fhex, HEX_LEN) != 1 ||
                    EVP_DigestUpdate(ctx, "  ", 2) != 1 ||
                    EVP_DigestUpdate(ctx, walk.paths[i], strlen(walk.paths[i])) != 1 ||
                    EVP_DigestUpdate(ctx, "\n", 1) != 1)) {
            snprintf(err, cap, "SHA-256 failed");
            rc = -1;
        }
    }
    unsigned char md[32];
    unsigned int md_len = 0;
    if (!rc && (EVP_DigestFinal_ex(ctx, md, &md_len) != 1 || md_len != 32)) {
        snprintf(err, cap, "SHA-256 failed");
        rc = -1;
    }
    if (!rc)
        for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    *bytes = total;
    *files = walk.n;
    EVP_MD_CTX_free(ctx);
    for (size_t i = 0; i < walk.n; i++) free(walk.paths[i]);
    free(walk.paths);
    memset(&walk, 0, sizeof walk);
    return rc;
}

int run_data_identity(const run_config *c, cJSON **out, char *err, size_t cap) {
    *out = NULL;
    const char *path = c->text ? c->text : c->tokens;
    struct stat st;
    if (!path || stat(path, &st) != 0) {
        snprintf(err, cap, "cannot stat %s: %s", path ? path : "(no data)", strerror(errno));
        return -1;
    }
    char hex[HEX_LEN + 1];
    uint64_t bytes = 0, files = 1;
    int rc = S_ISDIR(st.st_mode) ? sha256_dir(path, c->suffix, hex, &bytes, &files, err, cap)
                                 : sha256_file(path, hex, &bytes, err, cap);
    if (rc) return -1;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "sha256", hex);
    cJSON_AddNumberToObject(o, "bytes", (double)bytes);
    cJSON_AddNumberToObject(o, "files", (double)files);
    *out = o;
    return 0;
}
