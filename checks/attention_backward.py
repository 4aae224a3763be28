"""The graded suite for attention-backward: dq, dk, dv of softmax attention, by hand.

Two independent sources of truth: the kit's own gradients (the reference, replayed in the kit's
process) and directional finite differences of the kit's own forward pass (`forward`, written here
with no code in common with the reference): for a random direction δ, (L(x + εδ) − L(x − εδ)) / 2ε
must equal the candidate's gradient dotted with δ, where L = sum(out · dout). Cases with T ≠ S and
with T = S are both used: the transposition mistakes only fit the shapes when T = S.
"""

from __future__ import annotations

import numpy as np

from attn_kit.compare.registry import Relaxation, Suite, equal

from .verdicts import require_a_returned_call

SUITE = Suite("attention-backward")
check = SUITE.check
# a backward written for one width of q, k and v (a FlashAttention port's `torch.zeros_like(q)`)
# raises when dv differs: its checks are judged again at dv = d (kit/grading/relax.py)
SUITE.relaxations = (Relaxation("dv = d", equal("d", "dv")),)

FN = "attention_backward"
NAMES = ("dq", "dk", "dv")
AXES = ("batch", "head", "row", "feature")


def forward(q, k, v, mask=None) -> np.ndarray:
    """softmax(q kᵀ / sqrt(d)) over the allowed keys, @ v; a query with no allowed key outputs 0."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = np.einsum("bhtd,bhsd->bhts", q, k) / np.sqrt(q.shape[-1])
    ok = np.ones(scores.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool)[:, None], scores.shape)
    top = np.where(ok, scores, -np.inf).max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(ok, np.exp(np.where(ok, scores - top, 0.0)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return np.einsum("bhts,bhsd->bhtd", e / np.where(total > 0, total, 1.0), v)


def loss(q, k, v, dout, mask=None) -> float:
    return float(np.sum(forward(q, k, v, mask) * dout))


def case(ctx, B, H, T, S, d, dv, scale=1.0):
    """q, k, v and dout at the shape the check is judged at (ctx.dims: a relaxation's)."""
    rng, dv = ctx.rng, ctx.dims(d=d, dv=dv)["dv"]
    q = rng.normal(0.0, scale, size=(B, H, T, d)).round(6)
    k = rng.normal(0.0, scale, size=(B, H, S, d)).round(6)
    v = rng.normal(0.0, 1.0, size=(B, H, S, dv)).round(6)
    dout = rng.normal(0.0, 1.0, size=(B, H, T, dv)).round(6)
    return q, k, v, dout


def random_mask(rng, B, T, S, blocked_rows=1):
    mask = rng.random((B, T, S)) < 0.6
    mask[np.arange(B)[:, None], np.arange(T)[None, :], rng.integers(S, size=(B, T))] = True
    for b in range(B):
        for i in rng.choice(T, size=min(blocked_rows, T - 1), replace=False):
            mask[b, i] = False
    return mask


def gradients(ctx, q, k, v, dout, mask=None, pass_mask=True):
    """Call attention_backward; return (dq, dk, dv) as arrays shaped like q, k, v, or fail."""
    extra = {"mask": mask} if pass_mask else {}
    value = ctx.call(FN, q, k, v, dout, **extra)
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        ctx.fail("attention_backward must return a tuple (dq, dk, dv)")
    return tuple(ctx.array(g, name, a.shape, dims) for g, name, a, dims in zip(value, NAMES, (q, k, v), ("B×H×T×d", "B×H×S×d", "B×H×S×dv")))


def compare_gradients(ctx, q, k, v, dout, mask=None, what="", pass_mask=True, **kw):
    """Compare the candidate's (dq, dk, dv) with the kit's own; dv first (it needs only P)."""
    B, H, T, d = q.shape
    S, dv_width = k.shape[2], v.shape[3]
    ctx.describe(B=B, H=H, T=T, S=S, d=d, dv=dv_width, mask="none" if mask is None else kw.pop("masking", "random"), **kw)
    got = gradients(ctx, q, k, v, dout, mask, pass_mask)
    expected = ctx.oracle.attention_backward(q, k, v, dout, mask)
    call = ctx.last_call
    call.expected = expected
    prefix = f"{what}: " if what else ""
    for i in (2, 0, 1):
        ctx.expect_close(got[i], expected[i], f"{prefix}{NAMES[i]}", AXES, call=call)
    return got


# --- shapes and the public example --------------------------------------------------------------


@check(points=1, public=True, relaxable=False)
def output_shapes(ctx):
    """Returns (dq, dk, dv) shaped like q (B×H×T×d), k (B×H×S×d) and v (B×H×S×dv); here T = S = 4, d=3, dv=2.

    T = S here, so that a missing transpose shows as wrong values in the checks below rather than
    as an error on every check; the T ≠ S check then shows whether the shapes still fit.
    """
    q, k, v, dout = case(ctx, 2, 2, 4, 4, 3, 2)
    ctx.describe(B=2, H=2, T=4, S=4, d=3, dv=2)
    gradients(ctx, q, k, v, dout)


PUBLIC_Q = [[[[1.0, 0.0], [0.0, 2.0]]]]
PUBLIC_K = [[[[1.0, 1.0], [0.0, 1.0]]]]
PUBLIC_V = [[[[1.0], [3.0]]]]
PUBLIC_DOUT = [[[[1.0], [-1.0]]]]


@check(
    points=2,
    public=True,
    after=("output-shapes",),
    catches=(
        "softmax-jacobian-diagonal",
        "backward-missing-scale",
        "dv-not-transposed",
        "dk-from-wrong-operand",
        "no-scaling",
        "double-scaling",
        "softmax-wrong-axis",
    ),
)
def public_backward_example(ctx):
    """The statement's worked example: T = S = 2, d = 2, dv = 1, no mask."""
    q, k, v, dout = (np.array(a) for a in (PUBLIC_Q, PUBLIC_K, PUBLIC_V, PUBLIC_DOUT))
    compare_gradients(ctx, q, k, v, dout, None, example="the worked example in the statement")


# --- agreement ----------------------------------------------------------------------------------


@check(
    points=3,
    after=("output-shapes",),
    catches=(
        "softmax-jacobian-diagonal",
        "backward-missing-scale",
        "no-scaling",
        "mask-inverted",
        "double-scaling",
        "softmax-wrong-axis",
        "softmax-across-batch",
        "fill-value-too-weak",
    ),
    concept="backward",
)
def matches_kit_gradients_when_t_differs_from_s(ctx):
    """Equals the kit's own gradients with T ≠ S (B=2, T=3 queries, S=6 keys, d=4, dv=5), masked and unmasked."""
    q, k, v, dout = case(ctx, 2, 2, 3, 6, 4, 5)
    compare_gradients(ctx, q, k, v, dout, None, what="no mask")
    compare_gradients(ctx, q, k, v, dout, random_mask(ctx.rng, 2, 3, 6, blocked_rows=0), what="random mask")


@check(points=3, after=("output-shapes",), catches=("dv-not-transposed", "dk-from-wrong-operand"), concept="backward")
def matches_kit_gradients_when_t_equals_s(ctx):
    """Equals the kit's own gradients with T = S = 5: where a missing transpose still fits the shapes."""
    q, k, v, dout = case(ctx, 1, 2, 5, 5, 3, 3)
    compare_gradients(ctx, q, k, v, dout, None)


@check(
    points=4,
    after=("output-shapes",),
    catches=(
        "softmax-jacobian-diagonal",
        "backward-missing-scale",
        "dv-not-transposed",
        "dk-from-wrong-operand",
        "backward-rowsum-wrong",
        "scale-after-softmax",
        "backward-mask-not-applied",
    ),
    concept="backward",
)
def directional_finite_differences(ctx):
    """Along random directions δ, (L(x+εδ) − L(x−εδ)) / 2ε of the kit's own forward equals your gradient · δ.

    L = sum(out · dout), ε = 1e-5, for δ on q, on k and on v separately, with T ≠ S and with T = S.
    This needs no reference gradients: it is the definition of a gradient.
    """
    eps = 1e-5
    for T, S in ((3, 5), (4, 4)):
        q, k, v, dout = case(ctx, 1, 2, T, S, 4, 3)
        mask = random_mask(ctx.rng, 1, T, S, blocked_rows=0)
        ctx.describe(B=1, H=2, T=T, S=S, d=4, dv=3, mask="random", epsilon=eps)
        grads = gradients(ctx, q, k, v, dout, mask)
        for i, name in enumerate(NAMES):
            args = [q, k, v]
            delta = ctx.rng.normal(size=args[i].shape)
            plus, minus = list(args), list(args)
            plus[i], minus[i] = args[i] + eps * delta, args[i] - eps * delta
            numeric = (loss(plus[0], plus[1], plus[2], dout, mask) - loss(minus[0], minus[1], minus[2], dout, mask)) / (2 * eps)
            analytic = float(np.sum(grads[i] * delta))
            if not np.isclose(analytic, numeric, rtol=1e-5, atol=1e-7):
                ctx.fail(
                    f"T={T}, S={S}: along a random direction of {name[1]}, the finite difference of the "
                    f"loss is {numeric:.8g} but your {name} · direction is {analytic:.8g}"
                    + (f" (ratio {analytic / numeric:.4g})" if numeric else "")
                )


# --- masks and stability -----------------------------------------------------------------------


@check(
    points=3,
    after=("output-shapes",),
    catches=("blocked-row-nan", "blocked-row-uniform", "mask-inverted", "additive-mask-leaks", "mask-ignored", "backward-mask-not-applied"),
    concept="masking",
)
def blocked_rows_get_zero_gradient(ctx):
    """A query with no allowed key has output 0 whatever q, k, v are: its dq row is exactly 0 and it adds nothing to dk, dv."""
    q, k, v, dout = case(ctx, 2, 2, 5, 4, 3, 3)
    mask = random_mask(ctx.rng, 2, 5, 4, blocked_rows=2)
    dq, _, _ = compare_gradients(ctx, q, k, v, dout, mask, masking="random, two fully blocked queries per batch")
    rows = ~mask.any(axis=-1)  # B×T
    blocked = np.broadcast_to(rows[:, None, :, None], dq.shape)
    if np.any(dq[blocked] != 0):
        ctx.fail("the dq rows of fully blocked queries must be exactly 0")


@check(points=2, after=("output-shapes",), catches=("softmax-overflow",), concept="numerical-stability")
def finite_at_large_scores(ctx):
    """Scores of ±1000 give finite gradients equal to the kit's (subtract each row's max before exp)."""
    q, k, v, dout = case(ctx, 1, 2, 4, 5, 4, 3)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True) * 45.0
    k = k / np.linalg.norm(k, axis=-1, keepdims=True) * 45.0  # |score| up to 45·45/2 ≈ 1000
    k[..., :2, :] = q[..., :2, :]  # queries 0 and 1 score 1012 on one key
    got = compare_gradients(ctx, q, k, v, dout, None, scores="up to ±1000 (keys 0 and 1 equal queries 0 and 1)")
    if not all(np.isfinite(g).all() for g in got):
        ctx.fail("gradients must be finite at scores of ±1000")


