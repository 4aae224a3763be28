"""The graded suite for paged-attention: one decode step over a KV cache stored in blocks.

Every case is built from dense per-sequence keys and values: the kit scatters them into a pool
of blocks through block tables it makes up (shuffled, longer than needed, sometimes sharing a
prefix block) and fills every other slot with garbage. Expected values are plain attention of each
query over its own dense keys and values (`dense_attention`), which never looks at the pool, so a
solution that reads the wrong block, slot or length cannot agree by accident.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attn_kit.compare.registry import Suite

from .cases import lists
from .verdicts import far_score_tolerance, require_a_returned_call

SUITE = Suite("paged-attention")
check = SUITE.check

FN = "paged_attention"
AXES = ("sequence", "head", "feature")
DIMS = "B×H×d"


def dense_attention(q, keys, values) -> np.ndarray:
    """out[b] = softmax(q[b]·keys[b]ᵀ / sqrt(d)) @ values[b] per head; zeros for an empty context.

    keys[b] and values[b] are n_b×H×d arrays in token order."""
    q = np.asarray(q, dtype=np.float64)
    B, H, d = q.shape
    out = np.zeros((B, H, np.shape(values[0])[-1]))
    for b in range(B):
        if len(keys[b]) == 0:
            continue
        s = np.einsum("hd,nhd->hn", q[b], keys[b]) / np.sqrt(d)
        w = np.exp(s - s.max(axis=1, keepdims=True))
        out[b] = np.einsum("hn,nhd->hd", w / w.sum(axis=1, keepdims=True), values[b])
    return out


@dataclass
class Paged:
    q: np.ndarray
    k_pool: np.ndarray
    v_pool: np.ndarray
    tables: list
    lengths: list
    keys: list  # dense per-sequence keys, n_b×H×d
    values: list

    @property
    def expected(self) -> np.ndarray:
        return dense_attention(self.q, self.keys, self.values)

    def facts(self) -> dict:
        return {
            "B": len(self.lengths),
            "H": self.q.shape[1],
            "d": self.q.shape[2],
            "block_size": self.k_pool.shape[1],
            "blocks_in_pool": self.k_pool.shape[0],
            "context_lens": list(self.lengths),
            "block_tables": [list(map(int, t)) for t in self.tables],
        }


def build(rng, lengths, block_size=4, H=2, d=4, extra=1, share=False, garbage=(np.nan, 1e30), shuffle=True, scale=1.0) -> Paged:
    """Dense keys/values for sequences of the given lengths, scattered into a shuffled pool.

    Each table lists `extra` more blocks than its length needs (holding garbage); with share=True
    sequence 1 reuses sequence 0's first block as its own first block (a shared prefix). Every
    slot no token owns holds garbage: NaN, 1e30 and -1e30 in turn.
    """
    B = len(lengths)
    need = [-(-n // block_size) for n in lengths]
    keys = [(rng.normal(0.0, scale, size=(n, H, d))).round(6) for n in lengths]
    values = [rng.normal(0.0, 1.0, size=(n, H, d)).round(6) for n in lengths]
    share = share and B > 1 and lengths[0] >= block_size and lengths[1] >= block_size
    if share:
        keys[1][:block_size], values[1][:block_size] = keys[0][:block_size], values[0][:block_size]
    total = sum(need) + B * extra + 2  # two blocks no table lists
    ids = list(rng.permutation(total)) if shuffle else list(range(total))
    k_pool = np.empty((total, block_size, H, d))
    v_pool = np.empty((total, block_size, H, d))
    fill = np.resize(np.array([g for g in garbage] + [-g for g in garbage if g == g]), k_pool.size)
    k_pool.flat[:] = fill
    v_pool.flat[:] = fill[::-1]
    tables: list[list[int]] = []
    for b, n in enumerate(lengths):
        if share and b == 1:
            table = [tables[0][0]] + [int(ids.pop()) for _ in range(need[b] - 1 + extra)]
        else:
            table = [int(ids.pop()) for _ in range(need[b] + extra)]
        for t in range(n):
            blk, slot = table[t // block_size], t % block_size
            k_pool[blk, slot], v_pool[blk, slot] = keys[b][t], values[b][t]
        tables.append(table)
    q = rng.normal(0.0, scale, size=(B, H, d)).round(6)
    return Paged(q, k_pool, v_pool, tables, list(lengths), keys, values)


def compare_paged(ctx, case: Paged, what="output", tables=None, lengths=None, q=None, **kw):
    ctx.describe(**case.facts(), **kw)
    got = ctx.call(
        FN,
        case.q if q is None else q,
        case.k_pool,
        case.v_pool,
        case.tables if tables is None else tables,
        case.lengths if lengths is None else lengths,
    )
    return ctx.expect_close(got, case.expected, what, AXES, DIMS)


@check(points=1, public=True)
def output_shape(ctx):
    """The output is B×H×d: one attention result per sequence and head (B=3, H=2, d=4)."""
    case = build(ctx.rng, [3, 2, 4], block_size=2)
    ctx.describe(**case.facts())
    got = ctx.call(FN, case.q, case.k_pool, case.v_pool, case.tables, case.lengths)
    ctx.array(got, "output", (3, 2, 4), DIMS)


G = 99.0  # the statement's garbage marker
PUBLIC_Q = [[[1.0, 1.0]], [[0.5, 0.0]]]
PUBLIC_K_POOL = [[[[1.0, 0.0]], [[G, G]]], [[[G, G]], [[G, G]]], [[[0.0, 1.0]], [[1.0, 1.0]]], [[[2.0, 0.0]], [[G, G]]]]
PUBLIC_V_POOL = [[[[0.0, 4.0]], [[G, G]]], [[[G, G]], [[G, G]]], [[[1.0, 0.0]], [[0.0, 2.0]]], [[[3.0, 1.0]], [[G, G]]]]
PUBLIC_TABLES = [[2, 0], [3]]
PUBLIC_LENS = [3, 1]


@check(points=2, public=True, after=("output-shape",), catches=("reads-past-context", "block-table-order", "no-scaling", "double-scaling"))
def public_paged_example(ctx):
    """The statement's worked example: two sequences, blocks of 2 slots, a 99 in every unused slot."""
    q, kp, vp = np.array(PUBLIC_Q), np.array(PUBLIC_K_POOL), np.array(PUBLIC_V_POOL)
    keys = [kp[[2, 2, 0], [0, 1, 0]], kp[[3], [0]]]
    values = [vp[[2, 2, 0], [0, 1, 0]], vp[[3], [0]]]
    case = Paged(q, kp, vp, PUBLIC_TABLES, PUBLIC_LENS, keys, values)
    compare_paged(ctx, case, example="the worked example in the statement")


