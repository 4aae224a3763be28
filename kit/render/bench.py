"""Rendering of `attn-kit bench`: a rich table and verdict lines, or log-log plots with plotext.

A render-only module (STYLE.md): it takes a bench.BenchResult and prints; it measures nothing.
Styles come from render.THEME.
"""

from __future__ import annotations

import contextlib

from rich.console import Console
from rich.table import Table
from rich.text import Text

from attn_kit.render import check

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
        grid.add_row(
            str(s.T),
            seconds(s.time_s),
            seconds(s.cpu_s),
            _ratio(s.cpu_s, previous.cpu_s if previous else None),
            size(s.peak_bytes),
            _ratio(s.peak_bytes, previous.peak_bytes if previous else None),
        )
        previous = s
    return grid


def verdict_lines(label: str, v) -> list[Text]:
    """'time    ≈ T^1.98  ✓ expected T^2: why', and on a mismatch a second line with the advice."""
    line = Text(f"{label:<7} ≈ ", style="label") + Text(f"{_exponent(v.fitted):<8}", style="label")
    line += Text(f"{VERDICT_MARK[v.status]} ", style=VERDICT_STYLE[v.status])
    line += Text(f"expected {_expected(v.expected)}: {v.why}", style="muted")
    lines = [line]
    if v.status in ("higher", "lower") or v.advice:
        words = {"higher": "grows faster than expected", "lower": "grows slower than expected"}.get(v.status, "no fit")
        lines.append(Text(" " * 19) + Text(words, style=VERDICT_STYLE[v.status]) + Text(f": {v.advice}." if v.advice else "."))
    return lines


def _fit_range(result) -> str:
    from attn_kit.practice.bench import fit_sizes

    used = fit_sizes(s.T for s in result.sizes)
    return f"T={used[0]}…{used[-1]}" if used else "no sizes"


PLOT_ROWS = (10, 16)  # the plot's height, at least and at most: what the screen leaves, in between


def bench_result(result, plot: bool = False, out: Console | None = None) -> None:
    """The result: the sizes as a table, or (`plot`) as two log-log panels side by side, sized so
    the whole result fits the terminal's height (24 lines at 80 columns); then the verdicts."""
    out = out or check.console()
    inputs = {"numpy": "NumPy arrays", "torch": "torch tensors", "lists": "nested lists"}[result.inputs]
    head = [
        Text("attn-kit bench ", style="label") + Text(f"{result.exercise} · {result.path}", style="muted"),
        Text(f"{result.function}, timed per {result.unit}: {result.setting}; inputs as {inputs}", style="muted"),
    ]
    tail = [line for label, v in (("time", result.time), ("memory", result.memory)) if v is not None for line in verdict_lines(label, v)]
    for line in head:
        out.print(line)
    if plot and len(result.sizes) >= 2:
        legend = plot_legend(result)
        used = sum(len(out.render_lines(r, out.options, pad=False)) for r in [*head, *tail, legend, _fit_note(result)])
        rows = max(PLOT_ROWS[0], min(PLOT_ROWS[1], out.size.height - used - 1))  # and the prompt after
        text = plot_text(result, width=min(out.width, 110), height=rows, colorless=out.no_color or not out.is_terminal)
        out.print(Text.from_ansi(text.rstrip("\n")))
        out.print(legend)
    else:
        out.print(table(result))
        out.print()
    for line in tail:
        out.print(line)
    if result.contrast:
        out.print(Text(f"for comparison: {result.contrast}.", style="muted"))
    out.print(_fit_note(result))
    if result.stopped:
        out.print(Text(f"note: {result.stopped}", style="warning"))
    for note in result.notes:
        out.print(Text(f"note: {note}", style="warning"))
    if result.failure:
        out.print()
        out.print(Text("✗ ", style="check.fail") + Text(result.failure))
        out.print(Text("bench measures code that runs: `attn-kit check FILE` shows what goes wrong.", style="muted"))


def _fit_note(result) -> Text:
    memory = (
        "one separate run under tracemalloc" if result.memory_method == "tracemalloc" else "the peak resident memory of one separate run"
    )
    return Text(
        f"Fitted by least squares on log T vs log CPU time and log peak memory over "
        f"{_fit_range(result)}; {result.repeats} timed runs per size (more for quick ones), "
        f"memory from {memory}.",
        style="muted",
    )


def plot_legend(result) -> Text:
    """One line under the panels: what each mark is, with the fitted and expected exponents."""
    verdicts = [v for v in (result.time, result.memory) if v]
    fitted = " / ".join(_exponent(v.fitted) for v in verdicts)
    line = Text("+", style="label") + Text(" measured  ") + Text("⠤⠒", style="label") + Text(f" fitted {fitted}")
    expected = " / ".join(dict.fromkeys(_expected(v.expected) for v in verdicts))  # once when both expect the same
    if expected:
        line += Text("  •", style="label") + Text(f" expected {expected} (parallel, above)")
    return line


TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6))
SIZE_UNITS = (("GiB", float(1 << 30)), ("MiB", float(1 << 20)), ("KiB", float(1 << 10)), ("B", 1.0))


