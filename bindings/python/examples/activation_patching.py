#!/usr/bin/python3
"""Activation patching, clean -> corrupted, per attention head (docs/hooks.md).

Trains a small 2-layer attention-only model on repeated random tokens until it has an
induction head, then builds pairs of sequences [A][A] (clean) and [A'][A] (corrupted:
one token of the first half replaced). At the second occurrence of the token before the
replaced one, the clean model predicts the original next token by induction; the
corrupted one is pulled towards the replacement. Each head's `hook_z` at that position
is copied from the clean run into the corrupted run, one head at a time, and the
recovered share of the logit difference is printed: the induction heads of layer 1
share it between them (the logits are linear in their z: the shares add up to the
whole), the heads of layer 0 recover nothing (their output at that position does not
depend on the replaced token).

Usage: PYTHONPATH=<builddir>/bindings/python /usr/bin/python3 activation_patching.py
       [--steps N] [--threads N]
"""
import argparse

import numpy as np

import induct

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--steps", type=int, default=800)
p.add_argument("--threads", type=int, default=1)
args = p.parse_args()

V, N_CTX = 32, 48
model = induct.Model(n_layers=2, d_model=64, n_heads=4, n_ctx=N_CTX, d_vocab=V, init="torch",
                     n_threads=args.threads, seed=0)
# blocks of 4 ... 24 tokens: a fixed length would let layer 0 copy by position alone
data = induct.Dataset.rrt(d_vocab=V, min_block=4, max_block=N_CTX // 2, seed=1)
opt = induct.Optimizer(model, "adamw", lr=3e-3)
for step in range(args.steps):
    opt.train_step(data, 32, N_CTX)
print("induction score [layer, head]:\n", np.round(model.induction_score(data, 64, N_CTX), 2))

L = 16  # the repeated block of the patching pairs

# clean [A][A]; corrupted: A[j + 1] in the first half replaced by another token
rng = np.random.default_rng(0)
n, j = 16, L // 2
clean = np.stack([np.tile(rng.permutation(V)[:L], 2) for _ in range(n)]).astype(np.int32)
corrupted = clean.copy()
right = clean[:, j + 1].copy()
wrong = (right + 1 + rng.integers(0, V - 1, n)) % V  # never the right one
wrong = np.where(np.isin(wrong, clean[:, :L]), (wrong + 7) % V, wrong)
corrupted[:, j + 1] = wrong
pos = L + j  # second occurrence of A[j]: predicts A[j + 1] by induction
rows = np.arange(n)


def logit_diff(logits):
    """Mean of logit[right] - logit[wrong] at `pos`."""
    return float(np.mean(logits[rows, pos, right] - logits[rows, pos, wrong]))


clean_logits, cache = model.run_with_cache(clean, names=[("z", 0), ("z", 1)])
base = logit_diff(model.forward(corrupted)[0])
top = logit_diff(clean_logits)
print(f"logit difference: clean {top:+.3f}, corrupted {base:+.3f}")
print("share recovered by patching one head's hook_z at the induction position:")
for layer in range(2):
    name = induct.act_name("z", layer)
    cells = []
    for head in range(4):
        def patch(z, _name, head=head, src=cache[name]):
            z[:, pos, head] = src[:, pos, head]  # only this head, only this position
        with model.hooks([(name, patch)]):
            patched = logit_diff(model.forward(corrupted)[0])
        cells.append((patched - base) / (top - base))
    print(f"  layer {layer}: " + "  ".join(f"head {h}: {c:+.2f}" for h, c in enumerate(cells)))
