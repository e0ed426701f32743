"""Figures of the ICL paper's analyses, saved as PNG files (matplotlib, Agg renderer).

Imported only when used (`induct.plot` loads on first access); needs matplotlib
(Debian python3-matplotlib) and therefore NumPy. Every function draws on its own
matplotlib Figure with the Agg canvas, never touches pyplot's global state or the
selected backend, saves a PNG at `path` and returns the path as a str.

* phase_change(): loss, ICL score and per-head prefix-matching score against step
  from a metrics log (Optimizer.train's JSON Lines), with the phase-change window
  (induct.phase_window) shaded;
* attention(): attention-pattern heatmaps with token labels;
* attribution(): per-head ablation attribution bars;
* pca_trajectories(): per-token-loss PCA trajectories, one line per model.
"""
import math
import os

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .analysis import PCA, Attribution, PhaseWindow, phase_window
from .core import read_metrics

_WINDOW_STYLE = {"color": "tab:orange", "alpha": 0.2, "lw": 0}


def _array(x):
    """NumPy array from a NumPy array, induct.Shaped or nested sequence."""
    if hasattr(x, "shape") and hasattr(x, "data") and not isinstance(x, np.ndarray):
        return np.asarray(x.tolist(), dtype=np.float64)  # induct.Shaped
    return np.asarray(x, dtype=np.float64)


def _save(fig, path, dpi):
    path = os.fspath(path)
    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", dpi=dpi, metadata={"Software": None})
    return path


def _head_names(n_layers, n_heads):
    return [f"L{l}H{h}" for l in range(n_layers) for h in range(n_heads)]


