"""What Airflow tasks need beyond the stage functions: trigger-form Params -> params
overrides, one workspace folder per DAG run, and the MLflow parent run id.

Kept out of dags/ so the DAG files stay thin (they schedule and parametrise, nothing else).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentworld.config import Params, load_params
from agentworld.tracking.runs import project_root, start_pipeline_run

# Trigger-form Param name -> params.yaml key path. None (the default) keeps params.yaml's value.
DAG_PARAM_KEYS: dict[str, str] = {
    "episodes_per_domain": "collect.episodes_per_domain",
    "max_steps": "collect.max_steps",
    "hidden_size": "model.hidden_size",
    "num_layers": "model.num_layers",
    "num_experts": "model.num_experts",
    "train_steps": "train.max_steps",
    "batch_size": "train.batch_size",
    "eval_examples": "evaluate.max_examples",
}


def overrides_from_dag_params(dag_params: dict[str, Any]) -> dict[str, Any]:
    return {DAG_PARAM_KEYS[k]: v for k, v in dag_params.items() if k in DAG_PARAM_KEYS and v is not None}


def params_for_run(dag_params: dict[str, Any]) -> Params:
    """params.yaml of the project, with the trigger form's values on top (validated together)."""
    return load_params(project_root() / "params.yaml", overrides_from_dag_params(dag_params))


def run_root(run_id: str) -> Path:
    """The DAG run's own workspace: retries overwrite only their own outputs."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)
    root = project_root() / "runs" / "airflow" / safe
    root.mkdir(parents=True, exist_ok=True)
    return root


def start_run(dag_params: dict[str, Any], run_id: str) -> str:
    params = params_for_run(dag_params)
    return start_pipeline_run(params, run_name=f"airflow-{run_id}")


def run_stage(stage: str, dag_params: dict[str, Any], run_id: str, parent_run_id: str) -> dict[str, Any]:
    from tasks import get_stage

    return get_stage(stage)(params_for_run(dag_params), run_root(run_id), parent_run_id)
