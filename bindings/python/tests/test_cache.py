"""A cache that fits (induct.cache, induct.reduce): name patterns and layer ranges select the
points they say, reductions computed inside the pass equal the full cache reduced
afterwards (in float64 where the reduction adds, bit for bit where it selects), the planned
bytes are the bytes returned, and a budget refuses before the pass runs."""
import re

import numpy as np
import pytest

import induct
from induct import reduce as R

MLP_LN = dict(n_layers=2, d_model=24, n_heads=3, d_mlp=40, layer_norm=1, n_ctx=16,
              d_vocab=13, positional="standard")
ATTN = dict(n_layers=3, d_model=16, n_heads=2, n_ctx=16, d_vocab=11)


def model_and_tokens(cfg, batch=5, seq_len=14):
    m = induct.Model(seed=3, init_std=0.3, **cfg)
    d = induct.Dataset.rrt(d_vocab=cfg["d_vocab"], min_block=3, seed=2)
    o = induct.Optimizer(m, lr=3e-2)
    for _ in range(3):  # weights off their initialisation
        o.train_step(d, 4, 16)
    return m, np.array(d.batch(0, batch, seq_len, split="eval")[0])


def every_point(m):
    return m.hook_points()


def test_patterns_select_what_they_say():
    m, toks = model_and_tokens(ATTN)
    pts = every_point(m)
    sel = lambda **kw: m.cache_plan(toks, **kw).names  # noqa: E731
    assert sel(names="pattern") == [f"blocks.{i}.attn.hook_pattern" for i in range(3)]
    assert sel(names="hook_z") == [f"blocks.{i}.attn.hook_z" for i in range(3)]
    assert sel(names="resid_*") == [p for p in pts if ".hook_resid_" in p]
    assert sel(names="hook_[qk]") == [p for p in pts if p.endswith((".hook_q", ".hook_k"))]
    assert sel(names="blocks.*.hook_resid_post") == [f"blocks.{i}.hook_resid_post"
                                                      for i in range(3)]
    assert sel(names=re.compile(r"blocks\.[12]\.attn\.hook_v")) == [
        "blocks.1.attn.hook_v", "blocks.2.attn.hook_v"]
    # layers: an int, a range, a slice, negative from the end; blocks only
    assert sel(names="pattern", layers=1) == ["blocks.1.attn.hook_pattern"]
    assert sel(names="pattern", layers=range(1, 3)) == ["blocks.1.attn.hook_pattern",
                                                        "blocks.2.attn.hook_pattern"]
    assert sel(names="pattern", layers=slice(-1, None)) == ["blocks.2.attn.hook_pattern"]
    assert sel(names="pattern", layers=[-3]) == ["blocks.0.attn.hook_pattern"]
    assert sel(layers=0) == [p for p in pts if p.startswith("blocks.0.")
                             and not p.endswith("hook_result")]
    # a point outside the blocks survives a layer filter only when named in full
    assert sel(names=["hook_embed", "resid_post"], layers=2) == [
        "hook_embed", "blocks.2.hook_resid_post"]
    assert sel(names="hook_*", layers=2) == [p for p in pts if p.startswith("blocks.2.")]
    # as before: full names, (name, layer) tuples, predicates, None; in the order given
    assert sel(names=[("z", 1), "blocks.0.hook_resid_pre"]) == [
        "blocks.1.attn.hook_z", "blocks.0.hook_resid_pre"]
    assert sel(names=["resid_post", "pattern", "blocks.1.attn.hook_pattern"]) == [
        "blocks.0.hook_resid_post", "blocks.1.hook_resid_post", "blocks.2.hook_resid_post",
        "blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern", "blocks.2.attn.hook_pattern"]
    assert sel(names=("pattern", 2)) == ["blocks.2.attn.hook_pattern"]
    assert sel(names=lambda n: n.endswith("attn_out")) == [
        f"blocks.{i}.hook_attn_out" for i in range(3)]
    assert sel() == [p for p in pts if not p.endswith(".attn.hook_result")]


