"""`attn-kit grade`'s progress line names what is running, the longest-running first, with how long
it has run, not the submission that last finished (issue 36, S6)."""

from __future__ import annotations

import io
import os
import re
import sys

import pexpect
import pytest

from attn_kit.base.paths import solutions_dir
from attn_kit.batch.run import GRADED, Result
from attn_kit.render.grade import Running


def test_running_names_what_runs_longest_first_and_forgets_what_finished():
    now = [100.0]
    running = Running(clock=lambda: now[0])
    assert running.text() == ""
    running.started("slow")
    now[0] += 100
    running.started("quick")
    now[0] += 10
    assert running.text() == "running slow (1m50s), quick (10 s)"
    running.finished(Result("quick", "quick.py", GRADED))
    assert running.text() == "running slow (1m50s)"
    running.finished(Result("slow", "slow.py", GRADED))
    assert running.text() == ""


@pytest.mark.slow
def test_the_progress_line_names_the_hanging_file_not_the_one_that_failed_fast(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "a_broken.py").write_text("def multi_head_attention(:\n")  # fails to load at once
    source = (solutions_dir("mha-screen") / "reference_numpy.py").read_text()
    start = source.index("def multi_head_attention(")
    body = source.index(":\n", source.index(")", start)) + 2
    (folder / "b_hangs.py").write_text(source[:body] + "    while True:\n        pass\n" + source[body:])
    child = pexpect.spawn(
        sys.executable,
        ["-m", "attn_kit.cli", "grade", str(folder), "-e", "mha-screen", "--jobs", "1", "--timeout", "0.5", "--limit", "4", "--seed", "1"],
        env=dict(os.environ, TERM="xterm-256color", ATTN_KIT_HOME=str(tmp_path / "home")),
        encoding="utf-8",
        dimensions=(24, 80),
        timeout=120,
    )
    child.logfile_read = io.StringIO()
    child.expect(r"running b_hangs \(\d+ s\)")
    child.expect(pexpect.EOF)
    child.close()
    seen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.logfile_read.getvalue())
    assert "running a_broken (" not in seen.split("running b_hangs", 1)[1]  # never named once it was done
    assert "timed out" in seen and "1 passed" not in seen
