"""Grading the candidate's own tests: do they pass on correct code and catch the known bugs?

The candidate's pytest file is run, in sandbox workers, once against every reference
implementation (`solutions/<exercise>/reference_*.py`) and once against every known-bug
implementation (`solutions/<exercise>/bugs/*.py`):

- a test that fails (or errors, hangs, crashes) on any reference is WRONG: it rejects correct code,
  unless it passes on a reference of another return type (lists vs NumPy arrays) and fails only
  on those of the other type: then it is TYPE-SENSITIVE (the report says so and how to compare),
  not wrong, and it counts only against bug implementations of the type it passes on;
- a bug is CAUGHT when some test that is not wrong fails or raises on one of its forms; a test
  that hangs or crashes the process on a bug implementation does not count as catching it;
- score = caught bugs ÷ known bugs of the exercise in the catalogue (`Exercise.bug_ids`).

A bug id with two implementations (`bugs/<id>.py` and `bugs/<id>@<form>.py`) counts as caught when
any of its forms is caught; the report still says which forms each test caught, so a suite that
misses one way of making the mistake is visible.

Each implementation gets a fresh worker forked from one zygote (pytest, NumPy and the exercise's
dependencies are imported before the zygote forks, so a run costs a fork plus pytest's own work).
The candidate's test code never runs in the kit's process: the kit only parses the file (ast).
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import json
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from attn_kit.base import wire
from attn_kit.base.errors import LoadError
from attn_kit.base.paths import bug_files, bug_id_of, reference_files
from attn_kit.base.records import CallStatus, TestOutcome
from attn_kit.load import catalog, preflight
from attn_kit.sandbox import zygote as sandbox_zygote
from attn_kit.sandbox.session import DEFAULT_MEMORY, Sandbox
from attn_kit.sandbox.zygote import make_launcher

DEFAULT_TEST_TIMEOUT = 10.0  # seconds one test may take on a reference implementation
BUG_BUDGET_FLOOR = 2.0  # a test's budget on a bug implementation: at least this ...
BUG_BUDGET_FACTOR = 10.0  # ... or this many times its slowest time on the references
DRIVER = "from attn_kit.runtime.pytest_harness import run_pytest\n"
CONFIG = "[pytest]\n"  # the candidate's ini/pyproject options (addopts...) do not apply
FAILED = (TestOutcome.FAILED, TestOutcome.ERROR)  # outcomes that count as a test detecting something
STOPPED = (TestOutcome.TIMEOUT, TestOutcome.CRASHED, TestOutcome.MEMORY)  # the test stopped the run
BROKEN = FAILED + STOPPED


@dataclass
class TestRun:
    """One test on one implementation."""

    __test__ = False
    outcome: str  # a TestOutcome's string (read from the worker's records, not converted)
    message: str = ""
    where: str = ""  # "my_tests.py:23"
    output: str = ""
    seconds: float = 0.0


@dataclass
class ImplementationRun:
    """The whole test file on one implementation."""

    implementation: str  # "reference_numpy.py", "bugs/causal-off-by-one@one-future.py"
    bug: str | None  # bug id, None for a reference
    form: str  # "" or the part after @
    tests: dict[str, TestRun] = field(default_factory=dict)
    collected: list[str] = field(default_factory=list)
    error: str = ""  # the file could not be collected with this implementation
    seconds: float = 0.0


@dataclass
class WrongTest:
    name: str
    implementation: str  # the reference it failed on
    outcome: str
    message: str
    where: str = ""
    output: str = ""

    def to_json(self) -> dict:
        return {"test": self.name, "reference": self.implementation, "outcome": self.outcome, "message": self.message, "where": self.where}


RETURNS = {"lists": "plain Python lists", "numpy": "NumPy arrays", "torch": "torch tensors"}


@dataclass
class TypeSensitive:
    """A test that passes on references of one return type and fails only on another's."""

    name: str
    fails_on: list[str]
    passes_on: list[str]
    kinds: tuple[str, str]  # (kind it fails on, kind it passes on)
    message: str
    where: str = ""

    @property
    def advice(self) -> str:
        failing, passing = (RETURNS.get(k, k) for k in self.kinds)
        ambiguous = "truth value of an array" in self.message
        why = " (`==` between an array and a list gives an array, whose truth value is ambiguous)" if ambiguous else ""
        return (
            f"fails only on {', '.join(self.fails_on)}, which returns {failing} where "
            f"{', '.join(self.passes_on)} returns {passing}; the statement allows both{why}. Compare "
            f"values, not containers: `np.allclose(result, expected)`, or `list(result)` / "
            f"`np.asarray(result).tolist()` before `==`, and `np.shape(result)` for shapes."
        )

    def to_json(self) -> dict:
        return {"test": self.name, "fails_on": self.fails_on, "passes_on": self.passes_on, "message": self.message, "advice": self.advice}


