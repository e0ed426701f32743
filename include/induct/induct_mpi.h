/**
 * @file induct_mpi.h
 * @brief libinduct-mpi: an ::induct_comm over an MPI communicator.
 *
 * A separate library (built with `-Dmpi=enabled`, linked as `-linduct-mpi -linduct`
 * plus MPI), so that libinduct itself never links MPI and its header never depends on
 * one MPI's type for a communicator. Data-parallel training over MPI: call MPI_Init(),
 * make the table with induct_mpi_comm_new(), give induct_mpi_comm_table() to
 * induct_optimizer_set_comm() on every rank, train, free, MPI_Finalize(). See
 * docs/distributed.md.
 */
#ifndef INDUCT_MPI_H
#define INDUCT_MPI_H

#include <mpi.h>

#include "induct.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief An MPI rank as a libinduct communicator. @since 0.1 */
typedef struct induct_mpi_comm induct_mpi_comm;

/**
 * @brief Wrap `comm` (collective over it: every rank calls this together). The library
 * duplicates `comm` (MPI_Comm_dup), so its messages never meet the caller's, and sets
 * MPI_ERRORS_RETURN on the duplicate: a failed transfer fails the training step with
 * ::INDUCT_EIO instead of ending the process. `sendrecv` is MPI_Sendrecv of bytes
 * (buffers above 2^30 bytes in 2^30-byte pieces), `barrier` MPI_Barrier, `abort`
 * MPI_Abort (a rank whose step failed ends every rank rather than leave them
 * waiting).
 * @param[out] out Owned by the caller, released with induct_mpi_comm_free(); NULL on
 *             failure.
 * @param comm An intracommunicator of any size up to 65536 (checked when the table is
 *             attached: induct_optimizer_set_comm()); a training step needs the size to
 *             divide ::INDUCT_OPT_GRAD_SHARDS.
 * @return ::INDUCT_OK; ::INDUCT_EINVAL (NULL out, MPI_COMM_NULL); ::INDUCT_ESTATE (MPI
 *         not initialised, or finalised); ::INDUCT_ENOMEM; ::INDUCT_EIO (an MPI call
 *         failed).
 * @since 0.1 Needs MPI's thread level of the calling thread only (MPI_THREAD_SINGLE
 *        suffices when training runs on the thread that called MPI_Init()).
 */
int induct_mpi_comm_new(induct_mpi_comm **out, MPI_Comm comm);

/** @brief The table to give to induct_optimizer_set_comm() (valid until
 *  induct_mpi_comm_free()).
 *  @param c The communicator.
 *  @return The table, or NULL for a NULL `c`.
 *  @since 0.1 Thread-safe. */
const induct_comm *induct_mpi_comm_table(const induct_mpi_comm *c);

/** @brief Release the duplicate communicator (collective: every rank calls it) and the
 *  table. Detach it from every optimizer first (induct_optimizer_set_comm() with NULL, or
 *  free the optimizer): an optimizer that still holds the table would call into freed
 *  memory at its next step. Call it before MPI_Finalize().
 *  @param c The communicator, or NULL (a no-op).
 *  @since 0.1 Needs the same MPI thread level as induct_mpi_comm_new(). */
void induct_mpi_comm_free(induct_mpi_comm *c);

#ifdef __cplusplus
}
#endif
#endif
