"""WM2Real (Word2World): do the actions an agent chose inside the world model work for real?

The agent plays held-out tasks inside WorldModelEnvs, where success is the simulator's verifier's
verdict (agentworld/simulation/verifiers.py). The same action sequences are then replayed, action by
action, in fresh real environments reset with the same seeds (the same tasks), where the real
checker decides. Reported side by side: the success rate the simulator claimed, the real success
of the very same actions, and how often the two verdicts agree. A simulator that claims
successes the real environment refuses would teach an agent to exploit it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentworld.agents.episodes import Episode, play, task_options
from agentworld.agents.policy import LMAgent
from agentworld.agents.success import solved
from agentworld.envs.base import TextEnv
from agentworld.envs.engine import ReplayPolicy, run_episodes
from agentworld.envs.vector import TextVectorEnv
from agentworld.simulation.env import WorldModelEnv


def replay(episode: Episode, env: TextEnv, templates: Sequence[str]) -> bool:
    """The real environment's verdict on a simulated episode's actions (same seed, same task)."""
    vector = TextVectorEnv([env], max_episode_steps=len(episode.actions))
    vector.reset(seed=[episode.seed], options={"env_options": [task_options(templates, episode.seed)]})
    steps = run_episodes(vector, ReplayPolicy([episode.actions]))
    return any([solved(step.reward, step.info) for step in steps])


def wm2real(agent: LMAgent, make_sim: Callable[[], WorldModelEnv], make_real: Callable[[], TextEnv],
            seeds: Sequence[int], *, max_steps: int, templates: Sequence[str],
            batch: int = 10) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Greedy simulated episodes on `seeds` (`make_sim`'s envs carry the verifier), each
    replayed for real; rates and one row per episode."""
    rows: list[dict[str, Any]] = []
    sims = [make_sim() for _ in range(min(batch, len(seeds)))]
    real = make_real()
    try:
        for start in range(0, len(seeds), len(sims)):
            chunk = seeds[start:start + len(sims)]
            for episode in play(agent, sims[:len(chunk)], chunk, max_steps=max_steps, templates=templates,
                                temperature=0.0):
                rows.append({"seed": episode.seed, "task_id": episode.task_id, "template": episode.template,
                             "actions": episode.actions, "sim_success": episode.success,
                             "real_success": replay(episode, real, templates)})
    finally:
        real.close()
    n = len(rows)
    return ({"sim_success_rate": sum(r["sim_success"] for r in rows) / n if n else 0.0,
             "real_success_rate": sum(r["real_success"] for r in rows) / n if n else 0.0,
             "agreement": sum(r["sim_success"] == r["real_success"] for r in rows) / n if n else 0.0,
             "false_success_rate": sum(r["sim_success"] and not r["real_success"] for r in rows) / n if n else 0.0,
             "episodes": float(n)}, rows)
