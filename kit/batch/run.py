"""`attn-kit grade`: a folder of submissions, each graded exactly as `attn-kit check` grades it.

How a submission's file is found (files, folders, zip archives, Gradescope's export) is
batch/discover.py's business; `find_submissions` is re-exported here.

Process model: the kit starts `jobs` grader processes (`python -m attn_kit.batch.run`), each a fresh
interpreter in a session of its own that grades one submission after another with grading.grade, so
each keeps one warm zygote for the whole run. The first grader starts before the submissions are
found (`graders`), and each warms up (its zygote, the suite, the oracle, the bug files) before it
says it is ready, beside whatever the kit does meanwhile. They are the kit's own processes: the
candidate's code runs in their sandboxed workers, never in them. Each grader answers one JSON line
per submission on a pipe (nothing is unpickled). A submission that outlives its time limit costs
its grader: the kit kills that grader (its zygote and workers die with it: PR_SET_PDEATHSIG) and
starts another, so one hostile file costs that file only. At the end every grader is told at once
and they end together while the kit writes its outputs.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from attn_kit.base import text
from attn_kit.base.errors import KitError, UsageError
from attn_kit.batch.discover import Submission, find_submissions

__all__ = ["Batch", "Pool", "Result", "Submission", "find_submissions", "grade_all", "graders"]

REQUIRE, TRY = "require", "try"  # sandbox.confinement's policies: run nothing unconfined, or say so

GRADED, UNLOADABLE, TIMED_OUT, CRASHED, MISSING = "graded", "unloadable", "timed out", "crashed", "missing"
DEFAULT_LIMIT = 120.0  # seconds one submission may take in all (every call, load and diagnosis)
GRADER_START = 120.0  # seconds a new grader process may take to say it is ready


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
    picked: str = ""  # which file was graded and why
    check_seconds: dict[str, float] = field(default_factory=dict)  # check id -> seconds it took

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
        raw = text.raw_bytes(self.path or "")
        return {
            "name": self.name,
            "path": self.path,
            "path_bytes": raw.hex() if raw is not None else None,
            "picked": self.picked,
            "check_seconds": {k: round(v, 3) for k, v in self.check_seconds.items()},
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
            Result(
                s["name"],
                bytes.fromhex(s["path_bytes"]).decode("utf-8", "surrogateescape") if s.get("path_bytes") else s["path"],
                s["state"],
                s["report"],
                s["error"] or "",
                s["seconds"],
                s["crashed"],
                s["timed_out"],
                s.get("picked", ""),
                s.get("check_seconds", {}),
            )
            for s in data["submissions"]
        ]
        return cls(data["exercise"], data["seed"], results, data["checks"], data["seconds"], data["jobs"])


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
        "check_seconds": {r.id: r.seconds for r in report.results},
        "crashed": bool(statuses & {CallStatus.CRASHED, CallStatus.MEMORY}),
        "timed_out": CallStatus.TIMEOUT in statuses,
    }


def warm_up(exercise: str) -> list[dict]:
    """In a grader, before its first submission: start the zygote (forked now, while this process
    holds no expected value) and load what every grading loads (the suite, the oracle, the bug
    files), so the first submission costs what the others cost and this runs beside the kit's own
    start (it finds the submissions meanwhile). The suite's checks, for the kit's outputs."""
    from attn_kit.diagnosis import diagnose
    from attn_kit.grading import pipeline
    from attn_kit.load import catalog
    from attn_kit.sandbox import zygote

    ex = catalog.exercise(exercise)
    pipeline.require(ex)
    zygote.shared_launcher((ex.needs,) if ex.needs else ())  # the key pipeline.grade's Sandbox asks for
    zygote.expected_values_loaded()
    diagnose.oracle_for(ex)
    diagnose.preload(ex)
    return _suite_checks(ex.id)


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
    try:
        checks = warm_up(settings["exercise"])
    except Exception:  # noqa: BLE001 - each submission's grading reports what went wrong, in its own result
        checks = []
    out.write(json.dumps({"ready": True, "checks": checks}) + "\n")
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
    # stdin closed: the run is over. The zygote goes (it removes its workers' folders), then the
    # process ends at once, without tearing its modules down: the kit waits for this
    from attn_kit.sandbox import zygote

    zygote.close_shared()
    out.close()
    os._exit(0)


class _Grader:
    def __init__(self, settings: dict):
        env = {**os.environ, "TMPDIR": settings["tmp"]} if settings.get("tmp") else None
        # a session of its own: the terminal's Ctrl-C reaches the kit, which stops it; and where the
        # kernel groups CPU time by session (autogroup), each grader gets its own share
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "attn_kit.batch.run"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            start_new_session=True,
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

    def close_input(self) -> None:
        """The end of the run for an idle grader: it removes its zygote and ends on its own."""
        try:
            self.stdin.close()
        except OSError:
            pass

    def finish(self, deadline: float) -> None:
        """Wait until `deadline` for a grader whose input was closed to end, then kill it."""
        try:
            self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
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


def _seconds(value: object) -> dict[str, float]:
    """A grader's per-check times, kept only where they are what they claim (finite, >= 0)."""
    if not isinstance(value, dict):
        return {}
    return {k: float(v) for k, v in value.items() if isinstance(k, str) and isinstance(v, (int, float)) and 0 <= v < float("inf")}


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


