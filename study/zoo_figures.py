"""The small-model study's figures (study/zoo_report.py; docs/zoo.md): icl.png, pca.png,
heads.png, tokens.png, tokens.html and slope.png, from zoo.json's numbers, the run
directories' metrics and the token-by-token passage."""
import html
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import cm, colors  # noqa: E402

from common import layers_of, write_atomic  # noqa: E402
from zoo_analyses import CLASSES, FAMILIES, FAMILY_TITLE, family  # noqa: E402

CMAPS = {"attention-only": "Blues", "smeared": "Greens", "mlp": "Oranges"}
DPI = 110


def colour(name, max_depth=6):
    """Families by colour, depth by shade (deeper = darker)."""
    L = layers_of(name)
    x = 0.35 + 0.6 * (min(L, max_depth) - 1) / max(max_depth - 1, 1)
    return cm.get_cmap(CMAPS[family(name)])(x)


def label(z, n):
    d = z["models"][n]["differs"]
    return f"{n} ({d})" if d else n


def icl_series(run, cfg):
    """(tokens, ICL, se or None) over training: the window evaluation when the analysis made
    one (the series the window rule reads), else the metrics log's per-step score (the band
    estimator on its loss-by-position curve when the log has no score: a context shorter
    than the ICL paper's token 500)."""
    m = run["analysis"]["model"]
    tpe = cfg["training"]["batch"] * cfg["training"]["seq_len"]
    we = m.get("window_evaluation")
    if we and we.get("steps"):
        return ([s * tpe for s in we["steps"]], we["icl"], we.get("icl_se"))
    recs = run["records"]
    ev = cfg["evaluation"]
    band = lambda r: sys_induct().icl_band(  # noqa: E731  (a short context logs no score)
        r["loss_by_position"], ev["icl_early_token"], ev["icl_late_token"], ev["icl_band"])
    return ([r["step"] * tpe for r in recs],
            [r["icl_score"] if r.get("icl_score") is not None else
             band(r) if r.get("loss_by_position") else None for r in recs], None)


def fig_icl(d, z, runs):
    cfg, order = z["config"], z["model_order"]
    fig, (ax, axw) = plt.subplots(2, 1, figsize=(9, 8.5), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 2]})
    span = []
    for n in order:
        t, y, se = icl_series(runs[n], cfg)
        pts = [(a, b, s) for a, b, s in zip(t, y, se or [None] * len(t))
               if a > 0 and b is not None]
        span += [p[0] for p in pts]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", ms=2.5, lw=1.4,
                color=colour(n), label=label(z, n))
        if se:
            ax.fill_between([p[0] for p in pts], [p[1] - (p[2] or 0) for p in pts],
                            [p[1] + (p[2] or 0) for p in pts], color=colour(n), alpha=0.12, lw=0)
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set_xscale("log")
    ax.set_ylabel("ICL score (nats; loss at token %u − token %u)"
                  % (cfg["evaluation"]["icl_late_token"], cfg["evaluation"]["icl_early_token"]))
    ax.set_title("ICL score over training, every model (families by colour, depth by shade);\n"
                 "band ± 1 s.e. where the window evaluation measured it", fontsize=10)
    ax.legend(fontsize=7, ncol=3, loc="lower left")
    for i, n in enumerate(order):
        w = z["models"][n]["window"]
        y = len(order) - i
        if w["found"]:
            axw.plot([w["start_tokens"], w["end_tokens"]], [y, y], lw=6, color=colour(n),
                     solid_capstyle="butt")
        else:
            axw.text(0.99, y, "no window", transform=axw.get_yaxis_transform(), ha="right",
                     va="center", fontsize=7, color="0.4")
    if span:  # the token axis from the curves (the window panel may have no data at all)
        ax.set_xlim(min(span) / 1.3, max(span) * 1.3)
    axw.set_yticks(range(len(order), 0, -1))
    axw.set_yticklabels([label(z, n) for n in order], fontsize=7)
    axw.set_xlabel("training tokens (log scale)")
    axw.set_title("phase-change windows (study-analyse's window rule)", fontsize=9)
    axw.grid(axis="x", color="0.9")
    fig.tight_layout()
    fig.savefig(os.path.join(d, "icl.png"), dpi=DPI)
    plt.close(fig)


