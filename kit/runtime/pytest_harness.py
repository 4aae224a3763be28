"""Runs a candidate's pytest file INSIDE a sandbox worker, against one implementation.

The kit (practice/testgrade.py) loads a two-line driver file in a worker forked from the zygote and calls
`run_pytest`. Before pytest imports the candidate's tests, the modules they import the exercise's
functions from (`from solution import multi_head_attention`, any module name) are replaced in
`sys.modules` by the implementation under test; after collection, exercise functions the test
file defines itself are rebound to the implementation's. Every test gets a time budget enforced
with SIGALRM (a BaseException subclass is raised in the test; a test that swallows it is stopped
with os._exit after a grace period).

Results are appended to a JSON-lines file as they happen, so a test that crashes or hangs the
process still leaves the records of the tests before it; the kit reads the file whatever
happened. Nothing here knows which implementation is correct.
"""

from __future__ import annotations

import gc
import importlib
import importlib.machinery
import importlib.util
import json
import os
import signal
import sys
import time
import types
from collections.abc import Sequence
from pathlib import Path

import pytest

from attn_kit.base.errors import TestTimedOut
from attn_kit.base.records import TestOutcome

GRACE_SECONDS = 2.0  # after the timeout exception, how long a test may take to give up
OUTPUT_LIMIT = 1500  # characters of a test's captured output kept in its record
MESSAGE_LIMIT = 1200
_IMPLEMENTATION = "_attn_kit_implementation"


