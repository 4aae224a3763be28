"""Which known bugs apply to which exercise: prompts/coverage.toml, read as data.

Each exercise lists its features and each bug the features it needs; a bug applies to an
exercise that has all of them (the exercise's own id counts as a feature). The completeness test
(tests/test_coverage.py) asserts a bug file and a catching check for every pair this gives.
"""

from __future__ import annotations

import functools
import tomllib

from attn_kit.base.errors import CatalogError
from attn_kit.base.paths import package_dir


@functools.cache
def _data() -> dict:
    path = package_dir("prompts") / "coverage.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    if data.get("format") != 1 or not isinstance(data.get("features"), dict) or not isinstance(data.get("needs"), dict):
        raise CatalogError(f"{path}: expected 'format = 1', a [features] table and a [needs] table")
    return data


def features() -> dict[str, tuple[str, ...]]:
    """Exercise id -> its declared features (exercises without an entry are not listed)."""
    return {e: tuple(f) for e, f in _data()["features"].items()}


def needs() -> dict[str, tuple[str, ...]]:
    """Bug id -> the features an exercise must have for the mistake to be possible."""
    return {b: tuple(f) for b, f in _data()["needs"].items()}


def applies(exercise_id: str) -> tuple[str, ...]:
    """The bug ids that can be made in this exercise, in coverage.toml order ('' when undeclared)."""
    have = set(features().get(exercise_id, ())) | {exercise_id}
    return tuple(b for b, need in needs().items() if set(need) <= have)
