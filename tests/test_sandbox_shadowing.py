"""A `numpy.py` beside the solution, in the folder the kit is started from, is never imported.

The graded code can write files in its own folder, and the next run usually starts there. A module
planted there is not run by the kit, whichever way it is started (`attn-kit`, `python -m attn_kit`,
`python -m attn_kit.cli`), nor in the worker, whichever zygote serves it (forked from the kit, or
a fresh interpreter for `--tests`), for check, bench, test-tests and grade: the worker starts with
the real NumPy imported, so the candidate's own `import numpy` gets it too, and the honest solution
beside the planted file still passes. The planted file leaves a marker when it is run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CORPUS

pytestmark = pytest.mark.slow

PLANTED = """import os
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "planted-ran-%d" % os.getpid()), "w") as fh:
    fh.write("%d\\n" % os.getpid())
raise ImportError("the planted numpy.py ran")
"""

TESTS = """from solution import multi_head_attention, stable_softmax


def test_softmax_rows_sum_to_one():
    assert abs(sum(stable_softmax([1.0, 2.0, 3.0])) - 1.0) < 1e-9
"""

KIT = [sys.executable, "-m", "attn_kit.cli"]
ENTRIES = {
    "attn-kit check": ([str(Path(sys.executable).with_name("attn-kit")), "check", "solution.py", "--json"], 0),
    "python -m attn_kit check": ([sys.executable, "-m", "attn_kit", "check", "solution.py", "--json"], 0),
    "python -m attn_kit.cli check": ([*KIT, "check", "solution.py", "--json"], 0),
    "check --tests (a fresh zygote)": ([*KIT, "check", "solution.py", "--tests", "test_solution.py", "--json"], 0),
    "bench": ([*KIT, "bench", "solution.py", "--json", "--sizes", "8,16", "--repeats", "1"], 0),
    "test-tests": ([*KIT, "test-tests", "test_solution.py", "--json"], 0),
    "grade": ([*KIT, "grade", ".", "-e", "mha-screen", "--single"], 0),
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_a_planted_numpy_py_is_never_imported(tmp_path, entry):
    argv, status = ENTRIES[entry]
    if not Path(argv[0]).exists():
        pytest.skip(f"{argv[0]} is not installed beside this interpreter")
    tmp_path.chmod(0o777)  # the candidate's own folder: run as root, its code is another uid
    shutil.copy(CORPUS / "hostile" / "honest_numpy.py", tmp_path / "solution.py")
    (tmp_path / "numpy.py").write_text(PLANTED, encoding="utf-8")
    (tmp_path / "test_solution.py").write_text(TESTS, encoding="utf-8")
    env = dict(os.environ, ATTN_KIT_HOME=str(tmp_path / "home"), NO_COLOR="1")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    ran = sorted(p.name for p in tmp_path.glob("planted-ran-*"))
    context = f"{entry}: exit {proc.returncode}\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}"
    assert not ran, f"the planted numpy.py ran ({ran}): {context}"
    assert "Traceback" not in proc.stdout + proc.stderr, context
    assert proc.returncode == status, context
