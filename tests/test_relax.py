"""Checks that don't stop at the first shape (kit/grading/relax.py, issue 33): a check whose call
raised at its general shape is judged again at a simpler shape the code supports, for no points,
so that the file's other mistakes are still found and named, and the report says which shape."""

from __future__ import annotations

import dataclasses
import importlib
import json

import pytest

from attn_kit.base.paths import reference_files
from attn_kit.compare.registry import Relaxation, both, equal
from attn_kit.diagnosis import diagnose
from attn_kit.grading import pipeline, relax
from attn_kit.load import catalog, preflight
from attn_kit.report.results import CheckResult, CheckStatus
from attn_kit.sandbox.session import Sandbox

from conftest import CORPUS, need_torch

REAL = CORPUS / "real"
RELAXED = ("mha-masked-bias", "tiled-softmax", "attention-backward")  # the suites with SUITE.relaxations


def test_a_relaxation_sets_the_names_it_equates_and_leaves_the_rest():
    dims = {"D": 3, "Dv": 2, "Cq": 4, "Cctx": 6, "Cout": 7}
    assert equal("D", "Dv")(dims) == {**dims, "Dv": 3}
    assert equal("Cq", "Cctx", "Cout")(dims) == {**dims, "Cctx": 4, "Cout": 4}
    assert both(equal("D", "Dv"), equal("Cq", "Cout"))(dims) == {**dims, "Dv": 3, "Cout": 4}
    assert equal("d", "dv")({"T": 5, "dv": 3}) == {"T": 5, "dv": 3}  # a name it lacks: nothing to equate
    assert dims == {"D": 3, "Dv": 2, "Cq": 4, "Cctx": 6, "Cout": 7}  # the dims given are not changed


@pytest.mark.parametrize("exercise", RELAXED)
def test_the_reference_passes_every_relaxable_check_at_every_relaxation(exercise):
    """A relaxed case is a valid case: its expected values follow the relaxed shapes (none of the
    check's own arithmetic assumes the general ones), so the reference passes it."""
    ex = catalog.exercise(exercise)
    if ex.needs == "torch" or exercise == "mha-masked-bias":
        need_torch()
    suite = pipeline.suite_for(ex)
    assert suite.relaxations, exercise
    path = reference_files(exercise)[0]
    source = preflight.read_source(path)
    oracle = diagnose.oracle_for(ex)
    with Sandbox(str(path), 60.0, None, preload=pipeline.preload_for({n for n, _ in source.imports()}, ex)) as sandbox:
        sandbox.start()
        for check in (c for c in suite.checks if c.relaxable and "memory" not in c.id):
            for relaxation in suite.relaxations:
                blank = CheckResult(check.id, check.title, CheckStatus.PASS, 0, check.points)
                result = pipeline._run(check, blank, sandbox, oracle, 1, source, relaxation)
                assert result.status in (CheckStatus.PASS, CheckStatus.SKIP), (check.id, relaxation.said, result.message)


def _graded(name: str, seed: int = 1, relaxations: bool = True):
    exercise = catalog.exercise(preflight.read_source(REAL / name).header or "")
    suite = pipeline.suite_for(exercise)
    kept = suite.relaxations
    if not relaxations:
        suite.relaxations = ()
    try:
        return pipeline.grade(REAL / name, pipeline.Options(seed=seed, timeout=60.0))
    finally:
        suite.relaxations = kept


SQUARE_ONLY = [  # (file, the shape it supports, ids it makes that only the reruns show in a failing check)
    ("annotated_transformer_masked_bias.py", "Dv = D and Cq = Cctx = Cout = H·D", {"mask-ignored", "bias-scaled", "blocked-row-uniform"}),
    ("perceiver_attention.py", "Dv = D and Cout = Cq", {"mask-ignored", "bias-scaled", "biases-ignored", "blocked-row-uniform"}),
    ("torch_nn_multihead_attention.py", "Dv = D and Cq = Cctx = Cout = H·D", {"mask-ignored", "blocked-row-nan"}),
]


@pytest.mark.parametrize(("name", "shape", "bugs"), SQUARE_ONLY, ids=[n for n, _, _ in SQUARE_ONLY])
def test_a_layer_that_runs_only_at_simpler_widths_is_judged_there_for_no_points(name, shape, bugs):
    need_torch()
    report = _graded(name)
    shapes = next(r for r in report.results if r.id == "output-shapes")
    assert shapes.status == "fail" and shapes.points == 0 and not shapes.supported_shape
    assert "your code runs only when " in shapes.message
    judged = [r for r in report.results if r.supported_shape]
    assert judged and all(r.points == 0 for r in judged)
    failing = [r for r in judged if relax.passes_at(r.supported_shape) not in r.message]
    assert failing, "some property fails at the supported shape too"
    assert all(r.status == "fail" and r.message.startswith(f"at {r.supported_shape}, a shape your code supports") for r in failing)
    assert any(r.supported_shape == shape for r in judged)
    # the other mistakes are named, and the checks that show them carry their names
    assert {d.bug for d in report.diagnosis} >= bugs
    assert {r.bug for r in failing if r.bug} & bugs
    # the reruns change the words and the evidence, never the score or the verdict
    plain = _graded(name, relaxations=False)
    assert report.points == plain.points and report.passed is plain.passed is False
    assert not any(r.supported_shape for r in plain.results)
    # the report says it once, and check --json carries the shape of each check judged again
    assert any(n.startswith(f"your code runs only when {shape} (it raised at the general shapes)") for n in report.notes)
    entries = report.to_json()["checks"]
    assert {e["id"] for e in entries if e.get("supported_shape")} == {r.id for r in judged}
    jsonschema = pytest.importorskip("jsonschema")
    from attn_kit.report import jsonout

    jsonschema.Draft202012Validator(jsonout.schema("check")).validate(json.loads(json.dumps(report.to_json())))


