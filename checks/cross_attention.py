"""The graded suite for cross-attention: queries from x, keys and values from a context of
another length S. Expected values come from the kit's cross-attention reference; one check
also compares with mha-screen's reference (x attending to itself is self-attention).
"""

from __future__ import annotations

import numpy as np

from attn_kit.base.paths import solutions_dir
from attn_kit.compare.arrays import exactly
from attn_kit.compare.registry import Suite
from attn_kit.diagnosis.diagnose import load_module

from .cases import WORKED_PARAMS, causal, hot_blocked_tokens, identity_projections, lists, params, random_mask, tokens
from .verdicts import OUT_AXES, expect_causal_invariance, expect_divisibility_error, expect_out_and_weights, expect_untouched

SUITE = Suite("cross-attention")
check = SUITE.check

FN = "cross_attention"


def key_padding(lengths, T: int, S: int) -> np.ndarray:
    """B×T×S: query i of batch b may see context position j when j < lengths[b]."""
    n = np.asarray(lengths).reshape(-1, 1, 1)
    return np.broadcast_to(np.arange(S).reshape(1, 1, S) < n, (len(lengths), T, S)).copy()


def compare_cross(ctx, x, c, p, H, mask=None, pass_mask=True, what="", expected=None, arrays=False, **kw):
    """Call cross_attention(return_weights=True) and compare out (B×T×D) and weights (B×H×T×S)."""
    B, T, D = np.shape(x)
    S = np.shape(c)[1]
    sent = (x, c, p) if arrays else (lists(x), lists(c), lists(p))
    extra = {"mask": mask if arrays else lists(mask)} if pass_mask else {}
    ctx.describe(B=B, T=T, S=S, D=D, H=H, **kw)
    value = ctx.call(FN, *sent, H, **extra, return_weights=True)
    if expected is None:
        expected = ctx.oracle.cross_attention(x, c, p, H, mask, return_weights=True)
    return expect_out_and_weights(ctx, value, expected, what, "B×H×T×S")


# --- shapes and the public example -------------------------------------------------------------


@check(points=2, public=True, concept="cross-attention", catches=("kv-from-queries", "transpose-reverses-all-axes"))
def output_shapes(ctx):
    """Output is B×T×D (one row per query); weights are B×H×T×S (queries × context positions).

    T=3 queries attend over S=5 context positions, so a T×T or S×S anywhere is a shape failure.
    """
    B, T, S, D, H = 2, 3, 5, 8, 2
    x, c, p = tokens(ctx.rng, B, T, D), tokens(ctx.rng, B, S, D), params(ctx.rng, D)
    ctx.describe(B=B, T=T, S=S, D=D, H=H, return_weights=False)
    ctx.array(ctx.call(FN, lists(x), lists(c), lists(p), H), "output", (B, T, D), "B×T×D")
    ctx.describe(return_weights=True)
    value = ctx.call(FN, lists(x), lists(c), lists(p), H, return_weights=True)
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        ctx.fail(f"with return_weights=True the function must return a pair (out, weights); it returned {type(value).__name__}")
    ctx.array(value[0], "output", (B, T, D), "B×T×D")
    ctx.array(value[1], "weights", (B, H, T, S), "B×H×T×S (keys and values come from the context)")


PUBLIC_X = [[[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0]]]
PUBLIC_CONTEXT = [[[1.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 1.0], [1.0, 1.0, -1.0, 2.0]]]
PUBLIC_PARAMS = WORKED_PARAMS
PUBLIC_MASK = [[[True, True, True], [True, False, True]]]


@check(
    points=2,
    public=True,
    after=("output-shapes",),
    catches=(
        "no-scaling",
        "mask-inverted",
        "reshape-without-transpose",
        "kv-from-queries",
        "double-scaling",
        "weights-transposed",
        "softmax-wrong-axis",
        "heads-interleaved",
        "biases-ignored",
        "no-output-projection",
        "fill-value-too-weak",
        "scale-by-model-width",
    ),
)
def public_cross_example(ctx):
    """The statement's worked example: 2 queries over a context of 3, two heads, one key masked."""
    x, c = np.array(PUBLIC_X), np.array(PUBLIC_CONTEXT)
    p = {k: np.array(v) for k, v in PUBLIC_PARAMS.items()}
    compare_cross(ctx, x, c, p, 2, np.array(PUBLIC_MASK), masking="the statement's mask", example="the worked example in the statement")


# --- what cross-attention is ---------------------------------------------------------------------


