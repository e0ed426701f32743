"""Shared plumbing of examples/llc_stages.py and examples/llc_calibrate.py: find the
`induct` package, read a phase-change run directory (study/runner.py) and its
checkpoints, open the run's training data again, and run several LLC estimates at once.

A run directory holds summary.json (its config.data says how the token file or text was
split; config.training.tokens_per_step converts steps to tokens; models.<name>.window is
the phase-change window) and one directory per model with ckpt-<step>.safetensors
(--snapshots N keeps one every steps/N steps, step 0 included) and
final.safetensors (the last step), plus metrics.jsonl (per-head prefix-matching and
previous-token scores at every evaluation).
"""
import argparse
import glob
import json
import math
import os
import re
import sys
import threading
import time


def find_induct(build=None):
    """Import `induct` from BUILD/bindings/python (default: $INDUCT_BUILD_DIR, then the
    `build` directory next to this file's parent), else the installed package."""
    here = os.path.dirname(os.path.abspath(__file__))
    for c in (build, os.environ.get("INDUCT_BUILD_DIR"), os.path.join(here, "..", "build")):
        if c and os.path.isdir(os.path.join(c, "bindings", "python", "induct")):
            sys.path.insert(0, os.path.abspath(os.path.join(c, "bindings", "python")))
            break
    import induct  # noqa: E402
    return induct


def fail(msg):
    print(f"{os.path.basename(sys.argv[0])}: {msg}", file=sys.stderr)
    sys.exit(2)


