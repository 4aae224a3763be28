"""The graded suite for flash-backward: FlashAttention-2's tiled forward (output and logsumexp) and
its tiled backward from the logsumexp alone, for one head.

Expected values come from `naive_forward` and `naive_gradients`, written here in the kit's
process with the whole T×S matrix and sharing no code with the tiled reference; the gradients
are checked a second way by directional finite differences of `naive_forward`. The backward is
always given the kit's own output and logsumexp, so it is graded apart from the candidate's
forward.

Values cannot tell a tiled backward from one that builds P, nor a loop that skips the blocks
above the causal diagonal from one that reads them. The memory check measures one backward call
under tracemalloc (as tiled-softmax's does); the read check passes q, k and v as counting arrays
(`attn_kit.base.harness:count_reads`, in the worker) and compares the rows read with what the
blocks on or below the diagonal need. Both record their verdict for the diagnosis, [1.0] or
[0.0], which `replay_*` recomputes for the kit's bug implementations.
"""

from __future__ import annotations

import numpy as np

from attn_kit.base.harness import count_reads
from attn_kit.base.records import Outcome
from attn_kit.compare.registry import CallFailed, Suite

from .verdicts import kernel_limit, measured_time_limit, memory_verdict, peak_over, require_a_returned_call

SUITE = Suite("flash-backward")
check = SUITE.check

FWD, BWD = "flash_forward", "flash_backward"
OUT_AXES = ("query", "feature")
NAMES = ("dq", "dk", "dv")
MEMORY = {"T": 1024, "S": 1024, "d": 8, "dv": 8, "block": 64}


# --- the plain, obviously-correct forms ------------------------------------------------------------


def allowed(T: int, S: int, mask=None, causal: bool = False) -> np.ndarray:
    """T×S: the mask (True = allowed) and, when causal, j <= i + S - T (bottom-right aligned)."""
    ok = np.ones((T, S), dtype=bool) if mask is None else np.asarray(mask, dtype=bool).copy()
    if causal:
        ok &= np.arange(S)[None, :] <= np.arange(T)[:, None] + (S - T)
    return ok


def naive_forward(q, k, v, mask=None, causal=False) -> tuple[np.ndarray, np.ndarray]:
    """(softmax over the allowed keys of q kᵀ / sqrt(d), @ v; logsumexp of the allowed scaled
    scores), with a zero output row and lse = -inf for a query with no allowed key."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    ok = allowed(len(q), len(k), mask, causal)
    scores = q @ k.T / np.sqrt(q.shape[1])
    top = np.max(np.where(ok, scores, -np.inf), axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(ok, np.exp(np.where(ok, scores - top, 0.0)), 0.0)
    total = e.sum(axis=1, keepdims=True)
    out = (e / np.where(total > 0, total, 1.0)) @ v
    with np.errstate(divide="ignore"):
        lse = np.where(total[:, 0] > 0, top[:, 0] + np.log(total[:, 0]), -np.inf)
    return out, lse


def naive_gradients(q, k, v, d_out, mask=None, causal=False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dq, dk, dv of L = sum(out · d_out) with the whole T×S P."""
    q, k, v, d_out = (np.asarray(a, dtype=np.float64) for a in (q, k, v, d_out))
    ok = allowed(len(q), len(k), mask, causal)
    scale = 1.0 / np.sqrt(q.shape[1])
    s = np.where(ok, q @ k.T * scale, -np.inf)
    top = s.max(axis=1, keepdims=True)
    e = np.where(ok, np.exp(s - np.where(np.isfinite(top), top, 0.0)), 0.0)
    total = e.sum(axis=1, keepdims=True)
    P = e / np.where(total > 0, total, 1.0)
    dP = d_out @ v.T
    dS = P * (dP - (P * dP).sum(axis=1, keepdims=True))
    return dS @ k * scale, dS.T @ q * scale, P.T @ d_out


def loss(q, k, v, d_out, mask=None, causal=False) -> float:
    return float(np.sum(naive_forward(q, k, v, mask, causal)[0] * d_out))


def qkv(rng, T: int, S: int, d: int, dv: int, scale: float = 1.0):
    q = rng.normal(0.0, scale, size=(T, d)).round(6)
    k = rng.normal(0.0, scale, size=(S, d)).round(6)
    v = rng.normal(0.0, 1.0, size=(S, dv)).round(6)
    return q, k, v


def random_mask(rng, T: int, S: int, blocked_rows: int = 1) -> np.ndarray:
    mask = rng.random((T, S)) < 0.6
    mask[np.arange(T), rng.integers(S, size=T)] = True
    for i in rng.choice(T, size=min(blocked_rows, T - 1), replace=False):
        mask[i] = False
    return mask


def blocks(block_q, block_k) -> dict:
    return {"block_q": block_q, "block_k": block_k}


# --- calling the candidate and comparing -----------------------------------------------------------


