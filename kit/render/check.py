"""What `check`, `list`, `start`, `show` and `test-tests` show in the terminal. rich is imported only
here and in the other render modules (render/practice.py, render/bench.py), which share this
module's console and theme.

Styles have names that say what they mean (check.fail, not bold red) and live in one Theme.
Colour is off under NO_COLOR and when output is piped (rich's own rules).
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator
from typing import IO, cast

from rich.console import Console, Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from rich.theme import Theme

from attn_kit.base.records import TestOutcome
from attn_kit.base.text import for_terminal, valid_unicode
from attn_kit.report.results import FAILED, CheckResult, CheckStatus, Report

THEME = Theme(
    {
        "check.pass": "green",
        "check.fail": "bold red",
        "check.error": "bold magenta",
        "check.skip": "dim",
        "score.good": "bold green",
        "score.bad": "bold red",
        "label": "bold",
        "muted": "dim",
        "expected": "green",
        "actual": "red",
        "bug.id": "bold yellow",
        "hint": "cyan",
        "error": "bold red",
        "warning": "yellow",
        "command": "bold cyan",
    }
)

MARK = {CheckStatus.PASS: "✓", CheckStatus.FAIL: "✗", CheckStatus.ERROR: "!", CheckStatus.SKIP: "–"}


@functools.cache
class Unpadded(io.TextIOBase):
    """A text stream that drops the spaces rich pads table cells and padded blocks with at the end
    of each line. Used when stdout is not a terminal, so piped or saved output has no trailing
    blanks (on a terminal they are invisible and Live redraws need them)."""

    def __init__(self, stream):
        self.stream = stream
        self.pending = ""  # spaces at the end of the last write, kept until we see what follows

    def write(self, text: str) -> int:
        whole = self.pending + text
        lines = whole.split("\n")
        last = lines[-1].rstrip(" ")
        self.pending = lines[-1][len(last) :]
        self.stream.write("\n".join([line.rstrip(" ") for line in lines[:-1]] + [last]))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self):  # type: ignore[override]  # typeshed: a plain attribute; at run time read-only
        return getattr(self.stream, "encoding", "utf-8")


class KitConsole(Console):
    """A Console that, when its reader goes away (`attn-kit check FILE | head`), drops the rest of
    its output and lets the command finish (save the run, exit with its own status) instead of
    rich's default of exiting with status 1."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)


def console() -> Console:
    stdout = sys.stdout
    piped = not (hasattr(stdout, "isatty") and stdout.isatty())
    # rich asks for an IO[str] and writes through write/flush/isatty/fileno/encoding, which Unpadded
    # (a TextIOBase, which typeshed does not relate to IO[str]) has
    return KitConsole(theme=THEME, highlight=False, file=cast(IO[str], Unpadded(stdout)) if piped else None)


def hanging(prefix: Text | str, body: Text) -> Table:
    """`prefix` then `body`, whose wrapped lines keep the indent of its first line."""
    prefix = Text(prefix) if isinstance(prefix, str) else prefix
    grid = Table.grid()
    grid.add_column(width=prefix.cell_len, no_wrap=True)
    grid.add_column()
    grid.add_row(prefix, body)
    return grid


@functools.cache
def error_console() -> Console:
    return Console(theme=THEME, highlight=False, stderr=True)


def error(message: str) -> None:
    """`Error: message` on stderr. On a terminal its prose wraps between words; its indented lines
    (a source line and its caret) are never re-wrapped. Piped, each line stays whole."""
    err = error_console()
    for i, line in enumerate(valid_unicode(message).split("\n")):  # a non-UTF-8 path in it cannot break the print
        text = (Text("Error: ", style="error") if i == 0 else Text()) + Text(line)
        err.print(text, soft_wrap=not err.is_terminal or line.startswith((" ", "\t")))


def warning(message: str) -> None:
    error_console().print(Text("Warning: ", style="warning") + Text(message))


def info(message: str) -> None:
    console().print(message)


@contextlib.contextmanager
def working(text: str) -> Iterator[Callable[[str], None]]:
    """A live line on stderr while slow work runs: a spinner, `text` and the seconds so far; it is
    removed when the work ends. Yields `update(text)` to change the text (any thread may call it).
    Nothing at all is drawn when stderr is not a terminal or under CI, so piped output is
    unchanged (--json runs do not call it: cli.app._progress).

    It redraws only when `update` is called, from the caller's thread, never from a timer thread
    of its own: check forks its sandbox's zygote while this line is up, and a fork must not copy a
    thread that may hold a lock. Used by check, test-tests and bench."""
    err = error_console()
    if not err.is_terminal or os.environ.get("CI"):
        yield lambda text: None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    line = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        auto_refresh=False,
        redirect_stdout=False,
        redirect_stderr=False,
    )
    lock = threading.Lock()
    with line:
        task = line.add_task(text, total=None)
        line.refresh()

        def update(new: str) -> None:
            with lock:
                line.update(task, description=new)
                line.refresh()

        yield update


