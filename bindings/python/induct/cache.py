"""A cache that fits: `Model.run_with_cache()` with name patterns, layer ranges, reductions
computed inside the pass, and the cache's size known (and bounded) before the pass runs.

    plan = model.cache_plan(tokens, names="blocks.*.attn.hook_pattern", layers=range(1, 2),
                            reduce=induct.reduce.mean())
    plan.total_bytes                     # what the call would allocate, before it runs
    logits, cache = model.run_with_cache(tokens, names="pattern", layers=[1],
                                         reduce={"pattern": induct.reduce.mean()},
                                         max_bytes=64 << 20)

Selecting points (`names`, as before plus patterns; every entry must match at least one of
the model's points, so a typo is an error, not an empty cache):
- a full hook point name ("blocks.1.attn.hook_pattern"), or a TransformerLens (name, layer)
  tuple, as before;
- a glob pattern: with a dot, over the full names ("blocks.*.attn.hook_*",
  "blocks.[01].hook_resid_*"); without, over the last part of the name, its "hook_"
  optional ("resid_*", "hook_[qkv]"); or a compiled regular expression (re.compile(...),
  matched against the full name);
- a short name without a layer ("pattern", "hook_z", "resid_pre", "normalized"; the aliases
  of induct.act_name), or the end of a name ("attn.hook_pattern", "ln2.hook_normalized"):
  that point in every layer;
- a predicate on the full name, as before; None: every point but attn.hook_result.
`layers` (an int, a range, a slice or an iterable of ints; negative counts from the end) keeps
the points of those blocks only; points outside the blocks (hook_embed, hook_pos_embed,
ln_final.hook_normalized) are then kept only when named in full.

`reduce`: one reduction for every selected point, or a dict {pattern: reduction} (patterns
as for names; a point no key matches is kept in full; one that two keys match is an error).
A reduction (induct.reduce: mean over the batch, a pattern's diagonal, a norm, ... or any
function of an array) runs in the hook callback as the pass reaches the point, on a
read-only view of the activation, and its result is copied into an array allocated before
the pass; the full activation is never kept. The pass itself is the plain forward pass:
reading hooks change no bit of the logits.

`chunk`: run the batch in passes of at most this many sequences. The model's workspace
(Model.memory_used(): the activations of a whole pass, several times the logits) is then
that of a chunk, not of the batch. Each reduction's results of the parts make the whole
batch's: stacked when the result keeps the batch as its first axis (the full activation,
diagonal, norm over another axis, any function that does), added up in float64 for a sum,
weighted by the parts' sizes for a mean, the larger for a max; a reduction that does none of
these is refused with chunks. Results agree with one pass to float rounding.

Sizes: `max_bytes` bounds what the call allocates and returns: the cache's arrays, the
logits [B, T, d_vocab] (`logits=False`: none, and None is returned in their place) and, with
chunks, the float64 sums of sum and mean reductions. Over the budget the call raises
CacheTooLarge before the pass runs. The model's own workspace for the pass is not part of
this figure: it is bounded by the model's max_bytes (Model.set_max_bytes(), refused with
LimitExceeded before it is allocated) and made small by `chunk`.
Needs NumPy. The methods live in ModelCache, a base class of induct.Model."""
import fnmatch
import re

from . import _arrays
from ._errors import LimitExceeded


class CacheTooLarge(LimitExceeded):
    """run_with_cache(max_bytes=...) refused before the pass: the cache would take more.
    `.plan` is the CachePlan, `.max_bytes` the budget."""

    def __init__(self, message, plan, max_bytes):
        super().__init__(message, function="run_with_cache")
        self.plan = plan
        self.max_bytes = max_bytes


