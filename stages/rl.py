"""Stage `rl`: GRPO from the SFT model with the hybrid rule + rubric reward."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentworld.config import Params
from agentworld.training.rl import train_rl
from stages.paths import StagePaths
from stages.training import StageInputs, previous_model, run_training_stage


def run(params: Params, root: Path, parent_run_id: str | None = None, register: bool = True) -> dict[str, Any]:
    def prepare(paths: StagePaths, inputs: StageInputs):
        return previous_model(paths, "rl")

    def train(model, tokenizer, inputs: StageInputs, output_dir: Path, resume: str | None):
        return train_rl(model, tokenizer, inputs.train, params.rl, params.model, params.distributed, output_dir,
                        eval_examples=inputs.test, resume_from=resume)

    return run_training_stage("rl", params, root, parent_run_id, params.rl, prepare, train, register)
