"""The teaching content is right, calibrated and complete.

Two kinds of tests:

- invariants over every exercise (plain functions returning a list of problems, so
  `attn-kit dev check` can call them too): every question has key points with one or two marked
  required; every hint ladder starts gentle (no code at level 1; questions, then concepts, then
  near-code); every scored rubric has six dimensions with four anchors each;
- figures: every worked example, cache size, memory figure and overflow threshold quoted in
  prompts/ is recomputed here with NumPy (and torch, when installed) from the text itself, so a
  wrong number fails.
"""

from __future__ import annotations

import ast
import math
import re

import numpy as np
import pytest

from attn_kit.dev import check as devcheck
from attn_kit.dev.check import hint_ladder_problems, looks_like_code, question_rule_problems
from attn_kit.load import catalog
from attn_kit.load.catalog import DIMENSIONS
from attn_kit.practice import mock

from conftest import need_torch

EXERCISES = list(catalog.exercises().values())
# the exercises whose ladders follow the question -> concept -> near-code form
LADDERED = [e.id for e in EXERCISES if devcheck.climbs_in_steps(e)]


# --- invariants (plain functions: exercise -> list of problems) ---------------------------------


def question_problems(exercise: catalog.Exercise) -> list[str]:
    """Every discussion question has at least two key points, one or two of them required (the rule
    `attn-kit dev check` enforces too)."""
    return [f"{exercise.id}: {m}" for q in exercise.questions for m in question_rule_problems(q)]


def hint_problems(exercise: catalog.Exercise) -> list[str]:
    """The ladder climbs from a nudge to near-code: level 1 never contains code, and the rest of
    devcheck.hint_ladder_problems (the rule `attn-kit dev check` enforces)."""
    first = looks_like_code(exercise.hints[0].text) if exercise.hints else ""
    problems = [f"{exercise.id}: hint 1 contains code ({first!r})"] if first else []
    return problems + [f"{exercise.id}: {m}" for m in hint_ladder_problems(exercise)]


def scoring_problems(exercise: catalog.Exercise) -> list[str]:
    """Six scored dimensions, each once, with four distinct anchors each (devcheck.scoring_problems)."""
    return [f"{exercise.id}: {m}" for m in devcheck.scoring_problems(exercise)]


def screen_problems(exercise: catalog.Exercise) -> list[str]:
    """What to watch for, time checkpoints rising within the screen, seniority expectations
    (devcheck.screen_problems, follow-ups aside)."""
    return [f"{exercise.id}: {m}" for m in devcheck.screen_problems(exercise) if not m.startswith("follow-up")]


def followup_problems(exercise: catalog.Exercise) -> list[str]:
    """Every follow-up carries the answer a strong candidate gives (devcheck.screen_problems)."""
    return [f"{exercise.id}: {m}" for m in devcheck.screen_problems(exercise) if m.startswith("follow-up")]


def content_problems(exercise: catalog.Exercise, complete: bool = True) -> list[str]:
    """Everything above; `complete=False` keeps to what every exercise must have (required key
    points, a gentle level 1, six dimensions with four anchors)."""
    problems = question_problems(exercise) + hint_problems(exercise) + scoring_problems(exercise)
    if complete:
        problems += screen_problems(exercise) + followup_problems(exercise)
    return problems


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_questions_mark_required_key_points(exercise):
    assert question_problems(exercise) == []


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_level_one_has_no_code_and_ladders_climb(exercise):
    assert hint_problems(exercise) == []


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_every_dimension_has_four_anchors(exercise):
    assert scoring_problems(exercise) == []


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_checkpoints_seniority_and_followup_answers(exercise):
    """Every exercise, not only the laddered six: each follow-up carries its expected answer."""
    assert screen_problems(exercise) == [] and followup_problems(exercise) == []
    assert content_problems(exercise) == []


@pytest.mark.parametrize("exercise_id", LADDERED)
def test_the_ladders_declare_steps_and_dimensions(exercise_id):
    hints = catalog.exercise(exercise_id).hints
    assert all(h.step for h in hints) and all(h.dimension for h in hints)
    assert hints[0].step == "question"


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_every_hint_caps_a_scored_dimension(exercise):
    """Every exercise, not only the laddered ones: a used hint caps the dimension it names (mock.py),
    so each one names a scored dimension rather than falling back to correctness."""
    assert all(h.dimension in DIMENSIONS for h in exercise.hints)
    assert mock.hint_caps(exercise, range(1, len(exercise.hints) + 1)) == {
        d: [n for n, h in enumerate(exercise.hints, 1) if h.dimension == d] for d in dict.fromkeys(h.dimension for h in exercise.hints)
    }


def test_the_invariants_can_fail():
    """Each invariant names a broken exercise: code at level 1, a ladder out of order, a missing
    anchor, no required key point, a follow-up without its answer."""
    import dataclasses

    good = catalog.exercise("mha-screen")
    code_first = dataclasses.replace(good, hints=(good.hints[-1],) + good.hints[1:])
    assert any("hint 1 contains code" in p for p in hint_problems(code_first))
    reversed_ladder = dataclasses.replace(good, hints=tuple(reversed(good.hints)))
    assert any("not ordered" in p for p in hint_problems(reversed_ladder))
    prose = tuple(dataclasses.replace(h, text="In words only.") if h.step == "code" else h for h in good.hints)
    assert any("near-code but holds no code block" in p for p in hint_problems(dataclasses.replace(good, hints=prose)))
    three = dataclasses.replace(good.scoring[0], anchors=good.scoring[0].anchors[:3])
    assert any("[[rubric]]" in p for p in screen_problems(dataclasses.replace(good, rubric=(catalog.RubricItem("x"),))))
    assert any("[[rubric]]" in p for p in screen_problems(dataclasses.replace(good, rubric=good.rubric[:2])))
    assert any("checkpoints" in p for p in screen_problems(dataclasses.replace(good, checkpoints=())))
    assert any("3 anchors, not 4" in p for p in scoring_problems(dataclasses.replace(good, scoring=(three,) + good.scoring[1:])))
    assert any("dimensions" in p for p in scoring_problems(dataclasses.replace(good, scoring=good.scoring[1:])))
    no_cap = dataclasses.replace(good, hints=good.hints[:1] + (dataclasses.replace(good.hints[1], dimension=""),))
    assert any("hint 2 caps dimension ''" in p for p in hint_problems(no_cap))
    q = dataclasses.replace(good.questions[0], required=())
    assert any("required" in p for p in question_problems(dataclasses.replace(good, questions=(q,))))
    f = dataclasses.replace(good.followups[0], answer="")
    assert followup_problems(dataclasses.replace(good, followups=(f,)))
    for text in (
        "Use `np.exp`.",
        "    x = 1\n",
        "call exp(x) first",
        "m = max(s)",
        "take np.exp of it",
        "for j in range(T) do this",
        "the slice a[2:4] here",
        "def f",
        "then q = x @ Wq",
        "acc *= alpha",
        "keys = [k0, k1]",
    ):
        assert looks_like_code(text), text
    assert not looks_like_code("What is the largest score whose exponential still fits in a float64?")
    assert not looks_like_code("Write the band for window = 2 and T = 4. Is j ≤ i + offset?")


