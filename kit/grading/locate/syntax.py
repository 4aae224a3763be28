"""Small facts about Python syntax the operators share: a called function's name, integer
constants, when a rewritten expression needs parentheses, a deep copy of a node, and the name
patterns that mark masks, maxima and widths."""

from __future__ import annotations

import ast
import re
from typing import Any

MASKY = re.compile(r"mask|allow|keep|valid|visible|ok$|^ok|block|^m$|^a$|live", re.I)
MAXY = re.compile(r"max|best|top|^m$|^mx$|peak|shift", re.I)
WIDTHY = re.compile(r"^(d|hd|dk|d_k|d_head|head_dim|head_width|dh|d_model|D|H|num_heads|n_heads|h|width|dim)$")


# --- operators ------------------------------------------------------------------------------------

_ATOMIC = (
    ast.Name,
    ast.Attribute,
    ast.Call,
    ast.Subscript,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.ListComp,
    ast.GeneratorExp,
    ast.Set,
    ast.DictComp,
    ast.SetComp,
    ast.JoinedStr,
)
_PRECEDENCE = {ast.Add: 1, ast.Sub: 1, ast.Mult: 2, ast.Div: 2, ast.MatMult: 2, ast.FloorDiv: 2, ast.Mod: 2, ast.Pow: 3}


def needs_parens(old: ast.AST, new: ast.AST, parent: ast.AST | None = None) -> bool:
    if (
        isinstance(parent, (ast.keyword, ast.Assign, ast.Return, ast.comprehension, ast.If, ast.While))
        or isinstance(parent, ast.Call)
        and old in parent.args
    ):
        return False
    if isinstance(new, _ATOMIC) or (isinstance(new, ast.Constant) and not (isinstance(new.value, (int, float)) and new.value < 0)):
        return False
    if isinstance(old, ast.BinOp) and isinstance(new, ast.BinOp):
        return _PRECEDENCE.get(type(old.op)) != _PRECEDENCE.get(type(new.op))
    return type(old) is not type(new) or not isinstance(new, (ast.Compare, ast.UnaryOp, ast.BoolOp))


def called(node: ast.AST) -> str:
    """The called function's last name: `np.sum` -> sum, `x.max` -> max, `softmax` -> softmax."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def int_of(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value
    return None


def const(value: int) -> ast.expr:
    return ast.Constant(value) if value >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-value))


def src(node: Any) -> str:
    return ast.unparse(node)


def replace_name(tree: ast.AST, old: ast.AST, new: ast.AST) -> ast.AST:
    class Swap(ast.NodeTransformer):
        def visit_Name(self, node):
            return new if node is old else node

    return Swap().visit(tree)


def deep_copy(node):
    import copy

    return copy.deepcopy(node)
