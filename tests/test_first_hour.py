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

import pytest
from click.testing import CliRunner
from rich.console import Console

from attn_kit.base.paths import solutions_dir
from attn_kit.cli import cli
from attn_kit.grading import pipeline
from attn_kit.load import catalog
from attn_kit.practice import mock
from attn_kit.render import check
from attn_kit.render import practice as render_practice

REFERENCE = solutions_dir("mha-screen") / "reference_lists.py"


@pytest.mark.slow  # end to end: the CLI in several processes
def test_a_reader_that_stops_early_keeps_the_exit_status(tmp_path):
    """`attn-kit check FILE | head`: the reader closes the pipe before the report is written;
    a passing file still exits 0 (rich's default on a closed pipe is 1), and the run is saved."""
    mine = tmp_path / "mine.py"
    mine.write_text(REFERENCE.read_text())
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "attn_kit.cli", "check", str(mine), "--seed", "2"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    history = subprocess.run([sys.executable, "-m", "attn_kit.cli", "history", "--json"], capture_output=True, text=True, timeout=60)
    assert str(mine) in history.stdout, "the run is saved although its output was not read"


def test_minutes_are_counted_in_words():
    assert render_practice.minutes_text(1) == "1 minute"
    assert render_practice.minutes_text(45) == "45 minutes"
    assert render_practice.minutes_text(0.5) == "0.5 minutes"
    span = render_practice.span  # "next due in …", "due again in …"
    assert [span(timedelta(minutes=m)) for m in (1, 10, 60, 24 * 60, 3 * 24 * 60)] == [
        "1 minute",
        "10 minutes",
        "1 hour",
        "1 day",
        "3 days",
    ]
    out = Console(width=80, file=io.StringIO(), color_system=None, theme=check.THEME)
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
    from attn_kit.cli.practice import MockTerminal

    exercise = catalog.exercise("mha-screen")
    report = pipeline.grade(REFERENCE, pipeline.Options(seed=2))
    terminal = MockTerminal()
    terminal.graded(report, exercise)
    terminal.followups(exercise)
    shown = capsys.readouterr().out
    first = exercise.followups[0].prompt[:30]
    assert shown.count(first) == 1, shown


def _discuss(monkeypatch, later=None, stdin=""):
    """`attn-kit discuss mha-screen --new 1` in-process; `later` moves the clock review.queue
    reads after the first card (a card rated 'again' comes due a minute later)."""
    from attn_kit.practice import review, store

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
    # shown after the deck, as coming back; the deck's count stays 1 (issue 36, N3)
    assert "Again · came back during this session" in result.output and "Card 1/1" in result.output, result.output
    assert "Card 2/" not in result.output and "Reviewed 2 cards." in result.output
    again = _discuss(monkeypatch, stdin="\n1\n")  # without time passing: nothing more to offer
    assert "came back" not in again.output


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


# --- the kit always knows what's next -------------------------------------------------------------


def test_start_makes_its_exercise_current(tmp_path, monkeypatch, attn_home):
    monkeypatch.chdir(tmp_path)
    from attn_kit.practice.store import open_store

    with open_store() as store:  # an older run of another exercise
        store.add_check(
            exercise="mha-screen",
            file="s.py",
            seed=1,
            passed=False,
            checks_passed=3,
            checks_total=26,
            points=4,
            max_points=47,
            public_only=False,
            failing=[],
            bugs=[],
            concepts_failed=[],
        )
    assert CliRunner().invoke(cli, ["start", "kv-cache", "kv.py"]).exit_code == 0
    where = CliRunner().invoke(cli, [])
    assert "Current exercise: kv-cache (started)" in where.output
    assert "Next: attn-kit check kv.py" in where.output
    listing = CliRunner().invoke(cli, ["list"], env={"COLUMNS": "200"}).output
    assert any(line.startswith("kv-cache") and " started " in line for line in listing.splitlines()), listing
    with open_store() as store:  # a later check of another exercise takes over
        store.add_check(
            exercise="gqa",
            file="g.py",
            seed=1,
            passed=False,
            checks_passed=1,
            checks_total=9,
            points=1,
            max_points=20,
            public_only=False,
            failing=[],
            bugs=[],
            concepts_failed=[],
        )
    assert "Current exercise: gqa" in CliRunner().invoke(cli, []).output


