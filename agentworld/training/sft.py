"""SFT stage: next-observation prediction with TRL's SFTTrainer, loss on the observations only.

Each training sequence is an episode as one multi-turn conversation (system, then the agent's
actions as user turns and the environment's observations as assistant turns). The loss falls
on every assistant turn (`assistant_only_loss`), so each observation is predicted from exactly
the history the world model sees at inference, and one forward pass trains all turns of an
episode instead of one. Episodes longer than the context are split into windows of turns.
Checkpoints land in `output_dir`; a re-run resumes from the latest one.
"""

from __future__ import annotations

import logging
from collections import defaultdict
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

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    global_step: int
    train_loss: float
    train_runtime_s: float
    tokens_seen: int
    resumed_from: str | None
    loss_curve: list[tuple[int, float]]


def episode_turns(examples: Sequence[WorldModelExample]) -> list[list[WorldModelExample]]:
    """Examples regrouped into episodes (id = '<trajectory>:<turn>'), each in turn order."""
    episodes: dict[str, list[WorldModelExample]] = defaultdict(list)
    for example in examples:
        episodes[example.id.rsplit(":", 1)[0]].append(example)
    return [sorted(turns, key=lambda e: int(e.id.rsplit(":", 1)[1])) for _, turns in sorted(episodes.items())]


def _length(tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]]) -> int:
    return len(tokenizer(tokenizer.apply_chat_template(messages, tokenize=False), add_special_tokens=False)["input_ids"])


def to_conversations(
    examples: Sequence[WorldModelExample], tokenizer: PreTrainedTokenizerBase, max_seq_len: int
) -> list[list[dict[str, str]]]:
    """Episodes as conversations, split into windows of whole turns that fit `max_seq_len` tokens."""
    conversations = []
    for turns in episode_turns(examples):
        system = [{"role": "system", "content": turns[0].system}]
        window: list[dict[str, str]] = []
        for example in turns:
            turn = [{"role": "user", "content": example.action}, *example.completion_messages()]
            if window and _length(tokenizer, system + window + turn) > max_seq_len:
                conversations.append(system + window)
                window = []
            window += turn
        conversations.append(system + window)
    return conversations


def train_sft(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[WorldModelExample],
    train: TrainParams,
    model_params: ModelParams,
    output_dir: Path,
) -> TrainResult:
    torch.set_num_threads(train.threads)
    conversations = to_conversations(examples, tokenizer, model_params.max_seq_len)
    dataset = Dataset.from_list([{"messages": messages} for messages in conversations])
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
        assistant_only_loss=True,
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
