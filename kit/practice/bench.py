"""`attn-kit bench`: how the candidate's code grows in time and memory with the sequence length T.

The solution runs in the sandbox (never in the kit's process) over a ladder of sequence lengths.
Per size: several untraced runs (attn_kit.runtime.bench_harness:timed_cpu, wall and CPU time) give the
median time, and one separate run under tracemalloc (attn_kit.base.harness:measure_quiet) gives the
peak extra memory: tracemalloc slows Python code, so time and memory never come from the same
run. A log-log least-squares fit (numpy.polyfit) over the largest sizes reached turns the ladder
into growth exponents, shown next to what the exercise should show. The time fit uses CPU time,
which other programs on a busy laptop disturb far less than wall time (the CLI also asks BLAS for
one thread, for the same reason).

An exercise's workload is data plus one small function, both kept with the exercise: the
`[bench]` table of its TOML (which function to call, the fixed dimensions, the ladder, the
exponents to expect with the reason for each) and the input builder its checks module registers
with `@SUITE.for_bench`. This module names no exercise. The harnesses that run inside the
candidate's worker live in runtime/bench_harness.py, which imports nothing from here. The ladder starts
small (free for NumPy code, affordable for plain lists) and stops early, with a note, when the
next size would overrun the time budget (predicted from the sizes measured so far), so a
pure-lists solution still gets an answer within the budget.

Nothing here prints: cli/bench.py renders the BenchResult with render/bench.py.
"""

from __future__ import annotations

import difflib
import importlib.util
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from attn_kit.base.errors import BenchError, DependencyMissing, ForgedReading, UsageError
from attn_kit.base.harness import DEFAULT_RUNS, MAX_RUNS, MIN_TIMED_SECONDS
from attn_kit.base.records import Outcome
from attn_kit.checks.cases import lists
from attn_kit.grading import pipeline
from attn_kit.load import catalog, preflight
from attn_kit.load.catalog import Expectation
from attn_kit.sandbox.session import DEFAULT_MEMORY, Sandbox

TIME_HARNESS = "attn_kit.runtime.bench_harness:timed_cpu"  # attn_kit.base.harness:timed plus CPU time
MEMORY_HARNESS = "attn_kit.base.harness:measure_quiet"
RSS_HARNESS = "attn_kit.runtime.bench_harness:measure_rss"  # for files that import torch
DECODE_HARNESS = "attn_kit.runtime.bench_harness:decode_steps"  # fills a cache, then times and traces one step
DEFAULT_REPEATS = DEFAULT_RUNS
MAX_REPEATS = MAX_RUNS  # cheap sizes are repeated until MIN_TIMED_SECONDS of runs, at most this
DEFAULT_BUDGET = 20.0
TOLERANCE = 0.35  # |fitted - expected| within this reads "as expected"
FIT_POINTS = 5  # the fit uses the largest sizes measured: fixed costs blur the small ones
SEED = 20240607  # inputs are random but fixed: bench measures cost, not correctness


# --- workloads: an exercise's [bench] table plus the input builder its suite registers ------------


@dataclass(frozen=True)
class Workload:
    """What bench runs for one exercise: its [bench] table (catalog.Bench) and its inputs'
    builder (`@SUITE.for_bench` in the exercise's checks module)."""

    exercise: str
    spec: catalog.Bench
    build: Callable  # (rng, T, **dims) -> (args, kwargs) of NumPy inputs

    @property
    def function(self) -> str:
        return self.spec.function

    @property
    def dims(self) -> dict[str, int]:
        return self.spec.dimensions

    @property
    def setting(self) -> str:
        return self.spec.setting_text

    @property
    def unit(self) -> str:
        return self.spec.unit

    @property
    def sizes(self) -> tuple[int, ...]:
        return self.spec.sizes

    @property
    def time(self) -> Expectation:
        return self.spec.time

    @property
    def memory(self) -> Expectation:
        return self.spec.memory

    @property
    def contrast(self) -> str:
        return self.spec.contrast

    @property
    def time_harness(self) -> str:
        return DECODE_HARNESS if self.spec.harness == "decode-steps" else TIME_HARNESS

    @property
    def repeats_inside(self) -> bool:
        """The time harness takes runs=N and repeats by itself (filling a cache costs T steps)."""
        return self.spec.harness == "decode-steps"

    @property
    def memory_harness(self) -> str:
        """ "" when the time harness also reports peak_bytes."""
        return "" if self.spec.harness == "decode-steps" else MEMORY_HARNESS

    def inputs(self, rng, T: int):
        """(args, kwargs) of NumPy inputs at length T."""
        return self.build(rng, **{self.spec.size: T}, **self.dims)