def expect_lse(ctx, got, expected, what: str, call) -> None:
    """lse equals expected: -inf exactly where expected is -inf (a query with no allowed key)."""
    empty = np.isneginf(expected)
    if np.any(np.isneginf(got) != empty) or np.any(np.isnan(got)):
        rows = [int(i) for i in np.nonzero((np.isneginf(got) != empty) | np.isnan(got))[0]]
        ctx.failing_call = call
        shown = ", ".join(f"query {i}: {got[i]!r}, expected {expected[i]!r}" for i in rows[:3])
        ctx.fail(
            f"{what}: the logsumexp of a query with no allowed key is -inf (log of an empty sum), and every "
            f"other query's is finite; {shown}"
        )
    ctx.expect_close(np.where(empty, 0.0, got), np.where(empty, 0.0, expected), what, ("query",), "T", call=call)


def forward(ctx, q, k, v, mask=None, causal=False, block_q=None, block_k=None, what="", **kw):
    """Call flash_forward and compare (out, lse) with the naive forward; returns (out, lse)."""
    T, d = q.shape
    S, dv = v.shape
    extra = {key: val for key, val in (("block_q", block_q), ("block_k", block_k)) if val is not None}
    ctx.describe(T=T, S=S, d=d, dv=dv, mask="none" if mask is None else kw.pop("masking", "random"), causal=causal, **extra, **kw)
    value = ctx.call(FWD, q, k, v, mask=mask, causal=causal, **extra)
    call = ctx.last_call
    expected = naive_forward(q, k, v, mask, causal)
    call.expected = expected
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        ctx.fail("flash_forward must return a pair (out, lse)")
    prefix = f"{what}: " if what else ""
    lse = ctx.array(value[1], f"{prefix}lse", (T,), "T")
    expect_lse(ctx, lse, expected[1], f"{prefix}lse", call)
    out = ctx.expect_close(value[0], expected[0], f"{prefix}output", OUT_AXES, "T×dv", call=call)
    return out, lse


def backward_args(ctx, q, k, v, mask=None, causal=False, d_out=None):
    """(q, k, v, out, lse, d_out): the kit's own out and lse, a random d_out."""
    out, lse = naive_forward(q, k, v, mask, causal)
    if d_out is None:
        d_out = ctx.rng.normal(0.0, 1.0, size=out.shape).round(6)
    return q, k, v, out, lse, d_out


def gradients(ctx, args, mask=None, causal=False, **extra):
    """Call flash_backward; (dq, dk, dv) shaped like q, k, v, or fail."""
    value = ctx.call(BWD, *args, mask=mask, causal=causal, **extra)
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        ctx.fail("flash_backward must return a tuple (dq, dk, dv)")
    q, k, v = args[:3]
    return tuple(ctx.array(g, name, a.shape, dims) for g, name, a, dims in zip(value, NAMES, (q, k, v), ("T×d", "S×d", "S×dv")))


def backward(ctx, q, k, v, mask=None, causal=False, block_q=None, block_k=None, what="", d_out=None, **kw):
    """Call flash_backward with the kit's out and lse; compare with the naive gradients (dv first)."""
    T, d = q.shape
    S, dv = v.shape
    extra = {key: val for key, val in (("block_q", block_q), ("block_k", block_k)) if val is not None}
    ctx.describe(T=T, S=S, d=d, dv=dv, mask="none" if mask is None else kw.pop("masking", "random"), causal=causal, **extra, **kw)
    args = backward_args(ctx, q, k, v, mask, causal, d_out)
    got = gradients(ctx, args, mask, causal, **extra)
    call = ctx.last_call
    expected = naive_gradients(q, k, v, args[5], mask, causal)
    call.expected = expected
    prefix = f"{what}: " if what else ""
    for i in (2, 0, 1):
        ctx.expect_close(got[i], expected[i], f"{prefix}{NAMES[i]}", ("row", "feature"), call=call)
    return got, args


# --- shapes and the public example -----------------------------------------------------------------


@check(points=1, public=True)
def forward_returns_output_and_lse(ctx):
    """flash_forward returns (out, lse): out T×dv, lse a vector of T (T=5, S=7, d=4, dv=3)."""
    q, k, v = qkv(ctx.rng, 5, 7, 4, 3)
    ctx.describe(T=5, S=7, d=4, dv=3, block_q=2, block_k=3)
    value = ctx.call(FWD, q, k, v, block_q=2, block_k=3)
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        ctx.fail("flash_forward must return a pair (out, lse)")
    ctx.array(value[0], "output", (5, 3), "T×dv")
    ctx.array(value[1], "lse", (5,), "T")


