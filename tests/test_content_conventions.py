"""Content that teaches right in every exercise (issue 37).

A shared bug text (prompts/bugs.toml) is shown in every exercise that has the bug, so it must hold
under each exercise's conventions, or the exercise words it itself ([[bug_texts]]); each figure the
review found stale or imprecise is recomputed here; a diagnosed bug points at the hint about the
check that caught it; the four flat ladders climb question -> concept -> code per topic.
"""

from __future__ import annotations

import dataclasses
import math
import re
import textwrap

import numpy as np
import pytest
from test_content_claims import code_of
from test_content_render import shown_hint

from attn_kit.base.errors import CatalogError, DependencyMissing
from attn_kit.base.paths import package_dir, solutions_dir
from attn_kit.dev import check as devcheck
from attn_kit.diagnosis.diagnose import load_module
from attn_kit.grading import pipeline
from attn_kit.load import catalog

from conftest import need_torch

EXERCISES = list(catalog.exercises().values())
FLAT_BEFORE = ("rope", "sliding-window", "attention-backward", "paged-attention")


def question(exercise_id: str, question_id: str) -> catalog.Question:
    return next(q for q in catalog.exercise(exercise_id).questions if q.id == question_id)


def said(exercise_id: str, question_id: str) -> str:
    q = question(exercise_id, question_id)
    return " ".join(" ".join((q.prompt, q.answer, *q.key_points)).split())


def conventions(exercise: catalog.Exercise) -> str:
    """What the candidate is told: the statement, the starter and the signatures."""
    return " ".join((exercise.statement, exercise.starter, *(f.signature for f in exercise.functions)))


# --- bug texts in each exercise's own terms ---------------------------------------------------------

# Names that belong to some exercises only: a bug text that uses one must be shown only where the
# candidate was given it (mha-masked-bias has w_o, b_o and a per-head D; tiled-softmax has no bo).
NAMES = {
    "hd": r"\bhd\b",
    "bo": r"\bbo\b",
    "Wo": r"\bWo\b",
    "Wq": r"\bWq\b",
    "Wv": r"\bWv\b",
    "bq": r"\bbq\b",
    "b_o": r"\bb_o\b",
    "w_o": r"\bw_o\b",
    "num_heads": r"\bnum_heads\b",
    "stable_softmax": r"\bstable_softmax\(",
    "causal_mask": r"\bcausal_mask\(",
    "padding_mask": r"\bpadding_mask\(",
}


def foreign_names(exercise: catalog.Exercise) -> list[tuple[str, str, str]]:
    given = conventions(exercise)
    found = []
    for bug_id in exercise.bug_ids:
        bug = exercise.bug(bug_id)
        assert bug is not None
        for field in ("symptom", "fix", "test_idea"):
            text = getattr(bug, field)
            found += [
                (bug_id, field, name) for name, pattern in NAMES.items() if re.search(pattern, text) and not re.search(pattern, given)
            ]
    return found


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_bug_texts_use_only_names_the_exercise_gives(exercise):
    assert foreign_names(exercise) == []


def test_the_names_rule_can_fail():
    """Without its [[bug_texts]], mha-masked-bias shows the shared texts: num_heads, hd and bo it does not have."""
    bare = dataclasses.replace(catalog.exercise("mha-masked-bias"), bug_texts=())
    names = {(bug, name) for bug, _, name in foreign_names(bare)}
    assert {("scale-by-model-width", "num_heads"), ("blocked-row-uniform", "bo"), ("no-output-projection", "Wo")} <= names


