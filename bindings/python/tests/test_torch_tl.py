"""Model.weights(torch=True) loads into a TransformerLens-style PyTorch model.

The reference below is written from the TransformerLens conventions (module names,
parameter shapes, row-vector `x @ W`, einsum per head, gelu_new) and the definitions of
docs/definitions.md (shortformer positions, smeared keys), independently of the
C code. load_state_dict(strict=True) checks that every name and shape matches; the
logits of the two implementations must then agree.

The reference also passes TransformerLens's hook points: forward(tokens, hooks) calls
hooks[name](x) -> x at each point (test_hooks.py compares every activation and patches)."""
import math

import numpy as np
import pytest
import torch  # Debian python3-torch, a test dependency (no skip: a missing torch fails)

import induct

nn = torch.nn


class LayerNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d, dtype=torch.float64))
        self.b = nn.Parameter(torch.zeros(d, dtype=torch.float64))

    def forward(self, x, hp=None, name=""):
        x = x - x.mean(-1, keepdim=True)
        x = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5)
        if hp:
            x = hp(name + "hook_normalized", x)
        return x * self.w + self.b


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, D, dh = c["n_heads"], c["d_model"], c["d_head"]
        p = lambda *s: nn.Parameter(torch.zeros(*s, dtype=torch.float64))  # noqa: E731
        self.W_Q, self.W_K, self.W_V = p(H, D, dh), p(H, D, dh), p(H, D, dh)
        self.W_O = p(H, dh, D)
        self.b_Q, self.b_K, self.b_V = p(H, dh), p(H, dh), p(H, dh)
        self.b_O = p(D)
        self.smeared = bool(c["smeared_keys"])
        if self.smeared:
            self.smear_alpha = p(H)

    def forward(self, x, qk_in, hp=lambda name, t: t, pre=""):
        q = hp(pre + "hook_q", torch.einsum("bpd,hde->bphe", qk_in, self.W_Q) + self.b_Q)
        k = hp(pre + "hook_k", torch.einsum("bpd,hde->bphe", qk_in, self.W_K) + self.b_K)
        v = hp(pre + "hook_v", torch.einsum("bpd,hde->bphe", x, self.W_V) + self.b_V)
        if self.smeared:  # k'_j = s k_j + (1 - s) k_{j-1} with the raw previous key, k'_0 = k_0
            s = torch.sigmoid(self.smear_alpha)[None, None, :, None]
            k = torch.cat([k[:, :1], s * k[:, 1:] + (1 - s) * k[:, :-1]], dim=1)
            k = hp(pre + "hook_k_smeared", k)
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(q.shape[-1])
        T = x.shape[1]
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        scores = hp(pre + "hook_attn_scores", scores.masked_fill(mask, float("-inf")))
        pattern = hp(pre + "hook_pattern", torch.softmax(scores, dim=-1))
        z = hp(pre + "hook_z", torch.einsum("bhqk,bkhe->bqhe", pattern, v))
        result = hp(pre + "hook_result", torch.einsum("bqhe,hed->bqhd", z, self.W_O))
        return result.sum(2) + self.b_O


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        D, M = c["d_model"], c["d_mlp"]
        self.W_in = nn.Parameter(torch.zeros(D, M, dtype=torch.float64))
        self.b_in = nn.Parameter(torch.zeros(M, dtype=torch.float64))
        self.W_out = nn.Parameter(torch.zeros(M, D, dtype=torch.float64))
        self.b_out = nn.Parameter(torch.zeros(D, dtype=torch.float64))

    def forward(self, x, hp=lambda name, t: t, pre=""):
        h = hp(pre + "hook_pre", x @ self.W_in + self.b_in)
        h = 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
        return hp(pre + "hook_post", h) @ self.W_out + self.b_out


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        if c["layer_norm"]:
            self.ln1 = LayerNorm(c["d_model"])
        self.attn = Attention(c)
        if c["d_mlp"]:
            if c["layer_norm"]:
                self.ln2 = LayerNorm(c["d_model"])
            self.mlp = MLP(c)


class Embed(nn.Module):
    def __init__(self, V, D):
        super().__init__()
        self.W_E = nn.Parameter(torch.zeros(V, D, dtype=torch.float64))


class PosEmbed(nn.Module):
    def __init__(self, n_ctx, D):
        super().__init__()
        self.W_pos = nn.Parameter(torch.zeros(n_ctx, D, dtype=torch.float64))


