"""MCP domain: real MCP servers (official SDK, stdio) over seeded SQLite applications."""

from __future__ import annotations

import json
import os
import random
import sqlite3

import pytest

from agentworld.domains.mcp.env import probe

AVAILABLE, REASON = probe()
pytestmark = pytest.mark.skipif(not AVAILABLE and not os.environ.get("CI"), reason=REASON)


def act(tool: str, **arguments) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


@pytest.fixture(scope="module")
def env():
    from agentworld.domains.mcp.env import McpEnv
    environment = McpEnv()
    yield environment
    environment.close()


def _task(seed: int, app: str, kind: str | None = None):
    from agentworld.domains.mcp.tasks import generate_task
    return generate_task(seed, app, kind)


def _db(env) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{env.workdir / (env.task.setup['app'] + '.db')}?mode=ro", uri=True)


def test_sdk_not_shadowed():
    import mcp

    import agentworld.domains.mcp.client as client
    assert "site-packages" in mcp.__file__ or "dist-packages" in mcp.__file__
    assert client.ClientSession.__module__ == "mcp.client.session"


def test_reset_step_protocol_and_info_serialisable(env):
    obs, info = env.reset(seed=3)
    assert env.task is not None and env.task.domain == "mcp"
    assert env.task.instruction in obs and "Tools:" in obs and "submit_answer(" in obs
    json.dumps(info)
    obs, reward, terminated, truncated, info = env.step(env.task.solution[0])
    payload = json.loads(obs)
    assert payload["isError"] is False and "result" in payload
    assert obs == json.dumps(payload, sort_keys=True, separators=(",", ":"))
    assert reward == 0.0 and not truncated
    json.dumps(info)
    obs, reward, terminated, _, info = env.step("submit")
    assert terminated and info["ended_by_agent"] and json.loads(obs)["isError"] is False


@pytest.mark.parametrize("app", ["tracker", "crm", "shop"])
def test_scripted_solution_solves_every_task_kind(env, app):
    from agentworld.domains.mcp.apps import app_module
    for i, kind in enumerate(app_module(app).KINDS):
        task = _task(100 + i, app, kind)
        env.reset(options={"task": task})
        rewards = []
        for action in task.solution:
            obs, reward, terminated, truncated, info = env.step(action)
            assert json.loads(obs)["isError"] is False, (task.task_id, action, obs)
            rewards.append(reward)
        assert rewards[-1] == 1.0 and terminated and info["solved"], (task.task_id, rewards)
        assert sum(rewards) == 1.0


@pytest.mark.parametrize("policy_name", ["scripted", "exploratory", "erroneous"])
def test_behaviour_policies_play_real_episodes(env, policy_name):
    from agentworld.domains.mcp.env import mcp_policy
    errors = 0
    for seed in (11, 12, 13):
        obs, _ = env.reset(seed=seed)
        policy, rng, history = mcp_policy(policy_name, env.task), random.Random(seed), []
        for _ in range(8):
            action = policy.act(obs, history, rng)
            obs, reward, terminated, truncated, info = env.step(action)
            payload = json.loads(obs)  # every observation is JSON
            assert set(payload) <= {"isError", "result", "error", "truncated"} and len(obs) <= 4000
            errors += payload["isError"]
            json.dumps(info)
            history.append((action, obs))
            if terminated:
                break
        if policy_name == "scripted":
            assert terminated and info["solved"]
    if policy_name == "erroneous":
        assert errors >= 3
    if policy_name == "exploratory":
        assert errors <= 4


