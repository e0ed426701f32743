#!/bin/sh
# Short, fixed-iteration fuzzing run of every libFuzzer target (CI). Builds a clang
# ASan+UBSan fuzz build if there is none. docs/hardening.md explains longer runs.
#
#   tests/fuzz/run.sh [RUNS] [TARGET...]   RUNS per target (default 20000), fixed seed
#
# Exit status 0 when no target crashed; otherwise the crashing input is left as
# <build>/fuzz-<target>-crash-<sha1> and reproduced with <build>/tests/fuzz_<target> <file>.
set -eu
cd "$(dirname "$0")/../.."
runs=${1:-20000}
[ $# -gt 0 ] && shift
targets=${*:-"checkpoint config tokenfile text"}
build=${INDUCT_FUZZ_BUILD:-build-fuzz}
if [ ! -f "$build/build.ninja" ]; then
    # no OpenMP: clang's libomp next to OpenBLAS's libgomp is not worth the noise here
    CC=clang meson setup "$build" -Dfuzz=true -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debugoptimized -Dopenmp=disabled >/dev/null
fi
ninja -C "$build" $(for t in $targets; do printf 'tests/fuzz_%s ' "$t"; done) >/dev/null
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
status=0
for t in $targets; do
    work=$(mktemp -d)
    log="$build/fuzz-$t.log"
    printf 'fuzz %-12s %s runs ... ' "$t" "$runs"
    # new inputs go to a scratch corpus; the committed one (seeds + regressions) is read-only
    if "$build/tests/fuzz_$t" -runs="$runs" -seed=1 -rss_limit_mb=1024 -malloc_limit_mb=256 \
        -max_len=16384 -timeout=30 -print_final_stats=1 -artifact_prefix="$build/fuzz-$t-" \
        "$work" "tests/fuzz/$t" >"$log" 2>&1; then
        echo "ok ($(sed -n 's/^stat::number_of_executed_units: *//p' "$log") executions," \
             "$(sed -n 's/^stat::new_units_added: *//p' "$log") new inputs)"
    else
        echo "CRASH, see $log"
        grep -E 'ERROR|SUMMARY|Test unit written' "$log" || true
        status=1
    fi
    rm -rf "$work"
done
exit $status
