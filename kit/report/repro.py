"""--repro DIR: one standalone Python file per failing check, rebuilding its failing call.

Each file imports the candidate's solution by path, rebuilds the inputs as literals, calls the
function, prints what came back next to what the reference expected, then compares them (which
entries differ, the largest difference and where) and exits 1 when they differ.
"""

from __future__ import annotations

import pprint
from pathlib import Path
from typing import Any

import numpy as np

from attn_kit.base import safefile
from attn_kit.report.results import FAILED, Report

TEMPLATE = '''"""attn-kit repro for check `{check}` (exercise {exercise}, seed {seed}).

{title}
{message}

Run: python {name}
"""
import importlib.util
import sys
from math import inf, nan  # noqa: F401 - non-finite inputs are written as inf and nan

import numpy as np

np.set_printoptions(precision=6, suppress=True, linewidth=100)
SOLUTION = {solution!r}


def show(label, value):
    """Print a return value; a tuple such as (out, weights) part by part."""
    if isinstance(value, tuple):
        for i, part in enumerate(value):
            show(f"{{label}}[{{i}}]", part)
        return
    print(f"{{label}}:")
    print(np.asarray(value))


def compare(label, yours, expected, rtol=1e-6, atol=1e-8):
    """Print where yours and expected differ, part by part; True when they agree."""
    if isinstance(expected, tuple):
        if not isinstance(yours, tuple) or len(yours) != len(expected):
            print(f"{{label}}: expected a tuple of {{len(expected)}}, yours is {{type(yours).__name__}}")
            return False
        return all([compare(f"{{label}}[{{i}}]", y, e, rtol, atol) for i, (y, e) in enumerate(zip(yours, expected))])
    try:
        mine, want = np.asarray(yours, dtype=float), np.asarray(expected, dtype=float)
    except (TypeError, ValueError) as exc:
        print(f"{{label}}: yours is not numbers of a regular shape ({{exc}})")
        return False
    if mine.shape != want.shape:
        print(f"{{label}}: shapes differ: yours {{mine.shape}}, expected {{want.shape}}")
        return False
    off = ~np.isclose(mine, want, rtol=rtol, atol=atol, equal_nan=True)
    if not off.any():
        print(f"{{label}}: yours matches expected (within {{rtol:g}}·|expected| + {{atol:g}})")
        return True
    delta = np.where(off, np.abs(np.nan_to_num(mine - want, nan=np.inf)), 0)
    worst = np.unravel_index(int(np.argmax(delta)), delta.shape) if delta.ndim else ()
    print(f"{{label}}: {{int(off.sum())}} of {{off.size}} entries differ; the largest at index {{tuple(map(int, worst))}}: "
          f"yours {{mine[worst]:.6g}}, expected {{want[worst]:.6g}}")
    return False


spec = importlib.util.spec_from_file_location("solution", SOLUTION)
solution = importlib.util.module_from_spec(spec)
sys.modules["solution"] = solution
spec.loader.exec_module(solution)

{assignments}

result = solution.{fn}({call_args})
show("yours", result)
{expected_block}'''


def literal(value: Any) -> str:
    """Python source that rebuilds value: NumPy arrays as np.array([...]), the rest as literals."""
    if isinstance(value, np.ndarray):
        dtype = ", dtype=bool" if value.dtype == bool else ""
        return f"np.array({pprint.pformat(value.tolist(), width=100, compact=True)}{dtype})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple):
        return "(" + ", ".join(literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, (np.generic,)):
        return repr(value.item())
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):  # without importing torch
        if str(value.device) == "meta":
            return f"torch.empty({tuple(value.shape)}, dtype={value.dtype}, device='meta')"
        values = pprint.pformat(value.detach().cpu().tolist(), width=100, compact=True)
        return f"torch.tensor({values}, dtype={value.dtype})"
    return pprint.pformat(value, width=100, compact=True)


def _parameter_names(exercise_id: str, fn: str, count: int) -> list[str]:
    """The exercise's own parameter names for fn's positional arguments (x, params, ...)."""
    from attn_kit.load import catalog, preflight

    names: list[str] = []
    try:
        signature = catalog.exercise(exercise_id).signature_of(fn)
        names = [p.name for p in preflight.parameters(signature[signature.index("(") :]) or []]
    except (StopIteration, ValueError):
        pass
    return [names[i] if i < len(names) else f"arg{i + 1}" for i in range(count)]


def _docstring_safe(text: str) -> str:
    """Text to put inside the script's docstring: backslashes doubled (a message quoting `\\e[2J`
    or a Windows path is no escape sequence) and no closing triple quote."""
    return text.replace("\\", "\\\\").replace('"""', "'''")


def write(report: Report, folder: str | Path) -> list[Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for result in report.results:
        call = result.failing_call
        if result.status not in FAILED or call is None:
            continue
        names = _parameter_names(report.exercise, call.fn, len(call.args))
        lines = [f"{n} = {literal(v)}" for n, v in zip(names, call.args)]
        lines += [f"{k} = {literal(v)}" for k, v in call.kwargs.items()]
        call_args = ", ".join(names + [f"{k}={k}" for k in call.kwargs])
        if any("torch." in line for line in lines):
            lines.insert(0, "import torch\n")
        if call.expected is not None:
            expected = (
                f'expected = {literal(call.expected)}\nshow("expected (the reference)", expected)\n'
                'print()\nsys.exit(0 if compare("compared", result, expected) else 1)\n'
            )
        else:
            expected = ""
        name = f"repro_{result.id.replace('-', '_')}.py"
        text = TEMPLATE.format(
            check=result.id,
            exercise=report.exercise,
            seed=report.seed,
            title=_docstring_safe(result.title),
            message=_docstring_safe(result.message),
            name=name,
            solution=str(Path(report.path).resolve()),
            assignments="\n".join(lines),
            fn=call.fn,
            call_args=call_args,
            expected_block=expected,
        )
        path = folder / name
        safefile.write_text(path, text)  # never through a symlink planted in the folder
        written.append(path)
    return written
