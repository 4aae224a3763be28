"""`show` draws an exercise's mask patterns as grids of which keys each query sees, and each
pattern is the exercise's own: recomputed here from its reference implementation."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from attn_kit.base.paths import solutions_dir
from attn_kit.cli.app import cli
from attn_kit.diagnosis.diagnose import load_module
from attn_kit.load import catalog
from attn_kit.render import grid


def drawn(exercise_id: str) -> np.ndarray:
    """The reference's own pattern for each [[masks]] entry, as allowed[i][j]."""
    ex = catalog.exercise(exercise_id)
    ref = load_module(str(solutions_dir(ex.id) / ex.oracle))
    out = []
    for mask in ex.masks:
        if exercise_id == "mha-screen":
            made = ref.causal_mask(1, mask.size) if mask.kind == "causal" else ref.padding_mask([mask.param], mask.size)
            out.append(np.asarray(made, dtype=bool)[0])
        else:  # sliding-window: with v = I the output is the weights, > 0 exactly where allowed
            rng = np.random.default_rng(0)
            q, k = rng.normal(size=(2, 1, 1, mask.size, mask.size))
            window = mask.param if mask.kind == "window" else mask.size
            weights = ref.sliding_window_attention(q, k, np.eye(mask.size)[None, None], window)[0, 0]
            out.append(weights > 0)
    return out


@pytest.mark.parametrize("exercise_id", ["mha-screen", "sliding-window"])
def test_each_mask_picture_is_the_reference_s_own_pattern(exercise_id):
    masks = catalog.exercise(exercise_id).masks
    assert masks
    for mask, expected in zip(masks, drawn(exercise_id)):
        assert (grid.mask_pattern(mask.kind, mask.size, mask.param) > 0).tolist() == expected.tolist(), mask


def test_show_draws_the_masks_under_the_statement():
    shown = CliRunner().invoke(cli, ["show", "sliding-window"], env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert shown.exit_code == 0
    lines = shown.output.splitlines()
    at = next(i for i, line in enumerate(lines) if "which keys each query sees" in line)
    assert "window = 3" in lines[at + 1] and "█ allowed · blocked" in lines[at + 1]
    rows = lines[at + 2 : at + 8]
    assert len(rows) == 6 and len(lines[at:]) <= grid.MAX_LINES
    # query 5 sees every key under causal, the last three under the window
    assert rows[5].split()[1:] == ["█"] * 6 + ["·", "·", "·"] + ["█"] * 3


def test_a_case_that_names_its_window_gives_the_band_a_picture_reads_against():
    """A call that passes a window number instead of a mask: the check's case names the window
    (and any sinks, the first keys every query also sees), and the blocked keys follow from it."""
    blocked = grid._band({"window": 2, "sinks": 1}, (1, 5, 5))
    allowed = [["█" if not b else "·" for b in row] for row in blocked[0]]
    assert ["".join(row) for row in allowed] == ["█····", "██···", "███··", "█·██·", "█··██"]
    assert grid._band({"window": 2}, (5, 5))[4].tolist() == [True, True, True, False, False]
    assert grid._band({"T": 5}, (5, 5)) is None and grid._band({"window": True}, (5, 5)) is None
