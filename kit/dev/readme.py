"""The README's tables of exercises and properties, and docs/catalogue.md (every known bug of every
exercise with its one-line title), written from the content (`attn-kit dev update`).

A table that lists exercises is a copy of data: prompts/exercises/<id>.toml says what each
exercise builds (`builds`), what the kit proves of a follow-up (`proves`) and which checks state
each headline property (`[properties]`, rows from prompts/properties.toml); the signatures come
from its [[functions]]. Each generated table sits in README.md between two marker comments,

    <!-- dev update: NAME -->
    ...
    <!-- end -->

which `attn-kit dev update` rewrites and `attn-kit dev check` compares with what it would write
(a stale table is reported, as rustlings does). This module is pure text: no file is read here.
"""

from __future__ import annotations

import re
import textwrap
from typing import Iterable

from attn_kit.load.catalog import Exercise, Property, PropertyCell

REGION = re.compile(r"^<!-- dev update: (?P<name>[a-z-]+) -->\n(?P<body>.*?)^<!-- end -->$", re.MULTILINE | re.DOTALL)
COLUMNS_PER_TABLE = 6  # exercises per properties table: wider tables wrap on a laptop screen
# The optional arguments every multi-head exercise shares, elided in the follow-ups table.
SHARED_TAIL = ", mask=None, return_weights=False)"
WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = [_row(header), "|" + "---|" * len(header)] + [_row(r) for r in rows]
    return "\n".join(lines) + "\n"


def exercises_table(exercises: list[Exercise]) -> str:
    """Every exercise in `order`, with what it builds."""
    rows = [[f"`{e.id}`", e.builds] for e in exercises]
    return f"{len(exercises)} exercises, from the classic screen to what follows it:\n\n" + _table(["id", "what you build"], rows)


def shown_signature(signature: str) -> str:
    """A signature as the follow-ups table shows it: the shared mask/return_weights tail as `...`."""
    if signature.endswith(SHARED_TAIL):
        return signature[: -len(SHARED_TAIL)] + ", ...)"
    return signature


def followups_table(exercises: list[Exercise]) -> str:
    """The exercises that say what the kit proves of them: their functions and that claim."""
    rows = [[f"`{e.id}`", ", ".join(f"`{shown_signature(f.signature)}`" for f in e.functions), e.proves] for e in exercises if e.proves]
    return _table(["exercise", "you write", "what the kit proves"], rows)


def property_cell(cell: PropertyCell | None) -> str:
    if cell is None:
        return ""
    if cell.na:
        return f"n/a: {cell.na}"
    said = ", ".join(f"`{c}`" for c in cell.checks)
    return f"{said} ({cell.note})" if cell.note else said


def properties_tables(exercises: list[Exercise], properties: tuple[Property, ...]) -> str:
    """A row per property, a column per exercise, COLUMNS_PER_TABLE columns per table."""
    parts = []
    for start in range(0, len(exercises), COLUMNS_PER_TABLE):
        chunk = exercises[start : start + COLUMNS_PER_TABLE]
        if start:
            later = "The last exercise:" if len(chunk) == 1 else f"The {_words(len(chunk))} later exercises:"
            parts.append(f"{later}\n")
        cells = [{c.property: c for c in e.properties} for e in chunk]
        rows = [[p.title] + [property_cell(mine.get(p.id)) for mine in cells] for p in properties]
        parts.append(_table(["property"] + [e.id for e in chunk], rows))
    return "\n".join(parts)


def _words(n: int) -> str:
    return WORDS[n] if n < len(WORDS) else str(n)


def regions(exercises: Iterable[Exercise], properties: tuple[Property, ...]) -> dict[str, str]:
    """{region name: its text} for every generated region, exercises taken in `order`."""
    ordered = sorted(exercises, key=lambda e: (e.order, e.id))
    return {
        "exercises": exercises_table(ordered),
        "follow-ups": followups_table(ordered),
        "properties": properties_tables(ordered, properties),
    }


def _body(text: str) -> str:
    return f"\n{text}\n"  # a blank line each side keeps the markers out of the tables


def stale(readme: str, generated: dict[str, str]) -> list[str]:
    """What differs: a line per region missing from the README or not as `dev update` writes it."""
    found = {m["name"]: m["body"] for m in REGION.finditer(readme)}
    problems = []
    for name, text in generated.items():
        if name not in found:
            problems.append(f"no '<!-- dev update: {name} -->' ... '<!-- end -->' region")
        elif found[name] != _body(text):
            problems.append(f"the '{name}' table differs")
    problems += [f"a region '{name}' that dev update does not write" for name in sorted(set(found) - set(generated))]
    return problems


def update(readme: str, generated: dict[str, str]) -> str:
    """The README with every marked region rewritten (regions it lacks are left to stale() to name)."""

    def rewrite(match: re.Match) -> str:
        name = match["name"]
        if name not in generated:
            return match.group(0)
        return f"<!-- dev update: {name} -->\n{_body(generated[name])}<!-- end -->"

    return REGION.sub(rewrite, readme)


# --- docs/catalogue.md: every known bug of every exercise, with its one-line description ----------

CATALOGUE_DOC = "docs/catalogue.md"  # beside README.md in a checkout; written whole by `dev update`


def catalogue_doc(exercises: list[Exercise], bugs: dict[str, list[tuple[str, str]]], total: int) -> str:
    """The users' list of known bugs: a section per exercise in `order`, a row per bug it has a file
    for ({exercise id: [(bug id, title)]}, in catalogue order), `total` the catalogue's size."""
    intro = (
        f"The catalogue has {_count(total, 'known bug')}. Each is a file `solutions/<exercise>/bugs/<id>.py`, "
        "the exercise's reference with one marked change, and `attn-kit check` names the one your code's "
        'behaviour matches (README, "Diagnosis: which classic bug is this?"). A bug several exercises '
        "can make is listed under each; `attn-kit check` shows its symptom, fix and test idea in the "
        "exercise's own terms."
    )
    parts = [
        "# Known bugs, by exercise\n",
        "<!-- Written by `attn-kit dev update` from prompts/bugs.toml, prompts/catalogue/*.toml and\n"
        "solutions/<exercise>/bugs/; `attn-kit dev check` fails when it is out of date. Do not edit. -->\n",
        textwrap.fill(intro, width=100, break_on_hyphens=False, break_long_words=False) + "\n",
    ]
    for e in exercises:
        rows = [[f"`{bug_id}`", title] for bug_id, title in bugs.get(e.id, [])]
        parts.append(f"## `{e.id}`: {e.title}\n\n{_count(len(rows), 'known bug')}.\n\n" + _table(["id", "what goes wrong"], rows))
    return "\n".join(parts)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
