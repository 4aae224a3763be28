"""The kit's own writes never follow a symlink it did not create (safefile), nor run as root
code that the candidate's could have planted (`python -m attn_kit` and the worker's uid)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from attn_kit.base import safefile
from attn_kit.sandbox import limits as sandbox_limits

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks and owners")


def test_a_planted_symlink_is_replaced_not_followed(tmp_path):
    oracle = tmp_path / "oracle.py"
    oracle.write_text("ORACLE\n")
    folder = tmp_path / "repro"
    folder.mkdir()
    (folder / "repro_x.py").symlink_to(oracle)
    safefile.write_text(folder / "repro_x.py", "script\n")
    assert oracle.read_text() == "ORACLE\n"
    assert not (folder / "repro_x.py").is_symlink() and (folder / "repro_x.py").read_text() == "script\n"
    assert sorted(p.name for p in folder.iterdir()) == ["repro_x.py"]  # no temporary file left


def test_a_symlinked_folder_is_refused(tmp_path):
    real = tmp_path / "installed"
    real.mkdir()
    (tmp_path / "repro").symlink_to(real)
    with pytest.raises(safefile.UnsafePath) as caught:
        safefile.write_text(tmp_path / "repro" / "repro_x.py", "script\n")
    assert caught.value.filename == str(tmp_path / "repro") and "symbolic link" in caught.value.strerror
    assert list(real.iterdir()) == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_folder_of_another_user_is_refused(tmp_path):
    folder = tmp_path / "theirs"
    folder.mkdir()
    os.chown(folder, 65534, 65534)
    with pytest.raises(safefile.UnsafePath, match="another user"):
        safefile.write_text(folder / "report.json", "{}")
    assert list(folder.iterdir()) == []


def test_repro_scripts_replace_planted_symlinks(tmp_path):
    from attn_kit.base.records import CallStatus, Outcome
    from attn_kit.report import repro
    from attn_kit.report.results import Call, CheckResult, CheckStatus, Report

    oracle = tmp_path / "oracle.py"
    oracle.write_text("ORACLE\n")
    folder = tmp_path / "repro"
    folder.mkdir()
    (folder / "repro_a_check.py").symlink_to(oracle)
    call = Call("stable_softmax", ([1.0, 2.0],), {}, Outcome(CallStatus.OK, [0.5, 0.5]), expected=[0.27, 0.73])
    result = CheckResult("a-check", "A check", CheckStatus.FAIL, 0, 1, "wrong", failing_call=call)
    written = repro.write(Report("mha-screen", str(tmp_path / "s.py"), 1, [result]), folder)
    assert [p.name for p in written] == ["repro_a_check.py"]
    assert oracle.read_text() == "ORACLE\n" and not written[0].is_symlink()


def test_history_database_behind_a_symlink_is_refused(tmp_path):
    from attn_kit.base.errors import StoreError
    from attn_kit.practice.store import open_store

    target = tmp_path / "elsewhere.db"
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "history.db-wal").symlink_to(target)
    with pytest.raises(StoreError, match="symbolic link"):
        open_store(tmp_path / "home" / "history.db")
    assert not target.exists()


def test_python_m_attn_kit_does_not_import_from_the_current_folder(tmp_path):
    (tmp_path / "click.py").write_text("print('HIJACKED')\nraise SystemExit(0)\n")
    proc = subprocess.run(
        [sys.executable, "-m", "attn_kit", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert proc.returncode == 0 and "HIJACKED" not in proc.stdout and "Usage" in proc.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0, reason="the kit runs as root")
def test_as_root_the_candidate_runs_as_an_unprivileged_uid(tmp_path):
    from attn_kit.sandbox.limits import PROCESS_ALLOWANCE, WORKER_UID
    from attn_kit.sandbox.session import Sandbox

    solution = tmp_path / "who.py"
    solution.write_text(
        "import os, resource\n\ndef who():\n    return [os.getuid(), os.geteuid(), os.getgid(), "
        "len(os.getgroups()), resource.getrlimit(resource.RLIMIT_NPROC)[1]]\n\n"
        "def write(path):\n    open(path, 'w').close()\n"
    )
    solution.chmod(0o600)  # readable by root only: the worker still reads it
    with Sandbox(str(solution), timeout=20) as box:
        who = box.call("who", echo=False).value
        assert who[:4] == [WORKER_UID, WORKER_UID, WORKER_UID, 0]
        # RLIMIT_NPROC: the tasks uid 65534 had when the worker started, and an allowance
        assert PROCESS_ALLOWANCE <= who[4] < PROCESS_ALLOWANCE + 4096
        denied = box.call("write", (str(Path(sys.prefix) / "bin" / "attn-kit-probe"),), echo=False)
    assert denied.status == "raised" and denied.error.type == "PermissionError"
    assert not (Path(sys.prefix) / "bin" / "attn-kit-probe").exists()


def test_pure_is_documented_as_advisory_where_it_is_offered():
    from click.testing import CliRunner

    from attn_kit.cli import cli

    text = " ".join(CliRunner().invoke(cli, ["check", "--help"]).output.split())
    assert "Advisory: checked inside your code's own process" in text
    doc = (Path(__file__).resolve().parent.parent / "docs" / "threat-model.md").read_text(encoding="utf-8")
    assert "`--pure` is advisory" in doc


def test_repro_scripts_for_messages_with_backslashes_are_valid_python(tmp_path):
    from attn_kit.base.records import CallStatus, Outcome
    from attn_kit.report import repro
    from attn_kit.report.results import Call, CheckResult, CheckStatus, Report

    call = Call("stable_softmax", ([1.0],), {}, Outcome(CallStatus.OK, [1.0]), expected=[1.0])
    message = 'printed \\e[2J and \\x1 and \\N{ and C:\\Users\\me """ end\\'
    result = CheckResult("a-check", "A \\N title", CheckStatus.FAIL, 0, 1, message, failing_call=call)
    [path] = repro.write(Report("mha-screen", str(tmp_path / "s.py"), 1, [result]), tmp_path / "repro")
    source = path.read_text(encoding="utf-8")
    compile(source, str(path), "exec")
    assert "\\\\x1" in source


def test_a_worker_that_could_not_leave_root_refuses_every_file_with_the_recipe():
    from attn_kit.runtime import worker
    from attn_kit.sandbox import session

    refusing = worker.Worker(conn=None)
    refusing.refused = sandbox_limits.ROOT_REFUSED.format(why="changing to uid 65534 failed: Operation not permitted")
    reply = refusing.load("/nonexistent/solution.py", None)
    assert reply["status"] == "raised" and reply["functions"] == {}
    text = session._load_failure_text("solution.py", reply["error"], reply["output"])
    assert text.startswith("solution.py was not run: the kit runs as root") and "docs/threat-model.md" in text
    assert "\n" not in text
