/* Dump models, inputs and analysis results for tests/test_analysis_numpy.py, which
 * recomputes them independently with NumPy. Usage: analysis_dump OUT_DIR.
 * Each array goes to OUT_DIR/<name>.bin (little-endian, row-major) and one line
 * "<name> <dtype> <dims...>" to OUT_DIR/manifest.txt. Links only the public API. */
#include <induct/induct.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dir;
static FILE *manifest;

static void die(int rc, const char *what) {
    if (rc != INDUCT_OK) {
        fprintf(stderr, "analysis_dump: %s: %s (%s)\n", what, induct_status_name(rc),
                induct_last_error_message());
        exit(1);
    }
}

static void dump(const char *name, const char *dtype, size_t esize, const void *data, int ndim,
                 const size_t *dims) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    size_t n = 1;
    fprintf(manifest, "%s %s", name, dtype);
    for (int i = 0; i < ndim; i++) {
        n *= dims[i];
        fprintf(manifest, " %zu", dims[i]);
    }
    fprintf(manifest, "\n");
    if (fwrite(data, esize, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}
#define DUMP_F(name, data, ...)                                                                    \
    do {                                                                                           \
        size_t d_[] = {__VA_ARGS__};                                                               \
        dump(name, "f4", 4, data, (int)(sizeof d_ / sizeof *d_), d_);                              \
    } while (0)
#define DUMP_D(name, data, ...)                                                                    \
    do {                                                                                           \
        size_t d_[] = {__VA_ARGS__};                                                               \
        dump(name, "f8", 8, data, (int)(sizeof d_ / sizeof *d_), d_);                              \
    } while (0)
#define DUMP_I(name, data, ...)                                                                    \
    do {                                                                                           \
        size_t d_[] = {__VA_ARGS__};                                                               \
        dump(name, "i4", 4, data, (int)(sizeof d_ / sizeof *d_), d_);                              \
    } while (0)

static uint64_t lcg_state = 12345;
static double urand(void) {
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg_state >> 11) / 9007199254740992.0;
}
static double nrand(void) {
    double u1 = urand() + 1e-12, u2 = urand();
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Random weights everywhere; every tensor dumped as "<prefix><name>". */
static void randomize_and_dump(induct_model *m, const char *prefix, double std) {
    size_t nt = induct_model_n_tensors(m);
    for (size_t i = 0; i < nt; i++) {
        const char *name;
        uint32_t shape[4];
        uint32_t ndim;
        size_t n;
        die(induct_model_tensor_info(m, i, &name, shape, &ndim, &n), "tensor_info");
        float *buf = malloc(n * sizeof *buf);
        int gain = strstr(name, "ln") && name[strlen(name) - 1] == 'w';
        for (size_t j = 0; j < n; j++)
            buf[j] = (float)((gain ? 1.0 : 0.0) + std * nrand());
        die(induct_model_set_tensor(m, name, buf, n), "set_tensor");
        char full[256];
        snprintf(full, sizeof full, "%s%s", prefix, name);
        size_t dims[4] = {shape[0], shape[1], shape[2], shape[3]};
        dump(full, "f4", 4, buf, (int)ndim, dims);
        free(buf);
    }
}

static induct_model *new_model(uint32_t L, uint32_t D, uint32_t H, uint32_t dh, uint32_t V,
                               uint32_t ctx, uint32_t ln) {
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = L;
    c.d_model = D;
    c.n_heads = H;
    c.d_head = dh;
    c.d_vocab = V;
    c.n_ctx = ctx;
    c.layer_norm = ln;
    induct_model *m;
    die(induct_model_new(&m, &c), "model_new");
    return m;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: analysis_dump OUT_DIR\n");
        return 2;
    }
    dir = argv[1];
    char path[4096];
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    manifest = fopen(path, "w");
    if (!manifest) {
        perror(path);
        return 1;
    }
    size_t len;

    /* 1. weights-only scores: 3 layers, d_model 16, 4 heads of d_head 5 (not d_model/H) */
    {
        enum { L = 3, D = 16, H = 4, DH = 5, V = 23 };
        induct_model *m = new_model(L, D, H, DH, V, 8, 0);
        randomize_and_dump(m, "w.", 0.4);
        static float comp[3][(L * H) * (L * H)];
        for (uint32_t k = 0; k < 3; k++)
            die(induct_analysis_composition(m, k, comp[k], (L * H) * (L * H), &len), "composition");
        DUMP_F("comp_q", comp[0], L, H, L, H);
        DUMP_F("comp_k", comp[1], L, H, L, H);
        DUMP_F("comp_v", comp[2], L, H, L, H);
        float eig[L * H];
        die(induct_analysis_copying_eigen(m, eig, L * H, &len), "copying_eigen");
        DUMP_F("eig", eig, L, H);
        double base;
        die(induct_analysis_composition_baseline(m, 4000, 7, &base), "baseline");
        DUMP_D("baseline", &base, 1);
        induct_model_free(m);
    }

    /* 2. empirical copying with a final LayerNorm: 2 layers, probe with BOS */
    {
        enum { L = 2, D = 12, H = 3, DH = 4, V = 19, CTX = 16 };
        induct_model *m = new_model(L, D, H, DH, V, CTX, 1);
        randomize_and_dump(m, "c.", 0.6);
        induct_probe_config pc;
        induct_probe_config_init(&pc, sizeof pc);
        pc.block_len = 9;
        pc.n_seq = 4;
        pc.copying_bos = 1;
        pc.seed = 3;
        int32_t tok[4 * 10];
        die(induct_analysis_probe_tokens(m, &pc, 1, tok, 40, &len), "probe_tokens");
        DUMP_I("c_tokens", tok, 4, 10);
        float copy[L * H];
        die(induct_analysis_copying(m, &pc, copy, L * H, &len), "copying");
        DUMP_F("c_copying", copy, L, H);
        /* patterns too, so the NumPy forward can be checked on its own */
        static float att[4][L * H * 10 * 10];
        for (int b = 0; b < 4; b++)
            die(induct_model_attention(m, tok + b * 10, 10, att[b], L * H * 100, &len),
                "attention");
        DUMP_F("c_att", att, 4, L, H, 10, 10);
        induct_model_free(m);
    }

    /* 3. PCA of a stack of "loss vectors": 14 snapshots x 30 positions, low-rank + noise */
    {
        enum { R = 14, C = 30, K = 4 };
        float x[R * C];
        for (int i = 0; i < R; i++)
            for (int j = 0; j < C; j++)
                x[i * C + j] = (float)(3.0 + 2.0 * sin(0.3 * i) * cos(0.2 * j) +
                                       0.7 * (i * 0.1) * (j % 5) + 0.05 * nrand());
        float sc[R * K], comp[K * C];
        double var[K], total;
        die(induct_analysis_pca(x, R, C, K, sc, R * K, comp, K * C, var, K, &total), "pca");
        DUMP_F("p_x", x, R, C);
        DUMP_F("p_scores", sc, R, K);
        DUMP_F("p_components", comp, K, C);
        DUMP_D("p_variance", var, K);
        DUMP_D("p_total", &total, 1);
    }
    fclose(manifest);
    return 0;
}
