#!/usr/bin/python3
"""zoo_report: the cross-model report of the small-model study (scripts/zoo.sh; docs/zoo.md).

Usage: /usr/bin/python3 study/zoo_report.py DIR [--build BUILD] [--groups SPEC]
           [--evidence-windows N] [--evidence-groups G] [--passage-windows N] [--threads N]

DIR holds one study of the stages per group of models (DIR/attn, DIR/attn-deep, DIR/mlp:
study.json, the run directories, summary.json from study/report.py). The groups and the
flags each differs in are scripts/zoo.sh's table (its `groups=` lines; --groups SPEC gives
another, one `name:models:flags` line per group). The report refuses (exit status 1,
naming the directory, writing nothing) when a group is missing or unfinished, or when the
groups' data, step budgets, analysis settings or any setting other than the ones their
flags declare differ. It writes into DIR:
  zoo.json   every number with its standard error and the rule used, the six checks;
  zoo.md     the table (a row per model), the checks, the evidence table, the slopes, the
             token classes;
  icl.png, pca.png, heads.png, tokens.png, tokens.html, slope.png   the figures.
It reads the run directories and, for the token-by-token comparison and the evidence
table, the data file each run's config.json names (checked against its SHA-256).

Exit status: 0 written; 1 a group is missing, unfinished or not comparable (nothing
written); 2 bad usage.
"""
import argparse
import json
import math
import os
import re
import shlex
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402
import zoo_checks  # noqa: E402
from common import ROOT, find_induct, layers_of, write_atomic  # noqa: E402
from report import Incomplete, dump  # noqa: E402
from zoo_analyses import (FAMILY_TITLE, display_order, family, pca_turn,  # noqa: E402
                          slopes_around, spearman)

FORMAT = "libinduct zoo report 1"
# the figures (tokens.png and tokens.html need the 2-layer model's window)
FIGURES = ["icl.png", "pca.png", "heads.png", "tokens.png", "tokens.html", "slope.png"]
NAN = float("nan")


# ---- the groups ----

def parse_groups(spec):
    """`name:model,model,...:flags` lines -> [{name, models, flags: {setting: value}, text}].
    A flag `--a-b V` declares the setting a_b (study-train's flag names with _); a flag
    followed by another flag or nothing declares the value true."""
    groups = []
    for line in spec.strip().split("\n"):
        if not line.strip():
            continue
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[0] or not parts[1]:
            raise ValueError(f"a group line is not name:models:flags: {line!r}")
        words = shlex.split(parts[2])
        flags, i = {}, 0
        while i < len(words):
            w = words[i]
            if not w.startswith("--"):
                raise ValueError(f"group {parts[0]}: {w!r} is not a flag")
            if i + 1 < len(words) and not words[i + 1].startswith("--"):
                flags[w[2:].replace("-", "_")] = words[i + 1]
                i += 2
            else:
                flags[w[2:].replace("-", "_")] = True
                i += 1
        groups.append({"name": parts[0], "models": parts[1].split(","), "flags": flags,
                       "text": " ".join(f"{k} {v}" if v is not True else k
                                        for k, v in flags.items())})
    return groups


def zoo_sh_groups():
    """The group table of scripts/zoo.sh (its `groups="..."` lines)."""
    with open(os.path.join(ROOT, "scripts", "zoo.sh"), encoding="utf-8") as f:
        m = re.search(r'^groups="(.*?)"$', f.read(), re.M | re.S)
    if not m:
        raise ValueError("scripts/zoo.sh has no groups=\"...\" table")
    return m.group(1)


def same_value(setting, flag):
    """A resolved setting equals the flag's value (numbers compared as numbers)."""
    if flag is True:
        return setting is True
    if isinstance(setting, bool):
        return str(flag).lower() in (("true", "1", "yes") if setting else ("false", "0", "no"))
    if isinstance(setting, (int, float)):
        try:
            return float(flag) == float(setting)
        except ValueError:
            return False
    return str(setting) == str(flag)