@pytest.mark.parametrize(
    ("name", "exercise"),
    [("lucidrains_flash_attention_forward.py", "tiled-softmax"), ("lucidrains_flash_attention_backward.py", "attention-backward")],
)
def test_a_flash_port_that_needs_dv_equal_to_d_is_told_so_and_nothing_is_named(name, exercise):
    need_torch()
    report = _graded(name)
    assert report.exercise == exercise and not report.passed
    judged = [r for r in report.results if r.supported_shape]
    assert judged and {r.supported_shape for r in judged} == {"dv = d"}
    holds = [r for r in judged if r.status != "fail"]
    assert holds and all(relax.passes_at("dv = d") in r.message and r.points == 0 for r in holds)
    assert report.diagnosis == []
    assert report.points == _graded(name, relaxations=False).points


def test_a_check_whose_arithmetic_breaks_at_a_relaxation_keeps_its_own_result():
    """The rerun only explains: when the check's own code cannot run at the simpler shape, the
    result of its own case stands (no kit error)."""
    from attn_kit.base.records import CallStatus, ErrorInfo, Outcome
    from attn_kit.report.results import Call

    outcome = Outcome(CallStatus.RAISED, error=ErrorInfo("RuntimeError", "shape mismatch", ""))
    call = Call("f", (), {}, outcome)
    result = CheckResult("c", "t", CheckStatus.ERROR, 0, 2, message="`f` raised RuntimeError", failing_call=call)
    check = dataclasses.replace(next(iter(importlib.import_module("attn_kit.checks.tiled_softmax").SUITE.checks)), relaxable=True)

    def broken(relaxation):
        raise ValueError("operands could not be broadcast together")

    assert relax.judged_again(check, result, (Relaxation("dv = d", equal("d", "dv")),), broken, []) is result
    assert relax.judged_again(dataclasses.replace(check, relaxable=False), result, (), broken, []) is result


def test_a_stub_is_never_judged_again():
    from attn_kit.base.records import CallStatus, ErrorInfo, Outcome
    from attn_kit.report.results import Call

    stub = Outcome(CallStatus.RAISED, error=ErrorInfo("NotImplementedError", "", ""))
    result = CheckResult("c", "t", CheckStatus.ERROR, 0, 2, failing_call=Call("f", (), {}, stub))
    assert not relax.raised(result)


def test_the_first_screen_says_which_shape_the_code_supports_and_judges_a_check_there(tmp_path):
    """At 80×24: the note puts the shape first, and the worst failure shown is a check judged at it."""
    need_torch()
    import pexpect
    from test_first_screen import run, screen_after

    child = run("check", REAL / "perceiver_attention.py", "--seed", 1, cwd=tmp_path)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    screen = "\n".join(screen_after(child))
    assert "attn-kit check mha-masked-bias" in screen
    assert "note: your code runs only when Dv = D and Cout = Cq" in screen
    assert "a shape your code supports" in screen
    assert "known bugs" in screen and "mask-ignored" in screen


def test_a_right_layer_that_runs_only_at_square_widths_is_told_its_shape_and_nothing_else(tmp_path):
    """The reference, made square-only (every head width read off the query's width, as layers
    built from one model width do): its other properties all hold at the shape it supports, so
    the reruns find nothing and nothing is named."""
    need_torch()  # mha-masked-bias is graded with torch's reference beside it
    reference = (reference_files("mha-masked-bias")[0].parent / "reference_numpy.py").read_text(encoding="utf-8")
    square = reference.replace("D = w_q.shape[1] // H", "D = query.shape[-1] // H").replace("Dv = w_v.shape[1] // H", "Dv = D")
    assert square.count("query.shape[-1] // H") == 1 and "Dv = D\n" in square
    path = tmp_path / "square_only.py"
    path.write_text(square, encoding="utf-8")
    report = pipeline.grade(path, pipeline.Options(seed=1, timeout=60.0))
    assert not report.passed and report.diagnosis == []
    shape = "Dv = D and Cq = Cctx = Cout = H·D"
    assert f"your code runs only when {shape}" in next(r for r in report.results if r.id == "output-shapes").message
    judged = [r for r in report.results if r.supported_shape]
    assert judged and all(r.supported_shape == shape and relax.passes_at(shape) in r.message for r in judged)
    # the rest passed, or is about the shape itself, or does not apply to NumPy code (device, gradients)
    unread = {r.id for r in report.results if r.status != "pass" and not r.supported_shape}
    assert unread <= {"output-shapes", "value-width-differs-from-key-width", "device-preserved"} | {
        r.id for r in report.results if r.id.startswith("gradients-")
    }, unread
    assert any(n.startswith(f"your code runs only when {shape}") and "; 0 of them fail there too" in n for n in report.notes)
