"""Evidence from probes: narrow questions asked of the candidate's public functions.

A probe is one question (is the mask applied? what factor divides the scores? does b_v reach the
output? what does a row with no allowed key give?) put to the candidate's own function, in the same
sandbox as the checks, on inputs built for that question, and read against what the reference and
each bug would give. The inputs and the reading are the exercise's data: a PROBES table beside its
checks (checks/<exercise>.py), each entry a `Probe` whose `ask(asker)` returns an `Answer` or None.
Expected values are computed here, in the kit's process (`asker.oracle`), never in the candidate's.

A probe answers only when its question's answer is plain whatever else the file gets wrong: its
inputs make the other mistakes of the catalogue irrelevant (no mask for the scale, zero scores for
the mask's pattern), and it reads a pattern that only the bug makes (a fitted constant that must
agree across every estimate; an output that stays *exactly* the same). Otherwise it stays silent.
A probe that needs something the file does not return (attention weights from a file built on
scaled_dot_product_attention) asks the output instead where it can (does the bias, a mask, a
projection move it; with identity value and output projections, uniform weights give the plain
mean of the values, and with the values the identity the output is the weights), else stays
silent. A probe may ask at a shape the code supports (dv = d, square layers, key-padding masks)
when the checks' general shapes crash, so that its other mistakes are still named.

How probes meet the composed search (`meet`): probes run only when some check failed. A name the
search already gives stands as it is (the search reproduced the calls: it confirms), unless the
search's per-check fallback gave it (one check's calls reproduced alone, no combination
reproducing every call) and the probe's answer to the same question is another bug: then the
probe's narrow reading wins. A probe's
bug is added only when the search named nothing from the probe's question (`Probe.bugs`, which
holds the answers that exclude each other: one scale factor, one pattern of blocked keys), and
only for the failing checks that declare they catch it: a bug no failing check can show is not
named. Its evidence is the probe's own words about the candidate's behaviour.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attn_kit.base.errors import ProbeSilent as Silent
from attn_kit.base.records import CallStatus, Outcome, TensorValue
from attn_kit.load import catalog
from attn_kit.report.results import PROBE_EVIDENCE, CheckResult, Diagnosis

PROBE_TIMEOUT = 2.0  # seconds for one probe call: the inputs are a few numbers
BUDGET = 3.0  # seconds of probing at most, in all: a net for slow code (a probe's call takes milliseconds)
BLOCKED = "skipped because"  # a check skipped for a failed prerequisite (grading.pipeline.BLOCKED)


@dataclass(frozen=True)
class Answer:
    bug: str
    evidence: str  # in words, about the candidate's own behaviour


@dataclass(frozen=True)
class Probe:
    id: str
    bugs: tuple[str, ...]  # the bugs this question can name; they exclude each other
    ask: Callable[[Asker], Answer | None]
    # names its answer accounts for, which it replaces: the same behaviour seen from farther off
    # (an added constant that absorbs ordinary scores makes an empty row look uniform)
    explains: tuple[str, ...] = ()


@dataclass
class Asker:
    """What a probe may do: call the candidate's functions (no mutation record, a short deadline)
    and read the kit's own reference. `source` is the candidate's SourceFile (which library it
    imports), as a check's ctx has it."""

    run: Callable[[str, tuple, dict], Outcome]  # (fn, args, kwargs) -> Outcome, in the sandbox
    oracle: Any
    source: Any = None
    deadline: float = field(default_factory=lambda: time.monotonic() + BUDGET)
    calls: int = 0
    kept: dict = field(default_factory=dict)  # answers the probes share (the same call without a mask)

    def call(self, fn: str, *args: Any, **kwargs: Any) -> Any:
        """The candidate's answer; Silent when it raised, hung, or the probing budget is spent."""
        if time.monotonic() > self.deadline:
            raise Silent("budget")
        self.calls += 1
        outcome = self.run(fn, args, kwargs)
        if outcome.status != CallStatus.OK:
            raise Silent(outcome.describe_failure())
        return outcome.value

    def array(self, value: Any, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """A returned value as a float64 array (of this shape), else Silent."""
        if isinstance(value, TensorValue):
            value = value.array
        try:
            arr = np.asarray(value, dtype=float)
        except (TypeError, ValueError) as exc:
            raise Silent("unreadable") from exc
        if shape is not None and arr.shape != tuple(shape):
            raise Silent("shape")
        return arr


def ask_all(probes: Sequence[Probe], asker: Asker) -> list[tuple[Probe, Answer]]:
    """Every probe's answer, in table order (silent probes left out)."""
    answers = []
    for probe in probes:
        try:
            with np.errstate(all="ignore"):
                answer = probe.ask(asker)
        except Silent:
            continue
        if answer is not None:
            answers.append((probe, answer))
    return answers


def meet(finding: Any, answers: Sequence[tuple[Probe, Answer]], results: Sequence[CheckResult]) -> list[Diagnosis]:
    """Add the probes' names to the finding (diagnose.Finding) where the search gave none of the
    question's bugs; the diagnoses added."""
    named = {d.bug for d in finding.diagnoses}
    added = []
    for probe, answer in answers:
        if answer.bug not in named:
            named -= _overruled(finding, probe, answer)
        if answer.bug in named or named & set(probe.bugs):
            continue  # the search answered this question (or another probe did): its name stands
        checks = tuple(r.id for r in results if answer.bug in r.catches and _failed(r))
        if not checks:
            continue  # no failing check shows this bug: no name
        bug = catalog.bugs().get(answer.bug)
        diagnosis = Diagnosis(
            answer.bug,
            bug.title if bug else answer.bug,
            PROBE_EVIDENCE + answer.evidence,
            bug.symptom if bug else "",
            bug.fix if bug else "",
            checks,
        )
        if probe.explains:
            named -= _replaced(finding, probe.explains, answer.bug)
        finding.diagnoses.append(diagnosis)
        added.append(diagnosis)
        named.add(answer.bug)
        for cid in checks:
            finding.check_bug.setdefault(cid, answer.bug)
        finding.unexplained[:] = [cid for cid in finding.unexplained if cid not in checks]  # a probe's name covers them
    if added:
        finding.near_misses[:] = [n for n in finding.near_misses if not any(n.startswith(d.bug + " ") for d in added)]
    return added


def _overruled(finding: Any, probe: Probe, answer: Answer) -> set[str]:
    """The names the per-check fallback gave to this probe's question that the probe's answer
    contradicts, taken out of the finding (with the checks attributed to them): a bug that
    reproduced one check's calls alone, where another bug of the same question would too, is
    weaker evidence than the narrow question asked of that question (a causal bound read off
    the zeros of the weights, say)."""
    out = {d.bug for d in finding.diagnoses if d.bug in probe.bugs and d.bug != answer.bug and d.bug in getattr(finding, "fallback", ())}
    if out:
        finding.diagnoses[:] = [d for d in finding.diagnoses if d.bug not in out]
        for cid in [c for c, bug in finding.check_bug.items() if bug in out]:
            del finding.check_bug[cid]
    return out


def _replaced(finding: Any, explained: tuple[str, ...], bug: str) -> set[str]:
    """The names in `explained` taken out of the finding, their checks now the probe's `bug`'s."""
    out = {d.bug for d in finding.diagnoses if d.bug in explained}
    if out:
        finding.diagnoses[:] = [d for d in finding.diagnoses if d.bug not in out]
        for cid, named in list(finding.check_bug.items()):
            if named in out:
                finding.check_bug[cid] = bug
    return out


def _failed(result: CheckResult) -> bool:
    return result.status in ("fail", "error") or (result.status == "skip" and result.message.startswith(BLOCKED))


# --- readings shared by the exercises' probes ----------------------------------------------------


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Exactly the same numbers (the output did not move at all)."""
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))


def moved(a: np.ndarray, b: np.ndarray) -> float:
    """How far apart two arrays are (largest difference; inf when the shapes differ)."""
    if a.shape != b.shape:
        return float("inf")
    return float(np.nanmax(np.abs(a - b))) if a.size else 0.0


def fit_factor(weights: np.ndarray, scores: np.ndarray) -> tuple[float, float] | None:
    """(c, row sum) such that every row of `weights` is softmax(c * scores) times the row sum, read
    off the log-ratios of each row's weights; None when the rows do not agree on one c and one sum
    (some other mistake acts on these weights) or a weight is not positive."""
    w = weights.reshape(-1, weights.shape[-1])
    s = scores.reshape(-1, scores.shape[-1])
    if w.shape != s.shape or not np.isfinite(w).all() or (w <= 0).any():
        return None
    estimates = []
    for wr, sr in zip(w, s):
        top = int(np.argmax(sr))
        for j in range(len(sr)):
            if abs(sr[top] - sr[j]) > 0.5:
                estimates.append(np.log(wr[top] / wr[j]) / (sr[top] - sr[j]))
    sums = w.sum(axis=-1)
    if not estimates or np.ptp(sums) > 1e-5 * np.abs(sums).max():
        return None
    c = float(np.median(estimates))
    if not np.isfinite(c) or np.ptp(estimates) > 1e-4 * max(abs(c), 1e-3):
        return None
    return c, float(sums.mean())


def scale_answer(c: float, total: float, D: int, H: int, reference: float = 1.0) -> Answer | None:
    """Which scaling a fitted factor `c` (relative to the raw dot products) and row sum show, for
    per-head width D and H heads; None for the right one or for a factor the catalogue does not
    describe."""
    d = float(D)
    said = f"the returned weights are softmax(c · q·k) with c = {c:.4g}"

    def near(x: float, y: float) -> bool:
        return abs(x - y) <= 2e-3 * abs(y)

    if not near(total, 1.0):
        if near(total, 1.0 / np.sqrt(d)) and near(c, 1.0):
            return Answer(
                "scale-after-softmax",
                f"{said} and each row sums to {total:.4g} = 1/sqrt({D}): the scores went in unscaled and the weights were scaled after",
            )
        return None
    if near(c, 1.0 / np.sqrt(d)):
        return None
    if near(c, 1.0):
        return Answer("no-scaling", f"{said}: the scores are not divided by sqrt({D})")
    if H > 1 and near(c, 1.0 / np.sqrt(d * H)):
        return Answer("scale-by-model-width", f"{said} = 1/sqrt({D * H}): divided by sqrt of the model width, not of the head width {D}")
    if near(c, 1.0 / d):
        return Answer("double-scaling", f"{said} = 1/{D}: divided by sqrt({D}) twice")
    return None


def projection_answer(unmoved: Callable[[str, Any], bool], names: Sequence[tuple[str, str]], w_o_change: Any) -> Answer | None:
    """The bias probes' reading, for every exercise with q, v and output projections: `names` are
    the (bias, its weight) pairs of q, v and the output, in that order, as the exercise calls them;
    `unmoved(name, change)` asks whether adding `change` to that parameter leaves the output as it
    was. No answer when the values' weight does not reach the output (nothing to ask); an output
    weight that changes nothing is no-output-projection; else the biases that change nothing where
    their weight is used are biases-ignored."""
    (b_q, _), (_, w_v), (_, w_o) = names
    if unmoved(w_v, 0.5):
        return None
    if unmoved(w_o, w_o_change):
        return Answer(
            "no-output-projection", f"changing {w_o} changed nothing in your output: the heads' concatenation is returned as it is"
        )
    # a bias counts as ignored only where its weight is used: queries made from the wrong weight
    # are another mistake, not an ignored bias
    used = [b for b, w in names if b != b_q or not unmoved(w, 0.5)]
    ignored = [name for name in used if unmoved(name, 1.0)]
    if not ignored:
        return None
    return Answer("biases-ignored", f"changing {' or '.join(ignored)} by 1 changed nothing in your output (the reference's output moves)")


def both_widths(first: Answer | None, second: Answer | None, width: int) -> Answer | None:
    """The scaling answer when two head widths give the same bug, else None: one width alone cannot
    tell a missing 1/sqrt(D) from a stray constant that equals it there."""
    if first is None or second is None or first.bug != second.bug:
        return None
    return Answer(first.bug, f"{first.evidence}; the same at head width {width}")


def blocked_row_answer(row: np.ndarray, raw: np.ndarray | None, where: str) -> Answer | None:
    """What a row with no allowed key gave (the reference gives zeros): uniform, NaN, or the softmax
    of its raw scores (`raw`, when known); None for zeros or anything else."""
    if row.size < 2:
        return None
    if np.isnan(row).all():
        return Answer("blocked-row-nan", f"{where} came back as NaN (the reference gives zeros)")
    if not np.isfinite(row).all():
        return None
    if np.allclose(row, 1.0 / row.size, rtol=1e-6, atol=1e-9):
        return Answer("blocked-row-uniform", f"{where} came back uniform, {1.0 / row.size:.4g} for each key (the reference gives zeros)")
    if raw is not None and np.allclose(row, raw, rtol=1e-5, atol=1e-8) and not np.allclose(raw, raw.flat[0]):
        return Answer(
            "additive-mask-leaks",
            f"{where} came back as the softmax of its unmasked scores: the mask was added to the scores, "
            "and an added constant changes nothing when every key of the row is blocked",
        )
    return None


def blocked_output_answer(rows: np.ndarray, mean: np.ndarray, unmasked: np.ndarray, where: str) -> Answer | None:
    """What queries with no allowed key output, for code that returns no weights (identity value and
    output projections, so that uniform weights give the plain mean of the values): `rows` are their
    outputs, `mean` the mean of the values, `unmasked` their outputs without the mask. The reference
    gives zeros; None for zeros or anything else."""
    if rows.size < 2:
        return None
    if np.isnan(rows).all():
        return Answer("blocked-row-nan", f"{where} came back as NaN (the reference gives zeros)")
    if not np.isfinite(rows).all():
        return None
    if np.allclose(rows, np.broadcast_to(mean, rows.shape), rtol=1e-6, atol=1e-9) and np.abs(mean).max() > 1e-3:
        return Answer(
            "blocked-row-uniform", f"{where} came back as the plain mean of the values: uniform weights (the reference gives zeros)"
        )
    if np.allclose(rows, unmasked, rtol=1e-6, atol=1e-9) and not np.allclose(unmasked, np.broadcast_to(mean, rows.shape), rtol=1e-3):
        return Answer(
            "additive-mask-leaks",
            f"{where} came back as without the mask: the mask was added to the scores, "
            "and an added constant changes nothing when every key of the row is blocked",
        )
    return None
