"""flash-backward graded on solutions the kit did not write, and its references checked against an
independent oracle: torch autograd through a plain masked softmax attention, and torch.logsumexp.

The corpus (tests/corpus/flash) holds solutions written from the statement in styles unlike the
references: a class, float32 throughout, per-row loops inside each block pair. Each must pass
every check; the float32 one with a note. The verdict replays (reads, repeat calls) are shown to
tell the kit's bug files from the references."""

from __future__ import annotations

import numpy as np
import pytest

from attn_kit.base.paths import solutions_dir
from attn_kit.checks import flash_backward as suite
from attn_kit.diagnosis.diagnose import load_module

from conftest import need_torch
from helpers import CORPUS, graded, one_quick_per

FLASH = CORPUS / "flash"
REFERENCES = ("reference_numpy.py", "reference_swapped.py")


def module(name: str):
    return load_module(str(solutions_dir("flash-backward") / name))


@pytest.mark.parametrize("name", one_quick_per(["class_based.py", "float32.py", "loops.py", "q_converted.py"], lambda n: "any"))
def test_flash_solutions_in_other_styles_pass(name):  # the quick run grades the first style, the full suite each
    report = graded(FLASH / name, 3)
    assert report.passed, [(r.id, r.message) for r in report.results if r.status != "pass"]
    assert not report.diagnosis


def test_flash_float32_passes_with_a_note():
    report = graded(FLASH / "float32.py", 3)
    notes = " ".join([*report.notes, *(n for r in report.results for n in r.notes)])
    assert "float32" in notes and "within float32 rounding" in notes


def test_the_swapped_reference_passes():
    report = graded(solutions_dir("flash-backward") / "reference_swapped.py", 5)
    assert report.passed and not report.diagnosis


@pytest.mark.parametrize(
    "name, failing",
    [
        ("no_value_error.py", ["value-error-when-a-block-size-is-below-one"]),
        ("wrong_shapes.py", ["forward-returns-output-and-lse", "backward-returns-three-gradients"]),
    ],
)
def test_flash_shape_and_value_error_mistakes_fail_their_checks(name, failing):
    report = graded(FLASH / name, 3)
    failed = [r.id for r in report.results if r.status in ("fail", "error")]
    assert [c for c in failing if c not in failed] == []


def test_the_repeat_replay_tells_the_nondeterministic_bug_from_the_references():
    rng = np.random.default_rng(0)
    q, k, v = suite.qkv(rng, 9, 23, 3, 2)
    out, lse = suite.naive_forward(q, k, v)
    d_out = rng.normal(size=out.shape)
    args = (q, k, v, out, lse, d_out)
    for name in REFERENCES:
        assert suite.replay_twice(module(name), *args, block_q=2, block_k=3) == [0.0]
    bug = load_module(str(solutions_dir("flash-backward") / "bugs" / "backward-nondeterministic.py"))
    assert [suite.replay_twice(bug, *args, block_q=2, block_k=3) for _ in range(3)].count([1.0]) >= 2


# --- an independent oracle: torch ----------------------------------------------------------------


def torch_attention(torch, q, k, v, ok):
    """softmax over the allowed keys (rows with none: zeros) @ v, and the logsumexp of the allowed
    scaled scores (-inf for those rows), with torch autograd for the gradients."""
    scores = (q @ k.T) / q.shape[1] ** 0.5
    scores = scores.masked_fill(~ok, float("-inf"))
    lse = torch.logsumexp(scores, dim=1)
    safe = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
    weights = torch.where(ok, torch.exp(scores - safe[:, None]), torch.zeros_like(scores))
    return weights @ v, lse


@pytest.mark.parametrize("name", REFERENCES)
def test_flash_references_match_torch_autograd(name):
    torch = need_torch()
    ref = module(name)
    rng = np.random.default_rng(11)
    for T, S, d, dv, causal in ((5, 9, 4, 3, True), (8, 3, 2, 5, False), (7, 7, 3, 3, True), (6, 10, 5, 2, False)):
        q, k, v = suite.qkv(rng, T, S, d, dv)
        mask = suite.random_mask(rng, T, S, blocked_rows=1)
        ok = suite.allowed(T, S, mask, causal)
        tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
        t_out, t_lse = torch_attention(torch, tq, tk, tv, torch.tensor(ok))
        d_out = rng.normal(size=(T, dv))
        (t_out * torch.tensor(d_out)).sum().backward()
        out, lse = ref.flash_forward(q, k, v, mask, causal, block_q=3, block_k=2)
        np.testing.assert_allclose(out, t_out.detach().numpy(), atol=1e-12)
        want = t_lse.detach().numpy()
        assert np.array_equal(np.isneginf(lse), np.isneginf(want))
        np.testing.assert_allclose(lse[np.isfinite(lse)], want[np.isfinite(want)], atol=1e-12)
        grads = ref.flash_backward(q, k, v, out, lse, d_out, mask, causal, block_q=2, block_k=4)
        for got, tensor in zip(grads, (tq, tk, tv)):
            np.testing.assert_allclose(got, tensor.grad.numpy(), atol=1e-12)