# --- exercises ------------------------------------------------------------------------------


def exercise_list(exercises, statuses: dict[str, str] | None = None, out: Console | None = None) -> None:
    """One line per exercise at any width: id, your status (not started / started / attempted /
    passed, best score), what it needs, and its title, shortened at a word with … to fit the line;
    narrower, the needs go before the title, then the title is left out (the id and status always
    fit whole at 60 columns). `attn-kit show ID` has the rest."""
    import textwrap

    from attn_kit.practice.progress import ExerciseState

    out = out or console()
    statuses = statuses or {}
    exercises = list(exercises)
    labels = {e.id: str(statuses.get(e.id, ExerciseState.NOT_STARTED)) for e in exercises}
    columns = [("id", max(len(e.id) for e in exercises)), ("status", max(len(label) for label in labels.values()))]
    needs = ("needs", max(len("needs"), *(len(e.needs) for e in exercises)))
    room = out.width - 1 - sum(width + 2 for _, width in columns)
    if any(e.needs for e in exercises) and room - needs[1] - 2 >= 24:  # else said after the title
        columns.append(needs)
        room -= needs[1] + 2

    def line(cells: list[Text], rest: str, style: str = "", prefix: str = "") -> Text:
        text = Text()
        for cell, (_, width) in zip(cells, columns):
            text += cell + Text(" " * (width - cell.cell_len + 2))
        fit = room - len(prefix)
        if fit >= 12:  # narrower: the column is left out
            head = rest.split(":", 1)[0]  # the clause before the details
            fits = (
                rest
                if len(rest) <= fit
                else head
                if len(head) <= fit
                else textwrap.shorten(head, fit, placeholder="…", break_on_hyphens=False)
            )
            text += Text(prefix, style="muted") + Text(fits, style=style)
        text.rstrip()
        return text

    out.print(line([Text(name, style="label") for name, _ in columns], "title", "label"), no_wrap=True)
    for e in exercises:
        state = labels[e.id]  # a Status.label: the state, then the best score
        style = (
            "check.pass"
            if state.startswith(ExerciseState.PASSED)
            else "warning"
            if state.startswith((ExerciseState.ATTEMPTED, ExerciseState.STARTED))
            else "muted"
        )
        cells = [Text(e.id, style="command"), Text(state, style=style)]
        if len(columns) == 3:
            cells.append(Text(e.needs, style="muted"))
        prefix = f"({e.needs}) " if len(columns) == 2 and e.needs else ""
        out.print(line(cells, e.title, prefix=prefix), no_wrap=True, overflow="ellipsis")
    out.print(Text("Start one with: ", style="muted") + Text("attn-kit start EXERCISE FILE", style="command"))


def where_you_are(status, command: str, out: Console | None = None) -> None:
    """Plain `attn-kit`: the current exercise, its state, the next command."""
    out = out or console()
    out.print(
        Text("Current exercise: ", style="label") + Text(status.exercise, style="command") + Text(f" ({status.label})", style="muted")
    )
    out.print(Text("Next: ", style="label") + Text(command, style="command"), soft_wrap=True)
    out.print(
        Text("All exercises: ", style="muted")
        + Text("attn-kit list", style="command")
        + Text(" · every command: ", style="muted")
        + Text("attn-kit --help", style="command")
    )


# --- check reports ----------------------------------------------------------------------------


def _row(values, offset: int) -> str:
    text = ", ".join(f"{v:.6g}" for v in values)
    return f"[{'…, ' if offset else ''}{text}]"


def _clip(output: str, limit: int = 1500) -> str:
    """At most `limit` characters of captured output, keeping the worker's truncation notices."""
    if len(output) <= limit:
        return output
    notices = [line for line in output.splitlines() if line.startswith("… [output truncated")]
    return "\n".join([output[:limit], f"… [{len(output) - limit:,} more characters not shown here]", *notices[:1]])


