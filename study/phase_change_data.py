#!/usr/bin/python3
"""The data of scripts/phase-change.sh: the pinned corpus, the sentencepiece tokenizer and
the token file, with their SHA-256 (docs/phase-change.md, "The corpus").

    phase_change_data.py prepare --corpus python|kjv|PATH --text PATH [--tree] [--bpe N --prefix P]
                                 --report FILE
        python: writes the pinned corpus to --text (one file; a directory tree of the same
        files with --tree). Every corpus: with --bpe N, trains the tokenizer P.model (reused
        while the corpus and the training flags are the same) and writes the token file
        P.u16. Prints the SHA-256 of the corpus, the tokenizer model and the token file,
        says whether they are the documented ones, and writes all of it as JSON to FILE.
    phase_change_data.py stamp RUN_DIR FILE
        adds the report FILE to RUN_DIR/summary.json (config.data.provenance) and a data
        paragraph to RUN_DIR/summary.md.
    phase_change_data.py pin [--compare VERSION=DIR ...] --out FILE
        (maintainers) writes a new pin from the installed Debian packages: the file list with
        per-file SHA-256, leaving out files whose content differs in the other versions'
        unpacked packages (dpkg-deb -x) given with --compare, then the documented hashes of
        a preparation from scratch with 2048 pieces.

Exit status: 0 done; 2 bad input (no text to train on, unreadable corpus); 1 a tool failed.
"""
import argparse
import array
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIN = os.path.join(REPO, "study", "phase_change_corpus.json")
NOT_COMPARABLE = "results are not comparable with the documented ones"
TAG = "phase-change.sh:"

# The rule of the pinned corpus: the *.py regular files that these Debian 12 packages install
# under ROOT (dpkg -L), in byte-wise order of their paths relative to ROOT.
PACKAGES = ["libpython3.11-minimal", "libpython3.11-stdlib", "python3-distutils",
            "python3-lib2to3", "python3-tk"]
ROOT = "/usr/lib/python3.11"
SUFFIX = ".py"


def spm_train_flags(n_pieces):
    """Every spm_train flag but the file names. Deterministic: one input file read whole
    (no sampling, no shuffling) in its line order, a fixed seed and a fixed thread count
    (both are also stored in the model file)."""
    return [f"--vocab_size={n_pieces}", "--model_type=bpe", "--character_coverage=1.0",
            "--hard_vocab_limit=false", "--normalization_rule_name=identity",
            "--remove_extra_whitespaces=false", "--add_dummy_prefix=false",
            "--allow_whitespace_only_pieces=true", "--bos_id=-1", "--eos_id=-1",
            "--max_sentence_length=65536", "--input_sentence_size=0",
            "--shuffle_input_sentence=false", "--random_seed=0", "--num_threads=2",
            "--minloglevel=2"]


class Fail(Exception):
    def __init__(self, msg, status=1):
        super().__init__(msg)
        self.status = status


def say(msg):
    print(f"{TAG} {msg}", flush=True)


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_dir(path):
    """SHA-256 and size of what the library reads from a directory without a suffix: every
    regular file under it (symbolic links skipped), concatenated in byte-wise order of the
    paths relative to it (docs/datasets.md)."""
    rels = []
    for d, dirs, files in os.walk(path):
        for name in files:
            p = os.path.join(d, name)
            if os.path.isfile(p) and not os.path.islink(p):
                rels.append(os.path.relpath(p, path))
    h, n = hashlib.sha256(), 0
    for rel in sorted(rels, key=os.fsencode):
        with open(os.path.join(path, rel), "rb") as f:
            data = f.read()
        h.update(data)
        n += len(data)
    return h.hexdigest(), n


