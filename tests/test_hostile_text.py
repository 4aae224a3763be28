"""Text the kit cannot print as it came: a lone surrogate in the candidate's exception message, a
solution file whose name is not UTF-8. `check` shows both written out, with no traceback, and the
run is saved to the history."""

from __future__ import annotations

import os
import subprocess
import sys

from attn_kit.base.paths import solutions_dir
from attn_kit.base.wire import visible

REFERENCE = (solutions_dir("mha-screen") / "reference_numpy.py").read_text(encoding="utf-8")


def check(path, home) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attn_kit.cli", "check", path, "--seed", "1", "--timeout", "5"],
        capture_output=True,
        timeout=300,
        env={**os.environ, "ATTN_KIT_HOME": str(home), "NO_COLOR": "1"},
    )


def test_visible_writes_lone_surrogates_out():
    assert visible("a\ud800b\udcffc\x1b") == "a\\ud800b\\xffc\\e"
    visible("a\ud800").encode("utf-8")


def test_a_message_with_a_lone_surrogate_is_shown_written_out(tmp_path):
    file = tmp_path / "raises.py"
    file.write_text(REFERENCE + "\n\ndef multi_head_attention(*a, **k):\n    raise ValueError('\\ud800 boom')\n", encoding="utf-8")
    proc = check(file, tmp_path / "home")
    assert b"Traceback" not in proc.stderr and proc.returncode == 1, proc.stderr.decode(errors="replace")[-1500:]
    assert "\\ud800 boom" in proc.stdout.decode("utf-8")


def test_a_file_name_that_is_not_utf8_is_graded_and_saved(tmp_path):
    path = os.fsencode(tmp_path) + b"/caf\xe9.py"
    with open(path, "w", encoding="utf-8") as f:
        f.write(REFERENCE)
    proc = check(path, tmp_path / "home")
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")[-1500:]
    assert b"not saved to your history" not in proc.stderr
    assert b"caf\xe9.py" in proc.stdout, "your own file's name, as your shell shows it"
    assert b"All 26 checks passed" in proc.stdout
