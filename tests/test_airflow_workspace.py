"""A DAG run's workspace: a git worktree of the project that carries the checkout's uncommitted
changes and shares its DVC cache (the runs themselves: test_airflow_scheduler.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentworld_dags.workspace import WorkspaceError, create_workspace, experiment_name
from tests.airflow_stack import clone_project


def test_workspace_is_a_worktree_with_the_checkouts_changes_and_its_dvc_cache(tmp_path):
    project = tmp_path / "project"
    clone_project(project)
    (project / "params.yaml").write_text((project / "params.yaml").read_text() + "\n# edited, not committed\n")
    root = project / "runs" / "airflow" / "manual__2026-01-01T00_00_00_00_00"
    create_workspace(project, root)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True, text=True).stdout
    assert subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout == head
    assert (root / "params.yaml").read_text().endswith("# edited, not committed\n")
    cache = subprocess.run([sys.executable, "-m", "dvc", "cache", "dir"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.strip()
    assert cache == str((project / ".dvc" / "cache").resolve())
    # The project's own pipeline does not see the run's dvc.yaml (a nested repository).
    stages = subprocess.run([sys.executable, "-m", "dvc", "stage", "list", "--name-only"], cwd=project,
                            capture_output=True, text=True, check=True).stdout.split()
    assert "build" in stages and not any("runs/airflow" in s for s in stages)
    create_workspace(project, root)  # a retried first task keeps the workspace
    assert (root / "params.yaml").read_text().endswith("# edited, not committed\n")
    assert experiment_name(root) == "airflow-manual__2026-01-01T00_00_00_00_00"


def test_a_project_that_is_not_a_git_dvc_checkout_is_refused_with_the_fix(tmp_path):
    with pytest.raises(WorkspaceError, match="not a git\\+DVC checkout.*AGENTWORLD_HOME"):
        create_workspace(tmp_path, tmp_path / "runs" / "airflow" / "r1")


def test_a_workspace_that_fails_half_way_is_removed_so_a_retry_starts_afresh(tmp_path, monkeypatch):
    from agentworld_dags import workspace

    project = tmp_path / "project"
    clone_project(project)
    (project / "params.yaml").write_text((project / "params.yaml").read_text() + "\n# edited\n")
    root = project / "runs" / "airflow" / "r1"
    monkeypatch.setattr(workspace, "_dvc", lambda: [sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(subprocess.CalledProcessError):
        create_workspace(project, root)
    assert not root.exists()
    monkeypatch.undo()
    create_workspace(project, root)
    assert (root / "params.yaml").read_text().endswith("# edited\n")


def test_a_recording_runs_as_its_own_dvc_stages_in_a_dag_runs_workspace(tmp_path, monkeypatch, mlflow_store):
    """A recorded system declared in params.yaml goes through a DAG run as record@NAME and
    validate_recording@NAME, reproduced by DVC in the run's workspace, which gets the recording."""
    import json

    import yaml

    from agentworld.data.recording.openai_chat import import_openai_chat
    from agentworld_dags.launch import plan_domains, run_stage
    from agentworld_dags.runs import resolve_run, run_root
    from tests.test_recording_import import GOOD_A, GOOD_B

    project = tmp_path / "project"
    clone_project(project)
    log = tmp_path / "agent.jsonl"
    log.write_text(json.dumps(GOOD_A) + "\n" + json.dumps(GOOD_B) + "\n")
    import_openai_chat(log, "billing", project / "data" / "recordings" / "billing")
    params_file = project / "params.yaml"
    declared = "recordings: {billing: data/recordings/billing}"
    params_file.write_text(params_file.read_text().replace("recordings: {}", declared))
    monkeypatch.setenv("AGENTWORLD_HOME", str(project))
    run_id = "manual__recorded"
    assert resolve_run({}, run_id).recordings == {"billing": "data/recordings/billing"}
    runnable, _ = plan_domains(run_id)
    assert runnable[-1] == "billing"
    run_stage("collect", run_id, "", domains=["billing"])
    summary = run_stage("validate", run_id, "", domains=["billing"])
    assert summary["domains"]["billing"]["clean"] == 3
    root = run_root(run_id)
    assert len((root / "data" / "clean" / "billing.jsonl").read_text().splitlines()) == 3
    lock = yaml.safe_load((root / "dvc.lock").read_text())["stages"]
    assert {"record@billing", "validate_recording@billing"} <= set(lock)
