"""The graded suite for kv-cache: decode one token at a time with a key/value cache.

A check decodes a sequence the way a generation loop does: it calls `decode_step` for
t = 0..T-1, sends each returned cache back into the next call, counts the numbers the cache
holds after every step (here, in the kit's process) and compares each step's output with row t
of causal multi-head attention over the whole sequence, computed with mha-screen's reference.

The step calls of one decoding loop are recorded for the diagnosis as ONE call that sums them
up, (outputs B×T×D, numbers the cache holds after each step), replayed on the kit's bug
implementations by `replay_decoding` (their own decode_step, one token at a time): a single
step after the first depends on the candidate's own cache format, which the kit's bug
implementations cannot read, while a whole loop starts from nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attn_kit.base.paths import solutions_dir
from attn_kit.base.records import Opaque, TensorValue
from attn_kit.compare.arrays import ValueProblem, check_shape, compare, to_array
from attn_kit.compare.registry import CallFailed, Suite
from attn_kit.diagnosis.diagnose import load_module
from attn_kit.report.results import Call

from .cases import WORKED_PARAMS, WORKED_X, causal, lists, params, tokens
from .verdicts import expect_divisibility_error, record_decoding

SUITE = Suite("kv-cache")
check = SUITE.check

STEP_AXES = ("batch", "step", "feature")


def mha_reference():
    """mha-screen's NumPy reference, loaded in the kit's process: the expected values' source."""
    return load_module(str(solutions_dir("mha-screen") / "reference_numpy.py"))


def causal_rows(x, p, num_heads) -> np.ndarray:
    """Row t of causal multi-head attention over all of x: what decode step t must output."""
    B, T, _ = np.shape(x)
    return mha_reference().multi_head_attention(np.asarray(x), p, num_heads, causal(B, T))


# --- counting what a cache holds -----------------------------------------------------------------


def cached_numbers(cache) -> tuple[int, str]:
    """(numbers the cache holds, problem): float arrays and Python floats found through lists,
    tuples and dict values count; ints, bools, strings and None do not (the statement). `problem`
    names a part the kit cannot look inside, else ''."""
    if isinstance(cache, TensorValue):
        cache = cache.array
    if isinstance(cache, np.ndarray):
        if cache.dtype == object:
            return _sum(cache.ravel().tolist())
        return (cache.size if cache.dtype.kind == "f" else 0), ""
    if isinstance(cache, bool):
        return 0, ""
    if isinstance(cache, float):
        return 1, ""
    if isinstance(cache, dict):
        length = cache.get("length")
        if type(length) is int and length >= 0:  # a preallocated buffer: count the filled rows only
            return _sum([_filled(v, length) for k, v in cache.items() if k != "length"])
        return _sum(list(cache.values()))
    if isinstance(cache, (list, tuple)):
        return _sum(cache)
    if isinstance(cache, Opaque):
        return 0, (f"a {cache.type_name} object, which the kit cannot look inside (keep the cache to lists, tuples, dicts and arrays)")
    return 0, ""


def _filled(value, length: int):
    """The first `length` positions along axis 1 (the token axis) of the float arrays in `value`."""
    if isinstance(value, TensorValue):
        value = value.array
    if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.ndim >= 2:
        return value[:, :length]
    if isinstance(value, (list, tuple)):
        return [_filled(item, length) for item in value]
    return value


def _sum(items) -> tuple[int, str]:
    total, problem = 0, ""
    for item in items:
        n, why = cached_numbers(item)
        total += n
        problem = problem or why
    return total, problem


# --- running a decoding loop -----------------------------------------------------------------------


@dataclass
class Decoding:
    outputs: np.ndarray  # B×T×D, step t's output in [:, t]
    sizes: list[int]  # numbers in the returned cache after each step
    problems: list[str]  # per step: what could not be counted, or ''
    steps: list[Call]  # the step calls, for failure evidence and --repro


