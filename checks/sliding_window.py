"""The graded suite for sliding-window: causal local attention, query i sees keys i-window+1 .. i.

Values are compared with plain banded attention computed here in the kit's process
(`banded_attention`: the whole T×T masked softmax, sharing no code with the chunked reference).
Property checks edit single tokens and look at which outputs move: nothing before the edit
(causality), nothing at or past `window` positions after it (the window's far edge), and the
query right at the edge must move. The memory check calls the candidate once at T = 2048,
window = 32 under tracemalloc in the worker and compares the peak with 64·B·H·T·(window + d)
bytes; for the diagnosis it records the verdict, which `replay_peak_over_bound` measures the
same way on the kit's own implementations.
"""

from __future__ import annotations

import numpy as np

from attn_kit.compare.registry import Suite

from .verdicts import far_score_tolerance, kernel_limit, measured_time_limit, memory_verdict, peak_over

SUITE = Suite("sliding-window")
check = SUITE.check

FN = "sliding_window_attention"
AXES = ("batch", "head", "query", "feature")
WEIGHT_AXES = ("batch", "head", "query", "key")
DIMS = "B×H×T×d"
MEMORY = {"B": 1, "H": 2, "T": 2048, "d": 16, "window": 32}


def band(T: int, window: int) -> np.ndarray:
    """T×T booleans: allowed[i][j] = (i - window < j <= i)."""
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    return (j <= i) & (j > i - window)


def banded_attention(q, k, v, window) -> np.ndarray:
    """softmax(q kᵀ / sqrt(d)) over the band, @ v: the plain T×T computation."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    scores = np.where(band(q.shape[-2], window), scores, -np.inf)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return scores / scores.sum(axis=-1, keepdims=True) @ v


def memory_bound(B: int, H: int, T: int, window: int, d: int) -> int:
    """The statement's bound: 64·B·H·T·(window + d) bytes."""
    return 64 * B * H * T * (window + d)


def replay_peak_over_bound(module, q, k, v, window) -> list[float]:
    """[1.0] when `module`'s sliding_window_attention, measured by the kit's harness (tracemalloc)
    on these inputs, allocates more than memory_bound at its peak, else [0.0]: the memory check's
    verdict, replayed by the diagnosis on the kit's implementations (their values cannot tell a
    banded one from one that builds the T×T scores)."""
    B, H, T, d = np.shape(q)
    return peak_over(memory_bound(B, H, T, window, d), module.sliding_window_attention, q, k, v, window)


def qkv(rng, B, H, T, d, scale=1.0):
    return tuple((rng.normal(0.0, scale if n < 2 else 1.0, size=(B, H, T, d))).round(6) for n in range(3))


def compare_window(ctx, q, k, v, window, what="output", **kw):
    B, H, T, d = q.shape
    ctx.describe(B=B, H=H, T=T, d=d, window=window, **kw)
    got = ctx.call(FN, q, k, v, window)
    return ctx.expect_close(got, banded_attention(q, k, v, window), what, AXES, DIMS)


def run(ctx, q, k, v, window, what="output"):
    return ctx.array(ctx.call(FN, q, k, v, window), what, q.shape, DIMS)


@check(points=1, public=True)
def output_shape(ctx):
    """The output is B×H×T×d, like q (B=2, H=3, T=7, d=4, window=3)."""
    q, k, v = qkv(ctx.rng, 2, 3, 7, 4)
    ctx.describe(B=2, H=3, T=7, d=4, window=3)
    run(ctx, q, k, v, 3)


PUBLIC_Q = [[[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]]]]
PUBLIC_K = [[[[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 2.0]]]]
PUBLIC_V = [[[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [4.0, 0.0]]]]
PUBLIC_WINDOW = 2


@check(
    points=2,
    public=True,
    after=("output-shape",),
    catches=("window-off-by-one", "window-not-causal", "window-excludes-self", "no-scaling", "double-scaling"),
)
def public_window_example(ctx):
    """The statement's worked example: T=4, d=2, window=2."""
    compare_window(
        ctx, np.array(PUBLIC_Q), np.array(PUBLIC_K), np.array(PUBLIC_V), PUBLIC_WINDOW, example="the worked example in the statement"
    )


