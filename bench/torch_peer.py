"""PyTorch peer of bench_step (bench/bench.py starts it; not a test).

The same model as libinduct's (docs/definitions.md, lib/model/pass.c), per layer l:

    h      = LN1(resid_pre)             (pre-LN with --layernorm 1; else h = resid_pre)
    qk_in  = h + W_pos[t]               (--positional shortformer; else qk_in = h)
    q = qk_in W_Q + b_Q ; k = qk_in W_K + b_K ; v = h W_V + b_V
    k_j   <- s k_j + (1 - s) k_{j-1}    (--smeared 1: for j >= 1, s = sigmoid(alpha_h), one
                                         learnable alpha per head, initially 0; k_{j-1} is
                                         the unmixed key; k_0 unchanged; q and v unchanged)
    z = softmax(causal mask(q k^T / sqrt(d_head))) v
    resid_mid  = resid_pre + z W_O + b_O
    resid_post = resid_mid + W_out GELU_tanh(W_in LN2(resid_mid) + b_in) + b_out  (--mlp M)
    logits = LN_final(resid) W_U + b_U  (LN_final with --layernorm 1)

The residual stream starts at W_E[tok] + W_pos[t] with standard positions and at W_E[tok]
with shortformer positions, which add W_pos (after LN1) only to the inputs of the queries
and keys of every layer (of the first N layers with --shortformer-layers N): not to the
residual stream, not to the values. PyTorch module
default initialisation (libinduct's INDUCT_INIT_TORCH), fp32, CPU, mean next-token
cross-entropy, torch.optim.AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8), weight decay 0.01
on the tensors that have two or more dimensions in TransformerLens' shapes, as libinduct:
the weights, the embeddings and also b_Q, b_K, b_V ([n_heads, d_head]); not b_O, the MLP
and unembedding biases, the LayerNorm parameters or alpha.

Written the efficient way for PyTorch 1.13 (which has no scaled_dot_product_attention):
Q, K and V are one fused nn.Linear on h. With shortformer positions the positional part
of Q and K is linear too, W_pos W_{Q,K}: it is computed once per step for the T positions
([T, 2 H d_head]) and added to the fused projection of h: the same model, and as fast as
or slightly faster than the other way, a fused Q/K nn.Linear on h + W_pos beside a
separate V nn.Linear on h (bench/README.md has the comparison). The smeared keys are one
expression on the keys.

Same stdin protocol as bench_step: warm N, run N, eval N, rss, quit.
Threads: torch.set_num_threads(--threads); the environment (OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS, MALLOC_* tuning) is set by the driver.

Checking that this is libinduct's model (bench.py --check-peer runs it):
    torch_peer.py [model options] --load W.safetensors --check-tokens TOK.npy --check-steps K
loads the weights of a file written by induct_model_save() (TransformerLens names),
prints one JSON line {"forward_loss": ..., "step_losses": [...]} (the mean loss before
each of K AdamW steps on the int32 [K, B, T] batches of TOK.npy) and exits.
"""
import argparse
import json
import math
import struct
import sys
import time


def rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return -1


def read_safetensors(path):
    """{name: float32 numpy array} of a safetensors file (F32 tensors only)."""
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise ValueError("%s: dtype %s, expected F32" % (name, t["dtype"]))
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(raw, dtype="<f4", count=(b - a) // 4,
                                  offset=8 + n + a).reshape(t["shape"]).copy()
    return out


