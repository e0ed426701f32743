"""TransformerLens's HookedTransformer surface (induct.model_lens, induct.cache_tools,
induct.factored, induct.lens), each name held to its meaning:

* stacked weights equal Model.get() of every layer, setters write them;
* forward return types equal forward()'s outputs and a float64 PyTorch loss;
* run_with_hooks equals the hooks() context manager, bit for bit;
* the residual-stream decompositions sum to the float64 PyTorch model's residual
  stream, its final LayerNorm output and its logits (test_torch_tl.py's reference);
* FactoredMatrix eigenvalues, SVD and norms equal those of the explicit products, the
  composition scores and eigenvalue copying scores the C library's;
* tokenizers on the model, saved with it and loaded back;
* backward hooks and run_with_cache(incl_bwd=True): the gradient at every hook point
  against PyTorch float64 autograd, and what a backward hook writes flows on as the
  same edit of PyTorch's gradients does."""
import os
import tracemalloc

import numpy as np
import pytest
import torch

import induct
from induct import _safetensors
from induct.lens import FactoredMatrix, HookedTransformer, HookedTransformerConfig, utils
from test_hooks import ALL_NAMES, MODELS, close, torch_cache, trained
from test_torch_tl import TinyHookedTransformer

MODELS = dict(MODELS)
# 2 layers, attention only, LayerNorm, shortformer positions (never in the residual stream)
MODELS["short_ln"] = dict(n_layers=2, d_model=16, n_heads=2, d_mlp=0, layer_norm=1,
                          n_ctx=16, d_vocab=11, positional="shortformer")


def model_and_ref(kind):
    if kind in ("mlp_ln", "smeared"):
        return trained(kind)
    c = MODELS[kind]
    m = induct.Model(seed=5, init_std=0.3, **c)
    d = induct.Dataset.rrt(d_vocab=c["d_vocab"], min_block=3, seed=2)
    o = induct.Optimizer(m, lr=3e-2)
    for _ in range(3):
        o.train_step(d, 4, 16)
    ref = TinyHookedTransformer(m.config)
    ref.load_state_dict({k: t.double() for k, t in m.weights(torch=True).items()}, strict=True)
    return m, ref, np.array(d.batch(0, 3, 12, split="eval")[0])


# ---- weights and cfg ------------------------------------------------------------------
STACKED = ["W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_in", "W_out", "b_in",
           "b_out"]


def test_stacked_weights_equal_each_layers_tensor_and_write_back():
    m, _, _ = trained("mlp_ln")
    L = m.config["n_layers"]
    for name in STACKED:
        part = "mlp" if name in ("W_in", "W_out", "b_in", "b_out") else "attn"
        w = getattr(m, name)
        assert w.dtype == np.float32 and w.shape[0] == L
        for l in range(L):
            assert np.array_equal(w[l], m.get(f"blocks.{l}.{part}.{name}")), (name, l)
    assert m.W_Q.shape == (2, 3, 24, 8) and m.W_O.shape == (2, 3, 8, 24)
    assert m.W_in.shape == (2, 24, 40) and m.b_O.shape == (2, 24)
    for name, tl in [("W_E", "embed.W_E"), ("W_U", "unembed.W_U"), ("b_U", "unembed.b_U"),
                     ("W_pos", "pos_embed.W_pos")]:
        assert np.array_equal(getattr(m, name), m.get(tl))
    assert np.array_equal(m.W_E_pos, np.concatenate([m.get("embed.W_E"),
                                                     m.get("pos_embed.W_pos")]))
    # a copy: writing into it changes nothing; assigning the property writes every layer
    w = m.W_Q
    w[1, 2] = 7.0
    assert not np.array_equal(m.get("blocks.1.attn.W_Q")[2], w[1, 2])
    m.W_Q = w
    assert np.array_equal(m.get("blocks.1.attn.W_Q")[2], w[1, 2])
    assert np.array_equal(m.get("blocks.0.attn.W_Q"), w[0])
    m.W_U = torch.zeros(24, 13)  # tensors are accepted too
    assert not m.get("unembed.W_U").any()
    with pytest.raises(ValueError, match="shape"):
        m.W_O = np.zeros((2, 3, 24, 8))  # W_O is [L, H, d_head, d_model]
    with pytest.raises(ValueError, match="shape"):
        m.W_E = np.zeros((24, 13))


def test_weights_that_a_model_lacks():
    s, _, _ = trained("smeared")
    with pytest.raises(AttributeError, match="attention-only"):
        s.W_in
    assert not hasattr(s, "b_out")
    n = induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=8, d_vocab=5, positional="none")
    assert not hasattr(n, "W_pos")


def test_cfg_has_transformerlens_names_and_is_read_only():
    m, _, _ = trained("mlp_ln")
    c = m.cfg
    assert (c.n_layers, c.d_model, c.n_heads, c.d_head, c.d_mlp, c.n_ctx, c.d_vocab) == \
        (2, 24, 3, 8, 40, 16, 13)
    assert c.act_fn == "gelu_new" and c.normalization_type == "LN" and not c.attn_only
    assert c.positional_embedding_type == "standard" and c.d_vocab_out == 13
    assert c.n_params == 2 * (4 * 24 * 8 * 3 + 2 * 24 * 40)  # TransformerLens's count
    assert m.cfg is c
    with pytest.raises(AttributeError, match="read-only"):
        c.n_layers = 3
    s, _, _ = trained("smeared")
    assert s.cfg.attn_only and s.cfg.d_mlp is None and s.cfg.normalization_type is None
    assert s.cfg.smeared_keys
    assert induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=8, d_vocab=5,
                        positional="shortformer").cfg.positional_embedding_type == "shortformer"


