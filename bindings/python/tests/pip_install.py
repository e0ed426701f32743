#!/usr/bin/python3
"""`pip install` of the package from the source tree, the way README.md says, into a fresh
virtual environment (python3 -m venv --system-site-packages: NumPy from Debian), then a
short training run from a directory outside the source tree, with no PYTHONPATH,
INDUCT_LIBRARY or LD_LIBRARY_PATH. Its losses and weights must be the same bits as the
same run on the build tree's package (this build's library), whether NumPy is imported
before induct or after, and the process must hold the OpenMP build of OpenBLAS only as
libinduct's BLAS (docs/threading.md).

  pip_install.py install   pip install --no-build-isolation SOURCE
  pip_install.py wheel     pip wheel --no-build-isolation SOURCE, then pip install the
                           wheel; also checks the wheel's contents and tag, and that
                           pip uninstall removes every file it installed

Both build with meson-python into one build directory, $INDUCT_PIP_BUILD (pip's
--config-settings builddir=...), under a lock, so that the C library is compiled once
for both: the second build only relinks what changed. Environment (set by
bindings/python/meson.build): INDUCT_SOURCE_ROOT, INDUCT_PIP_BUILD, INDUCT_BUILD_TREE_PY
(the build tree's package directory, the reference).

Exit status 77 (meson's "skipped") when Debian's python3-mesonpy, python3-venv or
patchelf is missing, unless CI=true, where that is a failure."""
import fcntl
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

PY = "/usr/bin/python3"
SRC = os.environ["INDUCT_SOURCE_ROOT"]
PIP_BUILD = os.environ["INDUCT_PIP_BUILD"]
BUILD_TREE_PY = os.environ["INDUCT_BUILD_TREE_PY"]

# Run by the environment's interpreter from a temporary directory: a small model trained
# a few steps, an analysis, and where everything was loaded from.
CHILD = r"""
import hashlib, json, sys
if sys.argv[1] == "numpy-first":
    import numpy
import induct
from induct._loader import mapped_blas
m = induct.Model(n_layers=2, d_model=32, n_heads=2, n_ctx=32, d_vocab=32, init="torch", seed=0)
d = induct.Dataset.rrt(d_vocab=32, seed=1)
opt = induct.Optimizer(m, lr=3e-3)
losses = [opt.train_step(d, 16, 32) for _ in range(20)]
w = m.weights()
digest = hashlib.sha256(b"".join(w[k].tobytes() for k in sorted(w))).hexdigest()
print(json.dumps({"induct": induct.__file__, "library": induct.library_path,
                  "version": induct.__version__, "losses": losses, "weights": digest,
                  "induction": m.induction_score(d, n_seq=16, seq_len=32).tolist(),
                  "blas": mapped_blas(), "prefix": sys.prefix}))
"""


def skip(what):
    msg = f"pip_install: {what} (scripts/setup-debian.sh installs it)"
    if os.environ.get("CI") == "true":
        sys.exit(msg + ": failing, since CI=true")
    print("SKIP: " + msg)
    sys.exit(77)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"pip_install: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-4000:]}\n"
                 f"{r.stderr[-4000:]}")
    return r.stdout


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "INDUCT_LIBRARY", "LD_LIBRARY_PATH", "LD_PRELOAD",
                        "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def pip(venv_python, *args, offline=True):
    # no index: everything comes from this machine (there is no PyPI here)
    return run([venv_python, "-m", "pip", *args, "--disable-pip-version-check"]
               + (["--no-index", "--no-deps", "--no-cache-dir"] if offline else []),
               cwd=SRC, env=clean_env())


def child(python, mode, cwd, **env):
    out = run([python, "-c", CHILD, mode], cwd=cwd, env=clean_env(**env))
    return json.loads(out.strip().splitlines()[-1])


def check_run(got, ref, venv, what, fails):
    site = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))[0]
    if not got["induct"].startswith(site + os.sep):
        fails.append(f"{what}: induct imported from {got['induct']}, not {site}")
    if not os.path.realpath(got["library"]).startswith(os.path.realpath(site) + os.sep):
        fails.append(f"{what}: library {got['library']} is not the one installed in {site}")
    for k in ("losses", "weights", "induction", "version"):
        if got[k] != ref[k]:
            fails.append(f"{what}: {k} differs from the build tree's: {got[k]} != {ref[k]}")
    blas_dirs = {os.path.dirname(os.path.realpath(p)) for p in got["blas"]}
    ref_dirs = {os.path.dirname(os.path.realpath(p)) for p in ref["blas"]}
    own = [d for d in blas_dirs if "openblas-openmp" in d]
    if ref_dirs and not own:
        fails.append(f"{what}: the OpenMP OpenBLAS is not loaded: {got['blas']}")


