"""`attn-kit grade` and `check --locate --fix` run by an ordinary user (uid UNPRIVILEGED, through
setpriv, as tests/test_sandbox_unprivileged.py does): a link planted at an output (to the user's
own history database) is replaced, not written through; a linked output folder is refused with
exit status 3 and the rest written; hostile names reach every format escaped; and --fix sends no
escape code of the candidate's. As root the same cases run in test_grade_outputs.py and
test_fix_escapes.py.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from junit_xsd import validate
from test_sandbox_unprivileged import UNPRIVILEGED, Setup, _chown_tree, _setup, _why_not

from attn_kit.base.paths import solutions_dir

from helpers import strict_json

EXERCISE = "mha-screen"
REFERENCE = solutions_dir(EXERCISE) / "reference_numpy.py"
LOCATE = Path(__file__).parent / "corpus" / "locate" / "lists_compact__causal-off-by-one.py"
WRONG = "    return [[[j < i for j in range(T)] for i in range(T)] for _ in range(B)]"


@pytest.fixture(scope="module")
def user():
    why = _why_not()
    if why:
        pytest.skip(why)
    root = Path(tempfile.mkdtemp(prefix="attn-kit-grade-unprivileged-"))
    try:
        made = _setup(root)
        probe = subprocess.run(made.argv({}, "-c", "import os; print(os.getuid())"), capture_output=True, text=True, timeout=60)
        if probe.returncode != 0 or probe.stdout.strip() != str(UNPRIVILEGED):
            pytest.skip(f"cannot run the kit as uid {UNPRIVILEGED}: {(probe.stderr or probe.stdout).strip()[-300:]}")
        yield made
    finally:
        shutil.rmtree(root, ignore_errors=True)


def as_user(user: Setup, home: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {"ATTN_KIT_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "100"}
    return subprocess.run(user.argv(env, "-m", "attn_kit.cli", *args), capture_output=True, timeout=timeout, cwd=home)


@pytest.fixture(scope="module")
def graded(user):
    case = user.root / "grade-case"
    subs = case / "subs"
    (subs / "s1").mkdir(parents=True)
    shutil.copy(REFERENCE, subs / "s1" / "solution.py")
    shutil.copy(REFERENCE, subs / "s1.py")
    shutil.copy(REFERENCE, os.fsencode(subs) + b"/caf\xe9.py")
    shutil.copy(REFERENCE, subs / "=cmd|' calc'!A0 \x1b[2J\nfake 47-47.py")
    home = case / "home"
    home.mkdir()
    history = home / "history.db"
    history.write_bytes(b"the user's history")
    out = case / "out"
    (out / "linked-target").mkdir(parents=True)
    (out / "grades.csv").symlink_to(history)
    (out / "pl").symlink_to(out / "linked-target", target_is_directory=True)
    _chown_tree(case)
    case.chmod(0o755)
    proc = as_user(
        user,
        home,
        "grade",
        str(subs),
        "-e",
        EXERCISE,
        "--seed",
        "2",
        "--jobs",
        "1",
        "--timeout",
        "5",
        "--out",
        f"csv={out / 'grades.csv'}",
        "--out",
        f"junit={out / 'report.xml'}",
        "--out",
        f"json={out / 'g.json'}",
        "--out",
        f"gradescope={out / 'gs'}",
        "--out",
        f"prairielearn={out / 'pl'}",
    )
    return proc, out, history


def test_a_planted_link_does_not_reach_the_users_history(graded):
    proc, out, history = graded
    assert history.read_bytes() == b"the user's history"
    assert (out / "grades.csv").is_file() and not (out / "grades.csv").is_symlink()
    assert b"Traceback" not in proc.stderr


def test_a_linked_folder_is_refused_the_rest_written_and_the_status_says_so(graded):
    proc, out, _ = graded
    assert proc.returncode == 3, proc.stderr.decode(errors="replace")
    assert b"could not write prairielearn" in proc.stderr
    assert list((out / "linked-target").iterdir()) == []
    assert len(list((out / "gs").iterdir())) == 4 and b"wrote gradescope: 4 files" in proc.stdout


def test_hostile_names_reach_every_format_escaped(graded):
    proc, out, _ = graded
    for stream in (proc.stdout, proc.stderr):
        assert b"\x1b" not in stream
    record = strict_json((out / "g.json").read_text(encoding="utf-8"))
    assert sorted(s["name"] for s in record["submissions"]) == sorted(["s1", "s1.py", "caf\\xe9", "=cmd|' calc'!A0 \x1b[2J\nfake 47-47"])
    assert all(s["report"]["passed"] for s in record["submissions"])
    validate(out / "report.xml")
    rows = list(csv.reader(io.StringIO((out / "grades.csv").read_text(encoding="utf-8"))))
    assert len(rows) == 5 and not any(c.startswith(("=", "+", "-", "@")) for row in rows for c in row)
    assert sum("47/47" in line for line in proc.stdout.decode().splitlines()) == 4


def test_fix_sends_no_escape_code_as_an_ordinary_user(user):
    case = user.root / "fix-case"
    case.mkdir()
    text = LOCATE.read_text(encoding="utf-8").replace(WRONG, WRONG + "  # \x1b]0;pwned\x07\x1b[2J", 1)
    (case / "solution.py").write_text(text, encoding="utf-8")
    (case / "home").mkdir()
    _chown_tree(case)
    proc = as_user(user, case / "home", "check", str(case / "solution.py"), "--locate", "--fix", "--seed", "1", "--locate-budget", "60")
    assert b"j <= i" in proc.stdout, proc.stdout.decode(errors="replace")[-2000:]
    assert b"\x1b" not in proc.stdout and b"\x07" not in proc.stdout
