"""`prairielearn`: PrairieLearn's external-grader results.json for one submission, `score` in 0-1.
A file that could not be loaded or found is `gradable: false` (the student keeps the attempt)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attn_kit.batch.formats import Format

if TYPE_CHECKING:
    from attn_kit.batch.run import Batch, Result


def results(batch: Batch, result: Result, hidden_details: bool = False) -> dict:
    from attn_kit.batch.formats._shared import bug_titles, check_text, first_checks, footer, summary_text

    titles = bug_titles()
    first = first_checks(result.checks())
    most = batch.max_points or 1
    tests = [
        {
            "name": c["title"] + ("" if c["public"] else " (hidden case)"),
            "description": c["id"],
            "points": c["points"],
            "max_points": c["max_points"],
            "message": check_text(c, hidden_details, titles, first),
            "output": "",
        }
        for c in result.checks()
    ]
    return {
        "gradable": result.state not in ("unloadable", "missing"),
        "score": round(min(1.0, result.points / most), 6),
        "message": summary_text(result, titles),
        "output": footer(batch),
        "tests": tests,
    }


def render(batch: Batch, result: Result, hidden_details: bool = False) -> str:
    from attn_kit.report import jsonout

    return jsonout.dumps(results(batch, result, hidden_details), indent=2) + "\n"


FORMAT = Format("prairielearn", render, per_submission=True, audience="PrairieLearn (its external grader's results.json)")