def test_selection_errors_are_clear():
    m, toks = model_and_tokens(ATTN)
    with pytest.raises(ValueError, match="patern.*matches no hook point"):
        m.cache_plan(toks, names="patern")
    with pytest.raises(ValueError, match="matches no hook point"):
        m.cache_plan(toks, names="blocks.*.mlp.hook_post")   # attention-only: no MLP
    with pytest.raises(induct.InvalidArgument):
        m.cache_plan(toks, names="blocks.0.attn.hook_nothing")
    with pytest.raises(induct.OutOfRange):                   # no such point in this model
        m.cache_plan(toks, names="blocks.0.hook_resid_mid")
    with pytest.raises(ValueError, match="layer 3 out of range"):
        m.cache_plan(toks, layers=3)
    with pytest.raises(TypeError):
        m.cache_plan(toks, layers=[1.0])
    with pytest.raises(ValueError, match="more than one key"):
        m.cache_plan(toks, names="pattern", reduce={"pattern": R.mean(), "blocks.1.*": R.sum()})
    with pytest.raises(ValueError, match="matches none of the cached points"):
        m.cache_plan(toks, names="pattern", reduce={"hook_z": R.mean()})
    with pytest.raises(ValueError, match=r"diagonal\(1\) on blocks.0.hook_resid_pre"):
        m.cache_plan(toks, names="resid_pre", reduce=R.diagonal(1))
    with pytest.raises(ValueError, match="offset 14 >= seq_len 14"):
        m.cache_plan(toks, names="pattern", reduce=R.diagonal(14))
    with pytest.raises(ValueError, match="axis 4 out of range"):
        m.cache_plan(toks, names="pattern", reduce=R.mean(4))
    with pytest.raises(TypeError):
        m.cache_plan(toks, names="pattern", reduce=3)


# every point (a reduction is a reading hook: it changes no bit anywhere)
UPSTREAM = lambda n: True  # noqa: E731


def test_reductions_equal_the_full_cache_reduced_afterwards():
    m, toks = model_and_tokens(MLP_LN)
    full_logits, full = m.run_with_cache(toks, names=UPSTREAM)
    B, T = toks.shape
    reduce = {
        "pattern": R.mean(),                                   # over the batch
        "attn_scores": R.diagonal(2),                          # key = query - 2
        "resid_post": R.norm(),                                # over d_model
        "blocks.1.attn.hook_z": R.index((slice(None), slice(None), 2)),   # head 2
        "mlp.hook_post": R.mean((0, 1)),                       # batch and position
        "ln_final.hook_normalized": lambda a: a[:, -1].max(-1),   # any function
        "blocks.0.attn.hook_q": R.chain(R.norm(), R.max(1)),   # composed
    }
    lg, red = m.run_with_cache(toks, names=UPSTREAM, reduce=reduce)
    np.testing.assert_array_equal(lg, full_logits)   # reading hooks change no bit
    assert list(red) == list(full)                   # the same points, in pass order
    f64 = {k: v.astype(np.float64) for k, v in full.items()}
    for layer in range(2):
        np.testing.assert_allclose(red["pattern", layer], f64[f"blocks.{layer}.attn.hook_pattern"]
                                   .sum(0) / B, rtol=1e-6, atol=1e-7)
        q = np.arange(2, T)
        np.testing.assert_array_equal(
            red["attn_scores", layer], full["attn_scores", layer][:, :, q, q - 2])
        np.testing.assert_allclose(red["resid_post", layer],
                                   np.sqrt((f64[f"blocks.{layer}.hook_resid_post"] ** 2).sum(-1)),
                                   rtol=1e-6)
        np.testing.assert_allclose(red[f"blocks.{layer}.mlp.hook_post"],
                                   f64[f"blocks.{layer}.mlp.hook_post"].sum((0, 1)) / (B * T),
                                   rtol=1e-5, atol=1e-7)
        # points no key matches are kept whole
        np.testing.assert_array_equal(red["resid_pre", layer], full["resid_pre", layer])
    np.testing.assert_array_equal(red["blocks.1.attn.hook_z"], full["z", 1][:, :, 2])
    np.testing.assert_array_equal(red["ln_final.hook_normalized"],
                                  full["ln_final.hook_normalized"][:, -1].max(-1))
    np.testing.assert_allclose(red["q", 0], np.sqrt((f64["blocks.0.attn.hook_q"] ** 2)
                                                    .sum(-1)).max(1), rtol=1e-6)
    assert red["pattern", 1].shape == (3, T, T)
    assert red["attn_scores", 0].shape == (B, 3, T - 2)


