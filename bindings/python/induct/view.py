"""Interactive attention views for notebooks and standalone HTML files.

    view = induct.view.attention(model, tokens, tokenizer=tok, layers=[1], repeat=25)
    view                      # in Jupyter: the view (its _repr_html_)
    view.save("attention.html")

One canvas per head, side by side; the tokens as text (byte-level tokens and word pieces,
whitespace made visible); hovering a token, or a row of a head's pattern, highlights what
that token attends to (its row: blue in the text) and what attends to it (its column:
orange), in the head last clicked; an optional overlay marks the induction diagonal, the
key after the previous occurrence of the query's token in a sequence that repeats a block
of length `repeat` (Olsson et al. 2022, "In-context Learning and Induction Heads"). The
colour scale is viridis (perceptually uniform, readable with the common colour-vision
deficiencies and in greyscale). The patterns are drawn on canvases, one pixel per cell,
so 512-token contexts with many heads stay responsive, and the page needs no network: the
script (induct/view.js), the styles and the data (each pattern's lower triangle as 16-bit
fixed point, 1/65535 resolution) are inline. Needs NumPy."""
import base64
import html
import json
import os
import secrets

from . import _arrays

#: Patterns above this many cells (heads x T x T) are refused: the page would hold them as
#: floats (4 bytes each) and their base64 text (about 2.7 bytes each).
MAX_CELLS = 64 << 20

_STYLE = """
.iv{font:13px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#222;max-width:1400px}
.iv-bar{display:flex;gap:1.2em;align-items:center;flex-wrap:wrap;margin:4px 0}
.iv-title{font-weight:600}
.iv-info{min-height:2.9em;margin:4px 0;color:#333}
.iv-tokens{font:13px/1.9 ui-monospace,"DejaVu Sans Mono",monospace;max-height:14em;overflow-y:auto;
  border:1px solid #ddd;padding:4px;margin-bottom:8px;white-space:normal}
.iv-tok{display:inline-block;padding:0 2px;margin:1px 1px;border-radius:2px;cursor:default;
  white-space:pre;border:1px solid transparent;line-height:1.5}
.iv-tok.iv-query{border-color:#111}
.iv-grid{display:flex;flex-wrap:wrap;gap:12px}
.iv-head{margin:0;text-align:center}
.iv-head figcaption{font-weight:600;margin-top:2px}
.iv-head.iv-focus figcaption{text-decoration:underline}
.iv-wrap{position:relative}
.iv-wrap canvas{position:absolute;left:0;top:0}
.iv-pattern{image-rendering:pixelated;image-rendering:crisp-edges}
.iv-overlay{cursor:crosshair}
.iv-legend{display:flex;align-items:center;gap:6px;margin-top:8px;flex-wrap:wrap}
.iv-colorbar{width:200px;height:12px;image-rendering:pixelated}
"""


def _script():
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "view.js"),
              encoding="utf-8") as f:
        return f.read()


def _visible(s):
    """A token as shown: space ␣, newline ↵, tab →, other control characters as escapes."""
    named = {" ": "\u2423", "\n": "\u21b5", "\t": "\u2192", "\r": "\\r"}
    return "".join(named.get(c) or (c if c.isprintable() else
                                    c.encode("unicode_escape").decode("ascii")) for c in s)


def _encode(pattern):
    """A [T, T] pattern's lower triangle (row by row) as base64 of little-endian uint16."""
    np = _arrays.np
    T = pattern.shape[0]
    rows, cols = np.tril_indices(T)
    q = np.clip(np.rint(pattern[rows, cols].astype(np.float64) * 65535), 0, 65535)
    return base64.b64encode(q.astype("<u2").tobytes()).decode("ascii")


def _is_model(source):
    """Whether a view's source is an induct.Model (duck-typed: its attention() and config)."""
    return hasattr(source, "attention") and hasattr(source, "config")


