"""flash-backward's content recomputed: every figure of its statement (the worked example, the
memory bound), of its questions, the code rungs of its hint ladder assembled and run, and the
agreement of the statement's example with the suite's own inputs. Expected values come from the
suite's naive T×S forms and from the reference, which must agree."""

from __future__ import annotations

import ast
import math
import re
import textwrap

import numpy as np

from attn_kit.base.harness import count_reads, measure
from attn_kit.base.paths import solutions_dir
from attn_kit.checks import flash_backward as suite
from attn_kit.diagnosis.diagnose import load_module
from attn_kit.load import catalog

EXERCISE = catalog.exercise("flash-backward")
TEXT = EXERCISE.statement
REFERENCE = load_module(str(solutions_dir("flash-backward") / "reference_numpy.py"))


def near(got, want, places=6):
    np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float), atol=0.6 * 10**-places, rtol=0)


def block_value(name: str):
    """`name = [...]` from an indented block of the statement ('-inf' read as -inf)."""
    match = re.search(rf"^\s+{re.escape(name)} = (\[.*\])\s*$", TEXT, re.MULTILINE)
    return ast.literal_eval(match.group(1).replace("-inf", "None"))


def inline(label: str) -> list[float]:
    """The numbers of the backquoted list after `label` in the statement's prose."""
    match = re.search(re.escape(label) + r"\s*`(\[[^`]*\])`", TEXT)
    return ast.literal_eval(match.group(1))


def question(question_id: str) -> catalog.Question:
    return next(q for q in EXERCISE.questions if q.id == question_id)


def worked():
    q, k, v, mask, d_out = (np.array(a) for a in (suite.PUBLIC_Q, suite.PUBLIC_K, suite.PUBLIC_V, suite.PUBLIC_MASK, suite.PUBLIC_DOUT))
    return q, k, v, mask, d_out


# --- the worked example ------------------------------------------------------------------------


def test_flash_worked_example_inputs_are_the_public_checks():
    assert block_value("q") == suite.PUBLIC_Q
    assert block_value("k") == suite.PUBLIC_K
    assert block_value("v") == suite.PUBLIC_V
    assert block_value("mask") == [[True, True, True], [True, False, True], [False, False, False]] == suite.PUBLIC_MASK
    assert block_value("d_out") == suite.PUBLIC_DOUT
    assert "`block_q = block_k = 2`" in TEXT


def test_flash_worked_example_outputs_are_the_naive_forward_and_gradients():
    q, k, v, mask, d_out = worked()
    out, lse = suite.naive_forward(q, k, v, mask)
    near(block_value("out"), out)
    shown = block_value("lse")
    assert shown[2] is None and np.isneginf(lse[2])
    near(shown[:2], lse[:2])
    for name, grad in zip(("dq", "dk", "dv"), suite.naive_gradients(q, k, v, d_out, mask)):
        near(block_value(name), grad)
    ref_out, ref_lse = REFERENCE.flash_forward(q, k, v, mask, block_q=2, block_k=2)
    np.testing.assert_allclose(ref_out, out, atol=1e-12)
    assert np.isneginf(ref_lse[2]) and np.allclose(ref_lse[:2], lse[:2])


def test_flash_worked_example_step_figures():
    q, k, v, mask, d_out = worked()
    s = q @ k.T / math.sqrt(2)
    near(inline("Query 0 scores `[1, 0, 2] / sqrt(2)` ="), s[0])
    m1 = s[0, :2].max()
    l1 = np.exp(s[0, :2] - m1).sum()
    assert f"m = {m1:.6f}" in TEXT and f"l = {l1:.6f}" in TEXT
    m2 = s[0].max()
    l2 = l1 * math.exp(m1 - m2) + 1.0
    assert f"l = {l1:.6f}·exp({m1:.6f} - {m2:.6f}) + 1 = {l2:.6f}" in TEXT
    assert f"lse_0 = {m2:.6f} + log({l2:.6f}) = {m2 + math.log(l2):.6f}" in TEXT
    assert f"lse_1 = log 2 = {math.log(2):.6f}" in TEXT
    out, lse = suite.naive_forward(q, k, v, mask)
    P0 = np.exp(s[0] - lse[0])
    near(inline("Backward: P_0 = exp(s_0 - lse_0) ="), P0)
    D = (d_out * out).sum(axis=1)
    near(inline("D ="), D)
    dP0 = (d_out @ v.T)[0]
    near(inline("dP_0 ="), dP0)
    near(inline("dS_0 = P_0 ∘ (dP_0 - D_0) ="), P0 * (dP0 - D[0]))


def test_flash_memory_bound_figures_match_the_check():
    m = suite.MEMORY
    T, S, d, dv = m["T"], m["S"], m["d"], m["dv"]
    bound = suite.memory_bound(T, S, d, dv)
    assert bound == 32 * (T + S) * (d + dv) == 2**20
    assert 8 * T * S == 8 * 2**20 and 2 * T * S == 2 * 2**20
    assert f"runs T = S = {T}, d = dv = {d}, causal, with blocks of {m['block']}: the bound is 1 MiB" in TEXT
    assert "a T×S\n  float64 matrix is 8 MiB and even a float16 one 2 MiB" in TEXT


