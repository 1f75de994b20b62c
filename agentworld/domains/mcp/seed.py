"""Seeded application data and the SQLite files built from it.

`seed_data(app, seed)` is a pure function of (app, seed): names, dates, statuses and amounts come
from `random.Random(f"mcp:{app}:{seed}")`, and the episode clock (the `meta.clock` row every write
advances by one minute) starts at a seed-derived date. `write_database` writes it to a fresh file
and moves it into place atomically, which is how an episode is reset.
"""

from __future__ import annotations

import os
import random
import sqlite3
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from agentworld.domains.mcp.apps import app_module
from agentworld.domains.mcp.apps.common import COMMON_SCHEMA


def episode_clock(app: str, seed: int) -> str:
    rng = random.Random(f"mcp-clock:{app}:{seed}")
    return f"2024-{rng.randint(4, 11):02d}-{rng.randint(1, 28):02d}T09:00:00Z"


@lru_cache(maxsize=64)
def _seed_data(app: str, seed: int) -> tuple[tuple[str, tuple[tuple[tuple[str, Any], ...], ...]], ...]:
    data = app_module(app).generate(random.Random(f"mcp:{app}:{seed}"), episode_clock(app, seed))
    return tuple((table, tuple(tuple(row.items()) for row in table_rows)) for table, table_rows in data.items())


def seed_data(app: str, seed: int) -> dict[str, list[dict[str, Any]]]:
    """The application's rows for `seed` (a fresh copy the caller may modify)."""
    return {table: [dict(row) for row in table_rows] for table, table_rows in _seed_data(app, seed)}


def write_database(app: str, seed: int, path: str | Path) -> None:
    """Build the seeded database for (app, seed) and atomically replace `path` with it."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{app}-", suffix=".db", dir=path.parent)
    os.close(fd)
    try:
        conn = sqlite3.connect(tmp)
        try:
            conn.execute("PRAGMA journal_mode = OFF")  # a throwaway build: no rollback journal, no fsync
            conn.execute("PRAGMA synchronous = OFF")
            conn.executescript(COMMON_SCHEMA + app_module(app).SCHEMA)
            conn.execute("INSERT INTO meta (key, value) VALUES ('clock', ?), ('app', ?), ('seed', ?)",
                         (episode_clock(app, seed), app, str(seed)))
            for table, table_rows in seed_data(app, seed).items():
                if table_rows:
                    cols = list(table_rows[0])
                    conn.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",  # noqa: S608 - our own table names
                                     [tuple(r[c] for c in cols) for r in table_rows])
            conn.commit()
        finally:
            conn.close()
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
