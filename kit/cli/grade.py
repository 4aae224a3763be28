"""`attn-kit grade` and `attn-kit autograder`: thin click commands over batch/run.py, batch/outputs.py and
batch/autograder.py (docs/grading.md is the user's guide)."""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path

import click

from attn_kit.batch.formats import NAMES, SUFFIXES
from attn_kit.cli.common import EXIT_FAIL, EXIT_PASS, EXIT_USAGE, SEED, SIZE, parse_size, reports_errors, timeout_option_type

EXIT_BROKEN = 3  # the run broke: an output could not be written, or the kit could not grade


def parse_outputs(formats: tuple[str, ...], outs: tuple[str, ...]) -> list[tuple[str, Path]]:
    """--out FORMAT=PATH, or --format F ... --out PATH ... paired in order; a bare PATH with no
    --format left takes its format from its suffix (.csv, .json, .xml)."""
    from attn_kit.base.errors import UsageError

    pending = list(formats)
    pairs = []
    for out in outs:
        fmt, sep, rest = out.partition("=")
        if sep and fmt in NAMES:
            pairs.append((fmt, Path(rest)))
        elif pending:
            pairs.append((pending.pop(0), Path(out)))
        elif Path(out).suffix in SUFFIXES:
            pairs.append((SUFFIXES[Path(out).suffix], Path(out)))
        else:
            raise UsageError(f"--out {out}: say which format to write there, e.g. --out json={out} (formats: {', '.join(NAMES)}).")
    if pending:
        raise UsageError(f"--format {pending[0]} has no --out PATH to go to; add e.g. --out {pending[0]}=PATH.")
    for fmt, target in pairs:
        if str(target) in ("", "."):
            raise UsageError(f"--out {fmt}= needs a path after the `=`.")
    return pairs


@click.command()
@click.argument("submissions", type=click.Path(path_type=Path))
@click.option("--exercise", "-e", metavar="ID", required=True, help="The exercise every submission solves.")
@click.option(
    "--format",
    "formats",
    multiple=True,
    metavar="FORMAT",
    type=click.Choice(NAMES),
    help="A format for the next bare --out PATH (repeatable).",
)
@click.option(
    "--out",
    "outs",
    multiple=True,
    metavar="FORMAT=PATH",
    help=f"Write results there: {', '.join(NAMES)} (repeatable), e.g. --out csv=grades.csv --out junit=report.xml.",
)
@click.option("--seed", type=SEED, help="Seed of the hidden cases, the same for every submission (default: one per run, printed).")
@click.option("--jobs", "-j", type=click.IntRange(1, 256), help="Submissions graded at once [default: the number of cores].")
@click.option(
    "--timeout", type=timeout_option_type(), default=10.0, show_default=True, help="Seconds one call of a submission's code may take."
)
@click.option(
    "--limit",
    type=timeout_option_type(1.0),
    default=120.0,
    show_default=True,
    help="Seconds one submission may take in all; past it, it is stopped and reported as timed out.",
)
@click.option("--memory", type=SIZE, default="2G", show_default=True, help="Memory cap of each submission's process (0 = none).")
@click.option(
    "--hidden-details",
    is_flag=True,
    help="Show the hidden cases' messages and values in the student-facing formats (junit, gradescope, prairielearn).",
)
@click.option("--single", is_flag=True, help="SUBMISSIONS is one submission's folder (as a platform lays it out).")
@click.option(
    "--allow-unconfined",
    is_flag=True,
    help="Grade even where the submissions' code cannot be confined (no Landlock): it can then read "
    "every file you can and use the network.",
)
@reports_errors
def grade(submissions, exercise, formats, outs, seed, jobs, timeout, limit, memory, hidden_details, single, allow_unconfined):
    """Grade every submission in the folder SUBMISSIONS, as `attn-kit check` grades one file.

    One .py file, .zip file or folder per submission, or Gradescope's export (names from its
    submission_metadata.yml). In a folder or zip, the file graded is its only .py file, else the
    one named as `attn-kit start` names it, else solution.py, else the file starting with
    `# attn-kit: ID`, else the one defining the exercise's function (the rest are its helpers).
    Every output says which file was graded and why.

    Exit status: 0 every submission graded and passed every check; 1 every submission graded or
    reported, and some failed a check or could not be graded (their files' doing); 2 the command
    was misused; 3 the run broke: an output file could not be written (the others were), or the
    kit itself could not grade.

    \b
    Examples:
      attn-kit grade submissions/ --exercise mha-screen
      attn-kit grade submissions/ -e mha-screen --seed 7 --out csv=grades.csv --out junit=report.xml
      attn-kit grade /autograder/submission -e mha-screen --single --out gradescope=results.json
    """
    pairs = parse_outputs(formats, outs)
    scratch = tempfile.TemporaryDirectory(prefix="attn-kit-submissions-")  # archives are extracted here
    with scratch:
        _grade(
            submissions, exercise, pairs, seed, jobs, timeout, limit, memory, hidden_details, single, Path(scratch.name), allow_unconfined
        )


