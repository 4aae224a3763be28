"""Timed mock screens: a fresh starter, a live countdown, public checks on each save, then the
full graded suite, discussion questions, follow-ups and a report in the session folder.

Time comes from a `Clock`; `ATTN_KIT_CLOCK_SCALE=N` makes mock time run N times faster than
real time (tests use it, so nobody waits 45 minutes for a time-up).

This module holds the session's logic and data (the folder, the live public runs, the graded
run, the chosen questions, the scores, report.json) and never talks to the user itself: `run`
takes a `Terminal`, the CLI's implementation of the user-facing steps (cli_practice.MockTerminal:
showing, prompting, reading keys, and the Markdown report from render_practice).
"""

from __future__ import annotations

import importlib.util
import os
import random
import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Callable, Protocol

from attn_kit.base import safefile
from attn_kit.base.errors import KitError, UsageError
from attn_kit.grading import rubric
from attn_kit.load import catalog
from attn_kit.practice.store import Store, StoreError, iso, now
from attn_kit.report import jsonout
from attn_kit.report.results import CheckStatus

LIVE_TIMEOUT = 5.0  # seconds one call may take during the live public runs


class Clock:
    """Mock-session time in seconds since start; `scale` mock seconds pass per real second."""

    def __init__(self, scale: float | None = None):
        if scale is None:
            try:
                scale = float(os.environ.get("ATTN_KIT_CLOCK_SCALE", "1") or 1)
            except ValueError:
                scale = 1.0
        self.scale = scale if scale > 0 else 1.0
        self.start = time.monotonic()

    def elapsed(self) -> float:
        return (time.monotonic() - self.start) * self.scale


class MockStatus(StrEnum):
    """How the live part of a session ended, then how the session ended (report.json, history)."""

    SUBMITTED = "submitted"  # `s`, or submit after Ctrl-C
    TIME_UP = "time-up"
    INTERRUPTED = "interrupted"  # Ctrl-C: the user is asked to submit or abandon
    ABANDONED = "abandoned"


@dataclass
class Status:
    """What the live status line shows."""

    running: bool = False
    passed: int = 0
    total: int = 0
    failing: list[str] = field(default_factory=list)
    error: str = ""
    saves: int = 0


@dataclass
class Session:
    exercise: catalog.Exercise
    folder: Path
    file: Path
    minutes: float
    seed: int
    started: datetime
    mock_id: int | None = None
    warnings: list[str] = field(default_factory=list)


class Terminal(Protocol):
    """The user-facing steps of a mock screen, supplied by the CLI (cli_practice.MockTerminal)."""

    def intro(self, exercise: catalog.Exercise, file: Path, minutes: float) -> None: ...

    def keys(self) -> AbstractContextManager:
        """Key presses during the live part: the entered object's read() returns the keys since
        the last read (lower-cased); `s` submits."""
        ...

    def live(self) -> AbstractContextManager[Callable[[float, Status], None]]:
        """The live status display: the entered callable shows (seconds left, status)."""
        ...

    def ended(self, reason: MockStatus, used: float) -> None: ...

    def submit_or_abandon(self) -> bool:
        """Asked after Ctrl-C: True to submit, False to abandon."""
        ...

    def heading(self, text: str) -> None: ...

    def graded(self, report, exercise: catalog.Exercise) -> None: ...

    def error(self, message: str) -> None: ...

    def warning(self, message: str) -> None: ...

    def ask(self, question: catalog.Question, index: int, count: int) -> tuple[str, list[bool]] | None:
        """One discussion question: (the answer, covered flag per key point), or None when the
        user cut the discussion short (Ctrl-C, end of input)."""
        ...

    def followups(self, exercise: catalog.Exercise) -> None: ...

    def report_markdown(self, data: dict) -> str:
        """report.md's text for report_data's dict."""
        ...

    def finished(self, path: Path, status: MockStatus, report, discussion: list[Discussion]) -> None:
        """The last lines: the outcome and where the report is."""
        ...

    def level(self, open_rows: list[dict]) -> str:
        """Self-assessment, on a terminal only: says which dimensions (scoring rows) are left to
        score, then asks the level whose rule turns the scores into a recommendation (one of
        rubric.LEVELS). Raises EOFError at end of input."""
        ...

    def self_score(self, row: dict, index: int, count: int) -> int | None:
        """Self-assessment: a score 1-4 for one dimension without one (a scoring row: its
        dimension and anchors), None to skip it. Raises EOFError at end of input."""
        ...

    def self_assessed(self, data: dict, given: dict[str, int], path: Path) -> None:
        """The recommendation from the scores given (report_data's dict, with them and the level),
        and the report they were recorded in."""
        ...


