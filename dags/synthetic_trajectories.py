"""synthetic_trajectories: behaviour policies against the world model (WorldModelEnv) at scale.

The project's trained world model (`synthesize.stage`, default rl) answers every step; each
domain's rows are written with `source: synthetic` and the run's controls, then validated by
the same Great Expectations suites as real data. The trigger form sets the scale (domains,
episodes, steps) and the controls: faults to inject and their rate, a perturbation of the
initial state, or a fictional world to simulate consistently. Output: the run's
runs/airflow/<run_id>/data/synthetic/ and reports/synthesize.json (`dvc repro synthesize` in the
run's workspace, saved as a DVC experiment of the project); MLflow: one run per domain.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, get_current_context, task

from agentworld_dags.alerts import task_defaults
from agentworld_dags.form import trigger_params
from agentworld_dags.runs import simulator_workspace, start_run
from agentworld_dags.taskflow import save_experiment_task, settings_errors_fail_once, stage_task

SYNTHESIS_PARAMS = ["synth_domains", "synth_episodes", "synth_max_steps", "synth_stage", "faults", "fault_rate",
                    "perturbation", "fiction"]


@dag(
    dag_id="synthetic_trajectories",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=task_defaults(retries=1, retry_delay=timedelta(seconds=30)),
    params=trigger_params(SYNTHESIS_PARAMS),
    tags=["agentworld", "simulation", "data"],
    doc_md=__doc__,
)
def synthetic_trajectories():
    @task
    @settings_errors_fail_once
    def prepare() -> dict:
        context = get_current_context()
        return simulator_workspace(dict(context["params"]), context["run_id"])

    @task
    def start(_: dict) -> str:
        return start_run(get_current_context()["run_id"])

    save_experiment_task()(stage_task("synthesize")(start(prepare())))


synthetic_trajectories()
