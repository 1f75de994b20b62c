"""What Airflow tasks need beyond the stage functions: the trigger form (generated from the
params schema), the run's resolved settings, one workspace folder per DAG run, and running
each stage in a process of its own.

Kept out of dags/ so the DAG files stay thin (they schedule and parametrise, nothing else).

Why every stage runs as its own process (`python -m agentworld.cli stage ...`): Airflow 3's
task runner is the `airflow` console script, and it withholds the metadata database from task
code (its connection string becomes `airflow-db-not-allowed:///`). Python's `spawn` start
method re-imports the parent's main script in every child, so any worker pool, vLLM engine or
trainer that spawns processes inside a task would re-import Airflow and die in its ORM set-up.
A stage process has our CLI as its main module, the same command `dvc repro` runs.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from agentworld.config import KNOWN_DOMAINS, Params, ParamsError, load_params, parse_params
from agentworld.tracking.runs import PARENT_RUN_ENV, project_root, start_pipeline_run


class RunRefused(ParamsError):
    """A DAG run whose settings or inputs cannot work: it fails once, naming the reason (no retry)."""


# ------------------------------------------------------------------ the trigger form
#: Trigger-form field -> (params.yaml key path, what it does). Types, bounds and choices come from
#: the pydantic schema of that key; the default shown is params.yaml's value.
FORM_FIELDS: dict[str, tuple[str, str]] = {
    "domains": ("collect.domains", "Domains to collect from (unavailable ones are skipped with their reason)."),
    "episodes_per_domain": ("collect.episodes_per_domain",
                            "Episodes collected per selected domain. Changing it applies the new count to EVERY "
                            "selected domain (the per-domain counts of `episodes` are then dropped), unless you "
                            "also edit `episodes`."),
    "episodes": ("collect.episodes",
                 "Per-domain episode counts that win over episodes_per_domain for the domains listed "
                 "(params.yaml's collect.episodes). Set {} to give every domain episodes_per_domain."),
    "max_steps": ("collect.max_steps", "Steps per collected episode at most."),
    "hidden_size": ("model.hidden_size", "Width of the from-scratch world model."),
    "num_layers": ("model.num_layers", "Transformer layers of the from-scratch world model."),
    "num_experts": ("model.num_experts", "MoE experts per layer."),
    "moe_intermediate_size": ("model.moe_intermediate_size", "Hidden size of each expert."),
    "cpt_steps": ("cpt.max_steps", "Optimiser steps of continual pre-training."),
    "sft_steps": ("sft.max_steps", "Optimiser steps of supervised fine-tuning."),
    "rl_steps": ("rl.max_steps", "GRPO steps of the RL stage."),
    "eval_examples": ("evaluate.max_examples", "Held-out records the evaluate stage scores."),
    "synth_domains": ("synthesize.domains", "Domains simulated by the world model."),
    "synth_episodes": ("synthesize.episodes_per_domain", "Simulated episodes per domain."),
    "synth_max_steps": ("synthesize.max_steps", "Steps per simulated episode at most."),
    "synth_stage": ("synthesize.stage", "Which trained stage's model (models/<stage> of the project) simulates."),
    "faults": ("synthesize.control.faults", "Faults the simulator injects (e.g. timeouts, permission denied)."),
    "fault_rate": ("synthesize.control.fault_rate", "Share of steps that get a fault."),
    "perturbation": ("synthesize.control.perturbation", "A change to the initial state, in words (empty: none)."),
    "fiction": ("synthesize.control.fiction", "A fictional world to simulate consistently (empty: none)."),
    "agent_world_model": ("agent.world_model", "The world model the agent trains in (registry URI or directory)."),
    "agent_init": ("agent.init", "scratch: fresh weights; world_model: the world model's weights (warm-up)."),
    "agent_rl_env": ("agent.rl.env", "Where agent RL runs: sim (the world model), real, or none (BC only)."),
    "agent_rl_budget_s": ("agent.rl.budget_s", "Wall-clock budget of agent RL, seconds."),
    "agent_bc_steps": ("agent.bc.max_steps", "Behaviour-cloning optimiser steps."),
    "agent_eval_episodes": ("agent.eval_episodes", "Held-out real tasks the agent is evaluated on."),
    "agent_seed": ("agent.seed", "Seed of the agent's initialisation and training."),
}


def _section_and_leaf(params: Params, key: str) -> tuple[Any, str]:
    obj: Any = params
    *sections, leaf = key.split(".")
    for part in sections:
        obj = getattr(obj, "validate_" if part == "validate" else part)
    return obj, leaf


def field_schema(params: Params, key: str) -> dict[str, Any]:
    """The JSON schema of one params.yaml key (type, bounds, choices), in the shape Airflow's form reads."""
    section, leaf = _section_and_leaf(params, key)
    schema = dict(type(section).model_json_schema()["properties"][leaf])
    for drop in ("title", "default"):
        schema.pop(drop, None)
    if "anyOf" in schema:  # Optional[X]: the form takes a type list, with null allowed
        options = schema.pop("anyOf")
        schema["type"] = [o["type"] for o in options if "type" in o]
        for option in options:
            schema.update({k: v for k, v in option.items() if k != "type"})
    if leaf == "domains":
        schema["items"] = {"type": "string", "enum": list(KNOWN_DOMAINS)}
    return schema


