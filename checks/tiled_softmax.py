"""The graded suite for tiled-softmax: one head of attention computed key block by key block.

Values are compared with plain, naive masked softmax attention computed here in the kit's
process (`naive_attention`, which shares no code with the tiled reference). The memory check
calls the candidate once at T = 1024 queries and S = 4T = 4096 keys inside the worker under
tracemalloc (`attn_kit.base.harness:measure_quiet`) and compares the peak with the statement's bound
64·T·(block_size + dv) bytes (6 MiB there). With S = 4T a T×S array of any floating dtype is over
the bound, float16 included (2·T·S = 8 MiB); at S = T (T = 2048, a 12 MiB bound) a float16 one
(8 MiB) fitted. T·S stays 4M, so the call and the diagnosis's re-runs cost what they did at S = T.

Values cannot tell a tiled solution from one that builds the T×S scores, so the memory check
records its call for the diagnosis with the verdict as its value, [1.0] over the bound or [0.0],
and `replay_peak_over_bound` measures a bug implementation's own tiled_attention the same way.
"""

from __future__ import annotations

import numpy as np

from attn_kit.compare.registry import Relaxation, Suite, equal

from . import cases
from .verdicts import far_score_tolerance, kernel_limit, measured_time_limit, memory_verdict, peak_over

SUITE = Suite("tiled-softmax")
check = SUITE.check
# a FlashAttention port that allocates its output like q (`torch.zeros_like(q)`) raises when dv
# differs from d: its checks are judged again at dv = d (kit/grading/relax.py)
SUITE.relaxations = (Relaxation("dv = d", equal("d", "dv")),)

AXES = ("query", "feature")
FN = "tiled_attention"
MEMORY_T = 1024  # queries in the memory check
MEMORY_S = 4 * MEMORY_T  # keys: 4T, so even a float16 T×S array (2·T·S bytes) exceeds the bound
MEMORY_WIDTH = 32  # d = dv for the memory check


def qkv(ctx, T, S, d, dv, scale=1.0):
    """One head's q, k and v (checks/cases.qkv) at the shape the check is judged at (ctx.dims)."""
    return cases.qkv(ctx.rng, T, S, d, ctx.dims(d=d, dv=dv)["dv"], scale)


def naive_attention(q, k, v, mask=None) -> np.ndarray:
    """softmax(q kᵀ / sqrt(d)) over the allowed keys, then @ v; rows with no allowed key are 0."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = q @ k.T / np.sqrt(q.shape[1])
    ok = np.ones(scores.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    top = np.max(np.where(ok, scores, -np.inf), axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(ok, np.exp(np.where(ok, scores - top, 0.0)), 0.0)
    total = e.sum(axis=1, keepdims=True)
    return (e / np.where(total > 0, total, 1.0)) @ v


def memory_bound(T: int, block_size: int, dv: int) -> int:
    """The statement's bound: eight float64 arrays of T×(block_size + dv)."""
    return 64 * T * (block_size + dv)


def replay_peak_over_bound(module, q, k, v, mask=None, block_size=64) -> list[float]:
    """[1.0] when `module`'s tiled_attention, measured by the kit's harness (tracemalloc) on these
    inputs, allocates more than memory_bound at its peak, else [0.0]: the memory check's verdict,
    replayed by the diagnosis on the kit's implementations (their values cannot tell a tiled one
    from one that builds the T×S scores)."""
    T, dv = np.shape(q)[0], np.shape(v)[1]
    return peak_over(memory_bound(T, block_size, dv), module.tiled_attention, q, k, v, mask, block_size)


