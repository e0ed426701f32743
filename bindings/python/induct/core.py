"""Pythonic classes over libinduct's opaque handles: Model, Optimizer, Dataset.

No ctypes here: every C call goes through _capi.call()/value() with buffers from
_arrays and Out() scalars."""
import json
import numbers
import os
import signal
import tempfile
import threading
import warnings

from . import _arrays
from ._capi import GenerateConfig, KVConfig, ModelConfig, Out, ProbeConfig, RRTConfig, \
    TextConfig, TokenFileConfig, TrainConfig, address_of, c_int32, c_size_t, c_uint64, call, \
    check_int, new_struct, progress_callback, value
from ._errors import BufferTooSmall, InductError, Interrupted, IOFailure, \
    training_interrupted
from .analysis import ModelAnalysis, _probe_config
from .hooks import ModelHooks, train_step_hooked
from .model_lens import _UNSET, ModelLens
from .cache import ModelCache
from .llc import ModelLLC

POS = {"standard": 0, "shortformer": 1, "none": 2}
INIT = {"gpt2": 0, "torch": 1}
SPLIT = {"train": 0, "eval": 1}
OPTIM = {"adamw": 0, "sgd": 1}
METRIC = {"loss": 0x001, "icl_score": 0x002, "loss_by_position": 0x004,
          "prefix_matching": 0x008, "previous_token": 0x010, "copying": 0x020,
          "kv_accuracy": 0x040, "kv_attention": 0x080, "induction_score": 0x100,
          "loss_vectors": 0x200}
EVENT = {"step": 0x01, "eval": 0x02, "snapshot": 0x04, "done": 0x08, "target": 0x10}
#: Token-file formats (INDUCT_TOKFILE_*): raw little-endian uint16 (nanoGPT's train.bin),
#: raw uint32, and llm.c's headered uint16 format.
TOKFILE = {"u16": 0, "u32": 1, "llmc": 2}
#: Split rules of text datasets (INDUCT_SPLIT_BY_*).
TEXT_SPLIT = {"position": 0, "document": 1}
#: Byte-level text: the id of the optional BOS token (d_vocab becomes 257).
TEXT_BOS = 256
#: Columns of Dataset.kv_info().
KV_INFO_COLUMNS = ("answer_pos", "answer_token", "key_pos", "value_pos")
OPT_PARAM = {"lr": 1, "beta1": 2, "beta2": 3, "eps": 4, "weight_decay": 5, "grad_clip": 6,
             "warmup_steps": 7, "schedule": 8, "total_steps": 9, "min_lr_ratio": 10,
             "momentum": 11, "step": 12, "grad_shards": 13}


def choice(table, key, what):
    """table[key] for a name the user gave, else ValueError listing the choices."""
    try:
        return table[key]
    except (KeyError, TypeError):
        raise ValueError(f"unknown {what} {key!r}; known: {sorted(table)}") from None


class _Handle:
    """Owns one C handle; close() is idempotent; context manager; __del__ fallback."""

    _free = None

    def __init__(self, ptr, parents=()):
        self._ptr = ptr
        self._parents = tuple(parents)  # keep parents alive while we live

    @property
    def _as_parameter_(self):
        if not self._ptr:
            raise ValueError(f"{type(self).__name__} is closed")
        return self._ptr

    @property
    def closed(self):
        """True after close(): the C handle is released and every call raises ValueError."""
        return not self._ptr

    def close(self):
        """Release the C handle now (idempotent; also done by `with` and on garbage
        collection). Objects that depend on it (an optimizer's model) stay alive."""
        ptr, self._ptr = self._ptr, None
        if ptr:
            value(self._free, ptr)

    def _repr_fields(self):
        return ""

    def __repr__(self):
        name = f"induct.{type(self).__name__}"
        if self.closed:
            return f"<{name} (closed)>"
        return f"<{name} {self._repr_fields()}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass




