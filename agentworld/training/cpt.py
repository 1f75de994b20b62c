"""CPT stage: continual pre-training on state-transition streams and professional corpora.

Qwen-AgentWorld's first stage injects environment dynamics before any instruction format:
each training episode becomes one plain-text stream (task, then action / observation pairs in
order), mixed with offline professional corpora (manual pages, CPython documentation, our MCP
tool schemas, game rules) by token share (`cpt.mix`). Sequences are packed into full
`max_seq_len` blocks (TRL's `wrapped` packing), so no compute goes to padding. Held-out
episodes give the stage's gate metric, the held-out loss.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Sequence
from pathlib import Path

from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from trl import SFTConfig, SFTTrainer

from agentworld.config import CptParams, DistributedParams, ModelParams
from agentworld.data.prompts import WorldModelExample, opening_of, task_of
from agentworld.training.common import TrainResult, set_threads, trainer_kwargs
from agentworld.training.sft import episode_turns

log = logging.getLogger(__name__)

def transition_stream(turns: Sequence[WorldModelExample]) -> str:
    """One episode as a state-transition stream: domain, task, the opening state when known,
    then `>>> action` / observation."""
    first = turns[0]
    opening = opening_of(first.system)
    lines = [f"Environment: {first.domain}", f"Task: {task_of(first.system)}", ""]
    if opening is not None:
        lines += [opening, ""]
    for example in turns:
        lines += [f">>> {example.action}", example.observation, ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def trajectory_streams(examples: Sequence[WorldModelExample]) -> list[str]:
    return [transition_stream(turns) for turns in episode_turns(examples)]


def mix_documents(trajectories: Sequence[str], corpora: Sequence[str], trajectory_share: float,
                  seed: int) -> list[str]:
    """Trajectory streams and corpus documents in the asked character share, shuffled together.

    Every trajectory is used once; corpus documents are sampled (repeated when the corpus is
    small) until they make up `1 - trajectory_share` of the characters. With a share of 0 the
    corpora alone are used, and with 1 the trajectories alone.
    """
    rng = random.Random(seed)
    if trajectory_share >= 1.0 or not corpora:
        mixed = list(trajectories)
    elif trajectory_share <= 0.0 or not trajectories:
        mixed = list(corpora)
    else:
        target = round(sum(map(len, trajectories)) * (1 - trajectory_share) / trajectory_share)
        pool, picked, chars = list(corpora), [], 0
        while chars < target:
            rng.shuffle(pool)
            for doc in pool:
                if chars >= target:
                    break
                picked.append(doc)
                chars += len(doc)
        mixed = list(trajectories) + picked
    rng.shuffle(mixed)
    return mixed


def cpt_config(params: CptParams, model_params: ModelParams, dist: DistributedParams, output_dir: Path,
               packing: bool | None = None) -> SFTConfig:
    """A causal-LM config over a `text` column: loss on every token, packed into full blocks."""
    return SFTConfig(
        **trainer_kwargs(params, output_dir, dist),
        max_length=model_params.max_seq_len,
        dataset_text_field="text",
        packing=params.packing if packing is None else packing,
        packing_strategy="wrapped",  # plain causal LM; bfd needs flash-attention's padding-free kernels
        completion_only_loss=False,
        eval_strategy="no",
    )


def train_cpt(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    eval_texts: Sequence[str],
    params: CptParams,
    model_params: ModelParams,
    dist: DistributedParams,
    output_dir: Path,
    resume_from: str | None = None,
) -> TrainResult:
    set_threads(params)
    trainer = SFTTrainer(
        model=model,
        args=cpt_config(params, model_params, dist, output_dir),
        train_dataset=Dataset.from_dict({"text": list(texts)}),
        eval_dataset=Dataset.from_dict({"text": list(eval_texts)[: params.eval_documents]}) if eval_texts else None,
        processing_class=tokenizer,
    )
    if resume_from:
        log.info("resuming CPT from %s", resume_from)
    result = trainer.train(resume_from_checkpoint=resume_from)
    eval_metrics: dict[str, float] = {}
    if eval_texts:
        loss = float(trainer.evaluate()["eval_loss"])
        eval_metrics = {"eval_loss": loss, "eval_perplexity": math.exp(min(loss, 50.0))}
    return TrainResult.from_trainer(trainer, result, resume_from, eval_metrics)


def tokenizer_texts(examples: Sequence[WorldModelExample], documents: Sequence[str]) -> list[str]:
    """What a from-scratch tokenizer is trained on: the CPT documents, the system prompts and the
    rationales, so every stage (and the SFT-only ablation) shares one vocabulary."""
    systems = sorted({e.system for e in examples})
    rationales = sorted({e.reasoning for e in examples if e.reasoning})
    return systems + rationales + list(documents)
