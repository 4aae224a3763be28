"""The graded suite for mha-screen: attention by hand, with masks, no framework.

Order matters: public examples, then the small functions, then shapes, then values. Checks that
need the output shapes right run `after=("output-shapes",)` so one wrong shape shows as one red
line instead of fifteen.
"""

from __future__ import annotations

import numpy as np

from attn_kit.compare.arrays import exactly
from attn_kit.compare.registry import Suite

from .cases import WORKED_PARAMS, WORKED_X, causal, lists, mask_of_kind, padding, params, random_mask, tokens
from .verdicts import (
    OUT_AXES,
    expect_causal_invariance,
    expect_divisibility_error,
    expect_out_and_weights,
    expect_untouched,
    require_a_returned_call,
)

SUITE = Suite("mha-screen")
check = SUITE.check

MASK_AXES = ("batch", "query", "key")


def compare_attention(ctx, x, p, num_heads, mask=None, pass_mask=True, what="", **kw):
    """Call multi_head_attention(return_weights=True) and compare both outputs with the reference."""
    B, T, D = np.shape(x)
    args = (lists(x), lists(p), num_heads)
    extra = {"mask": lists(mask)} if pass_mask else {}
    ctx.describe(B=B, T=T, D=D, H=num_heads, **kw)
    value = ctx.call("multi_head_attention", *args, **extra, return_weights=True)
    expected = ctx.oracle.multi_head_attention(x, p, num_heads, mask, return_weights=True)
    return expect_out_and_weights(ctx, value, expected, what)


# --- public examples (also in the statement) -----------------------------------------------------


@check(
    points=1,
    public=True,
    catches=("softmax-overflow", "blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks", "fill-value-too-weak"),
)
def public_softmax_example(ctx):
    """The statement's softmax examples give the stated numbers.

    stable_softmax([1000.0, 999.0, -5.0], allowed=[True, True, False]) and an all-blocked input.
    """
    ctx.describe(scores=[1000.0, 999.0, -5.0], allowed=[True, True, False])
    got = ctx.call("stable_softmax", [1000.0, 999.0, -5.0], allowed=[True, True, False])
    ctx.expect_close(got, [0.7310585786300049, 0.2689414213699951, 0.0], "softmax", ("entry",))
    ctx.describe(scores=[3.0, 4.0], allowed=[False, False])
    got = ctx.call("stable_softmax", [3.0, 4.0], allowed=[False, False])
    ctx.expect_close(got, [0.0, 0.0], "softmax of an all-blocked vector", ("entry",), atol=0.0, rtol=0.0)


@check(points=1, public=True, catches=("causal-off-by-one", "padding-masks-queries", "mask-not-boolean"))
def public_masks_example(ctx):
    """The statement's mask examples: causal_mask(1, 3) and padding_mask([2, 3], 3)."""
    ctx.describe(call="causal_mask(1, 3)")
    ctx.expect_close(ctx.call("causal_mask", 1, 3), causal(1, 3), "causal_mask(1, 3)", MASK_AXES, "B×T×T", kind="bool")
    ctx.describe(call="padding_mask([2, 3], 3)")
    ctx.expect_close(
        ctx.call("padding_mask", [2, 3], 3), padding([2, 3], 3), "padding_mask([2, 3], 3)", MASK_AXES, "len(lengths)×T×T", kind="bool"
    )


@check(points=2, public=True, catches=("transpose-reverses-all-axes",))
def output_shapes(ctx):
    """Output is B×T×D; with return_weights=True it is (out, weights) with weights B×H×T×T.

    Checked strictly: (T, D) where (1, T, D) is due is a shape failure, not broadcast away.
    """
    B, T, D, H = 2, 3, 8, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    ctx.describe(B=B, T=T, D=D, H=H, return_weights=False)
    ctx.array(ctx.call("multi_head_attention", lists(x), lists(p), H), "output", (B, T, D), "B×T×D")
    ctx.describe(return_weights=True)
    value = ctx.call("multi_head_attention", lists(x), lists(p), H, return_weights=True)
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        ctx.fail(
            "with return_weights=True the function must return a pair (out, weights); "
            f"it returned {type(value).__name__}" + (f" of length {len(value)}" if isinstance(value, (tuple, list)) else "")
        )
    ctx.array(value[0], "output", (B, T, D), "B×T×D")
    ctx.array(value[1], "weights", (B, H, T, T), "B×H×T×T")


PUBLIC_X, PUBLIC_PARAMS = WORKED_X, WORKED_PARAMS