@dataclass
class BugCoverage:
    id: str
    title: str
    test_idea: str
    forms: dict[str, tuple[str, ...]]  # form ("" = the main one) -> tests that caught it
    notes: tuple[str, ...] = ()  # e.g. "test_x hung on this implementation"

    @property
    def caught(self) -> bool:
        return any(self.forms.values())

    @property
    def caught_by(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for tests in self.forms.values():
            seen.update(dict.fromkeys(tests))
        return tuple(seen)

    @property
    def missed_forms(self) -> tuple[str, ...]:
        return tuple(form for form, tests in self.forms.items() if not tests)

    def to_json(self) -> dict:
        return {
            "bug": self.id,
            "title": self.title,
            "caught": self.caught,
            "tests": list(self.caught_by),
            "forms": {(form or "main"): list(tests) for form, tests in self.forms.items()},
            "test_idea": self.test_idea,
            "notes": list(self.notes),
        }


@dataclass
class TestGrade:
    exercise: str
    path: str
    tests: list[str]  # test names, as collected on the first reference
    wrong: list[WrongTest]
    bugs: list[BugCoverage]  # every catalogue bug of the exercise, in catalogue order
    runs: list[ImplementationRun] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    judged_on: list[str] = field(default_factory=list)  # the references a test must pass on
    type_sensitive: list[TypeSensitive] = field(default_factory=list)

    __test__ = False

    @property
    def wrong_tests(self) -> list[str]:
        return [w.name for w in self.wrong]

    @property
    def caught(self) -> list[str]:
        return [b.id for b in self.bugs if b.caught]

    @property
    def missed(self) -> list[str]:
        return [b.id for b in self.bugs if not b.caught]

    @property
    def score(self) -> float:
        return len(self.caught) / len(self.bugs) if self.bugs else 0.0

    @property
    def ok(self) -> bool:
        """No test is wrong (missed bugs do not make a run fail; see --min-score)."""
        return not self.wrong

    def to_json(self) -> dict:
        return {
            "exercise": self.exercise,
            "path": self.path,
            "tests": self.tests,
            "references": self.judged_on,
            "wrong_tests": self.wrong_tests,
            "wrong": [w.to_json() for w in self.wrong],
            "type_sensitive": [t.to_json() for t in self.type_sensitive],
            "caught": self.caught,
            "missed": self.missed,
            "score": self.score,
            "bugs": [b.to_json() for b in self.bugs],
            "runs": len(self.runs),
            "seconds": round(self.seconds, 3),
            "notes": list(self.notes),
        }


# --- reading the test file (kit side: ast only, nothing is executed) ------------------------------


@dataclass(frozen=True)
class Usage:
    """How a test file reaches the exercise's functions."""

    targets: tuple[str, ...]  # module names to replace with the implementation
    referenced: frozenset  # exercise function names it imports or uses as module.attr
    defined: frozenset  # exercise function names it defines itself
    tests: int  # test functions found statically (before parametrisation)


def _is_candidate_module(name: str, folder: Path) -> bool:
    """`from X import *`: X is the candidate's own module (beside the tests, or nowhere)."""
    top = name.split(".")[0]
    if top in sys.stdlib_module_names:
        return False
    if importlib.machinery.PathFinder.find_spec(top, [str(folder)]) is not None:
        return True
    return importlib.machinery.PathFinder.find_spec(top) is None


def usage(source: preflight.SourceFile, names: tuple[str, ...]) -> Usage:
    wanted = set(names)
    folder = source.path.resolve().parent
    targets: dict[str, None] = {}
    referenced: set[str] = set()
    aliases: dict[str, str] = {}
    for node in ast.walk(source.tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported = {a.name for a in node.names}
            if imported & wanted:
                targets[node.module] = None
                referenced |= imported & wanted
            elif "*" in imported and _is_candidate_module(node.module, folder):
                targets[node.module] = None
        elif isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name] = alias.name
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Attribute) and node.attr in wanted:
            base = ast.unparse(node.value)
            if base in aliases:
                targets[aliases[base]] = None
                referenced.add(node.attr)
    targets.pop(source.path.stem, None)  # the test file itself is never replaced
    return Usage(tuple(targets), frozenset(referenced), frozenset(set(source.defined) & wanted), _count_tests(source.tree))


