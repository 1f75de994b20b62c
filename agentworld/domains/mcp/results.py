"""MCP tools and results as the world model sees them, for the MCP domain and recorded MCP servers alike."""

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


def _type_of(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in schema:
        ref = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
        inner = ", ".join(f"{k}: {_type_of(v, defs)}" for k, v in ref.get("properties", {}).items())
        return "{" + inner + "}"
    if "anyOf" in schema:
        kinds = [_type_of(s, defs) for s in schema["anyOf"] if s.get("type") != "null"]
        return " | ".join(kinds)
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        text = f"list[{_type_of(schema.get('items', {}), defs)}]"
    else:
        text = str(kind)
    bounds = [f"{label}{schema[key]}" for key, label in (("minimum", ">="), ("maximum", "<="), ("minLength", "len>="),
                                                          ("maxLength", "len<="), ("minItems", "items>="),
                                                          ("maxItems", "items<=")) if key in schema]
    if "pattern" in schema:
        bounds.append(f"/{schema['pattern']}/")
    return f"{text}({', '.join(bounds)})" if bounds else text


def tool_signature(tool: Any) -> str:
    schema = tool.input_schema or {}
    required, defs = set(schema.get("required", [])), schema.get("$defs", {})
    args = []
    for name, prop in schema.get("properties", {}).items():
        default = "" if name in required else f"={json.dumps(prop.get('default'))}"
        args.append(f"{name}: {_type_of(prop, defs)}{default}")
    return f"- {tool.name}({', '.join(args)}): {(tool.description or '').strip()}"