def test_hooked_transformer_config_builds_transformerlens_defaults():
    cfg = HookedTransformerConfig(n_layers=2, d_model=32, n_ctx=16, d_head=8, d_vocab=20,
                                  act_fn="gelu_new")
    assert cfg.n_heads == 4 and cfg.d_mlp == 128 and cfg.normalization_type == "LN"
    assert cfg.initializer_range == pytest.approx(0.8 / np.sqrt(32))
    m = HookedTransformer(cfg)
    got = m.config
    assert (got["n_heads"], got["d_mlp"], got["layer_norm"], got["positional"]) == (4, 128, 1, 0)
    assert got["init_std"] == pytest.approx(0.8 / np.sqrt(32))
    a = HookedTransformer(dict(n_layers=1, d_model=16, n_ctx=8, d_head=4, d_vocab=-1,
                               attn_only=True, normalization_type=None),
                          tokenizer=induct.ByteTokenizer(bos=True))
    assert a.config["d_vocab"] == 257 and a.config["d_mlp"] == 0 and a.cfg.attn_only
    with pytest.raises(ValueError, match="act_fn"):
        HookedTransformerConfig(n_layers=1, d_model=16, n_ctx=8, d_head=4)
    for bad in [dict(positional_embedding_type="rotary"), dict(normalization_type="RMS"),
                dict(act_fn="relu"), dict(gated_mlp=True), dict(n_key_value_heads=1),
                dict(attention_dir="bidirectional"), dict(eps=1e-6)]:
        with pytest.raises(NotImplementedError):
            HookedTransformerConfig(n_layers=1, d_model=16, n_ctx=8, d_head=4,
                                    attn_only=True, **bad)
    with pytest.raises(TypeError, match="unknown"):
        HookedTransformerConfig(n_layers=1, d_model=16, n_ctx=8, d_head=4, n_layer=2)


def test_state_dict_round_trip_and_transformerlens_buffers():
    m, ref, toks = trained("mlp_ln")
    sd = m.state_dict()
    assert list(sd) == m.tensor_names()
    fresh = induct.Model(**{k: v for k, v in MODELS["mlp_ln"].items()}, seed=9)
    tl_sd = {k: t.float() for k, t in ref.state_dict().items()}
    tl_sd["blocks.0.attn.IGNORE"] = torch.tensor(-1e5)  # TransformerLens's buffers
    tl_sd["blocks.0.attn.mask"] = torch.ones(16, 16).tril()
    assert fresh.load_state_dict(tl_sd) == ([], [])  # the buffers are not "unexpected"
    assert np.array_equal(fresh(toks), m(toks))
    with pytest.raises(ValueError, match="missing keys"):
        fresh.load_state_dict({"embed.W_E": sd["embed.W_E"]})
    before = fresh.get("embed.W_E")
    bad = dict(sd)
    bad["unembed.b_U"] = np.zeros(3)
    with pytest.raises(ValueError, match="shape"):
        fresh.load_state_dict(bad)
    assert np.array_equal(fresh.get("embed.W_E"), before)  # nothing written


# ---- forward --------------------------------------------------------------------------
def test_forward_return_types():
    m, ref, toks = trained("mlp_ln")
    logits, losses, mean = m.forward(toks)  # today's API is unchanged
    assert np.array_equal(m(toks), logits)
    assert np.array_equal(m.forward(toks, return_type="logits"), logits)
    assert np.array_equal(m.forward(toks, "logits"), logits)
    assert m(toks, return_type="loss") == mean
    assert np.array_equal(m(toks, return_type="loss", loss_per_token=True), losses)
    both = m(toks, return_type="both")
    assert np.array_equal(both.logits, logits) and both.loss == mean
    assert m(toks, return_type=None) is None
    with pytest.raises(ValueError, match="return_type"):
        m(toks, return_type="probs")
    # the loss against PyTorch float64 cross-entropy
    t = torch.from_numpy(toks.astype(np.int64))
    with torch.no_grad():
        rl = ref(t)
    per = torch.nn.functional.cross_entropy(rl[:, :-1].reshape(-1, 13), t[:, 1:].reshape(-1),
                                            reduction="none").reshape(3, 11).numpy()
    close(m(toks, return_type="loss", loss_per_token=True), per, "per-token loss")
    assert m(toks, return_type="loss") == pytest.approx(per.mean(), rel=1e-5)
    assert utils.lm_cross_entropy_loss(logits, toks) == pytest.approx(per.mean(), rel=1e-5)


def test_hooked_transformer_takes_and_gives_tensors():
    m, _, toks = trained("mlp_ln")
    ht = HookedTransformer.from_model(m)
    t = torch.from_numpy(toks.astype(np.int64))
    out = ht(t)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert np.array_equal(out.numpy(), m(toks))
    assert torch.equal(ht.forward(t), out)  # forward() is TransformerLens's
    loss = ht(t, return_type="loss")
    assert isinstance(loss, torch.Tensor) and loss.ndim == 0
    assert loss.item() == m(toks, return_type="loss")
    assert isinstance(ht.W_Q, torch.Tensor) and torch.equal(ht.W_Q, torch.from_numpy(m.W_Q))
    _, cache = ht.run_with_cache(t)
    assert isinstance(cache["pattern", 0], torch.Tensor)
    assert isinstance(cache.decompose_resid(), torch.Tensor)
    seen = []

    def hook(z, hook):
        seen.append(type(z))
        z[:, :, 1] = 0.0  # in place, on the pass's own memory
    hooked = ht.run_with_hooks(t, fwd_hooks=[("blocks.0.attn.hook_z", hook)])
    assert seen == [torch.Tensor]
    with m.ablate([(0, 1)]):
        assert np.array_equal(hooked.numpy(), m(toks))  # zeroed z is zero ablation


# ---- hooks ----------------------------------------------------------------------------
def test_run_with_hooks_equals_the_context_manager():
    m, _, toks = trained("mlp_ln")
    names = []

    def scale_pattern(p, hook):
        names.append((hook.name, hook.layer(), isinstance(hook, str)))
        return p * 0.5 + 0.5 * np.eye(p.shape[-1], dtype=np.float32)

    def zero_head(z, hook):
        z[:, 3:, 2] = 0.0
    fwd = [(lambda n: n.endswith("attn.hook_pattern"), scale_pattern),
           (("z", 1), zero_head)]
    a = m.run_with_hooks(toks, fwd_hooks=fwd)
    assert names == [("blocks.0.attn.hook_pattern", 0, True),
                     ("blocks.1.attn.hook_pattern", 1, True)]
    with m.hooks(fwd):
        b = m(toks)
        c = m.forward(toks)[0]
    assert np.array_equal(a, b) and np.array_equal(a, c)
    plain = m(toks)
    assert not np.allclose(a, plain, atol=1e-3)  # the hooks matter
    # the old calling convention, fn(activation, name) with a str, still works
    with m.hooks([("blocks.1.attn.hook_z", lambda z, name: zero_head(z, name)),
                  ("blocks.0.attn.hook_pattern", scale_pattern),
                  ("blocks.1.attn.hook_pattern", scale_pattern)]):
        assert np.array_equal(m.forward(toks)[0], a)
    # returning the loss with hooks
    hooked_loss = m.run_with_hooks(toks, return_type="loss", fwd_hooks=fwd)
    with m.hooks(fwd):
        assert m(toks, return_type="loss") == hooked_loss == m.forward(toks)[2]
    assert hooked_loss != m(toks, return_type="loss")


