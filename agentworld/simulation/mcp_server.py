"""`agentworld serve mcp`: a recorded MCP server, simulated, as a drop-in for the real one.

The simulated server (the SDK's low-level `Server`, over stdio or streamable HTTP on 127.0.0.1)
exposes exactly the recorded tool list under the recorded server name. A `tools/call` is answered
on the hybrid path of StableToolBench:

1. an unknown tool is refused with the JSON-RPC error the SDK gives (-32602), and arguments that
   break the tool's input schema get the error result the SDK's servers give ("Error executing
   tool ..."), before anything is generated, so the simulator refuses what the real server would;
2. the **cache**: where this session's earlier calls and this call replay a recorded session
   exactly (the same calls in the same order from the start), the recorded result is returned
   as it was recorded;
3. otherwise the **world model** generates the result from the session's history (its own
   earlier answers included) with the recording's system prompt, the prompt it was trained with;
   a generation that is not a well-formed result after `retries` sampled retries becomes a
   well-formed MCP error result (`world model error: ...`), never a crash.

Simulation controls (faults, perturbation, fiction) steer the world model through its system
prompt as they do in `WorldModelEnv`; with any control set the cache is off, because replayed
reality would ignore them. `counts` says how many calls each path served.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import jsonschema
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from agentworld.data.recording.mcp_proxy import session_key
from agentworld.data.recording.recording import Recording
from agentworld.data.recording.store import canonical_json
from agentworld.data.schema import Transition
from agentworld.models.backends import Backend
from agentworld.simulation.recorded import RecordedSystem

INVALID_PARAMS = -32602


def recorded_answer(row: Transition) -> types.CallToolResult | MCPError:
    """The result the real server gave, exactly as recorded (or rebuilt from the observation)."""
    raw = row.info.get("mcp_result")
    if isinstance(raw, dict):
        return types.CallToolResult.model_validate(raw)
    answer = answer_from_observation(row.observation, None)
    return answer if answer is not None else text_result(row.observation, is_error=False)


def text_result(text: str, *, is_error: bool) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def answer_from_observation(text: str, tool: types.Tool | None) -> types.CallToolResult | MCPError | None:
    """A generated observation as the MCP answer it stands for; None if it is not well formed
    (not the `{"isError": ..., ...}` layout, or structured content that breaks the tool's output schema)."""
    try:
        payload = json.loads(text)
    except ValueError:
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("isError"), bool):
        return None
    if payload["isError"]:
        message = payload.get("error")
        if not isinstance(message, str):
            return None
        code = payload.get("code")
        return MCPError(code, message) if isinstance(code, int) else text_result(message, is_error=True)
    if "result" not in payload:
        return None
    result = payload["result"]
    if isinstance(result, str):
        return text_result(result, is_error=False)
    structured = None
    if tool is not None and tool.output_schema:
        if not isinstance(result, dict) or next(_schema_errors(tool.output_schema, result), None) is not None:
            return None
        structured = result
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(result))],
                                structured_content=structured, is_error=False)


def _schema_errors(schema: dict[str, Any], value: Any) -> Any:
    validator = jsonschema.validators.validator_for(schema)(schema)
    return iter(sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path)))


class SimulatedServer(RecordedSystem):
    """The recorded server's tools answered by the cache and the world model, per client session."""

    PATHS = ("cache", "model", "malformed", "refused", "unanswered")

    def __init__(self, recording: Recording, backend: Backend | None, **options: Any) -> None:
        super().__init__(recording, backend, **options)
        self.tools = {tool.name: tool for tool in recording.tools}

    def server(self) -> Server[Any]:
        server_info = self.recording.description.get("server") or {}
        return Server(str(server_info.get("name") or self.recording.name), version=str(server_info.get("version", "")),
                      instructions=self.recording.description.get("instructions"),
                      on_list_tools=self.list_tools, on_call_tool=self.call_tool)

    async def list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(self.tools.values()))

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        history = self.sessions.setdefault(session_key(ctx), [])
        answer, observation = await self.answer(history, params.name, params.arguments or {})
        history.append((self.action(params.name, params.arguments or {}), observation))
        if isinstance(answer, MCPError):
            raise answer
        return answer

    def action(self, name: str, arguments: dict[str, Any]) -> str:
        """A call as the recording wrote it (redacted alike), so it matches recorded calls."""
        return canonical_json(self.redactor.value({"tool": name, "arguments": arguments}))

    async def answer(self, history: list[tuple[str, str]], name: str,
                     arguments: dict[str, Any]) -> tuple[types.CallToolResult | MCPError, str]:
        """The answer to one call after `history`, and the observation the session remembers."""
        tool = self.tools.get(name)
        if tool is None:
            self.counts["refused"] += 1
            error = MCPError(INVALID_PARAMS, f"Unknown tool: {name}")
            return error, canonical_json({"code": INVALID_PARAMS, "error": error.message, "isError": True})
        problem = next(_schema_errors(tool.input_schema, arguments), None)
        if problem is not None:
            self.counts["refused"] += 1
            where = ".".join(map(str, problem.absolute_path)) or "arguments"
            return error_result(f"Error executing tool {name}: invalid arguments: {where}: {problem.message}")
        action = self.action(name, arguments)
        row = self.cached(history, action)
        if row is not None:
            self.counts["cache"] += 1
            return recorded_answer(row), row.observation
        if self.backend is None:
            self.counts["unanswered"] += 1
            return error_result("world model error: this call is not in the recording and no world model is served")
        observation, answer = await anyio.to_thread.run_sync(
            self.generate, list(history), action, lambda text: answer_from_observation(text, tool))
        if answer is None:
            self.counts["malformed"] += 1
            return error_result(f"world model error: no well-formed result after {self.retries + 1} attempts")
        self.counts["model"] += 1
        return answer, observation


def error_result(message: str) -> tuple[types.CallToolResult, str]:
    """An MCP error result, and the observation a session remembers of it."""
    return text_result(message, is_error=True), canonical_json({"error": message, "isError": True})
