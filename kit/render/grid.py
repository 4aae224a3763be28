"""Pictures of which keys each query sees: a small grid per matrix, one cell per (query, key),
shaded by weight, blocked cells marked, expected beside yours (the way attention-gym draws a mask).

`check` draws one under its first screen's worst failure when that failure is about which keys a
query sees (the keys with weight differ from the expected ones: causal and window bounds, inverted
or misplaced masks, padding on the wrong axis, fully blocked rows, sinks; a call that passes a
window number instead of a mask is read against the band its case names); `show` draws an
exercise's mask pattern the same way. The shades are characters, so the picture reads the same
without colour (NO_COLOR, a pipe): colour only marks the cells that differ. `--json` has none.
"""

from __future__ import annotations

import numpy as np
from rich.text import Text

from attn_kit.report.results import CheckResult

MAX_LINES = 8  # a picture's lines at most: its title, the grids' header, the query rows
MAX_QUERIES = MAX_LINES - 2
MAX_KEYS = 12
NONE = 1e-9  # a weight at most this is no weight: the key is not seen
SHADES = ((0.7, "█"), (0.4, "▓"), (0.15, "▒"), (NONE, "░"))
LEGEND = "█ most weight … ░ least · none"
MASK_LEGEND = "█ allowed · blocked"


def glyph(value: float) -> str:
    """One cell: its shade by weight (a True of a mask is █), · for no weight, ? for NaN or inf."""
    if not np.isfinite(value):
        return "?"
    for floor, shade in SHADES:
        if abs(value) > floor:
            return shade
    return "·"


def seen(matrix: np.ndarray) -> np.ndarray:
    """The cells a query sees: any weight, or a NaN or inf (which is never none)."""
    with np.errstate(invalid="ignore"):
        return ~(np.abs(matrix) <= NONE)


def _parts(value, shape: tuple[int, ...]) -> list:
    """The arrays of `value` (itself, or the parts of a tuple it returns) that have `shape`, with
    None in place of the others, so that the expected and your parts line up."""
    items = list(value) if isinstance(value, (tuple, list)) and _ragged(value) else [value]
    out = []
    for item in items:
        arr: np.ndarray | None = None
        try:
            raw = np.asarray(item)
            arr = raw.astype(float) if raw.dtype.kind in "biuf" else None
        except (TypeError, ValueError, RuntimeError):
            arr = None
        out.append((arr, raw.dtype == bool) if arr is not None and arr.shape == shape else None)
    return out


def _ragged(value) -> bool:
    """A tuple of differently shaped parts (an output and its weights), not one nested array."""
    try:
        np.asarray(value, dtype=float)
    except (TypeError, ValueError, RuntimeError):
        return True
    return isinstance(value, tuple)


def matrices(result: CheckResult) -> tuple[np.ndarray, np.ndarray, int, int, str] | None:
    """(expected, yours, worst query, worst key, where) for the matrix holding the worst entry of
    the check's mismatch, when that failure is about which keys a query sees: a mask the code
    returned differs, or weights differ in which keys have any and yours give weight to a key the
    call's mask blocks. Else None."""
    m, call = result.mismatch, result.failing_call
    if m is None or call is None or call.expected is None or not m.shape or len(m.index) != len(m.shape):
        return None
    pairs = [(e, y) for e, y in zip(_parts(call.expected, m.shape), _parts(call.outcome.value, m.shape)) if e is not None and y is not None]
    if not pairs:
        return None
    # the part whose difference at the worst entry is the one the mismatch reports
    (expected, is_mask), (yours, _) = min(
        pairs, key=lambda p: abs(abs(float(p[0][0][m.index]) - float(p[1][0][m.index])) - m.max_abs) if m.max_abs == m.max_abs else 0
    )
    blocked = None if is_mask else _blocked(call, m.shape)
    band = blocked is None and not is_mask
    if band:
        blocked = _band(result.case, m.shape)
    outer = tuple(m.index[:-2])
    if expected.ndim == 1:
        expected, yours, query = expected[None, :], yours[None, :], 0
        blocked = None if blocked is None else blocked[None, :]
    else:
        expected, yours, query = expected[outer], yours[outer], m.index[-2]
        blocked = None if blocked is None else blocked[outer]
    finite = expected[np.isfinite(expected)]
    weights = finite.size == expected.size and finite.min() >= -NONE and finite.max() <= 1 + 1e-6
    if not weights or not (seen(expected) != seen(yours)).any():
        return None  # not weights, or the same keys seen with other weights (scaling, projections)
    if not is_mask and (blocked is None or not _about_keys(blocked, expected, yours, band)):
        return None
    where = m.row_label.rsplit(", query", 1)[0] if ", query" in m.row_label else ""
    return expected, yours, int(query), int(m.index[-1]), where


def _about_keys(blocked: np.ndarray, expected: np.ndarray, yours: np.ndarray, band: bool) -> bool:
    """Whether weights that see other keys than expected do so because of which keys the query may
    see: yours weigh a key the mask blocks, or (a window's band, whose weights come from one-hot
    values and never underflow) none at all on a key it allows. Otherwise another mistake (heads,
    projections, at scores large enough to underflow) moved the weights."""
    if (blocked & seen(yours)).any():
        return True
    return band and bool((~blocked & seen(expected) & ~seen(yours)).any())


