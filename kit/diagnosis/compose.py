"""Composed bug models: several known bugs applied to one reference at once.

Each bug file under solutions/<exercise>/bugs/ is the reference with one marked change, so the
change can be read back as a set of hunks (line ranges of the reference replaced by other lines).
Bugs whose hunks touch different lines compose: applying the hunks of two or three bug files to
the reference gives a model of a solution with all of those bugs. The bug files stay the only
source of truth; a bug file added later composes with the others without any registration.

The module docstring of a bug file (which describes the bug) is not part of its change.
"""

from __future__ import annotations

import ast
import difflib
import functools
import io
import itertools
import re
import tokenize
import tomllib
import types
from dataclasses import dataclass
from pathlib import Path

from attn_kit.base.errors import FamilyError
from attn_kit.base.paths import bug_files, bug_id_of, package_dir, reference_files
from attn_kit.load import catalog
from attn_kit.sandbox import zygote as sandbox_zygote

SOURCE_ATTR = "__attn_kit_source__"  # a model module's own source text (diagnose's float32 twin reads it)


@dataclass(frozen=True)
class Hunk:
    """Lines start:end of the reference (0-based, end exclusive) become `lines`."""

    start: int
    end: int
    lines: tuple[str, ...]

    def conflicts(self, other: Hunk) -> bool:
        if self.start == other.start:
            return True
        lo, hi = (self, other) if self.start < other.start else (other, self)
        return hi.start < lo.end


@dataclass(frozen=True)
class BugForm:
    """One bug file read as hunks against the reference it was made from."""

    bug: str
    path: Path
    base: Path
    hunks: tuple[Hunk, ...]
    variant: str = ""  # a family's form: "parameter: choice" (prompts/families.toml); "" for the file

    @property
    def name(self) -> str:
        return self.path.stem + (f"~{self.variant}" if self.variant else "")

    def __hash__(self) -> int:
        # a form is a cache key of the search many times a second: hashed by what names it (equal
        # forms share these), not through every line of every hunk
        return hash((self.bug, str(self.path), self.variant))


@functools.lru_cache(maxsize=512)
def docstring_span(text: str) -> tuple[int, int]:
    """(first, end) 0-based line indexes of the module docstring (lines first..end-1), or (0, 0)
    when there is none or its first statement does not parse. Only that statement is parsed (every
    bug form of an exercise is read for it, in each process that diagnoses). Cached per text: a
    reference is read against every bug file of its exercise (here and in `attn-kit dev check`)."""
    try:
        tree = ast.parse(_first_statement(text))
    except SyntaxError:  # a compound first statement, cut at its first line: no docstring either
        return (0, 0)
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return (first.lineno - 1, first.end_lineno or first.lineno)
    return (0, 0)


