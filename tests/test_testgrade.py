"""Grading the candidate's own tests (`attn-kit test-tests`, `attn-kit check --tests`).

The candidate test files live in tests/corpus/candidate_tests/ (named so that our own pytest run
does not collect them). Each is run through the real CLI in a subprocess, against the references
and every known-bug implementation of mha-screen.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from rich.console import Console

from attn_kit.base.paths import bug_files, reference_files, solutions_dir
from attn_kit.load import catalog
from attn_kit.practice import testgrade
from attn_kit.render import check as render

from conftest import need_extra, need_torch
from helpers import CORPUS, attn_kit, graded_tests, graded_tests_json

TESTS = CORPUS / "candidate_tests"
BUGS = catalog.exercise("mha-screen").bug_ids
# what tests/corpus/candidate_tests/other_module.py catches: mutates-input through its scaled-weights
# form (it changes the parameters the next call reuses), transpose-reverses-all-axes because its
# batch-of-two inputs have distinct batch entries
OTHER_MODULE_CATCHES = ["no-output-projection", "padding-masks-queries", "mutates-input", "transpose-reverses-all-axes"]


def test_tests_json(path, *extra, cwd=None) -> tuple[dict, int]:
    proc = attn_kit("test-tests", path, "--json", *extra, cwd=cwd)
    assert proc.stdout.count("\n") <= 1, f"--json printed more than one line:\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout), proc.returncode


test_tests_json.__test__ = False


@pytest.mark.slow
def test_strong_file_catches_every_bug_in_every_form():
    data, code = test_tests_json(TESTS / "strong.py")
    assert code == 0
    assert data["exercise"] == "mha-screen"
    assert data["wrong_tests"] == []
    assert data["caught"] == list(BUGS)
    assert data["missed"] == []
    assert data["score"] == 1.0
    for bug in data["bugs"]:
        assert all(bug["forms"].values()), f"{bug['bug']}: a form is not caught: {bug['forms']}"
    assert data["runs"] == len(reference_files("mha-screen")) + len(bug_files("mha-screen"))


# Each exercise's strong file (tests/corpus/candidate_tests/): its grading runs every reference and
# every bug file of the exercise, so it also proves what test_every_exercise_can_grade_tests proves
# for the others (mha-screen's is strong.py, above). Each weak file's own test is in the exercise's
# module (test_rope.py, ...).
STRONG = {
    "rope": "rope_strong.py",
    "sliding-window": "window_strong.py",
    "attention-backward": "backward_strong.py",
    "paged-attention": "paged_strong.py",
}


def _every_implementation_ran(grade: testgrade.TestGrade, exercise: catalog.Exercise) -> None:
    assert [b.id for b in grade.bugs] == list(exercise.bug_ids)
    assert len(grade.runs) == len(reference_files(exercise.id)) + len(bug_files(exercise.id))
    assert all(not run.error for run in grade.runs), [run.error for run in grade.runs if run.error]


@pytest.mark.slow
@pytest.mark.parametrize("exercise", list(STRONG))
def test_each_strong_file_catches_every_bug_of_its_exercise(exercise):
    grade = graded_tests(TESTS / STRONG[exercise])
    assert grade.exercise == exercise and grade.wrong_tests == [] and grade.missed == [] and grade.score == 1.0
    _every_implementation_ran(grade, catalog.exercise(exercise))


@pytest.mark.slow
def test_shapes_only_file_catches_only_what_raises_or_changes_a_shape():
    data, code = test_tests_json(TESTS / "shapes_only.py", "--min-score", "0.5")
    assert code == 1, "--min-score 0.5 turns the low score into a failure"
    assert data["wrong_tests"] == []
    # transpose-reverses-all-axes raises: k.T reverses all four axes, so the batched q @ k.T does not broadcast
    caught = ["softmax-overflow", "transpose-reverses-all-axes"]
    assert data["caught"] == caught
    assert set(data["missed"]) == set(BUGS) - set(caught)
    assert data["score"] == pytest.approx(len(caught) / len(BUGS))
    overflow = next(b for b in data["bugs"] if b["bug"] == "softmax-overflow")
    # only the math.exp form raises (OverflowError); NumPy's inf/NaN keeps the length right
    assert overflow["forms"] == {"main": [], "math-exp": ["test_softmax_keeps_length"]}


@pytest.mark.slow
def test_wrong_expectation_is_reported_with_its_message_and_catches_nothing():
    data, code = graded_tests_json(TESTS / "wrong_expectation.py")  # shared with the rendering test
    assert code == 1
    assert data["wrong_tests"] == ["test_causal_mask_excludes_diagonal"]
    wrong = data["wrong"][0]
    assert "a token must not attend to itself" in wrong["message"]
    assert wrong["where"] == "wrong_expectation.py:13"
    assert wrong["reference"].startswith("reference_")
    # it fails on the correct mask and passes on the diagonal-excluding bug, but a wrong test
    # catches nothing: causal-off-by-one stays missed
    assert "causal-off-by-one" in data["missed"]
    assert data["caught"] == []


@pytest.mark.slow
def test_rich_output_shows_wrong_tests_table_and_ideas():
    grade = graded_tests(TESTS / "wrong_expectation.py")
    buffer = io.StringIO()
    render.test_grade(grade, Console(file=buffer, width=100, theme=render.THEME), full=True)  # --all
    out = buffer.getvalue()
    assert "✗ 1 wrong test: it fails on correct code" in out and "test_causal_mask_excludes_diagonal wrong_expectation.py:13" in out
    assert "a token must not attend to itself" in out
    assert " ".join(catalog.bugs()["causal-off-by-one"].test_idea.split()) in " ".join(out.split())
    assert f"Score: 0/{len(BUGS)} known bugs caught (0%); 1 wrong test to fix first" in out


@pytest.mark.slow
def test_hanging_test_is_wrong_on_references_and_never_catches():
    data, code = test_tests_json(TESTS / "hanging.py", "--timeout", "1")
    assert code == 1
    assert data["wrong_tests"] == ["test_waits_forever"]
    assert data["wrong"][0]["outcome"] == "timeout"
    bugs = {b["bug"]: b for b in data["bugs"]}
    # test_spins_on_nan loops forever on the NaN bug: not caught, and the report says why
    assert not bugs["blocked-row-nan"]["caught"]
    assert any("test_spins_on_nan hung" in n for n in bugs["blocked-row-nan"]["notes"])
    # ... while on the uniform-weights bug it finishes and fails, which does catch it
    assert bugs["blocked-row-uniform"]["tests"] == ["test_spins_on_nan"]
    assert "causal-off-by-one" in data["caught"]


@pytest.mark.slow
def test_functions_imported_from_another_module_name_with_a_helper():
    data, code = graded_tests_json(TESTS / "other_module.py")  # shared with test_render_to_text
    assert code == 0, "missed bugs alone do not fail the command"
    assert data["wrong_tests"] == []
    assert data["caught"] == OTHER_MODULE_CATCHES


@pytest.mark.slow
def test_tests_inside_the_solution_file(tmp_path):
    solution = tmp_path / "solution.py"
    solution.write_text(
        (solutions_dir("mha-screen") / "reference_lists.py").read_text()
        + """