def test_hook_layer_ctx_and_bad_returns():
    m, _, toks = trained("mlp_ln")

    def count(x, hook):
        hook.ctx["n"] = hook.ctx.get("n", 0) + 1
    m.run_with_hooks(toks, fwd_hooks=[("hook_embed", count)])
    m.run_with_hooks(toks, fwd_hooks=[("hook_embed", count)])
    assert m.hook_dict["hook_embed"].ctx["n"] == 2
    m.reset_hooks()  # clear_contexts=True by default
    assert m.hook_dict["hook_embed"].ctx == {}
    with pytest.raises(ValueError, match="not inside a block"):
        m.run_with_hooks(toks, fwd_hooks=[("hook_embed", lambda x, hook: hook.layer())])
    with pytest.raises(ValueError, match="shape"):
        m.run_with_hooks(toks, fwd_hooks=[("blocks.0.attn.hook_z",
                                           lambda z, hook: z.transpose(0, 1, 3, 2))])
    with pytest.raises(TypeError, match="not callable"):
        m.run_with_hooks(toks, fwd_hooks=[("hook_embed", "fn")])


def test_add_hook_reset_hooks_and_reset_hooks_end():
    m, _, toks = trained("mlp_ln")
    plain = m(toks)

    def zero(z, hook):
        z[:, :, 0] = 0.0
    m.add_hook("blocks.0.attn.hook_z", zero)
    with m.ablate([(0, 0)]):
        ablated = m(toks)
    assert np.array_equal(m(toks), ablated)
    assert np.array_equal(m.forward(toks)[0], ablated)
    m.reset_hooks()
    assert np.array_equal(m(toks), plain)
    m.run_with_hooks(toks, fwd_hooks=[("blocks.0.attn.hook_z", zero)], reset_hooks_end=False)
    assert np.array_equal(m(toks), ablated)  # still installed
    m.add_perma_hook("blocks.0.attn.hook_z", zero)
    m.reset_hooks()
    assert np.array_equal(m(toks), ablated)  # the permanent one stays
    m.reset_hooks(including_permanent=True)
    assert np.array_equal(m(toks), plain)
    # a hooks() block removes only its own hooks
    with m.hooks([("blocks.0.attn.hook_z", zero)]):
        m.add_hook("blocks.1.attn.hook_z", zero)
    with m.ablate([(1, 0)]):
        only_l1 = m(toks)
    assert np.array_equal(m(toks), only_l1)
    m.reset_hooks()


def test_use_attn_result_and_names_filter():
    m, _, toks = trained("mlp_ln")
    _, cache = m.run_with_cache(toks)
    assert "blocks.0.attn.hook_result" not in cache
    m.set_use_attn_result(True)
    _, cache = m.run_with_cache(toks)
    assert "blocks.0.attn.hook_result" in cache
    m.cfg.use_attn_result = False
    _, cache = m.run_with_cache(toks, names_filter="blocks.1.attn.hook_pattern")
    assert list(cache) == ["blocks.1.attn.hook_pattern"]
    _, cache = m.run_with_cache(toks, names_filter=lambda n: n.endswith("hook_q"))
    assert list(cache) == ["blocks.0.attn.hook_q", "blocks.1.attn.hook_q"]
    assert cache["q", -1] is cache["blocks.1.attn.hook_q"]
    loss, _ = m.run_with_cache(toks, return_type="loss", names_filter=[])
    assert loss == pytest.approx(m(toks, return_type="loss"), rel=1e-6)
    with pytest.raises(ValueError, match="one sequence"):
        m.run_with_cache(toks, remove_batch_dim=True)
    _, one = m.run_with_cache(toks[:1], remove_batch_dim=True)
    assert one["pattern", 0].shape == (3, 12, 12) and not one.has_batch_dim


def _torch_grads_at(ref, toks, points, grad_edits=None):
    """PyTorch float64 autograd: the loss's gradient at each of `points` (retained), with
    `grad_edits` {name: fn(grad) -> grad} applied to the gradient there during the
    backward pass (as a TransformerLens backward hook's return), and the parameters'
    gradients."""
    kept = {}

    def hook(name):
        def fn(x):
            if grad_edits and name in grad_edits:
                x = x + 0  # a node of its own: the edit applies to this point only
                x.register_hook(grad_edits[name])
            x.retain_grad()
            kept[name] = x
            return x
        return fn
    ref.zero_grad()
    t = torch.from_numpy(toks.astype(np.int64))
    logits = ref(t, {n: hook(n) for n in points})
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                             t[:, 1:].reshape(-1))
    loss.backward()
    return ({n: kept[n].grad.numpy() for n in points},
            {n: p.grad.numpy().copy() for n, p in ref.named_parameters()}, loss.item())


def _causal(name, g):
    """The part both define: above the diagonal of the pattern TransformerLens's gradient
    is dz.v (its z reads those entries), libinduct's 0 (the pass ignores them)."""
    if name.endswith(("hook_pattern", "hook_attn_scores")):
        T = g.shape[-1]
        return np.where(np.tril(np.ones((T, T), dtype=bool)), g, 0.0)
    return g


@pytest.mark.parametrize("kind", ["mlp_ln", "smeared", "short_ln"])
def test_backward_hooks_give_the_gradient_at_hook_points(kind):
    """TransformerLens's bwd_hooks: fn(grad, hook) with d(mean loss)/d(activation) at every
    point the reference passes, here against PyTorch float64 autograd (the pattern below
    and on the diagonal; above it libinduct's gradient is exactly 0)."""
    m, ref, toks = model_and_ref(kind)
    points = [n for n in m.hook_points() if n in ALL_NAMES(ref)]
    assert len(points) >= 10
    got = {}
    calls = []

    def keep(g, hook):
        assert isinstance(hook, induct.HookPoint) and g.dtype == np.float32
        got[hook.name] = np.array(g)
        calls.append(hook.name)
    with m.hooks(bwd_hooks=[(lambda n: n in points, keep)]):
        loss = m.backward(toks)
    assert calls == points[::-1]  # the reverse of the forward pass's order
    want, _, ref_loss = _torch_grads_at(ref, toks, points)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    for n in points:
        if n.endswith(("hook_pattern", "hook_attn_scores")):
            T = got[n].shape[-1]
            assert np.all(got[n][..., ~np.tril(np.ones((T, T), dtype=bool))] == 0), n
        close(got[n], _causal(n, want[n]), n + " gradient")


