#!/bin/sh
# ABI check against the committed baseline abi/libinduct.abi (docs/abi-policy.md).
#
#   scripts/abi-check.sh [BUILD_DIR]            compare BUILD_DIR's library with the baseline
#   scripts/abi-check.sh --update [BUILD_DIR]   regenerate the baseline from BUILD_DIR
#
# BUILD_DIR (default build-dbg) must hold a build with DWARF, e.g.
#   meson setup build-dbg -Dbuildtype=debugoptimized && ninja -C build-dbg
# Exit status: 0 compatible (no change, or only additions: abidiff bit 4, to be listed
# under "ABI additions" in CHANGELOG.md); 1 an incompatible change (abidiff bit 8)
# without a soname bump recorded under "ABI breaks" in CHANGELOG.md; 2 a tool or
# usage error.
set -eu
cd "$(dirname "$0")/.."
update=0
if [ "${1:-}" = "--update" ]; then
    update=1
    shift
fi
build=${1:-build-dbg}
baseline=abi/libinduct.abi
suppr=abi/libinduct.suppr
for tool in abidw abidiff readelf; do
    command -v "$tool" >/dev/null || { echo "abi-check: $tool not found (apt-get install abigail-tools binutils)" >&2; exit 2; }
done
lib=$(ls "$build"/lib/libinduct.so.*.*.* 2>/dev/null | head -n 1 || true)
[ -n "$lib" ] || { echo "abi-check: no libinduct.so.N.M.P in $build/lib (build it first)" >&2; exit 2; }
readelf -S "$lib" | grep -q '\.debug_info' ||
    { echo "abi-check: $lib has no debug info; use -Dbuildtype=debugoptimized" >&2; exit 2; }

if [ "$update" = 1 ]; then
    abidw --headers-dir include/induct --drop-private-types --no-show-locs --no-corpus-path \
        --type-id-style hash --suppressions "$suppr" --out-file "$baseline" "$lib"
    echo "abi-check: wrote $baseline from $lib ($(readelf -d "$lib" | sed -n 's/.*soname: \[\(.*\)\]/\1/p'))"
    exit 0
fi

[ -f "$baseline" ] || { echo "abi-check: $baseline is missing (scripts/abi-check.sh --update)" >&2; exit 2; }
report=$(mktemp)
trap 'rm -f "$report"' EXIT
set +e
abidiff --headers-dir2 include/induct --suppressions "$suppr" --fail-no-debug-info \
    "$baseline" "$lib" >"$report" 2>&1
rc=$?
set -e
cat "$report"
if [ $((rc & 3)) -ne 0 ]; then
    echo "abi-check: abidiff failed (exit $rc)" >&2
    exit 2
fi
if [ $((rc & 8)) -ne 0 ]; then
    old=$(sed -n "s/.*soname='\([^']*\)'.*/\1/p" "$baseline" | head -n 1)
    new=$(readelf -d "$lib" | sed -n 's/.*soname: \[\(.*\)\]/\1/p')
    if [ "$old" != "$new" ] && grep -q '^### ABI breaks' CHANGELOG.md && grep -q "$new" CHANGELOG.md; then
        echo "abi-check: incompatible change with a soname bump ($old -> $new) recorded in" \
             "CHANGELOG.md: accepted; regenerate the baseline (scripts/abi-check.sh --update)"
        exit 0
    fi
    echo "abi-check: INCOMPATIBLE ABI change against $baseline ($old). Either undo it, or bump" \
         "induct_soversion in meson.build and record it under '### ABI breaks' in CHANGELOG.md" >&2
    exit 1
fi
if [ $((rc & 4)) -ne 0 ]; then
    echo "abi-check: compatible ABI changes (additions) against $baseline: list them under" \
         "'### ABI additions' in CHANGELOG.md; the baseline is regenerated at release"
else
    echo "abi-check: the ABI equals the baseline"
fi
exit 0
