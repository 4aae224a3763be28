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
@pytest.mark.parametrize("solution, score", [(BUG, 26), (REFERENCE, 47)])
def test_gradescope_zip_grades_the_submission_into_results_json(tmp_path, solution, score):
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
    shutil.copy(solution, root / "submission" / "mha_screen.py")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    env = {"AUTOGRADER_ROOT": str(root)}
    assert run(root / "source" / "setup.sh", env).returncode == 0
    graded = run(root / "run_autograder", env)
    assert graded.returncode == 0, graded.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    validate(results, GRADESCOPE)
    assert results["score"] == score and results["extra_data"]["bugs"] == (["no-scaling"] if solution == BUG else [])
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
    files = autograder.gradescope_files(autograder.catalog.exercise("mha-masked-bias"), False, 5)
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in files["setup.sh"]
    pl = autograder.prairielearn_files(autograder.catalog.exercise("mha-masked-bias"), False, 5)
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in pl["install.sh"]


def test_every_recipe_fixes_the_seed_and_says_what_to_submit(tmp_path):
    for kind, out in (("gradescope", tmp_path / "g.zip"), ("prairielearn", tmp_path / "pl"), ("github", tmp_path / "gh")):
        proc = attn_kit("autograder", kind, "-e", EXERCISE, "-o", out)
        assert proc.returncode == 0, proc.stderr
        said = " ".join(proc.stdout.split())
        seed = said.split("fixed for this assignment: ")[1].split()[0]
        assert seed.isdigit(), said
        assert "Students submit their solution as one Python file, mha_screen.py" in said
        if kind == "gradescope":
            with zipfile.ZipFile(out) as z:
                scripts = z.read("run_autograder").decode() + z.read("README.txt").decode()
        else:
            scripts = "".join(p.read_text() for p in out.rglob("*") if p.is_file() and not p.name.endswith(".whl"))
        assert f"--seed {seed}" in scripts and f"fixed for this assignment ({seed})" in scripts
        assert "Students submit" in scripts


def _prairielearn(tmp_path: Path, student: Path | None) -> dict:
    """The PrairieLearn recipe's run.sh in /grade's layout, with no network (a network namespace of
    its own: external graders have none), with the kit the grader image would hold."""
    root = tmp_path / "grade"  # /grade as the external grader mounts it
    shutil.copytree(tmp_path / "pl" / "serverFilesCourse", root / "serverFilesCourse")
    (root / "student").mkdir(parents=True)
    if student is not None:
        shutil.copy(student, root / "student" / "mha_screen.py")
    env = dict(os.environ, ATTN_KIT=str(KIT), NO_COLOR="1", PL_GRADE_ROOT=str(root))
    graded = subprocess.run(
        ["unshare", "-n", "bash", str(root / "serverFilesCourse" / "attn_kit" / "run.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert graded.returncode == 0, graded.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    validate(results, PRAIRIELEARN)
    return results


@slow
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a network namespace needs root here")
@pytest.mark.parametrize("student, gradable, score", [(REFERENCE, True, 1.0), (BUG, True, 26 / 47), (None, False, 0)])
def test_prairielearn_grader_grades_without_network(tmp_path, student, gradable, score):
    proc = attn_kit("autograder", "prairielearn", "-e", EXERCISE, "-o", tmp_path / "pl", "--seed", "9")
    assert proc.returncode == 0, proc.stderr
    info = json.loads((tmp_path / "pl" / "info-snippet.json").read_text())["externalGradingOptions"]
    assert info["entrypoint"] == "/grade/serverFilesCourse/attn_kit/run.sh"
    run_sh = (tmp_path / "pl" / "serverFilesCourse" / "attn_kit" / "run.sh").read_text()
    assert "pip install" not in run_sh and "venv" not in run_sh  # nothing is installed per job
    containerfile = (tmp_path / "pl" / "Containerfile").read_text()
    assert containerfile.startswith("#") and "FROM prairielearn/grader-python" in containerfile
    assert f"COPY install.sh {autograder.wheel_name()}" in containerfile and (tmp_path / "pl" / autograder.wheel_name()).is_file()
    results = _prairielearn(tmp_path, student)
    assert results["gradable"] is gradable and results["score"] == pytest.approx(score)
    if gradable:
        assert "seed 9" in results["output"]


def test_gradescope_setup_gets_python_312_on_ubuntu_2204(tmp_path):
    """On an image whose python3 is 3.10 (Gradescope's default, Ubuntu 22.04), the install script
    adds the deadsnakes archive and takes its python3.12. Run with shims for python3, apt-get and
    add-apt-repository, and /etc/os-release as Ubuntu's, in a mount namespace of its own."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("a private /etc/os-release needs root here")
    shims, log = tmp_path / "bin", tmp_path / "calls.log"
    shims.mkdir()
    for tool in ("bash", "grep", "cat", "dirname", "env", "chmod"):
        (shims / tool).symlink_to(shutil.which(tool))
    scripts = {
        "python3": "#!/bin/bash\nexit 1\n",  # 3.10: fails every version check
        "add-apt-repository": f'#!/bin/bash\necho "add-apt-repository $*" >> {log}\n',
        "apt-get": f'#!/bin/bash\necho "apt-get $*" >> {log}\n'
        f'case "$*" in *python3.12*) printf "#!/bin/bash\\nexec {sys.executable} \\"\\$@\\"\\n" > {shims}/python3.12; '
        f"chmod +x {shims}/python3.12;; esac\n",
    }
    for name, text in scripts.items():
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    release = tmp_path / "os-release"
    release.write_text('NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\n')
    probe = tmp_path / "probe.sh"
    probe.write_text(autograder._find_python() + 'echo "PY=$PY"\n')
    done = subprocess.run(
        ["unshare", "-m", "bash", "-c", f"mount --bind {release} /etc/os-release && PATH={shims} bash {probe}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    calls = log.read_text()
    assert "add-apt-repository -y ppa:deadsnakes/ppa" in calls and "install -y python3.12 python3.12-venv" in calls
    assert done.stdout.strip().endswith(f"PY={shims}/python3.12")


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
        "actions/checkout@v6",
        "actions/setup-python@v6",
        "actions/upload-artifact@v7",
        "attn-kit-report.xml",
        "SOLUTION: mha_screen.py",
    ):
        assert step in workflow
    shutil.copy(solution, repo / "mha_screen.py")
    (repo / "notes.py").write_text("print('a helper the student committed')\n")
    assert run(repo / ".attn-kit" / "install.sh", {}).returncode == 0
    summary = tmp_path / "summary.md"
    env = {"GITHUB_WORKSPACE": str(repo), "SOLUTION": "mha_screen.py", "GITHUB_STEP_SUMMARY": str(summary)}
    graded = run(repo / ".attn-kit" / "grade.sh", env)
    assert graded.returncode == status, graded.stderr
    page = summary.read_text()  # what the run's page shows
    assert page.startswith("## attn-kit: mha-screen (seed 9)")
    assert ("47 / 47 points" if status == 0 else "26 / 47 points") in page
    assert "| check | status | points | bug |" in page and ("no-scaling" in page) is (status == 1)
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
