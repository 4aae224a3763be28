"""The review rules, through a realistic week on a frozen clock (ATTN_KIT_NOW): 30 checks, 2 mocks
and 5 discuss sessions, counting the kit's automatic ratings and the user's own, and the due queue.

Rules (README, "Reviewing"): only a full graded run whose failure is a *diagnosed* bug rates, and
only that bug's concept, as Again; only cards the user has reviewed; at most one automatic rating
per card in 24 hours; stubs, load errors and timeouts never rate; "due" counts are true when shown.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone

import pytest

from attn_kit.base.paths import solutions_dir
from attn_kit.grading import pipeline
from attn_kit.load import catalog
from attn_kit.practice import progress, review
from attn_kit.practice.store import iso, open_store

from conftest import CORPUS, attn_kit

MHA = catalog.exercise("mha-screen")
START = datetime(2026, 11, 2, 9, 0, tzinfo=timezone.utc)  # a Monday


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Three graded runs, graded once: the untouched starter, a no-scaling attempt, a pass."""
    folder = tmp_path_factory.mktemp("week")
    (folder / "starter.py").write_text(MHA.starter, encoding="utf-8")
    shutil.copy(solutions_dir("mha-screen") / "bugs" / "no-scaling.py", folder / "attempt.py")
    shutil.copy(solutions_dir("mha-screen") / "reference_lists.py", folder / "solution.py")
    graded = {name: pipeline.grade(folder / f"{name}.py", pipeline.Options(seed=11)) for name in ("starter", "attempt", "solution")}
    assert [d.bug for d in graded["attempt"].diagnosis] == ["no-scaling"]
    assert graded["starter"].diagnosis == [] and graded["solution"].passed
    return graded


class Week:
    def __init__(self, monkeypatch):
        self.monkeypatch = monkeypatch
        self.store = open_store()
        self.user_ratings = 0

    def at(self, day: int, hour: float) -> datetime:
        moment = START + timedelta(days=day, hours=hour)
        self.monkeypatch.setenv("ATTN_KIT_NOW", iso(moment))
        return moment

    def check(self, report, times=1, source="check"):
        return [progress.record_check(self.store, report, source).ratings for _ in range(times)]

    def discuss(self, new=5, rating="3"):
        """One `attn-kit discuss` session as the CLI runs it: the queue, each card rated."""
        entries = review.queue(self.store, None, new=new, first=self.store.current_exercise())
        for entry in entries:
            review.review(self.store, entry.exercise.id, entry.question, review.RATINGS[rating])
        self.user_ratings += len(entries)
        return entries

    def automatic(self) -> list[dict]:
        return [r for r in self.store.reviews() if r["source"] == review.AUTOMATIC]

    def due_keys(self) -> set[str]:
        return {e.key for e in review.queue(self.store, None, due_only=True)}


def test_a_week_of_practice(monkeypatch, reports):
    week = Week(monkeypatch)
    scaling = {review.card_key(MHA.id, q.id) for q in MHA.questions if q.concept == "scaling"}
    assert scaling

    # Monday: the untouched starter three times, the attempt twice: no card was ever reviewed
    week.at(0, 0)
    assert week.check(reports["starter"], 3) == [[], [], []]
    week.at(0, 0.5)
    assert week.check(reports["attempt"], 2) == [[], []]  # new cards are the user's to introduce
    assert week.store.cards() == [] and review.outlook(week.store).new == len(review.questions())
    # discuss 1: the current exercise's questions come first
    first = week.discuss(new=len(MHA.questions))
    assert {e.exercise.id for e in first} == {MHA.id} and all(e.is_new for e in first)
    week.at(0, 1)
    ratings = week.check(reports["attempt"], 3)
    assert {r.key for r in ratings[0]} == scaling and ratings[1:] == [[], []]  # once a day, only scaling
    assert all(r.due > START + timedelta(hours=1) for r in ratings[0])  # "due again in …", not now
    assert not scaling & week.due_keys()  # not due yet: true when printed
    week.at(0, 1.5)
    assert scaling <= week.due_keys()

    # Tuesday: still failing in the morning (a day later: one more rating each), fixed after lunch
    week.at(1, 1.5)
    assert [len(r) for r in week.check(reports["attempt"], 5)] == [len(scaling), 0, 0, 0, 0]
    week.at(1, 5)
    assert week.check(reports["solution"], 5) == [[]] * 5  # a fix does not rate

    # Wednesday: a mock that timed out on the starter, then discuss 2
    week.at(2, 0)
    assert week.check(reports["starter"], source="mock") == [[]]
    due_before = week.due_keys()
    assert due_before and review.outlook(week.store).due_now == len(due_before)
    second = week.discuss(new=0)
    assert {e.key for e in second} == due_before
    assert week.due_keys() == set()

    # Thursday: the bug again, twice half an hour apart; discuss 3
    week.at(3, 0)
    assert [len(r) for r in week.check(reports["attempt"], 3)] == [len(scaling), 0, 0]
    week.at(3, 0.5)
    assert week.check(reports["attempt"], 3) == [[], [], []]
    week.at(3, 2)
    week.discuss(new=0)

    # Friday: a mock with the bug (23 h 30 after Thursday's first rating: within the day, no rating),
    # then its discussion, self-scored, reviews two cards; discuss 4 introduces two new questions
    week.at(3, 23.5)
    assert week.check(reports["attempt"], source="mock") == [[]]
    for question in MHA.questions[:2]:
        review.review(week.store, MHA.id, question, review.RATINGS["2"], source="mock")
    week.user_ratings += 2
    week.at(4, 3)
    fourth = week.discuss(new=2)
    assert sum(e.is_new for e in fourth) == 2

    # Saturday and Sunday: passing runs; discuss 5
    week.at(5, 0)
    assert week.check(reports["solution"], 6) == [[]] * 6
    week.at(6, 0)
    week.discuss(new=0)

    checks = week.store.checks()
    assert sum(c["source"] == "check" for c in checks) == 30
    assert sum(c["source"] == "mock" for c in checks) == 2  # the two mocks' graded runs
    automatic = week.automatic()
    assert len(automatic) == 3 * len(scaling)  # Monday, Tuesday, Thursday
    assert {r["key"] for r in automatic} == scaling
    user = [r for r in week.store.reviews() if r["source"] != review.AUTOMATIC]
    assert len(user) == week.user_ratings
    assert week.due_keys() == set() and review.outlook(week.store).due_now == 0
    # every automatic rating came at least 24 hours after the previous one of its card
    for key in scaling:
        times = sorted(r["at"] for r in automatic if r["key"] == key)
        gaps = [datetime.fromisoformat(b) - datetime.fromisoformat(a) for a, b in zip(times, times[1:])]
        assert all(gap >= timedelta(days=1) for gap in gaps)
    week.store.close()