def fig_pca(d, z):
    traj, order = z["pca_trajectories"], z["model_order"]
    fig, ax = plt.subplots(figsize=(8.5, 7))
    for n in order:
        tr = traj.get(n) or []
        if not tr:
            continue
        w, turn = z["models"][n]["window"], z["models"][n]["pca_turn"]
        x, y = [p["pc1"] for p in tr], [p["pc2"] for p in tr]
        ax.plot(x, y, "-", lw=1, color=colour(n), label=label(z, n))
        ax.plot(x[0], y[0], "o", ms=4, color=colour(n))
        if w["found"]:
            # the window's segment: the evaluations inside it and one on either side
            steps = [p["step"] for p in tr]
            lo = max([s for s in steps if s <= w["start_step"]] or [steps[0]])
            hi = min([s for s in steps if s >= w["end_step"]] or [steps[-1]])
            seg = [p for p in tr if lo <= p["step"] <= hi]
            ax.plot([p["pc1"] for p in seg], [p["pc2"] for p in seg], "-", lw=4, alpha=0.45,
                    color=colour(n))
        if turn.get("step") is not None:
            p = next(p for p in tr if p["step"] == turn["step"])
            ax.plot(p["pc1"], p["pc2"], "x", ms=8, mew=2, color=colour(n))
        ax.plot(x[-1], y[-1], "s", ms=4, color=colour(n))
    v = z["pca"].get("explained_variance_ratio") or [math.nan, math.nan]
    ax.set_xlabel("PC1 (%.0f%% of the variance)" % (100 * v[0]))
    ax.set_ylabel("PC2 (%.0f%% of the variance)" % (100 * v[1]))
    ax.set_title("Per-token-loss vectors of every evaluation of every model in ONE PCA "
                 "(induct_analysis_pca)\n○ start, □ end, thick: the phase-change window "
                 "(evaluations enclosing it), × the turn", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "pca.png"), dpi=DPI)
    plt.close(fig)


def fig_heads(d, z):
    order = z["model_order"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 5.2), gridspec_kw={"width_ratios": [3, 2]})
    for i, n in enumerate(order):
        r = z["models"][n]
        L = r["n_layers"]
        for l in range(L):  # the model's layers, as faint ticks
            ax.plot([i - 0.3, i + 0.3], [(l + 1) / L] * 2, color="0.85", lw=1)
        for h in r["induction_heads"]:
            ax.scatter([i], [h["relative_depth"]], s=30 + 250 * h["prefix_matching"],
                       color=colour(n), edgecolor="k", lw=0.5, zorder=3)
            ax.annotate(h["head"], (i, h["relative_depth"]), xytext=(6, -3),
                        textcoords="offset points", fontsize=7)
        if not r["induction_heads"]:
            ax.text(i, 0.05, "none", ha="center", fontsize=7, color="0.4", rotation=90)
        for h in r["induction_heads"]:
            ax2.scatter([L + 0.08 * (FAMILIES.index(r["family"]) - 1)], [h["layer"]],
                        s=30 + 250 * h["prefix_matching"], color=colour(n), edgecolor="k",
                        lw=0.5, zorder=3)
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels([label(z, n) for n in order], rotation=60, ha="right", fontsize=7)
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("relative depth (layer + 1) / n_layers")
    ax.set_title("Induction heads of every layer (marker size: prefix matching; grey ticks: "
                 "the model's layers)", fontsize=9)
    mx = max([z["models"][n]["n_layers"] for n in order] + [2])
    ax2.plot([1, mx], [0, mx - 1], ":", color="0.6", lw=1, label="last layer")
    ax2.set_xlabel("n_layers")
    ax2.set_ylabel("layer of the induction head")
    ax2.set_xticks(range(1, mx + 1))
    ax2.set_yticks(range(0, mx))
    for fam in FAMILIES:
        ax2.scatter([], [], color=cm.get_cmap(CMAPS[fam])(0.7), label=FAMILY_TITLE[fam])
    ax2.legend(fontsize=7)
    ax2.set_title("Layer by depth and family", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "heads.png"), dpi=DPI)
    plt.close(fig)


