"""`attn-kit grade`: a folder of submissions, each graded exactly as `attn-kit check` grades it.

How a submission's file is found (docs/grading.md says the same):
- every `*.py` file directly in the folder is one submission, named by its stem;
- every subfolder is one submission, named by the folder: its file is its only `*.py` file at the
  top level (test_*.py, *_test.py, conftest.py and __init__.py do not count), else its
  `solution.py`, else the one file whose first line is an `# attn-kit: ID` header; otherwise the
  submission is reported as missing, with the reason;
- names starting with `.` or `_` (`.git`, `__pycache__`) are skipped.
With `single`, the folder itself is one submission (a platform's submission folder).

Process model: the kit starts `jobs` grader processes (`python -m attn_kit.batch.run`), each a fresh
interpreter that grades one submission after another with grading.grade, so each keeps one warm
zygote for the whole run. They are the kit's own processes: the candidate's code runs in their
sandboxed workers, never in them. Each grader answers one JSON line per submission on a pipe
(nothing is unpickled). A submission that outlives its time limit costs its grader: the kit kills
that grader (its zygote and workers die with it: PR_SET_PDEATHSIG) and starts another, so one
hostile file costs that file only.
"""

from __future__ import annotations

import json
import os
import random
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from attn_kit.base.errors import KitError, UsageError

REQUIRE, TRY = "require", "try"  # sandbox.confinement's policies: run nothing unconfined, or say so

NOT_SOLUTIONS = ("test_", "conftest.py", "__init__.py")
GRADED, UNLOADABLE, TIMED_OUT, CRASHED, MISSING = "graded", "unloadable", "timed out", "crashed", "missing"
DEFAULT_LIMIT = 120.0  # seconds one submission may take in all (every call, load and diagnosis)
GRADER_START = 120.0  # seconds a new grader process may take to say it is ready


@dataclass
class Submission:
    name: str
    path: Path | None
    problem: str = ""  # why no file was found (path is None)


@dataclass
class Result:
    """One submission's grade. `report` is the `check --json` object (None when it could not be
    graded); `state` is graded, unloadable, timed out, crashed or missing."""

    name: str
    path: str | None
    state: str
    report: dict | None = None
    error: str = ""
    seconds: float = 0.0
    crashed: bool = False  # a call crashed or ran out of memory
    timed_out: bool = False  # a call, the load or the whole submission ran out of time

    @property
    def points(self) -> int:
        return self.report["score"]["points"] if self.report else 0

    @property
    def passed(self) -> bool:
        return bool(self.report and self.report["passed"])

    def checks(self) -> list[dict]:
        return self.report["checks"] if self.report else []

    def failed(self) -> list[str]:
        return [c["id"] for c in self.checks() if c["status"] in ("fail", "error")]

    def bugs(self) -> list[str]:
        return [d["bug"] for d in self.report["diagnosis"]] if self.report else []

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "path": self.path,
            "state": self.state,
            "error": self.error or None,
            "seconds": round(self.seconds, 3),
            "crashed": self.crashed,
            "timed_out": self.timed_out,
            "passed": self.passed,
            "failed_checks": self.failed(),
            "bugs": self.bugs(),
            "report": self.report,
        }


@dataclass
class Batch:
    exercise: str
    seed: int
    results: list[Result]
    checks: list[dict] = field(default_factory=list)  # id, title, points, public of every check, suite order
    seconds: float = 0.0
    jobs: int = 1

    @property
    def max_points(self) -> int:
        return sum(c["points"] for c in self.checks)

    @classmethod
    def from_json(cls, data: dict) -> Batch:
        """A run back from its `--out json=` file (gradeout.to_json), to write it in other formats."""
        results = [
            Result(s["name"], s["path"], s["state"], s["report"], s["error"] or "", s["seconds"], s["crashed"], s["timed_out"])
            for s in data["submissions"]
        ]
        return cls(data["exercise"], data["seed"], results, data["checks"], data["seconds"], data["jobs"])


# --- finding the submissions -----------------------------------------------------------------------