def test_plain_discuss_puts_the_current_exercise_first(monkeypatch):
    with open_store() as store:
        store.add_check(
            exercise="kv-cache",
            file="decode.py",
            seed=1,
            passed=False,
            checks_passed=0,
            checks_total=1,
            points=0,
            max_points=1,
            public_only=False,
            failing=[],
            bugs=[],
            concepts_failed=[],
        )
        entries = review.queue(store, None, new=3, first=store.current_exercise())
    assert [e.exercise.id for e in entries] == ["kv-cache"] * 3


# --- interrupting discuss, in a real terminal ----------------------------------------------------


def _spawn_discuss(*args):
    import os
    import sys

    import pexpect

    return pexpect.spawn(
        sys.executable, ["-m", "attn_kit", "discuss", *args], env=dict(os.environ), encoding="utf-8", dimensions=(40, 120), timeout=30
    )


@pytest.mark.parametrize("how", ["ctrl-c", "eof"])
def test_interrupted_discuss_ends_with_a_summary(how):
    import pexpect

    child = _spawn_discuss("mha-screen", "--new", "3")
    child.expect(r"Card 1/3")
    child.expect("Your answer")
    child.sendline("")
    child.expect("Rate it")
    child.sendline("3")
    child.expect(r"Card 2/3")
    child.expect("Your answer")
    if how == "ctrl-c":
        child.sendintr()
    else:
        child.sendeof()
    child.expect("Stopped; every card rated so far is saved")
    child.expect(r"Reviewed 1 card\. Due now: 0")
    child.expect(pexpect.EOF)
    child.close()
    assert "Aborted" not in child.before and "Traceback" not in child.before
    assert child.exitstatus == 0
    with open_store() as store:
        assert len(store.reviews()) == 1


def test_discuss_new_counts_questions_the_user_never_reviewed():
    """Cards only the kit rated (as older versions did) are still new to the user: `--new N` finds them."""
    questions = MHA.questions
    with open_store() as store:
        for question in questions:
            review.review(store, MHA.id, question, review.RATINGS["1"], source=review.AUTOMATIC)
        review.review(store, MHA.id, questions[0], review.RATINGS["3"])
        assert review.outlook(store, MHA.id).new == len(questions) - 1
        entries = review.queue(store, MHA.id, new=1, at=review.now() - timedelta(days=1))
    assert [e.question.id for e in entries if e.is_new] == [questions[1].id]


@pytest.mark.slow
def test_timeouts_and_load_errors_never_rate(monkeypatch, tmp_path):
    """A run whose code hangs (no bug diagnosed) and a file that cannot be loaded leave every
    card alone, even cards the user has reviewed, while a diagnosed bug does rate them."""
    week = Week(monkeypatch)
    week.at(0, 0)
    week.discuss(new=len(MHA.questions))  # every mha-screen card is the user's now
    reviews = len(week.store.reviews())
    week.at(1, 0)
    hang = tmp_path / "hangs.py"
    shutil.copy(CORPUS / "mha" / "infinite_loop.py", hang)
    hung = pipeline.grade(hang, pipeline.Options(seed=11, timeout=0.5))
    assert not hung.passed and hung.diagnosis == []
    assert any(r.status == "error" and "did not return" in r.message for r in hung.results)
    assert week.check(hung) == [[]]
    week.store.close()
    broken = tmp_path / "broken.py"
    shutil.copy(CORPUS / "mha" / "syntax_error.py", broken)
    proc = attn_kit("check", broken, env={"ATTN_KIT_NOW": iso(START + timedelta(days=1, hours=1))})
    assert proc.returncode != 0 and "SyntaxError" in proc.stdout + proc.stderr
    store = open_store()
    assert len(store.reviews()) == reviews and len(store.checks()) == 1  # only the hung run's record
    # the rule can fail: a diagnosed bug on the same reviewed cards does rate
    week.store = store
    week.at(1, 2)
    attempt = pipeline.grade(solutions_dir("mha-screen") / "bugs" / "no-scaling.py", pipeline.Options(seed=11))
    assert week.check(attempt) != [[]]
    store.close()
