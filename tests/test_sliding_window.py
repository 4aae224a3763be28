"""sliding-window: the reference against torch's scaled_dot_product_attention with an explicit band
mask, the statement's numbers, the memory check on candidates the kit has never seen (a naive T×T
version fails only it; a differently written banded one passes), and one CLI smoke test."""

from __future__ import annotations

import ast
import math
import os
import re

import numpy as np
import pytest

from attn_kit.base.harness import measure
from attn_kit.base.paths import solutions_dir
from attn_kit.checks import sliding_window as sw_checks
from attn_kit.diagnosis.diagnose import load_module
from attn_kit.grading import pipeline
from attn_kit.load import catalog

from conftest import CORPUS, TORCH_MISSING, check_json

REF = load_module(str(solutions_dir("sliding-window") / "reference_numpy.py"))


@pytest.fixture(scope="module")
def torch():
    if os.environ.get("CI"):
        import torch as module  # CI installs torch: a missing torch must fail there, not skip

        return module
    return pytest.importorskip("torch", reason=TORCH_MISSING)


def torch_window(torch, q, k, v, window):
    T = q.shape[-2]
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    band = (j <= i) & (j > i - window)
    t = [torch.tensor(a) for a in (q, k, v)]
    return torch.nn.functional.scaled_dot_product_attention(*t, attn_mask=band).numpy()


@pytest.mark.parametrize("T, window", [(1, 1), (5, 1), (9, 2), (33, 7), (40, 16), (17, 17), (12, 50), (70, 20)])
def test_reference_matches_torch_with_a_band_mask(torch, T, window):
    rng = np.random.default_rng(T * 100 + window)
    q, k, v = (rng.normal(size=(2, 3, T, 5)) for _ in range(3))
    np.testing.assert_allclose(REF.sliding_window_attention(q, k, v, window), torch_window(torch, q, k, v, window), rtol=1e-9, atol=1e-12)
    big = q * 40, k * 40  # scores in the thousands
    got = REF.sliding_window_attention(*big, v, window)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, torch_window(torch, *big, v, window), rtol=1e-7, atol=1e-9)


def test_checks_banded_attention_matches_torch(torch):
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=(1, 2, 13, 4)) for _ in range(3))
    np.testing.assert_allclose(sw_checks.banded_attention(q, k, v, 4), torch_window(torch, q, k, v, 4), atol=1e-12)


def test_reference_rejects_a_window_below_one():
    q = np.zeros((1, 1, 2, 2))
    for window in (0, -1):
        with pytest.raises(ValueError, match="window"):
            REF.sliding_window_attention(q, q, q, window)


def test_reference_memory_stays_within_the_bound():
    m = sw_checks.MEMORY
    rng = np.random.default_rng(6)
    q, k, v = (rng.normal(size=(m["B"], m["H"], m["T"], m["d"])) for _ in range(3))
    _, extra = measure(REF.sliding_window_attention, q, k, v, m["window"])
    bound = sw_checks.memory_bound(m["B"], m["H"], m["T"], m["window"], m["d"])
    assert 0 < extra["peak_bytes"] <= bound, (extra["peak_bytes"], bound)
    assert bound < 8 * m["B"] * m["H"] * m["T"] ** 2 / 4  # the B×H×T×T scores could never fit
    # the diagnosis's replay of the memory check, on the reference and on the bug that builds T×T
    assert sw_checks.replay_peak_over_bound(REF, q, k, v, m["window"]) == [0.0]
    bug = load_module(str(solutions_dir("sliding-window") / "bugs" / "materialises-scores.py"))
    assert sw_checks.replay_peak_over_bound(bug, q, k, v, m["window"]) == [1.0]


# --- the statement's numbers -------------------------------------------------------------------


def test_statement_numbers_are_what_the_reference_computes():
    text = catalog.exercise("sliding-window").statement
    given = {m.group(1): ast.literal_eval(m.group(2)) for m in re.finditer(r"^\s{4}(\w+)\s*=\s*(\[.*\])\s*$", text, re.MULTILINE)}
    assert (given["q"], given["k"], given["v"]) == (sw_checks.PUBLIC_Q, sw_checks.PUBLIC_K, sw_checks.PUBLIC_V)
    assert "`window=2`" in text and sw_checks.PUBLIC_WINDOW == 2
    q, k, v = (np.array(given[n], float) for n in "qkv")

    def literal(label):
        return ast.literal_eval(re.search(re.escape(label) + r"\s*`(\[[^`]*\])`", text).group(1))

    np.testing.assert_allclose(REF.sliding_window_attention(q, k, v, 2), literal("Output:"), atol=5e-7)
    s = q[0, 0] @ k[0, 0].T / math.sqrt(2)
    np.testing.assert_allclose(s[3, 2:4], literal("`[2, 0] / sqrt(2)` ="), atol=5e-7)
    w3 = np.exp(s[3, 2:4] - s[3, 2:4].max())
    np.testing.assert_allclose(w3 / w3.sum(), literal("so weights"), atol=5e-7)
    w1 = np.exp(s[1, 0:2] - s[1, 0:2].max())
    assert "scores [0, 0.707107]" in text and f"{s[1, 1]:.6f}" == "0.707107"
    np.testing.assert_allclose(w1 / w1.sum(), literal("scores [0, 0.707107], weights"), atol=5e-7)
    assert s[2, 1] == s[2, 2]  # "query 2 scores keys 1 and 2 equally"
    np.testing.assert_allclose(REF.sliding_window_attention(q, k, v, 4)[0, 0, 3], literal("and output"), atol=5e-7)
    assert "12 MiB" in text and "64 MiB" in text
    m = sw_checks.MEMORY
    assert sw_checks.memory_bound(m["B"], m["H"], m["T"], m["window"], m["d"]) == 12 * 2**20
    assert 8 * m["B"] * m["H"] * m["T"] ** 2 == 64 * 2**20