def _failure(result: CheckResult, exercise_id: str, public_only: bool = False, brief: bool = False) -> Group:
    """A failure in full; `brief` leaves out the error statistics and the hint line (a screen's
    own lines say which hint is next)."""
    parts = [Text(result.message)]
    m = result.mismatch
    if m is not None:
        start = f" (from index {m.row_offset})" if m.row_offset else ""
        parts.append(Text(f"worst row{start}:", style="muted"))
        parts.append(Text("  expected ", style="muted") + Text(_row(m.expected_row, m.row_offset), style="expected"))
        parts.append(Text("  yours    ", style="muted") + Text(_row(m.actual_row, m.row_offset), style="actual"))
        relative = "n/a (expected 0)" if m.max_rel != m.max_rel else f"{m.max_rel:.3g}"
        error = f"max |Δ| = {m.max_abs:.3g}, max relative = {relative}" if not m.nan_count else "max |Δ| undefined (NaN)"
        if not brief:
            parts.append(Text(f"{error}, {m.wrong_count}/{m.total} entries off, NaN {m.nan_count}, inf {m.inf_count}", style="muted"))
    case = {k: v for k, v in result.case.items() if not (public_only and k == "seed")}  # --public: fixed cases
    if case:
        facts = ", ".join(f"{k}={v}" for k, v in case.items())
        parts.append(Text("case: ", style="muted") + Text(facts))
    for note in result.notes:
        parts.append(Text(note, style="muted"))
    if result.output.strip():
        parts.append(Text("your code printed:", style="muted"))
        parts.append(Text(_clip(result.output.rstrip())))
    if result.hint and not brief:
        parts.append(Text("hint: ", style="hint") + Text(f"attn-kit hint {exercise_id} --level {result.hint}", style="command"))
    return Group(*parts)


LEGEND = {
    CheckStatus.FAIL: "✗ failed",
    CheckStatus.ERROR: "! your code raised, hung or crashed",
    CheckStatus.SKIP: "– not checked (no points)",
}
COMPACT_AFTER = 5  # more failures shown in full than this, and the report goes compact (as --first)


def legend(results) -> Text | None:
    """One line explaining the marks that appear in the table, if any but ✓ do."""
    seen = [LEGEND[status] for status in LEGEND if any(r.status == status for r in results)]
    return Text("  " + " · ".join(seen), style="muted") if seen else None


def short_path(path: str, room: int) -> str:
    """`path` in at most `room` columns if it can be, broken only between folders: as given if it
    fits; else relative to the current folder (or with ~ for the home folder); else its first
    folder, "…" and as many of its last folders as fit, always the file's own name."""
    if len(path) <= room:
        return path
    shown = path
    with contextlib.suppress(OSError, ValueError):
        full = os.path.abspath(path)
        cwd, home = os.getcwd(), os.path.expanduser("~")
        if full.startswith(cwd + os.sep):
            shown = os.path.relpath(full, cwd)
        elif home not in ("", os.sep) and full.startswith(home + os.sep):
            shown = "~" + full[len(home) :]
    if len(shown) <= room:
        return shown
    parts = shown.split(os.sep)
    if len(parts) <= 2:  # a bare file name, or one folder: nothing to leave out
        return shown
    first = parts[0] + os.sep if parts[0] else os.sep + parts[1] + os.sep  # "~/", "/work/", "solutions/"
    rest = parts[1:] if parts[0] else parts[2:]
    for keep in range(len(rest) - 1, 0, -1):
        for start in (first + "…" + os.sep, "…" + os.sep):
            candidate = start + os.sep.join(rest[-keep:])
            if len(candidate) <= room:
                return candidate
    return "…" + os.sep + parts[-1]


def check_header(rep: Report, width: int) -> Text:
    """`attn-kit check EXERCISE · PATH · seed N` on one line of `width`: a long path is shortened
    between its folders (short_path) so the seed stays on the line. When even `…/NAME` leaves no
    room (narrow terminals, long names), the path goes on a line of its own below."""
    tail = " · public examples only" if rep.public_only else f" · seed {rep.seed}"
    return _titled("attn-kit check ", rep.exercise, rep.path, tail, width)


def report(
    rep: Report,
    exercise=None,
    out: Console | None = None,
    first: bool | None = None,
    brief: bool = False,
) -> None:
    """A check report. A full pass is its header and one line (plus measured figures; the
    follow-ups come after the run is recorded: render/practice.after_check). Otherwise: the
    table, a legend for its marks, each failure in full, the diagnosis.
    `first=True` (`--first`) shows only the first failure in full and the others one line each;
    None does that past COMPACT_AFTER failures; False shows every failure in full.

    `brief` (watch, the mock's final grading) fits one 80×24 screen: one line naming the failing
    checks instead of the table, the first failure in full (expected next to yours), the
    diagnosis's bug and fix, the score."""
    out = out or console()
    if brief and not rep.passed:
        _brief_report(rep, out)
        return
    out.print(check_header(rep, out.width))
    if not rep.passed:
        _check_table(rep, out)
    _measured_figures(rep, out)
    for note in rep.notes:
        out.print(Text(f"note: {note}", style="warning"))
    failures = [r for r in rep.results if r.status in FAILED]
    rows_shown = _failures(rep, failures, first, out)
    if failures:
        out.print()
        _diagnosis(rep, rows_shown, out)
    if rep.passed:
        _passed(rep, exercise, out)
    else:
        out.print()
        _score(rep, out)