def test_blocked_softmax_is_zero():
    assert stable_softmax([3.0, 4.0], [False, False]) == [0.0, 0.0]


def test_padding_mask():
    got = padding_mask([1], 2)
    assert [[[bool(v) for v in row] for row in m] for m in got] == [[[True, False], [True, False]]]


def test_softmax_length():
    assert len(stable_softmax([1.0, 2.0])) == 3
"""
    )
    proc = attn_kit("check", solution, "--tests", solution, "--json")
    data = json.loads(proc.stdout)
    assert data["passed"] is True
    tests = data["tests"]
    # `== [0.0, 0.0]` on the NumPy reference's array raises: the test assumes lists come back, so
    # it is type-sensitive (README rule), not wrong; the length test is wrong on every reference
    assert [t["test"] for t in tests["type_sensitive"]] == ["test_blocked_softmax_is_zero"]
    assert "truth value of an array" in tests["type_sensitive"][0]["message"]
    assert tests["wrong_tests"] == ["test_softmax_length"]
    assert tests["caught"] == ["padding-masks-queries"]
    assert proc.returncode == 1, "a wrong test fails `check --tests` even when every check passes"


@pytest.mark.slow
def test_check_with_tests_passes_when_solution_and_tests_are_good(tmp_path):
    shutil.copy(solutions_dir("mha-screen") / "reference_numpy.py", tmp_path / "solution.py")
    shutil.copy(TESTS / "other_module.py", tmp_path / "other_module.py")
    shutil.copy(TESTS / "my_attention.py", tmp_path / "my_attention.py")
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = attn_kit("check", "solution.py", "--tests", "other_module.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # nothing is written beside the candidate's files: no __pycache__, no .pytest_cache
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert "checks passed" in proc.stdout  # the check report, then the test report
    assert proc.stdout.index("checks passed") < proc.stdout.index(f"Score: {len(OTHER_MODULE_CATCHES)}/{len(BUGS)} known bugs caught")
    assert "Add --full for every bug, the tests that caught it" in " ".join(proc.stdout.split())  # check's option


@pytest.mark.slow
def test_a_crashing_test_is_wrong_and_the_rest_still_run(tmp_path):
    tests = tmp_path / "crash_tests.py"
    tests.write_text("""import os
