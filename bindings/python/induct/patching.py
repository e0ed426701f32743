"""Activation patching and attribution patching, with TransformerLens's names.

Activation patching (Meng et al. 2022, "Locating and Editing Factual Associations in GPT",
section 2.1, "causal tracing"; Wang et al. 2022, "Interpretability in the Wild", section
3.1; TransformerLens's `patching` module): run the corrupted input once per patch, each
time with one activation (a layer's residual stream at one position, one head's output at
one position, ...) replaced by its value on the clean input, and measure a metric of the
logits. `get_act_patch_*(model, corrupted_tokens, clean_cache, patching_metric)` returns
the metric of every patch as a NumPy float64 array ready to plot, in TransformerLens's
shapes: [n_layers, pos] for the residual stream, attention and MLP outputs, [n_layers,
pos, n_heads] for heads by position, [n_layers, n_heads] for heads at every position.

Attribution patching (Nanda 2023, "Attribution Patching: Activation Patching At
Industrial Scale"; Syed, Rager and Conmy 2023, "Attribution Patching Outperforms
Automated Circuit Discovery", section 2): the first-order estimate of every patch from one
forward and one backward pass of the corrupted input, metric(patched) − metric(corrupted)
≈ Σ (a_clean − a_corrupted) · d metric/d a, summed over the patched slice (the dimensions
of the activation that the patch replaces) and over the batch. The gradient is that of
the metric, not the loss: the backward pass starts from d metric/d logits
(induct_model_backward_from_logits). `get_attr_patch_*` return the estimates of the
metric's change in the shapes of the exact functions; `attribution_patching()` all of
them from the one pass. The estimate is exact when the metric is linear in the
activation along the patch; its error is second order in the patch (the remainder of the
Taylor expansion), so it is good for small patches (one head among many) and poor for
large ones (a token's whole residual stream, a saturated attention pattern).

Metrics: a function of the logits (NumPy [batch, pos, d_vocab] for an induct.Model, a
PyTorch tensor for an induct.lens.HookedTransformer) returning a scalar. Attribution
patching needs its gradient: `LogitDiff` (the logit difference, TransformerLens's
`logits_to_ave_logit_diff`, optionally normalised between a corrupted and a clean value)
has it in closed form; another metric needs PyTorch (its gradient by autograd, the
metric written with torch operations) or a `.grad(logits)` method of its own.

Needs NumPy."""
import numpy as np

from . import _arrays

__all__ = ["LogitDiff", "logit_diff_metric", "attribution_patching", "metric_grad",
           "get_act_patch_resid_pre", "get_act_patch_resid_mid", "get_act_patch_attn_out",
           "get_act_patch_mlp_out", "get_act_patch_block_every",
           "get_act_patch_attn_head_out_by_pos", "get_act_patch_attn_head_out_all_pos",
           "get_act_patch_attn_head_q_by_pos", "get_act_patch_attn_head_q_all_pos",
           "get_act_patch_attn_head_k_by_pos", "get_act_patch_attn_head_k_all_pos",
           "get_act_patch_attn_head_v_by_pos", "get_act_patch_attn_head_v_all_pos",
           "get_act_patch_attn_head_pattern_all_pos", "get_act_patch_attn_head_all_pos_every",
           "get_attr_patch_resid_pre", "get_attr_patch_resid_mid", "get_attr_patch_attn_out",
           "get_attr_patch_mlp_out", "get_attr_patch_attn_head_out_by_pos",
           "get_attr_patch_attn_head_out_all_pos"]