def test_flash_reference_stays_within_the_memory_bound_and_a_whole_block_does_not():
    m = suite.MEMORY
    T, S, d, dv, b = m["T"], m["S"], m["d"], m["dv"], m["block"]
    rng = np.random.default_rng(0)
    q, k, v = suite.qkv(rng, T, S, d, dv)
    out, lse = suite.naive_forward(q, k, v, None, True)
    d_out = rng.normal(size=out.shape)
    bound = suite.memory_bound(T, S, d, dv)
    _, extra = measure(REFERENCE.flash_backward, q, k, v, out, lse, d_out, causal=True, block_q=b, block_k=b)
    assert extra["peak_bytes"] < bound / 2
    _, whole = measure(REFERENCE.flash_backward, q, k, v, out, lse, d_out, causal=True, block_q=T, block_k=S)
    assert whole["peak_bytes"] > 2 * T * S  # P and dP of one T×S block: over even a float16 matrix


# --- reads above the diagonal --------------------------------------------------------------------


def test_needed_rows_counts_the_block_pairs_on_or_below_the_diagonal():
    # T = S = 4, blocks of 2: pairs (0, 0), (1, 0), (1, 1) needed, (0, 1) skipped
    assert suite.needed_rows(4, 4, 2, 2) == (6, 6)
    # T = 2, S = 4 (bottom-right): query block 0..1 sees keys up to 3, every pair needed
    assert suite.needed_rows(2, 4, 2, 2) == (4, 4)
    c = suite.READ_CASE
    keys, queries = suite.needed_rows(c["T"], c["S"], c["block_q"], c["block_k"])
    n_q, n_k = math.ceil(c["T"] / c["block_q"]), math.ceil(c["S"] / c["block_k"])
    assert keys < n_q * c["S"] and queries < n_k * c["T"]  # reading every block is over both budgets


def test_the_reference_reads_within_budget_and_the_unskipped_loop_does_not():
    c = suite.READ_CASE
    T, S, bq, bk = c["T"], c["S"], c["block_q"], c["block_k"]
    rng = np.random.default_rng(1)
    q, k, v = suite.qkv(rng, T, S, c["d"], c["dv"])
    out, lse = suite.naive_forward(q, k, v, None, True)
    d_out = rng.normal(size=out.shape)
    unskipped = load_module(str(solutions_dir("flash-backward") / "bugs" / "causal-blocks-not-skipped.py"))
    swapped = load_module(str(solutions_dir("flash-backward") / "reference_swapped.py"))
    for fn, args in (("flash_forward", (q, k, v)), ("flash_backward", (q, k, v, out, lse, d_out))):
        for module in (REFERENCE, swapped):
            assert suite.replay_reads(module, fn, *args, causal=True, block_q=bq, block_k=bk) == [0.0, 0.0], (module, fn)
        assert suite.replay_reads(unskipped, fn, *args, causal=True, block_q=bq, block_k=bk) == [1.0, 0.0], fn


def test_a_whole_conversion_reads_every_row_at_once():
    rng = np.random.default_rng(2)
    q, k, v = suite.qkv(rng, 5, 7, 3, 2)

    def converts(q, k, v, causal=False, block_q=2, block_k=3):
        k = np.asarray(k, dtype=np.float64)
        return q[0:2] @ k[0:3].T

    _, extra = count_reads(converts, q, k, v, causal=True, block_q=2, block_k=3)
    assert extra["rows"] == [2.0, 7.0, 0.0]  # q: one slice of 2 rows; k: converted whole; v: unread
    assert extra["widest"][1] == 7.0
    verdict, problems = suite.read_verdict(extra["rows"], extra["widest"], 5, 7, 2, 3)
    assert verdict == [0.0, 1.0] and "k was read 7 rows at once" in problems[0]


def test_counted_rows_behave_like_arrays_for_the_usual_operations():
    from attn_kit.base.harness import CountedRows

    a = CountedRows(np.arange(12.0).reshape(6, 2))
    assert a.shape == (6, 2) and len(a) == 6 and a.rows == 0
    np.testing.assert_array_equal(a[1:3], [[2.0, 3.0], [4.0, 5.0]])
    assert (a.rows, a.widest) == (2, 2)
    np.testing.assert_array_equal(np.ones((1, 2)) @ a.T, [[1.0, 5.0, 9.0, 13.0, 17.0, 21.0]])
    assert a.rows == 8 and a.widest == 6
    np.testing.assert_array_equal((a * 2)[0], [0.0, 2.0])
    assert a.astype(np.float32).dtype == np.float32 and a.rows == 20
    assert np.zeros_like(a).shape == (6, 2) and np.empty_like(a, dtype=np.float32).dtype == np.float32
    assert np.shape(a) == (6, 2) and a.rows == 20  # shape-only functions read nothing
    assert np.sum(a) == 66.0 and a.rows == 26


