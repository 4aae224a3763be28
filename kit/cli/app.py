"""The `attn-kit` command: a thin click layer over the library.

Each command parses its options, calls the library (grading, catalog, testgrade, ...), hands what
it returns to the render modules and picks the exit status. The practice commands live in
cli/practice.py and bench in cli/bench.py; all share cli/common.py's error handling and exit
statuses. numpy and rich are imported inside commands, so `attn-kit --help` and start-up stay fast.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from pathlib import Path
from typing import NoReturn

import click

from attn_kit.cli.common import (
    EXIT_FAIL,
    EXIT_PASS,
    EXIT_USAGE,
    SEED,
    SIZE,
    FiniteFloat,
    json_context,
    one_blas_thread,
    parse_size,
    reader_may_stop,
    reports_errors,
    stop_on_sigterm,
    timeout_option_type,
)
from attn_kit.report import jsonout

# The commands defined in other modules, loaded when one of them is run or listed (`--help`):
# name -> "module:attribute". Their modules import only click and cli/common.py at the top.
LAZY_COMMANDS = {
    "autograder": "attn_kit.cli.grade:autograder",
    "bench": "attn_kit.cli.bench:bench",
    "dev": "attn_kit.cli.dev:dev",
    "discuss": "attn_kit.cli.practice:discuss",
    "grade": "attn_kit.cli.grade:grade",
    "hint": "attn_kit.cli.practice:hint",
    "history": "attn_kit.cli.practice:history",
    "mock": "attn_kit.cli.practice:mock",
    "progress": "attn_kit.cli.practice:progress",
    "reset": "attn_kit.cli.practice:reset",
    "solution": "attn_kit.cli.practice:solution",
}


class LazyGroup(click.Group):
    """click's lazy-loading group (click's docs, "Lazily Loading Subcommands"): a command of
    `lazy` is imported only when it is run, or listed by `--help`, so `attn-kit check` never loads
    the practice, bench, grade or dev modules."""

    def __init__(self, *args, lazy: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            self.add_command(self._load(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def _load(self, name: str) -> click.Command:
        import importlib

        module, _, attribute = self.lazy[name].partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.lazy[name]} is not a click command")
        return command


@click.group(cls=LazyGroup, lazy=LAZY_COMMANDS, context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
@click.version_option(package_name="attn-kit", prog_name="attn-kit")
@click.pass_context
def cli(ctx):
    """attn-kit: practise the attention coding screen, locally.

    Without a command: your current exercise, its state and the command to run next.

    \b
    Quick start:
      attn-kit list
      attn-kit start mha-screen
      attn-kit check mha_screen.py
    """
    if ctx.invoked_subcommand is None:
        from attn_kit.practice import progress as practice
        from attn_kit.render import check as render

        with _existing_store() as store:
            status, command = practice.next_step(store)
        render.where_you_are(status, command)


@contextlib.contextmanager
def _existing_store():
    """The history if there is one (None otherwise): looking never creates it. A store that
    cannot be opened counts as none."""
    from attn_kit.practice.store import StoreError, db_path, open_store

    store = None
    if db_path().exists():
        try:
            store = open_store()
        except StoreError:
            store = None
    try:
        yield store
    finally:
        if store is not None:
            store.close()


@cli.command("list")
@reports_errors
def list_exercises():
    """List the exercises, one line each.

    \b
    Example:
      attn-kit list
    """
    from attn_kit.load import catalog
    from attn_kit.practice import progress as practice
    from attn_kit.render import check as render

    with _existing_store() as store:
        states = practice.statuses(store)
    render.exercise_list(catalog.exercises().values(), {k: v.label for k, v in states.items()})


@cli.command()
@click.argument("exercise")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite FILE if it exists.")
@reports_errors
def start(exercise, file, force):
    """Write a starter file for EXERCISE and print its statement.

    FILE defaults to EXERCISE.py with dashes turned into underscores.

    \b
    Example:
      attn-kit start mha-screen mha_screen.py
    """
    from attn_kit.base.errors import UsageError
    from attn_kit.load import catalog
    from attn_kit.render import content as render

    ex = catalog.exercise(exercise)
    path = file or Path(catalog.default_file(ex.id))
    if path.exists() and not force:
        raise UsageError(f"{path} already exists; pick another name or pass --force to overwrite it.")
    path.write_text(ex.starter, encoding="utf-8")
    from attn_kit.practice import progress as practice

    practice.mark_started(ex.id, path)  # the current exercise now, for `attn-kit`, hint and discuss
    render.started(ex, path)


@cli.command()
@click.argument("exercise")
@reports_errors
def show(exercise):
    """Print the statement of EXERCISE.

    \b
    Example:
      attn-kit show mha-screen
    """
    from attn_kit.load import catalog
    from attn_kit.render import content as render

    render.statement(catalog.exercise(exercise))


@cli.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--exercise", "-e", metavar="ID", help="Grade FILE as this exercise (else the header or its functions decide).")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object and nothing else (its JSON Schema ships in attn_kit/schemas/check.schema.json; "
    "see the README). JSON runs are not saved to your history.",
)
@click.option("--public", "public_only", is_flag=True, help="Run only the public examples, like a judge's 'Run'.")
@click.option("--seed", type=SEED, help="Seed of the randomised cases (printed with every run).")
@click.option(
    "--pure",
    is_flag=True,
    help="Also fail the file if it imports anything outside the standard library. Advisory: "
    "checked inside your code's own process, so code written to evade it can "
    "(docs/threat-model.md).",
)
@click.option("--timeout", type=timeout_option_type(), default=10.0, show_default=True, help="Seconds one call of your code may take.")
@click.option("--memory", type=SIZE, default="2G", show_default=True, help="Memory cap of your code's process (0 = none).")
@click.option(
    "--repro", type=click.Path(file_okay=False, path_type=Path), metavar="DIR", help="Write a standalone script per failing check into DIR."
)
@click.option(
    "--first/--full",
    "first",
    default=None,
    help="By default a failing report fits one 80x24 screen (its causes, the worst failure, the others one line each). "
    "--full: every check and every failure in full; --first: the table, the first failure in full, the others one line each.",
)
@click.option("--watch", is_flag=True, help="Re-run on every save, showing only the current state (q or Ctrl-C quits).")
@click.option(
    "--tests",
    "tests_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="TESTS",
    help="Also grade your pytest tests in TESTS (may be FILE itself): see `attn-kit test-tests`.",
)
@click.option(
    "--locate",
    is_flag=True,
    help="When checks fail, search for the smallest edit of your own code that makes them pass, and "
    "name its line(s) and what is wrong there (only edits verified on two seeds are shown).",
)
@click.option("--fix", is_flag=True, help="With --locate: also show that edit as a diff of your lines (implies --locate).")
@click.option(
    "--locate-budget",
    type=FiniteFloat(min=0.5, max=600),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="CPU time (of the kit and its workers, and your code's time asleep in its runs) --locate may search for.",
)
@reports_errors
def check(file, exercise, as_json, public_only, seed, pure, timeout, memory, repro, first, watch, tests_file, locate, fix, locate_budget):
    """Grade FILE with the exercise's check suite, in a separate process.

    Exit status: 0 every check passed, 1 a check failed or FILE could not be loaded,
    2 the command was misused (no such file, unknown exercise, bad option).

    \b
    Examples:
      attn-kit check solution.py
      attn-kit check solution.py --public
      attn-kit check solution.py --json --seed 7
      attn-kit check solution.py --pure --repro repro/
      attn-kit check solution.py --locate
      attn-kit check solution.py --locate --fix
    """
    import random

    if seed is None:  # chosen here, so even an error object can name it
        seed = random.SystemRandom().randrange(1, 100_000)
    json_context(seed=seed)
    memory_cap = parse_size(memory)
    if watch and (locate or fix):
        from attn_kit.base.errors import UsageError

        raise UsageError("--locate searches once; it does not combine with --watch.")
    if not watch:
        from attn_kit.grading import early

        early.start(file)  # the sandbox sets up while the checks, the catalogue and the oracle load
    from attn_kit.grading import pipeline
    from attn_kit.practice import checkrun

    options = pipeline.Options(exercise, seed, public_only, pure, timeout, memory_cap)
    if watch:
        from attn_kit.cli.practice import watch_check

        sys.exit(watch_check(file, options, as_json=as_json, repro=repro))
    request = checkrun.CheckRequest(file, options, as_json, repro, first, tests_file, locate or fix, fix, locate_budget)
    outcome = checkrun.run(request, CheckScreen(as_json))
    sys.exit(EXIT_PASS if outcome.passed else EXIT_FAIL)


def _progress(file: Path, as_json: bool) -> contextlib.AbstractContextManager:
    """The live progress line on stderr; under --json nothing is drawn, and rich's renderers need
    not load (a quarter of a --json run's start-up)."""
    if as_json:
        return contextlib.nullcontext(lambda text: None)
    from attn_kit.render import check as render

    return render.working(f"{Path(file).name}: starting")


class CheckScreen:
    """practice.checkrun.Display for the terminal: what `check` shows, through the render modules
    (nothing of rich is loaded under --json); a reader that stops early (`| head`) ends the output,
    not the run."""

    def __init__(self, as_json: bool):
        self.as_json = as_json

    def progress(self, file):
        return _progress(file, self.as_json)

    def locate_progress(self, budget):
        if self.as_json:
            return contextlib.nullcontext(None)
        from attn_kit.render import check as render

        return render.locate_progress(budget)

    def json(self, data):
        with reader_may_stop():
            click.echo(jsonout.dumps(data))

    def report(self, report, first):
        from attn_kit.load import catalog
        from attn_kit.render import check as render
        from attn_kit.render import screen
        from attn_kit.render.pager import paged

        out = render.console()
        from attn_kit.cli.practice import notes_after_check

        after = notes_after_check(report)
        with reader_may_stop(), paged(out, when=first is False):  # --full: every failure in full, through the pager
            screen.report(report, catalog.exercise(report.exercise), out, first=first, after=after)

    def located(self, located, report, fix):
        from attn_kit.render import check as render

        with reader_may_stop():
            render.located(located, report, fix=fix)

    def locate_pointer(self, report, command):
        from attn_kit.render import check as render

        with reader_may_stop():
            render.locate_pointer(report, command)

    def repro_written(self, paths):
        from attn_kit.render import check as render

        with reader_may_stop():
            render.repro_written(paths)

    def tests(self, grade, full):
        from attn_kit.render import check as render

        with reader_may_stop():
            render.console().print()
            render.test_grade(grade, full=full, flag="--full")

    def recorded(self, report, source):
        from attn_kit.cli.practice import after_check

        with reader_may_stop():
            after_check(report, source)  # history, concept cards, hints used; never raises


@cli.command("test-tests")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--exercise", "-e", metavar="ID", help="The exercise the tests are for (else the header or the functions they use decide).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object and nothing else.")
@click.option(
    "--timeout", type=timeout_option_type(), default=10.0, show_default=True, help="Seconds one test may take on a correct implementation."
)
@click.option("--memory", type=SIZE, default="2G", show_default=True, help="Memory cap of the process running your tests (0 = none).")
@click.option(
    "--min-score",
    type=FiniteFloat(0, 1),
    default=0.0,
    show_default=True,
    help="Also exit 1 when your tests catch fewer than this share of the known bugs (e.g. 1).",
)
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Show every known bug with the tests that caught it and a test idea for each missed one "
    "(otherwise the report fits one 80x24 screen; --json always has everything).",
)
@reports_errors
def test_tests(file, exercise, as_json, timeout, memory, min_score, show_all):
    """Grade your own pytest tests: do they pass on correct code, and which known bugs do they catch?

    FILE holds ordinary pytest functions (test_*) that import the exercise's functions
    (`from solution import multi_head_attention`, any module name) or define them in the same
    file. They run, sandboxed, against every reference implementation (a test failing there is
    wrong) and every known-bug implementation (a failing test catches that bug).
    Score = bugs caught / known bugs of the exercise.

    Exit status: 0 no test is wrong (missed bugs only lower the score, unless --min-score),
    1 a test fails on correct code or FILE cannot be run, 2 the command was misused.

    \b
    Examples:
      attn-kit test-tests my_tests.py
      attn-kit test-tests my_tests.py --all
      attn-kit test-tests my_tests.py --exercise mha-screen --json
      attn-kit check solution.py --tests my_tests.py
    """
    from attn_kit.practice import testgrade

    with _progress(file, as_json) as status:
        grade = testgrade.grade_tests(file, exercise, timeout, parse_size(memory), progress=status)
    with reader_may_stop():
        if as_json:
            click.echo(jsonout.dumps(grade.to_json()))
        else:
            from attn_kit.render import check as render

            render.test_grade(grade, full=show_all)
    sys.exit(EXIT_PASS if grade.ok and grade.score >= min_score else EXIT_FAIL)


