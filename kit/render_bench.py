"""Rendering of `attn-kit bench`: a rich table and verdict lines, or log-log plots with plotext.

A render-only module (STYLE.md): it takes a bench.BenchResult and prints; it measures nothing.
Styles come from render.THEME.
"""

from __future__ import annotations

import contextlib
import os

from rich.console import Console
from rich.table import Table
from rich.text import Text

from . import render

VERDICT_STYLE = {"as expected": "check.pass", "higher": "check.fail", "lower": "warning", "unknown": "muted"}
VERDICT_MARK = {"as expected": "✓", "higher": "▲", "lower": "▼", "unknown": "?"}


def seconds(value: float) -> str:
    """0.000123 -> '123 µs', 0.0456 -> '45.6 ms', 2.5 -> '2.50 s'."""
    if value < 1e-3:
        return f"{value * 1e6:.0f} µs"
    if value < 1.0:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.2f} s"


def size(value: float) -> str:
    """1536 -> '1.5 KiB', 3.2e6 -> '3.1 MiB'."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{int(value)} B"


def _ratio(now: float, before: float | None) -> str:
    if not before or before <= 0:
        return ""
    return f"×{now / before:.1f}"


def _exponent(value: float | None) -> str:
    return "T^?" if value is None else f"T^{value:.2f}"


def _expected(value: float) -> str:
    return f"T^{value:g}"


def table(result) -> Table:
    grid = Table(show_header=True, header_style="label", box=None, pad_edge=False)
    grid.add_column("T", justify="right")
    grid.add_column("time (median)", justify="right")
    grid.add_column("CPU", justify="right", style="muted")
    grid.add_column("×", justify="left", style="muted")
    grid.add_column("peak memory", justify="right")
    grid.add_column("×", justify="left", style="muted")
    previous = None
    for s in result.sizes:
        grid.add_row(str(s.T), seconds(s.time_s), seconds(s.cpu_s),
                     _ratio(s.cpu_s, previous.cpu_s if previous else None), size(s.peak_bytes),
                     _ratio(s.peak_bytes, previous.peak_bytes if previous else None))
        previous = s
    return grid


def verdict_lines(label: str, v) -> list[Text]:
    """'time    ≈ T^1.98  ✓ expected T^2: why', and on a mismatch a second line with the advice."""
    line = Text(f"{label:<7} ≈ ", style="label") + Text(f"{_exponent(v.fitted):<8}", style="label")
    line += Text(f"{VERDICT_MARK[v.status]} ", style=VERDICT_STYLE[v.status])
    line += Text(f"expected {_expected(v.expected)}: {v.why}", style="muted")
    lines = [line]
    if v.status in ("higher", "lower") or v.advice:
        words = {"higher": "grows faster than expected", "lower": "grows slower than expected"}.get(
            v.status, "no fit")
        lines.append(Text(" " * 19) + Text(words, style=VERDICT_STYLE[v.status])
                     + Text(f": {v.advice}." if v.advice else "."))
    return lines


def _fit_range(result) -> str:
    from .bench import fit_sizes
    used = fit_sizes(s.T for s in result.sizes)
    return f"T={used[0]}…{used[-1]}" if used else "no sizes"


def bench_result(result, plot: bool = False, out: Console | None = None) -> None:
    out = out or render.console()
    out.print(Text("attn-kit bench ", style="label") + Text(f"{result.exercise} · {result.path}", style="muted"))
    inputs = {"numpy": "NumPy arrays", "torch": "torch tensors", "lists": "nested lists"}[result.inputs]
    out.print(Text(f"{result.function}, timed per {result.unit}: {result.setting}; inputs as {inputs}", style="muted"))
    if plot and len(result.sizes) >= 2:
        out.print(Text.from_ansi(plot_text(result, width=min(out.width, 110), colorless=out.no_color
                                           or not out.is_terminal)))
    else:
        out.print(table(result))
    out.print()
    for label, v in (("time", result.time), ("memory", result.memory)):
        if v is None:
            continue
        for line in verdict_lines(label, v):
            out.print(line)
    if result.contrast:
        out.print(Text(f"for comparison: {result.contrast}.", style="muted"))
    memory = ("one separate run under tracemalloc" if result.memory_method == "tracemalloc"
              else "the peak resident memory of one separate run")
    out.print(Text(f"Fitted by least squares on log T vs log CPU time and log peak memory over "
                   f"{_fit_range(result)}; {result.repeats} timed runs per size (more for quick ones), "
                   f"memory from {memory}.", style="muted"))
    if result.stopped:
        out.print(Text(f"note: {result.stopped}", style="warning"))
    for note in result.notes:
        out.print(Text(f"note: {note}", style="warning"))
    if result.failure:
        out.print()
        out.print(Text("✗ ", style="check.fail") + Text(result.failure))
        out.print(Text("bench measures code that runs: `attn-kit check FILE` shows what goes wrong.",
                       style="muted"))


def plot_text(result, width: int = 100, height: int = 13, colorless: bool = True) -> str:
    """Two log-log panels, one above the other: CPU time and peak memory against T.

    The measured points are joined by a line; dots mark the expected slope, drawn through the
    largest size, so a bend away from the dots shows where the growth differs.
    """
    import plotext as plt

    sizes = [s.T for s in result.sizes]
    fig = plt.figure
    fig.clear()
    fig.subplots(2, 1)
    fig.plot_size(width, 2 * height)
    panels = ((1, f"CPU time per {result.unit}", [s.cpu_s for s in result.sizes], result.time),
              (2, "peak extra memory (bytes)", [max(s.peak_bytes, 1) for s in result.sizes], result.memory))
    for row, what, values, verdict in panels:
        panel = fig.subplot(row, 1)
        title = f"{what}: measured {_exponent(verdict.fitted if verdict else None)} (line)"
        panel.draw(panel.signal(sizes, values).lines())
        if verdict is not None:
            anchor_T, anchor_v = sizes[-1], values[-1]
            guide = [anchor_v * (t / anchor_T) ** verdict.expected for t in sizes]
            panel.draw(panel.signal(sizes, guide, marker="•"))
            title += f", expected {_expected(verdict.expected)} (dots)"
        panel.title(title)
        panel.ruler("x").scale("log")
        panel.ruler("y").scale("log")
        panel.label("T", "x")
    text = fig.build().string(colorless=colorless)
    fig.clear()
    return text


@contextlib.contextmanager
def progress(budget: float):
    """A transient status line on stderr while sizes are measured; yields the bench progress callback."""
    console = render.error_console()
    if not console.is_terminal or os.environ.get("CI"):
        yield lambda event, T, result: None
        return
    with console.status("starting…") as status:
        def update(event, T, result):
            if event == "start":
                status.update(f"measuring T={T} (budget {budget:g} s)…")
        yield update
