"""What every click command module shares: exit statuses, the error wrapper, size parsing and
the BLAS thread default. Its own module so cli/app.py and the command modules it registers
(cli/practice.py, cli/bench.py) import it without a cycle."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import signal
import sys

import click

from attn_kit.base.blas import one_blas_thread as one_blas_thread  # the commands call it first
from attn_kit.base.errors import KitError
from attn_kit.report import jsonout

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

DAY = 86_400.0
MIN_MEMORY = 16 << 20
MAX_SEED = 2**63 - 1


def parse_size(text) -> int | None:
    """'2G', '512M', '1.5GiB', '0' (no cap) -> bytes (an int or None passes through)."""
    if text is None or isinstance(text, int):
        return text or None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if not match:
        raise click.BadParameter(f"'{text}' is not a size; write e.g. 2G, 512M or 0 for no cap")
    number, unit = float(match.group(1)), match.group(2)
    size = int(number * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[unit])
    return max(size, 1) if number > 0 else None  # 0.0000001 is a (tiny) cap, not "no cap"


JSON_COMMANDS = {"check": "check", "test_tests": "test-tests", "bench": "bench"}


def json_context(**fields) -> None:
    """Remember what the command knows so far (e.g. `seed`) for its --json error object."""
    click.get_current_context().meta.setdefault("attn_kit.json", {}).update(fields)


class FiniteFloat(click.FloatRange):
    """A float in a range that must also be finite (FloatRange lets NaN through)."""

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


def timeout_option_type(minimum: float = 0.1) -> FiniteFloat:
    """Seconds: finite, at least `minimum`, at most a day."""
    return FiniteFloat(min=minimum, max=DAY)


SEED = click.IntRange(0, MAX_SEED)


class Size(click.ParamType):
    """A memory size such as 2G, 512M or 0 (no cap); a cap under 16 MiB is refused (the
    interpreter alone needs more, so every call would fail for the wrong reason)."""

    name = "size"

    def convert(self, value, param, ctx):
        if value is None or isinstance(value, int):
            return value
        try:
            size = parse_size(value)
        except click.BadParameter as exc:
            self.fail(exc.message, param, ctx)
        if size is not None and size < MIN_MEMORY:
            self.fail(f"{value!r} is under the smallest cap, 16M (use 0 for no cap).", param, ctx)
        if size is not None and size > 1 << 50:
            self.fail(f"{value!r} is larger than any machine's memory.", param, ctx)
        return size


SIZE = Size()


@contextlib.contextmanager
def reader_may_stop():
    """Output a reader may stop reading (`attn-kit check FILE | head`): when stdout is closed
    under it, the rest of the output is dropped (stdout now writes to /dev/null) and the command
    goes on to save its run and exit with its own status, not click's 1 for a closed pipe."""
    try:
        yield
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so every `with Sandbox` block cleans up."""


def stop_on_sigterm() -> None:
    def handler(signum, frame):
        raise Terminated()

    try:
        signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):  # not the main thread
        pass


def reports_errors(func):
    """Turn KitError into `Error: ...` on stderr (or, with --json, the command's error object on
    stdout: see jsonout.error_json) and its exit status."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except KitError as exc:
            if kwargs.get("as_json"):
                from attn_kit.report.jsonout import error_json

                known = click.get_current_context().meta.get("attn_kit.json", {})
                click.echo(
                    jsonout.dumps(
                        error_json(
                            JSON_COMMANDS.get(func.__name__, func.__name__),
                            str(exc),
                            exercise=kwargs.get("exercise"),
                            path=kwargs.get("file"),
                            seed=known.get("seed", kwargs.get("seed")),
                        )
                    )
                )
            else:
                from attn_kit.render import check

                check.error(str(exc))
            sys.exit(exc.exit_code)
        except OSError as exc:  # a path the user gave: a folder that cannot be made, ...
            if not getattr(exc, "filename", None):
                raise
            message = f"cannot use {exc.filename}: {exc.strerror or exc}"
            if kwargs.get("as_json"):
                from attn_kit.report.jsonout import error_json

                click.echo(
                    jsonout.dumps(
                        error_json(
                            JSON_COMMANDS.get(func.__name__, func.__name__),
                            message,
                            exercise=kwargs.get("exercise"),
                            path=kwargs.get("file"),
                        )
                    )
                )
            else:
                from attn_kit.render import check

                check.error(message)
            sys.exit(EXIT_USAGE)
        except KeyboardInterrupt as exc:
            click.echo("\nInterrupted." if not isinstance(exc, Terminated) else "\nTerminated.", err=True)
            sys.exit(EXIT_INTERRUPTED if not isinstance(exc, Terminated) else 128 + signal.SIGTERM)

    return wrapper
