"""The first screen is the answer: a failing `check`, run in a real pseudo-terminal at 80×24,
leaves on the screen what a person needs to act on: the verdict, each cause with its fix (the
biggest first), the worst failure with expected beside yours, and, when the failure is about
which keys a query sees, a picture of them. Each test reads what is left on the terminal when the
command ends: the last 23 lines (the 24th holds the shell's prompt)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from attn_kit.base.paths import solutions_dir
from attn_kit.load import catalog

ROOT = Path(__file__).resolve().parent
TWO_BUGS = ROOT / "corpus" / "multibug" / "lists_no_scaling_and_inverted_mask.py"
HALF_FIX = ROOT / "corpus" / "halffix" / "numpy_fill_left_in_layer.py"
ONE_FUTURE = solutions_dir("mha-screen") / "bugs" / "causal-off-by-one@one-future.py"
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]")
ROWS, COLUMNS = 24, 80


def run(*args, cwd) -> pexpect.spawn:
    env = dict(os.environ, TERM="xterm-256color")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "attn_kit.cli", *map(str, args)],
        env=env,
        cwd=str(cwd),
        encoding="utf-8",
        dimensions=(ROWS, COLUMNS),
        timeout=120,
    )
    child.logfile_read = io.StringIO()
    return child


def screen_after(child: pexpect.spawn) -> list[str]:
    """The lines the terminal shows once the command has ended: each line as it was left (a live
    line redrawn with \\r keeps its last state), the last ROWS - 1 of them. No line may be wider
    than the terminal, or the terminal would wrap it and push more off the top."""
    drawn = ESCAPES.sub("", child.logfile_read.getvalue()).replace("\r\n", "\n")
    lines = [line.rsplit("\r", 1)[-1].rstrip() for line in drawn.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    wide = [line for line in lines if len(line) > COLUMNS]
    assert not wide, f"wider than {COLUMNS} columns: {wide}"
    return lines[-(ROWS - 1) :]


def check_screen(path: Path, tmp_path: Path, seed: int = 1) -> list[str]:
    child = run("check", path, "--seed", seed, cwd=tmp_path)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    lines = screen_after(child)
    assert any(line.startswith("attn-kit check mha-screen") for line in lines), "the report's header scrolled off:\n" + "\n".join(lines)
    return lines


def joined(lines: list[str]) -> str:
    """The screen's words with each line's wrap undone, to find a sentence that wraps."""
    return " ".join(" ".join(lines).split())


def causes_of(lines: list[str]) -> list[tuple[str, int]]:
    """(bug, wrong rows it explains) for each cause line, top to bottom."""
    return [(m.group(1), int(m.group(2))) for line in lines if (m := re.match(r"● ([a-z0-9@-]+): (\d+) of \d+ wrong rows", line))]


def test_a_two_bug_file_shows_the_bigger_cause_and_both_fixes(tmp_path):
    lines = check_screen(TWO_BUGS, tmp_path)
    found = causes_of(lines)
    assert sorted(bug for bug, _ in found) == ["mask-inverted", "no-scaling"], "\n".join(lines)
    assert [rows for _, rows in found] == sorted((rows for _, rows in found), reverse=True), "the biggest cause first"
    text = joined(lines)
    exercise = catalog.exercise("mha-screen")
    for bug, _ in found:  # the fix in a phrase, in the exercise's own wording where it has one
        phrase = catalog.bug_in(exercise, bug).fix_short
        assert phrase and f"Fix: {phrase}." in text, (bug, text)
    assert re.search(r"^\s+expected \[|which keys each query sees", "\n".join(lines), re.M), "the worst failure, expected beside yours"
    assert any(line.startswith("--full: each failure in full") for line in lines), "what shows more, on the screen too"


def grid_rows(lines: list[str]) -> list[tuple[int, list[str], list[str]]]:
    """(query, expected cells, your cells) of the picture on the screen."""
    rows = []
    for line in lines:
        m = re.match(r"^\s+q(\d+)\s{2}(.+?)\s{3,}(.+?)(?:\s+←)?$", line)
        if m:
            rows.append((int(m.group(1)), m.group(2).split(" "), m.group(3).split(" ")))
    return rows


def test_a_causal_off_by_one_lights_the_extra_key(tmp_path):
    lines = check_screen(ONE_FUTURE, tmp_path)
    assert any("which keys each query sees" in line for line in lines), "\n".join(lines)
    rows = grid_rows(lines)
    assert rows and len(rows) + 2 <= 8, "at most 8 lines"
    extra = [(q, j) for q, expected, yours in rows for j, (e, y) in enumerate(zip(expected, yours)) if e == "·" and y != "·"]
    assert extra, "a key lit in yours and not in expected"
    assert all(j == q + 1 for q, j in extra), f"the one key after the diagonal: {extra}"
    for q, expected, _ in rows:  # the expected picture is the causal triangle
        assert [c != "·" for c in expected] == [j <= q for j in range(len(expected))]
    marked = [line for line in lines if line.rstrip().endswith("←")]
    assert len(marked) == len({q for q, _ in extra})


WINDOW_WIDER = solutions_dir("sliding-window") / "bugs" / "window-off-by-one.py"  # window + 1 keys per query
WINDOW_NARROWER = solutions_dir("sliding-window") / "bugs" / "window-off-by-one@narrow.py"  # window - 1 keys


@pytest.mark.parametrize(("path", "extra"), [(WINDOW_WIDER, 1), (WINDOW_NARROWER, -1)], ids=["wider", "narrower"])
def test_a_window_off_by_one_draws_the_band_with_the_key_it_gets_wrong(tmp_path, path, extra):
    """sliding-window passes a window number, not a mask: its picture comes from the check that
    reads the weights (v = I), read against the band the case names (window = 3)."""
    child = run("check", path, "--seed", 1, cwd=tmp_path)
    child.expect(pexpect.EOF)
    child.close()
    lines = screen_after(child)
    assert any(line.startswith("attn-kit check sliding-window") for line in lines), "the header scrolled off:\n" + "\n".join(lines)
    assert any(line.startswith("● window-off-by-one:") for line in lines), "\n".join(lines)
    assert any("which keys each query sees" in line for line in lines), "\n".join(lines)
    rows = grid_rows(lines)
    window = 3
    assert rows and len(rows) + 2 <= 8, "at most 8 lines"
    for q, expected, yours in rows:
        assert [c != "·" for c in expected] == [q - window < j <= q for j in range(len(expected))], (q, expected)
        assert [c != "·" for c in yours] == [q - window - extra < j <= q for j in range(len(yours))], (q, yours)
    marked = {q for q, _, _ in rows if any(line.rstrip().endswith("←") and re.match(rf"^\s+q{q}\s", line) for line in lines)}
    differs = {q for q, e, y in rows if [c != "·" for c in e] != [c != "·" for c in y]}
    assert marked == differs and differs, (marked, differs)


def test_a_half_fix_names_the_function_that_still_has_the_bug(tmp_path):
    text = joined(check_screen(HALF_FIX, tmp_path))
    assert "● blocked-row-uniform:" in text
    assert "`multi_head_attention` still has it, `stable_softmax` no longer does." in text, text
    assert "no known bug matches" not in text


@pytest.mark.slow
def test_watch_names_the_half_fix_too(tmp_path):
    mine = tmp_path / "solution.py"
    mine.write_text(HALF_FIX.read_text())
    child = run("check", "solution.py", "--watch", "--seed", "1", cwd=tmp_path)
    child.expect(r"run 1 · watching")
    child.send("q")
    child.expect(pexpect.EOF)
    child.close()
    since = ESCAPES.sub("", child.logfile_read.getvalue().rsplit("\x1b[2J", 1)[-1]).replace("\r\n", "\n")
    text = " ".join(since.split())
    assert "`multi_head_attention` still has it, `stable_softmax` no longer does." in text, text


def test_piped_and_no_color_pictures_are_plain(tmp_path):
    """Piped, or under NO_COLOR, the picture is the same characters with no colour; --json has none."""
    env = dict(os.environ, NO_COLOR="1")
    piped = subprocess.run(
        [sys.executable, "-m", "attn_kit.cli", "check", str(ONE_FUTURE), "--seed", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert "which keys each query sees" in piped.stdout and "\x1b[" not in piped.stdout
    assert grid_rows(piped.stdout.splitlines())
    as_json = subprocess.run(
        [sys.executable, "-m", "attn_kit.cli", "check", str(ONE_FUTURE), "--seed", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert "which keys" not in as_json.stdout and "█" not in as_json.stdout


def test_the_very_first_check_makes_room_for_where_the_history_is_kept(tmp_path, monkeypatch):
    """A new user's first check prints, after the report, where the history is kept (two or three
    lines): the first screen leaves room for it, so the header and every cause stay on screen."""
    home = tmp_path / "a-folder-with-a-rather-long-name-for-the-practice-history" / "home"  # a note of four lines
    monkeypatch.setenv("ATTN_KIT_HOME", str(home))
    path = ROOT / "corpus" / "probes" / "class_width_inverted_causal.py"
    lines = check_screen(path, tmp_path, seed=7)  # asserts the header is on the screen
    text = joined(lines)
    squeezed = "".join(text.split())  # the long path wraps inside a word
    assert "".join(f"keeps your practice history in {home / 'history.db'}".split()) in squeezed, "\n".join(lines)
    for bug in ("causal-off-by-one", "scale-by-model-width", "mask-inverted"):
        assert f"● {bug}:" in text, (bug, "\n".join(lines))
    assert (home / "history.db").exists()
    assert re.search(r"^✗ \d+ more checks failed: --full shows each$", "\n".join(lines), re.M), "\n".join(lines)


def test_three_causes_and_what_lies_outside_all_fit_with_their_fixes(tmp_path):
    """Three named bugs (two named by a probe) and checks outside the catalogue: every cause keeps
    its one or two lines and its fix, and the header stays on the screen, because the worst
    failure's numbers give way (its message still says where it differs)."""
    path = ROOT / "corpus" / "probes" / "class_width_inverted_causal.py"
    first = run("check", path, "--seed", 7, cwd=tmp_path)  # the first run also says where history is kept, once
    first.expect(pexpect.EOF)
    first.close()
    lines = check_screen(path, tmp_path, seed=7)
    text = joined(lines)
    exercise = catalog.exercise("mha-screen")
    for bug in ("causal-off-by-one", "scale-by-model-width", "mask-inverted"):
        assert f"● {bug}:" in text and f"Fix: {catalog.bug_in(exercise, bug).fix_short}." in text, (bug, "\n".join(lines))
    assert "a probe saw it in `multi_head_attention`" in text
    assert "● outside the catalogue:" in text
    causes = [n for n, line in enumerate(lines) if line.startswith("● ")]
    assert all(not lines[n + 1].startswith("    ") for n in causes), "each cause in at most two lines"
