"""The graded suite for rope: rotary position embeddings on each head's queries and keys.

Expected values come from the kit's NumPy reference, and several checks state a property of
rotations instead of agreement: position 0 is the identity, norms are kept, rotating by p then by
q is rotating by p + q, and shifting every position by one constant leaves the attention
unchanged (only relative positions matter). The mha-screen properties carry over: causal
invariance, fully blocked rows and stability at large scores.
"""

from __future__ import annotations

import re

import numpy as np

from attn_kit.compare.arrays import EPS32, exactly, float32_values
from attn_kit.compare.registry import Suite

from .cases import causal, hot_blocked_tokens, identity_projections, lists, mask_of_kind, padding, params, random_mask, tokens
from .verdicts import expect_divisibility_error, expect_out_and_weights, expect_untouched, far_score_tolerance, require_a_returned_call

SUITE = Suite("rope")
check = SUITE.check

FN = "rope_attention"
ROT_AXES = ("batch", "head", "position", "feature")
PROPERTY_RTOL, PROPERTY_ATOL = 1e-7, 1e-9  # two float64 results of the candidate's own code
F32_ANGLE = 32.0  # float32 angle rounding, in eps32 per unit of |position|


def property_tolerance(positions, *values, rtol: float = PROPERTY_RTOL) -> dict:
    """rtol/atol for comparing two results of the candidate's own rotations (a property, not the
    reference). float64 results: 1e-9 + 1e-7·|x|. float32 results (every production RoPE computes its
    angles in float32, and the statement allows float32): an angle p·θ rounded in float32 is off by a
    few eps32·|p| radians, so each entry may move by F32_ANGLE·eps32·max(1, |p|) times its row's scale.
    A rotation that ignores positions, or rotates v, is off by far more."""
    if not any(float32_values(v) for v in values):
        return {"rtol": rtol, "atol": PROPERTY_ATOL}
    reach = max(1.0, float(np.max(np.abs(np.asarray(positions, dtype=float)))))
    scale = max(float(np.nanmax(np.abs(np.asarray(v, dtype=float)))) for v in values)
    return {"rtol": rtol, "atol": PROPERTY_ATOL + F32_ANGLE * EPS32 * reach * scale, "float32_ok": False}


def head_vectors(rng, B, H, T, hd, scale=1.0):
    return (rng.normal(0.0, scale, size=(B, H, T, hd))).round(6)


def random_positions(rng, T, low=-50, high=200):
    """Unsorted positions, a negative one and a repeat included when T allows."""
    pos = rng.integers(low, high, size=T)
    if T >= 3:
        pos[1] = pos[0]  # a repeated position
        pos[2] = -abs(int(pos[2])) - 1  # a negative one
    return pos.tolist()


def compare_rope(ctx, x, positions, base=None, what="rotated vectors", **kw):
    B, H, T, hd = np.shape(x)
    ctx.describe(B=B, H=H, T=T, hd=hd, positions=list(positions), **({} if base is None else {"base": base}), **kw)
    extra = {} if base is None else {"base": base}
    got = ctx.call("apply_rope", lists(x), list(positions), **extra)
    expected = ctx.oracle.apply_rope(x, positions, **extra)
    if float32_values(got):  # float32 angles: off by a few eps32·|p| radians, however they are computed
        return ctx.expect_close(got, expected, what, ROT_AXES, "B×H×T×hd", **property_tolerance(positions, got, rtol=1e-6))
    return ctx.expect_close(got, expected, what, ROT_AXES, "B×H×T×hd")


def rotated(ctx, x, positions, what="apply_rope output"):
    """apply_rope(x, positions) as an array of x's shape."""
    got = ctx.call("apply_rope", lists(x), list(positions))
    return ctx.array(got, what, np.shape(x), "B×H×T×hd")


