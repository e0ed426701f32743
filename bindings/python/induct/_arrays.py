"""Arrays in and out: NumPy when importable, else array('f'/'i') plus a shape."""
import array
import ctypes

try:
    import numpy as np
except ImportError:  # the core works with the standard library alone
    np = None


class Shaped:
    """A flat array.array with a shape, returned when NumPy is not importable."""

    def __init__(self, data, shape):
        self.data = data
        self.shape = tuple(shape)

    def __len__(self):
        return len(self.data)

    def __iter__(self):
        return iter(self.data)

    def tolist(self):
        return list(self.data)

    def __repr__(self):
        return f"Shaped(shape={self.shape}, data={self.data!r})"


def float_buffer(n):
    """A writable float32 buffer of n elements and its ctypes pointer."""
    if np is not None:
        a = np.empty(n, dtype=np.float32)
        return a, a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    a = array.array("f", bytes(4 * n))
    addr, _ = a.buffer_info()
    return a, ctypes.cast(addr, ctypes.POINTER(ctypes.c_float))


def int32_buffer(n):
    if np is not None:
        a = np.empty(n, dtype=np.int32)
        return a, a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
    a = array.array("i", bytes(4 * n))
    addr, _ = a.buffer_info()
    return a, ctypes.cast(addr, ctypes.POINTER(ctypes.c_int32))


def shaped(buf, shape):
    if np is not None:
        return buf.reshape(shape)
    return Shaped(buf, shape)


def tokens_in(tokens):
    """Accept a nested list, array.array or NumPy array of token ids; return
    (keepalive, pointer, batch, seq_len) for a C int32 [batch][seq_len] buffer."""
    if np is not None:
        a = np.ascontiguousarray(np.asarray(tokens), dtype=np.int32)
        if a.ndim == 1:
            a = a[None, :]
        if a.ndim != 2:
            raise ValueError(f"tokens must be [batch, seq_len], got shape {a.shape}")
        return a, a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), a.shape[0], a.shape[1]
    rows = tokens
    if rows and not isinstance(rows[0], (list, tuple, array.array)):
        rows = [rows]
    B, T = len(rows), len(rows[0]) if rows else 0
    if any(len(r) != T for r in rows):
        raise ValueError("tokens rows must all have the same length")
    a = array.array("i", [int(t) for r in rows for t in r])
    addr, _ = a.buffer_info()
    return a, ctypes.cast(addr, ctypes.POINTER(ctypes.c_int32)), B, T


def floats_in(values):
    """Accept any flat or nested float sequence / NumPy array; return (keepalive, ptr, n)."""
    if np is not None:
        a = np.ascontiguousarray(np.asarray(values, dtype=np.float32)).ravel()
        return a, a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), a.size
    flat = []

    def walk(x):
        if isinstance(x, (list, tuple, array.array, Shaped)):
            for y in x:
                walk(y)
        else:
            flat.append(float(x))
    walk(values)
    a = array.array("f", flat)
    addr, _ = a.buffer_info()
    return a, ctypes.cast(addr, ctypes.POINTER(ctypes.c_float)), len(a)
