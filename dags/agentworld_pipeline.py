"""agentworld_pipeline: collect -> validate -> corpora, build -> cpt -> sft -> rl -> evaluate -> promote.

Thin by design: each task calls the same tasks/ function that `dvc repro` runs. Scale knobs
are Params in the trigger form (empty = use params.yaml). Outputs of a DAG run live under
runs/airflow/<run_id>/, so a retried task rewrites only its own files.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, get_current_context, task

from agentworld.orchestration import run_stage, run_training_stage, start_run, trigger_params


@dag(
    dag_id="agentworld_pipeline",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
    params=trigger_params(),
    tags=["agentworld", "world-model"],
    doc_md=__doc__,
)
def agentworld_pipeline():
    def _ctx() -> tuple[dict, str]:
        context = get_current_context()
        return dict(context["params"]), context["run_id"]

    @task
    def start() -> str:
        dag_params, run_id = _ctx()
        return start_run(dag_params, run_id)

    @task
    def collect(parent: str) -> dict:
        return run_stage("collect", *_ctx(), parent)

    @task
    def validate(parent: str, _: dict) -> dict:
        return run_stage("validate", *_ctx(), parent)

    @task
    def build(parent: str, _: dict) -> dict:
        return run_stage("build", *_ctx(), parent)

    @task
    def corpora(parent: str) -> dict:
        return run_stage("corpora", *_ctx(), parent)

    def training(stage: str):
        @task(task_id=stage)
        def train(parent: str, *_: dict) -> dict:
            return run_training_stage(stage, *_ctx(), parent)
        return train

    @task
    def evaluate(parent: str, _: dict) -> dict:
        return run_stage("evaluate", *_ctx(), parent)

    @task
    def promote(parent: str, _: dict) -> dict:
        return run_stage("promote", *_ctx(), parent)

    parent = start()
    cpt = training("cpt")(parent, build(parent, validate(parent, collect(parent))), corpora(parent))
    promote(parent, evaluate(parent, training("rl")(parent, training("sft")(parent, cpt))))


agentworld_pipeline()
