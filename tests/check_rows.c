/* Partial forward passes at a few rows (the ablation attribution's and the ICL score's
 * passes, lib/model/pass.c rows_attention / rows_mlp / rows_tail): the last layer computed
 * only at the rows p->rows gives each row's loss bit-identical to the whole pass's, from
 * scratch and resumed after a layer's attention from a changed residual stream (as the
 * attribution resumes it), with 1 and 2 threads, for attention-only models, MLP +
 * LayerNorm models and smeared-key shortformer models, for row sets whose products are
 * gathered, computed whole, or (too many rows) the whole last layer, in order and
 * reversed. With a writing hook on the last layer's pattern (the attribution's
 * preserve-patterns passes) the layer is computed whole and still agrees. NaN in the
 * last layer's activations at every other row before each rows pass proves which path
 * ran and that it read nothing it did not compute. White-box: links the internal
 * library. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "testutil.h"

typedef struct rows_variant {
    const char *name;
    uint32_t d_model, d_head, d_mlp, layer_norm, positional, smeared, shortformer_layers;
    uint32_t B, T, threads;
} rows_variant;

/* Shapes: B T = 1024 rows (a last partial 48-row group of 16 rows) and 1200 (none; T
 * above 256 takes the 8-row attention tiles), the whole products above OpenBLAS's
 * small-matrix limit (the row products padded to stay above it); d_model 16: the whole
 * products below it. With the ICL score's two rows per sequence the row products are
 * gathered; with seven they compute the whole product (more than half its rows). */
static const rows_variant VARIANTS[] = {
    {"attn-only", 64, 32, 0, 0, INDUCT_POS_STANDARD, 0, 0, 4, 256, 1},
    {"attn-only long", 64, 32, 0, 0, INDUCT_POS_STANDARD, 0, 0, 4, 300, 2},
    {"attn-only small", 16, 8, 0, 0, INDUCT_POS_STANDARD, 0, 0, 4, 160, 1},
    {"mlp+ln", 64, 32, 64, 1, INDUCT_POS_STANDARD, 0, 0, 4, 256, 2},
    {"mlp+ln long", 64, 32, 64, 1, INDUCT_POS_STANDARD, 0, 0, 4, 300, 1},
    {"mlp+ln small", 16, 8, 32, 1, INDUCT_POS_STANDARD, 0, 0, 4, 160, 2},
    {"smeared shortformer", 64, 32, 0, 1, INDUCT_POS_SHORTFORMER, 1, 0, 4, 256, 1},
    {"smeared shortformer long", 64, 32, 0, 0, INDUCT_POS_SHORTFORMER, 1, 0, 4, 300, 2},
    {"shortformer layer 0, mlp", 64, 32, 48, 1, INDUCT_POS_SHORTFORMER, 0, 1, 4, 300, 2},
};
#define N_VARIANTS (int)(sizeof VARIANTS / sizeof VARIANTS[0])

enum { L = 2, MAXR = 4 * 300 };

typedef struct frozen {
    const float *att; /* clean patterns of layer 1, [B][H][T][T] */
} frozen;

static int write_frozen(void *user, induct_model *m, const induct__pass *p, uint32_t point,
                        uint32_t l, float *att) {
    const frozen *f = user;
    (void)point, (void)l;
    memcpy(att, f->att, (size_t)p->B * m->cfg.n_heads * p->T * p->T * sizeof *att);
    return INDUCT_OK;
}

/* NaN in the last layer's per-row activations the rows path computes itself. */
static void poison_last_layer(induct_model *m, uint32_t B, uint32_t T) {
    const induct_model_config *c = &m->cfg;
    const induct__layer_act *a = &m->A[L - 1];
    size_t N = (size_t)B * T, HD = (size_t)c->n_heads * c->d_head;
    struct {
        size_t off, n;
    } buf[] = {{a->q, N * HD},
               {a->z, N * HD},
               {a->att, (size_t)B * c->n_heads * T * T},
               {a->mlp_pre, N * c->d_mlp},
               {a->mlp_post, N * c->d_mlp}};
    for (size_t i = 0; i < sizeof buf / sizeof buf[0]; i++) {
        if (buf[i].off == INDUCT_NONE) continue;
        float *x = induct__ws(m, buf[i].off);
        for (size_t j = 0; j < buf[i].n; j++) x[j] = NAN;
    }
}

