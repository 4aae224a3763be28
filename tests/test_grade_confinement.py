"""One submission, one world: in `attn-kit grade` (two graders at once), a submission cannot read
another's file, spoil another's temporary folder (chmod 000, files left behind, writes into a
sibling's folder), and every temporary folder the kit made is gone when the run ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attn_kit.sandbox import landlock

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "solutions" / "mha-screen" / "reference_numpy.py"
pytestmark = pytest.mark.skipif(landlock.abi() < 1, reason="this kernel has no Landlock")

MARK = """
import glob, os
def mark(name, text=""):
    with open(os.path.join(os.environ["ATTN_MARKER_DIR"], f"{name}-{os.getpid()}"), "w") as fh:
        fh.write(text)
"""

# correct, and at load: fills its own temporary folder, takes every mode away from it and from the
# folder above it, and tries to write into (and take the modes of) every other worker's folder
SPOILER = (
    MARK
    + """
tmp = os.environ["TMPDIR"]
for i in range(50):
    with open(os.path.join(tmp, f"left-{i}"), "w") as fh:
        fh.write("x" * 1000)
os.makedirs(os.path.join(tmp, "deep", "er"))
os.chmod(os.path.join(tmp, "deep"), 0)
base = os.path.dirname(tmp)  # the zygote's folder of worker folders: w1, w2, ... (names it can guess)
guessed = [os.path.join(base, f"w{n}") for n in range(1, 30)]
for folder in guessed + glob.glob(os.path.join(os.path.dirname(base), "attn-kit-worker-*", "w*")):
    if os.path.realpath(folder) == os.path.realpath(tmp):
        continue
    try:
        open(os.path.join(folder, "planted"), "w").close()
        mark("wrote-other", folder)
    except OSError:
        mark("write-refused", folder)
    try:
        os.chmod(folder, 0)
    except OSError:
        pass
for folder in (os.path.dirname(tmp), tmp):
    try:
        os.chmod(folder, 0)
        mark("chmod", folder)
    except OSError:
        pass
"""
)

# correct, and at load: reads the other submissions' files beside it
READER = (
    MARK
    + """
here = os.path.dirname(os.path.abspath(__file__))
try:
    names = os.listdir(here)
    mark("listed-folder", " ".join(names))
except OSError:
    names = ["b_alice.py", "d_dave.py"]
for name in names:
    if name != os.path.basename(__file__) and name.endswith(".py"):
        try:
            open(os.path.join(here, name)).read()
            mark("read-sibling", name)
        except OSError:
            mark("read-refused", name)
"""
)


def test_submissions_cannot_reach_each_other_and_leave_nothing(tmp_path):
    cohort = tmp_path / "cohort"
    cohort.mkdir()
    reference = REFERENCE.read_text()
    (cohort / "a_spoiler.py").write_text(reference + SPOILER)
    (cohort / "b_alice.py").write_text(reference)
    (cohort / "c_reader.py").write_text(reference + READER)
    (cohort / "d_dave.py").write_text(reference)
    (cohort / "e_spoiler.py").write_text(reference + SPOILER)
    (cohort / "f_erin.py").write_text(reference)
    markers, kit_tmp = tmp_path / "markers", tmp_path / "kit-tmp"
    markers.mkdir(mode=0o777)
    markers.chmod(0o777)  # as root, the candidates' code runs as another uid
    kit_tmp.mkdir()
    env = {
        **os.environ,
        "NO_COLOR": "1",
        "TMPDIR": str(kit_tmp),  # the kit's workers' folders are made under it
        "ATTN_MARKER_DIR": str(markers),
        "ATTN_KIT_ALSO_WRITABLE": str(markers),
        "ATTN_KIT_HOME": str(tmp_path / "home"),
    }
    out = tmp_path / "g.json"
    argv = [sys.executable, "-m", "attn_kit", "grade", str(cohort), "-e", "mha-screen", "--seed", "3", "--jobs", "2"]
    done = subprocess.run([*argv, "--out", f"json={out}"], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    results = {s["name"]: s for s in json.loads(out.read_text())["submissions"]}
    for name, sub in results.items():  # every file is correct: none is spoiled by another
        assert sub["state"] == "graded" and sub["passed"], (name, sub["error"], sub["failed_checks"])
    seen = {m.name.rsplit("-", 1)[0] for m in markers.iterdir()}
    assert {"read-refused", "write-refused", "chmod"} <= seen, seen  # the attacks were made
    assert not seen & {"read-sibling", "listed-folder", "wrote-other"}, seen
    assert list(kit_tmp.iterdir()) == [], "the kit left temporary folders behind"
