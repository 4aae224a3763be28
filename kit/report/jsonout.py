"""The `--json` outputs' contract: the JSON Schemas shipped in `attn_kit/schemas/`, and the one
builder of error objects.

An error object is the command's success object with nothing in it (empty lists, zero counts,
null figures) plus `"error"`: one paragraph saying what went wrong. Fields the kit knows before
the failure keep their values: `exercise` (from --exercise or the file's `# attn-kit:` header),
`path`, and `seed` for `check`. So a consumer reads `score.points` or `sizes` the same way
whether or not the run worked, and only has to look at `error` to tell.

Every --json output is printed by `dumps`: strict JSON, where a number that is not finite (NaN,
an infinity: a bench timing the candidate's code made up, say) is `null`, and every string is
valid Unicode (a lone surrogate is written out as `\\xNN` or `\\uNNNN`).
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

from attn_kit.base.paths import schemas_dir
from attn_kit.base.text import valid_unicode

SCHEMAS = ("check", "test-tests", "bench", "error")


@cache
def schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one --json output: check, test-tests, bench or error."""
    if name not in SCHEMAS:
        raise KeyError(f"no schema named {name!r}; there are {', '.join(SCHEMAS)}")
    return json.loads(schema_path(name).read_text(encoding="utf-8"))


def schema_path(name: str) -> Path:
    return schemas_dir() / f"{name}.schema.json"


def finite(value: Any) -> Any:
    """value with every NaN or infinite float (at any depth of dicts, lists, tuples) made None,
    and every string (keys too) valid Unicode: a lone surrogate (a file name that was not UTF-8, a
    candidate's message) written out visibly (text.valid_unicode), never sent as `\\udcff`."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, dict):
        return {finite(key): finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def dumps(obj: object, **kwargs: Any) -> str:
    """obj as strict JSON text: non-finite numbers become null, never the NaN/Infinity that
    Python's json module writes by default and strict readers reject."""
    return json.dumps(finite(obj), allow_nan=False, **kwargs)


def _empty(command: str) -> dict[str, Any]:
    if command == "check":
        return {
            "exercise": None,
            "path": None,
            "passed": False,
            "score": {"passed": 0, "total": 0, "points": 0, "max_points": 0},
            "seed": None,
            "public_only": False,
            "checks": [],
            "diagnosis": [],
            "notes": [],
        }
    if command == "test-tests":
        return {
            "exercise": None,
            "path": None,
            "tests": [],
            "references": [],
            "wrong_tests": [],
            "wrong": [],
            "type_sensitive": [],
            "caught": [],
            "missed": [],
            "score": 0.0,
            "bugs": [],
            "runs": 0,
            "seconds": 0.0,
            "notes": [],
        }
    if command == "bench":
        return {
            "exercise": None,
            "path": None,
            "function": None,
            "inputs": None,
            "setting": None,
            "unit": None,
            "sizes": [],
            "fit_sizes": [],
            "time_s": [],
            "cpu_s": [],
            "peak_bytes": [],
            "fit_on": "cpu_s",
            "memory_method": None,
            "time_exponent": None,
            "memory_exponent": None,
            "expected": {"time": None, "memory": None},
            "repeats": None,
            "budget_s": None,
            "elapsed_s": 0.0,
            "stopped": None,
            "failure": None,
            "notes": [],
            "contrast": None,
        }
    return {"exercise": None}


def known_exercise(exercise: str | None, path: str | Path | None) -> str | None:
    """The exercise --exercise names, else the one the file's `# attn-kit: ID` header names; only
    a known id counts (an unknown one is what the error is about)."""
    from attn_kit.load import catalog
    from attn_kit.load.preflight import file_exercise

    if exercise:
        return exercise if exercise in catalog.exercises() else None
    named = file_exercise(Path(path)) if path else None
    return named if named in catalog.exercises() else None


def error_json(
    command: str, message: str, *, exercise: str | None = None, path: str | Path | None = None, seed: int | None = None
) -> dict[str, Any]:
    """The --json object of `command` (check, test-tests, bench; anything else gets the bare
    error object) when it could not produce its result."""
    obj = _empty(command)
    obj["exercise"] = known_exercise(exercise, path)
    if "path" in obj and path is not None:
        obj["path"] = str(path)
    if command == "check":
        obj["seed"] = seed
    obj["error"] = message
    return obj
