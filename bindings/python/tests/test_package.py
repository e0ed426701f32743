"""The package as a whole: it covers the C API, keeps ctypes in one place, loads from the
build tree by itself, loads its own BLAS, and installs with `meson install` into the
directory Debian's python3 imports from."""
import ast
import glob
import json
import os
import re
import subprocess
import sys

import pytest

import induct
from helpers import env_path, f32, parse_reference, run_helper
from induct import _capi

PKG = os.path.dirname(induct.__file__)


def _header():
    with open(os.path.join(env_path("INDUCT_SOURCE_ROOT"), "include", "induct", "induct.h"),
              encoding="utf-8") as f:
        return f.read()


def test_every_c_function_is_in_the_table():
    declared = set(re.findall(r"INDUCT_API\s[^;{]*?\b(induct_\w+)\s*\(", _header()))
    table = {name for name, _, _ in _capi.FUNCTIONS}
    assert len(table) == len(_capi.FUNCTIONS), "a function is registered twice"
    assert declared - table == set(), "functions of the header missing from FUNCTIONS"
    assert table - declared == set(), "FUNCTIONS rows the header does not declare"


def test_every_registered_function_is_reachable_from_python():
    """Each row of the table is used by the package (a wrapper exists for it)."""
    src = open(os.path.join(PKG, "_capi.py"), encoding="utf-8").read()
    table_src = src[src.index("FUNCTIONS = ["):src.index("def _register")]
    users = src.replace(table_src, "") + "".join(
        open(p, encoding="utf-8").read() for p in glob.glob(os.path.join(PKG, "*.py"))
        if not p.endswith("_capi.py"))
    unused = [name for name, _, _ in _capi.FUNCTIONS if f'"{name}"' not in users
              and f"lib.{name}" not in users and f"_lib.{name}" not in users]
    assert unused == []


def test_every_public_struct_is_mirrored_and_checked():
    # "typedef struct induct_x {" or, for a struct declared ahead of its definition
    # (induct_probe_config), "struct induct_x {"
    header_structs = set(re.findall(r"^(?:typedef )?struct (induct_\w+) \{", _header(), re.M))
    layout = json.loads(run_helper("INDUCT_LAYOUT"))
    assert header_structs == set(_capi.STRUCTS)
    assert set(layout) == set(_capi.STRUCTS)  # the layout test covers them all


def test_only_capi_and_loader_touch_ctypes():
    for path in glob.glob(os.path.join(PKG, "*.py")):
        tree = ast.parse(open(path, encoding="utf-8").read())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
        if os.path.basename(path) in ("_capi.py", "_loader.py"):
            continue
        assert "ctypes" not in imported, path
        assert "matplotlib" not in imported or path.endswith("plot.py"), path


def test_meson_installs_every_module():
    src = os.path.join(env_path("INDUCT_SOURCE_ROOT"), "bindings", "python")
    text = open(os.path.join(src, "meson.build"), encoding="utf-8").read()
    listed = re.search(r"py_module_names = \[(.*?)\]", text, re.S).group(1)
    listed = set(re.findall(r"'([^']+)'", listed))
    on_disk = {os.path.basename(p) for p in glob.glob(os.path.join(src, "induct", "*.py"))}
    assert listed == on_disk
    data = re.search(r"py_data_names = \[(.*?)\]", text, re.S).group(1)
    others = {os.path.basename(p) for p in glob.glob(os.path.join(src, "induct", "*"))
              if not p.endswith((".py", "meson.build")) and os.path.isfile(p)}
    assert set(re.findall(r"'([^']+)'", data)) == others


def test_loaded_from_the_build_tree_without_an_override():
    assert "INDUCT_LIBRARY" not in os.environ  # the tests use the build-tree package
    assert PKG.startswith(env_path("INDUCT_BUILD_ROOT"))
    assert induct.library_path == env_path("INDUCT_EXPECTED_LIBRARY")
    assert induct.__version__.count(".") == 2
    assert induct.version_number == sum(int(x) * m for x, m in
                                        zip(induct.__version__.split("."), (10000, 100, 1)))


def _python(code, **env):
    e = dict(os.environ)
    e.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e)


