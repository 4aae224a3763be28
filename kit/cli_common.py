"""What every click command module shares: exit statuses, the error wrapper, size parsing and
the BLAS thread default. Its own module so cli.py and the command modules it registers
(cli_practice.py, cli_bench.py) import it without a cycle."""

from __future__ import annotations

import functools
import json
import os
import re
import sys

import click

from .errors import KitError

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread() -> None:
    """Ask BLAS for one thread unless the user chose otherwise. The kit and candidates multiply
    small matrices, where thread pools only add start-up cost, oversubscribe small machines and
    make timings jump. Only effective before NumPy is first imported."""
    if "numpy" in sys.modules:
        return
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


def parse_size(text: str) -> int | None:
    """'2G', '512M', '1.5GiB', '0' (no cap) -> bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if not match:
        raise click.BadParameter(f"'{text}' is not a size; write e.g. 2G, 512M or 0 for no cap")
    number, unit = float(match.group(1)), match.group(2)
    size = int(number * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[unit])
    return size or None


JSON_COMMANDS = {"check": "check", "test_tests": "test-tests", "bench": "bench"}


def json_context(**fields) -> None:
    """Remember what the command knows so far (e.g. `seed`) for its --json error object."""
    click.get_current_context().meta.setdefault("attn_kit.json", {}).update(fields)


def reports_errors(func):
    """Turn KitError into `Error: ...` on stderr (or, with --json, the command's error object on
    stdout: see jsonout.error_json) and its exit status."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except KitError as exc:
            if kwargs.get("as_json"):
                from .jsonout import error_json
                known = click.get_current_context().meta.get("attn_kit.json", {})
                click.echo(json.dumps(error_json(JSON_COMMANDS.get(func.__name__, func.__name__), str(exc),
                                                 exercise=kwargs.get("exercise"), path=kwargs.get("file"),
                                                 seed=known.get("seed", kwargs.get("seed")))))
            else:
                from . import render
                render.error(str(exc))
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("\nInterrupted.", err=True)
            sys.exit(EXIT_INTERRUPTED)
    return wrapper