def _solution_in(folder: Path) -> tuple[Path | None, str]:
    files = sorted(
        p for p in folder.glob("*.py") if p.is_file() and not p.name.startswith((".", *NOT_SOLUTIONS)) and not p.stem.endswith("_test")
    )
    if len(files) == 1:
        return files[0], ""
    if (folder / "solution.py").is_file():
        return folder / "solution.py", ""
    headed = [p for p in files if _first_line(p).startswith("# attn-kit:")]
    if len(headed) == 1:
        return headed[0], ""
    if not files:
        return None, "no .py file in it"
    return None, (
        f"{len(files)} .py files in it ({', '.join(p.name for p in files[:4])}"
        f"{', ...' if len(files) > 4 else ''}) and none is solution.py or starts with `# attn-kit:`"
    )


def _first_line(path: Path) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.readline().strip()
    except OSError:
        return ""


def find_submissions(root: Path, single: bool = False) -> list[Submission]:
    """The submissions under `root` (see the module's docstring), in name order."""
    root = Path(root)
    if not root.exists():
        raise UsageError(f"{root} does not exist; give the folder of submissions (or one submission's file).")
    if root.is_file():
        return [Submission(root.stem, root)]
    if single:
        path, problem = _solution_in(root)
        return [Submission(root.resolve().name or "submission", path, problem)]
    found = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith((".", "_")):
            continue
        if entry.is_file() and entry.suffix == ".py":
            found.append(Submission(entry.stem, entry))
        elif entry.is_dir():
            path, problem = _solution_in(entry)
            found.append(Submission(entry.name, path, problem))
    if not found:
        raise UsageError(
            f"{root} holds no submission: put one .py file per submission in it, or one folder per submission holding its solution.py."
        )
    return found


# --- the grader process ------------------------------------------------------------------------------


def _set_pdeathsig() -> None:
    """Die with the kit: a grader never outlives the `attn-kit grade` that started it."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def grade_one(
    path: str, exercise: str, seed: int, timeout: float, memory: int | None, scope: str | None = None, confine: str = REQUIRE
) -> dict:
    """Grade one file as `attn-kit check --json --seed SEED` does; a Result's fields as a dict.
    `scope`: what its code may read (its file or its folder); `confine`: "require" runs nothing
    unconfined (sandbox.confinement)."""
    from attn_kit.base.errors import KitError
    from attn_kit.base.records import CallStatus
    from attn_kit.grading import pipeline

    reads = (scope,) if scope else None
    try:
        report = pipeline.grade(path, pipeline.Options(exercise, seed, timeout=timeout, memory=memory, reads=reads, confine=confine))
    except KitError as exc:
        text = str(exc)
        return {
            "state": UNLOADABLE,
            "error": text,
            "timed_out": "did not finish loading" in text,
            "crashed": "the process" in text and "loading" in text,
        }
    statuses = {c.outcome.status for r in report.results for c in r.calls}
    return {
        "state": GRADED,
        "report": report.to_json(),
        "crashed": bool(statuses & {CallStatus.CRASHED, CallStatus.MEMORY}),
        "timed_out": CallStatus.TIMEOUT in statuses,
    }


def serve() -> None:  # pragma: no cover - runs in the grader process
    """`python -m attn_kit.batch.run`: read a settings line, then one task line per submission on stdin;
    answer one JSON line per task. The candidate's code never runs here (it runs in the sandbox's
    workers), and fd 1 points at /dev/null so nothing but these lines reaches the kit."""
    _set_pdeathsig()
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w", encoding="utf-8")
    settings = json.loads(sys.stdin.readline())
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        task = json.loads(line)
        try:
            answer = grade_one(
                task["path"],
                settings["exercise"],
                settings["seed"],
                settings["timeout"],
                settings["memory"],
                task.get("scope"),
                settings.get("confine", REQUIRE),
            )
        except Exception as exc:  # noqa: BLE001 - a bug of the kit's costs this submission only, not the run
            answer = {"state": CRASHED, "error": f"the kit failed while grading this file ({type(exc).__name__}: {exc})"}
        out.write(json.dumps({"id": task["id"], **answer}) + "\n")
        out.flush()


class _Grader:
    def __init__(self, settings: dict):
        env = {**os.environ, "TMPDIR": settings["tmp"]} if settings.get("tmp") else None
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "attn_kit.batch.run"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.stdin.write(json.dumps(settings) + "\n")
        self.stdin.flush()
        self.task: int | None = None
        self.started = 0.0
        self.ready = False
        self.born = time.monotonic()

    def send(self, index: int, path: str, scope: str) -> None:
        self.task, self.started = index, time.monotonic()
        self.stdin.write(json.dumps({"id": index, "path": path, "scope": scope}) + "\n")
        self.stdin.flush()

    def finish(self) -> None:
        """An idle grader at the end of the run: its stdin closed, it ends on its own (its zygote
        removes the workers' temporary folders on the way out), or is killed after 5 s."""
        try:
            self.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.stdin, self.stdout):
            try:
                stream.close()
            except OSError:
                pass


