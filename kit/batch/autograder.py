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
import io
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


def _grade_flags(exercise: str, hidden_details: bool, seed: int | None) -> str:
    flags = f"--exercise {shlex.quote(exercise)} --jobs 1"
    if seed is not None:
        flags += f" --seed {seed}"
    if hidden_details:
        flags += " --hidden-details"
    return flags


def _install(needs_torch: bool, venv: str) -> str:
    torch = f'"{venv}/bin/python" -m {TORCH_CPU}\n' if needs_torch else ""
    return f"""if [ "${{ATTN_KIT_SKIP_INSTALL:-}}" = 1 ]; then
  echo "ATTN_KIT_SKIP_INSTALL=1: not installing attn-kit"
  exit 0
fi
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {{
  echo "attn-kit needs Python 3.11 or newer; pick a newer base image" >&2; exit 1; }}
python3 -m venv "{venv}"
{torch}"{venv}/bin/python" -m pip install "$HERE/{wheel_name()}"
"""


def gradescope_files(exercise: catalog.Exercise, hidden_details: bool, seed: int | None) -> dict[str, str]:
    setup = f"""#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder image (written by attn-kit {__version__}).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
if ! command -v python3 >/dev/null || ! python3 -m venv --help >/dev/null 2>&1; then
  if [ "${{ATTN_KIT_SKIP_INSTALL:-}}" != 1 ]; then apt-get update && apt-get install -y python3 python3-venv; fi
fi
{_install(bool(exercise.needs == "torch"), "/opt/attn-kit")}"""
    run = f"""#!/usr/bin/env bash
# Gradescope runs this for every submission: grade /autograder/submission/ into
# /autograder/results/results.json (written by attn-kit {__version__}, exercise {exercise.id}).
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
KIT="${{ATTN_KIT:-/opt/attn-kit/bin/attn-kit}}"
mkdir -p "$ROOT/results"
rm -f "$ROOT/results/results.json"
"$KIT" grade "$ROOT/submission" --single {_grade_flags(exercise.id, hidden_details, seed)} \\
  --out gradescope="$ROOT/results/results.json"
if [ ! -s "$ROOT/results/results.json" ]; then
  printf '%s\\n' '{{"score": 0, "output": "The autograder could not grade this submission; please tell your instructor.", "tests": []}}' \\
    > "$ROOT/results/results.json"
fi
exit 0
"""
    return {"setup.sh": setup, "run_autograder": run}


def prairielearn_files(exercise: catalog.Exercise, hidden_details: bool, seed: int | None) -> dict[str, str]:
    run = f"""#!/usr/bin/env bash
# PrairieLearn's external grader entrypoint (written by attn-kit {__version__}, exercise {exercise.id}):
# grades /grade/student/ into /grade/results/results.json.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${{PL_GRADE_ROOT:-/grade}}"
KIT="${{ATTN_KIT:-}}"
if [ -z "$KIT" ]; then
  if command -v attn-kit >/dev/null; then KIT=attn-kit
  else
    ( {_install(bool(exercise.needs == "torch"), "/tmp/attn-kit").replace(chr(10), chr(10) + "      ").rstrip()}
    ) >&2
    KIT=/tmp/attn-kit/bin/attn-kit
  fi
fi
mkdir -p "$ROOT/results"
rm -f "$ROOT/results/results.json"
"$KIT" grade "$ROOT/student" --single {_grade_flags(exercise.id, hidden_details, seed)} \\
  --out prairielearn="$ROOT/results/results.json"
if [ ! -s "$ROOT/results/results.json" ]; then
  printf '%s\\n' '{{"gradable": false, "score": 0, "message": "The grader could not run; please tell your instructor.", "tests": []}}' \\
    > "$ROOT/results/results.json"
fi
exit 0
"""
    info = """{
  "externalGradingOptions": {
    "enabled": true,
    "image": "prairielearn/grader-python",
    "serverFilesCourse": ["attn_kit/"],
    "entrypoint": "/grade/serverFilesCourse/attn_kit/run.sh",
    "timeout": 180
  }
}
"""
    readme = f"""attn-kit external grader for {exercise.id} (attn-kit {__version__})

Copy attn_kit/ into your course's serverFilesCourse/ and merge info-snippet.json into the
question's info.json. The student's file is submitted to /grade/student/ (call it
{exercise.id.replace("-", "_")}.py, or solution.py). run.sh installs the kit's wheel the first time
(networking needed, or use an image with attn-kit installed: see docs/grading.md).
"""
    return {"serverFilesCourse/attn_kit/run.sh": run, "info-snippet.json": info, "README.txt": readme}


