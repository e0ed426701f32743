"""Parity of libinduct with an independent PyTorch implementation.

For every architecture variant, ``parity_dump`` (C, public API only) writes the
weights of a tiny 2-layer model, random tokens, the library's logits, per-token
losses and the gradient of the mean loss with respect to every parameter into
one safetensors file. This test reads the file with NumPy alone, builds the
model from the definitions in docs/definitions.md ("Architecture and names",
"Smeared keys") the ordinary PyTorch way, in float64, and compares.

Tolerance: the C library computes in float32, the reference in float64. For
every compared tensor c (library) against t (reference), elementwise
    |c - t| <= RTOL * |t| + ATOL_REL * S
with RTOL = 1e-4 and ATOL_REL = 1e-6, where S is the largest magnitude of that
kind of quantity: max|logits| for logits, max|losses| for losses, and the
largest gradient entry over all parameters for every gradient. So each element
is within 1e-4 relative, and entries that are zero up to float32 cancellation
are judged on the model's gradient scale. (The gradient of b_K is exactly 0 in
exact arithmetic, since adding a constant to every key shifts a softmax row by
a constant; float32 leaves ~1e-8 there.)

Run: INDUCT_PARITY_DUMP=build/tests/parity_dump /usr/bin/python3 -m pytest -q -rsP
tests/test_torch_parity.py (meson test does this). Without PyTorch the tests
skip and the session exits with status 77 (meson's SKIP), except under CI=true,
where a missing PyTorch is a failure.
"""

import json
import math
import os
import struct
import subprocess

import numpy as np
import pytest

try:
    import torch
    import torch.nn.functional as F

    TORCH_ERROR = None
except ImportError as exc:  # reported by the torch_required fixture
    torch = None
    TORCH_ERROR = exc

VARIANTS = [
    "attention-only",
    "mlp",
    "layernorm",
    "shortformer",
    "none",
    "smeared-keys",
    "everything",
    "shortformer-layer0",
    "shortformer-layer0-no-ln",
]
RTOL = 1e-4
ATOL_REL = 1e-6


# ---- a minimal safetensors reader (NumPy only) ------------------------------
DTYPES = {"F32": np.dtype("<f4"), "I32": np.dtype("<i4"), "F64": np.dtype("<f8")}


def read_safetensors(path):
    """Return (metadata dict, {name: ndarray}) and check the layout is sound."""
    with open(path, "rb") as f:
        buf = f.read()
    (hlen,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8 : 8 + hlen].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    base = 8 + hlen
    tensors, spans = {}, []
    for name, info in header.items():
        dtype = DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        count = int(np.prod(info["shape"], dtype=np.int64))
        assert end - begin == count * dtype.itemsize, name
        arr = np.frombuffer(buf, dtype=dtype, count=count, offset=base + begin)
        tensors[name] = arr.reshape(info["shape"]).copy()
        spans.append((begin, end))
    spans.sort()
    assert spans[0][0] == 0 and spans[-1][1] == len(buf) - base, "data section not covered"
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), "gaps or overlaps in data"
    return meta, tensors


# ---- the reference model (docs/definitions.md, TransformerLens layout) -----
def expected_shapes(cfg):
    D, H, dh, M = cfg["d_model"], cfg["n_heads"], cfg["d_head"], cfg["d_mlp"]
    V, C = cfg["d_vocab"], cfg["n_ctx"]
    s = {"embed.W_E": (V, D), "unembed.W_U": (D, V), "unembed.b_U": (V,)}
    if cfg["positional"] != "none":
        s["pos_embed.W_pos"] = (C, D)
    for l in range(cfg["n_layers"]):
        p = f"blocks.{l}."
        for w in ("W_Q", "W_K", "W_V"):
            s[p + "attn." + w] = (H, D, dh)
        for b in ("b_Q", "b_K", "b_V"):
            s[p + "attn." + b] = (H, dh)
        s[p + "attn.W_O"] = (H, dh, D)
        s[p + "attn.b_O"] = (D,)
        if cfg["smeared_keys"]:
            s[p + "attn.smear_alpha"] = (H,)
        if cfg["layer_norm"]:
            s[p + "ln1.w"] = s[p + "ln1.b"] = (D,)
        if M:
            s[p + "mlp.W_in"] = (D, M)
            s[p + "mlp.b_in"] = (M,)
            s[p + "mlp.W_out"] = (M, D)
            s[p + "mlp.b_out"] = (D,)
            if cfg["layer_norm"]:
                s[p + "ln2.w"] = s[p + "ln2.b"] = (D,)
    if cfg["layer_norm"]:
        s["ln_final.w"] = s["ln_final.b"] = (D,)
    return s