@check(
    points=2,
    public=True,
    after=("output-shapes",),
    catches=(
        "no-scaling",
        "scale-by-model-width",
        "reshape-without-transpose",
        "heads-interleaved",
        "mask-inverted",
        "softmax-wrong-axis",
        "no-output-projection",
        "biases-ignored",
        "double-scaling",
        "weights-transposed",
    ),
)
def public_attention_example(ctx):
    """The statement's worked example: B=1, T=3, D=4, two heads, causal mask, only `bo`."""
    x = np.array(PUBLIC_X)
    compare_attention(
        ctx,
        x,
        {k: np.array(v) for k, v in PUBLIC_PARAMS.items()},
        2,
        causal(1, 3),
        masking="causal_mask(1, 3)",
        example="the worked example in the statement",
    )


# --- stable_softmax ---------------------------------------------------------------------------


@check(points=1, catches=("softmax-overflow", "fill-value-too-weak"))
def softmax_values_and_shape(ctx):
    """stable_softmax returns one probability per score, summing to 1, equal to the reference.

    Vectors of length 1 to 7 with allowed=None and with a random allowed pattern.
    """
    for n in (1, 2, 5, 7):
        scores = ctx.rng.normal(0, 3, size=n).round(4)
        allowed = ctx.rng.random(n) < 0.7
        allowed[ctx.rng.integers(n)] = True
        for mask in (None, allowed):
            ctx.describe(scores=scores.tolist(), allowed=None if mask is None else mask.tolist())
            got = ctx.call("stable_softmax", scores.tolist(), None if mask is None else mask.tolist())
            ctx.expect_close(got, ctx.oracle.stable_softmax(scores, mask), "softmax", ("entry",), "len(scores)")


@check(points=2, catches=("softmax-overflow",), concept="numerical-stability")
def softmax_stable_at_1000(ctx):
    """Scores of ±1000 neither overflow nor underflow: subtract the max before exp.

    Catches softmax-overflow: exp(1000) is inf in floats (OverflowError with math.exp).
    """
    for scores in ([1000.0, 1000.0, 999.0], [-1000.0, -1001.0, -1000.5], [1000.0, -1000.0]):
        ctx.describe(scores=scores, allowed=None)
        got = ctx.call("stable_softmax", scores)
        ctx.expect_close(got, ctx.oracle.stable_softmax(scores), "softmax", ("entry",))


@check(points=2, catches=("max-over-blocked",), concept="masking")
def softmax_max_over_allowed_only(ctx):
    """The max that is subtracted is taken over allowed entries only.

    With [-1000, 1000, -999] and the 1000 blocked, a max over all entries makes every allowed
    exp underflow to 0 (and 0/0 = NaN).
    """
    scores, allowed = [-1000.0, 1000.0, -999.0], [True, False, True]
    ctx.describe(scores=scores, allowed=allowed)
    got = ctx.call("stable_softmax", scores, allowed)
    ctx.expect_close(got, ctx.oracle.stable_softmax(scores, allowed), "softmax", ("entry",))


@check(points=2, catches=("blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks"), concept="masking")
def softmax_all_blocked_is_zero(ctx):
    """A vector with no allowed entry gives exactly zeros: never NaN, never uniform."""
    for scores in ([3.0, 4.0], [1000.0, -1000.0, 5.0], [0.0]):
        allowed = [False] * len(scores)
        ctx.describe(scores=scores, allowed=allowed)
        got = ctx.call("stable_softmax", scores, allowed)
        ctx.expect_close(got, [0.0] * len(scores), "softmax", ("entry",), atol=0.0, rtol=0.0)


# --- masks ------------------------------------------------------------------------------------


@check(points=1, catches=("causal-off-by-one", "mask-not-boolean"), concept="masking")
def causal_mask_values(ctx):
    """causal_mask(B, T)[b][i][j] is True exactly when j <= i (the diagonal is allowed)."""
    for B, T in ((2, 5), (1, 1)):
        ctx.describe(call=f"causal_mask({B}, {T})")
        ctx.expect_close(ctx.call("causal_mask", B, T), causal(B, T), f"causal_mask({B}, {T})", MASK_AXES, "B×T×T", kind="bool")


@check(points=1, catches=("padding-masks-queries",), concept="masking")
def padding_mask_values(ctx):
    """padding_mask(lengths, T)[b][i][j] is True exactly when key j < lengths[b], for every query i."""
    lengths, T = [3, 1, 5, 0], 5
    ctx.describe(call=f"padding_mask({lengths}, {T})")
    ctx.expect_close(
        ctx.call("padding_mask", lengths, T),
        padding(lengths, T),
        f"padding_mask({lengths}, {T})",
        MASK_AXES,
        "len(lengths)×T×T",
        kind="bool",
    )


