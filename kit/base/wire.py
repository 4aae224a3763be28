"""The data-only format of what the candidate's worker sends back to the kit.

Nothing the worker sends is ever decoded as code: a reply is one JSON document followed by the raw
bytes of the arrays it mentions. `to_plain` (run in the worker) turns any value into the few kinds
the format knows:

- None, bool, int, float (NaN and infinities included), str: JSON as they are;
- list; a dict with string keys as a JSON object; tuples and other dicts as tagged objects (keys
  may be any plain hashable value);
- NumPy arrays of booleans or numbers: dtype, shape and the raw bytes (never object arrays);
- NumPy masked arrays: the data and the mask as two such arrays; the kit decodes one with any
  masked entry as Masked (not graded on its data), and one without as its plain data;
- torch tensors: the array plus dtype, device, shape and requires_grad (a TensorValue);
- everything else: an Opaque description (type name and a short repr).

Builtin subclasses and namedtuples become the plain type they extend, NumPy scalars become
Python numbers, array subclasses plain arrays: honest code that returns them is graded normally.
`decode` (run in the kit) checks every field, and a reply that is too large, malformed or
truncated raises WireError, which the sandbox reports as a crashed call.

`digest` fingerprints a plain value. After each call the worker sends the fingerprint of the
arguments as the call left them; the kit compares it with the fingerprint of its own copy and asks
for the arguments themselves only when the two differ (equal fingerprints mean equal values).

Standard library only at import time (NumPy is imported on first use), so the worker and the kit
can both import this module cheaply.
"""

from __future__ import annotations

import json
import math
import re
import struct
import sys
from array import array
from collections.abc import Callable
from enum import StrEnum
from hashlib import sha256
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

from attn_kit.base.errors import WireError
from attn_kit.base.records import ATOMS, CallStatus, ErrorInfo, Masked, Opaque, Outcome, TensorValue
from attn_kit.base.text import valid_unicode

if TYPE_CHECKING:
    import numpy

MAX_REPLY = 256 << 20  # bytes in one reply: a larger one is a crashed call
MAX_TEXT = 32 << 20  # of which JSON (lists, numbers as text): Python objects cost ~10x more
MAX_DEPTH = 64  # nesting of lists/tuples/dicts; deeper parts become Opaque
MAX_ITEMS = 1 << 20  # list/dict entries in one reply (arrays are not counted)
# The JSON text of one reply is bounded by what the call was given, so that decoding it costs the
# kit time and memory in proportion to the check (at most ~20 bytes of Python objects per byte of
# text, for lists of empty lists): TEXT_FLOOR, plus TEXT_PER_ENTRY per number in the arguments
# (an output up to 256 times its inputs, such as B×H×T×T weights, at 24 bytes per number).
TEXT_FLOOR = 4 << 20
TEXT_PER_ENTRY = 24 * 256
HEADER = struct.Struct("!QI")  # total length of what follows, then length of the JSON part
_DTYPE = re.compile(r"[<>|=]?[biufc]\d{1,2}")
_TAG = "$"
_NUMPY: list[ModuleType] = []  # NumPy, once imported (the worker may hide it from sys.modules)


def _np() -> Any:
    if not _NUMPY:
        import numpy

        _NUMPY.append(numpy)
    return _NUMPY[0]


def _ma() -> Any:
    """numpy.ma if something has imported it (else no masked array can exist): never imported here."""
    return sys.modules.get("numpy.ma")


# --- worker side: any value -> plain data -----------------------------------------------------


class _Budget:
    def __init__(self) -> None:
        self.items = 0


def to_plain(value: object, depth: int = 0, budget: _Budget | None = None) -> Any:
    """The value as plain data: the types listed in the module docstring, nothing else.

    Never raises: a part that cannot be turned into data (or whose own methods raise) becomes an
    Opaque description."""
    budget = budget or _Budget()
    try:
        return _convert_to_plain(value, depth, budget)
    except Exception as exc:  # noqa: BLE001 - the candidate's objects may raise anything
        return Opaque(_type_name(value), f"could not be read: {type(exc).__name__}")


# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides and
# isolates: a terminal acts on them (moves the cursor, clears lines, recolours, reorders text)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return {0x0D: "\\r", 0x1B: "\\e"}.get(code) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: str) -> str:
    """The candidate's text with every control character the terminal would act on written out
    (ESC as \\e, CR as \\r, others as \\xNN or \\uNNNN), so it cannot paint the screen, and
    every lone surrogate written out too (text.valid_unicode), so it can be printed and saved."""
    return _CONTROL.sub(_escape, valid_unicode(text))


def _type_name(value: object) -> str:
    try:
        return str(type(value).__name__)[:80]
    except Exception:  # noqa: BLE001
        return "object"


def _short_repr(value: object) -> str:
    try:
        text = repr(value)
        return text[:200] if isinstance(text, str) else ""
    except Exception:  # noqa: BLE001
        return ""


def _convert_to_plain(value: Any, depth: int, budget: _Budget) -> Any:
    """The value as plain data: to_plain without its guard (the candidate's methods may raise)."""
    kind = type(value)
    if kind in ATOMS:
        return value
    as_is = _already_plain(value, kind, depth, budget)
    if as_is is not None:
        return as_is
    if depth >= MAX_DEPTH:
        return Opaque(_type_name(value), f"nested more than {MAX_DEPTH} levels deep")
    budget.items += 1
    if budget.items > MAX_ITEMS:
        return Opaque(_type_name(value), f"more than {MAX_ITEMS:,} entries in one reply")
    if isinstance(value, (bool, int, float, str, tuple, list, dict)):
        return _builtin_to_plain(value, depth, budget)
    return _library_to_plain(value, kind, depth, budget)


def _already_plain(value: Any, kind: type, depth: int, budget: _Budget) -> Any:
    """The fast paths: a list of atoms (counted against the budget), a contiguous-able NumPy array
    of numbers, or a record (Opaque, TensorValue, ErrorInfo), as it goes on the wire; None for any
    other value (None itself is an atom, handled before)."""
    if kind is list and depth < MAX_DEPTH:
        budget.items += 1
        if all(type(v) in ATOMS for v in value):
            budget.items += len(value) // 64
            return list(value) if budget.items <= MAX_ITEMS else Opaque("list", f"more than {MAX_ITEMS:,} entries in one reply")
    if _NUMPY and kind is _NUMPY[0].ndarray and value.dtype.kind in "biufc" and value.dtype.names is None:
        return value if value.flags.c_contiguous else _NUMPY[0].ascontiguousarray(value)
    if isinstance(value, Opaque | TensorValue | ErrorInfo):
        return value
    return None


def _builtin_to_plain(value: bool | int | float | str | tuple | list | dict, depth: int, budget: _Budget) -> Any:
    """A builtin or an instance of a subclass of one (a namedtuple, an IntEnum) as the builtin,
    read through the builtin's own methods, which a subclass cannot override."""
    if isinstance(value, bool):
        return bool.__bool__(value)
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, tuple):  # tuple subclasses, namedtuples included
        return tuple(_convert_to_plain(v, depth + 1, budget) for v in tuple.__iter__(value))
    if isinstance(value, list):
        return [_convert_to_plain(v, depth + 1, budget) for v in list.__iter__(value)]
    out = {}
    for k, v in list(dict.items(value)):
        key = _convert_to_plain(k, depth + 1, budget)
        if not _hashable(key):
            return Opaque(_type_name(value), "a dict with keys that are not plain values")
        out[key] = _convert_to_plain(v, depth + 1, budget)
    return out


def _library_to_plain(value: Any, kind: type, depth: int, budget: _Budget) -> Any:
    """A NumPy array or scalar, a torch tensor, else an Opaque description."""
    module = getattr(kind, "__module__", "") or ""
    if module.startswith("numpy"):
        np = _np()
        if isinstance(value, np.ndarray):
            return _array(value, depth, budget)
        if isinstance(value, np.generic):
            return _convert_to_plain(value.item(), depth, budget)
    if module.startswith("torch") and hasattr(value, "detach") and hasattr(value, "dtype"):
        return _tensor(value)
    if _NUMPY:
        np = _NUMPY[0]
        if isinstance(value, np.ndarray):  # a subclass defined elsewhere (the candidate's file)
            return _array(value, depth, budget)
        if isinstance(value, np.generic):
            return _convert_to_plain(value.item(), depth, budget)
    return Opaque(_type_name(value), _short_repr(value))


