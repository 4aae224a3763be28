"""attention-backward: the reference against torch autograd through an independent masked
attention, the finite-difference helper of the checks against autograd too, the statement's
numbers, and one CLI smoke test."""

from __future__ import annotations

import ast
import math
import os
import re
from types import SimpleNamespace

import numpy as np
import pytest

from attn_kit.base.paths import solutions_dir
from attn_kit.checks import attention_backward as bw_checks
from attn_kit.diagnosis.diagnose import load_module
from attn_kit.load import catalog

from conftest import CORPUS, check_json, need_torch

CORPUS_MORE = CORPUS / "more"

REF = load_module(str(solutions_dir("attention-backward") / "reference_numpy.py"))


@pytest.fixture(scope="module")
def torch():
    if os.environ.get("CI"):
        import torch as module  # CI installs torch: a missing torch must fail there, not skip

        return module
    return need_torch()


def autograd(torch, q, k, v, dout, mask):
    """Gradients of sum(out * dout) by torch autograd; all-blocked rows zeroed with torch.where
    (no NaN reaches the backward: the row is given something to attend to, then replaced by 0)."""
    t = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    scores = t[0] @ t[1].transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        allowed = torch.tensor(mask)[:, None]
        empty = ~allowed.any(-1, keepdim=True)
        p = torch.softmax(scores.masked_fill(~(allowed | empty), float("-inf")), -1)
        p = torch.where(empty, torch.zeros_like(p), p)
    else:
        p = torch.softmax(scores, -1)
    (p @ t[2] * torch.tensor(dout)).sum().backward()
    return [x.grad.numpy() for x in t]


def at_own_shape(rng) -> SimpleNamespace:
    """What a check's ctx gives the suite's `case`: its rng, and the dimensions as asked (no relaxation)."""
    return SimpleNamespace(rng=rng, dims=lambda **dims: dims)


@pytest.mark.parametrize(
    "T, S, d, dv, masked, scale",
    [(3, 5, 4, 2, True, 1.0), (4, 4, 3, 3, False, 1.0), (6, 2, 2, 5, True, 1.0), (1, 1, 1, 1, False, 1.0), (5, 5, 4, 4, True, 15.0)],
)
def test_reference_matches_torch_autograd(torch, T, S, d, dv, masked, scale):
    rng = np.random.default_rng(T * 1000 + S * 100 + d)
    q, k, v, dout = bw_checks.case(at_own_shape(rng), 2, 3, T, S, d, dv, scale=scale)
    mask = bw_checks.random_mask(rng, 2, T, S, blocked_rows=1) if masked else None
    got = REF.attention_backward(q, k, v, dout, mask)
    for g, want in zip(got, autograd(torch, q, k, v, dout, mask)):
        assert np.isfinite(g).all()
        np.testing.assert_allclose(g, want, rtol=1e-9, atol=1e-10)


def test_checks_forward_is_what_torch_differentiates(torch):
    """The finite-difference check's forward agrees with a torch forward, and its differences with autograd."""
    rng = np.random.default_rng(52)
    q, k, v, dout = bw_checks.case(at_own_shape(rng), 1, 2, 3, 4, 3, 2)
    mask = bw_checks.random_mask(rng, 1, 3, 4, blocked_rows=1)
    grads = autograd(torch, q, k, v, dout, mask)
    eps = 1e-5
    for i in range(3):
        delta = rng.normal(size=(q, k, v)[i].shape)
        plus, minus = [q, k, v], [q, k, v]
        plus[i], minus[i] = plus[i] + eps * delta, minus[i] - eps * delta
        numeric = (bw_checks.loss(*plus, dout, mask) - bw_checks.loss(*minus, dout, mask)) / (2 * eps)
        assert numeric == pytest.approx(float(np.sum(grads[i] * delta)), rel=1e-6, abs=1e-9)


def test_fully_blocked_rows_pass_no_gradient():
    rng = np.random.default_rng(53)
    q, k, v, dout = bw_checks.case(at_own_shape(rng), 1, 1, 3, 3, 2, 2)
    mask = np.ones((1, 3, 3), bool)
    mask[0, 1] = False
    dq, dk, dv = REF.attention_backward(q, k, v, dout, mask)
    assert not dq[0, 0, 1].any()
    _, dk2, dv2 = REF.attention_backward(q, k, v, dout * np.array([1, 0, 1])[None, None, :, None], mask)
    np.testing.assert_array_equal(dk, dk2)  # query 1's dout reaches nothing
    np.testing.assert_array_equal(dv, dv2)


def test_statement_numbers_are_what_the_reference_computes():
    text = catalog.exercise("attention-backward").statement
    given = {m.group(1): ast.literal_eval(m.group(2)) for m in re.finditer(r"^\s{4}(\w+)\s*=\s*(\[.*\])\s*$", text, re.MULTILINE)}
    assert (given["q"], given["k"], given["v"], given["dout"]) == (
        bw_checks.PUBLIC_Q,
        bw_checks.PUBLIC_K,
        bw_checks.PUBLIC_V,
        bw_checks.PUBLIC_DOUT,
    )
    q, k, v, dout = (np.array(given[n], float) for n in ("q", "k", "v", "dout"))

    def literal(label):
        return ast.literal_eval(re.search(re.escape(label) + r"\s*`(\[[^`]*\])`", text).group(1))

    s = q[0, 0] @ k[0, 0].T / math.sqrt(2)
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    dp = dout[0, 0] @ v[0, 0].T
    ds = p * (dp - (p * dp).sum(1, keepdims=True))
    for label, value in (("Scores Z", s), ("P", p), ("dP", dp), ("dZ", ds)):
        np.testing.assert_allclose(value, literal(label), atol=5e-7)
    dq, dk, dv = REF.attention_backward(q, k, v, dout)
    np.testing.assert_allclose(dq[0, 0], literal("Result: dq"), atol=5e-7)
    np.testing.assert_allclose(dk[0, 0], literal("dk"), atol=5e-7)
    np.testing.assert_allclose(dv[0, 0], literal("dv"), atol=5e-7)


def test_cli_grades_the_reference():
    data, code = check_json(solutions_dir("attention-backward") / "reference_numpy.py", "--seed", "3")
    assert code == 0 and data["exercise"] == "attention-backward" and data["passed"]


@pytest.mark.slow
def test_test_tests_scores_the_weak_file():
    """(The strong file's grading is in test_testgrade.py, with the other exercises' strong files.)"""
    from attn_kit.practice import testgrade

    weak = testgrade.grade_tests(CORPUS / "candidate_tests" / "backward_weak.py")
    assert weak.wrong_tests == [] and weak.score < 0.5
    # T ≠ S in its shape test makes both transposition mistakes raise: that is all it catches
    assert weak.caught == ["dv-not-transposed", "dk-from-wrong-operand"]


def test_a_differently_written_correct_solution_passes_and_is_detected_by_its_functions():
    from attn_kit.grading import pipeline

    report = pipeline.grade(CORPUS_MORE / "backward_correct_einsum.py", pipeline.Options(seed=4))
    assert report.exercise == "attention-backward"
    assert all(r.status == "pass" for r in report.results), [(r.id, r.message) for r in report.results if r.status != "pass"]
