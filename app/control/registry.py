"""The run registry: SQLite in FOUNDRY_HOME, safe for many CLIs at once and for a CLI killed mid-write.

WAL journal, a busy timeout, and every write in one `BEGIN IMMEDIATE` transaction: a process killed
mid-transaction leaves no partial row (SQLite rolls the journal back), and two writers queue on the
database lock instead of failing. State transitions are compare-and-set (`transition`) so that two
reconcilers never both act on the same resumption. A resumption is inserted with its launch intent
(who launches it, and later how to find its job) before anything starts, and a run with its first
resumption in one transaction (see launch_intent.py). Nothing secret is ever stored here.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from foundry.plugins.errors import ConfigError

from .models import Resumption, RunEvent, RunInfo

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    spec TEXT NOT NULL,
    status TEXT NOT NULL,
    max_retries INTEGER NOT NULL DEFAULT 0,
    retries_used INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    submit_dir TEXT
);
CREATE TABLE IF NOT EXISTS resumptions (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    cluster TEXT NOT NULL,
    provider TEXT NOT NULL,
    nodes INTEGER NOT NULL,
    devices INTEGER NOT NULL,
    state TEXT NOT NULL,
    cause TEXT NOT NULL,
    handle TEXT,
    job_id TEXT,
    started_at REAL,
    ended_at REAL,
    exit_code INTEGER,
    exit_reason TEXT,
    resumed_from TEXT,
    launch_intent TEXT,
    unknown_since REAL,
    unknown_reason TEXT,
    placed_because TEXT,
    PRIMARY KEY (run_id, idx)
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    time REAL NOT NULL,
    event TEXT NOT NULL,
    resumption INTEGER,
    details TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS events_run ON events(run_id, id);
"""

_RES_COLS = ("idx", "cluster", "provider", "nodes", "devices", "state", "cause", "handle", "job_id",
             "started_at", "ended_at", "exit_code", "exit_reason", "resumed_from", "unknown_since", "unknown_reason",
             "placed_because")


class LaunchConflict(ConfigError):
    """Another launcher got there first: the run's latest resumption is no longer the one this launch
    was decided on (add_resumption's compare-and-set)."""

    def __init__(self, name: str, latest: sqlite3.Row | None):
        self.name = name
        self.latest_index = latest["idx"] if latest else None
        self.latest_state = latest["state"] if latest else None
        what = (f"its resumption {latest['idx']} ({latest['cause']}) is {latest['state']}" if latest
                else "it has no resumption")
        super().__init__(f"run {name!r} was launched by another command meanwhile: {what}",
                         hint=f"`foundry describe run {name}` shows it; nothing was started twice")


