"""Match a failing solution's behaviour against the known-bug implementations.

A solution reproduces a bug when, on the calls its failing checks made, its outputs agree with
that bug's outputs wherever the bug's outputs differ from the reference. Outputs are compared row
by row (a row is a vector along the last axis: one query's weights, one token's features), so two
bugs that touch different rows (say, no scaling and uniform weights on blocked rows) are both
found. Bugs are ranked by how many of the solution's wrong rows they explain, then picked
greedily so each reported bug explains something the ones before it did not.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import catalog
from .compare import ValueProblem, to_array
from .paths import bug_files, bug_id_of, solutions_dir
from .report import Call, CheckResult, Diagnosis

MATCH_RTOL = 1e-5
MATCH_ATOL = 1e-7
MIN_SUPPORT = 0.75       # share of the rows a bug changes on which the solution must agree with it


@functools.cache
def load_module(path: str):
    """Import one of the kit's own solution files (reference or bug) in the kit's process."""
    name = "attn_kit_solution_" + Path(path).stem.replace("-", "_").replace("@", "__") + \
        "_" + Path(path).parent.parent.name.replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    if path in _SOURCES:      # read before the first worker started: what the candidate cannot change
        exec(compile(_SOURCES[path], path, "exec"), module.__dict__)
    else:
        spec.loader.exec_module(module)
    return module


_SOURCES: dict[str, bytes] = {}


def preload(exercise: catalog.Exercise) -> None:
    """Read every bug file of the exercise now, before the sandbox's first worker starts; they are
    compiled from these bytes if diagnosis needs them."""
    for path in bug_files(exercise.id):
        _SOURCES.setdefault(str(path), path.read_bytes())


def oracle_for(exercise: catalog.Exercise):
    return load_module(str(solutions_dir(exercise.id) / exercise.oracle))


@dataclass
class Local:
    """The outcome of running one of the kit's own implementations in-process."""

    value: object = None
    raised: str = ""
    mutated: bool = False


def run_local(module, call: Call) -> Local:
    fn = getattr(module, call.fn, None)
    if fn is None:
        return Local(raised="missing")
    args, kwargs = copy.deepcopy(call.args), copy.deepcopy(call.kwargs)
    before = copy.deepcopy((args, kwargs))
    harness = _replayed_harness(call)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            value = _with_extra(*harness(fn, *args, **kwargs)) if harness else fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - a bug implementation may raise anything
        return Local(raised=type(exc).__name__)
    from .mutation import same as _same
    return Local(value=value, mutated=not _same(before, (args, kwargs)))


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
    if outcome.status == "raised":
        return Local(raised=outcome.error.type, mutated=bool(outcome.mutated))
    if outcome.status != "ok":
        return Local(raised=outcome.status, mutated=bool(outcome.mutated))
    value = _with_extra(outcome.value, outcome.extra) if _replayed_harness(call) else outcome.value
    return Local(value=value, mutated=bool(outcome.mutated))


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


def _row_close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        close = np.isclose(a, b, rtol=MATCH_RTOL, atol=MATCH_ATOL, equal_nan=True)
    return close.all(axis=-1)


@dataclass
class _Tally:
    explained: set = field(default_factory=set)
    contradicted: int = 0
    checks: set = field(default_factory=set)


def _compare_call(key, cand: Local, ref: Local, bug: Local, tally: _Tally, wrong: set, check_id: str):
    """Add one call's evidence for one bug to its tally; `wrong` collects the candidate's wrong units."""
    if bug.mutated != ref.mutated:
        unit = (key, "mutated")
        if cand.mutated:
            tally.explained.add(unit)
            tally.checks.add(check_id)
        else:
            tally.contradicted += 1
    if cand.mutated and not ref.mutated:
        wrong.add((key, "mutated"))
    if ref.raised:                          # the reference raises here (e.g. ValueError)
        return
    if cand.raised or bug.raised:
        unit = (key, "raised")
        if cand.raised:
            wrong.add(unit)
        if bug.raised and cand.raised == bug.raised:
            tally.explained.add(unit)
            tally.checks.add(check_id)
        elif bug.raised:
            tally.contradicted += 1
        return
    like = ref.value if isinstance(ref.value, tuple) else np.asarray(ref.value)
    for i, (c, r, b) in enumerate(zip(_parts(cand.value, like), _parts(ref.value, like), _parts(bug.value, like))):
        if r is None:
            continue
        rr = _rows(r)
        bug_differs = ~_row_close(_rows(b), rr) if b is not None else np.ones(len(rr), bool)
        if c is None:                       # unreadable or wrong shape: one unit for the part
            unit = (key, i, "shape")
            wrong.add(unit)
            if bug_differs.any():
                tally.contradicted += 1
            continue
        cr = _rows(c)
        cand_wrong = ~_row_close(cr, rr)
        wrong.update((key, i, j) for j in np.flatnonzero(cand_wrong))
        if b is None or not bug_differs.any():
            continue
        agree = _row_close(cr, _rows(b))
        for j in np.flatnonzero(bug_differs):
            if agree[j]:
                tally.explained.add((key, i, j))
                tally.checks.add(check_id)
            else:
                tally.contradicted += 1


def diagnose(exercise: catalog.Exercise, results: list[CheckResult]) -> list[Diagnosis]:
    """Known bugs the failing checks' outputs reproduce, most explanatory first."""
    failing = [r for r in results if r.status in ("fail", "error")]
    calls = [(r.id, n, call) for r in failing for n, call in enumerate(r.calls)]
    if not calls:
        return []
    oracle = oracle_for(exercise)
    refs = {(cid, n): run_local(oracle, call) for cid, n, call in calls}
    wrong: set = set()
    tallies: dict[str, _Tally] = {}
    for path in bug_files(exercise.id):
        bug_id = bug_id_of(path)
        module = load_module(str(path))
        tally = _Tally()
        for cid, n, call in calls:
            _compare_call((cid, n), _candidate(call), refs[(cid, n)], run_local(module, call),
                          tally, wrong, cid)
        best = tallies.get(bug_id)
        if best is None or len(tally.explained) > len(best.explained):
            tallies[bug_id] = tally        # a bug with two forms keeps the form that fits best
    supported = {b: t for b, t in tallies.items() if t.explained
                 and len(t.explained) / (len(t.explained) + t.contradicted) >= MIN_SUPPORT}
    order = list(catalog.bugs())
    found: list[Diagnosis] = []
    left = set(wrong)
    while supported:
        bug_id, tally = max(supported.items(),
                            key=lambda kv: (len(kv[1].explained & left), len(kv[1].explained),
                                            -order.index(kv[0]) if kv[0] in order else 0))
        gain = tally.explained & left
        if not gain:
            break
        del supported[bug_id]
        left -= gain
        found.append(_diagnosis(bug_id, tally, wrong))
    return found


def _diagnosis(bug_id: str, tally: _Tally, wrong: set) -> Diagnosis:
    bug = catalog.bugs().get(bug_id)
    n = len(tally.explained)
    checks = sorted(tally.checks)
    listed = ", ".join(checks[:4]) + (f" and {len(checks) - 4} more" if len(checks) > 4 else "")
    evidence = (f"explains {n} of your {len(wrong)} wrong output rows or results, in {listed}")
    if tally.contradicted:
        evidence += f"; disagrees on {tally.contradicted} where this bug alone would give something else"
    return Diagnosis(bug_id, bug.title if bug else bug_id, evidence,
                     bug.symptom if bug else "", bug.fix if bug else "", tuple(checks))
