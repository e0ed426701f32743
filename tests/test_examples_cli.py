"""Command lines of the example programs (examples/cli.c): bad numbers are refused with a
message and exit status 2 before any work, --help prints the full help and exits 0, and
SIGINT or SIGTERM stops a training run with exit status 130 after saving its resume point,
from which the run continues to the same bits as an uninterrupted one. The study's stage
programs (study-train, study-analyse) share the command-line plumbing and are held to the
same rules.

Environment (tests/meson.build): INDUCT_EXAMPLES, the build's examples directory, and
INDUCT_STUDY, its study directory (the study's stage programs)."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

EXAMPLES = os.environ["INDUCT_EXAMPLES"]
STUDY = os.environ["INDUCT_STUDY"]
PROGRAMS = ["train-run", "induction-rrt", "kv-retrieval", "study-train", "study-analyse"]


def exe(name):
    return os.path.join(STUDY if name.startswith("study-") else EXAMPLES, name)


def run(name, args, **kw):
    return subprocess.run([exe(name)] + args, capture_output=True, text=True, **kw)


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
    ("study-train", ["--text", ".", "--steps", "-5"], ["--steps", "'-5'"]),
    ("study-train", ["--text", ".", "--batch", "abc"], ["--batch", "'abc'"]),
    ("study-train", ["--text", ".", "--model", "2X"], ["--model", "'2X'"]),
    ("study-train", ["--text", ".", "--out", ".", "--steps", "10"], ["--model NAME"]),
    ("study-analyse", ["--out", ".", "--icl-groups", "1"], ["--icl-groups", "got 1"]),
    ("study-analyse", ["--icl-windows", "64"], ["--out DIR"]),
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
    assert "Exit status" in r.stdout, "the help states the exit statuses"
    if name != "study-analyse":  # analyses are run again whole, they have no resume point
        assert "130" in r.stdout
    assert run(name, ["-h"]).stdout == r.stdout


def wait_for(path, proc):
    """Until `path` exists (no time limit: the outcome must not depend on how fast a
    loaded machine runs the program; meson's test timeout still ends a hang)."""
    while not os.path.exists(path):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)


def wait_for_handler(proc, sig):
    """Until the process has installed a handler for `sig` (its SigCgt mask in
    /proc/PID/status): a signal sent from then on is the program's to handle, however
    late the process got to that point."""
    while True:
        assert proc.poll() is None, proc.communicate()
        with open(f"/proc/{proc.pid}/status") as f:
            caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
        if caught >> (sig - 1) & 1:
            return
        time.sleep(0.02)


def final_record(run_dir):
    with open(run_dir / "metrics.jsonl") as f:
        recs = [json.loads(line) for line in f]
    last = recs[-1]
    last.pop("elapsed_seconds", None)  # wall time; everything else is a pure function
    return last


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_train_run_signal_saves_resume_point(tmp_path, sig):
    """A signal mid-run: exit 130, interrupted.safetensors written, and (SIGTERM) resuming
    from it ends with the same evaluation, bit for bit, as a run never interrupted.
    The run is far longer than the test (10^9 steps), so the signal lands at whatever
    step the machine has reached, and the check holds for every such step: resuming to
    that step + 60 equals a straight run of as many steps."""
    common = ["--eval-every", "50", "--threads", "1"]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    p = subprocess.Popen([exe("train-run"), "--out", str(run_dir), "--steps", "1000000000"]
                         + common, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(run_dir / "ckpt-1.safetensors", p)  # training has started
    p.send_signal(sig)
    out, err = p.communicate()
    assert p.returncode == 130, (p.returncode, out, err)
    stop = run_dir / "interrupted.safetensors"
    assert stop.exists(), (out, err)
    m = re.search(r"interrupted \((SIG\w+)\) at step (\d+); resume with: .* --resume ", out)
    assert m, out
    assert m.group(1) == signal.Signals(sig).name
    assert int(m.group(2)) >= 1, "ckpt-1 was written before the signal"
    if sig != signal.SIGTERM:
        return
    total = ["--steps", str(int(m.group(2)) + 60)]
    r = run("train-run", ["--out", str(run_dir), "--resume", str(stop)] + total + common)
    assert r.returncode == 0, r.stderr
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    r = run("train-run", ["--out", str(ref_dir)] + total + common)
    assert r.returncode == 0, r.stderr
    resumed, reference = final_record(run_dir), final_record(ref_dir)
    assert resumed["step"] == int(m.group(2)) + 60
    assert resumed == reference


def test_induction_rrt_sigterm_exit_130():
    p = subprocess.Popen([exe("induction-rrt"), "--steps", "1000000"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_handler(p, signal.SIGTERM)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate()
    assert p.returncode == 130, (p.returncode, err)
    assert "interrupted" in err
