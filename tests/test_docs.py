"""The README's quick start is what CI runs, and the README knows every exercise and command."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from attn_kit.cli import cli
from attn_kit.dev import check
from attn_kit.load import catalog

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def quick_start_lines() -> list[str]:
    block = README.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.strip().splitlines() if line.strip()]


def test_quick_start_is_two_commands_that_ci_runs_verbatim():
    lines = quick_start_lines()
    assert len(lines) == 2
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert lines[0].startswith("python3 -m venv .venv && . .venv/bin/activate && pip install . && attn-kit check ")
    for line in lines:
        assert line in ci, f"CI must run the README's quick-start line as written: {line}"
        assert "torch" not in line, "the quick start downloads no torch"
    assert lines[1].startswith("pip install '.[dev]' && pytest")
    assert ci.index("torch==2.13.0") < ci.index(lines[0]), "CI pins the CPU torch before the quick start"
    for step in ("attn-kit dev check", "ruff check .", "mypy", "lint-imports"):
        assert step in ci.split(lines[1], 1)[1], f"CI runs `{step}` after the tests"


def test_readme_lists_every_exercise_and_command():
    content = check.Content.installed()
    content.readme = ROOT / "README.md"  # its tables of exercises: devcheck.readme_tables_are_up_to_date
    result = check.run(content, [check.readme_tables_are_up_to_date])
    assert result.ok and not result.notes, "\n".join(map(str, result.problems))
    for name in cli.list_commands(click.Context(cli)):  # the lazily loaded commands too
        assert f"attn-kit {name}" in README, f"README does not mention `attn-kit {name}`"


@pytest.mark.slow
def test_readme_memory_example_is_what_the_check_says():
    """The README's tiled-softmax memory failure quotes the check: same sizes, bound and matrix
    sizes (the measured peak varies with the machine's allocator and is not compared)."""
    from attn_kit.base.paths import solutions_dir

    from helpers import graded

    report = graded(solutions_dir("tiled-softmax") / "bugs" / "materialises-scores.py", 1)
    result = next(r for r in report.results if r.id == "memory-stays-within-bound")
    example = README.split("A tiled solution whose values are right", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    flat_example, flat_message = " ".join(example.split()), " ".join(result.message.split())
    for fact in (
        "at T = 1024, S = 4096, block_size=64, dv=32",
        "64·T·(block_size + dv) = 6.00 MiB",
        "8·T·S = 32 MiB in float64 and 8 MiB in float16",
    ):
        assert fact in flat_example and fact in flat_message, fact


def test_practising_comes_first_and_line_2_is_for_contributors():
    """The first screenful (about 50 lines) holds the quick start and the practice commands; the
    quick start says line 2 is for contributors and runs in the same activated shell."""
    first_screen = "\n".join(README.splitlines()[:50])
    assert "## Practise" in first_screen
    for command in ("start", "check", "hint", "--watch", "mock", "discuss", "bench"):
        assert re.search(rf"^attn-kit {re.escape(command)}|^attn-kit check \S+ {re.escape(command)}", first_screen, re.M), command
    quick = README.split("## Quick start", 1)[1].split("## Practise", 1)[0]
    assert "for contributors" in quick and "same activated shell" in quick
    order = [README.index(h) for h in ("## Quick start", "## Practise", "## JSON output", "## Contribute")]
    assert order == sorted(order)


def test_skip_reasons_speak_to_users():
    """No test skips with a reason about the project's own files (shared/SPEC.md) that a user's clone
    does not have."""
    for path in (ROOT / "tests").glob("test_*.py"):
        text = path.read_text(encoding="utf-8")
        for reason in re.findall(r"(?:skip\(|reason=)\s*f?(?:\"([^\"]*)\"|'([^']*)')", text):
            reason = "".join(reason)
            assert "SPEC" not in reason and "shared/" not in reason, f"{path.name}: {reason}"
        # torch's absence is one reason, counted on the summary line (conftest.need_torch, TORCH_MISSING)
        bare = re.findall(r"importorskip\(\s*[\"']torch[\"']\s*\)", text)
        assert not bare, f"{path.name}: skip through need_torch() so the summary line counts it"


def test_what_attn_kit_solution_shows_names_no_developers_file():
    """The references and bug files ship with the kit and `attn-kit solution` prints them: they
    speak of the statement, never of the developers' spec."""
    from attn_kit.base.paths import bug_files, reference_files

    for exercise in catalog.exercises():
        for path in [*reference_files(exercise), *bug_files(exercise)]:
            text = path.read_text(encoding="utf-8")
            assert "SPEC" not in text and "shared/" not in text, path


# Everything a user's clone or install holds besides the tests: the package (kit, checks,
# solutions, prompts), its docs and the benchmarks' results. None of it may send a reader to the
# developers' contract (shared/SPEC.md), which users do not have: what they need of it is here.
SHIPPED = ("README.md", "pyproject.toml", "Containerfile", "LICENSE", "docs", "kit", "checks", "solutions", "prompts", "benchmarks")
DEVELOPERS_CONTRACT = re.compile(r"\bSPEC\b|SPEC\.md|\bshared/|\.\./shared")


def shipped_files() -> list[Path]:
    files = []
    for name in SHIPPED:
        path = ROOT / name
        files += [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return [p for p in files if p.suffix not in (".pyc", ".png", ".gif", ".cast")]


def contract_citations(paths) -> list[str]:
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        found += [f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in DEVELOPERS_CONTRACT.finditer(text)]
    return found


def test_no_shipped_file_cites_the_developers_contract():
    files = shipped_files()
    assert any(p.name == "bugs.toml" for p in files) and any(p.suffix == ".md" for p in files)  # it looks where it should
    assert contract_citations(files) == []


def test_the_citation_rule_can_fail(tmp_path):
    cited = tmp_path / "x.py"
    cited.write_text("# the bound (SPEC.md)\nok = 1\nsee ../shared/notes\n", encoding="utf-8")
    found = contract_citations([cited])
    assert [line.split(": ", 1)[1] for line in found] == ["SPEC", "../shared"], found