@check(
    points=2,
    after=("output-shapes",),
    catches=("no-scaling", "softmax-wrong-axis", "no-output-projection", "double-scaling", "weights-transposed"),
)
def single_head_plain_formula(ctx):
    """With one head the layer is softmax(q kᵀ / sqrt(D)) v, then Wo: the plain formula."""
    B, T, D = 1, 4, 4
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D, biases=False)
    compare_attention(ctx, x, p, 1, None, pass_mask=False)


@check(
    points=2,
    after=("output-shapes",),
    concept="scaling",
    catches=("no-scaling", "scale-by-model-width", "double-scaling", "scale-after-softmax"),
)
def scores_scaled_by_head_width(ctx):
    """Scores are divided by sqrt(head width) = sqrt(D / num_heads), not sqrt(D) and not 1.

    Catches no-scaling and scale-by-model-width: weights come out too sharp or too flat.
    """
    B, T, D, H = 1, 4, 8, 2
    x, p = tokens(ctx.rng, B, T, D, scale=2.0), params(ctx.rng, D, biases=False)
    compare_attention(ctx, x, p, H, None, pass_mask=False)


@check(points=3, after=("output-shapes",), concept="head-split", catches=("reshape-without-transpose", "heads-interleaved"))
def heads_use_contiguous_columns(ctx):
    """Head h uses projected columns h*hd:(h+1)*hd, and the heads are put back in that order.

    Catches reshape-without-transpose (tokens and heads mixed) and heads-interleaved.
    """
    B, T, D, H = 2, 3, 8, 4
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D, biases=False)
    compare_attention(ctx, x, p, H, None, pass_mask=False, biases="none")


@check(
    points=2,
    after=("output-shapes",),
    concept="masking",
    catches=("mask-inverted", "softmax-wrong-axis", "fill-value-too-weak", "softmax-across-batch"),
)
def allowed_weights_sum_to_one(ctx):
    """Each query's weights are 0 on blocked keys and sum to 1 over its allowed keys.

    Uses a padding mask: key j is allowed when j < length.
    """
    B, T, D, H = 3, 4, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    lengths = [4, 2, 1]
    mask = padding(lengths, T)
    ctx.describe(B=B, T=T, D=D, H=H, mask=f"padding_mask({lengths}, {T})")
    value = ctx.call("multi_head_attention", lists(x), lists(p), H, lists(mask), True)
    w = ctx.array(value[1] if isinstance(value, (tuple, list)) else None, "weights", (B, H, T, T), "B×H×T×T")
    blocked = np.broadcast_to(~mask[:, None], w.shape)
    if np.any(w[blocked] != 0):
        b, h, i, j = np.argwhere((w != 0) & blocked)[0]
        ctx.fail(
            f"weights on blocked keys must be exactly 0: batch {b}, head {h}, query {i}, key {j} "
            f"(length {lengths[b]}) has weight {w[b, h, i, j]:.6g}"
        )
    sums = w.sum(axis=-1)
    if not np.allclose(sums, 1.0, atol=1e-9):
        b, h, i = np.argwhere(~np.isclose(sums, 1.0, atol=1e-9))[0]
        ctx.fail(f"weights of batch {b}, head {h}, query {i} sum to {sums[b, h, i]:.6g}, not 1 (normalise over keys, the last axis)")


@check(points=2, after=("output-shapes",), catches=("mask-inverted", "softmax-wrong-axis"), concept="masking")
def uniform_when_queries_and_keys_are_zero(ctx):
    """With Wq = Wk = 0 every score is 0, so each query spreads its weight evenly over allowed keys."""
    B, T, D, H = 2, 5, 6, 3
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    p["Wq"] = np.zeros((D, D))
    p["Wk"] = np.zeros((D, D))
    p.pop("bq")
    p.pop("bk")
    compare_attention(ctx, x, p, H, padding([5, 3], T), masking="padding_mask([5, 3], 5)", Wq="zeros", Wk="zeros")


