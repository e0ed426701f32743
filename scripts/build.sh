#!/bin/sh
# Configure (once) and build libinduct into $1 (default: build) with extra meson options.
set -eu
dir=${1:-build}
[ $# -gt 0 ] && shift
if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "$@" >/dev/null
else
    meson setup "$dir" "$@" >/dev/null
fi
ninja -C "$dir"
