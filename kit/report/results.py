"""Result records: one per check, one per diagnosed bug, one per run. Plain data, JSON-ready."""

from __future__ import annotations

from dataclasses import field
from enum import StrEnum
from typing import Any, Callable

from attn_kit.base.records import Outcome
from attn_kit.base.recordtype import record


class CheckStatus(StrEnum):
    """A check's result. StrEnum: `check --json` and the history keep the same strings."""

    PASS = "pass"
    FAIL = "fail"  # the code ran and broke the property
    ERROR = "error"  # the code raised, hung, crashed or ran out of memory
    SKIP = "skip"  # not checked (does not apply, or a check it depends on failed)


FAILED = (CheckStatus.FAIL, CheckStatus.ERROR)  # the statuses that count as a failing check


@record
class Mismatch:
    """Where and by how much an array differs from what was expected."""

    what: str
    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    index: tuple[int, ...]  # the worst element
    row_label: str  # "batch 0, query 3"
    column_label: str  # "feature 17"
    expected_row: tuple[float, ...]  # a window of the worst row
    actual_row: tuple[float, ...]
    row_offset: int  # index of the first entry shown
    nan_count: int
    inf_count: int
    wrong_count: int
    total: int
    rtol: float
    atol: float
    notes: tuple[str, ...] = field(default=())

    def summary(self) -> str:
        if self.nan_count or self.inf_count:
            bad = ", ".join(
                p for p in (f"{self.nan_count} NaN" if self.nan_count else "", f"{self.inf_count} inf" if self.inf_count else "") if p
            )
            head = f"{self.what} has {bad} (of {self.total} entries)"
        else:
            head = (
                f"{self.what} row ({self.row_label}) differs: max |Δ| = {self.max_abs:.3g} at "
                f"{self.column_label} ({tolerance_words(self.atol, self.rtol)})"
            )
        if self.wrong_count > 1:
            head += f"; {self.wrong_count} of {self.total} entries are off"
        return head


def tolerance_words(atol: float, rtol: float) -> str:
    """How close a value had to be, in words: a zero term is left out, and none at all is exact."""
    if not atol and not rtol:
        return "must match exactly"
    if not rtol:
        return f"tolerance {atol:g}"
    if not atol:
        return f"tolerance {rtol:g}·|expected|"
    return f"tolerance {atol:g} + {rtol:g}·|expected|"


@record(frozen=False)
class Call:
    """One call the check made to the candidate's code, kept for diagnosis and --repro."""

    fn: str
    args: tuple
    kwargs: dict
    outcome: Outcome
    expected: Any = None  # what the reference returns, when the check computed it
    harness: str | None = None  # "module:function" the worker ran the call through, if any
    tolerance: tuple[float, float] | None = None  # (rtol, atol) the check compared this call's values with
    # kit-side only (never sent to the worker, never in JSON): how the diagnosis reruns this call on a
    # known-bug or reference module, replay(module, *args, **kwargs) -> value; None: module.<fn>(...)
    replay: Callable[..., Any] | None = field(default=None, repr=False, compare=False)


@record(frozen=False)
class CheckResult:
    id: str
    title: str
    status: CheckStatus
    points: int  # points awarded
    max_points: int
    message: str = ""
    bug: str | None = None  # the known bug this failure matches, if any
    public: bool = False
    catches: tuple[str, ...] = ()
    hint: int | None = None  # 1-based hint number that helps with this check
    case: dict = field(default_factory=dict)  # seed, shapes, the inputs that matter
    mismatch: Mismatch | None = None
    output: str = ""  # what the candidate's code printed during this check
    notes: tuple[str, ...] = ()  # informational lines (e.g. measured figures)
    calls: list[Call] = field(default_factory=list)
    failing_call: Call | None = None
    float32: float = 0.0  # largest difference accepted as float32 rounding (0: none)
    seconds: float = 0.0  # wall time the check took (kit-side only: not in `check --json`)
    supported_shape: str = ""  # the simpler shape it was judged again at, its own having raised (grading/relax.py)

    def to_json(self) -> dict:
        shape = {"supported_shape": self.supported_shape} if self.supported_shape else {}
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "message": self.message,
            "bug": self.bug,
            "points": self.points,
            "max_points": self.max_points,
            "public": self.public,
            "notes": list(self.notes),
            **shape,
        }


PROBE_EVIDENCE = "a probe: "  # how a name given by a diagnosis probe starts its evidence (diagnosis/probes.py)


@record(frozen=False)
class Diagnosis:
    bug: str
    title: str
    evidence: str
    explanation: str = ""  # what goes wrong, from the bug catalogue
    fix: str = ""
    checks: tuple[str, ...] = ()  # the failing checks whose outputs this bug explains
    explained: int = 0  # the wrong output rows or results it explains on its own (0: not counted)
    wrong_total: int = 0  # of the candidate's wrong output rows or results in all
    # a half-fix: the functions whose calls still show the bug, and those that no longer do
    still_in: tuple[str, ...] = ()
    fixed_in: tuple[str, ...] = ()
    fix_short: str = ""  # the fix in a phrase (the first screen's), from the bug catalogue

    def to_json(self) -> dict:
        return {"bug": self.bug, "title": self.title, "evidence": self.evidence}


@record(frozen=False)
class Report:
    exercise: str
    path: str
    seed: int
    results: list[CheckResult]
    diagnosis: list[Diagnosis] = field(default_factory=list)
    public_only: bool = False
    notes: list[str] = field(default_factory=list)  # e.g. "memory cap not applied: ..."
    seconds: float = 0.0
    near_misses: list[str] = field(default_factory=list)  # known bugs that came closest, when none is named
    wrong_rows: int = 0  # the wrong output rows or results the diagnosis read (0: not counted)
    unexplained: list[str] = field(default_factory=list)  # failing checks no named bug reproduces

    @property
    def passed(self) -> bool:
        """Every graded check that ran passed (a skipped check is neither passed nor failed)."""
        ran = [r for r in self.results if r.status != CheckStatus.SKIP]
        return bool(ran) and all(r.status == CheckStatus.PASS for r in ran)

    @property
    def score(self) -> tuple[int, int]:
        return (sum(r.status == CheckStatus.PASS for r in self.results), len(self.results))

    @property
    def points(self) -> tuple[int, int]:
        return (sum(r.points for r in self.results), sum(r.max_points for r in self.results))

    def to_json(self) -> dict:
        passed, total = self.score
        got, most = self.points
        return {
            "exercise": self.exercise,
            "path": self.path,
            "passed": self.passed,
            "score": {"passed": passed, "total": total, "points": got, "max_points": most},
            "seed": self.seed,
            "public_only": self.public_only,
            "checks": [r.to_json() for r in self.results],
            "diagnosis": [d.to_json() for d in self.diagnosis],
            "near_misses": list(self.near_misses),
            "notes": list(self.notes),
        }