def test_written_backward_hooks_match_pytorch():
    """What a backward hook returns (or writes in place) is the gradient that flows on:
    head 1's z gradient zeroed, the layer-1 pattern's doubled, the layer-0 ln2 input's
    halved (in place), against PyTorch with the same edits to the gradients; every
    parameter gradient."""
    m, ref, toks = trained("mlp_ln")
    H = m.config["n_heads"]
    head1 = np.zeros((1, 1, H, 1), dtype=np.float32)
    head1[0, 0, 1, 0] = 1.0

    def halve(g, hook):
        g *= np.float32(0.5)
    bwd = [("blocks.0.attn.hook_z", lambda g, hook: g * (1 - head1)),
           ("blocks.1.attn.hook_pattern", lambda g, hook: 2 * g),
           ("blocks.0.ln2.hook_normalized", halve)]
    with m.hooks(bwd_hooks=bwd):
        m.backward(toks)
    grads = {n: m.get(n, grad=True) for n in m.tensor_names()}
    m.backward(toks)
    plain = {n: m.get(n, grad=True) for n in m.tensor_names()}
    edits = {"blocks.0.attn.hook_z": lambda g: g * (1 - torch.from_numpy(head1).double()),
             "blocks.1.attn.hook_pattern": lambda g: 2 * g,
             "blocks.0.ln2.hook_normalized": lambda g: 0.5 * g}
    _, ref_grads, _ = _torch_grads_at(ref, toks, list(edits), edits)
    assert set(ref_grads) == set(grads)
    for n in grads:
        r = ref_grads[n].reshape(grads[n].shape)
        if np.abs(r).max() < 1e-12:  # b_K: exactly 0 (the softmax ignores a shift), noise
            assert np.all(grads[n] == 0), n
        else:
            close(grads[n], r, n)
    # the edits matter: layer 0's query weights and ln1 gain train differently
    assert not np.allclose(grads["blocks.0.attn.W_Q"], plain["blocks.0.attn.W_Q"], atol=1e-6)
    # head 1's z is all that its query, key and value weights reach: they get exactly 0
    for w in ("W_Q", "W_K", "W_V"):
        g, p = grads[f"blocks.0.attn.{w}"][1], plain[f"blocks.0.attn.{w}"][1]
        assert np.all(g == 0) and np.any(p != 0), w


@pytest.mark.parametrize("kind", ["smeared", "mlp_ln"])
def test_run_with_cache_incl_bwd_caches_gradients(kind):
    """run_with_cache(incl_bwd=True): the mean loss, every activation of the plain cache
    and its gradient under name + "_grad" (those of backward hooks, and PyTorch's), the
    parameter gradients of backward()."""
    m, ref, toks = trained(kind)
    loss, cache = m.run_with_cache(toks, return_type="loss", incl_bwd=True)
    assert "blocks.0.attn.hook_z_grad" in cache
    assert loss == pytest.approx(m(toks, return_type="loss"), rel=1e-6)
    _, plain = m.run_with_cache(toks)
    assert set(cache) == set(plain) | {n + "_grad" for n in plain}
    for n in plain:
        close(cache[n], plain[n], n)
        assert cache[n + "_grad"].shape == plain[n].shape
    grads = {n: m.get(n, grad=True) for n in m.tensor_names()}
    m.backward(toks)
    for n in grads:
        close(grads[n], m.get(n, grad=True), n)
    got = {}
    with m.hooks(bwd_hooks=[(lambda n: True, lambda g, h: got.__setitem__(h.name, g.copy()))]):
        m.backward(toks)
    points = [n for n in plain if n in ALL_NAMES(ref)]
    want, _, _ = _torch_grads_at(ref, toks, points)
    for n in points:
        assert np.array_equal(cache[n + "_grad"], got[n]), n
        close(cache[n + "_grad"], _causal(n, want[n]), n + "_grad")
    # a backward hook in force runs after the cache copied the gradient that reached it
    with m.hooks(bwd_hooks=[("blocks.0.attn.hook_z", lambda g, h: 0 * g)]):
        _, c2 = m.run_with_cache(toks, return_type="loss", incl_bwd=True)
    assert np.array_equal(c2["blocks.0.attn.hook_z_grad"], cache["blocks.0.attn.hook_z_grad"])
    assert not np.array_equal(c2["blocks.0.hook_resid_pre_grad"],
                              cache["blocks.0.hook_resid_pre_grad"])


def test_hooked_transformer_loss_backward_runs_the_backward_hooks():
    """TransformerLens's pattern: add_hook(name, fn, "bwd") (or run_with_hooks with
    bwd_hooks), then loss.backward() on model(tokens, return_type="loss"); the hooks get
    torch tensors with the gradients run_with_cache(incl_bwd=True) gives; a metric of the
    logits is differentiated too."""
    m, _, toks = trained("mlp_ln")
    ht = HookedTransformer.from_model(m)
    t = torch.from_numpy(toks.astype(np.int64))
    _, cache = ht.run_with_cache(t, return_type="loss", incl_bwd=True,
                                 names_filter=lambda n: n.endswith("hook_z"))
    assert isinstance(cache["blocks.1.attn.hook_z_grad"], torch.Tensor)
    got = {}

    def keep(g, hook):
        assert isinstance(g, torch.Tensor)
        got[hook.name] = g.clone()
    ht.add_hook(lambda n: n.endswith("hook_z"), keep, "bwd")
    loss = ht(t, return_type="loss")
    assert loss.requires_grad and not got  # nothing runs before backward()
    loss.backward()
    assert set(got) == {"blocks.0.attn.hook_z", "blocks.1.attn.hook_z"}
    for n, g in got.items():
        assert torch.equal(g, cache[n + "_grad"]), n
    ht.reset_hooks(direction="bwd")
    got.clear()
    assert not ht(t, return_type="loss").requires_grad  # no backward hook: a plain tensor
    # run_with_hooks: the hooks in force when the loss was computed run in backward()
    loss = ht.run_with_hooks(t, return_type="loss", bwd_hooks=[("blocks.1.attn.hook_z", keep)])
    loss.backward()
    assert set(got) == {"blocks.1.attn.hook_z"}
    # a metric of the logits: its gradient reaches the hooks and the weights, as
    # model.backward(tokens, d_logits=...) gives it (checked against finite differences
    # in C, check_grad_hooks, and against the exact patches in test_patching.py)
    got.clear()
    with ht.hooks(bwd_hooks=[("blocks.1.attn.hook_z", keep)]):
        logits = ht(t)
    (logits[:, -2, 3] - logits[:, -2, 5]).mean().backward()
    d = np.zeros(tuple(logits.shape), dtype=np.float32)
    d[:, -2, 3], d[:, -2, 5] = 1 / len(toks), -1 / len(toks)
    want = {}
    with m.hooks(bwd_hooks=[("blocks.1.attn.hook_z",
                             lambda g, h: want.__setitem__(h.name, g.copy()))]):
        m.backward(toks, d_logits=d)
    assert np.array_equal(got["blocks.1.attn.hook_z"].numpy(), want["blocks.1.attn.hook_z"])
    # loss and logits in one graph: one backward pass from the combined d(logits), equal
    # to the mean loss's own backward pass plus the metric's (linearity)
    wq_metric = m.get("blocks.0.attn.W_Q", grad=True)
    m.backward(toks)
    wq_loss = m.get("blocks.0.attn.W_Q", grad=True)
    with ht.hooks(bwd_hooks=[("blocks.1.attn.hook_z", keep)]):
        out = ht(t, return_type="both")
    (out.loss + (out.logits[:, -2, 3] - out.logits[:, -2, 5]).mean()).backward()
    both = np.asarray(ht.get("blocks.0.attn.W_Q", grad=True))
    assert np.abs(both - (wq_metric + wq_loss)).max() <= 1e-5 * np.abs(both).max()


