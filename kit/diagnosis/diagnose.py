"""Which known bugs explain a failing solution: a search over composed bug models.

The evidence is every call the failing checks made. Each call's return value is cut into units:
a row (a vector along the last axis: one query's weights, one token's features), or one "raised"
unit when the call raised, or one "shape" unit when a part cannot be read at the right shape. A
unit is *wrong* when the candidate differs from the reference there, with the tolerance of the
check that made the call (never looser), or within float32 rounding for a float32 solution.

A model is the reference with one or more known bugs applied (`diagnosis/compose.py` builds them from the
bug files). A bug id is a family: besides its bug files, prompts/families.toml makes more forms of
it from them by text edits, one per choice of a parameter (a subset of the weights or biases, a
fill value, the RoPE exponent or base, a place, a side, an order); each form is read as hunks
against the reference like a bug file, so it composes with the other bugs, and the constant is
fitted by the search itself: the form whose model agrees with the candidate's outputs is the one
named. Forms that do not compose by hunks (made from another reference, or editing the same
lines) still combine when every change one of them makes on the evidence is an exception or
non-finite values: an `_Overlay` raises where that member raises and has its NaN/inf where it has
them, over the model of the rest. A solution that computes in float32 is compared with each
model's float32 twin, within float32 rounding. A model *reproduces* the candidate when it agrees
with the candidate on every unit of every failing call: where the candidate is wrong and where it
is right.

1. Each bug form is run alone (skipping calls of functions its hunks cannot reach). Only forms
   that change some unit where the candidate is wrong, and either none where it is right or match
   some wrong unit on their own, enter the search (pruning: a bug can be hidden by another one
   where the candidate is right, as smaller scores hide an overflow).
2. Combinations of up to MAX_BUGS of those forms are tried, smallest first; each is run call by
   call and dropped at its first disagreement. The smallest reproducing combination names its
   bugs. Within one size, combinations whose members between them change every unit the
   candidate gets wrong go first, then those matching the most wrong units alone; at most
   MAX_MODELS composed models are run in one diagnosis (every single form is run once besides).
   When several combinations reproduce every call and the candidate raised, the ones whose
   models raise the candidate's own error messages are kept, when that tells them apart.
   When none reproduces, the search is run once more with every model guarding the rows that
   have no allowed key as the candidate does (to zeros, NaN or a value of its own: the model
   gives the candidate's values on those rows, `_guarded_evidence`), so an explicit guard for
   empty rows beside plain bugs leaves the plain bugs to be named (at most GUARD_MODELS more
   composed models). A row the candidate makes non-finite is not taken as guarded: that is
   blocked-row-nan's own evidence. A call the candidate hung or crashed on is not run by any model.
3. When no combination reproduces everything (a bug outside the catalogue is present too), the
   evidence falls back to each check on its own: a bug is named for a check when it alone
   reproduces every call of that check, and it passes the naming rule over all failing calls
   (it agrees on at least MIN_AGREEMENT of the units it changes, units where the candidate is
   wrong in another way not counted, since something else acts there; and it explains at least
   MIN_SHARE of the candidate's own wrong units in the checks where it changes anything, those
   contested units aside). The evidence then names the failing checks no named bug reproduces.
   A known bug is offered as a near miss only when it reproduces most of the rows it changes.
4. A check's `bug` is the named bug that explains the worst row of that check's own mismatch.

A crash alone is no evidence: a bug whose every wrong unit matched on its own is a call the
candidate raised on, where its model raises another message, is not named (`_crash_only_bugs`;
two mistakes both crash on a shape the code does not support). Where the search names nothing for a
question, the probes (diagnosis/probes.py, asked by the pipeline while the sandbox is open) may.

Mutation is not an output: `mutates-input` is named from the candidate's per-call mutation
record (`Outcome.mutated`), never by matching outputs.
"""

from __future__ import annotations

import collections
import copy
import functools
import importlib
import importlib.util
import itertools
import sys
import time
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attn_kit.base import wire
from attn_kit.base.paths import bug_files, reference_files, solutions_dir
from attn_kit.base.records import ATOMS, CallStatus
from attn_kit.compare.arrays import ATOL, RTOL, ValueProblem, float32_like, float32_tolerance, float32_values, to_array
from attn_kit.diagnosis import compose
from attn_kit.load import catalog
from attn_kit.load.catalog import MUTATION_BUG
from attn_kit.report.results import Call, CheckResult, Diagnosis
from attn_kit.sandbox import zygote as sandbox_zygote

MAX_BUGS = 3  # bugs in one composed model
MAX_MODELS = 300  # composed models (two or three bugs) run in one diagnosis, at most
MIN_AGREEMENT = 0.95  # per-check fallback: share of the units a bug changes where the candidate agrees
# (20 seeds of the first exercise: contained bugs 1.00, the best wrong candidate 0.89)
MIN_SHARE = 0.5  # per-check fallback: share of the candidate's wrong units (in the checks the
# bug touches) that the bug explains
EMPTY_ROW_BUG = "blocked-row-nan"  # its models mark the rows with no allowed key (_guarded_evidence)
GUARD_MODELS = 100  # composed models, besides, for the search with empty rows guarded as the candidate does


