"""The small-model study's cross-model report (study/zoo_report.py and its modules;
docs/zoo.md): each analysis against values computed by hand or independently on small
synthetic inputs, the checks' PASS and FAIL on synthetic rows, the report refusing groups
that are not one study, and one tiny zoo end to end (scripts/zoo.sh: 14 models of d_model
8 for a few steps on a small synthetic text) that ends with zoo.json, zoo.md and every
figure. Environment (tests/meson.build): ZOO_SH, ZOO_REPORT, INDUCT_BUILD_DIR."""
import copy
import json
import math
import os
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tiny_text import write_tiny_text

ZOO_SH = os.environ["ZOO_SH"]
REPORT = os.environ["ZOO_REPORT"]
BUILD = os.environ["INDUCT_BUILD_DIR"]
sys.path.insert(0, os.path.dirname(os.path.abspath(REPORT)))
sys.path.insert(0, os.path.join(BUILD, "bindings", "python"))
import induct  # noqa: E402
import zoo_analyses as za  # noqa: E402
import zoo_checks  # noqa: E402
import zoo_model  # noqa: E402
import zoo_report  # noqa: E402

ALL = ["1L", "2L", "3L", "1L-smeared", "2L-smeared", "4L", "5L", "6L", "1L-mlp", "2L-mlp",
       "3L-mlp", "4L-mlp", "5L-mlp", "6L-mlp"]


class NumpyStats:
    """batch means and paired differences in NumPy (sd / sqrt(n), ddof 1)."""

    def batch_means(self, v):
        v = np.asarray(v, dtype=float)
        return v.mean(), (v.std(ddof=1) / math.sqrt(len(v)) if len(v) > 1 else math.nan)

    def paired_difference(self, a, b):
        return self.batch_means(np.asarray(a, dtype=float) - np.asarray(b, dtype=float))


# ---- token classes ----

def test_token_classes_by_hand():
    #        0  1  2  3  4  5  6  7  8  9 10
    toks = [5, 1, 2, 3, 1, 2, 3, 1, 2, 4, 9]
    # token 6 (3) follows "1 2", seen before as tokens 1-2 followed by 3: continues; tokens
    # 7 and 8 likewise ("2 3" -> 1, "3 1" -> 2); token 9 (4) follows "1 2" but 3 followed it
    # every time before: breaks; token 10 follows "2 4", never seen: rest
    R, C, B = za.REST, za.CONTINUES, za.BREAKS
    assert za.token_classes(toks, 2) == [R, R, R, R, R, C, C, C, B, R]
    # overlapping occurrences: "7 7" followed by 7 at token 2, so token 3 continues it
    assert za.token_classes([7, 7, 7, 7], 2) == [R, R, C]
    # "1 2" is followed by 3, then broken by 4 (token 5); later either one continues it
    assert za.token_classes([1, 2, 3, 1, 2, 4, 1, 2, 3, 1, 2, 4], 2) == \
        [R, R, R, R, B, R, R, C, C, C, C]
    # k = 1: a token after a repeated token
    assert za.token_classes([1, 2, 1, 2, 1, 3], 1) == [R, R, C, C, B]
    assert za.token_classes([4], 2) == []
    with pytest.raises(ValueError):
        za.token_classes([1, 2], 0)


def naive_classes(toks, k):
    """The definition word for word, O(T^2): an earlier j < t with the same k preceding
    tokens; continues if any such j has toks[j] == toks[t]."""
    out = []
    for t in range(1, len(toks)):
        js = [j for j in range(k, t) if toks[j - k:j] == toks[t - k:t]] if t >= k else []
        out.append(za.REST if not js else
                   za.CONTINUES if any(toks[j] == toks[t] for j in js) else za.BREAKS)
    return out


def test_token_classes_match_the_definition_on_random_text():
    rng = random.Random(3)
    for _ in range(20):
        toks = [rng.randrange(4) for _ in range(rng.randrange(2, 80))]
        for k in (1, 2, 3):
            assert za.token_classes(toks, k) == naive_classes(toks, k)