def _first_statement(text: str) -> str:
    """The text up to the end of its first logical line (comments and blank lines before it
    included); all of it when the tokenizer cannot tell."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.NEWLINE:
                return "".join(text.splitlines(keepends=True)[: token.end[0]])
    except (tokenize.TokenError, SyntaxError):
        pass
    return text


def _hunks(base: list[str], bug: list[str]) -> list[Hunk]:
    b0, b1 = docstring_span("".join(base))
    g0, g1 = docstring_span("".join(bug))
    # the bug's docstring is replaced by the reference's, so the diff sees only the code change
    aligned = bug[:g0] + base[b0:b1] + bug[g1:]
    ops = difflib.SequenceMatcher(None, base, aligned, autojunk=False).get_opcodes()
    return [Hunk(i1, i2, tuple(aligned[j1:j2])) for tag, i1, i2, j1, j2 in ops if tag != "equal"]


@functools.cache
def read_source(path: Path) -> tuple[str, ...]:
    return tuple(path.read_text(encoding="utf-8").splitlines(keepends=True))


@functools.cache
def forms(exercise_id: str) -> tuple[BugForm, ...]:
    """Every bug file of the exercise as hunks against the reference it differs least from."""
    refs = reference_files(exercise_id)
    found = []
    for path in bug_files(exercise_id):
        bug = list(read_source(path))
        best = None
        for ref in refs:
            hunks = _hunks(list(read_source(ref)), bug)
            size = sum(h.end - h.start + len(h.lines) for h in hunks)
            if best is None or size < best[0]:
                best = (size, ref, hunks)
        if best is not None:
            found.append(BugForm(bug_id_of(path), path, best[1], tuple(best[2])))
    return tuple(found)


def composable(group: tuple[BugForm, ...]) -> bool:
    """Distinct bugs made from the same reference whose hunks touch different lines."""
    if len({f.bug for f in group}) != len(group) or len({f.base for f in group}) != 1:
        return False
    hunks = [h for f in group for h in f.hunks]
    return bool(hunks) and not any(a.conflicts(b) for a, b in itertools.combinations(hunks, 2))


def compose_source(group: tuple[BugForm, ...]) -> str:
    """The reference with every hunk of every form in `group` applied (they must be composable)."""
    lines = list(read_source(group[0].base))
    for hunk in sorted((h for f in group for h in f.hunks), key=lambda h: h.start, reverse=True):
        lines[hunk.start : hunk.end] = hunk.lines
    return "".join(lines)


@functools.cache
def load_composed(group: tuple[BugForm, ...]) -> types.ModuleType:
    """A module built from the composed source (cached per group). It computes expected values:
    from now on a new zygote is a fresh interpreter, not a fork of this process."""
    sandbox_zygote.expected_values_loaded()
    name = "attn_kit_composed_" + "__".join(re.sub(r"\W", "_", f.name) for f in group)
    module = types.ModuleType(name)
    module.__file__ = f"<{' + '.join(f.name for f in group)} composed on {group[0].base.name}>"
    source = compose_source(group)
    code = compile(source, module.__file__, "exec")
    exec(code, module.__dict__)  # noqa: S102 - the kit's own bundled solution files, never the candidate's
    module.__dict__[SOURCE_ATTR] = source
    return module


@functools.lru_cache(maxsize=64)
def _tree(source: str) -> ast.Module:
    """The parsed source, shared by _functions, _uses, _rest_nodes and _bodies (read-only)."""
    return ast.parse(source)


@functools.lru_cache(maxsize=256)
def _functions(source: str) -> dict[str, str]:
    """Top-level functions: name -> source text, the function's whole lines, decorators included
    (a trailing comment on its last line counts as part of it, which can only widen `affected`).
    Cached per source: the reference is compared with every bug file of its exercise; callers
    must not change the result."""
    lines = source.splitlines(keepends=True)
    out = {}
    for node in _tree(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out[node.name] = "".join(lines[first - 1 : node.end_lineno])
    return out


@functools.lru_cache(maxsize=64)
def _uses(source: str) -> dict[str, frozenset]:
    """Top-level functions: name -> the names it uses. Read for references only: a function whose
    text a form leaves as it is uses what it used (the same text parses the same)."""
    return {
        node.name: frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
        for node in _tree(source).body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def _rest_nodes(source: str) -> list[ast.stmt]:
    """The module-level statements outside functions, the docstring (and other bare strings) aside."""
    return [
        n
        for n in _tree(source).body
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
    ]


@functools.lru_cache(maxsize=256)
def _rest_text(source: str) -> tuple[str, ...]:
    lines = source.splitlines(keepends=True)
    return tuple("".join(lines[n.lineno - 1 : n.end_lineno]) for n in _rest_nodes(source))


@functools.lru_cache(maxsize=256)
def _rest_dump(source: str) -> tuple[str, ...]:
    return tuple(ast.dump(n) for n in _rest_nodes(source))


def _same_module_code(base: str, bug: str) -> bool:
    """Whether the two sources have the same module-level code: the same statements' lines (the
    same text parses the same), else the same syntax trees (a comment or spacing changed)."""
    return _rest_text(base) == _rest_text(bug) or _rest_dump(base) == _rest_dump(bug)


@functools.cache
def affected(form: BugForm) -> frozenset[str] | None:
    """Top-level functions whose behaviour the form can change (its edited functions and every
    function that uses one), or None when it changes module-level code (anything may change).
    Read from the hunks' lines when each stays inside one function's body; else the form's source
    is parsed (`affected_by_parsing`, which gives the same answer, tests/test_diagnosis.py)."""
    base = "".join(read_source(form.base))
    edited = _edited_bodies(form, base)
    if edited is None:
        return affected_by_parsing(form)
    return _with_callers(edited, base)


def affected_by_parsing(form: BugForm) -> frozenset[str] | None:
    """affected(), from the syntax trees of the reference and of the form's source."""
    base = "".join(read_source(form.base))
    bug = compose_source((form,))
    if not _same_module_code(base, bug):
        return None
    before, after = _functions(base), _functions(bug)
    if before.keys() != after.keys():
        return None
    return _with_callers({name for name in before if before[name] != after[name]}, base)


def _with_callers(changed: set[str], base: str) -> frozenset[str]:
    """The changed functions and every function that uses one, directly or not. A function the
    form leaves as it is uses what it used in the reference."""
    changed = set(changed)
    uses = _uses(base)
    grew = True
    while grew:
        more = {name for name, used in uses.items() if name not in changed and used & changed}
        grew = bool(more)
        changed |= more
    return frozenset(changed)