def _hashable(key: object) -> bool:
    if key is None or type(key) in (bool, int, float, str):
        return True
    return type(key) is tuple and all(_hashable(k) for k in key)


def _array(value: Any, depth: int, budget: _Budget) -> Any:
    np = _np()
    arr = np.ndarray.view(value, np.ndarray)  # array subclasses: the plain array
    if arr.dtype.kind in "biufc" and arr.dtype.names is None:
        ma = _ma()
        if ma is not None and isinstance(value, ma.MaskedArray):  # data and mask go; the kit decides
            return ma.MaskedArray(np.ascontiguousarray(arr), mask=np.ascontiguousarray(ma.getmaskarray(value)))
        return np.ascontiguousarray(arr)  # encoded right away (tobytes copies), never kept
    if arr.dtype.kind == "O":
        return to_plain(arr.tolist(), depth + 1, budget)
    return Opaque("ndarray", f"an array of dtype {arr.dtype}, which the kit does not read")


def _tensor(value: Any) -> TensorValue:
    np = _np()
    t = value.detach()
    device = str(t.device)
    if device == "meta":
        array = np.zeros(tuple(t.shape))
    else:
        t = t.cpu()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
        array = np.array(t.numpy(), copy=True, order="C")
    return TensorValue(array, str(value.dtype), device, tuple(int(n) for n in value.shape), bool(value.requires_grad))


# --- encoding (worker side) ---------------------------------------------------------------------


def encode(message: dict) -> bytes:
    """One reply as bytes: HEADER, the JSON part, then the arrays' raw bytes. `message` values
    must already be plain (to_plain); records (Outcome, ErrorInfo, ...) are tagged here."""
    encoder = _Encoder()
    text = json.dumps(encoder.tag(message), separators=(",", ":")).encode()
    body = b"".join(encoder.blobs)
    return HEADER.pack(len(text) + len(body), len(text)) + text + body


class _Encoder:
    """Plain values -> JSON-ready values, with records and arrays as tagged objects; the arrays'
    bytes are collected in order, and each tag gives its array's offset among them."""

    def __init__(self) -> None:
        self.blobs: list[bytes] = []
        self.offset = 0

    def tag(self, v: Any) -> Any:
        kind = type(v)
        if kind in ATOMS:
            return v  # json writes NaN/Infinity, and reads them back
        if isinstance(v, StrEnum):
            return str(v)  # a status travels as its plain string
        if kind is list:
            if all(type(x) in ATOMS for x in v):
                return v
            return [self.tag(x) for x in v]
        if kind is tuple:
            return {_TAG: "tuple", "v": [self.tag(x) for x in v]}
        if kind is dict:
            if _TAG not in v and all(type(k) is str for k in v):  # a plain JSON object
                return {k: self.tag(x) for k, x in v.items()}
            return {_TAG: "dict", "v": [[self.tag(k), self.tag(x)] for k, x in v.items()]}
        return self._record_or_array(v)

    def _record_or_array(self, v: Any) -> dict[str, Any]:
        if isinstance(v, TensorValue):
            return {
                _TAG: "tensor",
                "a": self.tag(v.array),
                "dtype": v.dtype,
                "device": v.device,
                "shape": list(v.shape),
                "grad": v.requires_grad,
            }
        if isinstance(v, Opaque):
            return {_TAG: "opaque", "type": v.type_name, "text": v.text}
        if isinstance(v, ErrorInfo):
            return {_TAG: "error", "type": v.type, "message": v.message, "where": v.where, "traceback": v.traceback}
        np = _np()
        ma = _ma()
        if ma is not None and isinstance(v, ma.MaskedArray):
            return {_TAG: "masked", "a": self.tag(np.ndarray.view(v, np.ndarray)), "m": self.tag(ma.getmaskarray(v))}
        if isinstance(v, np.ndarray):
            data = v.tobytes()
            self.blobs.append(data)
            entry = {_TAG: "nd", "o": self.offset, "dtype": v.dtype.str, "shape": list(v.shape)}
            self.offset += len(data)
            return entry
        return {_TAG: "opaque", "type": _type_name(v), "text": ""}


# --- decoding (kit side) ------------------------------------------------------------------------


