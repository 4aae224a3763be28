"""Text from strangers (file names, the candidate's messages) made safe for each place it goes.

A file name that is not UTF-8 reaches Python as lone surrogates (os.fsdecode's surrogateescape),
and a candidate's exception message may hold lone surrogates, control characters, escape codes,
U+FFFE, rich markup or a leading `=`. Each output takes the text through one function here:

- `valid_unicode`: every lone surrogate written out visibly, so the text encodes as UTF-8 (a
  byte that was not UTF-8 in a file name as `\\xNN`, any other lone surrogate as `\\udNNN`);
- `for_terminal`: also every control character (ESC, CR, BEL, newline, tab, ...) written out, so a
  name is one line of plain text on the screen (rich markup is the renderer's business: it passes
  such text as `Text`, never as markup);
- `for_xml`: also every character XML 1.0 forbids (C0 controls but tab, newline and CR; U+FFFE,
  U+FFFF);
- `for_csv`: also a cell a spreadsheet would evaluate (starting with `=`, `+`, `-`, `@`, tab or
  CR) prefixed with `'`, which spreadsheets show as text;
- `file_stem`: a name usable as one file name in a folder the kit writes.
"""

from __future__ import annotations

import os
import re

_SURROGATE = re.compile("[\ud800-\udfff]")
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_FORMULA = ("=", "+", "-", "@", "\t", "\r")
_NOT_IN_FILE_NAME = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|]")


def _surrogate(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def valid_unicode(text: str) -> str:
    """`text` with every lone surrogate written out (`\\xNN` for a byte that was not UTF-8 in a
    file name, `\\uNNNN` otherwise): it then encodes as UTF-8 and is valid JSON for any reader."""
    return _SURROGATE.sub(_surrogate, text) if _SURROGATE.search(text) else text


def raw_bytes(text: str) -> bytes | None:
    """The original bytes of a file name that was not UTF-8 (None when it was): what `os.fsencode`
    gives back, so a record can carry the name losslessly beside its visible form."""
    if not _SURROGATE.search(text):
        return None
    try:
        return os.fsencode(text)
    except UnicodeError:
        return None


_NAMED = {"\x1b": "\\e", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _printable(ch: str) -> str:
    if ch.isprintable():
        return ch
    code = ord(ch)
    return _NAMED.get(ch) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def for_terminal(text: str) -> str:
    """One line of plain text for the screen: valid Unicode, and every character that is not
    printable written out (ESC as \\e, newline as \\n, tab as \\t, CR as \\r, controls, format
    characters such as the bidirectional overrides and noncharacters as \\xNN or \\uNNNN)."""
    text = valid_unicode(text)
    return text if text.isprintable() else "".join(map(_printable, text))


def for_xml(text: str) -> str:
    """Text XML 1.0 can hold: valid Unicode, and every character it forbids written out."""
    return _XML_FORBIDDEN.sub(
        lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x80 else f"\\u{ord(m.group()):04x}", valid_unicode(text)
    )


def for_csv(text: str) -> str:
    """A CSV cell a spreadsheet shows as text: valid Unicode, and a leading `=`, `+`, `-`, `@`,
    tab or CR (a formula to a spreadsheet) behind a `'`."""
    text = valid_unicode(text)
    return "'" + text if text.startswith(_FORMULA) else text


def file_stem(name: str) -> str:
    """`name` as one file name: valid Unicode, no separator or control character (each becomes
    `_`), not hidden, not empty, at most 120 characters."""
    stem = _NOT_IN_FILE_NAME.sub("_", valid_unicode(name)).lstrip(".").strip() or "submission"
    return stem[:120]
