"""MCP domain: SaaS-like applications (issue tracker, CRM, online shop) behind real MCP servers.

Each application is a seeded SQLite database served by the official `mcp` SDK (`MCPServer`, stdio
transport) in its own subprocess; this environment is an MCP client (`stdio_client` +
`ClientSession`: initialize, list_tools, call_tool) run on a background event loop so the gym API
stays synchronous. One server per application is started on first use and kept alive across
episodes; `reset` only replaces the application's SQLite file with a freshly seeded copy (the
server opens the file per call), so resets take milliseconds.

Action: one JSON object `{"tool": "<name>", "arguments": {...}}`; `submit` (or `{"tool": "submit"}`)
ends the episode. Observation of a step: canonical JSON (sorted keys, compact, ASCII):
`{"isError":false,"result":...}` with the tool's structured result, or
`{"isError":true,"error":"..."}` with the server's (or the SDK client's) error text. Reward 1.0
at the step where the task's verifier (a query on the application database) first passes.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import tempfile
import weakref
from pathlib import Path
from typing import Any

from agentworld.domains.mcp import END_ACTIONS, WORLD_MODEL_PROMPT
from agentworld.domains.mcp.apps import APP_NAMES, app_module
from agentworld.domains.mcp.client import McpClient, McpClientError
from agentworld.domains.mcp.results import tool_observation, tool_signature
from agentworld.domains.mcp.seed import write_database
from agentworld.domains.mcp.tasks import DOMAIN, generate_task
from agentworld.envs.base import Task, TextEnv
from agentworld.envs.behaviour import Policy, behaviour_policy

__all__ = ["DOMAIN", "SYSTEM_PROMPT", "McpEnv", "factory", "mcp_policy", "probe", "render"]

SYSTEM_PROMPT = WORLD_MODEL_PROMPT  # declared in agentworld/domains/mcp/__init__.py
OBSERVATION_MAX_CHARS = 4000
INSTALL_HINT = "pip install mcp==2.3.0"


def probe() -> tuple[bool, str]:
    """Whether the MCP domain can run here: the `mcp` SDK (2.x, with `MCPServer`) and sqlite3."""
    try:
        from importlib.metadata import version

        import mcp
        from mcp.server.mcpserver import MCPServer  # noqa: F401 - the 2.x server class
    except ImportError as exc:
        return False, f"the MCP Python SDK 2.x is missing ({exc}); {INSTALL_HINT}"
    if Path(__file__).resolve().parent in Path(mcp.__file__).resolve().parents:
        return False, f"`import mcp` resolved to {mcp.__file__}, not the installed SDK (shadowed)"
    return True, f"mcp {version('mcp')} SDK, sqlite {sqlite3.sqlite_version}"


# ----------------------------------------------------------------------------- rendering
def _dump(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=True, separators=(",", ":"))


def render(payload: dict[str, Any], limit: int = OBSERVATION_MAX_CHARS) -> str:
    """Canonical JSON of `payload`, shortened deterministically to `limit` chars (still valid JSON):
    the longest list in the result is cut (noting `truncated` and how many items were dropped), else
    the error/result text is cut with a `...[truncated]` marker."""
    text = _dump(payload)
    if len(text) <= limit:
        return text
    result = payload.get("result")
    if isinstance(result, dict):
        lists = [k for k, v in result.items() if isinstance(v, list) and v]
        if lists:
            key = max(lists, key=lambda k: (len(_dump(result[k])), k))
            items = result[key]
            keep = len(items)
            while keep > 0:
                keep -= 1
                trial = {**payload, "result": {**result, key: items[:keep]}, "truncated": {key: len(items) - keep}}
                text = _dump(trial)
                if len(text) <= limit:
                    return text
    field = "error" if "error" in payload else "result"
    body = payload[field] if isinstance(payload[field], str) else _dump(payload[field])
    marker = "...[truncated]"
    cut = max(0, limit - len(_dump({**payload, field: ""})) - len(marker) - 16)
    while True:
        text = _dump({**payload, field: body[:cut] + marker, "truncated": True})
        if len(text) <= limit or cut == 0:
            return text
        cut = max(0, cut - (len(text) - limit))


# ----------------------------------------------------------------------------- environment
class McpEnv(TextEnv):
    """Gymnasium-style text env over real MCP servers (see module docstring)."""

    domain = DOMAIN
    env_version = "1"

    def __init__(self, sandbox_params: Any = None, *, apps: tuple[str, ...] | None = None,
                 timeout_s: float = 20.0) -> None:
        super().__init__()
        self.apps = tuple(apps or APP_NAMES)
        for app in self.apps:
            app_module(app)
        self.timeout_s = timeout_s
        self.workdir = Path(tempfile.mkdtemp(prefix="agentworld-mcp-"))
        self._clients: dict[str, McpClient] = {}
        self._done = True
        self._steps = 0
        self._solved = False
        # runs on close(), on garbage collection and at interpreter exit
        self._finalizer = weakref.finalize(self, _cleanup, self._clients, self.workdir)

    # ------------------------------------------------------------------ protocol
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        task = self.episode_task(
            seed, options,
            lambda s, o: generate_task(s, o.get("app") or self.apps[s % len(self.apps)], o.get("kind")))
        app = task.setup["app"]
        write_database(app, int(task.setup["data_seed"]), self._db_path(app))
        client = self._client(app)
        self.task, self._done, self._steps, self._solved = task, False, 0, False
        tools = "\n".join(tool_signature(t) for t in client.tools)
        observation = (f"{task.instruction}\n\nApplication: {app} ({app_module(app).DESCRIPTION}). Tools:\n{tools}\n"
                       "Act with one JSON object per turn: {\"tool\": \"<name>\", \"arguments\": {...}}; "
                       "send submit when done.")
        info = {"task_id": task.task_id, "app": app, "kind": task.setup["kind"], "seed": seed,
                "tools": sorted(t.name for t in client.tools),
                # each tool with its input schema, as the server lists it (tool-calling agents' functions)
                "tool_schemas": [{"name": t.name, "description": t.description or "", "inputSchema": t.input_schema}
                                 for t in sorted(client.tools, key=lambda t: t.name)]}
        return observation, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done or self.task is None:
            raise RuntimeError("episode is over (or never started); call reset() first")
        self._steps += 1
        tool, arguments, parse_error = parse_action(action)
        if tool == "submit":
            solved = self.check()
            self._done = True
            info = self._info(tool, False, solved)
            info["ended_by_agent"] = True
            reward = 1.0 if solved and not self._solved else 0.0
            self._solved = solved
            return render({"isError": False, "result": {"episode": "submitted"}}), reward, True, False, info
        if parse_error is not None:
            payload: dict[str, Any] = {"isError": True, "error": parse_error}
        else:
            payload = self._call(tool, arguments)
        solved = self.check()
        reward = 1.0 if solved and not self._solved else 0.0
        self._solved = self._solved or solved
        self._done = solved
        return render(payload), reward, solved, False, self._info(tool, payload["isError"], solved)

    def close(self) -> None:
        self._done = True
        self._finalizer()

    # ------------------------------------------------------------------ helpers
    def check(self) -> bool:
        """Run the task's verifier against the application database (read-only)."""
        if self.task is None:
            return False
        app = self.task.setup["app"]
        conn = sqlite3.connect(f"file:{self._db_path(app)}?mode=ro", uri=True)
        try:
            conn.row_factory = sqlite3.Row
            return bool(app_module(app).check(conn, self.task.setup["check"]))
        finally:
            conn.close()

    def server_pids(self) -> dict[str, int]:
        return {app: pid for app, c in self._clients.items() if (pid := c.server_pid()) is not None}

    def _db_path(self, app: str) -> Path:
        return self.workdir / f"{app}.db"

    def _client(self, app: str) -> McpClient:
        """The running client of `app`; the first call launches every application's server in parallel."""
        for name, client in list(self._clients.items()):
            if client._thread is not None and not client.alive and client._ready.is_set():
                client.close()  # died: replace it
                del self._clients[name]
        pending = [name for name in (app, *self.apps) if name not in self._clients] if not self._clients else \
            ([app] if app not in self._clients else [])
        for name in dict.fromkeys(pending):
            client = McpClient(name, self._db_path(name), self.workdir, timeout_s=self.timeout_s)
            self._clients[name] = client
            client.launch()
        for name in dict.fromkeys(pending):
            try:
                self._clients[name].wait_ready()
            except Exception:
                self._clients.pop(name, None)
                raise
        return self._clients[app]

    def _call(self, tool: str, arguments: Any) -> dict[str, Any]:
        assert self.task is not None
        client = self._clients[self.task.setup["app"]]
        try:
            result = client.call_tool(tool, arguments)
        except McpClientError:
            raise
        except Exception as exc:  # the SDK refused the request (client-side validation or a protocol error)
            return {"isError": True, "error": f"{type(exc).__name__}: {exc}"}
        return tool_observation(result)

    def _info(self, tool: str | None, is_error: bool, solved: bool) -> dict[str, Any]:
        assert self.task is not None
        return {"task_id": self.task.task_id, "app": self.task.setup["app"], "kind": self.task.setup["kind"],
                "tool": tool, "is_error": bool(is_error), "solved": bool(solved), "step": self._steps}