def workload_for(exercise: catalog.Exercise) -> Workload:
    """The exercise's workload; UsageError when it has none (`attn-kit dev check` reports that too)."""
    if exercise.bench is None:
        raise UsageError(f"`attn-kit bench` has no workload for {exercise.id}: prompts/exercises/{exercise.id}.toml has no [bench] table.")
    build = pipeline.suite_for(exercise).bench_inputs
    if build is None:
        raise UsageError(
            f"`attn-kit bench` has no workload for {exercise.id}: checks/{exercise.checks}.py "
            "registers no input builder (@SUITE.for_bench)."
        )
    return Workload(exercise.id, exercise.bench, build)


# --- results -----------------------------------------------------------------------------------


@dataclass
class SizeResult:
    T: int
    time_s: float  # median wall time of the timed runs
    cpu_s: float  # median CPU time of the same runs: what the fit uses
    times: list[float]  # every timed run's wall time
    peak_bytes: int  # peak extra memory of one traced run
    wall_s: float  # what measuring this size cost, all runs and overheads included


@dataclass
class Verdict:
    expected: float
    fitted: float | None
    status: str  # "as expected" | "higher" | "lower" | "unknown"
    why: str  # the reason for the expected exponent
    advice: str = ""  # what a mismatch usually means

    def to_json(self) -> dict:
        return {"expected": self.expected, "fitted": self.fitted, "status": self.status, "why": self.why, "advice": self.advice}


@dataclass
class BenchResult:
    exercise: str
    path: str
    function: str
    inputs: str  # "lists" or "numpy"
    setting: str
    unit: str
    repeats: int
    budget_s: float
    sizes: list[SizeResult] = field(default_factory=list)
    time: Verdict | None = None
    memory: Verdict | None = None
    memory_method: str = "tracemalloc"  # or "rss": peak resident memory (files that import torch)
    stopped: str = ""  # why the ladder ended before its last size
    failure: str = ""  # the code raised or crashed at some size (exit status 1)
    notes: list[str] = field(default_factory=list)
    contrast: str = ""
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failure

    def to_json(self) -> dict:
        return {
            "exercise": self.exercise,
            "path": self.path,
            "function": self.function,
            "inputs": self.inputs,
            "setting": self.setting,
            "unit": self.unit,
            "sizes": [s.T for s in self.sizes],
            "fit_sizes": fit_sizes(s.T for s in self.sizes),
            "time_s": [s.time_s for s in self.sizes],
            "cpu_s": [s.cpu_s for s in self.sizes],
            "peak_bytes": [s.peak_bytes for s in self.sizes],
            "fit_on": "cpu_s",
            "memory_method": self.memory_method,
            "time_exponent": self.time.fitted if self.time else None,
            "memory_exponent": self.memory.fitted if self.memory else None,
            "expected": {"time": self.time.to_json() if self.time else None, "memory": self.memory.to_json() if self.memory else None},
            "repeats": self.repeats,
            "budget_s": self.budget_s,
            "elapsed_s": round(self.elapsed_s, 3),
            "stopped": self.stopped or None,
            "failure": self.failure or None,
            "notes": self.notes,
            "contrast": self.contrast or None,
        }


@dataclass(frozen=True)
class Options:
    exercise: str | None = None
    sizes: tuple[int, ...] | None = None
    repeats: int = DEFAULT_REPEATS
    budget: float = DEFAULT_BUDGET
    memory: int | None = DEFAULT_MEMORY


# --- fitting -----------------------------------------------------------------------------------


def fit_sizes(sizes) -> list[int]:
    """The sizes the fit uses: the largest FIT_POINTS measured.

    At small T, work that does not depend on T (or grows only linearly, like the projections)
    hides the T×T part; the growth rate an interviewer asks about is the one at large T.
    """
    return list(sizes)[-FIT_POINTS:]


def fit_exponent(sizes, values) -> float | None:
    """Slope of log(value) against log(T) by least squares over the largest sizes; None if < 2 sizes."""
    sizes, values = fit_sizes(sizes), list(values)[-FIT_POINTS:]
    if len(sizes) < 2 or len(set(sizes)) < 2 or not all(math.isfinite(v) for v in values):
        return None  # a reading that is NaN or infinite (the code's own clock) fits nothing
    x = np.log(np.asarray(sizes, dtype=np.float64))
    y = np.log(np.maximum(np.asarray(values, dtype=np.float64), 1e-12))
    return float(np.polyfit(x, y, 1)[0])