# ---- metrics ------------------------------------------------------------------------
class LogitDiff:
    """The logit difference logits[b, pos, answer_b] − logits[b, pos, wrong_b], averaged
    over the batch (Wang et al. 2022, section 3: the IOI metric; TransformerLens's
    logits_to_ave_logit_diff), in nats. answer, wrong: a token id or one per sequence
    ([batch]); pos: the position (default the last; one per sequence allowed).
    normalize=(corrupted_value, clean_value): (ld − corrupted) / (clean − corrupted)
    instead, 0 on the corrupted run and 1 on the clean one. Callable on NumPy logits or
    PyTorch tensors; .grad(logits) is d metric/d logits (NumPy float32, the logits' shape)."""

    def __init__(self, answer, wrong, pos=-1, normalize=None):
        self.answer = np.asarray(_np_of(answer), dtype=np.int64)
        self.wrong = np.asarray(_np_of(wrong), dtype=np.int64)
        self.pos = np.asarray(_np_of(pos), dtype=np.int64)
        self.scale, self.offset = 1.0, 0.0
        if normalize is not None:
            lo, hi = (float(v) for v in normalize)
            if hi == lo:
                raise ValueError(f"normalize=({lo}, {hi}): the clean and corrupted values "
                                 "must differ")
            self.scale, self.offset = 1.0 / (hi - lo), lo

    def _index(self, shape):
        if len(shape) != 3:
            raise ValueError(f"logits must be [batch, pos, d_vocab], got shape {tuple(shape)}")
        B, T, V = shape
        b = np.arange(B)
        pos = np.broadcast_to(self.pos, (B,)) % T
        ans = np.broadcast_to(self.answer, (B,))
        wr = np.broadcast_to(self.wrong, (B,))
        if ((ans < 0) | (ans >= V) | (wr < 0) | (wr >= V)).any():
            raise ValueError(f"answer and wrong tokens must be in [0, {V})")
        return b, pos, ans, wr

    def __call__(self, logits):
        b, pos, ans, wr = self._index(tuple(logits.shape))
        if hasattr(logits, "detach"):  # PyTorch: differentiable
            import torch
            bt, pt, at, wt = (torch.from_numpy(np.array(x)) for x in (b, pos, ans, wr))
            ld = (logits[bt, pt, at].double() - logits[bt, pt, wt].double()).mean()
            return (ld - self.offset) * self.scale
        lg = np.asarray(logits)
        ld = (lg[b, pos, ans].astype(np.float64) - lg[b, pos, wr]).mean()
        return float((ld - self.offset) * self.scale)

    def grad(self, logits):
        """d metric/d logits: ±scale/batch at (b, pos_b, answer_b) and (b, pos_b, wrong_b)."""
        shape = tuple(logits.shape)
        b, pos, ans, wr = self._index(shape)
        d = np.zeros(shape, dtype=np.float32)
        w = np.float32(self.scale / shape[0])
        np.add.at(d, (b, pos, ans), w)
        np.add.at(d, (b, pos, wr), -w)
        return d


def logit_diff_metric(answer, wrong, pos=-1, normalize=None):
    """A LogitDiff (see there): the usual metric of patching experiments."""
    return LogitDiff(answer, wrong, pos, normalize)


def metric_grad(metric, logits):
    """d metric/d logits (NumPy float32, the logits' shape) at NumPy `logits`: the
    metric's own .grad, else PyTorch autograd through metric(torch tensor)."""
    if hasattr(metric, "grad") and callable(metric.grad):
        return np.asarray(_np_of(metric.grad(logits)), dtype=np.float32)
    try:
        import torch
    except ImportError:
        raise TypeError("attribution patching needs the metric's gradient: give a metric "
                        "with a .grad(logits) method (e.g. induct.patching.LogitDiff) or "
                        "install PyTorch (the gradient by autograd)") from None
    t = torch.from_numpy(np.array(logits, dtype=np.float64)).requires_grad_(True)
    out = metric(t)
    if not hasattr(out, "backward") or out.numel() != 1:
        raise TypeError("the metric must return a scalar PyTorch tensor of the logits "
                        "tensor (its gradient by autograd), or have a .grad(logits) method")
    out.backward()
    return t.grad.numpy().astype(np.float32)


# ---- the exact patches --------------------------------------------------------------
def _np_of(x):
    return x.detach().cpu().numpy() if hasattr(x, "detach") else x


def _clean(clean_cache, name, shape):
    if name not in clean_cache:
        raise KeyError(f"the clean cache has no {name!r}: run_with_cache on the clean "
                       "tokens with that point (or every point)")
    a = np.asarray(_np_of(clean_cache[name]), dtype=np.float32)
    if a.shape != tuple(shape):
        raise ValueError(f"{name}: the clean activation has shape {a.shape}, the corrupted "
                         f"run's {tuple(shape)} (the same batch and positions are needed)")
    return a


