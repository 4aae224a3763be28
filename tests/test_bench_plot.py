"""`bench --plot`: log-log axes with the sizes as x ticks, a unit on the y axis, and the fitted
power law drawn as a line (fine braille dots), not a staircase of block characters."""

from __future__ import annotations

import re

import pytest

from attn_kit.load import catalog
from attn_kit.practice import bench
from attn_kit.render import bench as render_bench


def result(time_fit=1.9, memory_fit=1.8) -> bench.BenchResult:
    workload = bench.workload_for(catalog.exercise("mha-screen"))
    r = bench.BenchResult("mha-screen", "sol.py", workload.function, "numpy", workload.setting, workload.unit, 5, 20.0)
    for T in (16, 32, 64, 128, 256, 512):
        t = 1e-4 * (T / 16) ** time_fit
        r.sizes.append(bench.SizeResult(T, t, t, [t], int(5e4 * (T / 16) ** memory_fit), 0.1))
    r.time = bench.verdict(time_fit, workload.time)
    r.memory = bench.verdict(memory_fit, workload.memory)
    return r


@pytest.mark.parametrize("width", [80, 110])
def test_plot_axes_ticks_units_and_fitted_line(width):
    text = render_bench.plot_text(result(), width=width)
    lines = text.splitlines()
    ticks = r"16\s+32\s+64\s+128\s+256\s+512"
    assert any(re.fullmatch(rf"\s*{ticks}\s+{ticks}\s*", line) for line in lines), text  # both panels, side by side
    assert "CPU time per call (ms)" in text and "peak extra memory (MiB)" in text
    assert re.search(r"\b\d+(\.\d+)? ms┤", text) and re.search(r"\b\d+(\.\d+)? MiB┤", text)  # y ticks carry the unit
    legend = render_bench.plot_legend(result()).plain
    assert "fitted T^1.90 / T^1.80" in legend and "• expected T^2" in legend
    braille = sum(0x2800 <= ord(c) <= 0x28FF for c in text)
    assert braille > 40  # the fitted line
    assert not set("▄▀▞▚▗▖▘▝") & set(text)  # no block staircase


def test_fitted_curve_is_straight_in_log_space():
    import math

    xs, ys = render_bench.fitted_curve([16, 32, 64, 128, 256, 512], [1.0, 3.7, 14.0, 52.0, 200.0, 780.0])
    slopes = {round((math.log(y2) - math.log(y1)) / (math.log(x2) - math.log(x1)), 6) for x1, x2, y1, y2 in zip(xs, xs[1:], ys, ys[1:])}
    assert len(slopes) == 1 and 1.8 < slopes.pop() < 2.0
    assert render_bench.log_ticks(0.1, 50) == [0.1, 0.5, 2, 10, 50]  # 1-2-5 steps, thinned to at most 6
    assert render_bench.log_ticks(3, 4) == [3, 4]


@pytest.mark.parametrize("sizes", [6, 8])
def test_the_plotted_result_fits_80x24_with_every_expected_mark_visible(sizes):
    """`bench --plot` at 80×24 (issue 36): the whole result, verdicts and notes included, leaves a
    line for the prompt; every `•` of the expected slope is drawn, none hidden under the fitted
    line or a measured `+`."""
    import io

    from rich.console import Console

    from attn_kit.render import check

    r = result()
    for T in (1024, 2048)[: sizes - 6]:
        t = 1e-4 * (T / 16) ** 1.9
        r.sizes.append(bench.SizeResult(T, t, t, [t], int(5e4 * (T / 16) ** 1.8), 0.1))
    out = Console(width=80, height=24, file=io.StringIO(), color_system=None, theme=check.THEME)
    render_bench.bench_result(r, plot=True, out=out)
    lines = out.file.getvalue().rstrip("\n").split("\n")
    assert len(lines) <= 23 and all(len(line) <= 80 for line in lines), "\n".join(lines)
    panels = "\n".join(lines[: next(i for i, line in enumerate(lines) if line.startswith("+ measured"))])
    assert panels.count("•") == 2 * sizes, panels  # one per size in each panel
    assert panels.count("+") == 2 * sizes, panels
    assert re.search(r"\b2048\b", panels) if sizes == 8 else re.search(r"\b512\b", panels)
