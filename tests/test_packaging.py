"""Packaging: one version source, the licence shipped, no requirement nothing uses."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import attn_kit

from helpers import attn_kit as run_attn_kit

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_version_has_one_source():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "attn_kit.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+([ab]\d+|rc\d+|\.dev\d+)?", attn_kit.__version__)
    assert importlib.metadata.version("attn-kit") == attn_kit.__version__
    proc = run_attn_kit("--version")
    assert proc.returncode == 0 and attn_kit.__version__ in proc.stdout


def test_licence_is_an_spdx_expression_and_ships():
    assert PYPROJECT["project"]["license"] == "MIT"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License") and "attn-kit contributors" in text
    assert not any(c.startswith("License ::") for c in PYPROJECT["project"]["classifiers"])


def test_no_unused_dev_or_build_requirements():
    dev = " ".join(PYPROJECT["project"]["optional-dependencies"]["dev"])
    tests = " ".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").glob("*.py"))
    for requirement in PYPROJECT["project"]["optional-dependencies"]["dev"]:
        module = re.split(r"[<>=!~ \[]", requirement)[0].replace("-", "_")
        if module.startswith("pytest_"):  # a pytest plugin works without an import
            continue
        used = f"import {module}" in tests or f"from {module}" in tests or f'importorskip("{module}"' in tests
        assert used, f"dev extra {requirement} is unused"
    assert "pytest-benchmark" not in dev
    assert PYPROJECT["build-system"]["requires"] == ["setuptools>=77"]


def test_every_kit_error_is_declared_in_errors_py():
    """errors.py holds every exception class of kit/ and checks/ (the user-facing KitError family and
    the internal signals); other modules import them from there."""
    import ast

    from attn_kit.base import errors

    declared = {name for name, value in vars(errors).items() if isinstance(value, type) and issubclass(value, BaseException)}
    assert {"StoreError", "SolutionLocked", "BenchError", "CheckFailed", "WireError"} <= declared
    declared |= {"Exception", "BaseException", "ValueError", "RuntimeError", "TypeError", "KeyError", "OSError"}
    for path in sorted((ROOT / "kit").rglob("*.py")) + sorted((ROOT / "checks").glob("*.py")):
        if path.name == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                assert not bases & declared, f"{path.name} declares {node.name}: move it to errors.py"
