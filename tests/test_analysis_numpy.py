"""NumPy references for the analysis suite.

tests/analysis_dump.c writes random models, inputs and libinduct's results; every
value is recomputed here independently (full d_model x d_model matrices instead of
the library's Gram-matrix shortcut, numpy.linalg.eigvals instead of LAPACKE dgeev,
numpy.linalg.svd, a NumPy forward pass for the copying score)."""
import os
import subprocess

import numpy as np
import pytest


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    out = tmp_path_factory.mktemp("analysis")
    subprocess.run([os.environ["ANALYSIS_DUMP"], str(out)], check=True)
    arrays = {}
    for line in (out / "manifest.txt").read_text().splitlines():
        name, dtype, *dims = line.split()
        arrays[name] = np.fromfile(out / (name + ".bin"), dtype="<" + dtype).reshape(
            [int(d) for d in dims])
    return arrays


def heads(a, prefix, n_layers):
    get = lambda l, n: a[f"{prefix}blocks.{l}.attn.{n}"].astype(np.float64)
    return [{n: get(l, n) for n in ("W_Q", "W_K", "W_V", "W_O")} for l in range(n_layers)]


def comp_reference(a, kind):
    hs = heads(a, "w.", 3)
    L, H = len(hs), hs[0]["W_Q"].shape[0]
    out = np.zeros((L, H, L, H))
    for l1 in range(L):
        for h1 in range(H):
            ov1 = hs[l1]["W_V"][h1] @ hs[l1]["W_O"][h1]
            for l2 in range(l1 + 1, L):
                for h2 in range(H):
                    qk2 = hs[l2]["W_Q"][h2] @ hs[l2]["W_K"][h2].T
                    ov2 = hs[l2]["W_V"][h2] @ hs[l2]["W_O"][h2]
                    right = {"q": qk2, "k": qk2.T, "v": ov2}[kind]
                    out[l1, h1, l2, h2] = np.linalg.norm(ov1 @ right) / (
                        np.linalg.norm(ov1) * np.linalg.norm(right))
    return out


@pytest.mark.parametrize("kind", ["q", "k", "v"])
def test_composition(dump, kind):
    ref = comp_reference(dump, kind)
    got = dump["comp_" + kind]
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=1e-6)
    assert np.all(got[:, :, 0, :] == 0) and np.count_nonzero(got) == np.count_nonzero(ref)


def test_composition_baseline(dump):
    # independent Monte Carlo estimate with NumPy's generator; both estimate the same mean
    D, dh = dump["w.blocks.0.attn.W_Q"].shape[1:]
    rng = np.random.default_rng(1)
    s = []
    for _ in range(4000):
        v, o, q, k = (rng.standard_normal(sh) for sh in ((D, dh), (dh, D), (D, dh), (D, dh)))
        ov, qk = v @ o, q @ k.T
        s.append(np.linalg.norm(ov @ qk) / (np.linalg.norm(ov) * np.linalg.norm(qk)))
    s = np.array(s)
    se = s.std() / np.sqrt(len(s))
    assert abs(dump["baseline"][0] - s.mean()) < 5 * se * np.sqrt(2)


def test_copying_eigen(dump):
    a = dump
    hs = heads(a, "w.", 3)
    WE, WU = a["w.embed.W_E"].astype(np.float64), a["w.unembed.W_U"].astype(np.float64)
    ref = np.zeros(a["eig"].shape)
    for l, h in np.ndindex(ref.shape):
        full = WE @ hs[l]["W_V"][h] @ hs[l]["W_O"][h] @ WU  # d_vocab x d_vocab
        lam = np.linalg.eigvals(full)
        ref[l, h] = lam.sum().real / np.abs(lam).sum()
    np.testing.assert_allclose(a["eig"], ref, atol=2e-5)


def layernorm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b, np.sqrt(var + 1e-5)


def test_copying_empirical(dump):
    a = {k[2:]: v.astype(np.float64) for k, v in dump.items() if k.startswith("c.")}
    tok = dump["c_tokens"]
    L, H, dh = 2, a["blocks.0.attn.W_Q"].shape[0], a["blocks.0.attn.W_Q"].shape[2]
    V = a["unembed.W_U"].shape[1]
    num, den = np.zeros((L, H)), np.zeros((L, H))
    for b, t in enumerate(tok):
        T = len(t)
        x = a["embed.W_E"][t] + a["pos_embed.W_pos"][:T]
        zs, pats = [], []
        for l in range(L):
            g = lambda n: a[f"blocks.{l}.{n}"]
            hin, _ = layernorm(x, g("ln1.w"), g("ln1.b"))
            q = np.einsum("td,hde->hte", hin, g("attn.W_Q")) + g("attn.b_Q")[:, None]
            k = np.einsum("td,hde->hte", hin, g("attn.W_K")) + g("attn.b_K")[:, None]
            v = np.einsum("td,hde->hte", hin, g("attn.W_V")) + g("attn.b_V")[:, None]
            s = q @ k.transpose(0, 2, 1) / np.sqrt(dh)
            s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
            A = np.exp(s - s.max(-1, keepdims=True))
            A /= A.sum(-1, keepdims=True)
            z = A @ v  # h t e
            x = x + np.einsum("hte,hed->td", z, g("attn.W_O")) + g("attn.b_O")
            zs.append(z)
            pats.append(A)
        np.testing.assert_allclose(np.array(pats), dump["c_att"][b], atol=2e-5)
        _, sigma = layernorm(x, a["ln_final.w"], a["ln_final.b"])
        for l in range(L):
            for h in range(H):
                c = zs[l][h] @ a[f"blocks.{l}.attn.W_O"][h]  # t d
                c = (c - c.mean(-1, keepdims=True)) / sigma * a["ln_final.w"]
                logit = c @ a["unembed.W_U"]  # t V
                lp = np.maximum(logit - logit.mean(-1, keepdims=True), 0.0)
                A = pats[l][h]
                num[l, h] += sum(A[p, kk] * lp[p, t[kk]] for p in range(T) for kk in range(p + 1))
                den[l, h] += lp[:, np.unique(t)].sum()
    ref = 2 * num / den - 1
    np.testing.assert_allclose(dump["c_copying"], ref, atol=1e-4)
    assert np.ptp(ref) > 0.1  # the heads differ: the comparison means something


def test_pca(dump):
    x = dump["p_x"].astype(np.float64)
    k = dump["p_scores"].shape[1]
    xc = x - x.mean(0)
    u, s, vt = np.linalg.svd(xc, full_matrices=False)
    for i in range(k):  # sign rule: largest-magnitude loading positive
        if vt[i, np.argmax(np.abs(vt[i]))] < 0:
            vt[i], u[:, i] = -vt[i], -u[:, i]
    np.testing.assert_allclose(dump["p_components"], vt[:k], atol=1e-5)
    np.testing.assert_allclose(dump["p_scores"], xc @ vt[:k].T, atol=1e-4)
    var = s ** 2 / (len(x) - 1)
    np.testing.assert_allclose(dump["p_variance"], var[:k], rtol=1e-9)
    np.testing.assert_allclose(dump["p_total"][0], var.sum(), rtol=1e-9)
    np.testing.assert_allclose(var.sum(), xc.var(0, ddof=1).sum(), rtol=1e-9)