# --- the memory check on candidates the kit has never seen --------------------------------------

NAIVE = """\
import numpy as np


def sliding_window_attention(q, k, v, window):
    if window < 1:
        raise ValueError("window must be >= 1")
    T = q.shape[-2]
    i, j = np.indices((T, T))
    scores = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(q.shape[-1])
    scores = np.where((j <= i) & (i - j < window), scores, -np.inf)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return np.einsum("bhij,bhjd->bhid", w / w.sum(-1, keepdims=True), v)
"""

PER_QUERY = '''\
import numpy as np


def sliding_window_attention(q, k, v, window):
    """Written differently from the kit's reference: one query at a time, einsum, no chunking."""
    if window < 1:
        raise ValueError("window must be >= 1")
    out = np.zeros(np.shape(q))
    for i in range(q.shape[2]):
        lo = max(0, i - window + 1)
        s = np.einsum("bhd,bhjd->bhj", q[:, :, i], k[:, :, lo:i + 1]) / np.sqrt(q.shape[-1])
        w = np.exp(s - s.max(-1, keepdims=True))
        out[:, :, i] = np.einsum("bhj,bhjd->bhd", w / w.sum(-1, keepdims=True), v[:, :, lo:i + 1])
    return out
'''


def test_memory_check_fails_a_materialising_solution_whose_values_pass(tmp_path):
    path = tmp_path / "naive.py"
    path.write_text(NAIVE)
    report = pipeline.grade(path, pipeline.Options(exercise="sliding-window", seed=5))
    failing = [r for r in report.results if r.status != "pass"]
    assert [r.id for r in failing] == ["memory-stays-within-bound"], [(r.id, r.message) for r in failing]
    assert "bound 64·B·H·T·(window + d) = 12.00 MiB" in failing[0].message and "64 MiB" in failing[0].message
    assert [d.bug for d in report.diagnosis] == ["materialises-scores"]


def test_memory_check_passes_a_differently_written_solution(tmp_path):
    path = tmp_path / "per_query.py"
    path.write_text(PER_QUERY)
    report = pipeline.grade(path, pipeline.Options(exercise="sliding-window", seed=5))
    assert all(r.status == "pass" for r in report.results), [(r.id, r.message) for r in report.results if r.status != "pass"]


def test_cli_grades_the_reference():
    data, code = check_json(solutions_dir("sliding-window") / "reference_numpy.py", "--seed", "3")
    assert code == 0 and data["exercise"] == "sliding-window" and data["passed"]


@pytest.mark.slow
def test_test_tests_scores_the_weak_file():
    """(The strong file's grading is in test_testgrade.py, with the other exercises' strong files.)"""
    from attn_kit.practice import testgrade

    weak = testgrade.grade_tests(CORPUS / "candidate_tests" / "window_weak.py")
    # window = 1 returning v also catches a weak fill value (the blocked keys keep some weight) and a
    # scale applied after the softmax (v comes back times 1/sqrt(d))
    assert weak.wrong_tests == [] and set(weak.caught) == {
        "window-excludes-self",
        "window-off-by-one",
        "fill-value-too-weak",
        "scale-after-softmax",
    }
    assert weak.score < 0.5


def test_the_per_query_solution_is_detected_by_its_function(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(PER_QUERY)
    assert pipeline.grade(path, pipeline.Options(seed=6, public_only=True)).exercise == "sliding-window"


def test_the_tile_saving_figure_of_window_kernels():
    """'skips about 1 − 2w/T of the tiles' of causal attention: count 64×64 tiles at T=4096, w=128."""
    question = next(q for q in catalog.exercise("sliding-window").questions if q.id == "window-kernels")
    assert any("1 − 2w/T of the tiles" in point for point in question.key_points)
    T, w, tile = 4096, 128, 64
    n = T // tile
    causal = band_tiles = 0
    for qi in range(n):
        for kj in range(qi + 1):  # tiles touching the causal triangle
            causal += 1
            lo_q, hi_q, lo_k, hi_k = qi * tile, qi * tile + tile - 1, kj * tile, kj * tile + tile - 1
            band_tiles += hi_k > lo_q - w and lo_k <= hi_q  # some (i, j) in it has i - w < j <= i
    skipped = 1 - band_tiles / causal
    assert 1 - 2 * w / T - 0.05 < skipped < 1 - 2 * w / T
