"""The small-model study's six checks of the ICL paper's claims about its families of small
models (docs/zoo.md, "Checks"). The rules were written down before the study ran; RULES
holds their constants and zoo.json copies them. Each check is decided on the numbers of
the study's table rows and its token-by-token section alone, so that tests feed synthetic
numbers.

judge(rows, tokens, stats) -> [check dicts]: `rows` maps a model name to its row of the
table (zoo_report.row(): window, icl_after with its groups and standard error, the largest
final prefix-matching score of any head, the induction threshold, the fraction of ICL
removed by ablating the induction heads); `tokens` is the token-by-token section
(zoo_analyses.class_changes) or None; `stats.paired_difference(a, b) -> (mean, se)`.
Statuses: "pass", "fail", "not_applicable" (what the check judges does not exist, e.g. no
induction head to ablate; another check then fails), "not_run" (a model it needs is not in
the study).
"""
import math

from checks import diff_after, num
from common import layers_of
from zoo_analyses import close_to, family

RULES = {
    # C3: a window is close to the 2-layer attention-only model's when it overlaps
    # [start_2L / factor, end_2L * factor] (tokens)
    "window_factor": 2.0,
    # C4: the final ICL scores agree within this many nats (point estimates)
    "icl_after_tolerance": 0.10,
    # C5: the induction heads together remove more than this fraction of the ICL score
    "ablation_most": 0.50,
    # C6: a difference counts beyond this many standard errors
    "sigmas": 2.0,
    # the token classes: a token follows a repeat when its k preceding tokens occurred
    # earlier in the window
    "token_k": 2,
}
REF = "2L"  # the reference: the 2-layer attention-only model

CLAIMS = {
    "C1": ("Every model with >= 2 layers has a phase-change window and an induction head; no "
           "1-layer model without smeared keys has either",
           "pass iff every model with >= 2 layers has a phase-change window (study-analyse's "
           "window rule) and a head of any layer whose final prefix-matching score is >= the "
           "analysis's induction threshold, and every 1-layer model without smeared keys has "
           "neither"),
    "C2": ("Smeared keys move the phase change earlier: the 2-layer smeared-key model's window "
           "starts before the plain 2-layer model's",
           "pass iff 2L-smeared has a window and it starts at fewer tokens than 2L's (a 2L "
           "without a window counts as starting later)"),
    "C3": ("The windows of the models with >= 2 layers lie close together",
           "pass iff every model with >= 2 layers has a window overlapping [start_2L / 2, "
           "2 * end_2L] (tokens; a factor of two either way on the log axis of the ICL "
           "paper's figures), 2L being the 2-layer attention-only model"),
    "C4": ("The ICL score after the phase change is about the same whatever the size",
           "pass iff every model with >= 2 layers has a final ICL score (large evaluation) "
           "within 0.10 nats of the 2-layer attention-only model's (|difference| <= 0.10, "
           "point estimates; the difference is paired over the evaluation's groups)"),
    "C5": ("Zero-ablating the induction heads removes most of the ICL score in the "
           "attention-only models with >= 2 layers",
           "decided on every attention-only model (no MLP, no smeared keys) with >= 2 "
           "layers at the end of training: removed fraction (analysis.json's "
           "fraction_removed_by_induction_heads, zero ablation of every head classified "
           "induction together) > 0.50; a model without an induction head is not "
           "applicable (C1 fails for it); pass iff at least one model is applicable and "
           "every applicable one passes"),
    "C6": ("Across the 2-layer model's phase change, tokens that continue an earlier repeat "
           "improve more than the rest, and tokens that break one get worse",
           "on the held-out passage, between the 2-layer attention-only model's kept weights "
           "at the window's start and end: pass iff the mean log-likelihood change of "
           "continuing tokens minus that of the rest exceeds 2 standard errors of the "
           "difference (paired over the passage's windows), and the mean change of "
           "breaking tokens is < 0 by more than 2 standard errors; not applicable when the "
           "2-layer model has no window"),
}
NAN = float("nan")


def _check(cid, status="not_run", numbers=None):
    claim, rule = CLAIMS[cid]
    return {"id": cid, "claim": claim, "rule": rule, "status": status, "numbers": numbers}


def has_window(r):
    return bool(r.get("window", {}).get("found"))


def has_induction_head(r):
    return num(r, "pm_best_any_layer") >= num(r, "induction_threshold")


