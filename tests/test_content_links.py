"""A diagnosed bug leads somewhere that teaches it (issue 15).

Two links start from a bug's catalogue concept:
- review: `review.concept_questions(exercise, concept)` are the cards a run that shows the bug
  rates; every one of them must be about that concept, and one about the bug itself (the old
  single "masking" concept sent causal-off-by-one to the empty-rows question);
- hints: grading points a failing check diagnosed as the bug at `hint_for_concept`, else at the
  check's own hint; for the newer catalogue bugs, the topic reached must name the mistake at its
  nudging question and explain it at its concept step.

The review rule lives in kit/dev/check.py (`attn-kit dev check`); the tests below run it, and the
hint checks, on a broken copy of the catalogue and see them fail."""

from __future__ import annotations

import dataclasses
import re

import pytest

from attn_kit.base.paths import bug_id_of
from attn_kit.dev import check
from attn_kit.grading import pipeline
from attn_kit.load import catalog
from attn_kit.practice import review

from conftest import need_extra
from helpers import available, bug_files


def flat(text: str) -> str:
    return " ".join(text.split())


question_text = check.question_text


def review_link_problems(bugs: dict[str, catalog.Bug]) -> list[str]:
    """Every bug of every exercise reaches review questions on its concept, one of them on the bug:
    devcheck's rule (prompts/concepts.toml's words), run with the given catalogue."""
    content = check.Content.installed()
    content.bugs = bugs              # a cached property: the catalogue the rule reads
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
        assert all("causal" in question_text(q) for _, q in review.concept_questions(
            exercise_id, catalog.bugs()["causal-off-by-one"].concept))


def test_the_review_links_can_fail():
    """The old catalogue, with one 'masking' concept for every mask bug, fails the check."""
    old = {bug_id: dataclasses.replace(bug, concept="masking") if bug.concept in
           ("blocking", "causal-mask", "masked-query-output") else bug for bug_id, bug in catalog.bugs().items()}
    problems = review_link_problems(old)
    assert any(p.startswith("mha-screen: causal-off-by-one (masking)") and "none of which mentions the bug" in p
               for p in problems), problems
    assert any(p.startswith("mha-screen: blocked-row-uniform (masking)") for p in problems), problems
    unknown = dict(catalog.bugs(), **{"no-scaling": dataclasses.replace(catalog.bugs()["no-scaling"], concept="vibes")})
    assert any("'vibes' has no entry" in p for p in review_link_problems(unknown))
    wrong = dict(catalog.bugs(), **{"causal-off-by-one": dataclasses.replace(catalog.bugs()["causal-off-by-one"],
                                                                             concept="blocking")})
    assert any("causal-off-by-one" in p and "none of which mentions the bug" in p for p in review_link_problems(wrong))


# --- hints for the newer catalogue bugs ---------------------------------------------------------

NEWER = ("additive-mask-leaks", "fill-value-too-weak", "weights-transposed", "double-scaling", "softmax-across-batch",
         "transpose-reverses-all-axes", "online-softmax-acc-not-rescaled", "mask-not-boolean")
# (words of the nudging question, words of the concept step) that name each mistake
HINT_WORDS = {
    "additive-mask-leaks": (r"\badding\b", r"\badd(ing|ed)?\b.*(large negative|-1e9)|shifts? (every|all|the whole)"),
    "fill-value-too-weak": (r"minus ten|exactly nothing|weigh exactly", r"-10|weak fill|finite fill"),
    "weights-transposed": (r"which way round|\[d_in\]\[d_out\]", r"transpose"),
    "double-scaling": (r"how many times|second scaling", r"\bonce\b"),
    "softmax-across-batch": (r"sequences?|batch", r"sequence|batch"),
    "transpose-reverses-all-axes": (r"two (of the four )?axes", r"last two axes"),
    "online-softmax-acc-not-rescaled": (r"accumulated output", r"l but not acc"),
    "mask-not-boolean": (r"0s and 1s", r"0/1"),
}
LADDERED = ("mha-screen", "kv-cache", "gqa", "tiled-softmax", "cross-attention", "mha-masked-bias")


