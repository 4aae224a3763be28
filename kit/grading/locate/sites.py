"""Where a divergence's cause is written, when that is not the line that computed the value.

A projection by a layer made without a bias (`nn.Linear(d, e, bias=False)`) shows its wrong value
on the line that calls the layer; the fix is where the layer is made. A step left out shows on
the last line that made the value before it, but a line that rebinds the name to itself
(`att = att`) is where it belongs. Read from the candidate's source with `ast` in the kit's
process (nothing is run)."""

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
    moved = [_passed_in(_scale_bound(_kept(_moved(d, tree, made), tree), tree), tree) for d in trace.divergences]
    return dataclasses.replace(trace, divergences=moved)


STILL = "it is still "  # matching: the value is still the stage before (a step left out)


def _kept(divergence: Divergence, tree: ast.Module) -> Divergence:
    """A step left out where the code rebinds the name to itself unchanged (`att = att` where
    `att = att / hd**0.5` was meant): the step belongs on that line, the last such one before the
    name is read otherwise. A rebinding that makes a new value from it (`s = np.where(ok, s,
    -inf)`) is not such a line: the step belonged before it."""
    if not divergence.relation.startswith(STILL):
        return divergence
    line = divergence.line
    for node in _after(tree, divergence.line):
        reads = any(isinstance(n, ast.Name) and n.id == divergence.name and isinstance(n.ctx, ast.Load) for n in ast.walk(node))
        if not reads:
            continue
        if not (isinstance(node, ast.Assign) and [_target(t) for t in node.targets] == [divergence.name]):
            break  # read by another statement (or a block that may change it): handed on from here
        if not (isinstance(node.value, ast.Name) and node.value.id == divergence.name):
            break  # a new value made from it (a mask's fill): the step belonged before
        line = node.lineno
    return divergence if line == divergence.line else dataclasses.replace(divergence, line=line)


FACTOR = ("× too large", "× too small")  # relations: a factor names the difference


def _scale_bound(divergence: Divergence, tree: ast.Module) -> Divergence:
    """A value wrong by a factor where a scale is applied by name (`s = q @ k.T * inv`) whose
    value the function binds on another line (`inv = d**-1.0`): the scale is wrong where it is
    computed, so the mistake is that binding (the line it showed on is kept in the words)."""
    if not any(words in divergence.relation for words in FACTOR):
        return divergence
    function = _enclosing(tree, divergence.line)
    holding = [s for s in _statements(function) if s.lineno <= divergence.line <= (s.end_lineno or s.lineno)]
    statement = min(holding, key=lambda s: (s.end_lineno or s.lineno) - s.lineno, default=None)  # the innermost
    if function is None or statement is None:
        return divergence
    for name in _factors(statement):
        bound = [s for s in _statements(function) if isinstance(s, ast.Assign) and [_target(t) for t in s.targets] == [name]]
        if len(bound) == 1 and bound[0].lineno < statement.lineno and _scalar(bound[0].value):
            words = f"{divergence.relation}: the factor `{name}` is computed on line {bound[0].lineno} (applied on line {divergence.line})"
            return dataclasses.replace(divergence, line=bound[0].lineno, relation=words)
    return divergence


def _passed_in(divergence: Divergence, tree: ast.Module) -> Divergence:
    """A helper that left its data unchanged (`_turn(k, position)` still unrotated) because an
    argument the calling function only passes on (`position`, one of its parameters, never
    rebound) came wrong from the line that called that function (`Step(p)(x, 0, cache)`): the
    mistake is on that line."""
    if not (divergence.relation.startswith(STILL) and divergence.called_from and "asks `" in divergence.relation):
        return divergence
    function = _enclosing(tree, divergence.line)
    if function is None:
        return divergence
    params = {a.arg for a in function.args.args + function.args.kwonlyargs}
    rebound = {_target(t) for s in _statements(function) if isinstance(s, ast.Assign) for t in s.targets}
    calls = [n for n in ast.walk(function) if isinstance(n, ast.Call) and n.lineno <= divergence.line <= (n.end_lineno or n.lineno)]
    passed = {a.id for c in calls for a in c.args[1:] if isinstance(a, ast.Name)}
    if not passed & params - rebound:
        return divergence
    words = f"{divergence.relation}, with what line {divergence.called_from} passes in (the value shows on line {divergence.line})"
    return dataclasses.replace(divergence, line=divergence.called_from, relation=words)


def _enclosing(tree: ast.Module, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost function whose body holds `line`."""
    holding = [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno <= line <= (n.end_lineno or n.lineno)
    ]
    return max(holding, key=lambda n: n.lineno, default=None)


def _statements(function: ast.AST | None) -> list[ast.stmt]:
    return [] if function is None else [n for n in ast.walk(function) if isinstance(n, ast.stmt) and n is not function]


def _factors(statement: ast.stmt) -> list[str]:
    """The names a statement's value is multiplied or divided by at its top (`x * inv`, `x /
    scale`, `inv * x`), not inside a call or a root (`sqrt(hd * H)` is a width, not a factor)."""
    value = getattr(statement, "value", None)
    names: list[str] = []
    chain = [value] if isinstance(value, ast.BinOp) else []
    while chain:
        node = chain.pop()
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div))):
            continue
        operands = (node.right,) if isinstance(node.op, ast.Div) else (node.left, node.right)
        names += [o.id for o in operands if isinstance(o, ast.Name)]
        chain += [o for o in (node.left, node.right) if isinstance(o, ast.BinOp)]
    return names


def _scalar(value: ast.expr) -> bool:
    """An expression of numbers only: constants, names, arithmetic and calls like `math.sqrt(d)`
    (no subscript or array made from the data)."""
    return all(
        isinstance(n, (ast.Constant, ast.Name, ast.BinOp, ast.UnaryOp, ast.Call, ast.Attribute, ast.operator, ast.unaryop, ast.Load))
        for n in ast.walk(value)
    )


def _after(tree: ast.Module, line: int) -> list[ast.stmt]:
    """The statements after the one on `line`, in its own block (the innermost holding it)."""
    held: list[tuple[int, list[ast.stmt]]] = []
    for node in ast.walk(tree):
        for block in (getattr(node, "body", None), getattr(node, "orelse", None), getattr(node, "finalbody", None)):
            if not isinstance(block, list):
                continue
            here = [s for s in block if isinstance(s, ast.stmt) and s.lineno <= line <= (s.end_lineno or s.lineno)]
            if here:
                held.append(((here[0].end_lineno or here[0].lineno) - here[0].lineno, block))
    if not held:
        return []
    block = min(held, key=lambda sb: sb[0])[1]
    return [s for s in block if s.lineno > line]


def _target(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else ""


def _moved(divergence: Divergence, tree: ast.Module, made: dict[str, int]) -> Divergence:
    if not made or not any(words in divergence.relation for words in NO_BIAS):
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
