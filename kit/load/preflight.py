"""Pre-flight of a candidate file, in the kit's process and without running it.

Checks that the file exists and parses, finds which exercise it is for, and lists the top-level
imports (for --pure). Running the file is the worker's job.
"""

from __future__ import annotations

import ast
import functools
import inspect
import io
import os
import re
import stat
import sys
import tokenize
from pathlib import Path

from attn_kit.base.errors import LoadError, UsageError
from attn_kit.base.recordtype import record
from attn_kit.load import catalog

HEADER = re.compile(r"^#\s*attn-kit:\s*([\w-]+)\s*$")


@record
class SourceFile:
    path: Path
    text: str
    tree: ast.Module
    header: str | None  # exercise id from the first-line header, if any
    defined: tuple[str, ...]  # top-level function names

    def imports(self) -> list[tuple[str, int]]:
        """Top-level module names imported anywhere in the file, with the line of first use."""
        return list(self._imports)

    @functools.cached_property
    def _imports(self) -> tuple[tuple[str, int], ...]:  # checks ask for every call: walk the tree once
        found: dict[str, int] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found.setdefault(alias.name.split(".")[0], node.lineno)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.setdefault(node.module.split(".")[0], node.lineno)
        return tuple(sorted(found.items(), key=lambda item: item[1]))

    def dynamic_imports(self) -> list[tuple[str, int]]:
        """Modules named by a string constant in `__import__("x")`, `importlib.import_module("x")`,
        `sys.modules["x"]` or `sys.modules.get("x")` (for --pure; the worker also records what
        is imported at run time)."""
        found: dict[str, int] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.expr) and (name := _module_named_in(node)):
                found.setdefault(name.split(".")[0], node.lineno)
        return sorted(found.items(), key=lambda item: item[1])

    def non_stdlib_imports(self) -> list[tuple[str, int]]:
        seen: dict[str, int] = {}
        for name, line in self.imports() + self.dynamic_imports():
            if name not in sys.stdlib_module_names and name != "__future__":
                seen.setdefault(name, line)
        return sorted(seen.items(), key=lambda item: item[1])


def _module_named_in(node: ast.expr) -> str | None:
    """The module a string constant names in `__import__("x")`, `importlib.import_module("x")`,
    `sys.modules.get("x")` or `sys.modules["x"]`, else None."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        func = node.func
        callee = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        target = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
        if callee in ("__import__", "import_module") or (callee == "get" and target.endswith("sys.modules")):
            return node.args[0].value
    elif (
        isinstance(node, ast.Subscript)
        and ast.unparse(node.value).endswith("sys.modules")
        and isinstance(node.slice, ast.Constant)
        and isinstance(node.slice.value, str)
    ):
        return node.slice.value
    return None


MAX_SOURCE_BYTES = 1 << 20  # a solution file larger than 1 MiB is refused


def read_text(path: Path, what: str = "file") -> str:
    """A Python source file's text, decoded as Python decodes it (a UTF-8 BOM, a PEP 263 coding
    cookie). UsageError for what is not a readable regular file; LoadError for a file that is
    too large, holds a NUL byte or is not in its declared encoding."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UsageError(missing_file(Path(path))) from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{path} is a folder; give the path of your solution {what}.")
    if not stat.S_ISREG(info.st_mode):
        kind = (
            "a named pipe (FIFO)"
            if stat.S_ISFIFO(info.st_mode)
            else "a device"
            if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
            else "not a regular file"
        )
        raise UsageError(f"{path} is {kind}; give the path of a Python {what}.")
    if info.st_size > MAX_SOURCE_BYTES:
        raise LoadError(f"{path} is {info.st_size:,} bytes; the kit reads Python files of at most {MAX_SOURCE_BYTES >> 20} MiB.")
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_SOURCE_BYTES:
        raise LoadError(f"{path} is larger than {MAX_SOURCE_BYTES >> 20} MiB; the kit reads smaller Python files.")
    nul = data.find(b"\0")
    if nul >= 0:
        raise LoadError(f"{path} contains a NUL byte (at byte {nul:,}), which Python source cannot; is it the right file?")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise LoadError(f"{path} cannot be decoded as Python source ({reason}); save it as UTF-8.") from None