def test_starting_never_creates_the_history(tmp_path, monkeypatch, attn_home):
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(cli, ["start", "gqa"]).exit_code == 0
    assert not (attn_home / "history.db").exists()
    assert "Current exercise: gqa (started)" in CliRunner().invoke(cli, []).output


def test_the_next_hint_is_about_the_check_that_failed(tmp_path):
    """no-scaling fails the scaling checks: `hint` gives the scaling ladder, gentlest first, not
    hint 1 (softmax); the Stuck? line after the check names that hint."""
    from attn_kit.practice import progress
    from attn_kit.practice.store import open_store
    from attn_kit.render import practice as render_practice

    exercise = catalog.exercise("mha-screen")
    mine = tmp_path / "mine.py"
    mine.write_text((solutions_dir("mha-screen") / "bugs" / "no-scaling.py").read_text())
    report = pipeline.grade(mine, pipeline.Options(seed=1))
    with open_store() as store:
        recorded = progress.record_check(store, report)
        ladder, because = progress.failure_ladder(
            exercise, [r.id for r in report.results if r.status != "pass"], [d.bug for d in report.diagnosis]
        )
        assert ladder and ladder[0] != 1 and because
        assert {exercise.hints[n - 1].concept for n in ladder} == {"scaling"}
        assert [exercise.hints[n - 1].step for n in ladder] == sorted(
            (exercise.hints[n - 1].step for n in ladder), key=catalog.HINT_STEPS.index
        )
        assert recorded.next_hint == ladder[0]
        shown = [progress.take_hints(store, exercise)[0] for _ in ladder]
        assert [s.level for s in shown] == ladder and shown[0].because == because
        after = progress.take_hints(store, exercise)[0]  # that topic used up: the plain next unseen
        assert after.level == 1 and not after.because
    out = Console(width=200, file=io.StringIO(), color_system=None, theme=check.THEME)
    render_practice.after_check(recorded, report, out)
    hint = exercise.hints[ladder[0] - 1]  # a topic's hints share a title: the step tells them apart
    step = render_practice.STEPS[hint.step]
    assert f"Stuck? attn-kit hint mha-screen shows hint {ladder[0]}, “{hint.title}” ({step})." in out.file.getvalue()


def test_bare_hint_uses_the_current_exercise(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    CliRunner().invoke(cli, ["start", "rope"])
    result = CliRunner().invoke(cli, ["hint"])
    assert result.exit_code == 0 and f"Hint 1/{len(catalog.exercise('rope').hints)}" in result.output
    assert "Hints used for rope: 1" in result.output


def test_did_you_mean_a_file_or_a_function(tmp_path, monkeypatch):
    from attn_kit.base.errors import LoadError, UsageError
    from attn_kit.load import preflight

    monkeypatch.chdir(tmp_path)
    Path("sol.py").write_text(REFERENCE.read_text())
    result = CliRunner().invoke(cli, ["check", "sol"])
    assert result.exit_code == 2 and "Did you mean sol.py?" in result.output
    assert "Did you mean sol.py?" in CliRunner().invoke(cli, ["check", "sool.py"]).output
    assert "attn-kit start EXERCISE" in CliRunner().invoke(cli, ["check", "other.py"]).output
    typo = tmp_path / "typo.py"  # the header says mha-screen; the name is mha-masked-bias's
    typo.write_text(REFERENCE.read_text().replace("def multi_head_attention", "def multihead_attention"))
    try:
        pipeline.grade(typo, pipeline.Options(seed=1))
        raise AssertionError("graded a file without its main function")
    except LoadError as exc:
        assert "Did you mean `multi_head_attention` where it says `multihead_attention`?" in str(exc)
        assert "looks like a" not in str(exc)
    headless = tmp_path / "headless.py"  # no header, a near miss of a main function
    headless.write_text("def multi_head_atention(x):\n    return x\n")
    try:
        preflight.detect_exercise(preflight.read_source(headless))
        raise AssertionError("detected an exercise")
    except (LoadError, UsageError) as exc:
        assert "Did you mean `multi_head_attention` (mha-screen)" in str(exc)


# --- progress on long work ------------------------------------------------------------------------


def _terminal(*args, cwd):
    import pexpect

    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "CI")}  # a person's terminal
    return pexpect.spawn(
        sys.executable, ["-m", "attn_kit.cli", *map(str, args)], env=env, cwd=str(cwd), encoding="utf-8", dimensions=(24, 80), timeout=120
    )


