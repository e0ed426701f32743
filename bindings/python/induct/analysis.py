"""The analysis suite (ICL paper, Framework): ICL score, loss curves, per-token loss
vectors and PCA, head evaluators, copying, composition, ablations and their
attribution, the phase-change window and head classification.

Definitions, shapes, units and our choices are in docs/analysis.md. Model methods live
in ModelAnalysis (a base class of induct.Model); the functions that need no model
(pca, phase_window, classify_heads) are module-level and re-exported by `induct`.

Configuration keywords are the fields of the C config structs:

* evaluation set (induct_eval_config): n_seq (8), seq_len (0 = n_ctx), chunk (4),
  early (50), late (500), split ('train' or 'eval', default 'eval'), batch_index (0),
  pos_seed (0), positions (None = every position; else strictly increasing context
  indices < seq_len - 1 at which loss_by_position / loss_vectors' average compute the
  loss, NaN elsewhere);
* probe sequences (induct_probe_config): n_seq (10), block_len (25), n_repeats (4),
  bos (0; None or -1 for none), token_lo (1), token_hi (0 = d_vocab), copying_bos (0),
  seed (0).

Defaults (in parentheses) come from the library's `_init` functions.
"""
import collections
import math
import numbers

from . import _arrays
from ._capi import (ClassifyConfig, EvalConfig, IclEstimate, IclGroupsConfig, Out,
                    PhaseConfig, ProbeConfig, call, new_struct)
from ._errors import BufferTooSmall

SPLIT = {"train": 0, "eval": 1}
#: INDUCT_ABLATE_* modes by name.
ABLATE = {"none": 0, "zero": 1, "mean": 2}
ABLATE_PRESERVE_PATTERNS = 0x100
#: INDUCT_MEAN_* reference kinds by name.
MEAN = {"pooled": 0, "per_position": 1}
#: INDUCT_COMPOSITION_* kinds by name.
COMPOSITION = {"q": 0, "k": 1, "v": 2}
#: Head class names, indexed by the INDUCT_HEAD_* label values.
HEAD_CLASSES = ("other", "previous_token", "induction", "duplicate")

LossVectors = collections.namedtuple("LossVectors", "per_seq average")
LossVectors.__doc__ = """Per-token loss vectors of one snapshot: `per_seq [n_seq]` (each
sequence's loss at its fixed random position, nats) and `average [seq_len - 1]` (the
context-index average, nats)."""
Attribution = collections.namedtuple("Attribution", "delta icl")
Attribution.__doc__ = """Ablation attribution: `delta [n_layers, n_heads]` = icl(head
ablated) - icl(clean) in nats (positive: the head helps in-context learning), and `icl`,
the clean ICL score."""
PCA = collections.namedtuple("PCA", "scores components variance total_variance")
PCA.__doc__ = """Principal components: `scores [n_rows, k]` (projected rows),
`components [k, n_cols]`, `variance [k]` (explained variance, float64) and
`total_variance` (so variance / total_variance is the explained ratio)."""
PhaseWindow = collections.namedtuple("PhaseWindow", "start end found")
PhaseWindow.__doc__ = """Phase-change window: `start` and `end` in the units of the
steps given (NaN when not found) and `found` (bool)."""
IclGroups = collections.namedtuple("IclGroups",
                                   "icl icl_se icl_token icl_token_se groups curve")
IclGroups.__doc__ = """The ICL score over groups of evaluation windows (nats): the band
estimate `icl` and its standard error by batch means `icl_se`, the single-token estimate
`icl_token` and `icl_token_se`, the groups' band scores `groups [n_groups]` (for paired
differences) and `curve [seq_len - 1]` (the mean loss curve of the first curve_groups
groups) or None."""
MeanSE = collections.namedtuple("MeanSE", "mean se")
MeanSE.__doc__ = """A mean and its standard error (NaN for a single value)."""
HeadClassification = collections.namedtuple("HeadClassification", "labels scores")
HeadClassification.__doc__ = """Head labels `[n_layers, n_heads]` (INDUCT_HEAD_* values;
HEAD_CLASSES[label] is the name) and the scores they were computed from (a dict of
`[n_layers, n_heads]` arrays: previous_token, prefix_matching, duplicate_token and,
when used, copying)."""


