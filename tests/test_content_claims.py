"""The teaching claims issue 20 corrected, each recomputed or run.

gqa's near-code hints assembled as written pass the whole gqa suite; the attention-sinks mask is
causal; the SDPA recipe zeroes a fully masked row in torch; a causal mask breaks permutation
equivariance; the -1e9 claims hold for the dtypes they name; dk-from-wrong-operand swaps dZ's
axes; the kv-cache wording and the backward's names agree with what the code does.
"""

from __future__ import annotations

import math
import re
import textwrap

import numpy as np
import pytest
from markdown_it import MarkdownIt

from attn_kit.base.paths import solutions_dir
from attn_kit.diagnosis.diagnose import load_module
from attn_kit.grading import pipeline
from attn_kit.load import catalog

from conftest import need_torch


def question(exercise_id: str, question_id: str) -> catalog.Question:
    return next(q for q in catalog.exercise(exercise_id).questions if q.id == question_id)


def code_of(hint: catalog.Hint) -> str:
    """The hint's code blocks, as the candidate reads them."""
    tokens = MarkdownIt().parse(hint.text)
    return "".join(t.content for t in tokens if t.type in ("code_block", "fence"))


def plain_softmax(s, axis=-1):
    e = np.exp(s - s.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# --- gqa: hints 9, 11 and 12 fit together ----------------------------------------------------------

GQA_FRAME = """# attn-kit: gqa
import math

import numpy as np


def grouped_query_attention(x, params, num_heads, num_kv_heads, mask=None, return_weights=False):
    x = np.asarray(x, dtype=float)
    B, T, D = x.shape

    def project(a, w, b):
        y = a @ np.asarray(params[w], dtype=float)
        return y if params.get(b) is None else y + np.asarray(params[b], dtype=float)

    def split(y, heads):
        return y.reshape(B, T, heads, -1).transpose(0, 2, 1, 3)

{widths}
{grouped}
    out = project(heads.transpose(0, 2, 1, 3).reshape(B, T, D), "Wo", "bo")
    return (out, weights) if return_weights else out
"""


def assembled_gqa(softmax: str) -> str:
    """hint 9 (widths), hint 11 (grouped scores) with its `...` replaced by hint 12 as written."""
    hints = {h.title: h for h in catalog.exercise("gqa").hints if h.step == "code"}
    grouped = code_of(hints["Sharing without copying"])
    grouped = re.sub(r"^\.\.\..*$", lambda _: softmax.rstrip("\n"), grouped, flags=re.MULTILINE)
    return GQA_FRAME.format(widths=textwrap.indent(code_of(hints["Count the widths"]), "    "), grouped=textwrap.indent(grouped, "    "))


def test_gqa_hints_assembled_as_written_pass_every_check(tmp_path):
    softmax = code_of(next(h for h in catalog.exercise("gqa").hints if h.step == "code" and h.title == "The rest is multi-head attention"))
    path = tmp_path / "gqa_from_hints.py"
    path.write_text(assembled_gqa(softmax), encoding="utf-8")
    report = pipeline.grade(path, pipeline.Options(seed=7))
    assert report.passed, [r.id for r in report.results if r.status != "pass"]


def test_the_old_hint_12_mask_fails_with_grouped_scores(tmp_path):
    """What issue 20 found: `[:, None]` lines the batch axis up with the K/V axis of B×KV×g×T×T."""
    softmax = code_of(next(h for h in catalog.exercise("gqa").hints if h.step == "code" and h.title == "The rest is multi-head attention"))
    old = softmax.replace("[:, None, None]", "[:, None]")
    assert old != softmax
    path = tmp_path / "gqa_old_hint.py"
    path.write_text(assembled_gqa(old), encoding="utf-8")
    assert not pipeline.grade(path, pipeline.Options(seed=7)).passed


# --- sliding-window: the sinks mask stays causal -------------------------------------------------------


def sink_mask(formula: str, T: int, w: int, n_sink: int) -> np.ndarray:
    expression = formula.replace("−", "-")
    return np.array(
        [
            [
                bool(eval(expression, {}, {"i": i, "j": j, "w": w, "n_sink": n_sink}))  # noqa: S307
                for j in range(T)
            ]
            for i in range(T)
        ]
    )


def test_the_attention_sinks_mask_is_causal():
    point = next(p for p in question("sliding-window", "attention-sinks").key_points if "the mask becomes" in p)
    stated = re.search(r"the mask becomes: (j <= i and \(j < n_sink or j > i - w\))", point).group(1)
    old = re.search(r"'(j < n_sink or i - w < j <= i)'", point).group(1)
    T, w, n_sink = 8, 3, 4
    mask = sink_mask(stated, T, w, n_sink)
    assert not np.triu(mask, 1).any()  # nothing in the future
    band = np.array([[i - w < j <= i for j in range(T)] for i in range(T)])
    sinks = np.tril(np.ones((T, T), bool)) & (np.arange(T) < n_sink)[None, :]
    assert (mask == (band | sinks)).all()
    assert np.triu(sink_mask(old, T, w, n_sink), 1).any()  # the old reading was not causal


# --- mha-masked-bias: SDPA needs -inf (or a boolean mask) for zeros -------------------------------------


def test_the_sdpa_recipe_gives_zeros_on_a_fully_masked_row():
    torch = need_torch()
    F = torch.nn.functional
    answer = next(f.answer for f in catalog.exercise("mha-masked-bias").followups if "scaled_dot_product_attention" in f.prompt)
    assert "bias.masked_fill(~allowed, float('-inf'))" in answer and "plain average of the values" in answer
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, n, 4, generator=g) for n in (2, 3, 3))
    bias = torch.randn(2, 3, generator=g)
    allowed = torch.tensor([[True, True, False], [False, False, False]])
    recipe = bias.masked_fill(~allowed, float("-inf"))  # as the answer writes it
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=recipe)[0, 0]
    assert torch.all(out[1] == 0)
    weights = torch.softmax((q @ k.transpose(-1, -2))[0, 0, 0] / 2 + bias[0], -1)
    weights = torch.where(allowed[0], weights, torch.zeros(()))
    assert torch.allclose(out[0], (weights / weights.sum()) @ v[0, 0], atol=1e-6)
    for fill in (-1e9, torch.finfo(torch.float32).min):  # a finite fill averages
        finite = bias.masked_fill(~allowed, fill)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=finite)[0, 0]
        assert torch.allclose(out[1], v[0, 0].mean(0), atol=1e-6)
    assert torch.all(F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)[0, 0, 1] == 0)


