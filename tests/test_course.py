"""The notebook course (examples/notebooks, docs/course.md).

- The learner's notebook is what make_exercises.py writes from the solution notebook, byte
  for byte; every exercise is a stub that raises, every code cell compiles, and the
  generator refuses markers that do not pair up.
- The solution notebook runs end to end in a Jupyter kernel (Debian's nbclient and
  ipykernel) with this build's package; its cells assert each step's result (the heads the
  detectors find against the ablations, the library's own scores, closed-form facts of
  patching). The executed notebook and its figures are kept in
  <builddir>/examples/notebooks/ (executed.ipynb, figure-*.png) to look at.
- The shipped checkpoint is the one docs/course.md describes (SHA-256, architecture,
  tokenizer).

Environment (tests/meson.build): INDUCT_SOURCE_ROOT, INDUCT_BUILD_DIR. Without nbformat,
nbclient or ipykernel the tests skip, and fail under CI=true (scripts/setup-debian.sh
installs them)."""
import base64
import hashlib
import importlib.util
import json
import os
import pathlib
import re
import shutil
import struct
import sys
import time

import pytest

SRC = pathlib.Path(os.environ["INDUCT_SOURCE_ROOT"])
BUILD = pathlib.Path(os.environ["INDUCT_BUILD_DIR"])
NB_DIR = SRC / "examples" / "notebooks"
SOLUTIONS = NB_DIR / "induction_heads_solutions.ipynb"
EXERCISES = NB_DIR / "induction_heads.ipynb"
CHECKPOINT = NB_DIR / "phase-change-2L-seed0.safetensors"
OUT = BUILD / "examples" / "notebooks"


def need(module, package):
    if importlib.util.find_spec(module) is None:
        msg = f"{module} is missing: apt-get install {package} (scripts/setup-debian.sh)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)


