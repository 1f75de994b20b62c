"""Stage `train`: tokenizer + tiny Qwen3-MoE world model, SFT on the observation only,
logged with MLflow's transformers flavour and registered as a new model version."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import mlflow

from agentworld.config import Params
from agentworld.data.build import load_examples
from agentworld.models.factory import build_model, count_parameters
from agentworld.tracking.registry import log_and_register
from agentworld.tracking.runs import file_md5, lineage_tags, stage_run
from agentworld.training.sft import train_sft
from tasks.paths import StagePaths

STAGE = "sft"


def tokenizer_corpus(examples: list[Any]) -> list[str]:
    """Everything the model will read or write: prompts, actions and observations."""
    systems = sorted({e.system for e in examples})
    return systems + [f"{e.action}\n{e.observation}" for e in examples]


def _fingerprint(params: Params, data_md5: str) -> str:
    return json.dumps({"data": data_md5, "model": params.model.model_dump(), "train": params.train.model_dump()}, sort_keys=True)


def _prepare_checkpoints(checkpoints: Path, fingerprint: str) -> None:
    """Keep checkpoints only when they belong to this exact data and configuration (safe resume)."""
    marker = checkpoints / "fingerprint.json"
    if checkpoints.exists() and (not marker.exists() or marker.read_text() != fingerprint):
        shutil.rmtree(checkpoints)
    checkpoints.mkdir(parents=True, exist_ok=True)
    marker.write_text(fingerprint)


def run(params: Params, root: Path, parent_run_id: str | None = None) -> dict[str, Any]:
    paths = StagePaths(root)
    examples = load_examples(paths.sft_train)
    data_md5 = file_md5(paths.sft_train)
    with stage_run("train", params, params.train, parent_run_id) as active:
        mlflow.log_params({f"model.{k}": v for k, v in params.model.model_dump().items()})
        model, tokenizer = build_model(params.model, tokenizer_corpus(examples), seed=params.train.seed)
        n_params = count_parameters(model)
        mlflow.log_metrics({"model_parameters": n_params, "train_examples": len(examples)})
        _prepare_checkpoints(paths.checkpoints, _fingerprint(params, data_md5))
        result = train_sft(model, tokenizer, examples, params.train, params.model, paths.checkpoints)
        curve = paths.write_plot("train_loss.csv", ["step", "loss"], result.loss_curve)
        mlflow.log_artifact(str(curve), artifact_path="plots")
        paths.world_model.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(paths.world_model)
        tokenizer.save_pretrained(paths.world_model)
        domains = sorted({e.domain for e in examples})
        tags = {
            "domain": ",".join(domains),
            "stage": STAGE,
            "data_md5": data_md5,
            "run_id": active.info.run_id,
            **lineage_tags(root),
        }
        version = log_and_register(model, tokenizer, params.tracking.registered_model, tags)
        mlflow.set_tags({"registered_model": params.tracking.registered_model, "registered_version": version})
        summary = {
            "registered_model": params.tracking.registered_model,
            "registered_version": version,
            "model_parameters": n_params,
            "global_step": result.global_step,
            "train_loss": result.train_loss,
            "train_runtime_s": result.train_runtime_s,
            "resumed_from": result.resumed_from,
            "run_id": active.info.run_id,
        }
        mlflow.log_metrics({"final_train_loss": result.train_loss})
    paths.write_report("train.json", summary)
    return summary
