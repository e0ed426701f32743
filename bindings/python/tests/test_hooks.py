"""Hook points against the independent PyTorch float64 model of test_torch_tl.py, which
passes the same TransformerLens hook names: every cached activation, and interventions
(activation patching, score and pattern writes) done the same way in both."""
import numpy as np
import pytest
import torch

import induct
from test_torch_tl import TinyHookedTransformer

MODELS = {
    # 2 layers, MLP, LayerNorm, standard positions
    "mlp_ln": dict(n_layers=2, d_model=24, n_heads=3, d_mlp=40, layer_norm=1, n_ctx=16,
                   d_vocab=13, positional="standard"),
    # 1 layer, attention only, smeared keys
    "smeared": dict(n_layers=1, d_model=16, n_heads=2, d_mlp=0, layer_norm=0, n_ctx=16,
                    d_vocab=11, positional="standard", smeared_keys=1,
                    smear_alpha_init=0.4),
}


def trained(kind):
    """A model a few steps into training (biases, gains and alphas off their init) and
    the PyTorch reference loaded with its weights."""
    c = MODELS[kind]
    m = induct.Model(seed=3, init_std=0.3, **c)
    d = induct.Dataset.rrt(d_vocab=c["d_vocab"], min_block=3, seed=2)
    o = induct.Optimizer(m, lr=3e-2)
    for _ in range(3):
        o.train_step(d, 4, 16)
    ref = TinyHookedTransformer(m.config)
    ref.load_state_dict({k: t.double() for k, t in m.weights(torch=True).items()}, strict=True)
    toks = np.array(d.batch(0, 3, 12, split="eval")[0])
    return m, ref, toks


def torch_cache(ref, toks, patch=None):
    """Logits and every activation of the reference; `patch` {name: fn} edits them."""
    cache = {}

    def recorder(name):
        def fn(t):
            if patch and name in patch:
                t = patch[name](t)
            cache[name] = t.detach().clone()
            return t
        return fn
    names = [n for n in ALL_NAMES(ref)]
    with torch.no_grad():
        logits = ref(torch.from_numpy(toks.astype(np.int64)), {n: recorder(n) for n in names})
    return logits.numpy(), cache


def ALL_NAMES(ref):
    """Every name the reference offers (it ignores names it never passes)."""
    c = ref.c
    names = ["hook_embed", "hook_pos_embed", "ln_final.hook_normalized"]
    per = ["hook_resid_pre", "ln1.hook_normalized", "attn.hook_q", "attn.hook_k",
           "attn.hook_v", "attn.hook_k_smeared", "attn.hook_attn_scores", "attn.hook_pattern",
           "attn.hook_z", "attn.hook_result", "hook_attn_out", "hook_resid_mid",
           "ln2.hook_normalized", "mlp.hook_pre", "mlp.hook_post", "hook_mlp_out",
           "hook_resid_post"]
    return names + [f"blocks.{l}.{p}" for l in range(c["n_layers"]) for p in per]


def close(a, r, name):
    """1e-5 relative to the activation's scale (the largest magnitude); -inf where the
    reference has -inf (masked scores)."""
    r = np.asarray(r)
    assert a.shape == r.shape, (name, a.shape, r.shape)
    fin = np.isfinite(r)
    assert np.array_equal(np.isfinite(a), fin), name
    assert np.all(a[~fin] == r[~fin]), name
    scale = np.abs(r[fin]).max()
    err = np.abs(a[fin] - r[fin]).max()
    assert err <= 1e-5 * scale, f"{name}: max error {err:.3g}, scale {scale:.3g}"


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_every_cached_activation_matches_pytorch(kind):
    m, ref, toks = trained(kind)
    logits, cache = m.run_with_cache(toks, names=lambda n: True)
    ref_logits, ref_cache = torch_cache(ref, toks)
    # the library offers exactly the points the reference passes, in pass order
    assert list(cache) == m.hook_points()
    # the default: all but hook_result (TransformerLens without use_attn_result)
    default = list(m.run_with_cache(toks)[1])
    assert default == [n for n in cache if not n.endswith("hook_result")]
    assert set(cache) == set(ref_cache), set(cache) ^ set(ref_cache)
    for name, act in cache.items():
        close(act, ref_cache[name].numpy(), name)
    close(logits, ref_logits, "logits")
    # caching does not change the pass: the logits are forward()'s, bit for bit
    assert np.array_equal(logits, m.forward(toks)[0])
    # TransformerLens's short keys
    assert cache["pattern", 0] is cache["blocks.0.attn.hook_pattern"]
    assert cache["embed"] is cache["hook_embed"]
    assert cache["blocks.0.attn.hook_z"].shape == (3, 12, m.config["n_heads"],
                                                   m.config["d_head"])
    assert cache["pattern", 0].shape == (3, m.config["n_heads"], 12, 12)


