"""FactoredMatrix: a matrix kept as the product of two factors, M = A B.

The QK and OV circuits of an attention head (Elhage et al. 2021, *A Mathematical
Framework for Transformer Circuits*, "Splitting attention heads into QK and OV circuits")
are d_model x d_model matrices of rank at most d_head, and the full circuits
W_E QK W_Eᵀ and W_E OV W_U are d_vocab x d_vocab. Kept as two factors
A [..., ldim, mdim] and B [..., mdim, rdim], products, norms, singular values and
eigenvalues cost O(mdim²·(ldim + rdim)) instead of forming ldim x rdim.

The class has TransformerLens's FactoredMatrix interface and meaning (A, B, AB, BA, T,
svd() -> (U, S, V), U, S, V, eigenvalues, norm(), __getitem__ on leading dimensions,
@ with arrays and factored matrices, * with scalars, make_even(), get_corner(),
collapse_l(), collapse_r(), unsqueeze(), pair, shape, ndim, ldim, mdim, rdim). It is
written on NumPy (float64 or float32, as the factors are given); when a factor is a
PyTorch tensor every array it returns is a PyTorch tensor (CPU), so it also works on
the tensors of induct.lens.HookedTransformer.

Differences from TransformerLens: none in meaning. norm() is computed from the Gram
matrices of the factors (‖AB‖²_F = tr(AᵀA BBᵀ)), the same value as TransformerLens's
sqrt(Σ S²) without an SVD; the SVD has TransformerLens's sign and ordering conventions
only up to the usual freedom of an SVD (columns of U and V may flip sign together).
"""
import numbers

from . import _arrays

__all__ = ["FactoredMatrix", "composition_scores"]


def _torch():
    import torch
    return torch


def _is_torch(x):
    mod = type(x).__module__
    return mod.startswith("torch") and hasattr(x, "detach")


def _to_torch(x):
    """A tensor of a NumPy array (shares memory when it is contiguous and writable)."""
    np = _arrays.np
    a = np.asarray(x)
    if not a.flags.c_contiguous or not a.flags.writeable:
        a = a.copy()
    return _torch().from_numpy(a)


def _as_numpy(x):
    """A NumPy array of x (a torch tensor is viewed, not copied, when on the CPU)."""
    np = _arrays.np
    if isinstance(x, FactoredMatrix):
        raise TypeError("expected an array, got a FactoredMatrix")
    if _is_torch(x):
        return x.detach().cpu().numpy()
    if isinstance(x, _arrays.Shaped):
        return np.asarray(x.data).reshape(x.shape)
    a = np.asarray(x)
    if a.dtype.kind not in "fc":
        a = a.astype(np.float64) if a.dtype.kind in "iub" else a
    return a


