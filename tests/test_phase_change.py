"""phase-change (examples/phase_change.c) and its plot script, on tiny runs.

The values are checked against independent recomputations from the run's own metrics
log (window tokens, fractions, the bump rule, the decision rules of the checks), not
against stored numbers. Environment (set by tests/meson.build): PHASE_CHANGE (the
executable), PLOT_PHASE_CHANGE (the script), INDUCT_BUILD_DIR (the meson build root).
"""
import json
import math
import os
import random
import re
import struct
import subprocess
import sys

import numpy as np
import pytest

EXE = os.environ["PHASE_CHANGE"]
PLOT = os.environ["PLOT_PHASE_CHANGE"]
BUILD = os.environ["INDUCT_BUILD_DIR"]

# d_model 8, one head, batch 1, 6 steps, evaluation every 2 steps on 4 sequences
TINY = ["--d-model", "8", "--heads", "1", "--batch", "1", "--steps", "6", "--eval-every", "2",
        "--eval-batch", "4", "--block-tokens", "4096", "--warmup", "2", "--no-estimate"]
MODELS = ["2L", "1L", "1L-smeared"]
CHECKS = ["two_layer_phase_change", "one_layer_no_phase_change",
          "smeared_one_layer_phase_change", "induction_heads_carry_icl"]


def run(args, **kw):
    return subprocess.run([EXE] + args, capture_output=True, text=True, timeout=120, **kw)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = random.Random(8)
    words = ("the and of to in that he shall unto for his a lord they be is him not them it "
             "with all thou thy was god which my me said but ye their have will").split()
    lines = []
    while sum(map(len, lines)) < 60000:
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(5, 15))) + ".\n")
    path = tmp_path_factory.mktemp("corpus") / "text.txt"
    path.write_text("".join(lines))
    return str(path)


@pytest.fixture(scope="module")
def runs(corpus, tmp_path_factory):
    out = {}
    for jobs in (1, 2):
        d = str(tmp_path_factory.mktemp(f"jobs{jobs}") / "run")
        r = run(["--text", corpus, "--out", d, "--jobs", str(jobs), "--models", ",".join(MODELS)]
                + TINY)
        assert r.returncode == 0, r.stderr
        out[jobs] = (d, r)
    return out


W = 5  # --icl-band default


def band(lbp, early=50, late=500, w=W):
    """The run's ICL estimator from a context-index average (phase_change.c, band_icl)."""
    lbp = np.asarray(lbp, dtype=np.float64)
    return float(lbp[late - 1 - w:late + w].mean() - lbp[early - 1 - w:early + w].mean())


def strip_timing(text):
    return re.sub(r'"elapsed_seconds":[^,}]*,?', "", text)


def test_jobs_do_not_change_results(runs):
    (d1, _), (d2, _) = runs[1], runs[2]
    m1 = open(os.path.join(d1, "metrics.jsonl")).read()
    m2 = open(os.path.join(d2, "metrics.jsonl")).read()
    assert m1 != "" and strip_timing(m1) == strip_timing(m2)
    for name in MODELS:  # the trained weights and optimizer state, byte for byte
        a = open(os.path.join(d1, name, "final.safetensors"), "rb").read()
        b = open(os.path.join(d2, name, "final.safetensors"), "rb").read()
        assert a == b, name


