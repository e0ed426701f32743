#!/bin/sh
# The phase change on real text (issue 8): prepare a corpus, run build/examples/phase-change,
# then draw the figures with examples/plot_phase_change.py. Run after a build
# (scripts/build.sh build). Every option not listed here goes to phase-change unchanged
# (its flags: build/examples/phase-change --help, docs/phase-change.md).
#
# usage: scripts/phase-change.sh [--full] [--corpus kjv|python|PATH] [--bpe N|--bytes]
#                                [--build DIR] [--data DIR] [--no-plot] [phase-change flags...]
#   (no flags)       the default run: CPython's standard library as 2048 word pieces, the
#                    phase-change defaults (3 models, 1200 steps; about 5 min on 2 cores)
#   --full           the long run: the 3 models and a smeared-key 2-layer one, 12000 steps
#                    (49 M tokens per model), evaluation every 250
#                    steps on 256 windows (about an hour on 2 cores; docs/phase-change.md)
#   --corpus python  CPython's standard library, every *.py under it (default)
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
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
corpus=python bpe=2048 build=$root/build data="" plot=1 out=phase-change-run full=0
# the arguments that are not ours, kept in order for phase-change
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
        *) set -- "$@" "$a" ;;
    esac
done
exe=$build/examples/phase-change
[ -x "$exe" ] || { echo "phase-change.sh: $exe not found: build first (scripts/build.sh $build)" >&2; exit 2; }
[ -n "$data" ] || data=$build/phase-change-data
mkdir -p "$data"
py=/usr/bin/python3

# ---- the corpus as text (a file) or as a directory of sources ----
suffix=""
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
        text=$($py -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')
        suffix=.py ;;
    *)
        text=$corpus
        [ -r "$text" ] || { echo "phase-change.sh: cannot read $text" >&2; exit 2; } ;;
esac

if [ -z "$bpe" ]; then
    if [ -n "$suffix" ]; then
        set -- --text "$text" --suffix "$suffix" "$@"
    else
        set -- --text "$text" "$@"
    fi
else
    case "$bpe" in
        ''|*[!0-9]*) echo "phase-change.sh: --bpe needs a number of pieces" >&2; exit 2 ;;
    esac
    [ "$bpe" -ge 2 ] && [ "$bpe" -le 65535 ] || { echo "phase-change.sh: --bpe must be in 2..65535" >&2; exit 2; }
    command -v spm_train >/dev/null || { echo "phase-change.sh: spm_train not found: apt-get install sentencepiece" >&2; exit 2; }
    # prepared files are reused; a user's file is keyed by its path, size and time too
    case "$corpus" in
        kjv|python) name=$corpus ;;
        *) name=$(basename "$corpus")-$(printf '%s %s' "$(readlink -f "$corpus")" \
               "$(stat -c '%s %Y' "$corpus")" | cksum | cut -d' ' -f1) ;;
    esac
    plain=$text
    if [ -n "$suffix" ]; then
        # one text in the library's document order (byte-wise path order under the directory)
        plain=$data/$name.txt
        if [ ! -s "$plain" ]; then
            (cd "$text" && find . -type f -name "*$suffix" | sed 's|^\./||' | LC_ALL=C sort |
                while IFS= read -r f; do cat "$f"; done) > "$plain.tmp"
            mv "$plain.tmp" "$plain"
        fi
    fi
    prefix=$data/$name-bpe$bpe
    tokens=$prefix.u16
    if [ ! -s "$tokens" ]; then
        if [ ! -s "$plain" ]; then
            echo "phase-change.sh: the corpus '$corpus' has no text to train a tokenizer on" >&2
            exit 2
        fi
        echo "phase-change.sh: training a $bpe-piece BPE tokenizer on $plain"
        spm_train --input="$plain" --model_prefix="$prefix" --vocab_size="$bpe" \
            --model_type=bpe --character_coverage=1.0 --hard_vocab_limit=false \
            --normalization_rule_name=identity --remove_extra_whitespaces=false \
            --add_dummy_prefix=false --allow_whitespace_only_pieces=true \
            --bos_id=-1 --eos_id=-1 --max_sentence_length=65536 \
            --input_sentence_size=0 \
            --num_threads=2 --minloglevel=2 >"$prefix.log" 2>&1 ||
            { cat "$prefix.log" >&2; rm -f "$prefix.log" "$prefix.model" "$prefix.vocab"
              echo "phase-change.sh: sentencepiece could not train a tokenizer on $plain" >&2
              exit 1; }
        echo "phase-change.sh: encoding into $tokens (newline = id $bpe)"
        spm_encode --model="$prefix.model" --output_format=id < "$plain" > "$tokens.ids" ||
            { echo "phase-change.sh: spm_encode failed" >&2; rm -f "$tokens.ids"; exit 1; }
        $py -c '
import array, sys
nl, out = int(sys.argv[1]), sys.argv[2]
a = array.array("H")
for line in sys.stdin:
    a.extend(int(t) for t in line.split())
    a.append(nl)
if sys.byteorder != "little":
    a.byteswap()
with open(out + ".tmp", "wb") as f:
    a.tofile(f)
print(f"phase-change.sh: {len(a)} tokens", file=sys.stderr)
' "$bpe" "$tokens" < "$tokens.ids"
        rm -f "$tokens.ids"
        mv "$tokens.tmp" "$tokens"
    fi
    set -- --tokens "$tokens" --format u16 --d-vocab $((bpe + 1)) "$@"
fi

if [ "$full" = 1 ]; then
    # flags given after --full still win (phase-change takes the last value of a flag)
    set -- --models 2L,1L,1L-smeared,2L-smeared --steps 12000 --eval-every 250 --snapshots 12 "$@"
    echo "phase-change.sh: the full run: 12000 steps per model, about an hour on 2 cores"
else
    echo "phase-change.sh: the default run takes about 5 minutes on 2 cores; in 1200 steps the"
    echo "  smeared-key model shows the phase change, the plain 2-layer model needs --full"
    echo "  (12000 steps, about an hour) for it"
fi
"$exe" --out "$out" "$@"
if [ "$plot" = 1 ]; then
    $py "$root/examples/plot_phase_change.py" "$out" --build "$build"
fi
