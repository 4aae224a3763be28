"""The hostile cases whose path differs without root, run by an unprivileged user.

This machine and CI run the suite as root, where the worker leaves root for uid 65534
(tests/test_sandbox_hostile.py). Run as an ordinary user, the kit cannot change uid: the
worker runs as the kit's own user, and what protects the kit is the user namespace (read-only
mounts of the kit and its data, a PID namespace), the kit's own non-dumpable state and the
limits the kernel applies to that uid. Each case here is run by uid UNPRIVILEGED (not 65534, so
that the process count is not shared with root's workers) through `setpriv`, with a HOME and an
ATTN_KIT_HOME it owns and, for the persistence chains, a copy of the kit it owns and could write
to, as a user's own `pip install` is. The interpreter and the site-packages of this venv are
bind-mounted where that uid can read them (in a private mount namespace of the test's only:
their own paths may be under /root or a 0700 temporary folder). The case's expectations are
outcomes.toml's, with its `unprivileged` overrides, and the same assertions as the root run:
verdict, exit status, no kit traceback, nothing left running, no marker from the kit.

Skipped, saying why, when the test process cannot switch users (not root, no `setpriv`, no
mount namespace): then the suite itself runs unprivileged and test_sandbox_hostile.py covers it.
"""

from __future__ import annotations

import importlib
import json
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
UNPRIVILEGED = 61234  # a uid of no other process here
THREADS = 2

# The cases whose path differs without root, each with why.
CASES = {
    "honest_numpy": "a correct file passes when the worker keeps the kit's uid",
    # persistence: no uid drop protects the kit's files; the user owns them (read-only mounts do)
    "plants_repro_symlink": "the folder is the user's own: the kit replaces the symlinks",
    "plants_click": "a planted click.py in the user's folder",
    "writes_kit_files_then_bug": "the kit's files and data folder belong to the user",
    "writes_interpreter": "the interpreter the user runs",
    # memory-check fakes: the kit reads /proc of a process of its own uid, not as root
    "clears_own_peak": "clear_refs of a same-uid worker",
    "non_dumpable_worker": "a non-dumpable same-uid worker hides /proc readings from a non-root kit",
    "scores_in_forked_child": "the data limit set by prlimit from a non-root kit",
    "fallback_non_dumpable_worker": "no namespaces: the data limit without a user namespace",
    "children_hold_memory_between_calls": "the memory cap's Pss read without root",
    # processes of the kit's own uid
    "reads_kit_memory": "the kit's processes have the worker's uid",
    "kills_its_parents": "the kit's processes have the worker's uid",
    "double_fork_daemon": "no uid of its own: the PID namespace of a user namespace",
    "orphans_on_sigkill": "the kit killed: the user namespace's PID namespace dies with it",
    "fallback_reads_kit_memory": "no namespaces and the same uid: only non-dumpable protects the kit",
    "fallback_double_fork_daemon": "no namespaces: the /proc walk as the user",
    # the process count: RLIMIT_NPROC counts the user's tasks in the kit's user namespace, or all of them
    "fork_bomb": "the process limit counted in the zygote's user namespace",
    "fallback_fork_bomb": "no namespaces: the process limit counted over all the user's processes",
    # confinement (Landlock) holds whoever runs the kit
    "delegates_to_reference": "the kit's reference is readable by the user, not by the confined worker",
    "connects_network": "no uid drop: only Landlock refuses the connection",
    "signals_outside": "nsinit has the worker's uid: only Landlock's signal scope refuses",
    "reads_secrets": "the user's home is the user's",
    "hides_peak_in_shared_memory": "a non-root kit cannot reset a non-dumpable worker's peak: the call is not measured",
}


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    seconds: float
    kit_pid: int
    markers: dict[str, str] = field(default_factory=dict)
    left: list[str] = field(default_factory=list)
    then: Run | None = None
    sentinel: str | None = None


def case_spec(name: str) -> dict:
    spec = dict(OUTCOMES[name])
    spec.update(spec.pop("unprivileged", {}))
    return spec


def _chown_tree(path: Path) -> None:
    os.lchown(path, UNPRIVILEGED, UNPRIVILEGED)
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), UNPRIVILEGED, UNPRIVILEGED)


@dataclass
class Setup:
    """Where the unprivileged runs find Python and the kit, and how they are started."""

    root: Path
    prefix: list[str]  # unshare ... setpriv ... env -i
    python: str
    pythonpath: str

    def argv(self, env: dict[str, str], *args: str) -> list[str]:
        base = {"HOME": str(self.root / "home"), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONPATH": self.pythonpath}
        return [*self.prefix, *(f"{k}={v}" for k, v in {**base, **env}.items()), self.python, *args]


def _copy_kit(site: Path) -> None:
    """The kit as a user's own install: attn_kit with checks, solutions and prompts nested."""
    import attn_kit

    dest = site / "attn_kit"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(attn_kit.__file__).parent, dest, ignore=ignore)
    for sub in ("checks", "solutions", "prompts"):
        if not (dest / sub).exists():  # an editable install keeps them beside the package
            source = next(iter(importlib.import_module(f"attn_kit.{sub}").__path__))
            shutil.copytree(source, dest / sub, ignore=ignore)


