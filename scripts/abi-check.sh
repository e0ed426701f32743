#!/bin/sh
# ABI check against the committed baseline abi/libinduct.abi (docs/abi-policy.md).
#
#   scripts/abi-check.sh [BUILD_DIR]            compare BUILD_DIR's library with the baseline
#   scripts/abi-check.sh --update [BUILD_DIR]   regenerate the baseline from BUILD_DIR
#
# BUILD_DIR (default build-dbg) must hold a build with DWARF, e.g.
#   meson setup build-dbg -Dbuildtype=debugoptimized && ninja -C build-dbg
# Exit status: 0 compatible (no change, or only additions: abidiff bit 4 with no
# Removed or Changed entry; list them under "ABI additions" in CHANGELOG.md); 1 an
# incompatible change (abidiff bit 8, or any Removed/Changed entry left after
# abi/libinduct.suppr) without a soname bump recorded under "ABI breaks" in
# CHANGELOG.md; 2 a tool or usage error.
# (abidiff is not given --headers-dir2: libabigail 2.2 does not match meson's relative
# DWARF paths such as ../include/induct/induct.h and would then treat every public type
# as private and filter all changes out. The baseline holds public types only, and the
# suppressions name the private ones.)
set -eu
cd "$(dirname "$0")/.."
update=0
if [ "${1:-}" = "--update" ]; then
    update=1
    shift
fi
build=${1:-build-dbg}
baseline=${INDUCT_ABI_BASELINE:-abi/libinduct.abi} # override: tests of this script
suppr=abi/libinduct.suppr
for tool in abidw abidiff readelf; do
    command -v "$tool" >/dev/null || { echo "abi-check: $tool not found (apt-get install abigail-tools binutils)" >&2; exit 2; }
done
# the development symlink points at the library of the current soname
lib=$(readlink -f "$build/lib/libinduct.so" 2>/dev/null || true)
[ -n "$lib" ] && [ -f "$lib" ] ||
    { echo "abi-check: no $build/lib/libinduct.so (build it first)" >&2; exit 2; }
readelf -S "$lib" | grep -q '\.debug_info' ||
    { echo "abi-check: $lib has no debug info; use -Dbuildtype=debugoptimized" >&2; exit 2; }

if [ "$update" = 1 ]; then
    abidw --headers-dir include/induct --drop-private-types --no-show-locs --no-corpus-path \
        --type-id-style hash --out-file "$baseline" "$lib"
    echo "abi-check: wrote $baseline from $lib ($(readelf -d "$lib" | sed -n 's/.*soname: \[\(.*\)\]/\1/p'))"
    exit 0
fi

[ -f "$baseline" ] || { echo "abi-check: $baseline is missing (scripts/abi-check.sh --update)" >&2; exit 2; }
report=$(mktemp)
trap 'rm -f "$report"' EXIT
set +e
abidiff --suppressions "$suppr" --fail-no-debug-info \
    "$baseline" "$lib" >"$report" 2>&1
rc=$?
set -e
cat "$report"
if [ $((rc & 3)) -ne 0 ]; then
    echo "abi-check: abidiff failed (exit $rc)" >&2
    exit 2
fi
# abidiff sets bit 8 only for removed symbols and the like; a changed parameter type,
# struct layout or enumerator value is a "Changed" entry under bit 4. After the
# suppressions (private types, appends to size-prefixed structs), any Removed or
# Changed entry is an incompatible change; Added entries are additions.
changed=$(sed -n 's/.*summary: \([0-9]*\) Removed[^,]*, \([0-9]*\) Changed.*/\1 \2/p' "$report" |
    awk '{ n += $1 + $2 } END { print n + 0 }')
if [ $((rc & 8)) -ne 0 ] || [ "$changed" -ne 0 ]; then
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