def phase_change(metrics, path, window=None, x="step", xscale="linear", loss_key=None,
                 icl_key="icl_score", head_key=None, smooth=None,
                 title=None, dpi=100):
    """The phase-change figure: loss, ICL score and per-head prefix-matching score
    against `x` ("step" or "tokens") from a metrics log, with the window shaded.

    `metrics` is the path of an Optimizer.train metrics log (JSON Lines) or its records
    (induct.read_metrics). Panels are drawn for the keys present: loss (`loss_key`, by
    default eval_loss, else train_loss), the ICL score (`icl_key`) and one line per head
    of `head_key` ([n_layers][n_heads] per record; by default prefix_matching_score, else
    induction_score).
    `window`: None detects it with induct.phase_window(x, icl score, smooth=smooth)
    when the log has ICL scores; a (start, end) pair or PhaseWindow draws that one;
    False draws none. `xscale` "log" drops points with x <= 0. Returns `path`."""
    records = read_metrics(metrics) if isinstance(metrics, (str, bytes, os.PathLike)) \
        else list(metrics)
    if not records:
        raise ValueError("the metrics log has no records")
    if xscale not in ("linear", "log"):
        raise ValueError(f"xscale must be 'linear' or 'log', got {xscale!r}")
    def present(key):
        return any(r.get(key) is not None for r in records)

    if loss_key is None:
        loss_key = "eval_loss" if present("eval_loss") else "train_loss"
    if head_key is None:
        head_key = "prefix_matching_score" if present("prefix_matching_score") \
            else "induction_score"

    def series(key):
        pts = [(r[x], r[key]) for r in records if r.get(key) is not None and x in r]
        if xscale == "log":
            pts = [p for p in pts if p[0] > 0]
        return pts

    loss, icl, heads = series(loss_key), series(icl_key), series(head_key)
    panels = [p for p in (("loss", loss), ("icl", icl), ("heads", heads)) if p[1]]
    if not panels:
        raise ValueError(f"the metrics log has none of {loss_key!r}, {icl_key!r}, "
                         f"{head_key!r} against {x!r}")
    if window is None and len(icl) >= 2:
        kw = {} if smooth is None else {"smooth": smooth}
        window = phase_window([p[0] for p in icl], [p[1] for p in icl], **kw)
    if isinstance(window, PhaseWindow):
        window = (window.start, window.end) if window.found else False
    fig = Figure(figsize=(7, 2.3 * len(panels) + 0.6))
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (kind, pts) in zip(axes, panels):
        xs = np.array([p[0] for p in pts], dtype=np.float64)
        if kind == "loss":
            ax.plot(xs, [p[1] for p in pts], color="tab:blue", marker=".")
            ax.set_ylabel(f"{loss_key} (nats)")
        elif kind == "icl":
            ax.plot(xs, [p[1] for p in pts], color="tab:green", marker=".")
            ax.axhline(0.0, color="0.6", lw=0.8)
            ax.set_ylabel("ICL score (nats)")
        else:
            ys = np.array([np.asarray(p[1], dtype=np.float64).reshape(-1) for p in pts])
            shape = np.asarray(pts[0][1]).shape
            names = _head_names(*shape) if len(shape) == 2 else \
                [f"head {i}" for i in range(ys.shape[1])]
            for i, name in enumerate(names):
                ax.plot(xs, ys[:, i], marker=".", label=name)
            ax.set_ylabel(head_key.replace("_", " "))
            ax.legend(fontsize="small", ncol=max(1, len(names) // 8), loc="best")
        if window:
            ax.axvspan(window[0], window[1], **_WINDOW_STYLE)
        ax.set_xscale(xscale)
        ax.grid(True, alpha=0.3)
    axes[-1].set_xlabel(x)
    if window:
        axes[0].set_title(f"phase change: {x} {window[0]:.4g} to {window[1]:.4g}",
                          fontsize="medium")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path, dpi)


def _token_labels(tokens, labels, T):
    if tokens is None:
        return [str(i) for i in range(T)]
    toks = list(tokens.tolist() if hasattr(tokens, "tolist") else tokens)
    if len(toks) != T:
        raise ValueError(f"{len(toks)} token labels for a {T} x {T} pattern")
    if labels is None:
        return [str(t) for t in toks]
    if callable(labels):
        return [str(labels(t)) for t in toks]
    return [str(labels[t]) for t in toks]


def attention(pattern, path, tokens=None, labels=None, layer=None, head=None, title=None,
              dpi=100):
    """Attention-pattern heatmaps (query rows, key columns, colour 0 … 1).

    `pattern` is one head's `[T, T]` or Model.attention()'s `[n_layers, n_heads, T, T]`
    (all heads in a grid, or the one head picked by layer= and head=). Tick labels are
    `tokens` (ids or strings) mapped through `labels` (a sequence or dict indexed by id,
    or a function), else positions. Returns `path`."""
    a = _array(pattern)
    if a.ndim == 4:
        if (layer is None) != (head is None):
            raise ValueError("give both layer and head, or neither")
        if layer is not None:
            a = a[layer, head][None, None]
            names = [[f"L{layer}H{head}"]]
        else:
            names = [[f"L{l}H{h}" for h in range(a.shape[1])] for l in range(a.shape[0])]
    elif a.ndim == 2:
        a = a[None, None]
        names = [[title or ""]]
    else:
        raise ValueError(f"pattern must be [T, T] or [n_layers, n_heads, T, T], got {a.shape}")
    L, H, T, T2 = a.shape
    if T != T2:
        raise ValueError(f"pattern must be square, got {T} x {T2}")
    ticks = _token_labels(tokens, labels, T)
    every = max(1, math.ceil(T / 32))
    cell = min(4.0, max(3.0, 0.16 * T))
    fig = Figure(figsize=(cell * H + 1.0, cell * L + 0.8))
    axes = fig.subplots(L, H, squeeze=False)
    im = None
    for l in range(L):
        for h in range(H):
            ax = axes[l, h]
            im = ax.imshow(a[l, h], vmin=0.0, vmax=1.0, cmap="viridis",
                           interpolation="nearest")
            ax.set_title(names[l][h], fontsize="small")
            idx = list(range(0, T, every))
            ax.set_xticks(idx)
            ax.set_yticks(idx)
            ax.set_xticklabels([ticks[i] for i in idx], rotation=90, fontsize=6)
            ax.set_yticklabels([ticks[i] for i in idx], fontsize=6)
            if h == 0:
                ax.set_ylabel("query")
            if l == L - 1:
                ax.set_xlabel("key")
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label="attention")
    if title and names != [[title]]:
        fig.suptitle(title)
    return _save(fig, path, dpi)


