"""A recording read back: its description, its rows, and the world-model prompt of the system.

The prompt is the recorded system's own: the server's name and every recorded tool's signature
and description, with the answer layout of the MCP domain (`{"isError": ..., "result": ...}`),
so a world model trained on the recording and the simulator that serves it see the same text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from agentworld.config import Params
from agentworld.data.io import read_transitions
from agentworld.data.recording.redact import Redactor
from agentworld.data.recording.store import DESCRIPTION_FILE, TRAJECTORIES_FILE
from agentworld.data.schema import Transition
from agentworld.domains import Domain, ShapeRule, find_domain, register_recorded


class RecordingError(ValueError):
    """A recording folder that cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Recording:
    name: str
    directory: Path
    description: dict[str, Any]

    @classmethod
    def load(cls, directory: Path, name: str | None = None) -> Recording:
        """The recording in `directory`, as the domain `name` (default: the folder's name)."""
        directory = Path(directory)
        path = directory / DESCRIPTION_FILE
        if not path.exists():
            raise RecordingError(f"{path}: no such file; record the system first (agentworld record mcp --name "
                                 f"{directory.name} -- COMMAND) or pass its recording folder")
        try:
            description = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise RecordingError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(description, dict) or not isinstance(description.get("tools"), list):
            raise RecordingError(f"{path}: field tools: expected the recorded tool list")
        return cls(name or directory.name, directory, description)

    @property
    def server_name(self) -> str:
        return str((self.description.get("server") or {}).get("name") or self.name)

    @cached_property
    def tools(self) -> list[Any]:
        """The recorded tools as the SDK's `Tool` models, in recorded order."""
        from mcp.types import Tool

        # Imported logs name their tools without schemas: any object of arguments.
        return [Tool.model_validate({"inputSchema": {"type": "object"}, **tool}) for tool in self.description["tools"]]

    def redactor(self) -> Redactor:
        """The redaction the recording was written with: what a simulator applies to incoming calls
        so they match the recorded ones."""
        return Redactor(self.description.get("redaction") or {})

    def rows(self) -> list[Transition]:
        path = self.directory / TRAJECTORIES_FILE
        return read_transitions(path) if path.exists() else []

    @property
    def kind(self) -> str:
        """`mcp` (a recorded MCP server), `http` (a recorded HTTP API) or `openai-chat` (imported logs)."""
        return str(self.description.get("kind", "mcp"))

    def endpoints(self) -> list[tuple[str, str]]:
        """An HTTP recording's (method, path template) pairs, in first-seen order."""
        out: dict[tuple[str, str], None] = {}
        for row in self.rows():
            request = json.loads(row.action)
            out[(request["method"], path_template(request["path"]))] = None
        return list(out)

    def world_model_prompt(self) -> str:
        if self.kind == "http":
            return "\n".join([
                f"You are a world model of the HTTP API {self.server_name!r}, recorded from the real system. Given the "
                'agent\'s request as a JSON object {"body": ..., "headers": {...}, "method": ..., "path": ..., '
                '"query": ...}, answer with exactly the JSON response the API returns: {"body": ..., "headers": '
                '{...}, "status": ...}. Keep the system\'s state consistent across turns: changes made by earlier '
                "requests persist.",
                "Endpoints:",
                *(f"- {method} {path}" for method, path in self.endpoints()),
            ])
        from agentworld.domains.mcp.results import tool_signature

        return "\n".join([
            f"You are a world model of the MCP server {self.server_name!r}, recorded from the real system. Given the "
            'agent\'s tool call as a JSON object {"arguments": {...}, "tool": ...}, answer with exactly the JSON the '
            'server returns: {"isError":false,"result":...} with the tool\'s result, or {"isError":true,"error":...} '
            "with the server's error message. Keep the system's state consistent across turns: changes made by "
            "earlier calls persist.",
            "Tools:",
            *(tool_signature(tool) for tool in self.tools),
        ])

    def domain(self) -> Domain:
        """The recorded system as a domain, registered by name, so the shared stages (validation,
        build, training, evaluation) and the simulator treat it as they treat a built-in one."""
        from agentworld.domains.mcp import CALL_TOOL, application_tools, mcp_fault
        from agentworld.domains.mcp import DOMAIN as MCP

        rules: tuple[ShapeRule, ...] = ()
        if self.kind == "mcp":
            rules = MCP.shape_rules
        elif self.kind == "http":
            rules = (ShapeRule("every answer is a JSON response", "json"),
                     ShapeRule("a response has its status code", "regex", r'"status":\s*[1-5]\d\d\b'))
        size = f"{len(self.tools)} tools" if self.kind != "http" else "HTTP API"
        declared = Domain(
            name=self.name,
            description=f"recorded {self.kind} system {self.server_name!r} ({size})",
            entry_point=f"{__name__}:no_environment",
            probe=lambda: (False, f"{self.name!r} is a recorded system: its environment here is the recording "
                                  f"and the simulator (agentworld serve {'http' if self.kind == 'http' else 'mcp'})"),
            world_model_prompt=self.world_model_prompt(),
            shape_rules=rules,
            judge_title=f"the {'HTTP API' if self.kind == 'http' else 'MCP server'} {self.server_name!r}",
            judge_format=MCP.judge_format if self.kind == "mcp" else "",
            # a tool-calling agent under test calls the recorded tools; faults look like the MCP error JSON
            **({"action_tool": CALL_TOOL, "episode_tools": application_tools, "fault_observation": mcp_fault}
               if self.kind != "http" else {}),
        )
        existing = find_domain(self.name)
        if existing is not None and existing.world_model_prompt == declared.world_model_prompt:
            return existing
        return register_recorded(declared)


def path_template(path: str) -> str:
    """/api/items/42/reviews -> /api/items/{id}/reviews: numeric and uuid-like segments are ids."""
    parts = [("{id}" if re.fullmatch(r"\d+|[0-9a-fA-F-]{32,36}", part) else part) for part in path.split("/")]
    return "/".join(parts)


def no_environment(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("a recorded system has no environment here; simulate it with `agentworld serve mcp`")


def register_recordings(params: Params, root: Path) -> list[Recording]:
    """Load every recording of `params.recordings` (folders relative to `root`) and register its
    domain, so the stages find it by name like a built-in domain."""
    recordings = [Recording.load(Path(root) / folder, name) for name, folder in params.recordings.items()]
    for recording in recordings:
        recording.domain()
    return recordings
