/* Helper for tests/test_checkpoint_interop.py (public API only).
 *
 *   ckpt_interop_helper write <dir> <variant>
 *       Builds a model of the named variant with random weights, writes
 *       <dir>/model.safetensors, <dir>/tokens.bin (int32 [B][T]) and <dir>/logits.bin
 *       (float32 [B][T][d_vocab]) from libinduct's forward, then trains 2 AdamW steps
 *       on those tokens and writes <dir>/opt.safetensors. Prints "B T d_vocab".
 *   ckpt_interop_helper logits <checkpoint> <tokens.bin> <B> <T> <out.bin> [key=value ...]
 *       Loads the checkpoint, runs the forward pass, writes float32 logits. With
 *       key=value arguments (induct_model_config fields: n_layers, d_model, n_heads,
 *       d_head, d_mlp, n_ctx, d_vocab, positional, layer_norm, smeared_keys; unsigned
 *       integers) the configuration is given explicitly (induct_model_load_config).
 * Exit status 0 on success; 1 with the library's message on stderr otherwise.
 */
#include <induct/induct.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = 3, T = 12 };

static int fail(int rc, const char *what) {
    fprintf(stderr, "%s: %s: %s\n", what, induct_status_name(rc), induct_last_error_message());
    return 1;
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 11;
}

static double normal(uint64_t *s) {
    double u1 = ((double)lcg(s) + 1.0) / 9007199254740993.0;
    double u2 = (double)lcg(s) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static int write_file(const char *path, const void *p, size_t size, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, size, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    return 0;
}

static int cmd_write(const char *dir, const char *variant) {
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = 2;
    c.d_model = 16;
    c.n_heads = 4;
    c.d_head = 4;
    c.n_ctx = T;
    c.d_vocab = 23;
    if (!strcmp(variant, "attn-only")) {
    } else if (!strcmp(variant, "mlp-ln")) {
        c.d_mlp = 32;
        c.layer_norm = 1;
    } else if (!strcmp(variant, "shortformer-smeared")) {
        c.positional = INDUCT_POS_SHORTFORMER;
        c.smeared_keys = 1;
    } else if (!strcmp(variant, "none-ln")) {
        c.positional = INDUCT_POS_NONE;
        c.layer_norm = 1;
    } else if (!strcmp(variant, "everything")) {
        c.d_mlp = 32;
        c.layer_norm = 1;
        c.positional = INDUCT_POS_SHORTFORMER;
        c.smeared_keys = 1;
    } else {
        fprintf(stderr, "unknown variant %s\n", variant);
        return 2;
    }
    induct_model *m;
    int rc = induct_model_new(&m, &c);
    if (rc) return fail(rc, "model");
    /* random weights everywhere (biases, LayerNorm and alpha included) */
    uint64_t s = 12345;
    for (size_t i = 0; i < induct_model_n_tensors(m); i++) {
        const char *name;
        size_t n;
        induct_model_tensor_info(m, i, &name, NULL, NULL, &n);
        float *w = malloc(n * sizeof *w);
        int gain = strstr(name, "ln") && name[strlen(name) - 1] == 'w';
        for (size_t j = 0; j < n; j++) w[j] = (float)(0.4 * normal(&s) + (gain ? 1.0 : 0.0));
        rc = induct_model_set_tensor(m, name, w, n);
        free(w);
        if (rc) return fail(rc, "set_tensor");
    }
    int32_t tok[B * T];
    for (int i = 0; i < B * T; i++) tok[i] = (int32_t)(lcg(&s) % c.d_vocab);
    size_t nl = (size_t)B * T * c.d_vocab;
    float *logits = malloc(nl * sizeof *logits);
    rc = induct_model_forward(m, tok, B, T, logits, nl, NULL, 0, NULL);
    if (rc) return fail(rc, "forward");
    char p[4096];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    rc = induct_model_save(m, p);
    if (rc) return fail(rc, "save");
    snprintf(p, sizeof p, "%s/tokens.bin", dir);
    if (write_file(p, tok, sizeof *tok, (size_t)B * T)) return 1;
    snprintf(p, sizeof p, "%s/logits.bin", dir);
    if (write_file(p, logits, sizeof *logits, nl)) return 1;
    induct_optimizer *o;
    rc = induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW);
    if (rc) return fail(rc, "optimizer");
    for (int k = 0; k < 2 && rc == 0; k++) rc = induct_train_step_tokens(o, tok, B, T, NULL);
    if (rc) return fail(rc, "train step");
    snprintf(p, sizeof p, "%s/opt.safetensors", dir);
    rc = induct_optimizer_save(o, p);
    if (rc) return fail(rc, "optimizer save");
    printf("%d %d %u\n", B, T, c.d_vocab);
    induct_optimizer_free(o);
    induct_model_free(m);
    free(logits);
    return 0;
}

static int cmd_logits(const char *ckpt, const char *tokens, unsigned b, unsigned t,
                      const char *out, int n_kv, char **kv) {
    induct_model *m;
    int rc;
    if (n_kv == 0) {
        rc = induct_model_load(&m, ckpt);
    } else {
        induct_model_config g;
        induct_model_config_init(&g, sizeof g);
        static const char *keys[] = {"n_layers", "d_model",   "n_heads",    "d_head",
                                     "d_mlp",    "n_ctx",     "d_vocab",    "positional",
                                     "layer_norm", "smeared_keys"};
        uint32_t *fields[] = {&g.n_layers, &g.d_model,    &g.n_heads,    &g.d_head,
                              &g.d_mlp,    &g.n_ctx,      &g.d_vocab,    &g.positional,
                              &g.layer_norm, &g.smeared_keys};
        for (int i = 0; i < n_kv; i++) {
            const char *eq = strchr(kv[i], '=');
            size_t k = 0;
            while (k < 10 && (!eq || strncmp(kv[i], keys[k], (size_t)(eq - kv[i])) ||
                              strlen(keys[k]) != (size_t)(eq - kv[i])))
                k++;
            if (k == 10) {
                fprintf(stderr, "unknown config argument '%s'\n", kv[i]);
                return 2;
            }
            *fields[k] = (uint32_t)strtoul(eq + 1, NULL, 10);
        }
        rc = induct_model_load_config(&m, ckpt, &g);
    }
    if (rc) return fail(rc, "load");
    induct_model_config c;
    c.size = sizeof c;
    induct_model_get_config(m, &c);
    size_t n = (size_t)b * t, nl = n * c.d_vocab;
    int32_t *tok = malloc(n * sizeof *tok);
    float *logits = malloc(nl * sizeof *logits);
    FILE *f = fopen(tokens, "rb");
    if (!f || fread(tok, sizeof *tok, n, f) != n) {
        fprintf(stderr, "cannot read %s\n", tokens);
        return 1;
    }
    fclose(f);
    rc = induct_model_forward(m, tok, b, t, logits, nl, NULL, 0, NULL);
    if (rc) return fail(rc, "forward");
    if (write_file(out, logits, sizeof *logits, nl)) return 1;
    free(tok);
    free(logits);
    induct_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "write")) return cmd_write(argv[2], argv[3]);
    if (argc >= 7 && !strcmp(argv[1], "logits"))
        return cmd_logits(argv[2], argv[3], (unsigned)atoi(argv[4]), (unsigned)atoi(argv[5]),
                          argv[6], argc - 7, argv + 7);
    fprintf(stderr, "usage: %s write <dir> <variant> | logits <ckpt> <tokens> <B> <T> <out> "
                    "[key=value ...]\n",
            argv[0]);
    return 2;
}