def entries(value: object, depth: int = 0) -> int:
    """How many numbers the kit's own value holds (arrays and tensors by size), for text_limit."""
    if depth > MAX_DEPTH:
        return 0
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and not isinstance(value, TensorValue):
        return math.prod(int(n) for n in shape) if shape else 1
    if isinstance(value, TensorValue):
        return math.prod(value.shape) if value.shape else 1
    if isinstance(value, (list, tuple)):
        if set(map(type, value)) <= ATOMS:  # a row of numbers, counted at C speed
            return len(value)
        return sum(entries(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return sum(entries(v, depth + 1) for v in value.values())
    return 1


def text_limit(arguments: object) -> int:
    """The most JSON text the kit reads in the reply to a call given `arguments`."""
    return min(MAX_TEXT, TEXT_FLOOR + TEXT_PER_ENTRY * entries(arguments))


def read_header(data: bytes, limit: int = MAX_TEXT) -> tuple[int, int]:
    """(bytes that follow, length of the JSON part); WireError when they cannot be right or the
    JSON part is over `limit` (text_limit of the call's arguments)."""
    total, text = HEADER.unpack(data)
    if total > MAX_REPLY:
        raise WireError(f"its reply announced {total:,} bytes, more than the kit's limit of {MAX_REPLY >> 20} MiB per reply")
    if text > total:
        raise WireError("its reply was malformed (a header that does not add up)")
    if text > min(limit, MAX_TEXT):
        raise WireError(
            f"its reply held {text:,} bytes of lists and numbers as text, more than the kit's "
            f"limit of {min(limit, MAX_TEXT) / 2**20:.1f} MiB for this call (return NumPy "
            f"arrays for large results)"
        )
    return total, text


def decode(body: bytes | bytearray, text_length: int) -> dict:
    """The reply after the header, as plain values and records; WireError when malformed. The
    arrays are views of `body` (a bytearray, so they are writable; they never overlap)."""
    if not isinstance(body, bytearray):
        body = bytearray(body)
    try:
        tree = json.loads(bytes(body[:text_length]))
    except (ValueError, RecursionError) as exc:
        raise WireError(f"its reply was not valid data ({type(exc).__name__})") from None
    cursor = [text_length, text_length]  # next array's position in body, where arrays start
    try:
        value = _decode_tagged(tree, body, cursor, 0)
    except RecursionError:
        raise WireError("its reply was nested too deeply") from None
    if cursor[0] != len(body):
        raise WireError("its reply carried bytes no value refers to")
    if not isinstance(value, dict):
        raise WireError("its reply was not a record")
    return value


def _want(cond: bool, what: str) -> None:
    if not cond:
        _malformed(what)


def _malformed(what: str) -> NoReturn:
    raise WireError(f"its reply was malformed ({what})")


def _text(v: object, what: str) -> str:
    if not isinstance(v, str):
        _malformed(what)
    return v


def _decode_tagged(v: Any, blobs: bytearray, cursor: list[int], depth: int) -> Any:
    """A value of the JSON part back as plain data: tagged objects become tuples, dicts with other
    keys, arrays (views of `blobs`, read from cursor[0] on) and records; WireError when malformed."""
    kind = type(v)
    if kind in ATOMS:
        return v
    if depth > MAX_DEPTH * 2 + 8:
        raise WireError("its reply was malformed (nested too deeply)")
    if kind is list:
        if all(type(x) in ATOMS for x in v):
            return v
        return [_decode_tagged(x, blobs, cursor, depth + 1) for x in v]
    _want(kind is dict, "an unknown value")
    tag = v.get(_TAG)
    if tag is None:  # a dict with string keys, as a JSON object
        return {k: _decode_tagged(x, blobs, cursor, depth + 1) for k, x in v.items()}
    if not isinstance(tag, str):
        _malformed("a tag that is not text")
    return _decode_tagged_object(tag, v, blobs, cursor, depth)


def _decode_tagged_object(tag: str, v: dict, blobs: bytearray, cursor: list[int], depth: int) -> Any:
    """A tagged object: a tuple, a dict with keys other than strings, an array, a masked array, a
    tensor, an Opaque or an ErrorInfo."""
    if tag == "tuple":
        _want(type(v.get("v")) is list, "tuple")
        return tuple(_decode_tagged(x, blobs, cursor, depth + 1) for x in v["v"])
    if tag == "dict":
        _want(type(v.get("v")) is list, "dict")
        out = {}
        for pair in v["v"]:
            _want(type(pair) is list and len(pair) == 2, "dict entry")
            key = _decode_tagged(pair[0], blobs, cursor, depth + 1)
            _want(_hashable(key), "dict key")
            out[key] = _decode_tagged(pair[1], blobs, cursor, depth + 1)
        return out
    if tag == "nd":
        return _nd(v, blobs, cursor)
    if tag == "masked":
        return _masked(_decode_tagged(v.get("a"), blobs, cursor, depth + 1), _decode_tagged(v.get("m"), blobs, cursor, depth + 1))
    if tag == "tensor":
        return _decode_tensor(v, _decode_tagged(v.get("a"), blobs, cursor, depth + 1))
    if tag == "opaque":
        return Opaque(visible(_text(v.get("type"), "type name")[:80]), visible(_text(v.get("text"), "text")[:200]))
    if tag == "error":
        return ErrorInfo(
            visible(_text(v.get("type"), "error type")[:80]),
            visible(_text(v.get("message"), "message")[:2000]),
            visible(_text(v.get("where"), "where")[:300]),
            visible(_text(v.get("traceback"), "traceback")[:20000]),
        )
    raise WireError(f"its reply was malformed (unknown tag {tag[:20]!r})")


def _decode_tensor(v: dict, array: object) -> TensorValue:
    _want(isinstance(array, _np().ndarray), "tensor data")
    shape = v.get("shape")
    if not (type(shape) is list and all(type(n) is int and n >= 0 for n in shape)):
        _malformed("tensor shape")
    _want(type(v.get("grad")) is bool, "tensor requires_grad")
    return TensorValue(
        array, _text(v.get("dtype"), "tensor dtype")[:40], _text(v.get("device"), "tensor device")[:40], tuple(shape), v["grad"]
    )


def _masked(data: Any, mask: Any) -> Any:
    """A masked array's data and mask -> the plain data when nothing is masked, else Masked. The
    kit counts the masked entries itself, from the mask's bytes."""
    np = _np()
    _want(
        isinstance(data, np.ndarray) and isinstance(mask, np.ndarray) and mask.dtype == np.bool_ and mask.shape == data.shape,
        "masked array",
    )
    masked = int(np.count_nonzero(mask))
    if not masked:
        return data
    return Masked("MaskedArray", f"a masked array with {masked:,} of {mask.size:,} entries masked", masked, int(mask.size))


_DTYPES: dict[str, numpy.dtype] = {}  # dtype text -> numpy dtype, once validated


def _nd(v: dict, blobs: bytearray, cursor: list[int]) -> Any:
    np = _np()
    dtype, shape, offset = v.get("dtype"), v.get("shape"), v.get("o")
    dt = _DTYPES.get(dtype) if isinstance(dtype, str) else None
    if dt is None:
        if not (isinstance(dtype, str) and _DTYPE.fullmatch(dtype) is not None):
            _malformed("array dtype")
        try:
            dt = np.dtype(dtype)
        except TypeError:
            raise WireError("its reply was malformed (array dtype)") from None
        _want(dt.kind in "biufc" and not dt.hasobject, "array dtype")
        _DTYPES[dtype] = dt
    # each dimension below 2**40 and their product within NumPy's index range, zero-size arrays
    # included (NumPy rejects a shape whose nonzero dimensions overflow even when one is 0)
    if not (
        type(shape) is list
        and len(shape) <= 32
        and all(type(n) is int and 0 <= n < 2**40 for n in shape)
        and math.prod(n for n in shape if n) < 2**62
    ):
        _malformed("array shape")
    start = cursor[0]
    _want(type(offset) is int and offset == start - cursor[1], "array offset")
    count = math.prod(shape)
    size = count * dt.itemsize
    _want(start + size <= len(blobs), "array bytes missing")
    cursor[0] = start + size
    return np.frombuffer(blobs, dtype=dt, count=count, offset=start).reshape(shape)


# --- fingerprints of plain values ---------------------------------------------------------------


def digest(value: object) -> str | None:
    """A fingerprint of a plain value (what to_plain returns), or None for a value holding any
    other type. Equal fingerprints mean the values are equal as mutation.values_equal sees them: same
    types, same keys in the same order, arrays of the same dtype, shape and bytes. Different
    fingerprints prove nothing (1 and 1.0, -0.0 and 0.0, a reordered dict): the kit then compares
    the values themselves."""
    parts: list[bytes] = []
    try:
        if not _feed(parts.append, value, 0):
            return None
    except ValueError:  # an int too long to print (sys.set_int_max_str_digits)
        return None
    return sha256(b"".join(parts)).hexdigest()[:32]


def fingerprint(value: object) -> str | None:
    """digest(to_plain(value)), without the copy when the value is plain already (nested lists of
    numbers, arrays, dicts of them: what the kit sends as arguments): digest reads only exact
    builtin types and NumPy arrays, and anything else takes the to_plain path."""
    found = digest(value)
    return found if found is not None else digest(to_plain(value))


_BY_REPR = ATOMS | {Opaque, ErrorInfo}  # repr is exact


def _feed(add: Callable[[bytes], object], value: Any, depth: int) -> bool:
    """Add the value's canonical bytes; False when it is not plain data."""
    kind = type(value)
    if kind in _BY_REPR:
        add(f"v{kind.__name__}:{value!r};".encode("utf-8", "surrogatepass"))
        return True
    if kind is list or kind is tuple:  # rows of plain numbers, at C speed
        types = set(map(type, value))
        if types == {float}:
            add(b"%s%d;" % (b"f" if kind is list else b"g", len(value)))
            add(array("d", value).tobytes())
            return True
        if types <= ATOMS:
            add(f"{'r' if kind is list else 's'}{value!r};".encode("utf-8", "surrogatepass"))
            return True
    if kind is list or kind is tuple or kind is dict:
        add(f"{'[' if kind is list else '(' if kind is tuple else '{'}{len(value)};".encode())
        items = value if kind is not dict else (x for pair in value.items() for x in pair)
        return depth < MAX_DEPTH and all(_feed(add, item, depth + 1) for item in items)
    if kind is TensorValue:  # a meta tensor has no values (mutation.values_equal ignores its array)
        add(f"t{(value.dtype, value.device, tuple(value.shape), value.requires_grad)!r};".encode())
        return value.device == "meta" or _feed(add, value.array, depth + 1)
    if getattr(kind, "__module__", None) == "numpy" and kind.__name__ == "ndarray":
        if value.dtype.kind not in "biufc" or value.dtype.names is not None:
            return False  # to_plain's arrays are numbers only
        add(f"a{value.dtype.str}{value.shape};".encode())
        add(value.data if value.flags.c_contiguous else value.tobytes())
        return True
    return False


# --- records ------------------------------------------------------------------------------------


def outcome_message(outcome: Outcome, args_digest: str | None = None) -> dict:
    """The record of one call (the worker calls this; values must already be plain), with the
    fingerprint of the arguments as the call left them."""
    return {
        "kind": "outcome",
        "status": outcome.status,
        "value": outcome.value,
        "error": outcome.error,
        "output": outcome.output,
        "detail": outcome.detail,
        "seconds": outcome.seconds,
        "extra": outcome.extra,
        "after": args_digest,
    }


_STATUSES = tuple(CallStatus)  # a tuple: `in` compares, never hashes the untrusted value


def read_outcome(message: dict) -> tuple[Outcome, Any]:
    """(Outcome, the fingerprint of the worker's post-call view of the arguments, or whatever the
    reply carried in its place) from a decoded reply."""
    _want(message.get("kind") == "outcome", "not a call result")
    status = message.get("status")
    if status not in _STATUSES:
        _malformed("status")
    error = message.get("error")
    _want(error is None or isinstance(error, ErrorInfo), "error")
    _want(status != CallStatus.RAISED or error is not None, "raised without an error")
    seconds = message.get("seconds")
    if type(seconds) is not int and type(seconds) is not float:
        _malformed("seconds")
    extra = message.get("extra")
    if not isinstance(extra, dict):
        _malformed("extra")
    outcome = Outcome(
        CallStatus(status),
        message.get("value"),
        error,
        (),
        visible(_text(message.get("output"), "output")[:100_000]),
        visible(_text(message.get("detail"), "detail")[:2000]),
        float(seconds),
        extra,
    )
    return outcome, message.get("after")