def exercise_id(exercise: str) -> str:
    """The exercise's id as the catalogue spells it; UsageError naming the ids when there is none."""
    from attn_kit.load import catalog

    return catalog.exercise(exercise).id


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


class Pool:
    """The grader processes of one run: hands out submissions, reads answers, enforces limits.

    Made by `graders` before the submissions are known: its first grader starts (and warms up)
    while the kit finds them; `run` starts the others as the submissions need them."""

    def __init__(self, settings: dict, limit: float):
        self.settings, self.limit = settings, limit
        self.submissions: list[Submission] = []
        self.jobs = 1
        self.finish: Callable[[int, Result], None] = lambda i, result: None
        self.begin: Callable[[str], None] | None = None  # called with a submission's name when a grader starts on it
        self.graders: list[_Grader] = []
        self.scopes: list[str] = []
        self.selector = selectors.DefaultSelector()
        self.failed_starts = 0
        self.checks: list[dict] = []  # the suite's checks, as the first grader to warm up gave them

    def start(self) -> None:
        grader = _Grader(self.settings)
        self.graders.append(grader)
        self.selector.register(grader.stdout, selectors.EVENT_READ, grader)

    def drop(self, grader: _Grader) -> None:
        self.selector.unregister(grader.stdout)
        self.graders.remove(grader)
        grader.kill()

    def close(self) -> None:
        """Every grader goes: idle ones are told the run is over and end together (each removes its
        zygote), within 5 s; busy ones, and ones still warming up (a run with nothing to grade), are
        killed (their zygotes die with them; the run's folder is removed after)."""
        deadline = time.monotonic() + 5.0
        for grader in self.graders:
            if grader.task is None and grader.ready:
                grader.close_input()
            else:
                grader.kill()
        for grader in self.graders:
            grader.finish(deadline)
        self.graders.clear()
        self.selector.close()

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
                    picked=sub.picked,
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
            if not self.checks and isinstance(answer.get("checks"), list):
                self.checks = answer["checks"]
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
                sub.picked,
                _seconds(answer.get("check_seconds")),
            ),
        )

    def expire(self) -> None:
        now = time.monotonic()
        for grader in list(self.graders):
            if grader.task is not None and now > grader.started + self.limit:
                self.lost(grader, TIMED_OUT, f"grading this file took over the limit of {self.limit:g} s, so it was stopped")
            elif grader.task is None and not grader.ready and now > grader.born + GRADER_START:
                self.lost(grader, CRASHED, "")

    def run(
        self,
        submissions: list[Submission],
        todo: list[int],
        jobs: int,
        finish: Callable[[int, Result], None],
        begin: Callable[[str], None] | None = None,
    ) -> None:
        """Grade submissions[i] for every i in `todo`, in `jobs` graders at most; `finish(i, result)`
        as each ends. Graders beyond what is left are closed as soon as they are idle."""
        self.submissions, self.scopes, self.jobs, self.finish, self.begin = submissions, scopes(submissions), jobs, finish, begin
        todo = todo[::-1]  # popped from the end: in the submissions' order
        while todo or self.busy():
            while todo and len(self.graders) < min(self.jobs, len(todo) + self.busy()):
                self.start()
            for grader in self.graders:
                if grader.ready and grader.task is None and todo:
                    i = todo.pop()
                    grader.send(i, str(self.submissions[i].path), self.scopes[i])
                    if self.begin:
                        self.begin(self.submissions[i].name)
            now = time.monotonic()
            waits = [g.started + self.limit - now if g.task is not None else g.born + GRADER_START - now for g in self.graders]
            for key, _ in self.selector.select(max(0.0, min(waits, default=1.0))):
                if key.data in self.graders:
                    self.read(key.data)
            self.expire()
        for grader in self.graders:  # all idle: they end while the kit writes its outputs
            grader.close_input()