@functools.cache
def load_module(path: str):
    """Import one of the kit's own solution files (reference or bug) in the kit's process. From
    now on this process holds expected values: a new zygote is a fresh interpreter, not a fork."""
    sandbox_zygote.expected_values_loaded()
    name = (
        "attn_kit_solution_" + Path(path).stem.replace("-", "_").replace("@", "__") + "_" + Path(path).parent.parent.name.replace("-", "_")
    )
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # the kit's solution files are all .py files
        raise ImportError(f"cannot import {path}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    if path in _SOURCES:  # read before the first worker started: what the candidate cannot change
        exec(compile(_SOURCES[path], path, "exec"), module.__dict__)
        module.__dict__[SOURCE_ATTR] = _SOURCES[path].decode("utf-8")
    else:
        spec.loader.exec_module(module)
        module.__dict__[SOURCE_ATTR] = "".join(compose.read_source(Path(path)))
    return module


SOURCE_ATTR = compose.SOURCE_ATTR
_TWINS: dict[int, tuple] = {}


def float32_twin(module):
    """The module recompiled with every float64 read as float32: the kit's references convert
    their inputs to float64, so only this twin computes in float32 as a float32 solution does
    (its rounding of large scores, not just of its inputs). The module itself when its source
    is unknown or names no float64."""
    if isinstance(module, _Overlay):
        return _Overlay(float32_twin(module._main), tuple(float32_twin(e) for e in module._edges), module.__name__ + "_float32")
    if id(module) not in _TWINS:
        source = module.__dict__.get(SOURCE_ATTR) or ""
        twin = module
        if "float64" in source:
            twin = types.ModuleType(module.__name__ + "_float32")
            twin.__file__ = f"{module.__file__} (float32)"
            try:
                exec(compile(source.replace("float64", "float32"), twin.__file__, "exec"), twin.__dict__)  # noqa: S102
            except Exception:  # noqa: BLE001 - then the module as it is
                twin = module
        _TWINS[id(module)] = (module, twin)  # the module is kept alive with its id
    return _TWINS[id(module)][1]


_SOURCES: dict[str, bytes] = {}


def preload(exercise: catalog.Exercise) -> None:
    """Read every bug and reference file of the exercise now, before the sandbox's first worker
    starts: bug files are compiled from these bytes if diagnosis needs them, and composed models
    are built from the cached sources (candidate code can't swap either)."""
    for path in bug_files(exercise.id):
        _SOURCES.setdefault(str(path), path.read_bytes())
        compose.read_source(path)
    for path in reference_files(exercise.id):
        compose.read_source(path)


def oracle_for(exercise: catalog.Exercise):
    return load_module(str(solutions_dir(exercise.id) / exercise.oracle))


@dataclass
class Local:
    """The outcome of running one of the kit's own implementations in-process."""

    value: object = None
    raised: str = ""
    message: str = ""  # the exception's message, cut as the worker cuts the candidate's


def run_local(module, call: Call, float32: bool = False, inputs: tuple | None = None) -> Local:
    """Run `module`'s version of the call: `call.replay(module, ...)` when the check recorded one
    (`CheckContext.record_for_diagnosis`), else `module.<call.fn>(...)`. `inputs` = (args, kwargs) already prepared by `shared_inputs`
    (read-only: only implementations that never write into their arguments may use them)."""
    if float32:
        module = float32_twin(module)
    fn: Callable[..., Any] | None
    if call.replay is not None:  # a summary the check recorded: rerun through the kit's replay
        fn = functools.partial(call.replay, module)
    else:
        fn = getattr(module, call.fn, None)
        if fn is None:
            return Local(raised="missing")
    if inputs is not None:
        args, kwargs = inputs
    else:
        args, kwargs = deep_copy((call.args, call.kwargs))
    if float32:  # new float32 copies of the floating data; the rest is as read-only as `inputs`
        args, kwargs = as_float32(args), as_float32(kwargs)
    harness = _replayed_harness(call)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            value = _with_extra(*harness(fn, *args, **kwargs)) if harness else fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - a bug implementation may raise anything
        return Local(raised=type(exc).__name__, message=_message(exc))
    return Local(value=value)


def deep_copy(value):
    """copy.deepcopy(value), with plain torch tensors (harness_torch.plain_tensors) copied by
    clone() instead: deepcopy serialises each tensor's storage (about 70 µs a tensor, most of a
    torch file's diagnosis). Views and shared storage still go through deepcopy, which keeps them."""
    memo: dict = {}
    if "torch" in sys.modules:
        from attn_kit.base import torch_support

        for key, t in torch_support.plain_tensors(value).items():
            memo[key] = t.detach().clone().requires_grad_(t.requires_grad)
    return _copied(value, memo)


def _copied(value, memo: dict):
    """copy.deepcopy(value, memo), with exact lists, tuples, dicts and number arrays copied here
    (deepcopy visits each number of a nested list through its memo: most of a lists file's
    diagnosis set-up). Objects reached twice are copied once, as deepcopy does."""
    kind = type(value)
    if kind in ATOMS:
        return value
    found = memo.get(id(value))
    if found is not None:
        return found
    if kind is list:
        out: list = []
        memo[id(value)] = out
        out.extend(value if set(map(type, value)) <= ATOMS else [_copied(v, memo) for v in value])
        return out
    if kind is dict:
        copied: dict = {}
        memo[id(value)] = copied
        copied.update((k if type(k) in ATOMS else copy.deepcopy(k, memo), _copied(v, memo)) for k, v in value.items())
        return copied
    if kind is tuple:
        items = tuple(_copied(v, memo) for v in value)
        return memo.setdefault(id(value), items)
    if kind is np.ndarray and value.dtype.kind in "biufc" and value.dtype.names is None:
        return memo.setdefault(id(value), value.copy(order="K"))
    return copy.deepcopy(value, memo)


def _message(exc: BaseException) -> str:
    """str(exc) as the worker reports a candidate's exception (`worker.error_info`)."""
    message = str(exc)
    return message[:500] + " …" if len(message) > 500 else message


def shared_inputs(call: Call) -> tuple:
    """The call's arguments copied once, nested lists of numbers as NumPy arrays (the kit's own
    implementations accept both and compute the same values), for many read-only runs."""
    args, kwargs = deep_copy((call.args, call.kwargs))
    if call.harness:
        return args, kwargs
    return tuple(_as_arrays(a) for a in args), {k: _as_arrays(v) for k, v in kwargs.items()}


def _as_arrays(value):
    if isinstance(value, dict):
        return {k: _as_arrays(v) for k, v in value.items()}
    if isinstance(value, list) and value:
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError):
            return value
        return arr if arr.dtype.kind in "fb" else value
    return value