def build(a):
    """The model (an nn.Module whose forward(tok) is the mean loss) and the AdamW groups."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    V, T, D, H, L, M, B = a.vocab, a.seq, a.d_model, a.heads, a.layers, a.mlp, a.batch
    dh = D // H
    HD = H * dh
    short = a.positional == "shortformer"

    class Block(nn.Module):
        def __init__(self, li):
            super().__init__()
            # shortformer positions in the first shortformer_layers layers (0: every layer)
            self.short = short and (a.shortformer_layers == 0 or li < a.shortformer_layers)
            self.ln1 = nn.LayerNorm(D) if a.layernorm else nn.Identity()
            self.qkv = nn.Linear(D, 3 * HD)
            self.out = nn.Linear(HD, D)
            if a.smeared:
                self.alpha = nn.Parameter(torch.zeros(H))
            if M:
                self.ln2 = nn.LayerNorm(D) if a.layernorm else nn.Identity()
                self.fc_in = nn.Linear(D, M)
                self.fc_out = nn.Linear(M, D)
            self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1))

        def forward(self, x, W_pos):
            h = self.ln1(x)
            y = self.qkv(h)
            if self.short:  # + W_pos[t] W_{Q,K} on the Q and K columns: = (h + W_pos) W
                y = y + F.pad(W_pos @ self.qkv.weight[:2 * HD].t(), (0, HD))
            q, k, v = y.view(B, T, 3, H, dh).permute(2, 0, 3, 1, 4)
            if a.smeared:
                s = torch.sigmoid(self.alpha).view(1, H, 1, 1)
                k = torch.cat([k[:, :, :1], s * k[:, :, 1:] + (1 - s) * k[:, :, :-1]], dim=2)
            sc = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(dh))
            sc = sc.masked_fill(self.mask, float("-inf"))
            z = torch.softmax(sc, dim=-1) @ v
            x = x + self.out(z.transpose(1, 2).reshape(B, T, HD))
            if M:
                x = x + self.fc_out(F.gelu(self.fc_in(self.ln2(x)), approximate="tanh"))
            return x

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_E = nn.Embedding(V, D)
            self.W_pos = nn.Embedding(T, D)
            self.blocks = nn.ModuleList(Block(li) for li in range(L))
            self.ln_f = nn.LayerNorm(D) if a.layernorm else nn.Identity()
            self.unembed = nn.Linear(D, V)

        def forward(self, tok):
            x = self.W_E(tok)
            P = self.W_pos.weight
            if not short:
                x = x + P
            for b in self.blocks:
                x = b(x, P)
            logits = self.unembed(self.ln_f(x))
            return F.cross_entropy(logits[:, :-1].reshape(-1, V), tok[:, 1:].reshape(-1))

    model = Model()
    # libinduct decays the tensors of >= 2 dims in TL shapes: b_Q, b_K, b_V are [H, d_head]
    qkv_b = {id(b.qkv.bias) for b in model.blocks}
    decay = [p for p in model.parameters() if p.dim() >= 2 or id(p) in qkv_b]
    no_decay = [p for p in model.parameters() if p.dim() < 2 and id(p) not in qkv_b]
    groups = [{"params": decay, "weight_decay": 0.01},
              {"params": no_decay, "weight_decay": 0.0}]
    return model, groups


def load_tl(model, a, path):
    """Copy the TransformerLens-named tensors of a libinduct safetensors file into model;
    every tensor of the file and every parameter of the model must be used exactly once."""
    import torch
    w = read_safetensors(path)
    D, H = a.d_model, a.heads
    dh = D // H
    HD = H * dh
    t = lambda name: torch.from_numpy(w.pop(name))
    done = set()

    def put(p, x):
        if tuple(p.shape) != tuple(x.shape):
            raise ValueError("shape %s for a parameter of shape %s" % (tuple(x.shape),
                                                                      tuple(p.shape)))
        with torch.no_grad():
            p.copy_(x)
        done.add(id(p))

    put(model.W_E.weight, t("embed.W_E"))
    put(model.W_pos.weight, t("pos_embed.W_pos"))
    for l, b in enumerate(model.blocks):
        pre = "blocks.%d." % l
        if a.layernorm:
            put(b.ln1.weight, t(pre + "ln1.w"))
            put(b.ln1.bias, t(pre + "ln1.b"))
        # W_X [H, D, dh] -> rows h*dh+j of the [out, in] Linear weight
        put(b.qkv.weight, torch.cat([t(pre + "attn.W_" + x).permute(0, 2, 1).reshape(HD, D)
                                     for x in "QKV"]))
        put(b.qkv.bias, torch.cat([t(pre + "attn.b_" + x).reshape(HD) for x in "QKV"]))
        put(b.out.weight, t(pre + "attn.W_O").reshape(HD, D).t())
        put(b.out.bias, t(pre + "attn.b_O"))
        if a.smeared:
            put(b.alpha, t(pre + "attn.smear_alpha"))
        if a.mlp:
            if a.layernorm:
                put(b.ln2.weight, t(pre + "ln2.w"))
                put(b.ln2.bias, t(pre + "ln2.b"))
            put(b.fc_in.weight, t(pre + "mlp.W_in").t())
            put(b.fc_in.bias, t(pre + "mlp.b_in"))
            put(b.fc_out.weight, t(pre + "mlp.W_out").t())
            put(b.fc_out.bias, t(pre + "mlp.b_out"))
    if a.layernorm:
        put(model.ln_f.weight, t("ln_final.w"))
        put(model.ln_f.bias, t("ln_final.b"))
    put(model.unembed.weight, t("unembed.W_U").t())
    put(model.unembed.bias, t("unembed.b_U"))
    left = [n for n, p in model.named_parameters() if id(p) not in done]
    if w or left:
        raise ValueError("unused tensors in the file: %s; parameters not set: %s" % (
            sorted(w), left))


def main():
    ap = argparse.ArgumentParser()
    for name, default in [("vocab", 64), ("seq", 24), ("d-model", 64), ("heads", 4),
                          ("layers", 2), ("mlp", 0), ("layernorm", 0), ("batch", 64),
                          ("threads", 1), ("smeared", 0), ("shortformer-layers", 0)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--positional", choices=("standard", "shortformer"), default="standard")
    ap.add_argument("--foreach", type=int, default=0,
                    help="AdamW foreach implementation (1) or the per-tensor loop (0)")
    ap.add_argument("--load", help="weights: a safetensors file of induct_model_save()")
    ap.add_argument("--check-tokens", help="int32 .npy [K, batch, seq]: print the losses, exit")
    ap.add_argument("--check-steps", type=int, default=0)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    base_rss = rss_kib("VmRSS:")
    V, T, B = a.vocab, a.seq, a.batch
    model, groups = build(a)
    if a.load:
        load_tl(model, a, a.load)
    opt = torch.optim.AdamW(groups, lr=1e-3, foreach=bool(a.foreach))
    n_params = sum(p.numel() for p in model.parameters())

    def train_step(tok):
        opt.zero_grad(set_to_none=True)
        loss = model(tok)
        loss.backward()
        opt.step()
        return loss

    if a.check_tokens:
        import numpy as np
        toks = torch.from_numpy(np.load(a.check_tokens).astype(np.int64))
        with torch.no_grad():
            fwd = model(toks[0]).item()
        steps = [train_step(toks[i % len(toks)]).item() for i in range(a.check_steps)]
        print(json.dumps({"forward_loss": fwd, "step_losses": steps}), flush=True)
        return

    g = torch.Generator().manual_seed(12345)
    batches = [torch.randint(0, V, (B, T), generator=g) for _ in range(4)]
    it = 0
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        cmd = parts[0]
        if cmd == "quit":
            break
        if cmd == "rss":
            print(json.dumps({"peak_rss_kib": rss_kib("VmHWM:"), "base_rss_kib": base_rss,
                              "n_params": n_params}), flush=True)
            continue
        k = int(parts[1]) if len(parts) > 1 else 0
        ms, cpu = [], []
        for _ in range(k):
            tok = batches[it % 4]
            it += 1
            t0, c0 = time.perf_counter(), time.process_time()
            if cmd == "eval":
                with torch.no_grad():
                    model(tok)
            else:
                train_step(tok)
            ms.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
        print(json.dumps({"ms": ms, "cpu_ms": cpu} if cmd != "warm" else {}), flush=True)


if __name__ == "__main__":
    main()
