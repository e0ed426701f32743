"""Arrays in and out: NumPy when importable, else array.array plus a shape.

No ctypes here: buffers are plain NumPy arrays or array.array objects, and _capi turns
them into C pointers (checking the element type) when a call passes them."""
import array
import math
import numbers

try:
    import numpy as np
except ImportError:  # the core works with the standard library alone
    np = None

#: array.array typecode -> NumPy dtype name, for the C element types we exchange.
KINDS = {"f": "float32", "d": "float64", "i": "int32", "I": "uint32"}
for _k in KINDS:  # the C side is float / double / int32_t / uint32_t
    if array.array(_k).itemsize != (8 if _k == "d" else 4):
        raise ImportError(f"array('{_k}') has itemsize {array.array(_k).itemsize}")


class Shaped:
    """A flat array.array with a row-major shape, returned when NumPy is not importable.

    `data` is the array.array ('f' float32, 'd' float64, 'i' int32, 'I' uint32) and
    `shape` a tuple. len(), iteration and indexing act on the flat data, as on the
    array.array itself; `tolist()` gives nested lists of `shape` (as NumPy's does)."""

    def __init__(self, data, shape):
        self.data = data
        self.shape = tuple(shape)
        if math.prod(self.shape) != len(data):
            raise ValueError(f"shape {self.shape} does not match {len(data)} elements")

    @property
    def ndim(self):
        """Number of dimensions, len(shape)."""
        return len(self.shape)

    def __len__(self):
        return len(self.data)

    def __iter__(self):
        return iter(self.data)

    def __getitem__(self, i):
        return self.data[i]

    def tolist(self):
        """Nested Python lists of `shape` (as NumPy's tolist())."""
        def nest(flat, shape):
            if len(shape) <= 1:
                return list(flat)
            step = len(flat) // shape[0] if shape[0] else 0
            return [nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
        return nest(self.data, self.shape)

    def __eq__(self, other):
        if isinstance(other, Shaped):
            return self.shape == other.shape and self.data == other.data
        return NotImplemented

    def __repr__(self):
        return f"Shaped(shape={self.shape}, data={self.data!r})"


def buffer(n, kind="f"):
    """A zeroed writable buffer of n elements of `kind` ('f', 'd', 'i', 'I')."""
    if np is not None:
        return np.zeros(n, dtype=KINDS[kind])
    return array.array(kind, bytes(array.array(kind).itemsize * n))


def shaped(buf, shape):
    """The flat buffer with its shape: a NumPy view, or a Shaped wrapper."""
    if np is not None:
        return buf.reshape(shape)
    return Shaped(buf, shape)


#: Ranges of the integer kinds: inputs outside them are refused, never wrapped.
INT_RANGE = {"i": (-2**31, 2**31 - 1), "I": (0, 2**32 - 1)}


def _int_refused(i, v, kind):
    from ._errors import OutOfRange  # here: _errors does not import this module
    lo, hi = INT_RANGE[kind]
    return OutOfRange(f"id {v} at flat index {i} is outside the range of C "
                      f"{'int32' if kind == 'i' else 'uint32'} [{lo}, {hi}] "
                      f"(refused, not wrapped)")


def _check_ints_np(a, kind):
    """Refuse a non-integer NumPy array (TypeError) or a value the integer kind cannot
    hold (OutOfRange); an empty array passes."""
    if a.size == 0:
        return
    if a.dtype.kind not in "iu":
        raise TypeError(f"integer ids expected, got an array of {a.dtype} "
                        f"(convert explicitly, e.g. with .astype(np.int32), if intended)")
    lo, hi = INT_RANGE[kind]
    if a.dtype.kind == "u" and int(np.iinfo(a.dtype).max) <= hi:
        return
    if a.dtype.kind == "i" and int(np.iinfo(a.dtype).min) >= lo and \
            int(np.iinfo(a.dtype).max) <= hi:
        return
    bad = np.flatnonzero((a.ravel() < lo) | (a.ravel() > hi))
    if bad.size:
        i = int(bad[0])
        raise _int_refused(i, int(a.ravel()[i]), kind)


def flat(values, kind="f"):
    """Flatten a NumPy array, array.array, Shaped or nested sequence into a contiguous
    buffer of `kind`; returns (buffer, shape). For the integer kinds ('i', 'I') every
    value must be an integer (else TypeError: floats are never truncated) that the kind
    holds (else OutOfRange: never wrapped)."""
    if np is not None:
        if kind in INT_RANGE:
            if isinstance(values, Shaped):
                values = np.asarray(values.data).reshape(values.shape)
            a = np.asarray(values)
            if a.dtype == object:  # Python ints beyond int64 / mixed objects
                flat_ = [_int_value(v, kind, i) for i, v in enumerate(a.ravel().tolist())]
                a = np.asarray(flat_, dtype=KINDS[kind]).reshape(a.shape)
            else:
                _check_ints_np(a, kind)
            a = np.ascontiguousarray(a, dtype=KINDS[kind])
            return a.ravel(), a.shape
        a = np.ascontiguousarray(np.asarray(values, dtype=KINDS[kind]))
        return a.ravel(), a.shape
    if isinstance(values, Shaped):
        if kind in INT_RANGE:
            return array.array(kind, [_int_value(v, kind, i)
                                      for i, v in enumerate(values.data)]), values.shape
        return array.array(kind, values.data), values.shape
    out = []
    shape = []

    def walk(x, depth):
        if isinstance(x, Shaped):
            x = x.tolist()
        if isinstance(x, (list, tuple, array.array, range)):
            if len(shape) == depth:
                shape.append(len(x))
            elif shape[depth] != len(x):
                raise ValueError("ragged nested sequence")
            for y in x:
                walk(y, depth + 1)
        else:
            if len(shape) != depth:
                raise ValueError("ragged nested sequence")
            out.append(x)
    walk(values, 0)
    if kind in INT_RANGE:
        return array.array(kind, [_int_value(v, kind, i) for i, v in enumerate(out)]), \
            tuple(shape)
    return array.array(kind, [float(v) for v in out]), tuple(shape)


def _int_value(v, kind, i):
    """One integer input: an int (or NumPy integer) within the kind's range."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"integer ids expected, got {type(v).__name__} {v!r} at flat "
                        f"index {i}")
    v = int(v)
    lo, hi = INT_RANGE[kind]
    if not lo <= v <= hi:
        raise _int_refused(i, v, kind)
    return v


def tokens_in(tokens):
    """Accept a nested list, array.array or NumPy array of token ids; return
    (int32 buffer, batch, seq_len) for a C `[batch][seq_len]` buffer."""
    buf, shape = flat(tokens, "i")
    if len(shape) == 1:
        shape = (1, shape[0])
    if len(shape) != 2:
        raise ValueError(f"tokens must be [batch, seq_len], got shape {tuple(shape)}")
    return buf, shape[0], shape[1]


def floats_in(values):
    """Any flat or nested float sequence / NumPy array -> (float32 buffer, n)."""
    buf, _ = flat(values, "f")
    return buf, len(buf)


def matrix_in(values, kind="f"):
    """A 2-D input -> (buffer, rows, cols)."""
    buf, shape = flat(values, kind)
    if len(shape) != 2:
        raise ValueError(f"expected a 2-D [rows, cols] input, got shape {tuple(shape)}")
    return buf, shape[0], shape[1]


def to_list(values):
    """Nested Python lists from a NumPy array, Shaped or nested sequence."""
    if hasattr(values, "tolist"):
        return values.tolist()
    return [to_list(v) if isinstance(v, (list, tuple)) else v for v in values]
