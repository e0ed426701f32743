#!/bin/sh
# The whole test suite: release build with every test (PyTorch parity included),
# then the C suites again under AddressSanitizer + UndefinedBehaviorSanitizer.
set -eu
cd "$(dirname "$0")/.."
scripts/setup-debian.sh
scripts/build.sh build -Ddocs=true
meson test -C build --print-errorlogs
scripts/build.sh build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --suite unit --print-errorlogs
