"""induct.plot: every figure renders to a PNG whose size and content depend on the data."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import induct

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_info(path):
    """(width, height, bytes) of a PNG file, checking its signature and IHDR chunk."""
    data = open(path, "rb").read()
    assert data[:8] == PNG_SIGNATURE, path
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    width, height = struct.unpack(">II", data[16:24])
    assert width > 0 and height > 0
    return width, height, data


def _pixels(path):
    from matplotlib.image import imread
    return imread(path)[..., :3]


def _orange_mask(path):
    """Pixels of the shaded window colour (tab:orange at alpha 0.2 over white)."""
    target = 0.8 * np.ones(3) + 0.2 * np.array([1.0, 0.498, 0.055])
    return np.all(np.abs(_pixels(path) - target) < 0.02, axis=-1)


def _orange_pixels(path):
    return int(_orange_mask(path).sum())


def _records(shift=0.0, heads=(2, 2)):
    recs = []
    for s in range(0, 1001, 50):
        frac = 1 / (1 + np.exp(-(s - 450 - shift) / 40))
        recs.append({"step": s, "tokens": s * 64, "eval_loss": 3.0 - frac,
                     "icl_score": -0.05 - 0.4 * frac,
                     "prefix_matching_score": (0.1 + 0.8 * frac * np.eye(*heads)).tolist()})
    return recs


def test_phase_change_from_a_training_log(tmp_path):
    # a real run: ICL score needs seq_len >= 501, prefix matching d_vocab >= 26, n_ctx >= 101
    m = induct.Model(n_layers=2, d_model=16, n_heads=2, n_ctx=512, d_vocab=32, seed=1)
    d = induct.Dataset.rrt(d_vocab=32, min_block=8, seed=2)
    o = induct.Optimizer(m, lr=1e-2)
    log = o.train(d, steps=4, batch=1, seq_len=512, eval_every=2, eval_batch=2,
                  metrics=("loss", "icl_score", "prefix_matching"),
                  metrics_path=tmp_path / "run.jsonl")
    recs = induct.read_metrics(log)
    assert [r["step"] for r in recs] == [0, 2, 4]
    assert np.array(recs[-1]["prefix_matching_score"]).shape == (2, 2)
    # the logged ICL score is the analysis function's value on the same evaluation set
    assert recs[-1]["icl_score"] == pytest.approx(m.icl_score(d, n_seq=2, seq_len=512),
                                                  abs=1e-12)
    out = induct.plot.phase_change(log, tmp_path / "phase.png")
    assert out == str(tmp_path / "phase.png")
    w, h, data = png_info(out)
    assert len(data) > 5000 and w == 700 and h > 700  # 3 panels of 7 inches at 100 dpi


def test_phase_change_depends_on_data_and_shades_the_window(tmp_path):
    a = induct.plot.phase_change(_records(), tmp_path / "a.png")
    _, h, _ = png_info(a)
    a2 = induct.plot.phase_change(_records(), tmp_path / "a2.png")
    b = induct.plot.phase_change(_records(shift=200), tmp_path / "b.png")
    _, _, da = png_info(a)
    _, _, da2 = png_info(a2)
    _, _, db = png_info(b)
    assert da == da2  # same data, same bytes
    assert da != db
    # the window is detected from the ICL score and shaded on every panel
    w = induct.phase_window([r["step"] for r in _records()],
                            [r["icl_score"] for r in _records()])
    assert w.found and 300 < w.start < w.end < 600
    shaded = _orange_pixels(a)
    assert shaded > 3000
    c = induct.plot.phase_change(_records(), tmp_path / "c.png", window=False)
    assert _orange_pixels(c) < shaded / 100
    # the shaded band moves with the data (window 200 steps later: ~120 px to the right)
    cols_a = np.flatnonzero(_orange_mask(a).sum(0) > 100)
    cols_b = np.flatnonzero(_orange_mask(b).sum(0) > 100)
    assert cols_b.mean() > cols_a.mean() + 80
    # fewer panels, a smaller figure; more heads, a different one
    only_loss = [{"step": r["step"], "eval_loss": r["eval_loss"]} for r in _records()]
    w1, h1, _ = png_info(induct.plot.phase_change(only_loss, tmp_path / "l.png"))
    assert w1 == 700 and h1 < 400
    _, _, d8 = png_info(induct.plot.phase_change(_records(heads=(2, 4)), tmp_path / "h.png"))
    assert d8 != da
    # the induction score (prefix matching on the data) stands in when prefix matching
    # is absent
    seed_log = [{"step": r["step"], "train_loss": r["eval_loss"],
                 "induction_score": r["prefix_matching_score"]} for r in _records()]
    w2, h2, _ = png_info(induct.plot.phase_change(seed_log, tmp_path / "s.png"))
    assert h1 < h2 < h
    # log-scale x axis against tokens, from a file
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _records()))
    png_info(induct.plot.phase_change(path, tmp_path / "t.png", x="tokens", xscale="log"))


def test_attention_heatmaps(tmp_path):
    m = induct.Model(n_layers=2, d_model=16, n_heads=2, n_ctx=16, d_vocab=8, seed=3)
    toks = [0, 3, 5, 1, 3, 5, 1, 2]
    att = m.attention(toks)
    grid = induct.plot.attention(att, tmp_path / "grid.png", tokens=toks,
                                 labels="abcdefgh")
    one = induct.plot.attention(att, tmp_path / "one.png", tokens=toks, layer=1, head=0,
                                labels=lambda t: f"t{t}")
    w_grid, h_grid, d_grid = png_info(grid)
    w_one, h_one, d_one = png_info(one)
    assert w_grid > w_one and h_grid > h_one  # 2 x 2 heads vs one head
    # other weights, other picture; other token labels, other picture
    m2 = induct.Model(n_layers=2, d_model=16, n_heads=2, n_ctx=16, d_vocab=8, seed=4)
    _, _, d_grid2 = png_info(induct.plot.attention(m2.attention(toks), tmp_path / "g2.png",
                                                   tokens=toks, labels="abcdefgh"))
    assert d_grid2 != d_grid
    _, _, d_lab = png_info(induct.plot.attention(att, tmp_path / "g3.png", tokens=toks,
                                                 labels="ABCDEFGH"))
    assert d_lab != d_grid
    # a single [T, T] pattern, no labels
    png_info(induct.plot.attention(np.tril(np.ones((5, 5))) / np.arange(1, 6)[:, None],
                                   tmp_path / "p.png"))
    with pytest.raises(ValueError, match="token labels"):
        induct.plot.attention(att, tmp_path / "x.png", tokens=toks[:3])
    with pytest.raises(ValueError, match="pattern must be"):
        induct.plot.attention(np.ones((2, 3, 3)), tmp_path / "x.png")
    with pytest.raises(ValueError, match="both layer and head"):
        induct.plot.attention(att, tmp_path / "x.png", layer=1)


def test_attribution_bars(tmp_path):
    m = induct.Model(n_layers=2, d_model=16, n_heads=2, n_ctx=16, d_vocab=8, seed=3)
    d = induct.Dataset.rrt(d_vocab=8, min_block=3, seed=1)
    att = m.ablation_attribution(d, n_seq=4, seq_len=16, early=2, late=14)
    p1 = induct.plot.attribution(att, tmp_path / "a.png")
    _, _, d1 = png_info(p1)
    _, _, d2 = png_info(induct.plot.attribution(att.delta * 2, tmp_path / "b.png",
                                                icl=att.icl))
    assert d1 != d2
    w8, _, _ = png_info(induct.plot.attribution(np.linspace(-1, 1, 16).reshape(2, 8),
                                                tmp_path / "c.png", sort=True))
    w4, _, _ = png_info(p1)
    assert w8 > w4  # more heads, wider
    # positive bars are blue, negative red
    px = _pixels(induct.plot.attribution([[1.0, -1.0]], tmp_path / "s.png"))
    blue = np.all(np.abs(px - np.array([0.122, 0.467, 0.706])) < 0.02, -1).sum()
    red = np.all(np.abs(px - np.array([0.839, 0.153, 0.157])) < 0.02, -1).sum()
    assert blue > 1000 and red > 1000
    with pytest.raises(ValueError, match="n_layers, n_heads"):
        induct.plot.attribution([1.0, 2.0], tmp_path / "x.png")


def test_pca_trajectories(tmp_path):
    rng = np.random.default_rng(0)
    runs = {"small": rng.normal(size=(6, 10)), "large": rng.normal(size=(5, 10))}
    res = induct.pca_trajectories(runs, k=2)
    p = induct.plot.pca_trajectories(res, tmp_path / "a.png",
                                     steps={"small": range(0, 60, 10)})
    _, _, d1 = png_info(p)
    runs["large"] = runs["large"] + 1.0
    _, _, d2 = png_info(induct.plot.pca_trajectories(induct.pca_trajectories(runs, k=2),
                                                     tmp_path / "b.png"))
    assert d1 != d2
    # plain dicts of scores work too
    png_info(induct.plot.pca_trajectories({"x": [[0, 0], [1, 1], [2, 0]]}, tmp_path / "c.png"))
    with pytest.raises(ValueError, match="no trajectories"):
        induct.plot.pca_trajectories({}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="scores must be"):
        induct.plot.pca_trajectories({"x": [1.0, 2.0]}, tmp_path / "x.png")


def test_phase_change_errors(tmp_path):
    with pytest.raises(ValueError, match="no records"):
        induct.plot.phase_change([], tmp_path / "x.png")
    with pytest.raises(ValueError, match="none of"):
        induct.plot.phase_change([{"step": 1, "other": 2}], tmp_path / "x.png")
    with pytest.raises(ValueError, match="xscale"):
        induct.plot.phase_change(_records(), tmp_path / "x.png", xscale="symlog")
    assert not (tmp_path / "x.png").exists()


def test_plot_is_lazy_and_leaves_pyplot_alone(tmp_path):
    code = ("import sys, induct\n"
            "assert 'matplotlib' not in sys.modules\n"
            f"induct.plot.attribution([[0.1, -0.2]], {str(tmp_path / 'l.png')!r})\n"
            "assert 'matplotlib' in sys.modules and 'matplotlib.pyplot' not in sys.modules\n"
            "print('ok')\n")
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    png_info(tmp_path / "l.png")


# ---- readability: canvas use, tick labels, titles (figures captured before saving) ----
def _figures(monkeypatch):
    figs = []
    real = induct.plot._save

    def keep(fig, path, dpi):
        figs.append(fig)
        return real(fig, path, dpi)
    monkeypatch.setattr(induct.plot, "_save", keep)
    return figs


def _labels(axis):
    return [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]


def _overlapping(labels, renderer):
    boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: (b.x0, b.y0))
    return any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))


def test_attention_figures_use_the_canvas_and_readable_labels(tmp_path, monkeypatch):
    figs = _figures(monkeypatch)
    m = induct.Model(n_layers=2, d_model=16, n_heads=4, n_ctx=64, d_vocab=40, seed=3)
    toks = [(7 * i) % 40 for i in range(64)]
    att = m.attention(toks)
    induct.plot.attention(att, tmp_path / "grid.png", tokens=toks)
    induct.plot.attention(att, tmp_path / "one.png", tokens=toks, layer=1, head=2,
                          labels=induct.ByteTokenizer())
    for fig, single in zip(figs, (False, True)):
        renderer = fig.canvas.get_renderer()
        fig.draw(renderer)
        maps = [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]
        assert len(maps) == (1 if single else 8)
        # heatmaps cover at least half of the canvas (the old grid: under a third)
        area = sum(ax.get_position().width * ax.get_position().height for ax in maps)
        assert area > 0.5, area
        for ax in maps:
            for axis in (ax.xaxis, ax.yaxis):
                shown = _labels(axis)
                for t in shown:
                    assert t.get_fontsize() >= induct.plot.TICK_PT
                assert not _overlapping(shown, renderer)
        if single:  # one head at 64 tokens: every token labelled, whitespace visible
            assert len(_labels(maps[0].xaxis)) == 64
        title = fig._suptitle.get_text()
        assert "row = query, column = key" in title and "64 tokens" in title


def test_log_token_axis_has_several_labelled_ticks(tmp_path, monkeypatch):
    figs = _figures(monkeypatch)
    # 30k to 900k tokens: more than a decade, so matplotlib labels no minor tick and
    # only 100k is a major one
    recs = [{"step": s, "tokens": s * 4096, "eval_loss": 4.0 - s / 300, "icl_score": -s / 300}
            for s in range(8, 230, 8)]
    induct.plot.phase_change(recs, tmp_path / "p.png", x="tokens", xscale="log",
                             window=False)
    fig = figs[0]
    fig.draw(fig.canvas.get_renderer())
    ax = fig.axes[-1]
    lo, hi = ax.get_xlim()
    shown = [t for t in _labels(ax.xaxis) if lo <= t.get_position()[0] <= hi]
    assert len(shown) >= 4, [t.get_text() for t in shown]
    assert {"50k", "100k", "200k", "500k"} <= {t.get_text() for t in shown}
    assert "against training tokens" in fig.axes[0].get_title()


def test_attribution_says_positive_means_the_head_helps(tmp_path, monkeypatch):
    figs = _figures(monkeypatch)
    induct.plot.attribution(induct.Attribution(np.array([[0.2, -0.1]], np.float32), -0.5),
                            tmp_path / "a.png")
    texts = [t.get_text() for t in figs[0].findobj(match=lambda a: hasattr(a, "get_text"))]
    assert any("> 0: the head helps in-context learning" in t for t in texts), texts
    assert any("with the head ablated minus without" in t for t in texts)
