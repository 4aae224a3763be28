"""The files `attn-kit grade` writes: CSV, JSON, JUnit XML, Gradescope's and PrairieLearn's results.json.

CSV and JSON are the instructor's records: every check of every submission in full. JUnit,
Gradescope and PrairieLearn are what students see, so there a hidden case (a check that is not
one of the exercise's public examples: registry's `public=False`) shows only its property name,
status and points, unless `hidden_details` is set; the public examples are always shown in full.
Every output records the seed, so a cohort's hidden cases can be regenerated.
"""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET
from pathlib import Path

from attn_kit import __version__
from attn_kit.batch.run import GRADED, Batch, Result
from attn_kit.report import jsonout

FORMATS = ("csv", "json", "junit", "gradescope", "prairielearn")
PER_SUBMISSION = ("gradescope", "prairielearn")  # one results.json per submission
WITHHELD = "a hidden case: its inputs and expected values are not shown"
HUNG = "did not return within"  # the sandbox's words for a call stopped at its deadline (sandbox/session.py)


def bug_titles() -> dict[str, str]:
    from attn_kit.load import catalog

    return {k: b.title for k, b in catalog.bugs().items()}


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
        verdict = "failed"
    elif HUNG in (check["message"] or ""):
        verdict = "your code hung: a call did not return in time and was stopped"
    else:
        verdict = "your code raised, hung or crashed"
    shown = check["message"] if (check["public"] or hidden_details) else f"{verdict} ({WITHHELD})"
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
    name = Path(result.path).name if result.path else "solution.py"
    return (
        f"To rerun this grading on your machine (attn-kit {__version__}): "
        f"attn-kit check {name} --exercise {batch.exercise} --seed {batch.seed}"
    )


def summary_text(result: Result, titles: dict[str, str]) -> str:
    """One paragraph: the score, or why the submission could not be graded; the named bugs."""
    if result.state != GRADED or result.report is None:
        return f"Not graded ({result.state}): {result.error}"
    score = result.report["score"]
    text = f"{score['points']}/{score['max_points']} points; {score['passed']} of {score['total']} checks passed."
    for d in result.report["diagnosis"]:
        text += f"\nKnown bug: {titles.get(d['bug'], d['title'])} ({d['bug']})."
    if result.timed_out:
        text += "\nSome calls ran out of time."
    if result.crashed:
        text += "\nSome calls crashed or ran out of memory."
    return text


# --- instructor records -------------------------------------------------------------------------


def to_json(batch: Batch) -> dict:
    return {
        "tool": "attn-kit",
        "version": __version__,
        "exercise": batch.exercise,
        "seed": batch.seed,
        "max_points": batch.max_points,
        "seconds": round(batch.seconds, 3),
        "jobs": batch.jobs,
        "checks": batch.checks,
        "submissions": [r.to_json() for r in batch.results],
    }


def to_csv(batch: Batch) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    ids = [c["id"] for c in batch.checks]
    writer.writerow(
        [
            "submission",
            "path",
            "exercise",
            "seed",
            "state",
            "points",
            "max_points",
            "passed",
            "failed_checks",
            "bugs",
            "seconds",
            "crashed",
            "timed_out",
            "error",
            *[f"{i}:{part}" for i in ids for part in ("points", "status", "bug")],
        ]
    )
    for r in batch.results:
        by_id = {c["id"]: c for c in r.checks()}
        cells = []
        for i in ids:
            c = by_id.get(i)
            cells += [c["points"], c["status"], c["bug"] or ""] if c else ["", "", ""]
        writer.writerow(
            [
                r.name,
                r.path or "",
                batch.exercise,
                batch.seed,
                r.state,
                r.points,
                batch.max_points,
                r.passed,
                " ".join(r.failed()),
                " ".join(r.bugs()),
                f"{r.seconds:.3f}",
                r.crashed,
                r.timed_out,
                r.error,
                *cells,
            ]
        )
    return out.getvalue()


# --- what students see ----------------------------------------------------------------------------


