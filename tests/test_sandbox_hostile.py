"""The adversarial corpus (tests/corpus/hostile/): every file run through the real CLI.

Each case's expected outcome is data in outcomes.toml. The runs happen once, side by side in a
thread pool (a session fixture); each parametrised test then asserts, for its case: the verdict,
the exit status, one JSON object on stdout, no kit traceback, no process of the run left
(found by a token in the command line or environment, walking /proc), no marker file written
from the kit's process (nor any marker the case forbids), and the wall time bound.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import CORPUS

HOSTILE = CORPUS / "hostile"
OUTCOMES = tomllib.loads((HOSTILE / "outcomes.toml").read_text(encoding="utf-8"))
HELPERS = ("honest_numpy.py", "hostile_util.py")
DEFAULT_ARGS = ["--timeout", "1", "--seed", "1"]
THREADS = 4

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="walks /proc; Linux process controls")]


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    seconds: float
    kit_pid: int
    markers: dict[str, str] = field(default_factory=dict)     # marker file name -> content
    left: list[str] = field(default_factory=list)             # processes of the run still alive


def _processes_with(token: str) -> list[str]:
    """Live processes whose command line or environment carries the token."""
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            hit = False
            for part in ("cmdline", "environ"):
                try:
                    with open(f"/proc/{name}/{part}", "rb") as fh:
                        hit = hit or token.encode() in fh.read()
                except OSError:
                    pass
            if hit:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    line = fh.read().replace(b"\0", b" ").decode(errors="replace")[:120]
                found.append(f"{name}: {line}")
        except (OSError, IndexError):
            continue
    return found


def _run_case(name: str, spec: dict, root: Path) -> Run:
    token = uuid.uuid4().hex
    folder = root / token
    markers = folder / "markers"
    markers.mkdir(parents=True)
    for helper in HELPERS:
        shutil.copy(HOSTILE / helper, folder / helper)
    file = spec.get("file", f"{name}.py")
    if file == "@fifo":
        path = folder / "solution.py"
        os.mkfifo(path)
    elif file.startswith("/"):
        path = Path(file)
    else:
        path = folder / file
        shutil.copy(HOSTILE / file, path)
    env = dict(os.environ, ATTN_KIT_HOME=str(folder / "home"), ATTN_MARKER_DIR=str(markers),
               ATTN_CASE_TOKEN=token, NO_COLOR="1", PYTHONPATH=os.pathsep.join(sys.path), **spec.get("env", {}))
    argv = [sys.executable, "-m", "attn_kit.cli", "check", str(path), "--json",
            *spec.get("args", DEFAULT_ARGS)]
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=env, cwd=folder, text=True)
    if "signal" in spec:
        deadline = time.monotonic() + 30
        while not any(m.name.startswith("ready") for m in markers.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(getattr(signal, spec["signal"]))
    try:
        out, err = proc.communicate(timeout=spec.get("seconds", 20) + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    seconds = time.monotonic() - started
    left: list[str] = []
    deadline = time.monotonic() + 5          # the kernel takes a moment to empty a PID namespace
    while time.monotonic() < deadline:
        left = _processes_with(token)
        if not left:
            break
        time.sleep(0.05)
    for line in left:                        # clean up, so one failure does not leak into others
        try:
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
        except OSError:
            pass
    found = {m.name: m.read_text(errors="replace") for m in markers.iterdir()}
    return Run(proc.returncode, out, err, seconds, proc.pid, found, left)


@pytest.fixture(scope="session")
def hostile_runs():
    root = Path(tempfile.mkdtemp(prefix="attn-kit-hostile-"))
    # a terminal of this user's, open while the cases run, for opens_user_terminals to find
    terminal = os.openpty() if hasattr(os, "openpty") else ()
    order = sorted(OUTCOMES, key=lambda n: -OUTCOMES[n].get("seconds", 20) - ("signal" in OUTCOMES[n]) * 10)
    try:
        with ThreadPoolExecutor(THREADS) as pool:
            futures = {name: pool.submit(_run_case, name, OUTCOMES[name], root) for name in order}
            yield {name: future.result() for name, future in futures.items()}
    finally:
        for fd in terminal:
            os.close(fd)
        shutil.rmtree(root, ignore_errors=True)


def test_corpus_is_large_and_every_file_has_an_outcome():
    files = {p.stem for p in HOSTILE.glob("*.py")} - {Path(h).stem for h in HELPERS}
    assert len(files) >= 40
    named = {spec.get("file", f"{name}.py")[:-3] for name, spec in OUTCOMES.items()}
    assert files <= named | {"honest_numpy"}, files - named


@pytest.mark.parametrize("name", sorted(OUTCOMES))
def test_hostile_file(hostile_runs, name):
    spec, run = OUTCOMES[name], hostile_runs[name]
    context = f"{name}: exit {run.code}\nstdout: {run.stdout[:1500]}\nstderr: {run.stderr[-1500:]}"
    assert run.code == spec["exit"], context
    assert "Traceback (most recent call last)" not in run.stderr, context
    if "signal" not in spec:
        import json
        assert run.stdout.count("\n") == 1 and run.stdout.endswith("\n"), context
        data = json.loads(run.stdout)
        if "passed" in spec:
            assert data["passed"] is spec["passed"], context
        if "error" in spec:
            assert spec["error"] in data.get("error", ""), context
        statuses = {c["id"]: c["status"] for c in data["checks"]}
        for check_id, status in spec.get("checks", {}).items():
            assert statuses.get(check_id) == status, context
        if "message" in spec:
            assert any(spec["message"] in c["message"] for c in data["checks"]), context
        if "bug" in spec:
            assert spec["bug"] in [d["bug"] for d in data["diagnosis"]], context
    assert not run.left, f"{name}: processes left behind: {run.left}"
    from_kit = [m for m, text in run.markers.items() if text.split("\n")[0] == str(run.kit_pid)]
    assert not from_kit, f"{name}: markers written from the kit's process: {from_kit}"
    forbidden = [m for m in run.markers if m.rsplit("-", 1)[0] in spec.get("forbidden", ())]
    assert not forbidden, f"{name}: {forbidden}: {[run.markers[m] for m in forbidden]}"
    assert run.seconds < spec.get("seconds", 20), f"{name} took {run.seconds:.1f} s"
