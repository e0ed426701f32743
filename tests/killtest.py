#!/usr/bin/env python3
"""Kill a run at random moments and check that nothing is lost (docs/hardening.md,
"Killed at any moment").

A module (for a study runner to reuse) and a command line:

    killtest.py train --train-run EXE [--kills N] [--steps S] [--seed K] [--dir D]
    killtest.py sweep --train-run EXE --sweep SCRIPT [--kills N] ...
    killtest.py full-disk --train-run EXE
    killtest.py ranks --mpi-train-run EXE --mpirun MPIRUN [--ranks P]
    killtest.py task --train-run EXE --out DIR [train-run options]   (a sweep task)

Every check compares with an uninterrupted run of the same command: a killed run is
resumed from its last snapshot (train-run --resume) or rerun (induct-sweep skips the
finished tasks), killed again at random, and so on, until it ends; then every snapshot,
the final weights and the metrics log (less its wall-clock field) must be the bytes of
the uninterrupted run. A kill lands at a uniformly random moment of the run's expected
duration, or (every third kill by default) the moment a snapshot's temporary file
appears, that is inside a snapshot write. The outcome never depends on when a kill
lands: any moment must resume to the same bits. Prints one line per kill and a final
"N passed, N failed" line; exit status 1 on any difference.
"""
import argparse
import hashlib
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SNAP = re.compile(r"^ckpt-(\d+)\.safetensors$")


# ---- killing ------------------------------------------------------------------------

def start(cmd, log=None, preexec=None):
    """Start cmd in a session of its own (so that a kill takes its children too)."""
    out = open(log, "ab") if log else subprocess.DEVNULL
    try:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=preexec)
    finally:
        if log:
            out.close()


