"""Follow the candidate's own values to where they first go wrong (the first step of --locate).

The smallest failing call of the exercise's traced function is run once more in the sandbox under
the values harness (runtime/trace_harness.py), which sends back, per executed line of the
candidate's file, the array-like values that line bound: data only, within the wire's reply
bounds. Here, in the kit's process and only after the worker has answered, the reference's named
stages (checks/stages.py) are computed from the same arguments, and each recorded value is
matched to them by shape and value, allowing transposes, head layouts and per-head or per-row
slices. A stage is *good* when some recorded value equals it, or some stage computed from it
does. The divergence is the first stage, in data-flow order, that is not good while the stages it
is computed from are: the line that recorded its wrong value is where the mistake shows, and a
fitted relation (a constant factor, entries blocked or allowed wrongly, a transpose, a bias)
says how it is wrong. With the candidate's wrong value substituted for that stage, the stages
after it are recomputed and the search goes on, so several mistakes are reported in the order
the data meets them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attn_kit.base import wire
from attn_kit.base.errors import LoadError
from attn_kit.base.records import CallStatus
from attn_kit.checks import stages as stage_table
from attn_kit.report.results import FAILED, Call, Report
from attn_kit.sandbox.session import Sandbox

HARNESS = "attn_kit.runtime.trace_harness:values"
MAX_DIVERGENCES = 3
MAX_CALLS = 4  # failing calls traced (the smallest may not tell stages apart: hd = 1, one head)
NEAR = 0.5  # a value of a stage's shape, with no named difference, is taken for it when this close (relative)
BLOCKED = -1e4  # a score at or below this counts as blocked (-1e9 fills, -inf)


@dataclass(frozen=True)
class Record:
    index: int
    line: int
    name: str
    function: str
    value: Any  # float64 array
    boolean: bool = False  # the code's value held booleans (a mask)


@dataclass(frozen=True)
class Divergence:
    """Where the candidate's values first differ from a stage: the line, the name it bound there,
    the stage it should be (id and words) and how it differs (empty when no relation fits)."""

    line: int
    name: str
    function: str
    stage: str
    words: str
    relation: str

    def text(self) -> str:
        what = f"`{self.name}` should be {self.words}" if self.name != "return" else f"the value returned should be {self.words}"
        return what + (f"; {self.relation}" if self.relation else "")


@dataclass
class Trace:
    divergences: list[Divergence] = field(default_factory=list)
    matched: dict[str, int] = field(default_factory=dict)  # stage -> first line where it is right
    records: int = 0
    error: str = ""  # the traced call raised this

    def to_json(self) -> dict:
        return {
            "divergences": [
                {"line": d.line, "name": d.name, "function": d.function, "stage": d.stage, "what": d.text()} for d in self.divergences
            ],
            "matched": dict(self.matched),
            "records": self.records,
        }


# --- which call to trace --------------------------------------------------------------------------


def failing_calls(report: Report) -> list[Call]:
    """The failing calls of the traced function, smallest first (fewest argument entries; a wrong
    value before an exception), one per size."""
    fn = stage_table.traced_function(report.exercise)
    calls = [
        c
        for r in report.results
        if r.status in FAILED
        for c in ([r.failing_call] if r.failing_call else []) + list(r.calls)
        if c.fn == fn
        and not c.harness
        and c.outcome.status == CallStatus.OK
        and stage_table.context_for(report.exercise, c.args, c.kwargs) is not None
    ]
    by_size = {_entries((c.args, c.kwargs)): c for c in reversed(calls)}
    return [by_size[k] for k in sorted(by_size)]


def _entries(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return int(value.size)
    if isinstance(value, dict):
        return sum(_entries(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_entries(v) for v in value) or len(value)
    return 1


def records_from(extra: dict) -> list[Record]:
    """The harness's records, checked: anything malformed is dropped (the worker is untrusted)."""
    out = []
    for i, item in enumerate(extra.get("records") or []):
        if not isinstance(item, dict):
            continue
        line, name, fn, value = item.get("line"), item.get("name"), item.get("fn"), item.get("value")
        if (
            type(line) is int
            and isinstance(name, str)
            and isinstance(fn, str)
            and isinstance(value, np.ndarray)
            and value.dtype.kind == "f"
        ):
            # names come from the candidate's code objects, which it may rewrite: shown escaped
            name, fn = wire.visible(name[:60]), wire.visible(fn[:60])
            out.append(Record(i, line, name, fn, np.squeeze(np.asarray(value, dtype=np.float64)), item.get("bool") is True))
    return out