@check(points=1, public=True)
def backward_returns_three_gradients(ctx):
    """flash_backward returns (dq, dk, dv) shaped like q (T×d), k (S×d) and v (S×dv); here T = S = 6, d=4, dv=3.

    T = S and block_q = block_k = 3 here, so that a missing transpose of a block shows as wrong
    values in the checks below rather than as an error on every check; the T ≠ S checks then show
    whether the shapes still fit.
    """
    q, k, v = qkv(ctx.rng, 6, 6, 4, 3)
    ctx.describe(T=6, S=6, d=4, dv=3, block_q=3, block_k=3)
    gradients(ctx, backward_args(ctx, q, k, v), block_q=3, block_k=3)


PUBLIC_Q = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
PUBLIC_K = [[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]]
PUBLIC_V = [[1.0], [2.0], [0.0]]
PUBLIC_MASK = [[True, True, True], [True, False, True], [False, False, False]]
PUBLIC_DOUT = [[1.0], [1.0], [1.0]]

# the bugs that change an ordinary forward
FORWARD_BUGS = (
    "online-softmax-no-rescale",
    "online-softmax-acc-not-rescaled",
    "online-rescale-sign-flipped",
    "no-scaling",
    "double-scaling",
    "scale-after-softmax",
    "lse-missing-max",
)
# the bugs that change an ordinary backward
BACKWARD_BUGS = (
    "softmax-jacobian-diagonal",
    "backward-rowsum-wrong",
    "flash-delta-wrong",
    "backward-missing-scale",
    "no-scaling",
    "double-scaling",
)


@check(
    points=2,
    public=True,
    after=("forward-returns-output-and-lse", "backward-returns-three-gradients"),
    catches=FORWARD_BUGS + BACKWARD_BUGS + ("mask-inverted", "mask-ignored", "blocked-row-nan", "lse-empty-row-nan"),
)
def public_flash_example(ctx):
    """The statement's worked example: 3 queries, 3 keys, blocks of 2, one query fully blocked; forward, then backward."""
    q, k, v, mask = (np.array(a) for a in (PUBLIC_Q, PUBLIC_K, PUBLIC_V, PUBLIC_MASK))
    forward(ctx, q, k, v, mask, False, 2, 2, masking="the statement's mask", example="the worked example in the statement")
    backward(ctx, q, k, v, mask, False, 2, 2, d_out=np.array(PUBLIC_DOUT), masking="the statement's mask")


# --- the forward -----------------------------------------------------------------------------------


@check(
    points=3,
    after=("forward-returns-output-and-lse",),
    concept="logsumexp",
    catches=("lse-missing-max", "no-scaling", "double-scaling", "running-max-init-zero", "online-softmax-no-rescale"),
)
def lse_is_the_logsumexp_of_the_scaled_allowed_scores(ctx):
    """lse[i] = log Σ_j exp(q_i·k_j / sqrt(d)) over query i's allowed keys: the running max plus log of the running sum.

    T=6 queries, S=9 keys, d=4, dv=5, blocks of 2 queries and 4 keys, a random mask; queries are
    scaled up so the scores reach about ±20 and log(l) alone is far from the logsumexp.
    """
    q, k, v = qkv(ctx.rng, 6, 9, 4, 5, scale=2.5)
    forward(ctx, q, k, v, random_mask(ctx.rng, 6, 9, blocked_rows=0), False, 2, 4)


@check(
    points=3,
    after=("forward-returns-output-and-lse",),
    concept="block-edges",
    catches=("partial-block-dropped", "online-softmax-no-rescale"),
)
def forward_with_blocks_that_divide_neither_t_nor_s(ctx):
    """Query and key blocks of different sizes that divide neither T nor S, or exceed them, give the naive answer.

    (T, S, block_q, block_k) = (10, 13, 3, 4), (7, 5, 4, 2), (5, 7, 1, 1) and (4, 6, 8, 16).
    """
    for T, S, bq, bk in ((10, 13, 3, 4), (7, 5, 4, 2), (5, 7, 1, 1), (4, 6, 8, 16)):
        q, k, v = qkv(ctx.rng, T, S, 3, 2)
        forward(ctx, q, k, v, None, False, bq, bk, what=f"T={T}, S={S}, block_q={bq}, block_k={bk}")


@check(
    points=3,
    after=("forward-returns-output-and-lse",),
    concept="online-softmax",
    catches=("online-softmax-no-rescale", "online-softmax-acc-not-rescaled", "online-rescale-sign-flipped"),
)
def forward_rescales_when_the_max_grows(ctx):
    """When a later key block holds a larger score, l and acc are rescaled by exp(m_old - m_new).

    Keys sorted so every query's scores grow from block to block, blocks of 3 keys.
    """
    q, k, v = qkv(ctx.rng, 4, 12, 4, 3)
    order = np.argsort(q.sum(axis=0) @ k.T)
    forward(ctx, q, k[order] * 1.5, v[order], None, False, 2, 3, keys="sorted so the scores grow block by block")