def test_class_changes_by_hand():
    R, C, B = za.REST, za.CONTINUES, za.BREAKS
    delta = [[1.0, 3.0, -1.0, 0.0], [2.0, 2.0, -3.0, 1.0], [0.5, 0.0, 0.5, 0.5]]
    cls = [[C, C, B, R], [C, R, B, R], [R, R, R, R]]
    got = za.class_changes(delta, cls, induct)
    # per window: continues 2, 2, -; breaks -1, -3, -; rest 0, 1.5, 0.375
    assert got[C]["mean"] == pytest.approx(2.0) and got[C]["windows"] == 2
    assert got[C]["se"] == pytest.approx(0.0, abs=1e-12) and got[C]["tokens"] == 3
    assert got[B]["mean"] == pytest.approx(-2.0)
    assert got[B]["se"] == pytest.approx(np.std([-1, -3], ddof=1) / math.sqrt(2))
    rest = [0.0, 1.5, 0.375]
    assert got[R]["mean"] == pytest.approx(np.mean(rest))
    assert got[R]["se"] == pytest.approx(np.std(rest, ddof=1) / math.sqrt(3))
    d = np.array([2 - 0.0, 2 - 1.5])
    cm = got["continues_minus_rest"]
    assert cm["mean"] == pytest.approx(d.mean()) and cm["windows"] == 2
    assert cm["se"] == pytest.approx(d.std(ddof=1) / math.sqrt(2))
    with pytest.raises(ValueError):
        za.class_changes([[1.0]], [[C, C]], induct)


# ---- slopes, rank correlation, the PCA turn, windows ----

def test_log_slope_known_curve_and_numpy():
    t = [1e5, 1e6, 1e7, 1e8]
    b, se, n = za.log_slope(t, [3 - 0.5 * math.log10(x) for x in t])
    assert b == pytest.approx(-0.5) and se == pytest.approx(0, abs=1e-12) and n == 4
    rng = np.random.default_rng(0)
    x = np.linspace(5, 7.5, 9)
    y = 4 - 0.3 * x + rng.normal(0, 0.05, 9)
    b, se, n = za.log_slope(10 ** x, y)
    p, cov = np.polyfit(x, y, 1, cov=True)
    assert b == pytest.approx(p[0]) and se == pytest.approx(math.sqrt(cov[0, 0]))
    b, se, n = za.log_slope([1e6, 1e7], [2.0, 1.0])
    assert b == pytest.approx(-1.0) and math.isnan(se) and n == 2
    assert math.isnan(za.log_slope([0, 1e6], [1, 2])[0])  # tokens 0 is left out


def test_slopes_around_a_window():
    t = [0, 1e6, 2e6, 4e6, 8e6, 16e6]
    y = [9, 3.0, 2.7, 2.4, 1.5, 0.6]  # a steeper fall after the window (4e6, 8e6)
    s = za.slopes_around(t, y, 4e6, 8e6)
    assert s["before"]["n"] == 3 and s["after"]["n"] == 2
    assert s["before"]["slope"] == pytest.approx(-0.3 / math.log10(2))
    assert s["after"]["slope"] == pytest.approx(-0.9 / math.log10(2))
    assert s["before"]["tokens_from"] == 1e6 and s["after"]["tokens_to"] == 16e6


def test_spearman():
    assert za.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1)
    assert za.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert za.spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(
        np.corrcoef([1, 2.5, 2.5, 4], [1, 2, 3, 4])[0, 1])
    assert math.isnan(za.spearman([1, 1], [1, 2]))


