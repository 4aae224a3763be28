"""Diagnosis of solutions the kit has never seen.

tests/corpus/independent/ holds mha-screen solutions written in styles unlike the kit's own
references and bug variants (plain lists with explicit loops and a hand-written `linear`, or
NumPy einsum over B×T×H×hd), each with a classic mistake, two with two mistakes, two correct ones
and two that are wrong in ways the catalogue does not know; and one mha-masked-bias file (graded
when torch is installed, under -m slow). Diagnosis matches behaviour, not
source, so it must name the right bug(s) for these too, accuse nothing when the file passes, and
say nothing rather than guess when no known bug explains the failures.
"""

from __future__ import annotations

import numpy as np
import pytest

from attn_kit.base.paths import bug_files
from attn_kit.diagnosis import diagnose
from attn_kit.load import catalog

from conftest import need_torch
from helpers import CORPUS, check_json, graded, graded_json, one_quick_per

INDEPENDENT = CORPUS / "independent"
SEED = 7

EXPECTED = {
    # one bug each
    "lists_no_scaling.py": ["no-scaling"],
    "einsum_scale_by_model_width.py": ["scale-by-model-width"],
    "einsum_reshape_without_transpose.py": ["reshape-without-transpose"],
    "lists_heads_interleaved.py": ["heads-interleaved"],
    "lists_blocked_row_uniform.py": ["blocked-row-uniform"],
    "einsum_blocked_row_nan.py": ["blocked-row-nan"],
    "lists_mask_inverted.py": ["mask-inverted"],
    "lists_max_over_blocked.py": ["max-over-blocked"],
    "lists_softmax_overflow.py": ["softmax-overflow"],
    "einsum_causal_off_by_one.py": ["causal-off-by-one"],
    "lists_padding_masks_queries.py": ["padding-masks-queries"],
    "lists_mutates_input.py": ["mutates-input"],
    "einsum_no_output_projection.py": ["no-output-projection"],
    "einsum_softmax_wrong_axis.py": ["softmax-wrong-axis"],
    "lists_biases_ignored.py": ["biases-ignored"],
    "lists_weights_transposed.py": ["weights-transposed"],  # in the catalogue since issue 12
    # dividing the scores by the head width is 1/sqrt(hd) applied twice: double-scaling (issue 11;
    # these two were off-catalogue before that id existed)
    "lists_scaled_by_head_width.py": ["double-scaling"],
    "mb_numpy_scaled_by_d.py": ["double-scaling"],
    # builds the mask and never uses it: mask-ignored (issue 21; off-catalogue before that id existed)
    "einsum_mask_ignored.py": ["mask-ignored"],
    # two bugs each: both must be named
    "lists_no_scaling_and_uniform_rows.py": ["no-scaling", "blocked-row-uniform"],
    "einsum_no_scaling_and_nan_rows.py": ["no-scaling", "blocked-row-nan"],
    "einsum_model_width_and_off_by_one.py": ["scale-by-model-width", "causal-off-by-one"],
    # correct: passes, nobody accused
    "lists_correct.py": [],
    "einsum_correct.py": [],
    # wrong, but no known bug explains it: no guess
    "einsum_doubled_output.py": [],
}
CORRECT = {"lists_correct.py", "einsum_correct.py"}
MASKED = {"mb_numpy_scaled_by_d.py"}  # mha-masked-bias: needs torch, a few seconds


def test_every_corpus_file_has_an_expectation():
    assert sorted(p.name for p in INDEPENDENT.glob("*.py")) == sorted(EXPECTED)


def test_the_corpus_covers_at_least_eight_distinct_single_bugs():
    singles = {bugs[0] for bugs in EXPECTED.values() if len(bugs) == 1}
    assert len(singles) >= 8
    assert singles <= set(catalog.exercise("mha-screen").bug_ids)


def test_cli_reports_the_diagnosis_as_json():
    """One end-to-end run through `attn-kit check --json`; the rest grade in-process."""
    data, code = check_json(INDEPENDENT / "lists_no_scaling_and_uniform_rows.py", "--seed", str(SEED))
    assert (data["passed"], code) == (False, 1)
    assert sorted(d["bug"] for d in data["diagnosis"]) == ["blocked-row-uniform", "no-scaling"]


# the quick run grades one correct and one wrong file of each style (the name's first word), the
# full suite every file; the mha-masked-bias one (torch) runs only there
@pytest.mark.parametrize("name", one_quick_per(sorted(EXPECTED), lambda n: (n.split("_")[0], n in CORRECT), slow=MASKED.__contains__))
def test_independent_solution_is_diagnosed(name):
    if name in MASKED:
        need_torch()
    data, code = graded_json(INDEPENDENT / name, seed=SEED)  # in-process, as `check --json` reports it
    assert "error" not in data, data.get("error")
    named = [d["bug"] for d in data["diagnosis"]]
    expected = EXPECTED[name]
    if name in CORRECT:
        assert (data["passed"], code) == (True, 0)
        assert named == []
        return
    assert (data["passed"], code) == (False, 1)
    if len(expected) == 1:
        assert named == expected, f"{name}: expected exactly {expected}, got {named}"
    else:
        assert sorted(named) == sorted(expected), f"{name}: expected both of {expected}, got {named}"
    bugs = catalog.bugs()
    for d in data["diagnosis"]:
        assert d["title"] == bugs[d["bug"]].title
        assert d["evidence"].startswith("explains ")
    failing_with_bug = {c["bug"] for c in data["checks"] if c["status"] in ("fail", "error") and c["bug"]}
    assert failing_with_bug <= set(expected)