def test_backward_hook_misuse_is_clear():
    m, _, toks = trained("mlp_ln")
    with pytest.raises(ValueError, match="return_type='loss'"):
        m.run_with_cache(toks, incl_bwd=True)
    with pytest.warns(UserWarning, match="removed at the end"):
        m.run_with_hooks(toks, bwd_hooks=[("hook_embed", print)])
    opt = induct.Optimizer(m, lr=1e-3)
    with m.hooks(bwd_hooks=[("hook_embed", print)]):
        with pytest.raises(NotImplementedError, match="training step"):
            opt.train_step(toks)
    with pytest.raises(ValueError, match="dir must be"):
        m.add_hook("hook_embed", print, dir="sideways")
    m.add_hook("hook_embed", print, dir="bwd")
    m.reset_hooks(direction="fwd")
    assert m._bwd_hooks and not m._fwd_hooks
    m.reset_hooks()
    assert not m._bwd_hooks
    assert np.array_equal(m(toks), m.forward(toks)[0])  # nothing left installed


# ---- tokenizers -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def spm_file(tmp_path_factory):
    import sentencepiece as spm  # python3-sentencepiece: a test dependency, no skip
    d = tmp_path_factory.mktemp("spm")
    corpus = d / "corpus.txt"
    corpus.write_text("the cat sat on the mat. the dog sat on the log.\n" * 50)
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(d / "t"),
                                   vocab_size=40, model_type="bpe", bos_id=-1, eos_id=-1,
                                   add_dummy_prefix=False, num_threads=1, minloglevel=2)
    return d / "t.model"


def test_byte_tokenizer_on_the_model(tmp_path):
    m = induct.Model(n_layers=1, d_model=16, n_heads=2, n_ctx=32, d_vocab=257)
    with pytest.raises(ValueError, match="no tokenizer"):
        m.to_tokens("hi")
    m.set_tokenizer(induct.ByteTokenizer(bos=True))
    toks = m.to_tokens("hello")
    assert toks.dtype == np.int32 and toks.tolist() == [[256, 104, 101, 108, 108, 111]]
    assert m.to_tokens("hello", prepend_bos=False).tolist() == [[104, 101, 108, 108, 111]]
    m.cfg.default_prepend_bos = False
    assert m.to_tokens("hi").tolist() == [[104, 105]]
    m.cfg.default_prepend_bos = True
    assert m.to_tokens(["ab", "cd"]).tolist() == [[256, 97, 98], [256, 99, 100]]
    with pytest.raises(ValueError, match="pad"):
        m.to_tokens(["a", "abc"])
    assert m.to_tokens("x" * 100).shape == (1, 32)  # truncated to n_ctx
    assert m.to_tokens("x" * 100, truncate=False).shape == (1, 101)
    assert m.to_str_tokens("héllo") == ["<bos>", "h", "\\xc3", "\\xa9", "l", "l", "o"]
    assert m.to_str_tokens(toks) == ["<bos>", "h", "e", "l", "l", "o"]
    assert m.to_str_tokens(["ab", "c"]) == [["<bos>", "a", "b"], ["<bos>", "c"]]
    assert m.to_string(toks[0]) == "hello" and m.to_string(toks) == ["hello"]
    assert m.to_single_token("a") == 97 and m.to_single_str_token(97) == "a"
    with pytest.raises(ValueError, match="not a single token"):
        m.to_single_token("ab")
    assert m.tokenizer.bos_token_id == 256
    # model(text) tokenizes with the model's tokenizer
    assert np.array_equal(m("hello"), m(toks))
    assert m("hello", return_type="loss") == m.forward(toks)[2]
    with pytest.raises(ValueError, match="do not fit"):
        induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=8, d_vocab=256).set_tokenizer(
            induct.ByteTokenizer(bos=True))
    # HookedTransformer: int64 tensors, as TransformerLens
    ht = HookedTransformer.from_model(m)
    assert ht.to_tokens("hi").dtype == torch.int64 and ht.to_string(ht.to_tokens("hi")) == ["hi"]


def test_word_piece_tokenizer_on_the_model(spm_file):
    tok = induct.SentencePieceTokenizer(spm_file, bos_id=40)
    m = induct.Model(n_layers=1, d_model=16, n_heads=2, n_ctx=32, d_vocab=tok.d_vocab)
    m.set_tokenizer(tok)
    ids = m.to_tokens("the cat sat")
    assert ids[0, 0] == 40 and m.to_string(ids[0]) == "the cat sat"
    assert "".join(m.to_str_tokens("the cat sat")[1:]) == "the cat sat"
    assert m.to_str_tokens("the cat sat", prepend_bos=False) == tok.to_str_tokens(
        "the cat sat", prepend_bos=False)
    piece = m.to_str_tokens("the", prepend_bos=False)
    if len(piece) == 1:
        assert m.to_single_str_token(m.to_single_token("the")) == piece[0]


