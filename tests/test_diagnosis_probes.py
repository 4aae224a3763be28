"""Probes: narrow questions put to the candidate's functions, and how their answers meet the search.

- The readings (kit/diagnosis/probes.py) on numbers built for each answer: the fitted scale
  factor, an empty row, the zeros of masked weights.
- `meet`: a name the composed search gave stands; a probe names only bugs a failing check declares.
- tests/corpus/probes/: files with three catalogue bugs each, written as classes (an nn.Module, an
  object with __call__), einsum and float32, where each detector's mistake sits beside two
  unrelated ones: every listed bug is named, nothing else (expected_*.toml; the follow-up
  exercises' in expected_followups.toml). Correct files in the same styles and the references:
  every probe stays silent when asked directly, in a real sandbox.
- Each detector, asked directly of the kit's own one-bug file, answers with that bug only.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

from attn_kit.diagnosis import diagnose, probes
from attn_kit.load import preflight
from attn_kit.report.results import CheckResult, Diagnosis
from attn_kit.sandbox.session import Sandbox

from conftest import CORPUS, need_torch
from helpers import graded

PROBED = CORPUS / "probes"
TIMEOUT = 60.0  # torch files import torch while they load: on a loaded machine that passes 10 s
EXPECTED = {
    name: data
    for table in ("expected_screen.toml", "expected_masked.toml", "expected_followups.toml")
    for name, data in tomllib.loads((PROBED / table).read_text()).items()
}


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# --- the readings -------------------------------------------------------------------------------

RAW = np.random.default_rng(3).normal(0.0, 2.0, size=(2, 3, 4))


@pytest.mark.parametrize(
    ("factor", "total", "bug"),
    [
        (1 / 2, 1.0, None),  # 1/sqrt(4): right
        (1.0, 1.0, "no-scaling"),
        (1 / np.sqrt(8), 1.0, "scale-by-model-width"),
        (1 / 4, 1.0, "double-scaling"),
        (1.0, 1 / 2, "scale-after-softmax"),
        (0.7, 1.0, None),  # a factor the catalogue does not describe
    ],
)
def test_the_scale_factor_is_fitted_off_the_weights_and_named(factor, total, bug):
    fitted = probes.fit_factor(softmax(factor * RAW) * total, RAW)
    assert fitted is not None and np.isclose(fitted[0], factor) and np.isclose(fitted[1], total)
    answer = probes.scale_answer(*fitted, D=4, H=2)
    assert (answer.bug if answer else None) == bug


def test_weights_that_are_no_scaled_softmax_give_no_factor():
    weights = softmax(0.5 * RAW)
    weights[0, 0] = softmax(0.9 * RAW[0, 0])  # one row scaled otherwise: some other mistake
    assert probes.fit_factor(weights, RAW) is None
    assert probes.fit_factor(np.full_like(RAW, np.nan), RAW) is None


def test_one_head_width_is_not_enough_to_name_a_scaling():
    at_4 = probes.Answer("no-scaling", "c = 1")
    assert probes.both_widths(at_4, probes.Answer("no-scaling", "c = 1"), 9).bug == "no-scaling"
    assert probes.both_widths(at_4, None, 9) is None  # a stray factor 2 is c = 1 only at width 4


@pytest.mark.parametrize(
    ("row", "bug"),
    [
        ([np.nan] * 3, "blocked-row-nan"),
        ([1 / 3] * 3, "blocked-row-uniform"),
        (list(softmax(np.array([0.5, 2.0, -1.0]))), "additive-mask-leaks"),
        ([0.0] * 3, None),
        ([0.2, 0.3, 0.1], None),
    ],
)
def test_an_empty_row_is_read_as_the_bug_that_gives_it(row, bug):
    answer = probes.blocked_row_answer(np.array(row), softmax(np.array([0.5, 2.0, -1.0])), "the row")
    assert (answer.bug if answer else None) == bug


def test_the_zeros_of_masked_weights_tell_ignored_inverted_and_weak_masks_apart():
    from attn_kit.checks.probes_mha_screen import MASK, mask_answer

    scores = np.random.default_rng(5).normal(size=(1, 2, 4, 4))
    allowed = np.broadcast_to(MASK, scores.shape)
    plain = softmax(scores)

    def under(blocked_score) -> np.ndarray:
        return softmax(np.where(allowed, scores, blocked_score))

    assert mask_answer(under(-np.inf), plain, allowed, "m") is None
    assert mask_answer(plain, plain, allowed, "m").bug == "mask-ignored"
    assert mask_answer(softmax(np.where(~allowed, scores, -np.inf)), plain, allowed, "m").bug == "mask-inverted"
    assert mask_answer(under(-1e-12), plain, allowed, "m").bug == "fill-value-too-weak"
    assert mask_answer(under(-3.0 + 0.1 * scores), plain, allowed, "m") is None  # blocked keys keep their own weights


# --- meeting the composed search ------------------------------------------------------------------


def _failing(cid: str, catches: tuple[str, ...]) -> CheckResult:
    return CheckResult(cid, cid, "fail", 0, 1, catches=catches)


def _probe(bugs):
    return probes.Probe("q", tuple(bugs), lambda asker: None)


def test_a_probe_names_a_bug_only_for_the_failing_checks_that_catch_it():
    finding = diagnose.Finding()
    results = [_failing("scaled", ("no-scaling",)), _failing("masks", ("mask-inverted",))]
    added = probes.meet(finding, [(_probe(["no-scaling"]), probes.Answer("no-scaling", "c = 1"))], results)
    assert [(d.bug, d.checks, d.evidence) for d in added] == [("no-scaling", ("scaled",), "a probe: c = 1")]
    assert finding.check_bug == {"scaled": "no-scaling"}
    nobody = probes.meet(diagnose.Finding(), [(_probe(["biases-ignored"]), probes.Answer("biases-ignored", "b"))], results)
    assert nobody == []  # no failing check shows biases-ignored


def test_the_search_s_name_stands_against_a_probe_of_the_same_question():
    finding = diagnose.Finding(diagnoses=[Diagnosis("double-scaling", "t", "the search", checks=("scaled",))])
    results = [_failing("scaled", ("no-scaling", "double-scaling"))]
    answer = probes.Answer("no-scaling", "c = 1")
    assert probes.meet(finding, [(_probe(["no-scaling", "double-scaling"]), answer)], results) == []
    assert [d.bug for d in finding.diagnoses] == ["double-scaling"]


def test_a_probe_overrules_a_name_the_per_check_fallback_gave_to_its_question():
    """The fallback reproduced one check alone (causal-with-offset's first case fits a bound that
    skips the mask when Q < K as well as one that ignores causal): the causal bound read off the
    weights says which."""
    finding = diagnose.Finding(diagnoses=[Diagnosis("causal-alignment-wrong", "t", "fallback", checks=("causal",))])
    finding.fallback.add("causal-alignment-wrong")
    finding.check_bug["causal"] = "causal-alignment-wrong"
    results = [_failing("causal", ("causal-alignment-wrong", "mask-ignored"))]
    answer = probes.Answer("mask-ignored", "causal=True changes nothing")
    added = probes.meet(finding, [(_probe(["causal-alignment-wrong", "mask-ignored"]), answer)], results)
    assert [d.bug for d in added] == ["mask-ignored"] and [d.bug for d in finding.diagnoses] == ["mask-ignored"]
    assert finding.check_bug == {"causal": "mask-ignored"}


def test_a_probe_that_explains_a_name_replaces_it():
    """An added constant that absorbs ordinary scores (finfo.min in float32) makes an empty row look
    uniform: the far-score probe's additive-mask-leaks replaces blocked-row-uniform."""
    finding = diagnose.Finding(diagnoses=[Diagnosis("blocked-row-uniform", "t", "the search", checks=("empty",))])
    finding.check_bug["empty"] = "blocked-row-uniform"
    results = [_failing("empty", ("blocked-row-uniform", "additive-mask-leaks"))]
    far = probes.Probe("far", ("additive-mask-leaks",), lambda asker: None, explains=("blocked-row-uniform",))
    probes.meet(finding, [(far, probes.Answer("additive-mask-leaks", "softmax of its unmasked scores"))], results)
    assert [d.bug for d in finding.diagnoses] == ["additive-mask-leaks"] and finding.check_bug == {"empty": "additive-mask-leaks"}