def test_a_diagnosed_bug_points_at_a_gentle_hint():
    """grading points a diagnosed bug at one hint (its concept's, else the hint of the check that
    catches it most narrowly): always a question, and every known bug of a laddered exercise has one."""
    from attn_kit.base.errors import DependencyMissing
    from attn_kit.grading import pipeline

    for exercise_id in LADDERED:
        exercise = catalog.exercise(exercise_id)
        try:
            checks = pipeline.suite_for(exercise).checks
        except DependencyMissing:
            continue
        for bug in exercise.bug_ids:
            level = pipeline.hint_for_bug(exercise, checks, bug)
            assert level is not None and exercise.hints[level - 1].step == "question", (exercise_id, bug, level)


def test_hint_help_promises_gentlest_first():
    from click.testing import CliRunner

    from attn_kit.cli import cli

    result = CliRunner().invoke(cli, ["hint", "--help"])
    assert result.exit_code == 0 and "gentlest first" in result.output
    for exercise in EXERCISES:  # and it is true: level 1 is never code
        assert not looks_like_code(exercise.hints[0].text), exercise.id


def test_the_bank_has_the_new_questions():
    ids = {q.id for e in EXERCISES for q in e.questions}
    new = {
        "softmax-axis",
        "which-biases-matter",
        "attention-vs-linear-flops",
        "variable-length-batches",
        "decode-bandwidth-bound",
        "speculative-verify",
        "gqa-cache-budget",
        "shrink-cache-beyond-gqa",
        "gqa-tensor-parallel",
        "flash-io-model",
        "flash-decoding",
        "cross-attention-latent-queries",
        "cross-attention-padding",
        "framework-mask-polarity",
        "low-precision-attention",
        "causal-alignment",
        "logit-growth",
    }
    assert new <= ids and len(new) >= 15


def test_order_and_titles():
    order = {e.id: e.order for e in EXERCISES}
    expected = {"mha-screen": 1, "kv-cache": 2, "gqa": 3, "tiled-softmax": 4, "cross-attention": 5, "mha-masked-bias": 6}
    assert {k: order[k] for k in expected} == expected
    assert catalog.exercise("mha-masked-bias").title.startswith("Production attention")


# --- reading figures out of the text ------------------------------------------------------------


def literal_after(text: str, label: str, nth: int = 0):
    """The first backticked Python literal after `label` in `text` (e.g. a list of numbers)."""
    at = text.index(label)
    found = re.findall(r"`([^`]*)`", text[at + len(label) :])
    return ast.literal_eval(found[nth])


def block_value(text: str, name: str):
    """`name = [...]` from an indented example block (lists may span lines)."""
    match = re.search(rf"^\s+{re.escape(name)}\s*=\s*(\[.*?\])\s*(?:#.*)?$", text, re.MULTILINE | re.DOTALL)
    source = match.group(1)
    depth, end = 0, 0
    for i, ch in enumerate(source):
        depth += ch == "["
        depth -= ch == "]"
        if depth == 0:
            end = i + 1
            break
    return np.array(ast.literal_eval(re.sub(r"#[^\n]*", "", source[:end])), dtype=float)


def masked_softmax(scores, allowed):
    scores, allowed = np.asarray(scores, float), np.asarray(allowed, bool)
    m = np.where(allowed, scores, -np.inf).max(-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.where(allowed, np.exp(np.where(allowed, scores - m, 0.0)), 0.0)
    total = e.sum(-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def attention(xq, xkv, Wq, Wk, Wv, Wo, bo, H, allowed, kv_heads=None):
    """An independent loop-free implementation: heads by contiguous columns, K/V head h // g."""
    B, T, D = xq.shape
    S = xkv.shape[1]
    hd = D // H
    kv_heads = kv_heads or H
    q = (xq @ Wq).reshape(B, T, H, hd).transpose(0, 2, 1, 3)
    k = (xkv @ Wk).reshape(B, S, kv_heads, hd).transpose(0, 2, 1, 3)
    v = (xkv @ Wv).reshape(B, S, kv_heads, hd).transpose(0, 2, 1, 3)
    g = H // kv_heads
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    w = masked_softmax(q @ k.swapaxes(-1, -2) / math.sqrt(hd), np.asarray(allowed)[:, None])
    out = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, D) @ Wo + bo
    return out, w


def near(got, want, places=6):
    np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float), atol=0.6 * 10**-places, rtol=0)


def example_inputs(text: str):
    x = block_value(text, "x")
    eye = np.eye(x.shape[-1])
    return x, eye, block_value(text, "Wk"), block_value(text, "Wv"), block_value(text, "bo")


# --- worked examples ----------------------------------------------------------------------------


def test_mha_screen_worked_example_and_softmax_examples():
    text = catalog.exercise("mha-screen").statement
    x, eye, Wk, Wv, bo = example_inputs(text)
    causal = np.tril(np.ones((3, 3), bool))[None]
    out, w = attention(x, x, eye, Wk, Wv, eye, bo, 2, causal)
    near(w[0, 0], literal_after(text, "Weights, head 0:"))
    near(w[0, 1], literal_after(text, "head 1:"))
    near(out[0], literal_after(text, "Output:"))
    got = masked_softmax([1000.0, 999.0, -5.0], [True, True, False])
    stated = re.search(r"-> \[(0\.7\d+), (0\.2\d+), 0\.0\]", text)
    near(got, [float(stated.group(1)), float(stated.group(2)), 0.0], places=15)
    assert "stable_softmax([3.0, 4.0], allowed=[False, False]) -> [0.0, 0.0]" in text


def test_kv_cache_table_is_the_causal_layer_row_by_row():
    text = catalog.exercise("kv-cache").statement
    x, eye, Wk, Wv, bo = example_inputs(text)
    out, w = attention(x, x, eye, Wk, Wv, eye, bo, 2, np.tril(np.ones((3, 3), bool))[None])
    rows = re.findall(r"^\| (\d) [^|]*\| `([^`]*)` \| `([^`]*)` \| (\d+) \|$", text, re.MULTILINE)
    assert len(rows) == 3
    for step, x_t, out_t, count in rows:
        t = int(step)
        near(ast.literal_eval(x_t), x[:, t])
        near(ast.literal_eval(out_t), out[:, t])
        assert int(count) == 2 * 1 * (t + 1) * 4  # 2·B·t·D after t + 1 calls
    near(literal_after(text, "head 0 scores `[0, 4] / sqrt(2)` →"), w[0, 0, 1, :2])
    near(literal_after(text, "`[1, 1] / sqrt(2)` →"), w[0, 1, 1, :2])
    near(literal_after(text, "cached keys are"), (x @ Wk)[0, 0])
    near(literal_after(text, "cached keys are", 1), (x @ Wk)[0, 1])
    first = re.search(r"v₀·Wo \+ bo = `(\[.*?\]) \+ bo`", text).group(1)
    near(ast.literal_eval(first), (x @ Wv)[0, 0])
    near(ast.literal_eval(first) + bo, out[0, 0])


def test_gqa_worked_example():
    text = catalog.exercise("gqa").statement
    x, eye, Wk, Wv, bo = example_inputs(text)
    out, w = attention(x, x, eye, Wk, Wv, eye, bo, 2, np.tril(np.ones((3, 3), bool))[None], kv_heads=1)
    near(w[0, 0], literal_after(text, "Weights, head 0:"))
    near(w[0, 1], literal_after(text, "head 1:"))
    near(out[0], literal_after(text, "Output:"))
    keys = [list(r) for r in (x @ Wk)[0]]
    values = [list(r) for r in (x @ Wv)[0]]
    stated = re.search(r"Keys `(.*?)`, values `(.*?)`", text).groups()
    near(ast.literal_eval(f"[{stated[0]}]"), keys)
    near(ast.literal_eval(f"[{stated[1]}]"), values)