def _setup(root: Path) -> Setup:
    root.chmod(0o755)
    site = root / "site"
    _copy_kit(site)
    _chown_tree(site)
    home = root / "home"
    home.mkdir()
    _chown_tree(home)
    base = sys.base_prefix
    binds = [(base, root / "python")]
    path = [str(site)]
    for i, entry in enumerate(sys.path):
        if not entry.endswith(("site-packages", "dist-packages")) and not entry.startswith(base):
            continue
        if not os.path.isdir(entry):
            continue
        if entry.startswith(base + os.sep):
            path.append(str(root / "python") + entry[len(base) :])
        else:
            binds.append((entry, root / f"path{i}"))
            path.append(str(root / f"path{i}"))
    for _, target in binds:
        target.mkdir()
    mounts = "".join(f"mount --bind '{a}' '{b}' && " for a, b in binds)
    prefix = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        mounts + f'exec setpriv --reuid={UNPRIVILEGED} --regid={UNPRIVILEGED} --clear-groups "$@"',
        "sh",
        "env",
        "-i",
    ]
    python = str(root / "python" / os.path.relpath(os.path.realpath(sys.executable), base))
    return Setup(root, prefix, python, os.pathsep.join(path))


def _why_not() -> str:
    """'' when this process can run the kit as another user, else why not."""
    if not sys.platform.startswith("linux"):
        return "Linux only (user and mount namespaces, /proc)"
    if os.geteuid() != 0:
        return f"the tests already run as an unprivileged user (uid {os.geteuid()}): test_sandbox_hostile.py runs these cases on this path"
    missing = [tool for tool in ("setpriv", "unshare", "mount") if shutil.which(tool) is None]
    if missing:
        return f"cannot switch users: {', '.join(missing)} not installed"
    return ""


