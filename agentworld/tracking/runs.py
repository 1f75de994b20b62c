"""MLflow runs: where the store lives, how stage runs are grouped, what lineage they carry.

Embedded default: a SQLite database and an artifact folder under `mlflow/` in the project
root (git-ignored). Set MLFLOW_TRACKING_URI (and MLFLOW_TRACKING_USERNAME/PASSWORD for a server
with auth) to point the same code at a shared server; its experiments then store artifacts
wherever the server proxies them (the production stack: an S3 bucket).
A pipeline run is a parent run; each stage opens a child run under it, even from another
process, through the AGENTWORLD_PARENT_RUN_ID variable, so two pipeline runs compare side
by side in the MLflow UI.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentworld.config import Params

if TYPE_CHECKING:
    import mlflow

PARENT_RUN_ENV = "AGENTWORLD_PARENT_RUN_ID"
#: Where `agentworld stage` also writes its summary (an Airflow task reads it back).
SUMMARY_ENV = "AGENTWORLD_STAGE_SUMMARY"
#: The DVC experiment an Airflow run's workspace is saved as (a lineage tag of its runs).
EXPERIMENT_ENV = "AGENTWORLD_DVC_EXPERIMENT"


def project_root() -> Path:
    """AGENTWORLD_HOME if set (Airflow workers), else the working directory (DVC, CLI)."""
    return Path(os.environ.get("AGENTWORLD_HOME", Path.cwd())).resolve()


def tracking_uri(root: Path | None = None) -> str:
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    root = root or project_root()
    return f"sqlite:///{root / 'mlflow' / 'mlruns.db'}"


def artifact_root(root: Path | None = None) -> str | None:
    """Where a new experiment's artifacts go: AGENTWORLD_ARTIFACT_ROOT if set; None against a
    tracking server (http/https), so the server assigns its own location and proxies every upload
    to its object store (`mlflow server --artifacts-destination`); else mlflow/artifacts/."""
    if os.environ.get("AGENTWORLD_ARTIFACT_ROOT"):
        return os.environ["AGENTWORLD_ARTIFACT_ROOT"]
    if tracking_uri(root).startswith(("http://", "https://")):
        return None
    return (root or project_root()).joinpath("mlflow", "artifacts").as_uri()


def configure(experiment: str, root: Path | None = None) -> str:
    """Point MLflow at the project's store and make sure the experiment exists; return its id."""
    import mlflow  # imported when used: DAG files import this module and must parse fast

    root = root or project_root()
    (root / "mlflow").mkdir(exist_ok=True)
    mlflow.set_tracking_uri(tracking_uri(root))
    found = mlflow.get_experiment_by_name(experiment)
    if found is None:
        experiment_id = mlflow.create_experiment(experiment, artifact_location=artifact_root(root))
    else:
        experiment_id = found.experiment_id
    mlflow.set_experiment(experiment_id=experiment_id)
    return experiment_id


def git_commit(root: Path | None = None) -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root or project_root(), capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "unknown"


def file_md5(path: str | Path) -> str:
    """The hash DVC 3 records for a single-file output (md5 of its bytes)."""
    digest = hashlib.md5()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def lineage_tags(root: Path | None = None) -> dict[str, str]:
    """The code and data versions a run used: the git commit, and the md5 of the DVC lock of the
    workspace it read and wrote. A workspace other than the project (an Airflow run's
    runs/airflow/<run_id>/, a git worktree saved as a DVC experiment) is named too, with that
    experiment; one without a dvc.lock is tagged `none`, so no run claims a lineage it lacks."""
    root = (root or project_root()).resolve()
    lock = root / "dvc.lock"
    tags = {"git_commit": git_commit(root), "dvc_lock_md5": file_md5(lock) if lock.exists() else "none"}
    if not lock.exists() or root != project_root():
        tags["workspace"] = str(root)
    if os.environ.get(EXPERIMENT_ENV):
        tags["dvc_experiment"] = os.environ[EXPERIMENT_ENV]
    return tags


def start_pipeline_run(params: Params, run_name: str | None = None, root: Path | None = None) -> str:
    """Open (and close) the parent run a pipeline's stage runs hang under; return its id."""
    import mlflow  # imported when used: DAG files import this module and must parse fast

    configure(params.tracking.experiment, root)
    with mlflow.start_run(run_name=run_name or f"pipeline-{params.profile}") as run:
        mlflow.set_tags({"agentworld.kind": "pipeline", "profile": params.profile, **lineage_tags(root)})
        mlflow.log_params(params.flat())
        return run.info.run_id


@contextmanager
def stage_run(stage: str, params: Params, section: Any, parent_run_id: str | None = None,
              domain: str | None = None, root: Path | None = None) -> Iterator[mlflow.ActiveRun]:
    """One MLflow run for one stage (of one domain, for per-domain stages) in workspace `root`,
    nested under the pipeline's parent run when there is one."""
    import mlflow  # imported when used: DAG files import this module and must parse fast

    configure(params.tracking.experiment)
    parent = parent_run_id or os.environ.get(PARENT_RUN_ENV) or None
    run_name = f"{stage}:{domain}" if domain else stage
    with mlflow.start_run(run_name=run_name, parent_run_id=parent, nested=parent is not None) as run:
        tags = {"agentworld.kind": "stage", "stage": stage, "profile": params.profile, **lineage_tags(root)}
        if domain:
            tags["domain"] = domain
        mlflow.set_tags(tags)
        if hasattr(section, "model_dump"):
            flat = {f"{stage}.{k}": v for k, v in _flatten(section.model_dump(mode="json")).items()}
            mlflow.log_params(flat)
        yield run


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out
