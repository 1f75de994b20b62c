"""RL stage: GRPO from the SFT model, rewarded by the hybrid rule + rubric reward.

Each prompt is a held-in turn in the world-model chat layout; the group of sampled
observations is scored against the real one (agentworld/training/rewards.py: exact match,
structure, format, deterministic facts, and a judge's rubric). TRL's `GRPOTrainer` gets one
reward function per component with the weights of `rl.reward_weights`, so every component is
logged separately (`rewards/reward_<component>/mean`). Rollouts come from `model.generate` on
this CPU and from vLLM on GPU clusters (`rl.use_vllm`). The stage's gate reads the held-out
token F1 of greedy predictions against the real observations, a metric the reward does not
contain; the mean held-out reward is reported next to it. With `rl.keep_parent_if_worse` the
SFT weights are kept when GRPO makes held-out token F1 + exact match worse (`ParentSnapshot`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from trl import GRPOConfig, GRPOTrainer

from agentworld.config import DistributedParams, ModelParams, RlParams
from agentworld.data.prompts import WorldModelExample
from agentworld.models.chat import fit_prompt
from agentworld.models.predict import generate_turns
from agentworld.scoring.judge import Judge, JudgeInput, LocalJudge, OpenAIJudge
from agentworld.training.common import TrainResult, set_threads, trainer_kwargs
from agentworld.training.curve import held_out_sample, held_out_scores
from agentworld.training.rewards import COMPONENTS, HybridReward

log = logging.getLogger(__name__)


def make_judge(params: RlParams) -> Judge | None:
    if params.judge == "none":
        return None
    if params.judge == "openai":
        return OpenAIJudge(model=params.judge_model or "", base_url=params.judge_base_url)
    return LocalJudge()


def hybrid_reward(params: RlParams, judge: Judge | None = None) -> HybridReward:
    weights = params.reward_weights.model_dump()
    return HybridReward(judge=judge if judge is not None else make_judge(params), **weights)


def instruction_of(example: WorldModelExample) -> str:
    return example.system.split("The agent's task: ", 1)[1] if "The agent's task: " in example.system else ""


def rl_dataset(examples: Sequence[WorldModelExample], tokenizer: PreTrainedTokenizerBase, params: RlParams,
               max_seq_len: int) -> Dataset:
    """A seeded sample of `rl.prompts` turns: the prompt (history that fits) and what the reward reads."""
    pool = list(examples)
    picked = random.Random(params.seed).sample(pool, min(params.prompts, len(pool)))
    budget = max(16, max_seq_len - params.max_new_tokens)
    rows = []
    for example in picked:
        messages = fit_prompt(example, tokenizer, budget)
        kept = (len(messages) - 2) // 2  # system + history pairs + the action
        rows.append({
            "prompt": messages,
            "observation": example.observation,
            "domain": example.domain,
            "action": example.action,
            "instruction": instruction_of(example),
            "history": [list(pair) for pair in example.history[len(example.history) - kept:]] if kept else [],
            "copy_sources": [list(pair) for pair in example.copy_sources().items()],
        })
    return Dataset.from_list(rows)


def grpo_config(params: RlParams, dist: DistributedParams, output_dir: Path, reward: HybridReward) -> GRPOConfig:
    return GRPOConfig(
        **trainer_kwargs(params, output_dir, dist),
        num_generations=params.num_generations,
        max_completion_length=params.max_new_tokens,
        temperature=params.temperature,
        beta=params.beta,
        reward_weights=reward.trl_reward_weights(),
        use_vllm=params.use_vllm,
        vllm_mode=params.vllm_mode,
        vllm_gpu_memory_utilization=0.3,
        gradient_checkpointing=False,
    )


def held_out_reward(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                    examples: Sequence[WorldModelExample], reward: HybridReward, params: RlParams,
                    max_seq_len: int) -> dict[str, float]:
    """Held-out token F1 and exact match of greedy predictions against the real observations
    (what the RL gate reads), and the mean of each reward component and the total."""
    sample = held_out_sample(examples, params.eval_examples, params.seed)
    if not sample:
        return {}
    generations = generate_turns(model, tokenizer, sample, params.max_new_tokens, batch_size=16,
                                 max_seq_len=max_seq_len, progress=False)
    inputs = [JudgeInput(domain=e.domain, generation=g, reference=e.observation, action=e.action,
                         history=tuple(e.history), instruction=instruction_of(e)) for e, g in zip(sample, generations)]
    rows = reward(inputs)
    names = [c for c in COMPONENTS if c in rows[0]] + ["total"]
    f1, exact = held_out_scores(generations, sample)
    metrics = {"eval_token_f1": f1, "eval_exact_match": exact}
    metrics.update({f"eval_reward_{name}" if name != "total" else "eval_reward": sum(r[name] for r in rows) / len(rows)
                    for name in names})
    return metrics


def closeness(metrics: dict[str, float]) -> float:
    """What RL is kept on: held-out token F1 plus exact match (as the candidate scorer predicts)."""
    return metrics.get("eval_token_f1", 0.0) + metrics.get("eval_exact_match", 0.0)


@dataclass
class ParentSnapshot:
    """The starting (SFT) model's weights and held-out scores, taken before GRPO.

    GRPO on a small model can drift in ways its reward barely sees (on the demo a model began
    `**Environment Observation:**[` instead of a new line before a copy op: one stray character,
    every exact match lost). Scored on the same held-out turns, the RL model is kept only if it
    is not worse than where it started; otherwise the SFT weights are put back and the report
    says so (`rl_kept_parent`). The comparison uses the turns the gate reads, a fixed sample of
    the held-out split balanced over domains as the evaluation is (on the demo, GRPO gained on
    terminal, a third of the split, and lost every exact match on web), so it is a choice
    between two models, not a fit to those turns."""

    state: dict[str, torch.Tensor]
    metrics: dict[str, float]

    @classmethod
    def take(cls, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, examples: Sequence[WorldModelExample],
             reward: HybridReward, params: RlParams, max_seq_len: int) -> ParentSnapshot:
        metrics = held_out_reward(model, tokenizer, examples, reward, params, max_seq_len)
        return cls({k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}, metrics)

    def keep_better(self, model: PreTrainedModel, rl_metrics: dict[str, float]) -> dict[str, float]:
        """The metrics of the model kept (in `model`), with the parent's and the decision."""
        worse = closeness(rl_metrics) < closeness(self.metrics)
        if worse:
            model.load_state_dict(self.state)
            log.warning("rl: GRPO lowered held-out token F1 + exact match from %.3f to %.3f; keeping the SFT weights",
                        closeness(self.metrics), closeness(rl_metrics))
        kept = self.metrics if worse else rl_metrics
        return {**kept, **{f"grpo_{k}": v for k, v in rl_metrics.items() if k in ("eval_token_f1", "eval_exact_match")},
                **{f"parent_{k}": v for k, v in self.metrics.items() if k in ("eval_token_f1", "eval_exact_match")},
                "rl_kept_parent": float(worse)}