@check(points=2, after=("output-shapes",), catches=("softmax-overflow",), concept="numerical-stability")
def finite_when_every_score_is_far_below_zero(ctx):
    """Scores that are all near -1250 give the kit's gradients, not zeros or NaN.

    q near +25 and k near -25 in each of d=4 features (every score about -1250 after the 1/sqrt(d)
    scale): exp of a raw score underflows to 0 (0/0 = NaN), and a forward recomputed with an online
    softmax whose running max starts at 0 instead of -inf gets P = 0 (or NaN) on every row.
    """
    B, H, T, S, d, dv = 1, 2, 3, 5, 4, 3
    _, _, v, dout = case(ctx, B, H, T, S, d, dv)
    q = (25.0 + ctx.rng.normal(0.0, 0.1, size=(B, H, T, d))).round(6)
    k = (-25.0 + ctx.rng.normal(0.0, 0.1, size=(B, H, S, d))).round(6)
    got = compare_gradients(ctx, q, k, v, dout, None, scores="about -1250 everywhere")
    if not all(np.isfinite(g).all() for g in got):
        ctx.fail("gradients must be finite when every score is far below 0")


@check(
    points=2,
    after=("output-shapes",),
    catches=("mask-inverted", "softmax-overflow", "max-over-blocked", "fill-value-too-weak"),
    concept="masking",
)
def dv_ignores_q_scale_with_one_allowed_key(ctx):
    """When each query may see exactly one key, its weight on it is 1 whatever the scores: dv must not
    change when q is multiplied by 1, 30 or 1000.

    At × 1000 blocked scores lie far above or below the allowed one: a max taken over blocked
    entries too makes the allowed weight underflow, and a weak fill value leaves blocked keys weight.
    """
    B, H, T, S = 1, 2, 4, 4
    q, k, v, dout = case(ctx, B, H, T, S, 3, 2)
    mask = np.zeros((B, T, S), bool)
    mask[0, np.arange(T), ctx.rng.permutation(S)] = True  # one allowed key per query
    expected = np.zeros((B, H, S, v.shape[-1]))
    for i, j in zip(*np.nonzero(mask[0])):
        expected[:, :, j] += dout[:, :, i]
    for factor in (1.0, 30.0, 1000.0):
        ctx.describe(B=B, H=H, T=T, S=S, d=3, dv=2, mask="one allowed key per query", q_times=factor)
        _, _, dv = gradients(ctx, q * factor, k, v, dout, mask)
        ctx.expect_close(dv, expected, f"dv with q × {factor:g}", AXES, "B×H×S×dv")


