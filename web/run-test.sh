#!/bin/sh
# meson tests 'web_page' and 'web_npm': build the WebAssembly library, the page and the npm
# package (under a lock: both tests build the same directory), then run web/test_page.py
# (page) or web/test_npm.py (npm) on it. Exit 77 (skipped) with the reason when emscripten
# is missing, unless CI=true (then it fails).
#   web/run-test.sh SOURCE_ROOT WASM_BUILD_DIR [page|npm]
set -eu
src=$1
out=$2
what=${3:-page}
if ! command -v emcc >/dev/null; then
    echo "web_$what: emcc not found: apt-get install emscripten (scripts/setup-debian.sh does)"
    [ "${CI:-}" = true ] && exit 1
    exit 77
fi
mkdir -p "$(dirname "$out")"
flock "$out.lock" "$src/scripts/build-web.sh" "$out"
case $what in
page) exec "${PYTHON:-/usr/bin/python3}" "$src/web/test_page.py" "$out/web" \
          --screenshot "$out/web-page.png" ;;
npm) exec "${PYTHON:-/usr/bin/python3}" "$src/web/test_npm.py" "$out/web" ;;
*) echo "run-test.sh: unknown test $what" >&2; exit 2 ;;
esac
