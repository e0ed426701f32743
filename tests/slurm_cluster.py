"""A real single-node Slurm for tests: munged, slurmctld and slurmd on this machine.

Debian's slurm-wlm and munge (scripts/setup-debian.sh installs them). Everything lives in
one directory of the test's: its own slurm.conf (clients and daemons find it through
SLURM_CONF, nothing is written to /etc), a munge key made for the test, the state, spool
and log directories, the pid files, and two TCP ports picked free at start, so that a
leftover or concurrent instance (another test's cluster, a crashed run) is not in its way.
The daemons run as children of the test process (in the foreground, each with a parent-
death signal, so that they do not outlive even a killed test; a job running at that
moment can) and are stopped by the pids in their pid files. Jobs run as the submitting
user on this host; the node has this machine's CPUs (`slurmd -C`), one per array task
by default.

Use from a test module in tests/ (pytest puts tests/ on sys.path):

    from slurm_cluster import slurm  # noqa: F401  (the module-scoped fixture)

    def test_array(slurm, tmp_path):
        script = tmp_path / "job.sbatch"
        script.write_text("#!/bin/sh\\n#SBATCH --array=0-2\\necho $SLURM_ARRAY_TASK_ID\\n")
        job = slurm.sbatch(script, "--chdir", str(tmp_path))
        tasks = slurm.wait(job, timeout=120)   # a deadline for failure, not a timing check
        assert {i: t.state for i, t in tasks.items()} == {i: "COMPLETED" for i in range(3)}

The fixture skips with the reason when Slurm cannot start here (not root; a program of
slurm-wlm or munge missing), and a session that then passed no test exits with 77
(meson's SKIP); under CI=true a missing program fails the test instead (CI installs
them). Without pytest: `with SlurmCluster(directory) as c: ...`, or
`python3 tests/slurm_cluster.py [DIR]` brings one up for trying things by hand.

SlurmCluster(root)          root: an empty or absent directory that the cluster owns
  .start(timeout=60)        starts the three daemons and waits until `sinfo` shows the
                            node idle; on failure raises SlurmError with the daemons' logs
  .stop()                   cancels every job, stops slurmd, slurmctld and munged by their
                            pid files, then kills what is left of the jobs (every process
                            whose environment names this cluster's slurm.conf); safe to
                            call twice; `with` calls it
  .env                      the environment for anything that talks to this cluster:
                            os.environ plus SLURM_CONF (pass env=cluster.env to subprocess
                            calls of sbatch or of a program that calls it). sbatch passes
                            it on to the jobs (--export=ALL, Slurm's default).
  .conf, .root, .node       the slurm.conf path, the directory, the node's name
  .run(*argv, check=True, timeout=60, cwd=None) -> CompletedProcess (text)
                            a command against this cluster (sinfo, squeue, scontrol, ...);
                            with check, a non-zero exit raises SlurmError with its stderr
  .sbatch(script, *options, cwd=None) -> str
                            submits (sbatch --parsable, run in cwd: a job's default
                            working directory) and returns the job id
  .tasks(job) -> {index: Task}
                            the job's tasks now (a job array's indices; None for a plain
                            job); Task has .job_id ("JOB_INDEX" for an array's task, as
                            squeue and scancel name it), .index, .state (COMPLETED, FAILED,
                            CANCELLED, RUNNING, PENDING, ...) and .exit_code ("status:signal")
  .wait(job, timeout=120) -> {index: Task}
                            polls until every task has ended (a final state and nothing of
                            the job left in squeue); past the deadline raises SlurmError
                            with squeue, the tasks and the daemons' logs
  .wait_task(job, index, states=("RUNNING",), timeout=120) -> Task
                            polls until one task is in one of `states`; raises SlurmError
                            when it ends in another state or past the deadline
  .cancel(job, index=None)  scancel the job, or one task of an array
  .logs(lines=40) -> str    the tails of the daemons' logs (every SlurmError carries them)

hold(path) / release(path)  a deterministic point inside a running task: a FIFO at a path
                            that the task's program opens for writing stops the program
                            there (no reader ever comes) until the task is cancelled, with
                            no race against the task's end; release removes the FIFO.

Job records stay for MinJobAge = 600 s after a job ends, so `tasks` and `wait` see them.
"""
import contextlib
import ctypes
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

