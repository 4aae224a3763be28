"""`attn-kit dev new EXERCISE`: the skeleton of a new exercise, every file a real one has.

An exercise is data joined by ids (kit/dev/check.py lists the joins): prompts/exercises/<id>.toml
(statement, starter, hints, questions, scoring, bench workload), checks/<module>.py (its graded
suite), solutions/<id>/reference_numpy.py (the oracle) and solutions/<id>/bugs/<bug-id>.py (a
known bug: the reference with one marked change), and prompts/catalogue/<id>.toml, its own part
of the bug catalogue (its features, the bugs only it makes and their families, which the loaders
merge with the shared prompts/bugs.toml, families.toml and coverage.toml). The kit finds exercises
by listing those folders, so a new exercise touches no shared file: the README's tables and
docs/catalogue.md are written from the content by `attn-kit dev update`.

The skeleton is a working single-head attention, `softmax(q·kᵀ / sqrt(d)) @ v`, so it loads and
grades from the start; every line a contributor must write is marked PLACEHOLDER, and
`attn-kit dev check` rejects each one left, quoting what to fill in. This module writes files
and never imports the content it writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attn_kit.base.errors import UsageError
from attn_kit.base.paths import package_dir
from attn_kit.dev.check import ID, PLACEHOLDER
from attn_kit.load import catalog

DEFAULT_BUG = "mutates-input"  # the skeleton's bug: one every exercise can make (prompts/coverage.toml)


@dataclass(frozen=True)
class Skeleton:
    exercise_id: str
    files: tuple[Path, ...]  # what `new` wrote, TOML first


def module_name(exercise_id: str) -> str:
    """The checks module and main function of an exercise: its id with underscores."""
    return exercise_id.replace("-", "_")


def _refuse_bad_id(exercise_id: str, roots: dict[str, Path]) -> None:
    if not ID.fullmatch(exercise_id) or not exercise_id[0].isalpha():
        raise UsageError(f"'{exercise_id}' is not a valid exercise id: use lowercase words joined by dashes, starting with a letter.")
    taken = [
        p
        for p in (
            roots["prompts"] / "exercises" / f"{exercise_id}.toml",
            roots["solutions"] / exercise_id,
            roots["checks"] / f"{module_name(exercise_id)}.py",
            roots["prompts"] / catalog.OWN_DIR / f"{exercise_id}.toml",
        )
        if p.exists()
    ]
    if taken:
        raise UsageError(f"exercise '{exercise_id}' already exists ({taken[0]}): choose another id.")


def new(exercise_id: str, bug: str = DEFAULT_BUG, roots: dict[str, Path] | None = None) -> Skeleton:
    """Write the skeleton of `exercise_id` into the kit's content folders (or `roots`, for tests).

    Raises UsageError, writing nothing, when the id is invalid or taken or `bug` is no catalogue id."""
    roots = roots or {name: package_dir(name) for name in ("prompts", "solutions", "checks")}
    _refuse_bad_id(exercise_id, roots)
    known = catalog.load_catalogue_bugs(roots["prompts"])
    if bug not in known:
        raise UsageError(
            f"'{bug}' is not a bug id in the catalogue (prompts/bugs.toml, prompts/catalogue/): pass --bug with one of its "
            "ids, and add a bug of the new exercise's own to the prompts/catalogue/<id>.toml that `dev new` writes."
        )
    orders = [catalog.load_exercise(p).order for p in (roots["prompts"] / "exercises").glob("*.toml")]
    fields = {
        "id": exercise_id,
        "fn": module_name(exercise_id),
        "bug": bug,
        "todo": PLACEHOLDER,
        "order": max(orders, default=0) + 1,
        "concept": known[bug].concept,
        "properties": _property_lines(catalog.load_properties(roots["prompts"] / "properties.toml")),
    }
    folder = roots["solutions"] / exercise_id
    files = {
        roots["prompts"] / "exercises" / f"{exercise_id}.toml": EXERCISE_TOML,
        roots["prompts"] / catalog.OWN_DIR / f"{exercise_id}.toml": CATALOGUE_TOML,
        roots["checks"] / f"{module_name(exercise_id)}.py": CHECKS_PY,
        folder / "reference_numpy.py": REFERENCE_PY,
        folder / "bugs" / f"{bug}.py": BUG_PY,
    }
    for path, template in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**fields), encoding="utf-8")
    return Skeleton(exercise_id, tuple(files))


def _property_lines(properties: tuple[catalog.Property, ...]) -> str:
    """A placeholder cell per headline property (prompts/properties.toml) for the TOML's [properties]."""
    return "".join(
        f'{p.id} = {{na = "{PLACEHOLDER}: the checks stating {p.title} (checks = [...]), or why it cannot break here"}}\n'
        for p in properties
    )


