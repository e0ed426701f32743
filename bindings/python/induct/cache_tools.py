"""Residual-stream decompositions of an activation cache, as TransformerLens's
ActivationCache has them: accumulated_resid, decompose_resid, stack_head_results,
stack_activation, apply_ln_to_stack, logit_attrs, compute_head_results,
remove_batch_dim, apply_slice_to_batch_dim.

They are the tools of direct logit attribution (Elhage et al. 2021, *A Mathematical
Framework for Transformer Circuits*, "Summarizing OV and QK circuits": the residual
stream is a sum of the outputs of every earlier component, and the logits are linear in
it up to the final LayerNorm's scale). CacheTools is a base class of
induct.ActivationCache; a cache made by Model.run_with_cache() knows its model
(`cache.model`) and whether its entries have a batch dimension (`cache.has_batch_dim`).

Arguments and return shapes are TransformerLens's (a stack is [components, *batch_and_pos,
d_model]; `pos_slice` / `batch_slice` take None, an int, a tuple (a, b[, c]) meaning
slice(a, b[, c]), a slice, or a list / array of indices). Computations are done in
float64 and returned in the activations' dtype (float32). Two entries TransformerLens
caches as hook points are derived here on access, because the library's pass has no
such point (docs/hooks.md):

* `blocks.{l}.hook_mlp_out` [B, T, d_model] = mlp.hook_post @ W_out + b_out;
* `blocks.{l}.ln1.hook_scale`, `blocks.{l}.ln2.hook_scale`, `ln_final.hook_scale`
  [B, T, 1] = sqrt(var(x) + 1e-5) of the LayerNorm's input x (hook_resid_pre,
  hook_resid_mid, the last hook_resid_post), the variance biased as the LayerNorm's;
* `blocks.{l}.attn.hook_result` [B, T, H, d_model] = z_h @ W_O[h] when the cache does
  not hold it (as TransformerLens's compute_head_results()).

LayerNorm: the library's models keep the LayerNorm gain w and bias b (TransformerLens
loads pretrained models with fold_ln=True, which folds w into W_U and b into b_U).
apply_ln_to_stack() has TransformerLens's meaning (centre, divide by the cached scale;
no gain or bias), and Model.tokens_to_residual_directions() returns w ⊙ W_U[:, t], the
direction a centred and scaled residual is dotted with: so logit_attrs() over a full
decomposition sums to logits[t] - b_U[t] - b·W_U[:, t] (the folded model's b_U), as in
TransformerLens with folded weights.
"""
import numbers
import re

from . import _arrays

__all__ = ["CacheTools", "Slice"]

_LN_SCALE = re.compile(r"^(?:blocks\.(\d+)\.(ln1|ln2)|ln_final)\.hook_scale$")
_MLP_OUT = re.compile(r"^blocks\.(\d+)\.hook_mlp_out$")
_RESULT = re.compile(r"^blocks\.(\d+)\.attn\.hook_result$")
EPS = 1e-5  # the library's LayerNorm epsilon (docs/definitions.md)


def _is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _np(x):
    """A NumPy view of a cache entry or a caller's stack (torch tensors are viewed)."""
    np = _arrays.np
    if _is_torch(x):
        return x.detach().cpu().numpy()
    if isinstance(x, _arrays.Shaped):
        return np.asarray(x.data).reshape(x.shape)
    return np.asarray(x)