def test_same_training_without_the_program(runs, corpus, tmp_path):
    """The 2L model trained by the Python bindings' induct_train with no callback and the
    documented configuration gives the same metrics and weights: the flags mean what the
    docs say, and reading the log back in phase-change's progress callback does not disturb
    training."""
    sys.path.insert(0, os.path.join(BUILD, "bindings", "python"))
    import induct
    d, _ = runs[1]
    data = induct.Dataset.text_path(corpus, n_eval_windows=1024, val_fraction=0.1,
                                    block_tokens=4096, seed=0, bos=0)
    model = induct.Model(n_layers=2, d_model=8, n_heads=1, d_mlp=0, n_ctx=512, d_vocab=256,
                         positional="shortformer", layer_norm=1, smeared_keys=0, init="gpt2",
                         seed=0, n_threads=1)
    # the default sinusoidal positions, amplitude 3 (docs/phase-change.md)
    p = np.arange(512)[:, None]
    ang = p / 10000.0 ** (2 * np.arange(4)[None, :] / 8)
    w = np.empty((512, 8))
    w[:, 0::2], w[:, 1::2] = 3.0 * np.sin(ang), 3.0 * np.cos(ang)
    model.set("pos_embed.W_pos", w.astype(np.float32))
    opt = induct.Optimizer(model, "adamw", lr=1e-2, warmup_steps=2)
    log = str(tmp_path / "m.jsonl")
    opt.train(data, steps=6, batch=1, seq_len=512, eval_every=2, eval_batch=4,
              metrics=("loss", "icl_score", "loss_by_position", "prefix_matching",
                       "previous_token", "loss_vectors"), metrics_path=log)
    ours = [json.loads(l) for l in open(log)]
    theirs = [json.loads(l) for l in open(os.path.join(d, "2L", "metrics.jsonl"))]
    for r in ours + theirs:
        r.pop("elapsed_seconds")
    assert ours == theirs
    final = induct.Model.load(os.path.join(d, "2L", "final.safetensors"))
    for name in model.tensor_names():
        assert np.array_equal(np.asarray(model.get(name)), np.asarray(final.get(name))), name
    # the per-token loss vectors the program keeps for the PCA come from the same
    # evaluation set as the driver's log: their context average is the logged curve
    lv = model.loss_vectors(data, n_seq=4, seq_len=512, chunk=4)
    np.testing.assert_allclose(np.asarray(lv.average), theirs[-1]["loss_by_position"],
                               rtol=0, atol=1e-5)


def test_head_classes_and_ablation_match_bindings(corpus, tmp_path):
    """Head labels follow the classification rule with the given thresholds, and the
    ablation numbers equal those of the Python bindings on the saved final model. A tiny
    induction threshold makes heads "induction" so that the induction-set ablation runs."""
    sys.path.insert(0, os.path.join(BUILD, "bindings", "python"))
    import induct
    d = str(tmp_path / "abl")
    r = run(["--text", corpus, "--out", d] + TINY +
            ["--models", "2L", "--heads", "2", "--induction-threshold", "0.01",
             "--init-std", "0.5"])  # large weights: layer-1 patterns depend on layer 0
    assert r.returncode == 0, r.stderr
    m = json.load(open(os.path.join(d, "summary.json")))["models"]["2L"]
    hd, ab = m["heads"], m["ablation"]
    thr = {"previous_token": 0.4, "induction": 0.01, "duplicate": 0.4}
    assert hd["thresholds"] == thr
    induction = []
    for l in range(2):
        for h in range(2):
            scores = {"previous_token": hd["previous_token"][l][h],
                      "induction": hd["prefix_matching"][l][h],
                      "duplicate": hd["duplicate_token"][l][h]}
            cands = [(scores[k] - thr[k], -i, k) for i, k in
                     enumerate(("induction", "previous_token", "duplicate"))
                     if scores[k] >= thr[k]]
            want = max(cands)[2] if cands else "other"
            assert hd["labels"][l][h] == want
            if want == "induction":
                induction.append((l, h))
    assert induction and hd["induction"] == [f"{l}.{h}" for l, h in induction]

    data = induct.Dataset.text_path(corpus, n_eval_windows=1024, block_tokens=4096)
    model = induct.Model.load(os.path.join(d, "2L", "final.safetensors"))
    ev = dict(n_seq=4, seq_len=512, chunk=4)
    clean = band(model.loss_by_position(data, **ev))
    for key, pp in (("delta_icl_zero", False), ("delta_icl_zero_preserve_patterns", True)):
        delta = np.zeros((2, 2))
        for l in range(2):
            for h in range(2):
                with model.ablate([(l, h)], mode="zero", preserve_patterns=pp):
                    delta[l, h] = band(model.loss_by_position(data, **ev)) - clean
        np.testing.assert_allclose(delta, ab[key], rtol=0, atol=1e-5)
    assert ab["icl_clean"] == pytest.approx(clean, abs=1e-5)
    # keeping the patterns changes what ablating a layer-0 head does to layer 1
    assert np.abs(np.asarray(ab["delta_icl_zero"])[0]
                  - np.asarray(ab["delta_icl_zero_preserve_patterns"])[0]).max() > 1e-3
    for key, pp in (("icl_induction_heads_ablated", False),
                    ("icl_induction_heads_ablated_preserve_patterns", True)):
        with model.ablate(induction, mode="zero", preserve_patterns=pp):
            assert ab[key] == pytest.approx(band(model.loss_by_position(data, **ev)), abs=1e-5)
    if clean < 0:
        assert ab["fraction_removed_by_induction_heads"] == pytest.approx(
            (clean - ab["icl_induction_heads_ablated"]) / clean, abs=1e-6)
    else:
        assert ab["fraction_removed_by_induction_heads"] is None
    others = [(l, h) for l in range(2) for h in range(2) if (l, h) not in induction]
    if not others or clean >= 0:
        assert ab["max_fraction_removed_by_other_head"] is None


