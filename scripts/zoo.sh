#!/bin/sh
# The small-model study of "In-context Learning and Induction Heads" (Olsson et al. 2022):
# 14 models — attention-only with 1 to 6 layers, with GELU MLPs with 1 to 6 layers, smeared
# keys with 1 and 2 layers — trained on the main job's data stream for the same number of
# steps, each analysed like the main job's models, then one cross-model report
# (docs/zoo.md). Run after a build (scripts/build.sh build).
#
# The models run as three studies of the stages (study/runner.py, docs/study.md), one per
# group of models that share every setting; the groups differ only as listed below, and the
# report states it beside every figure:
#   DIR/attn        1L, 2L, 3L, 1L-smeared, 2L-smeared  the main job's settings
#   DIR/attn-deep   4L, 5L, 6L                         learning rate 5e-3 (at 1e-2 they sit
#                                                       in a plateau through the warm-up)
#   DIR/mlp         1L-mlp ... 6L-mlp                  the main job's settings
# Every group gets the same --steps (default 3000: 12.3 M tokens) for every model, 1-layer
# ones included. The same command again resumes (finished models are kept, unfinished ones
# continue from their last evaluation, failed ones run again); with --via slurm it submits
# the unfinished models as job arrays, and run again once they are done writes the report.
#
# usage: scripts/zoo.sh [--out DIR] [--steps N] [--build DIR] [--data DIR] [--no-report]
#                       [runner and stage flags...]
#   --out DIR      where the study goes (default zoo-run)
#   --steps N      steps of every model (default 3000)
#   --no-report    train and analyse only (the report: study/zoo_report.py DIR)
#   --jobs N, --threads N, --via local|parallel|slurm|mpirun, --submit, --sbatch OPTION:
#                  as in study/runner.py (default: 2 models at a time, 1 thread each)
#   other flags go to scripts/phase-change.sh (--corpus, --bpe, --bytes, --data, --build)
#   and through it to the stages; a flag given here applies to every group.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=zoo-run steps=3000 report=1 build=$root/build
n=$#
while [ "$n" -gt 0 ]; do
    a=$1
    shift
    n=$((n - 1))
    case "$a" in
        --out|--steps|--build)
            [ "$n" -gt 0 ] || { echo "zoo.sh: $a needs a value" >&2; exit 2; }
            v=$1
            shift
            n=$((n - 1))
            case "$a" in
                --out) out=$v ;;
                --steps) steps=$v ;;
                --build) build=$v ;;
            esac ;;
        --no-report) report=0 ;;
        -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) set -- "$@" "$a" ;;
    esac
done
case "$steps" in
    ''|*[!0-9]*) echo "zoo.sh: --steps needs a positive number, got '$steps'" >&2; exit 2 ;;
esac
[ "$steps" -ge 1 ] || { echo "zoo.sh: --steps needs a positive number, got '$steps'" >&2; exit 2; }
mkdir -p "$out"
py=/usr/bin/python3

# group name, models, the flags in which it differs from the main job
groups="attn:1L,2L,3L,1L-smeared,2L-smeared:
attn-deep:4L,5L,6L:--lr 5e-3
mlp:1L-mlp,2L-mlp,3L-mlp,4L-mlp,5L-mlp,6L-mlp:"

status=0
echo "$groups" | while IFS=: read -r name models flags; do
    echo "zoo.sh: $name: $models${flags:+ ($flags)}"
    # shellcheck disable=SC2086  # the group's flags are words
    "$root/scripts/phase-change.sh" --no-plot --build "$build" --out "$out/$name" \
        --models "$models" --steps "$steps" --steps-1l "$steps" $flags "$@" || exit $?
done || status=$?
[ "$status" = 0 ] || { echo "zoo.sh: stopped (exit status $status); the same command continues" >&2; exit "$status"; }

if [ "$report" = 1 ]; then
    for g in attn attn-deep mlp; do
        if [ ! -f "$out/$g/summary.json" ]; then
            echo "zoo.sh: $out/$g has unfinished models (running elsewhere?): the same command" \
                 "again, once they are done, writes the report" >&2
            exit 0
        fi
    done
    $py "$root/study/zoo_report.py" "$out" --build "$build"
fi
