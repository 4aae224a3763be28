"""The `attn-kit bench` command: parse options, run bench.run, render, pick the exit status.

Registered in cli/app.py with one `cli.add_command(bench)` line. numpy is imported inside the
command, after BLAS is asked for one thread (base.blas.one_blas_thread).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from attn_kit.cli.common import EXIT_FAIL, EXIT_PASS, SIZE, one_blas_thread, parse_size, reports_errors, timeout_option_type
from attn_kit.report import jsonout


def _sizes(ctx, param, value):
    if value is None:
        return None
    from attn_kit.base.errors import UsageError
    from attn_kit.practice.bench import parse_sizes

    try:
        return parse_sizes(value)
    except UsageError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("bench")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--exercise", "-e", metavar="ID", help="Measure FILE as this exercise (else the header or its functions decide).")
@click.option(
    "--sizes", callback=_sizes, metavar="T1,T2,...", help="Sequence lengths to measure, e.g. 16,32,64,128 (default: the exercise's ladder)."
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Timed runs per size (quick sizes get more); the median is reported.",
)
@click.option(
    "--budget",
    type=timeout_option_type(0.5),
    default=20.0,
    show_default=True,
    help="Seconds for the whole ladder: it stops before a size that would overrun.",
)
@click.option("--memory", type=SIZE, default="2G", show_default=True, help="Memory cap of your code's process (0 = none).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object and nothing else.")
@click.option("--plot", is_flag=True, help="Draw log-log plots in the terminal instead of the table.")
@reports_errors
def bench(file, exercise, sizes, repeats, budget, memory, as_json, plot):
    """Measure how FILE's time and memory grow with the sequence length T.

    Runs your solution in a separate process over a ladder of lengths, several times each, and
    fits the growth exponents (time ≈ T^p) next to what the exercise should show: quadratic for
    naive attention, linear memory for tiled attention, linear per-step cost for a KV cache.

    Exit status: 0 measured, 1 your code failed or could not be measured, 2 misuse.

    \b
    Examples:
      attn-kit bench solution.py
      attn-kit bench solution.py --plot
      attn-kit bench solution.py --sizes 32,64,128,256 --repeats 3 --json
    """
    one_blas_thread()
    from attn_kit.practice import bench as core

    options = core.Options(exercise, sizes, repeats, budget, parse_size(memory))
    if as_json:
        result = core.run(file, options)
        click.echo(jsonout.dumps(result.to_json()))
    else:
        from attn_kit.render import bench as render_bench

        with render_bench.progress(budget) as tick:
            result = core.run(file, options, progress=tick)
        render_bench.bench_result(result, plot=plot)
    sys.exit(EXIT_PASS if result.ok else EXIT_FAIL)
