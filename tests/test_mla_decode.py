"""mla-decode graded on files the kit did not write: a plain-list absorbed solution passes, two
up-projecting ones (all heads at once, and one head at a time) fail only the memory bound and are
named keys-up-projected-per-step, and a float32 computation passes within float32 rounding."""

from __future__ import annotations

import pytest

from helpers import CORPUS, graded

MLA = CORPUS / "mla"


@pytest.mark.parametrize("name", ["indep_lists_absorbed.py", "float32_reference.py"])
def test_mla_correct_solutions_pass(name):
    report = graded(MLA / name, 3)
    assert report.passed, [r.id for r in report.results if r.status != "pass"]
    assert not report.diagnosis


@pytest.mark.parametrize("name", ["indep_all_heads_up_projection.py", "indep_per_head_up_projection.py"])
def test_mla_up_projection_fails_only_the_memory_bound_and_is_named(name):
    report = graded(MLA / name, 3)
    failing = [r.id for r in report.results if r.status in ("fail", "error")]
    assert failing == ["memory-stays-within-bound"]
    assert [d.bug for d in report.diagnosis] == ["keys-up-projected-per-step"]


def test_mla_float32_passes_with_a_note():
    report = graded(MLA / "float32_reference.py", 3)
    notes = " ".join(n for r in report.results for n in r.notes)
    assert "within float32 rounding" in notes
