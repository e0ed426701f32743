"""TransformerLens's HookedTransformer surface on induct.Model.

ModelLens is a base class of induct.Model. Each name has TransformerLens's meaning
(argument names, defaults, shapes, return types); docs/python.md, "TransformerLens →
libinduct", lists every name and what differs. Arrays are NumPy for induct.Model and
PyTorch tensors for induct.lens.HookedTransformer (the same model, `_tensor_type =
"torch"`).

* model.cfg: a HookedTransformerConfig (TransformerLens's field names) of the model.
* Weights: W_E, W_pos, W_U, b_U, and stacked over the layers W_Q, W_K, W_V [L, H, D, E],
  W_O [L, H, E, D], b_Q, b_K, b_V [L, H, E], b_O [L, D], W_in [L, D, M], W_out [L, M, D],
  b_in [L, M], b_out [L, D]; QK and OV as FactoredMatrix [L, H, D, D]; state_dict(),
  load_state_dict(). Reading gives a copy; assigning the whole property writes the model.
* Running: model(input, return_type=..., loss_per_token=...), run_with_hooks(),
  run_with_cache(names_filter=..., remove_batch_dim=...), add_hook(), reset_hooks(); hook
  functions are called fn(activation, hook) with a HookPoint.
* Tokens: set_tokenizer(), to_tokens(), to_str_tokens(), to_string(), to_single_token(),
  to_single_str_token(); the tokenizer is saved with the model (Model.save).
* Circuits: tokens_to_residual_directions(), all_composition_scores(),
  accumulated_bias(), all_head_labels().
"""
import collections
import math
import numbers

from . import _arrays
from .factored import FactoredMatrix, composition_scores
from .hook_point import HookPoint

__all__ = ["ModelLens", "HookedTransformerConfig", "Output", "lm_cross_entropy_loss"]

#: Marks "argument not given" where None has a meaning.
_UNSET = object()

#: What run_with_cache(incl_bwd=True) differentiates.
LOSS_ONLY = (
    "run_with_cache(incl_bwd=True) differentiates the mean next-token loss it returns "
    "(return_type='loss'), or a metric of the logits given by d_logits= (a function of the "
    "logits returning d(metric)/d(logits), e.g. induct.patching.LogitDiff(...).grad); "
    "docs/python.md, 'Gradients'")

Output = collections.namedtuple("Output", "logits loss")
Output.__doc__ = """forward(return_type="both") result: `logits` [B, T, d_vocab] and `loss`
(the mean, or [B, T-1] with loss_per_token), as TransformerLens's Output."""

_POS_NAMES = ("standard", "shortformer", "none")
_INIT_NAMES = ("gpt2", "torch")


def _torch():
    import torch
    return torch


def _is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _float_array(values, what):
    """A float32 NumPy array of values (torch tensors, lists, arrays)."""
    np = _arrays.np
    if _is_torch(values):
        values = values.detach().cpu().numpy()
    a = np.asarray(values)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"{what}: numbers expected, got an array of {a.dtype}")
    return a.astype(np.float32)


def lm_cross_entropy_loss(logits, tokens, per_token=False):
    """Next-token cross-entropy in nats, as TransformerLens's utils.lm_cross_entropy_loss:
    logits [B, T, V], tokens [B, T] -> the mean over B·(T-1) predictions, or [B, T-1]
    with per_token. Computed in float64 (log-sum-exp); a per-token result is float32.
    Arrays of the input's kind (NumPy or PyTorch)."""
    np = _arrays.np
    torch_ = _is_torch(logits)
    lg = logits.detach().cpu().numpy() if torch_ else np.asarray(logits)
    tk = tokens.detach().cpu().numpy() if _is_torch(tokens) else np.asarray(tokens)
    if lg.ndim == 2:
        lg, tk = lg[None], tk.reshape(1, -1)
    if lg.ndim != 3 or tk.shape != lg.shape[:2]:
        raise ValueError(f"logits [B, T, V] and tokens [B, T] expected, got {lg.shape} and "
                         f"{tk.shape}")
    x = lg[:, :-1].astype(np.float64)
    m = x.max(-1, keepdims=True)
    lse = m[..., 0] + np.log(np.exp(x - m).sum(-1))
    picked = np.take_along_axis(x, tk[:, 1:, None].astype(np.int64), -1)[..., 0]
    loss = lse - picked
    out = loss.astype(np.float32) if per_token else np.float64(loss.mean())
    if torch_:
        t = _torch()
        return t.from_numpy(out) if per_token else t.tensor(out, dtype=t.float64)
    return out


