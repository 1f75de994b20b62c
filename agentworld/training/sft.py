"""SFT stage: next-observation prediction with TRL's SFTTrainer, loss on the observations only.

Each training sequence is an episode as one multi-turn conversation (system, then the agent's
actions as user turns and the environment's observations as assistant turns). The loss falls
on every assistant turn (`assistant_only_loss`), so each observation is predicted from exactly
the history the world model sees at inference, and one forward pass trains all turns of an
episode instead of one. Episodes longer than the context are split into windows of turns.
With `sft.reasoning` on, the assistant turn carries the adapters' grounded rationale in
`<think>...</think>` before the observation (agentworld/envs/rationale.py); off, it does not.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback
from trl import SFTConfig, SFTTrainer

from agentworld.config import DistributedParams, ModelParams, SftParams
from agentworld.data.prompts import WorldModelExample
from agentworld.models.chat import fit_prompt
from agentworld.training.common import TrainResult, set_threads, trainer_kwargs
from agentworld.training.curve import HeldOutCurve, held_out_sample

log = logging.getLogger(__name__)


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
            turn = [{"role": "user", "content": example.current_user_turn()}, *example.completion_messages()]
            if window and _length(tokenizer, system + window + turn) > max_seq_len:
                conversations.append(system + window)
                window = []
            window += turn
        conversations.append(system + window)
    return conversations


#: Generation budget of the held-out curve's predictions (the evaluate stage's default).
CURVE_MAX_NEW_TOKENS = 96


def with_repeats_weighted(examples: Sequence[WorldModelExample], weight: int) -> list[WorldModelExample]:
    """Examples whose action repeats an earlier one of the episode `weight` times, the rest once."""
    return [copy for e in examples for copy in [e] * (weight if e.earlier() else 1)]


def without_reasoning(examples: Sequence[WorldModelExample]) -> list[WorldModelExample]:
    """The `sft.reasoning: false` variant: the same examples with no `<think>` block."""
    return [replace(e, reasoning=None) for e in examples]


def turn_rows(examples: Sequence[WorldModelExample], tokenizer: PreTrainedTokenizerBase, max_seq_len: int,
              max_new_tokens: int) -> list[dict[str, list[dict[str, str]]]]:
    """One prompt-completion row per turn, the prompt cut to fit as at inference (`fit_prompt`).

    Used with retrieval memory or copy-op targets: in an episode window an earlier turn would
    show its memory block and its op where inference shows neither (only the real observation).
    """
    budget = max(16, max_seq_len - max_new_tokens)
    return [{"prompt": fit_prompt(e, tokenizer, budget), "completion": e.completion_messages()} for e in examples]


def sft_dataset(examples: Sequence[WorldModelExample], tokenizer: PreTrainedTokenizerBase, max_seq_len: int,
                max_new_tokens: int = 96) -> Dataset:
    """Episode windows; one row per turn with retrieval memory or copy ops (`turn_rows`)."""
    if any(e.target is not None or e.memory is not None for e in examples):
        return Dataset.from_list(turn_rows(examples, tokenizer, max_seq_len, max_new_tokens))
    return Dataset.from_list([{"messages": m} for m in to_conversations(examples, tokenizer, max_seq_len)])


def train_sft(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[WorldModelExample],
    params: SftParams,
    model_params: ModelParams,
    dist: DistributedParams,
    output_dir: Path,
    eval_examples: Sequence[WorldModelExample] = (),
    resume_from: str | None = None,
    eval_conversations: int = 64,
    callbacks: Sequence[TrainerCallback] = (),
) -> TrainResult:
    set_threads(params)
    if not params.reasoning:
        examples, eval_examples = without_reasoning(examples), without_reasoning(eval_examples)
    eval_dataset = None
    if eval_examples:
        eval_dataset = sft_dataset(eval_examples, tokenizer, model_params.max_seq_len)
        eval_dataset = eval_dataset.select(range(min(eval_conversations, len(eval_dataset))))
    config = SFTConfig(
        **trainer_kwargs(params, output_dir, dist),
        max_length=model_params.max_seq_len,
        assistant_only_loss=True,
        eval_strategy="no",
    )
    train_examples = with_repeats_weighted(examples, params.repeat_turn_weight)
    curve = HeldOutCurve(tokenizer, held_out_sample(eval_examples, params.curve_examples, params.seed),
                         params.curve_every, CURVE_MAX_NEW_TOKENS, model_params.max_seq_len) \
        if params.curve_every and eval_examples else None
    trainer = SFTTrainer(model=model, args=config, processing_class=tokenizer,
                         train_dataset=sft_dataset(train_examples, tokenizer, model_params.max_seq_len),
                         eval_dataset=eval_dataset, callbacks=[*callbacks, *([curve] if curve else [])] or None)
    if resume_from:
        log.info("resuming SFT from %s", resume_from)
    result = trainer.train(resume_from_checkpoint=resume_from)
    eval_metrics = {"eval_loss": float(trainer.evaluate()["eval_loss"])} if eval_dataset is not None else {}
    out = TrainResult.from_trainer(trainer, result, resume_from, eval_metrics)
    if curve is not None:
        out.held_out_curve = [point.row() for point in curve.points]
        if curve.points:
            out.eval_metrics |= {"eval_token_f1": curve.points[-1].token_f1,
                                 "eval_exact_match": curve.points[-1].exact_match}
    return out