def kill_session(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def tmp_files(d):
    """Temporary files of atomic writes (`<path>.tmp.<pid>.<n>`) under d."""
    found = []
    for root, _, files in os.walk(d):
        found += [os.path.join(root, f) for f in files if ".tmp." in f]
    return found


def run_or_kill(cmd, delay=None, watch=None, log=None):
    """Run cmd; kill its session with SIGKILL after `delay` seconds, or (watch = a
    directory) as soon as a temporary file of an atomic write appears under it. Returns
    ("finished", returncode) or ("killed", seconds after the start); run_or_kill.pid is
    the process id of the last command started."""
    p = start(cmd, log)
    run_or_kill.pid = p.pid
    t0 = time.monotonic()
    while True:
        if p.poll() is not None:
            run_or_kill.elapsed = time.monotonic() - t0
            return "finished", p.returncode
        if watch is not None:
            if tmp_files(watch):
                kill_session(p)
                return "killed", time.monotonic() - t0
        elif time.monotonic() - t0 >= delay:
            kill_session(p)
            return "killed", time.monotonic() - t0
        time.sleep(0.0005 if watch is not None else 0.002)


# ---- train-run ---------------------------------------------------------------------

def snapshots(d):
    """{step: path} of the ckpt-<step>.safetensors files in d."""
    out = {}
    for f in os.listdir(d):
        m = SNAP.match(f)
        if m:
            out[int(m.group(1))] = os.path.join(d, f)
    return out


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def metrics_records(path):
    """The metrics log's records without the wall-clock field."""
    recs = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            try:
                r = json.loads(line)
            except ValueError:
                r = {"unreadable line": i + 1}  # a torn record: never a reference's
            if isinstance(r, dict):
                r.pop("elapsed_seconds", None)
            recs.append(r)
    return recs


def train_cmd(exe, out, opts, resume=None):
    return [exe, "--out", out] + opts + (["--resume", resume] if resume else [])


def last_snapshot(d):
    snaps = snapshots(d)
    return snaps[max(snaps)] if snaps else None


def reference(exe, d, opts):
    """An uninterrupted run into d; returns its duration in seconds."""
    os.makedirs(d, exist_ok=True)
    t0 = time.monotonic()
    r = subprocess.run(train_cmd(exe, d, opts), stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode:
        raise RuntimeError(f"reference run failed: {r.stderr}")
    return time.monotonic() - t0


def compare_runs(got, want):
    """Differences between two train-run directories (snapshots, metrics)."""
    problems = []
    a, b = snapshots(got), snapshots(want)
    if sorted(a) != sorted(b):
        problems.append(f"snapshots {sorted(a)} != {sorted(b)}")
    for s in sorted(set(a) & set(b)):
        if sha256(a[s]) != sha256(b[s]):
            problems.append(f"ckpt-{s} differs")
    if metrics_records(os.path.join(got, "metrics.jsonl")) != \
            metrics_records(os.path.join(want, "metrics.jsonl")):
        problems.append("metrics.jsonl differs")
    left = tmp_files(got)
    return problems, left


def train_trials(exe, work, kills, rng, opts, write_every=3, max_chain=3, report=print):
    """`kills` kills of train-run runs in chains: each chain starts a fresh run, kills it
    at a random moment (or inside a snapshot write), resumes from the last snapshot,
    possibly kills again (up to max_chain kills), and runs to the end; then compares with
    the uninterrupted run. Returns (passed, failed, kills inside a write)."""
    ref = os.path.join(work, "reference")
    window = reference(exe, ref, opts)
    passed = failed = inside = done = chain_no = 0
    while done < kills:
        chain_no += 1
        d = os.path.join(work, f"chain-{chain_no}")
        os.makedirs(d)
        chain = []
        while True:
            resume = last_snapshot(d)
            cmd = train_cmd(exe, d, opts, resume)
            if len(chain) < max_chain and done < kills:
                in_write = done % write_every == write_every - 1
                kind, v = run_or_kill(cmd, delay=rng.uniform(0, window),
                                      watch=d if in_write else None)
            else:
                kind, v = run_or_kill(cmd, delay=float("inf"))
            if kind == "finished":
                if v != 0:
                    chain.append(f"exit {v} resuming from {resume}")
                elif not chain:  # a whole run: the machine's current pace sets the window
                    window = run_or_kill.elapsed
                break
            done += 1
            # the kill left this process's write's temporary file: it was inside the write
            caught = any(f".tmp.{run_or_kill.pid}." in x for x in tmp_files(d))
            inside += caught
            chain.append(f"{'write' if caught else 'step'}@{v:.2f}s"
                         f"(last ckpt {os.path.basename(last_snapshot(d) or '-')})")
        problems, left = compare_runs(d, ref)
        if left:  # train-run removes a killed write's temporary file when it starts again
            problems.append(f"temporary files left: {[os.path.basename(x) for x in left]}")
        ok = not problems and not any(c.startswith("exit") for c in chain)
        passed += ok
        failed += not ok
        report(f"train chain {chain_no}: kills {', '.join(chain) or 'none (finished first)'}: "
               f"{'ok' if ok else 'FAILED ' + '; '.join(problems)}")
        shutil.rmtree(d)
    return passed, failed, inside


# ---- a sweep task and the sweep runner ------------------------------------------------

def task_main(a, extra):
    """A sweep task: train-run into --out, resuming from its last snapshot if the task
    was killed before, then summary.json (written atomically) with the final evaluation
    loss and the final snapshot's hash."""
    opts = extra
    resume = last_snapshot(a.out)
    r = subprocess.run(train_cmd(a.train_run, a.out, opts, resume))
    if r.returncode:
        return r.returncode
    snaps = snapshots(a.out)
    final = metrics_records(os.path.join(a.out, "metrics.jsonl"))[-1]
    summary = {"final_eval_loss": final.get("eval_loss"), "step": final["step"],
               "final_snapshot_sha256": sha256(snaps[max(snaps)])}
    tmp = os.path.join(a.out, "summary.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(summary, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(a.out, "summary.json"))
    return 0


def sweep_cmd(sweep, exe, tasks, out, opts):
    me = os.path.abspath(__file__)
    return [sys.executable, sweep, "run", tasks, "--out", out, "--jobs", "2",
            "--columns", "final_eval_loss,step,final_snapshot_sha256", "--",
            sys.executable, me, "task", "--train-run", exe, "--out", "{out}"] + opts


def sweep_outputs(out, names):
    res = {}
    for n in names:
        with open(os.path.join(out, n, "summary.json"), encoding="utf-8") as f:
            res[n] = json.load(f)
        res[n + "/metrics"] = metrics_records(os.path.join(out, n, "metrics.jsonl"))
    with open(os.path.join(out, "sweep.csv"), encoding="utf-8") as f:
        res["sweep.csv"] = f.read()
    return res


def sweep_trials(sweep, exe, work, kills, rng, opts, max_chain=3, report=print):
    """Kill the whole sweep (runner, tasks, train-run: its session) at random moments,
    rerun it, and compare every summary, metrics log and the table with an uninterrupted
    sweep. Tasks are three train-run models (1, 2 and 1 layers). Returns (passed, failed)."""
    tasks = os.path.join(work, "tasks.jsonl")
    rows = [{"name": "a", "seed": 1, "args": ["--layers", "1"]},
            {"name": "b", "seed": 2, "args": ["--layers", "2"]},
            {"name": "c", "seed": 3, "args": ["--layers", "3"]}]
    with open(tasks, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    names = [r["name"] for r in rows]
    ref = os.path.join(work, "sweep-reference")
    t0 = time.monotonic()
    r = subprocess.run(sweep_cmd(sweep, exe, tasks, ref, opts), capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("reference sweep failed: " + r.stdout + r.stderr)
    window = time.monotonic() - t0
    want = sweep_outputs(ref, names)
    passed = failed = done = chain_no = 0
    while done < kills:
        chain_no += 1
        out = os.path.join(work, f"sweep-{chain_no}")
        chain = []
        while True:
            cmd = sweep_cmd(sweep, exe, tasks, out, opts)
            if len(chain) < max_chain and done < kills:
                kind, v = run_or_kill(cmd, delay=rng.uniform(0, window))
            else:
                kind, v = run_or_kill(cmd, delay=float("inf"))
            if kind == "finished":
                if v != 0:
                    chain.append(f"exit {v}")
                elif not chain:  # a whole sweep: the machine's current pace sets the window
                    window = run_or_kill.elapsed
                break
            done += 1
            finished = sum(os.path.exists(os.path.join(out, n, "summary.json")) for n in names)
            chain.append(f"@{v:.2f}s({finished} of 3 tasks finished)")
        try:
            ok = not any(c.startswith("exit") for c in chain) and sweep_outputs(out, names) == want
        except (OSError, ValueError):
            ok = False
        passed += ok
        failed += not ok
        report(f"sweep chain {chain_no}: kills {', '.join(chain) or 'none'}: "
               f"{'ok' if ok else 'FAILED'}")
        shutil.rmtree(out)
    return passed, failed


def opts_steps(opts):
    return opts[opts.index("--steps") + 1]


# ---- a full disk --------------------------------------------------------------------

def file_limit(nbytes):
    """preexec_fn: files may not grow beyond nbytes (RLIMIT_FSIZE); SIGXFSZ ignored so
    that the write fails with EFBIG, as a full disk's fails with ENOSPC."""
    def f():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return f


def full_disk_trials(exe, work, opts, report=print):
    """A snapshot write, then a metrics-log write, that hit the file-size limit: train-run
    must fail with a clear message, the previous snapshots must be intact and leave no
    temporary file, and resuming without the limit must reach the uninterrupted run's
    bits. opts must give --steps 16 (snapshots at 0, 1, 2, 4, 8, 16) and an evaluation at
    step 9 (--eval-every 1)."""
    ref = os.path.join(work, "reference-disk")
    reference(exe, ref, opts)
    half = [o if o != opts_steps(opts) else "8" for o in opts]
    passed = failed = 0
    for what in ("snapshot", "metrics"):
        d = os.path.join(work, f"disk-{what}")
        os.makedirs(d)
        subprocess.run(train_cmd(exe, d, half), check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        before = {s: sha256(p) for s, p in snapshots(d).items()}
        log = os.path.join(d, "metrics.jsonl")
        # snapshot: no file may reach a snapshot's size; metrics: the log may grow by 40
        # bytes (the record of step 9 does not fit; the snapshot of step 16 comes later)
        limit = (os.path.getsize(snapshots(d)[8]) - 1 if what == "snapshot"
                 else os.path.getsize(log) + 40)
        r = subprocess.run(train_cmd(exe, d, opts, snapshots(d)[8]), capture_output=True,
                           text=True, preexec_fn=file_limit(limit))
        msg = (r.stdout + r.stderr).strip().splitlines()
        expect = ("ckpt-16.safetensors" if what == "snapshot" else "cannot write the metrics log")
        problems = []
        if r.returncode != 1:
            problems.append(f"exit {r.returncode}")
        if not any(expect in line and "File too large" in line for line in msg):
            problems.append(f"no clear message naming '{expect}': {msg[-2:]}")
        after = {s: sha256(p) for s, p in snapshots(d).items()}
        if after != before:
            problems.append(f"snapshots changed: {sorted(before)} -> {sorted(after)}")
        if tmp_files(d):
            problems.append(f"temporary files left: {tmp_files(d)}")
        r2 = subprocess.run(train_cmd(exe, d, opts, snapshots(d)[8]), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
        diff, _ = compare_runs(d, ref)
        if r2.returncode or diff:
            problems.append(f"resuming: exit {r2.returncode}, {diff}")
        ok = not problems
        passed += ok
        failed += not ok
        report(f"full disk during a {what} write: "
               f"{'ok' if ok else 'FAILED ' + '; '.join(problems)} ({[m for m in msg if expect in m][:1]})")
        shutil.rmtree(d)
    return passed, failed


# ---- a rank that dies ---------------------------------------------------------------

def rank_pids(mpirun_pid, exe):
    """{rank: pid} of the processes of exe in mpirun's session."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.getsid(int(pid)) != os.getsid(mpirun_pid):
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if os.path.basename(argv[0].decode()) != os.path.basename(exe):
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
        except (OSError, ProcessLookupError):
            continue
        r = env.get(b"OMPI_COMM_WORLD_RANK") or env.get(b"PMI_RANK")
        if r is not None:
            out[int(r)] = int(pid)
    return out


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def rank_trial(exe, mpirun, work, ranks, victim, report=print):
    """mpirun -np `ranks` of the data-parallel driver (tests/mpi_train_run.c); once
    snapshot 4 exists, rank `victim` is killed with SIGKILL. The other ranks must stop
    (mpirun exits non-zero and says which rank died; no rank process is left); the
    seconds from the kill until every rank process has ended are reported. Resuming from the last snapshot
    on the same ranks to step 2·(its step) must give that snapshot the bytes of an
    uninterrupted one-process run. Returns (passed, failed, seconds)."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    d = os.path.join(work, "ranks")
    os.makedirs(d)
    cmd = [mpirun, "-np", str(ranks), exe, "--out", d, "--steps", "1000000"]
    log = os.path.join(work, "ranks.log")
    with open(log, "wb") as lf:
        p = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
    while 4 not in snapshots(d) and p.poll() is None:
        time.sleep(0.01)
    pids = rank_pids(p.pid, exe)
    problems, stop = [], None
    if p.poll() is not None or victim not in pids:
        problems.append(f"the run ended early or rank {victim} was not found ({pids})")
        kill_session(p)
    else:
        os.kill(pids[victim], signal.SIGKILL)
        t0 = time.monotonic()
        p.wait()
        stop = time.monotonic() - t0
        if p.returncode == 0:
            problems.append("mpirun exited 0 after a rank died")
    with open(log, errors="replace") as f:
        text = f.read()
    said = [l for l in text.splitlines() if "signal 9" in l or "Killed" in l]
    if not said:
        problems.append("no message about the dead rank: " + text[-300:])
    if stop is not None:  # every rank process gone (or a zombie): the end of the stop
        while any(alive(pid) for pid in pids.values()):
            time.sleep(0.005)
        stop = time.monotonic() - t0
    last = last_snapshot(d)
    target = str(2 * max(snapshots(d)))
    r = subprocess.run([mpirun, "-np", str(ranks), exe, "--out", d, "--steps", target,
                        "--resume", last], env=env, capture_output=True, text=True)
    ref = os.path.join(work, "ranks-reference")
    os.makedirs(ref)
    subprocess.run([exe, "--out", ref, "--steps", target], check=True, env=env,
                   capture_output=True)
    if r.returncode:
        problems.append(f"resume failed: {r.stdout[-300:]} {r.stderr[-300:]}")
    else:
        diff, _ = compare_runs(d, ref)
        problems += diff
    ok = not problems
    report(f"rank {victim} of {ranks} killed after snapshot 4: "
           f"{'ok' if ok else 'FAILED ' + '; '.join(problems)}; the other ranks stopped "
           f"{'%.2f s after the kill' % stop if stop is not None else '-'} "
           f"({said[0].strip()[:110] if said else ''}); resumed from "
           f"{os.path.basename(last or '-')} to step {target}")
    return int(ok), int(not ok), stop


# ---- command line -------------------------------------------------------------------

def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["task"]:  # the rest is train-run's, less --train-run and --out
        tp = argparse.ArgumentParser(prog="killtest.py task")
        tp.add_argument("--train-run", required=True)
        tp.add_argument("--out", required=True)
        ta, extra = tp.parse_known_args(argv[1:])
        return task_main(ta, extra)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["train", "sweep", "full-disk", "ranks", "all"])
    ap.add_argument("--train-run", help="build/examples/train-run")
    ap.add_argument("--sweep", help="scripts/induct-sweep")
    ap.add_argument("--mpi-train-run", help="build/tests/mpi_train_run")
    ap.add_argument("--mpirun", default="")
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--kills", type=int, default=6, help="train kills (sweep: a third)")
    ap.add_argument("--sweep-kills", type=int, default=None)
    ap.add_argument("--steps", default="16")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    a = ap.parse_args(argv)
    rng = random.Random(a.seed)
    work = a.dir or tempfile.mkdtemp(prefix="induct-killtest-")
    os.makedirs(work, exist_ok=True)
    opts = ["--steps", a.steps, "--eval-every", "1", "--threads", "1"]
    t0 = time.monotonic()
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    passed = failed = inside = 0
    try:
        if a.what in ("train", "all"):
            t1 = time.monotonic()
            p, f, i = train_trials(a.train_run, work, a.kills, rng, opts)
            print(f"train-run phase: {time.monotonic() - t1:.0f} s wall")
            passed, failed, inside = passed + p, failed + f, inside + i
            print(f"train-run: {a.kills} kills ({i} inside a snapshot write): "
                  f"{p} chains resumed bit-identically, {f} not")
        if a.what in ("sweep", "all"):
            n = a.sweep_kills if a.sweep_kills is not None else max(1, a.kills // 3)
            t1 = time.monotonic()
            p, f = sweep_trials(a.sweep, a.train_run, work, n, rng,
                                ["--steps", a.steps, "--eval-every", "1", "--threads", "1"])
            passed, failed = passed + p, failed + f
            print(f"induct-sweep: {n} kills: {p} sweeps rerun to identical results, {f} not "
                  f"({time.monotonic() - t1:.0f} s wall)")
        if a.what in ("full-disk", "all"):
            p, f = full_disk_trials(a.train_run, work, ["--steps", "16", "--eval-every", "1",
                                                         "--threads", "1"])
            passed, failed = passed + p, failed + f
        if a.what in ("ranks", "all") and a.mpi_train_run and a.mpirun:
            p, f, _ = rank_trial(a.mpi_train_run, a.mpirun, work, a.ranks, 1)
            passed, failed = passed + p, failed + f
    finally:
        if not a.dir:
            shutil.rmtree(work, ignore_errors=True)
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"time: {time.monotonic() - t0:.0f} s wall, "
          f"{c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime:.0f} s CPU of the runs")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
