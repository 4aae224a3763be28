"""The search: trace, propose, then try single edits in rank order and pairs guided by what the
singles repaired, until one is verified or the budget (kit CPU seconds) runs out."""

from __future__ import annotations

import ast
import dataclasses
import itertools
from collections.abc import Callable, Iterable
from pathlib import Path

from attn_kit.checks import stages as stage_table
from attn_kit.grading import pipeline
from attn_kit.grading.clock import Budget
from attn_kit.grading.locate.edits import Edit, apply, diff
from attn_kit.grading.locate.matching import Trace
from attn_kit.grading.locate.propose import propose
from attn_kit.grading.locate.results import Found, Located, Partial
from attn_kit.grading.locate.verify import Runner
from attn_kit.load import catalog, preflight
from attn_kit.report.results import FAILED, CheckStatus, Report

DEFAULT_BUDGET = 10.0
RESERVE_SHARE = 0.15  # of the budget, at most, kept back to verify a partial edit
RESERVE_MIN = 0.5  # seconds


def reachable(tree: ast.Module, roots: set[str]) -> set[str]:
    """The module-level functions and classes `roots` use, directly or through each other."""
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    seen: set[str] = set()
    todo = [r for r in roots if r in defs]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(defs[name]):
            if isinstance(node, ast.Name) and node.id in defs and node.id not in seen:
                todo.append(node.id)
    return seen


def _focus_functions(tree: ast.Module, traced: Trace | None) -> set[str]:
    """The module-level functions and classes holding a divergence line (searched even when no
    failing check called them by name: a method, a helper reached through an object)."""
    if not traced:
        return set()
    lines = {d.line for d in traced.divergences}
    return {
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and any(n.lineno <= line <= (n.end_lineno or n.lineno) for line in lines)
    }


def _new_code(report: Report, partial: Found | None) -> list[tuple[str, str, tuple[str, ...]]]:
    """The diagnosed bugs (at most two) that a partial edit does not fix and whose fix is new
    code: what the fix is, and its shape (checks/stages.py NEW_CODE)."""
    fixed = set(partial.bugs) if partial else set()
    shapes = ((d.bug, stage_table.new_code(d.bug)) for d in report.diagnosis if d.bug not in fixed)
    return [(bug, shape[0], shape[1]) for bug, shape in shapes if shape is not None][:2]


def _best_partial(runner: Runner, text: str, partial: list[Partial], failing: tuple[str, ...], diagnosed: set[str]) -> Found | None:
    """No full edit: the single edit that repaired the most failing checks, verified on the run's
    seed to repair them without breaking a check the file passed; None when there is none."""
    for p in sorted((p for p in partial if p.repaired), key=lambda p: (-len(p.repaired), p.edit.rank))[:2]:
        repaired = runner.verify_partial(apply(text, [p.edit]))
        if repaired:
            bugs = tuple(b for b in p.edit.bugs if b in diagnosed)
            return Found((p.edit,), tuple(c for c in failing if c in repaired), bugs, diff(text, [p.edit]))
    return None


def locate(
    path: str | Path,
    report: Report,
    options: pipeline.Options,
    budget: float = DEFAULT_BUDGET,
    progress: Callable[[str, int, int], None] | None = None,
) -> Located:
    """Search for the smallest edit of the file at `path` that makes `report`'s failing checks
    pass (see the package's docstring). `progress(phase, done, total)` is told as it goes."""
    failing = tuple(r.id for r in report.results if r.status in FAILED)
    if not failing:
        return Located(None, stopped="passed")
    # kit CPU time and the candidate's blocked time; every run is bounded by what is left of it
    search = _Search(Path(path), report, options, failing, Budget(budget), progress)
    try:
        return search.run()
    finally:
        search.runner.close()


