"""Gradient shards and communicators from Python: thread ranks and a communicator made
of Python functions give the weights of one process with the same grad_shards, bit for
bit; a failing Python send-and-receive raises on its rank and releases the other."""
import queue
import threading

import numpy as np
import pytest

import induct

S, B, T, STEPS = 4, 8, 16, 3


def _setup():
    m = induct.Model(n_layers=2, d_model=16, n_heads=2, n_ctx=T, d_vocab=12, layer_norm=1,
                     d_mlp=32, seed=4)
    m.set_threads(1)
    o = induct.Optimizer(m, "adamw", lr=1e-2, grad_shards=S)
    return m, o


def _weights(m):
    return np.concatenate([np.ravel(w) for w in m.weights().values()])


def _alone():
    d = induct.Dataset.rrt(d_vocab=12, min_block=3, seed=2)
    m, o = _setup()
    losses = [o.train_step(d, B, T) for _ in range(STEPS)]
    return _weights(m), losses


def _run_ranks(comms):
    """Each rank on its own thread; returns [(weights, losses) or the exception]."""
    d = induct.Dataset.rrt(d_vocab=12, min_block=3, seed=2)
    out = [None] * len(comms)

    def rank(r):
        try:
            m, o = _setup()
            o.set_comm(comms[r])
            losses = [o.train_step(d, B, T) for _ in range(STEPS)]
            out[r] = (_weights(m), losses)
        except induct.InductError as e:
            out[r] = e

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(comms))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a rank hangs"
    return out


def test_grad_shards_parameter():
    m, o = _setup()
    assert o["grad_shards"] == S
    assert induct.Optimizer.bounds("grad_shards") == (1.0, 65536.0)
    with pytest.raises(induct.OutOfRange):
        o["grad_shards"] = 2.5
    d = induct.Dataset.rrt(d_vocab=12, min_block=3, seed=2)
    with pytest.raises(induct.InvalidArgument, match="not a multiple of INDUCT_OPT_GRAD_SHARDS"):
        o.train_step(d, 6, T)


@pytest.mark.parametrize("P", [1, 2, 4])
def test_thread_ranks_bit_identical(P):
    want_w, want_l = _alone()
    with induct.ThreadRanks(P) as ranks:
        got = _run_ranks([ranks[r] for r in range(P)])
    for w, losses in got:
        assert np.array_equal(w.view(np.uint32), want_w.view(np.uint32))
        assert losses == want_l


class _QueueWorld:
    """P ranks of Python functions over queues (one per directed pair), with an abort
    that wakes every waiting receiver."""

    def __init__(self, P, fail_rank=None):
        self.q = {(a, b): queue.Queue() for a in range(P) for b in range(P)}
        self.aborted = threading.Event()
        self.P, self.fail_rank = P, fail_rank

    def comm(self, r):
        def sendrecv(peer, send, recv):
            if r == self.fail_rank:
                raise RuntimeError("link down")
            self.q[(r, peer)].put(bytes(send))
            while True:
                if self.aborted.is_set():
                    raise RuntimeError("aborted by another rank")
                try:
                    data = self.q[(peer, r)].get(timeout=0.05)
                    break
                except queue.Empty:
                    pass
            recv[:] = data

        def abort(status):
            self.aborted.set()

        return induct.Comm(r, self.P, sendrecv, lambda: None, abort)


def test_python_comm_bit_identical():
    want_w, want_l = _alone()
    world = _QueueWorld(2)
    got = _run_ranks([world.comm(r) for r in range(2)])
    for w, losses in got:
        assert np.array_equal(w.view(np.uint32), want_w.view(np.uint32))
        assert losses == want_l


def test_failing_python_sendrecv():
    world = _QueueWorld(2, fail_rank=1)
    comms = [world.comm(r) for r in range(2)]
    got = _run_ranks(comms)
    assert all(isinstance(e, induct.IOFailure) for e in got), got
    assert "link down" in str(comms[1].errors[0])
    assert "aborted" in str(comms[0].errors[0])


def test_comm_refusals():
    m, o = _setup()
    with pytest.raises(induct.InvalidArgument, match="power of two"):
        o.set_comm(induct.Comm(0, 3, lambda *a: None, lambda: None))
    with pytest.raises(induct.InvalidArgument):
        induct.ThreadRanks(3)
    with induct.ThreadRanks(2) as ranks:
        with pytest.raises(IndexError):
            ranks[2]
        o.set_comm(ranks[1])
        o.set_comm(None)