PROGRAMS = {"munged": "munge", "slurmctld": "slurm-wlm (slurmctld)",
            "slurmd": "slurm-wlm (slurmd)",
            "sbatch": "slurm-wlm (slurm-client)", "squeue": "slurm-wlm (slurm-client)",
            "scontrol": "slurm-wlm (slurm-client)", "scancel": "slurm-wlm (slurm-client)",
            "sinfo": "slurm-wlm (slurm-client)"}
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
         "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
PR_SET_PDEATHSIG = 1


class SlurmError(RuntimeError):
    pass


@dataclass
class Task:
    job_id: str
    index: object  # the array index (int), or None for a plain job
    state: str
    exit_code: str


def which(program):
    """The program's path on PATH or in /usr/sbin, /sbin (the daemons' place), or None."""
    return shutil.which(program, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def missing_programs():
    """The programs of slurm-wlm and munge that are not installed, with their packages."""
    return {p: pkg for p, pkg in PROGRAMS.items() if not which(p)}


def cannot_start():
    """(reason, is_missing_package) when Slurm cannot start here, else None."""
    miss = missing_programs()
    if miss:
        pkgs = sorted(set(v.split(" ")[0] for v in miss.values()))
        return (f"Slurm is not installed: {', '.join(sorted(miss))} missing "
                f"(Debian: apt-get install {' '.join(pkgs)}; scripts/setup-debian.sh)", True)
    if os.geteuid() != 0:
        return (f"a single-node Slurm needs root (slurmd starts each job as its user); this "
                f"test runs as uid {os.geteuid()}", False)
    return None


def hold(path):
    """Make `path` a FIFO: a program that opens it for writing stops there."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    os.mkfifo(path)


def release(path):
    """Remove the FIFO that `hold` made (the next run of the task writes a file there)."""
    os.unlink(path)


def _free_ports(n):
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("", 0))  # all addresses, as the daemons bind
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _die_with_parent():
    # runs in the child between fork and exec: the daemon gets SIGTERM when the test
    # process ends, however it ends
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def _expand(spec):
    """Array indices of an ArrayTaskId field: "3", "0-2%2", "1,4-5", "0-10:2"."""
    out = []
    for part in spec.split("%")[0].split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", part)
        if not m:
            raise SlurmError(f"cannot read the array indices {spec!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        out.extend(range(lo, hi + 1, int(m.group(3) or 1)))
    return out


class SlurmCluster:
    def __init__(self, root):
        self.root = os.path.abspath(str(root))
        self.conf = os.path.join(self.root, "slurm.conf")
        self.env = {**os.environ, "SLURM_CONF": self.conf}
        self.node = None
        self._procs = {}
        self._logs = {}
        self._started = False

    # -- start ------------------------------------------------------------------
    def _path(self, *parts):
        return os.path.join(self.root, *parts)

    def _write_conf(self):
        r = subprocess.run([which("slurmd"), "-C"], capture_output=True, text=True, timeout=30,
                           env={k: v for k, v in os.environ.items() if k != "SLURM_CONF"})
        line = next((ln for ln in r.stdout.splitlines() if ln.startswith("NodeName=")), None)
        if r.returncode or not line:
            raise SlurmError(f"slurmd -C did not describe this machine: {r.stdout}{r.stderr}")
        self.node = line.split()[0].split("=", 1)[1]
        ctld_port, d_port = _free_ports(2)
        p = self._path
        conf = f"""\
# A single-node Slurm for tests (tests/slurm_cluster.py); everything under {self.root}
ClusterName=induct-test
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={p("munge", "munge.socket")}
StateSaveLocation={p("state")}
SlurmdSpoolDir={p("spool")}
SlurmctldPidFile={p("run", "slurmctld.pid")}
SlurmdPidFile={p("run", "slurmd.pid")}
SlurmctldLogFile={p("log", "slurmctld.log")}
SlurmdLogFile={p("log", "slurmd.log")}
PlugStackConfig={p("plugstack.conf")}
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=600
KillWait=2
{line} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
        with open(self.conf, "w", encoding="utf-8") as f:
            f.write(conf)
        open(p("plugstack.conf"), "w").close()

    def _spawn(self, name, argv):
        log = open(self._path("log", f"{name}.out"), "wb")
        self._logs[name] = log
        self._procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, env=self.env,
                                             preexec_fn=_die_with_parent)

    def _check_alive(self, what):
        for name, proc in self._procs.items():
            if proc.poll() is not None:
                raise SlurmError(f"{name} exited with status {proc.returncode} while {what}"
                                 f"\n{self.logs()}")

    def start(self, timeout=60):
        os.makedirs(self.root, exist_ok=True)
        if os.listdir(self.root):
            raise SlurmError(f"{self.root} is not empty: a cluster starts in a fresh directory")
        for d in ("munge", "state", "spool", "log", "run"):
            os.makedirs(self._path(d))
        os.chmod(self._path("munge"), 0o755)  # clients reach the socket
        os.makedirs(self._path("munge", "key"), mode=0o700)
        key = self._path("munge", "key", "munge.key")
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(1024))
        self._write_conf()
        self._started = True
        deadline = time.monotonic() + timeout
        self._spawn("munged", [which("munged"), "--foreground", "--force", f"--key-file={key}",
                               f"--socket={self._path('munge', 'munge.socket')}",
                               f"--pid-file={self._path('run', 'munged.pid')}",
                               f"--log-file={self._path('log', 'munged.log')}",
                               f"--seed-file={self._path('munge', 'munged.seed')}"])
        while not os.path.exists(self._path("munge", "munge.socket")):
            self._check_alive("starting")
            if time.monotonic() > deadline:
                raise SlurmError(f"munged made no socket in {timeout} s\n{self.logs()}")
            time.sleep(0.1)
        self._spawn("slurmctld", [which("slurmctld"), "-D"])
        self._spawn("slurmd", [which("slurmd"), "-D"])
        state = ""
        while True:
            self._check_alive("waiting for the node")
            r = self.run("sinfo", "-h", "-N", "-o", "%T", check=False, timeout=30)
            state = (r.stdout + r.stderr).strip()
            if r.returncode == 0 and state == "idle":
                return self
            if time.monotonic() > deadline:
                node = self.run("scontrol", "show", "node", check=False).stdout
                raise SlurmError(f"the node is not idle after {timeout} s (sinfo: {state!r})"
                                 f"\n{node}\n{self.logs()}")
            time.sleep(0.2)

    # -- clients ----------------------------------------------------------------
    def run(self, *argv, check=True, timeout=60, cwd=None):
        r = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                           env=self.env, timeout=timeout, cwd=cwd)
        if check and r.returncode:
            raise SlurmError(f"{' '.join(map(str, argv))}: exit {r.returncode}: "
                             f"{r.stderr.strip()}\n{self.logs()}")
        return r

    def sbatch(self, script, *options, cwd=None):
        r = self.run("sbatch", "--parsable", *options, script, cwd=cwd)
        return r.stdout.strip().split(";")[0]

    def tasks(self, job):
        r = self.run("scontrol", "-o", "show", "job", job)
        out = {}
        for ln in r.stdout.splitlines():
            field = {k: re.search(rf"(?:^| ){k}=(\S+)", ln) for k in
                     ("JobId", "ArrayJobId", "ArrayTaskId", "JobState", "ExitCode")}
            if not field["JobId"] or not field["JobState"]:
                continue
            v = {k: m.group(1) if m else None for k, m in field.items()}
            if v["ArrayTaskId"] is None:
                out[None] = Task(v["JobId"], None, v["JobState"], v["ExitCode"])
                continue
            for i in _expand(v["ArrayTaskId"]):
                out[i] = Task(f"{v['ArrayJobId']}_{i}", i, v["JobState"], v["ExitCode"])
        return out

    def _queued(self, job):
        r = self.run("squeue", "-h", "-j", job, "-o", "%i %T", check=False)
        return r.stdout.strip() if r.returncode == 0 else ""

    def wait(self, job, timeout=120):
        deadline = time.monotonic() + timeout
        while True:
            tasks = self.tasks(job)
            if tasks and all(t.state in FINAL for t in tasks.values()) and not self._queued(job):
                return tasks
            if time.monotonic() > deadline:
                raise SlurmError(f"job {job} has not ended after {timeout} s: "
                                 f"{ {i: t.state for i, t in tasks.items()} }\nsqueue:\n"
                                 f"{self._queued(job)}\n{self.logs()}")
            time.sleep(0.25)

    def wait_task(self, job, index, states=("RUNNING",), timeout=120):
        deadline = time.monotonic() + timeout
        while True:
            t = self.tasks(job).get(index)
            if t and t.state in states:
                return t
            if t and t.state in FINAL:
                raise SlurmError(f"task {index} of job {job} ended ({t.state}, exit "
                                 f"{t.exit_code}) before reaching {states}\n{self.logs()}")
            if time.monotonic() > deadline:
                raise SlurmError(f"task {index} of job {job} is not {states} after {timeout} s "
                                 f"({t.state if t else 'unknown'})\n{self.logs()}")
            time.sleep(0.2)

    def cancel(self, job, index=None):
        self.run("scancel", job if index is None else f"{job}_{index}")

    def logs(self, lines=40):
        text = []
        for name in ("munged.log", "slurmctld.log", "slurmd.log", "munged.out",
                     "slurmctld.out", "slurmd.out"):
            path = self._path("log", name)
            if os.path.exists(path) and os.path.getsize(path):
                with open(path, encoding="utf-8", errors="replace") as f:
                    tail = f.read().splitlines()[-lines:]
                text.append(f"--- {path} (last {len(tail)} lines)\n" + "\n".join(tail))
        return "\n".join(text)

    # -- stop -------------------------------------------------------------------
    def _pid_from_file(self, name, comm):
        try:
            with open(self._path("run", f"{name}.pid"), encoding="ascii") as f:
                pid = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pid = None
        # the pid file names our daemon (not a recycled pid); the child is the fallback
        # when the daemon died before writing it
        proc = self._procs.get(name)
        if pid is not None and _comm(pid) == comm:
            return pid
        return proc.pid if proc and proc.poll() is None else None

    def _our_job_processes(self):
        mark = b"SLURM_CONF=" + self.conf.encode() + b"\0"
        me, found = os.getpid(), []
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == me:
                continue
            try:
                with open(f"/proc/{d}/environ", "rb") as f:
                    env = f.read()
            except OSError:
                continue
            if (env + b"\0").find(mark) >= 0 and _alive(int(d)):
                found.append(int(d))
        return found

    def stop(self):
        if not self._started:
            return
        self._started = False
        try:
            if all(p.poll() is None for p in self._procs.values()):
                self.run("scancel", f"--user={pwd.getpwuid(os.getuid()).pw_name}",
                         check=False, timeout=15)
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline:
                    r = self.run("squeue", "-h", "-o", "%i", check=False, timeout=15)
                    if r.returncode or not r.stdout.strip():
                        break
                    time.sleep(0.2)
        except (subprocess.TimeoutExpired, OSError):
            pass
        for name, comm in (("slurmd", "slurmd"), ("slurmctld", "slurmctld"),
                           ("munged", "munged")):
            pid = self._pid_from_file(name, comm)
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            proc = self._procs.get(name)
            if proc is not None:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        # what slurmd leaves running on its own: slurmstepd and job processes, which all
        # carry this cluster's SLURM_CONF in their environment
        for _ in range(50):
            left = self._our_job_processes()
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        for log in self._logs.values():
            log.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