def _eval_config(kw):
    kw = dict(kw)
    if "n_positions" in kw:
        raise TypeError("n_positions is set from positions; pass positions only")
    positions = kw.pop("positions", None)
    cfg = EvalConfig.from_kwargs(kw, {"split": SPLIT})
    if positions is not None:
        # uint32 context indices; non-integers are refused (TypeError), values outside
        # uint32 too (OutOfRange, never wrapped); the C side checks the order and range
        buf, shape = _arrays.flat(positions, "I")
        if len(shape) != 1:
            raise ValueError(f"positions must be 1-D, got shape {tuple(shape)}")
        if len(buf) == 0:
            raise ValueError("positions is empty; pass None (the default) for every position")
        cfg.set_positions(buf)
    return cfg


def _probe_config(kw):
    kw = dict(kw)
    if "bos" in kw and kw["bos"] is None:
        kw["bos"] = -1
    return ProbeConfig.from_kwargs(kw)


def _mode_bits(mode, preserve_patterns):
    if mode not in ("zero", "mean"):
        raise ValueError(f"mode must be 'zero' or 'mean', got {mode!r}")
    return ABLATE[mode] | (ABLATE_PRESERVE_PATTERNS if preserve_patterns else 0)


def _is_index(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _heads_list(heads):
    """(layer, head), or an iterable of such pairs -> list of (layer, head) int pairs."""
    seq = list(heads)
    if len(seq) == 2 and all(_is_index(x) for x in seq):
        return [(int(seq[0]), int(seq[1]))]
    out = []
    for lh in seq:
        pair = list(lh)
        if len(pair) != 2 or not all(_is_index(x) for x in pair):
            raise TypeError(f"a head is a (layer, head) pair of ints, got {lh!r}")
        out.append((int(pair[0]), int(pair[1])))
    return out


class Ablation:
    """Head ablations in force on a model until restore() (or the end of a `with`
    block). Made by Model.ablate().

    Each handle undoes exactly what it did, in any order: it records, for every head
    it set (and for the pattern-preservation flag if it turned it on), the value
    before it and the value it put. restore() puts the earlier value back, unless
    a handle made later and still in force set the same head (that handle then
    restores to the earlier value when it ends), or the head was changed by other
    means since (ablate_head(), clear_ablations(), ...; the change is kept). So
    handles may end in any order, and an ablation made inside someone else's `with`
    block (by another handle or by ablate_head()) survives that block's exit. Once
    no head is ablated, induct_model_clear_ablations() runs: later forward passes
    are bit-identical to those of a never-ablated model. The mean reference, if set,
    is kept. Not thread-safe (like the model)."""

    _PRESERVE = "preserve_patterns"

    def __init__(self, model, heads, mode="zero", preserve_patterns=False):
        self.model = model
        self.heads = _heads_list(heads)
        if mode not in ("zero", "mean"):
            raise ValueError(f"mode must be 'zero' or 'mean', got {mode!r}")
        self.mode = mode
        self._undo = {}  # (layer, head) or _PRESERVE -> [value before, value put]
        self._active = True
        model._live_ablations().append(self)
        try:
            for layer, head in self.heads:
                self._apply((layer, head), ABLATE[mode])
            if preserve_patterns:
                self._apply(self._PRESERVE, 1)
        except BaseException:
            self.restore()
            raise

    def _current(self):
        modes, preserve = self.model.ablations()
        return _arrays.to_list(modes), int(preserve)

    def _get(self, state, key):
        modes, preserve = state
        return preserve if key == self._PRESERVE else modes[key[0]][key[1]]

    def _put(self, key, v):
        if key == self._PRESERVE:
            call("induct_model_set_preserve_patterns", self.model, v)
        else:
            call("induct_model_ablate_head", self.model, key[0], key[1], v)

    def _apply(self, key, v):
        if key in self._undo:  # a head listed twice
            before = self._undo[key][0]
        else:
            modes, preserve = self._current()
            if key == self._PRESERVE:
                before = preserve
            elif 0 <= key[0] < len(modes) and 0 <= key[1] < len(modes[0]):
                before = modes[key[0]][key[1]]
            else:
                before = None  # out of range: the C call below refuses it
        self._put(key, v)
        self._undo[key] = [before, v]

    def restore(self):
        """Undo this handle's ablations (idempotent); see the class docstring."""
        if not self._active:
            return
        self._active = False
        live = self.model._live_ablations()
        i = next(k for k, h in enumerate(live) if h is self)
        later = live[i + 1:]
        del live[i]
        state = self._current()
        for key, (before, mine) in self._undo.items():
            nxt = next((h for h in later if key in h._undo), None)
            if nxt is not None:
                nxt._undo[key][0] = before  # it now ends on what was there before this one
            elif self._get(state, key) == mine:
                self._put(key, before)
        modes, preserve = self._current()
        if not preserve and not any(m for row in modes for m in row):
            call("induct_model_clear_ablations", self.model)

    @property
    def active(self):
        """True until restore() (or the end of the `with` block)."""
        return self._active

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.restore()

    def __repr__(self):
        return (f"<induct.Ablation {self.mode} heads={self.heads} "
                f"{'active' if self._active else 'restored'}>")


class ModelAnalysis:
    """Analysis methods of induct.Model (see the module docstring for the keywords)."""

    def _live_ablations(self):
        """The Ablation handles in force on this model, oldest first."""
        live = self.__dict__.get("_ablations_live")
        if live is None:
            live = self.__dict__["_ablations_live"] = []
        return live

    def _lh(self):
        c = self.config
        return c["n_layers"], c["n_heads"]

    def _head_table(self, fn, *args):
        L, H = self._lh()
        buf = _arrays.buffer(L * H)
        call(fn, self, *args, buf, L * H, Out("size"))
        return _arrays.shaped(buf, (L, H))

    def _seq_len(self, cfg):
        return cfg.seq_len or self.config["n_ctx"]

    # ---- evaluation set: ICL score, loss curve, loss vectors ----
    def icl_score(self, dataset, **eval_config):
        """In-context learning score (ICL paper, "Key Concepts"), nats: the mean loss of
        the `late`-th token minus that of the `early`-th token (defaults 500 and 50) on
        the evaluation set; negative means the model uses its context. Needs
        seq_len >= late + 1 (else OutOfRange; never clamped)."""
        cfg = _eval_config(eval_config)
        out = Out("double")
        call("induct_analysis_icl_score", self, dataset, cfg, out)
        return out.value

    def loss_by_position(self, dataset, **eval_config):
        """Loss by position `[seq_len - 1]` (nats): mean over the evaluation set of the
        loss of predicting token p+1 from tokens 0..p."""
        cfg = _eval_config(eval_config)
        n = self._seq_len(cfg) - 1
        buf = _arrays.buffer(max(n, 1))
        call("induct_analysis_loss_by_position", self, dataset, cfg, buf, max(n, 0),
             Out("size"))
        return _arrays.shaped(buf, (n,))

    def loss_vectors(self, dataset, **eval_config):
        """Per-token loss vectors (ICL paper, Appendix "Data Collection"): LossVectors
        (per_seq [n_seq], average [seq_len - 1]), nats, from one pass. Stack the
        per_seq vectors of many snapshots and pass them to induct.pca()."""
        cfg = _eval_config(eval_config)
        n = self._seq_len(cfg) - 1
        per_seq = _arrays.buffer(cfg.n_seq)
        avg = _arrays.buffer(max(n, 1))
        call("induct_analysis_loss_vectors", self, dataset, cfg, per_seq, cfg.n_seq, avg,
             max(n, 0))
        return LossVectors(_arrays.shaped(per_seq, (cfg.n_seq,)), _arrays.shaped(avg, (n,)))

    def icl_groups(self, dataset, n_groups=32, per_group=256, seq_len=0, chunk=8, early=50,
                   late=500, band=5, split="eval", curve_groups=0):
        """The ICL score over `n_groups` groups of `per_group` evaluation windows (group g
        = batch g of the split), each group's score the band estimator (icl_band()) on
        its loss curve, with standard errors by batch means (docs/analysis.md, "Standard
        errors"). Ablations in force apply. With curve_groups > 0 the first groups are
        evaluated at every position and their mean loss curve is returned. Returns
        IclGroups."""
        if split not in SPLIT:
            raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
        cfg = IclGroupsConfig.from_kwargs(dict(
            n_groups=n_groups, per_group=per_group, seq_len=seq_len, chunk=chunk, early=early,
            late=late, band=band, split=SPLIT[split], curve_groups=curve_groups))
        out = new_struct(IclEstimate)
        groups = _arrays.buffer(max(cfg.n_groups, 1), "d")
        T = cfg.seq_len or self.config["n_ctx"]
        curve = _arrays.buffer(max(T - 1, 1), "d") if cfg.curve_groups else None
        call("induct_analysis_icl_groups", self, dataset, cfg, out, groups, cfg.n_groups,
             curve, max(T - 1, 0) if curve is not None else 0)
        return IclGroups(out.icl, out.icl_se, out.icl_token, out.icl_token_se,
                         _arrays.shaped(groups, (cfg.n_groups,)),
                         _arrays.shaped(curve, (T - 1,)) if curve is not None else None)

    def loss_positions(self, **eval_config):
        """The fixed random position of each sequence used by loss_vectors(), `[n_seq]`
        uint32, uniform in [0, seq_len - 2]; depends only on (pos_seed, i, seq_len)."""
        cfg = _eval_config(eval_config)
        buf = _arrays.buffer(cfg.n_seq, "I")
        call("induct_analysis_loss_positions", self, cfg, buf, cfg.n_seq, Out("size"))
        return _arrays.shaped(buf, (cfg.n_seq,))

    # ---- ablation ----
    def ablate(self, heads, mode="zero", preserve_patterns=False, reference=None,
               how="pooled"):
        """Ablate heads for every later forward pass and analysis (ICL paper, Appendix
        "Analyses"); returns an Ablation, also a context manager that restores on exit:

            with model.ablate([(1, 0), (1, 3)]):
                icl = model.icl_score(dataset, ...)

        `heads` is one (layer, head) pair or an iterable of them. mode 'zero' removes
        the head's result z_h W_O[h] (b_O stays); 'mean' replaces z_h by its mean over
        the reference set of set_ablation_mean() (StateError without one).
        `preserve_patterns` freezes every downstream attention pattern to the clean
        run's. `reference` (tokens [batch, seq_len]), if given, first becomes the mean
        reference (set_ablation_mean(reference, how); it stays after the block).
        Training and backward refuse (StateError) while a head is ablated."""
        if reference is not None:
            self.set_ablation_mean(reference, how)
        return Ablation(self, heads, mode, preserve_patterns)

    def set_ablation_mean(self, tokens, how="pooled"):
        """Compute the reference means of mean ablation from `tokens` [batch, seq_len]
        (run without ablations): 'pooled' (one mean per head over sequences and
        positions) or 'per_position' (one per head and position). Kept until replaced."""
        if how not in MEAN:
            raise ValueError(f"how must be one of {sorted(MEAN)}, got {how!r}")
        toks, B, T = _arrays.tokens_in(tokens)
        call("induct_model_set_ablation_mean", self, toks, B, T, MEAN[how])

    def ablate_head(self, layer, head, mode="zero"):
        """Set one head's ablation mode ('none' restores it) until cleared; prefer the
        ablate() context manager."""
        if mode not in ABLATE:
            raise ValueError(f"mode must be one of {sorted(ABLATE)}, got {mode!r}")
        call("induct_model_ablate_head", self, layer, head, ABLATE[mode])

    def set_preserve_patterns(self, on):
        """Pattern-preserving ablation on or off."""
        call("induct_model_set_preserve_patterns", self, int(bool(on)))

    def clear_ablations(self):
        """Restore every head and turn pattern preservation off (keeps the mean reference)."""
        call("induct_model_clear_ablations", self)

    def ablations(self):
        """The ablations in force: (modes [n_layers, n_heads] of INDUCT_ABLATE_* values
        (0 none, 1 zero, 2 mean), preserve_patterns bool)."""
        L, H = self._lh()
        buf = _arrays.buffer(L * H, "I")
        preserve = Out("uint32")
        call("induct_model_get_ablations", self, buf, L * H, Out("size"), preserve)
        return _arrays.shaped(buf, (L, H)), bool(preserve.value)

    def ablation_attribution(self, dataset, mode="zero", preserve_patterns=False,
                             **eval_config):
        """Per-head ablation effect on the ICL score (ICL paper, Appendix "Analyses"):
        Attribution(delta [n_layers, n_heads], icl). delta[l, h] = icl(with head (l, h)
        ablated on top of the ablations in force) - icl (nats). The evaluation keywords
        are those of icl_score(); the ablations in force are unchanged afterwards."""
        cfg = _eval_config(eval_config)
        L, H = self._lh()
        buf = _arrays.buffer(L * H)
        icl = Out("double")
        call("induct_analysis_ablation_attribution", self, dataset, cfg,
             _mode_bits(mode, preserve_patterns), buf, L * H, Out("size"), icl)
        return Attribution(_arrays.shaped(buf, (L, H)), icl.value)

    # ---- probe-based head evaluators ----
    def probe_tokens(self, copying=False, **probe_config):
        """The probe sequences `[n_seq, T]` int32: the repeated probe ([BOS] + block x
        n_repeats), or with copying=True the copying probe ([BOS if copying_bos] +
        block)."""
        cfg = _probe_config(probe_config)
        n = Out("size")
        try:  # NULL buffer: the library reports the length (and validates the config)
            call("induct_analysis_probe_tokens", self, cfg, int(bool(copying)), None, 0, n)
        except BufferTooSmall:
            pass
        buf = _arrays.buffer(n.value, "i")
        call("induct_analysis_probe_tokens", self, cfg, int(bool(copying)), buf, n.value,
             Out("size"))
        return _arrays.shaped(buf, (cfg.n_seq, n.value // cfg.n_seq))

    def prefix_matching(self, **probe_config):
        """Prefix-matching score per head `[n_layers, n_heads]` in [0, 1] (ICL paper,
        Appendix, "head activation evaluators"), on the repeated probe."""
        return self._head_table("induct_analysis_prefix_matching", _probe_config(probe_config))

    def duplicate_token(self, **probe_config):
        """Duplicate-token score per head `[n_layers, n_heads]` in [0, 1] (our
        definition: attention on earlier occurrences of the same token)."""
        return self._head_table("induct_analysis_duplicate_token", _probe_config(probe_config))

    def copying(self, **probe_config):
        """Empirical copying score per head `[n_layers, n_heads]` in [-1, 1] (ICL paper,
        Appendix; the exact ratio is our reading, see docs/analysis.md)."""
        return self._head_table("induct_analysis_copying", _probe_config(probe_config))

    # ---- weight-based ----
    def copying_eigen(self):
        """OV-circuit eigenvalue copying score per head `[n_layers, n_heads]` in [-1, 1]
        (Framework): Re(sum lambda) / sum |lambda|. Ignores ablations."""
        return self._head_table("induct_analysis_copying_eigen")

    def composition(self, kind="q"):
        """Q-, K- or V-composition scores `[n_layers, n_heads, n_layers, n_heads]`
        indexed [l1, h1, l2, h2] (Framework, "Analyzing a Two-Layer Model"); 0 unless
        l1 < l2. Ignores ablations."""
        k = str(kind).lower()
        if k not in COMPOSITION:
            raise ValueError(f"kind must be 'q', 'k' or 'v', got {kind!r}")
        L, H = self._lh()
        n = (L * H) ** 2
        buf = _arrays.buffer(n)
        call("induct_analysis_composition", self, COMPOSITION[k], buf, n, Out("size"))
        return _arrays.shaped(buf, (L, H, L, H))

    def composition_baseline(self, n_samples=100, seed=0):
        """Random baseline of the composition scores for this model's shapes (mean of
        n_samples Gaussian draws; about 1/sqrt(d_model) when d_head << d_model)."""
        out = Out("double")
        call("induct_analysis_composition_baseline", self, n_samples, seed, out)
        return out.value

    # ---- key-value retrieval ----
    def kv_accuracy(self, dataset, n_seq=256, seq_len=25):
        """Fraction of the n_seq rows of batch 0 of a KV dataset's eval split whose argmax
        logit at the answer position is the answer token (compare Dataset.kv_ceiling)."""
        out = Out("double")
        call("induct_analysis_kv_accuracy", self, dataset, n_seq, seq_len, out)
        return out.value

    def kv_attention(self, dataset, n_seq=256, seq_len=25):
        """Attention from the query (answer position) to the value position per head,
        [n_layers, n_heads] in [0, 1], on a KV dataset's eval rows (uniform attention
        scores 1 / (seq_len - 1))."""
        return self._head_table("induct_analysis_kv_attention", dataset, n_seq, seq_len)

    # ---- classification ----
    def classify_heads(self, dataset, n_seq=64, seq_len=0, probe=None, use_copying=True,
                       thresholds=None):
        """Label every head (the rule is ours, see induct.classify_heads()) from its
        previous-token score on `dataset` (n_seq sequences of seq_len tokens, 0 = n_ctx,
        batch 0 of the eval split), its prefix-matching and duplicate-token scores on the
        probe (`probe`: a dict of probe keywords) and, with use_copying, its empirical
        copying score. Returns HeadClassification(labels [n_layers, n_heads], scores)."""
        probe = probe or {}
        scores = {
            "previous_token": self.previous_token_score(dataset, n_seq,
                                                        seq_len or self.config["n_ctx"]),
            "prefix_matching": self.prefix_matching(**probe),
            "duplicate_token": self.duplicate_token(**probe),
        }
        if use_copying:
            scores["copying"] = self.copying(**probe)
        labels = classify_heads(scores["previous_token"], scores["prefix_matching"],
                                scores["duplicate_token"], scores.get("copying"),
                                thresholds)
        return HeadClassification(labels, scores)


def batch_means(values):
    """Mean of batch values (e.g. the ICL scores of groups of windows) and its standard
    error by batch means, sd / sqrt(n) (docs/analysis.md, "Standard errors"). Values must
    be finite; n >= 1 (the standard error is NaN for one value). Returns MeanSE."""
    x, _ = _arrays.flat(values, "d")
    mean, se = Out("double"), Out("double")
    call("induct_analysis_batch_means", x, len(x), mean, se)
    return MeanSE(mean.value, se.value)


def paired_difference(a, b):
    """Mean of the paired differences a[i] - b[i] (two figures measured on the same
    batches) and its standard error (docs/analysis.md, "Standard errors"). Returns
    MeanSE."""
    x, _ = _arrays.flat(a, "d")
    y, _ = _arrays.flat(b, "d")
    if len(x) != len(y):
        raise ValueError(f"a has {len(x)} values, b {len(y)}: differences need pairs")
    mean, se = Out("double"), Out("double")
    call("induct_analysis_paired_difference", x, y, len(x), mean, se)
    return MeanSE(mean.value, se.value)


def icl_band(curve, early=50, late=500, band=5):
    """The band ICL estimator on a loss-by-position curve `[seq_len - 1]` (nats): the
    loss of token `late` minus that of token `early`, each averaged over the 2*band + 1
    context indices centred on it (band 0: single tokens; docs/analysis.md, "The band
    ICL estimator")."""
    c, _ = _arrays.flat(curve, "f")
    out = Out("double")
    call("induct_analysis_icl_band", c, len(c), early, late, band, out)
    return out.value


def pca(vectors, k=2):
    """Principal component analysis of `vectors [n_rows, n_cols]` (one row per snapshot,
    e.g. the per_seq loss vectors of every snapshot of every model; ICL paper, Appendix
    "Data Collection"): columns centred, SVD by LAPACKE in double precision, each
    component signed so that its largest-magnitude entry is positive. Returns a
    PCA(scores [n_rows, k], components [k, n_cols], variance [k] float64,
    total_variance)."""
    x, rows, cols = _arrays.matrix_in(vectors)
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    scores = _arrays.buffer(rows * k)
    comps = _arrays.buffer(k * cols)
    var = _arrays.buffer(k, "d")
    total = Out("double")
    call("induct_analysis_pca", x, rows, cols, k, scores, rows * k, comps, k * cols, var, k,
         total)
    return PCA(_arrays.shaped(scores, (rows, k)), _arrays.shaped(comps, (k, cols)),
               _arrays.shaped(var, (k,)), total.value)


def pca_trajectories(runs, k=2):
    """PCA of several models' snapshot vectors together: `runs` maps a model name to
    its vectors `[n_snapshots, n_cols]` in training order (the same n_cols for all).
    Returns ({name: scores [n_snapshots, k]}, PCA of the whole stack); the per-model
    scores are that model's trajectory, ready for induct.plot.pca_trajectories()."""
    names, blocks = [], []
    for name, vecs in runs.items():
        rows = _arrays.to_list(vecs)
        if not rows:
            raise ValueError(f"run {name!r} has no snapshots")
        names.append(name)
        blocks.append(rows)
    stacked = [row for rows in blocks for row in rows]
    res = pca(stacked, k)
    out, start = {}, 0
    for name, rows in zip(names, blocks):
        out[name] = res.scores[start:start + len(rows)] if _arrays.np is not None else \
            _arrays.Shaped(res.scores.data[start * k:(start + len(rows)) * k], (len(rows), k))
        start += len(rows)
    return out, res


def phase_window(steps, icl, lo_frac=None, hi_frac=None, min_change=None, smooth=None):
    """The phase-change window of an ICL-score series (ICL paper, "the phase change";
    the rule is ours, docs/analysis.md): after an optional centred moving average of
    width `smooth` (odd), the window runs from the first crossing of lo_frac (0.1) to
    the first later crossing of hi_frac (0.9) of the final change, located by linear
    interpolation; no window when |final change| < min_change (0.05 nats). `steps`
    must be strictly increasing. Returns PhaseWindow(start, end, found)."""
    s, _ = _arrays.flat(steps, "d")
    v, _ = _arrays.flat(icl, "d")
    if len(s) != len(v):
        raise ValueError(f"steps has {len(s)} points, icl {len(v)}")
    kw = {k: val for k, val in (("lo_frac", lo_frac), ("hi_frac", hi_frac),
                                ("min_change", min_change), ("smooth", smooth))
          if val is not None}
    for k in ("lo_frac", "hi_frac", "min_change"):
        if k in kw:
            kw[k] = float(kw[k])
    cfg = PhaseConfig.from_kwargs(kw)
    start, end, found = Out("double"), Out("double"), Out("uint32")
    call("induct_analysis_phase_window", s, v, len(s), cfg, start, end, found)
    return PhaseWindow(start.value, end.value, bool(found.value))


def classify_heads(previous_token, prefix_matching, duplicate, copying=None,
                   thresholds=None):
    """Label heads from their scores (the rule is ours; docs/analysis.md): a head is a
    candidate for a class when its score reaches the class threshold (induction also
    needs copying >= thresholds['copying'] when copying scores are given); it gets the
    candidate class with the largest margin, else 'other'. Thresholds (dict): previous_token,
    induction, duplicate (0.4 each), copying (0). Returns uint32 labels with the
    inputs' shape; HEAD_CLASSES[label] is the class name."""
    arrays = [previous_token, prefix_matching, duplicate] + ([copying] if copying is not None
                                                             else [])
    flats = [_arrays.flat(a, "f") for a in arrays]
    shape = flats[0][1]
    n = len(flats[0][0])
    for buf, sh in flats[1:]:
        if len(buf) != n:
            raise ValueError(f"score arrays differ in length: {n} and {len(buf)}")
    cfg = ClassifyConfig.from_kwargs({k: float(v) for k, v in (thresholds or {}).items()})
    labels = _arrays.buffer(max(n, 1), "I")
    bufs = [f[0] for f in flats] + ([None] if copying is None else [])
    call("induct_analysis_classify_heads", *bufs, n, cfg, labels, n, Out("size"))
    if n == 0:
        labels = labels[:0]
    return _arrays.shaped(labels, shape if math.prod(shape) == n else (n,))


__all__ = ["Ablation", "LossVectors", "Attribution", "PCA", "PhaseWindow",
           "HeadClassification", "HEAD_CLASSES", "IclGroups", "MeanSE", "pca",
           "pca_trajectories", "phase_window", "classify_heads", "batch_means",
           "paired_difference", "icl_band"]
