"""The one module that touches ctypes (besides _loader, which finds and opens the
library): struct mirrors, one declarative table of every C function the bindings use
(a missing symbol is one clear error at import), and call(), which converts Python
arguments (buffers, config structs, Out scalars, handles) for those functions. The
other modules are plain Python."""
import array
import ctypes
import numbers
from ctypes import (POINTER, c_char_p, c_double, c_float, c_int, c_int32, c_size_t, c_uint,
                    c_uint32, c_uint64, c_void_p)

from . import _errors
from ._loader import load

lib = load()  # before NumPy is imported (by _arrays): see _loader on BLAS

from . import _arrays  # noqa: E402

c_int32_p = POINTER(c_int32)
c_float_p = POINTER(c_float)
c_size_t_p = POINTER(c_size_t)
c_double_p = POINTER(c_double)
c_uint32_p = POINTER(c_uint32)
c_uint64_p = POINTER(c_uint64)


def _no_nul(b, what):
    """Refuse a C string with an embedded NUL (the C side would stop there and use a
    different path or name), as Python's own open() does."""
    if b"\0" in b:
        raise ValueError(f"{what}: embedded null byte in {b!r}")


#: Functions whose char* parameter is a (buffer, length) pair: NUL bytes are data there.
_SIZED_STRINGS = {"induct_dataset_new_text", "induct_text_encode"}


def _int_range(ctype):
    """(lowest, highest, C name) of a ctypes integer type (c_uint32 is c_uint, ... so
    the name is derived from the size and signedness, not from the alias)."""
    bits = 8 * ctypes.sizeof(ctype)
    if ctype(-1).value == -1:
        return -2**(bits - 1), 2**(bits - 1) - 1, f"int{bits}_t"
    return 0, 2**bits - 1, f"uint{bits}_t"


#: C integer type -> (lowest, highest, C name): the values a Python int may take
#: before ctypes narrows it (ctypes wraps -1 to 4294967295 without a word).
INT_RANGES = {t: _int_range(t) for t in (c_uint32, c_int32, c_uint64, c_size_t, c_int, c_uint)}


def check_int(value, what, ctype=c_uint32, lo=None):
    """`value` as a Python int that fits C type `ctype` (and is >= `lo` if given), else
    TypeError (not an integer: floats are not truncated) or induct.OutOfRange, also a
    ValueError (out of range), naming `what`. bool counts as an integer (0/1)."""
    if not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an integer, got {type(value).__name__} {value!r}")
    v = int(value)
    low, high, cname = INT_RANGES[ctype]
    if lo is not None:
        low = max(low, lo)
    if v < low or v > high:
        raise _errors.ArgumentOutOfRange(f"{what} must be in [{low}, {high}] ({cname}), got "
                                         f"{v} (refused, not wrapped)")
    return v


class _Sized(ctypes.Structure):
    """A size-prefixed config struct: `size` is filled in, defaults come from C."""

    _init_fn = None

    def __setattr__(self, name, v):
        if isinstance(v, bytes):  # a char* field (a path): it must not be cut short
            _no_nul(v, f"{type(self).__name__}.{name}")
        super().__setattr__(name, v)

    @classmethod
    def defaults(cls):
        s = cls()
        check(getattr(lib, cls._init_fn)(ctypes.byref(s), ctypes.sizeof(cls)), cls._init_fn)
        return s

    def as_dict(self):
        return {name: getattr(self, name) for name, _ in self._fields_ if name != "size"}

    @classmethod
    def from_kwargs(cls, kwargs, enums=None):
        """The C defaults, overridden by keyword arguments named after the fields.
        `enums` maps a field to {name: value} so that strings are accepted."""
        s = cls.defaults()
        enums = enums or {}
        types = {n: t for n, t in cls._fields_ if n != "size"}
        for k, v in kwargs.items():
            if k not in types:
                raise TypeError(f"unknown {cls.__name__} field '{k}'; known: {sorted(types)}")
            if k in enums and isinstance(v, str):
                if v not in enums[k]:
                    raise ValueError(f"{k} must be one of {sorted(enums[k])}, got {v!r}")
                v = enums[k][v]
            s.set(k, v)
        return s

    def set(self, name, v):
        """Set field `name`, checking that the value fits the C type (integers are
        range-checked, never wrapped; floats are not truncated into integer fields)."""
        t = dict(self._fields_)[name]
        what = f"{type(self).__name__}.{name}"
        if t in INT_RANGES:
            v = check_int(v, what, t)
        elif t in (c_double, c_float):
            if not isinstance(v, numbers.Real):
                raise TypeError(f"{what} must be a number, got {type(v).__name__} {v!r}")
            v = float(v)
        setattr(self, name, v)


class ModelConfig(_Sized):
    _init_fn = "induct_model_config_init"
    _fields_ = [
        ("size", c_size_t), ("n_layers", c_uint32), ("d_model", c_uint32),
        ("n_heads", c_uint32), ("d_head", c_uint32), ("d_mlp", c_uint32), ("n_ctx", c_uint32),
        ("d_vocab", c_uint32), ("positional", c_uint32), ("layer_norm", c_uint32),
        ("smeared_keys", c_uint32), ("n_threads", c_uint32), ("init", c_uint32),
        ("smear_alpha_init", c_double), ("init_std", c_double), ("seed", c_uint64),
        ("max_bytes", c_uint64), ("shortformer_layers", c_uint32), ("reserved0", c_uint32),
    ]