def fig_slope(d, z, runs):
    cfg, order, sl = z["config"], z["model_order"], z["slopes"]
    tpe = cfg["training"]["batch"] * cfg["training"]["seq_len"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 5.2))
    for n in order:
        recs = [r for r in runs[n]["records"] if r["step"] > 0]
        ax.plot([r["step"] * tpe for r in recs], [r["eval_loss"] for r in recs], "-", lw=1.2,
                color=colour(n), label=label(z, n))
        w = z["models"][n]["window"]
        if w["found"]:
            ax.axvspan(w["start_tokens"], w["end_tokens"], color=colour(n), alpha=0.08)
    ax.set_xscale("log")
    ax.set_xlabel("training tokens (log scale)")
    ax.set_ylabel("eval loss (nats/token)")
    ax.set_title("Loss curves (shaded: windows)", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    for n in order:
        s = sl["models"][n]
        if not s.get("window"):
            continue
        L = layers_of(n) + 0.1 * (FAMILIES.index(family(n)) - 1)
        for side, mk, dx in (("before", "o", -0.15), ("after", "s", 0.15)):
            v = s[side]
            if v["slope"] is None or not math.isfinite(v["slope"]):
                continue
            ax2.errorbar([L + dx], [v["slope"]], yerr=[v["se"]] if math.isfinite(v["se"] or
                                                                                  math.nan)
                         else None, fmt=mk, color=colour(n),
                         mfc=colour(n) if side == "after" else "white", ms=6, capsize=2)
    ax2.axhline(0, color="0.7", lw=0.8)
    ax2.set_xlabel("n_layers (families side by side)")
    ax2.set_ylabel("slope of eval loss (nats per decade of tokens)")
    ax2.set_title("Slope before (○) and after (■) each model's window, ± 1 s.e.", fontsize=9)
    for fam in FAMILIES:
        ax2.scatter([], [], color=cm.get_cmap(CMAPS[fam])(0.7), label=FAMILY_TITLE[fam])
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "slope.png"), dpi=DPI)
    plt.close(fig)


# ---- the passage coloured by change ----

def _scale(delta):
    vals = sorted(abs(x) for w in delta for x in w)
    return vals[int(0.98 * (len(vals) - 1))] if vals else 1.0


def _shown(text):
    return text.replace("\n", "↵").replace("\t", "→")


def fig_tokens(d, tok, texts, max_tokens=511):
    delta, cls = tok["delta"], tok["token_classes"]
    ids = tok["passage_tokens"]
    scale = _scale(delta) or 1.0
    norm = colors.Normalize(-scale, scale)
    cmap = cm.get_cmap("RdBu")
    fig = plt.figure(figsize=(12, 9))
    box = [0.02, 0.30, 0.96, 0.62]
    ax = fig.add_axes(box)
    ax.axis("off")
    # the layout: monospace 8 pt, a character about 0.6 em wide (axes fractions)
    fs = 8.0
    cw = 0.63 * fs / (box[2] * 12 * 72)
    w0 = texts[0] if texts else [str(t) for t in ids[0]]
    placed, x, line = [], 0.0, 0
    for i in range(1, min(len(ids[0]), max_tokens + 1)):
        s = _shown(w0[i]) if texts else f"{ids[0][i]} "
        wdt = max(len(s), 1) * cw
        if x + wdt > 1.0:
            x, line = 0.0, line + 1
        placed.append((i, s, x, line, wdt))
        x += wdt
        if texts and w0[i].endswith("\n"):
            x, line = 0.0, line + 1
    n_lines = line + 1
    pt_per_line = box[3] * 9 * 72 / (n_lines + 0.5)
    under = (fs + 1.5) / pt_per_line  # the underline, in lines below a line's top
    for i, s, x, line, wdt in placed:
        c = delta[0][i - 1]
        ax.text(x, -line, s, family="monospace", fontsize=fs, va="top",
                bbox=dict(boxstyle="square,pad=0.05", fc=cmap(norm(c)), ec="none"))
        if cls[0][i - 1] != "rest":
            ax.plot([x, x + wdt], [-line - under] * 2, lw=1,
                    color="k" if cls[0][i - 1] == "continues" else "m")
    ax.set_xlim(0, 1.0)
    ax.set_ylim(-n_lines + 0.5, 0.2)
    ax.set_title("The 2L model's change in log-likelihood per token across its window (steps "
                 "%u → %u), held-out window 0\nblue: better, red: worse (scale ±%.2f nats); "
                 "underlined black: continues an earlier repeat, magenta: breaks one"
                 % (tok["start_step"], tok["end_step"], scale), fontsize=9)
    ax2 = fig.add_axes([0.08, 0.05, 0.4, 0.2])
    c = tok["classes"]
    m = [c[k]["mean"] for k in CLASSES]
    e = [c[k]["se"] for k in CLASSES]
    ax2.bar(range(3), m, yerr=e, capsize=4, color=["k", "m", "0.6"])
    ax2.set_xticks(range(3))
    ax2.set_xticklabels(["%s (%u)" % (k, c[k]["tokens"]) for k in CLASSES], fontsize=8)
    ax2.axhline(0, color="0.5", lw=0.8)
    ax2.set_ylabel("mean change (nats)", fontsize=8)
    ax2.set_title("mean change per class, all %u windows, ± 1 s.e." % tok["windows"],
                  fontsize=8)
    cax = fig.add_axes([0.6, 0.12, 0.3, 0.03])
    fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), cax=cax, orientation="horizontal",
                 label="log p(end) − log p(start), nats")
    fig.savefig(os.path.join(d, "tokens.png"), dpi=DPI)
    plt.close(fig)