def _model_tokens(model, tokens):
    if hasattr(model, "_input_tokens"):
        tokens = model._input_tokens(tokens)
    toks, B, T = _arrays.tokens_in(_np_of(tokens))
    return np.ctypeslib.as_array(toks, shape=(B * T,)).reshape(B, T).copy()


def _n_layers(model):
    return model.config["n_layers"]


def _sweep(model, corrupted_tokens, clean_cache, metric, point, shape, index):
    """The metric of the corrupted run with, for each index of `shape` (an output
    array's shape: its first axis the layer), the slice index(idx) of blocks.{layer}'s
    `point` (a name suffix) replaced by the clean run's."""
    toks = _model_tokens(model, corrupted_tokens)
    B, T = toks.shape
    out = np.zeros(shape, dtype=np.float64)
    for idx in np.ndindex(*shape):
        name = f"blocks.{idx[0]}.{point}"
        sl = (slice(None),) + index(idx[1:])
        clean = _clean(clean_cache, name, model.hook_shape(name, B, T))[sl]

        def patch(act, hook, sl=sl, clean=clean):
            a = act.numpy() if hasattr(act, "numpy") else act  # a CPU tensor's NumPy view
            a[sl] = clean
        out[idx] = float(_np_of(metric(model.run_with_hooks(toks, fwd_hooks=[(name, patch)]))))
    return out


def _T(corrupted_tokens, model):
    return _model_tokens(model, corrupted_tokens).shape[1]


def _per_pos(point):
    def fn(model, corrupted_tokens, clean_cache, patching_metric):
        L, T = _n_layers(model), _T(corrupted_tokens, model)
        return _sweep(model, corrupted_tokens, clean_cache, patching_metric, point, (L, T),
                      lambda i: (i[0],))
    return fn


_RESID_PRE_DOC = """The metric of the corrupted run with blocks.{{layer}}.{name} at one
    position replaced by the clean run's (every sequence of the batch at once), for every
    layer and position: [n_layers, pos] float64 (TransformerLens's
    get_act_patch_{short}). clean_cache: a run_with_cache of the clean tokens (same
    batch and length) holding those points."""
get_act_patch_resid_pre = _per_pos("hook_resid_pre")
get_act_patch_resid_pre.__doc__ = _RESID_PRE_DOC.format(name="hook_resid_pre", short="resid_pre")
get_act_patch_resid_mid = _per_pos("hook_resid_mid")
get_act_patch_resid_mid.__doc__ = _RESID_PRE_DOC.format(name="hook_resid_mid", short="resid_mid")
get_act_patch_attn_out = _per_pos("hook_attn_out")
get_act_patch_attn_out.__doc__ = _RESID_PRE_DOC.format(name="hook_attn_out", short="attn_out")
get_act_patch_mlp_out = _per_pos("hook_mlp_out")
get_act_patch_mlp_out.__doc__ = _RESID_PRE_DOC.format(name="hook_mlp_out", short="mlp_out")
for _f, _n in ((get_act_patch_resid_pre, "resid_pre"), (get_act_patch_resid_mid, "resid_mid"),
               (get_act_patch_attn_out, "attn_out"), (get_act_patch_mlp_out, "mlp_out")):
    _f.__name__ = _f.__qualname__ = f"get_act_patch_{_n}"


def _head(point, by_pos):
    def fn(model, corrupted_tokens, clean_cache, patching_metric):
        L, H = _n_layers(model), model.config["n_heads"]
        if by_pos:
            T = _T(corrupted_tokens, model)
            return _sweep(model, corrupted_tokens, clean_cache, patching_metric, point,
                          (L, T, H), lambda i: (i[0], i[1]))
        return _sweep(model, corrupted_tokens, clean_cache, patching_metric, point, (L, H),
                      lambda i: (slice(None), i[0]))
    return fn