def verdict(fitted: float | None, expectation: Expectation) -> Verdict:
    if fitted is None:
        return Verdict(expectation.exponent, None, "unknown", expectation.why)
    gap = fitted - expectation.exponent
    if abs(gap) <= TOLERANCE:
        return Verdict(expectation.exponent, round(fitted, 3), "as expected", expectation.why)
    status, advice = ("higher", expectation.if_higher) if gap > 0 else ("lower", expectation.if_lower)
    return Verdict(expectation.exponent, round(fitted, 3), status, expectation.why, advice)


def predict(sizes: list[SizeResult], next_T: int, fallback_exponent: float) -> float:
    """Seconds that measuring next_T will cost, from the last measured sizes' wall times."""
    last = sizes[-1]
    if len(sizes) >= 2:
        prev = sizes[-2]
        slope = math.log(max(last.wall_s, 1e-6) / max(prev.wall_s, 1e-6)) / math.log(last.T / prev.T)
        slope = min(max(slope, 1.0), 3.0)
    else:
        slope = max(fallback_exponent, 1.0)
    return last.wall_s * (next_T / last.T) ** slope


# --- running -----------------------------------------------------------------------------------


def pick_workload(source: preflight.SourceFile, override: str | None) -> Workload:
    """--exercise, then the file's header, then the exercise its functions say (loader's rules)."""
    return workload_for(preflight.detect_exercise(source, override))


def input_kind(workload: Workload, source: preflight.SourceFile) -> str:
    """torch tensors for torch files where the exercise takes them; NumPy arrays for files that
    import numpy or torch (and for NumPy-only exercises); nested lists otherwise."""
    imported = {name for name, _ in source.imports()}
    if workload.spec.inputs == "torch-if-imported" and "torch" in imported:
        return "torch"
    if workload.spec.inputs == "arrays" or imported & {"numpy", "torch", "jax", "scipy"}:
        return "numpy"
    return "lists"


