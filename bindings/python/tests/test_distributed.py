"""Gradient shards and communicators from Python: thread ranks and a communicator made
of Python functions give the weights of one process with the same grad_shards, bit for
bit (with hooks in the steps too); a failing Python send-and-receive raises on its rank
and releases the other."""
import contextlib
import queue
import threading

import numpy as np
import pytest

import induct

S, B, T, STEPS = 12, 12, 16, 3


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


def _run_ranks(comms, hooks=None):
    """Each rank on its own thread (inside `with m.hooks(hooks(m, r))` if hooks is given);
    returns [(weights, losses) or the exception]."""
    d = induct.Dataset.rrt(d_vocab=12, min_block=3, seed=2)
    out = [None] * len(comms)

    def rank(r):
        try:
            m, o = _setup()
            o.set_comm(comms[r])
            with m.hooks(hooks(m, r)) if hooks else contextlib.nullcontext():
                losses = [o.train_step(d, B, T) for _ in range(STEPS)]
            out[r] = (_weights(m), losses)
        except induct.InductError as e:
            out[r] = e

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(comms))]
    for t in threads:
        t.start()
    for t in threads:  # no time limit here: a hang is the test runner's timeout
        t.join()
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


@pytest.mark.parametrize("P", [1, 2, 3, 4, 6])
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


@pytest.mark.parametrize("P", [2, 3])
def test_python_comm_bit_identical(P):
    want_w, want_l = _alone()
    world = _QueueWorld(P)
    got = _run_ranks([world.comm(r) for r in range(P)])
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
    with pytest.raises(induct.InvalidArgument, match="n_ranks 65537 is not in 1 ... 65536"):
        o.set_comm(induct.Comm(0, 65537, lambda *a: None, lambda: None))
    with pytest.raises(induct.InvalidArgument):
        induct.ThreadRanks(65)
    with induct.ThreadRanks(2) as ranks:
        with pytest.raises(IndexError):
            ranks[2]
        o.set_comm(ranks[1])
        o.set_comm(None)


def _z_write(m, seen):
    """Layer 1 head 0's hook_z set to 0.1 (sequence g + 1) for the batch's sequence g (a
    write that treats each sequence alone); each call's (shape[0], first, batch) into
    seen."""
    def fn(z, _name):
        first, batch = m.hook_batch_index()
        seen.append((z.shape[0], first, batch))
        z[:, :, 0] = 0.1 * (first + 1 + np.arange(z.shape[0], dtype=np.float32))[:, None, None]
    return [("blocks.1.attn.hook_z", fn)]


def _grads(m):
    return {n: m.get(n, grad=True) for n in m.weights()}


def test_hooks_in_sharded_steps():
    """Inside model.hooks() a step with grad_shards=S calls a hook once per shard of B/S
    sequences, in shard order, and its gradient is the one-pass step's with the same
    hook up to float rounding (4 partial sums added in a tree instead of one sum: a few
    float32 ulps of them; 1e-5 of each tensor's largest entry, against differences of
    order 1 that the hook makes)."""
    toks = np.array(induct.Dataset.rrt(d_vocab=12, min_block=3, seed=2).batch(0, B, T)[0])
    got = {}
    for shards in (1, S, 0):  # 0: S shards, no hook
        m, _ = _setup()
        o = induct.Optimizer(m, "sgd", lr=0.0, grad_shards=shards or S)
        seen = []
        with m.hooks(_z_write(m, seen) if shards else []):
            o.train_step(toks)
        if shards:
            assert seen == [(B // shards, s * B // shards, B) for s in range(shards)]
        got[shards] = _grads(m)
    for name, g1 in got[1].items():
        scale = np.abs(g1).max()
        assert np.abs(got[S][name] - g1).max() <= 1e-5 * scale, name
    assert max(np.abs(got[0][n] - got[S][n]).max() / (np.abs(got[S][n]).max() + 1e-30)
               for n in got[S]) > 1e-2
    assert not got[S]["blocks.1.attn.W_V"][0].any()  # head 0's z was written: no gradient
    with pytest.raises(induct.StateError):
        m.hook_batch_index()  # only inside a hook


def test_hooks_in_thread_ranks_bit_identical():
    """With the hook in every step, 2 thread ranks end with the weights and losses of one
    process, bit for bit, each rank calling the hook for its own shards only."""
    d = induct.Dataset.rrt(d_vocab=12, min_block=3, seed=2)
    m, o = _setup()
    with m.hooks(_z_write(m, [])):
        want_l = [o.train_step(d, B, T) for _ in range(STEPS)]
    want_w = _weights(m)
    assert not np.array_equal(want_w, _alone()[0])  # the hook matters
    seen = [[], []]
    with induct.ThreadRanks(2) as ranks:
        got = _run_ranks([ranks[r] for r in range(2)], lambda m, r: _z_write(m, seen[r]))
    for r, (w, losses) in enumerate(got):
        assert np.array_equal(w.view(np.uint32), want_w.view(np.uint32))
        assert losses == want_l
        per = S // 2
        assert seen[r] == [(B // S, (r * per + k) * B // S, B) for k in range(per)] * STEPS


def test_hook_raising_in_a_shard():
    """A hook that raises in shard 2 stops the step with its exception; the weights and the
    step counter are unchanged."""
    m, o = _setup()
    w0 = _weights(m)
    calls = []

    def fail(z, _name):
        calls.append(m.hook_batch_index()[0])
        if len(calls) == 3:
            raise ValueError("shard 2")
    toks = np.array(induct.Dataset.rrt(d_vocab=12, min_block=3, seed=2).batch(0, B, T)[0])
    with m.hooks([("blocks.0.attn.hook_z", fail)]):
        with pytest.raises(ValueError, match="shard 2"):
            o.train_step(toks)
    assert calls == [0, B // S, 2 * B // S]
    assert o["step"] == 0
    assert np.array_equal(_weights(m), w0)
