"""`check --locate`: the smallest verified edit to the candidate's own code.

The candidate's file is parsed with `ast`; operators that fit attention code propose small edits
(a different axis, swapped operands, a comparison flipped or its bound moved by one, a mask
negated or not, a transpose added or removed, a different width under a square root, -1e9 ->
-inf, a missing term from names already in scope, the max over the allowed entries only). Each
edit is spliced into the candidate's own text (only the edited expression is rewritten), written
to a private temporary folder, and graded in the sandbox, with the same limits as the original,
against the checks the file failed: single edits first, ranked (edits in the functions the
failing checks called, and edits that match the diagnosed bug, first), then pairs guided by
which failing checks each single edit repaired. An edit is shown only once it is verified: the
edited file passes the whole suite on the run's seed and on a second seed. The candidate's file
is only read, never written.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from attn_kit.base.errors import KitError, LoadError
from attn_kit.grading import pipeline
from attn_kit.grading import trace as trace_module
from attn_kit.grading.clock import Budget
from attn_kit.load import catalog, preflight
from attn_kit.report.results import FAILED, CheckStatus, Report
from attn_kit.sandbox import zygote as sandbox_zygote
from attn_kit.sandbox.session import Sandbox

DEFAULT_BUDGET = 10.0
SECOND_SEED_STEP = 7919  # the verification's second seed is the run's seed plus this
MAX_SINGLES = 400  # edits generated at most (the budget usually ends the search first)
MASKY = re.compile(r"mask|allow|keep|valid|visible|ok$|^ok|block|^m$|^a$|live", re.I)
MAXY = re.compile(r"max|best|top|^m$|^mx$|peak|shift", re.I)
WIDTHY = re.compile(r"^(d|hd|dk|d_k|d_head|head_dim|head_width|dh|d_model|D|H|num_heads|n_heads|h|width|dim)$")


# --- edits ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Edit:
    """One rewrite of one expression: the byte span [start, end) of the candidate's text, as
    (line, byte column) pairs, and the text that replaces it."""

    start: tuple[int, int]
    end: tuple[int, int]
    text: str
    operator: str  # short id of the operator that proposed it
    what: str  # what is wrong there, in words, without the answer
    change: str  # the edit itself, in words (shown with --fix)
    bugs: tuple[str, ...] = ()  # catalogue bugs this kind of edit repairs
    rank: float = 0.0

    @property
    def lines(self) -> tuple[int, ...]:
        return tuple(range(self.start[0], self.end[0] + 1))

    def overlaps(self, other: Edit) -> bool:
        return not (self.end <= other.start or other.end <= self.start)


def apply(text: str, edits) -> str:
    """`text` with the edits spliced in (they must not overlap)."""
    data = text.encode("utf-8")
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(pos: tuple[int, int]) -> int:
        return starts[pos[0] - 1] + pos[1]

    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        data = data[: offset(edit.start)] + edit.text.encode("utf-8") + data[offset(edit.end) :]
    return data.decode("utf-8")


def diff(text: str, edits) -> list[tuple[int, list[str], list[str]]]:
    """Per group of edited lines: (first line, the candidate's lines, the same lines edited)."""
    lines = text.splitlines(keepends=True)
    groups: list[list[Edit]] = []
    for edit in sorted(edits, key=lambda e: e.start):
        if groups and edit.start[0] <= groups[-1][-1].end[0]:
            groups[-1].append(edit)
        else:
            groups.append([edit])
    out = []
    for group in groups:
        first, last = group[0].start[0], max(e.end[0] for e in group)
        block = "".join(lines[first - 1 : last])
        moved = [dataclasses.replace(e, start=(e.start[0] - first + 1, e.start[1]), end=(e.end[0] - first + 1, e.end[1])) for e in group]
        out.append((first, block.splitlines(), apply(block, moved).splitlines()))
    return out


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


def _needs_parens(old: ast.AST, new: ast.AST, parent: ast.AST | None = None) -> bool:
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


def _name(node: ast.AST) -> str:
    """The called function's last name: `np.sum` -> sum, `x.max` -> max, `softmax` -> softmax."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _int(node: ast.AST) -> int | None:
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


def _const(value: int) -> ast.expr:
    return ast.Constant(value) if value >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-value))


def _src(node: Any) -> str:
    return ast.unparse(node)


NEG_INF = "float('-inf')"
REDUCTIONS = {
    "sum",
    "max",
    "amax",
    "min",
    "mean",
    "softmax",
    "log_softmax",
    "logsumexp",
    "argmax",
    "cumsum",
    "concatenate",
    "cat",
    "stack",
    "any",
    "all",
    "norm",
}
AXIS_CHOICES = (-1, -2, 0, 1, 2, -3)


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


def _axis(node: ast.AST, scope: Scope) -> Iterator[Proposal]:
    if not isinstance(node, ast.Call) or _name(node) not in REDUCTIONS:
        return
    fname = _name(node)
    for i, kw in enumerate(node.keywords):
        value = _int(kw.value) if kw.arg in ("axis", "dim") else None
        if value is None:
            continue
        for choice in AXIS_CHOICES:
            if choice != value:
                new = _copy(node)
                new.keywords[i].value = _const(choice)
                yield (
                    new,
                    "axis",
                    f"`{fname}` here works along the wrong axis",
                    f"{kw.arg}={value} -> {kw.arg}={choice}",
                    ("softmax-wrong-axis", "softmax-across-batch"),
                )
    method = isinstance(node.func, ast.Attribute) and not (
        isinstance(node.func.value, ast.Name) and node.func.value.id in (scope.np, scope.torch, "F", "math")
    )
    index = 0 if method else 1
    if len(node.args) > index and (value := _int(node.args[index])) is not None:
        for choice in AXIS_CHOICES:
            if choice != value:
                new = _copy(node)
                new.args[index] = _const(choice)
                yield (
                    new,
                    "axis",
                    f"`{fname}` here works along the wrong axis",
                    f"axis {value} -> {choice}",
                    ("softmax-wrong-axis", "softmax-across-batch"),
                )


def _permute(node: ast.AST, scope: Scope) -> Iterator[Proposal]:  # noqa: C901 (einsum subscripts, tuples and argument lists of one operator)
    if not isinstance(node, ast.Call) or _name(node) not in ("transpose", "permute", "swapaxes", "einsum"):
        return
    fname = _name(node)
    bugs = ("heads-interleaved", "reshape-without-transpose", "weights-transposed", "transpose-reverses-all-axes", "softmax-wrong-axis")
    if fname == "einsum" and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        spec = node.args[0].value
        if "->" not in spec:
            return
        ins, out = spec.split("->")
        terms = ins.split(",")
        for t, term in enumerate([*terms, out]):
            for i, j in itertools.combinations(range(len(term)), 2):
                if term[i] == term[j]:
                    continue
                letters = list(term)
                letters[i], letters[j] = letters[j], letters[i]
                parts = [*terms, out]
                parts[t] = "".join(letters)
                new_spec = ",".join(parts[:-1]) + "->" + parts[-1]
                new = _copy(node)
                new.args[0] = ast.Constant(new_spec)
                yield (new, "einsum", "the subscripts of this `einsum` put axes in the wrong places", f"'{spec}' -> '{new_spec}'", bugs)
        return
    args = node.args
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        holder, items = "tuple", list(args[0].elts)
    else:
        holder, items = "args", list(args)
    start = (
        1
        if (
            fname in ("transpose", "permute", "swapaxes")
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in (scope.np, scope.torch)
        )
        else 0
    )
    maybe = [_int(a) for a in items[start:]]
    if not maybe or any(v is None for v in maybe):
        return
    values: list[int] = [v for v in maybe if v is not None]
    options: list[list[int]] = []
    if len(values) == 2:
        options = [list(p) for p in ((-2, -1), (1, 2), (0, 1), (2, 3)) if set(p) != set(values)]
    else:
        # the keys' usual transpose first: every axis in order but the last two
        canonical = [*range(len(values) - 2), len(values) - 1, len(values) - 2]
        if sorted(values) == sorted(canonical) and values != canonical:
            options.append(canonical)
        for i, j in itertools.combinations(range(len(values)), 2):
            swapped = list(values)
            swapped[i], swapped[j] = swapped[j], swapped[i]
            options.append(swapped)
    for option in options:
        new = _copy(node)
        consts = [_const(v) for v in option]
        if holder == "tuple":
            new.args[0] = ast.Tuple(consts, ast.Load())
        else:
            new.args = list(new.args[:start]) + consts
        yield (
            new,
            "permute",
            f"this `{fname}` puts the axes in the wrong order",
            f"({', '.join(map(str, values))}) -> ({', '.join(map(str, option))})",
            bugs,
        )


def _swap(node: ast.AST, scope: Scope) -> Iterator[Proposal]:  # noqa: C901 (operands, indices and arguments swapped)
    new: Any
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.MatMult, ast.Sub)):
        new = ast.BinOp(node.right, node.op, node.left)
        sym = "@" if isinstance(node.op, ast.MatMult) else "-"
        yield (
            new,
            "swap",
            f"the two sides of `{sym}` here are the wrong way round",
            f"{_src(node.left)} {sym} {_src(node.right)} -> {_src(node.right)} {sym} {_src(node.left)}",
            ("weights-transposed",),
        )
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and not isinstance(node.slice, ast.Slice)
        and not isinstance(node.value.slice, ast.Slice)
    ):
        new = ast.Subscript(ast.Subscript(node.value.value, node.slice, ast.Load()), node.value.slice, ast.Load())
        yield (new, "swap", "the two indices here are the wrong way round", f"{_src(node)} -> {_src(new)}", ("weights-transposed",))
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and isinstance(node.ctx, ast.Load):
        elts = node.slice.elts
        for i in range(len(elts) - 1):
            if _src(elts[i]) != _src(elts[i + 1]):
                new = _copy(node)
                new.slice.elts[i], new.slice.elts[i + 1] = new.slice.elts[i + 1], new.slice.elts[i]
                yield (
                    new,
                    "swap",
                    "two indices here are the wrong way round",
                    f"{_src(node)} -> {_src(new)}",
                    ("padding-masks-queries", "heads-interleaved"),
                )
    if isinstance(node, ast.Call) and not node.keywords:
        fname = _name(node)
        args = node.args
        pairs: list[tuple[int, int]] = []
        if fname in ("matmul", "dot", "mm", "bmm") and len(args) == 2:
            pairs = [(0, 1)]
        elif fname in ("reshape", "view") and len(args) >= 2:
            pairs = [(i, i + 1) for i in range(len(args) - 1)]
        elif fname == "where" and len(args) == 3:
            pairs = [(1, 2)]
        for i, j in pairs:
            new = _copy(node)
            new.args[i], new.args[j] = new.args[j], new.args[i]
            bugs = ("mask-inverted",) if fname == "where" else ("heads-interleaved", "reshape-without-transpose")
            yield (
                new,
                "swap",
                f"two arguments of `{fname}` here are the wrong way round",
                f"{_src(args[i])}, {_src(args[j])} -> {_src(args[j])}, {_src(args[i])}",
                bugs,
            )


_FLIPS = {
    ast.Lt: (ast.LtE, ast.Gt),
    ast.LtE: (ast.Lt, ast.GtE),
    ast.Gt: (ast.GtE, ast.Lt),
    ast.GtE: (ast.Gt, ast.LtE),
    ast.Eq: (ast.NotEq,),
    ast.NotEq: (ast.Eq,),
}
_SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
MASK_BUGS = ("causal-off-by-one", "padding-masks-queries", "mask-inverted", "additive-mask-leaks")


def _compare(node: ast.AST, scope: Scope) -> Iterator[Proposal]:  # noqa: C901 (comparisons, tril/triu and slices: the off-by-one operator's three shapes)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIPS:
        old = type(node.ops[0])
        for op in _FLIPS[old]:
            new = _copy(node)
            new.ops = [op()]
            yield (new, "compare", "this comparison is the wrong one", f"{_SYMBOL[old]} -> {_SYMBOL[op]}", MASK_BUGS)
        for side in ("left", "right"):
            target = node.left if side == "left" else node.comparators[0]
            if isinstance(target, ast.Constant) and not isinstance(target.value, (int, float)):
                continue
            for new_side, text in _plus_minus(target):
                new = _copy(node)
                if side == "left":
                    new.left = new_side
                else:
                    new.comparators = [new_side]
                yield (new, "bound", "the bound of this comparison is off by one", f"{_src(target)} -> {text}", MASK_BUGS)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        for side in ("left", "right"):
            target = node.left if side == "left" else node.comparators[0]
            if isinstance(target, ast.Name) and target.id in scope.loops:
                for other in scope.loops:
                    if other != target.id:
                        new = _copy(node)
                        if side == "left":
                            new.left = ast.Name(other, ast.Load())
                        else:
                            new.comparators = [ast.Name(other, ast.Load())]
                        yield (
                            new,
                            "index",
                            f"this comparison tests `{target.id}`, the wrong index",
                            f"{target.id} -> {other}",
                            ("padding-masks-queries", "causal-off-by-one"),
                        )
    if isinstance(node, ast.Call) and _name(node) == "range" and not node.keywords:
        for i, arg in enumerate(node.args[:2]):
            for new_arg, text in _plus_minus(arg):
                new = _copy(node)
                new.args[i] = new_arg
                yield (new, "range", "a bound of this range is off by one", f"{_src(arg)} -> {text}", ("causal-off-by-one",))
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        if _int(node.right) in (1, -1):
            yield (node.left, "plusone", f"the `{_src(node.right)}` here should not be there", f"{_src(node)} -> {_src(node.left)}", ())
        else:
            new = ast.BinOp(node.left, ast.Sub() if isinstance(node.op, ast.Add) else ast.Add(), node.right)
            yield (new, "sign", "the sign of this term is wrong", f"{_src(node)} -> {_src(new)}", ("biases-ignored",))
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Name)
        and node.slice.id in scope.loops
        and isinstance(node.ctx, ast.Load)
    ):
        for other in scope.loops:
            if other != node.slice.id:
                new = _copy(node)
                new.slice = ast.Name(other, ast.Load())
                yield (new, "index+", f"`{node.slice.id}` is the wrong index here", f"{_src(node)} -> {_src(new)}", ())
    if isinstance(node, ast.Call) and _name(node) in ("tril", "triu"):
        other = "triu" if _name(node) == "tril" else "tril"
        for i, arg in enumerate(node.args[1:], 1):
            if (v := _int(arg)) is not None:
                for d in (-1, 1):
                    new = _copy(node)
                    new.args[i] = _const(v + d)
                    yield (new, "bound", f"the diagonal of `{_name(node)}` is off by one", f"{v} -> {v + d}", MASK_BUGS)
        for i, kw in enumerate(node.keywords):
            if kw.arg in ("k", "diagonal") and (v := _int(kw.value)) is not None:
                for d in (-1, 1):
                    new = _copy(node)
                    new.keywords[i].value = _const(v + d)
                    yield (new, "bound", f"the diagonal of `{_name(node)}` is off by one", f"{kw.arg}={v} -> {kw.arg}={v + d}", MASK_BUGS)
        if len(node.args) == 1 and not node.keywords:
            for d in (-1, 1):
                new = _copy(node)
                new.args.append(_const(d))
                yield (
                    new,
                    "bound",
                    f"the diagonal of `{_name(node)}` is off by one",
                    f"{_name(node)}(...) -> {_name(node)}(..., {d})",
                    MASK_BUGS,
                )
        new = _copy(node)
        new.func = ast.Attribute(new.func.value, other, ast.Load()) if isinstance(new.func, ast.Attribute) else ast.Name(other, ast.Load())
        yield (new, "compare", f"`{_name(node)}` keeps the wrong triangle", f"{_name(node)} -> {other}", MASK_BUGS)
    if isinstance(node, ast.Slice):
        for part in ("lower", "upper"):
            target = getattr(node, part)
            if target is None:
                continue
            for new_side, text in _plus_minus(target):
                new = _copy(node)
                setattr(new, part, new_side)
                yield (new, "bound", "a bound of this slice is off by one", f"{_src(target)} -> {text}", ("causal-off-by-one",))


def _plus_minus(node: ast.AST) -> Iterator[tuple[ast.expr, str]]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and _int(node.right) == 1:
        yield node.left, _src(node.left)
    value = _int(node)
    for op, d in ((ast.Add, 1), (ast.Sub, -1)):
        new: ast.expr = _const(value + d) if value is not None else ast.BinOp(_copy(node), op(), ast.Constant(1))
        yield new, _src(new)


def _negate(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    new: Any
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.Invert)):
        yield (
            node.operand,
            "negate",
            "this negation reads the mask backwards",
            f"{_src(node)} -> {_src(node.operand)}",
            ("mask-inverted",),
        )
        return
    if isinstance(node, ast.IfExp):
        new = ast.IfExp(node.test, node.orelse, node.body)
        yield (new, "negate", "the two branches of this conditional are the wrong way round", "swap the branches", ("mask-inverted",))
    if isinstance(node, ast.Call) and _name(node) == "masked_fill" and node.args:
        new = _copy(node)
        new.args[0] = _invert(node.args[0], "~")
        yield (
            new,
            "negate",
            "this `masked_fill` fills the allowed entries instead of the blocked ones",
            f"{_src(node.args[0])} -> {_src(new.args[0])}",
            ("mask-inverted",),
        )
    if (
        isinstance(parent, ast.keyword)
        and parent.arg in ("where", "mask")
        and not isinstance(node, ast.UnaryOp)
        or isinstance(parent, ast.Call)
        and _name(parent) in ("where", "masked_fill")
        and parent.args
        and parent.args[0] is node
        and not isinstance(node, (ast.UnaryOp, ast.Name))
    ):
        new = _invert(node, "~")
        yield (new, "negate", "this mask is read backwards here", f"{_src(node)} -> {_src(new)}", ("mask-inverted",))
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and MASKY.search(node.id) and not (isinstance(parent, ast.UnaryOp)):
        test = _is_test(node, parent)
        if test or (isinstance(parent, ast.Call) and node in parent.args and _name(parent) == "where"):
            new = _invert(node, "not" if test else "~")
            yield (new, "negate", f"`{node.id}` is read backwards here", f"{node.id} -> {_src(new)}", ("mask-inverted",))


def _is_test(node: ast.AST, parent: ast.AST | None) -> bool:
    return (isinstance(parent, (ast.If, ast.IfExp, ast.While)) and parent.test is node) or (
        isinstance(parent, ast.comprehension) and node in parent.ifs
    )


def _invert(node: ast.expr, how: str) -> ast.expr:
    return ast.UnaryOp(ast.Not() if how == "not" else ast.Invert(), _copy(node))


def _transpose(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    new: Any
    bugs = ("weights-transposed", "transpose-reverses-all-axes", "reshape-without-transpose")
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
        yield (node.value, "transpose", "this transpose should not be here", f"{_src(node)} -> {_src(node.value)}", bugs)
        if node.attr == "T":
            new = ast.Call(ast.Attribute(node.value, "swapaxes", ast.Load()), [_const(-1), _const(-2)], [])
            yield (new, "transpose", "`.T` reverses every axis here, not just the last two", f"{_src(node)} -> {_src(new)}", bugs)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("transpose", "permute", "swapaxes", "t")
        and not (isinstance(node.func.value, ast.Name) and node.func.value.id in (scope.np, scope.torch))
    ):
        yield (node.func.value, "transpose", "this transpose should not be here", f"{_src(node)} -> {_src(node.func.value)}", bugs)
    elif isinstance(node, ast.Call) and _name(node) in ("transpose", "swapaxes", "permute") and node.args:
        yield (node.args[0], "transpose", "this transpose should not be here", f"{_src(node)} -> {_src(node.args[0])}", bugs)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("reshape", "view"):
        receiver = node.func.value
        if not (isinstance(receiver, ast.Call) and _name(receiver) in ("transpose", "permute", "swapaxes")) and not (
            isinstance(receiver, ast.Name) and receiver.id in (scope.np, scope.torch)
        ):
            new = _copy(node)
            new.func.value = ast.Call(ast.Attribute(_copy(receiver), "swapaxes", ast.Load()), [ast.Constant(1), ast.Constant(2)], [])
            yield (
                new,
                "transpose+",
                "the axes are not moved before this reshape",
                f"{_src(receiver)} -> {_src(new.func.value)}",
                ("reshape-without-transpose",),
            )
            after = ast.Call(ast.Attribute(_copy(node), "swapaxes", ast.Load()), [ast.Constant(1), ast.Constant(2)], [])
            yield (
                after,
                "transpose+",
                "the axes are not moved after this reshape",
                f"{_src(node)} -> {_src(after)}",
                ("reshape-without-transpose",),
            )
    operand = (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.MatMult)) or (
        isinstance(parent, ast.Call) and _name(parent) in ("matmul", "dot") and node in parent.args
    )
    if (
        operand
        and isinstance(node, (ast.Name, ast.Subscript, ast.Call))
        and not (isinstance(node, ast.Call) and _name(node) in ("transpose", "swapaxes", "permute"))
    ):
        new = ast.Attribute(_copy(node), "T", ast.Load())
        yield (new, "transpose+", "this operand needs a transpose", f"{_src(node)} -> {_src(new)}", bugs)


SQRT = ("sqrt",)


def _scale(node: ast.AST, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:  # noqa: C901 (the width, a scale too many and a scale missing)
    if isinstance(node, ast.Call) and _name(node) in SQRT and len(node.args) == 1:
        arg = node.args[0]
        for width in scope.widths:
            if width != _src(arg):
                new = _copy(node)
                new.args[0] = ast.Name(width, ast.Load())
                yield (
                    new,
                    "width",
                    "the width under this square root is the wrong one",
                    f"sqrt({_src(arg)}) -> sqrt({width})",
                    ("scale-by-model-width",),
                )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and isinstance(node.right, ast.Constant) and node.right.value == 0.5:
        for width in scope.widths:
            if width != _src(node.left):
                new = ast.BinOp(ast.Name(width, ast.Load()), ast.Pow(), ast.Constant(0.5))
                yield (
                    new,
                    "width",
                    "the width under this square root is the wrong one",
                    f"{_src(node)} -> {_src(new)}",
                    ("scale-by-model-width",),
                )
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Mult)):
        for keep, drop in ((node.left, node.right), (node.right, node.left)):
            if keep is node.right and isinstance(node.op, ast.Div):
                continue
            if any(
                (isinstance(n, ast.Call) and _name(n) in SQRT)
                or (isinstance(n, ast.Name) and "scale" in n.id.lower())
                or (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow))
                for n in ast.walk(drop)
            ):
                yield (
                    keep,
                    "scale",
                    "the scores are scaled here once too often",
                    f"{_src(node)} -> {_src(keep)}",
                    ("double-scaling", "scale-by-model-width"),
                )
    scores = (
        (isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult))
        or (isinstance(node, ast.Call) and _name(node) in ("matmul", "einsum", "bmm"))
        or (isinstance(node, ast.Call) and _name(node) == "sum" and node.args and isinstance(node.args[0], ast.GeneratorExp))
    )
    if scores and not (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Div)) and not _weighted(node):
        for width in scope.widths:
            new = ast.BinOp(_copy(node), ast.Div(), ast.BinOp(ast.Name(width, ast.Load()), ast.Pow(), ast.Constant(0.5)))
            yield (new, "scale", "these scores are not scaled", f"{_src(node)} -> {_src(new)}", ("no-scaling",))


def _weighted(node: ast.AST) -> bool:
    """A product with a weight matrix (`x @ Wq`, `params["Wq"]`): a projection, not scores."""
    return any(
        isinstance(n, ast.Name)
        and n.id.startswith("W")
        or isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and n.value.startswith("W")
        for n in ast.walk(node)
    )


def _constant(node: ast.AST, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    value = None
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, (int, float))
    ):
        value = -node.operand.value
    elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        value = node.value
        if isinstance(parent, ast.UnaryOp):
            return
    if value is None:
        return
    inf = ast.parse(NEG_INF, mode="eval").body
    fill = (
        isinstance(parent, ast.Call)
        and _name(parent) in ("copyto", "where", "masked_fill", "full", "fill")
        or isinstance(parent, ast.keyword)
        and parent.arg in ("value", "fill_value")
    )
    if (value <= -1e3 or (value < 0 and fill) or (value == 0 and fill)) and value != float("-inf"):
        yield (
            inf,
            "constant",
            f"the fill value {_src(node)} is not low enough to block an entry",
            f"{_src(node)} -> {NEG_INF}",
            ("fill-value-too-weak", "blocked-row-uniform", "additive-mask-leaks"),
        )
    if (
        value == 0
        and isinstance(parent, ast.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0], ast.Name)
        and parent.targets[0].id in scope.maxes
    ):
        yield (inf, "constant", "this running max starts at 0, above some scores", f"0 -> {NEG_INF}", ("max-over-blocked",))


def _missing(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:  # noqa: C901 (bias, projection and max-shift terms, one case each)
    """A term from names already in scope: an unused name added, subtracted or multiplied in."""
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.MatMult)
        or isinstance(node, ast.Call)
        and _name(node) in ("matmul", "einsum", "dot", "linear")
    ):
        for name in scope.unused:
            new = ast.BinOp(_copy(node), ast.Add(), ast.Name(name, ast.Load()))
            yield (new, "term", "a term is missing here", f"{_src(node)} -> {_src(new)}", ("biases-ignored",))
        for dict_name, keys in scope.params:
            for key in sorted(keys):
                if key.startswith("W") and "b" + key[1:] not in keys and _mentions(node, key):
                    bias = ast.parse(
                        f"({dict_name}.get({'b' + key[1:]!r}) if {dict_name}.get({'b' + key[1:]!r}) is not None else 0)", mode="eval"
                    ).body
                    new = ast.BinOp(_copy(node), ast.Add(), bias)
                    yield (new, "term", f"the bias b{key[1:]} is never added", f"{_src(node)} -> {_src(new)}", ("biases-ignored",))
    if (
        isinstance(parent, ast.Return)
        and node is parent.value
        or isinstance(parent, ast.Assign)
        and node is parent.value
        and _returned(parent, scope)
    ):
        for dict_name, keys in scope.params:
            if "Wo" not in keys:
                extra = "" if "bo" in keys else f" + ({dict_name}.get('bo') if {dict_name}.get('bo') is not None else 0)"
                proj: Any = ast.parse(f"x @ {dict_name}['Wo']{extra}", mode="eval").body
                (proj.left if extra else proj).left = _copy(node)
                yield (proj, "term", "the output projection is never applied", f"{_src(node)} -> {_src(proj)}", ("no-output-projection",))
        for name in scope.unused:
            new = ast.BinOp(_copy(node), ast.MatMult(), ast.Name(name, ast.Load()))
            yield (new, "term", "a projection is missing here", f"{_src(node)} -> {_src(new)}", ("no-output-projection",))
            for other in scope.unused:
                if other != name:
                    new = ast.BinOp(
                        ast.BinOp(_copy(node), ast.MatMult(), ast.Name(name, ast.Load())), ast.Add(), ast.Name(other, ast.Load())
                    )
                    yield (new, "term", "a projection is missing here", f"{_src(node)} -> {_src(new)}", ("no-output-projection",))
    if isinstance(node, ast.Call) and _name(node) == "exp" and len(node.args) >= 1:
        arg = node.args[0]
        for name in scope.unused + [m for m in scope.maxes if m != _src(arg)]:
            new = _copy(node)
            new.args[0] = ast.BinOp(_copy(arg), ast.Sub(), ast.Name(name, ast.Load()))
            yield (new, "term", "the max is not subtracted before `exp`", f"{_src(arg)} -> {_src(new.args[0])}", ("softmax-overflow",))
        if scope.np or scope.torch:
            shift = "x.max(axis=-1, keepdims=True)" if scope.np else "x.amax(dim=-1, keepdim=True)"
            new = _copy(node)
            sub: Any = ast.parse(shift, mode="eval").body
            sub.func.value = _copy(arg)
            new.args[0] = ast.BinOp(_copy(arg), ast.Sub(), sub)
            yield (new, "term", "the max is not subtracted before `exp`", f"{_src(arg)} -> {_src(new.args[0])}", ("softmax-overflow",))


def _projected(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    """The output projection, done the way the function projects the queries: its call that
    reads 'Wq' again, with 'Wo' and 'bo', applied to what is returned (or collected with
    `append` into what is returned), when the function never mentions 'Wo'."""
    if not isinstance(node, ast.expr) or _mentions(scope.fn, "Wo"):
        return
    collected = (
        isinstance(parent, ast.Call)
        and _name(parent) == "append"
        and parent.args == [node]
        and isinstance(parent.func, ast.Attribute)
        and isinstance(parent.func.value, ast.Name)
        and _returned(ast.Assign([ast.Name(parent.func.value.id, ast.Store())], node), scope)
    )
    if not (
        collected
        or isinstance(parent, ast.Return)
        and node is parent.value
        or isinstance(parent, ast.Assign)
        and node is parent.value
        and _returned(parent, scope)
    ):
        return
    query = next(
        (
            n
            for n in ast.walk(scope.fn)
            if isinstance(n, ast.Call) and n.args and not _mentions(n.args[0], "Wq") and any(_mentions(a, "Wq") for a in n.args[1:])
        ),
        None,
    )
    if query is None:
        return
    proj = _copy(query)
    proj.args[0] = _copy(node)
    for sub in ast.walk(proj):
        if isinstance(sub, ast.Constant) and sub.value in ("Wq", "bq"):
            sub.value = {"Wq": "Wo", "bq": "bo"}[sub.value]
    yield (proj, "term", "the output projection is never applied", f"{_src(node)} -> {_src(proj)}", ("no-output-projection",))


def _mentions(node: ast.AST, key: str) -> bool:
    return any(isinstance(n, ast.Constant) and n.value == key for n in ast.walk(node))


def _returned(assign: ast.Assign, scope: Scope) -> bool:
    names = {t.id for t in assign.targets if isinstance(t, ast.Name)}
    return any(
        isinstance(n, ast.Return) and n.value is not None and any(isinstance(m, ast.Name) and m.id in names for m in ast.walk(n.value))
        for n in ast.walk(scope.fn)
    )


def _max_allowed(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    if not isinstance(node, ast.Call) or _name(node) not in ("max", "amax") or not scope.masks:
        return
    method = isinstance(node.func, ast.Attribute) and not (
        isinstance(node.func.value, ast.Name) and node.func.value.id in (scope.np, scope.torch)
    )
    func: Any = node.func
    target: Any = func.value if method else (node.args[0] if node.args else None)
    if target is None or isinstance(target, ast.GeneratorExp):
        return
    for mask in scope.masks:
        if scope.torch:
            text = f"t.masked_fill(~{mask}, float('-inf'))"
        elif scope.np:
            text = f"{scope.np}.where({mask}, t, -{scope.np}.inf)"
        elif isinstance(node.func, ast.Name) and not node.keywords and len(node.args) == 1:
            text = f"(s_ for s_, a_ in zip(t, {mask}) if a_)"
        else:
            continue
        sub: Any = ast.parse(text, mode="eval").body
        for n in ast.walk(sub):
            if isinstance(n, ast.Name) and n.id == "t":
                holder = n
        replacement = _copy(target)
        sub = _replace_name(sub, holder, replacement)
        new = _copy(node)
        if method:
            new.func.value = sub
        else:
            new.args[0] = sub
        yield (new, "max", "this max also counts the blocked entries", f"{_src(target)} -> {_src(sub)}", ("max-over-blocked",))


def _replace_name(tree: ast.AST, old: ast.AST, new: ast.AST) -> ast.AST:
    class Swap(ast.NodeTransformer):
        def visit_Name(self, node):
            return new if node is old else node

    return Swap().visit(tree)


def _copy(node):
    import copy

    return copy.deepcopy(node)


OPERATORS: tuple[Callable, ...] = (
    _negate,
    _compare,
    _axis,
    _permute,
    _swap,
    _transpose,
    _scale,
    _constant,
    _missing,
    _projected,
    _max_allowed,
)
OPERATOR_ORDER = {
    "negate": 0,
    "compare": 1,
    "bound": 1,
    "index": 2,
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


def _scope(fn: ast.FunctionDef, module: ast.Module) -> Scope:  # noqa: C901 (one walk that collects every fact the operators use)
    bound: dict[str, ast.AST | None] = {a.arg: None for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    read: set[str] = set()
    maxes: list[str] = []
    widths: list[str] = []
    params: dict[str, set[str]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                bound.setdefault(node.id, None)
            else:
                read.add(node.id)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
            if isinstance(value, ast.Call) and _name(value) in ("max", "amax"):
                maxes.append(name)
            if isinstance(value, ast.BinOp) and isinstance(value.op, ast.FloorDiv):
                widths.append(name)
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            params.setdefault(node.value.id, set()).add(node.slice.value)
        elif (
            isinstance(node, ast.Call)
            and _name(node) == "get"
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            params.setdefault(node.func.value.id, set()).add(node.args[0].value)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value == 0:
            pass
    for node in ast.walk(fn):  # running maxes: `m = 0 ... m = max(m, s)`
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _name(node.value) in ("max", "maximum"):
            for t in node.targets:
                if isinstance(t, ast.Name) and t.id not in maxes:
                    maxes.append(t.id)
    for name in bound:
        if WIDTHY.match(name) and name not in widths:
            widths.append(name)
        if MAXY.search(name) and name not in maxes:
            maxes.append(name)
    loops = [
        t.id
        for node in ast.walk(fn)
        if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.iter, ast.Call) and _name(node.iter) == "range"
        for t in ast.walk(node.target)
        if isinstance(t, ast.Name)
    ]
    np_alias = torch_alias = None
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "numpy":
                    np_alias = alias.asname or "numpy"
                if alias.name == "torch":
                    torch_alias = alias.asname or "torch"
    unused = [n for n in bound if n not in read and not n.startswith("_") and n not in ("self",)]
    masks = [n for n in bound if MASKY.search(n) and n in read]
    wanted = {k for keys in params.values() for k in keys}
    family = {name: keys for name, keys in params.items() if any(re.fullmatch(r"[Wb][a-z]", k) for k in keys)}
    del wanted
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
        list(dict.fromkeys(n for n in loops if len(n) <= 2))[:8],
    )


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def propose(  # noqa: C901 (skips nodes no operator may touch, in one loop)
    text: str,
    tree: ast.Module,
    functions: set[str] | None,
    bugs: set[str],
    vouched: frozenset[str] = frozenset(),
    traced: trace_module.Trace | None = None,
) -> list[Edit]:
    """Every edit the operators propose inside `functions` (all functions when None), ranked:
    edits in `vouched` functions (ones passing checks called directly and failing checks did
    not) last, edits matching a diagnosed bug first, then by operator, then by line; edits on
    or near the `traced` divergence lines before all (see `focused`), before the cut."""
    parents = _parents(tree)
    lines = text.splitlines()
    found: dict[tuple, Edit] = {}
    for fn in searched(tree, functions):
        scope = _scope(fn, tree)
        node: Any
        for node in ast.walk(fn):
            if not hasattr(node, "end_lineno") or node is fn or isinstance(node, (ast.stmt, ast.arg, ast.keyword)):
                if not isinstance(node, ast.Slice):
                    continue
            parent = parents.get(id(node))
            if isinstance(parent, ast.JoinedStr) or isinstance(node, ast.FormattedValue) or _inside(node, parents, (ast.JoinedStr,)):
                continue
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
                    if _needs_parens(node, new, parent):
                        replacement = f"({replacement})"
                    start = (node.lineno, node.col_offset)
                    end = (node.end_lineno, node.end_col_offset)
                    if _segment(lines, start, end) == replacement:
                        continue
                    rank = OPERATOR_ORDER.get(op, 5) - (10 if set(edit_bugs) & bugs else 0) + (VOUCHED if fn.name in vouched else 0)
                    key = (start, end, replacement)
                    if key not in found:
                        found[key] = Edit(start, end, replacement, op, what, change, edit_bugs, rank)
    edits = focused(sorted(found.values(), key=lambda e: (e.rank, e.start)), traced)
    return edits[:MAX_SINGLES]


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


def _segment(lines: list[str], start, end) -> str:
    data = [line.encode("utf-8") for line in lines[start[0] - 1 : end[0]]]
    if not data:
        return ""
    if len(data) == 1:
        return data[0][start[1] : end[1]].decode("utf-8", "replace")
    return b"\n".join([data[0][start[1] :], *data[1:-1], data[-1][: end[1]]]).decode("utf-8", "replace")


# --- the search -----------------------------------------------------------------------------------


@dataclass
class Found:
    """A verified edit (one or two rewrites) and what it repairs."""

    edits: tuple[Edit, ...]
    repairs: tuple[str, ...]  # the failing checks it makes pass
    bugs: tuple[str, ...]  # diagnosed known bugs it corresponds to
    diff: list[tuple[int, list[str], list[str]]]

    @property
    def lines(self) -> tuple[int, ...]:
        return tuple(sorted({line for e in self.edits for line in e.lines}))

    def to_json(self, fix: bool) -> dict:
        out = {
            "lines": list(self.lines),
            "what": [f"line {e.start[0]}: {e.what}" for e in self.edits],
            "operators": [e.operator for e in self.edits],
            "repairs": list(self.repairs),
            "bugs": list(self.bugs),
        }
        if fix:
            out["diff"] = [{"line": first, "before": before, "after": after} for first, before, after in self.diff]
        return out


@dataclass(frozen=True)
class Partial:
    """A single edit that was screened and rejected, and what it showed: the failing checks it
    repaired, those that ran and still failed, and how much closer those came (`_closer`)."""

    edit: Edit
    repaired: frozenset[str]
    still: frozenset[str]
    closer: float


@dataclass
class Located:
    found: Found | None
    tried: int = 0  # edited files run in the sandbox
    proposed: int = 0  # edits the operators proposed
    seconds: float = 0.0
    stopped: str = "exhausted"  # exhausted | budget | passed
    depends: list[tuple[str, int, int]] = field(default_factory=list)  # (function, first line, last line)
    failing: tuple[str, ...] = ()
    trace: trace_module.Trace | None = None  # where the traced values first go wrong
    partial: Found | None = None  # no full edit: one verified to fix some failing checks and break none
    cpu: bool = True  # `seconds` is CPU time (kit and workers) and the code's blocked time, not wall time
    runs: int = 0  # runs of edited copies (and the traced run) started
    late: int = 0  # runs asked for once the budget was spent: none of them was started

    def to_json(self, fix: bool = False) -> dict:
        return {
            "divergences": self.trace.to_json()["divergences"] if self.trace else [],
            "partial": self.partial.to_json(fix) if self.partial else None,
            "found": self.found.to_json(fix) if self.found else None,
            "tried": self.tried,
            "proposed": self.proposed,
            "seconds": round(self.seconds, 3),
            "stopped": self.stopped,
            "failing": list(self.failing),
            "depends": [{"function": f, "first_line": a, "last_line": b} for f, a, b in self.depends],
        }


def reachable(tree: ast.Module, roots: set[str]) -> set[str]:
    """The module-level functions and classes `roots` use, directly or through each other."""
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    seen: set[str] = set()
    todo = [r for r in roots if r in defs]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(defs[name]):
            if isinstance(node, ast.Name) and node.id in defs and node.id not in seen:
                todo.append(node.id)
    return seen


def preload_for(path: Path, exercise: catalog.Exercise) -> tuple[str, ...]:
    """The modules the edited copies' zygote should hold: grading's (pipeline.preload_for), so
    the search reuses the zygote the file was graded with (importing torch in every worker would
    cost a second per edit)."""
    try:
        imported = {name for name, _ in preflight.read_source(path).imports()}
    except KitError:
        imported = set()
    return pipeline.preload_for(imported, exercise)


def prepare(path: str | Path, exercise: str | None = None) -> None:
    """Called before the file is graded when --locate will search: when the file's zygote holds
    more than its exercise needs (torch for a NumPy exercise's file that imports it), start it
    now, as a fresh interpreter, so it imports while the kit loads; grading and the search's
    edited copies then share it."""
    try:
        source = preflight.read_source(Path(path))
        ex = preflight.detect_exercise(source, exercise)
    except KitError:
        return  # grading reports it
    preload = preload_for(Path(path), ex)
    if preload and preload != ((ex.needs,) if ex.needs else ()):
        sandbox_zygote.expected_values_loaded()  # the new zygote is a fresh interpreter, never a fork of the kit
        sandbox_zygote.shared_launcher(preload)


class _Runner:
    """Grades edited versions of one file in the sandbox, each in a fresh worker from the warm
    zygote, in a private temporary folder."""

    def __init__(self, path: Path, report: Report, options: pipeline.Options, exercise: catalog.Exercise, budget: Budget | None = None):
        from attn_kit.diagnosis import diagnose

        self.budget = budget or Budget(float("inf"))  # every run below starts only within it, bounded by it

        self.folder = Path(tempfile.mkdtemp(prefix="attn-kit-locate-"))
        self.path = path
        self.name = path.name if path.suffix == ".py" else "solution.py"
        self.options = options
        self.exercise = exercise
        self.suite = pipeline.suite_for(exercise)
        self.oracle = diagnose.oracle_for(exercise)
        self.checks = {c.id: c for c in self.suite.checks}
        self.original = {r.id: r.status for r in report.results}
        self.failing = [r.id for r in report.results if r.status in FAILED and r.id in self.checks]
        self.rejects = {c: 0 for c in self.failing}
        self.bug = {r.id: r.bug for r in report.results if r.bug}
        self.calls = {r.id: frozenset(c.fn for c in r.calls) for r in report.results}
        self.cost = {c: 0.05 for c in self.failing}
        self.mismatch = {r.id: r.mismatch for r in report.results}
        self.still: set[str] = set()  # after screen(): the failing checks that ran and still failed
        self.closer = 0.0  # after screen(): how much closer a still-failing check came
        # a zygote with what the file imports (torch, say) already imported: every edited copy
        # starts from it in milliseconds instead of importing torch again
        self.preload = preload_for(path, exercise)
        slowest = max((call.outcome.seconds for r in report.results for call in r.calls), default=0.0)
        self.timeout = min(options.timeout, max(1.0, 5 * slowest))
        self.count = 0

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _write(self, text: str) -> Path:
        self.count += 1
        target = self.folder / str(self.count)
        target.mkdir()
        path = target / self.name
        path.write_text(text, encoding="utf-8")
        return path

    def screen(self, text: str, misses: int = 1) -> tuple[bool, set[str]]:
        """(every failing check passes, the failing checks that passed) for the edited text; stops
        after `misses` checks still fail, running the checks that rejected most edits first. Sets
        `still` (the checks that ran and still failed) and `closer` (see `_closer`)."""
        self.still, self.closer = set(), 0.0
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return False, set()
        if not self.budget.start():
            return False, set()
        path = self._write(text)
        source = preflight.SourceFile(path, text, tree, None, tuple(n.name for n in tree.body if isinstance(n, ast.FunctionDef)))
        repaired: set[str] = set()
        order = sorted(self.failing, key=lambda c: -(self.rejects[c] + 1) / self.cost[c])
        statuses = {k: v for k, v in self.original.items()}
        left = misses
        with (
            self.budget.run(),
            Sandbox(str(path), self.timeout, self.options.memory, pure=self.options.pure, preload=self.preload) as sandbox,
        ):
            try:
                sandbox.start()
            except LoadError:
                return False, repaired
            while order:
                check_id = order.pop(0)
                started = time.perf_counter()
                result = pipeline.run_check(
                    self.checks[check_id], sandbox, self.oracle, self.options.seed or 0, statuses, self.exercise, source
                )
                self.cost[check_id] = 0.7 * self.cost[check_id] + 0.3 * (time.perf_counter() - started)
                statuses[check_id] = result.status
                if result.status == CheckStatus.PASS:
                    repaired.add(check_id)
                    continue
                self.rejects[check_id] += 1
                self.still.add(check_id)
                self.closer = max(
                    self.closer, _closer(self.original[check_id], self.mismatch.get(check_id), result.status, result.mismatch)
                )
                left -= 1
                if left <= 0:
                    return False, repaired
                # still failing: next, a check about something else (another diagnosed bug, or
                # catching other bugs), so an edit that repairs one of two mistakes shows it
                order.sort(key=lambda c: self.related(c, check_id))
        return len(repaired) == len(self.failing), repaired

    def catches(self, check_ids: Iterable[str]) -> set[str]:
        """The bugs the given checks are declared to catch, with the bug each was diagnosed with."""
        return {bug for c in check_ids if c in self.checks for bug in (*self.checks[c].catches, *([self.bug[c]] if c in self.bug else []))}

    def related(self, check_id: str, other: str) -> bool:
        """Whether two failing checks are about the same thing: the same diagnosed bug, or
        declared to catch a bug in common."""
        if self.bug.get(check_id) and self.bug.get(other):
            return self.bug[check_id] == self.bug[other]
        return self.calls.get(check_id) == self.calls.get(other) and bool(
            set(self.checks[check_id].catches) & set(self.checks[other].catches)
        )

    def follow(self, report: Report) -> trace_module.Trace | None:
        """The traced run of the smallest failing calls (trace.follow); None when it cannot run."""
        if not self.budget.start():
            return None
        try:
            with self.budget.run():
                return trace_module.follow(
                    str(self.path), report, min(self.options.timeout, 10.0), self.options.memory, self.options.pure, self.preload
                )
        except KitError:
            return None

    def verify_partial(self, text: str) -> set[str]:
        """The failing checks the edited file passes on the run's seed, when it fails no check the
        original passed (else none)."""
        if not self.budget.start():
            return set()
        path = self._write(text)
        try:
            with self.budget.run():
                edited = pipeline.grade(path, dataclasses.replace(self.options, exercise=self.exercise.id))
        except KitError:
            return set()
        statuses = {r.id: r.status for r in edited.results}
        if any(statuses.get(c) in FAILED for c, s in self.original.items() if s == CheckStatus.PASS):
            return set()
        return {c for c in self.failing if statuses.get(c) == CheckStatus.PASS}

    def verify(self, text: str) -> bool:
        """The edited file passes every check the original failed and fails none it passed, on
        the run's seed; and fails no check on a second seed."""
        path = self._write(text)
        seed = self.options.seed or 0
        for i, run_seed in enumerate((seed, seed + SECOND_SEED_STEP)):
            if not self.budget.start():
                return False
            try:
                with self.budget.run():
                    edited = pipeline.grade(path, dataclasses.replace(self.options, seed=run_seed, exercise=self.exercise.id))
            except KitError:
                return False
            statuses = {r.id: r.status for r in edited.results}
            if any(s in FAILED for s in statuses.values()):
                return False
            if i == 0 and any(statuses.get(c) != CheckStatus.PASS for c in self.failing):
                return False
        return True


def _closer(before_status, before, after_status, after) -> float:
    """How much closer to the expected values a check that still fails came, from 0 (no closer)
    to 1: fewer wrong entries, fewer NaN or infinities, a much smaller worst difference, or
    values where there was an exception. An edit that repairs one of two mistakes usually
    leaves every check failing, but closer: this is what pairs it with the edit for the other."""
    if before_status != CheckStatus.FAIL and after_status == CheckStatus.FAIL and after is not None:
        return 0.3
    if before is None or after is None or before.shape != after.shape:
        return 0.0
    score = 0.0
    if after.nan_count + after.inf_count < before.nan_count + before.inf_count:
        score = 0.5
    if before.wrong_count and after.wrong_count < before.wrong_count:
        score = max(score, 1 - after.wrong_count / before.wrong_count)
    finite = all(x == x and abs(x) != float("inf") for x in (before.max_abs, after.max_abs))
    if finite and before.max_abs > 0 and after.max_abs < 0.5 * before.max_abs:
        score = max(score, 0.5 * (1 - after.max_abs / before.max_abs))
    return score


FOCUS_LINE = 8  # rank taken off an edit on a line where the traced values first go wrong (a diagnosed bug: 10)
FOCUS_NEAR = 3  # ... and off one within NEAR lines of it
NEAR = 2


def focused(edits: list[Edit], traced: trace_module.Trace | None) -> list[Edit]:
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


def _focus_functions(tree: ast.Module, traced: trace_module.Trace | None) -> set[str]:
    """The module-level functions and classes holding a divergence line (searched even when no
    failing check called them by name: a method, a helper reached through an object)."""
    if not traced:
        return set()
    lines = {d.line for d in traced.divergences}
    return {
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and any(n.lineno <= line <= (n.end_lineno or n.lineno) for line in lines)
    }


def _best_partial(runner: _Runner, text: str, partial: list[Partial], failing: tuple[str, ...], diagnosed: set[str]) -> Found | None:
    """No full edit: the single edit that repaired the most failing checks, verified on the run's
    seed to repair them without breaking a check the file passed; None when there is none."""
    for p in sorted((p for p in partial if p.repaired), key=lambda p: (-len(p.repaired), p.edit.rank))[:2]:
        repaired = runner.verify_partial(apply(text, [p.edit]))
        if repaired:
            bugs = tuple(b for b in p.edit.bugs if b in diagnosed)
            return Found((p.edit,), tuple(c for c in failing if c in repaired), bugs, diff(text, [p.edit]))
    return None


def locate(  # noqa: C901 (the two phases and their exits)
    path: str | Path,
    report: Report,
    options: pipeline.Options,
    budget: float = DEFAULT_BUDGET,
    progress: Callable[[str, int, int], None] | None = None,
) -> Located:
    """Search for the smallest edit of the file at `path` that makes `report`'s failing checks
    pass (see the module's docstring). `progress(phase, done, total)` is told as it goes."""
    clock = Budget(budget)  # kit CPU time and the candidate's blocked time; every run bounded by it
    path = Path(path)
    failing = tuple(r.id for r in report.results if r.status in FAILED)
    if not failing:
        return Located(None, stopped="passed")
    source = preflight.read_source(path)
    tree = source.tree
    exercise = catalog.exercise(report.exercise)
    roots = {call.fn for r in report.results if r.status in FAILED for call in r.calls}
    functions = reachable(tree, roots) if roots else None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and (functions is None or n.name in functions)]
    depends = [(n.name, n.lineno, n.end_lineno or n.lineno) for n in defs]
    diagnosed = {d.bug for d in report.diagnosis}
    passing_calls = {call.fn for r in report.results if r.status == CheckStatus.PASS for call in r.calls}
    failing_calls = {call.fn for r in report.results if r.status in FAILED for call in r.calls}
    options = dataclasses.replace(options, seed=report.seed, exercise=exercise.id)
    runner = _Runner(path, report, options, exercise, clock)
    traced = runner.follow(report)
    focus = _focus_functions(tree, traced)
    edits = propose(
        source.text, tree, None if functions is None else functions | focus, diagnosed, frozenset(passing_calls - failing_calls), traced
    )
    located = Located(None, proposed=len(edits), depends=depends, failing=failing, trace=traced, cpu=clock.cpu)

    def out_of_time() -> bool:
        return clock.over()

    def finish(found: Found | None, stopped: str) -> Located:
        located.found, located.stopped = found, stopped
        if found is None:
            located.partial = _best_partial(runner, source.text, partial, failing, diagnosed)
        located.seconds = clock.spent()
        located.tried = runner.count
        located.runs, located.late = clock.runs, clock.late
        return located

    def found(chosen: tuple[Edit, ...]) -> Found:
        bugs = tuple(b for b in dict.fromkeys(b for e in chosen for b in e.bugs) if b in diagnosed) or tuple(sorted(diagnosed))
        return Found(chosen, failing, bugs, diff(source.text, chosen))

    # one diagnosed bug: most likely one mistake, so a single edit is rejected at its first failing
    # check; otherwise it runs on to a second, to learn which checks it repairs (for the pairs)
    misses = 1 if len(diagnosed) == 1 else 2
    tried_pairs: set[tuple[int, int]] = set()

    def try_pair(a: Edit, b: Edit) -> Found | None:
        tried_pairs.update({(id(a), id(b)), (id(b), id(a))})
        text = apply(source.text, [a, b])
        ok, _ = runner.screen(text, misses=1)
        if ok and runner.verify(text):
            return found(tuple(sorted((a, b), key=lambda e: e.start)))
        return None

    partial: list[Partial] = []
    try:
        queue: list[tuple[Edit, Edit]] = []
        built: tuple[int, bool] = (-1, True)
        index = 0
        turn = 0
        # singles in rank order; pairs from a queue rebuilt whenever a single repairs something.
        # Suspecting several mistakes (misses == 2), singles and pairs alternate; otherwise pairs
        # wait for half the budget, or for the singles to run out
        while True:
            if out_of_time():
                return finish(None, "budget")
            singles_left = index < len(edits)
            if built != (len(partial), singles_left):
                queue = [
                    p
                    for p in _pairs(partial, edits, diagnosed, any_two=not singles_left, catches=runner.catches)
                    if (id(p[0]), id(p[1])) not in tried_pairs
                ]
                built = (len(partial), singles_left)
            pairs_now = bool(queue) and (not singles_left or ((misses == 2 or clock.spent() > budget / 2) and turn % 2 == 1))
            turn += 1
            if pairs_now:
                a, b = queue.pop(0)
                if (id(a), id(b)) in tried_pairs:
                    continue
                if progress:
                    progress("pair", len(tried_pairs) // 2 + 1, len(tried_pairs) // 2 + len(queue) + 1)
                if (pair := try_pair(a, b)) is not None:
                    return finish(pair, "found")
                continue
            if not singles_left:
                return finish(None, "exhausted")
            edit = edits[index]
            index += 1
            if progress:
                progress("single", index, len(edits))
            text = apply(source.text, [edit])
            ok, repaired = runner.screen(text, misses=misses)
            if ok and runner.verify(text):
                return finish(found((edit,)), "found")
            if repaired or runner.closer > 0:
                partial.append(Partial(edit, frozenset(repaired), frozenset(runner.still), runner.closer))
    finally:
        runner.close()


def _pairs(  # noqa: C901 (one list per way of pairing, merged)
    partial: list[Partial],
    edits: list[Edit],
    diagnosed: frozenset[str] | set[str] = frozenset(),
    any_two: bool = True,
    catches: Callable[[Iterable[str]], set[str]] = lambda ids: set(),
) -> list[tuple[Edit, Edit]]:
    """Pairs to try, without overlaps or repeats. Taken in turn from four lists: two edits that
    each repaired some failing checks (those that together cover most first); an edit that
    repaired some checks or came closer, with an edit whose kind repairs a bug, other than its
    own, that a check it left failing catches (`catches` names them); two edits that each came closer; two edits
    matching two different diagnosed bugs (the best-ranked of each first). Then a repairing edit
    with any other edit, in rank order; with `any_two` (the singles have run out), then any two of
    the first 40."""
    pairs: list[tuple[Edit, Edit]] = []
    seen: set[tuple[int, int]] = set()

    def add(a: Edit, b: Edit) -> None:
        if a is not b and (id(a), id(b)) not in seen and not a.overlaps(b):
            seen.update({(id(a), id(b)), (id(b), id(a))})
            pairs.append((a, b))

    repairing = [p for p in partial if p.repaired]
    covering = [
        (a.edit, b.edit)
        for _, _, a, b in sorted(
            ((-len(a.repaired | b.repaired), a.edit.rank + b.edit.rank, a, b) for a, b in itertools.combinations(repairing, 2)),
            key=lambda s: (s[0], s[1]),
        )
    ]
    guided: list[tuple[Edit, Edit]] = []
    for p in sorted(partial, key=lambda p: (-len(p.repaired), -p.closer))[:12]:
        wanted = catches(p.still) - set(p.edit.bugs)  # another mistake than the one it fixed
        # the best-ranked edit for each such bug first, then the second of each, ...
        by_bug = [[e for e in edits if bug in e.bugs] for bug in sorted(wanted)]
        partners = dict.fromkeys(e for turn in itertools.zip_longest(*by_bug) for e in turn if e is not None)
        guided.extend((p.edit, b) for b in list(partners)[:30])
    nearer = sorted((p for p in partial if p.closer > 0), key=lambda p: -p.closer)[:20]
    closer = [(a.edit, b.edit) for a, b in sorted(itertools.combinations(nearer, 2), key=lambda ab: -(ab[0].closer + ab[1].closer))]
    groups = [[e for e in edits if bug in e.bugs][:20] for bug in sorted(diagnosed)]
    matching = [
        (a, b)
        for _, a, b in sorted(
            ((i + j, a, b) for g, h in itertools.combinations(groups, 2) for i, a in enumerate(g) for j, b in enumerate(h)),
            key=lambda s: s[0],
        )
    ]
    with_any = [(p.edit, b) for p in sorted(repairing, key=lambda p: -len(p.repaired)) for b in edits[:120]]
    for turn in itertools.zip_longest(covering, guided, with_any, closer, matching):
        for pair in turn:
            if pair is not None:
                add(*pair)
    for a, b in itertools.combinations(edits[:40] if any_two else [], 2):  # last: any two of the best
        add(a, b)
    return pairs