def to_torch(value):
    """NumPy arrays (also inside dicts, lists, tuples) -> torch tensors of the same dtype."""
    import torch

    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    if isinstance(value, dict):
        return {k: to_torch(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_torch(v) for v in value)
    return value


def _failure_text(workload: Workload, T: int, outcome: Outcome) -> str:
    text = f"`{workload.function}` {outcome.describe_failure()} at T={T} ({workload.setting})"
    if outcome.output.strip():
        text += f"\nIt printed:\n{outcome.output.rstrip()[:1500]}"
    return text


def _readings(extra: dict, many: str, one: str) -> list[float]:
    """The harness's readings (`many`, a list, or `one`), as measured seconds; ForgedReading if any is not
    a finite, non-negative number."""
    value = extra.get(many) if many in extra else [extra.get(one)]
    if not isinstance(value, list) or not value:
        raise ForgedReading(f"came back as {value!r}, not a list of seconds")
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ForgedReading(f"came back as {v!r}, not a number of seconds")
    return [float(v) for v in value]


def _measure_size(
    sandbox: Sandbox, workload: Workload, memory_harness: str, args, kwargs, repeats: int, timeout: float
) -> tuple[list[float], list[float], dict, Outcome | None]:
    """Timed runs, then one separate memory run.

    Returns (wall times, CPU times, the memory run's extra, the failing outcome or None).
    """
    times: list[float] = []
    cpu_times: list[float] = []
    deadline = time.perf_counter() + timeout
    timed_kwargs = dict(kwargs, runs=repeats) if workload.repeats_inside else kwargs
    while len(times) < repeats or (sum(times) < MIN_TIMED_SECONDS and len(times) < MAX_REPEATS):
        left = max(deadline - time.perf_counter(), 0.5)
        outcome = sandbox.call(
            workload.function, args, timed_kwargs, harness=workload.time_harness, timeout=left, echo=False
        )  # no mutation check: large inputs
        if not outcome.ok:
            return times, cpu_times, {}, outcome
        # a harness that repeats internally (decode steps) reports every run
        extra = outcome.extra
        times.extend(_readings(extra, "times", "seconds"))
        cpu_times.extend(_readings(extra, "cpu_times", "cpu_seconds"))
    if not memory_harness:  # the time harness measured memory too
        return times, cpu_times, outcome.extra, None
    left = max(deadline - time.perf_counter(), 0.5)
    outcome = sandbox.call(workload.function, args, kwargs, harness=memory_harness, timeout=left, echo=False)
    if not outcome.ok:
        return times, cpu_times, {}, outcome
    return times, cpu_times, outcome.extra, None


@dataclass(frozen=True)
class _Plan:
    kind: str  # lists | numpy | torch
    memory_harness: str
    notes: tuple[str, ...]

    @property
    def memory_method(self) -> str:
        return "rss" if self.memory_harness == RSS_HARNESS else "tracemalloc"


def _plan(workload: Workload, source: preflight.SourceFile) -> _Plan:
    """Which inputs the file gets and how its memory is measured (torch tensors are invisible to
    tracemalloc, so a torch file's memory is its peak resident memory instead)."""
    kind = input_kind(workload, source)
    uses_torch = "torch" in {name for name, _ in source.imports()}
    if kind == "torch":
        if importlib.util.find_spec("torch") is None:
            raise DependencyMissing(
                f"{source.path} imports torch, which is not installed here. " + DependencyMissing.how_to_install("torch")
            )
        import torch  # noqa: F401 - before the sandbox forks, so workers start with it loaded
    if not uses_torch:
        return _Plan(kind, workload.memory_harness, ())
    if workload.memory_harness:
        return _Plan(
            kind,
            RSS_HARNESS,
            (
                "this file imports torch, whose tensors tracemalloc cannot see: peak "
                "memory is the process's peak resident memory (RSS) during the call.",
            ),
        )
    return _Plan(
        kind,
        workload.memory_harness,
        ("this file imports torch: tracemalloc does not see torch's tensors, so peak memory counts only Python and NumPy allocations.",),
    )


def _inputs(workload: Workload, rng, T: int, kind: str):
    args, kwargs = workload.inputs(rng, T)
    if kind == "lists":
        return lists(args), lists(kwargs)
    if kind == "torch":
        return to_torch(args), to_torch(kwargs)
    return args, kwargs


def run(
    path: str | Path, options: Options = Options(), progress: Callable | None = None, clock: Callable[[], float] = time.perf_counter
) -> BenchResult:
    """Measure a candidate file over its exercise's size ladder. Raises KitError if it can't start.

    `progress(event, T, size_result_or_None)` is called with "start" before and "done" after
    each size, so the CLI can show where it is.
    """
    if options.repeats < 1:
        raise UsageError("--repeats must be at least 1.")
    if options.budget <= 0:
        raise UsageError("--budget must be a positive number of seconds.")
    source = preflight.read_source(path)
    workload = pick_workload(source, options.exercise)
    plan = _plan(workload, source)
    result = BenchResult(
        workload.exercise,
        str(source.path),
        workload.function,
        plan.kind,
        workload.setting,
        workload.unit,
        options.repeats,
        options.budget,
        contrast=workload.contrast,
        notes=list(plan.notes),
        memory_method=plan.memory_method,
    )
    uses_torch = "torch" in {name for name, _ in source.imports()}
    with Sandbox(
        str(source.path),
        timeout=options.budget,
        memory=options.memory,
        preload=("torch",) if uses_torch else (),
        warm=False,
        self_peak=True,  # a torch file's peak memory is read by resetting its own (bench_harness)
    ) as sandbox:  # workers start with torch; a bench runs on the CPU, never on torch's meta device
        info = sandbox.start()
        if info.note:
            result.notes.append(info.note)
        _require_function(workload, info.functions, source.path)
        _ladder(sandbox, workload, plan, options, result, progress, clock)
    measured = [s.T for s in result.sizes]
    if len(measured) < 2 and not result.failure:
        raise BenchError(
            f"only T={measured[0]} could be measured, and a growth rate needs at least two "
            f"sizes: {result.stopped or 'the ladder had one size.'} Pass a larger --budget or "
            "smaller --sizes."
        )
    result.time = verdict(fit_exponent(measured, [s.cpu_s for s in result.sizes]), workload.time)
    peaks = [s.peak_bytes for s in result.sizes]
    if peaks and max(peaks) < 1024:
        result.memory = Verdict(
            workload.memory.exponent,
            None,
            "unknown",
            workload.memory.why,
            "under 1 KiB allocated per call at every size: too little to fit a growth rate",
        )
    else:
        result.memory = verdict(fit_exponent(measured, peaks), workload.memory)
    return result


def _ladder(
    sandbox: Sandbox,
    workload: Workload,
    plan: _Plan,
    options: Options,
    result: BenchResult,
    progress: Callable | None,
    clock: Callable[[], float],
) -> None:
    """Measure size after size into result.sizes until the ladder ends, the budget would be
    overrun, or the code fails (result.stopped / result.failure say which)."""
    rng = np.random.default_rng(SEED)
    ladder = tuple(options.sizes) if options.sizes else workload.sizes
    started = clock()
    for T in ladder:
        elapsed = clock() - started
        if result.sizes:
            cost = predict(result.sizes, T, workload.time.exponent)
            if elapsed + cost > options.budget:
                last = result.sizes[-1]
                result.stopped = (
                    f"stopped before T={T}: measuring it would take about {cost:.1f} s "
                    f"(T={last.T} took {last.wall_s:.1f} s), over the {options.budget:g} s "
                    f"budget ({elapsed:.1f} s used); pass a larger --budget to go further."
                )
                break
        if progress:
            progress("start", T, None)
        args, kwargs = _inputs(workload, rng, T, plan.kind)
        size_started = clock()
        left = max(options.budget - elapsed, 1.0)
        try:
            times, cpu_times, memory, failed = _measure_size(
                sandbox, workload, plan.memory_harness, args, kwargs, options.repeats, timeout=left
            )
        except ForgedReading as exc:
            result.failure = (
                f"the timing of `{workload.function}` at T={T} {exc}: the measurement runs in your "
                "code's process, and something there changed it, so no timing is shown as measured."
            )
            break
        if failed is not None:
            _stop_at(result, workload, T, failed, left, options.budget)
            break
        if memory.get("memory_method") == "tracemalloc" and result.memory_method == "rss":
            result.memory_method = "tracemalloc"
            result.notes.append(
                "peak resident memory is not readable on this system: tracemalloc was used, so torch tensors are missing from peak memory."
            )
        peak = memory.get("peak_bytes")
        if isinstance(peak, bool) or not isinstance(peak, (int, float)) or not math.isfinite(peak) or peak < 0:
            result.failure = (
                f"the memory reading of `{workload.function}` at T={T} came back as {peak!r}, "
                "not a number of bytes: the measurement runs in your code's process, and "
                "something there changed it."
            )
            break
        size = SizeResult(T, statistics.median(times), statistics.median(cpu_times), times, int(peak), clock() - size_started)
        result.sizes.append(size)
        if progress:
            progress("done", T, size)
    result.elapsed_s = clock() - started


def _stop_at(result: BenchResult, workload: Workload, T: int, failed: Outcome, left: float, budget: float) -> None:
    """Say why the ladder ends at size T, whose call failed: out of time or memory after a first size
    is a stop (the sizes so far still fit), any other failure is the code's; BenchError when the
    first size fails."""
    if failed.status == "timeout" and result.sizes:
        result.stopped = (
            f"stopped at T={T}: it did not finish within the {left:.1f} s left of the "
            f"{budget:g} s budget; pass a larger --budget to go further."
        )
    elif failed.status == "memory" and result.sizes:
        result.stopped = f"stopped at T={T}: it ran out of memory ({failed.detail}); see --memory."
    elif not result.sizes:
        raise BenchError(_failure_text(workload, T, failed) + _first_size_advice(failed))
    else:
        result.failure = _failure_text(workload, T, failed)


def _require_function(workload: Workload, defined: dict, path: Path) -> None:
    if workload.function in defined:
        return
    close = difflib.get_close_matches(workload.function, sorted(defined), n=1, cutoff=0.6)
    hint = f" Did you mean `{close[0]}`?" if close else ""
    listing = ", ".join(sorted(defined)) or "no functions"
    raise BenchError(
        f"{path} does not define `{workload.function}`, which bench calls for {workload.exercise}.{hint} The file defines: {listing}."
    )


def _first_size_advice(outcome: Outcome) -> str:
    if outcome.status == "raised":
        return "\nbench measures code that already runs: `attn-kit check FILE` shows what goes wrong."
    if outcome.status == "timeout":
        return "\nEven the smallest size did not finish: look for an endless loop, or pass smaller --sizes or a larger --budget."
    if outcome.status == "memory":
        return "\nEven the smallest size ran out of memory: pass smaller --sizes or a larger --memory."
    return ""


def parse_sizes(text: str) -> tuple[int, ...]:
    """'16,32,64' -> (16, 32, 64): at least two distinct positive sizes, sorted."""
    try:
        sizes = sorted({int(part) for part in text.replace(" ", "").split(",") if part})
    except ValueError:
        raise UsageError(f"give whole numbers separated by commas, e.g. 16,32,64; got '{text}'.") from None
    if len(sizes) < 2 or sizes[0] < 1:
        raise UsageError(f"give at least two different positive lengths, e.g. 16,32,64; got '{text}'.")
    return tuple(sizes)
