"""Helpers shared by the test modules: the real CLI in a process of its own, and grading once per session.

Grading a file is the expensive step of most tests (a sandboxed worker per file, diagnosis after).
Use the CLI (`attn_kit`, `check_json`) only to test the command itself: its output, exit status
and flags, about one smoke test per feature and exercise. Each command is a process forked from a
server with the kit already imported (tests/cli_server.py; test_helpers.py checks that it says
what a fresh interpreter says); `fresh=True` starts a new interpreter instead. To test what the checks and diagnosis
say about a file, grade it in-process through the library, cached for the whole session:

    from helpers import graded, graded_json, graded_tests

    report = graded(path, seed=1)            # attn_kit.report.results.Report, shared: treat as read-only
    data, code = graded_json(path, seed=7)   # the same dict and exit status as `check --json`
    grade = graded_tests(tests_file)         # `test-tests` in-process, also cached

Every test that asks for the same (file, seed, exercise, options) gets the report graded the first
time, within one test process: under pytest-xdist (--dist loadfile) a module runs in one process,
so the tests sharing the bug variants' reports (naming, isolation, can-fail) live together in
test_catalogue.py. A file rewritten since is graded again (the cache
key holds its modification time and size). Prefer the seeds already in use (1 and 7 for
known-bug files, 1 and 2 for references) to hit the cache. The `graded` fixture in conftest.py
returns the same function, for tests that prefer fixtures.

Counts that follow the content (checks in a suite, hints, known bugs) come from the content:
`check_count("mha-screen")`, never a literal that breaks when a check is added.
"""

from __future__ import annotations

import atexit
import functools
import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import zlib
from pathlib import Path

import cpu_profile
import pytest
from hypothesis import Phase
from hypothesis import strategies as st

import attn_kit.cli as cli_package
from attn_kit.base.errors import DependencyMissing
from attn_kit.base.paths import bug_files, reference_files, solutions_dir
from attn_kit.cli.common import EXIT_FAIL, EXIT_PASS
from attn_kit.grading import pipeline
from attn_kit.load import catalog
from attn_kit.report.results import Report

TESTS = Path(__file__).resolve().parent
CORPUS = TESTS / "corpus"


# --- the real CLI, as a user runs it --------------------------------------------------------------


def attn_kit(*args, cwd=None, timeout=120, env=None, input=None, fresh=False) -> subprocess.CompletedProcess:
    """Run the installed `attn-kit` command in a process of its own, as a user would.

    The process is forked from a server that has the kit imported already (tests/cli_server.py):
    the command's own work is the same, without a new interpreter importing the kit each time.
    `fresh=True`, or an environment that changes how Python starts (PYTHON*, the locale), runs a
    new `python -m attn_kit.cli` instead; tests of start-up itself (a planted module, `python -m
    attn_kit`, the install) start their own processes."""
    full_env = dict(os.environ, **(env or {}))
    argv = [sys.executable, "-m", "attn_kit.cli", *map(str, args)]
    server = None if fresh else _CliServer.for_env(full_env)
    if server is not None:
        return server.run(argv, cwd, full_env, timeout, input)
    return _fresh(argv, cwd, full_env, timeout, input)


def _fresh(argv, cwd, env, timeout, input) -> subprocess.CompletedProcess:
    """The command in a new interpreter."""
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, input=input)


def _starts_python(key: str) -> bool:
    """Whether an environment variable changes how the interpreter starts (then a forked command
    would not be what a fresh one is)."""
    return key.startswith(("PYTHON", "LC_")) or key in ("LANG", "LANGUAGE")


