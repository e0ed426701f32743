"""Find and load libinduct.so.<ABI>, then check that its ABI matches these bindings.

Search order: $INDUCT_LIBRARY (never silently replaced), a copy beside the package, the
path meson recorded for this copy of the package (_paths.py, in the build tree and in
an installed package; in a wheel, relative to the package directory: the library
meson-python bundles in site-packages/.induct.mesonpy.libs), the source tree next to a build directory named "build", then
the system's loader path (the soname).

BLAS: libinduct is linked against the OpenMP build of OpenBLAS (all threads are the
model's n_threads, results independent of the machine's core count). If the process
already holds another OpenBLAS when libinduct is loaded (e.g. NumPy imported first,
which on Debian loads the pthread build), the dynamic linker would hand libinduct that
one: its own thread pool then changes the results (no longer bit-identical with C
programs). In that case the loader first loads libinduct's own BLAS (the directory
meson recorded in _paths.py) with RTLD_GLOBAL, so that libinduct binds to it."""
import ctypes
import os
import re
import warnings

#: The ABI version (soname major) these bindings were written for.
ABI_VERSION = 0
SONAME = f"libinduct.so.{ABI_VERSION}"

try:
    from ._paths import BLAS_DIR, LIBRARY
except ImportError:  # the source tree has no _paths.py
    LIBRARY = BLAS_DIR = None
if LIBRARY and not os.path.isabs(LIBRARY):  # a wheel's: relative to the package directory
    LIBRARY = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY))

_BLAS_NAME = re.compile(r"^(libopenblas[\w.-]*|libc?blas|liblapack)\.so")


class LibraryNotFound(ImportError):
    """libinduct could not be loaded or has the wrong ABI."""


def mapped_blas():
    """Paths of the BLAS/LAPACK libraries mapped into this process (Linux), sorted."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = {line.split(None, 5)[5].strip() for line in f if len(line.split()) >= 6}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/") and _BLAS_NAME.match(os.path.basename(p)))


def _foreign_blas(blas_dir):
    own = os.path.realpath(blas_dir)
    return [p for p in mapped_blas() if os.path.dirname(os.path.realpath(p)) != own]


def _preload_own_blas():
    """If another BLAS is already mapped, load libinduct's own with RTLD_GLOBAL first."""
    if not BLAS_DIR or not os.path.isdir(BLAS_DIR):
        return
    foreign = _foreign_blas(BLAS_DIR)
    if not foreign:
        return
    for name in ("libopenblas.so.0", "libblas.so.3", "liblapack.so.3"):
        p = os.path.join(BLAS_DIR, name)
        if os.path.exists(p):
            ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)


def _candidates():
    env = os.environ.get("INDUCT_LIBRARY")
    if env:
        yield env
        return  # an explicit override is never silently replaced
    here = os.path.dirname(os.path.abspath(__file__))
    p = os.path.join(here, SONAME)  # a copy beside the package
    if os.path.exists(p):
        yield p
    if LIBRARY and os.path.exists(LIBRARY):  # where meson put it for this package copy
        yield LIBRARY
    # the source tree next to a meson build directory called "build"
    for rel in (os.path.join("..", "..", "..", "build", "lib", SONAME),
                os.path.join("..", "..", "..", "lib", SONAME)):
        p = os.path.normpath(os.path.join(here, rel))
        if os.path.exists(p):
            yield p
    yield SONAME  # the system's loader path


def load():
    """Return the loaded ctypes.CDLL, or raise LibraryNotFound with every path tried."""
    _preload_own_blas()
    tried = []
    for cand in _candidates():
        try:
            lib = ctypes.CDLL(cand)
        except OSError as e:
            tried.append(f"{cand}: {e}")
            continue
        try:
            fn = lib.induct_abi_version
        except AttributeError:
            tried.append(f"{cand}: not libinduct (no induct_abi_version)")
            continue
        fn.restype = ctypes.c_uint
        fn.argtypes = []
        abi = fn()
        if abi != ABI_VERSION:
            raise LibraryNotFound(
                f"{cand} has ABI {abi}, these bindings need ABI {ABI_VERSION}")
        lib._induct_path = cand
        if not BLAS_DIR and any("openblas-pthread" in p for p in mapped_blas()):
            warnings.warn("libinduct may be running on the pthread build of OpenBLAS (loaded "
                          "before it, e.g. by NumPy): results can differ from C programs; "
                          "import induct first or set OPENBLAS_NUM_THREADS=1",
                          RuntimeWarning, stacklevel=3)
        return lib
    raise LibraryNotFound("libinduct not found; set INDUCT_LIBRARY to the path of "
                          f"{SONAME}. Tried:\n  " + "\n  ".join(tried))
