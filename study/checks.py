"""The main job's four checks of the ICL paper's claims (docs/phase-change.md, "Checks").

Each check is decided on the numbers of the models' analyses alone (summary.json's
"models", i.e. each run directory's analysis.json), so that `report.py --judge
SUMMARY.json` decides them again and tests can feed synthetic numbers. The rules were
written down before the runs they judge; RULES holds their constants.

judge(models, stats) -> [check dicts]; `stats` provides paired_difference(a, b) ->
(mean, se), the library's (induct.paired_difference), so that a difference of two
models' ICL scores has the bits the C analysis gives it.
"""
import math

# Every ICL figure the checks read comes with a standard error (batch means over groups
# of windows); a difference counts only when it exceeds SIGMAS standard errors.
RULES = {
    "sigmas": 3.0,
    # 2 layers: the ICL score falls by at least this across the window (nats)
    "icl_fall_min": 0.15,
    # 2 layers: the window is at most this many times the training before it opens
    "window_max_vs_training_before": 1.0,
    # 2 layers: a last-layer head ends above this prefix-matching score ...
    "pm_high": 0.30,
    # ... and at least this fraction of its rise from chance happens inside the window
    "pm_rise_inside_window": 0.50,
    # 2 layers: after the window its ICL score is at least this far below the control's
    "icl_below_control": 0.15,
    # 1 layer: no head above this prefix-matching score at any evaluation
    "pm_one_layer_max": 0.10,
    # 1 layer: the final ICL score within +- this of 0 (nats)
    "icl_one_layer_abs": 0.05,
    # ablation: the induction heads together remove at least this fraction of the score
    "ablation_most": 0.50,
    # ... and no single other head (patterns preserved) more than this fraction
    "ablation_other_max": 0.25,
    # smallest change of a prefix-matching series that counts as a window (reported only;
    # study-analyse applies it)
    "pm_min_change": 0.10,
}

RULE_2L = (
    "pass iff (a) a phase-change window of the ICL score is found (10%-90% of its change, "
    "per-step evaluations); (b) the ICL score falls by >= 0.15 nats across it (icl_before - "
    "icl_after on the large evaluation, paired over its groups) and the fall exceeds 3 "
    "standard errors; (c) the window is no longer than the training before it opens "
    "(end - start <= start); (d) the last-layer head with the largest final prefix-matching "
    "score ends above 0.30, and at least half of its rise from chance (final - chance) "
    "happens inside the window (interpolated between evaluations); (e) the final ICL score "
    "is >= 0.15 nats below the 1-layer control's, by more than 3 standard errors")
RULE_1L = (
    "pass iff no phase-change window is found, no head's prefix-matching score exceeds 0.10 "
    "at any evaluation, and the final ICL score (large evaluation) is within +-0.05 nats of "
    "0 (a larger |ICL| counts only when it also exceeds 3 standard errors)")
RULE_1LS = (
    "pass iff a phase-change window is found and it opens earlier than the 2-layer model's "
    "(a 2-layer model without a window in the run counts as opening later)")
RULE_ABL = (
    "decided on every model with at least one head classified induction: each must have a "
    "final ICL score icl_after < 0, zero-ablating all its induction heads together must "
    "remove >= half of it ((icl_ablated - icl_clean) >= 0.5 |icl_after|, the removal a "
    "paired difference on the ablation evaluation exceeding 3 "
    "standard errors of the paired difference), and no single other head may remove more "
    "than a quarter under pattern-preserving zero ablation (a removal counts only when it "
    "exceeds 3 standard errors); pass iff at least one model has induction heads and every "
    "such model satisfies this")

CLAIMS = {
    "two_layer_phase_change": (
        "2 layers: the ICL score falls by >= 0.15 nats inside a window no longer than the "
        "training before it, while a last-layer head's prefix matching rises above 0.3, "
        "ending >= 0.15 nats below the 1-layer control", "2L", RULE_2L),
    "one_layer_no_phase_change": (
        "1 layer: no window, no prefix-matching head, no in-context learning (final ICL "
        "score within +-0.05 nats of 0)", "1L", RULE_1L),
    "smeared_one_layer_phase_change": (
        "1 layer with smeared keys: the phase change comes earlier than the 2-layer model's "
        "(moving the induction heads' formation moves the ICL jump)", "1L-smeared", RULE_1LS),
    "induction_heads_carry_icl": (
        "Zero-ablating the heads classified as induction removes at least half of the ICL "
        "score; no single other head removes more than a quarter (patterns preserved)",
        "every model with induction heads", RULE_ABL),
}
NAN = float("nan")


