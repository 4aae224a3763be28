"""The named stages of each exercise's reference, as data, for `check --locate`'s value tracing.

A stage is one intermediate value of the computation the statement asks for (the projected
queries, the heads after the split, the raw scores, the scaled scores, the masked scores, the
weights, each head's context, the merged heads, the output), with the words the screen uses for
it, its axes (b batch, h head, t/q query position, k key position, d head feature, D model
feature) and the stages it is computed from. `compute` evaluates them in float64 in the kit's own
process, from the arguments of the call being traced; the candidate's process never sees them
(this module is under attn_kit.checks, which the worker refuses to import).

Each stage's value is a small function of the stages it names, so that when the candidate's own
value of a stage is wrong, the stages after it can be recomputed from the candidate's value: the
next mistake downstream is then found in its own right.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Stage:
    id: str
    words: str  # what the value is, as the screen says it: "the scaled scores (q·kᵀ / √hd)"
    axes: str  # one letter per axis (see the module docstring)
    inputs: tuple[str, ...]
    formula: Callable[..., Any]  # (context, *input values) -> value
    previous: str = ""  # the stage it is one step from: "it is still the raw scores"
    hides: bool = False  # it can be right while its inputs are wrong (rows it sets to 0): it vouches for none


@dataclass
class Context:
    """What the formulas need besides the stages: the call's arguments, read the reference's way."""

    x: Any  # B×T×D, where the queries come from
    kv: Any  # B×S×D, where the keys and values come from
    params: dict
    heads: int
    kv_heads: int
    allowed: Any  # B×T×S booleans, or None (everything allowed)
    positions: Any = None  # rope: the positions, or None (no rotation)
    bias: Any = None  # mha-masked-bias: the additive bias on the scaled scores (broadcasts to B×H×Q×K), or None
    suppress: bool = False  # mha-masked-bias: a query with no allowed key in any head outputs 0
    keys: Any = None  # kv-cache: the projected keys after the append (B×n×D), or None (projected from kv)
    cache_values: Any = None  # kv-cache: the projected values after the append
    given: Any = None  # (q, k, v) already split into heads, B×H×T×d (no projections: sliding-window)
    whole_scores: str = ""  # the bug a value holding every T×S score of a head at once is (materialises-scores)
    values: dict = field(default_factory=dict)  # the stages computed last (for VARIANTS)
    names: tuple[str, ...] = ("Wq", "bq", "Wk", "bk", "Wv", "bv", "Wo", "bo")
    table: tuple = ()  # the exercise's own stages (checks/stages_more.py), or () for ATTENTION
    extra: dict = field(default_factory=dict)  # what an exercise's own stages read (blocks, block tables, dout)
    width: int = 0  # the width whose root divides the scores, when it is not hd (mla-decode)

    @property
    def hd(self) -> int:
        if self.width:
            return self.width
        if self.given is not None:
            return int(self.given[0].shape[-1])
        return int(np.asarray(self.params[self.names[0]]).shape[1]) // self.heads


def _project(ctx: Context, x: Any, w: int) -> Any:
    if x is ctx.kv and w in (2, 4) and ctx.keys is not None:  # kv-cache: the cache after the append
        return ctx.keys if w == 2 else ctx.cache_values
    y = x @ np.asarray(ctx.params[ctx.names[w]], dtype=np.float64)
    bias = ctx.params.get(ctx.names[w + 1])
    return y if bias is None else y + np.asarray(bias, dtype=np.float64)


def _heads(ctx: Context, y: Any, which: int, heads: int) -> Any:
    """The heads of a projection (or the exercise's own q, k, v when it takes them split)."""
    return ctx.given[which] if ctx.given is not None else _split(y, heads)


def _split(y: Any, heads: int) -> Any:
    B, T, width = y.shape
    return y.reshape(B, T, heads, width // heads).transpose(0, 2, 1, 3)


def _repeat(ctx: Context, y: Any) -> Any:
    """Key/value heads repeated for the query heads that read them (grouped-query attention)."""
    return y[:, np.arange(ctx.heads) // (ctx.heads // ctx.kv_heads)]


def _rotate(ctx: Context, y: Any) -> Any:
    if ctx.positions is None:
        return y
    hd = y.shape[-1]
    half = hd // 2
    theta = 10000.0 ** (-2.0 * np.arange(half, dtype=np.float64) / hd)
    angle = np.asarray(ctx.positions, dtype=np.float64).reshape(-1, 1) * theta
    cos, sin = np.cos(angle), np.sin(angle)
    first, second = y[..., :half], y[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def _mask(ctx: Context) -> Any:
    """The call's mask, all True when it has none (code that builds one anyway must get that)."""
    if ctx.allowed is not None:
        return ctx.allowed
    return np.ones((ctx.x.shape[0], ctx.x.shape[1], ctx.kv.shape[1]), dtype=bool)


def _per_head(ctx: Context) -> Any:
    """The mask with a head axis: B×1×Q×K (shared by the heads) or B×H×Q×K."""
    return ctx.allowed[:, None] if ctx.allowed.ndim == 3 else ctx.allowed


def _masked(ctx: Context, scores: Any) -> Any:
    return np.where(_per_head(ctx), scores, -np.inf)


def _biased(ctx: Context, scores: Any) -> Any:
    return scores + np.asarray(ctx.bias, dtype=np.float64)


def _suppressed(ctx: Context, output: Any) -> Any:
    active = _per_head(ctx).any(axis=-1).any(axis=1)  # B×Q: some head may attend to some key
    return np.where(active[:, :, None], output, 0.0)


def _softmax(ctx: Context, scores: Any) -> Any:
    allowed = np.isfinite(scores) if ctx.allowed is None else _per_head(ctx) & np.isfinite(scores)
    top = np.where(allowed, scores, -np.inf).max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(allowed, np.exp(np.where(allowed, scores, 0.0) - top), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def _merge(ctx: Context, heads: Any) -> Any:
    B, H, T, hd = heads.shape
    return heads.transpose(0, 2, 1, 3).reshape(B, T, H * hd)


ATTENTION: tuple[Stage, ...] = (
    Stage("q_proj", "the projected queries (x @ Wq + bq)", "btD", (), lambda c: _project(c, c.x, 0)),
    Stage("k_proj", "the projected keys (x @ Wk + bk)", "bkD", (), lambda c: _project(c, c.kv, 2)),
    Stage("v_proj", "the projected values (x @ Wv + bv)", "bkD", (), lambda c: _project(c, c.kv, 4)),
    Stage("q_heads", "the queries split into heads", "bhtd", ("q_proj",), lambda c, q: _heads(c, q, 0, c.heads)),
    Stage("k_heads", "the keys split into heads", "bhkd", ("k_proj",), lambda c, k: _heads(c, k, 1, c.kv_heads)),
    Stage("v_heads", "the values split into heads", "bhkd", ("v_proj",), lambda c, v: _heads(c, v, 2, c.kv_heads)),
    Stage("q_rot", "the rotated queries", "bhtd", ("q_heads",), _rotate),
    Stage("k_rot", "the rotated keys", "bhkd", ("k_heads",), _rotate),
    Stage("k_each", "the keys, one head per query head", "bhkd", ("k_rot",), _repeat),
    Stage("v_each", "the values, one head per query head", "bhkd", ("v_heads",), _repeat),
    Stage("raw", "the raw scores (q · kᵀ)", "bhqk", ("q_rot", "k_each"), lambda c, q, k: q @ np.swapaxes(k, -1, -2)),
    Stage("scaled", "the scaled scores (q · kᵀ / √hd)", "bhqk", ("raw",), lambda c, s: s / np.sqrt(c.hd), previous="raw"),
    Stage("biased", "the biased scores (the scaled scores + the bias)", "bhqk", ("scaled",), _biased, previous="scaled"),
    Stage("allowed", "the mask (True where a query may attend to a key)", "bqk", (), lambda c: _mask(c).astype(np.float64)),
    Stage(
        "masked",
        "the masked scores (blocked entries at -inf)",
        "bhqk",
        ("biased", "allowed"),
        lambda c, s, a: _masked(c, s),
        previous="biased",
    ),
    Stage("weights", "the attention weights (softmax over the keys)", "bhqk", ("masked",), _softmax, previous="masked"),
    Stage("context", "each head's context (weights @ v)", "bhtd", ("weights", "v_each"), lambda c, w, v: w @ v),
    Stage("merged", "the heads merged back side by side", "btD", ("context",), _merge, previous="context"),
    Stage("output", "the output (merged @ Wo + bo)", "btD", ("merged",), lambda c, m: _project(c, m, 6), previous="merged"),
    Stage(
        "suppressed",
        "the output, 0 for a query that may attend to no key",
        "btD",
        ("output",),
        _suppressed,
        previous="output",
        hides=True,
    ),
)


def _project_transposed(ctx: Context, x: Any, w: int) -> Any:
    y = x @ np.asarray(ctx.params[ctx.names[w]], dtype=np.float64).T
    bias = ctx.params.get(ctx.names[w + 1])
    return y if bias is None else y + np.asarray(bias, dtype=np.float64)


def _stage(values: dict, *ids: str) -> Any:
    """The first of the stages computed for this call (a stage left out stands for none)."""
    return next((values[i] for i in ids if i in values), None)


def _keys(heads: Any) -> Any:
    return np.swapaxes(heads, -1, -2)


# stage -> classic wrong ways to compute it, in words, and the value each gives (from the call)
VARIANTS: dict[str, tuple[tuple[str, Callable[[Context, dict], Any]], ...]] = {
    "q_proj": (
        ("it is x @ Wqᵀ: the weight matrix is transposed", lambda c, v: _project_transposed(c, c.x, 0)),
        ("it is x @ Wq without the bias bq", lambda c, v: c.x @ np.asarray(c.params[c.names[0]], dtype=np.float64)),
        ("it is the projected keys (Wk used for the queries)", lambda c, v: _project(c, c.x, 2)),
    ),
    "k_proj": (
        ("it is x @ Wkᵀ: the weight matrix is transposed", lambda c, v: _project_transposed(c, c.kv, 2)),
        ("it is x @ Wk without the bias bk", lambda c, v: c.kv @ np.asarray(c.params[c.names[2]], dtype=np.float64)),
        ("it is the projected queries (Wq used for the keys)", lambda c, v: _project(c, c.kv, 0)),
    ),
    "v_proj": (
        ("it is x @ Wvᵀ: the weight matrix is transposed", lambda c, v: _project_transposed(c, c.kv, 4)),
        ("it is x @ Wv without the bias bv", lambda c, v: c.kv @ np.asarray(c.params[c.names[4]], dtype=np.float64)),
        ("it is the projected queries (Wq used for the values)", lambda c, v: _project(c, c.kv, 0)),
        ("it is the projected keys (Wk used for the values)", lambda c, v: _project(c, c.kv, 2)),
    ),
    "raw": (
        (
            "it is q · vᵀ: the values are used as the keys",
            lambda c, v: _stage(v, "q_rot", "q_heads") @ _keys(_stage(v, "v_each", "v_heads")),
        ),
        (
            "it is q · qᵀ: the queries are used as the keys",
            lambda c, v: _stage(v, "q_rot", "q_heads") @ _keys(_stage(v, "q_rot", "q_heads")),
        ),
    ),
    "biased": (
        (
            "the bias is scaled with the scores: (q · kᵀ + bias) / √hd instead of q · kᵀ / √hd + bias",
            lambda c, v: (v["raw"] + np.asarray(c.bias, dtype=np.float64)) / np.sqrt(c.hd),
        ),
        ("the bias is subtracted instead of added", lambda c, v: v["scaled"] - np.asarray(c.bias, dtype=np.float64)),
    ),
    "context": (("it is weights @ q: the queries are used as the values", lambda c, v: v["weights"] @ v["q_heads"]),),
    "output": (
        (
            "it is merged + bo: the projection by Wo is missing",
            lambda c, v: v["merged"] + np.asarray(c.params[c.names[7]], dtype=np.float64),
        ),
        ("it is merged @ Woᵀ: the output weights are transposed", lambda c, v: _project_transposed(c, v["merged"], 6)),
        ("it is merged @ Wo without the bias bo", lambda c, v: v["merged"] @ np.asarray(c.params[c.names[6]], dtype=np.float64)),
    ),
}


def _f64(value: Any) -> Any:
    return np.asarray(value, dtype=np.float64)


def _allowed(mask: Any, B: int, T: int, S: int) -> Any:
    return None if mask is None else np.broadcast_to(np.asarray(mask, dtype=bool), (B, T, S))


def _bind_mha(args: tuple, kwargs: dict) -> Context:
    x, params, heads = args[0], args[1], args[2]
    x = _f64(x)
    mask = args[3] if len(args) > 3 else kwargs.get("mask")
    return Context(x, x, dict(params), int(heads), int(heads), _allowed(mask, x.shape[0], x.shape[1], x.shape[1]))


def _bind_cross(args: tuple, kwargs: dict) -> Context:
    x, kv = _f64(args[0]), _f64(args[1])
    mask = args[4] if len(args) > 4 else kwargs.get("mask")
    return Context(x, kv, dict(args[2]), int(args[3]), int(args[3]), _allowed(mask, x.shape[0], x.shape[1], kv.shape[1]))


def _bind_gqa(args: tuple, kwargs: dict) -> Context:
    x = _f64(args[0])
    kv_heads = args[3] if len(args) > 3 else kwargs["num_kv_heads"]
    mask = args[4] if len(args) > 4 else kwargs.get("mask")
    return Context(x, x, dict(args[1]), int(args[2]), int(kv_heads), _allowed(mask, x.shape[0], x.shape[1], x.shape[1]))


def _bind_rope(args: tuple, kwargs: dict) -> Context:
    x = _f64(args[0])
    positions = args[3] if len(args) > 3 else kwargs.get("positions")
    mask = args[4] if len(args) > 4 else kwargs.get("mask")
    positions = np.arange(x.shape[1]) if positions is None else positions
    return Context(x, x, dict(args[1]), int(args[2]), int(args[2]), _allowed(mask, x.shape[0], x.shape[1], x.shape[1]), positions)


def _arg(args: tuple, kwargs: dict, at: int, name: str, default: Any = None) -> Any:
    return args[at] if len(args) > at else kwargs.get(name, default)


def _masked_bias_allowed(masks: dict, B: int, Q: int, K: int, causal: bool, offset: int) -> Any:
    """The intersected masks (and the causal bound) as B×Q×K when the heads share them, else B×H×Q×K."""
    allowed = np.ones((B, 1, Q, K), dtype=bool)
    if masks.get("key_mask") is not None:
        allowed = allowed & np.asarray(masks["key_mask"], dtype=bool)[:, None, None, :]
    if masks.get("query_mask") is not None:
        allowed = allowed & np.asarray(masks["query_mask"], dtype=bool)[:, None, :, None]
    if masks.get("attention_mask") is not None:
        allowed = allowed & np.asarray(masks["attention_mask"], dtype=bool)
    if causal:
        allowed = allowed & (np.arange(K)[None, :] <= np.arange(Q)[:, None] + offset)
    return allowed[:, 0] if allowed.shape[1] == 1 or bool(np.all(allowed == allowed[:, :1])) else allowed


def _bind_masked_bias(args: tuple, kwargs: dict) -> Context:
    acts, params = dict(args[0]), dict(args[1])
    masks = dict(_arg(args, kwargs, 2, "masks") or {})
    heads = int(_arg(args, kwargs, 3, "heads", 1))
    causal, offset = bool(_arg(args, kwargs, 4, "causal", False)), int(_arg(args, kwargs, 5, "causal_offset", 0))
    x, kv = _f64(acts["query"]), _f64(acts["context"])
    B, Q, K = x.shape[0], x.shape[1], kv.shape[1]
    allowed = _masked_bias_allowed(masks, B, Q, K, causal, offset)
    shape = (B, Q, K) if allowed.ndim == 3 else (B, heads, Q, K)
    allowed = np.ascontiguousarray(np.broadcast_to(allowed, shape))
    bias = acts.get("bias")
    ctx = Context(x, kv, params, heads, heads, allowed, bias=None if bias is None else _f64(bias), suppress=True)
    ctx.names = ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")
    return ctx


def _bind_kv_cache(args: tuple, kwargs: dict) -> Context:
    x = _f64(args[0])[:, None, :]  # B×1×D: the new token
    params, heads = dict(args[1]), int(_arg(args, kwargs, 2, "num_heads"))
    cache = _arg(args, kwargs, 3, "cache")
    k_new = _project_plain(x, params, "Wk", "bk")
    v_new = _project_plain(x, params, "Wv", "bv")
    keys, values = (
        (k_new, v_new) if cache is None else (np.concatenate([_f64(cache[0]), k_new], 1), np.concatenate([_f64(cache[1]), v_new], 1))
    )
    return Context(x, keys, params, heads, heads, None, keys=keys, cache_values=values)


def _bind_sliding(args: tuple, kwargs: dict) -> Context:
    q, k, v = (_f64(a) for a in args[:3])
    window = int(_arg(args, kwargs, 3, "window"))
    B, H, T, _ = q.shape
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    allowed = np.ascontiguousarray(np.broadcast_to((j <= i) & (j > i - window), (B, T, T)))
    x = np.zeros((B, T, 1))
    return Context(x, x, {}, H, H, allowed, given=(q, k, v), whole_scores="materialises-scores")


def _project_plain(x: Any, params: dict, w: str, b: str) -> Any:
    y = x @ _f64(params[w])
    return y if params.get(b) is None else y + _f64(params[b])


# exercise id -> (the function whose calls are traced, how its arguments bind)
TRACED: dict[str, tuple[str, Callable[[tuple, dict], Context]]] = {
    "mha-screen": ("multi_head_attention", _bind_mha),
    "mha-masked-bias": ("multihead_attention", _bind_masked_bias),
    "kv-cache": ("decode_step", _bind_kv_cache),
    "sliding-window": ("sliding_window_attention", _bind_sliding),
    "cross-attention": ("cross_attention", _bind_cross),
    "gqa": ("grouped_query_attention", _bind_gqa),
    "rope": ("rope_attention", _bind_rope),
}


# --- a probe call per exercise --------------------------------------------------------------------
# Traced beside the smallest failing calls: small, square (a layer that needs D_in = D_out takes
# it), with biases, a mask that differs from causal and blocks every key of one query, an additive
# bias where the exercise has one. The failing calls may not show a mistake the diagnosis names
# from its probes (a file that fails its first check has every later check skipped).


def _weights(rng: Any, D: int, widths: dict[str, int]) -> dict[str, Any]:
    params = {}
    for name, width in widths.items():
        params["W" + name] = rng.normal(0.0, 1 / np.sqrt(D), size=(D if name != "o" else widths["q"], width)).round(6)
        params["b" + name] = rng.normal(0.0, 0.5, size=width).round(6)
    return params


def _probe_mask(rng: Any, B: int, T: int, S: int) -> Any:
    """A prefix mask (query i of batch b sees keys j < n[b, i]: valid lengths, which layers that
    take lengths can express), not causal, in which one query sees no key."""
    lengths = rng.integers(1, S + 1, size=(B, T))
    lengths[-1, 1] = 0
    return np.arange(S) < lengths[..., None]


def _probe_mha(rng: Any) -> tuple[tuple, dict]:
    x = rng.normal(size=(2, 4, 6)).round(6)
    return (x, _weights(rng, 6, dict(q=6, k=6, v=6, o=6)), 2, _probe_mask(rng, 2, 4, 4)), {}


def _probe_cross(rng: Any) -> tuple[tuple, dict]:
    x, kv = rng.normal(size=(2, 4, 6)).round(6), rng.normal(size=(2, 5, 6)).round(6)
    return (x, kv, _weights(rng, 6, dict(q=6, k=6, v=6, o=6)), 2, _probe_mask(rng, 2, 4, 5)), {}


def _probe_gqa(rng: Any) -> tuple[tuple, dict]:
    x = rng.normal(size=(2, 4, 8)).round(6)
    return (x, _weights(rng, 8, dict(q=8, k=4, v=4, o=8)), 4, 2, _probe_mask(rng, 2, 4, 4)), {}


def _probe_rope(rng: Any) -> tuple[tuple, dict]:
    x = rng.normal(size=(2, 4, 8)).round(6)
    return (x, _weights(rng, 8, dict(q=8, k=8, v=8, o=8)), 2, np.array([3, 4, 5, 6]), _probe_mask(rng, 2, 4, 4)), {}


def _probe_masked_bias(rng: Any) -> tuple[tuple, dict]:
    B, Q, K, H, D = 2, 4, 5, 2, 3
    acts = {"query": rng.normal(size=(B, Q, H * D)).round(6), "context": rng.normal(size=(B, K, H * D)).round(6)}
    acts["bias"] = rng.normal(0.0, 1.5, size=(B, H, Q, K)).round(6)
    w = _weights(rng, H * D, dict(q=H * D, k=H * D, v=H * D, o=H * D))
    params = {f"{name[0].lower()}_{name[1]}": value for name, value in w.items()}  # Wq -> w_q
    key_mask = np.ones((B, K), dtype=bool)
    key_mask[0, 3] = False
    query_mask = np.ones((B, Q), dtype=bool)
    query_mask[-1, 1] = False  # a query with no allowed key
    return (acts, params, {"key_mask": key_mask, "query_mask": query_mask}), {"heads": H}


def _probe_kv_cache(rng: Any) -> tuple[tuple, dict]:
    B, D, t = 2, 6, 3
    cache = (rng.normal(size=(B, t, D)).round(6), rng.normal(size=(B, t, D)).round(6))
    return (rng.normal(size=(B, D)).round(6), _weights(rng, D, dict(q=D, k=D, v=D, o=D)), 2, cache), {}


def _probe_sliding(rng: Any) -> tuple[tuple, dict]:
    # T = 40 > 16: the reference scores chunks of 16 queries, never 40 × 40
    q, k, v = (rng.normal(size=(1, 2, 40, 4)).round(6) for _ in range(3))
    return (q, k, v, 3), {}


PROBES: dict[str, Callable[[Any], tuple[tuple, dict]]] = {
    "sliding-window": _probe_sliding,
    "mha-screen": _probe_mha,
    "cross-attention": _probe_cross,
    "gqa": _probe_gqa,
    "rope": _probe_rope,
    "mha-masked-bias": _probe_masked_bias,
    "kv-cache": _probe_kv_cache,
}


def _traced() -> tuple[dict[str, tuple[str, Callable[[tuple, dict], Context]]], dict[str, Callable[[Any], tuple[tuple, dict]]]]:
    """TRACED and PROBES with the exercises whose stages are their own (checks/stages_own.py,
    imported here: its tables build on this module's)."""
    from attn_kit.checks import stages_own

    own = stages_own.OWN
    return {**TRACED, **{e: (fn, bind) for e, (fn, bind, _) in own.items()}}, {**PROBES, **{e: p for e, (_, _, p) in own.items()}}


def probe_call(exercise: str) -> tuple[str, tuple, dict] | None:
    """(function, args, kwargs) of the exercise's probe call (the same on every run), or None."""
    traced, probes = _traced()
    if exercise not in probes or exercise not in traced:
        return None
    args, kwargs = probes[exercise](np.random.default_rng(34))
    return traced[exercise][0], args, kwargs


def traced_function(exercise: str) -> str | None:
    """The function whose calls --locate traces for this exercise, or None (no stages declared)."""
    traced = _traced()[0]
    return traced[exercise][0] if exercise in traced else None


def context_for(exercise: str, args: tuple, kwargs: dict) -> Context | None:
    """The call's arguments read the reference's way, or None when they do not fit (a check that
    passes a malformed argument on purpose)."""
    try:
        return _traced()[0][exercise][1](tuple(args), dict(kwargs))
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None


def compute(ctx: Context, given: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every stage's value in data-flow order (float64); the values in `given` are taken as they
    are (the candidate's own, for a stage found wrong) and the stages after them follow from
    them. A stage that does not apply (no mask, no rotation, as many key heads as query heads) is
    the same value as the one before it and is left out."""
    given = given or {}
    values: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    for stage in table_of(ctx):
        if stage.id in given:
            values[stage.id] = given[stage.id]
            continue
        if _idle(ctx, stage):
            skipped[stage.id] = skipped.get(stage.inputs[0], stage.inputs[0]) if stage.inputs else ""
            continue
        sources = [values.get(skipped.get(i, i)) for i in stage.inputs]
        # an idle stage with no inputs (a mask that differs per head) is not read by the formula
        if any(s is None and skipped.get(i) != "" for s, i in zip(sources, stage.inputs)):
            continue
        with np.errstate(all="ignore"):
            values[stage.id] = stage.formula(ctx, *sources)
    return values


def _idle(ctx: Context, stage: Stage) -> bool:
    """The stage is the identity for this call."""
    return (
        (stage.id in ("q_rot", "k_rot") and ctx.positions is None)
        or (stage.id in ("k_each", "v_each") and ctx.kv_heads == ctx.heads)
        or (stage.id == "masked" and (ctx.allowed is None or bool(np.all(ctx.allowed))))
        or (stage.id == "biased" and ctx.bias is None)
        or (stage.id in ("q_proj", "k_proj", "v_proj", "merged", "output") and ctx.given is not None)
        or (stage.id == "allowed" and ctx.allowed is not None and ctx.allowed.ndim == 4)
        or (stage.id == "suppressed" and (not ctx.suppress or ctx.allowed is None or bool(np.all(_per_head(ctx).any(axis=-1)))))
    )


def table_of(ctx: Context) -> tuple[Stage, ...]:
    """The call's stages, in data-flow order."""
    return ctx.table or ATTENTION


def by_id(table: tuple[Stage, ...] = ()) -> dict[str, Stage]:
    return {s.id: s for s in table or ATTENTION}


def resolve(stage_id: str, values: dict[str, Any], table: tuple[Stage, ...] = ()) -> str:
    """The stage that stands for `stage_id` when it was left out (idle): its first input's."""
    stages = by_id(table)
    while stage_id not in values and stages[stage_id].inputs:
        stage_id = stages[stage_id].inputs[0]
    return stage_id


# --- when no small edit exists --------------------------------------------------------------------
# bug id -> (what the fix is, in the bug's words, and the shape of the new code, NumPy style, each
# line at most 76 characters so that it fits 80 columns indented). Shown by --locate when no edit
# of the candidate's own lines fixes a diagnosed bug: the fix is new code, not a rewrite.
NEW_CODE: dict[str, tuple[str, str]] = {
    "blocked-row-uniform": (
        "a guard for rows with no allowed key: their weights are 0, not a softmax over the fill value",
        """\
ok = allowed.any(axis=-1, keepdims=True)    # rows with some allowed key
top = np.where(allowed, scores, -np.inf).max(axis=-1, keepdims=True)
top = np.where(ok, top, 0.0)
e = np.where(allowed, np.exp(scores - top), 0.0)    # blocked: 0
total = e.sum(axis=-1, keepdims=True)
weights = e / np.where(total > 0, total, 1.0)  # an empty row: 0""",
    ),
    "blocked-row-nan": (
        "a guard for rows with no allowed key: never -inf - (-inf), never 0 / 0",
        """\
ok = allowed.any(axis=-1, keepdims=True)    # rows with some allowed key
top = np.where(allowed, scores, -np.inf).max(axis=-1, keepdims=True)
top = np.where(ok, top, 0.0)                # not -inf on an empty row
e = np.where(allowed, np.exp(scores - top), 0.0)
total = e.sum(axis=-1, keepdims=True)
weights = e / np.where(total > 0, total, 1.0)  # an empty row: 0""",
    ),
    "b-o-not-suppressed": (
        "a guard after the output projection: a query with no allowed key in any head outputs 0",
        """\
active = allowed.any(axis=-1).any(axis=1)   # B×Q: some head, some key
output = np.where(active[:, :, None], output, 0.0)""",
    ),
    "mask-ignored": (
        "the mask applied to the scores before the softmax (the layer never reads it)",
        """\
scores = np.where(allowed, scores, -np.inf)  # allowed: B×(H)×Q×K
# ... then the softmax over the allowed keys only""",
    ),
    "mutates-input": (
        "a new array where the code now changes its argument in place",
        """\
q = q * scale  # a new array: `q *= scale` would change the caller's""",
    ),
    "materialises-scores": (
        "a loop over blocks of keys with a running max and sum, never the whole score matrix",
        """\
m = np.full((B, H, Q, 1), -np.inf); s = np.zeros((B, H, Q, 1))
acc = np.zeros((B, H, Q, Dv))
for start in range(0, K, block):
    part = q @ k[:, :, start:start + block].swapaxes(-1, -2) * scale
    new = np.maximum(m, part.max(axis=-1, keepdims=True))
    e = np.exp(part - new)
    s = s * np.exp(m - new) + e.sum(axis=-1, keepdims=True)
    acc = acc * np.exp(m - new) + e @ v[:, :, start:start + block]
    m = new
out = acc / s""",
    ),
}


def new_code(bug: str) -> tuple[str, tuple[str, ...]] | None:
    """(what the fix is, the new code's lines) for a bug whose fix is new code, else None."""
    if bug not in NEW_CODE:
        return None
    why, code = NEW_CODE[bug]
    return why, tuple(code.splitlines())
