"""Turning returned values into arrays, strictly, and comparing them with a tolerance.

Every problem is described in domain terms ("output row (batch 0, query 3) differs ...") and
carries the numbers a renderer needs, never a raw array dump.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from attn_kit.base.errors import ValueProblem
from attn_kit.base.records import Masked, Opaque, TensorValue
from attn_kit.report.results import Mismatch

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

RTOL = 1e-6
ATOL = 1e-8


def _describe(value: object) -> str:
    if value is None:
        return "None"
    if isinstance(value, Opaque):
        return f"a {value.type_name} object"
    return type(value).__name__


def _ragged(value: object, path: str = "") -> str:
    """Explain where a nested list stops being rectangular, or ''."""
    if not isinstance(value, (list, tuple)):
        return ""
    # a 0-d array is a number (np.array(x) of each entry, a list of NumPy scalars made arrays)
    lengths = [len(v) if isinstance(v, (list, tuple)) or (isinstance(v, np.ndarray) and v.ndim) else None for v in value]
    if any(n is not None for n in lengths) and any(n is None for n in lengths):
        i = lengths.index(None)
        return f"entry {path}[{i}] is a number where its neighbours are lists"
    known = [n for n in lengths if n is not None]
    if known and len(set(known)) > 1:
        first = known[0]
        i = next(i for i, n in enumerate(lengths) if n != first)
        return f"row {path}[{i}] has {lengths[i]} entries where {path}[0] has {first}"
    for i, v in enumerate(value):
        inner = _ragged(v, f"{path}[{i}]")
        if inner:
            return inner
    return ""


def _not_an_array(value: object, what: str) -> str:
    if isinstance(value, Masked):
        return (
            f"{what} contains masked entries ({value.masked:,} of {value.size:,}): a masked entry is "
            "not a value, so it cannot be graded. Return a plain array (e.g. `.filled(x)` with the "
            "value you mean there), not a numpy.ma masked array."
        )
    return f"{what} is {_describe(value)}, not an array or nested list"


def to_array(value: object, what: str, kind: str = "float") -> np.ndarray:
    """A nested list, NumPy array or tensor -> ndarray (float64, or bool for masks)."""
    if isinstance(value, TensorValue):
        value = value.array
    if value is None:
        raise ValueProblem(f"{what} is None: the function returned nothing (is a `return` missing?)")
    if isinstance(value, (Opaque, str, dict)):
        raise ValueProblem(_not_an_array(value, what))
    problem = _ragged(value)
    if problem:
        raise ValueProblem(f"{what} is a ragged list: {problem}")
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise ValueProblem(f"{what} cannot be read as an array: {exc}") from None
    if arr.dtype == object:
        bad = next((v for v in arr.ravel() if not isinstance(v, (int, float, bool, np.number, np.bool_))), None)
        raise ValueProblem(f"{what} contains {_describe(bad)} where numbers are expected")
    if kind == "bool":
        if arr.dtype != bool:
            raise ValueProblem(
                f"{what} has entries of type {arr.dtype}, but masks are boolean "
                f"(True = allowed); build it from comparisons such as `j <= i`"
            )
        return arr
    if arr.dtype.kind not in "biuf":
        raise ValueProblem(f"{what} has entries of type {arr.dtype}, not real numbers")
    return arr.astype(np.float64)


def shape_text(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ")" if shape else "() (a scalar)"


def check_shape(arr: np.ndarray, expected: tuple[int, ...], what: str, dims: str = "") -> None:
    """Strict: (T, D) where (1, T, D) is due is an error, with both shapes shown."""
    if tuple(arr.shape) != tuple(expected):
        names = f" = {dims}" if dims else ""
        raise ValueProblem(f"{what} has shape {shape_text(arr.shape)}, expected {shape_text(expected)}{names}")


def _label(index: Sequence[int], axes: Sequence[str]) -> str:
    return ", ".join(f"{name} {i}" for name, i in zip(axes, index))


def compare(
    actual: np.ndarray, expected: np.ndarray, what: str, axes: tuple[str, ...] = (), rtol: float = RTOL, atol: float = ATOL, window: int = 8
) -> Mismatch | None:
    """None when close everywhere (NaN is never close); else a Mismatch for the worst row."""
    expected = np.asarray(expected)
    if expected.dtype == bool or actual.dtype == bool:
        bad = actual != expected
        diff = bad.astype(float)
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(actual - expected)
            bad = ~(diff <= atol + rtol * np.abs(expected))
            diff = np.where(np.isnan(diff), np.inf, diff)
    if not bad.any():
        return None
    axes = tuple(axes) + tuple(f"axis {i}" for i in range(len(axes), actual.ndim))
    index: tuple[int, ...]
    if actual.ndim == 0:
        index = ()
    else:
        worst = np.where(bad, diff, -1.0)
        index = tuple(int(i) for i in np.unravel_index(np.argmax(worst), actual.shape))
    max_abs = float(np.max(np.where(bad, diff, 0.0)))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = np.abs(expected.astype(float))
        rel = np.where(bad & (scale > 0), diff / np.where(scale > 0, scale, 1.0), np.nan)  # undefined at 0
    row_idx, col = index[:-1], (index[-1] if index else 0)
    exp_row = expected[row_idx] if actual.ndim else expected.reshape(1)
    act_row = actual[row_idx] if actual.ndim else actual.reshape(1)
    start = max(0, min(col - window // 2, len(exp_row) - window))
    return Mismatch(
        what=what,
        shape=tuple(actual.shape),
        max_abs=max_abs,
        max_rel=float(np.nanmax(rel)) if not np.isnan(rel).all() else float("nan"),
        index=index,
        row_label=_label(row_idx, axes[:-1]) or "the vector",
        column_label=_label((col,), axes[-1:]) if actual.ndim else "the value",
        expected_row=tuple(float(v) for v in exp_row[start : start + window]),
        actual_row=tuple(float(v) for v in act_row[start : start + window]),
        row_offset=start,
        nan_count=int(np.isnan(actual).sum()) if actual.dtype.kind == "f" else 0,
        inf_count=int(np.isinf(actual).sum()) if actual.dtype.kind == "f" else 0,
        wrong_count=int(bad.sum()),
        total=int(bad.size),
        rtol=rtol,
        atol=atol,
    )


# --- float32 solutions ----------------------------------------------------------------------------
# A solution that computes in float32 differs from the float64 reference by rounding. It passes
# when every difference is within float32 rounding of the reference, judged against the float32
# reference: the oracle run again with every float64 read as float32 (diagnose.float32_twin), which
# rounds the same quantities a float32 solution rounds. Its difference from the float64 reference is
# one sample of that rounding. One row's sample can be nearly zero by luck (or large, where the
# row's scores are large), so the allowance does not rest on it alone: the call's rounding level is
# the F32_QUANTILE quantile, over its rows, of each row's difference relative to the row's own
# magnitude (its largest |value|), and each row is allowed F32_SPREAD times the larger of its own
# difference and that level times its magnitude, plus F32_FLOOR float32 epsilons of its magnitude
# for the last rounding of each value. A real bug differs by a sizeable share of the row, far more.
EPS32 = float(np.finfo(np.float32).eps)
F32_SPREAD = 8.0
F32_FLOOR = 16.0
F32_QUANTILE = 0.9


def float32_like(actual: np.ndarray, expected: np.ndarray) -> bool:
    """True when `actual` holds only float32 values where the float64 `expected` does not."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.dtype.kind != "f" or expected.dtype.kind != "f" or actual.shape != expected.shape:
        return False
    with np.errstate(all="ignore"):
        a = actual[np.isfinite(actual)]
        e = expected[np.isfinite(expected)]
        return bool(a.size) and bool(np.all(a == a.astype(np.float32))) and bool(np.any(e != e.astype(np.float32)))


