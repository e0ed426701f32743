"""induct-sweep (scripts/induct-sweep) on the main job's per-model task: a tiny 2-layer
model trained and analysed by the study's stages (`study/runner.py task`: study-train,
then study-analyse) for three seeds, through the local process pool, GNU parallel, the
Slurm job-array script (run here the way Slurm would, task by task; test_sweep_slurm.py
submits whole studies to a real Slurm) and an mpirun task farm; finished tasks are
skipped on a restart, a failing task is reported and retried; the same seeds give the
same analyses whichever way the tasks ran; --done names the file that marks a task
finished (the study's: analysis.json). Environment (tests/meson.build): INDUCT_SWEEP,
STUDY_RUNNER, INDUCT_BUILD_DIR, MPIRUN (may be empty)."""
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tiny_text import WORDS, write_tiny_text

SWEEP = os.environ["INDUCT_SWEEP"]
RUNNER = os.environ["STUDY_RUNNER"]
BUILD = os.environ["INDUCT_BUILD_DIR"]
MPIRUN = os.environ.get("MPIRUN", "")
CI = os.environ.get("CI") == "true"
ANALYSE = ["--icl-windows", "64", "--icl-groups", "8", "--ablation-windows", "32",
           "--window-windows", "0"]  # the window rule on the per-step curve: faster
TRAIN = ["--model", "2L", "--d-model", "8", "--heads", "1", "--batch", "1", "--steps", "6",
         "--eval-every", "2", "--eval-batch", "4", "--block-tokens", "4096", "--warmup", "2"]
COLUMNS = "model.final_eval_loss,model.icl_after,config.model.seed"
DONE = ("--done", "analysis.json")


def task_cmd(corpus):
    """One model's stages, as study/runner.py gives them to induct-sweep."""
    return ([sys.executable, RUNNER, "task", "--out", "{out}", "--build", BUILD] + ANALYSE +
            ["--train", "--text", corpus, "--seed", "{seed}"] + TRAIN)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_tiny_text(tmp_path_factory.mktemp("corpus"), words=WORDS[:18])


def tasks_file(path, extra=None):
    rows = [{"name": f"seed{s}", "seed": s} for s in (0, 1, 2)] + (extra or [])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def sweep(*args, cmd=None, corpus=None, prefix=()):
    if cmd is None:
        cmd, args = task_cmd(corpus), args + DONE
    return subprocess.run([*prefix, sys.executable, SWEEP, *args, "--", *cmd],
                          capture_output=True, text=True)


def summaries(out, names=("seed0", "seed1", "seed2")):
    res = {}
    for n in names:
        with open(os.path.join(out, n, "analysis.json")) as f:
            s = json.load(f)
        m = s["model"]
        res[n] = (m["final_eval_loss"], m["icl_after"])
    return res


def mtimes(out):
    return {n: os.path.getmtime(os.path.join(out, n, "analysis.json"))
            for n in ("seed0", "seed1", "seed2")}


@pytest.fixture(scope="module")
def local(corpus, tmp_path_factory):
    d = tmp_path_factory.mktemp("local")
    tasks = tasks_file(d / "tasks.jsonl")
    out = str(d / "out")
    r = sweep("run", tasks, "--out", out, "--jobs", "2", "--columns", COLUMNS,
              "--plot", "tokens,icl_score", "--metrics", "metrics.jsonl", corpus=corpus)
    assert r.returncode == 0, r.stdout + r.stderr
    return tasks, out, r


def test_local_pool_table_and_figure(local):
    tasks, out, r = local
    assert "3 tasks, 0 finished, 3 to run via local" in r.stdout
    got = summaries(out)
    # the seeds matter: three different runs
    assert len({v for v in got.values()}) == 3
    with open(os.path.join(out, "sweep.csv")) as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["task", "seed", *COLUMNS.split(",")]
    for row in rows[1:]:
        name, seed = row[0], int(row[1])
        assert float(row[2]) == got[name][0] and float(row[3]) == got[name][1]
        assert int(row[4]) == seed  # the program ran with the task's seed
    assert [r_[0] for r_ in rows[1:]] == ["seed0", "seed1", "seed2"]
    assert os.path.getsize(os.path.join(out, "sweep.png")) > 5000


