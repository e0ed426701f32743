"""Print the directory, relative to the install prefix argv[1], where this interpreter
imports pure-Python packages from (empty if none is under the prefix).

Meson 1.0's python module picks <prefix>/lib/python3/dist-packages on Debian (the
deb_system scheme), which Debian's python3 searches only for prefix /usr; for the
default prefix /usr/local it searches /usr/local/lib/python3.X/dist-packages instead
(meson issue #8739). Run by bindings/python/meson.build at configure time."""
import os
import site
import sys
import sysconfig

prefix = os.path.normpath(sys.argv[1])
candidates = []
for scheme in ("deb_system", sysconfig.get_default_scheme(), "posix_prefix"):
    if scheme in sysconfig.get_scheme_names():
        candidates.append(sysconfig.get_path("purelib", scheme,
                                             vars={"base": prefix, "platbase": prefix}))
candidates += [sysconfig.get_path("purelib")] + site.getsitepackages()
on_path = {os.path.normpath(p) for p in sys.path if p}
for c in candidates:
    c = os.path.normpath(c)
    rel = os.path.relpath(c, prefix)
    if c in on_path and not rel.startswith(os.pardir) and rel.split(os.sep)[0].startswith("lib"):
        print(rel)
        break