class RRTConfig(_Sized):
    _init_fn = "induct_rrt_config_init"
    _fields_ = [
        ("size", c_size_t), ("d_vocab", c_uint32), ("n_repeats", c_uint32),
        ("min_block", c_uint32), ("max_block", c_uint32), ("token_lo", c_uint32),
        ("token_hi", c_uint32), ("bos", c_int32), ("distinct_block", c_uint32),
        ("seed", c_uint64),
    ]


class TrainConfig(_Sized):
    _init_fn = "induct_train_config_init"
    _fields_ = [
        ("size", c_size_t), ("steps", c_uint64), ("batch", c_uint32), ("seq_len", c_uint32),
        ("eval_every", c_uint64), ("eval_log2", c_uint32), ("eval_batch", c_uint32),
        ("metrics", c_uint32), ("metrics_append", c_uint32), ("metrics_path", c_char_p),
        ("snapshot_every", c_uint64), ("snapshot_log2", c_uint32),
        ("snapshot_optimizer", c_uint32), ("snapshot_path", c_char_p),
        ("target_loss", c_double), ("probe", c_void_p),
    ]


class Progress(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t), ("events", c_uint32), ("reserved0", c_uint32), ("step", c_uint64),
        ("steps", c_uint64), ("loss", c_double), ("lr", c_double),
        ("tokens_per_second", c_double), ("elapsed_seconds", c_double),
        ("eta_seconds", c_double), ("eval_loss", c_double), ("snapshot_path", c_char_p),
    ]


PROGRESS_FN = ctypes.CFUNCTYPE(c_int, POINTER(Progress), c_void_p)
#: induct_hook_fn(user, name, activation, shape, ndim)
HOOK_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, POINTER(c_float), POINTER(c_uint32),
                           c_uint32)


#: induct_logits_grad_fn(user, logits, d_logits, batch, seq_len, d_vocab)
LOGITS_GRAD_FN = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(c_float), POINTER(c_float), c_uint32,
                                  c_uint32, c_uint32)


class Hook(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("fn", HOOK_FN), ("user", c_void_p)]


# ---- communicators ----
#: induct_comm callbacks: sendrecv(user, peer, sendbuf, send_bytes, recvbuf, recv_bytes),
#: barrier(user), abort(user, status)
COMM_SENDRECV = ctypes.CFUNCTYPE(c_int, c_void_p, c_uint32, c_void_p, c_size_t, c_void_p,
                                 c_size_t)
COMM_BARRIER = ctypes.CFUNCTYPE(c_int, c_void_p)
COMM_ABORT = ctypes.CFUNCTYPE(None, c_void_p, c_int)


class Comm(ctypes.Structure):
    _fields_ = [("size", c_size_t), ("rank", c_uint32), ("n_ranks", c_uint32),
                ("user", c_void_p), ("sendrecv", COMM_SENDRECV), ("barrier", COMM_BARRIER),
                ("abort", COMM_ABORT)]


# ---- analysis suite ----
class EvalConfig(_Sized):
    _init_fn = "induct_eval_config_init"
    _fields_ = [
        ("size", c_size_t), ("n_seq", c_uint32), ("seq_len", c_uint32), ("chunk", c_uint32),
        ("early", c_uint32), ("late", c_uint32), ("split", c_uint32),
        ("batch_index", c_uint64), ("pos_seed", c_uint64),
        ("positions", POINTER(c_uint32)), ("n_positions", c_uint32), ("reserved0", c_uint32),
    ]

    def set_positions(self, buf):
        """Point `positions` at `buf` (a contiguous uint32 NumPy array or array('I')) and
        set `n_positions`; the struct keeps a reference so the C side's borrowed pointer
        stays valid as long as the struct lives."""
        n = len(buf)
        if n > 2**32 - 1:
            raise OverflowError("too many positions for the uint32 count")
        if hasattr(buf, "ctypes"):
            ptr = buf.ctypes.data_as(POINTER(c_uint32))
        else:
            ptr = ctypes.cast((c_uint32 * n).from_buffer(buf), POINTER(c_uint32))
        self.positions = ptr
        self.n_positions = n
        self._positions_keep = buf


class ProbeConfig(_Sized):
    _init_fn = "induct_probe_config_init"
    _fields_ = [
        ("size", c_size_t), ("n_seq", c_uint32), ("block_len", c_uint32),
        ("n_repeats", c_uint32), ("bos", c_int32), ("token_lo", c_uint32),
        ("token_hi", c_uint32), ("copying_bos", c_uint32), ("reserved0", c_uint32),
        ("seed", c_uint64),
    ]


class PhaseConfig(_Sized):
    _init_fn = "induct_phase_config_init"
    _fields_ = [
        ("size", c_size_t), ("lo_frac", c_double), ("hi_frac", c_double),
        ("min_change", c_double), ("smooth", c_uint32), ("reserved0", c_uint32),
    ]