def test_pca_turn():
    pts = [(0, 0), (1, 0), (2, 0), (2, 1), (2, 2), (2, 3)]
    t = za.pca_turn(pts, [0, 1, 2, 3, 4, 5], warmup_step=-1)
    assert t["step"] == 2 and t["angle_degrees"] == pytest.approx(90)
    # the warm-up's points are not considered
    assert za.pca_turn(pts, [0, 1, 2, 3, 4, 5], warmup_step=2)["step"] is None
    # a small wiggle late in training is no turn (moves below 5 % of the path)
    pts2 = [(0, 0), (10, 0), (20, 0), (20.1, 0.1), (20.2, 0)]
    assert za.pca_turn(pts2, range(5), -1)["step"] is None
    # a straight line: no turn at all (below 45 degrees)
    assert za.pca_turn([(0, 0), (1, 1), (2, 2.1), (3, 3)], range(4), -1)["step"] is None


def test_windows_close_and_evaluations():
    assert za.close_to((9e6, 20e6), (5e6, 10e6), 2)        # overlaps up to 20e6
    assert za.close_to((1e6, 2.5e6), (5e6, 10e6), 2)       # reaches 2.5e6 = 5e6 / 2
    assert not za.close_to((1e6, 2.4e6), (5e6, 10e6), 2)
    assert not za.close_to((20.1e6, 30e6), (5e6, 10e6), 2)
    assert za.evaluation_at_or_before([0, 250, 500], 499.9) == 250
    assert za.evaluation_at_or_after([0, 250, 500], 250.1) == 500
    assert za.family("3L-mlp") == "mlp" and za.family("2L-smeared") == "smeared"
    assert za.display_order(["2L-mlp", "1L-smeared", "2L", "1L"]) == \
        ["1L", "2L", "1L-smeared", "2L-mlp"]


def test_shared_pca_against_numpy_svd():
    """report.pca_section on every evaluation of several models (the zoo's shared PCA)
    equals NumPy's SVD of the centred stack, up to each component's sign (fixed by the
    library: the largest-magnitude entry of each component positive)."""
    import report
    rng = np.random.default_rng(1)
    runs, order = {}, ["2L", "1L", "3L-mlp"]
    for i, n in enumerate(order):
        recs = [{"step": s, "loss_vectors": list(rng.normal(3 + i, 1, 6))} for s in (0, 2, 4)]
        runs[n] = {"records": recs}
    cfg = {"evaluation": {"eval_batch": 6}, "training": {"batch": 2, "seq_len": 10}}
    pca, traj = report.pca_section(induct, runs, order, cfg)
    X = np.array([r["loss_vectors"] for n in order for r in runs[n]["records"]],
                 dtype=np.float32).astype(np.float64)
    Xc = X - X.mean(0)
    U, S, Vt = np.linalg.svd(Xc, full_matrices=False)
    for k in range(2):
        v = Vt[k] * np.sign(Vt[k][np.argmax(np.abs(Vt[k]))])
        scores = Xc @ v
        got = [p["pc%u" % (k + 1)] for n in order for p in traj[n]]
        np.testing.assert_allclose(got, scores, rtol=1e-4, atol=1e-4)
        assert pca["explained_variance"][k] == pytest.approx(S[k] ** 2 / (len(X) - 1), rel=1e-4)
    assert [p["tokens"] for p in traj["1L"]] == [0, 40, 80]


# ---- the checks on synthetic rows ----

def synthetic_rows():
    """Rows where every check passes: windows around 5-10 M tokens, final ICL -0.2."""
    g = [-0.2 + 0.01 * ((i % 5) - 2) for i in range(32)]
    rows = {}
    for n in ALL:
        L = za.layers_of(n)
        one = L == 1 and za.family(n) != "smeared"
        start = 2e6 if za.family(n) == "smeared" else 5e6 + 0.2e6 * L
        rows[n] = {
            "name": n, "family": za.family(n), "n_layers": L,
            "window": {"found": not one, "start_tokens": None if one else start,
                       "end_tokens": None if one else start * 1.8},
            "icl_after": 0.0 if one else float(np.mean(g)),
            "icl_after_se": 0.002, "icl_after_groups": [0.0] * 32 if one else list(g),
            "pm_best_any_layer": 0.03 if one else 0.6, "induction_threshold": 0.4,
            "induction_heads": [] if one else [{"head": f"{L - 1}.0", "layer": L - 1}],
            "ablation": {"fraction_removed": math.nan if one else 0.8,
                         "fraction_removed_se": 0.1},
        }
    return rows