def test_cache_names_and_shapes():
    m, _, toks = trained("mlp_ln")
    _, cache = m.run_with_cache(toks, names=[("pattern", 1), "blocks.0.mlp.hook_post"])
    assert list(cache) == ["blocks.1.attn.hook_pattern", "blocks.0.mlp.hook_post"]
    assert cache["blocks.0.mlp.hook_post"].shape == (3, 12, 40)
    _, cache = m.run_with_cache(toks, names=lambda n: n.endswith("hook_result"))
    assert list(cache) == ["blocks.0.attn.hook_result", "blocks.1.attn.hook_result"]
    assert induct.act_name("normalized", 1, "ln2") == "blocks.1.ln2.hook_normalized"
    assert induct.act_name("normalized") == "ln_final.hook_normalized"
    assert induct.act_name("resid_pre", 0) == "blocks.0.hook_resid_pre"
    assert m.hook_shape("blocks.1.attn.hook_result", 2, 5) == (2, 5, 3, 24)  # d_model
    assert m.hook_shape(("q", 0), 2, 5) == (2, 5, 3, 8)  # d_head
    with pytest.raises(induct.InvalidArgument, match="unknown hook point"):
        m.run_with_cache(toks, names=["blocks.0.attn.hook_nothing"])
    with pytest.raises(induct.OutOfRange, match="2 layers"):
        m.run_with_cache(toks, names=["blocks.2.hook_resid_pre"])
    s, _, _ = trained("smeared")
    with pytest.raises(induct.OutOfRange, match="does not exist"):
        s.run_with_cache(toks, names=["blocks.0.hook_resid_mid"])


def test_activation_patching_matches_pytorch():
    """The worked example of docs/hooks.md: the clean run's hook_z of one head written
    into the corrupted run (all positions from 4 on) gives the logits PyTorch gives for
    the same patch."""
    m, ref, clean = trained("mlp_ln")
    corrupted = clean.copy()
    corrupted[:, 2] = (corrupted[:, 2] + 5) % m.config["d_vocab"]
    name, head = "blocks.1.attn.hook_z", 2
    _, cache = m.run_with_cache(clean, names=[name])
    clean_z = cache[name]

    def patch(z, _name):
        z[:, 4:, head] = clean_z[:, 4:, head]
    with m.hooks([(name, patch)]):
        patched = m.forward(corrupted)[0]
    unpatched = m.forward(corrupted)[0]
    assert not np.allclose(patched, unpatched, atol=1e-3)  # the patch matters

    ref_clean = torch_cache(ref, clean)[1][name]

    def tpatch(z):
        z = z.clone()
        z[:, 4:, head] = ref_clean[:, 4:, head]
        return z
    ref_patched, _ = torch_cache(ref, corrupted, {name: tpatch})
    close(patched, ref_patched, "patched logits")


