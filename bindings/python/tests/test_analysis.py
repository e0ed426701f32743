"""The analysis suite through the bindings: bit-identity with the C reference program
(ref_analysis.c), independent NumPy recomputations and closed forms, the ablation
context manager, and every exception path of the new functions."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import induct
from helpers import f32, f64, ints, parse_reference, run_helper

# The configurations of ref_analysis.c (keep in sync).
EVAL = dict(n_seq=6, seq_len=40, chunk=4, early=5, late=30, pos_seed=3)
PROBE = dict(n_seq=4, block_len=6, n_repeats=3, seed=9)


def _dataset():
    return induct.Dataset.rrt(d_vocab=16, min_block=3, seed=7)


def _model_a():
    return induct.Model(n_layers=2, d_model=32, n_heads=2, n_ctx=40, d_vocab=16,
                        positional="shortformer", seed=21)


def _model_b():
    return induct.Model(n_layers=2, d_model=32, n_heads=4, d_mlp=64, n_ctx=40, d_vocab=16,
                        layer_norm=1, smeared_keys=1, smear_alpha_init=0.5, seed=22)


def _analyse(m, d):
    """The Python twin of analyse() in ref_analysis.c: same calls, same order."""
    r = {}
    r["icl"] = m.icl_score(d, **EVAL)
    r["loss_by_position"] = m.loss_by_position(d, **EVAL)
    lv = m.loss_vectors(d, **EVAL)
    r["per_seq"], r["average"] = lv.per_seq, lv.average
    r["positions"] = m.loss_positions(**EVAL)
    r["probe"] = m.probe_tokens(**PROBE)
    r["probe_copying"] = m.probe_tokens(copying=True, **PROBE)
    r["prefix_matching"] = m.prefix_matching(**PROBE)
    r["duplicate_token"] = m.duplicate_token(**PROBE)
    r["copying"] = m.copying(**PROBE)
    r["copying_eigen"] = m.copying_eigen()
    for k in "qkv":
        r[f"composition_{k}"] = m.composition(k)
    r["composition_baseline"] = m.composition_baseline(20, 5)
    att = m.ablation_attribution(d, "zero", **EVAL)
    r["attribution_zero"], r["attribution_zero_icl"] = att.delta, att.icl
    r["attribution_zero_preserve"] = m.ablation_attribution(d, "zero", preserve_patterns=True,
                                                            **EVAL).delta
    ref = d.batch(3, 4, 40, split="train")[0]
    m.set_ablation_mean(ref, "pooled")
    r["attribution_mean_pooled"] = m.ablation_attribution(d, mode="mean", **EVAL).delta
    toks = d.batch(0, 6, 40, split="eval")[0]
    with m.ablate((1, 0)), m.ablate([(0, 1)], mode="mean", preserve_patterns=True):
        modes, preserve = m.ablations()
        r["ablation_modes"], r["ablation_preserve"] = modes, int(preserve)
        r["ablated_losses"] = m.forward(toks, logits=False)[1]
        r["ablated_icl"] = m.icl_score(d, **EVAL)
    # ablate(reference=...) sets the per-position reference, which stays after the block
    with m.ablate((0, 0), mode="mean", reference=ref, how="per_position"):
        pass
    r["attribution_mean_per_position"] = m.ablation_attribution(d, mode="mean", **EVAL).delta
    r["previous_token"] = m.previous_token_score(d, 6, 40)
    cls = m.classify_heads(d, n_seq=6, seq_len=40, probe=PROBE)
    r["labels"] = cls.labels
    custom = dict(previous_token=0.09, induction=0.1, duplicate=0.11, copying=-0.5)
    r["labels_custom"] = induct.classify_heads(r["previous_token"], r["prefix_matching"],
                                               r["duplicate_token"], r["copying"], custom)
    r["labels_custom_nocopy"] = induct.classify_heads(r["previous_token"], r["prefix_matching"],
                                                      r["duplicate_token"], None, custom)
    for k in ("previous_token", "prefix_matching", "duplicate_token", "copying"):
        assert np.array_equal(cls.scores[k], r[k]), k
    return r


@pytest.fixture(scope="module")
def reference():
    return parse_reference(run_helper("INDUCT_REF_ANALYSIS"))


@pytest.fixture(scope="module")
def python_runs():
    d = _dataset()
    a = _model_a()
    o = induct.Optimizer(a, "adamw", lr=1e-2)
    rows = []
    for s in range(31):
        if s % 10 == 0:
            rows.append(a.loss_vectors(d, **EVAL).per_seq)
        if s < 30:
            o.train_step(d, 8, 40)
    ra = _analyse(a, d)
    b = _model_b()
    rows.append(b.loss_vectors(d, **EVAL).per_seq)
    rb = _analyse(b, d)
    return {"A": ra, "B": rb, "rows": np.array(rows)}


DOUBLES = {"icl", "attribution_zero_icl", "ablated_icl", "composition_baseline"}
INTS = {"positions", "probe", "probe_copying", "ablation_modes", "ablation_preserve",
        "labels", "labels_custom", "labels_custom_nocopy"}


@pytest.mark.parametrize("model", ["A", "B"])
def test_every_analysis_is_bit_identical_to_c(reference, python_runs, model):
    r = python_runs[model]
    names = [k.split(".", 1)[1] for k in reference if k.startswith(model + ".")]
    assert sorted(names) == sorted(r), "the C program and the test cover the same analyses"
    for name in names:
        c = reference[f"{model}.{name}"]
        py = r[name]
        if name in DOUBLES:
            assert isinstance(py, float) and py == f64(c)[0], name
        elif name in INTS:
            assert np.array_equal(np.asarray(py).ravel(), ints(c)), name
        else:
            assert py.dtype == np.float32, name
            assert np.array_equal(py.ravel(), f32(c)), name


def test_shapes(python_runs):
    r = python_runs["B"]  # 2 layers x 4 heads
    assert r["loss_by_position"].shape == (39,)
    assert r["per_seq"].shape == (6,) and r["average"].shape == (39,)
    assert r["positions"].shape == (6,) and r["positions"].dtype == np.uint32
    assert r["probe"].shape == (4, 1 + 6 * 3) and r["probe"].dtype == np.int32
    assert r["probe_copying"].shape == (4, 6)
    for k in ("prefix_matching", "duplicate_token", "copying", "copying_eigen",
              "attribution_zero", "previous_token"):
        assert r[k].shape == (2, 4), k
    for k in "qkv":
        assert r[f"composition_{k}"].shape == (2, 4, 2, 4)
    assert r["labels"].shape == (2, 4) and r["labels"].dtype == np.uint32
    assert r["ablated_losses"].shape == (6, 39)


def test_pca_and_phase_window_bit_identical(reference, python_runs):
    rows = python_runs["rows"]
    assert np.array_equal(rows.ravel(), f32(reference["pca.rows"]))
    res = induct.pca(rows, 3)
    assert res.scores.shape == (5, 3) and res.components.shape == (3, 6)
    assert np.array_equal(res.scores.ravel(), f32(reference["pca.scores"]))
    assert np.array_equal(res.components.ravel(), f32(reference["pca.components"]))
    assert res.variance.dtype == np.float64
    assert np.array_equal(res.variance, f64(reference["pca.variance"]))
    assert res.total_variance == f64(reference["pca.total"])[0]

    steps, icl = f64(reference["phase.steps"]), f64(reference["phase.icl"])
    w = induct.phase_window(steps, icl)
    assert w.found and [w.start, w.end] == list(f64(reference["phase.default"]))
    assert reference["phase.default_found"] == ["1"]
    w = induct.phase_window(steps, icl, lo_frac=0.2, hi_frac=0.8, smooth=3)
    assert [w.start, w.end] == list(f64(reference["phase.custom"]))
    w = induct.phase_window(list(steps), list(icl), lo_frac=0.2, hi_frac=0.8, smooth=3,
                            min_change=1.0)
    assert not w.found and math.isnan(w.start) and math.isnan(w.end)
    assert reference["phase.none_found"] == ["0"]


# ---- independent recomputations and closed forms ----

def test_zero_logits_closed_form():
    m = _model_b()
    m.set("unembed.W_U", np.zeros((32, 16), np.float32))
    m.set("unembed.b_U", np.zeros(16, np.float32))
    d = _dataset()
    assert m.icl_score(d, **EVAL) == 0.0  # every loss is ln d_vocab
    assert np.allclose(m.loss_by_position(d, **EVAL), math.log(16), rtol=0, atol=1e-6)
    att = m.ablation_attribution(d, **EVAL)
    assert att.icl == 0.0 and not att.delta.any()  # no head can change a zero logit


def test_loss_curves_match_forward():
    m, d = _model_b(), _dataset()
    toks = d.batch(0, 6, 40, split="eval")[0]
    losses = m.forward(toks, logits=False)[1].astype(np.float64)
    assert np.allclose(m.loss_by_position(d, **EVAL), losses.mean(0), rtol=0, atol=2e-6)
    lv = m.loss_vectors(d, **EVAL)
    pos = m.loss_positions(**EVAL)
    assert np.all(pos <= 38)
    assert np.allclose(lv.per_seq, losses[np.arange(6), pos], rtol=0, atol=2e-6)
    icl = m.icl_score(d, **EVAL)
    assert icl == pytest.approx(losses[:, 29].mean() - losses[:, 4].mean(), abs=2e-6)


def test_loss_at_chosen_positions():
    """positions= computes the loss only there (NaN elsewhere), equal to the full pass
    within float rounding of the logits (bit-identical where the BLAS rounds the rows
    alike); the per-sequence vector stays complete; with a head ablated too."""
    m, d = _model_b(), _dataset()
    sel = np.array([0, 4, 5, 6, 29, 38], dtype=np.int64)
    for ablate in (False, True):
        ctx = m.ablate((0, 1)) if ablate else None
        full = m.loss_by_position(d, **EVAL)
        lv_full = m.loss_vectors(d, **EVAL)
        part = m.loss_by_position(d, positions=sel, **EVAL)
        lv = m.loss_vectors(d, positions=list(sel), **EVAL)
        if ctx is not None:
            ctx.restore()
        other = np.setdiff1d(np.arange(39), sel)
        assert np.isnan(part[other]).all() and np.isnan(lv.average[other]).all()
        assert np.isfinite(part[sel]).all()
        # 1e-5 nats: far above the float rounding of these d_model 32 logits (~1e-6)
        assert np.allclose(part[sel], full[sel], rtol=0, atol=1e-5)
        np.testing.assert_array_equal(lv.average[sel], part[sel])
        assert np.allclose(lv.per_seq, lv_full.per_seq, rtol=0, atol=1e-5)
    # the ablation reached both paths: the clean curve differs from the ablated one
    assert np.abs(m.loss_by_position(d, positions=sel, **EVAL)[sel] - part[sel]).max() > 1e-4


def test_positions_narrowing_and_validation():
    m, d = _model_b(), _dataset()
    with pytest.raises(induct.InvalidArgument, match="increase strictly"):
        m.loss_by_position(d, positions=[5, 5], **EVAL)
    with pytest.raises(induct.OutOfRange, match="positions"):
        m.loss_by_position(d, positions=[39], **EVAL)  # T - 1 has no next token
    with pytest.raises(induct.OutOfRange):  # refused in Python, never wrapped to 3
        m.loss_by_position(d, positions=np.array([2**32 + 3]), **EVAL)
    with pytest.raises(induct.OutOfRange):
        m.loss_by_position(d, positions=[-1], **EVAL)
    with pytest.raises(TypeError, match="integer"):
        m.loss_by_position(d, positions=np.array([1.5, 2.0]), **EVAL)
    with pytest.raises(ValueError, match="1-D"):
        m.loss_by_position(d, positions=[[1, 2]], **EVAL)
    with pytest.raises(ValueError, match="empty"):
        m.loss_by_position(d, positions=[], **EVAL)
    with pytest.raises(TypeError, match="n_positions"):
        m.loss_by_position(d, n_positions=3, **EVAL)
    # positions=None is every position, as before
    np.testing.assert_array_equal(m.loss_by_position(d, positions=None, **EVAL),
                                  m.loss_by_position(d, **EVAL))


def _probe_score(att, T, P, n_rep, bos, offset):
    """Mean over queries in repeats 2..n_rep of the attention summed on p - mP + offset."""
    scores = []
    for p in range(bos + P, T):
        r = (p - bos) // P + 1  # 1-based repeat
        targets = [p - m * P + offset for m in range(1, r)]
        scores.append(att[..., p, targets].sum(-1))
    return np.mean(scores, axis=0)


def test_prefix_matching_and_duplicate_from_attention():
    m = _model_b()
    probe = m.probe_tokens(**PROBE)
    T = probe.shape[1]
    pm = np.mean([_probe_score(m.attention(s).astype(np.float64), T, 6, 3, 1, 1)
                  for s in probe], axis=0)
    dup = np.mean([_probe_score(m.attention(s).astype(np.float64), T, 6, 3, 1, 0)
                   for s in probe], axis=0)
    assert np.allclose(m.prefix_matching(**PROBE), pm, rtol=0, atol=1e-6)
    assert np.allclose(m.duplicate_token(**PROBE), dup, rtol=0, atol=1e-6)
    # the probe is what the paper describes: BOS, then a block of distinct tokens repeated
    assert np.all(probe[:, 0] == 0)
    blocks = probe[:, 1:].reshape(4, 3, 6)
    assert np.all(blocks == blocks[:, :1]) and all(len(set(b[0])) == 6 for b in blocks)


def test_composition_and_eigen_copying_from_weights():
    m = _model_b()
    w = {k: v.astype(np.float64) for k, v in m.weights().items()}
    L, H = 2, 4
    ov = [[w[f"blocks.{l}.attn.W_V"][h] @ w[f"blocks.{l}.attn.W_O"][h] for h in range(H)]
          for l in range(L)]
    qk = [[w[f"blocks.{l}.attn.W_Q"][h] @ w[f"blocks.{l}.attn.W_K"][h].T for h in range(H)]
          for l in range(L)]
    ref = {k: np.zeros((L, H, L, H)) for k in "qkv"}
    fro = np.linalg.norm
    for h1 in range(H):
        for h2 in range(H):
            a, q = ov[0][h1], qk[1][h2]
            ref["q"][0, h1, 1, h2] = fro(a @ q) / (fro(a) * fro(q))
            ref["k"][0, h1, 1, h2] = fro(a @ q.T) / (fro(a) * fro(q))
            ref["v"][0, h1, 1, h2] = fro(a @ ov[1][h2]) / (fro(a) * fro(ov[1][h2]))
    for k in "qkv":
        assert np.allclose(m.composition(k), ref[k], rtol=1e-5, atol=1e-7), k
    eig = np.zeros((L, H))
    for l in range(L):
        for h in range(H):
            full = w["embed.W_E"] @ ov[l][h] @ w["unembed.W_U"]  # d_vocab x d_vocab
            lam = np.linalg.eigvals(full)
            eig[l, h] = lam.real.sum() / np.abs(lam).sum()
    assert np.allclose(m.copying_eigen(), eig, rtol=0, atol=1e-5)


def test_pca_matches_numpy_svd():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(7, 5)).astype(np.float32)
    res = induct.pca(x, 2)
    xc = x.astype(np.float64) - x.astype(np.float64).mean(0)
    u, s, vt = np.linalg.svd(xc, full_matrices=False)
    for i in range(2):  # the documented sign rule: largest-magnitude entry positive
        if vt[i, np.argmax(np.abs(vt[i]))] < 0:
            vt[i], u[:, i] = -vt[i], -u[:, i]
    assert np.allclose(res.components, vt[:2], atol=1e-5)
    assert np.allclose(res.scores, u[:, :2] * s[:2], atol=1e-5)
    assert np.allclose(res.variance, s[:2] ** 2 / 6, rtol=1e-6)
    assert res.total_variance == pytest.approx((s ** 2).sum() / 6, rel=1e-9)
    # nested lists work the same
    assert np.array_equal(induct.pca(x.tolist(), 2).scores, res.scores)


def test_pca_trajectories_splits_the_stack():
    rng = np.random.default_rng(4)
    runs = {"a": rng.normal(size=(4, 6)), "b": rng.normal(size=(3, 6))}
    traj, res = induct.pca_trajectories(runs, k=2)
    whole = induct.pca(np.vstack([runs["a"], runs["b"]]), 2)
    assert np.array_equal(traj["a"], whole.scores[:4])
    assert np.array_equal(traj["b"], whole.scores[4:])
    assert np.array_equal(res.variance, whole.variance)


def test_phase_window_closed_form():
    # a score falling linearly by 0.4 nats between steps 200 and 700
    steps = np.arange(0, 1001, 50, dtype=np.float64)
    icl = -0.4 * np.clip((steps - 200) / 500, 0, 1)
    w = induct.phase_window(steps, icl)
    assert w.found
    assert w.start == pytest.approx(250, abs=1e-9) and w.end == pytest.approx(650, abs=1e-9)


def test_classify_heads_rule():
    prev = [0.5, 0.1, 0.1, 0.45]
    prefix = [0.45, 0.6, 0.1, 0.5]
    dup = [0.1, 0.1, 0.9, 0.1]
    labels = induct.classify_heads(prev, prefix, dup)
    names = [induct.HEAD_CLASSES[i] for i in labels]
    assert names == ["previous_token", "induction", "duplicate", "induction"]
    # induction needs copying >= 0 when copying scores are given
    labels = induct.classify_heads(prev, prefix, dup, copying=[1, -1, 0, 0])
    assert [induct.HEAD_CLASSES[i] for i in labels] == \
        ["previous_token", "other", "duplicate", "induction"]
    # shapes are kept; thresholds apply
    labels = induct.classify_heads(np.array(prev).reshape(2, 2), np.array(prefix).reshape(2, 2),
                                   np.array(dup).reshape(2, 2), thresholds={"induction": 0.55})
    assert labels.shape == (2, 2) and labels.tolist() == [[1, 2], [3, 1]]


def test_attribution_equals_explicit_ablation():
    for m in (_model_a(), _model_b()):
        d = _dataset()
        att = m.ablation_attribution(d, **EVAL)
        clean = m.icl_score(d, **EVAL)
        assert att.icl == clean
        L, H = att.delta.shape
        for l in range(L):
            for h in range(H):
                with m.ablate((l, h)):
                    ablated = m.icl_score(d, **EVAL)
                assert att.delta[l, h] == pytest.approx(ablated - clean, abs=1e-5)


# ---- the ablation context manager ----

def test_ablation_context_restores_bit_identical_outputs():
    m, d = _model_b(), _dataset()
    toks = d.batch(0, 3, 40, split="eval")[0]
    before = m.forward(toks)[0].copy()
    w_before = m.weights()
    with m.ablate([(0, 1), (1, 2)], preserve_patterns=True) as ab:
        assert ab.active
        modes, preserve = m.ablations()
        assert modes.tolist() == [[0, 1, 0, 0], [0, 0, 1, 0]] and preserve
        during = m.forward(toks)[0]
        assert not np.array_equal(during, before)
        with pytest.raises(induct.StateError, match="ablated"):
            m.backward(toks)
    assert not ab.active
    assert m.ablations()[0].sum() == 0 and m.ablations()[1] is False
    assert np.array_equal(m.forward(toks)[0], before)
    assert all(np.array_equal(v, w_before[k]) for k, v in m.weights().items())

    # an exception inside the block restores too, and propagates
    with pytest.raises(KeyError):
        with m.ablate((1, 1)):
            raise KeyError("inside")
    assert m.ablations()[0].sum() == 0
    assert np.array_equal(m.forward(toks)[0], before)

    # nesting: the inner block restores the outer one's state
    m.set_ablation_mean(toks)
    with m.ablate((0, 0)):
        outer = m.forward(toks)[0].copy()
        with m.ablate((1, 3), mode="mean", preserve_patterns=True):
            assert m.ablations()[0].tolist() == [[1, 0, 0, 0], [0, 0, 0, 2]]
        assert m.ablations()[0].tolist() == [[1, 0, 0, 0], [0, 0, 0, 0]]
        assert m.ablations()[1] is False
        assert np.array_equal(m.forward(toks)[0], outer)
    assert np.array_equal(m.forward(toks)[0], before)

    # heads given as a list pair or NumPy integers
    with m.ablate([np.int64(1), np.uint32(2)]):
        assert m.ablations()[0].tolist() == [[0, 0, 0, 0], [0, 0, 1, 0]]
    with m.ablate(np.array([[0, 0], [1, 1]])):
        assert m.ablations()[0].tolist() == [[1, 0, 0, 0], [0, 1, 0, 0]]

    # without `with`: restore() by hand, idempotent
    ab = m.ablate((0, 3))
    assert m.ablations()[0][0, 3] == 1
    ab.restore()
    ab.restore()
    assert np.array_equal(m.forward(toks)[0], before)


def test_ablation_handles_in_any_order():
    """Each handle undoes exactly what it did, whatever the order of the restores."""
    m, d = _model_b(), _dataset()
    toks = d.batch(0, 3, 40, split="eval")[0]
    before = m.forward(toks)[0].copy()
    m.set_ablation_mean(toks)
    modes = lambda: m.ablations()[0].tolist()

    # first in, first out: the later handle's head stays, then nothing is left
    a, b = m.ablate((0, 1)), m.ablate((1, 2), preserve_patterns=True)
    a.restore()
    assert modes() == [[0, 0, 0, 0], [0, 0, 1, 0]] and m.ablations()[1] is True
    b.restore()
    assert modes() == [[0] * 4, [0] * 4] and m.ablations()[1] is False
    assert np.array_equal(m.forward(toks)[0], before)
    m.backward(toks)  # training is allowed again

    # the same head set twice: each restore leaves the other handle's mode
    for order in ("fifo", "lifo"):
        a, b = m.ablate((0, 0)), m.ablate((0, 0), mode="mean")
        assert modes()[0][0] == 2
        first, second = (a, b) if order == "fifo" else (b, a)
        first.restore()
        assert modes()[0][0] == (2 if order == "fifo" else 1)
        second.restore()
        assert modes()[0][0] == 0
    assert np.array_equal(m.forward(toks)[0], before)

    # three handles, the middle one first, on overlapping heads
    a = m.ablate([(0, 0), (0, 1)])
    b = m.ablate([(0, 1), (1, 1)], mode="mean")
    c = m.ablate([(1, 1), (1, 3)])
    b.restore()
    assert modes() == [[1, 1, 0, 0], [0, 1, 0, 1]]
    c.restore()
    assert modes() == [[1, 1, 0, 0], [0, 0, 0, 0]]
    a.restore()
    assert np.array_equal(m.forward(toks)[0], before)


def test_ablation_inside_another_block_survives_it():
    m, d = _model_b(), _dataset()
    toks = d.batch(0, 3, 40, split="eval")[0]
    before = m.forward(toks)[0].copy()
    with m.ablate((0, 0)):
        mine = m.ablate((1, 1))  # a handle of the user's, not restored in the block
        m.ablate_head(1, 2)      # and a plain ablation
    assert m.ablations()[0].tolist() == [[0, 0, 0, 0], [0, 1, 1, 0]]
    mine.restore()
    assert m.ablations()[0].tolist() == [[0, 0, 0, 0], [0, 0, 1, 0]]
    # a head the outer block had set but the user changed inside keeps the user's mode
    with m.ablate((0, 3)):
        m.ablate_head(0, 3, "none")
        m.ablate_head(0, 3, "zero")
        m.ablate_head(0, 3, "none")
        m.set_ablation_mean(toks)
        m.ablate_head(0, 3, "mean")
    assert m.ablations()[0].tolist() == [[0, 0, 0, 2], [0, 0, 1, 0]]
    m.clear_ablations()
    assert np.array_equal(m.forward(toks)[0], before)
    # training works again
    assert induct.Optimizer(m).train_step(toks) > 0


def test_failed_ablation_leaves_nothing_behind():
    m = _model_b()
    with pytest.raises(induct.StateError, match="reference"):
        m.ablate([(0, 0), (1, 1)], mode="mean")  # no mean reference yet
    assert m.ablations()[0].sum() == 0
    with pytest.raises(induct.OutOfRange, match=r"head \(2, 0\) does not exist"):
        m.ablate([(0, 0), (2, 0)])  # the first head was applied, then undone
    assert m.ablations()[0].sum() == 0


# ---- exception paths ----

def test_analysis_exceptions():
    m, d = _model_b(), _dataset()
    with pytest.raises(induct.OutOfRange) as e:
        m.icl_score(d, n_seq=2, seq_len=40, early=5, late=40)  # needs seq_len >= late + 1
    assert e.value.function == "induct_analysis_icl_score" and e.value.status == -4
    with pytest.raises(induct.InvalidArgument, match="early < late"):
        m.icl_score(d, early=30, late=30, seq_len=40)
    with pytest.raises(induct.OutOfRange):
        m.loss_by_position(d, seq_len=41)
    with pytest.raises(ValueError, match="split"):
        m.icl_score(d, split="validation")
    with pytest.raises(TypeError, match="unknown EvalConfig field 'n_sequences'"):
        m.loss_vectors(d, n_sequences=3)
    with pytest.raises(induct.InvalidArgument, match="n_seq"):
        m.loss_positions(n_seq=0, seq_len=40)
    with pytest.raises(ValueError, match="mode"):
        m.ablate((0, 0), mode="half")
    with pytest.raises(TypeError, match="pair of ints"):
        m.ablate([(0, 0), (1,)])
    with pytest.raises(TypeError, match="pair of ints"):
        m.ablate([(0, 0.5)])
    assert m.ablations()[0].sum() == 0
    with pytest.raises(ValueError, match="mode"):
        m.ablation_attribution(d, mode="none", **EVAL)
    with pytest.raises(induct.StateError, match="reference"):
        m.ablation_attribution(d, mode="mean", **EVAL)
    with pytest.raises(ValueError, match="how"):
        m.set_ablation_mean([[1, 2, 3]], how="median")
    with pytest.raises(induct.OutOfRange, match="token id 99"):
        m.set_ablation_mean([[1, 2, 99]])
    with pytest.raises(induct.InvalidArgument, match="distinct tokens"):
        m.prefix_matching(block_len=16, n_repeats=2)
    with pytest.raises(induct.OutOfRange, match="exceed n_ctx 40"):
        m.duplicate_token(block_len=10, n_repeats=4)
    with pytest.raises(induct.InvalidArgument):
        m.copying(bos=3)  # BOS inside the token range
    with pytest.raises(induct.InvalidArgument):
        m.probe_tokens(n_repeats=1)
    with pytest.raises(ValueError, match="kind"):
        m.composition("x")
    with pytest.raises(induct.InvalidArgument, match="n_samples"):
        m.composition_baseline(0)
    with pytest.raises(induct.OutOfRange, match="n_components 3"):
        induct.pca(np.ones((3, 2)), 3)
    with pytest.raises(induct.InvalidArgument, match="not finite"):
        induct.pca([[1.0, float("nan")], [2.0, 3.0]], 1)
    with pytest.raises(induct.InvalidArgument, match="at least 2 rows"):
        induct.pca([[1.0, 2.0]], 1)
    with pytest.raises(ValueError, match="2-D"):
        induct.pca([1.0, 2.0, 3.0], 1)
    with pytest.raises(ValueError, match="k must be"):
        induct.pca(np.ones((3, 2)), 0)
    with pytest.raises(induct.InvalidArgument, match="increase strictly"):
        induct.phase_window([0, 2, 1], [0.0, 1.0, 2.0])
    with pytest.raises(induct.InvalidArgument, match="odd"):
        induct.phase_window([0, 1, 2], [0.0, 1.0, 2.0], smooth=2)
    with pytest.raises(ValueError, match="points"):
        induct.phase_window([0, 1, 2], [0.0, 1.0])
    with pytest.raises(induct.InvalidArgument, match="thresholds"):
        induct.classify_heads([0.1], [0.2], [0.3], thresholds={"induction": 2.0})
    with pytest.raises(TypeError, match="unknown ClassifyConfig field"):
        induct.classify_heads([0.1], [0.2], [0.3], thresholds={"prefix": 0.5})
    with pytest.raises(ValueError, match="differ in length"):
        induct.classify_heads([0.1, 0.2], [0.2], [0.3])
    with pytest.raises(induct.InvalidArgument, match="not finite|finite"):
        induct.classify_heads([float("inf")], [0.2], [0.3])
    m.close()
    with pytest.raises(ValueError, match="closed"):
        m.prefix_matching()
    with pytest.raises(ValueError, match="closed"):
        m.ablate((0, 0))


def test_buffers_are_type_checked():
    from induct import _capi
    m = _model_b()
    wrong = np.zeros(8, dtype=np.float64)  # the C side wants float32
    with pytest.raises(TypeError, match="float32"):
        _capi.call("induct_analysis_copying_eigen", m, wrong, 8, _capi.Out("size"))


def test_analysis_without_numpy(reference):
    code = r"""