@check(
    points=3,
    after=("output-shape",),
    catches=(
        "window-off-by-one",
        "window-not-causal",
        "window-excludes-self",
        "no-scaling",
        "double-scaling",
        "fill-value-too-weak",
        "softmax-across-batch",
        "softmax-wrong-axis",
    ),
    concept="sliding-window",
)
def matches_banded_attention(ctx):
    """Equals softmax(q kᵀ / sqrt(d)) @ v with allowed[i][j] = (i - window < j <= i), for several windows (B=2, H=2)."""
    q, k, v = qkv(ctx.rng, 2, 2, 11, 4)
    for window in (2, 3, 5):
        compare_window(ctx, q, k, v, window, what=f"output with window={window}")


@check(
    points=2, after=("output-shape",), catches=("window-off-by-one", "window-not-causal", "window-excludes-self"), concept="sliding-window"
)
def weights_cover_exactly_the_window(ctx):
    """With one-hot values (v = I) the output is the weights: query i weighs keys i-window+1 .. i only (T=d=5, window=3)."""
    B, H, T, window = 1, 1, 5, 3
    q, k, _ = qkv(ctx.rng, B, H, T, T)
    v = np.broadcast_to(np.eye(T), (B, H, T, T)).copy()
    # the case names its window: the first screen draws the weights against the band it implies
    ctx.describe(B=B, H=H, T=T, d=T, window=window, v="one-hot (v = I)")
    got = ctx.call(FN, q, k, v, window)
    ctx.expect_close(got, banded_attention(q, k, v, window), "weights (v = I)", WEIGHT_AXES, "B×H×T×T")


@check(
    points=2, after=("output-shape",), catches=("window-not-causal", "fill-value-too-weak", "softmax-wrong-axis"), concept="sliding-window"
)
def causal_future_is_ignored(ctx):
    """Changing token t (its query, key and value) changes no output before t."""
    B, H, T, d, window, t = 1, 2, 8, 4, 3, 5
    q, k, v = qkv(ctx.rng, B, H, T, d)
    ctx.describe(B=B, H=H, T=T, d=d, window=window, edited_token=t)
    before = run(ctx, q, k, v, window)
    q2, k2, v2 = q.copy(), k.copy(), v.copy()
    for a in (q2, k2, v2):
        a[:, :, t] += ctx.rng.normal(0, 3, size=(B, H, d)).round(6)
    after = run(ctx, q2, k2, v2, window)
    moved = [i for i in range(t) if not np.allclose(before[:, :, i], after[:, :, i], rtol=1e-9, atol=1e-12)]
    if moved:
        ctx.fail(
            f"editing token {t} changed the output of earlier token(s) {moved}: queries see keys after them (the band must stop at j <= i)"
        )


@check(points=3, after=("output-shape",), catches=("window-off-by-one", "fill-value-too-weak"), concept="sliding-window")
def keys_outside_the_window_change_nothing(ctx):
    """Changing key/value t changes queries t .. t+window-1 only: query t+window no longer sees it.

    Catches both off-by-ones: with window + 1 keys query t+window still moves; with window - 1 keys
    query t+window-1 does not.
    """
    B, H, T, d, window, t = 1, 2, 10, 4, 3, 2
    q, k, v = qkv(ctx.rng, B, H, T, d)
    ctx.describe(B=B, H=H, T=T, d=d, window=window, edited_key=t)
    before = run(ctx, q, k, v, window)
    k2, v2 = k.copy(), v.copy()
    k2[:, :, t] += ctx.rng.normal(0, 3, size=(B, H, d)).round(6)
    v2[:, :, t] += 5.0
    after = run(ctx, q, k2, v2, window)
    moved = [i for i in range(T) if not np.allclose(before[:, :, i], after[:, :, i], rtol=1e-9, atol=1e-12)]
    should = list(range(t, t + window))
    if moved != should:
        ctx.fail(
            f"with window={window}, editing key and value {t} should change exactly the outputs of "
            f"queries {should} (each sees itself and the {window - 1} keys before it); it changed "
            f"{moved}"
        )


@check(points=2, after=("output-shape",), catches=("window-excludes-self", "window-off-by-one"), concept="sliding-window")
def window_one_sees_only_itself(ctx):
    """With window=1 each query attends to its own key alone, so the output equals v."""
    q, k, v = qkv(ctx.rng, 2, 2, 5, 3)
    ctx.describe(B=2, H=2, T=5, d=3, window=1)
    ctx.expect_close(ctx.call(FN, q, k, v, 1), v, "output with window=1 (must equal v)", AXES, DIMS)