UNCONFINED_REFUSED = (
    "the submissions' code cannot be confined here ({why}), so each could read every file this "
    "user can (other submissions, the kit's reference solutions) and use the network; nothing was "
    "graded. Grade on a Linux kernel with Landlock (5.13 or later, enabled), or pass "
    "--allow-unconfined to grade anyway (docs/threat-model.md)."
)


def scopes(submissions: list[Submission]) -> list[str]:
    """What each submission's code may read: its folder, or its file alone where that folder holds
    other submissions too (one .py file per student in one folder)."""
    from collections import Counter

    shared = Counter(sub.path.resolve().parent for sub in submissions if sub.path is not None)
    return [
        "" if sub.path is None else str(sub.path if shared[sub.path.resolve().parent] > 1 else sub.path.resolve().parent)
        for sub in submissions
    ]


def require_confinement(allow_unconfined: bool) -> None:
    """Raise UsageError where the candidates' code cannot be confined, unless allowed."""
    from attn_kit.sandbox import confinement

    if allow_unconfined or confinement.available() >= 1:
        return
    why = "switched off with " + confinement.ENV_OFF if os.environ.get(confinement.ENV_OFF) else "this system has no Landlock"
    raise UsageError(UNCONFINED_REFUSED.format(why=why))


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _suite_checks(exercise: str) -> list[dict]:
    from attn_kit.grading import pipeline
    from attn_kit.load import catalog

    suite = pipeline.suite_for(catalog.exercise(exercise))
    return [{"id": c.id, "title": c.title, "points": c.points, "public": c.public} for c in suite.checks]