def test_library_override_is_never_replaced(tmp_path):
    out = _python("import induct", INDUCT_LIBRARY=str(tmp_path / "libnothing.so.0"))
    assert out.returncode != 0
    assert "LibraryNotFound" in out.stderr and "libnothing.so.0" in out.stderr
    out = _python("import induct; print(induct.library_path)",
                  INDUCT_LIBRARY=env_path("INDUCT_EXPECTED_LIBRARY"))
    assert out.returncode == 0 and out.stdout.strip() == env_path("INDUCT_EXPECTED_LIBRARY")


_ATTRIBUTION = """
import sys
if sys.argv[1] == 'numpy-first':
    import numpy
import induct, induct._loader as L
d = induct.Dataset.rrt(d_vocab=16, min_block=3, seed=7)
m = induct.Model(n_layers=2, d_model=32, n_heads=4, d_mlp=64, n_ctx=40, d_vocab=16,
                 layer_norm=1, smeared_keys=1, smear_alpha_init=0.5, seed=22)
a = m.ablation_attribution(d, n_seq=6, seq_len=40, chunk=4, early=5, late=30, pos_seed=3)
import numpy
print('B.attribution_zero', *[float(x).hex() for x in a.delta.ravel()])
print('blas', *L.mapped_blas())
"""


@pytest.mark.parametrize("order", ["induct-first", "numpy-first"])
def test_own_blas_whatever_the_import_order(order):
    """Debian's NumPy loads the pthread OpenBLAS (same soname as libinduct's OpenMP
    build); its thread pool changes the results. The loader keeps libinduct on its own."""
    ref = parse_reference(run_helper("INDUCT_REF_ANALYSIS"))
    out = subprocess.run([sys.executable, "-c", _ATTRIBUTION, order], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    got = parse_reference(out.stdout)
    assert (f32(got["B.attribution_zero"]) == f32(ref["B.attribution_zero"])).all()
    blas = got["blas"]
    if order == "induct-first":  # NumPy then binds to the BLAS already loaded
        assert not any("openblas-pthread" in p for p in blas), blas
    assert any("openblas-openmp" in p for p in blas), blas


def test_meson_install(tmp_path):
    """`meson install` puts the package where python3 looks for the prefix, with every
    module, and the installed package imports and works."""
    prefix = env_path("INDUCT_PREFIX")
    purelib = env_path("INDUCT_PY_PURELIB")
    site = os.path.normpath(os.path.join(prefix, purelib))
    out = subprocess.run([sys.executable, "-c", "import sys; print('\\n'.join(sys.path))"],
                         capture_output=True, text=True, env={})
    if prefix in ("/usr", "/usr/local"):  # Debian's python3 searches these prefixes
        assert site in out.stdout.split("\n"), (site, out.stdout)
    dest = tmp_path / "dest"
    subprocess.run([env_path("INDUCT_MESON"), "install", "-C", env_path("INDUCT_BUILD_ROOT"),
                    "--no-rebuild", "--quiet", "--tags", "runtime,python-runtime",
                    "--destdir", str(dest)], check=True, capture_output=True)
    pkg = str(dest) + os.path.join(site, "induct")
    installed = {os.path.basename(p) for p in glob.glob(os.path.join(pkg, "*.py"))}
    assert installed == {os.path.basename(p) for p in glob.glob(os.path.join(PKG, "*.py"))}
    paths = open(os.path.join(pkg, "_paths.py"), encoding="utf-8").read()
    soname = os.path.join(prefix, env_path("INDUCT_LIBDIR"), "libinduct.so.0")
    assert f'LIBRARY = "{soname}"' in paths
    libdir = str(dest) + os.path.dirname(soname)
    assert os.path.exists(os.path.join(libdir, "libinduct.so.0"))
    code = ("import induct\n"
            "m = induct.Model(n_layers=1, d_model=8, n_heads=2, n_ctx=8, d_vocab=5)\n"
            "print(induct.__file__)\nprint(induct.library_path)\n"
            "print(m.prefix_matching(n_seq=2, block_len=3, n_repeats=2).shape)\n")
    env = {"PYTHONPATH": str(dest) + site, "LD_LIBRARY_PATH": libdir,
           "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0].startswith(pkg)
    # the recorded path does not exist under DESTDIR, so the soname was found
    assert lines[1] in (soname, "libinduct.so.0")
    assert lines[2] == "(1, 2)"