def compare_tiled(ctx, q, k, v, mask=None, block_size=None, what="output", **kw):
    """Call tiled_attention (NumPy arrays in) and compare with naive attention."""
    T, d = q.shape
    S, dv = v.shape
    extra = {} if block_size is None else {"block_size": block_size}
    masking = kw.pop("masking", "given")
    ctx.describe(
        T=T,
        S=S,
        d=d,
        dv=dv,
        block_size=block_size if block_size is not None else "default (64)",
        mask="none" if mask is None else masking,
        **kw,
    )
    got = ctx.call(FN, q, k, v, mask, **extra)
    return ctx.expect_close(got, naive_attention(q, k, v, mask), what, AXES, "T×dv")


def random_mask(rng, T, S, blocked_rows=1):
    mask = rng.random((T, S)) < 0.6
    mask[np.arange(T), rng.integers(S, size=T)] = True
    for i in rng.choice(T, size=min(blocked_rows, T - 1), replace=False):
        mask[i] = False
    return mask


# --- shape and the public example --------------------------------------------------------------


@check(points=1, public=True, relaxable=False)
def output_shape(ctx):
    """The output is T×dv: one dv-wide row per query (T=5 queries, S=7 keys, dv=3)."""
    q, k, v = qkv(ctx, 5, 7, 4, 3)
    ctx.describe(T=5, S=7, d=4, dv=3, block_size=2)
    ctx.array(ctx.call(FN, q, k, v, None, block_size=2), "output", (5, 3), "T×dv")


PUBLIC_Q = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
PUBLIC_K = [[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]]
PUBLIC_V = [[1.0, 0.0], [0.0, 1.0], [3.0, 3.0]]
PUBLIC_MASK = [[True, True, True], [True, False, True], [False, False, False]]


@check(
    points=2,
    public=True,
    after=("output-shape",),
    catches=(
        "online-softmax-no-rescale",
        "no-scaling",
        "blocked-row-nan",
        "mask-inverted",
        "partial-block-dropped",
        "mask-ignored",
        "scale-after-softmax",
        "online-rescale-sign-flipped",
    ),
)
def public_tiled_example(ctx):
    """The statement's worked example: 3 queries, 3 keys in blocks of 2, one fully blocked query."""
    q, k, v = np.array(PUBLIC_Q), np.array(PUBLIC_K), np.array(PUBLIC_V)
    compare_tiled(ctx, q, k, v, np.array(PUBLIC_MASK), 2, masking="the statement's mask", example="the worked example in the statement")


# --- block sizes ------------------------------------------------------------------------------


@check(points=2, after=("output-shape",), concept="online-softmax", catches=("online-softmax-no-rescale", "mask-inverted"))
def block_size_one(ctx):
    """block_size=1 (one key per block, the online softmax in its purest form) equals naive attention."""
    q, k, v = qkv(ctx, 6, 9, 4, 3)
    compare_tiled(ctx, q, k, v, random_mask(ctx.rng, 6, 9), 1, masking="random")


@check(points=3, after=("output-shape",), concept="online-softmax", catches=("partial-block-dropped", "online-softmax-no-rescale"))
def block_size_not_dividing(ctx):
    """A block size that divides neither T nor S: the last, shorter block counts like the others."""
    for T, S, bs in ((10, 10, 3), (6, 10, 4)):
        q, k, v = qkv(ctx, T, S, 4, 3)
        compare_tiled(ctx, q, k, v, None, bs, what=f"output with block_size={bs}, S={S}")


@check(points=2, after=("output-shape",), catches=("partial-block-dropped",), concept="online-softmax")
def block_larger_than_keys(ctx):
    """A block larger than S (including the default 64 with S=7) is one short block holding every key."""
    q, k, v = qkv(ctx, 5, 7, 4, 3)
    compare_tiled(ctx, q, k, v, None, 16, what="output with block_size=16 > S=7")
    compare_tiled(ctx, q, k, v, None, None, what="output with the default block_size=64 > S=7")