class _CliServer:
    """This test process's tests/cli_server.py, started on first use. One command at a time: a
    command asked for while another runs (from a second thread) gets a fresh interpreter."""

    current: _CliServer | None = None

    def __init__(self):
        self.env = dict(os.environ)  # what the interpreter starts with; each command gets its own
        self.owner = os.getpid()  # a forked test process starts its own server, never shares this socket
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-P", str(TESTS / "cli_server.py"), str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        theirs.close()
        self.sock = ours
        self.lock = threading.Lock()
        atexit.register(self.close)

    @classmethod
    def for_env(cls, env: dict) -> _CliServer | None:
        if not sys.platform.startswith("linux"):  # SOCK_SEQPACKET, as the kit's own zygote uses
            return None
        server = cls.current
        if server is None or server.owner != os.getpid() or server.proc.poll() is not None:  # none, forked, or ended
            server = cls.current = cls()
        if any(env.get(k) != server.env.get(k) for k in set(env) | set(server.env) if _starts_python(k)):
            return None
        return server

    def close(self) -> None:
        self.sock.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        if _CliServer.current is self:
            _CliServer.current = None

    def _read(self, deadline: float) -> int:
        self.sock.settimeout(max(0.001, deadline - time.monotonic()))
        data = self.sock.recv(8)
        if len(data) != 8:
            raise OSError("tests/cli_server.py ended")
        return int.from_bytes(data, "little", signed=True)

    def run(self, argv, cwd, env, timeout, input) -> subprocess.CompletedProcess:
        if not self.lock.acquire(blocking=False):
            return _fresh(argv, cwd, env, timeout, input)
        try:
            return self._run(argv, cwd, env, timeout, input)
        finally:
            self.lock.release()

    def _run(self, argv, cwd, env, timeout, input) -> subprocess.CompletedProcess:
        deadline = time.monotonic() + timeout
        request = {"argv": [_CLI_MAIN, *argv[3:]], "env": env, "cwd": os.path.abspath(cwd or os.getcwd())}
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_r, in_w = os.pipe() if input is not None else (0, -1)  # else the command shares our stdin
        pid = 0
        try:
            try:
                socket.send_fds(self.sock, [json.dumps(request).encode()], [in_r, out_w, err_w])
            finally:
                for fd in (out_w, err_w, in_r if in_w >= 0 else -1):
                    if fd >= 0:
                        os.close(fd)
            pid = self._read(deadline)
            to_command, in_w = in_w, -1  # _communicate closes it, whatever happens there
            out, err, timed_out = _communicate(out_r, err_r, to_command, (input or "").encode(), deadline)
            if timed_out:
                os.kill(pid, signal.SIGKILL)
            status = self._read(max(deadline, time.monotonic()) + 30)
        except BaseException:  # out of step with the server: stop the command and the server
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            self.proc.kill()
            self.close()
            raise
        finally:
            for fd in (out_r, err_r, in_w):
                if fd >= 0:
                    os.close(fd)
        if timed_out:
            raise subprocess.TimeoutExpired(argv, timeout, output=out, stderr=err)
        return subprocess.CompletedProcess(argv, os.waitstatus_to_exitcode(status), _text(out), _text(err))


_CLI_MAIN = str(Path(cli_package.__file__).with_name("__main__.py"))  # sys.argv[0] under `python -m attn_kit.cli`


def _text(data: bytes) -> str:
    """Bytes as subprocess.run(text=True) decodes them: the locale's encoding, universal newlines."""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


def _communicate(out_r: int, err_r: int, in_w: int, data: bytes, deadline: float) -> tuple[bytes, bytes, bool]:
    """Read the command's stdout and stderr to their end while writing `data` to its stdin (in_w,
    closed here; -1 for none), until the deadline: (stdout, stderr, whether the deadline came first)."""
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(out_r, selectors.EVENT_READ)
            sel.register(err_r, selectors.EVENT_READ)
            if in_w >= 0 and data:
                os.set_blocking(in_w, False)
                sel.register(in_w, selectors.EVENT_WRITE)
            elif in_w >= 0:
                os.close(in_w)
                in_w = -1
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    return b"".join(chunks[out_r]), b"".join(chunks[err_r]), True
                for key, _ in sel.select(left):
                    if key.fd == in_w:
                        try:
                            data = data[os.write(in_w, data[:65536]) :]
                        except BrokenPipeError:
                            data = b""
                        if not data:
                            sel.unregister(in_w)
                            os.close(in_w)
                            in_w = -1
                    elif chunk := os.read(key.fd, 65536):
                        chunks[key.fd].append(chunk)
                    else:
                        sel.unregister(key.fd)
        return b"".join(chunks[out_r]), b"".join(chunks[err_r]), False
    finally:
        if in_w >= 0:
            os.close(in_w)


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON: strict readers reject it")


def strict_json(text: str):
    """json.loads, but NaN, Infinity and -Infinity (which Python writes by default) are errors."""
    return json.loads(text, parse_constant=_no_constant)


