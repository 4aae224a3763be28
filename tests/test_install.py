"""Installing as the README says: supported Pythons, torch-less test runs, `python -m attn_kit`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import TORCH_MISSING

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_states_the_supported_pythons_of_pyproject():
    required = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]
    version = re.fullmatch(r">=(3\.\d+)", required).group(1)
    assert f"Python {version} or newer" in README.split("## Practise")[0]


def test_readme_tells_how_to_install_a_cpu_only_torch():
    pytorch = README.split("#### PyTorch, for the `mha-masked-bias` exercise only", 1)[1].split("\n#", 1)[0]
    assert "pip install torch --index-url https://download.pytorch.org/whl/cpu" in pytorch
    assert 'pytest -m "not slow"' in README.split("## Contribute", 1)[1]


@pytest.mark.slow
def test_tests_needing_torch_skip_with_one_summary_line(tmp_path):
    """A `torch` that cannot be imported (shadowed on PYTHONPATH) makes the torch-only modules skip,
    and pytest's summary says so in one line, without -r options."""
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text('raise ModuleNotFoundError("No module named \'torch\'", name="torch")\n')
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(tmp_path)

    def run(*options):
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                *options,
                "tests/test_references.py",
                "tests/test_masked_bias.py",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    proc = run("-n", "0")  # one process: every skipped module is counted
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if TORCH_MISSING in line]
    assert lines == [f"2 skipped because {TORCH_MISSING}."], proc.stdout
    proc = run()  # the default, pytest-xdist's workers: still one line
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if TORCH_MISSING in line]
    assert len(lines) == 1 and lines[0].endswith(f"skipped because {TORCH_MISSING}."), proc.stdout


def test_python_dash_m_runs_the_program_named_attn_kit():
    proc = subprocess.run([sys.executable, "-m", "attn_kit", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(r"attn-kit, version \S+\n", proc.stdout)