class Registry:
    def __init__(self, path: str | Path, timeout: float = 30.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
        with self.write() as db:
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    db.execute(stmt)
            columns = {row["name"] for row in db.execute("PRAGMA table_info(runs)")}
            if "submit_dir" not in columns:  # databases from before the column existed
                db.execute("ALTER TABLE runs ADD COLUMN submit_dir TEXT")
            res_columns = {row["name"] for row in db.execute("PRAGMA table_info(resumptions)")}
            if "launch_intent" not in res_columns:
                db.execute("ALTER TABLE resumptions ADD COLUMN launch_intent TEXT")
            for column, kind in (("unknown_since", "REAL"), ("unknown_reason", "TEXT"), ("placed_because", "TEXT")):
                if column not in res_columns:
                    db.execute(f"ALTER TABLE resumptions ADD COLUMN {column} {kind}")

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        db.row_factory = sqlite3.Row
        db.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
        db.execute("PRAGMA foreign_keys=ON")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken with the write lock up front (no upgrade deadlocks)."""
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        db = self._connect()
        try:
            yield db
        finally:
            db.close()

    # --- runs ---------------------------------------------------------------------------------
    @staticmethod
    def new_run_id() -> str:
        """A fresh run id, for a caller that plans the run before it records it."""
        return uuid.uuid4().hex[:12]

    def create_run(self, name: str, spec: dict[str, Any], max_retries: int, submit_dir: str | None = None,
                   first: dict[str, Any] | None = None, run_id: str | None = None) -> str:
        """A new run; with `first` (add_resumption's keywords) its resumption 0 in the same transaction,
        so no process death leaves a run without the resumption that says who is launching it."""
        run_id = run_id or self.new_run_id()
        now = time.time()
        with self.write() as db:
            if db.execute("SELECT 1 FROM runs WHERE name=?", (name,)).fetchone():
                raise ConfigError(f"a run named {name!r} already exists",
                                  hint=f"pick another name (--name), or `foundry delete run {name}`")
            db.execute(
                "INSERT INTO runs (id, name, spec, status, max_retries, created_at, updated_at, submit_dir)"
                " VALUES (?, ?, ?, 'pending', ?, ?, ?, ?)",
                (run_id, name, json.dumps(spec), max_retries, now, now, submit_dir),
            )
            _event(db, run_id, "created", None, {})
            if first is not None:
                _insert_resumption(db, run_id, **first)
        return run_id

    def run_id(self, name: str) -> str | None:
        with self.read() as db:
            row = db.execute("SELECT id FROM runs WHERE name=?", (name,)).fetchone()
        return row["id"] if row else None

    def get_run(self, name: str, events: bool = True) -> RunInfo | None:
        with self.read() as db:
            row = db.execute("SELECT * FROM runs WHERE name=?", (name,)).fetchone()
            if row is None:
                return None
            return _run_info(db, row, events)

    def list_runs(self) -> list[RunInfo]:
        with self.read() as db:
            rows = db.execute("SELECT * FROM runs ORDER BY created_at DESC").fetchall()
            return [_run_info(db, row, False) for row in rows]

    def delete_run(self, name: str) -> bool:
        with self.write() as db:
            return db.execute("DELETE FROM runs WHERE name=?", (name,)).rowcount > 0

    # --- resumptions --------------------------------------------------------------------------
    def add_resumption(self, run_id: str, *, after: int | None = None, states: tuple[str, ...] = (),
                       **fields: Any) -> int:
        """A new pending resumption (keywords: cluster, provider, nodes, devices, cause, resumed_from,
        retry, launch_intent); returns its index.

        With `after`, this is the launch's compare-and-set: the new row goes in only if the run's
        latest resumption is still `after` and in one of `states`, checked and written in one
        BEGIN IMMEDIATE transaction. Two launchers that both saw a run paused (two `resume`s, a
        `resume` and the watchdog's retry) therefore never both launch: the second gets
        LaunchConflict, which names what the first one started."""
        with self.write() as db:
            if after is not None:
                latest = db.execute("SELECT idx, state, cause FROM resumptions WHERE run_id=? ORDER BY idx DESC"
                                    " LIMIT 1", (run_id,)).fetchone()
                if latest is None or latest["idx"] != after or latest["state"] not in states:
                    name = db.execute("SELECT name FROM runs WHERE id=?", (run_id,)).fetchone()
                    raise LaunchConflict(name["name"] if name else run_id, latest)
            return _insert_resumption(db, run_id, **fields)

    def launch_intent(self, run_id: str, idx: int) -> dict | None:
        with self.read() as db:
            row = db.execute("SELECT launch_intent FROM resumptions WHERE run_id=? AND idx=?",
                             (run_id, idx)).fetchone()
        return json.loads(row["launch_intent"]) if row and row["launch_intent"] else None

    def adopt_handle(self, run_id: str, idx: int, handle: dict, job_id: str) -> bool:
        """Record the handle of a job found after its launcher died, unless one is recorded already."""
        with self.write() as db:
            return db.execute(
                "UPDATE resumptions SET handle=?, job_id=? WHERE run_id=? AND idx=? AND handle IS NULL",
                (json.dumps(handle), job_id, run_id, idx)).rowcount > 0

    def update_resumption(self, run_id: str, idx: int, **fields: Any) -> None:
        for key in ("handle", "launch_intent"):
            if key in fields and not isinstance(fields[key], (str, type(None))):
                fields[key] = json.dumps(fields[key])
        sets = ", ".join(f"{k}=?" for k in fields)
        with self.write() as db:
            db.execute(f"UPDATE resumptions SET {sets} WHERE run_id=? AND idx=?",
                       (*fields.values(), run_id, idx))

    def transition(self, run_id: str, idx: int, expect: str, new: str, event: str | None = None,
                   details: dict | None = None, **fields: Any) -> bool:
        """Compare-and-set a resumption's state; record the run status and an event if it moved."""
        fields["state"] = new
        fields.setdefault("unknown_since", None)   # a transition is an observation
        fields.setdefault("unknown_reason", None)
        sets = ", ".join(f"{k}=?" for k in fields)
        with self.write() as db:
            moved = db.execute(
                f"UPDATE resumptions SET {sets} WHERE run_id=? AND idx=? AND state=?",
                (*fields.values(), run_id, idx, expect),
            ).rowcount
            if moved:
                db.execute("UPDATE runs SET status=?, updated_at=? WHERE id=?", (new, time.time(), run_id))
                if event:
                    _event(db, run_id, event, idx, details or {})
        return bool(moved)

    def mark_unknown(self, run_id: str, idx: int, state: str, reason: str) -> bool:
        """The provider cannot be observed: resumption `idx` (still `state`) keeps its state and gets
        the reason and, the first time, since when; the run shows `unknown`. True the first time."""
        now = time.time()
        with self.write() as db:
            row = db.execute("SELECT unknown_since FROM resumptions WHERE run_id=? AND idx=? AND state=?",
                             (run_id, idx, state)).fetchone()
            if row is None:
                return False
            db.execute("UPDATE resumptions SET unknown_since=COALESCE(unknown_since, ?), unknown_reason=?"
                       " WHERE run_id=? AND idx=?", (now, reason, run_id, idx))
            db.execute("UPDATE runs SET status='unknown', updated_at=? WHERE id=?", (now, run_id))
            if row["unknown_since"] is None:
                _event(db, run_id, "unknown", idx, {"resumption": idx, "reason": reason})
            return row["unknown_since"] is None

    def mark_observed(self, run_id: str, idx: int, state: str) -> bool:
        """The provider answers again and the resumption is still `state`: the run shows it again."""
        now = time.time()
        with self.write() as db:
            row = db.execute("SELECT unknown_since FROM resumptions WHERE run_id=? AND idx=? AND state=?",
                             (run_id, idx, state)).fetchone()
            if row is None or row["unknown_since"] is None:
                return False
            db.execute("UPDATE resumptions SET unknown_since=NULL, unknown_reason=NULL WHERE run_id=? AND idx=?",
                       (run_id, idx))
            db.execute("UPDATE runs SET status=?, updated_at=? WHERE id=?", (state, now, run_id))
            _event(db, run_id, "observed", idx, {"resumption": idx, "unknown_for_s": round(now - row["unknown_since"], 1)})
            return True

    def handle(self, run_id: str, idx: int) -> dict | None:
        with self.read() as db:
            row = db.execute("SELECT handle FROM resumptions WHERE run_id=? AND idx=?", (run_id, idx)).fetchone()
        return json.loads(row["handle"]) if row and row["handle"] else None

    # --- events -------------------------------------------------------------------------------
    def add_event(self, run_id: str, event: str, resumption: int | None = None,
                  details: dict | None = None) -> None:
        with self.write() as db:
            _event(db, run_id, event, resumption, details or {})

    def last_event_time(self, run_id: str, event: str) -> float | None:
        with self.read() as db:
            row = db.execute("SELECT MAX(time) AS t FROM events WHERE run_id=? AND event=?", (run_id, event)).fetchone()
        return row["t"] if row else None

    def integrity_ok(self) -> bool:
        with self.read() as db:
            return db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _insert_resumption(db: sqlite3.Connection, run_id: str, *, cluster: str, provider: str, nodes: int,
                       devices: int, cause: str, resumed_from: str | None = None, retry: bool = False,
                       launch_intent: dict | None = None, placed_because: str | None = None) -> int:
    idx = db.execute("SELECT COALESCE(MAX(idx), -1) + 1 AS n FROM resumptions WHERE run_id=?",
                     (run_id,)).fetchone()["n"]
    db.execute(
        "INSERT INTO resumptions (run_id, idx, cluster, provider, nodes, devices, state, cause,"
        " started_at, resumed_from, launch_intent, placed_because) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)",
        (run_id, idx, cluster, provider, nodes, devices, cause, time.time(), resumed_from,
         json.dumps(launch_intent) if launch_intent is not None else None, placed_because),
    )
    db.execute("UPDATE runs SET status='pending', updated_at=?, retries_used=retries_used+?"
               " WHERE id=?", (time.time(), int(retry), run_id))
    return idx


def _event(db: sqlite3.Connection, run_id: str, event: str, resumption: int | None, details: dict) -> None:
    db.execute("INSERT INTO events (run_id, time, event, resumption, details) VALUES (?, ?, ?, ?, ?)",
               (run_id, time.time(), event, resumption, json.dumps(details, default=str)))


def _run_info(db: sqlite3.Connection, row: sqlite3.Row, events: bool) -> RunInfo:
    res_rows = db.execute(f"SELECT {', '.join(_RES_COLS)} FROM resumptions WHERE run_id=? ORDER BY idx",
                          (row["id"],)).fetchall()
    resumptions = [
        Resumption(index=r["idx"], cluster=r["cluster"], provider=r["provider"], nodes=r["nodes"],
                   devices=r["devices"], state=r["state"], job_id=r["job_id"], started_at=r["started_at"],
                   ended_at=r["ended_at"], exit_code=r["exit_code"], exit_reason=r["exit_reason"],
                   resumed_from=r["resumed_from"], cause=r["cause"], unknown_since=r["unknown_since"],
                   unknown_reason=r["unknown_reason"], placed_because=r["placed_because"])
        for r in res_rows
    ]
    evs = []
    if events:
        evs = [RunEvent(time=e["time"], event=e["event"], resumption=e["resumption"],
                        details=json.loads(e["details"]))
               for e in db.execute("SELECT * FROM events WHERE run_id=? ORDER BY id", (row["id"],))]
    spec = json.loads(row["spec"])
    latest = resumptions[-1] if resumptions else None
    compute = spec.get("compute", {})
    return RunInfo(
        name=row["name"], id=row["id"], status=row["status"],
        cluster=latest.cluster if latest else compute.get("cluster") or "local",
        nodes=latest.nodes if latest else compute.get("nodes", 1),
        devices=latest.devices if latest else compute.get("gpus") or 1,
        created_at=row["created_at"], updated_at=row["updated_at"], max_retries=row["max_retries"],
        retries_used=row["retries_used"], spec=spec, resumptions=resumptions, events=evs,
        submit_dir=row["submit_dir"],
    )
