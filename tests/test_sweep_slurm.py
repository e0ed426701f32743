"""induct-sweep on a real Slurm: a single-node cluster (munged, slurmctld, slurmd; see
tests/slurm_cluster.py) runs tiny studies of the main job (study/runner.py, one 2-layer
model each) for three seeds as a job array
submitted with `induct-sweep run ... --via slurm --submit`. Every task finishes with the
same weights and summary as an uninterrupted local run; a task cancelled with scancel
while it runs is not taken for finished, is not submitted twice while it is still in the
queue, and the same command run again submits it alone and it finishes with the same
result; the report is built from the run directories. Skips only where Slurm cannot
start (not root, slurm-wlm or munge missing; under CI=true a missing package fails).
Environment (tests/meson.build): INDUCT_SWEEP, STUDY_RUNNER, INDUCT_BUILD_DIR."""
import csv
import json
import os
import random
import re
import subprocess
import sys
import time

import pytest

from slurm_cluster import hold, release, slurm  # noqa: F401  (slurm: the cluster fixture)

SWEEP = os.environ["INDUCT_SWEEP"]
EXE = [sys.executable, os.environ["STUDY_RUNNER"], "--build", os.environ["INDUCT_BUILD_DIR"]]
NAMES = ("seed0", "seed1", "seed2")
# a few dozen steps of one small 2-layer model: about a second a task
TINY = ["--models", "2L", "--d-model", "8", "--heads", "1", "--batch", "1", "--steps", "36",
        "--eval-every", "6", "--eval-batch", "4", "--block-tokens", "4096", "--warmup", "2",
        "--no-estimate", "--icl-windows", "64", "--icl-groups", "8", "--ablation-windows",
        "32", "--window-windows", "0", "--threads", "1"]