@pytest.mark.parametrize("kind", ["byte", "spm"])
def test_tokenizer_is_saved_with_the_model(tmp_path, spm_file, kind):
    tok = induct.ByteTokenizer(bos=True) if kind == "byte" else \
        induct.SentencePieceTokenizer(spm_file, bos_id=40)
    m = induct.Model(n_layers=1, d_model=16, n_heads=2, n_ctx=32, d_vocab=257, seed=4)
    m.set_tokenizer(tok)
    path = tmp_path / "m.safetensors"
    m.save(path)
    assert sorted(os.listdir(tmp_path)) == ["m.safetensors"]  # no temporary files left
    back = induct.Model.load(path)
    assert type(back.tokenizer) is type(tok) and back.tokenizer.bos_id == tok.bos_id
    text = "the cat sat on the mat"
    assert np.array_equal(back.to_tokens(text), m.to_tokens(text))
    assert back.to_str_tokens(text) == m.to_str_tokens(text)
    for name in m.tensor_names():
        assert np.array_equal(back.get(name), m.get(name))
    # the library's own metadata is intact, and a loader that ignores the key reads it
    meta = _safetensors.read_metadata(path)
    assert meta["format"] == "libinduct" and "tokenizer" in meta
    assert induct.Model.load(path, **{k: v for k, v in m.config.items()
                                      if k not in ("reserved0",)}).tokenizer is not None
    # a model without a tokenizer is saved by the library alone, loads with None
    plain = tmp_path / "plain.safetensors"
    induct.Model(n_layers=1, d_model=16, n_heads=2, n_ctx=32, d_vocab=257).save(plain)
    assert induct.Model.load(plain).tokenizer is None
    assert "tokenizer" not in _safetensors.read_metadata(plain)
    # a HookedTransformer keeps its class and tokenizer
    assert isinstance(HookedTransformer.load(path).to_tokens(text), torch.Tensor)


def test_malformed_tokenizer_metadata_is_a_format_error(tmp_path):
    m = induct.Model(n_layers=1, d_model=16, n_heads=2, n_ctx=32, d_vocab=257)
    m.save(tmp_path / "a.safetensors")
    _safetensors.add_metadata(tmp_path / "a.safetensors", tmp_path / "b.safetensors",
                                     {"tokenizer": '{"type": "wordpiece"}'})
    with pytest.raises(induct.FormatError, match="tokenizer"):
        induct.Model.load(tmp_path / "b.safetensors")


# ---- cache tools against the float64 reference -----------------------------------------
def _ref(ref, toks):
    logits, cache = torch_cache(ref, toks)
    return logits, {k: v.numpy() for k, v in cache.items()}


@pytest.mark.parametrize("kind", ["mlp_ln", "smeared", "short_ln"])
def test_decompose_resid_sums_to_the_residual_stream(kind):
    m, ref, toks = model_and_ref(kind)
    _, rc = _ref(ref, toks)
    c = m.config
    L = c["n_layers"]
    _, cache = m.run_with_cache(toks)
    stack, labels = cache.decompose_resid(return_labels=True)
    want = ["embed"] + (["pos_embed"] if c["positional"] == 0 else [])
    for l in range(L):
        want += [f"{l}_attn_out"] + ([f"{l}_mlp_out"] if c["d_mlp"] else [])
    assert labels == want
    # each term against the reference's own activations
    terms = {"embed": rc["hook_embed"], "pos_embed": rc.get("hook_pos_embed")}
    for l in range(L):
        terms[f"{l}_attn_out"] = rc[f"blocks.{l}.hook_attn_out"]
        if c["d_mlp"]:
            terms[f"{l}_mlp_out"] = rc[f"blocks.{l}.hook_resid_post"] - \
                rc[f"blocks.{l}.hook_resid_mid"]
    for s, lab in zip(stack, labels):
        close(s, terms[lab], lab)
    final = rc[f"blocks.{L - 1}.hook_resid_post"]
    close(stack.sum(0), final, "sum of the terms")
    # into layer 1 (and its MLP input)
    s1 = cache.decompose_resid(layer=1)
    close(s1.sum(0), rc["blocks.1.hook_resid_pre" if L > 1 else "blocks.0.hook_resid_post"],
          "into layer 1")
    if c["d_mlp"]:
        s1m = cache.decompose_resid(layer=1, mlp_input=True)
        close(s1m.sum(0), rc["blocks.1.hook_resid_mid"], "into layer 1's MLP")
        assert cache.decompose_resid(mode="mlp", return_labels=True)[1] == \
            ["embed", "pos_embed", "0_mlp_out", "1_mlp_out"]
    # accumulated_resid: the stream itself at each point
    acc, lab = cache.accumulated_resid(return_labels=True, incl_mid=bool(c["d_mlp"]))
    for a, name in zip(acc, lab):
        if name == "final_post":
            close(a, final, name)
        else:
            l, kind_ = name.split("_")
            close(a, rc[f"blocks.{l}.hook_resid_{kind_}"], name)
    assert acc.shape[0] == len(lab) == (2 * L + 1 if c["d_mlp"] else L + 1)


@pytest.mark.parametrize("kind", ["mlp_ln", "smeared", "short_ln"])
def test_head_results_and_logit_attribution_sum_to_the_logits(kind):
    m, ref, toks = model_and_ref(kind)
    ref_logits, rc = _ref(ref, toks)
    c = m.config
    L, H = c["n_layers"], c["n_heads"]
    _, cache = m.run_with_cache(toks)
    heads, labels = cache.stack_head_results(return_labels=True, incl_remainder=True)
    assert labels == [f"L{l}H{h}" for l in range(L) for h in range(H)] + ["remainder"]
    for l in range(L):  # computed from z @ W_O: the cache did not hold hook_result
        for h in range(H):
            close(heads[l * H + h], rc[f"blocks.{l}.attn.hook_result"][:, :, h], labels[l * H + h])
    final = rc[f"blocks.{L - 1}.hook_resid_post"]
    close(heads.sum(0), final, "heads + remainder")
    # the final LayerNorm: the terms, centred and scaled, add up to ln_final's
    # normalized stream
    stack = cache.decompose_resid()
    scaled = cache.apply_ln_to_stack(stack, layer=-1)
    if c["layer_norm"]:
        close(scaled.sum(0), rc["ln_final.hook_normalized"], "Σ apply_ln_to_stack")
        x = final - final.mean(-1, keepdims=True)
        close(cache["scale"], np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5), "hook_scale")
        close(cache["blocks.1.ln1.hook_scale"], np.sqrt(
            ((rc["blocks.1.hook_resid_pre"] - rc["blocks.1.hook_resid_pre"].mean(
                -1, keepdims=True)) ** 2).mean(-1, keepdims=True) + 1e-5), "ln1 scale")
    else:
        assert scaled is stack or np.array_equal(scaled, stack)
    # logit attribution: Σ over the terms = the logit minus the (folded) unembedding bias
    W_U = m.get("unembed.W_U").astype(np.float64)
    bias = m.get("unembed.b_U").astype(np.float64)
    if c["layer_norm"]:
        bias = bias + m.get("ln_final.b") @ W_U
    target = toks[:, 1:]
    attrs = cache.logit_attrs(stack[:, :, :-1], target, pos_slice=(0, -1))
    assert attrs.shape == (stack.shape[0], 3, 11)
    want = np.take_along_axis(ref_logits[:, :-1], target[..., None], -1)[..., 0] - bias[target]
    close(attrs.sum(0), want, "Σ logit_attrs")
    # a logit difference, at the last position, per head
    wrong = (toks[:, -1] + 1) % c["d_vocab"]
    hs = cache.stack_head_results(pos_slice=-1, incl_remainder=True)
    diff = cache.logit_attrs(hs, toks[:, -1], incorrect_tokens=wrong, pos_slice=-1)
    ref_diff = ref_logits[np.arange(3), -1, toks[:, -1]] - ref_logits[np.arange(3), -1, wrong]
    close(diff.sum(0), ref_diff - (bias[toks[:, -1]] - bias[wrong]), "Σ logit differences")
    # the logit lens of the final stream is the model's logits; of an earlier stream, that
    # stream through ln_final with its own statistics
    acc = cache.accumulated_resid(apply_ln=True)
    close(acc[-1] @ m.W_U + m.b_U, ref_logits, "logit lens of the final stream")
    if c["layer_norm"]:
        with torch.no_grad():
            lens0 = ref.ln_final(torch.from_numpy(rc["blocks.0.hook_resid_pre"])).numpy()
        close(acc[0], lens0, "logit lens of resid_pre 0")