def test_mha_masked_bias_scales_by_its_own_per_head_width():
    """D is already one head's width there: the fix and the test idea say 1/sqrt(D), and the
    reference computes exactly that."""
    exercise = catalog.exercise("mha-masked-bias")
    bug = exercise.bug("scale-by-model-width")
    assert bug is not None and "sqrt(D)" in bug.fix and "sqrt(D)" in bug.test_idea
    assert not re.search(r"num_heads|D / 2|D // num_heads|sqrt\(D/", bug.fix + bug.test_idea)
    shared = catalog.bugs()["scale-by-model-width"]
    assert "num_heads" in shared.fix  # the shared wording, right where D is the model width
    anchor = exercise.scoring[0].anchors[1]
    assert "1/sqrt(D)" in anchor and "sqrt(D/H)" not in anchor
    torch = need_torch()
    module = load_module(str(solutions_dir("mha-masked-bias") / "reference_torch.py"))
    gen = torch.Generator().manual_seed(0)
    heads, D, Cq = 2, 3, 4
    x = torch.randn(1, 2, Cq, generator=gen, dtype=torch.float64)
    w = {n: torch.randn(Cq, heads * D, generator=gen, dtype=torch.float64) for n in ("w_q", "w_k", "w_v")}
    w["w_o"] = torch.eye(heads * D, dtype=torch.float64)
    _, attention = module.multihead_attention({"query": x, "context": x}, w, {}, heads=heads)
    q = (x @ w["w_q"]).reshape(1, 2, heads, D).transpose(1, 2)
    k = (x @ w["w_k"]).reshape(1, 2, heads, D).transpose(1, 2)
    expected = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D), dim=-1)
    assert torch.allclose(attention, expected)