class Slice:
    """TransformerLens's slice input: None = everything, an int = that index (the
    dimension goes), a tuple = slice(*tuple) ((k,) is :k, (a, b) is a:b), a slice, or a
    list / array / tensor of indices."""

    def __init__(self, input_slice=None):
        np = _arrays.np
        if isinstance(input_slice, Slice):
            self.slice, self.mode = input_slice.slice, input_slice.mode
        elif input_slice is None:
            self.slice, self.mode = slice(None), "identity"
        elif isinstance(input_slice, bool):
            raise TypeError(f"invalid slice {input_slice!r}")
        elif isinstance(input_slice, numbers.Integral):
            self.slice, self.mode = int(input_slice), "int"
        elif isinstance(input_slice, tuple):
            self.slice, self.mode = slice(*input_slice), "slice"
        elif isinstance(input_slice, slice):
            self.slice, self.mode = input_slice, "slice"
        elif isinstance(input_slice, list) or hasattr(input_slice, "shape"):
            idx = _np(input_slice)
            if idx.dtype.kind not in "iu":
                raise TypeError(f"slice indices must be integers, got {idx.dtype}")
            self.slice, self.mode = np.asarray(idx, dtype=np.int64), "array"
        else:
            raise TypeError(f"invalid slice {input_slice!r}: None, an int, a tuple, a slice "
                            f"or a list of indices")

    def apply(self, array, dim=0):
        """array[..., slice, ...] at dimension `dim`."""
        idx = [slice(None)] * array.ndim
        idx[dim] = self.slice
        return array[tuple(idx)]

    def __repr__(self):
        return f"Slice({self.slice!r}, mode={self.mode!r})"


