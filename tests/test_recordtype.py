"""base/recordtype.py's `record` behaves as the dataclass it replaces (its methods are shared
functions instead of code compiled for each class at start-up): the same repr, equality, hash,
immutability, replace, fields, asdict, pickling and cached properties."""

from __future__ import annotations

import dataclasses
import functools
import pickle
from dataclasses import field

import pytest

from attn_kit.base.recordtype import record


def _point(decorate):
    @decorate
    class Point:
        """A record with every kind of field the kit's records use."""

        x: int
        tags: list = field(default_factory=list, compare=False)  # left out of ==, kept in repr
        secret: str = field(default="", repr=False)
        weight: int = field(default=0, hash=False)

        @functools.cached_property
        def double(self) -> int:
            return 2 * self.x

    return Point


def _named(cls, name: str):
    cls.__name__ = cls.__qualname__ = name  # found by pickle under this module's name for it
    return cls


RECORD, DATACLASS = _named(_point(record), "RECORD"), _named(_point(dataclasses.dataclass(frozen=True)), "DATACLASS")
LOOSE, LOOSE_DATACLASS = _named(_point(record(frozen=False)), "LOOSE"), _named(_point(dataclasses.dataclass), "LOOSE_DATACLASS")


@pytest.mark.parametrize("ours, theirs", [(RECORD, DATACLASS), (LOOSE, LOOSE_DATACLASS)])
def test_repr_and_equality_are_the_dataclasses(ours, theirs):
    for args in [(1,), (1, ["a"], "s", 3), (-5, [], "", 0)]:
        assert repr(ours(*args)).split("(", 1)[1] == repr(theirs(*args)).split("(", 1)[1]
        assert repr(ours(*args)).startswith(f"{ours.__qualname__}(x=")
    assert ours(1, ["a"]) == ours(1, ["b"]) and theirs(1, ["a"]) == theirs(1, ["b"])  # compare=False
    assert ours(1) != ours(2) and ours(1, weight=1) != ours(1, weight=2)
    assert ours(1) != (1, [], "", 0) and ours(1).__eq__(theirs(1)) is NotImplemented
    sub = type("Sub", (ours,), {})
    assert ours(1) != sub(1) and sub(1) == sub(1)  # equality needs the same class, as a dataclass's
    looped = ours(1, [])
    looped.tags.append(looped)
    assert repr(looped) == f"{ours.__qualname__}(x=1, tags=[...], weight=0)"


def test_a_frozen_record_hashes_as_the_dataclass_and_refuses_writes():
    assert hash(RECORD(1, ["a"], "s", 3)) == hash(DATACLASS(1, ["a"], "s", 3))
    assert hash(RECORD(1, weight=1)) == hash(RECORD(1, weight=2))  # hash=False: left out
    point = RECORD(1, secret="s")
    for write in (lambda: setattr(point, "x", 2), lambda: setattr(point, "new", 1), lambda: delattr(point, "x")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            write()
    assert point.x == 1 and not hasattr(point, "new")
    assert point.double == 2 and point.double == 2  # a cached property is stored beside the fields
    sub = type("Sub", (RECORD,), {})(1)
    sub.extra = "allowed"  # a subclass that is no record may add attributes, as with a frozen dataclass
    with pytest.raises(dataclasses.FrozenInstanceError):
        sub.x = 5


def test_an_unfrozen_record_is_written_and_unhashable_like_a_dataclass():
    point = LOOSE(1)
    point.x = 3
    point.tags.append("t")
    assert point == LOOSE(3) and point.x == 3
    with pytest.raises(TypeError):
        hash(point)
    with pytest.raises(TypeError):
        hash(LOOSE_DATACLASS(1))


@pytest.mark.parametrize("cls", [RECORD, LOOSE])
def test_records_are_dataclasses_to_the_standard_library(cls):
    point = cls(1, ["a"], "s", 3)
    assert dataclasses.is_dataclass(cls) and [f.name for f in dataclasses.fields(cls)] == ["x", "tags", "secret", "weight"]
    assert dataclasses.asdict(point) == {"x": 1, "tags": ["a"], "secret": "s", "weight": 3}
    changed = dataclasses.replace(point, x=7)
    assert changed.x == 7 and changed.tags == ["a"] and point.x == 1
    assert pickle.loads(pickle.dumps(point)) == point


def test_the_kit_records_keep_their_meaning():
    from attn_kit.base.records import ErrorInfo, Masked, Opaque, Outcome
    from attn_kit.load import catalog

    assert Outcome("ok", 1) == Outcome("ok", 1) and Outcome("ok", 1) != Outcome("ok", 2)
    assert len({ErrorInfo("E", "m"), ErrorInfo("E", "m"), ErrorInfo("E", "n")}) == 2
    assert Masked("ndarray", "", 1, 4) != Opaque("ndarray", "")
    assert repr(Opaque("x", "y")) == "Opaque(type_name='x', text='y')"
    exercise = catalog.exercise("mha-screen")
    assert exercise == catalog.load_exercise(exercise.path) and hash(exercise.hints[0]) == hash(exercise.hints[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        exercise.id = "other"  # type: ignore[misc]