def trigger_params(names: list[str] | None = None) -> dict[str, Any]:
    """Airflow Params of the trigger form: params.yaml's values as defaults, the schema's bounds.

    Read when the DAG file is parsed, so the form shows what a run would use now; a value
    outside the schema is refused by the form (and the REST API) before any task starts.
    """
    from airflow.sdk import Param

    params = load_params(project_root() / "params.yaml")
    out: dict[str, Any] = {}
    for name in names or list(FORM_FIELDS):
        key, description = FORM_FIELDS[name]
        section, leaf = _section_and_leaf(params, key)
        default = getattr(section, leaf)
        default = default.model_dump(mode="json") if hasattr(default, "model_dump") else default
        out[name] = Param(default, description=f"{description} (params.yaml: {key})", title=name,
                          section=key.split(".")[0], **field_schema(params, key))
    return out


def overrides_from_form(form: dict[str, Any], base: Params) -> dict[str, Any]:
    """Trigger-form values -> params.yaml key paths. A changed `episodes_per_domain` with
    untouched per-domain `episodes` applies to every selected domain (what the user asked for)."""
    overrides = {FORM_FIELDS[k][0]: v for k, v in form.items() if k in FORM_FIELDS and v is not None}
    per_domain_given = "episodes" in form and form["episodes"] != base.collect.episodes
    if (form.get("episodes_per_domain") not in (None, base.collect.episodes_per_domain)
            and not per_domain_given):
        overrides["collect.episodes"] = {}
    return overrides


def apply_overrides(params: Params, overrides: dict[str, Any], source: str) -> Params:
    """Replace (not merge) each dotted key's value, then validate the whole again."""
    raw = params.model_dump(mode="json", by_alias=True)
    for key, value in overrides.items():
        target = raw
        *sections, leaf = key.split(".")
        for part in sections:
            target = target[part]
        target[leaf] = value
    return parse_params(raw, source)


# ------------------------------------------------------------------ a run's settings and workspace
def run_folder(run_id: str) -> str:
    """The DAG run's folder under runs/airflow/ (a run id made safe for a path)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)


def run_root(run_id: str) -> Path:
    """The DAG run's own workspace: retries overwrite only their own outputs."""
    root = project_root() / "runs" / "airflow" / run_folder(run_id)
    root.mkdir(parents=True, exist_ok=True)
    return root


def run_params_path(run_id: str) -> Path:
    return run_root(run_id) / "params.yaml"


def resolve_run(form: dict[str, Any], run_id: str, *, domains: list[str] | None = None,
                collects: bool = False) -> Params:
    """The run's settings, fixed once by its first task: params.yaml, the trigger form on top
    (and `domains` of a triggering Asset event), validated, checked to be workable, and
    written to the run's workspace, so every later task of the run reads the same settings."""
    base = load_params(project_root() / "params.yaml")
    overrides = overrides_from_form(form, base)
    if domains is not None:
        overrides["collect.domains"] = domains
    params = apply_overrides(base, overrides, f"params.yaml with the trigger form of run {run_id}")
    if collects:
        from agentworld.data.build import check_split

        check_split(params.collect, params.build)
    run_params_path(run_id).write_text(yaml.safe_dump(params.model_dump(mode="json", by_alias=True), sort_keys=False))
    return params


