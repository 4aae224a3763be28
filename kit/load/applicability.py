"""Which known bugs apply to which exercise: prompts/coverage.toml and each exercise's own
prompts/catalogue/<id>.toml (catalog.load_coverage merges them), read as data.

Each exercise lists its features and each bug the features it needs; a bug applies to an
exercise that has all of them (the exercise's own id counts as a feature). The completeness test
(tests/test_coverage.py) asserts a bug file and a catching check for every pair this gives.
"""

from __future__ import annotations

import functools

from attn_kit.base.paths import package_dir
from attn_kit.load import catalog


@functools.cache
def _data() -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    return catalog.load_coverage(package_dir("prompts"))


def features() -> dict[str, tuple[str, ...]]:
    """Exercise id -> its declared features (exercises without an entry are not listed)."""
    return dict(_data()[0])


def needs() -> dict[str, tuple[str, ...]]:
    """Bug id -> the features an exercise must have for the mistake to be possible."""
    return dict(_data()[1])


def applies(exercise_id: str) -> tuple[str, ...]:
    """The bug ids that can be made in this exercise, in [needs] order ('' when undeclared)."""
    have = set(features().get(exercise_id, ())) | {exercise_id}
    return tuple(b for b, need in needs().items() if set(need) <= have)
