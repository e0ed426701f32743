"""Run under mpirun (bindings/python/meson.build, -Dmpi=enabled): every rank trains with
an mpi4py communicator passed through induct.Comm.from_mpi4py and checks its weights and
losses, bit for bit, against a one-process run with the same grad_shards that it
computes itself. Exit status 77 (skipped) without mpi4py, unless CI=true."""
import os
import sys

try:
    from mpi4py import MPI
except ImportError:
    print("mpi4py is not installed (Debian: python3-mpi4py)")
    sys.exit(1 if os.environ.get("CI") == "true" else 77)

import numpy as np

import induct

S, B, T, STEPS = 24, 24, 16, 4  # S: any of 1, 2, 3, 4, 6, 8 ranks divides it


def train(comm):
    m = induct.Model(n_layers=2, d_model=16, n_heads=2, n_ctx=T, d_vocab=12, layer_norm=1,
                     d_mlp=32, seed=4)
    m.set_threads(1)
    o = induct.Optimizer(m, "adamw", lr=1e-2, grad_shards=S)
    if comm is not None:
        o.set_comm(comm)
    d = induct.Dataset.rrt(d_vocab=12, min_block=3, seed=2)
    losses = [o.train_step(d, B, T) for _ in range(STEPS)]
    w = np.concatenate([np.ravel(v) for v in m.weights().values()])
    return w, losses


world = MPI.COMM_WORLD
comm = induct.Comm.from_mpi4py(world)
assert (comm.rank, comm.n_ranks) == (world.Get_rank(), world.Get_size())
w1, l1 = train(None)
wp, lp = train(comm)
ok = np.array_equal(w1.view(np.uint32), wp.view(np.uint32)) and l1 == lp
gathered = world.gather(wp.tobytes(), root=0)
if world.Get_rank() == 0:
    ok = ok and all(g == gathered[0] for g in gathered)
ok = world.allreduce(int(not ok), op=MPI.MAX) == 0
if world.Get_rank() == 0:
    print(f"mpi4py: {world.Get_size()} ranks, grad_shards {S}: "
          f"{'bit-identical' if ok else 'DIFFERENT'} to one process")
sys.exit(0 if ok else 1)