class IclGroupsConfig(_Sized):
    _init_fn = "induct_icl_groups_config_init"
    _fields_ = [
        ("size", c_size_t), ("n_groups", c_uint32), ("per_group", c_uint32),
        ("seq_len", c_uint32), ("chunk", c_uint32), ("early", c_uint32), ("late", c_uint32),
        ("band", c_uint32), ("split", c_uint32), ("curve_groups", c_uint32),
        ("reserved0", c_uint32),
    ]


class IclEstimate(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t), ("icl", c_double), ("icl_se", c_double), ("icl_token", c_double),
        ("icl_token_se", c_double), ("n_groups", c_uint32), ("per_group", c_uint32),
    ]


class ClassifyConfig(_Sized):
    _init_fn = "induct_classify_config_init"
    _fields_ = [
        ("size", c_size_t), ("previous_token", c_double), ("induction", c_double),
        ("duplicate", c_double), ("copying", c_double),
    ]


# ---- datasets ----
class KVConfig(_Sized):
    _init_fn = "induct_kv_config_init"
    _fields_ = [
        ("size", c_size_t), ("d_vocab", c_uint32), ("token_lo", c_uint32),
        ("token_hi", c_uint32), ("pair_min", c_uint32), ("pair_max", c_int32),
        ("unique_key", c_uint32), ("all_positions", c_uint32), ("seed", c_uint64),
    ]


class TextConfig(_Sized):
    _init_fn = "induct_text_config_init"
    _fields_ = [
        ("size", c_size_t), ("bos", c_uint32), ("separator", c_int32), ("split", c_uint32),
        ("n_eval_windows", c_uint32), ("val_fraction", c_double),
        ("block_tokens", c_uint64), ("seed", c_uint64), ("max_bytes", c_uint64),
    ]


class TokenFileConfig(_Sized):
    _init_fn = "induct_token_file_config_init"
    _fields_ = [
        ("size", c_size_t), ("format", c_uint32), ("d_vocab", c_uint32),
        ("n_eval_windows", c_uint32), ("val_fraction", c_double),
        ("block_tokens", c_uint64), ("resident_limit", c_uint64), ("seed", c_uint64),
        ("max_bytes", c_uint64),
    ]


# ---- text in and out ----
class GenerateConfig(_Sized):
    _init_fn = "induct_generate_config_init"
    _fields_ = [
        ("size", c_size_t), ("max_new_tokens", c_uint32), ("reserved0", c_uint32),
        ("temperature", c_double), ("seed", c_uint64),
    ]


# ---- the local learning coefficient ----
class LLCConfig(_Sized):
    _init_fn = "induct_llc_config_init"
    _fields_ = [
        ("size", c_size_t), ("chains", c_uint32), ("draws", c_uint32), ("burnin", c_uint32),
        ("every", c_uint32), ("batch", c_uint32), ("seq_len", c_uint32),
        ("init_batches", c_uint32), ("nbeta_rule", c_uint32), ("nbeta", c_double),
        ("n_data", c_double), ("epsilon", c_double), ("gamma", c_double),
        ("max_increase", c_double), ("seed", c_uint64), ("batch_offset", c_uint64),
        ("split", c_uint32), ("mala", c_uint32), ("paired", c_uint32), ("reserved0", c_uint32),
    ]


class LLCSummary(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t), ("llc_mean", c_double), ("llc_std", c_double), ("llc_se", c_double),
        ("init_loss", c_double), ("nbeta", c_double), ("below_init", c_double),
        ("mala_accept", c_double), ("n_sampled", c_uint64), ("chains", c_uint32),
        ("draws", c_uint32), ("steps", c_uint32), ("init_batches", c_uint32),
        ("paired", c_uint32), ("reserved0", c_uint32),
    ]


#: induct_llc_potential_fn(user, w, dim, batch, loss_out, grad_out)
LLC_POTENTIAL_FN = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(c_double), c_size_t, c_uint64,
                                    POINTER(c_double), POINTER(c_double))


#: Every struct mirrored here, for the layout test against the C headers.
STRUCTS = {"induct_model_config": ModelConfig, "induct_rrt_config": RRTConfig,
           "induct_train_config": TrainConfig, "induct_progress": Progress,
           "induct_eval_config": EvalConfig, "induct_probe_config": ProbeConfig,
           "induct_phase_config": PhaseConfig, "induct_classify_config": ClassifyConfig,
           "induct_icl_groups_config": IclGroupsConfig, "induct_icl_estimate": IclEstimate,
           "induct_kv_config": KVConfig, "induct_text_config": TextConfig,
           "induct_token_file_config": TokenFileConfig,
           "induct_generate_config": GenerateConfig, "induct_hook": Hook,
           "induct_comm": Comm, "induct_llc_config": LLCConfig,
           "induct_llc_summary": LLCSummary}

P = c_void_p  # opaque handles travel as void*
PP = POINTER(c_void_p)

