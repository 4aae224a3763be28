"""`attn-kit autograder`: each platform's generated scripts, run against a scratch folder laid out as
the platform lays it out (paths from AUTOGRADER_ROOT, PL_GRADE_ROOT, GITHUB_WORKSPACE). The install
step is skipped (ATTN_KIT_SKIP_INSTALL=1: it would need the network); the grading step really runs,
with ATTN_KIT naming this environment's attn-kit."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
from test_grade import GRADESCOPE, PRAIRIELEARN, validate

from attn_kit import __version__
from attn_kit.base.paths import solutions_dir
from attn_kit.batch import autograder

from helpers import attn_kit

EXERCISE = "mha-screen"
BUG = solutions_dir(EXERCISE) / "bugs" / "no-scaling.py"
REFERENCE = solutions_dir(EXERCISE) / "reference_numpy.py"
KIT = Path(sys.executable).parent / "attn-kit"
slow = pytest.mark.slow  # each runs the platform's script end to end: a fresh kit grading a file


def run(script: Path, env: dict, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full = dict(os.environ, ATTN_KIT=str(KIT), ATTN_KIT_SKIP_INSTALL="1", NO_COLOR="1", **env)
    return subprocess.run(["bash", str(script)], env=full, cwd=cwd, capture_output=True, text=True, timeout=300)


@slow
def test_gradescope_zip_grades_the_submission_into_results_json(tmp_path):
    # a fixed seed: which of a known-bug file's randomised checks still pass depends on the seed
    proc = attn_kit("autograder", "gradescope", "-e", EXERCISE, "-o", tmp_path / "autograder.zip", "--seed", "9")
    assert proc.returncode == 0, proc.stderr
    root = tmp_path / "autograder"  # Gradescope unzips into /autograder/source
    with zipfile.ZipFile(tmp_path / "autograder.zip") as z:
        names = z.namelist()
        assert {"setup.sh", "run_autograder", autograder.wheel_name()} <= set(names)
        for name in ("setup.sh", "run_autograder"):
            assert stat.S_IMODE(z.getinfo(name).external_attr >> 16) & 0o111
        z.extractall(root / "source")
    assert "download.pytorch.org" not in (root / "source" / "setup.sh").read_text()  # no torch needed
    (root / "submission").mkdir()
    shutil.copy(BUG, root / "submission" / "mha_screen.py")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    env = {"AUTOGRADER_ROOT": str(root)}
    assert run(root / "source" / "setup.sh", env).returncode == 0
    graded = run(root / "run_autograder", env)
    assert graded.returncode == 0, graded.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    validate(results, GRADESCOPE)
    assert results["score"] == 26 and results["extra_data"]["bugs"] == ["no-scaling"]
    assert len(results["tests"]) == 26


@slow
def test_gradescope_results_when_the_file_is_missing(tmp_path):
    assert attn_kit("autograder", "gradescope", "-e", EXERCISE, "-o", tmp_path / "a.zip").returncode == 0
    root = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "a.zip") as z:
        z.extractall(root / "source")
    (root / "submission").mkdir()
    (root / "submission" / "README.md").write_text("forgot the file\n")
    graded = run(root / "source" / "run_autograder", {"AUTOGRADER_ROOT": str(root)})
    assert graded.returncode == 0
    results = json.loads((root / "results" / "results.json").read_text())
    validate(results, GRADESCOPE)
    assert results["score"] == 0 and "no .py file" in results["output"]


def test_torch_exercises_install_cpu_torch(tmp_path):
    files = autograder.gradescope_files(autograder.catalog.exercise("mha-masked-bias"), False, None)
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in files["setup.sh"]


@slow
def test_prairielearn_grader_writes_results_json(tmp_path):
    proc = attn_kit("autograder", "prairielearn", "-e", EXERCISE, "-o", tmp_path / "pl", "--seed", "9")
    assert proc.returncode == 0, proc.stderr
    info = json.loads((tmp_path / "pl" / "info-snippet.json").read_text())["externalGradingOptions"]
    assert info["entrypoint"] == "/grade/serverFilesCourse/attn_kit/run.sh"
    root = tmp_path / "grade"  # /grade as the external grader mounts it
    shutil.copytree(tmp_path / "pl" / "serverFilesCourse", root / "serverFilesCourse")
    (root / "student").mkdir(parents=True)
    shutil.copy(BUG, root / "student" / "mha_screen.py")
    graded = run(root / "serverFilesCourse" / "attn_kit" / "run.sh", {"PL_GRADE_ROOT": str(root)})
    assert graded.returncode == 0, graded.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    validate(results, PRAIRIELEARN)
    assert results["gradable"] and results["score"] == pytest.approx(26 / 47)
    assert "seed 9" in results["output"]


@slow
@pytest.mark.parametrize("solution, status", [(REFERENCE, 0), (BUG, 1)])
def test_github_workflow_grades_the_file_and_writes_junit(tmp_path, solution, status):
    proc = attn_kit("autograder", "github", "-e", EXERCISE, "-o", tmp_path / "repo", "--seed", "9")
    assert proc.returncode == 0, proc.stderr
    repo = tmp_path / "repo"
    workflow = (repo / ".github" / "workflows" / "attn-kit.yml").read_text()
    for step in (
        "bash .attn-kit/install.sh",
        "bash .attn-kit/grade.sh",
        "actions/upload-artifact",
        "path: attn-kit-report.xml",
        "SOLUTION: mha_screen.py",
    ):
        assert step in workflow
    shutil.copy(solution, repo / "mha_screen.py")
    (repo / "notes.py").write_text("print('a helper the student committed')\n")
    assert run(repo / ".attn-kit" / "install.sh", {}).returncode == 0
    graded = run(repo / ".attn-kit" / "grade.sh", {"GITHUB_WORKSPACE": str(repo), "SOLUTION": "mha_screen.py"})
    assert graded.returncode == status, graded.stderr
    suites = ET.parse(repo / "attn-kit-report.xml").getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == ["mha_screen"]
    assert int(suites[0].get("failures")) == (0 if status == 0 else 9)


@slow
def test_the_bundled_wheel_installs_and_holds_the_whole_kit(tmp_path):
    wheel = autograder.build_wheel(tmp_path / "dist")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        record = z.read(f"attn_kit-{__version__}.dist-info/RECORD").decode()
    for name in (
        "attn_kit/cli/app.py",
        "attn_kit/checks/mha_screen.py",
        "attn_kit/schemas/check.schema.json",
        "attn_kit/solutions/mha-screen/reference_numpy.py",
        "attn_kit/prompts/bugs.toml",
        f"attn_kit-{__version__}.dist-info/entry_points.txt",
    ):
        assert name in names, name
    assert all(n in record for n in names)
    assert not any("__pycache__" in n for n in names)
    target = tmp_path / "site"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stderr
    probe = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import attn_kit.base.paths as p; print(p.solutions_dir('mha-screen'))",
            str(target),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.stdout.strip().startswith(str(target)), probe.stderr


def test_gradescope_needs_a_zip_name(tmp_path):
    proc = attn_kit("autograder", "gradescope", "-e", EXERCISE, "-o", tmp_path / "out")
    assert proc.returncode == 2 and ".zip" in proc.stderr and "Traceback" not in proc.stderr