def to_junit(batch: Batch, hidden_details: bool = False) -> str:
    """One <testsuite> per submission, one <testcase> per check; a failing check is a <failure>
    (its message the kit's), a check whose code raised, hung or crashed an <error>, a skipped
    check <skipped>. A submission that could not be graded has one testcase, `load`, in error."""
    titles = bug_titles()
    root = ET.Element("testsuites", name=f"attn-kit grade {batch.exercise}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for r in batch.results:
        suite = ET.SubElement(root, "testsuite", name=r.name, time=f"{r.seconds:.3f}")
        props = ET.SubElement(suite, "properties")
        for name, value in (
            ("exercise", batch.exercise),
            ("seed", batch.seed),
            ("state", r.state),
            ("points", r.points),
            ("max_points", batch.max_points),
            ("path", r.path or ""),
        ):
            ET.SubElement(props, "property", name=name, value=str(value))
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        classname = f"attn-kit.{batch.exercise}.{r.name}"
        if r.state != GRADED:
            case = ET.SubElement(suite, "testcase", classname=classname, name="load", time=f"{r.seconds:.3f}")
            ET.SubElement(case, "error", message=f"not graded ({r.state})", type=r.state).text = r.error
            counts["tests"] += 1
            counts["errors"] += 1
        first = first_checks(r.checks())
        for c in r.checks():
            case = ET.SubElement(suite, "testcase", classname=classname, name=c["id"], time="0")
            counts["tests"] += 1
            text = check_text(c, hidden_details, titles, first)
            if c["status"] == "fail":
                ET.SubElement(case, "failure", message=text.splitlines()[0], type=c["bug"] or "fail").text = text
                counts["failures"] += 1
            elif c["status"] == "error":
                ET.SubElement(case, "error", message=text.splitlines()[0], type=c["bug"] or "error").text = text
                counts["errors"] += 1
            elif c["status"] == "skip":
                ET.SubElement(case, "skipped", message=c["message"] or "skipped")
                counts["skipped"] += 1
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def gradescope(batch: Batch, result: Result, hidden_details: bool = False) -> dict:
    """Gradescope's results.json for one submission: `score` in points (Gradescope scales it to
    the assignment), one test per check, every test `visible` (hidden cases show no values)."""
    titles = bug_titles()
    first = first_checks(result.checks())
    tests = []
    for number, c in enumerate(result.checks(), start=1):
        tests.append(
            {
                "name": f"{c['title']} [{c['id']}]" + ("" if c["public"] else " (hidden case)"),
                "number": str(number),
                "score": c["points"],
                "max_score": c["max_points"],
                "status": "passed" if c["status"] == "pass" else "failed",
                "output": check_text(c, hidden_details, titles, first),
                "visibility": "visible",
            }
        )
    return {
        "score": result.points,
        "execution_time": round(result.seconds, 3),
        "output": summary_text(result, titles)
        + f"\n(attn-kit {__version__}, exercise {batch.exercise}, seed {batch.seed})\n"
        + reproduce_text(batch, result),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            "attn_kit": __version__,
            "exercise": batch.exercise,
            "seed": batch.seed,
            "state": result.state,
            "bugs": result.bugs(),
        },
    }


def prairielearn(batch: Batch, result: Result, hidden_details: bool = False) -> dict:
    """PrairieLearn's external-grader results.json for one submission: `score` in 0-1. A file that
    could not be loaded or found is `gradable: false` (the student keeps the attempt)."""
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
    gradable = result.state not in ("unloadable", "missing")
    return {
        "gradable": gradable,
        "score": round(min(1.0, result.points / most), 6),
        "message": summary_text(result, titles),
        "output": f"attn-kit {__version__}, exercise {batch.exercise}, seed {batch.seed}",
        "tests": tests,
    }


# --- writing ----------------------------------------------------------------------------------------


def write(batch: Batch, fmt: str, path: Path, hidden_details: bool = False) -> list[Path]:
    """Write `batch` in `fmt` to `path`; the files written. Gradescope and PrairieLearn describe one
    submission: with one submission `path` is its results.json, with several a folder holding
    NAME.json for each."""
    path = Path(path)
    if fmt in PER_SUBMISSION:
        build = gradescope if fmt == "gradescope" else prairielearn
        if len(batch.results) == 1 and path.suffix == ".json":
            targets = [(path, batch.results[0])]
        else:
            path.mkdir(parents=True, exist_ok=True)
            targets = [(path / f"{r.name}.json", r) for r in batch.results]
        for target, result in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(jsonout.dumps(build(batch, result, hidden_details), indent=2) + "\n", encoding="utf-8")
        return [t for t, _ in targets]
    if fmt == "csv":
        text = to_csv(batch)
    elif fmt == "json":
        text = jsonout.dumps(to_json(batch), indent=2) + "\n"
    elif fmt == "junit":
        text = to_junit(batch, hidden_details)
    else:
        raise ValueError(f"unknown format {fmt!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="")
    return [path]
