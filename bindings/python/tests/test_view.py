"""The attention view's page (induct.view): self-contained (nothing loaded from outside),
its data the patterns to 16-bit resolution, the tokens' text from each source, the notebook
form the same page, and clear errors. Its behaviour in a browser is
bindings/python/tests/view_browser.py (meson test view-browser)."""
import base64
import html
import json
import re

import numpy as np
import pytest

import induct


def page_data(page):
    """The data object the page hands to inductAttentionView."""
    m = re.search(r'inductAttentionView\(document\.getElementById\("iv-[0-9a-f]+"\), (.*)\);'
                  r'</script>', page)
    return json.loads(m.group(1).replace("<\\/", "</"))


def decoded(head, T):
    raw = np.frombuffer(base64.b64decode(head["data"]), "<u2").astype(np.float64) / 65535
    out = np.zeros((T, T))
    out[np.tril_indices(T)] = raw
    return out


def small_model():
    tok = induct.ByteTokenizer(bos=True)
    m = induct.Model(n_layers=2, d_model=32, n_heads=2, n_ctx=64, d_vocab=tok.d_vocab, seed=1)
    return m, tok


def test_the_page_is_self_contained_and_holds_the_patterns():
    m, tok = small_model()
    ids = tok.to_tokens("the cat\tsat\non the mat. the cat")
    view = induct.view.attention(m, ids, tokenizer=tok, repeat=5, title="a <b>title</b>")
    page = view.html()
    # nothing outside the page: no URL, no src or href attribute, no stylesheet, no fetch
    assert not re.search(r"(https?|ftp|file)://|\bdata:[a-z]+/|\bsrc\s*=|\bhref\s*=|<link|url\(|@import|"
                         r"fetch\(|XMLHttpRequest|\bimport\(", page)
    assert "<title>a &lt;b&gt;title&lt;/b&gt;</title>" in page
    assert page.count("<script>") == 3 and page.count("</script>") == 3
    data = page_data(page)
    pats = m.attention(ids)
    T = ids.shape[1]
    assert data["T"] == T and len(data["heads"]) == 4 and data["repeat"] == 5
    assert [h["label"] for h in data["heads"]] == ["L0H0", "L0H1", "L1H0", "L1H1"]
    for h, (l, hh) in zip(data["heads"], [(0, 0), (0, 1), (1, 0), (1, 1)]):
        np.testing.assert_allclose(decoded(h, T), np.tril(pats[l, hh]), atol=0.5 / 65535 + 1e-9)
    # byte-level tokens as text, whitespace made visible; the raw text kept
    assert data["raw"] == tok.to_str_tokens(ids)
    assert data["tokens"][:4] == ["<bos>", "t", "h", "e"]
    assert data["tokens"][4] == "\u2423" and data["tokens"][8] == "\u2192"
    assert data["tokens"][12] == "\u21b5"


def test_sources_layers_heads_and_text():
    m, tok = small_model()
    ids = tok.to_tokens("abcabcabc")
    T = ids.shape[1]
    pats = m.attention(ids)
    _, cache = m.run_with_cache(np.repeat(ids, 2, axis=0), names="pattern")
    v = induct.view.attention(cache, layers=[1], heads=[1], str_tokens=list("xabcabcabc"),
                              batch=1)
    d = page_data(v.html())
    assert [h["label"] for h in d["heads"]] == ["L1H1"] and d["raw"] == list("xabcabcabc")
    np.testing.assert_allclose(decoded(d["heads"][0], T), np.tril(pats[1, 1]), atol=1e-5)
    # an array of one layer, ids as the text when there is no tokenizer
    v = induct.view.attention(pats[1], tokens=ids)
    d = page_data(v.html())
    assert [h["label"] for h in d["heads"]] == ["L0H0", "L0H1"]
    assert d["raw"] == [str(int(t)) for t in ids[0]]
    assert page_data(induct.view.attention(pats[0, 0]).html())["raw"] == \
        [str(i) for i in range(T)]
    # a model's attached tokenizer gives the text by default; ids without one
    assert page_data(induct.view.attention(m, ids).html())["raw"] == [str(int(t)) for t in ids[0]]
    m.tokenizer = tok
    assert page_data(induct.view.attention(m, ids).html())["raw"] == tok.to_str_tokens(ids)
    # word pieces (a sentencepiece-style list) shown as given
    pieces = ["<bos>", "\u2581the", "\u2581cat", "s", "\n", " ", "\u2581a", "b", "c", "</script>"]
    d = page_data(induct.view.attention(pats, str_tokens=pieces).html())
    assert d["raw"] == pieces and d["tokens"][4] == "\u21b5" and d["tokens"][9] == "</script>"


