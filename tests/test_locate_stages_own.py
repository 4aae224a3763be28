"""check --locate's stages for the exercises whose reference is not one projected attention layer
(checks/stages_own.py): tiled-softmax's running statistics per tile, paged-attention's gathered
keys per sequence, attention-backward's gradients, mla-decode's absorbed query and latent cache.
Each reference traces clean on its probe call; each stage follows from the call's arguments the
way the reference computes them; the probe carries inputs only; a stage over parts is right only
when its last part is; bug files are named at their wrong line, in the stage's words; the
candidate's process never holds a stage value."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from attn_kit.base.records import CallStatus
from attn_kit.checks import stages, stages_own
from attn_kit.grading.locate import matching, tracing
from attn_kit.report.results import Report
from attn_kit.sandbox.session import Sandbox

from helpers import arrays_in

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
OWN = sorted(stages_own.OWN)


def _follow(path: Path, exercise: str) -> matching.Trace:
    traced = tracing.follow(str(path), Report(exercise, str(path), 0, []), 60.0, None, False, ())
    assert traced is not None
    return traced


def _reference(exercise: str):
    spec = importlib.util.spec_from_file_location(f"reference_{exercise.replace('-', '_')}", SOLUTIONS / exercise / "reference_numpy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# what the reference returns, and the stages that must equal it
RETURNS = {
    "tiled-softmax": ("out",),
    "attention-backward": ("dq", "dk", "dv"),
    "paged-attention": ("out",),
    "mla-decode": ("out",),
    "varlen-prefill": ("out",),
    "flash-backward": ("dq", "dk", "dv"),
}


@pytest.mark.parametrize("exercise", OWN)
def test_the_stages_end_where_the_reference_does(exercise):
    fn, args, kwargs = stages.probe_call(exercise)
    got = getattr(_reference(exercise), fn)(*args, **kwargs)
    got = got if isinstance(got, tuple) else (got,)
    values = stages.compute(stages.context_for(exercise, args, kwargs))
    for stage, value in zip(RETURNS[exercise], got):
        assert np.allclose(values[stage], value), stage
    if exercise == "mla-decode":  # the cache after the append
        assert np.allclose(values["latents"], got[1]["c_kv"]) and np.allclose(values["rope_keys"], got[1]["k_rope"])


@pytest.mark.parametrize("exercise", OWN)
def test_a_reference_traces_clean_on_its_probe(exercise):
    traced = _follow(SOLUTIONS / exercise / "reference_numpy.py", exercise)
    assert traced.records > 20 and not traced.error
    assert traced.divergences == []
    assert set(RETURNS[exercise]) <= set(traced.matched)


@pytest.mark.parametrize("exercise", OWN)
def test_an_own_probe_carries_inputs_only(exercise):
    fn, args, kwargs = stages.probe_call(exercise)
    assert fn == stages.traced_function(exercise)
    values = stages.compute(stages.context_for(exercise, args, kwargs))
    sent = [np.asarray(a, dtype=np.float64) for a in arrays_in((args, kwargs))]
    for stage, value in values.items():
        for name, part in matching.parts(stage, value):
            if stage in ("kr_raw", "q_all") and exercise == "mla-decode":
                continue  # x @ W: a product of two arguments, never sent
            assert not any(a.size == np.size(part) and np.allclose(a.ravel(), np.ravel(part)) for a in sent), name
    assert repr(stages.probe_call(exercise)) == repr((fn, args, kwargs))


def test_a_stage_over_parts_is_right_only_when_its_last_part_is():
    fn, args, kwargs = stages.probe_call("tiled-softmax")
    values = stages.compute(stages.context_for("tiled-softmax", args, kwargs))
    assert [name for name, _ in matching.parts("m_run", values["m_run"])] == ["m_run#0", "m_run#1", "m_run"]
    shelves = matching.index_views(values, stages_own.TILED)
    first, last = values["l_run"][0], values["l_run"][-1]
    assert "l_run" not in shelves[first.shape].matches(first) and "l_run#0" in shelves[first.shape].matches(first)
    assert "l_run" in shelves[last.shape].matches(last)


@pytest.mark.parametrize(
    "exercise, bug, stage, words, line",
    [
        ("tiled-softmax", "online-softmax-no-rescale", "alpha", "right for the first 1 of 3 tiles", 31),
        ("tiled-softmax", "online-rescale-sign-flipped", "alpha", "right for the first 1 of 3 tiles", 31),
        ("tiled-softmax", "mask-inverted", "masked", "inverted", 28),
        ("attention-backward", "mask-inverted", "masked", "inverted", 26),
        ("mla-decode", "mla-scale-wrong-width", "scaled", "too large", 53),
        ("mla-decode", "rope-key-by-cache-index", "kr_new", "still", 38),
        ("paged-attention", "scale-after-softmax", "scaled", "still the sequence's raw scores", 26),
        ("flash-backward", "backward-rowsum-wrong", "ds", "entries differ", 100),
        ("flash-backward", "backward-missing-scale", "dq", "the 1/√hd scale is missing", 101),
        ("paged-attention", "slot-index-swapped", "k_gathered", "the block and the slot are swapped", 28),  # where the keys are read
    ],
)
def test_an_own_stage_is_named_on_the_bug_line(exercise, bug, stage, words, line):
    traced = _follow(SOLUTIONS / exercise / "bugs" / f"{bug}.py", exercise)
    assert any(d.stage == stage and words in d.relation and d.line == line for d in traced.divergences), [
        (d.line, d.stage, d.relation) for d in traced.divergences
    ]


HOSTILE_TILED = """
import gc
import numpy as np


