/* Run under mpirun (tests/meson.build, -Dmpi=enabled): every rank trains a tiny model
 * (2 layers, LayerNorm, MLP) for 5 AdamW steps with 24 gradient shards (divided by 1, 2,
 * 3, 4, 6, 8, 12 or 24 ranks) over libinduct-mpi and compares its weights and losses,
 * bit for bit, with a one-process run of the same shard count that it computes itself; then rank 0 gathers every rank's weights and
 * checks they are all the same. Exit status 0 on success, 1 on a difference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <induct/induct_mpi.h>

#define B 24u
#define T 8u
#define S 24u
#define STEPS 5

static void die(int rc, const char *what) {
    if (rc == INDUCT_OK) return;
    fprintf(stderr, "mpi_ranks: %s: %s (%s)\n", what, induct_status_name(rc),
            induct_last_error_message());
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* Train STEPS steps (with `comm`, or alone for NULL); weights into a new array. */
static float *train(const induct_comm *comm, const induct_dataset *d, double *loss,
                    size_t *n_out) {
    induct_model_config c;
    die(induct_model_config_init(&c, sizeof c), "config");
    c.n_layers = 2;
    c.d_model = 16;
    c.n_heads = 2;
    c.d_mlp = 32;
    c.layer_norm = 1;
    c.n_ctx = T;
    c.d_vocab = 11;
    c.seed = 7;
    c.n_threads = 1;
    induct_model *m;
    induct_optimizer *o;
    die(induct_model_new(&m, &c), "model");
    die(induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW), "optimizer");
    die(induct_optimizer_set(o, INDUCT_OPT_LR, 3e-2), "lr");
    die(induct_optimizer_set(o, INDUCT_OPT_GRAD_SHARDS, S), "shards");
    if (comm) die(induct_optimizer_set_comm(o, comm), "set_comm");
    for (int s = 0; s < STEPS; s++) die(induct_train_step(o, d, B, T, &loss[s]), "step");
    size_t n = induct_model_n_params(m), at = 0;
    float *w = malloc(n * sizeof *w);
    for (size_t i = 0; i < induct_model_n_tensors(m); i++) {
        const char *name;
        size_t k, len;
        die(induct_model_tensor_info(m, i, &name, NULL, NULL, &k), "tensor_info");
        die(induct_model_get_tensor(m, name, INDUCT_BUF_PARAM, w + at, k, &len), "get");
        at += k;
    }
    induct_optimizer_free(o);
    induct_model_free(m);
    *n_out = n;
    return w;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    induct_rrt_config rc;
    induct_rrt_config_init(&rc, sizeof rc);
    rc.d_vocab = 11;
    rc.min_block = 2;
    rc.seed = 5;
    induct_dataset *d;
    die(induct_dataset_new_rrt(&d, &rc), "dataset");
    induct_mpi_comm *mc;
    die(induct_mpi_comm_new(&mc, MPI_COMM_WORLD), "induct_mpi_comm_new");
    double l1[STEPS], lp[STEPS];
    size_t n;
    float *alone = train(NULL, d, l1, &n);
    float *ranked = train(induct_mpi_comm_table(mc), d, lp, &n);
    int bad = memcmp(alone, ranked, n * sizeof(float)) != 0 ||
              memcmp(l1, lp, sizeof l1) != 0;
    if (bad) fprintf(stderr, "mpi_ranks: rank %d of %d differs from one process\n", rank, size);
    float *all = rank == 0 ? malloc(n * size * sizeof *all) : NULL;
    MPI_Gather(ranked, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int r = 1; r < size; r++)
            if (memcmp(all, all + (size_t)r * n, n * sizeof(float))) {
                fprintf(stderr, "mpi_ranks: rank %d's weights differ from rank 0's\n", r);
                bad = 1;
            }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any)
        printf("mpi_ranks: %d ranks, %u shards, %d steps: weights and losses bit-identical "
               "to one process (loss %.6f -> %.6f)\n", size, S, STEPS, l1[0], l1[STEPS - 1]);
    free(all);
    free(alone);
    free(ranked);
    induct_mpi_comm_free(mc);
    induct_dataset_free(d);
    MPI_Finalize();
    return any ? 1 : 0;
}
