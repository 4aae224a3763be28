"""mock.run drives a whole session through a Terminal it is given, with no terminal of its own:
the CLI's MockTerminal is one implementation (tested through a real pseudo-terminal in
test_mock.py), this scripted one is another."""

from __future__ import annotations

import contextlib
import json

import pytest

from attn_kit.base.errors import UsageError
from attn_kit.practice import mock

from test_practice import REFERENCE


class ScriptedTerminal:
    """Puts the reference into the session file, presses `s`, answers one question and then cuts
    the discussion short; records every step."""

    def __init__(self):
        self.events: list[tuple] = []
        self.shown: list[mock.Status] = []

    def intro(self, exercise, file, minutes):
        self.events.append(("intro", exercise.id, minutes))
        file.write_text(REFERENCE.read_text())

    @contextlib.contextmanager
    def keys(self):
        class Keys:
            def read(self):
                return "s"

        yield Keys()

    @contextlib.contextmanager
    def live(self):
        yield lambda remaining, status: self.shown.append(status)

    def ended(self, reason, used):
        self.events.append(("ended", reason))

    def submit_or_abandon(self):
        raise AssertionError("asked to submit or abandon after a submit")

    def heading(self, text):
        self.events.append(("heading", text))

    def graded(self, report, exercise):
        self.events.append(("graded", report.passed))

    def error(self, message):
        self.events.append(("error", message))

    def warning(self, message):
        self.events.append(("warning", message))

    def ask(self, question, index, count):
        self.events.append(("ask", index, count))
        return ("scaling keeps the softmax out of saturation", [True] * len(question.key_points)) if index == 1 else None

    def followups(self, exercise):
        self.events.append(("followups",))

    def report_markdown(self, data):
        return f"markdown for a {data['status']} session\n"

    def finished(self, path, status, report, discussion):
        self.events.append(("finished", status, report.passed, len(discussion)))


def test_a_scripted_terminal_runs_a_whole_session(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_KIT_CLOCK_SCALE", "60")
    ui = ScriptedTerminal()
    code, path = mock.run("mha-screen", 5, tmp_path, None, ui, terminal=False, unattended=True)
    assert code == 0
    assert path.read_text() == "markdown for a submitted session\n"
    data = json.loads((path.parent / "report.json").read_text())
    assert data["status"] == "submitted" and data["passed"] is True
    assert [d["covered"] for d in data["discussion"]] == [data["discussion"][0]["total"]]
    assert ui.shown and ui.shown[0].running  # the first draw: public checks running
    events = [e[0] if e[0] in ("heading", "ask") else e for e in ui.events]
    asked = [e for e in ui.events if e[0] == "ask"]
    assert len(asked) == 2 and asked[0][2] >= 2  # cut short at the second question
    assert events[:3] == [("intro", "mha-screen", 5), ("ended", "submitted"), "heading"]
    assert ("graded", True) in events
    assert ("warning", "discussion cut short; the report keeps the answers given so far.") in events
    assert events[-1] == ("finished", "submitted", True, 1)
    headings = [e[1] for e in ui.events if e[0] == "heading"]
    assert headings == ["The full graded suite", "Discussion", "Follow-ups"]


def test_without_a_terminal_a_session_needs_unattended(tmp_path):
    with pytest.raises(UsageError, match="--unattended"):
        mock.run("mha-screen", 5, tmp_path, None, ScriptedTerminal(), terminal=False)
    assert not list(tmp_path.iterdir())  # nothing created
