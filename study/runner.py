#!/usr/bin/python3
"""runner: a study, from the flags to the report (docs/study.md).

    runner.py --out DIR [--models LIST] [--steps N] [--steps-1l N] [--jobs N] [--threads N]
              [--via local|parallel|slurm|mpirun] [--submit] [--sbatch OPTION ...]
              [--no-estimate] [--no-report] [--build BUILD] [study-train and study-analyse
              flags ...]
    runner.py task --out RUN_DIR --build BUILD [study-analyse flags] --train [study-train flags]

The models (--models, default 2L,1L,1L-smeared: the main job) are the tasks of the sweep
runner scripts/induct-sweep, each one model's stages: study-train into DIR/<model>/, then
study-analyse (the `task` form above, what induct-sweep runs). --via local (the default)
runs --jobs models at a time on this machine, each on --threads threads; parallel,
slurm and mpirun run them through GNU parallel, a Slurm job array (--submit submits it,
--sbatch OPTION adds an #SBATCH line; --jobs N throttles it), or an mpirun task farm
(docs/distributed.md). Then study/report.py writes DIR/summary.json, summary.md and
metrics.jsonl from the run directories (with --via slurm: the same command, run again
once the array has finished, writes them).

The same command again resumes: finished models (DIR/<model>/analysis.json) are skipped,
unfinished ones continue from their last evaluation, failed ones are reported and run
again. DIR/study.json records the plan; a different plan in the same DIR is refused.

Every flag not listed here goes to study-train (the data, the model, training; `--steps`
is the 2-layer and deeper models' budget, `--steps-1l` the 1-layer models', by default
2000 or --steps if smaller) or to study-analyse (--icl-windows, --icl-groups,
--ablation-windows, --window-windows, --smooth, --*-threshold); `--threads` to both.

Exit status: 0 done (whatever the checks say); 1 a model failed (the others finished);
2 bad input; 130 stopped.
"""
import json
import os
import shlex
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import (PER_MODEL_SETTINGS, ROOT, STUDY_FORMAT, find_induct,  # noqa: E402
                    layers_of, training_order, valid_model, write_plan)

SWEEP = os.path.join(ROOT, "scripts", "induct-sweep")
DEFAULT_MODELS = "2L,1L,1L-smeared"
DEFAULT_STEPS_1L = 2000  # the 1-layer models' budget (or --steps when smaller)
# the runner's flags (with a value, and without), study-analyse's, and both stages'
RUNNER_VALUE = {"--out", "--models", "--steps-1l", "--jobs", "--via", "--build", "--sbatch"}
RUNNER_BOOL = {"--no-estimate", "--submit", "--no-report", "--help", "-h"}
ANALYSE_VALUE = {"--icl-windows", "--icl-groups", "--ablation-windows", "--window-windows",
                 "--smooth", "--induction-threshold", "--previous-token-threshold",
                 "--duplicate-threshold"}
BOTH_VALUE = {"--threads"}
USAGE = ("usage: runner.py --out DIR [--models LIST] [--steps N] [--steps-1l N] [--jobs N] "
         "[--threads N] [--via local|parallel|slurm|mpirun] [flags]")


def usage_error(msg):
    print(f"runner.py: {msg}\n{USAGE}\nTry 'runner.py --help' for every option.",
          file=sys.stderr)
    sys.exit(2)


def uint(flag, v, lo, hi):
    """A checked integer, as the C stages check theirs."""
    if not v[:1].isdigit():
        usage_error(f"{flag} needs a non-negative integer in [{lo}, {hi}], got '{v}'")
    if not v.isdigit():
        usage_error(f"{flag} needs a non-negative integer, got '{v}'")
    if not lo <= int(v) <= hi:
        usage_error(f"{flag} must be in [{lo}, {hi}], got {v}")
    return int(v)