def _count_tests(tree: ast.Module) -> int:
    """Test functions at the top level and in Test classes, before parametrisation."""
    count = 0
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            count += 1
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            count += sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test") for n in node.body)
    return count


def detect_exercise(source: preflight.SourceFile, override: str | None) -> catalog.Exercise:
    """--exercise, then the `# attn-kit: ID` header, then the exercise functions the file uses."""
    if override or source.header:
        return preflight.detect_exercise(source, override)
    ids = ", ".join(catalog.exercises())
    scored = []
    for exercise in catalog.exercises().values():
        use = usage(source, exercise.function_names)
        names = use.referenced | use.defined
        scored.append((exercise.main in names, len(names), exercise))
    best = max(((m, n) for m, n, _ in scored), default=(False, 0))
    matches = [e for m, n, e in scored if (m, n) == best and n]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise LoadError(
            f"cannot tell which exercise the tests in {source.path} are for: they neither import "
            f"nor define any exercise's functions. Pass --exercise ID or add `# attn-kit: ID` "
            f"as the first line. Exercises: {ids}"
        )
    raise LoadError(
        f"the tests in {source.path} could be for {', '.join(e.id for e in matches)}. Pass "
        f"--exercise ID or add `# attn-kit: ID` as the first line."
    )


# --- running --------------------------------------------------------------------------------------


class _SharedLauncher:
    """One zygote for all the runs: each Sandbox gets a fresh worker, and closing a Sandbox does
    not close the zygote (the caller does, once). A lock makes it usable from the few threads
    that drive runs side by side (each thread only waits on its own worker's pipe; the worker
    is a separate process, killed on timeout like any other)."""

    def __init__(self, inner):
        self.inner = inner
        self.lock = threading.Lock()

    def start(self):
        with self.lock:
            return self.inner.start()

    def kill(self, pid):
        self.inner.kill(pid)

    def status(self, pid, kill: bool = False):
        with self.lock:
            return self.inner.status(pid, kill)

    def close(self):
        pass


def _read_records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            break  # a line cut short by a crash: the rest is lost
        if not _well_formed(record):
            break  # written by the tests themselves (they run in that process)
        records.append(record)
    return records


_RECORD_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "collected": {"names": list},
    "collect_error": {"message": str},
    "start": {"name": str},
    "result": {"name": str, "outcome": str, "message": str, "where": str, "output": str, "seconds": (int, float)},
}


def _apply_records(result: ImplementationRun, records: list[dict]) -> str | None:
    """Add one run's records to `result`; the test that was running when the records end, if any."""
    running = None
    for record in records:
        kind = record["event"]
        if kind == "collected":
            result.collected = result.collected or [wire.visible(n) for n in record["names"]]
        elif kind == "collect_error":
            result.error = result.error or wire.visible(record["message"])
        elif kind == "start":
            running = wire.visible(record["name"])
        elif kind == "result":
            shown = wire.visible  # written by the candidate's process: no terminal codes
            result.tests[shown(record["name"])] = TestRun(
                record["outcome"], shown(record["message"]), shown(record["where"]), shown(record["output"]), record["seconds"]
            )
            running = None
    return running


def _well_formed(record) -> bool:
    """A record as the kit's driver writes it: the fields its event needs, of the right types."""
    if not isinstance(record, dict) or record.get("event") not in _RECORD_FIELDS:
        return False
    fields = _RECORD_FIELDS[record["event"]]
    if not all(isinstance(record.get(name), kind) and type(record.get(name)) is not bool for name, kind in fields.items()):
        return False
    if record["event"] == "result" and record["outcome"] not in tuple(TestOutcome):
        return False
    return record["event"] != "collected" or all(isinstance(n, str) for n in record["names"])


