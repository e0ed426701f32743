#!/usr/bin/python3
"""Calibrate the LLC sampler on one checkpoint of a phase-change run: a grid of step
sizes epsilon x inverse temperatures nbeta (x localisations gamma), each cell one
estimate, drawn as devinterp's calibration notebook does: the loss traces of every
chain (loss minus L(w*)) and the estimates against epsilon (docs/llc.md, "Calibration").

Usage: /usr/bin/python3 examples/llc_calibrate.py RUN_DIR [--model 2L] [--step S]
           [--epsilons 1e-4,3e-4,1e-3,3e-3] [--nbetas tokens,30,100] [--gammas 100]
           [sampler options] [--out DIR] [--build BUILD_DIR]

What to look for: a usable cell has traces that rise from 0 and level off within the
burn-in (draws then fluctuate around a plateau), few draws below L(w*) (below_init), no
divergence, and an estimate that changes little with epsilon around it (the flat part of
the curve). Too small an epsilon: the traces still climb at the end (the estimate grows
with more steps). Too large: traces climb without levelling, or the run diverges (marked
x). Writes calibration.json and calibration_traces.png, calibration_llc.png into DIR
(default RUN_DIR/llc-calibration).
"""
import argparse
import json
import math
import os
import time

import llc_run


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir")
    p.add_argument("--model", default="2L", help="model directory in RUN_DIR (2L)")
    p.add_argument("--step", type=int, default=-1, help="checkpoint step (default: the last)")
    p.add_argument("--epsilons", default="1e-4,3e-4,1e-3,3e-3")
    p.add_argument("--nbetas", default="tokens,30,100",
                   help="numbers, or the rules 'batch' and 'tokens'")
    p.add_argument("--gammas", default="100")
    p.add_argument("--data", help="the run's token file or text, if it moved")
    p.add_argument("--out", help="output directory (default RUN_DIR/llc-calibration)")
    p.add_argument("--build", help="meson build directory with the Python bindings")
    llc_run.add_sampler_options(p, dict(chains=2, draws=100, burnin=0, batch=4, epsilon=1e-3,
                                        gamma=100.0, nbeta="tokens"))
    a = p.parse_args()
    induct = llc_run.find_induct(a.build)
    summary = llc_run.read_summary(a.run_dir)
    models = summary.get("models", {})
    if a.model not in models:
        llc_run.fail(f"no model {a.model!r} in the run (it has {sorted(models)})")
    steps = int(models[a.model]["steps"])
    ck = llc_run.checkpoints(a.run_dir, a.model, steps)
    if not ck:
        llc_run.fail(f"no checkpoints in {os.path.join(a.run_dir, a.model)}")
    step, path = ck[-1] if a.step < 0 else next(((s, q) for s, q in ck if s == a.step),
                                                (None, None))
    if path is None:
        llc_run.fail(f"no checkpoint at step {a.step} (kept: {[s for s, _ in ck]})")
    data = llc_run.open_data(induct, summary, a.data)
    out = a.out or os.path.join(a.run_dir, "llc-calibration")
    os.makedirs(out, exist_ok=True)
    eps = [float(x) for x in a.epsilons.split(",")]
    nbs = a.nbetas.split(",")
    gms = [float(x) for x in a.gammas.split(",")]
    base = llc_run.settings_from_args(a)
    cells = [(e, nb, g) for g in gms for nb in nbs for e in eps]

    def work(cell):
        e, nb, g = cell
        m = induct.Model.load(path)
        m.set_threads(a.threads)
        kw = dict(base, epsilon=e, gamma=g, mala=True)
        kw.pop("nbeta", None)
        kw.pop("nbeta_rule", None)
        if nb in ("batch", "tokens"):
            kw["nbeta_rule"] = nb
        else:
            kw["nbeta"] = float(nb)
        t0 = time.time()
        c0 = time.thread_time()
        try:
            r = m.llc(data, **kw)
        except induct.NumericError as ex:
            return dict(epsilon=e, nbeta_setting=nb, gamma=g, diverged=True, message=str(ex))
        return dict(epsilon=e, nbeta_setting=nb, gamma=g, diverged=False, llc=r.llc_mean,
                    llc_se=r.llc_se, llc_chains=r.chain_llc.tolist(), nbeta=r.nbeta,
                    init_loss=r.init_loss, below_init=r.below_init, mala=r.mala_accept,
                    traces=(r.draw_losses - (r.draw_ref_losses if r.paired else r.init_loss)
                            ).tolist(), paired=bool(r.paired),
                    seconds=time.time() - t0, cpu_seconds=time.thread_time() - c0)

    print(f"{len(cells)} cells on {a.model} step {step} ({path}), {a.jobs} at a time")
    t0 = time.time()
    res = llc_run.run_parallel(cells, a.jobs, work)
    for c, r in zip(cells, res):
        if isinstance(r, Exception):
            llc_run.fail(f"cell {c}: {r}")
    wall = time.time() - t0
    doc = dict(run_dir=os.path.abspath(a.run_dir), model=a.model, step=step,
               tokens=step * summary["config"]["training"]["tokens_per_step"],
               settings={k: v for k, v in base.items() if k not in ("epsilon", "gamma")},
               wall_seconds=wall, cells=res)
    with open(os.path.join(out, "calibration.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    print(f"{'gamma':>6} {'nbeta':>8} {'eps':>8} {'llc':>10} {'se':>7} {'below':>6} {'mala':>5}")
    for r in res:
        if r["diverged"]:
            print(f"{r['gamma']:6g} {r['nbeta_setting']:>8} {r['epsilon']:8.0e}   diverged")
        else:
            print(f"{r['gamma']:6g} {r['nbeta_setting']:>8} {r['epsilon']:8.0e} {r['llc']:10.2f} "
                  f"{r['llc_se']:7.2f} {r['below_init']:6.2f} {r['mala']:5.2f}")
    plot(doc, eps, nbs, gms, out)
    print(f"wrote {out}/calibration.json, calibration_traces.png, calibration_llc.png "
          f"({wall:.0f} s)")


def plot(doc, eps, nbs, gms, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cells = {(r["epsilon"], r["nbeta_setting"], r["gamma"]): r for r in doc["cells"]}
    rows = [(g, e) for g in gms for e in eps]
    fig, axes = plt.subplots(len(rows), len(nbs), figsize=(3.2 * len(nbs), 2.2 * len(rows)),
                             squeeze=False, sharex=True)
    for i, (g, e) in enumerate(rows):
        for j, nb in enumerate(nbs):
            ax = axes[i][j]
            r = cells[(e, nb, g)]
            if r["diverged"]:
                ax.text(0.5, 0.5, "diverged", ha="center", va="center", transform=ax.transAxes,
                        color="tab:red")
            else:
                for tr in r["traces"]:
                    ax.plot(tr, lw=0.8)
                ax.axhline(0, color="k", lw=0.5)
                ax.set_title(f"λ̂ {r['llc']:.1f} ± {r['llc_se']:.1f}, nβ {r['nbeta']:.3g}",
                             fontsize=8)
            if j == 0:
                ax.set_ylabel(f"γ = {g:g}, ε = {e:g}\nL(w) − L(w*) (nats)", fontsize=8)
            if i == len(rows) - 1:
                ax.set_xlabel(f"draw (nβ: {nb})", fontsize=8)
            ax.tick_params(labelsize=7)
    fig.suptitle(f"{doc['model']} at step {doc['step']} ({doc['tokens'] / 1e6:.2f} M tokens): "
                 f"loss traces of every chain", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "calibration_traces.png"), dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(1, len(gms), figsize=(4.5 * len(gms), 3.4), squeeze=False)
    for k, g in enumerate(gms):
        ax = axes[0][k]
        for nb in nbs:
            xs, ys, es, xd = [], [], [], []
            for e in eps:
                r = cells[(e, nb, g)]
                if r["diverged"]:
                    xd.append(e)
                else:
                    xs.append(e)
                    ys.append(r["llc"])
                    es.append(r["llc_se"] if math.isfinite(r["llc_se"]) else 0.0)
            line = ax.errorbar(xs, ys, yerr=es, marker="o", ms=3, capsize=2, label=f"nβ {nb}")
            for x in xd:
                ax.plot([x], [ys[-1] if ys else 0], "x", color=line[0].get_color(), ms=8)
        ax.set_xscale("log")
        ax.set_xticks(eps)
        ax.set_xticklabels([f"{e:g}" for e in eps], fontsize=7)
        vals = [r["llc"] for r in doc["cells"] if not r["diverged"] and r["gamma"] == g]
        if vals and min(vals) > 0:
            ax.set_yscale("log")
        ax.set_xlabel("ε (x: diverged)")
        ax.set_ylabel("λ̂ (mean ± SE over chains)")
        ax.set_title(f"γ = {g:g}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "calibration_llc.png"), dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