TOKENS = {"continues": {"mean": 0.9, "se": 0.1}, "breaks": {"mean": -0.3, "se": 0.1},
          "rest": {"mean": 0.2, "se": 0.05},
          "continues_minus_rest": {"mean": 0.7, "se": 0.1},
          "breaks_minus_rest": {"mean": -0.5, "se": 0.1}}


def statuses(rows, tokens=TOKENS):
    return {c["id"]: c["status"] for c in zoo_checks.judge(rows, tokens, NumpyStats())}


def test_checks_pass_on_the_synthetic_study():
    assert set(statuses(synthetic_rows()).values()) == {"pass"}


def put(rows, name, path, value):
    d = rows[name]
    keys = path.split(".")
    for k in keys[:-1]:
        d = d[k]
    d[keys[-1]] = value


# each rule broken on its own: (model, field, value, the checks that must fail)
BREAK = [
    ("4L-mlp", "window.found", False, {"C1", "C3"}),       # a deep model without a window
    ("5L", "pm_best_any_layer", 0.39, {"C1"}),             # no head reaches the threshold
    ("1L", "pm_best_any_layer", 0.41, {"C1"}),             # a 1-layer head
    ("1L-mlp", "window.found", True, {"C1"}),              # a 1-layer window
    ("2L-smeared", "window.start_tokens", 5.5e6, {"C2"}),  # not before 2L's (5.4e6)
    ("2L-smeared", "window.found", False, {"C1", "C2", "C3"}),
    ("6L", "window.start_tokens", 19.5e6, {"C3"}),         # starts past 2 * end_2L (19.44e6)
    ("3L-mlp", "window.end_tokens", 2.69e6, {"C3"}),       # ends before start_2L / 2 (2.7e6)
    ("3L", "icl_after_groups", [x + 0.11 for x in synthetic_rows()["3L"]["icl_after_groups"]],
     {"C4"}),                                              # 0.11 nats above 2L's
    ("4L", "ablation.fraction_removed", 0.5, {"C5"}),      # not more than half
]


@pytest.mark.parametrize("name,path,value,failing", BREAK)
def test_each_check_can_fail(name, path, value, failing):
    rows = synthetic_rows()
    put(rows, name, path, value)
    if path == "window.found" and value is True:
        put(rows, name, "window.start_tokens", 5e6)
        put(rows, name, "window.end_tokens", 9e6)
    got = statuses(rows)
    assert {k for k, v in got.items() if v != "pass"} == failing, got
    assert all(got[k] == "fail" for k in failing), got


def test_check_c4_tolerance_and_c5_not_applicable():
    rows = synthetic_rows()
    put(rows, "3L", "icl_after_groups", [x + 0.099 for x in rows["3L"]["icl_after_groups"]])
    assert statuses(rows)["C4"] == "pass"
    # an attention-only model without an induction head: not applicable for C5, C1 fails
    rows = synthetic_rows()
    put(rows, "3L", "induction_heads", [])
    put(rows, "3L", "pm_best_any_layer", 0.2)
    got = zoo_checks.judge(rows, TOKENS, NumpyStats())
    c5 = next(c for c in got if c["id"] == "C5")
    assert c5["status"] == "pass" and c5["numbers"]["3L"]["status"] == "not_applicable"
    assert next(c for c in got if c["id"] == "C1")["status"] == "fail"
    for n in ("2L", "3L", "4L", "5L", "6L"):
        put(rows, n, "induction_heads", [])
    assert statuses(rows)["C5"] == "not_applicable"
    # MLP models are not judged by C5
    rows = synthetic_rows()
    put(rows, "4L-mlp", "ablation.fraction_removed", 0.1)
    assert statuses(rows)["C5"] == "pass"


