"""TransformerLens's names for porting TransformerLens code to libinduct.

    from induct.lens import HookedTransformer, HookedTransformerConfig, ActivationCache, \\
        FactoredMatrix, HookPoint, utils, patching

HookedTransformer is an induct.Model whose arrays are PyTorch tensors (Debian's
python3-torch; CPU, float32 activations, int64 token ids), as TransformerLens's are, and
whose forward() is TransformerLens's (returns the logits by default). Everything else
is induct.Model's: the TransformerLens surface (cfg, W_Q, ..., run_with_hooks,
run_with_cache, to_tokens, ...) and libinduct's own (training, analyses, ablations). Hook
functions get a tensor of their own (a copy they may keep, as TransformerLens code keeps
act.detach()); in-place writes are written back and change the pass. The library computes
gradients itself (Model.backward, Optimizer.train_step); with backward hooks in force,
.backward() on the returned loss or on a metric of the logits runs its backward pass. docs/python.md, "TransformerLens → libinduct", lists every name and
what differs."""
from . import _arrays, patching
from .cache_tools import Slice
from .core import Model
from .factored import FactoredMatrix, composition_scores
from .hook_point import HookPoint
from .hooks import ActivationCache, act_name
from .model_lens import HookedTransformerConfig, Output, lm_cross_entropy_loss

__all__ = ["HookedTransformer", "HookedTransformerConfig", "ActivationCache",
           "FactoredMatrix", "HookPoint", "Output", "Slice", "utils", "patching"]


class HookedTransformer(Model):
    """An induct.Model with TransformerLens's conventions: PyTorch tensors in and out,
    forward() = model() (return_type "logits" by default).

    HookedTransformer(cfg, tokenizer=None, move_to_device=True,
    default_padding_side="right"): cfg a HookedTransformerConfig (or a dict of its
    fields); d_vocab=-1 takes the tokenizer's d_vocab. The weights are initialised by the
    library from cfg.seed (cfg.init_mode "gpt2": normal with std initializer_range, W_O
    and W_out divided by sqrt(2·n_layers), embeddings std 1; not TransformerLens's draws).
    HookedTransformer.load(path) and HookedTransformer.from_model(model) give one from a
    checkpoint or an existing model."""

    _tensor_type = "torch"

    def __init__(self, cfg, tokenizer=None, move_to_device=True,
                 default_padding_side="right"):
        import torch  # noqa: F401 - fail here, clearly, without python3-torch
        if isinstance(cfg, dict):
            cfg = HookedTransformerConfig(**cfg)
        if not isinstance(cfg, HookedTransformerConfig):
            raise TypeError(f"cfg must be a HookedTransformerConfig or a dict, got "
                            f"{type(cfg).__name__}")
        if cfg.d_vocab in (None, -1):
            if tokenizer is None:
                raise ValueError("cfg.d_vocab is -1 and there is no tokenizer to take it "
                                 "from")
            object.__setattr__(cfg, "d_vocab", tokenizer.d_vocab)
            object.__setattr__(cfg, "d_vocab_out", tokenizer.d_vocab)
        super().__init__(**cfg.model_kwargs())
        own = self.cfg  # the model's own config, with the caller's runtime settings
        own.use_attn_result = cfg.use_attn_result
        own.default_prepend_bos = cfg.default_prepend_bos
        object.__setattr__(own, "model_name", cfg.model_name)
        if tokenizer is not None:
            self.set_tokenizer(tokenizer, default_padding_side)

    @classmethod
    def from_model(cls, model):
        """A HookedTransformer with a copy of `model` (config, weights, tokenizer)."""
        twin = model.clone()
        out = cls._wrap(twin._ptr)
        twin._ptr = None  # the handle now belongs to `out`
        out.tokenizer = model.tokenizer
        return out

    def forward(self, input, return_type="logits", loss_per_token=False, prepend_bos=None,
                padding_side=None):
        """TransformerLens's forward: the same as model(input, ...) (Model.__call__)."""
        return self._tl_forward(input, return_type, loss_per_token, prepend_bos,
                                padding_side)

    def to_numpy(self, tensor):
        """A NumPy array of a tensor (utils.to_numpy)."""
        return utils.to_numpy(tensor)


class _Utils:
    """TransformerLens's `utils` functions that have a meaning here."""

    @staticmethod
    def get_act_name(name, layer=None, layer_type=None):
        """The full hook point name (induct.act_name; TransformerLens's get_act_name)."""
        return act_name(name, layer, layer_type)

    @staticmethod
    def lm_cross_entropy_loss(logits, tokens, attention_mask=None, per_token=False):
        """Next-token cross-entropy in nats (mean, or [B, T-1] with per_token)."""
        if attention_mask is not None:
            raise NotImplementedError("attention_mask: libinduct has no padding")
        return lm_cross_entropy_loss(logits, tokens, per_token)

    @staticmethod
    def composition_scores(left, right, broadcast_dims=True):
        """‖L R‖_F / (‖L‖_F ‖R‖_F) of two FactoredMatrix (induct.factored)."""
        return composition_scores(left, right, broadcast_dims)

    @staticmethod
    def to_numpy(tensor):
        """A NumPy array of a tensor, array or nested list."""
        if hasattr(tensor, "detach"):
            return tensor.detach().cpu().numpy()
        return _arrays.np.asarray(tensor)

    Slice = Slice

    def __repr__(self):
        return "<induct.lens.utils>"


#: TransformerLens's `utils` names: get_act_name, lm_cross_entropy_loss,
#: composition_scores, to_numpy, Slice.
utils = _Utils()
