"""The small-model study's analyses that run a model (docs/zoo.md): the paper's evidence
table rebuilt (zero-ablating the induction heads at every kept checkpoint from the window's
start to the end of training) and the token-by-token comparison across the 2-layer
model's window. Both load the kept weights of a run directory (weights/step-<S>.safetensors)
through the Python bindings and read the data file its config.json names, after checking
it against the SHA-256 recorded there (as study-train and study-analyse do).
"""
import hashlib
import os
import time

from phase_change_data import sha256_file
from report import Incomplete
from zoo_analyses import (class_changes, evaluation_at_or_after, evaluation_at_or_before,
                          token_classes)

NAN = float("nan")


# ---- the data, checked against the run's SHA-256 ----

def sha256_tree(root, suffix):
    """SHA-256 of the lines "<SHA-256 of the file>  <relative path>\\n" of the regular files
    under root whose names end in suffix, links not followed, in byte order of their
    relative paths (study/data_identity.c; docs/study.md, "The run directory")."""
    paths = []
    for d, dirs, files in os.walk(root, followlinks=False):
        for f in files:
            full = os.path.join(d, f)
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            if suffix and not f.endswith(suffix):
                continue
            paths.append(os.path.relpath(full, root))
    h = hashlib.sha256()
    for rel in sorted(paths, key=os.fsencode):
        h.update(f"{sha256_file(os.path.join(root, rel))}  {rel}\n".encode())
    return h.hexdigest()


def data_path(settings):
    return settings.get("text") or settings.get("tokens")


def check_data(run):
    """The run's data file is the one it was trained on (config.json's data.sha256);
    Incomplete naming the file otherwise."""
    s, want = run["config"]["settings"], run["config"]["data"].get("sha256")
    path = data_path(s)
    if not path or not os.path.exists(path):
        raise Incomplete(f"{run['dir']}: its data {path} is not here (the token-by-token "
                         f"comparison and the evidence table read it)")
    got = sha256_tree(path, s.get("suffix")) if os.path.isdir(path) else sha256_file(path)
    if got != want:
        raise Incomplete(f"{run['dir']}: its data {path} has changed since training "
                         f"(SHA-256 {got}, trained on {want})")
    return path


def open_data(induct, run, n_eval_windows):
    """The run's data as study-train opens it (study/run_config.c, run_open_dataset), with
    n_eval_windows evaluation windows evenly spread over the held-out text."""
    s = run["config"]["settings"]
    path = check_data(run)
    if s.get("text"):
        return induct.Dataset.text_path(path, suffix=s.get("suffix"),
                                        n_eval_windows=n_eval_windows,
                                        val_fraction=s["val_fraction"],
                                        block_tokens=s["block_tokens"], seed=int(s["data_seed"]),
                                        bos=s["bos"])
    return induct.Dataset.token_file(path, format=s["format"], d_vocab=s["d_vocab"],
                                     n_eval_windows=n_eval_windows,
                                     val_fraction=s["val_fraction"],
                                     block_tokens=s["block_tokens"], seed=int(s["data_seed"]))


def weights(run, step):
    p = os.path.join(run["dir"], "weights", f"step-{step}.safetensors")
    if not os.path.exists(p):
        raise Incomplete(f"{p} is missing (the kept weights of the evaluation at step {step})")
    return p


def steps_of(run):
    return [int(r["step"]) for r in run["records"]]


# ---- the evidence table (ICL paper, Table 1 "ablations" column) ----

def evidence(induct, run, cfg, windows, groups, threads=1):
    """At every kept checkpoint from the window's start (the last evaluation at or before
    it) to the end of training: the heads classified induction at that checkpoint by the
    analysis's rule (its thresholds; previous-token and prefix-matching scores of the
    metrics log at that step, the duplicate-token score on the probe), and the ICL score
    (band estimator) on `windows` evaluation windows in `groups` groups, clean and with
    those heads zero-ablated together; the removal is the paired difference over the
    groups. None without a window."""
    m = run["analysis"]["model"]
    if not m["window"]["found"]:
        return None
    ev, T = cfg["evaluation"], cfg["training"]["seq_len"]
    thr = m["heads"]["thresholds"]
    steps = steps_of(run)
    first = evaluation_at_or_before(steps, m["window"]["start_step"])
    recs = {int(r["step"]): r for r in run["records"]}
    data = open_data(induct, run, windows)
    probe = data.probe_config()
    # the windows in groups as study-analyse forms them (study/analyse_run.c, grouping)
    n = max(data.window_count(T, "eval"), 1)
    n_groups = max(min(groups, n), 1)
    per = n // n_groups
    kw = dict(n_groups=n_groups, per_group=per, seq_len=T, early=ev["icl_early_token"],
              late=ev["icl_late_token"], band=ev["icl_band"], split="eval")
    we = m.get("window_evaluation") or {}
    win = {int(st): (v, e) for st, v, e in zip(we.get("steps", []), we.get("icl", []),
                                               we.get("icl_se", []))}
    rows = []
    t0 = time.monotonic()
    for s in [x for x in steps if x >= first]:
        model = induct.Model.load(weights(run, s))
        model.set_threads(threads)
        rec = recs[s]
        dup = model.duplicate_token(**probe)
        labels = induct.classify_heads(rec["previous_token_score"],
                                       rec["prefix_matching_score"], dup, None, thr)
        ind = [(l, h) for l, row in enumerate(labels.tolist()) for h, c in enumerate(row)
               if induct.HEAD_CLASSES[c] == "induction"]
        clean = model.icl_groups(data, **kw)
        icl, icl_se, src = clean.icl, clean.icl_se, "evidence windows"
        if s in win:  # the window evaluation's score of these weights: more windows
            icl, icl_se, src = win[s][0], win[s][1], "window evaluation"
        row = {"step": s, "tokens": float(s) * cfg["training"]["batch"] * T,
               "induction_heads": [f"{l}.{h}" for l, h in ind],
               "icl_clean": clean.icl, "icl_clean_se": clean.icl_se,
               "icl": icl, "icl_se": icl_se, "icl_source": src}
        if ind:
            with model.ablate(ind):
                abl = model.icl_groups(data, **kw)
            rem, se = induct.paired_difference(abl.groups, clean.groups)
            frac = rem / -icl if icl < 0 else NAN
            row.update(icl_ablated=abl.icl, removed=rem, removed_se=se, fraction_removed=frac,
                       fraction_removed_se=se / -icl if icl < 0 else NAN,
                       some=bool(rem > 2 * se), most=bool(rem > 2 * se and frac > 0.5))
        else:
            row.update(icl_ablated=None, removed=None, removed_se=None, fraction_removed=None,
                       fraction_removed_se=None, some=False, most=False)
        rows.append(row)
        model.close()
    return {"checkpoints": rows, "from_step": first, "windows": n_groups * per,
            "groups": n_groups, "seconds": time.monotonic() - t0,
            "some_everywhere": all(r["some"] for r in rows),
            "most_everywhere": all(r["most"] for r in rows)}