# (name, argtypes, restype). restype c_int means "returns an induct status".
FUNCTIONS = [
    ("induct_version_number", [], c_uint),
    ("induct_version_string", [], c_char_p),
    ("induct_abi_version", [], c_uint),
    ("induct_build_features", [], c_uint),
    ("induct_status_name", [c_int], c_char_p),
    ("induct_status_str", [c_int], c_char_p),
    ("induct_last_error_message", [], c_char_p),
    ("induct_last_error_code", [], c_int),
    ("induct_error_clear", [], None),
    ("induct_model_config_init", [POINTER(ModelConfig), c_size_t], c_int),
    ("induct_model_new", [PP, POINTER(ModelConfig)], c_int),
    ("induct_model_free", [P], None),
    ("induct_model_clone", [PP, P], c_int),
    ("induct_model_get_config", [P, POINTER(ModelConfig)], c_int),
    ("induct_model_set_threads", [P, c_uint32], c_int),
    ("induct_model_n_params", [P], c_size_t),
    ("induct_model_set_max_bytes", [P, c_uint64], c_int),
    ("induct_model_memory_used", [P], c_uint64),
    ("induct_model_n_tensors", [P], c_size_t),
    ("induct_model_tensor_info", [P, c_size_t, POINTER(c_char_p), POINTER(c_uint32),
                                  POINTER(c_uint32), c_size_t_p], c_int),
    ("induct_model_get_tensor", [P, c_char_p, c_uint32, c_float_p, c_size_t, c_size_t_p], c_int),
    ("induct_model_set_tensor", [P, c_char_p, c_float_p, c_size_t], c_int),
    ("induct_model_forward", [P, c_int32_p, c_uint32, c_uint32, c_float_p, c_size_t, c_float_p,
                              c_size_t, c_double_p], c_int),
    ("induct_model_backward", [P, c_int32_p, c_uint32, c_uint32, c_double_p], c_int),
    ("induct_model_attention", [P, c_int32_p, c_uint32, c_float_p, c_size_t, c_size_t_p], c_int),
    ("induct_model_interrupt", [P], None),
    ("induct_model_hook_shape", [P, c_char_p, c_uint32, c_uint32, c_uint32_p, c_uint32_p,
                                 c_size_t_p], c_int),
    ("induct_model_hook_point", [P, c_size_t, c_char_p, c_size_t, c_size_t_p], c_int),
    ("induct_model_run_with_hooks", [P, c_int32_p, c_uint32, c_uint32, POINTER(Hook), c_size_t,
                                     c_float_p, c_size_t, c_float_p, c_size_t, c_double_p],
     c_int),
    ("induct_model_backward_with_hooks", [P, c_int32_p, c_uint32, c_uint32, POINTER(Hook),
                                          c_size_t, c_double_p], c_int),
    ("induct_model_backward_with_grad_hooks", [P, c_int32_p, c_uint32, c_uint32,
                                               POINTER(Hook), c_size_t, POINTER(Hook), c_size_t,
                                               c_double_p], c_int),
    ("induct_model_backward_from_logits", [P, c_int32_p, c_uint32, c_uint32, POINTER(Hook),
                                           c_size_t, POINTER(Hook), c_size_t, LOGITS_GRAD_FN,
                                           c_void_p, c_double_p], c_int),
    ("induct_train_step_with_hooks", [P, P, c_uint32, c_uint32, POINTER(Hook), c_size_t,
                                      c_double_p], c_int),
    ("induct_train_step_tokens_with_hooks", [P, c_int32_p, c_uint32, c_uint32, POINTER(Hook),
                                             c_size_t, c_double_p], c_int),
    ("induct_model_hook_batch_index", [P, c_uint32_p, c_uint32_p], c_int),
    ("induct_model_run_with_cache", [P, c_int32_p, c_uint32, c_uint32, POINTER(c_char_p),
                                     POINTER(c_float_p), c_size_t_p, c_size_t, c_float_p,
                                     c_size_t, c_double_p], c_int),
    ("induct_rrt_config_init", [POINTER(RRTConfig), c_size_t], c_int),
    ("induct_dataset_new_rrt", [PP, POINTER(RRTConfig)], c_int),
    ("induct_dataset_new_tokens", [PP, c_int32_p, c_size_t, c_uint32, c_uint64], c_int),
    ("induct_dataset_free", [P], None),
    ("induct_dataset_d_vocab", [P], c_uint32),
    ("induct_dataset_bos", [P, POINTER(c_int32)], c_int),
    ("induct_dataset_batch", [P, c_uint32, c_uint64, c_uint32, c_uint32, c_int32_p, c_size_t,
                              c_int32_p, c_size_t], c_int),
    ("induct_optimizer_new", [PP, P, c_uint32], c_int),
    ("induct_optimizer_free", [P], None),
    ("induct_optimizer_set", [P, c_int, c_double], c_int),
    ("induct_optimizer_get", [P, c_int, c_double_p], c_int),
    ("induct_opt_param_bounds", [c_int, c_double_p, c_double_p], c_int),
    ("induct_optimizer_current_lr", [P, c_double_p], c_int),
    ("induct_optimizer_step", [P, c_double_p], c_int),
    ("induct_train_step", [P, P, c_uint32, c_uint32, c_double_p], c_int),
    ("induct_train_step_tokens", [P, c_int32_p, c_uint32, c_uint32, c_double_p], c_int),
    # gradient shards and communicators
    ("induct_optimizer_set_comm", [P, c_void_p], c_int),
    ("induct_comm_threads_new", [PP, c_uint32], c_int),
    ("induct_comm_threads_rank", [P, c_uint32], c_void_p),
    ("induct_comm_threads_free", [P], None),
    ("induct_analysis_induction_score", [P, P, c_uint32, c_uint32, c_float_p, c_size_t,
                                         c_size_t_p], c_int),
    ("induct_model_save", [P, c_char_p], c_int),
    ("induct_model_load", [PP, c_char_p], c_int),
    ("induct_model_load_config", [PP, c_char_p, POINTER(ModelConfig)], c_int),
    ("induct_optimizer_save", [P, c_char_p], c_int),
    ("induct_optimizer_load", [PP, P, c_char_p], c_int),
    ("induct_train_config_init", [POINTER(TrainConfig), c_size_t], c_int),
    ("induct_train", [P, P, POINTER(TrainConfig), PROGRESS_FN, c_void_p], c_int),
    ("induct_analysis_previous_token_score", [P, P, c_uint32, c_uint32, c_float_p, c_size_t,
                                              c_size_t_p], c_int),
    # ---- analysis suite ----
    ("induct_eval_config_init", [POINTER(EvalConfig), c_size_t], c_int),
    ("induct_analysis_icl_score", [P, P, POINTER(EvalConfig), c_double_p], c_int),
    ("induct_analysis_loss_by_position", [P, P, POINTER(EvalConfig), c_float_p, c_size_t,
                                          c_size_t_p], c_int),
    ("induct_analysis_loss_vectors", [P, P, POINTER(EvalConfig), c_float_p, c_size_t, c_float_p,
                                      c_size_t], c_int),
    ("induct_analysis_loss_positions", [P, POINTER(EvalConfig), c_uint32_p, c_size_t,
                                        c_size_t_p], c_int),
    ("induct_model_ablate_head", [P, c_uint32, c_uint32, c_uint32], c_int),
    ("induct_model_set_preserve_patterns", [P, c_uint32], c_int),
    ("induct_model_set_ablation_mean", [P, c_int32_p, c_uint32, c_uint32, c_uint32], c_int),
    ("induct_model_clear_ablations", [P], c_int),
    ("induct_model_get_ablations", [P, c_uint32_p, c_size_t, c_size_t_p, c_uint32_p], c_int),
    ("induct_analysis_ablation_attribution", [P, P, POINTER(EvalConfig), c_uint32, c_float_p,
                                              c_size_t, c_size_t_p, c_double_p], c_int),
    ("induct_probe_config_init", [POINTER(ProbeConfig), c_size_t], c_int),
    ("induct_probe_config_for_dataset", [POINTER(ProbeConfig), c_size_t, P], c_int),
    ("induct_analysis_probe_tokens", [P, POINTER(ProbeConfig), c_uint32, c_int32_p, c_size_t,
                                      c_size_t_p], c_int),
    ("induct_analysis_prefix_matching", [P, POINTER(ProbeConfig), c_float_p, c_size_t,
                                         c_size_t_p], c_int),
    ("induct_analysis_duplicate_token", [P, POINTER(ProbeConfig), c_float_p, c_size_t,
                                         c_size_t_p], c_int),
    ("induct_analysis_copying", [P, POINTER(ProbeConfig), c_float_p, c_size_t, c_size_t_p],
     c_int),
    ("induct_analysis_copying_eigen", [P, c_float_p, c_size_t, c_size_t_p], c_int),
    ("induct_analysis_composition", [P, c_uint32, c_float_p, c_size_t, c_size_t_p], c_int),
    ("induct_analysis_composition_baseline", [P, c_uint32, c_uint64, c_double_p], c_int),
    ("induct_analysis_pca", [c_float_p, c_uint32, c_uint32, c_uint32, c_float_p, c_size_t,
                             c_float_p, c_size_t, c_double_p, c_size_t, c_double_p], c_int),
    ("induct_phase_config_init", [POINTER(PhaseConfig), c_size_t], c_int),
    ("induct_analysis_phase_window", [c_double_p, c_double_p, c_size_t, POINTER(PhaseConfig),
                                      c_double_p, c_double_p, c_uint32_p], c_int),
    ("induct_analysis_batch_means", [c_double_p, c_size_t, c_double_p, c_double_p], c_int),
    ("induct_analysis_paired_difference", [c_double_p, c_double_p, c_size_t, c_double_p,
                                           c_double_p], c_int),
    ("induct_analysis_icl_band", [c_float_p, c_size_t, c_uint32, c_uint32, c_uint32,
                                  c_double_p], c_int),
    ("induct_icl_groups_config_init", [POINTER(IclGroupsConfig), c_size_t], c_int),
    ("induct_analysis_icl_groups", [P, P, POINTER(IclGroupsConfig), POINTER(IclEstimate),
                                    c_double_p, c_size_t, c_double_p, c_size_t], c_int),
    ("induct_classify_config_init", [POINTER(ClassifyConfig), c_size_t], c_int),
    ("induct_analysis_classify_heads", [c_float_p, c_float_p, c_float_p, c_float_p, c_size_t,
                                        POINTER(ClassifyConfig), c_uint32_p, c_size_t,
                                        c_size_t_p], c_int),
    # ---- datasets ----
    ("induct_kv_config_init", [POINTER(KVConfig), c_size_t], c_int),
    ("induct_dataset_new_kv", [PP, POINTER(KVConfig)], c_int),
    ("induct_dataset_kv_info", [P, c_uint32, c_uint64, c_uint32, c_uint32, c_int32_p, c_size_t,
                                c_size_t_p], c_int),
    ("induct_dataset_kv_ceiling", [P, c_uint32, c_double_p], c_int),
    ("induct_analysis_kv_accuracy", [P, P, c_uint32, c_uint32, c_double_p], c_int),
    ("induct_analysis_kv_attention", [P, P, c_uint32, c_uint32, c_float_p, c_size_t,
                                      c_size_t_p], c_int),
    ("induct_text_config_init", [POINTER(TextConfig), c_size_t], c_int),
    ("induct_dataset_new_text", [PP, c_char_p, c_size_t, POINTER(TextConfig)], c_int),
    ("induct_dataset_new_text_path", [PP, c_char_p, c_char_p, POINTER(TextConfig)], c_int),
    ("induct_token_file_config_init", [POINTER(TokenFileConfig), c_size_t], c_int),
    ("induct_dataset_new_token_file", [PP, c_char_p, c_char_p, POINTER(TokenFileConfig)],
     c_int),
    ("induct_token_file_read", [c_char_p, c_uint32, c_uint32, c_int32_p, c_size_t, c_size_t_p],
     c_int),
    ("induct_token_file_write", [c_char_p, c_uint32, c_int32_p, c_size_t], c_int),
    ("induct_dataset_split_tokens", [P, c_uint32, c_uint64_p], c_int),
    ("induct_dataset_window_count", [P, c_uint32, c_uint32, c_uint64_p], c_int),
    ("induct_dataset_set_repeats", [P, c_double, c_uint32, c_uint32], c_int),
    # ---- text in and out ----
    ("induct_text_encode", [c_char_p, c_size_t, c_uint32, c_int32_p, c_size_t, c_size_t_p],
     c_int),
    ("induct_text_decode", [c_int32_p, c_size_t, c_uint32, c_char_p, c_size_t, c_size_t_p],
     c_int),
    ("induct_generate_config_init", [POINTER(GenerateConfig), c_size_t], c_int),
    ("induct_model_generate", [P, c_int32_p, c_uint32, POINTER(GenerateConfig), c_int32_p,
                               c_size_t, c_size_t_p], c_int),
    # ---- the local learning coefficient ----
    ("induct_llc_config_init", [POINTER(LLCConfig), c_size_t], c_int),
    ("induct_llc_estimate", [PP, P, P, c_void_p, c_size_t, POINTER(LLCConfig)], c_int),
    ("induct_llc_sample", [PP, LLC_POTENTIAL_FN, c_void_p, c_double_p, c_size_t, c_void_p,
                           POINTER(LLCConfig)], c_int),
    ("induct_llc_mask_select", [P, c_char_p, c_int32, c_void_p, c_size_t], c_int),
    ("induct_llc_result_summary", [P, POINTER(LLCSummary)], c_int),
    ("induct_llc_result_get", [P, c_uint32, c_double_p, c_size_t, c_size_t_p], c_int),
    ("induct_llc_result_free", [P], None),
]