def missing_file(path: Path) -> str:
    """Why `path` cannot be graded when it does not exist: "did you mean" a file beside it with
    `.py` added or a similar name, else how to create it."""
    import difflib

    if path.suffix != ".py" and path.with_name(path.name + ".py").is_file():
        return f"no such file: {path}. Did you mean {path.with_name(path.name + '.py')}?"
    try:
        beside = sorted(p.name for p in path.parent.glob("*.py"))
    except OSError:
        beside = []
    close = difflib.get_close_matches(path.name, beside, n=1, cutoff=0.8)
    if close:
        return f"no such file: {path}. Did you mean {path.with_name(close[0])}?"
    return f"no such file: {path}. Create it with `attn-kit start EXERCISE {path}`."


def read_source(path: str | Path) -> SourceFile:
    """Read and parse a candidate file; UsageError if missing, LoadError on a syntax error."""
    path = Path(path)
    text = read_text(path)
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise LoadError(syntax_error_text(path, exc)) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise LoadError(f"{path} cannot be parsed: {type(exc).__name__}") from None
    first = text.splitlines()[0] if text else ""
    match = HEADER.match(first)
    defined = tuple(node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))
    source = SourceFile(path, text, tree, match.group(1) if match else None, defined)
    problem = shadowing_problem(source)
    if problem:
        raise LoadError(problem)
    return source


KIT_NEEDS = ("numpy", "torch")  # modules the kit's side of the worker imports while running the file


def shadowing_problem(source: SourceFile) -> str:
    """Why the file's name cannot work ('' when it can): the worker imports the file as a module
    named by its stem, so `numpy.py` would take the place of NumPy, for the file's own
    `import numpy` and for the kit in the worker."""
    stem = source.path.stem
    imported = {name for name, _ in source.imports()}
    if stem not in imported and stem not in KIT_NEEDS:
        return ""
    who = "your file imports" if stem in imported else "the kit needs while it runs your code"
    return (
        f"{source.path.name} has the name of the module `{stem}`, which {who}: under that name your "
        f"file hides the real `{stem}` (its `import {stem}` would find your file itself, hence errors "
        f"like \"module '{stem}' has no attribute ...\"). Rename it, e.g. to {stem}_solution.py."
    )


def syntax_error_text(path: Path, exc: SyntaxError) -> str:
    """'solution.py:12: SyntaxError: ...' followed by the line and a caret under the column."""
    text = f"{path}:{exc.lineno}: {type(exc).__name__}: {exc.msg}"
    if exc.text:
        line = exc.text.rstrip("\n")
        stripped = line.lstrip()
        caret = max((exc.offset or 1) - 1 - (len(line) - len(stripped)), 0)
        text += f"\n    {stripped}\n    {' ' * caret}^"
    return text


def detect_exercise(source: SourceFile, override: str | None = None) -> catalog.Exercise:
    """--exercise wins; then the `# attn-kit: ID` header; then which main function is defined."""
    if override:
        return catalog.exercise(override)
    if source.header:
        if source.header in catalog.ids():
            return catalog.exercise(source.header)
        raise UsageError(
            f"{source.path} starts with `# attn-kit: {source.header}`, which is not an "
            f"exercise. Exercises: {', '.join(catalog.exercises())}"
        )
    ids = ", ".join(catalog.exercises())
    matches = [e for e in catalog.exercises().values() if e.main in source.defined]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        import difflib

        mains = {e.main: e.id for e in catalog.exercises().values()}
        near = [(name, close[0]) for name in source.defined if (close := difflib.get_close_matches(name, list(mains), n=1, cutoff=0.8))]
        spelled = f" Did you mean `{near[0][1]}` ({mains[near[0][1]]}) where it says `{near[0][0]}`?" if near else ""
        raise LoadError(
            f"cannot tell which exercise {source.path} is for: it defines none of the "
            f"exercises' main functions.{spelled} Add `# attn-kit: ID` as its first line or pass "
            f"--exercise ID. Exercises: {ids}"
        )
    raise LoadError(
        f"{source.path} could be any of {', '.join(e.id for e in matches)}. Add "
        f"`# attn-kit: ID` as its first line or pass --exercise ID. Exercises: {ids}"
    )