def _patterns(source, tokens, layers, batch):
    """([L, H, T, T] float32 patterns, layer numbers) from a model, a cache or an array."""
    np = _arrays.np
    from .hooks import ActivationCache
    if _is_model(source):
        if tokens is None:
            raise ValueError("attention(model, ...) needs the tokens of one sequence")
        toks = np.asarray(tokens)
        if toks.ndim == 2:
            if toks.shape[0] != 1:
                raise ValueError(f"one sequence of tokens, got a batch of {toks.shape[0]}")
            toks = toks[0]
        return np.asarray(source.attention(toks[None]), dtype=np.float32), None
    if isinstance(source, ActivationCache):
        names = sorted((int(k.split(".")[1]), k) for k in source
                       if k.startswith("blocks.") and k.endswith(".attn.hook_pattern"))
        if not names:
            raise ValueError("the cache holds no blocks.{l}.attn.hook_pattern")
        pats = []
        for _, k in names:
            p = source[k]
            if p.ndim != 4:
                raise ValueError(f"{k} has shape {p.shape}, want [batch, heads, T, T] "
                                 f"(a reduced cache cannot be drawn)")
            if not 0 <= batch < p.shape[0]:
                raise ValueError(f"batch index {batch} outside the cache's {p.shape[0]}")
            pats.append(p[batch])
        return np.asarray(pats, dtype=np.float32), [l for l, _ in names]
    a = np.asarray(source, dtype=np.float32)
    if a.ndim == 2:
        a = a[None, None]
    elif a.ndim == 3:
        a = a[None]
    if a.ndim != 4:
        raise ValueError(f"patterns must be [T, T], [heads, T, T] or [layers, heads, T, T], "
                         f"got shape {a.shape}")
    return a, None


class AttentionView:
    """An attention view: `html()` is a complete standalone page, `save(path)` writes it,
    `_repr_html_()` shows it in a notebook (an iframe holding the page, so its script and
    styles stay apart from the notebook's). `patterns` [n_shown, T, T] and `labels` are
    what it draws; `str_tokens` the tokens' text."""

    def __init__(self, patterns, labels, str_tokens, repeat, repeat_end, title, zmax, height):
        self.patterns, self.labels, self.str_tokens = patterns, labels, str_tokens
        self.repeat, self.repeat_end = repeat, repeat_end
        self.title, self.zmax, self.height = title, zmax, height

    def _data(self):
        return {"T": int(self.patterns.shape[-1]),
                "tokens": [_visible(s) for s in self.str_tokens],
                "raw": list(self.str_tokens),
                "heads": [{"label": lab, "layer": l, "head": h, "data": _encode(p)}
                          for (lab, l, h), p in zip(self.labels, self.patterns)],
                "repeat": self.repeat, "repeatEnd": self.repeat_end, "zmax": self.zmax,
                "title": self.title}

    def fragment(self):
        """The view as an HTML fragment (a <div>, its styles and scripts): for a page that
        holds several views."""
        vid = "iv-" + secrets.token_hex(6)
        data = json.dumps(self._data(), ensure_ascii=True).replace("</", "<\\/")
        script = _script().replace("</", "<\\/")
        return (f'<style>{_STYLE}</style>\n<div class="iv" id="{vid}">'
                f'<noscript>This attention view needs JavaScript.</noscript></div>\n'
                f'<script>{script}</script>\n'
                f'<script>inductAttentionView(document.getElementById("{vid}"), {data});'
                f'</script>\n')

    # in a notebook's iframe: fit the iframe to the page once drawn (when the notebook
    # lets the page reach its frame; else the iframe keeps its given height)
    _FIT = ('<script>try{const f=window.frameElement;if(f)f.style.height='
            '(document.documentElement.scrollHeight+8)+"px";}catch(e){}</script>\n')

    def html(self):
        """The view as a complete HTML page: nothing outside it is loaded."""
        title = html.escape(self.title or "attention patterns")
        return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
                f'<title>{title}</title></head>\n<body style="margin:8px">\n'
                f'{self.fragment()}{self._FIT}</body></html>\n')

    def save(self, path):
        """Write the standalone page to `path` (atomically: a temporary file in the same
        directory, renamed); returns `path`."""
        text = self.html()
        path = os.fspath(path)
        tmp = f"{path}.{secrets.token_hex(4)}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return path

    def _repr_html_(self):
        return (f'<iframe srcdoc="{html.escape(self.html(), quote=True)}" '
                f'style="width:100%;height:{self.height}px;border:0" '
                f'title="attention view"></iframe>')

    def __repr__(self):
        return (f"<induct.view.AttentionView {len(self.labels)} heads, "
                f"T={self.patterns.shape[-1]}>")


