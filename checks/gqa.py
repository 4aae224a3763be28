"""The graded suite for gqa: grouped-query attention (and its two ends, MHA and MQA).

Expected values come from the kit's gqa reference, except where a check states an equivalence:
then they come from mha-screen's reference on plain multi-head parameters whose key/value
columns are repeated for each group (cases.repeat_kv_heads), a computation that shares no code
with the gqa reference.
"""

from __future__ import annotations

import numpy as np

from attn_kit.base.paths import solutions_dir
from attn_kit.base.records import CallStatus
from attn_kit.compare.arrays import exactly
from attn_kit.compare.registry import Suite
from attn_kit.diagnosis.diagnose import load_module

from .cases import (
    WORKED_X,
    causal,
    gqa_params,
    hot_blocked_tokens,
    identity_projections,
    lists,
    mask_of_kind,
    padding,
    random_mask,
    repeat_kv_heads,
    tokens,
)
from .verdicts import expect_causal_invariance, expect_out_and_weights, expect_untouched

SUITE = Suite("gqa")
check = SUITE.check

FN = "grouped_query_attention"


def mha_reference():
    return load_module(str(solutions_dir("mha-screen") / "reference_numpy.py"))


def as_mha(x, p, H, n_kv, mask):
    """(out, weights) of mha-screen's reference with each K/V head repeated for its group."""
    return mha_reference().multi_head_attention(np.asarray(x), repeat_kv_heads(p, H, n_kv), H, mask, return_weights=True)


def compare_gqa(ctx, x, p, H, n_kv, mask=None, pass_mask=True, what="", expected=None, arrays=False, **kw):
    """Call grouped_query_attention(return_weights=True); compare out and weights with `expected`
    (default: the gqa reference)."""
    B, T, D = np.shape(x)
    sent = (x, p) if arrays else (lists(x), lists(p))
    extra = {"mask": mask if arrays else lists(mask)} if pass_mask else {}
    ctx.describe(B=B, T=T, D=D, num_heads=H, num_kv_heads=n_kv, **kw)
    value = ctx.call(FN, *sent, H, n_kv, **extra, return_weights=True)
    if expected is None:
        expected = ctx.oracle.grouped_query_attention(x, p, H, n_kv, mask, return_weights=True)
    return expect_out_and_weights(ctx, value, expected, what)


# --- shapes and the public example -----------------------------------------------------------------


@check(points=2, public=True, catches=("weights-transposed", "transpose-reverses-all-axes"))
def output_shapes(ctx):
    """Output is B×T×D; with return_weights=True the weights are B×H×T×T (H query heads).

    Four query heads and two key/value heads: Wk and Wv are D×(num_kv_heads·hd).
    """
    B, T, D, H, n_kv = 2, 3, 8, 4, 2
    x, p = tokens(ctx.rng, B, T, D), gqa_params(ctx.rng, D, H, n_kv)
    ctx.describe(B=B, T=T, D=D, num_heads=H, num_kv_heads=n_kv, return_weights=False)
    ctx.array(ctx.call(FN, lists(x), lists(p), H, n_kv), "output", (B, T, D), "B×T×D")
    ctx.describe(return_weights=True)
    value = ctx.call(FN, lists(x), lists(p), H, n_kv, return_weights=True)
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        ctx.fail(f"with return_weights=True the function must return a pair (out, weights); it returned {type(value).__name__}")
    ctx.array(value[0], "output", (B, T, D), "B×T×D")
    ctx.array(value[1], "weights", (B, H, T, T), "B×H×T×T (one map per QUERY head)")


PUBLIC_X = WORKED_X  # mha-screen's tokens, with K/V weights of one shared head
PUBLIC_PARAMS = {
    "Wq": [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]],
    "Wk": [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]],
    "Wv": [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 0.0]],
    "Wo": [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]],
    "bo": [0.5, 0.0, 0.0, -0.5],
}


@check(
    points=2,
    public=True,
    after=("output-shapes",),
    catches=(
        "no-scaling",
        "scale-by-model-width",
        "mask-inverted",
        "double-scaling",
        "softmax-wrong-axis",
        "heads-interleaved",
        "reshape-without-transpose",
        "biases-ignored",
        "no-output-projection",
        "fill-value-too-weak",
    ),
)
def public_gqa_example(ctx):
    """The statement's worked example: B=1, T=3, D=4, two query heads sharing one K/V head, causal."""
    x = np.array(PUBLIC_X)
    p = {k: np.array(v) for k, v in PUBLIC_PARAMS.items()}
    compare_gqa(ctx, x, p, 2, 1, causal(1, 3), masking="causal_mask(1, 3)", example="the worked example in the statement")


# --- what grouped-query attention is ---------------------------------------------------------------


