"""The include rule of lib/ (lib/README.md, "The include rule"): a wing includes only its
own header and the headers of the wings below it, and other wings reach a wing through its
one header, never through the headers of a group inside it.

Reads the sources only. Environment (tests/meson.build): INDUCT_SOURCE_ROOT."""
import os
import re

ROOT = os.environ.get("INDUCT_SOURCE_ROOT",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
LIB = os.path.join(ROOT, "lib")

# what each wing may include besides itself (lib/README.md)
BELOW = {
    "core": set(),
    "kernels": {"core"},
    "data": {"core"},
    "model": {"kernels", "core"},
    "analysis": {"model", "data", "kernels", "core"},
    "train": {"analysis", "model", "data", "kernels", "core"},
}
# the headers another wing may name: the wing's own header, and core's number text
PUBLIC = {f"{w}/{w}.h" for w in BELOW} | {"core/numtext.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def violations(lib):
    """(number of includes read, the includes that break the rule) under `lib`."""
    bad, n = [], 0
    for wing in sorted(BELOW):
        for dirpath, _, names in os.walk(os.path.join(lib, wing)):
            for name in sorted(names):
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, lib)
                with open(path, encoding="utf-8") as f:
                    found = INCLUDE.findall(f.read())
                for inc in found:
                    n += 1
                    if inc.startswith("induct/"):
                        continue  # the public header
                    if "/" not in inc:
                        # the wing's own files, by plain name, next to the includer
                        if not os.path.isfile(os.path.join(dirpath, inc)):
                            bad.append(f"{rel}: \"{inc}\" is not a file of its wing")
                        continue
                    other = inc.split("/", 1)[0]
                    if other == wing:
                        bad.append(f"{rel}: \"{inc}\": the wing's own header by its plain name")
                    elif other not in BELOW[wing]:
                        bad.append(f"{rel}: \"{inc}\": {wing} may include only "
                                   f"{sorted(BELOW[wing]) or 'no other wing'}")
                    elif inc not in PUBLIC:
                        bad.append(f"{rel}: \"{inc}\" is inside {other}: include "
                                   f"{other}/{other}.h")
    return n, bad


def test_every_wing_exists_with_its_header():
    for wing in BELOW:
        assert os.path.isfile(os.path.join(LIB, wing, wing + ".h")), wing
        assert os.path.isfile(os.path.join(LIB, wing, "meson.build")), wing


def test_wings_include_only_wings_below_them():
    n, bad = violations(LIB)
    assert n > 50  # the sources were read
    assert not bad, "\n".join(bad)


def test_the_check_finds_violations(tmp_path):
    # a model file that includes data (not below it), reaches into the kernels' group
    # header, and names a file its wing does not have
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.h").write_text('#include "core/core.h"\n')
    (tmp_path / "model" / "x.c").write_text(
        '#include "model.h"\n#include "data/data.h"\n#include "kernels/simd.h"\n'
        '#include "nothere.h"\n#include "kernels/kernels.h"\n')
    n, bad = violations(str(tmp_path))
    assert n == 6
    assert len(bad) == 3, bad
    assert "data/data.h" in bad[0] and "kernels/simd.h" in bad[1] and "nothere.h" in bad[2]


def test_no_umbrella_header_left():
    assert not os.path.exists(os.path.join(LIB, "induct_internal.h"))
    assert not [n for n in os.listdir(LIB) if n.endswith((".c", ".h"))]
