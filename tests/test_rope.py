"""rope: both references against an independent torch oracle (an explicit rotation matrix per
position and torch's scaled_dot_product_attention), the statement's numbers, the rotation
properties on the references, and one CLI smoke test. (Every reference passing and every bug file
being diagnosed as itself first is tests/test_catalogue.py's job.)"""

from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest

from attn_kit.base.paths import solutions_dir
from attn_kit.checks import rope as rope_checks
from attn_kit.checks.cases import params, tokens
from attn_kit.diagnosis.diagnose import load_module
from attn_kit.load import catalog

from conftest import CORPUS, TORCH_MISSING, check_json

CORPUS_MORE = CORPUS / "more"

REFS = {name: load_module(str(solutions_dir("rope") / f"reference_{name}.py")) for name in ("lists", "numpy")}


@pytest.fixture(scope="module")
def torch():
    if os.environ.get("CI"):
        import torch as module  # CI installs torch: a missing torch must fail there, not skip

        return module
    return pytest.importorskip("torch", reason=TORCH_MISSING)


def rotation_matrix(torch, p: int, hd: int, base: float):
    """hd×hd matrix R with R @ u = u rotated: a 2×2 rotation in each plane (i, i + hd/2)."""
    half = hd // 2
    R = torch.zeros(hd, hd, dtype=torch.float64)
    for i in range(half):
        a = torch.tensor(p * base ** (-2.0 * i / hd), dtype=torch.float64)
        R[i, i], R[i, i + half] = torch.cos(a), -torch.sin(a)
        R[i + half, i], R[i + half, i + half] = torch.sin(a), torch.cos(a)
    return R


def torch_rope(torch, x, positions, base=10000.0):
    x = torch.tensor(np.asarray(x, dtype=np.float64))
    hd = x.shape[-1]
    R = torch.stack([rotation_matrix(torch, int(p), hd, base) for p in positions])  # T×hd×hd
    return torch.einsum("tij,bhtj->bhti", R, x)


def torch_rope_attention(torch, x, p, H, positions, mask):
    F = torch.nn.functional
    x = torch.tensor(np.asarray(x, dtype=np.float64))
    B, T, D = x.shape
    hd = D // H
    positions = list(range(T)) if positions is None else list(positions)

    def proj(w, b):
        y = x @ torch.tensor(np.asarray(p[w], dtype=np.float64))
        return y + torch.tensor(np.asarray(p[b], dtype=np.float64)) if p.get(b) is not None else y

    def heads(y):
        return y.view(B, T, H, hd).transpose(1, 2)

    q = torch_rope(torch, heads(proj("Wq", "bq")).numpy(), positions)
    k = torch_rope(torch, heads(proj("Wk", "bk")).numpy(), positions)
    v = heads(proj("Wv", "bv"))
    allowed = torch.ones(B, 1, T, T, dtype=torch.bool) if mask is None else torch.tensor(np.asarray(mask, bool))[:, None]
    empty = ~allowed.any(-1, keepdim=True)
    safe = allowed | empty
    ctx = torch.where(empty, 0.0, F.scaled_dot_product_attention(q, k, v, attn_mask=safe))
    weights = torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(hd)).masked_fill(~safe, float("-inf")), -1)
    weights = torch.where(empty, 0.0, weights)
    out = ctx.transpose(1, 2).reshape(B, T, D) @ torch.tensor(np.asarray(p["Wo"], dtype=np.float64))
    if p.get("bo") is not None:
        out = out + torch.tensor(np.asarray(p["bo"], dtype=np.float64))
    return out.numpy(), weights.numpy()


def as_lists(p):
    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in p.items()}