def check_functions(exercise: catalog.Exercise, functions: dict[str, str], path: Path) -> None:
    """Every function the exercise needs is defined, with parameters a caller can use."""
    defined = sorted(functions)
    for fn in exercise.functions:
        if fn.name not in functions:
            import difflib

            close = difflib.get_close_matches(fn.name, defined, n=1, cutoff=0.6)
            hint = f" Did you mean `{close[0]}`?" if close else ""
            listing = ", ".join(defined) if defined else "no functions"
            raise LoadError(
                f"{path} does not define `{fn.name}`, which {exercise.id} needs "
                f"(expected `{fn.signature}`).{hint} The file defines: {listing}."
            )
        problem = signature_problem(fn.signature, functions[fn.name])
        if problem:
            raise LoadError(
                f"`{fn.name}` in {path} has the wrong signature: {problem}. "
                f"Expected `{fn.signature}`; yours is `{fn.name}{functions[fn.name]}`."
            )


def parameters(text: str) -> list[inspect.Parameter] | None:
    try:
        tree = ast.parse(f"def f{text}: pass")
    except (SyntaxError, ValueError):  # ValueError: a NUL in a default's repr
        return None
    function = tree.body[0]
    if not isinstance(function, ast.FunctionDef):  # always one: the text follows `def f`
        return None
    args = function.args
    params = []
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for arg, default in zip(positional, defaults):
        params.append(
            inspect.Parameter(arg.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=inspect.Parameter.empty if default is None else 0)
        )
    if args.vararg:
        params.append(inspect.Parameter(args.vararg.arg, inspect.Parameter.VAR_POSITIONAL))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        params.append(inspect.Parameter(arg.arg, inspect.Parameter.KEYWORD_ONLY, default=inspect.Parameter.empty if default is None else 0))
    if args.kwarg:
        params.append(inspect.Parameter(args.kwarg.arg, inspect.Parameter.VAR_KEYWORD))
    return params


def signature_problem(expected: str, actual: str) -> str:
    """Why a function with signature `actual` cannot be called as `expected` is, or ''."""
    want = parameters(expected[expected.index("(") :])
    have = parameters(actual)
    if want is None or have is None:
        return ""
    sig = inspect.Signature(have)
    required = [p.name for p in want if p.default is inspect.Parameter.empty]
    optional = [p.name for p in want if p.default is not inspect.Parameter.empty]
    try:
        sig.bind(*required)
    except TypeError as exc:
        return f"it cannot be called with the {len(required)} required argument(s) ({exc})"
    for name in optional:
        try:
            sig.bind(*required, **{name: None})
        except TypeError:
            return f"it has no parameter `{name}`"
    return ""


def file_exercise(path: Path) -> str | None:
    """The exercise named by a file's `# attn-kit: ID` header, if it has one. Only a regular file
    is opened, and only its first 200 bytes are read: a FIFO, a device or a huge one-line file
    names nothing (and never blocks, which matters on the error paths that ask)."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as handle:
            first = handle.read(200).decode("utf-8", errors="replace").split("\n", 1)[0]
    except OSError:
        return None
    if first.startswith("# attn-kit:"):
        return first.split(":", 1)[1].strip() or None
    return None