def write_atomic(path, data):
    """Writes data (bytes) to path through a temporary file in its directory."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load_pin(path=PIN):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def package_version(pkg):
    """The installed version of a Debian package (dpkg-query), or None."""
    try:
        r = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Status} ${Version}", pkg],
                           capture_output=True, text=True)
    except OSError:
        return None
    status, _, version = r.stdout.partition(" ")
    return version if r.returncode == 0 and status == "installed" else None


# ---- the pinned corpus ----

def python_corpus(pin):
    """Reads the pinned files from the machine, in the pin's order. Returns (documents as
    (relative path, bytes), findings) where findings lists the files that are missing or
    whose content differs from the pin."""
    docs, missing, differ = [], [], []
    for rel, want in pin["files"]:
        path = os.path.join(pin["root"], rel)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            missing.append(rel)
            continue
        if sha256_bytes(data) != want:
            differ.append(rel)
        docs.append((rel, data))
    return docs, {"missing_files": missing, "differing_files": differ}


def write_tree(dest, docs):
    """The documents as files under dest (replaced as a whole)."""
    parent = os.path.dirname(os.path.abspath(dest))
    tmp = tempfile.mkdtemp(dir=parent, prefix=".tmp-tree-")
    try:
        for rel, data in docs:
            p = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(data)
        old = None
        if os.path.lexists(dest):
            old = tempfile.mkdtemp(dir=parent, prefix=".old-tree-")
            os.replace(dest, os.path.join(old, "t"))
        os.replace(tmp, dest)
        if old:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# ---- tokenizer and token file ----

def encode_u16(model, text, n_pieces):
    """spm_encode's ids of text, line by line, each line followed by the newline id
    n_pieces, as little-endian uint16."""
    with open(text, "rb") as f:
        r = subprocess.run(["spm_encode", f"--model={model}", "--output_format=id"], stdin=f,
                           capture_output=True)
    if r.returncode != 0:
        raise Fail("spm_encode failed: " + r.stderr.decode(errors="replace").strip())
    lines = r.stdout.split(b"\n")
    if lines[-1] == b"":  # the line break after the last line
        lines.pop()
    a = array.array("H")
    for line in lines:
        a.extend(int(t) for t in line.split())
        a.append(n_pieces)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


def tokenize(text, text_sha, n_pieces, prefix):
    """Trains (or reuses) the tokenizer prefix.model on text and writes prefix.u16.
    Returns (model sha256, token-file sha256, number of tokens, reused)."""
    flags = spm_train_flags(n_pieces)
    stamp_path = prefix + ".json"
    model, tokens = prefix + ".model", prefix + ".u16"
    want = {"corpus_sha256": text_sha, "spm_train": flags,
            "sentencepiece": package_version("sentencepiece")}
    try:
        with open(stamp_path, encoding="utf-8") as f:
            stamp = json.load(f)
        if ({k: stamp.get(k) for k in want} == want
                and sha256_file(model) == stamp["model_sha256"]
                and sha256_file(tokens) == stamp["tokens_sha256"]):
            return stamp["model_sha256"], stamp["tokens_sha256"], stamp["tokens"], True
    except (OSError, ValueError, KeyError, TypeError):
        pass
    for p in (stamp_path, tokens):
        if os.path.exists(p):
            os.unlink(p)
    if shutil.which("spm_train") is None:
        raise Fail("spm_train not found: apt-get install sentencepiece", 2)
    say(f"training a {n_pieces}-piece BPE tokenizer on {text}")
    # fixed file names inside the model file (spm_train stores its flags there): the model's
    # bytes depend on the corpus only, not on where the data directory is
    work = tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(prefix)), prefix=".tmp-spm-")
    try:
        os.symlink(os.path.abspath(text), os.path.join(work, "corpus.txt"))
        r = subprocess.run(["spm_train", "--input=corpus.txt", "--model_prefix=tokenizer"]
                           + flags, cwd=work, capture_output=True, text=True)
        with open(prefix + ".log", "w", encoding="utf-8") as f:
            f.write(r.stdout + r.stderr)
        if r.returncode != 0:
            sys.stderr.write(r.stdout + r.stderr)
            os.unlink(prefix + ".log")
            raise Fail(f"sentencepiece could not train a tokenizer on {text}")
        os.replace(os.path.join(work, "tokenizer.vocab"), prefix + ".vocab")
        os.replace(os.path.join(work, "tokenizer.model"), model)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say(f"encoding into {tokens} (newline = id {n_pieces})")
    data = encode_u16(model, text, n_pieces)
    write_atomic(tokens, data)
    stamp = dict(want, model_sha256=sha256_file(model), tokens_sha256=sha256_bytes(data),
                 tokens=len(data) // 2)
    write_atomic(stamp_path, (json.dumps(stamp, indent=1) + "\n").encode())
    return stamp["model_sha256"], stamp["tokens_sha256"], stamp["tokens"], False


# ---- prepare ----

def prepare(corpus, text, n_pieces, prefix, tree, pin):
    doc = pin["documented"]
    rep = {"corpus": corpus, "text": os.path.abspath(text)}
    reasons = []
    if corpus == "python":
        docs, findings = python_corpus(pin)
        versions = {p: package_version(p) for p in pin["packages"]}
        blob = b"".join(d for _, d in docs)
        rep.update(description=pin["description"], rule=pin["rule"], root=pin["root"],
                   packages=versions, files=len(docs), pinned_files=len(pin["files"]),
                   **findings)
        if not docs:
            raise Fail(f"none of the corpus's files is under {pin['root']}: "
                       f"apt-get install {' '.join(pin['packages'])}", 2)
        if tree:
            write_tree(text, docs)
        elif not os.path.isfile(text) or sha256_file(text) != sha256_bytes(blob):
            write_atomic(text, blob)
        n_bad = len(findings["missing_files"]) + len(findings["differing_files"])
        if n_bad:
            names = (findings["differing_files"] + findings["missing_files"])[:5]
            reasons.append(f"{len(findings['differing_files'])} of the {len(pin['files'])} "
                           f"pinned files differ and {len(findings['missing_files'])} are "
                           f"missing ({', '.join(names)}{', …' if n_bad > 5 else ''})")
        odd = [f"{p} {v or 'not installed'}" for p, v in versions.items()
               if v not in pin["packages"][p]]
        if odd:
            reasons.append("package versions the pin was not checked against: " + ", ".join(odd))
        corpus_sha, corpus_bytes = sha256_bytes(blob), len(blob)
    elif os.path.isdir(text) and not n_pieces:
        corpus_sha, corpus_bytes = sha256_dir(text)
        reasons.append(f"the documented results are for the default corpus "
                       f"(python), this is {corpus}")
    else:
        if not os.path.isfile(text) or not os.access(text, os.R_OK):
            raise Fail(f"cannot read {text}" + (" (word pieces need one text file; "
                       "--bytes reads a directory)" if os.path.isdir(text) else ""), 2)
        corpus_sha, corpus_bytes = sha256_file(text), os.path.getsize(text)
        reasons.append(f"the documented results are for the default corpus "
                       f"(python), this is {corpus}")
    rep.update(bytes=corpus_bytes, sha256=corpus_sha)
    print_corpus(rep, doc)
    if corpus == "python" and corpus_sha != doc["corpus_sha256"]:
        reasons.append("the corpus's SHA-256 is not the documented one")
    if n_pieces:
        if corpus_bytes == 0:
            raise Fail(f"the corpus '{corpus}' has no text to train a tokenizer on", 2)
        model_sha, tokens_sha, n_tokens, reused = tokenize(text, corpus_sha, n_pieces, prefix)
        rep["tokenizer"] = {"kind": "sentencepiece-bpe", "pieces": n_pieces,
                            "d_vocab": n_pieces + 1,
                            "sentencepiece": package_version("sentencepiece"),
                            "spm_train": spm_train_flags(n_pieces),
                            "model": os.path.abspath(prefix + ".model"),
                            "model_sha256": model_sha}
        rep["token_file"] = {"path": os.path.abspath(prefix + ".u16"), "format": "u16",
                             "tokens": n_tokens, "sha256": tokens_sha}
        if n_pieces != doc["pieces"]:
            reasons.append(f"the documented results use {doc['pieces']} word pieces, "
                           f"this run {n_pieces}")
        elif corpus == "python" and not reasons:
            if model_sha != doc["model_sha256"]:
                reasons.append(f"the tokenizer model differs from the documented one "
                               f"(sentencepiece {rep['tokenizer']['sentencepiece']}, "
                               f"documented with {doc['sentencepiece']})")
            if tokens_sha != doc["tokens_sha256"]:
                reasons.append("the token file differs from the documented one")
    else:
        reasons.append(f"the documented results use {doc['pieces']} word pieces, "
                       "this run byte-level tokens")
    rep["documented"] = doc
    rep["comparable"] = not reasons
    rep["not_comparable_because"] = reasons
    return rep


def mark(rep, have, want):
    """How a hash compares with the documented one (nothing for other data)."""
    if rep["corpus"] != "python" or rep.get("tokenizer", {}).get("pieces", 2048) != 2048:
        return ""
    return " (documented)" if have == want else " (the documented one is " + want[:12] + "…)"


def print_corpus(rep, doc):
    """The corpus's lines, printed before a tokenizer is trained."""
    if rep["corpus"] == "python":
        say(f"corpus: {rep['description']}: {rep['files']} files, {rep['bytes']} bytes")
        say("  packages: " + ", ".join(f"{p} {v or 'not installed'}"
                                      for p, v in rep["packages"].items()))
    else:
        say(f"corpus: {rep['text']}, {rep['bytes']} bytes")
    say(f"  sha256 corpus     {rep['sha256']}{mark(rep, rep['sha256'], doc['corpus_sha256'])}")


