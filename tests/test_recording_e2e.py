"""Bring your own MCP server, end to end: a scripted agent's sessions with `mcp-server-git` (from
PyPI) are recorded through the proxy; the recording, declared in `recordings:`, goes through the
normal stages (collect, validate with the MCP shape rules, build, tokenizer, SFT of a tiny world
model); `agentworld serve mcp` then answers the same client code with the same server identity and
tool list: replayed sessions from the recording's cache exactly as the real server answered,
new calls from the world model as well-formed MCP results, bad arguments and unknown tools refused
as the real server refuses them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import StdioServerParameters, stdio_client

import stages.build
import stages.collect
import stages.sft
import stages.tokenizer
import stages.validate
from agentworld.data.corpora import build_corpora
from agentworld.data.io import write_jsonl
from agentworld.data.recording.redact import Redactor
from stages.paths import StagePaths
from tests.helpers import make_transitions
from tests.test_recording_mcp import (
    ARGUMENT_SECRET,
    CONTENT_SECRET,
    GIT_SERVER,
    calls,
    client_run,
    make_repo,
    proxy_params,
)

pytestmark = pytest.mark.skipif(GIT_SERVER is None, reason="mcp-server-git is installed by `make setup`")
SESSIONS = 4


def serve_params(root: Path, model: Path, report: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentworld.cli", "serve", "mcp", "--name", "git", "--recording",
              str(root / "data" / "recordings" / "git"), "--model", str(model), "--max-new-tokens", "48",
              "--report", str(report)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, cwd=str(root))


def test_record_train_and_serve_a_third_party_mcp_server(tmp_path, smoke_params, mlflow_store):
    root = tmp_path / "ws"
    recording = root / "data" / "recordings" / "git"
    repo = make_repo(tmp_path / "repo")  # recorded sessions and served sessions use the same path
    real = [anyio.run(client_run, stdio_client(proxy_params(repo, recording)), repo) for _ in range(SESSIONS)]
    # (each session changes the repository: the first stages config.env, the rest find it staged)

    params = smoke_params.model_copy(update={"recordings": {"git": "data/recordings/git"},
                                             "sft": smoke_params.sft.model_copy(update={"init": "scratch",
                                                                                        "max_steps": 8})})
    paths = StagePaths(root)
    write_jsonl(paths.clean("terminal"), make_transitions(episodes=40))
    collected = stages.collect.run(params, root, domains=["git"])["domains"]["git"]
    assert collected["transitions"] == SESSIONS * len(calls(repo)) and collected["episodes"] == SESSIONS
    report = stages.validate.run(params, root, domains=["git"])["domains"]["git"]
    assert report["rejected"] == 0 and report["clean"] == SESSIONS * len(calls(repo))  # the MCP shape rules hold
    stages.build.run(params, root)
    built = [json.loads(line) for path in (paths.sft_train, paths.sft_test) for line in path.open()]
    git_examples = [e for e in built if e.get("domain") == "git"]
    assert git_examples and all("MCP server 'mcp-git'" in json.dumps(e) for e in git_examples)
    subprocess.run([sys.executable, "-m", "dvc", "init", "--no-scm", "-q"], cwd=root, check=True)
    # The recording versioned with DVC, as a user would.
    subprocess.run([sys.executable, "-m", "dvc", "add", "-q", "data/recordings/git"], cwd=root, check=True)
    build_corpora(paths.corpora, params.corpora.sources)
    stages.tokenizer.run(params, root)
    stages.sft.run(params, root)

    # No secret the sessions carried is in any file written: recording, DVC cache, datasets,
    # models, the MLflow store and its artifacts (everything but the real repository itself).
    written = [p for p in tmp_path.rglob("*") if p.is_file() and repo not in p.parents]
    assert any(".dvc/cache" in str(p) for p in written) and any("artifacts" in p.parts for p in written)
    leaks = [str(p) for p in written for secret in (ARGUMENT_SECRET, CONTENT_SECRET)
             if secret.encode() in p.read_bytes()]
    assert leaks == []

    served_report = tmp_path / "served.json"
    served = anyio.run(client_run, stdio_client(serve_params(root, paths.stage_model("sft"), served_report)), repo)
    # Same identity and tools; a session that replays a recorded one gets the real answers (with
    # the secrets they carried redacted, as recorded).
    assert served["server"] == real[1]["server"] and served["tools"] == real[1]["tools"]
    assert served["answers"] == Redactor().value(real[0]["answers"])
    assert served["answers"][3] != real[0]["answers"][3] and served["answers"][:3] == real[0]["answers"][:3]

    novel = [("git_log", {"repo_path": str(repo), "max_count": 3}),  # never recorded: the world model
             ("git_status", {"repo_path": 42}),  # breaks the input schema: refused
             ("git_push", {"repo_path": str(repo)})]  # unknown tool: the real server's JSON-RPC error
    answers = anyio.run(_calls, serve_params(root, paths.stage_model("sft"), served_report), novel)
    generated, refused, unknown = answers
    assert "result" in generated and isinstance(generated["result"]["content"][0]["text"], str)
    assert refused["result"]["isError"] and "repo_path" in refused["result"]["content"][0]["text"]
    assert unknown == real[0]["answers"][-1]
    counts = json.loads(served_report.read_text())
    assert counts["calls"] == 3 and counts["refused"] == 2 and counts["model"] + counts["malformed"] == 1


async def _calls(params: StdioServerParameters, plan: list[tuple[str, dict]]) -> list[dict]:
    from mcp import ClientSession
    from mcp.shared.exceptions import MCPError

    out = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for name, arguments in plan:
                try:
                    result = await session.call_tool(name, arguments)
                    out.append({"result": result.model_dump(mode="json", by_alias=True, exclude_none=True)})
                except MCPError as error:
                    out.append({"error": [error.code, error.message]})
    return out


def test_serve_mcp_refuses_a_missing_recording_naming_it(tmp_path):
    done = subprocess.run([sys.executable, "-m", "agentworld.cli", "serve", "mcp", "--name", "nothing",
                           "--recording", str(tmp_path / "nothing"), "--model", "none"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 2 and f"{tmp_path / 'nothing' / 'description.json'}: no such file" in done.stderr


def test_a_recording_may_not_take_a_built_in_domain_name(smoke_params):
    from agentworld.config import ParamsError, parse_params

    raw = smoke_params.model_dump(mode="json", by_alias=True)
    with pytest.raises(ParamsError, match="recordings.terminal: the name of a built-in domain"):
        parse_params({**raw, "recordings": {"terminal": "data/recordings/terminal"}})
    with pytest.raises(ParamsError, match="recordings.a b: use letters"):
        parse_params({**raw, "recordings": {"a b": "data/recordings/x"}})
    assert parse_params({**raw, "recordings": {"crm": "data/recordings/crm"}}).dataset_domains[-1] == "crm"


def test_controls_turn_the_recordings_cache_off_and_bad_calls_are_refused_first(tmp_path):
    """With a control set, replayed reality would ignore it: every call goes to the world model
    (here none is served, so a recorded call is not answered from the recording either)."""
    from agentworld.data.recording.recording import Recording
    from agentworld.data.recording.store import RecordingWriter
    from agentworld.simulation.env import Control
    from agentworld.simulation.mcp_server import SimulatedServer

    writer = RecordingWriter(tmp_path / "rec", "notes", recorder="mcp-proxy", provenance={})
    schema = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    writer.describe({"kind": "mcp", "server": {"name": "notes", "version": "1"}, "tools": [
        {"name": "get_note", "description": "a note by id", "inputSchema": schema}]})
    trajectory = writer.trajectory_id(0)
    writer.record(trajectory, action={"tool": "get_note", "arguments": {"id": 1}},
                  observation={"isError": False, "result": {"text": "hello"}})
    recording = Recording.load(tmp_path / "rec")

    plain = SimulatedServer(recording, None)
    answer, _ = anyio.run(plain.answer, [], "get_note", {"id": 1})
    assert answer.structured_content is None and json.loads(answer.content[0].text) == {"text": "hello"}
    refused, _ = anyio.run(plain.answer, [], "get_note", {"id": "one"})
    assert refused.is_error and "invalid arguments: id: 'one' is not of type 'integer'" in refused.content[0].text
    steered = SimulatedServer(recording, None, control=Control(faults=("rate limits",), fault_rate=0.3))
    unanswered, _ = anyio.run(steered.answer, [], "get_note", {"id": 1})
    assert steered.cache is None and unanswered.is_error and "world model error" in unanswered.content[0].text
    assert plain.report()["cache"] == 1 and plain.report()["refused"] == 1 and steered.report()["unanswered"] == 1