@check(points=2, after=("output-shape",), catches=("window-excludes-self", "window-off-by-one"), concept="sliding-window")
def window_at_least_t_is_causal_attention(ctx):
    """window >= T is plain causal attention: window=T and window=T+5 give the same result."""
    B, H, T, d = 1, 2, 6, 4
    q, k, v = qkv(ctx.rng, B, H, T, d)
    causal = banded_attention(q, k, v, T)
    for window in (T, T + 5):
        ctx.describe(B=B, H=H, T=T, d=d, window=window)
        ctx.expect_close(ctx.call(FN, q, k, v, window), causal, f"output with window={window} vs causal attention", AXES, DIMS)


@check(points=2, after=("output-shape",), catches=("no-scaling", "double-scaling", "scale-after-softmax"), concept="scaling")
def scores_scaled_by_sqrt_d(ctx):
    """Scores are q·k / sqrt(d) with d the width of q and k (d=16 here)."""
    q, k, v = qkv(ctx.rng, 1, 2, 6, 16, scale=0.8)
    compare_window(ctx, q, k, v, 4)


@check(points=2, after=("output-shape",), catches=("softmax-overflow",), concept="numerical-stability")
def stable_at_large_scores(ctx):
    """Scores around ±1000 neither overflow nor give NaN."""
    q, k, v = qkv(ctx.rng, 1, 2, 6, 4)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True) * 45.0
    k = k / np.linalg.norm(k, axis=-1, keepdims=True) * 45.0  # |score| up to 45·45/2 ≈ 1000
    k[..., ::2, :] = q[..., ::2, :]  # every other query scores itself 1012
    compare_window(ctx, q, k, v, 3, scores="up to ±1000 (every other key equals its query)")


@check(points=2, after=("output-shape",), catches=("softmax-overflow",), concept="numerical-stability")
def stable_when_every_score_is_far_below_zero(ctx):
    """Scores that are all near -1250 still give the softmax over each window, not zeros or NaN.

    q near +25 and k near -25 in each of d=4 features: every score, a query's own included, is
    about -1250 after the 1/sqrt(d) scale, so exp of a raw score underflows to 0 (0/0 = NaN), and an
    online softmax whose running max starts at 0 instead of -inf comes out as zeros.
    """
    B, H, T, d = 1, 2, 6, 4
    q = (25.0 + ctx.rng.normal(0.0, 0.1, size=(B, H, T, d))).round(6)
    k = (-25.0 + ctx.rng.normal(0.0, 0.1, size=(B, H, T, d))).round(6)
    v = ctx.rng.normal(0.0, 1.0, size=(B, H, T, d)).round(6)
    ctx.describe(B=B, H=H, T=T, d=d, window=3, scores="about -1250 everywhere")
    got = ctx.call(FN, q, k, v, 3)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    ctx.expect_close(got, banded_attention(q, k, v, 3), "output", AXES, DIMS, **far_score_tolerance(got, scores, v))


@check(points=2, after=("output-shape",), catches=("max-over-blocked", "softmax-overflow"), concept="numerical-stability")
def stable_with_a_blocked_score_far_above(ctx):
    """A key outside the band scoring far above the allowed ones takes nothing, and nothing overflows.

    q and k near 25 in every feature (allowed scores about 1250), the last key near 60 (about 3000
    with every query), window = T: that key is blocked for every query but the last, since it is in
    their future. A max taken over the blocked key too makes the allowed weights underflow to 0.
    """
    B, H, T, d = 1, 2, 5, 4
    q = (25.0 + ctx.rng.normal(0.0, 0.1, size=(B, H, T, d))).round(6)
    k = (25.0 + ctx.rng.normal(0.0, 0.1, size=(B, H, T, d))).round(6)
    k[:, :, -1] = (60.0 + ctx.rng.normal(0.0, 0.1, size=(B, H, d))).round(6)
    v = ctx.rng.normal(0.0, 1.0, size=(B, H, T, d)).round(6)
    compare_window(ctx, q, k, v, T, scores="about 1250 allowed, about 3000 for the last key (blocked but for the last query)")


