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
# One plain closing line over both meson runs (release + sanitizers).
/usr/bin/python3 - build/meson-logs/testlog.json build-asan/meson-logs/testlog.json <<'PY'
import json, sys
passed = failed = skipped = 0
for path in sys.argv[1:]:
    for line in open(path, encoding="utf-8"):
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
