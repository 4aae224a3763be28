"""What `attn-kit grade` and `attn-kit autograder` show: a progress bar while grading (stderr, only on
a terminal), then one table row per submission and a footer with the seed and the files written.

A render-only module: it takes batch.Batch / batch.Result and prints; it grades nothing. Every name
and message from a submission is shown through `for_terminal` inside a `Text` (never as markup):
no escape code, control character or newline reaches the screen raw, and `[red]` is just text.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Callable

from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from attn_kit.base.text import for_terminal
from attn_kit.batch.outputs import Written
from attn_kit.batch.run import GRADED, Batch, Result
from attn_kit.render import check


class Running:
    """The submissions being graded and since when: what the progress line names."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.since: dict[str, float] = {}

    def started(self, name: str) -> None:
        self.since[name] = self.clock()

    def finished(self, result: Result) -> None:
        self.since.pop(result.name, None)

    def text(self) -> str:
        """'running slow (1m50s), b (3 s)': what is running, the longest-running first, with how
        long each has run ('' when nothing is)."""
        now = self.clock()
        ordered = sorted(self.since.items(), key=lambda item: item[1])
        return ("running " + ", ".join(f"{for_terminal(name)} ({_elapsed(now - since)})" for name, since in ordered)) if ordered else ""


def _elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60}m{seconds % 60:02d}s"


class _RunningColumn(ProgressColumn):
    """Redrawn with the bar (ten times a second), so the times move while nothing finishes."""

    def __init__(self, running: Running):
        super().__init__()
        self.running = running

    def render(self, task: Task) -> Text:
        return Text(self.running.text(), style="muted", no_wrap=True, overflow="ellipsis")


@contextlib.contextmanager
def progress(total: int) -> Iterator[tuple[Callable[[Result], None], Callable[[str], None]]]:
    """Two callbacks, (finished: with each result, started: with a submission's name): a bar on
    stderr when stderr is a terminal, naming what is running and for how long, the longest first;
    nothing otherwise (so logs and pipes get only the table)."""
    if not sys.stderr.isatty():
        yield (lambda result: None), (lambda name: None)
        return
    running = Running()
    bar = Progress(
        TextColumn("grading"),
        BarColumn(bar_width=20),  # room at 80 columns for what is running
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        _RunningColumn(running),
        console=check.error_console(),
        transient=True,
    )
    with bar:
        task = bar.add_task("", total=total)

        def finished(result: Result) -> None:
            running.finished(result)
            bar.update(task, advance=1)

        yield finished, running.started


def _state(result: Result) -> Text:
    if result.state != GRADED:
        return Text(result.state, style="check.error")
    marks = [word for word, on in (("crashed", result.crashed), ("timed out", result.timed_out)) if on]
    return Text(", ".join(marks), style="warning") if marks else Text("")


def _seconds(value: float) -> str:
    return f"{value * 1e3:.0f} ms" if value < 1 else f"{value:.1f} s"


def table(batch: Batch) -> None:
    """One row per submission: score, failed checks, named bugs, time, crashed/timed out."""
    out = check.console()
    grid = Table(show_header=True, header_style="label", box=None, pad_edge=False)
    grid.add_column("Submission", overflow="fold")
    grid.add_column("Score", justify="right", no_wrap=True)
    grid.add_column("Failed", justify="right", no_wrap=True)
    grid.add_column("Bugs", overflow="fold")
    grid.add_column("Time", justify="right", no_wrap=True)
    grid.add_column("Note", overflow="fold")
    most = batch.max_points
    for r in batch.results:
        style = "score.good" if r.passed else "score.bad"
        grid.add_row(
            Text(for_terminal(r.name)),
            Text(f"{r.points}/{most}", style=style),
            str(len(r.failed())) if r.state == GRADED else "–",
            Text(", ".join(r.bugs()), style="bug.id"),
            _seconds(r.seconds),
            _state(r),
        )
    out.print(grid)
    passed = sum(r.passed for r in batch.results)
    out.print(
        Text(
            f"\n{_count(len(batch.results), 'submission')}, {passed} passed every check; exercise {batch.exercise}, "
            f"seed {batch.seed}, {_count(batch.jobs, 'job')}, {batch.seconds:.1f} s.",
            style="muted",
        )
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def written(outputs: list[Written]) -> None:
    """One line per --out: what was really written; then, on stderr, each file that was not."""
    out = check.console()
    for w in outputs:
        if w.files:
            where = str(w.files[0]) if len(w.files) == 1 else f"{len(w.files)} files in {w.files[0].parent}"
            out.print(Text(f"wrote {w.fmt}: {for_terminal(where)}", style="muted"))
        for path, why in w.failed:
            check.error(f"could not write {w.fmt} to {for_terminal(str(path))}: {for_terminal(why)}")


def broken(message: str) -> None:
    """The run broke before every submission was graded (exit status 3)."""
    check.error(f"the run broke: {for_terminal(message)}")


def seed_line(seed: int, given: bool = False) -> None:
    """The run's seed, on stderr before grading starts (so it is known even if the run is stopped);
    how to replay it only when the kit chose it (`given`: the user passed --seed already)."""
    replay = "" if given else f" (pass --seed {seed} to grade with the same hidden cases)"
    check.error_console().print(Text(f"seed {seed}{replay}", style="muted"))


def recipe(kind: str, files: list, notes: list[str]) -> None:
    out = check.console()
    out.print(Text(f"{kind} autograder written:", style="label"))
    for path in files:
        out.print(Text(f"  {for_terminal(str(path))}"))
    for note in notes:
        out.print(Text(note, style="muted"))
