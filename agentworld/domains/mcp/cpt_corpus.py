"""The MCP domain's CPT corpus source `mcp_schemas`: the tools of our MCP applications (tracker,
crm, shop) with their JSON input schemas, and example calls with the exact observations the MCP
env returns, run in-process against a seeded database (no server subprocess)."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentworld.data.corpora import Document

log = logging.getLogger(__name__)



SCHEMA_MARKER = "Input schema (JSON Schema):"
MCP_EXAMPLE_SEED = 0
MCP_MISTAKE_DRAWS = 12


def _observe(server: Any, action: str, run: Callable[[Any], Any]) -> str:
    """The observation the MCP env returns for `action`, computed with the tool called in-process
    (`run` runs a coroutine: an `asyncio.Runner`'s, so all calls share one event loop)."""
    from mcp.server.mcpserver.exceptions import ToolError

    from agentworld.domains.mcp.env import parse_action, render

    tool, arguments, error = parse_action(action)
    if tool == "submit":
        return render({"isError": False, "result": {"episode": "submitted"}})
    if error is not None:
        return render({"isError": True, "error": error})
    try:
        result = run(server.call_tool(tool, arguments))
    except ToolError as exc:  # the server sends str(exc) as the error text
        return render({"isError": True, "error": str(exc)})
    if result.structured_content is not None:
        return render({"isError": False, "result": result.structured_content})
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    return render({"isError": False, "result": "\n".join(texts)})


def _tool_doc(app: str, description: str, tool: Any) -> Document:
    from agentworld.domains.mcp.results import tool_signature

    schema = json.dumps(tool.input_schema or {}, indent=2, sort_keys=True)
    text = (f'MCP server "{app}" ({description})\nTool: {tool.name}\n'
            f"Description: {(tool.description or '').strip()}\nSignature: {tool_signature(tool)[2:]}\n"
            f"{SCHEMA_MARKER}\n{schema}")
    return Document("mcp_schemas", f"mcp:{app}:tool:{tool.name}", f"{app} MCP tool {tool.name}", text)


def _app_docs(app: str, workdir: Path) -> list[Document]:
    from agentworld.domains.mcp.apps import app_module
    from agentworld.domains.mcp.apps.common import AppDB
    from agentworld.domains.mcp.seed import write_database

    module = app_module(app)
    db_path = workdir / f"{app}.db"
    write_database(app, MCP_EXAMPLE_SEED, db_path)
    server = module.build_server(AppDB(str(db_path)))  # opens the file per call: rewriting it resets the app
    with asyncio.Runner() as runner:
        tools = sorted(runner.run(server.list_tools()), key=lambda t: t.name)
        docs = _tool_docs(app, module, server, tools)
        docs += _example_docs(app, module, server, db_path, runner.run)
    return docs


def _tool_docs(app: str, module: Any, server: Any, tools: list[Any]) -> list[Document]:
    from agentworld.domains.mcp.results import tool_signature

    header = f'MCP server "{app}": {module.DESCRIPTION}.'
    instructions = (server.instructions or "").strip()
    overview = "\n".join([header, *([f"Instructions: {instructions}"] if instructions else []), "Tools:",
                          *(tool_signature(t) for t in tools),
                          'An agent calls a tool with one JSON object: {"tool": "<name>", "arguments": {...}}.',
                          'Results come back as {"isError":false,"result":...}, failures as '
                          '{"isError":true,"error":"..."}.'])
    docs = [Document("mcp_schemas", f"mcp:{app}:tools", f"{app} MCP server tools", overview)]
    return docs + [_tool_doc(app, module.DESCRIPTION, t) for t in tools]


def _example_docs(app: str, module: Any, server: Any, db_path: Path, run: Callable[[Any], Any]) -> list[Document]:
    """Each task kind's solution replayed on a freshly seeded database, then typical failed calls."""
    from agentworld.domains.mcp.env import McpActions, parse_action
    from agentworld.domains.mcp.seed import write_database
    from agentworld.domains.mcp.tasks import generate_task

    docs: list[Document] = []
    mistakes: list[str] = []
    for kind in module.KINDS:
        task = generate_task(MCP_EXAMPLE_SEED, app, kind)
        write_database(app, int(task.setup["data_seed"]), db_path)
        lines = [f'Example session with the "{app}" MCP server (task kind {kind}).', f"Task: {task.instruction}"]
        for action in [*task.solution, "submit"]:
            lines += [f"Action: {action}", f"Observation: {_observe(server, action, run)}"]
        docs.append(Document("mcp_schemas", f"mcp:{app}:example:{kind}", f"{app} MCP example: {kind}",
                             "\n".join(lines)))
        if not mistakes:  # erroneous actions, drawn from the env's own mistake model
            rng, vocabulary = random.Random(f"corpora:mcp:{app}"), McpActions(task)
            for _ in range(MCP_MISTAKE_DRAWS):
                action = vocabulary.mistake(rng)
                tool, arguments, _ = parse_action(action)
                # Non-object arguments are refused by the SDK client before they reach a server.
                if tool is None or isinstance(arguments, dict):
                    mistakes.append(action)
    write_database(app, MCP_EXAMPLE_SEED, db_path)
    lines = [f'Failed calls to the "{app}" MCP server and the errors they return.']
    for action in dict.fromkeys(mistakes):
        lines += [f"Action: {action}", f"Observation: {_observe(server, action, run)}"]
    docs.append(Document("mcp_schemas", f"mcp:{app}:example:errors", f"{app} MCP example: errors", "\n".join(lines)))
    return docs


def mcp_schemas(apps: Sequence[str] | None = None) -> list[Document]:
    """Tool lists, per-tool JSON input schemas and example calls of our MCP applications.

    The servers are built and called in-process (no subprocess) on seeded SQLite files in a
    temp dir; the observations are rendered exactly as `agentworld.domains.mcp.env` renders them.
    """
    try:
        from agentworld.domains.mcp.apps import APP_NAMES
        from agentworld.domains.mcp.env import probe
    except ImportError as exc:
        log.warning("mcp_schemas: MCP domain unavailable (%s); source is empty", exc)
        return []
    ok, reason = probe()
    if not ok:
        log.warning("mcp_schemas: %s; source is empty", reason)
        return []
    docs: list[Document] = []
    with tempfile.TemporaryDirectory(prefix="agentworld-corpora-mcp-") as workdir:
        for app in apps or APP_NAMES:
            docs += _app_docs(app, Path(workdir))
    return docs