def check_json(path, *extra, cwd=None) -> tuple[dict, int]:
    """`attn-kit check PATH --json ...` in a process of its own: (the JSON object, the exit status)."""
    proc = attn_kit("check", path, "--json", *extra, cwd=cwd)
    assert proc.stdout.count("\n") <= 1, f"--json printed more than one line:\n{proc.stdout}"
    return strict_json(proc.stdout), proc.returncode


# --- grading in-process, once per session ---------------------------------------------------------


def available(exercise: catalog.Exercise) -> bool:
    """The exercise can be graded here (its optional dependency, e.g. torch, is installed)."""
    try:
        pipeline.require(exercise)
    except DependencyMissing:
        return False
    return True


def graded_exercises() -> list[catalog.Exercise]:
    """The exercises that can be graded here, in catalogue order."""
    return [e for e in catalog.exercises().values() if available(e)]


def _version(path) -> tuple[str, int, int]:
    """The file's absolute path, modification time and size: a file rewritten during a test is
    graded again, never answered from the cache."""
    resolved = Path(path).resolve()
    stat = resolved.stat()
    return str(resolved), stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=None)
def _grade(file: tuple[str, int, int], seed: int, exercise: str | None, public_only: bool, timeout: float) -> Report:
    path = file[0]
    with cpu_profile.grading(path, seed, exercise, public_only):
        return pipeline.grade(path, pipeline.Options(exercise=exercise, seed=seed, public_only=public_only, timeout=timeout))


def graded(
    path, seed: int = 1, exercise: str | None = None, *, public_only: bool = False, timeout: float = pipeline.DEFAULT_TIMEOUT
) -> Report:
    """The Report of grading PATH in-process, graded at most once per session for these arguments.

    Without `exercise` the file's header or functions decide, as `attn-kit check` does. The
    Report is shared between tests: read it, never change it."""
    return _grade(_version(path), int(seed), exercise, public_only, float(timeout))


def graded_json(path, seed: int = 1, exercise: str | None = None, **options) -> tuple[dict, int]:
    """(`check --json`'s object, the exit status `check` gives) for the cached report of PATH."""
    report = graded(path, seed, exercise, **options)
    return report.to_json(), EXIT_PASS if report.passed else EXIT_FAIL


@functools.lru_cache(maxsize=None)
def _grade_tests(file: tuple[str, int, int], exercise: str | None):
    from attn_kit.practice import testgrade

    return testgrade.grade_tests(file[0], exercise)


def graded_tests(path, exercise: str | None = None):
    """`attn-kit test-tests PATH` in-process (a testgrade.TestGrade), run at most once per session
    for these arguments and shared between tests: read it, never change it."""
    return _grade_tests(_version(path), exercise)


def graded_tests_json(path, exercise: str | None = None) -> tuple[dict, int]:
    """(`test-tests --json`'s object, the exit status without --min-score) for the cached grade."""
    grade = graded_tests(path, exercise)
    return grade.to_json(), EXIT_PASS if grade.ok else EXIT_FAIL


# --- seeds drawn by hypothesis ---------------------------------------------------------------------

# One grading is one example, so a seed property draws one seed per file and run: new on every local
# run; in CI (derandomised, conftest) the first draw is always the simplest value, so the seed is
# offset by a hash of the file's name and each file still gets its own.
DRAWS = st.integers(min_value=0, max_value=99_997)


# The phases of a seed property, `@settings(max_examples=1, phases=NO_SHRINK)`: a failing seed is
# reported as it is. Shrinking an unstructured seed finds nothing simpler, and each step would be
# another whole grading (one failure under load spent five minutes there). A settings object is
# not made here: it would inherit from the profile loaded when helpers is imported, before
# conftest loads the kit's.
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)


def drawn_seed(name: str, draw: int) -> int:
    """The seed (2..99_999, never 1) for the file `name` from a draw of DRAWS."""
    return 2 + (zlib.crc32(name.encode()) + draw) % 99_998


# --- the quick run: one case of each behaviour --------------------------------------------------


