#!/usr/bin/env python3
"""Lay out the npm package of the browser build (docs/web.md, "The npm package"):
package.json (name libinduct, this project's version, an ES module whose entry point is
induct.mjs), induct.mjs (web/bundle.py's), README.md and LICENSE, in OUTDIR, so that
`npm pack OUTDIR` makes a tarball that `npm install` and a page's import map can use.

usage: package.py OUTDIR VERSION induct.mjs README.md LICENSE"""
import json
import os
import shutil
import sys

outdir, version, mjs, readme, licence = sys.argv[1:]
package = {
    "name": "libinduct",
    "version": version,
    "description": "libinduct compiled to WebAssembly: train small transformers and take apart "
                   "how they learn in context (induction heads), with hooks and caches, in the "
                   "browser or Node",
    "type": "module",
    "main": "./induct.mjs",
    "exports": {".": "./induct.mjs"},
    "files": ["induct.mjs", "README.md", "LICENSE"],
    "license": "MIT",
    "engines": {"node": ">=16"},
    "keywords": ["transformer", "interpretability", "induction-heads", "webassembly"],
}
with open(os.path.join(outdir, "package.json"), "w", encoding="utf-8") as f:
    json.dump(package, f, indent=2)
    f.write("\n")
for src, name in ((mjs, "induct.mjs"), (readme, "README.md"), (licence, "LICENSE")):
    shutil.copyfile(src, os.path.join(outdir, name))
