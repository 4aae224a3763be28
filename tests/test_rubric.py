"""The mock's rubric: correctness scored by root cause (each anchor of each exercise's correctness
dimension gets a file that should score it, graded for real), the data `attn-kit dev check`
validates, and the recommendation rule as the interviewer's sheet and the report show it."""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
import sys

import pytest
from rich.console import Console

from attn_kit.base.paths import bug_files, bug_id_of, reference_files
from attn_kit.dev import check
from attn_kit.diagnosis import compose
from attn_kit.grading import pipeline, rubric
from attn_kit.load import catalog
from attn_kit.practice import mock
from attn_kit.render import practice

from conftest import need_extra

EXERCISES = list(catalog.exercises().values())
SEED = 3


def grade(path, exercise_id):
    exercise = catalog.exercise(exercise_id)
    if exercise.needs:  # torch for mha-masked-bias: a clean skip without it (CI installs it)
        need_extra(exercise)
    return pipeline.grade(path, pipeline.Options(exercise=exercise_id, seed=SEED))


def bug_file(exercise_id: str, bug_id: str):
    return next(p for p in bug_files(exercise_id) if p.stem == bug_id)


def first_of(exercise: catalog.Exercise, severity: str) -> str | None:
    """The exercise's first catalogued bug (plain form) of this severity."""
    return next(
        (
            b
            for b in exercise.bug_ids
            if catalog.bugs()[b].severity == severity and b != "mutates-input" and any(p.stem == b for p in bug_files(exercise.id))
        ),
        None,
    )


QUICK = "mha-screen"  # the exercise whose graded cases are in the quick run (`-m "not slow"`)


def _slow(exercise_id: str) -> list:
    """Each case is a whole grading: the quick run grades the first exercise's; the full suite all."""
    return [] if exercise_id == QUICK else [pytest.mark.slow]


def anchor_cases():
    """(exercise, expected score, a way to get the file, what it is) for every correctness anchor."""
    crashes = set()  # each crash-severity bug once, in the first exercise that has it
    for exercise in EXERCISES:
        marks = _slow(exercise.id)
        yield pytest.param(exercise.id, 1, "starter", marks=marks, id=f"{exercise.id}-1-starter")
        for bug in exercise.bug_ids:
            if catalog.bugs()[bug].severity == "crash" and bug not in crashes:
                crashes.add(bug)
                yield pytest.param(exercise.id, 1, bug, marks=marks, id=f"{exercise.id}-1-{bug}")
        for level, severity in ((2, "wrong"), (3, "edge")):  # when it has a bug file of that kind
            example = first_of(exercise, severity)
            if example is not None:
                yield pytest.param(exercise.id, level, example, marks=marks, id=f"{exercise.id}-{level}")
        yield pytest.param(exercise.id, 4, "reference", marks=marks, id=f"{exercise.id}-4-reference")


@pytest.mark.parametrize("exercise_id, level, which", list(anchor_cases()))
def test_each_correctness_anchor_is_what_a_file_of_that_kind_scores(exercise_id, level, which, tmp_path):
    exercise = catalog.exercise(exercise_id)
    if which == "starter":  # raises NotImplementedError: does not run
        path = tmp_path / "solution.py"
        path.write_text(exercise.starter, encoding="utf-8")
    elif which == "reference":
        path = reference_files(exercise_id)[0]
    else:
        path = bug_file(exercise_id, which)
    report = grade(path, exercise_id)
    assert rubric.correctness(report) == level, rubric.correctness_reason(report)
    assert mock.scores(exercise, report)[0]["score"] == level
    anchor = exercise.scoring[0].anchors[level - 1]
    assert exercise.scoring[0].dimension == "correctness" and anchor.startswith(rubric.CORRECTNESS_LEADS[level - 1])
    if which not in ("starter", "reference"):  # the anchor names this exercise's example of the level
        assert catalog.bugs()[which].severity == ("crash", "wrong", "edge")[level - 1]


