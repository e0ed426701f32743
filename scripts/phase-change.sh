#!/bin/sh
# The phase change on real text: prepare a corpus, run the study of three models through
# its stages (study/runner.py: study-train and study-analyse for each model, then
# study/report.py), then draw the figures with study/plot_phase_change.py. Run after a
# build (scripts/build.sh build). Every option not listed here goes to the runner
# unchanged (its flags: study/runner.py --help, docs/phase-change.md, docs/study.md).
# The same command again resumes: finished models are kept, unfinished ones continue.
#
# usage: scripts/phase-change.sh [--full] [--corpus kjv|python|PATH] [--bpe N|--bytes]
#                                [--build DIR] [--data DIR] [--no-plot] [study flags...]
#   (no flags)       the default run: CPython's standard library as 2048 word pieces, the
#                    phase-change defaults (3 models: the 2-layer one 3000 steps, the 1-layer
#                    ones 2000; about 8 min on 2 idle cores)
#   --full           the long run: the 3 models and a smeared-key 2-layer one, 12000 steps
#                    each (49 M tokens per model), evaluation every 250 steps on 256
#                    windows (over an hour on 2 cores; docs/phase-change.md)
#   --corpus python  the pinned corpus (default): CPython 3.11's standard library from
#                    Debian 12's packages, a fixed file list with per-file SHA-256
#                    (study/phase_change_corpus.json, docs/phase-change.md "The corpus")
#   --corpus kjv     the King James Bible from Debian's bible-kjv
#   --corpus PATH    your own text file
#   --bytes          byte-level tokens instead of word pieces
#   --bpe N          word pieces (default N = 2048): a sentencepiece BPE tokenizer with N
#                    pieces (N <= 65535) is trained on the corpus and the corpus is encoded
#                    line by line into a uint16 token file; each line break becomes the
#                    extra id N, so d_vocab is N + 1 (docs/phase-change.md, "Word pieces")
#   --build DIR      meson build directory (default: build in the source tree)
# Relative paths are taken from the directory the script is called from.
#   --data DIR       where prepared corpora are kept and reused (default: DIR/phase-change-data
#                    under the build directory)
#   --no-plot        skip the figures
#   --llc            also the local learning coefficient over training (docs/llc.md): keeps 60
#                    checkpoints per model (--snapshots 60), then examples/llc_stages.py draws
#                    the curve of the 2-layer model and the 1-layer control with its stages
#                    (OUT/llc) and every head's refined LLC at fewer checkpoints (OUT/llc-heads)
# The run starts by printing the SHA-256 of the corpus, the tokenizer model and the token file
# and whether they are the documented ones (else: "results are not comparable with the
# documented ones"); the same goes into summary.json (config.data.provenance) and summary.md.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
corpus=python bpe=2048 build=$root/build data="" plot=1 out=phase-change-run full=0 llc=0
# the arguments that are not ours, kept in order for the runner
n=$#
while [ "$n" -gt 0 ]; do
    a=$1
    shift
    n=$((n - 1))
    case "$a" in
        --corpus|--bpe|--build|--data|--out)
            [ "$n" -gt 0 ] || { echo "phase-change.sh: $a needs a value" >&2; exit 2; }
            v=$1
            shift
            n=$((n - 1))
            case "$a" in
                --corpus) corpus=$v ;;
                --bpe) bpe=$v ;;
                --build) build=$v ;;
                --data) data=$v ;;
                --out) out=$v ;;
            esac ;;
        --no-plot) plot=0 ;;
        --bytes) bpe="" ;;
        --full) full=1 ;;
        --llc) llc=1 ;;
        *) set -- "$@" "$a" ;;
    esac
done
exe=$build/study/study-train
[ -x "$exe" ] || { echo "phase-change.sh: $exe not found: build first (scripts/build.sh $build)" >&2; exit 2; }
[ -n "$data" ] || data=$build/phase-change-data
mkdir -p "$data"
py=/usr/bin/python3

