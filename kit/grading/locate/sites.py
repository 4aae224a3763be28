"""Where a divergence's cause is written, when that is not the line that computed the value.

A projection by a layer made without a bias (`nn.Linear(d, e, bias=False)`) shows its wrong value
on the line that calls the layer; the fix is where the layer is made. Read from the candidate's
source with `ast` in the kit's process (nothing is run)."""

from __future__ import annotations

import ast
import dataclasses

from attn_kit.grading.locate.matching import Divergence, Trace

NO_BIAS = ("without the bias", "a bias added or left out")


def placed(trace: Trace, text: str) -> Trace:
    """The trace with each divergence that is a missing bias moved to the line that makes the
    layer without one (the line it showed on is kept in the words)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return trace
    made = _biasless_layers(tree)
    if not made:
        return trace
    moved = [_moved(d, tree, made) for d in trace.divergences]
    return dataclasses.replace(trace, divergences=moved)


def _moved(divergence: Divergence, tree: ast.Module, made: dict[str, int]) -> Divergence:
    if not any(words in divergence.relation for words in NO_BIAS):
        return divergence
    layers = [name for name in _called_layers(tree, divergence.line) if name in made]
    if not layers:
        return divergence
    name = layers[0]
    words = f"{divergence.relation}: `{name}` is made with bias=False on line {made[name]} (its value shows on line {divergence.line})"
    return dataclasses.replace(divergence, line=made[name], relation=words)


def _biasless_layers(tree: ast.Module) -> dict[str, int]:
    """Layers made as `X = nn.Linear(..., bias=False)` (X a name or `self.name`): name -> line."""
    made: dict[str, int] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)):
            continue
        call, target = node.value, node.targets[0]
        name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
        if (
            name
            and _linear(call)
            and any(k.arg == "bias" and isinstance(k.value, ast.Constant) and k.value.value is False for k in call.keywords)
        ):
            made.setdefault(name, node.lineno)
    return made


def _linear(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Attribute) and func.attr == "Linear") or (isinstance(func, ast.Name) and func.id == "Linear")


def _called_layers(tree: ast.Module, line: int) -> list[str]:
    """The names called on `line` (`self.wqkv(x)` -> wqkv, `proj(x)` -> proj), in order."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno <= line <= (node.end_lineno or node.lineno):
            func = node.func
            if isinstance(func, ast.Attribute):
                names.append(func.attr)
            elif isinstance(func, ast.Name):
                names.append(func.id)
    return names
