#!/usr/bin/python3
"""Activation patching against attribution patching (induct.patching; docs/python.md,
"Patching"): time and accuracy. Not a test.

Time: exact patching of every head's output at every position
(get_act_patch_attn_head_out_by_pos: n_layers x pos x n_heads forward passes) against
attribution patching of every kind at once (attribution_patching: one forward and one
backward pass), alternately, one warm-up round then ROUNDS timed rounds (medians); both
get the same clean cache (one forward pass, not timed). The model is bench config b's
shape (d_vocab 64, d_model 64, 4 heads, 2 layers, attention-only) at batch 8, 41 tokens.

Accuracy: on the hand-wired two-layer induction circuit of
bindings/python/tests/test_port_tl.py (previous-token head, induction head; every answer
known in closed form), clean = BOS + 20 random pieces repeated, corrupted = the first
copy replaced by other pieces, metric = the logit difference at the last position
between the clean next piece and another one. For each kind and layer: the exact change
(get_act_patch_* − the corrupted metric) against the attribution estimate, their
correlation and largest error, the largest exact change and its estimate, at the
circuit's attention scale (scores of 30: saturated softmax) and at a fifth of it (scores
of 6).

  PYTHONPATH=build/bindings/python:bindings/python/tests /usr/bin/python3 bench/patching.py \\
      [--rounds 5] [--json out.json]"""
import argparse
import json
import statistics
import time

import numpy as np

import induct
from induct import patching


def timing(rounds):
    m = induct.Model(n_layers=2, d_model=64, n_heads=4, d_mlp=0, layer_norm=1, n_ctx=64,
                     d_vocab=64, positional="standard", seed=1, n_threads=1)
    rng = np.random.default_rng(0)
    B, half = 8, 20
    s = rng.integers(1, 64, (B, half))
    clean = np.concatenate([np.zeros((B, 1), int), s, s], axis=1).astype(np.int32)
    corrupted = clean.copy()
    corrupted[:, 1:half + 1] = rng.integers(1, 64, (B, half))
    metric = patching.LogitDiff(clean[:, -1], corrupted[:, -1], pos=-2)
    _, cache = m.run_with_cache(clean)
    t_exact, t_attr = [], []
    for r in range(rounds + 1):
        t0 = time.perf_counter()
        patching.get_act_patch_attn_head_out_by_pos(m, corrupted, cache, metric)
        t1 = time.perf_counter()
        patching.attribution_patching(m, corrupted, cache, metric)
        t2 = time.perf_counter()
        if r:  # round 0 is the warm-up
            t_exact.append(t1 - t0)
            t_attr.append(t2 - t1)
    L, H, T = 2, 4, clean.shape[1]
    return {"batch": B, "seq_len": T, "exact_passes": L * T * H,
            "exact_seconds_median": statistics.median(t_exact),
            "attribution_seconds_median": statistics.median(t_attr),
            "ratio": statistics.median(t_exact) / statistics.median(t_attr)}


def accuracy(scale):
    import torch
    import test_port_tl as tl
    cfg = induct.HookedTransformerConfig(
        n_layers=2, d_model=tl.D_MODEL, n_ctx=tl.N_CTX, d_head=tl.D_HEAD, n_heads=2,
        d_vocab=tl.V, attn_only=True, normalization_type=None,
        positional_embedding_type="standard")
    from induct.lens import HookedTransformer
    ht = HookedTransformer(cfg)
    sd = tl.induction_circuit_weights(ht.state_dict())
    for w in ("blocks.0.attn.W_Q", "blocks.1.attn.W_Q"):
        sd[w] = sd[w] * scale
    ht.load_state_dict(sd)
    m = ht  # its NumPy-side methods are induct.Model's
    rng = np.random.default_rng(3)
    B, half = 4, 20
    s = np.stack([rng.permutation(np.arange(tl.N_PIECES))[:half] for _ in range(B)])
    bos = np.full((B, 1), tl.N_PIECES)
    clean = np.concatenate([bos, s, s], axis=1).astype(np.int32)
    corrupted = clean.copy()
    for b in range(B):
        others = np.setdiff1d(np.arange(tl.N_PIECES), s[b])
        corrupted[b, 1:half + 1] = rng.permutation(others)[:half]
    metric = patching.LogitDiff(clean[:, -1], (clean[:, -1] + 1) % tl.N_PIECES, pos=-2)
    ct = torch.from_numpy(clean.astype(np.int64))
    _, cache = m.run_with_cache(ct)
    base = float(metric(m(torch.from_numpy(corrupted.astype(np.int64)))))
    attr = patching.attribution_patching(m, corrupted, cache, metric)
    out = {"attention_score_scale": 30 * scale, "clean_metric": float(metric(m(ct))),
           "corrupted_metric": base}
    for k, fn in (("resid_pre", patching.get_act_patch_resid_pre),
                  ("attn_out", patching.get_act_patch_attn_out),
                  ("attn_head_out_by_pos", patching.get_act_patch_attn_head_out_by_pos),
                  ("attn_head_out_all_pos", patching.get_act_patch_attn_head_out_all_pos),
                  ("attn_head_pattern_all_pos",
                   patching.get_act_patch_attn_head_pattern_all_pos)):
        exact_all = fn(m, corrupted, cache, metric) - base
        out[k] = {}
        for layer in range(2):  # layer 1 is linear in its output: exact there
            exact, a = exact_all[layer], attr[k][layer]
            with np.errstate(invalid="ignore", divide="ignore"):
                c = np.corrcoef(exact.ravel(), a.ravel())[0, 1]
            i = np.argmax(np.abs(exact))
            out[k][f"layer {layer}"] = {
                "correlation": None if np.isnan(c) else round(float(c), 4),
                "max_abs_error": round(float(np.abs(exact - a).max()), 4),
                "max_abs_exact": round(float(np.abs(exact).max()), 4),
                "largest_exact": round(float(exact.ravel()[i]), 4),
                "its_estimate": round(float(a.ravel()[i]), 4)}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    res = {"timing": timing(a.rounds), "accuracy": [accuracy(1.0), accuracy(0.2)]}
    print(json.dumps(res, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