def follow(path: str, report: Report, timeout: float, memory: int | None, pure: bool, preload: tuple[str, ...]) -> Trace | None:
    """Trace the smallest failing call in a fresh worker, then (the worker has answered and is
    gone) compute the stages and find the divergences. None when the exercise declares no stages
    or no failing call of its traced function fits them."""
    calls = failing_calls(report)[:MAX_CALLS]
    if not calls:
        return None
    replies = []
    with Sandbox(path, timeout, memory, pure=pure, preload=preload) as sandbox:
        try:
            sandbox.start()
        except LoadError:
            return None
        for call in calls:
            outcome = sandbox.call(call.fn, call.args, call.kwargs, harness=HARNESS, echo=False)
            replies.append(outcome.extra if outcome.status == CallStatus.OK and isinstance(outcome.extra, dict) else {})
    # the worker has answered and is gone: only now are the stages computed
    traces = []
    for call, extra in zip(calls, replies):
        ctx = stage_table.context_for(report.exercise, call.args, call.kwargs)
        if ctx is not None:
            try:
                traces.append(find(ctx, records_from(extra)))
            except (ValueError, IndexError, KeyError, FloatingPointError):  # a value no view fits: no trace
                continue
            traces[-1].error = str(extra.get("error") or "")[:80]
    return merged(traces) if traces else None


def _specific(relation: str) -> int:
    """How precisely a relation names the cause: a single named cause beats two, two beat none."""
    if "(" not in relation:
        return 0
    return 1 if " or " in relation else 2


def merged(traces: list[Trace]) -> Trace:
    """One trace from several calls': every divergence once (by line and stage), in data-flow
    order, the first call's matches."""
    order = {s.id: i for i, s in enumerate(stage_table.ATTENTION)}
    seen: dict[tuple[int, str], Divergence] = {}
    for trace in traces:
        for d in trace.divergences:
            same = next((k for k in seen if k[0] == d.line), None)
            if same is None:
                seen[(d.line, d.stage)] = d
            elif _specific(d.relation) > _specific(seen[same].relation):  # a call that tells the causes apart
                del seen[same]
                seen[(d.line, d.stage)] = d
    first = traces[0]
    return Trace(
        sorted(seen.values(), key=lambda d: (order.get(d.stage, 99), d.line))[:MAX_DIVERGENCES], first.matched, first.records, first.error
    )


# --- views of a stage -----------------------------------------------------------------------------


@dataclass(frozen=True)
class View:
    stage: str
    value: Any
    order: tuple[int, ...] | None  # the axes' order, for a view of the whole stage (None for a slice)
    shape: tuple[int, ...] = ()  # the whole stage's shape in that order (before size-1 axes go)


def _orders(axes: str) -> list[tuple[int, ...]]:
    """Axis orders of a stage that are the same value in another layout: any, except that queries
    stay before keys (scores with the two swapped are a different, wrong, value)."""
    out = []
    for order in itertools.permutations(range(len(axes))):
        letters = [axes[i] for i in order]
        if "q" in letters and "k" in letters and letters.index("q") > letters.index("k"):
            continue
        out.append(order)
    return out


