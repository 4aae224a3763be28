"""Timed mock screens: a fresh starter, a live countdown, public checks on each save, then the
full graded suite, discussion questions, follow-ups and a report in the session folder.

Time comes from a `Clock`; `ATTN_KIT_CLOCK_SCALE=N` makes mock time run N times faster than
real time (tests use it, so nobody waits 45 minutes for a time-up).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import click

from . import catalog, render_practice
from .errors import KitError, UsageError
from .store import Store, StoreError, iso, now

LIVE_TIMEOUT = 5.0          # seconds one call may take during the live public runs


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
    last = {}
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
        raise UsageError(f"cannot create the session folder {folder}: {exc.strerror}. "
                         f"Pick another place with --dir.") from None
    seed = random.SystemRandom().randrange(1, 100_000)
    return Session(exercise, folder, file, minutes, seed, started)


# --- the live part ------------------------------------------------------------------------------

def public_status(session: Session, status: Status) -> Status:
    """Run the public examples on the session file."""
    from . import grading
    try:
        report = grading.grade(session.file, grading.Options(
            exercise=session.exercise.id, seed=session.seed, public_only=True, timeout=LIVE_TIMEOUT))
    except KitError as exc:
        return Status(error=str(exc).splitlines()[0][:160], saves=status.saves)
    passed, total = report.score
    failing = [r.id for r in report.results if r.status in ("fail", "error")]
    return Status(passed=passed, total=total, failing=failing, saves=status.saves)


def live(session: Session, clock: Clock, keys) -> str:
    """Countdown + status line until submit ('submitted'), time-up ('time-up') or Ctrl-C
    ('interrupted')."""
    from .watch import FileWatcher, Interrupts
    total = session.minutes * 60
    watcher = FileWatcher(session.file, tick=0.2)
    status = Status(running=True)
    try:
        with Interrupts() as ctrl_c, render_practice.mock_live() as show:
            shown = ""

            def draw():
                nonlocal shown
                line = render_practice.mock_status(total - clock.elapsed(), status)
                if line.plain != shown:          # redraw only when the second or the status changes
                    shown = line.plain
                    show(line)
            draw()
            status = public_status(session, status)
            while True:
                draw()
                if ctrl_c.seen:
                    return "interrupted"
                if clock.elapsed() >= total:
                    return "time-up"
                changed = watcher.wait()
                if "s" in keys.read():
                    return "submitted"
                if changed and not ctrl_c.seen:
                    status.saves += 1
                    status.running = True
                    draw()
                    status = public_status(session, status)
    except KeyboardInterrupt:
        return "interrupted"
    finally:
        watcher.close()


# --- after the live part ------------------------------------------------------------------------

def submit_or_abandon() -> bool:
    """Ask after Ctrl-C; True to submit. Enter or end of input take the stated default, submit;
    a second Ctrl-C abandons."""
    import sys
    while True:
        click.echo("Submit this solution now, or abandon the session? (submit, abandon) [submit]: ", nl=False)
        try:
            line = sys.stdin.readline()
        except KeyboardInterrupt:
            click.echo()
            return False
        if not line:                       # end of input: the default
            click.echo()
            return True
        answer = line.strip().lower()
        if answer in ("", "submit", "s"):
            return True
        if answer in ("abandon", "a"):
            return False
        click.echo("Type submit (or s) or abandon (or a).")


def pick_questions(exercise: catalog.Exercise, failing_concepts: set[str], seed: int,
                   due_keys: set[str] = frozenset(), count: int = 3) -> list[catalog.Question]:
    """2-3 questions: those on concepts the final run failed first, then cards due for review,
    then the rest in a random order."""
    questions = list(exercise.questions)
    random.Random(seed).shuffle(questions)
    questions.sort(key=lambda q: (q.concept not in failing_concepts,
                                  f"{exercise.id}/{q.id}" not in due_keys))
    return questions[:count]


@dataclass
class Discussion:
    question: catalog.Question
    answer: str
    covered: list[bool]

    def to_json(self) -> dict:
        return {"question": self.question.id, "concept": self.question.concept, "prompt": self.question.prompt,
                "answer": self.answer, "covered": sum(self.covered), "total": len(self.covered),
                "key_points": [{"text": text, "covered": flag, "required": i in self.question.required}
                               for i, (text, flag) in enumerate(zip(self.question.key_points, self.covered))]}


def ask(question: catalog.Question, index: int, count: int) -> Discussion:
    render_practice.discussion_question(index, count, question)
    lines = []
    while True:
        line = click.prompt("", default="", show_default=False, prompt_suffix="> ")
        if not line.strip():
            break
        lines.append(line)
    render_practice.key_points_intro()
    covered = []
    for number, point in enumerate(question.key_points, 1):
        render_practice.key_point(number, point, required=number - 1 in question.required)
        covered.append(click.confirm("     covered?", default=False))
    render_practice.discussion_score(sum(covered), len(covered))
    return Discussion(question, "\n".join(lines), covered)


def discussion_rating(item: Discussion):
    """A self-scored mock answer reviews its card: all points -> Good, half or more -> Hard,
    fewer -> Again."""
    from fsrs import Rating
    got, total = sum(item.covered), len(item.covered)
    if total and got == total:
        return Rating.Good
    return Rating.Hard if total and got * 2 >= total else Rating.Again


# --- the scores ---------------------------------------------------------------------------------

def correctness_score(report) -> int | None:
    """The correctness dimension read off the graded checks: 1 a public example fails, 2 three or
    more checks fail, 3 one or two fail, 4 every check passes (skipped checks do not count)."""
    if report is None:
        return None
    ran = [r for r in report.results if r.status != "skip"]
    if not ran or any(r.public and r.status != "pass" for r in ran):
        return 1
    failing = sum(r.status != "pass" for r in ran)
    return 4 if failing == 0 else 3 if failing <= 2 else 2


def hint_caps(exercise: catalog.Exercise, levels) -> dict[str, list[int]]:
    """Dimension -> the used hint levels that cap it at 3 (a hint with no dimension caps correctness)."""
    caps: dict[str, list[int]] = {}
    for level in sorted(levels):
        if 1 <= level <= len(exercise.hints):
            caps.setdefault(exercise.hints[level - 1].dimension or "correctness", []).append(level)
    return caps


def scores(exercise: catalog.Exercise, report=None, hints_used=()) -> list[dict]:
    """One row per scored dimension: the score the kit can compute (correctness only, else None for
    the interviewer or the candidate to give), the cap of 3 that used hints impose, the anchors."""
    caps = hint_caps(exercise, hints_used)
    rows = []
    for item in exercise.scoring:
        score = correctness_score(report) if item.dimension == "correctness" else None
        capped_by = caps.get(item.dimension, [])
        cap = 3 if capped_by else None
        if score is not None and cap is not None:
            score = min(score, cap)
        rows.append({"dimension": item.dimension, "score": score, "cap": cap, "capped_by": capped_by,
                     "anchors": list(item.anchors)})
    return rows


# --- the report ---------------------------------------------------------------------------------

def report_data(session: Session, status: str, used: float, ended: datetime, report=None,
                discussion: list[Discussion] = (), hints_during: set[int] = frozenset(),
                hints_total_used: int = 0) -> dict:
    exercise = session.exercise
    data = {
        "exercise": exercise.id, "title": exercise.title, "status": status,
        "started_at": iso(session.started), "ended_at": iso(ended),
        "minutes": session.minutes, "seconds_used": round(used, 1), "seed": session.seed,
        "passed": report.passed if report else None,
        "score": report.to_json()["score"] if report else None,
        "checks": [r.to_json() for r in report.results] if report else [],
        "diagnosis": [d.to_json() for d in report.diagnosis] if report else [],
        "hints": {"used_during_session": sorted(hints_during), "used_in_total": hints_total_used,
                  "available": len(exercise.hints)},
        "scoring": scores(exercise, report, hints_during),
        "discussion": [d.to_json() for d in discussion],
        "followups": [f.prompt for f in exercise.followups],
        "solution_file": str(session.file),
        "solution": session.file.read_text(encoding="utf-8", errors="replace") if session.file.exists() else None,
    }
    return data


def report_markdown(data: dict) -> str:
    used = render_practice.clock(data["seconds_used"])
    lines = [f"# Mock screen: {data['title']} (`{data['exercise']}`)", "",
             f"- Status: **{data['status']}**",
             f"- Started: {data['started_at']}",
             f"- Time used: {used} of {data['minutes']:g}:00",
             f"- Seed: {data['seed']} (replay with `attn-kit check solution.py --seed {data['seed']}`)"]
    score = data["score"]
    if score:
        verdict = "passed" if data["passed"] else "not passed"
        lines.append(f"- Score: {score['passed']}/{score['total']} checks, "
                     f"{score.get('points', '?')}/{score.get('max_points', '?')} points ({verdict})")
    hints = data["hints"]
    lines.append(f"- Hints used during the session: {len(hints['used_during_session'])} "
                 f"({hints['used_in_total']} of {hints['available']} used in total)")
    if data.get("scoring"):
        lines += ["", "## Scores (1-4 per dimension)", "",
                  "Correctness is read off the graded checks; score the other dimensions against their "
                  "anchors. Each hint used caps its dimension at 3.", "",
                  "| dimension | score | cap | 1 | 2 | 3 | 4 |", "|---|---|---|---|---|---|---|"]
        for row in data["scoring"]:
            score = "–" if row["score"] is None else f"{row['score']}/4"
            cap = f"3 (hint {', '.join(map(str, row['capped_by']))})" if row["cap"] else ""
            anchors = [a.replace("|", "\\|") for a in row["anchors"]]
            lines.append(f"| {row['dimension']} | {score} | {cap} | " + " | ".join(anchors) + " |")
    if data["checks"]:
        lines += ["", "## Checks", "", "| check | status | points | bug |", "|---|---|---|---|"]
        for c in data["checks"]:
            lines.append(f"| {c['id']} | {c['status']} | {c['points']}/{c['max_points']} | {c['bug'] or ''} |")
    if data["diagnosis"]:
        lines += ["", "## Bugs diagnosed", ""]
        lines += [f"- `{d['bug']}`: {d['title']}. {d['evidence']}" for d in data["diagnosis"]]
    if data["discussion"]:
        lines += ["", "## Discussion (self-scored)", ""]
        for d in data["discussion"]:
            required = [p for p in d["key_points"] if p.get("required")]
            got = sum(p["covered"] for p in required)
            lines += [f"### {d['prompt']}", "", f"Covered {d['covered']} of {d['total']} key points"
                      + (f" ({got} of {len(required)} required)." if required else "."), ""]
            if d["answer"]:
                lines += ["Your answer:", ""] + [f"> {line}" for line in d["answer"].splitlines()] + [""]
            lines += [f"- [{'x' if p['covered'] else ' '}] {p['text']}" + (" *(required)*" if p.get("required") else "")
                      for p in d["key_points"]]
            lines.append("")
    if data["followups"]:
        lines += ["", "## Follow-up prompts", ""] + [f"- {f}" for f in data["followups"]]
    if data["solution"] is not None:
        lines += ["", "## Final solution file", "", f"`{data['solution_file']}`", "", "```python",
                  data["solution"].rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"


def write_report(session: Session, data: dict) -> Path:
    md = session.folder / "report.md"
    md.write_text(report_markdown(data), encoding="utf-8")
    (session.folder / "report.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return md


# --- the whole session --------------------------------------------------------------------------

def _safely(session: Session, action, *args, **kwargs):
    """Run a history write; a storage failure becomes a warning, never the end of the session."""
    try:
        return action(*args, **kwargs)
    except StoreError as exc:
        session.warnings.append(f"not saved to your history: {exc}")
        return None


def run(exercise_id: str | None, minutes: float | None, parent: Path, store: Store | None,
        unattended: bool = False) -> tuple[int, Path]:
    """Run one mock screen end to end; returns (exit status, report path)."""
    import sys

    from . import grading, practice, render
    from .watch import Keys

    exercise = catalog.exercise(exercise_id) if exercise_id else choose_exercise(store)
    grading.require(exercise)
    if not unattended and not sys.stdin.isatty():
        raise UsageError("attn-kit mock is interactive and its input is not a terminal (a pipe, a file or "
                         "/dev/null). Run it in a terminal, or pass --unattended to run it anyway: no keys are "
                         "read, the session ends at time-up, and questions take their defaults at end of input.")
    minutes = minutes if minutes is not None else exercise.minutes
    session = create_session(exercise, minutes, parent)
    if store is not None:
        session.mock_id = _safely(session, store.start_mock, exercise.id, str(session.folder), minutes,
                                  at=session.started)
    render_practice.mock_intro(exercise, session.file, minutes)
    clock = Clock()
    with Keys() as keys:
        reason = live(session, clock, keys)
    used = min(clock.elapsed(), minutes * 60)
    render_practice.mock_ended(reason, used)
    status = reason
    if reason == "interrupted":
        status = "submitted" if submit_or_abandon() else "abandoned"
    ended = now()
    hints_during = set()
    if store is not None:
        hints_during = _safely(session, store.hint_levels, exercise.id, since=session.started,
                               until=ended + timedelta(seconds=1)) or set()
    hints_total = (_safely(session, practice.hints_used, store, exercise.id) or 0) if store is not None else 0
    if status == "abandoned":
        data = report_data(session, status, used, ended, hints_during=hints_during, hints_total_used=hints_total)
        path = write_report(session, data)
        if store is not None and session.mock_id:
            _safely(session, store.finish_mock, session.mock_id, ended_at=ended, status=status, seconds_used=used,
                    hints_used=len(hints_during), report=str(path))
        _flush_warnings(session)
        render_practice.mock_report_written(path, "Session abandoned (recorded as abandoned).")
        return 130, path

    render_practice.mock_heading("The full graded suite")
    report = None
    try:
        report = grading.grade(session.file, grading.Options(exercise=exercise.id, seed=session.seed))
        render.report(report, exercise)
    except KitError as exc:
        render.error(str(exc))
    failing = set()
    if report is not None:
        failing = practice.concepts_of(report)[1]
        if store is not None:
            _safely(session, practice.record_check, store, report, "mock")
    due_keys = set()
    if store is not None:
        from .review import queue
        due_keys = {e.key for e in (_safely(session, queue, store, exercise.id, True) or [])}
    chosen = pick_questions(exercise, failing, session.seed, due_keys)
    discussion: list[Discussion] = []
    if chosen:
        render_practice.mock_heading("Discussion")
        try:
            for index, question in enumerate(chosen, 1):
                discussion.append(ask(question, index, len(chosen)))
        except (click.Abort, EOFError, KeyboardInterrupt):
            render.warning("discussion cut short; the report keeps the answers given so far.")
        if store is not None:
            from .review import review
            for item in discussion:
                _safely(session, review, store, exercise.id, item.question, discussion_rating(item), "mock")
    render_practice.mock_heading("Follow-ups")
    render_practice.followups(exercise)
    data = report_data(session, status, used, ended, report, discussion, hints_during, hints_total)
    path = write_report(session, data)
    if store is not None and session.mock_id:
        score = data["score"] or {}
        _safely(session, store.finish_mock, session.mock_id, ended_at=ended, status=status, seconds_used=used,
                passed=data["passed"], checks_passed=score.get("passed"), checks_total=score.get("total"),
                points=score.get("points"), max_points=score.get("max_points"), hints_used=len(hints_during),
                discussion=[{"question": d["question"], "covered": d["covered"], "total": d["total"]}
                            for d in data["discussion"]], report=str(path))
    _flush_warnings(session)
    if report is not None:
        got, most = report.points
        summary = (f"Mock {status}: {report.score[0]}/{report.score[1]} checks, {got}/{most} points"
                   + (", passed." if report.passed else "."))
    else:
        summary = f"Mock {status}: the file could not be graded."
    if discussion:
        covered = sum(sum(d.covered) for d in discussion)
        total = sum(len(d.covered) for d in discussion)
        summary += f" Discussion: {covered}/{total} key points."
    render_practice.mock_report_written(path, summary)
    return 0, path


def _flush_warnings(session: Session) -> None:
    from . import render
    for text in dict.fromkeys(session.warnings):
        render.warning(text)
