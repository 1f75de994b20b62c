"""Every DAG, triggered through Airflow's REST API and run by the real scheduler and executor.

One Airflow stack (API server, scheduler, DAG processor, triggerer; LocalExecutor on SQLite),
started by `scripts/airflow_local.sh` as `make airflow` starts it, serves every test of this
module; it gets its own AIRFLOW_HOME, project workspace (smoke params) and MLflow store, and
every process it started is gone after the module. Tasks run in Airflow's task runner, which is
where worker pools, trainers and engines that `dag.test()` never exercised used to fail.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from agentworld.config import load_params
from tests.airflow_stack import AirflowStack, project_env
from tests.conftest import SMOKE_PARAMS

pytestmark = pytest.mark.slow

VALIDATED = "agentworld://datasets/validated-trajectories"


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> AirflowStack:
    tmp = tmp_path_factory.mktemp("airflow-stack")
    env = project_env(tmp)
    # A deadline every pipeline run misses (3.6 s after it is queued), so its alert is seen.
    params_path = Path(env["AGENTWORLD_HOME"]) / "params.yaml"
    params = yaml.safe_load(params_path.read_text())
    params["schedule"]["deadline_hours"] = 0.001
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    airflow = AirflowStack(tmp / "airflow", env)
    try:
        yield airflow.start()
    finally:
        airflow.stop()
    assert airflow.process is not None and airflow.process.poll() is not None


def _succeeded(stack: AirflowStack, dag_id: str, conf: dict, timeout: float = 900) -> tuple[dict, dict[str, str]]:
    run, states = stack.run_dag(dag_id, conf, timeout)
    assert run["state"] == "success", f"{states}\n{stack.failure_logs(dag_id, run['dag_run_id'])}"
    assert set(states.values()) == {"success"}, states
    print(f"{dag_id}: run {run['state']}; tasks {json.dumps(states)}")
    return run, states


def _train_here(stack: AirflowStack, monkeypatch, register: bool) -> None:
    """A trained SFT model in the stack's project (and, with `register`, in its registry)."""
    from tests.helpers import built_and_trained

    monkeypatch.setenv("MLFLOW_TRACKING_URI", stack.env["MLFLOW_TRACKING_URI"])
    monkeypatch.setenv("AGENTWORLD_ARTIFACT_ROOT", stack.env["AGENTWORLD_ARTIFACT_ROOT"])
    monkeypatch.delenv("AGENTWORLD_PARENT_RUN_ID", raising=False)
    built_and_trained(stack.workspace, load_params(SMOKE_PARAMS), sft_steps=2, register=register)


def test_trigger_form_shows_params_yaml_values_and_refuses_out_of_range_values(stack):
    stack.wait_for_dag("agentworld_pipeline")
    params = stack.dag_details("agentworld_pipeline")["params"]
    smoke = load_params(SMOKE_PARAMS)
    assert params["episodes_per_domain"]["value"] == smoke.collect.episodes_per_domain
    assert params["sft_steps"]["value"] == smoke.sft.max_steps
    assert params["domains"]["value"] == smoke.collect.domains
    assert params["episodes_per_domain"]["schema"]["minimum"] == 1
    assert params["fault_rate"]["schema"]["maximum"] == 1
    assert "EVERY selected domain" in params["episodes_per_domain"]["description"]
    stack.unpause("agentworld_pipeline")
    before = len(stack.runs("agentworld_pipeline"))
    refused = stack.client.post("/dags/agentworld_pipeline/dagRuns",
                                json={"logical_date": None, "conf": {"episodes_per_domain": 0}})
    assert refused.status_code == 400 and "episodes_per_domain" in refused.text
    refused = stack.client.post("/dags/agentworld_pipeline/dagRuns",
                                json={"logical_date": None, "conf": {"fault_rate": 1.5}})
    assert refused.status_code == 400 and "fault_rate" in refused.text
    assert len(stack.runs("agentworld_pipeline")) == before
    stack.unpause("agentworld_pipeline")


