#!/usr/bin/python3
"""Figures of a phase-change run (the main job's study directory: study/report.py wrote
its summary; docs/phase-change.md).

Usage: /usr/bin/python3 study/plot_phase_change.py RUN_DIR [--build BUILD_DIR]
                                                      [--tokenizer SPM_MODEL]

Reads RUN_DIR/metrics.jsonl, RUN_DIR/summary.json and RUN_DIR/<model>/final.safetensors
and writes five PNG files into RUN_DIR:
  phase_change.png  ICL score and the largest prefix-matching score of any head against
                    training tokens, every model, detected windows shaded, the paper's
                    0.15-nats line, the final ICL score of the large evaluation ± 3 standard errors;
  attention.png     attention pattern of the strongest induction head of any model (the
                    2-layer model's best last-layer head when no model has one) on a
                    repeated passage (40 tokens of held-out text, twice), its axes
                    labelled with the decoded tokens: bytes, or word pieces through the
                    sentencepiece model (--tokenizer, else the .model file next to the
                    token file, as scripts/phase-change.sh --bpe leaves it; the last id
                    of the vocabulary is the newline);
  ablation.png      ICL-score change per ablated head (zero and pattern-preserving);
  pca.png           per-token-loss PCA trajectories of every model;
  loss_by_position.png  each model's loss by position at the end of training (an eighth
                    of the large evaluation's windows), where the ICL score is read.
The `induct` package is taken from BUILD_DIR/bindings/python (default: the `build`
directory next to this script's parent, or $INDUCT_BUILD_DIR), else from the installed one.
"""
import argparse
import json
import math
import os
import sys


def _find_induct(build):
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [build, os.environ.get("INDUCT_BUILD_DIR"), os.path.join(here, "..", "build")]
    for c in candidates:
        if c and os.path.isdir(os.path.join(c, "bindings", "python", "induct")):
            sys.path.insert(0, os.path.abspath(os.path.join(c, "bindings", "python")))
            break
    import induct  # noqa: E402  (the installed package when no build tree is found)
    return induct


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def tokenizer_for(induct, data, spm_model=None):
    """The tokenizer of the run's data: bytes, or the sentencepiece model of a token
    file (given, or <token file without extension>.model), else None (ids)."""
    if data["kind"].startswith("text"):
        return induct.ByteTokenizer(bos=bool(data.get("bos")))
    if spm_model is None:
        spm_model = os.path.splitext(str(data.get("path", "")))[0] + ".model"
    if not os.path.isfile(spm_model):
        return None
    return induct.SentencePieceTokenizer(spm_model, newline_id=data["d_vocab"] - 1)