def train_rl(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[WorldModelExample],
    params: RlParams,
    model_params: ModelParams,
    dist: DistributedParams,
    output_dir: Path,
    eval_examples: Sequence[WorldModelExample] = (),
    resume_from: str | None = None,
    judge: Judge | None = None,
) -> TrainResult:
    set_threads(params)
    if params.use_vllm and not torch.cuda.is_available():
        raise ValueError("rl.use_vllm: vLLM rollouts need a GPU (none here); set rl.use_vllm: false on CPU")
    if hasattr(model.config, "output_router_logits"):
        model.config.output_router_logits = False
    reward = hybrid_reward(params, judge)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward.trl_reward_funcs(),
        args=grpo_config(params, dist, output_dir, reward),
        train_dataset=rl_dataset(examples, tokenizer, params, model_params.max_seq_len),
        processing_class=tokenizer,
    )
    if resume_from:
        log.info("resuming RL from %s", resume_from)
    # `model` is the SFT parent also when GRPO resumes from a checkpoint (the trainer loads it).
    parent = ParentSnapshot.take(model, tokenizer, eval_examples, reward, params, model_params.max_seq_len) \
        if params.keep_parent_if_worse and eval_examples else None
    result = trainer.train(resume_from_checkpoint=resume_from)
    eval_metrics = held_out_reward(trainer.model, tokenizer, eval_examples, reward, params, model_params.max_seq_len) \
        if eval_examples else {}
    if parent is not None:
        eval_metrics = parent.keep_better(trainer.model, eval_metrics)
    rewards = [(int(e["step"]), float(e["reward"])) for e in trainer.state.log_history if "reward" in e and "step" in e]
    return TrainResult.from_trainer(trainer, result, resume_from, eval_metrics, rewards or None)