def test_unworkable_settings_are_refused_once_by_the_first_task(stack):
    run, states = stack.run_dag("collect_and_validate", {"episodes_per_domain": 1}, timeout=300)
    assert run["state"] == "failed"
    tries = {ti["task_id"]: ti["try_number"] for ti in stack.task_instances("collect_and_validate", run["dag_run_id"])}
    assert states["start"] == "failed" and tries["start"] == 1  # a settings error is not retried
    assert states["collect"] == "upstream_failed" and states["plan"] == "upstream_failed"
    log = stack.task_log("collect_and_validate", run["dag_run_id"], "start")
    assert "0 held-out episodes" in log and "Collect at least" in log
    # The failure callback alerted, with the task, the try and the reason.
    (alert,) = _alerts(stack, "task_failed", run["dag_run_id"])
    assert alert["task_id"] == "start" and alert["try_number"] == 1 and "Collect at least" in alert["error"]


def _alerts(stack: AirflowStack, kind: str, run_id: str, timeout: float = 90) -> list[dict]:
    """The alerts of `kind` for `run_id` in the stack's alert log (AIRFLOW_HOME/logs/alerts.jsonl),
    waiting for the first one (callbacks run after the task or in the triggerer)."""
    path = stack.home / "logs" / "alerts.jsonl"
    deadline = time.monotonic() + timeout
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        found = [a for a in map(json.loads, lines) if a["kind"] == kind and a["run_id"] == run_id]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(2)


def test_collect_and_validate_every_domain_then_world_model_training_runs_from_its_asset(stack):
    from agentworld.domains import list_envs

    domains = [env.name for env in list_envs() if env.available]
    assert {"terminal", "mcp"} <= set(domains)
    stack.wait_for_dag("world_model_training")
    stack.unpause("world_model_training")
    before = {r["dag_run_id"] for r in stack.runs("world_model_training")}
    # 10 episodes per domain are two shards: each domain's collection runs its process pool.
    run, states = _succeeded(stack, "collect_and_validate",
                             {"domains": domains + ["android"], "episodes_per_domain": 10, "max_steps": 4}, timeout=1500)
    assert sorted(k for k in states if k.startswith("collect[")) == [f"collect[{i}]" for i in range(len(domains))]
    run_dir = stack.run_dir(run["dag_run_id"])
    for domain in domains:
        assert json.loads((run_dir / "reports" / "collect" / f"{domain}.json").read_text())["episodes"] == 10
    # The run is a DVC experiment of the project: `dvc exp show` there lists it with its metrics.
    experiment = stack.dvc_experiments()[f"airflow-{run_dir.name}"]
    for domain in domains:
        assert experiment["metrics"][f"reports/collect/{domain}.json"]["episodes"] == 10
        assert experiment["metrics"][f"reports/validate/{domain}.json"]["clean"] > 0
    # The Asset event schedules world_model_training on exactly what the run published.
    training = _wait_for_new_run(stack, "world_model_training", before)
    assert training["run_type"] == "asset_triggered"
    finished = stack.wait_for_run("world_model_training", training["dag_run_id"], timeout=1500)
    # Read the events once the run they created has started: Airflow 3.3's GET /assets/events
    # answers 500 while an event's asset-triggered run is still queued (its start_date is null).
    events = {e["uri"]: e for e in stack.asset_events(source_run_id=run["dag_run_id"])}
    assert events[VALIDATED]["extra"]["run_id"] == run["dag_run_id"]
    assert sorted(events[VALIDATED]["extra"]["domains"]) == sorted(domains)
    assert [r["run_id"] for r in events[VALIDATED]["created_dagruns"]] == [training["dag_run_id"]]
    for domain in domains:
        assert events[f"agentworld://datasets/validated/{domain}"]["extra"]["clean_rows"] > 0
    states = stack.task_states("world_model_training", training["dag_run_id"])
    assert finished["state"] == "success", f"{states}\n{stack.failure_logs('world_model_training', finished['dag_run_id'])}"
    assert set(states) == {"prepare", "start", "corpora", "build", "tokenizer", "cpt", "gate_cpt", "sft", "gate_sft", "rl",
                           "gate_rl", "evaluate", "promote", "save_experiment"} and set(states.values()) == {"success"}
    print(f"world_model_training (asset-triggered): run {finished['state']}; tasks {json.dumps(states)}")
    trained_on = yaml.safe_load((stack.run_dir(training["dag_run_id"]) / "params.yaml").read_text())
    assert sorted(trained_on["collect"]["domains"]) == sorted(domains)
    metrics = json.loads((stack.run_dir(training["dag_run_id"]) / "reports" / "eval_metrics.json").read_text())
    evaluated = set(metrics["world_model"]) - {"all"}
    assert evaluated and evaluated <= set(domains)


