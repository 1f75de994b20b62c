"""nightly_retrain: collect -> validate -> corpora, build -> cpt -> sft -> rl (gated) -> evaluate -> promote.

Fresh real trajectories every night, the whole staged training on them, and the champion/
challenger gate: the registry's `champion` alias moves only when the new model beats the
current champion on the same held-out records (`promote` in params.yaml); otherwise the reason
is a tag on the new version. The cron is `schedule.cron`, active only with
`schedule.nightly: true` (the production profile); the demo leaves it off, and the DAG runs
when triggered. Collection fans out per domain like collect_and_validate, but publishes no
Asset, so it does not also start world_model_training.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, get_current_context, task

from agentworld.orchestration import (gated_training_tasks, nightly_schedule, plan_domains, run_stage,
                                      start_run, trigger_params)


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
    def _ctx() -> tuple[dict, str]:
        context = get_current_context()
        return dict(context["params"]), context["run_id"]

    @task
    def start() -> str:
        return start_run(*_ctx())

    @task
    def plan(_: str) -> list[str]:
        domains, skipped = plan_domains(_ctx()[0])
        for domain, reason in skipped.items():
            print(f"skipping {domain}: {reason}")
        if not domains:
            raise RuntimeError(f"none of the selected domains can run here: {skipped}")
        return domains

    @task(max_active_tis_per_dagrun=1)  # each collection already uses collect.workers processes
    def collect(domain: str, parent: str) -> str:
        run_stage("collect", *_ctx(), parent, domains=[domain])
        return domain

    @task
    def validate(domain: str, parent: str) -> str:
        run_stage("validate", *_ctx(), parent, domains=[domain])
        return domain

    @task
    def corpora(parent: str) -> dict:
        return run_stage("corpora", *_ctx(), parent)

    @task
    def build(parent: str, _: list[str]) -> dict:
        return run_stage("build", *_ctx(), parent)

    @task
    def evaluate(parent: str, _: str) -> dict:
        return run_stage("evaluate", *_ctx(), parent)

    @task
    def promote(parent: str, _: dict) -> dict:
        return run_stage("promote", *_ctx(), parent)

    parent = start()
    collected = collect.partial(parent=parent).expand(domain=plan(parent))
    validated = validate.partial(parent=parent).expand(domain=collected)
    inputs = [corpora(parent), build(parent, validated)]
    cpt, gate_cpt = gated_training_tasks("cpt")
    sft, gate_sft = gated_training_tasks("sft")
    rl, gate_rl = gated_training_tasks("rl")
    passed_cpt = gate_cpt(cpt(parent, *inputs))
    passed_sft = gate_sft(sft(parent, passed_cpt))
    passed_rl = gate_rl(rl(parent, passed_sft))
    promote(parent, evaluate(parent, passed_rl))


nightly_retrain()
