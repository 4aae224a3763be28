"""The mock screen's rubric as data: the correctness score read off the diagnosis, and the rule
that turns the six dimension scores into a recommendation.

Correctness comes from the causes the diagnosis found, never from a count of failed checks: one
cause per named bug, plus one for the failing checks no named bug explains (the off-catalogue
remainder). Each cause has a severity (prompts/bugs.toml): "crash" (does not run on ordinary
inputs), "wrong" (wrong on ordinary inputs) or "edge" (wrong only at an edge). The score is the
best the worst cause allows (SEVERITY_SCORE), one lower when there are MANY_CAUSES or more, and
1 whenever the file does not run at all. Every exercise's correctness anchors describe these
four levels in this order (each starts with its CORRECTNESS_LEADS entry; `attn-kit dev check`).
"""

from __future__ import annotations

from dataclasses import dataclass

from attn_kit.base.errors import UsageError
from attn_kit.load import catalog
from attn_kit.report.results import FAILED, CheckResult, CheckStatus, Report

SEVERITY_SCORE = {"crash": 1, "wrong": 2, "edge": 3}  # the best correctness a cause of this severity allows
MANY_CAUSES = 3  # this many distinct causes or more lower the correctness by one (never below 1)
UNKNOWN_SEVERITY = "wrong"  # a named bug the catalogue gives no severity (dev check reports it)

# How each correctness anchor (score 1, 2, 3, 4) starts: the levels correctness() computes.
CORRECTNESS_LEADS = ("Does not run", "Runs, but wrong on ordinary inputs", "Right on ordinary inputs", "Every graded check passes")


@dataclass(frozen=True)
class Cause:
    """One distinct reason checks fail: a named bug, or (bug None) the failing checks no named bug explains."""

    bug: str | None
    severity: str
    checks: tuple[str, ...]


def severity(bug_id: str | None) -> str:
    """A named bug's severity (UNKNOWN_SEVERITY when the catalogue gives none); "" for no bug."""
    if bug_id is None:
        return ""
    known = catalog.bugs().get(bug_id)
    return (known.severity if known else "") or UNKNOWN_SEVERITY


def runs(report: Report | None) -> bool:
    """The file loaded (a report of None could not be graded) and no public example raised, except
    where a named edge-severity bug explains it (a public example of scores of 1000 that math.exp
    overflows on probes an edge: the severity says how bad that is)."""
    if report is None:
        return False
    ran = [r for r in report.results if r.status != CheckStatus.SKIP]
    return bool(ran) and not any(r.public and r.status == CheckStatus.ERROR and severity(r.bug) != "edge" for r in ran)


def _remainder_severity(results: list[CheckResult]) -> str:
    """How bad the unexplained failing checks are, from what they are: a public example that raised
    means it does not run; checks that only catch edge-severity bugs probe an edge; else wrong."""
    if any(r.public and r.status == CheckStatus.ERROR for r in results):
        return "crash"
    known = catalog.bugs()
    edge_only = all(r.catches and all(known[b].severity == "edge" for b in r.catches if b in known) for r in results)
    return "edge" if edge_only and not any(r.public for r in results) else "wrong"


def causes(report: Report) -> list[Cause]:
    """The distinct causes of the report's failing checks, named bugs first."""
    found = [Cause(d.bug, severity(d.bug), tuple(d.checks)) for d in report.diagnosis]
    explained = {c for d in report.diagnosis for c in d.checks} | {r.id for r in report.results if r.bug}
    rest = [r for r in report.results if r.status in FAILED and r.id not in explained]
    if rest:
        found.append(Cause(None, _remainder_severity(rest), tuple(r.id for r in rest)))
    return found


def correctness(report: Report | None) -> int:
    """1 to 4 from the causes (see the module docstring); a report of None could not be graded: 1."""
    if report is None or not runs(report):
        return 1
    found = causes(report)
    if not found:
        return 4
    score = min(SEVERITY_SCORE[c.severity] for c in found)
    return max(1, score - 1) if len(found) >= MANY_CAUSES else score


def correctness_reason(report: Report | None) -> str:
    """One line saying why correctness() gave its score, for the report."""
    if report is None:
        return "the file could not be graded (it does not load)"
    if not runs(report):
        return "a public example raised: the file does not run on ordinary inputs"
    found = causes(report)
    if not found:
        return "every graded check passes"
    named = [f"{c.bug} ({c.severity})" if c.bug else f"an unnamed cause in {', '.join(c.checks)} ({c.severity})" for c in found]
    many = f"; {len(found)} distinct causes lower it by one" if len(found) >= MANY_CAUSES else ""
    return f"{len(found)} cause{'s' if len(found) > 1 else ''}: " + "; ".join(named) + many