def run_params(run_id: str) -> Params:
    """The settings the run's first task fixed (see `resolve_run`)."""
    path = run_params_path(run_id)
    if not path.exists():
        raise RunRefused(f"{path}: not written; the run's first task resolves its settings")
    return load_params(path)


def start_run(run_id: str) -> str:
    """The MLflow parent run the run's stage runs hang under."""
    return start_pipeline_run(run_params(run_id), run_name=f"airflow-{run_id}")


# ------------------------------------------------------------------ running a stage
def _die_with_parent() -> None:
    """In the child: get SIGKILL when the task process dies (Linux), so no stage outlives its task."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def run_cli(args: list[str], parent_run_id: str | None, *, argv: list[str] | None = None) -> None:
    """`python -m agentworld.cli ARGS` (or the launcher's `argv`) in a process of its own; its
    output goes to the task log. Exit status 2 is a settings error (not retried); others retry."""
    argv = argv or [sys.executable, "-m", "agentworld.cli", *args]
    env = {**os.environ, "AGENTWORLD_HOME": str(project_root())}
    if parent_run_id:
        env[PARENT_RUN_ENV] = parent_run_id
    print("running:", " ".join(argv), flush=True)
    done = subprocess.run(argv, cwd=project_root(), env=env, preexec_fn=_die_with_parent)
    what = " ".join(args[:2])
    if done.returncode == 2:
        raise RunRefused(f"`agentworld {what}` refused its settings (exit status 2); the reason is in the log above")
    if done.returncode != 0:
        raise RuntimeError(f"`agentworld {what}` failed with exit status {done.returncode}; see the log above")


def run_stage(stage: str, run_id: str, parent_run_id: str, domains: list[str] | None = None) -> dict[str, Any]:
    """Run one stage in the DAG run's workspace, with the run's settings; returns its summary.

    With `distributed.compute: cluster`, training stages go through the multi-node launcher
    (deepspeed / accelerate launch) and their summary is the stage's training report.
    """
    from tasks import TRAINING_STAGES

    root, params = run_root(run_id), run_params(run_id)
    args = ["stage", stage, "--params", str(run_params_path(run_id)), "--root", str(root)]
    args += [flag for d in (domains or []) for flag in ("--domain", d)]
    if stage in TRAINING_STAGES and params.distributed.compute == "cluster":
        from agentworld.training.distributed import deepspeed_config, launch_command, write_deepspeed_config

        config = write_deepspeed_config(root / "deepspeed" / f"{stage}.json",
                                        deepspeed_config(params.distributed, getattr(params, stage)))
        run_cli(args, parent_run_id, argv=launch_command(params.distributed, args, deepspeed_config_path=config))
        return json.loads((root / "reports" / "train" / f"{stage}.json").read_text())
    summary = root / "reports" / "airflow" / f"{stage}{''.join('-' + d for d in domains or [])}.json"
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.unlink(missing_ok=True)
    run_cli(args + ["--summary", str(summary)], parent_run_id)
    return json.loads(summary.read_text())


def plan_domains(run_id: str) -> tuple[list[str], dict[str, str]]:
    """The run's selected domains that can run here, and the reason for each one that cannot."""
    from agentworld.domains import list_envs

    selected = run_params(run_id).collect.domains
    status = {env.name: env for env in list_envs()}
    runnable = [d for d in selected if d in status and status[d].available]
    skipped = {d: status[d].reason if d in status else "not registered" for d in selected if d not in runnable}
    return runnable, skipped


T = TypeVar("T", bound=Callable[..., Any])


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


def training_workspace(form: dict[str, Any], run_id: str, validated: dict[str, Any] | None) -> dict[str, Any]:
    """Resolve the training run's settings and fill its workspace with the validated rows it trains on.

    `validated` is the extra of the validated-set Asset event that triggered the run: the run
    trains on exactly the domains and rows that collect_and_validate run published. A run
    triggered by hand takes collect.domains and the project's data/clean/.
    """
    published = sorted((validated or {}).get("domains", {})) or None
    params = resolve_run(form, run_id, domains=published)
    root = run_root(run_id)
    sources: dict[str, Path] = {}
    for domain in params.collect.domains:
        if published:
            sources[domain] = Path(validated["domains"][domain]["path"])  # type: ignore[index]
        else:
            sources[domain] = project_root() / "data" / "clean" / f"{domain}.jsonl"
    missing = {d: str(p) for d, p in sources.items() if not p.exists()}
    if missing:
        raise RunRefused(f"validated rows not found for {missing}; run collect_and_validate (or "
                         f"`dvc repro validate`) first, or choose `domains` that have data")
    for domain, src in sources.items():
        dest = root / "data" / "clean" / f"{domain}.jsonl"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    return {"workspace": str(root), "domains": {d: str(p) for d, p in sources.items()},
            "source_run": (validated or {}).get("run_id", "project data/clean")}


def gate_stage(stage: str, run_id: str) -> str:
    """Raise GateFailed unless the stage's held-out metric is finite and within `gate.<stage>`."""
    from agentworld.training.gates import enforce_gate

    report = json.loads((run_root(run_id) / "reports" / "train" / f"{stage}.json").read_text())
    return enforce_gate(stage, report, run_params(run_id).gate)


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

    train = stage_task(stage)

    @task(task_id=f"gate_{stage}", retries=0)
    def gate(_: dict) -> str:
        try:
            return gate_stage(stage, get_current_context()["run_id"])
        except Exception as err:  # a failed gate is final: retrying cannot change the metric
            raise AirflowFailException(str(err)) from err

    return train, gate


def gated_training_chain(parent: Any, *inputs: Any) -> Any:
    """cpt -> gate_cpt -> sft -> gate_sft -> rl -> gate_rl -> evaluate -> promote after `inputs`
    (the corpora and build tasks): the training DAGs' shared chain; returns the promote task."""
    from tasks import TRAINING_STAGES

    passed = inputs
    for stage in TRAINING_STAGES:
        train, gate = gated_training_tasks(stage)
        passed = (gate(train(parent, *passed)),)
    return stage_task("promote")(parent, stage_task("evaluate")(parent, *passed))


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


# ------------------------------------------------------------------ nightly_retrain
def nightly_schedule() -> str | None:
    """The cron of `schedule` in params.yaml when `schedule.nightly` is on (production), else None."""
    params = load_params(project_root() / "params.yaml")
    return params.schedule.cron if params.schedule.nightly else None


# ------------------------------------------------------------------ synthetic_trajectories
def simulator_workspace(form: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Resolve the run's settings; its workspace gets the project's trained model of
    `synthesize.stage` (linked) and its training report, which is what the synthesize stage simulates with."""
    stage = resolve_run(form, run_id).synthesize.stage
    root, project = run_root(run_id), project_root()
    model, report = project / "models" / stage, project / "reports" / "train" / f"{stage}.json"
    if not (model / "config.json").exists() or not report.exists():
        raise RunRefused(f"{model}: no trained {stage} model in the project; run `make demo` "
                         f"(or world_model_training) first")
    link = root / "models" / stage
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.exists():
        link.symlink_to(model.resolve(), target_is_directory=True)
    (root / "reports" / "train").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(report, root / "reports" / "train" / f"{stage}.json")
    return {"workspace": str(root), "model": str(model)}


# ------------------------------------------------------------------ agent_rl
def agent_phase(phase: str, run_id: str, agent_run_id: str | None = None) -> dict[str, Any]:
    """One phase of `agentworld agent train` (start, train, evaluate) for the DAG run, in its own
    process; checkpoints and episodes go under the run's workspace, data and MLflow are the project's."""
    out = run_root(run_id) / "agent"
    summary = run_root(run_id) / "reports" / "airflow" / f"agent-{phase}.json"
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.unlink(missing_ok=True)
    args = ["agent", "train", "--phase", phase, "--params", str(run_params_path(run_id)), "--out", str(out),
            "--summary", str(summary), "--tag", f"airflow_run_id={run_id}"]
    if agent_run_id:
        args += ["--run-id", agent_run_id]
    run_cli(args, None)
    return json.loads(summary.read_text())