def views(stage: stage_table.Stage, value: Any) -> list[View]:
    """The stage whole in each allowed layout, and sliced by batch and by head (one head's value,
    one batch row's), without repeats."""
    fixable = [i for i, a in enumerate(stage.axes) if a in "bh"]
    out: dict[tuple, View] = {}
    for count in range(len(fixable) + 1):
        for fixed in itertools.combinations(fixable, count):
            rest = "".join(a for i, a in enumerate(stage.axes) if i not in fixed)
            for index in itertools.product(*(range(value.shape[i]) for i in fixed)):
                key: list[Any] = [slice(None)] * value.ndim
                for axis, at in zip(fixed, index):
                    key[axis] = at
                part = value[tuple(key)]
                for order in _orders(rest):
                    moved = part.transpose(order)
                    squeezed = np.ascontiguousarray(np.squeeze(moved))
                    seen = (squeezed.shape, squeezed.tobytes(), not fixed)
                    if seen not in out:
                        out[seen] = View(stage.id, squeezed, order if not fixed else None, moved.shape)
    return list(out.values())


@dataclass
class Shelf:
    """The views of one shape, stacked per stage so a value is compared with all of them at once."""

    views: list[View]
    stacked: dict[str, Any]  # stage -> (n views) × (entries)

    def matches(self, value: Any) -> set[str]:
        flat = value.reshape(1, -1)
        hits = set()
        with np.errstate(all="ignore"):
            for stage, stack in self.stacked.items():
                scale = np.max(np.abs(np.where(np.isfinite(stack), stack, 0.0)), axis=1, keepdims=True)
                near = np.abs(stack - flat) <= 2e-3 * np.abs(stack) + 1e-5 * (1.0 + scale)
                ok = np.where(np.isneginf(stack), flat <= BLOCKED, near & np.isfinite(flat))
                if np.any(np.all(ok, axis=1)):
                    hits.add(stage)
        return hits


def index_views(values: dict[str, Any]) -> dict[tuple[int, ...], Shelf]:
    table = stage_table.by_id()
    index: dict[tuple[int, ...], list[View]] = {}
    for stage_id, value in values.items():
        for view in views(table[stage_id], np.asarray(value, dtype=np.float64)):
            index.setdefault(view.value.shape, []).append(view)
    shelves = {}
    for shape, found in index.items():
        stages = dict.fromkeys(v.stage for v in found)
        stacked = {s: np.stack([v.value.reshape(-1) for v in found if v.stage == s]) for s in stages}
        shelves[shape] = Shelf(found, stacked)
    return shelves


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


# --- the divergence -------------------------------------------------------------------------------


def _inputs(stage: stage_table.Stage, values: dict[str, Any]) -> list[str]:
    return [stage_table.resolve(i, values) for i in stage.inputs if stage_table.resolve(i, values) in values]


def _descendants(values: dict[str, Any]) -> dict[str, set[str]]:
    below: dict[str, set[str]] = {s: set() for s in values}
    for stage in reversed(stage_table.ATTENTION):
        if stage.id not in values:
            continue
        for i in _inputs(stage, values):
            below[i] |= {stage.id} | below[stage.id]
    return below


def find(ctx: stage_table.Context, records: list[Record]) -> Trace:
    """The divergences in data-flow order (at most MAX_DIVERGENCES), and where each stage was right."""
    trace = Trace(records=len(records))
    given: dict[str, Any] = {}
    found: set[str] = set()
    for _ in range(MAX_DIVERGENCES):
        values = stage_table.compute(ctx, given)
        ctx.values = values
        index = index_views(values)
        matches = [index[r.value.shape].matches(r.value) if r.value.shape in index else set() for r in records]
        first: dict[str, int] = {}
        for i, hit in enumerate(matches):
            for s in hit:
                first.setdefault(s, i)
        if not trace.matched:
            trace.matched = {s: records[i].line for s, i in first.items()}
        step = _next(ctx, records, values, index, matches, first, found)
        if step is None:
            break
        divergence, substitute = step
        trace.divergences.append(divergence)
        found.add(divergence.stage)
        if substitute is None:
            break
        given[divergence.stage] = substitute
    return trace