@check(
    points=3,
    after=("output-shape",),
    catches=("block-table-order", "slot-index-swapped", "reads-past-context", "reads-one-short"),
    concept="paged-cache",
)
def matches_dense_attention(ctx):
    """Equals plain attention of each query over its own tokens gathered in order (lists and NumPy tables)."""
    case = build(ctx.rng, [7, 4, 9], garbage=(0.0,))  # harmless zeros in the spare slots here
    compare_paged(ctx, case, what="output (tables as lists)")
    np_tables = [np.array(t, dtype=np.int64) for t in case.tables]
    compare_paged(
        ctx, case, what="output (tables and lengths as NumPy ints)", tables=np_tables, lengths=np.array(case.lengths, dtype=np.int64)
    )


@check(
    points=3, after=("output-shape",), catches=("reads-past-context", "block-table-order", "masked-garbage-leaks"), concept="paged-cache"
)
def garbage_elsewhere_changes_nothing(ctx):
    """NaN, 1e30 and -1e30 in slots past each length and in blocks no table lists change nothing."""
    case = build(ctx.rng, [6, 3, 5], block_size=4)
    compare_paged(ctx, case, garbage="NaN, ±1e30 in every slot no token owns")


@check(points=3, after=("output-shape",), catches=("block-table-order",), concept="paged-cache")
def shuffled_block_tables(ctx):
    """Blocks are read in the order the table lists them, whatever their ids (here descending)."""
    case = build(ctx.rng, [12, 10], block_size=3, extra=0, garbage=(0.0,))
    for b, table in enumerate(case.tables):  # relabel so each table runs from high ids to low
        order = sorted(table, reverse=True)
        remap = dict(zip(table, order))
        k, v = case.k_pool.copy(), case.v_pool.copy()
        for old, new in remap.items():
            k[new], v[new] = case.k_pool[old], case.v_pool[old]
        case.k_pool, case.v_pool = k, v
        case.tables[b] = [remap[x] for x in table]
    compare_paged(ctx, case, tables_order="descending block ids")


