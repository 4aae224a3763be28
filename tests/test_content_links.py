"""A diagnosed bug leads somewhere that teaches it (issue 15).

Two links start from a bug's catalogue concept:
- review: `review.concept_questions(exercise, concept)` are the cards a run that shows the bug
  rates; every one of them must be about that concept, and one about the bug itself (the old
  single "masking" concept sent causal-off-by-one to the empty-rows question);
- hints: grading points a failing check diagnosed as the bug at the hint on the bug's concept that
  lists the check catching it most narrowly (`pipeline.hint_for_bug`), else at the check's own
  hint; for the bugs of prompts/concepts.toml's [hint_words], the topic reached must name the
  mistake at its nudging question and explain it at its concept step.

Both rules live in kit/dev/check.py (`attn-kit dev check`), their words in prompts/concepts.toml;
the tests below run them, and on a broken copy of the content see them fail."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from attn_kit.base.paths import bug_id_of, package_dir
from attn_kit.dev import check
from attn_kit.load import catalog
from attn_kit.practice import review

from conftest import need_extra
from helpers import available, bug_files

question_text = check.question_text


def review_link_problems(bugs: dict[str, catalog.Bug]) -> list[str]:
    """Every bug of every exercise reaches review questions on its concept, one of them on the bug:
    devcheck's rule (prompts/concepts.toml's words), run with the given catalogue."""
    content = check.Content.installed()
    content.bugs = bugs  # a cached property: the catalogue the rule reads
    return [str(p) for p in check.run(content, [check.bugs_reach_questions_that_teach_them]).problems]


# links the content is allowed to miss (none today; attention-backward now has a mask-polarity
# question, and its blocked-entries question is on the "blocking" concept and names the bugs)
PENDING: set[str] = set()


def test_each_bug_reaches_review_questions_that_teach_it():
    assert set(review_link_problems(catalog.bugs())) <= PENDING


def test_causal_off_by_one_no_longer_reaches_the_empty_rows_question():
    for exercise_id in ("mha-screen", "mha-masked-bias"):
        reached = {q.id for _, q in review.concept_questions(exercise_id, catalog.bugs()["causal-off-by-one"].concept)}
        assert reached and "blocked-rows" not in reached and "masked-query-output" not in reached, reached
        assert all(
            "causal" in question_text(q) for _, q in review.concept_questions(exercise_id, catalog.bugs()["causal-off-by-one"].concept)
        )


def test_the_review_links_can_fail():
    """The old catalogue, with one 'masking' concept for every mask bug, fails the check."""
    old = {
        bug_id: dataclasses.replace(bug, concept="masking") if bug.concept in ("blocking", "causal-mask", "masked-query-output") else bug
        for bug_id, bug in catalog.bugs().items()
    }
    problems = review_link_problems(old)
    assert any(p.startswith("mha-screen: causal-off-by-one (masking)") and "none of which mentions the bug" in p for p in problems), (
        problems
    )
    assert any(p.startswith("mha-screen: blocked-row-uniform (masking)") for p in problems), problems
    unknown = dict(catalog.bugs(), **{"no-scaling": dataclasses.replace(catalog.bugs()["no-scaling"], concept="vibes")})
    assert any("'vibes' has no entry" in p for p in review_link_problems(unknown))
    wrong = dict(catalog.bugs(), **{"causal-off-by-one": dataclasses.replace(catalog.bugs()["causal-off-by-one"], concept="blocking")})
    assert any("causal-off-by-one" in p and "none of which mentions the bug" in p for p in review_link_problems(wrong))


# --- hints that name the bug ---------------------------------------------------------------------
# The words each bug's hint must use are data (prompts/concepts.toml [hint_words]) and the rule is
# devcheck's (bugs_reach_hints_that_name_them): a new exercise or bug extends the data, not this file.

CONTENT = check.Content.installed()
HINT_WORDS = check.hint_words(CONTENT)
LADDERED = [e.id for e in catalog.exercises().values() if check.climbs_in_steps(e)]


def hint_problems(content: check.Content) -> list[str]:
    return [str(p) for p in check.run(content, [check.bugs_reach_hints_that_name_them]).problems]


@pytest.mark.parametrize("exercise_id", LADDERED)
def test_the_newer_bugs_reach_a_hint_that_names_them(exercise_id):
    exercise = catalog.exercise(exercise_id)
    if not available(exercise):
        need_extra(exercise)
    assert check.hint_link_problems(CONTENT, exercise) == []
    assert {"mha-screen", "gqa", "mha-masked-bias"} <= set(LADDERED) and len(HINT_WORDS) >= 8


def test_the_hint_links_can_fail(tmp_path):
    content = check.Content.installed()
    exercise = content.exercises["mha-screen"]
    stripped = tuple(dataclasses.replace(h, text=h.text.replace("0/1", "small").replace("0s and 1s", "numbers")) for h in exercise.hints)
    content.exercises["mha-screen"] = dataclasses.replace(exercise, hints=stripped)
    assert [p for p in hint_problems(content) if p.startswith("prompts/exercises/mha-screen.toml")] == [
        "prompts/exercises/mha-screen.toml: mask-not-boolean reaches 'Which index does each "
        "mask test?', whose question and concept do not name it (prompts/concepts.toml [hint_words]: "
        "['0s and 1s', '0/1'])"
    ]
    prompts = tmp_path / "prompts"
    shutil.copytree(package_dir("prompts"), prompts)
    words = prompts / "concepts.toml"
    words.write_text(
        words.read_text(encoding="utf-8").replace("mask-not-boolean = ['0s and 1s', '0/1']", "mask-not-bool = ['0s and (1s', '0/1']"),
        encoding="utf-8",
    )
    found = hint_problems(check.Content(prompts, package_dir("solutions")))
    assert found[0] == "prompts/concepts.toml: [hint_words] mask-not-bool is not a bug of prompts/bugs.toml"
    assert (
        found[1].startswith("prompts/concepts.toml: [hint_words] mask-not-bool: '0s and (1s' is not a regular expression (missing )")
        and len(found) == 2
    ), found


def graded_bug_points_at_its_hint(exercise_id: str, path, report) -> None:
    """End to end, on a grading of a bug file: when the bug has [hint_words], every check the
    diagnosis attributes to it carries a hint, a question, and one of them names the bug.
    test_catalogue.py calls this on its one grading of each bug file (no second grading here)."""
    bug_id = bug_id_of(path)
    if exercise_id not in LADDERED or bug_id not in HINT_WORDS:
        return
    exercise = catalog.exercise(exercise_id)
    mine = [r for r in report.results if r.bug == bug_id]
    if mine:  # named: one hint for the one mistake
        levels = {r.hint for r in mine}
        assert len(levels) == 1 and None not in levels, (path.name, {r.id: r.hint for r in mine})
        [level] = levels
        assert exercise.hints[level - 1].step == "question", path.name
        assert check.hint_teaches(exercise, level, HINT_WORDS[bug_id]), path.name
    else:  # not named (its calls raised): the checks' own hints
        levels = {r.hint for r in report.results if r.status in ("fail", "error") and r.hint}
        assert any(check.hint_teaches(exercise, n, HINT_WORDS[bug_id]) for n in levels), (path.name, levels)


def test_the_graded_link_check_covers_newer_bug_files():
    """graded_bug_points_at_its_hint has bug files to look at in every laddered exercise that has
    a bug with [hint_words] (else test_catalogue's call of it would check nothing)."""
    for exercise_id in LADDERED:
        exercise = catalog.exercise(exercise_id)
        if set(HINT_WORDS) & set(exercise.bug_ids):
            assert any(bug_id_of(p) in HINT_WORDS for p in bug_files(exercise_id)), exercise_id
