"""`attn-kit autograder`: the files Gradescope, PrairieLearn and GitHub Actions run to grade one
student's submission with `attn-kit grade`.

How the platform gets the kit: every recipe carries the kit's own wheel, packed from the files of
the kit that writes the recipe (the same version, checks and bug catalogue, no index entry
needed). Its dependencies (click, rich, NumPy, ...) come from PyPI when the platform builds its
image, and CPU-only torch from PyTorch's index when the exercise needs torch.

Every generated script reads its paths from the environment, with the platform's defaults:
AUTOGRADER_ROOT (/autograder), PL_GRADE_ROOT (/grade), GITHUB_WORKSPACE (.); ATTN_KIT names the
attn-kit executable to run, and ATTN_KIT_SKIP_INSTALL=1 skips installing (tests, prebuilt images).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import shlex
import zipfile
from pathlib import Path

from attn_kit import __version__
from attn_kit.base.errors import UsageError
from attn_kit.base.paths import package_dir
from attn_kit.load import catalog

TORCH_CPU = "pip install torch --index-url https://download.pytorch.org/whl/cpu"
KINDS = ("gradescope", "prairielearn", "github")


# --- the kit's wheel ---------------------------------------------------------------------------------


def _package_files() -> dict[str, Path]:
    """Archive name -> file, for the attn_kit package and the data packages nested in it."""
    files: dict[str, Path] = {}
    roots = [("attn_kit", Path(__file__).parent.parent)]
    roots += [(f"attn_kit/{name}", package_dir(name)) for name in ("checks", "solutions", "prompts")]
    for prefix, root in roots:
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if path.is_file() and "__pycache__" not in rel.parts and path.suffix not in (".pyc", ".pyo"):
                files.setdefault(f"{prefix}/{rel.as_posix()}", path)
    return files


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def wheel_name() -> str:
    return f"attn_kit-{__version__}-py3-none-any.whl"


ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # every entry's date: the zip's earliest, so the same kit packs the same bytes


def _entry(name: str, executable: bool = False) -> zipfile.ZipInfo:
    """A zip entry with the recipe's one date and a regular file's mode: 0755 for a script the
    platform runs, 0644 for the rest (zipfile's own default is the current time and 0600)."""
    entry = zipfile.ZipInfo(name, date_time=ZIP_DATE)
    entry.external_attr = (0o100755 if executable else 0o100644) << 16
    entry.compress_type = zipfile.ZIP_DEFLATED
    return entry


def build_wheel(folder: Path) -> Path:
    """Pack the running kit into a wheel in `folder`: its modules, checks, solutions and prompts,
    with the installed distribution's metadata (so pip installs the same dependencies)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / wheel_name()
    info = f"attn_kit-{__version__}.dist-info"
    try:
        metadata = str(importlib.metadata.metadata("attn-kit"))
    except importlib.metadata.PackageNotFoundError:
        metadata = f"Metadata-Version: 2.1\nName: attn-kit\nVersion: {__version__}\n"
    extra = {
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: attn-kit autograder\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": b"[console_scripts]\nattn-kit = attn_kit.cli:main\n",
    }
    record = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as whl:
        for name, path in sorted(_package_files().items()):
            data = path.read_bytes()
            whl.writestr(_entry(name), data)
            record.append(_record_line(name, data))
        for name, data in extra.items():
            whl.writestr(_entry(name), data)
            record.append(_record_line(name, data))
        record.append(f"{info}/RECORD,,")
        whl.writestr(_entry(f"{info}/RECORD"), "\n".join(record) + "\n")
    return target


# --- the scripts -------------------------------------------------------------------------------------


def _grade_flags(exercise: str, hidden_details: bool, seed: int, allow_unconfined: bool) -> str:
    flags = f"--exercise {shlex.quote(exercise)} --jobs 1 --seed {seed}"
    if hidden_details:
        flags += " --hidden-details"
    if allow_unconfined:
        flags += " --allow-unconfined"
    return flags


def _seed_comment(seed: int) -> str:
    return (
        f"# The hidden cases' seed is fixed for this assignment ({seed}): every submission, resubmission and\n"
        "# regrade meets the same cases. Write the recipe again with --seed N to choose another.\n"
    )


def _submit(exercise: catalog.Exercise) -> str:
    """What students hand in, in words every recipe uses."""
    name = exercise.id.replace("-", "_") + ".py"
    return (
        f"Students submit their solution as one Python file, {name} (or solution.py, or any one .py "
        f"file whose first line is `# attn-kit: {exercise.id}`); other .py files beside it are helper "
        "modules it may import. A zip of those files, or one folder holding them, is graded the same way."
    )


def _find_python() -> str:
    """Shell: PY becomes a Python 3.11+ on the image, else one installed for the kit (deadsnakes on
    Ubuntu, else uv's standalone build)."""
    return """PY=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    PY="$(command -v "$candidate")"; break
  fi
done
if [ -z "$PY" ] && command -v apt-get >/dev/null && grep -qi ubuntu /etc/os-release 2>/dev/null; then
  # Ubuntu 22.04 (Gradescope's default image) has Python 3.10: the deadsnakes archive has 3.12
  echo "no Python 3.11+ here: installing python3.12 from the deadsnakes archive"
  apt-get update && apt-get install -y software-properties-common
  add-apt-repository -y ppa:deadsnakes/ppa && apt-get update && apt-get install -y python3.12 python3.12-venv \
    && PY="$(command -v python3.12)" || PY=""
fi
if [ -z "$PY" ]; then
  echo "no Python 3.11+ here: installing one with uv (from PyPI) into /opt/attn-kit-python"
  python3 -m pip install --quiet uv
  UV_PYTHON_INSTALL_DIR=/opt/attn-kit-python python3 -m uv python install 3.12
  PY="$(UV_PYTHON_INSTALL_DIR=/opt/attn-kit-python python3 -m uv python find 3.12)"
fi
"""


def _install(needs_torch: bool, venv: str) -> str:
    """Shell: a venv at `venv` holding the kit's wheel (from $HERE) and CPU torch when needed."""
    torch = f'"{venv}/bin/python" -m {TORCH_CPU}\n' if needs_torch else ""
    return f"""{_find_python()}"$PY" -m venv "{venv}"
"{venv}/bin/python" -m pip install --upgrade pip
{torch}"{venv}/bin/python" -m pip install "$HERE/{wheel_name()}"
"{venv}/bin/attn-kit" --version
"""


def _fallback(kind: str) -> str:
    """Shell: a results file saying the kit could not run, when it wrote none."""
    why = "The autograder could not grade this submission; please tell your instructor."
    if kind == "gradescope":
        text = f'{{"score": 0, "output": "{why}", "output_format": "text", "tests": []}}'
    else:
        text = f'{{"gradable": false, "score": 0, "message": "{why}", "tests": []}}'
    return f"""if [ ! -s "$ROOT/results/results.json" ]; then
  printf '%s\\n' '{text}' > "$ROOT/results/results.json"
fi
"""


def installer(needs_torch: bool, venv: str, who: str) -> str:
    """The install script: a Python 3.11+ (the image's, or one installed for the kit), a venv at
    `venv`, the kit's wheel from beside the script; `who` runs it."""
    return f"""#!/usr/bin/env bash
# Run by {who} (written by attn-kit {__version__}). Works on images whose Python is
# older than 3.11 (Gradescope's default, Ubuntu 22.04 with 3.10: Python 3.12 comes from the deadsnakes
# archive) as on newer ones, and leaves the kit in {venv}. Needs the network; grading does not.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ "${{ATTN_KIT_SKIP_INSTALL:-}}" = 1 ]; then echo "ATTN_KIT_SKIP_INSTALL=1: not installing attn-kit"; exit 0; fi
{_install(needs_torch, venv)}"""


def gradescope_files(exercise: catalog.Exercise, hidden_details: bool, seed: int, allow_unconfined: bool = False) -> dict[str, str]:
    setup = installer(bool(exercise.needs == "torch"), "/opt/attn-kit", "Gradescope, once, as root, when it builds the autograder image")
    run = f"""#!/usr/bin/env bash
# Gradescope runs this for every submission: grade /autograder/submission/ into
# /autograder/results/results.json (written by attn-kit {__version__}, exercise {exercise.id}).
{_seed_comment(seed)}# {_submit(exercise)}
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
KIT="${{ATTN_KIT:-/opt/attn-kit/bin/attn-kit}}"
mkdir -p "$ROOT/results"
rm -f "$ROOT/results/results.json"
"$KIT" grade "$ROOT/submission" --single {_grade_flags(exercise.id, hidden_details, seed, allow_unconfined)} \\
  --out gradescope="$ROOT/results/results.json"
{_fallback("gradescope")}exit 0
"""
    readme = f"""attn-kit autograder for {exercise.id} (attn-kit {__version__}), for Gradescope

Upload this zip as the programming assignment's autograder. Any Ubuntu base image works
(Gradescope's default, Ubuntu 22.04 with Python 3.10, included: setup.sh installs Python 3.12 from
the deadsnakes archive when the image has no Python 3.11+); building needs the network, grading
does not.

{_submit(exercise)}

The hidden cases' seed is fixed for this assignment ({seed}), so a resubmission or a regrade of
the same file gets the same grade.
"""
    return {"setup.sh": setup, "run_autograder": run, "README.txt": readme}


PL_IMAGE = "attn-kit-grader"  # the image name the PrairieLearn recipe builds (the course pushes it)


def prairielearn_files(exercise: catalog.Exercise, hidden_details: bool, seed: int, allow_unconfined: bool = False) -> dict[str, str]:
    run = f"""#!/usr/bin/env bash
# PrairieLearn's external grader entrypoint (written by attn-kit {__version__}, exercise {exercise.id}):
# grades /grade/student/ into /grade/results/results.json with the attn-kit baked into the grader
# image (Containerfile beside the README). It installs nothing and needs no network.
{_seed_comment(seed)}# {_submit(exercise)}
set -uo pipefail
ROOT="${{PL_GRADE_ROOT:-/grade}}"
KIT="${{ATTN_KIT:-/opt/attn-kit/bin/attn-kit}}"
mkdir -p "$ROOT/results"
rm -f "$ROOT/results/results.json"
if ! command -v "$KIT" >/dev/null; then
  echo "attn-kit is not in this grader image ($KIT): build the image from the recipe's Containerfile" >&2
else
  "$KIT" grade "$ROOT/student" --single {_grade_flags(exercise.id, hidden_details, seed, allow_unconfined)} \\
    --out prairielearn="$ROOT/results/results.json"
fi
{_fallback("prairielearn")}exit 0
"""
    containerfile = f"""# The PrairieLearn grader image for {exercise.id}, with attn-kit {__version__} baked in: jobs run
# serverFilesCourse/attn_kit/run.sh, which installs nothing (external graders have no network).
FROM prairielearn/grader-python
USER root
COPY install.sh {wheel_name()} /opt/attn-kit-wheel/
RUN bash /opt/attn-kit-wheel/install.sh && rm -rf /opt/attn-kit-wheel
ENV ATTN_KIT=/opt/attn-kit/bin/attn-kit
"""
    info = f"""{{
  "externalGradingOptions": {{
    "enabled": true,
    "image": "YOUR_DOCKERHUB_USER/{PL_IMAGE}-{exercise.id}",
    "serverFilesCourse": ["attn_kit/"],
    "entrypoint": "/grade/serverFilesCourse/attn_kit/run.sh",
    "timeout": 180
  }}
}}
"""
    readme = f"""attn-kit external grader for {exercise.id} (attn-kit {__version__}), for PrairieLearn

1. Build the grader image from Containerfile (PrairieLearn's prairielearn/grader-python with the
   kit installed in /opt/attn-kit) and push it where PrairieLearn pulls images from:
     docker build -f Containerfile -t YOUR_DOCKERHUB_USER/{PL_IMAGE}-{exercise.id} .
     docker push YOUR_DOCKERHUB_USER/{PL_IMAGE}-{exercise.id}
   (Building needs the network; grading does not: run.sh installs nothing.)
2. Copy serverFilesCourse/attn_kit/ into your course's serverFilesCourse/.
3. Merge info-snippet.json into the question's info.json, with your image's name.

{_submit(exercise)} The file goes to /grade/student/.

The hidden cases' seed is fixed for this assignment ({seed}), so a resubmission or a regrade of
the same file gets the same grade. A file that cannot be loaded or found is `gradable: false`:
the student keeps the attempt.
"""
    return {
        "serverFilesCourse/attn_kit/run.sh": run,
        "Containerfile": containerfile,
        "install.sh": installer(bool(exercise.needs == "torch"), "/opt/attn-kit", "PrairieLearn's image build"),
        "info-snippet.json": info,
        "README.txt": readme,
    }


SUMMARY = """import json, sys
data = json.load(open(sys.argv[1], encoding="utf-8"))
lines = [f"## attn-kit: {data['exercise']} (seed {data['seed']})", ""]
for sub in data["submissions"]:
    report = sub.get("report")
    if report is None:
        lines += [f"**{sub['name']}**: {sub['state']}: {sub.get('error') or ''}".replace("\\n", " "), ""]
        continue
    score = report["score"]
    lines += [f"**{sub['name']}**: {score['points']} / {score['max_points']} points, {score['passed']} of {score['total']} checks passed"]
    if sub.get("picked"):
        lines += ["", "Graded file: " + sub["picked"].replace("\\n", " ")]
    lines.append("")
    lines += ["| check | status | points | bug |", "|---|---|---|---|"]
    for check in report["checks"]:
        cells = [check["title"], check["status"], f"{check['points']}/{check['max_points']}", check.get("bug") or ""]
        lines.append("| " + " | ".join(str(c).replace("|", "\\\\|").replace("\\n", " ") for c in cells) + " |")
    lines.append("")
print("\\n".join(lines))
"""


def github_files(exercise: catalog.Exercise, hidden_details: bool, seed: int, allow_unconfined: bool = False) -> dict[str, str]:
    solution = exercise.id.replace("-", "_") + ".py"
    workflow = f"""# Grades the student's file on every push with attn-kit {__version__}: the score and every check's
# result on the run's page (the job summary), the JUnit and JSON reports as an artifact.
{_seed_comment(seed)}# {_submit(exercise)}
name: attn-kit
on: [push, pull_request, workflow_dispatch]
jobs:
  grade:
    runs-on: ubuntu-latest
    timeout-minutes: 15
    permissions:
      contents: read
    steps:
      - uses: actions/checkout@v6
      - uses: actions/setup-python@v6
        with:
          python-version: "3.12"
      - name: Install attn-kit
        run: bash .attn-kit/install.sh
      - name: Grade
        run: bash .attn-kit/grade.sh
        env:
          SOLUTION: {solution}
      - name: Upload the reports
        if: always()
        uses: actions/upload-artifact@v7
        with:
          name: attn-kit-report
          path: |
            attn-kit-report.xml
            attn-kit.json
"""
    install = f"""#!/usr/bin/env bash
# Installs the attn-kit wheel committed beside this script (attn-kit {__version__}).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ "${{ATTN_KIT_SKIP_INSTALL:-}}" = 1 ]; then exit 0; fi
{("python -m " + TORCH_CPU + chr(10)) if exercise.needs == "torch" else ""}python -m pip install "$HERE/{wheel_name()}"
"""
    grade = f"""#!/usr/bin/env bash
# Grades $SOLUTION (default {solution}) into attn-kit-report.xml (JUnit) and attn-kit.json, and writes
# the score and every check to the run's page ($GITHUB_STEP_SUMMARY); the step fails unless every
# check passes. Without that file, the repository is graded as one submission, as students hand it
# in: the exercise file under another name or in one folder, or a zip (the outputs say what was picked).
{_seed_comment(seed)}set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${{GITHUB_WORKSPACE:-.}}"
KIT="${{ATTN_KIT:-attn-kit}}"
SOLUTION="${{SOLUTION:-{solution}}}"
cd "$ROOT"
if [ -f "$SOLUTION" ]; then
  TARGET=("$SOLUTION")
else
  echo "$SOLUTION is not in the repository: grading the repository as one submission"
  TARGET=(. --single)
fi
"$KIT" grade "${{TARGET[@]}}" {_grade_flags(exercise.id, hidden_details, seed, allow_unconfined)} \\
  --out junit=attn-kit-report.xml --out json=attn-kit.json
status=$?
if [ -n "${{GITHUB_STEP_SUMMARY:-}}" ] && [ -s attn-kit.json ]; then
  "$(dirname "$(command -v "$KIT")")/python" "$HERE/summary.py" attn-kit.json >> "$GITHUB_STEP_SUMMARY" \\
    || python3 "$HERE/summary.py" attn-kit.json >> "$GITHUB_STEP_SUMMARY"
fi
exit $status
"""
    return {
        ".github/workflows/attn-kit.yml": workflow,
        ".attn-kit/install.sh": install,
        ".attn-kit/grade.sh": grade,
        ".attn-kit/summary.py": SUMMARY,
    }


def write(
    kind: str, exercise_id: str, output: Path, hidden_details: bool = False, seed: int | None = None, allow_unconfined: bool = False
) -> tuple[list[Path], list[str]]:
    """Write the `kind` recipe for the exercise to `output` (a zip for gradescope, a folder
    otherwise); the files written and notes for the user. Without `seed`, one is drawn now and
    fixed for the assignment."""
    if kind not in KINDS:
        raise UsageError(f"no autograder recipe named {kind!r}; there are {', '.join(KINDS)}")
    exercise = catalog.exercise(exercise_id)
    output = Path(output)
    if kind == "gradescope" and output.suffix != ".zip":
        raise UsageError(f"-o {output}: Gradescope takes a .zip; name it e.g. autograder.zip.")
    chosen = seed is not None
    if seed is None:
        import random

        seed = random.SystemRandom().randrange(1, 100_000)
    notes = [
        f"The hidden cases' seed is fixed for this assignment: {seed}" + ("." if chosen else " (drawn now; pass --seed N to choose it)."),
        _submit(exercise),
    ]
    if exercise.needs == "torch":
        notes.append(f"{exercise.id} needs torch: the install step adds CPU-only torch ({TORCH_CPU}).")
    if allow_unconfined:
        notes.append("--allow-unconfined: submissions are graded even where their code cannot be confined (no Landlock).")
    builders = {"gradescope": gradescope_files, "prairielearn": prairielearn_files, "github": github_files}
    files = builders[kind](exercise, hidden_details, seed, allow_unconfined)
    if kind == "gradescope":
        _write_zip(output, files)
        notes.append("Upload the zip as the assignment's autograder (any Ubuntu base image; 22.04 gets Python 3.12 from deadsnakes).")
        return [output], notes
    written = _write_folder(output, files, output if kind == "prairielearn" else output / ".attn-kit")
    notes.append(
        "Build Containerfile into the grader image and push it; run.sh installs nothing (README.txt)."
        if kind == "prairielearn"
        else "Commit .github/ and .attn-kit/ to the assignment's template repository."
    )
    return written, notes


def _write_zip(output: Path, files: dict[str, str]) -> None:
    import tempfile

    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_wheel(Path(tmp)).read_bytes()
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in files.items():
            z.writestr(_entry(name, executable=name.endswith(".sh") or name == "run_autograder"), text)
        z.writestr(_entry(wheel_name()), wheel)


def _write_folder(output: Path, files: dict[str, str], wheel_home: Path) -> list[Path]:
    written = []
    for name, text in files.items():
        path = output / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if name.endswith(".sh"):
            path.chmod(0o755)
        written.append(path)
    written.append(build_wheel(wheel_home))
    return written
