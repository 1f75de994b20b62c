"""Task success: from the real environment's own checker, or judged inside the simulator.

A real environment rewards 1.0 when its checker passes. A WorldModelEnv has no checker, so a
simulated episode is judged by one of:
- `ReferenceVerifier`: the task's reference solution was executed — its final, state-changing
  command appears among the agent's actions (whitespace-normalised). Exact but narrow: another
  correct command does not count.
- `WorldModelVerifier`: the world model simulates the task's checker after the episode
  (`<check> && echo PASS || echo FAIL`, given the whole simulated history) and success is PASS.
  As good as the world model; the demo model's judgement is close to noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agentworld.data.prompts import parse_observation
from agentworld.simulation.env import WorldModelEnv


def normalise(command: str) -> str:
    return " ".join(command.split())


class SimSuccess(Protocol):
    name: str

    def judge(self, envs: Sequence[WorldModelEnv], actions: Sequence[Sequence[str]]) -> list[bool]: ...


class ReferenceVerifier:
    name = "reference"

    def judge(self, envs: Sequence[WorldModelEnv], actions: Sequence[Sequence[str]]) -> list[bool]:
        out = []
        for env, taken in zip(envs, actions):
            solution = env.task.solution if env.task else []
            out.append(bool(solution) and normalise(solution[-1]) in {normalise(a) for a in taken})
        return out


class WorldModelVerifier:
    name = "world_model"

    def judge(self, envs: Sequence[WorldModelEnv], actions: Sequence[Sequence[str]]) -> list[bool]:
        checks = [env.task.setup.get("check") if env.task else None for env in envs]
        todo = [i for i, check in enumerate(checks) if check]
        if not todo:
            return [False] * len(envs)
        examples = [envs[i].example(f"{checks[i]} && echo PASS || echo FAIL") for i in todo]
        generations = envs[todo[0]].backend.generate(examples, temperature=0.0)
        verdict = [False] * len(envs)
        for i, generation in zip(todo, generations):
            observation, _ = parse_observation(generation)
            verdict[i] = "PASS" in observation and "FAIL" not in observation
        return verdict


def sim_success(name: str) -> SimSuccess:
    if name == "reference":
        return ReferenceVerifier()
    if name == "world_model":
        return WorldModelVerifier()
    raise ValueError(f"agent.rl.sim_success: {name!r} is not one of reference, world_model")


def solved(reward: float, info: dict) -> bool:
    """A real step that solved its task: the env's `won` flag where it has one (TextWorld scores
    points before the game is won), else a positive reward (the terminal checker passed)."""
    return bool(info["won"]) if "won" in info else reward > 0


def invalid_action(action: str, info: dict) -> bool:
    """An action the real environment rejected: empty, failed (non-zero exit), timed out, or a
    game command that was not admissible where it was given (TextWorld)."""
    return (not action.strip() or bool(info.get("timed_out")) or int(info.get("exit_code", 0) or 0) != 0
            or info.get("admissible") is False)