def compare_attention(ctx, x, p, num_heads, positions=None, mask=None, what="", arrays=False, large=False, **kw):
    """Call rope_attention(return_weights=True) and compare (out, weights) with the reference.

    large=True (scores in the hundreds or thousands): a float32 result is held to the rounding of
    float32 scores that large (verdicts.far_score_tolerance) instead of the reference's float32
    twin, whose row-by-row rounding a differently ordered float32 computation need not share."""
    B, T, D = np.shape(x)
    ctx.describe(B=B, T=T, D=D, H=num_heads, positions="default 0..T-1" if positions is None else np.asarray(positions).tolist(), **kw)
    sent = (x, p) if arrays else (lists(x), lists(p))
    kwargs = {"mask": mask if arrays else lists(mask)}
    if positions is not None:
        kwargs["positions"] = positions if arrays else list(np.asarray(positions).tolist())
    value = ctx.call(FN, *sent, num_heads, **kwargs, return_weights=True)
    expected = ctx.oracle.rope_attention(x, p, num_heads, positions, mask, return_weights=True)
    if large and isinstance(value, (tuple, list)) and len(value) == 2 and float32_values(value[0]):
        ctx.last_call.expected = expected
        scores = _head_scores(x, p, num_heads, positions)
        prefix = f"{what}: " if what else ""
        weights = ctx.expect_close(
            value[1],
            expected[1],
            f"{prefix}weights",
            ("batch", "head", "query", "key"),
            "B×H×T×T",
            **far_score_tolerance(value[1], scores, [1.0]),
        )
        out = ctx.expect_close(
            value[0],
            expected[0],
            f"{prefix}output",
            ("batch", "query", "feature"),
            "B×T×D",
            **far_score_tolerance(value[0], scores, expected[0]),
        )
        return out, weights
    return expect_out_and_weights(ctx, value, expected, what)


def _head_scores(x, p, num_heads, positions):
    """Unrotated per-head q·k / sqrt(hd): their size bounds the rotated ones (a rotation keeps norms)."""
    x = np.asarray(x, dtype=float)
    B, T, D = x.shape
    hd = D // num_heads
    q = x @ np.asarray(p["Wq"]) + np.asarray(p.get("bq") if p.get("bq") is not None else 0.0)
    k = x @ np.asarray(p["Wk"]) + np.asarray(p.get("bk") if p.get("bk") is not None else 0.0)
    qn = np.linalg.norm(q.reshape(B, T, num_heads, hd), axis=-1)
    kn = np.linalg.norm(k.reshape(B, T, num_heads, hd), axis=-1)
    return qn[:, :, None, :] * kn[:, None, :, :] / np.sqrt(hd)


# --- apply_rope --------------------------------------------------------------------------------


@check(points=1, public=True)
def apply_rope_shape(ctx):
    """apply_rope returns an array shaped like its input, B×H×T×hd."""
    x = head_vectors(ctx.rng, 2, 3, 4, 6)
    ctx.describe(B=2, H=3, T=4, hd=6, positions=[0, 1, 2, 3])
    ctx.array(ctx.call("apply_rope", lists(x), [0, 1, 2, 3]), "apply_rope output", (2, 3, 4, 6), "B×H×T×hd")


PUBLIC_ROPE_X = [[[[1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0]]]]
PUBLIC_ROPE_POSITIONS = [0, 1, 2]


@check(
    points=2, public=True, after=("apply-rope-shape",), catches=("rope-pairs-interleaved", "rope-frequency-exponent", "rope-sign-flipped")
)
def public_rope_example(ctx):
    """The statement's apply_rope example: one head of width 4 at positions 0, 1 and 2."""
    compare_rope(ctx, np.array(PUBLIC_ROPE_X), PUBLIC_ROPE_POSITIONS, example="the worked example in the statement")


@check(
    points=3,
    after=("apply-rope-shape",),
    catches=("rope-pairs-interleaved", "rope-frequency-exponent", "rope-sign-flipped", "rope-positions-ignored"),
    concept="positions",
)
def rotation_values(ctx):
    """Column i is rotated with column i + hd/2 by the angle p·base^(-2i/hd), counter-clockwise.

    Head width 8 at unsorted positions (one negative, one repeated), with the default base and with
    base=500.
    """
    x = head_vectors(ctx.rng, 2, 2, 5, 8)
    positions = random_positions(ctx.rng, 5)
    compare_rope(ctx, x, positions)
    compare_rope(ctx, x, positions, base=500.0, what="rotated vectors with base=500")


