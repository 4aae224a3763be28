"""Practice state around the checks: history of runs, hints, solutions, reset, progress.

Core functions only: they read and write the store and return plain data; cli/practice.py
renders it.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from attn_kit.base.errors import SolutionLocked, UsageError
from attn_kit.base.paths import reference_files
from attn_kit.load import catalog
from attn_kit.practice.store import Store, now, parse_time
from attn_kit.report.results import FAILED, CheckStatus

if TYPE_CHECKING:  # report imports numpy; history and hint commands do not need it
    from attn_kit.report.results import Report


# --- check runs -------------------------------------------------------------------------------


def bundled_file(path: str | Path) -> bool:
    """The file is one of the kit's own solution files: `solutions/<exercise>/reference_*.py` or
    `.../bugs/*.py` of an attn-kit checkout or install, unchanged. Grading one (the quick start
    does) is never recorded, so trying the kit out changes no progress and unlocks nothing. A copy
    in the user's own folder is their file, and is recorded."""
    resolved = Path(path).resolve()
    parts = resolved.parts
    if "solutions" not in parts:
        return False
    tail = parts[len(parts) - 1 - parts[::-1].index("solutions") + 1 :]  # after the last "solutions"
    if not (len(tail) == 2 and tail[1].startswith("reference_") or len(tail) == 3 and tail[1] == "bugs"):
        return False
    if tail[0] not in catalog.exercises():
        return False
    from attn_kit.base.paths import solutions_dir

    bundled = solutions_dir(tail[0]).joinpath(*tail[1:])
    try:
        return bundled.read_bytes() == resolved.read_bytes()
    except OSError:
        return False


def concepts_of(report: "Report") -> tuple[set[str], set[str]]:
    """(concepts the run tested, concepts it failed on), from the checks' and bugs' concepts."""
    from attn_kit.grading.pipeline import suite_for

    suite = suite_for(catalog.exercise(report.exercise))
    concept = {c.id: c.concept for c in suite.checks}
    bugs = catalog.bugs()
    tested = {concept.get(r.id, "") for r in report.results if r.status != CheckStatus.SKIP}
    # a failure the diagnosis explains counts against the bug's concept (no-scaling breaks the
    # masking checks too, but the concept to review is scaling); an unexplained one, its check's
    failing = {bugs[r.bug].concept if r.bug in bugs else concept.get(r.id, "") for r in report.results if r.status in FAILED}
    failing |= {bugs[d.bug].concept for d in report.diagnosis if d.bug in bugs}
    tested.discard("")
    failing.discard("")
    return tested | failing, failing


def rated_bugs(report: "Report") -> list[str]:
    """The bugs whose concepts a run may rate: those the diagnosis named, on a full graded run
    that ran the candidate's code (a stub whose every call raised, a file that timed out
    everywhere, or a --public run rates nothing)."""
    if report.public_only:
        return []
    ran = [r for r in report.results if r.status in (CheckStatus.PASS, CheckStatus.FAIL)]
    return [d.bug for d in report.diagnosis] if ran else []


@dataclass
class Recorded:
    """What recording a check run did: the kit's own card ratings and the hint count."""

    check_id: int
    ratings: list = field(default_factory=list)  # review.AutoRating: concept, card key, rating, due
    hints_used: int = 0
    hints_total: int = 0
    next_hint: int | None = None  # the level `attn-kit hint EXERCISE` shows next
    seen_on_topic: tuple[int, ...] = ()  # hints on next_hint's topic already seen (the report's own pointer names the first)
    unlocked: bool = False  # this run opened the reference solution (the first full pass, hints not all used)
    passed: frozenset[str] = frozenset()  # the exercises with a passing full run, this one included


