"""Schema migrations of the history database: a database written by today's schema (version 1,
its CREATE statements copied below as they shipped) opens with nothing lost, a new migration
upgrades it in place, and a failing one leaves it as it was."""

from __future__ import annotations

import json
import sqlite3

import pytest

from attn_kit.practice import store as store_module
from attn_kit.practice.store import open_store

# The CREATE statements of schema version 1, exactly as attn-kit 0.1.0 ran them. Frozen here on
# purpose: a database written by them must keep opening after any later schema change.
SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS checks (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    exercise TEXT NOT NULL,
    file TEXT NOT NULL,
    seed INTEGER,
    passed INTEGER NOT NULL,
    checks_passed INTEGER NOT NULL,
    checks_total INTEGER NOT NULL,
    points INTEGER NOT NULL,
    max_points INTEGER NOT NULL,
    public_only INTEGER NOT NULL DEFAULT 0,
    failing TEXT NOT NULL DEFAULT '[]',          -- JSON list of failing check ids
    bugs TEXT NOT NULL DEFAULT '[]',             -- JSON list of diagnosed bug ids
    concepts_failed TEXT NOT NULL DEFAULT '[]',  -- JSON list of concepts the run failed on
    source TEXT NOT NULL DEFAULT 'check'         -- check | watch | mock
);
CREATE INDEX IF NOT EXISTS checks_by_exercise ON checks (exercise, at);
CREATE TABLE IF NOT EXISTS hints (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    exercise TEXT NOT NULL,
    level INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS solution_views (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    exercise TEXT NOT NULL,
    forced INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS mocks (
    id INTEGER PRIMARY KEY,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    exercise TEXT NOT NULL,
    folder TEXT NOT NULL,
    minutes REAL NOT NULL,
    status TEXT NOT NULL,                        -- running | submitted | time-up | abandoned
    seconds_used REAL,
    passed INTEGER,
    checks_passed INTEGER,
    checks_total INTEGER,
    points INTEGER,
    max_points INTEGER,
    hints_used INTEGER,
    discussion TEXT NOT NULL DEFAULT '[]',       -- JSON: [{question, covered, total}]
    report TEXT                                  -- path of report.md
);
CREATE TABLE IF NOT EXISTS cards (
    key TEXT PRIMARY KEY,                        -- "<exercise>/<question id>"
    exercise TEXT NOT NULL,
    question TEXT NOT NULL,
    concept TEXT NOT NULL,
    card TEXT NOT NULL,                          -- fsrs Card.to_json()
    due TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS reviews (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    key TEXT NOT NULL,
    exercise TEXT NOT NULL,
    question TEXT NOT NULL,
    rating INTEGER NOT NULL,                     -- fsrs Rating: 1 again, 2 hard, 3 good, 4 easy
    source TEXT NOT NULL,                        -- discuss | check
    due TEXT NOT NULL,                           -- the card's next due time after this review
    log TEXT NOT NULL                            -- fsrs ReviewLog.to_json()
);
CREATE TABLE IF NOT EXISTS concepts (
    exercise TEXT NOT NULL,
    concept TEXT NOT NULL,
    failing INTEGER NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (exercise, concept)
);
"""

AT = "2026-11-30T12:00:00.000000+00:00"
LATER = "2026-12-02T12:00:00.000000+00:00"


def write_version_1_database(path) -> None:
    """A history as attn-kit 0.1.0 left it: one row in every table."""
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA_V1)
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO checks (at, exercise, file, seed, passed, checks_passed, checks_total, points, "
        "max_points, public_only, failing, bugs, concepts_failed, source) "
        "VALUES (?, 'mha-screen', 'sol.py', 7, 0, 20, 26, 30, 47, 0, ?, ?, ?, 'watch')",
        (AT, json.dumps(["output-shapes"]), json.dumps(["no-scaling"]), json.dumps(["scaling"])),
    )
    conn.execute("INSERT INTO hints (at, exercise, level) VALUES (?, 'mha-screen', 2)", (AT,))
    conn.execute("INSERT INTO solution_views (at, exercise, forced) VALUES (?, 'gqa', 1)", (AT,))
    conn.execute(
        "INSERT INTO mocks (started_at, ended_at, exercise, folder, minutes, status, seconds_used, passed, "
        "checks_passed, checks_total, points, max_points, hints_used, discussion, report) "
        "VALUES (?, ?, 'mha-screen', '/tmp/m', 45, 'submitted', 1200.5, 1, 26, 26, 47, 47, 1, ?, '/tmp/m/report.md')",
        (AT, LATER, json.dumps([{"question": "scaling", "covered": 1, "total": 2}])),
    )
    conn.execute(
        "INSERT INTO cards VALUES ('mha-screen/why-scale', 'mha-screen', 'why-scale', 'scaling', '{\"card_id\": 1}', ?, ?)", (LATER, AT)
    )
    conn.execute(
        "INSERT INTO reviews (at, key, exercise, question, rating, source, due, log) "
        "VALUES (?, 'mha-screen/why-scale', 'mha-screen', 'why-scale', 3, 'discuss', ?, '{}')",
        (AT, LATER),
    )
    conn.execute("INSERT INTO concepts VALUES ('mha-screen', 'scaling', 1, ?)", (AT,))
    conn.commit()
    conn.close()


def dump(path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    rows = {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}
    conn.close()
    return rows


def schema_of(path) -> dict[str, str]:
    conn = sqlite3.connect(path)
    found = {name: sql for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL")}
    conn.close()
    return found


def test_a_database_written_by_todays_schema_opens_with_nothing_lost(attn_home):
    path = attn_home / "history.db"
    write_version_1_database(path)
    before = dump(path)
    with open_store() as st:
        assert st.warnings == []
        [run] = st.checks()
        assert run["bugs"] == ["no-scaling"] and run["failing"] == ["output-shapes"] and run["source"] == "watch"
        assert run["passed"] is False and run["checks_total"] == 26 and run["seed"] == 7
        assert st.hint_levels("mha-screen") == {2}
        assert st.solution_views()[0]["forced"] is True
        [mock] = st.mocks()
        assert mock["status"] == "submitted" and mock["discussion"][0]["question"] == "scaling"
        assert st.card("mha-screen/why-scale")["concept"] == "scaling"
        assert st.reviews()[0]["rating"] == 3
        st.add_hint("mha-screen", 3)  # and it is still writable
    after = dump(path)
    assert after["hints"][:1] == before["hints"]
    assert after["concepts"] == before["concepts"] != []  # 0.1.0's rows, no longer read, kept as they were
    assert {t: r for t, r in after.items() if t != "hints"} == {t: r for t, r in before.items() if t != "hints"}
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == store_module.SCHEMA_VERSION
    conn.close()


def test_migrations_build_todays_schema_from_nothing(attn_home, tmp_path):
    with open_store():
        pass
    frozen = tmp_path / "frozen.db"
    write_version_1_database(frozen)
    fresh = schema_of(attn_home / "history.db")
    if store_module.SCHEMA_VERSION == 1:  # later migrations may change tables; version 1's must not change
        assert fresh == schema_of(frozen)
    assert set(schema_of(frozen)) <= set(fresh)


def test_a_new_migration_upgrades_an_existing_database_in_place(attn_home, monkeypatch):
    path = attn_home / "history.db"
    write_version_1_database(path)
    before = dump(path)
    applied = []

    def m002_check_duration(conn):
        applied.append(conn.execute("PRAGMA user_version").fetchone()[0])
        conn.execute("ALTER TABLE checks ADD COLUMN seconds REAL")

    monkeypatch.setattr(store_module, "MIGRATIONS", [*store_module.MIGRATIONS[:1], m002_check_duration])
    with open_store() as st:
        [run] = st.checks()
        assert run["seconds"] is None and run["bugs"] == ["no-scaling"]
    assert applied == [1]  # only the missing migration ran, once
    with open_store():
        pass
    assert applied == [1]
    after = dump(path)
    assert after["checks"] == [row + (None,) for row in before["checks"]]
    assert {t: r for t, r in after.items() if t != "checks"} == {t: r for t, r in before.items() if t != "checks"}
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    conn.close()


def test_a_failing_migration_leaves_the_database_as_it_was(attn_home, monkeypatch):
    path = attn_home / "history.db"
    write_version_1_database(path)
    before = dump(path)

    def m002_half_done(conn):
        conn.execute("ALTER TABLE checks ADD COLUMN seconds REAL")
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store_module, "MIGRATIONS", [*store_module.MIGRATIONS[:1], m002_half_done])
    with pytest.raises(store_module.StoreError, match="disk I/O error"):
        open_store()
    assert dump(path) == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    conn.close()
    assert not list(attn_home.glob("history.db.corrupt-*"))