# --- files with three bugs, and correct files in unlike styles --------------------------------------


def _needs(exercise: str, path=None) -> None:
    if exercise == "mha-masked-bias" or (path is not None and "import torch" in Path(path).read_text(encoding="utf-8")):
        need_torch()


def _probed_cases() -> list:
    """Each file is a whole grading with probes: the quick run (`-m "not slow"`) grades the first
    file of each exercise but the torch one (as test_catalogue.py), the full suite every one."""
    first = {data["exercise"]: name for name, data in sorted(EXPECTED.items(), reverse=True) if data["exercise"] != "mha-masked-bias"}
    return [
        pytest.param(name, marks=[] if first.get(EXPECTED[name]["exercise"]) == name else [pytest.mark.slow]) for name in sorted(EXPECTED)
    ]


def _graded(name: str):
    """A probed file's report on seed 1, graded once per test process for every test that reads it
    (helpers.graded): the tests of the evidence's words read the gradings this module makes anyway."""
    return graded(PROBED / name, 1, EXPECTED[name]["exercise"], timeout=TIMEOUT)


@pytest.mark.parametrize("name", _probed_cases())
def test_every_bug_of_a_probed_file_is_named_and_nothing_else(name):
    data = EXPECTED[name]
    _needs(data["exercise"], PROBED / name)
    report = _graded(name)
    named = sorted(d.bug for d in report.diagnosis)
    assert named == sorted(data["bugs"]), f"{name}: named {named}"
    assert report.passed == (not data["bugs"])