# --- choosing and creating ----------------------------------------------------------------------


def available(exercise: catalog.Exercise) -> bool:
    return not exercise.needs or importlib.util.find_spec(exercise.needs) is not None


def choose_exercise(store: Store | None) -> catalog.Exercise:
    """No exercise given: the first (in catalogue order) never passed in a mock, else the one
    whose last mock is oldest. Exercises whose optional dependency is missing are skipped."""
    candidates = [e for e in catalog.exercises().values() if available(e)]
    if not candidates:
        raise UsageError("no exercise can run here; see `attn-kit list`.")
    if store is None:
        return candidates[0]
    mocks = store.mocks()
    passed = {m["exercise"] for m in mocks if m["passed"]}
    for exercise in candidates:
        if exercise.id not in passed:
            return exercise
    last: dict[str, str] = {}
    for m in mocks:
        last.setdefault(m["exercise"], m["started_at"])
    return min(candidates, key=lambda e: last.get(e.id, ""))


def create_session(exercise: catalog.Exercise, minutes: float, parent: Path) -> Session:
    """A new folder `mock-<exercise>-<time>` under `parent` with the starter and the statement."""
    started = now()
    stamp = started.astimezone().strftime("%Y%m%d-%H%M%S")
    folder = parent / f"mock-{exercise.id}-{stamp}"
    counter = 1
    while folder.exists():
        counter += 1
        folder = parent / f"mock-{exercise.id}-{stamp}-{counter}"
    try:
        folder.mkdir(parents=True)
        file = folder / "solution.py"
        file.write_text(exercise.starter, encoding="utf-8")
        (folder / "statement.md").write_text(exercise.statement.strip() + "\n", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot create the session folder {folder}: {exc.strerror}. Pick another place with --dir.") from None
    seed = random.SystemRandom().randrange(1, 100_000)
    return Session(exercise, folder, file, minutes, seed, started)


# --- the live part ------------------------------------------------------------------------------


def public_status(session: Session, status: Status) -> Status:
    """Run the public examples on the session file."""
    from attn_kit.grading import pipeline

    try:
        report = pipeline.grade(
            session.file, pipeline.Options(exercise=session.exercise.id, seed=session.seed, public_only=True, timeout=LIVE_TIMEOUT)
        )
    except KitError as exc:
        return Status(error=str(exc).splitlines()[0][:160], saves=status.saves)
    passed, total = report.score
    # every check that did not pass, those not checked after an earlier failure included, so the
    # status names as many checks as its count says are not passing
    failing = [r.id for r in report.results if r.status != CheckStatus.PASS]
    return Status(passed=passed, total=total, failing=failing, saves=status.saves)


def live(session: Session, clock: Clock, keys, display: Callable[[], AbstractContextManager]) -> MockStatus:
    """Countdown + status line until submit ('submitted'), time-up ('time-up') or Ctrl-C
    ('interrupted'). `display()` (Terminal.live) gives `show(seconds_left, status)`, which draws
    the status line; `keys.read()` returns the keys pressed since the last read."""
    from attn_kit.practice.watch import FileWatcher, Interrupts

    total = session.minutes * 60
    watcher = FileWatcher(session.file, tick=0.2)
    status = Status(running=True)
    try:
        with Interrupts() as ctrl_c, display() as show:
            show(total - clock.elapsed(), status)
            status = public_status(session, status)
            while True:
                show(total - clock.elapsed(), status)
                if ctrl_c.seen:
                    return MockStatus.INTERRUPTED
                if clock.elapsed() >= total:
                    return MockStatus.TIME_UP
                changed = watcher.wait()
                if "s" in keys.read():
                    return MockStatus.SUBMITTED
                if changed and not ctrl_c.seen:
                    status.saves += 1
                    status.running = True
                    show(total - clock.elapsed(), status)
                    status = public_status(session, status)
    except KeyboardInterrupt:
        return MockStatus.INTERRUPTED
    finally:
        watcher.close()


# --- after the live part ------------------------------------------------------------------------


def pick_questions(
    exercise: catalog.Exercise, failing_concepts: set[str], seed: int, due_keys: AbstractSet[str] = frozenset(), count: int = 3
) -> list[catalog.Question]:
    """2-3 questions: those on concepts the final run failed first, then cards due for review,
    then the rest in a random order."""
    questions = list(exercise.questions)
    random.Random(seed).shuffle(questions)
    questions.sort(key=lambda q: (q.concept not in failing_concepts, f"{exercise.id}/{q.id}" not in due_keys))
    return questions[:count]


@dataclass
class Discussion:
    question: catalog.Question
    answer: str
    covered: list[bool]

    def to_json(self) -> dict:
        return {
            "question": self.question.id,
            "concept": self.question.concept,
            "prompt": self.question.prompt,
            "answer": self.answer,
            "covered": sum(self.covered),
            "total": len(self.covered),
            "key_points": [
                {"text": text, "covered": flag, "required": i in self.question.required}
                for i, (text, flag) in enumerate(zip(self.question.key_points, self.covered))
            ],
        }


def discussion_rating(item: Discussion):
    """A self-scored mock answer reviews its card: all points -> Good, half or more -> Hard,
    fewer -> Again."""
    from fsrs import Rating

    got, total = sum(item.covered), len(item.covered)
    if total and got == total:
        return Rating.Good
    return Rating.Hard if total and got * 2 >= total else Rating.Again


# --- the scores ---------------------------------------------------------------------------------


def correctness_score(report, graded: bool = True) -> int | None:
    """The correctness dimension from what the diagnosis found (rubric.correctness: the causes, their
    severity, whether the file runs); None when the session was not graded (abandoned)."""
    return rubric.correctness(report) if graded else None


def hint_caps(exercise: catalog.Exercise, levels) -> dict[str, list[int]]:
    """Dimension -> the used hint levels that cap it at 3 (a hint with no dimension caps correctness)."""
    caps: dict[str, list[int]] = {}
    for level in sorted(levels):
        if 1 <= level <= len(exercise.hints):
            caps.setdefault(exercise.hints[level - 1].dimension or "correctness", []).append(level)
    return caps


def scores(
    exercise: catalog.Exercise, report=None, hints_used=(), graded: bool = True, discussion: Sequence[Discussion] = ()
) -> list[dict]:
    """One row per scored dimension: the score the kit can compute (correctness from the diagnosis;
    systems from the discussion's coverage, rubric.systems_from_discussion, when one was held; else
    None for the interviewer or the candidate to give), why, the cap of 3 that used hints impose,
    the anchors. `graded` False (an abandoned session): no score at all."""
    caps = hint_caps(exercise, hints_used)
    covered = [(sum(d.covered), len(d.covered), all(d.covered[i] for i in d.question.required if i < len(d.covered))) for d in discussion]
    systems = rubric.systems_from_discussion(covered) if graded else None
    rows = []
    for item in exercise.scoring:
        score = correctness_score(report, graded) if item.dimension == "correctness" else None
        if item.dimension == "systems":
            score = systems
        capped_by = caps.get(item.dimension, [])
        cap = 3 if capped_by else None
        if score is not None and cap is not None:
            score = min(score, cap)
        why = rubric.correctness_reason(report) if item.dimension == "correctness" and score is not None else ""
        if item.dimension == "systems" and score is not None:
            why = rubric.systems_reason(covered)
        rows.append(
            {"dimension": item.dimension, "score": score, "cap": cap, "capped_by": capped_by, "why": why, "anchors": list(item.anchors)}
        )
    return rows


def recommendation(rows: list[dict], level: str = rubric.DEFAULT_LEVEL) -> dict:
    """The rubric's recommendation at `level` for the score rows: decided (with reasons) once all
    six scores are known, else the range the scores given so far leave open."""
    given = {row["dimension"]: row["score"] for row in rows}
    if all(s is not None for s in given.values()) and set(given) == set(catalog.DIMENSIONS):
        verdict, reasons = rubric.recommend(given, level)
        return {"verdict": verdict, "reasons": reasons, "range": [verdict, verdict]}
    filled = {d: given.get(d) for d in catalog.DIMENSIONS}
    worst, best = rubric.recommendation_range(filled, level)
    missing = [d for d, s in filled.items() if s is None]
    return {"verdict": None, "reasons": [f"still to score: {', '.join(missing)}"], "range": [worst, best]}


# --- the report ---------------------------------------------------------------------------------


def report_data(
    session: Session,
    status: MockStatus,
    used: float,
    ended: datetime,
    report=None,
    discussion: Sequence[Discussion] = (),
    hints_during: AbstractSet[int] = frozenset(),
    hints_total_used: int = 0,
    locate_runs: int = 0,
) -> dict:
    exercise = session.exercise
    rows = scores(exercise, report, hints_during, graded=status != MockStatus.ABANDONED, discussion=discussion)
    data = {
        "exercise": exercise.id,
        "title": exercise.title,
        "status": status,
        "started_at": iso(session.started),
        "ended_at": iso(ended),
        "minutes": session.minutes,
        "seconds_used": round(used, 1),
        "seed": session.seed,
        "passed": report.passed if report else None,
        "score": report.to_json()["score"] if report else None,
        "checks": [r.to_json() for r in report.results] if report else [],
        "diagnosis": [d.to_json() for d in report.diagnosis] if report else [],
        "hints": {"used_during_session": sorted(hints_during), "used_in_total": hints_total_used, "available": len(exercise.hints)},
        "locate": {"used_during_session": locate_runs > 0, "runs": locate_runs},  # `check --locate` runs
        "scoring": rows,
        "recommendation": recommendation(rows) if status != MockStatus.ABANDONED else None,
        "discussion": [d.to_json() for d in discussion],
        "followups": [f.prompt for f in exercise.followups],
        "solution_file": str(session.file),
        "solution": session.file.read_text(encoding="utf-8", errors="replace") if session.file.exists() else None,
    }
    return data


def write_report(session: Session, data: dict, markdown: str) -> Path:
    """report.md (`markdown`, the render layer's text for `data`) and report.json in the session folder."""
    md = session.folder / "report.md"
    safefile.write_text(md, markdown)  # the candidate's code may have planted symlinks here
    safefile.write_text(session.folder / "report.json", jsonout.dumps(data, indent=2) + "\n")
    return md


# --- the whole session --------------------------------------------------------------------------


def locate_count(store, exercise: str, since: datetime, until: datetime) -> int:
    """How many `check --locate` runs of the exercise the history holds within the window."""
    rows = store.query(
        "SELECT COUNT(*) AS n FROM checks WHERE exercise = ? AND source = 'locate' AND at >= ? AND at <= ?",
        (exercise, iso(since), iso(until)),
    )
    return int(rows[0]["n"]) if rows else 0


def _safely(session: Session, action, *args, **kwargs):
    """Run a history write; a storage failure becomes a warning, never the end of the session."""
    try:
        return action(*args, **kwargs)
    except StoreError as exc:
        session.warnings.append(f"not saved to your history: {exc}")
        return None


def run(
    exercise_id: str | None,
    minutes: float | None,
    parent: Path,
    store: Store | None,
    ui: Terminal,
    unattended: bool = False,
    terminal: bool = True,
) -> tuple[int, Path]:
    """Run one mock screen end to end through `ui`; returns (exit status, report path). `terminal`
    says whether input is a terminal: without one the session needs `unattended`."""
    from attn_kit.grading import pipeline
    from attn_kit.practice import progress

    exercise = catalog.exercise(exercise_id) if exercise_id else choose_exercise(store)
    pipeline.require(exercise)
    if not unattended and not terminal:
        raise UsageError(
            "attn-kit mock is interactive and its input is not a terminal (a pipe, a file or "
            "/dev/null). Run it in a terminal, or pass --unattended to run it anyway: no keys are "
            "read, the session ends at time-up, and questions take their defaults at end of input."
        )
    minutes = minutes if minutes is not None else exercise.minutes
    session = create_session(exercise, minutes, parent)
    if store is not None:
        session.mock_id = _safely(session, store.start_mock, exercise.id, str(session.folder), minutes, at=session.started)
    ui.intro(exercise, session.file, minutes)
    clock = Clock()
    with ui.keys() as keys:
        reason = live(session, clock, keys, ui.live)
    used = min(clock.elapsed(), minutes * 60)
    ui.ended(reason, used)
    status = reason
    if reason == MockStatus.INTERRUPTED:
        status = MockStatus.SUBMITTED if ui.submit_or_abandon() else MockStatus.ABANDONED
    ended = now()
    hints_during: set[int] = set()
    hints_total = locate_runs = 0
    if store is not None:
        hints_during = _safely(session, store.hint_levels, exercise.id, since=session.started, until=ended + timedelta(seconds=1)) or set()
        hints_total = _safely(session, progress.hints_used, store, exercise.id) or 0
        locate_runs = _safely(session, locate_count, store, exercise.id, session.started, ended + timedelta(seconds=1)) or 0
    if status == MockStatus.ABANDONED:
        data = report_data(session, status, used, ended, hints_during=hints_during, hints_total_used=hints_total, locate_runs=locate_runs)
        path = _finish(session, store, ui, data, ended, used)
        ui.finished(path, status, None, [])
        return 130, path

    report = _graded_run(session, store, ui)
    discussion = _discussion(session, store, ui, report)
    ui.heading("Follow-ups")
    ui.followups(exercise)
    data = report_data(session, status, used, ended, report, discussion, hints_during, hints_total, locate_runs)
    path = _finish(session, store, ui, data, ended, used)
    ui.finished(path, status, report, discussion)
    if terminal and not unattended:  # someone is at the keyboard: they can score the rest themselves
        self_assess(session, data, ui)
    return 0, path


def self_assess(session: Session, data: dict, ui: Terminal) -> dict[str, int]:
    """Someone practising alone scores the dimensions the kit could not: their level, then each
    dimension without a score (its anchors shown), 1-4 or skipped; end of input or Ctrl-C stops
    the asking and keeps what was given. The scores given are recorded in report.json and
    report.md (marked as self-given), and the recommendation comes only from them, at that level.
    Returns the scores given (none: nothing is rewritten)."""
    open_rows = [row for row in data["scoring"] if row["score"] is None]
    if not open_rows or data.get("recommendation") is None:
        return {}
    given: dict[str, int] = {}
    level = rubric.DEFAULT_LEVEL
    try:
        level = ui.level(open_rows)
        for index, row in enumerate(open_rows, 1):
            score = ui.self_score(row, index, len(open_rows))
            if score is not None:  # a hint used on the dimension caps it, as it caps the kit's scores
                given[row["dimension"]] = min(score, row["cap"] or 4)
    except (EOFError, KeyboardInterrupt):
        pass
    if not given:
        return given
    for row in open_rows:
        if row["dimension"] in given:
            row["score"], row["given_by"] = given[row["dimension"]], "self"
    data["level"] = level
    data["recommendation"] = recommendation(data["scoring"], level)
    path = write_report(session, data, ui.report_markdown(data))
    ui.self_assessed(data, given, path)
    return given


def _graded_run(session: Session, store: Store | None, ui: Terminal):
    """The full graded suite on the final file, shown and recorded; None when it cannot be graded."""
    from attn_kit.grading import pipeline
    from attn_kit.practice import progress

    ui.heading("The full graded suite")
    report = None
    try:
        report = pipeline.grade(session.file, pipeline.Options(exercise=session.exercise.id, seed=session.seed))
        ui.graded(report, session.exercise)
    except KitError as exc:
        ui.error(str(exc))
    if report is not None and store is not None:
        _safely(session, progress.record_check, store, report, "mock")
    return report


def _discussion(session: Session, store: Store | None, ui: Terminal, report) -> list[Discussion]:
    """2-3 questions, self-scored; the answers given rate their review cards."""
    from attn_kit.practice import progress

    exercise = session.exercise
    failing = progress.concepts_of(report)[1] if report is not None else set()
    due_keys = set()
    if store is not None:
        from attn_kit.practice.review import queue

        due_keys = {e.key for e in (_safely(session, queue, store, exercise.id, True) or [])}
    chosen = pick_questions(exercise, failing, session.seed, due_keys)
    discussion: list[Discussion] = []
    if not chosen:
        return discussion
    ui.heading("Discussion")
    try:
        for index, question in enumerate(chosen, 1):
            answered = ui.ask(question, index, len(chosen))
            if answered is None:
                ui.warning("discussion cut short; the report keeps the answers given so far.")
                break
            discussion.append(Discussion(question, *answered))
    except (EOFError, KeyboardInterrupt):
        ui.warning("discussion cut short; the report keeps the answers given so far.")
    if store is not None:
        from attn_kit.practice.review import review

        for item in discussion:
            _safely(session, review, store, exercise.id, item.question, discussion_rating(item), "mock")
    return discussion


def _finish(session: Session, store: Store | None, ui: Terminal, data: dict, ended: datetime, used: float) -> Path:
    """Write the report, record the mock's end in history, show any storage warnings."""
    path = write_report(session, data, ui.report_markdown(data))
    if store is not None and session.mock_id:
        score = data["score"] or {}
        graded = (
            {}
            if data["status"] == MockStatus.ABANDONED
            else dict(
                passed=data["passed"],
                checks_passed=score.get("passed"),
                checks_total=score.get("total"),
                points=score.get("points"),
                max_points=score.get("max_points"),
                discussion=[{"question": d["question"], "covered": d["covered"], "total": d["total"]} for d in data["discussion"]],
            )
        )
        _safely(
            session,
            store.finish_mock,
            session.mock_id,
            ended_at=ended,
            status=data["status"],
            seconds_used=used,
            hints_used=len(data["hints"]["used_during_session"]),
            report=str(path),
            **graded,
        )
    for text in dict.fromkeys(session.warnings):
        ui.warning(text)
    return path
