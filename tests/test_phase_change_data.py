"""The main job's data (scripts/phase-change.sh, study/phase_change_data.py): the pinned
corpus follows its rule, two preparations from scratch give byte-identical tokenizer and
token files whose SHA-256 are the documented ones, runs record and print those hashes, and a
run on other data says that its results are not comparable with the documented ones.

The preparation on the full corpus trains the 2048-piece tokenizer twice (about 20 s of CPU
each). Environment (set by tests/meson.build): INDUCT_BUILD_DIR (the meson build root).
"""
import hashlib
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SCRIPT = os.path.join(REPO, "scripts", "phase-change.sh")
BUILD = os.environ["INDUCT_BUILD_DIR"]
sys.path.insert(0, os.path.join(REPO, "study"))
import phase_change_data as pcd  # noqa: E402

PIN = pcd.load_pin()
DOC = PIN["documented"]
NOT_COMPARABLE = "results are not comparable with the documented ones"
# a 2-step run of one tiny model: the preparation is what is tested
TINY = ["--models", "1L", "--d-model", "8", "--heads", "1", "--batch", "1", "--steps", "2",
        "--eval-every", "2", "--eval-batch", "4", "--warmup", "1", "--no-estimate", "--no-plot"]


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def script(args, cwd):
    r = subprocess.run(["sh", SCRIPT, "--build", BUILD] + args, cwd=cwd, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def first_lines(out):
    """What the run prints before the program starts."""
    return out.split("study (libinduct")[0]


def test_pin_follows_its_rule():
    """The pinned file list is the documented rule applied to this machine's packages: the
    *.py regular files that dpkg -L lists under the root, less the excluded ones, in
    byte-wise path order, each with the SHA-256 of the installed file."""
    rels = set()
    for pkg in PIN["packages"]:
        out = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True,
                             check=True).stdout.splitlines()
        rels |= {os.path.relpath(p, PIN["root"]) for p in out
                 if p.startswith(PIN["root"] + "/") and p.endswith(".py")
                 and os.path.isfile(p) and not os.path.islink(p)}
    excluded = {rel for rel, _ in PIN["excluded"]}
    assert excluded <= rels
    want = sorted(rels - excluded, key=os.fsencode)
    assert [rel for rel, _ in PIN["files"]] == want
    for rel, h in PIN["files"]:
        assert sha(os.path.join(PIN["root"], rel)) == h, rel
    # the documented corpus is their concatenation
    blob = b"".join(open(os.path.join(PIN["root"], rel), "rb").read() for rel in want)
    assert (len(blob), hashlib.sha256(blob).hexdigest()) == (DOC["bytes"], DOC["corpus_sha256"])
    # and the pinned versions include the installed ones
    for pkg, versions in PIN["packages"].items():
        assert pcd.package_version(pkg) in versions, pkg


def test_docs_quote_the_pin():
    doc = open(os.path.join(REPO, "docs", "phase-change.md"), encoding="utf-8").read()
    for key in ("corpus_sha256", "model_sha256", "tokens_sha256"):
        assert DOC[key] in doc, key
    assert f"{DOC['tokens']:,}" in doc


@pytest.fixture(scope="module")
def two_preparations(tmp_path_factory):
    """scripts/phase-change.sh twice from scratch, with data directories at different
    paths and called from different directories."""
    runs = []
    for k in (1, 2):
        base = tmp_path_factory.mktemp(f"prep{k}")
        data = base / ("data" if k == 1 else "another/place")
        out = script(["--data", str(data), "--out", "run"] + TINY, cwd=base)
        runs.append((data, base / "run", out))
    return runs


def test_two_preparations_are_byte_identical_and_documented(two_preparations):
    (d1, r1, o1), (d2, r2, o2) = two_preparations
    for name in ("python.txt", "python-bpe2048.model", "python-bpe2048.vocab",
                 "python-bpe2048.u16"):
        assert open(d1 / name, "rb").read() == open(d2 / name, "rb").read(), name
    assert sha(d1 / "python.txt") == DOC["corpus_sha256"]
    assert sha(d1 / "python-bpe2048.model") == DOC["model_sha256"]
    assert sha(d1 / "python-bpe2048.u16") == DOC["tokens_sha256"]
    tokens = open(d1 / "python-bpe2048.u16", "rb").read()
    assert len(tokens) == 2 * DOC["tokens"]
    # one newline id (2048) per line of the corpus, every id below d_vocab 2049
    ids = memoryview(tokens).cast("H")
    text = open(d1 / "python.txt", "rb").read()
    assert max(ids) == 2048
    assert sum(1 for t in ids if t == 2048) == text.count(b"\n") + (not text.endswith(b"\n"))
    for out in (o1, o2):
        head = first_lines(out)
        for h in (DOC["corpus_sha256"], DOC["model_sha256"], DOC["tokens_sha256"]):
            assert h in head
        assert "training a 2048-piece BPE tokenizer" in head
        assert NOT_COMPARABLE not in out


def test_summary_records_the_hashes(two_preparations):
    for data, run, _ in two_preparations:
        s = json.load(open(run / "summary.json"))
        p = s["config"]["data"]["provenance"]
        assert p["sha256"] == sha(data / "python.txt") == DOC["corpus_sha256"]
        assert p["tokenizer"]["model_sha256"] == sha(data / "python-bpe2048.model")
        assert p["token_file"]["sha256"] == sha(data / "python-bpe2048.u16")
        assert p["token_file"]["tokens"] == s["config"]["data"]["train_tokens"] + \
            s["config"]["data"]["eval_tokens"]
        assert p["comparable"] is True and p["not_comparable_because"] == []
        assert p["files"] == len(PIN["files"]) and p["differing_files"] == []
        md = open(run / "summary.md", encoding="utf-8").read()
        assert DOC["tokens_sha256"] in md and "These are the documented" in md