def _register():
    missing = []
    for name, argtypes, restype in FUNCTIONS:
        try:
            fn = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.argtypes = argtypes
        fn.restype = restype
    if missing:
        raise ImportError(f"{lib._induct_path} is too old for these bindings: missing "
                          + ", ".join(missing))


_register()


def check(status, function):
    """Turn a negative status into the matching exception (message read on this thread)."""
    if status >= 0:
        return status
    msg = (lib.induct_last_error_message() or b"").decode("utf-8", "replace")
    name = (lib.induct_status_name(status) or b"").decode()
    raise _errors.from_status(status, msg, name, function)


class Out:
    """An output scalar for a C `T *` parameter: pass it in the argument list of call(),
    read `.value` afterwards. Kinds: handle, double, size, uint32, int32, uint64, char_p."""

    _TYPES = {"handle": c_void_p, "double": c_double, "size": c_size_t, "uint32": c_uint32,
              "int32": c_int32, "uint64": c_uint64, "char_p": c_char_p}

    def __init__(self, kind):
        self._c = self._TYPES[kind]()

    @property
    def value(self):
        return self._c.value


def address_of(struct):
    """The address of a ctypes struct, for a pointer field of another struct (the caller
    keeps `struct` alive while the address is in use)."""
    return ctypes.addressof(struct)


