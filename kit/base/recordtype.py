"""`record`: a dataclass whose methods are written once, for the records every check loads.

Python 3.11's @dataclass compiles each method it generates from source text when the class is
created: a frozen record's __init__, __repr__, __eq__, __hash__, __setattr__ and __delattr__,
about 0.6 ms a class, some 15 ms of each `attn-kit check` before it has done anything. A
`record` class is a dataclass (fields, replace, asdict and the generated __init__ are the
dataclass's own) whose repr, equality, hash and immutability are the shared functions below,
read off its fields: the same results as the generated ones (a field with repr=False or
compare=False is left out the same way, equality needs the same class, a frozen record's hash is
that of its compared fields and an unfrozen one has none).

A frozen record's fields are written once: by __init__ (and by __post_init__ through
object.__setattr__, as on a frozen dataclass); any later assignment or deletion of a field, or
a new attribute on the record's own class, raises dataclasses.FrozenInstanceError as a frozen
dataclass does.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

_T = TypeVar("_T")
_FIELDS = "__record_fields__"  # (all names, repr names, compared names, hashed names), per class


def _fields(cls: type) -> tuple[frozenset[str], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    found = cls.__dict__.get(_FIELDS)
    if found is None:
        fields = dataclasses.fields(cls)
        found = (
            frozenset(f.name for f in fields),
            tuple(f.name for f in fields if f.repr),
            tuple(f.name for f in fields if f.compare),
            tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)),
        )
        setattr(cls, _FIELDS, found)
    return found


@reprlib.recursive_repr()
def _repr(self) -> str:
    return f"{type(self).__qualname__}({', '.join(f'{name}={getattr(self, name)!r}' for name in _fields(type(self))[1])})"


def _eq(self, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = _fields(type(self))[2]
    return tuple(getattr(self, name) for name in names) == tuple(getattr(other, name) for name in names)


def _hash(self) -> int:
    return hash(tuple(getattr(self, name) for name in _fields(type(self))[3]))


def _frozen(self, name: str) -> bool:
    """Whether setting or deleting `name` is refused: a field once written, or any attribute of a
    record's own class (a subclass that is no record may add its own, as with a frozen dataclass)."""
    owner = type(self)
    if name in _fields(owner)[0]:
        return name in self.__dict__
    return "__record_frozen__" in owner.__dict__


def _setattr(self, name: str, value: Any) -> None:
    if _frozen(self, name):
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)


def _delattr(self, name: str) -> None:
    if name in _fields(type(self))[0] or "__record_frozen__" in type(self).__dict__:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


@overload
def record(cls: type[_T], /) -> type[_T]: ...
@overload
def record(*, frozen: bool = True) -> Callable[[type[_T]], type[_T]]: ...
@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: Any = None, /, *, frozen: bool = True) -> Any:
    """@dataclass(frozen=True), or with frozen=False @dataclass, with the shared methods."""

    def build(cls: Any) -> Any:
        own = set(cls.__dict__)
        cls = dataclasses.dataclass(cls, repr=False, eq=False)
        for name, method in (("__repr__", _repr), ("__eq__", _eq)):
            if name not in own:
                setattr(cls, name, method)
        if "__hash__" not in own:
            cls.__hash__ = _hash if frozen else None
        if frozen:
            cls.__record_frozen__ = True
            cls.__setattr__ = _setattr
            cls.__delattr__ = _delattr
        return cls

    return build if cls is None else build(cls)