class HookedTransformerConfig:
    """TransformerLens's HookedTransformerConfig for the models libinduct computes.

    Fields with TransformerLens's names and defaults: n_layers, d_model, n_ctx, d_head,
    model_name ("custom"), n_heads (-1: d_model // d_head), d_mlp (None: 4·d_model unless
    attn_only), act_fn (required with an MLP: "gelu_new", the only one), d_vocab (-1: the
    tokenizer's), eps (1e-5, the only one), use_attn_result (False), normalization_type
    ("LN" or None), attn_only (False), seed (None: 0), init_mode ("gpt2"; also "torch",
    libinduct's PyTorch-default init), initializer_range (-1: 0.8 / sqrt(d_model), the
    gpt2 init's std), positional_embedding_type ("standard", "shortformer"; also "none"),
    d_vocab_out (-1: d_vocab), default_prepend_bos (True), tokenizer_name, device ("cpu"),
    n_devices (1), dtype (float32), init_weights (True), and the derived n_params
    (attention and MLP weights, as TransformerLens counts them), tokenizer_prepends_bos
    (False), use_attn_scale (True), attn_scale (sqrt(d_head)).

    libinduct's own: smeared_keys (False), smear_alpha_init (0.0), shortformer_layers (0),
    n_threads (1), max_bytes (0).

    TransformerLens settings whose other values this library cannot compute (rotary or
    alibi positions, RMSNorm, gated or parallel MLPs, grouped-query attention, local
    attention, soft caps, ...) are accepted at their TransformerLens default only; any
    other value is NotImplementedError naming the field. Unknown names are TypeError.

    model.cfg is the model's own config: its architecture fields are read-only (the model
    cannot change shape), use_attn_result and default_prepend_bos may be set."""

    _ARCH = ("n_layers", "d_model", "n_ctx", "d_head", "n_heads", "d_mlp", "act_fn",
             "d_vocab", "eps", "normalization_type", "attn_only", "seed", "init_mode",
             "initializer_range", "positional_embedding_type", "d_vocab_out", "smeared_keys",
             "smear_alpha_init", "shortformer_layers", "n_params", "max_bytes", "n_threads",
             "device", "n_devices", "dtype", "tokenizer_prepends_bos", "use_attn_scale",
             "attn_scale", "init_weights")
    _DEFAULTS = dict(model_name="custom", n_heads=-1, d_mlp=None, act_fn=None, d_vocab=-1,
                     eps=1e-5, use_attn_result=False, normalization_type="LN",
                     attn_only=False, seed=None, init_mode="gpt2", initializer_range=-1.0,
                     positional_embedding_type="standard", d_vocab_out=-1,
                     default_prepend_bos=True, tokenizer_name=None, device="cpu",
                     n_devices=1, dtype=None, init_weights=True, smeared_keys=False,
                     smear_alpha_init=0.0, shortformer_layers=0, n_threads=1, max_bytes=0,
                     tokenizer_prepends_bos=False, use_attn_scale=True, attn_scale=-1.0,
                     n_params=None)
    #: TransformerLens fields accepted only at these values (their defaults).
    _FIXED = dict(use_split_qkv_input=False, use_hook_mlp_in=False, use_attn_in=False,
                  use_local_attn=False, ungroup_grouped_query_attention=False,
                  original_architecture=None, from_checkpoint=False, checkpoint_index=None,
                  checkpoint_label_type=None, checkpoint_value=None, window_size=None,
                  attn_types=None, attention_dir="causal",
                  scale_attn_by_inverse_layer_idx=False, final_rms=False,
                  parallel_attn_mlp=False, rotary_dim=None, use_hook_tokens=False,
                  gated_mlp=False, n_key_value_heads=None, post_embedding_ln=False,
                  rotary_base=10000, trust_remote_code=False, rotary_adjacent_pairs=False,
                  load_in_4bit=False, num_experts=None, experts_per_token=None,
                  relative_attention_max_distance=None,
                  relative_attention_num_buckets=None, decoder_start_token_id=None,
                  tie_word_embeddings=False, use_normalization_before_and_after=False,
                  attn_scores_soft_cap=-1.0, output_logits_soft_cap=-1.0,
                  use_NTK_by_parts_rope=False, dtype_override=None)

    def __init__(self, n_layers, d_model, n_ctx, d_head, **kwargs):
        object.__setattr__(self, "_frozen", False)
        fields = dict(self._DEFAULTS)
        fields.update(n_layers=n_layers, d_model=d_model, n_ctx=n_ctx, d_head=d_head)
        for k, v in kwargs.items():
            if k in self._FIXED:
                if v != self._FIXED[k] and not (v is None and self._FIXED[k] is None):
                    raise NotImplementedError(
                        f"HookedTransformerConfig.{k}={v!r}: libinduct computes only "
                        f"{k}={self._FIXED[k]!r} (docs/python.md, 'TransformerLens → "
                        f"libinduct')")
                continue
            if k not in fields:
                raise TypeError(f"unknown HookedTransformerConfig field {k!r}")
            fields[k] = v
        for k, v in fields.items():
            object.__setattr__(self, k, v)
        for k, v in self._FIXED.items():
            object.__setattr__(self, k, v)
        self._post_init()

    def _post_init(self):
        s = object.__setattr__
        for k in ("n_layers", "d_model", "n_ctx", "d_head", "n_heads", "d_vocab", "d_mlp"):
            v = getattr(self, k)
            if v is None and k == "d_mlp":
                continue
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise TypeError(f"HookedTransformerConfig.{k} must be an int, got {v!r}")
            if v < 1 and not (v == -1 and k in ("n_heads", "d_vocab")) and \
                    not (v == 0 and k == "d_mlp"):
                raise ValueError(f"HookedTransformerConfig.{k} must be positive, got {v}")
        if self.n_heads == -1:
            if self.d_model % self.d_head:
                raise ValueError(f"n_heads -1 needs d_head ({self.d_head}) to divide d_model "
                                 f"({self.d_model})")
            s(self, "n_heads", self.d_model // self.d_head)
        if self.normalization_type not in ("LN", None):
            raise NotImplementedError(f"normalization_type={self.normalization_type!r}: "
                                      f"libinduct has LayerNorm ('LN') or none (None)")
        if self.positional_embedding_type not in _POS_NAMES:
            raise NotImplementedError(f"positional_embedding_type="
                                      f"{self.positional_embedding_type!r}: libinduct has "
                                      f"{list(_POS_NAMES)}")
        if self.attn_only:
            s(self, "d_mlp", None)
        else:
            if self.d_mlp is None:
                s(self, "d_mlp", 4 * self.d_model)
            if self.act_fn is None:
                raise ValueError("act_fn must be given for a model with an MLP "
                                 "(attn_only=False): libinduct computes 'gelu_new'")
        if self.act_fn not in (None, "gelu_new"):
            raise NotImplementedError(f"act_fn={self.act_fn!r}: libinduct's MLP is "
                                      f"'gelu_new' (GELU, tanh approximation)")
        if self.eps != 1e-5:
            raise NotImplementedError(f"eps={self.eps!r}: libinduct's LayerNorm uses 1e-5")
        if self.init_mode not in _INIT_NAMES:
            raise NotImplementedError(f"init_mode={self.init_mode!r}: libinduct has "
                                      f"{list(_INIT_NAMES)}")
        if self.initializer_range < 0:
            s(self, "initializer_range", 0.8 / math.sqrt(self.d_model))
        if self.d_vocab_out == -1:
            s(self, "d_vocab_out", self.d_vocab)
        elif self.d_vocab_out != self.d_vocab:
            raise NotImplementedError("d_vocab_out != d_vocab: libinduct's unembedding "
                                      "maps to the input vocabulary")
        if not self.use_attn_scale or self.attn_scale not in (-1.0, math.sqrt(self.d_head)):
            raise NotImplementedError("libinduct scales attention scores by 1/sqrt(d_head) "
                                      "(use_attn_scale=True, attn_scale=-1)")
        s(self, "attn_scale", math.sqrt(self.d_head))
        if self.device not in (None, "cpu"):
            raise NotImplementedError(f"device={self.device!r}: libinduct runs on the CPU")
        s(self, "device", "cpu")
        d_mlp = 0 if self.attn_only else self.d_mlp
        s(self, "n_params", self.n_layers * (4 * self.d_model * self.d_head * self.n_heads
                                             + 2 * self.d_model * d_mlp))

    def __setattr__(self, name, value):
        if getattr(self, "_frozen", False) and name in self._ARCH:
            raise AttributeError(f"model.cfg.{name} is read-only: the model's architecture "
                                 f"is fixed when it is made")
        if name not in self._DEFAULTS and name not in self._FIXED and \
                name not in ("n_layers", "d_model", "n_ctx", "d_head"):
            raise AttributeError(f"HookedTransformerConfig has no field {name!r}")
        object.__setattr__(self, name, value)

    def to_dict(self):
        """Every field as a dict (TransformerLens's to_dict)."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __repr__(self):
        return "HookedTransformerConfig:\n" + "\n".join(
            f"  {k}: {v!r}" for k, v in sorted(self.to_dict().items()))

    def model_kwargs(self):
        """The induct.Model(...) keywords of this config (d_vocab must be set)."""
        if self.d_vocab is None or self.d_vocab < 1:
            raise ValueError("d_vocab is -1: give it, or a tokenizer to take it from")
        kw = dict(n_layers=self.n_layers, d_model=self.d_model, n_heads=self.n_heads,
                  d_head=self.d_head, d_mlp=0 if self.attn_only else self.d_mlp,
                  n_ctx=self.n_ctx, d_vocab=self.d_vocab,
                  positional=self.positional_embedding_type,
                  layer_norm=1 if self.normalization_type == "LN" else 0,
                  smeared_keys=1 if self.smeared_keys else 0, n_threads=self.n_threads,
                  init=self.init_mode, smear_alpha_init=self.smear_alpha_init,
                  init_std=self.initializer_range,
                  seed=0 if self.seed is None else self.seed, max_bytes=self.max_bytes,
                  shortformer_layers=self.shortformer_layers)
        return kw

    @classmethod
    def from_model_config(cls, c, **extra):
        """The config of a model from its induct_model_config dict (Model.config)."""
        pos = _POS_NAMES[c["positional"]] if c["positional"] < 3 else c["positional"]
        self = cls(n_layers=c["n_layers"], d_model=c["d_model"], n_ctx=c["n_ctx"],
                   d_head=c["d_head"], n_heads=c["n_heads"],
                   d_mlp=c["d_mlp"] or None, act_fn="gelu_new" if c["d_mlp"] else None,
                   d_vocab=c["d_vocab"],
                   normalization_type="LN" if c["layer_norm"] else None,
                   attn_only=c["d_mlp"] == 0, seed=c["seed"],
                   init_mode=_INIT_NAMES[c["init"]] if c["init"] < 2 else "gpt2",
                   initializer_range=c["init_std"] if c["init_std"] > 0 else -1.0,
                   positional_embedding_type=pos, smeared_keys=bool(c["smeared_keys"]),
                   smear_alpha_init=c["smear_alpha_init"],
                   shortformer_layers=c["shortformer_layers"], n_threads=c["n_threads"],
                   max_bytes=c["max_bytes"], **extra)
        return self


class ModelLens:
    """TransformerLens's HookedTransformer methods and properties (module docstring)."""

    _tensor_type = "numpy"
    tokenizer = None

    # ---- arrays -----------------------------------------------------------------
    @property
    def _torch_mode(self):
        return self._tensor_type == "torch"

    def _out(self, a):
        """A NumPy result as this model's array type."""
        if self._torch_mode and a is not None:
            t = _torch()
            if isinstance(a, _arrays.np.ndarray):
                return t.from_numpy(_arrays.np.ascontiguousarray(a))
            return t.tensor(a)
        return a

    def _as_tensor(self, view):
        """A hook's activation view as the array type its function gets (no copy)."""
        return _torch().from_numpy(view) if self._torch_mode else view

    # ---- config -----------------------------------------------------------------
    @property
    def cfg(self):
        """A HookedTransformerConfig of this model (TransformerLens's field names; the
        architecture fields are read-only, use_attn_result and default_prepend_bos may be
        set). The same object on every access."""
        c = self.config
        cfg = self.__dict__.get("_cfg_obj")
        if cfg is None:
            np = _arrays.np
            dtype = _torch().float32 if self._torch_mode else \
                (np.float32 if np is not None else "float32")
            cfg = HookedTransformerConfig.from_model_config(c, dtype=dtype)
            tok = self.tokenizer
            if tok is not None:
                object.__setattr__(cfg, "tokenizer_name", type(tok).__name__)
            object.__setattr__(cfg, "_frozen", True)
            self.__dict__["_cfg_obj"] = cfg
        else:  # the fields a model can change after it is made
            object.__setattr__(cfg, "n_threads", c["n_threads"])
            object.__setattr__(cfg, "max_bytes", c["max_bytes"])
        return cfg

    def set_use_attn_result(self, use_attn_result):
        """With True, run_with_cache() without names also caches every
        `attn.hook_result` [B, T, H, d_model] (as TransformerLens's use_attn_result)."""
        self.cfg.use_attn_result = bool(use_attn_result)

    # ---- weights ----------------------------------------------------------------
    def _tensor(self, name):
        return self.get(name)

    def _stack(self, suffix, what):
        c = self.config
        if suffix.startswith("mlp.") and not c["d_mlp"]:
            raise AttributeError(f"{what}: an attention-only model has no MLP")
        np = _arrays.np
        return self._out(np.stack([self.get(f"blocks.{l}.{suffix}")
                                   for l in range(c["n_layers"])]))

    def _set_stack(self, suffix, what, values):
        c = self.config
        if suffix.startswith("mlp.") and not c["d_mlp"]:
            raise AttributeError(f"{what}: an attention-only model has no MLP")
        a = _float_array(values, what)
        names = [f"blocks.{l}.{suffix}" for l in range(c["n_layers"])]
        expected = (c["n_layers"],) + self._shape_of(names[0])
        if a.shape != expected:
            raise ValueError(f"{what} has shape {expected}, got values of shape {a.shape}")
        for l, name in enumerate(names):
            self.set(name, a[l])

    def _single(self, name, what):
        if self._shape_of(name) is None:
            raise AttributeError(f"{what}: this model has no {name} "
                                 f"(positional={self.cfg.positional_embedding_type!r})")
        return self._out(self.get(name))

    def _set_single(self, name, what, values):
        if self._shape_of(name) is None:
            raise AttributeError(f"{what}: this model has no {name}")
        self.set(name, _float_array(values, what))

    def _prop(suffix, what, doc, stacked=True):  # noqa: N805 - a property factory
        if stacked:
            def fget(self):
                return self._stack(suffix, what)

            def fset(self, v):
                self._set_stack(suffix, what, v)
        else:
            def fget(self):
                return self._single(suffix, what)

            def fset(self, v):
                self._set_single(suffix, what, v)
        fget.__doc__ = doc
        return property(fget, fset, doc=doc)

    _COPY = (" A copy: writing into it changes nothing; assign the property (the whole "
             "array, same shape) to change the model.")
    W_E = _prop("embed.W_E", "W_E", "Token embedding [d_vocab, d_model]." + _COPY, False)
    W_pos = _prop("pos_embed.W_pos", "W_pos", "Positional embedding [n_ctx, d_model] "
                  "(standard and shortformer positions; AttributeError with none)." + _COPY,
                  False)
    W_U = _prop("unembed.W_U", "W_U", "Unembedding [d_model, d_vocab] (the LayerNorm gain "
                "is not folded in; see tokens_to_residual_directions)." + _COPY, False)
    b_U = _prop("unembed.b_U", "b_U", "Unembedding bias [d_vocab]." + _COPY, False)
    W_Q = _prop("attn.W_Q", "W_Q", "Query weights of every layer [n_layers, n_heads, "
                "d_model, d_head] (blocks.{l}.attn.W_Q stacked)." + _COPY)
    W_K = _prop("attn.W_K", "W_K", "Key weights [n_layers, n_heads, d_model, d_head]." + _COPY)
    W_V = _prop("attn.W_V", "W_V", "Value weights [n_layers, n_heads, d_model, d_head]."
                + _COPY)
    W_O = _prop("attn.W_O", "W_O", "Output weights [n_layers, n_heads, d_head, d_model]."
                + _COPY)
    b_Q = _prop("attn.b_Q", "b_Q", "Query biases [n_layers, n_heads, d_head]." + _COPY)
    b_K = _prop("attn.b_K", "b_K", "Key biases [n_layers, n_heads, d_head]." + _COPY)
    b_V = _prop("attn.b_V", "b_V", "Value biases [n_layers, n_heads, d_head]." + _COPY)
    b_O = _prop("attn.b_O", "b_O", "Attention output biases [n_layers, d_model]." + _COPY)
    W_in = _prop("mlp.W_in", "W_in", "MLP input weights [n_layers, d_model, d_mlp] "
                 "(AttributeError for an attention-only model)." + _COPY)
    W_out = _prop("mlp.W_out", "W_out", "MLP output weights [n_layers, d_mlp, d_model]."
                  + _COPY)
    b_in = _prop("mlp.b_in", "b_in", "MLP input biases [n_layers, d_mlp]." + _COPY)
    b_out = _prop("mlp.b_out", "b_out", "MLP output biases [n_layers, d_model]." + _COPY)
    del _prop

    @property
    def W_E_pos(self):
        """W_E and W_pos concatenated [d_vocab + n_ctx, d_model] (a basis of the input
        space for full QK and OV circuits). A copy."""
        np = _arrays.np
        return self._out(np.concatenate([self.get("embed.W_E"),
                                         _np_of(self._single("pos_embed.W_pos", "W_E_pos"))]))

    def _factored(self, a_suffix, b_suffix, transpose_b):
        np = _arrays.np
        L = self.config["n_layers"]
        a = np.stack([self.get(f"blocks.{l}.{a_suffix}") for l in range(L)])
        b = np.stack([self.get(f"blocks.{l}.{b_suffix}") for l in range(L)])
        if transpose_b:
            b = np.swapaxes(b, -1, -2)
        fm = FactoredMatrix(a, b)
        fm._torch = self._torch_mode
        return fm

    @property
    def QK(self):
        """The QK circuits W_Q[l, h] W_K[l, h]ᵀ as a FactoredMatrix [n_layers, n_heads,
        d_model, d_model] (Framework paper: the bilinear form of the attention scores,
        before 1/sqrt(d_head); biases and LayerNorm not included)."""
        return self._factored("attn.W_Q", "attn.W_K", True)

    @property
    def OV(self):
        """The OV circuits W_V[l, h] W_O[l, h] as a FactoredMatrix [n_layers, n_heads,
        d_model, d_model] (Framework paper: what a head writes for what it attends to)."""
        return self._factored("attn.W_V", "attn.W_O", False)

    def state_dict(self):
        """Every parameter by its TransformerLens name, in storage order (an OrderedDict
        of copies: float32 NumPy arrays, or tensors for a HookedTransformer)."""
        return collections.OrderedDict((n, self._out(self.get(n)))
                                       for n in self.tensor_names())

    #: Buffers a TransformerLens state dict holds that are constants here (the causal
    #: mask and its fill value): accepted and ignored by load_state_dict().
    _TL_BUFFERS = ("attn.IGNORE", "attn.mask")

    def load_state_dict(self, state_dict, strict=True):
        """Set the weights from a dict of TransformerLens-named arrays or tensors (each of
        exactly its shape). strict: every parameter present and no unknown name, else
        ValueError listing them (TransformerLens's buffers blocks.{l}.attn.IGNORE and
        .mask are ignored). Nothing is written unless every check passes. Returns
        (missing_keys, unexpected_keys), as PyTorch's."""
        names = self.tensor_names()
        known = set(names)
        unexpected = [k for k in state_dict if k not in known
                      and not k.endswith(self._TL_BUFFERS)]
        missing = [n for n in names if n not in state_dict]
        if strict and (missing or unexpected):
            raise ValueError(f"load_state_dict: missing keys {missing}, unexpected keys "
                             f"{unexpected}")
        arrays = {}
        for n in names:
            if n in state_dict:
                a = _float_array(state_dict[n], n)
                if a.shape != self._shape_of(n):
                    raise ValueError(f"{n} has shape {self._shape_of(n)}, got values of "
                                     f"shape {a.shape}")
                arrays[n] = a
        for n, a in arrays.items():
            self.set(n, a)
        return missing, unexpected

    def accumulated_bias(self, layer, mlp_input=False, include_mlp_biases=True):
        """Σ of b_O (and b_out with include_mlp_biases) of the layers before `layer`, plus
        b_O of `layer` with mlp_input: [d_model] (TransformerLens's accumulated_bias)."""
        np = _arrays.np
        c = self.config
        L = c["n_layers"]
        if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or \
                not 0 <= layer <= L:
            raise ValueError(f"layer must be in [0, {L}], got {layer!r}")
        if mlp_input and layer == L:
            raise ValueError("mlp_input needs a layer below n_layers")
        out = np.zeros(c["d_model"], dtype=np.float64)
        for l in range(layer):
            out += self.get(f"blocks.{l}.attn.b_O")
            if include_mlp_biases and c["d_mlp"]:
                out += self.get(f"blocks.{l}.mlp.b_out")
        if mlp_input:
            out += self.get(f"blocks.{layer}.attn.b_O")
        return self._out(out.astype(np.float32))

    def all_composition_scores(self, mode):
        """Composition scores of every pair of heads [n_layers, n_heads, n_layers,
        n_heads] ([l1, h1, l2, h2], 0 unless l1 < l2): ‖OV_1 R_2‖_F / (‖OV_1‖_F ‖R_2‖_F)
        with R = QK (mode "Q"), QKᵀ ("K") or OV ("V") (Framework paper, "Q-, K- and
        V-Composition"; TransformerLens's all_composition_scores). The same scores as
        Model.composition(mode.lower()), computed here in NumPy (float64 when the weights
        are, float32 from the model)."""
        np = _arrays.np
        if mode not in ("Q", "K", "V"):
            raise ValueError(f"mode must be one of ['Q', 'K', 'V'], got {mode!r}")
        left = self.OV
        left._torch = False
        right = {"Q": self.QK, "K": self.QK.T, "V": self.OV}[mode]
        right._torch = False
        with np.errstate(divide="ignore", invalid="ignore"):
            s = composition_scores(left, right, broadcast_dims=True)
        L = self.config["n_layers"]
        mask = np.arange(L)[:, None, None, None] < np.arange(L)[None, None, :, None]
        return self._out(np.where(mask, s, 0).astype(s.dtype))

    def all_head_labels(self):
        """["L0H0", "L0H1", …]: one label per head, layer-major."""
        c = self.config
        return [f"L{l}H{h}" for l in range(c["n_layers"]) for h in range(c["n_heads"])]

    def _residual_directions(self, tokens):
        """NumPy float32 version of tokens_to_residual_directions()."""
        np = _arrays.np
        w_u = self.get("unembed.W_U")
        if self.config["layer_norm"]:
            w_u = w_u * self.get("ln_final.w")[:, None]
        if isinstance(tokens, str):
            tokens = self.to_single_token(tokens)
        if isinstance(tokens, numbers.Integral) and not isinstance(tokens, bool):
            ids = np.asarray(int(tokens))
        else:
            ids = np.asarray(tokens.detach().cpu().numpy() if _is_torch(tokens) else tokens)
            if ids.dtype.kind not in "iu":
                raise TypeError(f"token ids must be integers, got {ids.dtype}")
        V = w_u.shape[1]
        if ids.size and (ids.min() < 0 or ids.max() >= V):
            raise IndexError(f"token ids must be in [0, {V})")
        return np.moveaxis(w_u[:, ids], 0, -1)

    def tokens_to_residual_directions(self, tokens):
        """The residual-stream direction whose dot product with the final stream, after
        the final LayerNorm's centring and scaling, is the logit of each token (minus the
        biases): W_U[:, t], times the LayerNorm gain ln_final.w in LayerNorm models (the
        W_U of TransformerLens's fold_ln=True). tokens: an id, a str of one token, or an
        array of ids -> [d_model] or [*tokens.shape, d_model]."""
        return self._out(self._residual_directions(tokens))

    # ---- tokenizer ----------------------------------------------------------------
    def set_tokenizer(self, tokenizer, default_padding_side=None):
        """Attach a tokenizer (induct.ByteTokenizer or induct.SentencePieceTokenizer; None
        removes it). Its vocabulary must fit the model's (tokenizer.d_vocab <= d_vocab).
        Model.save() stores it in the checkpoint and Model.load() restores it.
        default_padding_side is accepted for TransformerLens's signature ("right" or
        None): batches of different lengths are not padded (to_tokens refuses them)."""
        from .tokenizer import ByteTokenizer, SentencePieceTokenizer
        if default_padding_side not in (None, "right"):
            raise NotImplementedError("padding_side: libinduct does not pad (no attention "
                                      "mask)")
        if tokenizer is not None:
            if not isinstance(tokenizer, (ByteTokenizer, SentencePieceTokenizer)):
                raise TypeError(f"tokenizer must be an induct.ByteTokenizer or "
                                f"induct.SentencePieceTokenizer, got "
                                f"{type(tokenizer).__name__}")
            V = self.config["d_vocab"]
            if tokenizer.d_vocab > V:
                raise ValueError(f"the tokenizer's {tokenizer.d_vocab} ids do not fit this "
                                 f"model's d_vocab {V}")
        self.tokenizer = tokenizer
        cfg = self.__dict__.get("_cfg_obj")
        if cfg is not None:
            object.__setattr__(cfg, "tokenizer_name",
                               None if tokenizer is None else type(tokenizer).__name__)

    def _need_tokenizer(self):
        if self.tokenizer is None:
            raise ValueError("this model has no tokenizer: attach one with "
                             "model.set_tokenizer(induct.ByteTokenizer(...)) or "
                             "induct.SentencePieceTokenizer(...)")
        return self.tokenizer

    def _prepend(self, prepend_bos):
        tok = self._need_tokenizer()
        if prepend_bos is None:
            return bool(self.cfg.default_prepend_bos) and tok.bos_id is not None
        return bool(prepend_bos)

    def _tokens_np(self, input, prepend_bos=None, padding_side=None, truncate=True):
        """int32 NumPy ids [B, T] of a str or a list of str."""
        np = _arrays.np
        if padding_side not in (None, "right"):
            raise NotImplementedError("padding_side: libinduct does not pad")
        tok = self._need_tokenizer()
        pre = self._prepend(prepend_bos)
        texts = [input] if isinstance(input, (str, bytes)) else list(input)
        if not texts or not all(isinstance(t, (str, bytes)) for t in texts):
            raise TypeError("to_tokens takes a str or a non-empty list of str")
        rows = [np.asarray(tok.to_tokens(t, prepend_bos=pre))[0] for t in texts]
        if truncate:
            rows = [r[:self.config["n_ctx"]] for r in rows]
        if len({len(r) for r in rows}) != 1:
            raise ValueError(f"the texts have {sorted({len(r) for r in rows})} tokens: "
                             f"libinduct does not pad a batch (no attention mask); "
                             f"tokenize them one at a time")
        return np.stack(rows).astype(np.int32)

    def to_tokens(self, input, prepend_bos=None, padding_side=None, move_to_device=True,
                  truncate=True):
        """Token ids [batch, pos] of a str (batch 1) or a list of str (of equal token
        counts: there is no padding), with the tokenizer's BOS first if prepend_bos
        (None: cfg.default_prepend_bos when the tokenizer has a BOS). truncate: cut to
        n_ctx. int32 NumPy ids (int64 tensors for a HookedTransformer)."""
        ids = self._tokens_np(input, prepend_bos, padding_side, truncate)
        if self._torch_mode:
            return _torch().from_numpy(ids.astype(_arrays.np.int64))
        return ids

    def _ids_1d(self, tokens, what):
        np = _arrays.np
        a = np.asarray(tokens.detach().cpu().numpy() if _is_torch(tokens) else tokens)
        a = a.squeeze()
        if a.ndim == 0:
            a = a[None]
        if a.ndim != 1:
            raise ValueError(f"{what} takes one sequence ([pos] or [1, pos]), got shape "
                             f"{np.shape(tokens)}")
        return a

    def to_str_tokens(self, input, prepend_bos=None, padding_side=None):
        """One str per token: of a str (tokenized as to_tokens), of ids [pos] or [1, pos],
        or, for a list of str, a list of such lists."""
        tok = self._need_tokenizer()
        if isinstance(input, list) and input and all(isinstance(t, str) for t in input):
            return [self.to_str_tokens(t, prepend_bos, padding_side) for t in input]
        if isinstance(input, (str, bytes)):
            ids = self._tokens_np(input, prepend_bos, padding_side)[0]
        else:
            ids = self._ids_1d(input, "to_str_tokens")
        return tok.to_str_tokens(ids)

    def to_string(self, tokens):
        """Text of ids: a str for [pos] (or a single id), a list of str for [batch, pos].
        BOS ids give no text."""
        np = _arrays.np
        tok = self._need_tokenizer()
        a = np.asarray(tokens.detach().cpu().numpy() if _is_torch(tokens) else tokens)
        if a.ndim == 0:
            a = a[None]
        if a.ndim > 2:
            raise ValueError(f"invalid shape {a.shape}: [pos] or [batch, pos]")
        return tok.to_string(a)

    def to_single_token(self, string):
        """The id of a str that is exactly one token (no BOS); ValueError otherwise."""
        ids = self._tokens_np(string, prepend_bos=False)[0]
        if len(ids) != 1:
            raise ValueError(f"{string!r} is {len(ids)} tokens, not a single token")
        return int(ids[0])

    def to_single_str_token(self, int_token):
        """The str of one token id."""
        if isinstance(int_token, bool) or not isinstance(int_token, numbers.Integral):
            raise TypeError(f"a token id (int) expected, got {int_token!r}")
        return self._need_tokenizer().to_str_tokens([int(int_token)])[0]

    # ---- running ----------------------------------------------------------------
    def _input_tokens(self, input, prepend_bos=None, padding_side=None):
        """int32 ids [B, T] of a forward input: text (tokenized) or ids."""
        if isinstance(input, (str, bytes)) or \
                (isinstance(input, list) and input and all(isinstance(t, str) for t in input)):
            return self._tokens_np(input, prepend_bos, padding_side)
        if _is_torch(input):
            input = input.detach().cpu().numpy()
        return input

    def _tl_forward(self, input, return_type="logits", loss_per_token=False,
                    prepend_bos=None, padding_side=None):
        """forward() with TransformerLens's return_type and loss_per_token."""
        if return_type not in ("logits", "loss", "both", None):
            raise ValueError(f"return_type must be 'logits', 'loss', 'both' or None, got "
                             f"{return_type!r}")
        toks = self._input_tokens(input, prepend_bos, padding_side)
        want_logits = return_type in ("logits", "both")
        logits, losses, mean = self._forward_tokens(toks, logits=want_logits)
        if return_type is None:
            return None
        logits = self._out(logits) if want_logits else None
        if loss_per_token:
            loss = self._out(losses)
        elif self._torch_mode:
            loss = _torch().tensor(mean, dtype=_torch().float64)
        else:
            loss = _arrays.np.float64(mean)
        if self._torch_mode and getattr(self, "_bwd_hooks", None):
            # backward hooks in force: .backward() runs libinduct's backward pass with them
            loss, logits = _differentiable(self, toks, loss, logits, loss_per_token)
        if return_type == "logits":
            return logits
        return loss if return_type == "loss" else Output(logits, loss)

    def __call__(self, input, return_type="logits", loss_per_token=False, prepend_bos=None,
                 padding_side=None):
        """TransformerLens's model(input): a forward pass of ids [batch, pos] (or [pos]),
        a str or a list of str (tokenized with the model's tokenizer). return_type:
        "logits" [B, T, d_vocab] (float32), "loss" (the mean next-token loss in nats; with
        loss_per_token, [B, T-1]), "both" (Output(logits, loss)), or None (nothing; the
        hooks still run). Hooks in force (hooks(), run_with_hooks(), add_hook()) run."""
        return self._tl_forward(input, return_type, loss_per_token, prepend_bos,
                                padding_side)

    def loss_fn(self, logits, tokens, attention_mask=None, per_token=False):
        """Next-token cross-entropy of logits for tokens (lm_cross_entropy_loss)."""
        if attention_mask is not None:
            raise NotImplementedError("attention_mask: libinduct has no padding")
        return lm_cross_entropy_loss(logits, tokens, per_token)

    def run_with_hooks(self, *model_args, fwd_hooks=(), bwd_hooks=(), reset_hooks_end=True,
                       clear_contexts=False, **model_kwargs):
        """model(*model_args, **model_kwargs) with the forward hooks `fwd_hooks`, a list of
        (name or filter function on names, fn); fn(activation, hook) may change the
        activation in place or return a replacement of the same shape (None: keep).
        Returns what model() returns (logits by default). reset_hooks_end=False leaves
        the hooks installed (until reset_hooks()). bwd_hooks: the same pairs, called with
        the gradient of the mean loss at their point during a backward pass: for an
        induct.lens.HookedTransformer the one `.backward()` on the returned loss runs
        (return_type="loss"; the backward hooks in force when the loss was computed are
        the ones it calls, as with PyTorch module hooks); for an induct.Model the one
        model.backward(tokens) runs while they are installed (reset_hooks_end=False, or
        `with model.hooks(bwd_hooks=...)`)."""
        if bwd_hooks and reset_hooks_end and not self._torch_mode:
            import warnings
            warnings.warn("run_with_hooks: the backward hooks are removed at the end of the "
                          "call, before model.backward() could call them (use "
                          "reset_hooks_end=False, or model.backward() inside `with "
                          "model.hooks(bwd_hooks=...)`)", stacklevel=2)
        with self.hooks(fwd_hooks, bwd_hooks, reset_hooks_end, clear_contexts):
            return self(*model_args, **model_kwargs)

    def run_with_cache(self, tokens, names=None, *, names_filter=None, remove_batch_dim=False,
                       return_type="logits", loss_per_token=False, prepend_bos=None,
                       padding_side=None, incl_bwd=False, return_cache_object=True,
                       device=None, **kwargs):
        """One forward pass; returns (output, cache). `output` is what model() returns for
        return_type ("logits" by default: [B, T, d_vocab]; a loss is computed from the
        logits, as TransformerLens does). `names_filter` (TransformerLens) or `names`:
        None (every point but attn.hook_result, unless cfg.use_attn_result), a name, a
        list of names (or (name, layer) tuples), or a function on full names.
        remove_batch_dim: entries without their batch dimension (one sequence only).
        tokens: ids [batch, pos] or text. device: None or "cpu". incl_bwd=True (with
        return_type="loss", the one scalar TransformerLens can call backward() on): a
        forward and a backward pass of the mean loss, the cache also holding
        d(loss)/d(activation) under name + "_grad" (the model's parameter gradients are
        set as by model.backward()); with d_logits= (a function of the logits giving
        d(metric)/d(logits), or that array) the gradients are a metric's instead (the
        loss is still returned). The cache has the ActivationCache tools
        (accumulated_resid, ...)."""
        if incl_bwd and (return_type != "loss" or loss_per_token):
            raise ValueError("run_with_cache(incl_bwd=True) differentiates the mean loss: "
                             "it needs return_type='loss' without loss_per_token (" +
                             LOSS_ONLY + ")")
        if device not in (None, "cpu"):
            raise NotImplementedError(f"device={device!r}: libinduct runs on the CPU")
        if return_type not in ("logits", "loss", "both", None):
            raise ValueError(f"return_type must be 'logits', 'loss', 'both' or None, got "
                             f"{return_type!r}")
        if names is not None and names_filter is not None:
            raise TypeError("give names or names_filter, not both")
        if names is None:
            names = names_filter
        if isinstance(names, str):
            names = [names]
        if names is None and self.cfg.use_attn_result:
            names = list(self.hook_points())
        toks = self._input_tokens(tokens, prepend_bos, padding_side)
        if remove_batch_dim:
            np = _arrays.np
            if np.asarray(toks).ndim == 2 and np.asarray(toks).shape[0] != 1:
                raise ValueError("remove_batch_dim needs a batch of one sequence")
        if incl_bwd:
            kwargs["incl_bwd"] = True
        logits, cache = super().run_with_cache(toks, names=names, **kwargs)
        cache.model = self
        if self._torch_mode:
            t = _torch()
            for k in list(dict.keys(cache)):
                dict.__setitem__(cache, k, t.from_numpy(dict.__getitem__(cache, k)))
            cache._torch = True
        if remove_batch_dim:
            cache.remove_batch_dim()
        if return_type is None:
            out = None
        elif incl_bwd:  # `logits` is the mean loss of the forward and backward pass
            out = _torch().tensor(logits, dtype=_torch().float64) if self._torch_mode else \
                _arrays.np.float64(logits)
        elif return_type == "logits":
            out = self._out(logits)
        else:
            loss = lm_cross_entropy_loss(logits, _arrays.np.asarray(toks).reshape(
                logits.shape[:2]), loss_per_token)
            loss = self._out(loss) if loss_per_token else (
                _torch().tensor(loss, dtype=_torch().float64) if self._torch_mode else loss)
            out = loss if return_type == "loss" else Output(self._out(logits), loss)
        if not return_cache_object:
            return out, dict(cache)
        return out, cache

    # ---- hook management (TransformerLens's HookedRootModule) ----------------------
    @property
    def hook_dict(self):
        """{full name: HookPoint} of every hook point of this model, in pass order."""
        return {n: self._hook_point(n) for n in self.hook_points()}

    def _hook_point(self, name):
        objs = self.__dict__.setdefault("_hook_objs", {})
        hp = objs.get(name)
        if hp is None:
            hp = objs[name] = HookPoint(name)
        return hp

    def add_hook(self, name, hook, dir="fwd", is_permanent=False, level=None, prepend=False):
        """Install a hook until reset_hooks() (is_permanent: until
        reset_hooks(including_permanent=True)): name is a hook point name or a filter
        function on names; hook(activation, hook_point). prepend: run it before the
        hooks already installed at that point. dir="bwd": a backward hook, called with
        the gradient of the mean loss at the point (see run_with_hooks)."""
        if dir not in ("fwd", "bwd"):
            raise ValueError(f"dir must be 'fwd' or 'bwd', got {dir!r}")
        attr = "_fwd_hooks" if dir == "fwd" else "_bwd_hooks"
        tag = "permanent" if is_permanent else "added"
        new = [(n, f, tag) for n, f in self._resolve_hooks([(name, hook)])]
        cur = list(getattr(self, attr, []))
        setattr(self, attr, new + cur if prepend else cur + new)

    def add_perma_hook(self, name, hook, dir="fwd"):
        """add_hook(..., is_permanent=True)."""
        self.add_hook(name, hook, dir=dir, is_permanent=True)

    def reset_hooks(self, clear_contexts=True, direction="both", including_permanent=False,
                    level=None):
        """Remove the installed hooks of `direction` ("fwd", "bwd" or "both"; add_hook(),
        hooks left by reset_hooks_end=False, those of enclosing hooks() blocks), except
        permanent ones unless including_permanent; clear_contexts empties every
        HookPoint.ctx."""
        if direction not in ("fwd", "bwd", "both"):
            raise ValueError(f"direction must be 'fwd', 'bwd' or 'both', got {direction!r}")
        if clear_contexts:
            self.clear_contexts()
        for d, attr in (("fwd", "_fwd_hooks"), ("bwd", "_bwd_hooks")):
            if direction in (d, "both"):
                setattr(self, attr, [h for h in getattr(self, attr, [])
                                     if not including_permanent and len(h) > 2 and
                                     h[2] == "permanent"])

    def clear_contexts(self):
        """Empty the ctx dict of every HookPoint of this model."""
        for hp in self.__dict__.get("_hook_objs", {}).values():
            hp.clear_context()


def _differentiable(model, toks, loss, logits, per_token):
    """For a HookedTransformer with backward hooks in force: the loss and the logits as
    tensors of one autograd node whose backward runs libinduct's forward and backward pass
    on `toks` with the hooks in force now (forward hooks again, then the backward hooks
    with the gradients). The gradient that reaches them is combined into one d(logits):
    the logits' own plus the loss's (softmax − one-hot over the scored positions, times
    the loss's incoming gradient), and the pass runs from there
    (induct_model_backward_from_logits); a gradient of exactly 1 on the mean loss alone
    runs the loss's own backward pass (Model.backward, bit for bit)."""
    t = _torch()
    np = _arrays.np
    fwd = list(getattr(model, "_fwd_hooks", []))
    bwd = list(getattr(model, "_bwd_hooks", []))
    tk = np.asarray(toks)

    def loss_d_logits(lg, g_loss):
        """d(loss)/d(logits) weighted by the loss's incoming gradient (a scalar for the
        mean loss, [B, T-1] per token)."""
        lg = lg.astype(np.float64)
        p = np.exp(lg - lg.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        B, T, _ = lg.shape
        p[np.arange(B)[:, None], np.arange(T - 1)[None], tk[:, 1:]] -= 1.0
        p[:, -1] = 0.0
        w = g_loss if per_token else np.full((B, T - 1), float(g_loss) / (B * (T - 1)))
        p[:, :-1] *= w[..., None]
        return p

    class LibinductPass(t.autograd.Function):
        @staticmethod
        def forward(ctx, anchor):
            ctx.set_materialize_grads(False)
            outs = [loss.clone()]
            if logits is not None:
                outs.append(logits.clone())
            return tuple(outs)

        @staticmethod
        def backward(ctx, g_loss, g_logits=None):
            outer = model._fwd_hooks, model._bwd_hooks
            model._fwd_hooks, model._bwd_hooks = fwd, bwd
            try:
                if g_logits is None and g_loss is not None and not per_token and \
                        float(g_loss) == 1.0:
                    model.backward(toks)  # the loss's own backward pass
                else:
                    gl = None if g_loss is None else g_loss.detach().double().numpy()
                    gg = None if g_logits is None else g_logits.detach().double().numpy()

                    def d_logits(lg):
                        d = np.zeros(lg.shape) if gg is None else gg.copy()
                        if gl is not None:
                            d += loss_d_logits(lg, gl)
                        return d
                    model.backward(toks, d_logits=d_logits)
            finally:
                model._fwd_hooks, model._bwd_hooks = outer
            return None

    anchor = t.zeros((), requires_grad=True)
    outs = LibinductPass.apply(anchor)
    return outs[0], (outs[1] if logits is not None else None)


def _np_of(x):
    if _is_torch(x):
        return x.detach().cpu().numpy()
    return x
