"""world_model_training: build -> tokenizer -> cpt -> sft -> rl -> evaluate -> promote, with a gate after each stage.

Scheduled on the validated-trajectories Asset: every collect_and_validate run that publishes
a validated set starts one training run on exactly that data (its domains and paths come in
the Asset event). Triggered by hand, it trains on the project's data/clean/ of collect.domains.
Each gate fails the run, with the reason, when a stage's held-out metric is not finite or beyond
`gate` in params.yaml, so the next stage never starts from a broken model. Stages are `dvc repro`
in the run's workspace, saved at the end as a DVC experiment of the project (`dvc exp show`). `promote` makes the
new model the registry's champion only if it beats the current one and every baseline
(`promote` in params.yaml). Model size and stage budgets are Params of the trigger form; with
`distributed.compute: cluster` the stages go through the multi-node DeepSpeed launcher.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, get_current_context, task

from agentworld_dags.alerts import task_defaults
from agentworld_dags.assets import triggering_validated_extra, validated_asset
from agentworld_dags.form import trigger_params
from agentworld_dags.runs import start_run, training_workspace
from agentworld_dags.taskflow import gated_training_chain, settings_errors_fail_once, stage_task

TRAINING_PARAMS = ["hidden_size", "num_layers", "num_experts", "moe_intermediate_size",
                   "cpt_steps", "sft_steps", "rl_steps", "eval_examples"]


@dag(
    dag_id="world_model_training",
    schedule=[validated_asset()],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args=task_defaults(retries=1, retry_delay=timedelta(seconds=30)),
    params=trigger_params(TRAINING_PARAMS),
    tags=["agentworld", "world-model", "training"],
    doc_md=__doc__,
)
def world_model_training():
    @task
    @settings_errors_fail_once
    def prepare() -> dict:
        """The validated rows of the triggering Asset event (or data/clean/) into this run's workspace."""
        context = get_current_context()
        validated = triggering_validated_extra(context.get("triggering_asset_events"))
        return training_workspace(dict(context["params"]), context["run_id"], validated)

    @task
    def start(_: dict) -> str:
        return start_run(get_current_context()["run_id"])

    parent = start(prepare())
    gated_training_chain(parent, stage_task("corpora")(parent), stage_task("build")(parent))


world_model_training()