def main():
    """The `attn-kit` command. It ends the process itself once the command is done: exit handlers
    run (the zygote is stopped, as at any exit) and the output is flushed, and then os._exit skips
    the interpreter's own teardown, which frees every module one object at a time (about 25 ms of
    each `check`, a tenth of its time). A command that raises anything but SystemExit ends as
    Python ends it, traceback and all."""
    try:
        _run()
    except SystemExit as exc:
        _exit_now(exc.code)
    _exit_now(0)


def _exit_now(code: object) -> NoReturn:
    if code is not None and not isinstance(code, int):  # sys.exit("message"), as Python reports it
        click.echo(str(code), err=True)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`) or a closed stream: nothing to add
            pass
    os._exit(code or 0)


def _run() -> None:
    one_blas_thread()  # before anything imports NumPy
    stop_on_sigterm()  # SIGTERM unwinds like Ctrl-C: workers and their processes are stopped
    try:
        code = cli.main(prog_name="attn-kit", standalone_mode=False)
    except click.BadParameter as exc:  # a bad option value: one line, exit 2
        message = exc.format_message()
        if "--json" in sys.argv[1:]:
            from attn_kit.report.jsonout import error_json

            words = [a for a in sys.argv[1:] if not a.startswith("-")]
            click.echo(jsonout.dumps(error_json(words[0] if words else "attn-kit", message)))
        else:
            click.echo(f"Error: {message}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:  # a declined confirmation, as click itself reports it
        click.echo("Aborted!", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