def decode(ctx, x, p, num_heads, arrays: bool = False) -> Decoding:
    """Decode x (B×T×D) with the candidate's decode_step, one token per call, cache sent back.

    Fails the check (naming the step) when a step raises, returns something other than a pair,
    or returns an output that is not B×D.
    """
    B, T, D = np.shape(x)
    sent_p = {k: np.array(v) for k, v in p.items()} if arrays else lists(p)
    cache, outs, sizes, problems, steps = None, [], [], [], []
    failure: tuple[str, Call] | None = None
    for t in range(T):
        x_t = np.array(x[:, t]) if arrays else lists(x[:, t])
        outcome = ctx.outcome("decode_step", x_t, sent_p, num_heads, cache=cache)
        steps.append(ctx.calls[-1])
        if not outcome.ok:
            failure = ("", ctx.calls[-1])
            break
        value = outcome.value
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            got = type(value).__name__ + (f" of length {len(value)}" if isinstance(value, (tuple, list)) else "")
            failure = (f"step {t}: decode_step must return a pair (out_t, cache); it returned {got}", ctx.calls[-1])
            break
        out_t, cache = value
        try:
            arr = to_array(out_t, f"step {t}'s output")
            check_shape(arr, (B, D), f"step {t}'s output", "B×D")
        except ValueProblem as exc:
            failure = (str(exc), ctx.calls[-1])
            break
        outs.append(arr)
        n, problem = cached_numbers(cache)
        sizes.append(n)
        problems.append(problem)
        if problem and t < T - 1:
            failure = (
                f"step {t} returned a cache containing {problem}; the kit sends the cache back "
                "into the next call, so it must be made of those",
                ctx.calls[-1],
            )
            break
    record_decoding(
        ctx,
        "decode_step",
        (x if arrays else lists(x), sent_p, num_heads),
        steps,
        len(outs) == T,
        lambda: (np.stack(outs, axis=1), [float(n) if not why else float("nan") for n, why in zip(sizes, problems)]),
        replay_decoding,
    )
    ctx.describe(B=B, T=T, D=D, H=num_heads, input="NumPy arrays" if arrays else "lists")
    if failure is not None:
        message, step = failure
        ctx.failing_call = step
        if not message:
            error = CallFailed(step)
            error.args = (
                f"{error} (at step {len(steps) - 1}, "
                f"{'the first call, cache=None' if len(steps) == 1 else 'with the cache your previous step returned'})",
            )
            raise error
        ctx.fail(message)
    return Decoding(np.stack(outs, axis=1), sizes, problems, steps)


def replay_decoding(module, x, params, num_heads):
    """Feed x (B×T×D) to `module`'s decode_step one token at a time, as a generation loop does:
    (outputs B×T×D, numbers the cache holds after each step), the value `record_decoding` records.
    The diagnosis's replay of a decoding loop on the kit's own implementations."""
    cache, outs, sizes = None, [], []
    for t in range(len(x[0])):
        x_t = [seq[t] for seq in x]  # the caller's rows, not copies
        out_t, cache = module.decode_step(x_t, params, num_heads, cache)
        outs.append(np.asarray(out_t, dtype=np.float64))
        n, problem = cached_numbers(cache)
        sizes.append(float(n) if not problem else float("nan"))
    return np.stack(outs, axis=1), sizes


def expect_rows(ctx, dec: Decoding, expected: np.ndarray, what: str = "decoded outputs"):
    """Step t's output must equal row t of causal attention; on failure show the first wrong step."""
    mismatch = compare(dec.outputs, expected, what, STEP_AXES)
    if mismatch is None:
        return
    t = mismatch.index[1]
    wrong = sorted({int(s) for s in np.argwhere(~np.isclose(dec.outputs, expected, rtol=1e-6, atol=1e-8))[:, 1]})
    step = dec.steps[t]
    step.expected = expected[:, t]
    ctx.failing_call = step
    ctx.describe(wrong_steps=wrong)
    ctx.fail(f"{mismatch.summary()} (step t's output must equal row t of causal multi-head attention over the whole sequence)", mismatch)


# --- public example ------------------------------------------------------------------------------

PUBLIC_X, PUBLIC_PARAMS = WORKED_X, WORKED_PARAMS


