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

Layouts are matplotlib's constrained layout (no wasted margins); tick labels are at
least 8 pt and thinned to what fits; step and token axes read 1, 2, 5, 10, 20, ...
with k/M suffixes, on linear and log scales alike (count_axis()).
"""
import math
import os

import numpy as np
from matplotlib import ticker
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


#: Smallest tick-label size (points) any figure here uses.
TICK_PT = 8.0


def _compact(x, _pos=None):
    """1, 20, 500, 1k, 2.5k, 10M: a count written short."""
    if x == 0:
        return "0"
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1, "")):
        if abs(x) >= div:
            v = x / div
            return (f"{v:.0f}" if abs(v - round(v)) < 1e-9 else f"{v:.3g}") + suffix
    return f"{x:.3g}"


def count_axis(axis, log=False, span=None):
    """Ticks for a count (steps, tokens) on a matplotlib Axis (ax.xaxis): compact labels
    (2k, 10M) and, on a log scale, labelled ticks at 1, 2 and 5 times each power of ten
    (every multiple when `span`, the (lowest, highest) value shown, is narrower than a
    factor 30, so that a range inside one decade still shows several labels; only the
    powers of ten beyond a factor 10^4)."""
    if log:
        ratio = span[1] / span[0] if span and span[0] > 0 else 1e3
        subs = np.arange(1.0, 10.0) if ratio < 30 else (1.0, 2.0, 5.0) if ratio < 1e4 \
            else (1.0,)
        axis.set_major_locator(ticker.LogLocator(base=10, subs=subs, numticks=40))
        axis.set_minor_locator(ticker.LogLocator(base=10, subs=np.arange(1, 10), numticks=30))
        axis.set_minor_formatter(ticker.NullFormatter())
    else:
        axis.set_major_locator(ticker.MaxNLocator(nbins=8, steps=[1, 2, 2.5, 5, 10]))
    axis.set_major_formatter(ticker.FuncFormatter(_compact))


def _visible(label, width=8):
    """A token label that shows its whitespace and control characters (a space is ␣, a
    newline \\n, a NUL \\x00) and is at most `width` characters (longer ones end with …)."""
    named = {" ": "\u2423", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    s = "".join(named.get(c) or (c if c.isprintable() else
                                 c.encode("unicode_escape").decode("ascii"))
                for c in str(label))
    return s if len(s) <= width else s[:width - 1] + "\u2026"


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
    fig = Figure(figsize=(7, 2.3 * len(panels) + 0.6), layout="constrained")
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    all_x = [p[0] for _, pts in panels for p in pts]
    span = (min(all_x), max(all_x))
    x_name = {"step": "training steps", "tokens": "training tokens"}.get(x, x)
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
        count_axis(ax.xaxis, log=xscale == "log", span=span)
        ax.grid(True, alpha=0.3)
        ax.grid(True, which="minor", alpha=0.1)
    axes[-1].set_xlabel(x_name + (" (log scale)" if xscale == "log" else ""))
    shown = {"loss": "loss", "icl": "ICL score", "heads": f"per-head {head_key.replace('_', ' ')}"}
    head = ", ".join(shown[k] for k, _ in panels) + f" against {x_name}"
    if window:
        head += f"\nshaded: the phase change, {x} {_compact(window[0])} to {_compact(window[1])}"
    axes[0].set_title(head, fontsize="medium")
    if title:
        fig.suptitle(title)
    return _save(fig, path, dpi)


def _token_labels(tokens, labels, T):
    if tokens is None:
        return [str(i) for i in range(T)]
    toks = list(tokens.tolist() if hasattr(tokens, "tolist") else tokens)
    if len(toks) != T:
        raise ValueError(f"{len(toks)} token labels for a {T} x {T} pattern")
    if labels is None:
        return [_visible(t) for t in toks]
    if hasattr(labels, "to_str_tokens"):  # a tokenizer (induct.ByteTokenizer, ...)
        return [_visible(t) for t in labels.to_str_tokens(toks)]
    if callable(labels):
        return [_visible(labels(t)) for t in toks]
    return [_visible(labels[t]) for t in toks]


_LABEL_PITCH = 1.2  # label spacing in units of the font size


def _thin(T, inches, pt=TICK_PT):
    """Positions 0, k, 2k, ... with k chosen so labels of `pt` points fit in `inches`."""
    fits = max(2, int(inches * 72.0 / (pt * _LABEL_PITCH)))
    every = max(1, math.ceil(T / fits))
    return list(range(0, T, every))


def _attention_figure(pattern, tokens=None, labels=None, layer=None, head=None, title=None):
    a = _array(pattern)
    if a.ndim == 4:
        if (layer is None) != (head is None):
            raise ValueError("give both layer and head, or neither")
        if layer is not None:
            a = a[layer, head][None, None]
            names = [[f"layer {layer} head {head} (L{layer}H{head})"]]
        else:
            names = [[f"L{l}H{h}" for h in range(a.shape[1])] for l in range(a.shape[0])]
    elif a.ndim == 2:
        a = a[None, None]
        names = [[""]]
    else:
        raise ValueError(f"pattern must be [T, T] or [n_layers, n_heads, T, T], got {a.shape}")
    L, H, T, T2 = a.shape
    if T != T2:
        raise ValueError(f"pattern must be square, got {T} x {T2}")
    ticks = _token_labels(tokens, labels, T)
    single = L == H == 1
    if single:  # large enough to label every token at 8 pt, up to 13 inches (~90 tokens)
        cell = min(13.0, max(5.5, T * TICK_PT * _LABEL_PITCH / 72.0 / 0.85))
    else:
        cell = 3.0 if H <= 4 else 2.4
    # room for the titles, tick labels and colour bar around square heatmaps
    size = (cell + 1.6, cell + 1.1) if single else (cell * H + 1.4, (cell + 0.1) * L + 0.9)
    fig = Figure(figsize=size, layout="constrained")
    axes = fig.subplots(L, H, squeeze=False, sharex=True, sharey=True)
    idx = _thin(T, cell * 0.85)
    im = None
    for l in range(L):
        for h in range(H):
            ax = axes[l, h]
            im = ax.imshow(a[l, h], vmin=0.0, vmax=1.0, cmap="viridis",
                           interpolation="nearest", aspect="equal")
            if not single:
                ax.set_title(names[l][h], fontsize="medium", pad=3)
            ax.set_xticks(idx)
            ax.set_yticks(idx)
            ax.tick_params(labelsize=TICK_PT, length=2, pad=1)
            if l == L - 1:
                ax.set_xticklabels([ticks[i] for i in idx], rotation=90)
                ax.set_xlabel("key (attended to)")
            if h == 0:
                ax.set_yticklabels([ticks[i] for i in idx])
                ax.set_ylabel("query (attending)")
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.9 if single else 0.6,
                 label="attention weight", aspect=30)
    if single:
        what = names[0][0] or "one head"
        head_line = title or f"Attention pattern of {what}"
    else:
        head_line = title or f"Attention patterns of every head ({L} layers x {H} heads)"
    every = idx[1] - idx[0] if len(idx) > 1 else 1
    note = f"{T} tokens; row = query, column = key; colour = attention weight"
    if every > 1:
        suffix = "th" if 10 <= every % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(
            every % 10, "th")
        note += f"; every {every}{suffix} token labelled"
    fig.suptitle(f"{head_line}\n{note}", fontsize="medium")
    return fig


def attention(pattern, path, tokens=None, labels=None, layer=None, head=None, title=None,
              dpi=100):
    """Attention-pattern heatmaps (query rows, key columns, colour 0 … 1).

    `pattern` is one head's `[T, T]` or Model.attention()'s `[n_layers, n_heads, T, T]`
    (all heads in a grid sharing their axes, or the one head picked by layer= and
    head=). Tick labels are `tokens` (ids or strings) mapped through `labels` (a
    tokenizer such as induct.ByteTokenizer or induct.SentencePieceTokenizer, a sequence
    or dict indexed by id, or a function), else positions; whitespace is shown (␣, \\n)
    and labels are thinned to what fits at 8 pt. `title` replaces the first title line.
    Returns `path`."""
    return _save(_attention_figure(pattern, tokens, labels, layer, head, title), path, dpi)


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
    fig = Figure(figsize=(max(6.5, 0.45 * vals.size + 1.5), 4.6), layout="constrained")
    ax = fig.subplots()
    colors = ["tab:blue" if v >= 0 else "tab:red" for v in vals[order]]
    ax.bar(range(vals.size), vals[order], color=colors)
    ax.set_xticks(range(vals.size))
    ax.set_xticklabels([names[i] for i in order], rotation=90 if vals.size > 12 else 0)
    ax.tick_params(labelsize=max(TICK_PT, 10 if vals.size <= 12 else TICK_PT))
    ax.axhline(0.0, color="0.3", lw=0.8)
    ax.set_ylabel("Δ ICL score when ablated (nats)")
    ax.set_xlabel("head (layer, head)")
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color="tab:blue", label="> 0: the head helps in-context learning"),
                       Patch(color="tab:red", label="< 0: the model does better without it")],
              fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2,
              frameon=False)
    head = title or "Ablation attribution: ICL-score change per ablated head"
    sub = "ICL score with the head ablated minus without"
    if icl is not None:
        sub += f"; clean ICL score {icl:.3g} nats"
    ax.set_title(f"{head}\n({sub})", fontsize="medium")
    ax.grid(True, axis="y", alpha=0.3)
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
    fig = Figure(figsize=(6, 5), layout="constrained")
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
            for j, label in ((0, f"step {st[0]}"), (-1, f"step {st[-1]}")):
                ax.annotate(label, (s[j, c0], s[j, c1]), xytext=(6, 6),
                            textcoords="offset points", fontsize=TICK_PT, color=color)
    for axis, c in (("x", c0), ("y", c1)):
        label = f"PC{c + 1}"
        if pca is not None and pca.total_variance > 0:
            label += f" ({100.0 * float(pca.variance[c]) / pca.total_variance:.1f}% of variance)"
        (ax.set_xlabel if axis == "x" else ax.set_ylabel)(label)
    ax.legend(fontsize="small")
    ax.grid(True, alpha=0.3)
    ax.set_title(title or "Per-token loss PCA trajectories\n(circle: first snapshot, "
                 "square: last)", fontsize="medium")
    return _save(fig, path, dpi)


__all__ = ["phase_change", "attention", "attribution", "pca_trajectories", "count_axis"]