def walk_numbers(x, path="$"):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from walk_numbers(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from walk_numbers(v, f"{path}[{i}]")
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        yield path, x


def records_of(d):
    with open(os.path.join(d, "metrics.jsonl")) as f:
        lines = [l for l in f.read().split("\n") if l]
    for l in lines:
        assert l.startswith('{"model":"'), l[:40]
    return [json.loads(l) for l in lines]


def no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), f"duplicate keys: {keys}"
    return dict(pairs)


def test_outputs_complete_and_finite(runs):
    d, r = runs[2]
    s = json.load(open(os.path.join(d, "summary.json")), object_pairs_hook=no_duplicate_keys)
    assert s["model_order"] == ["2L", "1L-smeared", "1L"]  # longest first
    assert set(s["models"]) == set(MODELS)
    assert set(s["checks"]) == set(CHECKS)
    for path, v in walk_numbers(s):
        assert math.isfinite(v), path
    recs = records_of(d)
    for rec in recs:
        for path, v in walk_numbers(rec):
            assert math.isfinite(v), path
    for name in MODELS:
        mine = [x for x in recs if x["model"] == name]
        assert [x["step"] for x in mine] == [0, 2, 4, 6]
        for key in ("eval_loss", "icl_score", "loss_by_position", "prefix_matching_score",
                    "previous_token_score", "loss_vectors"):
            assert all(key in x for x in mine), key
        assert len(mine[0]["loss_by_position"]) == 511
        for f in ("final.safetensors", "ckpt-0.safetensors", "metrics.jsonl"):
            assert os.path.getsize(os.path.join(d, name, f)) > 0
        # the per-model log is the merged one without the "model" key
        own = [json.loads(l) for l in open(os.path.join(d, name, "metrics.jsonl")) if l.strip()]
        assert [dict(x, model=name) for x in own] == mine
    md = open(os.path.join(d, "summary.md")).read()
    assert "## Checks" in md and all(f"## {n} " in md for n in MODELS)
    assert "## Checks" in r.stdout and d in r.stdout and "plot_phase_change.py" in r.stdout