def record_check(store: Store, report: "Report", source: str = "check") -> Recorded:
    """Save a check run and rate the concept cards it bears on, in one transaction."""
    from attn_kit.practice import review

    tested, failing = concepts_of(report)
    passed, total = report.score
    got, most = report.points
    at = now()
    full_pass = report.passed and not report.public_only
    opened_before = store.has_passed(report.exercise) or _every_hint_used(store, report.exercise)
    with store.transaction():
        check_id = store.add_check(
            exercise=report.exercise,
            file=str(report.path),
            seed=report.seed,
            passed=report.passed,
            checks_passed=passed,
            checks_total=total,
            points=got,
            max_points=most,
            public_only=report.public_only,
            failing=[r.id for r in report.results if r.status in FAILED],
            bugs=[d.bug for d in report.diagnosis],
            concepts_failed=sorted(failing),
            source=source,
            at=at,
        )
        ratings = review.rate_concepts(store, report.exercise, rated_bugs(report), at=at)
    exercise = catalog.exercise(report.exercise)
    seen = store.hint_levels(exercise.id)
    failing_ids, bug_ids = [r.id for r in report.results if r.status in FAILED], [d.bug for d in report.diagnosis]
    upcoming = next_hint(exercise, failing_ids, bug_ids, seen) if not report.passed else None
    ladder = failure_ladder(exercise, failing_ids, bug_ids)[0] if upcoming else []
    return Recorded(
        check_id,
        ratings,
        len(seen),
        len(exercise.hints),
        upcoming[0] if upcoming else None,
        seen_on_topic=tuple(n for n in ladder if n in seen and upcoming and n < upcoming[0]),
        unlocked=full_pass and not opened_before,
        passed=frozenset(e for e in catalog.exercises() if store.has_passed(e)),
    )


def _every_hint_used(store: Store, exercise_id: str) -> bool:
    """Using every hint opens the reference too (solution())."""
    total = len(catalog.exercise(exercise_id).hints)
    return total > 0 and hints_used(store, exercise_id) >= total


# --- hints ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShownHint:
    level: int
    hint: catalog.Hint
    because: str = ""  # the failed check it was chosen for, if it was


def failure_ladder(exercise: catalog.Exercise, failing: list[str], bugs: list[str]) -> tuple[list[int], str]:
    """The hint levels about what a run failed, gentlest first, and the check they are for: the
    ladder (question, idea, near-code) on the topic of the hint the report pointed the first
    failure at (the diagnosed bug's, else the failed check's). ([], "") when there is none."""
    from attn_kit.base.errors import KitError
    from attn_kit.grading.pipeline import hint_for, hint_for_bug, suite_for

    try:
        checks = suite_for(exercise).checks
    except KitError:  # e.g. torch missing: fall back to the plain order
        return [], ""
    by_id = {c.id: c for c in checks}
    anchor, because = None, ""
    for bug in bugs:
        anchor = hint_for_bug(exercise, checks, bug)
        if anchor is not None:
            because = next((c for c in failing if c in by_id and bug in by_id[c].catches), failing[0] if failing else "")
            break
    for check_id in failing if anchor is None else ():
        if check_id in by_id and (anchor := hint_for(exercise, by_id[check_id])) is not None:
            because = check_id
            break
    if anchor is None or not 1 <= anchor <= len(exercise.hints):
        return [], ""
    topic = exercise.hints[anchor - 1]
    ladder = [n for n, h in enumerate(exercise.hints, 1) if (h.concept == topic.concept if topic.concept else h.title == topic.title)]
    return ladder, because


def next_hint(exercise: catalog.Exercise, failing: list[str], bugs: list[str], seen: set[int]) -> tuple[int, str] | None:
    """The first unseen hint on what the run failed, and the check it is for; None if every hint
    on that topic has been seen (then the plain next unseen hint is next)."""
    ladder, because = failure_ladder(exercise, failing, bugs)
    return next(((n, because) for n in ladder if n not in seen), None)


def take_hints(store: Store, exercise: catalog.Exercise, level: int | None = None, show_all: bool = False) -> list[ShownHint]:
    """The hint(s) to show, recorded as used: a given level, all, or the next one: the next on
    what your last check of the exercise failed (gentlest first), else the next unseen one."""
    count = len(exercise.hints)
    if not count:
        raise UsageError(f"{exercise.id} has no hints.")
    if level is not None and not 1 <= level <= count:
        raise UsageError(f"{exercise.id} has hints 1 to {count}; there is no hint {level}.")
    because = ""
    if show_all:
        levels = list(range(1, count + 1))
    elif level is not None:
        levels = [level]
    else:
        seen = store.hint_levels(exercise.id)
        last = store.checks(exercise.id, limit=1)
        chosen = next_hint(exercise, last[0]["failing"], last[0]["bugs"], seen) if last and not last[0]["passed"] else None
        if chosen is not None:
            levels, because = [chosen[0]], chosen[1]
        else:
            unseen = [n for n in range(1, count + 1) if n not in seen]
            levels = [unseen[0] if unseen else count]
    at = now()
    with store.transaction():
        for n in levels:
            store.add_hint(exercise.id, n, at=at)
    return [ShownHint(n, exercise.hints[n - 1], because if len(levels) == 1 else "") for n in levels]


def hints_used(store: Store, exercise_id: str) -> int:
    return len(store.hint_levels(exercise_id))


# --- solutions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SolutionFile:
    path: Path
    text: str


