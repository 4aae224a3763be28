"""Nothing the candidate's code prints, raises or returns reaches the terminal as a control code:
the kit shows it written out (wire.visible), in a real pseudo-terminal at 80x24 as in JSON."""

from __future__ import annotations

import os
import sys

import pexpect
import pytest

from attn_kit.base.wire import visible

from conftest import CORPUS

FORGES = CORPUS / "hostile" / "forges_screen.py"


def test_visible_writes_out_every_control_character_but_newline_and_tab():
    assert visible("a\x1b[2Jb\rc\x00d\x7f\x9b\u202ee\u2066\n\tf") == "a\\e[2Jb\\rc\\x00d\\x7f\\x9b\\u202ee\\u2066\n\tf"
    assert visible("plain text, ü, ✓ and 日本") == "plain text, ü, ✓ and 日本"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pseudo-terminal")
def test_forged_verdict_is_shown_written_out_in_a_terminal(tmp_path):
    for name in ("forges_screen.py", "honest_numpy.py"):
        (tmp_path / name).write_text((CORPUS / "hostile" / name).read_text(encoding="utf-8"), encoding="utf-8")
    env = dict(os.environ, NO_COLOR="1", TERM="xterm-256color", PYTHONPATH=os.pathsep.join(sys.path))
    child = pexpect.spawn(
        sys.executable,
        ["-m", "attn_kit", "check", "forges_screen.py", "--seed", "1", "--timeout", "2"],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=120,
        dimensions=(24, 80),
    )
    text = child.read()
    child.close()
    assert child.exitstatus == 1, text
    assert "\x1b[2J" not in text and "\x1b[H" not in text and "\u202e" not in text and "\x1b[32m" not in text
    assert "\\e[2J" in text  # the candidate's text is there, written out
    assert "Traceback (most recent call last)" not in text