def test_score_and_pattern_writes_match_pytorch():
    """A write to the scores (a head may only see the first token and itself) and to
    the resid stream (returned replacement array)."""
    m, ref, toks = trained("smeared")
    T = toks.shape[1]
    keep = np.zeros((T, T), dtype=bool)
    keep[:, 0] = True
    keep[np.arange(T), np.arange(T)] = True

    def scores(s, _name):
        s[:, 1][:, ~keep] = -np.inf

    def resid(x, _name):
        return x * 0.5
    with m.hooks([("blocks.0.attn.hook_attn_scores", scores),
                  ("blocks.0.hook_resid_pre", resid)]):
        logits, _, _ = m.forward(toks)
        _, cache = m.run_with_cache(toks, names=[("pattern", 0)])

    def tscores(s):
        s = s.clone()
        s[:, 1][:, torch.from_numpy(~keep)] = float("-inf")
        return s
    ref_logits, ref_cache = torch_cache(ref, toks, {"blocks.0.attn.hook_attn_scores": tscores,
                                                    "blocks.0.hook_resid_pre": lambda x: x * .5})
    close(logits, ref_logits, "logits")
    # run_with_cache inside the block caches what the hooks left: the masked keys get
    # exactly 0, as in the reference
    pattern = cache["pattern", 0]
    assert np.all(pattern[:, 1][:, ~keep] == 0.0)
    close(pattern, ref_cache["blocks.0.attn.hook_pattern"].numpy(), "hooked pattern")
    _, plain = m.run_with_cache(toks, names=[("pattern", 0)])  # the hooks are gone
    assert not np.allclose(plain["pattern", 0][:, 1][:, ~keep], 0.0)


def test_own_pattern_written_back_is_bit_identical():
    for kind in MODELS:
        m, _, toks = trained(kind)
        L = m.config["n_layers"]

        def same(p, _name):
            p[:, 1] = p[:, 1].copy()
        with m.hooks([(f"blocks.{L - 1}.attn.hook_pattern", same)]):
            hooked = m.forward(toks)
        plain = m.forward(toks)
        assert np.array_equal(hooked[0], plain[0]) and hooked[2] == plain[2]


def test_zeroed_z_equals_zero_ablation():
    m, _, toks = trained("mlp_ln")

    def zero(z, _name):
        z[:, :, 1] = 0.0
    with m.hooks([("blocks.0.attn.hook_z", zero)]):
        hooked = m.forward(toks)[0]
    with m.ablate([(0, 1)], mode="zero"):
        ablated = m.forward(toks)[0]
    assert np.array_equal(hooked, ablated)
    assert not np.array_equal(hooked, m.forward(toks)[0])


def test_hook_exception_stops_the_pass():
    m, _, toks = trained("smeared")

    def boom(_x, _name):
        raise KeyError("from the hook")
    with pytest.raises(KeyError, match="from the hook"):
        with m.hooks([("hook_embed", boom)]):
            m.forward(toks)
    with pytest.raises(induct.InvalidArgument, match="unknown hook point"):
        with m.hooks([("hook_nothing", boom)]):
            m.forward(toks)


def test_gradients_through_a_pattern_clamp_match_pytorch():
    """backward() inside model.hooks(): a head's pattern clamped to a constant (the
    previous-token pattern) and a zeroed z slice give the gradients PyTorch autograd
    gives for the same overwrites (no gradient to what they replaced)."""
    m, ref, toks = trained("mlp_ln")
    T = toks.shape[1]
    prev = np.zeros((T, T), dtype=np.float32)
    prev[np.arange(T), np.maximum(np.arange(T) - 1, 0)] = 1.0

    def clamp(p, _name):
        p[:, 1] = prev

    def zero(z, _name):
        z[:, :, 0] = 0.0
    with m.hooks([("blocks.1.attn.hook_pattern", clamp), ("blocks.0.attn.hook_z", zero)]):
        loss = m.backward(toks)
    grads = {n: m.get(n, grad=True) for n in m.tensor_names()}

    def tclamp(p):
        p = p.clone()
        p[:, 1] = torch.from_numpy(prev).double()
        return p

    def tzero(z):
        z = z.clone()
        z[:, :, 0] = 0.0
        return z
    t = torch.from_numpy(toks.astype(np.int64))
    logits = ref(t, {"blocks.1.attn.hook_pattern": tclamp, "blocks.0.attn.hook_z": tzero})
    ref_loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 t[:, 1:].reshape(-1))
    ref_loss.backward()
    assert loss == pytest.approx(ref_loss.item(), rel=1e-5)
    ref_grads = dict(ref.named_parameters())
    for name, g in grads.items():
        r = ref_grads[name].grad.numpy()
        assert np.abs(g - r).max() <= 1e-4 * np.abs(r).max() + 1e-7, name
    # the clamped head's queries and keys get no gradient at all
    assert not grads["blocks.1.attn.W_Q"][1].any() and not grads["blocks.1.attn.W_K"][1].any()
    assert grads["blocks.1.attn.W_Q"][0].any()


