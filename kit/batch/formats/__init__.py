"""The output formats of `attn-kit grade`, one module each (DMOJ's executors: found by name).

A format is a module of this folder that defines `FORMAT = Format(...)`: its name (declared there
and nowhere else), the file suffix a bare `--out x.SUFFIX` maps to, whether it describes one
submission per file (the platforms' results.json), and the function that renders it. `FORMATS`
is built from the folder, so a new module is a new format everywhere: `--out`, `--format`, the
help and the docs' table (a test checks the docs name every format). Modules starting with `_`
are shared helpers, not formats.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Format:
    """One output format. `render(batch, result, hidden_details)` gives the file's text: for a
    per-submission format `result` is the one submission it describes, otherwise None (the whole
    run)."""

    name: str
    render: Callable[[Any, Any, bool], str]
    per_submission: bool = False
    suffix: str | None = None  # a bare `--out x.SUFFIX` is this format
    audience: str = ""  # who reads it (the docs' table and --help)


def _found() -> dict[str, Format]:
    formats: dict[str, Format] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        fmt = getattr(module, "FORMAT", None)
        if not isinstance(fmt, Format):
            raise ImportError(f"{module.__name__} defines no FORMAT = Format(...)")
        if fmt.name in formats:
            raise ImportError(f"two output formats are named {fmt.name!r}")
        formats[fmt.name] = fmt
    return formats


FORMATS: dict[str, Format] = _found()
NAMES: tuple[str, ...] = tuple(FORMATS)
SUFFIXES: dict[str, str] = {f.suffix: f.name for f in FORMATS.values() if f.suffix}
