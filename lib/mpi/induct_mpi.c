/* libinduct-mpi: the induct_comm table over an MPI communicator (a duplicate of the
 * caller's, errors returned). Only public libinduct API is used. */
#include <limits.h>
#include <stdlib.h>

#include "induct/induct_mpi.h"

#if defined(__GNUC__)
#define INDUCT_MPI_API __attribute__((visibility("default")))
#else
#define INDUCT_MPI_API
#endif

#define TAG 0x1d
#define PIECE ((size_t)1 << 30) /* MPI counts are int */

struct induct_mpi_comm {
    induct_comm table;
    MPI_Comm comm;
};

static int mpi_sendrecv(void *user, uint32_t peer, const void *sendbuf, size_t send_bytes,
                        void *recvbuf, size_t recv_bytes) {
    induct_mpi_comm *c = user;
    const char *s = sendbuf;
    char *r = recvbuf;
    size_t ns = (send_bytes + PIECE - 1) / PIECE, nr = (recv_bytes + PIECE - 1) / PIECE;
    size_t pieces = ns > nr ? ns : nr;
    if (pieces == 0) pieces = 1; /* one empty message: the peer may expect bytes */
    for (size_t i = 0; i < pieces; i++) {
        size_t off = i * PIECE;
        int cs = off < send_bytes ? (int)(send_bytes - off < PIECE ? send_bytes - off : PIECE) : 0;
        int cr = off < recv_bytes ? (int)(recv_bytes - off < PIECE ? recv_bytes - off : PIECE) : 0;
        MPI_Status st;
        if (MPI_Sendrecv(cs ? s + off : s, cs, MPI_BYTE, (int)peer, TAG, cr ? r + off : r, cr,
                         MPI_BYTE, (int)peer, TAG, c->comm, &st) != MPI_SUCCESS)
            return INDUCT_EIO;
        int got = 0;
        if (MPI_Get_count(&st, MPI_BYTE, &got) != MPI_SUCCESS || got != cr) return INDUCT_EINVAL;
    }
    return 0;
}

static int mpi_barrier(void *user) {
    induct_mpi_comm *c = user;
    return MPI_Barrier(c->comm) == MPI_SUCCESS ? 0 : INDUCT_EIO;
}

static void mpi_abort(void *user, int status) {
    induct_mpi_comm *c = user;
    MPI_Abort(c->comm, status < 0 ? -status : 1);
}

INDUCT_MPI_API int induct_mpi_comm_new(induct_mpi_comm **out, MPI_Comm comm) {
    if (!out) return INDUCT_EINVAL;
    *out = NULL;
    if (comm == MPI_COMM_NULL) return INDUCT_EINVAL;
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) return INDUCT_ESTATE;
    induct_mpi_comm *c = calloc(1, sizeof *c);
    if (!c) return INDUCT_ENOMEM;
    int rank = 0, size = 0;
    if (MPI_Comm_dup(comm, &c->comm) != MPI_SUCCESS) {
        free(c);
        return INDUCT_EIO;
    }
    if (MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
        MPI_Comm_rank(c->comm, &rank) != MPI_SUCCESS ||
        MPI_Comm_size(c->comm, &size) != MPI_SUCCESS) {
        MPI_Comm_free(&c->comm);
        free(c);
        return INDUCT_EIO;
    }
    c->table.size = sizeof c->table;
    c->table.rank = (uint32_t)rank;
    c->table.n_ranks = (uint32_t)size;
    c->table.user = c;
    c->table.sendrecv = mpi_sendrecv;
    c->table.barrier = mpi_barrier;
    c->table.abort = mpi_abort;
    *out = c;
    return INDUCT_OK;
}

INDUCT_MPI_API const induct_comm *induct_mpi_comm_table(const induct_mpi_comm *c) {
    return c ? &c->table : NULL;
}

INDUCT_MPI_API void induct_mpi_comm_free(induct_mpi_comm *c) {
    if (!c) return;
    MPI_Comm_free(&c->comm);
    free(c);
}
