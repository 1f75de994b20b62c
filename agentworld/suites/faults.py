"""FaultInjectingEnv: an agent test's faults, injected at a configured rate, in any environment.

A faulted step never reaches the environment inside (simulated or real): the agent's action is
not carried out and the agent sees the domain's error for the fault (`Domain.fault_observation`,
e.g. `bash: permission denied`, or the MCP error JSON). Whether a step is faulted is drawn from
the episode's seed, so a rerun faults the same steps, and the same seeds fault alike in the
simulator and the real environment. The step still counts toward the step limit, as a failed tool
call costs a turn.

It is a TextEnv holding another (not a `gymnasium.Wrapper`) so that a `TextVectorEnv` of them
still steps the inner envs in one batch (`step_batch`): the simulator's one batched generation.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from agentworld.domains import get_domain
from agentworld.envs.base import StepResult, TextEnv


class FaultInjectingEnv(TextEnv):
    def __init__(self, env: TextEnv, kinds: Sequence[str], rate: float) -> None:
        super().__init__()
        if not kinds or not 0.0 < rate <= 1.0:
            raise ValueError(f"faults need at least one kind and a rate in (0, 1], got {list(kinds)} at {rate}")
        self.env, self.kinds, self.rate = env, tuple(kinds), rate
        self.domain, self.env_version = env.domain, env.env_version
        self.observation_space, self.action_space = env.observation_space, env.action_space
        self._fault_observation = get_domain(env.domain).fault_observation
        self._rng = random.Random(0)

    @property
    def task(self):  # type: ignore[override]
        return self.env.task

    @task.setter
    def task(self, value) -> None:  # TextEnv.__init__ sets it; the inner env owns it
        pass

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        self._rng = random.Random(f"faults:{seed}")
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str) -> StepResult:
        return self.step_batch([self], [action])[0]

    @classmethod
    def step_batch(cls, envs: Sequence[TextEnv], actions: Sequence[str]) -> list[StepResult]:
        """Fault some steps, step the rest of the inner envs together."""
        faulted: dict[int, str] = {}
        for i, env in enumerate(envs):
            assert isinstance(env, FaultInjectingEnv)
            if env._rng.random() < env.rate:
                faulted[i] = env._rng.choice(env.kinds)
        passed = [i for i in range(len(envs)) if i not in faulted]
        inner = [envs[i].env for i in passed]  # type: ignore[attr-defined]
        stepped = type(inner[0]).step_batch(inner, [actions[i] for i in passed]) if inner else []
        results: list[StepResult] = [None] * len(envs)  # type: ignore[list-item]
        for i, result in zip(passed, stepped):
            results[i] = result
        for i, kind in faulted.items():
            env = envs[i]
            observation = env._fault_observation(kind, actions[i])  # type: ignore[attr-defined]
            results[i] = (observation, 0.0, False, False,
                          {"fault": kind, "simulated": _simulated(env.env)})  # type: ignore[attr-defined]
        return results

    def verify(self) -> bool | None:
        return self.env.verify()

    def close(self) -> None:
        self.env.close()


def _simulated(env: TextEnv) -> bool:
    from agentworld.simulation.env import WorldModelEnv

    return isinstance(env, WorldModelEnv)