class _Runner:
    def __init__(
        self, test_path: Path, exercise: catalog.Exercise, use: Usage, timeout: float, memory: int | None, workdir: Path, launcher
    ):
        self.test_path = test_path
        self.exercise = exercise
        self.use = use
        self.timeout = timeout
        self.memory = memory
        self.workdir = workdir
        self.launcher = launcher
        self.driver = workdir / "attn_kit_test_driver.py"
        self.driver.write_text(DRIVER, encoding="utf-8")
        self.config = workdir / "pytest.ini"
        self.config.write_text(CONFIG, encoding="utf-8")
        self.search_dirs: list[str] = []
        self.progress: Callable[[], None] | None = None  # called after each implementation has run

    def run(self, implementation: Path, budgets: dict[str, float], skip: set[str], expected: list[str]) -> ImplementationRun:
        """All tests (but `skip`) on one implementation; a run that dies is resumed after the
        test that killed it."""
        try:
            return self._run(implementation, budgets, skip, expected)
        finally:
            if self.progress is not None:
                self.progress()

    def _run(self, implementation: Path, budgets: dict[str, float], skip: set[str], expected: list[str]) -> ImplementationRun:
        label = implementation.name if implementation.parent.name != "bugs" else f"bugs/{implementation.name}"
        is_bug = implementation.parent.name == "bugs"
        form = implementation.stem.split("@", 1)[1] if "@" in implementation.stem else ""
        result = ImplementationRun(label, bug_id_of(implementation) if is_bug else None, form)
        started = time.perf_counter()
        skipped = set(skip)
        for attempt in range(len(expected) + self.use.tests + 2):
            results_path = self.workdir / f"{implementation.stem}-{attempt}.jsonl"
            names = set(result.collected) or set(expected)
            budget_total = sum(budgets.get(n, self.timeout) for n in names - skipped)
            limit = self.timeout + budget_total + 5.0 * (len(names) + 2) + 10.0
            # the tests may read their own folder, the implementation under test and the kit's
            # working folder, and write only in the latter (records, compiled files)
            reads = (str(self.workdir), str(self.test_path.resolve().parent), str(implementation), *self.search_dirs, os.getcwd())
            with Sandbox(str(self.driver), limit, self.memory, launcher=self.launcher, reads=reads, writes=(str(self.workdir),)) as sandbox:
                sandbox.start()
                outcome = sandbox.call(
                    "run_pytest",
                    (
                        str(self.test_path),
                        str(implementation),
                        list(self.use.targets),
                        list(self.exercise.function_names),
                        str(results_path),
                        str(self.config),
                        budgets,
                        self.timeout,
                        sorted(skipped),
                        self.search_dirs,
                        is_bug,
                    ),
                    timeout=limit,
                )
            records = _read_records(results_path)
            running = _apply_records(result, records)
            if outcome.ok:
                if isinstance(outcome.value, int) and outcome.value >= 3 and not result.error and not result.collected:
                    result.error = _internal_error(outcome.value, outcome.output)
                    break
            else:
                how = outcome.detail or outcome.status
                if running is not None:
                    status = (
                        TestOutcome.TIMEOUT
                        if outcome.status == CallStatus.TIMEOUT
                        else TestOutcome.MEMORY
                        if outcome.status == CallStatus.MEMORY
                        else TestOutcome.CRASHED
                    )
                    result.tests[running] = TestRun(
                        status, f"stopped the test run: {how}" if status != TestOutcome.TIMEOUT else f"did not finish ({how})"
                    )
                elif not any(r["event"] == "collected" for r in records):
                    result.error = result.error or f"importing the tests: the process {how}"
                    break
            # resume after a test that stopped the run (a crash, KeyboardInterrupt, pytest.exit)
            done_before = len(skipped & set(result.tests))
            skipped |= set(result.tests)
            if not (set(result.collected) - skipped) or len(result.tests) == done_before:
                break
        result.seconds = time.perf_counter() - started
        return result


