#!/usr/bin/python3
"""Pack a checkpoint of the phase-change job for the course: its weights (no optimizer
moments) and its sentencepiece tokenizer in one safetensors file.

    pack_checkpoint.py RUN/2L/final.safetensors TOKENIZER.model OUT.safetensors

TOKENIZER.model is the sentencepiece model the run's token file was written with
(build/phase-change-data/python-bpe2048.model for scripts/phase-change.sh's default
corpus); its line breaks are the extra id N for N pieces (--bpe N; 2048 by default), which
the tokenizer is told. Model.save() stores the tokenizer in the file's metadata and
Model.load() attaches it again, so `model.to_str_tokens(text)` works on the loaded model.
The output is a function of the inputs: the same checkpoint and tokenizer give the same
bytes. Prints the SHA-256 of the input and of the output (docs/course.md).
"""
import argparse
import hashlib
import os
import sys

try:
    import induct
except ImportError:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "build", "bindings", "python"))
    import induct


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="a model checkpoint (e.g. phase-change-run/2L/final.safetensors)")
    p.add_argument("tokenizer", help="the sentencepiece model of its token file")
    p.add_argument("out", help="the packed checkpoint to write")
    p.add_argument("--newline-id", type=int, default=None,
                   help="the id of a line break (default: the model's d_vocab - 1, as "
                        "scripts/phase-change.sh --bpe N writes: N)")
    a = p.parse_args(argv)
    model = induct.Model.load(a.checkpoint)
    newline = model.cfg.d_vocab - 1 if a.newline_id is None else a.newline_id
    tok = induct.SentencePieceTokenizer(a.tokenizer, newline_id=newline)
    if tok.d_vocab != model.cfg.d_vocab:
        p.error(f"the tokenizer has d_vocab {tok.d_vocab} (with the line break {newline}), "
                f"the model {model.cfg.d_vocab}")
    model.set_tokenizer(tok)
    model.save(a.out)
    print(f"{a.checkpoint}: sha256 {sha256(a.checkpoint)}")
    print(f"{a.tokenizer}: sha256 {sha256(a.tokenizer)}")
    print(f"{a.out}: sha256 {sha256(a.out)}, {os.path.getsize(a.out)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