def _arrays():
    out = []
    for obj in gc.get_objects():
        items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
        try:
            out.extend(np.array(a, dtype=np.float64) for a in list(items) if isinstance(a, np.ndarray) and a.dtype.kind == "f")
        except Exception:
            continue
    return out


def tiled_attention(q, k, v, mask=None, block_size=64):
    seen = _arrays()  # before this code computes anything of its own
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    s = np.where(np.asarray(mask, dtype=bool), q @ k.T / np.sqrt(q.shape[1]), -np.inf)
    top = s.max(axis=1)
    e = np.exp(s - top[:, None])
    total = e.sum(axis=1)
    out = e @ v / total[:, None]
    stages = [top, total, out, s[:, :block_size]]
    found_input = np.array([sum(a.shape == q.shape and np.allclose(a, q) for a in seen)], dtype=float)
    found_stage = np.array([sum(a.shape == x.shape and np.allclose(a, x) for a in seen for x in stages)], dtype=float)
    return out
"""


def test_the_candidates_process_never_holds_a_running_statistic(tmp_path):
    # as tests/test_locate_trace.py's hostile scan, for a stage over tiles: the running max and
    # sum after the last tile, the output and the first tile's scores are nowhere in the worker
    path = tmp_path / "solution.py"
    path.write_text(HOSTILE_TILED)
    fn, args, kwargs = stages.probe_call("tiled-softmax")
    with Sandbox(str(path), 60.0, None) as sandbox:
        sandbox.start()
        outcome = sandbox.call(fn, args, kwargs, harness=tracing.HARNESS, echo=False)
    assert outcome.status == CallStatus.OK and not outcome.extra["error"]
    last = {r["name"]: float(r["value"][0]) for r in outcome.extra["records"] if r["value"].size == 1}
    assert last["found_input"] >= 1
    assert last["found_stage"] == 0
    # and the kit's own stages are those values (the scan would have found them)
    values = stages.compute(stages.context_for("tiled-softmax", args, kwargs))
    records = tracing.records_from(outcome.extra)
    out = next(r.value for r in records if r.name == "out")
    assert np.allclose(out, values["out"])


def test_the_harness_records_a_list_of_arrays_that_starts_with_zeros(tmp_path):
    # paged reads built token by token: `rows.append(pool[...])`, whose first number may be 0.0
    path = tmp_path / "solution.py"
    path.write_text(
        "import numpy as np\n\ndef f(x):\n    rows = []\n    for t in range(2):\n        rows.append(x[t] * 0.0 + t)\n"
        "    return np.stack(rows)\n"
    )
    with Sandbox(str(path), 60.0, None) as sandbox:
        sandbox.start()
        outcome = sandbox.call("f", (np.ones((2, 3)),), {}, harness=tracing.HARNESS, echo=False)
    rows = [r["value"] for r in outcome.extra["records"] if r["name"] == "rows"]
    assert [v.shape for v in rows] == [(1, 3), (2, 3)] and rows[-1][1].tolist() == [1.0, 1.0, 1.0]


def test_rows_the_call_passed_stand_for_no_stage_over_parts():
    # q[a:b] handed to a helper is an argument's rows, not a document's rotated queries, even where
    # the rotation at position 0 leaves a row as it is
    fn, args, kwargs = stages.probe_call("varlen-prefill")
    ctx = stages.context_for("varlen-prefill", args, kwargs)
    q = np.asarray(args[0], dtype=np.float64)
    assert matching._rows_of_input(ctx, q[2:5]) and matching._rows_of_input(ctx, q[1:2].reshape(-1))
    assert not matching._rows_of_input(ctx, q[2:5] * 2.0)
    assert not matching._rows_of_input(ctx, stages.compute(ctx)["q_doc"][-1])
