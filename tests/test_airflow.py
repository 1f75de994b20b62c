"""Airflow: every DAG imports cleanly, and agentworld_pipeline runs end to end at smoke scale.

Airflow reads AIRFLOW_HOME when it is first imported, so each check runs in its own
process with its own metadata DB, MLflow store and workspace.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT, SMOKE_PARAMS


@pytest.fixture()
def airflow_env(tmp_path) -> dict[str, str]:
    home = tmp_path / "airflow"
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    shutil.copy(SMOKE_PARAMS, workspace / "params.yaml")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AGENTWORLD_HOME": str(workspace),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlruns.db'}",
        "AGENTWORLD_ARTIFACT_ROOT": (tmp_path / "artifacts").as_uri(),
        "PYTHONPATH": str(PROJECT),
    }
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, check=True, capture_output=True)
    return env


def _python(code: str, env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)


def test_dagbag_has_no_import_errors(airflow_env):
    out = _python(
        "import json; from airflow.models.dagbag import DagBag;"
        "b = DagBag(); print(json.dumps({'errors': {k: str(v) for k, v in b.import_errors.items()}, 'dags': sorted(b.dags)}))",
        airflow_env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["errors"] == {}
    assert {"agentworld_pipeline", "collect_and_validate", "world_model_training", "nightly_retrain",
            "synthetic_trajectories", "agent_rl"} <= set(result["dags"])


def test_nightly_retrain_cron_is_off_in_the_demo_and_on_in_production(airflow_env):
    """The cron comes from params.yaml: none in the demo profile, `schedule.cron` in production."""
    workspace = Path(airflow_env["AGENTWORLD_HOME"])
    code = ("import json; from airflow.models.dagbag import DagBag;"
            "d = DagBag().dags['nightly_retrain']; print(json.dumps({'schedule': getattr(d.timetable, 'expression', None)}))")
    shutil.copy(PROJECT / "params.yaml", workspace / "params.yaml")
    demo = _python(code, airflow_env)
    shutil.copy(PROJECT / "profiles" / "production.yaml", workspace / "params.yaml")
    production = _python(code, airflow_env)
    assert demo.returncode == 0 and production.returncode == 0, demo.stderr[-3000:] + production.stderr[-3000:]
    assert json.loads(demo.stdout.strip().splitlines()[-1])["schedule"] is None
    assert json.loads(production.stdout.strip().splitlines()[-1])["schedule"] == "0 2 * * *"


@pytest.mark.slow
def test_pipeline_dag_runs_end_to_end(airflow_env, tmp_path):
    conf = {"episodes_per_domain": 16, "sft_steps": 8, "eval_examples": 4}
    out = _python(
        "import json, sys; from airflow.models.dagbag import DagBag;"
        "dag = DagBag().dags['agentworld_pipeline'];"
        f"run = dag.test(run_conf={conf!r});"
        "states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()};"
        "print(json.dumps({'state': str(run.state), 'tasks': states}))",
        airflow_env,
    )
    assert out.returncode == 0, out.stderr[-5000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["state"] == "success", result
    assert set(result["tasks"]) == {"start", "collect", "validate", "corpora", "build", "cpt", "sft", "rl", "evaluate",
                                    "promote"}
    runs = list((Path(airflow_env["AGENTWORLD_HOME"]) / "runs" / "airflow").iterdir())
    assert len(runs) == 1
    metrics = json.loads((runs[0] / "reports" / "eval_metrics.json").read_text())
    assert metrics["examples"] == 4  # the trigger-form Param reached the stage
    assert json.loads((runs[0] / "reports" / "train" / "sft.json").read_text())["global_step"] == 8
    collected = json.loads((runs[0] / "reports" / "collect" / "terminal.json").read_text())
    assert collected["episodes"] == 16


@pytest.mark.slow
def test_collect_and_validate_maps_domains_and_publishes_assets(airflow_env):
    conf = {"domains": ["terminal", "android"], "episodes_per_domain": 6, "max_steps": 3}
    out = _python(
        "import json; from airflow.models.dagbag import DagBag;"
        "from airflow.models.asset import AssetEvent, AssetModel;"
        "from airflow.utils.session import create_session;"
        "dag = DagBag().dags['collect_and_validate'];"
        f"run = dag.test(run_conf={conf!r});"
        "tis = [(ti.task_id, ti.map_index, str(ti.state)) for ti in run.get_task_instances()];"
        "s = create_session().__enter__();"
        "events = [(e.asset.uri, e.extra) for e in s.query(AssetEvent).all()];"
        "print(json.dumps({'state': str(run.state), 'tis': tis, 'events': events}, default=str))",
        airflow_env,
    )
    assert out.returncode == 0, out.stderr[-5000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["state"] == "success", result
    mapped = sorted((task, index) for task, index, _ in result["tis"] if task in ("collect", "validate"))
    assert mapped == [("collect", 0), ("validate", 0)]  # android is unavailable here: skipped, not faked
    events = {uri: extra for uri, extra in result["events"]}
    assert events["agentworld://datasets/validated/terminal"]["clean_rows"] > 0
    assert events["agentworld://datasets/validated-trajectories"]["domains"]["terminal"]["clean_rows"] > 0


def _dag_test(dag_id: str, conf: dict, env: dict[str, str]) -> dict:
    """`dag.test(run_conf=conf)` in a fresh process; the run's state and each task's state."""
    out = _python(
        "import json; from airflow.models.dagbag import DagBag;"
        f"dag = DagBag().dags[{dag_id!r}];"
        f"run = dag.test(run_conf={conf!r});"
        "states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()};"
        "print(json.dumps({'state': str(run.state), 'tasks': states}))",
        env,
    )
    assert out.returncode == 0, out.stderr[-5000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


TRAINING_RUN = (
    "import json; from airflow.models.dagbag import DagBag;"
    "dag = DagBag().dags['world_model_training'];"
    "run = dag.test(run_conf={conf!r});"
    "states = {{ti.task_id: str(ti.state) for ti in run.get_task_instances()}};"
    "print(json.dumps({{'state': str(run.state), 'tasks': states}}))"
)


@pytest.mark.slow
def test_world_model_training_gates_each_stage(airflow_env):
    """Scheduled on the validated Asset; by hand it trains on data/clean/. A passing run goes
    through every gate to evaluate; a gate floor the SFT model cannot meet stops the run there."""
    from agentworld.data.io import write_jsonl
    from tests.helpers import make_transitions

    workspace = Path(airflow_env["AGENTWORLD_HOME"])
    write_jsonl(workspace / "data" / "clean" / "terminal.jsonl", make_transitions(episodes=30))
    out = _python(TRAINING_RUN.format(conf={"cpt_steps": 4, "sft_steps": 4, "rl_steps": 2, "eval_examples": 4}),
                  airflow_env)
    assert out.returncode == 0, out.stderr[-5000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["state"] == "success", result
    assert set(result["tasks"]) == {"prepare", "start", "corpora", "build", "cpt", "gate_cpt", "sft", "gate_sft",
                                    "rl", "gate_rl", "evaluate", "promote"}
    run_dir = next((workspace / "runs" / "airflow").iterdir())
    assert json.loads((run_dir / "reports" / "train" / "cpt.json").read_text())["global_step"] == 4

    params = (workspace / "params.yaml").read_text().replace("sft: {max_eval_loss: 12.0}", "sft: {max_eval_loss: 0.01}")
    assert "max_eval_loss: 0.01" in params
    (workspace / "params.yaml").write_text(params)
    out = _python(TRAINING_RUN.format(conf={"cpt_steps": 2, "sft_steps": 2, "rl_steps": 1}), airflow_env)
    assert out.returncode == 0, out.stderr[-5000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["state"] == "failed"
    assert result["tasks"]["gate_sft"] == "failed" and result["tasks"]["gate_cpt"] == "success"
    assert result["tasks"]["rl"] == "upstream_failed" and result["tasks"]["evaluate"] == "upstream_failed"
    assert result["tasks"]["promote"] == "upstream_failed"
    assert "above gate.sft.max_eval_loss 0.01" in out.stdout + out.stderr


@pytest.mark.slow
def test_nightly_retrain_runs_at_smoke_scale_and_promotes(airflow_env):
    """collect -> validate -> training (gated) -> evaluate -> promote in one run; with no champion
    yet, the new model becomes it, and the reason is on its version."""
    from mlflow import MlflowClient

    conf = {"domains": ["terminal"], "episodes_per_domain": 16, "cpt_steps": 4, "sft_steps": 4, "rl_steps": 1,
            "eval_examples": 6}
    result = _dag_test("nightly_retrain", conf, airflow_env)
    assert result["state"] == "success", result
    assert set(result["tasks"]) == {"start", "plan", "collect", "validate", "corpora", "build", "cpt", "gate_cpt",
                                    "sft", "gate_sft", "rl", "gate_rl", "evaluate", "promote"}
    run_dir = next((Path(airflow_env["AGENTWORLD_HOME"]) / "runs" / "airflow").iterdir())
    promotion = json.loads((run_dir / "reports" / "promotion.json").read_text())
    assert promotion["promoted"] is True and promotion["champion_version"] is None
    client = MlflowClient(tracking_uri=airflow_env["MLFLOW_TRACKING_URI"])
    champion = client.get_model_version_by_alias("agentworld-world-model", "champion")
    assert int(champion.version) == promotion["challenger_version"]
    assert champion.tags["promotion"] == "promoted" and "no champion yet" in champion.tags["promotion_reason"]


@pytest.mark.slow
def test_synthetic_trajectories_dag_applies_the_trigger_form_controls(airflow_env, smoke_params, mlflow_store):
    from agentworld.data.io import read_jsonl
    from tests.helpers import built_and_trained

    workspace = Path(airflow_env["AGENTWORLD_HOME"])
    built_and_trained(workspace, smoke_params, sft_steps=2)
    text = (workspace / "params.yaml").read_text()
    (workspace / "params.yaml").write_text(text.replace("  stage: rl              # which stage's model simulates",
                                                        "  stage: sft             # which stage's model simulates"))
    result = _dag_test("synthetic_trajectories", {"synth_episodes": 3, "faults": ["timeouts"], "fault_rate": 0.5},
                       airflow_env)
    assert result["state"] == "success", result
    run_dir = next((workspace / "runs" / "airflow").iterdir())
    rows = list(read_jsonl(run_dir / "data" / "synthetic" / "terminal.jsonl"))
    assert len({r["trajectory_id"] for r in rows}) == 3
    assert all(r["source"] == "synthetic" and r["info"]["control"]["faults"] == ["timeouts"]
               and r["info"]["control"]["fault_rate"] == 0.5 for r in rows)


@pytest.mark.slow
def test_agent_rl_dag_trains_in_the_simulator_and_evaluates_on_the_real_terminal(airflow_env, smoke_params,
                                                                                 mlflow_store):
    """start -> train_in_simulator -> evaluate_on_real; the agent is registered with the world-model
    version it trained in, and its held-out episodes were played on the real terminal."""
    from mlflow import MlflowClient

    from tests.helpers import built_and_trained

    workspace = Path(airflow_env["AGENTWORLD_HOME"])
    built_and_trained(workspace, smoke_params, sft_steps=2, register=True)
    conf = {"agent_world_model": "models:/agentworld-world-model/1", "agent_rl_budget_s": 5, "agent_seed": 3}
    result = _dag_test("agent_rl", conf, airflow_env)
    assert result["state"] == "success", result
    assert set(result["tasks"]) == {"start", "train_in_simulator", "evaluate_on_real"}
    run_dir = next((workspace / "runs" / "airflow").iterdir())
    trained = json.loads((run_dir / "agent" / "train.json").read_text())
    assert trained["rl_episodes"] > 0 and trained["real_steps_training"] == trained["real_steps_demos"]
    episodes = [json.loads(line) for line in (run_dir / "agent" / "real_episodes.jsonl").read_text().splitlines()]
    assert len(episodes) == smoke_params.agent.eval_episodes and not any(e["simulated"] for e in episodes)
    client = MlflowClient(tracking_uri=airflow_env["MLFLOW_TRACKING_URI"])
    version = client.get_model_version("agentworld-agent", "1")
    assert version.tags["world_model_version"] == "1" and version.tags["rl_env"] == "sim"
    run = client.get_run(version.tags["run_id"])
    assert run.data.tags["seed"] == "3" and "real.success_rate" in run.data.metrics
