/* Reference run for the bindings' dataset tests: builds a KV dataset, a text
 * dataset over a directory and a token-file dataset over a file this program writes,
 * and prints batches, targets, counts and KV analyses ("<name> <values...>", floats as
 * exact hex). Usage: induct-ref-datasets TEXT_DIR TOKEN_FILE_OUT. Public API only. */
#include <induct/induct.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != INDUCT_OK) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,                     \
                    induct_status_name(rc_), induct_last_error_message());                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void put_i(const char *name, const int32_t *v, size_t n) {
    printf("%s", name);
    for (size_t i = 0; i < n; i++) printf(" %d", v[i]);
    printf("\n");
}
static void put_u64(const char *name, uint64_t v) {
    printf("%s %llu\n", name, (unsigned long long)v);
}
static void put_d(const char *name, double v) { printf("%s %a\n", name, v); }

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: induct-ref-datasets TEXT_DIR TOKEN_FILE_OUT\n");
        return 2;
    }
    static int32_t tok[4096], meta[64];
    static float att[64];
    uint64_t n;
    double v;

    /* key-value retrieval: the blog post's shape (24 context tokens + answer, 64 ids) */
    induct_kv_config kc;
    induct_kv_config_init(&kc, sizeof kc);
    kc.seed = 3;
    induct_dataset *kv;
    CHECK(induct_dataset_new_kv(&kv, &kc));
    CHECK(induct_dataset_batch(kv, INDUCT_SPLIT_TRAIN, 2, 4, 25, tok, 100, meta, 4));
    put_i("kv.batch", tok, 100);
    put_i("kv.meta", meta, 4);
    CHECK(induct_dataset_kv_info(kv, INDUCT_SPLIT_TRAIN, 2, 4, 25, tok, 16, NULL));
    put_i("kv.info", tok, 16);
    CHECK(induct_dataset_kv_ceiling(kv, 25, &v));
    put_d("kv.ceiling", v);
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    mc.n_layers = 2; mc.d_model = 32; mc.n_heads = 2; mc.n_ctx = 25; mc.d_vocab = 64;
    mc.seed = 4;
    induct_model *m;
    CHECK(induct_model_new(&m, &mc));
    induct_optimizer *o;
    CHECK(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW));
    CHECK(induct_optimizer_set(o, INDUCT_OPT_LR, 1e-2));
    printf("kv.train_loss");
    for (int s = 0; s < 3; s++) {
        CHECK(induct_train_step(o, kv, 8, 25, &v)); /* the answer position only */
        printf(" %a", v);
    }
    printf("\n");
    CHECK(induct_analysis_kv_accuracy(m, kv, 32, 25, &v));
    put_d("kv.accuracy", v);
    size_t len;
    CHECK(induct_analysis_kv_attention(m, kv, 32, 25, att, 64, &len));
    printf("kv.attention");
    for (size_t i = 0; i < len; i++) printf(" %a", (double)att[i]);
    printf("\n");

    /* text: every .txt file under TEXT_DIR, BOS + newline separator, split by document */
    induct_text_config tc;
    induct_text_config_init(&tc, sizeof tc);
    tc.bos = 1; tc.separator = 10; tc.split = INDUCT_SPLIT_BY_DOCUMENT; tc.val_fraction = 0.5;
    tc.seed = 6;
    induct_dataset *tx;
    CHECK(induct_dataset_new_text_path(&tx, argv[1], ".txt", &tc));
    printf("text.d_vocab %u\n", induct_dataset_d_vocab(tx));
    CHECK(induct_dataset_split_tokens(tx, INDUCT_SPLIT_TRAIN, &n));
    put_u64("text.train_tokens", n);
    CHECK(induct_dataset_split_tokens(tx, INDUCT_SPLIT_EVAL, &n));
    put_u64("text.eval_tokens", n);
    CHECK(induct_dataset_window_count(tx, INDUCT_SPLIT_EVAL, 8, &n));
    put_u64("text.eval_windows", n);
    CHECK(induct_dataset_batch(tx, INDUCT_SPLIT_TRAIN, 1, 3, 8, tok, 24, NULL, 0));
    put_i("text.train_batch", tok, 24);
    CHECK(induct_dataset_batch(tx, INDUCT_SPLIT_EVAL, 0, 3, 8, tok, 24, NULL, 0));
    put_i("text.eval_batch", tok, 24);

    /* token file: write 300 ids in llm.c's format, then read it as a dataset */
    for (int i = 0; i < 300; i++) tok[i] = (i * 7) % 50;
    CHECK(induct_token_file_write(argv[2], INDUCT_TOKFILE_LLMC, tok, 300));
    induct_token_file_config fc;
    induct_token_file_config_init(&fc, sizeof fc);
    fc.format = INDUCT_TOKFILE_LLMC; fc.val_fraction = 0.2; fc.block_tokens = 32; fc.seed = 8;
    induct_dataset *tf;
    CHECK(induct_dataset_new_token_file(&tf, argv[2], NULL, &fc));
    printf("tokfile.d_vocab %u\n", induct_dataset_d_vocab(tf));
    CHECK(induct_dataset_split_tokens(tf, INDUCT_SPLIT_TRAIN, &n));
    put_u64("tokfile.train_tokens", n);
    CHECK(induct_dataset_window_count(tf, INDUCT_SPLIT_TRAIN, 16, &n));
    put_u64("tokfile.train_windows", n);
    CHECK(induct_dataset_batch(tf, INDUCT_SPLIT_TRAIN, 5, 2, 16, tok, 32, NULL, 0));
    put_i("tokfile.train_batch", tok, 32);
    CHECK(induct_dataset_batch(tf, INDUCT_SPLIT_EVAL, 0, 2, 16, tok, 32, NULL, 0));
    put_i("tokfile.eval_batch", tok, 32);

    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(kv);
    induct_dataset_free(tx);
    induct_dataset_free(tf);
    return 0;
}
