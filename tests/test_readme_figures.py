"""Every figure in the README is recomputed here, so a README that drifts from the kit fails:
the worked check example (a real report, regenerated), the all-pass line, each exercise's
check count, the test-tests example (a real run of tests/corpus/candidate_tests/readme_example.py),
the catalogue sizes, the mock and discuss examples' counts, and the torch command.

When one of these fails after a deliberate change, the assertion message holds the text to paste."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from attn_kit.base.errors import INSTALL
from attn_kit.base.paths import bug_files, reference_files, solutions_dir
from attn_kit.dev import readme as readme_tables
from attn_kit.grading import pipeline as grading
from attn_kit.load import catalog
from attn_kit.render import check as render
from attn_kit.render import practice, screen

from conftest import need_torch
from helpers import CORPUS, check_count, graded_tests

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MHA = catalog.exercise("mha-screen")


def block_after(marker: str) -> list[str]:
    """The lines of the first fenced block after `marker`."""
    return README.split(marker, 1)[1].split("```", 2)[1].split("\n")[1:-1]


def in_order(shown: list[str], real: list[str]) -> list[str]:
    """The README lines (but `…` elisions) not found, in order, among the real output's lines."""
    missing, at = [], 0
    for line in shown:
        if line.strip() in ("…", ""):
            continue
        try:
            at = real.index(line.rstrip(), at) + 1
        except ValueError:
            missing.append(line)
    return missing


def _bug_id(path: Path) -> str:
    return path.stem.split("@", 1)[0]  # a second form of a bug: <id>@<form>.py


def points(exercise_id: str) -> int:
    return sum(c.points for c in grading.suite_for(catalog.exercise(exercise_id)).checks)


def test_the_check_example_is_a_real_report(tmp_path):
    mine = tmp_path / "solution.py"
    shutil.copy(solutions_dir("mha-screen") / "bugs" / "heads-interleaved.py", mine)
    report = grading.grade(mine, grading.Options(seed=7))
    report.path = "mha_screen.py"  # as `attn-kit check mha_screen.py` run in its folder shows it
    out = Console(width=80, file=io.StringIO(), color_system=None, theme=render.THEME)
    screen.report(report, MHA, out)  # the first screen, as a plain `check` prints it
    real = [line.rstrip() for line in out.file.getvalue().split("\n")]
    shown = block_after("A solution with heads taking interleaved columns")
    assert shown[0] == "$ attn-kit check mha_screen.py --seed 7"
    missing = in_order(shown[1:], real)
    assert not missing, "README lines not in the real report:\n" + "\n".join(missing) + "\n\nThe real report:\n" + "\n".join(real)


def test_the_all_pass_line_and_mock_figures_follow_the_suite():
    total, most = check_count("mha-screen"), points("mha-screen")
    assert f"`✓ All {total} checks passed — {most}/{most} points.`" in README
    assert f"Mock submitted: {total}/{total} checks, {most}/{most} points, passed." in README
    # `discuss mha-screen`: its questions alone, so adding an exercise changes no figure here
    questions = len(MHA.questions)
    assert "      $ attn-kit discuss mha-screen\n      Card 1/5 · new · " in README
    assert f"new questions: {questions - 1} of {questions}." in README


def test_each_exercise_check_count_in_the_readme_is_its_suite_s():
    need_torch()  # mha-masked-bias's suite imports torch
    said = re.search(r"Its (\d+) checks cover dtypes", README)
    assert said and int(said.group(1)) == check_count("mha-masked-bias")


