"""Writing `attn-kit grade`'s result files: each format of batch/formats/ rendered and written
without following a link, one file failing costing only that file.

CSV and JSON are the instructor's records: every check of every submission in full. JUnit,
Gradescope and PrairieLearn are what students see, so there a hidden case shows only its property
name, status and points unless `hidden_details` is set (formats/_shared.py). Every output records
the seed, so a cohort's hidden cases can be regenerated, and which file was graded and why.

Every file goes through base/safefile.py: a fresh file in a real folder of the user's, renamed over
the name, so a symbolic link planted at `out/grades.csv` (say, to the history database) is
replaced, never written through, and a linked folder is refused. Gradescope and PrairieLearn
describe one submission per file: with several submissions they go to a folder holding one
`NAME.json` per submission, NAME made a safe file name and unique (two submissions never share a
file, whatever their names).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from attn_kit.base import safefile
from attn_kit.base.errors import UsageError
from attn_kit.base.text import file_stem, valid_unicode
from attn_kit.batch.formats import FORMATS, NAMES
from attn_kit.batch.run import Batch, Result

__all__ = ["FORMATS", "NAMES", "Written", "targets", "write"]


@dataclass
class Written:
    """What one `--out` produced: the files really written, and each that could not be, with why."""

    fmt: str
    files: list[Path] = field(default_factory=list)
    failed: list[tuple[Path, str]] = field(default_factory=list)


def _unique_stems(results: list[Result]) -> list[str]:
    """One file name per submission, never two alike (case-insensitively: some file systems are)."""
    seen: set[str] = set()
    stems = []
    for r in results:
        stem, n = file_stem(r.name), 1
        while (stem if n == 1 else f"{stem}~{n}").casefold() in seen:
            n += 1
        stem = stem if n == 1 else f"{stem}~{n}"
        seen.add(stem.casefold())
        stems.append(stem)
    return stems


def targets(batch: Batch, fmt: str, path: Path) -> list[tuple[Path, Result | None]]:
    """Where `fmt` goes: (file, the submission it describes, or None for the whole run)."""
    if fmt not in FORMATS:
        raise UsageError(f"no output format named {fmt!r}; there are {', '.join(NAMES)}")
    path = Path(path)
    if not FORMATS[fmt].per_submission:
        return [(path, None)]
    if len(batch.results) == 1 and path.suffix == ".json":
        return [(path, batch.results[0])]
    return [(path / f"{stem}.json", r) for stem, r in zip(_unique_stems(batch.results), batch.results)]


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return valid_unicode(exc.strerror or str(exc))
    return valid_unicode(f"the kit failed to render it ({type(exc).__name__}: {exc})")


def write(batch: Batch, fmt: str, path: Path, hidden_details: bool = False) -> Written:
    """Write `batch` in `fmt` to `path`. A file that cannot be rendered or written (a linked or
    foreign folder, a full disk, a bug) is listed in `failed` and the others are still written."""
    render = FORMATS[fmt].render if fmt in FORMATS else None
    written = Written(fmt)
    for target, result in targets(batch, fmt, path):
        try:
            assert render is not None
            text = render(batch, result, hidden_details)
            target.parent.mkdir(parents=True, exist_ok=True)
            safefile.write_bytes(target, text.encode("utf-8"))
        except Exception as exc:  # noqa: BLE001 - one output failing costs that output only
            written.failed.append((target, _why(exc)))
        else:
            written.files.append(target)
    return written