# --- the templates (str.format: {{ }} are literal braces) ----------------------------------------

REFERENCE_BODY = """import numpy as np


def {fn}(q, k, v):
    q, k, v = (np.array(a, dtype=np.float64) for a in (q, k, v))    # T×d, S×d, S×d: copies
    scores = q @ k.T / np.sqrt(q.shape[-1])           # T×S
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ v    # T×d
"""

REFERENCE_PY = (
    '''# attn-kit: {id}
"""Reference solution for {id}: the oracle every check computes its expected values with.

{todo}: write the reference (it starts as single-head attention), plainly and in float64;
keep the function names the TOML's [[functions]] declare.
"""
'''
    + REFERENCE_BODY
)

BUG_PY = '''# attn-kit: {id}
"""Known bug {bug}: the reference with one change, marked on its line with BUG({bug}).

{todo}: make this file the reference with the one mistake of the bug it is named after
(rename it to another id of prompts/bugs.toml for another bug; add more files the same way).
"""
''' + REFERENCE_BODY.replace(
    "    q, k, v = (np.array(a, dtype=np.float64) for a in (q, k, v))    # T×d, S×d, S×d: copies\n"
    "    scores = q @ k.T / np.sqrt(q.shape[-1])           # T×S\n",
    "    q = np.asarray(q, dtype=np.float64)               # BUG({bug}): the caller's array, not a copy,\n"
    "    q *= 1.0 / np.sqrt(q.shape[-1])                   # scaled in place\n"
    "    k, v = (np.array(a, dtype=np.float64) for a in (k, v))\n"
    "    scores = q @ k.T                                  # T×S\n",
)

CHECKS_PY = '''"""The graded suite for {id}.

{todo}: say what the checks feed the candidate's function and where the expected values come
from (ctx.oracle is solutions/{id}/reference_numpy.py, run in the kit's process).

Each @check is one graded property: its id is the function name with dashes, its title the
docstring's first line; `catches` names the catalogue bugs it fails for (`attn-kit dev check`
requires each bug file's bug to be declared by some check). Any other module under checks/
shows a full suite.
"""

from __future__ import annotations

import numpy as np

from attn_kit.compare.registry import Suite

SUITE = Suite("{id}")
check = SUITE.check

FN = "{fn}"
AXES = ("query", "feature")
DIMS = "T×d"


@check(points=2, public=True, catches=("{bug}",))
def matches_the_reference(ctx):
    """Agrees with the reference on random inputs of width 4 and writes into none of them."""
    # {todo}: build your exercise's cases, one check per property (ctx.array checks a shape;
    # after=("...",) runs a check after another; every check must fail for some known bug).
    q, k, v = ctx.rng.normal(size=(3, 4)), ctx.rng.normal(size=(5, 4)), ctx.rng.normal(size=(5, 4))
    ctx.describe(T=3, S=5, d=4)
    ctx.expect_close(ctx.call(FN, q, k, v), ctx.oracle.{fn}(q, k, v), "output", AXES, DIMS)
    if ctx.last_call.outcome.mutated:
        changed = ", ".join(ctx.last_call.outcome.mutated)
        ctx.fail(f"`{{FN}}` changed its argument(s) {{changed}}; work on new arrays")


@SUITE.for_bench
def bench_inputs(rng, T, d):
    """`attn-kit bench`'s inputs at length T, with the [bench.dims] of the TOML."""
    return (rng.normal(size=(T, d)), rng.normal(size=(T, d)), rng.normal(size=(T, d))), {{}}
'''

