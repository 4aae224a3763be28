"""Every edit the operators propose inside the searched functions (module-level functions and
the methods of classes; closures inside them), ranked: edits matching a diagnosed bug first,
then by operator, then by line; edits at or near the traced divergence lines before all."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from typing import Any

from attn_kit.grading.locate.edits import Edit, segment
from attn_kit.grading.locate.matching import Trace
from attn_kit.grading.locate.operators import OPERATORS
from attn_kit.grading.locate.scope import Scope, scope_of
from attn_kit.grading.locate.syntax import needs_parens

MAX_SINGLES = 400  # edits generated at most (the budget usually ends the search first)


OPERATOR_ORDER = {
    "negate": 0,
    "compare": 1,
    "bound": 1,
    "index": 2,
    "request": 5,
    "operand": 5,
    "axis": 2,
    "constant": 2,
    "transpose": 2,
    "scale": 3,
    "width": 3,
    "max": 3,
    "term": 4,
    "swap": 4,
    "permute": 4,
    "range": 4,
    "sign": 5,
    "plusone": 5,
    "einsum": 5,
    "transpose+": 5,
    "index+": 6,
}
VOUCHED = 20  # rank added to edits in a function some passing check called and no failing check did


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def propose(
    text: str,
    tree: ast.Module,
    functions: set[str] | None,
    bugs: set[str],
    vouched: frozenset[str] = frozenset(),
    traced: Trace | None = None,
) -> list[Edit]:
    """Every edit the operators propose inside `functions` (all functions when None), ranked:
    edits in `vouched` functions (ones passing checks called directly and failing checks did
    not) last, edits matching a diagnosed bug first, then by operator, then by line; edits on
    or near the `traced` divergence lines before all (see `focused`), before the cut."""
    parents = _parents(tree)
    lines = text.splitlines()
    found: dict[tuple, Edit] = {}
    for fn in searched(tree, functions):
        scope = scope_of(fn, tree)
        extra = VOUCHED if fn.name in vouched else 0
        for node in ast.walk(fn):
            if not _editable(node, fn, parents):
                continue
            for edit in _edits(node, scope, parents.get(id(node)), lines, bugs, extra):
                found.setdefault((edit.start, edit.end, edit.text), edit)
    edits = focused(sorted(found.values(), key=lambda e: (e.rank, e.start)), traced)
    return edits[:MAX_SINGLES]


def _editable(node: ast.AST, fn: ast.FunctionDef, parents: dict[int, ast.AST]) -> bool:
    """An expression (or a slice) of the function, outside f-strings."""
    if not isinstance(node, ast.Slice) and (
        not hasattr(node, "end_lineno") or node is fn or isinstance(node, (ast.stmt, ast.arg, ast.keyword))
    ):
        return False
    parent = parents.get(id(node))
    return not (isinstance(parent, ast.JoinedStr) or isinstance(node, ast.FormattedValue) or _inside(node, parents, (ast.JoinedStr,)))


def _edits(node: Any, scope: Scope, parent: ast.AST | None, lines: list[str], bugs: set[str], extra: float) -> Iterator[Edit]:
    """The edits every operator proposes for one expression (an operator that fails on it
    proposes none), ranked; rewrites that give back the same text are left out."""
    for operator in OPERATORS:
        try:
            proposals = list(operator(node, scope, parent) if operator.__code__.co_argcount == 3 else operator(node, scope))
        except (AttributeError, IndexError, TypeError, ValueError, SyntaxError):
            continue
        for new, op, what, change, edit_bugs in proposals:
            try:
                replacement = ast.unparse(ast.fix_missing_locations(new))
            except (AttributeError, TypeError, ValueError, RecursionError):
                continue
            if needs_parens(node, new, parent):
                replacement = f"({replacement})"
            start = (node.lineno, node.col_offset)
            end = (node.end_lineno, node.end_col_offset)
            if segment(lines, start, end) == replacement:
                continue
            rank = OPERATOR_ORDER.get(op, 5) - (10 if set(edit_bugs) & bugs else 0) + extra
            yield Edit(start, end, replacement, op, what, change, edit_bugs, rank)


def searched(tree: ast.Module, functions: set[str] | None) -> list[ast.FunctionDef]:
    """The functions to edit: the module-level functions named in `functions` (all when None), and
    the methods of the classes named there (an nn.Module's forward, a class's __call__). Closures
    and nested functions are searched inside the function that holds them."""
    out = []
    for node in tree.body:
        if functions is not None and getattr(node, "name", None) not in functions:
            continue
        if isinstance(node, ast.FunctionDef):
            out.append(node)
        elif isinstance(node, ast.ClassDef):
            out.extend(n for n in node.body if isinstance(n, ast.FunctionDef))
    return out


def _inside(node, parents, kinds) -> bool:
    seen = parents.get(id(node))
    while seen is not None:
        if isinstance(seen, kinds):
            return True
        seen = parents.get(id(seen))
    return False


FOCUS_LINE = 8  # rank taken off an edit on a line where the traced values first go wrong (a diagnosed bug: 10)
FOCUS_NEAR = 3  # ... and off one within NEAR lines of it
NEAR = 2


def focused(edits: list[Edit], traced: Trace | None) -> list[Edit]:
    """The edits with those at the divergence lines first (then those near them)."""
    lines = {d.line for d in traced.divergences} if traced else set()
    if not lines:
        return edits

    def bonus(edit: Edit) -> float:
        if any(line in lines for line in edit.lines):
            return FOCUS_LINE
        return FOCUS_NEAR if any(abs(line - d) <= NEAR for line in edit.lines for d in lines) else 0.0

    moved = [dataclasses.replace(e, rank=e.rank - bonus(e)) for e in edits]
    return sorted(moved, key=lambda e: (e.rank, e.start))
