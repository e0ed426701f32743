"""Hook points in the style of TransformerLens: run_with_cache() and hooks().

Every forward pass passes named activations (`hook_embed`, `blocks.1.attn.hook_pattern`,
...; the table with shapes is in docs/hooks.md). `Model.run_with_cache(tokens)` returns
the logits and an ActivationCache indexed like TransformerLens's (`cache["pattern", 1]`,
`cache["blocks.0.attn.hook_z"]`); `with model.hooks([(name, fn), ...]):` makes
`model.forward()` call `fn(activation, hook)` with a writable NumPy view at each point
and the point as an induct.HookPoint (a str equal to its name, with TransformerLens's
.name, .layer() and .ctx); return an array to replace the activation, or change the
view in place; so do
`model.backward()` and `Optimizer.train_step()` inside the block, whose gradients treat
what a hook wrote as constants. With grad_shards = S (or a communicator) a step calls
each hook once per shard of batch/S sequences; `model.hook_batch_index()` tells a hook
which sequences of the batch it holds. Backward hooks (`hooks(bwd_hooks=...)`) are
called by `model.backward()` with the gradient of the mean loss at their point, which
they may change (what they leave flows on); `run_with_cache(incl_bwd=True)` caches those
gradients as name + "_grad".
Needs NumPy. The methods live in ModelHooks, a base class of induct.Model."""
import contextlib
import re

from . import _arrays
from ._capi import (Out, call, hook_array, logits_grad, name_array, pointer_array, size_array,
                    string_buffer)
from ._errors import BufferTooSmall, Interrupted
from .cache_tools import CacheTools

_ATTN = ("k", "v", "q", "z", "result", "pattern", "attn_scores", "k_smeared")
_MLP = ("pre", "post")
_ALIAS = {"attn": "pattern", "attn_logits": "attn_scores", "key": "k", "query": "q",
          "value": "v", "mlp_pre": "pre", "mlp_post": "post"}
_SHORT = re.compile(r"^([a-z_]+?)(\d+)([a-z]+\d?)?$")
_LAYER_TYPE = {"a": "attn", "m": "mlp", "b": "", "block": "", "blocks": "",
               "attention": "attn"}


def act_name(name, layer=None, layer_type=None):
    """The full hook point name, as TransformerLens's utils.get_act_name:
    act_name("pattern", 1) == "blocks.1.attn.hook_pattern",
    act_name("resid_pre", 0) == "blocks.0.hook_resid_pre",
    act_name("normalized", 1, "ln2") == "blocks.1.ln2.hook_normalized",
    act_name("normalized") == "ln_final.hook_normalized", and TransformerLens's
    shorthand act_name("k6") == "blocks.6.attn.hook_k",
    act_name("scale4ln1") == "blocks.4.ln1.hook_scale"; a full name is returned as is."""
    if ("." in name or name.startswith("hook_")) and layer is None and layer_type is None:
        return name
    m = _SHORT.match(name)
    if m is not None and layer is None:  # TransformerLens's shorthand: "k6", "scale4ln1"
        name, layer, layer_type = m.group(1), int(m.group(2)), m.group(3) or layer_type
    name = _ALIAS.get(name, name)
    full = f"blocks.{layer}." if layer is not None else ""
    if name in _ATTN:
        layer_type = "attn"
    elif name in _MLP:
        layer_type = "mlp"
    elif layer_type in _LAYER_TYPE:
        layer_type = _LAYER_TYPE[layer_type]
    if layer_type:
        full += f"{layer_type}."
    full += f"hook_{name}"
    if name in ("normalized", "scale") and layer is None:
        full = f"ln_final.{full}"
    return full


def _key(key):
    if isinstance(key, tuple):
        return act_name(*key)
    return act_name(key)


class ActivationCache(CacheTools, dict):
    """Activations by full hook point name (NumPy arrays, shapes as in docs/hooks.md;
    PyTorch tensors for an induct.lens.HookedTransformer). Indexing also takes
    TransformerLens's short forms: cache["pattern", 1], cache["normalized", 0, "ln1"],
    cache["embed"], cache["resid_post", -1] (a negative layer counts from the end). The
    residual-stream tools (accumulated_resid, decompose_resid, ...) are those of
    induct.cache_tools.CacheTools. ActivationCache(cache_dict, model, has_batch_dim=True)
    builds one from a dict of name -> activation, as TransformerLens's constructor (e.g.
    from hooks that copied activations or gradients): the entries are PyTorch tensors or
    NumPy arrays, kept as given."""

    def __init__(self, cache_dict=(), model=None, has_batch_dim=True):
        dict.__init__(self, cache_dict)
        if model is not None:
            self.model = model
        self.has_batch_dim = has_batch_dim
        self._torch = any(hasattr(v, "detach") for v in dict.values(self))

    def _full(self, key):
        if isinstance(key, tuple) and len(key) > 1 and isinstance(key[1], int) \
                and key[1] < 0 and self.model is not None:
            key = (key[0], self.model.config["n_layers"] + key[1]) + tuple(key[2:])
        return _key(key)

    def __getitem__(self, key):
        return dict.__getitem__(self, self._full(key))

    def __contains__(self, key):
        return dict.__contains__(self, self._full(key))

    def __repr__(self):
        return f"ActivationCache with keys {list(self.keys())}"


