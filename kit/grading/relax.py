"""Checks that don't stop at the first shape.

Real layers often support only part of the statement's shapes: one width for q, k and v
(Dv = D), an output as wide as the query (Cout = Cq), square projections. Such code raises on a
check's general case, and without more the check says only that. Here a check whose call raised
is judged again at the first simpler shape of its suite's `relaxations` (data beside the checks:
checks/<exercise>.py's `SUITE.relaxations`) at which the code runs, so that the property the
check is about is still read, and the file's other mistakes are still found and named. The case
builders apply the relaxation in force (`ctx.dims`); a check whose property is its shape
(`relaxable=False`: the output shapes, Dv ≠ D itself, widths that must raise) is never judged again.

Scoring: a check judged again earns nothing. Its own case raised, and the statement asks for that
case; the rerun explains and names, it does not grade. So a check keeps the points and the pass
or fail its own case gave (0, failed), and only its words and its evidence change:
- it fails at the simpler shape: its status is fail, its message the property's failure there
  (after the shape), and its calls, made at that shape, are the diagnosis's evidence;
- it passes there: it stays as it was (an error, or skipped behind a failed shape check), and its
  message adds that the property holds at that shape.
The result names the shape (`supported_shape`, also in `check --json`); the report's notes say it once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from attn_kit.base.records import CallStatus
from attn_kit.report.results import FAILED, CheckResult, CheckStatus

if TYPE_CHECKING:  # the registry (and NumPy) load in grade(), once the zygote is starting
    from attn_kit.compare.registry import Check, Relaxation

NOT_IMPLEMENTED = "NotImplementedError"  # a starter's stub, or an adapter's unsupported option: no shape helps


def raised(result: CheckResult) -> bool:
    """The check did not pass because the candidate's call raised (not hung, crashed or stubbed)."""
    call = result.failing_call
    if result.status not in FAILED or call is None or call.outcome.status != CallStatus.RAISED:
        return False
    return call.outcome.error is None or call.outcome.error.type != NOT_IMPLEMENTED


def judged_again(
    check: Check,
    result: CheckResult,
    relaxations: Sequence[Relaxation],
    run: Callable[[Relaxation], CheckResult],
    last: list[Relaxation],
) -> CheckResult:
    """The check's result, judged again at a simpler shape when its own case raised: `run(r)` runs
    the check under relaxation r. The relaxations are tried in order, the one that worked for the
    previous check first (`last`, updated); the first at which no call raises decides. The
    result unchanged when none does, or when a call hung or crashed."""
    if not (check.relaxable and relaxations and raised(result)):
        return result
    for relaxation in sorted(relaxations, key=lambda r: r not in last):
        try:
            again = run(relaxation)
        except (ValueError, IndexError, KeyError, TypeError):
            # the check's own arithmetic does not hold at this shape (a width written into it):
            # the rerun only explains, so the check's own result stands
            # (tests/test_relax.py runs every relaxable check of every suite at each relaxation)
            return result
        if any(c.outcome.status not in (CallStatus.OK, CallStatus.RAISED) for c in again.calls):
            return result  # a hang or a crash: no more calls for this check
        if raised(again) or again.status == CheckStatus.ERROR:
            continue
        if again.status == CheckStatus.SKIP:
            return result  # the rerun does not apply (e.g. a device check on NumPy code)
        last[:] = [relaxation]
        return _settled(result, again, relaxation)
    return result


def _settled(result: CheckResult, again: CheckResult, relaxation: Relaxation) -> CheckResult:
    said = relaxation.said
    if again.status == CheckStatus.PASS:
        return dataclasses.replace(result, message=f"{result.message}. {passes_at(said)}", supported_shape=said)
    error = result.failing_call.outcome.error if result.failing_call is not None else None
    raised_what = f"raised {error.type}" if error is not None else "raised"
    return dataclasses.replace(
        again,
        status=CheckStatus.FAIL,
        points=0,
        message=f"at {said}, a shape your code supports (no points: it {raised_what} at this check's own shapes): {again.message}",
        supported_shape=said,
        notes=result.notes + again.notes,
        seconds=result.seconds + again.seconds,
    )


def passes_at(said: str) -> str:
    """The words for a check that holds at the simpler shape."""
    return f"At {said}, a shape your code supports, this check's property holds (no points: its own shapes must run)"


def notes(results: Sequence[CheckResult], relaxations: Sequence[Relaxation] = ()) -> list[str]:
    """The report's one line about the shape the code supports, when checks were judged again: the
    simplest one any check needed (the suite's order goes from the least relaxed to the most), shape first."""
    judged = [r for r in results if r.supported_shape]
    if not judged:
        return []
    order = [r.said for r in relaxations]
    shape = max((r.supported_shape for r in judged), key=lambda said: order.index(said) if said in order else -1)
    failing = sum(passes_at(r.supported_shape) not in r.message for r in judged)
    return [
        f"your code runs only when {shape} (it raised at the general shapes): {len(judged)} check(s) were judged "
        f"again there for no points, so that its other mistakes are found; {failing} of them fail there too"
    ]