@check(points=3, after=("output-shapes",), catches=("kv-from-queries",), concept="cross-attention")
def keys_and_values_come_from_the_context(ctx):
    """Keys and values are projected from the context, queries from x (checked with T = S, x ≠ context)."""
    B, T, D, H = 2, 4, 8, 2
    x, c, p = tokens(ctx.rng, B, T, D), tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    compare_cross(ctx, x, c, p, H, None, pass_mask=False, context="a different sequence of the same length")


@check(points=1, after=("output-shapes",), concept="cross-attention")
def context_equal_to_x_is_self_attention(ctx):
    """With context = x the layer is mha-screen's self-attention (same mask, same numbers)."""
    B, T, D, H = 2, 3, 8, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    mask = random_mask(ctx.rng, B, T)
    mha = load_module(str(solutions_dir("mha-screen") / "reference_numpy.py"))
    compare_cross(
        ctx,
        x,
        x,
        p,
        H,
        mask,
        expected=mha.multi_head_attention(x, p, H, mask, return_weights=True),
        masking="random",
        context="x itself",
        expected_from="mha-screen reference",
    )


@check(points=2, after=("output-shapes",), catches=("reshape-without-transpose",), concept="head-split")
def lengths_differ_both_ways(ctx):
    """Works for a context longer than x and for one shorter, with the head split of each by columns."""
    for B, T, S, D, H in ((1, 2, 6, 8, 4), (2, 5, 2, 6, 3)):
        x, c, p = tokens(ctx.rng, B, T, D), tokens(ctx.rng, B, S, D), params(ctx.rng, D, biases=False)
        compare_cross(ctx, x, c, p, H, None, pass_mask=False, what=f"T={T}, S={S}")


@check(
    points=2,
    after=("output-shapes",),
    concept="scaling",
    catches=("no-scaling", "double-scaling", "scale-by-model-width", "scale-after-softmax"),
)
def scores_scaled_by_head_width(ctx):
    """Scores are divided by sqrt(head width) = sqrt(D / num_heads)."""
    B, T, S, D, H = 1, 3, 4, 8, 2
    x, c = tokens(ctx.rng, B, T, D, scale=2.0), tokens(ctx.rng, B, S, D, scale=2.0)
    compare_cross(ctx, x, c, params(ctx.rng, D, biases=False), H, None, pass_mask=False)


@check(points=3, after=("output-shapes",), concept="head-split", catches=("reshape-without-transpose", "heads-interleaved"))
def heads_use_contiguous_columns(ctx):
    """Head h uses projected columns h*hd:(h+1)*hd of the queries, keys and values alike."""
    B, T, S, D, H = 2, 3, 5, 8, 4
    x, c, p = tokens(ctx.rng, B, T, D), tokens(ctx.rng, B, S, D), params(ctx.rng, D, biases=False)
    compare_cross(ctx, x, c, p, H, None, pass_mask=False, biases="none")


# --- masks ------------------------------------------------------------------------------------------


@check(points=2, after=("output-shapes",), concept="masking", catches=("mask-inverted", "fill-value-too-weak", "mask-ignored"))
def mask_true_means_allowed(ctx):
    """The B×T×S mask is True where query i may attend to context position j (here: padded contexts)."""
    B, T, S, D, H = 3, 2, 5, 4, 2
    x, c, p = tokens(ctx.rng, B, T, D), tokens(ctx.rng, B, S, D), params(ctx.rng, D)
    lengths = [5, 3, 1]
    compare_cross(ctx, x, c, p, H, key_padding(lengths, T, S), masking=f"context lengths {lengths}")


@check(points=3, after=("output-shapes",), concept="masking", catches=("blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks"))
def blocked_rows_output_bo(ctx):
    """A query with no allowed context position gets zero weights in every head; its output is exactly bo."""
    B, T, S, D, H = 2, 4, 3, 4, 2
    x, c, p = tokens(ctx.rng, B, T, D), tokens(ctx.rng, B, S, D), params(ctx.rng, D)
    mask = random_mask(ctx.rng, B, T, S, blocked_rows=2)
    out, _ = compare_cross(ctx, x, c, p, H, mask, masking="random, two fully blocked queries per batch")
    rows = ~mask.any(axis=-1)
    if not exactly(out[rows], np.broadcast_to(p["bo"], out[rows].shape)):  # float32: bo rounded
        ctx.fail("fully blocked query rows must output bo exactly")


