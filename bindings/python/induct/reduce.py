"""Reductions for a cache that fits: functions that `Model.run_with_cache(reduce=...)` applies
to an activation inside the forward pass, in the hook callback at that point, so that only the
reduced array is kept (see induct.cache and docs/hooks.md, "A cache that fits").

    import induct
    logits, cache = model.run_with_cache(tokens, names="pattern",
                                         reduce=induct.reduce.diagonal(1))
    cache["pattern", 0]      # [batch, n_heads, T - 1]: each query's attention to the previous
                             # token, instead of [batch, n_heads, T, T]

A reduction is a `Reduction` (these functions make them) or any function of a NumPy array
that returns an array; it receives a read-only float32 view of the activation (shapes as in
docs/hooks.md: B = batch, T = query position, K = key position, H = n_heads, E = d_head,
D = d_model, M = d_mlp), valid only during the call. The size of its result is known before
the pass: built-in reductions state their output shape; for any other function the shape
and dtype come from calling it once on a read-only zero-stride view of the activation's
shape (np.broadcast_to of a single zero: no memory of that size is allocated, but the
function runs over that many elements)."""
import numpy as np

__all__ = ["Reduction", "mean", "sum", "max", "norm", "diagonal", "index", "chain"]

_builtin_sum, _builtin_max = sum, max


def _axes(axis, ndim):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} out of range for an activation of {ndim} dimensions")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis}")
    return out