def test_the_cases_the_issue_names(tmp_path):
    """A missing sqrt(hd) is not a file that does not run; mixing the batch is worse than the max over
    blocked entries; a correct sliding window built from the T×T mask scores what its anchor says, 2."""
    starter = tmp_path / "solution.py"
    starter.write_text(catalog.exercise("mha-screen").starter, encoding="utf-8")
    score = {
        name: rubric.correctness(grade(path, "mha-screen"))
        for name, path in [
            ("starter", starter),
            *((b, bug_file("mha-screen", b)) for b in ("no-scaling", "softmax-across-batch", "max-over-blocked")),
        ]
    }
    assert score == {"starter": 1, "no-scaling": 2, "softmax-across-batch": 2, "max-over-blocked": 3}
    window = grade(bug_file("sliding-window", "materialises-scores"), "sliding-window")
    assert [c.bug for c in rubric.causes(window)] == ["materialises-scores"]
    assert rubric.correctness(window) == 2
    assert "T×T mask" in catalog.exercise("sliding-window").scoring[0].anchors[1]


def _composed(exercise_id: str, bugs: tuple[str, ...], tmp_path):
    forms = {f.bug: f for f in compose.forms(exercise_id) if f.name == f.bug}
    group = tuple(forms[b] for b in bugs)
    assert compose.composable(group)
    path = tmp_path / "composed.py"
    path.write_text(compose.compose_source(group), encoding="utf-8")
    return grade(path, exercise_id)


@pytest.mark.parametrize(
    "exercise_id, bugs, level",
    [
        pytest.param(*case, marks=_slow(case[0]))
        for case in (
            ("mha-screen", ("biases-ignored", "causal-off-by-one", "double-scaling"), 1),  # three ordinary causes
            ("tiled-softmax", ("blocked-row-nan", "partial-block-dropped", "softmax-overflow"), 2),  # three edge-only causes
            ("mha-masked-bias", ("b-o-not-suppressed", "max-over-blocked", "mutates-input"), 2),
            ("tiled-softmax", ("partial-block-dropped", "softmax-overflow"), 3),  # two edge-only causes
            ("mha-screen", ("no-scaling", "max-over-blocked"), 2),  # the worst cause decides
        )
    ],
)
def test_the_number_of_distinct_causes_counts(exercise_id, bugs, level, tmp_path):
    report = _composed(exercise_id, bugs, tmp_path)
    assert sorted(str(c.bug) for c in rubric.causes(report)) == sorted(bugs)
    assert rubric.correctness(report) == level, rubric.correctness_reason(report)


def test_an_unexplained_failure_is_one_cause_and_a_public_error_means_it_does_not_run(tmp_path):
    exercise = catalog.exercise("sliding-window")
    source = reference_files("sliding-window")[0].read_text(encoding="utf-8")
    # an off-catalogue mistake: the output is off by a small constant everywhere
    wrong = tmp_path / "offset.py"
    wrong.write_text(
        source + "\n\n_right = sliding_window_attention\n\n"
        "def sliding_window_attention(q, k, v, window):\n"
        "    return _right(q, k, v, window) + 0.5\n",
        encoding="utf-8",
    )
    report = grade(wrong, exercise.id)
    found = rubric.causes(report)
    assert [c.bug for c in found if c.bug is None] == [None] and rubric.correctness(report) <= 2
    raises = tmp_path / "raises.py"
    raises.write_text(
        source + "\n\ndef sliding_window_attention(q, k, v, window):\n    raise RuntimeError('not today')\n", encoding="utf-8"
    )
    assert rubric.correctness(grade(raises, exercise.id)) == 1
    assert mock.correctness_score(None) == 1 and mock.correctness_score(None, graded=False) is None


# --- the data dev check validates -------------------------------------------------------------------


def test_every_bundled_rubric_and_severity_passes_dev_check():
    content = check.Content.installed()
    assert not [p for p in check.run(content).problems if "scoring" in p.message or "severity" in p.message]
    assert all(not check.scoring_problems(e) for e in EXERCISES)