@check(points=2, public=True, catches=("transpose-reverses-all-axes",))
def step_returns_output_and_cache(ctx):
    """decode_step returns a pair (out_t, cache) with out_t B×D, and accepts that cache back.

    Two steps with B=2, D=8, two heads: cache=None first, then whatever the first step returned.
    """
    B, T, D, H = 2, 2, 8, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    decode(ctx, x, p, H)


@check(
    points=2,
    public=True,
    after=("step-returns-output-and-cache",),
    catches=(
        "new-token-not-attending-to-itself",
        "cache-not-updated",
        "no-scaling",
        "reshape-without-transpose",
        "double-scaling",
        "weights-transposed",
        "heads-interleaved",
        "biases-ignored",
        "no-output-projection",
        "scale-by-model-width",
    ),
)
def public_decode_example(ctx):
    """The statement's worked example: mha-screen's example decoded one token at a time."""
    x = np.array(PUBLIC_X)
    p = {k: np.array(v) for k, v in PUBLIC_PARAMS.items()}
    ctx.describe(example="the worked example in the statement")
    dec = decode(ctx, x, p, 2)
    expect_rows(ctx, dec, causal_rows(x, p, 2))


# --- the new token --------------------------------------------------------------------------------


@check(points=2, after=("step-returns-output-and-cache",), concept="kv-cache", catches=("new-token-not-attending-to-itself",))
def first_token_attends_to_itself(ctx):
    """The first step (cache=None) attends to the new token itself: its output is v₀·Wo + bo.

    Catches new-token-not-attending-to-itself: with nothing cached yet, such a step has no key
    at all and outputs just bo.
    """
    B, D, H = 2, 8, 2
    x, p = tokens(ctx.rng, B, 1, D), params(ctx.rng, D)
    dec = decode(ctx, x, p, H)
    expect_rows(ctx, dec, causal_rows(x, p, H), "output of the first step")


@check(
    points=2,
    after=("step-returns-output-and-cache",),
    concept="kv-cache",
    catches=("new-token-not-attending-to-itself", "cache-not-updated"),
)
def new_token_joins_the_keys(ctx):
    """Each step attends to every cached token AND the new one: with Wq = Wk = 0 the weights are
    uniform, so out_t is the average of v₀ … v_t (then Wo, bo).

    Catches new-token-not-attending-to-itself (average of v₀ … v_{t-1}) and cache-not-updated
    (only v_t).
    """
    B, T, D, H = 2, 4, 8, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    p["Wq"], p["Wk"] = np.zeros((D, D)), np.zeros((D, D))
    p.pop("bq")
    p.pop("bk")
    ctx.describe(Wq="zeros", Wk="zeros")
    dec = decode(ctx, x, p, H)
    expect_rows(ctx, dec, causal_rows(x, p, H))


# --- the whole loop -------------------------------------------------------------------------------


@check(
    points=4,
    after=("step-returns-output-and-cache",),
    concept="kv-cache",
    catches=(
        "new-token-not-attending-to-itself",
        "cache-not-updated",
        "no-scaling",
        "reshape-without-transpose",
        "softmax-overflow",
        "biases-ignored",
    ),
)
def decoding_matches_causal_attention(ctx):
    """Decoding t = 0..T-1 reproduces causal multi_head_attention row by row.

    B=2, T=6, D=8, two heads, all biases; the expected rows come from mha-screen's reference on
    the whole sequence with causal_mask(B, T).
    """
    B, T, D, H = 2, 6, 8, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    dec = decode(ctx, x, p, H)
    expect_rows(ctx, dec, causal_rows(x, p, H))


