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


def check_text(check: dict, hidden_details: bool, titles: dict[str, str]) -> str:
    """What a student sees of one check: the kit's message in full for a public example (or with
    hidden_details), only the verdict for a hidden case; the named bug either way."""
    if check["status"] == "pass":
        return "passed"
    if check["status"] == "skip":
        return check["message"] or "skipped"
    kind = "failed" if check["status"] == "fail" else "your code raised, hung or crashed"
    shown = check["message"] if (check["public"] or hidden_details) else f"{kind} ({WITHHELD})"
    if check.get("bug"):
        shown += f"\nThis matches a known bug: {titles.get(check['bug'], check['bug'])} ({check['bug']})."
    return shown


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