def split_args(argv):
    """(runner options, study-train args, study-analyse args), flags in their order."""
    opt, train, analyse = {}, [], []
    i = 0
    while i < len(argv):
        a = argv[i]
        flag, eq, val = a.partition("=") if a.startswith("--") else (a, "", "")
        known = flag in RUNNER_VALUE | ANALYSE_VALUE | BOTH_VALUE
        if known and not eq:
            if i + 1 >= len(argv):
                usage_error(f"{flag} needs a value")
            val = argv[i + 1]
            i += 1
        i += 1
        if flag == "--sbatch":  # repeatable: one #SBATCH line each
            opt.setdefault(flag, []).append(val)
        elif flag in RUNNER_VALUE:
            opt[flag] = val
        elif flag in RUNNER_BOOL and not eq:
            opt[flag] = True
        elif flag in ANALYSE_VALUE:
            analyse += [flag, val]
        elif flag in BOTH_VALUE:
            opt[flag] = val
            train += [flag, val]
            analyse += [flag, val]
        else:
            train.append(a)
    return opt, train, analyse


def last_value(args, flag, default):
    v = default
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            v = args[i + 1]
        elif a.startswith(flag + "="):
            v = a.split("=", 1)[1]
    return v


def parse_models(text):
    names = text.split(",")
    for n in names:
        if not valid_model(n):
            usage_error(f"--models: '{n}' is not <n>L, <n>L-mlp, <n>L-smeared or "
                        f"<n>L-mlp-smeared (1 <= n <= 64)")
        if names.count(n) > 1:
            usage_error(f"--models: '{n}' given twice")
    return names


def exe(build, name):
    p = os.path.join(build, "study", name)
    if not os.access(p, os.X_OK):
        print(f"runner.py: {p} not found: build first (scripts/build.sh {build})",
              file=sys.stderr)
        sys.exit(2)
    return p


# ---- one model: the task induct-sweep runs ----

def task(argv):
    """task --out RUN_DIR --build BUILD [analyse flags] --train [train flags]"""
    if "--train" not in argv:
        usage_error("task: give --train before study-train's flags")
    k = argv.index("--train")
    head, train = argv[:k], argv[k + 1:]
    opt, _, analyse = split_args(head)
    out, build = opt.get("--out"), opt.get("--build")
    if not out or not build:
        usage_error("task: give --out RUN_DIR and --build BUILD")
    if os.path.exists(os.path.join(out, "analysis.json")):
        print(f"runner.py: {out} is analysed already")
        return 0
    sys.stdout.flush()
    rc = subprocess.run([exe(build, "study-train")] + train + ["--out", out]).returncode
    if rc != 0:
        return rc
    return subprocess.run([exe(build, "study-analyse"), "--out", out] + analyse).returncode


# ---- the study ----