class Bytes:
    """An output byte buffer of `n` bytes for a C `void *` / `char *` parameter: pass it
    in the argument list of call(), read `.value(length)` afterwards."""

    def __init__(self, n):
        self._c = ctypes.create_string_buffer(max(int(n), 1))

    def value(self, length):
        return self._c.raw[:length]


#: C element type -> (array.array typecode, NumPy dtype) a buffer argument must have.
_ELEMENT = {c_float: ("f", "float32"), c_double: ("d", "float64"), c_int32: ("i", "int32"),
            c_uint32: ("I", "uint32")}


def _adapt(argtype, arg, name, index):
    """Convert one Python argument for a C parameter of type `argtype`."""
    if isinstance(arg, bytes):
        if argtype is c_char_p and name not in _SIZED_STRINGS:
            _no_nul(arg, f"{name} argument {index}")
        return arg
    if arg is None:
        return arg
    if argtype in INT_RANGES and isinstance(arg, numbers.Number):
        # also NumPy integers, which ctypes refuses; never wrapped or truncated
        return check_int(arg, f"{name} argument {index}", argtype)
    if isinstance(arg, numbers.Integral):
        return int(arg)
    if isinstance(arg, numbers.Real):
        return float(arg)
    if isinstance(arg, Out):
        return ctypes.byref(arg._c)
    if isinstance(arg, Bytes):
        return arg._c
    if isinstance(arg, ctypes.Structure):
        return ctypes.byref(arg)
    elem = _ELEMENT.get(getattr(argtype, "_type_", None))
    if elem is not None:
        np = _arrays.np
        if np is not None and isinstance(arg, np.ndarray):
            if arg.dtype != np.dtype(elem[1]) or not arg.flags.c_contiguous \
                    or not arg.flags.writeable:
                raise TypeError(f"{name} argument {index}: needs a writable C-contiguous "
                                f"{elem[1]} array, got {arg.dtype}")
            return arg.ctypes.data_as(argtype)
        if isinstance(arg, array.array):
            if arg.typecode != elem[0]:
                raise TypeError(f"{name} argument {index}: needs array('{elem[0]}'), "
                                f"got array('{arg.typecode}')")
            return ctypes.cast(arg.buffer_info()[0], argtype)
        raise TypeError(f"{name} argument {index}: needs a buffer, got {type(arg).__name__}")
    return arg