def test_reductions_at_the_attention_output():
    """A reducing (reading) hook at attn.hook_result, hook_attn_out or hook_mlp_out
    changes nothing: the pass sees that it left the values as they were and adds the
    output to the residual stream with the plain pass's fused product (docs/hooks.md)."""
    m, toks = model_and_tokens(MLP_LN)
    full_logits, full = m.run_with_cache(toks, names=["result", "attn_out", "mlp_out"])
    lg, red = m.run_with_cache(toks, names=["result", "attn_out", "mlp_out"],
                               reduce={"result": R.norm(), "attn_out": R.mean(),
                                       "mlp_out": R.mean()})
    np.testing.assert_array_equal(lg, full_logits)
    np.testing.assert_array_equal(lg, m.forward(toks)[0])
    for layer in range(2):
        np.testing.assert_allclose(
            red["result", layer],
            np.sqrt((full["result", layer].astype(np.float64) ** 2).sum(-1)), rtol=1e-5)
        np.testing.assert_allclose(
            red["attn_out", layer], full["attn_out", layer].astype(np.float64).mean(0),
            rtol=0, atol=1e-6 * np.abs(full["attn_out", layer]).max())


def test_reductions_see_what_the_callers_hooks_left():
    m, toks = model_and_tokens(ATTN)

    def zero_head(z, _name):
        z[:, :, 1] = 0.0
    with m.hooks([("blocks.0.attn.hook_z", zero_head)]):
        lg, red = m.run_with_cache(toks, names=["z", "pattern"], layers=[0, 1],
                                   reduce={"z": R.norm(), "pattern": R.diagonal(1)})
        lg_full, full = m.run_with_cache(toks, names=["z", "pattern"], layers=[0, 1])
    assert np.all(red["z", 0][:, :, 1] == 0.0) and np.all(red["z", 0][:, :, 0] > 0.0)
    np.testing.assert_array_equal(lg, lg_full)
    q = np.arange(1, toks.shape[1])
    np.testing.assert_array_equal(red["pattern", 1], full["pattern", 1][:, :, q, q - 1])
    plain_logits = m.forward(toks)[0]
    assert not np.array_equal(lg, plain_logits)   # the head's zeroing did take effect


def test_planned_bytes_are_the_bytes_returned():
    m, toks = model_and_tokens(MLP_LN)
    cases = [dict(), dict(names="pattern", reduce=R.mean()),
             dict(names="resid_*", layers=1, reduce={"resid_post": R.norm()}),
             dict(names=lambda n: True, reduce=lambda a: a.astype(np.float64).sum(0)),
             dict(names=lambda n: True, reduce={"pattern": R.diagonal(0)}),
             dict(names="pattern", logits=False)]
    for kw in cases:
        plan = m.cache_plan(toks, **kw)
        lg, cache = m.run_with_cache(toks, **kw)
        got = sum(v.nbytes for v in cache.values()) + (lg.nbytes if lg is not None else 0)
        assert plan.total_bytes == got, kw
        assert plan.names == list(cache)
        for e in plan.entries:
            assert cache[e.name].shape == e.out_shape and cache[e.name].dtype == e.dtype
    assert m.run_with_cache(toks, names="pattern", logits=False)[0] is None
    # the plan needs only the shape of the input
    assert m.cache_plan((64, 16), names="pattern").cache_bytes == 2 * 64 * 3 * 16 * 16 * 4


def test_a_budget_refuses_before_the_pass():
    m, toks = model_and_tokens(ATTN)
    plan = m.cache_plan(toks, names="pattern")
    calls = []
    with m.hooks([("hook_embed", lambda a, n: calls.append(n))]):
        with pytest.raises(induct.CacheTooLarge) as e:
            m.run_with_cache(toks, names="pattern", max_bytes=plan.total_bytes - 1)
        assert calls == []                        # no pass ran
        m.run_with_cache(toks, names="pattern", max_bytes=plan.total_bytes)
        assert calls == ["hook_embed"]
    err = e.value
    assert isinstance(err, induct.LimitExceeded) and isinstance(err, MemoryError)
    assert err.plan.total_bytes == plan.total_bytes and err.max_bytes == plan.total_bytes - 1
    assert f"{plan.total_bytes} bytes" in str(err) and "max_bytes=" in str(err)
    # reduced, the same call fits a budget the full cache does not
    small = m.cache_plan(toks, names="pattern", reduce=R.diagonal(1), logits=False)
    assert small.total_bytes < plan.cache_bytes / 10
    lg, cache = m.run_with_cache(toks, names="pattern", reduce=R.diagonal(1), logits=False,
                                 max_bytes=small.total_bytes)
    assert lg is None and cache["pattern", 2].shape == (toks.shape[0], 2, toks.shape[1] - 1)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError):
            m.run_with_cache(toks, names="pattern", max_bytes=bad)