def test_flash_reference_matches_torch_sdpa_with_a_bottom_right_causal_mask():
    """torch's own kernel entry point on a case without empty rows: SDPA with the boolean
    bottom-right mask (True = allowed), its output and autograd gradients."""
    torch = need_torch()
    import torch.nn.functional as F

    ref = module("reference_numpy.py")
    rng = np.random.default_rng(12)
    T, S, d, dv = 6, 11, 4, 3
    q, k, v = suite.qkv(rng, T, S, d, dv)
    ok = suite.allowed(T, S, None, True)
    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    t_out = F.scaled_dot_product_attention(tq[None], tk[None], tv[None], attn_mask=torch.tensor(ok)[None])[0]
    d_out = rng.normal(size=(T, dv))
    (t_out * torch.tensor(d_out)).sum().backward()
    out, lse = ref.flash_forward(q, k, v, causal=True, block_q=4, block_k=3)
    np.testing.assert_allclose(out, t_out.detach().numpy(), atol=1e-12)
    grads = ref.flash_backward(q, k, v, out, lse, d_out, causal=True, block_q=4, block_k=3)
    for got, tensor in zip(grads, (tq, tk, tv)):
        np.testing.assert_allclose(got, tensor.grad.numpy(), atol=1e-12)


# --- named on code the kit did not write ----------------------------------------------------------

# (corpus file, exact text, its replacement, the id the diagnosis must name)
FOREIGN_BUGS = [
    ("class_based.py", "prob * (gb @ vb.T - delta[i0:i1, None])", "prob * (gb @ vb.T)", "softmax-jacobian-diagonal"),
    ("class_based.py", "keep &= jj - ii <= S - T", "keep &= jj <= ii", "causal-alignment-wrong"),
    ("float32.py", "lse[i0:i1][ok] = m[ok] + np.log(l[ok])", "lse[i0:i1][ok] = np.log(l[ok])", "lse-missing-max"),
    ("float32.py", "sh = np.where(np.isfinite(lse32), lse32, F(0))", "sh = lse32", "lse-empty-row-nan"),
    ("loops.py", "            if causal and j0 > i1 - 1 + S - T:\n                break\n", "", "causal-blocks-not-skipped"),
    (
        "loops.py",
        "D = [float(np.dot(d_out[i], out[i])) for i in range(T)]",
        "D = [float(np.sum(d_out[i])) for i in range(T)]",
        "flash-delta-wrong",
    ),
]


# the quick run: one mistake in each style; the full suite every one
@pytest.mark.parametrize("name, old, new, bug", one_quick_per(FOREIGN_BUGS, lambda b: b[0], ids=lambda b: f"{b[0]}:{b[3]}"))
def test_a_mistake_in_a_foreign_style_is_named(name, old, new, bug, tmp_path):
    source = (FLASH / name).read_text(encoding="utf-8")
    assert source.count(old) == 1
    path = tmp_path / name
    path.write_text(source.replace(old, new), encoding="utf-8")
    report = graded(path, 2)
    assert not report.passed
    assert [d.bug for d in report.diagnosis][:1] == [bug], [d.bug for d in report.diagnosis]


def family_forms() -> list[tuple[str, str, str]]:
    """(bug id, variant label, source) of every flash-backward form: prompts/families.toml's and the
    exercise's own (prompts/catalogue/flash-backward.toml), as the diagnosis reads them."""
    from attn_kit.base.paths import package_dir
    from attn_kit.diagnosis import compose
    from attn_kit.load import catalog

    prompts = package_dir("prompts")
    found = []
    root = solutions_dir("flash-backward")
    for family in compose.read_families(prompts / compose.FAMILIES) + catalog.own_families(prompts):
        if family["exercise"] != "flash-backward":
            continue
        base = (root / ("reference_numpy.py" if family.get("on") == "reference" else f"bugs/{family['form']}.py")).read_text(
            encoding="utf-8"
        )
        for variant in family.get("variant", []):
            text = base
            for old, new in variant["edits"]:
                text = text.replace(old, new)
            found.append((family["form"], variant["label"], text))
    return found


def test_the_flash_families_are_found():
    assert {form for form, _, _ in family_forms()} >= {"causal-alignment-wrong", "flash-delta-wrong", "partial-block-dropped"}


# the quick run: one form of each family (bug); the full suite every form
@pytest.mark.parametrize("bug, label, source", one_quick_per(family_forms(), lambda f: f[0], ids=lambda f: f"{f[0]}:{f[1]}"))
def test_every_flash_family_form_is_named(bug, label, source, tmp_path):
    path = tmp_path / "candidate.py"
    path.write_text(source, encoding="utf-8")
    report = graded(path, 1)
    assert not report.passed, label
    assert [d.bug for d in report.diagnosis][:1] == [bug], (label, [d.bug for d in report.diagnosis])
