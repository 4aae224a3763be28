"""Tracing: the smallest failing calls of the exercise's traced function run once more in the
sandbox under the values harness (runtime/trace_harness.py), which sends back, per executed line
of the candidate's file, the array-like values that line bound: data only, within the wire's
reply bounds. Only after the worker has answered and gone are the stages computed and matched
(matching.py); the traces of several calls are merged into one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from attn_kit.base import wire
from attn_kit.base.errors import LoadError
from attn_kit.base.records import CallStatus
from attn_kit.checks import stages as stage_table
from attn_kit.grading.locate.matching import MAX_DIVERGENCES, Divergence, Record, Trace, find
from attn_kit.grading.locate.sites import placed
from attn_kit.report.results import FAILED, Call, Report
from attn_kit.sandbox.session import Sandbox

HARNESS = "attn_kit.runtime.trace_harness:values"


MAX_CALLS = 4  # failing calls traced (the smallest may not tell stages apart: hd = 1, one head)


# --- which call to trace --------------------------------------------------------------------------


def failing_calls(report: Report) -> list[Call]:
    """The failing calls of the traced function, smallest first (fewest argument entries; a wrong
    value before an exception), one per size; those whose stages cannot be told apart last."""
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
    ordered = [by_size[k] for k in sorted(by_size)]
    plain = [_identity(stage_table.context_for(report.exercise, c.args, c.kwargs)) for c in ordered]
    return [c for c, p in zip(ordered, plain) if not p] + [c for c, p in zip(ordered, plain) if p]


def _identity(ctx: stage_table.Context | None) -> bool:
    """A call whose projections include the identity matrix (a projected value equals what it
    was projected from), or with one head of width 1: its stages cannot be told apart."""
    if ctx is None:
        return False
    square = (np.asarray(w, dtype=np.float64) for w in ctx.params.values() if w is not None and np.ndim(w) == 2)
    try:
        single = ctx.heads == 1 and ctx.hd == 1  # one number per position: every layout is the same
    except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError):
        single = False
    return single or any(w.shape[0] == w.shape[1] and np.array_equal(w, np.eye(w.shape[0])) for w in square)


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
            frame, caller = (v if type(v) is int and 0 <= v < 1 << 31 else 0 for v in (item.get("frame"), item.get("caller")))
            out.append(Record(i, line, name, fn, np.squeeze(np.asarray(value, dtype=np.float64)), item.get("bool") is True, frame, caller))
    return out


def follow(path: str, report: Report, timeout: float, memory: int | None, pure: bool, preload: tuple[str, ...]) -> Trace | None:
    """Trace the smallest failing call in a fresh worker, then (the worker has answered and is
    gone) compute the stages and find the divergences. None when the exercise declares no stages
    or no failing call of its traced function fits them."""
    calls = [(c.fn, c.args, c.kwargs) for c in failing_calls(report)[:MAX_CALLS]]
    probe = stage_table.probe_call(report.exercise)
    if probe is not None:
        calls.append(probe)
    if not calls:
        return None
    replies = []
    with Sandbox(path, timeout, memory, pure=pure, preload=preload) as sandbox:
        try:
            sandbox.start()
        except LoadError:
            return None
        for fn, args, kwargs in calls:
            outcome = sandbox.call(fn, args, kwargs, harness=HARNESS, echo=False)
            replies.append(outcome.extra if outcome.status == CallStatus.OK and isinstance(outcome.extra, dict) else {})
    # the worker has answered and is gone: only now are the stages computed
    traces = []
    table: tuple = ()
    for (_, args, kwargs), extra in zip(calls, replies):
        ctx = stage_table.context_for(report.exercise, args, kwargs)
        if ctx is not None:
            table = ctx.table
            try:
                traces.append(find(ctx, records_from(extra)))
            except (ValueError, IndexError, KeyError, FloatingPointError):  # a value no view fits: no trace
                continue
            traces[-1].error = str(extra.get("error") or "")[:80]
    if not traces:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return merged(traces, table)
    return placed(merged(traces, table), text)


def _cause(relation: str) -> str:
    """A relation without its figures (a factor's cause reads the same in every call)."""
    return re.sub(r"[0-9.]+", "#", relation)


def _told(d: Divergence, causes: list[tuple[str, int]], order: dict[str, int]) -> bool:
    """The same cause, named at an earlier stage by another call (a call where the two stages
    are one value, hd = 1, shows it a stage late)."""
    return any(cause == _cause(d.relation) and at < order.get(d.stage, 99) for cause, at in causes)


UNNAMED = " entries differ (by up to "  # matching._difference: a value near a stage, with no named difference


def _specific(relation: str) -> int:
    """How precisely a relation names the cause: a single named cause beats two, two beat none."""
    if "(" not in relation:
        return 0
    return 1 if " or " in relation else 2


def merged(traces: list[Trace], table: tuple = ()) -> Trace:
    """One trace from several calls': every divergence once (by line and stage), in data-flow
    order (the exercise's stages', `table`), the first call's matches."""
    order = {s.id: i for i, s in enumerate(table or stage_table.ATTENTION)}
    seen: dict[tuple[int, str], Divergence] = {}
    named = [order.get(d.stage, 99) for trace in traces for d in trace.divergences if UNNAMED not in d.relation]
    causes = [(_cause(d.relation), order.get(d.stage, 99)) for trace in traces for d in trace.divergences]
    for trace in traces:
        mine: set[int] = set()  # lines this call already named: its first word on a line stands
        for d in trace.divergences:
            if (UNNAMED in d.relation and any(at < order.get(d.stage, 99) for at in named)) or _told(d, causes, order):
                continue  # a call that cannot tell the stages apart, downstream of a named mistake
            same = next((k for k in seen if k[0] == d.line), None)
            if same is None:
                seen[(d.line, d.stage)] = d
            elif d.line not in mine and (_specific(d.relation), -order.get(d.stage, 99)) > (
                _specific(seen[same].relation),
                -order.get(seen[same].stage, 99),
            ):
                del seen[same]  # a call that tells the causes apart, or sees the mistake a stage earlier
                seen[(d.line, d.stage)] = d
            mine.add(d.line)
    first = traces[0]
    return Trace(
        sorted(seen.values(), key=lambda d: (order.get(d.stage, 99), d.line))[:MAX_DIVERGENCES], first.matched, first.records, first.error
    )