def print_report(rep):
    """The tokenizer's and token file's lines and the verdict."""
    doc = rep["documented"]
    if "tokenizer" in rep:
        t, k = rep["tokenizer"], rep["token_file"]
        say(f"  sha256 tokenizer  {t['model_sha256']}"
            f"{mark(rep, t['model_sha256'], doc['model_sha256'])}")
        say(f"  sha256 tokens     {k['sha256']}{mark(rep, k['sha256'], doc['tokens_sha256'])}"
            f", {k['tokens']} tokens")
    if rep["comparable"]:
        say("data: the documented corpus, tokenizer and token file (with the default flags, "
            "results are comparable with docs/phase-change.md)")
    else:
        say(f"NOTE: {NOT_COMPARABLE}: " + "; ".join(rep["not_comparable_because"]))


def cmd_prepare(a):
    if a.bpe is not None and not a.prefix:
        raise Fail("--bpe needs --prefix", 2)
    for p in (a.text, a.prefix or ""):
        if "\n" in p:
            raise Fail("paths with a line break are not supported", 2)
    rep = prepare(a.corpus, a.text, a.bpe, a.prefix, a.tree, load_pin(a.pin))
    print_report(rep)
    write_atomic(a.report, (json.dumps(rep, indent=1, ensure_ascii=False) + "\n").encode())


