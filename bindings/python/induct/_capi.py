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
_SIZED_STRINGS = {"induct_dataset_new_text"}


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
        names = {n for n, _ in cls._fields_} - {"size"}
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"unknown {cls.__name__} field '{k}'; known: {sorted(names)}")
            if k in enums and isinstance(v, str):
                if v not in enums[k]:
                    raise ValueError(f"{k} must be one of {sorted(enums[k])}")
                v = enums[k][v]
            setattr(s, k, v if isinstance(v, float) else int(v))
        return s


class ModelConfig(_Sized):
    _init_fn = "induct_model_config_init"
    _fields_ = [
        ("size", c_size_t), ("n_layers", c_uint32), ("d_model", c_uint32),
        ("n_heads", c_uint32), ("d_head", c_uint32), ("d_mlp", c_uint32), ("n_ctx", c_uint32),
        ("d_vocab", c_uint32), ("positional", c_uint32), ("layer_norm", c_uint32),
        ("smeared_keys", c_uint32), ("n_threads", c_uint32), ("init", c_uint32),
        ("smear_alpha_init", c_double), ("init_std", c_double), ("seed", c_uint64),
        ("max_bytes", c_uint64),
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


# ---- analysis suite (issue 4) ----
class EvalConfig(_Sized):
    _init_fn = "induct_eval_config_init"
    _fields_ = [
        ("size", c_size_t), ("n_seq", c_uint32), ("seq_len", c_uint32), ("chunk", c_uint32),
        ("early", c_uint32), ("late", c_uint32), ("split", c_uint32),
        ("batch_index", c_uint64), ("pos_seed", c_uint64),
    ]


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


class ClassifyConfig(_Sized):
    _init_fn = "induct_classify_config_init"
    _fields_ = [
        ("size", c_size_t), ("previous_token", c_double), ("induction", c_double),
        ("duplicate", c_double), ("copying", c_double),
    ]


# ---- datasets (issue 3) ----
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


#: Every struct mirrored here, for the layout test against the C headers.
STRUCTS = {"induct_model_config": ModelConfig, "induct_rrt_config": RRTConfig,
           "induct_train_config": TrainConfig, "induct_progress": Progress,
           "induct_eval_config": EvalConfig, "induct_probe_config": ProbeConfig,
           "induct_phase_config": PhaseConfig, "induct_classify_config": ClassifyConfig,
           "induct_kv_config": KVConfig, "induct_text_config": TextConfig,
           "induct_token_file_config": TokenFileConfig}

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
    # ---- analysis suite (issue 4) ----
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
    ("induct_classify_config_init", [POINTER(ClassifyConfig), c_size_t], c_int),
    ("induct_analysis_classify_heads", [c_float_p, c_float_p, c_float_p, c_float_p, c_size_t,
                                        POINTER(ClassifyConfig), c_uint32_p, c_size_t,
                                        c_size_t_p], c_int),
    # ---- datasets (issue 3) ----
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


#: C element type -> (array.array typecode, NumPy dtype) a buffer argument must have.
_ELEMENT = {c_float: ("f", "float32"), c_double: ("d", "float64"), c_int32: ("i", "int32"),
            c_uint32: ("I", "uint32")}


def _adapt(argtype, arg, name, index):
    """Convert one Python argument for a C parameter of type `argtype`."""
    if isinstance(arg, bytes):
        if argtype is c_char_p and name not in _SIZED_STRINGS:
            _no_nul(arg, f"{name} argument {index}")
        return arg
    if arg is None or isinstance(arg, bool):
        return arg
    if isinstance(arg, numbers.Integral):  # also NumPy integers, which ctypes refuses
        v = int(arg)
        code = getattr(argtype, "_type_", None)
        if isinstance(code, str) and code in "bBhHiIlLqQ":  # ctypes would wrap silently
            bits = 8 * ctypes.sizeof(argtype)
            lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if code.islower() \
                else (0, (1 << bits) - 1)
            if not lo <= v <= hi:
                raise _errors.OutOfRange(f"{name} argument {index}: {v} is outside the range "
                                         f"of its C type [{lo}, {hi}] (refused, not wrapped)",
                                         function=name)
        return v
    if isinstance(arg, numbers.Real):
        return float(arg)
    if isinstance(arg, Out):
        return ctypes.byref(arg._c)
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


def progress_callback(func):
    """Wrap func(fields: dict) -> int as an induct_progress_fn. The dict holds the
    induct_progress fields that fit in the library's `size` (strings decoded, NULL ->
    None). Keep the returned object alive for the whole C call."""
    def trampoline(p, _user):
        q = p.contents
        fields = {}
        for fname, _ in Progress._fields_:
            d = getattr(Progress, fname)
            if d.offset + d.size > q.size:
                break  # an older library: the field is not there
            v = getattr(q, fname)
            fields[fname] = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
        return func(fields)
    return PROGRESS_FN(trampoline)
