"""80×24 first: `watch`, the mock and `list` in a real pseudo-terminal at 80×24 and 60×24. The
first failure, expected next to yours, fits one screen; no line is wider than the terminal (so
the terminal never wraps one, and a path is never broken mid-word); `list` is one line per
exercise."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from attn_kit.base.paths import solutions_dir
from attn_kit.grading import pipeline
from attn_kit.load import catalog

NO_SCALING = solutions_dir("mha-screen") / "bugs" / "no-scaling.py"
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]|\r")
SIZES = [(24, 80), (24, 60)]


def spawn(*args, size, cwd, timeout=60) -> pexpect.spawn:
    env = dict(os.environ, TERM="xterm-256color")
    child = pexpect.spawn(
        sys.executable, ["-m", "attn_kit.cli", *map(str, args)], env=env, cwd=str(cwd), encoding="utf-8", dimensions=size, timeout=timeout
    )
    child.logfile_read = io.StringIO()  # everything the terminal was sent
    return child


def lines_of(text: str) -> list[str]:
    """What the terminal shows, line by line, without escape sequences (styles, cursor moves)."""
    return ESCAPES.sub("", text).split("\n")


def assert_fits(lines: list[str], width: int) -> None:
    wide = [line for line in lines if len(line) > width]
    assert not wide, f"lines wider than {width} columns wrap on the terminal: {wide}"


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "60x24"])
def test_list_is_one_line_per_exercise(tmp_path, size):
    child = spawn("list", size=size, cwd=tmp_path)
    child.expect(pexpect.EOF)
    child.close()
    lines = [line for line in lines_of(child.logfile_read.getvalue()) if line.strip()]
    assert_fits(lines, size[1])
    exercises = list(catalog.exercises())
    assert len(lines) == len(exercises) + 2, lines  # the header, one per exercise, "Start one with"
    for line, exercise_id in zip(lines[1:], exercises):
        assert line.split()[0] == exercise_id and "not started" in line
    if size[1] == 80:
        assert catalog.exercise("mha-screen").title in lines[1]


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=["80x24", "60x24"])
def test_watch_shows_the_first_failure_on_one_screen(tmp_path, size):
    mine = tmp_path / "solution.py"
    mine.write_text(NO_SCALING.read_text())
    child = spawn("check", "solution.py", "--watch", "--seed", "1", size=size, cwd=tmp_path)
    child.expect(r"run 1 · watching")
    child.send("q")
    child.expect(pexpect.EOF)
    child.close()
    screen = lines_of(child.logfile_read.getvalue().rsplit("\x1b[2J", 1)[-1])  # since the last clear
    while screen and not screen[-1].strip():
        screen.pop()
    assert len(screen) <= size[0], "\n".join(screen)
    assert_fits(screen, size[1])
    text = "\n".join(screen)
    assert re.search(r"^\s+expected \[", text, re.M) and re.search(r"^\s+yours\s+\[", text, re.M), text
    assert "● no-scaling:" in text and "Fix:" in text and "26/47 points" in text
    assert screen[-1].startswith("save re-runs · r re-run · q quit")


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=["80x24", "60x24"])
def test_the_mock_fits_the_terminal_and_its_grading_one_screen(tmp_path, size):
    child = spawn("mock", "mha-screen", "--minutes", "5", "--dir", ".", size=size, cwd=tmp_path)
    child.expect(r"(?<!\d)0/4(?!\d)")  # the starter graded: every public check failing
    [session] = Path(tmp_path).glob("mock-mha-screen-*/solution.py")
    time.sleep(0.3)
    session.write_text(NO_SCALING.read_text())
    child.expect(r"(?<!\d)3/4(?!\d)")  # the save was graded
    child.send("s")
    child.expect("Question 1/")
    child.sendeof()  # cut the discussion short
    child.expect(r"Report: ")
    child.expect(r"Level \(junior, mid, senior\)")  # the solo self-assessment: end of input skips it
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    text = ESCAPES.sub("", child.logfile_read.getvalue())
    graded = text.split("The full graded suite", 1)[1].split("Discussion", 1)[0].split("\n")[1:]
    while graded and not graded[-1].strip("─ "):
        graded.pop()
    assert len(graded) <= size[0], "\n".join(graded)
    joined = "\n".join(graded)
    assert re.search(r"^\s+expected \[", joined, re.M) and re.search(r"^\s+yours\s+\[", joined, re.M), joined
    lines = [line for line in text.split("\n") if "⏱" not in line]  # the live line redraws in place
    assert_fits(lines, size[1])
    statuses = re.findall(r"⏱[^⏱\n]*?s submit", text)
    assert statuses and all(len(status) < size[1] for status in statuses), statuses
    starter = [status for status in statuses if " 0/4" in status]
    saved = [status for status in statuses if " 3/4" in status]
    assert starter and saved, statuses
    shown = re.search(r"(?:failing: |✗ )([a-z, -]+?)(?: \+(\d+) more)? │", starter[-1])
    assert shown, starter[-1]
    names = shown.group(1).split(", ")  # as many as fit, then how many more
    public = [c.id for c in pipeline.suite_for(catalog.exercise("mha-screen")).checks if c.public]
    assert names == public[: len(names)] and len(names) + int(shown.group(2) or 0) == len(public), starter[-1]
    assert len(names) >= (2 if size[1] == 80 else 1), starter[-1]
    assert re.search(r"(failing: |✗ )public-attention-example │", saved[-1]), saved[-1]
    session_path = str(session.relative_to(tmp_path))
    assert any(session_path in line for line in lines), "the session file's path, whole on one line"


# --- the check header: one line, the seed always on it ---------------------------------------------


def test_a_long_path_is_shortened_between_folders(tmp_path, monkeypatch):
    from attn_kit.render.check import short_path

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    deep = "/opt/venv/lib/python3.12/site-packages/attn_kit/solutions/mha-screen/reference_lists.py"
    assert short_path(deep, 200) == deep and short_path("solution.py", 3) == "solution.py"
    for room in (60, 40, 30, 25):
        shown = short_path(deep, room)
        assert len(shown) <= room and shown.startswith(("/opt/…/", "…/")), shown
        assert deep.endswith(shown.split("…", 1)[1]), "only whole folders are left out"
    assert short_path(deep, 5) == "…/reference_lists.py"  # the file's name, whatever the room
    mine = tmp_path / "a" / "much" / "deeper" / "folder" / "solution.py"
    assert short_path(str(mine), 40) == "a/much/deeper/folder/solution.py"  # relative to the current folder
    monkeypatch.chdir("/")
    home = tmp_path / "home" / "projects" / "practice" / "solution.py"
    assert short_path(str(home), len(str(home)) - 1) == "~/projects/practice/solution.py"


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "60x24"])
def test_the_check_header_keeps_the_seed_on_its_line(tmp_path, size):
    """A solution deep in an installed package (a site-packages path), checked from elsewhere:
    the header is one line with the seed on it, the path shortened between folders."""
    deep = tmp_path / "venv" / "lib" / "python3.12" / "site-packages" / "attn_kit" / "solutions" / "mha-screen"
    deep.mkdir(parents=True)
    mine = deep / "reference_lists.py"
    mine.write_text((solutions_dir("mha-screen") / "reference_lists.py").read_text())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    child = spawn("check", mine, "--seed", "12345", size=size, cwd=elsewhere)
    child.expect(pexpect.EOF)
    child.close()
    drawn = child.logfile_read.getvalue().replace("\r\n", "\n")
    lines = [ESCAPES.sub("", line.rsplit("\r", 1)[-1]) for line in drawn.split("\n")]  # as each line ends up
    at = next(i for i, line in enumerate(lines) if line.startswith("attn-kit check"))
    header = lines[at]
    assert_fits(lines[at : at + 2], size[1])
    assert header.endswith(" · seed 12345"), lines
    if size[1] == 80:  # path and seed on one line
        shown = header.split(" · ")[1]
    else:  # too narrow for both: the path on the next line
        assert header == "attn-kit check mha-screen · seed 12345", header
        shown = lines[at + 1].strip()
    assert shown.endswith("/reference_lists.py") and "…/" in shown, lines[at : at + 2]
    assert str(mine).endswith(shown.split("…", 1)[1]), "only whole folders are left out"


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=["80x24", "60x24"])
def test_error_messages_wrap_between_words(tmp_path, size):
    """An error's prose wraps at spaces on a terminal (the terminal's own wrap would cut words);
    a source line and its caret are never re-wrapped; piped, each line stays whole."""
    notests = tmp_path / "a_file_with_a_rather_long_name_and_no_tests_in_it.py"
    notests.write_text("def helper():\n    return 1\n")
    child = spawn("test-tests", notests.name, size=size, cwd=tmp_path)
    child.expect(pexpect.EOF)
    child.close()
    drawn = child.logfile_read.getvalue().replace("\r\n", "\n")
    lines = [ESCAPES.sub("", line.rsplit("\r", 1)[-1]).rstrip() for line in drawn.split("\n")]
    at = next(i for i, line in enumerate(lines) if line.startswith("Error: "))
    shown = [line for line in lines[at:] if line]
    assert len(shown) >= 2 and all(len(line) <= size[1] for line in shown), shown
    piped = subprocess.run(
        [sys.executable, "-m", "attn_kit.cli", "test-tests", notests.name], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert piped.returncode == child.exitstatus == 1
    [whole] = [line for line in piped.stderr.splitlines() if line.startswith("Error: ")]
    assert " ".join(shown) == whole, "the same words, broken only between them"
    bad = tmp_path / "broken.py"
    bad.write_text("# attn-kit: mha-screen\ndef multi_head_attention(x, params, num_heads, mask=None:\n    return x\n")
    child = spawn("check", bad.name, size=size, cwd=tmp_path)
    child.expect(pexpect.EOF)
    child.close()
    lines = lines_of(child.logfile_read.getvalue())
    source = next(i for i, line in enumerate(lines) if "def multi_head_attention(" in line)
    assert lines[source].startswith("    def multi_head_attention(x, params, num_heads, mask=None:")
    assert lines[source + 1].strip() == "^"
