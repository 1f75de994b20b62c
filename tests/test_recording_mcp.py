"""The MCP recording proxy in front of a third-party MCP server from PyPI (`mcp-server-git`, over
a local repository): the same client code talks to the server directly and through the proxy and
gets the same tool list, results and errors; the recording is valid trajectory rows, one
trajectory per client session, with the secrets the calls carried redacted in every file."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agentworld.data.io import read_transitions
from agentworld.data.recording.redact import Redactor
from agentworld.data.recording.store import DESCRIPTION_FILE, TRAJECTORIES_FILE
from tests.helpers import running

GIT_SERVER = shutil.which("mcp-server-git", path=str(Path(sys.executable).parent))
pytestmark = pytest.mark.skipif(GIT_SERVER is None, reason="mcp-server-git is installed by `make setup`")

ARGUMENT_SECRET = "sk-proj-Zq3xLw9PvN2mK8rT5yB1"  # a token the agent passes in a call
CONTENT_SECRET = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a token the real server answers with
GIT_ENV = {"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "Test",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def make_repo(path: Path) -> Path:
    """The same repository, byte for byte, wherever it is made (fixed author and dates)."""
    path.mkdir(parents=True)
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    (path / "README.md").write_text("hello\n")
    subprocess.run(["git", "-C", str(path), "add", "README.md"], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", "first"], check=True, env=env)
    (path / "config.env").write_text(f"GITHUB_TOKEN={CONTENT_SECRET}\n")
    return path


def calls(repo: Path) -> list[tuple[str, dict[str, Any]]]:
    r = str(repo)
    return [
        ("git_status", {"repo_path": r}),
        ("git_log", {"repo_path": r, "max_count": 1}),
        ("git_add", {"repo_path": r, "files": ["config.env"]}),
        ("git_diff_staged", {"repo_path": r}),  # shows the file, secret included
        ("git_diff", {"repo_path": r, "target": ARGUMENT_SECRET}),  # no such revision: a tool error
        ("git_status", {"repo_path": "/nonexistent/repo"}),  # outside the allowed repository
        ("git_push", {"repo_path": r}),  # no such tool: a protocol error
    ]


async def client_run(streams_cm: Any, repo: Path) -> dict[str, Any]:
    """What an agent sees: server identity, tools, and each call's result or error."""
    async with streams_cm as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            answers = []
            for name, arguments in calls(repo):
                try:
                    result = await session.call_tool(name, arguments)
                    answers.append({"result": result.model_dump(mode="json", by_alias=True, exclude_none=True)})
                except MCPError as error:
                    answers.append({"error": [error.code, error.message]})
    text = json.dumps({"server": [init.server_info.name, init.server_info.version], "instructions": init.instructions,
                       "tools": [t.model_dump(mode="json", exclude_none=True) for t in tools.tools],
                       "answers": answers})
    return json.loads(text.replace(str(repo), "<repo>"))


def server_params(repo: Path) -> StdioServerParameters:
    return StdioServerParameters(command=GIT_SERVER, args=["--repository", str(repo)])


def proxy_params(repo: Path, out: Path, name: str = "git") -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentworld.cli", "record", "mcp", "--name", name, "--out", str(out), "--",
              GIT_SERVER, "--repository", str(repo)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def all_text(directory: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in directory.rglob("*") if p.is_file())