def load_zoo(d, groups):
    """Every group's study (report.load_study), checked to be one study: the declared
    models, finished (summary.json), the same data, step budget and analysis settings,
    and settings that differ only where a group's flags declare it. Raises Incomplete."""
    studies = {}
    for g in groups:
        gd = os.path.join(d, g["name"])
        if not os.path.isdir(gd):
            raise Incomplete(f"{gd} is missing (group {g['name']}: {','.join(g['models'])})")
        if not os.path.exists(os.path.join(gd, "summary.json")):
            raise Incomplete(f"{gd} is unfinished (no summary.json): run scripts/zoo.sh again "
                             f"once its models are done")
        plan, runs = report.load_study(gd)
        if sorted(plan["models"]) != sorted(g["models"]):
            raise Incomplete(f"{gd} holds models {','.join(plan['models'])}, the group "
                             f"{g['name']} is {','.join(g['models'])}")
        for k, v in g["flags"].items():
            if k not in plan["settings"]:
                raise Incomplete(f"group {g['name']} declares --{k.replace('_', '-')}, which is "
                                 f"no setting of {gd}/study.json")
            if not same_value(plan["settings"][k], v):
                raise Incomplete(f"{gd}: {k} is {json.dumps(plan['settings'][k])}, the group "
                                 f"declares {v}")
        studies[g["name"]] = (plan, runs)
    names = [g["name"] for g in groups]
    p0 = studies[names[0]][0]
    for g in groups[1:]:
        p = studies[g["name"]][0]
        gd = os.path.join(d, g["name"])
        if p["data"] != p0["data"]:
            raise Incomplete(f"{gd} was trained on other data than {names[0]}: "
                             f"{report.describe_data(p['data'])} against "
                             f"{report.describe_data(p0['data'])}")
        for key in ("steps", "steps_1l", "analyse_args"):
            if p.get(key) != p0.get(key):
                raise Incomplete(f"{gd}: {key} {json.dumps(p.get(key))}, {names[0]}'s "
                                 f"{json.dumps(p0.get(key))}: not one study")
        declared = set(g["flags"]) | set(groups[0]["flags"])
        keys = set(p["settings"]) | set(p0["settings"])
        diff = sorted(k for k in keys if p["settings"].get(k, "(absent)") !=
                      p0["settings"].get(k, "(absent)") and k not in declared)
        if diff:
            raise Incomplete(f"{gd}: settings differ from {names[0]}'s in what the groups do "
                             f"not declare: " + "; ".join(
                                 f"{k} {json.dumps(p['settings'].get(k, '(absent)'))} here, "
                                 f"{json.dumps(p0['settings'].get(k, '(absent)'))} in "
                                 f"{names[0]}" for k in diff))
        r0 = next(iter(studies[names[0]][1].values()))["analysis"]["config"]
        r1 = next(iter(studies[g["name"]][1].values()))["analysis"]["config"]
        if r1["evaluation"] != r0["evaluation"] or r1["data"] != r0["data"]:
            raise Incomplete(f"{gd}: its analyses' evaluation or data settings differ from "
                             f"{names[0]}'s: not one study")
    return studies


# ---- a row per model ----

DEFINITIONS = {
    "window": "study-analyse's phase-change window of the model (the 10%-90% rule on the ICL "
              "score of every kept weight, docs/phase-change.md), in steps and tokens",
    "icl_before": "the band ICL score (nats) of the weights kept at the last evaluation at or "
                  "before the window's start, on the large evaluation (no window: the first "
                  "evaluation after the warm-up); _se: standard error by batch means",
    "icl_after": "the band ICL score of the final weights on the large evaluation; _groups: "
                 "its groups' scores (paired differences between models)",
    "pm_best_any_layer": "the largest final prefix-matching score of any head of any layer "
                         "(heads.prefix_matching); pm_best_head / pm_best_layer: "
                         "any_layer.pm_head",
    "induction_heads": "every head of any layer classified induction (any_layer."
                       "induction_heads: layer, relative depth (layer + 1) / n_layers, prefix "
                       "matching)",
    "ablation": "removed: ICL with every induction head zero-ablated minus ICL clean on the "
                "ablation evaluation (paired, nats) ± removed_se; fraction_removed: removed / "
                "-icl_after (analysis.json's fraction_removed_by_induction_heads) ± "
                "removed_se / -icl_after",
    "bump": "study-analyse's loss-curve bump (true / false / null)",
    "pca_turn": "see pca_turn.rule; tokens and whether it lies within the window +- one "
                "evaluation interval",
}

def tokens_of(step, cfg):
    return float(step) * cfg["training"]["batch"] * cfg["training"]["seq_len"]


def fnum(x):
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else NAN


