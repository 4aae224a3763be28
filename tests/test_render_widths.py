"""Terminal output at 60, 80 and 120 columns (rich's Console(width=…)): wrapped lines keep their
indent, history and progress never cut a time, bug id or report path, the mock status line fits,
and piped output carries no padding."""

from __future__ import annotations

import dataclasses
import io
import re
import sys

import pytest
from rich.console import Console

from attn_kit.base.paths import solutions_dir
from attn_kit.grading import pipeline
from attn_kit.load import catalog
from attn_kit.practice import progress as practice
from attn_kit.practice.mock import Status
from attn_kit.practice.store import open_store
from attn_kit.render import check, screen
from attn_kit.render import practice as render_practice

WIDTHS = (60, 80, 120)
MHA = catalog.exercise("mha-screen")


def console(width: int) -> Console:
    return Console(width=width, file=io.StringIO(), color_system=None, theme=check.THEME)


@pytest.fixture(scope="module")
def reports():
    return {
        "bug": pipeline.grade(solutions_dir("mha-screen") / "bugs" / "no-scaling.py", pipeline.Options(seed=3)),
        "pass": pipeline.grade(solutions_dir("mha-screen") / "reference_lists.py", pipeline.Options(seed=3)),
    }


def block_after(lines: list[str], start: int) -> list[str]:
    """The lines after `start` up to the next blank line or top-level line."""
    out = []
    for line in lines[start + 1 :]:
        if not line.strip() or not line.startswith(" "):
            break
        out.append(line)
    return out


@pytest.mark.parametrize("width", WIDTHS)
def test_check_report_keeps_indents_and_fits(reports, width):
    out = console(width)
    check.report(reports["bug"], MHA, out=out, first=False)  # --full
    lines = out.file.getvalue().splitlines()
    assert all(len(line) <= width for line in lines), width  # the header too (a long path is shortened)
    bullet = next(i for i, line in enumerate(lines) if "● Your output matches" in line)
    assert "no-scaling" in lines[bullet] and all(line.startswith("    ") for line in block_after(lines, bullet))
    heads = [i for i, line in enumerate(lines) if line.startswith("✗ ") and " — " in line]
    assert heads
    for i in heads:  # a wrapped title continues indented
        follow = lines[i + 1]
        assert follow.startswith("  ")
    same = [line for line in lines if "same cause:" in line]
    assert same and all(line.startswith("✗ ") and line.rstrip().endswith("no-scaling") for line in same)


@pytest.mark.parametrize("width", WIDTHS)
def test_followups_wrap_under_their_indent(reports, width):
    out = console(width)
    check.followups(MHA, out, passed={"gqa"})  # what a recorded pass shows (render_practice.after_check)
    lines = out.file.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Follow-ups"))
    rest = [line for line in lines[start + 1 :] if line.strip()]
    assert rest and all(line.startswith("  ") for line in rest)
    out = console(width)
    render_practice.followups(MHA, out=out)
    assert all(line.startswith(("Follow-up", "  ")) for line in out.file.getvalue().splitlines() if line)


@pytest.mark.parametrize("width", WIDTHS)
def test_mock_status_line_fits(width):
    status = Status(passed=1, total=4, failing=["public-attention-example", "public-masks-example", "output-shapes"], saves=12)
    line = render_practice.mock_status(38 * 60 + 12, status, width=width)
    assert line.cell_len < width and "\n" not in line.plain
    assert "38:12" in line.plain and "1/4" in line.plain and "s submit" in line.plain
    shown = re.search(r"(?:failing: |✗ )([a-z, -]+?)(?: \+(\d+) more)? │", line.plain)
    assert shown, line.plain  # names whole, as many as fit, then how many more
    names = shown.group(1).split(", ")
    assert names == status.failing[: len(names)] and len(names) + int(shown.group(2) or 0) == 3, line.plain
    assert len(names) >= {60: 1, 80: 1, 120: 3}[width], line.plain
    if width >= 120:  # every name, so the save count made room
        assert "public checks 1/4" in line.plain and "saves" not in line.plain


@pytest.mark.parametrize("width", WIDTHS)
def test_history_and_progress_never_cut_times_ids_or_paths(tmp_path, width):
    report_path = str(tmp_path / "a-rather-long-folder-name" / "mock-mha-screen-20261130-141502" / "report.md")
    with open_store() as store:
        store.add_check(
            exercise="mha-screen",
            file="solution.py",
            seed=1,
            passed=False,
            checks_passed=3,
            checks_total=26,
            points=4,
            max_points=47,
            public_only=False,
            failing=[],
            bugs=["reshape-without-transpose", "scale-by-model-width", "padding-masks-queries"],
            concepts_failed=[],
        )
        mock_id = store.start_mock("mha-screen", str(tmp_path), 45)
        store.finish_mock(mock_id, status="submitted", seconds_used=600, report=report_path)
        data = practice.history(store)
        rows = practice.progress(store)
    out = console(width)
    render_practice.history(data, out=out)
    text = out.file.getvalue()
    lines = text.splitlines()
    for bug in ("reshape-without-transpose", "scale-by-model-width", "padding-masks-queries"):
        assert any(bug in line for line in lines), (bug, text)
    assert any(report_path in line for line in lines), text
    stamps = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d", text)
    assert len(stamps) >= 2
    out = console(width)
    render_practice.progress(rows, out=out)
    lines = out.file.getvalue().splitlines()
    for bug in ("reshape-without-transpose", "scale-by-model-width", "padding-masks-queries"):
        assert any(bug in line for line in lines), (bug, out.file.getvalue())


def test_piped_output_is_not_padded(reports, monkeypatch):
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stdout", piped)
    screen.report(reports["bug"], MHA)  # the first screen
    check.report(reports["bug"], MHA, first=False)  # --full
    check.exercise_list(catalog.exercises().values())
    lines = piped.getvalue().splitlines()
    assert len(lines) > 30
    assert [line for line in lines if line != line.rstrip(" ")] == []


@pytest.mark.parametrize("width", WIDTHS)
def test_the_score_line_keeps_seed_and_value_together(reports, width):
    """`Rerun the same cases with --seed N.` goes on a line of its own rather than being split
    between `--seed` and its value."""
    report = dataclasses.replace(reports["bug"], seed=47887)  # five digits: too long for one line at 80
    out = console(width)
    check.report(report, MHA, out=out, first=False)  # --full
    lines = out.file.getvalue().splitlines()
    rerun = f"Rerun the same cases with --seed {report.seed}."
    at = next(i for i, line in enumerate(lines) if line.startswith("Score: "))
    together = lines[at].rstrip().endswith("  " + rerun)
    assert together or lines[at + 1].rstrip() == rerun, lines[at : at + 2]
    assert together == (width >= 120)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_locate_pointer_keeps_its_command_whole(reports, width):
    out = console(width)
    command = "attn-kit check solution.py --seed 47887 --locate"
    check.locate_pointer(reports["bug"], command, out=out)
    lines = out.file.getvalue().splitlines()
    if width >= 120:
        assert lines == [f"Can't see where? {command} points at the line."]
    else:  # too long for one line: the command on its own
        assert lines == ["Can't see where? This points at the line:", f"  {command}"]
