"""Timed mock screens end to end in a pseudo-terminal: live status on save, submit, time-up,
Ctrl-C (submit or abandon), the discussion, and the report in the session folder."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pexpect
import pytest

from attn_kit.load import catalog

from helpers import attn_kit
from test_practice import CHECKS, MASK_INVERTED, NO_SCALING, REFERENCE, STARTER, finish, history_json, plain, spawn

EXERCISE = catalog.exercise("mha-screen")
PUBLIC = r"public checks (\d+)/(\d+)"


def session_file(parent: Path, timeout: float = 10) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(parent.glob("mock-mha-screen-*/solution.py"))
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no session folder appeared in {parent}")


def save(path: Path, source: Path) -> None:
    time.sleep(0.3)  # a later mtime than the previous save, as an editor would give
    path.write_text(source.read_text())


def skip_self_assessment(child: pexpect.spawn) -> None:
    """After the report, a terminal is asked to score the rest (test_mock_self_assessment.py):
    end of input there asks nothing more."""
    child.expect(r"Level \(junior, mid, senior\)")
    child.sendeof()


def answer_questions(child: pexpect.spawn, covered_pattern=(True, False)) -> int:
    """Answer every discussion question, marking key points covered in turn by the pattern;
    returns how many questions were asked."""
    asked = points = 0
    while True:
        index = child.expect([r"Question (\d)/(\d)", r"covered\? \[y/N\]", r"Follow-up prompts"])
        if index == 0:
            asked += 1
            child.expect("> ")
            child.sendline("the variance of q·k grows with the head width")
            child.expect("> ")
            child.sendline("")
        elif index == 1:
            child.sendline("y" if covered_pattern[points % len(covered_pattern)] else "n")
            points += 1
        else:
            return asked


@pytest.mark.slow
def test_full_mock_with_saves_hints_submit_questions_and_report(tmp_path):
    child = spawn("mock", "mha-screen", "--minutes", "10", "--dir", tmp_path, timeout=40)
    child.expect("Mock screen")
    child.expect(PUBLIC)
    assert child.match.group(1) == "0"  # the starter raises NotImplementedError
    total = child.match.group(2)
    sol = session_file(tmp_path)
    assert sol.read_text() == STARTER and (sol.parent / "statement.md").exists()

    save(sol, NO_SCALING)  # a save updates the status line
    child.expect(r"saves 1")
    child.expect(rf"public checks {int(total) - 1}/{total}")
    child.expect("public-attention-example")
    assert attn_kit("hint", "mha-screen").returncode == 0  # a hint taken in another terminal
    save(sol, REFERENCE)
    child.expect(rf"public checks {total}/{total}")
    assert f"All {CHECKS}" not in plain(child.before)  # the full suite is not revealed before the end
    child.send("s")
    child.expect("Submitted after")
    child.expect("The full graded suite")
    child.expect(f"All {CHECKS} checks passed")
    asked = answer_questions(child)
    assert 2 <= asked <= 3
    child.expect(r"Report: ")
    child.expect(r"report\.md")
    skip_self_assessment(child)
    assert finish(child) == 0

    folder = sol.parent
    data = json.loads((folder / "report.json").read_text())
    assert data["status"] == "submitted" and data["passed"] is True
    assert data["score"]["passed"] == data["score"]["total"] == len(data["checks"])
    assert data["hints"]["used_during_session"] == [1] and data["hints"]["available"] == len(EXERCISE.hints)
    assert len(data["discussion"]) == asked
    for item in data["discussion"]:
        assert item["answer"] == "the variance of q·k grows with the head width"
        assert item["total"] == len(item["key_points"]) and 0 < item["covered"] < item["total"]
    assert data["solution"] == REFERENCE.read_text() and data["solution_file"] == str(sol)
    assert 0 < data["seconds_used"] < 600
    markdown = (folder / "report.md").read_text()
    assert "Status: **submitted**" in markdown and "## Discussion (self-scored)" in markdown
    assert "def multi_head_attention" in markdown and "## Follow-up prompts" in markdown
    scoring = {row["dimension"]: row for row in data["scoring"]}
    assert list(scoring) == [d.dimension for d in EXERCISE.scoring]
    capped = EXERCISE.hints[0].dimension  # hint 1 was used during the session
    assert scoring[capped]["cap"] == 3 and scoring[capped]["capped_by"] == [1]
    assert scoring["correctness"]["score"] == (3 if capped == "correctness" else 4)
    assert "## Scores (1-4 per dimension)" in markdown and "| correctness |" in markdown

    history = history_json()
    [mock] = history["mocks"]
    assert mock["status"] == "submitted" and mock["passed"] is True and mock["report"] == str(folder / "report.md")
    assert mock["hints_used"] == 1 and len(mock["discussion"]) == asked
    assert history["checks"][0]["source"] == "mock" and history["checks"][0]["passed"] is True
    assert {r["source"] for r in history["reviews"]} >= {"mock"}  # self-scores rated the cards


@pytest.mark.slow
def test_time_up_ends_the_session_and_diagnoses_bugs(tmp_path):
    # mock time runs 30x faster: one mock minute is two real seconds
    child = spawn("mock", "mha-screen", "--minutes", "1", "--dir", tmp_path, env={"ATTN_KIT_CLOCK_SCALE": "30"}, timeout=40)
    child.expect(PUBLIC)
    sol = session_file(tmp_path)
    save(sol, MASK_INVERTED)
    child.expect("Time is up after 01:00")
    child.expect("The full graded suite")
    child.expect("mask-inverted")
    answer_questions(child, covered_pattern=(False,))
    child.expect(r"report\.md")
    skip_self_assessment(child)
    assert finish(child) == 0
    data = json.loads((sol.parent / "report.json").read_text())
    assert data["status"] == "time-up" and data["passed"] is False
    assert data["diagnosis"][0]["bug"] == "mask-inverted"
    assert data["seconds_used"] == 60
    masking = {q.id for q in EXERCISE.questions if q.concept == "masking"}
    assert data["discussion"][0]["question"] in masking  # questions on the failed concept come first
    assert "mask-inverted" in (sol.parent / "report.md").read_text()


@pytest.mark.slow
def test_ctrl_c_then_abandon_is_recorded_as_abandoned(tmp_path):
    child = spawn("mock", "--dir", tmp_path, "--minutes", "30")  # no exercise: the first not yet passed
    child.expect(PUBLIC)
    sol = session_file(tmp_path)
    save(sol, NO_SCALING)
    child.expect(r"saves 1")
    child.sendintr()
    child.expect("Stopped after")
    child.expect(r"Submit this solution now, or abandon the session\?")
    child.sendline("abandon")
    child.expect("recorded as abandoned")
    assert finish(child) == 130
    data = json.loads((sol.parent / "report.json").read_text())
    assert data["status"] == "abandoned" and data["score"] is None
    assert data["solution"] == NO_SCALING.read_text()  # the work is kept
    [mock] = history_json()["mocks"]
    assert mock["status"] == "abandoned" and mock["ended_at"]


@pytest.mark.slow
def test_ctrl_c_then_submit_grades(tmp_path):
    child = spawn("mock", "mha-screen", "--dir", tmp_path, "--minutes", "30")
    child.expect(PUBLIC)
    sol = session_file(tmp_path)
    save(sol, REFERENCE)
    child.expect(r"saves 1")
    child.sendintr()
    child.expect(r"\[submit\]")
    child.sendline("")  # the default is submit
    child.expect(f"All {CHECKS} checks passed")
    answer_questions(child)
    skip_self_assessment(child)
    assert finish(child) == 0
    assert json.loads((sol.parent / "report.json").read_text())["status"] == "submitted"


def test_interviewer_sheet(tmp_path):
    proc = attn_kit("mock", "mha-screen", "--interviewer", "--dir", tmp_path)
    assert proc.returncode == 0
    out = proc.stdout
    flat = " ".join(out.split())
    assert "Interviewer sheet" in out and "Scoring: 1 to 4 per dimension" in out
    for item in EXERCISE.scoring:  # six dimensions, four anchors each
        assert item.dimension in out
        for anchor in item.anchors:
            assert anchor[:40] in flat
    for item in EXERCISE.checkpoints:
        assert item.expect[:40] in flat
    for question in EXERCISE.questions:
        assert question.key_points[0][:40] in flat
    assert flat.count("– (required) ") == sum(len(q.required) for q in EXERCISE.questions)
    for item in EXERCISE.followups:
        if item.answer:
            assert item.answer[:40] in flat
    assert list(tmp_path.iterdir()) == []  # no session is started


@pytest.mark.slow
def test_mock_misuse(tmp_path):
    proc = attn_kit("mock", "no-such-exercise", "--dir", tmp_path)
    assert proc.returncode == 2 and "mha-screen" in proc.stderr
    proc = attn_kit("mock", "mha-screen", "--minutes", "0", "--dir", tmp_path)
    assert proc.returncode == 2
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = attn_kit("mock", "mha-screen", "--dir", blocker, "--unattended")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