def row(name, group, run, traj, cfg):
    a = run["analysis"]
    m, any_ = a["model"], a["any_layer"]
    w = m["window"]
    pm = [v for r in m["heads"]["prefix_matching"] for v in r]
    best = any_["pm_head"]
    ab = m["ablation"]
    icl_after = fnum(m["icl_after"])
    rem_se = fnum(ab["removed_by_induction_heads_se"])
    steps = [p["step"] for p in traj]
    turn = pca_turn([(p["pc1"], p["pc2"]) for p in traj], steps,
                    cfg["training"]["warmup_steps"]) if traj else {"step": None}
    ev = cfg["evaluation"]["eval_every"]
    if turn["step"] is not None:
        turn["tokens"] = tokens_of(turn["step"], cfg)
        turn["in_window"] = bool(w["found"]) and \
            w["start_step"] - ev <= turn["step"] <= w["end_step"] + ev
    return {
        "name": name, "group": group["name"], "differs": group["text"] or None,
        "family": family(name), "n_layers": m["n_layers"],
        "window": {"found": bool(w["found"]), "start_step": w.get("start_step"),
                   "end_step": w.get("end_step"),
                   "start_tokens": w.get("start_tokens"), "end_tokens": w.get("end_tokens")},
        "icl_before": m["icl_before"], "icl_before_se": m["icl_before_se"],
        "icl_before_step": m["icl_before_step"],
        "icl_after": m["icl_after"], "icl_after_se": m["icl_after_se"],
        "icl_after_groups": m.get("icl_after_groups"),
        "pm_best_any_layer": max(pm) if pm else NAN,
        "pm_best_head": best["head"], "pm_best_layer": best["layer"],
        "induction_threshold": m["heads"]["thresholds"]["induction"],
        "induction_heads": any_["induction_heads"],
        "ablation": {"removed": ab["removed_by_induction_heads"], "removed_se": rem_se,
                     "fraction_removed": ab["fraction_removed_by_induction_heads"],
                     "fraction_removed_se": rem_se / -icl_after if icl_after < 0 else NAN},
        "bump": m["bump"]["bump"],
        "pca_turn": turn,
        "final_eval_loss": m["final_eval_loss"],
    }


# ---- the slopes ----

def slope_section(runs, rows, cfg):
    """Each model's eval-loss slope against log10 tokens before and after its window (a
    model without a window: the 2-layer attention-only model's), and per family the rank
    correlation of depth with the slope on either side."""
    ref = rows.get("2L")
    out = {"models": {}, "families": {}}
    for n, r in rows.items():
        w = r["window"] if r["window"]["found"] else ref["window"] if ref and \
            ref["window"]["found"] else None
        recs = runs[n]["records"]
        toks = [tokens_of(x["step"], cfg) for x in recs]
        loss = [x.get("eval_loss") for x in recs]
        if w is None:
            out["models"][n] = {"window": None}
            continue
        s = slopes_around(toks, loss, w["start_tokens"], w["end_tokens"])
        s["window"] = "own" if r["window"]["found"] else "2L's"
        out["models"][n] = s
    for fam in FAMILY_TITLE:
        names = [n for n in display_order(list(rows)) if family(n) == fam and
                 out["models"][n].get("window")]
        if len(names) < 2:
            continue
        depth = [float(layers_of(n)) for n in names]
        rb = spearman(depth, [out["models"][n]["before"]["slope"] for n in names])
        ra = spearman(depth, [out["models"][n]["after"]["slope"] for n in names])
        out["families"][fam] = {"models": names, "spearman_depth_slope_before": rb,
                                "spearman_depth_slope_after": ra,
                                "order_flips": bool(rb * ra < 0) if math.isfinite(rb * ra)
                                else None}
    out["rule"] = ("least-squares slope of eval_loss against log10(tokens) (nats per decade), "
                   "standard error from the residuals (none with 2 points): 'before' over "
                   "the evaluations with 0 < tokens <= the window's start, 'after' over "
                   "those with tokens >= its end; models without a window use the 2-layer "
                   "attention-only model's; per family, Spearman's rank correlation of depth "
                   "with the slope on each side, and whether its sign flips")
    return out


# ---- what each model cost ----

def cost_section(studies, runs, order):
    """Each model's training wall time (all its sessions) and throughput, and its analysis
    time, from its run directory; each group's wall time (study.json's `wall_seconds`,
    present only when one local session ran the whole group from nothing) and their sum,
    the study's time before this report when every group has one (the groups run one after
    the other)."""
    def num(x):
        return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None
    models = {}
    for n in order:
        a = runs[n]["analysis"]
        models[n] = {"train_seconds": num(a["model"].get("wall_seconds")),
                     "tokens_per_second": num(a["model"].get("tokens_per_second")),
                     "analysis_seconds": num(a.get("seconds")),
                     "threads": a.get("threads")}
    groups = {g: num(p.get("wall_seconds")) for g, (p, _) in studies.items()}
    total = sum(groups.values()) if all(v is not None for v in groups.values()) else None
    plan0 = next(iter(studies.values()))[0]
    return {"models": models, "groups_seconds": groups, "study_seconds": total,
            "jobs": plan0.get("jobs"), "threads": plan0.get("threads")}


# ---- the whole report ----