def test_dev_check_rejects_a_missing_severity_and_misordered_anchors(tmp_path):
    import shutil

    root = tmp_path / "content"
    base = check.Content.installed()
    shutil.copytree(base.prompts, root / "prompts")
    bugs = root / "prompts" / "bugs.toml"
    text = bugs.read_text(encoding="utf-8")
    bugs.write_text(text.replace('severity = "wrong"\n', "", 1).replace('severity = "edge"', 'severity = "mild"', 1), encoding="utf-8")
    content = dataclasses.replace(base, prompts=root / "prompts")
    problems = [p.message for p in check.run(content, [check.bug_catalogue_ids]).problems]
    assert len([m for m in problems if "severity" in m]) == 2, problems
    exercise = catalog.exercise("rope")
    correctness = exercise.scoring[0]
    swapped = dataclasses.replace(correctness, anchors=(correctness.anchors[1], correctness.anchors[0], *correctness.anchors[2:]))
    broken = dataclasses.replace(exercise, scoring=(swapped, *exercise.scoring[2:], exercise.scoring[1]))
    messages = check.scoring_problems(broken)
    assert any("in that order" in m for m in messages)
    assert sum("must start with" in m for m in messages) == 2
    same = dataclasses.replace(exercise.scoring[1], anchors=(exercise.scoring[1].anchors[0],) * 4)
    assert any(
        "differ" in m for m in check.scoring_problems(dataclasses.replace(exercise, scoring=(correctness, same, *exercise.scoring[2:])))
    )


def test_every_catalogue_bug_has_a_known_severity():
    assert {b.severity for b in catalog.bugs().values()} <= set(catalog.SEVERITIES)
    assert set(rubric.SEVERITY_SCORE) == set(catalog.SEVERITIES)
    assert [rubric.SEVERITY_SCORE[s] for s in catalog.SEVERITIES] == [1, 2, 3]


# --- the recommendation ------------------------------------------------------------------------------


def six(*values):
    return dict(zip(catalog.DIMENSIONS, values))


@pytest.mark.parametrize(
    "scores, verdict",
    [
        (six(4, 4, 4, 3, 3, 3), "strong hire"),
        (six(4, 4, 4, 4, 4, 2), "hire"),  # one dimension at 2 keeps it from strong hire
        (six(3, 3, 3, 3, 3, 2), "hire"),
        (six(2, 4, 4, 4, 4, 4), "lean no"),  # correctness 2 caps it at lean no
        (six(3, 1, 3, 3, 3, 3), "lean no"),  # a 1 anywhere keeps it from hire
        (six(3, 2, 2, 2, 2, 2), "lean no"),  # total 13
        (six(2, 2, 2, 2, 2, 1), "no"),  # total 11
        (six(1, 4, 4, 4, 4, 4), "no"),  # does not run
    ],
)
def test_the_rule_combines_six_scores_with_reasons(scores, verdict):
    got, reasons = rubric.recommend(scores)
    assert got == verdict
    better = [v.name for v in rubric.VERDICTS][: [v.name for v in rubric.VERDICTS].index(verdict)]
    assert [r.split(":")[0] for r in reasons] == [f"not {b}" for b in better] + [verdict]


def test_the_range_before_every_score_is_given():
    rows = [{"dimension": d, "score": None} for d in catalog.DIMENSIONS]
    rows[0]["score"] = 1
    assert mock.recommendation(rows) == {
        "verdict": None,
        "range": ["no", "no"],
        "reasons": ["still to score: " + ", ".join(catalog.DIMENSIONS[1:])],
    }
    rows[0]["score"] = 4
    assert mock.recommendation(rows)["range"] == ["no", "strong hire"]
    lines = practice.recommendation_lines(mock.recommendation(rows))
    # no verdict from scores not given (issue 36, S7): none yet, and nothing ruled out by correctness 4
    assert lines[0].startswith("- Recommendation: none yet: it comes only from the scores given") and len(lines) == 1


def test_the_report_shows_the_recommendation_and_why_correctness_scored(tmp_path):
    exercise = catalog.exercise("sliding-window")
    report = grade(bug_file("sliding-window", "materialises-scores"), exercise.id)
    rows = mock.scores(exercise, report)
    data = {
        "title": exercise.title,
        "exercise": exercise.id,
        "status": "submitted",
        "started_at": "t",
        "seconds_used": 60.0,
        "minutes": 40,
        "seed": SEED,
        "score": None,
        "passed": False,
        "hints": {"used_during_session": [], "used_in_total": 0, "available": 5},
        "scoring": rows,
        "recommendation": mock.recommendation(rows),
        "checks": [],
        "diagnosis": [],
        "discussion": [],
        "followups": [],
        "solution": None,
    }
    text = practice.mock_report_markdown(data)
    assert "Correctness: 1 cause: materialises-scores (wrong)." in text
    assert "- Recommendation: none yet: it comes only from the scores given" in text
    assert "- The scores given already rule out anything better than **lean no**." in text