def reference_forward(P, tokens, cfg):
    """Logits [B, T, V] and per-token losses [B, T-1] (nats)."""
    B, T = tokens.shape
    use_ln = bool(cfg["layer_norm"])
    positional = cfg["positional"]

    def ln(x, name):
        return F.layer_norm(x, (x.shape[-1],), P[name + ".w"], P[name + ".b"], eps=1e-5)

    x = P["embed.W_E"][tokens]  # [B, T, D]
    pos = P["pos_embed.W_pos"][:T] if positional != "none" else None
    if positional == "standard":
        x = x + pos
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    for l in range(cfg["n_layers"]):
        p = f"blocks.{l}."
        h = ln(x, p + "ln1") if use_ln else x
        # shortformer: positions enter the query and key inputs only, of the first
        # shortformer_layers layers (0: of every layer)
        sfl = cfg.get("shortformer_layers", 0)
        reads_pos = positional == "shortformer" and (sfl == 0 or l < sfl)
        qk_in = h + pos if reads_pos else h
        q = torch.einsum("btd,hde->bthe", qk_in, P[p + "attn.W_Q"]) + P[p + "attn.b_Q"]
        k = torch.einsum("btd,hde->bthe", qk_in, P[p + "attn.W_K"]) + P[p + "attn.b_K"]
        v = torch.einsum("btd,hde->bthe", h, P[p + "attn.W_V"]) + P[p + "attn.b_V"]
        if cfg["smeared_keys"]:
            # k'_j = s k_j + (1 - s) k_{j-1} with the raw previous key, k'_0 = k_0
            s = torch.sigmoid(P[p + "attn.smear_alpha"])[:, None]  # [H, 1]
            k = torch.cat([k[:, :1], s * k[:, 1:] + (1 - s) * k[:, :-1]], dim=1)
        scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(cfg["d_head"])
        pattern = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
        z = torch.einsum("bhqk,bkhe->bqhe", pattern, v)
        x = x + torch.einsum("bqhe,hed->bqd", z, P[p + "attn.W_O"]) + P[p + "attn.b_O"]
        if cfg["d_mlp"]:
            h2 = ln(x, p + "ln2") if use_ln else x
            pre = h2 @ P[p + "mlp.W_in"] + P[p + "mlp.b_in"]
            x = x + F.gelu(pre, approximate="tanh") @ P[p + "mlp.W_out"] + P[p + "mlp.b_out"]
    if use_ln:
        x = ln(x, "ln_final")
    logits = x @ P["unembed.W_U"] + P["unembed.b_U"]
    V = logits.shape[-1]
    losses = F.cross_entropy(
        logits[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1), reduction="none"
    ).view(B, T - 1)
    return logits, losses


# ---- fixtures -----------------------------------------------------------------
class _ExitStatusSkipped:
    """Make a session whose torch tests all skipped exit with 77 (meson's SKIP)."""

    def pytest_sessionfinish(self, session, exitstatus):
        if exitstatus == 0:
            session.exitstatus = 77


@pytest.fixture
def torch_required(request):
    if torch is not None:
        torch.set_num_threads(1)
        return
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"PyTorch is required when CI=true (CI installs python3-torch): {TORCH_ERROR}")
    pm = request.config.pluginmanager
    if not pm.has_plugin("induct-exit-status-skipped"):
        pm.register(_ExitStatusSkipped(), "induct-exit-status-skipped")
    pytest.skip(f"PyTorch parity test skipped: torch is not importable ({TORCH_ERROR})")