def _check_table(rep: Report, out: Console) -> None:
    """Every check with its mark and points, and a legend for the marks other than ✓."""
    table = Table(show_header=True, header_style="label", box=None, pad_edge=False, expand=False)
    table.add_column("", width=1)
    table.add_column("check", no_wrap=True)
    table.add_column("points", justify="right")
    for r in rep.results:
        style = f"check.{r.status}"
        table.add_row(
            Text(MARK[r.status], style=style),
            Text(r.id, style=style if r.status != CheckStatus.PASS else ""),
            Text(f"{r.points}/{r.max_points}", style="muted"),
        )
    out.print(table)
    key = legend(rep.results)
    if key is not None:
        out.print(key)


def _measured_figures(rep: Report, out: Console) -> None:
    """The notes of passing checks: what they measured (peak memory, cache saving, ...)."""
    for r in rep.results:
        if r.status == CheckStatus.PASS:
            for note in r.notes:
                out.print(Text(f"{r.id}: ", style="muted") + Text(note))


def _failures(rep: Report, failures: list[CheckResult], first: bool | None, out: Console) -> bool:
    """Each failure in full, except: a failure whose bug a failure above already matched takes one
    line, and a compact report (`first`, or past COMPACT_AFTER) gives every failure after the first
    one line. True when a failure shown in full has a worst row (the diagnosis points at it)."""
    in_full = [r for i, r in enumerate(failures) if not (r.bug and r.bug in {f.bug for f in failures[:i]})]
    compact = first if first is not None else len(in_full) > COMPACT_AFTER
    shown_bugs: set[str] = set()
    rows_shown = False
    full_count = 0
    for r in failures:
        if r.bug and r.bug in shown_bugs:
            out.print(_same_cause(r))
        elif compact and full_count >= 1:
            out.print(_one_line(r), overflow="ellipsis", no_wrap=True)
        else:
            out.print()
            out.print(hanging(Text(f"{MARK[r.status]} ", style=f"check.{r.status}"), _failure_head(r)))
            out.print(Padding(_failure(r, rep.exercise, rep.public_only), (0, 0, 0, 2), expand=False))
            rows_shown = rows_shown or r.mismatch is not None
            full_count += 1
        if r.bug:
            shown_bugs.add(r.bug)
    if compact and len(in_full) > 1:
        out.print(
            Text(f"(the first failure in full, the other {len(in_full) - 1} in one line each; --full shows every one)", style="muted")
        )
    return rows_shown


def _failure_head(r: CheckResult) -> Text:
    """`ID — TITLE  matches BUG`: the first line of a failure shown in full."""
    head = Text(r.id, style=f"check.{r.status}") + Text(f" — {r.title}")
    if r.bug:
        head += Text("  matches ", style="muted") + Text(r.bug, style="bug.id")
    return head


def _same_cause(r: CheckResult) -> Table:
    """A failure with the same root cause as one shown in full above: one line is enough."""
    return hanging(
        Text(f"{MARK[r.status]} ", style=f"check.{r.status}"),
        Text(r.id, style=f"check.{r.status}") + Text("  same cause: ", style="muted") + Text(r.bug or "", style="bug.id"),
    )


def _one_line(r: CheckResult) -> Text:
    """A failure in a compact report after the first: its mark, id and the message's first line."""
    line = Text(f"{MARK[r.status]} {r.id}", style=f"check.{r.status}") + Text("  ")
    line += Text(r.message.splitlines()[0] if r.message else r.title, style="muted")
    return line


def _diagnosis(rep: Report, rows_shown: bool, out: Console) -> None:
    """Each known bug the output matches, with what goes wrong, the fix and the evidence; else
    that none matches, where to look instead, and the known bugs that came closest."""
    if not rep.diagnosis:
        advice = "read the worst rows above." if rows_shown else "read the messages above."
        out.print(Text("Diagnosis: ", style="label") + Text(f"no known bug matches these failures; {advice}"))
        for near_miss in rep.near_misses:
            out.print(Padding(Text(near_miss, style="muted"), (0, 0, 0, 2), expand=False))
        return
    out.print(Text("Diagnosis", style="label"))
    for d in rep.diagnosis:
        out.print(
            hanging(Text("  ● ", style="bug.id"), Text("Your output matches ") + Text(d.bug, style="bug.id") + Text(f" — {d.title}."))
        )
        out.print(
            Padding(
                Group(Text(d.explanation), Text("Fix: " + d.fix, style="hint"), Text(d.evidence, style="muted")),
                (0, 0, 0, 4),
                expand=False,
            )
        )


def _skipped(rep: Report) -> int:
    return sum(r.status == CheckStatus.SKIP for r in rep.results)