@check(
    points=3,
    after=("output-shape",),
    concept="online-softmax",
    catches=("online-softmax-no-rescale", "online-softmax-acc-not-rescaled", "online-rescale-sign-flipped"),
)
def rescales_when_the_max_grows(ctx):
    """When a later block holds a larger score, what was summed so far is rescaled by exp(m_old - m_new).

    Keys are ordered so every query's scores grow from block to block; catches
    online-softmax-no-rescale.
    """
    T, S, d, dv = 4, 12, 4, 3
    q, k, v = qkv(ctx, T, S, d, dv)
    order = np.argsort((q.sum(axis=0) @ k.T))  # roughly ascending scores for every query
    k, v = k[order] * 1.5, v[order]
    compare_tiled(ctx, q, k, v, None, 3, keys="sorted so the scores grow block by block")


# --- the softmax ------------------------------------------------------------------------------


@check(points=2, after=("output-shape",), catches=("no-scaling", "double-scaling", "scale-after-softmax"), concept="scaling")
def scores_scaled_by_sqrt_d(ctx):
    """Scores are q·kᵀ / sqrt(d), with d the width of q and k (d=16 here, dv=3)."""
    q, k, v = qkv(ctx, 5, 8, 16, 3, scale=0.8)
    compare_tiled(ctx, q, k, v, None, 4)


@check(points=2, after=("output-shape",), catches=("softmax-overflow",), concept="numerical-stability")
def stable_at_large_scores(ctx):
    """Scores around ±1000 neither overflow nor underflow: every exp is of (score - running max)."""
    q, k, v = qkv(ctx, 4, 9, 4, 3)
    q = q / np.linalg.norm(q, axis=1, keepdims=True) * 45.0
    k = k / np.linalg.norm(k, axis=1, keepdims=True) * 45.0  # |score| up to 45·45/2 ≈ 1000
    compare_tiled(ctx, q, k, v, None, 2, scores="up to ±1000")


@check(points=2, after=("output-shape",), catches=("running-max-init-zero", "softmax-overflow"), concept="online-softmax")
def stable_when_every_score_is_far_below_zero(ctx):
    """A query whose scores are all near -1250 still gets its softmax: the running max starts at -inf.

    q near +25 and every key near -25 in each of d=4 features (scores about -1250 after the
    1/sqrt(d) scale), block_size 2, and one query of ordinary scores beside them. A running max
    started at 0 never drops to the row's true max, exp(score - 0) underflows to 0 below about
    -745, and the row comes out as zeros.
    """
    T, S, d, dv = 3, 6, 4, 3
    q = (25.0 + ctx.rng.normal(0.0, 0.1, size=(T, d))).round(6)
    q[-1] = ctx.rng.normal(0.0, 0.02, size=d).round(6)  # scores near 0 for the last query
    k = (-25.0 + ctx.rng.normal(0.0, 0.1, size=(S, d))).round(6)
    v = ctx.rng.normal(0.0, 1.0, size=(S, dv)).round(6)
    ctx.describe(T=T, S=S, d=d, dv=dv, block_size=2, mask="none", scores="about -1250 for queries 0 and 1, near 0 for query 2")
    got = ctx.call(FN, q, k, v, None, block_size=2)
    ctx.expect_close(got, naive_attention(q, k, v), "output", AXES, "T×dv", **far_score_tolerance(got, q @ k.T / np.sqrt(d), v))


@check(points=2, after=("output-shape",), concept="numerical-stability", catches=("max-over-blocked", "softmax-overflow"))
def stable_with_a_blocked_score_far_above(ctx):
    """Scores near 1250 stay finite, and a blocked key scoring near 3000 takes nothing.

    q and k near 25 in every feature, the last key near 60 and blocked for every query but the
    last, block_size 2: a block max taken over the blocked key too makes the allowed terms
    underflow to 0.
    """
    T, S, d, dv = 3, 6, 4, 2
    q = (25.0 + ctx.rng.normal(0.0, 0.1, size=(T, d))).round(6)
    k = (25.0 + ctx.rng.normal(0.0, 0.1, size=(S, d))).round(6)
    k[-1] = (60.0 + ctx.rng.normal(0.0, 0.1, size=d)).round(6)
    v = ctx.rng.normal(0.0, 1.0, size=(S, dv)).round(6)
    mask = np.ones((T, S), dtype=bool)
    mask[:-1, -1] = False
    compare_tiled(
        ctx,
        q,
        k,
        v,
        mask,
        block_size=2,
        masking="the last key blocked for all but the last query",
        scores="about 1250 allowed, about 3000 for the blocked key",
    )


