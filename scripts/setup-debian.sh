#!/bin/sh
# Install the Debian 12 packages libinduct needs to build, test and run its examples.
# Run as root (or with sudo). Safe to run again: apt-get skips what is installed.
# slurm-wlm and munge are for tests/test_sweep_slurm.py, which runs its own munged,
# slurmctld and slurmd in a temporary directory (its own slurm.conf, key and ports): it
# neither needs nor touches the system's services or /etc/slurm.
set -eu
PKGS="build-essential meson ninja-build pkgconf check
libopenblas-dev libopenblas0-openmp libopenblas-openmp-dev libopenblas0-pthread liblapacke-dev libcjson-dev libssl-dev
python3 python3-numpy python3-pytest python3-matplotlib python3-torch
python3-distutils python3-lib2to3 python3-tk python3-venv python3-mesonpy patchelf
doxygen abigail-tools bible-kjv sentencepiece python3-sentencepiece
clang libclang-rt-14-dev valgrind
emscripten chromium python3-websocket
libopenmpi-dev openmpi-bin python3-mpi4py parallel
slurm-wlm munge"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    echo "setup: installing$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
