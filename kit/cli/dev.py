"""`attn-kit dev ...`: commands for people changing the kit itself (content, checks, solutions)."""

from __future__ import annotations

import sys

import click

from attn_kit.cli.common import EXIT_FAIL, EXIT_PASS, reports_errors


@click.group()
def dev():
    """Commands for contributors: add an exercise, write the README's tables of exercises, and
    validate the bundled exercises, solutions and bug catalogue.

    \b
    Example:
      attn-kit dev check
    """


@dev.command("update")
@reports_errors
def update_readme():
    """Rewrite the README's tables of exercises and properties, and docs/catalogue.md, from the content.

    Each table sits between `<!-- dev update: NAME -->` and `<!-- end -->` in README.md and is
    written from prompts/exercises/*.toml (`builds`, `proves`, [properties], [[functions]]) and
    prompts/properties.toml; docs/catalogue.md lists each exercise's known bugs (prompts/bugs.toml,
    prompts/catalogue/*.toml). `attn-kit dev check` reports either out of date. Runs in a source
    checkout only (exit 2 in an installed copy, which has no README).

    \b
    Example:
      attn-kit dev update
    """
    from attn_kit.dev import check as devcheck

    changed = devcheck.update_readme()
    if changed:
        click.echo(f"✓ README.md: rewrote the {', '.join(changed)} table(s)")
    else:
        click.echo("✓ README.md is up to date")
    if devcheck.update_catalogue_doc():
        click.echo("✓ docs/catalogue.md: rewrote the known bugs of each exercise")


@dev.command("check")
@reports_errors
def check_content():
    """Validate all bundled content; exit 1 on any problem.

    Checks the TOML files' fields and ids, that every bug file is its reference with one marked
    change, that hints name existing checks, that every known bug is caught by a check declaring
    it, that every exercise has a bench workload, that no unexpected file sits in solutions/
    or prompts/, and (in a source checkout) that the README's generated tables are up to date.
    Prints one line per problem.

    \b
    Example:
      attn-kit dev check
    """
    from attn_kit.dev import check

    result = check.run()
    for problem in result.problems:
        click.echo(f"✗ {problem}")
    for note in result.notes:
        click.echo(f"- {note}")
    if result.ok:
        click.echo(f"✓ content is consistent ({len(result.checked)} validators)")
    else:
        click.echo(f"{len(result.problems)} problem(s) in the bundled content.", err=True)
    sys.exit(EXIT_PASS if result.ok else EXIT_FAIL)


@dev.command("new")
@click.argument("exercise_id", metavar="EXERCISE_ID")
@click.option(
    "--bug",
    default="mutates-input",
    show_default=True,
    metavar="BUG_ID",
    help="The catalogue bug (prompts/bugs.toml) of the skeleton's one bug file.",
)
@reports_errors
def new_exercise(exercise_id, bug):
    """Write the skeleton of a new exercise: its TOML, its own catalogue file (its features and the
    bugs only it makes), checks module, reference and one bug file.

    The skeleton grades from the start (it is single-head attention); every placeholder in it is
    marked TODO(dev new), and `attn-kit dev check` lists each one left until you fill it in.
    Exit 2 when the id is taken or not lowercase words joined by dashes.

    \b
    Example:
      attn-kit dev new toy-exercise
      attn-kit dev update
      attn-kit dev check
    """
    from attn_kit.dev import scaffold

    skeleton = scaffold.new(exercise_id, bug=bug)
    for path in skeleton.files:
        click.echo(f"+ {path}")
    click.echo("Fill in every TODO(dev new) in these files, then run `attn-kit dev update` and `attn-kit dev check`.")


@dev.command("split")
@click.argument("exercise_id", metavar="EXERCISE_ID")
@reports_errors
def split_exercise(exercise_id):
    """Move an exercise's `# --- EXERCISE_ID ---` blocks of prompts/bugs.toml, families.toml and
    coverage.toml into its own prompts/catalogue/EXERCISE_ID.toml.

    For an exercise added before exercises had their own catalogue file: each block runs from its
    header line to the next `# --- ` line or the end of the file. The catalogue as loaded stays the
    same, or nothing is written (exit 2, saying why).

    \b
    Example:
      attn-kit dev split varlen-prefill
      attn-kit dev check
    """
    from attn_kit.base.paths import package_dir
    from attn_kit.dev import split

    moved = split.split(package_dir("prompts"), exercise_id)
    features = "its features, " if moved.features is not None else ""
    click.echo(
        f"✓ prompts/catalogue/{exercise_id}.toml: {features}{len(moved.bugs)} bug(s) and {moved.families} family entries moved there"
    )
