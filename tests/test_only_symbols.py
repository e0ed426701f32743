#!/usr/bin/python3
"""The test-only code stays out of libinduct: no function declared in
lib/kernels/reference.h (the reference kernels and the instruction-set switches the tests
turn) is defined in the built shared library, not even as a hidden symbol.

Reads the full symbol table (nm without -D) of the unstripped library in the build tree;
a stripped library fails the check rather than passing it, since then nothing could be
seen. Standard library only.

usage: test_only_symbols.py NM LIBRARY HEADER
"""
import re
import subprocess
import sys


def declared_functions(path):
    """Names of the functions `header` declares (`type name(` at the start of a line)."""
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
    return sorted(set(re.findall(r"^[A-Za-z_][\w \t\*]*?\b(induct__\w+)\s*\(", text, re.M)))


def defined_symbols(nm, library):
    """Every defined symbol of `library`'s symbol table, local ones included."""
    out = subprocess.run([nm, "--defined-only", library], check=True, capture_output=True,
                         text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3}


def main():
    nm, library, header = sys.argv[1:4]
    test_only = declared_functions(header)
    if len(test_only) < 8:
        sys.exit(f"{header}: only {test_only} found; the declarations were not read")
    defined = defined_symbols(nm, library)
    # the library's own hidden kernels are visible, so the table was not stripped
    if "induct__gemm" not in defined or "induct__simd_active" not in defined:
        sys.exit(f"{library}: no hidden symbols in its table (stripped?); cannot check")
    found = [name for name in test_only
             if name in defined or any(s.startswith(name + ".") for s in defined)]
    if found:
        sys.exit(f"{library} defines test-only functions of {header}: {', '.join(found)}")
    print(f"{len(test_only)} test-only functions, none in {library} "
          f"({len(defined)} symbols read)")


if __name__ == "__main__":
    main()
