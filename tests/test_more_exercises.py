"""The four exercises of issue 14 as a set: complete teaching material (hints climbing from a
question to near-code, at least five discussion questions with required key points, a scored
rubric over the six dimensions), their place in the order, the follow-up links that lead to them,
and `attn-kit list` showing every exercise. The rules every exercise meets are devcheck's
(`attn-kit dev check`); these four set a higher bar."""

from __future__ import annotations

import pytest

from attn_kit.dev import check
from attn_kit.load import catalog

from conftest import attn_kit

NEW = {"rope": 7, "sliding-window": 8, "attention-backward": 9, "paged-attention": 10}
LINKS = {"kv-cache": "paged-attention", "mha-screen": "rope", "tiled-softmax": "sliding-window", "mha-masked-bias": "attention-backward"}


@pytest.mark.parametrize("exercise_id", NEW)
def test_teaching_material_is_complete(exercise_id):
    ex = catalog.exercise(exercise_id)
    assert ex.order == NEW[exercise_id]
    assert len(ex.hints) >= 4
    first = ex.hints[0].text
    assert "?" in first and "np." not in first and "(" not in first, "level 1 nudges with a question, no code"
    assert ex.hints[0].step == "question" and "code" in [h.step for h in ex.hints[2:]], "a late hint is near-code"
    assert [h.step for h in ex.hints].index("code") > [h.step for h in ex.hints].index("concept"), "the idea comes before the code"
    assert len(ex.questions) >= 5
    assert all(len(q.key_points) >= 3 for q in ex.questions)
    assert [m for q in ex.questions for m in check.question_rule_problems(q)] == []
    assert check.scoring_problems(ex) == [] and check.screen_problems(ex) == []  # [[scoring]] only
    assert "## Worked example" in ex.statement and "## How you are graded" in ex.statement


@pytest.mark.parametrize("source, target", LINKS.items())
def test_follow_up_links_lead_to_the_new_exercises(source, target):
    assert target in [f.exercise for f in catalog.exercise(source).followups]


def test_list_shows_every_exercise():
    proc = attn_kit("list")
    assert proc.returncode == 0
    assert set(NEW) <= set(catalog.exercises())
    for exercise_id in catalog.exercises():
        assert exercise_id in proc.stdout


INDEPENDENT = {
    "indep_window_symmetric.py": ("sliding-window", "window-not-causal"),
    "indep_window_plus_one.py": ("sliding-window", "window-off-by-one"),
    "indep_window_no_self_zero_rows.py": ("sliding-window", "window-excludes-self"),
    "indep_paged_whole_blocks.py": ("paged-attention", "reads-past-context"),
    "indep_rope_interleaved_lists.py": ("rope", "rope-pairs-interleaved"),
    "indep_backward_diag_einsum.py": ("attention-backward", "softmax-jacobian-diagonal"),
}


@pytest.mark.parametrize("name", INDEPENDENT)
def test_independently_written_mistakes_are_named_first(name):
    """Files written without the kit's code, each with one classic mistake, are detected by their
    functions and diagnosed as that mistake first."""
    from attn_kit.grading import pipeline

    from conftest import CORPUS

    exercise_id, bug = INDEPENDENT[name]
    report = pipeline.grade(CORPUS / "more" / name, pipeline.Options(seed=2))
    assert report.exercise == exercise_id and not report.passed
    assert [d.bug for d in report.diagnosis][:1] == [bug]
