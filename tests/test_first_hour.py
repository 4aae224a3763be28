"""The first hour's small stumbles, each fixed and kept fixed: a closed pipe, declining a reset,
"1 minute", a mock status naming every check that is not passing, follow-ups shown once after a
mock, multi-line answers in `discuss`, cards that come due during a session, the crossover
question's wording."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from attn_kit import catalog, grading, mock, render, render_practice
from attn_kit.cli import cli
from attn_kit.paths import solutions_dir

REFERENCE = solutions_dir("mha-screen") / "reference_lists.py"


def test_a_reader_that_stops_early_keeps_the_exit_status(tmp_path):
    """`attn-kit check FILE | head`: the reader closes the pipe before the report is written;
    a passing file still exits 0 (rich's default on a closed pipe is 1), and the run is saved."""
    mine = tmp_path / "mine.py"
    mine.write_text(REFERENCE.read_text())
    read_end, write_end = os.pipe()
    os.close(read_end)                       # the reader is gone before the first write
    try:
        proc = subprocess.run([sys.executable, "-m", "attn_kit.cli", "check", str(mine), "--seed", "2"],
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    history = subprocess.run([sys.executable, "-m", "attn_kit.cli", "history", "--json"], capture_output=True,
                             text=True, timeout=60)
    assert str(mine) in history.stdout, "the run is saved although its output was not read"


def test_minutes_are_counted_in_words():
    assert render_practice.minutes_text(1) == "1 minute"
    assert render_practice.minutes_text(45) == "45 minutes"
    assert render_practice.minutes_text(0.5) == "0.5 minutes"
    out = Console(width=80, file=io.StringIO(), color_system=None, theme=render.THEME)
    render_practice.mock_intro(catalog.exercise("kv-cache"), Path("session.py"), 1, out=out)
    assert "1 minute." in out.file.getvalue() and "1 minutes" not in out.file.getvalue()


def test_the_mock_status_names_every_check_that_is_not_passing(tmp_path):
    """The starter fails the first public check and the second is not checked after it: the
    status says 0/2 and names both."""
    exercise = catalog.exercise("kv-cache")
    session = mock.create_session(exercise, 45, tmp_path)
    status = mock.public_status(session, mock.Status())
    assert (status.passed, status.total) == (0, 2)
    assert len(status.failing) == 2
    line = render_practice.mock_status(600, status, width=200).plain
    assert all(name in line for name in status.failing), line


def test_a_passing_mock_shows_the_followups_once(capsys):
    from attn_kit.cli_practice import MockTerminal
    exercise = catalog.exercise("mha-screen")
    report = grading.grade(REFERENCE, grading.Options(seed=2))
    terminal = MockTerminal()
    terminal.graded(report, exercise)
    terminal.followups(exercise)
    shown = capsys.readouterr().out
    first = exercise.followups[0].prompt[:30]
    assert shown.count(first) == 1, shown


def _discuss(monkeypatch, later=None, stdin=""):
    """`attn-kit discuss mha-screen --new 1` in-process; `later` moves the clock review.queue
    reads after the first card (a card rated 'again' comes due a minute later)."""
    from attn_kit import review, store
    start = store.now()
    calls = {"n": 0}

    def clock():
        calls["n"] += 1
        return start if calls["n"] == 1 or later is None else start + later
    monkeypatch.setattr(review, "now", clock)
    return CliRunner().invoke(cli, ["discuss", "mha-screen", "--new", "1"], input=stdin)


def test_discuss_answers_take_several_lines_like_the_mock(monkeypatch):
    result = _discuss(monkeypatch, stdin="scores grow with the width\nso divide by sqrt(hd)\n\n3\n")
    assert result.exit_code == 0, result.output
    assert "an empty line ends it" in result.output
    assert "Reviewed 1 card." in result.output
    assert "not a valid choice" not in result.output, "the answer's second line was not taken as a rating"


def test_a_card_that_comes_due_during_the_session_is_offered(monkeypatch):
    result = _discuss(monkeypatch, later=timedelta(minutes=30), stdin="\n1\n\n3\n")
    assert result.exit_code == 0, result.output
    assert "Card 2/2 · due" in result.output, result.output
    assert "Reviewed 2 cards." in result.output
    again = _discuss(monkeypatch, stdin="\n1\n")            # without time passing: nothing more to offer
    assert "Card 2/" not in again.output


def test_reset_declined_changes_nothing_and_exits_0(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text("# work in progress\n")
    result = CliRunner().invoke(cli, ["reset", "mha-screen", str(mine)], input="n\n")
    assert result.exit_code == 0 and "Nothing changed" in result.output and "Aborted" not in result.output
    assert mine.read_text() == "# work in progress\n"


def test_the_crossover_question_names_what_its_key_points_count():
    question = next(q for q in catalog.exercise("mha-screen").questions if q.id == "attention-vs-linear-flops")
    assert any("MLP" in point for point in question.key_points)
    assert "MLP" in question.prompt and "projections" in question.prompt