_HEAD_DOC = """The metric of the corrupted run with one head's {what} (blocks.{{layer}}.attn.
    {name}) replaced by the clean run's {where}, for every layer, {loop}head:
    {shape} float64 (TransformerLens's get_act_patch_attn_head_{short})."""
_HEADS = {"out": ("hook_z", "output (its z, before W_O)"), "q": ("hook_q", "query"),
          "k": ("hook_k", "key"), "v": ("hook_v", "value")}
for _short, (_pt, _what) in _HEADS.items():
    for _by in (True, False):
        _fn = _head(f"attn.{_pt}", _by)
        _nm = f"attn_head_{_short}_{'by_pos' if _by else 'all_pos'}"
        _fn.__name__ = _fn.__qualname__ = f"get_act_patch_{_nm}"
        _fn.__doc__ = _HEAD_DOC.format(
            what=_what, name=_pt, where="at one position" if _by else "at every position",
            loop="position and " if _by else "", short=_nm[10:],
            shape="[n_layers, pos, n_heads]" if _by else "[n_layers, n_heads]")
        globals()[_fn.__name__] = _fn


def get_act_patch_attn_head_pattern_all_pos(model, corrupted_tokens, clean_cache,
                                            patching_metric):
    """The metric of the corrupted run with one head's whole attention pattern
    (blocks.{layer}.attn.hook_pattern) replaced by the clean run's, for every layer and
    head: [n_layers, n_heads] float64 (TransformerLens's
    get_act_patch_attn_head_pattern_all_pos)."""
    L, H = _n_layers(model), model.config["n_heads"]
    return _sweep(model, corrupted_tokens, clean_cache, patching_metric, "attn.hook_pattern",
                  (L, H), lambda i: (i[0],))


def get_act_patch_block_every(model, corrupted_tokens, clean_cache, patching_metric):
    """resid_pre, attn_out and mlp_out patched by layer and position: [3, n_layers, pos]
    (TransformerLens's get_act_patch_block_every; an attention-only model has no
    mlp_out: [2, n_layers, pos])."""
    parts = [get_act_patch_resid_pre, get_act_patch_attn_out]
    if model.config["d_mlp"]:
        parts.append(get_act_patch_mlp_out)
    return np.stack([f(model, corrupted_tokens, clean_cache, patching_metric) for f in parts])


def get_act_patch_attn_head_all_pos_every(model, corrupted_tokens, clean_cache,
                                          patching_metric):
    """Every head's output, query, key, value and pattern patched at every position:
    [5, n_layers, n_heads] (TransformerLens's get_act_patch_attn_head_all_pos_every)."""
    fs = [get_act_patch_attn_head_out_all_pos, get_act_patch_attn_head_q_all_pos,  # noqa: F821
          get_act_patch_attn_head_k_all_pos, get_act_patch_attn_head_v_all_pos,  # noqa: F821
          get_act_patch_attn_head_pattern_all_pos]
    return np.stack([f(model, corrupted_tokens, clean_cache, patching_metric) for f in fs])


# ---- attribution patching -----------------------------------------------------------
# what each estimate patches: (point suffix, axes of [B, ...] summed, output shape kind)
_ATTR = {
    "resid_pre": ("hook_resid_pre", "pos"),
    "resid_mid": ("hook_resid_mid", "pos"),
    "attn_out": ("hook_attn_out", "pos"),
    "mlp_out": ("hook_mlp_out", "pos"),
    "attn_head_out_by_pos": ("attn.hook_z", "pos_head"),
    "attn_head_out_all_pos": ("attn.hook_z", "head"),
    "attn_head_q_by_pos": ("attn.hook_q", "pos_head"),
    "attn_head_q_all_pos": ("attn.hook_q", "head"),
    "attn_head_k_by_pos": ("attn.hook_k", "pos_head"),
    "attn_head_k_all_pos": ("attn.hook_k", "head"),
    "attn_head_v_by_pos": ("attn.hook_v", "pos_head"),
    "attn_head_v_all_pos": ("attn.hook_v", "head"),
    "attn_head_pattern_all_pos": ("attn.hook_pattern", "pattern"),
}


