"""Verdicts several suites share: an (out, weights) pair against the reference, the ValueError for
widths that heads do not divide, inputs that must come back untouched, and a measured call's peak
memory against a bound."""

from __future__ import annotations

import re

from attn_kit.base.harness import measure
from attn_kit.base.records import CallStatus, Outcome
from attn_kit.compare.arrays import EPS32, float32_values
from attn_kit.compare.registry import CallFailed


def expect_divisibility_error(ctx, fn: str, args_for, D: int = 6, heads=(4, 0), worded=None) -> None:
    """fn(*args_for(h)) must raise ValueError for each bad head count h, and for the head counts in
    `worded` (all of them by default) its message must mention divisibility: a message is judged
    only where the statement asks for that wording in that case."""
    worded = heads if worded is None else worded
    for h in heads:
        ctx.describe(D=D, num_heads=h)
        outcome = ctx.outcome(fn, *args_for(h))
        if outcome.status == CallStatus.RAISED and outcome.error.type == "ValueError":
            if h in worded and not re.search(r"divis|divid", outcome.error.message, re.IGNORECASE):
                ctx.fail(
                    f"num_heads={h} with D={D} raised ValueError, but its message "
                    f"({outcome.error.message!r}) should say that D must be divisible by num_heads"
                )
            continue
        what = outcome.describe_failure() if not outcome.ok else "returned normally"
        ctx.fail(f"num_heads={h} with D={D} should raise ValueError; the call {what}")


def require_a_returned_call(ctx) -> None:
    """A check whose every call raised or hung saw nothing of the property it states (that inputs
    stay untouched, say): it earns nothing. Stops the check as an error on its first call when no
    call returned normally, or on the first call that hung: a call stopped at its deadline says
    nothing about what it would have done to its inputs, and a file that hangs earns no points for
    the calls it never finished (issue 36, N10)."""
    hung = next((call for call in ctx.calls if call.outcome.status == CallStatus.TIMEOUT), None)
    if ctx.calls and (hung is not None or not any(call.outcome.ok for call in ctx.calls)):
        ctx.failing_call = hung or ctx.calls[0]
        raise CallFailed(ctx.failing_call)


F32_SCORE_ULPS = 16.0  # float32 rounding of a score s: a few eps32·|s|, and every weight moves with it


def far_score_tolerance(got, scores, values) -> dict:
    """expect_close keywords for a case whose scores are all huge (near -1250): none for float64
    output; for float32 output, F32_SCORE_ULPS·eps32·max|score| times the largest |value| (scores
    that large are rounded to about 1e-4 in float32, and the weights move by as much). A running
    max started at 0 (zeros) or an unshifted exp (NaN) is off by far more."""
    if not float32_values(got):
        return {}
    import numpy as np

    reach = float(np.max(np.abs(scores))) * float(np.max(np.abs(values)))
    return {"atol": F32_SCORE_ULPS * EPS32 * reach, "float32_ok": False}


def expect_untouched(ctx, fn: str, outcome, kind: str) -> None:
    """Fail when the call wrote into any of its arguments (`kind`: 'lists' or 'NumPy arrays')."""
    if outcome.mutated:
        ctx.fail(f"`{fn}` changed its argument(s) {', '.join(outcome.mutated)} (given {kind}); copy before writing, or build new values")


OUT_AXES = ("batch", "query", "feature")
W_AXES = ("batch", "head", "query", "key")


def expect_out_and_weights(ctx, value, expected, what: str = "", weight_dims: str = "B×H×T×T"):
    """The last call returned (out, weights) equal to `expected`; weights are compared first, since
    a wrong weight explains a wrong output. Returns both as arrays."""
    call = ctx.last_call
    call.expected = expected
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        ctx.fail("with return_weights=True the function must return a pair (out, weights)")
    prefix = f"{what}: " if what else ""
    weights = ctx.expect_close(value[1], expected[1], f"{prefix}weights", W_AXES, weight_dims, call=call)
    out = ctx.expect_close(value[0], expected[0], f"{prefix}output", OUT_AXES, "B×T×D", call=call)
    return out, weights


