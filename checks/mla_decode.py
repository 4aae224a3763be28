"""The graded suite for mla-decode: one decoding step of multi-head latent attention over a
compressed cache (the latent c and the shared rotary key k_R per token), with decoupled RoPE.

Expected values come from `naive_mla`, written here in the kit's process: the plain,
obviously-correct form that up-projects every cached latent into per-head keys and values and
runs causal multi-head attention over the whole sequence (sharing no code with the absorbed
reference in solutions/mla-decode/). A check decodes a sequence the way a generation loop does:
it calls `mla_decode_step` for t = 0..T-1 at the given positions, sends each returned cache back,
reads the cache after every step (here, in the kit's process) and compares step t's output with
row t of the naive layer.

The step calls of one loop are recorded for the diagnosis as ONE call that sums them up,
(outputs B×T×D, numbers the cache holds after each step), replayed on the kit's bug
implementations by `replay_decoding`, as kv-cache does. The memory check builds a cache of 2,048
tokens itself and measures one step under tracemalloc, as sliding-window's does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attn_kit.base.records import TensorValue
from attn_kit.compare.arrays import ValueProblem, check_shape, compare, float32_like, to_array, within_float32
from attn_kit.compare.registry import CallFailed, Suite
from attn_kit.report.results import Call

from .cases import lists
from .verdicts import kernel_limit, measured_time_limit, memory_verdict, peak_over, record_decoding

SUITE = Suite("mla-decode")
check = SUITE.check

FN = "mla_decode_step"
STEP_AXES = ("batch", "step", "feature")
CACHE_KEYS = ("c_kv", "k_rope")
# the memory check's case: wide heads, so that even ONE head's keys over the 2,048 cached tokens
# (8 MiB) exceed the bound (3.5 MiB): a loop that up-projects head by head fails as well
MEMORY = {"B": 1, "D": 32, "H": 4, "d_c": 16, "d_R": 8, "d_nope": 512, "d_v": 512, "t": 2048}


@dataclass(frozen=True)
class Dims:
    B: int
    D: int
    H: int
    d_c: int
    d_R: int
    d_nope: int
    d_v: int


SMALL = Dims(B=2, D=8, H=2, d_c=4, d_R=4, d_nope=4, d_v=3)


# --- inputs and the plain, obviously-correct layer -------------------------------------------------


def mla_params(rng, d: Dims, scale: float = 1.0) -> dict:
    """W_dkv D×d_c, W_uk d_c×H·d_nope, W_uv d_c×H·d_v, W_q D×H·(d_nope+d_R), W_kr D×d_R, W_o H·d_v×D."""
    shapes = {
        "W_dkv": (d.D, d.d_c),
        "W_uk": (d.d_c, d.H * d.d_nope),
        "W_uv": (d.d_c, d.H * d.d_v),
        "W_q": (d.D, d.H * (d.d_nope + d.d_R)),
        "W_kr": (d.D, d.d_R),
        "W_o": (d.H * d.d_v, d.D),
    }
    return {name: rng.normal(0.0, scale / np.sqrt(rows), size=(rows, cols)).round(6) for name, (rows, cols) in shapes.items()}


def tokens(rng, B: int, T: int, D: int, scale: float = 1.0) -> np.ndarray:
    return (rng.normal(0.0, 1.0, size=(B, T, D)) * scale).round(6)


def rotate(x, positions, base: float = 10000.0, dtype=np.float64) -> np.ndarray:
    """RoPE, rope's "rotate half" convention, on the last axis of x (…×T×n) at one position per
    token: pair (i, i + n/2) turns by positions[t]·base^(-2i/n), written as a 2×2 rotation per pair
    (in `dtype`: float32 gives the rounding a float32 solution makes)."""
    x = np.array(x, dtype=dtype)
    n = x.shape[-1]
    out = x.copy()
    for t, p in enumerate(positions):
        for i in range(n // 2):
            a = dtype(p) * dtype(base ** (-2.0 * i / n))
            u, w = x[..., t, i], x[..., t, i + n // 2]
            out[..., t, i] = np.cos(a) * u - np.sin(a) * w
            out[..., t, i + n // 2] = np.sin(a) * u + np.cos(a) * w
    return out


def latent_cache(x, p, positions, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """What the cache must hold after the tokens of x: the latents x·W_dkv (never rotated) and the
    shared rotary keys rope(x·W_kr) at each token's position."""
    x = np.asarray(x, dtype=dtype)
    W = {k: np.asarray(p[k], dtype=dtype) for k in ("W_dkv", "W_kr")}
    return x @ W["W_dkv"], rotate(x @ W["W_kr"], positions, dtype=dtype)