def test_errors_are_real_backend_errors(env):
    env.reset(options={"task": _task(7, "tracker", "reassign")})
    archived = env.task.setup["entities"]["archived_project"][0]
    cases = {
        act("get_issue", issue_id=9999): r"^Error executing tool get_issue: Not found: issue 9999 does not exist$",
        act("get_issue", issue_id="abc"): r"validation error for get_issueArguments\nissue_id\n  Input should be a valid integer",
        act("update_issue", issue_id=1, status="done"): r"Input should be 'open', 'in_progress' or 'closed'",
        act("create_issue", project_key=archived, title="x"): rf"Permission denied: project {archived} is archived",
        act("frobnicate"): r"^Unknown tool: frobnicate$",
        '{"tool": "get_issue", "arguments": {"issue_id": 1}': r"^Invalid action: not a JSON object \(Expecting",
        '{"tool": "get_issue", "arguments": [1]}': r"ValidationError: 1 validation error for CallToolRequestParams",
    }
    import re
    for action, pattern in cases.items():
        obs, reward, terminated, _, info = env.step(action)
        payload = json.loads(obs)
        assert payload["isError"] is True and info["is_error"] is True, (action, obs)
        assert re.search(pattern, payload["error"]), (action, payload["error"])
    for _ in range(6):
        assert json.loads(env.step(act("search_issues", query="fix"))[0])["isError"] is False
    payload = json.loads(env.step(act("search_issues", query="fix"))[0])
    assert payload["error"].endswith("Rate limit exceeded: search_issues allows 6 calls per session "
                                     "(this was call 7); retry later")
    env.reset(options={"task": _task(7, "shop", "cancel_order")})  # a fresh episode resets the limit
    shipped = env.task.setup["entities"]["shipped_order"][0]
    payload = json.loads(env.step(act("cancel_order", order_id=shipped))[0])
    assert payload["isError"] and "Permission denied: order" in payload["error"]


def test_hostile_actions_leave_database_intact(env):
    env.reset(options={"task": _task(21, "tracker", "close_with_comment")})
    with _db(env) as conn:
        before = conn.execute("SELECT COUNT(*) FROM issues").fetchone()[0]
    for query in ("'; DROP TABLE issues; --", "%' OR 1=1 --", "x\" ; DELETE FROM issues; --"):
        payload = json.loads(env.step(act("search_issues", query=query))[0])
        assert payload == {"isError": False, "result": {"issues": [], "query": query}}
    payload = json.loads(env.step(act("create_issue", project_key=env.task.setup["entities"]["project_key"][0],
                                      title="Robert'); DROP TABLE issues;--"))[0])
    if not payload["isError"]:
        assert payload["result"]["title"] == "Robert'); DROP TABLE issues;--"
    huge = json.loads(env.step(act("add_comment", issue_id=1, body="A" * 100_000))[0])
    assert huge["isError"] and "String should have at most 2000 characters" in huge["error"]
    wrong = json.loads(env.step(act("list_issues", project_key=["WEB"], limit="many"))[0])
    assert wrong["isError"] and "2 validation errors" in wrong["error"]
    with _db(env) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"issues", "comments", "projects", "users"} <= tables
        assert conn.execute("SELECT COUNT(*) FROM issues").fetchone()[0] in (before, before + 1)


def test_same_seed_same_observations(env):
    from agentworld.domains.mcp.env import mcp_policy
    runs = []
    for _ in range(2):
        obs, info = env.reset(seed=29)
        policy, rng, trace = mcp_policy("erroneous", env.task), random.Random(5), [obs]
        for _ in range(8):
            action = policy.act(obs, [], rng)
            obs, *_ = env.step(action)
            trace.append(action + "\n" + obs)
            if env._done:
                break
        runs.append(trace)
    assert runs[0] == runs[1]


def test_close_stops_servers_and_removes_temp_dir():
    from agentworld.domains.mcp.client import _pid_alive
    from agentworld.domains.mcp.env import McpEnv
    environment = McpEnv(apps=("shop",))
    environment.reset(seed=2)
    pids, workdir = environment.server_pids(), environment.workdir
    assert pids and all(_pid_alive(pid) for pid in pids.values()) and workdir.is_dir()
    environment.close()
    assert not any(_pid_alive(pid) for pid in pids.values())
    assert not workdir.exists()
    environment.close()  # idempotent


def test_render_truncates_to_valid_json():
    from agentworld.domains.mcp.env import render
    big = {"isError": False, "result": {"issues": [{"id": i, "title": "t" * 80} for i in range(200)], "total": 200}}
    text = render(big)
    payload = json.loads(text)
    assert len(text) <= 4000 and payload["truncated"]["issues"] == 200 - len(payload["result"]["issues"])
    assert render(big) == text
    err = render({"isError": True, "error": "E" * 10_000})
    assert len(err) <= 4000 and json.loads(err)["error"].endswith("...[truncated]")
