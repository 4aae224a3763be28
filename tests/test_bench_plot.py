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
    x_axes = [line.split() for line in lines if re.fullmatch(r"\s*16\s+32\s+64\s+128\s+256\s+512\s*", line)]
    assert len(x_axes) == 2  # both panels: the sizes are the ticks
    assert "CPU time per call (ms)" in text and "peak extra memory (MiB)" in text
    assert re.search(r"\b\d+(\.\d+)? ms┤", text) and re.search(r"\b\d+(\.\d+)? MiB┤", text)  # y ticks carry the unit
    assert "line fitted T^1.90" in text and "line fitted T^1.80" in text
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
