"""cpt -> sft -> rl on a tiny model and tiny data, against a real MLflow store: each stage trains,
hands its model to the next, reports a held-out metric and registers a version with lineage."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from mlflow import MlflowClient

import stages.build
import stages.cpt
import stages.evaluate
import stages.rl
import stages.sft
import stages.tokenizer
from agentworld.config import GateParams, StageGate
from agentworld.data.build import load_examples
from agentworld.data.corpora import build_corpora
from agentworld.data.io import write_jsonl
from agentworld.data.retrieval import MEMORY_FILE
from agentworld.models.backends import resolve_registry_model
from agentworld.models.factory import ModelLoadError, load_local
from agentworld.training.cpt import mix_documents, trajectory_streams, transition_stream
from agentworld.training.gates import GateFailed, check_gate, enforce_gate
from agentworld.training.rl import ParentSnapshot
from agentworld.training.sft import to_conversations, without_reasoning
from stages.paths import StagePaths
from tests.conftest import PROJECT
from tests.helpers import make_transitions

CORPORA = ["mcp_schemas"]  # the cheapest real corpus; the corpora tests cover every source


@pytest.fixture()
def params(smoke_params):
    return smoke_params.model_copy(update={"corpora": smoke_params.corpora.model_copy(update={"sources": CORPORA})})


@pytest.fixture()
def workspace(tmp_path, params, mlflow_store):
    paths = StagePaths(tmp_path)
    write_jsonl(paths.clean("terminal"), make_transitions(episodes=40))
    stages.build.run(params, tmp_path)
    build_corpora(paths.corpora, CORPORA)
    stages.tokenizer.run(params, tmp_path)
    return paths


def test_stages_chain_and_register_three_versions_with_lineage(workspace, params):
    client = MlflowClient()
    reports = {}
    for stage in (stages.cpt, stages.sft, stages.rl):
        reports[stage.__name__.split(".")[1]] = stage.run(params, workspace.root)
    cpt, sft, rl = reports["cpt"], reports["sft"], reports["rl"]
    assert cpt["global_step"] == params.cpt.max_steps and sft["global_step"] == params.sft.max_steps
    assert rl["global_step"] == params.rl.max_steps
    assert [int(cpt["registered_version"]) + i for i in (0, 1, 2)] == [
        int(cpt["registered_version"]), int(sft["registered_version"]), int(rl["registered_version"])]

    name = params.tracking.registered_model
    versions = {s: client.get_model_version(name, r["registered_version"]) for s, r in reports.items()}
    assert {s: v.tags["stage"] for s, v in versions.items()} == {"cpt": "cpt", "sft": "sft", "rl": "rl"}
    assert versions["cpt"].tags["parent_version"] == "none"
    assert versions["sft"].tags["parent_version"] == cpt["registered_version"]
    assert versions["rl"].tags["parent_version"] == sft["registered_version"]
    for version in versions.values():
        assert len(version.tags["data_md5"]) == 32 and version.tags["git_commit"]
        assert version.tags["domain"] == "terminal"

    assert math.isfinite(cpt["eval_metrics"]["eval_loss"]) and cpt["eval_metrics"]["eval_perplexity"] > 1
    assert math.isfinite(sft["eval_metrics"]["eval_loss"])
    assert 0.0 <= rl["eval_metrics"]["eval_reward"] <= 1.0
    assert 0.0 <= rl["eval_metrics"]["eval_token_f1"] <= 1.0
    assert 0.0 <= rl["eval_metrics"]["eval_exact_match"] <= 1.0
    for component in ("exact_match", "structure", "format", "facts", "rubric"):
        assert f"eval_reward_{component}" in rl["eval_metrics"]
    # GRPO's model is kept only if not worse than SFT's on the same held-out turns; else SFT's weights.
    from safetensors.torch import load_file
    sft_weights, rl_weights = (load_file(workspace.stage_model(s) / "model.safetensors") for s in ("sft", "rl"))
    same = all(torch.equal(v, rl_weights[k]) for k, v in sft_weights.items())
    assert same == (rl["eval_metrics"]["rl_kept_parent"] == 1.0), rl["eval_metrics"]
    run = client.get_run(rl["run_id"])
    logged = set(run.data.metrics)
    for component in ("exact_match", "structure", "format", "facts", "rubric"):  # every component, separately
        assert any(component in key and key.startswith("train/rewards") or f"rewards/reward_{component}" in key
                   for key in logged), (component, sorted(logged))
    assert json.loads(workspace.train_report("rl").read_text())["parent_version"] == sft["registered_version"]

    # The retrieval memory the chat stages trained with travels with the registered version.
    memory = (workspace.sft_train.parent / MEMORY_FILE).read_text()
    resolved = resolve_registry_model(f"models:/{name}/{rl['registered_version']}", workspace.root / ".cache" / "models")
    assert (resolved.path / MEMORY_FILE).read_text() == memory == (workspace.stage_model("sft") / MEMORY_FILE).read_text()
    assert not (workspace.stage_model("cpt") / MEMORY_FILE).exists()  # CPT never saw it

    metrics = stages.evaluate.run(params, workspace.root)  # scores the rl model
    assert metrics["stage"] == "rl" and metrics["registered_version"] == int(rl["registered_version"])


def test_a_stage_without_its_predecessor_says_which_to_run(workspace, params):
    with pytest.raises(ModelLoadError, match="run `agentworld stage cpt` first"):
        stages.sft.run(params, workspace.root)


def test_the_tokenizer_is_a_stage_of_its_own_that_cpt_builds_on(workspace, params):
    """cpt does not train a vocabulary: it takes the tokenizer stage's, whatever that holds, and
    refuses to start without it, naming the stage to run."""
    from agentworld.models.tokenizer import train_tokenizer

    report = json.loads(workspace.report("tokenizer.json").read_text())
    assert report["source"] == "scratch" and 0 < report["vocab_size"] <= params.model.vocab_size and report["texts"] > 0
    other = train_tokenizer(["zebra quagga okapi " * 50, "ls -la /tmp"] * 20, params.model.vocab_size)
    other.save_pretrained(workspace.tokenizer)
    small = params.model_copy(update={"cpt": params.cpt.model_copy(update={"max_steps": 1})})
    stages.cpt.run(small, workspace.root, register=False)
    trained = json.loads((workspace.stage_model("cpt") / "tokenizer.json").read_text())["model"]["vocab"]
    assert trained == json.loads((workspace.tokenizer / "tokenizer.json").read_text())["model"]["vocab"]
    assert "quagga" in "".join(trained)
    for name in os.listdir(workspace.tokenizer):
        os.remove(workspace.tokenizer / name)
    with pytest.raises(ModelLoadError, match="agentworld stage tokenizer"):
        stages.cpt.run(small, workspace.root, register=False)


def test_sft_only_starts_from_scratch(workspace, params):
    scratch = params.model_copy(update={"sft": params.sft.model_copy(update={"init": "scratch"})})
    report = stages.sft.run(scratch, workspace.root, register=False)
    assert report["parent_version"] is None and report["global_step"] == params.sft.max_steps
    assert "registered_version" not in report


def test_sft_held_out_curve_scores_real_predictions_against_training_seconds(workspace, params):
    import csv

    from agentworld.training.curve import CURVE_COLUMNS

    curve_path = workspace.root / "reports" / "plots" / "sft_heldout_curve.csv"
    scratch = params.model_copy(update={"sft": params.sft.model_copy(update={"init": "scratch"})})
    stages.sft.run(scratch, workspace.root, register=False)
    assert curve_path.read_text().splitlines() == [",".join(CURVE_COLUMNS)]  # off: the DVC output, empty
    measured = scratch.model_copy(update={"sft": scratch.sft.model_copy(update={"curve_every": 4, "curve_examples": 5})})
    report = stages.sft.run(measured, workspace.root, register=False)
    rows = list(csv.DictReader(curve_path.open()))
    assert [int(r["step"]) for r in rows] == [4, 6]                    # every 4 steps, and the end (6)
    assert 0 < float(rows[0]["train_s"]) < float(rows[1]["train_s"])
    for row in rows:
        assert 0.0 <= float(row["exact_match"]) <= float(row["token_f1"]) + 1e-9 <= 1.0 + 1e-9
    assert report["eval_metrics"]["eval_token_f1"] == pytest.approx(float(rows[-1]["token_f1"]), abs=1e-4)


def test_reasoning_switch_puts_grounded_rationale_before_the_observation(workspace):
    from agentworld.config import ModelParams
    from agentworld.models.factory import build_model

    examples = load_examples(workspace.sft_train)
    assert all(e.reasoning for e in examples)  # the build stage adds the adapters' rationale
    _, tokenizer = build_model(ModelParams(vocab_size=300), [e.system + e.action + e.observation for e in examples])
    with_think = to_conversations(examples, tokenizer, 4096)
    without = to_conversations(without_reasoning(examples), tokenizer, 4096)
    assistant = [m["content"] for c in with_think for m in c if m["role"] == "assistant"]
    assert all(a.startswith("<think>") and "</think>\n**Environment Observation:**" in a for a in assistant)
    assert "exits with status 0" in assistant[0]  # grounded in the recorded exit code
    assert not any("<think>" in m["content"] for c in without for m in c)


def test_transition_stream_and_mix_shares():
    from agentworld.config import BuildParams
    from agentworld.data.build import episode_examples

    turns = episode_examples(make_transitions(episodes=1, turns=3), BuildParams())
    stream = transition_stream(turns)
    assert stream.startswith("Environment: terminal\nTask: print the words of episode 0\n")
    assert ">>> echo w0_0\nw0_0\n" in stream and stream.count(">>> ") == 3
    trajectories = ["t" * 100] * 7
    mixed = mix_documents(trajectories, ["c" * 10] * 5, trajectory_share=0.7, seed=0)
    corpus_chars = sum(len(d) for d in mixed if d.startswith("c"))
    assert mixed.count("t" * 100) == 7 and corpus_chars == 300  # 700 : 300
    assert mix_documents(trajectories, ["c"], 1.0, 0) == trajectories
    assert len(trajectory_streams(turns)) == 1


def test_gates_pass_and_refuse_with_the_reason():
    gates = GateParams(cpt=StageGate(max_eval_loss=5.0), sft=StageGate(max_eval_loss=3.0), rl=StageGate(min_eval_token_f1=0.2))
    assert check_gate("cpt", {"eval_metrics": {"eval_loss": 4.2}}, gates).passed
    refused = check_gate("sft", {"eval_metrics": {"eval_loss": 3.5}}, gates)
    assert not refused.passed and "above gate.sft.max_eval_loss 3.0" in refused.reason
    assert "not finite" in check_gate("cpt", {"eval_metrics": {"eval_loss": float("nan")}}, gates).reason
    assert "missing" in check_gate("rl", {"eval_metrics": {}}, gates).reason
    # The RL gate reads held-out token F1, not the reward RL maximised: a high reward with
    # observations unlike the real ones is refused, and the reward alone is no longer enough.
    with pytest.raises(GateFailed, match="below gate.rl.min_eval_token_f1 0.2"):
        enforce_gate("rl", {"eval_metrics": {"eval_reward": 0.95, "eval_token_f1": 0.1}}, gates)
    assert "eval_token_f1 missing" in check_gate("rl", {"eval_metrics": {"eval_reward": 0.95}}, gates).reason
    assert check_gate("rl", {"eval_metrics": {"eval_reward": 0.0, "eval_token_f1": 0.3}}, gates).passed


@pytest.mark.slow
def test_cpt_killed_with_sigkill_resumes_from_its_last_checkpoint(workspace, params, tmp_path):
    """A CPT run is SIGKILLed after its first checkpoint; the rerun resumes and ends at max_steps."""
    raw = params.model_dump(mode="json", by_alias=True)
    raw["cpt"].update(max_steps=16, save_steps=4, logging_steps=2)
    params_file = tmp_path / "params.yaml"
    params_file.write_text(json.dumps(raw))
    argv = [sys.executable, "-m", "agentworld.cli", "stage", "cpt", "--params", str(params_file),
            "--root", str(workspace.root)]
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    checkpoints = workspace.checkpoints("cpt")
    proc = subprocess.Popen(argv, env=env, cwd=PROJECT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not list(checkpoints.glob("checkpoint-*/trainer_state.json")):
        assert proc.poll() is None, "CPT ended before its first checkpoint"
        assert time.monotonic() < deadline
        time.sleep(0.2)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not workspace.train_report("cpt").exists()  # killed before finishing

    done = subprocess.run(argv, env=env, cwd=PROJECT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(workspace.train_report("cpt").read_text())
    assert report["global_step"] == 16
    assert report["resumed_from"] and "checkpoint-" in report["resumed_from"]
    resumed_at = int(report["resumed_from"].rsplit("-", 1)[1])
    assert 4 <= resumed_at < 16


def test_checkpoints_resume_only_unfinished_runs_of_the_same_inputs(tmp_path):
    from agentworld.training.common import prepare_checkpoints

    ckpt = tmp_path / "ckpt"
    assert prepare_checkpoints(ckpt, {"data": "a"}, max_steps=10) is None
    (ckpt / "checkpoint-4").mkdir()
    assert prepare_checkpoints(ckpt, {"data": "a"}, max_steps=10) == str(ckpt / "checkpoint-4")
    assert prepare_checkpoints(ckpt, {"data": "b"}, max_steps=10) is None  # other inputs: discarded
    assert not (ckpt / "checkpoint-4").exists()
    (ckpt / "checkpoint-10").mkdir()
    assert prepare_checkpoints(ckpt, {"data": "b"}, max_steps=10) is None  # finished: start fresh
    assert not (ckpt / "checkpoint-10").exists()


def test_rl_keeps_the_sft_weights_when_grpo_scores_worse_on_the_held_out_turns(workspace, params):
    """The snapshot taken before GRPO: a worse RL model gets the SFT weights back (bit for bit),
    a model that is not worse keeps its own; the report carries both scores and the decision."""
    stages.cpt.run(params, workspace.root)
    model, _ = load_local(workspace.stage_model("cpt"))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    snapshot = ParentSnapshot({k: v.clone() for k, v in before.items()},
                              {"eval_token_f1": 0.5, "eval_exact_match": 0.25, "eval_reward": 0.4})
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)  # what a diverged GRPO leaves
    worse = snapshot.keep_better(model, {"eval_token_f1": 0.6, "eval_exact_match": 0.0, "eval_reward": 0.9})
    assert worse["rl_kept_parent"] == 1.0 and worse["eval_token_f1"] == 0.5 and worse["eval_reward"] == 0.4
    assert worse["grpo_eval_token_f1"] == 0.6 and worse["parent_eval_exact_match"] == 0.25
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())

    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    better = snapshot.keep_better(model, {"eval_token_f1": 0.5, "eval_exact_match": 0.3, "eval_reward": 0.1})
    assert better["rl_kept_parent"] == 0.0 and better["eval_exact_match"] == 0.3
    assert not any(torch.equal(v, before[k]) for k, v in model.state_dict().items() if v.is_floating_point())
