"""Behaviour cloning: the agent imitates successful real trajectories (TRL's SFTTrainer).

Demonstrations are the successful episodes of the validated real data (`data/clean/<domain>.jsonl`,
cut at the solving step) plus, when asked, fresh scripted episodes on the real environment for
the agent's task templates. Each becomes one conversation in the agent's chat layout, ending
with the agent's `submit` after the solving step (so the agent learns to stop where nothing
ends the episode for it, as in a simulator without a verifier), and the loss falls on the
agent's turns only.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from trl import SFTConfig, SFTTrainer

from agentworld.agents.episodes import task_options
from agentworld.agents.policy import agent_messages, done_action
from agentworld.agents.success import solved
from agentworld.config import AgentParams, DistributedParams
from agentworld.data.episodes import BehaviourPolicies
from agentworld.data.io import read_transitions
from agentworld.data.schema import Transition, group_trajectories
from agentworld.data.schema import first_observation as recorded_first_observation
from agentworld.domains import get_domain, make_env, make_policy
from agentworld.envs.engine import run_episodes
from agentworld.envs.vector import TextVectorEnv
from agentworld.training.common import TrainResult, set_threads, trainer_kwargs


@dataclass(frozen=True)
class Demo:
    """A successful real episode: every observation (the first, then one per action) and the actions."""

    trajectory_id: str
    template: str | None
    observations: tuple[str, ...]
    actions: tuple[str, ...]


def first_observation(rows: Sequence[Transition]) -> str | None:
    """What the real environment's reset showed: kept on the episode's first row, else rebuilt
    from the instruction where the domain can (`Domain.first_observation`; older rows kept only
    the instruction); None otherwise."""
    kept = recorded_first_observation(list(rows))
    if kept is not None:
        return kept
    rebuild = get_domain(rows[0].domain).first_observation
    return rebuild(rows[0].instruction) if rebuild is not None else None


def recorded_demos(path: Path, templates: Sequence[str]) -> list[Demo]:
    """Successful episodes of a validated trajectory file, cut at the solving step (none for a
    domain whose first observation the rows cannot give back: scripted demos only there)."""
    demos = []
    for trajectory_id, rows in sorted(group_trajectories(read_transitions(path)).items()):
        first = first_observation(rows)
        solved_at = next((k for k, row in enumerate(rows) if solved(row.reward, row.info)), None)
        template = rows[0].info.get("template") or rows[0].info.get("game_type")
        if first is None or solved_at is None or (templates and template not in templates):
            continue
        kept = rows[:solved_at + 1]
        demos.append(Demo(trajectory_id, template, (first, *(r.observation for r in kept)), tuple(r.action for r in kept)))
    return demos


def scripted_demos(domain: str, episodes: int, first_seed: int, templates: Sequence[str], max_steps: int) -> tuple[list[Demo], int]:
    """Fresh scripted episodes on the real environment; the successful ones, and the real steps spent."""
    env = make_env(domain)
    vector = TextVectorEnv([env], max_episode_steps=max_steps)
    demos, steps = [], 0
    try:
        for k in range(episodes):
            seed = first_seed + k
            [observation], infos = vector.reset(seed=[seed], options={"env_options": [task_options(templates, seed)]})
            policy = BehaviourPolicies([make_policy(domain, "scripted", env.task)], [observation],  # type: ignore[arg-type]
                                       [random.Random(f"demo:{seed}")])
            observations, actions = [observation], []
            for step in run_episodes(vector, policy):
                steps += 1
                actions.append(step.action)
                observations.append(step.observation)
                if solved(step.reward, step.info):
                    demos.append(Demo(f"{domain}-demo-{seed}", infos["step_info"][0].get("template"),
                                      tuple(observations), tuple(actions)))
                    break
    finally:
        env.close()
    return demos, steps


def conversations(demos: Sequence[Demo], domain: str, observation_chars: int) -> list[list[dict[str, str]]]:
    done = done_action(domain)
    return [agent_messages(domain, demo.observations, [*demo.actions, done], observation_chars) for demo in demos]


def train_bc(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, demos: Sequence[Demo], params: AgentParams,
             dist: DistributedParams, output_dir: Path) -> TrainResult:
    if not demos:
        raise ValueError(f"agent: no successful {params.domain} demonstrations for templates {params.templates}; "
                         "collect more real data or raise agent.demo_episodes")
    set_threads(params.bc)
    max_length = int(getattr(model.config, "max_position_embeddings", 512))
    dataset = Dataset.from_list([{"messages": m} for m in conversations(demos, params.domain, params.observation_chars)])
    kwargs = {**trainer_kwargs(params.bc, output_dir, dist), "report_to": []}  # the agent's run logs its own metrics
    config = SFTConfig(**kwargs, max_length=max_length,
                       assistant_only_loss=True, eval_strategy="no", save_strategy="no")
    trainer = SFTTrainer(model=model, args=config, processing_class=tokenizer, train_dataset=dataset)
    result = trainer.train()
    return TrainResult.from_trainer(trainer, result, None, {})
