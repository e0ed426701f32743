"""What the study's Python stages share (runner.py, report.py; docs/study.md): the model
names and the order models train in, the plan's format, the library's Python bindings of
a build, and reading and writing the study directory's files."""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# study.json's "format"; a plan of another format is refused
STUDY_FORMAT = "libinduct study 1"
# config.json's settings that differ between the models of a study (the rest are the
# study's: study.json's "settings")
PER_MODEL_SETTINGS = ("model", "steps")
# <n>L[-mlp][-smeared], 1 <= n <= 64, as study-train's --model (study/run_config.c)
MODEL_NAME = re.compile(r"^([1-9][0-9]*)L(-mlp)?(-smeared)?$")
MODEL_NAME_MAX_LEN = 31


def valid_model(name):
    m = MODEL_NAME.match(name)
    return bool(m) and int(m.group(1)) <= 64 and len(name) <= MODEL_NAME_MAX_LEN


def layers_of(name):
    return int(MODEL_NAME.match(name).group(1))


def smeared(name):
    return name.endswith("-smeared")


def training_order(names):
    """Longest first: more layers first, smeared keys before plain at equal depth,
    otherwise the order given (the runner starts the models in this order, and the report
    lists them in it)."""
    return sorted(names, key=lambda n: (-layers_of(n), -smeared(n), names.index(n)))


def find_induct(build=None):
    """The bindings of the build (BUILD/bindings/python, $INDUCT_BUILD_DIR, or the
    `build` directory of the source tree), else the installed package."""
    for c in (build, os.environ.get("INDUCT_BUILD_DIR"), os.path.join(ROOT, "build")):
        if c and os.path.isdir(os.path.join(c, "bindings", "python", "induct")):
            sys.path.insert(0, os.path.abspath(os.path.join(c, "bindings", "python")))
            break
    import induct
    return induct


def write_atomic(path, text):
    """Write `text` to `path` atomically: a temporary file in the same directory, flushed
    and fsync'ed, renamed over `path` (a reader never sees half a file)."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_plan(path, plan):
    """study.json (indented by one space, as the runner has always written it)."""
    write_atomic(path, json.dumps(plan, indent=1) + "\n")
