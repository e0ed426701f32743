"""Model.llc and llc_sample: the estimator against an independent float64 PyTorch
implementation of the same SGLD update, determinism under host threading settings, the
Python surface (masks, results, errors).

The PyTorch reference (same weights, same minibatches, same Gaussian draws) runs

    x <- x - (eps/2) (nbeta grad L_m(x) + gamma (x - x*)) + sqrt(eps) xi

in float64 with autograd through TinyHookedTransformer (test_torch_tl.py, written from
the TransformerLens conventions), records the minibatch loss before each step and
forms lambda = nbeta (mean recorded loss - L(w*)). The draws xi are the library's: with
a zero potential and gamma = 0, llc_sample's chain moves by exactly sqrt(eps) xi per
step, and the library draws the same xi for coordinate k at step t of chain c in every
entry point (docs/llc.md, "Determinism"); the potential also reports the minibatch
indices. So the two implementations follow the same path and differ only by the
library's float32 arithmetic: we require every recorded loss to agree within 1e-4
relative and each chain's estimate within a hundredth of the estimate's standard error
over chains (a wrong factor in any term of the update, a wrong sign, a missed mask or
an off-by-one in what is recorded moves them by far more; measured agreement is
reported).
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import induct
from test_torch_tl import TinyHookedTransformer

CHAINS, DRAWS, BURNIN, B, T = 3, 25, 5, 4, 16
EPS, NBETA, GAMMA, SEED = 2e-3, 20.0, 30.0, 11


def _trained_model():
    m = induct.Model(n_layers=2, d_model=16, n_heads=2, n_ctx=16, d_vocab=12, layer_norm=1,
                     positional="shortformer", seed=3)
    d = induct.Dataset.rrt(d_vocab=12, min_block=3, seed=2)
    o = induct.Optimizer(m, lr=1e-2)
    for _ in range(60):
        o.train_step(d, 8, T)
    return m, d


def _noise_and_batches(n_params, steps):
    """The library's draws and minibatch indices, read off llc_sample on a zero potential."""
    seen = []

    def zero(w, batch):
        seen.append((batch, w.copy()))
        return 0.0, np.zeros_like(w)
    induct.llc_sample(zero, np.zeros(n_params), chains=CHAINS, draws=DRAWS, burnin=BURNIN,
                      nbeta=NBETA, epsilon=EPS, gamma=0.0, seed=SEED)
    K = CHAINS  # init_batches 0 = chains
    init_idx = [b for b, _ in seen[:K]]
    chains = []
    for c in range(CHAINS):
        calls = seen[K + c * steps:K + (c + 1) * steps]
        idx = [b for b, _ in calls]
        xi = [(calls[t + 1][1] - calls[t][1]) / np.sqrt(EPS) for t in range(steps - 1)]
        chains.append((idx, xi))
    return init_idx, chains


def test_llc_matches_float64_torch():
    torch.set_num_threads(1)
    m, d = _trained_model()
    names = m.tensor_names()
    res = m.llc(d, chains=CHAINS, draws=DRAWS, burnin=BURNIN, batch=B, seq_len=T, epsilon=EPS,
                nbeta=NBETA, gamma=GAMMA, seed=SEED)
    steps = BURNIN + DRAWS
    init_idx, chains = _noise_and_batches(m.n_params, steps)
    # the indices are the documented ones
    assert init_idx == list(range(CHAINS))
    assert chains[1][0][:3] == [(2 << 32) + t for t in range(3)]

    ref = TinyHookedTransformer(m.config)
    w_star = {k: torch.from_numpy(v.astype(np.float64)) for k, v in m.weights().items()}
    ref.load_state_dict(w_star, strict=True)
    params = [dict(ref.named_parameters())[n] for n in names]
    x_star = torch.cat([w_star[n].reshape(-1) for n in names])

    def batch(i):
        return torch.from_numpy(np.asarray(d.batch(i, B, T)[0]).astype(np.int64))

    def loss_at(x, toks, grad):
        off = 0
        with torch.no_grad():
            for p in params:
                p.copy_(x[off:off + p.numel()].view_as(p))
                off += p.numel()
        for p in params:
            p.grad = None
        logits = ref(toks)
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 toks[:, 1:].reshape(-1))
        if not grad:
            return loss.item(), None
        loss.backward()
        return loss.item(), torch.cat([p.grad.reshape(-1) for p in params])

    init = [loss_at(x_star, batch(i), False)[0] for i in init_idx]
    l0 = float(np.mean(init))
    assert np.allclose(res.init_losses, init, rtol=1e-5)
    ref_llc, ref_draws = [], []
    for idx, xi in chains:
        x = x_star.clone()
        rec = []
        for t in range(steps):
            loss, g = loss_at(x, batch(idx[t]), True)
            if t >= BURNIN:
                rec.append(loss)
            if t < steps - 1:
                x = x - 0.5 * EPS * (NBETA * g + GAMMA * (x - x_star)) \
                    + np.sqrt(EPS) * torch.from_numpy(xi[t])
        ref_draws.append(rec)
        ref_llc.append(NBETA * (np.mean(rec) - l0))
    ref_draws = np.array(ref_draws)
    rel = np.abs(res.draw_losses - ref_draws) / np.abs(ref_draws)
    d_llc = np.abs(res.chain_llc - np.array(ref_llc))
    print(f"llc C {res.chain_llc} torch {np.array(ref_llc)}; SE {res.llc_se:.3g}; worst "
          f"relative loss difference {rel.max():.2e}, worst chain difference "
          f"{d_llc.max():.2e} = {d_llc.max() / res.llc_se:.2e} SE")
    assert rel.max() < 1e-4
    assert d_llc.max() < 0.01 * res.llc_se
    # the chains moved: the estimate is not L(w*)'s noise alone
    assert res.llc_mean > 5 * res.llc_se