def _cleanup(clients: dict[str, McpClient], workdir: Path) -> None:
    for client in list(clients.values()):
        client.close()
    clients.clear()
    shutil.rmtree(workdir, ignore_errors=True)


def parse_action(action: str) -> tuple[str | None, Any, str | None]:
    """(tool, arguments, error): the error says why the action is not a tool call."""
    text = action.strip()
    if text in END_ACTIONS:
        return "submit", {}, None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deeply
        return None, None, f"Invalid action: not a JSON object ({exc})"
    if not isinstance(obj, dict) or not isinstance(obj.get("tool"), str) or not obj["tool"]:
        return None, None, 'Invalid action: expected {"tool": "<name>", "arguments": {...}}'
    if obj["tool"] in END_ACTIONS:
        return "submit", {}, None
    return obj["tool"], obj.get("arguments", {}), None


def factory(sandbox_params: Any = None) -> TextEnv:
    return McpEnv(sandbox_params)


# ----------------------------------------------------------------------------- behaviour vocabulary
_ID_KEYS = {"issue_id": ("issue_id",), "id": (), "project_key": ("project_key",), "key": ("project_key",),
            "sku": ("sku",), "order_id": ("order_id",), "customer_id": ("customer_id",), "company_id": ("company_id",),
            "contact_id": ("contact_id",), "deal_id": ("deal_id",), "username": ("username",)}
