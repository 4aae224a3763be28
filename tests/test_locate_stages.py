"""check --locate's stages beyond the first four exercises, and what tracing says about real code:
the masked-bias and kv-cache stages, uniform weights on a fully blocked row named where the
scores were filled, a bias-free nn.Linear named where it is made, sliding-window's whole score
matrix, the probe call (inputs only), and the shape of the new code when no small edit exists,
at 80 columns."""

from __future__ import annotations

import io
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pytest

from attn_kit.checks import stages
from attn_kit.grading import locate
from attn_kit.grading.locate import matching, sites, tracing
from attn_kit.render import check
from attn_kit.report.results import Diagnosis, Report

from conftest import need_torch
from helpers import arrays_in

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"


def _follow(path: Path, exercise: str) -> matching.Trace:
    """The probe call traced (no failing call: a report with no results)."""
    traced = tracing.follow(str(path), Report(exercise, str(path), 0, []), 60.0, None, False, ())
    assert traced is not None
    return traced


def _marked(path: Path) -> set[int]:
    return {i for i, line in enumerate(path.read_text().splitlines(), 1) if "BUG(" in line}


@pytest.mark.parametrize(
    "exercise, reference",
    [
        ("mha-masked-bias", "reference_numpy.py"),
        ("kv-cache", "reference_numpy.py"),
        ("sliding-window", "reference_numpy.py"),
        ("mha-screen", "reference_numpy.py"),
    ],
)
def test_a_reference_solution_has_no_divergence_on_its_probe(exercise, reference):
    traced = _follow(SOLUTIONS / exercise / reference, exercise)
    assert traced.records > 20 and not traced.error
    assert traced.divergences == []
    assert {"q_heads", "context" if exercise != "mha-masked-bias" else "weights"} <= set(traced.matched)


@pytest.mark.parametrize(
    "exercise, bug, stage, words, line",
    [
        ("mha-masked-bias", "blocked-row-uniform", "weights", "blocked-row-uniform", 32),  # the BUG line
        ("kv-cache", "no-scaling", "scaled", "the 1/√hd scale is missing", 41),  # the BUG line
        ("sliding-window", "materialises-scores", "raw", "materialises-scores", 28),  # where the T×T scores are made
    ],
)
def test_the_newly_staged_exercises_name_the_wrong_stage(exercise, bug, stage, words, line):
    path = SOLUTIONS / exercise / "bugs" / f"{bug}.py"
    if "import torch" in path.read_text():
        need_torch()
    traced = _follow(path, exercise)
    assert any(d.stage == stage and words in d.relation and d.line == line for d in traced.divergences)


def test_a_missing_bias_in_the_masked_bias_exercise_is_still_the_scaled_scores():
    need_torch()
    path = SOLUTIONS / "mha-masked-bias" / "bugs" / "bias-scaled@not-added.py"
    traced = _follow(path, "mha-masked-bias")
    [first, *_] = traced.divergences
    assert first.stage == "biased" and "still the scaled scores" in first.relation


def test_uniform_weights_on_a_blocked_row_are_named_where_the_scores_were_filled(tmp_path):
    path = tmp_path / "solution.py"
    path.write_text(
        textwrap.dedent(
            """\
            import numpy as np


            def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
                x = np.asarray(x, dtype=np.float64)
                B, T, D = x.shape
                hd = D // num_heads
                q = (x @ params["Wq"] + params["bq"]).reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)
                k = (x @ params["Wk"] + params["bk"]).reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)
                v = (x @ params["Wv"] + params["bv"]).reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)
                scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
                if mask is not None:
                    scores = np.where(np.asarray(mask, dtype=bool)[:, None], scores, -1e9)
                e = np.exp(scores - scores.max(axis=-1, keepdims=True))
                weights = e / e.sum(axis=-1, keepdims=True)
                merged = (weights @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
                out = merged @ params["Wo"] + params["bo"]
                return (out, weights) if return_weights else out
            """
        )
    )
    traced = _follow(path, "mha-screen")
    [first] = traced.divergences
    assert first.line == 13 and first.name == "scores"
    assert "uniform" in first.relation and "blocked-row-uniform" in first.relation
    assert first.words == stages.by_id()["masked"].words


def test_a_bias_free_linear_layer_is_named_where_it_is_made():
    text = textwrap.dedent(
        """\
        from torch import nn

        class Attention(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.qkv = nn.Linear(d, 3 * d, bias=False)
                self.out = nn.Linear(d, d)

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                return self.out(q)
        """
    )
    shown = matching.Divergence(10, "q", "Attention.forward", "q_proj", "the projected queries", "it is x @ Wq without the bias bq")
    other = matching.Divergence(11, "return", "Attention.forward", "output", "the output", "it is 2× too large")
    [moved, kept] = sites.placed(matching.Trace([shown, other]), text).divergences
    assert moved.line == 6 and "`qkv` is made with bias=False on line 6" in moved.relation and "line 10" in moved.relation
    assert kept == other  # not a bias: where it showed