def test_cache_tool_arguments():
    m, ref, toks = trained("mlp_ln")
    _, rc = _ref(ref, toks)
    _, cache = m.run_with_cache(toks)
    full = cache.decompose_resid()
    assert np.array_equal(cache.decompose_resid(pos_slice=-1), full[:, :, -1])
    assert np.array_equal(cache.decompose_resid(pos_slice=(2, 5)), full[:, :, 2:5])
    assert np.array_equal(cache.decompose_resid(pos_slice=[0, 3]), full[:, :, [0, 3]])
    assert np.array_equal(cache.decompose_resid(incl_embeds=False), full[2:])
    # apply_ln with a pos_slice and a batch_slice scales by the matching positions
    a = cache.apply_ln_to_stack(full[:, :, 4], pos_slice=4)
    b = cache.apply_ln_to_stack(full)[:, :, 4]
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    c_ = cache.apply_ln_to_stack(full, batch_slice=[0, 2])
    np.testing.assert_allclose(c_, cache.apply_ln_to_stack(full)[:, [0, 2]], rtol=1e-6,
                               atol=1e-6)
    # into layer 1's attention: ln1 of layer 1
    s1 = cache.decompose_resid(layer=1, apply_ln=True)
    close(s1.sum(0), rc["blocks.1.ln1.hook_normalized"], "ln1 of layer 1")
    s1m = cache.decompose_resid(layer=1, mlp_input=True, apply_ln=True)
    close(s1m.sum(0), rc["blocks.1.ln2.hook_normalized"], "ln2 of layer 1")
    # stack_activation
    st = cache.stack_activation("pattern")
    assert st.shape == (2, 3, 3, 12, 12) and np.array_equal(st[1], cache["pattern", 1])
    assert cache.stack_activation("resid_pre", layer=1).shape == (1, 3, 12, 24)
    # a batch of one with the batch dimension removed gives the same numbers
    _, one = m.run_with_cache(toks[:1], remove_batch_dim=True)
    np.testing.assert_allclose(one.decompose_resid(apply_ln=True),
                               cache.decompose_resid(apply_ln=True)[:, 0], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(one.logit_attrs(one.decompose_resid(pos_slice=-1), 5,
                                               pos_slice=-1, has_batch_dim=False),
                               cache.logit_attrs(cache.decompose_resid(pos_slice=-1),
                                                 np.full(3, 5), pos_slice=-1)[:, 0],
                               rtol=1e-5, atol=1e-6)
    sub = cache.apply_slice_to_batch_dim(1)
    assert not sub.has_batch_dim and np.array_equal(sub["pattern", 0], cache["pattern", 0][1])
    with pytest.raises(ValueError, match="mode"):
        cache.decompose_resid(mode="heads")
    with pytest.raises(ValueError, match="layer"):
        cache.accumulated_resid(layer=5)
    with pytest.raises(KeyError, match="not in the cache"):
        m.run_with_cache(toks, names_filter=["hook_embed"])[1].decompose_resid()
    np.testing.assert_allclose(m.accumulated_bias(2), m.b_O.sum(0) + m.b_out.sum(0),
                               rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(m.accumulated_bias(1, mlp_input=True),
                               m.b_O[0] + m.b_out[0] + m.b_O[1], rtol=1e-6, atol=1e-7)


def test_tokens_to_residual_directions():
    m, _, _ = trained("mlp_ln")
    d = m.tokens_to_residual_directions(np.array([[1, 2], [3, 4]]))
    assert d.shape == (2, 2, 24)
    np.testing.assert_array_equal(d[1, 0], m.get("unembed.W_U")[:, 3] * m.get("ln_final.w"))
    s, _, _ = trained("smeared")
    assert np.array_equal(s.tokens_to_residual_directions(4), s.get("unembed.W_U")[:, 4])
    with pytest.raises(IndexError):
        s.tokens_to_residual_directions(99)


# ---- factored matrices ----------------------------------------------------------------
def test_factored_ov_eigenvalues_equal_the_explicit_products():
    m, _, _ = trained("mlp_ln")
    L, H = 2, 3
    OV, QK = m.OV, m.QK
    assert OV.shape == (L, H, 24, 24) and QK.shape == (L, H, 24, 24) and OV.mdim == 8
    for l in range(L):
        for h in range(H):
            wv, wo = m.W_V[l, h].astype(np.float64), m.W_O[l, h].astype(np.float64)
            explicit = wv @ wo
            fm = OV[l, h]
            np.testing.assert_allclose(fm.AB, explicit, rtol=1e-5, atol=1e-6)
            ev = np.linalg.eigvals(explicit)
            ev = np.sort_complex(ev[np.argsort(-np.abs(ev))[:8]])  # 24 - 8 are ~0
            got = np.sort_complex(fm.eigenvalues)
            np.testing.assert_allclose(got, ev, atol=1e-4 * np.abs(ev).max())
            assert fm.norm() == pytest.approx(np.linalg.norm(explicit), rel=1e-5)
            s = np.linalg.svd(explicit, compute_uv=False)[:8]
            np.testing.assert_allclose(fm.S, s, rtol=1e-4, atol=1e-5 * s[0])
            U, S, V = fm.svd()
            np.testing.assert_allclose(U @ np.diag(S) @ V.T, explicit, atol=1e-5)
            np.testing.assert_allclose(QK[l, h].AB, m.W_Q[l, h].astype(np.float64)
                                       @ m.W_K[l, h].T, rtol=1e-5, atol=1e-6)
    # the full OV circuit W_E OV W_U stays factored; its eigenvalues give the library's
    # eigenvalue copying score (Framework paper), computed in C with LAPACK
    eig = m.copying_eigen()
    for l in range(L):
        for h in range(H):
            full = m.W_E @ OV[l, h] @ m.W_U
            assert isinstance(full, FactoredMatrix) and full.shape == (13, 13)
            ev = full.eigenvalues
            explicit = m.W_E.astype(np.float64) @ m.W_V[l, h] @ m.W_O[l, h] @ m.W_U
            ref_ev = np.linalg.eigvals(explicit)
            np.testing.assert_allclose(np.sort(np.abs(ev)), np.sort(np.abs(ref_ev))[-8:],
                                       rtol=1e-4, atol=1e-4 * np.abs(ref_ev).max())
            score = ev.real.sum() / np.abs(ev).sum()
            assert score == pytest.approx(eig[l, h], abs=1e-4)
    # transposes, products and slicing keep the meaning
    fm = OV[1, 2]
    np.testing.assert_allclose(fm.T.AB, fm.AB.T, rtol=1e-6)
    np.testing.assert_allclose((fm @ QK[1, 0]).AB, fm.AB @ QK[1, 0].AB, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose((2 * fm).AB, 2 * fm.AB, rtol=1e-6)
    np.testing.assert_allclose(OV[1][2].AB, fm.AB)
    np.testing.assert_allclose(OV[1, 2, 3].AB, fm.AB[3:4], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(OV[1, 2, :, 5].AB, fm.AB[:, 5:6], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(fm.get_corner(3), fm.AB[:3, :3], rtol=1e-6)
    np.testing.assert_allclose(fm.make_even().AB, fm.AB, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fm.collapse_r() @ fm.V.T, fm.AB, atol=1e-5)
    v = np.arange(24, dtype=np.float64)
    np.testing.assert_allclose(fm @ v, fm.AB @ v, rtol=1e-5)
    np.testing.assert_allclose(v @ fm, v @ fm.AB, rtol=1e-5)


def test_composition_scores_equal_the_librarys():
    m, _, _ = trained("mlp_ln")
    for mode in "QKV":
        tl = m.all_composition_scores(mode)
        c = m.composition(mode.lower())
        assert tl.shape == (2, 3, 2, 3)
        np.testing.assert_allclose(tl, c, rtol=1e-4, atol=1e-6)
        assert not tl[1, :, 0].any() and not tl[0, :, 0].any() and tl[0, :, 1].all()
    with pytest.raises(ValueError, match="mode"):
        m.all_composition_scores("k")


def test_a_large_vocabulary_circuit_is_never_formed():
    """W_E OV W_U of a 20,000-token model is 1.6 GB as float32: the factored eigenvalues,
    singular values and norm must not form it."""
    V = 20000
    m = induct.Model(n_layers=1, d_model=16, n_heads=2, n_ctx=8, d_vocab=V, seed=1)
    W_E, W_U, OV = m.W_E, m.W_U, m.OV[0, 1]
    tracemalloc.start()
    try:
        full = W_E @ OV @ W_U
        ev, s, n = full.eigenvalues, full.S, full.norm()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert full.shape == (V, V) and ev.shape == (8,) and s.shape == (8,)
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    # the same numbers through the d_model x d_model route (exact algebra, float64)
    small = (W_U.astype(np.float64) @ W_E) @ (m.W_V[0, 1].astype(np.float64) @ m.W_O[0, 1])
    np.testing.assert_allclose(np.sort(np.abs(ev)), np.sort(np.abs(np.linalg.eigvals(small)))
                               [-8:], rtol=1e-3)
    gram = (W_E.T.astype(np.float64) @ W_E)
    A = m.W_V[0, 1].astype(np.float64) @ m.W_O[0, 1]
    fro = np.sqrt(np.trace(A.T @ gram @ A @ (W_U.astype(np.float64) @ W_U.T)))
    assert n == pytest.approx(fro, rel=1e-4)
    assert s[0] ** 2 <= n ** 2 * (1 + 1e-5) and np.sum(s.astype(np.float64) ** 2) == \
        pytest.approx(fro ** 2, rel=1e-3)


def test_bad_input_gets_clear_errors(tmp_path):
    m = induct.Model(n_layers=1, d_model=16, n_heads=2, n_ctx=8, d_vocab=257)
    m.set_tokenizer(induct.ByteTokenizer(bos=True))
    with pytest.raises(ValueError, match="d_head must be positive"):
        HookedTransformerConfig(n_layers=1, d_model=16, n_ctx=8, d_head=0, attn_only=True)
    with pytest.raises(TypeError, match="n_layers must be an int"):
        HookedTransformerConfig(n_layers=1.5, d_model=16, n_ctx=8, d_head=4, attn_only=True)
    with pytest.raises(induct.InvalidArgument, match="seq_len"):
        m("a", prepend_bos=False)  # one position: the library needs two
    _, cache = m.run_with_cache(m.to_tokens("hello"))
    with pytest.raises(ValueError, match="d_model=16"):
        cache.apply_ln_to_stack(np.zeros((3, 1, 6, 5)))
    with pytest.raises(IndexError, match=r"\[0, 257\)"):
        cache.logit_attrs(np.zeros((3, 1, 6, 16)), 999)
    with pytest.raises(ValueError, match="not a single token"):
        cache.logit_attrs(np.zeros((3, 1, 6, 16)), "ab")
    with pytest.raises(ValueError, match="same shape"):
        cache.logit_attrs(np.zeros((3, 1, 6, 16)), np.array([1]), incorrect_tokens=2)
    with pytest.raises(TypeError, match="integer"):
        m(np.array([[1.5, 2.0]]))
    with pytest.raises(TypeError, match="numbers"):
        m.load_state_dict({"embed.W_E": "x"}, strict=False)
    with pytest.raises(ValueError, match="inner dimension"):
        FactoredMatrix(np.zeros((3, 4)), np.zeros((5, 3)))
    with pytest.raises(ValueError, match="square"):
        FactoredMatrix(np.zeros((3, 4)), np.zeros((4, 5))).eigenvalues
    with pytest.raises(induct.IOFailure):
        m.save(tmp_path / "missing-dir" / "m.safetensors")
