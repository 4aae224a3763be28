"""The operators: small functions from one expression (and its Scope) to the edits that fit
attention code there (a different axis, swapped operands, a comparison flipped or its bound moved
by one, a mask negated, a transpose added or removed, a different width under a square root,
-1e9 -> -inf, a missing term from names already in scope, the max over the allowed entries).
`OPERATORS` is the table `propose` runs over every expression."""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Callable, Iterator
from typing import Any

from attn_kit.grading.locate.scope import Proposal, Scope
from attn_kit.grading.locate.syntax import MASKY, called, const, deep_copy, int_of, replace_name, src

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


def _axis(node: ast.AST, scope: Scope) -> Iterator[Proposal]:
    if not isinstance(node, ast.Call) or called(node) not in REDUCTIONS:
        return
    fname = called(node)
    for i, kw in enumerate(node.keywords):
        value = int_of(kw.value) if kw.arg in ("axis", "dim") else None
        if value is None:
            continue
        for choice in AXIS_CHOICES:
            if choice != value:
                new = deep_copy(node)
                new.keywords[i].value = const(choice)
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
    if len(node.args) > index and (value := int_of(node.args[index])) is not None:
        for choice in AXIS_CHOICES:
            if choice != value:
                new = deep_copy(node)
                new.args[index] = const(choice)
                yield (
                    new,
                    "axis",
                    f"`{fname}` here works along the wrong axis",
                    f"axis {value} -> {choice}",
                    ("softmax-wrong-axis", "softmax-across-batch"),
                )


PERMUTE_BUGS = ("heads-interleaved", "reshape-without-transpose", "weights-transposed", "transpose-reverses-all-axes", "softmax-wrong-axis")


def _permute(node: ast.AST, scope: Scope) -> Iterator[Proposal]:
    if not isinstance(node, ast.Call) or called(node) not in ("transpose", "permute", "swapaxes", "einsum"):
        return
    if called(node) == "einsum":
        if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            yield from _einsum_swaps(node, node.args[0].value)
            return
    yield from _axes_reordered(node, scope)


def _einsum_swaps(node: ast.Call, spec: str) -> Iterator[Proposal]:
    """Two letters of one term of the subscripts swapped."""
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
            new = deep_copy(node)
            new.args[0] = ast.Constant(new_spec)
            what = "the subscripts of this `einsum` put axes in the wrong places"
            yield (new, "einsum", what, f"'{spec}' -> '{new_spec}'", PERMUTE_BUGS)


def _axes_reordered(node: ast.Call, scope: Scope) -> Iterator[Proposal]:
    """A transpose/permute/swapaxes with its axes (a tuple or the arguments) in another order."""
    fname = called(node)
    args = node.args
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        holder, items = "tuple", list(args[0].elts)
    else:
        holder, items = "args", list(args)
    start = 1 if _module_call(node, scope) else 0
    maybe = [int_of(a) for a in items[start:]]
    if not maybe or any(v is None for v in maybe):
        return
    values: list[int] = [v for v in maybe if v is not None]
    for option in _axis_orders(values):
        new = deep_copy(node)
        consts = [const(v) for v in option]
        if holder == "tuple":
            new.args[0] = ast.Tuple(consts, ast.Load())
        else:
            new.args = list(new.args[:start]) + consts
        yield (
            new,
            "permute",
            f"this `{fname}` puts the axes in the wrong order",
            f"({', '.join(map(str, values))}) -> ({', '.join(map(str, option))})",
            PERMUTE_BUGS,
        )


def _module_call(node: ast.Call, scope: Scope) -> bool:
    """`np.transpose(a, ...)` / `torch.permute(a, ...)`: the array is the first argument."""
    return (
        called(node) in ("transpose", "permute", "swapaxes")
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in (scope.np, scope.torch)
    )


def _axis_orders(values: list[int]) -> list[list[int]]:
    if len(values) == 2:
        return [list(p) for p in ((-2, -1), (1, 2), (0, 1), (2, 3)) if set(p) != set(values)]
    options: list[list[int]] = []
    # the keys' usual transpose first: every axis in order but the last two
    canonical = [*range(len(values) - 2), len(values) - 1, len(values) - 2]
    if sorted(values) == sorted(canonical) and values != canonical:
        options.append(canonical)
    for i, j in itertools.combinations(range(len(values)), 2):
        swapped = list(values)
        swapped[i], swapped[j] = swapped[j], swapped[i]
        options.append(swapped)
    return options


def _swap(node: ast.AST, scope: Scope) -> Iterator[Proposal]:
    yield from _operands_swapped(node)
    yield from _indices_swapped(node)
    yield from _adjacent_indices_swapped(node)
    yield from _arguments_swapped(node)