def float32_values(value: Any) -> bool:
    """True when a returned float array holds only float32 values, some of them not integers: a
    float64 computation essentially never lands on float32 values, a float32 one always does."""
    try:
        arr = np.asarray(value.array if hasattr(value, "array") else value)
    except (ValueError, TypeError):
        return False
    if arr.dtype.kind != "f" or not arr.size:
        return False
    with np.errstate(all="ignore"):
        a = arr[np.isfinite(arr)]
        return bool(a.size) and bool(np.all(a == a.astype(np.float32))) and bool(np.any(a != np.round(a)))


def float32_tolerance(expected_rows: np.ndarray, float32_rows: np.ndarray | None = None) -> np.ndarray:
    """Per-entry absolute tolerance for a float32 computation of `expected_rows` (rows × width),
    given the float32 reference's rows when known (see the comment above)."""
    with np.errstate(all="ignore"):
        e = np.where(np.isfinite(expected_rows), np.abs(expected_rows), 0.0)
        size = e.max(axis=-1, keepdims=True) if e.size else e  # each row's magnitude
        tol = F32_FLOOR * EPS32 * (e + size)
        if float32_rows is not None and float32_rows.shape == expected_rows.shape and e.size:
            spread = np.abs(float32_rows - expected_rows)
            spread = np.where(np.isfinite(spread), spread, 0.0).max(axis=-1, keepdims=True)
            live = size[:, 0] > 0 if size.ndim == 2 else size > 0
            level = float(np.quantile(spread[live] / size[live], F32_QUANTILE)) if np.any(live) else 0.0
            tol = tol + F32_SPREAD * np.maximum(spread, level * size)
    return tol


def within_float32(
    actual: np.ndarray, expected: np.ndarray, float32_expected: np.ndarray | None, rtol: float = RTOL, atol: float = ATOL
) -> tuple[bool, float]:
    """(every entry within float32 rounding of expected, largest |difference|)."""
    shape = expected.shape
    rows = expected.reshape(1, -1) if expected.ndim <= 1 else expected.reshape(-1, shape[-1])
    r32 = None if float32_expected is None else np.asarray(float32_expected, float).reshape(rows.shape)
    tol = float32_tolerance(rows, r32).reshape(shape)
    with np.errstate(all="ignore"):
        diff = np.abs(actual - expected)
        ok = (diff <= np.maximum(tol, atol) + rtol * np.abs(expected)) | (actual == expected)
        worst = float(np.nanmax(np.where(np.isfinite(diff), diff, 0.0))) if diff.size else 0.0
    return bool(ok.all()), worst


def exactly(actual: ArrayLike, expected: ArrayLike) -> bool:
    """Equal entry for entry, or (for a float32 solution) equal to `expected` rounded to float32."""
    actual, expected = np.asarray(actual), np.asarray(expected, dtype=float)
    return bool(np.array_equal(actual, expected) or np.array_equal(actual, expected.astype(np.float32).astype(np.float64)))
