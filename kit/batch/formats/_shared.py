"""What the student-facing formats (JUnit, Gradescope, PrairieLearn) say about a check and a
submission.

A hidden case (a check that is not one of the exercise's public examples: `public=False`) shows
only its property name, status, points and named bug unless `hidden_details` is set; the public
examples are always shown in full. A check that did not run because an earlier one failed counts
as failed (it earned nothing), with that reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attn_kit.batch.run import Batch, Result

WITHHELD = "a hidden case: its inputs and expected values are not shown"


def bug_titles() -> dict[str, str]:
    from attn_kit.load import catalog

    return {k: b.title for k, b in catalog.bugs().items()}


def blocked(check: dict) -> bool:
    """The check did not run because a check it depends on failed: it earned nothing."""
    from attn_kit.grading.pipeline import BLOCKED

    return check["status"] == "skip" and (check["message"] or "").startswith(BLOCKED)


def verdict(check: dict) -> str:
    """pass, fail, error or skip as a student-facing format counts it: a blocked check is failed,
    only a check that does not apply to this file is skipped."""
    return "fail" if blocked(check) else check["status"]


HUNG = "did not return within"  # the sandbox's words for a call stopped at its deadline (sandbox/session.py)


def check_text(check: dict, hidden_details: bool, titles: dict[str, str], first_with_bug: dict | None = None) -> str:
    """What a student sees of one check: the kit's message in full for a public example (or with
    hidden_details), only the verdict for a hidden case (saying so when the code hung); the named
    bug, in full on the first check it explains and as "same cause as" that check's title on the
    others (`first_with_bug`: bug -> that check, see first_checks)."""
    if check["status"] == "pass":
        return "passed"
    if check["status"] == "skip":
        return check["message"] or "skipped"
    if check["status"] == "fail":
        kind = "failed"
    elif HUNG in (check["message"] or ""):
        kind = "your code hung: a call did not return in time and was stopped"
    else:
        kind = "your code raised, hung or crashed"
    shown = check["message"] if (check["public"] or hidden_details) else f"{kind} ({WITHHELD})"
    bug = check.get("bug")
    first = (first_with_bug or {}).get(bug, check) if bug else None
    if first is not None and first["id"] != check["id"]:
        shown += f"\nThe same cause as “{first['title']}” ({bug})."
    elif bug:
        shown += f"\nThis matches a known bug: {titles.get(bug, bug)} ({bug})."
    return shown


def first_checks(checks: list[dict]) -> dict:
    """bug -> the first failing check it explains, in suite order: where a student reads its name."""
    first: dict = {}
    for c in checks:
        if c["status"] in ("fail", "error") and c.get("bug"):
            first.setdefault(c["bug"], c)
    return first


def reproduce_text(batch: Batch, result: Result) -> str:
    """How a student reruns this grading on their own machine, with the same hidden cases."""
    from pathlib import Path

    from attn_kit import __version__

    name = Path(result.path).name if result.path else "solution.py"
    return (
        f"To rerun this grading on your machine (attn-kit {__version__}): "
        f"attn-kit check {name} --exercise {batch.exercise} --seed {batch.seed}"
    )


def summary_text(result: Result, titles: dict[str, str]) -> str:
    """One paragraph: the score, or why the submission could not be graded; the named bugs; which
    file was graded and why."""
    from attn_kit.batch.run import GRADED

    if result.state != GRADED or result.report is None:
        text = f"Not graded ({result.state}): {result.error}"
    else:
        score = result.report["score"]
        text = f"{score['points']}/{score['max_points']} points; {score['passed']} of {score['total']} checks passed."
        for d in result.report["diagnosis"]:
            text += f"\nKnown bug: {titles.get(d['bug'], d['title'])} ({d['bug']})."
        if result.timed_out:
            text += "\nSome calls ran out of time."
        if result.crashed:
            text += "\nSome calls crashed or ran out of memory."
    if result.picked:
        text += f"\nGraded file: {result.picked}"
    return text


def footer(batch: Batch) -> str:
    from attn_kit import __version__

    return f"attn-kit {__version__}, exercise {batch.exercise}, seed {batch.seed}"
