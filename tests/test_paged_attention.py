"""paged-attention: both references against torch attention over dense K/V gathered with torch
indexing, the statement's numbers, garbage that must not leak in, and one CLI smoke test."""

from __future__ import annotations

import ast
import math
import os
import re

import numpy as np
import pytest

from attn_kit.base.paths import solutions_dir
from attn_kit.checks import paged_attention as paged_checks
from attn_kit.diagnosis.diagnose import load_module
from attn_kit.load import catalog

from conftest import CORPUS, check_json, need_torch

CORPUS_MORE = CORPUS / "more"

REFS = {name: load_module(str(solutions_dir("paged-attention") / f"reference_{name}.py")) for name in ("lists", "numpy")}


@pytest.fixture(scope="module")
def torch():
    if os.environ.get("CI"):
        import torch as module  # CI installs torch: a missing torch must fail there, not skip

        return module
    return need_torch()


def torch_paged(torch, q, k_pool, v_pool, tables, lengths):
    """Gather each sequence's dense K/V with torch index arithmetic, then SDPA per sequence."""
    F = torch.nn.functional
    kp, vp = torch.tensor(k_pool), torch.tensor(v_pool)
    bs = kp.shape[1]
    q = torch.tensor(np.asarray(q, dtype=np.float64))
    out = torch.zeros(q.shape[0], q.shape[1], vp.shape[-1], dtype=torch.float64)
    for b, n in enumerate(lengths):
        if n == 0:
            continue
        t = torch.arange(int(n))
        table = torch.tensor([int(x) for x in tables[b]])
        flat = table[t // bs] * bs + t % bs  # row in the flattened pool
        keys = kp.reshape(-1, *kp.shape[2:])[flat].transpose(0, 1)  # H×n×d
        values = vp.reshape(-1, *vp.shape[2:])[flat].transpose(0, 1)
        out[b] = F.scaled_dot_product_attention(q[b][:, None], keys, values)[:, 0]
    return out.numpy()


@pytest.mark.parametrize("name", sorted(REFS))
def test_references_match_torch_over_gathered_keys(torch, name):
    rng = np.random.default_rng(41)
    for lengths, bs, H, d, extra, share, scale in (
        ([5, 0, 9], 4, 2, 4, 1, False, 1.0),
        ([1, 8, 3], 2, 3, 5, 2, True, 1.0),
        ([16, 12], 8, 1, 3, 0, True, 1.0),
        ([7, 7, 2, 30], 1, 2, 2, 1, False, 1.0),
        ([6, 11], 4, 2, 4, 1, False, 30.0),
    ):
        case = paged_checks.build(
            rng,
            lengths,
            block_size=bs,
            H=H,
            d=d,
            extra=extra,
            share=share,
            scale=scale,
            garbage=(0.0,) if name == "lists" else (np.nan, 1e30),
        )
        expected = torch_paged(torch, case.q, case.k_pool, case.v_pool, case.tables, case.lengths)
        q = case.q if name == "numpy" else case.q.tolist()
        got = REFS[name].paged_attention(q, case.k_pool, case.v_pool, case.tables, case.lengths)
        assert np.isfinite(np.asarray(got)).all()
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(case.expected, expected, rtol=1e-9, atol=1e-12)  # the checks' dense oracle


def test_references_ignore_garbage_and_accept_numpy_tables():
    rng = np.random.default_rng(42)
    case = paged_checks.build(rng, [6, 3, 0], block_size=4, extra=2, share=True)
    for ref in REFS.values():
        a = np.asarray(ref.paged_attention(case.q, case.k_pool, case.v_pool, case.tables, case.lengths))
        b = np.asarray(ref.paged_attention(case.q, case.k_pool, case.v_pool, [np.array(t) for t in case.tables], np.array(case.lengths)))
        assert np.isfinite(a).all() and np.array_equal(a, b) and not a[2].any()


def test_statement_numbers_are_what_the_reference_computes():
    text = catalog.exercise("paged-attention").statement
    # an assignment may continue on more deeply indented lines (kept within 80 columns)
    joined = re.sub(r"\n {5,}", " ", text)
    given = {m.group(1): ast.literal_eval(m.group(2)) for m in re.finditer(r"^\s{4}(\w+)\s*=\s*(\[.*\])\s*$", joined, re.MULTILINE)}
    assert given["q"] == paged_checks.PUBLIC_Q and given["block_tables"] == paged_checks.PUBLIC_TABLES
    assert given["k_pool"] == paged_checks.PUBLIC_K_POOL and given["v_pool"] == paged_checks.PUBLIC_V_POOL
    assert given["context_lens"] == paged_checks.PUBLIC_LENS

    def literal(label):
        return ast.literal_eval(re.search(re.escape(label) + r"\s*`(\[[^`]*\])`", text).group(1))

    out = REFS["numpy"].paged_attention(
        *(np.array(given[n], float) for n in ("q", "k_pool", "v_pool")), given["block_tables"], given["context_lens"]
    )
    np.testing.assert_allclose(out, literal("Output:"), atol=5e-7)
    keys = np.array(given["k_pool"])[[2, 2, 0], [0, 1, 0], 0]
    assert keys.tolist() == [[0, 1], [1, 1], [1, 0]] and "[0, 1], [1, 1], [1, 0]" in text
    s = keys @ np.array(given["q"][0][0]) / math.sqrt(2)
    np.testing.assert_allclose(s, literal("`[1, 2, 1] / sqrt(2)` ="), atol=5e-7)
    w = np.exp(s - s.max())
    np.testing.assert_allclose(w / w.sum(), literal("weights"), atol=5e-7)


def test_cli_grades_the_lists_reference():
    data, code = check_json(solutions_dir("paged-attention") / "reference_lists.py", "--seed", "3")
    assert code == 0 and data["exercise"] == "paged-attention" and data["passed"]


@pytest.mark.slow
def test_test_tests_scores_the_weak_file():
    """(The strong file's grading is in test_testgrade.py, with the other exercises' strong files.)"""
    from attn_kit.practice import testgrade

    weak = testgrade.grade_tests(CORPUS / "candidate_tests" / "paged_weak.py")
    assert weak.wrong_tests == [] and weak.score < 0.5 and "reads-past-context" in weak.missed


def test_a_differently_written_correct_solution_passes_and_is_detected_by_its_functions():
    from attn_kit.grading import pipeline

    report = pipeline.grade(CORPUS_MORE / "paged_correct_whole_blocks.py", pipeline.Options(seed=4))
    assert report.exercise == "paged-attention"
    assert all(r.status == "pass" for r in report.results), [(r.id, r.message) for r in report.results if r.status != "pass"]


def test_the_statements_kv_budget_figures():
    """paged-memory-budget: 32 layers, 8 KV heads of width 128, bf16, 8k tokens."""
    question = next(q for q in catalog.exercise("paged-attention").questions if q.id == "paged-memory-budget")
    per_token = 2 * 32 * 8 * 128 * 2
    assert per_token == 131072 and per_token == 128 * 1024
    assert 8192 * per_token == 2**30
    text = " ".join(question.key_points)
    assert "2 (K and V) × 32 layers × 8 heads × 128 × 2 bytes = 131072 bytes = 128 KiB" in text
    assert "8192 × 128 KiB = 1 GiB" in text


def test_repro_scripts_rebuild_inputs_holding_nan(tmp_path):
    """The garbage checks pass NaN and ±1e30 in the pool: the --repro scripts must still run."""
    import subprocess
    import sys

    from attn_kit.grading import pipeline
    from attn_kit.report import repro

    report = pipeline.grade(solutions_dir("paged-attention") / "bugs" / "reads-past-context.py", pipeline.Options(seed=1))
    written = repro.write(report, tmp_path)
    garbage = [p for p in written if "garbage" in p.name]
    assert garbage and "nan" in garbage[0].read_text()
    proc = subprocess.run([sys.executable, str(garbage[0])], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr  # it runs, and says yours differs
    assert "yours:" in proc.stdout and "expected (the reference):" in proc.stdout
    assert "compared: " in proc.stdout and "entries differ" in proc.stdout
