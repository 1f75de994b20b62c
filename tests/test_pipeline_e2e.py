"""The DVC pipeline end to end on a clean copy of the project, at smoke scale:
repro, no-op re-run, metrics, params diff, push to the local remote, MLflow lineage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agentworld.profiles import write_profile
from tests.conftest import SMOKE_PARAMS, copy_project

pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    out = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, f"{' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
    return out


@pytest.fixture(scope="module")
def pipeline_copy(tmp_path_factory):
    root = copy_project(tmp_path_factory.mktemp("project"))
    write_profile(SMOKE_PARAMS, root / "params.yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "AGENTWORLD_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["AGENTWORLD_HOME"] = str(root)
    env["PYTHONPATH"] = str(root)
    first = _run(["agentworld", "pipeline"], root, env)
    return root, env, first


def test_pipeline_prints_summary_and_writes_metrics(pipeline_copy):
    root, env, first = pipeline_copy
    for line in ("transitions collected", "rows validated", "model registered", "world_model", "retrieval",
                 "Free-running over"):
        assert line in first.stdout
    metrics = json.loads(_run(["dvc", "metrics", "show", "--json"], root, env).stdout)
    flat = json.dumps(metrics)
    assert "eval_metrics.json" in flat and "exact_match" in flat


def test_second_repro_is_a_no_op(pipeline_copy):
    root, env, _ = pipeline_copy
    lock_before = (root / "dvc.lock").read_text()
    again = _run(["dvc", "repro"], root, env)
    assert "Data and pipelines are up to date" in again.stdout
    assert "Running stage" not in again.stdout
    assert (root / "dvc.lock").read_text() == lock_before


def test_params_diff_and_push(pipeline_copy):
    root, env, _ = pipeline_copy
    _run(["git", "add", "-A"], root, env)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "pipeline run"], root, env)
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["sft"]["max_steps"] = 99
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    diff = _run(["dvc", "params", "diff", "--json"], root, env)
    change = json.loads(diff.stdout)["params.yaml"]["sft.max_steps"]
    assert (change["old"], change["new"]) == (6, 99)
    status = _run(["dvc", "status", "--cloud", "--json"], root, env)
    assert json.loads(status.stdout or "{}") == {}, "outputs were not pushed to the local remote"
    assert any((root / ".dvcstore").rglob("*")), "local remote is empty"


def test_mlflow_groups_stage_runs_and_registers_version(pipeline_copy):
    root, _, _ = pipeline_copy
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow' / 'mlruns.db'}")
    experiment = client.get_experiment_by_name("agentworld")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("agentworld.kind") == "pipeline"]
    assert parents, "no pipeline parent run"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[-1].info.run_id]
    assert {r.data.tags["stage"] for r in children} == {"collect", "validate", "corpora", "build", "tokenizer", "cpt", "sft", "rl",
                                                       "evaluate", "promote", "synthesize"}
    for run in children:
        assert run.data.tags["git_commit"] != "unknown"
    versions = {v: client.get_model_version("agentworld-world-model", v) for v in ("1", "2", "3")}
    assert [versions[v].tags["stage"] for v in ("1", "2", "3")] == ["cpt", "sft", "rl"]
    assert [versions[v].tags["parent_version"] for v in ("1", "2", "3")] == ["none", "1", "2"]
    assert all(v.tags["domain"] == "terminal" for v in versions.values())
    assert "eval.exact_match" in versions["3"].tags and "eval.judge_overall" in versions["3"].tags
    # champion only if it beats every baseline on the same records (promote.beat_baselines)
    systems = json.loads((root / "reports" / "eval" / "summary.json").read_text())["systems"]
    beats = all(systems["world_model"]["all"]["judge_overall"] > systems[b]["all"]["judge_overall"]
                for b in ("retrieval", "copy_previous", "untrained"))
    assert versions["3"].tags["promotion"] == ("promoted" if beats else "refused"), versions["3"].tags["promotion_reason"]
    assert ("champion" in versions["3"].aliases) == beats
    if not beats:
        assert "does not beat the baselines" in versions["3"].tags["promotion_reason"]
    assert "world_model.all.exact_match" in parents[-1].data.metrics
