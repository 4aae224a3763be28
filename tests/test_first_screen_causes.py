"""Each cause on the first screen in one or two lines at 80 columns: the named bug, the wrong rows
it explains, where, and the fix in a phrase (the catalogue's `fix_short`, in the exercise's own
wording where it has one). Every bug of every exercise is rendered in its longest form: a large
row count, the exercise's two longest function names as the place, as a half-fix and as named by
a probe; each must fit two lines and keep its whole fix phrase."""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.console import Console

from attn_kit.base.records import CallStatus, Outcome
from attn_kit.load import catalog
from attn_kit.render import screen
from attn_kit.render.check import THEME
from attn_kit.report.results import PROBE_EVIDENCE, Call, CheckResult, CheckStatus, Diagnosis, Report

WIDTH = 80
KINDS = {"rows": {}, "half-fix": {"half": True}, "probe": {"probe": True}}
# a half-fix needs two functions, one fixed and one still with the bug
CASES = [
    (e.id, b, kind)
    for e in catalog.exercises().values()
    for b in e.bug_ids
    for kind in KINDS
    if kind != "half-fix" or len(e.function_names) > 1
]


def _plain(out: Console, renderable) -> list[str]:
    return ["".join(seg.text for seg in line).rstrip() for line in out.render_lines(renderable, out.options, pad=False)]


def longest_cause(exercise: catalog.Exercise, bug_id: str, **kind) -> tuple[Diagnosis, Report]:
    """The cause with the most to say: 9,999 of 99,999 rows, in the two longest functions."""
    bug = exercise.bug(bug_id)
    assert bug is not None
    fns = sorted(exercise.function_names, key=len, reverse=True)[:2]
    results = [
        CheckResult(
            id=f"check-{i}",
            title="a check",
            status=CheckStatus.FAIL,
            points=0,
            max_points=1,
            failing_call=Call(fn=fn, args=(), kwargs={}, outcome=Outcome(CallStatus.OK)),
        )
        for i, fn in enumerate(fns)
    ]
    rows = {} if kind.get("probe") else {"explained": 9999, "wrong_total": 99999}
    half = {"still_in": (fns[0],), "fixed_in": (fns[-1],)} if kind.get("half") else {}
    evidence = PROBE_EVIDENCE + "the returned weights are softmax(c · q·k) with c = 0.3536 = 1/sqrt(8)" if kind.get("probe") else ""
    d = Diagnosis(bug_id, bug.title, evidence, bug.symptom, bug.fix, tuple(r.id for r in results), fix_short=bug.fix_short, **rows, **half)
    return d, Report(exercise.id, "solution.py", 1, results, diagnosis=[d])


@pytest.mark.parametrize(("exercise_id", "bug_id", "name"), CASES, ids=[f"{e}:{b}:{k}" for e, b, k in CASES])
def test_every_cause_fits_two_lines_with_its_whole_fix(exercise_id, bug_id, name):
    exercise = catalog.exercise(exercise_id)
    kind = KINDS[name]
    d, rep = longest_cause(exercise, bug_id, **kind)
    out = Console(width=WIDTH, file=io.StringIO(), theme=THEME, highlight=False)
    lines = _plain(out, screen._cause(d, rep, out))
    text = " ".join(" ".join(lines).split())
    assert 1 <= len(lines) <= 2, "\n".join(lines)
    assert d.fix_short, f"{bug_id} has no fix_short in {exercise_id}"
    assert f"Fix: {d.fix_short}." in text, text
    assert text.startswith(f"● {bug_id}")
    if kind.get("half"):
        assert f"`{d.still_in[0]}` still has it" in text, text
    elif kind.get("probe"):
        assert "a probe saw it" in text and "c = 0.3536" not in text, text  # what it saw is under the worst failure
    else:
        assert "9999" in text, text


def test_a_short_cause_keeps_every_word():
    """A cause that fits says all it has: the total of wrong rows and every function."""
    exercise = catalog.exercise("mha-screen")
    d, rep = longest_cause(exercise, "no-scaling")
    d = dataclasses.replace(d, explained=12, wrong_total=40)
    out = Console(width=WIDTH, file=io.StringIO(), theme=THEME, highlight=False)
    text = " ".join(" ".join(_plain(out, screen._cause(d, rep, out))).split())
    assert text == (
        "● no-scaling: 12 of 40 wrong rows, in `multi_head_attention` and `stable_softmax`. "
        "Fix: Divide the scores by sqrt(hd) before softmax."
    )


def test_each_exercise_wording_wins_over_the_shared_phrase():
    """mha-masked-bias's D is already one head's width: its phrase says √D, not √(D / heads)."""
    shared = catalog.bugs()["scale-by-model-width"].fix_short
    own = catalog.exercise("mha-masked-bias").bug("scale-by-model-width")
    assert own is not None and own.fix_short != shared and "√D" in own.fix_short and "num_heads" not in own.fix_short
