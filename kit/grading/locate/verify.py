"""The verification runner: every run of an edited copy of the candidate's file starts here.
`Runner.screen` runs the failing checks on one edited copy in a fresh sandbox worker (a first,
cheap filter); `Runner.verify` grades it in full on the run's seed and a second seed
(`pipeline.grade`); `Runner.verify_partial` grades a partial edit on the run's seed;
`Runner.follow` starts the traced run (tracing.follow). `prepare` starts the edited copies'
zygote beside the grading."""

from __future__ import annotations

import ast
import dataclasses
import shutil
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from attn_kit.base.errors import KitError, LoadError
from attn_kit.grading import pipeline
from attn_kit.grading.clock import Budget
from attn_kit.grading.locate import tracing
from attn_kit.grading.locate.matching import Trace
from attn_kit.load import catalog, preflight
from attn_kit.report.results import FAILED, CheckStatus, Report
from attn_kit.sandbox import zygote as sandbox_zygote
from attn_kit.sandbox.session import Sandbox

SECOND_SEED_STEP = 7919  # the verification's second seed is the run's seed plus this


def preload_for(path: Path, exercise: catalog.Exercise) -> tuple[str, ...]:
    """The modules the edited copies' zygote should hold: grading's (pipeline.preload_for), so
    the search reuses the zygote the file was graded with (importing torch in every worker would
    cost a second per edit)."""
    try:
        imported = {name for name, _ in preflight.read_source(path).imports()}
    except KitError:
        imported = set()
    return pipeline.preload_for(imported, exercise)


def prepare(path: str | Path, exercise: str | None = None) -> None:
    """Called before the file is graded when --locate will search: when the file's zygote holds
    more than its exercise needs (torch for a NumPy exercise's file that imports it), start it
    now, as a fresh interpreter, so it imports while the kit loads; grading and the search's
    edited copies then share it."""
    try:
        source = preflight.read_source(Path(path))
        ex = preflight.detect_exercise(source, exercise)
    except KitError:
        return  # grading reports it
    preload = preload_for(Path(path), ex)
    if preload and preload != ((ex.needs,) if ex.needs else ()):
        sandbox_zygote.expected_values_loaded()  # the new zygote is a fresh interpreter, never a fork of the kit
        sandbox_zygote.shared_launcher(preload)


