"""Checkpoint interop: libinduct <-> NumPy/PyTorch through safetensors files.

libinduct -> Python: a C helper writes a checkpoint, tokens and libinduct's logits; the
file is read here with NumPy alone (no safetensors package), the model is rebuilt in
PyTorch from the TransformerLens-named tensors following docs/checkpoint-format.md and
docs/definitions.md, and its logits must match libinduct's within 1e-4.

Python -> libinduct: random TL-named weights are written here as safetensors (own
NumPy writer), the PyTorch logits are computed, and the helper loads the file into
libinduct and must produce the same logits.

Run by meson with INDUCT_CKPT_HELPER set to the helper executable.
"""
import json
import math
import os
import struct
import subprocess

import numpy as np
import pytest
import torch
import torch.nn.functional as F

HELPER = os.environ.get("INDUCT_CKPT_HELPER")
TOL = 1e-4

if not HELPER:
    raise RuntimeError("INDUCT_CKPT_HELPER is not set: run this file through `meson test`")


# ---- safetensors with NumPy only -------------------------------------------------------

DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I32": "<i4", "I64": "<i8"}


def read_safetensors(path):
    """Return (tensors: dict name -> ndarray, metadata: dict) using only NumPy."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = blob[8 + n :]
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        arr = np.frombuffer(data[b:end], dtype=DTYPES[e["dtype"]])
        out[name] = arr.reshape(e["shape"])
    return out, meta


def write_safetensors(path, tensors, metadata=None):
    """Write float32 tensors (dict name -> array, in the dict's order) as safetensors."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    chunks, off = [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        chunks.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header).encode("utf-8")
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for c in chunks:
            f.write(c)


# ---- the model in PyTorch, from TL names ------------------------------------------------


def layer_norm(x, w, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)  # biased variance
    return (x - mu) / torch.sqrt(var + 1e-5) * w + b


def torch_logits(P, cfg, tokens):
    """P: dict of float64 torch tensors (TL names); cfg: dict; tokens: LongTensor [B, T]."""
    B, T = tokens.shape
    L, pos_type, ln = cfg["n_layers"], cfg["positional"], cfg["layer_norm"]
    x = P["embed.W_E"][tokens]
    W_pos = P["pos_embed.W_pos"][:T] if pos_type != "none" else None
    if pos_type == "standard":
        x = x + W_pos
    for l in range(L):
        p = f"blocks.{l}."
        h = layer_norm(x, P[p + "ln1.w"], P[p + "ln1.b"]) if ln else x
        qk_in = h + W_pos if pos_type == "shortformer" else h
        q = torch.einsum("btd,hde->bhte", qk_in, P[p + "attn.W_Q"]) + P[p + "attn.b_Q"][None, :, None, :]
        k = torch.einsum("btd,hde->bhte", qk_in, P[p + "attn.W_K"]) + P[p + "attn.b_K"][None, :, None, :]
        v = torch.einsum("btd,hde->bhte", h, P[p + "attn.W_V"]) + P[p + "attn.b_V"][None, :, None, :]
        if p + "attn.smear_alpha" in P:
            s = torch.sigmoid(P[p + "attn.smear_alpha"])[None, :, None, None]
            k = torch.cat([k[:, :, :1], s * k[:, :, 1:] + (1 - s) * k[:, :, :-1]], dim=2)
        d_head = q.shape[-1]
        scores = q @ k.transpose(-1, -2) / math.sqrt(d_head)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        z = torch.softmax(scores, dim=-1) @ v
        x = x + torch.einsum("bhte,hed->btd", z, P[p + "attn.W_O"]) + P[p + "attn.b_O"]
        if p + "mlp.W_in" in P:
            h2 = layer_norm(x, P[p + "ln2.w"], P[p + "ln2.b"]) if ln else x
            pre = h2 @ P[p + "mlp.W_in"] + P[p + "mlp.b_in"]
            x = x + F.gelu(pre, approximate="tanh") @ P[p + "mlp.W_out"] + P[p + "mlp.b_out"]
    if ln:
        x = layer_norm(x, P["ln_final.w"], P["ln_final.b"])
    return x @ P["unembed.W_U"] + P["unembed.b_U"]


def to_torch(arrays):
    return {k: torch.from_numpy(np.array(v, dtype=np.float64)) for k, v in arrays.items()}


# ---- libinduct -> NumPy / PyTorch ----------------------------------------------------------


@pytest.mark.parametrize("variant", ["attn-only", "mlp-ln", "shortformer-smeared", "none-ln", "everything"])
def test_libinduct_checkpoint_in_pytorch(tmp_path, variant):
    out = subprocess.run([HELPER, "write", str(tmp_path), variant], check=True, capture_output=True, text=True)
    B, T, V = map(int, out.stdout.split())
    tensors, meta = read_safetensors(tmp_path / "model.safetensors")
    assert meta["format_version"] == "1"
    assert all(a.dtype == np.float32 for a in tensors.values())
    cfg = {
        "n_layers": int(meta["n_layers"]),
        "positional": meta["positional_embedding_type"],
        "layer_norm": meta["normalization_type"] == "LN",
    }
    assert int(meta["d_vocab"]) == V and tensors["embed.W_E"].shape == (V, int(meta["d_model"]))
    assert tensors["blocks.0.attn.W_Q"].shape == (int(meta["n_heads"]), int(meta["d_model"]), int(meta["d_head"]))
    assert tensors["blocks.0.attn.W_O"].shape == (int(meta["n_heads"]), int(meta["d_head"]), int(meta["d_model"]))
    assert ("blocks.1.attn.smear_alpha" in tensors) == ("smeared" in variant or variant == "everything")
    tokens = np.fromfile(tmp_path / "tokens.bin", dtype="<i4").reshape(B, T)
    ref = np.fromfile(tmp_path / "logits.bin", dtype="<f4").reshape(B, T, V)
    with torch.no_grad():
        got = torch_logits(to_torch(tensors), cfg, torch.from_numpy(tokens.astype(np.int64))).numpy()
    err = np.abs(got - ref).max()
    assert err < TOL, f"max |torch - libinduct| = {err}"
    assert np.abs(ref).max() > 0.5  # the comparison is not between near-zero values


def test_optimizer_state_readable(tmp_path):
    subprocess.run([HELPER, "write", str(tmp_path), "mlp-ln"], check=True, capture_output=True)
    model, _ = read_safetensors(tmp_path / "model.safetensors")
    tensors, meta = read_safetensors(tmp_path / "opt.safetensors")
    assert meta["optimizer"] == "adamw" and meta["optimizer.step"] == "2"
    for name, a in model.items():
        assert tensors[name].shape == a.shape
        assert tensors["optimizer.m." + name].shape == a.shape
        assert tensors["optimizer.v." + name].shape == a.shape
        assert np.all(tensors["optimizer.v." + name] >= 0)
    assert len(tensors) == 3 * len(model)


# ---- PyTorch / NumPy -> libinduct ---------------------------------------------------------


def random_tl_weights(cfg, seed):
    """TL-named weights from torch.randn (float32), biases and LN params non-trivial."""
    g = torch.Generator().manual_seed(seed)
    V, D, H, dh, M, L, C = (cfg[k] for k in ("d_vocab", "d_model", "n_heads", "d_head", "d_mlp", "n_layers", "n_ctx"))

    def r(*shape, base=0.0):
        return (0.4 * torch.randn(*shape, generator=g) + base).to(torch.float32)

    P = {"embed.W_E": r(V, D)}
    if cfg["positional"] != "none":
        P["pos_embed.W_pos"] = r(C, D)
    for l in range(L):
        p = f"blocks.{l}."
        if cfg["layer_norm"]:
            P[p + "ln1.w"], P[p + "ln1.b"] = r(D, base=1.0), r(D)
        for w in "QKV":
            P[p + f"attn.W_{w}"] = r(H, D, dh)
        P[p + "attn.W_O"] = r(H, dh, D)
        for w in "QKV":
            P[p + f"attn.b_{w}"] = r(H, dh)
        P[p + "attn.b_O"] = r(D)
        if cfg["smeared"]:
            P[p + "attn.smear_alpha"] = r(H)
        if M:
            if cfg["layer_norm"]:
                P[p + "ln2.w"], P[p + "ln2.b"] = r(D, base=1.0), r(D)
            P[p + "mlp.W_in"], P[p + "mlp.b_in"] = r(D, M), r(M)
            P[p + "mlp.W_out"], P[p + "mlp.b_out"] = r(M, D), r(D)
    if cfg["layer_norm"]:
        P["ln_final.w"], P["ln_final.b"] = r(D, base=1.0), r(D)
    P["unembed.W_U"], P["unembed.b_U"] = r(D, V), r(V)
    return P


PY_CONFIGS = {
    # __metadata__ with the choices the tensors cannot tell only (positions, normalization,
    # activation): every dimension is inferred from the shapes
    "inferred-standard": dict(n_layers=2, d_model=12, n_heads=3, d_head=4, d_mlp=0, n_ctx=10, d_vocab=17,
                              positional="standard", layer_norm=False, smeared=False, metadata="choices"),
    "inferred-mlp-ln-smeared": dict(n_layers=1, d_model=8, n_heads=2, d_head=3, d_mlp=20, n_ctx=9, d_vocab=13,
                                    positional="standard", layer_norm=True, smeared=True, metadata="choices"),
    # no __metadata__ at all: loads only with the configuration given explicitly
    "explicit-shortformer": dict(n_layers=2, d_model=12, n_heads=3, d_head=4, d_mlp=0, n_ctx=10, d_vocab=17,
                                 positional="shortformer", layer_norm=False, smeared=False, metadata=False),
    "explicit-mlp-ln": dict(n_layers=1, d_model=8, n_heads=2, d_head=3, d_mlp=20, n_ctx=9, d_vocab=13,
                            positional="standard", layer_norm=True, smeared=True, metadata=False),
    # TransformerLens config keys in __metadata__ (shortformer cannot be inferred)
    "tl-metadata-shortformer": dict(n_layers=3, d_model=16, n_heads=2, d_head=8, d_mlp=24, n_ctx=12, d_vocab=19,
                                    positional="shortformer", layer_norm=True, smeared=False, metadata=True),
    "tl-metadata-none": dict(n_layers=2, d_model=8, n_heads=4, d_head=2, d_mlp=0, n_ctx=11, d_vocab=9,
                             positional="none", layer_norm=False, smeared=True, metadata=True),
}


@pytest.mark.parametrize("name", sorted(PY_CONFIGS))
def test_pytorch_file_in_libinduct(tmp_path, name):
    cfg = PY_CONFIGS[name]
    P = random_tl_weights(cfg, seed=len(name))
    # tensors in reverse TL order: the loader must not depend on the file's order
    arrays = {k: v.numpy() for k, v in reversed(list(P.items()))}
    meta = None
    if cfg["metadata"]:
        meta = {} if cfg["metadata"] == "choices" else \
            {k: str(cfg[k]) for k in ("n_layers", "d_model", "n_heads", "d_head", "d_mlp", "n_ctx", "d_vocab")}
        meta["positional_embedding_type"] = cfg["positional"]
        meta["normalization_type"] = "LN" if cfg["layer_norm"] else "none"
        meta["act_fn"] = "gelu_new"
    path = tmp_path / "torch.safetensors"
    write_safetensors(path, arrays, meta)
    explicit = [] if cfg["metadata"] else explicit_config(cfg)
    B, T = 2, cfg["n_ctx"]
    tokens = torch.randint(0, cfg["d_vocab"], (B, T), generator=torch.Generator().manual_seed(7))
    tokens.numpy().astype("<i4").tofile(tmp_path / "tokens.bin")
    with torch.no_grad():
        ref = torch_logits({k: v.double() for k, v in P.items()}, cfg, tokens).numpy()
    out = tmp_path / "logits.bin"
    res = subprocess.run([HELPER, "logits", str(path), str(tmp_path / "tokens.bin"), str(B), str(T), str(out),
                          *explicit], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    got = np.fromfile(out, dtype="<f4").reshape(B, T, cfg["d_vocab"])
    err = np.abs(got - ref).max()
    assert err < TOL, f"max |libinduct - torch| = {err}"
    assert np.abs(ref).max() > 0.5


def explicit_config(cfg):
    """The helper's key=value arguments of an explicit induct_model_config."""
    pos = {"standard": 0, "shortformer": 1, "none": 2}[cfg["positional"]]
    return [f"{k}={cfg[k]}" for k in ("n_layers", "d_model", "n_heads", "d_head", "d_mlp", "n_ctx", "d_vocab")] + \
        [f"positional={pos}", f"layer_norm={int(cfg['layer_norm'])}", f"smeared_keys={int(cfg['smeared'])}"]


def test_architecture_not_told_by_the_tensors_is_refused(tmp_path):
    """Without __metadata__, a shortformer file reads like standard positions (its logits
    would change by O(1)) and a TransformerLens export with LayerNorm folded in
    (fold_ln=True: no LN weights, but still normalising) reads like a model without
    LayerNorm: both are refused with a message naming what is missing, and load with the
    configuration given explicitly."""
    np.zeros((1, 4), dtype="<i4").tofile(tmp_path / "tokens.bin")
    for name, missing in (("explicit-shortformer", ["positional_embedding_type", "shortformer"]),
                          ("explicit-mlp-ln", ["positional_embedding_type", "act_fn"])):
        cfg = PY_CONFIGS[name]
        P = random_tl_weights(cfg, seed=3)
        path = tmp_path / f"{name}.safetensors"
        write_safetensors(path, {k: v.numpy() for k, v in P.items()})
        args = [HELPER, "logits", str(path), str(tmp_path / "tokens.bin"), "1", "4", str(tmp_path / "o.bin")]
        res = subprocess.run(args, capture_output=True, text=True)
        assert res.returncode == 1
        assert "INDUCT_EFORMAT" in res.stderr and "cannot be told from its tensors" in res.stderr
        assert all(m in res.stderr for m in missing), res.stderr
        assert "induct_model_load_config" in res.stderr
        assert subprocess.run(args + explicit_config(cfg), capture_output=True).returncode == 0
        # the metadata must agree with a config given explicitly
        write_safetensors(path, {k: v.numpy() for k, v in P.items()}, {"n_heads": "1"})
        res = subprocess.run(args + explicit_config(cfg), capture_output=True, text=True)
        assert res.returncode == 1 and "n_heads (1) contradicts the given config" in res.stderr
    # TL's default export of an attention-only LayerNorm model: LN folded, no LN tensors,
    # TL config keys for the dimensions but not normalization_type
    cfg = dict(PY_CONFIGS["inferred-standard"], layer_norm=False)
    P = random_tl_weights(cfg, seed=4)
    meta = {k: str(cfg[k]) for k in ("n_layers", "d_model", "n_heads", "d_head", "d_mlp", "n_ctx", "d_vocab")}
    meta["positional_embedding_type"] = "standard"
    path = tmp_path / "tl-folded.safetensors"
    write_safetensors(path, {k: v.numpy() for k, v in P.items()}, meta)
    res = subprocess.run([HELPER, "logits", str(path), str(tmp_path / "tokens.bin"), "1", "4",
                          str(tmp_path / "o.bin")], capture_output=True, text=True)
    assert res.returncode == 1
    assert "normalization_type" in res.stderr and "fold_ln=True" in res.stderr
    assert "positional_embedding_type" not in res.stderr


def test_transformerlens_buffers_are_refused(tmp_path):
    """TL state dicts carry attention buffers (IGNORE, mask); libinduct refuses unknown
    tensors by name (documented): strip them before saving."""
    cfg = PY_CONFIGS["inferred-standard"]
    P = random_tl_weights(cfg, seed=1)
    arrays = {k: v.numpy() for k, v in P.items()}
    arrays["blocks.0.attn.IGNORE"] = np.array([-1e5], dtype=np.float32)
    path = tmp_path / "tl.safetensors"
    write_safetensors(path, arrays, {"positional_embedding_type": "standard", "normalization_type": "none"})
    np.zeros((1, 4), dtype="<i4").tofile(tmp_path / "tokens.bin")
    res = subprocess.run([HELPER, "logits", str(path), str(tmp_path / "tokens.bin"), "1", "4", str(tmp_path / "o.bin")],
                         capture_output=True, text=True)
    assert res.returncode == 1
    assert "INDUCT_EFORMAT" in res.stderr and "blocks.0.attn.IGNORE" in res.stderr