def test_a_reduction_cannot_change_the_pass_or_its_planned_shape():
    m, toks = model_and_tokens(ATTN)

    def writes(a):
        a[...] = 0.0
        return a
    with pytest.raises(ValueError, match="read-only"):
        m.run_with_cache(toks, names="pattern", reduce=R.Reduction(
            writes, shape=lambda s: s, dtype=np.float32))
    # a shape that depends on the values: planned on zeros, different in the pass
    with pytest.raises(ValueError, match="gave shape"):
        m.run_with_cache(toks, names="pattern", reduce=lambda a: a[a > 0.5])
    # the model still runs plain passes afterwards
    np.testing.assert_array_equal(m.forward(toks)[0], m.run_with_cache(toks, names="z")[0])


def test_chunks_make_the_whole_batchs_cache():
    m, toks = model_and_tokens(MLP_LN, batch=7)
    reduce = {"pattern": R.mean(), "attn_scores": R.diagonal(1), "resid_post": R.norm(),
              "hook_z": R.max(), "hook_q": R.sum((0, 2)),
              "mlp.hook_pre": R.chain(R.norm(), R.mean()),
              "ln1.hook_normalized": lambda a: a[:, :, :3]}     # keeps the batch: stacked
    names = ["pattern", "attn_scores", "resid_post", "hook_z", "hook_q", "mlp.hook_pre",
             "ln1.hook_normalized", "resid_pre"]
    whole_logits, whole = m.run_with_cache(toks, names=names)
    lg, red = m.run_with_cache(toks, names=names, reduce=reduce, chunk=3)   # 3 + 3 + 1
    plan = m.cache_plan(toks, names=names, reduce=reduce, chunk=3)
    assert plan.chunk == 3
    assert plan.total_bytes == sum(v.nbytes for v in red.values()) + lg.nbytes + \
        plan.scratch_bytes
    # float64 sums of the mean [H, T, T], the sum [T, E] and the chain's mean [T], per layer
    assert plan.scratch_bytes == 8 * 2 * (3 * 14 * 14 + 14 * 8 + 14)
    scale = np.abs(whole_logits).max()
    np.testing.assert_allclose(lg, whole_logits, rtol=0, atol=1e-6 * scale)
    w = {k: v.astype(np.float64) for k, v in whole.items()}
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)  # noqa: E731
    q = np.arange(1, toks.shape[1])
    for layer in range(2):
        close(red["pattern", layer], w[f"blocks.{layer}.attn.hook_pattern"].mean(0))
        close(red["attn_scores", layer], w[f"blocks.{layer}.attn.hook_attn_scores"][:, :, q, q - 1])
        close(red["resid_post", layer], np.sqrt((w[f"blocks.{layer}.hook_resid_post"] ** 2).sum(-1)))
        close(red["z", layer], w[f"blocks.{layer}.attn.hook_z"].max(0))
        close(red["q", layer], w[f"blocks.{layer}.attn.hook_q"].sum((0, 2)))
        close(red[f"blocks.{layer}.mlp.hook_pre"],
              np.sqrt((w[f"blocks.{layer}.mlp.hook_pre"] ** 2).sum(-1)).mean(0))
        close(red["normalized", layer, "ln1"], w[f"blocks.{layer}.ln1.hook_normalized"][:, :, :3])
        close(red["resid_pre", layer], w[f"blocks.{layer}.hook_resid_pre"])   # unreduced
    # a reduction that drops the batch without summing, averaging or taking a maximum
    with pytest.raises(ValueError, match="cannot run in chunks"):
        m.run_with_cache(toks, names="pattern", reduce=R.index(0), chunk=3)
    with pytest.raises(ValueError, match="cannot run in chunks"):
        m.run_with_cache(toks, names="resid_post", reduce=R.norm(0), chunk=3)
    m.run_with_cache(toks, names="pattern", reduce=R.index(0), chunk=7)     # one part: fine
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError):
            m.run_with_cache(toks, names="pattern", chunk=bad)


def test_chunks_keep_the_models_workspace_small():
    m, _ = model_and_tokens(ATTN)
    toks = np.random.default_rng(0).integers(0, ATTN["d_vocab"], size=(96, 16))
    one, parts = m.clone(), m.clone()
    one.run_with_cache(toks, names="pattern", reduce=R.mean(), logits=False)
    parts.run_with_cache(toks, names="pattern", reduce=R.mean(), logits=False, chunk=8)
    base = m.clone().memory_used   # parameters, gradients, no workspace yet
    assert (parts.memory_used - base) * 6 < one.memory_used - base