def empty_row_output(exercise_id: str) -> np.ndarray:
    """What the numpy reference outputs for a query with no allowed key (tiled-softmax)."""
    module = load_module(str(solutions_dir(exercise_id) / "reference_numpy.py"))
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(2, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    mask = np.ones((2, 3), bool)
    mask[0] = False
    return np.asarray(module.tiled_attention(q, k, v, mask=mask, block_size=2))[0]


def test_blocked_row_test_idea_states_each_exercises_empty_row():
    """The shared idea says "its output is bo" (mha-screen's convention); where a fully blocked row
    outputs 0, a test written from it would fail on correct code."""
    assert np.array_equal(empty_row_output("tiled-softmax"), np.zeros(2))
    zero_rows = {"tiled-softmax", "attention-backward", "mha-masked-bias", "flash-backward"}
    for exercise in EXERCISES:
        if "blocked-row-uniform" not in exercise.bug_ids:
            continue
        idea = exercise.bug("blocked-row-uniform").test_idea  # type: ignore[union-attr]
        if exercise.id in zero_rows:
            assert re.search(r"exactly (0|zeros)", idea) and not re.search(r"\bis bo\b", idea), exercise.id
        else:
            assert "output is bo" in idea and "bo" in conventions(exercise), exercise.id


def test_max_over_blocked_idea_calls_only_functions_the_exercise_has():
    for exercise in EXERCISES:
        if "max-over-blocked" in exercise.bug_ids:
            idea = exercise.bug("max-over-blocked").test_idea  # type: ignore[union-attr]
            calls = set(re.findall(r"\b([a-z_]+)\(", idea))
            assert calls <= set(exercise.function_names) | {"softmax"}, (exercise.id, calls)
            if "0.269" in idea or "0.731" in idea or idea == catalog.bugs()["max-over-blocked"].test_idea:
                assert "0.269" in idea and "0.731" in idea, exercise.id  # the worked figures, both, as recomputed
    weights = np.exp(np.array([-1000.0, -999.0]) - -999.0)
    weights /= weights.sum()
    assert f"{weights[0]:.3f}, 0, {weights[1]:.3f}" == "0.269, 0, 0.731"


def test_diagnosis_shows_the_exercises_own_fix():
    """The check's output carries the exercise's wording (grading applies [[bug_texts]])."""
    need_torch()
    path = solutions_dir("mha-masked-bias") / "bugs" / "scale-by-model-width.py"
    report = pipeline.grade(path, pipeline.Options(seed=3))
    named = {d.bug: d for d in report.diagnosis}
    assert "scale-by-model-width" in named
    own = catalog.exercise("mha-masked-bias").bug("scale-by-model-width")
    assert own is not None and named["scale-by-model-width"].fix == own.fix
    assert named["scale-by-model-width"].explanation == own.symptom


def test_bug_texts_go_through_the_loader_with_unknown_keys_rejected(tmp_path):
    source = (package_dir("prompts") / "exercises" / "tiled-softmax.toml").read_text(encoding="utf-8")
    path = tmp_path / "tiled-softmax.toml"
    path.write_text(source + '\n[[bug_texts]]\nbug = "no-scaling"\nfixx = "typo"\n', encoding="utf-8")
    with pytest.raises(CatalogError, match="unknown key 'fixx'"):
        catalog.load_exercise(path)
    path.write_text(source + '\n[[bug_texts]]\nbug = "no-scaling"\nfix = "Scale by sqrt(d)."\n', encoding="utf-8")
    loaded = catalog.load_exercise(path)
    assert loaded.bug("no-scaling").fix == "Scale by sqrt(d)."  # type: ignore[union-attr]
    assert loaded.bug("no-scaling").test_idea == catalog.bugs()["no-scaling"].test_idea  # type: ignore[union-attr]


def test_dev_check_rejects_bug_texts_for_a_bug_the_exercise_lacks():
    content = devcheck.Content.installed()
    exercise = content.exercises["tiled-softmax"]
    content.exercises = {
        **content.exercises,
        "tiled-softmax": dataclasses.replace(
            exercise, bug_texts=(catalog.BugText("heads-interleaved", fix="x"), catalog.BugText("no-scaling"))
        ),
    }
    problems = [str(p) for p in devcheck.run(content, [devcheck.bug_texts_reword_bugs_of_the_exercise]).problems]
    assert any("'heads-interleaved' is not a catalogue bug with a file" in p for p in problems)
    assert any("'no-scaling' sets no text" in p for p in problems)
    assert not devcheck.run(devcheck.Content.installed(), [devcheck.bug_texts_reword_bugs_of_the_exercise]).problems


# --- figures: precise and current ---------------------------------------------------------------------


def test_bf16_has_seven_stored_mantissa_bits():
    """By the same convention as the E4M3 figure next to it (stored bits: E4M3 has 3)."""
    sign, exponent = 1, 8
    stored = 16 - sign - exponent
    assert stored == 7 and 2.0 ** -(stored + 1) == 2**-8
    assert float(np.finfo(np.float16).eps) == 2**-10  # the same rule on a dtype NumPy has: 10 stored bits
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        assert torch.finfo(torch.bfloat16).eps == 2**-stored
    text = said("mha-masked-bias", "low-precision-attention")
    assert "only 7 stored mantissa bits (8 with the implicit leading 1, relative rounding 2⁻⁸)" in text
    assert "8 bits of mantissa" not in text
    assert "E4M3 reaches 448 with 3 mantissa bits" in said("mha-masked-bias", "fp8-attention")


def test_fp8_kv_halves_only_the_cache_share_of_a_step():
    weights_share = cache_share = 0.5  # a step that reads as many cache bytes as weight bytes
    after = weights_share + cache_share / 2
    assert after == 0.75  # the step takes a quarter less, not half
    text = said("kv-cache", "fp8-kv-cache")
    assert "the cache's share of the read time per step halves (the weights' share does not move)" in text
    assert "by a quarter when the cache was half the bytes read" in text
    assert "half the bytes is about half the read time" not in text


def test_paged_block_size_is_a_measured_trade_off():
    text = said("paged-attention", "paged-block-size")
    assert "warp's worth" not in text and "no size is a rule" in text
    assert "vLLM defaults to 16 tokens" in text


def test_sliding_window_cites_the_current_models():
    statement = catalog.exercise("sliding-window").statement
    assert "Mistral" not in statement
    for model in ("Gemma 2 alternates 4,096-token windows", "Gemma 3 puts five 1,024-token window layers", "gpt-oss alternates 128-token"):
        assert model in " ".join(statement.split()), model


def test_ridge_point_names_its_hardware():
    h100 = 1e15 / 3.35e12
    b200 = 2.25e15 / 8e12
    assert (round(h100), round(b200)) == (299, 281)
    text = said("gqa", "mla-decode-intensity")
    assert "the ridge point of an H100 SXM (about 299 FLOP per byte" in text and "sits near 281" in text
    assert "current accelerators" not in text


def test_no_content_leans_on_the_old_figures():
    everything = " ".join(
        " ".join((e.statement, *(h.text for h in e.hints), *(" ".join((q.prompt, q.answer, *q.key_points)) for q in e.questions)))
        for e in EXERCISES
    )
    for stale in ("at 2 TB/s", "fits about 59", "current accelerators", "8 bits of mantissa", "calls its interleaving iRoPE"):
        assert stale not in everything, stale


# --- failing-check pointers -----------------------------------------------------------------------------


def concept_words() -> dict[str, str]:
    """prompts/concepts.toml's [concept_words], with those an exercise's own file adds."""
    return devcheck.concept_words(devcheck.Content.installed())[0]


def topic_text(exercise: catalog.Exercise, level: int) -> str:
    title = exercise.hints[level - 1].title
    return " ".join(" ".join(h.text for h in exercise.hints if h.title == title).split())


def suites():
    for exercise in EXERCISES:
        try:
            yield exercise, pipeline.suite_for(exercise).checks
        except DependencyMissing:
            continue


def test_every_bug_points_at_a_hint_about_its_concept_and_its_check():
    """For every exercise and bug: the hint the failing checks point at speaks the bug's concept
    words, and lists a check that catches the bug whenever some hint on that concept does."""
    words = concept_words()
    problems = []
    for exercise, checks in suites():
        for bug_id in exercise.bug_ids:
            bug = catalog.bugs()[bug_id]
            level = pipeline.hint_for_bug(exercise, checks, bug_id)
            assert level is not None, (exercise.id, bug_id)
            if not re.search(words[bug.concept], topic_text(exercise, level), re.IGNORECASE):
                problems.append(f"{exercise.id}: {bug_id} -> hint {level} never says {words[bug.concept]!r}")
            catching = {c.id for c in checks if bug_id in c.catches}
            on_concept = [h for h in exercise.hints if h.concept == bug.concept]
            if any(catching & set(h.checks) for h in on_concept) and not catching & set(exercise.hints[level - 1].checks):
                problems.append(f"{exercise.id}: {bug_id} -> hint {level}, which lists none of its checks")
    assert problems == []


@pytest.mark.parametrize("exercise_id", ["rope", "attention-backward", "kv-cache", "paged-attention"])
def test_bugs_of_one_concept_reach_different_topics(exercise_id):
    """Where several topics share a concept, each bug reaches the topic about its own check, not hint 1."""
    exercise = catalog.exercise(exercise_id)
    try:
        checks = pipeline.suite_for(exercise).checks
    except DependencyMissing:
        pytest.skip("needs an optional dependency")
    concept = max(
        {h.concept for h in exercise.hints}, key=lambda c: sum(h.concept == c and h.step in ("question", "") for h in exercise.hints)
    )
    bugs = [b for b in exercise.bug_ids if catalog.bugs()[b].concept == concept]
    reached = {pipeline.hint_for_bug(exercise, checks, b) for b in bugs}
    assert len(reached) >= 2, (exercise_id, concept, reached)


def test_running_max_init_zero_reaches_a_hint_about_minus_infinity():
    exercise = catalog.exercise("tiled-softmax")
    level = pipeline.hint_for_bug(exercise, pipeline.suite_for(exercise).checks, "running-max-init-zero")
    assert level is not None and exercise.hints[level - 1].step == "question"
    topic = topic_text(exercise, level)
    assert "-inf" in topic and "running maximum" in topic


# --- ladders for the four exercises that were flat ---------------------------------------------------


@pytest.mark.parametrize("exercise_id", FLAT_BEFORE)
def test_each_topic_climbs_question_idea_code(exercise_id):
    exercise = catalog.exercise(exercise_id)
    assert devcheck.climbs_in_steps(exercise) and devcheck.hint_ladder_problems(exercise) == []
    topics: dict[str, list[str]] = {}
    for hint in exercise.hints:
        topics.setdefault(hint.title, []).append(hint.step)
    assert len(topics) >= 3 and all(steps == ["question", "concept", "code"] for steps in topics.values()), topics
    for level, hint in enumerate(exercise.hints, 1):
        if hint.step != "code":
            continue
        code = devcheck.code_lines(hint.text)
        assert code and all(len(line) <= devcheck.CODE_WIDTH["hint"] for line in code), (exercise_id, level)
        prose = re.sub(r"(?m)^( {4}.*|\s*)$\n?", "", hint.text)  # the text outside the code block
        assert not re.search(r";\s*\w+\s*=", prose), (exercise_id, level)  # no statements joined by semicolons
        shown = shown_hint(exercise, level, 80).splitlines()
        for line in code:
            assert any(out.rstrip().endswith(line.rstrip()) for out in shown), (exercise_id, level, line)


def test_rope_rotation_code_survives_markdown_and_runs():
    """The old hint 4 read "first*cos(a) - second*sin(a)" in prose: Markdown took the stars for
    emphasis and showed "firstcos(a) - secondsin(a)". The code rung is a code block, and runs."""
    exercise = catalog.exercise("rope")
    level, hint = next((n, h) for n, h in enumerate(exercise.hints, 1) if h.step == "code" and "theta" in h.text)
    assert "first * cos - second * sin" in shown_hint(exercise, level, 80)
    body = textwrap.indent(code_of(hint), "    ")
    namespace: dict = {"np": np}
    exec(f"def apply_rope(x, positions, base=10000.0):\n{body}", namespace)
    reference = load_module(str(solutions_dir("rope") / "reference_numpy.py"))
    x = np.random.default_rng(2).normal(size=(2, 3, 4, 6))
    positions = [0, 5, -3, 2]
    np.testing.assert_allclose(namespace["apply_rope"](x, positions), np.asarray(reference.apply_rope(x, positions)), atol=1e-12)


def test_sliding_window_band_rung_is_the_statements_band():
    exercise = catalog.exercise("sliding-window")
    hint = next(h for h in exercise.hints if h.step == "code" and "def band" in h.text)
    namespace: dict = {"np": np}
    exec(code_of(hint), namespace)  # its own asserts run too
    T, window = 6, 3
    expected = [[i - window < j <= i for j in range(T)] for i in range(T)]
    assert namespace["band"](T, window).tolist() == expected


def test_backward_jacobian_rung_matches_finite_differences():
    exercise = catalog.exercise("attention-backward")
    hint = next(h for h in exercise.hints if h.step == "code" and "dZ = P *" in h.text)
    line = next(line for line in code_of(hint).splitlines() if line.startswith("dZ = "))
    rng = np.random.default_rng(4)
    z, dP = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))

    def softmax(a):
        e = np.exp(a - a.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    namespace = {"P": softmax(z), "dP": dP}
    exec(line, namespace)
    eps, numeric = 1e-6, np.zeros_like(z)
    for index in np.ndindex(z.shape):
        step = np.zeros_like(z)
        step[index] = eps
        numeric[index] = ((softmax(z + step) - softmax(z - step)) * dP).sum() / (2 * eps)
    np.testing.assert_allclose(namespace["dZ"], numeric, atol=1e-8)


def test_cross_attention_mask_idea_needs_no_causal_mask():
    """Cross-attention has no causal mask (its context is not in the future): its mask-inverted
    idea blocks a context position instead of relying on one."""
    assert "causal" not in " ".join(catalog.exercise("cross-attention").function_names)
    idea = catalog.exercise("cross-attention").bug("mask-inverted").test_idea  # type: ignore[union-attr]
    assert "Under a causal mask" not in idea and "context position" in idea
    assert "Under a causal mask" in catalog.bugs()["mask-inverted"].test_idea


def test_sliding_window_memory_texts_state_its_own_bound():
    """The shared materialises-scores texts speak of tiled-softmax's key blocks and its bound;
    sliding-window chunks queries and has its own bound, recomputed here from its statement."""
    bug = catalog.exercise("sliding-window").bug("materialises-scores")
    assert bug is not None and "block_size" not in bug.fix + bug.test_idea
    B, H, T, window, d = 1, 2, 2048, 32, 16
    assert 64 * B * H * T * (window + d) == 12 * 2**20 and 8 * B * H * T * T == 64 * 2**20
    assert "64·B·H·T·(window + d) bytes, 12 MiB" in bug.test_idea and "64 MiB" in bug.test_idea
    assert "64·B·H·T·(window + d) bytes" in catalog.exercise("sliding-window").statement
    assert "block_size" in catalog.bugs()["materialises-scores"].fix  # tiled-softmax's wording, shared


def test_kv_cache_head_split_idea_speaks_of_cached_tokens():
    idea = catalog.exercise("kv-cache").bug("reshape-without-transpose").test_idea  # type: ignore[union-attr]
    assert "After two or more steps" in idea and "With T ≥ 2" not in idea


def test_sliding_window_code_rungs_assembled_match_banded_attention():
    """The chunk loop with the stability rung's softmax in place of its `...`, as written."""
    exercise = catalog.exercise("sliding-window")
    rungs = {h.title: code_of(h) for h in exercise.hints if h.step == "code"}
    softmax = rungs["Scale, stability and hygiene"].split("...\n", 1)[1]
    loop = re.sub(
        r"^(\s*)\.\.\..*$", lambda m: textwrap.indent(softmax.rstrip("\n"), m.group(1)), rungs["Only the band needs scoring"], flags=re.M
    )
    source = "def sliding(q, k, v, window):\n    T, d = q.shape[-2], q.shape[-1]\n    out = np.zeros_like(v)\n"
    namespace: dict = {"np": np}
    exec(source + textwrap.indent(loop, "    ") + "    return out\n", namespace)
    rng = np.random.default_rng(6)
    q, k, v = (rng.normal(size=(2, 2, 11, 3)) for _ in range(3))
    i, j = np.arange(11)[:, None], np.arange(11)[None, :]
    for window in (1, 2, 3, 5, 20):
        scores = np.where((j <= i) & (j > i - window), q @ k.swapaxes(-1, -2) / np.sqrt(3), -np.inf)
        e = np.exp(scores - scores.max(-1, keepdims=True))
        np.testing.assert_allclose(namespace["sliding"](q, k, v, window), e / e.sum(-1, keepdims=True) @ v, atol=1e-12)


def test_paged_attention_code_rungs_assembled_match_dense_attention():
    """The loop of the last rung, its `...` filled with the first two rungs (the second's `...`
    with the last rung's softmax), as written, against attention over each sequence's gathered keys."""
    exercise = catalog.exercise("paged-attention")
    rungs = [code_of(h) for h in exercise.hints if h.step == "code"]
    frame, softmax = rungs[2].split("    ...\n", 1)
    body = rungs[0] + re.sub(r"^\.\.\..*$", lambda _: textwrap.dedent(softmax).rstrip("\n"), rungs[1], flags=re.M)
    source = "def paged(q, k_pool, v_pool, block_tables, context_lens):\n    d = k_pool.shape[-1]\n"
    source += textwrap.indent(frame + textwrap.indent(body, "    "), "    ") + "    return out\n"
    namespace: dict = {"np": np}
    exec(source, namespace)
    rng = np.random.default_rng(7)
    pool_k, pool_v = rng.normal(size=(6, 2, 2, 3)), rng.normal(size=(6, 2, 2, 3))
    q = rng.normal(size=(3, 2, 3))
    tables, lengths = [[4, 1, 5], [2], [0, 3]], [5, 0, 3]
    got = namespace["paged"](q, pool_k, pool_v, tables, lengths)
    for b, (table, n) in enumerate(zip(tables, lengths)):
        if n == 0:
            assert np.array_equal(got[b], np.zeros((2, 3)))
            continue
        keys = np.concatenate([pool_k[i] for i in table])[:n]
        values = np.concatenate([pool_v[i] for i in table])[:n]
        s = np.einsum("hd,nhd->hn", q[b], keys) / np.sqrt(3)
        w = np.exp(s - s.max(-1, keepdims=True))
        np.testing.assert_allclose(got[b], np.einsum("hn,nhd->hd", w / w.sum(-1, keepdims=True), values), atol=1e-12)


def test_attention_backward_code_rungs_assembled_match_finite_differences():
    """masked_softmax as the last rung writes it, the first rung's forward, the matmul rung with
    the Jacobian line in place of its `...`: gradients that match finite differences, a fully
    blocked query included."""
    exercise = catalog.exercise("attention-backward")
    rungs = [code_of(h) for h in exercise.hints if h.step == "code"]
    forward = rungs[0].split("...\n", 1)[0]
    jacobian = next(line for line in rungs[2].splitlines() if line.startswith("dZ = "))
    backward = re.sub(r"^\.\.\..*$", jacobian, rungs[1], flags=re.M)
    source = rungs[3].split("\n\nStill stuck", 1)[0] + "\n\ndef attention_backward(q, k, v, dout, mask=None):\n"
    source += textwrap.indent(forward + backward, "    ") + "    return dq, dk, dv\n"
    namespace: dict = {"np": np}
    exec(source, namespace)
    rng = np.random.default_rng(8)
    q, k, v, dout = (
        rng.normal(size=(1, 2, 3, 4)),
        rng.normal(size=(1, 2, 5, 4)),
        rng.normal(size=(1, 2, 5, 2)),
        rng.normal(size=(1, 2, 3, 2)),
    )
    mask = rng.random((1, 3, 5)) < 0.7
    mask[0, 1] = False  # a fully blocked query
    mask[0, 0, 0] = True

    def loss(q_, k_, v_):
        P = namespace["masked_softmax"](q_ @ k_.swapaxes(-1, -2) / 2.0, mask)
        return float(((P @ v_) * dout).sum())

    grads = namespace["attention_backward"](q, k, v, dout, mask)
    eps = 1e-6
    for which, array in enumerate((q, k, v)):
        numeric = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            step = np.zeros_like(array)
            step[index] = eps
            args = [q, k, v]
            plus, minus = list(args), list(args)
            plus[which], minus[which] = array + step, array - step
            numeric[index] = (loss(*plus) - loss(*minus)) / (2 * eps)
        np.testing.assert_allclose(grads[which], numeric, atol=1e-6)
    assert np.array_equal(grads[0][0, :, 1], np.zeros((2, 4)))  # the blocked query passes no gradient


ROPE_FRAME = """
def rope_attention(x, params, num_heads, positions=None, mask=None):
    x = np.asarray(x, dtype=float)
    B, T, D = x.shape

    def project(a, w, b):
        y = a @ np.asarray(params[w], dtype=float)
        return y if params.get(b) is None else y + np.asarray(params[b], dtype=float)

{heads}
{rotation}
{masks}
    out = project(merge(weights @ v), "Wo", "bo")
    return out
"""


def test_rope_code_rungs_assembled_match_the_reference():
    """apply_rope from its rung, then the attention rungs in order (heads, rotation, scores, masked
    softmax, output) in a frame that only adds the projection helper: equal to the reference."""
    exercise = catalog.exercise("rope")
    rungs = {h.title: code_of(h) for h in exercise.hints if h.step == "code"}
    heads = rungs["Heads, scale and projections"].splitlines()
    scores_at = next(i for i, line in enumerate(heads) if line.startswith("scores = "))
    source = "def apply_rope(x, positions, base=10000.0):\n" + textwrap.indent(
        rungs["Which features pair, and how fast does each pair turn?"], "    "
    )
    source += ROPE_FRAME.format(
        heads=textwrap.indent("\n".join(heads[:scores_at]), "    "),
        rotation=textwrap.indent(rungs["Where the rotation goes in attention"] + heads[scores_at], "    "),
        masks=textwrap.indent(rungs["Masks, empty rows and large scores"].split("\n\nStill stuck", 1)[0], "    "),
    )
    namespace: dict = {"np": np}
    exec(source, namespace)
    reference = load_module(str(solutions_dir("rope") / "reference_numpy.py"))
    rng = np.random.default_rng(9)
    D, heads_n, T = 8, 2, 4
    params = {w: rng.normal(size=(D, D)) for w in ("Wq", "Wk", "Wv", "Wo")} | {"bo": rng.normal(size=D)}
    x = rng.normal(size=(2, T, D))
    mask = np.tril(np.ones((2, T, T), bool))
    mask[1, 2] = False  # a query with no allowed key: its output is bo
    for positions in (None, [3, 1, -2, 7]):
        got = namespace["rope_attention"](x, params, heads_n, positions=positions, mask=mask)
        want = np.asarray(reference.rope_attention(x, params, heads_n, positions=positions, mask=mask))
        np.testing.assert_allclose(got, want, atol=1e-10)
    np.testing.assert_allclose(got[1, 2], params["bo"])