@pytest.mark.slow  # end to end: the CLI in several processes
def test_check_shows_a_live_line_on_a_terminal_and_nothing_on_a_pipe(tmp_path):
    """The line is drawn from the first check on (a slow solution keeps it up; the terminal's
    stream shows it even for a fast one, before it is erased)."""
    import pexpect

    slow = tmp_path / "slow.py"
    slow.write_text(REFERENCE.read_text())
    child = _terminal("check", slow, "--seed", "1", cwd=tmp_path)
    child.expect(r"slow\.py: check \d+/\d+ [a-z-]+")  # which check of how many is running
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    piped = subprocess.run(
        [sys.executable, "-m", "attn_kit.cli", "check", str(slow), "--seed", "1"], capture_output=True, text=True, timeout=120
    )
    assert piped.returncode == 0 and "check 1/" not in piped.stderr + piped.stdout
    data = subprocess.run(
        [sys.executable, "-m", "attn_kit.cli", "check", str(slow), "--seed", "1", "--json"], capture_output=True, text=True, timeout=120
    )
    assert data.stdout.count("\n") == 1 and "check 1/" not in data.stderr


@pytest.mark.slow
def test_test_tests_shows_how_many_implementations_have_run(tmp_path):
    """...and then a report that fits the 80×24 screen: the score first, the first missed bugs
    with their test ideas, the option that shows the rest."""
    import re

    import pexpect

    from helpers import CORPUS

    child = _terminal("test-tests", CORPUS / "candidate_tests" / "shapes_only.py", cwd=tmp_path)
    child.logfile_read = io.StringIO()
    child.expect(r"your tests ran against \d+ of \d+ implementations")
    child.expect(pexpect.EOF)
    child.close()
    drawn = child.logfile_read.getvalue().replace("\r\n", "\n").split("\n")
    escapes = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]")
    screen = [escapes.sub("", line.rsplit("\r", 1)[-1]).rstrip() for line in drawn]  # as each line ends up
    start = next(i for i, line in enumerate(screen) if line.startswith("attn-kit test-tests"))
    report = screen[start:]
    while report and not report[-1]:
        report.pop()
    assert len(report) <= 23 and all(len(line) <= 80 for line in report), "\n".join(report)
    assert report[2].startswith("Score: ") and report[-1].startswith("Add --all for every bug"), report
    assert any(line.startswith("  ● no-scaling — ") for line in report), "the first missed bug, with its idea"


def test_the_live_line_draws_nothing_when_disabled_or_piped(capsys):
    from attn_kit.cli import app

    with app._progress(Path("solution.py"), as_json=True) as update:  # --json
        update("still busy")
    with check.working("busy") as update:  # stderr is captured here: not a terminal
        update("still busy")
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_check_help_says_json_runs_are_not_saved():
    text = " ".join(CliRunner().invoke(cli, ["check", "--help"]).output.split())
    assert "JSON runs are not saved to your history" in text


def test_locate_is_offered_only_when_there_is_code_to_search(tmp_path):
    """The untouched starter fails because nothing is written yet: no edit of it can pass, so
    `check` does not offer --locate; a written file with a bug does."""
    starter, buggy = tmp_path / "starter.py", tmp_path / "buggy.py"
    starter.write_text(catalog.exercise("mha-screen").starter)
    buggy.write_text((solutions_dir("mha-screen") / "bugs" / "no-scaling.py").read_text())
    shown = CliRunner().invoke(cli, ["check", str(starter), "--seed", "1"], env={"COLUMNS": "400"})
    assert shown.exit_code == 1 and "not implemented yet" in shown.output
    assert "Can't see where?" not in shown.output and "--locate" not in shown.output
    shown = CliRunner().invoke(cli, ["check", str(buggy), "--seed", "1"], env={"COLUMNS": "400"})
    assert shown.exit_code == 1
    assert "--locate: the line to fix" in shown.output  # the first screen's last line
    shown = CliRunner().invoke(cli, ["check", str(buggy), "--seed", "1", "--full"], env={"COLUMNS": "400"})
    assert f"Can't see where? attn-kit check {buggy} --seed 1 --locate points at the line." in shown.output