@contextlib.contextmanager
def graders(
    exercise: str,
    seed: int,
    timeout: float = 10.0,
    memory: int | None = 2 << 30,
    limit: float = DEFAULT_LIMIT,
    allow_unconfined: bool = False,
) -> Iterator[Pool]:
    """A run's grader processes, the first one started now (it warms up while the kit goes on,
    finding the submissions, say); pass it to `grade_all`. Every temporary folder of the run (the
    graders', their workers') is made in one folder, removed at the end whatever happened (a
    grader killed past --limit cannot remove its own), and every grader is gone by then."""
    from attn_kit.sandbox.zygote import remove_tree

    scratch = tempfile.mkdtemp(prefix="attn-kit-grade-")
    os.chmod(scratch, 0o711)
    settings = {"exercise": exercise, "seed": seed, "timeout": timeout, "memory": memory, "confine": TRY if allow_unconfined else REQUIRE}
    settings["tmp"] = scratch
    pool = Pool(settings, limit)
    try:
        pool.start()
        yield pool
    finally:
        try:
            pool.close()
        finally:
            remove_tree(scratch)


def grade_all(
    submissions: list[Submission],
    exercise: str,
    seed: int | None = None,
    jobs: int | None = None,
    timeout: float = 10.0,
    memory: int | None = 2 << 30,
    limit: float = DEFAULT_LIMIT,
    progress: Callable[[Result], None] | None = None,
    started: Callable[[str], None] | None = None,
    allow_unconfined: bool = False,
    pool: Pool | None = None,
) -> Batch:
    """Grade every submission in `jobs` grader processes; results in the submissions' order.
    `progress` is called with each result as it arrives, `started` with a submission's name when a
    grader starts on it (so a progress line can name what is running, not what last finished).
    Where the candidates' code cannot be confined (no Landlock), nothing is graded unless
    `allow_unconfined`. `pool`: graders started early (`graders`), with this exercise and seed."""
    from attn_kit.grading import pipeline
    from attn_kit.load import catalog

    exercise = catalog.exercise(exercise).id
    pipeline.require(catalog.exercise(exercise))
    require_confinement(allow_unconfined)
    if pool is None:
        seed = seed if seed is not None else random.SystemRandom().randrange(1, 100_000)
        with graders(exercise, seed, timeout, memory, limit, allow_unconfined) as made:
            return grade_all(submissions, exercise, seed, jobs, timeout, memory, limit, progress, started, allow_unconfined, made)
    if (pool.settings["exercise"], pool.settings["seed"]) != (exercise, seed if seed is not None else pool.settings["seed"]):
        raise ValueError("grade_all: the pool's graders were started for another exercise or seed")
    seed = pool.settings["seed"]
    jobs = max(1, min(jobs or default_jobs(), len(submissions)))
    began = time.monotonic()
    results: list[Result | None] = [None] * len(submissions)

    def finish(i: int, result: Result) -> None:
        results[i] = result
        if progress:
            progress(result)

    todo = []
    for i, sub in enumerate(submissions):
        if sub.path is None:
            finish(i, Result(sub.name, None, MISSING, error=f"no solution file found: {sub.problem}", picked=sub.problem))
        else:
            todo.append(i)
    pool.run(submissions, todo, jobs, finish, started)
    checks = pool.checks or _suite_checks(exercise)
    return Batch(exercise, seed, [r for r in results if r is not None], checks, time.monotonic() - began, jobs)


if __name__ == "__main__":
    serve()