def _passed(rep: Report, exercise, out: Console) -> None:
    """The line of a report that passed. What it unlocked and the follow-ups come once the run is
    recorded (render/practice.after_check), which knows the exercises already passed."""
    total, skipped = len(rep.results), _skipped(rep)
    got, most = rep.points
    verdict = f"✓ All {total} checks passed" if not skipped else f"✓ All {total - skipped} checks that ran passed ({skipped} not checked)"
    public = " (public examples only: run without --public for the full graded suite)" if rep.public_only else ""
    out.print(Text(verdict, style="score.good") + Text(f" — {got}/{most} points." + public))


def _score(rep: Report, out: Console) -> None:
    """The score of a report that failed, and how to rerun the same cases: on the score's line if
    it fits, else on its own line rather than split between --seed and its value."""
    passed, total = rep.score
    got, most = rep.points
    skipped = _skipped(rep)
    tail = f", {skipped} not checked" if skipped else ""  # the legend's word for –
    score = Text(f"Score: {passed}/{total} checks passed{tail} — {got}/{most} points.", style="score.bad")
    rerun = "" if rep.public_only else f"Rerun the same cases with --seed {rep.seed}."
    if rerun and score.cell_len + 2 + len(rerun) <= out.width:
        score += Text("  " + rerun, style="muted")
        rerun = ""
    out.print(score)
    if rerun:
        out.print(Text(rerun, style="muted"))


def _brief_report(rep: Report, out: Console) -> None:
    out.print(check_header(rep, out.width))
    failures = [r for r in rep.results if r.status in FAILED]
    if failures:
        names = ", ".join(r.id for r in failures)
        out.print(
            Text(f"✗ {len(failures)} of {len(rep.results)} checks failing: ", style="check.fail") + Text(names, style="muted"),
            no_wrap=True,
            overflow="ellipsis",
        )
        r = failures[0]
        out.print(hanging(Text(f"{MARK[r.status]} ", style=f"check.{r.status}"), _failure_head(r)))
        out.print(Padding(_failure(r, rep.exercise, rep.public_only, brief=True), (0, 0, 0, 2), expand=False))
    for note in rep.notes:
        out.print(Text(f"note: {note}", style="warning"), no_wrap=True, overflow="ellipsis")
    for d in rep.diagnosis:
        out.print(
            hanging(
                Text("● ", style="bug.id"),
                Text("Your output matches ") + Text(d.bug, style="bug.id") + Text(f" — {d.title}. ") + Text("Fix: " + d.fix, style="hint"),
            )
        )
    if failures and not rep.diagnosis:
        out.print(Text("Diagnosis: ", style="label") + Text("no known bug matches these failures."))
    passed, total = rep.score
    got, most = rep.points
    out.print(Text(f"Score: {passed}/{total} checks passed — {got}/{most} points.", style="score.bad"))


def followups(exercise, out: Console, passed: Collection[str] = ()) -> None:
    """The follow-up exercises an interviewer may ask next: the command that starts each, and for
    one already `passed`, a mark saying so instead (never suggested as if new)."""
    from attn_kit.load import catalog

    available = [f for f in exercise.followups if f.exercise in catalog.exercises()]
    if not available:
        return
    out.print(Text("Follow-ups an interviewer may ask next:", style="label"))
    for f in sorted(available, key=lambda f: f.exercise in passed):  # stable: the new ones first
        if f.exercise in passed:
            line = Text("✓ ", style="check.pass") + Text(f.exercise) + Text(" (passed)", style="check.pass")
        else:
            line = Text(f"attn-kit start {f.exercise} {catalog.default_file(f.exercise)}", style="command")
        out.print(hanging("  ", line + Text(f"  {f.prompt}", style="muted")))


def repro_written(paths, out: Console | None = None) -> None:
    out = out or console()
    for path in paths:
        out.print(Text("repro: ", style="muted") + Text(f"python {path}", style="command"))


# --- grading the candidate's own tests (attn-kit test-tests, check --tests) -----------------------

SCREEN_ROWS = 24  # the report of `test-tests` fits a screen this tall (with the prompt after it)


def test_grade(grade, out: Console | None = None, full: bool = False, flag: str = "--all") -> None:
    """The verdict on a candidate's tests, fitted to one 80×24 screen: the score, any wrong test,
    the bugs caught, then as many missed bugs with a test idea as fit, the others by name, and
    the option (`flag`) that shows everything. `full` shows everything: a table of every known
    bug with the tests that caught it, and a test idea for each missed one."""
    out = out or console()
    references = sum(r.bug is None for r in grade.runs)
    shown: list = [
        _titled("attn-kit test-tests ", grade.exercise, grade.path, "", out.width),
        Text(
            f"{_count(len(grade.tests), 'test')} run against {references} reference and "
            f"{_count(len(grade.runs) - references, 'known-bug implementation')} in {grade.seconds:.1f} s",
            style="muted",
        ),
    ]
    score = _test_score(grade)
    if not full:
        shown.append(score)
    shown += _test_verdicts(grade, clip=None if full else 3, flag=flag)
    if full:
        shown += [Text(), _bug_table(grade)]
        missed = [b for b in grade.bugs if not b.caught]
        if missed:
            shown += [Text(), Text("Tests that would catch what you missed", style="label")]
            shown += [_test_idea(bug) for bug in missed]
        shown += [Text(), score]
    else:
        shown += _test_summary(grade, out, shown, flag)
    for renderable in shown:
        out.print(renderable)


