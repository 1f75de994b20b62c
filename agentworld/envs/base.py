"""The one text-environment protocol every domain implements (Gymnasium-style).

`reset(seed=None, options=None) -> (observation, info)` and
`step(action) -> (observation, reward, terminated, truncated, info)`.
We subclass `gymnasium.Env` so agents and wrappers from that ecosystem work unchanged; the
observation and action spaces are free text.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from gymnasium import spaces

#: What `step` returns: observation, reward, terminated, truncated, info.
StepResult = tuple[str, float, bool, bool, dict[str, Any]]

TEXT_SPACE_MAX = 1_000_000
TEXT_CHARSET = frozenset(chr(i) for i in range(32, 127)) | {"\n", "\t"}


@dataclass(frozen=True)
class Task:
    """One episode's goal: an instruction plus what the domain needs to set it up and check it."""

    task_id: str
    domain: str
    instruction: str
    setup: dict[str, Any] = field(default_factory=dict)
    solution: list[str] = field(default_factory=list)


class TextEnv(gym.Env[str, str]):
    """Base class of real environments and of the WorldModelEnv."""

    domain: str = "base"
    env_version: str = "0"
    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self) -> None:
        #: The episode's task, set by `reset`: behaviour policies and checkers read it.
        self.task: Task | None = None
        # min_length 0: a command that prints nothing answers with the empty string.
        self.observation_space = spaces.Text(max_length=TEXT_SPACE_MAX, min_length=0, charset=TEXT_CHARSET)
        self.action_space = spaces.Text(max_length=TEXT_SPACE_MAX, charset=TEXT_CHARSET)

    @property
    def env_id(self) -> str:
        return f"{self.domain}-v{self.env_version}"

    @abstractmethod
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode; `options={"task": Task}` picks the task, else one is drawn from `seed`.

        Subclasses call `super().reset(seed=seed)` first: it seeds `np_random` (Gymnasium's
        `Env.reset`), from which a reset without a seed draws its task, so `reset(seed=s)`
        followed by `reset()` repeats the same episodes every time."""
        super().reset(seed=seed, options=options)
        return "", {}

    @abstractmethod
    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply the agent's action and return what the environment answers."""

    @classmethod
    def step_batch(cls, envs: Sequence[TextEnv], actions: Sequence[str]) -> list[StepResult]:
        """Step several envs of this class at once, one action each. Real environments cannot
        batch, so they step one after the other; the WorldModelEnv answers all of them with one
        batched generation."""
        return [env.step(action) for env, action in zip(envs, actions)]

    def close(self) -> None:  # noqa: D401 - gym signature
        """Release processes, temp dirs, connections."""

    def verify(self) -> bool | None:
        """After an episode: does the task's outcome hold in the final state, judged afresh by the
        checker from the environment's own state (no cached verdict)? None where this env
        cannot re-judge (its verdict was an answer, or it has no checker)."""
        return None

    def episode_task(self, seed: int | None, options: dict[str, Any] | None,
                     generate: Callable[[int, dict[str, Any]], Task]) -> Task:
        """The episode's task: `options["task"]` when given, else `generate(task_seed, options)`.

        The task seed is the episode seed, or drawn from the env's RNG when reset() got none,
        so `reset(seed=s)` always means the same task.
        """
        options = options or {}
        task = options.get("task")
        if task is None:
            task_seed = seed if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
            task = generate(task_seed, options)
        if not isinstance(task, Task) or task.domain != self.domain:
            raise ValueError(f"options['task'] must be a {self.domain} Task, got {task!r}")
        return task


def pick_template(task_seed: int, options: dict[str, Any], templates: Sequence[str] | None) -> str | None:
    """`options["template"]`, else the seed's pick among the env's `templates`, else None (any)."""
    template = options.get("template")
    if template is None and templates:
        template = templates[task_seed % len(templates)]
    return template
