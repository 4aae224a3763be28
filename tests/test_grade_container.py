"""The repository's Containerfile, run as docs/grading.md says (docker or podman) where an engine is
available; on machines without one (this repository's development machine) the run skips."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_sandbox_container import engine

from attn_kit.base.paths import solutions_dir

ROOT = Path(__file__).resolve().parent.parent


def run_command() -> str:
    text = (ROOT / "docs" / "grading.md").read_text(encoding="utf-8")
    block = re.search(r"## Container\n.*?```sh\n(.*?)```", text, re.S)
    assert block, "docs/grading.md has no container block"
    return block.group(1)


def test_containerfile_runs_the_grader_unprivileged_without_network():
    containerfile = (ROOT / "Containerfile").read_text(encoding="utf-8")
    assert re.search(r"^USER grader$", containerfile, re.M)
    assert "useradd" in containerfile and 'ENTRYPOINT ["attn-kit"]' in containerfile
    command = run_command()
    for flag in ("--network none", "--read-only", "--cap-drop ALL", "no-new-privileges", ":ro"):
        assert flag in command
    assert ".venv" in (ROOT / ".dockerignore").read_text(encoding="utf-8")


@pytest.mark.slow
def test_container_grades_a_folder(tmp_path):
    name = engine()
    if name is None:
        pytest.skip("no Docker or Podman engine is available on this machine")
    (tmp_path / "submissions").mkdir()
    (tmp_path / "out").mkdir(mode=0o777)
    (tmp_path / "out").chmod(0o777)
    shutil.copy(solutions_dir("mha-screen") / "reference_numpy.py", tmp_path / "submissions" / "a.py")
    shutil.copy(solutions_dir("mha-screen") / "bugs" / "no-scaling.py", tmp_path / "submissions" / "b.py")
    script = run_command().replace("podman ", f"{name} ").replace("-f Containerfile", f"-f {ROOT}/Containerfile")
    script = script.replace("$PWD", str(tmp_path))
    proc = subprocess.run(["sh", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 1, proc.stderr[-2000:]  # b.py fails some checks
    rows = list(csv.DictReader((tmp_path / "out" / "grades.csv").open(newline="")))
    assert [(r["submission"], r["points"]) for r in rows] == [("a", "47"), ("b", "26")]
