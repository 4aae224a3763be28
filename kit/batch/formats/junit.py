"""`junit`: what CI shows (GitHub Actions, GitLab, Jenkins); valid against Jenkins' junit-10.xsd
(schemas/junit-10.xsd, tested).

One <testsuite> per submission, one <testcase> per check, with the time the check took. A failing
check is a <failure> (type: the named bug), one whose code raised, hung or crashed an <error>, one
that did not run because an earlier check failed a <failure> saying so (it earned nothing, so the
counts agree with the score), and only a check that does not apply to the file <skipped>. A
submission that could not be graded has one testcase, `load`, in error. Every text goes through
`for_xml` (no character XML forbids, no lone surrogate).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attn_kit.batch.formats import Format

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

    from attn_kit.batch.run import Batch, Result

COUNTS = ("tests", "failures", "errors", "skipped")


def _case(suite: ET.Element, classname: str, name: str, seconds: float) -> ET.Element:
    import xml.etree.ElementTree as ET

    from attn_kit.base.text import for_xml

    return ET.SubElement(suite, "testcase", classname=for_xml(classname), name=for_xml(name), time=f"{seconds:.3f}")


def _outcome(case: ET.Element, tag: str, text: str, kind: str) -> None:
    import xml.etree.ElementTree as ET

    from attn_kit.base.text import for_xml

    text = for_xml(text)
    ET.SubElement(case, tag, message=(text.splitlines() or [""])[0], type=for_xml(kind)).text = text


def _checks(suite: ET.Element, batch: Batch, r: Result, hidden_details: bool, titles: dict[str, str]) -> dict[str, int]:
    from attn_kit.batch.formats._shared import check_text, first_checks, verdict

    counts = dict.fromkeys(COUNTS, 0)
    first = first_checks(r.checks())
    classname = f"attn-kit.{batch.exercise}.{r.name}"
    for c in r.checks():
        case = _case(suite, classname, c["id"], r.check_seconds.get(c["id"], 0.0))
        counts["tests"] += 1
        status = verdict(c)
        if status == "fail":
            _outcome(
                case, "failure", check_text(c, hidden_details, titles, first), c["bug"] or ("not run" if c["status"] == "skip" else "fail")
            )
            counts["failures"] += 1
        elif status == "error":
            _outcome(case, "error", check_text(c, hidden_details, titles, first), c["bug"] or "error")
            counts["errors"] += 1
        elif status == "skip":
            _outcome(case, "skipped", c["message"] or "skipped", "does not apply")
            counts["skipped"] += 1
    return counts


def _suite(root: ET.Element, batch: Batch, r: Result, hidden_details: bool, titles: dict[str, str]) -> dict[str, int]:
    import xml.etree.ElementTree as ET

    from attn_kit.base.text import for_xml
    from attn_kit.batch.run import GRADED

    suite = ET.SubElement(root, "testsuite", name=for_xml(r.name), time=f"{r.seconds:.3f}")
    props = ET.SubElement(suite, "properties")
    fields = [("exercise", batch.exercise), ("seed", batch.seed), ("state", r.state), ("points", r.points)]
    fields += [("max_points", batch.max_points), ("path", r.path or ""), ("picked", r.picked)]
    for name, value in fields:
        ET.SubElement(props, "property", name=name, value=for_xml(str(value)))
    if r.state != GRADED:
        case = _case(suite, f"attn-kit.{batch.exercise}.{r.name}", "load", r.seconds)
        _outcome(case, "error", f"not graded ({r.state}): {r.error}", r.state)
        counts = {"tests": 1, "failures": 0, "errors": 1, "skipped": 0}
    else:
        counts = _checks(suite, batch, r, hidden_details, titles)
    for key in COUNTS:
        suite.set(key, str(counts[key]))
    return counts


def render(batch: Batch, result: None = None, hidden_details: bool = False) -> str:
    import xml.etree.ElementTree as ET

    from attn_kit.base.text import for_xml
    from attn_kit.batch.formats._shared import bug_titles

    titles = bug_titles()
    root = ET.Element("testsuites", name=for_xml(f"attn-kit grade {batch.exercise}"), time=f"{batch.seconds:.3f}")
    totals = dict.fromkeys(COUNTS, 0)
    for r in batch.results:
        for key, value in _suite(root, batch, r, hidden_details, titles).items():
            totals[key] += value
    for key in ("tests", "failures", "errors"):  # junit-10.xsd has no `skipped` on <testsuites>
        root.set(key, str(totals[key]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


FORMAT = Format("junit", render, suffix=".xml", audience="CI: GitHub Actions, GitLab, Jenkins")
