"""What `attn-kit grade` and `attn-kit autograder` show: a progress bar while grading (stderr, only on
a terminal), then one table row per submission and a footer with the seed and the files written.

A render-only module: it takes batch.Batch / batch.Result and prints; it grades nothing. Every name
and message from a submission is shown through `for_terminal` inside a `Text` (never as markup):
no escape code, control character or newline reaches the screen raw, and `[red]` is just text.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Callable

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from attn_kit.base.text import for_terminal
from attn_kit.batch.outputs import Written
from attn_kit.batch.run import GRADED, Batch, Result
from attn_kit.render import check


@contextlib.contextmanager
def progress(total: int) -> Iterator[Callable[[Result], None]]:
    """A callback to call with each result: advances a bar on stderr when stderr is a terminal,
    does nothing otherwise (so logs and pipes get only the table)."""
    if not sys.stderr.isatty():
        yield lambda result: None
        return
    bar = Progress(
        TextColumn("grading"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}", markup=False),  # a submission's name, never markup
        console=check.error_console(),
        transient=True,
    )
    with bar:
        task = bar.add_task("", total=total)
        yield lambda result: bar.update(task, advance=1, description=for_terminal(result.name)[:60])


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
            f"\n{len(batch.results)} submissions, {passed} passed every check; exercise {batch.exercise}, "
            f"seed {batch.seed}, {batch.jobs} job(s), {batch.seconds:.1f} s.",
            style="muted",
        )
    )


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


def seed_line(seed: int) -> None:
    """The run's seed, on stderr before grading starts (so it is known even if the run is stopped)."""
    check.error_console().print(Text(f"seed {seed} (pass --seed {seed} to grade with the same hidden cases)", style="muted"))


def recipe(kind: str, files: list, notes: list[str]) -> None:
    out = check.console()
    out.print(Text(f"{kind} autograder written:", style="label"))
    for path in files:
        out.print(Text(f"  {for_terminal(str(path))}"))
    for note in notes:
        out.print(Text(note, style="muted"))