def generator():
    need("nbformat", "python3-nbformat")
    spec = importlib.util.spec_from_file_location("make_exercises", NB_DIR / "make_exercises.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_exercises_are_generated_from_the_solutions():
    gen = generator()
    import nbformat
    sol = nbformat.read(SOLUTIONS, as_version=4)
    nbformat.validate(sol)
    nb, n = gen.exercises(sol)
    assert EXERCISES.read_text(encoding="utf-8") == gen.render(nb), (
        "induction_heads.ipynb differs from what make_exercises.py writes from "
        "induction_heads_solutions.ipynb: run examples/notebooks/make_exercises.py")
    assert n >= 7
    # the command line's --check says the same
    assert gen.main(["--check", str(SOLUTIONS), str(EXERCISES)]) == 0
    # both are committed without outputs
    for cell in sol.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


def test_a_changed_solution_makes_the_check_fail(tmp_path):
    gen = generator()
    import nbformat
    sol = nbformat.read(SOLUTIONS, as_version=4)
    for cell in sol.cells:                 # a change outside any solution region
        if cell.cell_type == "code" and "THRESHOLD = 0.4" in cell.source:
            cell.source = cell.source.replace("THRESHOLD = 0.4", "THRESHOLD = 0.5")
            break
    else:
        pytest.fail("no cell sets THRESHOLD")
    changed = tmp_path / "sol.ipynb"
    nbformat.write(sol, changed)
    assert gen.main(["--check", str(changed), str(EXERCISES)]) == 1


def test_exercise_cells_are_stubs_that_compile():
    gen = generator()
    import nbformat
    ex = nbformat.read(EXERCISES, as_version=4)
    sol = nbformat.read(SOLUTIONS, as_version=4)
    stubs = 0
    for cell in ex.cells:
        if cell.cell_type != "code":
            continue
        compile(cell.source, cell.get("id", "cell"), "exec")
        assert gen.BEGIN not in cell.source and gen.END not in cell.source
        stubs += cell.source.count(gen.STUB)
    assert stubs == sum(c.source.count(gen.BEGIN + "\n") for c in sol.cells
                        if c.cell_type == "code")
    # no solution code survives: each region's code lines are gone from its cell
    for s, e in zip(sol.cells, ex.cells):
        if s.cell_type != "code" or gen.BEGIN not in s.source:
            assert s.source == e.source
            continue
        for region in re.findall(r"# SOLUTION\n(.*?)# END SOLUTION", s.source, re.S):
            code = [ln.strip() for ln in region.split("\n")
                    if ln.strip() and not ln.strip().startswith("#")]
            assert code, "a solution region without code"
            kept = {ln.strip() for ln in e.source.split("\n")}
            assert not any(c in kept and c not in s.source.split(gen.BEGIN)[0] for c in code)


@pytest.mark.parametrize("source,error", [
    ("x = 1\n# SOLUTION\ny = 2\n", "never closed"),
    ("# END SOLUTION\n", "without"),
    ("# SOLUTION\n# SOLUTION\n# END SOLUTION\n", "inside"),
    ("def f():\n    # SOLUTION\n    return 1\n# END SOLUTION\n", "indentation"),
])
def test_generator_refuses_unpaired_markers(source, error):
    gen = generator()
    with pytest.raises(gen.MarkerError, match=error):
        gen.strip_solutions(source)


def test_generator_keeps_hints_and_indentation():
    gen = generator()
    src = ("def f(x):\n    # SOLUTION\n    # HINT: double it\n    y = 2 * x\n    return y\n"
           "    # END SOLUTION\n\nprint(f(2))")
    out, n = gen.strip_solutions(src)
    assert n == 1
    assert out == ("def f(x):\n    # HINT: double it\n    " + gen.STUB + "\n\nprint(f(2))")


def safetensors_metadata(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def test_checkpoint_is_the_documented_one():
    data = CHECKPOINT.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    doc = (SRC / "docs" / "course.md").read_text()
    assert digest in doc, f"docs/course.md does not state the checkpoint's SHA-256 {digest}"
    assert len(data) < 2 * 1024 * 1024
    header = safetensors_metadata(CHECKPOINT)
    meta = header["__metadata__"]
    assert (meta["n_layers"], meta["d_model"], meta["n_heads"], meta["d_head"], meta["n_ctx"],
            meta["d_vocab"], meta["positional_embedding_type"], meta["shortformer_layers"],
            meta["normalization_type"], meta["attn_only"], meta["seed"]) == (
        "2", "64", "2", "32", "512", "2049", "shortformer", "1", "LN", "true", "0")
    tok = json.loads(meta["tokenizer"])
    assert tok["type"] == "sentencepiece" and tok["newline_id"] == 2048
    # the tokenizer is the documented one of the phase-change corpus
    model_sha = hashlib.sha256(base64.b64decode(tok["model_proto"])).hexdigest()
    assert model_sha == "948286aa104437990453ed25e8ce89cbd2019b7e8c757667c3c0ce2a11edb7fc"
    assert model_sha in (SRC / "docs" / "phase-change.md").read_text()
    # weights only: no optimizer moments
    assert not any(k.startswith("optimizer.") for k in header)


def test_solution_notebook_runs_and_its_checks_hold(tmp_path):
    need("nbformat", "python3-nbformat")
    need("nbclient", "python3-nbclient")
    need("ipykernel", "python3-ipykernel")
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    work = tmp_path / "notebooks"
    work.mkdir()
    shutil.copy(SOLUTIONS, work)
    os.symlink(CHECKPOINT, work / CHECKPOINT.name)
    nb = nbformat.read(work / SOLUTIONS.name, as_version=4)
    # the kernel imports this build's package, one thread per model as in the docs' figures
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(BUILD / "bindings" / "python")] + os.environ.get("PYTHONPATH", "").split(os.pathsep))
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    client = NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(work)}})
    t0 = time.time()
    try:
        client.execute()
    except CellExecutionError as e:
        pytest.fail(f"the solution notebook failed:\n{e}")
    finally:
        OUT.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, OUT / "executed.ipynb")
        for old in OUT.glob("figure-*.png"):
            old.unlink()
        k = 0
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                png = out.get("data", {}).get("image/png")
                if png:
                    (OUT / f"figure-{k:02d}.png").write_bytes(base64.b64decode(png))
                    k += 1
    wall = time.time() - t0
    print(f"the solution notebook ran in {wall:.0f} s (wall clock; {OUT / 'executed.ipynb'})",
          file=sys.stderr)
    text = "\n".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    # what the course claims at the end was printed, so every cell before it ran
    assert "the whole course ran in" in text
    assert k >= 8, f"{k} figures"
    # the interactive views were written
    for name in ("induction_heads_attention.html", "induction_heads_text_attention.html"):
        page = (work / name).read_text()
        assert "<canvas" in page or "canvas" in page


def test_packing_the_checkpoint_again_gives_the_same_bytes(tmp_path):
    """pack_checkpoint.py is a function of its inputs: the shipped model (weights) and its
    tokenizer (written out from the file's metadata) pack to the shipped file's bytes."""
    import subprocess
    tok = json.loads(safetensors_metadata(CHECKPOINT)["__metadata__"]["tokenizer"])
    (tmp_path / "t.model").write_bytes(base64.b64decode(tok["model_proto"]))
    env = dict(os.environ, PYTHONPATH=str(BUILD / "bindings" / "python"))
    r = subprocess.run([sys.executable, str(NB_DIR / "pack_checkpoint.py"), str(CHECKPOINT),
                        str(tmp_path / "t.model"), str(tmp_path / "out.safetensors")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.safetensors").read_bytes() == CHECKPOINT.read_bytes()
    # a tokenizer of another vocabulary is refused
    r = subprocess.run([sys.executable, str(NB_DIR / "pack_checkpoint.py"), str(CHECKPOINT),
                        str(tmp_path / "t.model"), str(tmp_path / "bad.safetensors"),
                        "--newline-id", "4000"], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "d_vocab" in r.stderr
    assert not (tmp_path / "bad.safetensors").exists()
