"""The exercise × known-bug table is complete, from data: prompts/coverage.toml says which
features each exercise has and which features each mistake needs. For every (exercise, bug id)
pair that gives, there is a bug file, a check declaring that it catches the id, and the file
fails and is named first by the diagnosis. Also: the headline properties of the README's table
are checks that exist.

Graded in-process through the session cache (helpers.graded) on test_catalogue.py's seeds 1 and
7, so each (file, seed) is graded once for both modules; marked slow, since every file is graded
with its diagnosis. The data checks are fast. benchmarks/diagnosis_rates.py measures naming over
many more seeds.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from attn_kit import catalog, coverage, grading
from attn_kit.paths import bug_files, bug_id_of

import helpers

# with pytest-xdist, these modules run in one worker: they read the same cached gradings (helpers.graded)
pytestmark = pytest.mark.xdist_group("graded-bug-files")

SEEDS = (1, 7)               # test_catalogue.py's seeds: the reports come from the session cache (helpers.graded)
KNOWN_GAPS = tomllib.loads((Path(__file__).parent / "known_gaps.toml").read_text(encoding="utf-8"))
README = Path(__file__).resolve().parents[1] / "README.md"
EXERCISES = list(catalog.exercises().values())


def _available(exercise) -> bool:
    try:
        grading.require(exercise)
    except Exception:  # noqa: BLE001 - DependencyMissing: CI installs torch and runs them
        return False
    return True


def _files_in_table():
    for exercise in EXERCISES:
        applies = set(coverage.applies(exercise.id))
        for path in bug_files(exercise.id):
            if bug_id_of(path) in applies:
                yield pytest.param(exercise, path, id=f"{exercise.id}/{path.name}")


def graded(path: Path, exercise_id: str, seed: int):
    report = helpers.graded(path, seed)          # as test_catalogue.py asks: one grading per (file, seed)
    assert report.exercise == exercise_id, f"{path.name} is graded as {report.exercise}"
    return report


def test_every_catalogue_id_says_what_it_needs():
    undeclared = sorted(set(catalog.bugs()) - set(coverage.needs()))
    assert not undeclared, f"add these ids to [needs] in prompts/coverage.toml: {undeclared}"


def test_features_name_real_exercises_and_needs_are_met_somewhere():
    assert set(coverage.features()) <= set(catalog.exercises()), "a [features] entry names no exercise"
    offered = {f for fs in coverage.features().values() for f in fs} | set(catalog.exercises())
    for bug_id, need in coverage.needs().items():
        if bug_id in catalog.bugs() and need:
            assert set(need) & offered, f"{bug_id} needs {need}, which no exercise declares"


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_table_is_complete(exercise):
    """Every id that applies has a bug file; every bug file is for an id that applies."""
    applies = set(coverage.applies(exercise.id)) & set(catalog.bugs())
    have = {bug_id_of(p) for p in bug_files(exercise.id)}
    assert not applies - have, f"{exercise.id}: no bug file for {sorted(applies - have)}"
    assert not have - applies, (f"{exercise.id}: bug files for {sorted(have - applies)}, which prompts/coverage.toml "
                                "says cannot be made here")


@pytest.mark.parametrize("exercise", [e for e in EXERCISES if _available(e)], ids=lambda e: e.id)
def test_every_applicable_id_has_a_catching_check(exercise):
    declared = {b for c in grading.suite_for(exercise).checks for b in c.catches}
    missing = set(coverage.applies(exercise.id)) & set(catalog.bugs()) - declared
    assert not missing, f"{exercise.id}: no check declares catches= for {sorted(missing)}"


@pytest.mark.slow          # about 160 files, each graded with its diagnosis: minutes, not seconds
@pytest.mark.parametrize("exercise, path", list(_files_in_table()))
def test_bug_file_fails_and_is_named_first(exercise, path):
    if not _available(exercise):
        pytest.skip(f"{exercise.id} needs {exercise.needs}")
    expected = bug_id_of(path)
    gap = KNOWN_GAPS.get(f"{exercise.id}/{path.name}")
    for seed in SEEDS:
        report = graded(path, exercise.id, seed)
        failing = [r for r in report.results if r.status in ("fail", "error")]
        assert failing, f"seed {seed}: {path.name} passes every check"
        catching = {b for r in failing for b in r.catches}
        assert expected in catching, (f"seed {seed}: none of the failing checks {[r.id for r in failing]} "
                                      f"declares catches={expected!r}")
    for seed in SEEDS:
        found = [d.bug for d in graded(path, exercise.id, seed).diagnosis]
        if gap and found[:1] != [expected]:
            pytest.xfail(f"known gap of the current diagnosis engine: {gap}")
        assert found[:1] == [expected], f"seed {seed}: diagnosed {found}, expected {expected} first"


def test_known_gaps_name_existing_files():
    for key in KNOWN_GAPS:
        exercise_id, name = key.split("/", 1)
        assert any(p.name == name for p in bug_files(exercise_id)), key


# --- the headline properties: the README's table names checks that exist ----------------------

def _readme_property_table() -> dict[str, dict[str, str]]:
    """{property: {exercise: cell}} from the README's 'Headline properties by exercise' tables
    (every table of that section: the first six exercises, then the four later ones)."""
    section = README.read_text(encoding="utf-8").split("### Headline properties by exercise", 1)[1]
    section = section.split("\n#", 1)[0]
    tables, rows = [], []
    for line in section.splitlines() + [""]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            tables.append(rows)
            rows = []
    table: dict[str, dict[str, str]] = {}
    for rows in tables:
        header = [c.strip() for c in rows[0].strip("|").split("|")]
        for line in rows[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            table.setdefault(cells[0], {}).update(zip(header[1:], cells[1:]))
    return table


def test_readme_property_table_names_real_checks():
    table = _readme_property_table()
    assert len(table) >= 4
    for prop, cells in table.items():
        assert set(cells) == set(catalog.exercises()), f"{prop}: a column for every exercise"
    for prop, cells in table.items():
        for exercise_id, cell in cells.items():
            exercise = catalog.exercise(exercise_id)
            ids = re.findall(r"`([a-z0-9-]+)`", cell)
            assert ids or cell.startswith("n/a"), f"{prop} / {exercise_id}: name the check, or say n/a and why"
            if ids and _available(exercise):
                known = {c.id for c in grading.suite_for(exercise).checks}
                assert set(ids) <= known, f"{prop} / {exercise_id}: no check {set(ids) - known}"


# --- bk provably changes nothing, so no check may require it ------------------------------------

BK_DROPPED = {"mha-screen": ('"Wk", "bk"', '"Wk", None'), "gqa": ('"Wk", "bk"', '"Wk", None'),
              "cross-attention": ('"Wk", "bk"', '"Wk", None'), "kv-cache": ('"Wk", "bk"', '"Wk", None'),
              "mha-masked-bias": ('"w_k", "b_k"', '"w_k", None')}


@pytest.mark.parametrize("exercise_id", [pytest.param(e, marks=[pytest.mark.slow] if e == "mha-masked-bias" else [])
                                         for e in BK_DROPPED])
def test_dropping_bk_passes_every_check(exercise_id, tmp_path):
    """q·bk is the same for every key of a query, and softmax ignores a constant: a solution that
    never adds bk is correct, so every check must pass it (issue 15, item 4)."""
    exercise = catalog.exercise(exercise_id)
    if not _available(exercise):
        pytest.skip(f"{exercise_id} needs {exercise.needs}")
    from attn_kit.paths import solutions_dir
    old, new = BK_DROPPED[exercise_id]
    text = (solutions_dir(exercise_id) / exercise.oracle).read_text()
    assert text.count(old) == 1
    path = tmp_path / "no_bk.py"
    path.write_text(text.replace(old, new))
    report = grading.grade(path, grading.Options(exercise=exercise_id, seed=5, timeout=10))
    failing = [(r.id, r.message) for r in report.results if r.status not in ("pass", "skip")]
    assert not failing, failing


# --- a check named after one property passes a file that gets that property right ---------------

MASK_BUGS = {"blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks", "fill-value-too-weak", "mask-inverted",
             "max-over-blocked", "causal-off-by-one", "padding-masks-queries", "mask-not-boolean",
             "b-o-not-suppressed", "b-o-dropped-for-partial", "causal-offset-ignored"}
BIAS_BUGS = {"biases-ignored", "bias-scaled"}
ISOLATED = {      # check id -> bugs it must not fail for: its cases have no masks / no biases
    "heads-use-contiguous-columns": MASK_BUGS | BIAS_BUGS, "scores-scaled-by-head-width": MASK_BUGS | BIAS_BUGS,
    "single-head-plain-formula": MASK_BUGS | BIAS_BUGS, "scores-scaled-by-key-width": MASK_BUGS | BIAS_BUGS,
    "heads-split-contiguously": MASK_BUGS | BIAS_BUGS, "value-width-differs-from-key-width": MASK_BUGS | BIAS_BUGS,
    "lengths-differ-both-ways": MASK_BUGS | BIAS_BUGS, "biases-are-applied": MASK_BUGS,
}


FAST_ISOLATION = {"biases-ignored.py", "blocked-row-nan.py", "mask-inverted.py"}    # the rest: slow
# inverting the combined mask (`~allowed`) also inverts "no mask at all": every key is blocked, so
# no unmasked case can pass it (the per-mask and key-padding forms do pass)
NOT_ISOLABLE = {"mha-masked-bias/mask-inverted.py"}


def _isolation_cases():
    for exercise in EXERCISES:
        for path in bug_files(exercise.id):
            if bug_id_of(path) in MASK_BUGS | BIAS_BUGS and f"{exercise.id}/{path.name}" not in NOT_ISOLABLE:
                quick = exercise.id == "mha-screen" and path.name in FAST_ISOLATION
                marks = [] if quick else [pytest.mark.slow]
                yield pytest.param(exercise, path, marks=marks, id=f"{exercise.id}/{path.name}")


@pytest.mark.parametrize("exercise, path", list(_isolation_cases()))
def test_property_checks_pass_files_that_get_their_property_right(exercise, path):
    """A mask or bias mistake must not fail the checks about head split, scaling or biases whose
    cases carry no masks (and no biases): those files get those properties right."""
    if not _available(exercise):
        pytest.skip(f"{exercise.id} needs {exercise.needs}")
    report = graded(path, exercise.id, SEEDS[0])
    wrong = [(r.id, r.message) for r in report.results
             if r.id in ISOLATED and bug_id_of(path) in ISOLATED[r.id] and r.status != "pass"]
    assert not wrong, wrong