def test_train_step_inside_hooks():
    m, _, toks = trained("smeared")
    o = induct.Optimizer(m, lr=1e-2, weight_decay=0.0)
    before = m.get("blocks.0.attn.W_Q").copy()
    T = toks.shape[1]
    prev = np.zeros((T, T), dtype=np.float32)
    prev[np.arange(T), np.maximum(np.arange(T) - 1, 0)] = 1.0

    def clamp(p, _name):
        p[:, 0] = prev
    with m.hooks([("blocks.0.attn.hook_pattern", clamp)]):
        o.train_step(toks)
        o.train_step(induct.Dataset.rrt(d_vocab=11, min_block=3, seed=4), 3, 12)
    after = m.get("blocks.0.attn.W_Q")
    assert np.array_equal(after[0], before[0])  # the clamped head's W_Q had no gradient
    assert not np.array_equal(after[1], before[1])


def _some(shape, causal=False):
    """A fifth of the elements (flat index % 5 == 2); for scores and patterns [B, H, T, K]
    only those with key <= query (the library ignores writes above the diagonal; the
    reference would use them)."""
    sel = (np.arange(int(np.prod(shape))) % 5 == 2).reshape(shape)
    if causal:
        T = shape[-1]
        sel &= np.tril(np.ones((T, T), dtype=bool))
    return sel


def _hooked_grads(m, ref, toks, writes):
    """Gradients and loss of backward() inside model.hooks() with `writes` {name: (sel,
    kind)} (kind 'const': 0.3 at sel, else a scaling by 1.5 at sel), and PyTorch
    float64 autograd's for the same writes, each written element a constant (detached:
    the library does not differentiate a hook's function)."""
    def lib_hook(sel, kind):
        def fn(x, _name):
            x[sel] = 0.3 if kind == "const" else x[sel] * np.float32(1.5)
        return fn

    def torch_hook(sel, kind):
        s = torch.from_numpy(sel)

        def fn(t):
            w = torch.full_like(t, 0.3) if kind == "const" else t * 1.5
            return torch.where(s, w.detach(), t)
        return fn
    with m.hooks([(n, lib_hook(*w)) for n, w in writes.items()]):
        loss = m.backward(toks)
    grads = {n: m.get(n, grad=True) for n in m.tensor_names()}
    ref.zero_grad()
    t = torch.from_numpy(toks.astype(np.int64))
    logits = ref(t, {n: torch_hook(*w) for n, w in writes.items()})
    ref_loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 t[:, 1:].reshape(-1))
    ref_loss.backward()
    ref_grads = {n: p.grad.numpy().copy() for n, p in ref.named_parameters()}
    return loss, grads, ref_loss.item(), ref_grads


NEW_POINTS = [("mlp_ln", "hook_embed"), ("mlp_ln", "hook_pos_embed"),
              ("mlp_ln", "blocks.0.ln1.hook_normalized"),
              ("mlp_ln", "blocks.1.ln2.hook_normalized"), ("mlp_ln", "ln_final.hook_normalized"),
              ("mlp_ln", "blocks.0.attn.hook_attn_scores"),
              ("mlp_ln", "blocks.0.attn.hook_pattern"),
              ("mlp_ln", "blocks.0.attn.hook_result"), ("mlp_ln", "blocks.1.hook_attn_out"),
              ("smeared", "blocks.0.attn.hook_attn_scores")]


