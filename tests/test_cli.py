"""The CLI surface: help for every command, list/start/show, the --json contract, --public,
--seed, --repro, colours, and lean start-up."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import click
import pexpect
import pytest
from click.testing import CliRunner

from attn_kit.base.paths import bug_files, solutions_dir
from attn_kit.cli import cli
from attn_kit.grading import pipeline
from attn_kit.load import catalog

from conftest import CORPUS, attn_kit, check_json

NUMPY_REF = solutions_dir("mha-screen") / "reference_numpy.py"
NO_SCALING = next(p for p in bug_files("mha-screen") if p.stem == "no-scaling")
REFERENCE = solutions_dir("mha-screen") / "reference_lists.py"


def all_commands(group=cli, prefix=()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the lazy group's commands too (loaded here)
        command = group.get_command(ctx, name)
        yield prefix + (name,), command
        if isinstance(command, click.Group):
            yield from all_commands(command, prefix + (name,))


@pytest.mark.parametrize("path, command", list(all_commands()), ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_every_command_has_help_with_an_example(path, command):
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert command.help and len(command.help.strip()) > 20
    assert "attn-kit" in result.output and "Example" in (command.help or ""), f"{path} help has no example"


def test_list_shows_every_exercise():
    proc = attn_kit("list")
    assert proc.returncode == 0
    for exercise_id in catalog.exercises():
        assert exercise_id in proc.stdout


def test_start_writes_starter_and_prints_statement(tmp_path):
    path = tmp_path / "solution.py"
    proc = attn_kit("start", "mha-screen", path)
    assert proc.returncode == 0
    assert path.read_text().startswith("# attn-kit: mha-screen\n")
    assert "Multi-head attention by hand" in proc.stdout and "attn-kit check" in proc.stdout
    again = attn_kit("start", "mha-screen", path)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert attn_kit("start", "nope", tmp_path / "x.py").returncode == 2


def test_show_prints_statement():
    proc = attn_kit("show", "mha-screen")
    assert proc.returncode == 0 and "stable_softmax" in proc.stdout and "True means allowed" in proc.stdout


def validate_check_json(data: dict):
    """The object shape fixed by SPEC.md's `attn-kit check FILE --json`."""
    assert set(data) >= {"exercise", "passed", "score", "checks", "diagnosis"}
    assert isinstance(data["exercise"], str) and isinstance(data["passed"], bool)
    assert isinstance(data["score"]["passed"], int) and isinstance(data["score"]["total"], int)
    assert 0 <= data["score"]["passed"] <= data["score"]["total"] == len(data["checks"])
    for c in data["checks"]:
        assert set(c) >= {"id", "title", "status", "message", "bug"}
        assert c["status"] in ("pass", "fail", "error", "skip")
        assert isinstance(c["message"], str) and isinstance(c["title"], str)
        assert c["bug"] is None or c["bug"] in catalog.bugs()
    for d in data["diagnosis"]:
        assert set(d) >= {"bug", "title", "evidence"} and d["bug"] in catalog.bugs()
    graded = [c for c in data["checks"] if c["status"] != "skip"]
    assert data["passed"] == (bool(graded) and all(c["status"] == "pass" for c in graded))
    if data["passed"]:
        assert data["diagnosis"] == []


@pytest.mark.parametrize("path, code", [(NUMPY_REF, 0), (NO_SCALING, 1), (CORPUS / "mha" / "nan_output.py", 1)])
def test_json_output_matches_the_spec(path, code):
    proc = attn_kit("check", path, "--json", "--seed", "3")
    assert proc.returncode == code
    assert proc.stdout.endswith("\n") and proc.stdout.count("\n") == 1, "exactly one JSON object on stdout"
    data = json.loads(proc.stdout)
    validate_check_json(data)
    assert data["passed"] is (code == 0)


def test_same_seed_same_result_and_seed_is_reported():
    first, _ = check_json(NO_SCALING, "--seed", "11")
    second, _ = check_json(NO_SCALING, "--seed", "11")
    assert first == second and first["seed"] == 11


def test_public_runs_only_public_examples():
    data, code = check_json(NO_SCALING, "--public", "--seed", "1")
    suite = pipeline.suite_for(catalog.exercise("mha-screen"))
    public = [c.id for c in suite.checks if c.public]
    assert [c["id"] for c in data["checks"]] == public
    assert code == 1 and data["public_only"] is True


