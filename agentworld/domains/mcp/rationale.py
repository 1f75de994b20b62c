"""What a mcp step did, from the env's recorded `info` (see `agentworld.envs.rationale`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentworld.envs.rationale import as_str, episode_end, flag, join_sentences


def _mcp_call(action: str) -> tuple[str | None, list[str]]:
    try:
        data = json.loads(action)
    except (ValueError, TypeError, RecursionError):  # RecursionError: an agent's deeply nested JSON
        return None, []
    if not isinstance(data, dict):
        return None, []
    args = data.get("arguments")
    return as_str(data.get("tool")), (sorted(str(k) for k in args) if isinstance(args, dict) else [])


def describe_mcp(action: str, info: Mapping[str, Any], prev: Mapping[str, Any] | None) -> str:
    """mcp: which tool on which app, and whether the server returns an error or a result."""
    parsed_tool, arg_names = _mcp_call(action)
    tool = as_str(info.get("tool")) or parsed_tool
    app = as_str(info.get("app"))
    call = f"call to tool `{tool}`" if tool else "a tool call"
    if app:
        call += f" on the {app} app"
    if arg_names:
        names = ", ".join(arg_names[:5]) + (", …" if len(arg_names) > 5 else "")
        call += f" with arguments {names}"
    if info.get("is_error") is True:
        call += "; the server returns an error"
    elif info.get("is_error") is False:
        call += "; the server returns a result"
    end = None
    if flag(info, "solved"):
        end = "the task is solved"
    elif flag(info, "terminated") and "solved" in info:
        end = "the episode ends; the task is not solved"
    return join_sentences(call, end, episode_end(info))
