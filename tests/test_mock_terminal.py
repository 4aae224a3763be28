"""mock without a terminal, and end of input at "submit or abandon?" (the stated default: submit)."""

from __future__ import annotations

import json

import pytest
from test_mock import PUBLIC, session_file, skip_self_assessment

from conftest import attn_kit
from test_practice import finish, spawn


def test_mock_refuses_a_non_terminal_stdin_unless_unattended(tmp_path):
    proc = attn_kit("mock", "mha-screen", "--dir", tmp_path, input="")
    assert proc.returncode == 2 and "not a terminal" in proc.stderr and "--unattended" in proc.stderr
    assert "Traceback" not in proc.stderr and list(tmp_path.iterdir()) == []  # nothing started


@pytest.mark.slow
def test_end_of_input_at_submit_or_abandon_submits(tmp_path):
    child = spawn("mock", "mha-screen", "--dir", tmp_path, "--minutes", "30", timeout=60)
    child.expect(PUBLIC)
    sol = session_file(tmp_path)
    child.sendintr()
    child.expect(r"Submit this solution now, or abandon the session\?")
    child.sendeof()  # ^D: end of input at the question
    child.expect("The full graded suite")  # submitted, so graded
    child.expect("an empty line ends your answer")
    child.sendeof()  # end of input again: the discussion is cut short
    child.expect(r"report\.md")
    skip_self_assessment(child)  # and at the self-assessment: nothing is asked after it
    assert finish(child) in (0, 1)
    data = json.loads((sol.parent / "report.json").read_text())
    assert data["status"] == "submitted" and data["score"] is not None