from solution import causal_mask

def test_exits():
    os._exit(3)

def test_interrupts():
    raise KeyboardInterrupt

def test_after_the_crash():
    assert causal_mask(1, 2)[0][0][0] and not causal_mask(1, 2)[0][0][1]
""")
    grade = testgrade.grade_tests(tests)
    assert grade.wrong_tests == ["test_exits", "test_interrupts"]
    assert grade.wrong[0].outcome == "crashed" and "status 3" in grade.wrong[0].message
    assert grade.wrong[1].message.startswith("KeyboardInterrupt")
    assert grade.caught == ["causal-off-by-one"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "text, needle",
    [
        ("from solution import multi_head_attention\n\ndef helper():\n    pass\n", "no test functions"),
        ("import numpy as np\n\ndef test_x():\n    assert np.ones(1)[0] == 1\n", "neither import nor define"),
        ("from solution import causal_mask\n\ndef test_x(:\n    pass\n", "SyntaxError"),
        (
            "import sys\nfrom solution import causal_mask\nsys.exit(0)\n\ndef test_x():\n    pass\n",
            "pytest stopped: SystemExit: 0 at my_tests.py:3",
        ),
        (
            "from solution import causal_mask\nwhile True:\n    pass\n\ndef test_x():\n    pass\n",
            "did not finish within 0.5 s: is there a loop",
        ),
    ],
)
def test_unusable_test_files_give_one_clear_error(tmp_path, text, needle):
    path = tmp_path / "my_tests.py"
    path.write_text(text)
    # the loop case spins for its timeout on each reference, in each of the two runs: 0.5 s, not more
    args = ("--exercise", "mha-screen") if "neither" in needle else ("--timeout", "0.5")
    with ThreadPoolExecutor(2) as pool:  # side by side: the loop case waits out its timeout twice
        as_json = pool.submit(test_tests_json, path, *args)
        plain = pool.submit(attn_kit, "test-tests", path, *args)
        (data, code), proc = as_json.result(), plain.result()
    assert code == 1
    assert needle in data["error"]
    assert data["score"] == 0.0 and data["wrong_tests"] == []
    assert proc.returncode == 1 and proc.stderr.startswith("Error: ") and "Traceback" not in proc.stderr


def test_collection_error_on_correct_code_is_reported(tmp_path):
    path = tmp_path / "my_tests.py"
    path.write_text(
        "from solution import multi_head_attention, helper_that_does_not_exist\n\ndef test_x():\n    assert multi_head_attention\n"
    )
    data, code = test_tests_json(path)
    assert code == 1
    assert "helper_that_does_not_exist" in data["error"]


def test_misuse_exits_2(tmp_path):
    assert attn_kit("test-tests", tmp_path / "missing.py").returncode == 2
    proc = attn_kit("test-tests", TESTS / "strong.py", "--exercise", "no-such-exercise")
    assert proc.returncode == 2 and "unknown exercise" in proc.stderr


@pytest.mark.slow
def test_render_to_text():
    grade = graded_tests(TESTS / "other_module.py")
    buffer = io.StringIO()
    render.test_grade(grade, Console(file=buffer, width=100, theme=render.THEME), full=True)  # --all
    text = buffer.getvalue()
    assert "✓ Every test passes on the correct implementations (reference_lists.py, reference_numpy.py)." in text
    assert "no-output-projection" in text and "test_output_projection_matters" in text
    assert "Tests that would catch what you missed" in text
    flat = " ".join(text.split())  # rich wraps long test ideas at the console's width
    for bug in set(BUGS) - set(OTHER_MODULE_CATCHES):
        shown = catalog.exercise("mha-screen").bug(bug)  # the exercise's wording ([[bug_texts]]) where it has one
        assert shown is not None and " ".join(shown.test_idea.split()) in flat, bug
    n = len(OTHER_MODULE_CATCHES)
    assert f"Score: {n}/{len(BUGS)} known bugs caught ({n / len(BUGS):.0%})" in text


@pytest.mark.slow
@pytest.mark.parametrize("exercise", [e for e in catalog.exercises() if e not in STRONG and e != "mha-screen"])
def test_every_exercise_can_grade_tests(tmp_path, exercise):
    """The machinery is generic: every exercise's references and bug files run under pytest (those
    with a strong file are proved by its grading: STRONG, and strong.py for mha-screen)."""
    ex = catalog.exercise(exercise)
    if ex.needs:
        need_extra(ex)
    path = tmp_path / "my_tests.py"
    path.write_text(f"from solution import {ex.main}\n\n\ndef test_defined():\n    assert callable({ex.main})\n")
    grade = testgrade.grade_tests(path)
    assert grade.exercise == exercise
    assert grade.wrong_tests == [] and grade.caught == [] and grade.score == 0.0
    _every_implementation_ran(grade, ex)


@pytest.mark.slow
def test_torch_tests_are_judged_on_the_torch_reference():
    need_torch()
    data, code = test_tests_json(TESTS / "torch_worked_example.py")
    assert code == 0
    assert data["exercise"] == "mha-masked-bias"
    assert data["references"] == ["reference_torch.py"]  # torch.allclose would fail on NumPy arrays
    assert data["wrong_tests"] == []
    assert "b-o-not-suppressed" in data["caught"] and "mask-inverted" in data["caught"]
    assert "no-scaling" in data["missed"]  # D = 1 in the worked example: sqrt(1) hides it


@pytest.mark.slow
def test_helpers_come_from_the_checked_solution_in_another_folder(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "tests").mkdir()
    solution = tmp_path / "src" / "solution.py"
    solution.write_text((solutions_dir("mha-screen") / "reference_lists.py").read_text() + "\n\ndef make_lengths():\n    return [1, 3]\n")
    (tmp_path / "tests" / "my_tests.py").write_text(
        "from solution import make_lengths, padding_mask\n\n\ndef test_padding():\n"
        "    m = padding_mask(make_lengths(), 3)\n"
        "    assert [[bool(v) for v in row] for row in m[0]] == [[True, False, False]] * 3\n"
    )
    proc = attn_kit("check", "src/solution.py", "--tests", "tests/my_tests.py", "--json", cwd=tmp_path / "tests" / "..")
    data = json.loads(proc.stdout)
    assert data["tests"]["wrong_tests"] == [], data["tests"]["wrong"]
    assert data["tests"]["caught"] == ["padding-masks-queries"]
    assert proc.returncode == 0


# --- the report fits one 80×24 screen; --all and --json have everything ----------------------------


def _grade_missing(caught: int, wrong: int = 0) -> testgrade.TestGrade:
    """A grade of mha-screen's known bugs with the first `caught` caught (no tests run)."""
    bugs = [catalog.bugs()[bug] for bug in BUGS]
    coverage = [testgrade.BugCoverage(b.id, b.title, b.test_idea, {"": ("test_a",) if i < caught else ()}) for i, b in enumerate(bugs)]
    wrongs = [
        testgrade.WrongTest(f"test_wrong_{i}", "reference_lists.py", "failed", "AssertionError: no\n" * 9, where=f"my_tests.py:{i}")
        for i in range(wrong)
    ]
    return testgrade.TestGrade(
        "mha-screen", "some/deep/folder/my_tests.py", ["test_a"], wrongs, coverage, judged_on=["reference_lists.py", "reference_numpy.py"]
    )