@check(points=2, after=("apply-rope-shape",), catches=("rope-positions-ignored",), concept="positions")
def position_zero_is_identity(ctx):
    """At position 0 every angle is 0, so apply_rope returns its input unchanged."""
    x = head_vectors(ctx.rng, 1, 2, 4, 6)
    ctx.describe(B=1, H=2, T=4, hd=6, positions=[0, 0, 0, 0])
    got = rotated(ctx, x, [0, 0, 0, 0])
    ctx.expect_close(got, x, "vectors at position 0", ROT_AXES, "B×H×T×hd")


@check(points=2, after=("apply-rope-shape",), concept="positions")
def norms_are_preserved(ctx):
    """apply_rope is a rotation: every vector keeps its length, at any position."""
    x = head_vectors(ctx.rng, 2, 2, 6, 8, scale=3.0)
    positions = random_positions(ctx.rng, 6, low=-1000, high=5000)
    ctx.describe(B=2, H=2, T=6, hd=8, positions=positions)
    got = rotated(ctx, x, positions)
    before, after = np.linalg.norm(x, axis=-1), np.linalg.norm(got, axis=-1)
    rtol = 16 * EPS32 if float32_values(got) else 1e-7  # a float32 rotation keeps lengths to float32 rounding
    if not np.allclose(before, after, rtol=rtol, atol=1e-9):
        b, h, t = np.argwhere(~np.isclose(before, after, rtol=rtol, atol=1e-9))[0]
        ctx.fail(
            f"the vector of batch {b}, head {h} at position {positions[t]} had length "
            f"{before[b, h, t]:.6g} and has {after[b, h, t]:.6g} after apply_rope: each pair "
            "(u[i], u[i + hd/2]) must be turned by a rotation, cos and sin in the right places"
        )


@check(points=2, after=("apply-rope-shape",), catches=("rope-positions-ignored",), concept="positions")
def rotations_compose(ctx):
    """Rotating by positions p, then by q, equals rotating once by p + q."""
    x = head_vectors(ctx.rng, 1, 2, 5, 6)
    p, q = random_positions(ctx.rng, 5), random_positions(ctx.rng, 5)
    pq = [a + b for a, b in zip(p, q)]
    ctx.describe(B=1, H=2, T=5, hd=6, p=p, q=q)
    once = rotated(ctx, x, p, "apply_rope(x, p)")
    twice = rotated(ctx, once, q, "apply_rope(apply_rope(x, p), q)")
    direct = rotated(ctx, x, pq, "apply_rope(x, p + q)")
    ctx.expect_close(
        twice,
        direct,
        "apply_rope(apply_rope(x, p), q) vs apply_rope(x, p + q)",
        ROT_AXES,
        "B×H×T×hd",
        **property_tolerance(p + q + pq, twice, direct),
    )


@check(points=1)
def odd_widths_raise_value_error(ctx):
    """An odd head width raises ValueError (apply_rope and rope_attention); so do heads that do not divide D."""
    x = head_vectors(ctx.rng, 1, 1, 2, 5)
    ctx.describe(call="apply_rope on hd=5")
    outcome = ctx.outcome("apply_rope", lists(x), [0, 1])
    if not (outcome.status == "raised" and outcome.error.type == "ValueError"):
        ctx.fail(
            "apply_rope with an odd head width (5) should raise ValueError; the call "
            + (outcome.describe_failure() if not outcome.ok else "returned normally")
        )
    if not re.search(r"even|odd|pair", outcome.error.message, re.IGNORECASE):
        ctx.fail(f"the ValueError for hd=5 should say the width must be even; it says {outcome.error.message!r}")
    xt, p = tokens(ctx.rng, 1, 2, 6), params(ctx.rng, 6)
    ctx.describe(call="rope_attention with D=6, num_heads=2 (hd=3)")
    outcome = ctx.outcome(FN, lists(xt), lists(p), 2)
    if not (outcome.status == "raised" and outcome.error.type == "ValueError"):
        ctx.fail(
            "rope_attention with D=6 and num_heads=2 (odd head width 3) should raise ValueError; the call "
            + (outcome.describe_failure() if not outcome.ok else "returned normally")
        )
    # the statement asks the message to say "divisible" for D % num_heads != 0 only: num_heads=0 may say anything
    expect_divisibility_error(ctx, FN, lambda h: (lists(xt), lists(p), h), worded=(4,))


