#!/usr/bin/python3
"""libinduct vs PyTorch: one training step (forward + backward + AdamW).

Not a test. Run from the source tree after building:

    /usr/bin/python3 bench/bench.py --build build             # full run, a-f (~15 min)
    /usr/bin/python3 bench/bench.py --build build --quick     # a, b, c only, short (2-3 min)
    /usr/bin/python3 bench/bench.py --build build --configs e,e1,e32,f  # phase-change shapes
    /usr/bin/python3 bench/bench.py --build build --check-peer  # the same model? (10 s)

For every configuration (CONFIGS: a-d, and e, e1, e32, f, the shapes of the phase-change
experiment) and thread count (1, 2) it starts one bench_step process (libinduct) and one
torch_peer.py process (PyTorch) and times them alternately, round by
round, so that load from other processes hits both alike. OPENBLAS_CORETYPE is removed
from both environments. PyTorch gets its best setting: unless --no-torch-sweep, each
candidate (glibc malloc tuning on/off, AdamW foreach on/off, OpenBLAS threads when
torch uses 2) is timed briefly first and the fastest is used; the choice is reported.

FLOPs ("model FLOPs", the same number for both implementations, 2 per multiply-add,
matrix products only): forward = 2 N [L (4 D HD + 2 D M) + D V] + 4 L B H (T (T+1) / 2) dh
with N = B T tokens, HD = H dh; the attention term counts causal pairs k <= p only.
A training step counts 3x the forward (the backward pass is two products per forward
product). libinduct folds layer 0 into embedding tables when it has no LayerNorm, so it
performs fewer FLOPs than counted for a-c: its GFLOP/s there is a model-FLOP rate.
Shortformer positions and smeared keys add no matrix product and are not counted (see
model_flops). "% roof" (roof_pct in the JSON) = GFLOP/s / the 1024^3 sgemm rate of the
same run at the same thread count.

Memory: "theory" = 4 bytes x [params + grads + 2 AdamW moments + activations the
backward pass needs], the activations being, per layer, the QKV input (and the LN1
input with LayerNorm), q, k, v, z, the causal half of the attention pattern, and with
an MLP its input (and the LN2 input), pre- and post-activation; then the final LN input
with LayerNorm, the unembedding input and the logits; shortformer positions add the Q/K
input per layer, smeared keys the unmixed keys per layer.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

_STD = dict(positional="standard", smeared=0)
# the phase-change experiment's models (docs/phase-change.md): attention-only, LayerNorm,
# shortformer positions, V 2049, T 512
_MAIN = dict(vocab=2049, seq=512, d_model=64, heads=4, layers=2, mlp=0, layernorm=1, batch=8,
             positional="shortformer", smeared=0)
CONFIGS = {
    "a": dict(vocab=64, seq=24, d_model=64, heads=4, layers=2, mlp=0, layernorm=0, batch=64,
              **_STD),
    "b": dict(vocab=64, seq=64, d_model=64, heads=4, layers=2, mlp=0, layernorm=0, batch=64,
              **_STD),
    "c": dict(vocab=256, seq=256, d_model=256, heads=8, layers=2, mlp=0, layernorm=0, batch=16,
              **_STD),
    "d": dict(vocab=4096, seq=512, d_model=512, heads=8, layers=4, mlp=2048, layernorm=1,
              batch=8, **_STD),
    "e": dict(_MAIN),
    "e1": dict(_MAIN, batch=1),
    "e32": dict(_MAIN, heads=2),
    "f": dict(_MAIN, layers=1, smeared=1),
    # the phase-change experiment's default 2-layer model: e32 with the positions in
    # layer 0's queries and keys only (shortformer_layers 1)
    "g": dict(_MAIN, heads=2, shortformer_layers=1),
}
# steps per round and rounds: (warm-up, per round, rounds) for full and quick runs
PLAN = {"a": ((5, 20, 8), (3, 10, 4)), "b": ((5, 10, 8), (3, 5, 4)),
        "c": ((2, 3, 6), (1, 2, 3)), "d": ((1, 1, 5), (1, 1, 2)),
        "e": ((2, 3, 6), (1, 1, 3)), "e1": ((3, 10, 6), (2, 4, 3)),
        "e32": ((2, 3, 6), (1, 1, 3)), "f": ((2, 3, 6), (1, 1, 3)),
        "g": ((2, 3, 6), (1, 1, 3))}
DEFAULT_FULL, DEFAULT_QUICK = "a,b,c,d,e,e1,e32,f,g", "a,b,c"
MALLOC_TUNED = {"MALLOC_MMAP_THRESHOLD_": str(1 << 40), "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}


def model_flops(c):
    """Model FLOPs of one training step (see the module docstring). Shortformer positions
    change no matrix product (W_pos is added to the Q/K input, N x D additions); smeared
    keys add nothing either (3 FLOPs per key element, elementwise): neither is counted."""
    B, T, D, H, L, M, V = (c[k] for k in ("batch", "seq", "d_model", "heads", "layers", "mlp",
                                          "vocab"))
    dh = D // H
    HD = H * dh
    N = B * T
    fwd = 2 * N * (L * (4 * D * HD + 2 * D * M) + D * V) + 4 * L * B * H * (T * (T + 1) // 2) * dh
    return 3 * fwd


def theory_bytes(c, n_params):
    """(total, activations) in bytes; see the module docstring. Shortformer positions add
    the Q/K input h + W_pos (N x D) per layer, smeared keys the unmixed keys (N x HD) per
    layer: the backward pass reads both (the gradients of W_Q, W_K and of alpha)."""
    B, T, D, H, L, M, V, LN = (c[k] for k in ("batch", "seq", "d_model", "heads", "layers",
                                              "mlp", "vocab", "layernorm"))
    HD = H * (D // H)
    N = B * T
    per_layer = N * D + (N * D if LN else 0) + 4 * N * HD + B * H * T * (T + 1) // 2
    if c["smeared"]:
        per_layer += N * HD
    if M:
        per_layer += N * D + (N * D if LN else 0) + 2 * N * M
    act = L * per_layer + (N * D if LN else 0) + N * D + N * V
    if c["positional"] == "shortformer":  # in the first shortformer_layers (0: all)
        act += N * D * (min(L, c.get("shortformer_layers", 0)) or L)
    return 4 * (4 * n_params + act), 4 * act


def args_of(c, threads):
    out = []
    for k, v in c.items():
        out += ["--" + k.replace("_", "-"), str(v)]
    return out + ["--threads", str(threads)]


def clean_env(extra=None):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    for k in list(env):
        if k.startswith("MALLOC_") or k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                           "GOTO_NUM_THREADS"):
            del env[k]
    env.update(extra or {})
    return env


class Peer:
    """A bench_step or torch_peer.py process speaking the warm/run/rss protocol."""

    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=env, text=True, bufsize=1)

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        reply = self.p.stdout.readline()
        if not reply:
            raise RuntimeError("peer exited: %s" % " ".join(self.p.args))
        return json.loads(reply)

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait(timeout=60)


def lib_peer(build, c, threads):
    exe = os.path.join(build, "bench", "bench_step")
    return Peer([exe, "step"] + args_of(c, threads), clean_env())


def torch_setting_env(s, threads):
    extra = {"OMP_NUM_THREADS": str(threads),
             "OPENBLAS_NUM_THREADS": str(s.get("openblas_threads", threads))}
    if s["malloc"]:
        extra.update(MALLOC_TUNED)
    return clean_env(extra)


def torch_peer(c, threads, s):
    argv = ["/usr/bin/python3", os.path.join(HERE, "torch_peer.py")] + args_of(c, threads) + [
        "--foreach", str(s["foreach"])]
    return Peer(argv, torch_setting_env(s, threads))


def torch_candidates(threads, quick):
    if quick:
        return [{"malloc": 1, "foreach": f, "openblas_threads": 1} for f in (1, 0)]
    out = []
    for malloc in (1, 0):
        for foreach in (1, 0):
            blas = (1, 2) if threads == 2 else (1,)
            for ob in blas:
                out.append({"malloc": malloc, "foreach": foreach, "openblas_threads": ob})
    return out


def describe(s):
    return "%s, AdamW foreach=%s, OPENBLAS_NUM_THREADS=%d" % (
        "MALLOC_MMAP_THRESHOLD_=MALLOC_TRIM_THRESHOLD_=2^40" if s["malloc"] else
        "default malloc", bool(s["foreach"]), s["openblas_threads"])


def pick_torch(name, c, threads, sweep, quick, log):
    cands = torch_candidates(threads, quick) if sweep else [
        {"malloc": 1, "foreach": 1, "openblas_threads": 1}]
    if len(cands) == 1:
        return cands[0], []
    warm, per, _ = PLAN[name][1 if quick else 0]
    tried = []
    for s in cands:
        p = torch_peer(c, threads, s)
        p.ask("warm %d" % warm)
        ms = p.ask("run %d" % max(per, 2))["ms"]
        p.close()
        tried.append((statistics.median(ms), s))
        log("    torch candidate %-70s %9.2f ms" % (describe(s), tried[-1][0]))
    tried.sort(key=lambda x: x[0])
    return tried[0][1], [{"setting": describe(s), "ms": m} for m, s in tried]


def measure(build, name, threads, sweep, quick, log):
    cfg = dict(CONFIGS[name])
    best, tried = pick_torch(name, cfg, threads, sweep, quick, log)
    warm, per, rounds = PLAN[name][1 if quick else 0]
    lib = lib_peer(build, cfg, threads)
    tp = torch_peer(cfg, threads, best)
    lib.ask("warm %d" % warm)
    tp.ask("warm %d" % warm)
    lms, lcpu, tms, tcpu = [], [], [], []
    for _ in range(rounds):
        r = lib.ask("run %d" % per)
        lms += r["ms"]
        lcpu += r["cpu_ms"]
        r = tp.ask("run %d" % per)
        tms += r["ms"]
        tcpu += r["cpu_ms"]
    lr, tr = lib.ask("rss"), tp.ask("rss")
    lib.close()
    tp.close()
    flops = model_flops(cfg)
    toks = cfg["batch"] * cfg["seq"]
    theory, act = theory_bytes(cfg, lr["n_params"])
    res = {"config": name, "threads": threads, "model": cfg, "model_gflop": flops / 1e9,
           "n_params": lr["n_params"], "torch_setting": describe(best), "torch_tried": tried,
           "steps_each": len(lms)}
    for who, ms, rss in (("libinduct", lms, lr), ("pytorch", tms, tr)):
        med = statistics.median(ms)
        res[who] = {"median_ms": med, "min_ms": min(ms), "tokens_per_s": toks / med * 1e3,
                    "gflops": flops / med / 1e6, "peak_rss_mib": rss["peak_rss_kib"] / 1024,
                    "peak_rss_above_start_mib": (rss["peak_rss_kib"] - rss["base_rss_kib"]) /
                    1024}
    res["libinduct"]["median_cpu_ms"] = statistics.median(lcpu)
    res["pytorch"]["median_cpu_ms"] = statistics.median(tcpu)
    res["ratio_pytorch_over_libinduct"] = res["pytorch"]["median_ms"] / res["libinduct"][
        "median_ms"]
    res["theory_mib"] = theory / 2**20
    res["theory_activations_mib"] = act / 2**20
    res["libinduct"]["rss_over_theory"] = res["libinduct"]["peak_rss_above_start_mib"] / (
        theory / 2**20)
    return res


def roof(build, threads, size):
    exe = os.path.join(build, "bench", "bench_step")
    out = subprocess.run([exe, "roof", "--threads", str(threads), "--size", str(size)],
                         env=clean_env(), capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def wiki(build, threads, steps, log):
    """examples/induction-rrt (the wiki experiment): wall time, peak RSS."""
    exe = os.path.join(build, "examples", "induction-rrt")
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M %e %U %S", exe, "--threads", str(threads),
                        "--steps", str(steps), "--json"], env=clean_env(), capture_output=True,
                       text=True, check=True)
    wall = time.monotonic() - t0
    rss_kib, _, user, sys_ = p.stderr.strip().splitlines()[-1].split()
    j = json.loads(p.stdout.strip().splitlines()[-1])
    res = {"threads": threads, "steps": steps, "wall_s": wall, "user_s": float(user),
           "sys_s": float(sys_), "peak_rss_mib": int(rss_kib) / 1024,
           "train_s": [m["seconds"] for m in j["models"]],
           "loss": [m["loss"] for m in j["models"]],
           "induction_scores": [m["induction_scores"] for m in j["models"]]}
    # theory for the 2-layer training shape (B 64, T 64): see the module docstring
    c = dict(CONFIGS["b"])
    n_params = 64 * 64 + 64 * 64 + 2 * (4 * 64 * 64 + 3 * 64 + 64) + 64 * 64 + 64
    res["theory_train_mib"] = theory_bytes(c, n_params)[0] / 2**20
    log("wiki experiment, %d threads: %.1f s wall (training %.1f + %.1f s), peak RSS %.0f MiB" % (
        threads, wall, res["train_s"][0], res["train_s"][1], res["peak_rss_mib"]))
    return res


def evaluation(build, log):
    """Forward-only and analysis passes vs a training step's forward (config b's model,
    1 thread): microseconds per token."""
    c = CONFIGS["b"]
    p = lib_peer(build, c, 1)
    p.ask("warm 20")
    toks = c["batch"] * c["seq"]
    fwd = statistics.median(p.ask("eval 20")["ms"]) / toks * 1e3
    big = p.ask("evalb 512 4")["ms"]
    scores = p.ask("scores 256 4")["ms"]
    p.close()
    res = {"train_forward_us_per_token": fwd,
           "forward_512_first_us_per_token": big[0] / (512 * c["seq"]) * 1e3,
           "forward_512_us_per_token": statistics.median(big[1:]) / (512 * c["seq"]) * 1e3,
           # the two scores each run one forward over 256 sequences
           "scores_256_first_us_per_token": scores[0] / (2 * 256 * c["seq"]) * 1e3,
           "scores_256_us_per_token": statistics.median(scores[1:]) / (2 * 256 * c["seq"]) * 1e3}
    log("evaluation (us/token): " + ", ".join("%s %.2f" % kv for kv in res.items()))
    return res


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


def machine():
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    torch_v = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    return {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release(),
            "torch": torch_v, "python": platform.python_version(),
            "openblas_coretype_in_env": os.environ.get("OPENBLAS_CORETYPE")}


def check_peer(build, steps=3, tol=1e-5):
    """Is torch_peer.py libinduct's model? For small models of every architecture the
    benchmark uses (batch 2, seq 16): libinduct (the Python bindings of this build)
    draws the weights, with random LayerNorm parameters and smeared-key alphas so that
    none is at its trivial initial value, saves them (induct_model_save, TL names) and
    computes the mean loss of one batch; torch_peer.py loads the file and computes the
    same. Then both take `steps` AdamW steps (lr 1e-3, weight decay 0.01) on the same
    batches and report the loss before each. Prints both, returns 1 if any relative
    difference exceeds `tol`."""
    import tempfile
    sys.path.insert(0, os.path.join(os.path.abspath(build), "bindings", "python"))
    import numpy as np
    import induct
    base = dict(vocab=97, seq=16, d_model=32, heads=4, layers=2, mlp=0, layernorm=0, batch=2,
                positional="standard", smeared=0)
    variants = [("standard (as a-c)", {}),
                ("standard, LayerNorm, MLP 64 (as d)", dict(layernorm=1, mlp=64)),
                ("shortformer, LayerNorm (as e)", dict(layernorm=1, positional="shortformer")),
                ("shortformer, LayerNorm, d_head 16 (as e32)",
                 dict(layernorm=1, positional="shortformer", heads=2)),
                ("shortformer, no LayerNorm", dict(positional="shortformer")),
                ("shortformer in layer 0 only, LayerNorm, d_head 16 (as g)",
                 dict(layernorm=1, positional="shortformer", heads=2, shortformer_layers=1)),
                ("shortformer, LayerNorm, smeared, 1 layer (as f)",
                 dict(layernorm=1, positional="shortformer", smeared=1, layers=1)),
                ("standard, smeared, 2 layers", dict(smeared=1))]
    worst = 0.0
    print("| model | libinduct loss | PyTorch loss | rel. diff | losses before AdamW steps "
          "1..%d, libinduct / PyTorch | max rel. diff |" % steps)
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, v) in enumerate(variants):
            c = dict(base, **v)
            m = induct.Model(n_layers=c["layers"], d_model=c["d_model"], n_heads=c["heads"],
                             d_mlp=c["mlp"], n_ctx=c["seq"], d_vocab=c["vocab"],
                             positional=c["positional"], layer_norm=c["layernorm"],
                             smeared_keys=c["smeared"],
                             shortformer_layers=c.get("shortformer_layers", 0), init="torch",
                             n_threads=1, seed=3 + i)
            rng = np.random.default_rng(11 + i)
            for name in m.tensor_names():
                leaf = name.rsplit(".", 1)[-1]
                if name.startswith("ln_final") or ".ln" in name or leaf == "smear_alpha":
                    shape = np.asarray(m.get(name)).shape
                    mean = 1.0 if leaf == "w" else 0.0
                    m.set(name, rng.normal(mean, 0.5, shape).astype(np.float32))
            wfile = os.path.join(tmp, "w%d.safetensors" % i)
            tfile = os.path.join(tmp, "t%d.npy" % i)
            m.save(wfile)
            toks = rng.integers(0, c["vocab"], (steps, c["batch"], c["seq"]), dtype=np.int32)
            np.save(tfile, toks)
            lib_fwd = m.forward(toks[0], logits=False)[2]
            opt = induct.Optimizer(m, "adamw", lr=1e-3, weight_decay=0.01)
            lib_steps = [opt.train_step(toks[k % len(toks)]) for k in range(steps)]
            p = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "torch_peer.py")] +
                               args_of(c, 1) + ["--load", wfile, "--check-tokens", tfile,
                                                "--check-steps", str(steps)],
                               env=clean_env({"OMP_NUM_THREADS": "1",
                                              "OPENBLAS_NUM_THREADS": "1"}),
                               capture_output=True, text=True, check=True)
            t = json.loads(p.stdout.strip().splitlines()[-1])
            rel = abs(t["forward_loss"] - lib_fwd) / abs(lib_fwd)
            rel_steps = max(abs(x - y) / abs(x) for x, y in zip(lib_steps, t["step_losses"]))
            worst = max(worst, rel, rel_steps)
            print("| %s | %.7f | %.7f | %.1e | %s | %.1e |" % (
                label, lib_fwd, t["forward_loss"], rel,
                ", ".join("%.6f / %.6f" % xy for xy in zip(lib_steps, t["step_losses"])),
                rel_steps), flush=True)
    ok = worst <= tol
    print("largest relative difference %.1e: %s (tolerance %.0e)" % (
        worst, "the same model" if ok else "DIFFERENT", tol))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="meson build directory")
    ap.add_argument("--quick", action="store_true",
                    help="short runs (and by default only " + DEFAULT_QUICK + ")")
    ap.add_argument("--configs", default=None, help="e.g. e,e1,e32,f (default %s; with "
                    "--quick %s)" % (DEFAULT_FULL, DEFAULT_QUICK))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--no-torch-sweep", action="store_true",
                    help="skip the search for PyTorch's best setting (use malloc tuning, "
                         "foreach AdamW, OPENBLAS_NUM_THREADS=1)")
    ap.add_argument("--json", default=None, help="also write all results to this file")
    ap.add_argument("--wiki", action="store_true",
                    help="also time examples/induction-rrt (1 and 2 layers, 2000 steps, "
                         "--threads 2) and the evaluation passes")
    ap.add_argument("--check-peer", action="store_true",
                    help="only check that torch_peer.py is libinduct's model: the losses of "
                         "both at the same weights and tokens (needs the Python bindings "
                         "built in --build)")
    a = ap.parse_args()
    if a.check_peer:
        sys.exit(check_peer(a.build))
    configs = (a.configs or (DEFAULT_QUICK if a.quick else DEFAULT_FULL)).split(",")
    for name in configs:
        if name not in CONFIGS:
            ap.error("unknown config %r (known: %s)" % (name, ", ".join(CONFIGS)))
    threads = [int(t) for t in a.threads.split(",")]
    log = lambda s: print(s, file=sys.stderr, flush=True)
    out = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": machine(),
           "command": " ".join(sys.argv), "load_before": loadavg(), "roof": [], "runs": []}
    for t in threads:
        for size in (1024, 64):
            r = roof(a.build, t, size)
            out["roof"].append(r)
            log("sgemm %4d^3, %d thread(s): %.1f GFLOP/s (median %.1f)" % (
                size, t, r["gflops"], r["median_gflops"]))
    for name in configs:
        for t in threads:
            log("config %s, %d thread(s), load %s" % (name, t, " ".join(loadavg())))
            r = measure(a.build, name, t, not a.no_torch_sweep, a.quick, log)
            r["roof_gflops"] = max(x["gflops"] for x in out["roof"] if x["threads"] == t and
                                   x["size"] == 1024)
            for who in ("libinduct", "pytorch"):
                r[who]["roof_pct"] = 100 * r[who]["gflops"] / r["roof_gflops"]
            out["runs"].append(r)
            log("  libinduct %9.2f ms  pytorch %9.2f ms  ratio %.2f  (%s)" % (
                r["libinduct"]["median_ms"], r["pytorch"]["median_ms"],
                r["ratio_pytorch_over_libinduct"], r["torch_setting"]))
    for r in out["runs"]:  # against PyTorch at its best thread count in this run
        best = min(x["pytorch"]["median_ms"] for x in out["runs"] if x["config"] == r["config"])
        r["ratio_pytorch_best_threads_over_libinduct"] = best / r["libinduct"]["median_ms"]
    if a.wiki:
        out["evaluation"] = evaluation(a.build, log)
        out["wiki"] = wiki(a.build, 2, 200 if a.quick else 2000, log)
    out["load_after"] = loadavg()
    print("# %s  %s  load before %s after %s" % (out["date"], out["machine"]["cpu"],
                                                  " ".join(out["load_before"]),
                                                  " ".join(out["load_after"])))
    print("sgemm roof: " + ", ".join("%d^3 %dT %.0f GFLOP/s" % (r["size"], r["threads"],
                                                                 r["gflops"])
                                     for r in out["roof"]))
    hdr = ("| cfg | thr | libinduct ms | PyTorch ms | ratio | min ms lib / torch | "
           "CPU ms lib / torch | lib tok/s | "
           "torch tok/s | lib GFLOP/s | torch GFLOP/s | lib % roof | torch % roof | "
           "lib RSS MiB (theory) | torch RSS MiB |")
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for r in out["runs"]:
        L, P = r["libinduct"], r["pytorch"]
        print("| %s | %d | %.2f | %.2f | %.2f | %.2f / %.2f | %.1f / %.1f | %.0f | %.0f | %.1f | "
              "%.1f | %.0f | %.0f | %.0f (%.0f) | %.0f |" % (
                          r["config"], r["threads"], L["median_ms"], P["median_ms"],
                          r["ratio_pytorch_over_libinduct"], L["min_ms"], P["min_ms"],
                          L["median_cpu_ms"],
                          P["median_cpu_ms"], L["tokens_per_s"],
                          P["tokens_per_s"], L["gflops"], P["gflops"],
                          L["roof_pct"], P["roof_pct"], L["peak_rss_above_start_mib"],
                          r["theory_mib"], P["peak_rss_above_start_mib"]))
    print("PyTorch at its best thread count of the run / libinduct: " + ", ".join(
        "%s/%dT %.2f" % (r["config"], r["threads"], r["ratio_pytorch_best_threads_over_libinduct"])
        for r in out["runs"]))
    print("PyTorch settings: " + "; ".join("%s/%dT: %s" % (r["config"], r["threads"],
                                                          r["torch_setting"])
                                          for r in out["runs"]))
    if "evaluation" in out:
        print("evaluation, us/token: " + ", ".join("%s %.2f" % kv
                                                   for kv in out["evaluation"].items()))
    if "wiki" in out:
        w = out["wiki"]
        print("wiki experiment (%d steps, %d threads): %.1f s wall, training %.1f s + %.1f s, "
              "peak RSS %.0f MiB (training theory %.0f MiB); losses %s" % (
                  w["steps"], w["threads"], w["wall_s"], w["train_s"][0], w["train_s"][1],
                  w["peak_rss_mib"], w["theory_train_mib"], w["loss"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
