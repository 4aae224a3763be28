"""Long texts through a pager, as git does (issue 36): the statement (`show`, `start`), the
solution, the history and `check --full` go to `$PAGER` on a terminal (LESS defaulting to FRX),
never down a pipe; the solution's source lines are never wrapped. Run at 80×24 in a real
pseudo-terminal, with PAGER set to a script that records what it was given."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pexpect
import pytest

from attn_kit.base.paths import solutions_dir
from attn_kit.render import pager

from helpers import attn_kit

RECORDER = """#!/bin/sh
cat > "{log}"
echo "LESS=$LESS" > "{log}.env"
echo "PAGER-SHOWN"
"""
ESCAPES = __import__("re").compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def recorder(tmp_path: Path) -> tuple[str, Path]:
    log = tmp_path / "paged.txt"
    script = tmp_path / "pager.sh"
    script.write_text(RECORDER.format(log=log))
    script.chmod(0o755)
    return str(script), log


def spawn(tmp_path: Path, *args, env: dict) -> pexpect.spawn:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "attn_kit.cli", *map(str, args)],
        env=dict(os.environ, TERM="xterm-256color", ATTN_KIT_HOME=str(tmp_path / "home"), **env),
        cwd=str(tmp_path),
        encoding="utf-8",
        dimensions=(24, 80),
        timeout=60,
    )
    child.logfile_read = io.StringIO()
    return child


def screen(child: pexpect.spawn) -> str:
    child.expect(pexpect.EOF)
    child.close()
    return ESCAPES.sub("", child.logfile_read.getvalue())


def test_show_goes_through_the_pager_on_a_terminal(tmp_path):
    script, log = recorder(tmp_path)
    child = spawn(tmp_path, "show", "mha-screen", env={"PAGER": script})
    shown = screen(child)
    assert child.exitstatus == 0
    # the terminal shows what the pager printed, not the statement itself
    assert "PAGER-SHOWN" in shown and "Multi-head attention by hand" not in shown, shown[:500]
    paged = log.read_text()
    assert "Multi-head attention by hand" in paged and len(paged.splitlines()) > 24  # longer than a screen
    assert "\x1b[" in paged  # colours kept: the pager is given styled text (less -R)
    if "LESS" not in os.environ:
        assert (tmp_path / "paged.txt.env").read_text().strip() == "LESS=FRX"


def test_no_pager_on_a_pipe(tmp_path):
    script, log = recorder(tmp_path)
    proc = attn_kit("show", "mha-screen", cwd=tmp_path, env={"PAGER": script, "ATTN_KIT_HOME": str(tmp_path / "home")})
    assert proc.returncode == 0
    assert "Multi-head attention by hand" in proc.stdout and "PAGER-SHOWN" not in proc.stdout
    assert not log.exists()


def test_start_pages_the_statement_and_leaves_the_command_on_the_terminal(tmp_path):
    script, log = recorder(tmp_path)
    shown = screen(spawn(tmp_path, "start", "mha-screen", env={"PAGER": script}))
    assert "Multi-head attention by hand" in log.read_text()
    assert "PAGER-SHOWN" in shown and "attn-kit check mha_screen.py" in shown  # after the pager, on the screen


def test_solution_is_paged_with_its_lines_whole(tmp_path):
    script, log = recorder(tmp_path)
    shown = screen(spawn(tmp_path, "solution", "mha-screen", "--force", env={"PAGER": script}))
    assert "PAGER-SHOWN" in shown
    paged = ESCAPES.sub("", log.read_text())
    source = "\n".join(p.read_text() for p in sorted(solutions_dir("mha-screen").glob("reference*.py")))
    longest = max(source.splitlines(), key=len)
    assert len(longest) > 70  # a line that a wrap at 80 columns (with the line numbers) would split
    assert any(line.rstrip().endswith(longest.strip()) for line in paged.splitlines()), longest


def test_solution_on_a_terminal_without_a_pager_crops_never_wraps(tmp_path):
    shown = screen(spawn(tmp_path, "solution", "mha-screen", "--force", env={"PAGER": "cat"}))
    lines = shown.split("\n")
    assert all(len(line) <= 80 for line in lines)
    numbers = [int(line.split()[0]) for line in lines if line.strip() and line.split()[0].isdigit()]
    # every source line has its number: none was wrapped onto an unnumbered line
    code = [line for line in lines if line.startswith(" ") and line.strip()]
    assert numbers and len(code) == len(numbers), [line for line in code if not line.split()[0].isdigit()][:3]


def test_history_and_check_full_are_paged(tmp_path):
    script, log = recorder(tmp_path)
    bug = tmp_path / "mine.py"
    bug.write_text((solutions_dir("mha-screen") / "bugs" / "no-scaling.py").read_text())
    shown = screen(spawn(tmp_path, "check", "mine.py", "--full", "--seed", "1", env={"PAGER": script}))
    assert "PAGER-SHOWN" in shown and "no-scaling" in log.read_text()
    log.unlink()
    shown = screen(spawn(tmp_path, "history", env={"PAGER": script}))
    assert "PAGER-SHOWN" in shown and "Check runs" in log.read_text()


@pytest.mark.parametrize(
    "value, chop, expected",
    [(None, False, "less -R"), (None, True, "less -R -S"), ("", False, None), ("cat", False, None), ("no-such-pager-x", False, None)],
)
def test_the_pager_command_follows_git(monkeypatch, value, chop, expected):
    if value is None:
        monkeypatch.delenv("PAGER", raising=False)
    else:
        monkeypatch.setenv("PAGER", value)
    if expected and expected.startswith("less") and not __import__("shutil").which("less"):
        expected = None  # no less installed: the text is printed directly
    assert pager.command(chop) == expected
