"""The local learning coefficient (LLC) by SGLD: `Model.llc(...)`, masks by
TransformerLens name and by head (`Model.llc_mask(...)`), and `llc_sample(...)` for a
Python potential. Definitions, every setting and the diagnostics: docs/llc.md.

Configuration keywords are the fields of induct_llc_config: chains (4), draws (200),
burnin (0), every (1), batch (32), seq_len (0 = n_ctx), init_batches (0 = chains),
nbeta_rule ('batch', 'tokens', 'data' or 'fixed'; default 'batch'), nbeta, n_data,
epsilon (0.01), gamma (0), max_increase (0 = off), seed (0), batch_offset (0), split
('train' or 'eval'), mala (False), paired (False: devinterp's estimate; True: each draw
against its own minibatch's loss at w*). Giving `nbeta` without a rule means 'fixed', giving
`n_data` means 'data'. Defaults (in parentheses) come from the library.
"""
import numbers

from . import _arrays
from ._capi import LLCConfig, LLCSummary, Out, byte_pointer, call, llc_potential, new_struct
from ._errors import BufferTooSmall, Interrupted

#: INDUCT_LLC_NBETA_* rules by name.
NBETA_RULE = {"batch": 0, "tokens": 1, "data": 2, "fixed": 3}
SPLIT = {"train": 0, "eval": 1}
#: induct_llc_result_get() arrays: (attribute, INDUCT_LLC_* value).
_ARRAYS = (("chain_llc", 0), ("draw_losses", 1), ("burnin_losses", 2), ("chain_below", 3),
           ("chain_mala", 4), ("init_losses", 5), ("draw_ref_losses", 6))


class LLCResult:
    """An LLC estimate, copied out of the library.

    Scalars: llc_mean, llc_std (over chains, n - 1), llc_se (llc_std / sqrt(chains)),
    init_loss (L(w*), nats), nbeta, below_init (fraction of draws below L(w*)),
    mala_accept (NaN unless mala=True), n_sampled, chains, draws, steps, init_batches,
    paired. Arrays (float64; NumPy when importable): chain_llc [chains], draw_losses
    [chains, draws], burnin_losses [chains, burnin], chain_below [chains], chain_mala
    [chains], init_losses [init_batches], draw_ref_losses [chains, draws] (the draws'
    minibatches at w*; None unless paired)."""

    def __init__(self, handle):
        s = new_struct(LLCSummary)
        call("induct_llc_result_summary", handle, s)
        for name, _ in LLCSummary._fields_:
            if name not in ("size", "reserved0"):
                setattr(self, name, getattr(s, name))
        burnin = 0
        for attr, which in _ARRAYS:
            if attr == "draw_ref_losses" and not self.paired:
                self.draw_ref_losses = None
                continue
            n = Out("size")
            try:
                call("induct_llc_result_get", handle, which, None, 0, n)
            except BufferTooSmall:  # asked for the length: it is in n
                pass
            buf = _arrays.buffer(n.value, "d")
            call("induct_llc_result_get", handle, which, buf, n.value, Out("size"))
            if attr in ("draw_losses", "draw_ref_losses"):
                buf = _arrays.shaped(buf, (self.chains, self.draws))
            elif attr == "burnin_losses":
                burnin = n.value // self.chains
                buf = _arrays.shaped(buf, (self.chains, burnin))
            setattr(self, attr, buf)
        self.burnin = burnin

    def as_dict(self):
        """Every field as a dict (arrays as lists), e.g. for json.dump."""
        out = {}
        for k, v in vars(self).items():
            out[k] = v.tolist() if hasattr(v, "tolist") else v
        return out

    def __repr__(self):
        return (f"LLCResult(llc={self.llc_mean:.4g} ± {self.llc_se:.2g} (SE), "
                f"chains={self.chains}, draws={self.draws}, nbeta={self.nbeta:.4g}, "
                f"init_loss={self.init_loss:.5g}, below_init={self.below_init:.3f})")