def out_and_weights(ctx, value, B, H, T, D):
    """(out B×T×D, weights B×H×T×T) from a return_weights=True call, or the check fails."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        ctx.fail("with return_weights=True the function must return a pair (out, weights)")
    return ctx.array(value[0], "output", (B, T, D), "B×T×D"), ctx.array(value[1], "weights", (B, H, T, T), "B×H×T×T")


# --- rope_attention ----------------------------------------------------------------------------


@check(points=2, public=True, catches=("transpose-reverses-all-axes",))
def attention_output_shapes(ctx):
    """rope_attention returns out B×T×D, or (out, weights B×H×T×T) with return_weights=True."""
    B, T, D, H = 2, 3, 8, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    ctx.describe(B=B, T=T, D=D, H=H, return_weights=False)
    ctx.array(ctx.call(FN, lists(x), lists(p), H), "output", (B, T, D), "B×T×D")
    ctx.describe(return_weights=True)
    value = ctx.call(FN, lists(x), lists(p), H, return_weights=True)
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        ctx.fail("with return_weights=True the function must return a pair (out, weights)")
    ctx.array(value[0], "output", (B, T, D), "B×T×D")
    ctx.array(value[1], "weights", (B, H, T, T), "B×H×T×T")


PUBLIC_X = [[[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]]]
EYE4 = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
PUBLIC_PARAMS = {"Wq": EYE4, "Wk": EYE4, "Wv": EYE4, "Wo": EYE4}


@check(
    points=2,
    public=True,
    after=("attention-output-shapes",),
    catches=(
        "rope-pairs-interleaved",
        "rope-frequency-exponent",
        "rope-sign-flipped",
        "rope-on-values",
        "no-scaling",
        "mask-inverted",
        "double-scaling",
        "softmax-wrong-axis",
    ),
)
def public_attention_example(ctx):
    """The statement's rope_attention example: T=3, D=4, one head, identity weights, causal mask."""
    compare_attention(
        ctx,
        np.array(PUBLIC_X),
        {k: np.array(v) for k, v in PUBLIC_PARAMS.items()},
        1,
        None,
        causal(1, 3),
        masking="causal",
        example="the worked example in the statement",
    )


@check(points=3, after=("attention-output-shapes",), catches=("rope-before-head-split", "rope-on-values"), concept="positions")
def only_relative_positions_matter(ctx):
    """Adding one constant to every position leaves the weights and the output unchanged.

    Each head's rotated q·k depends on the difference of the two positions only; values carry no
    position. Rotating across the whole width D before the head split, or rotating v, breaks this.
    """
    B, T, D, H = 2, 4, 8, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    positions = random_positions(ctx.rng, T, 0, 20)
    shift = int(ctx.rng.integers(20, 300))
    shifted = [t + shift for t in positions]
    ctx.describe(B=B, T=T, D=D, H=H, positions=positions, shifted_by=shift)
    base_out, base_w = out_and_weights(ctx, ctx.call(FN, lists(x), lists(p), H, positions, None, True), B, H, T, D)
    moved = ctx.call(FN, lists(x), lists(p), H, shifted, None, True)
    moved_out, moved_w = out_and_weights(ctx, moved, B, H, T, D)
    ctx.expect_close(
        moved_w,
        base_w,
        f"weights with every position + {shift} vs unshifted",
        ("batch", "head", "query", "key"),
        "B×H×T×T",
        **property_tolerance(shifted, moved_w, base_w, moved_out, base_out),
    )
    ctx.expect_close(
        moved_out,
        base_out,
        f"output with every position + {shift} vs unshifted",
        ("batch", "query", "feature"),
        "B×T×D",
        **property_tolerance(shifted, moved_w, base_w, moved_out, base_out),
    )