def test_prepared_files_are_reused(two_preparations):
    data, _, _ = two_preparations[0]
    before = {n: os.stat(data / n).st_mtime_ns for n in ("python-bpe2048.model",
                                                         "python-bpe2048.u16")}
    out = script(["--data", str(data), "--out", "again"] + TINY, cwd=data.parent)
    assert "training a" not in out and DOC["tokens_sha256"] in first_lines(out)
    assert before == {n: os.stat(data / n).st_mtime_ns for n in before}


def test_other_text_is_not_comparable(tmp_path):
    """A run on one's own text prints and records its hashes and says, before the program's
    output and in summary.md, that its results are not comparable."""
    text = tmp_path / "mine.txt"
    text.write_text("".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(3000)))
    out = script(["--corpus", str(text), "--bpe", "64", "--data", str(tmp_path / "d"),
                  "--out", "run", "--block-tokens", "4096"] + TINY, cwd=tmp_path)
    head = first_lines(out)
    assert NOT_COMPARABLE in head and sha(text) in head
    p = json.load(open(tmp_path / "run" / "summary.json"))["config"]["data"]["provenance"]
    assert p["comparable"] is False and p["sha256"] == sha(text)
    (u16,) = [f for f in os.listdir(tmp_path / "d") if f.endswith(".u16")]
    assert p["token_file"]["sha256"] == sha(tmp_path / "d" / u16)
    md = open(tmp_path / "run" / "summary.md", encoding="utf-8").read()
    assert NOT_COMPARABLE in md and "default corpus" in md


def test_changed_corpus_retrains(tmp_path):
    """A prepared tokenizer is reused only for the corpus it was trained on: the same file
    name with other content is trained again."""
    text, prefix = tmp_path / "t.txt", str(tmp_path / "t-bpe64")
    reps = []
    for k, body in enumerate(("alpha beta gamma\n", "delta epsilon zeta\n")):
        text.write_text(body * 2000)
        rep = tmp_path / f"r{k}.json"
        assert pcd.main(["prepare", "--corpus", str(text), "--text", str(text), "--bpe", "64",
                         "--prefix", prefix, "--report", str(rep)]) == 0
        reps.append(json.load(open(rep)))
        assert reps[-1]["token_file"]["sha256"] == sha(prefix + ".u16")
    assert reps[0]["sha256"] != reps[1]["sha256"]
    assert reps[0]["token_file"]["sha256"] != reps[1]["token_file"]["sha256"]


def test_pinned_corpus_that_differs(tmp_path, capsys):
    """A machine whose files differ from the pin (an updated package, a missing one) still
    prepares what it has, names the files, and says it is not comparable."""
    root = tmp_path / "root"
    files = {"a.py": b"import os\n", "b/c.py": b"x = 1\n", "b2.py": b"y = 2\n"}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    blob = b"".join(files[r] for r in sorted(files, key=os.fsencode))
    pin = dict(PIN, root=str(root), packages={},
               files=[[r, hashlib.sha256(files[r]).hexdigest()]
                      for r in sorted(files, key=os.fsencode)],
               documented=dict(DOC, corpus_sha256=hashlib.sha256(blob).hexdigest()))
    pin_path = tmp_path / "pin.json"
    pin_path.write_text(json.dumps(pin))

    def prepare(tag):
        rep = tmp_path / f"{tag}.json"
        assert pcd.main(["prepare", "--corpus", "python", "--text", str(tmp_path / "c.txt"),
                         "--report", str(rep), "--pin", str(pin_path)]) == 0
        return json.load(open(rep)), capsys.readouterr().out

    rep, out = prepare("same")
    assert open(tmp_path / "c.txt", "rb").read() == blob
    assert rep["sha256"] == hashlib.sha256(blob).hexdigest()
    # byte-level: the documented corpus, but byte tokens are not what was documented
    assert rep["not_comparable_because"] == ["the documented results use 2048 word pieces, "
                                             "this run byte-level tokens"]
    (root / "b" / "c.py").write_bytes(b"x = 2\n")
    (root / "b2.py").unlink()
    rep, out = prepare("changed")
    assert rep["differing_files"] == ["b/c.py"] and rep["missing_files"] == ["b2.py"]
    assert open(tmp_path / "c.txt", "rb").read() == b"import os\nx = 2\n"
    assert "1 of the 3 pinned files differ and 1 are missing (b/c.py, b2.py)" in out
    assert NOT_COMPARABLE in out and "not the documented one" in out


def test_bytes_tree_is_the_corpus(tmp_path, capsys):
    """--bytes gives the program the pinned files as a directory (one document each); read
    in the library's order they are the documented corpus."""
    tree = tmp_path / "python-stdlib"
    assert pcd.main(["prepare", "--corpus", "python", "--text", str(tree), "--tree",
                     "--report", str(tmp_path / "r.json")]) == 0
    assert pcd.sha256_dir(str(tree)) == (DOC["corpus_sha256"], DOC["bytes"])
    assert NOT_COMPARABLE in capsys.readouterr().out  # byte-level tokens
