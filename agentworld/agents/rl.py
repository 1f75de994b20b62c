"""Agent RL: GRPO on whole episodes, inside a WorldModelEnv or the real environment.

TRL's `GRPOTrainer` does the optimisation; its `rollout_func` hook hands us the batch's prompts
and we play them as episodes: each dataset row names one task (its seed), the sampler repeats
it `num_generations` times, and every repetition is one sampled episode of that task. The
completion is the episode after the first observation — the agent's actions and the
environment's answers — with `env_mask` marking the environment's tokens so the loss falls on
the agent's tokens only. The reward is task success (the real checker, or the simulator's
verifier). The phase stops at `agent.rl.budget_s` seconds of wall clock (`WallClockBudget`),
so a simulator and a real environment can be compared at the same budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from agentworld.agents.episodes import play
from agentworld.agents.policy import LMAgent
from agentworld.config import AgentParams, DistributedParams
from agentworld.envs.base import TextEnv
from agentworld.training.common import TrainResult, set_threads, trainer_kwargs

SEED_PREFIX = "task seed "


class WallClockBudget(TrainerCallback):
    """Stop training once `seconds` of wall clock have passed since training began."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.started = seconds, 0.0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.started = time.monotonic()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if time.monotonic() - self.started >= self.seconds:
            control.should_training_stop = True


class EpisodeRollout:
    """TRL's rollout_func: play one episode per prompt and return its ids, mask and success."""

    def __init__(self, agent: LMAgent, make_env: Callable[[], TextEnv], params: AgentParams) -> None:
        self.agent, self.make_env, self.params = agent, make_env, params
        self.pool: list[TextEnv] = []
        self.env_steps = 0
        self.episodes = 0
        self.successes = 0
        self.unconfirmed = 0  # real successes the final state did not confirm (reward hacking)

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, Any]:
        seeds = [seed_of(prompt) for prompt in prompts]
        while len(self.pool) < len(seeds):
            self.pool.append(self.make_env())
        self.agent.model = trainer.model
        episodes = play(self.agent, self.pool[:len(seeds)], seeds, max_steps=self.params.max_steps,
                        templates=self.params.templates, temperature=self.params.rl.temperature)
        self.env_steps += sum(e.steps for e in episodes)
        self.episodes += len(episodes)
        self.successes += sum(e.success for e in episodes)
        self.unconfirmed += sum(e.success and e.verified is False for e in episodes)
        return {"prompt_ids": [e.tokens.prompt_ids for e in episodes],
                "completion_ids": [e.tokens.completion_ids for e in episodes],
                "env_mask": [e.tokens.agent_mask for e in episodes],
                "logprobs": None,
                "success": [float(e.success) for e in episodes]}

    def close(self) -> None:
        for env in self.pool:
            env.close()
        self.pool.clear()


def seed_of(prompt: Any) -> int:
    text = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
    if not text.startswith(SEED_PREFIX):
        raise ValueError(f"agent RL prompt {text[:60]!r} does not name a task seed")
    return int(text.removeprefix(SEED_PREFIX))


def task_success(prompts: list, completions: list, success: list[float], **_: Any) -> list[float]:
    """GRPO's reward: 1.0 for an episode that solved its task, else 0.0."""
    return [float(s) for s in success]


def task_dataset(first_seed: int, tasks: int) -> Dataset:
    """One row per RL task; the prompt only names the task's seed (the rollout resets the env to it)."""
    return Dataset.from_list([{"prompt": [{"role": "user", "content": f"{SEED_PREFIX}{first_seed + k}"}]}
                              for k in range(tasks)])


def train_rl(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, make_env: Callable[[], TextEnv],
             params: AgentParams, dist: DistributedParams, output_dir: Path) -> tuple[TrainResult, dict[str, float]]:
    """GRPO inside `make_env()`'s environments for `agent.rl.budget_s` seconds; returns the result
    and what the rollouts used (episodes, environment steps, their success rate)."""
    settings = params.rl
    set_threads(settings)
    group = settings.num_generations
    kwargs = trainer_kwargs(settings, output_dir, dist)
    kwargs.update(per_device_train_batch_size=group * settings.tasks_per_step, save_strategy="no",
                  warmup_steps=0, lr_scheduler_type="constant", report_to=[])
    config = GRPOConfig(**kwargs, num_generations=group, max_completion_length=4096, temperature=settings.temperature,
                        beta=settings.beta, gradient_checkpointing=False)
    rollout = EpisodeRollout(LMAgent(model, tokenizer, params.domain, max_new_tokens=params.max_new_tokens,
                                     observation_chars=params.observation_chars), make_env, params)
    if hasattr(model.config, "output_router_logits"):
        model.config.output_router_logits = False
    tasks = task_dataset(params.train_seed + 100_000, max(64, settings.max_steps * settings.tasks_per_step))
    trainer = GRPOTrainer(model=model, reward_funcs=[task_success], args=config, train_dataset=tasks,
                          processing_class=tokenizer, rollout_func=rollout,
                          callbacks=[WallClockBudget(settings.budget_s)])
    started = time.monotonic()
    try:
        output = trainer.train()
    finally:
        rollout.close()
    used = {"rl_episodes": float(rollout.episodes), "rl_env_steps": float(rollout.env_steps),
            "rl_rollout_success": rollout.successes / rollout.episodes if rollout.episodes else 0.0,
            # real rollouts only: the share of rewarded episodes whose final state the checker confirmed
            "rl_verified_share": 1.0 - rollout.unconfirmed / rollout.successes if rollout.successes else 1.0,
            "rl_wall_s": time.monotonic() - started}
    rewards = [(int(e["step"]), float(e["reward"])) for e in trainer.state.log_history if "reward" in e and "step" in e]
    return TrainResult.from_trainer(trainer, output, None, {}, rewards or None), used