def _load_implementation(path: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(_IMPLEMENTATION, path)
    if spec is None or spec.loader is None:  # not for a .py file: it always has a source loader
        raise ImportError(f"{path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[_IMPLEMENTATION] = module
    spec.loader.exec_module(module)
    return module


def _substitute(name: str, implementation: types.ModuleType, search_dirs: list) -> types.ModuleType:
    """A module named `name` holding the implementation's functions. Names it lacks (the
    candidate's own helpers, `from solution import make_inputs`) come from the candidate's real
    module, loaded on first use if one exists beside the tests, the solution or in the current
    folder."""
    module = types.ModuleType(name)
    module.__dict__.update({k: v for k, v in vars(implementation).items() if not k.startswith("__")})
    real: list = []

    def __getattr__(attr):
        if not real:
            real.append(_load_real(name, search_dirs))
        if real[0] is None or attr.startswith("__"):
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        return getattr(real[0], attr)

    module.__dict__["__getattr__"] = __getattr__  # a module-level __getattr__ (PEP 562)
    return module


def _load_real(name: str, search_dirs: list):
    spec = importlib.machinery.PathFinder.find_spec(name.split(".")[0], list(search_dirs))
    if spec is None or spec.origin is None or "." in name:
        return None
    private = f"_attn_kit_candidate_{name}"
    source = importlib.util.spec_from_file_location(private, spec.origin)
    if source is None or source.loader is None:  # an origin no file loader takes
        return None
    module = importlib.util.module_from_spec(source)
    sys.modules[private] = module
    source.loader.exec_module(module)
    return module


def _crash_text(report, test_file: str = "") -> tuple[str, str]:
    """(message, 'file:line') of a failed report, short: the assertion message, not the traceback.
    The line is the last one in the test file, not a line inside the implementation."""
    longrepr = report.longrepr
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        message = crash.message
        where = ""
        entries = getattr(getattr(longrepr, "reprtraceback", None), "reprentries", [])
        for entry in entries:
            location = getattr(entry, "reprfileloc", None)
            if location is not None and test_file and Path(str(location.path)).name == test_file:
                where = f"{test_file}:{location.lineno}"
        if not where and report.location:
            where = f"{Path(report.location[0]).name}:{report.location[1] + 1}"
    elif isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        message, where = str(longrepr[2]), f"{Path(str(longrepr[0])).name}:{longrepr[1]}"
    else:
        text = str(longrepr).strip().splitlines()
        message, where = (text[-1] if text else ""), ""
    if len(message) > MESSAGE_LIMIT:
        message = message[:MESSAGE_LIMIT] + " …"
    return message, where


class Recorder:
    """pytest plugin: per-test outcomes as JSON lines, time budgets, function rebinding."""

    def __init__(self, sink, implementation, functions, budgets: dict, default_budget: float, test_path: str):
        self.sink = sink
        self.implementation = implementation
        self.functions = functions
        self.budgets = budgets
        self.default_budget = default_budget
        self.test_name = Path(test_path).name
        self.current: dict | None = None
        self.timed_out = False
        self.deadline = 0.0
        self.alarms = hasattr(signal, "setitimer")  # not on Windows: the run's timeout still applies
        if self.alarms:
            signal.signal(signal.SIGALRM, self._alarm)

    def write(self, record: dict) -> None:
        self.sink.write(json.dumps(record) + "\n")
        self.sink.flush()

    # --- time budgets ------------------------------------------------------------------------
    def _arm(self, seconds: float) -> None:
        if self.alarms:
            signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))

    def _disarm(self) -> None:
        if self.alarms:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def _alarm(self, signum, frame):
        if not self.timed_out:
            self.timed_out = True
            self._arm(GRACE_SECONDS)
            raise TestTimedOut(f"the test did not finish within its budget of {self.budget:g} s")
        # the test swallowed the first one: record it and stop this process for good
        if self.current is not None:
            self.current.update(
                outcome=TestOutcome.TIMEOUT, message=f"did not finish within {self.budget:g} s (and kept running after it was told to stop)"
            )
            self.write(self.current)
        self.sink.flush()
        os._exit(124)

    @property
    def budget(self) -> float:
        name = self.current["name"] if self.current else ""
        return self.budgets.get(name, self.default_budget)

    # --- collection ----------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector):
        self.timed_out = False
        self._arm(self.default_budget)
        try:
            return (yield)
        finally:
            self._disarm()

    def pytest_collectreport(self, report):
        if report.failed:
            message, where = _crash_text(report, self.test_name)
            text = report.longreprtext.strip()
            if self.timed_out:
                text = (
                    f"importing {self.test_name} did not finish within {self.default_budget:g} s: is there "
                    f"a loop or a long computation at the top level of the file? ({where})"
                )
            self.write({"event": "collect_error", "where": where, "message": (text[-MESSAGE_LIMIT:] if text else message)})

    def pytest_internalerror(self, excrepr, excinfo):
        """E.g. sys.exit() at the top level of the test file: pytest gives up with INTERNALERROR."""
        frames = [e for e in excinfo.traceback if Path(str(e.path)).name == self.test_name]
        where = f"{self.test_name}:{frames[-1].lineno + 1}" if frames else ""
        self.write(
            {
                "event": "collect_error",
                "where": where,
                "message": f"pytest stopped: {excinfo.exconly()}" + (f" at {where}" if where else ""),
            }
        )

    def pytest_collection_finish(self, session):
        modules = {}
        for item in session.items:
            module = item.getparent(pytest.Module)
            if module is not None:
                modules[id(module.obj)] = module.obj
        for module in modules.values():
            for name in self.functions:
                if name in vars(module) and hasattr(self.implementation, name):
                    setattr(module, name, getattr(self.implementation, name))
        self.write({"event": "collected", "names": [_name(i.nodeid) for i in session.items]})

    # --- running ---------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.current = {
            "event": "result",
            "name": _name(item.nodeid),
            "outcome": TestOutcome.PASSED,
            "message": "",
            "where": "",
            "output": "",
            "seconds": 0.0,
        }
        self.timed_out = False
        self.deadline = time.monotonic() + self.budget
        self.write({"event": "start", "name": self.current["name"]})
        try:
            return (yield)
        except BaseException as exc:  # KeyboardInterrupt or pytest.exit() ends the session
            if self.current["outcome"] == TestOutcome.PASSED:
                self.current.update(
                    outcome=TestOutcome.ERROR,
                    message=f"{type(exc).__name__}: {exc} (this stops pytest itself; the kit resumed with the next test)",
                )
            raise
        finally:
            self._disarm()
            self.write(self.current)
            self.current = None

    def _phase(self):
        """Arm the alarm for one phase: what is left of the test's budget, or only the grace
        period for a teardown after a timeout."""
        left = GRACE_SECONDS if self.timed_out else self.deadline - time.monotonic()
        self._arm(left)
        try:
            return (yield)
        finally:
            self._disarm()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item):
        return (yield from self._phase())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        return (yield from self._phase())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        return (yield from self._phase())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        """The failing line in the test file, from the exception's own traceback (whatever the
        traceback style pytest formats the report with)."""
        report = yield
        if call.excinfo is not None:
            lines = [e.lineno + 1 for e in call.excinfo.traceback if Path(str(e.path)).name == self.test_name]
            if lines:
                report.user_properties.append(("attn_kit_where", f"{self.test_name}:{lines[-1]}"))
        return report

    def pytest_runtest_logreport(self, report):
        record = self.current
        if record is None:
            return
        record["seconds"] += report.duration
        output = (report.capstdout + report.capstderr).strip()
        if output and not record["output"]:
            record["output"] = output[:OUTPUT_LIMIT] + (" …" if len(output) > OUTPUT_LIMIT else "")
        if record["outcome"] != TestOutcome.PASSED:
            return  # keep the first problem
        if report.failed:
            message, where = _crash_text(report, self.test_name)
            where = dict(report.user_properties).get("attn_kit_where", where)
            if self.timed_out:
                record.update(outcome=TestOutcome.TIMEOUT, where=where, message=f"did not finish within {self.budget:g} s")
            else:
                record.update(outcome=TestOutcome.FAILED if report.when == "call" else TestOutcome.ERROR, message=message, where=where)
        elif report.skipped:
            message, where = _crash_text(report)
            record.update(outcome=TestOutcome.SKIPPED, message=message, where=where)


