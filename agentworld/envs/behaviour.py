"""Behaviour policies shared by every domain: scripted, exploratory and erroneous.

Expert-only data teaches a world model only the happy path (Word2World), so collection mixes
three kinds of agent. Their logic is the same everywhere; what differs per domain is the
vocabulary of actions, which each domain supplies as `DomainActions`:
- `scripted`: the task's solution, with the state-neutral inspection steps real agents interleave;
- `exploratory`: valid but aimless actions over the episode's objects, reading names from what
  it observes;
- `erroneous`: mostly invalid or failing actions, mixed with valid exploration and real
  solution steps, so the world model learns what errors look like.

A policy is built per episode; `act(observation, history, rng)` is deterministic given the rng.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Protocol

from agentworld.envs.base import Task

History = Sequence[tuple[str, str]]
POLICY_NAMES = ("scripted", "exploratory", "erroneous")


class Policy(Protocol):
    name: str

    def act(self, observation: str, history: History, rng: random.Random) -> str: ...


class DomainActions(Protocol):
    """A domain's action vocabulary for one episode."""

    #: What a scripted agent types once its solution is spent (e.g. `submit`, `look`).
    done_action: str

    def observe(self, observation: str) -> None:
        """Pick up names (files, objects, exits) from what the environment printed."""

    def inspect(self, rng: random.Random) -> str:
        """A state-neutral look around (ls, look, inventory)."""

    def explore(self, rng: random.Random) -> str:
        """A valid action that does not aim at the goal."""

    def mistake(self, rng: random.Random) -> str:
        """An invalid or failing action: typo, wrong flag, absent object, broken syntax."""

    def reply(self, observation: str, rng: random.Random, policy: str) -> str | None:
        """An answer the environment is waiting for (e.g. a disambiguation prompt), or None."""


class ScriptedPolicy:
    """Follows the task's solution, sometimes pausing to inspect first."""

    name = "scripted"

    def __init__(self, solution: Sequence[str], actions: DomainActions, inspect_prob: float) -> None:
        self.solution, self.actions, self.inspect_prob = list(solution), actions, inspect_prob
        self._next = 0

    def act(self, observation: str, history: History, rng: random.Random) -> str:
        if self._next >= len(self.solution):
            return self.actions.done_action
        if history and rng.random() < self.inspect_prob:
            return self.actions.inspect(rng)
        self._next += 1
        return self.solution[self._next - 1]


class ExploratoryPolicy:
    """Random valid actions over the episode's vocabulary; never aims at the goal."""

    name = "exploratory"

    def __init__(self, actions: DomainActions) -> None:
        self.actions = actions

    def act(self, observation: str, history: History, rng: random.Random) -> str:
        answer = self.actions.reply(observation, rng, self.name)
        if answer is not None:
            return answer
        self.actions.observe(observation)
        return self.actions.explore(rng)


class ErroneousPolicy:
    """Mostly mistakes, with some valid exploration and some real solution steps in between."""

    name = "erroneous"

    def __init__(self, solution: Sequence[str], actions: DomainActions, error_prob: float, solve_prob: float) -> None:
        self.solution, self.actions = list(solution), actions
        self.error_prob, self.solve_prob = error_prob, solve_prob
        self._next = 0

    def act(self, observation: str, history: History, rng: random.Random) -> str:
        self.actions.observe(observation)
        answer = self.actions.reply(observation, rng, self.name)
        if answer is not None:
            return answer
        roll = rng.random()
        if roll < self.error_prob:
            return self.actions.mistake(rng)
        if roll < self.error_prob + self.solve_prob and self._next < len(self.solution):
            self._next += 1
            return self.solution[self._next - 1]
        return self.actions.explore(rng)


def behaviour_policy(
    name: str,
    task: Task,
    actions: Callable[[Task], DomainActions],
    *,
    inspect_prob: float = 0.2,
    error_prob: float = 0.5,
    solve_prob: float = 0.25,
) -> Policy:
    """A fresh policy `name` for one episode of `task`, speaking the domain's `actions`."""
    if name == "scripted":
        return ScriptedPolicy(task.solution, actions(task), inspect_prob)
    if name == "exploratory":
        return ExploratoryPolicy(actions(task))
    if name == "erroneous":
        return ErroneousPolicy(task.solution, actions(task), error_prob, solve_prob)
    raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(POLICY_NAMES)}")