SCORES = six(2, 3, 3, 2, 3, 3)


def test_the_sheet_states_the_rule_and_the_reasons_at_80_columns():
    out = Console(record=True, width=80, color_system=None)
    practice.interviewer_sheet(catalog.exercise("sliding-window"), out, scores=SCORES)
    text = out.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    lines = [line.rstrip() for line in text.splitlines()]
    for verdict in rubric.VERDICTS:
        assert f"  {verdict.name:<13}{rubric.floors(verdict)}" in lines
    flat = " ".join(text.split())
    assert "Recommendation: lean no" in flat
    for reason in rubric.recommend(SCORES)[1]:
        assert "– " + reason in flat
    assert "not hire: correctness 2 is below 3; total 16 is below 17" in flat


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_the_interviewer_sheet_in_a_real_terminal_shows_the_rule():
    pexpect = pytest.importorskip("pexpect")
    env = dict(os.environ, COLUMNS="80", LINES="24", TERM="xterm", NO_COLOR="1")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "attn_kit", "mock", "rope", "--interviewer", "--scores", "3,4,3,1,3,4"],
        env=env,
        dimensions=(24, 80),
        encoding="utf-8",
        timeout=60,
    )
    child.expect(pexpect.EOF)
    child.close()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before).replace("\r", "")
    assert child.exitstatus == 0, text[-2000:]
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "Recommendation" in text and "strong hire  correctness ≥ 4, every dimension ≥ 3, total ≥ 21" in text
    flat = " ".join(text.split())
    for anchor in catalog.exercise("rope").scoring[0].anchors:
        assert " ".join(anchor.split())[:60] in flat
    assert "  correctness 3, robustness 4, shapes 3, tests 1, systems 3, communication 4" in [line.rstrip() for line in text.splitlines()]
    assert "Recommendation: lean no" in text and "– not hire: tests 1 is below 2" in text


@pytest.mark.parametrize(
    "text, scores",
    [
        ("3,2,3,3,2,3", (3, 2, 3, 3, 2, 3)),
        ("systems=2, correctness=4,robustness=4,shapes=4,tests=4,communication=1", (4, 4, 4, 4, 2, 1)),
    ],
)
def test_scores_are_read_in_order_or_by_name(text, scores):
    assert rubric.parse_scores(text) == six(*scores)


@pytest.mark.parametrize(
    "args, says",
    [
        (["--interviewer", "--scores", "3,2,3"], "got '3,2,3'"),
        (["--interviewer", "--scores", "3,2,3,3,2,5"], "communication = '5' is not 1, 2, 3 or 4"),
        (["--interviewer", "--scores", "correctness=3,style=2"], "'style' is not a dimension"),
        (["--interviewer", "--scores", "correctness=3,correctness=2,shapes=1,tests=1,systems=1,communication=1"], "missing: robustness"),
        (["--scores", "3,2,3,3,2,3"], "--scores goes with --interviewer"),
    ],
)
def test_bad_scores_are_a_usage_error_not_a_traceback(args, says):
    from click.testing import CliRunner

    from attn_kit.cli import cli

    result = CliRunner().invoke(cli, ["mock", "rope", *args])
    assert result.exit_code == 2 and says in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_every_exercise_has_cases_for_all_four_levels():
    levels = {(p.values[0], p.values[1]) for p in anchor_cases()}
    assert levels == {(e.id, n) for e, n in itertools.product(EXERCISES, (1, 2, 3, 4))}
    assert all(p.values[2] for p in anchor_cases())  # an example of every level exists in each catalogue
    assert bug_id_of(bug_file("mha-screen", "no-scaling")) == "no-scaling"


def test_an_abandoned_session_gets_no_scores_and_no_recommendation(tmp_path):
    from attn_kit.practice.store import now

    session = mock.create_session(catalog.exercise("sliding-window"), 40, tmp_path)
    abandoned = mock.report_data(session, mock.MockStatus.ABANDONED, 10.0, now())
    assert abandoned["recommendation"] is None and abandoned["scoring"][0]["score"] is None
    assert "## Recommendation" not in practice.mock_report_markdown(abandoned)
    ungraded = mock.report_data(session, mock.MockStatus.SUBMITTED, 10.0, now())  # could not be graded
    assert ungraded["scoring"][0]["score"] == 1 and ungraded["recommendation"]["range"] == ["no", "no"]
    assert "the file could not be graded" in ungraded["scoring"][0]["why"]


