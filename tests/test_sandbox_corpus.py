"""The golden corpus of pathological candidate files, each run through the real CLI in a subprocess.

Every case must end with a clear message and the right exit status, never a traceback from the kit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CORPUS, attn_kit, check_json

MHA = CORPUS / "mha"
FAST = ("--timeout", "1", "--seed", "1")


def no_kit_traceback(proc):
    """The kit itself never shows a Python traceback (the candidate's own frames may be quoted)."""
    text = proc.stdout + proc.stderr
    assert "attn_kit/" not in text and "/kit/" not in text, text
    assert "Traceback (most recent call last)" not in text, text


def statuses(data):
    return {c["id"]: c["status"] for c in data["checks"]}


def test_correct_independent_solution_passes():
    data, code = check_json(MHA / "correct.py", "--seed", "5")
    assert code == 0 and data["passed"] is True
    assert data["diagnosis"] == []
    assert data["score"]["passed"] == data["score"]["total"] > 20


@pytest.mark.parametrize(
    "name, line, fragment",
    [
        ("syntax_error.py", 3, "'[' was never closed"),
        ("syntax_error_no_header.py", 3, "expected ':'"),
    ],
)
def test_syntax_error_shows_file_line_and_caret(name, line, fragment):
    proc = attn_kit("check", MHA / name)
    assert proc.returncode == 1
    no_kit_traceback(proc)
    assert f"{name}:{line}: SyntaxError" in proc.stderr and fragment in proc.stderr
    lines = proc.stderr.splitlines()
    caret = next(i for i, text in enumerate(lines) if text.strip() == "^")
    assert lines[caret - 1].strip().startswith(("return [1.0", "def multi_head_attention"))


def test_syntax_error_json_has_error_string():
    data, code = check_json(MHA / "syntax_error.py")
    assert code == 1 and data["passed"] is False and "SyntaxError" in data["error"]


def test_empty_file_names_the_exercises():
    proc = attn_kit("check", MHA / "empty.py")
    assert proc.returncode == 1
    assert "cannot tell which exercise" in proc.stderr and "mha-screen" in proc.stderr
    no_kit_traceback(proc)


@pytest.mark.slow
def test_empty_file_with_exercise_lists_missing_function():
    proc = attn_kit("check", MHA / "empty.py", "--exercise", "mha-screen")
    assert proc.returncode == 1
    assert "does not define `stable_softmax`" in proc.stderr and "defines: no functions" in proc.stderr


def test_missing_function_suggests_closest_name():
    proc = attn_kit("check", MHA / "missing_function.py")
    assert proc.returncode == 1
    assert "does not define `causal_mask`" in proc.stderr
    assert "Did you mean `causal_msk`?" in proc.stderr


@pytest.mark.slow
def test_wrong_signature_shows_expected_one():
    proc = attn_kit("check", MHA / "wrong_signature.py")
    assert proc.returncode == 1
    text = " ".join(proc.stderr.split())
    assert "wrong signature" in text
    assert "multi_head_attention(x, params, num_heads, mask=None, return_weights=False)" in text
    assert "yours is `multi_head_attention(x, params)`" in text


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("import_error.py", "ModuleNotFoundError: No module named 'attention_helpers_that_do_not_exist'"),
        ("module_raises.py", "RuntimeError: oops at import time"),
    ],
)
def test_import_time_errors(name, fragment):
    proc = attn_kit("check", MHA / name)
    assert proc.returncode == 1
    assert "could not be loaded" in proc.stderr and fragment in " ".join(proc.stderr.split())
    no_kit_traceback(proc)


@pytest.mark.slow
def test_loop_at_import_time_is_stopped():
    proc = attn_kit("check", MHA / "top_level_loop.py", "--timeout", "1")
    assert proc.returncode == 1
    assert "did not finish loading within 1 s" in proc.stderr


@pytest.mark.slow
def test_stub_reports_not_implemented(tmp_path):
    starter = tmp_path / "stub.py"
    assert attn_kit("start", "mha-screen", starter).returncode == 0
    data, code = check_json(starter, *FAST)
    assert code == 1 and data["passed"] is False
    errors = [c for c in data["checks"] if c["status"] == "error"]
    assert errors and all("not implemented yet" in c["message"] for c in errors)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, fragment",
    [
        ("infinite_loop.py", "did not return within 0.5 s"),  # each hanging call waits out the timeout
        ("segfault.py", "SIGSEGV"),
        ("sys_exit.py", "sys.exit(3)"),
        ("os_exit.py", "exited with status 7"),
    ],
)
def test_call_failures_are_reported_and_other_checks_still_run(name, fragment):
    data, code = check_json(MHA / name, "--timeout", "0.5", "--seed", "1")
    assert code == 1
    st = statuses(data)
    assert st["output-shapes"] == "error"
    assert fragment in next(c["message"] for c in data["checks"] if c["id"] == "output-shapes")
    # the softmax and mask checks do not call multi_head_attention and still pass
    for cid in ("public-softmax-example", "softmax-stable-at-1000", "causal-mask-values", "padding-mask-values"):
        assert st[cid] == "pass", cid
    # dependent checks are skipped so one root cause shows as one red line
    assert st["randomised-agreement"] == "skip"


