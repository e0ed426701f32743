"""The portable matrix product (-Dgemm=portable, the WebAssembly build's) against the
BLAS build: tests/gemm_parity.c linked against each prints the per-token losses of a
forward pass, every gradient of one backward pass, the losses of 20 AdamW steps and the
induction scores; they must agree within the PyTorch parity test's tolerance
(|a - b| <= 1e-4 |b| + 1e-6 * max|b| per tensor, the scale of a gradient tensor being at
least 1 % of the model's largest gradient) for the forward and the gradients, and
within 1e-3 relative for the 20-step training curve (20 updates amplify rounding).

usage: python3 test_gemm_parity.py GEMM_PARITY_BLAS GEMM_PARITY_PORTABLE"""
import json
import subprocess
import sys

import numpy as np

RTOL, ATOL_REL = 1e-4, 1e-6


def run(exe):
    return json.loads(subprocess.run([exe], check=True, capture_output=True, text=True).stdout)


def close(what, got, ref, rtol=RTOL, atol_rel=ATOL_REL, scale=None):
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, what
    if scale is None:
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    err = np.abs(got - ref) - (rtol * np.abs(ref) + atol_rel * scale)
    worst = float(np.max(err))
    if worst > 0:
        i = int(np.argmax(err))
        sys.exit(f"{what}: element {i}: portable {got.flat[i]!r}, BLAS {ref.flat[i]!r}")
    return float(np.max(np.abs(got - ref)))


def main():
    blas, port = run(sys.argv[1]), run(sys.argv[2])
    n_diff = 0
    for mb, mp in zip(blas["models"], port["models"], strict=True):
        tag = f"{mb['layers']} layer(s), d_mlp {mb['d_mlp']}"
        close(f"{tag}: losses", mp["losses"], mb["losses"])
        # gradients that are zero in exact arithmetic (b_K: softmax ignores a constant
        # shift of the scores) hold rounding noise only: their absolute tolerance is taken
        # from the model's largest gradient
        gmax = max(float(np.max(np.abs(g))) for g in mb["grads"].values())
        for name, g in mb["grads"].items():
            close(f"{tag}: gradient {name}", mp["grads"][name], g,
                  scale=max(gmax * 1e-2, float(np.max(np.abs(g)))))
            n_diff += mp["grads"][name] != g
        d = close(f"{tag}: training losses", mp["train"], mb["train"], rtol=1e-3, atol_rel=0)
        close(f"{tag}: induction scores", mp["induction"], mb["induction"], rtol=1e-3,
              atol_rel=1e-4)
        print(f"{tag}: agree; largest difference of the 20 training losses {d:.3g} nats")
    # the two builds must really differ (else this test compared one path with itself)
    if n_diff == 0:
        sys.exit("every gradient is bit-identical: the portable product was not used")
    print(f"{n_diff} gradient tensors differ in their last bits, all within tolerance")


if __name__ == "__main__":
    main()
