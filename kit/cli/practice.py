"""The practice commands: hint, solution, reset, mock, discuss, history, progress; plus the two
hooks `check` uses (recording a run, and --watch).

Thin click layer like cli/app.py: parse, call the library (practice, mock, review), hand what it
returns to the render modules (render_practice), pick the exit status. For `mock` the library
drives the session and this layer supplies its user-facing steps (MockTerminal: prompts, keys,
the live display).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import click

from attn_kit.cli.common import EXIT_PASS, FiniteFloat, reports_errors
from attn_kit.report import jsonout


def _open_store():
    """Open the history database, showing any warning (e.g. a damaged file moved aside), and,
    the first time, where it is kept."""
    from attn_kit.practice.store import db_path, open_store
    from attn_kit.render import check
    from attn_kit.render import practice as render_practice

    first = not db_path().exists()
    store = open_store()
    for text in store.warnings:
        check.warning(text)
    if first:
        render_practice.history_created(store.path)
    return store


# --- hooks used by `attn-kit check` -------------------------------------------------------------


def record_run(report, source: str = "check"):
    """Save a check run to history and rate concept cards. Never raises: a storage problem is
    a warning on stderr. Returns practice.Recorded, or None when nothing was saved (the kit's
    own bundled files are never recorded)."""
    from attn_kit.practice import progress as practice
    from attn_kit.practice.store import StoreError
    from attn_kit.render import check

    if practice.bundled_file(report.path):
        return None
    try:
        with _open_store() as store:
            return practice.record_check(store, report, source)
    except (StoreError, ValueError, KeyError) as exc:
        check.warning(f"this run was not saved to your history: {exc}")
        return None


def after_check(report, source: str = "check") -> None:
    """Called by `check` after the report is shown: record it (source `locate` when --locate
    searched, so a mock report can tell), then print the hints-used line."""
    from attn_kit.practice import progress as practice
    from attn_kit.render import practice as render_practice

    if practice.bundled_file(report.path):
        if report.passed and not report.public_only:
            render_practice.passed_next(report.exercise, None)
        render_practice.not_recorded_bundled(report.path)
        return
    recorded = record_run(report, source)
    if recorded is not None:
        render_practice.after_check(recorded, report)


def notes_after_check(report) -> tuple:
    """The note after_check will print for this run, for the first screen to make room for: why a
    bundled file is not saved, or, when this run creates the history (_open_store), where it is."""
    from attn_kit.practice import progress as practice
    from attn_kit.practice.store import db_path
    from attn_kit.render import practice as render_practice

    if practice.bundled_file(report.path):
        return (render_practice.bundled_note(report.path),)
    return () if db_path().exists() else (render_practice.history_note(db_path()),)


def watch_check(file: Path, options, as_json: bool = False, repro: Path | None = None) -> int:
    """`check --watch`: re-run on every save until q or Ctrl-C; returns the exit status (0)."""
    import dataclasses
    import random

    from attn_kit.base.errors import KitError, UsageError
    from attn_kit.grading import pipeline
    from attn_kit.load import catalog
    from attn_kit.practice.watch import FileWatcher, Interrupts, Keys
    from attn_kit.render import practice as render_practice

    if as_json or repro:
        raise UsageError("--watch shows a live screen; it does not combine with --json or --repro.")
    if not file.exists():
        from attn_kit.load.preflight import missing_file

        raise UsageError(missing_file(file))
    if options.seed is None:  # one seed for the whole session, so results only move when the code does
        options = dataclasses.replace(options, seed=random.SystemRandom().randrange(1, 100_000))
    watcher = FileWatcher(file)
    runs = 0

    def run_once():
        nonlocal runs
        runs += 1
        try:
            report = pipeline.grade(file, options)
        except KitError as exc:
            render_practice.watch_screen(file, error=str(exc), mode=watcher.mode, note=watcher.note, runs=runs)
            return
        recorded = record_run(report, "watch")
        render_practice.watch_screen(
            file, report, exercise=catalog.exercise(report.exercise), recorded=recorded, mode=watcher.mode, note=watcher.note, runs=runs
        )

    try:
        with Interrupts() as ctrl_c, Keys() as keys:
            run_once()
            while not ctrl_c.seen:
                changed = watcher.wait()
                pressed = keys.read()
                if "q" in pressed:
                    break
                if (changed or "r" in pressed) and not ctrl_c.seen:
                    run_once()
    except KeyboardInterrupt:
        pass
    finally:
        watcher.close()
    return EXIT_PASS


# --- hint, solution, reset ----------------------------------------------------------------------


@click.command()
@click.argument("exercise", required=False)
@click.option("--all", "show_all", is_flag=True, help="Show every hint at once.")
@click.option("--level", type=int, metavar="N", help="Show hint N (the check output points to these).")
@reports_errors
def hint(exercise, show_all, level):
    """Show the next hint for EXERCISE (default: your current one), gentlest first.

    The next hint is about what your last check of the exercise failed (a question, then the
    idea, then near-code); with no failed check, the next unseen one. Hints
    you have seen are recorded; `check` and mock reports show how many you used.

    \b
    Examples:
      attn-kit hint
      attn-kit hint mha-screen
      attn-kit hint mha-screen --level 3
      attn-kit hint mha-screen --all
    """
    from attn_kit.load import catalog
    from attn_kit.practice import progress as practice
    from attn_kit.render import practice as render_practice

    with _open_store() as store:
        if exercise is None:
            exercise = practice.current_exercise(store)[0] or next(iter(catalog.exercises()))
        ex = catalog.exercise(exercise)
        shown = practice.take_hints(store, ex, level=level, show_all=show_all)
        used = practice.hints_used(store, ex.id)
    render_practice.hints(ex, shown, used)


@click.command()
@click.argument("exercise")
@click.option("--force", is_flag=True, help="Show it before you have passed or used every hint (recorded).")
@reports_errors
def solution(exercise, force):
    """Show the reference solution of EXERCISE with its commentary.

    It opens once a full `attn-kit check` of your file has passed, or once you have used
    every hint. --force shows it anyway, and your history records that.

    \b
    Examples:
      attn-kit solution mha-screen
      attn-kit solution mha-screen --force
    """
    from attn_kit.load import catalog
    from attn_kit.practice import progress as practice
    from attn_kit.render import practice as render_practice

    ex = catalog.exercise(exercise)
    with _open_store() as store:
        files, forced = practice.solution(store, ex, force=force)
    render_practice.solution(ex, files, forced)


@click.command()
@click.argument("exercise")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--yes", "-y", is_flag=True, help="Do not ask before overwriting FILE.")
@reports_errors
def reset(exercise, file, yes):
    """Rewrite FILE with the starter of EXERCISE, after asking.

    The previous content is kept in the attn-kit data folder (the path is printed).

    \b
    Example:
      attn-kit reset mha-screen solution.py
    """
    from attn_kit.load import catalog
    from attn_kit.load.preflight import file_exercise
    from attn_kit.practice import progress as practice
    from attn_kit.render import practice as render_practice

    ex = catalog.exercise(exercise)
    if file.exists() and not yes:
        other = file_exercise(file)
        note = f" (its header says it is for {other})" if other and other != ex.id else ""
        if not click.confirm(f"Replace {file}{note} with a fresh {ex.id} starter (backup kept)?"):
            render_practice.reset_declined(file)  # a choice, not a failure: exit 0
            return
    backup = practice.reset(ex, file)
    render_practice.reset_done(file, backup)


def read_answer() -> list[str]:
    """A free answer of any number of lines, ended by an empty one (or end of input): the same in
    `mock` and `discuss`."""
    lines: list[str] = []
    while True:
        line = click.prompt("", default="", show_default=False, prompt_suffix="> ")
        if not line.strip():
            return lines
        lines.append(line)


# --- mock ---------------------------------------------------------------------------------------


class MockTerminal:
    """mock.Terminal for a real terminal: what a mock screen shows, asks and reads, through click
    and the render modules."""

    def intro(self, exercise, file: Path, minutes: float) -> None:
        from attn_kit.render import practice as render_practice

        render_practice.mock_intro(exercise, file, minutes)

    def keys(self):
        from attn_kit.practice.watch import Keys

        return Keys()

    @contextlib.contextmanager
    def live(self):
        from attn_kit.render import practice as render_practice

        with render_practice.mock_live() as update:
            shown = ""

            def show(remaining: float, status) -> None:
                nonlocal shown
                line = render_practice.mock_status(remaining, status)
                if line.plain != shown:  # redraw only when the second or the status changes
                    shown = line.plain
                    update(line)

            yield show

    def ended(self, reason: str, used: float) -> None:
        from attn_kit.render import practice as render_practice

        render_practice.mock_ended(reason, used)

    def submit_or_abandon(self) -> bool:
        """Ask after Ctrl-C; True to submit. Enter or end of input take the stated default, submit;
        a second Ctrl-C abandons."""
        while True:
            click.echo("Submit this solution now, or abandon the session? (submit, abandon) [submit]: ", nl=False)
            try:
                line = sys.stdin.readline()
            except KeyboardInterrupt:
                click.echo()
                return False
            if not line:  # end of input: the default
                click.echo()
                return True
            answer = line.strip().lower()
            if answer in ("", "submit", "s"):
                return True
            if answer in ("abandon", "a"):
                return False
            click.echo("Type submit (or s) or abandon (or a).")

    def heading(self, text: str) -> None:
        from attn_kit.render import practice as render_practice

        render_practice.mock_heading(text)

    def graded(self, report, exercise) -> None:
        from attn_kit.render import screen

        # brief: the first screen, without check's options; no exercise: the mock shows its
        # follow-ups once, in their own section
        screen.report(report, brief=True)

    def error(self, message: str) -> None:
        from attn_kit.render import check

        check.error(message)

    def warning(self, message: str) -> None:
        from attn_kit.render import check

        check.warning(message)

    def ask(self, question, index: int, count: int) -> tuple[str, list[bool]] | None:
        """The question, a free answer ended by an empty line, then each key point: covered?
        None when Ctrl-C or end of input cuts it short."""
        from attn_kit.render import practice as render_practice

        try:
            render_practice.discussion_question(index, count, question)
            lines = read_answer()
            render_practice.key_points_intro()
            covered = []
            for number, point in enumerate(question.key_points, 1):
                render_practice.key_point(number, point, required=number - 1 in question.required)
                covered.append(click.confirm("     covered?", default=False))
            render_practice.discussion_score(sum(covered), len(covered))
        except (click.Abort, EOFError, KeyboardInterrupt):
            click.echo()  # end the prompt's line before the warning that follows
            return None
        return "\n".join(lines), covered

    def followups(self, exercise) -> None:
        from attn_kit.render import practice as render_practice

        render_practice.followups(exercise)

    def report_markdown(self, data: dict) -> str:
        from attn_kit.render import practice as render_practice

        return render_practice.mock_report_markdown(data)

    def finished(self, path: Path, status: str, report, discussion) -> None:
        from attn_kit.render import practice as render_practice

        render_practice.mock_finished(path, status, report, discussion)

    def level(self, open_rows: list[dict]) -> str:
        """What is left to score, then the level for the recommendation's rule; Enter takes mid.
        EOFError at end of input."""
        from attn_kit.grading.rubric import DEFAULT_LEVEL, LEVELS
        from attn_kit.render import practice as render_practice

        render_practice.self_assessment_intro(open_rows)
        return self._choice(f"Level ({', '.join(LEVELS)}) [{DEFAULT_LEVEL}]: ", {**{lv: lv for lv in LEVELS}, "": DEFAULT_LEVEL})

    def self_score(self, row: dict, index: int, count: int) -> int | None:
        """A score 1-4 for one dimension; Enter skips (None). EOFError at end of input."""
        from attn_kit.render import practice as render_practice

        render_practice.self_score_dimension(row, index, count)
        answer = self._choice(f"{row['dimension']} 1-4 (Enter skips): ", {"1": "1", "2": "2", "3": "3", "4": "4", "": ""})
        return int(answer) if answer else None

    def self_assessed(self, data: dict, given: dict[str, int], path: Path) -> None:
        from attn_kit.render import practice as render_practice

        render_practice.self_assessed(data, given, path)

    def _choice(self, prompt: str, answers: dict[str, str]) -> str:
        """Read one line until it is one of `answers` (lower-cased); EOFError at end of input."""
        while True:
            click.echo(prompt, nl=False)
            line = sys.stdin.readline()
            if not line:
                click.echo()
                raise EOFError
            answer = line.strip().lower()
            if answer in answers:
                return answers[answer]
            click.echo(f"Type one of: {', '.join(a for a in answers if a)}, or Enter.")


@click.command()
@click.argument("exercise", required=False)
@click.option(
    "--minutes", type=FiniteFloat(min=0.05, max=24 * 60), metavar="N", help="Length of the session (default: the exercise's, usually 45)."
)
@click.option(
    "--dir",
    "parent",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Folder in which the new session folder is created.",
)
@click.option("--interviewer", is_flag=True, help="Only print the interviewer's sheet: statement, what to watch for, key points.")
@click.option(
    "--scores",
    metavar="SCORES",
    help="With --interviewer: the six scores given (e.g. 3,2,3,3,2,3 in the sheet's order); the "
    "sheet then shows the recommendation and why.",
)
@click.option(
    "--level",
    "level",
    type=click.Choice(["junior", "mid", "senior"]),
    default=None,
    help="With --interviewer: the candidate's level, whose rule turns the scores into a recommendation (default mid).",
)
@click.option(
    "--unattended", is_flag=True, help="Run even though input is not a terminal (no keys; ends at time-up; defaults at end of input)."
)
@reports_errors
def mock(exercise, minutes, parent, interviewer, scores, level, unattended):
    """Run a timed mock screen.

    Writes a fresh starter into a new session folder, shows the statement and a live
    countdown, re-runs the public examples each time you save, and at the end (time-up, `s`
    to submit, or Ctrl-C) runs the full graded suite, asks 2-3 discussion questions, shows the
    follow-ups and writes report.md and report.json into the session folder.

    Without EXERCISE, picks the first exercise you have not yet passed in a mock.

    Correctness is scored from the causes the diagnosis finds; --interviewer prints the anchors
    for all six dimensions and the rule that turns the six scores into strong hire, hire, lean
    no or no (with --scores, the verdict and the reasons).

    \b
    Examples:
      attn-kit mock mha-screen --minutes 45
      attn-kit mock --dir ~/screens
      attn-kit mock mha-screen --interviewer
      attn-kit mock mha-screen --interviewer --scores 3,2,3,3,2,3 --level senior
    """
    from attn_kit.base.errors import UsageError
    from attn_kit.load import catalog
    from attn_kit.practice import mock as mock_module
    from attn_kit.practice.store import StoreError
    from attn_kit.render import practice as render_practice

    if scores is not None and not interviewer:
        raise UsageError("--scores goes with --interviewer: it fills in the sheet's recommendation.")
    if level is not None and not interviewer:
        raise UsageError("--level goes with --interviewer: it picks the rule the sheet's recommendation follows.")
    if interviewer:
        from attn_kit.grading.rubric import parse_scores

        given = parse_scores(scores) if scores is not None else None
        ex = catalog.exercise(exercise) if exercise else mock_module.choose_exercise(None)
        render_practice.interviewer_sheet(ex, scores=given, level=level)
        return
    store = None
    try:
        store = _open_store()
    except StoreError as exc:
        from attn_kit.render import check

        check.warning(f"{exc}; this session will not be saved to your history.")
    try:
        code, _ = mock_module.run(exercise, minutes, parent, store, MockTerminal(), unattended=unattended, terminal=sys.stdin.isatty())
    finally:
        if store is not None:
            store.close()
    sys.exit(code)


# --- discuss ------------------------------------------------------------------------------------


@click.command()
@click.argument("exercise", required=False)
@click.option("--due", "due_only", is_flag=True, help="Only cards due now (no new questions).")
@click.option(
    "--new",
    "new",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="How many never-seen questions to add after the due cards.",
)
@reports_errors
def discuss(exercise, due_only, new):
    """Review the discussion questions as flashcards (spaced repetition with FSRS).

    For each card: read the question, answer it (aloud or typed), see the key points, then rate
    yourself 1 again, 2 hard, 3 good or 4 easy; q stops. Failing a check on a concept also
    brings that concept's cards back.

    \b
    Examples:
      attn-kit discuss
      attn-kit discuss mha-screen --new 2
      attn-kit discuss --due
    """
    from attn_kit.load import catalog
    from attn_kit.practice import progress as practice
    from attn_kit.practice import review
    from attn_kit.practice.store import now
    from attn_kit.render import practice as render_practice

    if exercise:
        catalog.exercise(exercise)
    with _open_store() as store:
        current = None if exercise else practice.current_exercise(store)[0]
        entries = review.queue(store, exercise, due_only=due_only, new=new, first=current)
        if not entries:
            render_practice.nothing_to_review(review.outlook(store, exercise), due_only, new)
            return
        reviewed: list = []
        choices = click.Choice(sorted(set(review.RATINGS) | {"q"}))
        deck = len(entries)  # the session's size, as first said: cards coming back later do not change it
        try:
            index = 0
            while index < len(entries):
                entry = entries[index]
                index += 1
                render_practice.card_front(index, deck, entry, current=current)
                render_practice.answer_prompt()
                read_answer()
                render_practice.card_back(entry)
                answer = click.prompt("Rate it: 1 again · 2 hard · 3 good · 4 easy · q quit", type=choices, show_choices=False)
                if answer == "q":
                    break
                at = now()
                card = review.review(store, entry.exercise.id, entry.question, review.RATINGS[answer], at=at)
                render_practice.card_scheduled(card.due, at)
                reviewed.append(entry)
                if index == len(entries):  # cards that came due during the session (a minute after "again")
                    queued = {e.key for e in entries[index:]}
                    entries += [e for e in review.queue(store, exercise, due_only=True, first=current) if e.key not in queued]
        except (click.Abort, EOFError, KeyboardInterrupt):  # Ctrl-C or end of input: stop, keep what was rated
            render_practice.discuss_stopped()
        render_practice.discuss_summary(len(reviewed), review.outlook(store, exercise))


# --- history, progress --------------------------------------------------------------------------


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
@click.option(
    "--limit",
    type=click.IntRange(min=1, max=1_000_000),
    default=20,
    show_default=True,
    help="How many of the most recent entries of each kind.",
)
@click.option("--where", is_flag=True, help="Only print the path of the history file (ATTN_KIT_HOME moves it).")
@reports_errors
def history(as_json, limit, where):
    """List your past check runs, mock screens, reviews, hints and solution views.

    \b
    Examples:
      attn-kit history
      attn-kit history --json --limit 100
      attn-kit history --where
    """
    from attn_kit.practice import progress as practice
    from attn_kit.render import practice as render_practice

    if where:
        from attn_kit.practice.store import db_path

        click.echo(jsonout.dumps({"path": str(db_path())}) if as_json else str(db_path()))
        return
    with _open_store() as store:
        data = practice.history(store, limit)
    if as_json:
        click.echo(jsonout.dumps(data))
    else:
        render_practice.history(data)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list instead of a table.")
@reports_errors
def progress(as_json):
    """Per exercise: best and last score, bugs seen, hints used, discussion cards due.

    \b
    Example:
      attn-kit progress
    """
    from attn_kit.practice import progress as practice
    from attn_kit.render import practice as render_practice

    with _open_store() as store:
        rows = practice.progress(store)
    if as_json:
        click.echo(jsonout.dumps([r.to_json() for r in rows]))
    else:
        render_practice.progress(rows)