def num(obj, path):
    """The number at a dotted path ("window.start_step"); NaN when missing or null."""
    for key in path.split("."):
        obj = obj.get(key) if isinstance(obj, dict) else None
    return float(obj) if isinstance(obj, (int, float)) and not isinstance(obj, bool) else NAN


def true(obj, a, b=None):
    x = obj.get(a) if isinstance(obj, dict) else None
    if b is not None:
        x = x.get(b) if isinstance(x, dict) else None
    return x is True


def counts(x, se):
    """x exceeds SIGMAS standard errors (false when either is NaN)."""
    return x > RULES["sigmas"] * se


def number_list(x):
    if not isinstance(x, list) or not all(isinstance(v, (int, float)) and
                                          not isinstance(v, bool) for v in x):
        return None
    return [float(v) for v in x]


def diff_after(a, b, stats):
    """a's final ICL score minus b's with its standard error: paired over the groups when
    both carry the same groups (the same windows), else from the two standard errors."""
    ga, gb = number_list(a.get("icl_after_groups")), number_list(b.get("icl_after_groups"))
    if ga is not None and gb is not None and len(ga) == len(gb) and len(ga) >= 2:
        return stats.paired_difference(ga, gb)
    return (num(a, "icl_after") - num(b, "icl_after"),
            math.hypot(num(a, "icl_after_se"), num(b, "icl_after_se")))


def _check(cid, numbers=None, status="not_run"):
    claim, model, rule = CLAIMS[cid]
    return {"id": cid, "claim": claim, "model": model, "rule": rule, "status": status,
            "numbers": numbers}