def unit_for(values, units) -> tuple[str, float]:
    """The largest unit in which the largest value is at least 1 (else the smallest unit)."""
    high = max(values)
    return next(((name, scale) for name, scale in units if high >= scale), units[-1])


def log_ticks(low: float, high: float) -> list[float]:
    """1-2-5 ticks between low and high (positive), at least two of them."""
    import math

    ticks = []
    for exponent in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1):
        for mantissa in (1, 2, 5):
            value = mantissa * 10.0**exponent
            if low * 0.999 <= value <= high * 1.001:
                ticks.append(value)
    if len(ticks) < 2:
        ticks = [low, high]
    while len(ticks) > 6:  # keep the axis readable: every other tick
        ticks = ticks[::2]
    return ticks


def fitted_curve(sizes: list[int], values: list[float], points: int = 64) -> tuple[list[float], list[float]]:
    """The least-squares line on log T vs log value over the sizes the exponent is fitted on,
    sampled densely and evenly in log T so it draws as a straight line, not steps."""
    import numpy as np

    from attn_kit.practice.bench import fit_sizes

    used = fit_sizes(sizes)
    pairs = [(t, v) for t, v in zip(sizes, values) if t in used and v > 0] or list(zip(sizes, values))
    x = np.log([t for t, _ in pairs])
    y = np.log([v for _, v in pairs])
    slope, intercept = np.polyfit(x, y, 1) if len(pairs) >= 2 else (0.0, float(y[0]))
    grid = np.exp(np.linspace(np.log(sizes[0]), np.log(sizes[-1]), points))
    return grid.tolist(), np.exp(intercept + slope * np.log(grid)).tolist()


def plot_text(result, width: int = 100, height: int = 16, colorless: bool = True) -> str:
    """Two log-log panels side by side, `height` lines in all: CPU time and peak memory against T.

    Both axes are logarithmic (the panels plot log10 of T and of the value, with ticks labelled
    in real units): the x ticks are the measured sizes (16, 32, …, every other one when they
    would not fit), the y ticks 1-2-5 steps in a named unit (ms, MiB, …). Measured sizes are
    `+`; the fitted power law is a straight line in fine braille dots, sampled densely so it
    never steps; `•` marks the expected slope, drawn parallel above the measured points (through
    the largest size, raised by a few rows) so no `+` or line hides it. plot_legend says which
    is which.
    """
    import math

    import plotext as plt

    sizes = [s.T for s in result.sizes]
    fig = plt.figure
    fig.clear()
    fig.subplots(1, 2)
    fig.plot_size(width, height)
    time_unit = unit_for([s.cpu_s for s in result.sizes], TIME_UNITS)
    size_unit = unit_for([max(s.peak_bytes, 1) for s in result.sizes], SIZE_UNITS)
    panels = (
        (1, f"CPU time per {result.unit}", [s.cpu_s for s in result.sizes], result.time, time_unit),
        (2, "peak extra memory", [max(s.peak_bytes, 1) for s in result.sizes], result.memory, size_unit),
    )
    log = lambda values: [math.log10(v) for v in values]  # noqa: E731
    panel_width = width // 2 - 12  # the columns a panel's sizes share (less its frame and y labels)
    every = 1 if panel_width >= (len(str(sizes[-1])) + 1) * len(sizes) else 2
    for col, what, raw, verdict, (unit, scale) in panels:
        values = [v / scale for v in raw]
        panel = fig.subplot(1, col)
        curve_x, curve_y = fitted_curve(sizes, values)
        panel.draw(panel.signal(log(curve_x), log(curve_y), marker="braille").lines())
        shown = values + curve_y
        if verdict is not None:
            span = max(log(shown)) - min(log(shown)) or 1.0
            rows = max(height - 5, 4)  # the panel's plotting rows (less its title, frame, ticks and label)
            raise_by = 10 ** (2 * span / (rows - 2))  # two rows above the points
            anchor_T, anchor_v = sizes[-1], values[-1] * raise_by
            guide = [anchor_v * (t / anchor_T) ** verdict.expected for t in sizes]
            panel.draw(panel.signal(log(sizes), log(guide), marker="•"))
            shown += guide
        panel.draw(panel.signal(log(sizes), log(values), marker="+"))
        panel.title(f"{what} ({unit})")
        labelled = [t for i, t in enumerate(sizes) if i % every == (len(sizes) - 1) % every]  # the largest always
        panel.ruler("x").ticks(log(labelled), [str(t) for t in labelled])
        ticks = log_ticks(min(shown), max(shown))
        panel.ruler("y").ticks(log(ticks), [f"{t:g} {unit}" for t in ticks])
        panel.label("T (log scale)", "x")
    text = fig.build().string(colorless=colorless)
    fig.clear()
    return text


@contextlib.contextmanager
def progress(budget: float):
    """A transient status line on stderr while sizes are measured; yields the bench progress callback."""
    with check.working("starting…") as status:

        def update(event, T, result):
            if event == "start":
                status(f"measuring T={T} (budget {budget:g} s)…")

        yield update
