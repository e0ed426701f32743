"""The installed library: `meson install --destdir` into a temporary directory, a program
built against it with the installed induct.pc, then the same short training run under
each of Debian's OpenBLAS builds (pthread and OpenMP, selected the way the loader would
pick them: LD_LIBRARY_PATH first), twice each: every loss and every weight must be the
same bits. Also: the installed library keeps its RUNPATH to the OpenBLAS of the build,
and `meson install` puts no generically named programs into bin/.

Environment (set by tests/meson.build): INDUCT_BUILD_DIR, INDUCT_MESON (the meson
program), INDUCT_BLAS_DIR (the OpenBLAS directory the build links; empty with
-Dblas=system), INDUCT_GEMM (the gemm option: blas or portable), INDUCT_PROBE_SRC
(tests/install/blas_probe.c)."""
import os
import pathlib
import re
import shutil
import subprocess

import pytest

BUILD = os.environ["INDUCT_BUILD_DIR"]
BLAS_DIR = os.environ.get("INDUCT_BLAS_DIR", "")
GEMM = os.environ.get("INDUCT_GEMM", "blas")
PROBE = os.environ["INDUCT_PROBE_SRC"]


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    dest = tmp_path_factory.mktemp("destdir")
    meson = os.environ.get("INDUCT_MESON") or shutil.which("meson")
    run([meson, "install", "-C", BUILD, "--destdir", str(dest), "--no-rebuild", "--quiet"])
    libs = sorted(dest.rglob("libinduct.so.0"))
    assert len(libs) == 1, f"installed libinduct.so.0: {libs}"
    pcs = sorted(dest.rglob("pkgconfig/induct.pc"))
    assert len(pcs) == 1, f"installed induct.pc: {pcs}"
    env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=str(dest),
               PKG_CONFIG_PATH=str(pcs[0].parent), PKG_CONFIG_LIBDIR=str(pcs[0].parent))
    flags = run(["pkg-config", "--cflags", "--libs", "induct"], env=env).split()
    exe = dest / "blas_probe"
    cc = os.environ.get("CC", "cc")
    extra = os.environ.get("INDUCT_TEST_CFLAGS", "").split()  # the build's sanitizers
    run([cc, "-std=c11", "-O1", *extra, PROBE, *flags, "-ldl", "-o", str(exe)])
    return dest, libs[0], exe


def test_no_generic_programs_in_bin(installed):
    dest, _, _ = installed
    bins = [p.name for p in dest.rglob("bin/*")]
    generic = [b for b in bins if not b.startswith("induct")]
    assert not generic, f"meson install puts generic names into bin/: {generic}"


def test_installed_library_keeps_blas_runpath(installed):
    if not BLAS_DIR:
        pytest.skip("-Dblas=system: the system's OpenBLAS, no RUNPATH by design")
    _, lib, _ = installed
    dyn = run(["readelf", "-d", str(lib)])
    m = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[([^\]]*)\]", dyn)
    assert m, f"installed {lib} has no RUNPATH:\n{dyn}"
    assert os.path.realpath(BLAS_DIR) in [os.path.realpath(p) for p in m.group(1).split(":")]


def probe(exe, lib, blas_dir, threads, extra_env=None):
    env = dict(os.environ, LD_LIBRARY_PATH=f"{lib.parent}:{blas_dir}")
    env.pop("OPENBLAS_NUM_THREADS", None)
    env.pop("OMP_NUM_THREADS", None)
    env.update(extra_env or {})
    out = run([str(exe), str(threads)], env=env)
    head = dict(line.split(" ", 1) for line in out.splitlines()[:2])
    bits = [line for line in out.splitlines()
            if line.split(" ", 1)[0] in ("step", "weights", "forward", "icl")]
    after = [line for line in out.splitlines() if line.startswith("openblas_threads_after")]
    return int(head["openblas_parallel"]), bits, after[0].split()[1]


def test_bit_identical_under_either_openblas(installed):
    """Debian's pthread and OpenMP OpenBLAS builds give the same bits, run to run and
    from one build to the other, at 1 and 2 threads (and with the pthread build's pool
    asked for 8 threads, as on a larger machine)."""
    _, lib, exe = installed
    root = pathlib.Path(BLAS_DIR or "/usr/lib/x86_64-linux-gnu/openblas-openmp").parent
    dirs = {"pthread": root / "openblas-pthread", "openmp": root / "openblas-openmp"}
    for name, d in dirs.items():
        assert (d / "libopenblas.so.0").exists(), (
            f"{d} is missing: install Debian's libopenblas0-{name} (scripts/setup-debian.sh)")
    reference = None
    # twice each at 1 thread; once each at 2 threads (sleeping, not spinning, at
    # barriers: the machine may be busy; the bits do not depend on it)
    runs = [(1, "openmp", None), (1, "pthread", None), (1, "openmp", None),
            (1, "pthread", None), (1, "pthread", {"OPENBLAS_NUM_THREADS": "8"}),
            (2, "openmp", {"OMP_WAIT_POLICY": "passive"}),
            (2, "pthread", {"OMP_WAIT_POLICY": "passive", "OPENBLAS_NUM_THREADS": "8"})]
    for threads, name, extra in runs:
        mode, bits, after = probe(exe, lib, dirs[name], threads, extra)
        # the run really used that build: 1 = pthreads, 2 = OpenMP
        assert mode == {"pthread": 1, "openmp": 2}[name], (name, mode)
        # libinduct keeps the pthread build's pool at one thread; built without BLAS
        # (-Dgemm=portable) it never calls OpenBLAS, and the pool is the loader's
        if name == "pthread" and GEMM == "blas":
            assert after == "1", f"the pthread build kept a pool of {after} threads"
        assert len(bits) == 8 + 3
        if reference is None:
            reference = bits
        assert bits == reference, (
            f"{name} OpenBLAS, {threads} thread(s), {extra}: results differ in the bits:\n"
            + "\n".join(f"{a}  |  {b}" for a, b in zip(reference, bits) if a != b))
