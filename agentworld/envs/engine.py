"""run_episodes: the one episode loop. A policy chooses the actions of a TextVectorEnv's running
episodes, the vector steps them together, and every step comes back as a `Step`.

Everything that plays episodes is a policy over this loop: behaviour policies collecting real
data and synthesising data in the world model (agentworld/data/episodes.py), a language-model
agent in evaluation and RL (agentworld/agents/episodes.py), and a `ReplayPolicy` that replays
recorded actions (WM2Real's replay of simulated actions in the real environment; the
evaluation's free-running rollouts of recorded episodes in the simulator,
agentworld/evaluation/rollout.py). The caller
resets the vector (it needs the first observations and tasks to set its policy up) and reads
rewards, rows or tokens from the steps.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from agentworld.envs.base import StepResult
from agentworld.envs.vector import TextVectorEnv, step_result


class EpisodePolicy(Protocol):
    def act(self, active: Sequence[int]) -> list[str]:
        """One action for each running episode in `active` (sub-env indices), chosen together so a
        language model can batch them."""
        ...

    def observe(self, index: int, action: str, observation: str, last: bool) -> None:
        """What sub-env `index` answered to `action`; `last` when its episode ended with it."""
        ...


@dataclass(frozen=True)
class Step:
    index: int  # which sub-env
    turn: int  # 0-based step of its episode
    action: str
    result: StepResult
    last: bool  # the episode ended here: terminated or truncated (the step limit truncates)

    @property
    def observation(self) -> str:
        return self.result[0]

    @property
    def reward(self) -> float:
        return self.result[1]

    @property
    def info(self) -> dict:
        return self.result[4]


def run_episodes(vector: TextVectorEnv, policy: EpisodePolicy) -> Iterator[Step]:
    """Step `vector`'s running episodes with `policy` until each terminates or is truncated (every
    sub-env needs a step limit: `TextVectorEnv(..., max_episode_steps=N)` or its registered one)."""
    unlimited = [k for k, limit in enumerate(vector.max_episode_steps) if limit is None]
    if unlimited:
        raise ValueError(f"sub-envs {unlimited} have no step limit: give TextVectorEnv max_episode_steps "
                         "(or wrap the env in gymnasium.wrappers.TimeLimit)")
    turns = [0] * vector.num_envs
    while True:
        active = [int(k) for k in vector.running.nonzero()[0]]
        if not active:
            return
        actions = [""] * vector.num_envs
        for k, action in zip(active, policy.act(active), strict=True):
            actions[k] = action
        stepped = vector.step(actions)
        for k in active:
            result = step_result(*stepped, index=k)
            last = result[2] or result[3]
            yield Step(k, turns[k], actions[k], result, last)
            turns[k] += 1
            policy.observe(k, actions[k], result[0], last)


class ReplayPolicy:
    """Replays recorded action sequences, one per sub-env; run it for at most the shortest
    sequence's length of steps."""

    def __init__(self, actions: Sequence[Sequence[str]]) -> None:
        self.actions = [list(a) for a in actions]
        self.turns = [0] * len(self.actions)

    def act(self, active: Sequence[int]) -> list[str]:
        out = []
        for k in active:
            out.append(self.actions[k][self.turns[k]])
            self.turns[k] += 1
        return out

    def observe(self, index: int, action: str, observation: str, last: bool) -> None:
        return None