@check(points=2, after=("output-shape",), catches=("mask-inverted", "fill-value-too-weak", "mask-ignored"), concept="masking")
def mask_true_means_allowed(ctx):
    """The T×S mask is True for allowed keys; blocked keys contribute nothing, in every block."""
    T, S = 6, 11
    q, k, v = qkv(ctx, T, S, 4, 3)
    compare_tiled(ctx, q, k, v, random_mask(ctx.rng, T, S, blocked_rows=0), 4, masking="random, T×S")


@check(
    points=3,
    after=("output-shape",),
    concept="masking",
    catches=("blocked-row-nan", "mask-inverted", "additive-mask-leaks", "blocked-row-uniform"),
)
def all_blocked_rows_are_zero(ctx):
    """A query with no allowed key outputs zeros (never NaN); one whose first blocks are all blocked
    still attends to its later allowed keys."""
    T, S = 5, 9
    q, k, v = qkv(ctx, T, S, 4, 3)
    mask = random_mask(ctx.rng, T, S, blocked_rows=0)
    mask[1] = False  # nothing allowed
    mask[3, :6] = False  # the first two blocks of 3 are empty
    mask[3, 7] = True
    out = compare_tiled(ctx, q, k, v, mask, 3, masking="query 1 fully blocked, query 3 blocked in keys 0-5")
    if np.any(out[1] != 0):
        ctx.fail("the fully blocked query 1 must output exactly zeros")


@check(points=1, after=("output-shape",), concept="online-softmax")
def value_error_when_block_size_below_one(ctx):
    """block_size < 1 raises ValueError (tried with block_size=0 and block_size=-2).

    Without the check, 0 fails inside range() or loops forever, and -2 returns zeros from a loop
    that never runs."""
    q, k, v = qkv(ctx, 3, 5, 2, 2)
    for block_size in (0, -2):
        ctx.describe(T=3, S=5, d=2, dv=2, block_size=block_size)
        outcome = ctx.outcome(FN, q, k, v, None, block_size=block_size)
        if outcome.status == "raised" and outcome.error.type == "ValueError":
            continue
        happened = outcome.describe_failure() if not outcome.ok else "returned normally"
        ctx.fail(
            f"block_size={block_size} should raise ValueError (the statement asks for one whenever block_size < 1); the call {happened}"
        )


@check(points=2, catches=("mutates-input",))
def inputs_left_unmodified(ctx):
    """tiled_attention writes into none of q, k, v and mask (e.g. no `q *= scale` on the caller's array)."""
    q, k, v = qkv(ctx, 4, 6, 4, 3)
    mask = random_mask(ctx.rng, 4, 6)
    ctx.describe(T=4, S=6, d=4, dv=3, block_size=4)
    ctx.call(FN, q, k, v, mask, block_size=4)
    outcome = ctx.last_call.outcome
    if outcome.mutated:
        ctx.fail(f"`{FN}` changed its argument(s) {', '.join(outcome.mutated)}; work on copies or new arrays")


# --- memory -----------------------------------------------------------------------------------


