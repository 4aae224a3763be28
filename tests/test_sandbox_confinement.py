"""The worker's confinement (sandbox/landlock.py, sandbox/confinement.py): the binding itself, in a
child process, and what a graded file can reach through `attn-kit check` and `attn-kit grade`.

Run as root here; tests/test_sandbox_unprivileged.py runs the hostile corpus's confinement cases
as an ordinary user too.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from attn_kit.sandbox import confinement, landlock

ABI = landlock.abi()
needs_landlock = pytest.mark.skipif(ABI < 1, reason="this kernel has no Landlock")
ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "reference_numpy.py"


def test_structures_match_the_kernel_header():
    # <linux/landlock.h>: three __u64 in the ruleset attribute, a packed __u64 + __s32 in a rule
    assert ctypes.sizeof(landlock._RulesetAttr) == 24
    assert ctypes.sizeof(landlock._PathBeneathAttr) == 12
    assert landlock._PathBeneathAttr.parent_fd.offset == 8


def test_older_abis_drop_the_rights_they_do_not_know():
    assert landlock.fs_rights(1) == (1 << 13) - 1  # no REFER, TRUNCATE, IOCTL_DEV
    assert landlock.fs_rights(2) & landlock.FS_REFER and not landlock.fs_rights(2) & landlock.FS_TRUNCATE
    assert landlock.fs_rights(5) & landlock.FS_IOCTL_DEV and not landlock.fs_rights(4) & landlock.FS_IOCTL_DEV
    assert landlock.fs_rights(7) == landlock.EVERYTHING
    assert landlock.fs_rights(0) == 0
    assert landlock.missing(3) == ["TCP connections", "signals and abstract sockets"]
    assert landlock.missing(5) == ["signals and abstract sockets"]
    assert landlock.missing(7) == []


def test_switched_off_it_says_so(monkeypatch):
    monkeypatch.setenv(confinement.ENV_OFF, "1")
    assert confinement.available() == 0
    confined, note = confinement.apply("/nonexistent.py", (), "", False)
    assert not confined and note.startswith("confinement not applied (switched off)")


def test_a_file_kept_in_the_home_itself_does_not_open_the_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "solution.py").write_text("")
    (tmp_path / "work").mkdir()
    confinement.prepare()
    for folder in (tmp_path, Path("/"), Path("/tmp")):
        rules = dict(confinement.rules_for(str(tmp_path / "solution.py"), (str(folder),), "", True, False))
        assert str(tmp_path / "solution.py") in rules and str(folder) not in rules
    rules = dict(confinement.rules_for(str(tmp_path / "work" / "s.py"), (str(tmp_path / "work"),), "", True, False))
    assert rules[str(tmp_path / "work")] == landlock.READ


def _child(code: str, tmp_path: Path) -> dict:
    """Run `code` in a fresh interpreter that first confines itself to read `allowed` and write `tmp`."""
    prelude = textwrap.dedent(
        """
        import ctypes, json, os, socket, sys
        from attn_kit.sandbox import landlock
        ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
        allowed, tmp = sys.argv[1], sys.argv[2]
        skipped = landlock.confine([(p, landlock.READ_EXEC) for p in sys.path if os.path.isabs(p)]
                                   + [(allowed, landlock.READ), (tmp, landlock.EVERYTHING), ("/nowhere", landlock.READ)])
        seen = {"skipped": skipped}
        def attempt(name, fn):
            try:
                fn()
                seen[name] = "allowed"
            except OSError as exc:
                seen[name] = type(exc).__name__
        """
    )
    allowed, tmp, secret = tmp_path / "allowed", tmp_path / "tmp", tmp_path / "secret"
    for folder in (allowed, tmp, secret):
        folder.mkdir()
        (folder / "f.txt").write_text("x")
    script = prelude + textwrap.dedent(code) + "\nprint(json.dumps(seen))\n"
    done = subprocess.run([sys.executable, "-c", script, str(allowed), str(tmp)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@needs_landlock
def test_a_confined_process_reads_and_writes_only_what_it_was_given(tmp_path):
    seen = _child(
        """
        attempt("read allowed", lambda: open(os.path.join(allowed, "f.txt")).read())
        attempt("write allowed", lambda: open(os.path.join(allowed, "g.txt"), "w"))
        attempt("write tmp", lambda: open(os.path.join(tmp, "g.txt"), "w").write("y"))
        attempt("read secret", lambda: open(os.path.join(os.path.dirname(tmp), "secret", "f.txt")).read())
        attempt("list secret", lambda: os.listdir(os.path.join(os.path.dirname(tmp), "secret")))
        """,
        tmp_path,
    )
    assert "/nowhere" in seen["skipped"]  # a path that does not exist is skipped, not an error
    assert seen["read allowed"] == "allowed" and seen["write tmp"] == "allowed"
    assert seen["write allowed"] == "PermissionError"
    assert seen["read secret"] == "PermissionError" and seen["list secret"] == "PermissionError"


@needs_landlock
@pytest.mark.skipif(ABI < 4, reason="Landlock ABI 4 confines TCP")
def test_a_confined_process_opens_no_tcp_connection(tmp_path):
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        seen = _child(
            f"""
            attempt("connect", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=5))
            attempt("bind", lambda: socket.socket().bind(("127.0.0.1", 0)))
            """,
            tmp_path,
        )
    finally:
        server.close()
    assert seen["connect"] == "PermissionError"
    assert seen["bind"] == "PermissionError"


@needs_landlock
@pytest.mark.skipif(ABI < 6, reason="Landlock ABI 6 scopes signals")
def test_a_confined_process_signals_nothing_outside_its_domain(tmp_path):
    seen = _child(
        """
        attempt("signal parent", lambda: os.kill(os.getppid(), 0))
        attempt("signal itself", lambda: os.kill(os.getpid(), 0))
        """,
        tmp_path,
    )
    assert seen["signal parent"] == "PermissionError"
    assert seen["signal itself"] == "allowed"


# --- through the kit -------------------------------------------------------------------------------

DELEGATES = '''\
# attn-kit: mha-screen
"""Finds the kit's reference on disk, beside attn_kit, and runs it as its own code."""
import glob, os
import attn_kit