@check(points=3, after=("step-returns-output-and-cache",), concept="kv-cache", catches=("cache-grows-quadratically", "cache-not-updated"))
def cache_holds_2btd_numbers(ctx):
    """After t steps the cache holds exactly 2·B·t·D numbers: one key and one value per token.

    Counted in the kit on the returned cache: every element of a float array and every Python
    float, through lists, tuples and dict values (ints, bools, strings and None do not count). A
    dict with an int "length" is a preallocated buffer: its arrays count up to that many positions
    along axis 1, the token axis.
    Catches cache-grows-quadratically (a copy of the cache kept at every step) and
    cache-not-updated (the new key and value never reach the returned cache).
    """
    B, T, D, H = 2, 5, 8, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    dec = decode(ctx, x, p, H)
    expected = [2 * B * t * D for t in range(1, T + 1)]
    ctx.describe(cache_sizes=dec.sizes, expected_sizes=expected)
    for t, (n, want, problem) in enumerate(zip(dec.sizes, expected, dec.problems), start=1):
        step = dec.steps[t - 1]
        if problem:
            ctx.failing_call = step
            ctx.fail(f"after {t} step(s) the returned cache contains {problem}")
        if n == want:
            continue
        ctx.failing_call = step
        text = (
            f"after {t} step(s) the cache holds {n} numbers; 2·B·t·D = 2·{B}·{t}·{D} = {want} expected "
            f"(sizes after each step: {dec.sizes[:t]}, expected {expected[:t]})"
        )
        if n == 0:
            text += ". Is the updated cache returned?"
        elif t > 1 and n == dec.sizes[t - 2]:
            text += ". It did not grow: the new key and value are not being kept"
        elif n > want:
            text += (
                ". It holds more than the keys and values of the tokens so far: a copy per step, "
                "queries, scores, or a preallocated buffer without an int 'length' beside it?"
            )
        ctx.fail(text)
    ctx.note(f"cache after {T} steps: {dec.sizes[-1]:,} numbers = 2·B·T·D with B={B}, T={T}, D={D}")


@check(
    points=2,
    after=("step-returns-output-and-cache",),
    concept="scaling",
    catches=("no-scaling", "double-scaling", "scale-by-model-width", "scale-after-softmax", "softmax-wrong-axis"),
)
def scores_scaled_by_head_width(ctx):
    """Scores are divided by sqrt(head width) = sqrt(D / num_heads) in every step."""
    B, T, D, H = 1, 4, 8, 2
    x, p = tokens(ctx.rng, B, T, D, scale=2.0), params(ctx.rng, D, biases=False)
    dec = decode(ctx, x, p, H)
    expect_rows(ctx, dec, causal_rows(x, p, H))


@check(points=3, after=("step-returns-output-and-cache",), concept="head-split", catches=("reshape-without-transpose", "heads-interleaved"))
def heads_use_contiguous_columns(ctx):
    """Head h uses the cached columns h*hd:(h+1)*hd of every past token.

    Catches reshape-without-transpose: reshaping the B×t×D cache straight to B×H×t×hd mixes
    tokens and heads once two or more tokens are cached.
    """
    B, T, D, H = 2, 4, 8, 4
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D, biases=False)
    dec = decode(ctx, x, p, H)
    expect_rows(ctx, dec, causal_rows(x, p, H))


@check(points=2, after=("step-returns-output-and-cache",), concept="numerical-stability", catches=("softmax-overflow",))
def no_overflow_at_large_scores(ctx):
    """Steps stay finite and correct when scores reach the thousands (subtract the max)."""
    B, T, D, H = 1, 4, 4, 2
    x, p = tokens(ctx.rng, B, T, D, scale=30.0), params(ctx.rng, D, scale=3.0)
    ctx.describe(x_scale=30)
    dec = decode(ctx, x, p, H)
    expect_rows(ctx, dec, causal_rows(x, p, H))


@check(points=1, after=("step-returns-output-and-cache",), catches=("softmax-across-batch",))
def batches_are_independent(ctx):
    """Each sequence in the batch decodes as if it were alone (its cache rows are its own)."""
    B, T, D, H = 3, 3, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    together = decode(ctx, x, p, H)
    for b in range(B):
        ctx.describe(batch=b)
        alone = decode(ctx, x[b : b + 1], p, H)
        mismatch = compare(together.outputs[b : b + 1], alone.outputs, f"batch {b} decoded with the others vs alone", STEP_AXES)
        if mismatch is not None:
            ctx.failing_call = together.steps[mismatch.index[1]]
            ctx.fail(mismatch.summary(), mismatch)