@functools.lru_cache(maxsize=64)
def _bodies(source: str) -> dict[str, tuple[int, int]]:
    """Top-level functions whose body starts below their header: name -> the 0-based line range
    [first line of the body, last line of the function + 1)."""
    return {
        node.name: (node.body[0].lineno - 1, node.end_lineno or node.lineno)
        for node in _tree(source).body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body[0].lineno > node.lineno
    }


def _edited_bodies(form: BugForm, base: str) -> set[str] | None:
    """The functions whose bodies the form's hunks edit, when every hunk replaces lines inside one
    body with indented (or blank) lines: then no header, decorator or module-level line changes.
    None when a hunk reaches anything else."""
    spans = _bodies(base)
    names = set()
    for hunk in form.hunks:
        if any(line.strip() and line[0] not in " \t" for line in hunk.lines):
            return None
        inside = [name for name, (first, end) in spans.items() if first <= hunk.start < end and hunk.end <= end]
        if len(inside) != 1:
            return None
        names.add(inside[0])
    return names


@functools.cache
def can_change(group: tuple[BugForm, ...], fn: str) -> bool:
    """Whether a model built from `group` may answer a call of `fn` differently from the reference
    (cached: the search asks it of every form on every call)."""
    return any((a := affected(f)) is None or fn in a for f in group)


# --- families: more forms of one bug, as parameters of its textbook file ------------------------------

FAMILIES = "families.toml"


@functools.cache
def _family_table() -> tuple[dict, ...]:
    prompts = package_dir("prompts")
    return read_families(prompts / FAMILIES) + catalog.own_families(prompts)


def read_families(path: Path) -> tuple[dict, ...]:
    """The [[family]] entries of a families.toml (none when the file is absent)."""
    if not path.exists():
        return ()
    return tuple(tomllib.loads(path.read_text(encoding="utf-8")).get("family", []))


def _choices(entry: dict) -> list[tuple[str, list]]:
    """(label, edits) for every choice of one family entry, {choice} filled in."""

    def filled(text: str) -> list:
        return [[old, new.replace("{choice}", text)] for old, new in entry.get("edits", [])]

    if "variant" in entry:
        return [(v["label"], [list(e) for e in v["edits"]]) for v in entry["variant"]]
    if "subset_of" in entry:
        names = list(entry["subset_of"])
        out = []
        for size in range(1, len(names)):
            for subset in itertools.combinations(names, size):
                out.append(("+".join(subset), filled(repr(tuple(subset)))))
        return out
    values = list(entry.get("values", []))
    labels = list(entry.get("labels", values))
    return [(label, filled(value)) for label, value in zip(labels, values)]


def family_forms_of(entry: dict, textbook: BugForm) -> list[BugForm]:
    """The forms one family entry makes from its textbook bug form (raises FamilyError when an
    edit's old text is not in the code it edits)."""
    on_reference = entry.get("on", "form") == "reference"
    base_path = textbook.base
    if entry.get("reference"):  # another reference of the exercise (a plain-lists one, say)
        base_path = textbook.base.parent / entry["reference"]
        on_reference = True
    base = list(read_source(base_path))
    start = "".join(base) if on_reference else compose_source((textbook,))
    out = []
    for label, edits in _choices(entry):
        text = start
        for old, new in edits:
            if old not in text:
                raise FamilyError(
                    f"{FAMILIES}: {textbook.name} ({entry.get('parameter', '')}: {label}): {old!r} is not in the code it edits"
                )
            text = text.replace(old, new)
        hunks = tuple(_hunks(base, text.splitlines(keepends=True)))
        if hunks and hunks != textbook.hunks:
            out.append(BugForm(textbook.bug, textbook.path, base_path, hunks, variant=f"{entry.get('parameter', 'form')}: {label}"))
    return out


@functools.cache
def family_forms(exercise_id: str) -> tuple[BugForm, ...]:
    """Every family form of the exercise's bugs (prompts/families.toml and the exercise's own
    prompts/catalogue/<id>.toml), beside the bug files."""
    textbook = {f.path.stem: f for f in forms(exercise_id)}
    out: list[BugForm] = []
    for entry in _family_table():
        if entry.get("exercise") != exercise_id or entry.get("form") not in textbook:
            continue
        out.extend(family_forms_of(entry, textbook[entry["form"]]))
    return tuple(out)


def all_forms(exercise_id: str) -> tuple[BugForm, ...]:
    """The bug files' forms, then their families' forms."""
    return forms(exercise_id) + family_forms(exercise_id)


def family_entries() -> tuple[dict, ...]:
    """The entries of prompts/families.toml, then the exercises' own (for tests and the content validator)."""
    return _family_table()
