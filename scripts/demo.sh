#!/bin/sh
# The main job: set up a fresh Debian 12 machine, build, and run the default phase-change
# experiment on real text (CPython's standard library as 2048 sentencepiece word pieces;
# about 8 minutes on 2 idle cores from a fresh clone with the Debian packages installed,
# build and corpus preparation included).
# `scripts/demo.sh --full` is the long run (over an hour); any other flag goes to
# phase-change (docs/phase-change.md).
set -eu
cd "$(dirname "$0")/.."
scripts/setup-debian.sh
scripts/build.sh build
exec scripts/phase-change.sh "$@"
