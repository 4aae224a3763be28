"""`attn-kit bench`: how the candidate's code grows in time and memory with the sequence length T.

The solution runs in the sandbox (never in the kit's process) over a ladder of sequence lengths.
Per size: several untraced runs (`timed_cpu`, attn_kit.harness:timed plus the worker's CPU time)
give the median time, and one separate run under tracemalloc (attn_kit.harness:measure_quiet)
gives the peak extra memory: tracemalloc slows Python code, so time and memory never come from
the same run. A log-log least-squares fit (numpy.polyfit) over the largest sizes reached turns
the ladder into growth exponents, shown next to what the exercise should show. The time fit uses
CPU time, which other programs on a busy laptop disturb far less than wall time (the CLI also
asks BLAS for one thread, for the same reason).

An exercise's workload is data plus one small input builder: which function to call, how to build
inputs of length T, the ladder, and the exponents to expect with the reason for each. The ladder
starts small (free for NumPy code, affordable for plain lists) and stops early, with a note, when
the next size would overrun the time budget (predicted from the sizes measured so far), so a
pure-lists solution still gets an answer within the budget.

Nothing here prints: cli_bench.py renders the BenchResult with render_bench.py.
"""

from __future__ import annotations

import copy
import difflib
import importlib.util
import math
import statistics
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from attn_kit.checks import cases

from . import loader
from .errors import BenchError, DependencyMissing, UsageError
from .harness import measure_quiet
from .sandbox import DEFAULT_MEMORY, Sandbox
from .values import Outcome

TIME_HARNESS = "attn_kit.bench:timed_cpu"      # attn_kit.harness:timed plus CPU time
MEMORY_HARNESS = "attn_kit.harness:measure_quiet"
RSS_HARNESS = "attn_kit.bench:measure_rss"       # for files that import torch
DEFAULT_REPEATS = 5
DEFAULT_BUDGET = 20.0
MAX_REPEATS = 25              # cheap sizes are repeated until MIN_TIMED_SECONDS of runs, at most this
MIN_TIMED_SECONDS = 0.05
TOLERANCE = 0.35              # |fitted - expected| within this reads "as expected"
FIT_POINTS = 5                # the fit uses the largest sizes measured: fixed costs blur the small ones
SEED = 20240607               # inputs are random but fixed: bench measures cost, not correctness


# --- workloads: data + one input builder each -----------------------------------------------------

@dataclass(frozen=True)
class Expectation:
    exponent: float
    why: str                 # the reason, in the candidate's terms
    if_higher: str = ""      # what a clearly higher fitted exponent usually means
    if_lower: str = ""       # ... and a clearly lower one


@dataclass(frozen=True)
class Workload:
    exercise: str
    function: str
    dims: dict                            # fixed dimensions, passed to build and shown with the results
    detail: str                           # the rest of the setting: "causal mask"
    unit: str                             # what one timed run is: "call", "decode step"
    build: Callable                       # (rng, T, **dims) -> (args, kwargs) of NumPy inputs
    time: Expectation
    memory: Expectation
    sizes: tuple[int, ...]                # the ladder, small first: the budget decides how far it goes
    arrays_only: bool = False             # the exercise takes NumPy arrays whatever the file imports
    torch_inputs: bool = False            # a file that imports torch gets torch tensors (float64)
    time_harness: str = TIME_HARNESS
    repeats_inside: bool = False          # the time harness takes runs=N and repeats by itself
    memory_harness: str = MEMORY_HARNESS  # "" when the time harness also reports peak_bytes
    contrast: str = ""                    # a line putting the expected growth next to the naive one

    @property
    def setting(self) -> str:
        return ", ".join([f"{k}={v}" for k, v in self.dims.items()] + ([self.detail] if self.detail else []))


# Small sizes cost NumPy code next to nothing and let plain-list code answer within the budget;
# the fit uses the largest sizes reached.
LADDER = (16, 32, 64, 128, 256, 512, 1024, 2048)
# A narrow model width makes the T×T part dominate the T×D² projections from small T on, so
# plain-list code shows its quadratic growth within a few seconds (D does not change the growth in T).
SELF = {"B": 1, "D": 8, "H": 2}


def _self_attention_inputs(rng, T, B, D, H):
    return (cases.tokens(rng, B, T, D), cases.params(rng, D), H), {"mask": cases.causal(B, T)}


