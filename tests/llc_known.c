/* Runs induct_llc_sample() on a potential whose learning coefficient is known and prints
 * the estimate as one JSON object; tests/test_llc_known.py computes the reference values
 * (closed forms and quadratures) and compares. Public API only.
 *
 * usage: llc_known KIND [--powers P,P,...] [--rrr M,H,N] [--nbeta X] [--eps X]
 *                  [--gamma X] [--chains N] [--draws N] [--burnin N] [--every N]
 *                  [--seed N] [--mask-out I]
 * KIND:
 *   monomial  K(w) = 1/2 sum_i w_i^(p_i)          (w* = 0; p_i even; a Gaussian for 2)
 *   crossing  K(w) = 1/2 prod_i w_i^(2 p_i)       (the normal-crossing model f = x prod
 *             w_i^p_i of devinterp's tests, its population loss for E[x^2] = 1, w* = 0)
 *   rrr       K(A, B) = 1/2 |B A|_F^2, A [H][M], B [N][H], w* = 0 (reduced-rank regression
 *             y = B A x with x ~ N(0, I) and the true map 0: Aoyagi & Watanabe 2005)
 * --mask-out I holds coordinate I at w* (the mask's 0) and samples the others. */
#include <getopt.h>
#include <induct/induct.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DIM 256

typedef struct problem {
    int kind; /* 0 monomial, 1 crossing, 2 rrr */
    int p[MAX_DIM];
    size_t dim;
    int M, H, N;
} problem;

/* w^k for a small non-negative integer k (exact products, no pow) */
static double ipow(double w, int k) {
    double r = 1.0;
    for (int i = 0; i < k; i++) r *= w;
    return r;
}

static int potential(void *user, const double *w, size_t dim, uint64_t batch, double *loss,
                     double *g) {
    const problem *P = user;
    (void)batch;
    if (P->kind == 0) {
        double L = 0.0;
        for (size_t i = 0; i < dim; i++) {
            L += 0.5 * ipow(w[i], P->p[i]);
            g[i] = 0.5 * P->p[i] * ipow(w[i], P->p[i] - 1);
        }
        *loss = L;
        return 0;
    }
    if (P->kind == 1) {
        double f = 1.0;
        for (size_t i = 0; i < dim; i++) f *= ipow(w[i], P->p[i]);
        *loss = 0.5 * f * f;
        for (size_t i = 0; i < dim; i++) {
            if (!P->p[i]) continue;
            double o = 1.0;
            for (size_t j = 0; j < dim; j++)
                if (j != i) o *= ipow(w[j], P->p[j]);
            g[i] = f * o * P->p[i] * ipow(w[i], P->p[i] - 1);
        }
        return 0;
    }
    const int M = P->M, H = P->H, N = P->N;
    const double *A = w, *B = w + (size_t)H * M;
    double C[MAX_DIM];
    double L = 0.0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < M; j++) {
            double s = 0.0;
            for (int h = 0; h < H; h++) s += B[i * H + h] * A[h * M + j];
            C[i * M + j] = s;
            L += 0.5 * s * s;
        }
    double *gA = g, *gB = g + (size_t)H * M;
    for (int h = 0; h < H; h++)
        for (int j = 0; j < M; j++) {
            double s = 0.0;
            for (int i = 0; i < N; i++) s += B[i * H + h] * C[i * M + j];
            gA[h * M + j] = s;
        }
    for (int i = 0; i < N; i++)
        for (int h = 0; h < H; h++) {
            double s = 0.0;
            for (int j = 0; j < M; j++) s += C[i * M + j] * A[h * M + j];
            gB[i * H + h] = s;
        }
    *loss = L;
    return 0;
}

