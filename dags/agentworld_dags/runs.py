"""A DAG run's settings, fixed once by its first task, and its own workspace
(runs/airflow/<run_id>/, a DVC experiment of the project: see `workspace`), filled with what
the run starts from."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from agentworld.config import KNOWN_DOMAINS, Params, ParamsError, load_params
from agentworld.tracking.runs import project_root, start_pipeline_run
from agentworld_dags.form import apply_overrides, overrides_from_form
from agentworld_dags.workspace import create_workspace


class RunRefused(ParamsError):
    """A DAG run whose settings or inputs cannot work: it fails once, naming the reason (no retry)."""


def run_folder(run_id: str) -> str:
    """The DAG run's folder under runs/airflow/ (a run id made safe for a path)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)


def run_root(run_id: str) -> Path:
    """The DAG run's own workspace (a git worktree of the project, made by its first task):
    retries overwrite only their own outputs."""
    return project_root() / "runs" / "airflow" / run_folder(run_id)


def run_params_path(run_id: str) -> Path:
    return run_root(run_id) / "params.yaml"


def resolve_run(form: dict[str, Any], run_id: str, *, domains: list[str] | None = None,
                collects: bool = False) -> Params:
    """The run's settings, fixed once by its first task: params.yaml, the trigger form on top
    (and `domains` of a triggering Asset event), validated, checked to be workable, and
    written as the params.yaml of the run's workspace (created here), so every later task of
    the run, and DVC, read the same settings."""
    base = load_params(project_root() / "params.yaml")
    overrides = overrides_from_form(form, base)
    if domains is not None:
        overrides["collect.domains"] = domains
    params = apply_overrides(base, overrides, f"params.yaml with the trigger form of run {run_id}")
    if collects:
        from agentworld.data.build import check_split

        check_split(params.collect, params.build)
    create_workspace(project_root(), run_root(run_id))
    run_params_path(run_id).write_text(yaml.safe_dump(params.model_dump(mode="json", by_alias=True), sort_keys=False))
    link_recordings(params, run_root(run_id))
    return params


def link_recordings(params: Params, root: Path) -> None:
    """Put the project's recordings (`recordings:` in params.yaml; untracked by git, so not in the
    worktree) into the run's workspace, hard-linked, for its record@NAME stages to read."""
    for name, folder in params.recordings.items():
        src, dest = project_root() / folder, root / folder
        if not (src / "description.json").exists():
            raise RunRefused(f"recordings.{name}: {src} holds no recording (record it with `agentworld record mcp "
                             f"--name {name} -- COMMAND`, or `dvc pull` it)")
        if not dest.exists():
            shutil.copytree(src, dest, copy_function=_link_or_copy)


def run_params(run_id: str) -> Params:
    """The settings the run's first task fixed (see `resolve_run`)."""
    path = run_params_path(run_id)
    if not path.exists():
        raise RunRefused(f"{path}: not written; the run's first task resolves its settings")
    return load_params(path)


def start_run(run_id: str) -> str:
    """The MLflow parent run the run's stage runs hang under."""
    return start_pipeline_run(run_params(run_id), run_name=f"airflow-{run_id}")


def training_workspace(form: dict[str, Any], run_id: str, validated: dict[str, Any] | None) -> dict[str, Any]:
    """Resolve the training run's settings and fill its workspace with the validated rows it trains on.

    `validated` is the extra of the validated-set Asset event that triggered the run: the run
    trains on exactly the domains and rows that collect_and_validate run published. A run
    triggered by hand takes collect.domains, the recordings and the project's data/clean/.
    """
    published = sorted((validated or {}).get("domains", {})) or None
    # Recorded systems among them stay `recordings:`, not collect.domains.
    collected = [d for d in published if d in KNOWN_DOMAINS] if published else None
    params = resolve_run(form, run_id, domains=collected or None)
    root = run_root(run_id)
    sources: dict[str, Path] = {}
    for domain in params.dataset_domains:
        if published and domain in validated["domains"]:  # type: ignore[index]
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


def _link_or_copy(src: str, dest: str) -> None:
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


def simulator_workspace(form: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Resolve the run's settings; its workspace gets the project's trained model of
    `synthesize.stage` and its training report (the synthesize stage's DVC dependencies), which
    is what the stage simulates with. Files are hard links where the file system allows."""
    stage = resolve_run(form, run_id).synthesize.stage
    root, project = run_root(run_id), project_root()
    model, report = project / "models" / stage, project / "reports" / "train" / f"{stage}.json"
    if not (model / "config.json").exists() or not report.exists():
        raise RunRefused(f"{model}: no trained {stage} model in the project; run `make demo` "
                         f"(or world_model_training) first")
    copy = root / "models" / stage
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(model.resolve(), copy, copy_function=_link_or_copy)
    (root / "reports" / "train").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(report, root / "reports" / "train" / f"{stage}.json")
    return {"workspace": str(root), "model": str(model)}