def judge(models, stats):
    """The four checks, in order, on `models` (name -> analysis numbers)."""
    r = RULES
    m2, m1, ms = models.get("2L"), models.get("1L"), models.get("1L-smeared")
    out = []
    # 1. two layers
    c = _check("two_layer_phase_change")
    if m2 is not None:
        found = true(m2, "window", "found")
        ws, we = num(m2, "window.start_step"), num(m2, "window.end_step")
        fall, fall_se = num(m2, "icl_fall"), num(m2, "icl_fall_se")
        pa, rise = num(m2, "pm_head.after"), num(m2, "pm_head.rise_from_chance")
        rin = num(m2, "pm_head.rise_inside_window")
        gap, gap_se = diff_after(m1, m2, stats) if m1 is not None else (NAN, NAN)
        ok_len = found and we - ws <= r["window_max_vs_training_before"] * ws
        ok_fall = found and fall >= r["icl_fall_min"] and counts(fall, fall_se)
        ok_head = pa > r["pm_high"] and rise > 0 and rin >= r["pm_rise_inside_window"] * rise
        ok_gap = m1 is not None and gap >= r["icl_below_control"] and counts(gap, gap_se)
        n = {"window_found": found, "window_start_step": ws, "window_end_step": we,
             "window_no_longer_than_training_before": ok_len,
             "icl_before": num(m2, "icl_before"), "icl_before_se": num(m2, "icl_before_se"),
             "icl_after": num(m2, "icl_after"), "icl_after_se": num(m2, "icl_after_se"),
             "icl_fall": fall, "icl_fall_se": fall_se, "icl_fall_ok": ok_fall,
             "pm_head_after": pa, "pm_rise_from_chance": rise, "pm_rise_inside_window": rin,
             "head_ok": ok_head}
        if m1 is not None:
            n.update(icl_after_control=num(m1, "icl_after"), icl_below_control=gap,
                     icl_below_control_se=gap_se)
        else:
            n["control"] = "the 1-layer control was not run"
        n["below_control_ok"] = ok_gap
        c.update(numbers=n, status="pass" if found and ok_len and ok_fall and ok_head
                 and ok_gap else "fail")
    out.append(c)
    # 2. one layer
    c = _check("one_layer_no_phase_change")
    if m1 is not None:
        found = true(m1, "window", "found")
        pm = num(m1, "pm_max_any_head_any_step")
        a, se = num(m1, "icl_after"), num(m1, "icl_after_se")
        ok_icl = abs(a) <= r["icl_one_layer_abs"] or not counts(abs(a), se)
        c.update(numbers={"window_found": found, "pm_max_any_head_any_step": pm,
                          "icl_after": a, "icl_after_se": se, "icl_ok": ok_icl},
                 status="pass" if not found and pm <= r["pm_one_layer_max"] and ok_icl
                 else "fail")
    out.append(c)
    # 3. one layer, smeared keys
    c = _check("smeared_one_layer_phase_change")
    if ms is not None:
        found = true(ms, "window", "found")
        ws = num(ms, "window.start_step")
        n = {"window_found": found, "window_start_step": ws,
             "window_end_step": num(ms, "window.end_step"),
             "icl_before": num(ms, "icl_before"), "icl_before_se": num(ms, "icl_before_se"),
             "icl_after": num(ms, "icl_after"), "icl_after_se": num(ms, "icl_after_se")}
        earlier = False
        if m2 is not None:
            f2, ws2 = true(m2, "window", "found"), num(m2, "window.start_step")
            n.update(two_layer_window_found=f2, two_layer_window_start_step=ws2)
            earlier = found and (not f2 or ws < ws2)
        else:
            n["two_layer"] = "the 2-layer model was not run"
        n["opens_earlier"] = earlier
        c.update(numbers=n, status="pass" if found and earlier else "fail")
    out.append(c)
    # 4. ablation: every model with at least one head classified induction
    c = _check("induction_heads_carry_icl")
    n, n_with, all_ok = {}, 0, True
    for key, m in models.items():
        heads = m.get("heads") if isinstance(m.get("heads"), dict) else {}
        ind = heads.get("induction") if isinstance(heads.get("induction"), list) else []
        if not ind:
            continue
        n_with += 1
        ab = m.get("ablation") if isinstance(m.get("ablation"), dict) else {}
        # the ICL score: the model's final one (large evaluation); the removals are
        # paired differences on the ablation evaluation
        clean = clean_pp = num(m, "icl_after")
        rem = num(ab, "removed_by_induction_heads")
        rem_se = num(ab, "removed_by_induction_heads_se")
        ok_ind = clean < 0 and rem >= r["ablation_most"] * -clean and counts(rem, rem_se)
        ok_other, worst, worst_rem, worst_se, worst_head = True, NAN, NAN, NAN, "none"
        dpp = ab.get("delta_icl_zero_preserve_patterns")
        dse = ab.get("delta_icl_zero_preserve_patterns_se")
        labels = heads.get("labels") if isinstance(heads.get("labels"), list) else []
        for l, row in enumerate(labels):
            for h, lab in enumerate(row if isinstance(row, list) else []):
                if lab == "induction":
                    continue
                rm, rs = _cell(dpp, l, h), _cell(dse, l, h)
                f = rm / -clean_pp if clean_pp < 0 else NAN
                if math.isfinite(f) and (not math.isfinite(worst) or f > worst):
                    worst, worst_rem, worst_se, worst_head = f, rm, rs, f"{l}.{h}"
                if f > r["ablation_other_max"] and counts(rm, rs):
                    ok_other = False
        ok = ok_ind and ok_other
        all_ok = all_ok and ok
        name = m["name"] if isinstance(m.get("name"), str) else key
        n[name] = {"passed": ok, "icl_after": clean, "icl_after_se": num(m, "icl_after_se"),
                   "n_induction_heads": len(ind), "removed_by_induction_heads": rem,
                   "removed_by_induction_heads_se": rem_se,
                   "fraction_removed_by_induction_heads": rem / -clean if clean < 0 else NAN,
                   "induction_heads_ok": ok_ind, "max_other_head_preserve_patterns": worst_head,
                   "max_fraction_removed_by_other_head_preserve_patterns": worst,
                   "max_other_head_removed": worst_rem, "max_other_head_removed_se": worst_se,
                   "other_heads_ok": ok_other}
    if models:
        n["models_with_induction_heads"] = n_with
        c.update(numbers=n, status="pass" if n_with > 0 and all_ok else "fail")
    out.append(c)
    return out


def _cell(table, l, h):
    try:
        v = table[l][h]
    except (IndexError, KeyError, TypeError):
        return NAN
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else NAN


def checks_json(checks):
    """summary.json's "checks": id -> {claim, model, status, passed, rule, numbers}."""
    return {c["id"]: {"claim": c["claim"], "model": c["model"], "status": c["status"],
                      "passed": None if c["status"] == "not_run" else c["status"] == "pass",
                      "rule": c["rule"], "numbers": c["numbers"]} for c in checks}