@check(points=2, catches=("mutates-input",))
def inputs_left_unmodified(ctx):
    """attention_backward writes into none of q, k, v, dout and mask (e.g. no `k *= scale`)."""
    q, k, v, dout = case(ctx, 1, 2, 3, 4, 4, 2)
    mask = random_mask(ctx.rng, 1, 3, 4)
    ctx.describe(B=1, H=2, T=3, S=4, d=4, dv=2)
    outcome = ctx.outcome(FN, q, k, v, dout, mask)
    if outcome.mutated:
        ctx.fail(f"`{FN}` changed its argument(s) {', '.join(outcome.mutated)}; work on new arrays")
    require_a_returned_call(ctx)


@check(
    points=4,
    after=("output-shapes",),
    catches=(
        "softmax-jacobian-diagonal",
        "backward-missing-scale",
        "dv-not-transposed",
        "dk-from-wrong-operand",
        "no-scaling",
        "softmax-overflow",
        "blocked-row-nan",
        "blocked-row-uniform",
        "mask-inverted",
        "additive-mask-leaks",
        "fill-value-too-weak",
        "softmax-wrong-axis",
        "double-scaling",
        "softmax-across-batch",
        "mask-ignored",
        "backward-mask-not-applied",
        "backward-rowsum-wrong",
        "scale-after-softmax",
    ),
)
def randomised_agreement(ctx):
    """Agrees with the kit's gradients on randomised hidden cases: sizes, T = S or not, masks, large scores.

    Six cases with T and S up to 7 (half of them T = S), widths up to 6, random masks with blocked
    queries or no mask, one case with scores in the hundreds. Rerun with the same --seed to get the
    same cases.
    """
    for n in range(6):
        B, H = int(ctx.rng.integers(1, 3)), int(ctx.rng.integers(1, 3))
        T = int(ctx.rng.integers(2, 8))
        S = T if n % 2 == 0 else int(ctx.rng.integers(1, 8))
        d, dv = int(ctx.rng.integers(1, 7)), int(ctx.rng.integers(1, 7))
        big = n == 5
        q, k, v, dout = case(ctx, B, H, T, S, d, dv, scale=8.0 if big else 1.0)
        mask = random_mask(ctx.rng, B, T, S) if n % 3 else None
        compare_gradients(ctx, q, k, v, dout, mask, what=f"case {n + 1}", case_number=n + 1, large_scores=big)


# --- `attn-kit bench` -------------------------------------------------------------------------------


@SUITE.for_bench
def bench_inputs(rng, T, B, H, d):
    """q, k, v and the upstream gradient dout, all B×H×T×d, with a causal mask (S = T)."""
    from . import cases

    q, k, v, dout = (rng.normal(0.0, 1.0, size=(B, H, T, d)).round(6) for _ in range(4))
    return (q, k, v, dout), {"mask": cases.causal(B, T)}
