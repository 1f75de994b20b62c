"""Running a stage of a DAG run with DVC in the run's workspace (or a phase of agent training
in a process of its own), saving the run as a DVC experiment; the gate after a training stage."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
from typing import Any

from agentworld.tracking.runs import PARENT_RUN_ENV, SUMMARY_ENV, project_root
from agentworld_dags import workspace
from agentworld_dags.runs import RunRefused, run_params, run_params_path, run_root


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the task process dies (Linux), so no stage outlives its task."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def run_cli(args: list[str], ok: tuple[int, ...] = (0,)) -> int:
    """`python -m agentworld.cli ARGS` in a process of its own (an agent phase, not a DVC stage);
    its output goes to the task log; returns its exit status when it is one of `ok`. Exit status 2
    is a settings error (not retried); others retry."""
    argv = [sys.executable, "-m", "agentworld.cli", *args]
    env = {**os.environ, "AGENTWORLD_HOME": str(project_root())}
    print("running:", " ".join(argv), flush=True)
    done = subprocess.run(argv, cwd=project_root(), env=env, preexec_fn=_die_with_parent)
    what = " ".join(args[:2])
    if done.returncode == 2:
        raise RunRefused(f"`agentworld {what}` refused its settings (exit status 2); the reason is in the log above")
    if done.returncode not in ok:
        raise RuntimeError(f"`agentworld {what}` failed with exit status {done.returncode}; see the log above")
    return done.returncode


#: The dvc.yaml stage that plays a per-domain stage's part for a recorded system.
RECORDED_STAGES = {"collect": "record", "validate": "validate_recording"}


def run_stage(stage: str, run_id: str, parent_run_id: str, domains: list[str] | None = None) -> dict[str, Any]:
    """Reproduce one stage with DVC in the DAG run's workspace (its params.yaml holds the run's
    settings); returns the stage's summary. A per-domain stage runs one target per domain
    (`collect@terminal`). With `distributed.compute: cluster` the stage command itself starts the
    multi-node launcher, as it does under `dvc repro` in the project."""
    root = run_root(run_id)
    summary = root / "reports" / "airflow" / f"{stage}{''.join('-' + d for d in domains or [])}.json"
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.unlink(missing_ok=True)
    env = {SUMMARY_ENV: str(summary)}
    if parent_run_id:
        env[PARENT_RUN_ENV] = parent_run_id
    env = workspace.stage_env(root, project_root(), workspace.experiment_name(root), env)
    recorded = run_params(run_id).recordings
    for target in [f"{RECORDED_STAGES.get(stage, stage) if d in recorded else stage}@{d}" for d in domains] \
            if domains else [stage]:
        status = workspace.repro(root, target, env, preexec_fn=_die_with_parent)
        if status != 0:
            raise RuntimeError(f"`dvc repro {target}` in {root} failed with exit status {status}; see the log above")
    if not summary.exists():
        raise RunRefused(f"{summary}: stage {stage} left no summary")
    return json.loads(summary.read_text())


def save_experiment(run_id: str) -> dict[str, Any]:
    """Save the DAG run's workspace as a DVC experiment of the project (`dvc exp show` lists it)."""
    root = run_root(run_id)
    name = workspace.experiment_name(root)
    return {"experiment": name, "workspace": str(root), "stages": workspace.save(root, name)}


def plan_domains(run_id: str) -> tuple[list[str], dict[str, str]]:
    """The run's selected domains that can run here (and its recorded systems), and the reason
    for each one that cannot."""
    from agentworld.domains import list_envs

    params = run_params(run_id)
    status = {env.name: env for env in list_envs()}
    runnable = [d for d in params.collect.domains if d in status and status[d].available]
    skipped = {d: status[d].reason if d in status else "not registered" for d in params.collect.domains
               if d not in runnable}
    return runnable + list(params.recordings), skipped  # a recording is its own data: it always runs


def gate_stage(stage: str, run_id: str) -> str:
    """Raise GateFailed unless the stage's held-out metric is finite and within `gate.<stage>`."""
    from agentworld.training.gates import enforce_gate

    report = json.loads((run_root(run_id) / "reports" / "train" / f"{stage}.json").read_text())
    return enforce_gate(stage, report, run_params(run_id).gate)


def agent_phase(phase: str, run_id: str, agent_run_id: str | None = None) -> dict[str, Any]:
    """One phase of `agentworld agent train` (start, train, evaluate) for the DAG run, in its own
    process; checkpoints and episodes go under the run's workspace, data and MLflow are the project's."""
    out = run_root(run_id) / "agent"
    summary = run_root(run_id) / "reports" / "airflow" / f"agent-{phase}.json"
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.unlink(missing_ok=True)
    args = ["agent", "train", "--phase", phase, "--params", str(run_params_path(run_id)), "--out", str(out),
            "--summary", str(summary), "--tag", f"airflow_run_id={run_id}"]
    if agent_run_id:
        args += ["--run-id", agent_run_id]
    run_cli(args)
    return json.loads(summary.read_text())



def agent_test(suite: str, agent: str, run_id: str) -> dict[str, Any]:
    """`agentworld agent test SUITE --agent AGENT` in a process of its own; the report lands in
    runs/agent_regression/<run>/ and the verdict on the agent's registry version (the command
    records it). A failed test (exit status 1) is a verdict, not a flake: it fails the task once,
    naming the failed cases; a refused setting (exit status 2) too; anything else is retried."""
    from airflow.sdk.exceptions import AirflowFailException

    from agentworld_dags.runs import run_folder

    out = project_root() / "runs" / "agent_regression" / run_folder(run_id)
    status = run_cli(["agent", "test", suite, "--agent", agent, "--out", str(out), "--tag", f"airflow_run_id={run_id}"],
                     ok=(0, 1))
    report = json.loads((out / "report.json").read_text())
    if status == 1:
        failed = [case["name"] for case in report["cases"] if not case["passed"] or case["regressions"]]
        raise AirflowFailException(f"agent {agent} failed suite {report['suite']}: cases {', '.join(failed)} "
                                   f"(report: {out / 'report.md'})")
    return {"suite": report["suite"], "agent": agent, "passed": True, "report": str(out / "report.md")}
