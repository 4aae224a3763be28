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
    values: dict = field(default_factory=dict)  # the stages computed last (for VARIANTS)
    names: tuple[str, ...] = ("Wq", "bq", "Wk", "bk", "Wv", "bv", "Wo", "bo")

    @property
    def hd(self) -> int:
        return int(np.asarray(self.params[self.names[0]]).shape[1]) // self.heads


def _project(ctx: Context, x: Any, w: int) -> Any:
    y = x @ np.asarray(ctx.params[ctx.names[w]], dtype=np.float64)
    bias = ctx.params.get(ctx.names[w + 1])
    return y if bias is None else y + np.asarray(bias, dtype=np.float64)


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


def _masked(ctx: Context, scores: Any) -> Any:
    return np.where(ctx.allowed[:, None], scores, -np.inf)


def _softmax(ctx: Context, scores: Any) -> Any:
    allowed = np.isfinite(scores) if ctx.allowed is None else ctx.allowed[:, None] & np.isfinite(scores)
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
    Stage("q_heads", "the queries split into heads", "bhtd", ("q_proj",), lambda c, q: _split(q, c.heads)),
    Stage("k_heads", "the keys split into heads", "bhkd", ("k_proj",), lambda c, k: _split(k, c.kv_heads)),
    Stage("v_heads", "the values split into heads", "bhkd", ("v_proj",), lambda c, v: _split(v, c.kv_heads)),
    Stage("q_rot", "the rotated queries", "bhtd", ("q_heads",), _rotate),
    Stage("k_rot", "the rotated keys", "bhkd", ("k_heads",), _rotate),
    Stage("k_each", "the keys, one head per query head", "bhkd", ("k_rot",), _repeat),
    Stage("v_each", "the values, one head per query head", "bhkd", ("v_heads",), _repeat),
    Stage("raw", "the raw scores (q · kᵀ)", "bhqk", ("q_rot", "k_each"), lambda c, q, k: q @ np.swapaxes(k, -1, -2)),
    Stage("scaled", "the scaled scores (q · kᵀ / √hd)", "bhqk", ("raw",), lambda c, s: s / np.sqrt(c.hd), previous="raw"),
    Stage("allowed", "the mask (True where a query may attend to a key)", "bqk", (), lambda c: _mask(c).astype(np.float64)),
    Stage(
        "masked",
        "the masked scores (blocked entries at -inf)",
        "bhqk",
        ("scaled", "allowed"),
        lambda c, s, a: _masked(c, s),
        previous="scaled",
    ),
    Stage("weights", "the attention weights (softmax over the keys)", "bhqk", ("masked",), _softmax, previous="masked"),
    Stage("context", "each head's context (weights @ v)", "bhtd", ("weights", "v_each"), lambda c, w, v: w @ v),
    Stage("merged", "the heads merged back side by side", "btD", ("context",), _merge, previous="context"),
    Stage("output", "the output (merged @ Wo + bo)", "btD", ("merged",), lambda c, m: _project(c, m, 6), previous="merged"),
)


def _project_transposed(ctx: Context, x: Any, w: int) -> Any:
    y = x @ np.asarray(ctx.params[ctx.names[w]], dtype=np.float64).T
    bias = ctx.params.get(ctx.names[w + 1])
    return y if bias is None else y + np.asarray(bias, dtype=np.float64)


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
    "context": (("it is weights @ q: the queries are used as the values", lambda c, v: v["weights"] @ v["q_heads"]),),
    "output": (
        (
            "it is merged + bo: the projection by Wo is missing",
            lambda c, v: v["merged"] + np.asarray(c.params[c.names[7]], dtype=np.float64),
        ),
        ("it is merged @ Woᵀ: the output weights are transposed", lambda c, v: _project_transposed(c, v["merged"], 6)),
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


# exercise id -> (the function whose calls are traced, how its arguments bind)
TRACED: dict[str, tuple[str, Callable[[tuple, dict], Context]]] = {
    "mha-screen": ("multi_head_attention", _bind_mha),
    "cross-attention": ("cross_attention", _bind_cross),
    "gqa": ("grouped_query_attention", _bind_gqa),
    "rope": ("rope_attention", _bind_rope),
}


def traced_function(exercise: str) -> str | None:
    """The function whose calls --locate traces for this exercise, or None (no stages declared)."""
    return TRACED[exercise][0] if exercise in TRACED else None


def context_for(exercise: str, args: tuple, kwargs: dict) -> Context | None:
    """The call's arguments read the reference's way, or None when they do not fit (a check that
    passes a malformed argument on purpose)."""
    try:
        return TRACED[exercise][1](tuple(args), dict(kwargs))
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
    for stage in ATTENTION:
        if stage.id in given:
            values[stage.id] = given[stage.id]
            continue
        if _idle(ctx, stage):
            if stage.inputs:
                skipped[stage.id] = skipped.get(stage.inputs[0], stage.inputs[0])
            continue
        sources = [values[skipped.get(i, i)] if skipped.get(i, i) in values else None for i in stage.inputs]
        if any(s is None for s in sources):
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
    )


def by_id() -> dict[str, Stage]:
    return {s.id: s for s in ATTENTION}


def resolve(stage_id: str, values: dict[str, Any]) -> str:
    """The stage that stands for `stage_id` when it was left out (idle): its first input's."""
    stages = by_id()
    while stage_id not in values and stages[stage_id].inputs:
        stage_id = stages[stage_id].inputs[0]
    return stage_id