def test_repro_scripts_rebuild_the_failing_call(tmp_path):
    folder = tmp_path / "repro"
    proc = attn_kit("check", NO_SCALING, "--seed", "2", "--repro", folder)
    assert proc.returncode == 1
    scripts = sorted(folder.glob("repro_*.py"))
    assert scripts and (folder / "repro_public_attention_example.py") in scripts
    run = subprocess.run(
        [sys.executable, str(folder / "repro_public_attention_example.py")], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert run.returncode == 1, run.stderr  # yours differs from expected
    assert "yours[1]:" in run.stdout and "expected (the reference)[1]:" in run.stdout
    assert "0.035119" in run.stdout and "0.0743" in run.stdout  # no-scaling's weight vs the reference's
    assert re.search(r"compared\[1\]: \d+ of \d+ entries differ; the largest at index \(0, \d+, \d+, \d+\)", run.stdout)
    fixed = folder / "repro_public_attention_example.py"  # the same script on the reference: agrees
    fixed.write_text(fixed.read_text().replace(repr(str(NO_SCALING.resolve())), repr(str(REFERENCE.resolve()))))
    run = subprocess.run([sys.executable, str(fixed)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.returncode == 0 and "compared[1]: yours matches expected" in run.stdout, run.stdout + run.stderr


@pytest.mark.slow
def test_output_is_plain_when_piped_and_coloured_on_a_terminal():
    proc = attn_kit("check", NO_SCALING, "--seed", "1", env={"NO_COLOR": ""})
    assert "\x1b[" not in proc.stdout
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(TERM="xterm-256color", COLUMNS="100")
    child = pexpect.spawn(
        sys.executable, ["-m", "attn_kit.cli", "check", str(NO_SCALING), "--seed", "1"], env=env, encoding="utf-8", timeout=60
    )
    text = child.read()
    child.close()
    assert "\x1b[" in text and "no-scaling" in text
    env["NO_COLOR"] = "1"
    child = pexpect.spawn(
        sys.executable, ["-m", "attn_kit.cli", "check", str(NO_SCALING), "--seed", "1"], env=env, encoding="utf-8", timeout=60
    )
    text = child.read()
    child.close()
    assert "no-scaling" in text and "\x1b[3" not in text and "\x1b[1;3" not in text


def test_importing_the_cli_imports_neither_numpy_nor_rich():
    code = "import sys, attn_kit.cli; bad = [m for m in ('numpy', 'rich', 'torch') if m in sys.modules]; print(','.join(bad))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == ""


@pytest.mark.parametrize(
    "ending, code, stderr",
    [("sys.exit(3)", 3, ""), ("sys.exit('no such exercise')", 1, "no such exercise"), ("pass", 0, "")],
    ids=["status", "message", "return"],
)
def test_main_ends_with_the_status_after_exit_handlers_and_buffered_output(ending, code, stderr):
    """main() ends the process with os._exit: the exit handlers must still run (they stop the
    zygote) and output still in buffers must still arrive, with the status the command gave."""
    script = (
        "import atexit, sys\nimport attn_kit.cli.app as app\n"
        "atexit.register(lambda: print('handler ran'))\n"
        "def run():\n    sys.stdout.write('buffered, no newline')\n    " + ending + "\n"
        "app._run = run\napp.main()\nprint('not reached')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == "buffered, no newlinehandler ran\n"
    assert proc.stderr.strip() == stderr


def test_checking_mha_screen_does_not_import_torch_or_rich_in_json_mode():
    code = (
        "import sys\nfrom attn_kit.grading import pipeline as grading\n"
        f"grading.grade({str(NUMPY_REF)!r}, grading.Options(seed=1))\n"
        "print(','.join(m for m in ('torch', 'rich') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr


def test_render_report_as_text():
    from rich.console import Console

    from attn_kit.render import check

    report = pipeline.grade(NO_SCALING, pipeline.Options(seed=4))
    buffer = io.StringIO()
    check.report(report, catalog.exercise("mha-screen"), Console(file=buffer, width=100, theme=check.THEME), first=False)  # --full
    text = buffer.getvalue()
    assert "✗ public-attention-example" in text
    assert "expected [" in text and "yours    [" in text and "max |Δ|" in text
    assert "Your output matches no-scaling" in text and "Fix: Divide the scores by sqrt(hd)" in text
    assert "same cause: no-scaling" in text
    assert "attn-kit hint mha-screen --level" in text
    assert f"--seed {report.seed}" in text


def test_passing_report_says_so_in_one_line():
    from rich.console import Console

    from attn_kit.render import check

    report = pipeline.grade(NUMPY_REF, pipeline.Options(seed=4))
    buffer = io.StringIO()
    check.report(report, catalog.exercise("mha-screen"), Console(file=buffer, width=100, theme=check.THEME))
    got, most = report.points
    assert f"✓ All {len(report.results)} checks passed — {got}/{most} points." in buffer.getvalue()


def test_commands_of_other_modules_load_only_when_used():
    """`attn-kit check` and `--help` of one command do not import the practice, bench, grade or dev
    modules (issue 36: start-up); listing the commands loads them all, each by its own name."""
    from attn_kit.cli.app import LAZY_COMMANDS

    probe = "import sys; from attn_kit.cli import app; print(sorted(m for m in sys.modules if m.startswith('attn_kit.cli.')))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "attn_kit.cli.practice" not in loaded and "attn_kit.cli.grade" not in loaded and "attn_kit.cli.app" in loaded, loaded
    ctx = click.Context(cli)
    for name, target in LAZY_COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name, (name, target)
    assert set(LAZY_COMMANDS) <= set(cli.list_commands(ctx))
