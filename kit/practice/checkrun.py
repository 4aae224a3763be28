"""One `attn-kit check` run, from the file to the record: grade → (the candidate's tests) →
(--locate) → (--repro) → show → record.

The CLI parses the options into a CheckRequest and supplies a Display (cli/app.py's CheckScreen:
the render calls, on a terminal or as JSON); `run` does the rest in the one order every check
follows, so a command, a test or another front end runs the same workflow. `check --watch` runs
`pipeline.grade` on each save instead (practice/watch.py and cli/practice.watch_check).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import field
from pathlib import Path
from typing import Any, Protocol

from attn_kit.base.recordtype import record
from attn_kit.grading import pipeline
from attn_kit.report.results import FAILED, Report


@record
class CheckRequest:
    """What `attn-kit check FILE` was asked to do."""

    file: Path
    options: pipeline.Options
    as_json: bool = False
    repro: Path | None = None  # write a standalone script per failing check into this folder
    first: bool | None = None  # None: the first screen; True: --first; False: --full
    tests: Path | None = None  # also grade the candidate's own tests in this file
    locate: bool = False  # search for the smallest verified edit (implied by fix)
    fix: bool = False  # ... and show it as a diff
    locate_budget: float = 10.0


@record(frozen=False)
class CheckOutcome:
    report: Report
    tests: Any = None  # testgrade's grade of the candidate's tests, with --tests
    located: Any = None  # grading.locate.Located, with --locate
    written: list[Path] = field(default_factory=list)  # --repro scripts

    @property
    def passed(self) -> bool:
        """Every check passed and none of the candidate's own tests is wrong (check's exit 0)."""
        return self.report.passed and not (self.tests is not None and self.tests.wrong)


class Display(Protocol):
    """What a check run shows, supplied by the front end (cli/app.py's CheckScreen)."""

    def progress(self, file: Path) -> AbstractContextManager[Callable[[str], None]]:
        """A live line while grading runs; the entered callable takes what is being done."""
        ...

    def locate_progress(self, budget: float) -> AbstractContextManager[Any]:
        """A live line while --locate searches; the entered value is the search's progress callback or None."""
        ...

    def json(self, data: dict) -> None: ...

    def report(self, report: Report, first: bool | None) -> None: ...

    def located(self, located, report: Report, fix: bool) -> None: ...

    def locate_pointer(self, report: Report, command: str) -> None: ...

    def repro_written(self, paths: Sequence[Path]) -> None: ...

    def tests(self, grade, full: bool) -> None: ...

    def recorded(self, report: Report, source: str) -> None:
        """Save the run to the history and show what follows from it (hints used, cards due)."""
        ...


def run(request: CheckRequest, display: Display) -> CheckOutcome:
    """Grade the file, and everything the request adds, then show it and record it (not under
    --json, whose runs are never saved). Raises KitError when the file cannot be graded."""
    locate = request.locate or request.fix
    if locate:
        from attn_kit.grading import locate as locate_module

        locate_module.prepare(request.file, request.options.exercise)
    outcome = _graded(request, display)
    if locate and request.as_json:
        outcome.located = _locate(request, outcome.report, display, quiet=True)
    if request.repro:
        from attn_kit.report import repro as repro_module

        outcome.written = repro_module.write(outcome.report, request.repro)
    if request.as_json:
        display.json(_json(outcome, request.fix))
        return outcome
    display.report(outcome.report, request.first)
    if locate:
        outcome.located = _locate(request, outcome.report, display)
        display.located(outcome.located, outcome.report, request.fix)
    elif request.first is not None and not unwritten(outcome.report):  # the first screen's last line names --locate
        display.locate_pointer(outcome.report, locate_command(request.file, outcome.report))
    display.repro_written(outcome.written)
    if outcome.tests is not None:
        display.tests(outcome.tests, request.first is False)
    display.recorded(outcome.report, "locate" if outcome.located is not None else "check")
    return outcome


def _graded(request: CheckRequest, display: Display) -> CheckOutcome:
    with display.progress(request.file) as status:
        report = pipeline.grade(request.file, request.options, progress=status)
        tests = None
        if request.tests:  # --tests: the candidate's own tests, against references and known bugs
            from attn_kit.practice import testgrade

            options = request.options
            tests = testgrade.grade_tests(
                request.tests, report.exercise, options.timeout, options.memory, solution=request.file, progress=status
            )
    return CheckOutcome(report, tests)


def _json(outcome: CheckOutcome, fix: bool) -> dict:
    data = outcome.report.to_json()
    if outcome.tests is not None:
        data["tests"] = outcome.tests.to_json()
    if outcome.located is not None:
        data["locate"] = outcome.located.to_json(fix)
    return data


def _locate(request: CheckRequest, report: Report, display: Display, quiet: bool = False):
    """check --locate: the search, with live progress unless `quiet`."""
    from attn_kit.grading import locate as locate_module

    if report.passed:
        return locate_module.Located(None, stopped="passed")
    if quiet:
        return locate_module.locate(request.file, report, request.options, request.locate_budget)
    with display.locate_progress(request.locate_budget) as progress:
        return locate_module.locate(request.file, report, request.options, request.locate_budget, progress=progress)


def unwritten(report: Report) -> bool:
    """A failing check called a function of the file that is still the starter's stub."""
    return any(pipeline.unimplemented(r.calls) for r in report.results if r.status in FAILED)


def locate_command(file: Path, report: Report) -> str:
    seed = f" --seed {report.seed}" if report.seed is not None else ""
    return f"attn-kit check {file}{seed} --locate"