class FactoredMatrix:
    """M = A @ B kept as its factors A [..., ldim, mdim] and B [..., mdim, rdim] (leading
    dimensions broadcast). TransformerLens's FactoredMatrix: see the module docstring.
    Thread-safe as far as NumPy is (the object is immutable; svd() is computed once)."""

    # NumPy: `array @ factored` must call our __rmatmul__, not build an object array.
    __array_ufunc__ = None
    __array_priority__ = 1000

    def __init__(self, A, B):
        np = _arrays.np
        if np is None:
            raise RuntimeError("FactoredMatrix needs NumPy")
        self._torch = _is_torch(A) or _is_torch(B)
        a, b = _as_numpy(A), _as_numpy(B)
        if a.ndim < 2 or b.ndim < 2:
            raise ValueError(f"factors must be at least 2-D, got shapes {a.shape} and {b.shape}")
        if a.shape[-1] != b.shape[-2]:
            raise ValueError(f"factored matrix must match on the inner dimension, shapes were "
                             f"A: {a.shape}, B: {b.shape}")
        try:
            lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError as e:
            raise ValueError(f"leading dimensions do not broadcast: A {a.shape}, "
                             f"B {b.shape}") from e
        self._a = np.broadcast_to(a, lead + a.shape[-2:])
        self._b = np.broadcast_to(b, lead + b.shape[-2:])
        self.ldim, self.mdim, self.rdim = a.shape[-2], a.shape[-1], b.shape[-1]
        self.shape = tuple(lead) + (self.ldim, self.rdim)
        self.has_leading_dims = len(lead) > 0
        self._svd = None

    # ---- conversions ----
    def _out(self, x):
        """NumPy result -> the caller's array type."""
        if self._torch:
            return _to_torch(x)
        return x

    def _new(self, a, b, torch_=None):
        f = FactoredMatrix(a, b)
        f._torch = self._torch if torch_ is None else torch_
        return f

    @property
    def A(self):
        """The left factor [..., ldim, mdim]."""
        return self._out(self._a)

    @property
    def B(self):
        """The right factor [..., mdim, rdim]."""
        return self._out(self._b)

    @property
    def pair(self):
        """(A, B)."""
        return self.A, self.B

    @property
    def ndim(self):
        """Number of dimensions of the represented matrix (leading ones included)."""
        return len(self.shape)

    @property
    def AB(self):
        """The product [..., ldim, rdim], formed explicitly (ldim x rdim numbers per
        matrix: for a full circuit d_vocab²; use the factored operations instead when
        that is large)."""
        return self._out(self._a @ self._b)

    @property
    def BA(self):
        """The reverse product [..., mdim, mdim]; only when ldim == rdim. Its eigenvalues
        are the non-zero eigenvalues of AB (plus zeros)."""
        if self.ldim != self.rdim:
            raise ValueError(f"BA needs ldim == rdim, shape is {self.shape}")
        return self._out(self._b @ self._a)

    @property
    def T(self):
        """The transpose, (AB)ᵀ = Bᵀ Aᵀ, still factored."""
        np = _arrays.np
        return self._new(np.swapaxes(self._b, -1, -2), np.swapaxes(self._a, -1, -2))

    # ---- products ----
    def __matmul__(self, other):
        np = _arrays.np
        if isinstance(other, FactoredMatrix):
            out = (self @ other._a) @ other._b
            out._torch = self._torch or other._torch
            return out
        torch_ = self._torch or _is_torch(other)
        o = _as_numpy(other)
        if o.ndim < 2:  # a vector: collapse the factorisation
            r = (self._a @ (self._b @ o[..., None]))[..., 0]
            return _to_torch(r) if torch_ else r
        if o.shape[-2] != self.rdim:
            raise ValueError(f"right matrix must match on the inner dimension, shapes were "
                             f"self: {self.shape}, other: {o.shape}")
        if self.rdim > self.mdim:
            return self._new(self._a, self._b @ o, torch_)
        return self._new(self._a @ self._b, o, torch_)

    def __rmatmul__(self, other):
        np = _arrays.np
        if isinstance(other, FactoredMatrix):
            return other.__matmul__(self)
        torch_ = self._torch or _is_torch(other)
        o = _as_numpy(other)
        if o.shape[-1] != self.ldim:
            raise ValueError(f"left matrix must match on the inner dimension, shapes were "
                             f"self: {self.shape}, other: {o.shape}")
        if o.ndim < 2:
            r = ((o[..., None, :] @ self._a) @ self._b)[..., 0, :]
            return _to_torch(r) if torch_ else r
        if self.ldim > self.mdim:
            return self._new(o @ self._a, self._b, torch_)
        return self._new(o, self._a @ self._b, torch_)

    def __mul__(self, scalar):
        if _is_torch(scalar) or hasattr(scalar, "shape"):
            s = _as_numpy(scalar)
            if s.size != 1:
                raise ValueError(f"* takes a scalar, got shape {s.shape}; use @ for matrix "
                                 f"products")
            scalar = s.reshape(()).item()
        if not isinstance(scalar, numbers.Number):
            return NotImplemented
        return self._new(self._a * scalar, self._b)

    __rmul__ = __mul__

    # ---- decompositions ----
    def svd(self):
        """(U [..., ldim, mdim], S [..., mdim], V [..., rdim, mdim]) with
        AB = U diag(S) Vᵀ, computed from the SVDs of the factors (no ldim x rdim
        matrix). S is in descending order; columns past the rank have S = 0. (As
        TransformerLens: V, not Vᵀ; with ldim or rdim < mdim the shapes shrink to
        min(ldim, mdim) and min(rdim, mdim).)"""
        if self._svd is None:
            np = _arrays.np
            ua, sa, vha = np.linalg.svd(self._a, full_matrices=False)
            ub, sb, vhb = np.linalg.svd(self._b, full_matrices=False)
            # A B = ua diag(sa) vha ub diag(sb) vhb; the middle is small
            middle = sa[..., :, None] * (vha @ ub) * sb[..., None, :]
            um, sm, vhm = np.linalg.svd(middle, full_matrices=False)
            u = ua @ um
            v = np.swapaxes(vhb, -1, -2) @ np.swapaxes(vhm, -1, -2)
            self._svd = (u, sm, v)
        u, s, v = self._svd
        return self._out(u), self._out(s), self._out(v)

    @property
    def U(self):
        """Left singular vectors [..., ldim, mdim] (svd()[0])."""
        return self.svd()[0]

    @property
    def S(self):
        """Singular values [..., mdim], descending (svd()[1])."""
        return self.svd()[1]

    @property
    def V(self):
        """Right singular vectors [..., rdim, mdim] (svd()[2]); AB = U diag(S) Vᵀ."""
        return self.svd()[2]

    @property
    def eigenvalues(self):
        """Eigenvalues [..., mdim] (complex) of BA, which are those of AB apart from
        ldim - mdim extra zeros (if ABv = λv with λ ≠ 0 then BA(Bv) = λ(Bv)). Needs
        ldim == rdim. Framework paper, "Copying / Induction heads": the eigenvalues of
        the full OV circuit W_E W_OV W_U tell copying (positive real parts) from
        anti-copying."""
        np = _arrays.np
        if self.ldim != self.rdim:
            raise ValueError(f"eigenvalues need a square matrix, shape is {self.shape}")
        return self._out(np.linalg.eigvals(self._b @ self._a))

    def norm(self):
        """Frobenius norm [...] of AB: sqrt(tr(AᵀA BBᵀ)) (= sqrt(Σ S²))."""
        np = _arrays.np
        ata = np.swapaxes(self._a, -1, -2) @ self._a
        bbt = self._b @ np.swapaxes(self._b, -1, -2)
        sq = np.einsum("...ij,...ji->...", ata.astype(np.float64), bbt.astype(np.float64))
        dtype = np.result_type(self._a.dtype, self._b.dtype)
        return self._out(np.asarray(np.sqrt(np.maximum(sq, 0))).astype(dtype))

    def make_even(self):
        """The same matrix factored as (U diag(√S), diag(√S) Vᵀ): both halves carry half
        of the singular values."""
        np = _arrays.np
        u, s, v = self._svd_np()
        r = np.sqrt(s)
        return self._new(u * r[..., None, :], r[..., :, None] * np.swapaxes(v, -1, -2))

    def _svd_np(self):
        self.svd()
        return self._svd

    def collapse_l(self):
        """diag(S) Vᵀ [..., mdim, rdim]: the factorisation with the left orthogonal
        factor U removed (so ‖collapse_l()‖ = ‖AB‖)."""
        np = _arrays.np
        _, s, v = self._svd_np()
        return self._out(s[..., :, None] * np.swapaxes(v, -1, -2))

    def collapse_r(self):
        """U diag(S) [..., ldim, mdim]: the analogue of collapse_l() on the right."""
        u, s, _ = self._svd_np()
        return self._out(u * s[..., None, :])

    def unsqueeze(self, k):
        """A new leading dimension of size 1 at position k (counted on the leading
        dimensions plus the matrix's two, as TransformerLens)."""
        np = _arrays.np
        nd = len(self.shape)
        if not -nd - 1 <= k <= nd:
            raise IndexError(f"unsqueeze({k}) on a FactoredMatrix of {nd} dimensions")
        k = k if k >= 0 else k + nd + 1
        return self._new(np.expand_dims(self._a, k), np.expand_dims(self._b, k))

    def get_corner(self, k=3):
        """The top-left k x k corner of AB (and the first k of every leading dimension),
        formed from k rows of A and k columns of B only."""
        np = _arrays.np
        c = self._a[..., :k, :] @ self._b[..., :, :k]
        return self._out(c[tuple(slice(0, k) for _ in range(c.ndim))])

    # ---- indexing ----
    def __getitem__(self, idx):
        """Index the leading dimensions (e.g. model.OV[layer, head] -> d_model x d_model);
        one or two further indices select rows of A / columns of B (an int keeps its
        dimension, as TransformerLens)."""
        if not isinstance(idx, tuple):
            idx = (idx,)
        idx = tuple(i.detach().cpu().numpy() if _is_torch(i) else i for i in idx)
        n = len([i for i in idx if i is not None])
        lead = len(self.shape) - 2
        if n <= lead:
            return self._new(self._a[idx], self._b[idx])
        if n == lead + 1:
            idx = _keep_dim(idx, -1)
            return self._new(self._a[idx], self._b[idx[:-1]])
        if n == lead + 2:
            idx = _keep_dim(_keep_dim(idx, -1), -2)
            return self._new(self._a[idx[:-1]], self._b[idx[:-2] + (slice(None), idx[-1])])
        raise IndexError(f"{idx} is too long an index for a FactoredMatrix of shape "
                         f"{self.shape}")

    def __repr__(self):
        return f"FactoredMatrix: Shape({self.shape}), Hidden Dim({self.mdim})"


