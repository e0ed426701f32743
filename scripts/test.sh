#!/bin/sh
# The whole test suite: release build with every test (PyTorch parity included),
# then the C suites again under AddressSanitizer + UndefinedBehaviorSanitizer, the ABI
# check, and a short fixed-iteration fuzzing run (docs/hardening.md).
set -eu
cd "$(dirname "$0")/.."
scripts/setup-debian.sh
scripts/build.sh build -Ddocs=true
meson test -C build --print-errorlogs
scripts/build.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --suite unit --print-errorlogs
# ABI check of the (debugoptimized) ASan build against abi/libinduct.abi: additions pass,
# an incompatible change fails unless the soname is bumped (docs/abi-policy.md).
scripts/abi-check.sh build-asan
# Fuzzing: 20000 executions per libFuzzer target with a fixed seed (clang build-fuzz).
tests/fuzz/run.sh 20000
