"""`check --locate --fix` prints the candidate's own lines: an escape code or BEL hidden in them
(in a comment on the very line the edit changes) is shown written out, never sent to the
terminal, on a pipe and on a real pseudo-terminal (80x24)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

SOURCE = Path(__file__).parent / "corpus" / "locate" / "lists_compact__causal-off-by-one.py"
WRONG = "    return [[[j < i for j in range(T)] for i in range(T)] for _ in range(B)]"
PAYLOAD = "\x1b]0;pwned\x07\x1b[2J\x1b[31mALL PASSED\x07"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    text = SOURCE.read_text(encoding="utf-8")
    assert WRONG in text
    target = tmp_path_factory.mktemp("fix") / "solution.py"
    target.write_text(text.replace(WRONG, WRONG + "  # " + PAYLOAD, 1), encoding="utf-8")
    return target


ARGS = ["check", "--locate", "--fix", "--seed", "1", "--locate-budget", "60"]


def test_fix_on_a_pipe_sends_no_escape_code(hostile):
    proc = subprocess.run([sys.executable, "-m", "attn_kit.cli", *ARGS, str(hostile)], capture_output=True, timeout=300)
    out = proc.stdout.decode("utf-8")
    assert "j <= i" in out, out  # the diff is there
    assert b"\x1b" not in proc.stdout and b"\x07" not in proc.stdout and b"\x1b" not in proc.stderr
    assert "\\e]0;pwned\\x07\\e[2J" in out, "the candidate's bytes are shown, written out"


def test_fix_on_a_terminal_sends_no_escape_code_of_the_candidate(hostile):
    child = pexpect.spawn(
        sys.executable, ["-m", "attn_kit.cli", *ARGS, str(hostile)], env=dict(os.environ), dimensions=(24, 80), timeout=300
    )
    child.expect(pexpect.EOF)
    child.close()
    raw = child.before
    assert b"j <= i" in raw
    for sequence in (b"\x07", b"\x1b]0;", b"\x1b[2J"):
        assert sequence not in raw, sequence
    assert b"\\e]0;pwned" in raw
