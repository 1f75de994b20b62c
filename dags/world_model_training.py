"""world_model_training: build -> cpt -> sft -> rl -> evaluate -> promote, with a gate after each stage.

Scheduled on the validated-trajectories Asset: every collect_and_validate run that publishes
a validated set starts one training run on exactly that data (its paths come in the Asset
event). Triggered by hand, it trains on the project's data/clean/. Each gate fails the run,
with the reason, when a stage's held-out metric is not finite or beyond `gate` in params.yaml,
so the next stage never starts from a broken model. `promote` makes the new model the registry's
champion only if it beats the current one (`promote` in params.yaml). Model size and stage budgets are Params
of the trigger form; with `distributed.compute: cluster` the stages go through the multi-node
DeepSpeed launcher.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, get_current_context, task

from agentworld.orchestration import (gated_training_tasks, run_stage, start_run, training_workspace,
                                      trigger_params, triggering_validated_extra, validated_asset)

TRAINING_PARAMS = ["hidden_size", "num_layers", "num_experts", "moe_intermediate_size",
                   "cpt_steps", "sft_steps", "rl_steps", "eval_examples"]


@dag(
    dag_id="world_model_training",
    schedule=[validated_asset()],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=30)},
    params=trigger_params(TRAINING_PARAMS),
    tags=["agentworld", "world-model", "training"],
    doc_md=__doc__,
)
def world_model_training():
    def _ctx() -> tuple[dict, str]:
        context = get_current_context()
        return dict(context["params"]), context["run_id"]

    @task
    def prepare() -> dict:
        """The validated rows of the triggering Asset event (or data/clean/) into this run's workspace."""
        context = get_current_context()
        validated = triggering_validated_extra(context.get("triggering_asset_events"))
        return training_workspace(dict(context["params"]), context["run_id"], validated)

    @task
    def start(_: dict) -> str:
        return start_run(*_ctx())

    @task
    def corpora(parent: str) -> dict:
        return run_stage("corpora", *_ctx(), parent)

    @task
    def build(parent: str) -> dict:
        return run_stage("build", *_ctx(), parent)

    @task
    def evaluate(parent: str, _: str) -> dict:
        return run_stage("evaluate", *_ctx(), parent)

    @task
    def promote(parent: str, _: dict) -> dict:
        return run_stage("promote", *_ctx(), parent)

    parent = start(prepare())
    inputs = [corpora(parent), build(parent)]
    cpt, gate_cpt = gated_training_tasks("cpt")
    sft, gate_sft = gated_training_tasks("sft")
    rl, gate_rl = gated_training_tasks("rl")
    passed_cpt = gate_cpt(cpt(parent, *inputs))
    passed_sft = gate_sft(sft(parent, passed_cpt))
    passed_rl = gate_rl(rl(parent, passed_sft))
    promote(parent, evaluate(parent, passed_rl))


world_model_training()