import sys; sys.modules['numpy'] = None
import induct
d = induct.Dataset.rrt(d_vocab=16, min_block=3, seed=7)
m = induct.Model(n_layers=2, d_model=32, n_heads=4, d_mlp=64, n_ctx=40, d_vocab=16,
                 layer_norm=1, smeared_keys=1, smear_alpha_init=0.5, seed=22)
pm = m.prefix_matching(n_seq=4, block_len=6, n_repeats=3, seed=9)
assert type(pm).__name__ == 'Shaped' and pm.shape == (2, 4) and pm.data.typecode == 'f'
assert len(pm.tolist()) == 2 and len(pm.tolist()[0]) == 4
pos = m.loss_positions(n_seq=6, seq_len=40, pos_seed=3)
assert pos.data.typecode == 'I'
comp = m.composition('v')
assert comp.shape == (2, 4, 2, 4)
ev = dict(n_seq=6, seq_len=40, chunk=4, early=5, late=30, pos_seed=3)
probe = dict(n_seq=4, block_len=6, n_repeats=3, seed=9)
lab = induct.classify_heads(m.previous_token_score(d, 6, 40), pm, m.duplicate_token(**probe),
                            m.copying(**probe))
assert lab.shape == (2, 4) and lab.data.typecode == 'I'
with m.ablate((1, 0)):
    assert m.ablations()[0].tolist() == [[0, 0, 0, 0], [1, 0, 0, 0]]