def github_files(exercise: catalog.Exercise, hidden_details: bool, seed: int | None) -> dict[str, str]:
    solution = exercise.id.replace("-", "_") + ".py"
    workflow = f"""# Grades the student's file on every push with attn-kit {__version__} and uploads the JUnit report.
name: attn-kit
on: [push, pull_request, workflow_dispatch]
jobs:
  grade:
    runs-on: ubuntu-latest
    timeout-minutes: 15
    permissions:
      contents: read
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"
      - name: Install attn-kit
        run: bash .attn-kit/install.sh
      - name: Grade
        run: bash .attn-kit/grade.sh
        env:
          SOLUTION: {solution}
      - name: Upload the JUnit report
        if: always()
        uses: actions/upload-artifact@v4
        with:
          name: attn-kit-report
          path: attn-kit-report.xml
"""
    install = f"""#!/usr/bin/env bash
# Installs the attn-kit wheel committed beside this script (attn-kit {__version__}).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ "${{ATTN_KIT_SKIP_INSTALL:-}}" = 1 ]; then exit 0; fi
{("python -m " + TORCH_CPU + chr(10)) if exercise.needs == "torch" else ""}python -m pip install "$HERE/{wheel_name()}"
"""
    grade = f"""#!/usr/bin/env bash
# Grades $SOLUTION (default {solution}) into attn-kit-report.xml (JUnit) and attn-kit.json; the
# step fails unless every check passes.
set -uo pipefail
ROOT="${{GITHUB_WORKSPACE:-.}}"
KIT="${{ATTN_KIT:-attn-kit}}"
cd "$ROOT"
"$KIT" grade "${{SOLUTION:-{solution}}}" {_grade_flags(exercise.id, hidden_details, seed)} \\
  --out junit=attn-kit-report.xml --out json=attn-kit.json
"""
    return {".github/workflows/attn-kit.yml": workflow, ".attn-kit/install.sh": install, ".attn-kit/grade.sh": grade}


def write(kind: str, exercise_id: str, output: Path, hidden_details: bool = False, seed: int | None = None) -> tuple[list[Path], list[str]]:
    """Write the `kind` recipe for the exercise to `output` (a zip for gradescope, a folder
    otherwise); the files written and notes for the user."""
    if kind not in KINDS:
        raise UsageError(f"no autograder recipe named {kind!r}; there are {', '.join(KINDS)}")
    exercise = catalog.exercise(exercise_id)
    output = Path(output)
    notes = []
    if exercise.needs == "torch":
        notes.append(f"{exercise.id} needs torch: the install step adds CPU-only torch ({TORCH_CPU}).")
    if kind == "gradescope":
        if output.suffix != ".zip":
            raise UsageError(f"-o {output}: Gradescope takes a .zip; name it e.g. autograder.zip.")
        output.parent.mkdir(parents=True, exist_ok=True)
        files = gradescope_files(exercise, hidden_details, seed)
        with io.BytesIO() as wheel_bytes:
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                wheel = build_wheel(Path(tmp))
                wheel_bytes.write(wheel.read_bytes())
            with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as z:
                for name, text in files.items():
                    z.writestr(_entry(name, executable=name.endswith(".sh") or name == "run_autograder"), text)
                z.writestr(_entry(wheel_name()), wheel_bytes.getvalue())
        notes.append("Upload the zip as the assignment's autograder; pick an Ubuntu 24.04 base image (Python 3.12).")
        return [output], notes
    files = (prairielearn_files if kind == "prairielearn" else github_files)(exercise, hidden_details, seed)
    written = []
    for name, text in files.items():
        path = output / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if name.endswith(".sh"):
            path.chmod(0o755)
        written.append(path)
    wheel_home = output / ("serverFilesCourse/attn_kit" if kind == "prairielearn" else ".attn-kit")
    written.append(build_wheel(wheel_home))
    if kind == "github":
        notes.append("Commit .github/ and .attn-kit/ to the assignment's template repository.")
    return written, notes