def test_cross_attention_worked_example():
    text = catalog.exercise("cross-attention").statement
    x = block_value(text, "x")
    context = block_value(text, "context")
    eye = np.eye(4)
    Wk, Wv, bo = block_value(text, "Wk"), block_value(text, "Wv"), block_value(text, "bo")
    mask = np.array(ast.literal_eval(re.search(r"mask = (\[\[\[.*?\]\]\])", text).group(1)))
    out, w = attention(x, context, eye, Wk, Wv, eye, bo, 2, mask)
    near(w[0, 0], literal_after(text, "Weights, head 0:"))
    near(w[0, 1], literal_after(text, "head 1:"))
    near(out[0], literal_after(text, "Output:"))
    keys = re.search(r"The keys are `(.*?)`", text).group(1)
    near(ast.literal_eval(f"[{keys}]"), (context @ Wk)[0])


def tiled_partials(q, k, v, mask, block):
    """(m, l, acc) per query after each block, by the online softmax."""
    T, S = len(q), len(k)
    m, l, acc = np.full(T, -np.inf), np.zeros(T), np.zeros((T, v.shape[1]))
    history = []
    for start in range(0, S, block):
        s = q @ k[start : start + block].T / math.sqrt(q.shape[1])
        s = np.where(mask[:, start : start + block], s, -np.inf)
        m_new = np.maximum(m, s.max(1))
        shift = np.where(np.isfinite(m_new), m_new, 0.0)
        alpha = np.exp(m - shift)
        p = np.exp(s - shift[:, None])
        l, acc, m = alpha * l + p.sum(1), alpha[:, None] * acc + p @ v[start : start + block], m_new
        history.append((m.copy(), l.copy(), acc.copy(), alpha.copy()))
    return history


def test_tiled_worked_example_and_its_running_quantities():
    text = catalog.exercise("tiled-softmax").statement
    q, k, v = (block_value(text, n) for n in ("q", "k", "v"))
    mask = np.array(ast.literal_eval(re.search(r"mask = (\[\[.*?\]\])\n", text).group(1)))
    (m1, l1, acc1, _), (m2, l2, acc2, alpha2) = tiled_partials(q, k, v, mask, 2)
    near(literal_after(text, "Query 0 scores `[1, 0, 2] / sqrt(2)` ="), q[0] @ k.T / math.sqrt(2))
    stated = re.search(r"m = ([\d.]+), l = 1 \+ exp\(-[\d.]+\) = ([\d.]+), acc = `(.*?)`", text).groups()
    near([float(stated[0]), float(stated[1])], [m1[0], l1[0]])
    near(ast.literal_eval(stated[2]), acc1[0])
    factor = float(re.search(r"multiplied by exp\([\d.]+ - [\d.]+\) =\s+([\d.]+)", text).group(1))
    near(factor, alpha2[0])
    final = re.search(r"l = ([\d.]+), acc = `(.*?)`\.", text).groups()
    near(float(final[0]), l2[0])
    near(ast.literal_eval(final[1]), acc2[0])
    out = np.divide(acc2, l2[:, None], out=np.zeros_like(acc2), where=l2[:, None] > 0)
    near(out, literal_after(text, "Output:"))
    naive = masked_softmax(q @ k.T / math.sqrt(2), mask) @ v
    near(out, naive, places=12)


def test_tiled_memory_figures():
    """The statement's figures for the memory check, recomputed: the bound, the float64 and float16
    score matrices, and the sizes the check really uses."""
    from attn_kit.checks.tiled_softmax import MEMORY_S, MEMORY_T, MEMORY_WIDTH, memory_bound

    text = " ".join(catalog.exercise("tiled-softmax").statement.split())
    T, S, block, dv = 1024, 4096, 64, 32
    assert (MEMORY_T, MEMORY_S, MEMORY_WIDTH) == (T, S, dv)
    bound = 64 * T * (block + dv)
    assert bound == 8 * 8 * T * (block + dv) == memory_bound(T, block, dv)  # eight float64 T×(block + dv)
    assert "T = 1024 queries against S = 4096 keys with block_size = 64 and dv = 32: the bound is 6 MiB" in text
    assert bound == 6 * 2**20
    assert 8 * T * S == 32 * 2**20 and "the float64 score matrix alone would be 32 MiB" in text
    assert 2 * T * S == 8 * 2**20 and "even a float16 one 8 MiB" in text
    assert 2 * T * S > bound  # a float16 T×S matrix cannot pass any more ...
    assert 2 * 2048 * 2048 < memory_bound(2048, block, dv)  # ... while at T = S = 2048 it fitted
    assert "one call at T = 1024, S = 4096 (block_size = 64, dv = 32)" in text


def test_flash_decoding_merge_of_the_worked_example():
    exercise = catalog.exercise("tiled-softmax")
    q, k, v = (block_value(exercise.statement, n) for n in ("q", "k", "v"))
    mask = np.ones((3, 3), bool)
    [point] = [p for x in exercise.questions if x.id == "flash-decoding" for p in x.key_points if "worked example" in p]
    nums = [float(n) for n in re.findall(r"-?\d+\.\d+|\b\d+\b", point)]
    # (m1, l1, [a, b]) and (m2, l2, [c, d]) merge to l and out = [e, f]
    m1, l1, a1, b1, m2, l2, a2, b2, l, o1, o2 = nums[1:] if nums[0] == 0 else nums
    first = tiled_partials(q[:1], k[:2], v[:2], mask[:1, :2], 2)[-1]
    second = tiled_partials(q[:1], k[2:], v[2:], mask[:1, 2:], 1)[-1]
    near([m1, l1, a1, b1], [first[0][0], first[1][0], *first[2][0]])
    near([m2, l2, a2, b2], [second[0][0], second[1][0], *second[2][0]])
    m = max(m1, m2)
    merged_l = l1 * math.exp(m1 - m) + l2 * math.exp(m2 - m)
    merged_acc = np.array([a1, b1]) * math.exp(m1 - m) + np.array([a2, b2]) * math.exp(m2 - m)
    near(merged_l, l, places=5)
    near(merged_acc / merged_l, [o1, o2], places=5)
    near([o1, o2], (masked_softmax(q[:1] @ k.T / math.sqrt(2), mask[:1]) @ v)[0], places=6)