class _Pool:
    """The grader processes of one run: hands out submissions, reads answers, enforces limits."""

    def __init__(self, submissions: list[Submission], settings: dict, jobs: int, limit: float, finish: Callable[[int, Result], None]):
        self.submissions, self.settings, self.jobs, self.limit, self.finish = submissions, settings, jobs, limit, finish
        self.graders: list[_Grader] = []
        self.scopes = scopes(submissions)
        self.selector = selectors.DefaultSelector()
        self.failed_starts = 0

    def start(self) -> None:
        grader = _Grader(self.settings)
        self.graders.append(grader)
        self.selector.register(grader.stdout, selectors.EVENT_READ, grader)

    def drop(self, grader: _Grader, finish: bool = False) -> None:
        self.selector.unregister(grader.stdout)
        self.graders.remove(grader)
        if finish and grader.task is None:
            grader.finish()
        else:
            grader.kill()

    def lost(self, grader: _Grader, state: str, why: str) -> None:
        """The grader is stopped or gone: its submission (if any) gets `state`, it is dropped."""
        if grader.task is not None:
            sub = self.submissions[grader.task]
            self.finish(
                grader.task,
                Result(
                    sub.name,
                    str(sub.path),
                    state,
                    error=why,
                    seconds=time.monotonic() - grader.started,
                    timed_out=state == TIMED_OUT,
                    crashed=state == CRASHED,
                ),
            )
        elif not grader.ready:
            self.failed_starts += 1
            if self.failed_starts > 3:
                raise KitError(f"the grader processes end as soon as they start; is the kit installed in {sys.executable}?")
        self.drop(grader)

    def busy(self) -> int:
        return sum(g.task is not None for g in self.graders)

    def read(self, grader: _Grader) -> None:
        line = grader.stdout.readline()
        if not line:
            self.lost(grader, CRASHED, "the grader process grading this file ended without an answer")
            return
        try:
            answer = json.loads(line)
        except ValueError:
            self.lost(grader, CRASHED, "the grader process grading this file answered nonsense")
            return
        if answer.get("ready"):
            grader.ready = True
            return
        i = grader.task
        if i is None:
            self.lost(grader, CRASHED, "the grader process answered out of turn")
            return
        sub = self.submissions[i]
        grader.task = None
        self.finish(
            i,
            Result(
                sub.name,
                str(sub.path),
                answer["state"],
                answer.get("report"),
                answer.get("error", ""),
                time.monotonic() - grader.started,
                answer.get("crashed", False),
                answer.get("timed_out", False),
            ),
        )

    def expire(self) -> None:
        now = time.monotonic()
        for grader in list(self.graders):
            if grader.task is not None and now > grader.started + self.limit:
                self.lost(grader, TIMED_OUT, f"grading this file took over the limit of {self.limit:g} s, so it was stopped")
            elif grader.task is None and not grader.ready and now > grader.born + GRADER_START:
                self.lost(grader, CRASHED, "")

    def run(self, todo: list[int]) -> None:
        todo = todo[::-1]  # popped from the end: in the submissions' order
        try:
            while todo or self.busy():
                while todo and len(self.graders) < min(self.jobs, len(todo) + self.busy()):
                    self.start()
                for grader in self.graders:
                    if grader.ready and grader.task is None and todo:
                        i = todo.pop()
                        grader.send(i, str(self.submissions[i].path), self.scopes[i])
                now = time.monotonic()
                waits = [g.started + self.limit - now if g.task is not None else g.born + GRADER_START - now for g in self.graders]
                for key, _ in self.selector.select(max(0.0, min(waits, default=1.0))):
                    if key.data in self.graders:
                        self.read(key.data)
                self.expire()
        finally:
            for grader in list(self.graders):
                self.drop(grader, finish=True)
            self.selector.close()


def grade_all(
    submissions: list[Submission],
    exercise: str,
    seed: int | None = None,
    jobs: int | None = None,
    timeout: float = 10.0,
    memory: int | None = 2 << 30,
    limit: float = DEFAULT_LIMIT,
    progress: Callable[[Result], None] | None = None,
    allow_unconfined: bool = False,
) -> Batch:
    """Grade every submission in `jobs` grader processes; results in the submissions' order.
    `progress` is called with each result as it arrives. Where the candidates' code cannot be
    confined (no Landlock), nothing is graded unless `allow_unconfined`."""
    from attn_kit.grading import pipeline
    from attn_kit.load import catalog

    exercise = catalog.exercise(exercise).id
    pipeline.require(catalog.exercise(exercise))
    require_confinement(allow_unconfined)
    seed = seed if seed is not None else random.SystemRandom().randrange(1, 100_000)
    jobs = max(1, min(jobs or default_jobs(), len(submissions)))
    started = time.monotonic()
    results: list[Result | None] = [None] * len(submissions)

    def finish(i: int, result: Result) -> None:
        results[i] = result
        if progress:
            progress(result)

    todo = []
    for i, sub in enumerate(submissions):
        if sub.path is None:
            finish(i, Result(sub.name, None, MISSING, error=f"no solution file found: {sub.problem}"))
        else:
            todo.append(i)
    import tempfile

    from attn_kit.sandbox.zygote import remove_tree

    # every temporary folder of the run (the graders', their workers') is made in this one, removed
    # at the end whatever happened (a grader killed past --limit cannot remove its own)
    scratch = tempfile.mkdtemp(prefix="attn-kit-grade-")
    os.chmod(scratch, 0o711)
    settings = {"exercise": exercise, "seed": seed, "timeout": timeout, "memory": memory, "confine": TRY if allow_unconfined else REQUIRE}
    settings["tmp"] = scratch
    try:
        _Pool(submissions, settings, jobs, limit, finish).run(todo)
    finally:
        remove_tree(scratch)
    return Batch(exercise, seed, [r for r in results if r is not None], _suite_checks(exercise), time.monotonic() - started, jobs)


if __name__ == "__main__":
    serve()
