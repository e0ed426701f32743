#!/usr/bin/python3
"""report: the study's report from its run directories alone (docs/study.md).

Usage: /usr/bin/python3 study/report.py DIR [--build BUILD_DIR]
       /usr/bin/python3 study/report.py --judge SUMMARY.json

DIR holds study.json (the plan study/runner.py wrote: the models and the study-level
settings) and one run directory per model, DIR/<model>/, trained by study-train and
analysed by study-analyse (config.json, train.json, metrics.jsonl, analysis.json). The
report writes into DIR:
  summary.json   the settings, every model's analysis, the PCA of every model's per-token
                 loss vectors in one space, the four checks with their rules and numbers;
  summary.md     the tables per model beside the papers' figures, the checks;
  metrics.jsonl  every model's metrics records, each starting with "model".
It reads nothing but DIR, so it can run after the models ran elsewhere (a cluster). It
refuses a run directory that does not hold what study.json expects: a run of that model,
of the plan's steps, with the study's settings (config.json's, the model and its steps
aside), trained on the study's data (config.json's "data": its SHA-256), analysed, and
with the other models' data and evaluation settings; nothing is written then.
Numbers are written as the C stages' JSON printer (cJSON) writes them, 15 significant
digits where they read back within a relative 2^-52, so a summary is the same text
whichever stage computed a number. --judge decides the checks again on a summary's
numbers and prints {"rules": ..., "checks": ...}.

Exit status: 0 written; 1 a run directory is missing, incomplete or not of this study (the
message names it and what differs); 2 bad usage.
"""
import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import checks  # noqa: E402
from common import (PER_MODEL_SETTINGS, STUDY_FORMAT, find_induct, training_order,  # noqa: E402
                    write_atomic)

ANALYSIS_FORMAT = "libinduct study analysis 1"  # study-analyse's (study/analyse.c)
RUN_FORMAT = "libinduct study run 1"  # study-train's config.json (study/run_config.c)
FIGURES = ["phase_change.png", "attention.png", "ablation.png", "pca.png", "loss_by_position.png"]


class Incomplete(Exception):
    """A run directory is missing or not analysed."""


# ---- numbers as cJSON prints them ----

INT_MIN, INT_MAX = -2**31, 2**31 - 1