_CHILD = r"""
import json, sys, induct
m = induct.Model(n_layers=2, d_model=16, n_heads=2, n_ctx=16, d_vocab=12, layer_norm=1,
                 seed=3, n_threads=int(sys.argv[1]))
d = induct.Dataset.rrt(d_vocab=12, min_block=3, seed=2)
r = m.llc(d, chains=2, draws=8, batch=4, seq_len=16, epsilon=1e-3, gamma=50, seed=4, mala=1)
print(json.dumps([r.draw_losses.tolist(), r.chain_mala.tolist()]))
"""


def _child(threads, env):
    e = dict(os.environ)
    e.update(env)
    out = subprocess.run([sys.executable, "-c", _CHILD, str(threads)], env=e, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def test_bit_identical_across_threads_and_host_settings():
    base = _child(1, {})
    for threads, env in [(2, {}), (3, {"OMP_NUM_THREADS": "1"}),
                         (2, {"OMP_THREAD_LIMIT": "1"}), (4, {"OMP_DYNAMIC": "true"})]:
        assert _child(threads, env) == base, (threads, env)


def test_masks_and_results():
    m, d = _trained_model()
    w0 = m.weights()
    mask = m.llc_mask(("blocks.1.attn", 0))
    assert mask.dtype == np.uint8 and mask.sum() == 4 * 16 * 8
    both = m.llc_mask([("blocks.1.attn", 0), "embed.W_E"])
    assert both.sum() == mask.sum() + 12 * 16
    kw = dict(chains=2, draws=10, batch=4, seq_len=T, epsilon=1e-3, gamma=50, seed=1)
    a = m.llc(d, mask=("blocks.1.attn", 0), **kw)
    b = m.llc(d, mask=mask.astype(bool), **kw)
    assert a.n_sampled == mask.sum() and np.array_equal(a.draw_losses, b.draw_losses)
    assert a.draw_losses.shape == (2, 10) and a.chain_llc.shape == (2,)
    assert np.isnan(a.mala_accept) and a.burnin_losses.shape == (2, 0)
    json.dumps(a.as_dict())
    # the weights are the caller's afterwards
    for k, v in m.weights().items():
        assert np.array_equal(v, w0[k]), k
    with pytest.raises(induct.OutOfRange):
        m.llc_mask(("blocks.1.attn", 2))
    with pytest.raises(induct.OutOfRange):
        m.llc_mask("blocks.9")
    with pytest.raises(TypeError):
        m.llc_mask([("blocks.1.attn", "0")])
    with pytest.raises(TypeError):
        m.llc(d, chain=3)
    with pytest.raises(ValueError):
        m.llc(d, nbeta_rule="sequences")
    with pytest.raises(induct.NumericError, match="diverged"):
        m.llc(d, chains=1, draws=50, batch=4, seq_len=T, epsilon=1e5)
    for k, v in m.weights().items():
        assert np.array_equal(v, w0[k]), k
