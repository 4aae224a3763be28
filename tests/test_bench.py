"""`attn-kit bench`: growth exponents measured on the project's references, through the real CLI.

Timing tests compare fitted exponents against generous bands and retry (the machine may be busy);
no test asserts an absolute time. Memory exponents come from tracemalloc and are deterministic.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import math
import re
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from attn_kit.grading import pipeline
from attn_kit.load import catalog
from attn_kit.practice import bench
from attn_kit.render import bench as render_bench
from attn_kit.render import check

from conftest import attn_kit, need_torch, solutions_dir
from helpers import strict_json

FIXTURES = Path(__file__).parent / "bench_fixtures"
ATTEMPTS = 3


def workload_of(exercise_id: str) -> bench.Workload:
    return bench.workload_for(catalog.exercise(exercise_id))


def bench_json(path, *extra) -> tuple[dict, int, str]:
    proc = attn_kit("bench", path, "--json", *extra)
    assert proc.stdout.count("\n") <= 1, f"--json printed more than one line:\n{proc.stdout}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return strict_json(proc.stdout), proc.returncode, proc.stderr


def within(path, bands: dict[str, tuple[float, float]], *extra) -> dict:
    """Run bench up to ATTEMPTS times until every named exponent is inside its band."""
    seen = []
    for _ in range(ATTEMPTS):
        data, code, err = bench_json(path, *extra)
        assert code == 0, err or data
        values = {key: data[key] for key in bands}
        seen.append(values)
        if all(lo <= values[key] <= hi for key, (lo, hi) in bands.items()):
            return data
    pytest.fail(f"{path}: exponents outside {bands} in {ATTEMPTS} attempts: {seen}")


def write(tmp_path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


# --- accuracy on the references (the numbers the issue asks for) ------------------------------


@pytest.mark.slow
def test_naive_mha_numpy_is_quadratic_in_time_and_memory():
    data = within(
        solutions_dir("mha-screen") / "reference_numpy.py",
        {"time_exponent": (1.6, 2.4), "memory_exponent": (1.7, 2.3)},
        "--sizes",
        "128,256,512,1024,2048",
        "--repeats",
        "3",
    )
    assert data["exercise"] == "mha-screen" and data["inputs"] == "numpy"
    for key in ("sizes", "time_s", "cpu_s", "peak_bytes"):
        assert len(data[key]) == 5, key
    assert data["expected"]["time"]["expected"] == 2.0


@pytest.mark.slow
def test_tiled_softmax_memory_is_linear_and_the_materialising_bug_is_not():
    sizes = ("--sizes", "256,512,1024,2048", "--repeats", "1")
    within(solutions_dir("tiled-softmax") / "reference_numpy.py", {"memory_exponent": (0.7, 1.3)}, *sizes)
    data, code, _ = bench_json(solutions_dir("tiled-softmax") / "bugs" / "materialises-scores.py", *sizes)
    assert code == 0
    assert data["memory_exponent"] > 1.7
    assert data["expected"]["memory"]["status"] == "higher"
    assert "T×S" in data["expected"]["memory"]["advice"]


@pytest.mark.slow
def test_kv_cache_step_time_is_linear():
    data = within(
        solutions_dir("kv-cache") / "reference_numpy.py",
        {"time_exponent": (0.6, 1.4)},
        "--sizes",
        "128,256,512,1024,2048",
        "--repeats",
        "3",
    )
    assert data["unit"] == "decode step"
    assert 0.7 <= data["memory_exponent"] <= 1.3


def test_kv_cache_that_recomputes_everything_is_flagged():
    data = within(FIXTURES / "kv_cache_recompute.py", {"time_exponent": (1.6, 3.6)}, "--sizes", "32,64,128,256", "--repeats", "3")
    assert data["expected"]["time"]["status"] == "higher"
    assert "recomputing" in data["expected"]["time"]["advice"]


@pytest.mark.slow
def test_torch_solution_gets_tensors_and_its_memory_is_seen():
    need_torch()
    data = within(
        solutions_dir("mha-masked-bias") / "reference_torch.py",
        {"time_exponent": (1.5, 2.6), "memory_exponent": (1.5, 2.5)},
        "--sizes",
        "256,512,1024,2048",
        "--repeats",
        "3",
    )
    assert data["inputs"] == "torch" and data["memory_method"] == "rss"
    assert data["peak_bytes"][-1] > 50 * 2**20  # the B×H×T×T weights alone are 64 MiB at T=2048
    numpy_data, code, _ = bench_json(solutions_dir("mha-masked-bias") / "reference_numpy.py", "--sizes", "64,128", "--repeats", "1")
    assert code == 0 and numpy_data["inputs"] == "numpy" and numpy_data["memory_method"] == "tracemalloc"


@pytest.mark.slow
def test_plain_lists_answer_within_a_small_budget():
    data, code, err = bench_json(solutions_dir("mha-screen") / "reference_lists.py", "--budget", "3")
    assert code == 0, err
    assert data["inputs"] == "lists"
    assert len(data["sizes"]) >= 3
    assert data["stopped"] and "budget" in data["stopped"]
    assert data["elapsed_s"] < 3 * 3  # the prediction keeps it near the budget
    assert data["time_exponent"] is not None and data["memory_exponent"] is not None


# --- bad input: clear message, right exit status, no traceback ---------------------------------


@pytest.mark.slow
def test_syntax_error(tmp_path):
    path = write(tmp_path, "sol.py", "def multi_head_attention(x, params, num_heads, mask=None):\n    return (\n")
    data, code, _ = bench_json(path)
    assert code == 1
    assert "SyntaxError" in data["error"] and data["sizes"] == []
    proc = attn_kit("bench", path)
    assert proc.returncode == 1
    assert "SyntaxError" in proc.stderr and "Traceback" not in proc.stderr + proc.stdout


def test_raises_at_the_first_size(tmp_path):
    path = write(
        tmp_path,
        "sol.py",
        """
        # attn-kit: mha-screen
        def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
            raise NotImplementedError("write me")
        """,
    )
    proc = attn_kit("bench", path, "--sizes", "8,16")
    assert proc.returncode == 1
    assert "NotImplementedError: write me" in proc.stderr and "T=8" in proc.stderr
    assert "attn-kit check" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_raises_at_a_larger_size_keeps_what_was_measured(tmp_path):
    path = write(
        tmp_path,
        "sol.py",
        """
        # attn-kit: mha-screen
        import numpy as np

        def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
            x = np.asarray(x)
            if x.shape[1] > 32:
                raise IndexError("only short sequences")
            return x @ np.asarray(params["Wq"])
        """,
    )
    data, code, _ = bench_json(path, "--sizes", "16,32,64", "--repeats", "1")
    assert code == 1
    assert data["sizes"] == [16, 32]
    assert "IndexError: only short sequences" in data["failure"] and "T=64" in data["failure"]
    proc = attn_kit("bench", path, "--sizes", "16,32,64", "--repeats", "1")
    assert proc.returncode == 1
    assert "IndexError" in proc.stdout and "Traceback" not in proc.stdout + proc.stderr


CLOCKS = {
    "nan": 'time.perf_counter = lambda: float("nan")\n            time.process_time = lambda: float("inf")',
    "negative": "clock = [0.0]\n            def backwards():\n                clock[0] -= 1e6\n                return clock[0]\n"
    "            time.perf_counter = time.process_time = backwards",
}


@pytest.mark.slow
@pytest.mark.parametrize("clock", sorted(CLOCKS))
def test_a_clock_the_code_breaks_is_never_shown_as_measured(tmp_path, clock):
    """The timings are taken in the candidate's process: a NaN, infinite or negative reading (a
    clock the code replaced) ends the ladder with a failure saying so, in strict JSON and on the
    screen; no size is reported as measured."""
    path = write(
        tmp_path,
        "sol.py",
        f"""
        # attn-kit: mha-screen
        import time
        import numpy as np

        def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
            {CLOCKS[clock]}
            return np.asarray(x) @ np.asarray(params["Wq"])
        """,
    )
    data, code, _ = bench_json(path, "--sizes", "16,32", "--repeats", "1")
    assert code == 1, data
    assert data["sizes"] == [] and data["time_s"] == [] and data["time_exponent"] is None
    assert "not a number of seconds" in data["failure"] and "T=16" in data["failure"]
    jsonschema = pytest.importorskip("jsonschema")
    from attn_kit.report import jsonout

    jsonschema.Draft202012Validator(jsonout.schema("bench")).validate(data)
    screen = attn_kit("bench", path, "--sizes", "16,32", "--repeats", "1").stdout
    assert not re.search(r"(nan|inf|-[0-9.e+]+)\s*(s|ms|µs)\b", screen), screen  # no row shows a reading as measured
    assert "not a number of seconds" in " ".join(screen.split())


@pytest.mark.slow
def test_a_memory_reading_that_is_not_a_number_is_a_failure(tmp_path):
    """A forged peak (NaN) from the worker is a failure with a message, not a kit traceback."""
    path = write(
        tmp_path,
        "sol.py",
        """
        # attn-kit: mha-screen
        import sys
        import numpy as np

        def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
            harness = sys.modules["attn_kit.base.harness"]      # the worker's measurement, replaced
            harness.measure = lambda fn, *a, **k: (None, {"seconds": 0.0, "peak_bytes": float("nan")})
            return np.asarray(x) @ np.asarray(params["Wq"])
        """,
    )
    data, code, _ = bench_json(path, "--sizes", "16,32", "--repeats", "1")
    assert code == 1 and data["sizes"] == []
    assert "not a number of bytes" in data["failure"] and "T=16" in data["failure"]


@pytest.mark.slow
def test_hang_at_a_larger_size_stops_the_ladder(tmp_path):
    path = write(
        tmp_path,
        "sol.py",
        """
        # attn-kit: mha-screen
        import time
        import numpy as np

        def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
            if len(x[0]) > 32:
                while True:
                    time.sleep(0.1)
            return np.asarray(x)
        """,
    )
    data, code, _ = bench_json(path, "--sizes", "8,16,32,64", "--repeats", "1", "--budget", "2")
    assert code == 0
    assert data["sizes"] == [8, 16, 32]
    assert "T=64" in data["stopped"] and "did not finish" in data["stopped"] and "--budget" in data["stopped"]


def test_running_out_of_memory_at_a_larger_size_stops_the_ladder(tmp_path):
    path = write(
        tmp_path,
        "sol.py",
        """
        # attn-kit: mha-screen
        import numpy as np

        def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
            T = len(x[0])
            scratch = np.ones((T * 1000, T * 100)) if T > 32 else np.ones((T, T))
            return scratch[:1]
        """,
    )
    data, code, _ = bench_json(path, "--sizes", "16,32,64", "--repeats", "1", "--memory", "256M")
    assert code == 0
    assert data["sizes"] == [16, 32]
    assert "T=64" in data["stopped"] and "out of memory" in data["stopped"]


def test_crash_is_a_failure(tmp_path):
    path = write(
        tmp_path,
        "sol.py",
        """
        # attn-kit: mha-screen
        import os

        def multi_head_attention(x, params, num_heads, mask=None, return_weights=False):
            if len(x[0]) > 16:
                os._exit(3)
            return x
        """,
    )
    data, code, _ = bench_json(path, "--sizes", "8,16,32", "--repeats", "1")
    assert code == 1
    assert data["sizes"] == [8, 16] and "T=32" in data["failure"]


def test_missing_function(tmp_path):
    path = write(
        tmp_path,
        "sol.py",
        """
        # attn-kit: mha-screen
        def multi_head_atention(x, params, num_heads, mask=None):
            return x
        """,
    )
    data, code, _ = bench_json(path)
    assert code == 1
    assert "multi_head_attention" in data["error"] and "multi_head_atention" in data["error"]


@pytest.mark.parametrize(
    "args", [("--sizes", "64"), ("--sizes", "a,b"), ("--repeats", "0"), ("--budget", "0"), ("--exercise", "no-such-exercise")]
)
def test_misuse_exits_2(tmp_path, args):
    path = solutions_dir("mha-screen") / "reference_numpy.py"
    proc = attn_kit("bench", path, *args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_file_and_exercise_without_workload(tmp_path, monkeypatch):
    proc = attn_kit("bench", tmp_path / "nope.py")
    assert proc.returncode == 2 and "no such file" in proc.stderr
    from attn_kit.base.errors import UsageError
    from attn_kit.load import preflight

    source = preflight.read_source(solutions_dir("gqa") / "reference_numpy.py")
    gqa = catalog.exercise("gqa")
    monkeypatch.setitem(catalog.exercises(), "gqa", dataclasses.replace(gqa, bench=None))
    with pytest.raises(UsageError, match=r"no workload for gqa: prompts/exercises/gqa.toml has no \[bench\] table"):
        bench.pick_workload(source, None)
    suite = pipeline.suite_for(gqa)
    monkeypatch.setattr(suite, "bench_inputs", None)
    with pytest.raises(UsageError, match=r"checks/gqa.py registers no input builder"):
        bench.workload_for(gqa)


# --- rendering --------------------------------------------------------------------------------


@pytest.mark.slow
def test_table_and_plot_through_the_cli():
    path = solutions_dir("mha-screen") / "reference_numpy.py"
    proc = attn_kit("bench", path, "--sizes", "16,32,64", "--repeats", "1")
    assert proc.returncode == 0, proc.stderr
    assert "peak memory" in proc.stdout and "time    ≈ T^" in proc.stdout and "expected T^2" in proc.stdout
    proc = attn_kit("bench", path, "--sizes", "16,32,64", "--repeats", "1", "--plot")
    assert proc.returncode == 0, proc.stderr
    assert "CPU time per call (" in proc.stdout and " fitted T^" in proc.stdout and "• expected T^" in proc.stdout
    assert "peak extra memory" in proc.stdout
    assert "\x1b[" not in proc.stdout  # no colour codes when piped


def _result(time_fit: float, memory_fit: float) -> bench.BenchResult:
    workload = workload_of("tiled-softmax")
    result = bench.BenchResult(
        "tiled-softmax", "sol.py", workload.function, "numpy", workload.setting, workload.unit, 5, 20.0, contrast=workload.contrast
    )
    for T in (256, 512, 1024):
        t = 1e-3 * (T / 256) ** time_fit
        result.sizes.append(bench.SizeResult(T, t, t, [t], int(1e5 * (T / 256) ** memory_fit), 0.1))
    result.time = bench.verdict(time_fit, workload.time)
    result.memory = bench.verdict(memory_fit, workload.memory)
    result.stopped = "stopped before T=2048: over the budget"
    return result


def test_render_names_the_mismatch():
    buffer = io.StringIO()
    render_bench.bench_result(_result(2.0, 1.98), out=Console(file=buffer, width=100, theme=check.THEME))
    text = buffer.getvalue()
    assert "memory  ≈ T^1.98" in text and "expected T^1" in text
    assert "grows faster than expected" in text and "T×S intermediate" in text
    assert "time    ≈ T^2.00  ✓" in text
    assert "note: stopped before T=2048" in text
    assert "×4.0" in text  # doubling T multiplies time by 4


# --- the fit and the budget prediction ---------------------------------------------------------


def test_fit_recovers_a_power_law_and_uses_the_largest_sizes():
    sizes = [16, 32, 64, 128, 256, 512, 1024]
    # a constant cost that dominates the small sizes, then T^2
    values = [1e-3 + 1e-8 * T**2 for T in sizes]
    assert bench.fit_sizes(sizes) == sizes[-bench.FIT_POINTS :]
    assert bench.fit_exponent(sizes[-3:], [T**2 for T in sizes[-3:]]) == pytest.approx(2.0)
    assert bench.fit_exponent(sizes, values) > bench.fit_exponent(sizes[:4], values[:4]) + 0.5
    assert bench.fit_exponent([64], [1.0]) is None


def test_verdicts():
    expectation = workload_of("kv-cache").time
    assert bench.verdict(1.1, expectation).status == "as expected"
    high = bench.verdict(2.0, expectation)
    assert high.status == "higher" and "recomputing" in high.advice
    assert bench.verdict(0.3, expectation).status == "lower"
    assert bench.verdict(None, expectation).status == "unknown"


def test_prediction_extrapolates_the_last_two_sizes():
    done = [bench.SizeResult(128, 0, 0, [], 0, 1.0), bench.SizeResult(256, 0, 0, [], 0, 4.0)]
    assert bench.predict(done, 512, 1.0) == pytest.approx(16.0)
    assert bench.predict(done[:1], 256, 2.0) == pytest.approx(4.0)
    flat = [bench.SizeResult(128, 0, 0, [], 0, 1.0), bench.SizeResult(256, 0, 0, [], 0, 1.0)]
    assert bench.predict(flat, 512, 1.0) == pytest.approx(2.0)  # never assumes less than linear


def test_every_exercise_has_a_workload_its_references_define():
    import numpy as np

    for exercise in catalog.exercises().values():
        if exercise.needs and importlib.util.find_spec(exercise.needs) is None:
            continue  # its suite (and so its input builder) needs torch
        found = bench.workload_for(exercise)
        assert found.exercise == exercise.id and found.function in exercise.function_names
        for reference in solutions_dir(exercise.id).glob("reference_*.py"):
            assert f"def {found.function}(" in reference.read_text(), reference
        args, kwargs = found.inputs(np.random.default_rng(0), 8)
        again, _ = found.inputs(np.random.default_rng(0), 8)
        assert args and isinstance(kwargs, dict)
        assert repr(args) == repr(again), "inputs depend only on the generator and T"
        assert not math.isnan(found.time.exponent) and found.time.why and found.memory.why


def test_the_ladder_and_harness_come_from_the_toml():
    tiled, decode = workload_of("tiled-softmax"), workload_of("kv-cache")
    assert tiled.sizes == catalog.exercise("tiled-softmax").bench.sizes and tiled.sizes[-1] == 8192
    assert tiled.setting == "d=32, dv = d, S = T keys, block_size=64, no mask"
    assert (tiled.time_harness, tiled.memory_harness, tiled.repeats_inside) == (bench.TIME_HARNESS, bench.MEMORY_HARNESS, False)
    assert (decode.time_harness, decode.memory_harness, decode.repeats_inside) == (bench.DECODE_HARNESS, "", True)
    assert decode.unit == "decode step"


def test_help():
    proc = attn_kit("bench", "--help")
    assert proc.returncode == 0 and "--budget" in proc.stdout and "Example" in proc.stdout


def test_the_readme_bench_table_example_loads():
    """docs/adding-an-exercise.md's [bench] example is a table the catalogue accepts."""
    import tomllib

    section = (Path(__file__).resolve().parent.parent / "docs" / "adding-an-exercise.md").read_text(encoding="utf-8")
    block = section.split("```toml", 1)[1].split("```", 1)[0]
    spec = catalog._load_bench(tomllib.loads(block)["bench"], "README")
    assert spec.dimensions == {"B": 1, "D": 8, "H": 2} and spec.time.exponent == 2.0 and spec.memory.why
    assert "@SUITE.for_bench" in section and "def bench_inputs(rng, T, B, D, H)" in section


