"""Where one `attn-kit check FILE --json` spends its time, phase by phase (issue 36's start-up).

    python benchmarks/check_phases.py                 # the mha-screen NumPy reference, 9 runs
    python benchmarks/check_phases.py --runs 21 FILE
    sudo chrt -f 1 python benchmarks/check_phases.py  # a busy machine: the cores as if idle

Each run is a fresh interpreter running the CLI with a few of the kit's functions wrapped, so
that it notes when it passes them; prints the median wall milliseconds of each phase of the
kit's own process and its CPU milliseconds over the same span. `start` is the interpreter's
start up to the CLI module; `imports` up to the zygote's fork (click, the CLI, NumPy); `fork to
grade` the catalogue, the pipeline and the file's pre-flight, while the zygote sets up beside it;
`oracle` the checks, the oracle and the bug files; `worker` the wait for the worker to load the
file; `checks` the suite; `close` the worker's end, `exit` the zygote's. Run it with an installed
kit (not an editable one) and from a folder without stray math.py or numpy.py, as the
check-startup row of benchmarks/run.py is.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

# Runs in the measured interpreter: marks (wall ms since its start, CPU ms) at each wrapped
# function's entry and exit, then runs the CLI and prints the marks to stderr at its exit.
TRACER = r"""
import importlib.abc, importlib.machinery, json, os, sys, time
START = time.perf_counter() - (time.clock_gettime(time.CLOCK_MONOTONIC) - float(os.environ["PHASES_T0"]))
MARKS = []
def mark(what):
    MARKS.append((what, (time.perf_counter() - START) * 1e3, time.process_time() * 1e3))
WRAP = {
    "attn_kit.sandbox.zygote": ["_Zygote.__init__", "close_shared"],
    "attn_kit.grading.pipeline": ["grade", "_run_checks", "suite_for"],
    "attn_kit.sandbox.session": ["Sandbox.start", "Sandbox.close"],
}
def wrap(module, dotted):
    owner, name = module, dotted
    if "." in dotted:
        owner, name = getattr(module, dotted.split(".")[0]), dotted.split(".")[1]
    function = getattr(owner, name)
    def wrapped(*args, **kwargs):
        mark("> " + dotted)
        try:
            return function(*args, **kwargs)
        finally:
            mark("< " + dotted)
    setattr(owner, name, wrapped)
class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in WRAP:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            for dotted in WRAP[name]:
                wrap(module, dotted)
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, Finder())
PID = os.getpid()
mark("cli")
from attn_kit.cli import app
ends = app._exit_now
def exit_now(code):
    import atexit
    atexit._run_exitfuncs()
    if os.getpid() == PID:
        mark("exit")
        sys.stderr.write("PHASES " + json.dumps(MARKS) + "\n")
    ends(code)
app._exit_now = exit_now
sys.argv = ["attn-kit", *sys.argv[1:]]
app.main()
"""

PHASES = (  # name, from mark, to mark
    ("start", None, "cli"),
    ("imports", "cli", "< _Zygote.__init__"),
    ("fork to grade", "< _Zygote.__init__", "> suite_for"),
    ("oracle", "> suite_for", "> Sandbox.start"),
    ("worker", "> Sandbox.start", "< Sandbox.start"),
    ("checks", "> _run_checks", "< _run_checks"),
    ("close", "> Sandbox.close", "< Sandbox.close"),
    ("exit", "> close_shared", "exit"),
    ("total", None, "exit"),
)


def one_run(path: Path) -> dict[str, tuple[float, float]]:
    import time

    env = dict(os.environ, NO_COLOR="1", PHASES_T0=repr(time.clock_gettime(time.CLOCK_MONOTONIC)))
    proc = subprocess.run(
        [sys.executable, "-c", TRACER, "check", str(path), "--json", "--seed", "1"], capture_output=True, text=True, env=env
    )
    line = next((x for x in proc.stderr.splitlines() if x.startswith("PHASES ")), None)
    if line is None:
        raise SystemExit(f"the run printed no phases (exit {proc.returncode}): {proc.stderr[-500:]}")
    marks: dict[str, tuple[float, float]] = {}
    for what, wall, cpu in json.loads(line[len("PHASES ") :]):
        marks.setdefault(what, (wall, cpu))  # the first time each is passed
    spans = {}
    for name, begin, end in PHASES:
        if end in marks and (begin is None or begin in marks):
            a = marks[begin] if begin else (0.0, 0.0)
            spans[name] = (marks[end][0] - a[0], marks[end][1] - a[1])
    return spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    from attn_kit.base.paths import solutions_dir

    path = args.file or solutions_dir("mha-screen") / "reference_numpy.py"
    one_run(path)  # warm-up: bytecode and the page cache
    runs = [one_run(path) for _ in range(args.runs)]
    print(f"`attn-kit check {path.name} --json`, {args.runs} runs, medians; load average {os.getloadavg()[0]:.1f}")
    print(f"{'phase':14} {'wall ms':>8} {'CPU ms':>8}")
    for name, _, _ in PHASES:
        spans = [r[name] for r in runs if name in r]
        if spans:
            print(f"{name:14} {statistics.median(w for w, _ in spans):8.1f} {statistics.median(c for _, c in spans):8.1f}")


if __name__ == "__main__":
    main()