def _named(finding) -> tuple:
    return [d.bug for d in finding.diagnoses], finding.check_bug, finding.near_misses, finding.unexplained


def test_model_answers_are_kept_read_only_within_a_byte_budget_and_change_nothing(monkeypatch):
    """A diagnosis on the same kit-made inputs (a watch re-run, --locate's trials, a batch on one
    seed) reuses the bug models' answers: every one is found again, none can be written to, the
    cache stays within its byte budget, and the findings are those of a diagnosis without it."""
    exercise = catalog.exercise("mha-screen")
    results = graded(next(p for p in bug_files("mha-screen") if p.stem == "no-scaling"), seed=5).results
    monkeypatch.setattr(diagnose, "_RUNS", type(diagnose._RUNS)())
    monkeypatch.setattr(diagnose, "_KEPT", [0])
    first = diagnose.analyse(exercise, results)
    kept = dict(diagnose._RUNS)
    assert kept and diagnose._KEPT[0] == sum(size for _, size in kept.values())
    answers = [v for local, _ in kept.values() for v in (local.value if isinstance(local.value, tuple) else (local.value,))]
    assert answers and all(not a.flags.writeable for a in answers if isinstance(a, np.ndarray))
    again = diagnose.analyse(exercise, results)
    assert diagnose._RUNS.keys() == kept.keys(), "a model was run again on inputs it had answered"
    assert _named(again) == _named(first) and first.diagnoses[0].bug == "no-scaling"
    monkeypatch.setattr(diagnose, "RUNS_BYTES", 3000)  # room for a few answers: the oldest go first
    diagnose._RUNS.clear()
    diagnose._KEPT[0] = 0
    small = diagnose.analyse(exercise, results)
    assert 0 < len(diagnose._RUNS) < len(kept) and diagnose._KEPT[0] <= 3000
    assert _named(small) == _named(first)


def test_a_failing_memory_check_replays_few_models(monkeypatch):
    """A memory check's call is replayed on each model under tracemalloc, on megabytes of inputs
    (about 80 ms a model, where the other calls take well under 1 ms): the search reads it after
    the cheap calls, which rule out every form but the one that builds the score matrix, so the
    file is named after a few replays, not one per form of the exercise."""
    exercise = catalog.exercise("tiled-softmax")
    results = graded(next(p for p in bug_files("tiled-softmax") if p.stem == "materialises-scores"), seed=1).results
    replays = []
    run_local = diagnose.run_local

    def counting(module, call, *args, **kwargs):
        if call.replay is not None:
            replays.append(module.__name__)
        return run_local(module, call, *args, **kwargs)

    monkeypatch.setattr(diagnose, "run_local", counting)
    monkeypatch.setattr(diagnose, "_RUNS", type(diagnose._RUNS)())  # nothing answered before
    monkeypatch.setattr(diagnose, "_KEPT", [0])
    finding = diagnose.analyse(exercise, results)
    assert [d.bug for d in finding.diagnoses] == ["materialises-scores"]
    assert 0 < len(replays) <= 3, f"{len(replays)} memory replays: {replays}"


def test_affected_read_from_the_hunks_is_what_parsing_the_form_gives():
    """affected() reads the edited functions from the hunks' line ranges when every hunk stays in
    one function body, else it parses the form: over every bundled form both give the same set."""
    from attn_kit.diagnosis import compose

    forms = [f for e in catalog.exercises() for f in compose.all_forms(e)]
    fast = [f for f in forms if compose._edited_bodies(f, "".join(compose.read_source(f.base))) is not None]
    assert len(forms) > 100 and len(fast) > len(forms) // 2
    key = lambda f: (str(f.path), f.variant)  # noqa: E731
    assert {key(f): compose.affected(f) for f in forms} == {key(f): compose.affected_by_parsing(f) for f in forms}
    # a hunk that adds a module-level line is not read from its lines: the form is parsed
    form = forms[0]
    top = compose.Hunk(0, 0, ("LIMIT = 1\n",))
    moved = compose.BugForm(form.bug, form.path, form.base, (top,), variant="test: module-level line")
    assert compose._edited_bodies(moved, "".join(compose.read_source(form.base))) is None
    assert compose.affected(moved) is None and compose.affected_by_parsing(moved) is None