def naive_mla(x, p, H: int, positions, dtype=np.float64) -> np.ndarray:
    """Causal multi-head attention with every head's keys and values up-projected from the latents:
    k_h = [c·W_uk_h, k_R] (k_R shared by the heads), q_h = [q_nope_h, rope(q_R_h)], v_h = c·W_uv_h,
    scores / sqrt(d_nope + d_R). Row t is what decode step t must return. `dtype` float32 gives the
    float32 twin: the rounding a float32 solution makes."""
    x = np.asarray(x, dtype=dtype)
    B, T, _ = x.shape
    W = {k: np.asarray(v, dtype=dtype) for k, v in p.items()}
    d_R = W["W_kr"].shape[1]
    d_nope, d_v = W["W_uk"].shape[1] // H, W["W_uv"].shape[1] // H
    c, k_rope = latent_cache(x, p, positions, dtype)
    q = x @ W["W_q"]
    heads = []
    for h in range(H):
        q_h = q[..., h * (d_nope + d_R) : (h + 1) * (d_nope + d_R)]
        q_full = np.concatenate([q_h[..., :d_nope], rotate(q_h[..., d_nope:], positions, dtype=dtype)], axis=-1)
        k_full = np.concatenate([c @ W["W_uk"][:, h * d_nope : (h + 1) * d_nope], k_rope], axis=-1)
        v_h = c @ W["W_uv"][:, h * d_v : (h + 1) * d_v]
        scores = q_full @ k_full.transpose(0, 2, 1) / dtype(np.sqrt(d_nope + d_R))
        scores = np.where(np.tril(np.ones((T, T), dtype=bool)), scores, -np.inf)
        w = np.exp(scores - scores.max(axis=-1, keepdims=True))
        heads.append(w / w.sum(axis=-1, keepdims=True) @ v_h)
    return np.concatenate(heads, axis=-1) @ W["W_o"]


# --- reading a returned cache ----------------------------------------------------------------------


