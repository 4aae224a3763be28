"""What --locate answers: a verified edit (Found), a screened single edit and what it showed
(Partial), and the whole answer with its JSON (Located)."""

from __future__ import annotations

from dataclasses import dataclass, field

from attn_kit.grading.locate.edits import Edit
from attn_kit.grading.locate.matching import Trace

# --- the search -----------------------------------------------------------------------------------


@dataclass
class Found:
    """A verified edit (one or two rewrites) and what it repairs."""

    edits: tuple[Edit, ...]
    repairs: tuple[str, ...]  # the failing checks it makes pass
    bugs: tuple[str, ...]  # diagnosed known bugs it corresponds to
    diff: list[tuple[int, list[str], list[str]]]

    @property
    def lines(self) -> tuple[int, ...]:
        return tuple(sorted({line for e in self.edits for line in e.lines}))

    def to_json(self, fix: bool) -> dict:
        out = {
            "lines": list(self.lines),
            "what": [f"line {e.start[0]}: {e.what}" for e in self.edits],
            "operators": [e.operator for e in self.edits],
            "repairs": list(self.repairs),
            "bugs": list(self.bugs),
        }
        if fix:
            out["diff"] = [{"line": first, "before": before, "after": after} for first, before, after in self.diff]
        return out


@dataclass(frozen=True)
class Partial:
    """A single edit that was screened and rejected, and what it showed: the failing checks it
    repaired, those that ran and still failed, and how much closer those came (`_closer`)."""

    edit: Edit
    repaired: frozenset[str]
    still: frozenset[str]
    closer: float


@dataclass
class Located:
    found: Found | None
    tried: int = 0  # edited files run in the sandbox
    proposed: int = 0  # edits the operators proposed
    seconds: float = 0.0
    stopped: str = "exhausted"  # exhausted | budget | passed
    depends: list[tuple[str, int, int]] = field(default_factory=list)  # (function, first line, last line)
    failing: tuple[str, ...] = ()
    trace: Trace | None = None  # where the traced values first go wrong
    partial: Found | None = None  # no full edit: one verified to fix some failing checks and break none
    cpu: bool = True  # `seconds` is CPU time (kit and workers) and the code's blocked time, not wall time
    runs: int = 0  # runs of edited copies (and the traced run) started
    late: int = 0  # runs asked for once the budget was spent: none of them was started
    # no full edit: the diagnosed bugs whose fix is new code, (bug, what the fix is, its shape's lines)
    new_code: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)

    def to_json(self, fix: bool = False) -> dict:
        return {
            "divergences": self.trace.to_json()["divergences"] if self.trace else [],
            "partial": self.partial.to_json(fix) if self.partial else None,
            "new_code": [{"bug": bug, "why": why, "code": list(code)} for bug, why, code in self.new_code],
            "found": self.found.to_json(fix) if self.found else None,
            "tried": self.tried,
            "proposed": self.proposed,
            "seconds": round(self.seconds, 3),
            "stopped": self.stopped,
            "failing": list(self.failing),
            "depends": [{"function": f, "first_line": a, "last_line": b} for f, a, b in self.depends],
        }