@check(points=2, after=("attention-output-shapes",), catches=("rope-positions-ignored",), concept="positions")
def positions_argument_is_honoured(ctx):
    """Explicit positions (unsorted, repeated, negative; as a list and as a NumPy array) are used."""
    B, T, D, H = 1, 5, 8, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    positions = random_positions(ctx.rng, T, 0, 40)
    compare_attention(ctx, x, p, H, positions, None, what="positions as a list")
    compare_attention(ctx, x, p, H, np.array(positions), None, what="positions as an array", arrays=True)


@check(
    points=2,
    after=("attention-output-shapes",),
    catches=("rope-before-head-split", "reshape-without-transpose", "heads-interleaved"),
    concept="head-split",
)
def each_head_rotated_on_its_own(ctx):
    """Head h owns columns h*hd:(h+1)*hd and the rotation pairs columns within each head, after the split.

    Catches a rotation across the whole width D, a bare reshape that mixes tokens and heads, and
    heads taking strided columns.
    """
    B, T, D, H = 1, 4, 16, 4
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    compare_attention(ctx, x, p, H, None, None, heads="4 heads of width 4")


@check(points=2, after=("attention-output-shapes",), catches=("weights-transposed", "biases-ignored", "no-output-projection"))
def projections_are_x_at_w(ctx):
    """Every projection is x @ W + b with W[d_in][d_out] (rows are tokens), not x @ Wᵀ: q, k, v and the output's Wo, bo."""
    B, T, D, H = 1, 3, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D, scale=2.0)
    compare_attention(ctx, x, p, H, None, None, weights="random, not symmetric")


@check(
    points=2,
    after=("attention-output-shapes",),
    catches=("no-scaling", "scale-by-model-width", "double-scaling", "scale-after-softmax"),
    concept="scaling",
)
def scores_scaled_by_head_width(ctx):
    """Scores are the rotated q·k divided by sqrt(hd), the head width."""
    B, T, D, H = 1, 4, 8, 2
    x, p = tokens(ctx.rng, B, T, D, scale=2.0), params(ctx.rng, D, biases=False)
    compare_attention(ctx, x, p, H, None, None)


@check(
    points=2,
    after=("attention-output-shapes",),
    catches=("mask-inverted", "fill-value-too-weak", "softmax-wrong-axis", "mask-ignored"),
    concept="masking",
)
def causal_future_is_ignored(ctx):
    """Under a causal mask, changing token t changes no output row before t, and changes row t."""
    B, T, D, H = 1, 5, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    mask, t = causal(B, T), 3
    edited = x.copy()
    edited[0, t] += ctx.rng.normal(0, 5, size=D).round(6)
    ctx.describe(B=B, T=T, D=D, H=H, mask="causal", edited_token=t)
    before = ctx.array(ctx.call(FN, lists(x), lists(p), H, None, lists(mask)), "output", (B, T, D), "B×T×D")
    after = ctx.array(ctx.call(FN, lists(edited), lists(p), H, None, lists(mask)), "output", (B, T, D), "B×T×D")
    changed = [i for i in range(t) if not np.allclose(before[0, i], after[0, i], rtol=1e-9, atol=1e-12)]
    if changed:
        ctx.fail(
            f"editing token {t} changed the output of earlier token(s) {changed}: the mask lets "
            "queries see the future (is True treated as blocked?)"
        )
    if np.allclose(before[0, t], after[0, t]):
        ctx.fail(f"editing token {t} did not change its own output: a token must attend to itself")