COLUMNS = "models.2L.final_eval_loss,models.2L.icl_after,config.model.seed"
DEADLINE = 300  # seconds: a bound for failing, never a timing check


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder with the corpus and the task file; the sweeps run from it with relative
    paths (the job array must resolve them as the local run does)."""
    d = tmp_path_factory.mktemp("work")
    rng = random.Random(8)
    words = "the and of to in that he shall unto for his a lord they be is him not".split()
    lines = []
    while sum(map(len, lines)) < 60000:
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(5, 15))) + ".\n")
    (d / "corpus.txt").write_text("".join(lines))
    (d / "tasks.jsonl").write_text("".join(json.dumps({"name": n, "seed": s}) + "\n"
                                           for s, n in enumerate(NAMES)))
    return str(d)


def sweep(work, *args, env=None):
    cmd = EXE + ["--text", "corpus.txt", "--seed", "{seed}", "--out", "{out}"] + TINY
    return subprocess.run([sys.executable, SWEEP, *args, "--", *cmd], cwd=work, env=env,
                          capture_output=True, text=True, timeout=DEADLINE)


def submit(slurm, work, out):
    """The one command a user runs (and runs again) to put a sweep on the cluster."""
    return sweep(work, "run", "tasks.jsonl", "--out", out, "--via", "slurm", "--submit",
                 "--jobs", "2", env=slurm.env)


def job_id(r):
    m = re.search(r"submitted job array (\d+)", r.stdout)
    assert r.returncode == 0 and m, r.stdout + r.stderr
    return m.group(1)


def without_timing(obj):
    """summary.json without its wall-clock fields (seconds, tokens per second)."""
    if isinstance(obj, dict):
        return {k: without_timing(v) for k, v in obj.items()
                if "seconds" not in k and not k.endswith("per_second")}
    if isinstance(obj, list):
        return [without_timing(v) for v in obj]
    return obj


def result(folder):
    with open(os.path.join(folder, "summary.json"), encoding="utf-8") as f:
        s = without_timing(json.load(f))
    with open(os.path.join(folder, "2L", "final.safetensors"), "rb") as f:
        return s, f.read()


@pytest.fixture(scope="module")
def reference(work):
    """The three tasks run locally, uninterrupted."""
    r = sweep(work, "run", "tasks.jsonl", "--out", "local", "--jobs", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    return {n: result(os.path.join(work, "local", n)) for n in NAMES}


def test_job_array_runs_every_task(slurm, work, reference):
    out = "on slurm/array"  # a space in the path: the script's paths must be quoted
    r = submit(slurm, work, out)
    assert "3 tasks, 0 finished, 3 to run via slurm" in r.stdout, r.stdout + r.stderr
    job = job_id(r)
    script = open(os.path.join(work, out, "sweep.sbatch"), encoding="utf-8").read()
    assert "#SBATCH --array=0,1,2%2" in script.splitlines()
    assert " ArrayTaskThrottle=2 " in slurm.run("scontrol", "-o", "show", "job", job).stdout
    tasks = slurm.wait(job, timeout=DEADLINE)
    assert {i: (t.state, t.exit_code) for i, t in tasks.items()} == \
        {i: ("COMPLETED", "0:0") for i in range(3)}, slurm.logs()
    for i, n in enumerate(NAMES):
        folder = os.path.join(work, out, n)
        assert result(folder) == reference[n], f"{n} differs from the local run"
        # Slurm's own output file of the task: the runner's output, nothing else
        log = open(os.path.join(work, out, f"slurm-{job}_{i}.txt"), encoding="utf-8").read()
        assert "error" not in log.lower(), log
    # the same command again: nothing left to submit; the report of the finished sweep
    again = submit(slurm, work, out)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "3 tasks, 3 finished, 0 to run via slurm" in again.stdout
    assert "submitted job array" not in again.stdout
    assert "3 of 3 tasks finished" in again.stdout
    assert slurm.run("squeue", "-h").stdout.strip() == ""


def test_cancelled_task_resubmitted_alone_and_resumes(slurm, work, reference):
    out = os.path.join(work, "on slurm", "resume")
    # seed1's program stops where it opens its metrics log (a FIFO with no reader):
    # a running task that cannot finish on its own, however fast the machine
    gate = os.path.join(out, "seed1", "2L", "metrics.jsonl")
    hold(gate)
    job = job_id(submit(slurm, work, out))
    slurm.wait_task(job, 0, ("COMPLETED",), timeout=DEADLINE)
    slurm.wait_task(job, 2, ("COMPLETED",), timeout=DEADLINE)
    slurm.wait_task(job, 1, ("RUNNING",), timeout=DEADLINE)
    log = os.path.join(out, "seed1", "log.txt")
    deadline = time.monotonic() + DEADLINE
    while "running:" not in (open(log).read() if os.path.exists(log) else ""):
        assert time.monotonic() < deadline, "seed1's program did not start"
        time.sleep(0.1)
    # run the same command while seed1 still runs: it must not be submitted again
    during = submit(slurm, work, out)
    assert during.returncode == 0, during.stdout + during.stderr
    assert "1 still in the Slurm queue" in during.stdout, during.stdout
    assert "submitted job array" not in during.stdout
    queued = slurm.run("squeue", "-h", "--array", "-o", "%i").stdout.split()
    assert queued == [f"{job}_1"], queued

    slurm.cancel(job, 1)
    tasks = slurm.wait(job, timeout=DEADLINE)
    assert tasks[1].state == "CANCELLED" and tasks[0].state == tasks[2].state == "COMPLETED"
    assert not os.path.exists(os.path.join(out, "seed1", "summary.json"))
    assert "running:" in open(log).read()  # it had started: a task cut off mid-run

    release(gate)
    again = submit(slurm, work, out)
    assert "3 tasks, 2 finished, 1 to run via slurm" in again.stdout, again.stdout
    assert "#SBATCH --array=1%2" in open(os.path.join(out, "sweep.sbatch")).read()
    job2 = job_id(again)
    assert job2 != job
    tasks = slurm.wait(job2, timeout=DEADLINE)
    assert {i: (t.state, t.exit_code) for i, t in tasks.items()} == {1: ("COMPLETED", "0:0")}
    for n in NAMES:
        assert result(os.path.join(out, n)) == reference[n], f"{n} differs from the local run"

    # the report, from the run directories alone
    r = sweep(work, "report", "tasks.jsonl", "--out", out, "--columns", COLUMNS,
              "--plot", "tokens,icl_score", "--metrics", "metrics.jsonl")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 of 3 tasks finished" in r.stdout
    with open(os.path.join(out, "sweep.csv"), encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["task", "seed", *COLUMNS.split(",")]
    for row in rows[1:]:
        m = reference[row[0]][0]["models"]["2L"]
        assert (float(row[2]), float(row[3]), int(row[4])) == \
            (m["final_eval_loss"], m["icl_after"], int(row[1]))
    assert [row[0] for row in rows[1:]] == list(NAMES)
    assert os.path.getsize(os.path.join(out, "sweep.png")) > 5000


def test_script_submitted_by_hand_and_a_failing_task(slurm, work, reference):
    tasks = os.path.join(work, "two.jsonl")
    with open(tasks, "w", encoding="utf-8") as f:
        f.write('{"name": "good", "seed": 0}\n')
        f.write('{"name": "broken", "seed": 3, "args": ["--steps", "abc"]}\n')
    out = os.path.join(work, "on slurm", "by hand")
    r = sweep(work, "run", "two.jsonl", "--out", out, "--via", "slurm",
              "--sbatch=--cpus-per-task=2", "--sbatch=--time=10", env=slurm.env)
    assert r.returncode == 0 and "submitted job array" not in r.stdout, r.stdout + r.stderr
    script = os.path.join(out, "sweep.sbatch")
    assert "#SBATCH --array=0,1" in open(script).read().splitlines()  # no limit asked for
    # sbatch from another directory: the tasks still find the command's relative paths
    job = slurm.sbatch(script, cwd="/")
    shown = slurm.run("scontrol", "-o", "show", "job", job).stdout
    assert " CPUs/Task=2 " in shown and " TimeLimit=00:10:00 " in shown, shown
    tasks = slurm.wait(job, timeout=DEADLINE)
    assert {i: (t.state, t.exit_code) for i, t in tasks.items()} == \
        {0: ("COMPLETED", "0:0"), 1: ("FAILED", "1:0")}, slurm.logs()
    assert result(os.path.join(out, "good")) == reference["seed0"]
    assert "non-negative integer" in open(os.path.join(out, "broken", "log.txt")).read()
    said = open(os.path.join(out, f"slurm-{job}_1.txt")).read()
    assert "task broken failed (exit 2" in said, said
