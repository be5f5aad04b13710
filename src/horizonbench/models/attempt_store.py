"""A durable cache of successful model answers, so an interrupted evaluation resumes.

API calls are the expensive, slow and flaky part of a run. Every successful answer is
committed the moment it arrives; a re-run looks each attempt up by its key and only
calls the model for attempts that are missing. Failed calls are never stored, so a
resume retries exactly those.

The key is a hash of everything that determines an answer (model identity, prompt,
sampling settings, sample index) and nothing secret: the identity a model reports
excludes API keys by contract, and this module never sees one.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from horizonbench.core.text import clean_text
from horizonbench.core.types import Completion, Message

_SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    attempt_key   TEXT PRIMARY KEY,
    text          TEXT NOT NULL,
    finish_reason TEXT NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    latency_s     REAL NOT NULL,
    cost_usd      REAL NOT NULL,
    created_at    TEXT NOT NULL
)
"""

#: columns added after the first release; an older store gains them on open
_ADDED_COLUMNS = {
    "served_model": "TEXT",
    "system_fingerprint": "TEXT",
    "run_tag": "TEXT",
    "via_batch": "INTEGER NOT NULL DEFAULT 0",
}

#: the spend ledger: one row per call a provider billed (an answer, stored or not, and a
#: 200 without a usable answer that still reported usage), committed as the call settles,
#: so a crash loses at most the calls in flight. Budgets are caps on its sums per run_tag
#: (a run folder); ``model`` is the config's model name (NULL for spend carried over from
#: a store made before the ledger, which counts toward the total cap only).
_SPEND = """
CREATE TABLE IF NOT EXISTS spend (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_tag     TEXT,
    model       TEXT,
    attempt_key TEXT,
    cost_usd    REAL NOT NULL,
    via_batch   INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL
)
"""

#: the caps each run folder last ran with, so ``status`` can say what is left
_CAPS = """
CREATE TABLE IF NOT EXISTS budget_caps (
    run_tag TEXT NOT NULL,
    model   TEXT NOT NULL,
    cap_usd REAL,
    PRIMARY KEY (run_tag, model)
)
"""

_BATCHES = """
CREATE TABLE IF NOT EXISTS batches (
    batch_id     TEXT PRIMARY KEY,
    model        TEXT NOT NULL,
    identity     TEXT NOT NULL,
    keys         TEXT NOT NULL,
    state        TEXT NOT NULL,
    submitted_at TEXT NOT NULL
)
"""