@check(
    points=2, after=("attention-output-shapes",), concept="masking", catches=("mask-inverted", "softmax-wrong-axis", "fill-value-too-weak")
)
def uniform_when_queries_are_zero(ctx):
    """With Wq = 0 (and no bq) every query is 0 at any position, so every score is 0 and each query
    spreads its weight evenly over its allowed keys.

    Padding mask, random positions; the weights are compared with 1 / (number of allowed keys).
    """
    B, T, D, H = 2, 5, 8, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    p["Wq"] = np.zeros((D, D))
    p.pop("bq")
    mask = padding([5, 3], T)
    positions = random_positions(ctx.rng, T, 0, 100)
    ctx.describe(B=B, T=T, D=D, H=H, positions=positions, masking="padding_mask([5, 3], 5)", Wq="zeros")
    _, weights = out_and_weights(ctx, ctx.call(FN, lists(x), lists(p), H, positions, lists(mask), True), B, H, T, D)
    uniform = np.broadcast_to((mask / mask.sum(axis=-1, keepdims=True))[:, None], (B, H, T, T))
    ctx.expect_close(weights, uniform, "weights with Wq = 0 (uniform over the allowed keys)", ("batch", "head", "query", "key"), "B×H×T×T")


@check(
    points=3,
    after=("attention-output-shapes",),
    catches=("blocked-row-uniform", "blocked-row-nan", "additive-mask-leaks"),
    concept="masking",
)
def blocked_rows_output_bo(ctx):
    """A query with no allowed key gets zero weights in every head, so its output row is exactly bo."""
    B, T, D, H = 2, 4, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    mask = random_mask(ctx.rng, B, T, blocked_rows=2)
    out, _ = compare_attention(ctx, x, p, H, None, mask, masking="random, two fully blocked rows per batch")
    rows = ~mask.any(axis=-1)
    if not exactly(out[rows], np.broadcast_to(p["bo"], out[rows].shape)):  # bo as given, or in float32
        ctx.fail("fully blocked query rows must output bo exactly")


@check(points=2, after=("attention-output-shapes",), catches=("softmax-overflow",), concept="numerical-stability")
def stable_at_large_scores(ctx):
    """Scores in the thousands neither overflow nor give NaN (subtract the row max before exp)."""
    B, T, D, H = 1, 4, 4, 2
    x, p = tokens(ctx.rng, B, T, D, scale=30.0), params(ctx.rng, D, scale=3.0)
    compare_attention(ctx, x, p, H, None, causal(B, T), masking="causal", x_scale=30, large=True)


@check(points=2, after=("attention-output-shapes",), concept="numerical-stability", catches=("max-over-blocked", "softmax-overflow"))
def stable_with_a_blocked_score_far_above(ctx):
    """Large scores stay finite, and a blocked key scoring far above the allowed ones takes nothing.

    Every position 0 (so no rotation), Wq = Wk = identity, causal mask: the last token's key scores
    about 2000 with every query while the allowed scores are about 900, so exp of a raw score
    overflows, and a max taken over the blocked key too makes every allowed weight underflow to 0.
    No biases.
    """
    B, T, D, H = 2, 4, 8, 2
    x = hot_blocked_tokens(ctx.rng, B, T, D)
    p = identity_projections(D, rng=ctx.rng)
    compare_attention(
        ctx,
        x,
        p,
        H,
        [0] * T,
        causal(B, T),
        masking="causal",
        Wq="identity",
        Wk="identity",
        scores="about 900 allowed, about 2000 for the blocked last key",
        large=True,
    )


@check(points=1, after=("attention-output-shapes",), catches=("softmax-across-batch",))
def batches_are_independent(ctx):
    """Each batch element's output and weights depend on that element only."""
    B, T, D, H = 3, 3, 4, 2
    x, p = tokens(ctx.rng, B, T, D), params(ctx.rng, D)
    mask = random_mask(ctx.rng, B, T, blocked_rows=0)
    ctx.describe(B=B, T=T, D=D, H=H)
    together = out_and_weights(ctx, ctx.call(FN, lists(x), lists(p), H, None, lists(mask), True), B, H, T, D)
    for b in range(B):
        ctx.describe(batch=b)
        alone = out_and_weights(ctx, ctx.call(FN, lists(x[b : b + 1]), lists(p), H, None, lists(mask[b : b + 1]), True), 1, H, T, D)
        ctx.expect_close(
            together[0][b : b + 1], alone[0], f"output of batch {b} run with the others vs alone", ("batch", "query", "feature"), "1×T×D"
        )
        ctx.expect_close(
            together[1][b : b + 1],
            alone[1],
            f"weights of batch {b} run with the others vs alone",
            ("batch", "head", "query", "key"),
            "1×H×T×T",
        )