def window_rule_numbers(s, name, recs):
    m = s["models"][name]
    cfg = s["config"]["training"]
    w = m["window"]
    per_step = cfg["batch"] * cfg["seq_len"]
    if w["found"]:
        assert w["start_tokens"] == pytest.approx(w["start_step"] * per_step)
        assert w["end_tokens"] == pytest.approx(w["end_step"] * per_step)
        assert w["fraction_of_run"] == pytest.approx(
            (w["end_step"] - w["start_step"]) / cfg["steps"])
    mine = [x for x in recs if x["model"] == name]
    # the window and the checks use the band estimator; the single-token score is the
    # driver's icl_score (docs/definitions.md), which equals the curve's L[499] - L[49]
    assert m["icl_after"] == pytest.approx(band(mine[-1]["loss_by_position"]), abs=1e-5)
    assert m["icl_token_after"] == pytest.approx(mine[-1]["icl_score"], abs=1e-12)
    lbp = mine[-1]["loss_by_position"]
    assert mine[-1]["icl_score"] == pytest.approx(lbp[499] - lbp[49], abs=1e-5)
    before = [x for x in mine if x["step"] == m["icl_before_step"]]
    assert len(before) == 1
    assert m["icl_before"] == pytest.approx(band(before[0]["loss_by_position"]), abs=1e-5)
    assert m["icl_token_before"] == pytest.approx(before[0]["icl_score"], abs=1e-12)
    return m