def _operands_swapped(node: ast.AST) -> Iterator[Proposal]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.MatMult, ast.Sub)):
        new = ast.BinOp(node.right, node.op, node.left)
        sym = "@" if isinstance(node.op, ast.MatMult) else "-"
        yield (
            new,
            "swap",
            f"the two sides of `{sym}` here are the wrong way round",
            f"{src(node.left)} {sym} {src(node.right)} -> {src(node.right)} {sym} {src(node.left)}",
            ("weights-transposed",),
        )


def _indices_swapped(node: ast.AST) -> Iterator[Proposal]:
    """`a[i][j]` -> `a[j][i]`."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and not isinstance(node.slice, ast.Slice)
        and not isinstance(node.value.slice, ast.Slice)
    ):
        new = ast.Subscript(ast.Subscript(node.value.value, node.slice, ast.Load()), node.value.slice, ast.Load())
        yield (new, "swap", "the two indices here are the wrong way round", f"{src(node)} -> {src(new)}", ("weights-transposed",))


def _adjacent_indices_swapped(node: ast.AST) -> Iterator[Proposal]:
    """`a[i, j]` -> `a[j, i]`, two neighbours at a time."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and isinstance(node.ctx, ast.Load)):
        return
    elts = node.slice.elts
    for i in range(len(elts) - 1):
        if src(elts[i]) != src(elts[i + 1]):
            new = deep_copy(node)
            new.slice.elts[i], new.slice.elts[i + 1] = new.slice.elts[i + 1], new.slice.elts[i]
            yield (
                new,
                "swap",
                "two indices here are the wrong way round",
                f"{src(node)} -> {src(new)}",
                ("padding-masks-queries", "heads-interleaved"),
            )


def _swappable(fname: str, count: int) -> list[tuple[int, int]]:
    """The argument positions of a call that may be the wrong way round."""
    if fname in ("matmul", "dot", "mm", "bmm") and count == 2:
        return [(0, 1)]
    if fname in ("reshape", "view") and count >= 2:
        return [(i, i + 1) for i in range(count - 1)]
    return [(1, 2)] if fname == "where" and count == 3 else []


