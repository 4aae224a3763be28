"""The `attn-kit bench` command: parse options, run bench.run, render, pick the exit status.

Registered in cli.py with one `cli.add_command(bench)` line. numpy is imported inside the
command, after BLAS is asked for one thread (see _steady_blas).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import click

from .errors import KitError

EXIT_PASS, EXIT_FAIL = 0, 1
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _steady_blas() -> None:
    """One BLAS thread, unless the user chose otherwise: a multi-threaded BLAS on a busy machine
    makes timings jump by tens of times. Only effective before numpy is first imported."""
    if "numpy" in sys.modules:
        return
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


def reports_errors(func):
    """cli.reports_errors, looked up when the command runs: cli.py imports this module to
    register the command, so importing cli here at import time would be circular."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from .cli import reports_errors as wrap
        return wrap(func)(*args, **kwargs)
    return wrapper


def _sizes(ctx, param, value):
    if value is None:
        return None
    from .bench import parse_sizes
    from .errors import UsageError
    try:
        return parse_sizes(value)
    except UsageError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("bench")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--exercise", "-e", metavar="ID", help="Measure FILE as this exercise (else the header or its functions decide).")
@click.option("--sizes", callback=_sizes, metavar="T1,T2,...",
              help="Sequence lengths to measure, e.g. 16,32,64,128 (default: the exercise's ladder).")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True,
              help="Timed runs per size (quick sizes get more); the median is reported.")
@click.option("--budget", type=click.FloatRange(min=0.5), default=20.0, show_default=True,
              help="Seconds for the whole ladder: it stops before a size that would overrun.")
@click.option("--memory", default="2G", show_default=True, help="Memory cap of your code's process (0 = none).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object and nothing else.")
@click.option("--plot", is_flag=True, help="Draw log-log plots in the terminal instead of the table.")
@reports_errors
def bench(file, exercise, sizes, repeats, budget, memory, as_json, plot):
    """Measure how FILE's time and memory grow with the sequence length T.

    Runs your solution in a separate process over a ladder of lengths, several times each, and
    fits the growth exponents (time ≈ T^p) next to what the exercise should show: quadratic for
    naive attention, linear memory for tiled-softmax, linear per-step cost for a kv-cache.

    Exit status: 0 measured, 1 your code failed or could not be measured, 2 misuse.

    \b
    Examples:
      attn-kit bench solution.py
      attn-kit bench solution.py --plot
      attn-kit bench solution.py --sizes 32,64,128,256 --repeats 3 --json
    """
    _steady_blas()
    from . import bench as core
    from .cli import parse_size
    options = core.Options(exercise, sizes, repeats, budget, parse_size(memory))
    if as_json:
        try:
            result = core.run(file, options)
        except KitError as exc:
            click.echo(json.dumps(core.error_json(str(exc), exercise)))
            sys.exit(exc.exit_code)
        click.echo(json.dumps(result.to_json()))
    else:
        from . import render_bench
        with render_bench.progress(budget) as tick:
            result = core.run(file, options, progress=tick)
        render_bench.bench_result(result, plot=plot)
    sys.exit(EXIT_PASS if result.ok else EXIT_FAIL)
