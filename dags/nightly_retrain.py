"""nightly_retrain: collect -> validate -> corpora, build -> cpt -> sft -> rl (gated) -> evaluate -> promote.

Fresh real trajectories every night, the whole staged training on them, and the champion/
challenger gate: the registry's `champion` alias moves only when the new model beats the
current champion and every baseline on the same held-out records (`promote` in params.yaml);
otherwise the reason is a tag on the new version. The cron is `schedule.cron`, active only with
`schedule.nightly: true` (the production profile); the demo leaves it off, and the DAG runs
when triggered. Collection fans out per domain like collect_and_validate, but publishes no
Asset, so it does not also start world_model_training.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, get_current_context, task

from agentworld.orchestration import (gated_training_tasks, nightly_schedule, plan_domains, resolve_run, run_stage,
                                      settings_errors_fail_once, stage_task, start_run, trigger_params)


def _run_id() -> str:
    return get_current_context()["run_id"]


@dag(
    dag_id="nightly_retrain",
    schedule=nightly_schedule(),
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=60)},
    params=trigger_params(),
    tags=["agentworld", "world-model", "nightly"],
    doc_md=__doc__,
)
def nightly_retrain():
    @task
    @settings_errors_fail_once
    def start() -> str:
        context = get_current_context()
        resolve_run(dict(context["params"]), context["run_id"], collects=True)
        return start_run(context["run_id"])

    @task
    @settings_errors_fail_once
    def plan(_: str) -> list[str]:
        domains, skipped = plan_domains(_run_id())
        for domain, reason in skipped.items():
            print(f"skipping {domain}: {reason}")
        if not domains:
            raise RuntimeError(f"none of the selected domains can run here: {skipped}")
        return domains

    @task(max_active_tis_per_dagrun=1)  # each collection already uses collect.workers processes
    @settings_errors_fail_once
    def collect(domain: str, parent: str) -> str:
        run_stage("collect", _run_id(), parent, domains=[domain])
        return domain

    @task(max_active_tis_per_dagrun=2)  # Great Expectations processes; eight at once starve SQLite
    @settings_errors_fail_once
    def validate(domain: str, parent: str) -> str:
        run_stage("validate", _run_id(), parent, domains=[domain])
        return domain

    parent = start()
    collected = collect.partial(parent=parent).expand(domain=plan(parent))
    validated = validate.partial(parent=parent).expand(domain=collected)
    inputs = [stage_task("corpora")(parent), stage_task("build")(parent, validated)]
    cpt, gate_cpt = gated_training_tasks("cpt")
    sft, gate_sft = gated_training_tasks("sft")
    rl, gate_rl = gated_training_tasks("rl")
    passed_cpt = gate_cpt(cpt(parent, *inputs))
    passed_sft = gate_sft(sft(parent, passed_cpt))
    passed_rl = gate_rl(rl(parent, passed_sft))
    stage_task("promote")(parent, stage_task("evaluate")(parent, passed_rl))


nightly_retrain()