def _arguments_swapped(node: ast.AST) -> Iterator[Proposal]:
    if not isinstance(node, ast.Call) or node.keywords:
        return
    fname = called(node)
    args = node.args
    for i, j in _swappable(fname, len(args)):
        new = deep_copy(node)
        new.args[i], new.args[j] = new.args[j], new.args[i]
        bugs = ("mask-inverted",) if fname == "where" else ("heads-interleaved", "reshape-without-transpose")
        yield (
            new,
            "swap",
            f"two arguments of `{fname}` here are the wrong way round",
            f"{src(args[i])}, {src(args[j])} -> {src(args[j])}, {src(args[i])}",
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


def _compare(node: ast.AST, scope: Scope) -> Iterator[Proposal]:
    """The off-by-one operator's shapes: comparisons, range bounds, loop indices, tril/triu and
    slices."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        yield from _comparison_flipped(node)
        yield from _comparison_index(node, scope)
    if isinstance(node, ast.Call) and called(node) == "range" and not node.keywords:
        yield from _range_bounds(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        yield from _term_sign(node)
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Name)
        and node.slice.id in scope.loops
        and isinstance(node.ctx, ast.Load)
    ):
        yield from _subscript_index(node, node.slice.id, scope)
    if isinstance(node, ast.Call) and called(node) in ("tril", "triu"):
        yield from _triangle(node)
    if isinstance(node, ast.Slice):
        yield from _slice_bounds(node)


def _with_side(node: ast.Compare, side: str, value: ast.expr) -> ast.Compare:
    new = deep_copy(node)
    if side == "left":
        new.left = value
    else:
        new.comparators = [value]
    return new


def _comparison_flipped(node: ast.Compare) -> Iterator[Proposal]:
    if type(node.ops[0]) not in _FLIPS:
        return
    old = type(node.ops[0])
    for op in _FLIPS[old]:
        new = deep_copy(node)
        new.ops = [op()]
        yield (new, "compare", "this comparison is the wrong one", f"{_SYMBOL[old]} -> {_SYMBOL[op]}", MASK_BUGS)
    for side in ("left", "right"):
        target = node.left if side == "left" else node.comparators[0]
        if isinstance(target, ast.Constant) and not isinstance(target.value, (int, float)):
            continue
        for new_side, text in _plus_minus(target):
            new = _with_side(node, side, new_side)
            yield (new, "bound", "the bound of this comparison is off by one", f"{src(target)} -> {text}", MASK_BUGS)


def _comparison_index(node: ast.Compare, scope: Scope) -> Iterator[Proposal]:
    for side in ("left", "right"):
        target = node.left if side == "left" else node.comparators[0]
        if not (isinstance(target, ast.Name) and target.id in scope.loops):
            continue
        for other in scope.loops:
            if other != target.id:
                yield (
                    _with_side(node, side, ast.Name(other, ast.Load())),
                    "index",
                    f"this comparison tests `{target.id}`, the wrong index",
                    f"{target.id} -> {other}",
                    ("padding-masks-queries", "causal-off-by-one"),
                )


def _range_bounds(node: ast.Call) -> Iterator[Proposal]:
    for i, arg in enumerate(node.args[:2]):
        for new_arg, text in _plus_minus(arg):
            new = deep_copy(node)
            new.args[i] = new_arg
            yield (new, "range", "a bound of this range is off by one", f"{src(arg)} -> {text}", ("causal-off-by-one",))


def _term_sign(node: ast.BinOp) -> Iterator[Proposal]:
    if int_of(node.right) in (1, -1):
        yield (node.left, "plusone", f"the `{src(node.right)}` here should not be there", f"{src(node)} -> {src(node.left)}", ())
    else:
        new = ast.BinOp(node.left, ast.Sub() if isinstance(node.op, ast.Add) else ast.Add(), node.right)
        yield (new, "sign", "the sign of this term is wrong", f"{src(node)} -> {src(new)}", ("biases-ignored",))


def _subscript_index(node: ast.Subscript, index: str, scope: Scope) -> Iterator[Proposal]:
    for other in scope.loops:
        if other != index:
            new = deep_copy(node)
            new.slice = ast.Name(other, ast.Load())
            yield (new, "index+", f"`{index}` is the wrong index here", f"{src(node)} -> {src(new)}", ())


def _triangle(node: ast.Call) -> Iterator[Proposal]:
    """tril/triu: the diagonal moved by one (argument, keyword or added), or the other triangle."""
    name = called(node)
    what = f"the diagonal of `{name}` is off by one"
    for i, arg in enumerate(node.args[1:], 1):
        if (v := int_of(arg)) is not None:
            for d in (-1, 1):
                new = deep_copy(node)
                new.args[i] = const(v + d)
                yield (new, "bound", what, f"{v} -> {v + d}", MASK_BUGS)
    for i, kw in enumerate(node.keywords):
        if kw.arg in ("k", "diagonal") and (v := int_of(kw.value)) is not None:
            for d in (-1, 1):
                new = deep_copy(node)
                new.keywords[i].value = const(v + d)
                yield (new, "bound", what, f"{kw.arg}={v} -> {kw.arg}={v + d}", MASK_BUGS)
    if len(node.args) == 1 and not node.keywords:
        for d in (-1, 1):
            new = deep_copy(node)
            new.args.append(const(d))
            yield (new, "bound", what, f"{name}(...) -> {name}(..., {d})", MASK_BUGS)
    other = "triu" if name == "tril" else "tril"
    new = deep_copy(node)
    new.func = ast.Attribute(new.func.value, other, ast.Load()) if isinstance(new.func, ast.Attribute) else ast.Name(other, ast.Load())
    yield (new, "compare", f"`{name}` keeps the wrong triangle", f"{name} -> {other}", MASK_BUGS)


def _slice_bounds(node: ast.Slice) -> Iterator[Proposal]:
    for part in ("lower", "upper"):
        target = getattr(node, part)
        if target is None:
            continue
        for new_side, text in _plus_minus(target):
            new = deep_copy(node)
            setattr(new, part, new_side)
            yield (new, "bound", "a bound of this slice is off by one", f"{src(target)} -> {text}", ("causal-off-by-one",))


def _plus_minus(node: ast.AST) -> Iterator[tuple[ast.expr, str]]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and int_of(node.right) == 1:
        yield node.left, src(node.left)
    value = int_of(node)
    for op, d in ((ast.Add, 1), (ast.Sub, -1)):
        new: ast.expr = const(value + d) if value is not None else ast.BinOp(deep_copy(node), op(), ast.Constant(1))
        yield new, src(new)


def _negate(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    new: Any
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.Invert)):
        yield (
            node.operand,
            "negate",
            "this negation reads the mask backwards",
            f"{src(node)} -> {src(node.operand)}",
            ("mask-inverted",),
        )
        return
    if isinstance(node, ast.IfExp):
        new = ast.IfExp(node.test, node.orelse, node.body)
        yield (new, "negate", "the two branches of this conditional are the wrong way round", "swap the branches", ("mask-inverted",))
    if isinstance(node, ast.Call) and called(node) == "masked_fill" and node.args:
        new = deep_copy(node)
        new.args[0] = _invert(node.args[0], "~")
        yield (
            new,
            "negate",
            "this `masked_fill` fills the allowed entries instead of the blocked ones",
            f"{src(node.args[0])} -> {src(new.args[0])}",
            ("mask-inverted",),
        )
    if (
        isinstance(parent, ast.keyword)
        and parent.arg in ("where", "mask")
        and not isinstance(node, ast.UnaryOp)
        or isinstance(parent, ast.Call)
        and called(parent) in ("where", "masked_fill")
        and parent.args
        and parent.args[0] is node
        and not isinstance(node, (ast.UnaryOp, ast.Name))
    ):
        new = _invert(node, "~")
        yield (new, "negate", "this mask is read backwards here", f"{src(node)} -> {src(new)}", ("mask-inverted",))
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and MASKY.search(node.id) and not (isinstance(parent, ast.UnaryOp)):
        test = _is_test(node, parent)
        if test or (isinstance(parent, ast.Call) and node in parent.args and called(parent) == "where"):
            new = _invert(node, "not" if test else "~")
            yield (new, "negate", f"`{node.id}` is read backwards here", f"{node.id} -> {src(new)}", ("mask-inverted",))


def _is_test(node: ast.AST, parent: ast.AST | None) -> bool:
    return (isinstance(parent, (ast.If, ast.IfExp, ast.While)) and parent.test is node) or (
        isinstance(parent, ast.comprehension) and node in parent.ifs
    )


def _invert(node: ast.expr, how: str) -> ast.expr:
    return ast.UnaryOp(ast.Not() if how == "not" else ast.Invert(), deep_copy(node))


def _transpose(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    new: Any
    bugs = ("weights-transposed", "transpose-reverses-all-axes", "reshape-without-transpose")
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
        yield (node.value, "transpose", "this transpose should not be here", f"{src(node)} -> {src(node.value)}", bugs)
        if node.attr == "T":
            new = ast.Call(ast.Attribute(node.value, "swapaxes", ast.Load()), [const(-1), const(-2)], [])
            yield (new, "transpose", "`.T` reverses every axis here, not just the last two", f"{src(node)} -> {src(new)}", bugs)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("transpose", "permute", "swapaxes", "t")
        and not (isinstance(node.func.value, ast.Name) and node.func.value.id in (scope.np, scope.torch))
    ):
        yield (node.func.value, "transpose", "this transpose should not be here", f"{src(node)} -> {src(node.func.value)}", bugs)
    elif isinstance(node, ast.Call) and called(node) in ("transpose", "swapaxes", "permute") and node.args:
        yield (node.args[0], "transpose", "this transpose should not be here", f"{src(node)} -> {src(node.args[0])}", bugs)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("reshape", "view"):
        receiver = node.func.value
        if not (isinstance(receiver, ast.Call) and called(receiver) in ("transpose", "permute", "swapaxes")) and not (
            isinstance(receiver, ast.Name) and receiver.id in (scope.np, scope.torch)
        ):
            new = deep_copy(node)
            new.func.value = ast.Call(ast.Attribute(deep_copy(receiver), "swapaxes", ast.Load()), [ast.Constant(1), ast.Constant(2)], [])
            yield (
                new,
                "transpose+",
                "the axes are not moved before this reshape",
                f"{src(receiver)} -> {src(new.func.value)}",
                ("reshape-without-transpose",),
            )
            after = ast.Call(ast.Attribute(deep_copy(node), "swapaxes", ast.Load()), [ast.Constant(1), ast.Constant(2)], [])
            yield (
                after,
                "transpose+",
                "the axes are not moved after this reshape",
                f"{src(node)} -> {src(after)}",
                ("reshape-without-transpose",),
            )
    operand = (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.MatMult)) or (
        isinstance(parent, ast.Call) and called(parent) in ("matmul", "dot") and node in parent.args
    )
    if (
        operand
        and isinstance(node, (ast.Name, ast.Subscript, ast.Call))
        and not (isinstance(node, ast.Call) and called(node) in ("transpose", "swapaxes", "permute"))
    ):
        new = ast.Attribute(deep_copy(node), "T", ast.Load())
        yield (new, "transpose+", "this operand needs a transpose", f"{src(node)} -> {src(new)}", bugs)


SQRT = ("sqrt",)
SCORES_NAME = re.compile(r"s|att\w*|score\w*|logit\w*|sim\w*|dots?|energ\w*|qk\w*")  # `scaled = scores`: never scaled


def _scale(node: ast.AST, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    """The width under the square root, a scale too many and a scale missing."""
    yield from _sqrt_width(node, scope)
    yield from _power_width(node, scope)
    yield from _power_root(node)
    yield from _scaled_twice(node)
    plain = isinstance(node, ast.Name) and SCORES_NAME.fullmatch(node.id) and isinstance(parent, ast.Assign) and node is parent.value
    if (plain or _scores(node)) and not (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Div)) and not _weighted(node):
        queries = [f"{n}.shape[-1]" for n in sorted(scope.names) if qkv(n) == "q"][:2]
        for width in [*scope.widths, *queries] if plain else scope.widths or queries:  # else only with no width in scope
            root = ast.parse(width, mode="eval").body
            new = ast.BinOp(deep_copy(node), ast.Div(), ast.BinOp(root, ast.Pow(), ast.Constant(0.5)))
            yield (new, "scale", "these scores are not scaled", f"{src(node)} -> {src(new)}", ("no-scaling",))


def _sqrt_width(node: ast.AST, scope: Scope) -> Iterator[Proposal]:
    if not (isinstance(node, ast.Call) and called(node) in SQRT and len(node.args) == 1):
        return
    arg = node.args[0]
    yield from _factor_dropped(node, arg, lambda kept: _with_arg(node, kept))
    for width in scope.widths:
        if width != src(arg):
            new = deep_copy(node)
            new.args[0] = ast.Name(width, ast.Load())
            yield (
                new,
                "width",
                "the width under this square root is the wrong one",
                f"sqrt({src(arg)}) -> sqrt({width})",
                ("scale-by-model-width",),
            )


def _power_width(node: ast.AST, scope: Scope) -> Iterator[Proposal]:
    if not (
        isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and isinstance(node.right, ast.Constant) and node.right.value == 0.5
    ):
        return
    yield from _factor_dropped(node, node.left, lambda kept: ast.BinOp(kept, ast.Pow(), ast.Constant(0.5)))
    for width in scope.widths:
        if width != src(node.left):
            new = ast.BinOp(ast.Name(width, ast.Load()), ast.Pow(), ast.Constant(0.5))
            yield (
                new,
                "width",
                "the width under this square root is the wrong one",
                f"{src(node)} -> {src(new)}",
                ("scale-by-model-width",),
            )


def _power_root(node: ast.AST) -> Iterator[Proposal]:
    """A width to the power ±1 where its root was meant (`inv = d**-1.0` for `d**-0.5`)."""
    if not (
        isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and isinstance(node.left, (ast.Name, ast.Attribute, ast.Subscript))
    ):
        return
    exponent = node.right
    negative = isinstance(exponent, ast.UnaryOp) and isinstance(exponent.op, ast.USub)
    value = exponent.operand if isinstance(exponent, ast.UnaryOp) and negative else exponent
    if not (isinstance(value, ast.Constant) and value.value in (1, 1.0) and not isinstance(value.value, bool)):
        return
    root: ast.expr = ast.UnaryOp(ast.USub(), ast.Constant(0.5)) if negative else ast.Constant(0.5)
    new = ast.BinOp(deep_copy(node.left), ast.Pow(), root)
    yield (new, "scale", "the scale takes the width itself, not its square root", f"{src(node)} -> {src(new)}", ("double-scaling",))


def _with_arg(node: ast.Call, arg: ast.expr) -> ast.Call:
    new = deep_copy(node)
    new.args[0] = arg
    return new


def _factor_dropped(node: ast.AST, arg: ast.expr, rebuild: Callable[[ast.expr], ast.expr]) -> Iterator[Proposal]:
    """A product under the square root (`sqrt(hd * H)`): one factor kept, the other dropped."""
    if not (isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Mult)):
        return
    for kept in (arg.left, arg.right):
        new = rebuild(deep_copy(kept))
        what = "the width under this square root is the wrong one"
        yield (new, "width", what, f"{src(node)} -> {src(new)}", ("scale-by-model-width",))


def _scaled_twice(node: ast.AST) -> Iterator[Proposal]:
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Mult))):
        return
    for keep, drop in ((node.left, node.right), (node.right, node.left)):
        if keep is node.right and isinstance(node.op, ast.Div):
            continue
        if any(_a_scale(n) for n in ast.walk(drop)):
            yield (
                keep,
                "scale",
                "the scores are scaled here once too often",
                f"{src(node)} -> {src(keep)}",
                ("double-scaling", "scale-by-model-width"),
            )


def _a_scale(node: ast.AST) -> bool:
    return (
        (isinstance(node, ast.Call) and called(node) in SQRT)
        or (isinstance(node, ast.Name) and "scale" in node.id.lower())
        or (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow))
    )


def _scores(node: ast.AST) -> bool:
    """A product that may be the raw scores."""
    return bool(
        (isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult))
        or (isinstance(node, ast.Call) and called(node) in ("matmul", "einsum", "bmm"))
        or (isinstance(node, ast.Call) and called(node) == "sum" and node.args and isinstance(node.args[0], ast.GeneratorExp))
    )


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


def _unread_parameter(node: ast.AST, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    """A call's argument made up in place (`Step(p)(x, 0, cache)`) while a parameter of the
    function that would give it is never read (`position`): that parameter passed instead."""
    if not (isinstance(parent, ast.Call) and node in parent.args and not isinstance(node, (ast.Name, ast.Starred))):
        return
    given = [a.arg for a in scope.fn.args.args + scope.fn.args.kwonlyargs + scope.fn.args.posonlyargs]
    for name in (n for n in given if n in scope.unused and n not in ("self", "cls")):
        new = ast.Name(name, ast.Load())
        yield (new, "argument", f"`{name}` is never read: this argument is made up in its place", f"{src(node)} -> {name}", ())


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
        and called(parent) in ("copyto", "where", "masked_fill", "full", "fill")
        or isinstance(parent, ast.keyword)
        and parent.arg in ("value", "fill_value")
    )
    if (value <= -1e3 or (value < 0 and fill) or (value == 0 and fill)) and value != float("-inf"):
        yield (
            inf,
            "constant",
            f"the fill value {src(node)} is not low enough to block an entry",
            f"{src(node)} -> {NEG_INF}",
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


def _missing(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    """A term from names already in scope: an unused name added, subtracted or multiplied in."""
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.MatMult)
        or isinstance(node, ast.Call)
        and called(node) in ("matmul", "einsum", "dot", "linear")
    ):
        yield from _bias_missing(node, scope)
    if (
        isinstance(parent, ast.Return)
        and node is parent.value
        or isinstance(parent, ast.Assign)
        and node is parent.value
        and _returned(parent, scope)
    ):
        yield from _projection_missing(node, scope)
    if isinstance(node, ast.Call) and called(node) == "exp" and len(node.args) >= 1:
        yield from _shift_missing(node, scope)


def _bias_missing(node: Any, scope: Scope) -> Iterator[Proposal]:
    for name in scope.unused:
        new = ast.BinOp(deep_copy(node), ast.Add(), ast.Name(name, ast.Load()))
        yield (new, "term", "a term is missing here", f"{src(node)} -> {src(new)}", ("biases-ignored",))
    for dict_name, keys in scope.params:
        for key in sorted(keys):
            if key.startswith("W") and "b" + key[1:] not in keys and _mentions(node, key):
                bias = ast.parse(
                    f"({dict_name}.get({'b' + key[1:]!r}) if {dict_name}.get({'b' + key[1:]!r}) is not None else 0)", mode="eval"
                ).body
                new = ast.BinOp(deep_copy(node), ast.Add(), bias)
                yield (new, "term", f"the bias b{key[1:]} is never added", f"{src(node)} -> {src(new)}", ("biases-ignored",))


def _projection_missing(node: Any, scope: Scope) -> Iterator[Proposal]:
    for dict_name, keys in scope.params:
        if "Wo" not in keys:
            extra = "" if "bo" in keys else f" + ({dict_name}.get('bo') if {dict_name}.get('bo') is not None else 0)"
            proj: Any = ast.parse(f"x @ {dict_name}['Wo']{extra}", mode="eval").body
            (proj.left if extra else proj).left = deep_copy(node)
            yield (proj, "term", "the output projection is never applied", f"{src(node)} -> {src(proj)}", ("no-output-projection",))
    for name in scope.unused:
        new = ast.BinOp(deep_copy(node), ast.MatMult(), ast.Name(name, ast.Load()))
        yield (new, "term", "a projection is missing here", f"{src(node)} -> {src(new)}", ("no-output-projection",))
        for other in scope.unused:
            if other != name:
                new = ast.BinOp(
                    ast.BinOp(deep_copy(node), ast.MatMult(), ast.Name(name, ast.Load())), ast.Add(), ast.Name(other, ast.Load())
                )
                yield (new, "term", "a projection is missing here", f"{src(node)} -> {src(new)}", ("no-output-projection",))


def _shift_missing(node: Any, scope: Scope) -> Iterator[Proposal]:
    arg = node.args[0]
    for name in scope.unused + [m for m in scope.maxes if m != src(arg)]:
        new = deep_copy(node)
        new.args[0] = ast.BinOp(deep_copy(arg), ast.Sub(), ast.Name(name, ast.Load()))
        yield (new, "term", "the max is not subtracted before `exp`", f"{src(arg)} -> {src(new.args[0])}", ("softmax-overflow",))
    if scope.np or scope.torch:
        shift = "x.max(axis=-1, keepdims=True)" if scope.np else "x.amax(dim=-1, keepdim=True)"
        new = deep_copy(node)
        sub: Any = ast.parse(shift, mode="eval").body
        sub.func.value = deep_copy(arg)
        new.args[0] = ast.BinOp(deep_copy(arg), ast.Sub(), sub)
        yield (new, "term", "the max is not subtracted before `exp`", f"{src(arg)} -> {src(new.args[0])}", ("softmax-overflow",))


QUERY_KEYS = {"Wq": "Wo", "bq": "bo", "q": "o", "w_q": "w_o", "b_q": "b_o"}


def _projected(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    """The output projection, done the way the function projects the queries (`project(x, "q")`,
    `x @ self.weight("Wq") + ...`) with the output's weights, applied to what is returned (or
    collected with `append` into what is returned, or given its bias `+ bo` alone), when the
    function never reads the output's weights."""
    if (
        not isinstance(node, ast.expr)
        or any(_mentions(scope.fn, key) for key in ("Wo", "w_o", "o"))
        or not _handed_out(node, scope, parent)
    ):
        return
    for query in _query_projections(scope.fn):
        if isinstance(query, ast.Call):
            proj: Any = deep_copy(query)
            proj.args[0] = deep_copy(node)
        else:
            proj = ast.BinOp(deep_copy(node), ast.MatMult(), deep_copy(query.right))
        for sub in ast.walk(proj):
            if isinstance(sub, ast.Constant) and sub.value in QUERY_KEYS:
                sub.value = QUERY_KEYS[sub.value]
        yield (proj, "term", "the output projection is never applied", f"{src(node)} -> {src(proj)}", ("no-output-projection",))
        return


