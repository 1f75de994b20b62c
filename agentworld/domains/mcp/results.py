"""A tool result as the world model sees it, for the MCP domain and for recorded MCP servers alike."""

from __future__ import annotations

import json
from typing import Any

from mcp.types import CallToolResult


def tool_observation(result: CallToolResult) -> dict[str, Any]:
    """Structured content if any, else the text (parsed when it is JSON); errors under `error`."""
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    if result.is_error:
        return {"isError": True, "error": "\n".join(texts)}
    if result.structured_content is not None:
        return {"isError": False, "result": result.structured_content}
    text = "\n".join(texts)
    try:
        return {"isError": False, "result": json.loads(text)}
    except ValueError:
        return {"isError": False, "result": text}