class Model(_Handle, ModelLens, ModelAnalysis, ModelCache, ModelHooks, ModelLLC):
    """A decoder-only transformer. Keyword arguments are induct_model_config fields
    (n_layers, d_model, n_heads, d_head, d_mlp, n_ctx, d_vocab, positional ('standard',
    'shortformer', 'none'), layer_norm, smeared_keys, n_threads, init ('gpt2', 'torch'),
    smear_alpha_init, init_std, seed, max_bytes, shortformer_layers (with 'shortformer':
    W_pos enters the query/key input of the first this many layers; 0 = every layer)).
    It also has TransformerLens's HookedTransformer surface (induct.model_lens: cfg,
    W_Q, ..., model(tokens), run_with_hooks, to_tokens, ...; docs/python.md)."""

    _free = "induct_model_free"

    def __init__(self, **config):
        cfg = ModelConfig.from_kwargs(config, {"positional": POS, "init": INIT})
        if "layer_norm" in config or "smeared_keys" in config:
            cfg.layer_norm, cfg.smeared_keys = int(cfg.layer_norm), int(cfg.smeared_keys)
        out = Out("handle")
        call("induct_model_new", out, cfg)
        super().__init__(out.value)

    @classmethod
    def _wrap(cls, ptr):
        self = cls.__new__(cls)
        _Handle.__init__(self, ptr)
        return self

    def _repr_fields(self):
        c = self.config
        pos = {v: k for k, v in POS.items()}.get(c["positional"], c["positional"])
        return (f"n_layers={c['n_layers']} d_model={c['d_model']} n_heads={c['n_heads']} "
                f"d_head={c['d_head']} d_mlp={c['d_mlp']} n_ctx={c['n_ctx']} "
                f"d_vocab={c['d_vocab']} positional={pos!r} layer_norm={bool(c['layer_norm'])}"
                f" smeared_keys={bool(c['smeared_keys'])}"
                + (f" shortformer_layers={c['shortformer_layers']}" if c["shortformer_layers"]
                   else "")
                + f" n_params={self.n_params}")

    @property
    def config(self):
        """The architecture as a dict of induct_model_config fields (d_head resolved)."""
        cfg = new_struct(ModelConfig)
        call("induct_model_get_config", self, cfg)
        return cfg.as_dict()

    def clone(self):
        """An independent copy: same config and weights, its own gradients and workspace
        (and the same tokenizer, if one is attached)."""
        out = Out("handle")
        call("induct_model_clone", out, self)
        twin = type(self)._wrap(out.value)
        twin.tokenizer = self.tokenizer
        return twin

    def save(self, path):
        """Write the weights as a safetensors file with TransformerLens names (atomic).
        An attached tokenizer (set_tokenizer) is stored in the file's metadata
        (`tokenizer`, docs/checkpoint-format.md) and restored by load()."""
        if self.tokenizer is None:
            call("induct_model_save", self, os.fsencode(path))
            return
        from ._safetensors import add_metadata
        from .tokenizer import tokenizer_to_json
        meta = {"tokenizer": tokenizer_to_json(self.tokenizer)}
        d = os.path.dirname(os.path.abspath(os.fsdecode(path)))
        try:
            fd, tmp = tempfile.mkstemp(prefix=os.path.basename(os.fsdecode(path)) + ".tmp.",
                                       dir=d)
        except OSError as e:
            raise IOFailure(f"cannot write {os.fsdecode(path)!r}: {e}") from e
        os.close(fd)
        try:
            call("induct_model_save", self, os.fsencode(tmp))
            add_metadata(tmp, path, meta)
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass

    @classmethod
    def load(cls, path, **config):
        """A model from a safetensors file written by save() (or by PyTorch with TL names).
        With keyword arguments (those of Model(), the whole architecture) the configuration
        is given explicitly (induct_model_load_config): needed for a file whose
        architecture its tensors cannot tell (FormatError "cannot be told from its
        tensors", e.g. shortformer positions or no LayerNorm without __metadata__).
        A tokenizer saved with the model (Model.save) is attached again (FormatError if
        that metadata is malformed)."""
        out = Out("handle")
        if config:
            cfg = ModelConfig.from_kwargs(config, {"positional": POS, "init": INIT})
            call("induct_model_load_config", out, os.fsencode(path), cfg)
        else:
            call("induct_model_load", out, os.fsencode(path))
        model = cls._wrap(out.value)
        model.tokenizer = _saved_tokenizer(path)
        return model

    def set_threads(self, n):
        """Use `n` OpenMP threads for this model's work (results depend on the count)."""
        call("induct_model_set_threads", self, check_int(n, "n_threads"))

    @property
    def n_params(self):
        """Number of trainable floats (every tensor of tensor_names())."""
        return value("induct_model_n_params", self)

    @property
    def memory_used(self):
        """Bytes this model holds (parameters, gradients, workspace, optimizer moments)."""
        return value("induct_model_memory_used", self)

    def set_max_bytes(self, max_bytes):
        """Cap the model's memory (0 = no cap); InductError (ELIMIT) if it holds more."""
        call("induct_model_set_max_bytes", self, int(max_bytes))

    def tensor_names(self):
        """Parameter names in storage order (TransformerLens names)."""
        return [self.tensor_info(i)[0] for i in range(value("induct_model_n_tensors", self))]

    def tensor_info(self, index):
        """(TL name, shape) of tensor number `index` in storage order."""
        index = check_int(index, "index", c_size_t)
        name, ndim, numel = Out("char_p"), Out("uint32"), Out("size")
        shape = _arrays.buffer(4, "I")
        call("induct_model_tensor_info", self, index, name, shape, ndim, numel)
        return name.value.decode(), tuple(int(d) for d in shape[: ndim.value])

    def _shape_of(self, name):
        for i in range(value("induct_model_n_tensors", self)):
            n, shape = self.tensor_info(i)
            if n == name:
                return shape
        return None

    def get(self, name, grad=False):
        """A copy of tensor `name` (weights, or gradients of the last backward)."""
        shape = self._shape_of(name)
        n = 1
        for d in shape or (0,):
            n *= d
        buf = _arrays.buffer(max(n, 1))
        call("induct_model_get_tensor", self, name.encode(), 1 if grad else 0, buf, n, Out("size"))
        return _arrays.shaped(buf, shape)

    def set(self, name, values):
        """Overwrite weight tensor `name` with `values` of exactly its shape (ValueError
        otherwise, e.g. for a transposed matrix, even when the element count matches)."""
        buf, shape = _arrays.flat(values, "f")
        expected = self._shape_of(name)
        if expected is not None and tuple(shape) != expected:
            raise ValueError(f"{name} has shape {expected}, got values of shape "
                             f"{tuple(shape)}")
        call("induct_model_set_tensor", self, name.encode(), buf, len(buf))

    def weights(self, torch=False):
        """Every weight as a dict of TL-named arrays (PyTorch tensors with torch=True)."""
        out = {name: self.get(name) for name in self.tensor_names()}
        if torch:
            import torch as _torch
            out = {k: _torch.from_numpy(v.copy()) for k, v in out.items()}
        return out

    def forward(self, tokens, logits=True, return_type=_UNSET, loss_per_token=False,
                prepend_bos=None, padding_side=None):
        """Run tokens [batch, seq_len]; returns (logits [B,T,V] or None, losses [B,T-1], mean).
        Inside `with model.hooks(...)` the hooks run (see induct.hooks).
        With return_type ("logits", "loss", "both" or None; also as the second
        positional argument) it is TransformerLens's forward, the same as model(tokens,
        return_type=..., loss_per_token=...): see Model.__call__."""
        if return_type is not _UNSET or isinstance(logits, str):
            if isinstance(logits, str):
                return_type = logits
            return self._tl_forward(tokens, return_type, loss_per_token, prepend_bos,
                                    padding_side)
        return self._forward_tokens(tokens, logits)

    def _forward_tokens(self, tokens, logits=True):
        """forward() as (logits or None, losses, mean)."""
        toks, B, T = _arrays.tokens_in(tokens)
        V = self.config["d_vocab"]
        lg = _arrays.buffer(B * T * V) if logits else None
        ls = _arrays.buffer(B * (T - 1) if T > 1 else 1)
        mean = Out("double")
        if getattr(self, "_fwd_hooks", None):  # inside `with model.hooks(...)`
            self._forward_hooked(toks, B, T, lg, ls, mean)
        else:
            call("induct_model_forward", self, toks, B, T, lg, B * T * V if logits else 0,
                 ls, B * (T - 1) if T > 1 else 0, mean)
        return (_arrays.shaped(lg, (B, T, V)) if logits else None,
                _arrays.shaped(ls, (B, T - 1)), mean.value)

    def backward(self, tokens, d_logits=None):
        """Forward + backward on tokens; gradients are read with get(name, grad=True).
        Returns the mean next-token loss (nats). Inside `with model.hooks(...)` writing
        hooks are constant overwrites for the gradients, and backward hooks get the
        gradients at their points (see induct.hooks).

        d_logits: None, the gradients of the mean loss; else those of a metric of the
        logits (induct_model_backward_from_logits): a function called once with the
        pass's logits (read-only float32 [B, T, d_vocab], valid during the call) returning
        d(metric)/d(logits) (anything that broadcasts to that shape), or that array
        itself. Parameter gradients are then d(metric)/d(parameter) and backward hooks see
        d(metric)/d(activation). induct.patching.logit_diff_metric gives a logit
        difference with its d(logits)."""
        toks, B, T = _arrays.tokens_in(tokens)
        mean = Out("double")
        if d_logits is not None:
            self._backward_from_logits(toks, B, T, d_logits, mean)
        elif getattr(self, "_fwd_hooks", None) or getattr(self, "_bwd_hooks", None):
            self._backward_hooked(toks, B, T, mean)
        else:
            call("induct_model_backward", self, toks, B, T, mean)
        return mean.value

    def attention(self, tokens):
        """Attention patterns [n_layers, n_heads, T, T] of one sequence."""
        toks, B, T = _arrays.tokens_in(tokens)
        if B != 1:
            raise ValueError("attention() takes one sequence")
        c = self.config
        n = c["n_layers"] * c["n_heads"] * T * T
        buf = _arrays.buffer(n)
        call("induct_model_attention", self, toks, T, buf, n, Out("size"))
        return _arrays.shaped(buf, (c["n_layers"], c["n_heads"], T, T))

    def interrupt(self):
        """Stop a long call on this model from any thread."""
        value("induct_model_interrupt", self)

    def generate(self, tokens, max_new_tokens=16, temperature=0.0, seed=0):
        """Continue one sequence of token ids (a 1-D sequence or [1, T]) by
        `max_new_tokens` tokens (induct_model_generate): each new token is the arg max of
        the last position's logits (temperature 0, the lowest id on a tie) or a draw from
        softmax(logits / temperature), reproducible for a given `seed`. Each pass sees
        the last n_ctx tokens. Returns the int32 ids [T + max_new_tokens]: the prompt
        followed by the new tokens (as TransformerLens's generate). Decode them with a
        tokenizer's to_string() (induct.ByteTokenizer, induct.SentencePieceTokenizer)."""
        toks, B, T = _arrays.tokens_in(tokens)
        if B != 1:
            raise ValueError(f"generate() continues one sequence, got {B}")
        n = check_int(max_new_tokens, "max_new_tokens", lo=1)
        check_int(T + n, "prompt length + max_new_tokens", c_int32, lo=1)  # before allocating
        cfg = GenerateConfig.from_kwargs({"max_new_tokens": n, "temperature": temperature,
                                          "seed": seed})
        new = _arrays.buffer(n, "i")
        call("induct_model_generate", self, toks, check_int(T, "prompt length", lo=1), cfg,
             new, n, Out("size"))
        full = _arrays.buffer(T + n, "i")
        full[:T] = toks
        full[T:] = new
        return _arrays.shaped(full, (T + n,))

    def _head_scores(self, fn, dataset, n_seq, seq_len):
        n_seq, seq_len = check_int(n_seq, "n_seq"), check_int(seq_len, "seq_len")
        c = self.config
        n = c["n_layers"] * c["n_heads"]
        buf = _arrays.buffer(n)
        call(fn, self, dataset, n_seq, seq_len, buf, n, Out("size"))
        return _arrays.shaped(buf, (c["n_layers"], c["n_heads"]))

    def induction_score(self, dataset, n_seq=256, seq_len=64):
        """Induction score per head, [n_layers, n_heads]: the prefix-matching score read on
        the eval rows of a repeated-random-token dataset (docs/definitions.md)."""
        return self._head_scores("induct_analysis_induction_score", dataset, n_seq, seq_len)

    def previous_token_score(self, dataset, n_seq=256, seq_len=64):
        """Previous-token score per head, [n_layers, n_heads] (ICL paper, Appendix)."""
        return self._head_scores("induct_analysis_previous_token_score", dataset, n_seq,
                                 seq_len)