assert sum(m.ablations()[0]) == 0
p = induct.pca([[1.0, 2.0, 0.5], [2.0, 1.0, 0.0], [0.0, 0.5, 3.0]], 2)
assert p.scores.shape == (3, 2) and p.variance.data.typecode == 'd'
print('icl', float.hex(m.icl_score(d, **ev)))
print('prefix_matching', *[float.hex(x) for x in pm])
print('composition_v', *[float.hex(x) for x in comp])
print('positions', *pos)
print('labels', *lab)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=os.environ)
    assert out.returncode == 0, out.stderr
    got = parse_reference(out.stdout)
    assert f64(got["icl"])[0] == f64(reference["B.icl"])[0]
    for k in ("prefix_matching", "composition_v"):
        assert np.array_equal(f32(got[k]), f32(reference[f"B.{k}"])), k
    assert got["positions"] == reference["B.positions"]
    assert got["labels"] == reference["B.labels"]


# ---- the statistics of the checks (batch means, paired differences, band ICL) ----

def test_batch_means_and_paired_difference_by_hand():
    # 1, 2, 3, 4: mean 2.5, sample variance 5/3, standard error sqrt(5/3)/2
    r = induct.batch_means([1.0, 2.0, 3.0, 4.0])
    assert r.mean == 2.5 and r.se == pytest.approx(math.sqrt(5 / 3) / 2, rel=1e-15)
    assert math.isnan(induct.batch_means([0.25]).se)
    # differences 2, 3, 0: mean 5/3, standard error sqrt(7)/3
    p = induct.paired_difference([3, 5, 4], [1, 2, 4])
    assert p.mean == pytest.approx(5 / 3, rel=1e-15) and p.se == pytest.approx(math.sqrt(7) / 3)
    # the same as NumPy's on random groups
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=32), rng.normal(size=32)
    r = induct.paired_difference(a, b)
    assert r.mean == pytest.approx((a - b).mean(), rel=1e-12)
    assert r.se == pytest.approx((a - b).std(ddof=1) / math.sqrt(32), rel=1e-12)
    with pytest.raises(induct.InvalidArgument):
        induct.batch_means([])
    with pytest.raises(induct.InvalidArgument):
        induct.batch_means([1.0, math.nan])
    with pytest.raises(ValueError):
        induct.paired_difference([1, 2], [1, 2, 3])