# --- the calibration (issue 37): an edge counts once, one gap caps, levels differ, discussion feeds systems


def test_an_edge_bug_counts_once():
    """Correctness 3 (an edge bug) and robustness 2 (the same edge) used to total 16: lean no."""
    scores = six(3, 2, 3, 3, 3, 2)
    assert sum(scores.values()) == 16 and rubric.edge_overlap(scores) == 1
    verdict, reasons = rubric.recommend(scores)
    assert verdict == "hire" and any("total 17 (the edge bug counted once)" in r for r in reasons)
    assert rubric.edge_overlap(six(3, 4, 3, 3, 3, 2)) == 0  # robustness untouched: nothing counted twice
    assert rubric.edge_overlap(six(2, 2, 3, 3, 3, 3)) == 0  # wrong on ordinary inputs is not an edge
    assert rubric.recommend(six(3, 4, 3, 3, 3, 1))[0] == "lean no"  # the relief is for the edge alone


@pytest.mark.parametrize("level", rubric.LEVELS)
def test_one_missing_dimension_caps_instead_of_vetoing(level):
    verdict, reasons = rubric.recommend(six(4, 4, 4, 1, 4, 4), level)
    assert verdict == "hire", reasons
    assert reasons[-1].startswith("hire: tests 1 is the one dimension below the floor; it caps")
    assert rubric.recommend(six(4, 1, 1, 4, 4, 4), level)[0] == "lean no"  # two gaps still veto hire
    assert rubric.recommend(six(4, 4, 4, 4, 4, 4), level)[0] == "strong hire"


@pytest.mark.parametrize(
    "scores, junior, mid, senior",
    [
        ((4, 4, 4, 3, 3, 3), "strong hire", "strong hire", "hire"),  # a senior needs systems 4 for strong hire
        ((3, 3, 3, 3, 1, 3), "hire", "lean no", "lean no"),  # a junior is not held to systems depth
        ((4, 4, 4, 4, 2, 4), "strong hire", "hire", "lean no"),
        ((2, 2, 2, 2, 2, 1), "lean no", "no", "no"),
    ],
)
def test_junior_and_senior_rules_differ(scores, junior, mid, senior):
    got = {level: rubric.recommend(six(*scores), level)[0] for level in rubric.LEVELS}
    assert got == {"junior": junior, "mid": mid, "senior": senior}


def test_the_levels_are_the_seniority_levels_and_an_unknown_one_is_a_usage_error():
    from attn_kit.base.errors import UsageError

    assert rubric.VERDICTS == rubric.VERDICTS_BY_LEVEL[rubric.DEFAULT_LEVEL]
    assert all({s.level for s in e.seniority} <= set(rubric.LEVELS) for e in EXERCISES)
    with pytest.raises(UsageError, match="junior, mid, senior"):
        rubric.recommend(six(4, 4, 4, 4, 4, 4), "principal")


@pytest.mark.parametrize(
    "covered, score",
    [
        ([], None),
        ([(4, 4, True), (3, 4, True)], 4),  # 7 of 8, every required point
        ([(4, 4, True), (3, 4, False)], 3),  # a required point missed keeps it from 4
        ([(2, 4, True), (2, 4, True)], 3),
        ([(1, 4, True), (1, 4, False)], 2),
        ([(0, 4, False), (0, 3, False)], 1),
    ],
)
def test_discussion_coverage_gives_the_systems_score(covered, score):
    assert rubric.systems_from_discussion(covered) == score


def test_the_mock_report_scores_systems_from_the_discussion():
    exercise = catalog.exercise("kv-cache")
    first, second = exercise.questions[:2]
    talk = [
        mock.Discussion(first, "", [True] * len(first.key_points)),
        mock.Discussion(second, "", [i in second.required for i in range(len(second.key_points))]),
    ]
    rows = {row["dimension"]: row for row in mock.scores(exercise, None, (), discussion=talk)}
    got = len(first.key_points) + len(second.required)
    total = len(first.key_points) + len(second.key_points)
    assert rows["systems"]["score"] == rubric.systems_from_discussion([(got, total, True)])
    assert rows["systems"]["why"] == f"the discussion covered {got} of {total} key points; every required point covered"
    assert {row["dimension"]: row for row in mock.scores(exercise, None, ())}["systems"]["score"] is None
    systems_hint = next((n for n, h in enumerate(exercise.hints, 1) if h.dimension == "systems"), None)
    if systems_hint is not None:  # a used hint on systems still caps it at 3
        capped = {row["dimension"]: row for row in mock.scores(exercise, None, (systems_hint,), discussion=talk)}
        assert capped["systems"]["score"] <= 3