class Dataset(_Handle):
    """A source of token batches, immutable once configured (set_repeats() is the one
    setter); use Dataset.rrt(...), Dataset.tokens(...), Dataset.text(...) and so on."""

    _free = "induct_dataset_free"

    def __init__(self, ptr, kind="dataset"):
        super().__init__(ptr)
        self._kind = kind

    def _repr_fields(self):
        return f"{self._kind} d_vocab={self.d_vocab}"

    @classmethod
    def rrt(cls, **config):
        """Repeated random tokens; keywords are induct_rrt_config fields."""
        cfg = RRTConfig.from_kwargs(config)
        out = Out("handle")
        call("induct_dataset_new_rrt", out, cfg)
        return cls(out.value, "rrt")

    @classmethod
    def tokens(cls, tokens, d_vocab, seed=0):
        """Random windows over a token array (copied)."""
        toks, B, T = _arrays.tokens_in(tokens)
        out = Out("handle")
        call("induct_dataset_new_tokens", out, toks, B * T, check_int(d_vocab, "d_vocab"),
             check_int(seed, "seed", c_uint64))
        return cls(out.value, f"tokens n={B * T}")

    @classmethod
    def kv(cls, **config):
        """Key-value retrieval: each row is a context whose last token repeats
        the key at a random position p, followed by the value that came after it there;
        keywords are induct_kv_config fields (d_vocab, token_lo, token_hi, pair_min,
        pair_max (-1 = as late as fits), unique_key, all_positions, seed).
        Dataset.batch()'s meta is the value position p + 1. See docs/datasets.md."""
        cfg = KVConfig.from_kwargs(config)
        out = Out("handle")
        call("induct_dataset_new_kv", out, cfg)
        return cls(out.value, "kv")

    @classmethod
    def text(cls, data, **config):
        """Byte-level text (tokens = bytes, d_vocab 256, or 257 with bos=1) from `data`
        (bytes, or str encoded as UTF-8), one document, copied. Keywords are
        induct_text_config fields: bos, separator (-1 none), split ('position' or
        'document'), n_eval_windows, val_fraction, block_tokens, seed."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        data = bytes(data)
        cfg = TextConfig.from_kwargs(config, {"split": TEXT_SPLIT})
        out = Out("handle")
        call("induct_dataset_new_text", out, data, len(data), cfg)
        return cls(out.value, f"text bytes={len(data)} bos={cfg.bos}")

    @classmethod
    def text_path(cls, path, suffix=None, **config):
        """Byte-level text from a file, or from every file under a directory whose name
        ends with `suffix` (each file one document, sorted by path); keywords as text()."""
        cfg = TextConfig.from_kwargs(config, {"split": TEXT_SPLIT})
        out = Out("handle")
        call("induct_dataset_new_text_path", out, os.fsencode(path),
             None if suffix is None else suffix.encode("utf-8"), cfg)
        return cls(out.value, f"text path={os.fspath(path)!r} bos={cfg.bos}")

    @classmethod
    def token_file(cls, path, val_path=None, **config):
        """Token file(s), read with pread (never mapped), validated when opened; keywords are
        induct_token_file_config fields: format ('u16', 'u32', 'llmc'), d_vocab (0 =
        largest id + 1), n_eval_windows, val_fraction (ignored with val_path),
        block_tokens, resident_limit, seed. The files must not change while in use."""
        cfg = TokenFileConfig.from_kwargs(config, {"format": TOKFILE})
        out = Out("handle")
        call("induct_dataset_new_token_file", out, os.fsencode(path),
             None if val_path is None else os.fsencode(val_path), cfg)
        return cls(out.value, f"token_file path={os.fspath(path)!r}")

    @property
    def d_vocab(self):
        """Vocabulary size of the tokens this dataset produces."""
        return value("induct_dataset_d_vocab", self)

    @property
    def bos(self):
        """The BOS id every sequence starts with, or None (induct_dataset_bos; the BOS
        rule is in docs/datasets.md)."""
        out = Out("int32")
        call("induct_dataset_bos", self, out)
        return None if out.value < 0 else out.value

    def probe_config(self):
        """The head probe for a model trained on this dataset, as keywords of the probe
        functions (Model.prefix_matching(**d.probe_config()), Optimizer.train(probe=...)):
        the dataset's BOS (None for none) and token range, the other fields at their
        defaults (induct_probe_config_for_dataset)."""
        cfg = ProbeConfig.defaults()
        call("induct_probe_config_for_dataset", cfg, cfg.size, self)
        out = cfg.as_dict()
        if out["bos"] < 0:
            out["bos"] = None
        return out

    def kv_info(self, index, batch, seq_len, split="train"):
        """Targets of batch `index` of a KV dataset, int32 [batch, 4]: answer position,
        answer token, key position, value position (KV_INFO_COLUMNS), for exactly the
        rows batch() returns with the same arguments."""
        index, batch = check_int(index, "index", c_uint64), check_int(batch, "batch")
        seq_len = check_int(seq_len, "seq_len")
        buf = _arrays.buffer(batch * 4, "i")
        call("induct_dataset_kv_info", self, choice(SPLIT, split, "split"), index, batch,
             seq_len, buf, batch * 4, Out("size"))
        return _arrays.shaped(buf, (batch, 4))

    def kv_ceiling(self, seq_len):
        """Bayes-optimal answer accuracy of a KV dataset (the task's ceiling), exact."""
        v = Out("double")
        call("induct_dataset_kv_ceiling", self, check_int(seq_len, "seq_len"), v)
        return v.value

    def split_tokens(self, split="train"):
        """Tokens in a split's stream (text, token-file and token-array datasets)."""
        v = Out("uint64")
        call("induct_dataset_split_tokens", self, choice(SPLIT, split, "split"), v)
        return v.value

    def window_count(self, seq_len, split="train"):
        """Distinct windows of seq_len tokens of a split: valid random starts (train) or
        the size of the fixed evaluation set (eval)."""
        v = Out("uint64")
        call("induct_dataset_window_count", self, choice(SPLIT, split, "split"),
             check_int(seq_len, "seq_len"), v)
        return v.value

    def set_repeats(self, fraction, min_len, max_len):
        """Training curriculum of a text or token-file dataset (Sabry & Belz 2025: windows
        with repeated spans speed up induction-head formation): each train window carries,
        with probability `fraction` (in [0, 1]; 0 = off, the default), one repeated span of
        L tokens, L uniform in [min_len, min(max_len, seq_len // 2)], copied from a uniform
        earlier place of the same window. Window starts and the eval split are unchanged.
        With fraction > 0, train batches need seq_len >= 2 * min_len (OutOfRange).
        Not concurrently with other use of the dataset. Returns self.
        induct_dataset_set_repeats; docs/datasets.md, "Repeated-span curriculum"."""
        if not isinstance(fraction, numbers.Real):
            raise TypeError(f"fraction must be a number, got {type(fraction).__name__} "
                            f"{fraction!r}")
        call("induct_dataset_set_repeats", self, float(fraction),
             check_int(min_len, "min_len"), check_int(max_len, "max_len"))
        return self

    def batch(self, index, batch, seq_len, split="train"):
        """Batch number `index`: (tokens [batch, seq_len], meta [batch])."""
        index, batch = check_int(index, "index", c_uint64), check_int(batch, "batch")
        seq_len = check_int(seq_len, "seq_len")
        tok = _arrays.buffer(batch * seq_len, "i")
        meta = _arrays.buffer(batch, "i")
        call("induct_dataset_batch", self, choice(SPLIT, split, "split"), index, batch, seq_len,
             tok, batch * seq_len, meta, batch)
        return _arrays.shaped(tok, (batch, seq_len)), meta


class Optimizer(_Handle):
    """AdamW ('adamw') or SGD ('sgd') over a model's parameters. Keyword arguments set
    runtime parameters: lr, beta1, beta2, eps, weight_decay, grad_clip, warmup_steps,
    schedule (0 constant, 1 cosine), total_steps, min_lr_ratio, momentum, step,
    grad_shards (gradient shards summed in a fixed tree; see set_comm)."""

    _free = "induct_optimizer_free"

    def __init__(self, model, kind="adamw", **params):
        code = choice(OPTIM, kind, "optimizer kind")
        for k in params:
            if k not in OPT_PARAM:
                raise TypeError(f"unknown optimizer parameter {k!r}; known: {sorted(OPT_PARAM)}")
        out = Out("handle")
        call("induct_optimizer_new", out, model, code)
        super().__init__(out.value, parents=(model,))
        self.model = model
        self.kind = kind
        for k, v in params.items():
            self[k] = v

    def _repr_fields(self):
        kind = f"{self.kind} " if getattr(self, "kind", None) else ""
        return (f"{kind}step={int(self['step'])} lr={self['lr']:g} "
                f"model n_params={self.model.n_params}")

    @staticmethod
    def bounds(name):
        """(lowest, highest) accepted value of a runtime parameter (both inclusive)."""
        if name not in OPT_PARAM:
            raise KeyError(f"unknown optimizer parameter {name!r}; known: {sorted(OPT_PARAM)}")
        lo, hi = Out("double"), Out("double")
        call("induct_opt_param_bounds", OPT_PARAM[name], lo, hi)
        return lo.value, hi.value

    def __setitem__(self, name, value):
        if name not in OPT_PARAM:
            raise KeyError(f"unknown optimizer parameter {name!r}; known: {sorted(OPT_PARAM)}")
        call("induct_optimizer_set", self, OPT_PARAM[name], float(value))

    def __getitem__(self, name):
        if name not in OPT_PARAM:
            raise KeyError(f"unknown optimizer parameter {name!r}; known: {sorted(OPT_PARAM)}")
        v = Out("double")
        call("induct_optimizer_get", self, OPT_PARAM[name], v)
        return v.value

    def set_comm(self, comm):
        """Train data-parallel: `comm` is one rank of a communicator (a
        ``ThreadRanks(...)[r]``, or a ``Comm``, e.g. ``Comm.from_mpi4py(MPI.COMM_WORLD)``),
        or None to train alone again. Every rank computes its share of the
        ``grad_shards`` gradient shards and the ranks add them in one fixed tree, so the
        weights are bit-identical to one process with the same grad_shards (which must
        be a multiple of the rank count). See docs/distributed.md."""
        call("induct_optimizer_set_comm", self, None if comm is None else comm._address())
        self._comm = comm  # the table (and its callbacks) must outlive its use

    def save(self, path):
        """Weights plus optimizer state (moments, step, settings) in one safetensors file."""
        call("induct_optimizer_save", self, os.fsencode(path))

    @classmethod
    def load(cls, model, path):
        """Restore the optimizer state (and the weights) of a save() into `model`."""
        out = Out("handle")
        call("induct_optimizer_load", out, model, os.fsencode(path))
        self = cls.__new__(cls)
        _Handle.__init__(self, out.value, parents=(model,))
        self.model = model
        self.kind = None  # not recorded in the file's metadata we read
        return self

    def train(self, dataset, steps, batch=32, seq_len=0, eval_every=0, eval_log2=False,
              eval_batch=64, metrics=("loss",), metrics_path=None, metrics_append=False,
              snapshot_every=0, snapshot_log2=False, snapshot_optimizer=True,
              snapshot_path=None, target_loss=0.0, progress=None, probe=None,
              resume_path=None):
        """Train until the step counter reaches `steps` (induct_train).

        `probe`: keywords of the head probe of the "prefix_matching" and "copying"
        metrics (as Model.prefix_matching()); None uses dataset.probe_config(), the
        dataset's BOS and token range.

        `metrics` names INDUCT_TRAIN_METRIC_* bits ("loss", "icl_score", ...). `progress`,
        if given, is called on this thread as progress(info: dict) after every step,
        evaluation and snapshot; returning True stops the run (InductError Interrupted is
        raised). An exception raised inside it also stops the run and is re-raised here.

        Ctrl-C (SIGINT) stops the run between two steps and raises KeyboardInterrupt
        after keeping a resume point:
        the model and this optimizer hold exactly the state after the last completed
        step (calling train() again with the same `steps` continues bit-identically),
        and that state (weights and optimizer, Optimizer.save()) is written to
        `resume_path`, or else to `snapshot_path`, `{step}` replaced by the step
        counter; the exception's `path` and `step` attributes say where and when (path
        None when neither is given). The signal is
        acted on when the library next reports progress (after the current step or
        evaluation). Returns the path of the metrics log (or None)."""
        cfg = TrainConfig.from_kwargs(dict(
            steps=steps, batch=batch, seq_len=seq_len, eval_every=eval_every,
            eval_log2=int(bool(eval_log2)), eval_batch=eval_batch,
            metrics_append=int(bool(metrics_append)), snapshot_every=snapshot_every,
            snapshot_log2=int(bool(snapshot_log2)),
            snapshot_optimizer=int(bool(snapshot_optimizer)), target_loss=target_loss))
        bits = 0
        for name in metrics:
            bits |= choice(METRIC, name, "metric")
        cfg.metrics = bits
        keep = []
        if metrics_path is not None:
            keep.append(os.fsencode(metrics_path))
            cfg.metrics_path = keep[-1]
        if snapshot_path is not None:
            keep.append(os.fsencode(snapshot_path))
            cfg.snapshot_path = keep[-1]
        if probe is not None:
            keep.append(_probe_config(probe))
            cfg.probe = address_of(keep[-1])
        raised, sigint = [], []

        def on_progress(fields):
            if sigint:
                return 1
            if progress is None:
                return 0
            info = dict(fields)
            info["events"] = [k for k, v in EVENT.items() if fields["events"] & v]
            info.pop("size", None)
            info.pop("reserved0", None)
            return 1 if progress(info) else 0

        cb = progress_callback(on_progress, raised)  # kept alive for the whole call
        try:
            with _SigintStops(self.model, sigint):
                call("induct_train", self, dataset, cfg, cb, None)
        except InductError as e:
            stopped = isinstance(e, Interrupted) and (sigint or _interrupts(raised))
            if not stopped:
                if raised:
                    raise raised[0] from None
                raise
        if sigint or _interrupts(raised):
            step = int(self["step"])
            path = resume_path if resume_path is not None else snapshot_path
            if path is not None:
                path = os.fsdecode(path).replace("{step}", str(step))
                try:
                    self.save(path)
                except InductError as e:  # the state is still in memory
                    raise training_interrupted(step, None) from e
            raise training_interrupted(step, path)
        if raised:
            raise raised[0]
        return metrics_path

    @property
    def current_lr(self):
        """The learning rate the next step will use (warm-up and schedule applied)."""
        v = Out("double")
        call("induct_optimizer_current_lr", self, v)
        return v.value

    def step(self):
        """Apply the model's current gradients; returns the gradient norm before clipping."""
        v = Out("double")
        call("induct_optimizer_step", self, v)
        return v.value

    def train_step(self, data, batch=None, seq_len=None):
        """One training step on a Dataset (batch, seq_len required) or on tokens
        [batch, seq_len]; returns the mean loss before the update (nats). Inside
        `with model.hooks(...)` the hooks run in the step (see induct.hooks)."""
        loss = Out("double")
        if getattr(self.model, "_fwd_hooks", None) or getattr(self.model, "_bwd_hooks", None):
            if isinstance(data, Dataset) and (batch is None or seq_len is None):
                raise TypeError("train_step(dataset, batch, seq_len)")
            train_step_hooked(self, self.model, data, batch, seq_len, loss,
                              isinstance(data, Dataset))
        elif isinstance(data, Dataset):
            if batch is None or seq_len is None:
                raise TypeError("train_step(dataset, batch, seq_len)")
            call("induct_train_step", self, data, batch, seq_len, loss)
        else:
            toks, B, T = _arrays.tokens_in(data)
            call("induct_train_step_tokens", self, toks, B, T, loss)
        return loss.value


def _saved_tokenizer(path):
    """The tokenizer stored in a checkpoint's metadata, or None."""
    from ._errors import FormatError
    from ._safetensors import read_metadata
    from .tokenizer import tokenizer_from_json
    try:
        text = read_metadata(path).get("tokenizer")
        return None if text is None else tokenizer_from_json(text)
    except ImportError as e:  # a sentencepiece tokenizer without python3-sentencepiece
        warnings.warn(f"{os.fsdecode(path)}: the saved tokenizer is not attached: {e}",
                      stacklevel=3)
        return None
    except (ValueError, TypeError) as e:
        raise FormatError(f"checkpoint {os.fsdecode(path)!r}: its tokenizer metadata "
                          f"cannot be read: {e}") from None


def _interrupts(raised):
    return any(isinstance(e, KeyboardInterrupt) for e in raised)


class _SigintStops:
    """While active (on the main thread, when SIGINT has Python's default handler),
    Ctrl-C records itself in `flag` and interrupts `model` instead of raising
    KeyboardInterrupt inside a C callback (which ctypes can only print and drop)."""

    def __init__(self, model, flag):
        self.model, self.flag, self.old = model, flag, None

    def _handler(self, signum, frame):
        self.flag.append(signum)
        self.model.interrupt()

    def __enter__(self):
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)


def read_tokens(path, format="u16", d_vocab=0):
    """A whole token file as int32 ids [n] (validated; d_vocab 0 = no bound)."""
    fmt = choice(TOKFILE, format, "format")
    d_vocab = check_int(d_vocab, "d_vocab")
    n = Out("size")
    try:  # NULL buffer: the library reports the count
        call("induct_token_file_read", os.fsencode(path), fmt, d_vocab, None, 0, n)
    except BufferTooSmall:
        pass
    buf = _arrays.buffer(n.value, "i")
    call("induct_token_file_read", os.fsencode(path), fmt, d_vocab, buf, n.value,
         Out("size"))
    return _arrays.shaped(buf, (n.value,))


def write_tokens(path, tokens, format="u16"):
    """Write token ids to `path` atomically in `format` ('u16', 'u32', 'llmc')."""
    if format not in TOKFILE:
        raise ValueError(f"format must be one of {sorted(TOKFILE)}, got {format!r}")
    buf, _ = _arrays.flat(tokens, "i")
    call("induct_token_file_write", os.fsencode(path), TOKFILE[format], buf, len(buf))


def read_metrics(path):
    """The JSON Lines metrics log of Optimizer.train as a list of dicts (one per evaluation)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
