"""Play episodes of one agent against any text environments — real ones or WorldModelEnvs.

The loop is the same for both (agentworld/envs/engine.py): reset, then act for every running
episode in one batched `generate`, then step them together through a `TextVectorEnv` (one
batched world-model generation for WorldModelEnvs, one step after the other for real envs). Success is read from
the step the same way for both: a real env's checker or a WorldModelEnv's verifier rewards the
step that solves the task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentworld.agents.policy import EpisodeTokens, LMAgent
from agentworld.agents.success import invalid_action, solved
from agentworld.envs.base import TextEnv
from agentworld.envs.engine import run_episodes
from agentworld.envs.vector import TextVectorEnv


@dataclass
class Episode:
    seed: int
    task_id: str
    template: str | None
    tokens: EpisodeTokens
    simulated: bool
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    success: bool = False
    invalid_actions: int = 0
    #: A real success re-judged afterwards by the env's checker from its final state
    #: (`TextEnv.verify`); None when not a real success or the env cannot re-judge.
    verified: bool | None = None

    @property
    def steps(self) -> int:
        return len(self.actions)

    def as_record(self) -> dict[str, Any]:
        return {"seed": self.seed, "task_id": self.task_id, "template": self.template, "simulated": self.simulated,
                "success": self.success, "verified": self.verified, "steps": self.steps,
                "invalid_actions": self.invalid_actions,
                "actions": self.actions, "observations": self.observations}


def task_options(templates: Sequence[str], seed: int) -> dict[str, Any] | None:
    """The reset options that pick the seed's template among `templates` (None: any template)."""
    return {"template": templates[seed % len(templates)]} if templates else None


class AgentPolicy:
    """The LM agent over the episodes' token streams: one batched `generate` for every running one."""

    def __init__(self, agent: LMAgent, episodes: Sequence[Episode], temperature: float | None) -> None:
        self.agent, self.episodes, self.temperature = agent, episodes, temperature

    def act(self, active: Sequence[int]) -> list[str]:
        return self.agent.act([self.episodes[k].tokens for k in active], self.temperature)

    def observe(self, index: int, action: str, observation: str, last: bool) -> None:
        if not last:
            self.agent.observe(self.episodes[index].tokens, observation)


def play(agent: LMAgent, envs: Sequence[TextEnv], seeds: Sequence[int], *, max_steps: int,
         templates: Sequence[str] = (), temperature: float | None = None) -> list[Episode]:
    """One episode per env (seeded by `seeds`), all stepping together; returns them finished.

    `envs` stay open (the caller owns them); after the episodes each success is re-judged from
    the final state (`TextEnv.verify`: None where an env cannot re-judge, as a simulator)."""
    if len(envs) != len(seeds):
        raise ValueError(f"{len(envs)} envs but {len(seeds)} seeds")
    vector = TextVectorEnv(envs, max_episode_steps=max_steps)
    options = {"env_options": [task_options(templates, seed) for seed in seeds]}
    observations, infos = vector.reset(seed=list(seeds), options=options)
    episodes: list[Episode] = []
    for i, (env, seed) in enumerate(zip(envs, seeds)):
        info, task = infos["step_info"][i], env.task
        episodes.append(Episode(seed, info.get("task_id") or (task.task_id if task else str(seed)),
                                info.get("template") or (task.setup.get("template") if task else None),
                                agent.start(observations[i]), simulated=bool(info.get("simulated")),
                                observations=[observations[i]]))
    for step in run_episodes(vector, AgentPolicy(agent, episodes, temperature)):
        episode = episodes[step.index]
        episode.actions.append(step.action)
        episode.observations.append(step.observation)
        episode.success = episode.success or solved(step.reward, step.info)
        episode.invalid_actions += invalid_action(step.action, step.info) and not step.info.get("ended_by_agent", False)
    for env, episode in zip(envs, episodes):  # reward-hacking check: each success re-judged from the final state
        if episode.success:
            episode.verified = env.verify()
    return episodes


def verified_share(episodes: Sequence[Episode]) -> float:
    """Share of the real successes that the checker confirmed afresh from the final state (an
    answer-checked success counts as confirmed: nothing else decided it); 1.0 with no success,
    as nothing unconfirmed was counted. Below 1.0 means a reward the final state does not back."""
    successes = [e for e in episodes if e.success and not e.simulated]
    return sum(e.verified is not False for e in successes) / len(successes) if successes else 1.0


def summarise(episodes: Sequence[Episode]) -> dict[str, float]:
    """Task success (and the share of it the final state confirms), steps and invalid-action
    rate over finished episodes."""
    n = len(episodes)
    actions = sum(e.steps for e in episodes)
    return {"success_rate": sum(e.success for e in episodes) / n if n else 0.0,
            "verified_share": verified_share(episodes),
            "mean_steps": actions / n if n else 0.0,
            "invalid_action_rate": sum(e.invalid_actions for e in episodes) / actions if actions else 0.0,
            "episodes": float(n), "env_steps": float(actions)}