@check(
    points=4,
    after=("output-shapes",),
    concept="grouped-query",
    catches=("kv-head-mapping-modulo", "heads-interleaved", "reshape-without-transpose"),
)
def equals_mha_with_repeated_kv(ctx):
    """Equals multi-head attention whose key/value heads are each repeated for their group.

    Query head h reads key/value head h // (num_heads // num_kv_heads), so neighbouring query
    heads share. Catches kv-head-mapping-modulo (h % num_kv_heads interleaves the groups).
    Expected values: mha-screen's reference with the K/V columns repeated.
    """
    for B, T, D, H, n_kv in ((2, 4, 8, 4, 2), (1, 3, 12, 6, 3)):
        x, p = tokens(ctx.rng, B, T, D), gqa_params(ctx.rng, D, H, n_kv)
        mask = causal(B, T)
        compare_gqa(
            ctx,
            x,
            p,
            H,
            n_kv,
            mask,
            expected=as_mha(x, p, H, n_kv, mask),
            masking="causal",
            expected_from="mha-screen reference, K/V heads repeated",
        )
    ctx.note(
        "K/V cache saving: with num_heads=4 and num_kv_heads=2 a decoder caches 2·B·T·(num_kv_heads·hd) "
        "numbers instead of 2·B·T·D, a factor num_heads / num_kv_heads = 2 smaller (6 / 3 = 2 for the "
        "second case; 32 query heads over 8 K/V heads would be 4×)"
    )


@check(points=2, after=("output-shapes",), concept="grouped-query")
def kv_heads_equal_heads_is_mha(ctx):
    """num_kv_heads == num_heads is plain multi-head attention (mha-screen's function)."""
    B, T, D, H = 2, 4, 8, 2
    x, p = tokens(ctx.rng, B, T, D), gqa_params(ctx.rng, D, H, H)
    mask = random_mask(ctx.rng, B, T)
    expected = mha_reference().multi_head_attention(x, p, H, mask, return_weights=True)
    compare_gqa(ctx, x, p, H, H, mask, expected=expected, masking="random", expected_from="mha-screen reference, same parameters")
    ctx.note("K/V cache saving factor num_heads / num_kv_heads = 1: no saving, this is MHA")


@check(points=2, after=("output-shapes",), catches=("kv-head-mapping-modulo",), concept="grouped-query")
def one_kv_head_is_multi_query(ctx):
    """num_kv_heads == 1 is multi-query attention: every query head reads the same keys and values."""
    B, T, D, H = 2, 4, 8, 4
    x, p = tokens(ctx.rng, B, T, D), gqa_params(ctx.rng, D, H, 1)
    mask = causal(B, T)
    compare_gqa(
        ctx,
        x,
        p,
        H,
        1,
        mask,
        expected=as_mha(x, p, H, 1, mask),
        masking="causal",
        expected_from="mha-screen reference, the one K/V head repeated",
    )
    ctx.note(f"K/V cache saving factor num_heads / num_kv_heads = {H}: the cache is {H}× smaller than MHA's")


# --- the attention itself --------------------------------------------------------------------------


@check(
    points=2,
    after=("output-shapes",),
    concept="scaling",
    catches=("no-scaling", "scale-by-model-width", "double-scaling", "scale-after-softmax"),
)
def scores_scaled_by_head_width(ctx):
    """Scores are divided by sqrt(hd) with hd = D / num_heads (not sqrt(D), not 1)."""
    B, T, D, H, n_kv = 1, 4, 8, 4, 2
    x, p = tokens(ctx.rng, B, T, D, scale=2.0), gqa_params(ctx.rng, D, H, n_kv, biases=False)
    compare_gqa(ctx, x, p, H, n_kv, None, pass_mask=False)


@check(
    points=2,
    after=("output-shapes",),
    concept="masking",
    catches=("mask-inverted", "fill-value-too-weak", "softmax-wrong-axis", "mask-ignored"),
)
def mask_true_means_allowed(ctx):
    """Masks are B×T×T with True = allowed: blocked keys get weight exactly 0, allowed ones sum to 1."""
    B, T, D, H, n_kv = 3, 4, 8, 4, 2
    x, p = tokens(ctx.rng, B, T, D), gqa_params(ctx.rng, D, H, n_kv, biases=False)
    lengths = [4, 2, 1]
    compare_gqa(ctx, x, p, H, n_kv, padding(lengths, T), masking=f"padding_mask({lengths}, {T})")