def _drop(shape, axis):
    axes = _axes(axis, len(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


class Reduction:
    """A function applied to an activation inside the pass: `fn(activation) -> array`, with
    `shape(in_shape) -> out_shape` when the output shape is known without running it (else
    it is probed, see the module's docstring). `dtype` is the result's element type
    (float32 for the built-ins). `a.then(b)` applies b to a's result."""

    def __init__(self, fn, shape=None, dtype=None, name=None, combine=None):
        if not callable(fn):
            raise TypeError(f"a reduction needs a function, got {type(fn).__name__}")
        if not callable(combine) and combine not in (None, "concat", "sum", "mean", "max"):
            raise ValueError(f"combine must be None, 'concat', 'sum', 'mean', 'max' or a "
                             f"function of the activation's shape, got {combine!r}")
        self.fn = fn
        self._shape = shape
        self._dtype = np.dtype(dtype) if dtype is not None else None
        self.name = name or getattr(fn, "__name__", "reduction")
        self._combine = combine

    def combine(self, in_shape):
        """How results of passes over parts of the batch (run_with_cache(chunk=...)) make
        the whole batch's: "concat" (the result keeps the batch as its first axis: the
        parts are stacked), "sum", "mean" (weighted by the parts' sizes) or "max" (the
        result reduced the batch axis that way), or None (neither: refused with chunks).
        Functions of unknown kind are probed: "concat" when the first axis of the result
        follows the batch size."""
        in_shape = tuple(in_shape)
        if callable(self._combine):
            return self._combine(in_shape)
        if self._combine is not None:
            return self._combine
        outs = [self.out_spec((b,) + in_shape[1:])[0] for b in (2, 3)]
        if all(len(o) >= 1 and o[0] == b for o, b in zip(outs, (2, 3))) and \
                outs[0][1:] == outs[1][1:]:
            return "concat"
        return None

    def out_spec(self, in_shape):
        """(shape, dtype) of the result for an activation of shape `in_shape`. Raises
        ValueError when the reduction does not apply to that shape."""
        in_shape = tuple(int(n) for n in in_shape)
        if self._shape is not None and self._dtype is not None:
            return tuple(int(n) for n in self._shape(in_shape)), self._dtype
        probe = np.broadcast_to(np.zeros((), np.float32), in_shape)
        r = np.asarray(self.fn(probe))
        return r.shape, r.dtype

    def __call__(self, activation):
        return self.fn(activation)

    def then(self, other):
        """This reduction followed by `other` (a Reduction or a function)."""
        return chain(self, other)

    def __repr__(self):
        return f"<induct.reduce {self.name}>"


def as_reduction(r):
    """A Reduction for r (a Reduction or a function of an array)."""
    if isinstance(r, Reduction):
        return r
    if callable(r):
        return Reduction(r)
    raise TypeError(f"a reduction must be an induct.reduce.Reduction or a function, "
                    f"got {type(r).__name__}")


def _batch_kind(axis, kind):
    """How parts of the batch combine after a reduction over `axis`: as `kind` where it
    reduces the batch axis (0), else "concat"."""
    return lambda s: kind if 0 in _axes(axis, len(s)) else "concat"


def _along(op, label, axis):
    def shape(s):
        return _drop(s, axis)
    return Reduction(lambda a: op(a, axis=axis), shape=shape, dtype=np.float32,
                     name=f"{label}(axis={axis})", combine=_batch_kind(axis, label))


def mean(axis=0):
    """Mean over `axis` (an int or a tuple; default 0, the batch: every hook point's first
    dimension is the batch). float32, NumPy's pairwise summation."""
    return _along(np.mean, "mean", axis)


def sum(axis=0):  # noqa: A001 - the reduction's name
    """Sum over `axis` (default 0, the batch). float32."""
    return _along(np.sum, "sum", axis)


def max(axis=0):  # noqa: A001 - the reduction's name
    """Maximum over `axis` (default 0, the batch). float32."""
    return _along(np.max, "max", axis)


def norm(axis=-1):
    """Euclidean norm over `axis` (default the last: d_model of the residual stream,
    d_head of q/k/v/z, the key position of a pattern), e.g. [B, T, D] -> [B, T]. float32."""
    def fn(a):
        return np.sqrt(np.sum(np.square(a, dtype=np.float32), axis=axis, dtype=np.float32))
    return Reduction(fn, shape=lambda s: _drop(s, axis), dtype=np.float32,
                     name=f"norm(axis={axis})", combine=_batch_kind(axis, None))


def diagonal(offset=0):
    """Of an attention pattern or scores [B, H, T, K]: the attention of each query q to the
    key q − offset, [B, H, T − offset], entry [b, h, i] for query i + offset. offset 0: each
    token to itself; 1: to the previous token (a previous-token head's stripe); L − 1 on
    sequences that repeat a block of length L: to the token after the same token's previous
    occurrence (the induction stripe; Olsson et al. 2022, "In-context Learning and Induction
    Heads", the prefix-matching score)."""
    offset = int(offset)
    if offset < 0:
        raise ValueError(f"diagonal offset must be >= 0 (key = query - offset), got {offset}")

    def shape(s):
        if len(s) != 4 or s[2] != s[3]:
            raise ValueError(f"diagonal() needs an attention pattern or scores [B, H, T, T], "
                             f"got shape {s}")
        if offset >= s[2]:
            raise ValueError(f"diagonal offset {offset} >= seq_len {s[2]}")
        return (s[0], s[1], s[2] - offset)

    def fn(a):
        return np.diagonal(a, offset=-offset, axis1=2, axis2=3)
    return Reduction(fn, shape=shape, dtype=np.float32, name=f"diagonal({offset})",
                     combine="concat")


def index(key):
    """activation[key] (NumPy indexing), e.g. index((slice(None), -1)) for the last
    position of a [B, T, ...] point, or index((slice(None), slice(None), 3)) for head 3 of
    a [B, T, H, E] point."""
    return Reduction(lambda a: a[key], name=f"index({key!r})")


def chain(*reductions):
    """The reductions applied in turn (the first to the activation)."""
    rs = [as_reduction(r) for r in reductions]
    if not rs:
        raise ValueError("chain() needs at least one reduction")

    def fn(a):
        for r in rs:
            a = r(a)
        return a

    known = all(r._shape is not None and r._dtype is not None for r in rs)

    def shape(s):
        for r in rs:
            s, _ = r.out_spec(s)
        return s
    def combine(s):
        # parts combine as the last stage does when every stage before it keeps the batch
        for i, r in enumerate(rs):
            kind = r.combine(s)
            if i == len(rs) - 1:
                return kind
            if kind != "concat":
                return None
            s, _ = r.out_spec(s)
    return Reduction(fn, shape=shape if known else None,
                     dtype=rs[-1]._dtype if known else None,
                     name=" then ".join(r.name for r in rs), combine=combine)
