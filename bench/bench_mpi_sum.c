/* bench_mpi_sum: libinduct's gradient sum across ranks (recursive halving and doubling in
 * the shard tree's order, over libinduct-mpi's MPI_Sendrecv) against MPI_Allreduce
 * (MPI_SUM, in place) on the same float vectors. Not a test. Run under mpirun:
 *
 *   mpirun -np 2 build/bench/bench_mpi_sum [reps]
 *
 * Prints, per vector length, the median wall milliseconds of each over `reps` calls
 * (default 20), all ranks released together by a barrier before each call. White-box:
 * links the internal library for the tree sum alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/train.h"
#include "induct/induct_mpi.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int reps = argc > 1 ? atoi(argv[1]) : 20, rank, size;
    if (reps < 1) reps = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    induct_mpi_comm *mc;
    if (induct_mpi_comm_new(&mc, MPI_COMM_WORLD) != INDUCT_OK) MPI_Abort(MPI_COMM_WORLD, 1);
    const induct_comm *c = induct_mpi_comm_table(mc);
    static const size_t NS[] = {1000, 10000, 100000, 1000000, 4000000};
    double *ta = malloc(reps * sizeof *ta), *tb = malloc(reps * sizeof *tb);
    if (rank == 0)
        printf("%d ranks | floats | MPI_Allreduce ms | libinduct tree ms | tree / Allreduce\n",
               size);
    for (size_t k = 0; k < sizeof NS / sizeof NS[0]; k++) {
        size_t n = NS[k];
        float *g = malloc(n * sizeof *g), *recv = malloc((n - n / 2) * sizeof *recv);
        for (int r = -2; r < reps; r++) { /* two warm-up calls */
            for (size_t i = 0; i < n; i++) g[i] = (float)((i * 7 + (size_t)rank) % 13) * 0.1f;
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, g, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double t1 = MPI_Wtime();
            for (size_t i = 0; i < n; i++) g[i] = (float)((i * 7 + (size_t)rank) % 13) * 0.1f;
            double loss = 1.0;
            MPI_Barrier(MPI_COMM_WORLD);
            double t2 = MPI_Wtime();
            if (induct__comm_tree_sum(c, g, n, recv, &loss) != INDUCT_OK)
                MPI_Abort(MPI_COMM_WORLD, 1);
            double t3 = MPI_Wtime();
            if (r >= 0) {
                ta[r] = (t1 - t0) * 1e3;
                tb[r] = (t3 - t2) * 1e3;
            }
        }
        qsort(ta, reps, sizeof *ta, cmp);
        qsort(tb, reps, sizeof *tb, cmp);
        if (rank == 0)
            printf("%d | %zu | %.3f | %.3f | %.2f\n", size, n, ta[reps / 2], tb[reps / 2],
                   tb[reps / 2] / ta[reps / 2]);
        free(g);
        free(recv);
    }
    free(ta);
    free(tb);
    induct_mpi_comm_free(mc);
    MPI_Finalize();
    return 0;
}