def one_quick_per(values, group, ids=None, slow=None) -> list:
    """pytest.params of `values`, the first value of each `group(value)` in the quick run
    (`-m "not slow"`) and every other one marked slow: the quick run keeps one case of each
    behaviour, the full suite runs them all. `ids(value)` names a case (pytest's own ids by
    default); a value for which `slow(value)` is true is slow whatever its group (torch's)."""
    seen: set = set()
    params = []
    for value in values:
        key = group(value)
        always = slow is not None and slow(value)
        marks = [pytest.mark.slow] if always or key in seen else []
        if not always:
            seen.add(key)
        params.append(pytest.param(*(value if isinstance(value, tuple) else (value,)), marks=marks, id=ids(value) if ids else None))
    return params


# --- counts and data that follow the content ------------------------------------------------------


def check_count(exercise_id: str) -> int:
    """How many graded checks the exercise's suite has (what 'All N checks passed' says)."""
    return len(pipeline.suite_for(catalog.exercise(exercise_id)).checks)


def corpus_data(name: str) -> dict:
    """A TOML file of expectations kept beside the corpus files (tests/corpus/NAME)."""
    with open(CORPUS / name, "rb") as fh:
        return tomllib.load(fh)


__all__ = [
    "CORPUS",
    "attn_kit",
    "available",
    "bug_files",
    "check_count",
    "check_json",
    "corpus_data",
    "graded",
    "graded_exercises",
    "graded_json",
    "reference_files",
    "solutions_dir",
    "graded_tests",
    "graded_tests_json",
    "one_quick_per",
]


def processes_with(token: str) -> list[str]:
    """Live processes whose command line or environment carries the token."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
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


def await_hostile_run(proc: subprocess.Popen, spec: dict, markers: Path, token: str, started: float) -> tuple[str, str, float, list[str]]:
    """A hostile case's kit process, started at `started`: signalled when the case asks for it (once
    its code wrote a `ready` marker), waited for within the case's bound, then (stdout, stderr,
    seconds, the processes of the run still alive, found by the case's token). Those are killed,
    so one failure does not leak into the other cases."""
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
    return out, err, seconds, processes_left(token)


def processes_left(token: str, grace: float = 5.0) -> list[str]:
    """The processes carrying the token (processes_with) still alive after `grace` seconds (the
    kernel takes a moment to empty a PID namespace). They are killed before this returns, so one
    failing test does not leak into the others."""
    left: list[str] = []
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        left = processes_with(token)
        if not left:
            break
        time.sleep(0.05)
    for line in left:
        try:
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
        except OSError:
            pass
    return left


def judge_run(name: str, spec: dict, run, who: str = "") -> None:
    """A hostile case's run (tests/corpus/hostile/outcomes.toml's `spec`) against every promise:
    verdict, exit status, one JSON object, no kit traceback, nothing left running, no marker
    written from the kit's process, the attack happened, no write through a planted symlink, a
    persistence chain's second run still failing the known-bug file, the time bound. `who` names
    the user the run was made as, for the messages."""
    import json

    name = f"{name}{who}"
    context = f"{name}: exit {run.code}\nstdout: {run.stdout[:1500]}\nstderr: {run.stderr[-1500:]}"
    assert run.code == spec["exit"], context
    assert "Traceback (most recent call last)" not in run.stderr, context
    if "signal" not in spec:
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
    missing = [r for r in spec.get("required", ()) if not any(m.rsplit("-", 1)[0] == r for m in run.markers)]
    assert not missing, f"{name}: the attack did not happen (no marker {missing}): {run.markers}"
    if "sentinel" in spec:
        assert run.sentinel == "sentinel\n", f"{name}: the kit wrote through a planted symlink: {run.sentinel!r}"
    if "then" in spec:  # the second run of the chain still fails the known-bug file
        second = run.then
        context = f"{name}, second run: exit {second.code}\nstdout: {second.stdout[:1500]}\nstderr: {second.stderr[-1500:]}"
        assert second.code == 1 and "Traceback (most recent call last)" not in second.stderr, context
        data = json.loads(second.stdout)
        assert data["passed"] is False and "no-scaling" in [d["bug"] for d in data["diagnosis"]], context
        assert not second.left, f"{name}: processes left behind by the second run: {second.left}"
    assert run.seconds < spec.get("seconds", 20), f"{name} took {run.seconds:.1f} s"


def arrays_in(value):
    """Every NumPy array in VALUE, through dicts, lists and tuples (what a call's arguments send)."""
    import numpy as np

    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from arrays_in(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from arrays_in(v)
