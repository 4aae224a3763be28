"""Stage matching: the candidate's recorded values against the reference's named stages
(checks/stages.py), by shape and value, allowing transposes, head layouts and per-head or per-row
slices, in the kit's process only. The divergence is the first stage, in data-flow order, that
no value equals while the stages it is computed from are right; the stages after it are then
recomputed from the candidate's wrong value and the search goes on (`find`)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from attn_kit.checks import stages as stage_table
from attn_kit.grading.locate.relations import BLOCKED, UNIFORM, factor_words, mask_words, relate

MAX_DIVERGENCES = 3


NEAR = 0.5  # a value of a stage's shape, with no named difference, is taken for it when this close (relative)


@dataclass(frozen=True)
class Record:
    index: int
    line: int
    name: str
    function: str
    value: Any  # float64 array
    boolean: bool = False  # the code's value held booleans (a mask)
    frame: int = 0  # which call of its function made it (0: not known)
    caller: int = 0  # the line of the file that made that call (0: called from outside the file)


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
    record: int = -1  # the index of the record that shows it, in its call's records (-1: none)
    called_from: int = 0  # the line that called the function holding `line` (0: not known)

    def text(self) -> str:
        returned = self.name.startswith("return")
        what = f"the value returned should be {self.words}" if returned else f"`{self.name}` should be {self.words}"
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


def views(stage: stage_table.Stage, value: Any, name: str = "") -> list[View]:
    """The stage whole in each allowed layout, and sliced by batch and by head (one head's value,
    one batch row's), without repeats; under `name` when given (one part of a stage over parts)."""
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
                        out[seen] = View(name or stage.id, squeezed, order if not fixed else None, moved.shape)
    for view in _batch_heads(stage, value, name or stage.id):
        out.setdefault((view.value.shape, view.value.tobytes(), False), view)
    return list(out.values())


def _batch_heads(stage: stage_table.Stage, value: Any, name: str) -> list[View]:
    """The batch and head axes merged into one, batch outer (`(b h) t d`, as einops and
    `view(B * H, T, d)` lay them out), the other axes in each allowed order."""
    if not stage.axes.startswith("bh") or value.ndim < 3:
        return []
    merged = value.reshape(value.shape[0] * value.shape[1], *value.shape[2:])
    out = []
    for order in _orders(stage.axes[2:]):
        moved = np.moveaxis(merged, range(1, merged.ndim), [1 + i for i in order]) if order else merged
        out.append(View(name, np.ascontiguousarray(np.squeeze(moved)), None, moved.shape))
    return out


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


def parts(stage_id: str, value: Any) -> list[tuple[str, Any]]:
    """A stage's value under its id; for a stage over parts (a list: the running max after each
    tile of keys, the keys gathered for each sequence), each part: the last under the stage's id
    (the value the stages after it read), the others as `id#i` (a value of the code equal to one
    of them is right, but does not make the stage right)."""
    if not isinstance(value, list):
        return [(stage_id, value)]
    return [(stage_id if i == len(value) - 1 else f"{stage_id}#{i}", part) for i, part in enumerate(value)]


def last(value: Any) -> Any:
    """The value a stage over parts ends with (the stage itself otherwise)."""
    return value[-1] if isinstance(value, list) else value


def index_views(values: dict[str, Any], table: tuple = ()) -> dict[tuple[int, ...], Shelf]:
    table_ids = stage_table.by_id(table)
    index: dict[tuple[int, ...], list[View]] = {}
    for stage_id, value in values.items():
        for name, part in parts(stage_id, value):
            for view in views(table_ids[stage_id], np.asarray(part, dtype=np.float64), name):
                index.setdefault(view.value.shape, []).append(view)
    shelves = {}
    for shape, found in index.items():
        stages = dict.fromkeys(v.stage for v in found)
        stacked = {s: np.stack([v.value.reshape(-1) for v in found if v.stage == s]) for s in stages}
        shelves[shape] = Shelf(found, stacked)
    return shelves


# --- the divergence -------------------------------------------------------------------------------


def _inputs(stage: stage_table.Stage, values: dict[str, Any], table: tuple = ()) -> list[str]:
    return [stage_table.resolve(i, values, table) for i in stage.inputs if stage_table.resolve(i, values, table) in values]


def _descendants(table: tuple, values: dict[str, Any]) -> dict[str, set[str]]:
    below: dict[str, set[str]] = {s: set() for s in values}
    for stage in reversed(table):
        if stage.id not in values or stage.hides:
            continue
        for i in _inputs(stage, values, table):
            below[i] |= {stage.id} | below[stage.id]
    return below


def find(ctx: stage_table.Context, records: list[Record]) -> Trace:
    """The divergences in data-flow order (at most MAX_DIVERGENCES), and where each stage was right."""
    trace = Trace(records=len(records))
    given: dict[str, Any] = {}
    found: set[str] = set()
    for _ in range(2 * MAX_DIVERGENCES):  # one mistake may show on several stages' values, on one line
        if len({d.line for d in trace.divergences}) >= MAX_DIVERGENCES:
            break
        values = stage_table.compute(ctx, given)
        ctx.values = values
        index = index_views(values, ctx.table)
        matches = [index[r.value.shape].matches(r.value) if r.value.shape in index else set() for r in records]
        first: dict[str, int] = {}
        for i, hit in enumerate(matches):
            for s in hit:
                first.setdefault(s, i)
        if not trace.matched:
            trace.matched = {s: records[i].line for s, i in first.items()}
            trace.divergences.extend(_whole_scores(ctx, records, matches, values))
        step = _next(ctx, records, values, index, matches, first, found)
        if step is None:
            break
        divergence, substitute = step
        if isinstance(values[divergence.stage], list) and not isinstance(substitute, list):
            substitute = _site_parts(records, divergence, values[divergence.stage])
        trace.divergences.append(divergence)
        found.add(divergence.stage)
        if substitute is None:
            break
        given[divergence.stage] = substitute
    return trace


CHUNK = 16  # an exercise that must not hold every score may still hold this many queries' at once
SCORES = {"raw", "scaled", "biased", "masked", "weights"}


def _whole_scores(ctx, records: list[Record], matches: list[set[str]], values: dict[str, Any]) -> list[Divergence]:
    """For an exercise whose point is never to hold the T×S scores (ctx.whole_scores names the
    bug): the first value that holds all of a head's scores at once, right as they may be."""
    if not ctx.whole_scores or "raw" not in values:
        return []
    T, S = values["raw"].shape[-2:]
    if T <= CHUNK:
        return []
    for r in records:
        if r.value.shape[-2:] == (T, S) and matches[r.index] & SCORES:
            relation = f"it holds all {T}×{S} scores of a head at once ({ctx.whole_scores}): memory grows like T², not T·window"
            return [Divergence(r.line, r.name, r.function, "raw", "a chunk of the scores (a few queries against their keys)", relation)]
    return []


def _site_parts(records: list[Record], divergence: Divergence, expected: list) -> list | None:
    """The code's own values of a stage over parts: every value bound where the divergence is (the
    same line, name and function: once per tile of a loop), when there is one per part."""
    same = [r.value for r in records if (r.line, r.name, r.function) == (divergence.line, divergence.name, divergence.function)]
    if len(same) != len(expected) or any(a.size != np.size(e) for a, e in zip(same, expected)):
        return None
    return [a.reshape(np.shape(e)) for a, e in zip(same, expected)]


def _next(ctx, records, values, index, matches, first, found) -> tuple[Divergence, Any] | None:
    """The first stage not good whose inputs are good, and the record that shows it."""
    table = stage_table.table_of(ctx)
    below = _descendants(table, values)
    unseen: set[str] = set()  # stages no value of the code stands for: taken as right

    def good(s: str) -> bool:
        return s in first or any(d in first for d in below[s]) or s in found or s in unseen

    for stage in table:
        inputs = _inputs(stage, values, ctx.table)
        if stage.id not in values or good(stage.id) or not all(good(i) for i in inputs):
            continue
        start = max((first[i] for i in inputs if i in first), default=-1)
        picked = _pick(ctx, stage, records, values, index, matches, first, start)
        if picked is None:
            unseen.add(stage.id)
            continue
        taken = found | {s for f in found if f in below for s in below[f]}  # the code's own values now
        return _called_wrongly(records, [m - taken for m in matches], picked[0]), picked[1]
    return None


def _called_wrongly(records: list[Record], matches: list[set[str]], divergence: Divergence) -> Divergence:
    """A divergence inside a helper called from several lines (`project(x, "q")`, `project(x,
    "k")`), on a line that gave a right value, or this very value, for another of those calls:
    the helper is right and the call asked it for the wrong thing (`project(x, "q")` for the
    keys). The divergence moves to the calling line."""
    if divergence.record < 0 or not records[divergence.record].caller or not np.any(records[divergence.record].value):
        return divergence  # (zeros where a term should be: the helper that returned them is wrong)
    if "bias" in divergence.relation:
        return divergence  # what the helper adds is its own doing (a call without a bias may be right)
    shown = records[divergence.record]
    here = [r for r in records if r.function == shown.function and r.line == shown.line and r.frame]
    others = [r for r in here if r.frame != shown.frame and r.caller and r.caller != shown.caller]
    if not any(matches[r.index] or (r.value.shape == shown.value.shape and np.array_equal(r.value, shown.value)) for r in others):
        return divergence
    named = next((r for r in records[shown.index :] if r.line == shown.caller and r.function != shown.function), None)
    where = f"{divergence.relation}: the call on line {shown.caller} asks `{shown.function.rsplit('.', 1)[-1]}` for it"
    return replace(
        divergence,
        line=shown.caller,
        name=named.name if named else divergence.name,
        function=named.function if named else divergence.function,
        relation=where,
        called_from=named.caller if named else 0,
    )


def _pick(ctx, stage, records, values, index, matches, first, start) -> tuple[Divergence, Any] | None:
    """The record for a stage found wrong: one whose difference has a name, else the last value
    still equal to the stage before it, else the closest value of its shape."""
    shapes = {shape for shape, shelf in index.items() if stage.id in shelf.stacked}
    table = stage_table.table_of(ctx)
    kin = _siblings(stage.id)
    wrong = [r for r in records[start + 1 :] if not (matches[r.index] - kin) and r.value.shape in shapes]
    wrong = [r for r in wrong if _plausible(stage, r) and _again(ctx, records, matches, first, r)]
    after = next(
        (s for s in table if s.previous and stage_table.resolve(s.previous, values, ctx.table) == stage.id and s.id in values), None
    )
    for record in wrong:
        if (hit := _related(ctx, stage, record, index)) is None:
            continue
        record, (relation, view) = _updated(ctx, stage, wrong, record, index) or (record, hit)
        if relation.startswith(UNIFORM):
            return _fill_site(records, matches, record, stage, relation), _whole(record, view)
        named = _onward(ctx, after, record, index) if after is not None and _plausible(after, record) else None
        source = _mask_source(ctx, records, start, record, values) if "block" in relation or "invert" in relation else None
        return (
            source
            or named
            or (_divergence(_without(records, record) if MISSING in relation else record, stage, relation), _whole(record, view))
        )
    if isinstance(values[stage.id], list) and (site := _part_site(ctx, stage, records, matches, wrong, values[stage.id])):
        return site
    previous = stage_table.resolve(stage.previous, values, ctx.table) if stage.previous else ""
    if previous and previous in first and _still(ctx, stage, previous, values, records[start + 1 :]):
        # the last value still equal to the stage before, in the function that made it first
        # (a helper that receives it later is not where the step was left out), returned or not
        made = records[first[previous]]
        same = [r for r in records if r.function == made.function and previous in matches[r.index]]
        record = same[-1]
        before, now = last(values[previous]), last(values[stage.id])
        factor = factor_words(ctx, before, now) if before.shape == now.shape else ""
        relation = f"it is still {stage_table.by_id(ctx.table)[previous].words}" + (f": {factor}" if factor else "")
        return _divergence(record, stage, relation), values[previous]
    if isinstance(values[stage.id], list) and start >= 0 and (made := _made_after(stage, records[start], wrong, values[stage.id][-1])):
        return made
    whole = [(r, v) for r in wrong for v in index[r.value.shape].views if v.stage == stage.id and v.order is not None]
    whole = [(r, v) for r, v in whole if _distance(r.value, v.value) < NEAR and not _is_input(ctx, r.value)]
    if whole:
        record, view = min(whole, key=lambda rv: _distance(rv[0].value, rv[1].value))
        return _divergence(record, stage, _difference(record.value, view.value)), _whole(record, view)
    if isinstance(values[stage.id], list):
        return None  # a stage over parts: each part's shape is its own
    return _reshaped(stage, records[start + 1 :], matches, values[stage.id], shapes)


def _reshaped(stage, later: list[Record], matches: list[set[str]], expected: Any, shapes: set) -> tuple[Divergence, None] | None:
    """A value of no layout of the stage that holds its numbers (heads concatenated along the
    time axis): the right numbers in a wrong shape; nothing after it can be compared."""
    if not np.all(np.isfinite(expected)):
        return None
    ordered = np.sort(expected, axis=None)
    for r in later:
        if r.value.size == expected.size and r.value.shape not in shapes and not matches[r.index] and not r.boolean:
            if np.allclose(np.sort(r.value, axis=None), ordered, rtol=2e-3, atol=1e-6):
                shape = "×".join(map(str, r.value.shape))
                want = "×".join(map(str, expected.shape))
                return _divergence(r, stage, f"it holds the right numbers in a wrong shape ({shape}, not {want})"), None
    return None


def _part_site(
    ctx, stage, records: list[Record], matches: list[set[str]], wrong: list[Record], expected: list
) -> tuple[Divergence, Any] | None:
    """For a stage over parts (tiles of keys, sequences): a wrong value bound where the same line
    bound this stage's earlier parts right is the code's value of it; the mistake shows from the
    part it goes wrong on (a rescale that only matters once the max has moved)."""
    for record in wrong:
        right = [r for r in records[: record.index] if (r.line, r.name, r.function) == (record.line, record.name, record.function)]
        done = sum(any(m.startswith(stage.id + "#") for m in matches[r.index]) for r in right)
        if done and record.value.size == np.size(expected[-1]) and not _rows_of_input(ctx, record.value):
            part = np.reshape(expected[-1], record.value.shape)
            noun = ctx.extra.get("parts", "parts")  # what the parts are: tiles, sequences
            relation = f"it is right for the first {done} of {len(expected)} {noun}, then wrong: {_difference(record.value, part)}"
            return _divergence(record, stage, relation), None
    return None


def _made_after(stage, source: Record, wrong: list[Record], expected: Any) -> tuple[Divergence, Any] | None:
    """For a stage over parts whose inputs' last parts are right: the first value of its last
    part's shape made after them in the same function is the code's try at it (no named
    difference needed: what it is made from is right)."""
    for record in wrong:
        if record.function == source.function and record.value.size == np.size(expected):
            return _divergence(record, stage, _difference(record.value, np.reshape(expected, record.value.shape))), None
    return None


def _rows_of_input(ctx, value: Any) -> bool:
    """The value is a block of rows of an argument (q[a:b] handed to a helper): what the call
    passed, not what the code computed, so it stands for no stage over parts."""
    for given in ctx.given or ():
        rows = np.reshape(np.asarray(given), (np.shape(given)[0], -1))
        if value.size % rows.shape[1]:
            continue
        block = value.reshape(-1, rows.shape[1])
        starts = np.flatnonzero(np.all(rows == block[0], axis=1))
        if any(start + len(block) <= len(rows) and np.array_equal(rows[start : start + len(block)], block) for start in starts):
            return True
    return False


def _siblings(stage_id: str) -> set[str]:
    """The stages of the other two of the queries, keys and values (q_proj, q_heads, v_proj, ...
    for k_proj): a value equal to one of them may be a wrong try at this one (Wq used for the
    keys)."""
    head = stage_id.partition("_")[0]
    if head not in ("q", "k", "v"):
        return set()
    return {s.id for s in stage_table.ATTENTION if s.id[0] in "qkv" and s.id[1] == "_" and s.id[0] != head}


def _again(ctx, records: list[Record], matches: list[set[str]], first: dict[str, int], record: Record) -> bool:
    """A value that is right for another stage (the queries) is a try at this one (the keys)
    only when it is made again, by another call or under another name, after that stage's own
    (neither being an argument as received)."""
    if matches[record.index] and _argument(ctx, record):
        return False
    for s in matches[record.index]:
        own = next((r for r in records[: record.index] if s in matches[r.index] and not _argument(ctx, r)), None)
        if own is None or (record.frame and record.frame == own.frame) or (not record.frame and record.name == own.name):
            return False
    # nor when it is that value handed back to the line that asked for it (`q = project(x, "q")`)
    return not any(r.caller == record.line and matches[r.index] & matches[record.index] for r in records[: record.index])


def _argument(ctx, record: Record) -> bool:
    """An argument as its call received it (recorded on the calling line), or a value equal to
    the call's input (a projection by the identity cannot be told from its input)."""
    return bool(record.caller and record.line == record.caller) or _is_input(ctx, record.value)


def _related(ctx, stage: stage_table.Stage, record: Record, index) -> tuple[str, View] | None:
    """A named difference between the record and some layout of the stage, and that layout."""
    for view in index[record.value.shape].views:
        if view.stage == stage.id and (relation := relate(ctx, stage, record.value, view.value)):
            return relation, view
    return None


def _updated(ctx, stage: stage_table.Stage, wrong: list[Record], record: Record, index) -> tuple[Record, tuple[str, View]] | None:
    """The same call rebinding the name on a later line to another wrong try at the same stage
    (`out = x @ W`, then `out = out - b`): the first value was a step on the way, the last is the
    try."""
    if ctx.table:
        return None  # the exercises of stages_own.py update their arrays in place, step by step
    later = [r for r in wrong if record.frame and r.frame == record.frame and r.name == record.name and r.line > record.line]
    for r in reversed(later):
        if (hit := _related(ctx, stage, r, index)) is not None:
            return r, hit
    return None


def _still(ctx, stage: stage_table.Stage, previous: str, values: dict[str, Any], later: list[Record]) -> bool:
    """Whether the code went on with the stage before in place of this one (a step left out):
    the stages computed from this one, taken as the one before, equal a later value of the code
    (the weights a softmax gives the unscaled scores); the last stage, and a stage over parts
    (tiles, sequences), need no such proof."""
    below = _descendants(stage_table.table_of(ctx), values)[stage.id]
    if not below or isinstance(values[previous], list):
        return True
    given = {k: v for k, v in values.items() if k not in below}
    given[stage.id] = values[previous]
    try:
        onward = stage_table.compute(ctx, given)
        index = index_views({s: onward[s] for s in below if s in onward}, ctx.table)
    except (ValueError, IndexError, KeyError, FloatingPointError):
        return False
    return any(r.value.shape in index and index[r.value.shape].matches(r.value) for r in later)


MISSING = "without the bias"  # a term left out: wrong where the value is handed on without it, not where it was made


def _without(records: list[Record], record: Record) -> Record:
    """Where a term left out is wrong: a helper called on the value's line that returned zeros in
    its place (`self.bias("bq")` returning np.zeros), else where the value is handed on."""
    zero = next(
        (
            r
            for r in records[: record.index]
            if r.caller == record.line and r.name == "return" and r.value.ndim == 1 and r.value.size > 1 and not np.any(r.value)
        ),
        None,
    )
    return zero or _handed_on(records, record)


def _handed_on(records: list[Record], record: Record) -> Record:
    """The last record of the same function holding the same wrong value under the same name, or
    returning it: `y = x @ W` then `return y` where `return y + b` was meant is wrong on the return."""
    same = [
        r
        for r in records[record.index + 1 :]
        if r.function == record.function
        and r.name in (record.name, "return")
        and r.value.shape == record.value.shape
        and np.array_equal(r.value, record.value)
    ]
    return same[-1] if same else record


def _fill_site(records: list[Record], matches: list[set[str]], shown: Record, stage: stage_table.Stage, relation: str) -> Divergence:
    """Uniform weights on a row with every key blocked: the mistake is where the blocked entries
    were filled with a finite value, the last masked scores before the weights (else the weights)."""
    filled = [r for r in records[: shown.index] if "masked" in matches[r.index] and np.any(r.value <= BLOCKED)]
    if not filled:
        return _divergence(shown, stage, relation)
    record = filled[-1]
    fill = float(np.min(record.value))
    width = shown.value.shape[-1] if shown.value.ndim else 1
    said = (
        f"a query with no allowed key has every score at the finite fill {fill:.3g}, so its weights come out"
        f" uniform (1/{width} on every key) instead of 0 (blocked-row-uniform)"
    )
    # named as the masked scores, on their line; the stage found wrong stays the weights (the
    # search goes on from the code's weights)
    return Divergence(record.line, record.name, record.function, stage.id, stage_table.by_id()["masked"].words, said)


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
    inputs = (np.squeeze(np.asarray(v)) for v in (ctx.x, ctx.kv))
    return any(v.shape == value.shape and np.allclose(v, value) for v in inputs if v.shape)


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
            relation = mask_words(ctx, stage, record.value, np.squeeze(expected).reshape(record.value.shape))
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
    return Divergence(record.line, record.name, record.function, stage.id, stage.words, relation, record.index)


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