def test_restart_skips_finished_tasks(local, corpus):
    tasks, out, _ = local
    before = mtimes(out)
    r = sweep("run", tasks, "--out", out, corpus=corpus)
    assert r.returncode == 0, r.stderr
    assert "3 tasks, 3 finished, 0 to run" in r.stdout
    assert mtimes(out) == before


def test_failing_task_reported_and_retried(local, corpus, tmp_path):
    tasks = tasks_file(tmp_path / "tasks.jsonl",
                       [{"name": "broken", "seed": 3, "args": ["--steps", "abc"]}])
    out = str(tmp_path / "out")
    shutil.copytree(local[1], out)  # the three seeds are finished already
    r = sweep("run", tasks, "--out", out, corpus=corpus)
    assert r.returncode == 1
    assert "task broken failed (exit 2" in r.stderr
    assert "non-negative integer" in open(os.path.join(out, "broken", "log.txt")).read()
    assert "3 of 4 tasks finished" in r.stdout


def test_gnu_parallel_same_results(local, corpus, tmp_path):
    if not shutil.which("parallel"):
        if CI:
            pytest.fail("GNU parallel is missing (Debian: parallel)")
        pytest.skip("GNU parallel is not installed")
    tasks = tasks_file(tmp_path / "tasks.jsonl")
    out = str(tmp_path / "out")
    r = sweep("run", tasks, "--out", out, "--via", "parallel", "--jobs", "2", corpus=corpus)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(open(os.path.join(out, "jobs.txt")).read().splitlines()) == 3
    assert summaries(out) == summaries(local[1])


def test_slurm_array_script(local, corpus, tmp_path):
    tasks = tasks_file(tmp_path / "tasks.jsonl")
    out = str(tmp_path / "out")
    os.makedirs(os.path.join(out, "seed1"))
    shutil.copy(os.path.join(local[1], "seed1", "analysis.json"), os.path.join(out, "seed1"))
    r = sweep("run", tasks, "--out", out, "--via", "slurm", "--jobs", "2", corpus=corpus)
    assert r.returncode == 0, r.stderr
    text = open(os.path.join(out, "sweep.sbatch")).read()
    lines = text.splitlines()
    assert lines[0] == "#!/bin/sh"
    assert "#SBATCH --array=0,2%2" in lines  # the pending tasks, 2 at a time
    assert lines[-1].startswith("exec ") and ' one ' in lines[-1]
    assert '"$SLURM_ARRAY_TASK_ID"' in lines[-1]
    # run the array the way Slurm would: one shell per array index (test_sweep_slurm.py
    # submits to a real Slurm)
    for i in (0, 2):
        t = subprocess.run(["sh", os.path.join(out, "sweep.sbatch")],
                           env={**os.environ, "SLURM_ARRAY_TASK_ID": str(i)},
                           capture_output=True, text=True)
        assert t.returncode == 0, t.stderr
    assert summaries(out, ("seed0", "seed2")) == summaries(local[1], ("seed0", "seed2"))


