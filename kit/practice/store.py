"""The user's practice history: one SQLite file in the user data folder.

`ATTN_KIT_HOME` overrides the folder (tests point it at a temp dir); otherwise it is
`platformdirs.user_data_dir("attn-kit")`. Every write is one short transaction
(`BEGIN IMMEDIATE` ... `COMMIT`, rolled back on any exception including Ctrl-C) in WAL mode
with a busy timeout, so two terminals can write at once and a kill -9 mid-write loses at most
the transaction that was in flight, never an earlier one. A file SQLite reports as corrupt is
moved aside to `history.db.corrupt-<timestamp>` and a fresh database is started; the move is
reported in `Store.warnings` for the caller to show. The schema is a list of numbered
migrations (`MIGRATIONS`); the database records how many it has had (`PRAGMA user_version`), and
opening it applies the rest, so an existing history is upgraded in place.

Times are stored as ISO-8601 UTC strings of one fixed format, so they sort as text.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from attn_kit.base import safefile
from attn_kit.base.errors import StoreError
from attn_kit.base.text import valid_unicode

DB_NAME = "history.db"
BUSY_TIMEOUT_MS = 15_000
_CORRUPT_CODES = {"SQLITE_CORRUPT", "SQLITE_NOTADB"}


# --- the schema: numbered migrations ----------------------------------------------------------
#
# The database records its schema version in `PRAGMA user_version`: the number of migrations
# applied. Opening applies the missing ones in order, in one transaction, so an existing database
# is upgraded in place and a failed upgrade leaves it as it was. To change the schema, append a
# function decorated with @migration; never edit or reorder one that has shipped.

Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register the next schema migration (its number is its position, from 1)."""
    MIGRATIONS.append(fn)
    return fn


SCHEMA_1 = """
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


@migration
def m001_initial(conn: sqlite3.Connection) -> None:
    """The first schema: check runs, hints, solution views, mocks, review cards and logs, concepts.
    IF NOT EXISTS: databases from before migrations were numbered have these tables already.

    `concepts` (a concept's failing state, written by 0.1.0's review rules) is no longer read or
    written; it stays in the schema, so that an existing history keeps its rows and opens as it
    is, and a shipped migration is never edited."""
    for statement in filter(str.strip, SCHEMA_1.split(";")):
        conn.execute(statement)


SCHEMA_VERSION = len(MIGRATIONS)


# --- time -------------------------------------------------------------------------------------


def now() -> datetime:
    """The current time, timezone-aware UTC. `ATTN_KIT_NOW` (ISO-8601) pins it, for tests."""
    pinned = os.environ.get("ATTN_KIT_NOW")
    if pinned:
        value = datetime.fromisoformat(pinned)
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    return datetime.now(timezone.utc)


def iso(moment: datetime) -> str:
    """One fixed text form for every stored time, so stored times sort as text."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(timezone.utc)


# --- where ------------------------------------------------------------------------------------


def home() -> Path:
    """The folder holding the user's attn-kit state."""
    override = os.environ.get("ATTN_KIT_HOME")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("attn-kit", appauthor=False))


def db_path() -> Path:
    return home() / DB_NAME


# --- the store --------------------------------------------------------------------------------


