#!/usr/bin/python3
"""Write the learner's notebook from the solution notebook (the one source of both).

    make_exercises.py [SOLUTIONS [EXERCISES]]      write EXERCISES
    make_exercises.py --check [SOLUTIONS [EXERCISES]]
                                                   exit 1 if EXERCISES is not what
                                                   SOLUTIONS gives (the test does this)

Defaults: induction_heads_solutions.ipynb -> induction_heads.ipynb beside this script.

In a code cell of the solutions, a solution is the lines between a line `# SOLUTION` and a
line `# END SOLUTION` at the same indentation. In the learner's notebook the region keeps
its comment lines (the hints: `# HINT: ...`) and its code is replaced by
`raise NotImplementedError("exercise: write this part")` at the region's indentation.
Everything else is copied: markdown cells, the checks after each exercise (they test the
learner's code), cell ids and the notebook's metadata; outputs and execution counts are
cleared in both. A marker that is not closed, closed twice, nested, or closed at another
indentation is an error naming the cell and the line.

Needs only the standard library and nbformat (Debian's python3-nbformat).
"""
import argparse
import copy
import os
import sys

import nbformat

BEGIN, END = "# SOLUTION", "# END SOLUTION"
STUB = 'raise NotImplementedError("exercise: write this part")'
HERE = os.path.dirname(os.path.abspath(__file__))


class MarkerError(ValueError):
    """A solution marker that does not pair up."""


def strip_solutions(source, where="cell"):
    """The code of one cell with every solution region replaced by its comments and a
    stub; returns (new source, number of regions)."""
    out, region, n = [], None, 0
    for i, line in enumerate(source.split("\n"), 1):
        text = line.strip()
        indent = line[:len(line) - len(line.lstrip())]
        if text == BEGIN:
            if region is not None:
                raise MarkerError(f"{where}, line {i}: {BEGIN} inside the region opened on "
                                  f"line {region[0]}")
            region = (i, indent)
            continue
        if text == END:
            if region is None:
                raise MarkerError(f"{where}, line {i}: {END} without {BEGIN}")
            if indent != region[1]:
                raise MarkerError(f"{where}, line {i}: {END} at another indentation than "
                                  f"the {BEGIN} of line {region[0]}")
            out.append(region[1] + STUB)
            region, n = None, n + 1
            continue
        if region is None:
            out.append(line)
        elif text.startswith("#"):
            out.append(line)          # a hint stays
    if region is not None:
        raise MarkerError(f"{where}, line {region[0]}: {BEGIN} never closed")
    return "\n".join(out), n


def clear(cell):
    if cell.cell_type == "code":
        cell.outputs = []
        cell.execution_count = None
    return cell


def exercises(solutions):
    """The learner's notebook (a NotebookNode) from the solutions' NotebookNode; also
    returns the number of exercises' regions."""
    nb = copy.deepcopy(solutions)
    total = 0
    for k, cell in enumerate(nb.cells):
        clear(cell)
        if cell.cell_type != "code":
            continue
        cell.source, n = strip_solutions(cell.source, f"cell {k} ({cell.get('id', '?')})")
        total += n
    return nb, total


def render(nb):
    """The notebook as the text nbformat writes (the committed files' form)."""
    return nbformat.writes(nb) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true",
                   help="compare with EXERCISES instead of writing it; exit 1 if they differ")
    p.add_argument("solutions", nargs="?",
                   default=os.path.join(HERE, "induction_heads_solutions.ipynb"))
    p.add_argument("exercises", nargs="?", default=os.path.join(HERE, "induction_heads.ipynb"))
    a = p.parse_args(argv)
    sol = nbformat.read(a.solutions, as_version=4)
    nbformat.validate(sol)
    try:
        nb, n = exercises(sol)
    except MarkerError as e:
        print(f"{a.solutions}: {e}", file=sys.stderr)
        return 2
    text = render(nb)
    if a.check:
        try:
            with open(a.exercises, encoding="utf-8") as f:
                current = f.read()
        except OSError as e:
            print(f"{a.exercises}: {e}", file=sys.stderr)
            return 1
        if current != text:
            print(f"{a.exercises} is not what {a.solutions} gives: run "
                  f"{os.path.relpath(__file__)} to write it again", file=sys.stderr)
            return 1
        print(f"{a.exercises}: up to date ({n} exercise regions)")
        return 0
    tmp = a.exercises + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, a.exercises)
    print(f"wrote {a.exercises} ({n} exercise regions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