def _reduce(prod, kind):
    """Σ over the batch and the patched slice's own dimensions of (Δa · grad)."""
    if kind == "pos":  # [B, T, D] -> [T]
        return prod.sum(axis=(0, 2))
    if kind == "pos_head":  # [B, T, H, E] -> [T, H]
        return prod.sum(axis=(0, 3))
    if kind == "head":  # [B, T, H, E] -> [H]
        return prod.sum(axis=(0, 1, 3))
    return prod.sum(axis=(0, 2, 3))  # pattern [B, H, T, T] -> [H]


def attribution_patching(model, corrupted_tokens, clean_cache, patching_metric, kinds=None):
    """Attribution patching: every estimate of `kinds` (default: every kind the model
    has: "resid_pre", "resid_mid", "attn_out", "mlp_out", "attn_head_out_by_pos",
    "attn_head_out_all_pos", "attn_head_{q,k,v}_{by,all}_pos",
    "attn_head_pattern_all_pos") from one forward and one backward pass of the corrupted
    tokens: {kind: Σ (clean − corrupted) · d metric/d activation}, float64, each in the
    shape of the matching get_act_patch_* ([n_layers, pos], [n_layers, pos, n_heads],
    [n_layers, n_heads]); an estimate of metric(patched) − metric(corrupted). Also
    {"metric": the corrupted run's metric, "loss": its mean loss}. The gradient is the
    metric's (LogitDiff's in closed form, another metric's by PyTorch autograd or its
    .grad), through forward and backward hooks in force as well."""
    toks = _model_tokens(model, corrupted_tokens)
    B, T = toks.shape
    L = _n_layers(model)
    points = set(model.hook_points())
    if kinds is None:  # those whose points the model has (no MLP: no resid_mid, mlp_out)
        kinds = [k for k in _ATTR if f"blocks.0.{_ATTR[k][0]}" in points]
    unknown = [k for k in kinds if k not in _ATTR]
    if unknown:
        raise ValueError(f"unknown kinds {unknown}; known: {list(_ATTR)}")
    names = sorted({f"blocks.{l}.{_ATTR[k][0]}" for k in kinds for l in range(L)})
    seen = {}

    def d_logits(logits):
        seen["metric"] = float(_np_of(patching_metric(_as_model_logits(model, logits))))
        return metric_grad(patching_metric, logits)
    from .hooks import ModelHooks  # the NumPy cache of any Model (also a HookedTransformer)
    loss, cache = ModelHooks.run_with_cache(model, toks, names, incl_bwd=True,
                                            d_logits=d_logits)
    out = {"metric": seen["metric"], "loss": float(loss)}
    for k in kinds:
        point, kind = _ATTR[k]
        rows = []
        for l in range(L):
            n = f"blocks.{l}.{point}"
            delta = _clean(clean_cache, n, cache[n].shape).astype(np.float64) - cache[n]
            rows.append(_reduce(delta * cache[n + "_grad"], kind))
        out[k] = np.stack(rows)
    return out


def _as_model_logits(model, logits):
    """The logits as the metric sees them from the model's forward (a tensor for a
    HookedTransformer in PyTorch mode)."""
    if getattr(model, "_torch_mode", False):
        import torch
        return torch.from_numpy(np.array(logits))
    return logits


def _attr(kind):
    def fn(model, corrupted_tokens, clean_cache, patching_metric):
        return attribution_patching(model, corrupted_tokens, clean_cache, patching_metric,
                                    [kind])[kind]
    fn.__name__ = fn.__qualname__ = f"get_attr_patch_{kind}"
    fn.__doc__ = (f"Attribution patching's estimate for get_act_patch_{kind} (the metric's "
                  f"change, not the patched metric: add the corrupted run's metric to "
                  f"compare), from one forward and one backward pass; see "
                  f"attribution_patching().")
    return fn


for _k in _ATTR:
    globals()[f"get_attr_patch_{_k}"] = _attr(_k)
    if f"get_attr_patch_{_k}" not in __all__:
        __all__.append(f"get_attr_patch_{_k}")