class Unembed(nn.Module):
    def __init__(self, D, V):
        super().__init__()
        self.W_U = nn.Parameter(torch.zeros(D, V, dtype=torch.float64))
        self.b_U = nn.Parameter(torch.zeros(V, dtype=torch.float64))


class TinyHookedTransformer(nn.Module):
    """TransformerLens module layout: embed, pos_embed, blocks.{l}.{ln1,attn,ln2,mlp},
    ln_final, unembed."""

    POS = ("standard", "shortformer", "none")

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.pos = self.POS[c["positional"]]
        self.embed = Embed(c["d_vocab"], c["d_model"])
        if self.pos != "none":
            self.pos_embed = PosEmbed(c["n_ctx"], c["d_model"])
        self.blocks = nn.ModuleList([Block(c) for _ in range(c["n_layers"])])
        if c["layer_norm"]:
            self.ln_final = LayerNorm(c["d_model"])
        self.unembed = Unembed(c["d_model"], c["d_vocab"])

    def forward(self, tokens, hooks=None):
        """Logits; hooks (may be None): {hook point name: fn(tensor) -> tensor}."""
        hooks = hooks or {}

        def hp(name, t):
            return hooks[name](t) if name in hooks else t
        B, T = tokens.shape
        x = hp("hook_embed", self.embed.W_E[tokens])
        if self.pos == "standard":
            x = x + hp("hook_pos_embed", self.pos_embed.W_pos[:T].expand(B, T, -1))
        for i, blk in enumerate(self.blocks):
            pre = f"blocks.{i}."
            x = hp(pre + "hook_resid_pre", x)
            h = blk.ln1(x, hp, pre + "ln1.") if hasattr(blk, "ln1") else x
            qk_in = h + self.pos_embed.W_pos[:T] if self.pos == "shortformer" else h
            x = x + hp(pre + "hook_attn_out", blk.attn(h, qk_in, hp, pre + "attn."))
            if hasattr(blk, "mlp"):
                x = hp(pre + "hook_resid_mid", x)
                h2 = blk.ln2(x, hp, pre + "ln2.") if hasattr(blk, "ln2") else x
                x = x + hp(pre + "hook_mlp_out", blk.mlp(h2, hp, pre + "mlp."))
            x = hp(pre + "hook_resid_post", x)
        if hasattr(self, "ln_final"):
            x = self.ln_final(x, hp, "ln_final.")
        return x @ self.unembed.W_U + self.unembed.b_U


VARIANTS = [
    dict(positional="standard", layer_norm=1, d_mlp=32),
    dict(positional="shortformer", smeared_keys=1, smear_alpha_init=0.7),
    dict(positional="none", layer_norm=1, d_mlp=16, smeared_keys=1),
]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v["positional"])
def test_weights_load_into_a_transformerlens_style_model(variant):
    m = induct.Model(n_layers=2, d_model=24, n_heads=3, n_ctx=16, d_vocab=11, seed=5,
                     init_std=0.3, **variant)
    # a few steps, so that biases, LayerNorm gains and smear alphas leave their init
    d = induct.Dataset.rrt(d_vocab=11, min_block=3, seed=1)
    o = induct.Optimizer(m, lr=3e-2)
    for _ in range(3):
        o.train_step(d, 4, 16)
    w = m.weights(torch=True)
    assert all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in w.values())
    ref = TinyHookedTransformer(m.config)
    ref.load_state_dict({k: t.double() for k, t in w.items()}, strict=True)
    # the tensors are copies: changing them does not touch the model
    w["unembed.b_U"] += 1.0
    assert not np.array_equal(m.get("unembed.b_U"), w["unembed.b_U"].numpy())

    toks = np.array(d.batch(0, 3, 16, split="eval")[0])
    logits, _, _ = m.forward(toks)
    with torch.no_grad():
        ref_logits = ref(torch.from_numpy(toks.astype(np.int64))).numpy()
    assert np.allclose(logits, ref_logits, rtol=1e-4, atol=1e-5)


def test_weights_without_torch_are_float32_arrays():
    m = induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=8, d_vocab=5)
    w = m.weights()
    assert set(w) == set(m.tensor_names())
    assert w["blocks.0.attn.W_Q"].shape == (2, 8, 4) and w["embed.W_E"].dtype == np.float32