def expect_causal_invariance(ctx, run, x, t: int, describe: dict, what: str = "output"):
    """run(x) -> B×T×… outputs under a causal mask: editing token t of x must leave every row
    before t unchanged and change row t (a token attends to itself)."""
    import numpy as np

    edited = np.array(x, dtype=float, copy=True)
    edited[:, t] += ctx.rng.normal(0, 5, size=edited.shape[2:]).round(6)
    B, T = edited.shape[:2]
    ctx.describe(B=B, T=T, edited_token=t, **describe)
    before = ctx.array(run(x), what, None)
    after = ctx.array(run(edited), f"{what} after editing token {t}", before.shape)
    changed = [i for i in range(t) if not np.allclose(before[:, i], after[:, i], rtol=1e-9, atol=1e-12)]
    if changed:
        ctx.fail(
            f"editing token {t} changed the {what} of earlier token(s) {changed}: under a causal mask "
            "a query may only see keys at or before its own position, so it must not depend on any later token"
        )
    if np.allclose(before[:, t], after[:, t]):
        ctx.fail(f"editing token {t} did not change its own {what}: a token must attend to itself")


MEASURED_TIME_FACTOR = 6  # a call measured under tracemalloc may take this many times the usual limit


def measured_time_limit(ctx) -> float:
    """The time limit of a call measured under tracemalloc: MEASURED_TIME_FACTOR times the usual
    one (60 s at the default --timeout of 10 s). tracemalloc slows every allocation, several times
    over for a correct loop of many small NumPy steps (a row-by-row tiled solution: 9 s plain, 43 s
    traced at T = 1024, S = 4096 on a loaded 2-core machine), and a memory check must not fail a
    correct O(T·S) loop for its speed. Once a call of this file has hung (the worker was
    restarted), the usual limit applies: a second hang costs no more than the first."""
    usual = float(ctx.sandbox.timeout)
    hung = getattr(ctx.sandbox, "restarts", 0) or getattr(ctx.sandbox, "conn", True) is None  # dropped, not yet restarted
    return usual if hung else usual * MEASURED_TIME_FACTOR


def peak_verdict(ctx, args: tuple, bound: int, naive: int, replay) -> tuple[int, bool, float]:
    """The peak memory of the call just made (through the measure_quiet harness) against `bound`:
    (peak bytes, over the bound, the call's seconds).

    The peak is tracemalloc's, read in the candidate's process; where it shows less than `naive`
    (the full score matrix) while the kernel's reading (VmHWM, taken by the kit) shows more, the
    kernel's. For the diagnosis the call is recorded with the verdict as its value, [1.0] over or
    [0.0], which `replay(module, *args)` computes for the kit's own implementations."""
    real = ctx.last_call
    peak = int(real.outcome.extra.get("peak_bytes", 0))
    kernel = int(real.outcome.extra.get("kernel_peak_bytes", 0))
    if kernel > naive > peak:
        peak = kernel
    over = peak > bound
    ctx.record_for_diagnosis(
        real.fn,
        args,
        {},
        Outcome("ok", value=[1.0 if over else 0.0], mutated=real.outcome.mutated, output=real.outcome.output, seconds=real.outcome.seconds),
        replay=replay,
        instead_of=(real,),
    )
    return peak, over, real.outcome.seconds


def kernel_limit(bound: int, naive: int) -> int:
    """What a memory check's call may add to each of its processes' data (RLIMIT_DATA, applied by
    the kit from outside: Sandbox.call's memory_limit): halfway between the bound and the naive
    matrix, so a solution within the bound never meets it and one that builds the matrix does,
    in a forked child too, whatever it does to its own peak readings."""
    return (bound + naive) // 2