def _titled(command: str, exercise: str, path: str, tail: str, width: int) -> Text:
    """`COMMAND EXERCISE · PATH TAIL` on one line of `width` if it can be (short_path); else
    the path, shortened, on a line of its own below."""
    lead = f"{command}{exercise} · "
    shown = short_path(path, width - 1 - len(lead) - len(tail))
    if len(lead) + len(shown) + len(tail) < width:
        return Text(command, style="label") + Text(f"{exercise} · {shown}", style="muted") + Text(tail, style="muted")
    return Text(command, style="label") + Text(exercise + tail, style="muted") + Text("\n  " + short_path(path, width - 3), style="muted")


def _test_score(grade) -> Text:
    caught, total = len(grade.caught), len(grade.bugs)
    text = f"Score: {caught}/{total} known bugs caught ({grade.score:.0%})"
    if grade.wrong:
        text += f"; {_count(len(grade.wrong), 'wrong test')} to fix first"
    return Text(text, style="score.good" if grade.ok and caught == total else "score.bad")


def _clipped(text: str, lines: int | None, flag: str) -> str:
    kept = text.rstrip().split("\n")
    if lines is None or len(kept) <= lines:
        return "\n".join(kept)
    return "\n".join(kept[:lines] + [f"… ({len(kept) - lines} more lines: {flag} shows them)"])


def _test_verdicts(grade, clip: int | None, flag: str) -> list:
    """Wrong tests, tests that depend on the return type, notes; messages cut to `clip` lines."""
    shown: list = []
    if grade.wrong:
        shown.append(
            Text(
                f"✗ {_count(len(grade.wrong), 'wrong test')}: "
                f"{'they fail' if len(grade.wrong) > 1 else 'it fails'} on correct code, so "
                f"{'they catch' if len(grade.wrong) > 1 else 'it catches'} nothing",
                style="check.fail",
            )
        )
        for w in grade.wrong:
            where = f" {w.where}" if w.where else ""
            verb = {TestOutcome.FAILED: "fails", TestOutcome.ERROR: "errors", TestOutcome.TIMEOUT: "hangs"}.get(w.outcome, w.outcome)
            shown.append(
                hanging(
                    Text("  ✗ ", style="check.fail"),
                    Text(w.name, style="check.fail") + Text(f"{where} — {verb} on {w.implementation}", style="muted"),
                )
            )
            body = [Text(_clipped(w.message, clip, flag))]
            if w.output.strip():
                body += [Text("it printed:", style="muted"), Text(_clipped(w.output.rstrip()[:800], clip, flag))]
            shown.append(Padding(Group(*body), (0, 0, 0, 6), expand=False))
    elif not grade.type_sensitive:
        shown.append(Text(f"✓ Every test passes on the correct implementations ({', '.join(grade.judged_on)}).", style="check.pass"))
    if grade.type_sensitive:
        count = len(grade.type_sensitive)
        shown.append(
            Text(
                f"! {_count(count, 'test')} {'depends' if count == 1 else 'depend'} on the return type: "
                f"not wrong, but {'it counts' if count == 1 else 'they count'} only against known bugs "
                f"returning the type {'it passes' if count == 1 else 'they pass'} on",
                style="warning",
            )
        )
        for t in grade.type_sensitive:
            where = f" {t.where}" if t.where else ""
            shown.append(Text(f"  ! {t.name}", style="warning") + Text(where, style="muted"))
            shown.append(Padding(Group(Text(t.advice), Text(_clipped(t.message, clip, flag), style="muted")), (0, 0, 0, 6), expand=False))
    shown += [Text(f"note: {note}", style="warning") for note in grade.notes]
    return shown


def _bug_table(grade) -> Table:
    table = Table(show_header=True, header_style="label", box=None, pad_edge=False, expand=False)
    table.add_column("", width=1)
    table.add_column("known bug", no_wrap=True)
    table.add_column("caught by")
    for bug in grade.bugs:
        style = "check.pass" if bug.caught else "check.fail"
        tests = ", ".join(bug.caught_by) if bug.caught else "—"
        cell = Text(tests, style="" if bug.caught else "muted")
        if bug.caught and bug.missed_forms:
            missed = ", ".join(f"`{f}`" if f else "the main form" for f in bug.missed_forms)
            cell += Text(f"  ({len(bug.forms) - len(bug.missed_forms)} of {len(bug.forms)} forms; missed: {missed})", style="warning")
        for note in bug.notes:
            cell += Text(f"\n{note}", style="muted")
        table.add_row(Text("✓" if bug.caught else "✗", style=style), Text(bug.id, style="bug.id" if bug.caught else "check.fail"), cell)
    return table