@check(points=3, after=("output-shapes",), concept="masking", catches=("blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks"))
def blocked_rows_output_bo(ctx):
    """A query with no allowed key gets zero weights in every head, so its output row is exactly bo."""
    B, T, D, H, n_kv = 2, 4, 8, 4, 2
    x, p = tokens(ctx.rng, B, T, D), gqa_params(ctx.rng, D, H, n_kv)
    mask = random_mask(ctx.rng, B, T, blocked_rows=2)
    out, _ = compare_gqa(ctx, x, p, H, n_kv, mask, masking="random, two fully blocked query rows per batch")
    rows = ~mask.any(axis=-1)
    if not exactly(out[rows], np.broadcast_to(p["bo"], out[rows].shape)):  # float32: bo rounded
        ctx.fail("fully blocked query rows must output bo exactly")


@check(points=2, after=("output-shapes",), catches=("softmax-overflow",), concept="numerical-stability")
def no_overflow_at_large_scores(ctx):
    """The layer stays finite and correct when scores reach the thousands."""
    B, T, D, H, n_kv = 1, 4, 8, 4, 2
    x, p = tokens(ctx.rng, B, T, D, scale=30.0), gqa_params(ctx.rng, D, H, n_kv, scale=3.0)
    compare_gqa(ctx, x, p, H, n_kv, causal(B, T), masking="causal", x_scale=30)