def test_masked_bias_worked_example_numpy():
    text = catalog.exercise("mha-masked-bias").statement
    query, context = block_value(text, "query"), block_value(text, "context")
    w_q, w_k, w_v, w_o = (block_value(text, n) for n in ("w_q", "w_k", "w_v", "w_o"))
    b_o = np.array(ast.literal_eval(re.search(r"b_o = (\[.*?\])", text).group(1)), float)
    key_mask = np.array([[True, True, False]])
    query_mask = np.array([[True, False]])
    attn_mask = np.array([[[[True, True, True], [True, True, True]], [[False, True, True], [False, True, True]]]])
    allowed = key_mask[:, None, None, :] & query_mask[:, None, :, None] & attn_mask
    q = (query @ w_q).reshape(1, 2, 2, 1).transpose(0, 2, 1, 3)
    k = (context @ w_k).reshape(1, 3, 2, 1).transpose(0, 2, 1, 3)
    v = (context @ w_v).reshape(1, 3, 2, 1).transpose(0, 2, 1, 3)
    w = masked_softmax(q @ k.swapaxes(-1, -2), allowed)
    summary = (w @ v).transpose(0, 2, 1, 3).reshape(1, 2, 2)
    out = summary @ w_o + b_o
    out = np.where(allowed.any(-1).any(1)[..., None], out, 0.0)
    keys = re.search(r"head 0 sees (\[.*?\]), head 1 sees (\[.*?\]); values are (\[.*?\]) and\s+(\[.*?\])", text).groups()
    near([ast.literal_eval(s) for s in keys], [k[0, 0, :, 0], k[0, 1, :, 0], v[0, 0, :, 0], v[0, 1, :, 0]])
    stated = re.search(
        r"head 0 weights ≈ (\[.*?\]), head 1 weights (\[.*?\]); head summaries\s+≈ (\[.*?\]); "
        r"output ≈ (\[.*?\])",
        text,
    ).groups()
    near(ast.literal_eval(stated[0]), w[0, 0, 0])
    near(ast.literal_eval(stated[1]), w[0, 1, 0])
    near(ast.literal_eval(stated[2]), summary[0, 0])
    near(ast.literal_eval(stated[3]), out[0, 0])
    assert np.all(out[0, 1] == 0) and np.all(w[0, :, 1] == 0)


def test_masked_bias_worked_example_with_the_torch_reference():
    torch = need_torch()
    from attn_kit.base.paths import solutions_dir
    from attn_kit.diagnosis.diagnose import load_module

    ref = load_module(solutions_dir("mha-masked-bias") / "reference_torch.py")
    text = catalog.exercise("mha-masked-bias").statement
    t = lambda a: torch.tensor(np.asarray(a), dtype=torch.float64)  # noqa: E731
    params = {n: t(block_value(text, n)) for n in ("w_q", "w_k", "w_v", "w_o")}
    params["b_o"] = t(ast.literal_eval(re.search(r"b_o = (\[.*?\])", text).group(1)))
    masks = {
        "key_mask": torch.tensor([[True, True, False]]),
        "query_mask": torch.tensor([[True, False]]),
        "attention_mask": torch.tensor([[[[True, True, True], [True, True, True]], [[False, True, True], [False, True, True]]]]),
    }
    out, _ = ref.multihead_attention(
        {"query": t(block_value(text, "query")), "context": t(block_value(text, "context"))}, params, masks, heads=2
    )
    stated = re.search(r"output ≈ (\[.*?\])", text).group(1)
    near(out[0, 0].numpy(), ast.literal_eval(stated))
    assert out[0, 1].abs().max().item() == 0.0


# --- cache sizes, bandwidth, FLOPs ----------------------------------------------------------------


def question(exercise_id: str, question_id: str) -> catalog.Question:
    return next(q for q in catalog.exercise(exercise_id).questions if q.id == question_id)


def test_kv_cache_size_estimate():
    points = " ".join(question("kv-cache", "kv-cache-size").key_points)
    per_token_layer = 2 * 4096
    numbers = per_token_layer * 32 * 8000
    assert "2·4096 = 8192" in points and per_token_layer == 8192
    assert round(numbers / 1e9, 1) == 2.1 and "about 2.1 billion" in points
    size = numbers * 2
    assert f"about {size / 1e9:.1f} GB ({size / 2**30:.1f} GiB)" in points


def test_decode_bandwidth_bound_figures():
    points = " ".join(question("kv-cache", "decode-bandwidth-bound").key_points)
    weights, h100, b200 = 16e9, 3.35e12, 8e12  # the stated hardware: H100 SXM (HBM3) and B200
    assert f"on an H100 SXM (3.35 TB/s of HBM3) take at least {weights / h100 * 1e3:.1f} ms per step" in points
    assert f"on a B200 (8 TB/s) at least {weights / b200 * 1e3:.1f} ms" in points
    assert f"1 GiB of cache adds about {2**30 / h100 * 1e3:.2f} ms at 3.35 TB/s" in points
    assert "2 TB/s" not in points  # the 2022 figure the bound used to rest on


