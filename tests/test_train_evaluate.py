"""sft and evaluate stages on a tiny model and tiny data, against a real MLflow store."""

from __future__ import annotations

import json

import pytest
from mlflow import MlflowClient

import stages.build
import stages.evaluate
import stages.sft
import stages.tokenizer
from agentworld.data.build import load_examples
from agentworld.data.corpora import build_corpora
from agentworld.data.io import write_jsonl
from agentworld.models.factory import ModelLoadError, load_local
from stages.paths import StagePaths
from tests.helpers import make_transitions


@pytest.fixture()
def built_workspace(tmp_path, smoke_params, mlflow_store):
    paths = StagePaths(tmp_path)
    write_jsonl(paths.clean("terminal"), make_transitions(episodes=40))
    stages.build.run(smoke_params, tmp_path)
    build_corpora(paths.corpora, smoke_params.corpora.sources)
    stages.tokenizer.run(smoke_params, tmp_path)
    return paths


def _sft_only(params, **sft):
    return params.model_copy(update={
        "sft": params.sft.model_copy(update={"init": "scratch", **sft}),
        "evaluate": params.evaluate.model_copy(update={"stage": "sft"}),
    })


def test_evaluate_scores_the_configured_stage_and_tags_its_version(built_workspace, smoke_params):
    params = _sft_only(smoke_params, max_steps=4, save_steps=2)
    summary = stages.sft.run(params, built_workspace.root)
    assert summary["global_step"] == 4
    client = MlflowClient()
    run = client.get_run(summary["run_id"])
    assert run.data.tags["stage"] == "sft"
    assert run.data.metrics["model_parameters"] > 0
    assert (built_workspace.stage_model("sft") / "config.json").exists()

    metrics = stages.evaluate.run(params, built_workspace.root)
    saved = json.loads(built_workspace.report("eval_metrics.json").read_text())
    assert saved["world_model"]["terminal"]["n"] == metrics["examples"]
    assert saved["stage"] == "sft"
    for system in ("world_model", "retrieval"):
        assert 0.0 <= saved[system]["all"]["exact_match"] <= 1.0
    tagged = client.get_model_version(params.tracking.registered_model, summary["registered_version"]).tags
    assert float(tagged["eval.exact_match"]) == pytest.approx(saved["world_model"]["all"]["exact_match"], abs=1e-4)


def test_evaluate_without_the_stage_model_names_the_stage_to_run(built_workspace, smoke_params):
    with pytest.raises(FileNotFoundError, match="run `agentworld stage rl` first"):
        stages.evaluate.run(smoke_params, built_workspace.root)


def test_second_training_run_is_a_new_version(built_workspace, smoke_params):
    params = _sft_only(smoke_params, max_steps=2)
    first = stages.sft.run(params, built_workspace.root)["registered_version"]
    second = stages.sft.run(params, built_workspace.root)["registered_version"]
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


def test_episodes_become_conversations_with_loss_on_observations_only(tmp_path):
    from agentworld.config import BuildParams, ModelParams
    from agentworld.data.build import build_datasets
    from agentworld.models.factory import build_model
    from agentworld.training.sft import to_conversations

    build_datasets(make_transitions(episodes=12, turns=4), BuildParams(test_fraction=0.3), tmp_path)
    examples = load_examples(tmp_path / "sft/train.jsonl")
    _, tokenizer = build_model(ModelParams(vocab_size=300), [e.system + e.action + e.observation for e in examples])

    whole = to_conversations(examples, tokenizer, max_seq_len=2048)
    assert len(whole) == len({e.id.rsplit(":", 1)[0] for e in examples})  # one conversation per episode
    assert sum(m["role"] == "assistant" for c in whole for m in c) == len(examples)

    windows = to_conversations(examples, tokenizer, max_seq_len=120)
    assert len(windows) > len(whole)
    assert all(c[0]["role"] == "system" and c[1]["role"] == "user" for c in windows)
    assert sum(m["role"] == "assistant" for c in windows for m in c) == len(examples)

    rendered = tokenizer.apply_chat_template(whole[0], tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    trained = tokenizer.decode([t for t, m in zip(rendered["input_ids"], rendered["assistant_masks"]) if m])
    assert "**Environment Observation:**" in trained
    assert whole[0][1]["content"] not in trained  # the agent's action carries no loss
