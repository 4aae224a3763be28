"""How a candidate's value differs from a stage, in the stage's words: a constant factor with its
named cause, entries blocked or allowed wrongly, a transpose, a bias, a classic variant
(checks/stages.py VARIANTS). Each relation is one small function; `RELATIONS` is their order."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attn_kit.checks import stages as stage_table

BLOCKED = -1e4  # a score at or below this counts as blocked (-1e9 fills, -inf)


def close(actual: Any, expected: Any) -> bool:
    """Equal within float32 rounding; a blocked expected entry (-inf) matches any blocked fill."""
    if actual.shape != expected.shape:
        return False
    blocked = np.isneginf(expected)
    if np.any(blocked):
        if not np.all(actual[blocked] <= BLOCKED):
            return False
        actual, expected = actual[~blocked], expected[~blocked]
    if not np.all(np.isfinite(actual)):
        return False
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    return bool(np.allclose(actual, expected, rtol=2e-3, atol=1e-5 * (1.0 + scale)))


# --- relations: how a wrong value differs, in words -----------------------------------------------


def relate(ctx, stage, actual: Any, expected: Any) -> str:
    """A named difference between the candidate's value and the stage, or ""."""
    for relation in (_allowed,) if stage.id == "allowed" else RELATIONS:
        with np.errstate(all="ignore"):
            words = relation(ctx, stage, actual, expected)
        if words:
            return words
    return ""


def _factor(actual: Any, expected: Any) -> float | None:
    finite = np.isfinite(expected) & (expected > BLOCKED)
    if not np.any(finite) or not np.all(np.isfinite(actual[finite])):
        return None
    e, a = expected[finite], actual[finite]
    norm = float(np.dot(e, e))
    if norm == 0.0:
        return None
    c = float(np.dot(a, e)) / norm
    if abs(c - 1.0) < 1e-3 or c == 0.0 or not np.allclose(a, c * e, rtol=2e-3, atol=1e-6 * (1 + float(np.max(np.abs(e))))):
        return None
    return c


def _named_factors(ctx) -> list[tuple[float, str]]:
    hd, heads = ctx.hd, ctx.heads
    D = hd * heads
    return [
        (math.sqrt(hd), f"hd = {hd}: the 1/√hd scale is missing"),
        (1 / math.sqrt(hd), f"hd = {hd}: the 1/√hd scale is applied twice"),
        (math.sqrt(hd / D), f"divided by √D = √{D} instead of √hd = √{hd}"),
        (1 / math.sqrt(hd), f"divided by hd = {hd} instead of √hd"),
        (float(heads), f"H = {heads}"),
        (1 / heads, f"H = {heads}"),
    ]


def factor_words(ctx, actual: Any, expected: Any) -> str:
    c = _factor(actual, expected)
    if c is None:
        return ""
    size = f"{c:.3g}× too large" if c > 1 else f"{1 / c:.3g}× too small"
    fits = list(dict.fromkeys(words for value, words in _named_factors(ctx) if abs(c - value) < 1e-3 * max(1.0, value)))
    named = " or ".join(fits)  # two explanations may fit (hd = H): this call cannot tell them apart
    return f"it is {size}" + (f" ({named})" if named else "")


def _scaled(ctx, stage, actual, expected) -> str:
    return factor_words(ctx, actual, expected)


def mask_words(ctx, stage, actual, expected) -> str:
    if "k" not in stage.axes or not (stage.id == "allowed" or np.any(np.isneginf(expected)) or np.any(actual <= BLOCKED)):
        return ""
    should = np.isneginf(expected) | (expected <= BLOCKED)
    does = actual <= BLOCKED
    if stage.id != "allowed" and not np.any(does):
        return ""  # nothing blocked: not a mask applied wrongly
    if stage.id == "allowed":
        should, does = expected < 0.5, actual < 0.5
    if np.array_equal(should, does):
        return ""
    both = ~should & ~does
    if stage.id != "allowed" and not close(actual[both], expected[both]):
        return ""  # the entries both allow differ too: not (only) a mask applied wrongly
    opened, closed = int(np.sum(should & ~does)), int(np.sum(does & ~should))
    if np.array_equal(does, ~should):
        return "it is inverted: it blocks every entry that should be allowed and allows every one that should be blocked"
    parts = [
        f"allows {opened} entries that should be blocked" if opened else "",
        f"blocks {closed} that should be allowed" if closed else "",
    ]
    diagonal = _on_diagonal(should ^ does)
    return "it " + " and ".join(p for p in parts if p) + (" (on the diagonal: a bound off by one)" if diagonal else "")