def tokens_html(d, tok, texts):
    delta, cls, ids = tok["delta"], tok["token_classes"], tok["passage_tokens"]
    scale = _scale(delta) or 1.0
    norm = colors.Normalize(-scale, scale)
    cmap = cm.get_cmap("RdBu")
    c = tok["classes"]
    out = ["<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Token by token across "
           "the 2L model's phase change</title>\n<style>body{font-family:sans-serif;margin:2em;}"
           "pre{white-space:pre-wrap;font-family:monospace;font-size:13px;line-height:1.7;}"
           "span.t{border-radius:2px;} span.continues{border-bottom:2px solid #000;}"
           "span.breaks{border-bottom:2px solid #c0c;} table{border-collapse:collapse;}"
           "td,th{border:1px solid #ccc;padding:2px 8px;}</style></head><body>\n"]
    out.append("<h1>Token by token across the 2L model's phase change</h1>\n")
    out.append("<p>Change in log-likelihood of every token of a held-out passage between the "
               "weights at step %u and step %u (nats; blue: better predicted at the end, "
               "red: worse; colour scale &plusmn;%.2f). Underlined black: the token continues "
               "an earlier repeat; magenta: it breaks one. Hover a token for its numbers.</p>\n"
               % (tok["start_step"], tok["end_step"], scale))
    out.append("<table><tr><th>class</th><th>tokens</th><th>mean change (nats) &plusmn; "
               "s.e.</th></tr>\n")
    for k in CLASSES:
        out.append("<tr><td>%s</td><td>%u</td><td>%+.4f &plusmn; %.4f</td></tr>\n"
                   % (k, c[k]["tokens"], c[k]["mean"], c[k]["se"]))
    out.append("</table>\n<p>%s</p>\n" % html.escape(tok["class_rule"]))
    for w in range(len(ids)):
        out.append("<h3>window %u</h3>\n<pre>" % w)
        t0 = texts[w][0] if texts else str(ids[w][0])
        out.append("<span title=\"token 0 (context only)\">%s</span>"
                   % html.escape(t0 if texts else t0 + " "))
        for i in range(1, len(ids[w])):
            s = texts[w][i] if texts else f"{ids[w][i]} "
            ch = delta[w][i - 1]
            bg = colors.to_hex(cmap(norm(ch)))
            k = cls[w][i - 1]
            tip = "id %u, change %+.3f nats, log p %.3f → %.3f, %s" % (
                ids[w][i], ch, tok["loglik_start"][w][i - 1], tok["loglik_end"][w][i - 1], k)
            out.append("<span class=\"t %s\" style=\"background:%s\" title=\"%s\">%s</span>"
                       % (k, bg, html.escape(tip), html.escape(s)))
        out.append("</pre>\n")
    out.append("</body></html>\n")
    write_atomic(os.path.join(d, "tokens.html"), "".join(out))


def draw_all(d, z, tok, runs):
    """Every figure; returns the names written."""
    fig_icl(d, z, runs)
    fig_pca(d, z)
    fig_heads(d, z)
    fig_slope(d, z, runs)
    done = ["icl.png", "pca.png", "heads.png", "slope.png"]
    if tok is not None:
        import zoo_model
        induct = sys_induct()
        texts = zoo_model.token_texts(induct, z["config"], tok["passage_tokens"])
        tok = dict(tok, class_rule=z["tokens"]["class_rule"])
        fig_tokens(d, tok, texts)
        tokens_html(d, tok, texts)
        done += ["tokens.png", "tokens.html"]
    return done


def sys_induct():
    import sys
    return sys.modules["induct"]