def build(d, groups, induct, opt):
    studies = load_zoo(d, groups)
    runs, group_of = {}, {}
    for g in groups:
        for n, r in studies[g["name"]][1].items():
            runs[n] = r
            group_of[n] = g
    order = display_order(list(runs))
    g0 = groups[0]["name"]
    cfg = report.study_config(studies[g0][0], studies[g0][1],
                              [n for n in studies[g0][0]["models"]])
    pca, traj = report.pca_section(induct, runs, order, cfg)
    rows = {n: row(n, group_of[n], runs[n], traj[n], cfg) for n in order}
    slopes = slope_section(runs, rows, cfg)
    import zoo_model
    k = zoo_checks.RULES["token_k"]
    tok = None
    if "2L" in runs:
        tok = zoo_model.passage(induct, runs["2L"], cfg, opt.passage_windows, k, opt.threads)
    t_ev = time.monotonic()
    evidence = {}
    for n in order:
        if family(n) in ("attention-only", "mlp"):
            evidence[n] = zoo_model.evidence(induct, runs[n], cfg, opt.evidence_windows,
                                             opt.evidence_groups, opt.threads)
    t_ev = time.monotonic() - t_ev
    judged = zoo_checks.judge(rows, tok["classes"] if tok else None,
                              zoo_model.LibStats(induct))
    z = {
        "format": FORMAT,
        "groups": [{"name": g["name"], "models": g["models"],
                    "differs": {k: v for k, v in g["flags"].items()},
                    "differs_text": g["text"] or "the main job's settings"} for g in groups],
        "settings": studies[g0][0]["settings"], "data": studies[g0][0]["data"],
        "config": cfg, "model_order": order,
        "rules": dict(zoo_checks.RULES),
        "definitions": DEFINITIONS,
        "models": rows,
        "pca": pca, "pca_trajectories": traj,
        "slopes": slopes,
        "evidence": {"rule": zoo_model.EVIDENCE_RULE, "windows": opt.evidence_windows,
                     "groups": opt.evidence_groups, "seconds": t_ev, "models": evidence},
        "tokens": None if tok is None else {
            k2: v for k2, v in tok.items()
            if k2 not in ("passage_tokens", "delta", "token_classes", "loglik_start",
                          "loglik_end")},
        "checks": zoo_checks.checks_json(judged),
        "cost": cost_section(studies, runs, order),
        "figures": None,
        "seconds": None,
    }
    if tok is not None:
        z["tokens"]["class_rule"] = (
            f"token t follows a repeat when its {k} preceding tokens occurred earlier in its "
            f"window (as tokens j-{k}..j-1, j < t); it continues the repeat when it equals a "
            f"token that followed one of those earlier occurrences, and breaks it when it "
            f"equals none; every other token is 'rest'")
    return z, judged, tok, runs


def write(d, z, judged, tok, runs, t0):
    import zoo_figures
    import zoo_markdown
    figs = zoo_figures.draw_all(d, z, tok, runs)
    z["figures"] = figs
    z["seconds"] = time.monotonic() - t0
    md = zoo_markdown.markdown(z, judged, d, figs)
    write_atomic(os.path.join(d, "zoo.json"), dump(z))
    write_atomic(os.path.join(d, "zoo.md"), md)
    return md, figs


def main(argv):
    ap = argparse.ArgumentParser(prog="zoo_report.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the study directory (one sub-directory per group)")
    ap.add_argument("--build", help="meson build directory (bindings/python)")
    ap.add_argument("--groups", help="the groups, one name:models:flags line each (default: "
                                     "scripts/zoo.sh's table)")
    ap.add_argument("--evidence-windows", type=int, default=128,
                    help="evaluation windows of the evidence table's ablations (128)")
    ap.add_argument("--evidence-groups", type=int, default=16,
                    help="groups of those windows for the standard errors (16)")
    ap.add_argument("--passage-windows", type=int, default=16,
                    help="held-out windows of seq_len tokens in the token-by-token passage (16)")
    ap.add_argument("--threads", type=int, default=1, help="threads per model (1)")
    a = ap.parse_args(argv)
    for k in ("evidence_windows", "evidence_groups", "passage_windows", "threads"):
        if getattr(a, k) < (2 if k != "threads" else 1):
            ap.error(f"--{k.replace('_', '-')} must be >= {2 if k != 'threads' else 1}")
    if a.evidence_groups > a.evidence_windows:
        ap.error("--evidence-groups must not exceed --evidence-windows")
    try:
        groups = parse_groups(a.groups if a.groups is not None else zoo_sh_groups())
    except ValueError as e:
        ap.error(str(e))
    if not os.path.isdir(a.dir):
        print(f"zoo_report.py: {a.dir} is not a directory", file=sys.stderr)
        return 1
    induct = find_induct(a.build)
    t0 = time.monotonic()
    try:
        z, judged, tok, runs = build(a.dir, groups, induct, a)
        md, figs = write(a.dir, z, judged, tok, runs, t0)
    except Incomplete as e:
        print(f"zoo_report.py: {e}", file=sys.stderr)
        return 1
    print("\n" + md + f"\nwritten: {a.dir}/zoo.json, zoo.md, " + ", ".join(figs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
