"""The session cache of tests/helpers.py: one grading per file version, shared between tests."""

from __future__ import annotations

import os
import shutil

from attn_kit.base.paths import solutions_dir

from helpers import graded, graded_json


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
