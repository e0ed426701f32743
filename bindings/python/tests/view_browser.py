#!/usr/bin/python3
"""The attention view (induct.view) in headless Chromium: a standalone page of 8 heads of
512 tokens whose patterns are known (a previous-token head, an induction head on a sequence
that repeats a block of 100, uniform attention, random rows) must draw each cell in
matplotlib's viridis colour of its value; hovering a token must highlight the keys it
attends to and the queries that attend to it (token colours, the overlay's row and column,
the read-out line) as the patterns say; clicking a head must make it the one the tokens
are coloured by; the induction-diagonal switch must add and remove its overlay; the page
must make no request; and the notebook form (an iframe's srcdoc) must render too.
Screenshots before and after the hover go to OUTDIR.

usage: view_browser.py OUTDIR   (PYTHONPATH: the package; meson test view-browser)
Exit status 77 when Chromium or python3-websocket is missing, unless CI=true."""
import json
import os
import statistics
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.environ.get("INDUCT_SOURCE_ROOT", ""), "web"))
from cdp import Chromium, require_tools  # noqa: E402

import induct  # noqa: E402

T, L = 512, 100
OUT = sys.argv[1] if len(sys.argv) > 1 else "."


def known_patterns():
    rng = np.random.default_rng(0)
    A = np.zeros((8, T, T), np.float32)
    q = np.arange(T)
    A[0, q[1:], q[1:] - 1] = 1.0          # previous token
    A[0, 0, 0] = 1.0
    for i in range(T):                     # induction on the repeated block
        if i >= L:
            A[1, i, :i + 1] = 0.1 / i
            A[1, i, i - L + 1] = 0.9
        else:
            A[1, i, :i + 1] = 1.0 / (i + 1)
        A[2, i, :i + 1] = 1.0 / (i + 1)   # uniform
    for h in range(3, 8):                  # random rows
        x = np.exp(rng.normal(0, 2, (T, T))) * np.tri(T)
        A[h] = x / x.sum(1, keepdims=True)
    return A


def str_tokens():
    # word pieces, byte-level pieces, whitespace, and text that must stay text
    pieces = ["<bos>", "▁def", "▁f", "(", "x", "):", "\n", "    ", "▁return", " ", "\t",
              "\\xff", "é", "</script><b>", "&amp;", "\"q\""]
    return [pieces[i % len(pieces)] for i in range(T)]


def viridis(v):
    from matplotlib import cm
    return [round(c * 255) for c in cm.get_cmap("viridis")(v)[:3]]


def rgb(css):
    """'rgb(1, 2, 3)' -> [1, 2, 3] ('' -> None)."""
    if not css or not css.startswith("rgb"):
        return None
    return [int(x) for x in css[css.index("(") + 1:css.index(")")].split(",")[:3]]


def close(a, b, tol=3):
    return a is not None and b is not None and all(abs(x - y) <= tol for x, y in zip(a, b))


JS_PIXEL = """((h, x, y) => {
  const c = document.querySelector('.iv').inductView.heads[h].canvas;
  return Array.from(c.getContext('2d').getImageData(x, y, 1, 1).data.slice(0, 3));
})"""
JS_OVERLAY = """((h, r, g, b) => {   // pixels of the overlay of head h near colour (r, g, b)
  const c = document.querySelector('.iv').inductView.heads[h].overlay;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4)
    if (d[i + 3] > 200 && Math.abs(d[i] - r) < 40 && Math.abs(d[i + 1] - g) < 40 &&
        Math.abs(d[i + 2] - b) < 40) n++;
  return n;
})"""


def center(cdp, selector_js):
    r = cdp.eval(f"(() => {{ const e = {selector_js}; e.scrollIntoView({{block: 'center'}});"
                 f" const b = e.getBoundingClientRect();"
                 f" return [b.left + b.width / 2, b.top + b.height / 2]; }})()")
    return r


