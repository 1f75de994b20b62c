"""collect_and_validate: real trajectories from every selected domain, validated, published as Assets.

Fans out per domain with dynamic task mapping (one mapped `collect` and `validate` task per
domain in collect.domains, or in the trigger form's `domains`). Each validated domain is
published as its own Asset (`agentworld://datasets/validated/<domain>`, through an AssetAlias
because the domains come from params), and `publish` marks the whole validated set
(`agentworld://datasets/validated-trajectories`) that the training DAGs are scheduled on.
Domains that cannot run on this machine (e.g. Android) are skipped with their reason. `start`
refuses, once and with the reason, settings that could not give a training and a held-out split.
Each stage is a `dvc repro` in the run's workspace; `save_experiment` saves the run as a DVC
experiment of the project (`dvc exp show`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, get_current_context, task

from agentworld_dags.alerts import task_defaults
from agentworld_dags.assets import (
    validated_alias,
    validated_asset,
    validated_domain_asset,
    validated_domain_event,
    validated_set_event,
)
from agentworld_dags.form import trigger_params
from agentworld_dags.launch import run_stage
from agentworld_dags.taskflow import planned_collection, save_experiment_task, settings_errors_fail_once, start_task


@dag(
    dag_id="collect_and_validate",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=task_defaults(retries=2, retry_delay=timedelta(seconds=30)),
    params=trigger_params(["domains", "episodes_per_domain", "episodes", "max_steps"]),
    tags=["agentworld", "data"],
    doc_md=__doc__,
)
def collect_and_validate():
    # Two at a time: each is a Great Expectations process, and eight at once on a small machine
    # starve the scheduler and its SQLite metadata DB ("database is locked").
    @task(outlets=[validated_alias()], max_active_tis_per_dagrun=2)
    @settings_errors_fail_once
    def validate(domain: str, parent: str, *, outlet_events=None) -> dict:
        run_id = get_current_context()["run_id"]
        report = run_stage("validate", run_id, parent, domains=[domain])["domains"][domain]
        event = validated_domain_event(domain, report, run_id)
        outlet_events[validated_alias()].add(validated_domain_asset(domain), extra=event)
        return event

    @task(outlets=[validated_asset()])
    def publish(events: list[dict], *, outlet_events=None) -> dict:
        summary = validated_set_event(list(events), get_current_context()["run_id"])
        outlet_events[validated_asset()].extra = summary
        return summary

    parent = start_task()()
    save_experiment_task()(publish(validate.partial(parent=parent).expand(domain=planned_collection(parent))))


collect_and_validate()
