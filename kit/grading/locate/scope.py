"""What the operators know about the function an edit is in (its Scope), collected in one walk:
the names it binds, which look like widths, masks or maxima, the parameter dictionaries it reads,
its loop variables and the module's numpy/torch aliases."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from attn_kit.grading.locate.syntax import MASKY, MAXY, WIDTHY, called


@dataclass
class Scope:
    """What the operators need to know about the function an edit is in."""

    fn: ast.FunctionDef
    names: set[str]  # every name bound in the function (parameters included)
    unused: list[str]  # bound and never read
    widths: list[str]  # names that look like a width (under a square root)
    masks: list[str]  # names that look like a mask
    maxes: list[str]  # names bound to a max
    np: str | None
    torch: str | None
    params: list[tuple[str, set[str]]] = field(default_factory=list)  # dict names read with 'W..'/'b..' keys
    loops: list[str] = field(default_factory=list)  # short loop variables (i, j, b, h)


Proposal = tuple[ast.AST, str, str, str, tuple[str, ...]]  # new node, operator, what, change, bugs


def scope_of(fn: ast.FunctionDef, module: ast.Module) -> Scope:
    """The facts the operators use about `fn`, each collected by one small walk."""
    bound: dict[str, None] = {a.arg: None for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    read: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                bound.setdefault(node.id, None)
            else:
                read.add(node.id)
    maxes = _assigned(fn, lambda v: isinstance(v, ast.Call) and called(v) in ("max", "amax"))
    widths = _assigned(fn, lambda v: isinstance(v, ast.BinOp) and isinstance(v.op, ast.FloorDiv))
    maxes += [m for m in _running_maxes(fn) if m not in maxes]
    widths += [n for n in bound if WIDTHY.match(n) and n not in widths]
    maxes += [n for n in bound if MAXY.search(n) and n not in maxes]
    params = _parameter_dicts(fn)
    unused = [n for n in bound if n not in read and not n.startswith("_") and n not in ("self",)]
    masks = [n for n in bound if MASKY.search(n) and n in read]
    family = {name: keys for name, keys in params.items() if any(re.fullmatch(r"[Wb][a-z]", k) for k in keys)}
    np_alias, torch_alias = _aliases(module)
    return Scope(
        fn,
        set(bound),
        unused[:4],
        widths[:6],
        masks[:3],
        maxes[:3],
        np_alias,
        torch_alias,
        sorted(family.items()),
        list(dict.fromkeys(n for n in _loops(fn) if len(n) <= 2))[:8],
    )


def _assigned(fn: ast.FunctionDef, kind) -> list[str]:
    """Names bound, alone, to a value of `kind` (a max, a floor division), in walk order."""
    return [
        node.targets[0].id
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and kind(node.value)
    ]


def _running_maxes(fn: ast.FunctionDef) -> list[str]:
    """`m = 0 ... m = max(m, s)`: names assigned a max or maximum."""
    return [
        t.id
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and called(node.value) in ("max", "maximum")
        for t in node.targets
        if isinstance(t, ast.Name)
    ]


def _parameter_dicts(fn: ast.FunctionDef) -> dict[str, set[str]]:
    """Dictionaries read with constant string keys (`p["Wq"]`, `p.get("bq")`): name -> keys."""
    params: dict[str, set[str]] = {}
    node: Any
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            params.setdefault(node.value.id, set()).add(node.slice.value)
        elif _get_with_key(node):
            params.setdefault(node.func.value.id, set()).add(node.args[0].value)
    return params


def _get_with_key(node: Any) -> bool:
    return (
        isinstance(node, ast.Call)
        and called(node) == "get"
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def _loops(fn: ast.FunctionDef) -> list[str]:
    return [
        t.id
        for node in ast.walk(fn)
        if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.iter, ast.Call) and called(node.iter) == "range"
        for t in ast.walk(node.target)
        if isinstance(t, ast.Name)
    ]


def _aliases(module: ast.Module) -> tuple[str | None, str | None]:
    """The names numpy and torch are imported under (the last import of each)."""
    np_alias = torch_alias = None
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "numpy":
                    np_alias = alias.asname or "numpy"
                if alias.name == "torch":
                    torch_alias = alias.asname or "torch"
    return np_alias, torch_alias
