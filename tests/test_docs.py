"""Every fenced code block of README.md and docs/*.md is compiled or run here.

- ```c: a block with `main` is a program: compiled with the build's header, linked with
  its libinduct and run. A block without is a fragment: it runs inside a program that
  first makes the handles the guides' fragments use (`m`/`model`, `opt`, `ds`/`dataset`/
  `data`, an initialised `tc`, progress callbacks `my_progress` and `cb`, the latter
  stopping the first run it sees at step 2, `ud`/`my_data`, and a batch: `tokens`
  [B][T], `B`, `T`, `V`, a `logits` buffer). Function definitions at the start of a
  fragment (a line at column 0 opening one, up to the `}` at column 0) go to file scope.
- ```python: the blocks of one file run in order in one namespace (like a session), in a
  temporary directory, with the build's `induct` package. An HTML comment
  `<!-- doc-test setup: ... -->` before a block adds the code it leaves implicit (the
  reader's own arrays, files).
- ```sh: run with `sh -e` in a temporary directory where `build` is the build tree and
  every top-level entry of the source tree is linked, unless the line before the block is
  `<!-- not run: REASON -->`.
- ```json: parsed. A ```text block right after `<!-- expected output -->` is the output
  of the program before it: compared line by line, numbers within 0.05.
- Other blocks (diagrams, formulas, unlabelled): must have no language or `text`.

Environment (tests/meson.build): INDUCT_SOURCE_ROOT, INDUCT_BUILD_DIR, INDUCT_TEST_CFLAGS (the
build's sanitizers), CC."""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

SRC = pathlib.Path(os.environ["INDUCT_SOURCE_ROOT"])
BUILD = pathlib.Path(os.environ["INDUCT_BUILD_DIR"])
FILES = ["README.md"] + sorted(str(p.relative_to(SRC)) for p in (SRC / "docs").glob("*.md"))
FENCE = re.compile(r"^```(\S*)\s*$")
NOT_RUN = re.compile(r"^<!-- not run: (.+) -->$")
SETUP = re.compile(r"<!-- doc-test setup:\n(.*?)-->", re.S)


class Block:
    def __init__(self, path, line, lang, code, before):
        self.path, self.line, self.lang, self.code, self.before = path, line, lang, code, before
        self.expected = None


def blocks(path):
    """The fenced blocks of a Markdown file, with the text between the previous block
    and this one (`before`), and the expected-output block that follows, if any."""
    lines = (SRC / path).read_text().split("\n")
    out, i, last_end = [], 0, 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        assert j < len(lines), f"{path}:{i + 1}: unterminated code block"
        b = Block(path, i + 1, m.group(1), "\n".join(lines[i + 1:j]) + "\n",
                  "\n".join(lines[last_end:i]))
        if lines[i - 1].strip() == "<!-- expected output -->" and out:
            out[-1].expected = b
        else:
            out.append(b)
        last_end = j + 1
        i = j + 1
    return out


def not_run_reason(b):
    prev = b.before.rstrip("\n").split("\n")[-1] if b.before.strip() else ""
    m = NOT_RUN.match(prev.strip())
    return m.group(1) if m else None


def workdir(tmp_path):
    """A directory that looks like the source tree with `build` as the build tree."""
    for entry in SRC.iterdir():
        if entry.name not in ("build", ".git"):
            (tmp_path / entry.name).symlink_to(entry)
    (tmp_path / "build").symlink_to(BUILD)
    return tmp_path


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = str(BUILD / "bindings" / "python")
    e["MPLBACKEND"] = "Agg"
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    return e


def compare_output(b, got):
    want = b.expected.code.rstrip("\n").split("\n")
    have = got.rstrip("\n").split("\n")
    num = re.compile(r"-?\d+(?:\.\d+)?")
    assert len(have) == len(want), f"{b.path}:{b.line}: output\n{got}\nexpected\n{b.expected.code}"
    for w, h in zip(want, have):
        assert num.sub("#", w) == num.sub("#", h), f"{b.path}:{b.line}: '{h}' != '{w}'"
        for a, c in zip(num.findall(w), num.findall(h)):
            assert abs(float(a) - float(c)) <= 0.05, f"{b.path}:{b.line}: '{h}' vs '{w}'"


FRAGMENT_MAIN = r"""
#include <induct/induct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
FILESCOPE
static int my_progress(const induct_progress *p, void *ud) { (void)p; (void)ud; return 0; }
static int stopped_once;
/* stops the first run it sees at step 2 (the guides' "returns INDUCT_EINTERRUPTED") */
static int cb(const induct_progress *p, void *ud) {
    (void)ud;
    if (!stopped_once && p->step >= 2) { stopped_once = 1; return 1; }
    return 0;
}
static void need(int rc, const char *what) {
    if (rc) { fprintf(stderr, "%s: %s\n", what, induct_last_error_message()); exit(1); }
}
int main(void) {
    mkdir("run", 0777);
    induct_model_config mc;
    induct_model_config_init(&mc, sizeof mc);
    mc.n_layers = 1; mc.d_model = 16; mc.n_heads = 2;
    induct_model *m;
    need(induct_model_new(&m, &mc), "model");
    induct_optimizer *opt;
    need(induct_optimizer_new(&opt, m, INDUCT_OPTIM_ADAMW), "optimizer");
    induct_rrt_config rrt;
    induct_rrt_config_init(&rrt, sizeof rrt);
    induct_dataset *ds;
    need(induct_dataset_new_rrt(&ds, &rrt), "dataset");
    induct_model *model = m;
    induct_dataset *dataset = ds, *data = ds;
    void *ud = NULL, *my_data = NULL;
    induct_train_config tc;
    induct_train_config_init(&tc, sizeof tc);
    tc.steps = 4; tc.batch = 8; tc.seq_len = 32;
    uint32_t B = 2, T = 16, V = mc.d_vocab;
    int32_t *tokens = malloc(sizeof(int32_t) * B * T);
    float *logits = malloc(sizeof(float) * B * T * V);
    if (!tokens || !logits) return 1;
    need(induct_dataset_batch(ds, INDUCT_SPLIT_EVAL, 0, B, T, tokens, B * T, NULL, 0), "batch");
    (void)model; (void)dataset; (void)data; (void)ud; (void)my_data; (void)tc;
    (void)my_progress; (void)cb;
    {
#line LINE "FILE"
FRAGMENT
    }
    free(tokens);
    free(logits);
    induct_optimizer_free(opt);
    induct_model_free(m);
    induct_dataset_free(ds);
    return 0;
}
"""