/* Was the last layer computed at the rows only (the NaN left at another row of its
 * pattern, or of its MLP's output)? */
static int rows_only(const induct_model *m, uint32_t T, size_t other_row) {
    const induct__layer_act *a = &m->A[L - 1];
    if (m->cfg.d_mlp) return isnan(induct__ws(m, a->mlp_post)[other_row * m->cfg.d_mlp]);
    size_t b = other_row / T, p = other_row % T;
    return isnan(induct__ws(m, a->att)[(b * m->cfg.n_heads * T + p) * T]);
}

/* Were the queries gathered (the NaN left at another row)? */
static int q_gathered(const induct_model *m, size_t other_row) {
    const float *q = induct__ws(m, m->A[L - 1].q);
    return isnan(q[other_row * m->cfg.n_heads * m->cfg.d_head]);
}

/* Bitwise: the rows pass's losses against the whole pass's losses at those rows. */
static void same_bits(const double *got, const float *full, const size_t *rows, size_t R,
                      uint32_t T, const char *what, const char *name) {
    for (size_t i = 0; i < R; i++) {
        size_t b = rows[i] / T, p = rows[i] % T;
        float want = full[b * (T - 1) + p], have = (float)got[i];
        ck_assert_msg(memcmp(&want, &have, sizeof want) == 0 && got[i] == (double)have,
                      "%s, %s: row %zu (seq %zu, pos %zu): loss %.9g vs the whole pass's %.9g",
                      name, what, i, b, p, got[i], (double)want);
    }
}

/* Steps 1-3 for one set of rows (ascending, at most MAXR); only: the last layer must be
 * computed at the rows only (1: at most an eighth of the positions) or whole (0);
 * gathered: the query product must have been gathered (1) or computed whole (0); -1:
 * either. */
static void check_rows(induct_model *m, const rows_variant *v, const int32_t *tok,
                       const size_t *rows, size_t R, int only, int gathered, const char *set) {
    const induct_model_config *c = &m->cfg;
    const uint32_t B = v->B, T = v->T;
    size_t N = (size_t)B * T, D = c->d_model, per = (size_t)B * c->n_heads * T * T;
    const size_t other = T + 1; /* a row nobody asks for */
    static double got[MAXR];
    static size_t rev[MAXR];
    char name[160];
    snprintf(name, sizeof name, "%s, %s rows", v->name, set);
    float *full = malloc(N * sizeof *full), *pert = malloc(N * D * sizeof *pert);
    float *clean_att = malloc(per * sizeof *clean_att);

    /* 1. from scratch */
    induct__pass p = induct__pass_of(tok, B, T);
    ck_ok(induct__forward(m, &p, NULL));
    memcpy(full, induct__ws(m, m->a_losses), (size_t)B * (T - 1) * sizeof *full);
    memcpy(clean_att, induct__ws(m, m->A[1].att), per * sizeof *clean_att);
    poison_last_layer(m, B, T);
    induct__pass pr = p;
    pr.rows = rows;
    pr.n_rows = R;
    pr.row_loss = got;
    ck_ok(induct__forward(m, &pr, NULL));
    ck_assert_msg(rows_only(m, T, other) == only,
                  "%s: the last layer computed at the rows only: %d, expected %d", name,
                  rows_only(m, T, other), only);
    if (gathered >= 0)
        ck_assert_msg(q_gathered(m, other) == gathered, "%s: queries gathered %d, expected %d",
                      name, q_gathered(m, other), gathered);
    same_bits(got, full, rows, R, T, "from scratch", name);

    /* 2. resumed after layer l0's attention from a changed residual stream (the
     * attribution's passes): the rows pass against the whole resumed pass; l0 = 1 with
     * an MLP runs only the last layer's MLP */
    for (uint32_t l0 = 0; l0 < (c->d_mlp ? 2u : 1u); l0++) {
        for (int preserve = 0; preserve < 2; preserve++) {
            ck_ok(induct__forward(m, &p, NULL)); /* the clean workspace */
            size_t off = c->d_mlp ? m->A[l0].resid_mid : m->A[l0 + 1].resid_pre;
            float *resid = induct__ws(m, off);
            for (size_t i = 0; i < N * D; i++)
                resid[i] += 0.3f * sinf(0.37f * (float)(i % 97) + (float)l0);
            memcpy(pert, resid, N * D * sizeof *pert);
            frozen fz = {clean_att};
            induct__hook hk = {INDUCT__HP_PATTERN, 1, 1, write_frozen, &fz, NULL};
            induct__pass q = induct__pass_of(tok, B, T);
            q.resume = l0 + 1;
            if (preserve && l0 == 0) {
                q.hooks[0] = &hk;
                q.n_hooks[0] = 1;
            }
            induct__pass qr = q;
            qr.rows = rows;
            qr.n_rows = R;
            qr.row_loss = got;
            poison_last_layer(m, B, T);
            ck_ok(induct__forward(m, &qr, NULL));
            /* a hook at the last layer: computed whole (correct first) */
            ck_assert_int_eq(rows_only(m, T, other), only && !(preserve && l0 == 0));
            memcpy(resid, pert, N * D * sizeof *pert);
            ck_ok(induct__forward(m, &q, NULL));
            memcpy(full, induct__ws(m, m->a_losses), (size_t)B * (T - 1) * sizeof *full);
            same_bits(got, full, rows, R, T, preserve ? "resumed, preserved patterns" : "resumed",
                      name);
        }
    }

    /* 3. rows in any order */
    for (size_t i = 0; i < R; i++) rev[i] = rows[R - 1 - i];
    ck_ok(induct__forward(m, &p, NULL));
    memcpy(full, induct__ws(m, m->a_losses), (size_t)B * (T - 1) * sizeof *full);
    poison_last_layer(m, B, T);
    pr.rows = rev;
    ck_ok(induct__forward(m, &pr, NULL));
    ck_assert_int_eq(rows_only(m, T, other), only);
    same_bits(got, full, rev, R, T, "rows in reverse order", name);
    free(full), free(pert), free(clean_att);
}