@pytest.fixture(scope="module")
def setup():
    why = _why_not()
    if why:
        pytest.skip(why)
    root = Path(tempfile.mkdtemp(prefix="attn-kit-unprivileged-"))
    try:
        made = _setup(root)
        probe = subprocess.run(
            made.argv({}, "-c", "import os, attn_kit; print(os.getuid(), attn_kit.__file__)"), capture_output=True, text=True, timeout=60
        )
        if probe.returncode != 0 or not probe.stdout.startswith(f"{UNPRIVILEGED} {root}"):
            pytest.skip(f"cannot run the kit as uid {UNPRIVILEGED}: {(probe.stderr or probe.stdout).strip()[-300:]}")
        yield made
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run(setup: Setup, args: list[str], spec: dict, env: dict, folder: Path, markers: Path, token: str) -> Run:
    started = time.monotonic()
    proc = subprocess.Popen(
        setup.argv(env, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=folder, text=True
    )
    out, err, seconds, left = await_hostile_run(proc, spec, markers, token, started)
    return Run(proc.returncode, out, err, seconds, proc.pid, {}, left)


def _run_case(setup: Setup, name: str, spec: dict) -> Run:
    token = uuid.uuid4().hex
    folder = setup.root / "cases" / token
    markers = folder / "markers"
    markers.mkdir(parents=True)
    if "sentinel" in spec:
        (folder / spec["sentinel"]).write_text("sentinel\n")
    for helper in (*HELPERS, *spec.get("copy", ())):
        shutil.copy(HOSTILE / helper, folder / helper)
    file = spec.get("file", f"{name}.py")
    shutil.copy(HOSTILE / file, folder / file)
    _chown_tree(folder)  # the user's own folder, as where a user keeps a solution
    env = {
        "ATTN_KIT_HOME": str(folder / "home"),
        "ATTN_MARKER_DIR": str(markers),
        "ATTN_KIT_ALSO_WRITABLE": os.pathsep.join([str(markers), str(folder)]),  # the user's own folder, as before Landlock
        "ATTN_CASE_TOKEN": token,
        "NO_COLOR": "1",
        **spec.get("env", {}),
    }
    run = _run(
        setup,
        ["-m", "attn_kit.cli", "check", str(folder / file), "--json", *spec.get("args", DEFAULT_ARGS)],
        spec,
        env,
        folder,
        markers,
        token,
    )
    if "then" in spec:
        run.then = _run(setup, ["-m", "attn_kit", "check", spec["then"], "--json", *DEFAULT_ARGS], {}, env, folder, markers, token)
    if "sentinel" in spec:
        run.sentinel = (folder / spec["sentinel"]).read_text(errors="replace")
    run.markers = {m.name: m.read_text(errors="replace") for m in markers.iterdir()}
    return run


def _kit_unchanged(setup: Setup) -> list[str]:
    """Files a case added to the user's copy of the kit (writes_kit_files names them hostile-*)."""
    return [str(p) for p in (setup.root / "site").rglob("*hostile*")]


@pytest.fixture(scope="module")
def unprivileged_runs(setup):
    (setup.root / "cases").mkdir()
    (setup.root / "cases").chmod(0o755)
    order = sorted(CASES, key=lambda n: -case_spec(n).get("seconds", 20) - ("signal" in OUTCOMES[n]) * 10)
    with ThreadPoolExecutor(THREADS) as pool:
        futures = {name: pool.submit(_run_case, setup, name, case_spec(name)) for name in order}
        yield {name: future.result() for name, future in futures.items()}


def test_every_case_is_in_the_corpus():
    assert set(CASES) <= set(OUTCOMES), set(CASES) - set(OUTCOMES)


def test_the_kit_runs_as_the_unprivileged_user(setup):
    """The runs below really are unprivileged: uid, no capability, a user namespace available
    (or not: then the kit uses its fallback, which the fallback_* cases take on purpose)."""
    code = (
        "import os; s = open('/proc/self/status').read();"
        "print(os.getuid(), os.geteuid(), [l.split()[1] for l in s.splitlines() if l.startswith('CapEff')][0])"
    )
    proc = subprocess.run(setup.argv({}, "-c", code), capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == [str(UNPRIVILEGED), str(UNPRIVILEGED), "0000000000000000"], proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_file_unprivileged(unprivileged_runs, setup, name):
    spec, run = case_spec(name), unprivileged_runs[name]
    judge_run(name, spec, run, who=f" (uid {UNPRIVILEGED})")
    assert not _kit_unchanged(setup), f"{name}: files added to the user's copy of the kit"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_process_count_counts_threads_and_descendants():
    """What RLIMIT_NPROC is set from (the keeper's count, plus the allowance): every task, threads
    included, of the uid, in a process tree (two processes, three threads) or over the machine."""
    import threading

    from attn_kit.sandbox.proctree import task_count as _task_count

    ready, go = os.pipe()
    pid = os.fork()
    if pid == 0:  # two more threads and a child of its own, then wait
        for _ in range(2):
            threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        os.write(go, b"1")
        time.sleep(30)
        os._exit(0)
    try:
        os.read(ready, 1)
        time.sleep(0.2)
        assert _task_count(os.getuid(), pid) == 4
        assert _task_count(os.getuid() + 1, pid) == 0
        assert _task_count(os.getuid()) >= 4 + threading.active_count()
    finally:
        from attn_kit.sandbox.proctree import kill_tree

        kill_tree(pid)
        os.waitpid(pid, 0)


@pytest.mark.slow
def test_grade_keeps_submissions_apart_unprivileged(setup):
    """tests/test_grade_confinement.py's cohort, graded by an ordinary user with two graders: the
    spoilers (same uid as the kit, so chmod works on whatever they can name) and the reader cost
    nobody else, and the run leaves no folder behind."""
    from test_grade_confinement import READER, REFERENCE, SPOILER

    folder = setup.root / "grade"
    cohort, markers, kit_tmp = folder / "cohort", folder / "markers", folder / "tmp"
    for made in (cohort, markers, kit_tmp):
        made.mkdir(parents=True)
    reference = REFERENCE.read_text()
    files = {"a_spoiler": SPOILER, "b_alice": "", "c_reader": READER, "d_dave": "", "e_spoiler": SPOILER, "f_erin": ""}
    for name, extra in files.items():
        (cohort / f"{name}.py").write_text(reference + extra)
    _chown_tree(folder)
    env = {"TMPDIR": str(kit_tmp), "ATTN_MARKER_DIR": str(markers), "ATTN_KIT_ALSO_WRITABLE": str(markers), "NO_COLOR": "1"}
    out = folder / "g.json"
    argv = setup.argv(env, "-m", "attn_kit", "grade", str(cohort), "-e", "mha-screen", "--seed", "3", "--jobs", "2", "--out", f"json={out}")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    for sub in json.loads(out.read_text())["submissions"]:
        assert sub["state"] == "graded" and sub["passed"], (sub["name"], sub["error"], sub["failed_checks"])
    seen = {m.name.rsplit("-", 1)[0] for m in markers.iterdir()}
    assert {"read-refused", "write-refused", "chmod"} <= seen, seen
    assert not seen & {"read-sibling", "listed-folder", "wrote-other"}, seen
    assert list(kit_tmp.iterdir()) == [], "the kit left temporary folders behind"
