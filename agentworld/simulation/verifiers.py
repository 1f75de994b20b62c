"""Verifiers: how a WorldModelEnv decides that a simulated episode solved its task.

A real environment rewards 1.0 when its checker passes and ends the episode there. A
WorldModelEnv has no real state to check, so it is given a verifier and returns reward and
termination from it the same way (`WorldModelEnv(..., verifier=...)`), asked after every step as a
real env's checker is (the env does not know its step limit: that is Gymnasium's `TimeLimit`'s):

- `ReferenceVerifier`: solved once the task's reference solution's final,
  state-changing command appears among the agent's actions (whitespace-normalised). Exact but
  narrow: another correct command does not count.
- `WorldModelVerifier`: the world model simulates the task's checker (`<check> && echo PASS ||
  echo FAIL`, given the whole simulated history) and success is PASS. As good as the world
  model; it costs one more generation per step of a task that has a checker.
- `ObservationVerifier`: solved when the world model's predicted observation carries what the
  real environment prints at the step that solves the task (the domain's `success_marker`, e.g.
  TextWorld's closing banner after a full score). For domains whose real answer announces
  success, with no extra generation; the predicted state decides, not the agent's command (a
  command that itself contains the marker solves nothing, so an agent cannot have it echoed).

Without a verifier a WorldModelEnv rewards 0 and only the end action or the step limit end an
episode (synthetic data collection needs no verdict).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from agentworld.data.prompts import parse_observation
from agentworld.domains import get_domain

if TYPE_CHECKING:
    from agentworld.simulation.env import WorldModelEnv


def normalise(command: str) -> str:
    return " ".join(command.split())


class Verifier(Protocol):
    name: str

    def verdicts(self, envs: Sequence[WorldModelEnv]) -> list[bool]:
        """Solved or not, for each env's current episode (its task and simulated history)."""
        ...


class ReferenceVerifier:
    name = "reference"

    def verdicts(self, envs: Sequence[WorldModelEnv]) -> list[bool]:
        out = []
        for env in envs:
            solution = env.task.solution if env.task else []
            out.append(bool(solution) and normalise(solution[-1]) in {normalise(a) for a, _ in env.history})
        return out


class WorldModelVerifier:
    name = "world_model"

    def verdicts(self, envs: Sequence[WorldModelEnv]) -> list[bool]:
        checks = [env.task.setup.get("check") if env.task else None for env in envs]
        todo = [i for i, check in enumerate(checks) if check]
        verdict = [False] * len(envs)
        if not todo:
            return verdict
        examples = [envs[i].example(f"{checks[i]} && echo PASS || echo FAIL") for i in todo]
        generations = envs[todo[0]].backend.generate(examples, temperature=0.0)
        for i, generation in zip(todo, generations):
            observation, _ = parse_observation(generation)
            verdict[i] = "PASS" in observation and "FAIL" not in observation
        return verdict


class ObservationVerifier:
    name = "observation"

    def verdicts(self, envs: Sequence[WorldModelEnv]) -> list[bool]:
        return [self.solved(env.domain, *env.history[-1]) if env.history else False for env in envs]

    @staticmethod
    def solved(domain: str, action: str, observation: str) -> bool:
        marker = success_marker(domain)
        return bool(re.search(marker, observation)) and not re.search(marker, action)


def success_marker(domain: str) -> str:
    """The domain's `success_marker`, or a clear error naming the setting to change."""
    marker = get_domain(domain).success_marker
    if marker is None:
        raise ValueError(f"the observation verifier (agent.rl.sim_success, a suite's simulator.verifier) needs a "
                         f"domain whose real observations announce success; {domain} has no success_marker, "
                         f"use reference or world_model")
    return marker


def make_verifier(name: str) -> Verifier:
    """The verifier named by `agent.rl.sim_success`."""
    if name == "reference":
        return ReferenceVerifier()
    if name == "world_model":
        return WorldModelVerifier()
    if name == "observation":
        return ObservationVerifier()
    raise ValueError(f"agent.rl.sim_success: {name!r} is not one of reference, world_model, observation")
