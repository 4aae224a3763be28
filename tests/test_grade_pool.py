"""`grade`'s grader processes: the first starts before the submissions are found and warms up
before it says it is ready; at the end every grader goes and the run's folder with them. And the
model `benchmarks/run.py` reports beside the measured `--jobs 2` speed-up."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from attn_kit.base.paths import solutions_dir
from attn_kit.batch import run

EXERCISE = "mha-screen"


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_first_grader_warms_up_before_any_submission_and_everything_goes_at_the_end(tmp_path):
    with run.graders(EXERCISE, seed=5, timeout=5, limit=60) as pool:
        (grader,) = pool.graders
        scratch = Path(pool.settings["tmp"])
        deadline = time.monotonic() + 120
        while not grader.ready and time.monotonic() < deadline:
            for key, _ in pool.selector.select(1.0):
                pool.read(key.data)
        assert grader.ready
        # the warm-up loaded the suite: its checks come with the ready line, as the kit lists them
        assert pool.checks == run._suite_checks(EXERCISE)
        # ... and started the zygote: the grader has a child before it was given any file
        with open(f"/proc/{grader.proc.pid}/task/{grader.proc.pid}/children") as fh:
            assert fh.read().split(), "no zygote was started by the warm-up"
        folder = tmp_path / "subs"
        folder.mkdir()
        shutil.copy(solutions_dir(EXERCISE) / "reference_numpy.py", folder / "a.py")
        shutil.copy(solutions_dir(EXERCISE) / "bugs" / "no-scaling.py", folder / "b.py")
        found = run.find_submissions(folder, False, EXERCISE, tmp_path / "x")
        batch = run.grade_all(found, EXERCISE, 5, jobs=2, timeout=5, limit=60, pool=pool)
        pids = [g.proc.pid for g in pool.graders]
        assert len(pids) == 2  # a second grader was started for the second submission
    assert [r.points for r in batch.results] == [47, 26] and batch.seed == 5 and batch.checks == pool.checks
    assert all(_gone(pid) for pid in pids) and not scratch.exists()


def test_a_pool_started_for_another_seed_is_refused(tmp_path):
    with run.graders(EXERCISE, seed=5) as pool, pytest.raises(ValueError, match="another exercise or seed"):
        run.grade_all([], EXERCISE, seed=6, pool=pool)


def _benchmarks():
    spec = importlib.util.spec_from_file_location("bench_run", Path(__file__).parent.parent / "benchmarks" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "one, w1, cpu2, bound, per, fixed",
    [
        # 1 s for one submission, 100 s for 100: 1 s each, nothing else; CPU fits two cores: 2x
        (1.0, 100.0, 100.0, 2.0, 1.0, 0.0),
        # the same, but a run costs 10 s besides its submissions: (10 + 100) / (10 + 50)
        (11.0, 110.0, 100.0, 110.0 / 60.0, 1.0, 10.0),
        # two graders need 150 CPU-seconds: the cores, not the graders, are the limit
        (1.0, 100.0, 150.0, 100.0 / 75.0, 1.0, 0.0),
    ],
)
def test_the_jobs_model_takes_the_larger_of_the_graders_path_and_the_cores(one, w1, cpu2, bound, per, fixed):
    got = _benchmarks().jobs_model(100, one, w1, cpu2)
    assert got == pytest.approx((bound, per, fixed))