def _test_idea(bug) -> Group:
    return Group(
        Text("  ● ", style="bug.id") + Text(bug.id, style="bug.id") + Text(f" — {bug.title}"),
        Padding(Text(bug.test_idea, style="hint"), (0, 0, 0, 4), expand=False),
    )


def _height(out: Console, renderable) -> int:
    return len(out.render_lines(renderable, out.options, pad=False))


def _names(out: Console, prefix: Text, names: list[Text], rows: int) -> Table:
    """`prefix` then as many of `names` as fit in `rows` lines, then "+N more"."""
    for count in range(len(names), 0, -1):
        body = Text(", ").join(names[:count])
        if count < len(names):
            body += Text(f" +{len(names) - count} more", style="muted")
        line = hanging(prefix, body)
        if _height(out, line) <= rows:
            return line
    return hanging(prefix, Text(f"{len(names)}", style="muted"))


def _test_summary(grade, out: Console, above: list, flag: str) -> list:
    """After the score and the verdicts: the bugs caught, in a line or two; the missed bugs with
    their test ideas, as many as fit the screen (at least one); the others by name; and which
    option shows everything."""
    caught = [b for b in grade.bugs if b.caught]
    missed = [b for b in grade.bugs if not b.caught]
    shown: list = []
    if caught and missed:  # all caught: the score says so
        names = [
            Text(b.id, style="bug.id")
            + (Text(f" ({len(b.forms) - len(b.missed_forms)} of {len(b.forms)} forms)", style="warning") if b.missed_forms else Text())
            for b in caught
        ]
        shown.append(_names(out, Text(f"✓ Caught {len(caught)}: ", style="check.pass"), names, 2))
    footer = (
        Text("Add ", style="muted")
        + Text(flag, style="command")
        + Text(
            " for every bug, the tests that caught it and each test idea." if missed else " for every bug and the tests that caught it.",
            style="muted",
        )
    )
    if not missed:
        return [*shown, footer]
    rows = max(out.size.height if out.is_terminal else 0, SCREEN_ROWS) - 1  # a line for the prompt after
    left = rows - sum(_height(out, r) for r in [*above, *shown, footer]) - 2  # - the blank and the heading
    ideas = [_test_idea(b) for b in missed]
    count = 0
    for idea in ideas:
        others = 0 if count + 1 == len(ideas) else 1  # a line, at least, naming the others
        if count and _height(out, idea) + others > left:
            break
        left -= _height(out, idea)
        count += 1
    heading = f"Missed {len(missed)}. " + (
        "A test that would catch it:"
        if len(missed) == 1
        else "Tests that would catch them:"
        if count == len(missed)
        else "A test that would catch the first:"
        if count == 1
        else f"Tests that would catch the first {count}:"
    )
    shown += [Text(), Text(heading, style="label"), *ideas[:count]]
    if count < len(missed):
        shown.append(
            _names(out, Text("  and ", style="muted"), [Text(b.id, style="check.fail") for b in missed[count:]], min(2, max(1, left)))
        )
    return [*shown, footer]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


# --- check --locate ---------------------------------------------------------------------------


def locate_pointer(rep: Report, command: str, out: Console | None = None) -> None:
    """Under a plain `check` with failures: one line saying --locate can point at the line."""
    if rep.passed or not any(r.status in FAILED for r in rep.results):
        return
    out = out or console()
    line = Text("Can't see where? ", style="muted") + Text(command, style="command")
    if line.cell_len + len(" points at the line.") <= out.width:
        out.print(line + Text(" points at the line.", style="muted"))
    else:  # the command whole on a line of its own, to copy
        out.print(Text("Can't see where? This points at the line:", style="muted"))
        out.print(Text("  ") + Text(command, style="command"), soft_wrap=True)


@contextlib.contextmanager
def locate_progress(budget: float):
    """A one-line live status on stderr while --locate searches (only on a terminal); yields the
    progress(phase, done, total) callback the search calls. Small on purpose: a shared progress
    helper can replace it."""
    err = error_console()
    if not err.is_terminal:
        yield None
        return
    with err.status(Text("locate: starting", style="muted")) as status:
        started = time.monotonic()

        def progress(phase: str, done: int, total: int) -> None:
            what = "single edits" if phase == "single" else "pairs of edits"
            elapsed = time.monotonic() - started
            status.update(Text(f"locate: trying {what} {done}/{total} · {elapsed:.0f} s (budget {budget:g} CPU s)", style="muted"))

        yield progress