def test_a_probe_s_evidence_is_in_words_in_the_report():
    report = _graded("class_after_ignored_nan.py")
    evidence = {d.bug: d.to_json()["evidence"] for d in report.diagnosis}
    assert "with the mask and without it your weights are the same" in evidence["mask-ignored"]
    assert "sums to 0.5 = 1/sqrt(4)" in evidence["scale-after-softmax"]


def test_the_new_probes_evidence_is_in_words_in_the_report():
    def evidence(name: str) -> dict[str, str]:
        return {d.bug: d.to_json()["evidence"] for d in _graded(name).diagnosis}

    need_torch()
    said = evidence("module_biasscaled_inverted_noproj.py")["bias-scaled"]
    assert "softmax(c · bias) with c = 0.5 = 1/sqrt(4): the bias was divided by sqrt(D) together with q·k" in said
    said = evidence("module_nobias_mptcausal_width.py")
    assert "Q = 4, K = 4 and causal_offset 1, query i of your attention sees the keys j with j <= i," in said["causal-offset-ignored"]
    assert (
        "Q = 2, K = 5 and causal_offset 0, query i of your attention sees the keys j with j <= i + (K - Q)"
        in said["causal-alignment-wrong"]
    )
    said = evidence("gqa_keypad_uniform_noscale_bv.py")["blocked-row-uniform"]
    assert "a query whose key mask allows no key came back uniform" in said
    said = evidence("tiled_keymask_uniform_noscale.py")["blocked-row-uniform"]
    assert "came back as the plain mean of the values" in said


SOLUTIONS = CORPUS.parent.parent / "solutions"
CORRECT = [
    ("mha-screen", PROBED / "class_correct.py"),
    ("mha-screen", PROBED / "class_correct_float32.py"),
    ("mha-screen", SOLUTIONS / "mha-screen" / "reference_lists.py"),
    ("mha-masked-bias", PROBED / "module_correct.py"),
    ("mha-masked-bias", SOLUTIONS / "mha-masked-bias" / "reference_numpy.py"),
    ("cross-attention", SOLUTIONS / "cross-attention" / "reference_lists.py"),
    ("gqa", SOLUTIONS / "gqa" / "reference_numpy.py"),
    ("rope", SOLUTIONS / "rope" / "reference_lists.py"),
    ("rope", SOLUTIONS / "rope" / "reference_numpy.py"),
    ("rope", PROBED / "rope_correct_torch_f32.py"),
    ("kv-cache", SOLUTIONS / "kv-cache" / "reference_numpy.py"),
    ("kv-cache", PROBED / "kv_correct_torch_sdpa.py"),
    ("tiled-softmax", SOLUTIONS / "tiled-softmax" / "reference_numpy.py"),
    ("tiled-softmax", PROBED / "tiled_correct_two_pass.py"),
    ("sliding-window", SOLUTIONS / "sliding-window" / "reference_numpy.py"),
    ("sliding-window", PROBED / "sliding_correct_loops.py"),
    ("attention-backward", SOLUTIONS / "attention-backward" / "reference_numpy.py"),
    ("attention-backward", PROBED / "backward_correct_autograd_style.py"),
    ("attention-backward", CORPUS / "real" / "lucidrains_flash_attention_backward.py"),  # right, float32, needs dv = d
]