try:
    import pytest
except ImportError:  # the module also runs without pytest (python3 slurm_cluster.py)
    pytest = None

class _SkippedSessionExits77:
    """A pytest session that ran no test to a pass (every one skipped here) exits with
    77, meson's SKIP, so a skipped Slurm test never reads as a pass."""

    def pytest_sessionfinish(self, session, exitstatus):
        rep = session.config.pluginmanager.get_plugin("terminalreporter")
        if exitstatus == 0 and rep is not None and not rep.stats.get("passed"):
            session.exitstatus = 77


if pytest is not None:
    @pytest.fixture(scope="module")
    def slurm(tmp_path_factory, request):
        """A started SlurmCluster for the test module; stopped after its last test,
        whatever their outcome (a SIGTERM from the test runner stops it too)."""
        why = cannot_start()
        if why:
            reason, missing = why
            if missing and os.environ.get("CI") == "true":
                pytest.fail(reason)
            pm = request.config.pluginmanager
            if not pm.has_plugin("induct-slurm-skipped"):
                pm.register(_SkippedSessionExits77(), "induct-slurm-skipped")
            pytest.skip(reason)
        cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
        previous = signal.getsignal(signal.SIGTERM)

        def on_term(signum, frame):
            cluster.stop()
            signal.signal(signal.SIGTERM, previous if callable(previous) else signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_term)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    import tempfile
    why = cannot_start()
    if why:
        sys.exit(f"slurm_cluster: {why[0]}")
    root = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="slurm-")
    with SlurmCluster(root) as c:
        print(f"a single-node Slurm is up (node {c.node}); in another shell:\n"
              f"  export SLURM_CONF={c.conf}\n  sinfo; sbatch ...; squeue\n"
              f"press Enter (or Ctrl-C) to stop it", flush=True)
        with contextlib.suppress(KeyboardInterrupt, EOFError):
            input()
    print("stopped")
