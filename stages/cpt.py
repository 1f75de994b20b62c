"""Stage `cpt`: continual pre-training of the world model on state-transition streams of the
training episodes and the professional corpora (agentworld/training/cpt.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentworld.config import Params
from agentworld.data.corpora import load_corpora
from agentworld.models.factory import build_model
from agentworld.training.cpt import mix_documents, train_cpt, trajectory_streams
from stages.paths import StagePaths
from stages.training import StageInputs, run_training_stage, stage_tokenizer, tokenizer_md5


def cpt_documents(params: Params, paths: StagePaths, inputs: StageInputs) -> list[str]:
    """Training documents: every training episode as a stream, plus corpora by `cpt.mix`."""
    corpus = [doc.text for doc in load_corpora(paths.corpora, params.corpora.sources)]
    return mix_documents(trajectory_streams(inputs.train), corpus, params.cpt.mix.trajectories, params.cpt.seed)


def scratch_model(params: Params, paths: StagePaths, inputs: StageInputs):
    """A fresh model (tiny Qwen3-MoE on the tokenizer stage's vocabulary) or the checkpoint of
    model.path (local or GGUF, with its own tokenizer)."""
    tokenizer = stage_tokenizer(paths) if params.model.source == "scratch" else None
    return build_model(params.model, (), seed=params.cpt.seed, tokenizer=tokenizer)


def run(params: Params, root: Path, parent_run_id: str | None = None, register: bool = True) -> dict[str, Any]:
    def prepare(paths: StagePaths, inputs: StageInputs):
        model, tokenizer = scratch_model(params, paths, inputs)
        return model, tokenizer, {}

    def train(model, tokenizer, inputs: StageInputs, output_dir: Path, resume: str | None):
        documents = cpt_documents(params, StagePaths(root), inputs)
        return train_cpt(model, tokenizer, documents, trajectory_streams(inputs.test), params.cpt, params.model,
                         params.distributed, output_dir, resume)

    return run_training_stage("cpt", params, root, parent_run_id, params.cpt, prepare, train, register,
                              extra_fingerprint={"corpora": params.corpora.model_dump(),
                                                 # checkpoints of another vocabulary cannot resume
                                                 "tokenizer": tokenizer_md5(StagePaths(root))})