static void die(const char *what) {
    fprintf(stderr, "llc_known: %s\n", what);
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 2) die("usage: llc_known monomial|crossing|rrr [options]");
    problem P;
    memset(&P, 0, sizeof P);
    if (!strcmp(argv[1], "monomial")) P.kind = 0;
    else if (!strcmp(argv[1], "crossing")) P.kind = 1;
    else if (!strcmp(argv[1], "rrr")) P.kind = 2;
    else die("unknown kind");
    induct_llc_config c;
    induct_llc_config_init(&c, sizeof c);
    c.nbeta_rule = INDUCT_LLC_NBETA_FIXED;
    c.nbeta = 100.0;
    long mask_out = -1;
    static const struct option opts[] = {
        {"powers", required_argument, 0, 'p'}, {"rrr", required_argument, 0, 'r'},
        {"nbeta", required_argument, 0, 'n'},  {"eps", required_argument, 0, 'e'},
        {"gamma", required_argument, 0, 'g'},  {"chains", required_argument, 0, 'c'},
        {"draws", required_argument, 0, 'd'},  {"burnin", required_argument, 0, 'b'},
        {"every", required_argument, 0, 'v'},  {"seed", required_argument, 0, 's'},
        {"mask-out", required_argument, 0, 'm'}, {0, 0, 0, 0}};
    int o;
    optind = 2;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'p':
            for (char *s = strtok(optarg, ","); s; s = strtok(NULL, ",")) {
                if (P.dim >= MAX_DIM) die("too many powers");
                P.p[P.dim++] = atoi(s);
            }
            break;
        case 'r':
            if (sscanf(optarg, "%d,%d,%d", &P.M, &P.H, &P.N) != 3) die("--rrr M,H,N");
            break;
        case 'n': c.nbeta = atof(optarg); break;
        case 'e': c.epsilon = atof(optarg); break;
        case 'g': c.gamma = atof(optarg); break;
        case 'c': c.chains = (uint32_t)atoi(optarg); break;
        case 'd': c.draws = (uint32_t)atoi(optarg); break;
        case 'b': c.burnin = (uint32_t)atoi(optarg); break;
        case 'v': c.every = (uint32_t)atoi(optarg); break;
        case 's': c.seed = strtoull(optarg, NULL, 10); break;
        case 'm': mask_out = atol(optarg); break;
        default: die("bad option");
        }
    }
    if (P.kind == 2) {
        if (P.M < 1 || P.H < 1 || P.N < 1 || P.M * P.N > MAX_DIM ||
            (size_t)P.H * (P.M + P.N) > MAX_DIM)
            die("--rrr M,H,N out of range");
        P.dim = (size_t)P.H * (P.M + P.N);
    }
    if (P.dim == 0) die("no dimensions (--powers or --rrr)");
    double w_star[MAX_DIM] = {0};
    uint8_t mask[MAX_DIM];
    memset(mask, 1, sizeof mask);
    if (mask_out >= 0) {
        if ((size_t)mask_out >= P.dim) die("--mask-out out of range");
        mask[mask_out] = 0;
    }
    induct_llc_result *r;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = induct_llc_sample(&r, potential, &P, w_star, P.dim, mask_out >= 0 ? mask : NULL, &c);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc) {
        printf("{\"status\": \"%s\", \"message\": \"%s\"}\n", induct_status_name(rc),
               induct_last_error_message());
        return 1;
    }
    induct_llc_summary s;
    s.size = sizeof s;
    if (induct_llc_result_summary(r, &s)) die(induct_last_error_message());
    double chains[1024];
    size_t n;
    if (c.chains > 1024 || induct_llc_result_get(r, INDUCT_LLC_CHAIN_LLC, chains, 1024, &n))
        die("chains");
    printf("{\"status\": \"INDUCT_OK\", \"llc_mean\": %.17g, \"llc_std\": %.17g, "
           "\"llc_se\": %.17g, \"nbeta\": %.17g, \"init_loss\": %.17g, \"n_sampled\": %llu, "
           "\"seconds\": %.3f, \"chains\": [",
           s.llc_mean, s.llc_std, s.llc_se, s.nbeta, s.init_loss,
           (unsigned long long)s.n_sampled,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    for (size_t i = 0; i < n; i++) printf("%s%.17g", i ? ", " : "", chains[i]);
    printf("]}\n");
    induct_llc_result_free(r);
    return 0;
}
