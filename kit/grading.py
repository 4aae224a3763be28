"""The check pipeline: load -> run in the sandbox -> compare -> diagnose, returning a Report.

Rendering is not done here; cli.py hands the Report to render.py or prints its JSON.
"""

from __future__ import annotations

import importlib
import importlib.util
import random
import time
from dataclasses import dataclass
from pathlib import Path

from . import catalog, loader
from .errors import DependencyMissing
from .registry import CallFailed, Check, CheckContext, CheckFailed, CheckSkipped, Suite
from .report import CheckResult, Report
from .sandbox import DEFAULT_MEMORY, DEFAULT_TIMEOUT, Sandbox

BLOCKED = "skipped because"      # how a check skipped for a failed prerequisite starts its message


@dataclass(frozen=True)
class Options:
    exercise: str | None = None
    seed: int | None = None
    public_only: bool = False
    pure: bool = False
    timeout: float = DEFAULT_TIMEOUT
    memory: int | None = DEFAULT_MEMORY


def require(exercise: catalog.Exercise) -> None:
    """Raise DependencyMissing when the exercise needs an optional package that is not installed."""
    if exercise.needs and importlib.util.find_spec(exercise.needs) is None:
        raise DependencyMissing(
            f"{exercise.id} needs {exercise.needs}, which is not installed here. Install it with "
            f"`pip install 'attn-kit[{exercise.needs}]'` (or `pip install {exercise.needs}`), then run again.")


def suite_for(exercise: catalog.Exercise) -> Suite:
    require(exercise)
    return importlib.import_module(f"attn_kit.checks.{exercise.checks}").SUITE


def hint_for(exercise: catalog.Exercise, check: Check) -> int | None:
    for number, hint in enumerate(exercise.hints, start=1):
        if check.id in hint.checks:
            return number
    return check.hint


def hint_for_concept(exercise: catalog.Exercise, concept: str) -> int | None:
    return next((n for n, hint in enumerate(exercise.hints, start=1) if hint.concept == concept), None)


def run_check(check: Check, sandbox, oracle, seed: int, statuses: dict[str, str],
              exercise: catalog.Exercise, source: loader.SourceFile | None = None) -> CheckResult:
    result = CheckResult(check.id, check.title, "pass", 0, check.points, public=check.public,
                         catches=check.catches, hint=hint_for(exercise, check))
    blocker = next((a for a in check.after if statuses.get(a, "pass") != "pass"), None)
    if blocker:
        result.status = "skip"
        result.message = f"{BLOCKED} `{blocker}` did not pass; fix that first"
        return result
    ctx = CheckContext(sandbox, oracle, seed, check, source=source)
    try:
        check.func(ctx)
        result.points = check.points
    except CheckFailed as exc:
        result.status, result.message, result.mismatch = "fail", str(exc), exc.mismatch
    except CallFailed as exc:
        result.status, result.message = "error", str(exc)
        error = exc.call.outcome.error
        if error and error.traceback and error.type != "NotImplementedError":
            result.notes += (error.traceback.rstrip(),)
    except CheckSkipped as exc:
        result.status, result.message, result.points = "skip", str(exc), 0
    result.calls = ctx.calls
    result.failing_call = ctx.failing_call
    result.case = ctx.case
    result.notes += tuple(ctx.notes)
    result.output = "".join(c.outcome.output for c in ctx.calls)
    return result


def not_checked(results: list[CheckResult]) -> list[str]:
    """Report notes for checks that did not apply (CheckSkipped), one per reason, naming them."""
    reasons: dict[str, list[str]] = {}
    for r in results:
        if r.status == "skip" and not r.message.startswith(BLOCKED):
            reasons.setdefault(r.message, []).append(r.id)
    return [f"{', '.join(ids)} not checked (no points): {reason}" for reason, ids in reasons.items()]


def pure_check(source: loader.SourceFile) -> CheckResult:
    """--pure: the file imports only the standard library."""
    outside = source.non_stdlib_imports()
    result = CheckResult("standard-library-only", "The file imports only Python's standard library",
                         "pass", 1, 1)
    if outside:
        listing = ", ".join(f"{name} (line {line})" for name, line in outside)
        result.status, result.points = "fail", 0
        result.message = (f"--pure forbids imports outside the standard library; this file imports "
                          f"{listing}. On-device screens often allow no framework: use lists and math.")
    return result


def grade(path: str | Path, options: Options = Options()) -> Report:
    """Run the exercise's graded suite on a candidate file. Raises KitError if it cannot be graded."""
    from . import diagnose

    started = time.perf_counter()
    source = loader.read_source(path)
    exercise = loader.detect_exercise(source, options.exercise)
    suite = suite_for(exercise)          # imports what the checks need before the zygote forks
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(1, 100_000)
    results: list[CheckResult] = []
    notes: list[str] = []
    if options.pure:
        results.append(pure_check(source))
    with Sandbox(str(source.path), options.timeout, options.memory) as sandbox:
        info = sandbox.start()
        if info.note:
            notes.append(info.note)
        loader.check_functions(exercise, info.functions, source.path)
        oracle = diagnose.oracle_for(exercise)
        statuses: dict[str, str] = {}
        for check in suite.checks:
            if options.public_only and not check.public:
                continue
            result = run_check(check, sandbox, oracle, seed, statuses, exercise, source)
            statuses[check.id] = result.status
            results.append(result)
        notes.extend(not_checked(results))
        if sandbox.restarts:
            notes.append(f"the worker process was restarted {sandbox.restarts} time(s) after a hang or crash")
    report = Report(exercise.id, str(source.path), seed, results, public_only=options.public_only, notes=notes)
    report.diagnosis = diagnose.diagnose(exercise, results)
    for result in results:
        result.bug = next((d.bug for d in report.diagnosis if result.id in d.checks), None)
        if result.bug:      # point at the hint about the diagnosed mistake's concept
            result.hint = hint_for_concept(exercise, catalog.bugs()[result.bug].concept) or result.hint
    report.seconds = time.perf_counter() - started
    return report