def test_numbers_match_metrics_and_rules(runs):
    d, _ = runs[2]
    s = json.load(open(os.path.join(d, "summary.json")))
    recs = records_of(d)
    rules = s["rules"]
    ablation_ok = []
    for name in MODELS:
        m = window_rule_numbers(s, name, recs)
        mine = [x for x in recs if x["model"] == name]
        L = m["n_layers"]
        # ICL jump rule, recomputed
        w = m["window"]
        jump = (w["found"] and w["fraction_of_run"] <= rules["window_max_fraction"]
                and abs(m["icl_before"]) < rules["icl_before_max"]
                and m["icl_after"] <= -rules["icl_after_min"])
        pm_last = np.array([np.asarray(x["prefix_matching_score"])[L - 1] for x in mine])
        assert m["pm_after"] == pytest.approx(pm_last[-1].max(), abs=1e-7)
        pmh = m["pm_head"]
        lh, hh = map(int, pmh["head"].split("."))
        assert lh == L - 1 and pm_last[-1, hh] == pytest.approx(pm_last[-1].max(), abs=0)
        pm_any = max(np.asarray(x["prefix_matching_score"]).max() for x in mine)
        assert m["pm_max_any_head_any_step"] == pytest.approx(pm_any, abs=1e-7)
        pm_jump = (pmh["before"] <= rules["pm_near_chance"] and pmh["after"] > rules["pm_high"]
                   and pmh["coincides_with_icl_window"])
        # bump rule, recomputed from eval_loss
        b = m["bump"]
        if not w["found"]:
            assert b["bump"] is None
        else:
            t = [x["step"] for x in mine]
            loss = [x["eval_loss"] for x in mine]
            sl = [(loss[i + 1] - loss[i]) / (t[i + 1] - t[i]) for i in range(len(t) - 1)]
            before = [sl[i] for i in range(len(sl)) if t[i + 1] <= w["start_step"]]
            inside = [sl[i] for i in range(len(sl))
                      if t[i] < w["end_step"] and t[i + 1] > w["start_step"]]
            if before and inside:
                assert b["bump"] == (min(inside) < before[-1])
            else:
                assert b["bump"] is None
        # ablation fractions, recomputed from the per-head deltas
        ab = m["ablation"]
        labels = m["heads"]["labels"]
        dz = np.asarray(ab["delta_icl_zero"])
        assert dz.shape == (L, 1)
        assert np.asarray(ab["delta_icl_zero_preserve_patterns"]).shape == (L, 1)
        dpp = np.asarray(ab["delta_icl_zero_preserve_patterns"])
        if ab["icl_clean"] < 0:
            others = [-dz[l, h] / ab["icl_clean"] for l in range(L) for h in range(1)
                      if labels[l][h] != "induction"]
            others_pp = [-dpp[l, h] / ab["icl_clean_preserve_patterns"] for l in range(L)
                         for h in range(1) if labels[l][h] != "induction"]
            if others:
                assert ab["max_fraction_removed_by_other_head"] == pytest.approx(max(others))
                assert ab["max_fraction_removed_by_other_head_preserve_patterns"] == \
                    pytest.approx(max(others_pp))
        if ab["icl_induction_heads_ablated"] is not None and ab["icl_clean"] < 0:
            assert ab["fraction_removed_by_induction_heads"] == pytest.approx(
                (ab["icl_clean"] - ab["icl_induction_heads_ablated"]) / ab["icl_clean"])
        # the checks follow their rules
        c = s["checks"]
        n_ind = sum(lab == "induction" for row in labels for lab in row)
        if n_ind:
            frac = ab["fraction_removed_by_induction_heads"]
            other = ab["max_fraction_removed_by_other_head_preserve_patterns"]
            ok = (ab["icl_clean"] < 0 and frac is not None
                  and frac >= rules["ablation_most"]
                  and (other is None or other < rules["ablation_most"]))
            ablation_ok.append(ok)
        if name == "2L":
            assert c["two_layer_phase_change"]["passed"] == (jump and pm_jump)
        elif name == "1L":
            assert c["one_layer_no_phase_change"]["passed"] == (
                not jump and pm_any <= rules["pm_high"])
        else:
            assert c["smeared_one_layer_phase_change"]["passed"] == (jump and pm_jump)
        # PCA: one point per evaluation, in training order
        tr = m["pca_trajectory"]
        assert [p["step"] for p in tr] == [x["step"] for x in mine]
    # the ablation check: decided on every model with induction heads
    c = s["checks"]["induction_heads_carry_icl"]
    assert c["passed"] == (bool(ablation_ok) and all(ablation_ok))
    assert c["numbers"]["models_with_induction_heads"] == len(ablation_ok)
    ratio = s["pca"]["explained_variance_ratio"]
    assert 0 <= ratio[1] <= ratio[0] <= 1 and ratio[0] + ratio[1] <= 1 + 1e-9
    # the PCA, recomputed with NumPy from the logged loss vectors: one row per evaluation
    # of every model (model order, then steps), columns centred
    order = s["model_order"]
    X = np.array([x["loss_vectors"] for n in order for x in recs if x["model"] == n])
    assert X.shape == (sum(len(s["models"][n]["pca_trajectory"]) for n in order), 4)
    Xc = X - X.mean(axis=0)
    U, S, _ = np.linalg.svd(Xc, full_matrices=False)
    np.testing.assert_allclose(ratio[:2], (S**2 / (S**2).sum())[:2], rtol=1e-4, atol=1e-7)
    ours = np.array([[p["pc1"], p["pc2"]] for n in order
                     for p in s["models"][n]["pca_trajectory"]])
    for k in range(2):
        ref = U[:, k] * S[k]
        sign = 1.0 if ref @ ours[:, k] >= 0 else -1.0
        np.testing.assert_allclose(ours[:, k], sign * ref, rtol=0, atol=1e-4 * S[0])
    for c in s["checks"].values():
        assert c["status"] in ("pass", "fail") and c["passed"] == (c["status"] == "pass")


def read_safetensors(path, name):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data_start = 8 + n
        e = header[name]
        a, b = e["data_offsets"]
        f.seek(data_start + a)
        return np.frombuffer(f.read(b - a), dtype="<f4").reshape(e["shape"])


