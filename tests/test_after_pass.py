"""A pass says what it unlocked and what comes next (issue 36, S5 and N7), seen at 80×24: the first
recorded full pass announces the reference walkthrough it opened; a later pass points at it without
calling it new; follow-ups already passed are marked, never suggested as if new."""

from __future__ import annotations

import io
import os
import re
import sys

import pexpect

from attn_kit.base.paths import solutions_dir
from attn_kit.load import catalog

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run(tmp_path, *args) -> list[str]:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "attn_kit.cli", *map(str, args)],
        env=dict(os.environ, TERM="xterm-256color", ATTN_KIT_HOME=str(tmp_path / "home"), PAGER="cat"),
        cwd=str(tmp_path),
        encoding="utf-8",
        dimensions=(24, 80),
        timeout=120,
    )
    child.logfile_read = io.StringIO()
    child.expect(pexpect.EOF)
    child.close()
    # each line as it is left on the screen: the progress line redraws itself after a carriage return
    lines = [line.rstrip("\r").split("\r")[-1] for line in ESCAPES.sub("", child.logfile_read.getvalue()).split("\n")]
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    return lines


def test_a_pass_announces_its_unlock_once_and_marks_passed_followups(tmp_path):
    (tmp_path / "mha_screen.py").write_text((solutions_dir("mha-screen") / "reference_numpy.py").read_text())
    (tmp_path / "kv_cache.py").write_text((solutions_dir("kv-cache") / "reference_numpy.py").read_text())
    first = "\n".join(run(tmp_path, "check", "mha_screen.py", "-e", "mha-screen", "--seed", "1"))
    assert "checks passed" in first
    assert "Unlocked: the reference walkthrough — attn-kit solution mha-screen" in first, first
    assert "attn-kit start kv-cache kv_cache.py" in first  # not passed yet: suggested, by its default name

    run(tmp_path, "check", "kv_cache.py", "-e", "kv-cache", "--seed", "1")
    again = run(tmp_path, "check", "mha_screen.py", "-e", "mha-screen", "--seed", "1")
    text = "\n".join(again)
    assert "Unlocked" not in text and "Compare with the reference walkthrough: attn-kit solution mha-screen" in text, text
    assert "attn-kit start kv-cache" not in text  # passed: never suggested as if new
    marked = [line for line in again if "✓ kv-cache (passed)" in line]
    assert len(marked) == 1 and marked[0].startswith("  ")
    # the follow-ups not yet passed are still offered, each with the file name `start` would use
    for f in catalog.exercise("mha-screen").followups:
        if f.exercise != "kv-cache" and f.exercise in catalog.exercises():
            assert f"attn-kit start {f.exercise} {catalog.default_file(f.exercise)}" in text


def test_a_public_only_pass_unlocks_nothing(tmp_path):
    (tmp_path / "mha_screen.py").write_text((solutions_dir("mha-screen") / "reference_numpy.py").read_text())
    text = "\n".join(run(tmp_path, "check", "mha_screen.py", "-e", "mha-screen", "--public"))
    assert "passed" in text and "Unlocked" not in text and "Follow-ups" not in text