def _fmt_bytes(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


class CacheEntry:
    """One cached point: `name`, `shape` (the activation's), `out_shape` and `dtype` (what
    is kept), `nbytes` (of what is kept), `reduction` (None: the full activation),
    `combine` (how the parts of a chunked call make the whole: "whole" without chunks,
    "concat", "sum", "mean" or "max")."""

    def __init__(self, name, shape, out_shape, dtype, reduction):
        self.name, self.shape, self.out_shape = name, tuple(shape), tuple(out_shape)
        self.dtype, self.reduction = dtype, reduction
        self.combine = "whole"
        n = 1
        for d in self.out_shape:
            n *= d
        self.nbytes = n * dtype.itemsize
        full = 4
        for d in self.shape:
            full *= d
        self.full_nbytes = full

    def __repr__(self):
        red = f" -> {self.reduction.name} {list(self.out_shape)}" if self.reduction else ""
        return f"<CacheEntry {self.name} {list(self.shape)}{red}: {_fmt_bytes(self.nbytes)}>"


class CachePlan:
    """What run_with_cache() would keep for a [batch, seq_len] input, before it runs:
    `entries` (CacheEntry, in the order of `names`: each entry's points in pass order), `cache_bytes` (their arrays), `logits_bytes`
    (0 with logits=False), `scratch_bytes` (with chunks: the float64 sums of the parts of
    sum and mean reductions), `total_bytes` (all three: what max_bytes is compared with),
    `full_bytes` (the same points unreduced, for comparison), `chunk` (sequences per
    pass, None for one pass)."""

    def __init__(self, entries, batch, seq_len, logits_shape, chunk=None):
        self.entries = entries
        self.batch, self.seq_len, self.chunk = batch, seq_len, chunk
        self.logits_shape = logits_shape
        self.logits_bytes = 0
        if logits_shape:
            self.logits_bytes = 4 * logits_shape[0] * logits_shape[1] * logits_shape[2]
        self.cache_bytes = sum(e.nbytes for e in entries)
        self.full_bytes = sum(e.full_nbytes for e in entries)
        # in chunks, sums and means add up the parts in float64 arrays of their size
        self.scratch_bytes = sum(e.nbytes // e.dtype.itemsize * 8 for e in entries
                                 if e.combine in ("sum", "mean"))
        self.total_bytes = self.cache_bytes + self.logits_bytes + self.scratch_bytes

    @property
    def names(self):
        """The cached points' full names, in the cache's order."""
        return [e.name for e in self.entries]

    def __repr__(self):
        ch = f" chunk={self.chunk}" if self.chunk else ""
        lines = [f"<CachePlan batch={self.batch} seq_len={self.seq_len}{ch}: "
                 f"{len(self.entries)} points, cache {_fmt_bytes(self.cache_bytes)} "
                 f"(unreduced {_fmt_bytes(self.full_bytes)}), logits "
                 f"{_fmt_bytes(self.logits_bytes)}, total {_fmt_bytes(self.total_bytes)}"]
        lines += [f"  {e!r}" for e in self.entries]
        return "\n".join(lines) + ">"


def _layer_of(name):
    m = re.match(r"blocks\.(\d+)\.", name)
    return int(m.group(1)) if m else None


def _short(s):
    """'pattern' / 'hook_pattern' -> 'hook_pattern' (TransformerLens aliases applied)."""
    from .hooks import _ALIAS
    s = s[5:] if s.startswith("hook_") else s
    return "hook_" + _ALIAS.get(s, s)


class _Matcher:
    """One entry of `names` or a key of `reduce`: which full names it selects."""

    def __init__(self, spec, points):
        from .hooks import _key
        self.spec, self.explicit = spec, False
        if isinstance(spec, re.Pattern):
            self.test = lambda n: spec.fullmatch(n) is not None
        elif callable(spec):
            self.test = spec
        elif isinstance(spec, tuple):
            full = _key(spec)
            self.explicit = True
            self.test = lambda n: n == full
        elif isinstance(spec, str):
            if any(c in spec for c in "*?[") and "." in spec:
                self.test = lambda n: fnmatch.fnmatchcase(n, spec)
            elif any(c in spec for c in "*?["):  # over the last part, hook_ optional
                pat = spec if spec.startswith("hook_") else "hook_" + spec
                self.test = lambda n: fnmatch.fnmatchcase(n.rsplit(".", 1)[-1], pat)
            elif spec in points or spec.startswith(("blocks.", "ln_final.")) or \
                    spec in ("hook_embed", "hook_pos_embed"):
                self.explicit = True
                self.test = lambda n: n == spec
            elif "." in spec:  # the end of a name: that point in every layer
                self.test = lambda n: n.endswith("." + spec)
            else:  # a short name: that point in every layer
                short = _short(spec)
                self.test = lambda n: n.rsplit(".", 1)[-1] == short
        else:
            raise TypeError(f"a hook point name, pattern, (name, layer) tuple or predicate, "
                            f"got {spec!r}")

    def __call__(self, name):
        return bool(self.test(name))


def _layer_set(layers, n_layers):
    if layers is None:
        return None
    if isinstance(layers, bool):
        raise TypeError("layers must be an int, a range, a slice or ints, not a bool")
    if isinstance(layers, int):
        layers = [layers]
    elif isinstance(layers, slice):
        layers = range(n_layers)[layers]
    out = set()
    for layer in layers:
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise TypeError(f"layers must hold ints, got {layer!r}")
        if not -n_layers <= layer < n_layers:
            raise ValueError(f"layer {layer} out of range for a model of {n_layers} layers")
        out.add(layer % n_layers)
    return out


class ModelCache:
    """Cache-planning methods of induct.Model (run_with_cache's patterns, layers, reductions
    and budget; the plain cases go to induct.hooks.ModelHooks.run_with_cache)."""

    def _select(self, names, layers):
        points = self.hook_points()
        keep = _layer_set(layers, self.config["n_layers"])
        if names is None:
            chosen = [n for n in points if not n.endswith(".attn.hook_result")]
            explicit = set()
        else:
            specs = [names] if isinstance(names, (str, re.Pattern)) or callable(names) else names
            if isinstance(specs, tuple) and len(specs) == 2 and isinstance(specs[1], int):
                specs = [specs]  # one (name, layer) tuple
            matchers = [_Matcher(s, points) for s in specs]
            for m in matchers:
                if m.explicit and not any(m(n) for n in points):
                    # the library's own error for an unknown name or a missing point
                    self.hook_shape(m.spec, 1, 2)
            # in the order given, each entry's points in pass order, each point once
            chosen, explicit = [], set()
            for m in matchers:
                for n in points:
                    if m(n):
                        if n not in chosen:
                            chosen.append(n)
                        if m.explicit:
                            explicit.add(n)
            for m in matchers:
                if not callable(m.spec):  # a predicate may select nothing
                    if not any(m(n) for n in points):
                        raise ValueError(f"names: {m.spec!r} matches no hook point of this "
                                         f"model (model.hook_points() lists them)")
        if keep is not None:
            chosen = [n for n in chosen
                      if (n in explicit if _layer_of(n) is None else _layer_of(n) in keep)]
        return chosen

    def _reductions(self, chosen, reduce):
        from . import reduce as R
        if reduce is None:
            return {}
        if not isinstance(reduce, dict):
            r = R.as_reduction(reduce)
            return {n: r for n in chosen}
        points = self.hook_points()
        rules = [(_Matcher(k, points), R.as_reduction(v), k) for k, v in reduce.items()]
        out = {}
        for n in chosen:
            hit = [(r, k) for m, r, k in rules if m(n)]
            if len(hit) > 1:
                raise ValueError(f"reduce: {n} matches more than one key: "
                                 f"{[k for _, k in hit]}")
            if hit:
                out[n] = hit[0][0]
        for m, _, k in rules:
            if not any(m(n) for n in chosen):
                raise ValueError(f"reduce: key {k!r} matches none of the cached points "
                                 f"{chosen}")
        return out

    def cache_plan(self, tokens, names=None, layers=None, reduce=None, logits=True,
                   chunk=None):
        """What run_with_cache(tokens, names, layers=, reduce=, logits=, chunk=) would keep,
        without running anything: a CachePlan (its total_bytes is what max_bytes is
        compared with). `tokens` may be the tokens or just their shape (batch, seq_len)."""
        np = _numpy()
        if isinstance(tokens, tuple) and len(tokens) == 2 and all(
                isinstance(x, int) for x in tokens):
            B, T = tokens
        else:
            _, B, T = _arrays.tokens_in(tokens)
        if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int)
                                  or chunk < 1):
            raise ValueError(f"chunk must be a positive int (sequences per pass), got {chunk!r}")
        parts = -(-B // chunk) if chunk else 1
        chosen = self._select(names, layers)
        reds = self._reductions(chosen, reduce)
        entries = []
        for n in chosen:
            shape = self.hook_shape(n, B, T)
            r = reds.get(n)
            kind = "concat"
            if r is None:
                out_shape, dtype = shape, np.dtype(np.float32)
            else:
                try:
                    out_shape, dtype = r.out_spec(shape)
                    if parts > 1:
                        kind = r.combine(shape)
                except ValueError as e:
                    raise ValueError(f"reduce: {r.name} on {n} {list(shape)}: {e}") from None
                if kind is None:
                    raise ValueError(
                        f"reduce: {r.name} on {n} cannot run in chunks: its result neither "
                        f"keeps the batch as its first axis nor reduces it by a sum, mean or "
                        f"max (give the Reduction combine=, or no chunk)")
            e = CacheEntry(n, shape, out_shape, np.dtype(dtype), r)
            e.combine = kind if parts > 1 else "whole"
            entries.append(e)
        return CachePlan(entries, B, T, (B, T, self.config["d_vocab"]) if logits else None,
                         chunk=chunk if parts > 1 else None)

    def run_with_cache(self, tokens, names=None, *, layers=None, reduce=None, max_bytes=None,
                       logits=True, chunk=None, **kwargs):
        """One forward pass; returns (logits [B, T, V] or None with logits=False,
        ActivationCache). `names`: as before (None, a list of full names or (name, layer)
        tuples, a predicate), and also glob patterns, regular expressions and short names
        for every layer; `layers`: only these blocks' points; `reduce`: a reduction (or a
        {pattern: reduction} dict) computed inside the pass, so that the cache holds only
        its result; `chunk`: at most this many sequences per pass (the model's workspace is
        that of a chunk), the parts' results stacked or combined; `max_bytes`: refuse with
        CacheTooLarge, before the pass, when the arrays this call returns would take more
        (model.cache_plan() gives the figure). See induct.cache and docs/hooks.md."""
        np = _numpy()
        plan = self.cache_plan(tokens, names, layers, reduce, logits, chunk)
        if max_bytes is not None:
            if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
                raise ValueError(f"max_bytes must be a non-negative int, got {max_bytes!r}")
            if plan.total_bytes > max_bytes:
                big = max(plan.entries, key=lambda e: e.nbytes, default=None)
                largest = f"; the largest: {big.name} {list(big.out_shape)}, " \
                          f"{_fmt_bytes(big.nbytes)}" if big else ""
                scratch = f", chunk sums {_fmt_bytes(plan.scratch_bytes)}" \
                    if plan.scratch_bytes else ""
                raise CacheTooLarge(
                    f"run_with_cache: the cache would take {_fmt_bytes(plan.total_bytes)} "
                    f"({plan.total_bytes} bytes: {len(plan.entries)} arrays "
                    f"{_fmt_bytes(plan.cache_bytes)}, logits {_fmt_bytes(plan.logits_bytes)}"
                    f"{scratch}), over max_bytes={max_bytes}{largest}. Select fewer points "
                    f"(names=, layers=), reduce them inside the pass (reduce=, induct.reduce) "
                    f"or pass logits=False", plan, max_bytes)
        if logits and plan.chunk is None and not any(e.reduction for e in plan.entries):
            # the library's cache: each point computed straight into its array
            return super().run_with_cache(tokens, plan.names, **kwargs)
        if kwargs:
            raise TypeError(f"run_with_cache() got unexpected keyword arguments with reduce=, "
                            f"chunk= or logits=False: {sorted(kwargs)}")
        from .hooks import ActivationCache
        B = plan.batch
        outs = [np.empty(e.out_shape, e.dtype) for e in plan.entries]
        sums = {}   # float64 sums of the parts, for "sum" and "mean"
        for e, o in zip(plan.entries, outs):
            if e.combine in ("sum", "mean"):
                sums[e.name] = np.zeros(e.out_shape, np.float64)
            elif e.combine == "max":
                o.fill(-np.inf)
        part = [0, B]   # the sequences of the pass running now

        def keeper(e, out):
            def fn(act, _name):
                if e.reduction is None:
                    r = act
                else:
                    view = act.view()
                    view.flags.writeable = False  # a reduction must not change the pass
                    r = np.asarray(e.reduction(view))
                b0, b1 = part
                want = out.shape if e.combine != "concat" else (b1 - b0,) + out.shape[1:]
                if r.shape != want:
                    raise ValueError(f"reduce: {e.reduction.name} on {e.name} gave shape "
                                     f"{r.shape}, planned {want}")
                if e.combine == "whole":
                    out[...] = r
                elif e.combine == "concat":
                    out[b0:b1] = r
                elif e.combine == "max":
                    np.maximum(out, r, out=out)
                else:  # a part's mean weighs by its share of the batch
                    sums[e.name] += r.astype(np.float64) * ((b1 - b0) if e.combine == "mean" else 1)
            return fn

        toks = tokens
        if plan.chunk:
            toks = np.asarray(tokens)
            toks = toks.reshape(1, -1) if toks.ndim == 1 else toks
        lg_all = np.empty(plan.logits_shape, np.float32) if (logits and plan.chunk) else None
        with self.hooks([(e.name, keeper(e, o)) for e, o in zip(plan.entries, outs)]):
            step = plan.chunk or B
            for b0 in range(0, B, step):
                part[:] = [b0, min(B, b0 + step)]
                lg = self.forward(toks[b0:b0 + step] if plan.chunk else toks,
                                  logits=logits)[0]
                if lg_all is not None:
                    lg_all[b0:b0 + step] = lg
        for e, o in zip(plan.entries, outs):
            if e.combine == "sum":
                o[...] = sums[e.name]
            elif e.combine == "mean":
                o[...] = sums[e.name] / B
        return (lg_all if plan.chunk else lg), ActivationCache(zip(plan.names, outs))


def _numpy():
    if _arrays.np is None:
        raise RuntimeError("caches need NumPy")
    return _arrays.np
