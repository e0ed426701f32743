#!/usr/bin/python3
"""Train with one head's attention pattern clamped to the induction pattern, the kind of
in-training intervention of Singh et al. 2024 ("What needs to go right for an induction
head?"), and watch how the rest of the circuit forms around it.

Two 2-layer attention-only models (2 heads of d_head 32, so that one head can copy all
32 tokens) start from the same weights and see the same batches of repeated random
tokens. In the clamped run, a hook on blocks.1.attn.hook_pattern
overwrites head 0's pattern in every training step with the induction pattern of the
batch (each query attends to the token after the previous occurrence of its own token;
to itself if there is none). The backward pass treats the clamp as a constant: that
head's W_Q and W_K get no gradient, everything else trains around it. Printed every
200 steps: the training loss (with the clamp, for the clamped run) and, measured
without any hook, the previous-token scores of layer 0 and the induction scores of
layer 1.

Usage: PYTHONPATH=<builddir>/bindings/python /usr/bin/python3 pattern_clamp.py
       [--steps N] [--head H]
"""
import argparse

import numpy as np

import induct

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--steps", type=int, default=800)
p.add_argument("--head", type=int, default=0, help="the layer-1 head to clamp")
args = p.parse_args()

V, T, B = 32, 48, 32
data = induct.Dataset.rrt(d_vocab=V, min_block=4, max_block=T // 2, seed=1)


def induction_pattern(tokens):
    """[batch, T, T]: query p attends to j + 1 for the last j < p with tokens[j] ==
    tokens[p] (j + 1 <= p), else to p itself."""
    n, t = tokens.shape
    pat = np.zeros((n, t, t), dtype=np.float32)
    for b in range(n):
        last = {}
        for q in range(t):
            j = last.get(tokens[b, q])
            pat[b, q, j + 1 if j is not None else q] = 1.0
            last[tokens[b, q]] = q
    return pat


def run(clamp):
    model = induct.Model(n_layers=2, d_model=64, n_heads=2, n_ctx=T, d_vocab=V, init="torch",
                         seed=0)
    opt = induct.Optimizer(model, "adamw", lr=3e-3)
    print("clamped" if clamp else "plain", f"(layer 1 head {args.head})" if clamp else "")
    for step in range(args.steps):
        tokens = np.asarray(data.batch(step, B, T)[0])
        if clamp:
            target = induction_pattern(tokens)

            def hook(pattern, _name):
                pattern[:, args.head] = target
            with model.hooks([("blocks.1.attn.hook_pattern", hook)]):
                loss = opt.train_step(tokens)
        else:
            loss = opt.train_step(tokens)
        if (step + 1) % 200 == 0:
            prev = model.previous_token_score(data, 64, T)[0]
            ind = model.induction_score(data, 64, T)[1]
            print(f"  step {step + 1:4d}  loss {loss:.3f}  previous-token L0 "
                  + " ".join(f"{x:.2f}" for x in prev) + "  induction L1 "
                  + " ".join(f"{x:.2f}" for x in ind))
    return model


run(clamp=False)
run(clamp=True)
