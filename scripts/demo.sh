#!/bin/sh
# The main job: set up a fresh Debian 12 machine, build, and run the default phase-change
# experiment on real text (CPython's standard library as 2048 sentencepiece word pieces;
# about 4½ minutes on 2 cores, plus about half a minute to build and prepare the corpus the
# first time).
# `scripts/demo.sh --full` is the long run (about an hour); any other flag goes to
# phase-change (docs/phase-change.md).
set -eu
cd "$(dirname "$0")/.."
scripts/setup-debian.sh
scripts/build.sh build
exec scripts/phase-change.sh "$@"