def _config(kw):
    kw = dict(kw)
    if "nbeta_rule" not in kw:
        if "nbeta" in kw:
            kw["nbeta_rule"] = "fixed"
        elif "n_data" in kw:
            kw["nbeta_rule"] = "data"
    for flag in ("mala", "paired"):
        if flag in kw:
            kw[flag] = int(bool(kw[flag]))
    return LLCConfig.from_kwargs(kw, {"nbeta_rule": NBETA_RULE, "split": SPLIT})


def _result(ptr_out):
    handle = ptr_out.value
    try:
        return LLCResult(handle)
    finally:
        call_free(handle)


def call_free(handle):
    from ._capi import lib
    lib.induct_llc_result_free(handle)


class ModelLLC:
    """Model methods for the local learning coefficient (mixed into induct.Model)."""

    def llc_mask(self, spec):
        """A uint8 mask over the parameters in storage order from `spec`: a tensor name or
        prefix ('blocks.1.attn.W_Q', 'blocks.1', '' for all), a (name, head) pair
        (('blocks.1.attn', 0): that head's W_Q, W_K, W_V, W_O slices), or a list of
        those (their union). Errors come from induct_llc_mask_select()."""
        n = self.n_params
        mask = bytearray(n) if _arrays.np is None else _arrays.np.zeros(n, dtype="uint8")
        items = [spec] if isinstance(spec, (str, tuple)) else list(spec)
        if not items:
            raise ValueError("an empty mask specification selects nothing")
        for it in items:
            name, head = (it, -1) if isinstance(it, str) else it
            if not isinstance(name, str) or not isinstance(head, numbers.Integral):
                raise TypeError(f"mask item must be a name or (name, head), got {it!r}")
            call("induct_llc_mask_select", self, name.encode(), int(head), byte_pointer(mask), n)
        return mask

    def llc(self, dataset, mask=None, **config):
        """Estimate the local learning coefficient at the current weights by SGLD on
        minibatches of `dataset` (induct_llc_estimate(); docs/llc.md). `mask`: None (every
        parameter), a specification as for llc_mask(), or a uint8/bool array of
        n_params entries. The weights are unchanged afterwards (bit for bit); the
        gradient buffer is overwritten. Raises NumericError when a chain diverges.
        Returns an LLCResult."""
        cfg = _config(config)
        buf = None
        if mask is not None:
            if isinstance(mask, (str, tuple)) or (isinstance(mask, list) and mask
                                                   and not isinstance(mask[0], numbers.Number)):
                buf = self.llc_mask(mask)
            else:
                np = _arrays.np
                if np is not None:
                    buf = np.ascontiguousarray(np.asarray(mask).astype("uint8").ravel())
                else:
                    buf = bytearray(int(bool(v)) for v in mask)
        out = Out("handle")
        call("induct_llc_estimate", out, self, dataset, byte_pointer(buf),
             0 if buf is None else len(buf), cfg)
        return _result(out)


def llc_sample(potential, w_star, mask=None, **config):
    """Estimate the learning coefficient of a Python potential at `w_star` with the
    library's sampler (induct_llc_sample()): `potential(w, batch) -> (loss, grad)` with
    `w` a read-only float64 array (the current weights) and `batch` the minibatch index
    (ignore it for a potential without data). Needs NumPy. `mask`: None or dim 0/1
    entries. Keywords as Model.llc (batch, seq_len and split play no part except in the
    nbeta rules). Returns an LLCResult; an exception in `potential` is re-raised."""
    np = _arrays.np
    if np is None:
        raise ImportError("llc_sample needs NumPy")
    w = np.ascontiguousarray(np.asarray(w_star, dtype=np.float64).ravel())
    m = None if mask is None else np.ascontiguousarray(np.asarray(mask).astype("uint8").ravel())
    if m is not None and m.size != w.size:
        raise ValueError(f"mask has {m.size} entries, w_star {w.size}")
    cfg = _config(config)
    raised = []
    fn = llc_potential(potential, raised)
    out = Out("handle")
    try:
        call("induct_llc_sample", out, fn, None, w, w.size, byte_pointer(m), cfg)
    except Interrupted:
        if raised:
            raise raised[0] from None
        raise
    return _result(out)
