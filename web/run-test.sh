#!/bin/sh
# meson test 'web_page': build the WebAssembly library and the page, then run
# web/test_page.py on it. Exit 77 (skipped) with the reason when emscripten is missing,
# unless CI=true (then it fails).
#   web/run-test.sh SOURCE_ROOT WASM_BUILD_DIR
set -eu
src=$1
out=$2
if ! command -v emcc >/dev/null; then
    echo "web_page: emcc not found: apt-get install emscripten (scripts/setup-debian.sh does)"
    [ "${CI:-}" = true ] && exit 1
    exit 77
fi
"$src/scripts/build-web.sh" "$out"
exec "${PYTHON:-/usr/bin/python3}" "$src/web/test_page.py" "$out/web" \
    --screenshot "$out/web-page.png"
