/* libFuzzer target: the byte-level text loader (datasets issue).
 *
 * Input: 8 bytes of settings, then the text. Settings:
 *   byte 0: bit 0 bos, bit 1 split by document, bit 2 load from a directory of
 *           documents instead of memory (the text is cut into documents at 0xFF bytes,
 *           at most 8), bit 3 a suffix filter ".txt" (odd documents get ".bin");
 *   byte 1: separator (255 = none); byte 2: n_eval_windows; byte 3: val_fraction in
 *   1/256; byte 4: block_tokens; byte 5: bits 0-6 seed, bit 7 a corpus cap
 *   (max_bytes = 64 x the seed bits); byte 6: seq_len - 2; byte 7: batch index.
 * Directories live under /dev/shm (tmpfs), one per process, emptied after each input.
 * Properties: a failure records its status; every id lies in [0, d_vocab). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

static void check_rc(int rc) {
    if (rc < 0 && (induct_last_error_code() != rc || induct_last_error_message()[0] == '\0')) {
        fprintf(stderr, "%s without a matching last error\n", induct_status_name(rc));
        __builtin_trap();
    }
}

static void use(induct_dataset *d, const uint8_t *s) {
    uint32_t V = induct_dataset_d_vocab(d), T = 2u + s[6];
    static int32_t tok[4 * 257], meta[4];
    for (uint32_t split = 0; split < 2; split++) {
        int rc = induct_dataset_batch(d, split, s[7], 4, T, tok, 4 * 257, meta, 4);
        check_rc(rc);
        for (uint32_t i = 0; rc == INDUCT_OK && i < 4 * T; i++)
            if (tok[i] < 0 || (uint32_t)tok[i] >= V) __builtin_trap();
        uint64_t n;
        check_rc(induct_dataset_split_tokens(d, split, &n));
        check_rc(induct_dataset_window_count(d, split, T, &n));
    }
}

static char dir[64];

static void clear_dir(void) {
    DIR *dd = opendir(dir);
    struct dirent *e;
    char p[sizeof dir + 260];
    while (dd && (e = readdir(dd)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (dd) closedir(dd);
}

static void remove_dir(void) {
    clear_dir();
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 8) return 0;
    induct_error_clear();
    const uint8_t *s = data;
    data += 8;
    size -= 8;
    induct_text_config c;
    induct_text_config_init(&c, sizeof c);
    c.bos = s[0] & 1;
    c.split = (s[0] >> 1) & 1;
    c.separator = s[1] == 255 ? -1 : s[1];
    c.n_eval_windows = s[2];
    c.val_fraction = s[3] / 256.0;
    c.block_tokens = s[4];
    c.seed = s[5] & 0x7f;
    c.max_bytes = (s[5] & 0x80) ? 64u * (s[5] & 0x7fu) + 1u : 0;
    induct_dataset *d = NULL;
    int rc;
    if (!(s[0] & 4)) {
        rc = induct_dataset_new_text(&d, data, size, &c);
    } else {
        if (!dir[0]) {
            snprintf(dir, sizeof dir, "/dev/shm/induct-fuzz-text-%ld", (long)getpid());
            mkdir(dir, 0700);
            atexit(remove_dir);
        }
        size_t start = 0;
        int k = 0;
        for (size_t i = 0; i <= size && k < 8; i++)
            if (i == size || data[i] == 0xFF) {
                char p[160];
                snprintf(p, sizeof p, "%s/doc%d%s", dir, k, (s[0] & 8) && (k & 1) ? ".bin" : ".txt");
                FILE *f = fopen(p, "wb");
                if (!f) __builtin_trap();
                fwrite(data + start, 1, i - start, f);
                fclose(f);
                k++;
                start = i + 1;
            }
        rc = induct_dataset_new_text_path(&d, dir, (s[0] & 8) ? ".txt" : NULL, &c);
        clear_dir();
    }
    check_rc(rc);
    if (d) {
        use(d, s);
        induct_dataset_free(d);
    }
    return 0;
}