def test_gqa_cache_budget_figures():
    points = " ".join(question("gqa", "gqa-cache-budget").key_points)
    per_token = 2 * 32 * 8 * 128 * 2
    assert f"= {per_token:,} bytes = {per_token // 1024} KiB" in points
    per_sequence = per_token * 8192
    assert per_sequence == 2**30 and "per 8,192-token sequence: 1 GiB; a batch of 32: 32 GiB" in points
    card, weights, planned = 80e9, 16e9, 0.9  # "80 GB" is decimal; vLLM plans with 90 % of it
    assert f"holds 80·10⁹ bytes = {card / 2**30:.1f} GiB" in points
    assert f"16 GB = {weights / 2**30:.1f} GiB of bf16 weights" in points
    left = planned * card - weights
    assert f"has about {left / 2**30:.1f} GiB left, so about {int(left // per_sequence)} such sequences" in points
    assert int(left // per_sequence) < int((card - weights) // per_sequence)  # headroom costs sequences
    assert 2 * 32 * 32 * 128 * 2 * 8192 == 4 * 2**30 and "4 GiB" in points
    assert 16 / 8 == 2 and "replicated on 16 / 8 = 2 GPUs" in " ".join(question("gqa", "gqa-tensor-parallel").key_points)


def test_attention_matches_linear_flops_at_six_d():
    points = " ".join(question("mha-screen", "attention-vs-linear-flops").key_points)
    for D in (512, 4096):
        linear = 4 * D * D + 2 * D * (4 * D)  # four projections + a 4×-wide MLP, multiply-adds per token
        assert linear == 12 * D * D and "12·D²" in points
        attn = lambda T, D=D: 2 * T * D  # q·kᵀ and weights @ v over T keys  # noqa: E731
        assert attn(6 * D) == linear and "T = 6·D" in points
        causal = lambda T, D=D: 2 * (T / 2) * D  # on average half the keys  # noqa: E731
        assert causal(12 * D) == linear and "12·D with a causal mask" in points


# --- overflow thresholds and fill values ----------------------------------------------------------


def all_text() -> str:
    parts = []
    for e in EXERCISES:
        parts += [e.statement] + [h.text for h in e.hints] + [p for q in e.questions for p in q.key_points]
    parts += [b.symptom + " " + b.fix + " " + b.test_idea for b in catalog.bugs().values()]
    return "\n".join(parts)


def test_overflow_thresholds():
    text = all_text()
    thresholds = {np.float64: 709.8, np.float32: 88.7, np.float16: 11.1}
    for dtype, stated in thresholds.items():
        assert round(float(np.log(np.finfo(dtype).max)), 1) == stated
        with np.errstate(over="ignore"):
            assert np.isfinite(np.exp(dtype(stated - 0.1))) and np.isinf(np.exp(dtype(stated + 0.1)))
    assert "709.8" in text and "88.7" in text and "11.1" in text
    assert not re.search(r"past about 709(?!\.8)", text)  # the float64-only claim is qualified


def test_minus_1e9_claims_depend_on_form_and_dtype():
    scores = np.array([1.0, 2.0, 3.0])
    full = masked_softmax(scores, [True] * 3)
    with np.errstate(invalid="ignore", over="ignore"):
        for dtype, expect in ((np.float64, "unmasked"), (np.float32, "uniform"), (np.float16, "nan")):
            s = scores.astype(dtype) + dtype(-1e9)  # an added -1e9 on a fully masked row
            e = np.exp(s - s.max())
            got = e / e.sum()
            if expect == "unmasked":
                near(got, full, places=9)
            elif expect == "uniform":
                near(got, [1 / 3] * 3)
            else:
                assert np.isneginf(dtype(-1e9)) and np.isnan(got).all()
        replaced = np.full(3, -1e9)  # masked_fill replaces: uniform in every dtype
        near(np.exp(replaced - replaced.max()) / np.exp(replaced - replaced.max()).sum(), [1 / 3] * 3)
    point = " ".join(question("mha-screen", "blocked-rows").key_points)
    assert "float64 gives back the unmasked softmax, float32 a uniform row only while every raw score is within 32 of zero" in point


def test_minus_1e9_claims_in_torch():
    torch = need_torch()
    s = torch.tensor([1.0, 2.0, 3.0])
    for dtype, check in (
        (torch.float64, lambda w: torch.allclose(w, torch.softmax(s.double(), -1))),
        (torch.float32, lambda w: torch.allclose(w, torch.full((3,), 1 / 3))),
        (torch.float16, lambda w: bool(torch.isnan(w).all())),
    ):
        assert check(torch.softmax(s.to(dtype) + torch.tensor(-1e9, dtype=dtype), -1)), dtype
    m = torch.finfo(torch.float32).min
    assert torch.isinf(torch.tensor(m) + torch.tensor(m))  # two finfo.min masks summed overflow


def test_max_over_blocked_test_idea():
    idea = catalog.bugs()["max-over-blocked"].test_idea
    got = masked_softmax([-1000.0, 1000.0, -999.0], [True, False, True])
    stated = [float(n) for n in re.search(r"≈ \[([\d., ]+)\]", idea).group(1).split(",")]
    near(got, stated, places=3)


# --- claims about biases, gradients and PyTorch ---------------------------------------------------


def test_bk_has_no_effect_and_bv_folds_into_bo():
    rng = np.random.default_rng(0)
    B, T, D, H = 2, 4, 8, 2
    x = rng.normal(size=(B, T, D))
    W = [rng.normal(size=(D, D)) for _ in range(4)]
    bq, bk, bv, bo = (rng.normal(size=D) for _ in range(4))
    allowed = np.tril(np.ones((T, T), bool))[None].repeat(B, 0)
    allowed[1, 2] = False  # one fully blocked query

    def layer(bq_, bk_, bv_, bo_):
        hd = D // H
        split = lambda a: a.reshape(B, T, H, hd).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = split(x @ W[0] + bq_), split(x @ W[1] + bk_), split(x @ W[2] + bv_)
        w = masked_softmax(q @ k.swapaxes(-1, -2) / math.sqrt(hd), allowed[:, None])
        return (w @ v).transpose(0, 2, 1, 3).reshape(B, T, D) @ W[3] + bo_

    base = layer(bq, bk, bv, bo)
    assert np.abs(layer(bq, 0 * bk, bv, bo) - base).max() < 1e-12  # bk: no effect
    folded = layer(bq, bk, 0 * bv, bo + bv @ W[3])
    live = allowed.any(-1)
    assert np.abs(folded - base)[live].max() < 1e-12  # bv folds into bo ...
    assert np.abs(folded - base)[~live].max() > 1e-3  # ... except on blocked rows
    assert np.abs(layer(0 * bq, bk, bv, bo) - base).max() > 1e-3  # bq matters
    bug = catalog.bugs()["biases-ignored"]
    assert "bk" not in bug.test_idea and "Dropping bk alone changes nothing" in bug.symptom


def test_where_leaks_nan_into_the_gradient_unless_shifted_scores_are_replaced():
    torch = need_torch()
    allowed = torch.tensor([True, False])

    def grad(safe: bool):
        s = torch.tensor([1.0, 1000.0], dtype=torch.float64, requires_grad=True)
        m = torch.where(allowed, s, torch.tensor(-math.inf, dtype=s.dtype)).amax().detach()
        shifted = torch.where(allowed, s - m, torch.zeros_like(s)) if safe else s - m
        e = torch.where(allowed, torch.exp(shifted), torch.zeros_like(s))
        (e / e.sum())[0].backward()
        return s.grad

    assert torch.isnan(grad(False)).any()  # forward right, gradient NaN
    assert torch.isfinite(grad(True)).all()
    hint = next(
        h for h in catalog.exercise("mha-masked-bias").hints if h.step == "concept" and h.title == "Empty rows, forward and backward"
    )
    assert "0 × inf = NaN" in hint.text and "*shifted* blocked scores" in hint.text


def test_sdpa_conventions_quoted_in_the_content():
    torch = need_torch()
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 1, 2, 4, generator=g), torch.randn(1, 1, 4, 4, generator=g)
    v = torch.eye(4)[None, None]
    blocked = torch.tensor([[True, True, False, False], [False, False, False, False]])
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=blocked)
    assert torch.all(out[0, 0, 1] == 0)  # a fully masked row gives 0
    w = F.scaled_dot_product_attention(q, k, v, is_causal=True)[0, 0]
    assert torch.all(w[0, 1:] == 0) and torch.all(w[1, 2:] == 0)  # top-left: query i sees keys 0..i
    statement = catalog.exercise("mha-masked-bias").statement
    assert "`scaled_dot_product_attention(is_causal=True)` uses when Q ≠ K" in statement


# --- the kv-cache preallocation rule ---------------------------------------------------------------


def test_a_preallocated_cache_counts_its_filled_rows():
    from attn_kit.checks.kv_cache import cached_numbers

    B, D = 2, 4
    buffers = {"k": np.zeros((B, 16, D)), "v": np.zeros((B, 16, D))}
    assert cached_numbers({**buffers, "length": 3}) == (2 * B * 3 * D, "")
    assert cached_numbers(buffers) == (2 * B * 16 * D, "")  # no length: every number counts
    assert cached_numbers({**buffers, "length": 3.0})[0] == 2 * B * 16 * D + 1  # a float is not a length
    assert cached_numbers({"kv": (np.zeros((B, 8, D)), np.zeros((B, 8, D))), "length": 0}) == (0, "")
    assert "Preallocating is allowed" in catalog.exercise("kv-cache").statement


# --- what the interviewer sheet and the mock report show -------------------------------------------


def test_interviewer_sheet_shows_every_anchor_checkpoint_and_answer():
    from rich.console import Console

    from attn_kit.render import practice

    for exercise in EXERCISES:
        out = Console(record=True, width=200, color_system=None)
        practice.interviewer_sheet(exercise, out)
        flat = " ".join(out.export_text().split())
        for item in exercise.scoring:
            assert all(" ".join(a.split())[:50] in flat for a in item.anchors), (exercise.id, item.dimension)
        assert all(" ".join(c.expect.split())[:50] in flat for c in exercise.checkpoints)
        assert all(" ".join(f.answer.split())[:50] in flat for f in exercise.followups if f.answer)
        assert flat.count("– (required) ") == sum(len(q.required) for q in exercise.questions)


