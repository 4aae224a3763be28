"""`attn-kit dev split EXERCISE`: move an exercise's block of the shared catalogue files into its own.

Before an exercise had its own prompts/catalogue/<id>.toml, its entries were appended to
prompts/bugs.toml, families.toml and coverage.toml, one block per file that starts with a comment
line `# --- <id> ---` (more dashes or words may follow) and runs to the next `# --- ` line or the
end of the file. `split` moves those blocks into the exercise's own file: the [[bugs]] entries
(each must need only the exercise's id), the [[family]] entries (each of this exercise) and, from
coverage.toml's block, the exercise's features (the line `<id> = [...]`) and its bugs' needs (which
an own file does not state: they are the id). The catalogue as loaded must be the same after the
move, or nothing is written. This module reads and writes text and never grades anything.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from attn_kit.base import safefile
from attn_kit.base.errors import CatalogError, UsageError
from attn_kit.diagnosis import compose
from attn_kit.load import catalog

SHARED = ("bugs.toml", compose.FAMILIES, "coverage.toml")
NEXT_BLOCK = re.compile(r"^# --- ", re.MULTILINE)


@dataclass(frozen=True)
class Moved:
    exercise_id: str
    own_file: Path
    bugs: tuple[str, ...]
    families: int
    features: tuple[str, ...] | None


def block(text: str, exercise_id: str) -> tuple[str, str] | None:
    """(the text without the block, the block's body after its header line), or None."""
    header = re.search(rf"^# --- {re.escape(exercise_id)}(?![\w-])[^\n]*\n?", text, re.MULTILINE)
    if header is None:
        return None
    after = NEXT_BLOCK.search(text, header.end())
    end = after.start() if after else len(text)
    rest = text[: header.start()].rstrip("\n") + "\n" + ("\n" + text[end:] if after else "")
    return rest, text[header.end() : end]


def _parse(body: str, where: str) -> dict:
    try:
        return tomllib.loads(body)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{where}: the block does not read as TOML on its own ({exc}).") from None


def _snapshot(prompts: Path) -> tuple:
    """The catalogue as loaded, order aside (own files merge in name order)."""
    features, needs = catalog.load_coverage(prompts)
    families = compose.read_families(prompts / compose.FAMILIES) + catalog.own_families(prompts)
    return catalog.load_catalogue_bugs(prompts), features, needs, sorted(json.dumps(f, sort_keys=True) for f in families)


def _coverage_parts(body: str, exercise_id: str, bug_ids: list[str]) -> tuple[tuple[str, ...] | None, str]:
    """(the features the coverage block states, a problem or '')."""
    data = _parse(body, "prompts/coverage.toml")
    features = data.pop(exercise_id, None)
    for bug_id, need in data.items():
        if need != [exercise_id]:
            return None, (
                f"coverage.toml's block gives '{bug_id}' the needs {need}: a bug other exercises can make stays in "
                "prompts/bugs.toml; move its lines above the block first."
            )
        if bug_id not in bug_ids:
            return None, f"coverage.toml's block names '{bug_id}', which bugs.toml's block does not define."
    missing = sorted(set(bug_ids) - set(data))
    if missing:
        return None, f"bugs.toml's block defines '{missing[0]}', whose needs are not in coverage.toml's block."
    return (tuple(features) if features is not None else None), ""


def _own_text(path: Path, exercise_id: str, features: tuple[str, ...] | None, bodies: list[str]) -> str:
    if path.exists():
        text = path.read_text(encoding="utf-8")
        if features is not None:
            line = f"features = {json.dumps(list(features))}"
            text, found = re.subn(r"^features = [^\n]*$", line, text, count=1, flags=re.MULTILINE)
            if not found:
                text = text.replace("format = 1\n", f"format = 1\n{line}\n", 1)
    else:
        text = f"# {exercise_id}'s own part of the known-bug catalogue (kit/load/catalog.py, OwnCatalogue).\nformat = 1\n"
        if features is not None:
            text += f"features = {json.dumps(list(features))}\n"
    return text.rstrip("\n") + "\n" + "".join("\n" + body.strip("\n") + "\n" for body in bodies if body.strip())


def _read_blocks(prompts: Path, exercise_id: str) -> tuple[dict[str, tuple[str, str] | None], dict, tuple[str, ...] | None]:
    """({shared file: (its text without the block, the block) or None}, the families block, the
    features), after checking the blocks hold only what an own file can."""
    found = {name: block((prompts / name).read_text(encoding="utf-8"), exercise_id) for name in SHARED}
    if not any(found.values()):
        raise UsageError(f"no '# --- {exercise_id} ---' block in prompts/{', prompts/'.join(SHARED)}: nothing to move.")
    bodies = {name: (parts[1] if parts else "") for name, parts in found.items()}
    bugs = _parse(bodies["bugs.toml"], "prompts/bugs.toml")
    families = _parse(bodies[compose.FAMILIES], f"prompts/{compose.FAMILIES}")
    if set(bugs) - {"bugs"} or set(families) - {"family"}:
        raise UsageError("the bugs.toml block may hold only [[bugs]], the families.toml block only [[family]].")
    others = sorted({f.get("exercise", exercise_id) for f in families.get("family", [])} - {exercise_id})
    if others:
        raise UsageError(f"the families.toml block holds a family of '{others[0]}': move it above the block first.")
    features, problem = _coverage_parts(bodies["coverage.toml"], exercise_id, [str(b.get("id", "")) for b in bugs.get("bugs", [])])
    if problem:
        raise UsageError(problem)
    return found, families, features


def split(prompts: Path, exercise_id: str) -> Moved:
    """Move `exercise_id`'s blocks of the shared files into prompts/catalogue/<id>.toml.

    Raises UsageError, writing nothing, when no file has such a block, a block holds what an own
    file cannot (a shared bug, another exercise's family), or the loaded catalogue would change."""
    found, families, features = _read_blocks(prompts, exercise_id)
    before = _snapshot(prompts)
    if features is not None:  # at the end of coverage.toml the line `<id> = [...]` sat in [needs]
        before[2].pop(exercise_id, None)
        before[1][exercise_id] = features
    own = prompts / catalog.OWN_DIR / f"{exercise_id}.toml"
    bodies = [parts[1] for name, parts in found.items() if parts and name != "coverage.toml"]
    written = {prompts / name: parts[0] for name, parts in found.items() if parts}
    written[own] = _own_text(own, exercise_id, features, bodies)
    _write_or_restore(written, lambda: _snapshot(prompts) == before, f"moving {exercise_id}'s blocks would change the catalogue as loaded")
    moved = catalog.load_own_catalogue(own)
    return Moved(exercise_id, own, tuple(moved.bugs), len(families.get("family", [])), features)


def _write_or_restore(written: dict[Path, str], same: Callable[[], bool], why: str) -> None:
    """Write every file; when `same()` then fails (or raises CatalogError), put every one back."""
    old = {path: path.read_text(encoding="utf-8") if path.exists() else None for path in written}
    for path, text in written.items():
        path.parent.mkdir(exist_ok=True)
        safefile.write_text(path, text)
    try:
        kept = same()
    except CatalogError:
        kept = False
    if kept:
        return
    for path, before in old.items():
        if before is None:
            path.unlink()
        else:
            safefile.write_text(path, before)
    raise UsageError(f"{why}: nothing was moved.")