def test_the_worker_side_harnesses_import_no_grading_checks_or_bench():
    """What runs in the candidate's process for bench (harness_bench) loads none of the kit's
    grading side: the import contract in pyproject.toml, checked at run time too."""
    import subprocess
    import sys

    code = (
        "import sys, attn_kit.runtime.bench_harness; "
        "print(sorted(m for m in sys.modules if m.startswith(('attn_kit.checks', 'attn_kit.practice.bench', "
        "'attn_kit.grading.pipeline', 'attn_kit.load.catalog', 'attn_kit.compare.registry'))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", proc.stdout


@pytest.mark.parametrize(
    "change, message",
    [
        ({"harness": "twice"}, "harness = 'twice' is not one of call, decode-steps"),
        ({"inputs": "tensors"}, "inputs = 'tensors' is not one of"),
        ({"sizes": [64, 32]}, "sizes must be at least two increasing"),
        ({"dims": {"B": "one"}}, "'dims' must be a table of whole numbers"),
        ({"time": 2}, r"'time' must be a table"),
        ({"ladder": [1, 2]}, "unknown key 'ladder'"),
        ({"memory": None}, "missing key 'memory'"),
    ],
)
def test_a_bad_bench_table_is_an_error_naming_the_key(change, message):
    from attn_kit.base.errors import CatalogError

    table = {
        "function": "f",
        "setting": "",
        "sizes": [16, 32],
        "dims": {"B": 1},
        "time": {"exponent": 2, "why": "T×T"},
        "memory": {"exponent": 1, "why": "T"},
    }
    spec = catalog._load_bench(table, "x.toml [bench]")
    assert spec.time.exponent == 2.0 and isinstance(spec.time.exponent, float)
    broken = {k: v for k, v in {**table, **change}.items() if v is not None}
    with pytest.raises(CatalogError, match=message):
        catalog._load_bench(broken, "x.toml [bench]")
