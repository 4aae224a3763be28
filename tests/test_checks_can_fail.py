"""Every graded check can fail: for each exercise, each check fails (status `fail`, a behavioural
verdict, not an error from a stub) for at least one known-bug implementation or one file of the
pathological corpus listed in tests/corpus/can_fail.toml. Graded in-process with seed 1 through the
session cache (helpers.graded), so the known-bug reports are shared with test_catalogue.py; the
CLI path is covered by test_catalogue.py's smoke tests and test_sandbox_corpus.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from attn_kit import catalog, grading

from helpers import CORPUS, bug_files, corpus_data, graded, graded_exercises

# with pytest-xdist, these modules run in one worker: they read the same cached gradings (helpers.graded)
pytestmark = pytest.mark.xdist_group("graded-bug-files")

EXTRA: dict[str, list[str]] = corpus_data("can_fail.toml")


@pytest.mark.slow
@pytest.mark.parametrize("exercise", graded_exercises(), ids=lambda e: e.id)
def test_every_check_fails_for_some_known_mistake(exercise):
    files = [CORPUS / name for name in EXTRA.get(exercise.id, [])] + list(bug_files(exercise.id))
    suite = grading.suite_for(exercise)
    failed_by: dict[str, list[str]] = {}
    for path in files:
        report = graded(path, seed=1)
        assert report.exercise == exercise.id, f"{Path(path).name} was graded as {report.exercise}"
        for result in report.results:
            if result.status == "fail":
                failed_by.setdefault(result.id, []).append(Path(path).name)
        if all(c.id in failed_by for c in suite.checks):
            break                   # every check has failed for something: the rest adds nothing
    never = [c.id for c in suite.checks if c.id not in failed_by]
    assert not never, f"no known mistake makes these checks fail: {never}"


def test_every_exercise_has_its_extra_corpus():
    assert set(EXTRA) == set(catalog.exercises())
    for names in EXTRA.values():
        for name in names:
            assert (CORPUS / name).exists(), name
