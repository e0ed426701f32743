"""zoo.md: the small-model study's report as text (study/zoo_report.py; docs/zoo.md)."""
import math

from zoo_analyses import CLASSES, FAMILY_TITLE, family
from zoo_checks import status_text


def ok(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def g3(x):
    return "%.3g" % x if ok(x) else "—"


def pm(x, se, fmt="%+.3f"):
    if not ok(x):
        return "—"
    return (fmt % x) + (" ± %.3f" % se if ok(se) else "")


def mtok(x):
    return "%.2f" % (x / 1e6) if ok(x) else "—"


def window_text(w):
    if not w["found"]:
        return "none"
    return "%s–%s" % (mtok(w["start_tokens"]), mtok(w["end_tokens"]))


def heads_text(r):
    ih = r["induction_heads"]
    if not ih:
        return "none"
    return ", ".join("%s (%.2f)" % (h["head"], h["prefix_matching"]) for h in ih)


def removed_text(r):
    ab = r["ablation"]
    if not r["induction_heads"]:
        return "n/a (no induction head)"
    if not ok(ab["fraction_removed"]):
        return "n/a (ICL score not negative)"
    return "%.0f%% ± %.0f%%" % (100 * ab["fraction_removed"], 100 * ab["fraction_removed_se"]) \
        if ok(ab["fraction_removed_se"]) else "%.0f%%" % (100 * ab["fraction_removed"])


def turn_text(t):
    if t.get("step") is None:
        return "none"
    return "%s M (%.0f°)%s" % (mtok(t["tokens"]), t["angle_degrees"],
                               ", in the window" if t.get("in_window") else "")


def bump_text(b):
    return "yes" if b is True else "no" if b is False else "—"


def markdown(z, judged, d, figures):
    cfg, rows = z["config"], z["models"]
    tr, mc, ev = cfg["training"], cfg["model"], cfg["evaluation"]
    out = []
    add = out.append
    add("# The small-model study on %s\n\n" % cfg["data"]["path"])
    add("The ICL paper's families of small models (Olsson et al. 2022): attention-only with 1–6 "
        "layers, with GELU MLPs (d_mlp = 4·d_model) with 1–6 layers, and smeared keys with 1 and "
        "2 layers. Every model: d_model %u, %u heads of d_head %u, seq_len %u, batch %u, "
        "%d steps (%s M tokens), the same data in the same order, evaluation every %d steps. "
        "Windows and token counts in millions of tokens; ICL scores in nats (band estimator, "
        "large evaluation, mean ± standard error by batch means).\n\n"
        % (mc["d_model"], mc["n_heads"], mc["d_head"], tr["seq_len"], tr["batch"], tr["steps"],
           g3(tr["tokens_per_model"] / 1e6), ev["eval_every"]))
    add("| group | models | differs from the main job's settings in |\n|---|---|---|\n")
    for g in z["groups"]:
        add("| %s | %s | %s |\n" % (g["name"], ", ".join(g["models"]),
                                    g["differs_text"] if g["differs"] else "nothing"))
    add("\n## The models\n\n")
    add("| model | group (differs) | window (M tokens) | ICL before → after | best prefix "
        "matching (head) | induction heads (prefix matching) | ICL removed by ablating them "
        "| bump | PCA turn |\n|---|---|---|---|---|---|---|---|---|\n")
    for n in z["model_order"]:
        r = rows[n]
        add("| %s | %s%s | %s | %s → %s | %.2f (%s) | %s | %s | %s | %s |\n"
            % (n, r["group"], " (%s)" % r["differs"] if r["differs"] else "",
               window_text(r["window"]), pm(r["icl_before"], r["icl_before_se"]),
               pm(r["icl_after"], r["icl_after_se"]), r["pm_best_any_layer"],
               r["pm_best_head"], heads_text(r), removed_text(r), bump_text(r["bump"]),
               turn_text(r["pca_turn"])))
    add("\nICL before: the large evaluation of the weights kept at the last evaluation at or "
        "before the window's start (no window: the first evaluation after the warm-up, per-step "
        "or window evaluation); after: the final weights. Heads are `layer.head`, searched in "
        "every layer; an induction head is a head classified induction (prefix matching >= "
        "%.2f and the largest margin of its classes). ICL removed: zero-ablating the induction "
        "heads together, as a fraction of the final ICL score. PCA turn: "
        "%s.\n\n" % (next(iter(rows.values()))["induction_threshold"],
                     next(iter(rows.values()))["pca_turn"].get("rule", "")))
    add("## Checks\n\n| check | claim | result |\n|---|---|---|\n")
    for c in judged:
        add("| %s | %s | **%s** |\n" % (c["id"], c["claim"], status_text(c["status"])))
    add("\n")
    for c in judged:
        add("- **%s** (%s): %s. Numbers: `%s`\n" % (c["id"], status_text(c["status"]),
                                                   c["rule"], compact(c["numbers"])))
    add("\n## The evidence table: ablating the induction heads from the window to the end\n\n")
    e = z["evidence"]
    add("%s. %u evaluation windows in %u groups per checkpoint; %.0f s for every model.\n\n"
        % (e["rule"][0].upper() + e["rule"][1:], e["windows"], e["groups"], e["seconds"]))
    add("| model | checkpoints (M tokens): removed fraction, S = some, M = most | some at "
        "every checkpoint | most at every checkpoint |\n|---|---|---|---|\n")
    fam_counts = {}
    for n, ev_ in e["models"].items():
        r = rows[n]
        if ev_ is None:
            add("| %s | no window | — | — |\n" % n)
            continue
        cells = []
        for c in ev_["checkpoints"]:
            if not c["induction_heads"]:
                cells.append("%s: no induction head" % mtok(c["tokens"]))
            else:
                cells.append("%s: %s%s" % (mtok(c["tokens"]),
                                           "%.0f%%" % (100 * c["fraction_removed"])
                                           if ok(c["fraction_removed"]) else "n/a",
                                           " " + ("S" if c["some"] else "") + ("M" if c["most"]
                                                                              else "")))
            f = fam_counts.setdefault(family(n), [0, 0, 0])
            f[0] += 1
            f[1] += c["some"]
            f[2] += c["most"]
        add("| %s%s | %s | %s | %s |\n" % (n, " (%s)" % r["differs"] if r["differs"] else "",
                                           "; ".join(cells), "yes" if ev_["some_everywhere"]
                                           else "no", "yes" if ev_["most_everywhere"] else "no"))
    add("\n| family | checkpoints | some | most | ICL paper (Table 1, ablations) |\n"
        "|---|---|---|---|---|\n")
    paper = {"attention-only": "strong, causal", "mlp": "medium, causal"}
    for fam, (nn, s, m) in fam_counts.items():
        add("| %s | %u | %u | %u | %s |\n" % (FAMILY_TITLE[fam], nn, s, m, paper.get(fam, "—")))
    add("\n## Slopes of the loss curve against log tokens\n\n")
    sl = z["slopes"]
    add("%s.\n\n| model | before: slope ± s.e. (points) | after: slope ± s.e. (points) | "
        "window |\n|---|---|---|---|\n" % (sl["rule"][0].upper() + sl["rule"][1:]))
    for n in z["model_order"]:
        s = sl["models"][n]
        if not s.get("window"):
            add("| %s | — | — | none |\n" % n)
            continue
        add("| %s | %s (%u) | %s (%u) | %s |\n"
            % (n, pm(s["before"]["slope"], s["before"]["se"]), s["before"]["n"],
               pm(s["after"]["slope"], s["after"]["se"]), s["after"]["n"], s["window"]))
    add("\n")
    for fam, f in sl["families"].items():
        add("- %s (%s): rank correlation of depth with the slope %s before the window, %s "
            "after it: the order by size %s.\n"
            % (FAMILY_TITLE[fam], ", ".join(f["models"]), g3(f["spearman_depth_slope_before"]),
               g3(f["spearman_depth_slope_after"]),
               "flips" if f["order_flips"] else "does not flip" if f["order_flips"] is False
               else "is undecided (a constant or missing slope)"))
    add("\n## Token by token across the 2-layer model's window\n\n")
    t = z["tokens"]
    if t is None:
        add("Not computed: the study has no 2-layer attention-only model, or it has no window.\n\n")
    else:
        add("Held-out passage: %u windows of %u tokens; the 2L model's kept weights at step %u "
            "(%s M tokens) and step %u (%s M tokens). %s. Classes: %s.\n\n"
            % (t["windows"], t["seq_len"], t["start_step"], mtok(t["tokens_start"]),
               t["end_step"], mtok(t["tokens_end"]), t["rule"][0].upper() + t["rule"][1:],
               t["class_rule"]))
        add("| class | tokens | mean change of log-likelihood (nats) |\n|---|---|---|\n")
        for c in CLASSES:
            x = t["classes"][c]
            add("| %s | %u | %s |\n" % (c, x["tokens"], pm(x["mean"], x["se"])))
        for c in ("continues_minus_rest", "breaks_minus_rest"):
            x = t["classes"][c]
            add("| %s (paired over windows) | — | %s |\n" % (c.replace("_", " "),
                                                              pm(x["mean"], x["se"])))
        add("\n")
    add("## What each model cost\n\n")
    c = z["cost"]
    add("%s models at a time, %s thread%s each. Training: wall time over all of a model's "
        "sessions, tokens per second of its last session's training steps; analysis: the "
        "per-model analysis (the evidence table's ablations above are the report's).\n\n"
        % (c["jobs"], c["threads"], "" if c["threads"] == 1 else "s"))
    add("| model | training (s) | tokens/s | analysis (s) |\n|---|---|---|---|\n")
    sec = lambda x: "—" if x is None else "%.0f" % x if x >= 100 else "%.3g" % x  # noqa: E731
    for n, m in c["models"].items():
        add("| %s | %s | %s | %s |\n" % (n, sec(m["train_seconds"]), sec(m["tokens_per_second"]),
                                         sec(m["analysis_seconds"])))
    add("\nGroups' wall time: %s. " % ", ".join(
        "%s %s" % (g, "not known (resumed, or run on a cluster)" if v is None else "%.0f s" % v)
        for g, v in c["groups_seconds"].items()))
    if c["study_seconds"] is None:
        add("The study's wall time is not known.\n\n")
    else:
        add("The study: %.0f s (%.1f min), and this report %.0f s.\n\n"
            % (c["study_seconds"], c["study_seconds"] / 60, z["seconds"]))
    add("## Figures\n\n")
    for f in figures:
        add("- %s/%s\n" % (d, f))
    add("\nThe report took %.0f s.\n" % z["seconds"])
    return "".join(out)


def compact(x):
    """A check's numbers on one line, 3 significant digits."""
    if isinstance(x, dict):
        return "{" + ", ".join("%s: %s" % (k, compact(v)) for k, v in x.items()) + "}"
    if isinstance(x, list):
        return "[" + ", ".join(compact(v) for v in x) + "]"
    if isinstance(x, float):
        return g3(x)
    return str(x)
