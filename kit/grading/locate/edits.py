"""An edit of the candidate's text: one expression's byte span and what replaces it, spliced in
(`apply`) and shown as a diff (`diff`). Only the edited expression is rewritten."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

# --- edits ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Edit:
    """One rewrite of one expression: the byte span [start, end) of the candidate's text, as
    (line, byte column) pairs, and the text that replaces it."""

    start: tuple[int, int]
    end: tuple[int, int]
    text: str
    operator: str  # short id of the operator that proposed it
    what: str  # what is wrong there, in words, without the answer
    change: str  # the edit itself, in words (shown with --fix)
    bugs: tuple[str, ...] = ()  # catalogue bugs this kind of edit repairs
    rank: float = 0.0

    @property
    def lines(self) -> tuple[int, ...]:
        return tuple(range(self.start[0], self.end[0] + 1))

    def overlaps(self, other: Edit) -> bool:
        return not (self.end <= other.start or other.end <= self.start)


def apply(text: str, edits) -> str:
    """`text` with the edits spliced in (they must not overlap)."""
    data = text.encode("utf-8")
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(pos: tuple[int, int]) -> int:
        return starts[pos[0] - 1] + pos[1]

    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        data = data[: offset(edit.start)] + edit.text.encode("utf-8") + data[offset(edit.end) :]
    return data.decode("utf-8")


def diff(text: str, edits) -> list[tuple[int, list[str], list[str]]]:
    """Per group of edited lines: (first line, the candidate's lines, the same lines edited)."""
    lines = text.splitlines(keepends=True)
    groups: list[list[Edit]] = []
    for edit in sorted(edits, key=lambda e: e.start):
        if groups and edit.start[0] <= groups[-1][-1].end[0]:
            groups[-1].append(edit)
        else:
            groups.append([edit])
    out = []
    for group in groups:
        first, last = group[0].start[0], max(e.end[0] for e in group)
        block = "".join(lines[first - 1 : last])
        moved = [dataclasses.replace(e, start=(e.start[0] - first + 1, e.start[1]), end=(e.end[0] - first + 1, e.end[1])) for e in group]
        out.append((first, block.splitlines(), apply(block, moved).splitlines()))
    return out


def segment(lines: list[str], start, end) -> str:
    data = [line.encode("utf-8") for line in lines[start[0] - 1 : end[0]]]
    if not data:
        return ""
    if len(data) == 1:
        return data[0][start[1] : end[1]].decode("utf-8", "replace")
    return b"\n".join([data[0][start[1] :], *data[1:-1], data[-1][: end[1]]]).decode("utf-8", "replace")
