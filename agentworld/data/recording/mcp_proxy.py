"""The MCP recording proxy: `agentworld record mcp --name NAME -- COMMAND [ARGS...]`.

It starts the user's real MCP server (stdio) as the official SDK's client, and is itself an MCP
server (stdio, or streamable HTTP on 127.0.0.1) built from the SDK's low-level `Server`, whose
handlers forward every request unchanged: the agent sees the real server's name, version,
instructions, tool list, results and errors. Each `tools/call` is also written as a Transition
(action: the call as the agent made it, `{"arguments": ..., "tool": ...}`; observation: the real
result, `{"isError": ..., "result": ...}`, or the protocol error) to the recording, one
trajectory per client session; the tool list is saved once as the recording's description.

All agent sessions share the one real server process, as they would share the real system.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client, stdio_server, types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from agentworld.data.recording.redact import Redactor
from agentworld.data.recording.store import RecordingWriter
from agentworld.domains.mcp.results import tool_observation


def error_observation(error: MCPError) -> dict[str, Any]:
    """A JSON-RPC error the server answered instead of a result (an unknown tool, bad params)."""
    return {"isError": True, "error": error.message, "code": error.code}


class Recorder:
    """Forwards one downstream server's requests to the upstream session and records the calls."""

    def __init__(self, upstream: ClientSession, writer: RecordingWriter) -> None:
        self.upstream, self.writer = upstream, writer
        self.sessions: dict[str, str] = {}

    def trajectory_for(self, ctx: Any) -> str:
        key = session_key(ctx)
        if key not in self.sessions:
            self.sessions[key] = self.writer.trajectory_id(len(self.sessions))
        return self.sessions[key]

    async def list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return await self.upstream.list_tools(params=params)

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        trajectory = self.trajectory_for(ctx)
        action = {"tool": params.name, "arguments": params.arguments or {}}
        started = time.perf_counter()
        try:
            result = await self.upstream.send_request(types.CallToolRequest(params=params), types.CallToolResult)
        except MCPError as error:
            self.writer.record(trajectory, action=action, observation=error_observation(error),
                               info={"tool": params.name, "is_error": True, "protocol_error": error.code,
                                     "latency_s": round(time.perf_counter() - started, 4)})
            raise
        self.writer.record(trajectory, action=action, observation=tool_observation(result),
                           info={"tool": params.name, "is_error": bool(result.is_error),
                                 "latency_s": round(time.perf_counter() - started, 4),
                                 "mcp_result": result.model_dump(mode="json", by_alias=True, exclude_none=True)})
        return result


async def list_all_tools(session: ClientSession) -> list[types.Tool]:
    tools, cursor = [], None
    while True:
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def describe(init: types.InitializeResult, tools: Sequence[types.Tool]) -> dict[str, Any]:
    """The recording's description: the server's identity and its tool list, as MCP gave them."""
    return {"kind": "mcp", "server": init.server_info.model_dump(mode="json", exclude_none=True),
            "instructions": init.instructions,
            "tools": [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]}


async def run_proxy(name: str, command: Sequence[str], directory: Path, *, redactor: Redactor | None = None,
                    http_port: int | None = None, errlog: Any = None) -> None:
    """Serve the proxy until its client disconnects (stdio) or it is interrupted (HTTP)."""
    if not command:
        raise ValueError("record mcp: give the real server's command after `--`")
    params = StdioServerParameters(command=command[0], args=list(command[1:]), env=dict(os.environ))
    async with stdio_client(params, errlog=errlog or sys.stderr) as (read, write):
        async with ClientSession(read, write) as upstream:
            init = await upstream.initialize()
            tools = await list_all_tools(upstream)
            writer = RecordingWriter(directory, name, recorder="mcp-proxy", redactor=redactor,
                                     provenance={"server_command": " ".join(command)})
            writer.describe(describe(init, tools))
            recorder = Recorder(upstream, writer)
            info = init.server_info
            server: Server[Any] = Server(info.name, version=info.version, title=info.title,
                                         instructions=init.instructions,
                                         on_list_tools=recorder.list_tools, on_call_tool=recorder.call_tool)
            await serve(server, http_port)


def session_key(ctx: Any) -> str:
    """Which client session a request belongs to: over HTTP the `mcp-session-id` header names it;
    over stdio a server has one client for its lifetime."""
    headers = getattr(ctx.request, "headers", None) or {}
    return headers.get("mcp-session-id") or "stdio"


async def serve(server: Server[Any], http_port: int | None) -> None:
    """Serve `server` over stdio until the client leaves, or over streamable HTTP on `http_port`."""
    if http_port is not None:
        await serve_http(server, http_port)
        return
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(server: Server[Any], port: int) -> None:
    """Streamable HTTP on 127.0.0.1:`port`/mcp until interrupted."""
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()


def record_mcp(name: str, command: Sequence[str], directory: Path, *, redactor: Redactor | None = None,
               http_port: int | None = None) -> None:
    anyio.run(lambda: run_proxy(name, command, directory, redactor=redactor, http_port=http_port))