# --- rope: order is invisible only without a mask ----------------------------------------------------


def self_attention(x, causal: bool):
    T, d = x.shape
    s = x @ x.T / math.sqrt(d)
    if causal:
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    return plain_softmax(s) @ x


def test_a_causal_mask_breaks_permutation_equivariance():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 4))
    perm = np.array([3, 0, 4, 1, 2])
    np.testing.assert_allclose(self_attention(x[perm], False), self_attention(x, False)[perm], atol=1e-12)
    assert not np.allclose(self_attention(x[perm], True), self_attention(x, True)[perm], atol=1e-3)
    # and position is readable from a causal layer alone: with equal tokens the output is equal,
    # but the first token's output is itself while later ones average over more keys
    statement = catalog.exercise("rope").statement
    assert "Attention without a mask does not know the order" in statement and "A causal mask breaks" in statement
    point = question("rope", "position-schemes").key_points[0]
    assert "without a mask" in point and "a causal mask breaks this" in point
    assert 0 in question("rope", "position-schemes").required


# --- the -1e9 claims, dtype by dtype ---------------------------------------------------------------


def added(scores, dtype):
    s = np.asarray(scores, dtype) + dtype(-1e9)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max())
        return e / e.sum()


def test_minus_1e9_in_float32_is_uniform_only_within_32_of_zero():
    assert np.spacing(np.float32(1e9)) == 64  # "64 apart"
    near_zero = [-32.0, -5.0, 0.0, 17.0, 32.0]
    assert len(set(added(near_zero, np.float32).tolist())) == 1  # every weight equal: uniform
    wide = [0.0, 100.0]  # beyond 32: neither
    got = added(wide, np.float32)
    assert not np.allclose(got, [0.5, 0.5]) and not np.allclose(got, 0) and got[1] > 0.99
    assert not np.allclose(added([0.0, 33.0], np.float32), [0.5, 0.5])  # 33 rounds to 64
    np.testing.assert_allclose(added([1.0, 2.0, 3.0], np.float64), plain_softmax(np.array([1.0, 2.0, 3.0])), rtol=1e-6)
    point = question("mha-screen", "blocked-rows").key_points
    assert any("within 32 of zero" in p and "64 apart" in p for p in point)


def test_minus_1e9_in_float16_is_minus_inf_in_numpy_and_an_error_in_masked_fill():
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isneginf(np.float16(-1e9))
        assert np.isnan(added([1.0, 2.0], np.float16)).all()
    texts = [p for q in catalog.exercise("mha-screen").questions for p in q.key_points]
    texts += [p for q in catalog.exercise("mha-masked-bias").questions for p in q.key_points]
    assert any("NumPy rounds it to -inf" in t and "masked_fill raises" in t for t in texts)
    assert any("torch's masked_fill raises an error instead" in t for t in texts)


