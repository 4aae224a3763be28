"""tests/helpers.py itself: the session cache of gradings, and commands forked from tests/cli_server.py."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from attn_kit.base.paths import solutions_dir

import helpers
from helpers import attn_kit, graded, graded_json, one_quick_per


def test_a_file_is_graded_once_and_again_after_it_changes(tmp_path):
    path = tmp_path / "solution.py"
    shutil.copy(solutions_dir("mha-screen") / "bugs" / "no-scaling.py", path)
    first = graded(path, seed=1)
    assert graded(path, seed=1) is first  # cached
    assert not first.passed and first.diagnosis[0].bug == "no-scaling"
    shutil.copy(solutions_dir("mha-screen") / "reference_numpy.py", path)
    later = path.stat().st_mtime_ns + 10**9
    os.utime(path, ns=(later, later))  # as a later save would
    data, code = graded_json(path, seed=1)
    assert code == 0 and data["passed"] and data["diagnosis"] == []


# --- helpers.attn_kit: commands forked from tests/cli_server.py, checked against fresh ones ------


def _both(tmp_path, name: str, *args, input=None):
    """The command run fresh (`python -m attn_kit.cli`) and forked from the test server, each with a
    user-data folder of its own (names of one length: messages wrap alike): (returncode, stdout,
    stderr) of each, the folders' names made equal."""
    runs = []
    for how, fresh in (("1", True), ("2", False)):
        home = tmp_path / name / how
        proc = attn_kit(*args, env={"ATTN_KIT_HOME": str(home)}, input=input, fresh=fresh)
        runs.append(tuple(x.replace(str(home), "HOME") if isinstance(x, str) else x for x in (proc.returncode, proc.stdout, proc.stderr)))
    return runs


BUG = solutions_dir("mha-screen") / "bugs" / "no-scaling.py"
REFERENCE = solutions_dir("mha-screen") / "reference_numpy.py"
SAME_EITHER_WAY = {
    "version": ("--version",),
    "list": ("list",),
    "check-json": ("check", REFERENCE, "--json", "--seed", "1"),
    "check-terminal": ("check", BUG, "--seed", "1"),
    "missing-file": ("check", "no-such-file.py"),
    "bad-option": ("check", BUG, "--seed", "x", "--json"),
    "show": ("show", "mha-screen"),
    "hint": ("hint", "mha-screen"),
}


QUICK = ("check-terminal", "missing-file")  # in the quick run (a fresh interpreter costs tenths of a second); all in the full suite


@pytest.mark.parametrize("name", one_quick_per(SAME_EITHER_WAY, lambda n: n, slow=lambda n: n not in QUICK))
def test_a_forked_command_says_what_a_fresh_one_says(tmp_path, name):
    fresh, forked = _both(tmp_path, name, *SAME_EITHER_WAY[name])
    assert forked == fresh
    # the second run took the forked path: its environment is one the server serves
    assert helpers._CliServer.for_env(dict(os.environ, ATTN_KIT_HOME=str(tmp_path / name / "2"))) is not None


def test_a_forked_command_reads_its_stdin_and_is_stopped_at_its_timeout(tmp_path):
    fresh, forked = _both(tmp_path, "mock", "mock", "mha-screen", "--dir", tmp_path, input="")
    assert forked == fresh
    hang = tmp_path / "hang.py"
    hang.write_text("import time\n\ntime.sleep(60)\n")  # while the kit loads it
    with pytest.raises(subprocess.TimeoutExpired):
        attn_kit("check", hang, "--exercise", "mha-screen", "--timeout", "30", timeout=1)
    server = helpers._CliServer.current
    assert server is not None and server.proc.poll() is None  # only the command was stopped
    assert attn_kit("--version").returncode == 0 and helpers._CliServer.current is server