def _numpy():
    if _arrays.np is None:
        raise RuntimeError("hooks and caches need NumPy")
    return _arrays.np


class ModelHooks:
    """Hook-point methods of induct.Model."""

    def hook_points(self):
        """Every hook point name of this model, in the order a pass reaches them."""
        names = []
        while True:
            n = Out("size")
            try:
                call("induct_model_hook_point", self, len(names), None, 0, n)
            except IndexError:  # past the last point
                return names
            except BufferTooSmall:  # the length is in n
                pass
            buf = string_buffer(n.value)
            call("induct_model_hook_point", self, len(names), buf, n.value, Out("size"))
            names.append(buf.value.decode())

    def hook_shape(self, name, batch, seq_len):
        """Shape of hook point `name` for a [batch, seq_len] input."""
        shape = _arrays.buffer(4, "I")
        nd = Out("uint32")
        call("induct_model_hook_shape", self, _key(name).encode(), batch, seq_len, shape, nd,
             Out("size"))
        return tuple(int(shape[i]) for i in range(nd.value))

    def run_with_cache(self, tokens, names=None, incl_bwd=False, d_logits=None):
        """One forward pass; returns (logits [B, T, V], ActivationCache). `names`: None
        (every point but attn.hook_result, as TransformerLens without use_attn_result:
        the per-head results are n_heads times the attention output and cost a product
        of their own; name them to get them), a list of names (or TransformerLens
        (name, layer) tuples), or a predicate on the full name. The ablations in force
        apply; the logits are those of forward(). Inside `with model.hooks(...)` the
        hooks run and the cache holds what they left.

        incl_bwd=True: a forward and a backward pass of the mean next-token loss instead
        (as TransformerLens's run_with_cache(incl_bwd=True) calls backward() on the loss):
        returns (mean loss in nats, cache), the cache holding each point's activation and,
        under name + "_grad", d(mean loss)/d(activation) of the same shape (0 above the
        diagonal of the pattern and scores). The model's parameter gradients are those
        of backward() (get(name, grad=True)). Backward hooks in force run after the cache
        has copied the gradient that reached their point. With d_logits (as backward()'s:
        a function of the logits giving d(metric)/d(logits), or that array) the gradients
        are those of that metric instead of the loss (the loss is still returned): the
        forward and backward pass of attribution patching (induct.patching)."""
        np = _numpy()
        toks, B, T = _arrays.tokens_in(tokens)
        if incl_bwd:
            return self._run_with_cache_bwd(toks, B, T, names, d_logits)
        if d_logits is not None:
            raise ValueError("d_logits needs incl_bwd=True (it seeds the backward pass)")
        names = self._cache_names(names)
        bufs = [np.zeros(self.hook_shape(n, B, T), dtype=np.float32) for n in names]
        V = self.config["d_vocab"]
        logits = np.zeros((B, T, V), dtype=np.float32)
        if getattr(self, "_fwd_hooks", None):
            # inside `with model.hooks(...)`: the cache sees what the hooks left
            def copier(buf):
                def fn(act, _name):
                    buf[...] = act
                return fn
            outer = self._fwd_hooks
            self._fwd_hooks = outer + [(n, copier(b)) for n, b in zip(names, bufs)]
            try:
                self._forward_hooked(toks, B, T, logits.ravel(), None, Out("double"))
            finally:
                self._fwd_hooks = outer
        else:
            call("induct_model_run_with_cache", self, toks, B, T, name_array(names),
                 pointer_array(bufs), size_array([b.size for b in bufs]), len(names),
                 logits.ravel(), logits.size, Out("double"))
        return logits, ActivationCache(zip(names, bufs))

    def _cache_names(self, names):
        if names is None:
            return [n for n in self.hook_points() if not n.endswith(".attn.hook_result")]
        if callable(names):
            return [n for n in self.hook_points() if names(n)]
        return [_key(n) for n in names]

    def _run_with_cache_bwd(self, toks, B, T, names, d_logits=None):
        """run_with_cache(incl_bwd=True): one forward and backward pass with copying hooks
        on both sides (after the forward hooks in force, before the backward hooks)."""
        np = _numpy()
        names = self._cache_names(names)
        acts = {n: np.zeros(self.hook_shape(n, B, T), dtype=np.float32) for n in names}
        grads = {n: np.zeros_like(a) for n, a in acts.items()}

        def copier(buf):
            def fn(x, _name):
                buf[...] = x
            return fn
        outer_f = list(getattr(self, "_fwd_hooks", []))
        outer_b = list(getattr(self, "_bwd_hooks", []))
        self._fwd_hooks = outer_f + [(n, copier(a)) for n, a in acts.items()]
        self._bwd_hooks = [(n, copier(g)) for n, g in grads.items()] + outer_b
        mean = Out("double")
        try:
            if d_logits is not None:
                self._backward_from_logits(toks, B, T, d_logits, mean)
            else:
                self._call_hooked("induct_model_backward_with_grad_hooks", self, toks, B, T,
                                  _HOOKS, _GRAD_HOOKS, mean)
        finally:
            self._fwd_hooks, self._bwd_hooks = outer_f, outer_b
        cache = ActivationCache()
        for n in names:
            dict.__setitem__(cache, n, acts[n])
        for n in names:
            dict.__setitem__(cache, n + "_grad", grads[n])
        return mean.value, cache

    @contextlib.contextmanager
    def hooks(self, fwd_hooks=(), bwd_hooks=(), reset_hooks_end=True, clear_contexts=False):
        """Within the block, forward() runs with these hooks: a list of (name, fn), name a
        hook point name (or a TransformerLens (name, layer) tuple) or a filter function
        on full names (every point it accepts), fn(activation, hook) -> None or an array
        of the activation's shape. `activation` is a writable float32 NumPy view on the
        pass's memory, valid during the call only (for a HookedTransformer a PyTorch
        tensor of its own, a copy that may be kept, written back if changed); change it
        in place or return a replacement. `hook` is an induct.HookPoint: a str
        equal to the full name, with TransformerLens's .name, .layer() and .ctx. Nested
        blocks add their hooks after the outer ones. reset_hooks_end=False keeps the
        hooks after the block (until Model.reset_hooks()); clear_contexts empties every
        HookPoint.ctx at the end. bwd_hooks: the same pairs, called by backward() (and
        run_with_cache(incl_bwd=True)) during the backward pass with `activation` = the
        gradient of the mean next-token loss with respect to the activation at the point
        (same shape), in the reverse of the forward order; what they leave (in place, or
        a returned replacement) is the gradient that flows on upstream."""
        _numpy()
        tag = object()
        added = [(n, f, tag) for n, f in self._resolve_hooks(fwd_hooks)]
        added_b = [(n, f, tag) for n, f in self._resolve_hooks(bwd_hooks)]
        self._fwd_hooks = list(getattr(self, "_fwd_hooks", [])) + added
        self._bwd_hooks = list(getattr(self, "_bwd_hooks", [])) + added_b
        try:
            yield self
        finally:
            if reset_hooks_end:
                self._fwd_hooks = [h for h in self._fwd_hooks if len(h) < 3 or h[2] is not tag]
                self._bwd_hooks = [h for h in self._bwd_hooks if len(h) < 3 or h[2] is not tag]
            if clear_contexts:
                self.clear_contexts()

    def _resolve_hooks(self, pairs):
        """[(full name, fn)] of (name, tuple key or filter function, fn) pairs."""
        out = []
        for pair in pairs:
            try:
                name, fn = pair
            except (TypeError, ValueError):
                raise TypeError(f"a hook is a (name, function) pair, got {pair!r}") from None
            if not callable(fn):
                raise TypeError(f"the hook function for {name!r} is not callable: {fn!r}")
            if callable(name) and not isinstance(name, str):
                out += [(n, fn) for n in self.hook_points() if name(n)]
            else:
                out.append((_key(name), fn))
        return out

    def hook_batch_index(self):
        """Inside a hook: (first, batch), the index in the whole batch of the activation's
        first sequence and the whole batch's size. In a training step with grad_shards = S
        (or a communicator) a hook sees one shard of batch/S sequences at a time, in shard
        order (on a rank of P only its own shards); elsewhere first is 0 and batch is
        activation.shape[0]. Outside a hook: induct.StateError."""
        first, batch = Out("uint32"), Out("uint32")
        call("induct_model_hook_batch_index", self, first, batch)
        return first.value, batch.value

    def _call_hooked(self, name, *args):
        """Call C function `name` with (..., hooks, n_hooks, ...) spliced in where _HOOKS
        stands in args: the forward hooks of the enclosing hooks() blocks (and where
        _GRAD_HOOKS stands, the backward hooks). A hook's exception is re-raised."""
        np = _numpy()

        torch_mode = getattr(self, "_torch_mode", False)

        def wrap(f):
            def fn(act, hook_name):
                hp = self._hook_point(hook_name)
                if torch_mode:
                    # a tensor of its own: TransformerLens code keeps act.detach() (a
                    # view) after the call; the pass's memory is reused by the next pass.
                    # What the function leaves in it is written back.
                    own = act.copy()
                    r = f(self._as_tensor(own), hp)
                    if r is None and not np.array_equal(own.view(np.uint32),
                                                        act.view(np.uint32)):
                        act[...] = own
                else:
                    r = f(self._as_tensor(act), hp)
                if r is not None:
                    if hasattr(r, "detach"):  # a PyTorch tensor
                        r = r.detach().cpu().numpy()
                    r = np.asarray(r, dtype=np.float32)
                    try:
                        r = np.broadcast_to(r, act.shape)
                    except ValueError:
                        raise ValueError(f"the hook at {hp.name} returned shape {r.shape}; "
                                         f"the activation has shape {act.shape}") from None
                    act[...] = r
            return fn
        keeps = []
        for marker, hooks in ((_HOOKS, getattr(self, "_fwd_hooks", [])),
                              (_GRAD_HOOKS, getattr(self, "_bwd_hooks", []))):
            if not any(a is marker for a in args):
                continue
            arr, keep = hook_array([(h[0], wrap(h[1])) for h in hooks])
            keeps.append(keep)
            i = next(k for k, a in enumerate(args) if a is marker)
            args = args[:i] + (arr, len(hooks)) + args[i + 1:]
        try:
            call(name, *args)
        except Exception:
            for keep in keeps:
                if keep[0][0] is not None:
                    raise keep[0][0] from None
            raise

    def _forward_hooked(self, toks, B, T, lg, ls, mean):
        """forward() with the hooks of the enclosing hooks() blocks."""
        V = self.config["d_vocab"]
        self._call_hooked("induct_model_run_with_hooks", self, toks, B, T, _HOOKS, lg,
                          B * T * V if lg is not None else 0, ls, B * (T - 1) if T > 1 else 0,
                          mean)

    def _backward_from_logits(self, toks, B, T, d_logits, mean):
        """induct_model_backward_from_logits with the hooks in force: d_logits is a
        function of the logits (NumPy [B, T, V]) or an array of d(metric)/d(logits)."""
        np = _numpy()
        if callable(d_logits):
            func = d_logits
        else:
            arr = d_logits.detach().cpu().numpy() if hasattr(d_logits, "detach") else d_logits
            arr = np.asarray(arr, dtype=np.float32)

            def func(_logits):
                return arr
        raised = []
        fn = logits_grad(func, raised)
        try:
            self._call_hooked("induct_model_backward_from_logits", self, toks, B, T, _HOOKS,
                              _GRAD_HOOKS, fn, None, mean)
        except Interrupted:
            if raised:
                raise raised[0] from None
            raise

    def _backward_hooked(self, toks, B, T, mean):
        """backward() with the hooks: writing hooks are constant overwrites (no gradient
        to what they replaced); backward hooks get (and may change) the gradients at
        their points."""
        if getattr(self, "_bwd_hooks", None):
            self._call_hooked("induct_model_backward_with_grad_hooks", self, toks, B, T,
                              _HOOKS, _GRAD_HOOKS, mean)
        else:
            self._call_hooked("induct_model_backward_with_hooks", self, toks, B, T, _HOOKS,
                              mean)


#: Stand for the (hooks, n_hooks) pairs in ModelHooks._call_hooked's arguments: the
#: forward hooks and the backward (gradient) hooks.
_HOOKS = object()
_GRAD_HOOKS = object()


def train_step_hooked(opt, model, data, batch, seq_len, loss, is_dataset):
    """Optimizer.train_step() inside `with model.hooks(...)`: the step's forward pass runs
    the hooks and its backward pass follows what they wrote (with gradient shards or a
    communicator: each shard's pass, on its sequences). `data` is a Dataset
    (is_dataset) or tokens. Backward hooks are refused: the C library calls gradient
    hooks in Model.backward() only."""
    if getattr(model, "_bwd_hooks", None):
        raise NotImplementedError("backward hooks in a training step: libinduct calls "
                                  "gradient hooks in Model.backward() (and "
                                  "run_with_cache(incl_bwd=True)) only")
    if is_dataset:
        model._call_hooked("induct_train_step_with_hooks", opt, data, batch, seq_len, _HOOKS,
                           loss)
    else:
        toks, B, T = _arrays.tokens_in(data)
        model._call_hooked("induct_train_step_tokens_with_hooks", opt, toks, B, T, _HOOKS,
                           loss)
