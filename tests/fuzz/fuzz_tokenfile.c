/* libFuzzer target: the token-file loaders (datasets issue): raw uint16 / uint32
 * arrays and llm.c's format, read with pread.
 *
 * Input: 8 bytes of settings, then the file's bytes (split into a training and a
 * validation file when settings bit 2 is set). The file lives in an anonymous memory
 * file (memfd) opened by its /proc/self/fd path, so each execution costs no disk I/O
 * and goes through the real open/fstat/pread path.
 *   byte 0: bits 0-1 format (mod 3), bit 2 separate validation file, bit 3 d_vocab = 0
 *           (inferred), bit 4 a memory cap (max_bytes = 64 x byte 2 + 1);
 *   byte 1: d_vocab low byte (d_vocab = 1 + byte1 * 257, up to 65536);
 *   byte 2: n_eval_windows; byte 3: val_fraction in 1/256; byte 4: block_tokens;
 *   byte 5: resident_limit in 4 KiB pages (no effect since files are not mapped); byte 6: seq_len - 2;
 *   byte 7: batch index.
 * Properties: a failure records its status; every id a batch returns lies in
 * [0, d_vocab); induct_token_file_read() agrees with the dataset's token count. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"

static void check_rc(int rc) {
    if (rc < 0 && (induct_last_error_code() != rc || induct_last_error_message()[0] == '\0')) {
        fprintf(stderr, "%s without a matching last error\n", induct_status_name(rc));
        __builtin_trap();
    }
}

/* A memory file holding `n` bytes; its path in `path`. */
static int mem_file(const uint8_t *data, size_t n, char *path, size_t cap) {
    int fd = memfd_create("induct-fuzz", MFD_CLOEXEC);
    if (fd < 0) __builtin_trap();
    size_t done = 0;
    while (done < n) {
        ssize_t k = write(fd, data + done, n - done);
        if (k <= 0) __builtin_trap();
        done += (size_t)k;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 8) return 0;
    induct_error_clear();
    const uint8_t *s = data;
    data += 8;
    size -= 8;
    induct_token_file_config c;
    induct_token_file_config_init(&c, sizeof c);
    c.format = s[0] % 3u;
    c.d_vocab = (s[0] & 8) ? 0 : 1u + s[1] * 257u;
    c.n_eval_windows = s[2];
    c.val_fraction = s[3] / 256.0;
    c.block_tokens = s[4];
    c.resident_limit = (uint64_t)s[5] * 4096u;
    c.max_bytes = (s[0] & 16) ? 64u * s[2] + 1u : 0;
    uint32_t T = 2u + s[6];
    size_t n_train = size, n_val = 0;
    if (s[0] & 4) {
        n_train = size / 2;
        n_val = size - n_train;
    }
    char tp[64], vp[64];
    int tfd = mem_file(data, n_train, tp, sizeof tp);
    int vfd = (s[0] & 4) ? mem_file(data + n_train, n_val, vp, sizeof vp) : -1;
    induct_dataset *d = NULL;
    int rc = induct_dataset_new_token_file(&d, tp, vfd >= 0 ? vp : NULL, &c);
    check_rc(rc);
    if (d) {
        uint32_t V = induct_dataset_d_vocab(d);
        if (s[0] & 32) { /* the repeated-span curriculum on the train windows */
            uint32_t lo = 1u + s[5] % 16u;
            check_rc(induct_dataset_set_repeats(d, (s[7] & 3) / 3.0, lo, lo + s[4] % 32u));
        }
        static int32_t tok[4 * 257], meta[4];
        for (uint32_t split = 0; split < 2; split++) {
            rc = induct_dataset_batch(d, split, s[7], 4, T, tok, 4 * 257, meta, 4);
            check_rc(rc);
            for (uint32_t i = 0; rc == INDUCT_OK && i < 4 * T; i++)
                if (tok[i] < 0 || (uint32_t)tok[i] >= V) {
                    fprintf(stderr, "token %d outside [0, %u)\n", tok[i], V);
                    __builtin_trap();
                }
            uint64_t n;
            check_rc(induct_dataset_split_tokens(d, split, &n));
            check_rc(induct_dataset_window_count(d, split, T, &n));
        }
        induct_dataset_free(d);
    }
    size_t len = 0;
    rc = induct_token_file_read(tp, c.format, c.d_vocab, NULL, 0, &len);
    if (rc != INDUCT_EBUFSIZE) check_rc(rc);
    if (rc == INDUCT_EBUFSIZE && len <= 1 << 16) {
        static int32_t all[1 << 16];
        check_rc(induct_token_file_read(tp, c.format, c.d_vocab, all, 1 << 16, &len));
    }
    close(tfd);
    if (vfd >= 0) close(vfd);
    return 0;
}
