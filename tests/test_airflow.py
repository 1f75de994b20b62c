"""Airflow with `dag.test()`: every DAG imports cleanly, the nightly cron follows params.yaml, and
a failing gate stops world_model_training. Runs under the real scheduler are in
test_airflow_scheduler.py; these in-process runs are quicker but do not stand in for them.

Airflow reads AIRFLOW_HOME when it is first imported, so each check runs in its own
process with its own metadata DB, MLflow store and workspace.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentworld.profiles import write_profile
from tests.airflow_stack import project_env
from tests.conftest import PROJECT


@pytest.fixture()
def airflow_env(tmp_path) -> dict[str, str]:
    home = tmp_path / "airflow"
    env = {**project_env(tmp_path), "AIRFLOW_HOME": str(home)}
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, check=True, capture_output=True)
    return env


#: The DAGs folder parsed as Airflow's DAG processor and task runner parse it (a bundle on
#: sys.path, so the DAG files import their helpers in dags/agentworld_dags/).
DAGBAG = ("import os; from airflow.dag_processing.dagbag import BundleDagBag;"
          "folder = os.environ['AIRFLOW__CORE__DAGS_FOLDER'];"
          "b = BundleDagBag(folder, bundle_path=folder, bundle_name='dags-folder');")


def _python(code: str, env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)


def test_dagbag_has_no_import_errors(airflow_env):
    out = _python(
        "import json;" + DAGBAG +
        "print(json.dumps({'errors': {k: str(v) for k, v in b.import_errors.items()}, 'dags': sorted(b.dags)}))",
        airflow_env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["errors"] == {}
    assert {"agentworld_pipeline", "collect_and_validate", "world_model_training",
            "synthetic_trajectories", "agent_rl"} <= set(result["dags"])


def test_every_task_has_a_timeout_and_failure_alert_and_training_uses_its_pool(airflow_env):
    """What a production deployment relies on, for every task of every DAG: an execution timeout,
    the failure notifier, the `training` pool for the training stages; and the pipeline's
    Deadline alert at `schedule.deadline_hours`."""
    code = ("import json;" + DAGBAG +
            "from agentworld_dags.alerts import FailureAlert;"
            "tasks = {f'{d}.{t.task_id}': [t.execution_timeout is not None,"
            " any(isinstance(c, FailureAlert) for c in (t.on_failure_callback if isinstance("
            "t.on_failure_callback, list) else [t.on_failure_callback])), t.pool]"
            " for d, dag in b.dags.items() for t in dag.tasks};"
            "dl = b.dags['agentworld_pipeline'].deadline;"
            "print(json.dumps({'tasks': tasks, 'deadline': [type(x.reference).__name__ + ' ' + str(x.interval) + ' '"
            " + x.callback.path for x in dl]}))")
    out = _python(code, airflow_env)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(result["tasks"]) > 40
    assert [t for t, (timeout, alert, _) in result["tasks"].items() if not (timeout and alert)] == []
    pools = {t: pool for t, (_, _, pool) in result["tasks"].items()}
    for stage in ("tokenizer", "cpt", "sft", "rl"):
        assert pools[f"agentworld_pipeline.{stage}"] == pools[f"world_model_training.{stage}"] == "training"
    assert pools["agent_rl.train_in_simulator"] == "training"
    assert pools["agentworld_pipeline.collect"] == "default_pool"
    assert result["deadline"] == ["DagRunQueuedAtDeadline 8:00:00 agentworld_dags.alerts.deadline_missed"]


def test_pipeline_cron_is_off_in_the_demo_and_on_in_production(airflow_env):
    """The cron comes from params.yaml: none in the demo profile, `schedule.cron` in production."""
    workspace = Path(airflow_env["AGENTWORLD_HOME"])
    code = ("import json;" + DAGBAG +
            "d = b.dags['agentworld_pipeline']; print(json.dumps({'schedule': getattr(d.timetable, 'expression', None)}))")
    shutil.copy(PROJECT / "params.yaml", workspace / "params.yaml")
    demo = _python(code, airflow_env)
    write_profile(PROJECT / "profiles" / "production.yaml", workspace / "params.yaml")
    production = _python(code, airflow_env)
    assert demo.returncode == 0 and production.returncode == 0, demo.stderr[-3000:] + production.stderr[-3000:]
    assert json.loads(demo.stdout.strip().splitlines()[-1])["schedule"] is None
    assert json.loads(production.stdout.strip().splitlines()[-1])["schedule"] == "0 2 * * *"


TRAINING_RUN = (
    "import json;" + DAGBAG.replace("{", "{{").replace("}", "}}") +
    "dag = b.dags['world_model_training'];"
    "run = dag.test(run_conf={conf!r});"
    "states = {{ti.task_id: str(ti.state) for ti in run.get_task_instances()}};"
    "print(json.dumps({{'state': str(run.state), 'tasks': states}}))"
)


@pytest.mark.slow
def test_world_model_training_stops_at_a_failing_gate(airflow_env):
    """By hand it trains on data/clean/; a gate floor the SFT model cannot meet stops the run
    there, and the later stages never start."""
    from agentworld.data.io import write_jsonl
    from tests.helpers import make_transitions

    workspace = Path(airflow_env["AGENTWORLD_HOME"])
    write_jsonl(workspace / "data" / "clean" / "terminal.jsonl", make_transitions(episodes=30))
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
