"""kit/ is the engine; exercises are data (prompts/exercises/<id>.toml) plus one suite module
(checks/<module>.py). So no kit module names an exercise: not in code, comments or docstrings.

The one exception is a command-line example in a command's --help text (`attn-kit start
mha-screen`): that is user documentation, and it needs a real id to be copyable.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A line of help text showing a command line: it starts with the command name, after indentation.
HELP_EXAMPLE = re.compile(r"^\s*attn-kit [a-z][a-z-]* ")


def exercise_names() -> set[str]:
    """Every exercise id and the name of its checks module, from the TOML files."""
    names = set()
    for path in (ROOT / "prompts" / "exercises").glob("*.toml"):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        names |= {path.stem, data["checks"]}
    return names


def offending_lines(text: str, names: set[str]) -> list[tuple[int, str, str]]:
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")(?![\w-])")
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        match = pattern.search(line)
        if match and not HELP_EXAMPLE.match(line):
            found.append((number, match.group(1), line.strip()))
    return found


def test_kit_names_no_exercise():
    names = exercise_names()
    assert "mha-screen" in names and "kv_cache" in names and len(names) > len(list((ROOT / "prompts" / "exercises").glob("*.toml")))
    problems = [
        f"kit/{path.name}:{number}: '{name}' in: {line}"
        for path in sorted((ROOT / "kit").rglob("*.py"))
        for number, name, line in offending_lines(path.read_text(encoding="utf-8"), names)
    ]
    assert not problems, "kit/ names an exercise (move it to the exercise's TOML or checks module):\n" + "\n".join(problems)


def test_the_scan_finds_an_id_in_code_and_allows_only_help_examples():
    names = {"mha-screen", "kv-cache", "kv_cache", "rope"}
    text = (
        'WORKLOADS = {"kv-cache": 1}\n'
        "from attn_kit.checks import kv_cache\n"
        "# the rope exercise\n"
        "    attn-kit start mha-screen solution.py\n"
        "a property of the mha-screens and kv-caches, kv_caches\n"
    )
    assert [(n, name) for n, name, _ in offending_lines(text, names)] == [(1, "kv-cache"), (2, "kv_cache"), (3, "rope")]