@pytest.mark.parametrize("name", sorted(REFS))
def test_apply_rope_matches_an_explicit_rotation(torch, name):
    rng = np.random.default_rng(31)
    for B, H, T, hd, base in ((1, 1, 3, 2, 10000.0), (2, 3, 5, 8, 10000.0), (1, 2, 4, 6, 500.0)):
        x = rng.normal(size=(B, H, T, hd))
        positions = rng.integers(-100, 3000, size=T).tolist()
        got = REFS[name].apply_rope(x if name == "numpy" else x.tolist(), positions, base)
        np.testing.assert_allclose(np.asarray(got), torch_rope(torch, x, positions, base).numpy(), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", sorted(REFS))
def test_rope_attention_matches_torch(torch, name):
    rng = np.random.default_rng(32)
    for B, T, D, H, big, kind in (
        (2, 4, 8, 2, False, "random"),
        (1, 5, 12, 3, False, "causal"),
        (1, 3, 4, 1, True, None),
        (2, 6, 16, 4, False, "random"),
    ):
        x = tokens(rng, B, T, D, scale=20.0 if big else 1.0)
        p = params(rng, D, biases=not big, scale=3.0 if big else 1.0)
        positions = None if kind == "causal" else rng.integers(-20, 200, size=T).tolist()
        if kind == "random":
            mask = rng.random((B, T, T)) < 0.6
            mask[:, 0] = False  # a fully blocked query
        else:
            mask = None if kind is None else np.tril(np.ones((T, T), bool))[None].repeat(B, 0)
        args = (x, p) if name == "numpy" else (x.tolist(), as_lists(p))
        m = mask if name == "numpy" or mask is None else mask.tolist()
        out, weights = REFS[name].rope_attention(*args, H, positions, m, return_weights=True)
        t_out, t_weights = torch_rope_attention(torch, x, p, H, positions, mask)
        np.testing.assert_allclose(np.asarray(weights), t_weights, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(np.asarray(out), t_out, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", sorted(REFS))
def test_references_have_the_rotation_properties(name):
    ref = REFS[name]
    rng = np.random.default_rng(33)
    x = rng.normal(size=(1, 2, 4, 6))
    p, q = [3, -7, 3, 40], [5, 11, -2, 0]
    rot = np.asarray(ref.apply_rope(x.tolist(), p))
    np.testing.assert_allclose(np.linalg.norm(rot, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ref.apply_rope(x.tolist(), [0] * 4)), x, atol=0)
    np.testing.assert_allclose(
        np.asarray(ref.apply_rope(rot.tolist(), q)), np.asarray(ref.apply_rope(x.tolist(), [a + b for a, b in zip(p, q)])), atol=1e-12
    )
    with pytest.raises(ValueError, match="even"):
        ref.apply_rope(rng.normal(size=(1, 1, 2, 5)).tolist(), [0, 1])


# --- the statement's numbers -------------------------------------------------------------------


def literal_after(text: str, label: str):
    import ast

    match = re.search(re.escape(label) + r"\s*`(\[[^`]*\])`", text)
    assert match, f"no `{label}` literal in the statement"
    return ast.literal_eval(match.group(1))


def block_literal(text: str, name: str, after: str = ""):
    import ast

    text = text.split(after, 1)[1] if after else text
    match = re.search(r"^\s{4}" + name + r"\s*=\s*(\[.*\])\s*$", text, re.MULTILINE)
    return ast.literal_eval(match.group(1))


def test_statement_numbers_are_what_the_reference_computes():
    text = catalog.exercise("rope").statement
    ref = REFS["numpy"]
    x = block_literal(text, "x")
    positions = block_literal(text, "positions")
    assert x == rope_checks.PUBLIC_ROPE_X and positions == rope_checks.PUBLIC_ROPE_POSITIONS
    np.testing.assert_allclose(ref.apply_rope(x, positions), literal_after(text, "`apply_rope(x, positions)`:"), atol=5e-7)
    assert "θ = [1, 0.01]" in text and ref._angles([1], 4, 10000.0).round(12).tolist() == [[1.0, 0.01]]
    x2 = block_literal(text, "x", after="Then `rope_attention`")
    assert x2 == rope_checks.PUBLIC_X
    p = {k: np.array(v) for k, v in rope_checks.PUBLIC_PARAMS.items()}
    assert all(np.array_equal(v, np.eye(4)) for v in p.values())
    out, w = ref.rope_attention(np.array(x2), p, 1, None, np.tril(np.ones((3, 3), bool))[None], True)
    np.testing.assert_allclose(w[0, 0], literal_after(text, "Weights:"), atol=5e-7)
    np.testing.assert_allclose(out[0], literal_after(text, "Output:"), atol=5e-7)
    q = ref.apply_rope(np.array(x2)[:, None], [0, 1, 2])[0, 0]
    np.testing.assert_allclose(q[2] @ q.T / 2, literal_after(text, "(already divided by sqrt(4)) are"), atol=5e-7)
    plain = np.array(x2[0][2]) @ np.array(x2[0]).T / 2
    assert plain.tolist() == [0.5, 0.5, 1.0] and "they would be [0.5, 0.5, 1]" in text


def test_cli_grades_the_lists_reference():
    data, code = check_json(solutions_dir("rope") / "reference_lists.py", "--seed", "3")
    assert code == 0 and data["exercise"] == "rope" and data["passed"], [
        (c["id"], c["message"]) for c in data["checks"] if c["status"] != "pass"
    ]


@pytest.mark.slow
def test_test_tests_scores_the_weak_file():
    """(The strong file's grading is in test_testgrade.py, with the other exercises' strong files.)"""
    from attn_kit.practice import testgrade

    weak = testgrade.grade_tests(CORPUS / "candidate_tests" / "rope_weak.py")
    # transpose-reverses-all-axes raises on every rope_attention call, so any test that calls it catches it
    assert weak.wrong_tests == [] and set(weak.caught) == {"rope-positions-ignored", "transpose-reverses-all-axes"}


def test_a_differently_written_correct_solution_passes_and_is_detected_by_its_functions():
    from attn_kit.grading import pipeline

    report = pipeline.grade(CORPUS_MORE / "rope_correct_complex.py", pipeline.Options(seed=4))
    assert report.exercise == "rope"
    assert all(r.status == "pass" for r in report.results), [(r.id, r.message) for r in report.results if r.status != "pass"]


def test_the_hints_theta_figure():
    hint = next(h for h in catalog.exercise("rope").hints if "θ for hd = 4" in h.text)
    assert "[1, 0.01]" in hint.text
    assert [10000.0 ** (-2 * i / 4) for i in range(2)] == [1.0, 0.01]
