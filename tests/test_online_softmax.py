"""The running max of an online softmax must start at -inf (issue 20, item 3; issue 21's
running-max-init-zero). Started at 0 it never drops below 0, so a query whose scores are all far
below 0 (under about -745) has every exp underflow: zeros or 0/0 = NaN.

Every exercise whose statement allows an online softmax has a check with every score near -1250.
Each is proved here on a correct online-softmax solution of that exercise (tests/corpus/more/, and
the tiled-softmax reference), which passes every check, and on the same file with only its running
max started at 0, which fails that check (in attention-backward also the dv check, whose one
allowed key scores far below 0).
"""

from __future__ import annotations

import pytest

from attn_kit.base.paths import solutions_dir
from attn_kit.grading import pipeline

from conftest import CORPUS

# exercise -> (correct online-softmax file, its running-max initialisation, the same started at 0, the check)
ONLINE = {
    "tiled-softmax": (
        solutions_dir("tiled-softmax") / "reference_numpy.py",
        "m = np.full(T, -np.inf)",
        "m = np.zeros(T)",
        "stable-when-every-score-is-far-below-zero",
    ),
    "sliding-window": (
        CORPUS / "more" / "window_online_softmax.py",
        "m = np.full((B, H, T), -np.inf)",
        "m = np.zeros((B, H, T))",
        "stable-when-every-score-is-far-below-zero",
    ),
    "paged-attention": (
        CORPUS / "more" / "paged_online_blocks.py",
        "m = np.full(H, -np.inf)",
        "m = np.zeros(H)",
        "stable-when-every-score-is-far-below-zero",
    ),
    "attention-backward": (
        CORPUS / "more" / "backward_online_forward.py",
        "m = np.full((B, H, T), -np.inf)",
        "m = np.zeros((B, H, T))",
        "finite-when-every-score-is-far-below-zero",
    ),
}


def _failing(path, exercise_id: str, seed: int = 3) -> list[str]:
    report = pipeline.grade(path, pipeline.Options(exercise=exercise_id, seed=seed, timeout=20))
    return [r.id for r in report.results if r.status in ("fail", "error")]


@pytest.mark.parametrize("exercise_id", sorted(ONLINE))
def test_running_max_started_at_zero_fails_the_far_below_zero_check(exercise_id, tmp_path):
    path, good, bad, check_id = ONLINE[exercise_id]
    text = path.read_text()
    assert text.count(good) == 1, "the online softmax's initialisation moved: update ONLINE"
    assert _failing(path, exercise_id) == []
    broken = tmp_path / f"{exercise_id}_running_max_zero.py"
    broken.write_text(text.replace(good, bad))
    assert check_id in _failing(broken, exercise_id)
