"""The small-model study's cross-model analyses that need no model (docs/zoo.md): the token
classes of the token-by-token comparison, the slopes of the loss curve against log tokens,
the turn of a PCA trajectory, the "close windows" rule, and the families and display order
of the models. Functions of numbers only, so that tests feed them hand-made inputs; the
statistics (batch means, paired differences) are the library's, passed in as `stats`
(an object with batch_means(values) -> (mean, se) and paired_difference(a, b) -> (mean,
se), e.g. induct itself).
"""
import math

from common import layers_of, smeared

NAN = float("nan")

# ---- the models: families and the order of tables and figures ----

FAMILIES = ("attention-only", "smeared", "mlp")
FAMILY_TITLE = {"attention-only": "attention-only", "smeared": "attention-only, smeared keys",
                "mlp": "with MLPs (GELU)"}


def family(name):
    """attention-only (<n>L), smeared (<n>L-smeared, attention-only with smeared keys) or
    mlp (<n>L-mlp, with or without smeared keys: MLP comes first)."""
    if "-mlp" in name:
        return "mlp"
    return "smeared" if smeared(name) else "attention-only"


def display_order(names):
    """Families in FAMILIES order, each by depth."""
    return sorted(names, key=lambda n: (FAMILIES.index(family(n)), layers_of(n), n))


# ---- token classes (ICL paper, Argument 1, the per-token losses across the phase change) ----

CONTINUES, BREAKS, REST = "continues", "breaks", "rest"
CLASSES = (CONTINUES, BREAKS, REST)


