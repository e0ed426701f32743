"""The small-model study on a real Slurm: a single-node cluster (munged, slurmctld, slurmd;
tests/slurm_cluster.py) runs a tiny study (the 14 models of scripts/zoo.sh, d_model 8, a
few steps) submitted by `scripts/zoo.sh --via slurm --submit` as real job arrays with
sbatch, one per group. One task (the 2-layer model) is held where it opens its metrics log
and cancelled with scancel while it runs; the same command again submits that model alone,
its run finishes with the weights of an uninterrupted local run, and the command run once
more builds the report (zoo.json, zoo.md, the figures) from the run directories. Skips
only where Slurm cannot start (not root, slurm-wlm or munge missing; under CI=true a
missing package fails). Environment (tests/meson.build): ZOO_SH, INDUCT_BUILD_DIR."""
import json
import os
import random
import re
import subprocess
import time

from slurm_cluster import hold, release, slurm  # noqa: F401  (slurm: the cluster fixture)

ZOO_SH = os.environ["ZOO_SH"]
BUILD = os.environ["INDUCT_BUILD_DIR"]
TINY = ["--steps", "4", "--d-model", "8", "--heads", "1", "--batch", "1", "--eval-every", "2",
        "--eval-batch", "4", "--block-tokens", "4096", "--warmup", "2", "--seq-len", "128",
        "--allow-short", "--icl-windows", "32", "--icl-groups", "8", "--ablation-windows",
        "16", "--window-windows", "0", "--threads", "1"]
GROUPS = {"attn": 5, "attn-deep": 3, "mlp": 6}
DEADLINE = 600  # seconds: a bound for failing, never a timing check


def zoo(work, out, *extra, env=None):
    cmd = ["sh", ZOO_SH, "--out", out, "--corpus", "corpus.txt", "--bytes", "--data", "data",
           "--build", BUILD] + TINY + list(extra)
    return subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True,
                          timeout=DEADLINE)


def test_zoo_as_slurm_job_arrays(slurm, tmp_path):
    work = str(tmp_path)
    rng = random.Random(8)
    words = "the and of to in that he shall unto for his a lord they be is him not".split()
    lines = []
    while sum(map(len, lines)) < 60000:
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(5, 15))) + ".\n")
    with open(os.path.join(work, "corpus.txt"), "w") as f:
        f.write("".join(lines))
    # the reference: the 2-layer model's run of the same zoo, locally and uninterrupted
    ref = zoo(work, "local", "--no-report")
    assert ref.returncode == 0, ref.stdout[-3000:] + ref.stderr[-3000:]

    out = os.path.join(work, "on slurm")  # a space: the scripts' paths must be quoted
    gate = os.path.join(out, "attn", "2L", "metrics.jsonl")
    hold(gate)
    r = zoo(work, out, "--via", "slurm", "--submit", env=slurm.env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    jobs = re.findall(r"submitted job array (\d+)", r.stdout)
    assert len(jobs) == 3, r.stdout
    assert "has unfinished models" in r.stderr  # no report yet
    for g, n in GROUPS.items():
        script = open(os.path.join(out, g, "sweep.sbatch"), encoding="utf-8").read()
        assert "#SBATCH --array=%s" % ",".join(map(str, range(n))) in script.splitlines(), g
    attn = jobs[0]
    order = [json.loads(line)["name"] for line in open(os.path.join(out, "attn", "tasks.jsonl"))]
    i2 = order.index("2L")
    for job in jobs[1:]:
        tasks = slurm.wait(job, timeout=DEADLINE)
        assert all((t.state, t.exit_code) == ("COMPLETED", "0:0") for t in tasks.values()), \
            slurm.logs()
    for i in range(len(order)):
        if i != i2:
            slurm.wait_task(attn, i, ("COMPLETED",), timeout=DEADLINE)
    slurm.wait_task(attn, i2, ("RUNNING",), timeout=DEADLINE)
    # study-train writes config.json at its start, then stops at the held metrics log
    started = os.path.join(out, "attn", "2L", "config.json")
    deadline = time.monotonic() + DEADLINE
    while not os.path.exists(started):
        assert time.monotonic() < deadline, "2L's task did not start"
        time.sleep(0.1)
    slurm.cancel(attn, i2)
    tasks = slurm.wait(attn, timeout=DEADLINE)
    assert tasks[i2].state == "CANCELLED", tasks
    assert not os.path.exists(os.path.join(out, "attn", "2L", "analysis.json"))

    # the same command again: the cancelled model alone is submitted; the finished groups
    # get their reports
    release(gate)
    r = zoo(work, out, "--via", "slurm", "--submit", env=slurm.env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    again = re.findall(r"submitted job array (\d+)", r.stdout)
    assert len(again) == 1 and again[0] not in jobs, r.stdout
    assert "#SBATCH --array=%u" % i2 in open(os.path.join(out, "attn", "sweep.sbatch")).read()
    assert os.path.exists(os.path.join(out, "mlp", "summary.json"))
    tasks = slurm.wait(again[0], timeout=DEADLINE)
    assert {i: (t.state, t.exit_code) for i, t in tasks.items()} == {i2: ("COMPLETED", "0:0")}
    with open(os.path.join(out, "attn", "2L", "final.safetensors"), "rb") as f, \
            open(os.path.join(work, "local", "attn", "2L", "final.safetensors"), "rb") as g:
        assert f.read() == g.read()  # the resumed model ends as the uninterrupted one

    # once more: nothing left to run, the groups' reports and the cross-model report
    r = zoo(work, out, "--via", "slurm", "--submit", env=slurm.env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "submitted job array" not in r.stdout
    z = json.load(open(os.path.join(out, "zoo.json")))
    assert len(z["models"]) == 14 and set(z["checks"]) == {f"C{i}" for i in range(1, 7)}
    for f in ("zoo.md", "icl.png", "pca.png", "heads.png", "slope.png"):
        assert os.path.getsize(os.path.join(out, f)) > 1000, f
    assert slurm.run("squeue", "-h").stdout.strip() == ""