def canonical_json(value: Any) -> str:
    """One spelling per value, so equal inputs always hash equally across runs and hosts."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def messages_payload(messages: Iterable[Message | Mapping[str, str]]) -> list[dict[str, str]]:
    """Messages as plain dicts; accepts dicts too so callers with raw JSON can key alike."""
    out: list[dict[str, str]] = []
    for m in messages:
        if isinstance(m, Message):
            out.append({"role": m.role, "content": clean_text(m.content)})
        else:
            out.append({"role": str(m["role"]), "content": clean_text(m["content"])})
    return out


def prompt_sha256(messages: Iterable[Message | Mapping[str, str]]) -> str:
    """Hash of the prompt alone, so tables can group attempts by identical prompts."""
    return hashlib.sha256(canonical_json(messages_payload(messages)).encode()).hexdigest()


def attempt_key(
    identity: Mapping[str, Any],
    messages: Iterable[Message | Mapping[str, str]],
    temperature: float,
    top_p: float,
    max_tokens: int,
    sample: int,
    episode: tuple[str, int] | None = None,
) -> str:
    """sha256 of the canonical JSON of everything that makes an answer reusable.

    ``sample`` is part of the key so that independent samples of one prompt stay
    independent instead of all reusing the first answer. ``episode`` (instance id,
    step) makes each step of a multi-step episode its own attempt: two episodes that
    reach the same state at the same step see the same prompt, and must not share an
    answer, or their samples would not be independent.
    """
    payload: dict[str, Any] = {
        "identity": dict(identity),
        "messages": messages_payload(messages),
        "temperature": float(temperature),
        "top_p": float(top_p),
        "max_tokens": int(max_tokens),
        "sample": int(sample),
    }
    if episode is not None:
        payload["episode"] = [str(episode[0]), int(episode[1])]
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def read_spend(path: str | Path, run_tag: str) -> tuple[dict[str | None, float], dict[str, float | None]]:
    """(paid per model, caps of the last run: ``""`` the total) of run folder ``run_tag``,
    read only: ``status`` must not write into a store a run may be writing. Empty when
    the store or its ledger does not exist yet."""
    if not Path(path).exists():
        return {}, {}
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "spend" not in tables:
            return {}, {}
        spent = {
            model: float(total)
            for model, total in conn.execute(
                "SELECT model, SUM(cost_usd) FROM spend WHERE run_tag IS ? GROUP BY model", (run_tag,)
            )
        }
        caps: dict[str, float | None] = {}
        if "budget_caps" in tables:
            caps = {
                str(model): (None if cap is None else float(cap))
                for model, cap in conn.execute(
                    "SELECT model, cap_usd FROM budget_caps WHERE run_tag = ?", (run_tag,)
                )
            }
        return spent, caps
    finally:
        conn.close()


class AttemptStore:
    """SQLite-backed map ``attempt_key -> Completion`` for successful calls only.

    Each answer records the ``run_tag`` of the run that paid for it, so a run can
    reuse only its own answers (``evaluation.reuse: run``) in a store shared across
    nights, and the served model and system fingerprint the provider reported.

    One connection guarded by a lock: writes are tiny and SQLite serialises writers
    anyway, so a connection per thread would add complexity without throughput.
    WAL mode lets a reader (e.g. a progress report) look while a run writes.
    When two writers race on one key the first answer wins, so an answer already
    reused somewhere never changes under it.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            str(path), check_same_thread=False, isolation_level=None
        )
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(_SCHEMA)
            self._conn.execute(_BATCHES)
            have = {row[1] for row in self._conn.execute("PRAGMA table_info(attempts)")}
            for name, decl in _ADDED_COLUMNS.items():
                if name not in have:
                    self._conn.execute(f"ALTER TABLE attempts ADD COLUMN {name} {decl}")
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                had_ledger = self._conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'spend'"
                ).fetchone()
                self._conn.execute(_SPEND)
                self._conn.execute(_CAPS)
                if not had_ledger:
                    # a store from before the ledger: what its answers cost was paid
                    self._conn.execute(
                        "INSERT INTO spend (run_tag, model, attempt_key, cost_usd, via_batch, created_at)"
                        " SELECT run_tag, NULL, attempt_key, cost_usd, via_batch, created_at"
                        " FROM attempts WHERE cost_usd > 0"
                    )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"attempt store {self.path} is closed")
        return self._conn

    def get(self, key: str, run_tag: str | None = None) -> Completion | None:
        """The stored answer for ``key``; with ``run_tag``, only one that run made."""
        sql = (
            "SELECT text, finish_reason, input_tokens, output_tokens, latency_s, cost_usd,"
            " served_model, system_fingerprint FROM attempts WHERE attempt_key = ?"
        )
        args: tuple[str, ...] = (key,)
        if run_tag is not None:
            sql += " AND run_tag = ?"
            args = (key, run_tag)
        with self._lock:
            row = self._connection().execute(sql, args).fetchone()
        if row is None:
            return None
        text, finish_reason, input_tokens, output_tokens, latency_s, cost_usd, served, fingerprint = row
        return Completion(
            text=text,
            finish_reason=finish_reason,
            input_tokens=int(input_tokens),
            output_tokens=int(output_tokens),
            latency_s=float(latency_s),
            cost_usd=float(cost_usd),
            served_model=served,
            system_fingerprint=fingerprint,
        )

    def put(
        self,
        key: str,
        completion: Completion,
        run_tag: str | None = None,
        *,
        via_batch: bool = False,
        model: str | None = None,
    ) -> None:
        """Store and commit at once, so a crash loses at most the call in flight.

        With ``model`` (the config's name of the model that paid), the answer's cost goes
        into the spend ledger in the same transaction, also when the key was stored
        already (two runs racing on one key both paid). Text is cleaned first (lone
        surrogates cannot be encoded), so no provider string can make this raise.
        """
        created_at = datetime.now(UTC).isoformat(timespec="seconds")
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._insert(conn, key, completion, run_tag, via_batch, created_at)
                if model is not None:
                    self._spend(conn, run_tag, model, key, completion.cost_usd, via_batch, created_at)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    @staticmethod
    def _insert(
        conn: sqlite3.Connection,
        key: str,
        completion: Completion,
        run_tag: str | None,
        via_batch: bool,
        created_at: str,
    ) -> None:
        conn.execute(
            "INSERT OR IGNORE INTO attempts (attempt_key, text, finish_reason, input_tokens,"
            " output_tokens, latency_s, cost_usd, created_at, served_model, system_fingerprint,"
            " run_tag, via_batch) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                clean_text(completion.text),
                clean_text(completion.finish_reason),
                int(completion.input_tokens),
                int(completion.output_tokens),
                float(completion.latency_s),
                float(completion.cost_usd),
                created_at,
                clean_text(completion.served_model) if completion.served_model else None,
                clean_text(completion.system_fingerprint) if completion.system_fingerprint else None,
                run_tag,
                int(via_batch),
            ),
        )

    @staticmethod
    def _spend(
        conn: sqlite3.Connection,
        run_tag: str | None,
        model: str,
        key: str | None,
        cost_usd: float,
        via_batch: bool,
        created_at: str,
    ) -> None:
        conn.execute(
            "INSERT INTO spend (run_tag, model, attempt_key, cost_usd, via_batch, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (run_tag, model, key, float(cost_usd), int(via_batch), created_at),
        )

    # --- the spend ledger: what a run folder has paid -----------------------------------

    def add_spend(
        self, model: str, cost_usd: float, run_tag: str | None = None, key: str | None = None
    ) -> None:
        """Book a billed call that left no answer to store (a 200 without a usable body
        that reported usage); committed at once."""
        created_at = datetime.now(UTC).isoformat(timespec="seconds")
        with self._lock:
            self._spend(self._connection(), run_tag, model, key, cost_usd, False, created_at)

    def spent(self, run_tag: str | None) -> dict[str | None, float]:
        """What the run folder ``run_tag`` has paid, per model (None: spend carried over
        from a store made before the ledger, whose model is not known)."""
        with self._lock:
            rows = (
                self._connection()
                .execute(
                    "SELECT model, SUM(cost_usd) FROM spend WHERE run_tag IS ? GROUP BY model",
                    (run_tag,),
                )
                .fetchall()
            )
        return {model: float(total) for model, total in rows}

    def set_caps(self, run_tag: str | None, caps: Mapping[str, float | None]) -> None:
        """Record the caps a run of ``run_tag`` runs with (``""``: the total), replacing
        the last run's, so ``status`` can say what is left without the config."""
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("DELETE FROM budget_caps WHERE run_tag = ?", (run_tag or "",))
                conn.executemany(
                    "INSERT INTO budget_caps VALUES (?, ?, ?)",
                    [(run_tag or "", name, cap) for name, cap in caps.items()],
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    # --- provider batch jobs, so a crashed run resumes polling instead of resubmitting ----

    def add_batch(self, batch_id: str, model: str, identity: Mapping[str, Any], keys: list[str]) -> None:
        created_at = datetime.now(UTC).isoformat(timespec="seconds")
        with self._lock:
            self._connection().execute(
                "INSERT OR REPLACE INTO batches VALUES (?, ?, ?, ?, 'open', ?)",
                (batch_id, model, canonical_json(dict(identity)), json.dumps(keys), created_at),
            )

    def open_batches(self, identity: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
        """(batch id, attempt keys) of submitted batches not yet collected, oldest first."""
        with self._lock:
            rows = (
                self._connection()
                .execute(
                    "SELECT batch_id, keys FROM batches WHERE identity = ? AND state = 'open'"
                    " ORDER BY submitted_at, batch_id",
                    (canonical_json(dict(identity)),),
                )
                .fetchall()
            )
        return [(bid, list(json.loads(keys))) for bid, keys in rows]

    def close_batch(self, batch_id: str, state: str = "collected") -> None:
        with self._lock:
            self._connection().execute("UPDATE batches SET state = ? WHERE batch_id = ?", (state, batch_id))

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        with self._lock:
            row = (
                self._connection().execute("SELECT 1 FROM attempts WHERE attempt_key = ?", (key,)).fetchone()
            )
        return row is not None

    def __len__(self) -> int:
        with self._lock:
            (n,) = self._connection().execute("SELECT COUNT(*) FROM attempts").fetchone()
        return int(n)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> AttemptStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AttemptStore({str(self.path)!r})"