def cjson_value(x):
    """x as cJSON 1.7 prints it (an integral value within int as %d, else %1.15g when that
    reads back within a relative DBL_EPSILON, else %1.17g; null when not finite), read
    back: the number a reader of the C stages' files gets."""
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, dict):
        return {k: cjson_value(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [cjson_value(v) for v in x]
    d = float(x)
    if not math.isfinite(d):
        return None
    vi = INT_MAX if d >= INT_MAX else INT_MIN if d <= INT_MIN else int(d)
    if d == float(vi):
        return vi
    s = "%1.15g" % d
    t = float(s)
    if not abs(t - d) <= max(abs(t), abs(d)) * sys.float_info.epsilon:
        s = "%1.17g" % d
    return json.loads(s)


def dump(obj):
    return json.dumps(cjson_value(obj), indent="\t", ensure_ascii=False) + "\n"


# ---- the run directories ----

def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise Incomplete(f"{path} is missing") from None
    except json.JSONDecodeError as e:
        raise Incomplete(f"{path} is not JSON: {e}") from None


def read_records(path):
    """The lines of a metrics log (each one JSON object), as text and parsed."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [l for l in f.read().split("\n") if l]
    except FileNotFoundError:
        raise Incomplete(f"{path} is missing") from None
    try:
        return lines, [json.loads(l) for l in lines]
    except json.JSONDecodeError as e:
        raise Incomplete(f"{path}: a line is not JSON: {e}") from None


def describe_data(x):
    if not isinstance(x, dict) or "sha256" not in x:
        return "none recorded"
    return f"SHA-256 {x['sha256']} ({x.get('bytes')} bytes in {x.get('files')} file" \
        f"{'s' if x.get('files') != 1 else ''})"


def check_run(rd, name, plan, cfg):
    """A run directory's config.json against the plan: the model, its steps, the study's
    settings and data (Incomplete with what differs)."""
    if not isinstance(cfg, dict) or cfg.get("format") != RUN_FORMAT or \
            not isinstance(cfg.get("settings"), dict):
        raise Incomplete(f"{rd}/config.json is not a run of study-train of this version "
                         f"(\"format\": \"{RUN_FORMAT}\")")
    s = cfg["settings"]
    if s.get("model") != name:
        raise Incomplete(f"{rd} holds a run of model {s.get('model')}, not {name}")
    if s.get("steps") != plan["model_steps"][name]:
        raise Incomplete(f"{rd}: trained {s.get('steps')} steps, the study's {name} "
                         f"{plan['model_steps'][name]} (study.json)")
    want = plan["settings"]
    diff = [k for k in sorted((set(want) | set(s)) - set(PER_MODEL_SETTINGS))
            if s.get(k, "(absent)") != want.get(k, "(absent)")]
    if diff:
        raise Incomplete(f"{rd}: trained with other settings than the study's (study.json): "
                         + "; ".join(f"{k} {json.dumps(s.get(k, '(absent)'))} here, "
                                     f"{json.dumps(want.get(k, '(absent)'))} in the study"
                                     for k in diff))
    if cfg.get("data") != plan["data"]:
        raise Incomplete(f"{rd}: trained on other data than the study's: "
                         f"{describe_data(cfg.get('data'))} here, "
                         f"{describe_data(plan['data'])} in the study (study.json)")


def load_study(d):
    """study.json and every model's run directory: {plan, runs: {name: run}}. Each run
    directory must hold a run of its model with the plan's settings and data, analysed;
    anything else raises Incomplete saying what differs."""
    plan = read_json(os.path.join(d, "study.json"))
    if not isinstance(plan, dict) or plan.get("format") != STUDY_FORMAT:
        raise Incomplete(f"{d}/study.json is not a study plan of this version "
                         f"(\"format\": \"{STUDY_FORMAT}\")")
    if not isinstance(plan.get("settings"), dict) or not isinstance(plan.get("data"), dict):
        raise Incomplete(f"{d}/study.json records no settings or data to check the runs "
                         f"against (an earlier runner): run the runner again with the same "
                         f"flags")
    runs = {}
    for name in plan["models"]:
        rd = os.path.join(d, name)
        cfg = read_json(os.path.join(rd, "config.json"))
        check_run(rd, name, plan, cfg)
        a = read_json(os.path.join(rd, "analysis.json"))
        if a.get("format") != ANALYSIS_FORMAT or \
                not isinstance(a.get("model"), dict) or a["model"].get("name") != name:
            raise Incomplete(f"{rd}/analysis.json is not the analysis of model {name} of this "
                             f"version (\"format\": \"{ANALYSIS_FORMAT}\")")
        lines, recs = read_records(os.path.join(rd, "metrics.jsonl"))
        runs[name] = {"dir": rd, "analysis": a, "lines": lines, "records": recs,
                      "config": cfg}
    # one data set and one evaluation: analyses of other settings do not mix in
    first = runs[plan["models"][0]]["analysis"]["config"]
    for name, r in runs.items():
        for key in ("data", "evaluation"):
            if r["analysis"]["config"][key] != first[key]:
                raise Incomplete(f"{name}: its analysis's {key} settings differ from "
                                 f"{plan['models'][0]}'s: not one study")
    return plan, runs


# ---- the pieces of summary.json ----

def study_config(plan, runs, order):
    """config: the first model's sections with the study's own keys (the models, the step
    budgets, the widest MLP)."""
    c = runs[order[0]]["analysis"]["config"]
    model = dict(c["model"], models=",".join(plan["models"]),
                 d_mlp=max(r["analysis"]["config"]["model"]["d_mlp"] for r in runs.values()))
    batch, T = c["training"]["batch"], c["training"]["seq_len"]
    training = {}
    for k, v in c["training"].items():
        if k == "steps":
            training["steps"] = plan["steps"]
            training["steps_1l"] = plan["steps_1l"]
        elif k == "tokens_per_model":
            training[k] = float(plan["steps"]) * batch * T
        else:
            training[k] = v
    run = {"threads_per_model": plan["threads"], "jobs": plan["jobs"],
           "wall_seconds": plan.get("wall_seconds")}
    return {"library_version": c["library_version"], "data": c["data"], "model": model,
            "training": training, "evaluation": c["evaluation"], "run": run}


def pca_section(induct, runs, order, cfg):
    """One PCA of the per-token loss vectors of every evaluation of every model (rows in
    training order, then steps), through the library's induct_analysis_pca."""
    import numpy as np
    rows = [rec["loss_vectors"] for n in order for rec in runs[n]["records"]]
    E = cfg["evaluation"]["eval_batch"]
    batch, T = cfg["training"]["batch"], cfg["training"]["seq_len"]
    traj = {n: [] for n in order}
    if len(rows) >= 2 and E >= 2 and len(rows) <= 2**32 - 1:
        res = induct.pca(np.asarray(rows, dtype=np.float32), 2)
        var, total = [float(v) for v in res.variance], float(res.total_variance)
        pca = {"explained_variance": var,
               "explained_variance_ratio": [v / total if total > 0 else math.nan for v in var],
               "total_variance": total, "n_rows": len(rows), "n_cols": E,
               "rows": "one per evaluation of every model: the loss of each evaluation "
                       "sequence at its fixed random position (the training log's "
                       "loss_vectors: induct_analysis_loss_vectors with pos_seed 0)"}
        r = 0
        for n in order:
            for rec in runs[n]["records"]:
                traj[n].append({"step": rec["step"], "tokens": float(rec["step"]) * batch * T,
                                "pc1": float(res.scores[r, 0]), "pc2": float(res.scores[r, 1])})
                r += 1
    else:
        pca = {"skipped": "needs at least 2 evaluations and --eval-batch >= 2"}
    return pca, traj


class LibraryStats:
    """The statistics the checks use, from the library (the bits of the C stages)."""

    def __init__(self, induct):
        self.induct = induct

    def paired_difference(self, a, b):
        return tuple(self.induct.paired_difference(a, b))


def summary(induct, d, plan, runs):
    order = training_order(plan["models"])
    cfg = study_config(plan, runs, order)
    pca, traj = pca_section(induct, runs, order, cfg)
    models = {}
    for n in order:
        m = dict(runs[n]["analysis"]["model"])
        m["pca_trajectory"] = traj[n]
        models[n] = m
    judged = checks.judge(models, LibraryStats(induct))
    first = runs[order[0]]["analysis"]
    s = {"config": cfg, "rules": dict(checks.RULES), "model_order": order, "models": models,
         "pca": pca, "checks": checks.checks_json(judged), "figures": list(FIGURES),
         "attention_probe_tokens": first["attention_probe_tokens"]}
    return s, judged, order


def merged_metrics(runs, order):
    """Every model's records, each line starting with "model": "<name>"."""
    out = []
    for n in order:
        for line in runs[n]["lines"]:
            if line.startswith("{"):
                out.append('{"model":"%s"%s%s\n' % (n, "" if line[1] == "}" else ",", line[1:]))
    return "".join(out)


# ---- summary.md ----

def g3(x):
    return "%.3g" % x


def markdown(s, judged, d, source_root):
    cfg, models = s["config"], s["models"]
    tr, ev, mc = cfg["training"], cfg["evaluation"], cfg["model"]
    T, batch, steps, steps_1l = tr["seq_len"], tr["batch"], tr["steps"], tr["steps_1l"]
    E = ev["eval_batch"]
    lines = []
    add = lines.append
    add("# Phase change on %s\n\n" % cfg["data"]["path"])
    add("d_model %u, %u heads of d_head %u, seq_len %u, batch %u, lr %s, warm-up %d, %d "
        "steps (%s M tokens per model), evaluation every %d steps on %u sequences.\n\n"
        % (mc["d_model"], mc["n_heads"], mc["d_head"], T, batch, "%g" % tr["lr"],
           tr["warmup_steps"], steps, g3(steps * batch * T / 1e6), ev["eval_every"], E))
    if steps_1l != steps:
        add("The 1-layer models train for %d steps (%s M tokens), not %d: they are the "
            "control and the smeared-key comparison, whose outcome is decided well before "
            "(docs/phase-change.md, \"The default run\"); the 2-layer models' ICL figures are "
            "compared with the control's at its end.\n\n"
            % (steps_1l, g3(steps_1l * batch * T / 1e6), steps))
    sl = mc.get("shortformer_layers")
    if mc["positional"] == "shortformer" and sl == 1:
        add("Positions (shortformer) enter the queries and keys of layer 0 only "
            "(`--shortformer-layers 1`; the ICL paper's small models have them in every "
            "layer): the 2-layer models can attend by position only in layer 0, where their "
            "previous-token head must then form.\n\n")
    elif mc["positional"] == "shortformer" and sl:
        add("Positions (shortformer) enter the queries and keys of the first %u layers only "
            "(`--shortformer-layers`); models with no more layers than that have them in "
            "every layer.\n\n" % sl)
    cur = tr["curriculum"]
    if cur["repeat_fraction"] > 0:
        add(curriculum_line(cur) + "\n\n")
    lg, ab_, wv = ev["large"], ev["ablation"], ev["window"]
    add("ICL scores: band estimator (loss averaged over ±%u tokens around tokens %u and %u), "
        "mean ± standard error by batch means. The figures the checks read come from the "
        "large evaluation: %u windows at distinct evenly spread offsets of the held-out text "
        "in %u groups; the ablations use %u windows in %u groups; the per-step curves %u "
        "windows.\n\n" % (ev["icl_band"], ev["icl_early_token"], ev["icl_late_token"],
                          lg["windows"], lg["groups"], ab_["windows"], ab_["groups"], E))
    if wv["windows"]:
        add("The phase-change windows come from the ICL score of the weights kept at every "
            "evaluation on %u windows in %u groups (bands only; a standard error about %.0f %% "
            "of the per-step curve's, whose sampling error would otherwise place the "
            "window).\n\n" % (wv["windows"], wv["groups"],
                              100.0 * math.sqrt(E / float(wv["windows"]))))
    for name in s["model_order"]:
        add(model_section(models[name], name, batch, T, E))
    add("## Checks\n\n| claim | model | result |\n|---|---|---|\n")
    for c in judged:
        res = {"pass": "PASS", "fail": "FAIL"}.get(c["status"], "not run")
        add("| %s | %s | **%s** |\n" % (c["claim"], c["model"], res))
    add("\nThe rules and the numbers each result was decided on are in summary.json "
        "(\"checks\") and docs/phase-change.md. A difference counts only when it exceeds "
        "%s standard errors. Where ours differ from the papers: our models are 4× narrower "
        "than Hoogland et al.'s (d_model %u against 256) and see %s M tokens each, against "
        "about 5 B (Hoogland et al.) and 10 B (the ICL paper); with %u tokens in the "
        "vocabulary a copied token saves fewer nats than with the paper's, so the rules ask "
        "for an ICL fall of 0.15 nats, not the paper's 0.4.\n\n"
        % ("%g" % checks.RULES["sigmas"], mc["d_model"], g3(steps * batch * T / 1e6),
           cfg["data"]["d_vocab"]))
    add("## Figures\n\n")
    for f in FIGURES:
        add("- %s/%s\n" % (d, f))
    add("\n(drawn by /usr/bin/python3 %s/study/plot_phase_change.py %s; "
        "scripts/phase-change.sh runs it after the program)\n" % (source_root, d))
    return "".join(lines)


def curriculum_line(cur):
    return ("training curriculum: %s of training windows carry a repeated span of %u..%u "
            "tokens (evaluation: untouched held-out text)"
            % ("%g" % cur["repeat_fraction"], cur["repeat_min_len"],
               cur["repeat_max_len_effective"]))


def pct(x):
    return "%.0f%%" % (100 * x)


def model_section(m, name, batch, T, E):
    """One model's table: ours beside the ICL paper's and Hoogland et al.'s figures."""
    L, smeared = m["n_layers"], m["smeared_keys"]
    deep = L > 1 or smeared
    w, hd, ab = m["window"], m["heads"], m["ablation"]
    nan = float("nan")
    f = lambda x: nan if x is None else x  # noqa: E731
    mlp = ", MLPs" if "-mlp" in name else ""  # (the main job's models have none)
    out = ["## %s (%u layer%s%s%s)\n\n" % (name, L, "s" if L > 1 else "", mlp,
                                           ", smeared keys" if smeared else "")]
    add = out.append
    add("| measure | ours | ICL paper (Olsson et al. 2022) | Hoogland et al. 2024 (2 layers, "
        "d_model 256, BPE-5000) |\n|---|---|---|---|\n")
    paper_w = "a short window early in training (2.5–5 B tokens)" if deep else "none (1 layer)"
    hoog_w = "induction heads form at steps 8.5 k–17.5 k of 50 k" if deep else "none (1 layer)"
    if w["found"]:
        ws, we = w["start_step"], w["end_step"]
        add("| phase-change window | steps %.0f–%.0f (%s–%s M tokens; %.0f%% of the run, "
            "%.2f× the training before it) | %s | %s |\n"
            % (ws, we, g3(ws * batch * T / 1e6), g3(we * batch * T / 1e6),
               100 * w["fraction_of_run"], (we - ws) / ws if ws > 0 else nan, paper_w, hoog_w))
    else:
        add("| phase-change window | none found | %s | %s |\n" % (paper_w, hoog_w))
    before_eval = ("large" if w["found"] else
                   "window" if m.get("window_evaluation") else "per-step")
    add("| ICL score before (step %.0f, %s evaluation) | %+.3f ± %.3f nats | near 0 | near 0 |\n"
        % (m["icl_before_step"], before_eval, f(m["icl_before"]), f(m["icl_before_se"])))
    add("| ICL score after (final, large evaluation) | %+.3f ± %.3f nats | %s | %s |\n"
        % (f(m["icl_after"]), f(m["icl_after_se"]), "≈ −0.4 nats" if deep else "≈ 0 (1 layer)",
           "≈ −0.2 nats (single tokens −0.12 … −0.16)" if deep else "≈ 0.00 (1 layer)"))
    if w["found"]:
        add("| ICL fall across the window | %+.3f ± %.3f nats | ≈ 0.4 nats | ≈ 0.2 nats |\n"
            % (f(m["icl_fall"]), f(m["icl_fall_se"])))
    ps = m["per_step"]
    add("| ICL score at the last per-step evaluation (%u windows) | %+.3f ± %.3f nats | — | — |\n"
        % (E, f(ps["icl_final"]), f(ps["icl_se"])))
    ph = m["pm_head"]
    rise, rin = f(ph["rise_from_chance"]), f(ph["rise_inside_window"])
    inside = ("%.0f%% of %.3f" % (100 * rin / rise, rise)
              if math.isfinite(rin) and rise > 0 else "no window")
    add("| prefix matching, head %s, before → after (rise inside the window) | %.3f → %.3f "
        "(%s) | %s | %s |\n"
        % (ph["head"], f(ph["before"]), f(ph["after"]), inside,
           "near chance → well above 0.3" if deep else "stays near chance",
           "rises during the induction-head stage" if deep else "stays near chance"))
    for k, key in enumerate(("induction", "previous_token_heads")):
        names = ", ".join(hd[key]) if hd[key] else "none"
        add("| %s heads | %s | %s | %s |\n"
            % ("previous-token" if k else "induction", names,
               "in the layer before the induction heads" if k
               else ("form in the window" if deep else "none"),
               "layer 0" if k else ("layer 1" if deep else "none")))
    bump = m["bump"]["bump"]
    add("| loss-curve bump in the window | %s | %s | %s |\n"
        % ("yes" if bump is True else "no" if bump is False
           else "undecided (no evaluation interval before or inside the window)" if w["found"]
           else "undecided (no window)", "yes" if deep else "none",
           "a plateau, then a drop" if deep else "none"))
    add("| ICL score on the ablation evaluation (clean) | %+.3f ± %.3f nats | — | — |\n"
        % (f(ab["icl_clean"]), f(ab["icl_clean_se"])))
    frac, frac_pp = f(ab["fraction_removed_by_induction_heads"]), \
        f(ab["fraction_removed_by_induction_heads_preserve_patterns"])
    if math.isfinite(frac):
        add("| ICL removed by ablating the induction heads (zero / pattern-preserving) | "
            "%.0f%% (%.3f ± %.3f nats) / %s | most | — |\n"
            % (100 * frac, f(ab["removed_by_induction_heads"]),
               f(ab["removed_by_induction_heads_se"]),
               pct(frac_pp) if math.isfinite(frac_pp) else "n/a (ICL score not negative)"))
    else:
        add("| ICL removed by ablating the induction heads | n/a (%s) | most | — |\n"
            % ("ICL score not negative" if hd["induction"] else "no induction head"))
    if ab["max_other_head_preserve_patterns"] is not None:
        add("| most ICL removed by one other head: pattern-preserving / zero ablation | "
            "%.0f%% (%s) / %.0f%% (%s) | little | — |\n"
            % (100 * f(ab["max_fraction_removed_by_other_head_preserve_patterns"]),
               ab["max_other_head_preserve_patterns"],
               100 * f(ab["max_fraction_removed_by_other_head"]),
               ab["max_other_head"] or "none"))
    add("| final eval loss | %.4f nats/token | — | — |\n" % f(m["final_eval_loss"]))
    add("| wall time (training), throughput; large evaluation, ablations | %.1f s, %.0f "
        "tokens/s; %.1f s, %.1f s | — | — |\n\n"
        % (f(m["wall_seconds"]), f(m["tokens_per_second"]), f(m["large_evaluation_seconds"]),
           f(ab["seconds"])))
    return "".join(out)


# ---- entry points ----

def report(d, build=None):
    induct = find_induct(build)
    plan, runs = load_study(d)
    s, judged, order = summary(induct, d, plan, runs)
    write_atomic(os.path.join(d, "summary.json"), dump(s))
    write_atomic(os.path.join(d, "metrics.jsonl"), merged_metrics(runs, order))
    md = markdown(s, judged, d, os.path.dirname(HERE))
    write_atomic(os.path.join(d, "summary.md"), md)
    return md


def judge_file(path, build=None):
    try:
        with open(path, encoding="utf-8") as f:
            root = json.load(f)
    except (OSError, json.JSONDecodeError):
        root = None
    models = root.get("models") if isinstance(root, dict) else None
    if not isinstance(models, dict):
        print(f"report.py: --judge: {path} is not a summary with a \"models\" object",
              file=sys.stderr)
        return 2
    judged = checks.judge(models, LibraryStats(find_induct(build)))
    print(json.dumps(cjson_value({"rules": checks.RULES, "checks": checks.checks_json(judged)}),
                     indent="\t", ensure_ascii=False))
    return 0


def main(argv):
    ap = argparse.ArgumentParser(prog="report.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", help="the study directory (study.json, <model>/)")
    ap.add_argument("--build", help="meson build directory (bindings/python)")
    ap.add_argument("--judge", metavar="SUMMARY.json",
                    help="decide the checks again on a summary's numbers")
    a = ap.parse_args(argv)
    if a.judge:
        return judge_file(a.judge, a.build)
    if not a.dir:
        ap.error("give the study directory (or --judge SUMMARY.json)")
    try:
        md = report(a.dir, a.build)
    except Incomplete as e:
        print(f"report.py: {e}", file=sys.stderr)
        return 1
    print("\n" + md + "\nrun directory: %s (summary.json, summary.md, metrics.jsonl, <model>/)"
          % a.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
