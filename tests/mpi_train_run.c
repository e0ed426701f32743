/* A data-parallel training run under mpirun (tests/killtest.py, "ranks"): every rank
 * trains a small attention-only model with induct_train() over libinduct-mpi, 12
 * gradient shards (any of 1, 2, 3, 4, 6 ranks divides them), a metrics log and
 * log-spaced snapshots written by rank 0 (model + optimizer: each a resume point).
 *
 *   mpi_train_run --out DIR --steps N [--resume DIR/ckpt-<step>.safetensors]
 *
 * Without mpirun it is one process (MPI's singleton start), the reference the ranks
 * must equal bit for bit. Exit status 0 when the run reached N, 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <induct/induct_mpi.h>

#define T 32u
#define B 12u

static int fail(int rank, int rc, const char *what) {
    fprintf(stderr, "mpi_train_run: rank %d: %s: %s (%s)\n", rank, what, induct_status_name(rc),
            induct_last_error_message());
    return 1;
}

int main(int argc, char **argv) {
    const char *out = NULL, *resume = NULL;
    unsigned long long steps = 16;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--out")) out = argv[i + 1];
        else if (!strcmp(argv[i], "--resume")) resume = argv[i + 1];
        else if (!strcmp(argv[i], "--steps")) steps = strtoull(argv[i + 1], NULL, 10);
    }
    if (!out || strlen(out) > 3000) {
        fprintf(stderr, "usage: mpi_train_run --out DIR --steps N [--resume FILE]\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    int rank = 0, rc;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    induct_model *m = NULL;
    induct_optimizer *o = NULL;
    if (resume) {
        if ((rc = induct_model_load(&m, resume)) || (rc = induct_optimizer_load(&o, m, resume)))
            return fail(rank, rc, "resume");
        induct_model_set_threads(m, 1);
    } else {
        induct_model_config mc;
        induct_model_config_init(&mc, sizeof mc);
        mc.n_layers = 2;
        mc.d_model = 32;
        mc.n_heads = 2;
        mc.n_ctx = T;
        mc.d_vocab = 32;
        mc.n_threads = 1;
        if ((rc = induct_model_new(&m, &mc)) || (rc = induct_optimizer_new(&o, m, INDUCT_OPTIM_ADAMW)) ||
            (rc = induct_optimizer_set(o, INDUCT_OPT_GRAD_SHARDS, 12)))
            return fail(rank, rc, "model");
    }
    induct_rrt_config rc_;
    induct_rrt_config_init(&rc_, sizeof rc_);
    rc_.d_vocab = 32;
    rc_.seed = 3;
    induct_dataset *d;
    if ((rc = induct_dataset_new_rrt(&d, &rc_))) return fail(rank, rc, "dataset");
    induct_mpi_comm *comm;
    if ((rc = induct_mpi_comm_new(&comm, MPI_COMM_WORLD)) ||
        (rc = induct_optimizer_set_comm(o, induct_mpi_comm_table(comm))))
        return fail(rank, rc, "communicator");
    char metrics[4096], snaps[4096];
    snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", out);
    snprintf(snaps, sizeof snaps, "%s/ckpt-{step}.safetensors", out);
    induct_train_config tc;
    induct_train_config_init(&tc, sizeof tc);
    tc.steps = steps;
    tc.batch = B;
    tc.seq_len = T;
    tc.eval_every = 1;
    tc.eval_batch = 12;
    tc.metrics_path = metrics; /* rank 0 alone writes files */
    tc.metrics_append = resume != NULL;
    tc.snapshot_log2 = 1;
    tc.snapshot_path = snaps;
    rc = induct_train(o, d, &tc, NULL, NULL);
    int status = rc ? fail(rank, rc, "training") : 0;
    induct_optimizer_free(o);
    induct_model_free(m);
    induct_dataset_free(d);
    induct_mpi_comm_free(comm);
    MPI_Finalize();
    return status;
}
