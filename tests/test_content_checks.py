"""What the statements require is graded (issue 15): a T×S array of any floating dtype fails
tiled-softmax's memory check, and the ValueErrors that tiled-softmax and mha-masked-bias promise
are checked, each by a check worth a point that names what was expected.

Each new verdict is shown failing on a corpus file and passing on the reference."""

from __future__ import annotations

import numpy as np
import pytest

from attn_kit.base.harness import measure
from attn_kit.base.paths import reference_files, solutions_dir
from attn_kit.checks import tiled_softmax as tiled
from attn_kit.diagnosis.diagnose import load_module

from conftest import need_torch
from helpers import CORPUS, graded

FLOAT16 = CORPUS / "followups" / "tiled_float16_scores.py"
TILED_NO_VALUE_ERROR = CORPUS / "followups" / "tiled_no_value_error.py"
MASKED_NO_VALUE_ERROR = CORPUS / "masked_bias" / "no_value_error.py"


def status(report, check_id: str) -> tuple[str, str]:
    [result] = [r for r in report.results if r.id == check_id]
    return result.status, result.message


def test_a_float16_score_matrix_is_over_the_bound_at_the_checks_sizes():
    """Measured as the check measures (tracemalloc from the start of the call), at the check's
    T and S: the float16 T×S candidate is over the bound, the reference well under it."""
    rng = np.random.default_rng(3)
    T, S, w, block = tiled.MEMORY_T, tiled.MEMORY_S, tiled.MEMORY_WIDTH, 64
    q, k, v = rng.normal(size=(T, w)), rng.normal(size=(S, w)), rng.normal(size=(S, w))
    mask = tiled.random_mask(rng, T, S)
    bound = tiled.memory_bound(T, block, w)
    assert 2 * T * S > bound  # the float16 matrix alone does not fit
    _, cheat = measure(load_module(str(FLOAT16)).tiled_attention, q, k, v, mask, block)
    reference = load_module(str(solutions_dir("tiled-softmax") / "reference_numpy.py"))
    _, honest = measure(reference.tiled_attention, q, k, v, mask, block)
    assert cheat["peak_bytes"] > bound >= 2 * honest["peak_bytes"], (cheat, honest, bound)


@pytest.mark.slow
def test_the_memory_check_fails_a_float16_score_matrix_and_passes_the_reference():
    got, message = status(graded(FLOAT16, seed=1), "memory-stays-within-bound")
    assert got == "fail" and "float16" in message and "S = 4096" in message
    assert status(graded(reference_files("tiled-softmax")[0], seed=1), "memory-stays-within-bound")[0] == "pass"


def test_tiled_block_size_below_one_must_raise():
    got, message = status(graded(TILED_NO_VALUE_ERROR, seed=1), "value-error-when-block-size-below-one")
    assert got == "fail" and "block_size=-2 should raise ValueError" in message
    reference = graded(reference_files("tiled-softmax")[0], seed=1)
    assert status(reference, "value-error-when-block-size-below-one")[0] == "pass" and reference.passed
    check = next(c for c in tiled.SUITE.checks if c.id == "value-error-when-block-size-below-one")
    assert check.points == 1


@pytest.mark.slow
def test_masked_bias_heads_that_do_not_divide_must_raise():
    need_torch()
    from attn_kit.checks import mha_masked_bias as masked

    got, message = status(graded(MASKED_NO_VALUE_ERROR, seed=1), "value-error-when-heads-do-not-divide")
    assert got == "fail" and "heads=0 should raise ValueError" in message
    for path in reference_files("mha-masked-bias"):
        report = graded(path, seed=1)
        assert status(report, "value-error-when-heads-do-not-divide")[0] == "pass", path.name
    check = next(c for c in masked.SUITE.checks if c.id == "value-error-when-heads-do-not-divide")
    assert check.points == 1


# --- kv-cache: one preallocation rule everywhere --------------------------------------------------


def test_kv_cache_preallocation_rule_is_the_same_in_checks_statement_hints_question_and_rubric():
    """Issue 15 item 2: count only the filled rows, allow a preallocated buffer with an int length.
    A solution written that way passes the cache count, and every text that states the rule
    states this one."""
    import re

    from attn_kit.load import catalog

    report = graded(CORPUS / "followups" / "kv_cache_preallocated.py", seed=1)
    assert report.passed and status(report, "cache-holds-2btd-numbers")[0] == "pass"
    exercise = catalog.exercise("kv-cache")
    flat = {"statement": exercise.statement, "starter": exercise.starter}
    flat |= {f"hint {n} ({h.step})": h.text for n, h in enumerate(exercise.hints, 1) if h.title == "What the cache holds"}
    flat |= {f"question {q.id}": " ".join(q.key_points) for q in exercise.questions if q.id == "cache-layout"}
    flat |= {f"rubric {d.dimension}": " ".join(d.anchors) for d in exercise.scoring if d.dimension == "systems"}
    flat = {k: " ".join(v.split()) for k, v in flat.items()}
    assert "The reading we chose" in flat["statement"] and "counts the *filled* rows" in flat["statement"]
    for where in ("statement", "starter", "hint 6 (concept)", "hint 10 (code)", "question cache-layout", "rubric systems"):
        assert re.search(r"length", flat[where]), where  # the buffer says how much is filled
    for where, text in flat.items():
        assert not re.search(r"\b(no|never|not|without)\s+(a\s+)?prealloc", text, re.IGNORECASE), where