class _Result:
    def __init__(self, status, public=False):
        self.id, self.status, self.public, self.bug, self.catches = f"c{id(self)}", status, public, None, ()


class _Report:
    def __init__(self, statuses, public_fails=False):
        self.results = [_Result("fail" if public_fails else "pass", public=True)]
        self.results += [_Result(s) for s in statuses]
        self.diagnosis = []


def test_correctness_score_and_hint_caps():
    # the score by root cause is tested on real files in test_rubric.py; an unexplained failure is one cause
    assert mock.correctness_score(None, graded=False) is None and mock.correctness_score(None) == 1
    assert mock.correctness_score(_Report(["pass"] * 5, public_fails=True)) == 2
    assert mock.correctness_score(_Report(["fail", "error", "pass"])) == 2
    assert mock.correctness_score(_Report(["pass", "skip"])) == 4
    exercise = catalog.exercise("mha-screen")
    correctness_hint = next(n for n, h in enumerate(exercise.hints, 1) if h.dimension == "correctness")
    rows = {r["dimension"]: r for r in mock.scores(exercise, _Report(["pass"]), {correctness_hint, 99})}
    assert rows["correctness"]["score"] == 3 and rows["correctness"]["capped_by"] == [correctness_hint]
    assert rows["robustness"]["score"] is None and rows["robustness"]["cap"] is None
    assert all(len(r["anchors"]) == 4 for r in rows.values())
    rows = {r["dimension"]: r for r in mock.scores(exercise, _Report(["pass"]))}
    assert rows["correctness"]["score"] == 4 and rows["correctness"]["cap"] is None


def test_a_hint_names_the_next_step_on_its_topic():
    from types import SimpleNamespace

    from rich.console import Console

    from attn_kit.render import practice

    exercise = catalog.exercise("mha-screen")
    first = exercise.hints[0]
    following = next(n for n, h in enumerate(exercise.hints, 1) if n > 1 and h.title == first.title)
    out = Console(record=True, width=200, color_system=None)
    practice.hints(exercise, [SimpleNamespace(level=1, hint=first)], 1, out)
    text = out.export_text()
    assert "a question to start from" in text
    assert f"next on this topic: attn-kit hint mha-screen --level {following}" in text
    out = Console(record=True, width=200, color_system=None)
    last = len(exercise.hints)
    practice.hints(exercise, [SimpleNamespace(level=last, hint=exercise.hints[-1])], 2, out)
    text = out.export_text()
    assert "next on this topic" not in text and "near-code" in text


def test_framework_conventions_quoted_in_the_new_questions():
    """weight-layout: nn.Linear stores out × in and computes x @ weightᵀ; cross-attention-padding:
    nn.MultiheadAttention's key_padding_mask marks padding with True (those keys get weight 0)."""
    torch = need_torch()
    linear = torch.nn.Linear(3, 5)
    x = torch.randn(2, 3, dtype=linear.weight.dtype)
    assert tuple(linear.weight.shape) == (5, 3)
    assert torch.allclose(linear(x), x @ linear.weight.T + linear.bias)
    layer = torch.nn.MultiheadAttention(4, 1, batch_first=True)
    q, kv = torch.randn(1, 2, 4), torch.randn(1, 3, 4)
    _, weights = layer(q, kv, kv, key_padding_mask=torch.tensor([[False, True, False]]))
    assert torch.all(weights[0, :, 1] == 0) and torch.all(weights[0, :, 0] > 0)
    texts = {q.id: " ".join((q.prompt, *q.key_points)) for e in EXERCISES for q in e.questions}
    assert "nn.Linear stores its weight as out × in" in texts["weight-layout"]
    assert "key_padding_mask marks padding with True" in texts["cross-attention-padding"]


def test_claims_the_reworked_hints_make():
    """What the hints now say about integer masks, a full transpose, weak and added fills, and
    double scaling, recomputed."""
    ints = np.array([0, 1])
    assert list(~ints) == [-1, -2] and all(bool(v) for v in ~ints)  # ~0 is -1, ~1 is -2: both truthy
    assert np.zeros((2, 3, 4, 5)).T.shape == (5, 4, 3, 2)  # B×H×T×hd -> hd×T×H×B
    scores = np.array([1.0, 2.0, -10.0])  # a fill of -10 beside unit scores
    weak = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
    assert 0 < weak[2] < 1e-4  # small, not zero: not blocked
    added = scores[:2] - 1e9  # a fully blocked row, -1e9 added
    near(np.exp(added - added.max()) / np.exp(added - added.max()).sum(), masked_softmax(scores[:2], [True, True]), places=6)
    q, k = np.array([2.0, 0.0, 0.0, 0.0]), np.eye(4)  # hd = 4: double scaling divides by hd
    once, twice = q @ k.T / math.sqrt(4), (q / math.sqrt(4)) @ k.T / math.sqrt(4)
    near(twice, q @ k.T / 4)
    assert np.ptp(twice) < np.ptp(once)  # flatter scores, flatter weights
    hints = " ".join(h.text for h in catalog.exercise("mha-screen").hints)
    assert "`~1` is -2 and `~0` is -1" in hints and "hd×T×H×B" in hints and "weak fill such as -10" in hints


# --- corrected claims stay corrected ----------------------------------------------------------------
#
# Claims that were once wrong in prompts/ and were corrected. Each check is a plain function over the
# text (text -> list of problems) that recomputes what it can with NumPy, so a test can feed it the
# old wording and see it fail (test_the_corrected_claims_can_fail).


def every_text(exercise: catalog.Exercise) -> str:
    """Everything an exercise says, as one string: statement, hints, questions, follow-ups, rubric."""
    parts = [exercise.statement] + [h.text for h in exercise.hints]
    parts += [p for q in exercise.questions for p in (q.prompt, *q.key_points)]
    parts += [p for f in exercise.followups for p in (f.prompt, f.answer)]
    parts += [a for d in exercise.scoring for a in d.anchors]
    parts += [c.expect for c in exercise.checkpoints] + [s.expect for s in exercise.seniority]
    return "\n".join(parts)


def split_heads(a, H, how):
    """B×T×D -> B×H×T×hd: "correct" (reshape, then swap T and H), "bare" (reshape straight to
    B×H×T×hd) or "interleaved" (head h takes columns h, h+H, h+2H, …)."""
    B, T, D = a.shape
    hd = D // H
    if how == "correct":
        return a.reshape(B, T, H, hd).transpose(0, 2, 1, 3)
    if how == "bare":
        return a.reshape(B, H, T, hd)
    return a.reshape(B, T, hd, H).transpose(0, 3, 1, 2)


