"""The threat model's container recipe (docs/threat-model.md), run as written (docker or podman) where an engine is available.

There is no container engine on many machines (CI runners without Docker, this repository's own
development machine): the test then skips, saying so."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import CORPUS

ROOT = Path(__file__).resolve().parent.parent


def recipe() -> str:
    text = (ROOT / "docs" / "threat-model.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n# container recipe\n(.*?)```", text, re.S)
    assert block, "docs/threat-model.md has no container recipe block"
    return block.group(1)


def engine() -> str | None:
    for name in ("docker", "podman"):
        path = shutil.which(name)
        if path and subprocess.run([path, "info"], capture_output=True, timeout=60).returncode == 0:
            return name
    return None


def test_recipe_is_documented_with_the_isolation_it_promises():
    text = recipe()
    for flag in ("--network none", "--read-only", "--cap-drop ALL", "no-new-privileges", "USER grader"):
        assert flag in text


@pytest.mark.slow
def test_container_recipe_grades_a_file(tmp_path):
    name = engine()
    if name is None:
        pytest.skip("no Docker or Podman engine is available on this machine")
    shutil.copy(CORPUS / "hostile" / "honest_numpy.py", tmp_path / "solution.py")
    script = recipe().replace("docker ", f"{name} ").replace("-f Dockerfile.attn-kit", f"-f {tmp_path}/Dockerfile.attn-kit")
    script = script.replace("cat > Dockerfile.attn-kit", f"cat > {tmp_path}/Dockerfile.attn-kit")
    script = script.replace('"$PWD/solution.py', f'"{tmp_path}/solution.py')
    proc = subprocess.run(["sh", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 0 and data["passed"] is True, proc.stderr[-2000:]
