"""`attn-kit check` forks its sandbox's zygote before the check's own modules load (grading/early.py),
so the zygote sets up its namespaces and first worker while the kit imports the catalogue, the
checks and the oracle; pipeline.grade then uses that zygote. How much this saves is measured in
benchmarks/run.py (check-startup), never asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from attn_kit.grading import early
from attn_kit.sandbox import zygote

from helpers import solutions_dir

REFERENCE = solutions_dir("mha-screen") / "reference_numpy.py"
FORKS = sys.platform.startswith("linux") and zygote.FORKS

# Run in a fresh interpreter: records what the kit had loaded when it forked its zygote, then runs
# `attn-kit check FILE --json --seed 1` itself.
AT_FORK = """
import json, os, sys
from attn_kit.sandbox import zygote
seen = []
original = zygote._Zygote.__init__
def recording(self, *args, **kwargs):
    kit = ("attn_kit.load", "attn_kit.checks", "attn_kit.grading.pipeline", "attn_kit.diagnosis")
    loaded = sorted(m for m in sys.modules if m.startswith(kit))
    original(self, *args, **kwargs)
    seen.append({"loaded": loaded, "forked": self.process is None, "pid": self.pid})
zygote._Zygote.__init__ = recording
import atexit
atexit.register(lambda: os.write(2, ("ZYGOTES " + json.dumps(seen) + "\\n").encode()))
from attn_kit.cli.app import main
sys.argv = ["attn-kit", "check", sys.argv[1], "--json", "--seed", "1"]
main()
"""


def _zygotes_of_a_check(path) -> tuple[list[dict], dict]:
    proc = subprocess.run([sys.executable, "-c", AT_FORK, str(path)], capture_output=True, text=True, timeout=120)
    line = next(x for x in proc.stderr.splitlines() if x.startswith("ZYGOTES "))
    return json.loads(line[len("ZYGOTES ") :]), json.loads(proc.stdout)


@pytest.mark.skipif(not FORKS, reason="a zygote is forked only where fork is (Linux)")
def test_check_forks_its_one_zygote_before_the_catalogue_checks_and_oracle_load():
    zygotes, data = _zygotes_of_a_check(REFERENCE)
    assert data["passed"] is True and data["score"]["passed"] == data["score"]["total"]
    assert len(zygotes) == 1, zygotes  # grade used the zygote started early, and started none of its own
    assert zygotes[0]["forked"] is True  # a fork of a process that held no expected value, not a fresh interpreter
    assert zygotes[0]["loaded"] == []  # nothing of an exercise, a check, the oracle or the diagnosis yet


@pytest.mark.skipif(not FORKS, reason="a zygote is forked only where fork is (Linux)")
def test_a_torch_file_leaves_its_zygote_to_grade(tmp_path):
    torch_file = tmp_path / "torch_solution.py"
    torch_file.write_text(REFERENCE.read_text(encoding="utf-8") + "\n# import torch, some day\n", encoding="utf-8")
    zygotes, data = _zygotes_of_a_check(torch_file)
    assert data["passed"] is True
    assert len(zygotes) == 1 and zygotes[0]["loaded"] != []  # started by grade, which knew the file's imports


def test_only_a_readable_numpy_file_starts_a_zygote_early(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(early.zygote, "shared_launcher", lambda *args: started.append(args))
    monkeypatch.setattr(early.zygote, "FORKS", True)
    assert early.start(REFERENCE) is True and started == [()]
    torch_file = tmp_path / "t.py"
    torch_file.write_text("import torch\n", encoding="utf-8")
    large = tmp_path / "large.py"
    large.write_bytes(b"#" * (early.MOST_BYTES + 1))
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)  # opening it would block: it must not be opened at all
    for path in (torch_file, large, fifo, tmp_path, tmp_path / "missing.py"):
        assert early.start(path) is False, path
    assert started == [()]
    monkeypatch.setattr(early.zygote, "FORKS", False)  # Windows: workers are spawned, nothing to start early
    assert early.start(REFERENCE) is False and started == [()]


def test_a_zygote_that_cannot_start_early_is_left_to_grade(monkeypatch):
    def refused(*args):
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(early.zygote, "shared_launcher", refused)
    monkeypatch.setattr(early.zygote, "FORKS", True)
    assert early.start(REFERENCE) is False