class Runner:
    """Grades edited versions of one file in the sandbox, each in a fresh worker from the warm
    zygote, in a private temporary folder."""

    def __init__(self, path: Path, report: Report, options: pipeline.Options, exercise: catalog.Exercise, budget: Budget | None = None):
        from attn_kit.diagnosis import diagnose

        self.budget = budget or Budget(float("inf"))  # every run below starts only within it, bounded by it

        self.folder = Path(tempfile.mkdtemp(prefix="attn-kit-locate-"))
        self.path = path
        self.name = path.name if path.suffix == ".py" else "solution.py"
        self.options = options
        self.exercise = exercise
        self.suite = pipeline.suite_for(exercise)
        self.oracle = diagnose.oracle_for(exercise)
        self.checks = {c.id: c for c in self.suite.checks}
        self.original = {r.id: r.status for r in report.results}
        self.failing = [r.id for r in report.results if r.status in FAILED and r.id in self.checks]
        self.rejects = {c: 0 for c in self.failing}
        self.bug = {r.id: r.bug for r in report.results if r.bug}
        self.calls = {r.id: frozenset(c.fn for c in r.calls) for r in report.results}
        self.cost = {c: 0.05 for c in self.failing}
        self.mismatch = {r.id: r.mismatch for r in report.results}
        self.still: set[str] = set()  # after screen(): the failing checks that ran and still failed
        self.closer = 0.0  # after screen(): how much closer a still-failing check came
        # a zygote with what the file imports (torch, say) already imported: every edited copy
        # starts from it in milliseconds instead of importing torch again
        self.preload = preload_for(path, exercise)
        slowest = max((call.outcome.seconds for r in report.results for call in r.calls), default=0.0)
        self.timeout = min(options.timeout, max(1.0, 5 * slowest))
        self.count = 0

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _write(self, text: str) -> Path:
        self.count += 1
        target = self.folder / str(self.count)
        target.mkdir()
        path = target / self.name
        path.write_text(text, encoding="utf-8")
        return path

    def screen(self, text: str, misses: int = 1) -> tuple[bool, set[str]]:
        """(every failing check passes, the failing checks that passed) for the edited text; stops
        after `misses` checks still fail, running the checks that rejected most edits first. Sets
        `still` (the checks that ran and still failed) and `closer` (see `_closer`)."""
        self.still, self.closer = set(), 0.0
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return False, set()
        if not self.budget.start():
            return False, set()
        path = self._write(text)
        source = preflight.SourceFile(path, text, tree, None, tuple(n.name for n in tree.body if isinstance(n, ast.FunctionDef)))
        repaired: set[str] = set()
        order = sorted(self.failing, key=lambda c: -(self.rejects[c] + 1) / self.cost[c])
        statuses = {k: v for k, v in self.original.items()}
        left = misses
        with (
            self.budget.run(),
            Sandbox(str(path), self.timeout, self.options.memory, pure=self.options.pure, preload=self.preload) as sandbox,
        ):
            try:
                sandbox.start()
            except LoadError:
                return False, repaired
            while order:
                check_id = order.pop(0)
                started = time.perf_counter()
                result = pipeline.run_check(
                    self.checks[check_id], sandbox, self.oracle, self.options.seed or 0, statuses, self.exercise, source
                )
                self.cost[check_id] = 0.7 * self.cost[check_id] + 0.3 * (time.perf_counter() - started)
                statuses[check_id] = result.status
                if result.status == CheckStatus.PASS:
                    repaired.add(check_id)
                    continue
                self.rejects[check_id] += 1
                self.still.add(check_id)
                self.closer = max(
                    self.closer, _closer(self.original[check_id], self.mismatch.get(check_id), result.status, result.mismatch)
                )
                left -= 1
                if left <= 0:
                    return False, repaired
                # still failing: next, a check about something else (another diagnosed bug, or
                # catching other bugs), so an edit that repairs one of two mistakes shows it
                order.sort(key=lambda c: self.related(c, check_id))
        return len(repaired) == len(self.failing), repaired

    def catches(self, check_ids: Iterable[str]) -> set[str]:
        """The bugs the given checks are declared to catch, with the bug each was diagnosed with."""
        return {bug for c in check_ids if c in self.checks for bug in (*self.checks[c].catches, *([self.bug[c]] if c in self.bug else []))}

    def related(self, check_id: str, other: str) -> bool:
        """Whether two failing checks are about the same thing: the same diagnosed bug, or
        declared to catch a bug in common."""
        if self.bug.get(check_id) and self.bug.get(other):
            return self.bug[check_id] == self.bug[other]
        return self.calls.get(check_id) == self.calls.get(other) and bool(
            set(self.checks[check_id].catches) & set(self.checks[other].catches)
        )

    def follow(self, report: Report) -> Trace | None:
        """The traced run of the smallest failing calls (trace.follow); None when it cannot run."""
        if not self.budget.start():
            return None
        try:
            with self.budget.run():
                return tracing.follow(
                    str(self.path), report, min(self.options.timeout, 10.0), self.options.memory, self.options.pure, self.preload
                )
        except KitError:
            return None

    def verify_partial(self, text: str) -> set[str]:
        """The failing checks the edited file passes on the run's seed, when it fails no check the
        original passed (else none)."""
        if not self.budget.start():
            return set()
        path = self._write(text)
        try:
            with self.budget.run():
                edited = pipeline.grade(path, dataclasses.replace(self.options, exercise=self.exercise.id))
        except KitError:
            return set()
        statuses = {r.id: r.status for r in edited.results}
        if any(statuses.get(c) in FAILED for c, s in self.original.items() if s == CheckStatus.PASS):
            return set()
        return {c for c in self.failing if statuses.get(c) == CheckStatus.PASS}

    def verify(self, text: str) -> bool:
        """The edited file passes every check the original failed and fails none it passed, on
        the run's seed; and fails no check on a second seed."""
        path = self._write(text)
        seed = self.options.seed or 0
        for i, run_seed in enumerate((seed, seed + SECOND_SEED_STEP)):
            if not self.budget.start():
                return False
            try:
                with self.budget.run():
                    edited = pipeline.grade(path, dataclasses.replace(self.options, seed=run_seed, exercise=self.exercise.id))
            except KitError:
                return False
            statuses = {r.id: r.status for r in edited.results}
            if any(s in FAILED for s in statuses.values()):
                return False
            if i == 0 and any(statuses.get(c) != CheckStatus.PASS for c in self.failing):
                return False
        return True


def _closer(before_status, before, after_status, after) -> float:
    """How much closer to the expected values a check that still fails came, from 0 (no closer)
    to 1: fewer wrong entries, fewer NaN or infinities, a much smaller worst difference, or
    values where there was an exception. An edit that repairs one of two mistakes usually
    leaves every check failing, but closer: this is what pairs it with the edit for the other."""
    if before_status != CheckStatus.FAIL and after_status == CheckStatus.FAIL and after is not None:
        return 0.3
    if before is None or after is None or before.shape != after.shape:
        return 0.0
    score = 0.0
    if after.nan_count + after.inf_count < before.nan_count + before.inf_count:
        score = 0.5
    if before.wrong_count and after.wrong_count < before.wrong_count:
        score = max(score, 1 - after.wrong_count / before.wrong_count)
    finite = all(x == x and abs(x) != float("inf") for x in (before.max_abs, after.max_abs))
    if finite and before.max_abs > 0 and after.max_abs < 0.5 * before.max_abs:
        score = max(score, 0.5 * (1 - after.max_abs / before.max_abs))
    return score
