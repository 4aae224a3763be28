"""`attn-kit grade` isolates submissions: a crashing, hanging, memory-hungry or hostile file costs
that file only, and every honest file gets exactly the grade a lone `check --json` gives it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from attn_kit.base.paths import solutions_dir
from attn_kit.batch import run

from helpers import CORPUS, attn_kit, check_json

EXERCISE = "mha-screen"
SEED = 77
HOSTILE = CORPUS / "hostile"
# quick ones from tests/corpus/hostile: dies at load, hangs at load, SIGKILLs every kit process
# it can name, writes a forged pass onto the kit's stdout, allocates 20 GB, leaves a child behind
HOSTILE_PICKS = ["exits_at_load", "hangs_at_load", "kills_its_parents", "writes_kit_stdout", "numpy_huge", "forks_sleeping_child"]
OPTIONS = ("--timeout", "3", "--memory", "256M", "--seed", str(SEED))

pytestmark = pytest.mark.slow


def _honest(folder: Path) -> list[str]:
    names = []
    sources = [
        solutions_dir(EXERCISE) / "reference_numpy.py",
        solutions_dir(EXERCISE) / "reference_lists.py",
        *sorted((solutions_dir(EXERCISE) / "bugs").glob("*.py"))[::8],
    ]
    for n, src in enumerate(sources):
        name = f"honest_{n:02d}"
        shutil.copy(src, folder / f"{name}.py")
        names.append(name)
    return names


def test_hostile_files_cost_only_themselves(tmp_path):
    folder = tmp_path / "cohort"
    folder.mkdir()
    honest = _honest(folder)
    for name in HOSTILE_PICKS:  # one folder each: the file as solution.py beside its helpers
        sub = folder / f"zz_{name}"
        sub.mkdir()
        shutil.copy(HOSTILE / f"{name}.py", sub / "solution.py")
        for helper in ("honest_numpy.py", "hostile_util.py"):
            shutil.copy(HOSTILE / helper, sub / helper)
    markers = tmp_path / "markers"
    markers.mkdir()
    env = {"ATTN_MARKER_DIR": str(markers), "ATTN_KIT_ALSO_WRITABLE": str(markers), "NO_COLOR": "1"}
    proc = attn_kit(
        "grade",
        folder,
        "-e",
        EXERCISE,
        *OPTIONS,
        "--jobs",
        "2",
        "--limit",
        "60",
        "--out",
        f"json={tmp_path / 'g.json'}",
        env=env,
        timeout=400,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "✓ All 26 checks passed" not in proc.stdout  # the forged line never reaches the kit
    data = {s["name"]: s for s in json.loads((tmp_path / "g.json").read_text())["submissions"]}
    assert set(data) == set(honest) | {f"zz_{n}" for n in HOSTILE_PICKS}
    for name in honest:
        alone, _ = check_json(data[name]["path"], "--exercise", EXERCISE, *OPTIONS)
        assert data[name]["state"] == "graded"
        assert data[name]["report"] == alone, name
    assert data["zz_exits_at_load"]["state"] == "unloadable"
    assert data["zz_hangs_at_load"]["state"] == "unloadable" and data["zz_hangs_at_load"]["timed_out"]
    assert data["zz_numpy_huge"]["crashed"] or not data["zz_numpy_huge"]["passed"]
    assert not any(str(os.getpid()) == p.read_text().split()[0] for p in markers.iterdir())


SLEEPER = """# attn-kit: mha-screen
import time


def stable_softmax(scores, allowed=None):
    time.sleep(30)


def causal_mask(B, T):
    time.sleep(30)


def padding_mask(lengths, T):
    time.sleep(30)


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    time.sleep(30)
"""


def test_a_submission_over_the_limit_is_stopped_and_the_next_is_graded(tmp_path):
    """Every call sleeps: past --limit its grader is killed, reported as timed out, and a fresh
    grader grades the submissions after it."""
    (tmp_path / "a_sleeper.py").write_text(SLEEPER)
    shutil.copy(solutions_dir(EXERCISE) / "reference_numpy.py", tmp_path / "b_honest.py")
    found = run.find_submissions(tmp_path)
    result = run.grade_all(found, EXERCISE, seed=SEED, jobs=1, timeout=2, limit=4)
    sleeper, honest = result.results
    assert sleeper.state == run.TIMED_OUT and sleeper.timed_out and sleeper.report is None
    assert "limit of 4 s" in sleeper.error
    assert honest.state == run.GRADED and honest.passed and honest.points == 47