@check(points=2, catches=("mutates-input",))
def inputs_left_unmodified(ctx):
    """Neither function writes into the lists or arrays it was given (x, params, positions, mask)."""
    x = head_vectors(ctx.rng, 1, 2, 3, 4)
    xt, p = tokens(ctx.rng, 1, 3, 4), params(ctx.rng, 4)
    mask = random_mask(ctx.rng, 1, 3)
    calls = [
        ("apply_rope", (x.copy(), np.array([3, 1, 2]))),
        ("apply_rope", (lists(x), [3, 1, 2])),
        (FN, (xt.copy(), {k: v.copy() for k, v in p.items()}, 2, np.array([0, 2, 1]), mask.copy())),
        (FN, (lists(xt), lists(p), 2, [0, 2, 1], lists(mask))),
    ]
    for fn, args in calls:
        kind = "NumPy arrays" if isinstance(args[0], np.ndarray) else "lists"
        ctx.describe(function=fn, given=kind)
        expect_untouched(ctx, fn, ctx.outcome(fn, *args), kind)
    require_a_returned_call(ctx)


@check(
    points=4,
    after=("attention-output-shapes",),
    catches=(
        "rope-pairs-interleaved",
        "rope-frequency-exponent",
        "rope-on-values",
        "rope-before-head-split",
        "rope-sign-flipped",
        "rope-positions-ignored",
        "weights-transposed",
        "no-scaling",
        "softmax-overflow",
        "blocked-row-uniform",
        "blocked-row-nan",
        "mask-inverted",
        "scale-by-model-width",
        "reshape-without-transpose",
        "heads-interleaved",
        "additive-mask-leaks",
        "fill-value-too-weak",
        "softmax-wrong-axis",
        "no-output-projection",
        "biases-ignored",
        "double-scaling",
        "softmax-across-batch",
        "mask-ignored",
        "scale-after-softmax",
    ),
)
def randomised_agreement(ctx):
    """Agrees with the reference on randomised hidden cases: sizes, positions, masks, large scores.

    Six cases with B up to 2, T up to 6, up to 3 heads of even width, default or random positions,
    random/padding/causal/no masks and one case with scores in the thousands. Rerun with the same
    --seed to get the same cases.
    """
    kinds = ["random", "padding", "causal", None, "random", "large"]
    for n, kind in enumerate(kinds):
        B, T = int(ctx.rng.integers(1, 3)), int(ctx.rng.integers(2, 7))
        H = int(ctx.rng.integers(1, 4))
        D = H * 2 * int(ctx.rng.integers(1, 3))
        big = kind == "large"
        x = tokens(ctx.rng, B, T, D, scale=25.0 if big else 1.0)
        p = params(ctx.rng, D, biases=bool(ctx.rng.random() < 0.7), scale=3.0 if big else 1.0)
        positions = None if n % 2 else random_positions(ctx.rng, T, -20, 100)
        mask = mask_of_kind(ctx.rng, kind, B, T)
        compare_attention(ctx, x, p, H, positions, mask, what=f"case {n + 1}", case=n + 1, masking=str(kind))


# --- `attn-kit bench` -------------------------------------------------------------------------------


@SUITE.for_bench
def bench_inputs(rng, T, B, D, H):
    """B×T×D tokens (positions 0..T-1), one set of projections, a causal mask, at length T."""
    from . import cases

    return (cases.tokens(rng, B, T, D), cases.params(rng, D), H), {"mask": cases.causal(B, T)}
