#!/usr/bin/python3
"""The developmental landscape of a phase-change run: the local learning coefficient
(LLC) at every kept checkpoint of the 2-layer model and the 1-layer control, its
stages by Hoogland et al.'s rule, and per-head refined LLCs (docs/llc.md).

Usage: /usr/bin/python3 examples/llc_stages.py RUN_DIR [--models 2L,1L]
           [--checkpoints N [--window-points K]] [--heads] [sampler options] [--smooth W]
           [--out DIR] [--build BUILD_DIR] [--data PATH]

RUN_DIR is the --out directory of scripts/phase-change.sh run with --snapshots N (which
keeps N + 1 checkpoints per model; the default 4 is too few for a curve: use 30 or more).
Every estimate uses the same settings, seed, noise and minibatches (the library draws
them from the seed alone), so differences along training are not sampling noise.

Stages (Hoogland et al. 2024, Section 4): the LLC is smoothed against log(tokens) with a
Gaussian kernel of width W decades (default 0.1) and the boundaries are its critical
points, where the smoothed curve's slope changes sign; each is reported with its kind
(peak or trough) and whether the smoothed curve changes by more than twice the median
standard error of the estimates on both sides of it, to the neighbouring critical points
or the ends of the curve (else it is within the noise: a slope that changes sign needs a
real change on each side).

Writes into DIR (default RUN_DIR/llc): llc.json (every estimate with its standard error
and diagnostics, the settings, the stages, the wall and CPU time), llc.png (the LLC of
each model against tokens on a log axis with the phase-change window shaded and the
stage boundaries marked, above the models' loss and the induction head's
prefix-matching score), and with --heads llc_heads.png (every head's refined LLC, with
its prefix-matching and previous-token scores from metrics.jsonl).
"""
import argparse
import json
import math
import os
import time

import llc_run

# The settings docs/llc.md recommends for the phase-change models (from
# examples/llc_calibrate.py on the 2-layer model; docs/llc.md, "Calibration").
RECOMMENDED = dict(chains=4, draws=20, burnin=10, batch=4, epsilon=3e-4, gamma=1000.0,
                   nbeta="tokens", max_increase=2.0, paired=True, init_batches=8)