def judge(rows, tokens, stats):
    out = []
    ref = rows.get(REF)
    deep = [n for n in rows if layers_of(n) >= 2]
    # C1
    n = {}
    ok = True
    for name, r in rows.items():
        L = layers_of(name)
        w, ih = has_window(r), has_induction_head(r)
        if L >= 2:
            good = w and ih
        elif family(name) == "smeared":
            continue
        else:
            good = not w and not ih
        n[name] = {"window_found": w, "pm_best_any_layer": num(r, "pm_best_any_layer"),
                   "induction_threshold": num(r, "induction_threshold"),
                   "induction_head": ih, "passed": good}
        ok = ok and good
    out.append(_check("C1", "pass" if ok and n else "fail" if n else "not_run", n))
    # C2
    c = _check("C2")
    s2 = rows.get("2L-smeared")
    if s2 is not None and ref is not None:
        fs, fr = has_window(s2), has_window(ref)
        ss, sr = num(s2, "window.start_tokens"), num(ref, "window.start_tokens")
        earlier = fs and (not fr or ss < sr)
        c.update(status="pass" if earlier else "fail",
                 numbers={"smeared_window_found": fs, "smeared_start_tokens": ss,
                          "plain_window_found": fr, "plain_start_tokens": sr,
                          "starts_earlier": earlier})
    out.append(c)
    # C3
    c = _check("C3")
    if ref is not None and deep:
        if not has_window(ref):
            c.update(status="fail", numbers={"reference": "2L has no window"})
        else:
            f = RULES["window_factor"]
            rs, re_ = num(ref, "window.start_tokens"), num(ref, "window.end_tokens")
            n = {"band_start_tokens": rs / f, "band_end_tokens": re_ * f}
            ok = True
            for name in deep:
                r = rows[name]
                w = has_window(r)
                s, e = num(r, "window.start_tokens"), num(r, "window.end_tokens")
                good = w and close_to((s, e), (rs, re_), f)
                n[name] = {"window_found": w, "start_tokens": s, "end_tokens": e,
                           "passed": good}
                ok = ok and good
            c.update(status="pass" if ok else "fail", numbers=n)
    out.append(c)
    # C4
    c = _check("C4")
    if ref is not None and deep:
        tol = RULES["icl_after_tolerance"]
        n, ok = {"reference_icl_after": num(ref, "icl_after"),
                 "reference_icl_after_se": num(ref, "icl_after_se")}, True
        for name in deep:
            if name == REF:
                continue
            d, se = diff_after(rows[name], ref, stats)
            good = abs(d) <= tol
            n[name] = {"icl_after": num(rows[name], "icl_after"),
                       "icl_after_se": num(rows[name], "icl_after_se"),
                       "difference": d, "difference_se": se, "passed": good}
            ok = ok and good
        c.update(status="pass" if ok else "fail", numbers=n)
    out.append(c)
    # C5
    c = _check("C5")
    judged = [nm for nm in deep if family(nm) == "attention-only"]
    if judged:
        n, ok, applicable = {}, True, 0
        for name in judged:
            r = rows[name]
            f, fse = num(r, "ablation.fraction_removed"), num(r, "ablation.fraction_removed_se")
            if not r.get("induction_heads"):
                n[name] = {"status": "not_applicable", "reason": "no head classified induction"}
                continue
            applicable += 1
            good = f > RULES["ablation_most"]
            n[name] = {"status": "pass" if good else "fail", "fraction_removed": f,
                       "fraction_removed_se": fse, "induction_heads": r["induction_heads"]}
            ok = ok and good
        c.update(status="not_applicable" if applicable == 0 else "pass" if ok else "fail",
                 numbers=n)
    out.append(c)
    # C6
    c = _check("C6")
    if ref is not None:
        if tokens is None or not has_window(ref):
            c.update(status="not_applicable", numbers={"reason": "2L has no window"})
        else:
            k = RULES["sigmas"]
            cr = tokens["continues_minus_rest"]
            br = tokens["breaks"]
            ok_c = cr["mean"] > k * cr["se"]
            ok_b = br["mean"] < 0 and -br["mean"] > k * br["se"]
            c.update(status="pass" if ok_c and ok_b else "fail",
                     numbers={"continues_minus_rest": cr["mean"],
                              "continues_minus_rest_se": cr["se"],
                              "continues_better": ok_c,
                              "breaks": br["mean"], "breaks_se": br["se"],
                              "breaks_worse": ok_b})
    out.append(c)
    return out


def status_text(s):
    return {"pass": "PASS", "fail": "FAIL", "not_applicable": "not applicable"}.get(s, "not run")


def checks_json(judged):
    return {c["id"]: {"claim": c["claim"], "status": c["status"],
                      "passed": c["status"] == "pass" if c["status"] in ("pass", "fail")
                      else None, "rule": c["rule"], "numbers": c["numbers"]} for c in judged}


def finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)
