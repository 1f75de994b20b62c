"""Running a stage (or a phase of agent training) of a DAG run in a process of its own, with
the run's settings and workspace; the gate after a training stage."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
from typing import Any

from agentworld.tracking.runs import PARENT_RUN_ENV, project_root
from agentworld_dags.runs import RunRefused, run_params, run_params_path, run_root


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the task process dies (Linux), so no stage outlives its task."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def run_cli(args: list[str], parent_run_id: str | None, *, argv: list[str] | None = None) -> None:
    """`python -m agentworld.cli ARGS` (or the launcher's `argv`) in a process of its own; its
    output goes to the task log. Exit status 2 is a settings error (not retried); others retry."""
    argv = argv or [sys.executable, "-m", "agentworld.cli", *args]
    env = {**os.environ, "AGENTWORLD_HOME": str(project_root())}
    if parent_run_id:
        env[PARENT_RUN_ENV] = parent_run_id
    print("running:", " ".join(argv), flush=True)
    done = subprocess.run(argv, cwd=project_root(), env=env, preexec_fn=_die_with_parent)
    what = " ".join(args[:2])
    if done.returncode == 2:
        raise RunRefused(f"`agentworld {what}` refused its settings (exit status 2); the reason is in the log above")
    if done.returncode != 0:
        raise RuntimeError(f"`agentworld {what}` failed with exit status {done.returncode}; see the log above")


def run_stage(stage: str, run_id: str, parent_run_id: str, domains: list[str] | None = None) -> dict[str, Any]:
    """Run one stage in the DAG run's workspace, with the run's settings; returns its summary.

    With `distributed.compute: cluster`, training stages go through the multi-node launcher
    (deepspeed / accelerate launch) and their summary is the stage's training report.
    """
    from stages import TRAINING_STAGES

    root, params = run_root(run_id), run_params(run_id)
    args = ["stage", stage, "--params", str(run_params_path(run_id)), "--root", str(root)]
    args += [flag for d in (domains or []) for flag in ("--domain", d)]
    if stage in TRAINING_STAGES and params.distributed.compute == "cluster":
        from agentworld.training.distributed import deepspeed_config, launch_command, write_deepspeed_config

        config = write_deepspeed_config(root / "deepspeed" / f"{stage}.json",
                                        deepspeed_config(params.distributed, getattr(params, stage)))
        run_cli(args, parent_run_id, argv=launch_command(params.distributed, args, deepspeed_config_path=config))
        return json.loads((root / "reports" / "train" / f"{stage}.json").read_text())
    summary = root / "reports" / "airflow" / f"{stage}{''.join('-' + d for d in domains or [])}.json"
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.unlink(missing_ok=True)
    run_cli(args + ["--summary", str(summary)], parent_run_id)
    return json.loads(summary.read_text())


def plan_domains(run_id: str) -> tuple[list[str], dict[str, str]]:
    """The run's selected domains that can run here, and the reason for each one that cannot."""
    from agentworld.domains import list_envs

    selected = run_params(run_id).collect.domains
    status = {env.name: env for env in list_envs()}
    runnable = [d for d in selected if d in status and status[d].available]
    skipped = {d: status[d].reason if d in status else "not registered" for d in selected if d not in runnable}
    return runnable, skipped


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
    run_cli(args, None)
    return json.loads(summary.read_text())

