"""SFT stage: next-observation prediction with TRL's SFTTrainer, loss on the observation only.

Examples are prompt/completion pairs (prompt = system + history + action; completion = the
assistant turn), so TRL masks the prompt tokens and the model learns only to predict what the
environment answers. Checkpoints land in `output_dir`; a re-run resumes from the latest one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import mlflow
import torch
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.trainer_utils import get_last_checkpoint
from trl import SFTConfig, SFTTrainer

from agentworld.config import ModelParams, TrainParams
from agentworld.data.prompts import WorldModelExample
from agentworld.models.chat import fit_prompt

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    global_step: int
    train_loss: float
    train_runtime_s: float
    tokens_seen: int
    resumed_from: str | None
    loss_curve: list[tuple[int, float]]


def to_dataset(
    examples: Sequence[WorldModelExample], tokenizer: PreTrainedTokenizerBase, max_seq_len: int, completion_budget: int
) -> Dataset:
    """Prompt/completion records whose prompt leaves `completion_budget` tokens for the answer."""
    budget = max(16, max_seq_len - completion_budget)
    return Dataset.from_list(
        [{"prompt": fit_prompt(e, tokenizer, budget), "completion": e.completion_messages()} for e in examples]
    )


def train_sft(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[WorldModelExample],
    train: TrainParams,
    model_params: ModelParams,
    output_dir: Path,
    completion_budget: int = 128,
) -> TrainResult:
    torch.set_num_threads(train.threads)
    dataset = to_dataset(examples, tokenizer, model_params.max_seq_len, completion_budget)
    config = SFTConfig(
        output_dir=str(output_dir),
        max_steps=train.max_steps,
        per_device_train_batch_size=train.batch_size,
        learning_rate=train.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=int(train.warmup_ratio * train.max_steps),
        weight_decay=train.weight_decay,
        logging_steps=train.logging_steps,
        save_steps=train.save_steps,
        save_total_limit=2,
        seed=train.seed,
        data_seed=train.seed,
        use_cpu=True,
        bf16=False,
        fp16=False,
        max_length=model_params.max_seq_len,
        completion_only_loss=True,
        dataloader_num_workers=0,
        report_to=["mlflow"] if mlflow.active_run() else [],
        disable_tqdm=False,
        save_only_model=False,
    )
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer)
    last = get_last_checkpoint(str(output_dir)) if output_dir.exists() else None
    if last:
        log.info("resuming SFT from %s", last)
    result = trainer.train(resume_from_checkpoint=last)
    return TrainResult(
        global_step=trainer.state.global_step,
        train_loss=float(result.training_loss),
        train_runtime_s=float(result.metrics.get("train_runtime", 0.0)),
        tokens_seen=int(getattr(trainer.state, "num_input_tokens_seen", 0) or 0),
        resumed_from=last,
        loss_curve=[(int(e["step"]), float(e["loss"])) for e in trainer.state.log_history if "loss" in e],
    )
