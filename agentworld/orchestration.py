"""What Airflow tasks need beyond the stage functions: trigger-form Params -> params
overrides, one workspace folder per DAG run, and the MLflow parent run id.

Kept out of dags/ so the DAG files stay thin (they schedule and parametrise, nothing else).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from agentworld.config import Params, load_params
from agentworld.tracking.runs import project_root, start_pipeline_run

# Trigger-form Param name -> params.yaml key path. None (the default) keeps params.yaml's value.
DAG_PARAM_KEYS: dict[str, str] = {
    "domains": "collect.domains",
    "episodes_per_domain": "collect.episodes_per_domain",
    "max_steps": "collect.max_steps",
    "hidden_size": "model.hidden_size",
    "num_layers": "model.num_layers",
    "num_experts": "model.num_experts",
    "moe_intermediate_size": "model.moe_intermediate_size",
    "cpt_steps": "cpt.max_steps",
    "sft_steps": "sft.max_steps",
    "rl_steps": "rl.max_steps",
    "eval_examples": "evaluate.max_examples",
    "synth_domains": "synthesize.domains",
    "synth_episodes": "synthesize.episodes_per_domain",
    "synth_max_steps": "synthesize.max_steps",
    "faults": "synthesize.control.faults",
    "fault_rate": "synthesize.control.fault_rate",
    "perturbation": "synthesize.control.perturbation",
    "fiction": "synthesize.control.fiction",
    "agent_world_model": "agent.world_model",
    "agent_init": "agent.init",
    "agent_rl_env": "agent.rl.env",
    "agent_rl_budget_s": "agent.rl.budget_s",
    "agent_bc_steps": "agent.bc.max_steps",
    "agent_eval_episodes": "agent.eval_episodes",
    "agent_seed": "agent.seed",
}
#: Trigger-form Params that are not positive integers (JSON-schema types for the form).
PARAM_SCHEMAS: dict[str, dict[str, Any]] = {
    "faults": {"type": ["null", "array"], "items": {"type": "string"}},
    "fault_rate": {"type": ["null", "number"], "minimum": 0, "maximum": 1},
    "perturbation": {"type": ["null", "string"]},
    "fiction": {"type": ["null", "string"]},
    "agent_world_model": {"type": ["null", "string"]},
    "agent_init": {"type": ["null", "string"], "enum": [None, "scratch", "world_model"]},
    "agent_rl_env": {"type": ["null", "string"], "enum": [None, "sim", "real", "none"]},
    "agent_rl_budget_s": {"type": ["null", "number"], "exclusiveMinimum": 0},
    "agent_seed": {"type": ["null", "integer"], "minimum": 0},
}


def trigger_params(names: list[str] | None = None) -> dict[str, Any]:
    """Airflow Params for the trigger form (all knobs, or `names`); empty keeps params.yaml's value."""
    from airflow.sdk import Param

    from agentworld.config import KNOWN_DOMAINS

    out: dict[str, Any] = {}
    for name in names or list(DAG_PARAM_KEYS):
        key = DAG_PARAM_KEYS[name]
        if name in ("domains", "synth_domains"):
            out[name] = Param(None, type=["null", "array"], items={"type": "string", "enum": list(KNOWN_DOMAINS)},
                              description=f"overrides {key} in params.yaml (empty: use params.yaml)")
        elif name in PARAM_SCHEMAS:
            out[name] = Param(None, **PARAM_SCHEMAS[name], description=f"overrides {key} in params.yaml")
        else:
            out[name] = Param(None, type=["null", "integer"], minimum=1, description=f"overrides {key} in params.yaml")
    return out


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


def run_stage(stage: str, dag_params: dict[str, Any], run_id: str, parent_run_id: str,
              domains: list[str] | None = None) -> dict[str, Any]:
    """Run one stage in the DAG run's workspace; per-domain stages take `domains`."""
    from tasks import get_stage

    stage_fn = get_stage(stage)
    if domains is not None:
        return stage_fn(params_for_run(dag_params), run_root(run_id), parent_run_id, domains)
    return stage_fn(params_for_run(dag_params), run_root(run_id), parent_run_id)