def test_proxy_is_transparent_and_records_every_call_redacted(tmp_path: Path) -> None:
    direct = anyio.run(client_run, stdio_client(server_params(make_repo(tmp_path / "a" / "repo"))),
                       tmp_path / "a" / "repo")
    out = tmp_path / "recording"
    repo = make_repo(tmp_path / "b" / "repo")
    proxied = anyio.run(client_run, stdio_client(proxy_params(repo, out)), repo)

    # The agent cannot tell them apart: identity, tool list, results, tool errors, protocol errors.
    assert proxied == direct
    kinds = [next(iter(a)) for a in direct["answers"]]
    assert kinds == ["result"] * 6 + ["error"]
    assert direct["answers"][4]["result"]["isError"] and direct["answers"][5]["result"]["isError"]
    assert CONTENT_SECRET in json.dumps(direct["answers"][3])  # the real server did show the secret

    description = json.loads((out / DESCRIPTION_FILE).read_text())
    assert description["server"]["name"] == direct["server"][0]
    assert [t["name"] for t in description["tools"]] == [t["name"] for t in direct["tools"]]
    assert all("inputSchema" in t for t in description["tools"])

    rows = read_transitions(out / TRAJECTORIES_FILE)  # the trajectory schema, row by row
    assert len(rows) == len(calls(repo)) and len({r.trajectory_id for r in rows}) == 1
    assert [r.turn for r in rows] == list(range(len(rows)))
    assert all(r.source == "real" and r.domain == "git" and r.info["recorder"] == "mcp-proxy" for r in rows)
    assert rows[0].env_version == rows[-1].info["description_sha256"][:12]
    assert json.loads(rows[0].action) == {"tool": "git_status", "arguments": {"repo_path": str(repo)}}
    assert json.loads(rows[0].observation)["isError"] is False
    assert "On branch main" in json.loads(rows[0].observation)["result"]
    assert json.loads(rows[5].observation)["isError"] is True
    assert json.loads(rows[6].observation) == {"isError": True, "code": direct["answers"][6]["error"][0],
                                               "error": direct["answers"][6]["error"][1]}

    # Secrets in the agent's arguments and in the server's answers never reach the disk.
    text = all_text(out)
    assert ARGUMENT_SECRET not in text and CONTENT_SECRET not in text
    assert "<REDACTED:api_key>" in rows[4].action and "<REDACTED:github_token>" in rows[3].observation


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_http_proxy_groups_calls_by_client_session_and_serve_mcp_replays_them_over_http(tmp_path: Path) -> None:
    repo, out, port, sim_port = make_repo(tmp_path / "repo"), tmp_path / "recording", free_port(), free_port()
    proxy = [sys.executable, "-m", "agentworld.cli", "record", "mcp", "--name", "git", "--out", str(out),
             "--http", str(port), "--", GIT_SERVER, "--repository", str(repo)]
    with running(proxy, port, "the recording proxy") as base:
        first = anyio.run(client_run, streamable_http_client(f"{base}/mcp"), repo)
        second = anyio.run(client_run, streamable_http_client(f"{base}/mcp"), repo)
    assert first["tools"] == second["tools"] and len(first["answers"]) == len(calls(repo))
    rows = read_transitions(out / TRAJECTORIES_FILE)
    by_session: dict[str, list[int]] = {}
    for row in rows:
        by_session.setdefault(row.trajectory_id, []).append(row.turn)
    assert sorted(map(len, by_session.values())) == [len(calls(repo))] * 2
    assert all(turns == list(range(len(turns))) for turns in by_session.values())

    # The simulated server over streamable HTTP: a replayed session gets the recorded answers.
    serve = [sys.executable, "-m", "agentworld.cli", "serve", "mcp", "--name", "git", "--recording", str(out),
             "--model", "none", "--http", str(sim_port)]
    with running(serve, sim_port, "serve mcp") as base:
        replayed = anyio.run(client_run, streamable_http_client(f"{base}/mcp"), repo)
    assert replayed == Redactor().value(first)


def test_redactor_replaces_credentials_by_kind_and_keeps_the_rest() -> None:
    redactor = Redactor({"employee_id": r"EMP-\d{6}"})
    headers = redactor.headers({"Authorization": "Basic dXNlcjpwYXNz", "Cookie": "sid=abc", "Accept": "text/plain"})
    assert headers == {"Authorization": "<REDACTED:authorization>", "Cookie": "<REDACTED:cookie>",
                       "Accept": "text/plain"}
    value = redactor.value({"query": "EMP-123456 in https://bob:hunter22@db.internal/x?api_key=abcd1234&page=2",
                            "password": "hunter22", "nested": [{"auth": "Bearer abcdefghij.klmnop"}], "count": 3})
    assert value == {"query": "<REDACTED:employee_id> in https://bob:<REDACTED:url_password>@db.internal/x?"
                              "api_key=<REDACTED:query_secret>&page=2",
                     "password": "<REDACTED:password>", "nested": [{"auth": "Bearer <REDACTED:bearer_token>"}],
                     "count": 3}
    assert redactor.text(redactor.text("key sk-abcdefghijklmnop1234")) == "key <REDACTED:api_key>"
    with pytest.raises(ValueError, match="not a valid regex"):
        Redactor({"bad": "("})
