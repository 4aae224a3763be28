"""`attn-kit dev ...`: commands for people changing the kit itself (content, checks, solutions)."""

from __future__ import annotations

import sys

import click

from .cli_common import EXIT_FAIL, EXIT_PASS, reports_errors


@click.group()
def dev():
    """Commands for contributors: validate the bundled exercises, solutions and bug catalogue.

    \b
    Example:
      attn-kit dev check
    """


@dev.command("check")
@reports_errors
def check_content():
    """Validate all bundled content; exit 1 on any problem.

    Checks the TOML files' fields and ids, that every bug file is its reference with one marked
    change, that hints name existing checks, that every known bug is caught by a check declaring
    it, that every exercise has a bench workload, and that no unexpected file sits in solutions/
    or prompts/. Prints one line per problem.

    \b
    Example:
      attn-kit dev check
    """
    from . import devcheck
    result = devcheck.run()
    for problem in result.problems:
        click.echo(f"✗ {problem}")
    for note in result.notes:
        click.echo(f"- {note}")
    if result.ok:
        click.echo(f"✓ content is consistent ({len(result.checked)} validators)")
    else:
        click.echo(f"{len(result.problems)} problem(s) in the bundled content.", err=True)
    sys.exit(EXIT_PASS if result.ok else EXIT_FAIL)