# --- the recommendation -------------------------------------------------------------------------
#
# Calibrated per level (junior, mid, senior: an exercise's [[seniority]] levels). Three rules keep
# one weakness from counting twice or vetoing the rest:
# - an edge bug counts once: it lowers correctness to 3 and robustness below 4 for the same
#   reason, so the total gets that point back (EDGE_OVERLAP);
# - one dimension below a verdict's "every dimension" floor caps the result one verdict below what
#   the other five earn instead of vetoing it (4,4,4,1,4,4 is hire, not lean no); two or more still
#   veto, and so does a level's named floor (a senior's systems);
# - the discussion's coverage of the key points feeds the systems score (systems_from_discussion).


@dataclass(frozen=True)
class Verdict:
    """A recommendation and what it needs: a minimum correctness, a minimum for every dimension
    (`each`, except the dimensions `exempt` from it), minimums for named dimensions (`at_least`),
    and a minimum total of the six scores."""

    name: str
    correctness: int = 1
    each: int = 1
    total: int = 6
    exempt: tuple[str, ...] = ()
    at_least: tuple[tuple[str, int], ...] = ()


LEVELS = ("junior", "mid", "senior")
DEFAULT_LEVEL = "mid"

# Best first, per level; the first verdict whose every floor is met is the recommendation. A junior
# is not held to systems depth; a senior is (systems ≥ 3 for hire, 4 for strong hire).
VERDICTS_BY_LEVEL = {
    "junior": (
        Verdict("strong hire", correctness=4, each=3, total=20, exempt=("systems",)),
        Verdict("hire", correctness=3, each=2, total=16, exempt=("systems",)),
        Verdict("lean no", correctness=2, each=1, total=11),
        Verdict("no"),
    ),
    "mid": (
        Verdict("strong hire", correctness=4, each=3, total=21),
        Verdict("hire", correctness=3, each=2, total=17),
        Verdict("lean no", correctness=2, each=1, total=12),
        Verdict("no"),
    ),
    "senior": (
        Verdict("strong hire", correctness=4, each=3, total=22, at_least=(("systems", 4),)),
        Verdict("hire", correctness=3, each=2, total=18, at_least=(("systems", 3),)),
        Verdict("lean no", correctness=2, each=1, total=13),
        Verdict("no"),
    ),
}
VERDICTS = VERDICTS_BY_LEVEL[DEFAULT_LEVEL]

EDGE_SCORE = SEVERITY_SCORE["edge"]  # the correctness an edge bug leaves: 3


def edge_overlap(scores: dict[str, int]) -> int:
    """1 when one edge bug is scored twice: correctness 3 (its causes show only at an edge) and
    robustness below 4 (the dimension that scores edges); the total counts it once."""
    return int(scores["correctness"] == EDGE_SCORE and scores["robustness"] < 4)


def verdicts(level: str = DEFAULT_LEVEL) -> tuple[Verdict, ...]:
    """The verdicts of a level, best first; a UsageError names the levels for any other."""
    if level not in VERDICTS_BY_LEVEL:
        raise UsageError(f"unknown level '{level}': the levels are {', '.join(LEVELS)}")
    return VERDICTS_BY_LEVEL[level]


def _floor(verdict: Verdict, dimension: str) -> int:
    named = dict(verdict.at_least).get(dimension)
    base = 1 if dimension in verdict.exempt else verdict.each
    return max(base, named or 1)


def _below(verdict: Verdict, scores: dict[str, int]) -> list[str]:
    """The dimensions other than correctness under their floor in `verdict`."""
    return [d for d, s in scores.items() if d != "correctness" and s < _floor(verdict, d)]


def unmet(verdict: Verdict, scores: dict[str, int]) -> list[str]:
    """The floors of `verdict` that `scores` (dimension -> 1..4, all six) miss, as short reasons."""
    missed = []
    if scores["correctness"] < verdict.correctness:
        missed.append(f"correctness {scores['correctness']} is below {verdict.correctness}")
    by_floor: dict[int, list[str]] = {}
    for d in _below(verdict, scores):
        by_floor.setdefault(_floor(verdict, d), []).append(f"{d} {scores[d]}")
    for floor, low in sorted(by_floor.items()):
        missed.append(f"{' and '.join(low)} {'is' if len(low) == 1 else 'are'} below {floor}")
    total = sum(scores.values()) + edge_overlap(scores)
    if total < verdict.total:
        counted = " (the edge bug counted once)" if edge_overlap(scores) else ""
        missed.append(f"total {total}{counted} is below {verdict.total}")
    return missed


def _first_met(table: tuple[Verdict, ...], scores: dict[str, int]) -> int:
    return next(i for i, v in enumerate(table) if not unmet(v, scores))


def _lone_cap(table: tuple[Verdict, ...], scores: dict[str, int]) -> tuple[int, str] | None:
    """(the capped verdict's index, the dimension) when, at the first verdict missed, exactly one
    dimension other than correctness is below its floor: the result is one step below what the
    other five earn (that dimension read as 4), never a veto."""
    first = _first_met(table, scores)
    for verdict in table[:first]:
        below = _below(verdict, scores)
        if len(below) == 1 and below[0] not in dict(verdict.at_least):  # a level's named floor is never excused
            lifted = _first_met(table, {**scores, below[0]: 4})
            return min(lifted + 1, len(table) - 1), below[0]
        if below:
            return None
    return None