EVIDENCE_RULE = (
    "at every kept checkpoint (weights/step-S) from the last evaluation at or before the "
    "window's start to the end of training: the heads classified induction at that "
    "checkpoint (the analysis's classification rule and thresholds on the metrics log's "
    "previous-token and prefix-matching scores at S and the duplicate-token score on the "
    "probe) are zero-ablated together; removed = ICL(ablated) - ICL(clean), the band ICL "
    "estimator on the same evaluation windows, paired over their groups (the library's "
    "paired_difference); 'some' = removed > 2 standard errors, 'most' = some and removed / -ICL > 0.5, "
    "ICL being the checkpoint's score on the window evaluation (study-analyse's ICL score "
    "of every kept weight; on the evidence windows when the analysis made none), as the "
    "analysis divides the removal by the large evaluation's score; a checkpoint without an "
    "induction head, or whose ICL is not negative, has no 'most'; one without an induction "
    "head has no 'some' either")


# ---- token by token across the 2-layer model's window ----

def passage(induct, run, cfg, n_windows, k, threads=1):
    """The change in per-token log-likelihood on a fixed held-out passage (the first
    n_windows of the held-out text's evaluation windows when the data opens with that
    many: evenly spread, each seq_len tokens) between the kept weights at the last
    evaluation at or before the window's start and the first at or after its end; each
    token's class (zoo_analyses.token_classes, k preceding tokens) and the mean change per
    class with standard errors by batch means over the windows. None without a window."""
    m = run["analysis"]["model"]
    if not m["window"]["found"]:
        return None
    T = cfg["training"]["seq_len"]
    steps = steps_of(run)
    s0 = evaluation_at_or_before(steps, m["window"]["start_step"])
    s1 = evaluation_at_or_after(steps, m["window"]["end_step"])
    data = open_data(induct, run, n_windows)
    toks, _ = data.batch(0, n_windows, T, split="eval")
    toks = [list(map(int, row)) for row in toks.tolist()]
    ll = []
    for s in (s0, s1):
        model = induct.Model.load(weights(run, s))
        model.set_threads(threads)
        _, losses, _ = model.forward(toks, logits=False)
        ll.append([[-float(x) for x in row] for row in losses.tolist()])
        model.close()
    delta = [[b - a for a, b in zip(r0, r1)] for r0, r1 in zip(ll[0], ll[1])]
    classes = [token_classes(row, k) for row in toks]
    stats = class_changes(delta, classes, LibStats(induct))
    return {"model": run["analysis"]["model"]["name"], "start_step": s0, "end_step": s1,
            "tokens_start": float(s0) * cfg["training"]["batch"] * T,
            "tokens_end": float(s1) * cfg["training"]["batch"] * T,
            "windows": n_windows, "seq_len": T, "k": k, "classes": stats,
            "passage_tokens": toks, "delta": delta, "token_classes": classes,
            "loglik_start": ll[0], "loglik_end": ll[1],
            "rule": "change = log p_end(token) - log p_start(token) (nats; > 0: better "
                    "predicted at the end), each token predicted from the tokens before it "
                    "in its window; class means are means of the windows' class means, "
                    "standard errors by batch means over the windows (the library's "
                    "batch_means); differences paired over the windows with both classes"}


class LibStats:
    """batch_means and paired_difference from the library, as plain tuples."""

    def __init__(self, induct):
        self.induct = induct

    def batch_means(self, v):
        return tuple(self.induct.batch_means(v))

    def paired_difference(self, a, b):
        return tuple(self.induct.paired_difference(a, b))


def token_texts(induct, cfg, tokens):
    """The text of every token of `tokens` (a list of windows): the bytes of a byte-level
    text dataset, or a token file's word pieces through the sentencepiece model beside it
    (plot_phase_change.tokenizer_for: PREFIX.model next to PREFIX.u16, the last id the line
    break); None when there is no tokenizer (the figures show ids)."""
    from plot_phase_change import tokenizer_for
    tk = tokenizer_for(induct, cfg["data"])
    if tk is None:
        return None
    return [list(tk.to_str_tokens(list(w))) for w in tokens]