def _is_corruption(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name:
        return name.split("_(")[0] in _CORRUPT_CODES or name.startswith("SQLITE_CORRUPT")
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text


def _rows(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    return [dict(row) for row in cursor.fetchall()]


@dataclass
class Store:
    """An open history database. Use `open_store()`; close with `.close()` or `with`."""

    path: Path
    connection: sqlite3.Connection
    warnings: list[str]

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.connection.close()

    # transactions -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic write: BEGIN IMMEDIATE .. COMMIT, rolled back on any exception (Ctrl-C too).

        Nested use joins the outer transaction."""
        conn = self.connection
        if conn.in_transaction:
            yield conn
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"could not write to the history database {self.path}: {exc}") from None
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise StoreError(f"could not save to the history database {self.path}: {exc}") from None

    def query(self, sql: str, params: tuple | dict = ()) -> list[dict[str, Any]]:
        try:
            return _rows(self.connection.execute(sql, params))
        except sqlite3.Error as exc:
            raise StoreError(f"could not read the history database {self.path}: {exc}") from None

    def _write(self, sql: str, params: tuple | dict = ()) -> int:
        with self.transaction() as conn:
            try:
                return conn.execute(sql, params).lastrowid or 0
            except sqlite3.Error as exc:
                raise StoreError(f"could not write to the history database {self.path}: {exc}") from None

    # checks -------------------------------------------------------------------------------------

    def add_check(
        self,
        *,
        exercise: str,
        file: str,
        seed: int | None,
        passed: bool,
        checks_passed: int,
        checks_total: int,
        points: int,
        max_points: int,
        public_only: bool,
        failing: list[str],
        bugs: list[str],
        concepts_failed: list[str],
        source: str = "check",
        at: datetime | None = None,
    ) -> int:
        return self._write(
            "INSERT INTO checks (at, exercise, file, seed, passed, checks_passed, checks_total, points, "
            "max_points, public_only, failing, bugs, concepts_failed, source) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                iso(at or now()),
                exercise,
                valid_unicode(file),  # a file name that is not UTF-8: its bytes written out, as SQLite stores text
                seed,
                int(passed),
                checks_passed,
                checks_total,
                points,
                max_points,
                int(public_only),
                json.dumps(failing),
                json.dumps(bugs),
                json.dumps(concepts_failed),
                source,
            ),
        )

    def checks(self, exercise: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Recorded check runs, newest first."""
        sql = "SELECT * FROM checks" + (" WHERE exercise = ?" if exercise else "") + " ORDER BY at DESC, id DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        rows = self.query(sql, (exercise,) if exercise else ())
        for row in rows:
            for key in ("failing", "bugs", "concepts_failed"):
                row[key] = json.loads(row[key])
            row["passed"] = bool(row["passed"])
            row["public_only"] = bool(row["public_only"])
        return rows

    def has_passed(self, exercise: str) -> bool:
        """A recorded run of the full graded suite passed."""
        return bool(self.query("SELECT 1 FROM checks WHERE exercise = ? AND passed = 1 AND public_only = 0 LIMIT 1", (exercise,)))

    # hints and solutions ------------------------------------------------------------------------

    def add_hint(self, exercise: str, level: int, at: datetime | None = None) -> None:
        self._write("INSERT INTO hints (at, exercise, level) VALUES (?, ?, ?)", (iso(at or now()), exercise, level))

    def hint_levels(self, exercise: str, since: datetime | None = None, until: datetime | None = None) -> set[int]:
        """The distinct hint levels shown for an exercise (optionally within a time window)."""
        sql, params = "SELECT DISTINCT level FROM hints WHERE exercise = ?", [exercise]
        if since:
            sql, params = sql + " AND at >= ?", params + [iso(since)]
        if until:
            sql, params = sql + " AND at <= ?", params + [iso(until)]
        return {row["level"] for row in self.query(sql, tuple(params))}

    def hints(self, limit: int | None = None) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM hints ORDER BY at DESC, id DESC" + (f" LIMIT {int(limit)}" if limit else ""))

    def add_solution_view(self, exercise: str, forced: bool, at: datetime | None = None) -> None:
        self._write("INSERT INTO solution_views (at, exercise, forced) VALUES (?, ?, ?)", (iso(at or now()), exercise, int(forced)))

    def solution_views(self, limit: int | None = None) -> list[dict[str, Any]]:
        rows = self.query("SELECT * FROM solution_views ORDER BY at DESC, id DESC" + (f" LIMIT {int(limit)}" if limit else ""))
        for row in rows:
            row["forced"] = bool(row["forced"])
        return rows

    # mock sessions ------------------------------------------------------------------------------

    def start_mock(self, exercise: str, folder: str, minutes: float, at: datetime | None = None) -> int:
        return self._write(
            "INSERT INTO mocks (started_at, exercise, folder, minutes, status) VALUES (?, ?, ?, ?, 'running')",
            (iso(at or now()), exercise, folder, minutes),
        )

    def finish_mock(self, mock_id: int, **fields: Any) -> None:
        allowed = {
            "ended_at",
            "status",
            "seconds_used",
            "passed",
            "checks_passed",
            "checks_total",
            "points",
            "max_points",
            "hints_used",
            "discussion",
            "report",
        }
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"unknown mock fields {sorted(unknown)}")
        if "discussion" in fields:
            fields["discussion"] = json.dumps(fields["discussion"])
        if isinstance(fields.get("ended_at"), datetime):
            fields["ended_at"] = iso(fields["ended_at"])
        if "passed" in fields and fields["passed"] is not None:
            fields["passed"] = int(fields["passed"])
        assignments = ", ".join(f"{name} = :{name}" for name in fields)
        self._write(f"UPDATE mocks SET {assignments} WHERE id = :id", dict(fields, id=mock_id))

    def mocks(self, exercise: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM mocks" + (" WHERE exercise = ?" if exercise else "") + " ORDER BY started_at DESC, id DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        rows = self.query(sql, (exercise,) if exercise else ())
        for row in rows:
            row["discussion"] = json.loads(row["discussion"] or "[]")
            if row["passed"] is not None:
                row["passed"] = bool(row["passed"])
        return rows

    # review cards -------------------------------------------------------------------------------

    def card(self, key: str) -> dict[str, Any] | None:
        rows = self.query("SELECT * FROM cards WHERE key = ?", (key,))
        return rows[0] if rows else None

    def cards(self, exercise: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM cards" + (" WHERE exercise = ?" if exercise else "") + " ORDER BY due, key"
        return self.query(sql, (exercise,) if exercise else ())

    def save_review(
        self,
        *,
        key: str,
        exercise: str,
        question: str,
        concept: str,
        card_json: str,
        due: datetime,
        rating: int,
        source: str,
        log_json: str,
        at: datetime,
    ) -> None:
        """Store a card's new state and its review log in one transaction."""
        with self.transaction() as conn:
            try:
                conn.execute(
                    "INSERT INTO cards (key, exercise, question, concept, card, due, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET card = excluded.card, "
                    "due = excluded.due, updated_at = excluded.updated_at, concept = excluded.concept",
                    (key, exercise, question, concept, card_json, iso(due), iso(at)),
                )
                conn.execute(
                    "INSERT INTO reviews (at, key, exercise, question, rating, source, due, log) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (iso(at), key, exercise, question, rating, source, iso(due), log_json),
                )
            except sqlite3.Error as exc:
                raise StoreError(f"could not save a review to {self.path}: {exc}") from None

    def user_reviewed_keys(self) -> set[str]:
        """Cards the user has reviewed themselves (in discuss or a mock's discussion); the kit's
        own ratings (source 'check') do not count."""
        return {row["key"] for row in self.query("SELECT DISTINCT key FROM reviews WHERE source != 'check'")}

    def last_review_at(self, key: str, source: str) -> datetime | None:
        rows = self.query("SELECT MAX(at) AS at FROM reviews WHERE key = ? AND source = ?", (key, source))
        return parse_time(rows[0]["at"]) if rows and rows[0]["at"] else None

    def current_exercise(self) -> str | None:
        """The exercise of the most recent check run or mock screen."""
        rows = self.query(
            "SELECT exercise, at FROM (SELECT exercise, at FROM checks UNION ALL "
            "SELECT exercise, started_at AS at FROM mocks) ORDER BY at DESC LIMIT 1"
        )
        return rows[0]["exercise"] if rows else None

    def reviews(self, limit: int | None = None) -> list[dict[str, Any]]:
        return self.query(
            "SELECT id, at, key, exercise, question, rating, source, due FROM reviews "
            "ORDER BY at DESC, id DESC" + (f" LIMIT {int(limit)}" if limit else "")
        )


# --- opening ----------------------------------------------------------------------------------


def _connect(path: Path) -> sqlite3.Connection:
    """Open with retries: switching a new file to WAL (or recovering a WAL after a crash) can
    answer 'database is locked' at once, without waiting in the busy handler, while another
    process is doing the same."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.01
    while True:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            return _prepare(conn, path)
        except sqlite3.OperationalError as exc:
            conn.close()
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.25)


def _prepare(conn: sqlite3.Connection, path: Path) -> sqlite3.Connection:
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":  # e.g. a network file system: the rollback journal is safe too
        conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA synchronous = FULL")
    check = conn.execute("PRAGMA quick_check").fetchone()[0]
    if check != "ok":
        conn.close()
        raise sqlite3.DatabaseError(f"database disk image is malformed ({check})")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version < len(MIGRATIONS):
        version = migrate(conn)
    if version > len(MIGRATIONS):
        conn.close()
        raise StoreError(
            f"{path} was written by a newer attn-kit (schema {version}); upgrade attn-kit or point ATTN_KIT_HOME at another folder."
        )
    return conn


def migrate(conn: sqlite3.Connection) -> int:
    """Apply the migrations the database lacks, in order, in one transaction; return the schema
    version it is at afterwards (higher than ours if a newer attn-kit wrote it: then nothing runs).

    The version is read again inside the transaction: another process may have upgraded the
    database since it was first read."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
            step(conn)
            conn.execute(f"PRAGMA user_version = {number}")
            version = number
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return version


def _move_aside(path: Path, inode: int | None) -> Path | None:
    """Rename a corrupt database (and its WAL/SHM side files) to <name>.corrupt-<timestamp>."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    counter = 1
    while target.exists():
        counter += 1
        target = path.with_name(f"{path.name}.corrupt-{stamp}-{counter}")
    try:
        if inode is not None and path.stat().st_ino != inode:
            return None  # another process already replaced it with a fresh database
        os.replace(path, target)
    except FileNotFoundError:
        return None
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        with contextlib.suppress(FileNotFoundError):
            if suffix == "-wal":
                os.replace(side, target.with_name(target.name + suffix))
            else:
                side.unlink()
    return target


def open_store(path: Path | None = None) -> Store:
    """Open (creating if needed) the history database. Raises StoreError when it cannot."""
    path = path or db_path()
    warnings: list[str] = []
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the attn-kit data folder {path.parent}: {exc.strerror}. Set ATTN_KIT_HOME to a writable folder."
        ) from None
    try:  # SQLite would write through a symlink planted where the database or its journal goes
        safefile.check_folder(path.parent)
        for name in (path.name, path.name + "-wal", path.name + "-shm", path.name + "-journal"):
            safefile.check_file(path.with_name(name))
    except safefile.UnsafePath as exc:
        raise StoreError(f"cannot open the history database {path}: {exc.filename}: {exc.strerror}.") from None
    for attempt in range(2):
        try:
            inode = path.stat().st_ino
        except FileNotFoundError:
            inode = None
        try:
            return Store(path, _connect(path), warnings)
        except sqlite3.DatabaseError as exc:
            if attempt or not _is_corruption(exc):
                raise StoreError(f"cannot open the history database {path}: {exc}") from None
            moved = _move_aside(path, inode)
            if moved is not None:
                warnings.append(
                    f"the history database {path} was damaged ({exc}); it was moved to "
                    f"{moved} and a fresh one was started. Your solution files are untouched."
                )
        except OSError as exc:
            raise StoreError(f"cannot open the history database {path}: {exc}") from None
    raise AssertionError("unreachable")
