"""Did a call write into its arguments? Decided in the kit, from data.

The kit keeps its own copy of every argument it sends. After the call the worker sends a
fingerprint of its view of the same arguments (wire.digest of wire.to_plain); when that differs
from the fingerprint of the kit's copy, it sends the view itself as plain data, and `changed`
compares the two here, in the kit's process, where the candidate's code cannot patch the
comparison. A dict that gained or lost keys counts as written (`params.setdefault("bq", zeros)`).
"""

from __future__ import annotations

from typing import Any

from attn_kit.base.records import Opaque, TensorValue


def values_equal(a: Any, b: Any) -> bool:  # noqa: C901 (one branch per kind of plain value, most specific first)
    """Deep equality of plain values: NaN equals NaN, arrays by dtype, shape and value."""
    if isinstance(a, TensorValue) and isinstance(b, TensorValue):
        if (a.dtype, a.device, tuple(a.shape)) != (b.dtype, b.device, tuple(b.shape)):
            return False
        return a.device == "meta" or values_equal(a.array, b.array)
    if type(a) is not type(b):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
            return a == b
        return False
    if isinstance(a, (list, tuple)):
        try:
            if a == b:  # C speed for lists of numbers; arrays inside raise, NaN falls through
                return True
        except (ValueError, TypeError, RuntimeError):
            pass
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    if hasattr(a, "shape") and hasattr(a, "dtype"):
        import numpy as np

        a, b = _numpy(a), _numpy(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, float):
        return a == b or (a != a and b != b)
    if isinstance(a, Opaque):
        return a == b
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an object whose == misbehaves counts as changed
        return False


def _numpy(value: Any) -> Any:
    if hasattr(value, "detach"):  # a torch tensor (the kit's own, in run_local)
        value = value.detach()
        if str(value.device) == "meta":
            import numpy as np

            return np.zeros(tuple(value.shape))
        return value.cpu().numpy()
    return value


def changed(before: Any, after: Any, name: str) -> list[str]:
    """The parts of one argument that differ, e.g. ["params['Wq']", "params['bq'] (added)"]."""
    if isinstance(before, dict) and isinstance(after, dict):
        found: list[str] = []
        for k in before:
            if k not in after:
                found.append(f"{name}[{k!r}] (removed)")
            else:
                found.extend(changed(before[k], after[k], f"{name}[{k!r}]"))
        found.extend(f"{name}[{k!r}] (added)" for k in after if k not in before)
        return found
    return [] if values_equal(before, after) else [name]


def written(names: list[str], before: list[Any], after: object) -> tuple[str, ...]:
    """Every written part of the arguments, given their names and the kit's copies (`before`)
    and the worker's post-call view (`after`: a list of the same length, else all are suspect)."""
    if not isinstance(after, list) or len(after) != len(before):
        return ("the arguments (the worker did not send them back)",)
    return tuple(p for name, b, a in zip(names, before, after) for p in changed(b, a, name))