@check(
    points=2,
    after=("forward-returns-output-and-lse",),
    concept="numerical-stability",
    catches=("softmax-overflow", "max-over-blocked"),
)
def forward_stable_at_large_scores(ctx):
    """Scores near 1250 stay finite, and a blocked key scoring near 3000 takes nothing (lse included).

    q and k near 25 in every feature, the last key near 60 and blocked for all but the last
    query: a block max taken over the blocked key too makes the allowed terms underflow.
    """
    T, S, d = 3, 6, 4
    q = (25.0 + ctx.rng.normal(0.0, 0.1, size=(T, d))).round(6)
    k = (25.0 + ctx.rng.normal(0.0, 0.1, size=(S, d))).round(6)
    k[-1] = (60.0 + ctx.rng.normal(0.0, 0.1, size=d)).round(6)
    v = ctx.rng.normal(0.0, 1.0, size=(S, 2)).round(6)
    mask = np.ones((T, S), dtype=bool)
    mask[:-1, -1] = False
    forward(ctx, q, k, v, mask, False, 2, 2, masking="the last key blocked for all but the last query", scores="about 1250, 3000 blocked")


@check(
    points=2,
    after=("forward-returns-output-and-lse",),
    concept="online-softmax",
    catches=("running-max-init-zero", "softmax-overflow"),
)
def forward_stable_when_every_score_is_far_below_zero(ctx):
    """Queries whose scores are all near -1250 get their softmax and an lse near -1250: the running max starts at -inf."""
    T, S, d = 3, 6, 4
    q = (25.0 + ctx.rng.normal(0.0, 0.1, size=(T, d))).round(6)
    q[-1] = ctx.rng.normal(0.0, 0.02, size=d).round(6)
    k = (-25.0 + ctx.rng.normal(0.0, 0.1, size=(S, d))).round(6)
    v = ctx.rng.normal(0.0, 1.0, size=(S, 3)).round(6)
    forward(ctx, q, k, v, None, False, 2, 2, scores="about -1250 for queries 0 and 1")


@check(
    points=2,
    after=("forward-returns-output-and-lse",),
    concept="masking",
    catches=("mask-inverted", "fill-value-too-weak", "mask-ignored"),
)
def mask_true_means_allowed(ctx):
    """The T×S mask is True for allowed keys; blocked keys add nothing to the output or the lse, in every block."""
    q, k, v = qkv(ctx.rng, 6, 11, 4, 3)
    forward(ctx, q, k, v, random_mask(ctx.rng, 6, 11, blocked_rows=0), False, 4, 4)


@check(
    points=3,
    after=("forward-returns-output-and-lse",),
    concept="masking",
    catches=("blocked-row-nan", "blocked-row-uniform", "additive-mask-leaks", "mask-inverted"),
)
def empty_rows_give_zero_output_and_minus_inf_lse(ctx):
    """A query with no allowed key outputs zeros and lse = -inf (never NaN).

    One whose first key blocks are all blocked still attends to its later keys.
    """
    T, S = 5, 9
    q, k, v = qkv(ctx.rng, T, S, 4, 3)
    mask = random_mask(ctx.rng, T, S, blocked_rows=0)
    mask[1] = False
    mask[3, :6] = False
    mask[3, 7] = True
    out, _ = forward(ctx, q, k, v, mask, False, 2, 3, masking="query 1 fully blocked, query 3 blocked in keys 0-5")
    if np.any(out[1] != 0):
        ctx.fail("the fully blocked query 1 must output exactly zeros")


@check(
    points=3,
    after=("forward-returns-output-and-lse", "backward-returns-three-gradients"),
    concept="causal-mask",
    catches=("causal-off-by-one", "causal-alignment-wrong"),
)
def causal_is_aligned_bottom_right(ctx):
    """causal=True lets query i see key j when j <= i + S - T (the last query sees every key), forward and backward.

    T=4, S=7 (a cached prefix of 3 keys) and T=6, S=4 (the first two queries see nothing), blocks
    of 3 queries and 2 keys. Aligning the diagonal to the top-left corner (j <= i) is right only
    when T = S.
    """
    for T, S in ((4, 7), (6, 4)):
        q, k, v = qkv(ctx.rng, T, S, 3, 2)
        forward(ctx, q, k, v, None, True, 3, 2, what=f"T={T}, S={S}")
        backward(ctx, q, k, v, None, True, 3, 2, what=f"T={T}, S={S}")


# --- the backward ----------------------------------------------------------------------------------