@check(points=4, after=("output-shape",), catches=("materialises-scores",), concept="memory")
def memory_stays_within_bound(ctx):
    """At T = 1024 and S = 4096 the peak memory allocated during the call stays within 64·T·(block_size + dv) bytes.

    The bound is 6 MiB at these sizes (T queries, S = 4T keys, block_size = 64, dv = 32).

    Measured in your process with tracemalloc (NumPy reports its arrays to it), from the start of
    the call: inputs do not count, your output does. A solution that builds the T×S score matrix
    fails even though its values are right, in any floating dtype: 8·T·S bytes in float64, and
    even a float16 copy (2·T·S = 8 MiB) is over the 6 MiB bound. That is what tiling avoids.
    tracemalloc slows a loop of many small steps several times over, so this one call may take six
    times the usual time limit (a correct row-by-row loop is slow here, not wrong).
    """
    T, S = MEMORY_T, MEMORY_S
    d = dv = MEMORY_WIDTH
    block_size = 64
    q, k, v = qkv(ctx, T, S, d, dv)
    mask = random_mask(ctx.rng, T, S)
    bound, naive = memory_bound(T, block_size, dv), 8 * T * S
    ctx.describe(T=T, S=S, d=d, dv=dv, block_size=block_size, mask="random T×S")
    limit = kernel_limit(bound, naive)
    outcome = ctx.outcome(
        FN,
        q,
        k,
        v,
        mask,
        block_size=block_size,
        harness="attn_kit.base.harness:measure_quiet",
        memory_limit=limit,
        time_limit=measured_time_limit(ctx),
    )
    memory_verdict(
        ctx,
        outcome,
        (q, k, v, mask, block_size),
        replay_peak_over_bound,
        limit,
        bound,
        naive,
        f"at T = {T}, S = {S}, block_size={block_size}, dv={dv}",
        f"bound 64·T·(block_size + dv) = {bound / 2**20:.2f} MiB; the T×S score matrix alone "
        f"is 8·T·S = {naive / 2**20:.0f} MiB in float64 and {naive / 4 / 2**20:.0f} MiB in float16",
        "Keep only one T×block_size block at a time",
        "Something of T×S size is built (scores, weights, a float mask or exp of the whole matrix, in "
        "any dtype); keep only one T×block_size block at a time",
    )


@check(
    points=4,
    after=("output-shape",),
    catches=(
        "online-softmax-no-rescale",
        "partial-block-dropped",
        "no-scaling",
        "softmax-overflow",
        "blocked-row-nan",
        "mask-inverted",
        "additive-mask-leaks",
        "blocked-row-uniform",
        "double-scaling",
        "fill-value-too-weak",
        "online-softmax-acc-not-rescaled",
        "mask-ignored",
        "scale-after-softmax",
        "online-rescale-sign-flipped",
    ),
)
def randomised_agreement(ctx):
    """Agrees with naive attention on randomised hidden cases: sizes, block sizes, masks, large scores.

    Five cases with T and S up to 20, widths up to 8, block sizes from 1 to beyond S, random masks
    with a fully blocked query, and one case with scores in the hundreds. Rerun with the same
    --seed to get the same cases.
    """
    for n, big in enumerate((False, False, False, False, True)):
        T, S = int(ctx.rng.integers(2, 21)), int(ctx.rng.integers(2, 21))
        d, dv = int(ctx.rng.integers(1, 9)), int(ctx.rng.integers(1, 9))
        bs = int(ctx.rng.integers(1, S + 3))
        q, k, v = qkv(ctx, T, S, d, dv, scale=12.0 if big else 1.0)
        mask = random_mask(ctx.rng, T, S) if n % 2 == 0 else None
        compare_tiled(ctx, q, k, v, mask, bs, what=f"case {n + 1}", case=n + 1, masking="random", large_scores=big)


# --- `attn-kit bench` -------------------------------------------------------------------------------


@SUITE.for_bench
def bench_inputs(rng, T, d):
    """q, k, v all T×d (S = T keys, dv = d), no mask, the default block size."""
    q, k, v = (rng.normal(0.0, 1.0, size=(T, d)).round(6) for _ in range(3))
    return (q, k, v), {"mask": None}
