"""Bench harnesses: kit functions that run *inside the worker* around a candidate function for
`attn-kit bench` (kit/practice/bench.py asks for them by name: "attn_kit.runtime.bench_harness:timed_cpu").

Each takes the candidate function and its arguments and returns `(value, extra)` like
attn_kit.base.harness; the value is None (bench inputs are large, and bench measures cost, not
correctness). Standard library only (plus NumPy through tracemalloc): the candidate's process
imports nothing from grading, checks or bench.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from attn_kit.base.harness import DEFAULT_RUNS, MAX_RUNS, MIN_TIMED_SECONDS, measure, measure_quiet


def timed_cpu(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[None, dict[str, float]]:
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


def measure_rss(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[None, dict[str, Any]]:
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


def _fill_cache(fn: Callable[..., Any], steps: Sequence[Any], params: Any, num_heads: int) -> Any:
    cache = None
    for x_t in steps[:-1]:
        result = fn(x_t, params, num_heads, cache)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise TypeError(f"the decode step must return a pair (out_t, cache); it returned {type(result).__name__}")
        cache = result[1]
    return cache


def decode_steps(
    fn: Callable[..., Any],
    steps: Sequence[Any],
    params: Any,
    num_heads: int,
    runs: int = DEFAULT_RUNS,
    min_seconds: float = MIN_TIMED_SECONDS,
    max_runs: int = MAX_RUNS,
) -> tuple[None, dict[str, Any]]:
    """For a decode step `fn(x_t, params, num_heads, cache) -> (out_t, cache)`: fill the cache with
    every token of `steps` but the last (untimed), then measure the last step.

    Filling costs T steps, so one call does all the runs for its size: `runs` untraced runs (more
    while they add up to under min_seconds), then one separate run under tracemalloc. Every run
    gets a fresh deep copy of the cache, made outside the measurement, because a step may update
    the cache in place.
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
    _, traced = measure(fn, steps[-1], params, num_heads, copy.deepcopy(cache))
    return None, {"seconds": statistics.median(times), "times": times, "cpu_times": cpu_times, "peak_bytes": traced["peak_bytes"]}
