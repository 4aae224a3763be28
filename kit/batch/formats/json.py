"""`json`: the instructor's full record of a run (schema: schemas/grade.schema.json); each graded
submission's `report` is its `check --json` object. It is written by `jsonout.dumps`, so every
string is valid Unicode; a path that was not UTF-8 also keeps its original bytes (`path_bytes`,
hex), so the record is lossless."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attn_kit.batch.formats import Format

if TYPE_CHECKING:
    from attn_kit.batch.run import Batch


def to_json(batch: Batch) -> dict:
    from attn_kit import __version__

    return {
        "tool": "attn-kit",
        "version": __version__,
        "exercise": batch.exercise,
        "seed": batch.seed,
        "max_points": batch.max_points,
        "seconds": round(batch.seconds, 3),
        "jobs": batch.jobs,
        "checks": batch.checks,
        "submissions": [r.to_json() for r in batch.results],
    }


def render(batch: Batch, result: None = None, hidden_details: bool = False) -> str:
    from attn_kit.report import jsonout

    return jsonout.dumps(to_json(batch), indent=2) + "\n"


FORMAT = Format("json", render, suffix=".json", audience="the instructor")