def reshape_claim_problems(symptom: str, test_idea: str) -> list[str]:
    """reshape-without-transpose: the bare reshape is wrong exactly when T ≥ 2 and H ≥ 2, T = H
    included; the text says so and no longer asks for T ≠ H."""
    problems = []
    for T in range(1, 6):
        for H in range(1, 6):
            a = np.arange(2 * T * H * 3, dtype=float).reshape(2, T, H * 3)  # hd = 3, every number distinct
            wrong = not np.array_equal(split_heads(a, H, "bare"), split_heads(a, H, "correct"))
            if wrong != (T >= 2 and H >= 2):
                problems.append(f"bare reshape at T={T}, H={H}: wrong={wrong}")
    for name, text in (("symptom", symptom), ("test idea", test_idea)):
        stated = re.search(r"T ≥ (\d+) and H ≥ (\d+)", text)
        if not stated or (int(stated.group(1)), int(stated.group(2))) != (2, 2):
            problems.append(f"the {name} does not say the bare reshape is wrong whenever T ≥ 2 and H ≥ 2")
        if re.search(r"T\s*(≠|!=)\s*H", text):
            problems.append(f"the {name} still asks for T ≠ H, but T = H is just as wrong")
    if "T = H is just as wrong" not in test_idea:
        problems.append("the test idea no longer says T = H is just as wrong")
    return problems


