"""Each autograder recipe, run as its platform runs it, on the layouts students hand in beyond one
correct or buggy file (those are in test_grade_autograder.py): the exercise file beside a helper
module it imports, a zip of a folder holding both, and an empty submission. Every run must leave a
valid results file in the platform's format: Gradescope's results.json, PrairieLearn's results.json
(with the network unavailable, as its external graders run), and for GitHub Actions the JUnit
report (validated against junit-10.xsd), the JSON report and the run page's summary."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
from junit_xsd import validate as validate_junit
from test_grade import GRADESCOPE, PRAIRIELEARN, validate
from test_grade_autograder import KIT, run
from test_grade_discover import HELPER, WITH_HELPER, make_zip

from helpers import attn_kit, strict_json

EXERCISE = "mha-screen"
SEED = "9"
FULL = 47

pytestmark = pytest.mark.slow  # each runs a platform's script end to end: a fresh kit grading


def helper_layout(dest: Path) -> None:
    """The exercise file, which fails to load unless its helper module is importable, beside it."""
    (dest / "mha_screen.py").write_text(WITH_HELPER)
    (dest / "attn_helpers.py").write_text(HELPER)


def zip_layout(dest: Path) -> None:
    """One zip of a folder holding the exercise file (another name) and its helper, and a note."""
    make_zip(dest / "hw3.zip", {"hw3/attention.py": WITH_HELPER, "hw3/attn_helpers.py": HELPER, "hw3/notes.txt": "hi"})


def empty_layout(dest: Path) -> None:
    """Nothing handed in."""


LAYOUTS = {"helper": helper_layout, "zip": zip_layout, "empty": empty_layout}
PICKED = {"helper": "mha_screen.py", "zip": "hw3.zip"}  # in what the outputs say was graded (full marks: with its helper)


@pytest.fixture(scope="module")
def recipes(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("recipes")
    for kind, target in (("gradescope", out / "autograder.zip"), ("prairielearn", out / "pl"), ("github", out / "gh")):
        proc = attn_kit("autograder", kind, "-e", EXERCISE, "-o", target, "--seed", SEED)
        assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_gradescope(recipes, tmp_path, layout):
    root = tmp_path / "autograder"  # Gradescope unzips the recipe into /autograder/source
    with zipfile.ZipFile(recipes / "autograder.zip") as z:
        z.extractall(root / "source")
    (root / "submission").mkdir()
    LAYOUTS[layout](root / "submission")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    graded = run(root / "run_autograder", {"AUTOGRADER_ROOT": str(root)})
    assert graded.returncode == 0, graded.stderr
    results = strict_json((root / "results" / "results.json").read_text())
    validate(results, GRADESCOPE)
    assert results["output_format"] == "text"
    if layout == "empty":
        assert results["score"] == 0 and "no .py file" in results["output"]
        return
    assert results["score"] == FULL == sum(t["max_score"] for t in results["tests"])
    assert PICKED[layout] in results["extra_data"]["picked"] and f"seed {SEED}" in results["output"]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a network namespace needs root here")
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_prairielearn_without_network(recipes, tmp_path, layout):
    root = tmp_path / "grade"  # /grade as PrairieLearn's external grader mounts it
    shutil.copytree(recipes / "pl" / "serverFilesCourse", root / "serverFilesCourse")
    (root / "student").mkdir(parents=True)
    (root / "tests").mkdir()  # the question's tests/ folder, which the recipe does not use
    LAYOUTS[layout](root / "student")
    env = dict(os.environ, ATTN_KIT=str(KIT), NO_COLOR="1", PL_GRADE_ROOT=str(root))
    graded = subprocess.run(
        ["unshare", "-n", "bash", str(root / "serverFilesCourse" / "attn_kit" / "run.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert graded.returncode == 0, graded.stderr
    results = strict_json((root / "results" / "results.json").read_text())
    validate(results, PRAIRIELEARN)
    if layout == "empty":
        assert results["gradable"] is False and results["score"] == 0
        return
    assert results["gradable"] is True and results["score"] == pytest.approx(1.0)
    assert PICKED[layout] in results["message"] and f"seed {SEED}" in results["output"]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_github_actions_grade_step(recipes, tmp_path, layout):
    repo = tmp_path / "repo"  # the student's clone of the template repository, as actions/checkout leaves it
    shutil.copytree(recipes / "gh", repo)
    LAYOUTS[layout](repo)
    summary = tmp_path / "summary.md"
    env = {"GITHUB_WORKSPACE": str(repo), "SOLUTION": "mha_screen.py", "GITHUB_STEP_SUMMARY": str(summary)}
    graded = run(repo / ".attn-kit" / "grade.sh", env, cwd=repo)
    assert graded.returncode == (1 if layout == "empty" else 0), graded.stderr + graded.stdout
    validate_junit(repo / "attn-kit-report.xml")  # raises with the first violation of junit-10.xsd
    (suite,) = ET.parse(repo / "attn-kit-report.xml").getroot().findall("testsuite")
    (sub,) = strict_json((repo / "attn-kit.json").read_text())["submissions"]
    page = summary.read_text()
    assert page.startswith(f"## attn-kit: {EXERCISE} (seed {SEED})")
    if layout == "empty":
        assert sub["state"] == "missing" and int(suite.get("errors")) == 1
        assert "missing" in page
        return
    assert sub["state"] == "graded" and sub["report"]["score"]["points"] == FULL and PICKED[layout] in sub["picked"] + (sub["path"] or "")
    assert int(suite.get("failures")) == int(suite.get("errors")) == 0
    assert f"{FULL} / {FULL} points" in page and ("Graded file: attention.py (in hw3.zip" in page) is (layout == "zip")


def test_the_recipes_say_what_students_submit_with_zips_and_folders(recipes):
    readme = zipfile.ZipFile(recipes / "autograder.zip").read("README.txt").decode()
    for text in (
        readme,
        (recipes / "pl" / "README.txt").read_text(),
        (recipes / "gh" / ".github" / "workflows" / "attn-kit.yml").read_text(),
    ):
        said = " ".join(text.replace("#", " ").split())
        assert "Students submit their solution as one Python file, mha_screen.py" in said
        assert "A zip of those files, or one folder holding them, is graded the same way." in said
    assert json.loads((recipes / "pl" / "info-snippet.json").read_text())["externalGradingOptions"]["enabled"] is True
