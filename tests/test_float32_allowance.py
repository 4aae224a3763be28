"""The float32 allowance (kit/compare/arrays.py): a float32 solution is judged against the oracle run in
float32 (diagnose.float32_twin), with an allowance set by the call's rounding level relative to each
row's magnitude, not by one row's luck; a real bug stays far outside it.

The unit tests build rows by hand; the gradings show correct float32 files of our own passing on
several seeds and float32 bug files still failing with their bug named."""

from __future__ import annotations

import numpy as np
import pytest

from attn_kit.compare import arrays

from helpers import CORPUS, graded

EPS32 = float(np.finfo(np.float32).eps)


def rows_with_rounding(rng, n=6, width=8, level=1e-5):
    """float64 rows and a float32-like sample whose error is `level` of each row's magnitude, except
    row 0, where the sample happens to be exact."""
    exact = rng.normal(size=(n, width)) * rng.uniform(0.5, 50.0, size=(n, 1))
    size = np.abs(exact).max(axis=1, keepdims=True)
    sample = exact + level * size * rng.choice([-1.0, 1.0], size=exact.shape)
    sample[0] = exact[0]
    return exact, sample, size


def test_a_row_whose_float32_sample_is_exact_gets_the_calls_rounding_level():
    """The fragile case: the float32 reference is exact in one row by luck, while the candidate's
    float32 code rounds that row as much as the others. The row keeps the call's allowance."""
    exact, sample, size = rows_with_rounding(np.random.default_rng(3))
    tol = arrays.float32_tolerance(exact, sample)
    candidate_row0 = exact[0] + 2e-5 * size[0]  # rounded as much as the other rows, twice over
    assert np.all(np.abs(candidate_row0 - exact[0]) <= tol[0])
    # the old rule's allowance there (its floor alone) would not have held it
    assert np.any(np.abs(candidate_row0 - exact[0]) > arrays.F32_FLOOR * EPS32 * (np.abs(exact[0]) + size[0]))


def test_the_allowance_follows_each_rows_magnitude():
    exact, sample, size = rows_with_rounding(np.random.default_rng(4))
    tol = arrays.float32_tolerance(exact, sample)
    ratio = tol.max(axis=1) / size[:, 0]
    assert np.ptp(ratio) < 0.5 * ratio.max()  # the same share of each row, large or small
    assert tol.max() < 1e-3 * size.max()


@pytest.mark.parametrize("share", [1e-2, 1e-3])
def test_a_bug_sized_difference_is_outside_the_allowance(share):
    exact, sample, size = rows_with_rounding(np.random.default_rng(5))
    buggy = exact + share * size
    ok, _ = arrays.within_float32(buggy, exact, sample)
    assert not ok


def test_without_a_float32_reference_only_the_floor_applies():
    exact = np.array([[1.0, -2.0, 4.0]])
    tol = arrays.float32_tolerance(exact, None)
    assert np.allclose(tol, arrays.F32_FLOOR * EPS32 * (np.abs(exact) + 4.0))


def test_rows_of_zeros_and_non_finite_samples_do_not_break_the_level():
    exact = np.array([[0.0, 0.0], [1.0, 2.0], [3.0, -1.0]])
    sample = np.array([[0.0, 0.0], [1.0 + 1e-6, np.nan], [3.0, -1.0 - 3e-6]])
    tol = arrays.float32_tolerance(exact, sample)
    assert np.isfinite(tol).all() and np.all(tol[0] == 0.0) and np.all(tol[1:] > 0)


CORRECT32 = [
    CORPUS / "families" / "np32_correct.py",
    CORPUS / "precision" / "screen_float32_einsum.py",
    CORPUS / "precision" / "rope_float32_production.py",
]
BUGGY32 = [
    (CORPUS / "families" / "np32_transposed_wo.py", ["weights-transposed"]),
    (CORPUS / "precision" / "screen_float32_model_width.py", ["scale-by-model-width"]),
]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4])
@pytest.mark.parametrize("path", CORRECT32, ids=lambda p: p.name)
def test_a_correct_float32_file_passes_on_several_seeds(path, seed):
    report = graded(path, seed)
    assert report.passed, [(r.id, r.message) for r in report.results if r.status != "pass"]
    assert not report.diagnosis


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3])
@pytest.mark.parametrize("path,bugs", BUGGY32, ids=lambda p: getattr(p, "name", ""))
def test_a_float32_bug_file_is_still_named(path, bugs, seed):
    report = graded(path, seed)
    assert not report.passed
    assert sorted(d.bug for d in report.diagnosis) == bugs