here = os.path.dirname(attn_kit.__file__)
places = [os.path.join(here, "solutions", "mha-screen", "{ref}"),
          os.path.join(os.path.dirname(here), "solutions", "mha-screen", "{ref}")]
places += glob.glob(os.path.join(os.path.dirname(here), "**", "{ref}"), recursive=True)
found = [p for p in places if os.path.exists(p)]
assert found, "the reference is not on disk where this test expects it"
exec(compile(open(found[0]).read(), found[0], "exec"))
'''.replace("{ref}", REFERENCE)


def _kit(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attn_kit", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
        cwd=cwd,
    )


@needs_landlock
def test_a_file_that_runs_the_reference_from_disk_fails_as_its_own_code_would(tmp_path):
    (tmp_path / "delegates.py").write_text(DELEGATES)
    done = _kit("check", str(tmp_path / "delegates.py"), "--json", "--seed", "1", env={"ATTN_KIT_HOME": str(tmp_path / "home")})
    assert done.returncode == 1, done.stderr
    assert "Permission denied" in done.stdout + done.stderr
    assert REFERENCE in done.stdout + done.stderr


@needs_landlock
def test_grade_refuses_unconfined_unless_allowed_and_check_says_so_in_one_line(tmp_path):
    good = tmp_path / "subs"
    good.mkdir()
    (good / "alice.py").write_text((ROOT / "solutions" / "mha-screen" / REFERENCE).read_text())
    off = {confinement.ENV_OFF: "1", "ATTN_KIT_HOME": str(tmp_path / "home")}
    refused = _kit("grade", str(good), "-e", "mha-screen", "--seed", "1", env=off)
    assert refused.returncode == 2
    assert "cannot be confined" in refused.stderr and "--allow-unconfined" in refused.stderr
    assert "Traceback" not in refused.stderr
    allowed = _kit(
        "grade", str(good), "-e", "mha-screen", "--seed", "1", "--allow-unconfined", "--out", f"json={tmp_path / 'g.json'}", env=off
    )
    assert allowed.returncode == 0, allowed.stderr
    report = json.loads((tmp_path / "g.json").read_text())["submissions"][0]["report"]
    assert any(n.startswith("confinement not applied") for n in report["notes"])
    checked = _kit("check", str(good / "alice.py"), "--seed", "1", env={**off, "COLUMNS": "200"})
    lines = [line for line in checked.stdout.splitlines() if "confinement not applied" in line]
    assert len(lines) == 1, checked.stdout