def solution(store: Store, exercise: catalog.Exercise, force: bool = False) -> tuple[list[SolutionFile], bool]:
    """The reference solution files, if the user has earned them (or forces it; that is recorded),
    and whether this view was forced."""
    files = reference_files(exercise.id)
    if not files:
        raise UsageError(f"{exercise.id} has no reference solution bundled.")
    used, total = hints_used(store, exercise.id), len(exercise.hints)
    earned = store.has_passed(exercise.id) or (total > 0 and used >= total)
    if not earned and not force:
        left = total - used
        raise SolutionLocked(
            f"the reference solution of {exercise.id} opens once your file passes `attn-kit check` "
            f"(the full suite) or once you have used every hint ({used} of {total} used; "
            f"`attn-kit hint {exercise.id}` shows the next, {left} to go). "
            f"`attn-kit solution {exercise.id} --force` shows it now, and that is recorded."
        )
    store.add_solution_view(exercise.id, forced=not earned)
    return [SolutionFile(p, p.read_text(encoding="utf-8")) for p in files], not earned


# --- reset ------------------------------------------------------------------------------------


def backup_dir() -> Path:
    from attn_kit.practice.store import home

    return home() / "backups"


def reset(exercise: catalog.Exercise, path: Path) -> Path | None:
    """Rewrite `path` with the exercise's starter; returns where the old content was saved.

    The write is atomic (temp file + rename), so an interrupted reset leaves the old file."""
    backup = None
    if path.is_dir():
        raise UsageError(f"{path} is a folder; give the solution file to reset.")
    if path.exists():
        old = path.read_bytes()
        if old.decode("utf-8", "replace") == exercise.starter:
            return None
        folder = backup_dir()
        folder.mkdir(parents=True, exist_ok=True)
        stamp = now().strftime("%Y%m%d-%H%M%S")
        backup = folder / f"{path.stem}-{stamp}{path.suffix or '.py'}"
        counter = 1
        while backup.exists():
            counter += 1
            backup = folder / f"{path.stem}-{stamp}-{counter}{path.suffix or '.py'}"
        backup.write_bytes(old)
    _atomic_write(path, exercise.starter)
    return backup


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- history and progress ---------------------------------------------------------------------


def history(store: Store, limit: int = 20) -> dict:
    """Recent checks, mocks, reviews, hints and solution views, newest first (JSON-ready)."""
    reviews = store.reviews(limit=limit)
    for row in reviews:  # the card's topic, as `attn-kit discuss` names it
        row["concept"] = _concept(row["exercise"], row["question"])
    return {
        "checks": store.checks(limit=limit),
        "mocks": store.mocks(limit=limit),
        "reviews": reviews,
        "hints": store.hints(limit=limit),
        "solution_views": store.solution_views(limit=limit),
    }


def _concept(exercise_id: str, question_id: str) -> str | None:
    """The concept of a discussion question (None for one no longer in the catalogue)."""
    exercise = catalog.exercises().get(exercise_id)
    return next((q.concept for q in exercise.questions if q.id == question_id), None) if exercise else None


@dataclass(frozen=True)
class Progress:
    exercise: str
    title: str
    runs: int
    best: tuple[int, int] | None  # (checks passed, total) of the best full run
    last: tuple[int, int] | None
    passed: bool
    bugs_seen: tuple[str, ...]
    hints_used: int
    hints_total: int
    cards_due: int
    cards_total: int
    mocks: int

    def to_json(self) -> dict:
        return {
            "exercise": self.exercise,
            "runs": self.runs,
            "best": list(self.best) if self.best else None,
            "last": list(self.last) if self.last else None,
            "passed": self.passed,
            "bugs_seen": list(self.bugs_seen),
            "hints_used": self.hints_used,
            "hints_total": self.hints_total,
            "cards_due": self.cards_due,
            "cards_total": self.cards_total,
            "mocks": self.mocks,
        }


def progress(store: Store) -> list[Progress]:
    from attn_kit.practice.review import due_counts_by_exercise

    due = due_counts_by_exercise(store)
    rows = []
    for exercise in catalog.exercises().values():
        runs = store.checks(exercise.id)
        full = [r for r in runs if not r["public_only"]]
        best = max(full, key=lambda r: (r["points"], r["checks_passed"]), default=None)
        last = full[0] if full else None
        bugs: list[str] = []
        for run in reversed(runs):
            bugs += [b for b in run["bugs"] if b not in bugs]
        rows.append(
            Progress(
                exercise.id,
                exercise.title,
                len(runs),
                (best["checks_passed"], best["checks_total"]) if best else None,
                (last["checks_passed"], last["checks_total"]) if last else None,
                any(r["passed"] for r in full),
                tuple(bugs),
                hints_used(store, exercise.id),
                len(exercise.hints),
                due.get(exercise.id, 0),
                len(exercise.questions),
                len(store.mocks(exercise.id)),
            )
        )
    return rows