# ---- the corpus, the tokenizer and the token file (study/phase_change_data.py) ----
# prepared files are kept in $data and reused while their corpus stays the same
report=$(mktemp "$data/.report.XXXXXX")
trap 'rm -f "$report"' EXIT
tree=""
case "$corpus" in
    kjv)
        text=$data/kjv.txt
        if [ ! -s "$text" ]; then
            command -v bible >/dev/null || { echo "phase-change.sh: 'bible' not found: apt-get install bible-kjv" >&2; exit 2; }
            echo "phase-change.sh: writing $text (bible-kjv)"
            bible gen1:1-rev22:21 > "$text.tmp"
            mv "$text.tmp" "$text"
        fi ;;
    python)
        # the pinned corpus (docs/phase-change.md, "The corpus"): one text for the tokenizer,
        # a directory of its files (one document each) for byte-level tokens
        if [ -z "$bpe" ]; then text=$data/python-stdlib tree=--tree; else text=$data/python.txt; fi ;;
    *)
        text=$corpus
        [ -r "$text" ] || { echo "phase-change.sh: cannot read $text" >&2; exit 2; } ;;
esac

if [ -z "$bpe" ]; then
    $py "$root/study/phase_change_data.py" prepare --corpus "$corpus" --text "$text" $tree \
        --report "$report"
    if [ -n "$tree" ]; then
        set -- --text "$text" --suffix .py "$@"
    else
        set -- --text "$text" "$@"
    fi
else
    case "$bpe" in
        ''|*[!0-9]*) echo "phase-change.sh: --bpe needs a number of pieces" >&2; exit 2 ;;
    esac
    [ "$bpe" -ge 2 ] && [ "$bpe" -le 65535 ] || { echo "phase-change.sh: --bpe must be in 2..65535" >&2; exit 2; }
    command -v spm_train >/dev/null || { echo "phase-change.sh: spm_train not found: apt-get install sentencepiece" >&2; exit 2; }
    # a user's file is keyed by its path, size and time too
    case "$corpus" in
        kjv|python) name=$corpus ;;
        *) name=$(basename "$corpus")-$(printf '%s %s' "$(readlink -f "$corpus")" \
               "$(stat -c '%s %Y' "$corpus")" | cksum | cut -d' ' -f1) ;;
    esac
    prefix=$data/$name-bpe$bpe
    $py "$root/study/phase_change_data.py" prepare --corpus "$corpus" --text "$text" \
        --bpe "$bpe" --prefix "$prefix" --report "$report"
    set -- --tokens "$prefix.u16" --format u16 --d-vocab $((bpe + 1)) "$@"
fi

if [ "$llc" = 1 ]; then
    # before the flags given (they win) and after --full's (its --snapshots 12 is too few)
    set -- --snapshots 60 "$@"
fi
if [ "$full" = 1 ]; then
    # flags given after --full still win (the stages take the last value of a flag)
    set -- --models 2L,1L,1L-smeared,2L-smeared --steps 12000 --steps-1l 12000 --snapshots 12 "$@"
    echo "phase-change.sh: the full run: 12000 steps (49 M tokens) per model, about an hour on 2 cores"
else
    case " $* " in
        *" --models "*|*" --steps "*|*" --steps-1l "*) ;;  # the runner prints the plan
        *) echo "phase-change.sh: the default run: the 2-layer model 3000 steps (12.3 M tokens), the 1-layer"
           echo "  models 2000 steps; about 8 minutes on 2 idle cores" ;;
    esac
fi
$py "$root/study/runner.py" --build "$build" --out "$out" "$@"
if [ ! -f "$out/summary.json" ]; then
    echo "phase-change.sh: no $out/summary.json yet (models running elsewhere): build the report with" \
         "$py $root/study/report.py $out, then $py $root/study/phase_change_data.py stamp $out $report" >&2
    trap - EXIT
    exit 0
fi
# the corpus's, tokenizer's and token file's SHA-256 into summary.json and summary.md
$py "$root/study/phase_change_data.py" stamp "$out" "$report"
if [ "$plot" = 1 ]; then
    $py "$root/study/plot_phase_change.py" "$out" --build "$build"
fi
if [ "$llc" = 1 ]; then
    # the settings docs/llc.md recommends (the script's defaults), the same at every checkpoint
    $py "$root/examples/llc_stages.py" "$out" --checkpoints 12 --window-points 10 --build "$build"
    $py "$root/examples/llc_stages.py" "$out" --checkpoints 8 --window-points 5 --heads \
        --reuse "$out/llc/llc.json" --out "$out/llc-heads" --build "$build"
fi