def recommend(scores: dict[str, int], level: str = DEFAULT_LEVEL) -> tuple[str, list[str]]:
    """The recommendation for six scores at `level` and its reasons: why each better verdict was
    missed, then which floors the chosen one met (or which single dimension capped it)."""
    table = verdicts(level)
    chosen = _first_met(table, scores)
    last = f"{table[chosen].name}: {floors(table[chosen])}, all met"
    cap = _lone_cap(table, scores)
    if cap is not None and cap[0] < chosen:
        chosen, dimension = cap
        last = (
            f"{table[chosen].name}: {dimension} {scores[dimension]} is the one dimension below the floor; it caps "
            f"the result one step below what the other five earn instead of vetoing it"
        )
    return table[chosen].name, [f"not {v.name}: " + "; ".join(unmet(v, scores)) for v in table[:chosen]] + [last]


def floors(verdict: Verdict) -> str:
    """A verdict's floors in words: 'correctness ≥ 3, every dimension ≥ 2, total ≥ 17'."""
    parts = []
    if verdict.correctness > 1:
        parts.append(f"correctness ≥ {verdict.correctness}")
    if verdict.each > 1:
        but = f" but {' and '.join(verdict.exempt)}" if verdict.exempt else ""
        parts.append(f"every dimension{but} ≥ {verdict.each}")
    parts += [f"{d} ≥ {n}" for d, n in verdict.at_least]
    if verdict.total > len(catalog.DIMENSIONS):
        parts.append(f"total ≥ {verdict.total}")
    return ", ".join(parts) or "otherwise"


RULES = (
    "An edge bug counts once: with correctness 3 and robustness below 4, the total gets a point back.",
    "One dimension under the every-dimension floor caps the result one verdict below what the other five earn; "
    "two or more, or a level's named floor, veto it.",
    "Systems takes the discussion's coverage into account: the key points covered, required first.",
)


def systems_from_discussion(covered: list[tuple[int, int, bool]]) -> int | None:
    """The systems score the discussion supports: for each question (points covered, points in all,
    every required point covered). None without a discussion; else 4 when at least three quarters of
    all points and every required point are covered, 3 from half, 2 from a quarter, else 1."""
    if not covered or not sum(total for _, total, _ in covered):
        return None
    share = sum(got for got, _, _ in covered) / sum(total for _, total, _ in covered)
    required = all(ok for _, _, ok in covered)
    if share >= 0.75 and required:
        return 4
    return 3 if share >= 0.5 else 2 if share >= 0.25 else 1


def systems_reason(covered: list[tuple[int, int, bool]]) -> str:
    """One line saying why systems_from_discussion gave its score."""
    got, total = sum(c for c, _, _ in covered), sum(t for _, t, _ in covered)
    missed = sum(not ok for _, _, ok in covered)
    required = f"; a required point missed in {missed} of {len(covered)}" if missed else "; every required point covered"
    return f"the discussion covered {got} of {total} key points{required}"


def recommendation_range(scores: dict[str, int | None], level: str = DEFAULT_LEVEL) -> tuple[str, str]:
    """(worst, best) recommendation over every way of filling the scores still missing (None)."""
    low = {d: 1 if s is None else s for d, s in scores.items()}
    high = {d: 4 if s is None else s for d, s in scores.items()}
    return recommend(low, level)[0], recommend(high, level)[0]


def parse_scores(text: str) -> dict[str, int]:
    """`mock --interviewer --scores`: six scores 1-4, either in dimension order ("3,2,3,3,2,3") or
    named ("correctness=3,robustness=2,..."); anything else is a UsageError saying what is expected."""
    dims = catalog.DIMENSIONS
    expected = (
        f"--scores takes six scores from 1 to 4, in the order {', '.join(dims)} (for example "
        f"--scores 3,2,3,3,2,3) or named (--scores correctness=3,robustness=2,...)"
    )
    parts = [p.strip() for p in text.replace(" ", ",").split(",") if p.strip()]
    named = [p.partition("=") for p in parts]
    if all(sep for _, sep, _ in named):
        pairs = [(name.strip().lower(), value.strip()) for name, _, value in named]
    elif not any(sep for _, sep, _ in named) and len(parts) == len(dims):
        pairs = list(zip(dims, parts))
    else:
        raise UsageError(f"{expected}; got '{text}'.")
    scores = {}
    for name, value in pairs:
        if name not in dims:
            raise UsageError(f"{expected}; '{name}' is not a dimension.")
        if value not in ("1", "2", "3", "4"):
            raise UsageError(f"{expected}; {name} = '{value}' is not 1, 2, 3 or 4.")
        scores[name] = int(value)
    missing = [d for d in dims if d not in scores]
    if missing or len(pairs) != len(dims):
        raise UsageError(f"{expected}; " + (f"missing: {', '.join(missing)}." if missing else "a dimension is given twice."))
    return {d: scores[d] for d in dims}
