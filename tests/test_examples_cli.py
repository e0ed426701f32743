"""Command lines of the example programs (examples/cli.c): bad numbers are refused with a
message and exit status 2 before any work, --help prints the full help and exits 0, and
SIGINT or SIGTERM stops a training run with exit status 130 after saving its resume point,
from which the run continues to the same bits as an uninterrupted one.

Environment (tests/meson.build): INDUCT_EXAMPLES, the build's examples directory, and
INDUCT_STUDY, its study directory (the phase-change program)."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

EXAMPLES = os.environ["INDUCT_EXAMPLES"]
STUDY = os.environ["INDUCT_STUDY"]
PROGRAMS = ["train-run", "induction-rrt", "kv-retrieval", "phase-change"]


def exe(name):
    return os.path.join(STUDY if name == "phase-change" else EXAMPLES, name)


def run(name, args, **kw):
    return subprocess.run([exe(name)] + args, capture_output=True, text=True, timeout=120, **kw)


# (program, arguments, words the message must contain). Each would have started a run
# (or a 2^64 - 5 step one) before: strtoull("-5") wraps, atoi("abc") is 0.
BAD = [
    ("train-run", ["--out", ".", "--steps", "-5"], ["--steps", "'-5'"]),
    ("train-run", ["--out", ".", "--steps", "abc"], ["--steps", "'abc'"]),
    ("train-run", ["--out", ".", "--steps", "12x"], ["--steps", "'12x'"]),
    ("train-run", ["--out", ".", "--steps", "99999999999999999999999"], ["--steps"]),
    ("train-run", ["--out", ".", "--steps", ""], ["--steps"]),
    ("train-run", ["--out", ".", "--threads", "0"], ["--threads", "[1, 1024]"]),
    ("train-run", ["--out", ".", "--target-loss", "nan"], ["--target-loss", "'nan'"]),
    ("train-run", ["--out", ".", "--layers", "1.5"], ["--layers", "'1.5'"]),
    ("train-run", ["--steps", "10"], ["--out DIR is required"]),
    ("train-run", ["--out"], ["--out", "needs a value"]),
    ("train-run", ["--out", ".", "--stpes", "10"], ["unknown flag", "--stpes"]),
    ("train-run", ["--out", ".", "stray"], ["unexpected argument", "stray"]),
    ("induction-rrt", ["--steps", "-5"], ["--steps", "'-5'"]),
    ("induction-rrt", ["--steps", "abc"], ["--steps", "'abc'"]),
    ("induction-rrt", ["--steps", "0"], ["--steps", "got 0"]),
    ("induction-rrt", ["--threads", "-1"], ["--threads", "'-1'"]),
    ("induction-rrt", ["--seed", "0x10"], ["--seed", "'0x10'"]),
    ("kv-retrieval", ["--steps", "-5"], ["--steps", "'-5'"]),
    ("kv-retrieval", ["--eval", "abc"], ["--eval", "'abc'"]),
    ("kv-retrieval", ["--lr", "fast"], ["--lr", "'fast'"]),
    ("kv-retrieval", ["--lr", "-1e-3"], ["--lr"]),
    ("kv-retrieval", ["--only", "4"], ["--only", "[1, 3]"]),
    ("phase-change", ["--text", ".", "--steps", "-5"], ["--steps", "'-5'"]),
    ("phase-change", ["--text", ".", "--batch", "abc"], ["--batch", "'abc'"]),
]


@pytest.mark.parametrize("name,args,words", BAD, ids=[f"{b[0]} {' '.join(b[1])}" for b in BAD])
def test_bad_command_line_refused(tmp_path, name, args, words):
    t0 = time.monotonic()
    r = run(name, args, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith(name + ": "), r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)
    assert f"Try '{name} --help'" in r.stderr
    assert r.stdout == "", "nothing may start before the command line is checked"
    assert os.listdir(tmp_path) == []
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("name", PROGRAMS)
def test_help(name):
    r = run(name, ["--help"])
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout.startswith("usage: " + name)
    assert "--threads" in r.stdout and "--help" in r.stdout
    assert len(r.stdout.splitlines()) >= 10, "a full help, not only a usage line"
    if name != "phase-change":
        assert "130" in r.stdout, "the help states the exit statuses"
    assert run(name, ["-h"]).stdout == r.stdout


def wait_for(path, proc, timeout=60):
    t0 = time.monotonic()
    while not os.path.exists(path):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < timeout, f"{path} did not appear"
        time.sleep(0.05)


def final_record(run_dir):
    with open(run_dir / "metrics.jsonl") as f:
        recs = [json.loads(line) for line in f]
    last = recs[-1]
    last.pop("elapsed_seconds", None)  # wall time; everything else is a pure function
    return last


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_train_run_signal_saves_resume_point(tmp_path, sig):
    """A signal mid-run: exit 130, interrupted.safetensors written, and (SIGTERM) resuming
    from it ends with the same evaluation, bit for bit, as a run never interrupted."""
    common = ["--steps", "100", "--eval-every", "50", "--threads", "1"]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    p = subprocess.Popen([exe("train-run"), "--out", str(run_dir)] + common,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(run_dir / "ckpt-1.safetensors", p)  # training has started
    p.send_signal(sig)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, (p.returncode, out, err)
    stop = run_dir / "interrupted.safetensors"
    assert stop.exists(), (out, err)
    m = re.search(r"interrupted \((SIG\w+)\) at step (\d+); resume with: .* --resume ", out)
    assert m, out
    assert m.group(1) == signal.Signals(sig).name
    assert 1 <= int(m.group(2)) < 100, "the run stopped early, not at its end"
    if sig != signal.SIGTERM:
        return
    r = run("train-run", ["--out", str(run_dir), "--resume", str(stop)] + common)
    assert r.returncode == 0, r.stderr
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    r = run("train-run", ["--out", str(ref_dir)] + common)
    assert r.returncode == 0, r.stderr
    resumed, reference = final_record(run_dir), final_record(ref_dir)
    assert resumed["step"] == 100
    assert resumed == reference


def test_induction_rrt_sigterm_exit_130():
    p = subprocess.Popen([exe("induction-rrt"), "--steps", "1000000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, (p.returncode, err)
    assert "interrupted" in err
