"""Hints, solutions, reset, check history and concept cards, watch mode, discuss, history, progress.

Interactive commands run in a real pseudo-terminal (pexpect).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pexpect
import pytest

from attn_kit.load import catalog

from helpers import attn_kit, check_count, solutions_dir

REFERENCE = solutions_dir("mha-screen") / "reference_lists.py"
NO_SCALING = solutions_dir("mha-screen") / "bugs" / "no-scaling.py"
MASK_INVERTED = solutions_dir("mha-screen") / "bugs" / "mask-inverted.py"
STARTER = catalog.exercise("mha-screen").starter
HINTS = len(catalog.exercise("mha-screen").hints)
CHECKS = check_count("mha-screen")


def spawn(*args, env=None, cwd=None, timeout=30) -> pexpect.spawn:
    """The real CLI in a pseudo-terminal (os.environ carries the test's ATTN_KIT_HOME)."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "attn_kit.cli", *map(str, args)],
        env=dict(os.environ, **(env or {})),
        cwd=cwd,
        encoding="utf-8",
        dimensions=(60, 160),
        timeout=timeout,
    )
    return child


def finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus if child.exitstatus is not None else -(child.signalstatus or 0)


def plain(text: str) -> str:
    """Terminal output without its escape sequences (styles, cursor moves)."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def history_json() -> dict:
    proc = attn_kit("history", "--json", "--limit", "500")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text)


# --- every command has help ---------------------------------------------------------------------


@pytest.mark.parametrize("command", ["hint", "solution", "reset", "mock", "discuss", "history", "progress"])
def test_command_has_help_with_an_example(command):
    proc = attn_kit(command, "--help")
    assert proc.returncode == 0 and "Example" in proc.stdout


# --- hints ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_hints_go_one_level_at_a_time_and_are_recorded(tmp_path):
    first = attn_kit("hint", "mha-screen")
    second = attn_kit("hint", "mha-screen")
    assert first.returncode == 0 and second.returncode == 0
    hints = catalog.exercise("mha-screen").hints
    assert f"Hint 1/{HINTS}" in first.stdout and hints[0].title in first.stdout
    assert f"Hint 2/{HINTS}" in second.stdout and hints[1].title in second.stdout
    assert f"2 of {HINTS}" in second.stdout
    level = attn_kit("hint", "mha-screen", "--level", "5")
    assert f"Hint 5/{HINTS}" in level.stdout and hints[4].title in level.stdout and f"3 of {HINTS}" in level.stdout
    third = attn_kit("hint", "mha-screen")  # the next unseen level, skipping 5
    assert f"Hint 3/{HINTS}" in third.stdout
    levels = sorted(h["level"] for h in history_json()["hints"])
    assert levels == [1, 2, 3, 5]
    # the check output shows the count
    sol = tmp_path / "sol.py"
    shutil.copy(NO_SCALING, sol)
    proc = attn_kit("check", sol)
    assert proc.returncode == 1 and f"Hints used: 4 of {HINTS}" in proc.stdout


@pytest.mark.slow
def test_all_hints_and_bad_levels(attn_home):
    proc = attn_kit("hint", "mha-screen", "--all")
    assert proc.returncode == 0
    for n, item in enumerate(catalog.exercise("mha-screen").hints, 1):
        assert f"Hint {n}/{HINTS}" in proc.stdout and item.title in proc.stdout
    assert "every hint" in proc.stdout
    bad = attn_kit("hint", "mha-screen", "--level", str(HINTS + 1))
    assert bad.returncode == 2 and f"1 to {HINTS}" in bad.stderr and "Traceback" not in bad.stderr
    unknown = attn_kit("hint", "no-such-exercise")
    assert unknown.returncode == 2 and "mha-screen" in unknown.stderr


# --- solution ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_solution_is_locked_until_pass_or_every_hint(tmp_path):
    locked = attn_kit("solution", "mha-screen")
    assert locked.returncode == 1 and "--force" in locked.stderr and "def stable_softmax" not in locked.stdout
    attn_kit("hint", "mha-screen", "--all")
    opened = attn_kit("solution", "mha-screen")
    assert opened.returncode == 0 and "def multi_head_attention" in opened.stdout
    assert "reference_lists.py" in opened.stdout and "reference_numpy.py" in opened.stdout
    assert history_json()["solution_views"][0]["forced"] is False


@pytest.mark.slow
def test_solution_opens_after_a_passing_check_and_force_is_recorded(tmp_path):
    forced = attn_kit("solution", "mha-screen", "--force")
    assert forced.returncode == 0 and "def multi_head_attention" in forced.stdout and "--force" in forced.stdout
    assert history_json()["solution_views"][0]["forced"] is True
    mine = tmp_path / "solution.py"
    shutil.copy(REFERENCE, mine)  # the user's own file (the bundled one is never recorded)
    public = attn_kit("check", mine, "--public")  # public examples only: not a pass
    assert public.returncode == 0
    assert attn_kit("solution", "mha-screen").returncode == 1
    assert attn_kit("check", mine).returncode == 0
    opened = attn_kit("solution", "mha-screen")
    assert opened.returncode == 0 and "def multi_head_attention" in opened.stdout
    assert [v["forced"] for v in history_json()["solution_views"]] == [False, True]


# --- reset ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_reset_asks_first_and_keeps_a_backup(tmp_path, attn_home):
    sol = tmp_path / "solution.py"
    sol.write_text("# my work in progress\n")
    child = spawn("reset", "mha-screen", sol)
    child.expect(r"Replace .*\[y/N\]")
    child.sendline("n")
    child.expect("Nothing changed")
    assert finish(child) == 0, "declining is a choice, not a failure"
    assert "Aborted" not in child.before
    assert sol.read_text() == "# my work in progress\n"
    child = spawn("reset", "mha-screen", sol)
    child.expect(r"\[y/N\]")
    child.sendline("y")
    child.expect("previous version is saved at")
    assert finish(child) == 0
    assert sol.read_text() == STARTER
    [backup] = (attn_home / "backups").glob("solution-*.py")
    assert backup.read_text() == "# my work in progress\n"


@pytest.mark.slow
def test_reset_yes_and_new_file(tmp_path):
    fresh = tmp_path / "new.py"
    proc = attn_kit("reset", "mha-screen", fresh)  # nothing to overwrite: no question
    assert proc.returncode == 0 and fresh.read_text() == STARTER
    fresh.write_text("changed\n")
    proc = attn_kit("reset", "mha-screen", fresh, "--yes")
    assert proc.returncode == 0 and fresh.read_text() == STARTER
    assert attn_kit("reset", "nope", fresh, "--yes").returncode == 2


# --- history of checks and the kit's own card ratings ------------------------------------------


@pytest.mark.slow
def test_check_runs_are_recorded_and_rate_concept_cards(tmp_path):
    from attn_kit.practice import review
    from attn_kit.practice.store import open_store

    sol = tmp_path / "sol.py"
    shutil.copy(NO_SCALING, sol)
    proc = attn_kit("check", sol)
    assert proc.returncode == 1 and "scaling" in proc.stdout
    data = history_json()
    [run] = data["checks"]
    assert run["bugs"] == ["no-scaling"] and run["passed"] is False and "scaling" in run["concepts_failed"]
    assert data["reviews"] == [] and "attn-kit discuss" not in proc.stdout  # cards never seen: not rated
    scaling = [q for q in catalog.exercise("mha-screen").questions if q.concept == "scaling"]
    with open_store() as store:  # the user reviews them
        for question in scaling:
            review.review(store, "mha-screen", question, review.RATINGS["good"])
    proc = attn_kit("check", sol)
    said = " ".join(proc.stdout.split())
    assert "1 card you reviewed before came back" in said and "attn-kit discuss" in said
    again = {r["question"] for r in history_json()["reviews"] if r["rating"] == 1 and r["source"] == "check"}
    assert again == {q.id for q in scaling}  # only the diagnosed concept, not every failing check's
    attn_kit("check", sol)  # the same day: no second automatic rating
    assert len(history_json()["reviews"]) == 2 * len(scaling)
    shutil.copy(REFERENCE, sol)
    assert attn_kit("check", sol).returncode == 0
    data = history_json()
    assert len(data["reviews"]) == 2 * len(scaling)  # a fix does not rate
    assert [r["passed"] for r in data["checks"]] == [True, False, False, False]


@pytest.mark.slow
def test_json_check_is_one_object_and_not_recorded():
    proc = attn_kit("check", NO_SCALING, "--json")
    assert proc.returncode == 1 and len(proc.stdout.strip().splitlines()) == 1
    assert json.loads(proc.stdout)["diagnosis"][0]["bug"] == "no-scaling"
    assert history_json()["checks"] == []


@pytest.mark.slow
def test_history_and_progress_tables(tmp_path):
    empty = attn_kit("history")
    assert empty.returncode == 0 and "No history yet" in empty.stdout
    for source, name in ((MASK_INVERTED, "attempt.py"), (REFERENCE, "solution.py")):
        shutil.copy(source, tmp_path / name)
        attn_kit("check", tmp_path / name)
    attn_kit("hint", "mha-screen")
    table = attn_kit("history")
    assert table.returncode == 0
    assert "Check runs" in table.stdout and "mask-inverted" in table.stdout and f"{CHECKS}/{CHECKS}" in table.stdout
    assert "hint 1 of mha-screen" in table.stdout
    # the failing check rates no card: cards the user has never reviewed are theirs to introduce
    assert "Reviews" not in table.stdout
    progress = attn_kit("progress")
    assert progress.returncode == 0
    row = next(line for line in progress.stdout.splitlines() if line.startswith("mha-screen"))
    assert f"{CHECKS}/{CHECKS}" in row and f"1/{HINTS}" in row
    assert "bugs seen in mha-screen: mask-inverted" in progress.stdout  # ids below the table, never cut
    data = json.loads(attn_kit("progress", "--json").stdout)
    mine = next(p for p in data if p["exercise"] == "mha-screen")
    assert mine["best"] == [CHECKS, CHECKS] and mine["passed"] and mine["bugs_seen"] == ["mask-inverted"]
    assert mine["hints_used"] == 1 and mine["runs"] == 2


# --- watch mode ----------------------------------------------------------------------------------


def _processes_mentioning(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to look for leftover processes")
@pytest.mark.parametrize("poll", ["0", "1"], ids=["file-events", "polling"])
def test_watch_reruns_on_save_and_exits_cleanly(tmp_path, poll):
    sol = tmp_path / f"watched_{poll}.py"
    sol.write_text(STARTER)
    child = spawn("check", sol, "--watch", env={"ATTN_KIT_POLL": poll})
    child.expect("not implemented yet")
    child.expect(r"run 1 · watching")
    child.expect("polling" if poll == "1" else "file events")
    time.sleep(0.3)
    sol.write_text(NO_SCALING.read_text())
    child.expect(r"run 2 · watching")
    before = plain(child.before)
    assert "● no-scaling:" in before and "/47 points" in before
    time.sleep(0.3)
    sol.write_text(REFERENCE.read_text())
    child.expect(f"All {CHECKS} checks passed")
    child.expect(r"run 3 · watching")
    if poll == "1":
        child.sendintr()  # Ctrl-C
    else:
        child.send("q")
    assert finish(child) == 0
    assert "Traceback" not in child.before
    time.sleep(0.2)
    assert _processes_mentioning(str(sol)) == []
    sources = [c["source"] for c in history_json()["checks"]]
    assert sources == ["watch"] * 3


@pytest.mark.slow
def test_watch_shows_a_syntax_error_and_keeps_watching(tmp_path):
    sol = tmp_path / "broken.py"
    sol.write_text("# attn-kit: mha-screen\ndef stable_softmax(:\n")
    child = spawn("check", sol, "--watch")
    child.expect("Error:")
    child.expect(r"run 1 · watching")
    time.sleep(0.3)
    sol.write_text(REFERENCE.read_text())
    child.expect(f"All {CHECKS} checks passed")
    child.send("q")
    assert finish(child) == 0


def test_watch_misuse():
    proc = attn_kit("check", "missing.py", "--watch")
    assert proc.returncode == 2 and "no such file" in proc.stderr
    proc = attn_kit("check", REFERENCE, "--watch", "--json")  # --json errors are a JSON object
    assert proc.returncode == 2 and "--json" in json.loads(proc.stdout)["error"]


# --- discuss -------------------------------------------------------------------------------------


def _review_due(key: str) -> datetime:
    rows = [r for r in history_json()["reviews"] if r["key"] == key]
    return parse(rows[0]["due"])


@pytest.mark.slow
def test_discuss_ratings_change_due_dates():
    questions = catalog.exercise("mha-screen").questions
    child = spawn("discuss", "mha-screen", "--new", "2")
    child.expect(r"Card 1/2")
    child.expect(r"Your answer")
    child.sendline("variance grows with the width")
    child.sendline("so the softmax saturates")  # answers take several lines, as in a mock
    child.sendline("")
    child.expect("Key points")
    child.expect(r"Rate it")
    child.sendline("4")  # easy
    child.expect(r"next due in (\d+) day")
    child.expect(r"Card 2/2")
    child.expect(r"Your answer")
    child.sendline("")
    child.expect(r"Rate it")
    child.sendline("1")  # again
    child.expect(r"next due in \d+ minute")
    child.expect(r"Reviewed 2 cards")
    child.expect(r"due by tomorrow: 1 ")  # the 'again' card; the 'easy' one is days away
    assert finish(child) == 0
    start = datetime.now(timezone.utc)
    reviews = history_json()["reviews"]
    assert {r["rating"] for r in reviews} == {1, 4} and {r["source"] for r in reviews} == {"discuss"}
    easy = next(r for r in reviews if r["rating"] == 4)
    again = next(r for r in reviews if r["rating"] == 1)
    assert parse(easy["due"]) > start + timedelta(days=1)
    assert parse(again["due"]) < start + timedelta(minutes=15)
    assert {easy["question"], again["question"]} <= {q.id for q in questions}

    nothing = spawn("discuss", "--due")
    nothing.expect("No card is due now")
    assert finish(nothing) == 0

    later = (start + timedelta(hours=2)).isoformat()
    child = spawn("discuss", "--due", env={"ATTN_KIT_NOW": later})
    child.expect(r"Card 1/1 · due")
    child.expect(r"Exercise: mha-screen")
    child.sendline("")
    child.expect("Rate it")
    child.sendline("good")
    child.expect(r"next due in")
    child.expect(r"Reviewed 1 card")
    assert finish(child) == 0
    assert _review_due(again["key"]) > parse(again["due"])


@pytest.mark.slow
def test_discuss_quit_and_bad_rating_keep_what_was_saved():
    child = spawn("discuss", "mha-screen", "--new", "3")
    child.expect(r"Card 1/3")
    child.sendline("")
    child.expect("Rate it")
    child.sendline("meh")  # not a rating: asked again
    child.expect("Rate it")
    child.sendline("3")
    child.expect(r"Card 2/3")
    child.sendline("")
    child.expect("Rate it")
    child.sendline("q")
    child.expect(r"Reviewed 1 card")
    assert finish(child) == 0
    assert len(history_json()["reviews"]) == 1
