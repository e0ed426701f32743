"""Shared helpers of the bindings' tests (run through `meson test`, which sets the
environment variables naming the C helper programs)."""
import os
import subprocess

import numpy as np
import pytest


def run_helper(env_var, *args):
    exe = os.environ.get(env_var)
    if not exe:
        pytest.fail(f"{env_var} is not set (run through meson test)")
    return subprocess.run([exe, *map(str, args)], check=True, capture_output=True,
                          text=True).stdout


def parse_reference(text):
    """Lines '<name> <values...>' -> {name: [str, ...]}."""
    out = {}
    for line in text.splitlines():
        name, *vals = line.split()
        out[name] = vals
    return out


def f32(vals):
    return np.array([float.fromhex(v) for v in vals], dtype=np.float32)


def f64(vals):
    return np.array([float.fromhex(v) for v in vals], dtype=np.float64)


def ints(vals):
    return np.array([int(v) for v in vals], dtype=np.int64)


def env_path(var):
    v = os.environ.get(var)
    if not v:
        pytest.fail(f"{var} is not set (run through meson test)")
    return v