@check(
    points=3,
    after=("output-shape",),
    catches=("reads-past-context", "slot-index-swapped", "reads-one-short", "blocked-row-nan"),
    concept="paged-cache",
)
def context_lengths_at_the_edges(ctx):
    """Lengths 0, 1, exact multiples of the block size and one past them; a length of 0 gives zeros."""
    bs = 4
    case = build(ctx.rng, [0, 1, bs, 2 * bs, bs + 1, 2 * bs - 1], block_size=bs)
    out = compare_paged(ctx, case, block_size_note="lengths 0, 1, 4, 8, 5, 7 with block_size 4")
    if np.any(out[0] != 0):
        ctx.fail("sequence 0 has context_lens 0: its output must be exactly zeros")


@check(points=2, after=("output-shape",), catches=("block-table-order",), concept="paged-cache")
def shared_and_overlong_tables(ctx):
    """Tables may differ in length, list more blocks than needed, and share a block (a common prefix)."""
    case = build(ctx.rng, [9, 6, 2], block_size=4, extra=2, share=True)
    compare_paged(ctx, case, tables_note="two spare blocks each; sequences 0 and 1 share their first block")


@check(points=2, after=("output-shape",), catches=("no-scaling", "double-scaling", "scale-after-softmax"), concept="scaling")
def scores_scaled_by_sqrt_d(ctx):
    """Scores are q·k / sqrt(d) per head (d=16 here)."""
    case = build(ctx.rng, [5, 7], d=16, garbage=(0.0,))
    compare_paged(ctx, case)