@check(points=1)
def value_error_when_window_below_one(ctx):
    """window < 1 raises ValueError: a query must at least see itself."""
    q, k, v = qkv(ctx.rng, 1, 1, 3, 2)
    for window in (0, -2):
        ctx.describe(window=window)
        outcome = ctx.outcome(FN, q, k, v, window)
        if not (outcome.status == "raised" and outcome.error.type == "ValueError"):
            ctx.fail(
                f"window={window} should raise ValueError; the call "
                + (outcome.describe_failure() if not outcome.ok else "returned normally")
            )


@check(points=2, catches=("mutates-input",))
def inputs_left_unmodified(ctx):
    """sliding_window_attention writes into none of q, k, v (e.g. no `q *= scale` on the caller's array)."""
    q, k, v = qkv(ctx.rng, 1, 2, 5, 4)
    ctx.describe(B=1, H=2, T=5, d=4, window=2)
    ctx.call(FN, q, k, v, 2)
    if ctx.last_call.outcome.mutated:
        ctx.fail(f"`{FN}` changed its argument(s) {', '.join(ctx.last_call.outcome.mutated)}; work on new arrays")


@check(points=4, after=("output-shape",), catches=("materialises-scores",), concept="memory")
def memory_stays_within_bound(ctx):
    """At T = 2048, window = 32 the peak memory allocated during the call stays within 64·B·H·T·(window + d) bytes.

    Measured in your process with tracemalloc (NumPy reports its arrays to it), from the start of
    the call: inputs do not count, your output does. On Linux the kit also reads the process's
    peak resident memory from the kernel, so a file that silences tracemalloc is still measured.
    Building the B×H×T×T scores fails even when the values are right: a window exists so that cost
    grows with T·window, not T². tracemalloc slows a loop of many small steps several times over,
    so this one call may take six times the usual time limit.
    """
    B, H, T, d, window = (MEMORY[n] for n in ("B", "H", "T", "d", "window"))
    q, k, v = qkv(ctx.rng, B, H, T, d)
    bound, naive = memory_bound(B, H, T, window, d), 8 * B * H * T * T
    ctx.describe(B=B, H=H, T=T, d=d, window=window)
    limit = kernel_limit(bound, naive)
    outcome = ctx.outcome(
        FN, q, k, v, window, harness="attn_kit.base.harness:measure_quiet", memory_limit=limit, time_limit=measured_time_limit(ctx)
    )
    memory_verdict(
        ctx,
        outcome,
        (q, k, v, window),
        replay_peak_over_bound,
        limit,
        bound,
        naive,
        f"at B={B}, H={H}, T={T}, d={d}, window={window}",
        f"bound 64·B·H·T·(window + d) = {bound / 2**20:.2f} MiB; the B×H×T×T float64 scores alone are {naive / 2**20:.0f} MiB",
        "Score each chunk of queries against the keys its window can reach",
        "Something of T×T size is built (scores, a band mask as floats, exp of the whole matrix); score each "
        "chunk of queries against the keys its window can reach",
    )


@check(
    points=4,
    after=("output-shape",),
    catches=(
        "window-off-by-one",
        "window-not-causal",
        "window-excludes-self",
        "no-scaling",
        "softmax-overflow",
        "double-scaling",
        "fill-value-too-weak",
        "softmax-across-batch",
        "softmax-wrong-axis",
        "scale-after-softmax",
    ),
)
def randomised_agreement(ctx):
    """Agrees with banded attention on randomised hidden cases: sizes, windows from 1 to beyond T, large scores.

    Five cases with T up to 40 and widths up to 8; one with scores in the hundreds. Rerun with the
    same --seed to get the same cases.
    """
    for n, big in enumerate((False, False, False, False, True)):
        B, H = int(ctx.rng.integers(1, 3)), int(ctx.rng.integers(1, 4))
        T, d = int(ctx.rng.integers(2, 41)), int(ctx.rng.integers(1, 9))
        window = int(ctx.rng.integers(1, T + 4))
        q, k, v = qkv(ctx.rng, B, H, T, d, scale=12.0 if big else 1.0)
        compare_window(ctx, q, k, v, window, what=f"case {n + 1}", case=n + 1, large_scores=big)


# --- `attn-kit bench` -------------------------------------------------------------------------------


@SUITE.for_bench
def bench_inputs(rng, T, B, H, d, window):
    """q, k, v all B×H×T×d and a fixed window."""
    q, k, v = (rng.normal(0.0, 1.0, size=(B, H, T, d)).round(6) for _ in range(3))
    return (q, k, v, window), {}
