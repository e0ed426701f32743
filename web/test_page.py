#!/usr/bin/env python3
"""Browser test of the teaching page: serve the built page from 127.0.0.1 with Python's
http.server, open it in Debian's headless Chromium, run the repeated-random-tokens
experiment to completion, assert on the values the page computed (the bar of the native
example induction-rrt), and save a screenshot. Chromium is driven over the DevTools
protocol with python3-websocket (web/cdp.py).

usage: test_page.py SITE_DIR [--steps N] [--screenshot PNG] [--timeout S] [--file]
Exit status 77 (meson's "skipped") with a message when chromium or the WebSocket module is
not installed; never when CI=true, where a missing tool is a failure."""
import argparse
import functools
import http.server
import json
import os
import socketserver
import sys
import threading
import time

from cdp import Chromium, require_tools


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def tree_cpu_seconds(root):
    """User + system CPU time of a process and all its descendants, and of their threads
    named *Worker* (Chromium's worker threads), from /proc."""
    stats = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                f = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(d)] = (int(f[1]), sum(int(x) for x in f[11:15]))  # ppid, u+s+cu+cs
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, (ppid, _) in stats.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    hz = os.sysconf("SC_CLK_TCK")
    # the Web Worker is a thread of the renderer process: its CPU time on its own
    workers = 0
    for p in tree:
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                comm = open(f"/proc/{p}/task/{tid}/comm").read()
                if "Worker" in comm:
                    f = open(f"/proc/{p}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
                    workers += int(f[11]) + int(f[12])
        except OSError:
            continue
    return sum(stats[p][1] for p in tree if p in stats) / hz, workers / hz


def wait_for(cdp, expr, timeout):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        v = cdp.eval(expr)
        if v:
            return v
        time.sleep(0.5)
    return None


def after_training(cdp, a):
    """Ablation by click and the key-value panel, on the trained page."""
    out, fails = {}, []
    # zero-ablate every head of the right model's last layer by clicking its heatmap
    n = cdp.eval("document.querySelectorAll('#heat-right figure').length")
    heads = cdp.eval("state.runs.right.heads")
    for i in range(heads):
        cdp.eval(f"document.querySelectorAll('#heat-right figure')[{i}].click()")
        if not wait_for(cdp, f"state.runs.right.ablated.length === {i + 1}", 120):
            fails.append(f"clicking head {i} did not ablate it")
            break
    msg = cdp.eval("document.getElementById('ablation').textContent")
    out["ablation"] = msg
    ab = cdp.eval("JSON.stringify(lastAblation)")
    if ab:
        ab = json.loads(ab)
        out["ablation_losses"] = ab
        if a.steps >= 2000 and not (ab["loss"] >= ab["base"] + 1.5):
            fails.append(f"ablating the last layer's heads: loss {ab['loss']:.2f} vs {ab['base']:.2f}")
    else:
        fails.append("no ablation result")
    if n != heads + 1:
        fails.append(f"{n} heatmaps for the right model (want {heads} + the previous-token head)")
    # the K-composition panel (hooks and a cache in the worker): the right model's
    # induction head loses most of its stripe without the previous-token head in its keys
    comp = cdp.eval("JSON.stringify((({c, p}) => c && {layer: c.layer, head: c.head, base: c.base,"
                    " stripes: c.stripes, best: c.best, previous: Array.from(p.slice(0, c.stripes.length))})"
                    "({c: state.runs.right.composition, p: state.runs.right.live.previous}))")
    comp = json.loads(comp) if comp else None
    out["composition"] = comp
    if not comp:
        fails.append("no K-composition read-out on the page")
    elif a.steps >= 2000:
        prev_head = max(range(len(comp["previous"])), key=lambda i: comp["previous"][i])
        if comp["best"] != prev_head or not comp["stripes"][comp["best"]] <= comp["base"] / 2:
            fails.append(f"K-composition: without L0H{comp['best']} in its keys the induction head "
                         f"keeps {comp['stripes'][comp['best']]:.2f} of a stripe of "
                         f"{comp['base']:.2f} (want at most half, and the previous-token head "
                         f"L0H{prev_head} to be the one)")
    # a short key-value run: the panel shows the exact ceiling and a moving accuracy
    cdp.eval("document.getElementById('kvSteps').value = 40; document.getElementById('kvStart').click()")
    txt = wait_for(cdp, "state.kv && state.kv.step >= 40 && document.getElementById('kvNumbers').textContent", 600)
    out["kv"] = txt
    if not txt or "of a possible" not in txt:
        fails.append(f"the key-value panel did not finish 40 steps: {txt!r}")
    out["fails"] = fails
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("site")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--screenshot", default="web-page.png")
    ap.add_argument("--timeout", type=float, default=1500)
    ap.add_argument("--file", action="store_true", help="load from file:// instead of a server")
    ap.add_argument("--check-frames", action="store_true",
                    help="also fail on late frames (a measurement for an idle machine: the test "
                         "suite only reports the frame figures, since a busy machine delays them)")
    a = ap.parse_args()

    require_tools("test_page")
    if not os.path.isfile(os.path.join(a.site, "induct-worker.js")):
        sys.exit(f"test_page: {a.site} holds no built page (scripts/build-web.sh)")

    httpd = None
    if a.file:
        url = "file://" + os.path.abspath(os.path.join(a.site, "index.html"))
    else:
        handler = functools.partial(Quiet, directory=a.site)
        httpd = socketserver.TCPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{httpd.server_address[1]}/index.html"
    url += f"?autostart=1&steps={a.steps}"

    chrome = Chromium(window="1000,2400", prog="test_page")
    cdp = chrome.__enter__()
    t_start = time.monotonic()
    try:
        cdp.call("Page.navigate", url=url)
        t0 = time.monotonic()
        state = None
        while time.monotonic() - t0 < a.timeout:
            state = cdp.eval("(document.documentElement && document.documentElement.dataset.state) || ''")
            if state in ("done", "error"):
                break
            time.sleep(2)
        results_text = cdp.eval("document.getElementById('results').textContent")
        extra = {}
        if state == "done":
            extra = after_training(cdp, a)
        cdp.eval("window.scrollTo(0, 0)")
        time.sleep(0.5)
        cdp.screenshot(a.screenshot)
        print(f"test_page: screenshot {os.path.abspath(a.screenshot)}")
        for line in cdp.console:
            print("console:", line)
        if state != "done":
            sys.exit(f"test_page: the page did not finish (state {state!r}) within {a.timeout} s: "
                     f"{results_text}")
        res = json.loads(results_text)
        print("test_page: " + json.dumps(res))
        one, two = res["models"]
        fails = []
        if one["layers"] != 1 or two["layers"] != 2:
            fails.append(f"layers {one['layers']}, {two['layers']} (want 1, 2)")
        if one["steps"] != a.steps or two["steps"] != a.steps:
            fails.append(f"steps {one['steps']}, {two['steps']} (want {a.steps})")
        if a.steps >= 2000:
            # the bar of examples/induction_rrt.c (2000 steps)
            if not two["loss"] <= 0.8:
                fails.append(f"2-layer repeat-half loss {two['loss']:.3f} > 0.8")
            if not max(two["induction_scores"]) >= 0.6:
                fails.append(f"2-layer best induction score {max(two['induction_scores']):.3f} < 0.6")
            if not one["loss"] >= 3.2:
                fails.append(f"1-layer repeat-half loss {one['loss']:.3f} < 3.2")
            if not max(one["induction_scores"]) <= 0.15:
                fails.append(f"1-layer induction score {max(one['induction_scores']):.3f} > 0.15")
        base = url.rsplit("/", 1)[0] + "/"
        foreign = [u for u in cdp.requests if not (u.startswith(base) or u.startswith(("blob:", "data:")))]
        if foreign:
            fails.append(f"requests outside the page's own files: {foreign}")
        if not cdp.requests:
            fails.append("no request was recorded (the check of requests did not run)")
        # a frame at least every 200 ms while training: the page's main thread never runs a
        # task of 200 ms or more (the Long Tasks API), and at most 1 % of the frames come
        # late (a machine shared with other jobs may starve the renderer for a moment: one
        # run here saw 4 late frames of 9313, the longest gap 1.3 s, with no long task)
        # (timing, so judged only with --check-frames; always printed below)
        if res["frames"] < 10 or (a.check_frames and (
                res["late_frames"] > max(1, res["frames"] // 100)
                or res.get("max_long_task_ms", 1e9) >= 200)):
            fails.append(f"{res['frames']} frames, {res['late_frames']} after more than 200 ms, "
                         f"longest gap {res['max_frame_gap_ms']} ms, longest main-thread task "
                         f"{res.get('max_long_task_ms')} ms")
        fails += extra.get("fails", [])
        print(f"test_page: page experiment {res['seconds']:.1f} s; {res['frames']} frames, "
              f"{res['late_frames']} late, longest gap {res['max_frame_gap_ms']} ms, longest "
              f"main-thread task {res.get('max_long_task_ms')} ms; whole test "
              f"{time.monotonic() - t_start:.1f} s")
        for k, v in extra.items():
            if k != "fails":
                print(f"test_page: {k}: {v}")
        if fails:
            sys.exit("test_page: FAILED: " + "; ".join(fails))
        print("test_page: ok")
    finally:
        cpu, worker_cpu = tree_cpu_seconds(chrome.proc.pid)
        print(f"test_page: CPU time of Chromium's processes: {cpu:.1f} s, of its worker "
              f"threads: {worker_cpu:.1f} s")
        chrome.__exit__(None, None, None)
        if httpd:
            httpd.shutdown()


if __name__ == "__main__":
    main()