def plan_domains(dag_params: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The selected domains that can run here, and the reason for each one that cannot."""
    from agentworld.envs.registry import list_envs

    selected = params_for_run(dag_params).collect.domains
    status = {env.name: env for env in list_envs()}
    runnable = [d for d in selected if d in status and status[d].available]
    skipped = {d: status[d].reason if d in status else "not registered" for d in selected if d not in runnable}
    return runnable, skipped


# ------------------------------------------------------------------ Airflow Assets
# Logical datasets (URIs name them; where a run wrote them is in each event's `extra`).
VALIDATED_URI = "agentworld://datasets/validated-trajectories"
VALIDATED_DOMAIN_URI = "agentworld://datasets/validated/{domain}"
VALIDATED_ALIAS = "agentworld-validated-domain"


def validated_asset() -> Any:
    """All validated domains of a run: what the training DAGs are scheduled on."""
    from airflow.sdk import Asset

    return Asset(uri=VALIDATED_URI, name="validated_trajectories", group="agentworld")


def validated_domain_asset(domain: str) -> Any:
    from airflow.sdk import Asset

    return Asset(uri=VALIDATED_DOMAIN_URI.format(domain=domain), name=f"validated_{domain}", group="agentworld")


def validated_alias() -> Any:
    """Per-domain assets are resolved at run time through this alias (domains come from params)."""
    from airflow.sdk import AssetAlias

    return AssetAlias(VALIDATED_ALIAS)



def validated_domain_event(domain: str, report: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Extra of a per-domain Asset event: where the run wrote the validated rows, and how many."""
    return {"domain": domain, "run_id": run_id, "path": report["clean_path"], "clean_rows": report["clean"],
            "rejected_rows": report["rejected"]}


def validated_set_event(events: list[dict[str, Any]], run_id: str) -> dict[str, Any]:
    """Extra of the whole validated set's Asset event: the run's workspace and each domain's rows."""
    return {"run_id": run_id, "workspace": str(run_root(run_id)),
            "domains": {e["domain"]: {"clean_rows": e["clean_rows"], "path": e["path"]} for e in events}}


# ------------------------------------------------------------------ world_model_training
def triggering_validated_extra(triggering_asset_events: Any) -> dict[str, Any] | None:
    """The extra of the latest validated-set Asset event that triggered a run (None: run by hand)."""
    validated = None
    for asset_events in (triggering_asset_events or {}).values():
        if asset_events:
            validated = asset_events[-1].extra
    return validated


def training_workspace(dag_params: dict[str, Any], run_id: str, validated: dict[str, Any] | None) -> dict[str, Any]:
    """Fill the training run's workspace with the validated rows it trains on.

    `validated` is the extra of the validated-set Asset event that triggered the run (the
    collect_and_validate run's paths); a run triggered by hand takes data/clean/ of the project.
    """
    root = run_root(run_id)
    params = params_for_run(dag_params)
    sources: dict[str, Path] = {}
    for domain in params.collect.domains:
        if validated and domain in validated.get("domains", {}):
            sources[domain] = Path(validated["domains"][domain]["path"])
        else:
            sources[domain] = project_root() / "data" / "clean" / f"{domain}.jsonl"
    missing = {d: str(p) for d, p in sources.items() if not p.exists()}
    if missing:
        raise FileNotFoundError(f"validated rows not found for {missing}; run collect_and_validate (or "
                                f"`dvc repro validate`) first, or choose `domains` that have data")
    for domain, src in sources.items():
        dest = root / "data" / "clean" / f"{domain}.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    return {"workspace": str(root), "domains": {d: str(p) for d, p in sources.items()},
            "source_run": (validated or {}).get("run_id", "project data/clean")}


