"""The quick start changes no progress; the history file's place is said once and on demand."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from attn_kit.base.paths import solutions_dir
from attn_kit.cli import cli

from conftest import attn_kit

REFERENCE = solutions_dir("mha-screen") / "reference_lists.py"


def invoke(*args):
    return CliRunner().invoke(cli, [*map(str, args)])


@pytest.mark.slow
def test_grading_the_bundled_reference_records_nothing(attn_home):
    proc = attn_kit("check", REFERENCE, fresh=True)  # the quick start's command, as a user runs it: a new interpreter
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Not saved to your history" in proc.stdout
    assert not (attn_home / "history.db").exists()
    assert invoke("solution", "mha-screen").exit_code == 1  # still locked
    progress = invoke("progress", "--json")
    assert all(row["runs"] == 0 and row["best"] is None for row in __import__("json").loads(progress.stdout))


def test_a_bundled_bug_file_is_not_recorded_but_a_copy_is(attn_home, tmp_path):
    bug = solutions_dir("mha-screen") / "bugs" / "no-scaling.py"
    assert invoke("check", bug, "--seed", "1").exit_code == 1
    assert not (attn_home / "history.db").exists()
    mine = tmp_path / "solution.py"
    shutil.copy(bug, mine)
    first = invoke("check", mine, "--seed", "1")
    said = " ".join(first.stderr.split())  # wrapped at spaces: the path stays whole on its line
    assert f"keeps your practice history in {attn_home / 'history.db'}" in said
    assert str(attn_home / "history.db") in first.stderr.split()
    assert "Not saved" not in first.stdout
    again = invoke("check", mine, "--seed", "1")
    assert "keeps your practice history" not in again.stderr  # said once
    assert len(__import__("json").loads(invoke("history", "--json").stdout)["checks"]) == 2


def test_history_where_prints_the_path_without_creating_it(attn_home):
    result = invoke("history", "--where")
    assert result.exit_code == 0 and result.stdout == f"{attn_home / 'history.db'}\n"
    assert not (attn_home / "history.db").exists()


def test_the_first_screen_knows_which_note_will_follow_it(attn_home, tmp_path):
    """check's first screen makes room for the note recording prints after it: where the history
    is kept (only before the history exists), or why a bundled file is not saved (always)."""
    from types import SimpleNamespace

    from attn_kit.cli.practice import notes_after_check

    mine = SimpleNamespace(path=str(tmp_path / "solution.py"))
    bundled = SimpleNamespace(path=str(solutions_dir("mha-screen") / "reference_numpy.py"))
    [note] = notes_after_check(mine)
    assert str(attn_home / "history.db") in note.plain
    assert "Not saved to your history" in notes_after_check(bundled)[0].plain
    shutil.copy(solutions_dir("mha-screen") / "reference_numpy.py", tmp_path / "solution.py")
    assert invoke("check", tmp_path / "solution.py", "--seed", "1").exit_code == 0  # creates the history
    assert notes_after_check(mine) == ()
    assert "Not saved to your history" in notes_after_check(bundled)[0].plain