def check_stages(build, train, analyse):
    """The flags and the data, checked by the stages themselves (their messages, exit 2
    or 1) before anything runs; the settings they resolved and the data's facts."""
    r = subprocess.run([exe(build, "study-analyse"), "--check"] + analyse,
                       stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(r.returncode)
    analysis = json.loads(r.stdout)
    r = subprocess.run([exe(build, "study-train"), "--check"] + train, stdout=subprocess.PIPE,
                       text=True)
    if r.returncode != 0:
        sys.exit(r.returncode)
    return dict(json.loads(r.stdout), analysis=analysis)


def header(plan, facts, d, estimate_line):
    batch, T = facts["batch"], facts["seq_len"]
    steps, steps_1l = plan["steps"], plan["steps_1l"]
    tok = lambda s: s * batch * T / 1e6  # noqa: E731
    total = sum(plan["model_steps"][m] * batch * T for m in plan["models"]) / 1e6
    lines = [
        f"study (libinduct {facts['library_version']}): {','.join(plan['models'])}",
        f"data: {facts['path']}: {facts['train_tokens']} train tokens, {facts['eval_tokens']} "
        f"held out, d_vocab {facts['d_vocab']}; evaluation set: {facts['eval_batch']} of "
        f"{facts['eval_windows']} fixed windows of {T} tokens, spread over the held-out text",
        f"models: {','.join(plan['models'])} — d_model {facts['d_model']}, {facts['heads']} "
        f"heads of d_head {facts['d_head']}, n_ctx {T} ({facts['positions']}), seed "
        f"{facts['seed']}",
        f"training: AdamW lr {facts['lr']}, warm-up {facts['warmup']}, batch {batch}, {steps} "
        f"steps = {tok(steps):.3g} M tokens per model ({total:.3g} M in all); evaluation "
        f"every {facts['eval_every']} steps; ICL score = loss of token {facts['late']} − "
        f"token {facts['early']} (each averaged over ±{facts['icl_band']} tokens)"]
    if steps_1l != steps and any(layers_of(m) == 1 for m in plan["models"]):
        lines.append(f"          1-layer models: {steps_1l} steps = {tok(steps_1l):.3g} M "
                     f"tokens (--steps-1l)")
    if facts.get("curriculum"):
        lines.append(facts["curriculum"])
    lines.append(f"running: {plan['jobs']} job{'s' if plan['jobs'] > 1 else ''} at once "
                 f"(--via {plan['via']}), {plan['threads']} thread"
                 f"{'s' if plan['threads'] > 1 else ''} per model, output in {d}")
    if estimate_line:
        lines.append(estimate_line)
    print("\n".join(lines), flush=True)


def estimate(build, plan, train, facts):
    """Two timed training steps of each model; a model's run = steps x (a step + its share
    of the evaluations, a forward pass being about a third of a step per token) plus its
    analysis, the models laid on --jobs slots in training order. Rough."""
    batch, every, E = facts["batch"], facts["eval_every"], facts["eval_batch"]
    an = facts["analysis"]
    big, abl, win = an["icl_windows"], an["ablation_windows"], an["window_windows"]
    slots, first = [0.0] * min(plan["jobs"], len(plan["models"])), None
    for m in plan["order"]:
        r = subprocess.run([exe(build, "study-train"), "--time-step", "--model", m] + train,
                           stdout=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit(r.returncode)
        t = float(r.stdout)
        first = first if first is not None else (m, t)
        s = plan["model_steps"][m]
        run = s * t * (1.0 + E / (3.0 * batch * every))
        heads = layers_of(m) * facts["heads"]
        run += t * (2.0 * big + 2.0 * (heads + 2.0) * abl) / (3.0 * batch)
        run += t * 0.5 * (s // every + 2) * win / (3.0 * batch)
        k = min(range(len(slots)), key=lambda i: slots[i])
        slots[k] += run
    total = max(slots)
    return (f"estimate: {first[1] * 1e3:.0f} ms per step of {first[0]}; about "
            f"{fmt_duration(total)} for training and evaluation (rough: assumes "
            f"{plan['threads']} free core{'s' if plan['threads'] > 1 else ''} per job)")


def fmt_duration(s):
    if not s >= 0:
        return "?"
    s = int(round(s))
    return f"{s}s" if s < 60 else f"{s // 60}m{s % 60:02d}s" if s < 3600 else \
        f"{s // 3600}h{s % 3600 // 60:02d}m"


class Monitor(threading.Thread):
    """One line per evaluation of every model, read from the run directories (the models
    write their logs; this only reads them)."""

    def __init__(self, d, plan, band, induct):
        super().__init__(daemon=True)
        self.d, self.plan, self.band, self.induct = d, plan, band, induct
        self.stop = threading.Event()
        self.seen = {m: 0 for m in plan["models"]}
        self.state = {m: "" for m in plan["models"]}

    def run(self):
        while not self.stop.wait(2.0):
            self.poll()
        self.poll()

    def poll(self):
        for m in self.plan["order"]:
            rd = os.path.join(self.d, m)
            log = os.path.join(rd, "metrics.jsonl")
            lines = []
            if os.path.isfile(log):  # a regular file only: never open a pipe or a device
                try:
                    with open(log, encoding="utf-8") as f:
                        lines = f.read().split("\n")[:-1]  # complete lines only
                except OSError:
                    pass
            if len(lines) < self.seen[m]:  # cut back on a resume
                self.seen[m] = len(lines)
            for line in lines[self.seen[m]:]:
                try:
                    rec = json.loads(line)
                except ValueError:
                    break
                self.seen[m] += 1
                print(f"[{m}] step {rec['step']}/{self.plan['model_steps'][m]}  eval loss "
                      f"{rec.get('eval_loss', float('nan')):.4f}  ICL {self.icl(rec):+.4f} nats",
                      flush=True)
            for f, what in (("train.json", "trained"), ("analysis.json", "analysed")):
                if self.state[m] != what and os.path.exists(os.path.join(rd, f)) and \
                        (what == "analysed" or self.state[m] == ""):
                    self.state[m] = what
                    print(f"[{m}] {what}", flush=True)

    def icl(self, rec):
        """The run's band ICL estimate of the per-step curve (the library's estimator)."""
        early, late, w = self.band
        try:
            return self.induct.icl_band(rec["loss_by_position"], early, late, w)
        except (KeyError, TypeError, self.induct.InductError):  # no curve that fits
            return float("nan")


def study(argv):
    opt, train, analyse = split_args(argv)
    if opt.get("--help") or opt.get("-h"):
        print(__doc__)
        return 0
    build = os.path.abspath(opt.get("--build", os.path.join(ROOT, "build")))
    d = opt.get("--out", "phase-change-run")
    if not d:
        usage_error("--out needs a directory")
    models = parse_models(opt.get("--models", DEFAULT_MODELS))
    jobs = uint("--jobs", opt.get("--jobs", "2"), 1, 1024)
    threads = uint("--threads", opt.get("--threads", "1"), 1, 1024)
    via = opt.get("--via", "local")
    if via not in ("local", "parallel", "slurm", "mpirun"):
        usage_error(f"--via must be one of local, parallel, slurm, mpirun, got '{via}'")
    facts = check_stages(build, train, analyse)
    steps = facts["steps"]
    steps_1l = uint("--steps-1l", opt["--steps-1l"], 1, 10**12) if "--steps-1l" in opt \
        else min(DEFAULT_STEPS_1L, steps)
    model_steps = {m: steps_1l if layers_of(m) == 1 else steps for m in models}
    # the settings every run directory must hold (config.json's, but the model and its
    # steps) and the data's identity: the report refuses a run of other ones
    settings = {k: v for k, v in facts["settings"].items() if k not in PER_MODEL_SETTINGS}
    plan = {"format": STUDY_FORMAT, "models": models, "steps": steps, "steps_1l": steps_1l,
            "model_steps": model_steps, "train_args": train, "analyse_args": analyse,
            "threads": threads, "jobs": jobs, "via": via, "settings": settings,
            "data": facts["data"]}
    plan["order"] = training_order(models)
    os.makedirs(d, exist_ok=True)
    sp = os.path.join(d, "study.json")
    old = {}
    if os.path.exists(sp):
        with open(sp, encoding="utf-8") as f:
            old = json.load(f)
        same = ("models", "steps", "steps_1l", "train_args", "analyse_args")
        strip = lambda a: [x for i, x in enumerate(a) if x != "--threads" and  # noqa: E731
                           (i == 0 or a[i - 1] != "--threads")]
        if any(strip(old.get(k)) != strip(plan[k]) if k.endswith("_args")
               else old.get(k) != plan[k] for k in same):
            usage_error(f"{d} holds a study with another plan (study.json): give another "
                        f"--out, or the same flags as before")
        if old.get("data") not in (None, plan["data"]):
            usage_error(f"{d} holds a study of other data: {facts['path']} has SHA-256 "
                        f"{plan['data']['sha256']} now, {old['data'].get('sha256')} when the "
                        f"study started (study.json): give another --out, or the data it "
                        f"was run on")
    if "wall_seconds" in old:  # kept from the session that ran the whole study
        plan["wall_seconds"] = old["wall_seconds"]
    write_plan(sp, plan)
    tasks = os.path.join(d, "tasks.jsonl")
    seed = int(facts["seed"])
    with open(tasks, "w", encoding="utf-8") as f:
        for m in plan["order"]:
            f.write(json.dumps({"name": m, "seed": seed,
                                "args": ["--model", m, "--steps", str(model_steps[m])]}) + "\n")
    est = None if opt.get("--no-estimate") or via == "slurm" else \
        estimate(build, plan, train, facts)
    header(plan, facts, d, est)

    cmd = [sys.executable, os.path.abspath(__file__), "task", "--out", "{out}", "--build",
           build] + analyse + ["--train"] + train
    sweep = [sys.executable, SWEEP, "run", tasks, "--out", d, "--via", via, "--done",
             "analysis.json"]
    if via != "slurm" or "--jobs" in opt:  # a Slurm array is not throttled unless asked
        sweep += ["--jobs", str(jobs)]
    if via == "mpirun":
        sweep = [os.environ.get("MPIRUN", "mpirun"), "-np", str(jobs)] + sweep
    if via == "slurm":
        sweep += ["--submit"] * bool(opt.get("--submit")) + \
            [f"--sbatch={o}" for o in opt.get("--sbatch", [])]
    t0 = time.monotonic()
    unfinished = lambda: [m for m in plan["order"]  # noqa: E731
                          if not os.path.exists(os.path.join(d, m, "analysis.json"))]
    # the study's wall time means something only when this session ran it from nothing
    fresh = not any(os.path.exists(os.path.join(d, m)) for m in models)
    if via == "slurm":
        rc = subprocess.run(sweep + ["--"] + cmd).returncode
        if rc != 0 or unfinished():
            print(f"runner.py: {len(unfinished())} of {len(models)} models not finished: the "
                  f"same command, once the Slurm array has run, submits what is left or "
                  f"writes the report (or /usr/bin/python3 "
                  f"{shlex.quote(os.path.join(HERE, 'report.py'))} {shlex.quote(d)})")
            return rc
    else:
        mon = Monitor(d, plan, (facts["early"], facts["late"], facts["icl_band"]),
                      find_induct(build))
        mon.start()
        try:
            rc = subprocess.run(sweep + ["--"] + cmd, stdout=subprocess.DEVNULL).returncode
        except KeyboardInterrupt:
            rc = 130
        mon.stop.set()
        mon.join()
    failed = unfinished()
    if rc == 130 or rc < 0:
        print(f"runner.py: stopped; the same command continues ({len(failed)} of "
              f"{len(models)} models unfinished)", file=sys.stderr)
        return 130
    if failed:
        for m in failed:
            print(f"runner.py: model {m} failed: {os.path.join(d, m, 'log.txt')}",
                  file=sys.stderr)
        print("runner.py: the same command runs the failed models again", file=sys.stderr)
        return 1
    # the time of the whole study when one local session ran it all (a Slurm array's,
    # or a resumed study's, is not known here)
    if via != "slurm" and fresh:
        plan["wall_seconds"] = time.monotonic() - t0
    write_plan(sp, plan)
    if opt.get("--no-report"):
        return 0
    import report
    try:
        md = report.report(d, build)
    except report.Incomplete as e:
        print(f"runner.py: {e}", file=sys.stderr)
        return 1
    print("\n" + md + "\nrun directory: %s (summary.json, summary.md, metrics.jsonl, <model>/)"
          % d)
    return 0


def main(argv):
    if argv[:1] == ["task"]:
        return task(argv[1:])
    return study(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