def _keep_dim(idx, pos):
    """An int at position pos becomes a one-element slice (the dimension stays)."""
    idx = list(idx)
    v = idx[pos]
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = int(v)
        idx[pos] = slice(v, v + 1 if v != -1 else None)
    return tuple(idx)


def composition_scores(left, right, broadcast_dims=True):
    """‖L R‖_F / (‖L‖_F ‖R‖_F) of two factored matrices (TransformerLens's
    utils.composition_scores; Framework paper, "Q-, K- and V-Composition"). With
    broadcast_dims, the leading dimensions of left and right are crossed: the result is
    [*left_leading, *right_leading]."""
    np = _arrays.np
    if not isinstance(left, FactoredMatrix) or not isinstance(right, FactoredMatrix):
        raise TypeError("composition_scores takes two FactoredMatrix objects")
    torch_ = left._torch or right._torch
    if broadcast_dims:
        ll, rl = left.ndim - 2, right.ndim - 2
        for i in range(ll):
            right = right.unsqueeze(i)
        for i in range(rl):
            left = left.unsqueeze(i + ll)
    if left.rdim != right.ldim:
        raise ValueError(f"composition scores need left.rdim == right.ldim, shapes were "
                         f"left: {left.shape}, right: {right.shape}")
    prod = (left @ right).norm()
    out = _as_numpy(prod) / _as_numpy(left.norm()) / _as_numpy(right.norm())
    return _to_torch(out) if torch_ else out
