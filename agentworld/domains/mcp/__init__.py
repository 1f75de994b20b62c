"""MCP domain: SaaS-like applications (issue tracker, CRM, online shop) behind real MCP servers.

Each application is a real SQLite database served by the official `mcp` SDK's `MCPServer` over
stdio; the environment (`agentworld.domains.mcp.env`) is an MCP client speaking the real protocol.

This package is named `mcp` too: every module here uses absolute imports, so `from mcp import ...`
always resolves to the SDK's top-level package, never to `agentworld.domains.mcp`. This file declares the
domain (`DOMAIN`) and imports nothing heavy, so listing environments stays light.
"""

import json
from collections.abc import Mapping
from typing import Any

from agentworld.domains import lazy
from agentworld.domains.base import FAULT_MESSAGES, ActionTool, Domain, ShapeRule
from agentworld.domains.mcp.rationale import describe_mcp

#: Actions that end an episode.
END_ACTIONS = frozenset({"exit", "submit"})
#: A tool-calling agent's one function tool when the episode lists no tools of its own.
CALL_TOOL = ActionTool(
    "call_tool", "Call one of the application's MCP tools with its arguments; the tool's JSON result comes back.",
    {"type": "object", "properties": {"tool": {"type": "string", "description": "the MCP tool's name"},
                                      "arguments": {"type": "object", "description": "the tool's arguments"}},
     "required": ["tool"]},
    lambda arguments: json.dumps({"tool": arguments.get("tool", ""), "arguments": arguments.get("arguments") or {}}))


def application_tools(info: Mapping[str, Any]) -> list[ActionTool]:
    """The episode's MCP tools (from its reset info), each a function tool with its own schema."""
    def tool(spec: Mapping[str, Any]) -> ActionTool:
        name = spec["name"]
        return ActionTool(name, spec.get("description", ""), spec.get("inputSchema") or {"type": "object"},
                          lambda arguments: json.dumps({"tool": name, "arguments": dict(arguments)}))
    return [tool(spec) for spec in info.get("tool_schemas") or []]


def mcp_fault(kind: str, action: str) -> str:
    """An injected fault as the MCP environment reports a failed call (canonical JSON)."""
    return json.dumps({"error": FAULT_MESSAGES[kind], "isError": True}, sort_keys=True, separators=(",", ":"))


WORLD_MODEL_PROMPT = (
    "You are a world model of SaaS applications exposed as MCP tool servers: an issue tracker, a CRM "
    "and an online shop, each backed by its own database. Given the agent's tool call as a JSON "
    'object {"tool": ..., "arguments": {...}}, answer with exactly the JSON the environment returns: '
    '{"isError":false,"result":...} with the tool\'s result, or {"isError":true,"error":...} with the '
    "server's error message (not found, validation failed, permission denied, rate limit exceeded). "
    "Keep the application's data consistent across turns: changes made by earlier calls persist."
)

DOMAIN = Domain(
    name="mcp",
    description=(
        "SaaS apps behind real MCP servers (official SDK over stdio): issue tracker, CRM and online "
        "shop on seeded SQLite; tool calls as JSON, verified on the database"
    ),
    entry_point="agentworld.domains.mcp.env:factory",
    probe=lazy("agentworld.domains.mcp.env", "probe"),
    policies=lazy("agentworld.domains.mcp.env", "mcp_policy"),
    world_model_prompt=WORLD_MODEL_PROMPT,
    shape_rules=(
        ShapeRule("every answer is a JSON tool result", "json"),
        ShapeRule("a tool result says whether it is an error", "regex", r'(?s)^\{.*"isError":\s*(?:true|false)'),
    ),
    describer=describe_mcp,
    judge_title="SaaS applications exposed as MCP tool servers",
    judge_format=('Exactly one compact JSON object: {"isError":false,"result":...} or {"isError":true,"error":...}.'),
    judge_notes=(
        "isError, the error kind (not found / validation / permission / rate limit), ids, counts, "
        "statuses, names and every JSON key must match the reference; created_at/updated_at-like "
        "fields are runtime metadata; records created or changed by earlier calls must be reflected."
    ),
    end_actions=END_ACTIONS,
    action_tool=CALL_TOOL,
    episode_tools=application_tools,
    fault_observation=mcp_fault,
    corpus_sources={"mcp_schemas": lazy("agentworld.domains.mcp.cpt_corpus", "mcp_schemas")},
)