def default_jobs() -> int:
    """Runs side by side: half the cores, at most 4 (each run is one process). On a busy 2-core
    machine two side by side were slower than one after the other, so small machines get one."""
    return max(1, min(4, (os.cpu_count() or 1) // 2))


def _internal_error(code: int, output: str) -> str:
    """pytest's INTERNALERROR dump, cut to the exception and the candidate's line."""
    lines = [line.removeprefix("INTERNALERROR> ") for line in output.splitlines() if line.startswith("INTERNALERROR> ")]
    if not lines:
        return f"pytest stopped with exit code {code}: {output.strip()[-600:]}"
    where = [
        line.strip()
        for line in lines
        if line.strip().startswith("File ")
        and "site-packages" not in line
        and "<frozen" not in line
        and "attn_kit" not in line
        and "/kit/" not in line
    ]
    text = f"pytest stopped while collecting the tests: {lines[-1].strip()}"
    return text + (f" ({where[-1]})" if where else "")


def grade_tests(
    path: str | Path,
    exercise_id: str | None = None,
    timeout: float = DEFAULT_TEST_TIMEOUT,
    memory: int | None = DEFAULT_MEMORY,
    jobs: int | None = None,
    solution: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> TestGrade:
    """Run a candidate's tests against the references and every known bug; raise KitError when the
    file cannot be used at all (no such file, syntax error, no tests, no exercise functions).

    `solution` (check --tests) is the candidate's solution file: helpers the tests import from it
    (`from solution import make_inputs`) are found there. `progress`, if given, is told in words
    how many implementations have run (from the pool's threads)."""
    started = time.perf_counter()
    source = preflight.read_source(path)
    exercise = detect_exercise(source, exercise_id)
    use = usage(source, exercise.function_names)
    if not use.targets and not use.defined:
        names = ", ".join(exercise.function_names)
        raise LoadError(
            f"the tests in {source.path} neither import nor define {exercise.id}'s functions "
            f"({names}). Import them, e.g. `from solution import {exercise.main}`, or put the "
            f"tests in your solution file."
        )
    if not use.tests:
        raise LoadError(
            f"{source.path} has no test functions: pytest runs functions whose names start "
            f"with `test` (and methods of classes named `Test...`)."
        )
    from attn_kit.grading import pipeline  # harness_pytest imports pytest: only once tests are to be graded

    pipeline.require(exercise)  # raises DependencyMissing (torch); the checks load after the fork
    # the zygote forks here, before any thread exists and before the checks are imported (a fresh
    # interpreter when this process already holds expected values: check --tests, watch, mock); it
    # imports NumPy, pytest's plugins and the exercise's dependency first, so every worker has them
    # the meta-device warm-up (a second with torch) only for tests that may use `meta` themselves:
    # the kit's implementations never do
    launcher = make_launcher(sandbox_zygote.pytest_modules() + ((exercise.needs,) if exercise.needs else ()), warm="meta" in source.text)
    sandbox_zygote.expected_values_loaded()
    pool = ThreadPoolExecutor(max_workers=jobs or default_jobs())
    try:
        with tempfile.TemporaryDirectory(prefix="attn-kit-tests-") as tmp:
            sandbox_zygote.share_with_worker(tmp)  # the worker writes its records there
            runner = _Runner(source.path.resolve(), exercise, use, timeout, memory, Path(tmp), _SharedLauncher(launcher))
            if solution is not None:
                runner.search_dirs.append(str(Path(solution).resolve().parent))
            if progress is not None:
                runner.progress = _counting(progress, source.path.name, len(reference_files(exercise.id)) + len(bug_files(exercise.id)))
            return _grade(runner, pool, source, exercise, started)
    finally:
        launcher.close()  # first: on Ctrl-C any worker still running dies with the zygote
        pool.shutdown(wait=True, cancel_futures=True)


def _counting(progress: Callable[[str], None], name: str, total: int) -> Callable[[], None]:
    """A callback for each implementation run: tells `progress` how many of `total` are done."""
    done = 0
    lock = threading.Lock()

    def ran() -> None:
        nonlocal done
        with lock:
            done += 1
            progress(f"{name}: your tests ran against {min(done, total)} of {total} implementations")

    return ran


def returns(path: Path) -> str:
    """What an implementation returns: 'torch' (imports torch), 'numpy' (imports NumPy) or 'lists'."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return "lists"
    imported = set()
    for node in ast.walk(tree):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        imported |= {n.split(".")[0] for n in names}
    return "torch" if "torch" in imported else "numpy" if "numpy" in imported else "lists"


@dataclass
class _Judged:
    """The tests as the references judged them."""

    names: list[str]  # the collected tests, in order
    references: list[ImplementationRun]
    own: list[ImplementationRun]  # the references of the tests' own kind (torch or plain)
    kinds: dict[str, str]  # reference file name -> what it returns (see `returns`)
    passed: dict[str, set[str]]  # reference file name -> tests that passed on it
    slowest: dict[str, float]  # test -> its longest time on any reference
    wrong: dict[str, WrongTest]
    sensitive: dict[str, TypeSensitive]

    def counting(self, kind: str) -> list[str]:
        """Tests that may catch a bug implementation returning `kind`: not wrong, and passing on
        every reference of that kind (of its family, when no reference returns that kind)."""
        refs = (
            [r for r in self.references if self.kinds[r.implementation] == kind]
            or [r for r in self.references if _family(self.kinds[r.implementation]) == _family(kind)]
            or self.own
        )
        return [n for n in self.names if n not in self.wrong and all(n in self.passed[r.implementation] for r in refs)]


def _grade(
    runner: _Runner, pool: ThreadPoolExecutor, source: preflight.SourceFile, exercise: catalog.Exercise, started: float
) -> TestGrade:
    """References first; then the known bugs, each with the tests that may count against it.

    Where an exercise has references of both kinds (PyTorch and NumPy), a test is
    judged WRONG on the references of its own kind (a torch test need not accept NumPy arrays),
    and it can only catch a bug implementation of a kind whose references it passes."""
    judged = _judge_on_references(runner, pool, source, exercise)
    notes = _skipped_everywhere(judged)
    bugs = bug_files(exercise.id)
    bug_kinds = {p: returns(p) for p in bugs}
    notes += _not_counted(judged, bug_kinds)
    eligible = {p: judged.counting(bug_kinds[p]) for p in bugs}
    runnable = [p for p in bugs if eligible[p]]
    bug_runs = _run_bugs(runner, pool, judged, runnable, eligible)
    coverage = _coverage(exercise, bug_runs, {run.implementation: eligible[p] for run, p in zip(bug_runs, runnable)})
    return TestGrade(
        exercise.id,
        str(source.path),
        judged.names,
        list(judged.wrong.values()),
        coverage,
        judged.references + bug_runs,
        notes,
        time.perf_counter() - started,
        judged_on=[r.implementation for r in judged.own],
        type_sensitive=list(judged.sensitive.values()),
    )


def _judge_on_references(runner: _Runner, pool: ThreadPoolExecutor, source: preflight.SourceFile, exercise: catalog.Exercise) -> _Judged:
    """Run the tests on every reference; a test that fails on one of its own kind is wrong, and one
    that fails only where the return type differs is type-sensitive."""
    paths = reference_files(exercise.id)
    kinds = {p.name: returns(p) for p in paths}
    test_kind = "torch" if any(name == "torch" for name, _ in source.imports()) else "plain"
    references = list(pool.map(lambda p: runner.run(p, {}, set(), []), paths))
    own = [r for r in references if _family(kinds[r.implementation]) == test_kind] or references
    names = _collected(source, own[0])
    passed: dict[str, set[str]] = {}
    slowest: dict[str, float] = {}
    for run in references:
        passed[run.implementation] = set()
        for name in names:
            test = run.tests.get(name) or TestRun(TestOutcome.ERROR, run.error or "did not run")
            slowest[name] = max(slowest.get(name, 0.0), test.seconds)
            if test.outcome == TestOutcome.PASSED:
                passed[run.implementation].add(name)
    judged = _Judged(names, references, own, kinds, passed, slowest, {}, {})
    for name in names:
        _judge_test(judged, name)
    return judged


def _collected(source: preflight.SourceFile, first: ImplementationRun) -> list[str]:
    """The tests pytest collected on the first reference, or LoadError saying why there are none."""
    if first.error:
        raise LoadError(
            f"the tests in {source.path} could not be collected, even with the correct "
            f"implementation ({first.implementation}):\n{first.error}"
        )
    if not first.collected:
        raise LoadError(f"pytest found no tests in {source.path}: test functions must be named `test_...`.")
    return list(first.collected)


def _judge_test(judged: _Judged, name: str) -> None:
    """Record the test in judged.wrong or judged.sensitive when a reference of its own kind breaks it."""
    kinds, own = judged.kinds, judged.own
    broken = [r for r in own if (r.tests.get(name) or TestRun(TestOutcome.ERROR)).outcome in BROKEN]
    if not broken:
        return
    ok = [r for r in own if name in judged.passed[r.implementation]]
    failing_kinds = {kinds[r.implementation] for r in broken}
    passing_kinds = {kinds[r.implementation] for r in ok}
    if ok and not failing_kinds & passing_kinds:  # fails only where the return type differs
        test = broken[0].tests.get(name) or TestRun(TestOutcome.ERROR)
        judged.sensitive[name] = TypeSensitive(
            name,
            [r.implementation for r in broken],
            [r.implementation for r in ok],
            (kinds[broken[0].implementation], kinds[ok[0].implementation]),
            test.message,
            test.where,
        )
        return
    run = broken[0]
    test = run.tests.get(name) or TestRun(TestOutcome.ERROR, run.error or "did not run")
    judged.wrong[name] = WrongTest(name, run.implementation, test.outcome, test.message, test.where, test.output)


def _skipped_everywhere(judged: _Judged) -> list[str]:
    """A note naming the tests every reference of their kind skipped, which can catch nothing."""
    skipped = [
        n for n in judged.names if all(r.tests.get(n, TestRun(TestOutcome.SKIPPED)).outcome == TestOutcome.SKIPPED for r in judged.own)
    ]
    return [f"skipped on the references, so they catch nothing: {', '.join(skipped)}"] if skipped else []


def _not_counted(judged: _Judged, bug_kinds: dict[Path, str]) -> list[str]:
    """Notes on tests that count against bug implementations of one kind but not another, because
    they fail on the reference returning that other kind."""
    notes = []
    counted = {kind: set(judged.counting(kind)) for kind in set(bug_kinds.values())}
    for kind in sorted(counted):
        lost = [
            n for n in judged.names if n not in judged.wrong and n not in counted[kind] and any(n in tests for tests in counted.values())
        ]
        if lost:
            count = sum(k == kind for k in bug_kinds.values())
            notes.append(
                f"{', '.join(lost)} fail(s) on the reference returning {RETURNS.get(kind, kind)}, so "
                f"{'it is' if len(lost) == 1 else 'they are'} not counted against the {count} known-bug "
                f"implementation{'s' if count != 1 else ''} that return{'s' if count == 1 else ''} them"
            )
    return notes


def _run_bugs(
    runner: _Runner, pool: ThreadPoolExecutor, judged: _Judged, bugs: list[Path], eligible: dict[Path, list[str]]
) -> list[ImplementationRun]:
    """Run each bug implementation's eligible tests, each within a budget from its slowest time on a
    reference (the others are deselected)."""
    names = judged.names
    budgets = {n: min(runner.timeout, max(BUG_BUDGET_FLOOR, BUG_BUDGET_FACTOR * judged.slowest.get(n, 0.0))) for n in names}
    return list(pool.map(lambda p: runner.run(p, budgets, set(names) - set(eligible[p]), eligible[p]), bugs))


def _family(kind: str) -> str:
    return "torch" if kind == "torch" else "plain"


def _coverage(exercise: catalog.Exercise, bug_runs: list[ImplementationRun], eligible: dict[str, list[str]]) -> list[BugCoverage]:
    known = catalog.bugs()
    forms: dict[str, dict[str, tuple[str, ...]]] = {b: {} for b in exercise.bug_ids}
    notes: dict[str, list[str]] = {b: [] for b in exercise.bug_ids}
    for p in bug_files(exercise.id):
        bug = bug_id_of(p)
        if bug in forms:
            forms[bug][p.stem.split("@", 1)[1] if "@" in p.stem else ""] = ()
    for run in bug_runs:
        if run.bug not in forms:
            continue
        label = f" ({run.form} form)" if run.form else ""
        useful = eligible[run.implementation]
        caught = tuple(n for n in useful if run.tests.get(n) and run.tests[n].outcome in FAILED)
        forms[run.bug][run.form] = caught
        for n in useful:
            test = run.tests.get(n)
            if test and test.outcome in STOPPED:
                notes[run.bug].append(
                    f"{n} {'hung' if test.outcome == TestOutcome.TIMEOUT else 'crashed'} on this "
                    f"bug{label}, which does not count as catching it"
                )
        if run.error:
            notes[run.bug].append(f"the test file could not be imported with this bug{label}: {run.error.strip().splitlines()[-1][:200]}")
    return [BugCoverage(b, known[b].title, (exercise.bug(b) or known[b]).test_idea, forms[b], tuple(notes[b])) for b in exercise.bug_ids]
