"""libinduct: train small transformers and measure induction heads, from Python.

Pure-Python ctypes bindings over libinduct.so.<ABI>. Set INDUCT_LIBRARY to a library
path to override where it is loaded from. NumPy is optional: without it arrays come
back as array.array plus a shape (see induct._arrays.Shaped). Plots (matplotlib) are
in induct.plot, imported only when used. TransformerLens's names (HookedTransformer with
PyTorch tensors, HookedTransformerConfig, FactoredMatrix, utils) are in induct.lens.
Guide: docs/python.md.
"""
from ._capi import lib as _lib
from ._arrays import Shaped
from ._errors import (ABIMismatch, ArgumentOutOfRange, BufferTooSmall, FormatError,
                      InductError, Interrupted, InvalidArgument, IOFailure, LimitExceeded,
                      NotSupported, NumericError, OutOfMemory, OutOfRange, StateError)
from .analysis import (HEAD_CLASSES, PCA, Ablation, Attribution, HeadClassification,
                       IclGroups, LossVectors, MeanSE, PhaseWindow, batch_means,
                       classify_heads, icl_band, paired_difference, pca, pca_trajectories,
                       phase_window)
from .hooks import ActivationCache, act_name
from .hook_point import HookPoint
from .factored import FactoredMatrix
from .model_lens import HookedTransformerConfig
from .cache import CachePlan, CacheTooLarge
from .core import (KV_INFO_COLUMNS, TEXT_BOS, Dataset, Model, Optimizer, read_metrics,
                   read_tokens, write_tokens)
from .tokenizer import ByteTokenizer, SentencePieceTokenizer
from .distributed import Comm, ThreadRanks
from .llc import LLCResult, llc_sample

__version__ = _lib.induct_version_string().decode()
library_path = _lib._induct_path


#: The loaded library's version as M*10000 + m*100 + p.
version_number = _lib.induct_version_number()


def status_name(status):
    """Symbolic name of a C status code (e.g. "INDUCT_EINVAL")."""
    return _lib.induct_status_name(status).decode()


def status_message(status):
    """The library's one-line description of a C status code."""
    return _lib.induct_status_str(status).decode()


def build_features():
    """What the loaded library was built with: a set of names ("openmp")."""
    bits = _lib.induct_build_features()
    return {name for bit, name in ((0x1, "openmp"),) if bits & bit}


def last_error():
    """(status, message) of the last failed call on this thread. The bindings raise
    InductError subclasses carrying both, so this is rarely needed."""
    return (_lib.induct_last_error_code(),
            (_lib.induct_last_error_message() or b"").decode("utf-8", "replace"))


def clear_error():
    """Forget this thread's last error."""
    _lib.induct_error_clear()


def __getattr__(name):
    # induct.plot without importing matplotlib up front, induct.reduce and induct.view
    # (NumPy only) without importing NumPy, induct.lens (PyTorch), induct.patching (NumPy)
    if name in ("plot", "lens", "reduce", "view", "patching"):
        import importlib
        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'induct' has no attribute {name!r}")


__all__ = ["Model", "Optimizer", "Dataset", "Comm", "ThreadRanks", "read_metrics", "read_tokens", "write_tokens",
           "TEXT_BOS", "KV_INFO_COLUMNS", "InductError", "InvalidArgument",
           "OutOfRange", "BufferTooSmall", "IOFailure", "FormatError", "ABIMismatch",
           "StateError", "Interrupted", "NotSupported", "NumericError", "OutOfMemory",
           "LimitExceeded", "status_name", "__version__", "library_path", "Shaped",
           "Ablation", "LossVectors", "Attribution", "PCA", "PhaseWindow",
           "HeadClassification", "HEAD_CLASSES", "pca", "pca_trajectories", "phase_window",
           "classify_heads", "ArgumentOutOfRange", "ByteTokenizer", "SentencePieceTokenizer",
           "status_message", "build_features", "last_error", "clear_error", "version_number",
           "ActivationCache", "act_name", "HookPoint", "FactoredMatrix",
           "HookedTransformerConfig", "CachePlan", "CacheTooLarge", "IclGroups", "MeanSE",
           "batch_means", "paired_difference", "icl_band", "LLCResult", "llc_sample"]