@pytest.mark.slow  # runs the tests against every implementation of the exercise
def test_the_test_tests_example_is_a_real_run():
    grade = graded_tests(CORPUS / "candidate_tests" / "readme_example.py", "mha-screen")
    shown = block_after("It still counts, but only")
    header = shown[1]
    references, bugs = len(reference_files("mha-screen")), len(bug_files("mha-screen"))
    assert re.match(
        rf"{len(grade.tests)} tests run against {references} reference and {bugs} known-bug "
        r"implementations in [\d.]+ s$",
        header,
    ), header
    data = grade.to_json()
    caught, known = len(data["caught"]), len(data["caught"]) + len(data["missed"])
    assert known == len({bug_id for bug_id in map(_bug_id, bug_files("mha-screen"))})
    score = f"Score: {caught}/{known} known bugs caught ({round(100 * caught / known)}%); 1 wrong test to fix first"
    assert shown[2] == score, f"{shown[2]!r} != {score!r}"
    out = Console(width=80, height=24, file=io.StringIO(), color_system=None, theme=render.THEME)
    render.test_grade(grade, out)
    real = [line.rstrip().replace("readme_example.py", "my_tests.py") for line in out.file.getvalue().split("\n")]
    assert shown[2:] == real[2 : len(shown)] and not "".join(real[len(shown) :]), (
        "The README's example is not the real run (after the header and its timing):\n" + "\n".join(real)
    )
    assert len(shown) <= 23, "the example fits an 80×24 screen, with the prompt after it"


def test_the_catalogue_sizes_are_written_by_dev_update_not_by_hand():
    """The figures that grow with the set of exercises are not written by hand in the README: the
    exercise count sits in a table `attn-kit dev update` writes (test_docs checks it is current),
    and the catalogue's size and every exercise's ids in docs/catalogue.md, which it writes too
    (dev check's readme_tables_are_up_to_date; test_devcheck breaks it)."""
    hand_written = readme_tables.REGION.sub("", README)
    # (not "10/24 known bugs caught": the test-tests example counts mha-screen's own bug files)
    counted = re.findall(
        r"(?<![/\w])(\d+|" + "|".join(readme_tables.WORDS[2:]) + r") (?:known bugs|exercises|questions|bug ids)\b", hand_written
    )
    assert not counted, f"a count that adding an exercise would change, written by hand: {counted}"
    assert "[docs/catalogue.md](docs/catalogue.md)" in README
    doc = (ROOT / "docs" / "catalogue.md").read_text(encoding="utf-8")
    assert f"The catalogue has {len(catalog.bugs())} known bugs." in doc
    for exercise in catalog.exercises().values():
        assert f"## `{exercise.id}`: {exercise.title}\n\n{len(set(exercise.bug_ids))} known bug" in doc
        for bug_id in exercise.bug_ids:
            assert f"| `{bug_id}` | {' '.join(catalog.bugs()[bug_id].title.split())} |" in doc


def test_the_torch_command_is_the_kit_s():
    assert INSTALL["torch"] in README
    assert "attn-kit[torch]" not in README and "'.[torch]'" not in README


def test_the_stuck_line_and_the_mock_status_examples_follow_the_content():
    said = re.search(r"Stuck\? attn-kit hint mha-screen shows hint (\d+), “([^”]+)” \(([^)]+)\)\.", " ".join(README.split()))
    hint = MHA.hints[int(said.group(1)) - 1] if said else None
    assert hint and hint.title == said.group(2) and practice.STEPS[hint.step] == said.group(3)
    public = sum(c.public for c in grading.suite_for(MHA).checks)
    said = re.search(r"public checks (\d+)/(\d+)  failing: (\S+)", README)
    assert said and int(said.group(2)) == public and int(said.group(1)) == public - 1
    assert said.group(3) in {c.id for c in grading.suite_for(MHA).checks if c.public}


def test_the_bench_examples_state_each_exercise_s_expectation():
    """The measured exponents vary by machine (the README says whose run it was); what each line
    expects and why comes from the exercise's [bench] table."""
    said = re.findall(r"^(time|memory)\s+≈ T\^[\d.]+\s+[✓▲▼] expected T\^([\d.]+): (.+)$", README, re.M)
    assert len(said) >= 3
    expectations = {
        (kind, float(getattr(e.bench, kind).exponent), getattr(e.bench, kind).why)
        for e in catalog.exercises().values()
        for kind in ("time", "memory")
    }
    for kind, exponent, why in said:
        assert (kind, float(exponent), why.strip()) in expectations, (kind, exponent, why)