def dump(variant, tmp_path):
    exe = os.environ.get("INDUCT_PARITY_DUMP")
    assert exe, "set INDUCT_PARITY_DUMP to the parity_dump executable (meson test does)"
    out = tmp_path / f"{variant}.safetensors"
    proc = subprocess.run([exe, variant, str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, f"parity_dump {variant} failed: {proc.stderr}"
    return read_safetensors(out)


def compare(what, got, ref, scale):
    """Assert |got - ref| <= RTOL |ref| + ATOL_REL scale elementwise.

    Returns, for the report: the worst err/bound ratio (<= 1 when it passes), the
    largest elementwise relative error over entries with |ref| >= 1e-3 scale, and
    the norm-relative error ||got - ref|| / ||ref|| (None for a tensor that is
    zero in exact arithmetic, i.e. below the absolute floor)."""
    assert got.shape == ref.shape, f"{what}: shape {got.shape} vs {ref.shape}"
    assert np.all(np.isfinite(got)), f"{what}: non-finite values"
    err = np.abs(got.astype(np.float64) - ref)
    bound = RTOL * np.abs(ref) + ATOL_REL * scale
    ratio = err / bound
    idx = np.unravel_index(int(np.argmax(ratio)), err.shape)
    assert np.all(err <= bound), (
        f"{what}: element {idx} library {got[idx]:.8g} vs reference {ref[idx]:.8g} "
        f"(|err| {err[idx]:.3g} > bound {bound[idx]:.3g}; scale {scale:.3g})"
    )
    big = np.abs(ref) >= 1e-3 * scale
    nrm = float(np.linalg.norm(ref))
    return {
        "ratio": float(ratio[idx]),
        "rel": float(np.max(err[big] / np.abs(ref[big]))) if np.any(big) else 0.0,
        "norm": float(np.linalg.norm(err)) / nrm if nrm > ATOL_REL * scale * math.sqrt(ref.size)
        else None,
    }


@pytest.mark.parametrize("variant", VARIANTS)
def test_parity(variant, tmp_path, torch_required):
    meta, t = dump(variant, tmp_path)
    assert meta["variant"] == variant
    cfg = {key: int(meta[key]) for key in (
        "n_layers", "d_model", "n_heads", "d_head", "d_mlp", "n_ctx", "d_vocab",
        "layer_norm", "smeared_keys", "shortformer_layers")}
    cfg["positional"] = meta["positional"]

    shapes = expected_shapes(cfg)
    params = {n: a for n, a in t.items() if not n.startswith("grad.")
              and n not in ("tokens", "logits", "losses")}
    assert set(params) == set(shapes), f"parameter names differ: {set(params) ^ set(shapes)}"
    assert set(n[5:] for n in t if n.startswith("grad.")) == set(shapes)
    for name, shape in shapes.items():
        assert params[name].shape == shape, f"{name}: {params[name].shape} vs {shape}"
        assert np.any(params[name] != 0), f"{name} is all zero: the dump is not a real test"

    P = {n: torch.tensor(a, dtype=torch.float64, requires_grad=True) for n, a in params.items()}
    tokens = torch.tensor(t["tokens"], dtype=torch.long)
    logits, losses = reference_forward(P, tokens, cfg)
    loss = losses.mean()
    loss.backward()

    ref_logits, ref_losses = logits.detach().numpy(), losses.detach().numpy()
    ref_grads = {name: P[name].grad.numpy() for name in shapes}
    gscale = max(float(np.max(np.abs(g))) for g in ref_grads.values())
    errors = {
        "logits": compare("logits", t["logits"], ref_logits, float(np.max(np.abs(ref_logits)))),
        "losses": compare("losses", t["losses"], ref_losses, float(np.max(np.abs(ref_losses)))),
    }
    assert abs(float(meta["mean_loss"]) - loss.item()) <= RTOL * loss.item()
    for name in shapes:
        errors["grad." + name] = compare("grad." + name, t["grad." + name], ref_grads[name],
                                         gscale)
    # rows of W_pos past the sequence get no gradient (exactly)
    if cfg["positional"] != "none":
        T = tokens.shape[1]
        assert np.all(t["grad.pos_embed.W_pos"][T:] == 0)
    worst = {key: max(errors, key=lambda k: errors[k][key] or 0.0)
             for key in ("ratio", "rel", "norm")}
    print(f"\n{variant}: mean loss {loss.item():.3f}; worst err/bound {errors[worst['ratio']]['ratio']:.2f} "
          f"({worst['ratio']}); max elementwise rel err {errors[worst['rel']]['rel']:.1e} "
          f"({worst['rel']}); max norm rel err {errors[worst['norm']]['norm']:.1e} "
          f"({worst['norm']}); logits {errors['logits']['norm']:.1e}, "
          f"losses {errors['losses']['norm']:.1e}")