def call(name, *args):
    """Call a status-returning C function and raise on failure. Buffers (NumPy arrays or
    array.array of the right element type), config structs and Out objects are passed
    by pointer; handles pass themselves (their _as_parameter_)."""
    fn = getattr(lib, name)
    args = [_adapt(t, a, name, i) for i, (t, a) in enumerate(zip(fn.argtypes, args))] \
        + list(args[len(fn.argtypes):])
    try:
        status = fn(*args)
    except ctypes.ArgumentError as e:
        # a closed handle refuses to become a pointer: report it as the ValueError it is
        msg = str(e)
        if "ValueError: " in msg:
            raise ValueError(msg.split("ValueError: ", 1)[1]) from None
        raise
    return check(status, name)


def value(name, *args):
    """Call a C function that cannot fail (returns a plain value, not a status)."""
    try:
        return getattr(lib, name)(*args)
    except ctypes.ArgumentError as e:
        msg = str(e)
        if "ValueError: " in msg:
            raise ValueError(msg.split("ValueError: ", 1)[1]) from None
        raise


def new_struct(cls):
    """An all-zero struct with only `size` set (for the library to fill)."""
    s = cls()
    s.size = ctypes.sizeof(cls)
    return s


def hook_array(hooks):
    """[(name, func(activation, name) -> int)] -> (ctypes array of induct_hook, keep-alive).
    func gets a writable NumPy view of the activation; an exception is kept in
    keep[0] and stops the pass (re-raise it after the call)."""
    np = _arrays.np
    err = [None]

    def make(func):
        def trampoline(_user, name, data, shape, ndim):
            if err[0] is not None:
                return 1
            try:
                view = np.ctypeslib.as_array(data, shape=tuple(shape[i] for i in range(ndim)))
                func(view, name.decode())
                return 0
            except BaseException as e:  # noqa: B036 - re-raised after the C call
                err[0] = e
                return 1
        return HOOK_FN(trampoline)

    fns = [make(f) for _, f in hooks]
    arr = (Hook * max(len(hooks), 1))()
    names = [n.encode() for n, _ in hooks]
    for i, (n, f) in enumerate(zip(names, fns)):
        arr[i].name, arr[i].fn, arr[i].user = n, f, None
    return arr, (err, fns, names)


def name_array(names):
    """A ctypes char* array of the encoded names (keep the result alive)."""
    enc = [n.encode() for n in names]
    return (c_char_p * max(len(enc), 1))(*enc)


def pointer_array(buffers):
    """A ctypes float* array of NumPy float32 buffers."""
    return (c_float_p * max(len(buffers), 1))(*[b.ctypes.data_as(c_float_p) for b in buffers])


def size_array(values):
    """A ctypes size_t array."""
    return (c_size_t * max(len(values), 1))(*values)


def string_buffer(n):
    """A writable char buffer of n bytes (for a C `char *out`)."""
    return ctypes.create_string_buffer(n)