def test_sinusoidal_positions_and_short_context(corpus, tmp_path):
    d = str(tmp_path / "sin")
    r = run(["--text", corpus, "--out", d, "--models", "1L", "--pos-init", "sinusoidal",
             "--pos-amp", "0.5", "--seq-len", "128", "--allow-short"] + TINY)
    assert r.returncode == 0, r.stderr
    w = read_safetensors(os.path.join(d, "1L", "ckpt-0.safetensors"), "pos_embed.W_pos")
    p = np.arange(128)[:, None]
    i = np.arange(4)[None, :]
    ang = p / 10000.0 ** (2 * i / 8)
    ref = np.empty((128, 8))
    ref[:, 0::2] = 0.5 * np.sin(ang)
    ref[:, 1::2] = 0.5 * np.cos(ang)
    np.testing.assert_allclose(w, ref, rtol=0, atol=1e-6)
    s = json.load(open(os.path.join(d, "summary.json")))
    assert s["config"]["model"]["pos_init"] == "sinusoidal"
    assert s["config"]["model"]["pos_amp"] == 0.5
    # short context: the score is token 122 (the last whose ±5 band fits) minus token 12,
    # from the logged curve
    ev = s["config"]["evaluation"]
    assert (ev["icl_early_token"], ev["icl_late_token"]) == (12, 122)
    recs = records_of(d)
    lbp = recs[-1]["loss_by_position"]
    assert s["models"]["1L"]["icl_after"] == pytest.approx(band(lbp, 12, 122), abs=2e-5)
    assert s["models"]["1L"]["icl_token_after"] == pytest.approx(lbp[121] - lbp[11], abs=2e-5)
    assert s["checks"]["two_layer_phase_change"]["status"] == "not_run"


@pytest.mark.parametrize("args,needle", [
    (["--bogus", "1"], "unknown flag"),
    (["--steps"], "needs a value"),
    (["--models", "2L,3X"], "not <n>L"),
    (["--models", "0L"], "not <n>L"),
    (["--steps", "abc"], "non-negative integer"),
    (["--lr", "fast"], "needs a number"),
    (["--seq-len", "256"], "below 512"),
    (["--smooth", "2"], "odd"),
    (["--format", "u8"], "--format"),
    (["--positional", "none", "--pos-init", "sinusoidal"], "needs positions"),
])
def test_bad_input(corpus, tmp_path, args, needle):
    r = run(["--text", corpus, "--out", str(tmp_path / "x")] + args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr and "usage:" in r.stderr
    assert not os.path.exists(tmp_path / "x" / "summary.json")


def test_bad_data_paths(tmp_path, corpus):
    for args, needle in ([["--text", str(tmp_path / "missing.txt")], "cannot read"],
                         [["--tokens", str(tmp_path)], "not a regular file"],
                         [[], "exactly one of"],
                         [["--text", corpus, "--tokens", corpus], "exactly one of"]):
        r = run(args + ["--out", str(tmp_path / "y")])
        assert r.returncode == 2 and needle in r.stderr and "usage:" in r.stderr, r.stderr


def test_library_error_exit_1(tmp_path):
    # a token file whose size is not a whole number of uint16 tokens: the library refuses it
    bad = tmp_path / "odd.bin"
    bad.write_bytes(b"\x01\x00\x02")
    r = run(["--tokens", str(bad), "--format", "u16", "--out", str(tmp_path / "z")])
    assert r.returncode == 1 and "INDUCT_EFORMAT" in r.stderr, r.stderr


def test_script_empty_corpus(tmp_path):
    """scripts/phase-change.sh refuses an empty corpus before sentencepiece sees it (exit 2,
    a one-line message) and leaves no tokenizer files behind."""
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "phase-change.sh")
    data = tmp_path / "data"
    r = subprocess.run(["bash", script, "--corpus", str(empty), "--data", str(data),
                        "--build", BUILD, "--no-plot", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "has no text to train a tokenizer on" in r.stderr
    assert not any(p.name.endswith((".model", ".vocab", ".u16")) for p in data.iterdir())
    assert not os.path.exists(tmp_path / "out" / "summary.json")


def test_plots(runs):
    d, _ = runs[2]
    r = subprocess.run([sys.executable, PLOT, d, "--build", BUILD], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for name in ("phase_change.png", "attention.png", "ablation.png", "pca.png"):
        p = os.path.join(d, name)
        data = open(p, "rb").read()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000, name
        w, h = struct.unpack(">II", data[16:24])
        assert w > 100 and h > 100, name