class _Search:
    """One search's state: the traced divergences, the ranked edits, the singles tried so far and
    what each showed (`partial`), and the queue of pairs built from them."""

    def __init__(
        self,
        path: Path,
        report: Report,
        options: pipeline.Options,
        failing: tuple[str, ...],
        budget: Budget,
        progress: Callable[[str, int, int], None] | None,
    ) -> None:
        self.budget, self.progress, self.failing = budget, progress, failing
        self.report = report
        self.source = preflight.read_source(path)
        tree = self.source.tree
        exercise = catalog.exercise(report.exercise)
        roots = {call.fn for r in report.results if r.status in FAILED for call in r.calls}
        functions = reachable(tree, roots) if roots else None
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and (functions is None or n.name in functions)]
        self.diagnosed = {d.bug for d in report.diagnosis}
        passing_calls = {call.fn for r in report.results if r.status == CheckStatus.PASS for call in r.calls}
        failing_calls = {call.fn for r in report.results if r.status in FAILED for call in r.calls}
        options = dataclasses.replace(options, seed=report.seed, exercise=exercise.id)
        self.runner = Runner(path, report, options, exercise, budget)
        traced = self.runner.follow(report)
        focus = _focus_functions(tree, traced)
        searched = None if functions is None else functions | focus
        self.edits = propose(self.source.text, tree, searched, self.diagnosed, frozenset(passing_calls - failing_calls), traced)
        depends = [(n.name, n.lineno, n.end_lineno or n.lineno) for n in defs]
        self.located = Located(None, proposed=len(self.edits), depends=depends, failing=failing, trace=traced, cpu=budget.cpu)
        # one diagnosed bug: most likely one mistake, so a single edit is rejected at its first failing
        # check; otherwise it runs on to a second, to learn which checks it repairs (for the pairs)
        self.misses = 1 if len(self.diagnosed) == 1 else 2
        self.tried_pairs: set[tuple[int, int]] = set()
        self.partial: list[Partial] = []
        self.queue: list[tuple[Edit, Edit]] = []
        self.built: tuple[int, bool] = (-1, True)
        self.index = 0
        self.turn = 0
        # kept back once a single edit has repaired some failing checks: what grading that partial
        # edit takes (about one grade of the file), so it is verified and shown when time runs out
        graded = sum(r.seconds for r in report.results)
        self.reserve = min(budget.seconds * RESERVE_SHARE, max(RESERVE_MIN, graded))

    def run(self) -> Located:
        """Singles in rank order; pairs from a queue rebuilt whenever a single repairs something.
        Suspecting several mistakes (misses == 2), singles and pairs alternate; otherwise pairs
        wait for half the budget, or for the singles to run out."""
        while True:
            if self.budget.over() or (self.budget.left() <= self.reserve and any(p.repaired for p in self.partial)):
                return self.finish(None, "budget")
            singles_left = self.index < len(self.edits)
            self._rebuild(singles_left)
            if self._pairs_now(singles_left):
                if (pair := self._next_pair()) is not None:
                    return self.finish(pair, "found")
                continue
            if not singles_left:
                return self.finish(None, "exhausted")
            if (single := self._next_single()) is not None:
                return self.finish(single, "found")

    def _rebuild(self, singles_left: bool) -> None:
        if self.built == (len(self.partial), singles_left):
            return
        self.queue = [
            p
            for p in _pairs(self.partial, self.edits, self.diagnosed, any_two=not singles_left, catches=self.runner.catches)
            if (id(p[0]), id(p[1])) not in self.tried_pairs
        ]
        self.built = (len(self.partial), singles_left)

    def _pairs_now(self, singles_left: bool) -> bool:
        later = (self.misses == 2 or self.budget.spent() > self.budget.seconds / 2) and self.turn % 2 == 1
        now = bool(self.queue) and (not singles_left or later)
        self.turn += 1
        return now

    def _next_pair(self) -> Found | None:
        a, b = self.queue.pop(0)
        if (id(a), id(b)) in self.tried_pairs:
            return None
        if self.progress:
            done = len(self.tried_pairs) // 2 + 1
            self.progress("pair", done, done + len(self.queue))
        self.tried_pairs.update({(id(a), id(b)), (id(b), id(a))})
        text = apply(self.source.text, [a, b])
        ok, _ = self.runner.screen(text, misses=1)
        if ok and self.runner.verify(text):
            return self.found(tuple(sorted((a, b), key=lambda e: e.start)))
        return None

    def _next_single(self) -> Found | None:
        edit = self.edits[self.index]
        self.index += 1
        if self.progress:
            self.progress("single", self.index, len(self.edits))
        text = apply(self.source.text, [edit])
        ok, repaired = self.runner.screen(text, misses=self.misses)
        if ok and self.runner.verify(text):
            return self.found((edit,))
        if repaired or self.runner.closer > 0:
            self.partial.append(Partial(edit, frozenset(repaired), frozenset(self.runner.still), self.runner.closer))
        return None

    def found(self, chosen: tuple[Edit, ...]) -> Found:
        bugs = tuple(b for b in dict.fromkeys(b for e in chosen for b in e.bugs) if b in self.diagnosed) or tuple(sorted(self.diagnosed))
        return Found(chosen, self.failing, bugs, diff(self.source.text, chosen))

    def finish(self, found: Found | None, stopped: str) -> Located:
        located = self.located
        located.found, located.stopped = found, stopped
        if found is None:
            located.partial = _best_partial(self.runner, self.source.text, self.partial, self.failing, self.diagnosed)
            located.new_code = _new_code(self.report, located.partial)
        located.seconds = self.budget.spent()
        located.tried = self.runner.count
        located.runs, located.late = self.budget.runs, self.budget.late
        return located