def split_fragment(code):
    """(file-scope definitions, statements): leading function definitions, each from a
    line at column 0 that opens one to the next line that is exactly "}"."""
    lines = code.split("\n")
    i, head = 0, []
    while i < len(lines):
        if not lines[i].strip() or lines[i].lstrip().startswith("/*"):
            head.append(lines[i])
            i += 1
            continue
        if re.match(r"^(static\s+)?[A-Za-z_][\w\s\*]*\b\w+\s*\(", lines[i]) and not lines[i].endswith(";"):
            j = i
            while j < len(lines) and lines[j] != "}":
                j += 1
            head += lines[i:j + 1]
            i = j + 1
            continue
        break
    if not any(re.match(r"^(static\s+)?[A-Za-z_]", l) for l in head):
        return "", code
    return "\n".join(head) + "\n", "\n".join(lines[i:])


def c_program(b):
    if re.search(r"\bint\s+main\s*\(", b.code):
        return f'#line {b.line + 1} "{b.path}"\n' + b.code
    head, body = split_fragment(b.code)
    body_line = b.line + 1 + (len(head.split("\n")) - 1 if head else 0)
    return (FRAGMENT_MAIN.replace("FILESCOPE", f'#line {b.line + 1} "{b.path}"\n{head}#line 1 "fragment-main.c"' if head else "")
            .replace("LINE", str(body_line)).replace("FILE", b.path).replace("FRAGMENT", body))


def run_c(b, tmp_path):
    src = tmp_path / "block.c"
    src.write_text(c_program(b))
    exe = tmp_path / "block"
    cc = os.environ.get("CC", "cc").split()
    cmd = cc + os.environ.get("INDUCT_TEST_CFLAGS", "").split() + [
        "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Werror=implicit-function-declaration",
        "-I", str(SRC / "include"), "-I", str(BUILD / "include"), str(src),
        "-L", str(BUILD / "lib"), f"-Wl,-rpath,{BUILD / 'lib'}", "-linduct", "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{b.path}:{b.line}: does not compile:\n{r.stderr}"
    r = subprocess.run([str(exe)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, f"{b.path}:{b.line}: exit {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def cases():
    out = []
    for path in FILES:
        bs = blocks(path)
        py = [b for b in bs if b.lang == "python"]
        if py:
            out.append(pytest.param("python", path, py, id=f"{path}:python"))
        for b in bs:
            if b.lang != "python":
                out.append(pytest.param(b.lang or "none", path, [b], id=f"{path}:{b.line}:{b.lang}"))
    return out


@pytest.mark.parametrize("lang,path,bs", cases())
def test_block(tmp_path, lang, path, bs):
    if lang == "c":
        (b,) = bs
        out = run_c(b, tmp_path)
        if b.expected:
            compare_output(b, out)
    elif lang == "python":
        script = ["import sys", "ns = {'__name__': '__main__'}"]
        for b in bs:
            for setup in SETUP.findall(b.before):
                script.append(f"exec(compile({setup!r}, {f'{path} (setup before line {b.line})'!r}, 'exec'), ns)")
            # line numbers in tracebacks point into the Markdown file
            src = "\n" * b.line + b.code
            script.append(f"exec(compile({src!r}, {path!r}, 'exec'), ns)")
        (tmp_path / "run").mkdir()
        r = subprocess.run([sys.executable, "-c", "\n".join(script)], capture_output=True,
                           text=True, cwd=tmp_path, env=env())
        assert r.returncode == 0, f"{path}: Python blocks fail:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        for b in bs:
            assert not b.expected, f"{path}:{b.line}: expected output of Python blocks is not compared"
    elif lang == "sh":
        (b,) = bs
        reason = not_run_reason(b)
        if reason:
            assert len(reason) > 10, f"{path}:{b.line}: say why the block is not run"
            return
        wd = workdir(tmp_path)
        r = subprocess.run(["sh", "-e", "-c", b.code], capture_output=True, text=True, cwd=wd,
                           env=env())
        assert r.returncode == 0, f"{path}:{b.line}: exit {r.returncode}:\n{r.stdout}\n{r.stderr}"
        if b.expected:
            compare_output(b, r.stdout)
    elif lang == "json":
        (b,) = bs
        json.loads(b.code)
    else:
        (b,) = bs
        assert lang in ("none", "text"), (
            f"{path}:{b.line}: a ```{lang} block: give it a language this test runs "
            "(c, python, sh, json) or none/text for diagrams and formulas")