def head_weights(x, H, how):
    """Per-head attention weights with identity projections (B×H×T×T), heads split by `how`."""
    q = split_heads(x, H, how)
    return masked_softmax(q @ q.swapaxes(-1, -2) / math.sqrt(x.shape[-1] // H), np.ones((1, 1) + (x.shape[1],) * 2, bool))


def interleaved_claim_problems(test_idea: str) -> list[str]:
    """heads-interleaved: with D = 4, H = 2 and identity weights, changing feature 1 of one token
    changes head 0's weights (columns 0-1) and not head 1's under contiguous heads; the interleaved
    split moves the change to head 1, so the stated test catches it."""
    D, H = (int(n) for n in re.search(r"D = (\d+), H = (\d+)", test_idea).groups())
    feature = int(re.search(r"change only feature (\d+)", test_idea).group(1))
    claim = re.search(
        r"head (\d+) \(columns (\d+)-(\d+)\) must see the change and head (\d+) "
        r"\(columns (\d+)-(\d+)\) must not, so head (\d+)'s weights stay the same",
        test_idea,
    )
    if not claim:
        return ["the heads-interleaved test idea no longer states which head sees the change"]
    sees, s0, s1, blind, b0, b1, same = (int(n) for n in claim.groups())
    problems = []
    hd = D // H
    if (s0, s1) != (sees * hd, (sees + 1) * hd - 1) or (b0, b1) != (blind * hd, (blind + 1) * hd - 1):
        problems.append(f"columns {s0}-{s1} / {b0}-{b1} are not heads {sees} / {blind}'s contiguous blocks")
    if same != blind:
        problems.append(f"the head whose weights stay the same ({same}) is not the one that must not see ({blind})")
    x = np.random.default_rng(0).normal(size=(1, 3, D))
    changed = x.copy()
    changed[0, 1, feature] += 1.0  # one token, one feature
    for how, want in (("correct", {sees}), ("interleaved", None)):
        moved = {h for h in range(H) if not np.allclose(head_weights(x, H, how)[0, h], head_weights(changed, H, how)[0, h])}
        if want is not None and moved != want:
            problems.append(f"contiguous heads: changing feature {feature} changes heads {sorted(moved)}, not {sorted(want)}")
        if want is None and moved == {sees}:
            problems.append(f"interleaved heads pass the stated test (heads {sorted(moved)} change)")
    return problems


def bias_scaled_claim_problems(test_idea: str) -> list[str]:
    """bias-scaled: with w_q = 0 every score is 0 before the bias, so the weights are softmax(bias)
    over the allowed keys; a bias divided by sqrt(D) as well gives a flatter softmax, and differs
    only from the stated smallest D on (sqrt(1) = 1 hides the bug)."""
    if "w_q = 0 (every score is 0 before the bias)" not in test_idea:
        return ["the bias-scaled test idea no longer starts from w_q = 0"]
    least = int(re.search(r"D ≥ (\d+)", test_idea).group(1))
    rng = np.random.default_rng(0)
    problems = []
    Q, K, C = 2, 4, 5
    allowed = np.array([[True, True, True, False], [True, False, True, True]])
    bias = rng.normal(size=(Q, K)) * 2
    for D in range(1, 5):
        query, context = rng.normal(size=(Q, C)), rng.normal(size=(K, C))
        q, k = query @ np.zeros((C, D)), context @ rng.normal(size=(C, D))
        scores = q @ k.T / math.sqrt(D)
        if np.any(scores != 0):
            problems.append(f"D={D}: w_q = 0 leaves nonzero scores")
        right = masked_softmax(scores + bias, allowed)
        scaled = masked_softmax((q @ k.T + bias) / math.sqrt(D), allowed)
        if not np.allclose(right, masked_softmax(bias, allowed), atol=1e-15):
            problems.append(f"D={D}: the weights are not softmax(bias) over the allowed keys")
        differs = not np.allclose(scaled, right, atol=1e-12)
        if differs != (D >= least):
            problems.append(f"D={D}: the scaled bias {'differs' if differs else 'does not differ'} (text: D ≥ {least})")
        if differs and not np.all(scaled.max(-1) < right.max(-1)):
            problems.append(f"D={D}: the scaled bias does not give a flatter softmax")
    return problems


DECODE_COST = {  # where each exercise states the per-step decode cost, and the phrase
    "mha-screen": "costs O(D² + t·D) per layer instead of recomputing the whole sequence",
    "kv-cache": "scores it against t cached keys (O(t·D)): O(D² + t·D) per layer",
    "tiled-softmax": "one query row per step against the cached keys: O(D² + t·D) per layer",
}
STALE = (  # old wrong wording (git log -p -- prompts/), each a regex that must not come back
    r"costs? O\([tT]·D\)",  # the per-step decode cost without the D² projections
    r"per-step cost O\(t·D\)",
    r"(?<!forward )FLOPs do not change",  # tiling keeps the forward FLOPs, the backward recomputes
    r"T\s*≠\s*H",  # the bare reshape is wrong at T = H too
    r"Why does a decoding step need no causal mask",  # a *single* step; prefill needs one
    r"with unit-variance entries its variance grows like hd",  # only for independent, zero-mean entries
)
# the smaller wording fixes of issue 15: where each corrected sentence stands
PINNED = (
    ("kv-cache", "Why does a single decoding step need no causal mask, and where is one still needed?"),
    ("mha-screen", "if the entries are independent with mean 0 and variance 1, its variance is hd"),
    ("mha-screen", "a non-contiguous input is copied first, but the order is the same"),
    ("kv-cache", "they reduce fragmentation and over-reservation, not the size of what is stored"),
)


def wording_problems(texts: dict[str, str]) -> list[str]:
    """The decode cost O(D² + t·D) per layer, "only tiling removes the T×T buffer" (a KV cache does
    not), the tiled backward recomputing S and P: more FLOPs, far fewer bytes moved, and the
    PINNED sentences; none of the STALE wording. `texts` maps an exercise id (and "bugs") to
    everything it says."""
    flat = {k: " ".join(v.split()) for k, v in texts.items()}
    pinned = list(DECODE_COST.items()) + list(PINNED)
    problems = [f"{k}: no longer says '{phrase}'" for k, phrase in pinned if phrase not in flat[k]]
    if "says only tiling removes the T×T buffer" not in flat["mha-screen"]:
        problems.append("mha-screen: the rubric no longer says only tiling removes the T×T buffer")
    if "only tiling (flash-style, an online softmax over key blocks) removes the T×T buffer; a KV cache does not" not in flat["mha-screen"]:
        problems.append("mha-screen: the cost question no longer says a KV cache does not remove the T×T buffer")
    if (
        "the backward pass recomputes the scores and weights from q, k, v and one logsumexp per query: more FLOPs, far fewer bytes moved"
    ) not in flat["tiled-softmax"]:
        problems.append("tiled-softmax: the backward no longer recomputes S and P with more FLOPs, fewer bytes")
    for key, text in flat.items():
        for stale in STALE:
            found = re.search(stale, text)
            if found:
                problems.append(f"{key}: the old wording {found.group(0)!r} is back")
    return problems


def convention_problems(exercise: catalog.Exercise) -> list[str]:
    """A statement that has a rule for queries with no allowed key calls it this exercise's convention."""
    text = " ".join(exercise.statement.split())
    if re.search(r"no allowed (key|position)", text) and "this exercise's convention" not in text:
        return [f"{exercise.id}: its rule for fully blocked queries is not named this exercise's convention"]
    return []


def current_texts() -> dict[str, str]:
    texts = {e.id: every_text(e) for e in EXERCISES}
    texts["bugs"] = "\n".join(" ".join((b.symptom, b.fix, b.test_idea)) for b in catalog.bugs().values())
    return texts


@pytest.mark.parametrize(("T", "H"), [(2, 2), (3, 3), (4, 2), (2, 4), (1, 3), (3, 1), (1, 1)])
def test_bare_reshape_mixes_heads_whenever_t_and_h_are_at_least_two(T, H):
    a = np.random.default_rng(T * 10 + H).normal(size=(2, T, H * 2))
    same = np.array_equal(split_heads(a, H, "bare"), split_heads(a, H, "correct"))
    assert same == (T == 1 or H == 1)


def test_reshape_without_transpose_claim():
    bug = catalog.bugs()["reshape-without-transpose"]
    assert reshape_claim_problems(bug.symptom, bug.test_idea) == []


def test_heads_interleaved_example():
    assert interleaved_claim_problems(catalog.bugs()["heads-interleaved"].test_idea) == []


def test_bias_scaled_needs_d_at_least_two():
    assert bias_scaled_claim_problems(catalog.bugs()["bias-scaled"].test_idea) == []


def test_decode_cost_and_memory_wording():
    assert wording_problems(current_texts()) == []


def test_decode_cost_counts():
    """The O(D² + t·D) per step, counted: with a cache one step projects one token (4·D² multiply-adds
    for q, k, v and the output) and scores it against t keys (2·t·D); recomputing the sequence costs
    t·4·D² + 2·t²·D. The tiled backward reads T logsumexps instead of the T×S weights, for 2·T·S·d more
    multiply-adds (recomputing q·kᵀ)."""
    for D in (64, 512, 4096):
        for t in (1, 100, 10_000):
            cached, recompute = 4 * D * D + 2 * t * D, t * 4 * D * D + 2 * t * t * D
            assert 2 <= cached / (D * D + t * D) <= 4 and 2 <= recompute / (t * D * D + t * t * D) <= 4
            assert recompute == t * cached
    T = S = 4096
    d = 64
    saved_p, saved_lse = T * S, T  # numbers the backward reads back
    assert saved_p / saved_lse == S and 2 * T * S * d > 0


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_a_fully_blocked_query_rule_is_this_exercises_convention(exercise):
    assert convention_problems(exercise) == []


def test_every_blocked_row_rule_is_named_where_expected():
    named = {e.id for e in EXERCISES if "this exercise's convention" in " ".join(e.statement.split())}
    assert named == {
        "mha-screen",
        "gqa",
        "cross-attention",
        "mha-masked-bias",
        "rope",
        "tiled-softmax",
        "attention-backward",
        "flash-backward",
    }


def test_the_corrected_claims_can_fail():
    """Each check above, fed the old or a deliberately wrong wording, reports it."""
    import dataclasses

    bug = catalog.bugs()["reshape-without-transpose"]
    old_idea = "With T ≠ H, check that head h of token t equals the projected columns h*hd:(h+1)*hd of token t."
    assert any("T ≠ H" in p for p in reshape_claim_problems(bug.symptom, old_idea))
    assert reshape_claim_problems(bug.symptom.replace("T ≥ 2 and H ≥ 2", "T ≥ 3 and H ≥ 2"), bug.test_idea)
    idea = catalog.bugs()["heads-interleaved"].test_idea
    swapped = idea.replace("head 0 (columns 0-1)", "head X").replace("head 1 (columns 2-3)", "head 0 (columns 0-1)")
    assert interleaved_claim_problems(swapped.replace("head X", "head 1 (columns 2-3)"))
    assert interleaved_claim_problems(idea.replace("feature 1", "feature 2"))
    idea = catalog.bugs()["bias-scaled"].test_idea
    assert any("D=1" in p for p in bias_scaled_claim_problems(idea.replace("D ≥ 2", "D ≥ 1")))
    assert any("D=2" in p for p in bias_scaled_claim_problems(idea.replace("D ≥ 2", "D ≥ 3")))
    texts = current_texts()
    old = {  # the wording before the corrections, from git log -p -- prompts/
        "mha-screen": texts["mha-screen"].replace(
            "costs O(D² + t·D) per layer instead of recomputing the whole sequence", "costs O(T·D) instead of recomputing everything"
        ),
        "kv-cache": texts["kv-cache"] + "\nCan state the cache size 2·B·t·D per layer and the per-step cost O(t·D)",
        "tiled-softmax": texts["tiled-softmax"].replace("more FLOPs, far fewer bytes moved", "fewer bytes")
        + "\nStates the memory O(T·(block_size + dv)) and that the FLOPs do not change",
        "bugs": old_idea,
    }
    found = wording_problems({**texts, **old})
    for phrase in (
        "mha-screen: no longer says",
        "'costs O(T·D)' is back",
        "'per-step cost O(t·D)' is back",
        "tiled-softmax: the backward no longer",
        "'FLOPs do not change' is back",
        "'T ≠ H' is back",
    ):
        assert any(phrase in p for p in found), phrase
    mha = catalog.exercise("mha-screen")
    unnamed = dataclasses.replace(mha, statement=mha.statement.replace("**this exercise's convention**", "the rule"))
    assert convention_problems(unnamed)


def test_softmax_wrong_axis_is_filed_under_the_softmax_axis():
    assert catalog.bugs()["softmax-wrong-axis"].concept == "softmax-axis"  # it was filed under masking


def test_the_smaller_wording_fixes_can_fail():
    """Each PINNED sentence back to what it said before (or gone) is reported, and the old wording too."""
    olds = {
        "kv-cache": {PINNED[0][1]: "Why does a decoding step need no causal mask, and where would one still be needed?", PINNED[3][1]: ""},
        "mha-screen": {PINNED[1][1]: "with unit-variance entries its variance grows like hd", PINNED[2][1]: ""},
    }
    texts = {k: " ".join(v.split()) for k, v in current_texts().items()}
    for where, swaps in olds.items():
        for new, old in swaps.items():
            texts[where] = texts[where].replace(new, old)
    found = wording_problems(texts)
    assert len([p for p in found if "no longer says" in p]) == len(PINNED)
    for old in ("Why does a decoding step need no causal mask", "with unit-variance entries its variance grows like hd"):
        assert any(f"{old!r} is back" in p for p in found), old