def _grade(
    submissions, exercise, pairs, seed, jobs, timeout, limit, memory, hidden_details, single, scratch: Path, allow_unconfined: bool
) -> None:
    from attn_kit.base.errors import KitError
    from attn_kit.batch import outputs, run
    from attn_kit.render import grade as render_grade

    run.require_confinement(allow_unconfined)  # before anything is printed or looked at
    given = seed is not None
    if seed is None:
        seed = random.SystemRandom().randrange(1, 100_000)
    try:
        # the first grader process starts now and warms up while the submissions are found
        with run.graders(run.exercise_id(exercise), seed, timeout, parse_size(memory), limit, allow_unconfined) as pool:
            found = run.find_submissions(submissions, single, exercise, scratch)
            render_grade.seed_line(seed, given)
            with render_grade.progress(len(found)) as (finished, started):
                result = run.grade_all(
                    found, exercise, seed, jobs, timeout, parse_size(memory), limit, finished, started, allow_unconfined, pool
                )
    except KitError as exc:
        if exc.exit_code == EXIT_USAGE:  # an unknown exercise, ...
            raise
        render_grade.broken(str(exc))
        sys.exit(EXIT_BROKEN)
    render_grade.table(result)
    written = [outputs.write(result, fmt, path, hidden_details) for fmt, path in pairs]
    render_grade.written(written)
    if any(w.failed for w in written):
        sys.exit(EXIT_BROKEN)
    sys.exit(EXIT_PASS if all(r.passed for r in result.results) else EXIT_FAIL)


@click.group()
def autograder():
    """Write the files an autograding platform runs: gradescope, prairielearn or github.

    Each recipe carries the kit's own wheel and grades one student's submission with
    `attn-kit grade` (docs/grading.md).

    \b
    Examples:
      attn-kit autograder gradescope --exercise mha-screen -o autograder.zip
      attn-kit autograder github --exercise mha-screen -o template/
    """


def _recipe(kind: str):
    @click.option("--exercise", "-e", metavar="ID", required=True, help="The exercise the assignment is.")
    @click.option(
        "--output",
        "-o",
        "output",
        type=click.Path(path_type=Path),
        required=True,
        help="Where to write (a .zip for gradescope, a folder otherwise).",
    )
    @click.option("--hidden-details", is_flag=True, help="Show students the hidden cases' messages and values.")
    @click.option(
        "--seed", type=SEED, help="The hidden cases' seed, fixed for the assignment (default: one drawn now, written into the recipe)."
    )
    @click.option(
        "--allow-unconfined", is_flag=True, help="Grade even on a platform where the submissions' code cannot be confined (no Landlock)."
    )
    @reports_errors
    def command(exercise, output, hidden_details, seed, allow_unconfined):
        from attn_kit.batch import autograder as recipes
        from attn_kit.render import grade as render_grade

        files, notes = recipes.write(kind, exercise, output, hidden_details=hidden_details, seed=seed, allow_unconfined=allow_unconfined)
        render_grade.recipe(kind, files, notes)

    command.__doc__ = recipes_doc(kind)
    return autograder.command(kind)(command)


def recipes_doc(kind: str) -> str:
    return {
        "gradescope": """Write Gradescope's autograder zip: setup.sh, run_autograder and the kit's wheel.

        \b
        Example:
          attn-kit autograder gradescope --exercise mha-screen -o autograder.zip
        """,
        "prairielearn": """Write a PrairieLearn external grader: a Containerfile with the kit baked in, run.sh and a README.

        \b
        Example:
          attn-kit autograder prairielearn --exercise mha-screen -o grader/
        """,
        "github": """Write a GitHub Actions workflow that grades the student's file on push, with a summary on the run's page.

        \b
        Example:
          attn-kit autograder github --exercise mha-screen -o .
        """,
    }[kind]


for _kind in ("gradescope", "prairielearn", "github"):
    _recipe(_kind)
