"""Every graded check can fail: for each exercise, each check fails (status `fail`, a behavioural
verdict, not an error from a stub) for at least one known-bug implementation or one file of the
pathological corpus. Graded in-process with a fixed seed to keep this quick; the CLI path is
covered by test_catalogue.py and test_sandbox_corpus.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from attn_kit import catalog, grading
from attn_kit.paths import bug_files
from conftest import CORPUS

# corpus files that fail a check no bug variant reaches (shapes, the ValueError, batch mixing, ...)
EXTRA = {
    "mha-screen": ["mha/wrong_shape.py", "mha/no_value_error.py", "mha/scores_across_batches.py"],
    "mha-masked-bias": ["masked_bias/flattened_output.py", "masked_bias/always_float64.py",
                        "masked_bias/mask_on_the_cpu.py"],
    "kv-cache": ["followups/kv_cache_no_value_error.py", "followups/kv_cache_returns_output_only.py",
                 "followups/kv_cache_scores_across_batches.py"],
    "gqa": ["followups/gqa_flattened_output.py", "followups/gqa_no_value_errors.py"],
    "tiled-softmax": ["followups/tiled_transposed_output.py"],
    "cross-attention": ["followups/cross_flattened_output.py", "followups/cross_no_value_error.py"],
    "rope": ["more/rope_not_a_rotation.py", "more/rope_no_value_error.py", "more/rope_wrong_shapes.py"],
    "sliding-window": ["more/window_no_value_error.py", "more/window_transposed_output.py"],
    "paged-attention": ["more/paged_flattened_output.py"],
    "attention-backward": ["more/backward_transposed_dk.py"],
}


def _available(exercise) -> bool:
    try:
        grading.require(exercise)
    except Exception:  # noqa: BLE001 - DependencyMissing: the torch tests fail loudly in CI instead
        return False
    return True


@pytest.mark.parametrize("exercise", [e for e in catalog.exercises().values() if _available(e)], ids=lambda e: e.id)
def test_every_check_fails_for_some_known_mistake(exercise):
    files = [CORPUS / name for name in EXTRA.get(exercise.id, [])] + list(bug_files(exercise.id))
    suite = grading.suite_for(exercise)
    failed_by: dict[str, list[str]] = {}
    for path in files:
        report = grading.grade(path, grading.Options(exercise=exercise.id, seed=1, timeout=5))
        for result in report.results:
            if result.status == "fail":
                failed_by.setdefault(result.id, []).append(Path(path).name)
        if all(c.id in failed_by for c in suite.checks):
            break                   # every check has failed for something: the rest adds nothing
    never = [c.id for c in suite.checks if c.id not in failed_by]
    assert not never, f"no known mistake makes these checks fail: {never}"


def test_every_exercise_has_its_extra_corpus():
    assert set(EXTRA) == set(catalog.exercises())
    for names in EXTRA.values():
        for name in names:
            assert (CORPUS / name).exists(), name