def _gqa_inputs(rng, T, B, D, H, KV):
    kv_width = KV * (D // H)
    params = cases.params(rng, D, names=("q", "o"))
    params.update({f"W{n}": rng.normal(0.0, D ** -0.5, size=(D, kv_width)).round(6) for n in "kv"})
    params.update({f"b{n}": rng.normal(0.0, 0.5, size=kv_width).round(6) for n in "kv"})
    return (cases.tokens(rng, B, T, D), params, H, KV), {"mask": cases.causal(B, T)}


def _cross_inputs(rng, T, B, D, H):
    x, context = cases.tokens(rng, B, T, D), cases.tokens(rng, B, T, D)
    return (x, context, cases.params(rng, D), H), {"mask": None}


def _tiled_inputs(rng, T, d):
    q, k, v = (rng.normal(0.0, 1.0, size=(T, d)).round(6) for _ in range(3))
    return (q, k, v), {"mask": None}


def _masked_bias_inputs(rng, T, B, C, H, D):
    activations = {"query": rng.normal(0.0, 1.0, size=(B, T, C)).round(6),
                   "context": rng.normal(0.0, 1.0, size=(B, T, C)).round(6)}
    parameters = {f"w_{n}": rng.normal(0.0, C ** -0.5, size=(C, H * D)).round(6) for n in "qkv"}
    parameters["w_o"] = rng.normal(0.0, (H * D) ** -0.5, size=(H * D, C)).round(6)
    parameters["b_o"] = rng.normal(0.0, 0.5, size=C).round(6)
    return (activations, parameters, {}), {"heads": H, "causal": True}


def _window_inputs(rng, T, B, H, d, window):
    q, k, v = (rng.normal(0.0, 1.0, size=(B, H, T, d)).round(6) for _ in range(3))
    return (q, k, v, window), {}


def _paged_inputs(rng, T, B, H, d, block_size):
    """B sequences of T tokens each, their blocks scattered over a shuffled pool with spare blocks."""
    per_seq = -(-T // block_size)
    n_blocks = B * per_seq + 4
    k_pool, v_pool = (rng.normal(0.0, 1.0, size=(n_blocks, block_size, H, d)).round(6) for _ in range(2))
    ids = rng.permutation(n_blocks)
    tables = [ids[b * per_seq:(b + 1) * per_seq].tolist() for b in range(B)]
    q = rng.normal(0.0, 1.0, size=(B, H, d)).round(6)
    return (q, k_pool, v_pool, tables, [T] * B), {}


def _backward_inputs(rng, T, B, H, d):
    q, k, v, dout = (rng.normal(0.0, 1.0, size=(B, H, T, d)).round(6) for _ in range(4))
    return (q, k, v, dout), {"mask": cases.causal(B, T)}


def _decode_inputs(rng, T, B, D, H):
    steps = rng.normal(0.0, 1.0, size=(T + 1, B, D)).round(6)     # T tokens fill the cache, 1 is timed
    return (steps, cases.params(rng, D), H), {}


QUADRATIC_TIME = Expectation(
    2.0, "every query scores every key: T×T dot products",
    if_higher="something may run once per (query, key) pair that should run once per query, e.g. a "
              "softmax denominator recomputed inside the key loop. A little above 2 is also normal "
              "for NumPy once the T×T arrays outgrow the CPU caches",
    if_lower="fixed costs (the T×D² projections, call overhead) still weigh at these sizes; a larger "
             "--budget or --sizes reaches larger T")
QUADRATIC_MEMORY = Expectation(
    2.0, "the T×T attention weights of every head are held at once",
    if_higher="more than a few T×T arrays at a time, or copies of them per query",
    if_lower="the T×T part may not dominate yet at these sizes (a larger --budget or --sizes reaches "
             "larger T), or the weights are never held whole")

WORKLOADS: dict[str, Workload] = {w.exercise: w for w in (
    Workload("mha-screen", "multi_head_attention", SELF, "causal mask", "call",
             _self_attention_inputs, QUADRATIC_TIME, QUADRATIC_MEMORY, LADDER),
    Workload("rope", "rope_attention", SELF, "causal mask, positions 0..T-1", "call",
             _self_attention_inputs, QUADRATIC_TIME, QUADRATIC_MEMORY, LADDER),
    Workload("gqa", "grouped_query_attention", dict(SELF, KV=1), "causal mask", "call",
             _gqa_inputs, QUADRATIC_TIME, QUADRATIC_MEMORY, LADDER),
    Workload("cross-attention", "cross_attention", SELF, "context length S = T, no mask", "call",
             _cross_inputs, QUADRATIC_TIME, QUADRATIC_MEMORY, LADDER),
    Workload("mha-masked-bias", "multihead_attention", {"B": 1, "C": 8, "H": 2, "D": 4},
             "K = Q = T, causal, no masks", "call", _masked_bias_inputs, QUADRATIC_TIME, QUADRATIC_MEMORY,
             LADDER, torch_inputs=True),
    Workload(
        "tiled-softmax", "tiled_attention", {"d": 32}, "dv = d, S = T keys, block_size=64, no mask", "call",
        _tiled_inputs,
        Expectation(2.0, "every query still scores every key, one block of keys at a time",
                    if_higher="per-block work that grows with T, e.g. rescaling all earlier blocks again",
                    if_lower="the per-block overhead still weighs at these sizes; a larger --budget or "
                             "--sizes reaches larger T"),
        Expectation(1.0, "only T×block_size scores and the T×dv running output are held, never T×S",
                    if_higher="a T×S intermediate is still built somewhere (scores, weights or a mask): "
                              "tiling exists so that the whole score matrix is never held",
                    if_lower="almost nothing is allocated per call; fine"),
        LADDER + (4096, 8192), arrays_only=True,
        contrast="naive attention holds the T×S score matrix: memory ≈ T^2"),
    Workload(
        "sliding-window", "sliding_window_attention", {"B": 1, "H": 2, "d": 16, "window": 32},
        "q, k, v all B×H×T×d", "call", _window_inputs,
        Expectation(1.0, "each query scores its window keys only: T·window dot products, linear in T "
                         "for a fixed window",
                    if_higher="the whole T×T score matrix is computed and then masked: the band saves "
                              "nothing unless only the keys a query can see are scored",
                    if_lower="per-call overhead still weighs at these sizes; a larger --budget or "
                             "--sizes reaches larger T"),
        Expectation(1.0, "scores for one chunk of queries against the keys its window reaches, plus the "
                         "B×H×T×d output",
                    if_higher="a T×T array (scores, the band as floats, weights) is built somewhere",
                    if_lower="almost nothing is allocated per call; fine"),
        LADDER + (4096, 8192), arrays_only=True,
        contrast="masking the full T×T scores costs ≈ T^2 in time and memory whatever the window"),
    Workload(
        "paged-attention", "paged_attention", {"B": 2, "H": 4, "d": 32, "block_size": 16},
        "T = context length of every sequence, one query each", "decode step", _paged_inputs,
        Expectation(1.0, "the new query scores each of the T cached tokens once",
                    if_higher="work per token that grows with the context, e.g. rebuilding the whole "
                              "sequence's cache or scanning every pool block for each token",
                    if_lower="fixed per-step costs (the table walk, call overhead) still dominate at "
                             "these sizes; a larger --budget or --sizes reaches larger T"),
        Expectation(1.0, "the gathered T×H×d keys and values of a sequence, or less when read in place",
                    if_higher="something of size T×T, or a copy of the whole pool per sequence",
                    if_lower="keys and values are read in place without a gathered copy; fine"),
        LADDER + (4096, 8192), arrays_only=True,
        contrast="padding every sequence to the maximum length reads and stores the longest context for all"),
    Workload(
        "attention-backward", "attention_backward", {"B": 1, "H": 2, "d": 16}, "S = T, causal mask", "call",
        _backward_inputs,
        Expectation(2.0, "the T×T weights are recomputed and four T×T×d matrix products follow",
                    if_higher="work per (query, key) pair that loops over more keys, e.g. a Jacobian built "
                              "per row as a T×T matrix",
                    if_lower="fixed costs still weigh at these sizes; a larger --budget or --sizes reaches "
                             "larger T"),
        Expectation(2.0, "P, dP and dS are T×T per head",
                    if_higher="more than a few T×T arrays at a time, or a per-row T×T Jacobian",
                    if_lower="the T×T part may not dominate yet at these sizes, or P is recomputed block "
                             "by block (flash-style); fine"),
        LADDER, arrays_only=True,
        contrast="a per-row softmax Jacobian diag(p) − p pᵀ costs T×T per row: ≈ T^3"),
    Workload(
        "kv-cache", "decode_step", {"B": 1, "D": 32, "H": 4}, "one step with T tokens in the cache",
        "decode step", _decode_inputs,
        Expectation(1.0, "the new token's query scores the T cached keys once; nothing is re-projected",
                    if_higher="each step redoes work for every past token, e.g. re-projecting all past "
                              "tokens or recomputing full attention instead of reading the cache",
                    if_lower="fixed per-step costs (projecting one token, call overhead) still dominate "
                             "at these sizes; a larger --budget or --sizes reaches larger T"),
        Expectation(1.0, "one row of T scores per head, plus at most a copy of the cache",
                    if_higher="a T×T array is built during a single step",
                    if_lower="the cache is updated in place and little else is allocated; fine"),
        LADDER + (4096,),
        time_harness="attn_kit.bench:decode_steps", memory_harness="", repeats_inside=True,
        contrast="recomputing full causal attention for every new token costs ≈ T^2 per token"),
)}


# --- harnesses: these run INSIDE the candidate's worker ------------------------------------------

def timed_cpu(fn, *args, **kwargs):
    """Run fn once, untraced; extra = {"seconds": wall time, "cpu_seconds": the worker's CPU time}.

    CPU time is what the fit uses: other programs taking the CPU away lengthen the wall time of a
    run but not its CPU time.
    """
    cpu = time.process_time()
    start = time.perf_counter()
    fn(*args, **kwargs)
    seconds = time.perf_counter() - start
    return None, {"seconds": seconds, "cpu_seconds": time.process_time() - cpu}


def _status_bytes(field_name: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"{field_name} not in /proc/self/status")


def _release_free_heap() -> None:
    """glibc: hand freed heap pages back to the OS, so the call's allocations show up in RSS."""
    try:
        import ctypes
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def measure_rss(fn, *args, **kwargs):
    """Peak resident memory above the start of the call, for code whose buffers tracemalloc cannot
    see (torch tensors). Linux: the peak (VmHWM) is reset through /proc/self/clear_refs first.
    Elsewhere, or if that fails, falls back to tracemalloc. extra = {"peak_bytes", "memory_method"}.
    """
    try:
        _release_free_heap()
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        base = _status_bytes("VmRSS")
    except OSError:
        _, extra = measure_quiet(fn, *args, **kwargs)
        return None, dict(extra, memory_method="tracemalloc")
    fn(*args, **kwargs)
    return None, {"peak_bytes": max(_status_bytes("VmHWM") - base, 0), "memory_method": "rss"}


def _fill_cache(fn, steps, params, num_heads):
    cache = None
    for x_t in steps[:-1]:
        result = fn(x_t, params, num_heads, cache)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise TypeError(f"decode_step must return a pair (out_t, cache); it returned "
                            f"{type(result).__name__}")
        cache = result[1]
    return cache


def decode_steps(fn, steps, params, num_heads, runs: int = DEFAULT_REPEATS,
                 min_seconds: float = MIN_TIMED_SECONDS, max_runs: int = MAX_REPEATS):
    """Fill the cache with every token but the last (untimed), then measure the last step.

    Filling costs T steps, so one call does all the runs for its size: `runs` untimed-traced
    runs (more while they add up to under min_seconds), then one separate run under tracemalloc.
    Every run gets a fresh deep copy of the cache, made outside the measurement, because a step
    may update the cache in place.
    extra = {"seconds": median wall time, "times", "cpu_times": every run, "peak_bytes": traced run}.
    """
    cache = _fill_cache(fn, steps, params, num_heads)
    times: list[float] = []
    cpu_times: list[float] = []
    while len(times) < runs or (sum(times) < min_seconds and len(times) < max_runs):
        trial = copy.deepcopy(cache)
        cpu = time.process_time()
        start = time.perf_counter()
        fn(steps[-1], params, num_heads, trial)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu)
    trial = copy.deepcopy(cache)
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        fn(steps[-1], params, num_heads, trial)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return None, {"seconds": statistics.median(times), "times": times, "cpu_times": cpu_times,
                  "peak_bytes": max(int(peak), 0)}


# --- results -----------------------------------------------------------------------------------

@dataclass
class SizeResult:
    T: int
    time_s: float                  # median wall time of the timed runs
    cpu_s: float                   # median CPU time of the same runs: what the fit uses
    times: list[float]             # every timed run's wall time
    peak_bytes: int                # peak extra memory of one traced run
    wall_s: float                  # what measuring this size cost, all runs and overheads included


@dataclass
class Verdict:
    expected: float
    fitted: float | None
    status: str                    # "as expected" | "higher" | "lower" | "unknown"
    why: str                       # the reason for the expected exponent
    advice: str = ""               # what a mismatch usually means

    def to_json(self) -> dict:
        return {"expected": self.expected, "fitted": self.fitted, "status": self.status,
                "why": self.why, "advice": self.advice}


@dataclass
class BenchResult:
    exercise: str
    path: str
    function: str
    inputs: str                    # "lists" or "numpy"
    setting: str
    unit: str
    repeats: int
    budget_s: float
    sizes: list[SizeResult] = field(default_factory=list)
    time: Verdict | None = None
    memory: Verdict | None = None
    memory_method: str = "tracemalloc"   # or "rss": peak resident memory (files that import torch)
    stopped: str = ""              # why the ladder ended before its last size
    failure: str = ""              # the code raised or crashed at some size (exit status 1)
    notes: list[str] = field(default_factory=list)
    contrast: str = ""
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failure

    def to_json(self) -> dict:
        return {
            "exercise": self.exercise, "path": self.path, "function": self.function,
            "inputs": self.inputs, "setting": self.setting, "unit": self.unit,
            "sizes": [s.T for s in self.sizes],
            "fit_sizes": fit_sizes(s.T for s in self.sizes),
            "time_s": [s.time_s for s in self.sizes],
            "cpu_s": [s.cpu_s for s in self.sizes],
            "peak_bytes": [s.peak_bytes for s in self.sizes],
            "fit_on": "cpu_s", "memory_method": self.memory_method,
            "time_exponent": self.time.fitted if self.time else None,
            "memory_exponent": self.memory.fitted if self.memory else None,
            "expected": {"time": self.time.to_json() if self.time else None,
                         "memory": self.memory.to_json() if self.memory else None},
            "repeats": self.repeats, "budget_s": self.budget_s, "elapsed_s": round(self.elapsed_s, 3),
            "stopped": self.stopped or None, "failure": self.failure or None,
            "notes": self.notes, "contrast": self.contrast or None,
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
    if len(sizes) < 2 or len(set(sizes)) < 2:
        return None
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

def pick_workload(source: loader.SourceFile, override: str | None) -> Workload:
    """--exercise, then the file's header, then the exercise its functions say (loader's rules)."""
    wanted = override or source.header
    if wanted in WORKLOADS:          # bench needs only the workload, not the exercise's catalogue entry
        return WORKLOADS[wanted]
    exercise = loader.detect_exercise(source, override)
    if exercise.id not in WORKLOADS:
        raise UsageError(f"`attn-kit bench` has no workload for {exercise.id}. It measures: "
                         f"{', '.join(WORKLOADS)}.")
    return WORKLOADS[exercise.id]


def input_kind(workload: Workload, source: loader.SourceFile) -> str:
    """torch tensors for torch files where the exercise takes them; NumPy arrays for files that
    import numpy or torch (and for NumPy-only exercises); nested lists otherwise."""
    imported = {name for name, _ in source.imports()}
    if workload.torch_inputs and "torch" in imported:
        return "torch"
    if workload.arrays_only or imported & {"numpy", "torch", "jax", "scipy"}:
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


def _measure_size(sandbox: Sandbox, workload: Workload, memory_harness: str, args, kwargs, repeats: int,
                  timeout: float) -> tuple[list[float], list[float], dict, Outcome | None]:
    """Timed runs, then one separate memory run.

    Returns (wall times, CPU times, the memory run's extra, the failing outcome or None).
    """
    times: list[float] = []
    cpu_times: list[float] = []
    deadline = time.perf_counter() + timeout
    timed_kwargs = dict(kwargs, runs=repeats) if workload.repeats_inside else kwargs
    while len(times) < repeats or (sum(times) < MIN_TIMED_SECONDS and len(times) < MAX_REPEATS):
        left = max(deadline - time.perf_counter(), 0.5)
        outcome = sandbox.call(workload.function, args, timed_kwargs, harness=workload.time_harness,
                               timeout=left, echo=False)     # no mutation check: large inputs
        if not outcome.ok:
            return times, cpu_times, {}, outcome
        # a harness that repeats internally (decode steps) reports every run
        extra = outcome.extra
        times.extend(extra["times"] if "times" in extra else [extra["seconds"]])
        cpu_times.extend(extra["cpu_times"] if "cpu_times" in extra else [extra["cpu_seconds"]])
    if not memory_harness:                # the time harness measured memory too
        return times, cpu_times, outcome.extra, None
    left = max(deadline - time.perf_counter(), 0.5)
    outcome = sandbox.call(workload.function, args, kwargs, harness=memory_harness, timeout=left, echo=False)
    if not outcome.ok:
        return times, cpu_times, {}, outcome
    return times, cpu_times, outcome.extra, None


@dataclass(frozen=True)
class _Plan:
    kind: str                 # lists | numpy | torch
    memory_harness: str
    notes: tuple[str, ...]

    @property
    def memory_method(self) -> str:
        return "rss" if self.memory_harness == RSS_HARNESS else "tracemalloc"


def _plan(workload: Workload, source: loader.SourceFile) -> _Plan:
    """Which inputs the file gets and how its memory is measured (torch tensors are invisible to
    tracemalloc, so a torch file's memory is its peak resident memory instead)."""
    kind = input_kind(workload, source)
    uses_torch = "torch" in {name for name, _ in source.imports()}
    if kind == "torch":
        if importlib.util.find_spec("torch") is None:
            raise DependencyMissing(f"{source.path} imports torch, which is not installed here: "
                                    "`pip install torch`, then run again.")
        import torch  # noqa: F401 - before the sandbox forks, so workers start with it loaded
    if not uses_torch:
        return _Plan(kind, workload.memory_harness, ())
    if workload.memory_harness:
        return _Plan(kind, RSS_HARNESS, ("this file imports torch, whose tensors tracemalloc cannot see: peak "
                                         "memory is the process's peak resident memory (RSS) during the call.",))
    return _Plan(kind, workload.memory_harness, ("this file imports torch: tracemalloc does not see torch's "
                                                 "tensors, so peak memory counts only Python and NumPy "
                                                 "allocations.",))


def _inputs(workload: Workload, rng, T: int, kind: str):
    args, kwargs = workload.build(rng, T, **workload.dims)
    if kind == "lists":
        return cases.lists(args), cases.lists(kwargs)
    if kind == "torch":
        return to_torch(args), to_torch(kwargs)
    return args, kwargs


def run(path: str | Path, options: Options = Options(), progress: Callable | None = None,
        clock: Callable[[], float] = time.perf_counter) -> BenchResult:
    """Measure a candidate file over its exercise's size ladder. Raises KitError if it can't start.

    `progress(event, T, size_result_or_None)` is called with "start" before and "done" after
    each size, so the CLI can show where it is.
    """
    if options.repeats < 1:
        raise UsageError("--repeats must be at least 1.")
    if options.budget <= 0:
        raise UsageError("--budget must be a positive number of seconds.")
    source = loader.read_source(path)
    workload = pick_workload(source, options.exercise)
    plan = _plan(workload, source)
    result = BenchResult(workload.exercise, str(source.path), workload.function, plan.kind, workload.setting,
                         workload.unit, options.repeats, options.budget, contrast=workload.contrast,
                         notes=list(plan.notes), memory_method=plan.memory_method)
    uses_torch = "torch" in {name for name, _ in source.imports()}
    with Sandbox(str(source.path), timeout=options.budget, memory=options.memory,
                 preload=("torch",) if uses_torch else ()) as sandbox:   # workers start with torch
        info = sandbox.start()
        if info.note:
            result.notes.append(info.note)
        _require_function(workload, info.functions, source.path)
        _ladder(sandbox, workload, plan, options, result, progress, clock)
    measured = [s.T for s in result.sizes]
    if len(measured) < 2 and not result.failure:
        raise BenchError(f"only T={measured[0]} could be measured, and a growth rate needs at least two "
                         f"sizes: {result.stopped or 'the ladder had one size.'} Pass a larger --budget or "
                         "smaller --sizes.")
    result.time = verdict(fit_exponent(measured, [s.cpu_s for s in result.sizes]), workload.time)
    peaks = [s.peak_bytes for s in result.sizes]
    if peaks and max(peaks) < 1024:
        result.memory = Verdict(workload.memory.exponent, None, "unknown", workload.memory.why,
                                "under 1 KiB allocated per call at every size: too little to fit a growth rate")
    else:
        result.memory = verdict(fit_exponent(measured, peaks), workload.memory)
    return result


def _ladder(sandbox: Sandbox, workload: Workload, plan: _Plan, options: Options, result: BenchResult,
            progress: Callable | None, clock: Callable[[], float]) -> None:
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
                result.stopped = (f"stopped before T={T}: measuring it would take about {cost:.1f} s "
                                  f"(T={last.T} took {last.wall_s:.1f} s), over the {options.budget:g} s "
                                  f"budget ({elapsed:.1f} s used); pass a larger --budget to go further.")
                break
        if progress:
            progress("start", T, None)
        args, kwargs = _inputs(workload, rng, T, plan.kind)
        size_started = clock()
        left = max(options.budget - elapsed, 1.0)
        times, cpu_times, memory, failed = _measure_size(sandbox, workload, plan.memory_harness, args, kwargs,
                                                         options.repeats, timeout=left)
        if failed is not None:
            if failed.status == "timeout" and result.sizes:
                result.stopped = (f"stopped at T={T}: it did not finish within the {left:.1f} s left of the "
                                  f"{options.budget:g} s budget; pass a larger --budget to go further.")
            elif failed.status == "memory" and result.sizes:
                result.stopped = f"stopped at T={T}: it ran out of memory ({failed.detail}); see --memory."
            elif not result.sizes:
                raise BenchError(_failure_text(workload, T, failed) + _first_size_advice(failed))
            else:
                result.failure = _failure_text(workload, T, failed)
            break
        if memory.get("memory_method") == "tracemalloc" and result.memory_method == "rss":
            result.memory_method = "tracemalloc"
            result.notes.append("peak resident memory is not readable on this system: tracemalloc was used, "
                                "so torch tensors are missing from peak memory.")
        size = SizeResult(T, statistics.median(times), statistics.median(cpu_times), times,
                          int(memory["peak_bytes"]), clock() - size_started)
        result.sizes.append(size)
        if progress:
            progress("done", T, size)
    result.elapsed_s = clock() - started


def _require_function(workload: Workload, defined: dict, path: Path) -> None:
    if workload.function in defined:
        return
    close = difflib.get_close_matches(workload.function, sorted(defined), n=1, cutoff=0.6)
    hint = f" Did you mean `{close[0]}`?" if close else ""
    listing = ", ".join(sorted(defined)) or "no functions"
    raise BenchError(f"{path} does not define `{workload.function}`, which bench calls for "
                     f"{workload.exercise}.{hint} The file defines: {listing}.")


def _first_size_advice(outcome: Outcome) -> str:
    if outcome.status == "raised":
        return ("\nbench measures code that already runs: `attn-kit check FILE` shows what goes wrong.")
    if outcome.status == "timeout":
        return ("\nEven the smallest size did not finish: look for an endless loop, or pass smaller "
                "--sizes or a larger --budget.")
    if outcome.status == "memory":
        return "\nEven the smallest size ran out of memory: pass smaller --sizes or a larger --memory."
    return ""


def parse_sizes(text: str) -> tuple[int, ...]:
    """'16,32,64' -> (16, 32, 64): at least two distinct positive sizes, sorted."""
    try:
        sizes = sorted({int(part) for part in text.replace(" ", "").split(",") if part})
    except ValueError:
        raise UsageError(f"give whole numbers separated by commas, e.g. 16,32,64; got '{text}'.") \
            from None
    if len(sizes) < 2 or sizes[0] < 1:
        raise UsageError(f"give at least two different positive lengths, e.g. 16,32,64; got '{text}'.")
    return tuple(sizes)