def _ask(exercise: str, path) -> tuple[list, int]:
    """Every probe of the exercise asked of the file directly, in a real sandbox: ([(probe id, bug)], calls)."""
    import importlib

    _needs(exercise, path)
    source = preflight.read_source(path)
    module = importlib.import_module(f"attn_kit.checks.probes_{exercise.replace('-', '_')}")
    torch = "import torch" in Path(path).read_text(encoding="utf-8")
    with Sandbox(str(path), TIMEOUT, None, preload=("torch",) if torch else ()) as sandbox:
        sandbox.start()
        asker = probes.Asker(lambda fn, a, k: sandbox.call(fn, a, k, echo=False), None, source, deadline=float("inf"))
        answers = probes.ask_all(module.PROBES, asker)
    return [(p.id, a.bug) for p, a in answers], asker.calls


@pytest.mark.parametrize(("exercise", "path"), CORRECT, ids=[p.name for _, p in CORRECT])
def test_every_probe_stays_silent_on_a_correct_file(exercise, path):
    answers, calls = _ask(exercise, path)
    assert calls >= 2  # the probes did ask (sliding-window's one probe makes two calls)
    assert answers == []


SHARED_LAYER = [
    ("cross-attention", "blocked-row-uniform"),
    ("cross-attention", "biases-ignored"),
    ("gqa", "no-scaling"),
    ("gqa", "mask-inverted"),
]


@pytest.mark.parametrize(("exercise", "bug"), SHARED_LAYER)
def test_the_layer_probes_serve_every_exercise_with_the_same_layer(exercise, bug):
    path = SOLUTIONS / exercise / "bugs" / f"{bug}.py"
    answers, _ = _ask(exercise, path)
    assert {b for _, b in answers} == {bug}


# each detector asked directly of the kit's own one-bug file (its textbook form): it answers with
# that bug and no probe answers anything else
DETECTORS = [
    ("mha-screen", "heads-interleaved", "head-split"),
    ("mha-screen", "reshape-without-transpose", "head-split"),
    ("rope", "rope-pairs-interleaved", "rotation"),
    ("rope", "rope-sign-flipped", "rotation"),
    ("rope", "rope-frequency-exponent", "rotation"),
    ("rope", "biases-ignored", "biases"),
    ("rope", "no-scaling", "scale"),
    ("kv-cache", "biases-ignored", "biases"),
    ("kv-cache", "no-output-projection", "biases"),
    ("tiled-softmax", "blocked-row-uniform", "empty-row"),
    ("tiled-softmax", "blocked-row-nan", "empty-row"),
    ("tiled-softmax", "additive-mask-leaks", "empty-row"),
    ("tiled-softmax", "no-scaling", "scale"),
    ("tiled-softmax", "scale-after-softmax", "scale"),
    ("tiled-softmax", "online-rescale-sign-flipped", "online"),
    ("tiled-softmax", "online-softmax-no-rescale", "online"),
    ("tiled-softmax", "online-softmax-acc-not-rescaled", "online"),
    ("mha-masked-bias", "bias-scaled", "additive-bias"),
    ("mha-masked-bias", "bias-scaled@not-added", "additive-bias"),
    ("mha-masked-bias", "causal-offset-ignored", "causal-offset"),
    ("mha-masked-bias", "causal-alignment-wrong", "causal-alignment"),
    ("gqa", "blocked-row-uniform", "layer-empty-key-row"),
    ("sliding-window", "window-off-by-one", "band"),
    ("sliding-window", "window-off-by-one@narrow", "band"),
    ("sliding-window", "window-excludes-self", "band"),
    ("sliding-window", "window-excludes-self@zero-rows", "band"),
    ("sliding-window", "window-not-causal", "band"),
    ("attention-backward", "dv-not-transposed", "dv-transpose"),
    ("attention-backward", "mask-inverted", "mask"),
    ("attention-backward", "mask-ignored", "mask"),
    ("attention-backward", "softmax-jacobian-diagonal", "jacobian"),
    ("attention-backward", "backward-rowsum-wrong", "jacobian"),
    ("attention-backward", "dk-from-wrong-operand", "dk-operand"),
    ("attention-backward", "backward-missing-scale", "backward-scale"),
]