START_TEST(test_rows_pass) {
    const rows_variant *v = &VARIANTS[_i];
    const uint32_t V = 37, B = v->B, T = v->T;
    induct_model_config c;
    induct_model_config_init(&c, sizeof c);
    c.n_layers = L;
    c.d_model = v->d_model;
    c.n_heads = 2;
    c.d_head = v->d_head;
    c.d_mlp = v->d_mlp;
    c.layer_norm = v->layer_norm;
    c.positional = v->positional;
    c.smeared_keys = v->smeared;
    c.shortformer_layers = v->shortformer_layers;
    c.d_vocab = V;
    c.n_ctx = T;
    c.n_threads = v->threads;
    induct_model *m;
    ck_ok(induct_model_new(&m, &c));
    tu_randomize(m, 0.5, 90 + (uint64_t)_i);
    size_t N = (size_t)B * T;
    int32_t *tok = malloc(N * sizeof *tok);
    tu_tokens(tok, N, V, 5 + (uint64_t)_i);
    /* the ICL score's rows (early, late), then also the edges of the attention's query
     * tiles and of the sequence */
    const uint32_t two[] = {49, T - 10}, seven[] = {0, 7, 8, 49, T / 2 + 3, T - 10, T - 2};
    static size_t rows[MAXR];
    size_t R = 0;
    for (uint32_t b = 0; b < B; b++)
        for (int i = 0; i < 2; i++) rows[R++] = (size_t)b * T + two[i];
    check_rows(m, v, tok, rows, R, 1, 1, "two");
    R = 0;
    for (uint32_t b = 0; b < B; b++)
        for (int i = 0; i < 7; i++) rows[R++] = (size_t)b * T + seven[i];
    check_rows(m, v, tok, rows, R, 1, -1, "seven");
    R = 0; /* rows all 0 modulo 48: a gathered product would be as large as the whole */
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t t = (48 - (uint32_t)((size_t)b * T % 48)) % 48; t + 1 < T; t += 48)
            rows[R++] = (size_t)b * T + t;
    check_rows(m, v, tok, rows, R, 1, 0, "aligned");
    R = 0; /* every other position of every other sequence: the whole last layer */
    for (uint32_t b = 0; b < B; b += 2)
        for (uint32_t t = 0; t + 1 < T; t += 2) rows[R++] = (size_t)b * T + t;
    check_rows(m, v, tok, rows, R, 0, -1, "dense");
    free(tok);
    induct_model_free(m);
}
END_TEST

int main(void) {
    Suite *s = suite_create("rows");
    TCase *tc = tcase_create("rows");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_rows_pass, 0, N_VARIANTS);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