def _name(nodeid: str) -> str:
    """'my_tests.py::TestA::test_b[2]' -> 'TestA::test_b[2]'."""
    return nodeid.split("::", 1)[1] if "::" in nodeid else nodeid


def run_pytest(
    test_path: str,
    implementation_path: str,
    targets: list,
    functions: list,
    results_path: str,
    config_path: str,
    budgets: dict,
    default_budget: float,
    deselect: list,
    search_dirs: Sequence[str] = (),
    known_bug: bool = False,
) -> int:
    """Run the tests in test_path against the implementation; return pytest's exit code.

    On a known-bug implementation (`known_bug`) failures are the expected outcome and their text is
    never shown, so pytest formats them natively (--tb=native) instead of reading the source of every
    traceback entry: measured, a run on one bug file 0.13 → 0.11 s of CPU. The failing line is read
    from the exception itself either way (Recorder.pytest_runtest_makereport)."""
    # compiled files (the candidate's tests with pytest's assertion rewriting, its helpers) go to a
    # folder of this grading's, beside the records, never beside the candidate's files: the runs
    # against the other implementations read them instead of rewriting and compiling again
    sys.pycache_prefix = str(Path(results_path).parent / "pycache")
    sys.dont_write_bytecode = False
    gc.freeze()  # pytest's gc.collect() calls then skip what the kit left
    os.environ.pop("PYTEST_ADDOPTS", None)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    test_dir = str(Path(test_path).resolve().parent)
    implementation = _load_implementation(implementation_path)
    implementation.__doc__ = None
    for name in targets:
        sys.modules[name] = _substitute(name, implementation, [test_dir, *search_dirs, os.getcwd()])
    args = [
        test_path,
        "-c",
        config_path,
        "--rootdir",
        test_dir,
        "--confcutdir",
        test_dir,
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:stepwise",
        "--tb=native" if known_bug else "--tb=short",
        "-o",
        "console_output_style=classic",
    ]
    for name in deselect:
        args += ["--deselect", f"{Path(test_path).name}::{name}"]
    with open(results_path, "a", encoding="utf-8") as sink:
        recorder = Recorder(sink, implementation, list(functions), dict(budgets), default_budget, test_path)
        code = pytest.main(args, plugins=[recorder])
    return int(code)