def main():
    ap = argparse.ArgumentParser(description="Figures of a phase-change run")
    ap.add_argument("run_dir")
    ap.add_argument("--build", default=None, help="meson build directory (bindings/python)")
    ap.add_argument("--tokenizer", default=None, metavar="SPM_MODEL",
                    help="sentencepiece model of a word-piece token file (attention labels)")
    args = ap.parse_args()
    induct = _find_induct(args.build)
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    run = args.run_dir
    summary = json.load(open(os.path.join(run, "summary.json"), encoding="utf-8"))
    records = read_jsonl(os.path.join(run, "metrics.jsonl"))
    order = summary["model_order"]
    models = summary["models"]
    heads = summary["config"]["model"]["n_heads"]
    rules = summary["rules"]
    written = []
    ev = summary["config"]["evaluation"]

    def band_icl(rec, ev):
        """The run's ICL estimator (the library's induct_analysis_icl_band) on the logged
        curve."""
        lbp = rec.get("loss_by_position")
        if not lbp:
            return math.nan
        return induct.icl_band(lbp, ev["icl_early_token"], ev["icl_late_token"],
                               int(ev.get("icl_band", 0)))

    def save(fig, name):
        path = os.path.join(run, name)
        FigureCanvasAgg(fig)
        fig.savefig(path, format="png", dpi=100, metadata={"Software": None})
        written.append(path)

    # ---- phase_change.png: ICL and last-layer prefix matching vs tokens, all models ----
    fig = Figure(figsize=(8, 7))
    ax_icl, ax_pm, ax_loss = fig.subplots(3, 1, sharex=True)
    for i, name in enumerate(order):
        recs = [r for r in records if r["model"] == name]
        color = f"C{i % 10}"
        tok = np.array([r["tokens"] for r in recs], dtype=float)
        icl = [band_icl(r, ev) for r in recs]
        # the window rule's series (the window evaluation), with ± 1 standard error; the
        # per-step curve's band estimate dotted beside it
        we = models[name].get("window_evaluation")
        if we:
            ax_icl.plot(tok, icl, ls=":", lw=0.8, color=color, alpha=0.7)
            icl = np.array(we["icl"], dtype=float)
            se = np.array([math.nan if v is None else v for v in we["icl_se"]], dtype=float)
            ax_icl.fill_between(tok, icl - se, icl + se, color=color, alpha=0.2, lw=0)
        else:
            icl_token = [r.get("icl_score") for r in recs]
            if not any(v is None for v in icl_token):
                ax_icl.plot(tok, icl_token, ls=":", lw=0.8, color=color, alpha=0.7)
        # any layer: a smeared-key model's induction heads can sit in layer 0
        pm = np.array([np.asarray(r["prefix_matching_score"], dtype=float).max()
                       for r in recs])
        ax_icl.plot(tok, icl, marker=".", color=color, label=name)
        ax_pm.plot(tok, pm, marker=".", color=color, label=name)
        ax_loss.plot(tok, [r.get("eval_loss") for r in recs], marker=".", color=color, label=name)
        w = models[name]["window"]
        if w["found"]:
            for ax in (ax_icl, ax_pm, ax_loss):
                ax.axvspan(w["start_tokens"], w["end_tokens"], color=color, alpha=0.15, lw=0)
        # the final score of the large evaluation, ± 3 standard errors
        m = models[name]
        if m.get("icl_after") is not None and m.get("icl_after_se") is not None:
            ax_icl.errorbar([tok[-1]], [m["icl_after"]], yerr=[3 * m["icl_after_se"]],
                            fmt="s", ms=4, capsize=3, color=color)
    ax_icl.axhline(-rules["icl_fall_min"], color="0.3", ls="--", lw=1,
                   label=f"−{rules['icl_fall_min']} nats")
    ax_icl.axhline(0.0, color="0.6", lw=0.8)
    ax_icl.set_ylabel("ICL score (nats)")
    win = ev.get("window") or {}
    if any(models[n].get("window_evaluation") for n in order):
        what = (f"solid: {win.get('windows')} windows at every evaluation (the window rule's "
                f"series, ± 1 s.e.)\ndotted: the {ev.get('eval_batch')}-window per-step curve")
    else:
        what = "solid: the per-step curve, dotted: single tokens"
    ax_icl.set_title(f"ICL score = loss of token {ev['icl_late_token']} − token "
                     f"{ev['icl_early_token']}, each averaged over ±{ev.get('icl_band', 0)} "
                     f"tokens\n{what}; squares: final score of the large evaluation ± 3 s.e.",
                     fontsize="x-small")
    ax_pm.axhline(rules["pm_high"], color="0.3", ls="--", lw=1, label=f"{rules['pm_high']}")
    chance = summary["config"]["evaluation"].get("prefix_matching_chance")
    if chance is not None:
        ax_pm.axhline(chance, color="0.6", ls=":", lw=1, label="uniform attention")
    ax_pm.set_ylabel("max prefix matching,\nany head")
    ax_loss.set_ylabel("eval loss (nats)")
    ax_loss.set_xlabel("training tokens (shaded: detected phase-change windows)")
    induct.plot.count_axis(ax_loss.xaxis)
    for ax in (ax_icl, ax_pm, ax_loss):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc="best")
    fig.suptitle("Phase change: " + os.path.basename(str(summary["config"]["data"]["path"])))
    fig.tight_layout()
    save(fig, "phase_change.png")

    # ---- attention.png: the plain 2-layer model's strongest induction head (the
    # headline), else the strongest of any model (by final prefix-matching score);
    # without any, the 2-layer model's best last-layer prefix-matching head ----
    cands = []
    for name in order:
        pm = np.asarray(models[name]["heads"]["prefix_matching"], dtype=float)
        labels = models[name]["heads"]["labels"]
        cands += [(pm[l, h], name, l, h) for l in range(len(labels)) for h in range(heads)
                  if labels[l][h] == "induction"]
    if any(c[1] == "2L" for c in cands):
        cands = [c for c in cands if c[1] == "2L"]
    if cands:
        _, main_name, layer, head = max(cands)
        pm_final = np.asarray(models[main_name]["heads"]["prefix_matching"], dtype=float)
        what = "strongest induction head"
    else:
        main_name = "2L" if "2L" in models else max(order, key=lambda n: models[n]["n_layers"])
        pm_final = np.asarray(models[main_name]["heads"]["prefix_matching"], dtype=float)
        layer = pm_final.shape[0] - 1
        head = int(pm_final[layer].argmax())
        what = "no induction head:\nbest last-layer prefix-matching head"
    model = induct.Model.load(os.path.join(run, main_name, "final.safetensors"))
    toks = summary["attention_probe_tokens"]
    pattern = model.attention(toks)
    tokenizer = tokenizer_for(induct, summary["config"]["data"], args.tokenizer)
    induct.plot.attention(pattern, os.path.join(run, "attention.png"), tokens=toks,
                          labels=tokenizer, layer=layer, head=head,
                          title=f"{main_name} head {layer}.{head} ({what.replace(chr(10), ' ')}; "
                                f"prefix matching {pm_final[layer, head]:.2f}) on 40 tokens "
                                f"of held-out text, twice")
    written.append(os.path.join(run, "attention.png"))

    # ---- ablation.png: Δicl per head, zero and pattern-preserving, every model ----
    fig = Figure(figsize=(max(6.0, 0.5 * sum(models[n]["n_layers"] * heads for n in order) + 2),
                          2.6 * len(order) + 0.6))
    axes = fig.subplots(len(order), 1, squeeze=False)[:, 0]
    for ax, name in zip(axes, order):
        ab = models[name]["ablation"]
        z = np.asarray(ab["delta_icl_zero"], dtype=float).reshape(-1)
        pp = np.asarray(ab["delta_icl_zero_preserve_patterns"], dtype=float).reshape(-1)
        L = models[name]["n_layers"]
        names = [f"{l}.{h}" + ("*" if models[name]["heads"]["labels"][l][h] == "induction"
                               else "") for l in range(L) for h in range(heads)]
        x = np.arange(z.size)
        ax.bar(x - 0.2, z, width=0.4, label="zero ablation", color="tab:blue")
        ax.bar(x + 0.2, pp, width=0.4, label="zero, patterns preserved", color="tab:orange")
        ax.set_xticks(x)
        ax.set_xticklabels(names, rotation=90 if z.size > 16 else 0, fontsize="small")
        ax.axhline(0.0, color="0.3", lw=0.8)
        frac = ab.get("fraction_removed_by_induction_heads")
        sub = f"clean ICL {ab['icl_clean']:+.3f} nats" if ab["icl_clean"] is not None else ""
        if frac is not None:
            sub += f"; induction heads (*) together remove {100 * frac:.0f}%"
        ax.set_title(f"{name}: {sub}", fontsize="medium")
        ax.set_ylabel("Δ ICL score (nats)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize="small")
    axes[-1].set_xlabel("head (layer.head; * = induction head)")
    fig.suptitle("ICL-score change when each head is ablated (positive: the head helps "
                 "in-context learning)")
    fig.tight_layout()
    save(fig, "ablation.png")

    # ---- loss_by_position.png: each model's loss by position at the end of training
    # (the large evaluation's curve), where the ICL score is read ----
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    lg = ev.get("large", {})
    for i, name in enumerate(order):
        m = models[name]
        curve = m.get("loss_by_position_final")
        if not curve:
            continue
        curve = np.asarray([np.nan if v is None else v for v in curve], dtype=float)
        pos = np.arange(1, curve.size + 1)  # L[p] is the loss of the (p+1)-th token
        se = m.get("icl_after_se")
        lab = f"{name}: ICL {m['icl_after']:+.3f}" + (f" ± {se:.3f}" if se is not None else "")
        ax.plot(pos, curve, color=f"C{i % 10}", lw=1, label=lab + " nats")
    for k in ("icl_early_token", "icl_late_token"):
        t = ev[k]
        w = ev.get("icl_band", 0)
        ax.axvspan(t - w, t + w, color="0.5", alpha=0.25, lw=0)
    ax.set_xscale("log")
    ax.set_xlabel("token index in the context (shaded: the ICL score's bands)")
    ax.set_ylabel("loss (nats)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    nw = next((models[n].get("loss_by_position_final_windows") for n in order
               if models[n].get("loss_by_position_final_windows")), lg.get("windows", "?"))
    ax.set_title(f"Loss by position at the end of training ({nw} held-out windows; ICL scores "
                 f"from {lg.get('windows', '?')})", fontsize="medium")
    fig.tight_layout()
    save(fig, "loss_by_position.png")

    # ---- pca.png: per-token-loss trajectories ----
    pca = summary["pca"]
    traj = {n: np.array([[p["pc1"], p["pc2"]] for p in models[n]["pca_trajectory"]], dtype=float)
            for n in order if models[n].get("pca_trajectory")}
    path = os.path.join(run, "pca.png")
    if traj and "explained_variance" in pca:
        res = induct.PCA(None, None, np.asarray(pca["explained_variance"], dtype=float),
                         float(pca["total_variance"]))
        steps = {n: [p["step"] for p in models[n]["pca_trajectory"]] for n in traj}
        induct.plot.pca_trajectories(traj, path, pca=res, steps=steps,
                                     title="Per-token loss PCA (all evaluations of all models)")
    else:
        fig = Figure(figsize=(6, 2))
        fig.text(0.5, 0.5, "PCA skipped: " + pca.get("skipped", "no data"), ha="center")
        save(fig, "pca.png")
        written.pop()
    written.append(path)
    for p in written:
        print("wrote", p)


if __name__ == "__main__":
    main()