def _next(ctx, records, values, index, matches, first, found) -> tuple[Divergence, Any] | None:
    """The first stage not good whose inputs are good, and the record that shows it."""
    below = _descendants(values)
    unseen: set[str] = set()  # stages no value of the code stands for: taken as right

    def good(s: str) -> bool:
        return s in first or any(d in first for d in below[s]) or s in found or s in unseen

    for stage in stage_table.ATTENTION:
        if stage.id not in values or good(stage.id) or not all(good(i) for i in _inputs(stage, values)):
            continue
        start = max((first[i] for i in _inputs(stage, values) if i in first), default=-1)
        picked = _pick(ctx, stage, records, values, index, matches, first, start)
        if picked is None:
            unseen.add(stage.id)
            continue
        return picked
    return None


def _pick(ctx, stage, records, values, index, matches, first, start) -> tuple[Divergence, Any] | None:
    """The record for a stage found wrong: one whose difference has a name, else the last value
    still equal to the stage before it, else the closest value of its shape."""
    shapes = {shape for shape, shelf in index.items() if stage.id in shelf.stacked}
    wrong = [r for r in records[start + 1 :] if not matches[r.index] and r.value.shape in shapes]
    wrong = [r for r in wrong if _plausible(stage, r)]
    after = next((s for s in stage_table.ATTENTION if s.previous == stage.id and s.id in values), None)
    for record in wrong:
        for view in index[record.value.shape].views:
            if view.stage == stage.id and (relation := relate(ctx, stage, record.value, view.value)):
                named = _onward(ctx, after, record, index) if after is not None and _plausible(after, record) else None
                source = _mask_source(ctx, records, start, record, values) if "block" in relation or "invert" in relation else None
                return source or named or (_divergence(record, stage, relation), _whole(record, view))
    previous = stage_table.resolve(stage.previous, values) if stage.previous else ""
    if previous and previous in first:
        # the last value still equal to the stage before, in the function that made it first
        # (a helper that receives it later is not where the step was left out)
        made = records[first[previous]]
        same = [r for r in records if r.function == made.function and previous in matches[r.index]]
        record = ([r for r in same if not r.name.startswith("return")] or same)[-1]
        same = values[previous].shape == values[stage.id].shape
        factor = _factor_words(ctx, values[previous], values[stage.id]) if same else ""
        relation = f"it is still {stage_table.by_id()[previous].words}" + (f": {factor}" if factor else "")
        return _divergence(record, stage, relation), values[previous]
    whole = [(r, v) for r in wrong for v in index[r.value.shape].views if v.stage == stage.id and v.order is not None]
    whole = [(r, v) for r, v in whole if _distance(r.value, v.value) < NEAR and not _is_input(ctx, r.value)]
    if whole:
        record, view = min(whole, key=lambda rv: _distance(rv[0].value, rv[1].value))
        return _divergence(record, stage, _difference(record.value, view.value)), _whole(record, view)
    return None


def _plausible(stage: stage_table.Stage, record: Record) -> bool:
    """Whether a value of the stage's shape can be a try at it: a mask is booleans and booleans
    are a mask; only masked scores hold blocked fills; weights lie between 0 and 1 (or are NaN)."""
    if record.boolean != (stage.id == "allowed"):
        return False
    if stage.id != "masked" and np.any(record.value <= BLOCKED):
        return False
    if stage.id == "masked" and not np.any(record.value <= BLOCKED):
        return False  # scores before the mask, not a wrong mask
    value = record.value[np.isfinite(record.value)]
    return stage.id != "weights" or bool(np.all((value >= -1e-6) & (value <= 1 + 1e-6)))


def _is_input(ctx, value: Any) -> bool:
    return any(v.size == value.size and np.allclose(np.squeeze(v), value) for v in (np.asarray(ctx.x), np.asarray(ctx.kv)) if v.shape)


def _mask_source(ctx, records: list[Record], start: int, shown: Record, values: dict[str, Any]) -> tuple[Divergence, Any] | None:
    """For scores or weights blocked in the wrong places: the mask the code built and used there
    (booleans of the same shape, blocked exactly where the value is), when it is not the call's
    mask: the mistake is where that mask was made."""
    blocked = shown.value <= BLOCKED if np.any(shown.value <= BLOCKED) else shown.value == 0.0
    expected = values.get("allowed")
    stage = stage_table.by_id()["allowed"]
    for record in reversed(records[start + 1 : shown.index]):
        value = _spread(record.value, blocked.shape) if record.boolean else None
        if value is None or not np.array_equal(value == 0.0, blocked):
            continue
        if expected is not None and expected.size == record.value.size:
            relation = _blocked(ctx, stage, record.value, np.squeeze(expected).reshape(record.value.shape))
            return _divergence(record, stage, relation or "it is not the call's mask"), None
    return None


