#!/usr/bin/python3
"""Memory and time of run_with_cache() with and without reductions inside the pass
(induct.cache, induct.reduce; docs/hooks.md "A cache that fits"). Not a test.

Each variant runs in its own process: one warm-up call, then ROUNDS timed calls (median
wall time); the process's peak resident set (ru_maxrss) is reported against a baseline
process that builds the same model and tokens and runs one plain forward without logits
(which the library evaluates in chunks of sequences: a small workspace). Peak RSS counts
the model's workspace for the pass (the activations of the whole batch: about 300 MiB at
batch 32 here) besides the cache; `chunk=` is what makes that small.

  PYTHONPATH=build/bindings/python /usr/bin/python3 bench/cache_memory.py [--batch 32]
      [--rounds 3] [--threads 1]

The model is the phase-change experiment's 2-layer one (d_vocab 2049, n_ctx 512, d_model
64, 2 heads of d_head 32, LayerNorm, shortformer positions in layer 0): the main job's."""
import argparse
import json
import subprocess
import sys

VARIANTS = {
    "baseline (forward, no logits)": None,
    "patterns, full": "dict(names='pattern')",
    "patterns, mean over the batch": "dict(names='pattern', reduce=induct.reduce.mean(), "
                                     "logits=False)",
    "patterns, induction diagonal": "dict(names='pattern', reduce=induct.reduce.diagonal(L - 1), "
                                    "logits=False)",
    "patterns, mean, chunk 8": "dict(names='pattern', reduce=induct.reduce.mean(), "
                               "logits=False, chunk=8)",
    "every point but hook_result, full": "dict()",
    "residual stream, norm per position": "dict(names='resid_*', "
                                          "reduce=induct.reduce.norm(), logits=False)",
    "residual stream, norm, chunk 8": "dict(names='resid_*', reduce=induct.reduce.norm(), "
                                      "logits=False, chunk=8)",
}

CHILD = r"""
import json, resource, statistics, sys, time
import numpy as np
import induct
B, rounds, threads, spec = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
m = induct.Model(n_layers=2, d_model=64, n_heads=2, d_head=32, n_ctx=512, d_vocab=2049,
                 layer_norm=1, positional="shortformer", shortformer_layers=1, n_threads=threads)
rng = np.random.default_rng(0)
L = 100
block = rng.integers(0, 2048, size=(B, L))
toks = np.concatenate([block] * 6, axis=1)[:, :512].astype(np.int32)   # repeats of 100
m.forward(toks[:1], logits=False)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if spec == "None":
    m.forward(toks, logits=False)
    out = {"plan_bytes": 0, "seconds": None}
else:
    kw = eval(spec)
    plan = m.cache_plan(toks, **kw)
    times = []
    for i in range(rounds + 1):
        t0 = time.perf_counter()
        lg, cache = m.run_with_cache(toks, **kw)
        times.append(time.perf_counter() - t0)
        del lg, cache
    out = {"plan_bytes": plan.total_bytes, "seconds": statistics.median(times[1:])}
out["peak_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out["model_bytes"] = m.memory_used
print(json.dumps(out))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    rows = []
    for label, spec in VARIANTS.items():
        r = subprocess.run([sys.executable, "-c", CHILD, str(a.batch), str(a.rounds),
                            str(a.threads), str(spec)], capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"{label}: {r.stderr}")
        rows.append((label, json.loads(r.stdout.strip().splitlines()[-1])))
    base = rows[0][1]["peak_kib"]
    print(f"batch {a.batch} x 512 tokens, {a.threads} thread(s); peak RSS above the baseline "
          f"process ({base / 1024:.0f} MiB)")
    print(f"{'variant':40s} {'planned':>12s} {'model':>12s} {'peak RSS +':>12s} "
          f"{'time (median)':>14s}")
    for label, r in rows:
        t = f"{r['seconds'] * 1000:.0f} ms" if r["seconds"] is not None else "-"
        print(f"{label:40s} {r['plan_bytes'] / 2**20:8.1f} MiB {r['model_bytes'] / 2**20:8.1f} "
              f"MiB {(r['peak_kib'] - base) / 1024:8.1f} MiB {t:>14s}")


if __name__ == "__main__":
    main()
