"""check --locate as the terminal shows it (a real pseudo-terminal at 80x24): a plain check
mentions --locate and shows no edit; --locate names the line and what is wrong there in words;
--locate --fix also shows the edit as a diff of the candidate's own lines."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pexpect
import pytest

pytestmark = pytest.mark.slow  # three runs of the real CLI, one of them searching

SOURCE = Path(__file__).parent / "corpus" / "locate" / "lists_compact__causal-off-by-one.py"
WRONG = "    return [[[j < i for j in range(T)] for i in range(T)] for _ in range(B)]"
RIGHT = "    return [[[j <= i for j in range(T)] for i in range(T)] for _ in range(B)]"


def run(*args) -> tuple[str, int]:
    child = pexpect.spawn(
        sys.executable, ["-m", "attn_kit.cli", *map(str, args)], env=dict(os.environ), encoding="utf-8", dimensions=(24, 80), timeout=120
    )
    child.expect(pexpect.EOF)
    child.close()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before).replace("\r", "")
    return text, child.exitstatus


@pytest.fixture
def solution(tmp_path):
    target = tmp_path / "solution.py"
    shutil.copy(SOURCE, target)
    return target


def line_of(path: Path, text: str) -> int:
    return path.read_text().splitlines().index(text) + 1


def test_three_levels(solution):
    line = line_of(solution, WRONG)
    before = solution.read_bytes(), solution.stat().st_mtime_ns

    plain, code = run("check", solution, "--seed", "7")
    assert code == 1
    assert "--locate" in plain and "Locate" not in plain and f"+ {line} |" not in plain
    assert f"line {line}" not in plain

    located, code = run("check", solution, "--seed", "7", "--locate")
    assert code == 1
    assert f"Look at line {line}." in located
    assert (
        f"line {line}: this comparison is the wrong one" in located or f"line {line}: the bound of this comparison is off by one" in located
    )
    assert f"+ {line} |" not in located and "add --fix" in located  # the words, not the edit

    fixed, code = run("check", solution, "--seed", "7", "--locate", "--fix")
    assert code == 1
    assert f"Look at line {line}." in fixed
    # the diff is of the candidate's own line; at 80 columns the terminal wraps it, so compare
    # the lines with the wrapping taken out
    unwrapped = fixed.replace("\n", "")
    assert f"- {line} | {WRONG}" in unwrapped and f"+ {line} | {RIGHT}" in unwrapped
    assert (solution.read_bytes(), solution.stat().st_mtime_ns) == before


def test_a_miss_shows_where_the_values_go_wrong(tmp_path):
    # no operator reads a bias the file never reads: the search misses, and the screen says where
    # the traced values first go wrong, in the stage's words, never the functions' line ranges
    target = tmp_path / "solution.py"
    shutil.copy(Path(__file__).parent / "corpus" / "locate" / "lists_compact__biases-ignored.py", target)
    located, code = run("check", target, "--seed", "4242", "--locate", "--locate-budget", "1")
    assert code == 1
    screen = " ".join(located.split())
    assert "Look at line 46." in screen and "should be the projected queries" in screen
    assert "No verified edit fixes every failing check" in screen and "CPU s" in screen
    assert not re.search(r"lines \d+-\d+", screen)