CATALOGUE_TOML = """# {id}'s own part of the known-bug catalogue, written by `attn-kit dev new {id}`: what
# prompts/bugs.toml, families.toml and coverage.toml hold for the exercises they share, for this
# exercise alone. The loaders merge it after the shared files; `attn-kit dev check` rejects an id
# or a table defined in both. A bug several exercises make stays in prompts/bugs.toml.
format = 1

# Its features (prompts/coverage.toml's header says what each means): every shared bug whose
# features it has applies here and needs a bug file under solutions/{id}/bugs/.
features = []  # {todo}: list the features its candidate's code has, or leave it empty

# The bugs only this exercise makes, each with a bug file solutions/{id}/bugs/<id>.py that a check
# declares it catches; they apply to this exercise alone. One entry per bug, as in prompts/bugs.toml:
#
#   [[bugs]]
#   id = "{id}-..."
#   severity = "wrong"        # crash, wrong or edge: prompts/bugs.toml's header says which
#   title = "..."             # one line: the catalogue list of docs/catalogue.md shows it
#   symptom = "..."
#   fix = "..."
#   fix_short = "..."         # the first screen's phrase: one line, at most 48 characters, no final stop
#   test_idea = "..."
#   concept = "..."           # a concept of prompts/concepts.toml [concept_words], or a new one
#
# A new concept's words, and words for its own bugs, go here too, as in prompts/concepts.toml:
#
#   [concept_words]
#   my-concept = 'words|a question on it uses'
#
# More forms of a bug of its bug files, as in prompts/families.toml (whose header says how):
#
#   [[family]]
#   form = "<bug file name without .py>"
#   parameter = "..."
#   values = ["...", "..."]
#   edits = [["old text", "new text with {{choice}}"]]
"""

