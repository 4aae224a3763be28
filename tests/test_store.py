"""The history database: transactions, two writers at once, kill -9 mid-write, corruption."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from attn_kit.practice import store as store_module
from attn_kit.practice.store import StoreError, db_path, open_store

from conftest import attn_kit, solutions_dir


def _check_fields(n: int) -> dict:
    return dict(
        exercise="mha-screen",
        file=f"f{n}.py",
        seed=n,
        passed=bool(n % 2),
        checks_passed=n % 26,
        checks_total=26,
        points=n % 47,
        max_points=47,
        public_only=False,
        failing=["output-shapes"],
        bugs=["no-scaling"],
        concepts_failed=["scaling"],
    )


def test_home_comes_from_attn_kit_home(attn_home):
    assert db_path() == attn_home / "history.db"
    with open_store() as st:
        st.add_check(**_check_fields(1))
    assert (attn_home / "history.db").exists()


def test_rows_round_trip(attn_home):
    with open_store() as st:
        st.add_check(**_check_fields(3))
        st.add_hint("mha-screen", 2)
        st.add_hint("mha-screen", 2)
        st.add_solution_view("mha-screen", forced=True)
        mock_id = st.start_mock("mha-screen", "/tmp/x", 45)
        st.finish_mock(mock_id, status="abandoned", seconds_used=12.5, discussion=[{"question": "q", "covered": 1}])
    with open_store() as st:
        [row] = st.checks()
        assert row["failing"] == ["output-shapes"] and row["bugs"] == ["no-scaling"] and row["passed"] is True
        assert st.hint_levels("mha-screen") == {2}
        assert st.solution_views()[0]["forced"] is True
        [mock] = st.mocks()
        assert mock["status"] == "abandoned" and mock["discussion"] == [{"question": "q", "covered": 1}]


def test_interrupted_transaction_is_rolled_back(attn_home):
    with open_store() as st:
        with pytest.raises(KeyboardInterrupt):
            with st.transaction():
                st.add_check(**_check_fields(1))
                st.add_hint("mha-screen", 1)
                raise KeyboardInterrupt
        assert st.checks() == [] and st.hint_levels("mha-screen") == set()
        st.add_hint("mha-screen", 1)  # still usable afterwards
        assert st.hint_levels("mha-screen") == {1}


WRITER = textwrap.dedent("""
    import sys
    from attn_kit.practice.store import open_store
    count = int(sys.argv[1]); tag = sys.argv[2]
    st = open_store()
    for n in range(count):
        with st.transaction():      # two rows that must appear together or not at all
            st.add_check(exercise="mha-screen", file=f"{tag}-{n}.py", seed=n, passed=False, checks_passed=0,
                         checks_total=26, points=0, max_points=47, public_only=False, failing=[], bugs=[],
                         concepts_failed=[])
            st.add_hint(tag, n)
        print(n, flush=True)
""")


def _writer(count: int, tag: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(count), tag], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )


@pytest.mark.slow
def test_two_writers_at_once_lose_nothing(attn_home):
    writers = [_writer(150, "a"), _writer(150, "b")]
    for w in writers:
        out, err = w.communicate(timeout=120)
        assert w.returncode == 0, err
    conn = sqlite3.connect(attn_home / "history.db")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT COUNT(*) FROM checks").fetchone()[0] == 300
    for tag in "ab":
        levels = {r[0] for r in conn.execute("SELECT level FROM hints WHERE exercise = ?", (tag,))}
        assert levels == set(range(150))


@pytest.mark.slow
def test_killed_writer_leaves_every_committed_row(attn_home):
    writer = _writer(100_000, "k")
    committed = -1
    while committed < 60:  # let it commit a good number of transactions first
        line = writer.stdout.readline()
        assert line, writer.stderr.read()
        committed = int(line)
    os.kill(writer.pid, signal.SIGKILL)  # mid-write: it commits continuously
    writer.wait(timeout=10)
    assert writer.returncode == -signal.SIGKILL
    with open_store() as st:  # opens cleanly, no corruption warning
        assert st.warnings == []
        checks = st.query("SELECT COUNT(*) AS n FROM checks")[0]["n"]
        hints = st.hint_levels("k")
    assert checks >= committed + 1  # everything it reported committed is there
    assert len(hints) == checks  # and no transaction is half-written
    assert hints == set(range(checks))


def test_garbage_database_is_moved_aside(attn_home):
    path = attn_home / "history.db"
    path.write_bytes(b"this is not a database " * 400)
    with open_store() as st:
        assert len(st.warnings) == 1 and "moved to" in st.warnings[0]
        st.add_hint("mha-screen", 1)
        assert st.hint_levels("mha-screen") == {1}
    moved = list(attn_home.glob("history.db.corrupt-*"))
    assert len(moved) == 1 and moved[0].read_bytes().startswith(b"this is not a database")


def test_damaged_page_is_detected_and_moved_aside(attn_home):
    with open_store() as st:
        for n in range(400):
            st.add_check(**dict(_check_fields(n), file="x" * 300 + str(n)))
    conn = sqlite3.connect(attn_home / "history.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    path = attn_home / "history.db"
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 6 * page
    data[3 * page : 5 * page] = os.urandom(2 * page)  # scribble over two b-tree pages
    path.write_bytes(bytes(data))
    with open_store() as st:
        assert st.warnings and "damaged" in st.warnings[0]
        assert st.checks() == []
    assert list(attn_home.glob("history.db.corrupt-*"))


def test_corruption_warning_reaches_the_user_without_a_traceback(attn_home):
    (attn_home / "history.db").write_bytes(b"\x00garbage" * 1000)
    proc = attn_kit("history")
    assert proc.returncode == 0
    assert "Warning:" in proc.stderr and "corrupt-" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_newer_schema_is_refused_not_overwritten(attn_home):
    with open_store():
        pass
    conn = sqlite3.connect(attn_home / "history.db")
    conn.execute(f"PRAGMA user_version = {store_module.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer attn-kit"):
        open_store()
    assert not list(attn_home.glob("history.db.corrupt-*"))


@pytest.mark.slow
def test_unwritable_home_does_not_break_check(attn_home, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the data folder should be")
    reference = tmp_path / "solution.py"  # the user's file: the bundled one is never recorded
    shutil.copy(solutions_dir("mha-screen") / "reference_lists.py", reference)
    env = {"ATTN_KIT_HOME": str(blocker)}
    proc = attn_kit("check", reference, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "All" in proc.stdout and "Warning:" in proc.stderr and "not saved" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = attn_kit("check", reference, "--json", env=env)
    assert proc.returncode == 0 and proc.stdout.count("\n") == 1
    assert json.loads(proc.stdout)["passed"] is True


def test_pinned_clock(monkeypatch):
    monkeypatch.setenv("ATTN_KIT_NOW", "2030-01-02T03:04:05")
    moment = store_module.now()
    assert moment.tzinfo is not None and moment.utcoffset().total_seconds() == 0
    assert store_module.iso(moment) == "2030-01-02T03:04:05.000000+00:00"
    monkeypatch.delenv("ATTN_KIT_NOW")
    assert abs(time.time() - store_module.now().timestamp()) < 5
