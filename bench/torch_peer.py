"""PyTorch peer of bench_step (bench/bench.py starts it; not a test).

The same model as libinduct's: learned token and position embeddings added to the
residual stream, n_layers blocks of causal multi-head attention (pre-LN when
--layernorm 1) and, with --mlp M, a GELU (tanh) MLP, a final LN when --layernorm 1,
an unembedding with bias. PyTorch module default initialisation (libinduct's
INDUCT_INIT_TORCH), fp32, CPU, mean next-token cross-entropy, torch.optim.AdamW
(lr 1e-3, weight decay 0.01 on matrices only, as libinduct). Q, K and V are one
fused nn.Linear (the usual efficient way to write it in PyTorch 1.13, which has
no scaled_dot_product_attention).

Same stdin protocol as bench_step: warm N, run N, eval N, rss, quit.
Threads: torch.set_num_threads(--threads); the environment (OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS, MALLOC_* tuning) is set by the driver.
"""
import argparse
import json
import math
import resource
import sys
import time


def rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return -1


def main():
    ap = argparse.ArgumentParser()
    for name, default in [("vocab", 64), ("seq", 24), ("d-model", 64), ("heads", 4),
                          ("layers", 2), ("mlp", 0), ("layernorm", 0), ("batch", 64),
                          ("threads", 1)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--foreach", type=int, default=0,
                    help="AdamW foreach implementation (1) or the per-tensor loop (0)")
    a = ap.parse_args()
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    base_rss = rss_kib("VmRSS:")
    V, T, D, H, L, M, B = a.vocab, a.seq, a.d_model, a.heads, a.layers, a.mlp, a.batch
    dh = D // H

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(D) if a.layernorm else nn.Identity()
            self.qkv = nn.Linear(D, 3 * H * dh)
            self.out = nn.Linear(H * dh, D)
            if M:
                self.ln2 = nn.LayerNorm(D) if a.layernorm else nn.Identity()
                self.fc_in = nn.Linear(D, M)
                self.fc_out = nn.Linear(M, D)
            self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1))

        def forward(self, x):
            h = self.ln1(x)
            q, k, v = self.qkv(h).view(B, T, 3, H, dh).permute(2, 0, 3, 1, 4)
            s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(dh))
            s = s.masked_fill(self.mask, float("-inf"))
            z = torch.softmax(s, dim=-1) @ v
            x = x + self.out(z.transpose(1, 2).reshape(B, T, H * dh))
            if M:
                x = x + self.fc_out(F.gelu(self.fc_in(self.ln2(x)), approximate="tanh"))
            return x

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_E = nn.Embedding(V, D)
            self.W_pos = nn.Embedding(T, D)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(D) if a.layernorm else nn.Identity()
            self.unembed = nn.Linear(D, V)
            self.register_buffer("pos", torch.arange(T))

        def forward(self, tok):
            x = self.W_E(tok) + self.W_pos(self.pos)
            for b in self.blocks:
                x = b(x)
            logits = self.unembed(self.ln_f(x))
            return F.cross_entropy(logits[:, :-1].reshape(-1, V), tok[:, 1:].reshape(-1))

    model = Model()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-3,
                            foreach=bool(a.foreach))
    n_params = sum(p.numel() for p in model.parameters())
    g = torch.Generator().manual_seed(12345)
    batches = [torch.randint(0, V, (B, T), generator=g) for _ in range(4)]
    it = 0

    def train_step(tok):
        opt.zero_grad(set_to_none=True)
        loss = model(tok)
        loss.backward()
        opt.step()
        return loss

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