def _on_diagonal(diff: Any) -> bool:
    if diff.ndim < 2 or diff.shape[-1] != diff.shape[-2]:
        return False
    eye = np.eye(diff.shape[-1], dtype=bool)
    return (
        bool(np.any(diff)) and not np.any(diff & ~eye) or bool(np.any(diff)) and not np.any(diff & ~np.eye(diff.shape[-1], k=1, dtype=bool))
    )


def _allowed(ctx, stage, actual, expected) -> str:
    if stage.id != "allowed" or set(np.unique(actual)) - {0.0, 1.0}:
        return ""
    return mask_words(ctx, stage, actual, expected)


def _transposed(ctx, stage, actual, expected) -> str:
    if actual.ndim < 2 or actual.shape[-1] != actual.shape[-2] or not close(np.swapaxes(actual, -1, -2), expected):
        return ""
    return "it holds them transposed (queries and keys swapped)"


def _other_axis(ctx, stage, actual, expected) -> str:
    if stage.id != "weights" or actual.ndim < 2 or not np.allclose(actual.sum(axis=-2), 1.0, atol=1e-4):
        return ""
    return "each column sums to 1, not each row: the softmax runs over the queries instead of the keys"


def _ones(ctx, stage, actual, expected) -> str:
    """Weights that are all 1: each exponential divided by itself, the sum taken over an axis of
    length one (the single query of a decoding step) instead of over the keys."""
    if stage.id != "weights" or np.shape(ctx.x)[-2] != 1 or actual.size < 2 or not np.allclose(actual, 1.0) or np.allclose(expected, 1.0):
        return ""  # (a single query: the decoding step's)
    return "every weight is 1: the softmax's sum runs over an axis of length 1 (the queries), not over the keys"


def _offset(ctx, stage, actual, expected) -> str:
    if actual.ndim < 2 or not np.all(np.isfinite(expected)):
        return ""
    diff = actual - expected
    if np.allclose(diff, 0.0, atol=1e-6) or not np.allclose(diff, diff[..., :1, :], rtol=2e-3, atol=1e-5):
        return ""
    return "it is off by the same vector in every row (a bias added or left out)"


def _shuffled(ctx, stage, actual, expected) -> str:
    if not np.all(np.isfinite(expected)) or not np.allclose(np.sort(actual, axis=None), np.sort(expected, axis=None), rtol=2e-3, atol=1e-6):
        return ""
    return "it holds the right numbers in the wrong places (a reshape without the transpose, or heads taken from the wrong columns)"


def _not_finite(ctx, stage, actual, expected) -> str:
    bad = int(np.sum(np.isnan(actual) | np.isposinf(actual)))
    return f"{bad} of its {actual.size} entries are NaN or +inf (an overflow?)" if bad else ""


def _variant(ctx, stage, actual, expected) -> str:
    """The stage computed a classic wrong way (checks/stages.py VARIANTS)."""
    for words, make in stage_table.VARIANTS.get(stage.id, ()):
        try:
            other = np.squeeze(make(ctx, ctx.values))
        except (ValueError, IndexError, KeyError, TypeError):
            continue
        if other.size == actual.size and close(actual, other.reshape(actual.shape)):
            return words
    return ""


UNIFORM = "on a query with no allowed key"


def _uniform_rows(ctx, stage, actual, expected) -> str:
    """Weights where every key is blocked: 0 in the reference, uniform (1/S each) in the code."""
    if stage.id != "weights" or actual.ndim < 1 or actual.shape != expected.shape:
        return ""
    empty = np.all(expected == 0.0, axis=-1)
    if not np.any(empty) or not np.all(np.isfinite(actual)):
        return ""
    rows, others = actual[empty], actual[~empty]
    width = actual.shape[-1]
    if not np.allclose(rows, 1.0 / width, atol=1e-6) or not close(others, expected[~empty]):
        return ""
    return (
        f"{UNIFORM} it is uniform (1/{width} on every key) instead of 0: blocked entries filled with a"
        " finite value still take part in the softmax (blocked-row-uniform)"
    )


RELATIONS = (_variant, _uniform_rows, _allowed, mask_words, _scaled, _transposed, _other_axis, _ones, _offset, _shuffled, _not_finite)
