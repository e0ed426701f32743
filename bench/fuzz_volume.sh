#!/bin/sh
# Fuzzing at volume: every libFuzzer target of tests/fuzz for RUNS inputs (default 10^6),
# once in a plain libFuzzer build (coverage only, fast) and once under ASan+UBSan (the
# build tests/fuzz/run.sh uses). Not a test: it takes hours of CPU. Run it niced:
#
#   nice -n 10 bench/fuzz_volume.sh [RUNS] [TARGET...] > fuzz-volume.txt
#
# Environment: FUZZ_VOLUME_BUILDS="plain asan" (which builds, in order), FUZZ_VOLUME_OUT
# (directory for logs, scratch corpora and crash artifacts; default build-fuzz-volume),
# FUZZ_VOLUME_SEED (libFuzzer -seed, default 1).
#
# Prints one line per (build, target): executions, new inputs, wall and CPU seconds,
# peak RSS, and "ok" or the crash artifact. Exit status 1 if any run crashed, leaked or
# timed out. Crashing inputs are kept as <out>/<build>-<target>-crash-<sha1>; reproduce
# with build-fuzz*/tests/fuzz_<target> <file>, and add them to tests/fuzz/<target>/ as
# regress-<what> (docs/hardening.md).
set -eu
cd "$(dirname "$0")/.."
runs=${1:-1000000}
[ $# -gt 0 ] && shift
targets=${*:-"checkpoint config tokenfile text"}
builds=${FUZZ_VOLUME_BUILDS:-"plain asan"}
out=${FUZZ_VOLUME_OUT:-build-fuzz-volume}
seed=${FUZZ_VOLUME_SEED:-1}
mkdir -p "$out"

setup() { # $1 = build kind; prints the build directory
    case $1 in
        asan) dir=${INDUCT_FUZZ_BUILD:-build-fuzz}; san=address,undefined ;;
        plain) dir=build-fuzz-plain; san=none ;;
        *) echo "unknown build kind $1" >&2; exit 2 ;;
    esac
    if [ ! -f "$dir/build.ninja" ]; then
        CC=clang meson setup "$dir" -Dfuzz=true -Db_sanitize=$san -Db_lundef=false \
            -Dbuildtype=debugoptimized -Dopenmp=disabled -Dbench=false >/dev/null
    fi
    ninja -C "$dir" $(for t in $targets; do printf 'tests/fuzz_%s ' "$t"; done) >/dev/null
    echo "$dir"
}

export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
status=0
printf '%-6s %-11s %10s %6s %8s %8s %8s  %s\n' build target executions new wall_s cpu_s rss_mb result
for b in $builds; do
    dir=$(setup "$b")
    for t in $targets; do
        work="$out/corpus-$b-$t"
        rm -rf "$work"
        mkdir -p "$work"
        log="$out/$b-$t.log"
        t0=$(date +%s.%N)
        # same limits as the CI run (tests/fuzz/run.sh); the committed corpus is read-only
        if /usr/bin/time -f 'time:: %e %U %S %M' -o "$out/$b-$t.time" \
            "$dir/tests/fuzz_$t" -runs="$runs" -seed="$seed" -rss_limit_mb=1024 \
            -malloc_limit_mb=256 -max_len=16384 -timeout=30 -print_final_stats=1 \
            -artifact_prefix="$out/$b-$t-" "$work" "tests/fuzz/$t" >"$log" 2>&1; then
            result=ok
        else
            result="FAIL: $(grep -m1 -E 'Test unit written|ERROR' "$log" || echo "see $log")"
            status=1
        fi
        t1=$(date +%s.%N)
        set -- $(sed -n 's/^time:: //p' "$out/$b-$t.time")
        cpu=$(echo "$2 + $3" | bc)
        printf '%-6s %-11s %10s %6s %8.0f %8.0f %8d  %s\n' "$b" "$t" \
            "$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")" \
            "$(sed -n 's/^stat::new_units_added: *//p' "$log")" \
            "$(echo "$t1 - $t0" | bc)" "$cpu" "$(( $4 / 1024 ))" "$result"
    done
done
exit $status