def _blocked(call, shape: tuple[int, ...]) -> np.ndarray | None:
    """Where the call's mask (a boolean argument, True = allowed) blocks a key, broadcast to the
    weights' `shape` (a B×T×T mask gains the head axis of B×H×T×T weights); None without one."""
    for value in [*call.args, *call.kwargs.values()]:
        try:
            allowed = np.asarray(value)
        except (TypeError, ValueError, RuntimeError):
            continue
        if allowed.dtype != bool or not allowed.ndim:
            continue
        if allowed.ndim == len(shape) - 1 and allowed.ndim >= 3:
            allowed = allowed[:, None]
        try:
            return ~np.broadcast_to(allowed, shape)
        except ValueError:
            continue
    return None


def _band(case: dict, shape: tuple[int, ...]) -> np.ndarray | None:
    """Where a sliding window blocks a key, for a call that passes a window number rather than a
    mask: the check's case names it (`window`, and `sinks`, the first keys every query also sees),
    and query i sees keys i - window < j <= i. Broadcast to the weights' `shape`; None without one."""
    window, sinks = case.get("window"), case.get("sinks", 0)
    if not isinstance(window, int) or isinstance(window, bool) or not isinstance(sinks, int) or len(shape) < 2:
        return None
    i, j = np.indices(shape[-2:])
    allowed = (j <= i) & ((j > i - window) | (j < sinks))
    return ~np.broadcast_to(allowed, shape)


def _window(size: int, centre: int, most: int) -> range:
    start = min(max(0, centre - most // 2), max(0, size - most))
    return range(start, min(size, start + most))


def picture(result: CheckResult, width: int = 80) -> list[Text] | None:
    """The worst failing matrix of `result`, expected beside yours, in at most MAX_LINES lines of
    `width` columns; None when the failure is not about which keys a query sees."""
    found = matrices(result)
    if found is None:
        return None
    expected, yours, query, key, where = found
    return grids(expected, yours, where, query, key, width)


def grids(
    expected: np.ndarray,
    yours: np.ndarray | None,
    where: str = "",
    query: int = 0,
    key: int = 0,
    width: int = 80,
    names: tuple[str, str] = ("expected", "yours"),
    compare: bool = True,
    legend: str = LEGEND,
) -> list[Text]:
    """`expected` (and `yours` beside it, if given) as grids of at most MAX_QUERIES rows and
    MAX_KEYS columns around (query, key), headed by `names`; when `compare`, rows where the keys
    seen differ end in ← and the cells that differ are coloured."""
    rows = _window(expected.shape[0], query, MAX_QUERIES)
    cols = _window(expected.shape[1], key, MAX_KEYS)
    label = max(len(f"q{i}") for i in rows)
    span = max(2 * len(cols) - 1, *(len(n) for n in names))  # a grid's columns, under its heading
    left = "…" if cols.start else " "
    right = "…" if cols.stop < expected.shape[1] else " "
    title = "which keys each query sees" + (f" ({where})" if where else "") + ":"
    head = Text(f"  {'':{label}} {left}")
    head += Text(f"{names[0]:<{span}}", style="muted")
    if yours is not None:
        head += Text(f"{right}   {left}") + Text(f"{names[1]:<{span}}", style="muted")
    if head.cell_len + 3 + len(legend) <= width:
        head += Text(f"{right}   {legend}", style="muted")
    lines = [Text(f"  {title}", style="label"), head]
    for i in rows:
        differs = (
            compare
            and yours is not None
            and bool((seen(expected[i, cols.start : cols.stop]) != seen(yours[i, cols.start : cols.stop])).any())
        )
        line = Text(f"  {f'q{i}':<{label}} {left}")
        line += _cells(expected[i], cols, None, span)
        if yours is not None:
            line += Text(f"{right}   {left}") + _cells(yours[i], cols, expected[i] if compare else None, span)
            line += Text(f"{right}  ←" if differs else right, style="actual" if differs else "")
        lines.append(line)
    return lines


def _cells(row: np.ndarray, cols: range, expected: np.ndarray | None, span: int) -> Text:
    """A row's cells; against `expected`, a cell seen where it should not be (or not seen where it
    should) is styled as yours-and-wrong, so colour points at it too."""
    text = Text()
    for n, j in enumerate(cols):
        mark = glyph(float(row[j]))
        wrong = expected is not None and bool(seen(np.asarray(row[j])) != seen(np.asarray(expected[j])))
        text += Text(mark, style="actual" if wrong else "expected" if mark != "·" else "muted")
        if n < len(cols) - 1:
            text += Text(" ")
    return text + Text(" " * (span - text.cell_len))


# --- an exercise's mask patterns (`show`) ----------------------------------------------------------

PATTERNS = {  # catalog.MASK_KINDS: allowed[i][j] for `size` tokens and the pattern's parameter
    "causal": lambda i, j, param: j <= i,
    "window": lambda i, j, param: (i - param < j) & (j <= i),
    "padding": lambda i, j, param: j < param,
}


def mask_pattern(kind: str, size: int, param: int = 0) -> np.ndarray:
    i, j = np.indices((size, size))
    return np.asarray(PATTERNS[kind](i, j, param), dtype=float)


def mask_pictures(masks, width: int = 80) -> list[Text]:
    """An exercise's [[masks]], two side by side, each pair in at most MAX_LINES lines."""
    lines: list[Text] = []
    for n in range(0, len(masks), 2):
        pair = masks[n : n + 2]
        first = mask_pattern(pair[0].kind, pair[0].size, pair[0].param)
        second = mask_pattern(pair[1].kind, pair[1].size, pair[1].param) if len(pair) > 1 else None
        if second is not None and second.shape != first.shape:
            lines += mask_pictures([pair[0]], width) + mask_pictures([pair[1]], width)
            continue
        names = (pair[0].label, pair[1].label if len(pair) > 1 else "")
        lines += grids(first, second, width=width, names=names, compare=False, legend=MASK_LEGEND)
    return lines