def as_float32(value):
    """Floating data (nested lists of floats, float64 arrays) as float32 arrays; the rest unchanged."""
    if isinstance(value, dict):
        return {k: as_float32(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(as_float32(v) for v in value)
    if isinstance(value, np.ndarray):
        return value.astype(np.float32) if value.dtype.kind == "f" else value
    if isinstance(value, list):
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError):
            return [as_float32(v) for v in value]
        return arr.astype(np.float32) if arr.dtype.kind == "f" else value
    if type(value).__module__.startswith("torch") and getattr(value, "is_floating_point", lambda: False)():
        return value.float()
    return value


def float32_reference(oracle, call: Call, expected) -> np.ndarray | None:
    """The oracle's answer to `call` computed in float32, for the part of it equal to `expected`."""
    expected = np.asarray(expected)
    r64, r32 = run_local(oracle, call), run_local(oracle, call, float32=True)
    if r64.raised or r32.raised:
        return None
    like = r64.value if isinstance(r64.value, tuple) else np.asarray(r64.value)
    for p64, p32 in zip(_parts(r64.value, like), _parts(r32.value, like)):
        if (
            p64 is not None
            and p32 is not None
            and p64.shape == expected.shape
            and p64.dtype != bool
            and np.allclose(p64, expected, rtol=1e-9, atol=1e-12, equal_nan=True)
        ):
            return p32
    return None


def _replayed_harness(call: Call):
    """The call's harness when its `extra` is part of the answer (e.g. gradients), else None."""
    if not call.harness:
        return None
    module_name, _, name = call.harness.partition(":")
    harness = getattr(importlib.import_module(module_name), name)
    return harness if getattr(harness, "replay_in_diagnosis", False) else None


def _with_extra(value, extra: dict) -> tuple:
    """(value, every NumPy array found in extra, nested dicts walked in order)."""

    def arrays(d):
        for v in d.values():
            if isinstance(v, dict):
                yield from arrays(v)
            elif isinstance(v, np.ndarray):
                yield v

    return (value, tuple(arrays(extra)))


def _candidate(call: Call) -> Local:
    outcome = call.outcome
    if outcome.status == "raised" and outcome.error is not None:  # a raised outcome carries its error
        return Local(raised=outcome.error.type, message=outcome.error.message)
    if outcome.status != "ok":
        return Local(raised=outcome.status)
    value = _with_extra(outcome.value, outcome.extra) if _replayed_harness(call) else outcome.value
    return Local(value=value)


def _parts(value, like) -> list:
    """Split a return value into arrays shaped like the reference's parts (None where unreadable)."""
    if isinstance(like, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(like):
            return [None] * len(like)
        return [p for v, l in zip(value, like) for p in _parts(v, l)]
    try:
        ref = np.asarray(like)
        arr = to_array(value, "value", "bool" if ref.dtype == bool else "float")
    except (ValueProblem, ValueError, TypeError):
        return [None]
    return [arr if arr.shape == ref.shape else None]


def _rows(arr: np.ndarray) -> np.ndarray:
    arr = np.asarray(arr, dtype=float)
    return arr.reshape(1, -1) if arr.ndim <= 1 else arr.reshape(-1, arr.shape[-1])


def _close(a: np.ndarray, b: np.ndarray, rtol, atol) -> np.ndarray:
    """Row-wise closeness (NaN matches NaN, inf matches the same inf). Runs under analyse's
    np.errstate (inf - inf is NaN here, quietly): it is called a hundred thousand times a search."""
    diff = np.abs(a - b)
    close = (diff <= atol + rtol * np.abs(b)) | (a == b) | (np.isnan(a) & np.isnan(b))
    return close.all(axis=-1)


# --- the evidence: one record per call of a failing check --------------------------------------


@dataclass
class _Part:
    rows: np.ndarray | None  # the candidate's rows (None: unreadable or wrong shape)
    ref: np.ndarray  # the reference's rows
    atol: float | np.ndarray  # scalar or per-element array (float32 envelope)
    rtol: float
    start: int  # index of this part's first unit in the call's units
    size: int
    src: int  # index of the part in the return value's parts


COSTLY_ENTRIES = 1 << 17  # numbers in a call's inputs over which it is costly to rerun (_Evidence.costly)


@dataclass
class _Evidence:
    key: tuple
    check: str
    call: Call
    raised: str = ""  # the candidate raised (or hung, crashed): one unit
    message: str = ""  # ... with this message
    parts: list[_Part] = field(default_factory=list)
    like: object = None
    inputs: tuple = ()  # shared read-only arguments for the kit's models
    float32: bool = False
    wrong: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    guard: np.ndarray | None = None  # units of rows with no allowed key, taken as the candidate has them
    base: _Evidence | None = None  # the unguarded evidence this one is made from

    @property
    def size(self) -> int:
        return len(self.wrong)

    # `wrong` is set once, when the evidence is made; the search asks these of every call again
    # and again, so each is computed once
    @functools.cached_property
    def any_wrong(self) -> bool:
        return bool(self.wrong.any())

    @functools.cached_property
    def all_wrong(self) -> bool:
        return bool(self.wrong.all())

    @functools.cached_property
    def right(self) -> np.ndarray:
        return ~self.wrong

    @functools.cached_property
    def costly(self) -> bool:
        """Whether the call's inputs are large (a memory check's: millions of numbers, where the
        other calls hold thousands at most): a model run on it, traced by a replay, costs more
        than on every other call together, so the search reads it last (`_cheap_first`)."""
        return wire.entries((self.call.args, self.call.kwargs)) > COSTLY_ENTRIES

    @functools.cached_property
    def input_key(self) -> tuple | None:
        """What a model's answer to this call depends on besides the model: the function (or the
        check's replay), the harness and a fingerprint of the shared inputs; None when they have none."""
        digest = wire.fingerprint(self.inputs) if self.inputs else None
        if digest is None:
            return None
        replay = self.call.replay
        where = None if replay is None else (getattr(replay, "__module__", None), getattr(replay, "__qualname__", None))
        return (self.call.fn, where, self.call.harness, digest)


def _tolerance(result: CheckResult, call: Call) -> tuple[float, float]:
    """The tolerance the check compared this call with (never looser than the kit's default)."""
    rtol, atol = call.tolerance or (RTOL, ATOL)
    m = result.mismatch
    if m is not None and call is result.failing_call:
        rtol, atol = min(rtol, m.rtol), min(atol, m.atol)
    return min(rtol, RTOL), min(atol, ATOL)


def _evidence(oracle, result: CheckResult, n: int, call: Call) -> _Evidence | None:
    ref = run_local(oracle, call)
    if ref.raised:  # the reference raises here (e.g. ValueError)
        return None
    ev = _Evidence((result.id, n), result.id, call, inputs=shared_inputs(call))
    cand = _candidate(call)
    if cand.raised:
        ev.raised, ev.message = cand.raised, cand.message
        ev.wrong = np.ones(1, bool)
        return ev
    rtol, atol = _tolerance(result, call)
    like = ref.value if isinstance(ref.value, tuple) else np.asarray(ref.value)
    ev.like = like
    cparts, rparts = _parts(cand.value, like), _parts(ref.value, like)
    readable = [(c, r) for c, r in zip(cparts, rparts) if c is not None and r is not None and r.dtype != bool]
    ev.float32 = bool(readable) and (all(float32_like(c, r) for c, r in readable) or any(float32_values(c) for c, _ in readable))
    r32parts = _parts(run_local(oracle, call, float32=True).value, like) if ev.float32 else [None] * len(rparts)
    wrong, start = [], 0
    for src, (c, r, r32) in enumerate(zip(cparts, rparts, r32parts)):
        if r is None:
            continue
        rr = _rows(r)
        part_atol = atol
        if ev.float32 and r.dtype != bool:
            part_atol = np.maximum(atol, float32_tolerance(rr, None if r32 is None else _rows(r32)))
        if c is None:
            ev.parts.append(_Part(None, rr, part_atol, rtol, start, 1, src))
            wrong.append(np.ones(1, bool))
            start += 1
            continue
        cr = _rows(c)
        ev.parts.append(_Part(cr, rr, part_atol, rtol, start, len(rr), src))
        wrong.append(~_close(cr, rr, rtol, part_atol))
        start += len(rr)
    ev.wrong = np.concatenate(wrong) if wrong else np.zeros(0, bool)
    return ev


@dataclass
class _Fit:
    """How one model compares with the candidate on one call: per unit."""

    agree: np.ndarray  # the model gives what the candidate gives
    differs: np.ndarray  # the model differs from the reference
    same_message: bool = False  # where the candidate raised: the model raised the same message too
    wild: np.ndarray | None = None  # the model raised, or its row there has a NaN or an inf (None: nowhere)


_FITS: dict = {}  # (model, evidence) -> _Fit, for one analyse() call


def _fit(ev: _Evidence, model, forms=()) -> _Fit:
    key = (id(model), id(ev))
    if key not in _FITS:
        if ev.base is not None and ev.guard is not None:  # the model guards empty rows as the candidate
            raw = _fit(ev.base, model, forms)
            _FITS[key] = _Fit(
                raw.agree | ev.guard, raw.differs & ~ev.guard, raw.same_message, None if raw.wild is None else raw.wild & ~ev.guard
            )
        else:
            _FITS[key] = _fit_now(ev, model, forms)
    return _FITS[key]


def _fit_now(ev: _Evidence, model, forms=()) -> _Fit:
    if forms and not ev.call.harness and not compose.can_change(tuple(forms), ev.call.fn):
        # the bug does not touch this function: the model answers exactly as the reference
        return _Fit(~ev.wrong, np.zeros(ev.size, bool))
    if ev.raised in (CallStatus.TIMEOUT, CallStatus.CRASHED):
        # the candidate's call hung or died: no model of the kit's does either, and running each one
        # on a call that size (a memory check's) would cost seconds a model
        return _Fit(np.zeros(1, bool), np.zeros(1, bool), wild=np.zeros(1, bool))
    shared = ev.inputs if all(f.bug != MUTATION_BUG for f in forms) else None
    out = _model_run(model, ev, shared)
    if ev.raised:
        return _Fit(
            np.array([out.raised == ev.raised]),
            np.array([bool(out.raised)]),
            same_message=out.raised == ev.raised and out.message == ev.message,
            wild=np.array([bool(out.raised)]),
        )
    if out.raised:
        n = ev.size
        return _Fit(np.zeros(n, bool), np.ones(n, bool), wild=np.ones(n, bool))
    mparts = _parts(out.value, ev.like)
    m32 = _parts(_model_run(model, ev, shared, float32=True).value, ev.like) if ev.float32 and forms else None
    agree = np.zeros(ev.size, bool)
    differs = np.zeros(ev.size, bool)
    wild = np.zeros(ev.size, bool)
    for part in ev.parts:
        m = mparts[part.src] if part.src < len(mparts) else None
        sl = slice(part.start, part.start + part.size)
        if m is None:
            differs[sl] = True
            agree[sl] = part.rows is None
            continue
        mr = _rows(m)
        # one unit for an unreadable part, else one per row
        wild[sl] = ~np.isfinite(mr).all() if part.rows is None else ~np.isfinite(mr).all(axis=-1)
        if part.rows is None:
            differs[sl] = ~_close(mr, part.ref, part.rtol, ATOL).all()
            continue
        differs[sl] = ~_close(mr, part.ref, part.rtol, ATOL if np.isscalar(part.atol) else part.atol)
        atol = part.atol
        if m32 is not None:
            mp32 = m32[part.src] if part.src < len(m32) else None
            if mp32 is not None:
                atol = np.maximum(atol, float32_tolerance(mr, _rows(mp32)))
        agree[sl] = _close(part.rows, mr, part.rtol, atol)
    return _Fit(agree, differs, wild=wild)


_RUNS: collections.OrderedDict[tuple, tuple[Local, int]] = collections.OrderedDict()  # key -> (answer, its bytes)
RUNS_BYTES = 64 << 20  # model answers kept for later diagnoses in this process, least recently used out first
RUN_BYTES = 256 << 10  # an answer larger than this (a memory check's call) is not kept
_KEPT = [0]  # bytes of the answers in _RUNS


def _model_run(model, ev: _Evidence, shared, float32: bool = False) -> Local:
    """run_local(model, ev.call, float32, shared), remembered for the rest of the process: a watch
    re-run, --locate's trial edits and a course's batch of files graded on one seed put the same
    kit-made inputs to the same models again. Kept only for the kit's own cached modules (an
    overlay lives for one diagnosis) and read-only inputs; the answer's arrays are made read-only."""
    if shared is None or isinstance(model, _Overlay) or ev.input_key is None:
        return run_local(model, ev.call, float32=float32, inputs=shared)
    key = (id(model), float32, ev.input_key)  # the module is kept by load_module/load_composed's cache
    kept = _RUNS.get(key)
    if kept is not None:
        _RUNS.move_to_end(key)
        return kept[0]
    found = run_local(model, ev.call, float32=float32, inputs=shared)
    size = _read_only(found.value)
    if size <= RUN_BYTES:
        _RUNS[key] = (found, size)
        _KEPT[0] += size
        while _KEPT[0] > RUNS_BYTES:
            _KEPT[0] -= _RUNS.popitem(last=False)[1][1]
    return found


def forget_answers() -> None:
    """Drop every kept model answer (a benchmark times a diagnosis that runs each model)."""
    _RUNS.clear()
    _KEPT[0] = 0


def _read_only(value) -> int:
    """Make the value's arrays read-only; its size in bytes (arrays and tensors by their data, a
    nominal 64 for anything else)."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
        return value.nbytes + 64
    if isinstance(value, (tuple, list)):
        return 64 + sum(_read_only(part) for part in value)
    size = getattr(value, "nbytes", None)  # a torch tensor
    return size + 64 if isinstance(size, int) else 64


# --- the search ---------------------------------------------------------------------------------


@dataclass
class Finding:
    """The outcome of diagnosis: named bugs, each failing check's bug, and near misses."""

    diagnoses: list[Diagnosis] = field(default_factory=list)
    check_bug: dict[str, str] = field(default_factory=dict)
    near_misses: list[str] = field(default_factory=list)
    models_tried: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # process CPU time (the wall time depends on what else runs)
    considered: list[dict] = field(default_factory=list)  # per-check fallback candidates and their figures
    unexplained: list[str] = field(default_factory=list)  # failing checks no named bug reproduces
    wrong_total: int = 0  # the candidate's wrong output rows or results, over every call read
    fallback: set[str] = field(default_factory=set)  # bugs named by the per-check fallback (no whole reproduction)


def model_of(group: tuple) -> object:
    """The model of a group of forms: a bug file's own module, the reference with the hunks of every
    form applied (a family's form, or several bugs), or, for forms that do not compose by hunks
    (another reference, the same lines), an `_Overlay` (see `_overlay_split`)."""
    if len(group) == 1 and not group[0].variant:
        return load_module(str(group[0].path))
    if len(group) == 1 or compose.composable(group):
        return compose.load_composed(group)
    return _OVERLAYS[group]


_OVERLAYS: dict = {}  # group -> _Overlay, registered by the search when it tries one


class _Overlay(types.ModuleType):
    """A composed model through edge behaviour: `main` (a model of the forms that compose by hunks)
    answers each call, except that it raises where an `edge` member raises (an OverflowError from
    math.exp, an IndexError) and has that member's non-finite values (NaN rows, inf) where it has
    them. Only forms whose every effect on the evidence is an exception or non-finite values are
    edges, so nothing of theirs is guessed."""

    def __init__(self, main, edges: tuple, name: str):
        super().__init__(name)
        self._main, self._edges = main, edges
        self.__file__ = f"<{name}>"

    def __getattr__(self, fn: str):
        if fn.startswith("__"):
            raise AttributeError(fn)
        main_fn = getattr(self._main, fn)
        edge_fns = [getattr(e, fn, None) for e in self._edges]

        def call(*args, **kwargs):
            extra = [f(*args, **kwargs) for f in edge_fns if f is not None]  # raises where they raise
            value = main_fn(*args, **kwargs)
            for other in extra:
                value = _non_finite_from(value, other)
            return value

        return call


def _non_finite_from(value, other):
    """`value` with `other`'s non-finite entries where the two have the same structure and shape."""
    if isinstance(value, tuple):
        if isinstance(other, tuple) and len(other) == len(value):
            return tuple(_non_finite_from(v, o) for v, o in zip(value, other))
        return value
    try:
        a, b = np.asarray(value, dtype=float), np.asarray(other, dtype=float)
    except (ValueError, TypeError):
        return value
    if a.shape != b.shape or np.isfinite(b).all():
        return value
    return np.where(np.isfinite(b), a, b)


class _LazyFits(dict):
    """evidence key -> _Fit of one form, each run only when first read: most forms are ruled out
    on the calls the candidate gets wrong, and never run on the (many more) calls it gets right."""

    def __init__(self, form: compose.BugForm, evs):
        super().__init__()
        self.form, self.evs = form, {ev.key: ev for ev in evs}
        self.model: object = None  # model_of((form,)), found on the first read

    def __missing__(self, key) -> _Fit:
        if self.model is None:
            self.model = model_of((self.form,))
        fit = self[key] = _fit(self.evs[key], self.model, (self.form,))
        return fit


@dataclass
class _Single:
    form: compose.BugForm
    fits: dict  # evidence key -> _Fit (a _LazyFits)

    def units(self, attr: str, evs, mask_attr: str | None = None) -> int:
        total = 0
        for ev in evs:
            if (mask_attr == "wrong" and not ev.any_wrong) or (mask_attr == "right" and ev.all_wrong):
                continue  # nothing to count there: the fit is not needed
            fit = self.fits[ev.key]
            sel = getattr(fit, attr)
            if mask_attr == "wrong":
                sel = sel & ev.wrong
            elif mask_attr == "right":
                sel = sel & ev.right
            total += int(sel.sum())
        return total


def _reproduces(model, evs: list[_Evidence], forms) -> bool:
    return all(_fit(ev, model, forms).agree.all() for ev in evs)


def analyse(exercise: catalog.Exercise, results: list[CheckResult]) -> Finding:
    """Known bugs the failing checks' calls reproduce, with each failing check's own bug."""
    started, cpu = time.perf_counter(), time.process_time()
    _FITS.clear()
    _EDGE.clear()
    _OVERLAYS.clear()
    finding = Finding()
    failing = [r for r in results if r.status in ("fail", "error")]
    _name_mutation(failing, finding)
    if not failing:
        return finding
    oracle = oracle_for(exercise)
    # models overflow and divide by zero as the candidates do; comparing them makes NaN of inf - inf
    with np.errstate(all="ignore"):
        # every call that ran is evidence: a failing check's calls show what is wrong, a passing
        # check's calls show where a bug model would change something the candidate gets right
        evs = [
            ev
            for r in results
            if r.status != "skip"
            for n, call in enumerate(r.calls)
            if (r.status != "pass" or call.expected is not None) and (ev := _evidence(oracle, r, n, call)) is not None
        ]
        failing_ids = {r.id for r in failing}
        if any(ev.any_wrong for ev in evs if ev.check in failing_ids):
            _search(exercise, failing, evs, finding)
        _attribute_mutation(exercise, failing, evs, finding)
    _FITS.clear()
    _EDGE.clear()
    _OVERLAYS.clear()
    finding.seconds = time.perf_counter() - started
    finding.cpu_seconds = time.process_time() - cpu
    return finding


def _name_mutation(failing: list[CheckResult], finding: Finding) -> None:
    checks = [r.id for r in failing if any(c.outcome.mutated for c in r.calls)]
    if not checks or MUTATION_BUG not in catalog.bugs():
        return
    written = sorted({m for r in failing for c in r.calls for m in c.outcome.mutated})
    fns = sorted({c.fn for r in failing for c in r.calls if c.outcome.mutated})
    evidence = (
        f"explains the written argument(s) {', '.join(written)} in {', '.join(f'`{f}`' for f in fns)}: the call changed what it was given"
    )
    finding.diagnoses.append(_diagnosis(MUTATION_BUG, evidence, checks))


def _attribute_mutation(exercise, failing, evs, finding: Finding) -> None:
    """With mutates-input named, a failing check is its own when none of its outputs is wrong and a
    call wrote into an argument, or when a mutates-input bug file alone reproduces all its calls
    (an in-place write that raises on a non-contiguous input, say)."""
    if not any(d.bug == MUTATION_BUG for d in finding.diagnoses):
        return
    forms = [f for f in compose.forms(exercise.id) if f.bug == MUTATION_BUG]
    for r in failing:
        if r.id in finding.check_bug:
            continue
        mine = [ev for ev in evs if ev.check == r.id]
        if not any(ev.any_wrong for ev in mine):
            if any(c.outcome.mutated for c in r.calls):
                finding.check_bug[r.id] = MUTATION_BUG
            continue
        for form in forms:
            module = model_of((form,))
            if all(_fit(ev, module, (form,)).agree.all() for ev in mine):
                finding.check_bug[r.id] = MUTATION_BUG
                break


def _search(exercise, failing, evs, finding: Finding) -> None:  # noqa: C901 (the search's steps, in order; split with the engine's next rework)
    failing_ids = {r.id for r in failing}
    wrong_total = sum(int(ev.wrong.sum()) for ev in evs)
    finding.wrong_total = wrong_total
    singles = []
    for form in compose.all_forms(exercise.id) + _fitted_forms(exercise.id, evs):
        if form.bug == MUTATION_BUG:
            continue
        singles.append(_Single(form, _LazyFits(form, evs)))
    finding.models_tried = len(singles)
    groups = _reproducing_groups(singles, evs, finding)
    guarded = 0
    gevs = None if groups else _guarded_evidence(exercise, evs)
    if gevs is not None:  # no model reproduces everything: try them guarding empty rows as the file does
        _EDGE.clear()
        gsingles = [_Single(s.form, _LazyFits(s.form, gevs)) for s in singles]
        groups = _reproducing_groups(gsingles, gevs, finding, GUARD_MODELS)
        _EDGE.clear()
        if groups:
            evs, singles = gevs, gsingles
            guarded = sum(int(ev.guard.sum()) for ev in gevs if ev.guard is not None)
    groups, by_message = _same_error_messages(groups, evs)
    order = list(catalog.bugs())
    if groups:
        named = set.intersection(*({f.bug for f in g} for g in groups))
        group = groups[0]
        by_bug = {s.form.bug: s for s in singles if s.form in group}
        named -= _crash_only_bugs(named, by_bug, evs, finding)
        check_bug = _attribute_with_group(group, failing, evs, by_bug)
        for bug in sorted(named, key=lambda b: order.index(b) if b in order else len(order)):
            checks = [c for c, needed in _needed_checks(group, evs, failing_ids).items() if bug in needed]
            single = by_bug[bug]
            together = [f.bug for f in group if f.bug != bug]
            alone = single.units("agree", evs, "wrong")
            evidence = (
                f"explains {alone} of your {wrong_total} wrong output rows or results on its own"
                if alone
                else f"explains none of your {wrong_total} wrong output rows or results on its own"
            )
            evidence += f", in {_listed(checks)}"
            evidence += (
                f"; with {', '.join(together)} it reproduces every failing call" if together else "; it reproduces every failing call"
            )
            if by_message:
                evidence += ", raising the same error with the same message as your code"
            if guarded:
                evidence += (
                    f", with the {guarded} rows that have no allowed key as your code guards them (a composed model gives them your values)"
                )
            variant = next((f.variant for f in group if f.bug == bug), "")
            if variant:
                evidence += f" (in this form: {variant})"
            finding.diagnoses.append(_diagnosis(bug, evidence, checks, alone, wrong_total))
        ambiguous = sorted({f.bug for g in groups for f in g} - named)
        if ambiguous:
            finding.near_misses.append(
                f"{' or '.join(ambiguous)}: each completes a model that reproduces every failing call, "
                "so these calls cannot tell them apart"
            )
        for cid, bug in check_bug.items():
            if bug in named:
                finding.check_bug.setdefault(cid, bug)
        return
    _per_check(failing, evs, singles, finding, wrong_total, order)


def _crash_only_bugs(bugs, by_bug: dict, evs, finding: Finding) -> set:
    """The bugs whose only evidence is a crash of their own: every wrong unit the form matches on
    its own is a call the candidate raised on, and its model raises there with another message.
    Two different mistakes both crash on a shape the code does not support; that is no evidence
    of either (a near miss says so)."""
    out = set()
    for bug in sorted(bugs):
        single = by_bug[bug]
        hits = [(ev, fit) for ev in evs if ev.any_wrong for fit in (single.fits[ev.key],) if (fit.agree & fit.differs & ev.wrong).any()]
        if hits and all(ev.raised and not fit.same_message for ev, fit in hits):
            out.add(bug)
            finding.near_misses.append(
                f"{bug} was not named: its model raises where your code raises, but with another error, and a crash alone is no evidence"
            )
    return out


def _guarded_evidence(exercise, evs) -> list | None:  # noqa: C901 (one branch per way a row can be guarded)
    """The evidence with every row that has no allowed key guarded as the candidate guards it (to
    zeros, NaN or a value of its own): a model then gives the candidate's values there, so an
    explicit guard for empty rows beside a plain bug leaves the plain bug to be named. Which rows
    are empty is read off the exercise's blocked-row-nan bug files: the rows their model turns
    non-finite where the reference is finite (in a part where some rows stay finite: a NaN that
    spreads to every row of a part, as into dk and dv, marks no row), and where the candidate's row
    is finite (NaN there is blocked-row-nan's evidence, never guarded away). None when the exercise
    has no such bug file or the evidence has no such row."""
    nan_forms = [f for f in compose.forms(exercise.id) if f.bug == EMPTY_ROW_BUG]
    if not nan_forms:
        return None
    guards = {}
    for ev in evs:
        if ev.raised or not ev.parts:
            continue
        empty = np.zeros(ev.size, bool)
        for form in nan_forms:
            fit = _fit(ev, model_of((form,)), (form,))
            if fit.wild is None:
                continue
            for part in ev.parts:
                sl = slice(part.start, part.start + part.size)
                rows = fit.wild[sl] & fit.differs[sl]
                if part.rows is not None and rows.any() and not rows.all():
                    with np.errstate(invalid="ignore"):
                        empty[sl] |= rows & np.isfinite(part.rows).all(axis=-1)
        if empty.any():
            guards[ev.key] = empty
    if not guards:
        return None
    out = []
    for ev in evs:
        guard = guards.get(ev.key)
        if guard is None:
            out.append(ev)
            continue
        out.append(
            _Evidence(
                ev.key, ev.check, ev.call, ev.raised, ev.message, ev.parts, ev.like, ev.inputs, ev.float32, ev.wrong & ~guard, guard, ev
            )
        )
    return out


def _fitted_forms(exercise_id: str, evs) -> tuple:
    """Family forms whose constant is fitted from the candidate's own outputs: an entry of
    prompts/families.toml with `fit = "<fitter>"` gets, besides its listed values, the value the
    fitter reads off the evidence (none when the evidence does not show it)."""
    textbook = {f.path.stem: f for f in compose.forms(exercise_id)}
    out: list = []
    for entry in compose.family_entries():
        fitter = _FITTERS.get(entry.get("fit", ""))
        if entry.get("exercise") != exercise_id or fitter is None or entry.get("form") not in textbook:
            continue
        value = fitter(evs)
        if value is None or value in entry.get("values", []):
            continue
        fitted = {k: v for k, v in entry.items() if k != "labels"}
        fitted.update(values=[value], labels=[f"{value} (fitted to your outputs)"])
        try:
            out.extend(compose.family_forms_of(fitted, textbook[entry["form"]]))
        except compose.FamilyError:
            continue
    return tuple(out)


def _blocked_constant(evs, additive: bool) -> str | None:
    """The constant a softmax put in place of blocked scores (or added to them), read off the
    candidate's `stable_softmax` rows: a blocked key j keeps weight w_j = exp(c - m) / Z beside an
    allowed key a with w_a = exp(s_a - m) / Z, so c = s_a + ln(w_j / w_a) (for an added constant,
    minus s_j). The median over every such pair, to four significant digits; None when no row shows
    a blocked key with weight or the estimates disagree."""
    estimates = []
    for ev in evs:
        call = ev.call
        if call.fn != "stable_softmax" or ev.raised or not ev.any_wrong or not ev.parts or ev.parts[0].rows is None:
            continue
        args = list(call.args) + [None] * 2
        scores, allowed = args[0], call.kwargs.get("allowed", args[1])
        if allowed is None:
            continue
        try:
            s, a = np.asarray(scores, dtype=float).ravel(), np.asarray(allowed, dtype=bool).ravel()
        except (TypeError, ValueError):
            continue
        w = ev.parts[0].rows[0]
        if len(w) != len(s) or len(a) != len(s) or not a.any() or a.all() or not np.isfinite(w).all():
            continue
        ia = int(np.flatnonzero(a)[np.argmax(w[a])])
        for j in np.flatnonzero(~a):
            if w[j] > 0 and w[ia] > 0:
                estimates.append(s[ia] + np.log(w[j] / w[ia]) - (s[j] if additive else 0.0))
    if not estimates:
        return None
    value = float(np.median(estimates))
    if not np.isfinite(value) or np.ptp(estimates) > 1e-6 * max(1.0, abs(value)):
        return None
    return repr(float(f"{value:.4g}"))


_FITTERS = {
    "blocked-fill": lambda evs: _blocked_constant(evs, additive=False),
    "blocked-added": lambda evs: _blocked_constant(evs, additive=True),
}


def _same_error_messages(groups: list[tuple], evs) -> tuple[list[tuple], bool]:
    """Among groups that all reproduce every call (a raised call matches on the exception's type),
    the ones whose models also raise the candidate's own messages, when that tells them apart:
    on a shape error the message names the operation and its shapes (weights-transposed and
    transpose-reverses-all-axes both raise ValueError, on different matmuls). (groups, whether
    the messages decided)."""
    raised = [ev for ev in evs if ev.raised]
    if len(groups) < 2 or not raised:
        return groups, False

    def matches(group) -> int:
        model = model_of(group)
        return sum(_fit(ev, model, group).same_message for ev in raised)

    scores = [matches(g) for g in groups]
    best = max(scores)
    if best == 0 or all(s == best for s in scores):
        return groups, False
    return [g for g, s in zip(groups, scores) if s == best], True


def _cheap_first(evs) -> list:
    """The evidence in the order the search rules forms out: the calls the candidate gets wrong
    first (most forms fail to reproduce them), costly calls last (a memory check's replay reruns a
    model on megabytes under tracemalloc: one costs more than every other call). A form is read
    on a costly call only when the cheap ones have not already ruled it out or in."""
    return sorted(evs, key=lambda ev: (ev.costly, not ev.any_wrong))


def _changes_a_wrong_unit(single: _Single, evs) -> bool:
    """Whether the form changes a unit the candidate gets wrong (stops at the first)."""
    return any((single.fits[ev.key].differs & ev.wrong).any() for ev in evs if ev.any_wrong)


def _matches_a_wrong_unit(single: _Single, evs) -> bool:
    """Whether the form changes and matches a wrong unit on its own (stops at the first)."""
    return any((single.fits[ev.key].agree & single.fits[ev.key].differs & ev.wrong).any() for ev in evs if ev.any_wrong)


def _changes_a_right_unit(single: _Single, evs) -> bool:
    """Whether the form changes a unit the candidate gets right (stops at the first)."""
    return any((single.fits[ev.key].differs & ev.right).any() for ev in evs if not ev.all_wrong)


def _relevant(single: _Single, evs) -> bool:
    """Whether the form can belong to a reproducing combination: it changes some unit the candidate
    gets wrong, and either changes none it gets right or matches some wrong unit on its own (another
    bug of the combination can hide it where the candidate is right: smaller scores do not overflow).
    Each part stops at its first unit, so `evs` in `_cheap_first` order reads a costly call last."""
    return _changes_a_wrong_unit(single, evs) and (_matches_a_wrong_unit(single, evs) or not _changes_a_right_unit(single, evs))


def _ranked(singles: list[_Single], evs) -> list[_Single]:
    """Most wrong units matched on their own first; catalogue order next (a stable sort)."""
    return sorted(singles, key=lambda s: -s.units("agree", evs, "wrong"))


def _reproducing_groups(singles: list[_Single], evs, finding: Finding, budget: int = MAX_MODELS) -> list[tuple]:
    """Smallest combinations of relevant forms whose composed model agrees on every unit.

    Single forms first: most files have one bug, which one form reproduces on every call, and
    trying each form on the calls the candidate gets wrong first rules most forms out on their
    first call (ranking every form needs every wrong call). Then combinations of two and three,
    of one size tried most promising first (`_most_promising_first`), at most MAX_MODELS composed models in all."""
    order = _cheap_first(evs)
    exact = [s for s in singles if all(s.fits[ev.key].agree.all() for ev in order) and _relevant(s, order)]
    if exact:
        return [(s.form,) for s in _ranked(exact, evs)]
    relevant = _ranked([s for s in singles if _relevant(s, order)], evs)
    wrong = np.concatenate([ev.wrong for ev in evs]) if evs else np.zeros(0, bool)

    def on_wrong(s: _Single, units) -> np.ndarray:  # per unit, False where the candidate is right
        return np.concatenate([units(s.fits[ev.key]) & ev.wrong if ev.any_wrong else ev.wrong for ev in evs]) if evs else wrong

    differs = {id(s): on_wrong(s, lambda f: f.differs) for s in relevant}
    matches = {id(s): on_wrong(s, lambda f: f.agree & f.differs) for s in relevant}
    for size in range(2, MAX_BUGS + 1):
        found = []
        combos = [c for c in itertools.combinations(relevant, size) if len({s.form.bug for s in c}) == size]
        combos.sort(key=lambda c: _most_promising_first(c, wrong, differs, matches))
        for combo in combos:
            if budget <= 0:
                break
            group = tuple(s.form for s in combo)
            if not _groupable(combo, evs):
                continue
            finding.models_tried += 1
            budget -= 1
            try:
                model = model_of(group)
            except Exception:  # noqa: BLE001 - a composition that does not compile is no model
                continue
            if _reproduces(model, evs, group):
                found.append(group)
        if found:
            return found
    return []


def _groupable(combo: tuple, evs) -> bool:
    """Whether the forms make one model: their hunks compose, or the ones that do not are edges
    (every change they make on the evidence is an exception or non-finite values), which an
    `_Overlay` adds to the model of the rest."""
    group = tuple(s.form for s in combo)
    if compose.composable(group):
        return True
    if group in _OVERLAYS:
        return True
    edges = [s for s in combo if _edge_only(s, evs)]
    for size in range(1, min(len(edges), len(combo) - 1) + 1):
        for chosen in itertools.combinations(edges, size):
            main = tuple(s.form for s in combo if s not in chosen)
            if len(main) == 1 or compose.composable(main):
                _OVERLAYS[group] = _Overlay(
                    model_of(main), tuple(model_of((s.form,)) for s in chosen), "attn_kit_overlay_" + "__".join(f.name for f in group)
                )
                return True
    return False


_EDGE: dict = {}  # id(form) -> whether every change it makes is an exception or non-finite (one analyse)


def _edge_only(single: _Single, evs) -> bool:
    key = id(single.form)
    if key not in _EDGE:
        fits = [single.fits[ev.key] for ev in evs]
        _EDGE[key] = any(f.differs.any() for f in fits) and all(
            not (f.differs & ~(f.wild if f.wild is not None else np.zeros_like(f.differs))).any() for f in fits
        )
    return _EDGE[key]


def _model_known(group: tuple) -> bool:
    return len(group) == 1 or compose.composable(group) or group in _OVERLAYS


def _most_promising_first(combo, wrong, differs, matches) -> tuple:
    """Sort key: combinations that change every unit the candidate gets wrong come first (a unit no
    member changes alone is rarely changed by them together), then those whose members match the
    most wrong units on their own."""
    changed = np.zeros_like(wrong)
    matched = np.zeros_like(wrong)
    for s in combo:
        changed |= differs[id(s)]
        matched |= matches[id(s)]
    return (int((wrong & ~changed).sum()), -int(matched.sum()))


def _needed_checks(group: tuple, evs, failing_ids) -> dict[str, set]:
    """For each failing check, the bugs of `group` without which its calls are not reproduced."""
    needed: dict[str, set] = {}
    checks = sorted({ev.check for ev in evs if ev.any_wrong and ev.check in failing_ids})
    for cid in checks:
        mine = [ev for ev in evs if ev.check == cid]
        needed[cid] = set()
        for form in group:
            rest = tuple(f for f in group if f is not form)
            if not rest:
                needed[cid].add(form.bug)
                continue
            if not _model_known(rest):
                needed[cid].add(form.bug)
                continue
            model = model_of(rest)
            if not _reproduces(model, mine, rest):
                needed[cid].add(form.bug)
    return needed


def _worst_unit(result: CheckResult, evs) -> tuple | None:
    """(evidence, unit index) of the row the check's own message shows, when it can be found."""
    mine = [ev for ev in evs if ev.check == result.id and ev.any_wrong]
    if not mine:
        return None
    ev = next((e for e in mine if e.call is result.failing_call), mine[-1])
    m = result.mismatch
    if m is not None and not ev.raised:
        for part in ev.parts:
            if part.rows is None or part.size != int(np.prod(m.shape[:-1], dtype=int) if len(m.shape) > 1 else 1):
                continue
            row = int(np.ravel_multi_index(m.index[:-1], m.shape[:-1])) if len(m.shape) > 1 else 0
            if ev.wrong[part.start + row]:
                return ev, part.start + row
    return ev, int(np.flatnonzero(ev.wrong)[0])


def _attribute_with_group(group, failing, evs, by_bug) -> dict[str, str]:
    """Each failing check's bug: the one that alone reproduces the row its message shows."""
    needed = _needed_checks(group, evs, {r.id for r in failing})
    out = {}
    for r in failing:
        worst = _worst_unit(r, evs)
        if worst is None:
            continue
        ev, unit = worst
        alone = [f.bug for f in group if by_bug[f.bug].fits[ev.key].agree[unit] and by_bug[f.bug].fits[ev.key].differs[unit]]
        if len(alone) == 1:
            out[r.id] = alone[0]
            continue
        need = needed.get(r.id, set())
        if len(need) == 1:
            out[r.id] = next(iter(need))
            continue
        declared = [b for b in (alone or need) if b in r.catches]
        if len(declared) == 1:
            out[r.id] = declared[0]
    return out


def _per_check(failing, evs, singles: list[_Single], finding: Finding, wrong_total: int, order) -> None:
    """No combination reproduces everything: name a bug where it alone reproduces a whole check,
    and say which failing checks something outside the catalogue still touches."""
    winners = _whole_check_matches(failing, evs, singles)
    named = []
    halves: dict[str, tuple] = {}
    for bug, hits in winners.items():
        single = max((h[1] for h in hits), key=lambda s: s.units("agree", evs, "wrong"))
        whole = {h[0] for h in hits}
        figures = _rule_figures(single, evs, wrong_total, {ev.call.fn for ev in evs if ev.check in whole})
        finding.considered.append(dict(figures, bug=bug))
        split = None if figures["named"] else _half_fix(single, evs)
        if (figures["named"] or (split and figures["share"] >= MIN_SHARE)) and not _crash_only_bugs({bug}, {bug: single}, evs, finding):
            named.append((bug, sorted({h[0] for h in hits}), figures["explained"], single))
            halves[bug] = split or ((), ())
    named.sort(key=lambda t: (-t[2], order.index(t[0]) if t[0] in order else len(order)))
    explained_checks = {c for _, checks, _, _ in named for c in checks}
    rest = [r.id for r in failing if r.id not in explained_checks and any(ev.any_wrong for ev in evs if ev.check == r.id)]
    outside = (
        f"something outside the catalogue is wrong too, in {_listed(rest)}" if rest else "something outside the catalogue is wrong too"
    )
    for bug, checks, explained, single in named:
        evidence = (
            f"explains {explained} of your {wrong_total} wrong output rows or results; on its own it "
            f"reproduces every call of {_listed(checks)}, but no combination of known bugs "
            f"reproduces all failing calls ({outside})"
        )
        still, fixed = halves[bug]
        if still:
            evidence = (
                f"explains {explained} of your {wrong_total} wrong output rows or results; it reproduces every call of "
                f"{_functions(still)}, but {_functions(fixed)} no longer {'has' if len(fixed) == 1 else 'have'} it (a half-fix)"
            )
        if single.form.variant:
            evidence += f" (in this form: {single.form.variant})"
        finding.diagnoses.append(_diagnosis(bug, evidence, checks, explained, wrong_total, still, fixed))
        finding.fallback.add(bug)
        for cid in checks:
            finding.check_bug.setdefault(cid, bug)
    if named and rest:
        finding.unexplained = rest
    if not named:
        finding.near_misses.extend(_closest(singles, evs, wrong_total))


def _half_fix(single: _Single, evs) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """A bug the candidate fixed in some functions and not in others: (the functions where the
    form reproduces every call it changes, changing a wrong unit, and changes every call the candidate
    gets wrong; the functions where every unit it changes the candidate gets right, as the
    reference does). None unless both exist and no function is mixed (a call neither reproduced
    nor right where the form acts, or wrong where the form changes nothing)."""
    kinds: dict[str, set[str]] = {}
    for ev in evs:
        fit = single.fits[ev.key]
        if not fit.differs.any():
            if ev.any_wrong:  # wrong where the form changes nothing: something else acts in this function
                kinds.setdefault(ev.call.fn, set()).add("mixed")
            continue
        if fit.agree.all():
            kind = "still" if (fit.differs & ev.wrong).any() else "same"
        else:
            kind = "fixed" if not (fit.differs & ev.wrong).any() else "mixed"
        kinds.setdefault(ev.call.fn, set()).add(kind)
    still = tuple(sorted(fn for fn, k in kinds.items() if "still" in k and k <= {"still", "same"}))
    fixed = tuple(sorted(fn for fn, k in kinds.items() if k == {"fixed"}))
    if not still or not fixed or len(still) + len(fixed) != len(kinds):
        return None
    return still, fixed


def _functions(names) -> str:
    return " and ".join(f"`{n}`" for n in names)


def _whole_check_matches(failing, evs, singles: list[_Single]) -> dict[str, list]:
    """bug id -> [(failing check, form)] where the form alone reproduces every call of the check."""
    ids = {r.id for r in failing}
    by_check: dict[str, list] = {}
    for ev in evs:
        if ev.check in ids:
            by_check.setdefault(ev.check, []).append(ev)
    winners: dict[str, list] = {}
    for cid, mine in by_check.items():
        if not any(ev.any_wrong for ev in mine):
            continue
        for s in singles:
            if all(s.fits[ev.key].agree.all() for ev in mine) and s.units("differs", mine, "wrong"):
                winners.setdefault(s.form.bug, []).append((cid, s))
    return winners


def _rule_figures(single: _Single, evs, wrong_total: int, seen_in: frozenset | set = frozenset()) -> dict:
    """The naming rule's figures for one form over every call, and whether it passes.

    agreement: of the units the form changes, the share where the candidate agrees with it, not
    counting units where the candidate is wrong in another way in a function other than those
    `seen_in` (the functions of the checks it reproduces whole): something else acts there too, as
    a bug outside the catalogue does on every output it changes. In the functions where the form is
    seen at work, a different wrong answer is evidence against it (a stray temperature is not
    double-scaling, though both halve the scores at one head width). A form that changes a unit the
    candidate gets right counts against it in full. share: of the candidate's wrong units in
    the calls the form touches, the share it explains; `contested`: the units counted out."""
    touched = [ev for ev in evs if single.fits[ev.key].differs.any()]
    differs = single.units("differs", evs)
    agrees = sum(int((single.fits[ev.key].differs & single.fits[ev.key].agree).sum()) for ev in evs)
    contested = sum(
        int((single.fits[ev.key].differs & ~single.fits[ev.key].agree & ev.wrong).sum()) for ev in touched if ev.call.fn not in seen_in
    )
    against = differs - agrees - contested  # it changes them, and the candidate is right there
    wrong_there = sum(int(ev.wrong.sum()) for ev in touched)
    explained = single.units("agree", touched, "wrong")
    agreement = agrees / (agrees + against) if agrees + against else 0.0
    share = explained / wrong_there if wrong_there else 0.0
    clean = explained / (wrong_there - contested) if wrong_there > contested else 0.0
    return {
        "agreement": agreement,
        "share": share,
        "explained": explained,
        "contested": contested,
        "global_share": explained / wrong_total if wrong_total else 0.0,
        "named": agreement >= MIN_AGREEMENT and (share >= MIN_SHARE or clean >= MIN_SHARE),
    }


def _closest(singles: list[_Single], evs, wrong_total: int, how_many: int = 2) -> list[str]:
    """The known bugs that came closest, and why each was not named: only forms that agree with the
    candidate on most of the rows they change (else the bug is no near miss, only another mistake)."""
    best: dict[str, tuple] = {}
    for s in singles:
        explained = s.units("agree", evs, "wrong")
        if not explained:
            continue
        differs = s.units("differs", evs)
        agrees = sum(int((s.fits[ev.key].differs & s.fits[ev.key].agree).sum()) for ev in evs)
        if 2 * agrees <= differs:  # a near miss reproduces most of the rows it changes, or is no near miss
            continue
        if s.form.bug not in best or explained > best[s.form.bug][0]:
            best[s.form.bug] = (explained, agrees, differs)
    ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))[:how_many]
    lines = []
    for bug, (explained, agrees, differs) in ranked:
        why = []
        if explained < MIN_SHARE * wrong_total:
            why.append(f"it accounts for only {explained} of your {wrong_total} wrong rows or results")
        if differs and agrees < differs:
            why.append(f"it would change {differs} rows or results and you match it on {agrees}")
        why.append("it reproduces no failing check's calls on its own, nor with other known bugs")
        lines.append(f"{bug} came closest but was not named: " + "; ".join(why))
    return lines


def _listed(checks) -> str:
    checks = list(checks)
    return ", ".join(checks[:4]) + (f" and {len(checks) - 4} more" if len(checks) > 4 else "")


def _diagnosis(
    bug_id: str, evidence: str, checks, explained: int = 0, wrong_total: int = 0, still: tuple = (), fixed: tuple = ()
) -> Diagnosis:
    bug = catalog.bugs().get(bug_id)
    return Diagnosis(
        bug_id,
        bug.title if bug else bug_id,
        evidence,
        bug.symptom if bug else "",
        bug.fix if bug else "",
        tuple(checks),
        explained,
        wrong_total,
        tuple(still),
        tuple(fixed),
    )