@check(points=1, after=("output-shapes",))
def mask_none_means_all_allowed(ctx):
    """mask=None gives the same result as an all-True B×T×S mask."""
    B, T, S, D, H = 2, 2, 3, 4, 2
    x, c, p = tokens(ctx.rng, B, T, D), tokens(ctx.rng, B, S, D), params(ctx.rng, D)
    ctx.describe(B=B, T=T, S=S, D=D, H=H)
    full = ctx.array(
        ctx.call(FN, lists(x), lists(c), lists(p), H, lists(np.ones((B, T, S), bool))), "output with an all-True mask", (B, T, D), "B×T×D"
    )
    ctx.expect_close(ctx.call(FN, lists(x), lists(c), lists(p), H, None), full, "output with mask=None", OUT_AXES, "B×T×D")


@check(points=2, after=("output-shapes",), catches=("softmax-overflow",), concept="numerical-stability")
def no_overflow_at_large_scores(ctx):
    """The layer stays finite and correct when scores reach the thousands."""
    B, T, S, D, H = 1, 3, 4, 4, 2
    x, c = tokens(ctx.rng, B, T, D, scale=30.0), tokens(ctx.rng, B, S, D, scale=30.0)
    compare_cross(ctx, x, c, params(ctx.rng, D, scale=3.0), H, random_mask(ctx.rng, B, T, S, blocked_rows=0), masking="random", scale=30)


@check(points=2, after=("output-shapes",), concept="numerical-stability", catches=("max-over-blocked", "softmax-overflow"))
def stable_with_a_blocked_score_far_above(ctx):
    """Large scores stay finite, and a blocked context position scoring far above the allowed ones takes nothing.

    The last context position scores about 3000 with every query and is blocked for all but the
    last query; the allowed scores are about 1250, so exp of a raw score overflows, and a max
    taken over the blocked position too makes every allowed weight underflow to 0. No biases.
    """
    B, T, S, D, H = 2, 3, 4, 8, 2
    x = tokens(ctx.rng, B, T, D, scale=0.1) + 25.0
    c = hot_blocked_tokens(ctx.rng, B, S, D)
    mask = np.ones((B, T, S), dtype=bool)
    mask[:, :-1, -1] = False
    compare_cross(
        ctx,
        x,
        c,
        identity_projections(D, rng=ctx.rng),
        H,
        mask,
        Wq="identity",
        Wk="identity",
        masking="the last context position blocked for all but the last query",
        scores="about 1250 allowed, about 3000 for the blocked position",
    )


@check(points=2, after=("output-shapes",), concept="masking", catches=("mask-inverted", "softmax-wrong-axis", "fill-value-too-weak"))
def uniform_when_queries_are_zero(ctx):
    """With Wq = 0 (and no bq) every score is 0, so each query spreads its weight evenly over its allowed positions.

    Context lengths 5 and 2 (T = 3 queries, S = 5): bk is kept, since q·bk is the same for every key.
    """
    B, T, S, D, H = 2, 3, 5, 6, 3
    x, c, p = tokens(ctx.rng, B, T, D), tokens(ctx.rng, B, S, D), params(ctx.rng, D)
    p["Wq"] = np.zeros((D, D))
    p.pop("bq")
    compare_cross(ctx, x, c, p, H, key_padding([5, 2], T, S), masking="context lengths [5, 2]", Wq="zeros")


@check(points=2, after=("output-shapes",), catches=("mask-inverted",), concept="masking")
def causal_future_is_ignored(ctx):
    """With a causal mask over a context as long as x, editing context position t changes no output row before t."""
    B, T, D, H = 1, 5, 8, 2
    x, c, p = tokens(ctx.rng, B, T, D), tokens(ctx.rng, B, T, D), params(ctx.rng, D, biases=False)
    expect_causal_invariance(
        ctx,
        lambda cs: ctx.call(FN, lists(x), lists(cs), lists(p), H, lists(causal(B, T))),
        c,
        t=3,
        describe={"S": T, "D": D, "H": H, "mask": "causal", "edited": "the context"},
    )


# --- the rest ---------------------------------------------------------------------------------------


@check(points=1, after=("output-shapes",), catches=("biases-ignored",))
def biases_absent_or_none(ctx):
    """Biases are added when given; missing from params or None mean 'no bias'."""
    B, T, S, D, H = 1, 2, 3, 4, 2
    x, c, p = tokens(ctx.rng, B, T, D), tokens(ctx.rng, B, S, D), params(ctx.rng, D)
    compare_cross(ctx, x, c, p, H, None, pass_mask=False, what="all biases", biases="all four")
    bare = {k: v for k, v in p.items() if k.startswith("W")}
    compare_cross(ctx, x, c, bare, H, None, pass_mask=False, what="no bias keys", biases="absent")
    compare_cross(ctx, x, c, dict(bare, bq=None, bk=None, bv=None, bo=None), H, None, pass_mask=False, what="biases = None", biases="None")