def limit_failure(ctx, args: tuple, replay, limit: int, where: str, naive_text: str, advice: str):
    """CheckFailed for the call just made when the kernel's limit stopped it (status memory), else
    None; recorded for the diagnosis as over the bound ([1.0], as peak_verdict records it)."""
    from attn_kit.compare.registry import CheckFailed

    real = ctx.last_call
    outcome = real.outcome
    if outcome.status != CallStatus.MEMORY and not _out_of_memory(outcome):
        return None
    ctx.record_for_diagnosis(
        real.fn,
        args,
        {},
        Outcome("ok", value=[1.0], mutated=outcome.mutated, output=outcome.output, seconds=outcome.seconds),
        replay=replay,
        instead_of=(real,),
    )
    return CheckFailed(
        f"{where}: peak {limit / 2**20:.2f} MiB or more during the call, where the kernel stopped it "
        f"(a limit on your process and every process it starts, beyond the inputs); {naive_text}. "
        f"{advice}"
    )


def memory_verdict(
    ctx,
    outcome,
    args: tuple,
    replay,
    limit: int,
    bound: int,
    naive: int,
    where: str,
    naive_text: str,
    advice: str,
    built: str,
    during: str = "call",
) -> None:
    """The end every memory check shares, once its call has been made under the measure_quiet
    harness with `limit` (`outcome`): fails as limit_failure says when the kernel's limit stopped
    the call, as CallFailed when the call failed otherwise, and with "WHERE: peak … during the
    DURING; NAIVE_TEXT. BUILT" when the peak is over `bound` (peak_verdict, with `naive` the full
    matrix's bytes); else notes the peak. Raised directly, not with ctx.fail: no --repro script
    (its inputs would be megabytes of literals)."""
    from attn_kit.compare.registry import CheckFailed

    failed = limit_failure(ctx, args, replay, limit, where, naive_text, advice)
    if failed:
        raise failed
    if not outcome.ok:
        raise CallFailed(ctx.calls[-1])
    peak, over, seconds = peak_verdict(ctx, args, bound, naive, replay)
    figures = f"peak {peak / 2**20:.2f} MiB during the {during}; {naive_text}"
    if not over:
        ctx.note(f"memory: {figures} (the call took {seconds:.2f} s under tracemalloc)")
        return
    raise CheckFailed(f"{where}: {figures}. {built}")


def record_decoding(ctx, fn: str, args: tuple, steps: list, complete: bool, value, replay):
    """Record a decoding loop's step calls for the diagnosis as one call of `fn` on `args` that sums
    them up, as `replay(module, *args)` computes it for the kit's implementations: the last step's
    failure, None when the loop stopped early, else `value()`. What the steps wrote into the cache
    they were handed is the loop's own business, not a mutation of the caller's arguments."""
    mutated = tuple(dict.fromkeys(m for s in steps for m in s.outcome.mutated if m.split("[")[0].split(" ")[0] != "cache"))
    output = "".join(s.outcome.output for s in steps)
    last = steps[-1].outcome
    if not last.ok:
        summary = Outcome(last.status, error=last.error, mutated=mutated, output=output, detail=last.detail)
    else:
        summary = Outcome("ok", value=value() if complete else None, mutated=mutated, output=output)
    return ctx.record_for_diagnosis(fn, args, {}, summary, replay=replay, instead_of=steps)


# what an allocator raises when the kernel's limit refuses it: Python's MemoryError, NumPy's
# "Unable to allocate", torch's "DefaultCPUAllocator: can't allocate memory" (a RuntimeError)
OUT_OF_MEMORY = ("Unable to allocate", "can't allocate memory", "Cannot allocate memory")


def _out_of_memory(outcome) -> bool:
    """The call raised because an allocation was refused under the kit's limit: the limit stopped it,
    as when the kernel ends the process (torch and NumPy raise instead of dying)."""
    error = outcome.error
    if outcome.status != CallStatus.RAISED or error is None:
        return False
    return error.type == "MemoryError" or (
        error.type in ("RuntimeError", "_ArrayMemoryError") and any(m in error.message for m in OUT_OF_MEMORY)
    )


def peak_over(bound: int, fn, *args) -> list[float]:
    """[1.0] when fn(*args), measured by the kit's tracemalloc harness, peaks above `bound`, else
    [0.0]: a memory check's verdict for one of the kit's own implementations."""
    _, extra = measure(fn, *args)
    return [1.0 if extra["peak_bytes"] > bound else 0.0]