def _handed_out(node: ast.expr, scope: Scope, parent: ast.AST | None) -> bool:
    """Returned (alone or first of a tuple), assigned to a name that is returned, collected into
    one, or given only the output's bias (`merged + self.bias("bo")`)."""
    collected = (
        isinstance(parent, ast.Call)
        and called(parent) == "append"
        and parent.args == [node]
        and isinstance(parent.func, ast.Attribute)
        and isinstance(parent.func.value, ast.Name)
        and _returned(ast.Assign([ast.Name(parent.func.value.id, ast.Store())], node), scope)
    )
    first = (
        isinstance(parent, ast.Tuple)
        and parent.elts
        and parent.elts[0] is node
        and any(isinstance(n, ast.Return) and n.value is parent for n in ast.walk(scope.fn))
    )
    biased = (
        isinstance(parent, ast.BinOp)
        and isinstance(parent.op, ast.Add)
        and parent.left is node
        and any(_mentions(parent.right, key) for key in ("bo", "b_o"))
    )
    return bool(
        collected
        or first
        or biased
        or (isinstance(parent, ast.Return) and node is parent.value)
        or (isinstance(parent, ast.Assign) and node is parent.value and _returned(parent, scope))
    )


def _query_projections(fn: ast.AST) -> list[Any]:
    """How the function projects the queries: calls that read a query key beside their first
    argument (`project(x, "q")`), then products whose right side reads one (`x @ p["Wq"]`)."""
    calls = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Call) and n.args and not _reads_query(n.args[0]) and any(_reads_query(a) for a in n.args[1:])
    ]
    products = [n for n in ast.walk(fn) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult) and _reads_query(n.right)]
    return calls + products