def test_check_c6():
    tok = copy.deepcopy(TOKENS)
    tok["continues_minus_rest"] = {"mean": 0.2, "se": 0.1}   # exactly 2 s.e.: not beyond
    assert statuses(synthetic_rows(), tok)["C6"] == "fail"
    tok = copy.deepcopy(TOKENS)
    tok["breaks"] = {"mean": -0.19, "se": 0.1}               # worse, but within 2 s.e.
    assert statuses(synthetic_rows(), tok)["C6"] == "fail"
    tok["breaks"] = {"mean": 0.3, "se": 0.01}                # better
    assert statuses(synthetic_rows(), tok)["C6"] == "fail"
    rows = synthetic_rows()
    put(rows, "2L", "window.found", False)
    got = statuses(rows, None)
    assert got["C6"] == "not_applicable" and got["C3"] == "fail" and got["C2"] == "pass"
    rows = synthetic_rows()
    del rows["2L"]
    assert statuses(rows)["C6"] == "not_run"


def test_group_spec():
    g = zoo_report.parse_groups("a:1L,2L:\nb:4L:--lr 5e-3 --allow-short\n")
    assert g[0]["flags"] == {} and g[1]["flags"] == {"lr": "5e-3", "allow_short": True}
    assert g[1]["models"] == ["4L"] and g[1]["text"] == "lr 5e-3 allow_short"
    with pytest.raises(ValueError):
        zoo_report.parse_groups("a:1L:lr 5e-3")
    # the default: scripts/zoo.sh's table
    names = [x["name"] for x in zoo_report.parse_groups(zoo_report.zoo_sh_groups())]
    assert names == ["attn", "attn-deep", "mlp"]
    assert zoo_report.same_value(0.005, "5e-3") and not zoo_report.same_value(0.01, "5e-3")


# ---- one tiny zoo, end to end ----

# d_model 8, one head, seq_len 128 (ICL score: token 122 minus token 12), a low induction
# threshold and large initial weights so that heads classify as induction; the ablation
# evaluation and the report's evidence table on the same 16 windows in 8 groups
TINY = ["--d-model", "8", "--heads", "1", "--batch", "1", "--eval-every", "2", "--eval-batch",
        "4", "--block-tokens", "4096", "--warmup", "2", "--no-estimate", "--seq-len", "128",
        "--allow-short", "--icl-windows", "32", "--icl-groups", "8", "--ablation-windows", "16",
        "--window-windows", "16", "--induction-threshold", "0.01", "--init-std", "0.5"]