def _wait_for_new_run(stack: AirflowStack, dag_id: str, before: set[str], timeout: float = 120) -> dict:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = [r for r in stack.runs(dag_id) if r["dag_run_id"] not in before]
        if new:
            return new[0]
        time.sleep(2)
    raise TimeoutError(f"no new {dag_id} run within {timeout:.0f} s")


def test_agentworld_pipeline_runs_end_to_end_and_records_its_promotion_decision(stack):
    from mlflow import MlflowClient

    conf = {"domains": ["terminal", "mcp"], "episodes_per_domain": 12, "cpt_steps": 4, "sft_steps": 4,
            "rl_steps": 1, "eval_examples": 6}
    run, states = _succeeded(stack, "agentworld_pipeline", conf)
    # Its Deadline alert (0.001 h in this module's params) fired from the triggerer.
    (missed,) = _alerts(stack, "deadline_missed", run["dag_run_id"])
    assert missed["dag_id"] == "agentworld_pipeline" and missed["hours"] == 0.001
    assert {"start", "plan", "collect[0]", "collect[1]", "validate[0]", "validate[1]", "corpora", "build", "tokenizer", "cpt",
            "gate_cpt", "sft", "gate_sft", "rl", "gate_rl", "evaluate", "promote", "save_experiment"} == set(states)
    run_dir = stack.run_dir(run["dag_run_id"])
    assert json.loads((run_dir / "reports" / "eval_metrics.json").read_text())["examples"] == 6
    assert json.loads((run_dir / "reports" / "train" / "sft.json").read_text())["global_step"] == 4
    assert json.loads((run_dir / "reports" / "collect" / "terminal.json").read_text())["episodes"] == 12
    promotion = json.loads((run_dir / "reports" / "promotion.json").read_text())
    client = MlflowClient(tracking_uri=stack.env["MLFLOW_TRACKING_URI"])
    version = client.get_model_version("agentworld-world-model", str(promotion["challenger_version"]))
    assert version.tags["promotion"] == ("promoted" if promotion["promoted"] else "refused")
    assert version.tags["promotion_reason"]
    # Every stage ran under DVC in the run's workspace, saved as a DVC experiment of the project:
    # `dvc exp show` lists it with the run's settings and metrics, its dvc.lock records each stage,
    # and the MLflow runs and the model version name that experiment.
    name = f"airflow-{run_dir.name}"
    experiment = stack.dvc_experiments()[name]
    assert experiment["params"]["params.yaml"]["sft"]["max_steps"] == 4
    assert experiment["metrics"]["reports/train/sft.json"]["global_step"] == 4
    assert experiment["metrics"]["reports/eval_metrics.json"]["examples"] == 6
    lock = yaml.safe_load((run_dir / "dvc.lock").read_text())["stages"]
    assert {"collect@terminal", "validate@mcp", "build", "tokenizer", "cpt", "sft", "rl", "evaluate", "promote"} <= set(lock)
    stage_runs = client.search_runs([client.get_experiment_by_name("agentworld").experiment_id],
                                    "tags.`agentworld.kind` = 'stage' and tags.stage = 'sft'")
    tagged = [r for r in stage_runs if r.data.tags.get("workspace") == str(run_dir)]
    assert tagged and all(r.data.tags["dvc_experiment"] == name and r.data.tags["dvc_lock_md5"] != "none"
                          for r in tagged)
    assert version.tags["dvc_experiment"] == name
    if promotion["promoted"]:
        champion = client.get_model_version_by_alias("agentworld-world-model", "champion")
        assert int(champion.version) == promotion["challenger_version"]


def test_synthetic_trajectories_applies_the_trigger_form_controls(stack, monkeypatch):
    from agentworld.data.io import read_jsonl

    _train_here(stack, monkeypatch, register=False)
    conf = {"synth_stage": "sft", "synth_episodes": 3, "faults": ["timeouts"], "fault_rate": 0.5}
    run, _ = _succeeded(stack, "synthetic_trajectories", conf)
    run_dir = stack.run_dir(run["dag_run_id"])
    rows = list(read_jsonl(run_dir / "data" / "synthetic" / "terminal.jsonl"))
    assert f"airflow-{run_dir.name}" in stack.dvc_experiments()
    assert "models/sft" in str(yaml.safe_load((run_dir / "dvc.lock").read_text())["stages"]["synthesize"]["deps"])
    assert len({r["trajectory_id"] for r in rows}) == 3
    assert all(r["source"] == "synthetic" and r["info"]["control"]["faults"] == ["timeouts"]
               and r["info"]["control"]["fault_rate"] == 0.5 for r in rows)