def attribution(delta, path, icl=None, sort=False, title=None, dpi=100):
    """Bars of the per-head ablation attribution `delta [n_layers, n_heads]` (nats;
    Model.ablation_attribution(), whose Attribution result may be passed as is, also
    giving the clean ICL score for the title). Positive bars (heads that help
    in-context learning) are blue, negative red. `sort` orders by value. Returns `path`."""
    if isinstance(delta, Attribution):
        delta, icl = delta.delta, delta.icl if icl is None else icl
    d = _array(delta)
    if d.ndim != 2:
        raise ValueError(f"delta must be [n_layers, n_heads], got shape {d.shape}")
    names = _head_names(*d.shape)
    vals = d.reshape(-1)
    order = np.argsort(-vals, kind="stable") if sort else np.arange(vals.size)
    fig = Figure(figsize=(max(5.0, 0.45 * vals.size + 1.5), 4.0))
    ax = fig.subplots()
    colors = ["tab:blue" if v >= 0 else "tab:red" for v in vals[order]]
    ax.bar(range(vals.size), vals[order], color=colors)
    ax.set_xticks(range(vals.size))
    ax.set_xticklabels([names[i] for i in order], rotation=90 if vals.size > 12 else 0)
    ax.axhline(0.0, color="0.3", lw=0.8)
    ax.set_ylabel("ICL score change when ablated (nats)")
    ax.set_xlabel("head")
    head = title or "Ablation attribution"
    if icl is not None:
        head += f"\nclean ICL score {icl:.4g} nats"
    ax.set_title(head, fontsize="medium")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return _save(fig, path, dpi)


def pca_trajectories(trajectories, path, pca=None, steps=None, components=(0, 1),
                     title=None, dpi=100):
    """Per-token-loss PCA trajectories: one line per model through its snapshots'
    scores in training order (start marked with a circle, end with a square).

    `trajectories` maps a model name to its scores `[n_snapshots, k]` (k >= 2), or is
    the (dict, PCA) pair induct.pca_trajectories() returns. `pca` (a PCA result) adds
    the explained-variance ratios to the axis labels; `steps` maps a name to the
    snapshot steps, written next to the first and last points. Returns `path`."""
    if isinstance(trajectories, tuple) and len(trajectories) == 2 \
            and isinstance(trajectories[1], PCA):
        trajectories, pca = trajectories[0], pca or trajectories[1]
    if not trajectories:
        raise ValueError("no trajectories")
    c0, c1 = components
    fig = Figure(figsize=(6, 5))
    ax = fig.subplots()
    for i, (name, scores) in enumerate(trajectories.items()):
        s = _array(scores)
        if s.ndim != 2 or s.shape[1] <= max(c0, c1):
            raise ValueError(f"{name}: scores must be [n_snapshots, > {max(c0, c1)}], "
                             f"got shape {s.shape}")
        color = f"C{i % 10}"
        ax.plot(s[:, c0], s[:, c1], marker=".", color=color, label=str(name))
        ax.plot(s[0, c0], s[0, c1], marker="o", ms=8, color=color, mfc="none")
        ax.plot(s[-1, c0], s[-1, c1], marker="s", ms=7, color=color)
        if steps is not None and name in steps:
            st = list(steps[name])
            ax.annotate(str(st[0]), (s[0, c0], s[0, c1]), fontsize=7)
            ax.annotate(str(st[-1]), (s[-1, c0], s[-1, c1]), fontsize=7)
    for axis, c in (("x", c0), ("y", c1)):
        label = f"PC{c + 1}"
        if pca is not None and pca.total_variance > 0:
            label += f" ({100.0 * float(pca.variance[c]) / pca.total_variance:.1f}% of variance)"
        (ax.set_xlabel if axis == "x" else ax.set_ylabel)(label)
    ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)
    ax.set_title(title or "Per-token loss PCA trajectories", fontsize="medium")
    fig.tight_layout()
    return _save(fig, path, dpi)


__all__ = ["phase_change", "attention", "attribution", "pca_trajectories"]