def test_a_wrong_factor_applied_by_name_is_placed_where_it_is_computed():
    text = textwrap.dedent(
        """\
        def attend(q, k, d):
            inv = d**-1.0
            for _ in range(1):
                s = q @ k.T * inv
            t = q @ k.T / math.sqrt(d * inv)
            return s, t
        """
    )
    applied = matching.Divergence(4, "s", "attend", "scaled", "the scaled scores", "it is 2× too small")
    written = matching.Divergence(5, "t", "attend", "scaled", "the scaled scores", "it is 2× too large")
    other = matching.Divergence(4, "s", "attend", "scaled", "the scaled scores", "3 of its 4 entries differ")
    [moved, unnamed, kept] = sites.placed(matching.Trace([applied, written, other]), text).divergences
    assert moved.line == 2 and "`inv` is computed on line 2 (applied on line 4)" in moved.relation
    assert unnamed == written and kept == other  # a name under a root is no factor; not a factor


def test_an_argument_only_passed_on_is_placed_on_the_line_that_called_with_it():
    text = textwrap.dedent(
        """\
        def turn(x, position):
            return x * position

        def step(x, position):
            return turn(x, position)

        def run(x):
            return step(x, 0)
        """
    )
    still = "it is still the key before the rotation: the call on line 5 asks `turn` for it"
    passed = matching.Divergence(5, "return", "step", "k_rot", "the rotated key", still, called_from=8)
    unknown = matching.Divergence(5, "return", "step", "k_rot", "the rotated key", still)
    [moved, kept] = sites.placed(matching.Trace([passed, unknown]), text).divergences
    assert moved.line == 8 and "what line 8 passes in (the value shows on line 5)" in moved.relation
    assert kept == unknown  # the calling line is not known


def test_the_harness_records_a_module_whose_locals_hold_layers(tmp_path):
    # an nn.Module has a class attribute `_version`, as a tensor does: taking a layer for a tensor
    # once ended the candidate's traced call with an AttributeError, and no value came back
    need_torch()
    path = tmp_path / "solution.py"
    path.write_text(
        textwrap.dedent(
            """\
            import torch
            from torch import nn

            def run(x):
                layer = nn.Linear(3, 3).double()
                layers = [layer, nn.Identity()]
                y = layers[0](torch.as_tensor(x))
                return y.detach().numpy()
            """
        )
    )
    from attn_kit.sandbox.session import Sandbox

    with Sandbox(str(path), 60.0, None) as sandbox:
        sandbox.start()
        outcome = sandbox.call("run", (np.ones((2, 3)),), {}, harness=tracing.HARNESS, echo=False)
    assert not outcome.extra["error"]
    assert any(r["name"] == "y" and r["value"].shape == (2, 3) for r in outcome.extra["records"])


@pytest.mark.parametrize("exercise", sorted(stages.PROBES))
def test_a_probe_call_binds_the_reference_way_and_carries_inputs_only(exercise):
    fn, args, kwargs = stages.probe_call(exercise)
    assert fn == stages.traced_function(exercise)
    ctx = stages.context_for(exercise, args, kwargs)
    values = stages.compute(ctx)
    assert {"scaled", "weights", "context"} <= set(values)
    sent = [np.asarray(a, dtype=np.float64) for a in arrays_in((args, kwargs))]
    for stage, value in values.items():
        if stage in ("q_heads", "k_heads", "v_heads", "allowed", "k_proj", "v_proj") and exercise in ("sliding-window", "kv-cache"):
            continue  # these exercises take them as arguments
        if stage == "allowed":
            continue  # the mask the call passes
        assert not any(a.size == np.size(value) and np.allclose(a.ravel(), np.ravel(value)) for a in sent), stage
    # the same on every run: a trace is reproducible
    assert repr(stages.probe_call(exercise)) == repr((fn, args, kwargs))


def test_every_new_code_shape_is_a_catalogue_bug_and_fits_80_columns():
    bugs = {b["id"] for b in tomllib.loads((ROOT / "prompts" / "bugs.toml").read_text())["bugs"]}
    assert set(stages.NEW_CODE) <= bugs
    for bug in stages.NEW_CODE:
        why, code = stages.new_code(bug)
        assert why and code and max(len(line) for line in code) <= 72
        compile("\n".join(code), bug, "exec")  # it parses as Python


def test_a_miss_shows_the_shape_of_the_new_code_in_the_bugs_words_at_80_columns():
    why, code = stages.new_code("blocked-row-uniform")
    loc = locate.Located(
        None, tried=12, seconds=3.0, stopped="exhausted", failing=("a", "b"), new_code=[("blocked-row-uniform", why, code)]
    )
    report = Report("mha-screen", "solution.py", 1, [], [Diagnosis("blocked-row-uniform", "A fully blocked row gets uniform weights", "")])
    out = check.Console(width=80, file=io.StringIO(), color_system=None, theme=check.THEME)
    check.located(loc, report, out=out)
    screen = out.file.getvalue().splitlines()
    assert max(len(line) for line in screen) <= 80
    text = " ".join(" ".join(screen).split())
    assert "No small edit of your lines fixes blocked-row-uniform: the fix is new code, a guard for rows with no allowed key" in text
    assert "Its shape:" in text
    assert any(line.strip() == code[-1].strip() for line in screen)  # the code's lines, whole
    assert loc.to_json()["new_code"][0]["code"] == list(code)
