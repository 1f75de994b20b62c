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
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

import anyio
import jsonschema
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from agentworld.data.prompts import WorldModelExample, parse_observation, system_prompt
from agentworld.data.recording.recording import Recording
from agentworld.data.recording.store import canonical_json
from agentworld.data.schema import Transition, group_trajectories
from agentworld.models.backends import Backend
from agentworld.simulation.env import Control

INVALID_PARAMS = -32602


class RecordedCache:
    """Exact-match answers of a recording: (the session's earlier calls, this call) -> the row."""

    def __init__(self, rows: Sequence[Transition]) -> None:
        self.answers: dict[tuple[tuple[str, ...], str], Transition] = {}
        for turns in group_trajectories(list(rows)).values():
            earlier: list[str] = []
            for row in turns:
                self.answers.setdefault((tuple(earlier), row.action), row)
                earlier.append(row.action)

    def lookup(self, earlier: Sequence[str], action: str) -> Transition | None:
        return self.answers.get((tuple(earlier), action))


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


class SimulatedServer:
    """The recorded server's tools answered by the cache and the world model, per client session."""

    def __init__(self, recording: Recording, backend: Backend | None, *, control: Control | None = None,
                 cache: bool = True, retries: int = 2, retry_temperature: float = 0.7) -> None:
        self.recording, self.backend, self.control = recording, backend, control or Control()
        self.domain = recording.domain().name
        self.tools = {tool.name: tool for tool in recording.tools}
        self.redactor = recording.redactor()
        steering = bool(self.control.system_suffix())
        self.cache = RecordedCache(recording.rows()) if cache and not steering else None
        self.retries, self.retry_temperature = retries, retry_temperature
        self.sessions: dict[str, list[tuple[str, str]]] = {}
        self.counts: Counter[str] = Counter()
        self._generate_lock = threading.Lock()  # one generation at a time on the shared model

    def server(self) -> Server[Any]:
        server_info = self.recording.description.get("server") or {}
        return Server(str(server_info.get("name") or self.recording.name), version=str(server_info.get("version", "")),
                      instructions=self.recording.description.get("instructions"),
                      on_list_tools=self.list_tools, on_call_tool=self.call_tool)

    async def list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(self.tools.values()))

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        headers = getattr(ctx.request, "headers", None) or {}
        history = self.sessions.setdefault(headers.get("mcp-session-id") or "stdio", [])
        answer, observation = await self.answer(history, params.name, params.arguments or {})
        history.append((self.action(params.name, params.arguments or {}), observation))
        if isinstance(answer, MCPError):
            raise answer
        return answer

    def action(self, name: str, arguments: dict[str, Any]) -> str:
        """A call as the recording wrote it (redacted alike), so it matches recorded calls."""
        return canonical_json(self.redactor.value({"tool": name, "arguments": arguments}))

    async def answer(self, history: Sequence[tuple[str, str]], name: str,
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
            message = f"Error executing tool {name}: invalid arguments: {where}: {problem.message}"
            return text_result(message, is_error=True), canonical_json({"error": message, "isError": True})
        action = self.action(name, arguments)
        row = self.cache.lookup([a for a, _ in history], action) if self.cache is not None else None
        if row is not None:
            self.counts["cache"] += 1
            return recorded_answer(row), row.observation
        if self.backend is None:
            self.counts["unanswered"] += 1
            message = "world model error: this call is not in the recording and no world model is served"
            return text_result(message, is_error=True), canonical_json({"error": message, "isError": True})
        observation, answer = await anyio.to_thread.run_sync(self._generate, list(history), action, tool)
        self.counts["model" if answer is not None else "malformed"] += 1
        if answer is None:
            message = f"world model error: no well-formed result after {self.retries + 1} attempts"
            return text_result(message, is_error=True), canonical_json({"error": message, "isError": True})
        return answer, observation

    def _generate(self, history: list[tuple[str, str]], action: str,
                  tool: types.Tool) -> tuple[str, types.CallToolResult | MCPError | None]:
        assert self.backend is not None
        example = WorldModelExample(id=f"{self.domain}:serve", domain=self.domain,
                                    system=system_prompt(self.domain, "") + self.control.system_suffix(),
                                    history=history, action=action)
        observation = ""
        with self._generate_lock:
            for attempt in range(self.retries + 1):
                temperature = 0.0 if attempt == 0 else self.retry_temperature
                observation, well_formed = parse_observation(self.backend.generate([example], temperature)[0])
                answer = answer_from_observation(observation, tool) if well_formed else None
                if answer is not None:
                    return observation, answer
        return observation, None

    def report(self) -> dict[str, Any]:
        total = sum(self.counts.values())
        return {"calls": total, **{k: self.counts.get(k, 0) for k in ("cache", "model", "malformed", "refused",
                                                                         "unanswered")},
                "cache_share": round(self.counts.get("cache", 0) / total, 4) if total else None,
                "model_share": round(self.counts.get("model", 0) / total, 4) if total else None}
