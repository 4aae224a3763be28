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
from helpers import await_hostile_run, judge_run

HOSTILE = CORPUS / "hostile"
OUTCOMES = tomllib.loads((HOSTILE / "outcomes.toml").read_text(encoding="utf-8"))
HELPERS = ("honest_numpy.py", "hostile_util.py", "known_bug_no_scaling.py")
DEFAULT_ARGS = ["--timeout", "1", "--seed", "1"]
THREADS = 4

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="walks /proc; Linux process controls")]


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    seconds: float
    kit_pid: int
    markers: dict[str, str] = field(default_factory=dict)  # marker file name -> content
    left: list[str] = field(default_factory=list)  # processes of the run still alive
    then: Run | None = None  # a persistence chain's second run, in the same folder
    sentinel: str | None = None  # the sentinel file's content after both runs


def case_spec(name: str) -> dict:
    """The case's expectations; `unprivileged` overrides them where the kit does not run as root."""
    spec = dict(OUTCOMES[name])
    extra = spec.pop("unprivileged", {})
    if os.geteuid() != 0:
        spec.update(extra)
    return spec


def _run_case(name: str, spec: dict, root: Path) -> Run:
    token = uuid.uuid4().hex
    folder = root / token
    markers = folder / "markers"
    markers.mkdir(parents=True)
    markers.chmod(0o777)  # run as root, the candidate's code runs as an unprivileged uid
    if spec.get("writable"):  # a folder the candidate's code can write in, as a user's own folder
        folder.chmod(0o777)
    if "sentinel" in spec:
        (folder / spec["sentinel"]).write_text("sentinel\n")
    for helper in (*HELPERS, *spec.get("copy", ())):
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
    env = dict(
        os.environ,
        ATTN_KIT_HOME=str(folder / "home"),
        ATTN_MARKER_DIR=str(markers),
        ATTN_KIT_ALSO_WRITABLE=os.pathsep.join([str(markers), *([str(folder)] if spec.get("writable") else [])]),
        ATTN_CASE_TOKEN=token,
        NO_COLOR="1",
        PYTHONPATH=os.pathsep.join(sys.path),
        **spec.get("env", {}),
    )
    argv = [sys.executable, "-m", "attn_kit.cli", "check", str(path), "--json", *spec.get("args", DEFAULT_ARGS)]
    run = _run(argv, spec, env, folder, markers, token)
    if "then" in spec:  # a persistence chain: the same folder, the same data folder, a known bug
        then = [sys.executable, "-m", "attn_kit", "check", spec["then"], "--json", *DEFAULT_ARGS]
        run.then = _run(then, {}, env, folder, markers, token)
    if "sentinel" in spec:
        run.sentinel = (folder / spec["sentinel"]).read_text(errors="replace")
    run.markers = {m.name: m.read_text(errors="replace") for m in markers.iterdir()}
    return run


def _run(argv: list[str], spec: dict, env: dict, folder: Path, markers: Path, token: str) -> Run:
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, cwd=folder, text=True)
    out, err, seconds, left = await_hostile_run(proc, spec, markers, token, started)
    return Run(proc.returncode, out, err, seconds, proc.pid, {}, left)


def _remove_interpreter_markers() -> None:
    """writes_interpreter's files, should a regression let it write them (they are empty)."""
    import sysconfig

    places = {
        sys.prefix,
        os.path.join(sys.prefix, "bin"),
        os.path.dirname(os.path.realpath(sys.executable)),
        sys.base_prefix,
        os.path.join(sys.base_prefix, "lib"),
        sysconfig.get_paths()["purelib"],
    }
    for folder in places:
        for path in Path(folder).glob("attn-kit-hostile-*"):
            path.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def hostile_runs():
    root = Path(tempfile.mkdtemp(prefix="attn-kit-hostile-"))
    # a terminal of this user's, open while the cases run, for opens_user_terminals to find
    terminal = os.openpty() if hasattr(os, "openpty") else ()
    order = sorted(OUTCOMES, key=lambda n: -OUTCOMES[n].get("seconds", 20) - ("signal" in OUTCOMES[n]) * 10)
    try:
        with ThreadPoolExecutor(THREADS) as pool:
            futures = {name: pool.submit(_run_case, name, case_spec(name), root) for name in order}
            yield {name: future.result() for name, future in futures.items()}
    finally:
        for fd in terminal:
            os.close(fd)
        _remove_interpreter_markers()
        shutil.rmtree(root, ignore_errors=True)


def test_corpus_is_large_and_every_file_has_an_outcome():
    files = {p.stem for p in HOSTILE.glob("*.py")} - {Path(h).stem for h in HELPERS}
    assert len(files) >= 40
    named = {spec.get("file", f"{name}.py")[:-3] for name, spec in OUTCOMES.items()}
    named |= {copied[:-3] for spec in OUTCOMES.values() for copied in spec.get("copy", ())}
    assert files <= named | {"honest_numpy"}, files - named


@pytest.mark.parametrize("name", sorted(OUTCOMES))
def test_hostile_file(hostile_runs, name):
    spec, run = case_spec(name), hostile_runs[name]
    judge_run(name, spec, run)