def main():
    require_tools("view_browser")
    A = known_patterns()
    toks = str_tokens()
    view = induct.view.attention(A, str_tokens=toks, repeat=L, title="known patterns")
    fails = []
    with tempfile.TemporaryDirectory(prefix="induct-view-") as tmp:
        page = view.save(os.path.join(tmp, "view.html"))
        page_mib = os.path.getsize(page) / 2**20
        nb = os.path.join(tmp, "notebook.html")
        with open(nb, "w", encoding="utf-8") as f:   # what a notebook shows
            f.write("<!DOCTYPE html><html><body><p>cell output:</p>"
                    + induct.view.attention(A[:2], str_tokens=toks, repeat=L)._repr_html_()
                    + "</body></html>")
        with Chromium(window="1300,1200", prog="view_browser") as cdp:
            url = "file://" + os.path.abspath(page)
            cdp.call("Page.navigate", url=url)
            if not cdp.wait_for("(document.querySelector('.iv') || {dataset: {}}).dataset.state"
                                " === 'ready'", 120):
                sys.exit(f"view_browser: the view did not render: {cdp.console}")
            draw_ms = cdp.eval("document.querySelector('.iv').dataset.drawMs")
            # every head drawn, each cell in viridis of its value
            for h, qq, k in [(0, 300, 299), (0, 300, 298), (0, 0, 0), (1, 300, 201),
                             (1, 300, 200), (2, 9, 3), (2, 0, 0), (5, 400, 17), (7, 511, 511)]:
                got = cdp.eval(f"{JS_PIXEL}({h}, {k}, {qq})")
                want = viridis(float(A[h, qq, k]))
                if not close(got, want):
                    fails.append(f"head {h} cell ({qq}, {k}) = {A[h, qq, k]:.3f}: drawn {got}, "
                                 f"viridis {want}")
            shown = cdp.eval("Array.from(document.querySelectorAll('.iv-tok')).map(e => e.textContent)")
            want_text = [induct.view._visible(s) for s in toks]
            if shown != want_text:
                fails.append(f"token text differs: {shown[:16]} vs {want_text[:16]}")
            if cdp.eval("document.querySelectorAll('.iv-head').length") != 8:
                fails.append("not 8 heads drawn")
            before = {c: cdp.eval(f"{JS_OVERLAY}(0, {c})") for c in ("31, 120, 255", "255, 127, 14")}
            cdp.screenshot(os.path.join(OUT, "view-before-hover.png"))

            # hover token 300: head 0 (the focus) attends from 300 to 299, and 301 to 300
            x, y = center(cdp, "document.querySelectorAll('.iv-tok')[300]")
            cdp.mouse(x, y)
            if cdp.wait_for("document.querySelector('.iv').dataset.query === '300'", 60) is None:
                fails.append("hovering token 300 did not select it")
            bg = cdp.eval("Array.from(document.querySelectorAll('.iv-tok')).map(e => e.style.background)")
            checks = [(299, [8, 48, 107], "attended to by 300 (Blues' darkest)"),
                      (298, None, "not attended to (no colour)"),
                      (301, [127, 39, 4], "attending to 300 (Oranges' darkest)"),
                      (302, None, "not attending to 300 (no colour)")]
            for i, want, what in checks:
                if want is None and bg[i] != "" or want is not None and not close(rgb(bg[i]), want, 1):
                    fails.append(f"token {i}, {what}: background {bg[i]!r}")
            after = {c: cdp.eval(f"{JS_OVERLAY}(0, {c})") for c in ("31, 120, 255", "255, 127, 14")}
            for c in after:
                if not (before[c] == 0 and after[c] > 50):
                    fails.append(f"overlay pixels of colour ({c}): {before[c]} before the hover, "
                                 f"{after[c]} after")
            info = cdp.eval("document.querySelector('.iv-info').textContent")
            if "query 300" not in info or "299" not in info:
                fails.append(f"read-out line: {info!r}")
            cdp.screenshot(os.path.join(OUT, "view-hover-token.png"))

            # click head 1 (the induction head): the tokens follow its row of query 300
            x, y = center(cdp, "document.querySelectorAll('.iv-overlay')[1]")
            cdp.mouse(x, y, "mousePressed", "left", 1)
            cdp.mouse(x, y, "mouseReleased", "left", 1)
            if cdp.eval("document.querySelector('.iv').dataset.focus") != "1":
                fails.append("clicking head 1 did not focus it")
            cdp.eval("document.querySelector('.iv').inductView.setQuery(300)")
            hl = json.loads(cdp.eval("JSON.stringify(document.querySelector('.iv').inductView.highlight())"))
            top_key = hl["attendsTo"][0][0]
            if top_key != int(np.argmax(A[1, 300])) or abs(hl["attendsTo"][0][1] - 0.9) > 1e-4:
                fails.append(f"head 1, query 300 attends most to {hl['attendsTo'][0]}, the pattern "
                             f"says {int(np.argmax(A[1, 300]))} (0.9)")
            bg = cdp.eval("document.querySelectorAll('.iv-tok')[201].style.background")
            if not close(rgb(bg), [8, 48, 107], 1):
                fails.append(f"token 201 under head 1: background {bg!r}")

            # hovering a head's pattern selects the row under the mouse as the query
            r = cdp.eval("(() => { const c = document.querySelectorAll('.iv-overlay')[2];"
                         " c.scrollIntoView({block: 'center'}); const b = c.getBoundingClientRect();"
                         " return [b.left, b.top, b.width]; })()")
            cdp.mouse(r[0] + (10.5 / T) * r[2], r[1] + (400.5 / T) * r[2])
            if cdp.wait_for("document.querySelector('.iv').dataset.query === '400'", 60) is None:
                q = cdp.eval("document.querySelector('.iv').dataset.query")
                fails.append(f"hovering row 400 of head 2 selected query {q}")

            # the induction diagonal overlay: on by default, off with its switch
            white = lambda: cdp.eval(f"{JS_OVERLAY}(1, 255, 255, 255)")  # noqa: E731
            on = white()
            cdp.eval("document.querySelector('.iv-diag').click()")
            off = white()
            cdp.eval("document.querySelector('.iv-diag').click()")
            if not (on > 50 and off == 0 and white() == on):
                fails.append(f"induction diagonal overlay: {on} white pixels on, {off} off")
            cdp.screenshot(os.path.join(OUT, "view-hover-pattern.png"))

            # responsiveness at 512 tokens x 8 heads (reported, not judged: a timing)
            times = cdp.eval("""(() => { const v = document.querySelector('.iv').inductView, t = [];
              for (let q = 0; q < 512; q += 8) { const t0 = performance.now(); v.setQuery(q);
                t.push(performance.now() - t0); } return t; })()""")
            foreign = [u for u in cdp.requests if not u.startswith("file://")]
            if foreign:
                fails.append(f"the page requested {foreign}")

            # the notebook form: an iframe whose srcdoc is the page
            cdp.call("Page.navigate", url="file://" + os.path.abspath(nb))
            ok = cdp.wait_for("(() => { const f = document.querySelector('iframe');"
                              " const d = f && f.contentDocument;"
                              " const v = d && d.querySelector('.iv');"
                              " return v && v.dataset.state === 'ready' &&"
                              " d.querySelectorAll('.iv-head').length; })()", 60)
            if ok != 2:
                fails.append(f"the notebook iframe did not render its 2 heads ({ok!r})")
            cdp.screenshot(os.path.join(OUT, "view-notebook.png"))
            errors = [c for c in cdp.console if c.startswith("exception")]
            if errors:
                fails.append(f"page errors: {errors}")
    print(f"view_browser: drew 8 heads of {T} x {T} in {draw_ms} ms; a hover's update "
          f"(tokens, overlays, read-out): median {statistics.median(times):.1f} ms, max "
          f"{max(times):.1f} ms (a timing on this machine, not judged); page "
          f"{page_mib:.1f} MiB")
    print(f"view_browser: screenshots in {os.path.abspath(OUT)}")
    if fails:
        sys.exit("view_browser: FAILED:\n  " + "\n  ".join(fails))
    print("view_browser: ok")


if __name__ == "__main__":
    main()
