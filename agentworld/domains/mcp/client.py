"""A synchronous MCP client: one stdio server subprocess and its `ClientSession`, driven by an
asyncio event loop in a background thread.

The SDK's transports use anyio task groups, which must be entered and left by the same task, so
one long-lived task owns `stdio_client` + `ClientSession` and serves calls from a queue; callers
block on a `concurrent.futures.Future`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, Tool

REPO_ROOT = Path(__file__).resolve().parents[3]


class McpClientError(RuntimeError):
    """The server could not be started or stopped answering."""


class McpClient:
    def __init__(self, app: str, db_path: Path, workdir: Path, *, timeout_s: float = 20.0) -> None:
        self.app, self.db_path, self.workdir, self.timeout_s = app, Path(db_path), Path(workdir), timeout_s
        self.pidfile = self.workdir / f"{app}.pid"
        self.tools: list[Tool] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[Any] | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._errlog: TextIO | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Launch the server and wait until the session is initialised and its tools are listed."""
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Spawn the server in the background (several clients can start in parallel)."""
        if self._thread is not None:
            return
        self._errlog = open(self._errlog_path, "w")  # noqa: SIM115 - closed in close()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name=f"mcp-{self.app}", daemon=True)
        self._thread.start()

    def wait_ready(self) -> None:
        if not self._ready.wait(self.timeout_s * 3):
            self.close()
            raise McpClientError(f"MCP server {self.app!r} did not initialise within {self.timeout_s * 3:.0f}s")
        if self._error is not None:
            error = self._error
            self.close()
            raise McpClientError(f"MCP server {self.app!r} failed to start: {error!r}; see {self._errlog_path}") from error

    @property
    def _errlog_path(self) -> Path:
        return self.workdir / f"{self.app}.stderr.log"

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._error is None

    def server_pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text())
        except (OSError, ValueError):
            return None

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
               "PYTHONDONTWRITEBYTECODE": "1", "TZ": "UTC"}
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "agentworld.domains.mcp.server", "--app", self.app, "--db", str(self.db_path),
                  "--pidfile", str(self.pidfile)],
            env=env, cwd=str(self.workdir))  # cwd outside the repo: `mcp` must resolve to the SDK
        try:
            async with stdio_client(params, errlog=self._errlog) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=self.timeout_s) as session:
                    await session.initialize()
                    self.tools = list((await session.list_tools()).tools)
                    self._ready.set()
                    while True:
                        item = await self._queue.get()
                        if item is None:
                            break
                        fn, future = item
                        try:
                            future.set_result(await fn(session))
                        except Exception as exc:  # delivered to the caller
                            future.set_exception(exc)
        except BaseException as exc:  # noqa: BLE001 - reported to start() / callers
            self._error = exc
        finally:
            self._ready.set()

    def _submit(self, fn: Callable[[ClientSession], Awaitable[Any]]) -> Any:
        if not self.alive or self._loop is None or self._queue is None:
            raise McpClientError(f"MCP server {self.app!r} is not running ({self._error!r})")
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (fn, future))
        try:
            return future.result(self.timeout_s * 2)
        except concurrent.futures.TimeoutError as exc:
            raise McpClientError(f"MCP server {self.app!r} did not answer within {self.timeout_s * 2:.0f}s") from exc

    def call_tool(self, name: str, arguments: Any) -> CallToolResult:
        return self._submit(lambda session: session.call_tool(name, arguments))

    def close(self) -> None:
        """Stop the session and the server process (the SDK terminates it), then the thread."""
        if self._thread is not None:
            if self._thread.is_alive() and self._loop is not None and self._queue is not None:
                try:
                    self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
                except RuntimeError:  # loop already closed
                    pass
            self._thread.join(timeout=15)
            self._thread = None
        pid = self.server_pid()
        if pid is not None and _pid_alive(pid):  # the SDK's shutdown should have stopped it; make sure
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        if self._errlog is not None:
            self._errlog.close()
            self._errlog = None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True