def _pairs(
    partial: list[Partial],
    edits: list[Edit],
    diagnosed: frozenset[str] | set[str] = frozenset(),
    any_two: bool = True,
    catches: Callable[[Iterable[str]], set[str]] = lambda ids: set(),
) -> list[tuple[Edit, Edit]]:
    """Pairs to try, without overlaps or repeats. Taken in turn from four lists: two edits that
    each repaired some failing checks (those that together cover most first); an edit that
    repaired some checks or came closer, with an edit whose kind repairs a bug, other than its
    own, that a check it left failing catches (`catches` names them); two edits that each came closer; two edits
    matching two different diagnosed bugs (the best-ranked of each first). Then a repairing edit
    with any other edit, in rank order; with `any_two` (the singles have run out), then any two of
    the first 40."""
    pairs: list[tuple[Edit, Edit]] = []
    seen: set[tuple[int, int]] = set()

    def add(a: Edit, b: Edit) -> None:
        if a is not b and (id(a), id(b)) not in seen and not a.overlaps(b):
            seen.update({(id(a), id(b)), (id(b), id(a))})
            pairs.append((a, b))

    repairing = [p for p in partial if p.repaired]
    with_any = [(p.edit, b) for p in sorted(repairing, key=lambda p: -len(p.repaired)) for b in edits[:120]]
    lists = (_covering(repairing), _guided(partial, edits, catches), with_any, _closer_pairs(partial), _matching(edits, diagnosed))
    for turn in itertools.zip_longest(*lists):
        for pair in turn:
            if pair is not None:
                add(*pair)
    for a, b in itertools.combinations(edits[:40] if any_two else [], 2):  # last: any two of the best
        add(a, b)
    return pairs


def _covering(repairing: list[Partial]) -> list[tuple[Edit, Edit]]:
    """Two repairing edits, those that together repair the most failing checks first."""
    return [
        (a.edit, b.edit)
        for _, _, a, b in sorted(
            ((-len(a.repaired | b.repaired), a.edit.rank + b.edit.rank, a, b) for a, b in itertools.combinations(repairing, 2)),
            key=lambda s: (s[0], s[1]),
        )
    ]


def _guided(partial: list[Partial], edits: list[Edit], catches: Callable[[Iterable[str]], set[str]]) -> list[tuple[Edit, Edit]]:
    """An edit that repaired or came closer, with the edits for another bug its still-failing
    checks catch: the best-ranked edit for each such bug first, then the second of each, ..."""
    guided: list[tuple[Edit, Edit]] = []
    for p in sorted(partial, key=lambda p: (-len(p.repaired), -p.closer))[:12]:
        wanted = catches(p.still) - set(p.edit.bugs)  # another mistake than the one it fixed
        by_bug = [[e for e in edits if bug in e.bugs] for bug in sorted(wanted)]
        partners = dict.fromkeys(e for turn in itertools.zip_longest(*by_bug) for e in turn if e is not None)
        guided.extend((p.edit, b) for b in list(partners)[:30])
    return guided


def _closer_pairs(partial: list[Partial]) -> list[tuple[Edit, Edit]]:
    nearer = sorted((p for p in partial if p.closer > 0), key=lambda p: -p.closer)[:20]
    return [(a.edit, b.edit) for a, b in sorted(itertools.combinations(nearer, 2), key=lambda ab: -(ab[0].closer + ab[1].closer))]


def _matching(edits: list[Edit], diagnosed: frozenset[str] | set[str]) -> list[tuple[Edit, Edit]]:
    """Two edits for two different diagnosed bugs, the best-ranked of each first."""
    groups = [[e for e in edits if bug in e.bugs][:20] for bug in sorted(diagnosed)]
    return [
        (a, b)
        for _, a, b in sorted(
            ((i + j, a, b) for g, h in itertools.combinations(groups, 2) for i, a in enumerate(g) for j, b in enumerate(h)),
            key=lambda s: s[0],
        )
    ]
