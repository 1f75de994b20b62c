"""What every application server shares: per-call SQLite connections, the episode clock,
deterministic rate limits, MCP tool errors and the `submit_answer` tool.

All per-episode state (rows, clock, rate-limit counters, submitted answers) lives in the SQLite
file, which the server opens on every call: the environment resets an episode by atomically
replacing that file, so the long-lived server process never holds stale state.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

#: Tables every application database has besides its own.
COMMON_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE rate_limits (tool TEXT PRIMARY KEY, calls INTEGER NOT NULL);
CREATE TABLE answers (id INTEGER PRIMARY KEY, answer TEXT NOT NULL, submitted_at TEXT NOT NULL);
"""
CLOCK_FORMAT = "%Y-%m-%dT%H:%M:%SZ"

ShortText = Annotated[str, Field(min_length=1, max_length=200)]
LongText = Annotated[str, Field(min_length=1, max_length=2000)]
Query = Annotated[str, Field(min_length=1, max_length=100, description="case-insensitive substring")]
Limit = Annotated[int, Field(ge=1, le=50, description="maximum rows returned")]
RowId = Annotated[int, Field(ge=1)]


def not_found(what: str, key: Any) -> ToolError:
    return ToolError(f"Not found: {what} {key!r} does not exist")


def invalid(message: str) -> ToolError:
    return ToolError(f"Validation failed: {message}")


def denied(message: str) -> ToolError:
    return ToolError(f"Permission denied: {message}")


class AppDB:
    """The application's SQLite file, opened per call (see module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        conn = sqlite3.connect(self.path, timeout=10)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        try:
            with conn:
                yield conn
        finally:
            conn.close()

    def rate_limit(self, tool: str, limit: int) -> None:
        """Count a call of `tool`; more than `limit` calls in one episode are refused (HTTP-429 style)."""
        with self.tx() as conn:
            conn.execute("INSERT INTO rate_limits (tool, calls) VALUES (?, 1) "
                         "ON CONFLICT(tool) DO UPDATE SET calls = calls + 1", (tool,))
            calls = conn.execute("SELECT calls FROM rate_limits WHERE tool = ?", (tool,)).fetchone()[0]
        if calls > limit:
            raise ToolError(f"Rate limit exceeded: {tool} allows {limit} calls per session "
                            f"(this was call {calls}); retry later")


def tick(conn: sqlite3.Connection) -> str:
    """The episode clock's current time, then advance it one minute (deterministic timestamps)."""
    now = conn.execute("SELECT value FROM meta WHERE key = 'clock'").fetchone()[0]
    nxt = datetime.strptime(now, CLOCK_FORMAT) + timedelta(minutes=1)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'clock'", (nxt.strftime(CLOCK_FORMAT),))
    return now


def rows(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    return [dict(r) for r in cursor.fetchall()]


def like(query: str) -> str:
    """A LIKE pattern matching `query` as a literal substring (wildcards escaped with `\\`)."""
    escaped = query.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def add_submit_answer(server: MCPServer, db: AppDB) -> None:
    @server.tool(description="Record the final answer to a question asked in the task (only the first answer counts).")
    def submit_answer(answer: Annotated[str, Field(min_length=1, max_length=500)]) -> dict[str, Any]:
        with db.tx() as conn:
            at = tick(conn)
            cur = conn.execute("INSERT INTO answers (answer, submitted_at) VALUES (?, ?)", (answer, at))
        return {"answer_id": cur.lastrowid, "recorded": True, "submitted_at": at}


def first_answer(conn: sqlite3.Connection) -> str | None:
    """The answer a question task is judged on: the first one submitted. One attempt, so an agent
    that submits every candidate in turn does not pass once it reaches the right one."""
    row = conn.execute("SELECT answer FROM answers ORDER BY id ASC LIMIT 1").fetchone()
    return None if row is None else str(row[0])


def normalise_answer(text: str) -> str:
    return " ".join(text.strip().strip(".").lower().replace("$", "").replace(",", "").split())


def tool_action(tool: str, **arguments: Any) -> str:
    """An agent action calling `tool`, in the canonical JSON the env parses (task solutions use it)."""
    return json.dumps({"tool": tool, "arguments": arguments}, sort_keys=True)