def reached_hint(exercise: catalog.Exercise, suite, bug_id: str) -> int | None:
    """The hint level every failing check diagnosed as bug_id points at, as grading computes it."""
    return pipeline.hint_for_bug(exercise, suite.checks, bug_id)


def topic_teaches(exercise: catalog.Exercise, level: int, bug_id: str) -> bool:
    """The topic of hint `level` names the bug in its question and explains it in its concept step."""
    title = exercise.hints[level - 1].title
    ladder = {h.step: flat(h.text) for h in exercise.hints if h.title == title}
    question, concept = HINT_WORDS[bug_id]
    return bool(re.search(question, ladder.get("question", ""), re.IGNORECASE | re.DOTALL) and
                re.search(concept, ladder.get("concept", ""), re.IGNORECASE | re.DOTALL))


def hint_link_problems(exercise: catalog.Exercise) -> list[str]:
    suite = pipeline.suite_for(exercise)
    problems = []
    for bug_id in NEWER:
        if bug_id not in exercise.bug_ids:
            continue
        level = reached_hint(exercise, suite, bug_id)
        if level is None:
            problems.append(f"{exercise.id}: {bug_id} reaches no hint")
        elif exercise.hints[level - 1].step != "question":
            problems.append(f"{exercise.id}: {bug_id} reaches hint {level}, not the gentle question first")
        elif not topic_teaches(exercise, level, bug_id):
            problems.append(f"{exercise.id}: {bug_id} reaches '{exercise.hints[level - 1].title}', whose question "
                            "and concept do not name it")
    return problems


@pytest.mark.parametrize("exercise_id", LADDERED)
def test_the_newer_bugs_reach_a_hint_that_names_them(exercise_id):
    exercise = catalog.exercise(exercise_id)
    if not available(exercise):
        need_extra(exercise)
    assert hint_link_problems(exercise) == []


def test_the_hint_links_can_fail():
    exercise = catalog.exercise("mha-screen")
    stripped = tuple(dataclasses.replace(h, text=h.text.replace("0/1", "small").replace("0s and 1s", "numbers"))
                     for h in exercise.hints)
    assert any("mask-not-boolean" in p for p in hint_link_problems(dataclasses.replace(exercise, hints=stripped)))


def graded_bug_points_at_its_hint(exercise_id: str, path, report) -> None:
    """End to end, on a grading of a bug file: when the bug is one of the NEWER ones, every check
    the diagnosis attributes to it carries a hint, a question, and one of them names the bug.
    test_catalogue.py calls this on its one grading of each bug file (no second grading here)."""
    bug_id = bug_id_of(path)
    if exercise_id not in LADDERED or bug_id not in NEWER:
        return
    exercise = catalog.exercise(exercise_id)
    mine = [r for r in report.results if r.bug == bug_id]
    if mine:                                   # named: one hint for the one mistake
        levels = {r.hint for r in mine}
        assert len(levels) == 1 and None not in levels, (path.name, {r.id: r.hint for r in mine})
        [level] = levels
        assert exercise.hints[level - 1].step == "question" and topic_teaches(exercise, level, bug_id), path.name
    else:                                      # not named (its calls raised): the checks' own hints
        levels = {r.hint for r in report.results if r.status in ("fail", "error") and r.hint}
        assert any(topic_teaches(exercise, n, bug_id) for n in levels), (path.name, levels)


def test_the_graded_link_check_covers_newer_bug_files():
    """graded_bug_points_at_its_hint has bug files to look at in every laddered exercise that has
    a NEWER bug (else test_catalogue's call of it would check nothing)."""
    for exercise_id in LADDERED:
        exercise = catalog.exercise(exercise_id)
        if set(NEWER) & set(exercise.bug_ids):
            assert any(bug_id_of(p) in NEWER for p in bug_files(exercise_id)), exercise_id