def stages(xs, ys, width, se):
    """Critical points of the Gaussian-kernel smoothing (width in the units of xs) of
    (xs, ys): [(x, kind, significant)], and the smoothed curve on a grid. A critical
    point is significant when the smoothed curve differs from it by more than 2·se both
    towards the previous critical point (or the start) and towards the next (or the end)."""
    import numpy as np
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    grid = np.linspace(xs.min(), xs.max(), 400)
    w = np.exp(-0.5 * ((grid[:, None] - xs[None, :]) / width) ** 2)
    sm = (w * ys).sum(1) / w.sum(1)
    d = np.diff(sm)
    crit = []
    for i in range(1, len(d)):
        if d[i - 1] == 0 or np.sign(d[i - 1]) == np.sign(d[i]):
            continue
        crit.append((float(grid[i]), "peak" if d[i - 1] > 0 else "trough", float(sm[i])))
    out = []
    for k, (x, kind, v) in enumerate(crit):
        nb = [crit[j][2] for j in (k - 1, k + 1) if 0 <= j < len(crit)]
        nb += [float(sm[0])] if k == 0 else []
        nb += [float(sm[-1])] if k == len(crit) - 1 else []
        sig = bool(min(abs(v - u) for u in nb) > 2 * se)
        out.append(dict(log10_tokens=x, tokens=10 ** x, kind=kind, llc=v, significant=sig))
    return out, grid, sm


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("--models", default="2L,1L", help="models of the run ('all' for every one)")
    p.add_argument("--checkpoints", type=int, default=0,
                   help="at most this many checkpoints per model, spread in log(step) "
                        "(0: every kept one)")
    p.add_argument("--window-points", type=int, default=10,
                   help="with --checkpoints, also up to this many checkpoints inside the "
                        "phase-change window of any of the models, and the ones just outside "
                        "it (10; 0: none)")
    p.add_argument("--heads", action="store_true",
                   help="also every head's refined LLC (its W_Q, W_K, W_V, W_O slices)")
    p.add_argument("--smooth", type=float, default=0.1,
                   help="width of the smoothing in decades of tokens (0.1)")
    p.add_argument("--reuse", metavar="LLC_JSON",
                   help="take the estimates of an earlier llc.json made with the same settings "
                        "instead of recomputing them (e.g. to add --heads to a curve)")
    p.add_argument("--data", help="the run's token file or text, if it moved")
    p.add_argument("--out", help="output directory (default RUN_DIR/llc)")
    p.add_argument("--build", help="meson build directory with the Python bindings")
    llc_run.add_sampler_options(p, RECOMMENDED)
    a = p.parse_args()
    induct = llc_run.find_induct(a.build)
    import numpy as np
    summary = llc_run.read_summary(a.run_dir)
    allm = summary.get("models", {})
    names = sorted(allm) if a.models == "all" else a.models.split(",")
    for n in names:
        if n not in allm:
            llc_run.fail(f"no model {n!r} in the run (it has {sorted(allm)})")
    tps = summary["config"]["training"]["tokens_per_step"]
    data = llc_run.open_data(induct, summary, a.data)
    out = a.out or os.path.join(a.run_dir, "llc")
    os.makedirs(out, exist_ok=True)
    kw = llc_run.settings_from_args(a)
    tasks = []
    per_model = {}
    windows = [(m["window"]["start_tokens"], m["window"]["end_tokens"])
               for n, m in allm.items() if n in names and m.get("window", {}).get("found")]
    for n in names:
        kept = llc_run.checkpoints(a.run_dir, n, int(allm[n]["steps"]))
        ck = llc_run.log_subset(kept, a.checkpoints)
        if a.checkpoints:
            extra = llc_run.window_subset(kept, windows, tps, a.window_points)
            ck = sorted({s: (s, q) for s, q in ck + extra}.values())
        if len(ck) < 3:
            llc_run.fail(f"{n}: {len(ck)} checkpoints; run phase-change with --snapshots 30 "
                         "or more")
        L = int(allm[n]["n_layers"])
        H = int(summary["config"]["model"]["n_heads"])
        per_model[n] = dict(L=L, H=H, steps=[s for s, _ in ck])
        for s, path in ck:
            tasks.append((n, s, path, None))
            if a.heads:
                for layer in range(L):
                    for h in range(H):
                        tasks.append((n, s, path, (layer, h)))

    reuse = {}
    if a.reuse:
        with open(a.reuse, encoding="utf-8") as f:
            old = json.load(f)
        if old.get("settings") != kw:
            llc_run.fail(f"{a.reuse} was made with other settings ({old.get('settings')})")
        for md in old["models"].values():
            for r in md["estimates"] + md["head_estimates"]:
                reuse[(r["model"], r["step"], r["head"])] = r

    def work(t):
        n, s, path, head = t
        hit = reuse.get((n, s, None if head is None else f"{head[0]}.{head[1]}"))
        if hit is not None:
            return dict(hit, reused=True)
        m = induct.Model.load(path)
        m.set_threads(a.threads)
        mask = None if head is None else (f"blocks.{head[0]}.attn", head[1])
        t0, c0 = time.time(), time.thread_time()
        r = m.llc(data, mask=mask, **kw)
        return dict(model=n, step=s, tokens=s * tps, head=None if head is None else
                    f"{head[0]}.{head[1]}", llc=r.llc_mean, llc_se=r.llc_se,
                    llc_chains=r.chain_llc.tolist(), init_loss=r.init_loss, nbeta=r.nbeta,
                    below_init=r.below_init, n_sampled=r.n_sampled,
                    seconds=time.time() - t0, cpu_seconds=time.thread_time() - c0)

    counts = ", ".join(f"{n}: {len(per_model[n]['steps'])} checkpoints" for n in names)
    print(f"{len(tasks)} estimates ({counts}{', every head too' if a.heads else ''}), "
          f"{a.jobs} at a time, settings {kw}")
    t0 = time.time()
    res = llc_run.run_parallel(tasks, a.jobs, work)
    wall = time.time() - t0
    for t, r in zip(tasks, res):
        if isinstance(r, Exception):
            llc_run.fail(f"{t[0]} step {t[1]} head {t[3]}: {r} (calibrate: "
                         "examples/llc_calibrate.py)")
    fresh = [r for r in res if not r.get("reused")]
    cpu = sum(r["cpu_seconds"] for r in fresh)
    doc = dict(run_dir=os.path.abspath(a.run_dir), settings=kw, tokens_per_step=tps,
               smooth_decades=a.smooth, wall_seconds=wall, cpu_seconds=cpu, jobs=a.jobs,
               threads=a.threads, estimates_computed=len(fresh), models={})
    for n in names:
        full = [r for r in res if r["model"] == n and r["head"] is None]
        pos = [r for r in full if r["tokens"] > 0]
        se = float(np.median([r["llc_se"] for r in full]))
        st, _, _ = stages([math.log10(r["tokens"]) for r in pos], [r["llc"] for r in pos],
                          a.smooth, se)
        w = allm[n].get("window", {})
        doc["models"][n] = dict(
            estimates=full, stages=st, median_se=se,
            window=dict(found=w.get("found", False), start_tokens=w.get("start_tokens"),
                        end_tokens=w.get("end_tokens")),
            heads=dict(induction=allm[n].get("heads", {}).get("induction", []),
                       previous_token=allm[n].get("heads", {}).get("previous_token_heads", [])),
            head_estimates=[r for r in res if r["model"] == n and r["head"] is not None])
    with open(os.path.join(out, "llc.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    for n in names:
        md = doc["models"][n]
        print(f"\n{n}: LLC at {len(md['estimates'])} checkpoints (median SE {md['median_se']:.2f})")
        for r in md["estimates"]:
            print(f"  step {r['step']:6d}  {r['tokens'] / 1e6:7.2f} M tokens  λ̂ {r['llc']:8.2f} "
                  f"± {r['llc_se']:.2f}  L(w*) {r['init_loss']:.3f}  below {r['below_init']:.2f}")
        for s in md["stages"]:
            print(f"  stage boundary: {s['tokens'] / 1e6:.2f} M tokens ({s['kind']}"
                  f"{'' if s['significant'] else ', within noise'})")
        if md["window"]["found"]:
            print(f"  phase-change window: {md['window']['start_tokens'] / 1e6:.2f}–"
                  f"{md['window']['end_tokens'] / 1e6:.2f} M tokens")
    print(f"\n{len(fresh)} estimates in {wall:.0f} s wall, {cpu:.0f} s CPU "
          f"({a.jobs} jobs x {a.threads} threads){f', {len(res) - len(fresh)} reused' if len(fresh) < len(res) else ''}")
    plot(doc, a.run_dir, out, names, summary)
    print(f"wrote {out}/llc.json, llc.png{', llc_heads.png' if a.heads else ''}")


def metrics(run_dir, model):
    path = os.path.join(run_dir, model, "metrics.jsonl")
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _xpos(tokens, first):
    """Tokens on the log axis; step 0 is drawn a factor 4 left of the first checkpoint."""
    return tokens if tokens > 0 else first / 4


def plot(doc, run_dir, out, names, summary):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    colors = {n: c for n, c in zip(names, ("tab:blue", "tab:orange", "tab:green", "tab:red"))}
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(8, 7), sharex=True,
                                  gridspec_kw=dict(height_ratios=[3, 2]))
    first = min(r["tokens"] for n in names for r in doc["models"][n]["estimates"]
                if r["tokens"] > 0)
    ax3 = ax2.twinx()
    ax3.set_ylabel("induction head's prefix-matching score (dash-dot)", fontsize=8)
    for n in names:
        md = doc["models"][n]
        est = md["estimates"]
        x = [_xpos(r["tokens"], first) for r in est]
        ax.errorbar(x, [r["llc"] for r in est], yerr=[r["llc_se"] for r in est], fmt="o",
                    ms=3, capsize=2, color=colors[n], label=f"{n}")
        pos = [r for r in est if r["tokens"] > 0]
        _, grid, sm = stages([math.log10(r["tokens"]) for r in pos], [r["llc"] for r in pos],
                             doc["smooth_decades"], md["median_se"])
        ax.plot(10 ** grid, sm, color=colors[n], lw=1)
        for s in md["stages"]:
            for a_ in (ax, ax2):
                a_.axvline(s["tokens"], color=colors[n], ls="--" if s["significant"] else ":",
                           lw=1)
        w = md["window"]
        if w["found"]:
            for a_ in (ax, ax2):
                a_.axvspan(w["start_tokens"], w["end_tokens"], color=colors[n], alpha=0.12)
        ms = metrics(run_dir, n)
        if ms:
            tk = [_xpos(r["tokens"], first) for r in ms]
            ax2.plot(tk, [r["eval_loss"] for r in ms], color=colors[n], lw=1,
                     label=f"{n} eval loss")
            ind = md["heads"]["induction"]
            if ind and "prefix_matching_score" in ms[0]:
                l, h = (int(v) for v in ind[0].split("."))
                ax3.plot(tk, [r["prefix_matching_score"][l][h] for r in ms], color=colors[n],
                         ls="-.", lw=1, label=f"{n} head {ind[0]} prefix matching")
                ax3.legend(loc="upper right", fontsize=7)
    s = doc["settings"]
    ax.set_xscale("log")
    ax.set_ylabel("LLC λ̂ (mean ± SE over chains)")
    ax.set_title(f"LLC over training (ε {s['epsilon']:g}, γ {s['gamma']:g}, nβ "
                 f"{s.get('nbeta_rule', s.get('nbeta'))}, {s['chains']} chains × {s['draws']} "
                 f"draws, batch {s['batch']})\nshaded: phase-change window; dashed: stage "
                 f"boundaries (dotted: within the noise)", fontsize=8)
    ax.legend(fontsize=8, loc="upper left")
    ax2.set_ylabel("eval loss (nats)")
    ax2.set_xlabel("training tokens (log; step 0 drawn at the left edge)")
    ax2.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "llc.png"), dpi=120)
    plt.close(fig)
    heads = [n for n in names if doc["models"][n]["head_estimates"]]
    if not heads:
        return
    fig, axes = plt.subplots(len(heads), 1, figsize=(8, 3.6 * len(heads)), squeeze=False,
                             sharex=True)
    for k, n in enumerate(heads):
        ax = axes[k][0]
        md = doc["models"][n]
        hs = sorted({r["head"] for r in md["head_estimates"]})
        ax3 = ax.twinx()
        ms = metrics(run_dir, n)
        tk = [_xpos(r["tokens"], first) for r in ms]
        for i, hd in enumerate(hs):
            c = plt.cm.tab10(i)
            est = sorted((r for r in md["head_estimates"] if r["head"] == hd),
                         key=lambda r: r["tokens"])
            tag = (" (induction)" if hd in md["heads"]["induction"] else "") + \
                  (" (previous-token)" if hd in md["heads"]["previous_token"] else "")
            ax.errorbar([_xpos(r["tokens"], first) for r in est], [r["llc"] for r in est],
                        yerr=[r["llc_se"] for r in est], fmt="o-", ms=3, lw=1, capsize=2,
                        color=c, label=f"head {hd}{tag}")
            l, h = (int(v) for v in hd.split("."))
            if ms and "prefix_matching_score" in ms[0]:
                ax3.plot(tk, [r["prefix_matching_score"][l][h] for r in ms], color=c, ls="--",
                         lw=0.8)
                ax3.plot(tk, [r["previous_token_score"][l][h] for r in ms], color=c, ls=":",
                         lw=0.8)
        w = md["window"]
        if w["found"]:
            ax.axvspan(w["start_tokens"], w["end_tokens"], color="k", alpha=0.08)
        ax.set_xscale("log")
        ax.set_ylabel("refined LLC of the head")
        ax3.set_ylabel("dashed: prefix matching; dotted: previous token", fontsize=7)
        ax.set_title(f"{n}: per-head refined LLC (W_Q, W_K, W_V, W_O of the head)", fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    axes[-1][0].set_xlabel("training tokens (log)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "llc_heads.png"), dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