def comm_table(rank, n_ranks, sendrecv, barrier, abort, raised):
    """An induct_comm whose callbacks are Python functions: sendrecv(peer, send, recv)
    with `send` a read-only and `recv` a writable memoryview of the C buffers (valid
    during the call only), barrier(), abort(status) (or None). An exception is appended
    to `raised` and reported to the library as INDUCT_EIO. Returns (table, keep-alive):
    keep both alive while an optimizer uses the table."""
    def view(addr, n, readonly):
        if not n:
            return memoryview(b"")
        mv = memoryview((ctypes.c_char * n).from_address(addr)).cast("B")
        return mv.toreadonly() if readonly else mv

    def c_sendrecv(_user, peer, sbuf, sn, rbuf, rn):
        try:
            sendrecv(int(peer), view(sbuf, sn, True), view(rbuf, rn, False))
            return 0
        except BaseException as e:  # noqa: B036 -- kept for the caller
            raised.append(e)
            return -6  # INDUCT_EIO

    def c_barrier(_user):
        try:
            barrier()
            return 0
        except BaseException as e:  # noqa: B036
            raised.append(e)
            return -6

    def c_abort(_user, status):
        try:
            abort(int(status))
        except BaseException as e:  # noqa: B036
            raised.append(e)

    fns = (COMM_SENDRECV(c_sendrecv), COMM_BARRIER(c_barrier),
           COMM_ABORT(c_abort) if abort is not None else COMM_ABORT())
    t = Comm()
    t.size = ctypes.sizeof(Comm)
    t.rank, t.n_ranks, t.user = rank, n_ranks, None
    t.sendrecv, t.barrier, t.abort = fns
    return t, fns


def comm_address(table):
    """The address of an induct_comm table made by comm_table()."""
    return ctypes.addressof(table)


def llc_potential(func, raised):
    """Wrap func(w, batch) -> (loss, grad) as an induct_llc_potential_fn: `w` is a
    read-only float64 NumPy view of the C weights (valid during the call only), `grad`
    anything of dim floats (copied into the library's buffer). An exception is appended
    to `raised` and stops the run (the library then returns INDUCT_EINTERRUPTED; the
    caller re-raises it). Keep the returned object alive for the whole C call."""
    np = _arrays.np

    def trampoline(_user, w, dim, batch, loss_out, grad_out):
        try:
            wv = np.ctypeslib.as_array(w, shape=(dim,))
            wv.flags.writeable = False
            loss, grad = func(wv, int(batch))
            gv = np.ctypeslib.as_array(grad_out, shape=(dim,))
            gv[:] = np.asarray(grad, dtype=np.float64).reshape(dim)
            loss_out[0] = float(loss)
            return 0
        except BaseException as e:  # noqa: B036 -- re-raised by the caller
            raised.append(e)
            return 1
    return LLC_POTENTIAL_FN(trampoline)


def logits_grad(func, raised):
    """Wrap func(logits) -> d_logits as an induct_logits_grad_fn: `logits` is a read-only
    float32 NumPy view [batch, seq_len, d_vocab] of the pass's logits (valid during the
    call only); what func returns (broadcast to that shape) is copied into the library's
    d(logits) buffer. An exception is appended to `raised` and stops the call (the
    library then returns INDUCT_EINTERRUPTED; the caller re-raises it). Keep the returned
    object alive for the whole C call."""
    np = _arrays.np

    def trampoline(_user, logits, d_logits, batch, seq_len, d_vocab):
        try:
            shape = (int(batch), int(seq_len), int(d_vocab))
            lv = np.ctypeslib.as_array(logits, shape=shape)
            lv.flags.writeable = False
            d = func(lv)
            if hasattr(d, "detach"):  # a PyTorch tensor
                d = d.detach().cpu().numpy()
            dv = np.ctypeslib.as_array(d_logits, shape=shape)
            try:
                dv[...] = np.broadcast_to(np.asarray(d, dtype=np.float32), shape)
            except ValueError:
                raise ValueError(f"the d(logits) function returned shape "
                                 f"{np.shape(d)}; the logits have shape {shape}") from None
            return 0
        except BaseException as e:  # noqa: B036 -- re-raised by the caller
            raised.append(e)
            return 1
    return LOGITS_GRAD_FN(trampoline)


def byte_pointer(buf):
    """A void* to a writable uint8 NumPy array or bytearray (a mask), or None."""
    if buf is None:
        return None
    if hasattr(buf, "ctypes"):
        return ctypes.c_void_p(buf.ctypes.data)
    return ctypes.cast((ctypes.c_ubyte * len(buf)).from_buffer(buf), ctypes.c_void_p)


def progress_callback(func, raised):
    """Wrap func(fields: dict) -> int as an induct_progress_fn. The dict holds the
    induct_progress fields that fit in the library's `size` (strings decoded, NULL ->
    None). An exception (KeyboardInterrupt included) never escapes into ctypes, which
    would print "Exception ignored" and return garbage: it is appended to the list
    `raised` and the run is stopped (return 1); the caller re-raises it. Keep the
    returned object alive for the whole C call."""
    def trampoline(p, _user):
        try:
            q = p.contents
            fields = {}
            for fname, _ in Progress._fields_:
                d = getattr(Progress, fname)
                if d.offset + d.size > q.size:
                    break  # an older library: the field is not there
                v = getattr(q, fname)
                fields[fname] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
            return 1 if func(fields) else 0
        except BaseException as e:  # noqa: B036 -- re-raised by the caller
            raised.append(e)
            return 1
    return PROGRESS_FN(trampoline)
