#!/usr/bin/env python3
"""Write the -sEXPORTED_FUNCTIONS list of libinduct.js: every symbol of the shared
library's version script (lib/libinduct.map), so the WebAssembly module exports exactly
the C API, plus malloc/free and the helpers of induct_web.c (the layout, the hook function).

usage: exports.py lib/libinduct.map OUT.json"""
import json
import re
import sys

names = re.findall(r"^\s*(induct_[A-Za-z0-9_]+)\s*;", open(sys.argv[1]).read(), re.M)
if not names:
    sys.exit("exports.py: no induct_* symbol in " + sys.argv[1])
out = ["_" + n for n in sorted(set(names))] + ["_malloc", "_free", "_induct_web_layout",
                                                "_induct_web_hook_fn"]
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