def attention(source, tokens=None, str_tokens=None, tokenizer=None, layers=None, heads=None,
              repeat=None, repeat_end=None, title=None, zmax=1.0, batch=0, height=None):
    """An interactive view of attention patterns (see the module's docstring).

    source: an induct.Model (then `tokens`, one sequence [T] or [1, T], are run through
    model.attention()), an ActivationCache holding blocks.{l}.attn.hook_pattern (sequence
    `batch` of it), or patterns as an array [T, T], [heads, T, T] or [layers, heads, T, T]
    (e.g. model.attention(tokens), or cache["pattern", 1][0]).
    str_tokens: the tokens' text (T strings); else tokenizer.to_str_tokens(tokens) (an
    induct.ByteTokenizer, SentencePieceTokenizer, or any object with that method; default:
    a Model source's attached tokenizer, model.tokenizer); else the ids, else the positions.
    layers, heads: which to show (ints or lists; default all; for an array, indices into
    its first two axes). repeat: the length L of a repeated block, to overlay the induction
    diagonal (key = query − L + 1) over the queries L … repeat_end − 1 (default: to the
    end; 2L for one block and its repeat, as in Dataset.rrt's sequences, where L is the
    batch's second output). zmax: the attention at the top of the colour scale.
    height: the notebook iframe's height in pixels (default from the number of heads).
    Returns an AttentionView. Raises ValueError for shapes that do not fit (a pattern that
    is not square, a number of tokens other than T, an index out of range, more than
    MAX_CELLS cells)."""
    np = _arrays.np
    if np is None:
        raise RuntimeError("induct.view needs NumPy")
    pats, layer_ids = _patterns(source, tokens, layers, batch)
    L_, H_, T, T2 = pats.shape
    if T != T2:
        raise ValueError(f"attention patterns must be square [T, T], got {T} x {T2}")
    if T < 1:
        raise ValueError("no positions to show")
    layer_ids = layer_ids or list(range(L_))

    def pick(sel, n, what):
        if sel is None:
            return list(range(n))
        sel = [sel] if isinstance(sel, int) else list(sel)
        for i in sel:
            if isinstance(i, bool) or not isinstance(i, int):
                raise TypeError(f"{what} must be ints, got {i!r}")
        out = []
        for i in sel:
            if not -n <= i < n:
                raise ValueError(f"{what[:-1]} {i} out of range ({n} {what})")
            out.append(i % n)
        return out

    if layers is not None and layer_ids != list(range(L_)):
        want = [layers] if isinstance(layers, int) else list(layers)
        missing = [x for x in want if x not in layer_ids]
        if missing:
            raise ValueError(f"layers {missing} are not in the cache (it has {layer_ids})")
        li = [layer_ids.index(x) for x in want]
    else:
        li = pick(layers, L_, "layers")
    hi = pick(heads, H_, "heads")
    if len(li) * len(hi) * T * T > MAX_CELLS:
        raise ValueError(f"{len(li) * len(hi)} heads of {T} x {T} are more than "
                         f"{MAX_CELLS} cells: show fewer heads or layers")
    shown = np.stack([pats[a, b] for a in li for b in hi])
    if not np.all(np.isfinite(shown)):
        raise ValueError("the patterns hold NaN or infinite values")
    labels = [(f"L{layer_ids[a]}H{b}", layer_ids[a], b) for a in li for b in hi]

    if str_tokens is None and tokenizer is None and _is_model(source):
        tokenizer = getattr(source, "tokenizer", None)  # the model's attached tokenizer
    if str_tokens is None:
        ids = None
        if tokens is not None:
            ids = np.asarray(tokens).reshape(-1)
            if ids.size != T:
                raise ValueError(f"{ids.size} tokens for patterns of {T} positions")
        if tokenizer is not None:
            if ids is None:
                raise ValueError("a tokenizer needs the tokens")
            str_tokens = list(tokenizer.to_str_tokens(ids))
        elif ids is not None:
            str_tokens = [str(int(t)) for t in ids]
        else:
            str_tokens = [str(i) for i in range(T)]
    str_tokens = [str(s) for s in str_tokens]
    if len(str_tokens) != T:
        raise ValueError(f"{len(str_tokens)} str_tokens for patterns of {T} positions")
    if repeat is not None:
        repeat = int(repeat) if hasattr(repeat, "__index__") and not isinstance(repeat, bool) \
            else repeat
        if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat < T:
            raise ValueError(f"repeat must be an int in [1, {T - 1}], got {repeat!r}")
    if repeat_end is not None:
        if repeat is None:
            raise ValueError("repeat_end needs repeat")
        repeat_end = int(repeat_end) if hasattr(repeat_end, "__index__") and \
            not isinstance(repeat_end, bool) else repeat_end
        if isinstance(repeat_end, bool) or not isinstance(repeat_end, int) or \
                not repeat < repeat_end <= T:
            raise ValueError(f"repeat_end must be an int in [{repeat + 1}, {T}], "
                             f"got {repeat_end!r}")
    if not (isinstance(zmax, (int, float)) and zmax > 0):
        raise ValueError(f"zmax must be a positive number, got {zmax!r}")
    if height is None:
        rows = -(-len(labels) // 4)
        height = 380 + rows * 400
    return AttentionView(shown, labels, str_tokens, repeat,
                         repeat_end if repeat is not None and repeat_end is not None else
                         (T if repeat is not None else None), title, float(zmax), int(height))