@pytest.mark.parametrize(("exercise", "bug", "probe"), DETECTORS, ids=[f"{e}-{b}" for e, b, _ in DETECTORS])
def test_each_detector_names_its_bug_on_the_kit_s_own_bug_file(exercise, bug, probe):
    answers, _ = _ask(exercise, SOLUTIONS / exercise / "bugs" / f"{bug}.py")
    assert (probe, bug.split("@")[0]) in answers
    assert {b for _, b in answers} == {bug.split("@")[0]}


def test_a_square_only_layer_fails_the_shapes_says_which_widths_it_supports_and_is_still_diagnosed():
    need_torch()
    report = _graded("module_square_noscale_bv.py")
    shapes = next(r for r in report.results if r.id == "output-shapes")
    assert shapes.status == "fail" and shapes.points == 0
    assert "your code runs only when Dv = D and Cq = Cctx = Cout = H·D" in shapes.message
    assert sorted(d.bug for d in report.diagnosis) == ["biases-ignored", "no-scaling"]


def test_a_bug_whose_only_evidence_is_its_own_crash_is_not_named():
    from types import SimpleNamespace

    crash = SimpleNamespace(key="shapes", any_wrong=True, wrong=np.ones(1, bool), raised="RuntimeError")
    rows = SimpleNamespace(key="values", any_wrong=True, wrong=np.array([True, False]), raised="")

    def single(same_message: bool, on_rows: bool):
        fits = {
            "shapes": diagnose._Fit(np.ones(1, bool), np.ones(1, bool), same_message=same_message),
            "values": diagnose._Fit(np.array([on_rows, True]), np.array([on_rows, False])),
        }
        return SimpleNamespace(fits=fits)

    finding = diagnose.Finding()
    by_bug = {"a": single(False, False), "b": single(True, False), "c": single(False, True)}
    assert diagnose._crash_only_bugs({"a", "b", "c"}, by_bug, [crash, rows], finding) == {"a"}
    assert finding.near_misses and finding.near_misses[0].startswith("a was not named")


@pytest.mark.parametrize(
    ("status", "error", "stopped"),
    [
        (
            "raised",
            (
                "RuntimeError",
                "[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory: you tried to allocate 67108864 bytes",
            ),
            True,
        ),
        ("raised", ("_ArrayMemoryError", "Unable to allocate 64.0 MiB for an array with shape (2, 2048, 2048)"), True),
        ("raised", ("MemoryError", ""), True),
        ("raised", ("RuntimeError", "The size of tensor a (4) must match the size of tensor b (5)"), False),
        ("ok", None, False),
    ],
)
def test_an_allocation_refused_under_the_memory_limit_counts_as_the_limit_stopping_the_call(status, error, stopped):
    """torch and NumPy raise when the kit's limit refuses an allocation (the process is not ended):
    the memory check reads that as over the bound, so materialises-scores can be named."""
    from attn_kit.base.records import ErrorInfo, Outcome
    from attn_kit.checks import verdicts

    outcome = Outcome(status, error=ErrorInfo(*error) if error else None)
    assert verdicts._out_of_memory(outcome) is stopped


OFF = sorted(
    (data["exercise"], CORPUS / "offcatalogue" / name)
    for name, data in tomllib.loads((CORPUS / "offcatalogue" / "expected.toml").read_text()).items()
    if data["exercise"]
    in ("mha-screen", "mha-masked-bias", "cross-attention", "gqa", "rope", "kv-cache", "tiled-softmax", "sliding-window")
)


@pytest.mark.parametrize(("exercise", "path"), OFF, ids=[p.name for _, p in OFF])
def test_no_probe_answers_on_a_mistake_outside_the_catalogue(exercise, path):
    """tests/corpus/offcatalogue: e.g. a bias that multiplies the scores is as invisible as a bias
    never added when q·k = 0; the bias probe must see that it is not the catalogue's mistake."""
    answers, _ = _ask(exercise, path)
    assert answers == []
