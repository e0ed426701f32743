"""examples/llc_stages.py and examples/llc_calibrate.py on a tiny phase-change run, and
the stage rule on curves whose critical points are known.

Environment (tests/meson.build): STUDY_RUNNER (study/runner.py, the main job's stages), LLC_EXAMPLES (the
examples directory of the source tree), INDUCT_BUILD_DIR (the meson build root).
"""
import json
import math
import os
import random
import subprocess
import sys

import numpy as np
import pytest

RUNNER = os.environ["STUDY_RUNNER"]
EXAMPLES = os.environ["LLC_EXAMPLES"]
BUILD = os.environ["INDUCT_BUILD_DIR"]
sys.path.insert(0, EXAMPLES)
import llc_run  # noqa: E402
import llc_stages  # noqa: E402

TINY = ["--d-model", "8", "--heads", "2", "--batch", "1", "--steps", "8", "--eval-every", "4",
        "--eval-batch", "4", "--block-tokens", "4096", "--warmup", "2", "--no-estimate",
        "--icl-windows", "64", "--icl-groups", "8", "--ablation-windows", "32",
        "--window-windows", "48", "--snapshots", "4", "--models", "2L,1L"]
SAMPLER = ["--chains", "2", "--draws", "3", "--burnin", "1", "--batch", "1", "--seq-len", "64",
           "--epsilon", "1e-4", "--gamma", "100", "--nbeta", "10", "--jobs", "2"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    rng = random.Random(3)
    words = "the and of to in that he shall unto for his a lord they be is him not".split()
    text = "".join(" ".join(rng.choice(words) for _ in range(rng.randint(5, 15))) + ".\n"
                   for _ in range(5000))
    base = tmp_path_factory.mktemp("llc")
    (base / "text.txt").write_text(text)
    out = str(base / "run")
    r = subprocess.run([sys.executable, RUNNER, "--build", BUILD, "--text",
                        str(base / "text.txt"), "--out", out] + TINY,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def tool(name, *args):
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args, "--build", BUILD],
                          capture_output=True, text=True, timeout=600)


def test_stages_tool(run_dir):
    r = tool("llc_stages.py", run_dir, "--heads", *SAMPLER)
    assert r.returncode == 0, r.stderr
    doc = json.load(open(os.path.join(run_dir, "llc", "llc.json")))
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    tps = summary["config"]["training"]["tokens_per_step"]
    for name, layers in (("2L", 2), ("1L", 1)):
        md = doc["models"][name]
        steps = [s for s, _ in llc_run.checkpoints(run_dir, name, 8)]
        assert [e["step"] for e in md["estimates"]] == steps == [0, 2, 4, 6, 8]
        assert all(e["tokens"] == e["step"] * tps for e in md["estimates"])
        assert all(math.isfinite(e["llc"]) and len(e["llc_chains"]) == 2
                   for e in md["estimates"])
        heads = {e["head"] for e in md["head_estimates"]}
        assert heads == {f"{l}.{h}" for l in range(layers) for h in range(2)}
        # a head's refined estimate samples that head's four matrices only: 4 d_model d_head
        assert all(e["n_sampled"] == 4 * 8 * 4 for e in md["head_estimates"])
    # the estimates are the library's, with the tool's settings
    induct = llc_run.find_induct(BUILD)
    m = induct.Model.load(os.path.join(run_dir, "2L", "ckpt-4.safetensors"))
    data = llc_run.open_data(induct, summary)
    direct = m.llc(data, chains=2, draws=3, burnin=1, batch=1, seq_len=64, epsilon=1e-4,
                   gamma=100, nbeta=10, paired=True, max_increase=2.0)
    got = next(e for e in doc["models"]["2L"]["estimates"] if e["step"] == 4)
    assert got["llc_chains"] == direct.chain_llc.tolist()
    png = open(os.path.join(run_dir, "llc", "llc.png"), "rb").read(8)
    assert png == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(os.path.join(run_dir, "llc", "llc_heads.png")) > 10000


def test_calibration_tool(run_dir):
    out = os.path.join(run_dir, "cal")
    r = tool("llc_calibrate.py", run_dir, "--epsilons", "1e-4,1e3", "--nbetas", "10,tokens",
             "--gammas", "100", "--out", out, *SAMPLER)
    assert r.returncode == 0, r.stderr
    doc = json.load(open(os.path.join(out, "calibration.json")))
    cells = {(c["epsilon"], c["nbeta_setting"]): c for c in doc["cells"]}
    assert len(cells) == 4 and doc["step"] == 8
    # ε = 1000 sends every chain to infinity: reported as diverged, not as a number
    assert cells[(1e3, "10")]["diverged"] and "diverged" in cells[(1e3, "10")]["message"]
    ok = cells[(1e-4, "10")]
    assert not ok["diverged"] and np.array(ok["traces"]).shape == (2, 3)
    # the tokens rule: m = 1 sequence x 63 scored tokens
    assert cells[(1e-4, "tokens")]["nbeta"] == pytest.approx(63 / math.log(63), rel=1e-12)


def test_bad_run_dir(tmp_path):
    r = tool("llc_stages.py", str(tmp_path))
    assert r.returncode == 2 and "summary.json" in r.stderr


def test_stage_rule_finds_known_critical_points():
    # a curve with a peak at 10^6 and a trough at 10^7 tokens (in log10 units 6 and 7),
    # sampled at 40 log-spaced points with small noise: the smoothed curve's critical
    # points are found within the smoothing's resolution
    x = np.linspace(5.0, 8.0, 40)
    y = 100 + 20 * np.sin(math.pi * (x - 5.5)) + np.random.default_rng(0).normal(0, 0.5, 40)
    st, _, _ = llc_stages.stages(x, y, 0.1, 0.5)
    kinds = [(round(s["log10_tokens"], 1), s["kind"]) for s in st]
    assert [k for _, k in kinds] == ["peak", "trough"]
    assert abs(st[0]["log10_tokens"] - 6.0) < 0.1 and abs(st[1]["log10_tokens"] - 7.0) < 0.1
    assert all(s["significant"] for s in st)
    # a monotone curve has none; a bump smaller than the noise is reported as within it
    st, _, _ = llc_stages.stages(x, 10 * x, 0.1, 0.5)
    assert st == []
    bump = np.where(x < 6.5, x, 13 - x)  # a peak of height 0.5 at 6.5
    st, _, _ = llc_stages.stages(x, bump, 0.1, 1.0)
    assert len(st) == 1 and st[0]["kind"] == "peak" and not st[0]["significant"]
    # a fall of 20 into a trough and a rise out of it of 1.5, with noise 1: the slope
    # changes sign, but the rise is within the noise, so the trough is too
    trough = np.where(x < 6.5, 20 * (6.5 - x), x - 6.5)
    st, _, _ = llc_stages.stages(x, trough, 0.1, 1.0)
    assert [s["kind"] for s in st] == ["trough"] and not st[0]["significant"]
    # the same with a rise of 3: significant
    st, _, _ = llc_stages.stages(x, np.where(x < 6.5, trough, 2 * trough), 0.1, 1.0)
    assert [s["kind"] for s in st] == ["trough"] and st[0]["significant"]
