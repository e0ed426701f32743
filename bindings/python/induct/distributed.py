"""Data-parallel training whose weights are bit-identical for any number of ranks.

An optimizer with ``grad_shards=S`` splits each batch into S shards and adds their
gradients in one fixed binary tree; with a communicator of P ranks (any P
dividing S) each rank computes S/P shards and the ranks complete the same tree over the
communicator. Two communicators: ``ThreadRanks(P)``, P ranks that are threads of this
process (libinduct's own), and ``Comm``, a rank whose send-and-receive, barrier and
abort are Python functions (``Comm.from_mpi4py`` builds one from an mpi4py
communicator). Give rank r to its optimizer with ``Optimizer.set_comm``. Guide:
docs/distributed.md."""
from ._capi import Out, call, comm_address, comm_table, value
from ._errors import InductError
from .core import _Handle


class _RankRef:
    """Rank r of a ThreadRanks group (keeps the group alive)."""

    def __init__(self, group, rank, address):
        self.group, self.rank, self.n_ranks, self._addr = group, rank, group.n_ranks, address

    def _address(self):
        if self.group.closed:
            raise ValueError("ThreadRanks is closed")
        return self._addr

    def __repr__(self):
        return f"<induct.ThreadRanks rank {self.rank} of {self.n_ranks}>"


class ThreadRanks(_Handle):
    """P ranks (1 ... 64) that are threads of this process sharing
    memory: ``ranks[r]`` is rank r's communicator; run each rank's training on its own
    thread (the C calls release the GIL). Close it only after every rank is done."""

    _free = "induct_comm_threads_free"

    def __init__(self, n_ranks):
        out = Out("handle")
        call("induct_comm_threads_new", out, n_ranks)
        super().__init__(out.value)
        self.n_ranks = int(n_ranks)

    def __len__(self):
        return self.n_ranks

    def __getitem__(self, rank):
        if not isinstance(rank, int) or not 0 <= rank < self.n_ranks:
            raise IndexError(f"rank must be an int in [0, {self.n_ranks}), got {rank!r}")
        addr = value("induct_comm_threads_rank", self, rank)
        if not addr:  # cannot happen for a checked rank of an open group
            raise InductError("induct_comm_threads_rank returned NULL")
        return _RankRef(self, rank, addr)

    def _repr_fields(self):
        return f"n_ranks={self.n_ranks}"


class Comm:
    """One rank of a communicator whose operations are Python functions:
    ``sendrecv(peer, send, recv)`` sends the bytes of the read-only memoryview `send` to
    rank `peer` and fills the writable memoryview `recv` with what `peer` sends (both
    valid during the call only), blocking until both are done; ``barrier()``;
    ``abort(status)`` (optional) must make pending and later calls of the other ranks
    fail. An exception in a callback fails the training step with induct.IOFailure; it
    is kept in ``errors``."""

    def __init__(self, rank, n_ranks, sendrecv, barrier, abort=None):
        self.rank, self.n_ranks = int(rank), int(n_ranks)
        self.errors = []
        self._table, self._keep = comm_table(self.rank, self.n_ranks, sendrecv, barrier, abort,
                                             self.errors)

    def _address(self):
        return comm_address(self._table)

    @classmethod
    def from_mpi4py(cls, mpi_comm, abort=True):
        """A rank of an mpi4py communicator (``MPI.COMM_WORLD`` or any intracommunicator):
        its rank and size, Sendrecv of byte buffers, Barrier, and (with abort=True)
        Abort on a failed step, which ends every process of the communicator rather
        than leave them waiting."""
        def sendrecv(peer, send, recv):
            mpi_comm.Sendrecv(send, dest=peer, sendtag=0x1d, recvbuf=recv, source=peer,
                              recvtag=0x1d)

        def mpi_abort(status):
            mpi_comm.Abort(1)

        return cls(mpi_comm.Get_rank(), mpi_comm.Get_size(), sendrecv, mpi_comm.Barrier,
                   mpi_abort if abort else None)

    def __repr__(self):
        return f"<induct.Comm rank {self.rank} of {self.n_ranks}>"