EXERCISE_TOML = '''# A new exercise, written by `attn-kit dev new {id}`. Every value marked as a placeholder is yours
# to write; `attn-kit dev check` names each one left. Compare with any prompts/exercises/*.toml.
format = 1
id = "{id}"
title = "{todo}: the title, as `attn-kit list` shows it"
summary = "{todo}: one sentence saying what the candidate writes."
builds = "{todo}: what the candidate builds, a line of the README's Exercises table"
proves = "{todo}: what the checks prove, a line of the README's follow-ups table (or delete this line)"
order = {order}                            # position in `attn-kit list`: unique among exercises
main = "{fn}"                # the function that identifies a candidate's file as this exercise
checks = "{fn}"              # the module checks/<checks>.py holding the graded suite
oracle = "reference_numpy.py"           # the reference the checks compute expected values with
minutes = 30                            # the mock screen's length

statement = \'\'\'
# {todo}: the title

{todo}: the task, the function's arguments and shapes, a worked example with its numbers
(a test must recompute every figure), and how the candidate is graded.
\'\'\'

starter = \'\'\'# attn-kit: {id}
"""{todo}: one line on the task. Run `attn-kit check THIS_FILE` to grade it."""
import numpy as np


def {fn}(q, k, v):
    """q T×d, k S×d, v S×d. Returns T×d."""
    raise NotImplementedError
\'\'\'

[[functions]]
name = "{fn}"
signature = "{fn}(q, k, v)"

# Hints climb from a question (no code at all in the first) to the concept, then near-code: one
# topic is three hints sharing a title, concept and dimension, with step question, concept, code.
# `checks` are the check ids each hint helps with; `dimension` is the rubric dimension it caps.
[[hints]]
title = "{todo}: the topic"
step = "question"
dimension = "correctness"
concept = "{concept}"
checks = ["matches-the-reference"]
text = \'\'\'
{todo}: which question, in prose and without code, points at the idea?
\'\'\'

[[hints]]
title = "{todo}: the topic"
step = "concept"
dimension = "correctness"
concept = "{concept}"
checks = ["matches-the-reference"]
text = \'\'\'
{todo}: the idea behind the exercise, stated.
\'\'\'

[[hints]]
title = "{todo}: the topic"
step = "code"
dimension = "correctness"
concept = "{concept}"
checks = ["matches-the-reference"]
text = \'\'\'
The computation, nearly in code:

    {todo}: a few lines of it

Still stuck after this one? `attn-kit check FILE --locate` searches for the smallest edit to your
own file that makes every failing check pass, and names its line.
\'\'\'

# Discussion questions for `attn-kit review` and the mock: key points, one or two required. A run
# that shows a bug rates the questions on the bug's concept: they must talk about it (dev check
# says with which words: prompts/concepts.toml).
[[questions]]
id = "{id}-why"
concept = "{concept}"
prompt = "{todo}: a question an interviewer asks about this exercise"
key_points = ["{todo}: a first key point", "{todo}: a second key point", "{todo}: a third key point"]
required = [0]

[[questions]]
id = "{id}-cost"
concept = "{concept}"
prompt = "{todo}: a question on its cost in time and memory"
key_points = ["{todo}: the time", "{todo}: the memory", "{todo}: what dominates"]
required = [0, 1]

[[questions]]
id = "{id}-edge"
concept = "{concept}"
prompt = "{todo}: a question on an edge case"
key_points = ["{todo}: the edge", "{todo}: what goes wrong", "{todo}: how to test it"]
required = [0]

# The mock's rubric: the six dimensions in this order, four distinct anchors each (score 1 to 4);
# correctness anchors start with the levels kit/grading/rubric.py scores automatically.
[[scoring]]
dimension = "correctness"
anchors = [
  "Does not run on ordinary inputs: {todo}.",
  "Runs, but wrong on ordinary inputs: {todo}.",
  "Right on ordinary inputs; one or two causes show only at an edge: {todo}.",
  "Every graded check passes: the diagnosis finds no cause.",
]

[[scoring]]
dimension = "robustness"
anchors = ["{todo}: robustness 1", "{todo}: robustness 2", "{todo}: robustness 3", "{todo}: robustness 4"]

[[scoring]]
dimension = "shapes"
anchors = ["{todo}: shapes 1", "{todo}: shapes 2", "{todo}: shapes 3", "{todo}: shapes 4"]

[[scoring]]
dimension = "tests"
anchors = ["{todo}: tests 1", "{todo}: tests 2", "{todo}: tests 3", "{todo}: tests 4"]

[[scoring]]
dimension = "systems"
anchors = ["{todo}: systems 1", "{todo}: systems 2", "{todo}: systems 3", "{todo}: systems 4"]

[[scoring]]
dimension = "communication"
anchors = ["{todo}: communication 1", "{todo}: communication 2", "{todo}: communication 3",
           "{todo}: communication 4"]

# What to watch for (mock --interviewer): what the interviewer looks at, and why.
[[rubric]]
watch_for = "{todo}: the first thing to watch the candidate do"
why = "{todo}: why it tells the levels apart"

[[rubric]]
watch_for = "{todo}: the second thing to watch"
why = "{todo}: why it matters"

[[rubric]]
watch_for = "{todo}: the third thing to watch"
why = "{todo}: why it matters"

# Where a candidate on track is during the mock screen (minutes rising within `minutes`).
[[checkpoints]]
minute = 10
expect = "{todo}: the plan and the shapes written down"

[[checkpoints]]
minute = 20
expect = "{todo}: the worked example passing"

[[seniority]]
level = "junior"
expect = "{todo}: what a junior candidate does"

[[seniority]]
level = "senior"
expect = "{todo}: what a senior candidate adds"

# `attn-kit bench`: how one call grows with T; checks/{fn}.py builds the inputs (@SUITE.for_bench).
[bench]
function = "{fn}"
setting = "T = queries = keys"
size = "T"
sizes = [16, 32, 64, 128, 256, 512, 1024]

[bench.dims]
d = 16

[bench.time]
exponent = 2.0
why = "{todo}: why the time grows this way"

[bench.memory]
exponent = 2.0
why = "{todo}: why the memory grows this way"

# The README's headline properties (prompts/properties.toml): for each, the checks that state it
# here, as {{checks = ["check-id"], note = "optional"}}, or {{na = "why the exercise cannot break it"}}.
# `attn-kit dev update` then writes the README's tables from this file.
[properties]
{properties}'''