@check(
    points=4,
    after=("backward-returns-three-gradients",),
    concept="backward",
    catches=BACKWARD_BUGS + ("backward-mask-not-applied", "causal-off-by-one", "causal-alignment-wrong", "lse-empty-row-nan"),
)
def gradients_match_finite_differences(ctx):
    """Along random directions δ, (L(x+εδ) − L(x−εδ)) / 2ε of the naive forward equals your gradient · δ.

    L = sum(out · d_out), ε = 1e-5, for δ on q, on k and on v separately; T=5, S=8, d=4, dv=3
    with a random mask and a fully blocked query, then T=6, S=9 causal (bottom-right) with a mask,
    blocks of 2 queries and 3 keys. Needs no reference gradients: it is the definition of one.
    """
    eps = 1e-5
    for T, S, causal in ((5, 8, False), (6, 9, True)):
        q, k, v = qkv(ctx.rng, T, S, 4, 3)
        mask = random_mask(ctx.rng, T, S, blocked_rows=1)
        args = backward_args(ctx, q, k, v, mask, causal)
        ctx.describe(T=T, S=S, d=4, dv=3, mask="random, one fully blocked query", causal=causal, block_q=2, block_k=3, epsilon=eps)
        grads = gradients(ctx, args, mask, causal, block_q=2, block_k=3)
        ctx.last_call.expected = naive_gradients(q, k, v, args[5], mask, causal)
        for i, name in enumerate(NAMES):
            if not np.all(np.isfinite(grads[i])):
                ctx.fail(f"T={T}, S={S}, causal={causal}: {name} has NaN or inf entries")
            base = [q, k, v]
            delta = ctx.rng.normal(size=base[i].shape)
            plus, minus = list(base), list(base)
            plus[i], minus[i] = base[i] + eps * delta, base[i] - eps * delta
            numeric = (
                loss(plus[0], plus[1], plus[2], args[5], mask, causal) - loss(minus[0], minus[1], minus[2], args[5], mask, causal)
            ) / (2 * eps)
            analytic = float(np.sum(grads[i] * delta))
            if not np.isclose(analytic, numeric, rtol=1e-5, atol=1e-7):
                ctx.fail(
                    f"T={T}, S={S}, causal={causal}: along a random direction of {name[1]}, the finite difference of "
                    f"the loss is {numeric:.8g} but your {name} · direction is {analytic:.8g}"
                    + (f" (ratio {analytic / numeric:.4g})" if numeric else "")
                )


@check(points=3, after=("backward-returns-three-gradients",), concept="backward", catches=("dv-not-transposed", "dk-from-wrong-operand"))
def gradients_match_when_t_equals_s(ctx):
    """With T = S = 6 and block_q = block_k = 3, where a missing transpose of a block still fits the shapes."""
    q, k, v = qkv(ctx.rng, 6, 6, 3, 3)
    backward(ctx, q, k, v, None, False, 3, 3)


@check(
    points=3,
    after=("backward-returns-three-gradients",),
    concept="block-edges",
    catches=("partial-block-dropped",) + BACKWARD_BUGS,
)
def backward_with_blocks_that_divide_neither_t_nor_s(ctx):
    """The backward with blocks of different sizes that divide neither T nor S, or exceed them, d ≠ dv.

    (T, S, block_q, block_k) = (10, 13, 3, 4), (7, 5, 4, 2) and (4, 6, 8, 16), d=4, dv=2.
    """
    for T, S, bq, bk in ((10, 13, 3, 4), (7, 5, 4, 2), (4, 6, 8, 16)):
        q, k, v = qkv(ctx.rng, T, S, 4, 2)
        backward(ctx, q, k, v, None, False, bq, bk, what=f"T={T}, S={S}, block_q={bq}, block_k={bk}")


@check(
    points=3,
    after=("backward-returns-three-gradients",),
    concept="masking",
    catches=("lse-empty-row-nan", "backward-mask-not-applied", "mask-inverted", "mask-ignored", "blocked-row-nan"),
)
def empty_rows_get_zero_gradients(ctx):
    """A query with no allowed key (lse = -inf) has dq = 0 exactly and adds nothing to dk and dv; blocked keys get nothing."""
    T, S = 6, 7
    q, k, v = qkv(ctx.rng, T, S, 3, 3)
    mask = random_mask(ctx.rng, T, S, blocked_rows=2)
    mask[:, 0] = False  # key 0 blocked for every query: its dk and dv are 0
    (dq, dk, dv), _ = backward(ctx, q, k, v, mask, False, 2, 3, masking="random, two fully blocked queries, key 0 blocked everywhere")
    empty = ~mask.any(axis=1)
    if np.any(dq[empty] != 0):
        ctx.fail("the dq rows of fully blocked queries must be exactly 0")
    if np.any(dk[0] != 0) or np.any(dv[0] != 0):
        ctx.fail("key 0 is blocked for every query: its dk and dv rows must be exactly 0")


@check(points=2, after=("backward-returns-three-gradients",), concept="numerical-stability", catches=("softmax-overflow",))
def backward_finite_at_large_scores(ctx):
    """Scores of ±1000 give finite gradients equal to the naive ones: P = exp(s - lse) never exceeds 1."""
    q, k, v = qkv(ctx.rng, 4, 5, 4, 3)
    q = q / np.linalg.norm(q, axis=1, keepdims=True) * 45.0
    k = k / np.linalg.norm(k, axis=1, keepdims=True) * 45.0
    k[:2] = q[:2]
    (dq, dk, dv), _ = backward(ctx, q, k, v, None, False, 2, 2, scores="up to ±1000")
    if not all(np.isfinite(g).all() for g in (dq, dk, dv)):
        ctx.fail("gradients must be finite at scores of ±1000")