# ---- stamp ----

def data_paragraph(rep):
    lines = [f"Data: corpus `{rep['corpus']}` ({rep['bytes']} bytes, SHA-256 `{rep['sha256']}`)"]
    if "tokenizer" in rep:
        lines.append(f"{rep['tokenizer']['pieces']}-piece sentencepiece tokenizer "
                     f"(model SHA-256 `{rep['tokenizer']['model_sha256']}`), "
                     f"{rep['token_file']['tokens']} tokens "
                     f"(token file SHA-256 `{rep['token_file']['sha256']}`)")
    text = ", ".join(lines) + ".\n"
    if rep["comparable"]:
        text += "These are the documented corpus, tokenizer and token file.\n"
    else:
        text += (f"**The {NOT_COMPARABLE}**: "
                 + "; ".join(rep["not_comparable_because"]) + ".\n")
    return text


def cmd_stamp(a):
    with open(a.report, encoding="utf-8") as f:
        rep = json.load(f)
    sj = os.path.join(a.run, "summary.json")
    with open(sj, encoding="utf-8") as f:
        s = json.load(f)
    s.setdefault("config", {}).setdefault("data", {})["provenance"] = rep
    write_atomic(sj, (json.dumps(s, indent="\t", ensure_ascii=False) + "\n").encode())
    sm = os.path.join(a.run, "summary.md")
    with open(sm, encoding="utf-8") as f:
        md = f.read()
    para = data_paragraph(rep)
    if para not in md:
        head, sep, rest = md.partition("\n\n")  # after the title
        md = head + sep + para + "\n" + rest if sep else md + "\n" + para
        write_atomic(sm, md.encode())
    if not rep["comparable"]:
        say(f"NOTE: {NOT_COMPARABLE} (summary.md says why)")


# ---- pin (maintainers) ----

def package_py_files(pkg, root):
    r = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True)
    if r.returncode != 0:
        raise Fail(f"dpkg -L {pkg}: {r.stderr.strip()}")
    out = []
    for p in r.stdout.splitlines():
        if (p.startswith(root + "/") and p.endswith(SUFFIX) and os.path.isfile(p)
                and not os.path.islink(p)):
            out.append(os.path.relpath(p, root))
    return out


