#!/bin/sh
# Build the WebAssembly library and the page into $1 (default: build-web); the page is
# then $1/web/index.html (open it, or serve $1/web: docs/web.md).
#   scripts/build-web.sh [BUILD_DIR] [meson options...]
# Needs Debian's emscripten (apt-get install emscripten; scripts/setup-debian.sh does).
set -eu
cd "$(dirname "$0")/.."
dir=${1:-build-web}
[ $# -gt 0 ] && shift
command -v emcc >/dev/null || { echo "build-web: emcc not found (apt-get install emscripten)" >&2; exit 2; }
# emcc's JavaScript optimizer needs Debian's node modules (acorn); a node that is not
# Debian's own build does not search /usr/share/nodejs by itself.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}
if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "$@" >/dev/null
else
    meson setup "$dir" --cross-file web/wasm-cross.ini -Dgemm=portable -Dopenmp=disabled \
        -Dtests=false -Dbench=false "$@" >/dev/null
fi
ninja -C "$dir"