def _spread(value: Any, shape: tuple[int, ...]) -> Any:
    """`value` broadcast to `shape`, one axis (a mask shared by the heads) inserted if need be."""
    if value.shape == shape:
        return value
    for axis in range(len(shape)):
        if shape[:axis] + shape[axis + 1 :] == value.shape:
            return np.broadcast_to(np.expand_dims(value, axis), shape)
    return None


def _onward(ctx, stage, record: Record, index) -> tuple[Divergence, Any] | None:
    """The record named as the stage after the one it was picked for, when it relates to that one
    too (scores divided by the wrong width are wrong *scaled* scores, not wrong raw ones)."""
    for view in index[record.value.shape].views if record.value.shape in index else ():
        if view.stage == stage.id and (relation := relate(ctx, stage, record.value, view.value)):
            return _divergence(record, stage, relation), _whole(record, view)
    return None


def _divergence(record: Record, stage: stage_table.Stage, relation: str) -> Divergence:
    return Divergence(record.line, record.name, record.function, stage.id, stage.words, relation)


def _whole(record: Record, view: View) -> Any:
    """The candidate's value in the stage's own layout, when the record is the whole stage."""
    if view.order is None:
        return None
    return np.transpose(record.value.reshape(view.shape), np.argsort(view.order))


def _distance(actual: Any, expected: Any) -> float:
    finite = np.isfinite(expected) & np.isfinite(actual)
    if not np.any(finite):
        return math.inf
    return float(np.linalg.norm(actual[finite] - expected[finite]) / (np.linalg.norm(expected[finite]) + 1e-12))


def _difference(actual: Any, expected: Any) -> str:
    finite = np.isfinite(expected) & np.isfinite(actual)
    bad = int(np.sum(~np.isfinite(actual) & np.isfinite(expected)))
    if bad:
        return f"{bad} of its {actual.size} entries are NaN or infinite where the stage's are finite"
    wrong = int(np.sum(~np.isclose(actual[finite], expected[finite], rtol=2e-3, atol=1e-5)))
    worst = float(np.max(np.abs(actual[finite] - expected[finite]))) if np.any(finite) else math.inf
    return f"{wrong} of its {actual.size} entries differ (by up to {worst:.3g})"


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


def _factor_words(ctx, actual: Any, expected: Any) -> str:
    c = _factor(actual, expected)
    if c is None:
        return ""
    size = f"{c:.3g}× too large" if c > 1 else f"{1 / c:.3g}× too small"
    fits = list(dict.fromkeys(words for value, words in _named_factors(ctx) if abs(c - value) < 1e-3 * max(1.0, value)))
    named = " or ".join(fits)  # two explanations may fit (hd = H): this call cannot tell them apart
    return f"it is {size}" + (f" ({named})" if named else "")


def _scaled(ctx, stage, actual, expected) -> str:
    return _factor_words(ctx, actual, expected)


def _blocked(ctx, stage, actual, expected) -> str:
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
    return _blocked(ctx, stage, actual, expected)


def _transposed(ctx, stage, actual, expected) -> str:
    if actual.ndim < 2 or actual.shape[-1] != actual.shape[-2] or not close(np.swapaxes(actual, -1, -2), expected):
        return ""
    return "it holds them transposed (queries and keys swapped)"


def _other_axis(ctx, stage, actual, expected) -> str:
    if stage.id != "weights" or actual.ndim < 2 or not np.allclose(actual.sum(axis=-2), 1.0, atol=1e-4):
        return ""
    return "each column sums to 1, not each row: the softmax runs over the queries instead of the keys"


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


RELATIONS = (_variant, _allowed, _blocked, _scaled, _transposed, _other_axis, _offset, _shuffled, _not_finite)