class CacheTools:
    """TransformerLens's ActivationCache methods over a cache dict whose `model`
    attribute is the induct.Model that made it (see the module docstring)."""

    model = None
    has_batch_dim = True
    _torch = False

    # ---- plumbing ----
    def _need_model(self):
        if self.model is None:
            raise ValueError("this cache has no model (cache.model is None); make it with "
                             "Model.run_with_cache()")
        return self.model

    def _cfg(self):
        return self._need_model().config

    def _wrap(self, a):
        """A NumPy result in the cache's array type (PyTorch for a HookedTransformer)."""
        if self._torch:
            import torch
            return torch.from_numpy(_arrays.np.ascontiguousarray(a))
        return a

    def _get(self, key):
        return _np(self[key])

    def _layer_arg(self, layer, what="layer"):
        L = self._cfg()["n_layers"]
        if layer is None or layer == -1:
            return L
        if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or \
                not 0 <= layer <= L:
            raise ValueError(f"{what} must be in [0, {L}], -1 or None, got {layer!r}")
        return int(layer)

    def __missing__(self, key):
        """Entries derived from what the cache holds (module docstring); KeyError else."""
        np = _arrays.np
        if self.model is not None and isinstance(key, str):
            m = _LN_SCALE.match(key)
            if m:
                return self._wrap(self._ln_scale(m.group(1), m.group(2)))
            m = _MLP_OUT.match(key)
            if m and self._cfg()["d_mlp"]:
                l = int(m.group(1))
                post = self._get(f"blocks.{l}.mlp.hook_post").astype(np.float64)
                w = self.model.get(f"blocks.{l}.mlp.W_out").astype(np.float64)
                b = self.model.get(f"blocks.{l}.mlp.b_out").astype(np.float64)
                return self._wrap((post @ w + b).astype(np.float32))
            m = _RESULT.match(key)
            if m:
                return self._wrap(self._head_result(int(m.group(1))))
        raise KeyError(f"{key!r} is not in the cache (it holds {len(self)} hook points; pass "
                       f"its name to run_with_cache(names_filter=...))")

    def _head_result(self, layer):
        np = _arrays.np
        z = self._get(f"blocks.{layer}.attn.hook_z").astype(np.float64)
        w_o = self.model.get(f"blocks.{layer}.attn.W_O").astype(np.float64)
        return np.einsum("...he,hed->...hd", z, w_o).astype(np.float32)

    def _ln_scale(self, layer, ln):
        """sqrt(var + eps) [*, 1] of the input of a LayerNorm (float64)."""
        np = _arrays.np
        c = self._cfg()
        if not c["layer_norm"]:
            raise KeyError("this model has no LayerNorm, so no hook_scale")
        if layer is None:
            x = self._get(f"blocks.{c['n_layers'] - 1}.hook_resid_post")
        elif ln == "ln1":
            x = self._get(f"blocks.{layer}.hook_resid_pre")
        else:
            if not c["d_mlp"]:
                raise KeyError(f"blocks.{layer}.ln2.hook_scale: an attention-only model has "
                               f"no ln2")
            x = self._get(f"blocks.{layer}.hook_resid_mid")
        x = x.astype(np.float64)
        var = ((x - x.mean(-1, keepdims=True)) ** 2).mean(-1, keepdims=True)
        return np.sqrt(var + EPS)

    # ---- TransformerLens's methods ----
    def remove_batch_dim(self):
        """Drop the batch dimension of every entry (the cache must hold one sequence);
        returns the cache."""
        if not self.has_batch_dim:
            return self
        for k, v in dict.items(self):
            if v.shape[0] != 1:
                raise ValueError(f"cannot remove the batch dimension: {k} has batch "
                                 f"{v.shape[0]}")
        for k in list(dict.keys(self)):
            dict.__setitem__(self, k, dict.__getitem__(self, k)[0])
        self.has_batch_dim = False
        return self

    def apply_slice_to_batch_dim(self, batch_slice):
        """A new cache with `batch_slice` applied to every entry's batch dimension (an
        int removes it)."""
        s = Slice(batch_slice)
        if not self.has_batch_dim:
            raise ValueError("this cache has no batch dimension")
        out = type(self)((k, s.apply(v, 0)) for k, v in dict.items(self))
        out.model, out._torch = self.model, self._torch
        out.has_batch_dim = s.mode != "int"
        return out

    def compute_head_results(self):
        """Store every layer's `attn.hook_result` [B, T, H, d_model] = z_h @ W_O[h]
        (TransformerLens: for caches made without use_attn_result)."""
        for l in range(self._cfg()["n_layers"]):
            key = f"blocks.{l}.attn.hook_result"
            if not dict.__contains__(self, key):
                dict.__setitem__(self, key, self._wrap(self._head_result(l)))

    def accumulated_resid(self, layer=None, incl_mid=False, apply_ln=False, pos_slice=None,
                          mlp_input=False, return_labels=False):
        """The residual stream at every layer up to the input of `layer`:
        [components, *batch_and_pos, d_model] (resid_pre of layers 0 … layer−1, plus
        resid_mid of each with incl_mid, resid_mid of `layer` with mlp_input, and the
        final stream "final_post" for layer None / -1 / n_layers). apply_ln: for the final
        stream each component goes through ln_final with its own statistics (logit lens,
        TransformerLens's recompute_ln); for an earlier layer the cached scale of that
        layer's LayerNorm. Labels "0_pre", "0_mid", …, "final_post"."""
        np = _arrays.np
        L = self._cfg()["n_layers"]
        layer = self._layer_arg(layer)
        if mlp_input and layer == L:
            raise ValueError("mlp_input needs a layer below n_layers (the unembedding has "
                             "no MLP)")
        ps = Slice(pos_slice)
        comps, labels = [], []
        for l in range(layer + 1):
            if l == L:
                comps.append(self._get(f"blocks.{L - 1}.hook_resid_post"))
                labels.append("final_post")
                continue
            comps.append(self._get(f"blocks.{l}.hook_resid_pre"))
            labels.append(f"{l}_pre")
            if (incl_mid and l < layer) or (mlp_input and l == layer):
                comps.append(self._get(f"blocks.{l}.hook_resid_mid"))
                labels.append(f"{l}_mid")
        stack = np.stack([ps.apply(c, -2) for c in comps])
        if apply_ln:
            stack = self._apply_ln(stack, layer, mlp_input, ps, Slice(None), True,
                                   recompute_ln=layer == L)
        stack = self._wrap(stack)
        return (stack, labels) if return_labels else stack

    def decompose_resid(self, layer=None, mlp_input=False, mode="all", apply_ln=False,
                        pos_slice=None, incl_embeds=True, return_labels=False):
        """The residual stream entering `layer` split into its terms:
        [components, *batch_and_pos, d_model]: hook_embed ("embed"), hook_pos_embed
        ("pos_embed", standard positions only: shortformer positions never enter the
        stream), then per earlier layer l its attention output "{l}_attn_out" and MLP
        output "{l}_mlp_out" (mode "attn" / "mlp" keeps one kind), plus the attention
        output of `layer` itself with mlp_input. They sum to hook_resid_pre of `layer`
        (the final stream for None / -1 / n_layers). apply_ln: apply_ln_to_stack with
        that layer's cached scale."""
        np = _arrays.np
        c = self._cfg()
        if mode not in ("all", "mlp", "attn"):
            raise ValueError(f"mode must be 'all', 'mlp' or 'attn', got {mode!r}")
        layer = self._layer_arg(layer)
        if mlp_input and layer == c["n_layers"]:
            raise ValueError("mlp_input needs a layer below n_layers")
        incl_attn = mode != "mlp"
        incl_mlp = mode != "attn" and c["d_mlp"] > 0
        ps = Slice(pos_slice)
        comps, labels = [], []
        if incl_embeds:
            comps.append(self._get("hook_embed"))
            labels.append("embed")
            if dict.__contains__(self, "hook_pos_embed") or c["positional"] == 0:
                comps.append(self._get("hook_pos_embed"))
                labels.append("pos_embed")
        for l in range(layer):
            if incl_attn:
                comps.append(self._get(f"blocks.{l}.hook_attn_out"))
                labels.append(f"{l}_attn_out")
            if incl_mlp:
                comps.append(self._get(f"blocks.{l}.hook_mlp_out"))
                labels.append(f"{l}_mlp_out")
        if mlp_input and incl_attn:
            comps.append(self._get(f"blocks.{layer}.hook_attn_out"))
            labels.append(f"{layer}_attn_out")
        if not comps:
            raise ValueError("decompose_resid: no components (layer 0 without the "
                             "embeddings)")
        stack = np.stack([ps.apply(x, -2) for x in comps])
        if apply_ln:
            stack = self._apply_ln(stack, layer, mlp_input, ps, Slice(None), True)
        stack = self._wrap(stack)
        return (stack, labels) if return_labels else stack

    def stack_head_results(self, layer=-1, return_labels=False, incl_remainder=False,
                           pos_slice=None, apply_ln=False):
        """Every head's output `z_h W_O[h]` (no bias) of the layers before `layer`:
        [layer·n_heads, *batch_and_pos, d_model], labels "L{l}H{h}". incl_remainder adds
        "remainder" = the residual stream entering `layer` minus their sum (embeddings,
        biases, MLPs). apply_ln: apply_ln_to_stack with that layer's cached scale."""
        np = _arrays.np
        c = self._cfg()
        L, H = c["n_layers"], c["n_heads"]
        layer = self._layer_arg(layer)
        ps = Slice(pos_slice)
        comps, labels = [], []
        for l in range(layer):
            r = ps.apply(self._get(f"blocks.{l}.attn.hook_result"), -3)  # [..., H, D]
            comps.append(np.moveaxis(r, -2, 0))
            labels += [f"L{l}H{h}" for h in range(H)]
        resid_key = f"blocks.{L - 1}.hook_resid_post" if layer == L else \
            f"blocks.{layer}.hook_resid_pre"
        if comps:
            stack = np.concatenate(comps, axis=0)
            if incl_remainder:
                rest = ps.apply(self._get(resid_key), -2) - stack.sum(0, dtype=np.float64)
                stack = np.concatenate([stack, rest.astype(stack.dtype)[None]], axis=0)
                labels.append("remainder")
        elif incl_remainder:
            stack = ps.apply(self._get(resid_key), -2)[None]
            labels.append("remainder")
        else:
            shape = ps.apply(self._get("hook_embed"), -2).shape
            stack = np.zeros((0,) + shape, dtype=np.float32)
        if apply_ln:
            stack = self._apply_ln(stack, layer, False, ps, Slice(None), True)
        stack = self._wrap(stack)
        return (stack, labels) if return_labels else stack

    def stack_activation(self, activation_name, layer=-1, sublayer_type=None):
        """The activation `activation_name` (a short name, as act_name) of every layer
        before `layer`, stacked: [layer, *its shape]."""
        np = _arrays.np
        layer = self._layer_arg(layer)
        return self._wrap(np.stack([self._get((activation_name, l, sublayer_type))
                                    for l in range(layer)]))

    def apply_ln_to_stack(self, residual_stack, layer=None, mlp_input=False, pos_slice=None,
                          batch_slice=None, has_batch_dim=True, recompute_ln=False):
        """A stack of residual-stream components [components, *batch_and_pos, d_model]
        as the LayerNorm entering `layer` (ln1, or ln2 with mlp_input; ln_final for
        None / -1 / n_layers) sees it: each component centred and divided by the scale of
        the cached stream at that point (the scale is global to the stream, so the
        components stay additive). No gain or bias (see the module docstring).
        pos_slice / batch_slice: what was applied to the stack's positions / batch (the
        same is applied to the scale; batch_slice is also applied to the stack).
        recompute_ln (final layer only): each component through ln_final (gain and bias
        included) with its own statistics, the logit lens. Unchanged for a model without
        LayerNorm."""
        np = _arrays.np
        stack = self._check_stack(residual_stack)
        layer = self._layer_arg(layer)
        if mlp_input and layer == self._cfg()["n_layers"]:
            raise ValueError("mlp_input must be False for the final layer (ln_final)")
        out = self._apply_ln(stack, layer, mlp_input, Slice(pos_slice), Slice(batch_slice),
                             has_batch_dim, recompute_ln)
        return self._wrap(out)

    def _check_stack(self, residual_stack):
        stack = _np(residual_stack)
        D = self._cfg()["d_model"]
        if stack.ndim < 2 or stack.shape[-1] != D:
            raise ValueError(f"residual_stack must be [components, ..., d_model={D}], got "
                             f"shape {stack.shape}")
        return stack

    def _apply_ln(self, stack, layer, mlp_input, ps, bs, has_batch_dim, recompute_ln=False):
        np = _arrays.np
        c = self._cfg()
        if not c["layer_norm"]:
            return stack
        if has_batch_dim:
            stack = bs.apply(stack, 1)
        dtype = stack.dtype if stack.dtype.kind == "f" else np.float64
        x = stack.astype(np.float64)
        x = x - x.mean(-1, keepdims=True)
        if recompute_ln and layer == c["n_layers"]:
            x = x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS)
            w = self.model.get("ln_final.w").astype(np.float64)
            b = self.model.get("ln_final.b").astype(np.float64)
            return (x * w + b).astype(dtype)
        if layer == c["n_layers"]:
            scale = self._ln_scale(None, None)
        else:
            scale = self._ln_scale(layer, "ln2" if mlp_input else "ln1")
        scale = ps.apply(scale, -2)
        if self.has_batch_dim:
            scale = bs.apply(scale, 0)
        return (x / scale).astype(dtype)

    def logit_attrs(self, residual_stack, tokens, incorrect_tokens=None, pos_slice=None,
                    batch_slice=None, has_batch_dim=True):
        """Direct logit attribution [components, *batch_and_pos]: each component, through
        apply_ln_to_stack() for the final LayerNorm, dotted with the residual direction of
        `tokens` (Model.tokens_to_residual_directions(); minus that of incorrect_tokens
        when given: a logit difference). tokens: an id, a str (one token), or an array of
        ids matching the stack's batch/position dimensions."""
        np = _arrays.np
        model = self._need_model()
        dirs = _np(model._residual_directions(tokens))
        if incorrect_tokens is not None:
            if _token_shape(tokens) != _token_shape(incorrect_tokens):
                raise ValueError(f"tokens and incorrect_tokens must have the same shape, got "
                                 f"{_token_shape(tokens)} and {_token_shape(incorrect_tokens)}")
            dirs = dirs - _np(model._residual_directions(incorrect_tokens))
        scaled = self._apply_ln(self._check_stack(residual_stack), self._cfg()["n_layers"],
                                False, Slice(pos_slice), Slice(batch_slice), has_batch_dim)
        out = (scaled.astype(np.float64) * dirs).sum(-1)
        return self._wrap(out.astype(np.float32))


def _token_shape(t):
    if isinstance(t, (str, numbers.Integral)):
        return ()
    return tuple(_np(t).shape)
