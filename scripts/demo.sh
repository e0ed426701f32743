#!/bin/sh
# The main job: set up a fresh Debian 12 machine, build, and run the default demo.
set -eu
cd "$(dirname "$0")/.."
scripts/setup-debian.sh
scripts/build.sh build
exec build/examples/induction-rrt --threads "$(nproc)" "$@"