def located(loc, rep: Report, fix: bool = False, out: Console | None = None) -> None:
    """The result of `check --locate`: the line(s) and what is wrong there; with --fix the edit
    as a diff of the candidate's own lines; or plainly that no verified edit was found."""
    out = out or console()
    if loc.stopped == "passed":
        return
    out.print()
    out.print(Text("Locate", style="label"))
    found = loc.found
    divergences = loc.trace.divergences if loc.trace else []
    if found is None:
        _located_miss(loc, rep, divergences, fix, out)
        return
    _divergences_elsewhere(divergences, found.lines, out)
    lines = found.lines
    where = f"line {lines[0]}" if len(lines) == 1 else "lines " + ", ".join(map(str, lines))
    out.print(hanging("  ● ", Text(f"Look at {where}.", style="label")))
    for edit in found.edits:
        out.print(hanging("    ", Text(f"line {edit.start[0]}: ") + Text(for_terminal(edit.what))))
    if found.bugs:
        out.print(hanging("    ", Text("It corresponds to ", style="muted") + Text(", ".join(found.bugs), style="bug.id")))
    repairs = ", ".join(found.repairs[:4]) + (f" and {len(found.repairs) - 4} more" if len(found.repairs) > 4 else "")
    which = "this" if len(found.edits) == 1 else "these two places"
    out.print(
        hanging(
            "    ", Text(f"Changing {which} makes every failing check pass ({repairs}), on this seed and on a second one.", style="muted")
        )
    )
    _edit_diff(found, fix, out)


def _divergences_elsewhere(divergences, lines, out: Console) -> None:
    """Where the traced values go wrong, on lines the edit does not touch (another mistake)."""
    for d in divergences:
        if d.line and d.line not in lines:
            out.print(hanging("  ● ", Text(f"Your values go wrong at line {d.line}: ", style="label") + Text(d.text())))


def _located_miss(loc, rep: Report, divergences, fix: bool, out: Console) -> None:
    """No full edit: where the values first go wrong, a partial edit if one was verified, and the
    diagnosed bugs' fixes when no small edit exists; never the whole file's lines."""
    for d in divergences:
        if d.line:
            out.print(hanging("  ● ", Text(f"Look at line {d.line}. ", style="label") + Text(d.text())))
    why = "within the time budget" if loc.stopped == "budget" else "among the edits tried"
    clock = "CPU s" if loc.cpu else "s"
    ran = f"{loc.tried} edited versions of your file run in {loc.seconds:.1f} {clock}"
    out.print(
        hanging(
            "  ",
            Text(
                f"No verified edit fixes every failing check {why} ({ran}).",
                style="muted",
            ),
        )
    )
    if loc.partial is not None:
        part = loc.partial
        rest = next((d.line for d in divergences if d.line and d.line not in part.lines), None)
        other = f" (see line {rest})" if rest else ""
        out.print(hanging("  ● ", Text(f"A partial edit at line {part.lines[0]}: ", style="label") + Text(part.edits[0].what)))
        out.print(
            hanging(
                "    ",
                Text(
                    f"It fixes {len(part.repairs)} of your {len(loc.failing)} failing checks; the rest fail for another reason{other}.",
                    style="muted",
                ),
            )
        )
        _edit_diff(part, fix, out)
    if getattr(loc, "new_code", None):  # the fix is new code: say so in the bug's words, with its shape
        for bug, why, code in loc.new_code:
            out.print(
                hanging("  ● ", Text(f"No small edit of your lines fixes {bug}: ", style="label") + Text(f"the fix is new code, {why}."))
            )
            out.print(hanging("    ", Text("Its shape:", style="muted")))
            for line in code:
                out.print(Text(f"      {line}", style="expected"), soft_wrap=True)
    elif loc.partial is None and loc.stopped == "exhausted":  # every small edit was tried: the fix is new code
        for d in rep.diagnosis[:2]:
            if d.fix:
                out.print(
                    hanging("    ", Text(f"No small edit of your lines fixes {d.bug}: it needs new code. ", style="muted") + Text(d.fix))
                )


def _edit_diff(found, fix: bool, out: Console) -> None:
    if not fix:
        out.print(hanging("    ", Text("To see the edit: add --fix.", style="muted")))
        return
    for first, before, after in found.diff:  # the candidate's lines: escaped, so no ESC or BEL reaches the terminal
        width = len(str(first + max(len(before), len(after))))
        for i, line in enumerate(before):
            out.print(Text(f"  - {first + i:>{width}} | {for_terminal(line.expandtabs(4))}", style="actual"), soft_wrap=True)
        for i, line in enumerate(after):
            out.print(Text(f"  + {first + i:>{width}} | {for_terminal(line.expandtabs(4))}", style="expected"), soft_wrap=True)