def replay_twice(module, *args, **kwargs) -> list[float]:
    """[1.0] when two calls of `module`'s flash_backward on these inputs differ in any bit, else [0.0]."""
    first, second = (module.flash_backward(*args, **kwargs) for _ in range(2))
    same = all(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True) for a, b in zip(first, second))
    return [0.0 if same else 1.0]


@check(points=2, after=("backward-returns-three-gradients",), concept="backward", catches=("backward-nondeterministic",))
def two_backward_calls_are_bitwise_identical(ctx):
    """Calling flash_backward twice on the same inputs gives bitwise-identical dq, dk, dv.

    T=9, S=23, blocks of 2 queries and 3 keys, a random mask: dq sums over eight key blocks, so
    any change in the order of that sum (a random or thread-completion order, the CPU form of a
    GPU's atomic adds) changes its last bits. Values within tolerance are not enough here.
    """
    T, S = 9, 23
    q, k, v = qkv(ctx.rng, T, S, 3, 2)
    mask = random_mask(ctx.rng, T, S)
    args = backward_args(ctx, q, k, v, mask)
    kwargs = {"mask": mask, **blocks(2, 3)}
    ctx.describe(T=T, S=S, d=3, dv=2, mask="random", block_q=2, block_k=3)
    first = gradients(ctx, args, mask, block_q=2, block_k=3)
    second = gradients(ctx, args, mask, block_q=2, block_k=3)
    calls = ctx.calls[-2:]
    differ = [name for name, a, b in zip(NAMES, first, second) if not np.array_equal(a, b, equal_nan=True)]
    last = calls[-1].outcome
    ctx.record_for_diagnosis(
        BWD,
        args,
        kwargs,
        Outcome("ok", value=[1.0 if differ else 0.0], mutated=last.mutated, output=last.output, seconds=last.seconds),
        replay=replay_twice,
        instead_of=calls,
    ).expected = [0.0]
    if differ:
        a, b = first[NAMES.index(differ[0])], second[NAMES.index(differ[0])]
        worst = float(np.nanmax(np.abs(a - b)))
        ctx.fail(
            f"the second call's {', '.join(differ)} differ(s) from the first's (by up to {worst:.3g} in {differ[0]}): "
            "accumulate every sum in a fixed order (no random or thread-completion order, no state kept between calls)"
        )


# --- reads above the diagonal ----------------------------------------------------------------------


def needed_rows(T: int, S: int, block_q: int, block_k: int) -> tuple[int, int]:
    """(key rows, query rows) a causal loop reads when it skips every block entirely above the
    diagonal: Σ over query blocks of the keys in the key blocks it needs, and Σ over key blocks
    of the queries in the query blocks that need it."""
    keys = queries = 0
    for i0 in range(0, T, block_q):
        i1 = min(i0 + block_q, T)
        for j0 in range(0, S, block_k):
            if j0 <= i1 - 1 + S - T:
                keys += min(j0 + block_k, S) - j0
                queries += i1 - i0
    return keys, queries


READ_CASE = {"T": 11, "S": 14, "d": 3, "dv": 2, "block_q": 3, "block_k": 4}


def read_verdict(rows, widest, T, S, block_q, block_k) -> tuple[list[float], list[str]]:
    """([1.0 when more rows were read than the blocks need, 1.0 when a read was wider than one
    block], what broke them) for the rows and widest reads of (q, k, v): [0.0, 0.0] passes. The two
    halves tell a loop that reads every block (causal-blocks-not-skipped) from one that reads an
    array whole (materialises-scores, or a conversion)."""
    keys, queries = needed_rows(T, S, block_q, block_k)
    problems = []
    for name, n, w, budget, width in (
        ("q", rows[0], widest[0], queries, block_q),
        ("k", rows[1], widest[1], keys, block_k),
        ("v", rows[2], widest[2], keys, block_k),
    ):
        if w > width and name != "q":  # q may be converted whole: every query row is needed anyway
            problems.append(
                f"{name} was read {int(w)} rows at once, more than one block ({width}): "
                f"np.asarray({name}), {name}.T or {name} @ x read the whole array"
            )
        elif n > budget:
            problems.append(f"{int(n)} rows of {name} were read in all, more than the {budget} the blocks on or below the diagonal need")
    verdict = [float(any("in all" in p for p in problems)), float(any("at once" in p for p in problems))]
    return verdict, problems


def replay_reads(module, fn, *args, **kwargs) -> list[float]:
    """read_verdict of `module`'s fn run under count_reads on these inputs: the read check's
    verdict, [0.0, 0.0] when it reads only the blocks on or below the causal diagonal, by slices."""
    _, extra = count_reads(getattr(module, fn), *args, **kwargs)
    T, S = len(args[0]), len(args[1])
    return read_verdict(extra["rows"], extra["widest"], T, S, kwargs["block_q"], kwargs["block_k"])[0]


