"""Agent-test episodes of a recorded system: they start where the recorded sessions started.

A recording holds sessions (one trajectory per client session or imported conversation), not a
task generator; seed `s` starts session `s mod n`: its instruction, then the recorded tools (or
endpoints) and the action format, as the MCP environment presents its application. The reset info
lists the tools with their input schemas, so a tool-calling agent gets them as functions.
"""

from __future__ import annotations

from typing import Any

from agentworld.data.recording.recording import Recording
from agentworld.envs.base import Task


class RecordedSessions:
    """A `TaskSource` over a recording's sessions (for `WorldModelEnv`)."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        firsts: dict[str, Any] = {}
        for row in recording.rows():
            firsts.setdefault(row.trajectory_id, row)
        if not firsts:
            raise ValueError(f"recording {recording.name!r} ({recording.directory}) holds no sessions to start from")
        self.sessions = list(firsts.values())

    def presentation(self) -> str:
        """What the agent is told about the system beside its instruction."""
        if self.recording.kind == "http":
            endpoints = "\n".join(f"- {method} {path}" for method, path in self.recording.endpoints())
            return (f"HTTP API {self.recording.server_name!r}. Endpoints:\n{endpoints}\nAct with one JSON request "
                    'per turn: {"method": ..., "path": ..., "query": {...}, "headers": {...}, "body": ...}.')
        from agentworld.domains.mcp.results import tool_signature

        tools = "\n".join(tool_signature(tool) for tool in self.recording.tools)
        return (f"MCP server {self.recording.server_name!r}. Tools:\n{tools}\n"
                'Act with one JSON object per turn: {"tool": "<name>", "arguments": {...}}.')

    def start(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Task, str, dict[str, Any]]:
        first = self.sessions[(seed or 0) % len(self.sessions)]
        task = Task(task_id=f"{self.recording.name}-{first.trajectory_id}", domain=self.recording.name,
                    instruction=first.instruction)
        info: dict[str, Any] = {"task_id": task.task_id, "session": first.trajectory_id}
        if self.recording.kind != "http":
            info["tool_schemas"] = [{"name": tool.name, "description": tool.description or "",
                                     "inputSchema": tool.input_schema} for tool in self.recording.tools]
        return task, f"{first.instruction}\n\n{self.presentation()}".strip(), info

    def close(self) -> None:
        return None