# --- where am I: plain `attn-kit` and `attn-kit list` ------------------------------------------


class ExerciseState(StrEnum):
    """Where the user is with an exercise, from the history."""

    NOT_STARTED = "not started"
    STARTED = "started"  # `attn-kit start` wrote its file; not checked yet
    ATTEMPTED = "attempted"  # graded at least once, never passed
    PASSED = "passed"  # a full graded run passed


@dataclass(frozen=True)
class Status:
    exercise: str
    state: ExerciseState
    best: tuple[int, int] | None  # (checks passed, total) of the best full graded run
    last_file: str | None

    @property
    def label(self) -> str:
        return self.state + (f" · best {self.best[0]}/{self.best[1]}" if self.best else "")


def statuses(store: Store | None) -> dict[str, Status]:
    """Every exercise's state from the history (`store` None: nothing recorded yet)."""
    result: dict[str, Status] = {}
    if store is not None:
        for row in progress(store):
            runs = store.checks(row.exercise, limit=1)
            state = ExerciseState.PASSED if row.passed else ExerciseState.ATTEMPTED if row.runs else ExerciseState.NOT_STARTED
            result[row.exercise] = Status(row.exercise, state, row.best, runs[0]["file"] if runs else None)
    for exercise_id in catalog.exercises():
        result.setdefault(exercise_id, Status(exercise_id, ExerciseState.NOT_STARTED, None, None))
    started = _started()
    if started is not None and result[started["exercise"]].state == ExerciseState.NOT_STARTED:
        result[started["exercise"]] = Status(started["exercise"], ExerciseState.STARTED, None, started["file"])
    return result


STARTED_FILE = "started.json"  # in the data folder: the exercise `attn-kit start` made current


def mark_started(exercise_id: str, path: Path) -> None:
    """`attn-kit start` makes its exercise the current one (until a later check or mock of
    another). Written beside the history, not in it, so starting never creates the history; a
    failure to write only loses that, never the start."""
    from attn_kit.practice.store import home, iso

    try:
        folder = home()
        folder.mkdir(parents=True, exist_ok=True)
        _atomic_write(folder / STARTED_FILE, json.dumps({"exercise": exercise_id, "file": str(path), "at": iso(now())}))
    except OSError:
        pass


def _started() -> dict | None:
    from attn_kit.practice.store import home

    try:
        data = json.loads((home() / STARTED_FILE).read_text(encoding="utf-8"))
        if data["exercise"] in catalog.exercises():
            return {"exercise": data["exercise"], "file": str(data["file"]), "at": parse_time(data["at"])}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def current_exercise(store: Store | None) -> tuple[str | None, str | None]:
    """(the current exercise, the file `start` wrote for it if starting it was the latest step):
    the exercise of the latest check, mock or `attn-kit start`; (None, None) before any."""
    started = _started()
    latest, when = None, None
    if store is not None:
        latest = store.current_exercise()
        times = [r["at"] for r in store.checks(limit=1)] + [r["started_at"] for r in store.mocks(limit=1)]
        when = max((parse_time(t) for t in times), default=None)
    if started is not None and (when is None or started["at"] >= when):
        return started["exercise"], started["file"]
    return latest, None


def next_step(store: Store | None) -> tuple[Status, str]:
    """The current exercise (the latest checked, mocked or started, else the first) and the
    command to run next."""
    states = statuses(store)
    current, started_file = current_exercise(store)
    current = current or next(iter(catalog.exercises()))
    status = states[current]
    if started_file:
        return status, f"attn-kit check {started_file}"
    if status.state == ExerciseState.ATTEMPTED:
        return status, f"attn-kit check {status.last_file}"
    if status.state == ExerciseState.NOT_STARTED:
        return status, f"attn-kit start {current} {catalog.default_file(current)}"
    ahead = [s for s in states.values() if s.state != ExerciseState.PASSED]
    if not ahead:
        return status, "attn-kit discuss"
    nxt = ahead[0].exercise
    return status, (
        f"attn-kit check {ahead[0].last_file}"
        if ahead[0].state == ExerciseState.ATTEMPTED
        else f"attn-kit start {nxt} {catalog.default_file(nxt)}"
    )