def _reads_query(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and n.value in ("Wq", "q", "w_q") for n in ast.walk(node))


def _mentions(node: ast.AST, key: str) -> bool:
    return any(isinstance(n, ast.Constant) and n.value == key for n in ast.walk(node))


def _returned(assign: ast.Assign, scope: Scope) -> bool:
    names = {t.id for t in assign.targets if isinstance(t, ast.Name)}
    return any(
        isinstance(n, ast.Return) and n.value is not None and any(isinstance(m, ast.Name) and m.id in names for m in ast.walk(n.value))
        for n in ast.walk(scope.fn)
    )


def _max_allowed(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    if not isinstance(node, ast.Call) or called(node) not in ("max", "amax") or not scope.masks:
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
        replacement = deep_copy(target)
        sub = replace_name(sub, holder, replacement)
        new = deep_copy(node)
        if method:
            new.func.value = sub
        else:
            new.args[0] = sub
        yield (new, "max", "this max also counts the blocked entries", f"{src(target)} -> {src(sub)}", ("max-over-blocked",))


# --- which of the queries, keys and values ------------------------------------------------------

_QKV_NAME = re.compile(r"(?:(q|k|v)(?:s|_\w*|\d*)|(query|key|value)(?:s|_\w*)?|(queries|keys|values))")
_QKV_KEY = re.compile(r"(W_?|w_|)([qkv])(_proj)?")
SWAP_BUGS = ("kv-from-queries",)


def qkv(name: str) -> str:
    """Which of the queries, keys and values a name says it holds ('q', 'k', 'v'), or ''."""
    m = _QKV_NAME.fullmatch(name)
    return (next(g for g in m.groups() if g)[0].lower()) if m else ""


def _request(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    """The string that picks a projection (`project(x, "q")`, `p["Wk"]`) naming another of the
    queries, keys and values."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return
    if not ((isinstance(parent, ast.Call) and node in parent.args) or (isinstance(parent, ast.Subscript) and parent.slice is node)):
        return
    m = _QKV_KEY.fullmatch(node.value)
    if m is None:
        return
    for other in "qkv".replace(m.group(2), ""):
        text = f"{m.group(1)}{other}{m.group(3) or ''}"
        what = f"the {node.value!r} here picks the wrong projection"
        yield (ast.Constant(text), "request", what, f"{node.value!r} -> {text!r}", SWAP_BUGS)


def _operand(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    """The right operand of a product (`weights @ q`, `q @ v.T`) naming the queries, keys or values,
    replaced by another of them that the function binds."""
    if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and qkv(node.id)):
        return
    product = (
        (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.MatMult) and parent.right is node)
        or (isinstance(parent, ast.Call) and called(parent) in ("matmul", "einsum", "bmm", "dot") and node in parent.args)
        or (isinstance(parent, ast.Attribute) and parent.attr in ("T", "mT", "transpose", "swapaxes", "permute"))
    )
    if not product:
        return
    mine = qkv(node.id)
    others = [n for n in sorted(scope.names) if qkv(n) and qkv(n) != mine and len(n) <= len(node.id) + 4][:4]
    for other in others:
        yield (ast.Name(other, ast.Load()), "operand", f"`{node.id}` is the wrong operand here", f"{node.id} -> {other}", SWAP_BUGS)


def _split_heads(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    """`a.reshape(B, H, T, hd)` that splits the heads without moving them: the two middle sizes
    swapped and the axes moved after (`a.reshape(B, T, H, hd).swapaxes(1, 2)`)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("reshape", "view")):
        return
    if len(node.args) != 4 or node.keywords or (isinstance(parent, ast.Attribute) and parent.attr in ("transpose", "swapaxes", "permute")):
        return
    swapped = deep_copy(node)
    swapped.args[1], swapped.args[2] = swapped.args[2], swapped.args[1]
    new = ast.Call(ast.Attribute(swapped, "swapaxes", ast.Load()), [ast.Constant(1), ast.Constant(2)], [])
    what = "the heads are split here without moving their axis"
    yield (new, "transpose+", what, f"{src(node)} -> {src(new)}", ("reshape-without-transpose", "heads-interleaved"))


def _head_columns(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    """`slice(...)` choosing a head's columns in a loop over the heads: the head's own block,
    `slice(h * hd, (h + 1) * hd)`."""
    if not (isinstance(node, ast.Call) and called(node) == "slice" and node.args) or not scope.loops:
        return
    if len(node.args) < 3 and any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult) for n in ast.walk(node)):
        return  # already a block of columns
    for loop, width in itertools.product(scope.loops[:2], scope.widths[:3]):
        new: Any = ast.parse(f"slice({loop} * {width}, ({loop} + 1) * {width})", mode="eval").body
        if src(new) != src(node):
            yield (new, "index", "these are not the head's own columns", f"{src(node)} -> {src(new)}", ("heads-interleaved",))


def _bias_returned(node: Any, scope: Scope, parent: ast.AST | None) -> Iterator[Proposal]:
    """A value returned without the bias the function read and never used (`b = p.get("bq")`,
    then `return y`): `y + (b if b is not None else 0)`."""
    returned = (isinstance(parent, ast.Return) and node is parent.value) or (
        isinstance(parent, ast.Assign) and node is parent.value and _returned(parent, scope)
    )
    if not returned or isinstance(node, ast.Tuple):
        return
    for name in scope.unused:
        term: Any = ast.parse(f"({name} if {name} is not None else 0)", mode="eval").body
        new = ast.BinOp(deep_copy(node), ast.Add(), term)
        yield (new, "term", f"`{name}` is read and never added", f"{src(node)} -> {src(new)}", ("biases-ignored",))


OPERATORS: tuple[Callable, ...] = (
    _negate,
    _compare,
    _axis,
    _permute,
    _swap,
    _transpose,
    _scale,
    _constant,
    _unread_parameter,
    _missing,
    _projected,
    _max_allowed,
    _request,
    _operand,
    _split_heads,
    _head_columns,
    _bias_returned,
)