def test_notebook_form_is_the_page_in_an_iframe(tmp_path):
    m, tok = small_model()
    ids = tok.to_tokens("hello hello")
    v = induct.view.attention(m, ids, tokenizer=tok)
    frame = v._repr_html_()
    m_ = re.fullmatch(r'<iframe srcdoc="([^"]*)" style="width:100%;height:(\d+)px;border:0" '
                      r'title="attention view"></iframe>', frame)
    assert m_ and int(m_.group(2)) > 300
    a, b = html.unescape(m_.group(1)), v.html()
    strip = lambda s: re.sub(r"iv-[0-9a-f]{12}", "iv-ID", s)  # noqa: E731
    assert strip(a) == strip(b)
    path = v.save(tmp_path / "view.html")
    assert strip(open(path, encoding="utf-8").read()) == strip(b)
    assert list(tmp_path.iterdir()) == [tmp_path / "view.html"]   # no temporary left


def test_bad_input_is_refused_clearly():
    m, tok = small_model()
    ids = tok.to_tokens("abcdef")
    pats = m.attention(ids)
    with pytest.raises(ValueError, match="needs the tokens"):
        induct.view.attention(m)
    with pytest.raises(ValueError, match="one sequence"):
        induct.view.attention(m, np.repeat(ids, 2, axis=0))
    with pytest.raises(ValueError, match="square"):
        induct.view.attention(np.zeros((2, 5, 6)))
    with pytest.raises(ValueError, match=r"\[T, T\], \[heads, T, T\]"):
        induct.view.attention(np.zeros((1, 1, 2, 5, 5)))
    with pytest.raises(ValueError, match="3 str_tokens for patterns of 7"):
        induct.view.attention(pats, str_tokens=["a", "b", "c"])
    with pytest.raises(ValueError, match="5 tokens for patterns of 7"):
        induct.view.attention(pats, tokens=ids[:, :5])
    with pytest.raises(ValueError, match="head 2 out of range"):
        induct.view.attention(pats, heads=[2])
    with pytest.raises(ValueError, match="layer 5 out of range"):
        induct.view.attention(pats, layers=5)
    with pytest.raises(ValueError, match="repeat must be"):
        induct.view.attention(pats, repeat=7)
    with pytest.raises(ValueError, match="repeat_end must be"):
        induct.view.attention(pats, repeat=3, repeat_end=3)
    with pytest.raises(ValueError, match="repeat_end needs repeat"):
        induct.view.attention(pats, repeat_end=5)
    with pytest.raises(ValueError, match="NaN"):
        induct.view.attention(np.full((3, 3), np.nan))
    with pytest.raises(ValueError, match="zmax"):
        induct.view.attention(pats, zmax=0)
    with pytest.raises(ValueError, match="more than"):
        induct.view.attention(np.zeros((1, 9, 3000, 3000), np.float32))
    _, cache = m.run_with_cache(ids, names="pattern", reduce=induct.reduce.mean())
    with pytest.raises(ValueError, match="reduced cache cannot be drawn"):
        induct.view.attention(cache)
    _, cache = m.run_with_cache(ids, names="hook_z")
    with pytest.raises(ValueError, match="no blocks"):
        induct.view.attention(cache)
