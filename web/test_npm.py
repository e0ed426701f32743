#!/usr/bin/env python3
"""The npm package of the browser build: `npm pack` of <site>/npm, `npm install` of the
tarball into a fresh project (offline: nothing is fetched), then
- in Node, web/test_npm.mjs (`import ... from 'libinduct'`): hooks and caches against
  independent computations and the guarantees of docs/hooks.md, and K-composition in a
  trained model;
- in headless Chromium, a page that imports the installed package through an import map,
  served from 127.0.0.1: a cache, a hook equal to the library's ablation, keyComposition;
  and no request outside the page's own files.

usage: test_npm.py SITE_DIR        (SITE_DIR: the built page, e.g. build-web/web)
Exit status 77 (skipped) when node, npm, chromium or python3-websocket is missing, unless
CI=true, where that is a failure."""
import functools
import http.server
import json
import os
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading

from cdp import Chromium, missing, require_tools

HERE = os.path.dirname(os.path.abspath(__file__))

PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>libinduct from npm</title>
<script type="importmap">{"imports": {"libinduct": "./node_modules/libinduct/induct.mjs"}}</script>
</head><body><p id="out">loading</p>
<script type="module">
import { loadInduct } from 'libinduct';
const out = {};
try {
  const I = await loadInduct();
  const m = new I.Model({ n_layers: 2, d_model: 32, n_heads: 4, n_ctx: 16, d_vocab: 16, seed: 1 });
  const toks = Int32Array.from({ length: 32 }, (_, i) => (i * 7 + 3) % 16);
  const { cache } = m.runWithCache(toks, 2, 16, { names: ['pattern'].map((n) => [n, 1]) });
  out.version = I.version;
  out.shape = cache.act('pattern', 1).shape;
  const zero = (z, s) => { for (let i = 0; i < z.length; i++) if (Math.floor(i / s[3]) % s[2] === 2) z[i] = 0; };
  const hooked = m.runWithHooks(toks, 2, 16, [['blocks.1.attn.hook_z', zero]]).losses;
  m.ablateHead(1, 2, I.INDUCT.ABLATE_ZERO);
  const ablated = m.forward(toks, 2, 16).losses;
  m.clearAblations();
  out.hookIsAblation = hooked.every((x, i) => Object.is(x, ablated[i]));
  const kc = I.analysis.keyComposition(m, toks.slice(0, 16), 16, { layer: 1, head: 0 });
  out.without = kc.without.length;
} catch (e) { out.error = String(e && e.stack || e); }
document.documentElement.dataset.result = JSON.stringify(out);
document.getElementById('out').textContent = JSON.stringify(out);
</script></body></html>
"""


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"test_npm: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-3000:]}\n"
                 f"{r.stderr[-3000:]}")
    return r.stdout


def main():
    site = sys.argv[1]
    npm_dir = os.path.join(site, "npm")
    for tool in ("node", "npm"):
        if not shutil.which(tool):
            missing(f"{tool} is not installed", "test_npm")
    require_tools("test_npm")
    if not os.path.isfile(os.path.join(npm_dir, "package.json")):
        sys.exit(f"test_npm: {npm_dir} holds no npm package (scripts/build-web.sh)")
    fails = []
    with tempfile.TemporaryDirectory(prefix="induct-npm-") as tmp:
        env = dict(os.environ, npm_config_cache=os.path.join(tmp, ".npm-cache"),
                   npm_config_update_notifier="false")
        tarball = run(["npm", "pack", os.path.abspath(npm_dir), "--pack-destination", tmp],
                      cwd=tmp, env=env).strip().splitlines()[-1]
        project = os.path.join(tmp, "project")
        os.mkdir(project)
        with open(os.path.join(project, "package.json"), "w") as f:
            json.dump({"name": "uses-libinduct", "private": True, "type": "module"}, f)
        run(["npm", "install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts",
             os.path.join(tmp, tarball)], cwd=project, env=env)
        listed = sorted(os.listdir(os.path.join(project, "node_modules", "libinduct")))
        if listed != ["LICENSE", "README.md", "induct.mjs", "package.json"]:
            fails.append(f"the installed package holds {listed}")
        shutil.copyfile(os.path.join(HERE, "test_npm.mjs"), os.path.join(project, "test.mjs"))
        r = subprocess.run(["node", "test.mjs"], cwd=project, capture_output=True, text=True)
        try:
            res = json.loads(r.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            sys.exit(f"test_npm: node test.mjs failed ({r.returncode}):\n{r.stdout[-3000:]}\n"
                     f"{r.stderr[-3000:]}")
        fails += [f"node: {x}" for x in res["fails"]]
        tr = res["trained"]
        print(f"test_npm: {tarball}; node: {res['points']} hook points; cross-entropy of the "
              f"cached logits within {res['ce_diff']:.1e} of forward(); keyComposition within "
              f"{res['key_composition_diff']:.1e} of float64")
        print(f"test_npm: trained 2-layer model ({tr['train_seconds']:.0f} s): induction head "
              f"L1H{tr['induction_head']} {tr['induction'][4 + tr['induction_head']]:.2f}, "
              f"previous-token head L0H{tr['previous_head']} "
              f"{tr['previous'][tr['previous_head']]:.2f}; induction stripe {tr['stripe']:.2f}, "
              f"without each layer-0 head in its keys "
              + ", ".join(f"{s:.2f}" for s in tr["stripes"]))

        with open(os.path.join(project, "index.html"), "w") as f:
            f.write(PAGE)
        httpd = socketserver.TCPServer(("127.0.0.1", 0),
                                       functools.partial(Quiet, directory=project))
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{httpd.server_address[1]}/"
        try:
            with Chromium(window="800,600", prog="test_npm") as cdp:
                cdp.call("Page.navigate", url=base + "index.html")
                got = cdp.wait_for("document.documentElement && document.documentElement.dataset.result", 120)
                out = json.loads(got) if got else {"error": f"no result; console {cdp.console}"}
                if "error" in out:
                    fails.append(f"page: {out['error']}")
                else:
                    if out["shape"] != [2, 4, 16, 16] or not out["hookIsAblation"] \
                            or out["without"] != 4:
                        fails.append(f"page: {out}")
                    print(f"test_npm: page imported libinduct {out['version']} through an "
                          f"import map: {out}")
                # the WebAssembly is a data: URL inside the module: no request outside
                foreign = [u[:120] for u in cdp.requests
                           if not u.startswith((base, "data:", "blob:"))]
                if foreign:
                    fails.append(f"page requested {foreign}")
                if not any(u.endswith("/induct.mjs") for u in cdp.requests):
                    fails.append("the page did not load node_modules/libinduct/induct.mjs")
        finally:
            httpd.shutdown()
    if fails:
        sys.exit("test_npm: FAILED:\n  " + "\n  ".join(fails))
    print("test_npm: ok")


if __name__ == "__main__":
    main()
