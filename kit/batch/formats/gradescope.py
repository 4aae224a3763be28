"""`gradescope`: Gradescope's results.json for one submission. `score` is in points (Gradescope
scales it to the assignment), one test per check, every test `visible` (hidden cases show no
values), every text rendered as plain text (`output_format: text`, so `<module>` is not read as
HTML and SyntaxError carets keep their column)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attn_kit.batch.formats import Format

if TYPE_CHECKING:
    from attn_kit.batch.run import Batch, Result


def results(batch: Batch, result: Result, hidden_details: bool = False) -> dict:
    from attn_kit import __version__
    from attn_kit.batch.formats._shared import bug_titles, check_text, first_checks, footer, reproduce_text, summary_text, verdict

    titles = bug_titles()
    first = first_checks(result.checks())
    tests = [
        {
            "name": f"{c['title']} [{c['id']}]" + ("" if c["public"] else " (hidden case)"),
            "number": str(number),
            "score": c["points"],
            "max_score": c["max_points"],
            "status": "passed" if verdict(c) == "pass" else "failed",
            "output": check_text(c, hidden_details, titles, first),
            "visibility": "visible",
        }
        for number, c in enumerate(result.checks(), start=1)
    ]
    return {
        "score": result.points,
        "execution_time": round(result.seconds, 3),
        "output": summary_text(result, titles) + f"\n({footer(batch)})\n" + reproduce_text(batch, result),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            "attn_kit": __version__,
            "exercise": batch.exercise,
            "seed": batch.seed,
            "state": result.state,
            "bugs": result.bugs(),
            "picked": result.picked,
        },
    }


def render(batch: Batch, result: Result, hidden_details: bool = False) -> str:
    from attn_kit.report import jsonout

    return jsonout.dumps(results(batch, result, hidden_details), indent=2) + "\n"


FORMAT = Format("gradescope", render, per_submission=True, audience="Gradescope (its results.json)")