@pytest.mark.parametrize("caught,wrong", [(0, 0), (2, 0), (10, 1), (len(BUGS), 0)])
@pytest.mark.parametrize("width", [80, 60])
def test_the_report_fits_a_screen_most_useful_first(caught, wrong, width):
    grade = _grade_missing(caught, wrong)
    out = Console(width=width, height=24, file=io.StringIO(), color_system=None, theme=render.THEME)
    render.test_grade(grade, out)
    lines = out.file.getvalue().rstrip("\n").split("\n")
    assert len(lines) <= 23 and all(len(line) <= width for line in lines), "\n".join(lines)
    text = "\n".join(lines)
    flat = " ".join(text.split())
    score = next(i for i, line in enumerate(lines) if line.startswith("Score: "))  # after the header and the run
    assert lines[score].startswith(f"Score: {caught}/{len(BUGS)} known bugs caught") and score <= 4
    assert not any(line.startswith(("✓", "✗", "Missed", "  ●")) for line in lines[:score])
    missed = [bug for bug in BUGS[caught:]]
    if not missed:
        assert "Add --all for every bug and the tests that caught it." in flat and "Missed" not in text
        return
    ideas = [bug for bug in missed if " ".join(catalog.bugs()[bug].test_idea.split()) in flat]
    assert ideas and ideas == missed[: len(ideas)], "the first missed bugs, each with its test idea"
    said = re.search(
        r"Missed (\d+)\. (?:A test that would catch the first|Tests that would catch the first "
        r"(\d+)):",
        text,
    )
    assert said and int(said.group(1)) == len(missed) and int(said.group(2) or 1) == len(ideas), text
    at = next(i for i, line in enumerate(lines) if line.startswith("  and "))
    follow = [line.strip() for line in lines[at + 1 :] if line.startswith("      ")]
    others = re.fullmatch(r"and ([a-z, -]+?)(?: \+(\d+) more)?", " ".join([lines[at].strip(), *follow]))
    assert others, text
    named = others.group(1).split(", ")
    assert named == missed[len(ideas) : len(ideas) + len(named)]
    assert len(ideas) + len(named) + int(others.group(2) or 0) == len(missed), "every miss counted once"
    assert "Add --all for every bug, the tests that caught it and each test idea." in flat
    if caught:
        assert re.search(rf"✓ Caught {caught}: {BUGS[0]}", text)
    if wrong:
        assert "✗ 1 wrong test" in text and "… (6 more lines: --all shows them)" in text
    full = Console(width=width, file=io.StringIO(), color_system=None, theme=render.THEME)
    render.test_grade(grade, full, full=True)
    everything = " ".join(full.file.getvalue().split())
    assert all(" ".join(catalog.bugs()[bug].test_idea.split()) in everything for bug in missed)
    assert "known bug caught by" in everything
    assert not wrong or "AssertionError: no " * 9 in everything + " ", "a wrong test's message in full"