def _floats(value) -> int:
    """Numbers a cache part holds: every element of a float array, every Python float, through lists,
    tuples and dict values (ints, bools, strings and None do not count)."""
    if isinstance(value, TensorValue):
        value = value.array
    if isinstance(value, np.ndarray):
        return sum(_floats(v) for v in value.ravel().tolist()) if value.dtype == object else (value.size if value.dtype.kind == "f" else 0)
    if isinstance(value, float):
        return 1
    if isinstance(value, dict):
        return sum(_floats(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_floats(v) for v in value)
    return 0


def cache_parts(cache, B: int, t: int, d_c: int, d_R: int) -> tuple[np.ndarray, np.ndarray]:
    """(c_kv B×t×d_c, k_rope B×t×d_R) from a returned cache; ValueProblem when it is not the
    statement's dict of exactly those two entries."""
    if not isinstance(cache, dict) or set(cache) != set(CACHE_KEYS):
        got = sorted(map(str, cache)) if isinstance(cache, dict) else type(cache).__name__
        raise ValueProblem(f"the cache must be a dict with exactly the entries 'c_kv' and 'k_rope'; got {got}")
    c = to_array(cache["c_kv"], "cache['c_kv']")
    check_shape(c, (B, t, d_c), "cache['c_kv']", "B×t×d_c")
    k = to_array(cache["k_rope"], "cache['k_rope']")
    check_shape(k, (B, t, d_R), "cache['k_rope']", "B×t×d_R")
    return c, k


# --- running a decoding loop -----------------------------------------------------------------------


@dataclass
class Decoding:
    outputs: np.ndarray  # B×T×D, step t's output in [:, t]
    sizes: list[int]  # numbers in the returned cache after each step
    caches: list  # the returned caches
    steps: list[Call]  # the step calls, for failure evidence and --repro
    loop: Call  # the one call recorded for the diagnosis in their place
    expected_sizes: list[float]  # B·t·(d_c + d_R) after each step
    inputs: tuple  # (x, params, H, positions) as decoded, for the float32 twin


def decode(ctx, x, p, H: int, positions=None, arrays: bool = False) -> Decoding:
    """Decode x (B×T×D) with the candidate's mla_decode_step, one token per call at positions[t],
    the cache sent back. Fails the check (naming the step) when a step raises, returns something
    other than a pair, or returns an output that is not B×D."""
    B, T, D = np.shape(x)
    positions = list(range(T)) if positions is None else [int(v) for v in positions]
    sent_p = {k: np.array(v) for k, v in p.items()} if arrays else lists(p)
    cache, outs, sizes, caches, steps = None, [], [], [], []
    failure = ""
    for t in range(T):
        x_t = np.array(x[:, t]) if arrays else lists(x[:, t])
        outcome = ctx.outcome(FN, x_t, sent_p, H, positions[t], cache=cache)
        steps.append(ctx.calls[-1])
        if not outcome.ok:
            failure = "raised"
            break
        value = outcome.value
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            failure = f"step {t}: {FN} must return a pair (out_t, cache); it returned {type(value).__name__}"
            break
        out_t, cache = value
        try:
            arr = to_array(out_t, f"step {t}'s output")
            check_shape(arr, (B, D), f"step {t}'s output", "B×D")
        except ValueProblem as exc:
            failure = str(exc)
            break
        outs.append(arr)
        sizes.append(_floats(cache))
        caches.append(cache)
    loop = record_decoding(
        ctx,
        FN,
        (x if arrays else lists(x), sent_p, H, positions),
        steps,
        len(outs) == T,
        lambda: (np.stack(outs, axis=1), [float(n) for n in sizes], *final_entries(cache)),
        replay_decoding,
    )
    ctx.describe(B=B, T=T, D=D, H=H, positions=positions, input="NumPy arrays" if arrays else "lists")
    if failure:
        ctx.failing_call = steps[-1]
        if failure == "raised":
            error = CallFailed(steps[-1])
            when = "the first call, cache=None" if len(steps) == 1 else "with the cache your previous step returned"
            error.args = (f"{error} (at step {len(steps) - 1}, {when})",)
            raise error
        ctx.fail(failure)
    per_token = B * (np.shape(p["W_dkv"])[1] + np.shape(p["W_kr"])[1])
    sizes_due = [float(per_token * t) for t in range(1, T + 1)]
    return Decoding(np.stack(outs, axis=1), sizes, caches, steps, loop, sizes_due, (np.asarray(x), p, H, positions))


def final_entries(cache) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(c_kv, k_rope) of the last returned cache as float arrays, each None where it cannot be read."""
    if not isinstance(cache, dict):
        return None, None
    found: list[np.ndarray | None] = []
    for key in CACHE_KEYS:
        try:
            found.append(to_array(cache.get(key), f"cache[{key!r}]"))
        except ValueProblem:
            found.append(None)
    return found[0], found[1]


def replay_decoding(module, x, params, H, positions):
    """Feed x (B×T×D) to `module`'s mla_decode_step one token at a time: (outputs B×T×D, numbers
    the cache holds after each step, the last cache's c_kv and k_rope), the value `record_decoding`
    records. The cache's entries are evidence too: a step that rotates by the cache length instead
    of the position given gives the right outputs and the wrong rotated keys."""
    cache, outs, sizes = None, [], []
    for t in range(len(x[0])):
        out_t, cache = module.mla_decode_step([seq[t] for seq in x], params, H, positions[t], cache)
        outs.append(np.asarray(out_t, dtype=np.float64))
        sizes.append(float(_floats(cache)))
    return (np.stack(outs, axis=1), sizes, *final_entries(cache))


def expect_loop(dec: Decoding, expected: np.ndarray) -> None:
    """Give the loop's recorded call its expected value (as replay_decoding returns it): a passing
    check's loop is evidence too, where a bug model would change what the candidate gets right."""
    x, p, _, positions = dec.inputs
    c, k = latent_cache(x, p, positions)
    dec.loop.expected = (expected, dec.expected_sizes, c, k)


def expect_rows(ctx, dec: Decoding, expected: np.ndarray, what: str = "decoded outputs"):
    """Step t's output must equal row t of the naive layer; on failure show the first wrong step.

    The loop's recorded call gets its expected value either way: a passing check's loop is evidence
    too, where a bug model would change outputs or cache sizes the candidate gets right."""
    expect_loop(dec, expected)
    mismatch = compare(dec.outputs, expected, what, STEP_AXES)
    if mismatch is None:
        return
    if float32_like(dec.outputs, expected):
        x, p, H, positions = dec.inputs
        twin = naive_mla(x, p, H, positions, dtype=np.float32)
        ok, worst = within_float32(dec.outputs, expected, twin)
        if ok:
            ctx.note(f"{what}: computed in float32, within float32 rounding of the float64 layer (largest difference {worst:.1e})")
            return
    t = mismatch.index[1]
    step = dec.steps[t]
    step.expected = expected[:, t]
    ctx.failing_call = step
    ctx.fail(f"{mismatch.summary()} (step t's output must equal row t of the up-projected multi-head attention over tokens 0..t)", mismatch)


def case(ctx, d: Dims, T: int, scale: float = 1.0, x_scale: float = 1.0):
    return tokens(ctx.rng, d.B, T, d.D, x_scale), mla_params(ctx.rng, d, scale)


# --- public checks ---------------------------------------------------------------------------------

WORKED = Dims(B=1, D=4, H=2, d_c=2, d_R=2, d_nope=1, d_v=1)
WORKED_X = [[[1, 0, 1, 0], [0, 2, 0, 1], [1, 1, 1, 0]]]
WORKED_PARAMS = {
    "W_dkv": [[1, 0], [0, 1], [0, 0], [0, 0]],
    "W_uk": [[1, 0], [0, 1]],
    "W_uv": [[1, 0], [0, 2]],
    "W_q": [[1, 0, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0], [0, 1, 0, 0, 1, 0], [0, 0, 1, 0, 0, 1]],
    "W_kr": [[0, 0], [0, 0], [1, 0], [0, 1]],
    "W_o": [[1, 0, 0, 0], [0, 1, 0, 0]],
}


@check(points=2, public=True, catches=("cache-stores-up-projected",))
def step_returns_output_and_cache(ctx):
    """mla_decode_step returns (out_t, cache): out_t B×D, the cache a dict of c_kv B×t×d_c and k_rope B×t×d_R.

    Two steps with B=2, D=8, two heads, d_c=4, d_R=4: cache=None first, then whatever the first
    step returned. The cache must hold exactly the entries 'c_kv' and 'k_rope' (arrays or lists).
    """
    d = SMALL
    x, p = case(ctx, d, 2)
    dec = decode(ctx, x, p, d.H)
    for t, (cache, step) in enumerate(zip(dec.caches, dec.steps)):
        try:
            cache_parts(cache, d.B, t + 1, d.d_c, d.d_R)
        except ValueProblem as exc:
            ctx.failing_call = step
            ctx.fail(f"after step {t}: {exc}")


# the bugs that change what an ordinary step returns
MOST = (
    "rope-on-latent",
    "mla-positions-ignored",
    "mla-scale-wrong-width",
    "no-scaling",
    "double-scaling",
    "scale-after-softmax",
    "absorbed-heads-misreshaped",
)


@check(
    points=2,
    public=True,
    after=("step-returns-output-and-cache",),
    catches=MOST,
)
def public_decode_example(ctx):
    """The statement's worked example: three steps at positions 0, 1, 2."""
    ctx.describe(example="the worked example in the statement")
    x = np.array(WORKED_X, dtype=float)
    p = {k: np.array(v, dtype=float) for k, v in WORKED_PARAMS.items()}
    expect_rows(ctx, decode(ctx, x, p, WORKED.H), naive_mla(x, p, WORKED.H, range(3)))


# --- agreement with the naive layer ---------------------------------------------------------------


@check(points=4, after=("step-returns-output-and-cache",), concept="positions", catches=MOST)
def decoding_matches_naive_mla(ctx):
    """Decoding t = 0..T-1 reproduces up-projected causal multi-head attention row by row.

    B=2, T=6, two heads, d_c=4, d_R=4, d_nope=4, d_v=3, positions 0..5, inputs as lists and then
    as NumPy arrays; the expected rows come from per-head keys [c·W_uk_h, k_R] and values c·W_uv_h
    built for the whole sequence.
    """
    d = SMALL
    x, p = case(ctx, d, 6)
    expected = naive_mla(x, p, d.H, range(6))
    expect_rows(ctx, decode(ctx, x, p, d.H), expected)
    expect_rows(ctx, decode(ctx, x, p, d.H, arrays=True), expected, "decoded outputs (NumPy inputs)")


@check(points=3, concept="kv-cache", catches=("cache-stores-up-projected",))
def cache_holds_dc_plus_dr_numbers_per_token(ctx):
    """After t steps the cache holds exactly B·t·(d_c + d_R) numbers: a latent and a rotary key per token.

    Counted in the kit on the returned cache: every element of a float array and every Python
    float, through lists, tuples and dict values (ints, bools, strings and None do not count).
    Catches cache-stores-up-projected: per-head keys or values kept beside (or instead of) the
    latent make the cache H·(d_nope + d_v) numbers per token larger.
    """
    d, T = SMALL, 5
    x, p = case(ctx, d, T)
    dec = decode(ctx, x, p, d.H)
    expect_loop(dec, naive_mla(x, p, d.H, range(T)))
    per_token = d.B * (d.d_c + d.d_R)
    expected = [per_token * t for t in range(1, T + 1)]
    ctx.describe(cache_sizes=dec.sizes, expected_sizes=expected)
    for t, (n, want) in enumerate(zip(dec.sizes, expected), start=1):
        if n != want:
            ctx.failing_call = dec.steps[t - 1]
            ctx.fail(
                f"after {t} step(s) the cache holds {n} numbers; B·t·(d_c + d_R) = {d.B}·{t}·({d.d_c} + {d.d_R}) = {want} "
                f"expected (sizes after each step: {dec.sizes[:t]}, expected {expected[:t]}). "
                "Keep only the latent and the shared rotary key of each token: per-head keys and values are rebuilt from them"
            )
    ctx.note(f"cache after {T} steps: {dec.sizes[-1]} numbers = B·T·(d_c + d_R) with B={d.B}, T={T}, d_c={d.d_c}, d_R={d.d_R}")


@check(
    points=3,
    after=("step-returns-output-and-cache",),
    concept="positions",
    catches=("rope-on-latent", "rope-key-by-cache-index", "mla-position-from-cache-length", "cache-stores-up-projected"),
)
def only_the_rope_part_is_rotated(ctx):
    """The cache holds the latents unrotated and ONE rotated key of width d_R per token, shared by every head.

    After each step, cache['c_kv'][:, j] must equal x_j·W_dkv exactly as projected, and
    cache['k_rope'][:, j] must equal rope(x_j·W_kr) at token j's position (positions 3..7 here):
    rotating the latent, caching k_R unrotated and turning it later by its index in the cache, or
    taking the position from the cache's length instead of the argument, fails.
    """
    d, T = SMALL, 5
    positions = list(range(3, 3 + T))
    x, p = case(ctx, d, T)
    dec = decode(ctx, x, p, d.H, positions)
    expect_loop(dec, naive_mla(x, p, d.H, positions))
    want_c, want_k = latent_cache(x, p, positions)
    for t, (cache, step) in enumerate(zip(dec.caches, dec.steps)):
        ctx.failing_call = step
        try:
            c, k = cache_parts(cache, d.B, t + 1, d.d_c, d.d_R)
        except ValueProblem as exc:
            ctx.fail(f"after step {t}: {exc}")
        for got, want, what in ((c, want_c, "cache['c_kv'], the latents x·W_dkv"), (k, want_k, "cache['k_rope'], rope(x·W_kr)")):
            mismatch = compare(got, want[:, : t + 1], f"after step {t}: {what}", ("batch", "token", "feature"))
            if mismatch is not None and float32_like(got, want[:, : t + 1]):
                mismatch = None if within_float32(got, want[:, : t + 1], None)[0] else mismatch
            if mismatch is not None:
                ctx.fail(
                    f"{mismatch.summary()} (the latent is never rotated; the rotary key is rotated once, at its own token's position)",
                    mismatch,
                )


@check(points=3, after=("step-returns-output-and-cache",), concept="positions", catches=("rope-on-latent", "rope-key-by-cache-index"))
def shifted_positions_change_nothing(ctx):
    """Decoding at positions 1000..1005 gives exactly what positions 0..5 give: only relative positions matter.

    The expected rows are the naive layer's at positions 0..5. A rotation that reaches the latent
    (whose scores are not rotated on the query side), or keys rotated by their index in the cache
    while the query turns by its position, makes the output depend on where the sequence starts.
    """
    d, T = SMALL, 6
    x, p = case(ctx, d, T)
    ctx.describe(first_position=1000)
    expect_rows(ctx, decode(ctx, x, p, d.H, range(1000, 1000 + T)), naive_mla(x, p, d.H, range(T)), "outputs at positions 1000..1005")


@check(points=3, after=("step-returns-output-and-cache",), concept="positions", catches=("mla-positions-ignored",))
def positions_move_the_scores(ctx):
    """Positions 0, 1, …, T-1 are used: rotating every step at position 0 fails.

    W_kr and the rotary columns of W_q are large, so the scores are mostly the rotary part, and
    the positions set the weights. A step that ignores `position` (no rotation at all) gives other
    weights.
    """
    d, T = SMALL, 6
    x, p = case(ctx, d, T)
    p["W_kr"] = (p["W_kr"] * 4).round(6)
    ctx.describe(W_kr="4× larger")
    expect_rows(ctx, decode(ctx, x, p, d.H), naive_mla(x, p, d.H, range(T)))


@check(
    points=2,
    after=("step-returns-output-and-cache",),
    concept="scaling",
    catches=("mla-scale-wrong-width", "no-scaling", "double-scaling", "scale-after-softmax"),
)
def scores_scaled_by_sqrt_of_nope_plus_rope_width(ctx):
    """Scores are divided by sqrt(d_nope + d_R), the width of the query and key a head compares.

    d_nope = 4 and d_R = 4 here, so the scale is 1/sqrt(8): 1/sqrt(d_nope) = 1/2, or no scale,
    gives other weights.
    """
    d, T = Dims(B=1, D=8, H=2, d_c=4, d_R=4, d_nope=4, d_v=2), 4
    x, p = case(ctx, d, T, x_scale=2.0)
    expect_rows(ctx, decode(ctx, x, p, d.H), naive_mla(x, p, d.H, range(T)))


@check(points=3, after=("step-returns-output-and-cache",), concept="head-split", catches=("absorbed-heads-misreshaped",))
def heads_read_their_own_columns(ctx):
    """Head h uses columns h·d_nope:(h+1)·d_nope of W_uk and h·d_v:(h+1)·d_v of W_uv, also when absorbed.

    Four heads, d_c = 4, d_nope = 2, d_v = 2: reshaping W_uk straight to H×d_c×d_nope mixes the
    heads' columns.
    """
    d, T = Dims(B=2, D=8, H=4, d_c=4, d_R=2, d_nope=2, d_v=2), 4
    x, p = case(ctx, d, T)
    expect_rows(ctx, decode(ctx, x, p, d.H), naive_mla(x, p, d.H, range(T)))


@check(points=2, after=("step-returns-output-and-cache",), concept="head-split", catches=("absorbed-heads-misreshaped",))
def uniform_when_the_query_is_zero(ctx):
    """With W_q = 0 every score is 0: step t outputs the mean of the values of tokens 0..t, then W_o.

    Each head's value of token j is c_j·W_uv[:, h·d_v:(h+1)·d_v]; three heads, so a W_uv split into
    heads by a bare reshape gives other means.
    """
    d, T = Dims(B=2, D=6, H=3, d_c=4, d_R=2, d_nope=2, d_v=2), 4
    x, p = case(ctx, d, T)
    p["W_q"] = np.zeros_like(p["W_q"])
    ctx.describe(W_q="zeros")
    expect_rows(ctx, decode(ctx, x, p, d.H), naive_mla(x, p, d.H, range(T)))


@check(points=2, after=("step-returns-output-and-cache",), concept="numerical-stability", catches=("softmax-overflow",))
def no_overflow_at_large_scores(ctx):
    """Steps stay finite and correct when scores reach the thousands (subtract the max)."""
    d, T = SMALL, 4
    x, p = case(ctx, d, T, scale=4.0, x_scale=30.0)
    ctx.describe(x_scale=30, weight_scale=4)
    expect_rows(ctx, decode(ctx, x, p, d.H), naive_mla(x, p, d.H, range(T)))


# --- memory -----------------------------------------------------------------------------------------


def memory_bound(B: int, t: int, d_c: int, d_R: int, H: int) -> int:
    """The statement's bound: 64·B·t·(d_c + d_R + H) bytes."""
    return 64 * B * t * (d_c + d_R + H)


def replay_peak_over_bound(module, x_t, params, H, position, cache) -> list[float]:
    """[1.0] when `module`'s step, measured by the kit's harness (tracemalloc), peaks above
    memory_bound on these inputs, else [0.0]: the memory check's verdict for the diagnosis."""
    B, t, d_c = np.shape(cache["c_kv"])
    d_R = np.shape(cache["k_rope"])[2]
    return peak_over(memory_bound(B, t, d_c, d_R, H), module.mla_decode_step, x_t, params, H, position, cache)


@check(
    points=4,
    after=("step-returns-output-and-cache",),
    concept="memory",
    catches=("keys-up-projected-per-step", "cache-stores-up-projected"),
)
def memory_stays_within_bound(ctx):
    """With 2,048 cached tokens one step allocates at most 64·B·t·(d_c + d_R + H) bytes: no per-head keys or values.

    B=1, D=32, H=4, d_c=16, d_R=8, d_nope=d_v=512: the bound is 3.5 MiB, while the keys of a single
    head (B·t·d_nope float64) are 8 MiB, so up-projecting head by head fails too. Measured in your
    process with tracemalloc from the
    start of the call (the cache passed in does not count; the one you return does), and on Linux
    also by the kernel. Absorb W_uk into the query and apply W_uv after the weighted sum of latents.
    """
    m = MEMORY
    d = Dims(B=m["B"], D=m["D"], H=m["H"], d_c=m["d_c"], d_R=m["d_R"], d_nope=m["d_nope"], d_v=m["d_v"])
    t = m["t"]
    x, p = case(ctx, d, t + 1)
    c, k = latent_cache(x[:, :t], p, range(t))
    args = (x[:, t], p, d.H, t, {"c_kv": c, "k_rope": k})
    bound, naive = memory_bound(d.B, t, d.d_c, d.d_R, d.H), 8 * d.B * t * d.H * (d.d_nope + d.d_v)
    ctx.describe(B=d.B, t=t, H=d.H, d_c=d.d_c, d_R=d.d_R, d_nope=d.d_nope, d_v=d.d_v)
    limit = kernel_limit(bound, naive)
    outcome = ctx.outcome(FN, *args, harness="attn_kit.base.harness:measure_quiet", memory_limit=limit, time_limit=measured_time_limit(ctx))
    one_head = 8 * d.B * t * d.d_nope
    naive_text = (
        f"bound 64·B·t·(d_c + d_R + H) = {bound / 2**20:.2f} MiB; one head's keys over the cache are "
        f"{one_head / 2**20:.0f} MiB, every head's keys and values {naive / 2**20:.0f} MiB"
    )
    advice = "Absorb W_uk into the query and apply W_uv to the weighted sum of latents"
    built = f"Something of size t×H×(head width) is built. {advice}"
    where = f"with t={t} cached tokens"
    memory_verdict(ctx, outcome, args, replay_peak_over_bound, limit, bound, naive, where, naive_text, advice, built, during="step")


# --- rules --------------------------------------------------------------------------------------------


@check(points=2, catches=("mutates-input",))
def inputs_left_unmodified(ctx):
    """mla_decode_step writes into neither x_t nor params (lists and arrays); the cache is yours to update."""
    d, T = SMALL, 3
    x, p = case(ctx, d, T)
    for arrays in (False, True):
        kind = "NumPy arrays" if arrays else "lists"
        dec = decode(ctx, x, p, d.H, arrays=arrays)
        for t, step in enumerate(dec.steps):
            changed = [m for m in step.outcome.mutated if m.split("[")[0].split(" ")[0] != "cache"]
            if changed:
                ctx.failing_call = step
                ctx.fail(f"step {t} changed its argument(s) {', '.join(changed)} (given {kind}); copy before writing, or build new values")


@check(points=4, after=("step-returns-output-and-cache",), catches=MOST + ("softmax-overflow", "rope-key-by-cache-index"))
def randomised_agreement(ctx):
    """Agrees with the naive layer on randomised hidden cases: widths, heads, positions, large scores.

    Four decoding runs with B up to 3, T up to 7, up to 4 heads, random widths and a random first
    position, one with scores in the thousands. Rerun with the same --seed to get the same cases.
    """
    for n, big in enumerate((False, False, False, True)):
        H = int(ctx.rng.integers(1, 5))
        d = Dims(
            B=int(ctx.rng.integers(1, 4)),
            D=int(ctx.rng.integers(2, 9)),
            H=H,
            d_c=int(ctx.rng.integers(1, 7)),
            d_R=2 * int(ctx.rng.integers(1, 4)),
            d_nope=int(ctx.rng.integers(1, 5)),
            d_v=int(ctx.rng.integers(1, 5)),
        )
        T, start = int(ctx.rng.integers(2, 8)), int(ctx.rng.integers(0, 50))
        x, p = case(ctx, d, T, scale=4.0 if big else 1.0, x_scale=30.0 if big else 1.0)
        ctx.describe(case=n + 1, large_scores=big, d_c=d.d_c, d_R=d.d_R, d_nope=d.d_nope, d_v=d.d_v)
        positions = range(start, start + T)
        expect_rows(ctx, decode(ctx, x, p, d.H, positions), naive_mla(x, p, d.H, positions), f"case {n + 1}: decoded outputs")


# --- `attn-kit bench` -------------------------------------------------------------------------------


@SUITE.for_bench
def bench_inputs(rng, T, B, D, H, d_c, d_R, d_nope, d_v):
    """One step of B×D tokens at position T over a cache of T tokens built here (latents and
    rotated keys), so that only the step is measured."""
    d = Dims(B=B, D=D, H=H, d_c=d_c, d_R=d_R, d_nope=d_nope, d_v=d_v)
    x, p = tokens(rng, B, T + 1, D), mla_params(rng, d)
    c, k = latent_cache(x[:, :T], p, range(T))
    return (x[:, T], p, H, T, {"c_kv": c, "k_rope": k}), {}
