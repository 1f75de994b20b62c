"""Stage `sft`: next-observation prediction (with grounded reasoning when `sft.reasoning`) from
the CPT model, or from a fresh model with `sft.init: scratch` (the SFT-only ablation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentworld.config import Params
from agentworld.training.sft import train_sft
from stages.cpt import scratch_model
from stages.paths import StagePaths
from stages.training import StageInputs, previous_model, run_training_stage


def run(params: Params, root: Path, parent_run_id: str | None = None, register: bool = True) -> dict[str, Any]:
    def prepare(paths: StagePaths, inputs: StageInputs):
        if params.sft.init == "scratch":
            model, tokenizer = scratch_model(params, paths, inputs)
            return model, tokenizer, {}
        return previous_model(paths, "sft")

    def train(model, tokenizer, inputs: StageInputs, output_dir: Path, resume: str | None):
        return train_sft(model, tokenizer, inputs.train, params.sft, params.model, params.distributed, output_dir,
                         eval_examples=inputs.test, resume_from=resume)

    return run_training_stage("sft", params, root, parent_run_id, params.sft, prepare, train, register)
