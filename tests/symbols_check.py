#!/usr/bin/python3
"""The public symbol set must agree in three places.

1. every function declared with INDUCT_API in the public headers,
2. every name in the linker version script (lib/libinduct.map),
3. every symbol the built shared library exports (nm -D --defined-only),

and the library exports nothing else: no symbol without the induct_ prefix, no
data symbols, nothing outside a version node of the map. The soname must be
libinduct.so.<soversion>. Standard library only.

usage: symbols_check.py NM READELF LIBRARY MAP SOVERSION HEADER...
"""
import re
import subprocess
import sys


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def header_functions(paths):
    """Names of functions declared `INDUCT_API <type> name(`, preprocessor lines ignored."""
    names = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = strip_comments(f.read())
        # drop preprocessor directives (with continuations): the INDUCT_API
        # definition itself must not count as a declaration
        text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
        for m in re.finditer(r"\bINDUCT_API\b([^;{]*?)\b([A-Za-z_]\w*)\s*\(", text):
            names.append(m.group(2))
    return names


def map_nodes(path):
    """{node name: [global names]} of a GNU ld version script."""
    with open(path, encoding="utf-8") as f:
        text = strip_comments(f.read())
    nodes = {}
    for m in re.finditer(r"([A-Za-z_][\w.]*)\s*\{(.*?)\}\s*([A-Za-z_][\w.]*)?\s*;", text, re.S):
        body = m.group(2)
        names = []
        scope = "global"
        for tok in re.findall(r"[^\s;:]+\s*:|[^\s;]+\s*;", body):
            tok = tok.strip()
            if tok.endswith(":"):
                scope = tok[:-1].strip()
                continue
            name = tok[:-1].strip()
            if scope == "global":
                names.append(name)
            elif scope == "local" and name != "*":
                raise SystemExit(f"{path}: unexpected local entry {name!r} in {m.group(1)}")
        nodes[m.group(1)] = names
    return nodes


def exported(nm, lib):
    out = subprocess.run([nm, "-D", "--defined-only", lib], check=True, capture_output=True,
                         text=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        kind, name = parts[-2], parts[-1]
        version = ""
        if "@" in name:
            name, _, version = name.partition("@")
            version = version.lstrip("@")
        syms.append((kind, name, version))
    return syms


def soname(readelf, lib):
    out = subprocess.run([readelf, "-d", lib], check=True, capture_output=True,
                         text=True).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
    return m.group(1) if m else None


def main(argv):
    if len(argv) < 7:
        print(__doc__, file=sys.stderr)
        return 2
    nm, readelf, lib, map_path, soversion = argv[1:6]
    headers = argv[6:]
    errors = []

    decl = header_functions(headers)
    dup = sorted({n for n in decl if decl.count(n) > 1})
    if dup:
        errors.append(f"declared more than once with INDUCT_API: {dup}")
    hdr = set(decl)
    for n in sorted(hdr):
        if not n.startswith("induct_") or n.startswith("induct__"):
            errors.append(f"header: INDUCT_API function {n!r} lacks the induct_ prefix")

    nodes = map_nodes(map_path)
    if not nodes:
        errors.append(f"{map_path}: no version node found")
    mapped = {}
    for node, names in nodes.items():
        for n in names:
            if n in mapped:
                errors.append(f"map: {n} listed in {mapped[n]} and in {node}")
            mapped[n] = node
            if not re.fullmatch(r"induct_[a-z0-9_]+", n) or n.startswith("induct__"):
                errors.append(f"map: {n!r} in {node} is not a public induct_ function name")

    syms = exported(nm, lib)
    exp = {}
    for kind, name, version in syms:
        if kind == "A" and name in nodes:
            continue  # the version node definitions themselves
        if not name.startswith("induct_") or name.startswith("induct__"):
            errors.append(f"library exports {name!r} ({kind}): not a public induct_ symbol")
            continue
        if kind != "T":
            errors.append(f"library exports {name} as {kind!r}, expected a function (T)")
        if version != mapped.get(name, version):
            errors.append(f"library exports {name}@{version}, map puts it in {mapped[name]}")
        exp[name] = kind

    exp_set = set(exp)
    map_set = set(mapped)
    for a_name, a, b_name, b in (("header", hdr, "map", map_set),
                                 ("map", map_set, "library", exp_set),
                                 ("library", exp_set, "header", hdr)):
        for n in sorted(a - b):
            errors.append(f"{n} is in the {a_name} but not in the {b_name}")
        for n in sorted(b - a):
            errors.append(f"{n} is in the {b_name} but not in the {a_name}")

    want = f"libinduct.so.{soversion}"
    got = soname(readelf, lib)
    if got != want:
        errors.append(f"soname is {got!r}, expected {want!r}")

    if errors:
        for e in dict.fromkeys(errors):
            print("FAIL:", e)
        return 1
    print(f"ok: {len(hdr)} functions; header == map == exports; soname {got}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