def test_mpirun_task_farm(local, corpus, tmp_path):
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        mpi4py = None
    if not MPIRUN or mpi4py is None:
        if CI:
            pytest.fail("mpirun or mpi4py is missing (Debian: openmpi-bin python3-mpi4py)")
        pytest.skip("no mpirun or no mpi4py")
    tasks = tasks_file(tmp_path / "tasks.jsonl")
    out = str(tmp_path / "out")
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}
    r = subprocess.run([MPIRUN, "-np", "2", sys.executable, SWEEP, "run", tasks, "--out", out,
                        "--via", "mpirun", *DONE, "--", *task_cmd(corpus)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("3 of 3 tasks finished") == 1  # rank 0 reports
    assert summaries(out) == summaries(local[1])


@pytest.mark.parametrize("end", ["sys.exit(130)",
                                 "os.kill(os.getpid(), signal.SIGTERM)"])
def test_interrupted_task_reads_as_stopped(tmp_path, end):
    """A task ended by an interrupt (a shell's exit 130, or a signal) is reported as
    stopped, to be continued by the same command, not as failed; it still counts as
    unfinished (exit 1)."""
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"name": "a", "seed": 1}\n')
    out = str(tmp_path / "o")
    cmd = [sys.executable, "-c", "import os, signal, sys; " + end]
    r = sweep("run", str(tasks), "--out", out, "--done", "analysis.json", cmd=cmd)
    assert r.returncode == 1
    assert "task a stopped (exit " in r.stderr and "the same command continues" in r.stderr
    assert "failed" not in r.stderr


def test_ctrl_c_stops_the_sweep_cleanly(tmp_path):
    """Ctrl-C (SIGINT to the terminal's process group) while tasks run: the sweep and its
    tasks stop, the sweep says the same command continues, exits 130, and prints no
    traceback; the task reads as stopped."""
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"name": "a", "seed": 1}\n')
    out = tmp_path / "o"
    cmd = [sys.executable, "-c",
           "import sys, time; open(sys.argv[1], 'w').close(); time.sleep(60)",
           str(tmp_path / "started")]
    p = subprocess.Popen([sys.executable, SWEEP, "run", str(tasks), "--out", str(out),
                          "--done", "analysis.json", "--", *cmd],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    for _ in range(600):  # until the task runs (at most a minute)
        if (tmp_path / "started").exists():
            break
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "stopped; the same command continues" in err
    assert "Traceback" not in err and "failed" not in err


def test_done_names_the_finishing_file(tmp_path):
    """--done FILE: a task is finished when its folder holds FILE (here a program that
    writes it only on its second run); the table reads its columns from FILE."""
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"name": "a", "seed": 1}\n')
    out = str(tmp_path / "o")
    prog = ("import os, sys; d = sys.argv[1]; m = os.path.join(d, 'mark'); "
            "first = not os.path.exists(m); open(m, 'w').close(); "
            "first or open(os.path.join(d, 'analysis.json'), 'w').write('{\"x\": 7}'); "
            "sys.exit(1 if first else 0)")
    cmd = [sys.executable, "-c", prog, "{out}"]
    r = sweep("run", str(tasks), "--out", out, "--done", "analysis.json", "--columns", "x",
              cmd=cmd)
    assert r.returncode == 1 and "task a failed" in r.stderr
    r = sweep("run", str(tasks), "--out", out, "--done", "analysis.json", "--columns", "x",
              cmd=cmd)
    assert r.returncode == 0, r.stderr
    assert "1 of 1 tasks finished" in r.stdout and "| a | 1 | 7 |" in r.stdout
    r = sweep("run", str(tasks), "--out", out, "--done", "analysis.json", cmd=cmd)
    assert "1 tasks, 1 finished, 0 to run" in r.stdout
    r = sweep("run", str(tasks), "--out", out, "--done", "../x", cmd=cmd)
    assert r.returncode == 2 and "--done must be a file name" in r.stderr


@pytest.mark.parametrize("line, needle", [
    ('{"name": "a"}', 'integer "seed"'),
    ('{"seed": 1, "args": "x"}', '"args" must be a list'),
    ('{"seed": 1, "name": "a/b"}', "non-empty file name"),
    ("not json", "not JSON"),
])
def test_bad_task_files(tmp_path, line, needle):
    p = tmp_path / "t.jsonl"
    p.write_text(line + "\n")
    r = sweep("run", str(p), "--out", str(tmp_path / "o"), cmd=["true"])
    assert r.returncode == 2 and needle in r.stderr
