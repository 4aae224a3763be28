"""The graded suite for varlen-prefill: causal attention over a packed batch of documents, given
`cu_seqlens` for queries and keys, with grouped K/V heads and RoPE positions that restart per
document.

Expected values come from `naive_document`, written here in the kit's process: for one document,
one query and one head at a time, it builds each position's rotation as a d×d matrix, scores the
query against the keys up to its own position and takes the softmax (sharing no code with the
references in solutions/varlen-prefill/). A whole pack's expected output is those rows stacked.

Besides agreement, three checks compare the candidate with itself: editing one document must leave
every other document's rows bit-identical, moving a document within the pack must leave its rows
as they were, and prefilling in chunks (each call sends the earlier chunks' keys as the cache)
must give the rows of one-shot prefill. The memory check packs 512 documents of 16 tokens and
measures one call under tracemalloc, as tiled-softmax's does: the total × total block-diagonal
mask of the pack (64 MiB even as bools) is over the bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attn_kit.compare.registry import Suite

from .verdicts import kernel_limit, measured_time_limit, memory_verdict, peak_over

SUITE = Suite("varlen-prefill")
check = SUITE.check

FN = "varlen_prefill"
AXES = ("token", "head", "feature")
DIMS = "total_q×H×dv"
# the memory check's pack: 512 one-shot documents of 16 tokens, two query heads over one K/V head
# (small documents and heads keep a correct solution on Python lists within the time limit)
MEMORY = {"docs": 512, "length": 16, "H": 2, "H_kv": 1, "d": 4, "dv": 4}


# --- the plain, obviously-correct computation ----------------------------------------------------


def rotation(p: int, d: int, base: float = 10000.0) -> np.ndarray:
    """The d×d RoPE rotation at position p ("rotate half": column i pairs with i + d/2)."""
    R = np.eye(d)
    half = d // 2
    for i in range(half):
        a = p * base ** (-2.0 * i / d)
        R[i, i] = R[i + half, i + half] = np.cos(a)
        R[i, i + half], R[i + half, i] = -np.sin(a), np.sin(a)
    return R


def naive_document(q, k, v) -> np.ndarray:
    """One document: q n_q×H×d, k and v n_k×H_kv×(d, dv), n_k ≥ n_q. Query t sits at position
    n_k - n_q + t and sees keys 0..n_k - n_q + t; query head h reads K/V head h // (H // H_kv)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    n_q, H, d = q.shape
    n_k, H_kv, dv = v.shape
    out = np.zeros((n_q, H, dv))
    Rs = [rotation(p, d) for p in range(n_k)]
    for t in range(n_q):
        pos = n_k - n_q + t
        for h in range(H):
            g = h // (H // H_kv)
            qr = Rs[pos] @ q[t, h]
            s = np.array([qr @ (Rs[j] @ k[j, g]) for j in range(pos + 1)]) / np.sqrt(d)
            w = np.exp(s - s.max())
            out[t, h] = (w / w.sum()) @ v[: pos + 1, g]
    return out


@dataclass
class Pack:
    q: np.ndarray  # total_q×H×d
    k: np.ndarray  # total_k×H_kv×d
    v: np.ndarray  # total_k×H_kv×dv
    cu_q: np.ndarray  # int32, documents + 1
    cu_k: np.ndarray

    @property
    def docs(self) -> int:
        return len(self.cu_q) - 1

    def rows(self, i: int) -> slice:
        return slice(int(self.cu_q[i]), int(self.cu_q[i + 1]))

    def keys(self, i: int) -> slice:
        return slice(int(self.cu_k[i]), int(self.cu_k[i + 1]))

    def expected(self) -> np.ndarray:
        out = np.zeros((len(self.q), self.q.shape[1], self.v.shape[2]))
        for i in range(self.docs):
            if self.rows(i).stop > self.rows(i).start:
                out[self.rows(i)] = naive_document(self.q[self.rows(i)], self.k[self.keys(i)], self.v[self.keys(i)])
        return out

    def args(self) -> tuple:
        return (self.q, self.k, self.v, self.cu_q, self.cu_k)

    def facts(self) -> dict:
        n_q, n_k = np.diff(self.cu_q).tolist(), np.diff(self.cu_k).tolist()
        return {
            "cu_seqlens_q": self.cu_q.tolist(),
            "cu_seqlens_k": self.cu_k.tolist(),
            "cached": [b - a for a, b in zip(n_q, n_k)],
            "H": self.q.shape[1],
            "H_kv": self.k.shape[1],
            "d": self.q.shape[2],
            "dv": self.v.shape[2],
        }


