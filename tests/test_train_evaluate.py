"""train and evaluate stages on a tiny model and tiny data, against a real MLflow store."""

from __future__ import annotations

import json

import pytest
from mlflow import MlflowClient

import tasks.build
import tasks.evaluate
import tasks.train
from agentworld.data.io import write_jsonl
from agentworld.models.factory import ModelLoadError, load_local
from tasks.paths import StagePaths
from tests.helpers import make_transitions


@pytest.fixture()
def built_workspace(tmp_path, smoke_params, mlflow_store):
    paths = StagePaths(tmp_path)
    write_jsonl(paths.clean, make_transitions(episodes=40))
    tasks.build.run(smoke_params, tmp_path)
    return paths


def test_train_registers_version_with_lineage_tags(built_workspace, smoke_params):
    params = smoke_params.model_copy(update={"train": smoke_params.train.model_copy(update={"max_steps": 4, "save_steps": 2})})
    summary = tasks.train.run(params, built_workspace.root)
    assert summary["global_step"] == 4
    client = MlflowClient()
    version = client.get_model_version(params.tracking.registered_model, summary["registered_version"])
    assert version.tags["stage"] == "sft"
    assert version.tags["domain"] == "terminal"
    assert len(version.tags["data_md5"]) == 32
    assert version.tags["git_commit"]
    run = client.get_run(summary["run_id"])
    assert run.data.tags["stage"] == "train"
    assert run.data.metrics["model_parameters"] > 0
    assert (built_workspace.world_model / "config.json").exists()

    metrics = tasks.evaluate.run(params, built_workspace.root)
    saved = json.loads(built_workspace.report("eval_metrics.json").read_text())
    assert saved["world_model"]["terminal"]["n"] == metrics["examples"]
    for system in ("world_model", "retrieval"):
        assert 0.0 <= saved[system]["all"]["exact_match"] <= 1.0
    tagged = client.get_model_version(params.tracking.registered_model, summary["registered_version"]).tags
    assert float(tagged["eval.exact_match"]) == pytest.approx(saved["world_model"]["all"]["exact_match"], abs=1e-4)


def test_second_training_run_is_a_new_version(built_workspace, smoke_params):
    params = smoke_params.model_copy(update={"train": smoke_params.train.model_copy(update={"max_steps": 2})})
    first = tasks.train.run(params, built_workspace.root)["registered_version"]
    second = tasks.train.run(params, built_workspace.root)["registered_version"]
    assert int(second) == int(first) + 1


def test_broken_model_path_names_the_setting(tmp_path):
    with pytest.raises(ModelLoadError, match="model.path: .* is not a directory"):
        load_local(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_local(tmp_path / "empty")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="could not load"):
        load_local(tmp_path / "broken")
