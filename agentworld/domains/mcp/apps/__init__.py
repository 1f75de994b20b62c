"""The applications of the MCP domain, by name (each module: SCHEMA, generate, build_server, KINDS,
make_task, check, explore, inspect, mistake, entities)."""

from __future__ import annotations

import importlib
from types import ModuleType

APP_NAMES: tuple[str, ...] = ("tracker", "crm", "shop")


def app_module(name: str) -> ModuleType:
    if name not in APP_NAMES:
        raise KeyError(f"unknown MCP application {name!r}; choose one of {', '.join(APP_NAMES)}")
    return importlib.import_module(f"agentworld.domains.mcp.apps.{name}")
