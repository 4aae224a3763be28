"""`csv`: the instructor's spreadsheet, one row per submission and three columns per check.

Every text cell goes through `for_csv`: a name or message starting with `=`, `+`, `-`, `@`, tab or
CR would be a formula to a spreadsheet, so it is shown behind a `'`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attn_kit.batch.formats import Format

if TYPE_CHECKING:
    from attn_kit.batch.run import Batch

HEADER = ["submission", "path", "picked", "exercise", "seed", "state", "points", "max_points", "passed", "failed_checks", "bugs"]
HEADER += ["seconds", "crashed", "timed_out", "error"]


def _cell(value: object) -> object:
    from attn_kit.base.text import for_csv

    return for_csv(value) if isinstance(value, str) else value


def render(batch: Batch, result: None = None, hidden_details: bool = False) -> str:
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    ids = [c["id"] for c in batch.checks]
    writer.writerow([*HEADER, *[f"{i}:{part}" for i in ids for part in ("points", "status", "bug")]])
    for r in batch.results:
        by_id = {c["id"]: c for c in r.checks()}
        cells: list[object] = []
        for i in ids:
            c = by_id.get(i)
            cells += [c["points"], c["status"], c["bug"] or ""] if c else ["", "", ""]
        row = [r.name, r.path or "", r.picked, batch.exercise, batch.seed, r.state, r.points, batch.max_points, r.passed]
        row += [" ".join(r.failed()), " ".join(r.bugs()), f"{r.seconds:.3f}", r.crashed, r.timed_out, r.error, *cells]
        writer.writerow([_cell(v) for v in row])
    return out.getvalue()


FORMAT = Format("csv", render, suffix=".csv", audience="the instructor")