def run_training_stage(stage: str, dag_params: dict[str, Any], run_id: str, parent_run_id: str) -> dict[str, Any]:
    """Run cpt, sft or rl here, or, with `distributed.compute: cluster`, through the multi-node
    launcher (deepspeed / accelerate launch) on the cluster; returns the stage's report."""
    from agentworld.training.distributed import deepspeed_config, launch_command, write_deepspeed_config

    params = params_for_run(dag_params)
    if params.distributed.compute != "cluster":
        return run_stage(stage, dag_params, run_id, parent_run_id)
    root = run_root(run_id)
    params_file = root / "params.effective.yaml"
    params_file.write_text(json.dumps(params.model_dump(mode="json", by_alias=True), indent=2))
    config = write_deepspeed_config(root / "deepspeed" / f"{stage}.json",
                                    deepspeed_config(params.distributed, getattr(params, stage)))
    argv = launch_command(params.distributed, ["stage", stage, "--params", str(params_file), "--root", str(root)],
                          deepspeed_config_path=config)
    subprocess.run(argv, check=True, cwd=project_root(), env={**os.environ, "AGENTWORLD_PARENT_RUN_ID": parent_run_id})
    return json.loads((root / "reports" / "train" / f"{stage}.json").read_text())


def gate_stage(stage: str, dag_params: dict[str, Any], run_id: str) -> str:
    """Raise GateFailed unless the stage's held-out metric is finite and within `gate.<stage>`."""
    from agentworld.training.gates import enforce_gate

    report = json.loads((run_root(run_id) / "reports" / "train" / f"{stage}.json").read_text())
    return enforce_gate(stage, report, params_for_run(dag_params).gate)


# ------------------------------------------------------------------ nightly_retrain
def nightly_schedule() -> str | None:
    """The cron of `schedule` in params.yaml when `schedule.nightly` is on (production), else None."""
    params = load_params(project_root() / "params.yaml")
    return params.schedule.cron if params.schedule.nightly else None


# ------------------------------------------------------------------ synthetic_trajectories
def simulator_workspace(dag_params: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The run's workspace gets the project's trained model of `synthesize.stage` (linked) and
    its training report, which is what the synthesize stage simulates with."""
    stage = params_for_run(dag_params).synthesize.stage
    root, project = run_root(run_id), project_root()
    model, report = project / "models" / stage, project / "reports" / "train" / f"{stage}.json"
    if not (model / "config.json").exists() or not report.exists():
        raise FileNotFoundError(f"{model}: no trained {stage} model in the project; run `make demo` "
                                f"(or world_model_training) first")
    link = root / "models" / stage
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to(model.resolve(), target_is_directory=True)
    (root / "reports" / "train").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(report, root / "reports" / "train" / f"{stage}.json")
    return {"workspace": str(root), "model": str(model)}


def gated_training_tasks(stage: str) -> tuple[Any, Any]:
    """The Airflow tasks `<stage>` (train cpt, sft or rl) and `gate_<stage>` (fail the run, with
    no retry, when the held-out metric is beyond its floor), shared by the training DAGs."""
    from airflow.sdk import get_current_context, task
    from airflow.sdk.exceptions import AirflowFailException

    def ctx() -> tuple[dict, str]:
        context = get_current_context()
        return dict(context["params"]), context["run_id"]

    @task(task_id=stage)
    def train(parent: str, *_: object) -> dict:
        return run_training_stage(stage, *ctx(), parent)

    @task(task_id=f"gate_{stage}", retries=0)
    def gate(_: dict) -> str:
        try:
            return gate_stage(stage, *ctx())
        except Exception as err:  # a failed gate is final: retrying cannot change the metric
            raise AirflowFailException(str(err)) from err

    return train, gate


# ------------------------------------------------------------------ agent_rl
def agent_workspace(run_id: str) -> Path:
    """Where a DAG run's agent checkpoints and episodes go (data and MLflow are the project's)."""
    return run_root(run_id) / "agent"


def agent_start(dag_params: dict[str, Any], run_id: str) -> str:
    """The agent's MLflow run (it fails here, before any training, if the world model is missing)."""
    from agentworld.agents.train import start_agent_run

    return start_agent_run(params_for_run(dag_params), project_root(), tags={"airflow_run_id": run_id})


def agent_train(dag_params: dict[str, Any], run_id: str, agent_run_id: str) -> dict[str, float]:
    from agentworld.agents.train import train_in_environment

    return train_in_environment(params_for_run(dag_params), project_root(), agent_workspace(run_id), agent_run_id)


def agent_evaluate(dag_params: dict[str, Any], run_id: str, agent_run_id: str) -> dict[str, Any]:
    from agentworld.agents.train import evaluate_and_register

    return evaluate_and_register(params_for_run(dag_params), project_root(), agent_workspace(run_id), agent_run_id)