@check(points=1)
def value_error_when_heads_do_not_divide(ctx):
    """num_heads that does not divide D, or num_heads < 1, raises ValueError mentioning divisibility."""
    x, c, p = tokens(ctx.rng, 1, 2, 6), tokens(ctx.rng, 1, 3, 6), params(ctx.rng, 6)
    expect_divisibility_error(ctx, FN, lambda h: (lists(x), lists(c), lists(p), h))


@check(points=2, catches=("mutates-input",))
def inputs_left_unmodified(ctx):
    """cross_attention writes into none of x, context, params and mask (lists and NumPy arrays)."""
    B, T, S, D, H = 1, 2, 3, 4, 2
    x, c = tokens(ctx.rng, B, T, D), tokens(ctx.rng, B, S, D)
    p = params(ctx.rng, D, biases=False)
    mask = random_mask(ctx.rng, B, T, S)
    for kind, args in (
        ("lists", (lists(x), lists(c), lists(p), H, lists(mask))),
        ("NumPy arrays", (x.copy(), c.copy(), {k: v.copy() for k, v in p.items()}, H, mask.copy())),
    ):
        ctx.describe(input=kind, biases="absent")
        ctx.call(FN, *args)
        expect_untouched(ctx, FN, ctx.last_call.outcome, kind)


@check(points=1, after=("output-shapes",))
def accepts_lists_and_arrays(ctx):
    """NumPy arrays work as input as well as nested lists (either kind may be returned)."""
    B, T, S, D, H = 2, 3, 4, 4, 2
    x, c, p = tokens(ctx.rng, B, T, D), tokens(ctx.rng, B, S, D), params(ctx.rng, D)
    compare_cross(ctx, x, c, p, H, random_mask(ctx.rng, B, T, S), arrays=True, input="NumPy arrays")


@check(
    points=5,
    after=("output-shapes",),
    catches=(
        "no-scaling",
        "reshape-without-transpose",
        "softmax-overflow",
        "blocked-row-uniform",
        "blocked-row-nan",
        "mask-inverted",
        "kv-from-queries",
        "additive-mask-leaks",
        "fill-value-too-weak",
        "double-scaling",
        "softmax-across-batch",
        "heads-interleaved",
        "no-output-projection",
        "biases-ignored",
        "softmax-wrong-axis",
        "weights-transposed",
        "scale-by-model-width",
        "mask-ignored",
        "scale-after-softmax",
    ),
)
def randomised_agreement(ctx):
    """Agrees with the reference on randomised hidden cases: lengths, heads, masks, biases, large scores.

    Five cases with B up to 3, T and S up to 6 (independently), up to 4 heads, random, padded
    or no masks (some queries fully blocked) and one case with scores in the thousands. Rerun
    with the same --seed to get the same cases.
    """
    for n, kind in enumerate(("random", "padding", None, "random", "large")):
        B, T, S = int(ctx.rng.integers(1, 4)), int(ctx.rng.integers(1, 7)), int(ctx.rng.integers(1, 7))
        H = int(ctx.rng.integers(1, 5))
        D = H * int(ctx.rng.integers(1, 4))
        big = kind == "large"
        x, c = tokens(ctx.rng, B, T, D, scale=25.0 if big else 1.0), tokens(ctx.rng, B, S, D, scale=25.0 if big else 1.0)
        p = params(ctx.rng, D, biases=bool(ctx.rng.random() < 0.7), scale=3.0 if big else 1.0)
        if kind in ("random", "large"):
            mask = random_mask(ctx.rng, B, T, S)
        elif kind == "padding":
            mask = key_padding(ctx.rng.integers(0, S + 1, size=B).tolist(), T, S)
        else:
            mask = None
        compare_cross(ctx, x, c, p, H, mask, what=f"case {n + 1}", case=n + 1, masking=str(kind), biases="bq" in p)


# --- `attn-kit bench` -------------------------------------------------------------------------------


@SUITE.for_bench
def bench_inputs(rng, T, B, D, H):
    """B×T×D queries attending to a context of the same length S = T, no mask."""
    from . import cases

    x, context = cases.tokens(rng, B, T, D), cases.tokens(rng, B, T, D)
    return (x, context, cases.params(rng, D), H), {"mask": None}