def check_wheel(whl, fails):
    names = zipfile.ZipFile(whl).namelist()
    base = os.path.basename(whl)
    tag = base[:-4].split("-")[2:]
    if tag[-1] == "any" or tag[-1] == "none":
        fails.append(f"wheel {base}: a platform-independent tag for a native library")
    pkg = os.path.join(SRC, "bindings", "python", "induct")
    modules = {os.path.basename(p) for p in glob.glob(os.path.join(pkg, "*.py"))
               + glob.glob(os.path.join(pkg, "*.js"))}
    in_wheel = {n.split("/", 1)[1] for n in names if n.startswith("induct/")}
    if modules | {"_paths.py"} != in_wheel:
        fails.append(f"wheel's package files {sorted(in_wheel)} != the package's "
                     f"{sorted(modules)} + _paths.py")
    libs = [n for n in names if n.startswith(".induct.mesonpy.libs/libinduct.so.0")]
    if len(libs) != 1:
        fails.append(f"wheel holds {libs} as the library (want one libinduct.so.0.*)")
    return names


def main():
    mode = sys.argv[1]
    assert mode in ("install", "wheel"), mode
    if run([PY, "-c", "import importlib.util as u; print(bool(u.find_spec('mesonpy')))"]
           ).strip() != "True":
        skip("meson-python (Debian python3-mesonpy) is not installed")
    if run([PY, "-c", "import importlib.util as u; print(bool(u.find_spec('ensurepip')))"]
           ).strip() != "True":
        skip("venv cannot install pip (Debian python3-venv is not installed)")
    if not shutil.which("patchelf"):
        skip("patchelf (which meson-python needs for a wheel with a library) is not installed")

    tmp = tempfile.mkdtemp(prefix="induct-pip-")
    fails = []
    try:
        # The environment is made afresh on every run (--clear), at a fixed path beside the
        # build directory: meson-python records the interpreter that runs it in the build
        # directory, and meson runs it again when it reconfigures, so it must outlive the
        # test (a venv in a temporary directory would leave the build directory unusable).
        venv = f"{PIP_BUILD}-venv-{mode}"
        vpy = os.path.join(venv, "bin", "python")
        os.makedirs(os.path.dirname(PIP_BUILD), exist_ok=True)
        with open(PIP_BUILD + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one meson-python build at a time
            run([PY, "-m", "venv", "--clear", "--system-site-packages", venv])
            if os.path.isfile(os.path.join(PIP_BUILD, "build.ninja")):
                # meson-python 0.12 reconfigures a kept build directory only when the
                # interpreter running it is the one of the last build (each test has its
                # own venv), and it reads the install plan before it compiles: after a
                # change to a meson.build, the plan would be the old one
                run(["meson", "setup", "--reconfigure", PIP_BUILD, SRC])
            if mode == "wheel":
                house = os.path.join(tmp, "wheelhouse")
                pip(vpy, "wheel", "--no-build-isolation", "-w", house,
                    "--config-settings", f"builddir={PIP_BUILD}", SRC)
            else:
                pip(vpy, "install", "--no-build-isolation",
                    "--config-settings", f"builddir={PIP_BUILD}", SRC)
        if mode == "wheel":
            whl, = glob.glob(os.path.join(house, "induct-*.whl"))
            names = check_wheel(whl, fails)
            pip(vpy, "install", whl)
        elsewhere = os.path.join(tmp, "elsewhere")
        os.mkdir(elsewhere)
        ref = child(PY, "induct-first", elsewhere, PYTHONPATH=BUILD_TREE_PY)
        for order in ("induct-first", "numpy-first"):
            got = child(vpy, order, elsewhere)
            check_run(got, ref, venv, f"{mode}, {order}", fails)
        print(f"pip_install: {mode}: {got['library']}; losses {got['losses'][0]:.4f} … "
              f"{got['losses'][-1]:.4f}; weights sha256 {got['weights'][:16]}…")
        if mode == "wheel":
            site = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))[0]
            pip(vpy, "uninstall", "-y", "induct", offline=False)
            left = [n for n in names if not n.startswith(("induct-", "induct.data"))
                    and os.path.exists(os.path.join(site, n))]
            if left or os.path.exists(os.path.join(site, "induct")):
                fails.append(f"pip uninstall left {left}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if fails:
        sys.exit("pip_install: FAILED:\n  " + "\n  ".join(fails))
    print("pip_install: ok")


if __name__ == "__main__":
    main()