def cmd_pin(a):
    versions = {p: package_version(p) for p in PACKAGES}
    if None in versions.values():
        raise Fail("not installed: " + " ".join(p for p, v in versions.items() if not v), 2)
    owner = {}
    for p in PACKAGES:
        for rel in package_py_files(p, ROOT):
            owner[rel] = p
    rels = sorted(owner, key=os.fsencode)
    checked = {p: [v] for p, v in versions.items()}
    compare = []  # (version, directory, the packages whose files it holds)
    for c in a.compare:
        ver, _, d = c.partition("=")
        base = os.path.join(d, ROOT.lstrip("/"))
        pkgs = {owner[r] for r in rels if os.path.isfile(os.path.join(base, r))}
        if not pkgs:
            raise Fail(f"{d} holds none of the corpus's files", 2)
        for p in pkgs:
            checked[p].append(ver)
        compare.append((ver, base, pkgs))
    files, excluded = [], []
    for rel in rels:
        with open(os.path.join(ROOT, rel), "rb") as f:
            data = f.read()
        diff = []
        for ver, base, pkgs in compare:
            other = os.path.join(base, rel)
            if owner[rel] in pkgs and (not os.path.isfile(other)
                                       or open(other, "rb").read() != data):
                diff.append(ver)
        if diff:
            excluded.append([rel, "differs in " + ", ".join(diff)])
        else:
            files.append([rel, sha256_bytes(data)])
    pin = {"description": "CPython 3.11's standard library as Debian 12 packages it",
           "rule": (f"the *{SUFFIX} regular files that {', '.join(PACKAGES)} install under "
                    f"{ROOT} (dpkg -L), less those that differ between the package versions "
                    "checked (excluded), concatenated in byte-wise order of their paths "
                    f"relative to {ROOT}"),
           "root": ROOT, "packages": checked, "excluded": excluded, "files": files}
    blob = b"".join(open(os.path.join(ROOT, r), "rb").read() for r, _ in files)
    with tempfile.TemporaryDirectory() as t:
        text = os.path.join(t, "python.txt")
        write_atomic(text, blob)
        model_sha, tokens_sha, n, _ = tokenize(text, sha256_bytes(blob), 2048,
                                               os.path.join(t, "python-bpe2048"))
    pin["documented"] = {"corpus_sha256": sha256_bytes(blob), "bytes": len(blob),
                         "pieces": 2048, "sentencepiece": package_version("sentencepiece"),
                         "model_sha256": model_sha, "tokens_sha256": tokens_sha, "tokens": n}
    write_atomic(a.out, dump_pin(pin).encode())
    say(f"pinned {len(files)} files ({len(excluded)} excluded), {len(blob)} bytes, "
        f"{n} tokens; wrote {a.out}")


def dump_pin(pin):
    """JSON with one file per line, so that a new pin's diff shows the files that changed."""
    out = ["{"]
    keys = list(pin)
    for i, k in enumerate(keys):
        v = pin[k]
        end = "," if i < len(keys) - 1 else ""
        if k in ("files", "excluded"):
            out.append(f" {json.dumps(k)}: [")
            out += [f"  {json.dumps(e, ensure_ascii=False)}{',' if j < len(v) - 1 else ''}"
                    for j, e in enumerate(v)]
            out.append(f" ]{end}")
        else:
            out.append(f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}{end}")
    return "\n".join(out) + "\n}\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--corpus", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--tree", action="store_true")
    p.add_argument("--bpe", type=int)
    p.add_argument("--prefix")
    p.add_argument("--report", required=True)
    p.add_argument("--pin", default=PIN)
    s = sub.add_parser("stamp")
    s.add_argument("run")
    s.add_argument("report")
    q = sub.add_parser("pin")
    q.add_argument("--compare", action="append", default=[])
    q.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    try:
        {"prepare": cmd_prepare, "stamp": cmd_stamp, "pin": cmd_pin}[a.cmd](a)
    except Fail as e:
        print(f"{TAG} {e}", file=sys.stderr)
        return e.status
    return 0


if __name__ == "__main__":
    sys.exit(main())