def test_agent_rl_trains_in_the_simulator_and_evaluates_on_the_real_terminal(stack, monkeypatch):
    from mlflow import MlflowClient

    _train_here(stack, monkeypatch, register=True)
    client = MlflowClient(tracking_uri=stack.env["MLFLOW_TRACKING_URI"])
    latest = max(int(v.version) for v in client.search_model_versions("name='agentworld-world-model'"))
    conf = {"agent_world_model": f"models:/agentworld-world-model/{latest}", "agent_rl_budget_s": 5, "agent_seed": 3}
    run, states = _succeeded(stack, "agent_rl", conf)
    assert set(states) == {"start", "train_in_simulator", "evaluate_on_real"}
    run_dir = stack.run_dir(run["dag_run_id"])
    trained = json.loads((run_dir / "agent" / "train.json").read_text())
    assert trained["rl_episodes"] > 0 and trained["real_steps_training"] == trained["real_steps_demos"]
    episodes = [json.loads(line) for line in (run_dir / "agent" / "real_episodes.jsonl").read_text().splitlines()]
    assert episodes and not any(e["simulated"] for e in episodes)
    agent = max(client.search_model_versions("name='agentworld-agent'"), key=lambda v: int(v.version))
    assert agent.tags["world_model_version"] == str(latest) and agent.tags["rl_env"] == "sim"
    agent_run = client.get_run(agent.tags["run_id"])
    assert agent_run.data.tags["seed"] == "3" and agent_run.data.tags["airflow_run_id"] == run["dag_run_id"]


def test_agent_regression_tests_the_production_agent_and_records_the_verdict_on_its_version(stack, monkeypatch):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=stack.env["MLFLOW_TRACKING_URI"])
    if not client.search_model_versions("name='agentworld-agent'"):  # run alone: train one first
        test_agent_rl_trains_in_the_simulator_and_evaluates_on_the_real_terminal(stack, monkeypatch)
    agent = max(client.search_model_versions("name='agentworld-agent'"), key=lambda v: int(v.version))
    client.set_registered_model_alias("agentworld-agent", "production", agent.version)
    suite = stack.workspace / "regression-suite.yaml"
    suite.write_text(yaml.safe_dump({"name": "nightly", "cases": [
        {"name": "rename-file", "domain": "terminal", "templates": ["rename_file"], "episodes": 3,
         "environments": ["real"], "max_steps": 2, "thresholds": {"min_success": 1.0}}]}))
    run, states = stack.run_dag("agent_regression", {"agent_test_suite": str(suite)}, timeout=600)
    assert set(states) == {"test_agent"}
    report_dir = stack.workspace / "runs" / "agent_regression"
    [folder] = [p for p in report_dir.iterdir() if p.is_dir()]
    report = json.loads((folder / "report.json").read_text())
    tags = client.get_model_version("agentworld-agent", agent.version).tags
    # the verdict is recorded on the production version, and the DAG run says the same
    assert tags["agent_test.nightly.passed"] == str(report["passed"]).lower()
    assert float(tags["agent_test.nightly.rename-file.real.success"]) == report["cases"][0]["runs"][0]["success_rate"]
    assert run["state"] == ("success" if report["passed"] else "failed"), stack.failure_logs("agent_regression",
                                                                                             run["dag_run_id"])
    test_run = client.get_run(tags["agent_test.nightly.run_id"])
    assert test_run.data.tags["airflow_run_id"] == run["dag_run_id"]
    assert test_run.data.tags["agent_version"] == str(agent.version)
    if not report["passed"]:  # failed once, as a verdict: not retried
        assert "failed suite nightly" in stack.task_log("agent_regression", run["dag_run_id"], "test_agent")
        assert stack.task_instances("agent_regression", run["dag_run_id"])[0]["try_number"] == 1


def test_every_dag_in_the_folder_has_a_real_scheduler_test(stack):
    """A DAG added later must get its test here too."""
    tested = {"collect_and_validate", "world_model_training", "agentworld_pipeline",
              "synthetic_trajectories", "agent_rl", "agent_regression"}
    dags = {d["dag_id"] for d in stack.client.get("/dags", params={"limit": 100}).json()["dags"]}
    assert dags == tested
