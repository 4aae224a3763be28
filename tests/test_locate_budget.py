"""`check --locate`'s budget is a hard bound: a file that is quick when graded but slow in the edited
copies the search runs (it knows: its own source no longer hashes to what it was) ends the search
within the budget and the stated margin, by the kit's own bookkeeping (CPU time and the code's
blocked time), and no run of a copy starts once the budget is spent."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from test_sandbox_unprivileged import UNPRIVILEGED, _chown_tree, _setup, _why_not

from attn_kit.base.paths import solutions_dir
from attn_kit.grading import clock, locate, pipeline
from attn_kit.sandbox import session

EXERCISE = "mha-screen"
SEED = 4242
BUDGET = 2.0

# the slow-down every public function of the copies gets: asleep (no CPU: only the blocked time
# counts it) or computing (the CPU time counts it); 0.4 s a call stays under the search's per-call
# time limit (1 s at least), so no call of a copy is ever stopped by that limit alone
SLOW = {
    "sleeps": "time.sleep(0.4)",
    "spins": "t = time.perf_counter()\n    while time.perf_counter() - t < 0.4:\n        pass",
}

PRELUDE = """import functools as _functools
import hashlib as _hashlib
import pathlib as _pathlib
import time

_LINES = [line for line in _pathlib.Path(__file__).read_text().splitlines() if not line.startswith("ORIGINAL = ")]
ORIGINAL = "{digest}"
_COPY = _hashlib.sha256("\\n".join(_LINES).encode()).hexdigest() != ORIGINAL


def _slow():
    {slow}


def _slowed(fn):
    @_functools.wraps(fn)
    def run(*args, **kwargs):
        if _COPY:
            _slow()
        return fn(*args, **kwargs)

    return run


"""
EPILOGUE = """

for _name, _fn in list(globals().items()):
    if callable(_fn) and not _name.startswith("_") and getattr(_fn, "__module__", None) == __name__:
        globals()[_name] = _slowed(_fn)
"""


def _hostile(tmp_path, how: str):
    """The no-scaling bug file (a one-edit fix the search finds), slow in any copy whose source differs."""
    body = (solutions_dir(EXERCISE) / "bugs" / "no-scaling.py").read_text()
    text = PRELUDE.format(digest="DIGEST", slow=SLOW[how]) + body + EPILOGUE
    lines = [line for line in text.splitlines() if not line.startswith("ORIGINAL = ")]
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    path = tmp_path / "mha_screen.py"
    path.write_text(text.replace('ORIGINAL = "DIGEST"', f'ORIGINAL = "{digest}"'))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("how", sorted(SLOW))
def test_a_file_slow_only_in_the_copies_ends_the_search_within_the_budget(tmp_path, how):
    path = _hostile(tmp_path, how)
    report = pipeline.grade(path, pipeline.Options(exercise=EXERCISE, seed=SEED))
    # as graded, it is the plain bug: quick, and its failures diagnosed as no-scaling
    assert "no-scaling" in [d.bug for d in report.diagnosis]
    assert max(c.outcome.seconds for r in report.results for c in r.calls) < 0.4
    blocked = session.METER.blocked
    found = locate.locate(path, report, pipeline.Options(exercise=EXERCISE, seed=SEED), budget=BUDGET)
    assert found.stopped == "budget" and found.found is None
    assert found.runs >= 1  # it did run copies (each slow) before the budget ran out
    assert found.seconds <= BUDGET + clock.MARGIN, found.seconds  # the kit's own account of what it spent
    if how == "sleeps":  # the copies' sleep was counted: without it, the CPU alone never reaches 2 s
        assert session.METER.blocked - blocked >= 1.0
    assert session.METER.deadline is None  # nothing bounds the runs after the search


@pytest.mark.slow
def test_as_an_ordinary_user_the_search_reports_no_more_than_its_budget(tmp_path):
    """`check --locate --json` run by uid UNPRIVILEGED (setpriv, as the other unprivileged tests):
    the search's own account of what it spent (`locate.seconds`) stays within budget + margin."""
    why = _why_not()
    if why:
        pytest.skip(why)
    root = Path(tempfile.mkdtemp(prefix="attn-kit-locate-unprivileged-"))
    try:
        user = _setup(root)
        case = root / "case"
        (case / "home").mkdir(parents=True)
        shutil.copy(_hostile(tmp_path, "sleeps"), case / "mha_screen.py")
        _chown_tree(case)
        env = {"ATTN_KIT_HOME": str(case / "home"), "NO_COLOR": "1"}
        argv = [str(case / "mha_screen.py"), "--seed", str(SEED), "--locate", "--locate-budget", str(BUDGET), "--json"]
        probe = subprocess.run(user.argv(env, "-c", "import os; print(os.getuid())"), capture_output=True, text=True, timeout=60)
        if probe.stdout.strip() != str(UNPRIVILEGED):
            pytest.skip(f"cannot run the kit as uid {UNPRIVILEGED}: {(probe.stderr or probe.stdout).strip()[-300:]}")
        proc = subprocess.run(user.argv(env, "-m", "attn_kit.cli", "check", *argv), capture_output=True, text=True, timeout=600, cwd=case)
        assert proc.returncode == 1, proc.stderr[-2000:]
        searched = json.loads(proc.stdout)["locate"]
        assert searched["stopped"] == "budget" and searched["found"] is None
        assert 0 < searched["seconds"] <= BUDGET + clock.MARGIN
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_no_run_starts_once_the_budget_is_spent():
    budget = clock.Budget(0.0)
    assert budget.over() and not budget.start() and budget.late == 1 and budget.runs == 0
    with budget.run():
        assert session.METER.left(10.0) <= 0  # a load or call now is not run at all
    assert session.METER.deadline is None


def test_a_run_gets_what_is_left_of_the_budget_and_an_enclosing_deadline_holds():
    budget = clock.Budget(3600.0)
    assert budget.start() and budget.runs == 1
    with budget.run():
        assert 3000 < session.METER.left(1e9) <= 3600
        with clock.Budget(5.0).run():  # a tighter budget inside wins
            assert session.METER.left(1e9) <= 5
        assert session.METER.left(1e9) > 3000
    assert session.METER.deadline is None and session.METER.left(7.0) == 7.0