# which vocabulary slot a bare "id" belongs to, by the list it appears in
_ID_CONTAINERS = {"issues": "issue_id", "orders": "order_id", "customers": "customer_id", "companies": "company_id",
                  "contacts": "contact_id", "deals": "deal_id"}


class McpActions:
    """The episode's action vocabulary (behaviour.DomainActions): tools plus ids seen so far."""

    done_action = "submit"

    def __init__(self, task: Task) -> None:
        self.app = task.setup["app"]
        self.module = app_module(self.app)
        self.solution = list(task.solution)
        self.values: dict[str, list[Any]] = {k: list(v) for k, v in task.setup.get("entities", {}).items()}

    def pick(self, slot: str, rng: random.Random) -> Any:
        pool = self.values.get(slot) or [1]
        return rng.choice(pool[-12:])

    def _learn(self, slot: str, value: Any) -> None:
        pool = self.values.setdefault(slot, [])
        if value not in pool and isinstance(value, (int, str)) and not isinstance(value, bool):
            pool.append(value)

    def observe(self, observation: str) -> None:
        try:
            data = json.loads(observation)
        except ValueError:
            return
        self._walk(data.get("result") if isinstance(data, dict) else None, None)

    def _walk(self, node: Any, container: str | None) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "id" and container in _ID_CONTAINERS:
                    self._learn(_ID_CONTAINERS[container], value)
                for slot in _ID_KEYS.get(key, ()):
                    self._learn(slot, value)
                if isinstance(value, (dict, list)):
                    self._walk(value, key)
        elif isinstance(node, list):
            for item in node:
                self._walk(item, container)

    @staticmethod
    def _call(tool: str, arguments: dict[str, Any]) -> str:
        return json.dumps({"tool": tool, "arguments": arguments}, sort_keys=True)

    def inspect(self, rng: random.Random) -> str:
        return self._call(*self.module.inspect(self, rng))

    def explore(self, rng: random.Random) -> str:
        return self._call(*self.module.explore(self, rng))

    def mistake(self, rng: random.Random) -> str:
        kind = rng.random()
        if kind < 0.55:
            return self._call(*self.module.mistake(self, rng))
        tool, args = self.module.explore(self, rng)
        if kind < 0.65:  # a tool that does not exist (typo or invented)
            return self._call(rng.choice((tool[:-1], tool.replace("_", ""), "delete_everything", "get_" + self.app)), args)
        if kind < 0.75:  # malformed JSON
            text = self._call(tool, args)
            return rng.choice((text[:-1], text.replace('"', "'"), f"{tool}({json.dumps(args)})", tool))
        if kind < 0.85:  # wrong argument types
            bad = {k: rng.choice(("abc", [v], {"value": v}, None, 3.5)) for k, v in args.items()} or {"x": 1}
            return self._call(tool, bad)
        if kind < 0.92:  # hostile strings (SQL injection, huge input) in a text argument
            hostile = rng.choice(("'; DROP TABLE issues; --", "1 OR 1=1", "x" * 5000, "\"); DELETE FROM orders; --"))
            query_tool = {"tracker": "search_issues", "crm": "search_contacts", "shop": "search_customers"}[self.app]
            return self._call(query_tool, {"query": hostile})
        return json.dumps({"tool": tool, "arguments": rng.choice((["positional"], "text", 42))})

    def reply(self, observation: str, rng: random.Random, policy: str) -> str | None:
        return None  # tools never wait for an answer


def mcp_policy(name: str, task: Task) -> Policy:
    """A fresh behaviour policy (scripted, exploratory, erroneous) for one episode of `task`."""
    return behaviour_policy(name, task, McpActions)