def test_the_sheet_shows_the_level_s_rule(tmp_path):
    from click.testing import CliRunner

    from attn_kit.cli import cli

    result = CliRunner().invoke(cli, ["mock", "rope", "--interviewer", "--scores", "4,4,4,4,2,4", "--level", "senior"])
    flat = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "Recommendation (senior level)" in flat and "systems ≥ 3" in flat and "Recommendation: lean no" in flat
    assert "An edge bug counts once" in flat
    junior = CliRunner().invoke(cli, ["mock", "rope", "--interviewer", "--scores", "4,4,4,4,2,4", "--level", "junior"])
    assert "Recommendation: strong hire" in " ".join(junior.output.split())
    alone = CliRunner().invoke(cli, ["mock", "rope", "--level", "senior"])
    assert alone.exit_code == 2 and "--level goes with --interviewer" in alone.output


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.id)
def test_every_exercise_has_what_to_watch_for(exercise):
    """`mock --help` promises the interviewer's sheet shows what to watch for: every exercise has it."""
    from click.testing import CliRunner

    from attn_kit.cli import cli

    assert "what to watch for" in CliRunner().invoke(cli, ["mock", "--help"]).output
    assert len(exercise.rubric) >= check.WATCH_ITEMS and all(item.why for item in exercise.rubric)
    out = Console(record=True, width=80, color_system=None)
    practice.interviewer_sheet(exercise, out)
    flat = " ".join(out.export_text().split())
    assert "What to watch for" in flat
    for item in exercise.rubric:
        assert " ".join(item.watch_for.split()) in flat


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_the_senior_sheet_in_a_real_terminal():
    pexpect = pytest.importorskip("pexpect")
    env = dict(os.environ, COLUMNS="80", LINES="24", TERM="xterm", NO_COLOR="1")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "attn_kit", "mock", "gqa", "--interviewer", "--scores", "4,4,4,1,4,4", "--level", "senior"],
        env=env,
        dimensions=(24, 80),
        encoding="utf-8",
        timeout=60,
    )
    child.expect(pexpect.EOF)
    child.close()
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before).replace("\r", "")
    assert child.exitstatus == 0, text[-2000:]
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "Recommendation (senior level)" in text and "hire         correctness ≥ 3, every dimension ≥ 2, systems ≥ 3, total ≥ 18" in text
    flat = " ".join(text.split())
    assert "Recommendation: hire" in flat and "tests 1 is the one dimension below the floor" in flat
    assert "What to watch for" in flat


def test_a_solo_candidate_can_give_the_missing_scores_and_get_the_verdict():
    """The report of someone practising alone says how to give the scores it cannot compute, with
    the one it computed filled in; the command it names gives the verdict from those scores alone
    (issue 36, S7)."""
    import re

    from click.testing import CliRunner

    from attn_kit.cli import cli

    exercise = catalog.exercise("sliding-window")
    rows = mock.scores(exercise, grade(bug_file("sliding-window", "materialises-scores"), exercise.id))
    text = "\n".join(practice.recommendation_lines(mock.recommendation(rows), exercise.id, rows))
    assert "between" not in text and "depending on the scores" not in text
    command = re.search(r"`(attn-kit mock sliding-window --interviewer --scores [^`]+)`", text).group(1)
    correctness = next(r["score"] for r in rows if r["dimension"] == "correctness")
    assert f"correctness={correctness}," in command and command.count("=?") == len(catalog.DIMENSIONS) - 1
    filled = command.replace("=?", "=3").split()[1:]
    result = CliRunner().invoke(cli, filled)
    assert result.exit_code == 0, result.output
    given = {**{d: 3 for d in catalog.DIMENSIONS}, "correctness": correctness}
    verdict, _ = rubric.recommend(given)
    assert f"Recommendation: {verdict}" in " ".join(result.output.split())
