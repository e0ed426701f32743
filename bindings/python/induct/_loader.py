"""Find and load libinduct.so.<ABI>, then check that its ABI matches these bindings."""
import ctypes
import ctypes.util
import os

#: The ABI version (soname major) these bindings were written for.
ABI_VERSION = 0
SONAME = f"libinduct.so.{ABI_VERSION}"


class LibraryNotFound(ImportError):
    """libinduct could not be loaded or has the wrong ABI."""


def _candidates():
    env = os.environ.get("INDUCT_LIBRARY")
    if env:
        yield env
        return  # an explicit override is never silently replaced
    here = os.path.dirname(os.path.abspath(__file__))
    # the package's neighbourhood: a copy beside the package, or the meson build tree
    for rel in (SONAME, os.path.join("..", "..", "..", "build", "lib", SONAME),
                os.path.join("..", "..", "..", "lib", SONAME)):
        p = os.path.normpath(os.path.join(here, rel))
        if os.path.exists(p):
            yield p
    yield SONAME  # the system's loader path


def load():
    """Return the loaded ctypes.CDLL, or raise LibraryNotFound with every path tried."""
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
        return lib
    raise LibraryNotFound("libinduct not found; set INDUCT_LIBRARY to the path of "
                          f"{SONAME}. Tried:\n  " + "\n  ".join(tried))