# --- the hint ladder's code, assembled -------------------------------------------------------------


def code_of(hint: catalog.Hint) -> str:
    return textwrap.dedent(hint.text.split("\nStill stuck")[0]).strip("\n") + "\n"


def rungs() -> dict[str, str]:
    return {h.title: code_of(h) for h in EXERCISE.hints if h.step == "code"}


def test_flash_code_rungs_assembled_match_the_naive_forms_and_finite_differences():
    """The masks rung's scores(), the forward rung and the backward rung, as written: out and lse
    equal the naive forward, the gradients the naive ones, with masks, an empty row, causal T ≠ S."""
    code = rungs()
    scores = code["Masks, empty rows and the causal corner"].split("\n\n#", 1)[0]
    namespace: dict = {"np": np}
    exec(scores + "\n\n" + code["The running quantities and the logsumexp"] + "\n\n" + code["The backward from the logsumexp"], namespace)
    exec(code["Two oracles first"], namespace)
    rng = np.random.default_rng(3)
    for T, S, causal in ((5, 8, False), (7, 4, True), (4, 9, True)):
        q, k, v = suite.qkv(rng, T, S, 3, 2)
        mask = suite.random_mask(rng, T, S, blocked_rows=1)
        out, lse = namespace["flash_forward"](q, k, v, mask, causal, block_q=2, block_k=3)
        want_out, want_lse = suite.naive_forward(q, k, v, mask, causal)
        np.testing.assert_allclose(out, want_out, atol=1e-12)
        assert np.array_equal(np.isneginf(lse), np.isneginf(want_lse))
        np.testing.assert_allclose(lse[np.isfinite(lse)], want_lse[np.isfinite(want_lse)], atol=1e-12)
        ok = suite.allowed(T, S, mask, causal)
        naive_out, naive_lse = namespace["naive"](q, k, v, ok)
        np.testing.assert_allclose(naive_out, want_out, atol=1e-12)
        assert np.array_equal(np.isneginf(naive_lse), np.isneginf(want_lse))
        d_out = rng.normal(size=out.shape)
        grads = namespace["flash_backward"](q, k, v, want_out, want_lse, d_out, mask, causal, block_q=3, block_k=2)
        for got, want in zip(grads, suite.naive_gradients(q, k, v, d_out, mask, causal)):
            np.testing.assert_allclose(got, want, atol=1e-12)
        delta = rng.normal(size=q.shape)
        eps = 1e-6
        fd = (namespace["loss"](q + eps * delta, k, v, ok, d_out) - namespace["loss"](q - eps * delta, k, v, ok, d_out)) / (2 * eps)
        assert math.isclose(fd, float(np.sum(grads[0] * delta)), rel_tol=1e-6, abs_tol=1e-8)


def test_flash_skip_rung_is_the_test_the_other_rungs_use():
    code = rungs()
    skip = "if causal and j0 > i1 - 1 + S - T:"
    assert skip in code["What the loops read and hold"]
    assert skip in code["The running quantities and the logsumexp"] and skip in code["The backward from the logsumexp"]
    assert "j0 > i1 - 1 + S - T" in TEXT


# --- questions -----------------------------------------------------------------------------------


def test_flash_lse_question_figures():
    q = question("flash-lse-what-to-save")
    T = S = 8192
    assert T * S * 2 == 128 * 2**20 and T * 4 == 32 * 2**10
    text = " ".join(q.key_points) + q.answer
    assert "128 MiB" in text and "32 KiB" in text and "T = S = 8192 in BF16" in text


def test_flash_backward_cost_question_figures():
    q = question("flash-backward-cost")
    forward, backward = 2 * 2, 5 * 2  # matmuls per block pair, 2·T·S·d FLOPs each
    assert (forward, backward, backward / forward) == (4, 10, 2.5)
    assert "4·T·S·d" in q.key_points[0] and "10·T·S·d" in q.key_points[1] and "2.5 times" in q.key_points[1]


def test_flash_causal_skip_question_figures():
    q = question("flash-causal-skip")
    n = 32
    needed = sum(1 for i in range(n) for j in range(n) if j <= i)
    assert needed == n * (n + 1) // 2 == 528
    assert suite.needed_rows(n * 4, n * 4, 4, 4)[0] == needed * 4
    assert f"{needed / n**2:.1%}".replace("%", " %") in q.key_points[1] and "528 of 1,024" in q.key_points[1]


def test_flash_delta_identity_in_the_question_holds():
    rng = np.random.default_rng(4)
    q, k, v = suite.qkv(rng, 4, 6, 3, 2)
    d_out = rng.normal(size=(4, 2))
    out, lse = suite.naive_forward(q, k, v)
    P = np.exp(q @ k.T / math.sqrt(3) - lse[:, None])
    np.testing.assert_allclose((P * (d_out @ v.T)).sum(axis=1), (d_out * out).sum(axis=1), atol=1e-12)
    assert "dO_i·O_i" in question("flash-delta-term").key_points[0]