def test_icl_band_by_hand():
    step = np.where(np.arange(10) >= 7, 2.0, 1.0).astype(np.float32)
    assert induct.icl_band(step, early=3, late=7, band=0) == 0.0
    assert induct.icl_band(step, early=3, late=7, band=1) == pytest.approx(1 / 3, rel=1e-15)
    assert induct.icl_band(np.arange(10, dtype=np.float32), 3, 8, 1) == 5.0
    with pytest.raises(induct.OutOfRange):
        induct.icl_band(step, early=3, late=9, band=2)


def test_icl_groups_match_loss_curves():
    """Group g's score is the band estimator on batch g's loss curve; the estimate is the
    batch means of the groups."""
    m, d = _model_a(), _dataset()
    r = m.icl_groups(d, n_groups=4, per_group=5, seq_len=40, early=5, late=30, band=2,
                     curve_groups=1)
    curves = [m.loss_by_position(d, n_seq=5, seq_len=40, chunk=5, batch_index=g)
              for g in range(4)]
    bands = [induct.icl_band(c, 5, 30, 2) for c in curves]
    np.testing.assert_allclose(r.groups, bands, rtol=0, atol=1e-5)
    assert (r.icl, r.icl_se) == tuple(induct.batch_means(r.groups))
    np.testing.assert_allclose(r.curve, curves[0], rtol=0, atol=1e-5)
    tok = [float(c[29]) - float(c[4]) for c in curves]
    assert r.icl_token == pytest.approx(np.mean(tok), abs=1e-5)
    assert r.icl_se > 0
    with pytest.raises(induct.OutOfRange):
        m.icl_groups(d, n_groups=4, per_group=5, seq_len=40, early=5, late=30, band=5)
    with pytest.raises(ValueError):
        m.icl_groups(d, split="test")
