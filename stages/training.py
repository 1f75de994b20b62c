"""What the cpt, sft and rl stages share: inputs, resumable checkpoints, the stage's MLflow run,
the model it hands on, its registry version with lineage, and its report.

A stage reads the model of the stage before it (`models/<previous>`), trains, writes
`models/<stage>` and `reports/train/<stage>.json`, and registers a new version of the world
model tagged `stage`, the hash of its data, the version it started from and the git commit.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow
from transformers import AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from agentworld.config import Params, TrainParams
from agentworld.data.build import load_examples
from agentworld.data.prompts import WorldModelExample
from agentworld.data.retrieval import MEMORY_ARTIFACT, MEMORY_FILE
from agentworld.models.factory import ModelLoadError, count_parameters, load_local, merged, with_lora
from agentworld.tracking.registry import log_and_register
from agentworld.tracking.runs import file_md5, lineage_tags, stage_run
from agentworld.training.common import TrainResult, prepare_checkpoints
from agentworld.training.curve import CURVE_COLUMNS
from stages.paths import StagePaths

#: The stage each training stage starts from.
PREVIOUS: dict[str, str | None] = {"cpt": None, "sft": "cpt", "rl": "sft"}


@dataclass
class StageInputs:
    train: list[WorldModelExample]
    test: list[WorldModelExample]
    data_md5: str


def stage_inputs(paths: StagePaths) -> StageInputs:
    for path in (paths.sft_train, paths.sft_test, paths.sft_train.parent / MEMORY_FILE):
        if not path.exists():
            raise FileNotFoundError(f"{path}: missing; run the build stage first (agentworld stage build)")
    return StageInputs(load_examples(paths.sft_train), load_examples(paths.sft_test), file_md5(paths.sft_train))


def stage_tokenizer(paths: StagePaths) -> PreTrainedTokenizerBase:
    """The tokenizer stage's output (stages/tokenizer.py), which a from-scratch model is built on."""
    if not (paths.tokenizer / "tokenizer.json").exists():
        raise ModelLoadError(f"{paths.tokenizer}: no tokenizer; run `agentworld stage tokenizer` first")
    tokenizer = AutoTokenizer.from_pretrained(paths.tokenizer, local_files_only=True)
    tokenizer.padding_side = "left"  # not saved; as train_tokenizer and load_local set it
    return tokenizer


def tokenizer_md5(paths: StagePaths) -> str | None:
    """The vocabulary's fingerprint (None before the tokenizer stage ran)."""
    file = paths.tokenizer / "tokenizer.json"
    return file_md5(file) if file.exists() else None


def previous_model(paths: StagePaths, stage: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, dict[str, Any]]:
    """The model (and report) of the stage before `stage`: what this stage continues from."""
    previous = PREVIOUS[stage]
    report = paths.train_report(previous)
    if not report.exists():
        raise ModelLoadError(f"{report}: missing; the {stage} stage starts from the {previous} stage's model, "
                             f"run `agentworld stage {previous}` first")
    model, tokenizer = load_local(paths.stage_model(previous))
    return model, tokenizer, json.loads(report.read_text())


def run_training_stage(
    stage: str,
    params: Params,
    root: Path,
    parent_run_id: str | None,
    section: TrainParams,
    prepare: Callable[[StagePaths, StageInputs], tuple[PreTrainedModel, PreTrainedTokenizerBase, dict[str, Any]]],
    train: Callable[[PreTrainedModel, PreTrainedTokenizerBase, StageInputs, Path, str | None], TrainResult],
    register: bool = True,
    extra_fingerprint: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run one training stage end to end. `prepare` gives the starting model, its tokenizer and
    the parent's report ({} for none); `train` trains it, resuming from a checkpoint if given."""
    paths = StagePaths(root)
    inputs = stage_inputs(paths)
    started = time.monotonic()
    with stage_run(stage, params, section, parent_run_id, root=root) as active:
        model, tokenizer, parent = prepare(paths, inputs)
        model = with_lora(model, params.model)  # model.lora_r > 0: only LoRA adapters train
        fingerprint = {"data": inputs.data_md5, "model": params.model.model_dump(), stage: section.model_dump(),
                       "parent": parent.get("run_id"), **(extra_fingerprint or {})}
        resume = prepare_checkpoints(paths.checkpoints(stage), fingerprint, section.max_steps)
        n_params = count_parameters(model)
        mlflow.log_params({f"model.{k}": v for k, v in params.model.model_dump().items()})
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        mlflow.log_metrics({"model_parameters": n_params, "trainable_parameters": trainable,
                            "train_examples": len(inputs.train)})
        result = train(model, tokenizer, inputs, paths.checkpoints(stage), resume)
        model = merged(model)  # later stages and every backend load a plain checkpoint

        out = paths.stage_model(stage)
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        if stage != "cpt":  # the chat stages learnt to read the retrieval memory: it travels with them
            memory = shutil.copy(paths.sft_train.parent / MEMORY_FILE, out / MEMORY_FILE)
            mlflow.log_artifact(str(memory), artifact_path=MEMORY_ARTIFACT)
        curve = paths.write_plot(f"{stage}_curve.csv", ["step", "value"], result.loss_curve)
        mlflow.log_artifact(str(curve), artifact_path="plots")
        if stage == "sft":  # a DVC output: written (maybe empty) whether measured or not
            held_out = paths.write_plot(f"{stage}_heldout_curve.csv", CURVE_COLUMNS, result.held_out_curve or [])
            mlflow.log_artifact(str(held_out), artifact_path="plots")
        mlflow.log_metrics({"final_train_loss": result.train_loss, "tokens_seen": result.tokens_seen,
                            **result.eval_metrics})

        summary: dict[str, Any] = {
            "stage": stage,
            "model_parameters": n_params,
            **result.as_dict(),
            "parent_version": parent.get("registered_version"),
            "run_id": active.info.run_id,
            "wall_s": round(time.monotonic() - started, 1),
        }
        if register:
            tags = {
                "stage": stage,
                "domain": ",".join(sorted({e.domain for e in inputs.train})),
                "data_md5": inputs.data_md5,
                "parent_version": str(parent.get("registered_version") or "none"),
                "parent_stage": PREVIOUS[stage] if parent else "none",
                "run_id": active.info.run_id,
                **{f"eval.{k}": f"{v:.4f}" for k, v in result.eval_metrics.items()},
                **lineage_tags(root),
            }
            version = log_and_register(model, tokenizer, params.tracking.registered_model, tags)
            mlflow.set_tags({"registered_model": params.tracking.registered_model, "registered_version": version})
            summary.update(registered_model=params.tracking.registered_model, registered_version=version)
    paths.train_report(stage).parent.mkdir(parents=True, exist_ok=True)
    paths.train_report(stage).write_text(json.dumps(summary, indent=2, default=str))
    return summary


def trained_report(paths: StagePaths, stage: str, setting: str) -> dict[str, Any]:
    """The training report of the stage whose model a later stage uses (`setting` names the knob)."""
    report = paths.train_report(stage)
    if not report.exists():
        raise FileNotFoundError(f"{report}: missing; {setting} is {stage!r}, run `agentworld stage {stage}` first")
    return json.loads(report.read_text())