def token_classes(tokens, k=2):
    """The class of every predicted token of one window `tokens[0..T)`: entry t - 1 is the
    class of token t (predicted from tokens 0..t-1, the t - 1-th entry of a forward pass's
    per-token losses), t = 1 .. T - 1.

    Token t (t >= k) *follows a repeat* when its k preceding tokens tokens[t-k..t) occurred
    earlier in the window, as tokens[j-k..j) for some j < t. Then it *continues* the repeat
    when it equals a token that followed one of those earlier occurrences (tokens[j] for
    such a j), and *breaks* it when it equals none of them. Every other token (t < k, or
    its k preceding tokens not seen before) is in *rest*."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    toks = [int(x) for x in tokens]
    seen = {}  # k-gram -> the set of tokens that followed it so far
    out = [REST] * max(len(toks) - 1, 0)
    for t in range(k, len(toks)):
        key = tuple(toks[t - k:t])
        nxt = seen.get(key)
        if nxt is not None:
            out[t - 1] = CONTINUES if toks[t] in nxt else BREAKS
        seen.setdefault(key, set()).add(toks[t])
    return out


def class_changes(delta, classes, stats):
    """The mean change per class over windows: `delta[w][i]` is the change of token i + 1's
    log-likelihood in window w (nats; positive = better), `classes[w][i]` its class. Each
    window's class mean is one batch: per class the mean of the windows' means (windows
    without a token of the class left out) and its standard error by batch means; and the
    paired differences continues - rest and breaks - rest over the windows that have both.
    Returns {class: {mean, se, tokens, windows}, "continues_minus_rest": {mean, se,
    windows}, "breaks_minus_rest": ...}."""
    per = {c: [] for c in CLASSES}  # per window: class mean or None
    counts = {c: 0 for c in CLASSES}
    for d, cl in zip(delta, classes):
        if len(d) != len(cl):
            raise ValueError(f"a window has {len(d)} changes and {len(cl)} classes")
        for c in CLASSES:
            v = [float(x) for x, y in zip(d, cl) if y == c]
            counts[c] += len(v)
            per[c].append(sum(v) / len(v) if v else None)
    out = {}
    for c in CLASSES:
        vals = [v for v in per[c] if v is not None]
        m, se = stats.batch_means(vals) if vals else (NAN, NAN)
        out[c] = {"mean": m, "se": se, "tokens": counts[c], "windows": len(vals)}
    for c in (CONTINUES, BREAKS):
        pairs = [(a, b) for a, b in zip(per[c], per[REST]) if a is not None and b is not None]
        if pairs:
            m, se = stats.paired_difference([a for a, _ in pairs], [b for _, b in pairs])
        else:
            m, se = NAN, NAN
        out[f"{c}_minus_rest"] = {"mean": m, "se": se, "windows": len(pairs)}
    return out


# ---- slopes of the loss curve against log tokens ----

def log_slope(tokens, loss):
    """Least-squares slope of loss against log10(tokens) (nats per decade of tokens) with
    its standard error from the residuals (NaN with fewer than 3 points) and the number
    of points; (NaN, NaN, n) with fewer than 2 points or one distinct token count."""
    pts = [(math.log10(t), float(y)) for t, y in zip(tokens, loss)
           if t > 0 and y is not None and math.isfinite(float(y))]
    n = len(pts)
    if n < 2:
        return NAN, NAN, n
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    if sxx <= 0:
        return NAN, NAN, n
    b = sum((x - mx) * (y - my) for x, y in pts) / sxx
    if n < 3:
        return b, NAN, n
    a = my - b * mx
    rss = sum((y - a - b * x) ** 2 for x, y in pts)
    return b, math.sqrt(rss / (n - 2) / sxx), n


def slopes_around(tokens, loss, start, end):
    """The slope before the window (evaluations with 0 < tokens <= start) and after it
    (tokens >= end): {before: {slope, se, n, from, to}, after: {...}}."""
    out = {}
    for side, keep in (("before", lambda t: 0 < t <= start), ("after", lambda t: t >= end)):
        sel = [(t, y) for t, y in zip(tokens, loss) if keep(t)]
        b, se, n = log_slope([t for t, _ in sel], [y for _, y in sel])
        out[side] = {"slope": b, "se": se, "n": n,
                     "tokens_from": sel[0][0] if sel else NAN,
                     "tokens_to": sel[-1][0] if sel else NAN}
    return out


def spearman(x, y):
    """Spearman's rank correlation of two equally long lists (ties get their mean rank);
    NaN with fewer than 2 pairs or a constant list."""
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for q in range(i, j + 1):
                r[order[q]] = (i + j) / 2.0
            i = j + 1
        return r
    pairs = [(a, b) for a, b in zip(x, y) if math.isfinite(a) and math.isfinite(b)]
    if len(pairs) < 2:
        return NAN
    rx, ry = ranks([a for a, _ in pairs]), ranks([b for _, b in pairs])
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    if sx == 0 or sy == 0:
        return NAN
    return sum((a - mx) * (b - my) for a, b in zip(rx, ry)) / (sx * sy)


# ---- the turn of a PCA trajectory ----

TURN_MIN_MOVE = 0.05  # fraction of the path length a move in and out of the turn must have
TURN_MIN_ANGLE = 45.0  # degrees: a smaller change of direction is no turn


def pca_turn(points, steps, warmup_step):
    """The evaluation where a trajectory in the PC1-PC2 plane turns most: among interior
    evaluations after the warm-up (step > warmup_step), the one with the largest angle
    between the move into it and the move out of it, counting only evaluations whose two
    moves are each at least TURN_MIN_MOVE of the trajectory's path length after the
    warm-up (smaller moves, late in training, turn by noise). Returns {step, angle_degrees}
    or {step: None, ...} when no evaluation qualifies or the largest angle is below
    TURN_MIN_ANGLE."""
    pts = [(s, p) for s, p in zip(steps, points) if s > warmup_step]
    moves = [(pts[i + 1][1][0] - pts[i][1][0], pts[i + 1][1][1] - pts[i][1][1])
             for i in range(len(pts) - 1)]
    length = sum(math.hypot(*m) for m in moves)
    best, best_angle = None, NAN
    for i in range(1, len(pts) - 1):
        a, b = moves[i - 1], moves[i]
        na, nb = math.hypot(*a), math.hypot(*b)
        if length <= 0 or na < TURN_MIN_MOVE * length or nb < TURN_MIN_MOVE * length:
            continue
        c = max(-1.0, min(1.0, (a[0] * b[0] + a[1] * b[1]) / (na * nb)))
        ang = math.degrees(math.acos(c))
        if best is None or ang > best_angle:
            best, best_angle = pts[i][0], ang
    if best is not None and best_angle < TURN_MIN_ANGLE:
        best = None
    return {"step": best, "angle_degrees": best_angle,
            "rule": "largest angle between the moves into and out of an evaluation (PC1-PC2 "
                    "plane), interior evaluations after the warm-up whose two moves are each "
                    f">= {TURN_MIN_MOVE:g} of the path length after the warm-up; no turn when "
                    f"that angle is below {TURN_MIN_ANGLE:g} degrees"}


# ---- windows ----

def close_to(window, ref, factor):
    """A window [start, end] (tokens) overlaps [ref_start / factor, ref_end * factor]."""
    s, e = window
    rs, re_ = ref
    return s <= re_ * factor and e >= rs / factor


def evaluation_at_or_before(steps, t):
    """The last evaluation step <= t (the first step when none)."""
    c = [s for s in steps if s <= t]
    return max(c) if c else min(steps)


def evaluation_at_or_after(steps, t):
    """The first evaluation step >= t (the last step when none)."""
    c = [s for s in steps if s >= t]
    return min(c) if c else max(steps)
