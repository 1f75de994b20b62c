"""Task factories and chains that several DAGs use: a stage as a task, the gated training
chain, the first task of a run, planned per-domain collection, saving the run as a DVC
experiment, the nightly cron."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from agentworld.config import ParamsError, load_params
from agentworld.tracking.runs import project_root
from agentworld_dags.launch import gate_stage, plan_domains, run_stage, save_experiment
from agentworld_dags.runs import resolve_run, start_run

T = TypeVar("T", bound=Callable[..., Any])

#: The Airflow pool of the training stages (tokenizer, cpt, sft, rl): its slots are how many train
#: at once (1 on one machine; scripts/airflow_local.sh and prod_stack.sh create it, a GPU cluster
#: sizes it, see docs/cluster.md).
TRAINING_POOL = "training"


def settings_errors_fail_once(fn: T) -> T:
    """Task body wrapper: a settings error (RunRefused, ParamsError) fails the task at once, with
    no retry (retrying cannot change the settings); anything else keeps the task's retries."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from airflow.sdk.exceptions import AirflowFailException

        try:
            return fn(*args, **kwargs)
        except ParamsError as err:
            raise AirflowFailException(str(err)) from err
    return wrapper  # type: ignore[return-value]


def stage_task(stage: str, **task_kwargs: Any) -> Any:
    """An Airflow task that runs `stage` with the run's settings; its arguments after the MLflow
    parent run id are upstream results that only order it."""
    from airflow.sdk import get_current_context, task

    @task(task_id=stage, **task_kwargs)
    @settings_errors_fail_once
    def run(parent: str, *_: object) -> dict:
        return run_stage(stage, get_current_context()["run_id"], parent)

    return run


def gated_training_tasks(stage: str) -> tuple[Any, Any]:
    """The Airflow tasks `<stage>` (train cpt, sft or rl) and `gate_<stage>` (fail the run, with
    no retry, when the held-out metric is beyond its floor), shared by the training DAGs."""
    from airflow.sdk import get_current_context, task
    from airflow.sdk.exceptions import AirflowFailException

    train = stage_task(stage, pool=TRAINING_POOL)

    @task(task_id=f"gate_{stage}", retries=0)
    def gate(_: dict) -> str:
        try:
            return gate_stage(stage, get_current_context()["run_id"])
        except Exception as err:  # a failed gate is final: retrying cannot change the metric
            raise AirflowFailException(str(err)) from err

    return train, gate


def gated_training_chain(parent: Any, *inputs: Any) -> Any:
    """tokenizer -> cpt -> gate_cpt -> sft -> gate_sft -> rl -> gate_rl -> evaluate -> promote
    -> save_experiment after `inputs` (the corpora and build tasks): the training DAGs' shared
    chain; returns the last task."""
    from stages import TRAINING_STAGES

    passed = (stage_task("tokenizer", pool=TRAINING_POOL)(parent, *inputs),)
    for stage in TRAINING_STAGES:
        train, gate = gated_training_tasks(stage)
        passed = (gate(train(parent, *passed)),)
    return save_experiment_task()(stage_task("promote")(parent, stage_task("evaluate")(parent, *passed)))


def save_experiment_task() -> Any:
    """The last task of a DAG that runs stages: `dvc exp save` of the run's workspace, so the run
    is listed by `dvc exp show` in the project (its arguments only order it)."""
    from airflow.sdk import get_current_context, task

    @task(task_id="save_experiment")
    def save(*_: object) -> dict:
        return save_experiment(get_current_context()["run_id"])

    return save


def start_task() -> Any:
    """The first task of a DAG that collects: fix the run's settings from the trigger form (a bad
    value fails here, once) and open the MLflow parent run; returns its id."""
    from airflow.sdk import get_current_context, task

    @task(task_id="start")
    @settings_errors_fail_once
    def start() -> str:
        context = get_current_context()
        resolve_run(dict(context["params"]), context["run_id"], collects=True)
        return start_run(context["run_id"])

    return start


def planned_collection(parent: Any) -> Any:
    """`plan` (the selected domains that can run here) and `collect`, mapped over them one at a
    time (each collection already uses collect.workers processes); returns the mapped collect."""
    from airflow.sdk import get_current_context, task

    @task(task_id="plan")
    @settings_errors_fail_once
    def plan(_: str) -> list[str]:
        domains, skipped = plan_domains(get_current_context()["run_id"])
        for domain, reason in skipped.items():
            print(f"skipping {domain}: {reason}")
        if not domains:
            raise RuntimeError(f"none of the selected domains can run here: {skipped}")
        return domains

    @task(task_id="collect", max_active_tis_per_dagrun=1)
    @settings_errors_fail_once
    def collect(domain: str, parent: str) -> str:
        run_stage("collect", get_current_context()["run_id"], parent, domains=[domain])
        return domain

    return collect.partial(parent=parent).expand(domain=plan(parent))


def nightly_schedule(cron: str = "schedule.cron") -> str | None:
    """The cron at key path `cron` of params.yaml (the pipeline's `schedule.cron`, the agent
    regression's `agent_test.cron`) when `schedule.nightly` is on (production), else None."""
    params = load_params(project_root() / "params.yaml")
    section, leaf = cron.split(".")
    return getattr(getattr(params, section), leaf) if params.schedule.nightly else None



def nightly_deadline(dag_id: str) -> Any:
    """The Deadline alert of `dag_id`'s runs: `schedule.deadline_hours` after a run was queued."""
    from agentworld_dags.alerts import deadline_alert

    return deadline_alert(dag_id, load_params(project_root() / "params.yaml").schedule.deadline_hours)