def read_summary(run_dir):
    path = os.path.join(run_dir, "summary.json")
    if not os.path.isfile(path):
        fail(f"{path} not found: give the directory of a finished phase-change run "
             "(scripts/phase-change.sh --snapshots N --out DIR)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def open_data(induct, summary, data_path=None):
    """The run's dataset again (same file, split fraction, blocks and seed: the same
    train split)."""
    d = summary["config"]["data"]
    path = data_path or d["path"]
    if not os.path.exists(path):
        fail(f"the run's data {path} is gone; give it with --data PATH")
    common = dict(val_fraction=d["val_fraction"], block_tokens=int(d["block_tokens"]),
                  seed=int(d["seed"]))
    if d["kind"].startswith("token"):
        return induct.Dataset.token_file(path, format=d["format"], d_vocab=int(d["d_vocab"]),
                                         **common)
    return induct.Dataset.text_path(path, suffix=d.get("suffix"), bos=int(bool(d.get("bos"))),
                                    **common)


def checkpoints(run_dir, model, steps):
    """[(step, path)] of a model's kept weights in step order: ckpt-<step>.safetensors and
    final.safetensors as step `steps` when no checkpoint of that step exists."""
    out = {}
    for p in glob.glob(os.path.join(run_dir, model, "ckpt-*.safetensors")):
        m = re.match(r"ckpt-(\d+)\.safetensors$", os.path.basename(p))
        if m:
            out[int(m.group(1))] = p
    final = os.path.join(run_dir, model, "final.safetensors")
    if os.path.isfile(final) and steps not in out:
        out[steps] = final
    return sorted(out.items())


def log_subset(items, n):
    """At most n of the (step, ...) items, spread evenly in log(step) (step 0 and the last
    always kept); all of them when n is 0 or there are at most n."""
    if n <= 0 or len(items) <= n:
        return list(items)
    pos = [it for it in items if it[0] > 0]
    keep = {0: items[0]} if items[0][0] == 0 else {}
    k = n - len(keep)
    lo, hi = math.log(pos[0][0]), math.log(pos[-1][0])
    for i in range(k):
        target = lo + (hi - lo) * i / max(k - 1, 1)
        best = min(pos, key=lambda it: abs(math.log(it[0]) - target))
        keep[best[0]] = best
    keep[pos[-1][0]] = pos[-1]
    return [keep[s] for s in sorted(keep)]


def window_subset(items, windows, tps, k):
    """Up to k of the (step, ...) items inside any of the token windows [(start, end)],
    evenly spaced in step, with the last item before and the first after each window."""
    if k <= 0 or not windows:
        return []
    out = {}
    for start, end in windows:
        inside = [it for it in items if start <= it[0] * tps <= end]
        before = [it for it in items if it[0] * tps < start]
        after = [it for it in items if it[0] * tps > end]
        if before:
            out[before[-1][0]] = before[-1]
        if after:
            out[after[0][0]] = after[0]
        if inside:
            for i in range(min(k, len(inside))):
                j = round(i * (len(inside) - 1) / max(min(k, len(inside)) - 1, 1))
                out[inside[j][0]] = inside[j]
    return [out[s] for s in sorted(out)]


def settings_from_args(a):
    """The LLC keywords of Model.llc from the common command-line options."""
    kw = dict(chains=a.chains, draws=a.draws, burnin=a.burnin, every=a.every, batch=a.batch,
              seq_len=a.seq_len, epsilon=a.epsilon, gamma=a.gamma, seed=a.seed,
              init_batches=a.init_batches)
    if a.nbeta in ("batch", "tokens"):
        kw["nbeta_rule"] = a.nbeta
    else:
        kw["nbeta"] = float(a.nbeta)
    if a.max_increase:
        kw["max_increase"] = a.max_increase
    kw["paired"] = a.paired
    return kw


def add_sampler_options(p, defaults):
    """The LLC settings as options (defaults: the recommended ones, docs/llc.md)."""
    g = p.add_argument_group("sampler (docs/llc.md)")
    g.add_argument("--chains", type=int, default=defaults["chains"])
    g.add_argument("--draws", type=int, default=defaults["draws"])
    g.add_argument("--burnin", type=int, default=defaults["burnin"])
    g.add_argument("--every", type=int, default=1, help="steps per recorded loss")
    g.add_argument("--batch", type=int, default=defaults["batch"], help="sequences per minibatch")
    g.add_argument("--seq-len", type=int, default=0, help="tokens per sequence (0 = n_ctx)")
    g.add_argument("--epsilon", type=float, default=defaults["epsilon"])
    g.add_argument("--gamma", type=float, default=defaults["gamma"])
    g.add_argument("--nbeta", default=defaults["nbeta"],
                   help="a number, or a rule: 'batch' (m / ln m, m sequences) or 'tokens' "
                        "(m / ln m, m scored tokens)")
    g.add_argument("--max-increase", type=float, default=defaults.get("max_increase", 0.0),
                   help="a recorded loss this many nats above L(w*) counts as divergence "
                        "(0: only non-finite values)")
    g.add_argument("--paired", action=argparse.BooleanOptionalAction,
                   default=defaults.get("paired", True),
                   help="compare each draw with its own minibatch at w* (default: on)")
    g.add_argument("--init-batches", type=int, default=defaults.get("init_batches", 0),
                   help="minibatches of L(w*) (0 = chains)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--threads", type=int, default=1, help="OpenMP threads per estimate")
    g.add_argument("--jobs", type=int, default=2, help="estimates run at once (threads)")


def run_parallel(tasks, jobs, work, progress=True):
    """work(task) for every task on `jobs` threads (the library releases the GIL); returns
    the results in task order. Exceptions are returned in place of results."""
    results = [None] * len(tasks)
    lock = threading.Lock()
    nxt = [0]
    done = [0]
    t0 = time.time()

    def worker():
        while True:
            with lock:
                i = nxt[0]
                if i >= len(tasks):
                    return
                nxt[0] += 1
            try:
                results[i] = work(tasks[i])
            except Exception as e:  # noqa: BLE001 -- reported per task by the caller
                results[i] = e
            with lock:
                done[0] += 1
                if progress:
                    el = time.time() - t0
                    tty = sys.stderr.isatty()
                    print(f"{chr(13) if tty else ''}  {done[0]}/{len(tasks)} estimates, {el:.0f} s",
                          end="" if tty else "\n", file=sys.stderr, flush=True)

    th = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, jobs))]
    for t in th:
        t.start()
    for t in th:
        t.join()
    if progress and sys.stderr.isatty():
        print(file=sys.stderr)
    return results


def thread_cpu_seconds():
    return time.thread_time()
