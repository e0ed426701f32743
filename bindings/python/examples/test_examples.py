"""The Python examples run here with their default settings (each about 25–30 s on one
core), and what they print is checked against what docs/hooks.md and docs/python.md say
the runs show. Run by meson (bindings/python/meson.build, test 'python-examples') with the
build tree's package on PYTHONPATH."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def run(name, *args):
    r = subprocess.run([sys.executable, os.path.join(HERE, name), *args], capture_output=True,
                       text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr
    return r.stdout


def matrix(out, title):
    """The NumPy matrix printed after the line `title`."""
    block = out.split(title, 1)[1].split("]]", 1)[0]
    rows = re.findall(r"\[([^\[\]]+)\]?", block)
    return np.array([[float(x) for x in r.replace(",", " ").split()] for r in rows])


def test_activation_patching():
    out = run("activation_patching.py")
    ind = matrix(out, "induction score [layer, head]:")
    assert ind.shape == (2, 4)
    assert (ind[1] > 0.5).all() and (ind[0] < 0.2).all()
    clean, corrupted = map(float, re.search(
        r"logit difference: clean ([-+.\d]+), corrupted ([-+.\d]+)", out).groups())
    assert clean > 1.0 and corrupted < -1.0
    shares = {int(l): [float(x) for x in re.findall(r"head \d: ([-+.\d]+)", rest)]
              for l, rest in re.findall(r"layer (\d): (.*)", out)}
    # layer 0 carries nothing at that position; the induction heads of layer 1 share the
    # effect and their shares add up to the whole (logits are linear in their z)
    assert all(abs(s) <= 0.01 for s in shares[0])
    assert all(s > 0.0 for s in shares[1])
    assert sum(shares[1]) == pytest.approx(1.0, abs=0.03)


def test_pattern_clamp():
    out = run("pattern_clamp.py")
    plain, clamped = out.split("clamped (layer 1 head 0)")
    pat = (r"step +(\d+) +loss ([.\d]+) +previous-token L0 ([.\d]+) ([.\d]+) +"
           r"induction L1 ([.\d]+) ([.\d]+)")
    p = {int(s[0]): list(map(float, s[1:])) for s in re.findall(pat, plain)}
    c = {int(s[0]): list(map(float, s[1:])) for s in re.findall(pat, clamped)}
    assert sorted(p) == sorted(c) == [200, 400, 600, 800]
    # without the clamp an induction circuit forms: a previous-token head in layer 0,
    # induction heads in layer 1
    assert max(p[800][1:3]) > 0.3 and min(p[800][3:5]) > 0.5
    # the clamp gives an early start but not the better end
    assert c[200][0] < p[200][0] and c[800][0] > p[800][0]
    # the clamped head's own query/key weights get no gradient: measured without the
    # hook its pattern never becomes an induction pattern ...
    assert all(c[s][3] < 0.15 for s in c)
    # ... while the rest of the circuit forms around the clamp, later
    assert c[800][4] > 0.4 and max(c[800][1:3]) > 0.2


def test_induction_phase(tmp_path):
    out = run("induction_phase.py", str(tmp_path))
    icl = {int(s): float(v) for s, v in re.findall(r"step +(\d+) +loss [.\d]+ +ICL score "
                                                     r"([-+.\d]+) nats", out)}
    assert icl[0] > -0.5 and icl[800] < -2.0
    start, end = map(int, re.search(r"phase change: steps (\d+) to (\d+)", out).groups())
    assert 0 < start < end <= 800
    pm = matrix(out, "prefix matching [layer, head]:")
    assert (pm[1] > 0.4).all() and (pm[0] < 0.2).all()
    assert "'induction'" in out.split("head classes:", 1)[1].splitlines()[0]
    right, total = map(int, re.search(r"(\d+) of (\d+) tokens right", out).groups())
    assert total == 16 and right >= 12
    for png in ("phase.png", "attention.png", "head.png", "attribution.png"):
        with open(tmp_path / png, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
