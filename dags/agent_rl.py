"""agent_rl: train an agent inside the world model, then measure it on the real environment.

start (fixes the run's settings and opens the agent's MLflow run; fails at once, without retry,
if the world model `agent.world_model` is not there) -> train_in_simulator (BC on successful
real trajectories, then GRPO inside WorldModelEnv for `agent.rl.budget_s` seconds) ->
evaluate_on_real (held-out real tasks: task success, steps, invalid-action rate; registers a
version of `agentworld-agent` tagged with the world-model version it trained in). The trigger
form picks the world model, the initialisation (scratch or the world model's weights), where RL
runs (sim, real, none), its budget and the seed. Each phase runs in a process of its own.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, get_current_context, task

from agentworld_dags.alerts import task_defaults
from agentworld_dags.form import trigger_params
from agentworld_dags.launch import agent_phase
from agentworld_dags.runs import resolve_run
from agentworld_dags.taskflow import TRAINING_POOL, settings_errors_fail_once

AGENT_PARAMS = ["agent_world_model", "agent_init", "agent_rl_env", "agent_rl_budget_s", "agent_bc_steps",
                "agent_eval_episodes", "agent_seed"]


def _run_id() -> str:
    return get_current_context()["run_id"]


@dag(
    dag_id="agent_rl",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=task_defaults(retries=1, retry_delay=timedelta(seconds=30)),
    params=trigger_params(AGENT_PARAMS),
    tags=["agentworld", "agents", "simulation"],
    doc_md=__doc__,
)
def agent_rl():
    @task
    @settings_errors_fail_once
    def start() -> str:
        context = get_current_context()
        resolve_run(dict(context["params"]), context["run_id"])
        return agent_phase("start", context["run_id"])["run_id"]

    @task(pool=TRAINING_POOL)
    @settings_errors_fail_once
    def train_in_simulator(agent_run_id: str) -> dict:
        return agent_phase("train", _run_id(), agent_run_id)

    @task
    @settings_errors_fail_once
    def evaluate_on_real(agent_run_id: str, _: dict) -> dict:
        return agent_phase("evaluate", _run_id(), agent_run_id)

    agent_run_id = start()
    evaluate_on_real(agent_run_id, train_in_simulator(agent_run_id))


agent_rl()