@check(points=3, after=("output-shapes",), concept="masking", catches=("blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks"))
def blocked_rows_output_bo(ctx):
    """A query with no allowed key gets zero weights in every head, so its output row is exactly bo."""
    B, T, D, H = 2, 4, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    mask = random_mask(ctx.rng, B, T, blocked_rows=2)
    out, _ = compare_attention(ctx, x, p, H, mask, masking="random, two fully blocked query rows per batch")
    rows = ~mask.any(axis=-1)
    if not exactly(out[rows], np.broadcast_to(p["bo"], out[rows].shape)):  # float32: bo rounded
        ctx.fail("fully blocked query rows must output bo exactly")


@check(points=2, after=("output-shapes",), catches=("softmax-overflow",), concept="numerical-stability")
def no_overflow_at_large_scores(ctx):
    """The whole layer stays finite and correct when scores reach the thousands."""
    B, T, D, H = 1, 4, 4, 2
    x, p = tokens(ctx.rng, B, T, D, scale=30.0), params(ctx.rng, D, scale=3.0)
    compare_attention(ctx, x, p, H, causal(B, T), masking="causal", x_scale=30)


@check(
    points=2,
    after=("output-shapes",),
    concept="masking",
    catches=("mask-inverted", "causal-off-by-one", "fill-value-too-weak", "mask-ignored"),
)
def causal_future_is_ignored(ctx):
    """Under a causal mask, changing token t changes no output row before t (and changes row t).

    Checked with the kit's causal mask and with the mask your own causal_mask(B, T) returns.
    """
    B, T, D, H = 1, 5, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D, biases=False)
    kit_mask = lists(causal(B, T))
    expect_causal_invariance(
        ctx,
        lambda xs: ctx.call("multi_head_attention", lists(xs), lists(p), H, kit_mask),
        x,
        t=3,
        describe={"D": D, "H": H, "mask": "causal (the kit's)"},
    )
    own = ctx.call("causal_mask", B, T)
    expect_causal_invariance(
        ctx,
        lambda xs: ctx.call("multi_head_attention", lists(xs), lists(p), H, own),
        x,
        t=3,
        describe={"D": D, "H": H, "mask": f"your causal_mask({B}, {T})"},
        what="output with your causal_mask",
    )


@check(points=1, after=("output-shapes",))
def mask_none_means_all_allowed(ctx):
    """mask=None gives the same result as an all-True mask."""
    B, T, D, H = 2, 3, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    ctx.describe(B=B, T=T, D=D, H=H)
    full = ctx.array(
        ctx.call("multi_head_attention", lists(x), lists(p), H, lists(np.ones((B, T, T), bool))),
        "output with an all-True mask",
        (B, T, D),
        "B×T×D",
    )
    ctx.expect_close(ctx.call("multi_head_attention", lists(x), lists(p), H, None), full, "output with mask=None", OUT_AXES, "B×T×D")


@check(points=2, after=("output-shapes",), catches=("biases-ignored",))
def biases_are_applied(ctx):
    """The optional biases bq, bv and bo are each added after their projection (one at a time).

    bk is not tested: q·bk is the same for every key of a row, and softmax ignores a constant.
    """
    B, T, D, H = 2, 3, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    weights = {k: v for k, v in p.items() if k.startswith("W")}
    for name in ("bq", "bv", "bo"):
        compare_attention(
            ctx, x, dict(weights, **{name: p[name] * 4}), H, None, pass_mask=False, what=f"only {name}", biases=f"{name} only, large"
        )


@check(points=1, after=("output-shapes",))
def biases_absent_or_none(ctx):
    """Biases missing from params, or present as None, mean 'no bias'."""
    B, T, D, H = 1, 3, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D, biases=False)
    compare_attention(ctx, x, p, H, None, pass_mask=False, what="no bias keys", biases="absent")
    with_none = dict(p, bq=None, bk=None, bv=None, bo=None)
    compare_attention(ctx, x, with_none, H, None, pass_mask=False, what="biases = None", biases="None")


@check(points=1, after=("output-shapes",), catches=("softmax-across-batch",))
def batches_are_independent(ctx):
    """Each batch element's output depends on that element only."""
    B, T, D, H = 3, 3, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    mask = random_mask(ctx.rng, B, T, blocked_rows=0)
    ctx.describe(B=B, T=T, D=D, H=H)
    together = ctx.array(ctx.call("multi_head_attention", lists(x), lists(p), H, lists(mask)), "output", (B, T, D), "B×T×D")
    for b in range(B):
        ctx.describe(batch=b)
        alone = ctx.call("multi_head_attention", lists(x[b : b + 1]), lists(p), H, lists(mask[b : b + 1]))
        ctx.expect_close(
            together[b : b + 1],
            ctx.array(alone, f"output of batch {b} alone", (1, T, D)),
            f"batch {b} run with the others vs alone",
            OUT_AXES,
            "1×T×D",
        )


