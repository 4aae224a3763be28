"""varlen-prefill graded on files the kit did not write: a class-based one with complex-number
RoPE, a float32 one, one in plain Python loops over lists and the padded reference pass; one that
masks the whole pack with segment ids fails only the memory bound and is named
materialises-scores; one that aligns a chunk's causal bound with np.tril's default diagonal is
named causal-alignment-wrong; two forms of the varlen families are named too."""

from __future__ import annotations

import pytest

from attn_kit.base.paths import solutions_dir

from helpers import CORPUS, graded, one_quick_per

VARLEN = CORPUS / "varlen"


@pytest.mark.parametrize("name", one_quick_per(["indep_class_based.py", "indep_float32.py", "indep_plain_loops.py"], lambda n: "any"))
def test_varlen_solutions_in_other_styles_pass(name):  # the quick run grades the first style, the full suite each
    report = graded(VARLEN / name, 3)
    assert report.passed, [r.id for r in report.results if r.status != "pass"]
    assert not report.diagnosis


def test_varlen_padded_reference_passes():
    report = graded(solutions_dir("varlen-prefill") / "reference_padded.py", 3)
    assert report.passed and not report.diagnosis


def test_varlen_float32_passes_with_a_note():
    report = graded(VARLEN / "indep_float32.py", 3)
    assert max(r.float32 for r in report.results) > 0
    assert any("computes in float32" in n for n in report.notes)


def test_varlen_segment_mask_fails_only_the_memory_bound_and_is_named():
    report = graded(VARLEN / "indep_segment_mask.py", 3)
    assert [r.id for r in report.results if r.status in ("fail", "error")] == ["memory-stays-within-bound"]
    assert [d.bug for d in report.diagnosis] == ["materialises-scores"]


def test_varlen_top_left_chunks_are_named():
    report = graded(VARLEN / "indep_tril_top_left.py", 3)
    failing = {r.id for r in report.results if r.status in ("fail", "error")}
    assert "chunked-prefill-equals-one-shot" in failing and "each-document-equals-attention-run-alone" not in failing
    assert [d.bug for d in report.diagnosis] == ["causal-alignment-wrong"]


@pytest.mark.parametrize(
    ("name", "bug"),
    [("indep_query_pack_positions.py", "varlen-positions-not-restarted"), ("indep_inclusive_ends.py", "varlen-cu-seqlens-off-by-one")],
)
def test_varlen_family_forms_are_named(name, bug):
    """Forms of prompts/families.toml's varlen families, written independently: pack-wide positions
    on the queries only, and each document's end read as inclusive."""
    report = graded(VARLEN / name, 3)
    assert not report.passed
    assert [d.bug for d in report.diagnosis] == [bug]
