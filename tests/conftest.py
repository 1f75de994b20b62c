"""Shared fixtures: every test gets its own MLflow store and workspace, never the project's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentworld.config import Params, load_params

PROJECT = Path(__file__).resolve().parents[1]
SMOKE_PARAMS = PROJECT / "profiles" / "smoke.yaml"
# The DAG files' helper package (dags/agentworld_dags), importable as Airflow imports it.
if str(PROJECT / "dags") not in sys.path:
    sys.path.insert(0, str(PROJECT / "dags"))


@pytest.fixture()
def mlflow_store(tmp_path, monkeypatch) -> str:
    """A fresh SQLite tracking store for this test."""
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("AGENTWORLD_ARTIFACT_ROOT", (tmp_path / "artifacts").as_uri())
    monkeypatch.delenv("AGENTWORLD_PARENT_RUN_ID", raising=False)
    mlflow.set_tracking_uri(uri)
    yield uri
    while mlflow.active_run():
        mlflow.end_run()


@pytest.fixture()
def smoke_params() -> Params:
    return load_params(SMOKE_PARAMS)


def copy_project(dest: Path) -> Path:
    """A clean copy of the project (its files, no outputs or stores), committed to a new git repo."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=PROJECT, capture_output=True, text=True, check=True,
    ).stdout.split()
    for rel in listed:
        src = PROJECT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "copy"]):
        subprocess.run(cmd, cwd=dest, check=True, env=env)
    return dest
