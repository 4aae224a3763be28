"""check --locate's value tracing: the harness that runs in the candidate's process stays within the
wire's bounds and never sees a stage; the kit names the first wrong stage, on the traced corpus
(tests/corpus/locate_traced: methods, an nn.Module's forward, closures; its wrong lines are in
expected.toml); the edit search covers methods; the budget counts CPU time."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pytest

from attn_kit.base import wire
from attn_kit.base.records import CallStatus, Outcome
from attn_kit.checks import stages
from attn_kit.grading import clock, locate, pipeline
from attn_kit.grading.locate import matching, relations, tracing
from attn_kit.load import catalog, preflight
from attn_kit.runtime import trace_harness
from attn_kit.sandbox.session import Sandbox

from conftest import need_extra, need_torch
from helpers import one_quick_per

SEED = 4242
TRACED = Path(__file__).parent / "corpus" / "locate_traced"
EXPECTED = tomllib.loads((TRACED / "expected.toml").read_text())


def _params(rng, D, bias=True):
    names = ("Wq", "Wk", "Wv", "Wo")
    params = {n: rng.standard_normal((D, D)) for n in names}
    if bias:
        params.update({"b" + n[1]: rng.standard_normal(D) for n in names})
    return params


# --- the harness, in the candidate's process --------------------------------------------------------


def test_the_harness_records_methods_closures_and_arguments_on_their_lines(tmp_path):
    source = textwrap.dedent(
        """\
        import numpy as np

        class Layer:
            def __call__(self, x):
                def double(a):
                    twice = a * 2.0
                    return twice
                y = double(x)
                return y + 1.0

        def run(x):
            return Layer()(np.asarray(x))
        """
    )
    path = tmp_path / "mod.py"
    path.write_text(source)
    namespace: dict = {}
    exec(compile(source, str(path), "exec"), namespace)
    _, extra = trace_harness.values(namespace["run"], [[1.0, 2.0]])
    seen = {(r["fn"], r["line"], r["name"]) for r in extra["records"]}
    assert ("Layer.__call__.<locals>.double", 6, "twice") in seen  # a closure inside a method
    assert ("Layer.__call__", 8, "y") in seen
    assert ("Layer.__call__.<locals>.double", 8, "a") in seen  # an argument, on the caller's line
    assert ("Layer.__call__", 9, "return") in seen
    assert not extra["error"]


def test_a_traced_run_sends_back_nothing_the_reply_bounds_would_refuse(tmp_path):
    # a candidate binding thousands of large arrays: the records stop at their bounds, and the
    # reply (through the real sandbox) is a normal one, not a crashed call
    path = tmp_path / "solution.py"
    path.write_text(
        "import numpy as np\n\n"
        "def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):\n"
        "    for i in range(4000):\n"
        "        big = np.full(60000, float(i))\n"
        "        small = [float(i)] * 100\n"
        "    return big\n"
    )
    args = (np.zeros((1, 2, 4)), {}, 2)
    _, extra = trace_harness.values(lambda *a: None, *args)  # nothing of the kit's own is recorded
    assert extra["records"] == []
    with Sandbox(str(path), 60.0, None) as sandbox:
        sandbox.start()
        outcome = sandbox.call("multi_head_attention", args, {}, harness=tracing.HARNESS, echo=False)
    assert outcome.status == CallStatus.OK
    records = outcome.extra["records"]
    assert 0 < len(records) <= trace_harness.MAX_RECORDS
    assert sum(r["value"].size for r in records) <= trace_harness.MAX_TOTAL
    assert max(r["value"].size for r in records) <= trace_harness.MAX_ENTRIES
    # the same reply encoded in-process is within what the kit reads for these arguments
    _, direct = trace_harness.values(_load(path).multi_head_attention, *args)
    data = wire.encode(wire.to_plain({"kind": "outcome", "extra": direct}))
    total, text = wire.HEADER.unpack(data[: wire.HEADER.size])
    assert total <= wire.MAX_REPLY and text <= wire.text_limit((args, {}))


def _load(path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("traced_candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_worker_side_module_imports_nothing_that_knows_expected_values():
    code = "import sys, attn_kit.runtime.trace_harness; print(sorted(m for m in sys.modules if m.startswith('attn_kit')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "attn_kit.runtime.trace_harness" in loaded
    for private in ("attn_kit.checks", "attn_kit.solutions", "attn_kit.grading", "attn_kit.diagnosis", "attn_kit.compare"):
        assert private not in loaded


HOSTILE = '''
import gc, sys
import numpy as np


def _arrays():
    """Every NumPy array this process can reach through a container (lists, tuples, dicts)."""
    out = []
    for obj in gc.get_objects():
        items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
        try:
            out.extend(np.array(a, dtype=np.float64) for a in list(items) if isinstance(a, np.ndarray) and a.dtype.kind == "f")
        except Exception:
            continue
    return out


def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
    seen = _arrays()  # before this code computes anything of its own
    x = np.asarray(x, dtype=np.float64)
    B, T, D = x.shape
    hd = D // num_heads
    split = lambda y: y.reshape(B, T, num_heads, hd).transpose(0, 2, 1, 3)
    q, k, v = (split(x @ params[w] + params[b]) for w, b in (("Wq", "bq"), ("Wk", "bk"), ("Wv", "bv")))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    weights = e / e.sum(-1, keepdims=True)
    merged = (weights @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    out = merged @ params["Wo"] + params["bo"]
    stages = [scores, weights, merged, out]
    found_input = np.array([sum(a.shape == x.shape and np.allclose(a, x) for a in seen)], dtype=float)
    found_stage = np.array([sum(a.shape == s.shape and np.allclose(a, s) for a in seen for s in stages)], dtype=float)
    kit_modules = np.array([sum(m.startswith(("attn_kit.checks.stages", "attn_kit.solutions")) for m in sys.modules)], dtype=float)
    return out
'''


def test_the_candidates_process_never_holds_a_stage_value(tmp_path):
    # a hostile candidate scans every container its process holds, before computing anything,
    # for an array equal to a stage of the reference (which it then computes itself): none is
    # there, though the same scan finds the input the kit sent (so the scan reaches the kit's data)
    path = tmp_path / "solution.py"
    path.write_text(HOSTILE)
    rng = np.random.default_rng(3)
    args = (rng.standard_normal((1, 3, 4)), _params(rng, 4), 2)
    with Sandbox(str(path), 60.0, None) as sandbox:
        sandbox.start()
        outcome = sandbox.call("multi_head_attention", args, {}, harness=tracing.HARNESS, echo=False)
    assert outcome.status == CallStatus.OK and not outcome.extra["error"]
    last = {r["name"]: float(r["value"][0]) for r in outcome.extra["records"] if r["value"].size == 1}
    assert last["found_input"] >= 1
    assert last["found_stage"] == 0
    assert last["kit_modules"] == 0


def test_stages_are_computed_only_after_the_worker_has_answered_and_gone(monkeypatch):
    path = TRACED / "numpy_call__scale-by-model-width.py"
    report = pipeline.grade(path, pipeline.Options(seed=SEED))
    events: list[str] = []

    class Fake:
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            events.append("worker")
            return self

        def __exit__(self, *exc):
            events.append("worker gone")

        def start(self):
            return None

        def call(self, *args, **kwargs):
            events.append("call")
            return Outcome(CallStatus.OK, extra={"records": [], "error": "", "full": False})

    compute = stages.compute
    monkeypatch.setattr(tracing, "Sandbox", Fake)
    monkeypatch.setattr(tracing.stage_table, "compute", lambda *a, **k: events.append("stages") or compute(*a, **k))
    tracing.follow(str(path), report, 10.0, None, False, ())
    assert "stages" in events and "call" in events
    assert events.index("worker gone") < events.index("stages")


# --- the kit: stages, views and divergences -------------------------------------------------------


def test_names_the_candidate_rewrote_reach_the_screen_escaped():
    value = np.zeros((2, 2))
    extra = {
        "records": [
            {"line": 3, "name": "\x1b[2Jx", "fn": "f\x1b]0;t\x07", "value": value},
            {"line": "3", "name": "y", "fn": "f", "value": value},
        ]
    }
    [record] = tracing.records_from(extra)  # a malformed record is dropped
    assert "\x1b" not in record.name + record.function and record.name == "\\e[2Jx"


def test_views_allow_head_layouts_and_a_transposed_key_but_not_swapped_queries_and_keys():
    rng = np.random.default_rng(0)
    table = stages.by_id()
    scores = rng.standard_normal((1, 2, 3, 4))
    shelves = matching.index_views({"scaled": scores})
    assert shelves[(2, 3, 4)].matches(scores[0]) == {"scaled"}
    assert shelves[(3, 2, 4)].matches(scores[0].transpose(1, 0, 2)) == {"scaled"}  # heads after the queries
    assert (2, 4, 3) not in shelves or not shelves[(2, 4, 3)].matches(scores[0].transpose(0, 2, 1))
    keys = rng.standard_normal((1, 2, 3, 2))
    found = {v.value.shape for v in matching.views(table["k_heads"], keys)}
    assert (2, 2, 3) in found  # kᵀ per head, as q @ k.T reads it


def test_a_missing_scale_is_named_with_its_factor():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 3, 8))
    ctx = stages.context_for("mha-screen", (x, _params(rng, 8, bias=False), 2), {})
    values = stages.compute(ctx)
    words = relations.relate(ctx, stages.by_id()["scaled"], values["raw"], values["scaled"])
    assert "2× too large" in words and "hd = 4: the 1/√hd scale is missing" in words


# the quick run traces one file of each style (the part of its name before "__"), the full suite all
@pytest.mark.parametrize("name", one_quick_per([n for n, entry in EXPECTED.items() if entry.get("traced")], lambda n: n.split("__")[0]))
def test_the_first_divergence_is_on_a_wrong_line(name):
    path = TRACED / name
    source = preflight.read_source(path)
    if "torch" in {module for module, _ in source.imports()}:
        need_torch()  # an nn.Module file
    exercise = preflight.detect_exercise(source, None)
    if exercise.needs:
        need_extra(exercise)  # mha-masked-bias is graded against torch
    locate.prepare(path)
    report = pipeline.grade(path, pipeline.Options(seed=SEED, timeout=60))
    preload = locate.preload_for(path, catalog.exercise(report.exercise))
    traced = tracing.follow(str(path), report, 30.0, pipeline.Options().memory, False, preload)
    assert traced is not None and traced.divergences
    assert traced.divergences[0].line in EXPECTED[name]["lines"], [d.text() for d in traced.divergences]


# --- the search ---------------------------------------------------------------------------------------


def test_the_search_proposes_edits_inside_methods_and_starts_at_the_divergence():
    text = (TRACED / "torch_module__scale-by-model-width.py").read_text()
    tree = ast.parse(text)
    functions = locate.reachable(tree, {"multi_head_attention"})
    assert "Attention" in functions
    edits = locate.propose(text, tree, functions, set())
    assert any(e.start[0] == 46 for e in edits)  # inside Attention.forward
    divergence = matching.Divergence(46, "att", "Attention.forward", "scaled", "the scaled scores", "")
    first = locate.focused(edits, matching.Trace([divergence]))[0]
    assert first.start[0] == 46


def test_the_budget_clock_counts_the_cpu_time_of_processes_below_the_kit():
    spent = clock.Clock()
    subprocess.run(
        [sys.executable, "-c", "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"], check=True
    )
    assert spent.spent() >= 0.4
