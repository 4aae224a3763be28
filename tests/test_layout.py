"""The layout draws the architecture, and stays drawn: every package of kit/ says what it owns,
appears in the README's module map and in the import contracts, and every module sits in a layer
of its package's contract (pyproject.toml's [tool.importlinter]); only the sandbox imports the
runtime. lint-imports enforces the contracts; these tests keep them complete as modules are added.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "kit"
PACKAGES = sorted(p.name for p in KIT.iterdir() if (p / "__init__.py").is_file())
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def _layer_names(layer: str) -> set[str]:
    return {name.strip().strip("()") for name in layer.split("|")}


def test_every_package_has_a_docstring_saying_what_it_owns_and_must_not_import():
    for name in PACKAGES:
        doc = ast.get_docstring(ast.parse((KIT / name / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 15, f"kit/{name}/__init__.py: say what the package owns"
        assert re.search(r"\bimport", doc, re.I), f"kit/{name}/__init__.py: say what it may or must not import"


def test_no_module_is_left_flat_in_kit():
    flat = sorted(p.name for p in KIT.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert not flat, f"put these in the package of their stage: {flat}"


def test_the_readme_module_map_names_every_package_in_ten_lines_or_fewer():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text[text.index("### Layout") :]
    block = block[block.index("```") + 3 :]
    block = block[: block.index("```")].strip("\n")
    assert len(block.splitlines()) <= 10, block
    for name in PACKAGES:
        assert re.search(rf"(^|\s){name}/", block, re.M), f"the README's module map does not name {name}/"


def test_the_top_contract_places_every_package_in_one_layer():
    top = next(c for c in CONTRACTS if c["type"] == "layers" and "containers" not in c)
    placed = [n.removeprefix("attn_kit.") for layer in top["layers"] for n in _layer_names(layer)]
    assert sorted(placed) == sorted(PACKAGES + ["checks"]), placed
    assert all(":" not in layer for layer in top["layers"]), "use | between independent packages"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_of_a_package_sits_in_a_layer_of_its_contract(package):
    modules = {p.stem for p in (KIT / package).glob("*.py") if p.stem not in ("__init__", "__main__")}
    modules |= {p.name for p in (KIT / package).iterdir() if (p / "__init__.py").is_file()}  # subpackages (batch/formats)
    contracts = [c for c in CONTRACTS if c.get("containers") == [f"attn_kit.{package}"]]
    assert len(contracts) == 1, f"attn_kit.{package} needs one layers contract of its own"
    placed = set().union(*(_layer_names(layer) for layer in contracts[0]["layers"]))
    assert placed == modules, f"attn_kit.{package}: not in a layer {sorted(modules - placed)}, no such module {sorted(placed - modules)}"


def test_only_the_sandbox_imports_the_runtime():
    boundary = next(c for c in CONTRACTS if c.get("forbidden_modules") == ["attn_kit.runtime"])
    sources = {m.removeprefix("attn_kit.") for m in boundary["source_modules"]}
    assert sources == set(PACKAGES) - {"sandbox", "runtime"}