REPORT_FLAGS = ["--evidence-windows", "16", "--evidence-groups", "8", "--passage-windows", "2"]
OUTPUTS = ["zoo.json", "zoo.md", "icl.png", "pca.png", "heads.png", "tokens.png",
           "tokens.html", "slope.png"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_tiny_text(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def zoo(corpus, tmp_path_factory):
    d = str(tmp_path_factory.mktemp("zoo") / "run")
    data = str(tmp_path_factory.mktemp("data"))
    r = subprocess.run(["sh", ZOO_SH, "--out", d, "--steps", "4", "--corpus", corpus, "--bytes",
                        "--data", data, "--build", BUILD, "--no-report"] + TINY,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # the parts of the report that need the 2-layer model's window (the evidence table, the
    # token-by-token comparison) run on it; where the tiny 2L has none, one is marked in its
    # analysis.json (steps 0.5-3.5: the kept weights of steps 0 and 4 enclose it)
    a_path = os.path.join(d, "attn", "2L", "analysis.json")
    a = json.load(open(a_path))
    if not a["model"]["window"]["found"]:
        a["model"]["window"].update(found=True, start_step=0.5, end_step=3.5,
                                    start_tokens=0.5 * 128, end_tokens=3.5 * 128)
        json.dump(a, open(a_path, "w"))
    return d


def run_report(d, *extra):
    return subprocess.run([sys.executable, REPORT, d, "--build", BUILD] + REPORT_FLAGS +
                          list(extra), capture_output=True, text=True)


def test_zoo_end_to_end(zoo):
    """The tiny zoo's report: every output, every model in the table, the groups' declared
    difference beside the rows, the checks with their rules. The tiny models find no
    phase-change window, so a copy marks one in the 2-layer model's analysis.json (steps
    0-4) to run the parts that need it (the evidence table, the token-by-token figures);
    those parts are checked against the bindings in test_evidence_and_passage."""
    r = run_report(zoo)
    assert r.returncode == 0, r.stderr
    z = json.load(open(os.path.join(zoo, "zoo.json")))
    assert sorted(z["models"]) == sorted(ALL) and len(z["model_order"]) == 14
    assert z["models"]["5L"]["differs"] == "lr 5e-3" and z["models"]["2L"]["differs"] is None
    assert {g["name"]: g["differs"] for g in z["groups"]}["attn-deep"] == {"lr": "5e-3"}
    assert set(z["checks"]) == {"C1", "C2", "C3", "C4", "C5", "C6"}
    for c in z["checks"].values():
        assert c["rule"] and c["status"] in ("pass", "fail", "not_applicable")
    assert z["rules"] == zoo_checks.RULES
    assert len(z["pca"]["explained_variance"]) == 2
    assert z["pca"]["n_rows"] == 14 * 3  # every evaluation (steps 0, 2, 4) of every model
    md = open(os.path.join(zoo, "zoo.md")).read()
    assert "| 6L | attn-deep (lr 5e-3) |" in md and "## Checks" in md
    d = zoo
    for f in OUTPUTS:
        assert os.path.getsize(os.path.join(d, f)) > 1000, f
    t, w = z["tokens"], z["models"]["2L"]["window"]
    assert t["start_step"] <= w["start_step"] and t["end_step"] >= w["end_step"]
    assert t["windows"] == 2
    assert sum(t["classes"][c]["tokens"] for c in za.CLASSES) == 2 * 127
    ev = z["evidence"]["models"]["2L"]
    assert [c["step"] for c in ev["checkpoints"]][-1] == 4
    assert ev["checkpoints"][0]["step"] == t["start_step"]
    assert z["checks"]["C6"]["status"] in ("pass", "fail")
    html = open(os.path.join(d, "tokens.html")).read()
    assert "http" not in html and html.count("<span") > 2 * 120
    # what each model cost: its run directory's times; the groups ran in one session each
    # (from nothing), so the study's wall time is their sum
    c = z["cost"]
    assert sorted(c["models"]) == sorted(ALL) and c["jobs"] == 2 and c["threads"] == 1
    for n, m in c["models"].items():
        a = json.load(open(os.path.join(d, z["models"][n]["group"], n, "analysis.json")))
        assert m["train_seconds"] == pytest.approx(a["model"]["wall_seconds"], rel=1e-12)
        assert m["analysis_seconds"] == pytest.approx(a["seconds"], rel=1e-12)
        assert m["train_seconds"] > 0 and m["analysis_seconds"] > 0
    plans = {g: json.load(open(os.path.join(d, g, "study.json"))) for g in c["groups_seconds"]}
    for g, p in plans.items():
        assert c["groups_seconds"][g] == pytest.approx(p["wall_seconds"], rel=1e-12)
        assert c["groups_seconds"][g] > 0
    assert c["study_seconds"] == pytest.approx(sum(c["groups_seconds"].values()))
    assert "## What each model cost" in md and "The study: " in md


def test_evidence_and_passage_against_the_bindings(zoo):
    """zoo_model on the tiny 2L run with a window marked (steps 0-4): at the final
    checkpoint the evidence table's ablation equals study-analyse's own
    (removed_by_induction_heads, on the same 16 windows in 8 groups); the token-by-token
    changes are the log-likelihoods of the model's forward pass at the two checkpoints."""
    import report
    plan, runs = report.load_study(os.path.join(zoo, "attn"))
    run = runs["2L"]
    run["analysis"]["model"]["window"].update(found=True, start_step=0.5, end_step=3.5)
    cfg = report.study_config(plan, runs, plan["models"])
    ev = zoo_model.evidence(induct, run, cfg, 16, 8)
    last = ev["checkpoints"][-1]
    a = run["analysis"]["model"]
    assert last["step"] == 4
    assert last["induction_heads"] == a["heads"]["induction"]
    if a["heads"]["induction"]:
        assert last["removed"] == a["ablation"]["removed_by_induction_heads"]
        assert last["removed_se"] == pytest.approx(a["ablation"]["removed_by_induction_heads_se"],
                                                   rel=1e-12)
        assert last["icl_clean"] == a["ablation"]["icl_clean"]
    t = zoo_model.passage(induct, run, cfg, 2, 2)
    assert (t["start_step"], t["end_step"]) == (0, 4)
    for step, key in ((0, "loglik_start"), (4, "loglik_end")):
        m = induct.Model.load(os.path.join(run["dir"], "weights", f"step-{step}.safetensors"))
        logits, _, _ = m.forward(t["passage_tokens"][:1])
        lg = np.asarray(logits.tolist()[0], dtype=np.float64)
        lp = lg - np.log(np.exp(lg - lg.max(1, keepdims=True)).sum(1, keepdims=True)) - \
            lg.max(1, keepdims=True)
        toks = t["passage_tokens"][0]
        want = [lp[i, toks[i + 1]] for i in range(len(toks) - 1)]
        np.testing.assert_allclose(t[key][0], want, atol=2e-4)
    assert t["token_classes"][0] == naive_classes(t["passage_tokens"][0], 2)


def test_report_refuses_what_is_not_one_study(zoo, tmp_path):
    def refused(d, *extra, needle):
        before = set(os.listdir(d))
        r = run_report(d, *extra)
        assert r.returncode == 1, r.stdout + r.stderr
        assert needle in r.stderr, r.stderr
        assert set(os.listdir(d)) == before  # nothing written
    d = str(tmp_path / "z")
    shutil.copytree(zoo, d, symlinks=True)
    for f in OUTPUTS:
        if os.path.exists(os.path.join(d, f)):
            os.remove(os.path.join(d, f))
    # the groups' declared differences: attn-deep's lr undeclared, or declared otherwise
    refused(d, "--groups", "attn:1L,2L,3L,1L-smeared,2L-smeared:\nattn-deep:4L,5L,6L:\n"
            "mlp:1L-mlp,2L-mlp,3L-mlp,4L-mlp,5L-mlp,6L-mlp:", needle="lr 0.005 here")
    refused(d, "--groups", "attn:1L,2L,3L,1L-smeared,2L-smeared:\nattn-deep:4L,5L,6L:--lr 1e-3"
            "\nmlp:1L-mlp,2L-mlp,3L-mlp,4L-mlp,5L-mlp,6L-mlp:", needle="declares 1e-3")
    refused(d, "--groups", "attn:1L,2L:\nattn-deep:4L,5L,6L:--lr 5e-3\n"
            "mlp:1L-mlp,2L-mlp,3L-mlp,4L-mlp,5L-mlp,6L-mlp:", needle="holds models")
    # another data identity in one group (its plan and runs alike)
    g = os.path.join(d, "mlp")
    saved = {}
    for p in [os.path.join(g, "study.json")] + [os.path.join(g, m, "config.json")
                                                for m in ALL if m.endswith("-mlp")]:
        saved[p] = open(p).read()
        j = json.loads(saved[p])
        j["data"]["sha256"] = "0" * 64
        open(p, "w").write(json.dumps(j))
    refused(d, needle="other data than attn")
    for p, text in saved.items():
        open(p, "w").write(text)
    # an unfinished group, a missing one
    os.rename(os.path.join(g, "summary.json"), os.path.join(g, "summary.json.x"))
    refused(d, needle=f"{g} is unfinished")
    os.rename(os.path.join(g, "summary.json.x"), os.path.join(g, "summary.json"))
    shutil.rmtree(os.path.join(d, "attn-deep"))
    refused(d, needle="attn-deep is missing")
    # bad usage
    r = run_report(d, "--evidence-windows", "1")
    assert r.returncode == 2
