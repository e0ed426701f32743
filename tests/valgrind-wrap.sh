#!/bin/sh
# meson's exe_wrapper for the 'valgrind' test setup: runs a native test executable
# under memcheck (errors and definite leaks fail the test); an interpreter (the
# Python-driven tests) runs unwrapped, since valgrind would check CPython, not us.
# Usage: valgrind-wrap.sh <valgrind> <suppressions> <test command...>
set -eu
vg=$1
supp=$2
shift 2
case "$(basename "$1")" in
python*) exec "$@" ;;
esac
exec "$vg" --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
    --show-leak-kinds=definite --suppressions="$supp" "$@"