@check(points=1, after=("step-returns-output-and-cache",))
def biases_absent_or_none(ctx):
    """Biases missing from params, or present as None, mean 'no bias'."""
    B, T, D, H = 1, 3, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D, biases=False)
    ctx.describe(biases="absent")
    expect_rows(ctx, decode(ctx, x, p, H), causal_rows(x, p, H), "outputs without bias keys")
    ctx.describe(biases="None")
    with_none = dict(p, bq=None, bk=None, bv=None, bo=None)
    expect_rows(ctx, decode(ctx, x, with_none, H), causal_rows(x, p, H), "outputs with biases = None")


@check(points=1)
def value_error_when_heads_do_not_divide(ctx):
    """num_heads that does not divide D, or num_heads < 1, raises ValueError mentioning divisibility."""
    x, p = tokens(ctx.rng, 1, 1, 6), params(ctx.rng, 6)
    ctx.describe(cache=None)
    expect_divisibility_error(ctx, "decode_step", lambda h: (lists(x[:, 0]), lists(p), h))


@check(points=2, catches=("mutates-input",))
def inputs_left_unmodified(ctx):
    """decode_step writes into neither x_t nor params (lists and arrays); the cache is yours to update."""
    B, T, D, H = 2, 3, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    for arrays in (False, True):
        kind = "NumPy arrays" if arrays else "lists"
        dec = decode(ctx, x, p, H, arrays=arrays)
        for t, step in enumerate(dec.steps):
            # the cache, its entries, and an earlier step's cache ("cache of an earlier ... call") are yours
            changed = [m for m in step.outcome.mutated if m.split("[")[0].split(" ")[0] != "cache"]
            if changed:
                ctx.failing_call = step
                ctx.fail(
                    f"step {t} changed its argument(s) {', '.join(changed)} (given {kind}); copy before "
                    "writing, or build new values. (Updating the cache in place is fine.)"
                )


@check(points=1, after=("step-returns-output-and-cache",))
def accepts_lists_and_arrays(ctx):
    """NumPy arrays work as input as well as nested lists (either kind may be returned)."""
    B, T, D, H = 2, 3, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    expect_rows(ctx, decode(ctx, x, p, H, arrays=True), causal_rows(x, p, H))


@check(
    points=4,
    after=("step-returns-output-and-cache",),
    catches=(
        "new-token-not-attending-to-itself",
        "cache-not-updated",
        "no-scaling",
        "reshape-without-transpose",
        "softmax-overflow",
        "biases-ignored",
        "double-scaling",
        "heads-interleaved",
        "no-output-projection",
        "scale-by-model-width",
        "softmax-across-batch",
        "weights-transposed",
        "scale-after-softmax",
        "softmax-wrong-axis",
    ),
)
def randomised_agreement(ctx):
    """Agrees with causal attention on randomised hidden cases: shapes, biases, large scores.

    Four decoding runs with B up to 3, T up to 7, up to 4 heads, with and without biases, one
    with scores in the thousands. Rerun with the same --seed to get the same cases.
    """
    for n, big in enumerate((False, False, False, True)):
        B, T = int(ctx.rng.integers(1, 4)), int(ctx.rng.integers(2, 8))
        H = int(ctx.rng.integers(1, 5))
        D = H * int(ctx.rng.integers(1, 4))
        x = tokens(ctx.rng, B, T, D, scale=25.0 if big else 1.0)
        p = params(ctx.rng, D, biases=bool(ctx.rng.random() < 0.7), scale=3.0 if big else 1.0)
        ctx.describe(case=n + 1, biases="bq" in p, large_scores=big)
        expect_rows(ctx, decode(ctx, x, p, H), causal_rows(x, p, H), f"case {n + 1}: decoded outputs")


# --- `attn-kit bench` -------------------------------------------------------------------------------


@SUITE.for_bench
def bench_inputs(rng, T, B, D, H):
    """T + 1 decode steps of B×D tokens: the first T fill the cache, the last one is measured."""
    from . import cases

    steps = rng.normal(0.0, 1.0, size=(T + 1, B, D)).round(6)
    return (steps, cases.params(rng, D), H), {}