@pytest.mark.slow
def test_memory_blowup_hits_the_cap():
    data, code = check_json(MHA / "memory_blowup.py", "--memory", "300M", *FAST)
    assert code == 1
    message = next(c["message"] for c in data["checks"] if c["id"] == "output-shapes")
    assert "out of memory" in message or "memory cap" in message
    assert statuses(data)["causal-mask-values"] == "pass"


@pytest.mark.slow
def test_megabyte_of_prints_is_captured_not_shown():
    proc = attn_kit("check", MHA / "prints_a_lot.py", "--seed", "1")
    assert proc.returncode == 0
    assert len(proc.stdout) < 20_000 and "xxxxxxxxxx" not in proc.stdout


@pytest.mark.slow
def test_prints_are_truncated_with_a_notice_when_a_check_fails(tmp_path):
    source = (
        (MHA / "prints_a_lot.py")
        .read_text()
        .replace("    return (outs, weights) if return_weights else outs\n", "    return (outs, outs) if return_weights else outs\n")
    )
    path = tmp_path / "prints_and_fails.py"
    path.write_text(source)
    proc = attn_kit("check", path, "--seed", "1")
    assert proc.returncode == 1
    assert "output truncated" in proc.stdout and "your code printed" in proc.stdout
    assert len(proc.stdout) < 200_000


@pytest.mark.slow
def test_nan_output_is_counted():
    data, code = check_json(MHA / "nan_output.py", "--seed", "1")
    assert code == 1
    message = next(c["message"] for c in data["checks"] if c["id"] == "public-attention-example")
    assert "12 NaN" in message


@pytest.mark.slow
def test_wrong_shape_shows_both_shapes():
    data, code = check_json(MHA / "wrong_shape.py", "--seed", "1")
    assert code == 1
    message = next(c["message"] for c in data["checks"] if c["id"] == "output-shapes")
    assert "shape (3, 8), expected (2, 3, 8)" in message


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("returns_none.py", "is None"),
        ("ragged.py", "ragged list: row [1][2] has 7 entries where [1][0] has 8"),
    ],
)
@pytest.mark.slow
def test_unreadable_return_values(name, fragment):
    data, code = check_json(MHA / name, "--seed", "1")
    assert code == 1
    assert fragment in next(c["message"] for c in data["checks"] if c["id"] == "output-shapes")


def test_missing_file_is_misuse(tmp_path):
    proc = attn_kit("check", tmp_path / "nope.py")
    assert proc.returncode == 2 and "no such file" in proc.stderr
    data, code = check_json(tmp_path / "nope.py")
    assert code == 2 and "no such file" in data["error"]


def test_unknown_exercise_and_bad_option_are_misuse():
    proc = attn_kit("check", MHA / "correct.py", "--exercise", "nope")
    assert proc.returncode == 2 and "unknown exercise 'nope'" in proc.stderr
    proc = attn_kit("check", MHA / "correct.py", "--memory", "lots")
    assert proc.returncode == 2 and "not a size" in proc.stderr
    proc = attn_kit("check", MHA / "correct.py", "--no-such-option")
    assert proc.returncode == 2


@pytest.mark.slow
def test_pure_flag_fails_numpy_and_passes_lists(tmp_path):
    data, code = check_json(MHA / "correct.py", "--pure", "--seed", "1")
    assert code == 0 and statuses(data)["standard-library-only"] == "pass"
    numpy_ref = Path(__import__("attn_kit.base.paths", fromlist=["x"]).solutions_dir("mha-screen")) / "reference_numpy.py"
    data, code = check_json(numpy_ref, "--pure", "--seed", "1")
    assert code == 1 and statuses(data)["standard-library-only"] == "fail"
    assert "numpy (line" in next(c["message"] for c in data["checks"] if c["id"] == "standard-library-only")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie still answers kill(0); read its state
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return True


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupting_the_kit_leaves_no_child(tmp_path, sig):
    pid_file = tmp_path / "pids"
    tmp_path.chmod(0o777)  # run as root, the candidate's code runs as an unprivileged uid
    proc = subprocess.Popen(
        [sys.executable, "-m", "attn_kit.cli", "check", str(MHA / "records_pids.py"), "--timeout", "60"],
        env=dict(os.environ, ATTN_PID_FILE=str(pid_file), ATTN_KIT_ALSO_WRITABLE=str(tmp_path)),  # the file reports its pids there
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    from attn_kit.sandbox.proctree import descendants

    below = descendants(proc.pid)  # zygote, keeper, nsinit, worker (pids as /proc shows them)
    assert len(below) >= 3 and all(_alive(p) for p in below)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "Interrupted" in err and "Traceback" not in err
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in below) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in below)