def _replay_forward(module, *args, **kwargs):
    return replay_reads(module, FWD, *args, **kwargs)


def _replay_backward(module, *args, **kwargs):
    return replay_reads(module, BWD, *args, **kwargs)


@check(
    points=4,
    after=("forward-returns-output-and-lse", "backward-returns-three-gradients"),
    concept="causal-mask",
    catches=("causal-blocks-not-skipped", "materialises-scores"),
)
def blocks_above_the_causal_diagonal_are_never_read(ctx):
    """Under causal=True neither pass reads a block of q, k or v that lies entirely above the diagonal.

    T=11, S=14, blocks of 3 queries and 4 keys. q, k and v arrive as array-likes that count the
    rows you read: slicing rows (k[j0:j1]) returns a NumPy array and counts its rows; anything else
    that needs the numbers (np.asarray(k), k.T, k @ x, k.astype) reads every row at once. The
    rows read of k and of v must not exceed the key rows of the blocks each query block needs,
    summed over query blocks; those of q the query rows of the blocks each key block needs; and
    no single read of k or v may be wider than one block (q may be converted whole).
    """
    c = READ_CASE
    T, S, bq, bk = c["T"], c["S"], c["block_q"], c["block_k"]
    q, k, v = qkv(ctx.rng, T, S, c["d"], c["dv"])
    keys, queries = needed_rows(T, S, bq, bk)
    ctx.describe(T=T, S=S, d=c["d"], dv=c["dv"], causal=True, block_q=bq, block_k=bk, key_rows_needed=keys, query_rows_needed=queries)
    out, lse = naive_forward(q, k, v, None, True)
    d_out = ctx.rng.normal(0.0, 1.0, size=out.shape).round(6)
    kwargs = {"causal": True, **blocks(bq, bk)}
    for fn, args, replay in ((FWD, (q, k, v), _replay_forward), (BWD, (q, k, v, out, lse, d_out), _replay_backward)):
        outcome = ctx.outcome(fn, *args, harness="attn_kit.base.harness:count_reads", **kwargs)
        real = ctx.last_call
        if not outcome.ok:
            raise CallFailed(real)
        rows, widest = outcome.extra.get("rows", [-1.0] * 3), outcome.extra.get("widest", [-1.0] * 3)
        verdict, problems = read_verdict(rows, widest, T, S, bq, bk)
        ctx.record_for_diagnosis(
            fn,
            args,
            kwargs,
            Outcome("ok", value=verdict, mutated=outcome.mutated, output=outcome.output, seconds=outcome.seconds),
            replay=replay,
            instead_of=(real,),
        ).expected = [0.0, 0.0]
        if problems:
            counts = ", ".join(f"{n}: {int(r)} rows" for n, r in zip("qkv", rows))
            ctx.fail(
                f"{fn} read {counts}; " + "; ".join(problems) + ". Skip a key block when its first key lies above the "
                "last query of the query block (j0 > i1 - 1 + S - T) before reading it, and read q, k, v one block slice at a time"
            )


# --- memory -----------------------------------------------------------------------------------------


def memory_bound(T: int, S: int, d: int, dv: int) -> int:
    """The statement's bound: 32·(T + S)·(d + dv) bytes, four float64 copies of every per-row array."""
    return 32 * (T + S) * (d + dv)


def replay_peak_over_bound(module, q, k, v, out, lse, d_out, **kwargs) -> list[float]:
    """[1.0] when `module`'s flash_backward, measured under tracemalloc, peaks above memory_bound."""
    bound = memory_bound(len(q), len(k), np.shape(q)[1], np.shape(v)[1])
    return peak_over(bound, lambda *a: module.flash_backward(*a, **kwargs), q, k, v, out, lse, d_out)


@check(points=4, after=("backward-returns-three-gradients",), concept="memory", catches=("materialises-scores",))
def backward_memory_stays_within_bound(ctx):
    """At T = S = 1024 the backward's peak allocation stays within 32·(T + S)·(d + dv) bytes: no T×S P or dP.

    d = dv = 8, block_q = block_k = 64, causal: the bound is 1 MiB, while a T×S float64 matrix
    is 8 MiB and even a float16 one 2 MiB. Measured in your process with tracemalloc from the
    start of the call (the inputs do not count, your dq, dk, dv do), and on Linux also by the
    kernel. Recompute each block of P from the scores and lse instead of storing it.
    """
    m = MEMORY
    T, S, d, dv, b = m["T"], m["S"], m["d"], m["dv"], m["block"]
    q, k, v = qkv(ctx.rng, T, S, d, dv)
    out, lse = naive_forward(q, k, v, None, True)
    d_out = ctx.rng.normal(0.0, 1.0, size=out.shape).round(6)
    args = (q, k, v, out, lse, d_out)
    bound, naive = memory_bound(T, S, d, dv), 8 * T * S
    ctx.describe(T=T, S=S, d=d, dv=dv, causal=True, block_q=b, block_k=b)
    limit = kernel_limit(bound, naive)
    outcome = ctx.outcome(
        BWD,
        *args,
        causal=True,
        block_q=b,
        block_k=b,
        harness="attn_kit.base.harness:measure_quiet",
        memory_limit=limit,
        time_limit=measured_time_limit(ctx),
    )
    naive_text = (
        f"bound 32·(T + S)·(d + dv) = {bound / 2**20:.2f} MiB; a T×S matrix is {naive / 2**20:.0f} MiB in float64 "
        f"and {naive / 4 / 2**20:.0f} MiB in float16"
    )
    advice = "Recompute each block of P as exp(s - lse) and drop it after the block"
    built = f"Something of T×S size is built (P, dP or dS). {advice}"
    memory_verdict(ctx, outcome, args, _replay_memory, limit, bound, naive, f"at T = S = {T}", naive_text, advice, built)