@pytest.mark.parametrize("kind", ["const", "scale"])
@pytest.mark.parametrize("model,point", NEW_POINTS)
def test_gradients_through_writes_match_pytorch(model, point, kind):
    """backward() with a writing hook on a fifth of a point's elements (constants, or a
    scaling the library treats as constants) gives the gradients PyTorch autograd gives
    with those elements detached."""
    m, ref, toks = trained(model)
    B, T = toks.shape
    shape = m.hook_shape(point, B, T)
    sel = _some(shape, causal=point.endswith(("hook_attn_scores", "hook_pattern")))
    loss, grads, ref_loss, ref_grads = _hooked_grads(m, ref, toks, {point: (sel, kind)})
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    for name, g in grads.items():
        r = ref_grads[name]
        assert np.abs(g - r).max() <= 1e-4 * np.abs(r).max() + 1e-7, name
    plain = m.clone()
    plain.backward(toks)
    assert any(not np.array_equal(plain.get(n, grad=True), g) for n, g in grads.items())


def test_train_step_with_writes_at_result_and_attn_out():
    """One SGD step (lr 0.1, no momentum, decay or clipping) inside model.hooks() with
    layer 1 head 0's hook_result scaled by 1.5 at some positions and constants written
    into part of layer 0's hook_attn_out moves every weight by -lr times PyTorch's
    float64 gradient of that loss; central finite differences of the library's own
    hooked loss, the written values held fixed, agree on W_O and b_O entries."""
    m, ref, toks = trained("mlp_ln")
    B, T = toks.shape
    res = np.zeros(m.hook_shape("blocks.1.attn.hook_result", B, T), dtype=bool)
    res[:, 1::2, 0] = True                      # head 0 at odd positions, every feature
    out = _some(m.hook_shape("blocks.0.hook_attn_out", B, T))
    writes = {"blocks.1.attn.hook_result": (res, "scale"),
              "blocks.0.hook_attn_out": (out, "const")}
    before = m.weights()
    probe = m.clone()
    _, grads, ref_loss, ref_grads = _hooked_grads(probe, ref, toks, writes)
    recorded = {}

    def record(name, sel, kind):
        def fn(x, _name):
            x[sel] = 0.3 if kind == "const" else x[sel] * np.float32(1.5)
            recorded[name] = x[sel].copy()
        return fn
    lr = 0.1
    o = induct.Optimizer(m, "sgd", lr=lr, weight_decay=0.0, grad_clip=0.0, momentum=0.0)
    with m.hooks([(n, record(n, *w)) for n, w in writes.items()]):
        loss = o.train_step(toks)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    after = m.weights()
    for name in before:
        step = (before[name].astype(np.float64) - after[name]) / lr
        r = ref_grads[name]
        # as above, plus the update's rounding to float32 at the weights' magnitude
        tol = (1e-4 * np.abs(r).max() + 1e-7
               + 4 * np.finfo(np.float32).eps * np.abs(before[name]).max() / lr)
        assert np.abs(step - r).max() <= tol, name
    # the head's W_O rows trained only through the unscaled positions: not zero
    assert np.abs(grads["blocks.1.attn.W_O"][0]).max() > 0

    # finite differences of the library's loss with the written values replayed
    def replay(name, sel):
        def fn(x, _name):
            x[sel] = recorded[name]
        return fn
    fd_model = probe.clone()
    eps = 2e-3
    for name, idx in [("blocks.1.attn.W_O", (0, 1, 2)), ("blocks.1.attn.W_O", (1, 3, 5)),
                      ("blocks.0.attn.W_O", (1, 0, 4)), ("blocks.0.attn.b_O", (7,))]:
        w = before[name].copy()
        lp_lm = []
        for sign in (1, -1):
            v = w.copy()
            v[idx] += sign * eps
            fd_model.set(name, v)
            with fd_model.hooks([(n, replay(n, sel)) for n, (sel, _) in writes.items()]):
                lp_lm.append(fd_model.forward(toks, logits=False)[2])
        fd_model.set(name, w)
        h = float(np.float32(w[idx] + eps)) - float(w[idx])  # the step the weights took
        fd = (lp_lm[0] - lp_lm[1]) / (2 * h)
        # tolerance fixed as tu_gradcheck's (tests/testutil.c): float32 forward passes
        assert abs(fd - grads[name][idx]) <= 2e-3 + 2e-2 * abs(fd), (name, idx)