@check(points=2, after=("output-shapes",), concept="numerical-stability", catches=("max-over-blocked", "softmax-overflow"))
def stable_with_a_blocked_score_far_above(ctx):
    """Large scores stay finite, and a blocked key scoring far above the allowed ones takes nothing.

    Causal mask; the last token's key scores about 2000 with every query while the allowed
    scores are about 900, so exp of a raw score overflows, and a max taken over the blocked key
    too makes every allowed weight underflow to 0. No biases.
    """
    B, T, D, H, n_kv = 2, 4, 8, 4, 2
    x = hot_blocked_tokens(ctx.rng, B, T, D)
    p = identity_projections(D, n_kv * (D // H), ctx.rng)
    compare_gqa(
        ctx,
        x,
        p,
        H,
        n_kv,
        causal(B, T),
        masking="causal",
        Wq="identity",
        Wk="identity",
        scores="about 900 allowed, about 2000 for the blocked last key",
    )


@check(points=2, after=("output-shapes",), concept="masking", catches=("mask-inverted", "softmax-wrong-axis", "fill-value-too-weak"))
def uniform_when_queries_are_zero(ctx):
    """With Wq = 0 (and no bq) every score is 0, so each query spreads its weight evenly over its allowed keys.

    Padding mask; bk is kept (it cannot make scores differ: q·bk is the same for every key).
    """
    B, T, D, H, n_kv = 2, 5, 8, 4, 2
    x, p = tokens(ctx.rng, B, T, D), gqa_params(ctx.rng, D, H, n_kv)
    p["Wq"] = np.zeros((D, D))
    p.pop("bq")
    compare_gqa(ctx, x, p, H, n_kv, padding([5, 3], T), masking="padding_mask([5, 3], 5)", Wq="zeros")


@check(points=2, after=("output-shapes",), catches=("mask-inverted",), concept="masking")
def causal_future_is_ignored(ctx):
    """Under a causal mask, changing token t changes no output row before t (and changes row t)."""
    B, T, D, H, n_kv = 1, 5, 8, 4, 2
    x, p = tokens(ctx.rng, B, T, D), gqa_params(ctx.rng, D, H, n_kv, biases=False)
    expect_causal_invariance(
        ctx,
        lambda xs: ctx.call(FN, lists(xs), lists(p), H, n_kv, lists(causal(B, T))),
        x,
        t=3,
        describe={"num_heads": H, "num_kv_heads": n_kv, "mask": "causal"},
    )


@check(points=1, after=("output-shapes",), catches=("biases-ignored",))
def biases_are_applied(ctx):
    """bq, bo (length D) and bv (length num_kv_heads·hd) are each added after their projection (one at a time).

    bk is not tested: q·bk is the same for every key of a row, and softmax ignores a constant.
    """
    B, T, D, H, n_kv = 2, 3, 8, 4, 2
    x, p = tokens(ctx.rng, B, T, D), gqa_params(ctx.rng, D, H, n_kv)
    weights = {k: v for k, v in p.items() if k.startswith("W")}
    for name in ("bq", "bv", "bo"):
        compare_gqa(
            ctx, x, dict(weights, **{name: p[name] * 4}), H, n_kv, None, pass_mask=False, what=f"only {name}", biases=f"{name} only, large"
        )
    compare_gqa(ctx, x, dict(p, bq=None, bk=None, bv=None, bo=None), H, n_kv, None, pass_mask=False, what="biases = None", biases="None")


@check(points=2)
def value_errors(ctx):
    """ValueError when num_kv_heads < 1, num_heads % num_kv_heads != 0, or D % num_heads != 0."""
    cases = (
        (8, 4, 3, "num_heads=4 is not a multiple of num_kv_heads=3"),
        (8, 4, 0, "num_kv_heads=0"),
        (6, 4, 2, "D=6 is not divisible by num_heads=4"),
    )
    for D, H, n_kv, why in cases:
        x = tokens(ctx.rng, 1, 2, D)
        p = gqa_params(ctx.rng, D, 4 if D % 4 == 0 else 2, max(n_kv, 1))
        ctx.describe(D=D, num_heads=H, num_kv_heads=n_kv)
        outcome = ctx.outcome(FN, lists(x), lists(p), H, n_kv)
        if outcome.status == CallStatus.RAISED and outcome.error.type == "ValueError":
            continue
        what = outcome.describe_failure() if not outcome.ok else "returned normally"
        ctx.fail(f"{why}: the call should raise ValueError; it {what}")


@check(points=2, catches=("mutates-input",))
def inputs_left_unmodified(ctx):
    """grouped_query_attention writes into none of its arguments (lists and NumPy arrays)."""
    B, T, D, H, n_kv = 1, 3, 8, 4, 2
    x = tokens(ctx.rng, B, T, D)
    p = gqa_params(ctx.rng, D, H, n_kv, biases=False)
    mask = random_mask(ctx.rng, B, T)
    for kind, args in (
        ("lists", (lists(x), lists(p), H, n_kv, lists(mask))),
        ("NumPy arrays", (x.copy(), {k: v.copy() for k, v in p.items()}, H, n_kv, mask.copy())),
    ):
        ctx.describe(input=kind, biases="absent")
        ctx.call(FN, *args)
        expect_untouched(ctx, FN, ctx.last_call.outcome, kind)


@check(points=1, after=("output-shapes",))
def accepts_lists_and_arrays(ctx):
    """NumPy arrays work as input as well as nested lists (either kind may be returned)."""
    B, T, D, H, n_kv = 2, 3, 8, 4, 2
    x, p = tokens(ctx.rng, B, T, D), gqa_params(ctx.rng, D, H, n_kv)
    compare_gqa(ctx, x, p, H, n_kv, random_mask(ctx.rng, B, T), arrays=True, input="NumPy arrays")


@check(
    points=5,
    after=("output-shapes",),
    catches=(
        "kv-head-mapping-modulo",
        "no-scaling",
        "scale-by-model-width",
        "softmax-overflow",
        "blocked-row-uniform",
        "blocked-row-nan",
        "mask-inverted",
        "additive-mask-leaks",
        "fill-value-too-weak",
        "double-scaling",
        "softmax-across-batch",
        "heads-interleaved",
        "max-over-blocked",
        "no-output-projection",
        "biases-ignored",
        "softmax-wrong-axis",
        "reshape-without-transpose",
        "mask-ignored",
        "scale-after-softmax",
    ),
)
def randomised_agreement(ctx):
    """Agrees with the reference on randomised hidden cases: head counts, masks, biases, large scores.

    Five cases with B up to 3, T up to 6, num_heads up to 8 and every num_kv_heads that divides
    it; random, padding, causal or no masks; one case with scores in the thousands. Rerun with
    the same --seed to get the same cases.
    """
    for n, kind in enumerate(("random", "padding", "causal", None, "large")):
        B, T = int(ctx.rng.integers(1, 4)), int(ctx.rng.integers(2, 7))
        H = int(ctx.rng.choice([2, 4, 6, 8]))
        n_kv = int(ctx.rng.choice([d for d in range(2, H) if H % d == 0] or [1]))
        D = H * int(ctx.rng.integers(1, 3))
        big = kind == "large"
        x = tokens(ctx.rng, B, T, D, scale=25.0 if big else 1.0)
        p = gqa_params(ctx.rng, D, H, n_kv, biases=bool(ctx.rng.random() < 0.7), scale=3.0 if big else 1.0)
        mask = mask_of_kind(ctx.rng, kind, B, T)
        compare_gqa(ctx, x, p, H, n_kv, mask, what=f"case {n + 1}", case=n + 1, masking=str(kind), biases="bq" in p)


# --- `attn-kit bench` -------------------------------------------------------------------------------


@SUITE.for_bench
def bench_inputs(rng, T, B, D, H, KV):
    """B×T×D tokens, query projections D×D and key/value projections D×(KV·D/H), a causal mask."""
    from . import cases

    kv_width = KV * (D // H)
    weights = cases.params(rng, D, names=("q", "o"))
    weights.update({f"W{n}": rng.normal(0.0, D**-0.5, size=(D, kv_width)).round(6) for n in "kv"})
    weights.update({f"b{n}": rng.normal(0.0, 0.5, size=kv_width).round(6) for n in "kv"})
    return (cases.tokens(rng, B, T, D), weights, H, KV), {"mask": cases.causal(B, T)}