def _replay_memory(module, *args):
    b = MEMORY["block"]
    return replay_peak_over_bound(module, *args, causal=True, block_q=b, block_k=b)


# --- rules -------------------------------------------------------------------------------------------


@check(points=1, after=("forward-returns-output-and-lse",), concept="block-edges")
def value_error_when_a_block_size_is_below_one(ctx):
    """block_q < 1 or block_k < 1 raises ValueError, in flash_forward and in flash_backward."""
    q, k, v = qkv(ctx.rng, 3, 5, 2, 2)
    args = backward_args(ctx, q, k, v)
    for fn, call_args in ((FWD, (q, k, v)), (BWD, args)):
        for bq, bk in ((0, 2), (2, -1)):
            ctx.describe(T=3, S=5, d=2, dv=2, block_q=bq, block_k=bk)
            outcome = ctx.outcome(fn, *call_args, block_q=bq, block_k=bk)
            if outcome.status == "raised" and outcome.error.type == "ValueError":
                continue
            happened = outcome.describe_failure() if not outcome.ok else "returned normally"
            ctx.fail(f"{fn} with block_q={bq}, block_k={bk} should raise ValueError; the call {happened}")


@check(points=2, catches=("mutates-input",))
def inputs_left_unmodified(ctx):
    """Neither function writes into its arguments: q, k, v, mask, and out, lse, d_out for the backward."""
    q, k, v = qkv(ctx.rng, 4, 6, 3, 2)
    mask = random_mask(ctx.rng, 4, 6)
    args = backward_args(ctx, q, k, v, mask)
    ctx.describe(T=4, S=6, d=3, dv=2, block_q=2, block_k=4)
    for fn, call_args in ((FWD, (q, k, v)), (BWD, args)):
        outcome = ctx.outcome(fn, *call_args, mask=mask, block_q=2, block_k=4)
        if outcome.mutated:
            ctx.fail(f"`{fn}` changed its argument(s) {', '.join(outcome.mutated)}; work on new arrays")
    require_a_returned_call(ctx)


@check(points=4, after=("forward-returns-output-and-lse", "backward-returns-three-gradients"), catches=FORWARD_BUGS + BACKWARD_BUGS)
def randomised_agreement(ctx):
    """Agrees with the naive forward and gradients on randomised hidden cases: sizes, blocks, masks, causal.

    Four cases with T and S up to 12, widths up to 6, block sizes from 1 to beyond T and S, random
    masks or none, causal or not, one with scores in the hundreds. Rerun with the same --seed to get
    the same cases.
    """
    for n in range(4):
        T, S = int(ctx.rng.integers(1, 13)), int(ctx.rng.integers(1, 13))
        d, dv = int(ctx.rng.integers(1, 7)), int(ctx.rng.integers(1, 7))
        bq, bk = int(ctx.rng.integers(1, T + 3)), int(ctx.rng.integers(1, S + 3))
        q, k, v = qkv(ctx.rng, T, S, d, dv, scale=6.0 if n == 3 else 1.0)
        mask = random_mask(ctx.rng, T, S) if n % 2 == 0 and T > 1 else None
        causal = n >= 2
        forward(ctx, q, k, v, mask, causal, bq, bk, what=f"case {n + 1}", case=n + 1)
        backward(ctx, q, k, v, mask, causal, bq, bk, what=f"case {n + 1}", case=n + 1)


# --- `attn-kit bench` -------------------------------------------------------------------------------


@SUITE.for_bench
def bench_inputs(rng, T, d):
    """The backward at S = T, causal, with the naive forward's out and lse: q, k, v, d_out all T×d."""
    q, k, v = (rng.normal(0.0, 1.0, size=(T, d)).round(6) for _ in range(3))
    out, lse = naive_forward(q, k, v, None, True)
    d_out = rng.normal(0.0, 1.0, size=(T, d)).round(6)
    return (q, k, v, out, lse, d_out), {"mask": None, "causal": True}