@check(points=2, after=("output-shape",), catches=("softmax-overflow",), concept="numerical-stability")
def stable_at_large_scores(ctx):
    """Scores in the thousands neither overflow nor give NaN."""
    case = build(ctx.rng, [6, 3], d=4, scale=30.0, garbage=(0.0,))
    for b, n in enumerate(case.lengths):  # the last token's key points along the query: score ≈ 1.2·|q|²/2
        key = case.q[b] * 1.2
        case.keys[b][n - 1] = key
        case.k_pool[case.tables[b][(n - 1) // case.k_pool.shape[1]], (n - 1) % case.k_pool.shape[1]] = key
    compare_paged(ctx, case, scores="in the thousands (each last key points along its query)")


@check(points=2, after=("output-shape",), catches=("softmax-overflow",), concept="numerical-stability")
def stable_when_every_score_is_far_below_zero(ctx):
    """Scores that are all near -1250 still give each sequence's softmax, not zeros or NaN.

    q near +25 and every key near -25 in each of d=4 features (scores about -1250 after the
    1/sqrt(d) scale), blocks of 2: exp of a raw score underflows to 0 (0/0 = NaN), and a
    block-by-block online softmax whose running max starts at 0 instead of -inf outputs zeros.
    """
    d = 4
    case = build(ctx.rng, [5, 3], block_size=2, d=d, garbage=(0.0,))
    bs = case.k_pool.shape[1]
    case.q = (25.0 + ctx.rng.normal(0.0, 0.1, size=case.q.shape)).round(6)
    for b, n in enumerate(case.lengths):
        case.keys[b] = (-25.0 + ctx.rng.normal(0.0, 0.1, size=case.keys[b].shape)).round(6)
        for t in range(n):
            case.k_pool[case.tables[b][t // bs], t % bs] = case.keys[b][t]
    ctx.describe(**case.facts(), scores="about -1250 for every token")
    got = ctx.call(FN, case.q, case.k_pool, case.v_pool, case.tables, case.lengths)
    scores = [np.einsum("hd,nhd->hn", case.q[b], case.keys[b]) / np.sqrt(d) for b in range(len(case.lengths))]
    ctx.expect_close(
        got, case.expected, "output", AXES, DIMS, **far_score_tolerance(got, np.concatenate(scores, axis=1), np.concatenate(case.values))
    )


@check(points=2, catches=("mutates-input",))
def inputs_left_unmodified(ctx):
    """The pools, tables, lengths and q are read, never written (as NumPy arrays and as lists)."""
    case = build(ctx.rng, [5, 2], garbage=(0.0,))
    for kind, q, tables, lengths in (
        ("NumPy arrays", case.q.copy(), [np.array(t) for t in case.tables], np.array(case.lengths)),
        ("lists", lists(case.q), case.tables, case.lengths),
    ):
        ctx.describe(**case.facts(), q_given_as=kind)
        outcome = ctx.outcome(FN, q, case.k_pool.copy(), case.v_pool.copy(), tables, lengths)
        if outcome.mutated:
            ctx.fail(
                f"`{FN}` changed its argument(s) {', '.join(outcome.mutated)} (given {kind}); the pool "
                "is shared by every sequence and must only be read"
            )
    require_a_returned_call(ctx)


@check(
    points=4,
    after=("output-shape",),
    catches=(
        "reads-past-context",
        "block-table-order",
        "slot-index-swapped",
        "no-scaling",
        "softmax-overflow",
        "double-scaling",
        "scale-after-softmax",
        "reads-one-short",
        "masked-garbage-leaks",
        "blocked-row-nan",
    ),
)
def randomised_agreement(ctx):
    """Agrees with dense attention on randomised hidden cases: block sizes, lengths, heads, large scores.

    Five cases with up to 4 sequences of up to 30 tokens, block sizes 1 to 8, up to 3 heads, garbage
    everywhere else and one case with scores in the hundreds. Rerun with the same --seed to get the
    same cases.
    """
    for n, big in enumerate((False, False, False, False, True)):
        B = int(ctx.rng.integers(1, 5))
        bs = int(ctx.rng.integers(1, 9))
        lengths = [int(x) for x in ctx.rng.integers(0, 31, size=B)]
        case = build(
            ctx.rng,
            lengths,
            block_size=bs,
            H=int(ctx.rng.integers(1, 4)),
            d=int(ctx.rng.integers(1, 9)),
            extra=int(ctx.rng.integers(0, 3)),
            share=bool(n % 2),
            scale=12.0 if big else 1.0,
        )
        compare_paged(ctx, case, what=f"case {n + 1}", case_number=n + 1, large_scores=big)


# --- `attn-kit bench` -------------------------------------------------------------------------------


@SUITE.for_bench
def bench_inputs(rng, T, B, H, d, block_size):
    """B sequences of T tokens each, their blocks scattered over a shuffled pool with spare blocks."""
    per_seq = -(-T // block_size)
    n_blocks = B * per_seq + 4
    k_pool, v_pool = (rng.normal(0.0, 1.0, size=(n_blocks, block_size, H, d)).round(6) for _ in range(2))
    ids = rng.permutation(n_blocks)
    tables = [ids[b * per_seq : (b + 1) * per_seq].tolist() for b in range(B)]
    q = rng.normal(0.0, 1.0, size=(B, H, d)).round(6)
    return (q, k_pool, v_pool, tables, [T] * B), {}