@check(points=1)
def value_error_when_heads_do_not_divide(ctx):
    """num_heads that does not divide D, or num_heads < 1, raises ValueError mentioning divisibility."""
    x, p = tokens(ctx.rng, 1, 2, 6), params(ctx.rng, 6)
    expect_divisibility_error(ctx, "multi_head_attention", lambda h: (lists(x), lists(p), h))


@check(points=2, catches=("mutates-input",))
def inputs_left_unmodified(ctx):
    """No function writes into the lists or arrays it was given (checked with lists and NumPy arrays)."""
    B, T, D, H = 1, 3, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    mask = random_mask(ctx.rng, B, T)
    scores = ctx.rng.normal(0, 2, size=4)
    calls = [
        ("stable_softmax", (scores.copy(), np.array([True, True, False, True]))),
        ("stable_softmax", (scores.tolist(), [True, True, False, True])),
        ("padding_mask", ([2, 3], 3)),
        ("padding_mask", (np.array([2, 3]), 3)),
        ("multi_head_attention", (x.copy(), {k: v.copy() for k, v in p.items()}, H, mask.copy())),
        ("multi_head_attention", (lists(x), lists(p), H, lists(mask))),
    ]
    for fn, args in calls:
        expect_untouched(ctx, fn, ctx.outcome(fn, *args), "NumPy arrays" if isinstance(args[0], np.ndarray) else "lists")
    require_a_returned_call(ctx)


@check(points=1, after=("output-shapes",))
def accepts_lists_and_arrays(ctx):
    """NumPy arrays work as input as well as nested lists (either kind may be returned)."""
    B, T, D, H = 2, 3, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    mask = random_mask(ctx.rng, B, T)
    ctx.describe(B=B, T=T, D=D, H=H, input="NumPy arrays")
    got = ctx.call("multi_head_attention", x, p, H, mask)
    ctx.expect_close(got, ctx.oracle.multi_head_attention(x, p, H, mask), "output", OUT_AXES, "B×T×D")
    ctx.describe(input="NumPy array scores")
    got = ctx.call("stable_softmax", np.array([1.0, 2.0, 3.0]), np.array([True, False, True]))
    ctx.expect_close(got, ctx.oracle.stable_softmax([1.0, 2.0, 3.0], [True, False, True]), "softmax", ("entry",))


@check(
    points=5,
    after=("output-shapes",),
    catches=(
        "no-scaling",
        "scale-by-model-width",
        "reshape-without-transpose",
        "heads-interleaved",
        "softmax-overflow",
        "blocked-row-uniform",
        "blocked-row-nan",
        "mask-inverted",
        "softmax-wrong-axis",
        "no-output-projection",
        "biases-ignored",
        "additive-mask-leaks",
        "fill-value-too-weak",
        "double-scaling",
        "softmax-across-batch",
        "weights-transposed",
        "max-over-blocked",
        "mask-ignored",
        "scale-after-softmax",
    ),
)
def randomised_agreement(ctx):
    """Agrees with the reference on randomised hidden cases: shapes, masks, biases, large scores.

    Six cases with B up to 3, T up to 6, up to 4 heads, random/padding/causal/no masks (some query
    rows fully blocked) and one case with scores in the thousands. Rerun with the same --seed to
    get the same cases.
    """
    kinds = ["random", "padding", "causal", None, "random", "large"]
    for n, kind in enumerate(kinds):
        B, T = int(ctx.rng.integers(1, 4)), int(ctx.rng.integers(2, 7))
        H = int(ctx.rng.integers(2, 5))
        D = H * int(ctx.rng.integers(1, 4))
        big = kind == "large"
        x = tokens(ctx.rng, B, T, D, scale=25.0 if big else 1.0)
        p = params(ctx.rng, D, biases=bool(ctx.rng.random() < 0.7), scale=3.0 if big else 1.0)
        mask = mask_of_kind(ctx.rng, kind, B, T)
        compare_attention(ctx, x, p, H, mask, what=f"case {n + 1}", case=n + 1, masking=str(kind), biases="bq" in p)


# --- `attn-kit bench` -------------------------------------------------------------------------------


@SUITE.for_bench
def bench_inputs(rng, T, B, D, H):
    """B×T×D tokens, one set of projections, a causal mask: the [bench] table's call at length T."""
    from . import cases

    return (cases.tokens(rng, B, T, D), cases.params(rng, D), H), {"mask": cases.causal(B, T)}
