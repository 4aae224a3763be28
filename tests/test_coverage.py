"""The exercise × known-bug table is complete, from data: prompts/coverage.toml says which
features each exercise has and which features each mistake needs. For every (exercise, bug id)
pair that gives, there is a bug file, a check declaring that it catches the id, and the file
fails and is named first by the diagnosis. Also: every exercise's headline properties (the README's
tables) are checks that exist.

That every bug file fails, is caught by a declared check and is named first is asserted in
test_catalogue.py, which grades every bug file (this table's are a subset); this module holds the
data checks, which are fast. benchmarks/diagnosis_rates.py measures naming over many more seeds.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from attn_kit.base.paths import bug_files
from attn_kit.dev import check
from attn_kit.grading import pipeline
from attn_kit.load import applicability, catalog

from conftest import need_extra

KNOWN_GAPS = tomllib.loads((Path(__file__).parent / "known_gaps.toml").read_text(encoding="utf-8"))
EXERCISES = list(catalog.exercises().values())


def _available(exercise) -> bool:
    try:
        pipeline.require(exercise)
    except Exception:  # noqa: BLE001 - DependencyMissing: CI installs torch and runs them
        return False
    return True


def test_every_catalogue_id_says_what_it_needs():
    undeclared = sorted(set(catalog.bugs()) - set(applicability.needs()))
    assert not undeclared, f"add these ids to [needs] in prompts/coverage.toml: {undeclared}"


def test_features_name_real_exercises_and_needs_are_met_somewhere():
    assert set(applicability.features()) <= set(catalog.exercises()), "a [features] entry names no exercise"
    offered = {f for fs in applicability.features().values() for f in fs} | set(catalog.exercises())
    for bug_id, need in applicability.needs().items():
        if bug_id in catalog.bugs() and need:
            assert set(need) & offered, f"{bug_id} needs {need}, which no exercise declares"


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_table_is_complete(exercise):
    """Every id that applies has a bug file; every bug file is for an id that applies: devcheck's
    bug_files_match_the_coverage_table (tests/test_devcheck.py breaks it), agreeing with coverage.py."""
    content = check.Content.installed()
    assert check.applicable_bugs(content, exercise.id) == set(applicability.applies(exercise.id)) & set(catalog.bugs())
    content.exercises = {exercise.id: exercise}
    result = check.run(content, [check.bug_files_match_the_coverage_table])
    assert result.ok, "\n".join(map(str, result.problems))


@pytest.mark.parametrize("exercise", [e for e in EXERCISES if _available(e)], ids=lambda e: e.id)
def test_every_applicable_id_has_a_catching_check(exercise):
    declared = {b for c in pipeline.suite_for(exercise).checks for b in c.catches}
    missing = set(applicability.applies(exercise.id)) & set(catalog.bugs()) - declared
    assert not missing, f"{exercise.id}: no check declares catches= for {sorted(missing)}"


# Every file in the table fails, a failing check declares it in catches=, and it is named first:
# test_catalogue.py's test_every_bug_variant_fails_and_is_diagnosed_as_itself asserts all three for
# every bug file (a superset of the table's), on seed 1 and a seed hypothesis draws.


def test_known_gaps_name_existing_files():
    for key in KNOWN_GAPS:
        exercise_id, name = key.split("/", 1)
        assert any(p.name == name for p in bug_files(exercise_id)), key


# --- the headline properties: every exercise names checks that exist ------------------------


def test_every_exercise_states_the_headline_properties_with_real_checks():
    """devcheck's rule (exercises_fill_their_readme_cells): a cell per property in every exercise's
    TOML, naming checks of its suite or saying n/a; the README's tables are written from these
    (`dev update`); tests/test_devcheck.py shows the rule failing on a broken copy."""
    content = check.Content.installed()
    assert len(content.properties) >= 4
    result = check.run(content, [check.exercises_fill_their_readme_cells])
    assert result.ok, "\n".join(map(str, result.problems))


# --- bk provably changes nothing, so no check may require it ------------------------------------

BK_DROPPED = {
    "mha-screen": ('"Wk", "bk"', '"Wk", None'),
    "gqa": ('"Wk", "bk"', '"Wk", None'),
    "cross-attention": ('"Wk", "bk"', '"Wk", None'),
    "kv-cache": ('"Wk", "bk"', '"Wk", None'),
    "mha-masked-bias": ('"w_k", "b_k"', '"w_k", None'),
}


@pytest.mark.parametrize("exercise_id", [pytest.param(e, marks=[pytest.mark.slow] if e == "mha-masked-bias" else []) for e in BK_DROPPED])
def test_dropping_bk_passes_every_check(exercise_id, tmp_path):
    """q·bk is the same for every key of a query, and softmax ignores a constant: a solution that
    never adds bk is correct, so every check must pass it (issue 15, item 4)."""
    exercise = catalog.exercise(exercise_id)
    if not _available(exercise):
        need_extra(exercise)
    from attn_kit.base.paths import solutions_dir

    old, new = BK_DROPPED[exercise_id]
    text = (solutions_dir(exercise_id) / exercise.oracle).read_text()
    assert text.count(old) == 1
    path = tmp_path / "no_bk.py"
    path.write_text(text.replace(old, new))
    report = pipeline.grade(path, pipeline.Options(exercise=exercise_id, seed=5, timeout=10))
    failing = [(r.id, r.message) for r in report.results if r.status not in ("pass", "skip")]
    assert not failing, failing


# The isolation test (a check named after one property passes a file that gets that property right)
# lives in test_catalogue.py, which grades the same bug files: one grading each per test run.
