"""agentworld_pipeline: collect -> validate -> corpora, build -> cpt -> sft -> rl -> evaluate -> promote.

Thin by design: each task runs the same stage command that `dvc repro` runs, in a process of
its own. The trigger form shows params.yaml's values (with the schema's bounds); `start` fixes
the run's settings and refuses, once and with the reason, settings that cannot work. Outputs of
a DAG run live under runs/airflow/<run_id>/, so a retried task rewrites only its own files.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag

from agentworld_dags.form import trigger_params
from agentworld_dags.taskflow import stage_task, start_task


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
    parent = start_task()()
    built = stage_task("build")(parent, stage_task("validate")(parent, stage_task("collect")(parent)))
    cpt = stage_task("cpt")(parent, built, stage_task("corpora")(parent))
    rl = stage_task("rl")(parent, stage_task("sft")(parent, cpt))
    stage_task("promote")(parent, stage_task("evaluate")(parent, rl))


agentworld_pipeline()