def test_compiled_tests_are_kept_beside_the_records_not_beside_the_candidate_s_files(tmp_path):
    """run_pytest (in a worker: here a child process) compiles the candidate's tests, with pytest's
    assertion rewriting, into the grading's own folder, where the run against the next
    implementation reads them; nothing is written beside the candidate's files."""
    mine = tmp_path / "mine"
    records = tmp_path / "records"
    mine.mkdir()
    records.mkdir()
    (mine / "test_sizes.py").write_text("from solution import causal_mask\n\n\ndef test_size():\n    assert len(causal_mask(3, 3)) == 3\n")
    (records / "pytest.ini").write_text("[pytest]\n")
    code = (
        "import sys\nfrom attn_kit.runtime.pytest_harness import run_pytest\n"
        f"code = run_pytest({str(mine / 'test_sizes.py')!r}, {str(solutions_dir('mha-screen') / 'reference_numpy.py')!r}, "
        f"['solution'], ['causal_mask'], {str(records / 'run.jsonl')!r}, {str(records / 'pytest.ini')!r}, {{}}, 5.0, [])\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in mine.rglob("*")) == ["test_sizes.py"]
    compiled = [p.name for p in (records / "pycache").rglob("*.pyc")]
    assert any(name.startswith("test_sizes") and "pytest" in name for name in compiled), compiled


def test_only_tests_that_mention_meta_get_a_meta_warmed_zygote(tmp_path, monkeypatch):
    """The kit's implementations never use torch's meta device, so test-tests skips the zygote's
    meta-device warm-up (about a second with torch) unless the candidate's tests mention `meta`."""

    class Stop(Exception):
        pass

    asked = []

    def launcher(preload, warm=True):
        asked.append(warm)
        raise Stop

    monkeypatch.setattr(testgrade, "make_launcher", launcher)
    plain = "from solution import causal_mask\n\n\ndef test_shape():\n    assert len(causal_mask(3)) == 3\n"
    for name, text in (("plain_tests.py", plain), ("meta_tests.py", plain + "\n# inputs on device='meta' next\n")):
        (tmp_path / name).write_text(text)
        with pytest.raises(Stop):
            testgrade.grade_tests(tmp_path / name)
    assert asked == [False, True]
