"""agentworld_pipeline: collect -> validate -> corpora, build -> tokenizer -> cpt -> sft -> rl (gated) -> evaluate -> promote.

The whole pipeline in one run: fresh real trajectories (collection fans out per domain like
collect_and_validate, but publishes no Asset, so it does not also start world_model_training),
the staged training behind a gate after each stage, and the champion/challenger decision: the
registry's `champion` alias moves only when the new model beats the current champion and every
baseline on the same held-out records (`promote` in params.yaml); otherwise the reason is a tag
on the new version.

One DAG for "by hand" and "every night": its cron is `schedule.cron`, active only with
`schedule.nightly: true` (the production profile); the demo leaves it off and the DAG runs when
triggered. Each stage task is `dvc repro` of that stage in the run's workspace, runs/airflow/<run_id>/
(a git worktree of the project sharing its DVC cache, so a retried task rewrites only its own
files), and `save_experiment` saves the run as a DVC experiment of the project (`dvc exp show`);
the trigger form shows params.yaml's values (with the schema's bounds); `start` fixes the run's
settings and refuses, once and with the reason, settings that cannot work.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, get_current_context, task

from agentworld_dags.alerts import task_defaults
from agentworld_dags.form import trigger_params
from agentworld_dags.launch import run_stage
from agentworld_dags.taskflow import (
    gated_training_chain,
    nightly_deadline,
    nightly_schedule,
    planned_collection,
    settings_errors_fail_once,
    stage_task,
    start_task,
)


@dag(
    dag_id="agentworld_pipeline",
    schedule=nightly_schedule(),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=task_defaults(retries=1, retry_delay=timedelta(seconds=60)),
    deadline=nightly_deadline("agentworld_pipeline"),
    params=trigger_params(),
    tags=["agentworld", "world-model", "nightly"],
    doc_md=__doc__,
)
def agentworld_pipeline():
    @task(max_active_tis_per_dagrun=2)  # Great Expectations processes; eight at once starve SQLite
    @settings_errors_fail_once
    def validate(domain: str, parent: str) -> str:
        run_stage("validate", get_current_context()["run_id"], parent, domains=[domain])
        return domain

    parent = start_task()()
    validated = validate.partial(parent=parent).expand(domain=planned_collection(parent))
    gated_training_chain(parent, stage_task("corpora")(parent), stage_task("build")(parent, validated))


agentworld_pipeline()