def test_minus_1e9_with_torch_masked_fill():
    torch = need_torch()
    blocked = torch.tensor([True, True, True])
    with pytest.raises(RuntimeError):
        torch.zeros(3, dtype=torch.float16).masked_fill(blocked, -1e9)
    for dtype in (torch.float32, torch.float64):  # replaced: uniform
        filled = torch.tensor([1.0, 2.0, 3.0], dtype=dtype).masked_fill(blocked, -1e9)
        assert torch.allclose(torch.softmax(filled, -1), torch.full((3,), 1 / 3, dtype=dtype))
    assert torch.isneginf(torch.tensor(-1e9, dtype=torch.float16))  # a tensor of it: -inf


def test_the_additive_mask_symptom_names_its_dtype():
    scores = np.array([1.0, 2.0, 5.0])
    np.testing.assert_allclose(added(scores, np.float64), plain_softmax(scores), rtol=1e-6)
    symptom = catalog.bugs()["additive-mask-leaks"].symptom
    assert symptom.startswith("In float64") and "In float32" in symptom
    assert "within 32 of zero" in catalog.bugs()["blocked-row-uniform"].symptom


# --- attention-backward: dk from dZ·q, and the names ---------------------------------------------------


def test_dk_from_wrong_operand_reads_dz_with_its_axes_swapped():
    ref = load_module(str(solutions_dir("attention-backward") / "reference_numpy.py"))
    bug = load_module(str(solutions_dir("attention-backward") / "bugs" / "dk-from-wrong-operand.py"))
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(1, 1, 4, 3)), rng.normal(size=(1, 1, 4, 3))
    v, dout = rng.normal(size=(1, 1, 4, 2)), rng.normal(size=(1, 1, 4, 2))
    (dq, dk, dv), (bq, bk, bv) = ref.attention_backward(q, k, v, dout), bug.attention_backward(q, k, v, dout)
    np.testing.assert_allclose(bq, dq)
    np.testing.assert_allclose(bv, dv)
    assert not np.allclose(bk, dk)
    z = q[0, 0] @ k[0, 0].T / math.sqrt(3)
    p = plain_softmax(z)
    dp = dout[0, 0] @ v[0, 0].T
    dz = p * (dp - (p * dp).sum(1, keepdims=True))
    np.testing.assert_allclose(dk[0, 0], dz.T @ q[0, 0] / math.sqrt(3), atol=1e-12)
    np.testing.assert_allclose(bk[0, 0], dz @ q[0, 0] / math.sqrt(3), atol=1e-12)  # dZ's axes swapped
    symptom = catalog.bugs()["dk-from-wrong-operand"].symptom
    assert "query and key axes swapped" in symptom and "dq and dv are right" in symptom


def test_attention_backward_uses_s_only_for_the_key_length():
    exercise = catalog.exercise("attention-backward")
    texts = [
        exercise.statement,
        exercise.starter,
        *[h.text for h in exercise.hints],
        *[p for q in exercise.questions for p in (q.prompt, *q.key_points)],
        *[c.expect for c in exercise.checkpoints],
        (solutions_dir("attention-backward") / "reference_numpy.py").read_text(encoding="utf-8"),
    ]
    score_as_s = re.compile(r"\bdS\b|dSᵀ|softmax\(S\)|softmax of S\b|\bS = q|\bS = scale|\(or S\)|recomputing S\b")
    assert [t[:60] for t in texts if score_as_s.search(t)] == []
    assert "`Z = q kᵀ / sqrt(d)` (the T×S scores; S is only ever the key length)" in exercise.statement
    backward = [b for b in catalog.bugs().values() if b.concept == "backward"]
    assert backward and not any(re.search(r"\bdS\b", b.symptom + b.fix + b.title) for b in backward)


# --- kv-cache: what a step costs, what concatenation costs ----------------------------------------------


def test_kv_cache_reference_docstring_and_cache_layout_agree():
    ref = load_module(str(solutions_dir("kv-cache") / "reference_numpy.py"))
    doc = ref.__doc__
    assert "O(D²) for the four projections" in doc and "np.concatenate" in doc
    rng = np.random.default_rng(2)
    B, D, H, T = 2, 8, 2, 5
    params = {name: rng.normal(size=(D, D)) for name in ("Wq", "Wk", "Wv", "Wo")}
    cache, copied, read = None, 0, 0
    for t in range(T):
        _, cache = ref.decode_step(rng.normal(size=(B, D)), params, H, cache)
        keys, values = cache
        assert keys.size + values.size == 2 * B * (t + 1) * D  # exactly 2·B·t·D after t+1 calls
        copied += 2 * B * t * D if t else 0  # concatenate copies the old cache
        read += 2 * B * (t + 1) * D  # attention reads every key and value
    assert copied == 2 * B * D * T * (T - 1) // 2 and copied < read <= 2 * copied + 2 * B * D * T
    point = question("kv-cache", "cache-layout").key_points[0]
    assert "O(t·D) per step, O(T²·D) over a run" in point and "same order" in point
    statement = catalog.exercise("kv-cache").statement
    assert "**2·B·t·D numbers** in its filled part" in statement and "counts the *filled* rows" in statement
