"""Play episodes of one agent against any text environments — real ones or WorldModelEnvs.

The loop is the same for both: reset, then act for every running episode in one batched
`generate`, then step. WorldModelEnvs step together through one batched world-model
generation (`step_many`); real environments step one by one. A real episode's success is the
environment's reward; a simulated one's is judged afterwards (agentworld/agents/success.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentworld.agents.policy import EpisodeTokens, LMAgent
from agentworld.agents.success import SimSuccess, invalid_action, solved
from agentworld.envs.base import TextEnv
from agentworld.simulation.env import WorldModelEnv, step_many


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


def play(agent: LMAgent, envs: Sequence[TextEnv], seeds: Sequence[int], *, max_steps: int,
         templates: Sequence[str] = (), temperature: float | None = None,
         judge: SimSuccess | None = None) -> list[Episode]:
    """One episode per env (seeded by `seeds`), all stepping together; returns them finished."""
    if len(envs) != len(seeds):
        raise ValueError(f"{len(envs)} envs but {len(seeds)} seeds")
    simulated = [isinstance(env, WorldModelEnv) for env in envs]
    if any(simulated) and not all(simulated):
        raise ValueError("play: mix of real and simulated envs; play them in separate calls")
    episodes: list[Episode] = []
    for env, seed in zip(envs, seeds):
        observation, info = env.reset(seed=seed, options=task_options(templates, seed))
        task = env.task
        episodes.append(Episode(seed, info.get("task_id") or (task.task_id if task else str(seed)),
                                info.get("template") or (task.setup.get("template") if task else None),
                                agent.start(observation), simulated=simulated[0], observations=[observation]))
    running = list(range(len(envs)))
    for step in range(max_steps):
        if not running:
            break
        actions = agent.act([episodes[i].tokens for i in running], temperature)
        if simulated[0]:
            results = step_many([envs[i] for i in running], actions)  # type: ignore[misc]
        else:
            results = [envs[i].step(action) for i, action in zip(running, actions)]
        still = []
        for i, action, (observation, reward, terminated, truncated, info) in zip(running, actions, results):
            episode = episodes[i]
            episode.actions.append(action)
            episode.observations.append(observation)
            if not episode.simulated:
                episode.success = episode.success or solved(reward, info)
                episode.invalid_actions += invalid_action(action, info) and not info.get("ended_by_agent", False)
            if terminated or truncated or step == max_steps - 1:
                continue
            agent.observe(episode.tokens, observation)
            still.append(i)
        running = still
    if not simulated[0]:  # reward-hacking check: each real success re-judged from the final state
        for env, episode in zip(envs, episodes):
            if episode.success:
                episode.verified = env.verify()
    if simulated[0] and judge is not None:
        verdicts = judge.judge(envs, [e.actions for e in episodes])  # type: ignore[arg-type]
        for episode, verdict in zip(episodes, verdicts):
            episode.success = verdict
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