def cu(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


def pack(rng, n_q, cached=None, H=2, H_kv=1, d=4, dv=None, scale=1.0) -> Pack:
    """Random documents with n_q[i] new tokens after cached[i] cached ones (default none)."""
    n_q = [int(n) for n in n_q]
    cached = [0] * len(n_q) if cached is None else [int(c) for c in cached]
    n_k = [a + b for a, b in zip(n_q, cached)]
    dv = d if dv is None else dv
    tq, tk = sum(n_q), sum(n_k)
    q = (rng.normal(size=(tq, H, d)) * scale).round(6)
    k = (rng.normal(size=(tk, H_kv, d)) * scale).round(6)
    v = rng.normal(size=(tk, H_kv, dv)).round(6)
    return Pack(q, k, v, cu(n_q), cu(n_k))


def from_documents(docs, H, H_kv, d, dv) -> Pack:
    """A pack of (q_i, k_i, v_i) documents, in this order."""
    qs = [np.asarray(a, dtype=float).reshape(-1, H, d) for a, _, _ in docs]
    ks = [np.asarray(b, dtype=float).reshape(-1, H_kv, d) for _, b, _ in docs]
    vs = [np.asarray(c, dtype=float).reshape(-1, H_kv, dv) for _, _, c in docs]
    return Pack(np.concatenate(qs), np.concatenate(ks), np.concatenate(vs), cu([len(a) for a in qs]), cu([len(b) for b in ks]))


def documents(p: Pack) -> list:
    return [(p.q[p.rows(i)], p.k[p.keys(i)], p.v[p.keys(i)]) for i in range(p.docs)]


def run(ctx, p: Pack, what: str = "output", **facts) -> np.ndarray:
    """Call varlen_prefill on the pack and compare with the naive rows; returns the output."""
    ctx.describe(**p.facts(), **facts)
    got = ctx.call(FN, *p.args())
    return ctx.expect_close(got, p.expected(), what, AXES, DIMS)


# --- shape and the public example -----------------------------------------------------------------


@check(points=1, public=True, catches=("rope-on-values",))
def output_shape(ctx):
    """The output is total_q×H×dv: one row per packed query, every query head, dv-wide.

    Three documents of 2, 3 and 1 tokens; four query heads over two K/V heads; d = 4, dv = 3 (an
    odd dv: rotating the values, which carry no position, cannot even pair their columns).
    """
    p = pack(ctx.rng, [2, 3, 1], H=4, H_kv=2, d=4, dv=3)
    ctx.describe(**p.facts())
    ctx.array(ctx.call(FN, *p.args()), "output", (6, 4, 3), DIMS)


PUBLIC_Q = [[[1, 0], [0, 1]], [[1, 0], [0, 1]], [[1, 0], [0, 0]], [[0, 1], [1, 1]]]
PUBLIC_K = [[[1, 0]], [[0, 1]], [[1, 0]], [[0, 1]], [[1, 1]]]
PUBLIC_V = [[[1, 0]], [[0, 1]], [[2, 0]], [[0, 2]], [[1, 1]]]
PUBLIC_CU_Q = [0, 2, 4]
PUBLIC_CU_K = [0, 2, 5]


def public_pack() -> Pack:
    return Pack(
        np.array(PUBLIC_Q, dtype=float),
        np.array(PUBLIC_K, dtype=float),
        np.array(PUBLIC_V, dtype=float),
        np.array(PUBLIC_CU_Q, dtype=np.int32),
        np.array(PUBLIC_CU_K, dtype=np.int32),
    )


# the bugs that change what an ordinary pack returns
MOST = (
    "no-scaling",
    "double-scaling",
    "scale-after-softmax",
    "softmax-wrong-axis",
    "causal-off-by-one",
    "fill-value-too-weak",
    "rope-pairs-interleaved",
    "rope-frequency-exponent",
    "rope-sign-flipped",
    "rope-on-values",
    "rope-before-head-split",
    "varlen-attends-across-documents",
    "varlen-cu-seqlens-off-by-one",
)
# the bugs a pack with a cached prefix shows
CACHED = (
    "rope-positions-ignored",
    "varlen-positions-not-restarted",
    "causal-alignment-wrong",
    "varlen-keys-by-query-offsets",
)


@check(points=2, public=True, after=("output-shape",), catches=MOST + CACHED)
def public_varlen_example(ctx):
    """The statement's worked example: two documents, the second with one cached key."""
    run(ctx, public_pack(), example="the worked example in the statement")


# --- documents are independent -------------------------------------------------------------------


@check(points=4, after=("output-shape",), concept="masking", catches=MOST + ("kv-head-mapping-modulo",))
def each_document_equals_attention_run_alone(ctx):
    """Every document's rows equal causal RoPE attention over that document alone.

    Four documents of 5, 1, 7 and 3 tokens in one pack (no cache), four query heads over two K/V
    heads, d = 6; the expected rows come from each document computed on its own, positions from 0.
    """
    run(ctx, pack(ctx.rng, [5, 1, 7, 3], H=4, H_kv=2, d=6))


@check(points=3, after=("output-shape",), concept="masking", catches=("varlen-attends-across-documents",))
def editing_one_document_leaves_the_others_bit_identical(ctx):
    """Editing a token of one document leaves every other document's rows bit-identical.

    Four documents (the third with a cache of 2 keys); the query, key and value of one token of
    the second document are replaced. The other documents' rows must be exactly equal, bit for
    bit, to what the first call returned; the edited document's own rows must change.
    """
    p = pack(ctx.rng, [3, 4, 2, 3], cached=[0, 0, 2, 0], H=2, H_kv=1, d=4)
    before = run(ctx, p, "output before the edit")
    edited = Pack(p.q.copy(), p.k.copy(), p.v.copy(), p.cu_q, p.cu_k)
    t = 1  # the second token of document 1, a query and a key
    edited.q[p.rows(1).start + t] += ctx.rng.normal(0, 3, size=p.q.shape[1:]).round(6)
    edited.k[p.keys(1).start + t] += ctx.rng.normal(0, 3, size=p.k.shape[1:]).round(6)
    edited.v[p.keys(1).start + t] += ctx.rng.normal(0, 3, size=p.v.shape[1:]).round(6)
    ctx.describe(edited="token 1 of document 1 (its q, k and v)")
    after = run(ctx, edited, "output after the edit")
    for i in (0, 2, 3):
        rows = p.rows(i)
        if not np.array_equal(before[rows], after[rows]):
            diff = float(np.max(np.abs(before[rows] - after[rows])))
            ctx.fail(
                f"editing token 1 of document 1 changed document {i}'s rows (largest change {diff:.3g}): a document "
                "must see only its own keys, so nothing in another document may move it, not even in the last bit"
            )
    if np.array_equal(before[p.rows(1)], after[p.rows(1)]):
        ctx.fail("editing token 1 of document 1 changed none of its own rows: a query must attend to its document's keys")


@check(points=3, after=("output-shape",), concept="masking", catches=("varlen-attends-across-documents",) + CACHED[:2])
def moving_a_document_changes_nothing(ctx):
    """Moving a document within the pack changes none of its rows.

    Three documents with caches of 3, 0 and 2 keys, packed in the order 0, 1, 2 and then 2, 0, 1:
    each document's rows must be the same in both packs (and equal the naive rows).
    """
    p = pack(ctx.rng, [2, 4, 3], cached=[3, 0, 2], H=2, H_kv=1, d=4)
    first = run(ctx, p, "output, documents in the order 0, 1, 2")
    docs = documents(p)
    order = [2, 0, 1]
    moved = from_documents([docs[i] for i in order], 2, 1, 4, 4)
    second = run(ctx, moved, "output, documents in the order 2, 0, 1", order=order)
    for new, old in enumerate(order):
        a, b = first[p.rows(old)], second[moved.rows(new)]
        if not np.allclose(a, b, rtol=1e-6, atol=1e-9):
            ctx.fail(f"document {old}'s rows changed when it moved to place {new} in the pack (largest change {np.max(np.abs(a - b)):.3g})")


# --- chunked prefill -----------------------------------------------------------------------------


@check(points=4, after=("output-shape",), concept="kv-cache", catches=CACHED)
def chunked_prefill_equals_one_shot(ctx):
    """Prefilling in chunks against a growing cache gives the rows of one-shot prefill.

    Three documents of 7, 5 and 6 tokens, prefilled in three calls of chunks (3, 2, 2), (2, 0, 3)
    and (2, 3, 1): each call sends every document's earlier chunks as its cache (cu_seqlens_k
    counts the cached keys and the chunk's), and its rows must equal the matching rows of one call
    over the whole documents. Bottom-right causal alignment and positions offset by the cached
    length make that true.
    """
    full = pack(ctx.rng, [7, 5, 6], H=4, H_kv=2, d=4)
    whole = full.expected()
    chunks = [(3, 2, 2), (2, 0, 3), (2, 3, 1)]
    done = [0, 0, 0]
    for n, sizes in enumerate(chunks):
        docs = []
        for i, size in enumerate(sizes):
            q, k, v = documents(full)[i]
            docs.append((q[done[i] : done[i] + size], k[: done[i] + size], v[: done[i] + size]))
        part = from_documents(docs, 4, 2, 4, 4)
        expected = np.concatenate([whole[full.rows(i)][done[i] : done[i] + s] for i, s in enumerate(sizes)])
        ctx.describe(**part.facts(), chunk=f"{n + 1} of 3")
        got = ctx.call(FN, *part.args())
        ctx.expect_close(got, expected, f"chunk {n + 1}: output (rows of one-shot prefill)", AXES, DIMS)
        done = [a + b for a, b in zip(done, sizes)]


@check(
    points=3,
    after=("output-shape",),
    concept="kv-cache",
    catches=("causal-alignment-wrong", "varlen-keys-by-query-offsets", "causal-off-by-one"),
)
def uniform_when_queries_are_zero(ctx):
    """With q = 0 every score is 0: query t of a document averages the values of keys 0..n_k - n_q + t.

    Two documents with caches of 4 and 1 keys and chunks of 2 and 3 queries: the first query of a
    chunk averages its whole cache and its own key (bottom-right alignment), not the first key alone.
    """
    p = pack(ctx.rng, [2, 3], cached=[4, 1], H=2, H_kv=1, d=4)
    p.q[:] = 0.0
    run(ctx, p, q="zeros")


# --- edges ---------------------------------------------------------------------------------------


@check(points=3, after=("output-shape",), concept="masking", catches=("varlen-cu-seqlens-off-by-one", "causal-off-by-one"))
def empty_and_length_one_documents(ctx):
    """Empty and length-1 documents, one document alone, and a pack with no query at all.

    A pack of documents with 0, 1, 3, 0 and 1 queries (the fourth has 2 cached keys and no query,
    the fifth 2 cached keys and one query); then a single document of 5 tokens; then a pack whose
    two documents have no query (the output is 0×H×dv). A length-1 document with no cache outputs
    its own value.
    """
    run(ctx, pack(ctx.rng, [0, 1, 3, 0, 1], cached=[0, 0, 0, 2, 2], H=2, H_kv=1, d=4, dv=2), "output, with empty documents")
    run(ctx, pack(ctx.rng, [5], H=2, H_kv=2, d=4), "output, a single document")
    empty = pack(ctx.rng, [0, 0], cached=[0, 3], H=2, H_kv=1, d=4, dv=3)
    ctx.describe(**empty.facts())
    ctx.array(ctx.call(FN, *empty.args()), "output with no query", (0, 2, 3), DIMS)


@check(points=3, after=("output-shape",), concept="causal-mask", catches=("causal-off-by-one", "fill-value-too-weak"))
def causal_future_is_ignored(ctx):
    """Editing token t of a document changes none of its rows before t, and changes row t.

    One pack of three documents of 6 tokens; token 3 of the middle document gets a new query, key
    and value: rows 0..2 of that document must stay exactly as they were.
    """
    p = pack(ctx.rng, [6, 6, 6], H=2, H_kv=1, d=4)
    before = run(ctx, p, "output before the edit")
    edited = Pack(p.q.copy(), p.k.copy(), p.v.copy(), p.cu_q, p.cu_k)
    start, t = p.rows(1).start, 3
    edited.q[start + t] += 2.0
    edited.k[start + t] += ctx.rng.normal(0, 3, size=p.k.shape[1:]).round(6)
    edited.v[start + t] += 5.0
    ctx.describe(edited="token 3 of document 1")
    after = run(ctx, edited, "output after the edit")
    changed = [i for i in range(t) if not np.array_equal(before[start + i], after[start + i])]
    if changed:
        ctx.fail(
            f"editing token {t} of document 1 changed its earlier rows {changed}: a query may only see keys at or before its own position"
        )
    if np.array_equal(before[start + t], after[start + t]):
        ctx.fail(f"editing token {t} of document 1 did not change its own row: a token must attend to itself")


# --- heads, scale, positions, stability ----------------------------------------------------------


@check(points=3, after=("output-shape",), concept="grouped-query", catches=("kv-head-mapping-modulo",))
def query_heads_share_kv_heads_in_groups(ctx):
    """Query head h reads K/V head h // (H // H_kv): neighbouring query heads share.

    Six query heads over two and over three K/V heads, then over one (multi-query) and six (plain
    multi-head), two documents each.
    """
    for H_kv in (2, 3, 1, 6):
        run(ctx, pack(ctx.rng, [3, 4], cached=[1, 0], H=6, H_kv=H_kv, d=4), f"output, 6 query heads over {H_kv} K/V heads")


@check(
    points=2,
    after=("output-shape",),
    concept="scaling",
    catches=("no-scaling", "double-scaling", "scale-after-softmax", "softmax-wrong-axis"),
)
def scores_scaled_by_sqrt_d(ctx):
    """Scores are divided by sqrt(d), the head width (d = 8 here, inputs twice as large)."""
    run(ctx, pack(ctx.rng, [4, 3], H=2, H_kv=1, d=8, scale=2.0))


@check(
    points=3,
    after=("output-shape",),
    concept="positions",
    catches=("rope-pairs-interleaved", "rope-frequency-exponent", "rope-sign-flipped", "rope-on-values", "rope-before-head-split"),
)
def rope_rotates_query_and_key_pairs(ctx):
    """RoPE turns column i with column i + d/2 by p·10000^(-2i/d), queries and keys only.

    One document of 40 tokens with d = 8 (four frequencies, the slowest turning by 40·10^-3 in all),
    two query heads over two K/V heads.
    """
    run(ctx, pack(ctx.rng, [40], H=2, H_kv=2, d=8, scale=1.5))


@check(points=2, after=("output-shape",), concept="numerical-stability", catches=("softmax-overflow", "max-over-blocked"))
def stable_with_a_blocked_score_far_above(ctx):
    """Finite and right when scores reach the thousands, and when a future key scores far above the allowed ones.

    First q and k 30 times larger (scores in the thousands); then a pack whose queries all point
    at the last key of their document, which only the last query may see (score about +900 for
    the others, blocked).
    """
    run(ctx, pack(ctx.rng, [4, 3], H=2, H_kv=1, d=4, scale=30.0), "output at large scores")
    p = pack(ctx.rng, [4, 3], H=2, H_kv=1, d=2, scale=0.1)
    for i in range(p.docs):
        rows, keys = p.rows(i), p.keys(i)
        p.k[keys.stop - 1] = 30.0  # rotated by its position, the last key stays 30·sqrt(2) long
        n = rows.stop - rows.start
        for t in range(n):  # each query points at the last key's rotated direction, seen from its own position
            a = (n - 1) - t
            c, s = np.cos(a), np.sin(a)
            p.q[rows.start + t] = 30.0 * np.array([c - s, s + c])
    run(ctx, p, "output with a blocked key far above", blocked="the last key of each document scores about +900 for the earlier queries")


@check(points=2, catches=("mutates-input",))
def inputs_left_unmodified(ctx):
    """varlen_prefill writes into none of q, k, v, cu_seqlens_q and cu_seqlens_k."""
    p = pack(ctx.rng, [3, 2], cached=[1, 0], H=2, H_kv=1, d=4)
    ctx.describe(**p.facts())
    ctx.call(FN, *p.args())
    outcome = ctx.last_call.outcome
    if outcome.mutated:
        ctx.fail(f"`{FN}` changed its argument(s) {', '.join(outcome.mutated)}; work on copies or new arrays")


# --- memory --------------------------------------------------------------------------------------


def memory_bound(total_q: int, H: int, max_k: int, dv: int) -> int:
    """The statement's bound: 64·total_q·H·(max_k + dv) bytes."""
    return 64 * total_q * H * (max_k + dv)


def replay_peak_over_bound(module, q, k, v, cu_q, cu_k) -> list[float]:
    """[1.0] when `module`'s varlen_prefill, measured by the kit's harness, peaks above the bound."""
    max_k = int(np.max(np.diff(np.asarray(cu_k))))
    return peak_over(memory_bound(len(q), np.shape(q)[1], max_k, np.shape(v)[2]), module.varlen_prefill, q, k, v, cu_q, cu_k)


@check(points=4, after=("output-shape",), concept="memory", catches=("materialises-scores",))
def memory_stays_within_bound(ctx):
    """With 512 documents of 16 tokens the peak memory stays within 64·total_q·H·(max_k + dv) bytes.

    total_q = total_k = 8,192, H = 2, H_kv = 1, d = dv = 4, max_k = 16: the bound is 20 MiB, while
    the total × total block-diagonal mask of the pack is 64 MiB as bools (512 MiB as float64
    scores). Measured in your process with tracemalloc from the start of the call (inputs do not
    count; your output does), and on Linux also by the kernel. Attend one document (or one padded
    batch of documents) at a time.
    """
    m = MEMORY
    lengths = [m["length"]] * m["docs"]
    p = pack(ctx.rng, lengths, H=m["H"], H_kv=m["H_kv"], d=m["d"], dv=m["dv"])
    total = len(p.q)
    bound, naive = memory_bound(total, m["H"], m["length"], m["dv"]), total * total
    ctx.describe(documents=m["docs"], length=m["length"], total_q=total, H=m["H"], H_kv=m["H_kv"], d=m["d"], dv=m["dv"])
    # the kernel's limit sits between the bound and the float64 scores of the pack (271 MiB): it also
    # counts tracemalloc's own bookkeeping, which a correct solution on Python lists makes large
    # (about 100 MiB at 17 MiB traced, measured at 256 documents of 32 tokens); the bool mask is left to tracemalloc's reading
    limit = kernel_limit(bound, 8 * naive)
    outcome = ctx.outcome(
        FN, *p.args(), harness="attn_kit.base.harness:measure_quiet", memory_limit=limit, time_limit=measured_time_limit(ctx)
    )
    naive_text = (
        f"bound 64·total_q·H·(max_k + dv) = {bound / 2**20:.0f} MiB; the total × total mask of the pack is "
        f"{naive / 2**20:.0f} MiB as bools and {8 * naive / 2**20:.0f} MiB as float64 scores"
    )
    advice = "Attend one document (or a padded batch of documents) at a time: never index the pack with a total × total mask"
    where = f"with {m['docs']} documents of {m['length']} tokens"
    built = f"Something of total × total size is built. {advice}"
    memory_verdict(ctx, outcome, p.args(), replay_peak_over_bound, limit, bound, 8 * naive, where, naive_text, advice, built)


# --- hidden cases --------------------------------------------------------------------------------


@check(
    points=4,
    after=("output-shape",),
    catches=MOST + CACHED + ("softmax-overflow", "kv-head-mapping-modulo"),
)
def randomised_agreement(ctx):
    """Agrees with the naive rows on randomised hidden packs: lengths, caches, heads, widths, large scores.

    Five packs of up to 6 documents (some empty, some with caches), up to 4 K/V heads and groups of
    up to 3, d up to 8 and dv up to 5, one with scores in the thousands. Rerun with the same --seed
    to get the same cases.
    """
    for n, big in enumerate((False, False, False, False, True)):
        docs = int(ctx.rng.integers(1, 7))
        n_q = ctx.rng.integers(0, 6, size=docs)
        cached = ctx.rng.integers(0, 5, size=docs) * (ctx.rng.random(docs) < 0.6)
        H_kv = int(ctx.rng.integers(1, 5))
        H = H_kv * int(ctx.rng.integers(1, 4))
        d, dv = 2 * int(ctx.rng.integers(1, 5)), int(ctx.rng.integers(1, 6))
        p = pack(ctx.rng, n_q, cached, H=H, H_kv=H_kv, d=d, dv=dv, scale=30.0 if big else 1.0)
        run(ctx, p, f"case {n + 1}: output", case=n + 1, large_scores=big)


# --- `attn-kit bench` ----------------------------------------------------------------------------


@SUITE.for_bench
def bench_inputs(rng, T, docs, H, H_kv, d):
    """A pack of `docs` one-shot documents of T tokens each."""
    p = pack(rng, [T] * docs, H=H, H_kv=H_kv, d=d)
    return p.args(), {}
