"""The SQLite response cache: ``cache_dir("llm")/responses.sqlite``, one row per answer keyed by sha256 of (model,
messages, parameters) (:func:`cache_key`), so a re-run makes no calls. The endpoint is not part of the key: the same
model name on two servers shares answers."""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..cache import cache_dir
from ..errors import GapbenchError
from .text import one_line


def cache_key(payload: Mapping[str, Any]) -> str:
    """sha256 over the model, the messages and every other request parameter (canonical JSON)."""
    body = {"model": payload["model"], "messages": payload["messages"],
            "params": {k: v for k, v in payload.items() if k not in ("model", "messages")}}
    blob = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


_BUSY_S = 60.0  # how long a cache statement waits for another writer
_SETUP_LOCK = threading.Lock()
_SET_UP: set[str] = set()  # cache files this process has already set up


def _set_up(conn: sqlite3.Connection) -> None:
    """WAL mode and the table, retried while another process sets up the same file: SQLite answers a lock upgrade
    that could deadlock with "database is locked" at once, without waiting out the busy timeout."""
    deadline = time.monotonic() + _BUSY_S
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                         "response TEXT NOT NULL, created REAL NOT NULL)")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.01, 0.05))


class ResponseCache:
    """A SQLite table key -> response JSON, in WAL mode so readers never wait on the writer; shared by threads (one
    connection behind a lock: a lookup costs microseconds next to an HTTP call) and safe across processes.

    Many caches may be opened on one file at once (rerankers open theirs from worker threads): the file is set up
    (WAL, the table) once per process under a lock, and a setup that races another process is retried.
    """

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else cache_dir("llm") / "responses.sqlite"
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), timeout=_BUSY_S, check_same_thread=False,
                                         isolation_level=None)
            self._conn.execute(f"PRAGMA busy_timeout={int(_BUSY_S * 1000)}")
            key = str(self.path.resolve())
            with _SETUP_LOCK:
                if key not in _SET_UP or not self._conn.execute(
                        "SELECT 1 FROM sqlite_master WHERE name = 'responses'").fetchone():  # deleted since
                    _set_up(self._conn)
                    _SET_UP.add(key)
            self._conn.execute("PRAGMA synchronous=NORMAL")  # a per-connection setting
        except (OSError, sqlite3.Error) as exc:
            raise self._broken("opened", exc) from None

    def _broken(self, what: str, exc: BaseException) -> GapbenchError:
        return GapbenchError(
            f"the LLM response cache {str(self.path)!r} cannot be {what} ({type(exc).__name__}: "
            f"{one_line(str(exc))}); if it is damaged, delete it (gapbench cache clear llm) and re-run, or point "
            "$GAPBENCH_HOME at a writable folder.")

    def _query(self, what: str, sql: str, args: tuple = ()) -> list[tuple]:
        try:
            with self._lock:
                return self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            error = self._broken(what, exc)
        raise error

    def get(self, key: str) -> dict | None:
        rows = self._query("read", "SELECT response FROM responses WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else None

    def put(self, key: str, model: str, response: Mapping[str, Any]) -> None:
        blob = json.dumps(response, ensure_ascii=False)
        self._query("written", "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)", (key, model, blob, time.time()))

    def __len__(self) -> int:
        return self._query("read", "SELECT COUNT(*) FROM responses")[0][0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"
